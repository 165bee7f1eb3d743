# SpecTr Table 4 in kind: draft quality against tokens per call, beside the paper's.
load 'plots/style.gp'
eval setterm(1000, 420)
set multiplot layout 1,2 title "SpecTr Table 4 in kind: better drafts, more tokens per call (K x 4 drafts)"
set xlabel "K (draft sequences)"
set logscale x 2
set xrange [0.8:10]
set key left top
set ylabel "tokens per target call"
set title "specdec: Markov pair, draft mixed with noise"
plot for [d=1:3] datafile using ($1 == d ? $2 : 1/0):3 with linespoints ls d title word("80% 50% 20%", d)." noise"
set title "paper: LM1B, 97M target"
plot for [d=1:3] "data/paper_refs/spectr-table4.tsv" using ($1 == word("2 6 20", d) + 0 && $3 == 4 ? $2 : 1/0):4 with linespoints ls d title word("2M 6M 20M", d)." draft"
unset multiplot
