# The CPU decoder's target pass over n tokens (make bench-mt, tests/bench/mt-curve.sh):
# M_T(n) in ms against n for each model, beside its roofline (the weights read once at
# the read bandwidth measured for a buffer of their size, or the FMA work of n tokens at the measured FMA rate,
# whichever is longer), and M_T(n) / roofline. A memory-bound pass stays flat in n
# while the weights are read once; the large target's does, the shipped target's (in the
# cache) does not.
# Data: cpu-mt.tsv (one block per model; their names in "# models:").
load 'plots/style.gp'
eval setterm(1100, 440)
models = system("sed -n 's/^# models: *//p' '".datafile."' | head -1")
nm = words(models)
set multiplot layout 1, 2 title "Target pass over n tokens, CPU decoder, beside its roofline"
set xlabel "tokens in the pass, n"
set logscale xy 2
set xrange [0.8:80]
set key left top font ",9"
set title "M_T(n), ms (dashed: roofline)"
set ylabel "ms"
plot for [i = 1:nm] datafile index (i - 1) using 2:3 with linespoints ls i title word(models, i), \
     for [i = 1:nm] datafile index (i - 1) using 2:4 with lines ls i dt 2 title word(models, i)." roofline"
set title "M_T(n) / roofline"
set ylabel "ratio"
unset logscale y
set yrange [0:*]
plot for [i = 1:nm] datafile index (i - 1) using 2:5 with linespoints ls i title word(models, i), \
     1.15 with lines ls 6 dt 3 title "goal: 1.15"
unset multiplot
