# Beyond the papers: GT's rule against the throughput-optimal tree.
load 'plots/style.gp'
set title "GT's tree against the throughput-optimal tree (predicted), by cost ratio"
set xlabel "c = M_D / M_T"
set ylabel "predicted token rate"
set y2label "GT / optimal"
set logscale x
set y2tics
set ytics nomirror
set key right top
plot datafile using 1:5 with linespoints ls 1 title "throughput-optimal", '' using 1:3 with linespoints ls 2 title "GT (threshold c)", \
     '' using 1:6 axes x1y2 with lines ls 3 dt 2 title "GT / optimal (right axis)"
