# GTCP Table 4 in kind: token rate against the threshold, relative to c = M_D / M_T,
# beside the paper's own numbers (tokens/s relative to its best, c relative to 0.109).
load 'plots/style.gp'
set title "GTCP Table 4 in kind: token rate against the GT threshold c' (relative to c = M_D/M_T)"
set xlabel "c' / c"
set ylabel "token rate / best"
set logscale x 2
set key right bottom
stats datafile using 5 nooutput name "S"
stats "data/paper_refs/gt-table4.tsv" using 2 nooutput name "P"
plot datafile using 1:($5 / S_max) with linespoints ls 1 title "specdec, synthetic Markov pair", \
     "data/paper_refs/gt-table4.tsv" using ($1 / 0.109):($2 / P_max) with linespoints ls 2 title "paper (Vicuna-7B, EAGLE-2)"
