#!/bin/sh
# Runs every cmocka test binary in $1/tests, then the command-line tests.
# Prints one closing line "N passed, N failed" over the test programs.
BUILD=${1:-build}
pass=0; fail=0; failed=""
for t in "$BUILD"/tests/test_*; do
    case "$t" in *.o|*.d) continue ;; esac
    [ -x "$t" ] || continue
    t0=$(date +%s)
    if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed="$failed $(basename "$t")"; fi
    echo "== $(basename "$t"): $(( $(date +%s) - t0 )) s"
done
for t in tests/cli/*.sh; do
    [ "$(basename "$t")" = lib.sh ] && continue
    [ -f "$t" ] || continue
    t0=$(date +%s)
    if sh "$t" "$BUILD/specdec"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed="$failed $(basename "$t")"; fi
    echo "== $(basename "$t"): $(( $(date +%s) - t0 )) s"
done
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
