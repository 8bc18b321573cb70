# The best plan's throughput (and cost) against the varied cluster field of
# `parallax sweep --vary FIELD=V1,V2,...`.
# gnuplot -e "dir='DIR'; fmt='png'" plots/vary.gp   reads DIR/vary.dat
# (index value best_tokens_per_s mfu cost_usd; NaN where no plan fits; "# field: NAME" first)
# and writes DIR/vary.png or .svg (fmt 'png' or 'svg'; out='FILE' overrides the output path).

if (!exists("dir")) dir = "."
if (!exists("fmt")) fmt = "png"
if (!exists("out")) out = dir."/vary.".fmt
file = dir."/vary.dat"

field = system(sprintf("sed -n 's/^# field: //p' '%s' | head -1", file))
ncost = 0
stats file using (ncost = ncost + ($5 == $5 ? 1 : 0), $1) nooutput

if (fmt eq "svg") {
  set terminal svg size 900, 500 noenhanced font "DejaVu Sans,11" background rgb "white"
} else {
  if (strstrt(GPVAL_TERMINALS, "pngcairo")) {
    set terminal pngcairo size 900, 500 noenhanced font "DejaVu Sans,10" background rgb "white"
  } else {
    set terminal png size 900, 500 noenhanced background rgb "white"
  }
}
set output out
set title "Best plan against ".field
set xlabel field
set ylabel "tokens/s of the best plan"
set grid ytics lc rgb "#dddddd"
set key outside top center horizontal
set offsets 0.3, 0.3, 0, 0
set yrange [0:*]
set format y "%.1s%c"
if (ncost > 0) {
  set y2label "cost (USD)"
  set y2tics
  set y2range [0:*]
  set format y2 "%.1s%c"
  plot file using 1:3:xticlabels(2) with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "tokens/s", \
       file using 1:5 axes x1y2 with linespoints lw 2 pt 5 lc rgb "#d62728" title "cost"
} else {
  plot file using 1:3:xticlabels(2) with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "tokens/s"
}
