#!/bin/sh
# Command-line tests of 'specdec tree' and 'specdec compare'.
# usage: tree.sh path/to/specdec
SPECDEC=${1:-build/specdec}
. "$(dirname "$0")/lib.sh"
expect 0 "usage: specdec tree" -- "$SPECDEC" tree --help
expect 0 "usage: specdec compare" -- "$SPECDEC" compare --help
# the issue's contract: (1 - 0.8^5) / 0.2 = 3.3616
expect 0 '"block_efficiency": 3.361600000000' -- "$SPECDEC" tree --lm const:0.8 --scheme chain --shape 4 --exact --json
out=$("$SPECDEC" tree --lm const:0.8 --scheme chain --shape 4 --exact --json)
for key in block_efficiency ci_low ci_high speedup; do
    printf '%s' "$out" | grep -q "\"$key\":" && ok || bad "tree --json lacks $key"
done
# Leviathan: speedup (1 - a^(g+1)) / ((1 - a)(g c + 1)) = 3.3616 / 1.4 at c = 0.1
expect 0 '"speedup": 2.40114285' -- "$SPECDEC" tree --lm const:0.8 --scheme chain --shape 4 --exact --samples 0 --json
# a parallel drafter's one call is charged M_P(L) when given: 3.3616 / (0.3 + 1)
expect 0 '"speedup": 2.5858461' -- "$SPECDEC" tree --lm const:0.8 --scheme chain --shape parallel:4 --exact --samples 0 --json --cost-parallel const:0.3
expect 2 "cost curve" -- "$SPECDEC" tree --lm const:0.8 --scheme chain --shape parallel:4 --cost-parallel table:2,1
# GT goes 10 deep at alpha 0.8, c 0.1; the throughput-optimal chain 6 (Leviathan's optimum)
expect 0 "gt: 10 draft nodes, depth 10" -- "$SPECDEC" tree --lm const:0.8 --scheme chain --optimize gt --samples 1000
expect 0 "throughput-optimal: 6 draft nodes, depth 6" -- "$SPECDEC" tree --lm const:0.8 --scheme chain --optimize gt --samples 1000
expect 0 "shape: 1 draft node, depth 1, 1 draft call$" -- "$SPECDEC" tree --lm const:0.8 --scheme chain --shape 1 --exact --samples 0
expect 0 "exact" -- "$SPECDEC" tree --lm markov:4,1,0.5,7,0.5 --scheme kseq --shape spectr:2,3 --samples 1000
expect 0 "Monte Carlo" -- "$SPECDEC" tree --lm markov:4,1,0.5,7,0.5 --scheme rsd-c --shape beam:2,3 --samples 1000
expect 0 "rsd-s" -- "$SPECDEC" compare --lm markov:4,1,0.5,7,0.5 --budget 6 --samples 2000
expect 0 '"method": "spectr"' -- "$SPECDEC" compare --lm markov:4,1,0.5,7,0.5 --length 2 --samples 2000 --json
# bad input
# a dynamic tree that never grows at this context (the draft's top token after token 0
# has 0.04 < 0.05) is charged no nodes, not its bound
expect 0 "built per block, 0.00 draft nodes on average" -- "$SPECDEC" tree --lm gguf:data/models/draft.gguf,data/models/target.gguf \
    --scheme rrs --shape dynamic:0.05,16,6,4 --samples 10 --no-exact --threads 1
expect 1 "make cuda" -- "$SPECDEC" tree --lm gguf:data/models/draft.gguf,data/models/target.gguf --device cuda --scheme chain --shape 2
expect 2 "expected cpu or cuda" -- "$SPECDEC" tree --lm const:0.8 --scheme chain --shape 2 --device gpu
expect 1 "make cuda" -- "$SPECDEC" compare --lm gguf:data/models/draft.gguf,data/models/target.gguf --length 3 --samples 10 --device cuda
expect 2 "expected cpu or cuda" -- "$SPECDEC" compare --lm const:0.8 --length 3 --device gpu
# a shape or a cost spec on the command line that does not parse is a usage error
expect 2 "depth 0" -- "$SPECDEC" tree --lm const:0.8 --scheme chain --shape chain:0
expect 2 "0 children" -- "$SPECDEC" tree --lm const:0.8 --scheme mcsd --shape kconfig:2,0
expect 2 "limit" -- "$SPECDEC" tree --lm const:0.8 --scheme mcsd --shape kconfig:64,64,64
expect 2 "tree shape 'chian:4'" -- "$SPECDEC" tree --lm const:0.8 --scheme sd --shape chian:4
expect 1 "unknown model spec" -- "$SPECDEC" tree --lm gpt9 --scheme chain --shape 3
expect 1 "tree budget" -- "$SPECDEC" tree --lm const:0.8 --scheme chain --optimize throughput --budget 100000000
expect 1 "verify with rrs" -- "$SPECDEC" tree --lm markov:4,1,0.5,7,0.5 --scheme kseq --shape beam:2,2
expect 2 "one of --shape and --optimize" -- "$SPECDEC" tree --lm const:0.8 --scheme chain
expect 2 "unknown scheme" -- "$SPECDEC" tree --lm const:0.8 --scheme nope --shape 3
expect 1 "no fixed-budget rows" -- "$SPECDEC" compare --lm const:0.8 --budget 7

# a pair given as two laws (context-free) and a tree from rank acceptance alone: chain:4 at
# per-token acceptance 0.8 is 1 + .8 + .64 + .512 + .4096 = 3.3616 tokens a block, from
# --ranks 0.8 (predicted), from the laws (0.8 of the mass shared: exact) and from const:0.8
expect 0 '"block_efficiency": 3.3616' -- "$SPECDEC" tree --ranks 0.8 --scheme sd --shape chain:4 --json
expect 0 '"predicted_efficiency": 3.3616' -- "$SPECDEC" tree --ranks 0.8 --scheme sd --shape chain:4 --json
expect 0 "block efficiency     3.3616000000 (exact)" -- "$SPECDEC" tree --draft 0.8,0.2,0 --target 0.8,0,0.2 --scheme sd --shape chain:4 --samples 0
expect 0 "rank acceptance (given): 0.6000 0.2000 0.1000" -- "$SPECDEC" tree --ranks 0.6,0.2,0.1 --scheme rrs --optimize gt
expect 2 "give one of --lm SPEC, --ranks" -- "$SPECDEC" tree --ranks 0.5 --lm const:0.8 --scheme sd --shape 4
expect 2 "give one of --lm SPEC, --ranks" -- "$SPECDEC" tree --scheme sd --shape 4
expect 2 "ranks 0.5,1.5: up to 64 probabilities" -- "$SPECDEC" tree --ranks 0.5,1.5 --scheme sd --shape 4
expect 1 "rank acceptance gives a static tree" -- "$SPECDEC" tree --ranks 0.5 --scheme rrs --shape beam:2,2
finish "cli tree/compare"
