#!/bin/sh
# Command-line tests of 'specdec figs': every recipe's reference values hold.
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"
expect 0 "usage: specdec figs" -- "$SPECDEC" figs --help
expect 0 "rsd-fig1" -- "$SPECDEC" figs --list
expect 0 "figs: [0-9]* reference checks, 0 off" -- "$SPECDEC" figs --check
expect 0 "0 off" -- "$SPECDEC" figs spectr-fig2 --out "$T"
[ -s "$T/spectr-fig2.tsv" ] && ok || bad "figs wrote no spectr-fig2.tsv"
expect 2 "unknown recipe" -- "$SPECDEC" figs nope
: > "$T/file"
expect 1 "cannot create" -- "$SPECDEC" figs --out "$T/file/x"
finish "cli figs"
