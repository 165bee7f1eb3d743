#!/bin/sh
# Draws every figure whose data specdec wrote: for DIR/NAME.tsv and
# paper-figs/NAME.gp, writes DIR/NAME.png and DIR/NAME.svg; with --thumbs IMGDIR also
# a small IMGDIR/NAME.png for the gallery. Needs gnuplot.
#   --into OUTDIR   the PNG and SVG go to OUTDIR instead of DIR (data kept read-only,
#                   e.g. the committed GPU results in paper-figs/gpu)
#   --recipes-only  TSVs without a recipe are skipped silently (a results folder that
#                   also holds tables, e.g. tests/bench/gpu-study.sh's)
# When DIR/DEVICE exists (the GPU study writes it: "# device: NAME"), the recipes get
# its device as `label`, which the e2e recipes put in their titles.
# usage: plots/draw.sh DIR [--thumbs IMGDIR] [--into OUTDIR] [--recipes-only]
set -eu
DIR=${1:-out/figs}
[ $# -gt 0 ] && shift
THUMBS="" INTO="" ONLY=0
while [ $# -gt 0 ]; do
    case $1 in
    --thumbs) THUMBS=${2:?--thumbs needs a folder}; shift ;;
    --into) INTO=${2:?--into needs a folder}; shift ;;
    --recipes-only) ONLY=1 ;;
    *) echo "draw: unknown argument '$1'" >&2; exit 2 ;;
    esac
    shift
done
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "draw: gnuplot is not installed (sh install-deps.sh installs gnuplot-nox); the data is in $DIR" >&2
    exit 1
fi
cd "$(dirname "$0")/.."
[ -n "$THUMBS" ] && mkdir -p "$THUMBS"
OUTDIR=${INTO:-$DIR}
mkdir -p "$OUTDIR"
LABEL=""
[ -f "$DIR/DEVICE" ] && LABEL=$(sed -n "s/^# device: //p" "$DIR/DEVICE" | head -1 | tr -d "'\"")
LABELSET=""
[ -n "$LABEL" ] && LABELSET="label='$LABEL'; "
n=0
for data in "$DIR"/*.tsv; do
    [ -f "$data" ] || continue
    name=$(basename "$data" .tsv)
    script=paper-figs/$name.gp
    if [ ! -f "$script" ]; then
        [ $ONLY = 1 ] || echo "draw: no $script for $data" >&2
        continue
    fi
    for fmt in png svg; do
        gnuplot -e "${LABELSET}datafile='$data'; out='$OUTDIR/$name'; fmt='$fmt'" "$script"
    done
    [ -n "$THUMBS" ] && gnuplot -e "${LABELSET}datafile='$data'; out='$THUMBS/$name'; fmt='png'; small=1" "$script"
    echo "draw: $OUTDIR/$name.png, .svg"
    n=$((n + 1))
done
echo "draw: $n figures"
