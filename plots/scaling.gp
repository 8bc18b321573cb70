# Scaling of the chosen plan's shape (same TP and PP, DP grown) with the GPU
# count on log-log axes: tokens/s against ideal linear scaling, MFU on the second axis.
# gnuplot -e "dir='DIR'; fmt='png'" plots/scaling.gp   reads DIR/scaling.dat (gpus tokens_per_s mfu)
# and writes DIR/scaling.png or .svg (fmt 'png' or 'svg'; out='FILE' overrides the output path).

if (!exists("dir")) dir = "."
if (!exists("fmt")) fmt = "png"
if (!exists("out")) out = dir."/scaling.".fmt
file = dir."/scaling.dat"

# One pass: the smallest GPU count (base of the ideal line), ranges.
g0 = 1e300; y0 = 0; gmax = 0; ymax = 0; ymin = 1e300; n = 0
stats file using (n = n + 1, ymin = ($2 < ymin ? $2 : ymin), y0 = ($1 < g0 ? $2 : y0), g0 = ($1 < g0 ? $1 : g0), gmax = ($1 > gmax ? $1 : gmax), \
                  ymax = ($2 > ymax ? $2 : ymax), $1) nooutput
ideal(g) = y0 * g / g0
top = ymax > ideal(gmax) ? ymax : ideal(gmax)
top = top > 0 ? top * 1.6 : 1
bot = ymin > 0 && ymin < 1e300 ? ymin / 1.6 : top / 100
ys = top >= 2e6 ? 1e6 : (top >= 2e4 ? 1e3 : 1)
yunit = ys == 1e6 ? "millions of tokens/s" : (ys == 1e3 ? "thousands of tokens/s" : "tokens/s")
ksfmt(v) = v >= 1e6 ? sprintf("%.2fM", v / 1e6) : (v >= 1e4 ? sprintf("%.1fk", v / 1e3) : sprintf("%.0f", v))

W = 900; H = 520
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

set title "Throughput of the chosen plan's shape as GPUs are added (data parallelism)"
set xlabel "GPUs"
set ylabel yunit
set y2label "MFU (%)"
set logscale x 2
set logscale y 10
# Room on both sides of the points, also for a single GPU count.
set xrange [g0 / 1.4 : gmax * 1.4]
set yrange [bot / ys : top / ys]
set y2range [0 : 100]
# Labelled ticks at 1, 2, 5 x 10^k in the range (1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k where that gives fewer
# than three): gnuplot's own log ticks label only powers of ten, one or none in a range under a decade.
ylo = bot / ys; yhi = top / ys
kmin = floor(log10(ylo)); kmax = ceil(log10(yhi))
nt = 0
do for [k = kmin:kmax] { do for [m in "1 2 5"] { v = (m + 0) * 10.0**k; if (v >= ylo && v <= yhi) { nt = nt + 1 } } }
steps = nt >= 3 ? "1 2 5" : "1 1.5 2 3 4 5 6 8"
set ytics () nomirror
do for [k = kmin:kmax] { do for [m in steps] { v = (m + 0) * 10.0**k; if (v >= ylo && v <= yhi) { set ytics add (sprintf("%g", v) v) } } }
set y2tics 10 nomirror
set xtics () nomirror
set format y "%g"
set grid xtics ytics lc rgb "#dddddd"
set key top left box opaque

plot ideal(x) / ys with lines dt 2 lw 1.5 lc rgb "#7f7f7f" title "ideal (linear from the smallest count)", \
     file using 1:($2 / ys):xtic(sprintf("%d", $1)) with linespoints pt 7 ps 1.2 lw 2 lc rgb "#1f77b4" title "tokens/s", \
     file using 1:($2 / ys):(ksfmt($2)) with labels offset 0, 1 tc rgb "#1f77b4" notitle, \
     file using 1:($3 * 100) axes x1y2 with linespoints pt 5 ps 1 lw 2 dt 1 lc rgb "#d62728" title "MFU (right axis)"
