# RSD Fig. 1 as slices: acceptance against q at p = 0.25 (solid) and 0.75 (dashed).
load 'plots/style.gp'
set title "RSD Fig. 1, slices: K = 2 drafts, draft Ber(p), target Ber(q)"
set xlabel "q (target probability of token 1)"
set ylabel "acceptance probability"
set yrange [0:1.05]
set key at graph 0.98, graph 0.45
names = "specinfer K-SEQ OTM rrs"
plot for [i=1:4] datafile using 1:(column(1 + i)) with lines ls i title word(names, i)." (p = 0.25)", \
     for [i=1:4] datafile using 1:(column(5 + i)) with lines ls i dt 2 title word(names, i)." (p = 0.75)"
