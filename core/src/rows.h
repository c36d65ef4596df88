/*
 * rows.h — constraint rows and solver bodies (solver.c builds the rows with
 * SPOOK coefficients; every solver reads them): the row record, the
 * bilateral 3-row block, a solver body's velocities, and the inline
 * arithmetic of one row shared by the scalar solvers.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_ROWS_H
#define PHYSD_ROWS_H

#include "physd/ph_core.h"

typedef struct ph__world ph__world;

/* A constraint row: J = [-lin ang_a lin ang_b] (every row kind pulls its
 * two bodies along opposite linear directions), with the angular parts of
 * M^-1 J^T precomputed and the inverse masses copied, so the solver loop
 * reads about 200 bytes per row. */
typedef struct ph__row {
    int32_t ia, ib; /* solver body indices (0 = the fixed ground) */
    ph_vec3 lin;    /* linear Jacobian on B; A's is -lin */
    ph_vec3 ang_a, ang_b;
    ph_vec3 mang_a, mang_b; /* I^-1 ang */
    double ima, imb;        /* inverse masses of A and B */
    double inv_diag;        /* 1 / (J M^-1 J^T + eps) */
    double eps;
    double rhs;     /* -a g + (1 - b) J v0, or the target velocity */
    double lo, hi;  /* bounds; for NCP friction recomputed from the normal row */
    double mu;      /* friction rows: coefficient */
    int32_t normal; /* friction rows (NCP): index of the normal row, else -1 */
    int32_t direct; /* 1: solved with the joints' direct block (joint_direct.c), not
                       by the scalar loop */
    double lambda;
    int32_t block; /* >= 0: first row of a bilateral 3-row block (index into
                      w->blocks); -2: a later row of a block; -1: none */
    double B;      /* the row of the SPOOK right-hand side B, for the residual */
    double height; /* ordering key: contact height along -gravity */
} ph__row;

/* Three bilateral rows solved together (the linear rows of a joint): the
 * inverse of their 3x3 block of S = G M^-1 G^T + Sigma. */
typedef struct ph__block {
    int32_t row;
    ph_mat3 inv;
} ph__block;

/* A solver body's velocities before its substep's forces (the W of the
 * SPOOK right-hand side), laid out like the start of ph__sbody so that the
 * wide solver loads them the same way (two 32-byte loads). */
typedef struct ph__vw {
    ph_vec3 v, w;
    double pad[2];
} ph__vw;

typedef struct ph__sbody {
    /* 64-byte aligned (192 bytes): v, w, inv_mass and inv_i[0][0], what
     * the sweeps gather and the integration loads, in one cache line
     * (136 bytes apart, 7 of 8 records straddled two; docs/profile.md) */
    _Alignas(64) ph_vec3 v;
    ph_vec3 w;
    double inv_mass;
    ph_mat3 inv_i; /* world */
    int iso;       /* 1: inv_i is inv_i.m[0][0] times the identity (equal principal
                      moments, or the ground), so inv_i v = inv_i.m[0][0] v exactly */
} ph__sbody;

/* Adds one body's part of the collision matrix at arm r to k:
 * (1/m) I - [r]x I^-1 [r]x, column by column (SPOOK notes, eq. 2). */
static inline void ph__add_collision_k(ph_mat3 *k, double inv_mass, const ph_mat3 *inv_i, ph_vec3 r) {
    static const ph_vec3 e[3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    for (int c = 0; c < 3; c++) {
        ph_vec3 col = ph_add(ph_scale(e[c], inv_mass), ph_cross(ph_mat3_mulv(inv_i, ph_cross(r, e[c])), r));
        k->m[0][c] += col.x;
        k->m[1][c] += col.y;
        k->m[2][c] += col.z;
    }
}

/* J v of a row for the given velocities of its two bodies. */
static inline double ph__row_jv_of(const ph__row *r, ph_vec3 va, ph_vec3 wa, ph_vec3 vb, ph_vec3 wb) {
    return ph_dot(r->lin, ph_sub(vb, va)) + ph_dot(r->ang_a, wa) + ph_dot(r->ang_b, wb);
}

/* J v of a row at the solver bodies' current velocities. */
static inline double ph__row_jv(const ph__sbody *sb, const ph__row *r) {
    const ph__sbody *a = &sb[r->ia], *b = &sb[r->ib];
    return ph__row_jv_of(r, a->v, a->w, b->v, b->w);
}

/* v += M^-1 J^T dl for the row's two bodies. */
static inline void ph__row_apply(ph__sbody *sb, const ph__row *r, double dl) {
    ph__sbody *a = &sb[r->ia], *b = &sb[r->ib];
    a->v = ph_mul_add(a->v, -dl * r->ima, r->lin);
    a->w = ph_mul_add(a->w, dl, r->mang_a);
    b->v = ph_mul_add(b->v, dl * r->imb, r->lin);
    b->w = ph_mul_add(b->w, dl, r->mang_b);
}

/* J_a M^-1 J_b^T: the coupling of two rows through the bodies they share. */
static inline double ph__row_couple(const ph__row *a, const ph__row *b) {
    double v = 0, ll = ph_dot(a->lin, b->lin);
    if (a->ia != 0 && a->ia == b->ia) v += ll * b->ima + ph_dot(a->ang_a, b->mang_a);
    if (a->ia != 0 && a->ia == b->ib) v += -ll * b->imb + ph_dot(a->ang_a, b->mang_b);
    if (a->ib != 0 && a->ib == b->ia) v += -ll * b->ima + ph_dot(a->ang_b, b->mang_a);
    if (a->ib != 0 && a->ib == b->ib) v += ll * b->imb + ph_dot(a->ang_b, b->mang_b);
    return v;
}

/* Adds a row (zeroed, lo = -inf, hi = inf, normal = -1); NULL on no memory. */
ph__row *ph__add_row(ph__world *w);
/* SPOOK parameters of one constraint kind at step h (seeds/002, eqs. 9-11):
 * a, b, and the regularization eps = eps_abs + eps_rel (G M^-1 G^T) of a
 * row (eps_rel is nonzero only for frequency-based stiffness). */
typedef struct ph__spook_coef {
    double a, b, eps_abs, eps_rel;
    int pair_mass; /* eps_rel scales the pair's translational (or, for purely
                      angular rows, rotational) inverse mass instead of the
                      row's full G M^-1 G^T: used for joints, whose anchors
                      may sit far from the centres of mass */
} ph__spook_coef;
ph__spook_coef ph__spook(ph_spook p, double h);
/* Fills M^-1 J^T, eps and inv_diag of a row from the solver bodies; c NULL
 * means no regularization. */
void ph__finish_row(ph__world *w, ph__row *r, const ph__spook_coef *c);

/* Makes rows first..first+2 (bilateral, same bodies) one block. */
int ph__make_block(ph__world *w, int32_t first);

#endif /* PHYSD_ROWS_H */
