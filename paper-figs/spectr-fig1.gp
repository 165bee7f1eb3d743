# SpecTr Fig. 1: optimal acceptance of k drafts from U(120) for targets U(120/r).
load 'plots/style.gp'
set title "SpecTr Fig. 1: OTM-k acceptance, draft U(120), target U(120/r)\n(lines: OTM-k = 1 - (1 - 1/r)^k; rings: K-SEQ, which attains it)"
set xlabel "k (number of drafts)"
set ylabel "acceptance probability"
set yrange [0:1.02]
set xrange [1:10]
set key right bottom
plot for [i=0:5] datafile using 1:(column(2 + 2*i)) with linespoints ls (i+1) \
         title sprintf("r = %s", word("2 3 4 6 8 12", i+1)), \
     for [i=0:5] datafile using 1:(column(3 + 2*i)) with points ls (i+1) pt 6 ps 1.6 notitle
