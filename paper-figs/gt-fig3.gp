# GTCP Fig. 3 in kind: sampling temperature against speedup.
load 'plots/style.gp'
set title "GTCP Fig. 3 in kind: sampling temperature (both models) against speedup"
set xlabel "temperature"
set ylabel "speedup (cost model)"
set key right top
plot datafile using 1:3 with linespoints ls 1 title "GT dynamic tree", '' using 1:5 with linespoints ls 2 title "chain of 4"
