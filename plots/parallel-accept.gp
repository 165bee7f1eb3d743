# Training of the parallel drafter (data/models/build.sh, specdec train --parallel 7):
# per-position acceptance on validation text against the target's law, sum_x min(q, p)
# at temperature 1, for the group's own token (position 0, the next-token law) and each
# [MASK]_i (position i), and the validation loss. Receives log (the training TSV), out, fmt.
load 'plots/style.gp'
eval setterm(1000, 420)
set datafile missing "nan"
set multiplot layout 1, 2 title "Parallel drafter: group-wise distillation from the target"
set xlabel "step"
set ylabel "acceptance (temperature 1)"
set title "per-position acceptance, validation"
set key outside right font ",9"
set yrange [0:1]
plot log using 1:9 with linespoints ls 1 title "position 0", \
     for [i=1:7] log using 1:(column(10 + i)) with linespoints ls (i % 8 + 1) title sprintf("[MASK]_%d", i)
set title "validation loss (all positions)"
set ylabel "nats per token"
set yrange [*:*]
set key top right
plot log using 1:4 with linespoints ls 1 title "validation", log using 1:3 with lines ls 2 dt 3 title "train"
unset multiplot
