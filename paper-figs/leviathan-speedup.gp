# Leviathan et al.'s expected speedup against draft length (GTCP uses it).
load 'plots/style.gp'
set title "Expected speedup (1 - a^{g+1}) / ((1 - a)(g c + 1)), c = 0.1"
set xlabel "draft length {/Symbol g}"
set ylabel "expected speedup"
set key left top
plot for [i=0:3] datafile using 1:(column(6 + i)) with linespoints ls (i+1) \
         title sprintf("a = %s", word("0.6 0.7 0.8 0.9", i+1))
