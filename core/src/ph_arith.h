/*
 * ph_arith.h — arithmetic that the scalar and the four-lane code share,
 * written once over a type parameter T (double, or a lane vector of
 * ph_simd.h: GCC/clang vector extensions give both the same + - * and
 * comparisons). Each includer instantiates what it needs for its type:
 * solver.c for double, solver_wide_points.h for ph__vd.
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

#endif
