# Beyond the papers: samples needed to catch each planted bug (bench_planted).
load 'plots/style.gp'
set title "Samples the certification needs to reject each planted bug at p < 1e-6"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set yrange [500:*]
set ylabel "samples (doubling from 1000)"
set xtics rotate by -30 font ",9"
set key left top
plot datafile using 2:xtic(4) title "token level" ls 1, '' using 3 title "sequence level" ls 2
