# SpecTr Fig. 5 in kind: OTM-k against K-SEQ on top-m compressed distributions.
load 'plots/style.gp'
set title "SpecTr Fig. 5 in kind: OTM-k (solid) and K-SEQ (dashed), pairs kept to their top m tokens"
set xlabel "k (number of drafts)"
set ylabel "acceptance probability"
set key right bottom
plot for [i=0:2] datafile using 1:(column(2 + 2*i)) with linespoints ls (i+1) title sprintf("OTM, m = %s", word("10 50 1000", i+1)), \
     for [i=0:2] datafile using 1:(column(3 + 2*i)) with linespoints ls (i+1) dt 2 title sprintf("K-SEQ, m = %s", word("10 50 1000", i+1))
