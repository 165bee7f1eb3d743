# specdec's shared gnuplot style. Every figure script starts with
#   load 'plots/style.gp'
# and receives from plots/draw.sh: datafile (the TSV), out (path without extension),
# fmt ("png" or "svg").
if (fmt eq "svg") {
    set terminal svg size 800,520 dynamic enhanced font "Helvetica,13" background rgb "white"
    set output out.".svg"
} else {
    set terminal pngcairo size 800,520 enhanced font "Helvetica,12" background rgb "white"
    set output out.".png"
}
set datafile separator "\t"
set datafile commentschars "#"
set border 3 lw 1.2
set tics nomirror out
set grid lc rgb "#dddddd" lw 1
set key box opaque samplen 2 spacing 1.1
set style line 1 lc rgb "#1b6ca8" lw 2 pt 7 ps 0.8
set style line 2 lc rgb "#d1495b" lw 2 pt 5 ps 0.8
set style line 3 lc rgb "#2e933c" lw 2 pt 9 ps 0.9
set style line 4 lc rgb "#edae49" lw 2 pt 11 ps 0.9
set style line 5 lc rgb "#6a4c93" lw 2 pt 13 ps 0.9
set style line 6 lc rgb "#555555" lw 2 pt 3 ps 0.8
set style increment user
