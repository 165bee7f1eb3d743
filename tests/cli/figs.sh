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
# the model is a parameter of the S recipes; bad models and costs are refused up front
expect 0 "on markov:6,1,0.7,9,0.4" -- "$SPECDEC" figs spectr-table2 --lm markov:6,1,0.7,9,0.4 --out "$T"
grep -q "markov:6,1,0.7,9,0.4" "$T/spectr-table2.tsv" && ok || bad "spectr-table2's header does not name --lm"
expect 2 "--lm 'markov:9'" -- "$SPECDEC" figs --lm markov:9
expect 2 "--cost-draft '0'" -- "$SPECDEC" figs --cost-draft 0
expect 2 "--cost-target 'flat'" -- "$SPECDEC" figs --cost-target flat

# the inventory: every item of the five papers has a class, and every status is honest:
# no item without a recipe, each named recipe and structural test exists
INV="$(dirname "$0")/../../paper-figs/inventory.tsv"
expect 0 "items: 5 T, [0-9]* S, 5 structural, [0-9]* X" -- "$SPECDEC" figs --list --inventory "$INV"
"$SPECDEC" figs --list --inventory "$INV" > "$T/list"
grep -q " missing " "$T/list" && bad "inventory items with no recipe: $(grep ' missing ' "$T/list")" || ok
for t in $(grep -o 'test:test_[a-z0-9_]*' "$INV" | sort -u | sed 's/^test://'); do
    grep -q "cmocka_unit_test($t)" "$(dirname "$0")/../test_structural.c" && ok || bad "inventory names $t, not in tests/test_structural.c"
done
expect 0 "no inventory at" -- "$SPECDEC" figs --list --inventory "$T/none.tsv"
[ "$("$SPECDEC" figs --list --tsv | awk -F'\t' 'NF == 4' | wc -l)" -ge 19 ] && ok || bad "--list --tsv: not 4 columns"
finish "cli figs"
