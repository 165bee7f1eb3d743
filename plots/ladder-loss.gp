# Loss curves of the draft ladder (data/models/ladder.sh): each draft's validation
# cross-entropy and its validation KL to the target against tokens seen, beside the
# shipped draft's. Receives dir (data/models), out, fmt.
load 'plots/style.gp'
eval setterm(900, 540)
set datafile missing "nan"
set xlabel "tokens seen"
set format x "%.1s%c"
set ylabel "nats per token"
set title "Draft ladder: validation loss (solid) and KL to the target (dashed)"
set key top right
set yrange [0:*]
names = "ladder-d48 ladder-d96 draft ladder-t1"
labels = "'d48 x 1' 'd96 x 1' 'd128 x 2 (shipped)' 't1 (target block 1)'"
f(i) = sprintf("%s/%s.tsv", dir, word(names, i))
plot for [i = 1:4] f(i) using 2:4 with linespoints ls i title word(labels, i), \
     for [i = 1:4] f(i) using 2:8 with lines ls i dt 2 notitle
