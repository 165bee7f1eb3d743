# GTCP Table 4 and Fig. 3 in kind on the real pair: measured tokens per second of static
# and dynamic GT trees against the threshold c' = c x M (c = M_D / M_T measured), one
# panel per temperature; the throughput-optimal tree as a level line. Data: make bench-e2e.
load 'plots/style.gp'
eval setterm(1200, 440)
on = exists("label") ? " on ".label : ""
set multiplot layout 1, 3 title "GT threshold sweep on the default pair (specdec decode --gt-sweep)".on
set xlabel "c' / c"
set ylabel "measured tokens/s"
set logscale x 2
set xrange [0.2:5]
set key right bottom font ",9"
do for [T in "0 0.7 1"] {
    set title sprintf("temperature %s", T)
    # a temperature without rows (a run cut short) gets an empty panel, not an error
    stats datafile using ($4 == real(T) ? 1 : 0) nooutput
    if (STATS_sum == 0) {
        set title sprintf("temperature %s: no data", T)
        plot [0.2:5][0:1] 2 notitle
        continue
    }
    plot datafile using (strstrt(strcol(1), "gt x") == 1 && $4 == real(T) ? $3 : 1/0):6 with points ls 1 ps 1.3 title "GT static", \
         '' using (strstrt(strcol(1), "gt-dynamic") == 1 && $4 == real(T) ? $3 : 1/0):6 with points ls 2 ps 1.3 title "GT dynamic", \
         '' using (strcol(1) eq "throughput" && $4 == real(T) ? 0.25 : 1/0):6:(3.75):(0) with vectors nohead ls 3 title "throughput-optimal", \
         '' using (strcol(1) eq "ar" && $4 == real(T) ? 0.25 : 1/0):6:(3.75):(0) with vectors nohead ls 6 dt 2 title "autoregressive"
}
unset multiplot
