/*
 * experiments.c — the experiments of the source documents on physd's
 * solver family (docs/solvers.md), written as CSV files for
 * bench/experiments.sh to plot.
 *
 * Normal path: `physd-experiments OUTDIR` runs
 *   1. fig3: the PGS–SM paper's Figure 3 (seeds/000): on its eight scenes,
 *      one step's system captured after 120 settling steps, solved by PGS
 *      and PGS–SM (k_pgs = 25, k_sm = 5) for 1500 units of work; psi and
 *      the LCP error after every iteration, in two set-ups (A: the
 *      documents' formulation, doc_settings, warm started as in the
 *      world; B: friction rows
 *      regularized like the normals, friction.hertz = 35, cold start).
 *      PGS–SM four times: diagonally preconditioned CG with exact subspace
 *      solves as in the paper (sm_forcing = 0, "PGS-SM-exact") and with
 *      physd's default forcing term ("PGS-SM"), and the same two with the
 *      incomplete Cholesky preconditioner (sm_preconditioner = 2,
 *      "PGS-SM-IC-exact", "PGS-SM-IC"); fig3_forcing.csv repeats the
 *      diagonal PGS–SM for a range of sm_forcing values;
 *   2. perm: the reordering study (seeds/001): the first step of the sliding
 *      capsule (6 rows) and of the three-sphere body (9 rows), PGS from
 *      lambda = 0 in every one of the 720 / 362880 row orders, iterations
 *      to LCP error < 1e-4 m/s, and where each of physd's strategies lands;
 *   3. massratio: heavy_on_light with the slab 1 to 10^4 times a light
 *      cube, iterations of PGS, blockwise PGS, PGS–SM (diagonal: forcing
 *      0.03 and exact; IC(0): forcing 0.03) and Jacobi from a cold
 *      start to LCP error < 1e-5 m/s on a step captured after 60 settling
 *      steps (100 PGS iterations each), in set-ups A and B as for fig3.
 * Only the public API is used (ph_core.h, ph_lcp.h, ph_scenes.h).
 *
 * Failure modes: any core error aborts with a message and exit status 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "physd/ph_core.h"
#include "physd/ph_lcp.h"
#include "physd/ph_scenes.h"

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
static double tr_f[TRACE_CAP], tr_l[TRACE_CAP], tr_w[TRACE_CAP];
static unsigned char tr_p[TRACE_CAP];

static double first_below(const double *v, const double *work, int count, double tol) {
    for (int k = 0; k < count; k++)
        if (v[k] < tol) return work[k];
    return -1;
}

/* The methods of Figure 3: PGS; PGS–SM with exact (sm_forcing 0) and
 * inexact subspace solves, diagonal and IC(0) preconditioner (k_pgs = 25,
 * k_sm = 5 as the paper's figure); NNCG; APGD; PGS–SM with IC(0) and the
 * proximal term sm_proximal = 1e-5. */
enum { FIG3_METHODS = 8 };
static const char *const mname[FIG3_METHODS] = {"PGS",       "PGS-SM-exact", "PGS-SM", "PGS-SM-IC-exact",
                                                "PGS-SM-IC", "NNCG",         "APGD",   "PGS-SM-IC-prox"};

static ph_settings fig3_settings(int m) {
    ph_settings s = doc_settings();
    s.method = m == 0 ? PH_METHOD_PGS : (m == 5 ? PH_METHOD_NNCG : (m == 6 ? PH_METHOD_APGD : PH_METHOD_PGS_SM));
    s.iterations = 1500;
    s.tolerance = 1e-30;
    s.k_pgs = 25;
    s.k_sm = 5;
    s.sm_forcing = (m == 1 || m == 3) ? 0 : 0.03;
    s.sm_preconditioner = (m == 3 || m == 4 || m == 7) ? 2 : 1;
    s.sm_proximal = m == 7 ? 1e-5 : 0;
    return s;
}

static void fig3(const char *dir) {
    static const char *scenes[] = {"arched_snake",  "snake_heavy_box", "large_stack",  "heavy_on_light",
                                   "incline_boxes", "gears_small",     "gears_medium", "friction_structure"};
    FILE *f = open_csv(dir, "fig3.csv");
    FILE *g = open_csv(dir, "fig3_summary.csv");
    FILE *h = open_csv(dir, "fig3_forcing.csv");
    fprintf(h, "scene,setup,rows,sm_forcing,work_psi_1e-4,work_psi_1e-10,psi_final,subspace_steps,cg_iterations\n");
    fprintf(f, "scene,setup,method,k,work,psi,lcp_error,phase\n");
    fprintf(g, "scene,setup,rows,method,work_psi_1e-4,work_psi_1e-10,psi_final,lcp_error_final,subspace_steps,"
               "cg_iterations,psi_scaled_final,restarts,ms\n");
    for (int setup = 0; setup < 2; setup++) {
        for (size_t sc = 0; sc < sizeof scenes / sizeof *scenes; sc++) {
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
                fprintf(g, "%s,%c,%d,%s,%.1f,%.1f,%.3e,%.3e,%d,%d,%.3e,%d,%.1f\n", scenes[sc], 'A' + setup, n, mname[m],
                        first_below(tr_f, tr_w, tr.count, 1e-4), first_below(tr_f, tr_w, tr.count, 1e-10),
                        st.fischer_final, st.lcp_error_final, st.subspace_steps, st.cg_iterations,
                        st.fischer_scaled_final, st.restarts, ms);
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
}

/* -------------------------------------------------------------- perm */

enum { PERM_ITERS = 100 };

/* Iterations of a solve until the LCP error first drops below tol (the
 * iteration count 1..PERM_ITERS), or PERM_ITERS + 1 when it never does. */
static int iters_to(const ph_lcp *p, const ph_settings *s, const int *order, double tol) {
    double x[16];
    ph_lcp_trace tr = {TRACE_CAP, 0, tr_f, NULL, tr_l, tr_w, tr_p};
    int e = ph_lcp_solve(p, s, order, NULL, x, NULL, &tr);
    if (e) die("perm solve", e);
    for (int k = 0; k < tr.count; k++)
        if (tr_l[k] < tol) return k + 1;
    return PERM_ITERS + 1;
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

static void perm_scene(const char *dir, const char *scene, FILE *place, FILE *summary) {
    const double tol = 1e-4;
    ph_world_id w = make_world(scene, doc_settings());
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
    ph_settings s = doc_settings();
    s.iterations = PERM_ITERS;
    s.tolerance = 0;
    s.record_merits = 1;
    /* Every permutation. */
    long hist[PERM_ITERS + 2];
    memset(hist, 0, sizeof hist);
    int order[16];
    for (int i = 0; i < n; i++)
        order[i] = i;
    long total = 0;
    double t0 = now_s();
    int best = PERM_ITERS + 1, worst = 0;
    int best_order[16], worst_order[16];
    do {
        int it = iters_to(p, &s, order, tol);
        hist[it]++;
        total++;
        if (it < best) {
            best = it;
            memcpy(best_order, order, sizeof order);
        }
        if (it > worst) {
            worst = it;
            memcpy(worst_order, order, sizeof order);
        }
    } while (next_perm(order, n));
    double secs = now_s() - t0;
    char name[256];
    snprintf(name, sizeof name, "perm_%s.csv", scene);
    FILE *f = open_csv(dir, name);
    fprintf(f, "iterations,count,fraction\n");
    for (int k = 1; k <= PERM_ITERS + 1; k++)
        if (hist[k]) fprintf(f, "%d,%ld,%.6f\n", k, hist[k], (double)hist[k] / (double)total);
    fclose(f);
    /* Convergence of the default, best and worst orders (Figure 2). */
    snprintf(name, sizeof name, "perm_curves_%s.csv", scene);
    f = open_csv(dir, name);
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
    /* physd's strategies, on the same dense problem and, for the default
     * order, also on the captured rows (the check that both back ends
     * agree). */
    int it_rows = iters_to(cap, &s, NULL, tol), it_dense = iters_to(p, &s, NULL, tol);
    if (it_rows != it_dense) fprintf(stderr, "warning: %s rows %d dense %d\n", scene, it_rows, it_dense);
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
    for (size_t k = 0; k < sizeof strats / sizeof *strats; k++) {
        const strat *st = &strats[k];
        int *its = malloc(sizeof(int) * (size_t)st->seeds);
        for (int sd = 0; sd < st->seeds; sd++) {
            ph_settings s2 = s;
            s2.method = st->method;
            s2.ordering = st->ordering;
            s2.ordering_per_iteration = st->per_iteration;
            s2.seed = (uint64_t)sd + 1;
            its[sd] = iters_to(p, &s2, NULL, tol);
        }
        /* Median over seeds (a single value for the deterministic ones). */
        for (int i = 1; i < st->seeds; i++)
            for (int j = i; j > 0 && its[j - 1] > its[j]; j--) {
                int t = its[j];
                its[j] = its[j - 1];
                its[j - 1] = t;
            }
        int med = its[st->seeds / 2], lo_q = its[st->seeds / 4], hi_q = its[(3 * st->seeds) / 4];
        long better = 0, same = 0;
        for (int it = 1; it < med && it <= PERM_ITERS + 1; it++)
            better += hist[it];
        if (med <= PERM_ITERS + 1) same = hist[med];
        double pct_strict = 100.0 * (double)better / (double)total;
        double pct_mid = 100.0 * ((double)better + 0.5 * (double)same) / (double)total;
        fprintf(place, "%s,%s,%d,%d,%d,%.2f,%.2f\n", scene, st->name, med, lo_q, hi_q, pct_strict, pct_mid);
        free(its);
    }
    fprintf(summary, "%s,%d,%ld,%d,%d,%.2f\n", scene, n, total, best, worst, secs);
    printf("perm %-16s rows %d orders %ld best %d worst %d default %d (%.1f s)\n", scene, n, total, best, worst,
           it_dense, secs);
    fflush(stdout);
    ph_lcp_destroy(p);
    ph_lcp_destroy(cap);
    ph_world_destroy(w);
}

static void perm(const char *dir) {
    FILE *place = open_csv(dir, "perm_strategies.csv");
    FILE *summary = open_csv(dir, "perm_summary.csv");
    fprintf(place, "scene,strategy,iterations,q25,q75,percent_strictly_better,percentile_mid\n");
    fprintf(summary, "scene,rows,orders,best,worst,seconds\n");
    perm_scene(dir, "sliding_capsule", place, summary);
    perm_scene(dir, "three_sphere", place, summary);
    fclose(place);
    fclose(summary);
}

/* --------------------------------------------------------- massratio */

static void massratio(const char *dir) {
    FILE *f = open_csv(dir, "massratio.csv");
    fprintf(f, "setup,ratio,rows,method,iterations,work,lcp_error_final\n");
    const double tol = 1e-5;
    const double ratios[] = {1, 3, 10, 30, 100, 300, 1000, 3000, 10000};
    for (int setup = 0; setup < 2; setup++)
        for (size_t r = 0; r < sizeof ratios / sizeof *ratios; r++) {
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
                                         PH_METHOD_JACOBI, PH_METHOD_PGS_SM,    PH_METHOD_PGS_SM};
            const char *names[] = {"PGS", "block-PGS", "PGS-SM", "Jacobi", "PGS-SM-exact", "PGS-SM-IC"};
            for (int k = 0; k < 6; k++) {
                ph_settings s = doc_settings();
                s.method = methods[k];
                s.sm_forcing = k == 4 ? 0 : 0.03;
                s.sm_preconditioner = k == 5 ? 2 : 1;
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
    if (!*only || strcmp(only, "fig3") == 0) fig3(dir);
    if (!*only || strcmp(only, "perm") == 0) perm(dir);
    if (!*only || strcmp(only, "massratio") == 0) massratio(dir);
    return 0;
}
