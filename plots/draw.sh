#!/bin/sh
# Draws every figure whose data specdec wrote: for DIR/NAME.tsv and
# paper-figs/NAME.gp, writes DIR/NAME.png and DIR/NAME.svg; with --thumbs IMGDIR also
# a small IMGDIR/NAME.png for the gallery. Needs gnuplot.
# usage: plots/draw.sh DIR [--thumbs IMGDIR]
set -eu
DIR=${1:-out/figs}
THUMBS=""
[ "${2:-}" = "--thumbs" ] && THUMBS=${3:?--thumbs needs a folder}
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "draw: gnuplot is not installed (sh install-deps.sh installs gnuplot-nox); the data is in $DIR" >&2
    exit 1
fi
cd "$(dirname "$0")/.."
[ -n "$THUMBS" ] && mkdir -p "$THUMBS"
n=0
for data in "$DIR"/*.tsv; do
    [ -f "$data" ] || continue
    name=$(basename "$data" .tsv)
    script=paper-figs/$name.gp
    [ -f "$script" ] || { echo "draw: no $script for $data" >&2; continue; }
    for fmt in png svg; do
        gnuplot -e "datafile='$data'; out='$DIR/$name'; fmt='$fmt'" "$script"
    done
    [ -n "$THUMBS" ] && gnuplot -e "datafile='$data'; out='$THUMBS/$name'; fmt='png'; small=1" "$script"
    echo "draw: $DIR/$name.png, .svg"
    n=$((n + 1))
done
echo "draw: $n figures"
