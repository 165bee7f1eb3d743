# SpecTr Fig. 2: OTM-k acceptance against k, draft Ber(0.25), targets Ber(q).
load 'plots/style.gp'
set title "SpecTr Fig. 2: OTM-k acceptance, draft Ber(0.25)"
set xlabel "k (number of drafts)"
set ylabel "acceptance probability"
set yrange [0:1.02]
set key right bottom
plot for [i=0:5] datafile using 1:(column(2 + i)) with linespoints ls (i+1) \
         title sprintf("target Ber(%s)", word("0.05 0.1 0.25 0.5 0.75 0.9", i+1))
