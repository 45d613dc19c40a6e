# png.gp - the PNG terminal of the pipelines' plots:
#   call 'pipelines/png.gp' 'WIDTH' 'HEIGHT'
# pngcairo when this gnuplot has it (smoother text), png otherwise; labels
# printed as they are (no enhanced-text markup in run names).
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo noenhanced size int(ARG1), int(ARG2)
} else {
  set terminal png noenhanced size int(ARG1), int(ARG2)
}
