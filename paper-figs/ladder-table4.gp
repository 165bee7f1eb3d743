# SpecTr Table 4 in kind on real drafts (tests/bench/ladder.sh): tokens per target call
# of K x L SpecTr drafts (kseq), one line per draft of the ladder, beside the paper's
# 2M / 6M / 20M drafts. Solid: L = 4, dashed: L = 8 (the quick run's L = 2 is drawn solid).
load 'plots/style.gp'
eval setterm(1100, 440)
names = "ladder-d48 ladder-d96 draft ladder-t1"
labels = "'d48 x 1' 'd96 x 1' 'd128 x 2 (shipped)' 't1 (target block 1)'"
set multiplot layout 1,2 title "SpecTr Table 4 in kind: draft size against tokens per target call (K x L drafts)"
set xlabel "K (draft sequences)"
set logscale x 2
set xrange [0.8:10]
set key left top
set ylabel "tokens per target call"
set title "specdec: distilled drafts, 5.5M target" . (exists("label") ? " (".label.")" : "")
plot for [i = 1:4] datafile using (strcol(1) eq word(names, i) && $4 != 8 ? $3 : 1/0):5 with linespoints ls i title word(labels, i), \
     for [i = 1:4] datafile using (strcol(1) eq word(names, i) && $4 == 8 ? $3 : 1/0):5 with linespoints ls i dt 2 notitle
set title "paper: LM1B, 97M target"
plot for [d = 1:3] "data/paper_refs/spectr-table4.tsv" using ($1 == word("2 6 20", d) + 0 && $3 == 4 ? $2 : 1/0):4 with linespoints ls d title word("2M 6M 20M", d)." draft", \
     for [d = 1:3] "data/paper_refs/spectr-table4.tsv" using ($1 == word("2 6 20", d) + 0 && $3 == 8 ? $2 : 1/0):4 with linespoints ls d dt 2 notitle
unset multiplot
