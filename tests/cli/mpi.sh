#!/bin/sh
# Command-line tests of specdec under MPI (build-mpi/specdec, made by `make mpi`):
# mc, certify and replay on 1, 2 and 4 ranks print what one process prints, byte for
# byte (the trials/s rate, the one timing field, removed); a failure on one rank ends
# every rank; a sweep under mpirun killed with kill -9 and resumed holds every cell
# once, with the outputs of a one-worker run. Skips (exit 0) when mpirun or the MPI
# build is missing. The plain build's refusal of --mpi is tested either way.
# usage: mpi.sh path/to/specdec [path/to/build-mpi/specdec]
SPECDEC=${1:-build/specdec}
MPISPECDEC=${2:-${SPECDEC_MPI:-build-mpi/specdec}}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

expect 2 "this specdec was built without MPI: make mpi" -- "$SPECDEC" mc --draft 0.5,0.5 --target 0.5,0.5 --scheme sd --mpi
expect 2 "without MPI" -- env OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=1 "$SPECDEC" replay --log data/logs/sample.safetensors
expect 2 "in a sweep's cell" -- env SPECDEC_NO_MPI=1 "$SPECDEC" certify --scheme sd --mpi
expect 2 "--chunks must be 1 to 4096" -- "$SPECDEC" mc --draft 0.5,0.5 --target 0.5,0.5 --scheme sd --chunks 0
if ! command -v mpirun >/dev/null 2>&1; then
    echo "cli mpi: skipped: the MPI runs (no mpirun: sh install-deps.sh installs openmpi-bin)"
    finish "cli mpi"
    exit
fi
if [ "$MPISPECDEC" = skip ]; then
    echo "cli mpi: the MPI runs are make test's (SPECDEC_MPI=skip: build-mpi/specdec is not sanitized)"
    finish "cli mpi"
    exit
fi
if [ ! -x "$MPISPECDEC" ]; then
    echo "cli mpi: skipped: the MPI runs (no $MPISPECDEC: make mpi)"
    finish "cli mpi"
    exit
fi
expect 0 "--mpi" -- "$MPISPECDEC" sweep --help

# one machine: ranks oversubscribe its cores and talk over shared memory (the 2-rank runs
# over TCP on the loopback); root may run them (CI containers)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
run() { # run N ARGS...: specdec on N ranks
    n=$1; shift
    if [ "$n" = 2 ]; then btl=self,tcp; else btl=self,vader; fi
    timeout 120 mpirun --oversubscribe --mca btl $btl -n "$n" "$MPISPECDEC" "$@"
}
norate() { sed 's/"rate": [0-9.e+-]*//; s/, [0-9.e+-]* trials\/s$//'; }

# the same output for 1, 2 and 4 ranks as for one process (plain build and MPI build
# without --mpi), with 1 or 2 threads per rank
same() { # same NAME ARGS...: compares; the args run as given
    name=$1; shift
    want=$("$SPECDEC" "$@" --threads 2 2>/dev/null | norate)
    [ -n "$want" ] || { bad "$name: no output from one process"; return; }
    [ "$("$MPISPECDEC" "$@" 2>/dev/null | norate)" = "$want" ] && ok || bad "$name: the MPI build differs without --mpi"
    for n in 1 2 4; do
        th=$((n == 1 ? 2 : 1))
        got=$(run $n "$@" --threads $th --mpi 2>"$T/err" | norate)
        [ "$got" = "$want" ] && ok || { bad "$name: $n ranks differ from one process"; head -3 "$T/err"; }
    done
}
same "mc --json" mc --pair dirichlet:30,1,5 --scheme rrs -k 3 --samples 1000003 --seed 11 --json
same "mc --chunks 7" mc --pair dirichlet:12,0.5,3 --scheme kseq -k 2 --samples 300001 --chunks 7 --json
same "mc (text)" mc --pair zipf:2000,1.1,1.5 --scheme specinfer -k 2 --samples 400000 --seed 5
same "certify --json" certify --scheme kseq -k 2 --samples 100000 --seq-samples 40000 --json
same "certify (pairs)" certify --scheme rrs -k 2 --lm markov:50,1,1,1,0.5 --length 6 --samples 1000 --seq-samples 50000
# replay has no --threads: its runs by hand
for args in "--scheme all -k 4 --precision-check --samples 300" "--scheme sd,rrs,otm -k 3 --temperature 0.7 --json"; do
    want=$("$SPECDEC" replay --log data/logs/sample.safetensors $args 2>/dev/null)
    for n in 1 2 4; do
        [ "$(run $n replay --log data/logs/sample.safetensors $args --mpi 2>/dev/null)" = "$want" ] && ok ||
            bad "replay $args: $n ranks differ from one process"
    done
done
# an mpirun launch is detected without --mpi
want=$("$SPECDEC" mc --pair dirichlet:30,1,5 --scheme sd --samples 200000 --json | norate)
[ "$(run 2 mc --pair dirichlet:30,1,5 --scheme sd --samples 200000 --json 2>/dev/null | norate)" = "$want" ] && ok ||
    bad "an mpirun launch without --mpi is not split or differs"

# failures end every rank (no hang: timeout's 124 would show), rank 0 says why: a usage
# error (found before MPI starts, exit 2) and a failure of the input (after, exit 1)
run 3 mc --draft 0.5,0.5 --target 0.5,0.5 --scheme sd --samples 0 --mpi >"$T/out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "samples 0: need a whole number" "$T/out" && ok || bad "bad usage on every rank: rc $rc"
[ "$(grep -c "samples 0" "$T/out")" = 1 ] && ok || bad "the usage error is printed more than once"
run 3 mc --draft 0.5,0.6 --target 0.5,0.5 --scheme sd --samples 1000 --mpi >"$T/out" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "draft" "$T/out" && ok || bad "bad input on every rank: rc $rc"
[ "$(grep -c "specdec mc:" "$T/out")" = 1 ] && ok || bad "the error is printed more than once: $(cat "$T/out")"
timeout 120 mpirun --oversubscribe --mca btl self,vader -n 3 sh -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 2 ]; then L=missing.safetensors; else L=data/logs/sample.safetensors; fi
     exec "$0" replay --log $L --mpi' "$MPISPECDEC" >"$T/out" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] && grep -q "rank 2: missing.safetensors" "$T/out" && ok || bad "a failure on rank 2 alone: rc $rc"
timeout 120 mpirun --oversubscribe --mca btl self,vader -n 2 sh -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then P=0.5,0.6; else P=0.5,0.5; fi
     exec "$0" certify --draft 0.5,0.5 --target $P --scheme sd --samples 20000 --seq-samples 1000 --mpi' "$MPISPECDEC" >"$T/out" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] && grep -q "rank 1: target" "$T/out" && ok || bad "rank 1 failing before the first reduction: rc $rc"

# the sweep over ranks: one rank runs the cells itself; three ranks are a coordinator and
# two workers; every cell once, the same outputs as the plain build's one-worker run
cells_once() {
    n=$(grep -c '^{"cell": ' "$1")
    u=$(sed -n 's/^{"cell": \([0-9]*\),.*/\1/p' "$1" | sort -n | uniq | wc -l)
    [ "$n" = "$2" ] && [ "$u" = "$2" ] && [ "$(tail -c 1 "$1" | od -An -c | tr -d ' ')" = '\n' ]
}
strip() { # timings out (the cells' and their commands')
    sed 's/, "stderr": .*}$/}/; s/"seconds": [0-9.e+-]*//g; s/\\"seconds\\": [0-9.e+-]*//g; s/\\"rate\\": [0-9.e+-]*//g' "$1" | sort
}
cat > "$T/g.txt" <<'EOF'
axis V 4 16 64
axis scheme sd rrs kseq
command accept --pair dirichlet:{V},0.5,7 -k 2 --scheme {scheme} --json
EOF
"$SPECDEC" sweep "$T/g.txt" --out "$T/g1.jsonl" --jobs 1 --quiet || bad "the plain sweep failed"
run 1 sweep "$T/g.txt" --out "$T/g2.jsonl" --jobs 2 --mpi 2>"$T/err" && ok || bad "sweep on one rank"
cells_once "$T/g2.jsonl" 9 && [ "$(strip "$T/g1.jsonl")" = "$(strip "$T/g2.jsonl")" ] && ok || bad "sweep on one rank: cells"
run 3 sweep "$T/g.txt" --out "$T/g3.jsonl" --mpi 2>"$T/err" && ok || bad "sweep on three ranks"
cells_once "$T/g3.jsonl" 9 && [ "$(strip "$T/g1.jsonl")" = "$(strip "$T/g3.jsonl")" ] && ok || bad "sweep on three ranks: cells"
grep -q "load balance over 2 worker ranks" "$T/err" && grep -q "idle s" "$T/err" && ok || bad "no load-balance summary"
grep -q "speedup model from the 9 measured cell times" "$T/err" && grep -q "256 (257)" "$T/err" && ok || bad "no speedup model"

# a failing cell: recorded with its status, and the sweep's exit status says so
printf 'axis k 1 0\ncommand accept --pair dirichlet:4,0.5,7 -k {k} --scheme sd\n' > "$T/bad.txt"
run 3 sweep "$T/bad.txt" --out "$T/b.jsonl" --mpi --quiet 2>"$T/err"
rc=$?
[ $rc = 1 ] && grep -q "1 cell failed" "$T/err" && grep -q '"rc": 2' "$T/b.jsonl" && ok || bad "a failing cell under MPI: rc $rc"

# kill -9 of mpirun while cells run (slower cells), then a resume: each cell exactly once
cat > "$T/slow.txt" <<'EOF'
axis seed 1 2 3 4 5 6 7 8 9 10
command mc --pair dirichlet:64,0.5,{seed} --scheme rrs -k 2 --samples 2e6 --seed {seed} --json
EOF
mkdir "$T/tmp"
export TMPDIR="$T/tmp" # where the workers keep a running cell's output
mpirun --oversubscribe --mca btl self,vader -n 3 "$MPISPECDEC" sweep "$T/slow.txt" --out "$T/k.jsonl" --mpi --quiet &
pid=$!
i=0 # until two cells are written (or 30 s), then kill
while [ $i -lt 300 ] && [ "$(cat "$T/k.jsonl" 2>/dev/null | grep -c '^{"cell"')" -lt 2 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
killed=$(grep -c '^{"cell"' "$T/k.jsonl")
[ "$killed" -lt 10 ] && ok || bad "the sweep finished before the kill ($killed cells)"
run 3 sweep "$T/slow.txt" --out "$T/k.jsonl" --mpi --quiet && ok || bad "resume under mpirun after kill -9"
cells_once "$T/k.jsonl" 10 && ok || bad "after kill -9 and resume: not each cell once"
"$SPECDEC" sweep "$T/slow.txt" --out "$T/k1.jsonl" --jobs 1 --quiet
[ "$(strip "$T/k.jsonl")" = "$(strip "$T/k1.jsonl")" ] && ok || bad "killed-and-resumed MPI results differ from a one-worker run"
ls "$T"/k.jsonl.* "$T"/tmp/* >/dev/null 2>&1 && bad "files left behind by the workers" || ok

finish "cli mpi"
