# Loss curves of the default model pair (data/models/build.sh): training and validation
# cross-entropy of the target and the draft against tokens seen, and the draft's KL to
# the target on validation text. Receives target, draft (the two training logs), out, fmt,
# and optionally pair (the title's name of the pair; default "Default model pair").
load 'plots/style.gp'
eval setterm(900, 540)
# the logs hold nan where a step has no validation pass: skip those rows, keep lines whole
set datafile missing "nan"
set xlabel "tokens seen"
set format x "%.1s%c"
set ylabel "nats per token"
if (!exists("pair")) pair = "Default model pair"
set title pair . ": training and validation loss"
set key top right
set yrange [0:*]
plot target using 2:3 with lines ls 1 lw 1 dt 3 title "target, train", \
     target using 2:4 with linespoints ls 1 title "target, validation", \
     draft using 2:3 with lines ls 2 lw 1 dt 3 title "draft, train (labels)", \
     draft using 2:4 with linespoints ls 2 title "draft, validation", \
     draft using 2:8 with linespoints ls 3 title "draft, validation KL to the target"
