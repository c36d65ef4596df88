#!/usr/bin/env python3
"""The tables of docs/solvers.md from the CSV files of bench/experiments.sh,
and the check that they still match the code.

Usage:
  python3 bench/solvers_tables.py [DIR]
      prints every table (default DIR docs/solvers);
  python3 bench/solvers_tables.py --update DOC DIR
      replaces each table of DOC between its markers
      <!-- table:NAME --> ... <!-- /table:NAME --> by the one made from DIR
      (bench/experiments.sh does this for docs/solvers.md);
  python3 bench/solvers_tables.py --check DIR EXPERIMENTS WORKDIR [DOC]
      the ctest solvers_tables: runs `EXPERIMENTS WORKDIR check` (a fast
      subset of the experiments, bench/experiments.c) and fails when one of
      its rows differs from the same row of the CSV files committed in DIR
      (timings excepted; see same()), or when a table in DOC (default
      DIR/../solvers.md) is not the one DIR's CSV files make.

Tables (marker names): fig3, fig3_scaled (with physd's default game step),
forcing, massratio_A, massratio_B, perm_summary, perm_strategies,
perm_scan, perm_conclusions, perm_spread. Work is printed as in the CSV
without a trailing ".0"; -1 (not reached) is an em dash; merits with two
significant digits. Python 3 standard library only.
"""

import csv
import os
import re
import subprocess
import sys

DASH = "\u2014"
SCENES = ["arched_snake", "snake_heavy_box", "large_stack", "heavy_on_light", "incline_boxes", "gears_small",
          "gears_medium", "friction_structure"]
SHORT = {"arched_snake": "snake", "snake_heavy_box": "snake+box", "large_stack": "stack",
         "heavy_on_light": "heavy/light", "incline_boxes": "incline", "gears_small": "gears_small",
         "gears_medium": "gears_medium", "friction_structure": "friction"}
FIG3_METHODS = [("PGS-SM-exact", "PGS–SM diag., exact"), ("PGS-SM", "PGS–SM diag."),
                ("PGS-SM-IC-exact", "PGS–SM IC(0), exact"), ("PGS-SM-IC", "PGS–SM IC(0)"),
                ("PGS-SM-IC-prox", "PGS–SM IC(0) prox."), ("NNCG", "NNCG"), ("APGD", "APGD"),
                ("block-PGS", "block PGS"), ("Jacobi", "Jacobi")]


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
    v = float(s)
    return DASH if v < 0 else f"{v:.1e}"


def pct(x):
    t = f"{float(x):.1f}"
    return t[:-2] if t.endswith(".0") else t


def fig3(d):
    by = {(r["scene"], r["setup"], r["method"]): r for r in read(d, "fig3_summary.csv")}
    head = ["scene (rows)", "PGS → 1e-4 / 1e-10 / final"] + [lab for _, lab in FIG3_METHODS]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for setup in "AB":
        out.append(f"| **set-up {setup}** |" + " |" * (len(head) - 1))
        for sc in SCENES:
            cells = [f"{sc} ({by[(sc, setup, 'PGS')]['rows']})"]
            for m in ["PGS"] + [m for m, _ in FIG3_METHODS]:
                r = by[(sc, setup, m)]
                cells.append(f"{work(r['work_psi_1e-4'])} / {work(r['work_psi_1e-10'])} / {sci(r['psi_final'])}")
            out.append("| " + " | ".join(cells) + " |")
    return out


def fig3_scaled(d):
    """The scaled merit after 10 units (the default step's budget) and at
    the end, and physd's default step."""
    by = {(r["scene"], r["setup"], r["method"]): r for r in read(d, "fig3_summary.csv")}
    dflt = {r["scene"]: r for r in read(d, "fig3_default.csv")}
    head = ["scene", "default step: rows, work, ψ̂ of its last substep"] + \
           [f"{s}: {lab}" for s in "AB" for lab in ("PGS ψ̂ @10", "best ψ̂ @10", "PGS ψ̂ final", "best ψ̂ final")]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    methods = ["PGS"] + [m for m, _ in FIG3_METHODS]
    for sc in SCENES:
        df = dflt[sc]
        cells = [SHORT[sc], f"{df['rows']}, {work(df['step_work'])}, {sci(df['psi_scaled'])}"]
        for s in "AB":
            p = by[(sc, s, "PGS")]
            at10 = [(float(by[(sc, s, m)]["psi_scaled_at_10"]), m) for m in methods
                    if float(by[(sc, s, m)]["psi_scaled_at_10"]) >= 0]
            fin = [(float(by[(sc, s, m)]["psi_scaled_final"]), m) for m in methods]
            b10, bfin = min(at10), min(fin)
            cells += [sci(p["psi_scaled_at_10"]), f"{sci(b10[0])} ({b10[1]})", sci(p["psi_scaled_final"]),
                      f"{sci(bfin[0])} ({bfin[1]})"]
        out.append("| " + " | ".join(cells) + " |")
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
    return out


MR_METHODS = [("PGS", "PGS"), ("block-PGS", "block"), ("PGS-SM-exact", "PGS–SM exact"), ("PGS-SM", "PGS–SM"),
              ("PGS-SM-IC", "PGS–SM IC(0)"), ("PGS-SM-IC-prox", "IC(0) prox."), ("NNCG", "NNCG"),
              ("APGD", "APGD"), ("Jacobi", "Jacobi")]


def massratio(d, setup):
    rows = read(d, "massratio.csv")
    by = {(r["setup"], r["ratio"], r["method"]): r for r in rows}
    ratios = []
    for r in rows:
        if r["ratio"] not in ratios:
            ratios.append(r["ratio"])
    head = ["ratio (rows)"] + [lab for _, lab in MR_METHODS]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for ra in ratios:
        label = "10⁴" if ra == "10000" else ra
        cells = [f"{label} ({by[(setup, ra, 'PGS')]['rows']})"] + [work(by[(setup, ra, m)]["work"])
                                                                   for m, _ in MR_METHODS]
        out.append("| " + " | ".join(cells) + " |")
    return out


LABELS = [("default", "default"), ("gravity", "gravity"), ("complementarity/step", "complementarity, per step"),
          ("complementarity/iteration", "complementarity, per iteration"), ("effective-mass", "effective mass"),
          ("random/step", "random, per step (median)"), ("random/iteration", "random, per iteration (median)"),
          ("block-pgs", "blockwise PGS"), ("jacobi", "Jacobi (dense weights Sᵢᵢ/Σⱼ\\|Sᵢⱼ\\|)")]
BODIES = [("sliding_capsule", "capsule"), ("three_sphere", "three-sphere")]


def perm_summary(d):
    out = ["| body | rows | orders | best | median | worst | mode | above 25 | enumeration |",
           "|" + " --- |" * 9]
    for r in read(d, "perm_summary.csv"):
        hist = read(d, f"perm_{r['scene']}.csv")
        mode = max(hist, key=lambda h: int(h["count"]))
        out.append(f"| {r['scene']} | {r['rows']} | {r['orders']} | {r['best']} | {r['median']} | {r['worst']} | "
                   f"{mode['iterations']} ({100 * float(mode['fraction']):.0f} %) | "
                   f"{100 * float(r['fraction_above_25']):.2f} % | {r['seconds']} s |")
    return out


def perm_strategies(d):
    by = {(r["scene"], r["strategy"]): r for r in read(d, "perm_strategies.csv")}
    out = ["| strategy | capsule | | three-sphere | |", "| --- | --- | --- | --- | --- |"]
    for key, lab in LABELS:
        cells = [lab]
        for sc, _ in BODIES:
            r = by[(sc, key)]
            it = r["iterations"] if r["q25"] == r["q75"] else f"{r['iterations']} ({r['q25']}–{r['q75']})"
            cells += [it, f"{pct(r['percent_strictly_better'])} / {pct(r['percentile_mid'])}"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def scan_rows(d):
    return read(d, "perm_scan.csv")


def perm_scan(d):
    out = ["| body | yaw | regularization | merit | best | median | worst | above 25 |", "|" + " --- |" * 8]
    for r in scan_rows(d):
        out.append(f"| {r['scene']} | {r['yaw']}° | {r['regularization']} | {r['merit']} | {r['best']} | "
                   f"{r['median']} | {r['worst']} | {100 * float(r['fraction_above_25']):.2f} % |")
    return out


def perm_conclusions(d):
    """seeds/001's statements and physd's, checked in every case of the
    scan (yaw x regularization x merit) for each body."""
    scan = scan_rows(d)
    strat = read(d, "perm_scan_strategies.csv")
    sby = {(r["scene"], r["yaw"], r["regularization"], r["merit"], r["strategy"]): r for r in strat}

    def cases(body):
        return [r for r in scan if r["scene"] == body]

    def it(r, s):
        return int(sby[(r["scene"], r["yaw"], r["regularization"], r["merit"], s)]["iterations"])

    claims = [
        ("seeds/001: the best order converges in fewer than 20 iterations", lambda r: int(r["best"]) < 20),
        ("seeds/001: the worst order is still above the tolerance after 25 iterations",
         lambda r: int(r["worst"]) > 25),
        ("seeds/001: large variation (worst ≥ 2 × best)", lambda r: int(r["worst"]) >= 2 * int(r["best"])),
        ("some orders (> 0 %) need more than 25 iterations", lambda r: float(r["fraction_above_25"]) > 0),
        ("more than 1 % of the orders need more than 25 iterations", lambda r: float(r["fraction_above_25"]) > 0.01),
        ("blockwise PGS beats every scalar order", lambda r: it(r, "block-pgs") < int(r["best"])),
        ("complementarity (per step) in the best half (≤ median)", lambda r: it(r, "complementarity/step") <=
         int(r["median"])),
        ("random per iteration worse than the default order", lambda r: it(r, "random/iteration") >
         it(r, "default")),
        ("the default order in the best half (≤ median)", lambda r: it(r, "default") <= int(r["median"])),
        ("Jacobi slower than the median order", lambda r: it(r, "jacobi") > int(r["median"])),
    ]
    out = ["| statement | capsule | three-sphere |", "| --- | --- | --- |"]
    for text, fn in claims:
        cells = [text]
        for body, _ in BODIES:
            cs = cases(body)
            held = sum(1 for r in cs if fn(r))
            cells.append("every case" if held == len(cs) else ("no case" if held == 0 else f"{held} of {len(cs)}"))
        out.append("| " + " | ".join(cells) + " |")
    return out


def perm_spread(d):
    """Each strategy's mid-rank percentile over the cases of the scan: the
    main case's, then median and range over all cases."""
    strat = read(d, "perm_scan_strategies.csv")
    out = ["| strategy | capsule: main, median (min–max) | three-sphere: main, median (min–max) |",
           "| --- | --- | --- |"]
    for key, lab in LABELS:
        cells = [lab]
        for body, _ in BODIES:
            rows = [r for r in strat if r["scene"] == body and r["strategy"] == key]
            vals = sorted(float(r["percentile_mid"]) for r in rows)
            main = [float(r["percentile_mid"]) for r in rows
                    if float(r["yaw"]) == 0 and r["regularization"] == "doc" and r["merit"] == "lcp_error"]
            med = vals[len(vals) // 2]
            cells.append(f"{pct(main[0])}, {pct(med)} ({pct(vals[0])}–{pct(vals[-1])})")
        out.append("| " + " | ".join(cells) + " |")
    return out


TABLES = [("fig3", fig3), ("fig3_scaled", fig3_scaled), ("forcing", forcing),
          ("massratio_A", lambda d: massratio(d, "A")), ("massratio_B", lambda d: massratio(d, "B")),
          ("perm_summary", perm_summary), ("perm_strategies", perm_strategies), ("perm_scan", perm_scan),
          ("perm_conclusions", perm_conclusions), ("perm_spread", perm_spread)]

MARK = re.compile(r"(<!-- table:(\w+) -->\n)(.*?)(<!-- /table:\2 -->)", re.S)


def update(doc, d):
    text = open(doc, encoding="utf-8").read()
    made = {name: "\n".join(fn(d)) + "\n" for name, fn in TABLES}
    text = MARK.sub(lambda m: m.group(1) + made.get(m.group(2), m.group(3)) + m.group(4), text)
    open(doc, "w", encoding="utf-8").write(text)


# ------------------------------------------------------------------ check

# Columns that identify a row, per file (the rest are compared).
KEYS = {"fig3_summary.csv": ["scene", "setup", "method"], "fig3_forcing.csv": ["scene", "setup", "sm_forcing"],
        "fig3_default.csv": ["scene"], "massratio.csv": ["setup", "ratio", "method"],
        "perm_summary.csv": ["scene"], "perm_strategies.csv": ["scene", "strategy"],
        "perm_scan.csv": ["scene", "yaw", "regularization", "merit"],
        "perm_scan_strategies.csv": ["scene", "yaw", "regularization", "merit", "strategy"],
        "perm_sliding_capsule.csv": ["iterations"], "perm_curves_sliding_capsule.csv": ["order", "k"]}
TIMING = {"ms", "seconds"}


def same(a, b):
    """Equal as printed, or the same number up to the last printed digit of
    a %.3e figure (the merits of a solve near round-off), or both below
    1e-20 (round-off noise)."""
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if "e" not in a.lower():
        return False  # work and counts: exactly
    return abs(x - y) <= 2e-3 * max(abs(x), abs(y)) or (abs(x) < 1e-20 and abs(y) < 1e-20)


def check(d, exe, wd, doc):
    os.makedirs(wd, exist_ok=True)
    subprocess.run([exe, wd, "check"], check=True, stdout=subprocess.DEVNULL)
    bad = 0
    compared = 0
    for name, keys in KEYS.items():
        fresh_path = os.path.join(wd, name)
        if not os.path.exists(fresh_path):
            continue
        committed = {tuple(r[k] for k in keys): r for r in read(d, name)}
        for r in read(wd, name):
            key = tuple(r[k] for k in keys)
            c = committed.get(key)
            if c is None:
                print(f"{name}: row {key} is not in the committed table")
                bad += 1
                continue
            for col, v in r.items():
                if col in TIMING or col in keys:
                    continue
                compared += 1
                if not same(v, c.get(col, "")):
                    print(f"{name} {key} {col}: the code gives {v}, the committed table {c.get(col)}")
                    bad += 1
    text = open(doc, encoding="utf-8").read()
    found = {m.group(2): m.group(3) for m in MARK.finditer(text)}
    for name, fn in TABLES:
        made = "\n".join(fn(d)) + "\n"
        if name not in found:
            print(f"{doc}: no table {name}")
            bad += 1
        elif found[name] != made:
            print(f"{doc}: table {name} is not the one {d}'s CSV files make (run bench/solvers_tables.py "
                  f"--update {doc} {d})")
            bad += 1
    print(f"solvers_tables: {compared} figures of the fast subset compared, {len(TABLES)} tables of {doc}: "
          f"{bad} differ")
    return 1 if bad else 0


def main():
    a = sys.argv[1:]
    if a and a[0] == "--check":
        d, exe, wd = a[1], a[2], a[3]
        doc = a[4] if len(a) > 4 else os.path.join(os.path.dirname(os.path.abspath(d)), "solvers.md")
        sys.exit(check(d, exe, wd, doc))
    if a and a[0] == "--update":
        update(a[1], a[2])
        return
    d = a[0] if a else "docs/solvers"
    for name, fn in TABLES:
        print(f"### {name}\n")
        print("\n".join(fn(d)))
        print()


if __name__ == "__main__":
    main()
