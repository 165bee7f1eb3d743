#!/bin/sh
# Command-line tests of 'specdec mc' and 'specdec certify'.
# usage: mc.sh path/to/specdec
SPECDEC=${1:-build/specdec}
. "$(dirname "$0")/lib.sh"

expect 0 "usage: specdec mc" -- "$SPECDEC" mc --help
expect 0 "usage: specdec certify" -- "$SPECDEC" certify --help
# JSON keys of the contract
out=$("$SPECDEC" mc --draft 0.75,0.25 --target 0.5,0.5 --scheme specinfer -k 2 --samples 200000 --seed 7 --json)
for key in acceptance ci_low ci_high exact chi2_p g_p samples seed; do
    printf '%s' "$out" | grep -q "\"$key\":" && ok || bad "mc --json lacks $key: $out"
done
printf '%s' "$out" | grep -q '"exact": 0.8125' && ok || bad "mc exact is not 0.8125: $out"
# same seed, different thread counts: identical output (rate and time aside)
a=$("$SPECDEC" mc --pair dirichlet:20,1,3 --scheme rrs -k 3 --samples 300000 --seed 11 --threads 1 --json | sed 's/"rate": [0-9.e+]*//')
b=$("$SPECDEC" mc --pair dirichlet:20,1,3 --scheme rrs -k 3 --samples 300000 --seed 11 --threads 2 --json | sed 's/"rate": [0-9.e+]*//')
[ "$a" = "$b" ] && ok || bad "mc differs between 1 and 2 threads"
# large V: binned test
expect 0 "binned by target probability" -- "$SPECDEC" mc --pair zipf:5000,1.1,1.5 --scheme sd --samples 200000
# rrs with k above the draft's support drafts the whole support, and says so
expect 0 "k used = 2: the draft's whole support" -- "$SPECDEC" mc --pair bernoulli:0.3,0.6 --scheme rrs -k 4 --samples 20000
expect 0 '"k": 4, .*"k_used": 2' -- "$SPECDEC" mc --pair bernoulli:0.3,0.6 --scheme rrs -k 4 --samples 20000 --json
# certify: too few token-level samples for power against the planted bug: inconclusive (3)
expect 3 "== INCONCLUSIVE at p >= 1e-06: token-level power 0.110 < 0.9; about 1000 samples give 0.9" -- \
    "$SPECDEC" certify --scheme specinfer --pair zipf:50,1.2,0.7 --samples 300 --seq-samples 20000
expect 3 '"verdict": "INCONCLUSIVE"' -- "$SPECDEC" certify --scheme specinfer --samples 300 --seq-samples 20000 --json
# --json keeps the verdict's exit status: a FAIL (any p-value below an alpha of 0.9999) exits 1
expect 1 '"pass": false, "verdict": "FAIL"' -- "$SPECDEC" certify --scheme sd --pair dirichlet:6,1,3 --samples 1e4 --seq-samples 1e4 --alpha 0.9999 --json
# certify: passes a correct scheme on the default plan (family.h), JSON says so
expect 0 '"pass": true.*"plan_cases": 15' -- "$SPECDEC" certify --scheme specinfer --samples 300000 --seq-samples 100000 --json
expect 0 "^trunc:150000,1.1,0.8,40,0.95,0,1 .* 8 .*PASS" -- "$SPECDEC" certify --scheme specinfer --samples 100000 --seq-samples 20000 -k 8
# a pair where the planted bug changes nothing (draft = target): its power rule waived
expect 3 "no power shown" -- "$SPECDEC" certify --scheme specinfer --pair zipf:50,1.2,1 --samples 100000 --seq-samples 20000
expect 0 "PASS" -- "$SPECDEC" certify --scheme otm -k 2 --pair dirichlet:5,1,1 --samples 200000
# otm at a vocabulary no LP reaches (the keyed sampler), and the LP coupling by name
expect 0 "PASS" -- "$SPECDEC" certify --scheme otm -k 4 --pair dirichlet:32000,1,5 --samples 200000 --seq-samples 20000
expect 0 "PASS" -- "$SPECDEC" certify --scheme otm-lp -k 2 --pair dirichlet:5,1,1 --samples 100000 --seq-samples 20000
# bad input
expect 2 "samples 0: need a whole number from 1" -- "$SPECDEC" mc --draft 0.5,0.5 --target 0.5,0.5 --scheme sd --samples 0
expect 2 "samples" -- "$SPECDEC" mc --draft 0.5,0.5 --target 0.5,0.5 --scheme sd --samples 1e20
expect 2 "samples 2.5: need a whole number" -- "$SPECDEC" mc --draft 0.5,0.5 --target 0.5,0.5 --scheme sd --samples 2.5
expect 2 "unknown scheme" -- "$SPECDEC" mc --draft 0.5,0.5 --target 0.5,0.5 --scheme nope
expect 2 "--scheme is required" -- "$SPECDEC" mc --draft 0.5,0.5 --target 0.5,0.5
expect 1 "draft: .*negative" -- "$SPECDEC" mc --draft -0.5,1.5 --target 0.5,0.5 --scheme sd
expect 1 "model spec" -- "$SPECDEC" certify --scheme sd --lm markov:1 --samples 1000
expect 0 "adjacent pairs" -- "$SPECDEC" certify --scheme rrs -k 2 --pair zipf:50,1.2,0.7 --lm markov:50,1,1,1,0.5 --length 6 --samples 1000 --seq-samples 100000
expect 1 "not lossless" -- "$SPECDEC" mc --draft 0.75,0.25 --target 0.5,0.5 --scheme kseq --gamma 1 --samples 100

finish "cli mc/certify"
