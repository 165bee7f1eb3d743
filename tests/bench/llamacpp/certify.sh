#!/bin/sh
# make bench-certify-llamacpp: does llama.cpp's speculative decoding preserve the
# target's law? `specdec certify --decoder` on llama-speculative (draft tree, stochastic
# verification) and llama-speculative-simple (greedy draft chain, target sampling) on
# the shipped pair, at temperature 1 and at 0.7 with top-p 0.9 (llama.cpp filters
# before the temperature: --filter-first), beside specdec's own generate and its
# speculative decode (sd, spectr) as controls. Each run: p-values of the first token
# and of the (t1, t2) pair, the power of the same test against a planted bug, the fit
# of the runs to that bug's law, and the verdict (PASS 0, FAIL 1, INCONCLUSIVE 3,
# TOO-GOOD 4). Every row has hashed seeds (certify --decoder's default: run i's seed
# mixed from (1, i)); one more llama-speculative row has seeds 1..N, as the first table
# had: its verification draws come from std::default_random_engine seeded with the seed,
# an LCG whose runs from consecutive seeds are not independent.
#
# The fix: llama-speculative-drawn (tests/bench/llamacpp/build-patched.sh: the draft
# proposes the token its sampler drew) beside the original, at temperature 1, at
# llama.cpp's default filters (temperature 0.8, top-k 40, top-p 0.95; min-p off, which
# certify cannot model) and at temperature 0 (greedy: every run must print the argmax);
# and llama-speculative-fixed (its residual also pairs the two laws by token id) at the
# default filters.
#
# llama.cpp runs generate -n 8 (they may stop after the first token when it is end-of-text).
# usage: tests/bench/llamacpp/certify.sh [BUILD] [RUNS]  (RUNS default 600: 2 to 2.5
#   minutes a llama.cpp row on this 2-core machine, loaded, 25 minutes in all; needs
#   tests/bench/llamacpp/build.sh and build-patched.sh first)
#   env: JOBS (runs at a time, default 2), LLAMA_BUILD, PATCHED (build-patched.sh's
#   folder, default out/llama.cpp-patched), PROMPT, PART (all, default; fix: the rows of
#   the fix alone; pit: both unpatched programs at llama.cpp's default filters and at
#   temperature 0 with 16 tokens a run, every position tested by the PIT; pit-fix: the
#   two patched programs the same way at the default filters, where the residual's
#   flaw lives)
set -u
BUILD=${1:-build}
N=${2:-600}
JOBS=${JOBS:-2}
S=$BUILD/specdec
B=${LLAMA_BUILD:-.cache/llama.cpp-build}/bin
T=data/models/target.gguf
D=data/models/draft.gguf
PROMPT=${PROMPT:-"Call me Ishmael."}
PY=python3
command -v $PY >/dev/null 2>&1 || PY=/usr/bin/python3
for p in llama-speculative llama-speculative-simple; do
    [ -x "$B/$p" ] || { echo "certify.sh: no $B/$p: run tests/bench/llamacpp/build.sh" >&2; exit 1; }
done
F=${PATCHED:-out/llama.cpp-patched}/bin/llama-speculative-drawn
F2=${PATCHED:-out/llama.cpp-patched}/bin/llama-speculative-fixed
PART=${PART:-all}
for p in "$F" "$F2"; do
    [ "$PART" = pit ] || [ -x "$p" ] || { echo "certify.sh: no $p: run tests/bench/llamacpp/build-patched.sh" >&2; exit 1; }
done
LL="-m $T -md $D -p {prompt} -n 8 --seed {seed} -t 1 -c 128 --top-k 0 --min-p 0 -v"
L16=$(printf '%s' "$LL" | sed 's/-n 8/-n 16/')   # 16 tokens a run, for the PIT rows
SIMPLE="--spec-type draft-simple"
GEN="$S generate --model $T --prompt {prompt} --max-tokens 2 --seed {seed} --ids --threads 1"

row() { # NAME PLANTED SPECDEC-ARGS -- COMMAND
    name=$1; planted=$2; shift 2
    echo "== $name"
    # shellcheck disable=SC2086
    "$S" certify --target $T --draft $D --planted $planted --prompt "$PROMPT" --samples $N --jobs $JOBS "$@"
    echo "(exit $?)"
}

echo "# prompt '$PROMPT', $N runs a row, alpha 1e-6 (first token, pair, PIT family), hashed seeds unless said"
DEF="--temp 0.8 --top-k 40 --top-p 0.95"
fix_rows() {
    for prog in "$B/llama-speculative" "$F"; do
        prog_name=$(basename "$prog")
        row "$prog_name, T = 1" argmax-draft \
            --decoder "$PY tests/bench/llamacpp/spec_ids.py tree $prog $LL --temp 1 --top-p 1"
        row "$prog_name, llama.cpp's defaults: T = 0.8, top-k 40, top-p 0.95 (min-p off)" argmax-draft \
            --temperature 0.8 --top-k 40 --top-p 0.95 --filter-first \
            --decoder "$PY tests/bench/llamacpp/spec_ids.py tree $prog $LL $DEF"
        row "$prog_name, T = 0 (greedy)" argmax-draft --temperature 0 \
            --decoder "$PY tests/bench/llamacpp/spec_ids.py tree $prog $LL --temp 0"
    done
    # the residual paired by token id as well: only the filtered rows differ
    row "llama-speculative-fixed, llama.cpp's defaults: T = 0.8, top-k 40, top-p 0.95 (min-p off)" argmax-draft \
        --temperature 0.8 --top-k 40 --top-p 0.95 --filter-first \
        --decoder "$PY tests/bench/llamacpp/spec_ids.py tree $F2 $LL $DEF"
}
# every position: 16 tokens a run (-n 16), the PIT of each (--positions 16), at
# llama.cpp's default filters and at temperature 0, both programs, unpatched
pit_rows() {
    for prog in tree:llama-speculative simple:llama-speculative-simple; do
        kind=${prog%%:*}; prog_name=${prog#*:}; extra=""
        [ "$kind" = simple ] && extra=$SIMPLE
        row "$prog_name, llama.cpp's defaults: T = 0.8, top-k 40, top-p 0.95 (min-p off), 16 positions" argmax-draft \
            --temperature 0.8 --top-k 40 --top-p 0.95 --filter-first --positions 16 \
            --decoder "$PY tests/bench/llamacpp/spec_ids.py $kind $B/$prog_name $extra $L16 $DEF"
        row "$prog_name, T = 0 (greedy), 16 positions" argmax-draft --temperature 0 --positions 16 \
            --decoder "$PY tests/bench/llamacpp/spec_ids.py $kind $B/$prog_name $extra $L16 --temp 0"
    done
}
# the patched programs at every position: the drawn draft alone (its residual still pairs
# tokens by list position after top-k/top-p) and both patches
pit_fix_rows() {
    for prog in "$F" "$F2"; do
        row "$(basename "$prog"), llama.cpp's defaults: T = 0.8, top-k 40, top-p 0.95 (min-p off), 16 positions" \
            argmax-draft --temperature 0.8 --top-k 40 --top-p 0.95 --filter-first --positions 16 \
            --decoder "$PY tests/bench/llamacpp/spec_ids.py tree $prog $L16 $DEF"
    done
}
if [ "$PART" = fix ]; then fix_rows; exit 0; fi
if [ "$PART" = pit-fix ]; then pit_fix_rows; exit 0; fi
if [ "$PART" = pit ]; then pit_rows; exit 0; fi
row "specdec generate, T = 1 (control)" argmax-draft \
    --decoder "$GEN 2>/dev/null"
row "specdec generate, T = 0.7, top-p 0.9 (control)" argmax-draft \
    --temperature 0.7 --top-p 0.9 --decoder "$GEN --temperature 0.7 --top-p 0.9 2>/dev/null"
DEC="$S decode --target $T --draft $D --prompt {prompt} --max-tokens 2 --seed {seed} --ids --threads 1 --quiet"
row "specdec decode --scheme sd (speculative control), T = 1" argmax-draft \
    --decoder "$DEC --scheme sd"
row "specdec decode --scheme spectr (speculative control), T = 0.7, top-p 0.9" argmax-draft \
    --temperature 0.7 --top-p 0.9 --decoder "$DEC --scheme spectr --temperature 0.7 --top-p 0.9"
row "llama-speculative, T = 1" argmax-draft \
    --decoder "$PY tests/bench/llamacpp/spec_ids.py tree $B/llama-speculative $LL --temp 1 --top-p 1"
row "llama-speculative, T = 1, seeds 1..$N (consecutive)" argmax-draft --consecutive-seeds \
    --decoder "$PY tests/bench/llamacpp/spec_ids.py tree $B/llama-speculative $LL --temp 1 --top-p 1"
row "llama-speculative, T = 0.7, top-p 0.9" argmax-draft --temperature 0.7 --top-p 0.9 --filter-first \
    --decoder "$PY tests/bench/llamacpp/spec_ids.py tree $B/llama-speculative $LL --temp 0.7 --top-p 0.9"
row "llama-speculative-simple, T = 1" argmax-draft \
    --decoder "$PY tests/bench/llamacpp/spec_ids.py simple $B/llama-speculative-simple $SIMPLE $LL --temp 1 --top-p 1"
row "llama-speculative-simple, T = 0.7, top-p 0.9" argmax-draft --temperature 0.7 --top-p 0.9 --filter-first \
    --decoder "$PY tests/bench/llamacpp/spec_ids.py simple $B/llama-speculative-simple $SIMPLE $LL --temp 0.7 --top-p 0.9"
fix_rows
