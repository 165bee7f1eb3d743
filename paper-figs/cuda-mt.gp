# The CUDA decoder's target pass over n tokens (tests/gpu-check.sh's bench step, from
# tests/bench/bench_cuda): M_T(n)/M_T(1) against n for each model, with CUDA graphs
# (filled) and without (open), and the one-token pass's weight bytes per second as a
# share of the device's copy bandwidth. A memory-bound pass is flat in n while the
# weights are read once (up to 16 tokens a chunk), and near the copy bandwidth at n = 1.
# Data: make gpu-check (cuda-mt.tsv: one block per model; their names in "# models:").
load 'plots/style.gp'
eval setterm(1100, 440)
on = exists("label") ? " on ".label : ""
models = system("sed -n 's/^# models: //p' '".datafile."' | head -1")
nm = words(models)
set multiplot layout 1, 2 title "Target pass over n tokens, CUDA decoder".on
set xlabel "tokens in the pass, n"
set logscale x 2
set xrange [0.8:80]
set key left top font ",9"
set title "M_T(n) / M_T(1)"
set ylabel "ratio"
plot for [i = 1:nm] datafile index (i - 1) using 2:4 with linespoints ls i title word(models, i), \
     for [i = 1:nm] datafile index (i - 1) using 2:8 with linespoints ls i pt 6 dt 2 title word(models, i)." (no graphs)"
set title "weight bytes / pass time, share of the copy bandwidth"
set ylabel "% of copy bandwidth"
set key right top
plot for [i = 1:nm] datafile index (i - 1) using 2:6 with linespoints ls i title word(models, i), \
     70 with lines ls 6 dt 3 title "goal at n = 1: 70%"
unset multiplot
