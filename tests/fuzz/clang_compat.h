/*
 * clang_compat.h — force-included (-include) into every file of the
 * PHYSD_FUZZ build. The core is written for GCC and uses GCC's vector
 * builtin __builtin_shuffle, which clang does not have (clang's
 * __builtin_shufflevector takes constant indices). This defines it as a
 * macro with GCC's semantics, element by element: slower, same results.
 *   __builtin_shuffle(a, mask):    r[i] = a[mask[i] % N]
 *   __builtin_shuffle(a, b, mask): r[i] = (a ++ b)[mask[i] % 2N]
 * The two-operand form is told apart by its argument count; a mask written
 * as a compound literal, (T){0, 1, 2, 3}, arrives split at its commas and is
 * put back together by __VA_ARGS__.
 */
#ifndef PHYSD_FUZZ_CLANG_COMPAT_H
#define PHYSD_FUZZ_CLANG_COMPAT_H
#if defined(__clang__) && !defined(__builtin_shuffle)

#define PH_FZ_SHUF2(a, ...)                                                                                            \
    __extension__({                                                                                                    \
        const __typeof__(a) ph_fz_a = (a);                                                                             \
        const __typeof__(__VA_ARGS__) ph_fz_m = __VA_ARGS__;                                                           \
        __typeof__(+(a)) ph_fz_r;                                                                                      \
        const unsigned ph_fz_n = (unsigned)(sizeof ph_fz_a / sizeof ph_fz_a[0]);                                       \
        for (unsigned ph_fz_i = 0; ph_fz_i < ph_fz_n; ph_fz_i++)                                                       \
            ph_fz_r[ph_fz_i] = ph_fz_a[(unsigned)ph_fz_m[ph_fz_i] % ph_fz_n];                                          \
        ph_fz_r;                                                                                                       \
    })

#define PH_FZ_SHUF3(a, b, m)                                                                                           \
    __extension__({                                                                                                    \
        const __typeof__(a) ph_fz_a = (a), ph_fz_b = (b);                                                              \
        const __typeof__(m) ph_fz_m = (m);                                                                             \
        __typeof__(+(a)) ph_fz_r;                                                                                      \
        const unsigned ph_fz_n = (unsigned)(sizeof ph_fz_a / sizeof ph_fz_a[0]);                                       \
        for (unsigned ph_fz_i = 0; ph_fz_i < ph_fz_n; ph_fz_i++) {                                                     \
            const unsigned ph_fz_k = (unsigned)ph_fz_m[ph_fz_i] % (2 * ph_fz_n);                                       \
            ph_fz_r[ph_fz_i] = ph_fz_k < ph_fz_n ? ph_fz_a[ph_fz_k] : ph_fz_b[ph_fz_k - ph_fz_n];                      \
        }                                                                                                              \
        ph_fz_r;                                                                                                       \
    })

#define PH_FZ_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, NAME, ...) NAME
/* 3 arguments: the two-vector form; 2 or 4+ (a split compound literal): one vector. */
#define __builtin_shuffle(...)                                                                                         \
    PH_FZ_PICK(__VA_ARGS__, PH_FZ_SHUF2, PH_FZ_SHUF2, PH_FZ_SHUF2, PH_FZ_SHUF2, PH_FZ_SHUF2, PH_FZ_SHUF2, PH_FZ_SHUF3, \
               PH_FZ_SHUF2, unused)                                                                                    \
    (__VA_ARGS__)

#endif
#endif /* PHYSD_FUZZ_CLANG_COMPAT_H */
