# Sourced by the end-to-end benchmarks (e2e.sh, parallel.sh) after `BUILD=${1:-build}`:
# the repository root as the working folder, the binary, the run's size and the shipped
# files. env: E2E_PROMPTS (default 20), E2E_TOKENS (64), E2E_THREADS (2).
cd "$(dirname "$0")/../.."
SD=$BUILD/specdec
N=${E2E_PROMPTS:-20}
TOK=${E2E_TOKENS:-64}
TH=${E2E_THREADS:-2}
TM=data/models/target.gguf
DM=data/models/draft.gguf
PM=data/models/parallel.gguf
OUT=out/figs
mkdir -p "$OUT"
