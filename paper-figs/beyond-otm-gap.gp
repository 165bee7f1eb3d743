# Beyond the papers: how far each i.i.d. scheme stays from the optimum OTM-k.
load 'plots/style.gp'
set title "Mean gap to OTM-k over 200 Dirichlet(0.5) pairs, V = 20"
set xlabel "k (number of drafts)"
set ylabel "OTM-k acceptance minus the scheme's"
set key right top
plot datafile using 1:2 with linespoints ls 1 title "sd (one draft)", \
     '' using 1:3 with linespoints ls 2 title "specinfer", '' using 1:4 with linespoints ls 3 title "K-SEQ"
