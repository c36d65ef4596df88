/*
 * solver.c — projected Gauss–Seidel on the SPOOK system with velocity
 * bookkeeping, and the merit functions measured on the same rows.
 *
 * The system (seeds/002, eq. 8) is S lambda = B with S = G M^-1 G^T + Sigma,
 * B = -a g - b G W - h G M^-1 f, and box bounds lo <= lambda <= hi. The
 * solver never forms S. It keeps, per solver body, the current velocity
 * v = W + h M^-1 f + M^-1 G^T lambda, so that for row i
 *     (S lambda - B)_i = G_i v + eps_i lambda_i - rhs_i,
 *     rhs_i = -a g_i + (1 - b) G_i W          (precomputed per row),
 * and one Gauss–Seidel update (eqs. 19-20, 27-28, projection eq. 32) is
 *     dl = -(G_i v + eps_i lambda_i - rhs_i) / S_ii,
 *     lambda_i <- clamp(lambda_i + dl, lo_i, hi_i),
 *     v <- v + M^-1 G_i^T (lambda_i new - lambda_i old)   (eqs. 33-34).
 * For NCP friction (seeds/000) lo, hi = -+mu lambda_n with the normal row's
 * current lambda, re-read on every visit.
 *
 * Merits after each iteration, with y = S lambda - B and the bounds at the
 * current iterate:
 *   Fischer–Burmeister psi = 1/2 sum phi_i^2, phi_i = y_i for free rows,
 *     fb(lambda - lo, y) for lower-bounded rows, and
 *     fb(lambda - lo, fb(hi - lambda, -y)) for boxed rows (Billups' form),
 *     fb(a, b) = sqrt(a^2 + b^2) - a - b;
 *   min-map || lambda - clamp(lambda - y, lo, hi) ||_2;
 *   LCP error || D (lambda - clamp(lambda - D^-1 y, lo, hi)) ||_2, D = diag(S)
 *     (merit.c; the same formulas serve every method);
 *   relative residual ||B - S lambda||_2 / ||B||_2 over all rows.
 *
 * Dispatch: ph__solve runs this loop for PGS in the DEFAULT or GRAVITY
 * order; every other method or ordering runs on the same rows through the
 * solver family (solver_rows.c, docs/solvers.md). A pending capture
 * (ph_world_step_capture) is taken first. Within the PGS loop each sweep
 * visits the joints' scalar rows (hinge limits and motors, or every joint
 * row with joint_solver = GS), then the joints' direct block
 * (joint_direct.c), then the contacts: in the DEFAULT order with
 * vector_solver on, by batches of four points (solver_wide.c, the same
 * numbers as this loop over w->order), whose rows may exist only in the
 * batches (the plan's home BATCHES, the native path: the merits are then
 * taken there too). What runs is the substep's plan (step.h): no flag of
 * the world steers it.
 *
 * Invariants: row order is given by w->order (a permutation); solver body 0
 * is the fixed ground with zero inverse mass, so updates to it are no-ops.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "body.h"
#include "contact.h"
#include "joint.h"
#include "ph_arith.h"
#include "rows.h"
#include "solver.h"
#include "solver_wide.h"
#include "step.h"
#include "world.h"

ph__spook_coef ph__spook(ph_spook p, double h) {
    ph__spook_coef c;
    const double d = p.d, q = 1.0 + 4.0 * d;
    c.a = 4.0 / (h * q);
    c.b = 4.0 * d / q;
    if (p.hertz > 0) {
        const double om = 2.0 * PH_PI * p.hertz;
        c.eps_abs = 0;
        c.eps_rel = 4.0 / (h * h * om * om * q);
    } else {
        c.eps_abs = 4.0 / (h * h * p.k * q);
        c.eps_rel = 0;
    }
    c.pair_mass = 0;
    return c;
}

ph__row *ph__add_row(ph__world *w) {
    if (ph__array_reserve(w->rows, w->row_count + 1)) return NULL;
    ph__row *r = &w->rows[w->row_count++];
    memset(r, 0, sizeof *r);
    r->lo = -INFINITY;
    r->hi = INFINITY;
    r->normal = -1;
    r->block = -1;
    return r;
}

/* The coupling of two rows of one block (same bodies); a body slot 0 has
 * zero inverse mass and inertia, so the general form is exact. */
static double row_dot(const ph__row *a, const ph__row *b) {
    return ph_dot(a->lin, b->lin) * (b->ima + b->imb) + ph_dot(a->ang_a, b->mang_a) + ph_dot(a->ang_b, b->mang_b);
}

int ph__make_block(ph__world *w, int32_t first) {
    if (ph__array_reserve(w->blocks, w->block_count + 1)) return PH_ERR_NO_MEMORY;
    ph_mat3 s;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            s.m[i][j] = row_dot(&w->rows[first + i], &w->rows[first + j]) + (i == j ? w->rows[first + i].eps : 0);
    ph__block *b = &w->blocks[w->block_count];
    b->row = first;
    /* Columns of the inverse by three solves; a singular block (a joint
     * between two bodies without inertia) is left as scalar rows. */
    ph_vec3 e[3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    for (int c = 0; c < 3; c++) {
        ph_vec3 x;
        if (!ph_mat3_solve(&s, e[c], &x)) return PH_OK;
        b->inv.m[0][c] = x.x;
        b->inv.m[1][c] = x.y;
        b->inv.m[2][c] = x.z;
    }
    w->rows[first].block = w->block_count++;
    w->rows[first + 1].block = -2;
    w->rows[first + 2].block = -2;
    return PH_OK;
}

void ph__finish_row(ph__world *w, ph__row *r, const ph__spook_coef *c) {
    const ph__sbody *a = &w->sbodies[r->ia], *b = &w->sbodies[r->ib];
    r->ima = a->inv_mass;
    r->imb = b->inv_mass;
    /* A diagonal inv_i = c I gives c x + 0 y + 0 z = c x, bit for bit (finite
     * arms): the scale is the same product without the zeros. */
    r->mang_a = a->iso ? ph_scale(r->ang_a, a->inv_i.m[0][0]) : ph_mat3_mulv(&a->inv_i, r->ang_a);
    r->mang_b = b->iso ? ph_scale(r->ang_b, b->inv_i.m[0][0]) : ph_mat3_mulv(&b->inv_i, r->ang_b);
    const double lin = ph_len2(r->lin) * (r->ima + r->imb);
    const double ang = ph_dot(r->ang_a, r->mang_a) + ph_dot(r->ang_b, r->mang_b);
    double s = lin + ang;
    double sm = s;
    if (c && c->pair_mass) sm = lin > 0 ? lin : ang;
    r->eps = c ? c->eps_abs + c->eps_rel * sm : 0.0;
    s += r->eps;
    r->inv_diag = s > 1e-300 ? 1.0 / s : 0.0;
}

static inline void apply(ph__sbody *sb, const ph__row *r, double dl) { ph__row_apply(sb, r, dl); }

static inline double row_jv(const ph__sbody *sb, const ph__row *r) { return ph__row_jv(sb, r); }

/* One exact solve of a bilateral 3-row block (block Gauss–Seidel). */
static void solve_block(ph__sbody *sb, ph__row *r, const ph__block *b) {
    ph_vec3 res = ph_v3(row_jv(sb, &r[0]) + r[0].eps * r[0].lambda - r[0].rhs,
                        row_jv(sb, &r[1]) + r[1].eps * r[1].lambda - r[1].rhs,
                        row_jv(sb, &r[2]) + r[2].eps * r[2].lambda - r[2].rhs);
    ph_vec3 dl = ph_neg(ph_mat3_mulv(&b->inv, res));
    r[0].lambda += dl.x;
    r[1].lambda += dl.y;
    r[2].lambda += dl.z;
    apply(sb, &r[0], dl.x);
    apply(sb, &r[1], dl.y);
    apply(sb, &r[2], dl.z);
}

void ph__warm_start(ph__world *w, const ph__plan *p) {
    int32_t first = 0;
    if (p->warm == PH_WARM_BODIES || p->warm == PH_WARM_WITH_FORCES) {
        /* A later substep: the contacts' impulses of the last substep, body
         * by body (step.c's contact_dv), scaled as their impulses were. */
        const double f = ph__warm_factor(w);
        if (f != 0 && p->warm == PH_WARM_BODIES) /* (else done with the forces, step.c) */
            for (int32_t s = 1; s < w->sbody_count; s++) {
                w->sbodies[s].v = ph_mul_add(w->sbodies[s].v, f, w->dvc[s].v);
                w->sbodies[s].w = ph_mul_add(w->sbodies[s].w, f, w->dvc[s].w);
            }
        first = w->contact_row_count;
    } else if (p->warm == PH_WARM_BATCHES) {
        /* Contact rows in the batches' order (lanes touch disjoint bodies,
         * so the vector pass and the scalar loop give the same sums). */
        if (w->settings.vector_solver)
            ph__wide_warm_start(w);
        else
            for (int32_t k = w->row_count - w->contact_row_count; k < w->row_count; k++)
                apply(w->sbodies, &w->rows[w->order[k]], w->rows[w->order[k]].lambda);
        first = w->contact_row_count;
    }
    for (int32_t i = first; i < w->row_count; i++) {
        const ph__row *r = &w->rows[i];
        if (r->lambda != 0) apply(w->sbodies, r, r->lambda);
    }
    /* The ground must stay at rest whatever rounding did. */
    w->sbodies[0].v = w->sbodies[0].w = ph_v3(0, 0, 0);
}

static inline void bounds(const ph__row *rows, const ph__row *r, double *lo, double *hi) {
    if (r->normal >= 0) {
        double b = r->mu * rows[r->normal].lambda;
        *lo = -b;
        *hi = b;
    } else {
        *lo = r->lo;
        *hi = r->hi;
    }
}

/* The point block's adjugate and clamp (ph_arith.h, shared with
 * solver_wide_points.h). */
PH__DEFINE_ADJ3(adj3, double)
PH__DEFINE_CLAMP(clamp_d, double, PH__SELECT)

/* One visit of a contact point's three rows r[0..2] (normal, t1, t2) as a
 * block (settings.contact_block; solver_wide.c's point mode on the rows,
 * the same method up to rounding): with y = J v + eps lambda - rhs and the
 * point's block K = J M^-1 J^T + diag(eps), lambda - K^-1 y when that is
 * feasible; all zero when the normal would pull and its residual at zero is
 * not negative; else one projected Gauss–Seidel pass over the three rows
 * (through K). The velocities follow each row's change. */
static void point_block(ph__sbody *sb, const ph__row *rows, ph__row *r) {
    double y[3], K[3][3];
    for (int i = 0; i < 3; i++)
        y[i] = row_jv(sb, &r[i]) + r[i].eps * r[i].lambda - r[i].rhs;
    for (int i = 0; i < 3; i++)
        for (int j = i; j < 3; j++) {
            K[i][j] = row_dot(&r[i], &r[j]) + (i == j ? r[i].eps : 0.0);
            K[j][i] = K[i][j];
        }
    double c[6];
    const double det = adj3(K, c);
    const double id = det > 0 ? 1.0 / det : 0.0;
    const double l[3] = {r[0].lambda, r[1].lambda, r[2].lambda};
    double n[3] = {l[0] - ((c[0] * id * y[0] + c[1] * id * y[1]) + c[2] * id * y[2]),
                   l[1] - ((c[1] * id * y[0] + c[3] * id * y[1]) + c[4] * id * y[2]),
                   l[2] - ((c[2] * id * y[0] + c[4] * id * y[1]) + c[5] * id * y[2])};
    double lo, hi;
    /* The friction bound at the candidate normal impulse (NCP), or the
     * scaled box. */
    const int ncp = r[1].normal >= 0;
    const double bound = ncp ? r[1].mu * n[0] : r[1].hi;
    const int ok = n[0] >= 0 && fabs(n[1]) <= bound && fabs(n[2]) <= bound;
    const int sep = n[0] < 0 && y[0] - ((K[0][0] * l[0] + K[0][1] * l[1]) + K[0][2] * l[2]) >= 0;
    if (!ok) {
        if (sep) {
            n[0] = n[1] = n[2] = 0;
        } else {
            bounds(rows, &r[0], &lo, &hi);
            n[0] = l[0] - y[0] * r[0].inv_diag;
            n[0] = clamp_d(n[0], lo, hi);
            const double g0 = n[0] - l[0];
            const double b = ncp ? r[1].mu * n[0] : r[1].hi;
            n[1] = l[1] - (y[1] + K[0][1] * g0) * r[1].inv_diag;
            n[1] = clamp_d(n[1], -b, b);
            const double g1 = n[1] - l[1];
            n[2] = l[2] - ((y[2] + K[0][2] * g0) + K[1][2] * g1) * r[2].inv_diag;
            n[2] = clamp_d(n[2], -b, b);
        }
    }
    for (int i = 0; i < 3; i++) {
        const double dl = n[i] - l[i];
        r[i].lambda = n[i];
        apply(sb, &r[i], dl);
    }
}

/* Merits of the current iterate (the formulas of merit.c, on the rows;
 * native: with the contact rows held only in the batches). */
static void merits(const ph__world *w, int native, ph__merit *m) {
    memset(m, 0, sizeof *m);
    if (native) ph__wide_merits(w, m);
    for (int32_t i = 0; i < w->row_count; i++) {
        const ph__row *r = &w->rows[i];
        double lo, hi;
        bounds(w->rows, r, &lo, &hi);
        double y = row_jv(w->sbodies, r) + r->eps * r->lambda - r->rhs;
        ph__merit_row(r->lambda, y, lo, hi, row_dot(r, r) + r->eps, m);
        m->b2 += r->B * r->B;
    }
    ph__merit_finish(m);
}

/* The other methods and orderings: the rows as a system of the family. */
static int solve_family(ph__world *w) {
    int32_t *glen = ph__arena_alloc(&w->arena, (size_t)(w->row_count + 1) * sizeof *glen, "group lengths");
    if (!glen) return PH_ERR_NO_MEMORY;
    ph__world_groups(w, glen);
    ph__rowset rs;
    memset(&rs, 0, sizeof rs);
    rs.rows = w->rows;
    rs.n = w->row_count;
    rs.blocks = w->blocks;
    rs.sb = w->sbodies;
    rs.nb = w->sbody_count;
    rs.order = w->order;
    rs.glen = glen;
    rs.limit = &w->limit;
    rs.arena = &w->arena;
    ph__rec rec = {&w->stats, NULL};
    int e = ph__rows_solve(&rs, &w->settings, &w->rng, NULL, NULL, &w->stats, &rec);
    /* Row updates in the family's unit: work (in sweeps) times rows. */
    ph__limit_count(&w->limit, (uint64_t)(w->stats.work_final * (double)rs.n + 0.5));
    ph__arena_free(&w->arena, glen);
    return e;
}

void ph__stats_begin(ph_step_stats *st, ph_method method) {
    st->merit_count = 0;
    st->method = method;
    st->subspace_steps = 0;
    st->cg_iterations = 0;
    st->sm_precond_fallbacks = 0;
    st->restarts = 0;
    st->best_index = -1;
    st->direct_status = 0;
}

int ph__solve(ph__world *w, const ph__plan *p, double h, ph__wint *wi) {
    if (w->capture) {
        int e = ph__capture(w);
        if (e) return e;
    }
    if (p->solve == PH_SOLVE_FAMILY) return solve_family(w);
    /* The core's PGS in the order built by step.c. */
    const int iters = w->settings.iterations;
    const double tol = w->settings.tolerance;
    const int record = p->merits == PH_MERITS_SWEEP;
    const int native = p->home == PH_HOME_BATCHES;
    const int refresh = p->rows == PH_ROWS_REFRESH_IN_SWEEP || p->rows == PH_ROWS_REFRESH_IN_SWEEP_B;
    ph__row *rows = w->rows;
    ph__sbody *sb = w->sbodies;
    const int32_t *order = w->order;
    const int32_t n = w->row_count;
    ph_step_stats *st = &w->stats;
    ph__stats_begin(st, PH_METHOD_PGS);
    int it = 0;
    ph__merit m;
    memset(&m, 0, sizeof m);
    /* With the default order the contact rows are solved by batches of
     * independent points (solver_wide.c), which is the same sweep (plan
     * PGS_BATCHES). */
    const int wide = p->solve == PH_SOLVE_PGS_BATCHES;
    const int cblock = w->settings.contact_block;
    const int32_t ncrow = native ? 0 : w->contact_row_count;
    const int32_t nscalar = wide ? n - w->contact_row_count : n;
    const int32_t total = n + (native ? w->native_rows : 0);
    int e = ph__joint_direct_factor(w, p->collide == PH_COLLIDE_FULL, h);
    if (e) return e;
    /* The joint rows come first in the order: their scalar rows (hinge
     * limits and motors, or all of them with joint_solver = GS), then the
     * direct block, so that the bilateral rows are met exactly with the
     * limits' latest impulses, then the contacts. */
    const int32_t njoint = w->row_count - w->contact_row_count;
    /* A joint-only step solved once (settings.joint_step_once) whose rows
     * are all in the direct block, freshly factored: the first sweep solves
     * them exactly, a later one would repeat it (docs/core.md). */
    const int sweeps = w->joint_once && total == njoint && w->jd_count == njoint ? 1 : iters;
    /* The budget: only sweeps that fit in what is left of it start; a
     * cancel request stops before the next sweep. */
    const int fit = ph__limit_sweeps(&w->limit, sweeps, total);
    /* The last sweep and the relaxation as one pass of the batches
     * (ph__wide_sweep_relax) when nothing is measured or decided between
     * them: no merits recorded, no budget (a cancel seen before the last
     * sweep stops the loop before it, and a cancelled step is undone), no
     * joint rows (whose sweep writes the ground's velocity, zeroed after
     * each sweep). */
    const int32_t npoint = (native ? w->native_rows : w->contact_row_count) / 3;
    const int fuse = wide && p->relax && npoint > 0 && !record && njoint == 0 && w->limit.left == UINT64_MAX;
    /* The integration in the same pass, under the same conditions (after
     * the last sweep, or the relaxation, nothing here reads or writes the
     * bodies: the ground's velocity is zeroed, the final merits are lazy or
     * read only solver bodies that an integration without a next substep
     * does not write). */
    ph__wint *fwi = wide && npoint > 0 && !record && njoint == 0 && w->limit.left == UINT64_MAX ? wi : NULL;
    int relaxed = 0;
    for (it = 0; it < sweeps && total > 0; it++) {
        if (it >= fit) {
            w->limit.exhausted = 1;
            break;
        }
        if (ph__limit_cancel(&w->limit)) break;
        for (int32_t k = 0; k < nscalar; k++) {
            if (k == njoint) ph__joint_direct_solve(w);
            ph__row *r = &rows[order[k]];
            if (r->direct) continue;
            if (r->block != -1) {
                if (r->block >= 0) solve_block(sb, r, &w->blocks[r->block]);
                continue;
            }
            /* A contact point's three rows together (their order lists a
             * point's normal, t1 and t2 one after the other). */
            const int32_t ri = order[k];
            if (cblock && ri < ncrow && ri % 3 == 0 && k + 2 < nscalar && order[k + 1] == ri + 1 &&
                order[k + 2] == ri + 2) {
                point_block(sb, rows, r);
                k += 2;
                continue;
            }
            double lo, hi;
            bounds(rows, r, &lo, &hi);
            double dl = -(row_jv(sb, r) + r->eps * r->lambda - r->rhs) * r->inv_diag;
            double nl = r->lambda + dl;
            nl = nl < lo ? lo : (nl > hi ? hi : nl);
            dl = nl - r->lambda;
            r->lambda = nl;
            apply(sb, r, dl);
        }
        if (nscalar <= njoint) ph__joint_direct_solve(w);
        const int need_b = p->rows == PH_ROWS_REFRESH_IN_SWEEP_B;
        if (wide && (fuse || fwi) && it == sweeps - 1) {
            ph__wide_sweep_end(w, h, it == 0 && refresh, need_b, fuse, fwi);
            relaxed = fuse;
        } else if (wide && it == 0 && refresh) {
            ph__wide_sweep_refresh(w, h, need_b);
        } else if (wide) {
            ph__wide_sweep(w);
        }
        sb[0].v = sb[0].w = ph_v3(0, 0, 0);
        if (record) {
            if (wide && !native) ph__wide_store(w);
            merits(w, native, &m);
            ph__rec rec = {st, NULL};
            ph__rec_push(&rec, &m, (double)(it + 1), PH_PHASE_SWEEP);
            if (tol > 0 && m.fischer < tol) {
                it++;
                break;
            }
        }
    }
    /* A native later substep refreshes its batches in the first sweep:
     * without one, as a pass of its own. */
    if (it == 0 && wide && refresh) ph__wide_refresh_fast(w, h);
    ph__limit_count(&w->limit, (uint64_t)it * (uint64_t)total);
    /* The contacts' relaxation pass (plan.relax, settings.contact_relax;
     * docs/core.md): one row update per contact point, when the sweeps ran
     * and it fits in the budget. */
    if (p->relax && npoint > 0 && !w->limit.exhausted && !w->limit.cancelled &&
        ph__limit_sweeps(&w->limit, 1, npoint) == 1) {
        if (relaxed)
            ; /* (with the last sweep) */
        else if (wide)
            ph__wide_relax(w, h);
        else
            ph__contact_relax_rows(w, order, n, h);
        ph__limit_count(&w->limit, (uint64_t)npoint);
    }
    /* Without per-iteration merits the final ones are measured once per
     * step, after its last substep (they are what the statistics report).
     * On a native step they are measured when the statistics are read
     * (ph__settle_merits): nothing the merits read — the batches, the
     * solver bodies, the joint rows, the friction model — changes between
     * the end of the step and the next step or settings change, which
     * settle them first, so the numbers are the same. */
    st->rows = total;
    if (p->merits == PH_MERITS_FINAL && total > 0 && native) {
        ph__stats_final(st, it, (double)it, &m);
        w->merits_pending = 1;
        return PH_OK;
    }
    if (p->merits == PH_MERITS_FINAL || total == 0) {
        if (wide && !native) ph__wide_store(w);
        merits(w, native, &m);
    }
    ph__stats_final(st, it, (double)it, &m);
    return PH_OK;
}

void ph__solve_tiled(ph__world *w, int iters) {
    ph_step_stats *st = &w->stats;
    ph__stats_begin(st, PH_METHOD_PGS);
    ph__merit m;
    memset(&m, 0, sizeof m);
    st->rows = w->row_count + w->native_rows;
    ph__stats_final(st, iters, (double)iters, &m);
    w->merits_pending = 1;
}

void ph__settle_merits(ph__world *w) {
    if (!w->merits_pending) return;
    w->merits_pending = 0;
    ph__merit m;
    merits(w, 1, &m); /* (pending only after a native step) */
    ph__stats_final(&w->stats, w->stats.iterations, w->stats.work_final, &m);
}

void ph__store_impulses(ph__world *w, const ph__plan *p) {
    /* Native steps keep the impulses in the batches between substeps (the
     * next refresh warm-starts from them); the manifolds get them after
     * the last one. */
    if (p->store == PH_STORE_FROM_BATCHES) ph__wide_store_impulses(w);
    for (int32_t i = 0; i < w->manifold_count && p->store == PH_STORE_FROM_ROWS; i++) {
        ph__contact_manifold *cm = &w->manifolds[i];
        if (cm->row0 < 0) continue;
        for (int k = 0; k < cm->m.count; k++) {
            cm->ln[k] = w->rows[cm->row0 + 3 * k].lambda;
            cm->lt1[k] = w->rows[cm->row0 + 3 * k + 1].lambda;
            cm->lt2[k] = w->rows[cm->row0 + 3 * k + 2].lambda;
        }
    }
    for (int32_t i = 0; i < w->joint_pool.hwm; i++) {
        ph__joint *j = &w->joints[i];
        if (!j->alive || j->row0 < 0) continue;
        double keep[8] = {0};
        for (int k = 0; k < j->nrows; k++)
            keep[j->row_slot[k]] = w->rows[j->row0 + k].lambda;
        memcpy(j->lambda, keep, sizeof keep);
    }
}
