/*
 * joint_direct.c — the bilateral joint rows of a substep (and the hinge
 * limits that are pushing) solved together as one block of the
 * Gauss–Seidel sweep (settings.joint_solver = PH_JOINT_SOLVER_DIRECT).
 *
 * Why: a chain's tension has to cross every joint within the sweeps of one
 * substep. Gauss–Seidel moves it about one joint per sweep, so a 30-link
 * chain whipping under its own weight stretches its joints by centimetres
 * at 10 sweeps per step (docs/core.md). The joint rows' block of
 * S = J M^-1 J^T + Sigma is sparse — rows couple only through a shared body
 * — and for chains and trees numbered along the chain its Cholesky factor
 * has no fill outside the rows' envelope, so it is cheap to factor and to
 * solve in every sweep (the blockwise Gauss–Seidel of seeds/001 with the
 * whole joint set as one block).
 *
 * Once per step: the block is factored when the step collides (its first
 * substep; every substep with collide_substeps), as the contacts' rows are
 * built then, and the later substeps solve their own joint rows — rebuilt
 * in every substep, since a whipping chain turns too far within a step for
 * fixed joint Jacobians (docs/core.md) — with that factor. Their block has
 * moved with the bodies' turning since, so the solve is no longer exact
 * there: it is one step of a Newton-like iteration whose matrix lags by at
 * most a step, and the warm start and the next sweeps carry what it leaves
 * (chain30's worst gap 0.46 cm either way; docs/profile.md has the cost).
 *
 * Normal path:
 *   ph__joint_direct_factor(w, fresh) (from ph__solve for the core's PGS,
 *   every substep, after the joint rows are built): with fresh = 0 and a
 *   factor made for the same layout of joint rows (the same joints and
 *   row slots in the same places, jd_sig), the rows of the block are
 *   flagged again and nothing else is done. Otherwise D = the joint rows
 *   with no bounds (lo = -inf, hi = inf: the linear and angular rows of
 *   ball, hinge, fixed and distance joints) and the hinge limit rows that
 *   were pushing at the end of the last substep (warm start lambda > 0);
 *   motor rows and idle limit rows keep their scalar projected updates.
 *   For each row of D its envelope starts at the first row of D sharing one
 *   of its moving bodies. S_DD is filled in the envelope and factored as
 *   L diag(d) L^T (the envelope holds L exactly: the profile of a matrix
 *   is preserved by its factorization). S_DD is symmetric positive
 *   definite whenever every row has SPOOK regularization (eps > 0); a pivot
 *   below 1e-12 of its diagonal, or an envelope larger than
 *   PH_DIRECT_MAX_ENV entries, leaves the joints to the scalar loop.
 *   ph__joint_direct_solve (in every sweep, after the scalar joint rows and
 *   before the contacts): with y = S lambda - B of the current iterate
 *   (J v + eps lambda - rhs by the velocity bookkeeping), solve
 *   S_DD delta = -y_D by the factor; lambda_D += delta, projected onto each
 *   row's bounds (a no-op for bilateral rows, lambda >= 0 for a limit);
 *   v += M^-1 J_D^T (the applied change), group by group (jd_grp:
 *   consecutive rows of D on the same two bodies, a joint's rows, whose
 *   velocities are read and written once; the same operations in the same
 *   order as row by row). The rows of D are flagged (row.direct = 1) so
 *   the scalar loop skips them.
 *
 * A joint-only step solved once (settings.joint_step_once, step.c): the
 * block is factored for the whole step's rows and solved once (exactly:
 * every row of such a step is in the block); ph__joint_project_direct then
 * corrects the poses with the same factor, SHAKE's iteration along the
 * step's own Jacobian, and the velocities by the correction over the step
 * (docs/core.md "Joint-only steps").
 *
 * Failure modes: PH_ERR_NO_MEMORY when an array cannot grow (nothing
 * changed; the caller fails the step, and the next one factors afresh).
 * A failed factorization is not an error.
 *
 * Invariants: joint rows are rows [contact_row_count, row_count) of the
 * world, a joint's rows consecutive in the order of its row slots; the
 * factor (the world's arrays jd_*) stays valid while jd_ok = 1 and the
 * joint rows keep the layout jd_sig; w->jd_count = 0 when there is no
 * block.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "joint.h"
#include "rows.h"
#include "solver.h"
#include "world.h"

/* Largest envelope (entries of L) factored; a bigger one (a dense mesh of
 * joints numbered badly) is left to Gauss–Seidel. */
#define PH_DIRECT_MAX_ENV (1 << 22)

/* Leaves every joint row to the scalar loop (no block) for this layout. */
static int no_block(ph__world *w, ph__row *rows, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        rows[i].direct = 0;
    w->jd_count = 0;
    w->jd_ok = 1;
    return PH_OK;
}

/* Whether a joint row belongs to the block: every bilateral row (lo =
 * -inf, hi = inf: the linear and angular rows of ball, hinge, fixed and
 * distance joints), and a limit row (lambda >= 0) that was pushing at the
 * end of the last substep (its warm start is positive): it is probably
 * active again, and a stiff limit left to scalar updates lets a loaded
 * structure sag (the heavy box on the arched snake). Its impulse is
 * projected back onto lambda >= 0 after each solve. Motor rows and idle
 * limit rows keep their scalar projected updates. */
static int in_block(const ph__row *r) {
    /* (Compared with the infinities directly: this runs for every joint row
     * in every substep, in the layout check.) */
    const int bilateral = r->lo == -INFINITY && r->hi == INFINITY;
    const int active_limit = r->lo == 0 && r->hi == INFINITY && r->lambda > 0;
    return bilateral || active_limit;
}

/* The layout of the joint rows now in rows[]: for each, its joint, its row
 * slot and whether it belongs to the block. */
static int32_t layout_of(const ph__world *w, const ph__joint *j, int32_t i, int r) {
    return 2 * (8 * i + j->row_slot[r]) + in_block(&w->rows[j->row0 + r]);
}

/* 1 when the joint rows have the layout the factor was made for. */
static int same_layout(const ph__world *w, int32_t n) {
    if (n != w->jd_nsig) return 0;
    const int32_t first = w->contact_row_count;
    for (int32_t i = 0; i < w->joint_pool.hwm; i++) {
        const ph__joint *j = &w->joints[i];
        if (!j->alive || j->row0 < 0) continue;
        for (int r = 0; r < j->nrows; r++)
            if (w->jd_sig[j->row0 - first + r] != layout_of(w, j, i, r)) return 0;
    }
    return 1;
}

static void store_layout(ph__world *w, int32_t n) {
    const int32_t first = w->contact_row_count;
    for (int32_t i = 0; i < w->joint_pool.hwm; i++) {
        const ph__joint *j = &w->joints[i];
        if (!j->alive || j->row0 < 0) continue;
        for (int r = 0; r < j->nrows; r++)
            w->jd_sig[j->row0 - first + r] = layout_of(w, j, i, r);
    }
    w->jd_nsig = n;
}

int ph__joint_direct_factor(ph__world *w, int fresh, double h) {
    const int32_t first = w->contact_row_count, n = w->row_count - first;
    if (w->settings.joint_solver != PH_JOINT_SOLVER_DIRECT || n <= 0) {
        w->jd_count = 0;
        w->jd_ok = 0;
        return PH_OK;
    }
    ph__row *rows = w->rows + first;
    if (!fresh && w->jd_ok && w->jd_count > 0 && same_layout(w, n)) {
        /* How far the block's rows may have turned since the factor: its
         * bodies by the sum over the substeps since of h max |w| (the
         * velocities this substep starts from, those of the last
         * integration), which turns their arms, their axes and their world
         * inertias; a distance joint's row also along with the line between
         * its anchors, which translation turns too: the change of its
         * (unit) direction, in radians. S_DD has changed by about as
         * much. */
        double wmax2 = 0, lin2 = 0;
        for (int32_t q = 0; q < w->jd_nbody; q++) {
            const double a2 = ph_len2(w->sbodies[w->jd_body[q]].w);
            wmax2 = a2 > wmax2 ? a2 : wmax2;
        }
        for (int32_t q = 0; q < w->jd_nturn; q++) {
            const double l2 = ph_len2(ph_sub(w->rows[w->jd_row[w->jd_turn_row[q]]].lin, w->jd_lin[q]));
            lin2 = l2 > lin2 ? l2 : lin2;
        }
        w->jd_turn += h * sqrt(wmax2);
        if (w->jd_turn + sqrt(lin2) <= w->settings.joint_refactor_angle) {
            /* The factor of an earlier substep, for rows built as then. */
            for (int32_t k = 0; k < w->jd_count; k++)
                w->rows[w->jd_row[k]].direct = 1;
            return PH_OK;
        }
    }
    w->jd_ok = 0;
    w->jd_count = 0;
    w->jd_turn = 0;
    if (ph__array_reserve(w->jd_sig, n + 1)) return PH_ERR_NO_MEMORY;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        rows[i].direct = in_block(&rows[i]);
        m += rows[i].direct;
    }
    store_layout(w, n);
    if (m == 0) return no_block(w, rows, n);
    /* The block's arrays: offsets, pivots and their reciprocals (then the
     * solve's two vectors), rows, firsts, each body's first row. */
    if (ph__array_reserve(w->jd_off, m + 1) || ph__array_reserve(w->jd_d, 4 * m + 4) ||
        ph__array_reserve(w->jd_lin, m + 1) || ph__array_reserve(w->jd_turn_row, m + 1) ||
        ph__array_reserve(w->jd_body, w->sbody_count + 1) || ph__array_reserve(w->jd_row, m + 1) ||
        ph__array_reserve(w->jd_first, m + 1) || ph__array_reserve(w->jd_bfirst, w->sbody_count + 1) ||
        ph__array_reserve(w->jd_grp, m + 1))
        return PH_ERR_NO_MEMORY;
    for (int32_t b = 0; b < w->sbody_count; b++)
        w->jd_bfirst[b] = -1;
    w->jd_nturn = 0;
    /* Envelope: row k starts at the first row of D that touches one of its
     * moving bodies. */
    int64_t env = 0;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!rows[i].direct) continue;
        const int32_t ia = rows[i].ia, ib = rows[i].ib;
        int32_t f = k;
        if (ia != 0) {
            if (w->jd_bfirst[ia] < 0) w->jd_bfirst[ia] = k;
            if (w->jd_bfirst[ia] < f) f = w->jd_bfirst[ia];
        }
        if (ib != 0) {
            if (w->jd_bfirst[ib] < 0) w->jd_bfirst[ib] = k;
            if (w->jd_bfirst[ib] < f) f = w->jd_bfirst[ib];
        }
        w->jd_row[k] = first + i;
        /* A row whose linear part is neither zero nor a world axis (a
         * distance joint's, along the line between its anchors) turns with
         * the bodies' translation too: its direction is watched. */
        const ph_vec3 l = rows[i].lin;
        const int axis = (l.y == 0 && l.z == 0 && (l.x == 0 || fabs(l.x) == 1)) ||
                         (l.x == 0 && l.z == 0 && fabs(l.y) == 1) || (l.x == 0 && l.y == 0 && fabs(l.z) == 1);
        if (!axis) {
            w->jd_turn_row[w->jd_nturn] = k;
            w->jd_lin[w->jd_nturn++] = l;
        }
        w->jd_first[k] = f;
        w->jd_off[k] = env - f; /* L[k][j] at jd_env[jd_off[k] + j], f <= j <= k */
        env += k - f + 1;
        k++;
    }
    if (env > PH_DIRECT_MAX_ENV) return no_block(w, rows, n);
    /* The groups of the solve: consecutive rows on the same two bodies (a
     * row's two bodies differ: a joint joins two bodies, and one whose
     * sides are both fixed has no rows). */
    w->jd_ngrp = 0;
    for (k = 0; k < m; k++) {
        const ph__row *r = &w->rows[w->jd_row[k]], *p = k > 0 ? &w->rows[w->jd_row[k - 1]] : NULL;
        if (!p || p->ia != r->ia || p->ib != r->ib) w->jd_grp[w->jd_ngrp++] = k;
    }
    w->jd_grp[w->jd_ngrp] = m;
    /* The block's moving bodies, whose turning is watched. */
    w->jd_nbody = 0;
    for (int32_t b = 1; b < w->sbody_count; b++)
        if (w->jd_bfirst[b] >= 0) w->jd_body[w->jd_nbody++] = b;
    if (ph__array_reserve(w->jd_env, (int32_t)env + 1)) return PH_ERR_NO_MEMORY;
    double *L = w->jd_env, *d = w->jd_d, *dinv = w->jd_d + m + 1;
    /* Fill and factor row by row (the row's entries are final once the rows
     * above are done). Row k is first filled with S_kj; then, left to
     * right, its entry j becomes t_j = (L d)_kj = S_kj - sum_q t_q L_jq
     * over the columns q both rows reach, kept there while the rest of the
     * row needs it, and L_kj = t_j / d_j at the end. */
    for (k = 0; k < m; k++) {
        const ph__row *rk = &w->rows[w->jd_row[k]];
        const int32_t fk = w->jd_first[k];
        double *Lk = L + w->jd_off[k];
        for (int32_t j = fk; j < k; j++)
            Lk[j] = ph__row_couple(rk, &w->rows[w->jd_row[j]]);
        double s = ph__row_couple(rk, rk) + rk->eps;
        const double skk = s;
        for (int32_t j = fk; j < k; j++) {
            const int32_t fj = w->jd_first[j];
            const double *Lj = L + w->jd_off[j];
            double t = Lk[j];
            for (int32_t q = fk > fj ? fk : fj; q < j; q++)
                t -= Lk[q] * Lj[q];
            Lk[j] = t;
        }
        for (int32_t j = fk; j < k; j++) {
            const double t = Lk[j], l = t * dinv[j];
            s -= t * l;
            Lk[j] = l;
        }
        if (!(s > 1e-12 * skk)) return no_block(w, rows, n);
        d[k] = s;
        dinv[k] = 1.0 / s;
        Lk[k] = 1.0;
    }
    w->jd_count = m;
    w->jd_ok = 1;
    return PH_OK;
}

/* The substitutions' inner loops over row k's envelope entries a[0..n)
 * (columns f..k-1, n = k - f) against x[f..k): a dot product (forward) and
 * an update (backward). An envelope is mostly two or three joints wide (for
 * a chain of ball joints 3 to 5 entries); these loops of a few iterations
 * cost more in loop control than in arithmetic, so the usual widths are
 * written out at a fixed length (the same operations in the same order). */
#define PH_DOT_N(N)                                                                                                    \
    {                                                                                                                  \
        double s = 0;                                                                                                  \
        for (int q = 0; q < (N); q++)                                                                                  \
            s += a[q] * x[q];                                                                                          \
        return s;                                                                                                      \
    }
static inline double env_dot(const double *a, const double *x, int32_t n) {
    switch (n) {
    case 0:
        return 0.0;
    case 1:
        PH_DOT_N(1)
    case 2:
        PH_DOT_N(2)
    case 3:
        PH_DOT_N(3)
    case 4:
        PH_DOT_N(4)
    case 5:
        PH_DOT_N(5)
    case 6:
        PH_DOT_N(6)
    default:
        PH_DOT_N(n)
    }
}
#undef PH_DOT_N

#define PH_AXPY_N(N)                                                                                                   \
    {                                                                                                                  \
        for (int q = 0; q < (N); q++)                                                                                  \
            x[q] -= a[q] * c;                                                                                          \
        return;                                                                                                        \
    }
static inline void env_axpy(const double *a, double *x, double c, int32_t n) {
    switch (n) {
    case 0:
        return;
    case 1:
        PH_AXPY_N(1)
    case 2:
        PH_AXPY_N(2)
    case 3:
        PH_AXPY_N(3)
    case 4:
        PH_AXPY_N(4)
    case 5:
        PH_AXPY_N(5)
    case 6:
        PH_AXPY_N(6)
    default:
        PH_AXPY_N(n)
    }
}
#undef PH_AXPY_N

void ph__joint_direct_solve(ph__world *w) {
    const int32_t m = w->jd_count;
    if (m == 0) return;
    ph__sbody *sb = w->sbodies;
    ph__row *rows = w->rows;
    const int32_t *row = w->jd_row, *grp = w->jd_grp;
    const double *L = w->jd_env, *dinv = w->jd_d + m + 1;
    const int32_t *first = w->jd_first;
    const int64_t *off = w->jd_off;
    double *zf = w->jd_d + 2 * m + 2, *z = w->jd_d + 3 * m + 3;
    /* -y; forward L zf = -y; z = zf / d (in the same pass: zf stays for the
     * later rows' dot products); backward L^T delta = z, in place. Group by
     * group (a joint's rows), whose two bodies' velocities are read once
     * and written once: the same operations in the same order as row by
     * row with ph__row_jv and ph__row_apply. */
    for (int32_t g = 0; g < w->jd_ngrp; g++) {
        const ph__row *r0 = &rows[row[grp[g]]];
        const ph__sbody *a = &sb[r0->ia], *b = &sb[r0->ib];
        const ph_vec3 va = a->v, wa = a->w, vb = b->v, wb = b->w;
        for (int32_t k = grp[g]; k < grp[g + 1]; k++) {
            const ph__row *r = &rows[row[k]];
            const double y = ph__row_jv_of(r, va, wa, vb, wb) + r->eps * r->lambda - r->rhs;
            const int32_t f = first[k];
            const double t = -y - env_dot(L + off[k] + f, zf + f, k - f);
            zf[k] = t;
            z[k] = t * dinv[k];
        }
    }
    for (int32_t k = m - 1; k >= 0; k--)
        env_axpy(L + off[k] + first[k], z + first[k], z[k], k - first[k]);
    for (int32_t g = 0; g < w->jd_ngrp; g++) {
        const ph__row *r0 = &rows[row[grp[g]]];
        ph__sbody *a = &sb[r0->ia], *b = &sb[r0->ib];
        ph_vec3 va = a->v, wa = a->w, vb = b->v, wb = b->w;
        for (int32_t k = grp[g]; k < grp[g + 1]; k++) {
            ph__row *r = &rows[row[k]];
            /* Projection onto the row's bounds (a no-op for bilateral rows). */
            double nl = r->lambda + z[k];
            nl = nl < r->lo ? r->lo : (nl > r->hi ? r->hi : nl);
            const double dl = nl - r->lambda;
            r->lambda = nl;
            va = ph_mul_add(va, -dl * r->ima, r->lin);
            wa = ph_mul_add(wa, dl, r->mang_a);
            vb = ph_mul_add(vb, dl * r->imb, r->lin);
            wb = ph_mul_add(wb, dl, r->mang_b);
        }
        a->v = va;
        a->w = wa;
        b->v = vb;
        b->w = wb;
    }
}

/* The block's solve for the poses: with g the joint rows' errors (by joint
 * row), dmu = -S_DD^-1 g by the factor of the step's solve, and d[s] =
 * (M^-1 J^T dmu)'s linear part, d[n + s] its angular part, for solver body
 * s of n (d zeroed by the caller). The rows are not changed. */
static void solve_position(const ph__world *w, const double *g, ph_vec3 *d) {
    const int32_t m = w->jd_count, n = w->sbody_count, cfirst = w->contact_row_count;
    const ph__row *rows = w->rows;
    const int32_t *row = w->jd_row, *first = w->jd_first;
    const double *L = w->jd_env, *dinv = w->jd_d + m + 1;
    const int64_t *off = w->jd_off;
    double *zf = w->jd_d + 2 * m + 2, *z = w->jd_d + 3 * m + 3;
    for (int32_t k = 0; k < m; k++) {
        const int32_t f = first[k];
        const double t = -g[row[k] - cfirst] - env_dot(L + off[k] + f, zf + f, k - f);
        zf[k] = t;
        z[k] = t * dinv[k];
    }
    for (int32_t k = m - 1; k >= 0; k--)
        env_axpy(L + off[k] + first[k], z + first[k], z[k], k - first[k]);
    for (int32_t k = 0; k < m; k++) {
        const ph__row *r = &rows[row[k]];
        const double dl = z[k];
        d[r->ia] = ph_mul_add(d[r->ia], -dl * r->ima, r->lin);
        d[n + r->ia] = ph_mul_add(d[n + r->ia], dl, r->mang_a);
        d[r->ib] = ph_mul_add(d[r->ib], dl * r->imb, r->lin);
        d[n + r->ib] = ph_mul_add(d[n + r->ib], dl, r->mang_b);
    }
}

int ph__joint_project_direct(ph__world *w, int iterations, int substeps) {
    const double h = w->settings.time_step, vel = 1.0 / h;
    const int32_t n = w->sbody_count, nrow = w->row_count - w->contact_row_count;
    if (iterations > 0 && (!w->jd_ok || w->jd_count != nrow)) {
        /* (No block, or rows outside it: the scalar correction.) */
        ph__joint_project(w, iterations);
    } else if (iterations > 0) {
        /* SHAKE's iteration (Ryckaert, Ciccotti & Berendsen 1977): the
         * poses move along the step's own Jacobian, M^-1 J(q0)^T dmu with
         * the block as factored for the step's solve, until g(q) = 0, and
         * the velocities by the same amount over h (the correcting impulse
         * acts over the step). The solver bodies and rows stay as the
         * solve left them (the step's merits read them). */
        double *g = ph__arena_alloc(&w->arena, (size_t)nrow * sizeof *g, "joint errors");
        ph_vec3 *d = g ? ph__arena_alloc(&w->arena, (size_t)(2 * n) * sizeof *d, "joint corrections") : NULL;
        if (!d) {
            if (g) ph__arena_free(&w->arena, g);
            return PH_ERR_NO_MEMORY;
        }
        for (int it = 0; it < iterations; it++) {
            ph__joint_errors(w, g);
            memset(d, 0, (size_t)(2 * n) * sizeof *d);
            solve_position(w, g, d);
            for (int32_t s = 1; s < n; s++) {
                ph__body *b = &w->bodies[w->sbody_body[s]];
                if (b->type != PH_BODY_DYNAMIC) continue;
                const ph_vec3 dx = d[s], th = d[n + s];
                b->p = ph_add(b->p, dx);
                const ph_quat dq = ph_quat_mul((ph_quat){th.x, th.y, th.z, 0}, b->q);
                b->q = ph_quat_normalize(
                    (ph_quat){b->q.x + 0.5 * dq.x, b->q.y + 0.5 * dq.y, b->q.z + 0.5 * dq.z, b->q.w + 0.5 * dq.w});
                b->v = ph_mul_add(b->v, vel, dx);
                b->w = ph_mul_add(b->w, vel, th);
            }
        }
        ph__arena_free(&w->arena, d);
        ph__arena_free(&w->arena, g);
    }
    /* The impulses of the step's one solve, per substep as the joints keep
     * them (a later step with substeps warm-starts from them). */
    for (int32_t i = 0; i < w->joint_pool.hwm && substeps > 1; i++) {
        ph__joint *j = &w->joints[i];
        if (!j->alive || j->row0 < 0) continue; /* (no rows: its impulses kept as they were) */
        for (int k = 0; k < 8; k++)
            j->lambda[k] /= (double)substeps;
    }
    return PH_OK;
}
