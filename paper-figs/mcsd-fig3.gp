# MCSD Fig. 3 in kind: acceptance against k, i.i.d. against without-replacement drafts.
load 'plots/style.gp'
set title "MCSD Fig. 3 in kind: acceptance of k drafts, Zipf(1.2) target over 50 tokens"
set xlabel "k (number of drafts)"
set ylabel "acceptance probability"
set key right bottom
plot datafile using 1:2 with linespoints ls 1 title "i.i.d. (specinfer), draft T = 0.7", \
     datafile using 1:3 with linespoints ls 2 title "w/o replacement (rrs), draft T = 0.7", \
     datafile using 1:4 with linespoints ls 3 title "i.i.d. (specinfer), draft T = 1.5", \
     datafile using 1:5 with linespoints ls 4 title "w/o replacement (rrs), draft T = 1.5"
