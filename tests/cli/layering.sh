#!/bin/sh
# The layering that ARCHITECTURE.md describes, checked on every quoted include: a file may
# include headers of its own layer or of a layer below it, never above.
#   0 core (src/*)   1 model (src/model/**)   2 lm_spec (src/lm_spec.*: the spec parser
#   above the oracles it names)   3 lp/   4 sim/   5 src/cli/, src/api/ (libspecdec.so's
#   flat interface), tests/ (anything)
# An include resolves as the compiler resolves it: the including file's folder first,
# then src/, lp/, sim/, tests/. The compiler enforces part of this (core and model are
# built without -Ilp -Isim; model headers are reached as "model/..."); this catches the
# rest (core naming "model/...", model naming lm_spec.h, relative paths that climb).
# usage: layering.sh [ignored]  (run from anywhere; exit 1 and one line per violation)
cd "$(dirname "$0")/../.." || exit 2
layer() {
    case "$1" in
    src/cli/*|src/api/*|tests/*) echo 5 ;;
    sim/*) echo 4 ;;
    lp/*) echo 3 ;;
    src/lm_spec.*) echo 2 ;;
    src/model/*) echo 1 ;;
    src/*) echo 0 ;;
    *) echo 9 ;;
    esac
}
bad=0; n=0
for f in $(find src lp sim -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' | sort); do
    lf=$(layer "$f")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        n=$((n + 1))
        dir=$(dirname "$f")
        hit=""
        for cand in "$dir/$inc" "src/$inc" "lp/$inc" "sim/$inc" "tests/$inc"; do
            [ -f "$cand" ] && { hit=$cand; break; }
        done
        if [ -z "$hit" ]; then continue; fi # a generated or system-like header: the compiler says
        hit=$(realpath --relative-to=. "$hit")
        lh=$(layer "$hit")
        if [ "$lh" -gt "$lf" ] || { [ "$lf" = 0 ] && [ "$lh" != 0 ]; }; then
            echo "layering: $f includes \"$inc\" ($hit): layer $lh above its own $lf"
            bad=$((bad + 1))
        fi
    done
done
echo "layering: $n includes checked, $bad pointing up"
[ "$bad" = 0 ]
