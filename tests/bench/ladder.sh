#!/bin/sh
# make bench-ladder: the draft's size, measured, and the draft picked by measured speedup.
# For each candidate draft against the target (LADDER_TARGET; the large target when
# data/models/large-target.gguf is here, with the drafts of data/models/build-large.sh and
# the shipped target and draft as they are; else the shipped target, with the ladder of
# data/models/ladder.sh and the shipped draft):
#   size       parameters (from its training log) and its share of the target's
#   quality    validation loss and KL to the target (the training log's last evaluation);
#              sd acceptance on replayed logits (specdec synth-log on the target's own
#              samples, then specdec replay --scheme sd: exact, with its 99.9% interval)
#   costs      c = M_D(1)/M_T(1) as decode measures it
#   schemes    decode --scheme all: every scheme's speedup over ar, predicted from the
#              calibration before the run and measured; the scheme the prediction picks
#              (the GT tree and the throughput-optimal tree are built at the measured costs)
#   table 4    SpecTr's Table 4 in kind: block efficiency of K x L in {1,2,4,8} x {4,8}
#              (decode --scheme kseq --shape spectr:K,L on the same prompts)
# Writes ladder.tsv, ladder-table4.tsv (each with a header: device, commit, command,
# date), and every decode's text output, into out/ladder/ (RECORD=1: paper-figs/ladder/,
# which make figs draws; for another target than the shipped one, ladder-TARGET/), then
# a summary: which draft the prediction picks and whether
# the measurement agrees.
# usage: tests/bench/ladder.sh [BUILD_DIR] [--quick]
#   --quick  1 prompt x 8 tokens, K x L in {1,2} x {2}, the shipped draft and ladder-d48
#            alone (the plumbing, in seconds; tests/cli/ladder.sh)
#   env: LADDER_PROMPTS (10), LADDER_TOKENS (48), LADDER_THREADS (2), LADDER_POSITIONS
#        (replayed positions per sequence, 200; 4 sequences), LADDER_TARGET and
#        LADDER_DRAFTS (names in data/models/ without .gguf), LADDER_OUT (the results folder)
# About 4 minutes on 2 idle cores. Timings wander by tens of percent on a shared machine:
# decode interleaves its runs prompt by prompt, and prints M_T(1) before and after.
set -eu
cd "$(dirname "$0")/../.."
BUILD=build QUICK=0
for a in "$@"; do
    case $a in
    --quick) QUICK=1 ;;
    -h|--help) sed -n '2,/^# About/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "ladder: unknown option '$a' (see --help)" >&2; exit 2 ;;
    *) BUILD=$a ;;
    esac
done
SD=$BUILD/specdec
M=data/models
[ -x "$SD" ] || { echo "ladder: $SD is not built (make)" >&2; exit 1; }
if [ $QUICK = 1 ]; then
    : "${LADDER_PROMPTS:=1}" "${LADDER_TOKENS:=8}" "${LADDER_POSITIONS:=20}" "${LADDER_DRAFTS:=draft ladder-d48}"
    KS="1 2" LS="2" CAL="--calibrate 1"
else
    : "${LADDER_PROMPTS:=10}" "${LADDER_TOKENS:=48}" "${LADDER_POSITIONS:=200}"
    if [ -z "${LADDER_TARGET:-}" ] && [ -s "$M/large-target.gguf" ]; then
        LADDER_TARGET=large-target
        # its drafts (large-mid when it is here), then the shipped pair's as they are
        if [ -z "${LADDER_DRAFTS:-}" ]; then
            LADDER_DRAFTS="large-draft-4800 large-draft"
            [ -s "$M/large-mid.gguf" ] && LADDER_DRAFTS="$LADDER_DRAFTS large-mid"
            LADDER_DRAFTS="$LADDER_DRAFTS draft target"
        fi
    fi
    : "${LADDER_DRAFTS:=ladder-d48 ladder-d96 draft ladder-t1}"
    KS="1 2 4 8" LS="4 8" CAL=""
fi
: "${LADDER_THREADS:=2}" "${LADDER_TARGET:=target}"
TG=$LADDER_TARGET
SFX=$([ "$TG" = target ] || echo "-$TG")   # the large target's results beside the small one's
R=${LADDER_OUT:-$([ -n "${RECORD:-}" ] && echo paper-figs/ladder$SFX || echo out/ladder$SFX)}
T=$R/.tmp
mkdir -p "$T"
for d in $LADDER_DRAFTS $TG; do
    [ -s "$M/$d.gguf" ] || { echo "ladder: no $M/$d.gguf (make models-ladder)" >&2; exit 1; }
done
# the file that runs the target (the large one widened to F16: data/models/large-f16.sh)
TGF=$(sh data/models/large-f16.sh "$SD" "$TG") || exit 1
PAIR="--target $TGF --n-prompts $LADDER_PROMPTS --max-tokens $LADDER_TOKENS --threads $LADDER_THREADS $CAL"
hdr() {
    echo "# device: cpu: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
    echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo -)$(git diff --quiet -- . ":(exclude)$R" 2>/dev/null || echo ' (modified)')"
    echo "# command: sh tests/bench/ladder.sh $* (LADDER_TARGET=$TG LADDER_PROMPTS=$LADDER_PROMPTS LADDER_TOKENS=$LADDER_TOKENS LADDER_THREADS=$LADDER_THREADS)"
    echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
# the training log's facts: parameters, shape, and the last evaluation's loss, KL, acceptance
logfacts() {
    awk -F'\t' '/^# model:/ { n = split($0, w, " ")
                               for (i = 1; i <= n; i++) { if (w[i] == "dim") d = w[i+1]; if (w[i] == "layers") l = w[i+1]
                                                          if (w[i] ~ /^parameters/) p = w[i-1] } }
                /^[0-9]/ && $4 != "nan" { vl = $4; vk = $8; va = $9 }
                END { printf "%s\t%s\t%s\t%s\t%s\t%s\n", p, d, l, vl, vk, va }' "$1"
}
TPARAMS=$(logfacts "$M/$TG.tsv" | cut -f1)
{ hdr "$@"
  echo "# per draft: size, quality, c = M_D(1)/M_T(1), sd acceptance on replayed logits (T = 1), and decode --scheme all"
  echo "# ($LADDER_PROMPTS prompts x $LADDER_TOKENS tokens, T = 1): the best speculative scheme by prediction (before the run) and by"
  echo "# measurement, speedups over ar; gt and throughput are the trees built at the measured costs; mt2, mt3:"
  echo "# M_T(2)/M_T(1) and M_T(3)/M_T(1), a target pass over 2 and 3 tokens against one, as decode measured them"
  printf 'draft\tparams\tdim\tlayers\tsize_ratio\tval_loss\tval_kl\tval_accept\treplay_accept\treplay_lo\treplay_hi\tc'
  printf '\tpred_best\tpred_best_shape\tpred_best_speedup\tpred_best_measured\tmeas_best\tmeas_best_speedup\tmeas_best_pred'
  printf '\tsd_speedup\tsd_pred\tgt_shape\tgt_speedup\tgt_pred\tthroughput_shape\tthroughput_speedup\tthroughput_pred\tar_tok_s\tmt2\tmt3\n'
} > "$T/ladder.tsv"
{ hdr "$@"
  echo "# SpecTr Table 4 in kind: decode --scheme kseq --shape spectr:K,L ($LADDER_PROMPTS prompts x $LADDER_TOKENS tokens, T = 1);"
  echo "# block_eff = tokens per target call (the paper's 'decoded tokens per serial call'), measured and predicted"
  printf 'draft\tparams\tK\tL\tblock_eff\tpred_block_eff\tspeedup\tpred_speedup\n'
} > "$T/ladder-table4.tsv"

start=$(date +%s)
for d in $LADDER_DRAFTS; do
    echo "ladder: $d ($(( $(date +%s) - start )) s)"
    facts=$(logfacts "$M/$d.tsv")
    params=$(echo "$facts" | cut -f1)
    # sd acceptance on logged logits: 4 sequences of the target's own samples
    "$SD" synth-log --lm "gguf:$M/$d.gguf,$TGF" --positions "$LADDER_POSITIONS" --sequences 4 \
        --out "$T/$d-log" > /dev/null
    "$SD" replay --draft-log "$T/$d-log.draft.npy" --target-log "$T/$d-log.target.npy" --scheme sd -k 1 \
        > "$R/replay-$d.txt"
    acc=$(awk '$1 == "sd" { gsub(/[\[\],]/, " "); print $2 "\t" $3 "\t" $4; exit }' "$R/replay-$d.txt")
    # every scheme, predicted then measured
    "$SD" decode $PAIR --draft "$M/$d.gguf" --scheme all --tsv "$T/$d.tsv" --quiet > "$R/decode-$d.txt"
    c=$(sed -n 's/^# specdec decode:.*c = M_D\/M_T = \([0-9.e+-]*\).*/\1/p' "$T/$d.tsv")
    mt=$(sed -n 's/^# cost-target table:1,\([^,]*\),\([^,]*\).*/\1\t\2/p' "$T/$d.tsv")
    awk -F'\t' -v d="$d" -v facts="$facts" -v acc="$acc" -v c="$c" -v tp="$TPARAMS" -v mt="$mt" '
        /^#/ { next }
        $1 == "ar" { ar = $6; next }
        { sp[$1] = $8; pr[$1] = $9; sh[$1] = $2
          if (pb == "" || $9 > pr[pb]) pb = $1
          if (mb == "" || $8 > sp[mb]) mb = $1 }
        END { split(facts, f, "\t")
              printf "%s\t%s\t%s\t%s\t%.4f\t%s\t%s\t%s\t%s\t%s", d, f[1], f[2], f[3], f[1] / tp, f[4], f[5], f[6], acc, c
              printf "\t%s\t%s\t%s\t%s\t%s\t%s\t%s", pb, sh[pb], pr[pb], sp[pb], mb, sp[mb], pr[mb]
              printf "\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sp["sd"], pr["sd"], sh["gt"] == "" ? "-" : sh["gt"],
                     sp["gt"] == "" ? "-" : sp["gt"], pr["gt"] == "" ? "-" : pr["gt"],
                     sh["throughput"] == "" ? "-" : sh["throughput"], sp["throughput"] == "" ? "-" : sp["throughput"],
                     pr["throughput"] == "" ? "-" : pr["throughput"], ar "\t" mt }' "$T/$d.tsv" >> "$T/ladder.tsv"
    # SpecTr's Table 4 in kind
    for L in $LS; do
        for K in $KS; do
            "$SD" decode $PAIR --draft "$M/$d.gguf" --scheme kseq --shape "spectr:$K,$L" --tsv "$T/t4.tsv" \
                --quiet > "$T/t4.txt"
            awk -F'\t' -v d="$d" -v p="$params" -v K=$K -v L=$L '!/^#/ && $1 != "ar" {
                printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d, p, K, L, $10, $11, $8, $9 }' "$T/t4.tsv" \
                >> "$T/ladder-table4.tsv"
        done
    done
    # rewritten after each draft: a later one failing keeps these
    cp "$T/ladder.tsv" "$T/ladder-table4.tsv" "$R/"
done
rm -rf "$T"
echo "ladder: $(( $(date +%s) - start )) s; results in $R (ladder.tsv, ladder-table4.tsv, decode-*.txt, replay-*.txt)"

# the summary: what the prediction picks before the runs, and what was measured
awk -F'\t' '/^#/ || $2 == "params" { next }
    { printf "%-12s %8s params (%.3f of the target)  c %.3f  sd acceptance %.3f  predicted best %s %.3fx (measured %.3fx)  measured best %s %.3fx\n",
             $1, $2, $5, $12, $9, $13, $15, $16, $17, $18
      # sd with gamma drafts pays when E[tokens] = (1 - a^(gamma+1)) / (1 - a) exceeds gamma c + M_T(gamma+1)/M_T(1)
      a = $9; e1 = 1 + a; e2 = 1 + a + a * a
      printf "%-12s sd pays at gamma 1 if M_T(2)/M_T(1) < %.2f (measured %.2f), at gamma 2 if M_T(3)/M_T(1) < %.2f (measured %.2f)\n",
             "", e1 - $12, $29, e2 - 2 * $12, $30
      if (pd == "" || $15 > pv) { pd = $1; pv = $15; pm = $16 }
      if (md == "" || $18 > mv) { md = $1; mv = $18 } }
    END { printf "ladder: the prediction picks %s (%.3fx predicted, %.3fx measured); the measured best is %s (%.3fx): %s\n",
                 pd, pv, pm, md, mv, (pd == md ? "they agree" : "they differ")
          if (mv > 1) print "ladder: speculation pays on this machine"
          else printf "ladder: no draft makes speculation pay here: the best measured speedup is %.3fx (%.0f%% short of ar)\n", mv, (1 - mv) * 100 }' \
    "$R/ladder.tsv" | tee "$R/summary.txt"
