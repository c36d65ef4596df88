/*
 * solver_wide_rows.h — row mode of the wide contact solver (solver_wide.c,
 * its only includer): the batches' warm start, the refresh of the later
 * substeps, the PGS sweep over the batches (groups of a level side by
 * side), the merits, and the native build's rows computed PH_LANES points
 * at a time.
 *
 * Static and always inlined, so that each instruction-set build of a pass
 * (PH_VARIANTS, ph_simd.h) compiles them with its own instructions.
 *
 * Invariants: the lanes hold the scalar rows' numbers bit for bit (the
 * normal's right-hand side and the clamp are ph_arith.h's, as
 * contact_rows.c's); an empty lane's rows are all zero and change nothing.
 */
#ifndef PHYSD_SOLVER_WIDE_ROWS_H
#define PHYSD_SOLVER_WIDE_ROWS_H

#include "ph_arith.h"
#include "solver_wide_lanes.h"
#include "world.h"

/* The normal's SPOOK right-hand side (ph_arith.h, shared with
 * contact_rows.c; also solver_wide_points.h's). */
PH__DEFINE_SPOOK_RHS(spook_rhs_vd, ph__vd, select_vd)

static inline __attribute__((always_inline)) void warm_start_body(ph__world *w) {
    ph__sbody *sb = w->sbodies;
    for (int32_t b = 0; b < w->wbatch_count;) {
        const ph__wbatch *g = &w->wbatches[b];
        const ph__wbrow *gr = &w->wrows[b];
        const int32_t gl = g->glen;
        wvel u;
        gather(sb, g, &u);
        for (int32_t k = 0; k < gl; k++)
            for (int q = 0; q < 3; q++)
                row_apply(&gr[k].r[q], gr[k].r[q].lambda, gr[k].ima, gr[k].imb, &u);
        scatter(sb, g, &u);
        b += gl;
    }
}

PH__DEFINE_CLAMP(clamp_vd, ph__vd, select_vd)

/* contact_rows.c's refresh of a point's rows (ph__refresh_contact_rows), lane
 * by lane: the gap moved by h J_n v0 (v0: this substep's velocities before
 * its forces), the SPOOK right-hand side from that gap and J_n v0, and the
 * warm-start impulses (the last substep's, which the batches hold; the
 * bodies get them through step.c's body-by-body warm start). */
typedef struct refresh_k {
    ph__vd a, omb, hv, zero, wsf;
    int scale, box;
    int need_b; /* also the rows' B, from the velocities after the forces (vws) */
} refresh_k;

static inline __attribute__((always_inline)) refresh_k refresh_consts(const ph__world *w, double h) {
    const ph__spook_coef cn = ph__spook(w->settings.contact, h);
    const double f = ph__warm_factor(w);
    /* (With a factor of one the impulses stay as they are: the friction
     * ones are within mu lambda_n already.) */
    return (refresh_k){splat(cn.a),
                       splat(1.0 - cn.b),
                       splat(h),
                       splat(0.0),
                       splat(f),
                       f != 1.0,
                       w->settings.friction_model == PH_FRICTION_SCALED_BOX,
                       0};
}

static inline __attribute__((always_inline)) void refresh_batch(ph__wbatch *wb, ph__wbrow *wr, const wvel *u0,
                                                                const refresh_k *c) {
    const ph__vd jv0 = row_jv(&wr->r[0], u0);
    const ph__vd gap = wb->gap + c->hv * jv0;
    wb->gap = gap;
    wr->r[0].rhs = spook_rhs_vd(gap, jv0, c->a, c->omb, c->hv, c->zero);
    if (c->scale) {
        const ph__vd ln = wr->r[0].lambda * c->wsf;
        wr->r[0].lambda = ln;
        const ph__vd bound = c->box ? wb->box : wb->mu * ln;
        wr->r[1].lambda = clamp_vd(wr->r[1].lambda * c->wsf, -bound, bound);
        wr->r[2].lambda = clamp_vd(wr->r[2].lambda * c->wsf, -bound, bound);
    }
}

/* A group's batches refreshed (the velocities v0 gathered once). */
static inline __attribute__((always_inline)) void refresh_group(const ph__world *w, ph__wbatch *g, ph__wbrow *gr,
                                                                const refresh_k *c) {
    wvel u0;
    gather_arrays(w->vw0, g, &u0);
    for (int32_t k = 0; k < g->glen; k++)
        refresh_batch(&g[k], &gr[k], &u0, c);
    if (c->need_b) {
        /* B with the velocities before the warm start: those after the
         * forces, vws. */
        wvel u;
        gather_arrays(w->vws, g, &u);
        for (int32_t k = 0; k < g->glen; k++) {
            ph__wbrow *wr = &gr[k];
            wr->r[0].B = wr->r[0].rhs - row_jv(&wr->r[0], &u);
            wr->r[1].B = -row_jv(&wr->r[1], &u);
            wr->r[2].B = -row_jv(&wr->r[2], &u);
        }
    }
}

/* The refresh as a pass of its own, with the rows' B (the last substep
 * when the warm start comes after the rows are built: the solver bodies
 * then hold vws). */
static inline __attribute__((always_inline)) void refresh_body(ph__world *w, double h) {
    refresh_k c = refresh_consts(w, h);
    c.need_b = 1;
    for (int32_t b = 0; b < w->wbatch_count; b += w->wbatches[b].glen)
        refresh_group(w, &w->wbatches[b], &w->wrows[b], &c);
}

/* One contact point of every lane: normal, then the two friction rows
 * bounded by mu times the new normal impulse (or the scaled box). */
static inline __attribute__((always_inline)) void point_update(const ph__wbatch *wb, ph__wbrow *wr, wvel *u, int box,
                                                               ph__vd zero, ph__vd inf) {
    row_update(&wr->r[0], zero, inf, wr->ima, wr->imb, u);
    const ph__vd bound = box ? wb->box : wb->mu * wr->r[0].lambda;
    row_update(&wr->r[1], -bound, bound, wr->ima, wr->imb, u);
    row_update(&wr->r[2], -bound, bound, wr->ima, wr->imb, u);
}

/* With rk, each group's batches are refreshed just before they are swept
 * (their right-hand sides do not depend on the sweep, so this is the
 * refresh pass and the sweep, in one pass over the batches). */
/* N groups of one level (disjoint bodies) side by side, so that their
 * dependency chains overlap (one row update is a chain of some sixty
 * cycles); the same numbers as one after the other. N is a constant in
 * each inlined copy, so the groups' velocities stay in registers. */
static inline __attribute__((always_inline)) void
sweep_groups(ph__sbody *sb, ph__wbatch *const *g, ph__wbrow *const *gr, const int N, int box, ph__vd zero, ph__vd inf) {
    wvel u[4];
    int32_t gl[4], kmax = 0;
    for (int i = 0; i < N; i++) {
        gl[i] = g[i]->glen;
        if (gl[i] > kmax) kmax = gl[i];
        gather(sb, g[i], &u[i]);
    }
    for (int32_t k = 0; k < kmax; k++)
        for (int i = 0; i < N; i++)
            if (k < gl[i]) point_update(&g[i][k], &gr[i][k], &u[i], box, zero, inf);
    for (int i = 0; i < N; i++)
        scatter(sb, g[i], &u[i]);
}

/* With rk, each group's batches are refreshed just before they are swept
 * (their right-hand sides do not depend on the sweep, so this is the
 * refresh pass and the sweep, in one pass over the batches). */
static inline __attribute__((always_inline)) void sweep_body(ph__world *w, const refresh_k *rk) {
    ph__sbody *sb = w->sbodies;
    const int box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    const ph__vd zero = splat(0.0), inf = splat(INFINITY);
    const int32_t n = w->wbatch_count;
    for (int32_t b = 0; b < n;) {
        /* The next groups of the same level, up to PH_SWEEP_GROUPS. */
        ph__wbatch *g[PH_SWEEP_GROUPS];
        ph__wbrow *gr[PH_SWEEP_GROUPS];
        int m = 0;
        int32_t e = b;
        do {
            gr[m] = &w->wrows[e];
            g[m++] = &w->wbatches[e];
            e += w->wbatches[e].glen;
        } while (m < PH_SWEEP_GROUPS && e < n && w->wbatches[e].indep);
        if (rk)
            for (int i = 0; i < m; i++)
                refresh_group(w, g[i], gr[i], rk);
#if PH_SWEEP_GROUPS > 2
        if (m == 4)
            sweep_groups(sb, g, gr, 4, box, zero, inf);
        else if (m == 3)
            sweep_groups(sb, g, gr, 3, box, zero, inf);
        else
#endif
            if (m == 2)
            sweep_groups(sb, g, gr, 2, box, zero, inf);
        else
            sweep_groups(sb, g, gr, 1, box, zero, inf);
        b = e;
    }
}

/* The relaxation pass (settings.contact_relax; contact_rows.c's
 * ph__contact_relax_rows lane by lane, the same operations): each point's
 * normal as a rigid row toward the relaxation target of its gap, then its
 * friction impulses clamped to the new bounds, each row's change applied
 * as it is made. */
PH__DEFINE_RELAX_TARGET(relax_target_vd, ph__vd, select_vd)

static inline __attribute__((always_inline)) ph__vd rigid_diag_vd(const ph__wrow *r, ph__vd ima, ph__vd imb) {
    const ph__vd lin = ((r->lin[0] * r->lin[0] + r->lin[1] * r->lin[1]) + r->lin[2] * r->lin[2]) * (ima + imb);
    const ph__vd ang = ((r->ang_a[0] * r->mang_a[0] + r->ang_a[1] * r->mang_a[1]) + r->ang_a[2] * r->mang_a[2]) +
                       ((r->ang_b[0] * r->mang_b[0] + r->ang_b[1] * r->mang_b[1]) + r->ang_b[2] * r->mang_b[2]);
    return lin + ang;
}

static inline __attribute__((always_inline)) void relax_batch(const ph__wbatch *wb, ph__wbrow *wr, wvel *u, int box,
                                                              ph__vd hv, ph__vd zero, ph__vd inf) {
    ph__wrow *r = wr->r;
    const ph__vd t = relax_target_vd(wb->gap, hv, zero);
    const ph__vd s = rigid_diag_vd(&r[0], wr->ima, wr->imb);
    const ph__vd inv = select_vd(s > splat(1e-300), splat(1.0) / s, zero);
    ph__vd nl = clamp_vd(r[0].lambda - (row_jv(&r[0], u) - t) * inv, zero, inf);
    ph__vd dl = nl - r[0].lambda;
    r[0].lambda = nl;
    row_apply(&r[0], dl, wr->ima, wr->imb, u);
    const ph__vd bound = box ? wb->box : wb->mu * r[0].lambda;
    for (int q = 1; q <= 2; q++) {
        nl = clamp_vd(r[q].lambda, -bound, bound);
        dl = nl - r[q].lambda;
        r[q].lambda = nl;
        row_apply(&r[q], dl, wr->ima, wr->imb, u);
    }
}

static inline __attribute__((always_inline)) void relax_body(ph__world *w, double h) {
    ph__sbody *sb = w->sbodies;
    const int box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    const ph__vd zero = splat(0.0), inf = splat(INFINITY), hv = splat(h);
    for (int32_t b = 0; b < w->wbatch_count;) {
        const ph__wbatch *g = &w->wbatches[b];
        ph__wbrow *gr = &w->wrows[b];
        const int32_t gl = g->glen;
        wvel u;
        gather(sb, g, &u);
        for (int32_t k = 0; k < gl; k++)
            relax_batch(&g[k], &gr[k], &u, box, hv, zero, inf);
        scatter(sb, g, &u);
        b += gl;
    }
}

static inline __attribute__((always_inline)) ph__vd vsqrt(ph__vd x) {
    for (int j = 0; j < PH_LANES; j++)
        x[j] = __builtin_sqrt(x[j]);
    return x;
}

/* fb(a, b) = sqrt(a^2 + b^2) - a - b, lane by lane (merit.c's ph__fb). */
static inline __attribute__((always_inline)) ph__vd vfb(ph__vd a, ph__vd b) { return vsqrt(a * a + b * b) - a - b; }

static inline __attribute__((always_inline)) ph__vd vmax(ph__vd a, ph__vd b) { return select_vd(a < b, b, a); }
static inline __attribute__((always_inline)) ph__vd vmin(ph__vd a, ph__vd b) { return select_vd(a < b, a, b); }

static inline __attribute__((always_inline)) double hsum(ph__vd v) {
    double s = 0;
    for (int j = 0; j < PH_LANES; j++)
        s += v[j];
    return s;
}

/* The merit terms of one row of every lane (ph__merit_row): a normal row
 * (lambda >= 0) or a friction row within -+bound, empty lanes masked. */
typedef struct wmerit {
    ph__vd fis, mm, le, r2, b2;
} wmerit;

static inline __attribute__((always_inline)) void merit_add(int normal, ph__vd l, ph__vd y, ph__vd d, ph__vd bound,
                                                            ph__vd B, ph__vi live, wmerit *acc) {
    const ph__vd zero = splat(0.0);
    ph__vd phi, c, g;
    if (normal) {
        phi = vfb(l, y);
        c = vmax(l - y, zero);
        g = vmax(l - y / d, zero);
    } else {
        const ph__vd lo = -bound, hi = bound;
        phi = vfb(l - lo, vfb(hi - l, -y));
        c = clamp_vd(l - y, lo, hi);
        g = clamp_vd(l - y / d, lo, hi);
    }
    const ph__vd e = select_vd(d > zero, d * (l - g), y);
    /* The part of y the conditions forbid (ph__merit_row): all of it for
     * a row inside its bounds, y < 0 at the lower bound, y > 0 at the
     * upper, nothing when both bounds are zero. */
    ph__vd r = select_vd(l <= (normal ? zero : -bound), vmin(y, zero), y);
    if (!normal) r = select_vd(l >= bound, vmax(r, zero), r);
    acc->fis += select_vd(live, phi * phi, zero);
    acc->mm += select_vd(live, (l - c) * (l - c), zero);
    acc->le += select_vd(live, e * e, zero);
    acc->r2 += select_vd(live, r * r, zero);
    acc->b2 += select_vd(live, B * B, zero);
}

static inline __attribute__((always_inline)) void merit_sum(const wmerit *acc, ph__merit *m) {
    m->fischer += hsum(acc->fis);
    m->minmap += hsum(acc->mm);
    m->lcp_error += hsum(acc->le);
    m->res2 += hsum(acc->r2);
    m->b2 += hsum(acc->b2);
}

/* solver.c's merits() on the batches' rows, four lanes at a time: the
 * terms of ph__merit_row for a normal row (lambda >= 0) and for a friction
 * row (its box: -+ mu lambda_n or the scaled box), summed per lane, empty
 * lanes masked out. (Sums in another order than the scalar loop's: the
 * merits agree to rounding.) */
static inline __attribute__((always_inline)) void merits_body(const ph__world *w, ph__merit *m) {
    const int box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    const ph__vd zero = splat(0.0);
    wmerit acc = {zero, zero, zero, zero, zero};
    for (int32_t bi = 0; bi < w->wbatch_count;) {
        const ph__wbatch *grp = &w->wbatches[bi];
        const ph__wbrow *wr = &w->wrows[bi];
        const int32_t gl = grp->glen;
        wvel u;
        gather(w->sbodies, grp, &u); /* a group's batches share their bodies */
        for (const ph__wbatch *wb = grp; wb < grp + gl; wb++, wr++) {
            ph__vd pt = zero; /* every lane is written below; GCC -O2 cannot tell */
            for (int j = 0; j < PH_LANES; j++)
                pt[j] = (double)wb->point[j];
            const ph__vi live = pt >= zero;
            const ph__vd bound = box ? wb->box : wb->mu * wr->r[0].lambda;
            for (int q = 0; q < 3; q++) {
                const ph__wrow *r = &wr->r[q];
                const ph__vd l = r->lambda;
                const ph__vd y = row_jv(r, &u) + r->eps * l - r->rhs;
                const ph__vd d =
                    (r->lin[0] * r->lin[0] + r->lin[1] * r->lin[1] + r->lin[2] * r->lin[2]) * (wr->ima + wr->imb) +
                    (r->ang_a[0] * r->mang_a[0] + r->ang_a[1] * r->mang_a[1] + r->ang_a[2] * r->mang_a[2]) +
                    (r->ang_b[0] * r->mang_b[0] + r->ang_b[1] * r->mang_b[1] + r->ang_b[2] * r->mang_b[2]) + r->eps;
                merit_add(q == 0, l, y, d, bound, r->B, live, &acc);
            }
        }
        bi += gl;
    }
    merit_sum(&acc, m);
}

/* ---- The native build's numbers: contact_rows.c's ph__contact_point_rows
 * (set_linear_row, ph__finish_row, the SPOOK right-hand side, the warm
 * start) on the PH_LANES points of a batch at once, written straight into
 * the batch. Operation for operation the scalar arithmetic, so the lanes
 * hold the scalar rows' numbers bit for bit; an empty lane is computed
 * from zeros and the ground and then masked to zero (as clear_lane). */

/* Lane j from p[j][i]. */
static inline __attribute__((always_inline)) ph__vd lanes_at(const double *const *p, int i) {
    ph__vd v;
    for (int j = 0; j < PH_LANES; j++)
        v[j] = p[j][i];
    return v;
}

/* Point, then depth, of the points mp[j] (ph__mpoint starts point.x,
 * point.y, point.z, depth): with four lanes one load and a transpose each. */
static inline __attribute__((always_inline)) void point_lanes(const ph__mpoint *const *mp, ph__vd *p, ph__vd *depth) {
#if PH_LANES == 4
    _Static_assert(offsetof(ph__mpoint, depth) == 3 * sizeof(double), "ph__mpoint must start point, depth");
    transpose4(load4(&mp[0]->point.x), load4(&mp[1]->point.x), load4(&mp[2]->point.x), load4(&mp[3]->point.x), &p[0],
               &p[1], &p[2], depth);
#else
    const double *pp[PH_LANES], *pd[PH_LANES];
    for (int j = 0; j < PH_LANES; j++) {
        pp[j] = &mp[j]->point.x;
        pd[j] = &mp[j]->depth;
    }
    for (int q = 0; q < 3; q++)
        p[q] = lanes_at(pp, q);
    *depth = lanes_at(pd, 0);
#endif
}

/* All ones in the lanes of a batch that hold a point, else zero. */
static inline __attribute__((always_inline)) ph__vi live_lanes(const ph__wbatch *wb) {
    typedef int32_t ph__vi32 __attribute__((vector_size(PH_LANES * 4)));
    ph__vi32 p;
    memcpy(&p, wb->point, sizeof p);
    return __builtin_convertvector(p, ph__vi) >= (ph__vi){0};
}

/* x where live, +0 elsewhere. */
static inline __attribute__((always_inline)) ph__vd keep(ph__vd x, ph__vi live) { return (ph__vd)((ph__vi)x & live); }

/* One side's bodies, lane by lane: inverse mass and world inverse inertia
 * (iso: the scale ii[0] alone is exact, see ph__finish_row). */
typedef struct wside {
    ph__vd im, ii[9];
    ph__vi iso;
    int all_iso;
} wside;

static inline __attribute__((always_inline)) void side_gather(const ph__sbody *sb, const int32_t *idx, wside *s) {
    const double *pm[PH_LANES], *pi[PH_LANES];
    long long iso[PH_LANES];
    s->all_iso = 1;
    for (int j = 0; j < PH_LANES; j++) {
        const ph__sbody *b = &sb[idx[j]];
        pm[j] = &b->inv_mass;
        pi[j] = &b->inv_i.m[0][0];
        iso[j] = b->iso ? -1 : 0;
        s->all_iso &= b->iso != 0;
    }
    /* The mask is read only when some lane is not isotropic. */
    s->iso = (ph__vi){0};
    if (!s->all_iso) memcpy(&s->iso, iso, sizeof iso);
    s->im = lanes_at(pm, 0);
    for (int e = 0; e < 9; e++)
        s->ii[e] = e == 0 || !s->all_iso ? lanes_at(pi, e) : splat(0.0);
}

/* M^-1 of one side times ang: ph__finish_row's ph_scale for an isotropic
 * body, ph_mat3_mulv's order for the others. */
static inline __attribute__((always_inline)) void side_mul(const wside *s, const ph__vd *ang, ph__vd *out) {
    for (int c = 0; c < 3; c++)
        out[c] = ang[c] * s->ii[0];
    if (s->all_iso) return;
    for (int r = 0; r < 3; r++) {
        const ph__vd m = s->ii[3 * r] * ang[0] + s->ii[3 * r + 1] * ang[1] + s->ii[3 * r + 2] * ang[2];
        out[r] = select_vd(s->iso, out[r], m);
    }
}

/* A row's regularization coefficients (ph__spook_coef), as vectors made
 * once per pass. */
typedef struct wcoef {
    ph__vd eps_abs, eps_rel;
    int pair_mass;
} wcoef;

static inline __attribute__((always_inline)) wcoef wcoef_of(const ph__spook_coef *c) {
    const wcoef v = {splat(c->eps_abs), splat(c->eps_rel), c->pair_mass};
    return v;
}

/* A row along d at arms ra, rb (set_linear_row, then ph__finish_row with
 * coefficients c; lin2 is ph_len2(d) * (ima + imb)). */
static inline __attribute__((always_inline)) void make_row(ph__wrow *r, const ph__vd *d, const ph__vd *ra,
                                                           const ph__vd *rb, const wside *sa, const wside *sb,
                                                           ph__vd lin2, const wcoef *c) {
    for (int q = 0; q < 3; q++)
        r->lin[q] = d[q];
    r->ang_a[0] = -(ra[1] * d[2] - ra[2] * d[1]);
    r->ang_a[1] = -(ra[2] * d[0] - ra[0] * d[2]);
    r->ang_a[2] = -(ra[0] * d[1] - ra[1] * d[0]);
    r->ang_b[0] = rb[1] * d[2] - rb[2] * d[1];
    r->ang_b[1] = rb[2] * d[0] - rb[0] * d[2];
    r->ang_b[2] = rb[0] * d[1] - rb[1] * d[0];
    side_mul(sa, r->ang_a, r->mang_a);
    side_mul(sb, r->ang_b, r->mang_b);
    const ph__vd ang = (r->ang_a[0] * r->mang_a[0] + r->ang_a[1] * r->mang_a[1] + r->ang_a[2] * r->mang_a[2]) +
                       (r->ang_b[0] * r->mang_b[0] + r->ang_b[1] * r->mang_b[1] + r->ang_b[2] * r->mang_b[2]);
    ph__vd s = lin2 + ang;
    const ph__vd zero = splat(0.0);
    const ph__vd sm = c->pair_mass ? select_vd(lin2 > zero, lin2, ang) : s;
    r->eps = c->eps_abs + c->eps_rel * sm;
    s = s + r->eps;
    r->inv_diag = select_vd(s > splat(1e-300), splat(1.0) / s, zero);
}

/* Row r into the batch's row d, empty lanes zero. */
static inline __attribute__((always_inline)) void put_row(ph__wrow *d, const ph__wrow *r, ph__vi live) {
    for (int c = 0; c < 3; c++) {
        d->lin[c] = keep(r->lin[c], live);
        d->ang_a[c] = keep(r->ang_a[c], live);
        d->ang_b[c] = keep(r->ang_b[c], live);
        d->mang_a[c] = keep(r->mang_a[c], live);
        d->mang_b[c] = keep(r->mang_b[c], live);
    }
    d->inv_diag = keep(r->inv_diag, live);
    d->eps = keep(r->eps, live);
    d->rhs = keep(r->rhs, live);
    d->lambda = keep(r->lambda, live);
    d->B = keep(r->B, live);
}

/* What a group's batches share, for the native builds (fill_body and
 * point_fill_body): every lane with a manifold is filled in batch 0; an
 * empty lane reads zeros and the ground. */
typedef struct wgroup_in {
    const ph__contact_manifold *m[PH_LANES];
    wside sa, sb;
    ph__vd dir[3][3], pa[3], pb[3], lin2[3], imab, muv, boxv;
    wvel u0, u; /* W for the right-hand sides; the current velocities for B (with need_b) */
} wgroup_in;

static const ph__contact_manifold ph__no_manifold; /* the inputs of empty lanes: zeros */

static inline __attribute__((always_inline)) void group_inputs(const ph__world *w, const ph__wbatch *g,
                                                               const ph__contact_ctx *c, int need_b, wgroup_in *gi) {
    static const double zeros[3] = {0, 0, 0};
    const double *pn[PH_LANES], *pt1[PH_LANES], *pt2[PH_LANES], *ppa[PH_LANES], *ppb[PH_LANES], *pmu[PH_LANES];
    double boxb[PH_LANES];
    side_gather(w->sbodies, g->ia, &gi->sa);
    side_gather(w->sbodies, g->ib, &gi->sb);
    for (int j = 0; j < PH_LANES; j++) {
        const int on = g->point[j] >= 0;
        const ph__contact_manifold *cm = on ? &w->manifolds[g->pm[j] >> 2] : &ph__no_manifold;
        gi->m[j] = cm;
        pn[j] = &cm->m.normal.x;
        pt1[j] = &cm->t1.x;
        pt2[j] = &cm->t2.x;
        ppa[j] = on ? &w->bodies[cm->ba].p.x : zeros;
        ppb[j] = on ? &w->bodies[cm->bb].p.x : zeros;
        pmu[j] = &cm->friction;
        boxb[j] = 0;
        if (on && c->box) {
            /* ph__contact_point_rows' scaled box bound. */
            const double ima = gi->sa.im[j], imb = gi->sb.im[j];
            const double mred = (ima + imb) > 0 ? 1.0 / (ima + imb) : 0;
            boxb[j] = cm->friction * mred * c->g * c->h / cm->m.count;
        }
    }
    for (int q = 0; q < 3; q++) {
        gi->dir[0][q] = lanes_at(pn, q);
        gi->dir[1][q] = lanes_at(pt1, q);
        gi->dir[2][q] = lanes_at(pt2, q);
        gi->pa[q] = lanes_at(ppa, q);
        gi->pb[q] = lanes_at(ppb, q);
    }
    gi->imab = gi->sa.im + gi->sb.im;
    for (int q = 0; q < 3; q++)
        gi->lin2[q] =
            (gi->dir[q][0] * gi->dir[q][0] + gi->dir[q][1] * gi->dir[q][1] + gi->dir[q][2] * gi->dir[q][2]) * gi->imab;
    gi->muv = lanes_at(pmu, 0);
    gi->boxv = splat(0.0);
    if (c->box) memcpy(&gi->boxv, boxb, sizeof gi->boxv);
    gather_arrays(w->vw0, g, &gi->u0);
    /* (The copy otherwise keeps GCC from warning that u may be unset.) */
    if (need_b)
        gather(w->sbodies, g, &gi->u);
    else
        gi->u = gi->u0;
}

/* Point k of a batch's lanes: position, depth and the impulses last step
 * left (ln, lt1, lt2). */
static inline __attribute__((always_inline)) void batch_inputs(const wgroup_in *gi, const ph__wbatch *wb, int32_t k,
                                                               ph__vd *p, ph__vd *depth, ph__vd *l) {
    const ph__mpoint *mp[PH_LANES];
    const double *pln[PH_LANES], *plt1[PH_LANES], *plt2[PH_LANES];
    for (int j = 0; j < PH_LANES; j++) {
        const ph__contact_manifold *cm = wb->point[j] >= 0 ? gi->m[j] : &ph__no_manifold;
        mp[j] = &cm->m.pts[k];
        pln[j] = &cm->ln[k];
        plt1[j] = &cm->lt1[k];
        plt2[j] = &cm->lt2[k];
    }
    point_lanes(mp, p, depth);
    l[0] = lanes_at(pln, 0);
    l[1] = lanes_at(plt1, 0);
    l[2] = lanes_at(plt2, 0);
}

static inline __attribute__((always_inline)) void fill_body(ph__world *w, const ph__contact_ctx *c, int need_b) {
    const ph__vd zero = splat(0.0), a = splat(c->cn.a), omb = splat(1.0 - c->cn.b), hv = splat(c->h);
    const ph__vd wsf = splat(c->wsf);
    const wcoef cn = wcoef_of(&c->cn), cf = wcoef_of(&c->cf);
    for (int32_t b = 0; b < w->wbatch_count;) {
        ph__wbatch *g = &w->wbatches[b];
        ph__wbrow *gr = &w->wrows[b];
        const int32_t gl = g->glen;
        wgroup_in gi;
        group_inputs(w, g, c, need_b, &gi);
        for (int32_t k = 0; k < gl; k++) {
            ph__wbatch *wb = &g[k];
            ph__wbrow *wr = &gr[k];
            const ph__vi live = live_lanes(wb);
            ph__vd p[3], depth, l[3], ra[3], rb[3];
            batch_inputs(&gi, wb, k, p, &depth, l);
            for (int q = 0; q < 3; q++) {
                ra[q] = p[q] - gi.pa[q];
                rb[q] = p[q] - gi.pb[q];
            }
            ph__wrow r;
            /* Normal: g = -depth; SPOOK when touching, else the gap closed
             * within the step. */
            make_row(&r, gi.dir[0], ra, rb, &gi.sa, &gi.sb, gi.lin2[0], &cn);
            const ph__vd gap = -depth;
            wb->gap = keep(gap, live); /* moved along by the later substeps */
            r.rhs = spook_rhs_vd(gap, row_jv(&r, &gi.u0), a, omb, hv, zero);
            r.B = need_b ? r.rhs - row_jv(&r, &gi.u) : zero;
            r.lambda = l[0] * wsf;
            const ph__vd bound = c->box ? gi.boxv : gi.muv * r.lambda;
            put_row(&wr->r[0], &r, live);
            for (int d = 0; d < 2; d++) {
                make_row(&r, gi.dir[1 + d], ra, rb, &gi.sa, &gi.sb, gi.lin2[1 + d], &cf);
                r.rhs = zero;
                r.B = need_b ? -row_jv(&r, &gi.u) : zero;
                r.lambda = clamp_vd(l[1 + d] * wsf, -bound, bound);
                put_row(&wr->r[1 + d], &r, live);
            }
            wr->ima = keep(gi.sa.im, live);
            wr->imb = keep(gi.sb.im, live);
            wb->mu = keep(gi.muv, live);
            wb->box = keep(bound, live);
        }
        b += gl;
    }
}

#endif /* PHYSD_SOLVER_WIDE_ROWS_H */
