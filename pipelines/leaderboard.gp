# pipelines/leaderboard.gp - make leaderboard's quality.png: test NDCG@10
# against training seconds (log scale), one labelled point a model.
# gnuplot -e "dat='F.dat'; out='F.png'; title='NAME'" leaderboard.gp, where
# F.dat has lines "MODEL SECONDS NDCG10" (pipelines/leaderboard.sh).
set terminal pngcairo size 900,600 font ",11"
set output out
set title sprintf("%s: test NDCG@10 against training time (make leaderboard)", title) noenhanced
set xlabel "training seconds (all epochs, log scale)" noenhanced
set ylabel "test NDCG@10" noenhanced
set logscale x
set grid
set key off
set offsets graph 0.05, graph 0.15, graph 0.08, graph 0.05
plot dat using 2:3 with points pt 7 ps 1.4 lc rgb "#1f77b4", \
     dat using 2:3:1 with labels offset 0.8,0.6 left noenhanced
