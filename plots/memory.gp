# Memory per GPU of the chosen plan: one stacked bar per pipeline stage, split by
# category, against the usable HBM capacity.
# gnuplot -e "dir='DIR'; fmt='png'" plots/memory.gp   reads DIR/memory.dat
# (stage params_gib grads_gib optimizer_gib activations_gib buffers_gib workspace_gib capacity_gib)
# and writes DIR/memory.png or .svg (fmt 'png' or 'svg'; out='FILE' overrides the output path).

if (!exists("dir")) dir = "."
if (!exists("fmt")) fmt = "png"
if (!exists("out")) out = dir."/memory.".fmt
file = dir."/memory.dat"

# One pass: number of stages, the largest stack and the capacity.
nst = 0; tmax = 0; cap = 0
stats file using (nst = nst + 1, t = $2 + $3 + $4 + $5 + $6 + $7, tmax = (t > tmax ? t : tmax), \
                  cap = ($8 > cap ? $8 : cap), $1) nooutput
top = (cap > tmax ? cap : tmax) * 1.15
top = top > 0 ? top : 1

W = 160 + 48 * nst; W = W < 720 ? 720 : (W > 2400 ? 2400 : W); H = 480
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

set title "Memory per GPU of the chosen plan, by pipeline stage"
set xlabel "pipeline stage"
set ylabel "GiB per GPU"
set yrange [0 : top]
set xrange [-0.6 : nst - 0.4]
set style data histograms
set style histogram rowstacked
set style fill solid 0.9 border rgb "white"
set boxwidth 0.75
set key outside right top vertical Left reverse noautotitle
set grid ytics lc rgb "#dddddd"
set xtics scale 0
if (nst > 24) { set xtics rotate by 90 right }
if (cap > 0) {
  set arrow 1 from graph 0, first cap to graph 1, first cap nohead lc rgb "#d62728" lw 2 dt 2 front
  set label 1 sprintf("usable HBM %.1f GiB", cap) at graph 0.01, first cap offset 0, 0.7 tc rgb "#d62728" front
}

plot file using 2:xtic(sprintf("%d", $1)) title "parameters" lc rgb "#1f77b4", \
     ''   using 3 title "gradients" lc rgb "#ff7f0e", \
     ''   using 4 title "optimizer states" lc rgb "#2ca02c", \
     ''   using 5 title "activations" lc rgb "#9467bd", \
     ''   using 6 title "comm buffers" lc rgb "#8c564b", \
     ''   using 7 title "workspace" lc rgb "#7f7f7f", \
     ''   using ($0):($2 + $3 + $4 + $5 + $6 + $7):(nst <= 16 ? sprintf("%.1f", $2 + $3 + $4 + $5 + $6 + $7) : "") \
          with labels offset 0, 0.7 notitle
