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

# tiny_models DIR CTX: a small corpus DIR/c.txt and three tiny models trained on it in
# a few steps: DIR/m.gguf (300 tokens), DIR/d.gguf (a draft with m's tokenizer) and
# DIR/other.gguf (another tokenizer, 280 tokens), with context CTX.
tiny_models() {
    i=0
    while [ $i -lt 30 ]; do
        printf 'Call me Ishmael. Some years ago, never mind how long precisely, I thought I would sail about.<|endoftext|>' >> "$1/c.txt"
        i=$((i + 1))
    done
    TINY="--dim 16 --layers 1 --heads 2 --ctx $2 --batch 2 --eval-tokens 64 --threads 1 --steps 3"
    "$SPECDEC" train --corpus "$1/c.txt" --vocab 300 $TINY --out "$1/m.gguf" >/dev/null 2>&1 || bad "train m.gguf"
    "$SPECDEC" train --corpus "$1/c.txt" --tokenizer "$1/m.gguf" $TINY --seed 9 --out "$1/d.gguf" >/dev/null 2>&1 || bad "train d.gguf"
    "$SPECDEC" train --corpus "$1/c.txt" --vocab 280 $TINY --out "$1/other.gguf" >/dev/null 2>&1 || bad "train other.gguf"
}
