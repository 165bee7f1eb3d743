# GTCP's node cost/benefit picture: benefit a^i against cost c; time saved and speedup.
load 'plots/style.gp'
eval setterm(1000, 420)
set multiplot layout 1,2 title "GT principle: a node pays while its acceptance a^i exceeds c = M_D/M_T (a = 0.8, c = 0.1)"
set xlabel "node (draft position) i"
set key right top
set ylabel "per node (units of M_T)"
plot datafile using 1:2 with linespoints ls 1 title "benefit a^i", '' using 1:3 with lines ls 2 title "cost c"
set key right bottom
set ylabel ""
plot datafile using 1:4 with linespoints ls 3 title "time saved dT (peak: GT depth 10)", \
     '' using 1:5 with linespoints ls 4 title "Leviathan speedup (peak: 6)"
unset multiplot
