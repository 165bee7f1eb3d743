# MCSD Figs. 4-5 in kind: block efficiency and speedup per k-configuration.
load 'plots/style.gp'
eval setterm(1000, 440)
set multiplot layout 1,2 title "MCSD Figs. 4-5 in kind: k-configurations on a synthetic Markov pair"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -35
set key left top
set ylabel "block efficiency"
plot datafile using 3:xtic(7) title "i.i.d. (specinfer)" ls 1, '' using 5 title "w/o replacement (rrs)" ls 2
set ylabel "speedup"
plot datafile using 4:xtic(7) title "i.i.d. (specinfer)" ls 1, '' using 6 title "w/o replacement (rrs)" ls 2
unset multiplot
