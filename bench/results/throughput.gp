set terminal pngcairo size 1400,560 font 'sans,11'
set output 'bench/charts/throughput.png'
set multiplot layout 1,2
set logscale x 2
set logscale y
set grid
set xlabel 'clients'
set key top left
set xrange [0.8:80]
set xtics (1,2,4,8,16,32,64)
set title 'contended: critical sections/s (counter in Redis)'
set ylabel 'CS/s'
plot 'bench/results/contended_cs_per_s.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'memory', 'bench/results/contended_cs_per_s.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title 'memory+session', 'bench/results/contended_cs_per_s.dat' index 2 using 1:2 with linespoints lw 2 pt 7 title 'redis', 'bench/results/contended_cs_per_s.dat' index 3 using 1:2 with linespoints lw 2 pt 7 title 'redis+session', 'bench/results/contended_cs_per_s.dat' index 4 using 1:2 with linespoints lw 2 pt 7 title 'redis-direct', 'bench/results/contended_cs_per_s.dat' index 5 using 1:2 with linespoints lw 2 pt 7 title 'mysql', 'bench/results/contended_cs_per_s.dat' index 6 using 1:2 with linespoints lw 2 pt 7 title 'mysql+session', 'bench/results/contended_cs_per_s.dat' index 7 using 1:2 with linespoints lw 2 pt 7 title 'zookeeper', 'bench/results/contended_cs_per_s.dat' index 8 using 1:2 with linespoints lw 2 pt 7 title 'zookeeper+session'
set title 'uncontended: acquire+release pairs/s'
set ylabel 'pairs/s'
plot 'bench/results/uncontended_pairs_per_s.dat' index 0 using 1:2 with linespoints lw 2 pt 7 title 'memory', 'bench/results/uncontended_pairs_per_s.dat' index 1 using 1:2 with linespoints lw 2 pt 7 title 'memory+session', 'bench/results/uncontended_pairs_per_s.dat' index 2 using 1:2 with linespoints lw 2 pt 7 title 'grpc-floor', 'bench/results/uncontended_pairs_per_s.dat' index 3 using 1:2 with linespoints lw 2 pt 7 title 'grpc-floor+session', 'bench/results/uncontended_pairs_per_s.dat' index 4 using 1:2 with linespoints lw 2 pt 7 title 'redis', 'bench/results/uncontended_pairs_per_s.dat' index 5 using 1:2 with linespoints lw 2 pt 7 title 'redis+session', 'bench/results/uncontended_pairs_per_s.dat' index 6 using 1:2 with linespoints lw 2 pt 7 title 'redis-direct', 'bench/results/uncontended_pairs_per_s.dat' index 7 using 1:2 with linespoints lw 2 pt 7 title 'mysql', 'bench/results/uncontended_pairs_per_s.dat' index 8 using 1:2 with linespoints lw 2 pt 7 title 'mysql+session', 'bench/results/uncontended_pairs_per_s.dat' index 9 using 1:2 with linespoints lw 2 pt 7 title 'zookeeper', 'bench/results/uncontended_pairs_per_s.dat' index 10 using 1:2 with linespoints lw 2 pt 7 title 'zookeeper+session'
unset multiplot
