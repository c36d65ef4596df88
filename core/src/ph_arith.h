/*
 * ph_arith.h — arithmetic that the scalar and the four-lane code share,
 * written once over a type parameter T (double, or a lane vector of
 * ph_simd.h: GCC/clang vector extensions give both the same + - * and
 * comparisons). Each includer instantiates what it needs for its type:
 * solver.c, step.c and contact_rows.c for double, solver_wide_points.h,
 * solver_wide_rows.h and integrate_wide.c for the lane vectors.
 *
 * Invariants: the same operations in the same order for every T (no
 * contraction: -ffp-contract=off), so a lane of the vector result is the
 * scalar result bit for bit; the functions are static and always inlined,
 * so each instruction-set build of a pass compiles them with its own
 * instructions and the shared form costs nothing.
 */
#ifndef PH_ARITH_H
#define PH_ARITH_H

/* name(K, c): of a symmetric 3 x 3 block K, the upper triangle of its
 * adjugate c = {00, 01, 02, 11, 12, 22} (the cofactors), and the
 * determinant expanded along row 0 as the return value; K^-1 = c / det
 * when det > 0 (the contact point's block, solver.c and
 * solver_wide_points.h). */
#define PH__DEFINE_ADJ3(name, T)                                                                                       \
    static inline __attribute__((always_inline)) T name(T(*K)[3], T *c) {                                              \
        c[0] = K[1][1] * K[2][2] - K[1][2] * K[1][2];                                                                  \
        c[1] = K[0][2] * K[1][2] - K[0][1] * K[2][2];                                                                  \
        c[2] = K[0][1] * K[1][2] - K[0][2] * K[1][1];                                                                  \
        c[3] = K[0][0] * K[2][2] - K[0][2] * K[0][2];                                                                  \
        c[4] = K[0][1] * K[0][2] - K[0][0] * K[1][2];                                                                  \
        c[5] = K[0][0] * K[1][1] - K[0][1] * K[0][1];                                                                  \
        return (K[0][0] * c[0] + K[0][1] * c[1]) + K[0][2] * c[2];                                                     \
    }

/* name(ax, ay, az, zero, q, hh, n): one body's orientation step
 * n = q + hh (a, 0) q with hh = h / 2 (q as x y z w; renormalized by the
 * caller). The product is ph_quat_mul's, its terms in its order, the zero
 * scalar part of (a, 0) included: it decides the signs of zeros (step.c's
 * ph__integrate_body, integrate_wide.c). */
#define PH__DEFINE_QUAT_STEP(name, T)                                                                                  \
    static inline __attribute__((always_inline)) void name(T ax, T ay, T az, T zero, const T *q, T hh, T *n) {         \
        const T aw = zero, qx = q[0], qy = q[1], qz = q[2], qw = q[3];                                                 \
        const T dw = ((aw * qw - ax * qx) - ay * qy) - az * qz;                                                        \
        const T dx = ((aw * qx + ax * qw) + ay * qz) - az * qy;                                                        \
        const T dy = ((aw * qy - ax * qz) + ay * qw) + az * qx;                                                        \
        const T dz = ((aw * qz + ax * qy) - ay * qx) + az * qw;                                                        \
        n[0] = qx + hh * dx;                                                                                           \
        n[1] = qy + hh * dy;                                                                                           \
        n[2] = qz + hh * dz;                                                                                           \
        n[3] = qw + hh * dw;                                                                                           \
    }

/* The choice of x where m holds, else y, for double (a branch); the lane
 * vectors pass their own (select_vd, solver_wide_lanes.h). */
#define PH__SELECT(m, x, y) ((m) ? (x) : (y))

/* name(x, lo, hi): x clamped to [lo, hi], lo tested first (an impulse's
 * projection in the point block and the warm start's friction clamp;
 * SELECT as above). */
#define PH__DEFINE_CLAMP(name, T, SELECT)                                                                              \
    static inline __attribute__((always_inline)) T name(T x, T lo, T hi) {                                             \
        return SELECT(x < lo, lo, SELECT(x > hi, hi, x));                                                              \
    }

/* The target of a contact normal in the relaxation pass (docs/core.md
 * "Contact relaxation"): J_n v = 0 for a touching or penetrating point,
 * the gap closed within the substep for a separated (speculative) one, as
 * the SPOOK right-hand side of a separated point. */
#define PH__DEFINE_RELAX_TARGET(name, T, SELECT)                                                                       \
    static inline __attribute__((always_inline)) T name(T gap, T h, T zero) {                                          \
        return SELECT(gap > zero, -gap / h, zero);                                                                     \
    }

/* name(gap, jv0, a, omb, h, zero): a contact normal's SPOOK right-hand side
 * from its gap g and J v0: -a g + (1 - b) J v0 when touching (g <= 0),
 * else -g / h, the gap closed within the step (omb = 1 - b; contact_rows.c
 * and solver_wide_rows.h / solver_wide_points.h, in the fill and the
 * refresh). */
#define PH__DEFINE_SPOOK_RHS(name, T, SELECT)                                                                          \
    static inline __attribute__((always_inline)) T name(T gap, T jv0, T a, T omb, T h, T zero) {                       \
        return SELECT(gap <= zero, -a * gap + omb * jv0, -gap / h);                                                    \
    }

#endif
