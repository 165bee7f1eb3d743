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
# TEST_BESIDE (default "arch.sh"): scripts of tests/cli run beside the others, started
# first: most of the tests run on one core, and arch.sh alone took 264 of make test's 668
# seconds on 2 cores. Their output is shown, and counted, at the end; TEST_BESIDE= runs
# everything in turn.
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
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$LOG"' EXIT
BESIDE=${TEST_BESIDE-arch.sh}
# skipped NAME: 0 when TEST_SKIP names it (said and counted)
skipped_by_env() {
    why=$(printf '%s\n' "${TEST_SKIP:-}" | sed -n "s/^$1 //p" | head -1)
    [ -n "$why" ] || return 1
    echo "$1: skipped: $why"
    skip=$((skip + 1)); skipped="$skipped $1"
}
# count NAME OUT RC: a finished program's verdict
count() {
    case $(classify "$2" "$3") in
    failed) fail=$((fail + 1)); failed="$failed $1" ;;
    skipped) skip=$((skip + 1)); skipped="$skipped $1" ;;
    *) pass=$((pass + 1)) ;;
    esac
    grep '^kernel sets: ' "$2" | tail -n 1 >> "$LOG/sets"
}
# run NAME command...: the command's output shown as it comes and kept; its verdict counted
run() {
    name=$1; shift
    skipped_by_env "$name" && return
    t0=$(date +%s)
    { "$@" 2>&1; echo $? > "$LOG/rc"; } | tee "$LOG/out"
    count "$name" "$LOG/out" "$(cat "$LOG/rc")"
    echo "== $name: $(( $(date +%s) - t0 )) s"
}
# beside NAME command...: started now, in the background, its output kept for collect
beside() {
    name=$1; shift
    skipped_by_env "$name" && return
    echo "== $name: started beside the others (its output at the end)"
    ( t0=$(date +%s); "$@" > "$LOG/$name.out" 2>&1; echo $? > "$LOG/$name.rc"
      echo "$(( $(date +%s) - t0 ))" > "$LOG/$name.s" ) &
    started="$started $name"
}
# collect: wait for those begun beside, then show and count each
collect() {
    wait
    for name in $started; do
        cat "$LOG/$name.out"
        count "$name" "$LOG/$name.out" "$(cat "$LOG/$name.rc" 2>/dev/null || echo 1)"
        echo "== $name: $(cat "$LOG/$name.s" 2>/dev/null) s (beside the others)"
    done
}
started=""
for name in $BESIDE; do
    t=tests/cli/$name
    if [ -f "$t" ]; then beside "$name" sh "$t" "$BUILD/specdec"; else echo "run-tests: TEST_BESIDE: no $t"; fail=$((fail + 1)); failed="$failed $name"; fi
done
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
    case " $BESIDE " in *" $(basename "$t") "*) continue ;; esac
    run "$(basename "$t")" sh "$t" "$BUILD/specdec"
done
collect
if [ "$nbin" = 0 ] || [ "$nsh" = 0 ]; then
    echo "run-tests: found $nbin test programs (tests/test_*.c) and $nsh scripts (tests/cli/*.sh); run it from the repository's root"
    fail=$((fail + 1)); failed="$failed (none-found)"
fi
[ -s "$LOG/sets" ] && sort -u "$LOG/sets"
[ -n "$skipped" ] && echo "skipped:$skipped"
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
