# bench/attn.gnuplot - plots of bench/out/attn.csv (bench/bench-attn.sh):
#   gnuplot -e "csv='bench/out/attn.csv'; outdir='bench/out'" bench/attn.gnuplot
# attn_time.png: seconds per training step vs N, log-log, one line per kind,
# one panel per d, with N and N^2 guides; attn_mem.png: peak RSS of the layer
# vs N (skipped sizes: their analytic buffers as open circles).
# Linear-complexity kinds are solid lines, quadratic ones dashed. Only the
# widths, kinds and sizes of the CSV are drawn (a narrowed sweep: ATTN_KINDS,
# ATTN_DIMS, ATTN_NMIN, ATTN_NMAX), with no gnuplot warning
# (tests/bats/bench.bats).
if (!exists("csv")) csv = 'bench/out/attn.csv'
if (!exists("outdir")) outdir = 'bench/out'

# Every kind in plotting order (its colour and point); the last nlin are the
# linear ones. A kind of the CSV not named here is drawn too, in grey.
allkinds = "softmax positional fpositional average linear-anneal exp-anneal mixing linrec linear efficient efficient-dwc hydra"
nlin = 5
nall = words(allkinds)
array col[12] = [0xd62728, 0xff7f0e, 0x8c564b, 0xbcbd22, 0xe377c2, 0x9467bd, 0x7f7f7f, \
                 0x1f77b4, 0x17becf, 0x2ca02c, 0x006d2c, 0x000000]
inlist(s, l) = strstrt(" " . l . " ", " " . s . " ") > 0
# Position of kind name s in allkinds (1-based; 0: not there).
kidx(s) = inlist(s, allkinds) ? words(substr(" " . allkinds . " ", 1, strstrt(" " . allkinds . " ", " " . s . " "))) + 1 : 0
kcol(s) = kidx(s) > 0 ? col[kidx(s)] : 0x888888
kpt(s) = (kidx(s) % 7) + 4
isquad(s) = kidx(s) > 0 && kidx(s) <= nall - nlin

# Only what the CSV has, so that a narrowed sweep (ATTN_KINDS, ATTN_DIMS)
# draws no empty panel and no line without points: its widths, in order, and
# per width the kinds with a measured (ok) size, in allkinds order (for the
# memory plot: with a peak RSS above 0, the points it draws).
dims = system(sprintf("awk -F, 'NR > 1 && !s[$2]++ { printf \"%%s \", $2 }' %s", csv))
got(d, cond) = system(sprintf("awk -F, '$2 == %s && $9 == \"ok\" %s && !s[$1]++ { printf \"%%s \", $1 }' %s", d, cond, csv))
# g's kinds in allkinds order, then any other; "-" (a dummy row outside the
# plot, untitled) for none: gnuplot opens the file of a `plot for` even over
# no kinds, and warns that it is empty.
ordered(g) = (ks = "", sum [i = 1:nall] (inlist(word(allkinds, i), g) ? (ks = ks . word(allkinds, i) . " ", 0) : 0), \
              sum [i = 1:words(g)] (inlist(word(g, i), allkinds) ? 0 : (ks = ks . word(g, i) . " ", 0)), \
              ks eq "" ? "-" : ks)
if (words(dims) == 0) { print "attn.gnuplot: no rows in " . csv; exit }
ndims = words(dims)
array kinds_time[ndims]
array kinds_mem[ndims]
do for [di = 1:ndims] {
  kinds_time[di] = ordered(got(word(dims, di), ""))
  kinds_mem[di] = ordered(got(word(dims, di), "&& $7 > 0"))
}

# Rows of kind k, width d and status ok; all skipped rows of width d
# (a dummy row at N = 1, outside the plot, when there are none); columns as
# in the CSV.
sel(k, d) = k eq "-" ? "< echo '-,0,1,1,1,1,1'" : \
  sprintf("< awk -F, '$1 == \"%s\" && $2 == %s && $9 == \"ok\"' %s", k, d, csv)
skipped(d) = sprintf("< awk -F, '$2 == %s && $9 ~ /^skipped/ { print; n++ } END { if (!n) print \"softmax,%s,1,1,1,,,1,skipped\" }' %s", d, d, csv)
# The steps at N = 1024 of width d (0.01 s when there are none).
allok(d) = sprintf("< awk -F, '$2 == %s && $9 == \"ok\" && $3 == 1024 { print; n++ } END { if (!n) print \"-,%s,1024,1,1,0.01\" }' %s", d, d, csv)
set datafile separator comma

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size (ndims > 1 ? 1700 : 950),760 font "sans,11"
} else {
  set terminal png size (ndims > 1 ? 1700 : 950),760
}

set logscale xy 2
set format x "%g"
set xtics (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# the sizes of the CSV (ATTN_NMIN, ATTN_NMAX), with a margin
nlo = real(system(sprintf("awk -F, 'NR > 1 && $3 > 1 && (!m || $3 < m) { m = $3 } END { print m + 0 }' %s", csv)))
nhi = real(system(sprintf("awk -F, 'NR > 1 && $3 > m { m = $3 } END { print m + 0 }' %s", csv)))
set xrange [0.75 * nlo:1.35 * nhi]
set grid xtics ytics mxtics mytics lc rgb "#dddddd"
set xlabel "sequence length N (B = 1 sequence, causal)"
set key top left font ",9" spacing 0.9 box opaque

# ---- time ----
set output outdir . "/attn_time.png"
set multiplot layout 1,ndims title "One attention sublayer, training step (projections + kernel + output projection, forward + backward), 2 threads\nmissing points: skipped (see attn.csv)"
set logscale y 10
set format y "10^{%L}"
set ylabel "seconds per step (median)"
do for [di = 1:ndims] {
  d = word(dims, di)
  stats allok(d) using 6 nooutput
  a = STATS_mean  # the guides pass through (1024, a)
  set title sprintf("d = %s", d)
  ks = kinds_time[di]
  plot for [k in ks] sel(k, d) using 3:6 with linespoints \
         lw 2 pt kpt(k) ps 0.9 dt 1 + isquad(k) lc rgb kcol(k) title (k eq "-" ? "" : k), \
       a * x / 1024 with lines lw 1 dt 3 lc rgb "#555555" title "∝ N", \
       a * (x / 1024)**2 with lines lw 1 dt 4 lc rgb "#555555" title "∝ N²"
}
unset multiplot

# ---- memory ----
set output outdir . "/attn_mem.png"
set multiplot layout 1,ndims title "One attention sublayer: peak RSS of the training step minus the process baseline\nopen circles: analytic buffers of skipped sizes"
set ylabel "peak memory (MiB)"
set format y "%g"
do for [di = 1:ndims] {
  d = word(dims, di)
  set title sprintf("d = %s", d)
  # The values drawn (peak RSS of ok sizes, buffers of skipped ones): a
  # panel with none or one (narrowed sweeps) needs a range.
  stats sprintf("< awk -F, '$2 == %s && ($9 == \"ok\" && $7 > 0 || $9 ~ /^skipped/) { print $9 == \"ok\" ? $7 : $8; n++ } END { if (!n) print 0 }' %s", d, csv) \
    using 1 nooutput
  if (STATS_max <= 0) { set yrange [0.1:100] } else {
    if (STATS_min == STATS_max) { set yrange [STATS_min / 2:STATS_max * 2] } else { set yrange [*:*] }
  }
  ks = kinds_mem[di]
  plot for [k in ks] sel(k, d) using 3:($7 > 0 ? $7 : 1/0) with linespoints \
         lw 2 pt kpt(k) ps 0.9 dt 1 + isquad(k) lc rgb kcol(k) title (k eq "-" ? "" : k), \
       skipped(d) using 3:8:(kcol(strcol(1))) with points \
         pt 6 ps 1.6 lw 1.5 lc rgb variable notitle, \
       NaN with points pt 6 ps 1.6 lw 1.5 lc rgb "black" title "skipped (analytic)"
}
unset multiplot
