# Gantt chart of one simulated training step of the chosen plan: one band per
# pipeline stage with a lane per stream, boxes coloured by kind; the grey compute
# lane left showing is idle time (the pipeline bubble).
# gnuplot -e "dir='DIR'; fmt='png'" plots/timeline.gp   reads DIR/timeline.dat
# (stage stream start_ms end_ms kind mb; stream 0 compute 1 tp 2 dp 3 pp-send 4 pp-recv; kind fwd|bwd|wgrad|comm|opt; wgrad: zero-bubble schedules' deferred weight gradients)
# and writes DIR/timeline.png or .svg (fmt 'png' or 'svg'; out='FILE' overrides the output path).

if (!exists("dir")) dir = "."
if (!exists("fmt")) fmt = "png"
if (!exists("out")) out = dir."/timeline.".fmt
file = dir."/timeline.dat"

# One pass: stages, time span and busy compute time.
nst = 0; t0 = 1e300; t1 = -1e300; busy = 0; nother = 0
kinds = " fwd bwd wgrad comm opt "
stats file using (nother = nother + (strstrt(kinds, " ".strcol(5)." ") ? 0 : 1), nst = ($1 + 1 > nst ? $1 + 1 : nst), t0 = ($3 < t0 ? $3 : t0), t1 = ($4 > t1 ? $4 : t1), \
                  busy = busy + ($2 == 0 ? $4 - $3 : 0), $1) nooutput
span = t1 - t0
if (span <= 0) { span = 1; t1 = t0 + 1 }
idle = 1 - busy / (nst * span)
idle = idle < 0 ? 0 : idle

# Lanes inside the band of stage s (y grows downwards): compute on top, then the four comm streams.
ylo(st, s) = st == 0 ? s - 0.42 : s + 0.02 + 0.095 * (st - 1) + 0.01
yhi(st, s) = st == 0 ? s + 0.02 : s + 0.02 + 0.095 * st
ymid(st, s) = (ylo(st, s) + yhi(st, s)) / 2
is(k) = strcol(5) eq k
other(dummy) = !(is("fwd") || is("bwd") || is("wgrad") || is("comm") || is("opt"))

W = 1200; H = 150 + 110 * nst; H = H > 4000 ? 4000 : H
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

set title sprintf("One training step of the chosen plan: %.1f ms; compute lanes idle %.1f%% (pipeline bubble and waits)", span, 100 * idle)
set xlabel "time (ms)"
set xrange [t0 : t1 + 0.01 * span]
set yrange [nst - 0.5 : -0.5]
set ytics () scale 0
do for [s=0:nst-1] {
  set ytics add (sprintf("stage %d", s) ymid(0, s))
  set object rect from t0, ylo(0, s) to t1, yhi(0, s) fc rgb "#e8e8e8" fs solid 1.0 noborder behind
  if (nst <= 16) {
    set label sprintf("tp ") at graph 0, first ymid(1, s) right font ",7" tc rgb "#555555"
    set label sprintf("dp ") at graph 0, first ymid(2, s) right font ",7" tc rgb "#555555"
    set label sprintf("send ") at graph 0, first ymid(3, s) right font ",7" tc rgb "#555555"
    set label sprintf("recv ") at graph 0, first ymid(4, s) right font ",7" tc rgb "#555555"
  }
}
set lmargin 12
set grid xtics lc rgb "#dddddd"
set key outside top center horizontal
set style fill solid 1.0 noborder

# Micro-batch numbers inside boxes wide enough for them. Labels are left empty
# rather than undefined: gnuplot 5.4.4 crashes when all points of "with labels" are.
lw_min = span / 90.0
box(k) = is(k) ? ylo($2, $1) : NaN
plot NaN with boxes fc rgb "#e8e8e8" title "idle (bubble)", \
     file using 3:(box("fwd")):3:4:(ylo($2, $1)):(yhi($2, $1)) with boxxyerror fc rgb "#1f77b4" title "forward", \
     file using 3:(box("bwd")):3:4:(ylo($2, $1)):(yhi($2, $1)) with boxxyerror fc rgb "#ff7f0e" title "backward", \
     file using 3:(box("wgrad")):3:4:(ylo($2, $1)):(yhi($2, $1)) with boxxyerror fc rgb "#d62728" title "weight gradient (W)", \
     file using 3:(box("opt")):3:4:(ylo($2, $1)):(yhi($2, $1)) with boxxyerror fc rgb "#9467bd" title "optimizer", \
     file using 3:(box("comm")):3:4:(ylo($2, $1)):(yhi($2, $1)) with boxxyerror fc rgb "#2ca02c" title "communication", \
     file using 3:(other(0) ? ylo($2, $1) : NaN):3:4:(ylo($2, $1)):(yhi($2, $1)) with boxxyerror fc rgb "#7f7f7f" title (nother > 0 ? "other" : ""), \
     file using (($3 + $4) / 2):(ymid(0, $1)):(($2 == 0 && $6 >= 0 && $4 - $3 >= lw_min) ? sprintf("%d", $6) : "") \
          with labels font ",7" tc rgb "white" notitle
