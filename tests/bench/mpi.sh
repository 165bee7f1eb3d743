#!/bin/sh
# The MPI path measured (make bench-mpi; a minute or two on 2 cores):
#  1. its overhead against the threaded path: one Monte-Carlo run of fixed size on
#     1 rank x 1 thread, 1 rank x 2 threads and 2 ranks x 1 thread, beside the plain
#     build's 1 and 2 threads: wall time (mpirun's start included) and the engine's
#     trials per second (its own clock: the chunks and the sum over ranks);
#  2. the load balance of a sweep whose cells differ in cost by 1000x (Monte-Carlo
#     runs of 1e4 to 1e7 trials), on 2 worker ranks and on 2 local workers: each
#     worker's busy and idle seconds;
#  3. the speedup on N ranks modelled from the measured cell times.
# usage: tests/bench/mpi.sh [build/specdec] [build-mpi/specdec]
SPECDEC=${1:-build/specdec}
MPISPECDEC=${2:-build-mpi/specdec}
REPS=${REPS:-3}
SAMPLES=${SAMPLES:-4e7}
command -v mpirun >/dev/null 2>&1 || { echo "bench-mpi: no mpirun (sh install-deps.sh)"; exit 1; }
[ -x "$MPISPECDEC" ] || { echo "bench-mpi: no $MPISPECDEC (make mpi)"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1

now() { date +%s.%N; }
# median of REPS runs of a command: prints "wall rate"
measure() {
    i=0
    : > "$T/m"
    while [ $i -lt "$REPS" ]; do
        t0=$(now)
        "$@" > "$T/out" 2>/dev/null || { echo "bench-mpi: failed: $*" >&2; exit 1; }
        t1=$(now)
        rate=$(sed -n 's/.*"rate": \([0-9.e+]*\).*/\1/p' "$T/out")
        echo "$(awk "BEGIN { print $t1 - $t0 }") $rate" >> "$T/m"
        i=$((i + 1))
    done
    sort -n "$T/m" | sed -n "$(( (REPS + 1) / 2 ))p"
}

MC="mc --pair dirichlet:64,0.5,7 --scheme rrs -k 2 --samples $SAMPLES --seed 3 --json"
echo "== 1. MPI against threads: specdec $MC"
echo "($(nproc) cores, median of $REPS runs; wall: the whole command, mpirun and MPI_Init included;"
echo " engine: samples / the engine's own trials/s, the chunks and the sum over ranks)"
printf '%-26s %8s %9s %12s %9s %9s\n' "run" "wall s" "engine s" "trials/s" "wall +" "engine +"
line() { # line NAME WALL RATE [REF_WALL REF_ENGINE]: the last two columns against the reference
    eng=$(awk "BEGIN { print $SAMPLES / $3 }")
    if [ -n "${4:-}" ]; then
        vw=$(awk "BEGIN { printf \"%+.1f%%\", ($2 / $4 - 1) * 100 }")
        ve=$(awk "BEGIN { printf \"%+.1f%%\", ($eng / $5 - 1) * 100 }")
    else vw="-"; ve="-"; fi
    printf '%-26s %8.3f %9.3f %12.4g %9s %9s\n' "$1" "$2" "$eng" "$3" "$vw" "$ve"
}
set -- $(measure "$SPECDEC" $MC --threads 1); w1=$1; e1=$(awk "BEGIN { print $SAMPLES / $2 }")
line "plain, 1 thread" "$1" "$2"
set -- $(measure "$SPECDEC" $MC --threads 2); w2=$1; e2=$(awk "BEGIN { print $SAMPLES / $2 }")
line "plain, 2 threads" "$1" "$2"
set -- $(measure mpirun -n 1 "$MPISPECDEC" $MC --threads 1 --mpi); line "MPI 1 rank x 1 thread" "$1" "$2" "$w1" "$e1"
set -- $(measure mpirun --bind-to none -n 1 "$MPISPECDEC" $MC --threads 2 --mpi); line "MPI 1 rank x 2 threads" "$1" "$2" "$w2" "$e2"
set -- $(measure mpirun -n 2 "$MPISPECDEC" $MC --threads 1 --mpi); line "MPI 2 ranks x 1 thread" "$1" "$2" "$w2" "$e2"
set -- $(measure mpirun -n 1 "$MPISPECDEC" $MC --threads 2 --mpi); line "(1 x 2, bound to a core)" "$1" "$2" "$w2" "$e2"
echo "(against: 1 rank x 1 thread vs plain 1 thread; the others vs plain 2 threads. 1 rank x 2"
echo " threads runs with mpirun --bind-to none: by default mpirun binds a rank to one core, and"
echo " its two threads take turns, as the last line shows)"
TINY="mc --draft 0.5,0.5 --target 0.5,0.5 --scheme sd --samples 1 --json"
set -- $(measure "$SPECDEC" $TINY); s0=$1
set -- $(measure mpirun -n 1 "$MPISPECDEC" $TINY --mpi); s1=$1
set -- $(measure mpirun -n 2 "$MPISPECDEC" $TINY --mpi)
printf '(a run of 1 trial, the fixed cost: plain %.3f s, MPI 1 rank %.3f s, 2 ranks %.3f s)\n' "$s0" "$s1" "$1"
a=$("$SPECDEC" $MC --threads 2 2>/dev/null | sed 's/"rate": [0-9.e+]*//')
b=$(mpirun -n 2 "$MPISPECDEC" $MC --threads 1 --mpi 2>/dev/null | sed 's/"rate": [0-9.e+]*//')
[ "$a" = "$b" ] && echo "(2 ranks print the plain build's result, bit for bit)" || echo "DIFFERENT RESULTS"

echo
echo "== 2. load balance: a sweep of 16 cells whose cost spans 1000x (1e4 to 1e7 trials)"
cat > "$T/grid" <<'EOF'
axis samples 1e7 1e4 1e6 1e5
axis seed 1 2 3 4
command mc --pair dirichlet:64,0.5,{seed} --scheme rrs -k 2 --samples {samples} --seed {seed} --json
EOF
echo "-- over MPI: mpirun -n 3 (rank 0 coordinates, 2 worker ranks)"
mpirun -n 3 "$MPISPECDEC" sweep "$T/grid" --out "$T/mpi.jsonl" --mpi 2>&1 | tr '\r' '\n' | grep -v '^sweep: [0-9]*/[0-9]* cells\|^$'
echo "-- locally: --jobs 2"
"$SPECDEC" sweep "$T/grid" --out "$T/local.jsonl" --jobs 2 2>&1 | tr '\r' '\n' | grep -v '^sweep: [0-9]*/[0-9]* cells\|^$' | sed '/speedup model/,$d'
echo "(section 3 is the speedup model above, from the cells' measured times on this machine)"
