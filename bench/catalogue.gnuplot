# bench/catalogue.gnuplot - the plot of bench/out/catalogue.csv
# (bench/bench-catalogue.sh):
#   gnuplot -e "csv='bench/out/catalogue.csv'; out='bench/out/catalogue.png'" bench/catalogue.gnuplot
# Left: SASRec's seconds an epoch against the catalogue's items (log-log),
# one line a loss (ce, sampled-softmax K, gbce K; "seq+lazy", "batch+lazy":
# with --neg-share sequence or batch and --lazy-adam); right: the process's peak
# resident memory. A run the CSV has no time for (skipped) is left out; the
# title names the processor.
if (!exists("csv")) csv = 'bench/out/catalogue.csv'
if (!exists("out")) out = 'bench/out/catalogue.png'
if (!exists("pngcall")) pngcall = 'pipelines/png.gp'
call pngcall '1300' '520'
set output out

# the losses in CSV order, as loss:K:update
losses = system(sprintf("awk -F, '$1 == \"catalogue\" && NF == 9 && $7 != \"\" && !s[$3 \":\" $4 \":\" $6]++ { printf \"%%s:%%s:%%s \", $3, $4, $6 }' %s", csv))
if (words(losses) == 0) { print "catalogue.gnuplot: no timed run in " . csv; exit }
cpu = system(sprintf("awk -F, '$1 == \"catalogue\" && $2 == \"cpu\" { print $3 }' %s", csv))
users = system(sprintf("awk -F, '$1 == \"catalogue\" && $2 == \"users\" { print $3 }' %s", csv))
# "sampled-softmax:128:seq+lazy" -> "sampled-softmax K=128 seq+lazy"
lname(s) = (s[1:3] eq "ce:") ? "full CE" : system(sprintf("echo '%s' | awk -F: '{ printf \"%%s K=%%s%%s\", $1, $2, $3 == \"adam\" ? \"\" : \" \" $3 }'", s))
# shared negatives with lazy Adam dashed
dtof(s) = strstrt(s, "lazy") > 0 ? 2 : 1
sel(s, c) = sprintf("< awk -F, '$1 == \"catalogue\" && NF == 9 && $3 \":\" $4 \":\" $6 == \"%s\" && $%d != \"\" { print $2, $%d }' %s", s, c, c, csv)

# the y ranges from the data, a factor of 2 either side (taken before the
# log scale, which stats would apply): equal values (tiny runs timed at the
# clock's grain) would leave gnuplot an empty range
yall(c) = sprintf("< awk -F, '$1 == \"catalogue\" && NF == 9 && $%d != \"\" && $%d > 0 { print $%d }' %s", c, c, c, csv)
stats yall(7) using 1 nooutput
s_lo = STATS_min; s_hi = STATS_max
stats yall(8) using 1 nooutput
m_lo = STATS_min; m_hi = STATS_max
set logscale xy
set grid xtics ytics lc rgb "#dddddd"
set key top left noenhanced
set xlabel "items in the catalogue"
set format x "%.0s%c"
set style data linespoints
set multiplot layout 1,2 title sprintf("SASRec an epoch against the catalogue, %s users, by loss, %s", users, cpu) noenhanced
set yrange [s_lo / 2 : s_hi * 2]
set title "seconds an epoch (least train_seconds)"
set ylabel "seconds"
plot for [i = 1:words(losses)] sel(word(losses, i), 7) using 1:2 lw 2 pt 7 dt dtof(word(losses, i)) title lname(word(losses, i))
set yrange [m_lo / 2 : m_hi * 2]
set title "peak resident memory"
set ylabel "MiB"
plot for [i = 1:words(losses)] sel(word(losses, i), 8) using 1:2 lw 2 pt 7 dt dtof(word(losses, i)) title lname(word(losses, i))
unset multiplot
