# bench/attn.gnuplot - plots of bench/out/attn.csv (bench/bench-attn.sh):
#   gnuplot -e "csv='bench/out/attn.csv'; outdir='bench/out'" bench/attn.gnuplot
# attn_time.png: seconds per training step vs N, log-log, one line per kind,
# one panel per d, with N and N^2 guides; attn_mem.png: peak RSS of the layer
# vs N (skipped sizes: their analytic buffers as open circles).
# Linear-complexity kinds are solid lines, quadratic ones dashed.
if (!exists("csv")) csv = 'bench/out/attn.csv'
if (!exists("outdir")) outdir = 'bench/out'

kinds = "softmax positional fpositional average linear-anneal exp-anneal mixing linrec linear efficient hydra"
nlin = 4  # the last nlin kinds are the linear ones
nk = words(kinds)
dims = "64 128"
array col[11] = [0xd62728, 0xff7f0e, 0x8c564b, 0xbcbd22, 0xe377c2, 0x9467bd, 0x7f7f7f, \
                 0x1f77b4, 0x17becf, 0x2ca02c, 0x000000]
# Position of kind name s in kinds (1-based).
kidx(s) = words(substr(" " . kinds . " ", 1, strstrt(" " . kinds . " ", " " . s . " "))) + 1

# Rows of kind k, width d and status ok; all skipped rows of width d
# (a dummy row at N = 1, outside the plot, when there are none); columns as
# in the CSV.
sel(k, d) = sprintf("< awk -F, '$1 == \"%s\" && $2 == %s && $9 == \"ok\"' %s", k, d, csv)
skipped(d) = sprintf("< awk -F, '$2 == %s && $9 ~ /^skipped/ { print; n++ } END { if (!n) print \"softmax,%s,1,1,1,,,1,skipped\" }' %s", d, d, csv)
# The steps at N = 1024 of width d (0.01 s when there are none).
allok(d) = sprintf("< awk -F, '$2 == %s && $9 == \"ok\" && $3 == 1024 { print; n++ } END { if (!n) print \"-,%s,1024,1,1,0.01\" }' %s", d, d, csv)
isquad(i) = i <= nk - nlin
set datafile separator comma

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1700,760 font "sans,11"
} else {
  set terminal png size 1700,760
}

set logscale xy 2
set format x "%g"
set xtics (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
set xrange [48:22000]
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set xlabel "sequence length N (B = 1 sequence, causal)"
set key top left font ",9" spacing 0.9 box opaque

# ---- time ----
set output outdir . "/attn_time.png"
set multiplot layout 1,2 title "One attention sublayer, training step (projections + kernel + output projection, forward + backward), 2 threads; missing points: skipped (see attn.csv)"
set logscale y 10
set format y "10^{%L}"
set ylabel "seconds per step (median)"
do for [di = 1:words(dims)] {
  d = word(dims, di)
  stats allok(d) using 6 nooutput
  a = STATS_mean  # the guides pass through (1024, a)
  set title sprintf("d = %s", d)
  plot for [i = 1:nk] sel(word(kinds, i), d) using 3:6 with linespoints \
         lw 2 pt (i % 7) + 4 ps 0.9 dt 1 + isquad(i) lc rgb col[i] title word(kinds, i), \
       a * x / 1024 with lines lw 1 dt 3 lc rgb "#555555" title "∝ N", \
       a * (x / 1024)**2 with lines lw 1 dt 4 lc rgb "#555555" title "∝ N²"
}
unset multiplot

# ---- memory ----
set output outdir . "/attn_mem.png"
set multiplot layout 1,2 title "One attention sublayer: peak RSS of the training step minus the process baseline; open circles: analytic buffers of skipped sizes"
set ylabel "peak memory (MiB)"
set format y "%g"
do for [di = 1:words(dims)] {
  d = word(dims, di)
  set title sprintf("d = %s", d)
  # A panel without a single measured point (narrowed sweeps) needs a range.
  stats sprintf("< awk -F, '$2 == %s && $9 == \"ok\" { n++ } END { print n + 0 }' %s", d, csv) \
    using 1 nooutput
  if (STATS_max == 0) { set yrange [0.1:100] } else { set yrange [*:*] }
  plot for [i = 1:nk] sel(word(kinds, i), d) using 3:($7 > 0 ? $7 : 1/0) with linespoints \
         lw 2 pt (i % 7) + 4 ps 0.9 dt 1 + isquad(i) lc rgb col[i] title word(kinds, i), \
       skipped(d) using 3:8:(col[kidx(strcol(1))]) with points \
         pt 6 ps 1.6 lw 1.5 lc rgb variable notitle, \
       NaN with points pt 6 ps 1.6 lw 1.5 lc rgb "black" title "skipped (analytic)"
}
unset multiplot
