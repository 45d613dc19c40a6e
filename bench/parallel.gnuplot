# bench/parallel.gnuplot - the plot of bench/out/parallel.csv
# (bench/bench-parallel.sh):
#   gnuplot -e "csv='bench/out/parallel.csv'; out='bench/out/parallel.png'" bench/parallel.gnuplot
# Left: SASRec's seconds an epoch per run (threads1, threads2, mpi-np1,
# mpi-np2), one group of bars a dataset; right: the speedup over the
# launcher's P = 1 (mpi-np1). A run the CSV has no time for (no mpirun) is
# left out; the title names the processor, and the key whether each
# launcher run wrote the bytes of its one-process twin.
if (!exists("csv")) csv = 'bench/out/parallel.csv'
if (!exists("out")) out = 'bench/out/parallel.png'
if (!exists("pngcall")) pngcall = 'pipelines/png.gp'
call pngcall '1300' '520'
set output out

runs = "threads1 threads2 mpi-np1 mpi-np2"
array col[4] = [0x1f77b4, 0xaec7e8, 0xff7f0e, 0xd62728]
# the datasets in CSV order
sets = system(sprintf("awk -F, '$1 == \"parallel\" && NF == 10 && !s[$2]++ { printf \"%%s \", $2 }' %s", csv))
if (words(sets) == 0) { print "parallel.gnuplot: no rows in " . csv; exit }
cpu = system(sprintf("awk -F, '$1 == \"parallel\" && $2 == \"cpu\" { print $3 }' %s", csv))
isa = system(sprintf("awk -F, '$1 == \"parallel\" && $2 == \"vector_isa\" { print $3 }' %s", csv))
epochs = system(sprintf("awk -F, '$1 == \"parallel\" && $2 == \"epochs\" { print $3 }' %s", csv))
# whether the launcher runs wrote their twins' bytes, per dataset
same = system(sprintf("awk -F, '$1 == \"parallel\" && NF == 10 && $3 ~ /^mpi-/ { if (!s[$2]++) d[++n] = $2; v[$2] = v[$2] (v[$2] == \"\" ? \"\" : \" / \") $10 } END { for (i = 1; i <= n; i++) printf \"%%s%%s %%s\", (i > 1 ? \", \" : \"\"), d[i], v[d[i]] }' %s", csv))

# Run name r of every dataset with a value in column c: x (the dataset's
# group, 5 apart, the run's place in runs), value, label (fmt of the value).
ridx(r) = words(substr(" " . runs . " ", 1, strstrt(" " . runs . " ", " " . r . " "))) + 1
awkhead = "< awk -F, '$1 == \"parallel\" && NF == 10 && !s[$2]++ { d[$2] = n++ } "
sel(r, c, fmt) = awkhead . sprintf("$1 == \"parallel\" && NF == 10 && $3 == \"%s\" && $%d != \"\" { printf \"%%d %%s %s\\n\", 5 * d[$2] + %d, $%d, $%d }' %s", \
  r, c, fmt, ridx(r) - 1, c, c, csv)
# the runs with a value in column c, in the order of runs (without mpirun
# the launcher's have no time and no run has a speedup)
have(c) = system(sprintf("awk -F, '$1 == \"parallel\" && NF == 10 && $%d != \"\" { t[$3] = 1 } END { n = split(\"%s\", r, \" \"); for (i = 1; i <= n; i++) if (r[i] in t) printf \"%%s \", r[i] }' %s", c, runs, csv))
timed = have(7)
sped = have(8)
if (words(timed) == 0) { print "parallel.gnuplot: no timed run in " . csv; exit }
set xtics scale 0 ()
do for [i = 1:words(sets)] { set xtics add (word(sets, i) 5 * (i - 1) + 1.5) }
set xrange [-1:5 * words(sets) - 1]
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics lc rgb "#dddddd"
set key below horizontal noenhanced
set yrange [0:*]
set offsets 0, 0, graph 0.12, 0

set multiplot layout 1,(words(sped) > 0 ? 2 : 1) title sprintf("SASRec epoch, one process against mpirun ranks (%s epochs, least train_seconds), %s, %s\nmodel bytes of mpi-np1 = threads1's / mpi-np2 = threads2's: %s", \
  epochs, cpu, isa, same) noenhanced
set title "seconds an epoch (lower is better)"
set ylabel "train_seconds" noenhanced
plot for [r in timed] sel(r, 7, "%s") using 1:2 with boxes lc rgb col[ridx(r)] title r, \
     for [r in timed] sel(r, 7, "%s") using 1:2:3 with labels offset 0,0.7 font ",9" notitle
if (words(sped) > 0) {
  set title "speedup over mpirun -np 1 (P = 1)"
  set ylabel "epoch seconds of mpi-np1 / of the run"
  plot for [r in sped] sel(r, 8, "%sx") using 1:2 with boxes lc rgb col[ridx(r)] title r, \
       for [r in sped] sel(r, 8, "%sx") using 1:2:3 with labels offset 0,0.7 font ",9" notitle, \
       1 with lines dt 2 lc rgb "#555555" notitle
}
unset multiplot
