#!/bin/sh
# experiments.sh — every figure and table of docs/solvers.md from the current
# code in one command: builds the core (Release, build/solver-rel or $BUILD)
# and bench/experiments.c, runs them into OUTDIR (default docs/solvers) as
# CSV files, plots them with gnuplot as PNG files and, when OUTDIR is
# docs/solvers, writes the tables into docs/solvers.md between their
# markers (bench/solvers_tables.py --update). The per-iteration traces of
# Figure 3 (fig3.csv, about 7 MB) are left in the build directory.
#
#   bench/experiments.sh [OUTDIR]
#
# Needs cmake, a C compiler, python3 and gnuplot (Debian: gnuplot-nox).
# Takes about a minute and a half of CPU on this machine (Figure 3 about
# 25 s, the ordering study about 40 s: the 362 880 orders of the
# three-sphere body, nine times for the scan). The ctest
# solvers_tables runs a fast subset and compares it with the committed
# tables.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/docs/solvers}
BUILD=${BUILD:-$ROOT/build/solver-rel}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPHYSD_BENCH=OFF -DPHYSD_TESTS=OFF >/dev/null
cmake --build "$BUILD" --target physd_core -j2 >/dev/null
${CC:-cc} -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wpedantic -Wshadow -Wmissing-prototypes -Werror \
    -ffp-contract=off -I"$ROOT/core/include" "$ROOT/bench/experiments.c" "$BUILD/core/libphysd_core.a" -lm -lpthread \
    -o "$BUILD/physd-experiments"
"$BUILD/physd-experiments" "$OUT"

cd "$OUT"
# Figure 3 of seeds/000: psi against work, every method, eight scenes, per
# set-up; physd's default game step (10 substeps x 1 sweep) as a point at
# its work per step and the merit of its last substep.
for setup in A B; do
    gnuplot <<GP
set terminal pngcairo size 1800,900 font ",10"
set output "fig3_$setup.png"
set datafile separator ","
set multiplot layout 2,4 title "Fischer merit psi against work (PGS sweeps), set-up $setup: every method (PGS-SM: k-pgs = 25, k-sm = 5); the star: physd's default step (10 x 1 sweep, its own formulation), psi of its last substep"
set logscale y
set format y "10^{%L}"
set xlabel "work (PGS sweeps)"
set ylabel "psi"
set key top right font ",8" opaque box
set linetype 10 lc rgb "gray50" dt 2
set xrange [0:1500]
set yrange [1e-32:*]
do for [s in "arched_snake snake_heavy_box large_stack heavy_on_light incline_boxes gears_small gears_medium friction_structure"] {
    set title s noenhanced
    plot for [m in "PGS PGS-SM-exact PGS-SM PGS-SM-IC PGS-SM-IC-prox NNCG APGD block-PGS Jacobi"] "< awk -F, '\$1==\"".s."\" && \$2==\"$setup\" && \$3==\"".m."\" {p=\$6; if (p < 1e-32) p = 1e-32; print \$5\",\"p}' fig3.csv" using 1:2 with lines lw (m eq "PGS" ? 2.5 : 1.2) title m noenhanced, \
         "< awk -F, '\$1==\"".s."\" {print \$4\",\"\$5}' fig3_default.csv" using 1:2 with points pt 3 ps 2.5 lc rgb "black" title "default step"
}
unset multiplot
GP
done

# The permutation histograms of seeds/001 with physd's strategies placed in them.
for scene in sliding_capsule three_sphere; do
    awk -F, -v s="$scene" '$1 == s {n++; printf "%s,%d,%s (%.0f%%)\n", $3, n, $2, $7}' perm_strategies.csv >"perm_labels_$scene.csv"
    gnuplot <<GP
set terminal pngcairo size 1100,600 font ",10"
set output "perm_$scene.png"
set datafile separator ","
set title "$scene: iterations of PGS to LCP error < 1e-4 over all row orders, and physd's strategies" noenhanced
set xlabel "iterations"
set ylabel "fraction of orders"
set style fill solid 0.5
set boxwidth 0.8
set key off
set xrange [0:*]
stats "perm_$scene.csv" using 3 every ::1 nooutput
top = STATS_max
set yrange [0:top*1.75]
plot "perm_$scene.csv" using 1:3 every ::1 with boxes lc rgb "#4477aa", \
     "perm_labels_$scene.csv" using 1:(top*(1.02+0.07*(\$2-1))) with points pt 7 ps 1 lc rgb "#cc3311", \
     "perm_labels_$scene.csv" using 1:(top*(1.02+0.07*(\$2-1))):3 with labels left offset 1,0 font ",9" noenhanced
GP
    gnuplot <<GP
set terminal pngcairo size 800,500 font ",10"
set output "perm_curves_$scene.png"
set datafile separator ","
set title "$scene: LCP error of PGS per iteration, default, best and worst order" noenhanced
set xlabel "iteration"
set ylabel "LCP error (m/s)"
set logscale y
set format y "10^{%L}"
plot for [o in "default best worst"] "< awk -F, '\$1==\"".o."\" {e=\$3; if (e < 1e-16) e = 1e-16; print \$2\",\"e}' perm_curves_$scene.csv" using 1:2 with linespoints title o
GP
done

# Work to a tolerance against the mass ratio.
for setup in A B; do
    gnuplot <<GP
set terminal pngcairo size 900,550 font ",10"
set output "massratio_$setup.png"
set datafile separator ","
set title "heavy_on_light, set-up $setup: work to LCP error < 1e-5 m/s from a cold start (3000 max)" noenhanced
set xlabel "mass ratio (slab / light cube)"
set ylabel "work (PGS sweeps)"
set logscale xy
set key top left font ",8"
plot for [m in "PGS block-PGS PGS-SM-exact PGS-SM PGS-SM-IC PGS-SM-IC-prox NNCG APGD"] "< awk -F, '\$1==\"$setup\" && \$4==\"".m."\" && \$6 > 0 {print \$2\",\"\$6}' massratio.csv" using 1:2 with linespoints lw 2 title m noenhanced
GP
done
rm -f perm_labels_*.csv
mv fig3.csv "$BUILD/fig3.csv"
if [ "$OUT" = "$ROOT/docs/solvers" ]; then
    python3 "$ROOT/bench/solvers_tables.py" --update "$ROOT/docs/solvers.md" "$OUT"
    echo "experiments: CSV and PNG files in $OUT, tables written into docs/solvers.md, traces in $BUILD/fig3.csv"
else
    echo "experiments: CSV and PNG files in $OUT (tables: python3 bench/solvers_tables.py $OUT), traces in $BUILD/fig3.csv"
fi
