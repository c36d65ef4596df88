/*
 * ph_simd.h — what the core's vector passes share: four doubles in a
 * 256-bit vector (GCC vector extensions; unaligned 8-byte loads), the 4 x 4
 * transpose that turns four records into one vector per field and back,
 * and the three instruction-set builds of a pass with their dispatch on
 * the world's simd_level (AVX-512VL, AVX2, the x86-64 baseline). None
 * contracts to fused multiply-adds (-ffp-contract=off), so every build and
 * the scalar code give the same numbers, operation for operation.
 */
#ifndef PH_SIMD_H
#define PH_SIMD_H

#include <string.h>

/* Asks for the cache lines of [p, p + n) ahead of their use, to be read or
 * written (a hint: no fault, no effect on any value). For the records a
 * large world's tile streams from memory in an order the hardware cannot
 * guess (docs/profile.md, "A seventeenth pass"). */
static inline __attribute__((always_inline)) void ph__prefetch_read(const void *p, size_t n) {
    for (size_t k = 0; k < n; k += 64)
        __builtin_prefetch((const char *)p + k, 0, 3);
}
static inline __attribute__((always_inline)) void ph__prefetch_write(void *p, size_t n) {
    for (size_t k = 0; k < n; k += 64)
        __builtin_prefetch((char *)p + k, 1, 3);
}

typedef double ph__v4d __attribute__((vector_size(32), aligned(8)));
typedef long long ph__vi4 __attribute__((vector_size(32)));

static inline __attribute__((always_inline)) ph__v4d load4(const double *p) {
    ph__v4d v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) void store4(double *p, ph__v4d v) { memcpy(p, &v, sizeof v); }

static inline __attribute__((always_inline)) ph__v4d splat4(double x) { return (ph__v4d){x, x, x, x}; }

/* Rows r0..r3 to columns c[0..3] (and back: a transpose is its own
 * inverse). */
static inline __attribute__((always_inline)) void transpose4(ph__v4d r0, ph__v4d r1, ph__v4d r2, ph__v4d r3,
                                                             ph__v4d *c0, ph__v4d *c1, ph__v4d *c2, ph__v4d *c3) {
    const ph__vi4 lo = {0, 4, 2, 6}, hi = {1, 5, 3, 7}, first = {0, 1, 4, 5}, second = {2, 3, 6, 7};
    const ph__v4d t0 = __builtin_shuffle(r0, r1, lo), t1 = __builtin_shuffle(r0, r1, hi);
    const ph__v4d t2 = __builtin_shuffle(r2, r3, lo), t3 = __builtin_shuffle(r2, r3, hi);
    *c0 = __builtin_shuffle(t0, t2, first);
    *c2 = __builtin_shuffle(t0, t2, second);
    *c1 = __builtin_shuffle(t1, t3, first);
    *c3 = __builtin_shuffle(t1, t3, second);
}

/* Three builds of a pass name##_body: AVX-512 (AVX-512VL: the same
 * four-double vectors, 32 registers instead of 16), AVX2, and the x86-64
 * baseline (two SSE2 halves); PH_DISPATCH picks the world's. */
#if defined(__x86_64__) || defined(__i386__)
#define PH_X86_TARGET(t) __attribute__((target(t)))
#else
/* Elsewhere the "wide" builds are the generic vector code (ph__simd_level
 * always answers "baseline"). */
#define PH_X86_TARGET(t)
#endif
/* PH_VARIANTS_ISA: the same three builds, each passing its instruction
 * set to the body as a constant first argument (0 baseline, 1 AVX2, 2
 * AVX-512: the world's simd_level that PH_DISPATCH picked it for), so that
 * a body can choose code by build at compile time, with no dead copy of the
 * other choice in each build. */
#define PH__ARGS(...) __VA_ARGS__
#ifdef PH_SIMD_BASELINE_ONLY
/* A build with the baseline pass only (-DPHYSD_SIMD_VARIANTS=OFF: the CI's
 * libFuzzer build, whose instrumented compile of three builds of every
 * always-inlined pass took most of its time). The builds give the same
 * numbers, so only the speed differs; ph__simd_level answers "baseline". */
#define PH_VARIANTS(name, params, args)                                                                                \
    static void name##_base params { name##_body args; }
#define PH_VARIANTS_ISA(name, params, args)                                                                            \
    static void name##_base params { name##_body(0, PH__ARGS args); }
#define PH_DISPATCH(w, name, args) name##_base args
#else
#define PH_VARIANTS(name, params, args)                                                                                \
    PH_X86_TARGET("avx512f,avx512vl") static void name##_avx512 params { name##_body args; }                           \
    PH_X86_TARGET("avx2") static void name##_avx2 params { name##_body args; }                                         \
    static void name##_base params { name##_body args; }
#define PH_VARIANTS_ISA(name, params, args)                                                                            \
    PH_X86_TARGET("avx512f,avx512vl") static void name##_avx512 params { name##_body(2, PH__ARGS args); }              \
    PH_X86_TARGET("avx2") static void name##_avx2 params { name##_body(1, PH__ARGS args); }                            \
    static void name##_base params { name##_body(0, PH__ARGS args); }
#define PH_DISPATCH(w, name, args)                                                                                     \
    do {                                                                                                               \
        if ((w)->simd_level == 2)                                                                                      \
            name##_avx512 args;                                                                                        \
        else if ((w)->simd_level == 1)                                                                                 \
            name##_avx2 args;                                                                                          \
        else                                                                                                           \
            name##_base args;                                                                                          \
    } while (0)
#endif

#endif
