/* OTM-k as max-flow (THEORY.md), one model for both forms of lp/otm_lp.c.
 *
 * A source is an ordered draft tuple (tuple form) or a set of distinct draft
 * tokens (set form); mass[x] is its probability under k i.i.d. draft draws.
 * MEMBER holds (x, y) for every token y that occurs in x. flow[x, y] is the
 * probability that the drafts are x and the output is the draft y. Only
 * inequalities: flow = 0 is feasible whatever the rounding of mass and target.
 *
 *   specdec otm --draft D --target T -k 3 --form set --write-data otm.dat
 *   glpsol -m lp/otm.mod -d otm.dat
 */

set SOURCES;
set TOKENS;
set MEMBER within SOURCES cross TOKENS;

param mass{SOURCES} >= 0;
param target{TOKENS} >= 0;

var flow{MEMBER} >= 0;

maximize acceptance: sum{(x, y) in MEMBER} flow[x, y];

s.t. source_mass{x in SOURCES}:
    sum{(x, y) in MEMBER} flow[x, y] <= mass[x];

s.t. token_target{y in TOKENS}:
    sum{(x, y) in MEMBER} flow[x, y] <= target[y];

solve;

printf "OTM acceptance %.15f (%d sources, %d tokens, %d member pairs)\n",
    acceptance, card(SOURCES), card(TOKENS), card(MEMBER);

end;
