/*
 * sweep_kernel.c — physd-sweep-kernel: the contact sweep's inner loop alone,
 * in four lane layouts, to decide whether the solver's rows should move from
 * four double lanes to eight (or sixteen) float lanes (docs/profile.md,
 * fourth session).
 *
 * The kernel is the arithmetic of solver_wide.c's sweep (row_update and
 * point_update: J v, the SPOOK update of one row, the clamp, v += M^-1 J^T
 * dl) on synthetic batches laid out as there: a batch holds one contact
 * point of each lane (normal, t1, t2), four consecutive batches form a
 * group whose lanes share their two bodies (gathered once, scattered once),
 * and two groups are interleaved. The body velocities are gathered and
 * scattered element by element (solver_wide.c uses 4 x 4 transposes for four
 * double lanes, so the real double sweep is somewhat faster than this one;
 * compare the layouts with each other, not with physd-bench). The same
 * numbers go into every layout; the result is checked to be finite.
 *
 * Usage: physd-sweep-kernel [--points N] [--reps R]
 * Prints one JSON line per layout the CPU supports: the best and the median
 * nanoseconds per row update over R sweeps of N contact points (3 rows
 * each). Default N = 2360 (pyramid20's contact points), R = 200.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One layout: element type T, L lanes, IT the integer type of T's size,
 * compiled for target TGT. Defines NAME(points, reps, out_ns[reps]),
 * returning a checksum of the impulses. */
#define PH_KERNEL(NAME, T, L, IT, TGT)                                                                                 \
    typedef T NAME##_v __attribute__((vector_size((L) * sizeof(T)), aligned(sizeof(T))));                              \
    typedef IT NAME##_m __attribute__((vector_size((L) * sizeof(T))));                                                 \
    typedef struct {                                                                                                   \
        NAME##_v lin[3], aa[3], ab[3], ma[3], mb[3], inv, eps, rhs, lam;                                               \
    } NAME##_row;                                                                                                      \
    typedef struct {                                                                                                   \
        int ia[L], ib[L];                                                                                              \
        NAME##_v ima, imb, mu;                                                                                         \
        NAME##_row r[3];                                                                                               \
    } NAME##_batch;                                                                                                    \
    typedef struct {                                                                                                   \
        NAME##_v va[3], wa[3], vb[3], wb[3];                                                                           \
    } NAME##_vel;                                                                                                      \
    __attribute__((target(TGT))) static inline NAME##_v NAME##_sel(NAME##_m m, NAME##_v a, NAME##_v b) {               \
        return (NAME##_v)(((NAME##_m)a & m) | ((NAME##_m)b & ~m));                                                     \
    }                                                                                                                  \
    __attribute__((target(TGT))) static inline void NAME##_gather(const T *bod, const NAME##_batch *b,                 \
                                                                  NAME##_vel *u) {                                     \
        for (int c = 0; c < 3; c++)                                                                                    \
            for (int j = 0; j < (L); j++) {                                                                            \
                u->va[c][j] = bod[8 * b->ia[j] + c];                                                                   \
                u->wa[c][j] = bod[8 * b->ia[j] + 3 + c];                                                               \
                u->vb[c][j] = bod[8 * b->ib[j] + c];                                                                   \
                u->wb[c][j] = bod[8 * b->ib[j] + 3 + c];                                                               \
            }                                                                                                          \
    }                                                                                                                  \
    __attribute__((target(TGT))) static inline void NAME##_scatter(T *bod, const NAME##_batch *b,                      \
                                                                   const NAME##_vel *u) {                              \
        for (int j = 0; j < (L); j++)                                                                                  \
            for (int c = 0; c < 3; c++) {                                                                              \
                bod[8 * b->ia[j] + c] = u->va[c][j];                                                                   \
                bod[8 * b->ia[j] + 3 + c] = u->wa[c][j];                                                               \
                bod[8 * b->ib[j] + c] = u->vb[c][j];                                                                   \
                bod[8 * b->ib[j] + 3 + c] = u->wb[c][j];                                                               \
            }                                                                                                          \
    }                                                                                                                  \
    __attribute__((target(TGT))) static inline void NAME##_update(NAME##_row *r, NAME##_v lo, NAME##_v hi,             \
                                                                  NAME##_v ima, NAME##_v imb, NAME##_vel *u) {         \
        const NAME##_v jv = ((r->lin[0] * (u->vb[0] - u->va[0]) + r->lin[1] * (u->vb[1] - u->va[1]) +                  \
                              r->lin[2] * (u->vb[2] - u->va[2])) +                                                     \
                             (r->aa[0] * u->wa[0] + r->aa[1] * u->wa[1] + r->aa[2] * u->wa[2])) +                      \
                            (r->ab[0] * u->wb[0] + r->ab[1] * u->wb[1] + r->ab[2] * u->wb[2]);                         \
        const NAME##_v dl0 = -(jv + r->eps * r->lam - r->rhs) * r->inv;                                                \
        NAME##_v nl = r->lam + dl0;                                                                                    \
        nl = NAME##_sel(nl < lo, lo, NAME##_sel(nl > hi, hi, nl));                                                     \
        const NAME##_v dl = nl - r->lam;                                                                               \
        r->lam = nl;                                                                                                   \
        const NAME##_v sa = -dl * ima, sb = dl * imb;                                                                  \
        for (int c = 0; c < 3; c++) {                                                                                  \
            u->va[c] = u->va[c] + sa * r->lin[c];                                                                      \
            u->wa[c] = u->wa[c] + dl * r->ma[c];                                                                       \
            u->vb[c] = u->vb[c] + sb * r->lin[c];                                                                      \
            u->wb[c] = u->wb[c] + dl * r->mb[c];                                                                       \
        }                                                                                                              \
    }                                                                                                                  \
    __attribute__((target(TGT))) static double NAME(int points, int reps, double *out_ns) {                            \
        const int ngroups = (points + 4 * (L)-1) / (4 * (L)), nb = 4 * ngroups;                                        \
        const int nbody = 2 * (L)*ngroups + 1;                                                                         \
        T *bod = calloc((size_t)nbody * 8, sizeof(T));                                                                 \
        NAME##_batch *B = calloc((size_t)nb, sizeof(NAME##_batch));                                                    \
        if (!bod || !B) {                                                                                              \
            free(bod);                                                                                                 \
            free(B);                                                                                                   \
            return NAN;                                                                                                \
        }                                                                                                              \
        for (int i = 0; i < nb; i++) {                                                                                 \
            NAME##_batch *b = &B[i];                                                                                   \
            const int g = i / 4;                                                                                       \
            for (int j = 0; j < (L); j++) {                                                                            \
                b->ia[j] = 1 + 2 * ((L)*g + j);                                                                        \
                b->ib[j] = 2 + 2 * ((L)*g + j);                                                                        \
                b->ima[j] = 1e-3;                                                                                      \
                b->imb[j] = 1e-3;                                                                                      \
                b->mu[j] = 0.5;                                                                                        \
            }                                                                                                          \
            for (int q = 0; q < 3; q++) {                                                                              \
                NAME##_row *r = &b->r[q];                                                                              \
                for (int j = 0; j < (L); j++) {                                                                        \
                    for (int c = 0; c < 3; c++) {                                                                      \
                        r->lin[c][j] = c == q;                                                                         \
                        r->aa[c][j] = (T)(0.3 * (c == (q + 1) % 3));                                                   \
                        r->ab[c][j] = (T)(-0.3 * (c == (q + 1) % 3));                                                  \
                        r->ma[c][j] = (T)(3e-4 * (c == (q + 1) % 3));                                                  \
                        r->mb[c][j] = (T)(-3e-4 * (c == (q + 1) % 3));                                                 \
                    }                                                                                                  \
                    r->inv[j] = (T)(1.0 / 2.2e-3);                                                                     \
                    r->eps[j] = (T)1e-5;                                                                               \
                    r->rhs[j] = (T)(q == 0 ? 0.01 : 0.0);                                                              \
                    r->lam[j] = 0;                                                                                     \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        NAME##_v zero, inf;                                                                                            \
        for (int j = 0; j < (L); j++) {                                                                                \
            zero[j] = 0;                                                                                               \
            inf[j] = (T)1e30;                                                                                          \
        }                                                                                                              \
        for (int rep = 0; rep < reps; rep++) {                                                                         \
            const double t0 = now_ns();                                                                                \
            for (int g = 0; g + 8 <= nb; g += 8) {                                                                     \
                NAME##_vel u0, u1;                                                                                     \
                NAME##_gather(bod, &B[g], &u0);                                                                        \
                NAME##_gather(bod, &B[g + 4], &u1);                                                                    \
                for (int k = 0; k < 4; k++) {                                                                          \
                    NAME##_batch *b0 = &B[g + k], *b1 = &B[g + 4 + k];                                                 \
                    NAME##_update(&b0->r[0], zero, inf, b0->ima, b0->imb, &u0);                                        \
                    NAME##_update(&b1->r[0], zero, inf, b1->ima, b1->imb, &u1);                                        \
                    const NAME##_v bd0 = b0->mu * b0->r[0].lam, bd1 = b1->mu * b1->r[0].lam;                           \
                    NAME##_update(&b0->r[1], -bd0, bd0, b0->ima, b0->imb, &u0);                                        \
                    NAME##_update(&b1->r[1], -bd1, bd1, b1->ima, b1->imb, &u1);                                        \
                    NAME##_update(&b0->r[2], -bd0, bd0, b0->ima, b0->imb, &u0);                                        \
                    NAME##_update(&b1->r[2], -bd1, bd1, b1->ima, b1->imb, &u1);                                        \
                }                                                                                                      \
                NAME##_scatter(bod, &B[g], &u0);                                                                       \
                NAME##_scatter(bod, &B[g + 4], &u1);                                                                   \
            }                                                                                                          \
            out_ns[rep] = (now_ns() - t0) / (3.0 * (L) * (nb - nb % 8));                                               \
        }                                                                                                              \
        double sum = 0;                                                                                                \
        for (int i = 0; i < nb; i++)                                                                                   \
            for (int j = 0; j < (L); j++)                                                                              \
                sum += (double)B[i].r[0].lam[j];                                                                       \
        free(bod);                                                                                                     \
        free(B);                                                                                                       \
        return sum;                                                                                                    \
    }

#if defined(__x86_64__)
PH_KERNEL(k_double4, double, 4, long long, "avx2")
PH_KERNEL(k_float8, float, 8, int, "avx2")
PH_KERNEL(k_double8, double, 8, long long, "avx512f,avx512vl")
PH_KERNEL(k_float16, float, 16, int, "avx512f,avx512vl")
#endif

int main(int argc, char **argv) {
    int points = 2360, reps = 200;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--points") == 0 && i + 1 < argc)
            points = atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: physd-sweep-kernel [--points N (64..1000000)] [--reps R (1..100000)]\n");
            return 2;
        }
    }
    if (points < 64 || points > 1000000 || reps < 1 || reps > 100000) {
        fprintf(stderr, "physd-sweep-kernel: --points must be in 64..1000000 and --reps in 1..100000\n");
        return 2;
    }
#if defined(__x86_64__)
    double *ns = malloc((size_t)reps * sizeof *ns);
    if (!ns) return 1;
    __builtin_cpu_init();
    const int avx2 = __builtin_cpu_supports("avx2"),
              avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
    struct {
        const char *name;
        int ok;
        double (*fn)(int, int, double *);
    } v[] = {{"double x4 (256-bit)", avx2, k_double4},
             {"float x8 (256-bit)", avx2, k_float8},
             {"double x8 (512-bit)", avx512, k_double8},
             {"float x16 (512-bit)", avx512, k_float16}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        if (!v[i].ok) continue;
        const double check = v[i].fn(points, reps, ns);
        qsort(ns, (size_t)reps, sizeof *ns, cmp_double);
        printf("{\"bench\":\"sweep_kernel\",\"layout\":\"%s\",\"points\":%d,\"reps\":%d,"
               "\"ns_per_row_best\":%.3f,\"ns_per_row_median\":%.3f,\"finite\":%s}\n",
               v[i].name, points, reps, ns[0], ns[reps / 2], isfinite(check) ? "true" : "false");
    }
    free(ns);
    return 0;
#else
    fprintf(stderr, "physd-sweep-kernel: x86-64 only\n");
    return 1;
#endif
}
