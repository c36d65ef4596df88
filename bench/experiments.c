/*
 * experiments.c — the experiments of the source documents on physd's
 * solver family (docs/solvers.md), written as CSV files for
 * bench/experiments.sh to plot.
 *
 * Normal path: `physd-experiments OUTDIR` runs
 *   1. fig3: the PGS–SM paper's Figure 3 (seeds/000): on its eight scenes,
 *      one step's system captured after 120 settling steps, solved by every
 *      method for 1500 units of work; psi and the LCP error after every
 *      iteration, in two set-ups (A: the documents' formulation,
 *      doc_settings, warm started as in the world; B: friction rows
 *      regularized like the normals, friction.hertz = 35, cold start). The
 *      methods: PGS; PGS–SM (k_pgs = 25, k_sm = 5) with diagonally
 *      preconditioned CG, exact (sm_forcing = 0, "PGS-SM-exact") and with
 *      physd's forcing term ("PGS-SM"), the same two with the incomplete
 *      Cholesky preconditioner ("PGS-SM-IC-exact", "PGS-SM-IC") and the
 *      latter with the proximal term sm_proximal = 1e-5
 *      ("PGS-SM-IC-prox"); NNCG; APGD; blockwise PGS; Jacobi.
 *      fig3_forcing.csv repeats the
 *      diagonal PGS–SM for a range of sm_forcing values; fig3_default.csv
 *      places physd's default game step (10 substeps x 1 sweep) in the
 *      same terms (its work and the merits of its last substep);
 *   2. perm: the reordering study (seeds/001): the first step of the sliding
 *      capsule (6 rows) and of the three-sphere body (9 rows), PGS from
 *      lambda = 0 in every one of the 720 / 362880 row orders, iterations
 *      to LCP error < 1e-4 m/s (also to ||phi|| < 1e-4 and min-map < 1e-4),
 *      and where each of physd's strategies lands; the main case (the
 *      scene's pose, the documents' regularization) and a scan over the
 *      body's yaw (0, 20, 45 deg) x regularization (perm_settings) x
 *      merit (perm_scan*.csv);
 *   3. massratio: heavy_on_light with the slab 1 to 10^4 times a light
 *      cube, work of PGS, blockwise PGS, PGS–SM (diagonal: forcing 0.03
 *      and exact; IC(0): forcing 0.03, and with the proximal term),
 *      Jacobi, NNCG and APGD from a cold start to LCP error < 1e-5 m/s on a
 *      step captured after 60 settling steps (100 PGS iterations each), in
 *      set-ups A and B as for fig3.
 * `physd-experiments OUTDIR check` runs a fast subset of the same rows (see
 * main) for the ctest solvers_tables, which compares them with the CSV
 * files committed in docs/solvers (bench/solvers_tables.py --check).
 * Only the public API is used (ph_core.h, ph_lcp.h, ph_scenes.h).
 *
 * Failure modes: any core error aborts with a message and exit status 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "physd/ph_core.h"
#include "physd/ph_lcp.h"
#include "physd/ph_scenes.h"

/* 1: the fast subset of `check` (see main). */
static int check_mode;

/* The documents' formulation: one solve per step of h = 1/60 (one substep,
 * 10 iterations), contacts 35 Hz with d = 4, joints 60 Hz by Gauss-Seidel,
 * in the DEFAULT order (bottom-up levels). */
static ph_settings doc_settings(void) {
    ph_settings s = ph_default_settings();
    s.substeps = 1;
    s.iterations = 10;
    /* The formulation of docs/solvers.md, pinned: physd's own defaults
     * (10 substeps x 1, contacts 110 Hz with d = 5, joints 180 Hz solved
     * directly) are a different formulation. */
    s.contact.hertz = 35;
    s.contact.d = 4;
    s.joint.hertz = 60;
    s.joint_solver = PH_JOINT_SOLVER_GS;
    s.contact_block = 0; /* the documents' PGS: row by row */
    return s;
}

static void die(const char *what, int e) {
    fprintf(stderr, "experiments: %s: %s\n", what, ph_strerror(e));
    exit(1);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static FILE *open_csv(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    return f;
}

static ph_world_id make_world(const char *scene, ph_settings s) {
    ph_world_def d = ph_default_world_def();
    d.settings = s;
    int e = 0;
    ph_world_id w = ph_world_create(&d, &e);
    if (e) die("world", e);
    e = ph_scene_build(w, scene);
    if (e) die(scene, e);
    return w;
}

/* -------------------------------------------------------------- fig3 */

enum { TRACE_CAP = 4000 };
static double tr_f[TRACE_CAP], tr_l[TRACE_CAP], tr_w[TRACE_CAP], tr_m[TRACE_CAP];
static unsigned char tr_p[TRACE_CAP];

static double first_below(const double *v, const double *work, int count, double tol) {
    for (int k = 0; k < count; k++)
        if (v[k] < tol) return work[k];
    return -1;
}

/* The methods of Figure 3: PGS; PGS–SM with exact (sm_forcing 0) and
 * inexact subspace solves, diagonal and IC(0) preconditioner (k_pgs = 25,
 * k_sm = 5 as the paper's figure); NNCG; APGD; PGS–SM with IC(0) and the
 * proximal term sm_proximal = 1e-5; blockwise PGS; Jacobi (the direct
 * method takes at most 12 rows). */
enum { FIG3_METHODS = 10 };
static const char *const mname[FIG3_METHODS] = {"PGS",       "PGS-SM-exact", "PGS-SM", "PGS-SM-IC-exact",
                                                "PGS-SM-IC", "NNCG",         "APGD",   "PGS-SM-IC-prox",
                                                "block-PGS", "Jacobi"};

static ph_settings fig3_settings(int m) {
    ph_settings s = doc_settings();
    static const ph_method method[FIG3_METHODS] = {
        PH_METHOD_PGS,  PH_METHOD_PGS_SM, PH_METHOD_PGS_SM, PH_METHOD_PGS_SM,    PH_METHOD_PGS_SM,
        PH_METHOD_NNCG, PH_METHOD_APGD,   PH_METHOD_PGS_SM, PH_METHOD_BLOCK_PGS, PH_METHOD_JACOBI};
    s.method = method[m];
    s.iterations = 1500;
    s.tolerance = 1e-30;
    s.k_pgs = 25;
    s.k_sm = 5;
    s.sm_forcing = (m == 1 || m == 3) ? 0 : 0.03;
    s.sm_preconditioner = (m == 3 || m == 4 || m == 7) ? 2 : 1;
    s.sm_proximal = m == 7 ? 1e-5 : 0;
    return s;
}

/* The merit of the last iterate recorded within work w (-1 when none is). */
static double psi_at(const double *v, const double *work, int count, double w) {
    double r = -1;
    for (int k = 0; k < count && work[k] <= w + 1e-9; k++)
        r = v[k];
    return r;
}

/* physd's default game step in the same frame: the scene stepped 120 times
 * with ph_default_settings (10 substeps x 1 sweep, contacts 110 Hz d = 5,
 * joints 180 Hz solved directly, contact points as 3 x 3 blocks), then one
 * more step: its work in sweeps of its rows (row updates / rows) and the
 * merits of its last substep's solve. */
static void fig3_default(FILE *f, const char *scene) {
    ph_world_id w = make_world(scene, ph_default_settings());
    for (int i = 0; i < 121; i++)
        ph_world_step(w);
    ph_step_stats st;
    ph_world_get_stats(w, &st);
    fprintf(f, "%s,%d,%d,%.2f,%.3e,%.3e,%.3e\n", scene, st.rows, ph_default_settings().substeps,
            st.rows > 0 ? (double)st.row_updates / (double)st.rows : 0.0, st.fischer_final, st.fischer_scaled_final,
            st.lcp_error_final);
    ph_world_destroy(w);
}

static void fig3(const char *dir) {
    static const char *scenes[] = {"arched_snake",  "snake_heavy_box", "large_stack",  "heavy_on_light",
                                   "incline_boxes", "gears_small",     "gears_medium", "friction_structure"};
    FILE *f = open_csv(dir, "fig3.csv");
    FILE *g = open_csv(dir, "fig3_summary.csv");
    FILE *h = open_csv(dir, "fig3_forcing.csv");
    FILE *dflt = open_csv(dir, "fig3_default.csv");
    fprintf(dflt, "scene,rows,substeps,step_work,psi_last_substep,psi_scaled,lcp_error\n");
    fprintf(h, "scene,setup,rows,sm_forcing,work_psi_1e-4,work_psi_1e-10,psi_final,subspace_steps,cg_iterations\n");
    fprintf(f, "scene,setup,method,k,work,psi,lcp_error,phase\n");
    fprintf(g, "scene,setup,rows,method,work_psi_1e-4,work_psi_1e-10,psi_final,lcp_error_final,subspace_steps,"
               "cg_iterations,psi_scaled_final,restarts,psi_at_10,psi_scaled_at_10,ms\n");
    for (int setup = 0; setup < 2; setup++) {
        for (size_t sc = 0; sc < sizeof scenes / sizeof *scenes; sc++) {
            if (check_mode && strcmp(scenes[sc], "arched_snake") && strcmp(scenes[sc], "incline_boxes")) continue;
            ph_settings ws = doc_settings();
            if (setup == 1) ws.friction.hertz = 35;
            ph_world_id w = make_world(scenes[sc], ws);
            for (int i = 0; i < 120; i++)
                ph_world_step(w);
            ph_lcp *p = NULL;
            int e = ph_world_step_capture(w, &p);
            if (e || !p) die("capture", e);
            const int n = ph_lcp_size(p);
            double *x = malloc(sizeof(double) * (size_t)n), *zero = calloc((size_t)n, sizeof(double));
            for (int m = 0; m < FIG3_METHODS; m++) {
                ph_settings s = fig3_settings(m);
                ph_lcp_trace tr = {TRACE_CAP, 0, tr_f, NULL, tr_l, tr_w, tr_p};
                ph_step_stats st;
                double t0 = now_s();
                e = ph_lcp_solve(p, &s, NULL, setup == 1 ? zero : NULL, x, &st, &tr);
                double ms = 1e3 * (now_s() - t0);
                if (e) die("solve", e);
                for (int k = 0; k < tr.count; k++)
                    fprintf(f, "%s,%c,%s,%d,%.4f,%.6e,%.6e,%d\n", scenes[sc], 'A' + setup, mname[m], k, tr_w[k],
                            tr_f[k], tr_l[k], tr_p[k]);
                const double p10 = psi_at(tr_f, tr_w, tr.count, 10.0);
                fprintf(g, "%s,%c,%d,%s,%.1f,%.1f,%.3e,%.3e,%d,%d,%.3e,%d,%.3e,%.3e,%.1f\n", scenes[sc], 'A' + setup, n,
                        mname[m], first_below(tr_f, tr_w, tr.count, 1e-4), first_below(tr_f, tr_w, tr.count, 1e-10),
                        st.fischer_final, st.lcp_error_final, st.subspace_steps, st.cg_iterations,
                        st.fischer_scaled_final, st.restarts, p10,
                        p10 >= 0 && st.merit_scale > 0 ? p10 / st.merit_scale : -1.0, ms);
            }
            /* PGS–SM against the forcing term's eta_max (0 = exact). */
            static const double etas[] = {0, 0.003, 0.01, 0.03, 0.1, 0.3, 1};
            for (size_t k = 0; k < sizeof etas / sizeof *etas; k++) {
                ph_settings s = doc_settings();
                s.method = PH_METHOD_PGS_SM;
                s.iterations = 1500;
                s.tolerance = 1e-30;
                s.sm_forcing = etas[k];
                s.sm_preconditioner = 1;
                ph_lcp_trace tr = {TRACE_CAP, 0, tr_f, NULL, tr_l, tr_w, tr_p};
                ph_step_stats st;
                e = ph_lcp_solve(p, &s, NULL, setup == 1 ? zero : NULL, x, &st, &tr);
                if (e) die("solve", e);
                fprintf(h, "%s,%c,%d,%g,%.1f,%.1f,%.3e,%d,%d\n", scenes[sc], 'A' + setup, n, etas[k],
                        first_below(tr_f, tr_w, tr.count, 1e-4), first_below(tr_f, tr_w, tr.count, 1e-10),
                        st.fischer_final, st.subspace_steps, st.cg_iterations);
            }
            if (setup == 0) fig3_default(dflt, scenes[sc]);
            printf("fig3 %c %-20s rows %5d\n", 'A' + setup, scenes[sc], n);
            fflush(stdout);
            free(x);
            free(zero);
            ph_lcp_destroy(p);
            ph_world_destroy(w);
        }
    }
    fclose(f);
    fclose(g);
    fclose(h);
    fclose(dflt);
}

/* -------------------------------------------------------------- perm */

enum { PERM_ITERS = 100, PERM_MERITS = 3 };

/* The merits the study can count to (seeds/001 plots an "LCP error" it does
 * not define, and its tolerance 1e-4): physd's LCP error < 1e-4 m/s (the
 * main study), ||phi|| < 1e-4 m/s (psi < 5e-9) and the min-map < 1e-4. */
static const char *const merit_name[PERM_MERITS] = {"lcp_error", "fischer", "minmap"};

/* Iterations of a solve until each merit first drops below its tolerance
 * (1..PERM_ITERS), or PERM_ITERS + 1 when it never does. The solve stops at
 * psi < 1e-22, long after every merit has crossed its tolerance. */
static void iters_to(const ph_lcp *p, const ph_settings *s, const int *order, int *out) {
    double x[16];
    ph_lcp_trace tr = {TRACE_CAP, 0, tr_f, tr_m, tr_l, tr_w, tr_p};
    ph_settings s2 = *s;
    s2.tolerance = 1e-22;
    int e = ph_lcp_solve(p, &s2, order, NULL, x, NULL, &tr);
    if (e) die("perm solve", e);
    const double *v[PERM_MERITS] = {tr_l, tr_f, tr_m};
    const double tol[PERM_MERITS] = {1e-4, 0.5e-8, 1e-4};
    for (int m = 0; m < PERM_MERITS; m++) {
        out[m] = PERM_ITERS + 1;
        for (int k = 0; k < tr.count; k++)
            if (v[m][k] < tol[m]) {
                out[m] = k + 1;
                break;
            }
    }
}

/* Next permutation in lexicographic order; 0 after the last. */
static int next_perm(int *a, int n) {
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1])
        i--;
    if (i < 0) return 0;
    int j = n - 1;
    while (a[j] <= a[i])
        j--;
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        t = a[l];
        a[l] = a[r];
        a[r] = t;
    }
    return 1;
}

/* The formulation's open choices scanned: the body yawed by yaw degrees
 * about the vertical from its scene pose, and the regularization: 0 the
 * documents' (contacts 35 Hz, d = 4; friction k = 1e10), 1 friction rows
 * like the normals (friction.hertz = 35, set-up B), 2 physd's default
 * contacts (110 Hz, d = 5; friction k = 1e10). */
static const char *const reg_name[3] = {"doc", "friction35", "contact110"};

static ph_settings perm_settings(int reg) {
    ph_settings s = doc_settings();
    if (reg == 1) s.friction.hertz = 35;
    if (reg == 2) {
        s.contact.hertz = 110;
        s.contact.d = 5;
    }
    return s;
}

typedef struct strat {
    const char *name;
    ph_method method;
    ph_ordering ordering;
    int per_iteration;
    int seeds; /* > 1: random, report the distribution over seeds */
} strat;
static const strat strats[] = {
    {"default", PH_METHOD_PGS, PH_ORDER_DEFAULT, 0, 1},
    {"gravity", PH_METHOD_PGS, PH_ORDER_GRAVITY, 0, 1},
    {"complementarity/step", PH_METHOD_PGS, PH_ORDER_COMPLEMENTARITY, 0, 1},
    {"complementarity/iteration", PH_METHOD_PGS, PH_ORDER_COMPLEMENTARITY, 1, 1},
    {"effective-mass", PH_METHOD_PGS, PH_ORDER_EFFECTIVE_MASS, 0, 1},
    {"random/step", PH_METHOD_PGS, PH_ORDER_RANDOM, 0, 1000},
    {"random/iteration", PH_METHOD_PGS, PH_ORDER_RANDOM, 1, 1000},
    {"block-pgs", PH_METHOD_BLOCK_PGS, PH_ORDER_DEFAULT, 0, 1},
    {"jacobi", PH_METHOD_JACOBI, PH_ORDER_DEFAULT, 0, 1},
};
enum { STRATS = sizeof strats / sizeof *strats };

static int cmp_int(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* One case of the study: every row order of the scene's first step, the
 * histogram of iterations to each merit's tolerance, and where physd's
 * strategies land. main_dir (the main case: no yaw, reg 0) also gets the
 * histogram files, the curves and the strategies' table of the report. */
static void perm_case(const char *main_dir, const char *scene, double yaw, int reg, FILE *scan, FILE *scan_strat,
                      FILE *place, FILE *summary) {
    const ph_settings base = perm_settings(reg);
    ph_world_id w = make_world(scene, base);
    if (yaw != 0) {
        ph_body_id bodies[4];
        const int nb = ph_world_get_bodies(w, bodies, 4);
        ph_transform t;
        ph_body_get_transform(bodies[nb - 1], &t);
        ph_body_set_transform(bodies[nb - 1], t.p,
                              ph_quat_mul(ph_quat_axis_angle(ph_v3(0, 0, 1), yaw * 3.14159265358979323846 / 180), t.q));
    }
    ph_lcp *cap = NULL;
    int e = ph_world_step_capture(w, &cap);
    if (e || !cap) die("capture", e);
    const int n = ph_lcp_size(cap);
    /* The same system as a dense problem (contacts only: identical rows). */
    double A[256], b[16], lo[16], hi[16], mu[16], l0[16];
    int normal[16];
    ph_lcp_to_dense(cap, A, b, lo, hi, mu, normal, l0, NULL);
    for (int i = 0; i < n; i++)
        if (normal[i] >= 0) {
            lo[i] = -INFINITY;
            hi[i] = INFINITY;
        }
    ph_lcp *p = ph_lcp_create_dense(n, A, b, lo, hi, mu, normal, NULL, l0, &e);
    if (!p) die("dense", e);
    ph_settings s = base;
    s.iterations = PERM_ITERS;
    s.tolerance = 0;
    s.record_merits = 1;
    /* Every permutation. */
    static long hist[PERM_MERITS][PERM_ITERS + 2];
    memset(hist, 0, sizeof hist);
    int order[16];
    for (int i = 0; i < n; i++)
        order[i] = i;
    long total = 0;
    double t0 = now_s();
    int best = PERM_ITERS + 1, worst = 0;
    int best_order[16], worst_order[16];
    do {
        int it[PERM_MERITS];
        iters_to(p, &s, order, it);
        for (int m = 0; m < PERM_MERITS; m++)
            hist[m][it[m]]++;
        total++;
        if (it[0] < best) {
            best = it[0];
            memcpy(best_order, order, sizeof order);
        }
        if (it[0] > worst) {
            worst = it[0];
            memcpy(worst_order, order, sizeof order);
        }
    } while (next_perm(order, n));
    double secs = now_s() - t0;
    /* Each merit's histogram: best, median, worst, mode, fraction > 25. */
    int med[PERM_MERITS];
    for (int m = 0; m < PERM_MERITS; m++) {
        int lo_it = 0, hi_it = 0, mode = 0;
        long acc = 0, above = 0;
        med[m] = 0;
        for (int k = 1; k <= PERM_ITERS + 1; k++) {
            if (!hist[m][k]) continue;
            if (!lo_it) lo_it = k;
            hi_it = k;
            if (!mode || hist[m][k] > hist[m][mode]) mode = k;
            if (!med[m] && 2 * (acc + hist[m][k]) > total) med[m] = k;
            acc += hist[m][k];
            if (k > 25) above += hist[m][k];
        }
        fprintf(scan, "%s,%g,%s,%s,%ld,%d,%d,%d,%d,%.6f\n", scene, yaw, reg_name[reg], merit_name[m], total, lo_it,
                med[m], hi_it, mode, (double)above / (double)total);
    }
    char name[256];
    if (main_dir) {
        snprintf(name, sizeof name, "perm_%s.csv", scene);
        FILE *f = open_csv(main_dir, name);
        fprintf(f, "iterations,count,fraction\n");
        for (int k = 1; k <= PERM_ITERS + 1; k++)
            if (hist[0][k]) fprintf(f, "%d,%ld,%.6f\n", k, hist[0][k], (double)hist[0][k] / (double)total);
        fclose(f);
        /* Convergence of the default, best and worst orders (Figure 2). */
        snprintf(name, sizeof name, "perm_curves_%s.csv", scene);
        f = open_csv(main_dir, name);
        fprintf(f, "order,k,lcp_error\n");
        const int *orders[3] = {NULL, best_order, worst_order};
        const char *oname[3] = {"default", "best", "worst"};
        for (int o = 0; o < 3; o++) {
            double x[16];
            ph_lcp_trace tr = {TRACE_CAP, 0, tr_f, NULL, tr_l, tr_w, tr_p};
            ph_settings s2 = s;
            s2.iterations = 30;
            ph_lcp_solve(p, &s2, orders[o], NULL, x, NULL, &tr);
            for (int k = 0; k < tr.count; k++)
                fprintf(f, "%s,%d,%.6e\n", oname[o], k + 1, tr_l[k]);
        }
        fclose(f);
        /* The default order also on the captured rows: both back ends agree. */
        int it_rows[PERM_MERITS], it_dense[PERM_MERITS];
        iters_to(cap, &s, NULL, it_rows);
        iters_to(p, &s, NULL, it_dense);
        if (it_rows[0] != it_dense[0])
            fprintf(stderr, "warning: %s rows %d dense %d\n", scene, it_rows[0], it_dense[0]);
        long above = 0;
        for (int k = 26; k <= PERM_ITERS + 1; k++)
            above += hist[0][k];
        fprintf(summary, "%s,%d,%ld,%d,%d,%d,%.6f,%.2f\n", scene, n, total, best, worst, med[0],
                (double)above / (double)total, secs);
        printf("perm %-16s rows %d orders %ld best %d median %d worst %d default %d (%.1f s)\n", scene, n, total, best,
               med[0], worst, it_dense[0], secs);
        fflush(stdout);
    }
    /* physd's strategies on the same dense problem. */
    for (size_t k = 0; k < STRATS; k++) {
        const strat *st = &strats[k];
        int *its = malloc(sizeof(int) * (size_t)st->seeds * PERM_MERITS);
        for (int sd = 0; sd < st->seeds; sd++) {
            ph_settings s2 = s;
            s2.method = st->method;
            s2.ordering = st->ordering;
            s2.ordering_per_iteration = st->per_iteration;
            s2.seed = (uint64_t)sd + 1;
            int it[PERM_MERITS];
            iters_to(p, &s2, NULL, it);
            for (int m = 0; m < PERM_MERITS; m++)
                its[m * st->seeds + sd] = it[m];
        }
        for (int m = 0; m < PERM_MERITS; m++) {
            int *v = its + m * st->seeds;
            /* Median over seeds (a single value for the deterministic ones). */
            qsort(v, (size_t)st->seeds, sizeof *v, cmp_int);
            const int md = v[st->seeds / 2], lo_q = v[st->seeds / 4], hi_q = v[(3 * st->seeds) / 4];
            long better = 0, same = 0;
            for (int it = 1; it < md && it <= PERM_ITERS + 1; it++)
                better += hist[m][it];
            if (md <= PERM_ITERS + 1) same = hist[m][md];
            const double pct_strict = 100.0 * (double)better / (double)total;
            const double pct_mid = 100.0 * ((double)better + 0.5 * (double)same) / (double)total;
            fprintf(scan_strat, "%s,%g,%s,%s,%s,%d,%.2f,%.2f\n", scene, yaw, reg_name[reg], merit_name[m], st->name, md,
                    pct_strict, pct_mid);
            if (main_dir && m == 0)
                fprintf(place, "%s,%s,%d,%d,%d,%.2f,%.2f\n", scene, st->name, md, lo_q, hi_q, pct_strict, pct_mid);
        }
        free(its);
    }
    ph_lcp_destroy(p);
    ph_lcp_destroy(cap);
    ph_world_destroy(w);
}

/* The main study (no yaw, the documents' regularization, the LCP error) and
 * the scan over yaw x regularization x merit. */
static void perm(const char *dir) {
    FILE *place = open_csv(dir, "perm_strategies.csv");
    FILE *summary = open_csv(dir, "perm_summary.csv");
    FILE *scan = open_csv(dir, "perm_scan.csv");
    FILE *scan_strat = open_csv(dir, "perm_scan_strategies.csv");
    fprintf(place, "scene,strategy,iterations,q25,q75,percent_strictly_better,percentile_mid\n");
    fprintf(summary, "scene,rows,orders,best,worst,median,fraction_above_25,seconds\n");
    fprintf(scan, "scene,yaw,regularization,merit,orders,best,median,worst,mode,fraction_above_25\n");
    fprintf(scan_strat, "scene,yaw,regularization,merit,strategy,iterations,percent_strictly_better,percentile_mid\n");
    static const char *const scenes[2] = {"sliding_capsule", "three_sphere"};
    static const double yaws[3] = {0, 20, 45};
    for (int sc = 0; sc < (check_mode ? 1 : 2); sc++)
        for (int y = 0; y < 3; y++)
            for (int r = 0; r < 3; r++) {
                const int main_case = y == 0 && r == 0;
                if (check_mode && !main_case) continue;
                perm_case(main_case ? dir : NULL, scenes[sc], yaws[y], r, scan, scan_strat, place, summary);
                if (!main_case) {
                    printf("perm scan %-16s yaw %2g %s\n", scenes[sc], yaws[y], reg_name[r]);
                    fflush(stdout);
                }
            }
    fclose(place);
    fclose(summary);
    fclose(scan);
    fclose(scan_strat);
}

/* --------------------------------------------------------- massratio */

static void massratio(const char *dir) {
    FILE *f = open_csv(dir, "massratio.csv");
    fprintf(f, "setup,ratio,rows,method,iterations,work,lcp_error_final\n");
    const double tol = 1e-5;
    const double ratios[] = {1, 3, 10, 30, 100, 300, 1000, 3000, 10000};
    for (int setup = 0; setup < 2; setup++)
        for (size_t r = 0; r < sizeof ratios / sizeof *ratios; r++) {
            if (check_mode && ratios[r] != 1 && ratios[r] != 100) continue;
            ph_settings ws = doc_settings();
            ws.iterations = 100;
            if (setup == 1) ws.friction.hertz = 35;
            ph_world_id w = make_world("heavy_on_light", ws);
            ph_body_id bodies[8];
            int nb = ph_world_get_bodies(w, bodies, 8);
            ph_body_id slab = bodies[nb - 1];
            const double m = 125.0 * ratios[r], hx = 1.25, hz = 0.25;
            ph_body_set_mass(
                slab, m,
                ph_v3(m * (hx * hx + hz * hz) / 3.0, m * (hx * hx + hz * hz) / 3.0, m * (hx * hx + hx * hx) / 3.0));
            for (int i = 0; i < 60; i++)
                ph_world_step(w);
            ph_lcp *p = NULL;
            int e = ph_world_step_capture(w, &p);
            if (e || !p) die("capture", e);
            const int n = ph_lcp_size(p);
            double *x = malloc(sizeof(double) * (size_t)n), *zero = calloc((size_t)n, sizeof(double));
            const ph_method methods[] = {PH_METHOD_PGS,    PH_METHOD_BLOCK_PGS, PH_METHOD_PGS_SM,
                                         PH_METHOD_JACOBI, PH_METHOD_PGS_SM,    PH_METHOD_PGS_SM,
                                         PH_METHOD_NNCG,   PH_METHOD_APGD,      PH_METHOD_PGS_SM};
            const char *names[] = {"PGS",       "block-PGS", "PGS-SM", "Jacobi",        "PGS-SM-exact",
                                   "PGS-SM-IC", "NNCG",      "APGD",   "PGS-SM-IC-prox"};
            for (int k = 0; k < 9; k++) {
                ph_settings s = doc_settings();
                s.method = methods[k];
                s.sm_forcing = k == 4 ? 0 : 0.03;
                s.sm_preconditioner = (k == 5 || k == 8) ? 2 : 1;
                s.sm_proximal = k == 8 ? 1e-5 : 0;
                s.iterations = 3000;
                ph_lcp_trace tr = {TRACE_CAP, 0, tr_f, NULL, tr_l, tr_w, tr_p};
                ph_step_stats st;
                e = ph_lcp_solve(p, &s, NULL, zero, x, &st, &tr);
                if (e) die("solve", e);
                int it = -1;
                double wk = -1;
                for (int j = 0; j < tr.count; j++)
                    if (tr_l[j] < tol) {
                        it = j + 1;
                        wk = tr_w[j];
                        break;
                    }
                fprintf(f, "%c,%g,%d,%s,%d,%.1f,%.3e\n", 'A' + setup, ratios[r], n, names[k], it, wk,
                        st.lcp_error_final);
            }
            printf("massratio %c %6g rows %d\n", 'A' + setup, ratios[r], n);
            fflush(stdout);
            free(x);
            free(zero);
            ph_lcp_destroy(p);
            ph_world_destroy(w);
        }
    fclose(f);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    const char *only = argc > 2 ? argv[2] : "";
    /* check: a fast subset (arched_snake and incline_boxes in Figure 3, the
     * capsule's main case, mass ratios 1 and 100) whose rows
     * bench/solvers_tables.py --check compares with the committed tables. */
    if (strcmp(only, "check") == 0) {
        check_mode = 1;
        only = "";
    }
    if (!*only || strcmp(only, "fig3") == 0) fig3(dir);
    if (!*only || strcmp(only, "perm") == 0) perm(dir);
    if (!*only || strcmp(only, "massratio") == 0) massratio(dir);
    return 0;
}
