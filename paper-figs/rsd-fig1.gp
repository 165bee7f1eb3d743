# RSD Fig. 1: acceptance of K = 2 drafts over the (p, q) square, four schemes.
load 'plots/style.gp'
eval setterm(1000, 860)
set multiplot layout 2,2 title "RSD Fig. 1: acceptance with K = 2 drafts, draft Ber(p), target Ber(q)"
set view map
set pm3d map interpolate 0,0
set palette rgbformulae 33,13,10
set cbrange [0:1]
set xrange [0:1]
set yrange [0:1]
set xlabel "p (draft)"
set ylabel "q (target)"
set grid front
unset key
names = "specinfer K-SEQ OTM recursive-rejection"
do for [i=1:4] {
    set title word(names, i)
    splot datafile using 1:2:(column(2 + i)) with pm3d
}
unset multiplot
