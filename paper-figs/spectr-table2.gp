# SpecTr Table 2 in kind: block efficiency of K x L drafts, beside the paper's LM1B numbers.
load 'plots/style.gp'
set title "SpecTr Table 2 in kind: tokens per serial call, K x L drafts (K-SEQ)"
set xlabel "K (draft sequences)"
set ylabel "tokens per target call"
set logscale x 2
set key left top
set xrange [0.8:10]
plot datafile using ($2 == 4 ? $1 : 1/0):3 with linespoints ls 1 title "specdec, L = 4 (synthetic pair)", \
     datafile using ($2 == 8 ? $1 : 1/0):3 with linespoints ls 2 title "specdec, L = 8", \
     "data/paper_refs/spectr-table2.tsv" using ($2 == 4 ? $1 : 1/0):3 with linespoints ls 1 dt 2 title "paper, L = 4 (LM1B)", \
     "data/paper_refs/spectr-table2.tsv" using ($2 == 8 ? $1 : 1/0):3 with linespoints ls 2 dt 2 title "paper, L = 8"
