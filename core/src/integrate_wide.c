/*
 * integrate_wide.c — step.c's integration of the solver bodies, four
 * bodies at a time.
 *
 * Normal path: ph__wide_integrate walks the solver bodies in runs of four
 * consecutive slots. A run whose four bodies need nothing but the common
 * case — no next substep, or a next substep whose forces are all a
 * velocity increment (ph__sforce.plain) on isotropic bodies — is loaded as
 * 4 x 4 blocks (two 32-byte loads per record, ph_simd.h's transpose),
 * computed one vector per component with exactly the operations of step.c's
 * ph__integrate_body (symplectic Euler, q += h/2 (w, 0) q written once for
 * both in ph_arith.h, the nearly-unit renormalization; the velocity change
 * of the solve, the next substep's forces and warm start), and stored back
 * the same way. Every other body, and the last slots that do not fill a
 * run, go through ph__integrate_body itself.
 *
 * Failure modes: none (no allocation).
 *
 * Invariants: the results are those of ph__integrate_body bit for bit in
 * every build (no fused multiply-adds, the same order of operations); a
 * lane whose quaternion is not nearly unit is renormalized by
 * ph_quat_normalize, as the scalar code does.
 */
#include <stddef.h>

#include "body.h"
#include "ph_arith.h"
#include "rows.h"
#include "solver_wide.h"
#include "step.h"
#include "world.h"
#include "ph_simd.h"

_Static_assert(offsetof(ph__sbody, w) == 3 * sizeof(double) && offsetof(ph__sbody, inv_mass) == 6 * sizeof(double),
               "ph__sbody must start v, w, inv_mass, inv_i");
_Static_assert(offsetof(ph__body, q) == offsetof(ph__body, p) + 3 * sizeof(double) &&
                   offsetof(ph__body, v) == offsetof(ph__body, p) + 7 * sizeof(double) &&
                   offsetof(ph__body, w) == offsetof(ph__body, p) + 10 * sizeof(double),
               "ph__body must hold p, q, v, w one after the other");
_Static_assert(sizeof(ph__vw) == 8 * sizeof(double) && offsetof(ph__sforce, dv) == 0 &&
                   sizeof(ph__sforce) == 4 * sizeof(double),
               "records of 8 and 4 doubles");

/* The orientation step of ph__integrate_body (ph_arith.h). */
PH__DEFINE_QUAT_STEP(quat_step4, ph__v4d)

/* Lane j's record: record j of the four consecutive ones at p, or with sl
 * (a gathered four, integrate4) record sl[j] of the array p. */
#define AT(j) (sl ? sl[j] : (j))

/* Four records of `stride` doubles starting (x y z a b c k0 k1 ...) as one
 * vector per field: v, w and the two k columns. */
static inline __attribute__((always_inline)) void load_vw(const double *p, const int32_t *sl, size_t stride, ph__v4d *v,
                                                          ph__v4d *w, ph__v4d *k) {
    transpose4(load4(p + AT(0) * stride), load4(p + AT(1) * stride), load4(p + AT(2) * stride),
               load4(p + AT(3) * stride), &v[0], &v[1], &v[2], &w[0]);
    transpose4(load4(p + AT(0) * stride + 4), load4(p + AT(1) * stride + 4), load4(p + AT(2) * stride + 4),
               load4(p + AT(3) * stride + 4), &w[1], &w[2], &k[0], &k[1]);
}

/* The same back into records of 8 doubles (ph__vw: the padding is zeroed). */
static inline __attribute__((always_inline)) void store_vw(ph__vw *a, const int32_t *sl, const ph__v4d *v,
                                                           const ph__v4d *w) {
    ph__v4d r[4];
    transpose4(v[0], v[1], v[2], w[0], &r[0], &r[1], &r[2], &r[3]);
    for (int j = 0; j < 4; j++)
        store4(&a[AT(j)].v.x, r[j]);
    const ph__v4d z = splat4(0.0);
    transpose4(w[1], w[2], z, z, &r[0], &r[1], &r[2], &r[3]);
    for (int j = 0; j < 4; j++)
        store4(&a[AT(j)].w.y, r[j]);
}

/* Bodies s .. s + 3, or with sl (s = 0) the solver bodies sl[0 .. 3]: any
 * four, one of them in several lanes if need be (each lane's records are
 * all read before any is written, so a repeated lane writes the same
 * numbers twice). See above; next: 0, 1 or 2 as in step.c. */
static inline __attribute__((always_inline)) void integrate4(ph__world *w, const int32_t *sl0, int32_t s, double h,
                                                             int dv, int next, int warm, double wf) {
    /* (sl0's entries in locals: the stores below might alias them.) */
    int32_t lane[4];
    const int32_t *sl = NULL;
    if (sl0) {
        for (int j = 0; j < 4; j++)
            lane[j] = sl0[j];
        sl = lane;
    }
    ph__sbody *sb = &w->sbodies[s];
    const size_t sbs = sizeof(ph__sbody) / sizeof(double);
    double *pb[4];
    for (int j = 0; j < 4; j++)
        pb[j] = &w->bodies[w->sbody_body[s + AT(j)]].p.x;
    ph__v4d v[3], av[3], k[2];
    double *ps = &sb->v.x;
    load_vw(ps, sl, sbs, v, av, k); /* k: inv_mass and inv_i[0][0], stored back as loaded */
    /* (warm implies dv: next > 0 only when dv, step.c) */
    ph__v4d dcv[3] = {splat4(0.0), splat4(0.0), splat4(0.0)}, dcw[3] = {splat4(0.0), splat4(0.0), splat4(0.0)};
    if (dv) {
        ph__v4d sv[3], sw[3], pad[2];
        load_vw(&w->vws[s].v.x, sl, 8, sv, sw, pad);
        for (int c = 0; c < 3; c++) {
            dcv[c] = v[c] - sv[c];
            dcw[c] = av[c] - sw[c];
        }
        /* (With next = 2 nothing reads them: the next substep's warm start
         * is applied below, and there are no joint rows for contact_dv.) */
        if (next != 2) store_vw(&w->dvc[s], sl, dcv, dcw);
    }
    /* Position and orientation. */
    ph__v4d p[3], q[4], old_vx;
    transpose4(load4(pb[0]), load4(pb[1]), load4(pb[2]), load4(pb[3]), &p[0], &p[1], &p[2], &q[0]);
    transpose4(load4(pb[0] + 4), load4(pb[1] + 4), load4(pb[2] + 4), load4(pb[3] + 4), &q[1], &q[2], &q[3], &old_vx);
    const ph__v4d hv = splat4(h), hh = splat4(0.5 * h), zero = splat4(0.0);
    for (int c = 0; c < 3; c++)
        p[c] = p[c] + hv * v[c];
    /* q + h/2 (w, 0) q, as ph__integrate_body (ph_arith.h). */
    ph__v4d n[4];
    quat_step4(av[0], av[1], av[2], zero, q, hh, n);
    const ph__v4d l2 = ((n[0] * n[0] + n[1] * n[1]) + n[2] * n[2]) + n[3] * n[3];
    ph__vi4 near = (l2 > splat4(1.0 - 1e-8)) & (l2 < splat4(1.0 + 1e-8));
    near &= __builtin_shuffle(near, (ph__vi4){2, 3, 0, 1});
    near &= __builtin_shuffle(near, (ph__vi4){1, 0, 3, 2});
    if (near[0] != 0) { /* (every lane) */
        const ph__v4d sc = splat4(1.5) - splat4(0.5) * l2;
        for (int c = 0; c < 4; c++)
            n[c] = n[c] * sc;
    } else {
        for (int j = 0; j < 4; j++) {
            const ph_quat r = ph_quat_normalize((ph_quat){n[0][j], n[1][j], n[2][j], n[3][j]});
            n[0][j] = r.x;
            n[1][j] = r.y;
            n[2][j] = r.z;
            n[3][j] = r.w;
        }
    }
    ph__v4d r[4];
    transpose4(p[0], p[1], p[2], n[0], &r[0], &r[1], &r[2], &r[3]);
    for (int j = 0; j < 4; j++)
        store4(pb[j], r[j]);
    /* The bodies' velocities only at the end of the step (next = 0 in its
     * last substep): until then the solver bodies carry them, and nothing
     * reads the bodies' (the broadphase and islands run in the collision's
     * substep, impacts and joints use the solver bodies). */
    transpose4(n[1], n[2], n[3], next ? old_vx : v[0], &r[0], &r[1], &r[2], &r[3]);
    for (int j = 0; j < 4; j++)
        store4(pb[j] + 4, r[j]);
    if (!next) {
        transpose4(v[1], v[2], av[0], av[1], &r[0], &r[1], &r[2], &r[3]);
        for (int j = 0; j < 4; j++) {
            store4(pb[j] + 8, r[j]);
            pb[j][12] = av[2][j];
        }
        return;
    }
    /* The next substep's start (step.c's force_body on plain isotropic
     * bodies): vw0, the forces' increment (vws), the warm start. */
    store_vw(&w->vw0[s], sl, v, av);
    ph__v4d f[3], fk;
    const double *pf = &w->sforce[s].dv.x;
    transpose4(load4(pf + 4 * AT(0)), load4(pf + 4 * AT(1)), load4(pf + 4 * AT(2)), load4(pf + 4 * AT(3)), &f[0], &f[1],
               &f[2], &fk);
    (void)fk;
    ph__v4d nv[3], nw[3];
    for (int c = 0; c < 3; c++)
        nv[c] = v[c] + f[c];
    store_vw(&w->vws[s], sl, nv, av);
    const ph__v4d wfv = splat4(wf);
    for (int c = 0; c < 3; c++) {
        nw[c] = av[c];
        if (warm && wf == 1.0) { /* (x * 1 is x: the default factor without its products) */
            nv[c] = nv[c] + dcv[c];
            nw[c] = av[c] + dcw[c];
        } else if (warm) {
            nv[c] = nv[c] + wfv * dcv[c];
            nw[c] = av[c] + wfv * dcw[c];
        }
    }
    transpose4(nv[0], nv[1], nv[2], nw[0], &r[0], &r[1], &r[2], &r[3]);
    for (int j = 0; j < 4; j++)
        store4(ps + AT(j) * sbs, r[j]);
    transpose4(nw[1], nw[2], k[0], k[1], &r[0], &r[1], &r[2], &r[3]);
    for (int j = 0; j < 4; j++)
        store4(ps + AT(j) * sbs + 4, r[j]);
}

static inline __attribute__((always_inline)) void integrate_body(ph__world *w, int32_t s0, int32_t s1, double h, int dv,
                                                                 int next, double wf) {
    const int warm = next == 2 && wf != 0;
    int32_t s = s0;
    for (; s + 4 <= s1; s += 4) {
        const ph__sforce *f = &w->sforce[s];
        const ph__sbody *b = &w->sbodies[s];
        const int ok = !next || ((f[0].plain & f[1].plain) & (f[2].plain & f[3].plain) & (b[0].iso & b[1].iso) &
                                 (b[2].iso & b[3].iso));
        if (ok) {
            integrate4(w, NULL, s, h, dv, next, warm, wf);
        } else {
            for (int j = 0; j < 4; j++)
                ph__integrate_body(w, s + j, h, dv, next, wf);
        }
    }
    for (; s < s1; s++)
        ph__integrate_body(w, s, h, dv, next, wf);
}

PH_VARIANTS(integrate, (ph__world * w, int32_t s0, int32_t s1, double h, int dv, int next, double wf),
            (w, s0, s1, h, dv, next, wf))

/* The same over the solver bodies idx[0, n) (ascending; a tile's, step.c):
 * four at a time where four consecutive entries are four consecutive solver
 * bodies, plain and isotropic. */
static inline __attribute__((always_inline)) void integrate_list_body(ph__world *w, const int32_t *idx, int32_t n,
                                                                      double h, int dv, int next, double wf) {
    const int warm = next == 2 && wf != 0;
    int32_t i = 0;
    while (i < n) {
        const int32_t s = idx[i];
        int ok = i + 4 <= n && idx[i + 3] == s + 3;
        for (int j = 0; j < 4 && ok && next; j++)
            ok &= w->sforce[s + j].plain & w->sbodies[s + j].iso;
        if (ok) {
            integrate4(w, NULL, s, h, dv, next, warm, wf);
            i += 4;
        } else {
            ph__integrate_body(w, s, h, dv, next, wf);
            i++;
        }
    }
}

PH_VARIANTS(integrate_list, (ph__world * w, const int32_t *idx, int32_t n, double h, int dv, int next, double wf),
            (w, idx, n, h, dv, next, wf))

/* The same over the solver bodies idx[0, n) in any order (a claimed
 * piece's, solver_wide.c's fused integration): every four plain isotropic
 * bodies gathered into the lanes, whichever they are; the others one by
 * one; the last one to three that do not fill the lanes wait in g for the
 * next call (ph__wide_integrate_flush). Each body's numbers are those of
 * ph__integrate_body, as in a run of four. */
static inline __attribute__((always_inline)) void integrate_gather_body(ph__world *w, ph__igather *g,
                                                                        const int32_t *idx, int32_t n, double h, int dv,
                                                                        int next, double wf) {
    const int warm = next == 2 && wf != 0;
    int k = g->n;
    int32_t sl[4] = {g->sl[0], g->sl[1], g->sl[2], g->sl[3]};
    for (int32_t i = 0; i < n; i++) {
        const int32_t s = idx[i];
        if (next && !(w->sforce[s].plain & w->sbodies[s].iso)) {
            ph__integrate_body(w, s, h, dv, next, wf);
            continue;
        }
        sl[k++] = s;
        if (k == 4) {
            integrate4(w, sl, 0, h, dv, next, warm, wf);
            k = 0;
        }
    }
    for (int j = 0; j < 4; j++)
        g->sl[j] = sl[j];
    g->n = k;
}

PH_VARIANTS(integrate_gather,
            (ph__world * w, ph__igather *g, const int32_t *idx, int32_t n, double h, int dv, int next, double wf),
            (w, g, idx, n, h, dv, next, wf))

/* The bodies waiting in g: one alone, two or three in the lanes (the last
 * one repeated in the lanes left). */
static inline __attribute__((always_inline)) void integrate_flush_body(ph__world *w, ph__igather *g, double h, int dv,
                                                                       int next, double wf) {
    const int k = g->n;
    g->n = 0;
    if (k == 1) {
        ph__integrate_body(w, g->sl[0], h, dv, next, wf);
    } else if (k > 1) {
        for (int j = k; j < 4; j++)
            g->sl[j] = g->sl[k - 1];
        integrate4(w, g->sl, 0, h, dv, next, next == 2 && wf != 0, wf);
    }
}

PH_VARIANTS(integrate_flush, (ph__world * w, ph__igather *g, double h, int dv, int next, double wf),
            (w, g, h, dv, next, wf))

void ph__wide_integrate_gather(ph__world *w, ph__igather *g, const int32_t *idx, int32_t n, double h, int dv, int next,
                               double wf) {
    PH_DISPATCH(w, integrate_gather, (w, g, idx, n, h, dv, next, wf));
}

void ph__wide_integrate_flush(ph__world *w, ph__igather *g, double h, int dv, int next, double wf) {
    PH_DISPATCH(w, integrate_flush, (w, g, h, dv, next, wf));
}

void ph__wide_integrate_list(ph__world *w, const int32_t *idx, int32_t n, double h, int dv, int next, double wf) {
    PH_DISPATCH(w, integrate_list, (w, idx, n, h, dv, next, wf));
}

void ph__wide_integrate(ph__world *w, int32_t s0, int32_t s1, double h, int dv, int next, double wf) {
    PH_DISPATCH(w, integrate, (w, s0, s1, h, dv, next, wf));
}
