# specdec's shared gnuplot style. Every figure script starts with
#   load 'plots/style.gp'
# and receives from plots/draw.sh: datafile (the TSV), out (path without extension),
# fmt ("png" or "svg"), and small=1 for the gallery's thumbnails. A script that needs
# another canvas size says so with: eval setterm(width, height)
sc = exists("small") ? 0.6 : 1.0
setterm(w, h) = (fmt eq "svg") \
  ? sprintf('set terminal svg size %d,%d dynamic enhanced font "Helvetica,12" background rgb "white"; set output "%s.svg"', w * sc, h * sc, out) \
  : sprintf('set terminal pngcairo size %d,%d enhanced font "Helvetica,%d" background rgb "white"; set output "%s.png"', w * sc, h * sc, sc < 1 ? 8 : 11, out)
eval setterm(800, 520)
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
