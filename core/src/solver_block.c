/*
 * solver_block.c — exact solves of small complementarity problems, and the
 * blockwise projected Gauss–Seidel built on them (seeds/001: "grouping
 * constraint equations and solving for several variables at once").
 *
 * Small problem: y = A x + b over m <= 12 rows, each row free, at its lower
 * or at its upper bound; bounds are fixed or, for NCP friction
 * (seeds/000, eq. 7), -+mu x_n of the normal row n of the same problem. For
 * a choice of states the free rows satisfy y = 0 with the bounded rows
 * substituted (a friction row at a bound is the linear function +-mu x_n,
 * so the normal's column absorbs it); the candidate is a solution when the
 * free rows lie within their bounds and y has the right sign at the bounded
 * rows (the conditions below eqs. 21-23 of seeds/000). All 3^k states of the
 * k bounded rows are enumerated, the guess's first; the first exact one is
 * taken, else the best.
 *
 * Blockwise PGS: each contact point's three rows and each joint's rows form
 * a block; one visit solves the block's small problem exactly with the rest
 * of the iterate fixed (c = y_g - S_gg lambda_g), then writes the changes
 * through the velocity bookkeeping. Blocks are visited in the order in which
 * their rows first appear in the row order, so every ordering applies.
 *
 * Failure modes: a singular state (its reduced matrix has a zero pivot) is
 * skipped; if no state is exact (possible for the NCP, whose solutions need
 * not exist), the block keeps the better of the best state and 50 projected
 * Gauss–Seidel sweeps on the block. PH_ERR_NO_MEMORY from the scratch (one
 * piece of s->arena).
 *
 * Invariants: a block never has more than PH__SMALL_MAX rows; the work of a
 * sweep of blocks is counted as one sweep (its wall time is in the stats).
 */
#include <stdlib.h>
#include <string.h>

#include "solver.h"

enum { ST_FREE = 0, ST_LO = 1, ST_HI = 2 };

static void bounds_of(int i, const double *lo, const double *hi, const double *mu, const int32_t *link, const double *x,
                      double *l, double *h) {
    if (link && link[i] >= 0) {
        double b = mu[i] * x[link[i]];
        *l = -b;
        *h = b;
    } else {
        *l = lo[i];
        *h = hi[i];
    }
}

/* The allowed states of row i; returns their count. */
static int states_of(int i, const double *lo, const double *hi, const int32_t *link, int *list) {
    if (link && link[i] >= 0) {
        list[0] = ST_FREE;
        list[1] = ST_LO;
        list[2] = ST_HI;
        return 3;
    }
    if (isfinite(lo[i]) && lo[i] == hi[i]) {
        list[0] = ST_LO;
        return 1;
    }
    int c = 0;
    list[c++] = ST_FREE;
    if (isfinite(lo[i])) list[c++] = ST_LO;
    if (isfinite(hi[i])) list[c++] = ST_HI;
    return c;
}

double ph__small_check(int m, const double *A, const double *b, const double *lo, const double *hi, const double *mu,
                       const int32_t *link, const double *x) {
    double viol = 0, scale = 0;
    for (int i = 0; i < m; i++) {
        double y = b[i], s = fabs(b[i]);
        for (int j = 0; j < m; j++) {
            y += A[i * m + j] * x[j];
            s += fabs(A[i * m + j] * x[j]);
        }
        if (s > scale) scale = s;
        double l, h;
        bounds_of(i, lo, hi, mu, link, x, &l, &h);
        double d = A[i * m + i] > 0 ? A[i * m + i] : 1.0;
        double v = 0;
        if (l > h)
            v = (l - h) * d;
        else if (x[i] < l)
            v = (l - x[i]) * d;
        else if (x[i] > h)
            v = (x[i] - h) * d;
        else {
            /* Inside the box: y must vanish unless x sits on a bound. */
            double at_lo = (x[i] == l) ? fmax(-y, 0.0) : fabs(y);
            double at_hi = (x[i] == h) ? fmax(y, 0.0) : fabs(y);
            v = fmin(at_lo, at_hi);
            if (x[i] == l && x[i] == h) v = 0;
        }
        if (v > viol) viol = v;
    }
    if (scale <= 0) return viol > 0 ? INFINITY : 0.0;
    return viol / scale;
}

/* Solves the f x f system M z = r in place (partial pivoting); 0 if singular. */
static int gauss(int f, double *M, double *r) {
    double big = 0;
    for (int i = 0; i < f * f; i++)
        if (fabs(M[i]) > big) big = fabs(M[i]);
    if (big == 0) return f == 0;
    const double tiny = 1e-13 * big;
    for (int c = 0; c < f; c++) {
        int p = c;
        for (int i = c + 1; i < f; i++)
            if (fabs(M[i * f + c]) > fabs(M[p * f + c])) p = i;
        if (fabs(M[p * f + c]) <= tiny) return 0;
        if (p != c) {
            for (int j = 0; j < f; j++) {
                double t = M[c * f + j];
                M[c * f + j] = M[p * f + j];
                M[p * f + j] = t;
            }
            double t = r[c];
            r[c] = r[p];
            r[p] = t;
        }
        for (int i = c + 1; i < f; i++) {
            double q = M[i * f + c] / M[c * f + c];
            if (q == 0) continue;
            for (int j = c; j < f; j++)
                M[i * f + j] -= q * M[c * f + j];
            r[i] -= q * r[c];
        }
    }
    for (int c = f - 1; c >= 0; c--) {
        double v = r[c];
        for (int j = c + 1; j < f; j++)
            v -= M[c * f + j] * r[j];
        r[c] = v / M[c * f + c];
    }
    return 1;
}

/* The solution for one choice of states, into x; 0 when singular. */
static int solve_state(int m, const double *A, const double *b, const double *lo, const double *hi, const double *mu,
                       const int32_t *link, const int *st, double *x) {
    int pos[PH__SMALL_MAX], fr[PH__SMALL_MAX], f = 0;
    double q[PH__SMALL_MAX];    /* value of a bounded row when it is a constant */
    double coef[PH__SMALL_MAX]; /* bounded linked row = coef * x_normal (normal free) */
    int is_const[PH__SMALL_MAX];
    for (int i = 0; i < m; i++) {
        pos[i] = -1;
        if (st[i] == ST_FREE) {
            pos[i] = f;
            fr[f++] = i;
        }
    }
    /* Constants of the unlinked bounded rows first: link targets are unlinked. */
    for (int i = 0; i < m; i++) {
        is_const[i] = 0;
        coef[i] = 0;
        q[i] = 0;
        if (st[i] == ST_FREE || (link && link[i] >= 0)) continue;
        q[i] = st[i] == ST_LO ? lo[i] : hi[i];
        is_const[i] = 1;
    }
    for (int i = 0; i < m; i++) {
        if (st[i] == ST_FREE || !(link && link[i] >= 0)) continue;
        const int n = link[i];
        const double s = (st[i] == ST_LO ? -1.0 : 1.0) * mu[i];
        if (st[n] == ST_FREE) {
            coef[i] = s;
        } else {
            q[i] = s * q[n];
            is_const[i] = 1;
        }
    }
    double M[PH__SMALL_MAX * PH__SMALL_MAX], r[PH__SMALL_MAX];
    for (int a = 0; a < f; a++) {
        const int i = fr[a];
        double rhs = -b[i];
        for (int k = 0; k < m; k++)
            if (is_const[k]) rhs -= A[i * m + k] * q[k];
        r[a] = rhs;
        for (int c = 0; c < f; c++)
            M[a * f + c] = A[i * m + fr[c]];
        for (int k = 0; k < m; k++) {
            if (st[k] == ST_FREE || is_const[k]) continue;
            /* k = coef_k x_link[k] with link[k] free. */
            M[a * f + pos[link[k]]] += A[i * m + k] * coef[k];
        }
    }
    if (!gauss(f, M, r)) return 0;
    for (int i = 0; i < m; i++) {
        if (st[i] == ST_FREE)
            x[i] = r[pos[i]];
        else if (is_const[i])
            x[i] = q[i];
    }
    for (int i = 0; i < m; i++)
        if (st[i] != ST_FREE && !is_const[i]) x[i] = coef[i] * x[link[i]];
    return 1;
}

double ph__small_lcp(int m, const double *A, const double *b, const double *lo, const double *hi, const double *mu,
                     const int32_t *link, const double *guess, double *x) {
    int lists[PH__SMALL_MAX][3], counts[PH__SMALL_MAX], idx[PH__SMALL_MAX], st[PH__SMALL_MAX] = {0};
    double cand[PH__SMALL_MAX];
    double best = INFINITY;
    for (int i = 0; i < m; i++)
        x[i] = guess ? guess[i] : 0.0;
    if (m <= 0) return 0.0;
    for (int i = 0; i < m; i++)
        counts[i] = states_of(i, lo, hi, link, lists[i]);
    if (guess) {
        /* The guess's own active set first (the classification of eq. 19). */
        for (int i = 0; i < m; i++) {
            double l, h;
            bounds_of(i, lo, hi, mu, link, guess, &l, &h);
            int want = guess[i] <= l ? ST_LO : (guess[i] >= h ? ST_HI : ST_FREE);
            int ok = 0;
            for (int k = 0; k < counts[i]; k++)
                ok |= lists[i][k] == want;
            st[i] = ok ? want : lists[i][0];
        }
        if (solve_state(m, A, b, lo, hi, mu, link, st, cand)) {
            double v = ph__small_check(m, A, b, lo, hi, mu, link, cand);
            if (v < best) {
                best = v;
                memcpy(x, cand, (size_t)m * sizeof *x);
            }
            if (best <= PH__SMALL_ACCEPT) return best;
        }
    }
    for (int i = 0; i < m; i++)
        idx[i] = 0;
    for (;;) {
        for (int i = 0; i < m; i++)
            st[i] = lists[i][idx[i]];
        if (solve_state(m, A, b, lo, hi, mu, link, st, cand)) {
            double v = ph__small_check(m, A, b, lo, hi, mu, link, cand);
            if (v < best) {
                best = v;
                memcpy(x, cand, (size_t)m * sizeof *x);
                if (best <= PH__SMALL_ACCEPT) return best;
            }
        }
        int i = 0;
        while (i < m && ++idx[i] == counts[i])
            idx[i++] = 0;
        if (i == m) break;
    }
    return best;
}

/* Projected Gauss–Seidel on a small problem, from x (the block fallback). */
static void small_pgs(int m, const double *A, const double *b, const double *lo, const double *hi, const double *mu,
                      const int32_t *link, double *x, int sweeps) {
    for (int it = 0; it < sweeps; it++) {
        for (int i = 0; i < m; i++) {
            if (A[i * m + i] <= 0) continue;
            double y = b[i];
            for (int j = 0; j < m; j++)
                y += A[i * m + j] * x[j];
            double l, h;
            bounds_of(i, lo, hi, mu, link, x, &l, &h);
            double v = x[i] - y / A[i * m + i];
            x[i] = v < l ? l : (v > h ? h : v);
        }
    }
}

/* Scratch of a blockwise solve. */
typedef struct block_work {
    double *S;       /* the blocks' matrices, one after the other */
    int32_t *S_off;  /* group -> offset into S */
    int32_t *group;  /* row -> group */
    int32_t *gorder; /* group visiting order */
    uint8_t *seen;
    ph__order_key *keys;
} block_work;

/* One exact visit of group g. */
static void visit(ph__sys *s, const block_work *bw, int32_t g) {
    const int32_t *rows = s->group_rows + s->group_off[g];
    const int m = (int)(s->group_off[g + 1] - s->group_off[g]);
    if (m == 1) {
        const int32_t i = rows[0];
        if (s->diag[i] <= 0) return;
        double lo, hi;
        ph__sys_bounds(s, i, &lo, &hi);
        double nl = s->lambda[i] - s->ops->row_y(s, i) / s->diag[i];
        nl = nl < lo ? lo : (nl > hi ? hi : nl);
        s->ops->add(s, i, nl - s->lambda[i]);
        return;
    }
    const double *S = bw->S + bw->S_off[g];
    double c[PH__SMALL_MAX], lo[PH__SMALL_MAX], hi[PH__SMALL_MAX], mu[PH__SMALL_MAX], l0[PH__SMALL_MAX];
    double x[PH__SMALL_MAX], xp[PH__SMALL_MAX];
    int32_t link[PH__SMALL_MAX];
    for (int a = 0; a < m; a++) {
        const int32_t i = rows[a];
        l0[a] = s->lambda[i];
        link[a] = -1;
        mu[a] = 0;
        lo[a] = s->lo[i];
        hi[a] = s->hi[i];
        if (s->normal[i] >= 0) {
            for (int k = 0; k < m; k++)
                if (rows[k] == s->normal[i]) link[a] = k;
            if (link[a] >= 0)
                mu[a] = s->mu[i];
            else
                ph__sys_bounds(s, i, &lo[a], &hi[a]); /* normal outside: bounds fixed now */
        }
    }
    for (int a = 0; a < m; a++) {
        double v = s->ops->row_y(s, rows[a]);
        for (int k = 0; k < m; k++)
            v -= S[a * m + k] * l0[k];
        c[a] = v;
    }
    double viol = ph__small_lcp(m, S, c, lo, hi, mu, link, l0, x);
    if (viol > PH__SMALL_ACCEPT) {
        memcpy(xp, l0, (size_t)m * sizeof *xp);
        small_pgs(m, S, c, lo, hi, mu, link, xp, 50);
        if (ph__small_check(m, S, c, lo, hi, mu, link, xp) < viol) memcpy(x, xp, (size_t)m * sizeof *x);
    }
    for (int a = 0; a < m; a++)
        if (x[a] != l0[a]) s->ops->add(s, rows[a], x[a] - l0[a]);
}

int ph__solve_block(ph__sys *s, ph_step_stats *st, ph__rec *rec) {
    const int32_t n = s->n, G = s->group_count;
    block_work bw;
    memset(&bw, 0, sizeof bw);
    size_t total = 0;
    for (int32_t g = 0; g < G; g++) {
        size_t m = (size_t)(s->group_off[g + 1] - s->group_off[g]);
        total += m * m;
    }
    /* One piece of s->arena, carved by alignment: keys, S, the int32
     * arrays, seen. */
    const size_t nk = (size_t)n + 1, gk = (size_t)G + 1;
    char *piece = ph__arena_alloc(
        s->arena, nk * sizeof *bw.keys + total * sizeof *bw.S + (2 * gk + nk) * sizeof(int32_t) + gk, "block scratch");
    if (!piece) return PH_ERR_NO_MEMORY;
    bw.keys = (ph__order_key *)(void *)piece;
    bw.S = (double *)(void *)(piece + nk * sizeof *bw.keys);
    bw.S_off = (int32_t *)(void *)(bw.S + total);
    bw.group = bw.S_off + gk;
    bw.gorder = bw.group + nk;
    bw.seen = (uint8_t *)(bw.gorder + gk);
    size_t off = 0;
    for (int32_t g = 0; g < G; g++) {
        const int32_t *rows = s->group_rows + s->group_off[g];
        const int m = (int)(s->group_off[g + 1] - s->group_off[g]);
        bw.S_off[g] = (int32_t)off;
        for (int a = 0; a < m; a++) {
            bw.group[rows[a]] = g;
            for (int k = 0; k < m; k++)
                bw.S[off + (size_t)(a * m + k)] = s->ops->entry(s, rows[a], rows[k]);
        }
        off += (size_t)m * (size_t)m;
    }
    const ph_settings *set = s->set;
    const int record = set->record_merits || set->tolerance > 0;
    ph__merit mer;
    int it;
    ph__order_build(s, 1, bw.keys);
    const int fit = ph__limit_sweeps(s->limit, set->iterations, n);
    for (it = 0; it < set->iterations && n > 0; it++) {
        if (it >= fit) {
            s->limit->exhausted = 1;
            break;
        }
        if (ph__limit_cancel(s->limit)) break;
        if (it > 0) ph__order_build(s, 0, bw.keys);
        memset(bw.seen, 0, (size_t)G);
        int32_t ng = 0;
        for (int32_t k = 0; k < n; k++) {
            int32_t g = bw.group[s->order[k]];
            if (!bw.seen[g]) {
                bw.seen[g] = 1;
                bw.gorder[ng++] = g;
            }
        }
        for (int32_t k = 0; k < ng; k++)
            visit(s, &bw, bw.gorder[k]);
        if (record) {
            ph__sys_merits(s, &mer);
            ph__rec_push(rec, &mer, (double)(it + 1), PH_PHASE_SWEEP);
            if (set->tolerance > 0 && mer.fischer < set->tolerance) {
                it++;
                break;
            }
        }
    }
    if (!record || n == 0) ph__sys_merits(s, &mer);
    ph__stats_final(st, it, (double)it, &mer);
    ph__arena_free(s->arena, piece);
    return PH_OK;
}
