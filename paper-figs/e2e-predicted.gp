# specdec decode on the default pair: measured tokens per second against the prediction
# made before the run (calibrated rank acceptance, measured M_T(n), M_D(n)), one point
# per scheme and shape, with the +-10% band of the issue's goal. Data: make bench-e2e.
load 'plots/style.gp'
set title "End to end: measured against predicted token rate (specdec decode --scheme all)"
set xlabel "predicted tokens/s"
set ylabel "measured tokens/s"
set key left top
stats datafile using 7 nooutput name "P"
stats datafile using 6 nooutput name "M"
hi = 1.15 * (P_max > M_max ? P_max : M_max)
set xrange [0:hi]
set yrange [0:hi]
set style fill transparent solid 0.15 noborder
plot '+' using 1:(0.9 * $1):(1.1 * $1) with filledcurves lc rgb "#1b6ca8" title "within 10%", \
     x with lines ls 6 dt 2 title "measured = predicted", \
     datafile using 7:6 with points ls 2 ps 1.3 title "scheme (ar included)", \
     '' using 7:6:1 with labels offset char 0.8, char 0.6 left font ",9" notitle
