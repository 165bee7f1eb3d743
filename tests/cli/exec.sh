#!/bin/sh
# Command-line tests of 'specdec certify --exec': the C and Python adapters that are
# correct pass, every planted bug of tests/exec/adapter.py is rejected, and a program
# that crashes, hangs or answers garbage ends the run with a clear error, the pairs
# finished before it kept; and 'certify --decoder' on specdec's own generate and decode,
# with negative controls, no power, and an LCG decoder's too-good fit; the default plan
# (family.h) against the bugs only some pairs expose; the PIT of every position against
# tests/exec/spec_decoder's planted bugs, with its simulated power; the filters. 38 s
# measured on the 2-core machine with a load of 4 (94 s at a load of 11, where the
# version before the default plan took 65 s) before the PIT checks; 116 s with them,
# under the load of other jobs (56 s without); with the PIT's power and the checks of
# each part of its family, 3 minutes of CPU (8 minutes at a load of 10).
# usage: exec.sh path/to/specdec
SPECDEC=${1:-build/specdec}
. "$(dirname "$0")/lib.sh"
ADAPTER=$(dirname "$SPECDEC")/tests/exec/adapter
PAIR=dirichlet:6,1,2385

expect 0 "usage: specdec certify --exec" -- "$SPECDEC" certify --exec x --help
expect 0 "certify --exec CMD" -- "$SPECDEC" certify --help
expect 2 "needs a command" -- "$SPECDEC" certify --exec ""
# typed without CMD: the help (exit 0), not "sh -c --help"; another option there is refused
expect 0 "usage: specdec certify --exec" -- "$SPECDEC" certify --exec --help
expect 2 "the sampler's command line comes first" -- "$SPECDEC" certify --exec --scheme sd
expect 2 "needs --log" -- "$SPECDEC" certify --exec true --rows 1
expect 2 "unknown scheme" -- "$SPECDEC" certify --exec true --scheme nope
expect 1 "dirichlet" -- "$SPECDEC" certify --exec true --pair dirichlet:0,1,1

# the C adapter (standalone), the default plan's pairs (family.h) at -k 1,3 and logged rows
if [ -x "$ADAPTER" ]; then
    expect 0 "== PASS at p >= 1e-06: 26 passed" -- "$SPECDEC" certify --exec "$ADAPTER specinfer" --scheme specinfer -k 1,3 --samples 100000
    expect 0 "== PASS at p >= 1e-06: 13 passed" -- "$SPECDEC" certify --exec "$ADAPTER sd" --scheme sd --samples 100000
    expect 0 "log:row@5 .*PASS" -- "$SPECDEC" certify --exec "$ADAPTER specinfer" --scheme specinfer --log data/logs/sample.safetensors --rows 0,5 --samples 50000
    # too few cases for power against the planted bug: inconclusive, with the cases that give it
    expect 3 "== INCONCLUSIVE at p >= 1e-06: 0 passed, 0 failed, 1 inconclusive" -- "$SPECDEC" certify --exec "$ADAPTER sd" --scheme sd --pair "$PAIR" --samples 300
    # pairs where the planted bug changes nothing (draft = target, a one-hot target): each
    # passes with its power rule waived, the run alone shows no power: inconclusive
    expect 3 "2 passed, .*; the planted bug changes no tested pair's law: no power shown" -- "$SPECDEC" certify \
        --exec "$ADAPTER specinfer" --scheme specinfer --pair zipf:50,1.2,1 --pair onehot:50,1.2,3 --samples 20000
    # the right law but another scheme's acceptance: specinfer's verifier claimed as K-SEQ
    expect 1 "FAIL dirichlet:6,1,2385, V = 6, k = 3: acceptance 0.81.* for kseq" -- "$SPECDEC" certify --exec "$ADAPTER specinfer" --scheme kseq -k 3 --pair "$PAIR" --samples 100000
else
    bad "no C adapter at $ADAPTER (make builds it)"
fi

# Python adapters (NumPy: Debian's python3-numpy, which install-deps.sh installs)
PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
    bad "no python3 with numpy (sh install-deps.sh installs python3-numpy)"
else
    A="$PY tests/exec/adapter.py"
    for s in sd specinfer rrs kseq; do
        expect 0 "== PASS at p >= 1e-06: 2 passed" -- "$SPECDEC" certify --exec "$A $s" --scheme $s -k 3 --pair "$PAIR" --pair zipf:50,1.2,0.7 --samples 30000
    done
    # every planted bug rejected (samples: a few times what make bench-exec finds each needs)
    for b in rrs-remove-first:rrs:8000 ratio-inverted:specinfer:8000 residual-unnormalised:specinfer:8000 \
             correction-from-target:specinfer:8000 kseq-low-gamma:kseq:8000 specinfer-last-round:specinfer:60000; do
        bug=${b%%:*}; rest=${b#*:}; s=${rest%%:*}; n=${rest#*:}
        expect 1 "reproduce: specdec certify --exec .*--bug $bug' --scheme $s --pair $PAIR -k 3" -- \
            "$SPECDEC" certify --exec "$A $s --bug $bug" --scheme $s -k 3 --pair "$PAIR" --samples $n
    done
    # bugs only some pairs expose: the old default pairs (full supports, k = 2 and 3) pass
    # them, the default plan (family.h) rejects each on the case of its class
    OLD="--pair $PAIR --pair zipf:50,1.2,0.7 --pair bernoulli:0.3,0.6 -k 2,3"
    for b in residual-draft-support:zipf:50,1.2,0.7,10 zero-target-accepted:trunc:50,1.2,1.4,0,1,0,0.8 \
             rounds-capped:dirichlet:20,0.5,7; do
        bug=${b%%:*}; fam=${b#*:}
        expect 0 "== PASS at p >= 1e-06: 6 passed" -- "$SPECDEC" certify --exec "$A specinfer --bug $bug" --scheme specinfer $OLD --samples 20000
        expect 1 "reproduce: specdec certify --exec .*--bug $bug' --scheme specinfer --pair $fam -k" -- \
            "$SPECDEC" certify --exec "$A specinfer --bug $bug" --scheme specinfer --samples 12000
    done
    # a crash after the first pair: its row is kept, the error names the pair and the exit
    out=$("$SPECDEC" certify --exec "$A specinfer --die-after 2500" --scheme specinfer --pair "$PAIR" --pair zipf:50,1.2,0.7 --samples 2000 2>&1); rc=$?
    [ $rc = 1 ] && ok || bad "crash: exit $rc"
    printf '%s' "$out" | grep -q "^dirichlet:6,1,2385 .*PASS" && ok || bad "crash: first pair's row lost: $out"
    printf '%s' "$out" | grep -q "pair zipf:50,1.2,0.7, V = 50, k = 2: the program closed its output after 500 of 1024 answers (exited with status 3)" \
        && ok || bad "crash: message: $out"
    # a hang: killed at the time limit, not waited for
    t0=$(date +%s)
    expect 1 "no answer for 1 s .* after 100 of 1024 answers: killed" -- timeout 30 "$SPECDEC" certify --exec "$A sd --hang-after 100" --scheme sd --timeout 1
    [ $(( $(date +%s) - t0 )) -lt 10 ] && ok || bad "hang: the run took $(( $(date +%s) - t0 )) s"
fi
# a stratified sampler: it cycles through the target's 10 tokens, ignoring its seed and
# the drafts, so every count is exact: too good to be independent draws (exit 4)
expect 4 "== TOO-GOOD at p >= 1e-06: 0 passed, 0 failed, 0 inconclusive, 1 too good" -- "$SPECDEC" certify \
    --exec 'n=0; while read w rest; do [ "$w" = case ] && echo $((n % 10)) 0 && n=$((n + 1)); done' --pair uniform:20,2 --samples 10000
# garbage, impossible answers, a program that is not there or does not read
expect 1 "answered 'hello' to case 1: expected 'TOKEN ACCEPTED'" -- "$SPECDEC" certify --exec "yes hello" --pair "$PAIR"
expect 1 "answered '7 0' to case 1: expected 'TOKEN ACCEPTED' with TOKEN in 0..5" -- "$SPECDEC" certify --exec "yes '7 0'" --pair "$PAIR"
expect 1 "marked accepted but is none of the case's 2 drafts" -- "$SPECDEC" certify --exec "yes '1 1'" --pair "$PAIR"
expect 1 "exited with status 127" -- "$SPECDEC" certify --exec "/nonexistent/sampler" --pair "$PAIR"
expect 1 "after 0 of 1024 answers" -- "$SPECDEC" certify --exec "true" --pair "$PAIR"

# certify --decoder. Positive checks and negative controls at the same size (200 runs of
# prompt "The sea", where the pair test has power about 1 against the planted argmax-draft
# bug): specdec's own sampler and its speculative decoder pass with hashed seeds, with
# the power asserted (two tokens a text: the test of every position has no late position
# to look at, its late bugs waived); a constant decoder and the sampler at another
# temperature than claimed fail.
G="$SPECDEC generate --model data/models/target.gguf --prompt {prompt} --max-tokens 2 --seed {seed} --ids --threads 1"
S="$SPECDEC decode --target data/models/target.gguf --draft data/models/draft.gguf --prompt {prompt} --max-tokens 2 --seed {seed} --ids --threads 1 --quiet"
L="$(dirname "$SPECDEC")/tests/exec/lcg_decoder data/models/target.gguf {prompt} {seed}"
T="--target data/models/target.gguf"
P="--draft data/models/draft.gguf --planted argmax-draft"
D="$T --prompt Ishmael --samples 100"
expect 0 "usage: specdec certify --decoder" -- "$SPECDEC" certify --decoder x --help
expect 0 "INCONCLUSIVE  3" -- "$SPECDEC" certify --decoder x --help
expect 2 "needs --target" -- "$SPECDEC" certify --decoder x --prompt y
POWER="power           \(0\.9[0-9][0-9]\|1\.000\) against the planted bug"
out=$("$SPECDEC" certify --decoder "$G 2>/dev/null" $T --prompt "The sea" --samples 200 $P 2>&1); rc=$?
[ $rc = 0 ] && printf '%s' "$out" | grep -q "^== PASS at p >= 1e-06$" && printf '%s' "$out" | grep -q "$POWER" \
    && printf '%s' "$out" | grep -q "^every position .* late-correction: waived" && ok || bad "generate at 200 runs: exit $rc, $out"
expect 1 "== FAIL at p >= 1e-06" -- "$SPECDEC" certify --decoder "echo 0 0" $T --prompt "The sea" --samples 200 $P
expect 1 "== FAIL at p >= 1e-06" -- "$SPECDEC" certify --decoder "$G --temperature 0.6 2>/dev/null" $T --prompt "The sea" --samples 200 $P
# specdec's speculative decoder (K-SEQ trees: its sequences may share their first token)
expect 0 "== PASS at p >= 1e-06" -- "$SPECDEC" certify --decoder "$S --scheme spectr" $T --prompt "The sea" --samples 200 $P
# the constant decoder at 100 runs: its first token sits in the pool of small expected
# counts, where the tail test finds it (chi-square and G alone give p = 9e-4 and 5e-6)
expect 1 "tail p = 0$" -- "$SPECDEC" certify --decoder "echo 0 0" $D
expect 1 "== FAIL at p >= 1e-06" -- "$SPECDEC" certify --decoder "echo 0 0" $D
# no power: the same sampler at 100 runs, and without a planted bug to measure it against
expect 3 "== INCONCLUSIVE at p >= 1e-06: power 0.000 < 0.9 against the planted bug (pair test), about 800 runs give 0.9$" -- \
    "$SPECDEC" certify --decoder "$G 2>/dev/null" $D $P
expect 3 "== INCONCLUSIVE at p >= 1e-06: no planted bug" -- "$SPECDEC" certify --decoder "$G 2>/dev/null" $D --samples 20
# an exact decoder whose draws come from an LCG seeded with the run's seed (as llama.cpp's
# examples/speculative): consecutive seeds make a lattice, flagged too good; hashed
# seeds make independent runs, and it passes: at the same 600 runs, so that seeds
# 1..600 given back in place of the hashed ones fail this check
expect 4 "== TOO-GOOD at p >= 1e-06" -- "$SPECDEC" certify --decoder "$L" $T --prompt "The sea" --samples 600 --consecutive-seeds
expect 0 "== PASS at p >= 1e-06" -- "$SPECDEC" certify --decoder "$L" $T --prompt "The sea" --samples 600 $P
expect 2 "needs --draft" -- "$SPECDEC" certify --decoder x $T --prompt y --planted argmax-draft
# temperature 0: the law all on the argmax; greedy generate keeps it (no planted bug
# changes it: inconclusive), the sampler at temperature 1 claimed greedy fails
expect 3 "first token     1 cells, chi-square p = 1" -- "$SPECDEC" certify --decoder "$G --temperature 0 2>/dev/null" $T --prompt "The sea" --samples 20 --temperature 0 $P
expect 1 "== FAIL at p >= 1e-06" -- "$SPECDEC" certify --decoder "$G 2>/dev/null" $T --prompt "The sea" --samples 20 --temperature 0
expect 2 "temperature must be >= 0" -- "$SPECDEC" certify --decoder x $T --prompt y --temperature -1
# the seeds: hashed by default (each run's written by --seeds-out), S, S + 1, ... on request;
# the hash against splitmix64 computed here: run i's seed is 1 + mix(S, i) mod (2^31 - 1)
SEEDS=$(mktemp)
expect 1 "seeds: 1 + splitmix64 mix of (7, run index)" -- "$SPECDEC" certify --decoder "echo 0 0" $D --seed 7 --seeds-out "$SEEDS"
[ "$(grep -c '^[0-9]* 0 0$' "$SEEDS")" = 100 ] && [ "$(cut -d' ' -f1 "$SEEDS" | grep -v '#' | sort -u | wc -l)" = 100 ] \
    && ok || bad "--seeds-out: $(head -3 "$SEEDS")"
want=$(python3 -c '
M = (1 << 64) - 1
def sm(x):
    x = (x + 0x9e3779b97f4a7c15) & M
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M
    return x ^ (x >> 31)
print(" ".join(str(1 + sm(sm(7) ^ i) % (2**31 - 1)) for i in range(100)))' 2>/dev/null)
[ -n "$want" ] && [ "$(grep -v '#' "$SEEDS" | cut -d' ' -f1 | sort -n | tr '\n' ' ')" = "$(echo $want | tr ' ' '\n' | sort -n | tr '\n' ' ')" ] \
    && ok || bad "--seeds-out: the seeds are not 1 + splitmix64(splitmix64(7) ^ i) mod (2^31 - 1): $(head -3 "$SEEDS")"
expect 1 "seeds 5 to 104 (consecutive)" -- "$SPECDEC" certify --decoder "echo 0 0" $D --seed 5 --consecutive-seeds
rm -f "$SEEDS"
expect 2 "--decoder needs a command" -- "$SPECDEC" certify --decoder "" $D
expect 2 "--ids decodes once" -- "$SPECDEC" decode --target x --draft y --ids --json
expect 2 "--ids runs one scheme of fixed shape (not gt)" -- \
    "$SPECDEC" decode --target data/models/target.gguf --draft data/models/draft.gguf --scheme gt --ids
# the power against a planted bug, from the exact laws (a decoder that always says "0 0")
expect 1 "power           1.000 against the planted bug (argmax draft verified as drawn at t2" -- \
    "$SPECDEC" certify --decoder "echo 0 0" $D --draft data/models/draft.gguf --planted argmax-draft --samples 1000 --power 20
# two jobs at a time: whichever of the first two runs ends first is the one reported
expect 1 "the run with seed [0-9]* printed 'hello" -- "$SPECDEC" certify --decoder "echo hello" $D
expect 1 "seed 4 exited with status 3" -- "$SPECDEC" certify --decoder "[ {seed} = 4 ] && exit 3; echo 1 2" --jobs 1 --consecutive-seeds $D
expect 1 "== INCOMPLETE: 3 of 100 runs" -- "$SPECDEC" certify --decoder "[ {seed} = 4 ] && exit 3; echo 1 2" --jobs 1 --consecutive-seeds $D
expect 1 "seed [0-9]* took over 1 s (--timeout): killed" -- timeout 30 "$SPECDEC" certify --decoder "sleep 20" --timeout 1 $D
# --json: one object on stdout (the text on stderr), the exit status the verdict's
json_verdict() { # CODE VERDICT command...: exit CODE and stdout one object with that verdict
    code=$1 v=$2; shift 2
    o=$("$@" 2>/dev/null); rc=$?
    printf '%s' "$o" | python3 -c 'import json, sys; o = json.load(sys.stdin); v = sys.argv[1]
sys.exit(not (o["command"] == "certify" and o["version"] and o["verdict"] == v and o["pass"] == (v == "PASS")
              and len(o["results"]) > 0))' "$v" && [ $rc = "$code" ] && ok || bad "exit $rc (want $code), not a $v object: $* -> $(printf '%s' "$o" | head -c 300)"
}
json_verdict 1 FAIL "$SPECDEC" certify --decoder "echo 0 0" $D --json
json_verdict 0 PASS "$SPECDEC" certify --decoder "$G 2>/dev/null" $T --prompt "The sea" --samples 200 $P --json
json_verdict 3 INCONCLUSIVE "$SPECDEC" certify --decoder "$G 2>/dev/null" $D --samples 20 --json

# the filters: generate's texts (4 tokens) recorded once, certified at the settings they
# were made with, at another order (--filter-first: llama.cpp's, the filters before the
# temperature) and with other filters. At T = 0.5, top-p 0.8 the two orders differ; with
# top-k alone they agree (a temperature keeps the order of the tokens)
F=$(mktemp -d)
i=1
while [ $i -le 100 ]; do
    "$SPECDEC" generate --model data/models/target.gguf --prompt "The sea" --max-tokens 4 --seed $((i * 7919 + 5)) \
        --ids --threads 1 --temperature 0.5 --top-k 40 --top-p 0.8 2>/dev/null >> "$F/kp"
    "$SPECDEC" generate --model data/models/target.gguf --prompt "The sea" --max-tokens 4 --seed $((i * 7919 + 5)) \
        --ids --threads 1 --temperature 0.5 --top-k 20 2>/dev/null >> "$F/k"
    i=$((i + 1))
done
certf() { # FILE ARGS...: its texts, run i the file's line i, certified with ARGS
    f=$1; shift
    "$SPECDEC" certify --decoder "sed -n {seed}p $f" $T --prompt "The sea" --positions 4 --consecutive-seeds --samples 100 "$@"
}
expect 3 "no planted bug" -- certf "$F/kp" --temperature 0.5 --top-k 40 --top-p 0.8
expect 1 "== FAIL at p >= 1e-06" -- certf "$F/kp" --temperature 0.5 --top-k 40 --top-p 0.8 --filter-first
expect 1 "tokens of target probability 0" -- certf "$F/kp" --temperature 0.5 --top-k 20 --top-p 0.8
expect 3 "no planted bug" -- certf "$F/k" --temperature 0.5 --top-k 20
expect 3 "no planted bug" -- certf "$F/k" --temperature 0.5 --top-k 20 --filter-first
expect 1 "tokens of target probability 0" -- certf "$F/k" --temperature 0.5 --top-k 5 --filter-first
rm -rf "$F"

# the test of every position (--positions, default 32) on tests/exec/spec_decoder, a chain
# speculative decoder with planted bugs: exact, it rejects nowhere, and 100 runs are too
# few for power against late-correction (the correction drawn from the target from the
# second rejection on: the first rejected block, all the pair can see, is right).
# late-correction itself fails at 300 runs of seed 1 by the mean of u after the first
# block, and at seed 2 (where the test of every position does not reject) is
# inconclusive, never a pass; a target cache not rolled back after a rejection fails at
# 100 runs. CERTIFY.md's table over 10 seeds: tests/bench/certify-decoder.sh.
SD="$(dirname "$SPECDEC")/tests/exec/spec_decoder data/models/target.gguf data/models/draft.gguf {prompt} {seed}"
out=$("$SPECDEC" certify --decoder "$SD 32" $T --prompt "The sea" --samples 100 $P 2>&1); rc=$?
[ $rc = 3 ] && printf '%s' "$out" | grep -q "^PIT (all)       3200 tokens at positions 1 to 32 of 100 runs" \
    && printf '%s' "$out" | grep -q "no position rejects alone" \
    && printf '%s' "$out" | grep -q "^== INCONCLUSIVE at p >= 1e-06: .*power 0\.[0-8][0-9]* < 0.9 against late-correction (every position)" \
    && ok || bad "spec_decoder at 100 runs: exit $rc, $out"
out=$("$SPECDEC" certify --decoder "$SD 32 late-correction" $T --prompt "The sea" --samples 300 $P 2>&1); rc=$?
[ $rc = 1 ] && printf '%s' "$out" | grep -q "^== FAIL at p >= 1e-06" && ok || bad "late-correction: exit $rc, $out"
# the old tests alone: first token and pair above 1e-6; the PIT's mean of u after the first block below
printf '%s' "$out" | awk '/^first token|^pair/ { for (i = 1; i <= NF; i++) if ($i == "p" && $(i + 2) + 0 < 1e-6) bad = 1 }
    /positions 3 on/ { for (i = 1; i <= NF; i++) if ($i == "p" && $(i + 2) + 0 < 1e-6) late = 1 }
    END { exit !(late && !bad) }' && ok || bad "late-correction: the pair test rejects, or the PIT after block 1 does not: $out"
expect 3 "== INCONCLUSIVE at p >= 1e-06: power 0\.[0-8][0-9]* < 0.9 against late-correction" -- \
    "$SPECDEC" certify --decoder "$SD 32 late-correction" $T --prompt "The sea" --samples 300 $P --seed 2
expect 1 "== FAIL at p >= 1e-06" -- "$SPECDEC" certify --decoder "$SD 32 no-rollback" $T --prompt "The sea" --samples 100
# each part of the family, by a decoder that only it catches (the others' p-values
# printed above 1e-6 / 4): the draft's token at the last position (the positions'),
# correlated draws (serial independence), a greedy third token that is not the argmax
# (a token of target probability 0: no u; at 20 runs the u's alone would not reject)
out=$("$SPECDEC" certify --decoder "$SD 4 last-draft" $T --prompt "The sea" --samples 300 --positions 4 $P 2>&1); rc=$?
[ $rc = 1 ] && printf '%s' "$out" | grep -q "first position that rejects alone: 4" \
    && printf '%s' "$out" | awk '/^PIT \(all\)/ { for (i = 1; i <= NF; i++) if ($i == "p" && $(i + 2) + 0 < 2.5e-7) bad = 1 } END { exit bad }' \
    && ok || bad "last-draft: exit $rc, not position 4 alone: $out"
out=$("$SPECDEC" certify --decoder "$SD 8 correlated" $T --prompt "The sea" --samples 100 --positions 8 $P 2>&1); rc=$?
[ $rc = 1 ] && printf '%s' "$out" | grep -q "no position rejects alone" \
    && printf '%s' "$out" | awk '/^PIT \(all\)/ { n = 0; for (i = 1; i <= NF; i++) if ($i == "p" && ++n <= 3 && $(i + 2) + 0 < 2.5e-7) bad = 1
                                                  if (!match($0, /z = [0-9.]+, p = [0-9.e-]+$/) || $NF + 0 >= 2.5e-7) bad = 1 } END { exit bad }' \
    && ok || bad "correlated: exit $rc, not the serial test alone: $out"
G3="$SPECDEC generate --model data/models/target.gguf --prompt {prompt} --max-tokens 3 --seed {seed} --ids --threads 1 --temperature 0"
expect 1 "20 tokens of target probability 0, the first at position 3 of run" -- "$SPECDEC" certify \
    --decoder "$G3 2>/dev/null | awk '{ \$3 = (\$3 + 1) % 4096; print }'" $T --prompt "The sea" --samples 20 --positions 3 --temperature 0
expect 2 "positions must be 2 to 4096" -- "$SPECDEC" certify --decoder x $T --prompt y --positions 1
expect 2 "samples x --positions must be at most 1e8" -- "$SPECDEC" certify --decoder x $T --prompt y --positions 4096 --samples 1e5
expect 2 "usage: spec_decoder" -- $(dirname "$SPECDEC")/tests/exec/spec_decoder a b c 1 32 nope

finish "cli certify --exec"
