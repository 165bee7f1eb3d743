# ParallelSpec Fig. 4 in kind on the real pair: the parallel drafter (data/models/
# parallel.gguf, L tokens from one pass over the context and L - 1 [MASK]s) beside the
# sequential draft of the same size (draft.gguf, L passes), both verified as chains (sd),
# for L = 1..8: draft time per block, block efficiency (tokens per target call) and
# the speedup over autoregressive decoding, measured (filled) and predicted before the run by the cost model (open).
# Data: make bench-parallel (specdec decode --parallel-sweep 1-8 --tsv).
load 'plots/style.gp'
eval setterm(1200, 420)
on = exists("label") ? " on ".label : ""
set multiplot layout 1, 3 title "Parallel vs sequential drafter on the default pair (specdec decode --parallel-sweep 1-8)".on
set xlabel "draft length L"
set xrange [0.5:8.5]
set xtics 1
set key left top font ",9"
par(s) = strstrt(s, "parallel L=") == 1
seq(s) = strstrt(s, "sequential L=") == 1
set title "draft time per block"
set ylabel "ms"
plot datafile using (par(strcol(1)) ? $5 : 1/0):13 with points ls 1 ps 1.3 title "parallel", \
     '' using (par(strcol(1)) ? $5 : 1/0):14 with points ls 1 pt 6 ps 1.3 title "parallel, predicted", \
     '' using (seq(strcol(1)) ? $5 : 1/0):13 with points ls 2 ps 1.3 title "sequential", \
     '' using (seq(strcol(1)) ? $5 : 1/0):14 with points ls 2 pt 4 ps 1.3 title "sequential, predicted"
set title "block efficiency (tokens per target call)"
set ylabel "tokens / block"
plot datafile using (par(strcol(1)) ? $5 : 1/0):10 with linespoints ls 1 ps 1.3 title "parallel", \
     '' using (seq(strcol(1)) ? $5 : 1/0):10 with linespoints ls 2 ps 1.3 title "sequential"
set title "speedup over autoregressive decoding"
set ylabel "speedup"
set key left bottom
plot datafile using (par(strcol(1)) ? $5 : 1/0):8 with points ls 1 ps 1.3 title "parallel", \
     '' using (par(strcol(1)) ? $5 : 1/0):9 with points ls 1 pt 6 ps 1.3 title "parallel, predicted", \
     '' using (seq(strcol(1)) ? $5 : 1/0):8 with points ls 2 ps 1.3 title "sequential", \
     '' using (seq(strcol(1)) ? $5 : 1/0):9 with points ls 2 pt 4 ps 1.3 title "sequential, predicted"
unset multiplot
