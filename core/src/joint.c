/*
 * joint.c — the rows of ball-and-socket, hinge, distance and fixed joints.
 *
 * Normal path: each joint adds its rows with the Jacobian of its constraint
 * g(q) and the SPOOK right-hand side -a g - b G W (seeds/002, eq. 8), using
 * the world's joint k and d. Ball: three rows along the world axes on the
 * anchor separation. Distance: one row along the anchor direction on
 * |p_b - p_a| - L. Hinge: ball rows plus two angular rows keeping B's axis
 * perpendicular to two directions normal to A's axis, plus an optional
 * unilateral limit row and an optional motor row (target relative speed,
 * impulse bounded by max torque x h). Fixed: ball rows plus three angular
 * rows on the small-angle vector of the relative orientation error.
 *
 * Failure modes: PH_ERR_NO_MEMORY from row allocation.
 *
 * Invariants: a joint's rows appear in a fixed order each step, and each row
 * keeps its impulse in the joint's lambda[] slot of the same meaning, so warm
 * starting matches rows by meaning even when a limit row comes and goes.
 */
#include <string.h>

#include "body.h"
#include "joint.h"
#include "rows.h"
#include "world.h"

static ph_transform body_pose(const ph__world *w, int32_t b) {
    ph_transform t = ph_transform_identity();
    if (b >= 0) {
        t.p = w->bodies[b].p;
        t.q = w->bodies[b].q;
    }
    return t;
}

double ph__hinge_angle(const ph__world *w, const ph__joint *j) {
    ph_transform ta = body_pose(w, j->a), tb = body_pose(w, j->b);
    ph_vec3 axis = ph_rotate(ta.q, j->axis_a);
    ph_vec3 ra = ph_rotate(ta.q, j->ref_a);
    ph_vec3 rb = ph_rotate(tb.q, j->ref_b);
    rb = ph_sub(rb, ph_scale(axis, ph_dot(rb, axis)));
    return atan2(ph_dot(ph_cross(ra, rb), axis), ph_dot(ra, rb));
}

static double jv0(const ph__world *w, const ph__row *r) { return ph__row_jv0(w, r); }

static double jv(const ph__world *w, const ph__row *r) { return ph__row_jv(w->sbodies, r); }

typedef struct jctx {
    ph__world *w;
    ph__joint *j;
    int32_t ia, ib;
    ph__spook_coef coef;
    double a, b, h, wsf;
    int need_b; /* the rows' B (merits) are read in this substep */
} jctx;

/* Adds a bilateral (or bounded) row with position error g: linear part lin
 * on B (-lin on A), angular parts aa on A and ab on B. */
static ph__row *add(jctx *c, int slot, ph_vec3 lin, ph_vec3 aa, ph_vec3 ab, double g) {
    ph__row *r = ph__add_row(c->w);
    if (!r) return NULL;
    r->ia = c->ia;
    r->ib = c->ib;
    r->lin = lin;
    r->ang_a = aa;
    r->ang_b = ab;
    ph__finish_row(c->w, r, &c->coef);
    r->rhs = -c->a * g + (1.0 - c->b) * jv0(c->w, r);
    r->B = c->need_b ? r->rhs - jv(c->w, r) : 0.0;
    r->lambda = c->j->lambda[slot] * c->wsf;
    c->j->row_slot[c->j->nrows++] = (int8_t)slot;
    return r;
}

/* The 3-row blocks (inverse of their 3x3 S) serve the scalar joint path
 * and the solver family; the core's PGS with the direct joint block solves
 * those rows in the block instead, so they are not built (a failed
 * factorization then leaves the rows as scalar rows). */
static int blocks_used(const ph__world *w) {
    const ph_settings *s = &w->settings;
    return !(s->method == PH_METHOD_PGS && s->joint_solver == PH_JOINT_SOLVER_DIRECT &&
             (s->ordering == PH_ORDER_DEFAULT || s->ordering == PH_ORDER_GRAVITY));
}

/* M^-1 J^T's angular part of a row on one solver body, I^-1 x (a scale
 * for equal principal moments), as ph__finish_row computes it, for x with
 * a zero component `zero` (a ball joint's angular rows -(r x e_k) and
 * r x e_k have their k-th): the products with the zero are left out. */
static inline ph_vec3 inv_i_mul2(const ph__sbody *s, ph_vec3 x, int zero) {
    if (s->iso) return ph_scale(x, s->inv_i.m[0][0]);
    const double(*m)[3] = s->inv_i.m;
    switch (zero) {
    case 0:
        return ph_v3(m[0][1] * x.y + m[0][2] * x.z, m[1][1] * x.y + m[1][2] * x.z, m[2][1] * x.y + m[2][2] * x.z);
    case 1:
        return ph_v3(m[0][0] * x.x + m[0][2] * x.z, m[1][0] * x.x + m[1][2] * x.z, m[2][0] * x.x + m[2][2] * x.z);
    default:
        return ph_v3(m[0][0] * x.x + m[0][1] * x.y, m[1][0] * x.x + m[1][1] * x.y, m[2][0] * x.x + m[2][1] * x.y);
    }
}

/* The three rows of a ball joint along the world axes e_k: J = [-e_k,
 * -(ra x e_k); e_k, rb x e_k] on the anchor separation sep, written at once
 * (the joints' rows are rebuilt in every substep, and a chain is mostly
 * these): the numbers of add() with ph__finish_row, without the generic
 * row's zeroing and per-row lookups. The cross products with e_k are
 * written out and I^-1 skips their zero component (issue #21, target 4):
 * the products left out are exact zeros, so the rows are the same to the
 * bit but for the sign of a zero entry. */
static int ball_rows(jctx *c, ph_vec3 ra, ph_vec3 rb, ph_vec3 sep) {
    ph__world *w = c->w;
    int32_t first = w->row_count;
    if (ph__array_reserve(w->rows, first + 3)) return PH_ERR_NO_MEMORY;
    const ph__sbody *sa = &w->sbodies[c->ia], *sb = &w->sbodies[c->ib];
    const ph__vw *a0 = &w->vw0[c->ia], *b0 = &w->vw0[c->ib];
    /* ph__finish_row with the pair's mass: lin = |e_k|^2 (1/m_a + 1/m_b). */
    const double ima = sa->inv_mass, imb = sb->inv_mass, lin = 1.0 * (ima + imb);
    const double eps = c->coef.eps_abs + c->coef.eps_rel * lin;
    /* -(ra x e_k) and rb x e_k. */
    const ph_vec3 aa[3] = {{0, -ra.z, ra.y}, {ra.z, 0, -ra.x}, {-ra.y, ra.x, 0}};
    const ph_vec3 ab[3] = {{0, rb.z, -rb.y}, {-rb.z, 0, rb.x}, {rb.y, -rb.x, 0}};
    static const ph_vec3 e[3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    const double keep = 1.0 - c->b, wsf = c->wsf;
    for (int k = 0; k < 3; k++) {
        ph__row *r = &w->rows[first + k];
        r->ia = c->ia;
        r->ib = c->ib;
        r->lin = e[k];
        r->ang_a = aa[k];
        r->ang_b = ab[k];
        r->mang_a = inv_i_mul2(sa, aa[k], k);
        r->mang_b = inv_i_mul2(sb, ab[k], k);
        r->ima = ima;
        r->imb = imb;
        const double s = (lin + (ph_dot(r->ang_a, r->mang_a) + ph_dot(r->ang_b, r->mang_b))) + eps;
        r->eps = eps;
        r->inv_diag = s > 1e-300 ? 1.0 / s : 0.0;
        r->rhs = -c->a * ph_vget(sep, k) + keep * ph__row_jv_of(r, a0->v, a0->w, b0->v, b0->w);
        r->B = 0.0;
        r->lo = -INFINITY;
        r->hi = INFINITY;
        r->mu = 0;
        r->normal = -1;
        r->direct = 0;
        r->lambda = c->j->lambda[k] * wsf;
        r->block = -1;
        r->height = 0;
        c->j->row_slot[c->j->nrows++] = (int8_t)k;
    }
    w->row_count = first + 3;
    for (int k = 0; k < 3 && c->need_b; k++) {
        ph__row *r = &w->rows[first + k];
        r->B = r->rhs - ph__row_jv_of(r, sa->v, sa->w, sb->v, sb->w);
    }
    /* The three rows share a long lever arm when the anchor is far from the
     * centre of mass, which makes their 3x3 block badly conditioned for
     * scalar Gauss–Seidel; they are solved as one block instead. */
    return blocks_used(c->w) ? ph__make_block(c->w, first) : PH_OK;
}

int ph__joint_rows(ph__world *w, double h, int need_b) {
    jctx c;
    memset(&c, 0, sizeof c);
    c.w = w;
    c.h = h;
    c.need_b = need_b;
    c.coef = ph__spook(w->settings.joint, h);
    c.coef.pair_mass = 1;
    c.a = c.coef.a;
    c.b = c.coef.b;
    /* The joints keep their impulses per substep; a step solved once
     * (joint_once) starts from theirs times the substeps. */
    c.wsf = ph__warm_factor(w) * (w->joint_once ? (double)w->settings.substeps : 1.0);
    const ph_vec3 zero = ph_v3(0, 0, 0);
    for (int32_t i = 0; i < w->joint_pool.hwm; i++) {
        ph__joint *j = &w->joints[i];
        if (!j->alive) continue;
        c.j = j;
        c.ia = w->body_to_sbody[j->a];
        c.ib = j->b >= 0 ? w->body_to_sbody[j->b] : 0;
        j->nrows = 0;
        if (c.ia == 0 && c.ib == 0) {
            /* Both sides fixed or asleep: no rows; the impulses stay cached. */
            j->row0 = -1;
            continue;
        }
        j->row0 = w->row_count;
        ph_transform ta = body_pose(w, j->a), tb = body_pose(w, j->b);
        ph_vec3 ra = ph_rotate(ta.q, j->anchor_a), rb = ph_rotate(tb.q, j->anchor_b);
        ph_vec3 pa = ph_add(ta.p, ra), pb = ph_add(tb.p, rb);
        ph_vec3 sep = ph_sub(pb, pa);
        switch (j->type) {
        case PH_JOINT_BALL:
            if (ball_rows(&c, ra, rb, sep)) return PH_ERR_NO_MEMORY;
            break;
        case PH_JOINT_DISTANCE: {
            double len = ph_len(sep);
            if (len < 1e-9) break; /* direction undefined: skip this step */
            ph_vec3 n = ph_scale(sep, 1.0 / len);
            if (!add(&c, 0, n, ph_neg(ph_cross(ra, n)), ph_cross(rb, n), len - j->distance)) return PH_ERR_NO_MEMORY;
            break;
        }
        case PH_JOINT_HINGE: {
            if (ball_rows(&c, ra, rb, sep)) return PH_ERR_NO_MEMORY;
            ph_vec3 axa = ph_rotate(ta.q, j->axis_a), axb = ph_rotate(tb.q, j->axis_b);
            ph_vec3 t1, t2;
            ph_tangents(axa, &t1, &t2);
            ph_vec3 d1 = ph_cross(axb, t1), d2 = ph_cross(axb, t2);
            if (!add(&c, 3, zero, ph_neg(d1), d1, ph_dot(axb, t1))) return PH_ERR_NO_MEMORY;
            if (!add(&c, 4, zero, ph_neg(d2), d2, ph_dot(axb, t2))) return PH_ERR_NO_MEMORY;
            if (j->enable_limit) {
                double ang = ph__hinge_angle(w, j);
                const double margin = 0.1; /* rad: the limit row is speculative within this */
                if (ang - j->lower < margin) {
                    ph__row *r = add(&c, 5, zero, ph_neg(axa), axa, ang - j->lower);
                    if (!r) return PH_ERR_NO_MEMORY;
                    double g = ang - j->lower;
                    if (g > 0) r->rhs = -g / h;
                    r->B = c.need_b ? r->rhs - jv(w, r) : 0.0;
                    r->lo = 0;
                    if (r->lambda < 0) r->lambda = 0;
                }
                if (j->upper - ang < margin) {
                    ph__row *r = add(&c, 6, zero, axa, ph_neg(axa), j->upper - ang);
                    if (!r) return PH_ERR_NO_MEMORY;
                    double g = j->upper - ang;
                    if (g > 0) r->rhs = -g / h;
                    r->B = c.need_b ? r->rhs - jv(w, r) : 0.0;
                    r->lo = 0;
                    if (r->lambda < 0) r->lambda = 0;
                }
            }
            if (j->enable_motor) {
                ph__row *r = add(&c, 7, zero, ph_neg(axa), axa, 0);
                if (!r) return PH_ERR_NO_MEMORY;
                ph__finish_row(w, r, NULL); /* a motor is a hard velocity target */
                r->rhs = j->motor_speed;
                r->B = c.need_b ? r->rhs - jv(w, r) : 0.0;
                double bound = j->max_motor_torque * h;
                r->lo = -bound;
                r->hi = bound;
                if (r->lambda < r->lo) r->lambda = r->lo;
                if (r->lambda > r->hi) r->lambda = r->hi;
            }
            break;
        }
        case PH_JOINT_FIXED: {
            if (ball_rows(&c, ra, rb, sep)) return PH_ERR_NO_MEMORY;
            /* Error rotation e = q_b (q_a rel)^-1; small-angle vector 2 vec(e). */
            ph_quat target = ph_quat_mul(ta.q, j->rel_q);
            ph_quat e = ph_quat_mul(tb.q, ph_quat_conj(target));
            double s = e.w < 0 ? -2.0 : 2.0;
            ph_vec3 th = ph_v3(s * e.x, s * e.y, s * e.z);
            static const ph_vec3 ax[3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
            int32_t first = w->row_count;
            for (int k = 0; k < 3; k++)
                if (!add(&c, 3 + k, zero, ph_neg(ax[k]), ax[k], ph_vget(th, k))) return PH_ERR_NO_MEMORY;
            if (blocks_used(w) && ph__make_block(w, first)) return PH_ERR_NO_MEMORY;
            break;
        }
        }
    }
    return PH_OK;
}

void ph__joint_errors(const ph__world *w, double *g) {
    const int32_t first = w->contact_row_count;
    for (int32_t i = 0; i < w->joint_pool.hwm; i++) {
        const ph__joint *j = &w->joints[i];
        if (!j->alive || j->row0 < 0) continue;
        double *gj = g + (j->row0 - first);
        const ph_transform ta = body_pose(w, j->a), tb = body_pose(w, j->b);
        const ph_vec3 sep =
            ph_sub(ph_add(tb.p, ph_rotate(tb.q, j->anchor_b)), ph_add(ta.p, ph_rotate(ta.q, j->anchor_a)));
        gj[0] = sep.x;
        gj[1] = sep.y;
        gj[2] = sep.z;
        if (j->type == PH_JOINT_HINGE) {
            const ph_vec3 axa = ph_rotate(ta.q, j->axis_a), axb = ph_rotate(tb.q, j->axis_b);
            ph_vec3 t1, t2;
            ph_tangents(axa, &t1, &t2);
            gj[3] = ph_dot(axb, t1);
            gj[4] = ph_dot(axb, t2);
        } else if (j->type == PH_JOINT_FIXED) {
            const ph_quat e = ph_quat_mul(tb.q, ph_quat_conj(ph_quat_mul(ta.q, j->rel_q)));
            const double s = e.w < 0 ? -2.0 : 2.0;
            gj[3] = s * e.x;
            gj[4] = s * e.y;
            gj[5] = s * e.z;
        }
    }
}

/* World inverse inertia times a vector for a body (zero for bodies that do
 * not move). */
static ph_vec3 inv_inertia_mul(const ph__body *b, ph_vec3 v) {
    return ph_rotate(b->q, ph_cmul(b->inv_inertia, ph_inv_rotate(b->q, v)));
}

static ph_mat3 world_inv_inertia(const ph__body *b) {
    ph_mat3 r = ph_mat3_from_quat(b->q);
    return ph_mat3_rdrt(&r, b->inv_inertia);
}

static void move_body(ph__body *b, ph_vec3 r, ph_vec3 p, double sign) {
    b->p = ph_mul_add(b->p, sign * b->inv_mass, p);
    ph_vec3 th = ph_scale(inv_inertia_mul(b, ph_cross(r, p)), sign);
    ph_quat tq = {th.x, th.y, th.z, 0};
    ph_quat dq = ph_quat_mul(tq, b->q);
    ph_quat q = {b->q.x + 0.5 * dq.x, b->q.y + 0.5 * dq.y, b->q.z + 0.5 * dq.z, b->q.w + 0.5 * dq.w};
    b->q = ph_quat_normalize(q);
}

void ph__joint_project(ph__world *w, int iterations) {
    /* Nonlinear Gauss–Seidel on the joints' anchor positions after the
     * step: each joint's anchors are moved together by the positional
     * correction -K^-1 C with K the 3x3 (1-D for distance joints) collision
     * matrix at the current pose. Velocities are not changed. */
    static const ph__body fixed_body; /* zero inverse mass and inertia */
    for (int it = 0; it < iterations; it++) {
        for (int32_t i = 0; i < w->joint_pool.hwm; i++) {
            const ph__joint *j = &w->joints[i];
            if (!j->alive) continue;
            ph__body *a = &w->bodies[j->a];
            ph__body *b = j->b >= 0 ? &w->bodies[j->b] : NULL;
            const ph__body *ea = (a->type == PH_BODY_DYNAMIC && !a->asleep) ? a : &fixed_body;
            const ph__body *eb = (b && b->type == PH_BODY_DYNAMIC && !b->asleep) ? b : &fixed_body;
            if (ea == &fixed_body && eb == &fixed_body) continue;
            ph_vec3 ra = ph_rotate(a->q, j->anchor_a);
            ph_vec3 rb = b ? ph_rotate(b->q, j->anchor_b) : ph_v3(0, 0, 0);
            ph_vec3 pa = ph_add(a->p, ra), pb = b ? ph_add(b->p, rb) : j->anchor_b;
            ph_vec3 c = ph_sub(pb, pa);
            ph_mat3 k;
            memset(&k, 0, sizeof k);
            ph_mat3 ria = world_inv_inertia(ea), rib = world_inv_inertia(eb);
            ph__add_collision_k(&k, ea->inv_mass, &ria, ra);
            ph__add_collision_k(&k, eb->inv_mass, &rib, rb);
            ph_vec3 p;
            if (j->type == PH_JOINT_DISTANCE) {
                double len = ph_len(c);
                if (len < 1e-9) continue;
                ph_vec3 n = ph_scale(c, 1.0 / len);
                double kn = ph_dot(n, ph_mat3_mulv(&k, n));
                if (kn <= 1e-300) continue;
                p = ph_scale(n, -(len - j->distance) / kn);
            } else {
                if (!ph_mat3_solve(&k, ph_neg(c), &p)) continue;
            }
            /* p acts on B, -p on A. */
            if (ea != &fixed_body) move_body(a, ra, p, -1.0);
            if (eb != &fixed_body) move_body(b, rb, p, 1.0);
        }
    }
}
