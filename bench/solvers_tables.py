#!/usr/bin/env python3
"""The tables of docs/solvers.md from the CSV files of bench/experiments.sh.

Usage: python3 bench/solvers_tables.py [DIR]     (default docs/solvers)

Prints, as Markdown, the tables that docs/solvers.md quotes from the
experiments, so that they are pasted rather than retyped:
  - Figure 3 (fig3_summary.csv): work to psi < 1e-4 / 1e-10 / final psi,
    set-ups A and B;
  - the forcing-term sensitivity (fig3_forcing.csv), set-up B, every scene;
  - the mass-ratio table (massratio.csv);
  - the permutation histograms' summary and where the strategies land
    (perm_*.csv, perm_strategies.csv, perm_summary.csv).
Work is printed as in the CSV without a trailing ".0"; -1 (not reached)
is an em dash; psi with two significant digits. Python 3 standard library
only.
"""

import csv
import os
import sys

DASH = "\u2014"
SCENES = ["arched_snake", "snake_heavy_box", "large_stack", "heavy_on_light", "incline_boxes", "gears_small",
          "gears_medium", "friction_structure"]
SHORT = {"arched_snake": "snake", "snake_heavy_box": "snake+box", "large_stack": "stack",
         "heavy_on_light": "heavy/light", "incline_boxes": "incline", "gears_small": "gears_small",
         "gears_medium": "gears_medium", "friction_structure": "friction"}


def read(d, name):
    with open(os.path.join(d, name), newline="") as f:
        return list(csv.DictReader(f))


def work(s):
    """A work figure as the CSV has it, '.0' dropped; -1 = not reached."""
    v = float(s)
    if v < 0:
        return DASH
    t = s.strip()
    return t[:-2] if t.endswith(".0") else t


def sci(s):
    return f"{float(s):.1e}"


def pct(x):
    t = f"{float(x):.1f}"
    return t[:-2] if t.endswith(".0") else t


def fig3(d):
    rows = read(d, "fig3_summary.csv")
    by = {(r["scene"], r["setup"], r["method"]): r for r in rows}
    out = ["| scene (rows) | PGS → 1e-4 | PGS → 1e-10 | PGS–SM diagonal, exact | PGS–SM diagonal (default) "
           "| PGS–SM IC(0), exact | PGS–SM IC(0) |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for setup in "AB":
        out.append(f"| **set-up {setup}** | | | | | | |")
        for sc in SCENES:
            p = by[(sc, setup, "PGS")]
            cells = [f"{sc} ({p['rows']})", work(p["work_psi_1e-4"]), work(p["work_psi_1e-10"])]
            for m in ("PGS-SM-exact", "PGS-SM", "PGS-SM-IC-exact", "PGS-SM-IC"):
                r = by[(sc, setup, m)]
                cells.append(f"{work(r['work_psi_1e-4'])} / {work(r['work_psi_1e-10'])} / {sci(r['psi_final'])}")
            out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append("PGS final psi: " + "; ".join(
        f"{sc} {s} {sci(by[(sc, s, 'PGS')]['psi_final'])}" for s in "AB" for sc in SCENES))
    out.append("subspace steps / CG iterations: " + "; ".join(
        f"{sc} {s} {m} {by[(sc, s, m)]['subspace_steps']}/{by[(sc, s, m)]['cg_iterations']}"
        for s in "AB" for sc in SCENES for m in ("PGS-SM", "PGS-SM-IC")))
    return out


def forcing(d, setup="B"):
    rows = [r for r in read(d, "fig3_forcing.csv") if r["setup"] == setup]
    etas = []
    for r in rows:
        if r["sm_forcing"] not in etas:
            etas.append(r["sm_forcing"])
    by = {(r["scene"], r["sm_forcing"]): r for r in rows}
    out = ["| η_max | " + " | ".join(SHORT[s] for s in SCENES) + " |",
           "| --- |" + " --- |" * len(SCENES)]
    for e in etas:
        label = "0 (exact)" if float(e) == 0 else e
        out.append(f"| {label} | " + " | ".join(work(by[(s, e)]["work_psi_1e-10"]) for s in SCENES) + " |")
    out.append("")
    out.append("work to 1e-4 (same runs): " + "; ".join(
        f"{SHORT[s]} " + ",".join(work(by[(s, e)]["work_psi_1e-4"]) for e in etas) for s in SCENES))
    return out


def massratio(d):
    rows = read(d, "massratio.csv")
    by = {(r["setup"], r["ratio"], r["method"]): r for r in rows}
    ratios = []
    for r in rows:
        if r["ratio"] not in ratios:
            ratios.append(r["ratio"])
    methods = [("PGS", "PGS"), ("block-PGS", "block"), ("PGS-SM-exact", "PGS–SM exact"), ("PGS-SM", "PGS–SM"),
               ("PGS-SM-IC", "PGS–SM IC(0)")]
    head = ["ratio"] + [f"{s}: {lab}" for s in "AB" for _, lab in methods]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for ra in ratios:
        label = "10⁴" if ra == "10000" else ra
        cells = [label] + [work(by[(s, ra, m)]["work"]) for s in "AB" for m, _ in methods]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append("Jacobi reaches the tolerance at: " + (", ".join(
        f"{r['setup']}/{r['ratio']}" for r in rows if r["method"] == "Jacobi" and float(r["work"]) >= 0) or "none"))
    out.append("rows per ratio: " + ", ".join(f"{r['setup']}/{r['ratio']}={r['rows']}" for r in rows
                                              if r["method"] == "PGS"))
    return out


LABELS = [("default", "default"), ("gravity", "gravity"), ("complementarity/step", "complementarity, per step"),
          ("complementarity/iteration", "complementarity, per iteration"), ("effective-mass", "effective mass"),
          ("random/step", "random, per step (median)"), ("random/iteration", "random, per iteration (median)"),
          ("block-pgs", "blockwise PGS"), ("jacobi", "Jacobi (dense weights Sᵢᵢ/Σⱼ\\|Sᵢⱼ\\|)")]


def perm(d):
    out = []
    for r in read(d, "perm_summary.csv"):
        hist = read(d, f"perm_{r['scene']}.csv")
        mode = max(hist, key=lambda h: int(h["count"]))
        out.append(f"{r['scene']}: {r['rows']} rows, {r['orders']} orders, {r['best']}–{r['worst']} iterations, "
                   f"mode {mode['iterations']} ({100 * float(mode['fraction']):.0f} %), {r['seconds']} s")
    out.append("")
    st = read(d, "perm_strategies.csv")
    by = {(r["scene"], r["strategy"]): r for r in st}
    out.append("| strategy | capsule | | three-sphere | |")
    out.append("| --- | --- | --- | --- | --- |")
    for key, lab in LABELS:
        cells = [lab]
        for sc in ("sliding_capsule", "three_sphere"):
            r = by[(sc, key)]
            cells += [r["iterations"], f"{pct(r['percent_strictly_better'])} / {pct(r['percentile_mid'])}"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "docs/solvers"
    for title, fn in (("Figure 3", fig3), ("Forcing term, set-up B, work to psi < 1e-10", forcing),
                      ("Mass ratio, work to LCP error < 1e-5", massratio), ("Orderings", perm)):
        print(f"### {title}\n")
        print("\n".join(fn(d)))
        print()


if __name__ == "__main__":
    main()
