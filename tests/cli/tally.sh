#!/bin/sh
# How tests/run-tests.sh counts a program: a failing exit fails it; a cmocka skip, a
# "NAME: skipped: why" or a bare "skipped: why" line (test_gemm's message on a machine
# without AVX-512, through cmocka's print_message) makes it skipped, never passed.
# usage: tally.sh path/to/specdec (not used)
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
count() { # WANT RC LINES...: the output of LINES and exit RC count as WANT
    want=$1 rc=$2; shift 2
    printf '%s\n' "$@" > "$T/out"
    got=$(sh tests/run-tests.sh --classify "$T/out" "$rc")
    [ "$got" = "$want" ] && ok || bad "'$*' (exit $rc) counts as $got, want $want"
}
count passed 0 "[==========] Running 3 test(s)." "[  PASSED  ] 3 test(s)."
count skipped 0 "[  PASSED  ] 2 test(s)." "[  SKIPPED ] 1 test(s), listed below:" "[  SKIPPED ] test_cuda_logits"
count skipped 0 "test_cuda: skipped: no CUDA device" "[  PASSED  ] 9 test(s)."
count skipped 0 "[ RUN      ] test_gemm_rows4" "skipped: rows four by four need AVX-512, not in this build" "[       OK ] test_gemm_rows4"
count skipped 0 "cli slurm: skipped: no Slurm"
count failed 1 "skipped: rows four by four need AVX-512, not in this build" "[  FAILED  ] 1 test(s)"
# a word that only contains "skipped:" is not a skip line
count passed 0 "dirichlet:6,1,2385  6  3  skipped: rrs needs 3 tokens of draft mass" "== PASS at p >= 1e-06: 1 passed"
finish "cli tally"
