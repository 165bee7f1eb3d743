#!/bin/sh
# paper-figs/slurm.sbatch on a real Slurm cluster: a private one-node cluster on the
# loopback (its own slurm.conf, state, spool and logs in a temporary folder, 2 CPUs, its
# own munged with a fresh key and socket, unusual ports), to which SCALE.md's Slurm
# commands are submitted as written, from a folder that holds links to paper-figs/ and
# build-mpi/ (so the jobs' files stay in the temporary folder):
#   - an mc step over 2 tasks launched by srun (--mpi=pmix) prints what the plain build
#     prints, once (a second line would mean 2 singletons instead of 2 ranks);
#   - the same through mpirun inside the allocation (SD_SRUN=mpirun);
#   - a sweep step cancelled (scancel) after some cells and submitted again holds every
#     cell once, with the outputs of an uninterrupted one-worker run;
#   - a failing step fails the job (exit code, state FAILED), its error in the job's
#     output file;
#   - the cluster is torn down on any exit, and nothing started here is left running.
# Skips (exit 0) without Slurm (sh install-deps.sh --slurm) or the MPI build (make mpi).
# usage: slurm.sh path/to/specdec [path/to/build-mpi/specdec]
SPECDEC=${1:-build/specdec}
MPISPECDEC=${2:-${SPECDEC_MPI:-build-mpi/specdec}}
. "$(dirname "$0")/lib.sh"
for p in slurmctld slurmd munged sbatch srun squeue scancel scontrol; do
    if ! command -v $p >/dev/null 2>&1; then
        echo "cli slurm: skipped: no Slurm (no $p: sh install-deps.sh --slurm installs slurm-wlm and munge)"
        exit 0
    fi
done
if [ "$MPISPECDEC" = skip ]; then
    echo "cli slurm: skipped: the Slurm runs are make test's (SPECDEC_MPI=skip: build-mpi/specdec is not sanitized)"
    exit 0
fi
if [ ! -x "$MPISPECDEC" ]; then
    echo "cli slurm: skipped: no $MPISPECDEC (make mpi)"
    exit 0
fi
REPO=$(pwd)
case $MPISPECDEC in /*) ;; *) MPISPECDEC=$REPO/$MPISPECDEC ;; esac
T=$(mktemp -d /tmp/specdec-slurm.XXXXXX) || exit 1
t0=$(date +%s)

# What the teardown looks for: every process started here carries SPECDEC_SLURM_TEST=$T
# in its environment (the daemons, and through sbatch the jobs and their steps), or works
# in $T or has a file there open (slurmstepd: the daemons run from $T, it logs there).
export SPECDEC_SLURM_TEST="$T"
ours() { # the ids of the processes still running from this test (this shell excluded)
    found=$(grep -lzxF "SPECDEC_SLURM_TEST=$T" /proc/[0-9]*/environ 2>/dev/null
        find /proc/[0-9]*/cwd /proc/[0-9]*/fd -maxdepth 1 -lname "$T*" 2>/dev/null)
    for f in $found; do # not grep or find, gone by now
        pid=${f#/proc/}
        pid=${pid%%/*}
        [ "$pid" != $$ ] && [ -d "/proc/$pid" ] && echo "$pid"
    done | sort -u
}
torn=0
teardown() { # cancel the jobs, stop the daemons, then anything of ours still there
    [ "$torn" = 1 ] && return
    torn=1
    if [ -n "${ctld:-}" ]; then
        jobs=$(squeue -h -o %i 2>/dev/null)
        [ -n "$jobs" ] && scancel $jobs 2>/dev/null
        i=0
        while [ $i -lt 100 ] && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; do sleep 0.1; i=$((i + 1)); done
    fi
    for pid in ${slurmd:-} ${ctld:-}; do kill "$pid" 2>/dev/null; done
    for pid in ${slurmd:-} ${ctld:-}; do wait "$pid" 2>/dev/null; done
    [ -f "$T/munge/pid" ] && kill "$(cat "$T/munge/pid")" 2>/dev/null
    i=0
    while [ $i -lt 50 ] && [ -n "$(ours)" ]; do sleep 0.1; i=$((i + 1)); done
    left=$(ours)
    if [ -n "$left" ]; then
        echo "cli slurm: still running after the teardown, killed:" $left
        ps -o pid,args -p "$(echo $left | tr ' ' ,)" 2>/dev/null
        kill -9 $left 2>/dev/null
        return 1
    fi
}
cleanup() { # the trap: whatever happened, nothing left running and no temporary folder
    rc=$?
    teardown || rc=1
    [ -n "${KEEP:-}" ] && echo "cli slurm: kept $T" || rm -rf "$T"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

fail_start() { # the cluster did not come up: say why from its logs, and stop
    bad "$1"
    for f in "$T"/log/*; do echo "--- $f"; tail -5 "$f"; done
    finish "cli slurm"
    exit 1
}

# munge: a fresh key and a socket of its own (the system's munged, if any, is not used)
mkdir -p "$T/munge" "$T/state" "$T/spool/localhost" "$T/log" "$T/run" "$T/tmp"
chmod 755 "$T" "$T/munge"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 600 "$T/munge/munge.key"
munged --force --socket="$T/munge/sock" --key-file="$T/munge/munge.key" --log-file="$T/log/munged.log" \
    --pid-file="$T/munge/pid" --seed-file="$T/munge/seed" || fail_start "munged did not start"

# two free ports (from the process id, not one in use)
port=$((20000 + $$ % 20000 * 2))
while ss -Htan 2>/dev/null | grep -q ":$port \|:$((port + 1)) "; do port=$((port + 2)); done
export SLURM_CONF="$T/slurm.conf"
cat > "$SLURM_CONF" <<EOF
# a private one-node cluster on the loopback (tests/cli/slurm.sh)
ClusterName=specdectest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/sock
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool/%n
SlurmctldPidFile=$T/run/slurmctld.pid
SlurmdPidFile=$T/run/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
MailProg=/bin/true
# no cgroups: processes are tracked through /proc, tasks are not bound
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SchedulerType=sched/backfill
# a job submitted is scheduled at once (not up to 3 s later)
SchedulerParameters=batch_sched_delay=0
# the jobs' temporary files (srun's PMIx among them) in the temporary folder
TmpFS=$T/tmp
# a cancelled step gets SIGKILL 2 s after SIGTERM; finished jobs stay in squeue/scontrol a while
KillWait=2
MinJobAge=600
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
cd "$T"
slurmctld -D -f "$SLURM_CONF" > "$T/log/slurmctld.out" 2>&1 &
ctld=$!
slurmd -D -N localhost -f "$SLURM_CONF" > "$T/log/slurmd.out" 2>&1 &
slurmd=$!
cd "$REPO"
i=0 # the node idle (30 s at most)
while [ $i -lt 300 ] && [ "$(sinfo -h -n localhost -o %T 2>/dev/null)" != idle ]; do sleep 0.1; i=$((i + 1)); done
[ "$(sinfo -h -n localhost -o %T 2>/dev/null)" = idle ] || fail_start "the node did not come up"
ok
echo "cli slurm: a one-node cluster up in $(( $(date +%s) - t0 )) s (ports $port, $((port + 1)))"

# the jobs run from $T/sub, which shows the repository's paper-figs/ and build-mpi/
mkdir -p "$T/sub/build-mpi"
ln -s "$REPO/paper-figs" "$T/sub/paper-figs"
ln -s "$MPISPECDEC" "$T/sub/build-mpi/specdec"

# the jobs' temporary files (the sweep's workers keep a running cell's output there)
mkdir "$T/jobtmp"
export TMPDIR="$T/jobtmp"

readme() { # readme 'sbatch ...': SCALE.md shows this line as written; submits it from $T/sub
    grep -qxF "    $1" "$REPO/SCALE.md" && ok || bad "SCALE.md does not show: $1"
    (cd "$T/sub" && eval "$1") > "$T/submit" 2>&1
    job=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$T/submit")
    [ -n "$job" ] || { bad "not submitted: $1"; cat "$T/submit"; }
}
field() { scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"; }
finished() { # finished JOB [SECONDS]: waits until the job has ended (0) or the time is up (1)
    i=0
    while [ $i -lt $((${2:-120} * 10)) ]; do
        case $(field "$1" JobState) in
            PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | "") ;;
            *) return 0 ;;
        esac
        sleep 0.1
        i=$((i + 1))
    done
    bad "job $1 still $(field "$1" JobState) after ${2:-120} s"
    return 1
}
norate() { sed 's/"rate": [0-9.e+-]*//'; }

# 1. mc over 2 tasks through srun --mpi=pmix: what one process prints, once
want=$("$SPECDEC" mc --pair zipf:32000,1.1,1.5 --scheme rrs -k 4 --samples 2e6 --chunks 256 --seed 2385 \
    --json --threads 2 2>/dev/null | norate)
readme 'sbatch -N1 --ntasks-per-node=2 paper-figs/slurm.sbatch mc 2e6'
if [ -n "$job" ] && finished "$job"; then
    [ "$(field "$job" JobState)" = COMPLETED ] && [ "$(field "$job" ExitCode)" = 0:0 ] && ok ||
        { bad "the mc job: $(field "$job" JobState) $(field "$job" ExitCode)"; cat "$T/sub/specdec-$job.out"; }
    grep -q "step mc, 2 tasks on localhost" "$T/sub/specdec-$job.out" && ok || bad "the mc job did not have 2 tasks"
    got=$(norate < "$T/sub/out/slurm/mc-rrs-2e6.json")
    [ -n "$want" ] && [ "$got" = "$want" ] && ok || { bad "mc over srun differs from one process"; echo "$got" | head -c 600; }
fi

# 1b. the same step launched by mpirun inside the allocation (SD_SRUN=mpirun, SCALE.md's
#     way where srun has no PMIx; root may run it here, as in tests/cli/mpi.sh)
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
(cd "$T/sub" && SD_SRUN=mpirun SD_OUT=out/mpirun sbatch -N1 --ntasks-per-node=2 paper-figs/slurm.sbatch mc 2e6) > "$T/submit" 2>&1
job=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$T/submit")
if [ -n "$job" ] && finished "$job"; then
    got=$(norate < "$T/sub/out/mpirun/mc-rrs-2e6.json")
    [ "$(field "$job" ExitCode)" = 0:0 ] && [ -n "$want" ] && [ "$got" = "$want" ] && ok ||
        { bad "mc under mpirun in the job differs from one process"; tail -5 "$T/sub/specdec-$job.out"; }
else
    bad "the mpirun job was not submitted"; cat "$T/submit"
fi

# 2. the sweep: cancelled after 2 of its 12 cells (or a few more), submitted again, every cell once
cells() { c=$(grep -c '^{"cell": ' "$T/sub/out/slurm/try.jsonl" 2>/dev/null); echo "${c:-0}"; }
readme 'sbatch -N1 --ntasks-per-node=2 paper-figs/slurm.sbatch sweep paper-figs/try.grid out/slurm/try.jsonl'
first=$job
if [ -n "$first" ]; then
    i=0
    while [ $i -lt 600 ] && [ "$(cells)" -lt 2 ]; do sleep 0.1; i=$((i + 1)); done
    scancel "$first"
    finished "$first" 30
    before=$(cells)
    echo "cli slurm: sweep job $first $(field "$first" JobState) with $before of 12 cells written"
    [ "$(field "$first" JobState)" = CANCELLED ] && [ "$before" -ge 2 ] && [ "$before" -lt 12 ] && ok ||
        bad "the sweep was not cancelled in the middle ($(field "$first" JobState), $before cells)"
    # the worker stopped its cell on SIGTERM: not written, its temporary files removed
    [ -z "$(ls -A "$T/jobtmp")" ] && [ "$(ls "$T/sub/out/slurm" | grep -c try)" = 1 ] && ok ||
        bad "files left by the cancelled sweep: $(ls "$T/jobtmp" "$T/sub/out/slurm")"
    if grep -q -v '"rc": 0,' "$T/sub/out/slurm/try.jsonl"; then bad "a cell cut by the cancel was written"; else ok; fi
fi
readme 'sbatch -N1 --ntasks-per-node=2 paper-figs/slurm.sbatch sweep paper-figs/try.grid out/slurm/try.jsonl'
if [ -n "$job" ] && finished "$job"; then
    [ "$(field "$job" JobState)" = COMPLETED ] && ok || { bad "the resumed sweep: $(field "$job" JobState)"; tail -5 "$T/sub/specdec-$job.out"; }
    r="$T/sub/out/slurm/try.jsonl"
    n=$(grep -c '^{"cell": ' "$r")
    u=$(sed -n 's/^{"cell": \([0-9]*\),.*/\1/p' "$r" | sort -n | uniq | wc -l)
    echo "cli slurm: resumed as job $job: $n lines, $u distinct cells; $(tr '\r' '\n' < "$T/sub/specdec-$job.out" | grep 'skipped as done' | tail -1)"
    [ "$n" = 12 ] && [ "$u" = 12 ] && ok || bad "after scancel and resubmit: $n lines, $u distinct cells (want 12)"
    strip() { sed 's/, "stderr": .*}$/}/; s/"seconds": [0-9.e+-]*//g; s/\\"rate\\": [0-9.e+-]*//g' "$1" | sort; }
    "$SPECDEC" sweep paper-figs/try.grid --out "$T/ref.jsonl" --jobs 1 --quiet || bad "the plain sweep failed"
    strip "$r" > "$T/a"
    strip "$T/ref.jsonl" > "$T/b"
    diff "$T/a" "$T/b" > "$T/diff" && ok || { bad "the resumed sweep differs from an uninterrupted run"; head -5 "$T/diff"; }
fi

# 3. a failing step fails the job, its error in the job's output file
(cd "$T/sub" && sbatch -N1 --ntasks-per-node=2 paper-figs/slurm.sbatch mc 0) > "$T/submit" 2>&1
job=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' "$T/submit")
if [ -n "$job" ] && finished "$job"; then
    [ "$(field "$job" JobState)" = FAILED ] && [ "$(field "$job" ExitCode)" != 0:0 ] && ok ||
        bad "a failing mc: $(field "$job" JobState) $(field "$job" ExitCode)"
    [ "$(grep -c "samples 0: need a whole number" "$T/sub/specdec-$job.out")" = 1 ] && ok ||
        { bad "the error is not in the failing job's output once"; cat "$T/sub/specdec-$job.out"; }
else
    bad "the failing job was not submitted"; cat "$T/submit"
fi

teardown && ok || bad "processes left running after the teardown"
echo "cli slurm: $(( $(date +%s) - t0 )) s"
finish "cli slurm"
