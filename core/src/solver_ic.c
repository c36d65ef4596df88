/*
 * solver_ic.c — incomplete Cholesky IC(0) of the reduced matrix of a
 * PGS–SM subspace step, the sparse preconditioner of its conjugate
 * gradients (sm_preconditioner = 2, docs/solvers.md).
 *
 * Normal path: ph__ic_factor takes the m rows of the active set A (system
 * rows, in increasing index order) and builds the pattern of S_AA from the
 * system's neighbours operation: two rows are coupled when they share a
 * body other than the ground (dense back end: a nonzero entry). It keeps
 * the strictly lower part by rows, columns sorted, and factors
 *   S_AA + diag(gamma_A) ~ L D L^T,  L unit lower triangular on that pattern,
 * row by row (for the entry (i, j): t = S_ij - sum_k L_ik d_k L_jk over the
 * k < j in both rows' patterns, L_ij = t / d_j; then d_i = S_ii + gamma_i -
 * sum_j L_ij^2 d_j). Fill outside the pattern is dropped: that is IC(0).
 * On a system whose row-coupling graph eliminates without fill in this
 * order — a chain of jointed bodies numbered along the chain, with its
 * contact rows first, as the world numbers them — nothing is dropped and
 * L D L^T = S_AA exactly, so CG converges in one iteration. ph__ic_apply
 * solves L D L^T z = r by a forward and a backward substitution.
 *
 * Cost (docs/solvers.md, the unit of the removed block-Jacobi attempt): a
 * sweep visits every row once, one gather and one scatter, about
 * PH__IC_OPS_PER_ROW = 24 multiply-adds; costs are reported in such
 * sweep-row units. Each off-diagonal entry S_ij formed costs 0.5 (each pair
 * once: S is symmetric; the diagonal is known); each multiply-add or
 * division of the factorization 1/24; an application 2 nnz(L) + m
 * operations, over 24. Building the pattern (integer work: neighbour
 * lists, marks, sorting) is not counted, like the classification of the
 * rows in solver_pgssm.c.
 *
 * Failure modes: reports PH__IC_BREAKDOWN — a pivot d_i <= 1e-12 (S_ii +
 * gamma_i): IC(0) of an SPD matrix that is not an M-matrix can have
 * non-positive pivots (Kershaw's 4x4 example) — with the cost of the
 * attempt in factor_cost; the caller then preconditions by the diagonal
 * (no shift is tried). Reports PH__IC_OVER_BUDGET, having spent nothing,
 * when the worst-case cost of the factorization plus two applications
 * exceeds max_cost; returns PH_ERR_NO_MEMORY when the scratch cannot
 * grow (the caller falls back to the diagonal; the struct stays valid and
 * can be freed).
 *
 * Invariants: between calls every pos[] and mark[] entry is -1, so both
 * are reused without clearing; a factor is valid only after
 * PH__IC_FACTORED, for the rows f->set[0..m).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "solver.h"

/* A pivot at or below this fraction of its diagonal is a breakdown. */
#define IC_PIVOT_MIN 1e-12

void ph__ic_free(ph__ic *f) {
    ph__free(f->set);
    ph__free(f->ptr);
    ph__free(f->col);
    ph__free(f->val);
    ph__free(f->d);
    ph__free(f->pos);
    ph__free(f->mark);
    ph__free(f->nb);
    ph__free(f->w);
    memset(f, 0, sizeof *f);
}

/* Room for m rows of a system of n rows; 0 or PH_ERR_NO_MEMORY. */
static int reserve_rows(ph__ic *f, int32_t m, int32_t n) {
    if (n > f->cap_n) {
        int32_t *pos = ph__realloc(f->pos, (size_t)n * sizeof *pos);
        if (!pos) return PH_ERR_NO_MEMORY;
        f->pos = pos;
        for (int32_t i = f->cap_n; i < n; i++)
            f->pos[i] = -1;
        int32_t *nb = ph__realloc(f->nb, (size_t)n * sizeof *nb);
        if (!nb) return PH_ERR_NO_MEMORY;
        f->nb = nb;
        f->cap_n = n;
    }
    if (m > f->cap_m) {
        int32_t *set = ph__realloc(f->set, (size_t)m * sizeof *set);
        if (set) f->set = set;
        int32_t *ptr = ph__realloc(f->ptr, ((size_t)m + 1) * sizeof *ptr);
        if (ptr) f->ptr = ptr;
        double *d = ph__realloc(f->d, (size_t)m * sizeof *d);
        if (d) f->d = d;
        double *w = ph__realloc(f->w, (size_t)m * sizeof *w);
        if (w) f->w = w;
        int32_t *mark = ph__realloc(f->mark, (size_t)m * sizeof *mark);
        if (mark) {
            f->mark = mark;
            for (int32_t k = f->cap_m; k < m; k++)
                f->mark[k] = -1;
        }
        if (!set || !ptr || !d || !w || !mark) return PH_ERR_NO_MEMORY;
        f->cap_m = m;
    }
    return PH_OK;
}

static int reserve_entries(ph__ic *f, int64_t nnz) {
    if (nnz <= f->cap_nnz) return PH_OK;
    int64_t cap = f->cap_nnz > 0 ? f->cap_nnz : 64;
    while (cap < nnz)
        cap *= 2;
    int32_t *col = ph__realloc(f->col, (size_t)cap * sizeof *col);
    if (col) f->col = col;
    double *val = ph__realloc(f->val, (size_t)cap * sizeof *val);
    if (val) f->val = val;
    if (!col || !val) return PH_ERR_NO_MEMORY;
    f->cap_nnz = cap;
    return PH_OK;
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The strictly lower pattern of S_AA by rows; 0 or PH_ERR_NO_MEMORY. */
static int build_pattern(ph__ic *f, const ph__sys *s, const int32_t *set, int32_t m) {
    int64_t nnz = 0;
    f->ptr[0] = 0;
    for (int32_t k = 0; k < m; k++) {
        const int32_t cnt = s->ops->neighbours(s, set[k], f->nb);
        if (reserve_entries(f, nnz + cnt)) return PH_ERR_NO_MEMORY;
        const int64_t first = nnz;
        for (int32_t q = 0; q < cnt; q++) {
            const int32_t p = f->pos[f->nb[q]];
            if (p >= 0 && p < k) f->col[nnz++] = p;
        }
        if (nnz - first > 1) qsort(f->col + first, (size_t)(nnz - first), sizeof *f->col, cmp_i32);
        f->ptr[k + 1] = (int32_t)nnz;
    }
    f->nnz = nnz;
    return PH_OK;
}

int ph__ic_factor(ph__ic *f, const ph__sys *s, const int32_t *set, int32_t m, const double *gamma, double max_cost,
                  ph__ic_result *res) {
    f->factor_cost = 0;
    f->apply_cost = 0;
    f->m = 0;
    *res = PH__IC_OVER_BUDGET;
    if (m <= 0) return PH_OK;
    if (reserve_rows(f, m, s->n)) return PH_ERR_NO_MEMORY;
    for (int32_t k = 0; k < m; k++)
        f->pos[set[k]] = k;
    int e = build_pattern(f, s, set, m);
    for (int32_t k = 0; k < m; k++)
        f->pos[set[k]] = -1;
    if (e) return e;
    const int32_t *ptr = f->ptr, *col = f->col;
    /* Worst case: every pattern entry of row j visited for each entry
     * (i, j), one division per entry, one multiply-add per entry for the
     * pivot, one division per pivot; then two applications. */
    double ops = 0;
    for (int32_t i = 0; i < m; i++) {
        for (int32_t q = ptr[i]; q < ptr[i + 1]; q++)
            ops += (double)(ptr[col[q] + 1] - ptr[col[q]]) + 2.0;
        ops += 1.0;
    }
    const double apply = (2.0 * (double)f->nnz + (double)m) / PH__IC_OPS_PER_ROW;
    if (0.5 * (double)f->nnz + ops / PH__IC_OPS_PER_ROW + 2.0 * apply > max_cost) return PH_OK;
    /* Numeric factorization; w[j] = L_ij d_j of the current row i, valid
     * where mark[j] == i. */
    double *val = f->val, *d = f->d, *w = f->w;
    int32_t *mark = f->mark;
    ops = 0;
    int64_t formed = 0;
    int broken = 0;
    for (int32_t i = 0; i < m && !broken; i++) {
        const int32_t ri = set[i];
        double piv = s->diag[ri] + (gamma ? gamma[ri] : 0.0);
        const double dii = piv;
        for (int32_t q = ptr[i]; q < ptr[i + 1]; q++) {
            const int32_t j = col[q];
            double t = s->ops->entry(s, ri, set[j]);
            formed++;
            for (int32_t r = ptr[j]; r < ptr[j + 1]; r++) {
                const int32_t k = col[r];
                if (mark[k] == i) {
                    t -= w[k] * val[r];
                    ops += 1.0;
                }
            }
            w[j] = t;
            mark[j] = i;
            val[q] = t / d[j];
            piv -= t * val[q];
            ops += 2.0;
        }
        d[i] = piv;
        if (!(piv > IC_PIVOT_MIN * dii)) broken = 1;
    }
    for (int32_t k = 0; k < m; k++)
        mark[k] = -1;
    f->factor_cost = 0.5 * (double)formed + ops / PH__IC_OPS_PER_ROW;
    if (broken) {
        *res = PH__IC_BREAKDOWN;
        return PH_OK;
    }
    memcpy(f->set, set, (size_t)m * sizeof *set);
    f->m = m;
    f->apply_cost = apply;
    *res = PH__IC_FACTORED;
    return PH_OK;
}

void ph__ic_apply(const ph__ic *f, const double *r, double *z) {
    const int32_t m = f->m;
    const int32_t *ptr = f->ptr, *col = f->col;
    const double *val = f->val, *d = f->d;
    for (int32_t i = 0; i < m; i++) {
        double v = r[i];
        for (int32_t q = ptr[i]; q < ptr[i + 1]; q++)
            v -= val[q] * z[col[q]];
        z[i] = v;
    }
    for (int32_t i = 0; i < m; i++)
        z[i] /= d[i];
    for (int32_t i = m - 1; i >= 0; i--) {
        const double zi = z[i];
        for (int32_t q = ptr[i]; q < ptr[i + 1]; q++)
            z[col[q]] -= val[q] * zi;
    }
}
