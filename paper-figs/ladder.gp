# The draft ladder (tests/bench/ladder.sh): against the draft's parameters, its sd
# acceptance on replayed logits (99.9% interval) and its cost c = M_D(1)/M_T(1) (left);
# sd's and the best scheme's speedup over ar, predicted before the run and measured
# (right; 1 = autoregressive decoding).
load 'plots/style.gp'
eval setterm(1100, 440)
set multiplot layout 1,2 title "Draft size: quality, cost and speedup" . (exists("label") ? " (".label.")" : "")
set xlabel "draft parameters"
set logscale x
set format x "%.1s%c"
set key left top
set yrange [0:1]
set title "acceptance and cost"
plot datafile using 2:9:10:11 with yerrorlines ls 1 title "sd acceptance (replayed logits)", \
     datafile using 2:12 with linespoints ls 2 title "c = M_D(1) / M_T(1)", \
     datafile using 2:9:1 with labels offset 0,1 font ",8" notitle
set title "speedup over ar"
set yrange [0:1.6]
set key right top
set ylabel "speedup"
plot datafile using 2:20 with linespoints ls 1 title "sd, measured", \
     datafile using 2:21 with linespoints ls 1 dt 2 title "sd, predicted", \
     datafile using 2:18 with linespoints ls 3 title "best scheme, measured", \
     datafile using 2:15 with linespoints ls 3 dt 2 title "predicted best, predicted", \
     1 with lines ls 6 dt 3 title "ar"
unset multiplot
