# ParallelSpec Fig. 4 in kind: parallel drafter (one draft call) against a sequential chain.
load 'plots/style.gp'
eval setterm(1000, 420)
set multiplot layout 1,2 title "ParallelSpec Fig. 4 in kind: number of parallel draft positions L"
set xlabel "L"
set key left top
set ylabel "block efficiency"
plot datafile using 1:2 with linespoints ls 1 title "parallel (one draft call)", '' using 1:4 with linespoints ls 2 title "sequential (L calls)"
set ylabel "speedup"
plot datafile using 1:3 with linespoints ls 1 title "parallel", '' using 1:5 with linespoints ls 2 title "sequential"
unset multiplot
