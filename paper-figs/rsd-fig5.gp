# RSD Fig. 5 in kind: fixed target budget, every tree per method.
load 'plots/style.gp'
eval setterm(1100, 420)
set multiplot layout 1,3 title "RSD Fig. 5 in kind (synthetic Markov pair): every tree of RSD's list, by target budget"
set xlabel "target budget (draft tokens)"
set xrange [4:32]
set key left top
names = "SD SpecTr RSD-C RSD-S"
set ylabel "block efficiency"
plot for [m=1:4] datafile using ($2 == m ? $1 + (m - 2.5) * 0.5 : 1/0):4 with points ls m title word(names, m)
set ylabel "MBSU"
plot for [m=1:4] datafile using ($2 == m ? $1 + (m - 2.5) * 0.5 : 1/0):6 with points ls m title word(names, m)
set ylabel "token rate (per target time)"
plot for [m=1:4] datafile using ($2 == m ? $1 + (m - 2.5) * 0.5 : 1/0):7 with points ls m title word(names, m)
unset multiplot
