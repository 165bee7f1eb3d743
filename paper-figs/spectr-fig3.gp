# SpecTr Fig. 3: OTM-k acceptance against the target's q, draft Ber(0.25).
load 'plots/style.gp'
set title "SpecTr Fig. 3: OTM-k acceptance against q, draft Ber(0.25)"
set xlabel "q (target probability of token 1)"
set ylabel "acceptance probability"
set yrange [0:1.02]
set key right bottom
plot for [i=0:3] datafile using 1:(column(2 + i)) with lines ls (i+1) \
         title sprintf("k = %s", word("1 2 4 8", i+1))
