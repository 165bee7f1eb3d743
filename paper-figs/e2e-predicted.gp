# specdec decode on the default pair: measured speedup over autoregressive decoding
# against the speedup predicted before the run (calibrated rank acceptance, measured
# M_T(n) and M_D(n)), one point per scheme and shape, with the +-10% band. Speedups
# cancel the machine's speed, which wanders by tens of percent on a shared VM (the
# token rates themselves are in the data file). Data: make bench-e2e.
load 'plots/style.gp'
on = exists("label") ? " on ".label : ""
set title "End to end: measured against predicted speedup (specdec decode --scheme all)".on
set xlabel "predicted speedup over ar"
set ylabel "measured speedup over ar"
set key left top
# 1.15, or past the largest speedup (a GPU's)
stats datafile using 8 nooutput
m8 = STATS_max
stats datafile using 9 nooutput
hi = 1.1 * (m8 > STATS_max ? m8 : STATS_max)
hi = hi > 1.15 ? hi : 1.15
set xrange [0:hi]
set yrange [0:hi]
set style fill transparent solid 0.15 noborder
plot '+' using 1:(0.9 * $1):(1.1 * $1) with filledcurves lc rgb "#1b6ca8" title "within 10%", \
     x with lines ls 6 dt 2 title "measured = predicted", \
     datafile using 9:8 with points ls 2 ps 1.3 title "scheme (ar at 1, 1)", \
     '' using 9:8:1 with labels offset char 0.8, char 0.6 left font ",9" notitle
