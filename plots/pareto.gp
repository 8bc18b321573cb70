# Memory against speed for every plan that fits: peak memory per GPU versus
# tokens/s, with the Pareto front (no plan both smaller and faster) drawn; the
# plans a sweep did not simulate (simulated 0) at their bound, as open points.
# gnuplot -e "dir='DIR'; fmt='png'" plots/pareto.gp   reads DIR/plans.dat
# (tp pp dp zero sp mbs vpp recompute schedule peak_gib tokens_per_s mfu step_s pareto rank simulated)
# and writes DIR/pareto.png or .svg (fmt 'png' or 'svg'; out='FILE' overrides the output path).

if (!exists("dir")) dir = "."
if (!exists("fmt")) fmt = "png"
if (!exists("out")) out = dir."/pareto.".fmt
file = dir."/plans.dat"

# One pass: ranges and the best plan (the least rank; 0: not ranked). A file without the
# simulated column (an older sweep) simulated every plan.
n = 0; npareto = 0; xmin = 1e300; xmax = 0; ymin = 1e300; ymax = 0; bestrank = 1e300
stats file using (n = n + 1, npareto = npareto + ($14 == 1), xmin = ($10 < xmin ? $10 : xmin), xmax = ($10 > xmax ? $10 : xmax), \
                  ymin = ($11 < ymin ? $11 : ymin), ymax = ($11 > ymax ? $11 : ymax), \
                  bestrank = ($15 > 0 && $15 < bestrank ? $15 : bestrank), $1) nooutput
simulated(c) = !valid(16) || column(16) != 0
dx = xmax - xmin; dx = dx > 0 ? dx : (xmax > 0 ? xmax * 0.2 : 1)
dy = ymax - ymin; dy = dy > 0 ? dy : (ymax > 0 ? ymax * 0.2 : 1)
# Tokens/s shown in thousands or millions so the tics stay short.
ys = ymax >= 2e6 ? 1e6 : (ymax >= 2e4 ? 1e3 : 1)
yunit = ys == 1e6 ? "millions of tokens/s" : (ys == 1e3 ? "thousands of tokens/s" : "tokens/s")
shape(tp, pp, dp) = sprintf("tp %d pp %d dp %d", tp, pp, dp)

W = 900; H = 560
if (fmt eq "svg") {
  set terminal svg size W, H noenhanced font "DejaVu Sans,11" background rgb "white"
} else {
  if (strstrt(GPVAL_TERMINALS, "pngcairo")) {
    set terminal pngcairo size W, H noenhanced font "DejaVu Sans,10" background rgb "white"
  } else {
    set terminal png size W, H noenhanced background rgb "white"
  }
}
set output out

set title sprintf("Peak memory per GPU against throughput, %d plan%s that fit", n, n == 1 ? "" : "s")
set xlabel "peak memory per GPU (GiB)"
set ylabel yunit
set xrange [xmin - 0.1 * dx : xmax + 0.1 * dx]
set yrange [(ymin - 0.12 * dy) / ys : (ymax + 0.15 * dy) / ys]
set format y "%g"
set grid lc rgb "#dddddd"
set key bottom right box opaque

# The front's points, kept apart (a NaN inside "smooth unique" would break the line),
# then sorted by memory; the tiny tokens/s term keeps ties on memory in speed order.
$Front << EOD
NaN NaN 0
EOD
if (npareto > 0) {
  set table $Front
  plot file using 10:11:14 with table if ($14 == 1)
  unset table
}

# Labels are empty, never undefined: gnuplot 5.4.4 crashes on "with labels" whose points all are.
plot file using 10:(simulated(0) ? $11 / ys : NaN) with points pt 7 ps 0.9 lc rgb "#9fb7d0" title "plan", \
     file using 10:(simulated(0) ? NaN : $11 / ys) with points pt 6 ps 0.9 lc rgb "#9fb7d0" title "plan at its bound", \
     $Front using ($1 + $2 * 1e-12):($2 / ys) smooth unique with lines lw 2 lc rgb "#d62728" title "Pareto front", \
     file using 10:($14 == 1 ? $11 / ys : NaN) with points pt 7 ps 1.2 lc rgb "#d62728" notitle, \
     file using 10:($15 == bestrank ? $11 / ys : NaN) with points pt 6 ps 2.5 lw 2 lc rgb "black" title "best (rank 1)", \
     file using 10:($11 / ys):($15 == bestrank ? shape($1, $2, $3) : "") with labels offset 0, 1.4 notitle
