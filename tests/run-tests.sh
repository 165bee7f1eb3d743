#!/bin/sh
# Runs the cmocka test binary $1/tests/test_X of every tests/test_X.c, then the
# command-line tests tests/cli/*.sh. A binary that is missing fails (make test builds
# them all), and so does a run that finds no test program or no script at all. A
# program that skips all or part of its checks says so in a line of its output, cmocka's
# "[  SKIPPED ]", "NAME: skipped: why" (test_cuda without a GPU, cli slurm without
# Slurm) or "skipped: why" (test_gemm's print_message on a machine without AVX-512), and
# is counted as skipped, not passed (unless it also fails).
# Prints one closing line "N passed, N failed, N skipped" over the test programs, after
# the kernel sets the kernel tests ran ("kernel sets: ran generic avx2 avx512; not on
# this CPU: neon", as test_gemm, test_kquant and test_model print it).
# TEST_SKIP: lines "NAME why" (NAME test_X or X.sh) of programs not run here, each
# printed as "NAME: skipped: why" and counted as skipped (tests/run-arm.sh: what an
# emulator cannot run).
# run-tests.sh --classify LOG RC: how one program with that output and exit status counts
# (passed, failed or skipped; tests/cli/tally.sh checks the rule).
classify() { # LOG RC
    if [ "$2" != 0 ]; then echo failed
    elif grep -Eq '^\[  SKIPPED \]|^([A-Za-z0-9_ -]+: )?skipped: ' "$1"; then echo skipped
    else echo passed; fi
}
if [ "${1:-}" = --classify ]; then classify "$2" "$3"; exit; fi
BUILD=${1:-build}
pass=0; fail=0; skip=0; failed=""; skipped=""
LOG=$(mktemp -d) || exit 1
trap 'rm -rf "$LOG"' EXIT
# run NAME command...: the command's output shown as it comes and kept; its verdict counted
run() {
    name=$1; shift
    why=$(printf '%s\n' "${TEST_SKIP:-}" | sed -n "s/^$name //p" | head -1)
    if [ -n "$why" ]; then
        echo "$name: skipped: $why"
        skip=$((skip + 1)); skipped="$skipped $name"
        return
    fi
    t0=$(date +%s)
    { "$@" 2>&1; echo $? > "$LOG/rc"; } | tee "$LOG/out"
    case $(classify "$LOG/out" "$(cat "$LOG/rc")") in
    failed) fail=$((fail + 1)); failed="$failed $name" ;;
    skipped) skip=$((skip + 1)); skipped="$skipped $name" ;;
    *) pass=$((pass + 1)) ;;
    esac
    grep '^kernel sets: ' "$LOG/out" | tail -n 1 >> "$LOG/sets"
    echo "== $name: $(( $(date +%s) - t0 )) s"
}
nbin=0
for src in tests/test_*.c; do
    [ -f "$src" ] || continue
    name=$(basename "$src" .c); nbin=$((nbin + 1))
    if [ -x "$BUILD/tests/$name" ]; then
        run "$name" "$BUILD/tests/$name"
    else
        echo "run-tests: $BUILD/tests/$name is missing (make test builds it)"
        fail=$((fail + 1)); failed="$failed $name"
    fi
done
nsh=0
for t in tests/cli/*.sh; do
    [ "$(basename "$t")" = lib.sh ] && continue
    [ -f "$t" ] || continue
    nsh=$((nsh + 1))
    run "$(basename "$t")" sh "$t" "$BUILD/specdec"
done
if [ "$nbin" = 0 ] || [ "$nsh" = 0 ]; then
    echo "run-tests: found $nbin test programs (tests/test_*.c) and $nsh scripts (tests/cli/*.sh); run it from the repository's root"
    fail=$((fail + 1)); failed="$failed (none-found)"
fi
[ -s "$LOG/sets" ] && sort -u "$LOG/sets"
[ -n "$skipped" ] && echo "skipped:$skipped"
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
