#!/bin/sh
# Command-line tests of 'specdec sweep': the grid file, the results file, resuming after
# an abrupt stop and after a kill (every cell exactly once), failing cells, bad grids,
# the load-balance summary and speedup model. (Over MPI: tests/cli/mpi.sh.)
# usage: sweep.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

cat > "$T/g.txt" <<'EOF'
# three vocabularies x three schemes
axis V 4 16 64
axis scheme sd rrs kseq
command accept --pair dirichlet:{V},0.5,7 -k 2 --scheme {scheme} --json
EOF
# each cell once, and its values match its number (last axis fastest)
cells_once() {
    n=$(grep -c '^{"cell": ' "$1")
    u=$(sed -n 's/^{"cell": \([0-9]*\),.*/\1/p' "$1" | sort -n | uniq | wc -l)
    [ "$n" = "$2" ] && [ "$u" = "$2" ] && [ "$(tail -c 1 "$1" | od -An -c | tr -d ' ')" = '\n' ]
}

expect 0 "usage: specdec sweep" -- "$SPECDEC" sweep --help
expect 2 "give one GRID file" -- "$SPECDEC" sweep --out "$T/r.jsonl"
expect 2 "--out RESULTS.jsonl is required" -- "$SPECDEC" sweep "$T/g.txt"
expect 0 "^8: specdec accept --pair dirichlet:64,0.5,7 -k 2 --scheme kseq --json" -- "$SPECDEC" sweep "$T/g.txt" --dry-run
expect 0 "9 cells run (0 failed), 0 skipped" -- "$SPECDEC" sweep "$T/g.txt" --out "$T/full.jsonl" --jobs 2
cells_once "$T/full.jsonl" 9 && ok || bad "a full run did not write each cell once"
grep -q '^{"cell": 5, "values": {"V": "16", "scheme": "kseq"}, "rc": 0' "$T/full.jsonl" && ok || bad "cell 5's values"
grep -q 'acceptance.": 0' "$T/full.jsonl" && ok || bad "no command output in the results"

# an abrupt stop after 4 cells, then the rest
"$SPECDEC" sweep "$T/g.txt" --out "$T/r.jsonl" --jobs 2 --stop-after 4 --quiet
[ $? = 3 ] && ok || bad "--stop-after did not stop"
cells_once "$T/r.jsonl" 4 && ok || bad "after the stop: not 4 cells"
expect 0 "5 cells run (0 failed), 4 skipped as done" -- "$SPECDEC" sweep "$T/g.txt" --out "$T/r.jsonl" --jobs 2
cells_once "$T/r.jsonl" 9 && ok || bad "after resuming: not each cell once"
expect 0 "0 cells run (0 failed), 9 skipped" -- "$SPECDEC" sweep "$T/g.txt" --out "$T/r.jsonl"

# a writer killed in the middle of a line: the cut line is dropped and its cell run again
head -n 6 "$T/full.jsonl" > "$T/cut.jsonl"
sed -n 7p "$T/full.jsonl" | head -c 40 >> "$T/cut.jsonl"
expect 0 "3 cells run (0 failed), 6 skipped" -- "$SPECDEC" sweep "$T/g.txt" --out "$T/cut.jsonl"
cells_once "$T/cut.jsonl" 9 && ok || bad "a cut last line was not dropped"

# a real kill while cells run (slower cells), then a resume: each cell exactly once
cat > "$T/slow.txt" <<'EOF'
axis seed 1 2 3 4 5 6
command mc --pair dirichlet:64,0.5,{seed} --scheme rrs -k 2 --samples 5e6 --seed {seed} --json
EOF
"$SPECDEC" sweep "$T/slow.txt" --out "$T/k.jsonl" --jobs 2 --quiet &
pid=$!
sleep 0.6
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
"$SPECDEC" sweep "$T/slow.txt" --out "$T/k.jsonl" --jobs 2 --quiet && ok || bad "resume after kill -9"
cells_once "$T/k.jsonl" 6 && ok || bad "after kill -9 and resume: not each cell once"
# the same cells on one worker give the same outputs (seeded Monte Carlo; timings removed)
"$SPECDEC" sweep "$T/slow.txt" --out "$T/k1.jsonl" --jobs 1 --quiet
strip() { sed 's/, "stderr": .*}$/}/; s/"seconds": [0-9.e+-]*//g; s/\\"seconds\\": [0-9.e+-]*//g; s/\\"rate\\": [0-9.e+-]*//g' "$1" | sort; }
[ "$(strip "$T/k.jsonl")" = "$(strip "$T/k1.jsonl")" ] && ok || bad "killed-and-resumed results differ from a one-worker run"

# SIGTERM (scancel, a time limit) to the runner, and SIGINT to it and its cells at once
# (Ctrl-C): exit 128 + the signal, the cells in flight not written, their files removed;
# the resume completes the grid with the same outputs
"$SPECDEC" sweep "$T/slow.txt" --out "$T/t.jsonl" --jobs 2 --quiet 2>"$T/err" &
pid=$!
sleep 0.6
kill -TERM $pid
wait $pid
rc=$?
[ $rc = 143 ] && grep -q "stopped by signal 15" "$T/err" && ok || bad "SIGTERM: rc $rc"
ls "$T"/t.jsonl.* >/dev/null 2>&1 && bad "SIGTERM: the cells' files are left" || ok
grep -q -v '"rc": 0,' "$T/t.jsonl" 2>/dev/null && bad "SIGTERM: a cut cell was written" || ok
setsid sh -c '"$0" sweep "$1" --out "$2" --jobs 2 --quiet 2>/dev/null & sleep 0.6; kill -INT -$$; wait' \
    "$SPECDEC" "$T/slow.txt" "$T/t.jsonl" 2>/dev/null
grep -q -v '"rc": 0,' "$T/t.jsonl" 2>/dev/null && bad "SIGINT: a cut cell was written" || ok
"$SPECDEC" sweep "$T/slow.txt" --out "$T/t.jsonl" --jobs 2 --quiet && cells_once "$T/t.jsonl" 6 &&
    [ "$(strip "$T/t.jsonl")" = "$(strip "$T/k1.jsonl")" ] && ok || bad "resume after SIGTERM and SIGINT"
ls "$T"/t.jsonl.* >/dev/null 2>&1 && bad "SIGINT: the cells' files are left" || ok

# failing cells and bad grids
cat > "$T/bad.txt" <<'EOF'
axis k 1 0
command accept --pair dirichlet:4,0.5,7 -k {k} --scheme sd
EOF
expect 1 "1 cell failed" -- "$SPECDEC" sweep "$T/bad.txt" --out "$T/b.jsonl"
grep -q '"rc": 2' "$T/b.jsonl" && ok || bad "a failing cell's rc (2: -k 0 is a usage error) is not recorded"
printf 'axis V 4\ncommand accept --pair dirichlet:{W},0.5,7\n' > "$T/x.txt"
expect 1 "'{W}' in the command names no axis" -- "$SPECDEC" sweep "$T/x.txt" --out "$T/x.jsonl"
printf 'axis V 4\n' > "$T/x.txt"
expect 1 "has no 'command' line" -- "$SPECDEC" sweep "$T/x.txt" --out "$T/x.jsonl"
printf 'axis V 4\naxis V 5\ncommand accept\n' > "$T/x.txt"
expect 1 "x.txt:2: axis 'V' given twice" -- "$SPECDEC" sweep "$T/x.txt" --out "$T/x.jsonl"
printf 'axis V 4\ncommand sweep x\n' > "$T/x.txt"
expect 1 "other than sweep" -- "$SPECDEC" sweep "$T/x.txt" --out "$T/x.jsonl"
printf 'axes V 4\n' > "$T/x.txt"
expect 1 "x.txt:1: expected 'axis NAME VALUES...'" -- "$SPECDEC" sweep "$T/x.txt" --out "$T/x.jsonl"
expect 1 "$T/none.txt" -- "$SPECDEC" sweep "$T/none.txt" --out "$T/x.jsonl"

# paper-figs/figs.grid (make figs SWEEP=1) runs every recipe of specdec figs, once each
want=$("$SPECDEC" figs --list --tsv | cut -f1 | sort)
have=$(sed -n 's/^axis recipe //p' paper-figs/figs.grid | tr ' ' '\n' | sort)
[ -n "$want" ] && [ "$want" = "$have" ] && ok || bad "paper-figs/figs.grid does not list every figs recipe once"
expect 0 "^18: specdec figs spectr-fig5 --out out/figs" -- "$SPECDEC" sweep paper-figs/figs.grid --dry-run

# the summary: each worker's busy and idle time, and the speedup model
expect 0 "speedup model from the 9 measured cell times" -- "$SPECDEC" sweep "$T/g.txt" --out "$T/full.jsonl"
"$SPECDEC" sweep "$T/g.txt" --out "$T/bal.jsonl" --jobs 2 2>"$T/bal.err"
grep -q "load balance over 2 workers" "$T/bal.err" && grep -Eq "^ +1 +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+%$" "$T/bal.err" && ok || bad "no load balance per worker"
grep -Eq "^ +256 +[0-9.]+ +[0-9.]+ +[0-9.]+%$" "$T/bal.err" && ok || bad "no modelled speedup on 256 workers"

finish "cli sweep"
