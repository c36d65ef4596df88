/*
 * solver_rows.c — constraint rows as a system of the solver family: the
 * rows of a world step (or of a captured one) with the velocity
 * bookkeeping of docs/core.md, so that every method runs on exactly the
 * rows and the bookkeeping the core's PGS uses.
 *
 * Normal path: ph__rows_solve copies the rows' impulses, bounds, links,
 * diagonals S_ii (summed exactly as ph__finish_row does) and B into arrays,
 * builds the blocks (contact triples, joints) and the automatic Jacobi
 * weights, runs the method, and writes the impulses back to the rows. The
 * operations read and write the solver bodies' velocities:
 *   y_i = G_i v + eps_i lambda_i - rhs_i,   add: v += M^-1 G_i^T dl,
 *   sweep: the world's PGS update (solver.c), joint 3x3 blocks included,
 *   matvec: scatter M^-1 G^T p onto scratch velocities of the bodies of the
 *     set, gather G (S_AA p without forming S_AA),
 *   entry: S_ij from the shared bodies of the two rows,
 *   neighbours: the rows sharing a body other than the ground, from an
 *     index of each body's rows built once per solve.
 *
 * Failure modes: PH_ERR_NO_MEMORY from the scratch (rs->arena, which the
 * method's scratch comes from too; the rows keep their impulses then, the
 * velocities match them).
 *
 * Invariants: after every operation v = v_start + M^-1 G^T (lambda -
 * lambda_start), and the ground's velocity (solver body 0) is zero.
 */
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "contact.h"
#include "rows.h"
#include "solver.h"
#include "world.h"

typedef struct rows_ctx {
    ph__row *rows;
    ph__sbody *sb;
    int32_t nb;
    const ph__block *blocks;
    ph_vec3 *dv, *dw;           /* matvec scratch, by solver body */
    ph_vec3 *sv, *sw;           /* saved velocities */
    double *slam;               /* saved impulses */
    const int32_t *boff, *brow; /* rows of body b: brow[boff[b] .. boff[b+1]) */
} rows_ctx;

static inline double jv(const ph__sbody *sb, const ph__row *r) { return ph__row_jv(sb, r); }

static inline void apply(ph__sbody *sb, const ph__row *r, double dl) { ph__row_apply(sb, r, dl); }

double ph__rows_entry(const ph__row *a, const ph__row *b, int diag) {
    double v = ph__row_couple(a, b);
    if (diag) v += a->eps;
    return v;
}

static double op_row_y(const ph__sys *s, int32_t i) {
    const rows_ctx *c = s->ctx;
    const ph__row *r = &c->rows[i];
    return jv(c->sb, r) + r->eps * s->lambda[i] - r->rhs;
}

static void op_add(ph__sys *s, int32_t i, double dl) {
    rows_ctx *c = s->ctx;
    s->lambda[i] += dl;
    apply(c->sb, &c->rows[i], dl);
}

/* The world's PGS sweep (solver.c) on the impulse array. */
static void op_sweep(ph__sys *s) {
    rows_ctx *c = s->ctx;
    ph__sbody *sb = c->sb;
    double *lam = s->lambda;
    for (int32_t k = 0; k < s->n; k++) {
        const int32_t i = s->order[k];
        const ph__row *r = &c->rows[i];
        if (r->block != -1) {
            if (r->block >= 0) {
                const ph__block *b = &c->blocks[r->block];
                ph_vec3 res = ph_v3(jv(sb, &r[0]) + r[0].eps * lam[i] - r[0].rhs,
                                    jv(sb, &r[1]) + r[1].eps * lam[i + 1] - r[1].rhs,
                                    jv(sb, &r[2]) + r[2].eps * lam[i + 2] - r[2].rhs);
                ph_vec3 dl = ph_neg(ph_mat3_mulv(&b->inv, res));
                lam[i] += dl.x;
                lam[i + 1] += dl.y;
                lam[i + 2] += dl.z;
                apply(sb, &r[0], dl.x);
                apply(sb, &r[1], dl.y);
                apply(sb, &r[2], dl.z);
            }
            continue;
        }
        double lo, hi;
        ph__sys_bounds(s, i, &lo, &hi);
        double dl = -(jv(sb, r) + r->eps * lam[i] - r->rhs) * r->inv_diag;
        double nl = lam[i] + dl;
        nl = nl < lo ? lo : (nl > hi ? hi : nl);
        dl = nl - lam[i];
        lam[i] = nl;
        apply(sb, r, dl);
    }
    sb[0].v = sb[0].w = ph_v3(0, 0, 0);
}

static void op_matvec(ph__sys *s, const int32_t *set, int32_t m, const double *p, double *out) {
    rows_ctx *c = s->ctx;
    for (int32_t k = 0; k < m; k++) {
        const ph__row *r = &c->rows[set[k]];
        c->dv[r->ia] = c->dw[r->ia] = c->dv[r->ib] = c->dw[r->ib] = ph_v3(0, 0, 0);
    }
    for (int32_t k = 0; k < m; k++) {
        const ph__row *r = &c->rows[set[k]];
        c->dv[r->ia] = ph_mul_add(c->dv[r->ia], -p[k] * r->ima, r->lin);
        c->dw[r->ia] = ph_mul_add(c->dw[r->ia], p[k], r->mang_a);
        c->dv[r->ib] = ph_mul_add(c->dv[r->ib], p[k] * r->imb, r->lin);
        c->dw[r->ib] = ph_mul_add(c->dw[r->ib], p[k], r->mang_b);
    }
    for (int32_t k = 0; k < m; k++) {
        const ph__row *r = &c->rows[set[k]];
        out[k] = ph__row_jv_of(r, c->dv[r->ia], c->dw[r->ia], c->dv[r->ib], c->dw[r->ib]) + r->eps * p[k];
    }
}

static double op_entry(const ph__sys *s, int32_t i, int32_t j) {
    const rows_ctx *c = s->ctx;
    return ph__rows_entry(&c->rows[i], &c->rows[j], i == j);
}

static int32_t op_neighbours(const ph__sys *s, int32_t i, int32_t *out) {
    const rows_ctx *c = s->ctx;
    const ph__row *r = &c->rows[i];
    int32_t k = 0;
    /* Rows of body ia, then those of body ib that do not also touch ia
     * (listed already); the ground (body 0) couples nothing. */
    if (r->ia != 0)
        for (int32_t q = c->boff[r->ia]; q < c->boff[r->ia + 1]; q++)
            if (c->brow[q] != i) out[k++] = c->brow[q];
    if (r->ib != 0 && r->ib != r->ia)
        for (int32_t q = c->boff[r->ib]; q < c->boff[r->ib + 1]; q++) {
            const int32_t j = c->brow[q];
            const ph__row *o = &c->rows[j];
            if (j != i && (r->ia == 0 || (o->ia != r->ia && o->ib != r->ia))) out[k++] = j;
        }
    return k;
}

static void op_save(ph__sys *s) {
    rows_ctx *c = s->ctx;
    memcpy(c->slam, s->lambda, (size_t)s->n * sizeof *c->slam);
    for (int32_t b = 0; b < c->nb; b++) {
        c->sv[b] = c->sb[b].v;
        c->sw[b] = c->sb[b].w;
    }
}

static void op_restore(ph__sys *s) {
    rows_ctx *c = s->ctx;
    memcpy(s->lambda, c->slam, (size_t)s->n * sizeof *c->slam);
    for (int32_t b = 0; b < c->nb; b++) {
        c->sb[b].v = c->sv[b];
        c->sb[b].w = c->sw[b];
    }
}

static void op_get_vel(const ph__sys *s, double *out) {
    const rows_ctx *c = s->ctx;
    for (int32_t b = 0; b < c->nb; b++) {
        const ph__sbody *q = &c->sb[b];
        double *o = out + 6 * (size_t)b;
        o[0] = q->v.x, o[1] = q->v.y, o[2] = q->v.z;
        o[3] = q->w.x, o[4] = q->w.y, o[5] = q->w.z;
    }
}

static void op_set_vel(ph__sys *s, const double *in) {
    rows_ctx *c = s->ctx;
    for (int32_t b = 1; b < c->nb; b++) { /* (the ground stays at rest) */
        const double *o = in + 6 * (size_t)b;
        c->sb[b].v = ph_v3(o[0], o[1], o[2]);
        c->sb[b].w = ph_v3(o[3], o[4], o[5]);
    }
}

static const ph__sys_ops rows_ops = {op_row_y, op_add,     op_sweep,      op_matvec,  op_entry,
                                     op_save,  op_restore, op_neighbours, op_get_vel, op_set_vel};

void ph__world_groups(const ph__world *w, int32_t *glen) {
    memset(glen, 0, (size_t)w->row_count * sizeof *glen);
    for (int32_t i = 0; i < w->manifold_count; i++) {
        const ph__contact_manifold *cm = &w->manifolds[i];
        if (cm->row0 < 0) continue;
        for (int k = 0; k < cm->m.count; k++)
            glen[cm->row0 + 3 * k] = 3;
    }
    for (int32_t i = 0; i < w->joint_pool.hwm; i++) {
        const ph__joint *j = &w->joints[i];
        if (j->alive && j->nrows > 0) glen[j->row0] = j->nrows;
    }
}

int ph__rows_solve(const ph__rowset *rs, const ph_settings *set, uint64_t *rng, const int32_t *order,
                   const double *start, ph_step_stats *st, ph__rec *rec) {
    const int32_t n = rs->n, nb = rs->nb;
    const size_t N = (size_t)n + 1;
    ph__arena *ar = rs->arena;
    double *dbl = ph__arena_alloc(ar, 9 * N * sizeof *dbl, "rows system doubles");
    int32_t *ints = dbl ? ph__arena_alloc(ar, (6 * N + 2 * (size_t)nb + 3) * sizeof *ints, "rows system ints") : NULL;
    ph_vec3 *vec = ints ? ph__arena_alloc(ar, 4 * ((size_t)nb + 1) * sizeof *vec, "rows system velocities") : NULL;
    if (!vec) {
        if (ints) ph__arena_free(ar, ints);
        if (dbl) ph__arena_free(ar, dbl);
        return PH_ERR_NO_MEMORY;
    }
    ph__sys s;
    memset(&s, 0, sizeof s);
    rows_ctx c;
    c.rows = rs->rows;
    c.sb = rs->sb;
    c.nb = nb;
    c.blocks = rs->blocks;
    c.dv = vec;
    c.dw = vec + nb + 1;
    c.sv = vec + 2 * ((size_t)nb + 1);
    c.sw = vec + 3 * ((size_t)nb + 1);
    c.slam = dbl + 8 * N;
    s.ops = &rows_ops;
    s.ctx = &c;
    s.n = n;
    s.nvel = 6 * nb;
    s.lambda = dbl;
    s.lo = dbl + N;
    s.hi = dbl + 2 * N;
    s.mu = dbl + 3 * N;
    s.diag = dbl + 4 * N;
    s.B = dbl + 5 * N;
    s.jacobi_w = dbl + 6 * N;
    s.height = dbl + 7 * N;
    s.normal = ints;
    s.order = ints + N;
    s.group_off = ints + 2 * N;
    s.group_rows = ints + 3 * N;
    int32_t *count = ints + 4 * N;
    s.set = set;
    s.rng = rng;
    s.limit = rs->limit;
    s.arena = ar;
    memset(count, 0, ((size_t)nb + 1) * sizeof *count);
    for (int32_t i = 0; i < n; i++) {
        const ph__row *r = &rs->rows[i];
        s.lambda[i] = r->lambda;
        s.lo[i] = r->lo;
        s.hi[i] = r->hi;
        s.mu[i] = r->mu;
        s.normal[i] = r->normal;
        s.diag[i] =
            ph_len2(r->lin) * (r->ima + r->imb) + ph_dot(r->ang_a, r->mang_a) + ph_dot(r->ang_b, r->mang_b) + r->eps;
        s.B[i] = r->B;
        s.height[i] = rs->height ? rs->height[i] : r->height;
        s.order[i] = order ? order[i] : (rs->order ? rs->order[i] : i);
        if (r->ia != 0) count[r->ia]++;
        if (r->ib != 0) count[r->ib]++;
    }
    s.fixed_order = order != NULL;
    for (int32_t i = 0; i < n; i++) {
        const ph__row *r = &rs->rows[i];
        int32_t k = count[r->ia] > count[r->ib] ? count[r->ia] : count[r->ib];
        s.jacobi_w[i] = k > 0 ? 1.0 / (double)k : 1.0;
    }
    /* Each body's rows (a row on the same body twice counts once). */
    int32_t *boff = ints + 4 * N + nb + 1, *brow = boff + nb + 2;
    memset(count, 0, ((size_t)nb + 1) * sizeof *count);
    for (int32_t i = 0; i < n; i++) {
        const ph__row *r = &rs->rows[i];
        if (r->ia != 0) count[r->ia]++;
        if (r->ib != 0 && r->ib != r->ia) count[r->ib]++;
    }
    boff[0] = 0;
    for (int32_t b = 0; b <= nb; b++)
        boff[b + 1] = boff[b] + count[b];
    for (int32_t i = 0; i < n; i++) {
        const ph__row *r = &rs->rows[i];
        if (r->ia != 0) brow[boff[r->ia + 1] - count[r->ia]--] = i;
        if (r->ib != 0 && r->ib != r->ia) brow[boff[r->ib + 1] - count[r->ib]--] = i;
    }
    c.boff = boff;
    c.brow = brow;
    /* Blocks: contiguous runs given by glen, orphan rows alone. */
    int32_t g = 0;
    for (int32_t i = 0; i < n;) {
        int32_t len = rs->glen && rs->glen[i] > 0 ? rs->glen[i] : 1;
        if (len > PH__SMALL_MAX || i + len > n) len = 1;
        s.group_off[g++] = i;
        for (int32_t k = 0; k < len; k++)
            s.group_rows[i + k] = i + k;
        i += len;
    }
    s.group_off[g] = n;
    s.group_count = g;
    if (start) {
        for (int32_t i = 0; i < n; i++)
            if (start[i] != s.lambda[i]) op_add(&s, i, start[i] - s.lambda[i]);
        rs->sb[0].v = rs->sb[0].w = ph_v3(0, 0, 0);
    }
    int e = ph__sys_solve(&s, st, rec);
    for (int32_t i = 0; i < n; i++)
        rs->rows[i].lambda = s.lambda[i];
    rs->sb[0].v = rs->sb[0].w = ph_v3(0, 0, 0);
    ph__arena_free(ar, vec);
    ph__arena_free(ar, ints);
    ph__arena_free(ar, dbl);
    return e;
}
