# Shared by the command-line test scripts (sourced, not run: run-tests.sh skips it).
# expect CODE PATTERN -- command...: the exit code is CODE and PATTERN (grep) is in
# stdout+stderr; counts into pass/fail. finish NAME prints the closing line.
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect() {
    code=$1; pat=$2; shift 3
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" != "$code" ]; then bad "exit $rc (want $code): $*"; echo "$out" | head -5; return; fi
    if [ -n "$pat" ] && ! printf '%s' "$out" | grep -q -- "$pat"; then
        bad "no '$pat' in output of: $*"; echo "$out" | head -5; return; fi
    ok
}
finish() {
    echo "$1: $pass passed, $fail failed"
    [ "$fail" = 0 ]
}
