/*
 * contact_rows.c — the contact rows of the SPOOK system: each contact point
 * becomes three rows, the normal (unilateral, SPOOK stabilized) and two
 * friction rows (NCP bounds +-mu lambda_n, or scaled box); in the substeps
 * that do not collide, the rows' gaps and right-hand sides are refreshed
 * from the bodies' motion.
 *
 * Normal path: ph__contact_rows builds the rows of every manifold point
 * after a collision; ph__init_gaps stores the points' gaps;
 * ph__refresh_contact_rows moves them by h J_n v0 in each later substep.
 *
 * Failure modes: PH_ERR_NO_MEMORY when an array cannot grow (the step is then
 * abandoned before any state changes).
 *
 * Invariants: a manifold's rows start at row0 (-1: none), three per point
 * in point order (normal, t1, t2).
 */
#include <string.h>

#include "body.h"
#include "collide.h"
#include "contact.h"
#include "ph_arith.h"
#include "rows.h"
#include "world.h"

/* The normal's right-hand side and the friction impulses' clamp
 * (ph_arith.h, shared with the wide fill and refresh). */
PH__DEFINE_SPOOK_RHS(spook_rhs, double, PH__SELECT)
PH__DEFINE_CLAMP(clamp_d, double, PH__SELECT)
PH__DEFINE_RELAX_TARGET(relax_target, double, PH__SELECT)

/* Fills the Jacobian of a row along direction d at arms ra, rb. */
static void set_linear_row(ph__row *r, ph_vec3 d, ph_vec3 ra, ph_vec3 rb) {
    r->lin = d;
    r->ang_a = ph_neg(ph_cross(ra, d));
    r->ang_b = ph_cross(rb, d);
}

static double row_jv(const ph__world *w, const ph__row *r) { return ph__row_jv(w->sbodies, r); }

static double row_jv0(const ph__world *w, const ph__row *r) { return ph__row_jv0(w, r); }

void ph__contact_ctx_init(const ph__world *w, double h, ph__contact_ctx *c) {
    c->cn = ph__spook(w->settings.contact, h);
    c->cf = ph__spook(w->settings.friction, h);
    c->h = h;
    c->box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    c->g = ph_len(w->settings.gravity);
    c->down = ph_normalize(w->settings.gravity);
    c->wsf = ph__warm_factor(w);
}

void ph__contact_point_rows(ph__world *w, const ph__contact_ctx *c, const ph__contact_manifold *cm, int k,
                            ph__row r[3]) {
    const double a = c->cn.a, b = c->cn.b, h = c->h;
    const int32_t ia = w->body_to_sbody[cm->ba], ib = w->body_to_sbody[cm->bb];
    const ph__body *bda = &w->bodies[cm->ba], *bdb = &w->bodies[cm->bb];
    double box_bound = 0;
    if (c->box) {
        double ima = w->sbodies[ia].inv_mass, imb = w->sbodies[ib].inv_mass;
        double mred = (ima + imb) > 0 ? 1.0 / (ima + imb) : 0;
        box_bound = cm->friction * mred * c->g * h / cm->m.count;
    }
    const ph__mpoint *mp = &cm->m.pts[k];
    ph_vec3 ra = ph_sub(mp->point, bda->p), rb = ph_sub(mp->point, bdb->p);
    const double height = -ph_dot(mp->point, c->down);
    for (int q = 0; q < 3; q++) {
        memset(&r[q], 0, sizeof r[q]);
        r[q].normal = -1;
        r[q].block = -1;
        r[q].height = height;
        r[q].ia = ia;
        r[q].ib = ib;
    }
    ph__row *rn = &r[0];
    set_linear_row(rn, cm->m.normal, ra, rb);
    ph__finish_row(w, rn, &c->cn);
    /* g = -depth. Penetrating or touching: SPOOK, -a g - b G W (eq. 26
     * with the velocity bookkeeping, see solver.c). Separated
     * (speculative): allow the gap to close within this step. */
    double gap = -mp->depth;
    double jv0 = row_jv0(w, rn);
    rn->rhs = spook_rhs(gap, jv0, a, 1.0 - b, h, 0.0);
    rn->B = rn->rhs - row_jv(w, rn);
    rn->lo = 0;
    rn->hi = INFINITY;
    rn->lambda = cm->ln[k] * c->wsf;
    for (int d = 0; d < 2; d++) {
        ph__row *rt = &r[1 + d];
        set_linear_row(rt, d == 0 ? cm->t1 : cm->t2, ra, rb);
        ph__finish_row(w, rt, &c->cf);
        rt->rhs = 0;
        rt->B = -row_jv(w, rt);
        rt->mu = cm->friction;
        if (c->box) {
            rt->lo = -box_bound;
            rt->hi = box_bound;
        } else {
            double bound = cm->friction * rn->lambda;
            rt->lo = -bound;
            rt->hi = bound;
        }
        double l0 = (d == 0 ? cm->lt1[k] : cm->lt2[k]) * c->wsf;
        rt->lambda = clamp_d(l0, rt->lo, rt->hi);
    }
}

int ph__contact_rows(ph__world *w, double h) {
    ph__contact_ctx c;
    ph__contact_ctx_init(w, h, &c);
    for (int32_t i = 0; i < w->manifold_count; i++) {
        ph__contact_manifold *cm = &w->manifolds[i];
        const int32_t ia = w->body_to_sbody[cm->ba], ib = w->body_to_sbody[cm->bb];
        if (ia == 0 && ib == 0) {
            /* Both sides fixed or asleep: no rows; the impulses stay cached. */
            cm->row0 = -1;
            continue;
        }
        cm->row0 = w->row_count;
        for (int k = 0; k < cm->m.count; k++) {
            if (ph__array_reserve(w->rows, w->row_count + 3)) return PH_ERR_NO_MEMORY;
            ph__row *r = &w->rows[w->row_count];
            ph__contact_point_rows(w, &c, cm, k, r);
            if (!c.box) r[1].normal = r[2].normal = w->row_count;
            w->row_count += 3;
        }
    }
    return PH_OK;
}

int ph__init_gaps(ph__world *w) {
    const int32_t np = w->contact_row_count / 3;
    if (ph__array_reserve(w->wgap, np + 1)) return PH_ERR_NO_MEMORY;
    for (int32_t i = 0; i < w->manifold_count; i++) {
        const ph__contact_manifold *cm = &w->manifolds[i];
        if (cm->row0 < 0) continue;
        double *gap = &w->wgap[cm->row0 / 3];
        for (int k = 0; k < cm->m.count; k++)
            gap[k] = -cm->m.pts[k].depth;
    }
    return PH_OK;
}

int ph__refresh_contact_rows(ph__world *w, const ph__plan *p, double h) {
    /* Substeps after the first with collide_substeps = 0: the rows keep the
     * Jacobians and M^-1 J^T of the collision. Each point's gap moves by the
     * relative normal velocity the last substep integrated the positions
     * with, which is this substep's velocity before its forces:
     *   g_k+1 = g_k + h J_n v0,
     * the linearized motion of the contact over one substep (as PhysX's TGS
     * solver updates its errors from the bodies' accumulated motion). The
     * SPOOK right-hand side takes that gap and the same J_n v0; the warm
     * start takes the impulses of the previous substep (applied body by
     * body, step.c). */
    const ph__spook_coef cn = ph__spook(w->settings.contact, h);
    const double a = cn.a, b = cn.b;
    const double wsf = ph__warm_factor(w);
    const int box = w->settings.friction_model == PH_FRICTION_SCALED_BOX;
    /* B (for the relative residual) is read only when merits are measured:
     * every iteration with record_merits or a tolerance, else once after the
     * last substep, and by a capture (plan.merits). */
    const int need_b = p->merits != PH_MERITS_NONE;
    for (int32_t i = 0; i < w->manifold_count; i++) {
        const ph__contact_manifold *cm = &w->manifolds[i];
        if (cm->row0 < 0) continue;
        for (int k = 0; k < cm->m.count; k++) {
            ph__row *rn = &w->rows[cm->row0 + 3 * k];
            const double jv0 = row_jv0(w, rn);
            const double gap = w->wgap[cm->row0 / 3 + k] + h * jv0;
            w->wgap[cm->row0 / 3 + k] = gap;
            rn->rhs = spook_rhs(gap, jv0, a, 1.0 - b, h, 0.0);
            if (need_b) rn->B = rn->rhs - row_jv(w, rn);
            rn->lambda = cm->ln[k] * wsf;
            for (int d = 1; d <= 2; d++) {
                ph__row *rt = &w->rows[cm->row0 + 3 * k + d];
                if (need_b) rt->B = -row_jv(w, rt);
                if (!box) {
                    double bound = rt->mu * rn->lambda;
                    rt->lo = -bound;
                    rt->hi = bound;
                }
                double l0 = (d == 1 ? cm->lt1[k] : cm->lt2[k]) * wsf;
                rt->lambda = clamp_d(l0, rt->lo, rt->hi);
            }
        }
    }
    return PH_OK;
}

/* The rigid diagonal J M^-1 J^T of a row (ph__finish_row's sum before
 * eps; the row-mode batches compute it with the same operations). */
static double rigid_diag(const ph__row *r) {
    const double lin = ph_len2(r->lin) * (r->ima + r->imb);
    const double ang = ph_dot(r->ang_a, r->mang_a) + ph_dot(r->ang_b, r->mang_b);
    return lin + ang;
}

/* The friction rows' bounds at the current normal impulse (NCP), or their
 * scaled box. */
static void friction_bounds(const ph__row *rows, const ph__row *r, double *lo, double *hi) {
    if (r->normal >= 0) {
        const double b = r->mu * rows[r->normal].lambda;
        *lo = -b;
        *hi = b;
    } else {
        *lo = r->lo;
        *hi = r->hi;
    }
}

void ph__contact_relax_rows(ph__world *w, const int32_t *order, int32_t n, double h) {
    ph__row *rows = w->rows;
    ph__sbody *sb = w->sbodies;
    for (int32_t k = 0; k < n; k++) {
        const int32_t ri = order[k];
        if (ri >= w->contact_row_count || ri % 3 != 0) continue;
        ph__row *r = &rows[ri];
        /* The normal as a rigid row: J_n v = 0 when touching, the gap
         * closed within the substep when apart; lambda_n >= 0. */
        const double gap = w->wgap[ri / 3];
        const double t = relax_target(gap, h, 0.0);
        const double s = rigid_diag(r);
        const double inv = s > 1e-300 ? 1.0 / s : 0.0;
        double nl = r->lambda - (ph__row_jv(sb, r) - t) * inv;
        nl = clamp_d(nl, 0.0, INFINITY);
        double dl = nl - r->lambda;
        r->lambda = nl;
        ph__row_apply(sb, r, dl);
        /* The friction impulses into the new cone (no update of their
         * own). */
        for (int q = 1; q <= 2; q++) {
            double lo, hi;
            friction_bounds(rows, &r[q], &lo, &hi);
            nl = clamp_d(r[q].lambda, lo, hi);
            dl = nl - r[q].lambda;
            r[q].lambda = nl;
            ph__row_apply(sb, &r[q], dl);
        }
    }
    sb[0].v = sb[0].w = ph_v3(0, 0, 0);
}
