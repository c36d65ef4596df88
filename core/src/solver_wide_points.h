/*
 * solver_wide_points.h — point mode of the wide contact solver
 * (settings.contact_block on a native step; solver_wide.c, its only
 * includer): each visit of a contact point solves its three rows as one
 * 3 x 3 block on its relative velocity, with the same batches, groups and
 * levels as row mode (solver_wide_rows.h, whose helpers it uses).
 *
 * Static and always inlined, so that each instruction-set build of a pass
 * (PH_VARIANTS, ph_simd.h) compiles them with its own instructions.
 *
 * Invariants: the scalar loop solves the same block from the rows
 * (solver.c), equal to rounding; the block's adjugate is the one of
 * ph_arith.h for both.
 */
#ifndef PHYSD_SOLVER_WIDE_POINTS_H
#define PHYSD_SOLVER_WIDE_POINTS_H

#include "ph_arith.h"
#include "solver_wide_rows.h"

/* ---- Point mode (settings.contact_block on a native step). The same
 * batches, groups and levels; each visit of a contact point solves its
 * three rows together. With the point's relative velocity
 *     dv = (v_b + w_b x rb) - (v_a + w_a x ra),
 * row i (normal, t1, t2 along dir_i) has J_i v = dir_i . dv, and the
 * residuals y_i = J_i v + eps_i lambda_i - rhs_i change by K dlambda with
 * K = J M^-1 J^T + diag(eps), the point's 3 x 3 block of the system. A
 * visit takes lambda - K^-1 y, the exact solution of the point's equations
 * with the rest fixed, when it is feasible (lambda_n >= 0, each friction
 * impulse within its bound); in a lane where it is not, one projected
 * Gauss–Seidel pass over the three rows (through K: the same numbers as the
 * row-by-row update up to rounding). The velocities then change by
 * M^-1 J^T dlambda in one go: P = sum dlambda_i dir_i, v_a -= P / m_a,
 * w_a -= I_a^-1 (ra x P), and the opposite for B. */

/* The point block's adjugate (ph_arith.h, shared with solver.c). */
PH__DEFINE_ADJ3(adj3_vd, ph__vd)

/* a x b, lane by lane. */
static inline __attribute__((always_inline)) void cross_vd(const ph__vd *a, const ph__vd *b, ph__vd *o) {
    o[0] = a[1] * b[2] - a[2] * b[1];
    o[1] = a[2] * b[0] - a[0] * b[2];
    o[2] = a[0] * b[1] - a[1] * b[0];
}

static inline __attribute__((always_inline)) ph__vd dot3_vd(const ph__vd *a, const ph__vd *b) {
    return (a[0] * b[0] + a[1] * b[1]) + a[2] * b[2];
}

/* The point's relative velocity dv = (v_b + w_b x rb) - (v_a + w_a x ra). */
static inline __attribute__((always_inline)) void point_dv(const ph__wpoint *p, const wvel *u, ph__vd *dv) {
    ph__vd ca[3], cb[3];
    cross_vd(u->wa, p->ra, ca);
    cross_vd(u->wb, p->rb, cb);
    for (int c = 0; c < 3; c++)
        dv[c] = (u->vb[c] + cb[c]) - (u->va[c] + ca[c]);
}

/* The rows' SPOOK right-hand side B of a batch's points at velocities u
 * (the merits' B, ph__wpointb): made by the fill, the refresh or the
 * merits themselves, the same operations in each. */
static inline __attribute__((always_inline)) void point_b(const ph__wpoint *p, const ph__vd (*dir)[3], const wvel *u,
                                                          ph__vd *B) {
    ph__vd dv[3];
    point_dv(p, u, dv);
    B[0] = p->rhs - dot3_vd(dir[0], dv);
    B[1] = -dot3_vd(dir[1], dv);
    B[2] = -dot3_vd(dir[2], dv);
}

/* A group's inverse masses and inertias, lane by lane: the scale of an
 * isotropic body (ii[0] only), or every entry when the group has a body
 * with unequal moments (aniso). */
typedef struct winert {
    ph__vd ima, imb, ia[9], ib[9];
} winert;

static inline __attribute__((always_inline)) void
gather_inert(const ph__sbody *sb, const ph__wbatch *g, const ph__wginert *gr, int aniso, const wvel *u, winert *in) {
#if PH_LANES == 4
    /* The 4 x 4 gather brought inv_mass and inv_i[0][0] along. */
    (void)sb;
    (void)g;
    in->ima = u->ka[0];
    in->imb = u->kb[0];
    in->ia[0] = u->ka[1];
    in->ib[0] = u->kb[1];
#else
    (void)u;
    const double *pa[PH_LANES], *pb[PH_LANES], *ma[PH_LANES], *mb[PH_LANES];
    for (int j = 0; j < PH_LANES; j++) {
        ma[j] = &sb[g->ia[j]].inv_mass;
        mb[j] = &sb[g->ib[j]].inv_mass;
        pa[j] = &sb[g->ia[j]].inv_i.m[0][0];
        pb[j] = &sb[g->ib[j]].inv_i.m[0][0];
    }
    in->ima = lanes_at(ma, 0);
    in->imb = lanes_at(mb, 0);
    in->ia[0] = lanes_at(pa, 0);
    in->ib[0] = lanes_at(pb, 0);
#endif
    if (aniso) {
        /* Those of the build (a body's world inertia turns with it). */
        for (int e = 0; e < 9; e++) {
            in->ia[e] = gr->ia[e];
            in->ib[e] = gr->ib[e];
        }
    }
}

/* With pin (the AVX2 and AVX-512 builds: see copy_vel), an empty asm that
 * the compiler must assume changes *x, so that *x stays a value of its
 * own (a register, or memory where the compiler chooses): not an
 * operation on the numbers. */
static inline __attribute__((always_inline)) void pin_vd(ph__vd *x, const int pin) {
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__clang__)
    if (pin) __asm__("" : "+x,m"(*x));
#else
    (void)x;
    (void)pin;
#endif
}

/* v += M^-1 J^T d for the point's three rows. An isotropic inverse
 * inertia c I times x is c x exactly (ph__finish_row), so a group of
 * isotropic bodies only scales. With uc (point_group's loop), each new
 * velocity is also copied to uc right after its update, the copy pinned
 * (pin_vd): the values the next visit's dv reads. */
static inline __attribute__((always_inline)) void point_apply(const ph__vd (*dir)[3], const ph__wpoint *p, ph__vd d0,
                                                              ph__vd d1, ph__vd d2, const winert *in, int aniso,
                                                              wvel *u, wvel *uc, const int pin) {
    ph__vd P[3], ta[3], tb[3];
    for (int c = 0; c < 3; c++)
        P[c] = (d0 * dir[0][c] + d1 * dir[1][c]) + d2 * dir[2][c];
    cross_vd(p->ra, P, ta);
    cross_vd(p->rb, P, tb);
    if (aniso) {
        ph__vd xa[3], xb[3];
        for (int r = 0; r < 3; r++) {
            xa[r] = (in->ia[3 * r] * ta[0] + in->ia[3 * r + 1] * ta[1]) + in->ia[3 * r + 2] * ta[2];
            xb[r] = (in->ib[3 * r] * tb[0] + in->ib[3 * r + 1] * tb[1]) + in->ib[3 * r + 2] * tb[2];
        }
        for (int c = 0; c < 3; c++) {
            ta[c] = xa[c];
            tb[c] = xb[c];
        }
    } else {
        for (int c = 0; c < 3; c++) {
            ta[c] = in->ia[0] * ta[c];
            tb[c] = in->ib[0] * tb[c];
        }
    }
    /* The linear velocities first: the angular ones come last on the
     * chain to the next visit's dv (P, ra x P, the inertia's scale), so
     * their new values are made last and reach the copy in registers
     * rather than through the slots of u. Each copy is made and pinned
     * right after its update: pinned all together at the end of the visit
     * (copy_vel), gcc kept one of them (an angular one) only in its slot
     * of u and reloaded it for the next dv, a store-forward on the chain
     * (docs/profile.md, r21-lead6). */
    for (int c = 0; c < 3; c++) {
        u->va[c] = u->va[c] - in->ima * P[c];
        u->vb[c] = u->vb[c] + in->imb * P[c];
        if (uc) {
            uc->va[c] = u->va[c];
            pin_vd(&uc->va[c], pin);
            uc->vb[c] = u->vb[c];
            pin_vd(&uc->vb[c], pin);
        }
    }
    for (int c = 0; c < 3; c++) {
        u->wa[c] = u->wa[c] - ta[c];
        u->wb[c] = u->wb[c] + tb[c];
        if (uc) {
            uc->wa[c] = u->wa[c];
            pin_vd(&uc->wa[c], pin);
            uc->wb[c] = u->wb[c];
            pin_vd(&uc->wb[c], pin);
        }
    }
}

/* |x|, lane by lane (the sign bit cleared). */
static inline __attribute__((always_inline)) ph__vd vabs(ph__vd x) {
    return (ph__vd)((ph__vi)x & ~(ph__vi)splat(-0.0));
}

/* 1 when every lane of m (all ones or zero) is set. With pin (the AVX2
 * and AVX-512 builds, gcc on x86: see copy_vel) one vmovmskpd of the
 * vector, which the generic vector code cannot name: a branch on it
 * resolves a few cycles sooner than after the two lane-crossing shuffles
 * (what a mispredicted one costs on the visit's chain). */
static inline __attribute__((always_inline)) int all_lanes(ph__vi m, const int pin) {
#if PH_LANES == 4 && (defined(__x86_64__) || defined(__i386__)) && !defined(__clang__) && defined(__OPTIMIZE__)
    /* (Only when optimizing: unoptimized, GCC keeps the dead pinned branch
     * of the baseline build, whose vector the "x" operand cannot hold.) */
    if (pin) {
        int r;
        __asm__("vmovmskpd %1, %0" : "=r"(r) : "x"(m));
        return r == 15;
    }
#else
    (void)pin;
#endif
#if PH_LANES == 4
    m &= __builtin_shuffle(m, (ph__vi){2, 3, 0, 1});
    m &= __builtin_shuffle(m, (ph__vi){1, 0, 3, 2});
    return m[0] != 0;
#else
    long long a = -1;
    for (int j = 0; j < PH_LANES; j++)
        a &= m[j];
    return a != 0;
#endif
}

/* The lanes of a visit whose block solution is not taken (done: the
 * others): one projected Gauss–Seidel pass over the point's three rows,
 * through K (y_j moves by K_ji times each earlier row's change). */
static inline __attribute__((always_inline)) void point_rows(const ph__wpoint *p, const ph__wbatch *wb, int box,
                                                             const ph__vd *y, const ph__vi *done, ph__vd *n) {
    const ph__vd zero = splat(0.0), inf = splat(INFINITY);
    const ph__vd l0 = clamp_vd(p->lam[0] - y[0] * p->inv[0], zero, inf);
    const ph__vd g0 = l0 - p->lam[0];
    const ph__vd b = box ? wb->box : wb->mu * l0;
    const ph__vd l1 = clamp_vd(p->lam[1] - (y[1] + p->koff[0] * g0) * p->inv[1], -b, b);
    const ph__vd g1 = l1 - p->lam[1];
    const ph__vd l2 = clamp_vd(p->lam[2] - ((y[2] + p->koff[1] * g0) + p->koff[2] * g1) * p->inv[2], -b, b);
    n[0] = select_vd(*done, n[0], l0);
    n[1] = select_vd(*done, n[1], l1);
    n[2] = select_vd(*done, n[2], l2);
}

/* One visit of the points of a batch (see above): dv from the velocities
 * uc, the update on u (the same values: see point_group), and with ucw
 * (NULL: none) the new velocities' copies there (point_apply). */
static inline __attribute__((always_inline)) void point_block(ph__wpoint *p, const ph__vd (*dir)[3],
                                                              const ph__wbatch *wb, const winert *in, int aniso,
                                                              int box, wvel *u, const wvel *uc, wvel *ucw, ph__vd zero,
                                                              const int pin) {
    ph__vd dv[3];
    point_dv(p, uc, dv);
    const ph__vd y0 = (dot3_vd(dir[0], dv) + p->eps[0] * p->lam[0]) - p->rhs;
    const ph__vd y1 = dot3_vd(dir[1], dv) + p->eps[1] * p->lam[1];
    const ph__vd y2 = dot3_vd(dir[2], dv) + p->eps[2] * p->lam[2];
    const ph__vd *k = p->kinv;
    ph__vd n0 = p->lam[0] - ((k[0] * y0 + k[1] * y1) + k[2] * y2);
    ph__vd n1 = p->lam[1] - ((k[1] * y0 + k[3] * y1) + k[4] * y2);
    ph__vd n2 = p->lam[2] - ((k[2] * y0 + k[4] * y1) + k[5] * y2);
    const ph__vd bound = box ? wb->box : wb->mu * n0;
    const ph__vi ok = (n0 >= zero) & (vmax(vabs(n1), vabs(n2)) <= bound);
    ph__vd n[3] = {n0, n1, n2};
    if (!all_lanes(ok, pin)) {
        /* A point leaving the normal: all three impulses zero is the
         * point's solution when the normal's residual there is not
         * negative. */
        const ph__vi sep =
            (n0 < zero) & ((y0 - ((p->kd[0] * p->lam[0] + p->koff[0] * p->lam[1]) + p->koff[1] * p->lam[2])) >= zero);
        for (int i = 0; i < 3; i++)
            n[i] = select_vd(ok, n[i], zero);
        const ph__vi done = ok | sep;
        if (!all_lanes(done, pin)) {
            const ph__vd y[3] = {y0, y1, y2};
            point_rows(p, wb, box, y, &done, n);
        }
    }
    const ph__vd d0 = n[0] - p->lam[0], d1 = n[1] - p->lam[1], d2 = n[2] - p->lam[2];
    p->lam[0] = n[0];
    p->lam[1] = n[1];
    p->lam[2] = n[2];
    point_apply(dir, p, d0, d1, d2, in, aniso, u, ucw, pin);
}

/* The refresh's loop over a group's points (scale: a constant, so that the
 * loop has no test of it). */
static inline __attribute__((always_inline)) void point_refresh_rhs(ph__wbatch *g, ph__wpoint *pg, const refresh_k *c,
                                                                    ph__vd lin, const ph__vd *ca, const ph__vd *cb,
                                                                    const int scale) {
    for (int32_t k = 0; k < g->glen; k++) {
        ph__wbatch *wb = &g[k];
        ph__wpoint *p = &pg[k];
        const ph__vd jv0 = (lin + dot3_vd(p->rb, cb)) - dot3_vd(p->ra, ca);
        const ph__vd gap = wb->gap + c->hv * jv0;
        wb->gap = gap;
        p->rhs = spook_rhs_vd(gap, jv0, c->a, c->omb, c->hv, c->zero);
        if (scale) {
            const ph__vd ln = p->lam[0] * c->wsf;
            p->lam[0] = ln;
            const ph__vd bound = c->box ? wb->box : wb->mu * ln;
            p->lam[1] = clamp_vd(p->lam[1] * c->wsf, -bound, bound);
            p->lam[2] = clamp_vd(p->lam[2] * c->wsf, -bound, bound);
        }
    }
}

/* The refresh of a group's points (refresh_group's arithmetic on the
 * points' relative velocities). */
static inline __attribute__((always_inline)) void point_refresh_group(const ph__world *w, ph__wbatch *g, ph__wpoint *pg,
                                                                      const ph__wgroup *gr, const refresh_k *c) {
    const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
    wvel u0;
    gather_arrays(w->vw0, g, &u0);
    /* J_n v0 = n . (v_b - v_a) + rb . (n x w_b) - ra . (n x w_a): the
     * manifold's part once, the arms' per point. */
    ph__vd dl[3], ca[3], cb[3];
    for (int q = 0; q < 3; q++)
        dl[q] = u0.vb[q] - u0.va[q];
    const ph__vd lin = dot3_vd(dir[0], dl);
    cross_vd(dir[0], u0.wa, ca);
    cross_vd(dir[0], u0.wb, cb);
    if (c->scale)
        point_refresh_rhs(g, pg, c, lin, ca, cb, 1);
    else
        point_refresh_rhs(g, pg, c, lin, ca, cb, 0);
    if (c->need_b) {
        wvel u;
        gather_arrays(w->vws, g, &u);
        ph__wpointb *pb = w->wptb + (pg - w->wpts);
        for (int32_t k = 0; k < g->glen; k++)
            point_b(&pg[k], dir, &u, pb[k].B);
    }
}

/* The velocities' copy that a group's first visit's dv reads (see
 * point_group; the next visits read point_apply's copies). With
 * pin (the AVX2 and AVX-512 builds, whose vectors fit a register), an
 * empty asm that the compiler must assume changes the copy, so that it
 * stays a value of its own, in registers: not an operation on the numbers.
 * (The baseline build holds a vector in two registers, which the asm's
 * operand cannot name: there, and off x86, the copy is the values. clang,
 * the fuzz build's compiler, refuses the operand in the baseline build
 * even where pin is 0, before dead code is dropped: there too.) */
static inline __attribute__((always_inline)) void copy_vel(const wvel *u, wvel *uc, const int pin) {
    for (int c = 0; c < 3; c++) {
        uc->va[c] = u->va[c];
        uc->wa[c] = u->wa[c];
        uc->vb[c] = u->vb[c];
        uc->wb[c] = u->wb[c];
    }
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__clang__)
    if (pin)
        __asm__(""
                : "+x,m"(uc->va[0]), "+x,m"(uc->va[1]), "+x,m"(uc->va[2]), "+x,m"(uc->wa[0]), "+x,m"(uc->wa[1]),
                  "+x,m"(uc->wa[2]), "+x,m"(uc->vb[0]), "+x,m"(uc->vb[1]), "+x,m"(uc->vb[2]), "+x,m"(uc->wb[0]),
                  "+x,m"(uc->wb[1]), "+x,m"(uc->wb[2]));
#else
    (void)pin;
#endif
}

/* One group: its bodies gathered once, its batches' points visited in
 * order, the bodies scattered. (Unlike the row sweep, interleaving the
 * independent groups of a level gains nothing here: measured with one, two
 * and four groups side by side, docs/profile.md.) The velocities are a
 * chain from visit to visit (dv, the impulses, the update); with 16
 * registers the AVX2 build kept them in memory, each visit's dv waiting on
 * the previous visit's stores. With pin, each visit's dv reads a copy (uc)
 * made in registers (copy_vel before the first visit, point_apply's copy
 * of each velocity after its update in the others), while the update
 * reads and writes u, whose stores and loads are off the chain. */
static inline __attribute__((always_inline)) void point_group(ph__world *w, int32_t b, const ph__wgroup *gr, int box,
                                                              ph__vd zero, const int pin) {
    ph__sbody *sb = w->sbodies;
    ph__wbatch *g = &w->wbatches[b];
    const int aniso = g->aniso; /* (a local: what the loops test is what gather_inert read) */
    wvel u, uc;
    winert in;
    gather(sb, g, &u);
    gather_inert(sb, g, &w->wgin[gr - w->wgroups], aniso, &u, &in);
    /* (aniso and box constants in each loop: no tests per point) */
    if (g->glen == 1) {
        /* One batch (one-point manifolds: a sphere's): the directions read
         * once where they are. */
        const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
        if (aniso)
            point_block(&w->wpts[b], dir, g, &in, 1, box, &u, &u, NULL, zero, pin);
        else
            point_block(&w->wpts[b], dir, g, &in, 0, box, &u, &u, NULL, zero, pin);
    } else {
        /* The directions copied once (vector by vector: a memcpy was a
         * rep movsq): the points' stores could alias gr, which would make
         * every visit load them again. */
        ph__vd dir[3][3];
        for (int i = 0; i < 3; i++)
            for (int c = 0; c < 3; c++)
                dir[i][c] = gr->dir[i][c];
        copy_vel(&u, &uc, pin);
        if (aniso)
            for (int32_t k = 0; k < g->glen; k++) {
                point_block(&w->wpts[b + k], (const ph__vd(*)[3])dir, &g[k], &in, 1, box, &u, &uc, &uc, zero, pin);
            }
        else
            for (int32_t k = 0; k < g->glen; k++) {
                point_block(&w->wpts[b + k], (const ph__vd(*)[3])dir, &g[k], &in, 0, box, &u, &uc, &uc, zero, pin);
            }
    }
    scatter(sb, g, &u);
}

/* The passes below visit the groups whose batches are [b0, b1), the
 * first of them group g0 (all of them, or one worker's share: tasks.c). */
static inline __attribute__((always_inline)) void point_sweep_groups(ph__world *w, const refresh_k *rk, int32_t b0,
                                                                     int32_t b1, int32_t g0, const int box,
                                                                     const int pin) {
    const ph__vd zero = splat(0.0);
    const ph__wgroup *gr = w->wgroups + g0;
    for (int32_t b = b0; b < b1; b += w->wbatches[b].glen, gr++) {
        if (rk) point_refresh_group(w, &w->wbatches[b], &w->wpts[b], gr, rk);
        point_group(w, b, gr, box, zero, pin);
    }
}

/* isa: the build's instruction set (PH_VARIANTS_ISA), a constant: the
 * AVX2 and AVX-512 builds pin the velocities' copy (copy_vel), the
 * baseline build does not. */
static inline __attribute__((always_inline)) void point_sweep_body(const int isa, ph__world *w, const refresh_k *rk,
                                                                   int32_t b0, int32_t b1, int32_t g0) {
    const int box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    const int pin = isa != 0;
    if (box)
        point_sweep_groups(w, rk, b0, b1, g0, 1, pin);
    else
        point_sweep_groups(w, rk, b0, b1, g0, 0, pin);
}

static inline __attribute__((always_inline)) void point_warm_start_body(ph__world *w, int32_t b0, int32_t b1,
                                                                        int32_t g0) {
    ph__sbody *sb = w->sbodies;
    const ph__wgroup *gr = w->wgroups + g0;
    for (int32_t b = b0; b < b1; gr++) {
        const ph__wbatch *g = &w->wbatches[b];
        const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
        wvel u;
        winert in;
        gather(sb, g, &u);
        gather_inert(sb, g, &w->wgin[gr - w->wgroups], g->aniso, &u, &in);
        if (g->aniso)
            for (int32_t k = 0; k < g->glen; k++) {
                const ph__wpoint *p = &w->wpts[b + k];
                point_apply(dir, p, p->lam[0], p->lam[1], p->lam[2], &in, 1, &u, NULL, 0);
            }
        else if (g->glen == 1)
            point_apply(dir, &w->wpts[b], w->wpts[b].lam[0], w->wpts[b].lam[1], w->wpts[b].lam[2], &in, 0, &u, NULL, 0);
        else
            for (int32_t k = 0; k < g->glen; k++) {
                const ph__wpoint *p = &w->wpts[b + k];
                point_apply(dir, p, p->lam[0], p->lam[1], p->lam[2], &in, 0, &u, NULL, 0);
            }
        scatter(sb, g, &u);
        b += g->glen;
    }
}

static inline __attribute__((always_inline)) void point_refresh_body(ph__world *w, double h, int32_t b0, int32_t b1,
                                                                     int32_t g0) {
    refresh_k c = refresh_consts(w, h);
    c.need_b = 1;
    const ph__wgroup *gr = w->wgroups + g0;
    for (int32_t b = b0; b < b1; b += w->wbatches[b].glen, gr++)
        point_refresh_group(w, &w->wbatches[b], &w->wpts[b], gr, &c);
}

/* The relaxation pass on the points (relax_body's arithmetic on the
 * points' relative velocities): the normal's rigid diagonal is K_nn
 * without its eps; the point's three changes applied together. */
static inline __attribute__((always_inline)) void point_relax_points(ph__world *w, ph__wbatch *g, int32_t b,
                                                                     int32_t glen, const ph__vd (*dir)[3],
                                                                     const winert *in, wvel *u, ph__vd hv,
                                                                     const int aniso, const int box) {
    const ph__vd zero = splat(0.0), inf = splat(INFINITY);
    for (int32_t k = 0; k < glen; k++) {
        const ph__wbatch *wb = &g[k];
        ph__wpoint *p = &w->wpts[b + k];
        ph__vd dv[3];
        point_dv(p, u, dv);
        const ph__vd t = relax_target_vd(wb->gap, hv, zero);
        const ph__vd s = p->kd[0] - p->eps[0];
        const ph__vd inv = select_vd(s > splat(1e-300), splat(1.0) / s, zero);
        const ph__vd n0 = clamp_vd(p->lam[0] - (dot3_vd(dir[0], dv) - t) * inv, zero, inf);
        const ph__vd bound = box ? wb->box : wb->mu * n0;
        const ph__vd n1 = clamp_vd(p->lam[1], -bound, bound), n2 = clamp_vd(p->lam[2], -bound, bound);
        const ph__vd d0 = n0 - p->lam[0], d1 = n1 - p->lam[1], d2 = n2 - p->lam[2];
        p->lam[0] = n0;
        p->lam[1] = n1;
        p->lam[2] = n2;
        point_apply(dir, p, d0, d1, d2, in, aniso, u, NULL, 0);
    }
}

static inline __attribute__((always_inline)) void point_relax_groups(ph__world *w, double h, int32_t b0, int32_t b1,
                                                                     int32_t g0, const int box) {
    ph__sbody *sb = w->sbodies;
    const ph__vd hv = splat(h);
    const ph__wgroup *gr = w->wgroups + g0;
    for (int32_t b = b0; b < b1; gr++) {
        ph__wbatch *g = &w->wbatches[b];
        const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
        wvel u;
        winert in;
        gather(sb, g, &u);
        gather_inert(sb, g, &w->wgin[gr - w->wgroups], g->aniso, &u, &in);
        /* (aniso and box constants in each loop, one batch without the
         * loop, as point_group's) */
        if (g->aniso)
            point_relax_points(w, g, b, g->glen, dir, &in, &u, hv, 1, box);
        else if (g->glen == 1)
            point_relax_points(w, g, b, 1, dir, &in, &u, hv, 0, box);
        else
            point_relax_points(w, g, b, g->glen, dir, &in, &u, hv, 0, box);
        scatter(sb, g, &u);
        b += g->glen;
    }
}

static inline __attribute__((always_inline)) void point_relax_body(ph__world *w, double h, int32_t b0, int32_t b1,
                                                                   int32_t g0) {
    if (w->settings.friction_model == PH_FRICTION_SCALED_BOX)
        point_relax_groups(w, h, b0, b1, g0, 1);
    else
        point_relax_groups(w, h, b0, b1, g0, 0);
}

/* merits_body on the points. */
static inline __attribute__((always_inline)) void point_merits_body(const ph__world *w, ph__merit *m) {
    const int box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    const ph__vd zero = splat(0.0);
    const int made = w->wb_made; /* B: 0 zero, 1 in wptb, 2 from vws (ph__wpointb) */
    wmerit acc = {zero, zero, zero, zero, zero};
    const ph__wgroup *gr = w->wgroups;
    for (int32_t bi = 0; bi < w->wbatch_count; gr++) {
        const ph__wbatch *grp = &w->wbatches[bi];
        const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
        const int32_t gl = grp->glen;
        wvel u, us;
        gather(w->sbodies, grp, &u);
        if (made == 2) gather_arrays(w->vws, grp, &us);
        for (int32_t k = 0; k < gl; k++) {
            const ph__wbatch *wb = &grp[k];
            const ph__wpoint *p = &w->wpts[bi + k];
            const ph__vi live = live_lanes(wb);
            ph__vd dv[3], B[3] = {zero, zero, zero};
            if (made == 2) {
                /* (point_refresh_group's B, from the same vws and rhs: the
                 * last substep's refresh left them as they are) */
                point_b(p, dir, &us, B);
            } else if (made == 1) {
                for (int q = 0; q < 3; q++)
                    B[q] = w->wptb[bi + k].B[q];
            }
            point_dv(p, &u, dv);
            const ph__vd bound = box ? wb->box : wb->mu * p->lam[0];
            for (int q = 0; q < 3; q++) {
                const ph__vd l = p->lam[q], d = p->kd[q];
                const ph__vd y = (dot3_vd(dir[q], dv) + p->eps[q] * l) - (q == 0 ? p->rhs : zero);
                merit_add(q == 0, l, y, d, bound, B[q], live, &acc);
            }
        }
        bi += gl;
    }
    merit_sum(&acc, m);
}

/* The points of the native build (fill_body's inputs): the three rows of
 * make_row give eps, 1 / K_ii and the parts of K; K^-1 by its adjugate
 * (K is symmetric positive definite: eps > 0 on its diagonal). */
static inline __attribute__((always_inline)) void point_fill_body(ph__world *w, const ph__contact_ctx *c, int need_b,
                                                                  int32_t b0, int32_t b1, int32_t g0) {
    const ph__vd zero = splat(0.0), a = splat(c->cn.a), omb = splat(1.0 - c->cn.b), hv = splat(c->h);
    const ph__vd wsf = splat(c->wsf);
    const wcoef cn = wcoef_of(&c->cn), cf = wcoef_of(&c->cf);
    ph__wgroup *gr = w->wgroups + g0;
    for (int32_t b = b0; b < b1; gr++) {
        ph__wbatch *g = &w->wbatches[b];
        ph__wpoint *pg = &w->wpts[b];
        const int32_t gl = g->glen;
        /* The next group's point records, which this pass writes whole:
         * asked for a group ahead (a tile's first substep in a large
         * world finds them in memory; grid64000 4 % of the step,
         * docs/profile.md "A seventeenth pass"). */
        if (b + gl < b1) ph__prefetch_write(&w->wpts[b + gl], (size_t)w->wbatches[b + gl].glen * sizeof(ph__wpoint));
        wgroup_in gi;
        group_inputs(w, g, c, need_b, &gi);
        g->aniso = !(gi.sa.all_iso && gi.sb.all_iso);
        if (g->aniso) {
            const double *ia[PH_LANES], *ib[PH_LANES];
            for (int j = 0; j < PH_LANES; j++) {
                ia[j] = &w->sbodies[g->ia[j]].inv_i.m[0][0];
                ib[j] = &w->sbodies[g->ib[j]].inv_i.m[0][0];
            }
            for (int e = 0; e < 9; e++) {
                w->wgin[gr - w->wgroups].ia[e] = lanes_at(ia, e);
                w->wgin[gr - w->wgroups].ib[e] = lanes_at(ib, e);
            }
        }
        memcpy(gr->dir, gi.dir, sizeof gr->dir); /* empty lanes: zero (ph__no_manifold) */
        const ph__vd(*dir)[3] = (const ph__vd(*)[3])gr->dir;
        const ph__vd imab = gi.imab;
        for (int32_t k = 0; k < gl; k++) {
            ph__wbatch *wb = &g[k];
            ph__wpoint *p = &pg[k];
            const ph__vi live = live_lanes(wb);
            ph__vd pt[3], depth, l[3];
            batch_inputs(&gi, wb, k, pt, &depth, l);
            for (int q = 0; q < 3; q++) {
                p->ra[q] = keep(pt[q] - gi.pa[q], live);
                p->rb[q] = keep(pt[q] - gi.pb[q], live);
            }
            ph__vd K[3][3], inv[3], eps[3];
            if (!g->aniso) {
                /* Isotropic bodies (scale c): with orthonormal directions
                 * (r x d_i) . c (r x d_j) = -c (r . d_i)(r . d_j) for i != j
                 * and d_i . d_j = 0; the diagonal as make_row's sum. */
                const ph__vd ia = gi.sa.ii[0], ib = gi.sb.ii[0];
                ph__vd ta[3], tb[3];
                for (int i = 0; i < 3; i++) {
                    ta[i] = dot3_vd(p->ra, dir[i]);
                    tb[i] = dot3_vd(p->rb, dir[i]);
                }
                for (int i = 0; i < 3; i++) {
                    ph__vd ca[3], cb[3];
                    cross_vd(p->ra, dir[i], ca);
                    cross_vd(p->rb, dir[i], cb);
                    const ph__vd ang = ia * dot3_vd(ca, ca) + ib * dot3_vd(cb, cb);
                    const wcoef *cc = i == 0 ? &cn : &cf;
                    ph__vd sd = gi.lin2[i] + ang;
                    const ph__vd sm = cc->pair_mass ? select_vd(gi.lin2[i] > zero, gi.lin2[i], ang) : sd;
                    eps[i] = cc->eps_abs + cc->eps_rel * sm;
                    sd = sd + eps[i];
                    inv[i] = select_vd(sd > splat(1e-300), splat(1.0) / sd, zero);
                    K[i][i] = sd;
                    for (int j = i + 1; j < 3; j++) {
                        K[i][j] = -(ia * (ta[i] * ta[j]) + ib * (tb[i] * tb[j]));
                        K[j][i] = K[i][j];
                    }
                }
            } else {
                ph__wrow r[3];
                for (int i = 0; i < 3; i++)
                    make_row(&r[i], dir[i], p->ra, p->rb, &gi.sa, &gi.sb, gi.lin2[i], i == 0 ? &cn : &cf);
                /* K: the couplings J_i M^-1 J_j^T, eps on the diagonal. */
                for (int i = 0; i < 3; i++) {
                    inv[i] = r[i].inv_diag;
                    eps[i] = r[i].eps;
                    for (int j = i; j < 3; j++) {
                        K[i][j] = (dot3_vd(r[i].lin, r[j].lin) * imab + dot3_vd(r[i].ang_a, r[j].mang_a)) +
                                  dot3_vd(r[i].ang_b, r[j].mang_b);
                        if (i == j) K[i][i] = K[i][i] + r[i].eps;
                        K[j][i] = K[i][j];
                    }
                }
            }
            ph__vd cof[6];
            const ph__vd det = adj3_vd(K, cof);
            const ph__vi inv_ok = (det > zero) & live;
            const ph__vd id = select_vd(inv_ok, splat(1.0) / select_vd(inv_ok, det, splat(1.0)), zero);
            for (int e = 0; e < 6; e++)
                p->kinv[e] = cof[e] * id;
            p->koff[0] = keep(K[0][1], live);
            p->koff[1] = keep(K[0][2], live);
            p->koff[2] = keep(K[1][2], live);
            for (int i = 0; i < 3; i++) {
                p->inv[i] = keep(inv[i], live);
                p->eps[i] = keep(eps[i], live);
                p->kd[i] = keep(K[i][i], live);
            }
            /* Normal: g = -depth; SPOOK when touching, else the gap closed
             * within the step (as fill_body), J v0 from the point. */
            ph__vd dv0[3];
            point_dv(p, &gi.u0, dv0);
            const ph__vd jv0 = dot3_vd(dir[0], dv0);
            const ph__vd gap = -depth;
            wb->gap = keep(gap, live);
            p->rhs = keep(spook_rhs_vd(gap, jv0, a, omb, hv, zero), live);
            if (need_b) { /* (without: nothing written, w->wb_made clear) */
                ph__vd *B = w->wptb[b + k].B;
                point_b(p, dir, &gi.u, B);
                for (int q = 0; q < 3; q++)
                    B[q] = keep(B[q], live);
            }
            const ph__vd ln = keep(l[0] * wsf, live);
            const ph__vd bound = c->box ? gi.boxv : gi.muv * ln;
            p->lam[0] = ln;
            p->lam[1] = keep(clamp_vd(l[1] * wsf, -bound, bound), live);
            p->lam[2] = keep(clamp_vd(l[2] * wsf, -bound, bound), live);
            wb->mu = keep(gi.muv, live);
            wb->box = keep(bound, live);
        }
        b += gl;
    }
}

/* The passes of either mode. */

#endif /* PHYSD_SOLVER_WIDE_POINTS_H */
