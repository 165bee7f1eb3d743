#!/bin/sh
# Fetches llama.cpp's sources (test data only: tokenizer test vectors, and the
# reference implementation the benchmarks compare with) into .cache/llama.cpp.
# The npm package node-llama-cpp carries them as a git bundle; nothing of it is
# committed or linked into specdec. Idempotent; install-deps.sh calls it.
# usage: tests/fetch-llama-cpp.sh [DEST]   (default .cache/llama.cpp)
set -eu
VERSION=3.22.1 # node-llama-cpp (pinned: the test vectors must not move)
cd "$(dirname "$0")/.."
DEST=${1:-.cache/llama.cpp}
if [ -f "$DEST/models/ggml-vocab-llama-spm.gguf" ]; then
    echo "llama.cpp: present in $DEST"
    exit 0
fi
for tool in npm git tar; do
    command -v "$tool" >/dev/null 2>&1 || { echo "llama.cpp: need $tool (apt-get install npm git)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "llama.cpp: fetching node-llama-cpp@$VERSION from npm (about 36 MB)"
(cd "$tmp" && npm pack --silent "node-llama-cpp@$VERSION" >/dev/null 2>&1) || {
    echo "llama.cpp: npm pack node-llama-cpp@$VERSION failed (no network to the npm registry?)" >&2; exit 1; }
tar -xzf "$tmp/node-llama-cpp-$VERSION.tgz" -C "$tmp" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
git clone -q "$tmp/package/llama/gitRelease.bundle" "$DEST" 2>/dev/null
cp "$tmp/package/llama/llama.cpp.info.json" "$DEST/specdec-source.json"
echo "llama.cpp: commit $(git -C "$DEST" rev-parse --short HEAD) in $DEST"
