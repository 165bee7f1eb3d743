#!/bin/sh
# Command-line tests of 'specdec decode': the contract, the table and its JSON, greedy
# identity (--check) for every scheme on tiny models trained here, and bad input
# (vocabularies, prompts, shapes, budgets, files).
# usage: decode.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"

tiny_models "$T" 48
printf 'Call me\nSome years ago\n\nnever mind how\n' > "$T/p.txt"
D="--target $T/m.gguf --draft $T/d.gguf --prompts $T/p.txt --quiet"

# --- the contract ---
expect 0 "usage: specdec decode" -- "$SPECDEC" decode --help
expect 0 "gt-dynamic" -- "$SPECDEC" decode --help
expect 2 "--target T.gguf and --draft D.gguf are required" -- "$SPECDEC" decode --target "$T/m.gguf"
expect 2 "--max-tokens 0: nothing to decode" -- "$SPECDEC" decode $D --max-tokens 0
expect 2 "--temperature -1" -- "$SPECDEC" decode $D --temperature -1
expect 2 "runs at temperature 0" -- "$SPECDEC" decode $D --check --temperature 1
expect 2 "not both" -- "$SPECDEC" decode $D --scheme rrs --shape chain:2 --optimize gt
expect 2 "picks its own schemes" -- "$SPECDEC" decode $D --gt-sweep 1,2 --scheme sd
# what the command line gets wrong is a usage error (exit 2), found before a model loads
expect 2 "unknown scheme 'nope'" -- "$SPECDEC" decode $D --scheme nope
expect 2 "'rrs' is a token scheme: give a shape" -- "$SPECDEC" decode $D --scheme rrs
expect 2 "goes with one scheme" -- "$SPECDEC" decode $D --scheme sd,rrs --shape chain:2

# --- the table: ar and every scheme, measured and predicted ---
out=$("$SPECDEC" decode $D --scheme all --max-tokens 8 2>&1)
rc=$?
[ $rc = 0 ] && ok || { bad "decode --scheme all: exit $rc"; echo "$out" | tail -5; }
for s in ar sd spectr spectr-otm mcsd mcsd-wor rsd-c rsd-s gt gt-dynamic throughput; do
    printf '%s\n' "$out" | grep -q "^$s " && ok || bad "no row '$s' in the table"
done
printf '%s\n' "$out" | grep -q "costs (ms): M_T(1)" && ok || bad "no cost line"
expect 0 '"predicted_speedup"' -- "$SPECDEC" decode $D --scheme sd,rsd-s --max-tokens 6 --json
expect 0 '"scheme": "gt x0.5"' -- "$SPECDEC" decode $D --gt-sweep 0.5,2 --max-tokens 6 --json
# every prediction with its interval: in the JSON, the TSV (lo <= pred <= hi) and the table
out=$("$SPECDEC" decode $D --scheme sd,rsd-s --max-tokens 6 --json --level 0.8 --tsv "$T/iv.tsv" 2>&1)
printf '%s' "$out" | grep -q '"predicted_interval": {"level": 0.8, "block_efficiency": \[' && ok || bad "no predicted_interval"
printf '%s' "$out" | grep -q '"c_interval": \[' && ok || bad "no c_interval"
awk -F '\t' '!/^#/ && $1 != "ar" { n++; if (!($15 <= $9 && $9 <= $16 && $19 <= $11 && $11 <= $20)) bad++ }
    END { exit !(n == 2 && !bad) }' "$T/iv.tsv" && ok || bad "--tsv: intervals missing or not around the prediction"
# against the predicted best, paired by prompt: the best at 1 [1, 1], the other at its
# ratio of predictions, inside its interval (JSON, TSV and the table's footer)
printf '%s' "$out" | grep -q '"vs_best": {"scheme": "' && ok || bad "no vs_best in the JSON"
awk -F '\t' '!/^#/ && $1 != "ar" { n++; one += ($25 == 1 && $26 == 1 && $27 == 1)
        other += ($25 < 1 && $26 <= $25 && $25 <= $27) || ($25 == 1 && $26 == 1 && $27 == 1 && one > 1) }
    END { exit !(n == 2 && one >= 1 && one + other == 2) }' "$T/iv.tsv" && ok || bad "--tsv: vs_best columns wrong"
# the runs' shift: the schemes' mean log(measured / predicted speedup), recomputed here;
# what the intervals allowed it: z(0.9) sqrt(drift_sd^2 + prompt_sd^2) at --level 0.8
printf '%s' "$out" | tr ',' '\n' | awk -F ': ' '$1 ~ /^ *"speedup"$/ && $2 !~ /\[/ { m[++nm] = $2 }
    $1 ~ /"predicted_speedup"$/ { p[++np] = $2 } $1 ~ /"shift"$/ { s = $2 } $1 ~ /"shift_allowed"$/ { a = $2 }
    $1 ~ /"drift_sd"$/ { d = $2 } $1 ~ /"prompt_sd"$/ { q = $2 }
    END { for (i = 1; i <= nm; i++) t += log(m[i] / p[i])
          w = 1.2815515655446004 * sqrt(d * d + q * q)
          exit !(nm == 2 && np == 2 && s != "" && (s - t / nm) ^ 2 < 1e-8 && w > 0 && (a / w - 1) ^ 2 < 1e-10) }' \
    && ok || bad "--json: shift or shift_allowed not as documented"
expect 0 "speedup over the predicted best" -- "$SPECDEC" decode $D --scheme sd,rsd-s --max-tokens 6
expect 0 "^# the runs' shift: their schemes stood alike [-+][0-9.]*% from their predictions" -- \
    "$SPECDEC" decode $D --scheme sd,rsd-s --max-tokens 6
expect 0 'pred \[interval\]' -- "$SPECDEC" decode $D --scheme sd --max-tokens 6
expect 0 'gt sweep: gt.s measured optimum at threshold' -- "$SPECDEC" decode $D --gt-sweep 0.5,2 --max-tokens 6
expect 2 "level 1.5" -- "$SPECDEC" decode $D --scheme sd --level 1.5
# the drift the intervals draw from: the calibration's pooled with --drift's by degrees of
# freedom (8 prompts: 4 batches of 2, 3; 10 runs: 9), the calibration's alone (none), or
# --drift's alone where the calibration has too few rounds for batches (3 prompts)
expect 0 "(--drift: 4.05% known over 66 runs, pooled with" -- "$SPECDEC" decode $D --scheme sd --max-tokens 6
i=0
while [ $i -lt 8 ]; do echo "Call me $i"; i=$((i + 1)); done > "$T/p8.txt"
for case in "p8 2:10" "p8 none" "p 2:10"; do
    set -- $case
    out=$("$SPECDEC" decode $D --prompts "$T/$1.txt" --scheme sd,rsd-s --max-tokens 6 --json --drift $2 2>&1)
    printf '%s' "$out" | tr ',' '\n' | awk -v p=$1 -v dr=$2 -F ': ' '
        /"drift_sd"/ { d = $2 } /"drift_calibration_sd"/ { c = $2 } /"drift_prior"/ { pr = $2 } /"drift_runs"/ { n = $2 }
        END { want = dr == "none" ? c : p == "p" ? 0.02 : sqrt((9 * 0.02 * 0.02 + 3 * c * c) / 12)
              ok = (dr == "none" ? pr == 0 && n == 0 : pr == 0.02 && n == 10)
              exit !(ok && d != "" && (d - want) ^ 2 < 1e-10) }' && ok || bad "--drift $2 on $1.txt: drift_sd not pooled as documented"
done
for dr in 4 x:5 4:1 -1:5 100:9 4:; do
    expect 2 "--drift" -- "$SPECDEC" decode $D --scheme sd --drift "$dr"
done
# the machine's drift record: --drift-log appends a run's shift under this machine and
# pair; --drift FILE takes its rows' sample sd over their number (the calibration's 3
# prompts make no batches: drift_sd is that sd alone)
expect 1 "$T/none.tsv: cannot open" -- "$SPECDEC" decode $D --scheme sd --max-tokens 6 --drift "$T/none.tsv"
expect 1 "$T/no/dl.tsv: cannot append to it: No such file" -- "$SPECDEC" decode $D --scheme sd --max-tokens 6 \
    --drift-log "$T/no/dl.tsv"
for seed in 1 2 3; do
    "$SPECDEC" decode $D --scheme sd,rsd-s --max-tokens 6 --seed $seed --drift-log "$T/dl.tsv" --json > "$T/dl$seed.json" 2>&1 ||
        bad "--drift-log: exit $?"
done
# one row a run: this machine, the pair's file names, the shift decode printed
awk -F '\t' '!/^#/ && $1 != "machine" { n++; if ($2 != "m.gguf + d.gguf" || $1 !~ /thread/) bad = 1 } END { exit !(n == 3 && !bad) }' \
    "$T/dl.tsv" && ok || bad "--drift-log: want 3 rows of machine and pair 'm.gguf + d.gguf'"
for seed in 1 2 3; do
    sh=$(tr ',' '\n' < "$T/dl$seed.json" | awk -F ': ' '/"shift"/ { print $2; exit }')
    awk -F '\t' -v s="$sh" -v r=$((seed + 3)) 'NR == r { exit !((($3 - s) ^ 2) < 1e-10) }' "$T/dl.tsv" && ok ||
        bad "--drift-log: row $seed's shift is not the run's ($sh)"
done
out=$("$SPECDEC" decode $D --scheme sd --max-tokens 6 --json --drift "$T/dl.tsv" 2>&1)
want=$(awk -F '\t' '!/^#/ && $1 != "machine" { n++; a += $3; q += $3 * $3 } END { printf "%.9g", sqrt((q - a * a / n) / (n - 1)) }' "$T/dl.tsv")
printf '%s' "$out" | tr ',' '\n' | awk -v w="$want" -v f="\"$T/dl.tsv\"" -F ': ' '/"drift_sd"/ { d = $2 }
    /"drift_prior"/ { p = $2 } /"drift_runs"/ { n = $2 } /"drift_file"/ { g = $2 }
    END { exit !(n == 3 && g == f && (p - w) ^ 2 < 1e-10 && (d - w) ^ 2 < 1e-10) }' && ok ||
    bad "--drift FILE: drift_prior and drift_sd not the record's sd ($want) over 3 runs, or drift_file not the file"
expect 0 '"drift_file": null' -- "$SPECDEC" decode $D --scheme sd --max-tokens 6 --json
expect 0 "(--drift $T/dl.tsv: [0-9.]*% over its 3 runs of this machine and pair" -- \
    "$SPECDEC" decode $D --scheme sd --max-tokens 6 --drift "$T/dl.tsv"
# another machine (1 thread, not 2), another pair, a broken row: said, nothing run
expect 1 "0 runs of machine '.*; 1 thread' and pair 'm.gguf + d.gguf' (of 3 rows): need 2 or more" -- \
    "$SPECDEC" decode $D --scheme sd --max-tokens 6 --threads 1 --drift "$T/dl.tsv"
expect 1 "0 runs of machine .* and pair 'm.gguf + m.gguf'" -- \
    "$SPECDEC" decode --target "$T/m.gguf" --draft "$T/m.gguf" --prompts "$T/p.txt" --quiet --scheme sd --drift "$T/dl.tsv"
printf 'a machine\tm.gguf + d.gguf\tnot-a-number\n' >> "$T/dl.tsv"
expect 1 "$T/dl.tsv:7: the shift is not a finite number" -- "$SPECDEC" decode $D --scheme sd --drift "$T/dl.tsv"
printf 'one field only\n' > "$T/bad.tsv"
expect 1 "$T/bad.tsv:1: want machine, pair and shift" -- "$SPECDEC" decode $D --scheme sd --drift "$T/bad.tsv"
expect 1 "make cuda" -- "$SPECDEC" decode $D --scheme sd --device cuda
expect 0 "^rrs  *kconfig:2,2" -- "$SPECDEC" decode $D --scheme rrs --shape kconfig:2,2 --max-tokens 6
expect 0 "^kseq .*parents:" -- "$SPECDEC" decode $D --scheme kseq --optimize throughput --max-tokens 6

# --- greedy identity: every scheme's tokens are ar's ---
expect 0 "check: PASS: every scheme's greedy tokens equal ar's on 3 prompts" -- \
    "$SPECDEC" decode $D --scheme sd,spectr,mcsd,mcsd-wor,rsd-c,rsd-s,gt,gt-dynamic,throughput --check --max-tokens 12
expect 0 '"identical": true' -- "$SPECDEC" decode $D --scheme sd --check --max-tokens 6 --json

# --- ParallelSpec: a parallel drafter trained here (the draft plus 2 [MASK] tokens) ---
"$SPECDEC" train --corpus "$T/c.txt" --teacher "$T/m.gguf" --init "$T/d.gguf" --parallel 2 --groups 8 \
    --batch 2 --steps 2 --eval-tokens 64 --threads 1 --out "$T/par.gguf" --log "$T/par.tsv" >/dev/null 2>&1 \
    && ok || bad "train --parallel 2"
grep -q "val_accept_mask2" "$T/par.tsv" && ok || bad "no per-mask acceptance in the parallel log"
P="$D --parallel-draft $T/par.gguf"
expect 1 "ptree:2,2,1,1.*\(3 .*\)\|draft at most 3 positions" -- "$SPECDEC" decode $P --scheme parallel-tree --max-tokens 6
expect 0 "^sd  *parallel:3" -- "$SPECDEC" decode $P --scheme sd --shape parallel:3 --max-tokens 6
expect 0 "^parallel  *parallel:3" -- "$SPECDEC" decode $P --scheme parallel --shape parallel:3 --max-tokens 6
expect 0 "^specinfer  *ptree:2,1,1" -- "$SPECDEC" decode $P --scheme specinfer --shape ptree:2,1,1 --max-tokens 6
expect 0 "check: PASS" -- "$SPECDEC" decode $P --scheme sd --shape parallel:3 --check --max-tokens 8
expect 0 "check: PASS" -- "$SPECDEC" decode $P --scheme rrs --shape ptree:2,2,1 --check --max-tokens 8
out=$("$SPECDEC" decode $P --parallel-sweep 1-3 --max-tokens 6 --tsv "$T/par-sweep.tsv" 2>&1)
rc=$?
[ $rc = 0 ] && ok || { bad "decode --parallel-sweep 1-3: exit $rc"; echo "$out" | tail -5; }
for L in 1 2 3; do
    printf '%s\n' "$out" | grep -q "^parallel L=$L " && printf '%s\n' "$out" | grep -q "^sequential L=$L " && ok \
        || bad "no parallel/sequential rows for L=$L"
    printf '%s\n' "$out" | grep -q "^  $L  *[0-9.]* .*\(parallel\|seq\) *\(parallel\|seq\) \(c [<>] [0-9.]*\|every c\|no c\) .*\(c [<>] [0-9.]*\|every c\|no c\)$" && ok \
        || bad "no crossover row for L=$L"
done
[ "$(grep -c '^parallel L=' "$T/par-sweep.tsv")" = 3 ] && ok || bad "--tsv: not 3 parallel rows"
expect 1 "not a parallel drafter" -- "$SPECDEC" decode $D --parallel-draft "$T/d.gguf" --scheme parallel --max-tokens 6
expect 1 "$T/none.gguf" -- "$SPECDEC" decode $D --parallel-draft "$T/none.gguf" --scheme parallel --max-tokens 6
expect 2 "parallel-sweep 3-1" -- "$SPECDEC" decode $P --parallel-sweep 3-1
expect 2 "picks its own schemes" -- "$SPECDEC" decode $P --parallel-sweep 1-2 --scheme sd

# one prompt: too few for the paired intervals, which JSON gives as null and the table as none
out=$("$SPECDEC" decode $D --prompt "Call me" --scheme sd,rsd-s --max-tokens 6 --json 2>&1)
printf '%s' "$out" | python3 -c 'import json, sys; r = json.load(sys.stdin)["results"]; sys.exit(r[1]["vs_best"]["interval"] is not None)' \
    && ok || { bad "decode --prompt --json: not JSON, or an interval from one prompt"; printf '%s\n' "$out" | grep -n nan | head -3; }
expect 0 "0\.[0-9]* \[none\] .* -$" -- "$SPECDEC" decode $D --prompt "Call me" --scheme sd,rsd-s --max-tokens 6
# counts in the singular when they are one
expect 0 "^# 1 prompt, up to 1 token each, .*, 1 thread, seed" -- "$SPECDEC" decode $D --prompt "Call me" --scheme sd --max-tokens 1 --threads 1
# --help names every option and every printed column
for w in "--ids" "d-ms (drafting per block" "and its pred (the cost model's)" "err%" "verif%"; do
    "$SPECDEC" decode --help | grep -q -- "$w" && ok || bad "decode --help lacks '$w'"
done
# --calibrate past the prompts is said, not silently capped
expect 0 "calibrate 20: there are only 3 prompts" -- "$SPECDEC" decode $D --scheme sd --max-tokens 4 --calibrate 20
# the default prompts from another folder: found beside the binary (the repository's
# data/: the prompt read is the shipped one, too long for these tiny models), and a
# binary with no data anywhere says what to pass
ABS=$(cd "$(dirname "$SPECDEC")" && pwd)/$(basename "$SPECDEC")
M="--target $T/m.gguf --draft $T/d.gguf --quiet --scheme sd --max-tokens 4 --n-prompts 1"
expect 1 "prompt 1 has 39 tokens" -- sh -c "cd '$T' && '$ABS' decode $M"
mkdir -p "$T/bin" && cp "$SPECDEC" "$T/bin/specdec"
if [ -n "${SPECDEC_TEST_QEMU:-}" ]; then
    # under qemu-user (tests/run-arm.sh) $SPECDEC is a twin script "exec qemu PROGRAM":
    # the copy must be of the ARM program, run by a twin of its own, or it finds the data
    arm=$(sed -n 's/^exec [^ ]* \([^ ]*\) .*/\1/p' "$SPECDEC")
    cp "$arm" "$T/bin/specdec.arm" && sed "s#$arm#$T/bin/specdec.arm#" "$SPECDEC" > "$T/bin/specdec"
fi
expect 1 "pass --prompts FILE or --prompt TEXT" -- sh -c "cd '$T' && '$T/bin/specdec' decode $M"

# --- bad input: clear errors, nothing written ---
expect 1 "must share one" -- "$SPECDEC" decode --target "$T/m.gguf" --draft "$T/other.gguf" --prompts "$T/p.txt"
expect 1 "$T/none.gguf" -- "$SPECDEC" decode --target "$T/none.gguf" --draft "$T/d.gguf" --prompts "$T/p.txt"
expect 1 "prompts file: .*$T/none.txt" -- "$SPECDEC" decode --target "$T/m.gguf" --draft "$T/d.gguf" --prompts "$T/none.txt"
printf '\n\n' > "$T/empty.txt"
expect 1 "no prompt" -- "$SPECDEC" decode --target "$T/m.gguf" --draft "$T/d.gguf" --prompts "$T/empty.txt"
long=$(i=0; while [ $i -lt 60 ]; do printf 'Call me Ishmael. '; i=$((i + 1)); done)
expect 1 "prompt 1 has .* tokens: .*the prompt alone is too long" -- "$SPECDEC" decode --target "$T/m.gguf" --draft "$T/d.gguf" --prompt "$long"
expect 1 "past the context of 48 (use a smaller shape)" -- "$SPECDEC" decode $D --scheme rrs --shape kconfig:4,4,2
expect 2 "k-configuration has 0 children" -- "$SPECDEC" decode $D --scheme rrs --shape kconfig:0
expect 2 "gt-sweep '1,x'" -- "$SPECDEC" decode $D --gt-sweep 1,x
expect 2 "unknown scheme 'nope'" -- "$SPECDEC" decode --target /nonexistent.gguf --draft /nonexistent.gguf --scheme nope

# --text: at temperature 0 each scheme's text is the target's own greedy text (generate's)
S="--target data/models/target.gguf --draft data/models/draft.gguf --prompt Ishmael --max-tokens 24 --temperature 0 --quiet"
g=$("$SPECDEC" generate --model data/models/target.gguf --prompt Ishmael --max-tokens 24 --temperature 0 2>/dev/null)
"$SPECDEC" decode $S --scheme sd,rsd-s,gt --text > "$T/text.txt" 2>&1 || bad "decode --text failed: $(head -3 "$T/text.txt")"
for s in sd rsd-s; do
    d=$(awk -v s="$s" '/^== / { on = ($2 == s) ; next } on && /^prompt: / { p = 1; next } on && p' "$T/text.txt")
    [ -n "$g" ] && [ "$d" = "$g" ] && ok || bad "decode --text, $s: '$d', generate: '$g'"
done
grep -q "^prompt: Ishmael$" "$T/text.txt" && grep -q "^== gt: not run: its tree is built from a calibration" "$T/text.txt" &&
    ok || bad "decode --text: no prompt line or no word on gt: $(head -3 "$T/text.txt")"
expect 2 "no --gt-sweep, --parallel-sweep, --check, --json, --tsv, --cost-out or --ids" -- "$SPECDEC" decode $S --text --json

# --cost FILE reads what --cost-out wrote: no measurement (said on stderr), the costs
# reported are the file's, and the counts are the same run's
C="--target $T/m.gguf --draft $T/d.gguf --prompts $T/p.txt --scheme sd,rsd-c --max-tokens 12 --calibrate 2 --threads 1"
"$SPECDEC" decode $C --cost-out "$T/costs.tsv" --json > "$T/measured.json" 2> "$T/measured.err" || bad "decode --cost-out"
grep -q "measuring M_T(n), M_D(n)" "$T/measured.err" && ok || bad "decode: the measurement is not announced"
"$SPECDEC" decode $C --cost "$T/costs.tsv" --json > "$T/read.json" 2> "$T/read.err" || bad "decode --cost: $(cat "$T/read.err")"
grep -q "costs M_T(n), M_D(n) read from $T/costs.tsv (not measured)" "$T/read.err" && ! grep -q measuring "$T/read.err" &&
    ok || bad "decode --cost: stderr does not say the costs were read: $(cat "$T/read.err")"
python3 - "$T/costs.tsv" "$T/measured.json" "$T/read.json" <<'EOF2' && ok || bad "decode --cost: not the file's costs, or other counts"
import json, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
m, r = (json.load(open(f)) for f in sys.argv[2:])
mt = [float(x[1]) for x in rows]
same = all(abs(a - b) <= 1e-4 * b for a, b in zip(r["costs"]["m_t_ms"], mt)) and len(r["costs"]["m_t_ms"]) == len(mt)
counts = lambda o: [(x["tokens"], x["blocks"], x["accepted"], x["accepted_per_position"]) for x in o["results"]]
c = float(rows[0][2]) / float(rows[0][1])
sys.exit(not (same and counts(m) == counts(r) and abs(r["costs"]["c"] - c) <= 1e-5 * c))
EOF2
printf '1 2\n' > "$T/bad.tsv"
expect 1 "bad.tsv:1: expected 'n M_T(n) M_D(n)'" -- "$SPECDEC" decode $C --cost "$T/bad.tsv"
expect 1 "nonexistent.tsv: cannot open" -- "$SPECDEC" decode $C --cost "$T/nonexistent.tsv"
expect 2 "give one" -- "$SPECDEC" decode $C --cost "$T/costs.tsv" --cost-out "$T/x.tsv"

# vLLM's and llama.cpp's figures beside ours: drafted, accepted, their rate, per position
python3 - "$T/measured.json" <<'EOF2' && ok || bad "decode --json: acceptance per drafted token or per position inconsistent"
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    pos = r["accepted_per_position"]
    ok = (r["drafted"] > 0 and abs(r["draft_acceptance_rate"] - r["accepted"] / r["drafted"]) < 1e-12
          and abs(r["mean_acceptance_length"] - (1 + r["accepted"] / r["blocks"])) < 1e-12
          and sum(pos) == r["accepted"] and all(a >= b for a, b in zip(pos, pos[1:])) and pos[0] <= r["blocks"]
          and len(pos) == {"sd": 4, "rsd-c": 2}[r["scheme"]]
          and abs(r["mean_accepted"] - r["accepted"] / r["blocks"]) < 1e-5 * r["mean_accepted"] + 1e-12)
    if not ok:
        sys.exit("%s: %s" % (r["scheme"], r))
EOF2
expect 0 "^sd  *[0-9]*  *[0-9]*  *[0-9]*  *[0-9.]*  *[0-9.]*   *[0-9]* [0-9]* [0-9]* [0-9]*$" -- "$SPECDEC" decode $C --cost "$T/costs.tsv"
finish "cli decode"
