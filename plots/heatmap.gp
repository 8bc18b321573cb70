# Heat map of the best tokens/s for each (TP, PP) pair of a sweep, best over the
# other dimensions; cells where no plan fits in memory are hatched "does not fit".
# gnuplot -e "dir='DIR'; fmt='png'" plots/heatmap.gp   reads DIR/heatmap.dat (tp pp tokens_per_s, NaN: none fits)
# and writes DIR/heatmap.png or .svg (fmt 'png' or 'svg'; out='FILE' overrides the output path).

if (!exists("dir")) dir = "."
if (!exists("fmt")) fmt = "png"
if (!exists("out")) out = dir."/heatmap.".fmt
file = dir."/heatmap.dat"

# A NaN in a used column makes gnuplot drop the point, so "fits" is tested on the text.
fits(s) = !(s eq "NaN" || s eq "nan" || s eq "-nan" || s eq "NAN")

# One pass over the data: the distinct TP and PP values (categories) and the value range.
tps = " "; pps = " "; nvalid = 0; zmin = 1e300; zmax = -1e300
addcat(list, v) = strstrt(list, sprintf(" %g ", v)) ? list : list.sprintf("%g ", v)
stats file using (tps = addcat(tps, $1), pps = addcat(pps, $2), \
                  fits(strcol(3)) ? (nvalid = nvalid + 1, zmin = ($3 < zmin ? $3 : zmin), zmax = ($3 > zmax ? $3 : zmax)) : 0, \
                  $1) nooutput
ntp = words(tps); npp = words(pps)
# Category index of a value: how many distinct values are smaller (so the axes are sorted).
ix(v) = sum [i=1:ntp] ((word(tps, i) + 0) < v ? 1 : 0)
iy(v) = sum [i=1:npp] ((word(pps, i) + 0) < v ? 1 : 0)
if (nvalid == 0) { zmin = 0; zmax = 1 }
if (zmax <= zmin) { zlo = zmin - abs(zmin) * 0.1 - 1; zhi = zmax + abs(zmax) * 0.1 + 1 } else { zlo = zmin; zhi = zmax }
shade(z) = (z - zlo) / (zhi - zlo)
kfmt(v) = v >= 1e6 ? sprintf("%.2fM", v / 1e6) : (v >= 1e4 ? sprintf("%.1fk", v / 1e3) : sprintf("%.0f", v))

W = 180 + 110 * ntp; H = 150 + 60 * npp
W = W < 640 ? 640 : W; H = H < 420 ? 420 : H
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

set title "Best tokens/s per TP x PP size, best over the other choices (red frame: best)"
set xlabel "tensor-parallel size (TP)"
set ylabel "pipeline-parallel size (PP)"
set xrange [-0.5 : ntp - 0.5]
set yrange [-0.5 : npp - 0.5]
set xtics () scale 0
set ytics () scale 0
do for [i=1:ntp] { set xtics add (word(tps, i) ix(word(tps, i) + 0)) }
do for [i=1:npp] { set ytics add (word(pps, i) iy(word(pps, i) + 0)) }
set cbrange [zlo : zhi]
set cblabel "tokens/s" offset 2.5, 0
set rmargin 14
set palette defined (0 "#440154", 0.25 "#3b528b", 0.5 "#21918c", 0.75 "#5ec962", 1 "#fde725")
if (nvalid == 0) { unset colorbox }
set style fill solid 1.0 border rgb "white"
unset key
set border 0

# Labels are never made undefined (NaN) but empty: gnuplot 5.4.4 crashes on a
# "with labels" plot whose points are all undefined.
plot file using (ix($1)):(fits(strcol(3)) ? iy($2) : NaN):(0.5):(0.5):3 with boxxyerror lc palette, \
     file using (ix($1)):(fits(strcol(3)) ? NaN : iy($2)):(0.5):(0.5) with boxxyerror fs pattern 4 border rgb "white" lc rgb "#b0b0b0", \
     file using (ix($1)):(iy($2)):(fits(strcol(3)) ? "" : "does not fit") with labels tc rgb "#303030", \
     file using (ix($1)):(iy($2)):(fits(strcol(3)) && shade($3) < 0.6 ? kfmt($3) : "") with labels tc rgb "white", \
     file using (ix($1)):(iy($2)):(fits(strcol(3)) && shade($3) >= 0.6 ? kfmt($3) : "") with labels tc rgb "black", \
     file using (ix($1)):(fits(strcol(3)) && $3 >= zmax ? iy($2) : NaN):(0.47):(0.47) with boxxyerror fs empty lc rgb "#d62728" lw 3
