/*
 * joint_direct.c — the bilateral joint rows of a substep (and the hinge
 * limits that are pushing) solved together, exactly, as one block of the
 * Gauss–Seidel sweep (settings.joint_solver = PH_JOINT_SOLVER_DIRECT).
 *
 * Why: a chain's tension has to cross every joint within the sweeps of one
 * substep. Gauss–Seidel moves it about one joint per sweep, so a 30-link
 * chain whipping under its own weight stretches its joints by centimetres
 * at 10 sweeps per step (docs/core.md). The joint rows' block of
 * S = J M^-1 J^T + Sigma is sparse — rows couple only through a shared body
 * — and for chains and trees numbered along the chain its Cholesky factor
 * has no fill outside the rows' envelope, so it is cheap to factor once per
 * substep and to solve in every sweep (the blockwise Gauss–Seidel of
 * seeds/001 with the whole joint set as one block).
 *
 * Normal path:
 *   ph__joint_direct_factor (once per substep, after the joint rows are
 *   built, from ph__solve for the core's PGS): D = the joint rows with no
 *   bounds (lo = -inf, hi = inf: the linear and angular rows of ball,
 *   hinge, fixed and distance joints) and the hinge limit rows that were
 *   pushing at the end of the last substep (warm start lambda > 0); motor
 *   rows and idle limit rows keep their scalar projected updates. For each
 *   row of D its envelope starts at the first row of D sharing one of its
 *   moving bodies. S_DD is filled in the envelope and factored as
 *   L diag(d) L^T (the envelope holds L exactly: the profile of a matrix is
 *   preserved by its factorization). S_DD is symmetric positive definite
 *   whenever every row has SPOOK regularization (eps > 0); a pivot below
 *   1e-12 of its diagonal, or an envelope larger than PH_DIRECT_MAX_ENV
 *   entries, leaves the joints to the scalar loop for this substep.
 *   ph__joint_direct_solve (in every sweep, after the scalar joint rows and
 *   before the contacts): with y = S lambda - B of the current iterate
 *   (J v + eps lambda - rhs by the velocity bookkeeping), solve
 *   S_DD delta = -y_D by the factor; lambda_D += delta, projected onto each
 *   row's bounds (a no-op for bilateral rows, lambda >= 0 for a limit);
 *   v += M^-1 J_D^T (the applied change). The rows of D are flagged
 *   (row.direct = 1) so the scalar loop skips them.
 *
 * Failure modes: PH_ERR_NO_MEMORY from the scratch (the step's arena; nothing
 * changed and nothing held; the caller fails the step). A failed
 * factorization is not an error.
 *
 * Invariants: joint rows are rows [contact_row_count, row_count) of the
 * world; the factor describes this substep's rows only (w->jd_count = 0
 * when there is none) and lives in two arena pieces from the factorization
 * to ph__joint_direct_release, which the solve calls before it returns.
 */
#include <stdlib.h>
#include <string.h>

#include "joint.h"
#include "rows.h"
#include "solver.h"
#include "world.h"

/* Largest envelope (entries of L) factored; a bigger one (a dense mesh of
 * joints numbered badly) is left to Gauss–Seidel. */
#define PH_DIRECT_MAX_ENV (1 << 22)

int ph__joint_direct_factor(ph__world *w) {
    w->jd_count = 0;
    const int32_t first = w->contact_row_count, n = w->row_count - first;
    if (w->settings.joint_solver != PH_JOINT_SOLVER_DIRECT || n <= 0) return PH_OK;
    ph__row *rows = w->rows + first;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        const ph__row *r = &rows[i];
        const int bilateral = isinf(r->lo) && isinf(r->hi) && r->lo < 0 && r->hi > 0;
        /* A limit row (lambda >= 0) that was pushing at the end of the last
         * substep (its warm start is positive) joins the block: it is
         * probably active again, and a stiff limit left to scalar updates
         * lets a loaded structure sag (the heavy box on the arched snake).
         * Its impulse is projected back onto lambda >= 0 after each solve. */
        const int active_limit = r->lo == 0 && isinf(r->hi) && r->hi > 0 && r->lambda > 0;
        rows[i].direct = bilateral || active_limit;
        m += rows[i].direct;
    }
    if (m == 0) return PH_OK;
    /* One piece by alignment: offsets, pivots (and the solve's z), rows,
     * firsts, each body's first row. */
    const size_t m1 = (size_t)m + 1;
    char *piece = ph__arena_alloc(&w->arena,
                                  m1 * sizeof *w->jd_off + 2 * m1 * sizeof *w->jd_d +
                                      (2 * m1 + (size_t)w->sbody_count + 1) * sizeof *w->jd_row,
                                  "joint block");
    if (!piece) return PH_ERR_NO_MEMORY;
    w->jd_piece = piece;
    w->jd_off = (int64_t *)(void *)piece;
    w->jd_d = (double *)(void *)(w->jd_off + m1);
    w->jd_row = (int32_t *)(void *)(w->jd_d + 2 * m1);
    w->jd_first = w->jd_row + m1;
    w->jd_bfirst = w->jd_first + m1;
    for (int32_t b = 0; b < w->sbody_count; b++)
        w->jd_bfirst[b] = -1;
    /* Envelope: row k starts at the first row of D that touches one of its
     * moving bodies. */
    int64_t env = 0;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!rows[i].direct) continue;
        const int32_t ia = rows[i].ia, ib = rows[i].ib;
        int32_t f = k;
        if (ia != 0) {
            if (w->jd_bfirst[ia] < 0) w->jd_bfirst[ia] = k;
            if (w->jd_bfirst[ia] < f) f = w->jd_bfirst[ia];
        }
        if (ib != 0) {
            if (w->jd_bfirst[ib] < 0) w->jd_bfirst[ib] = k;
            if (w->jd_bfirst[ib] < f) f = w->jd_bfirst[ib];
        }
        w->jd_row[k] = first + i;
        w->jd_first[k] = f;
        w->jd_off[k] = env - f; /* L[k][j] at jd_env[jd_off[k] + j], f <= j <= k */
        env += k - f + 1;
        k++;
    }
    if (env > PH_DIRECT_MAX_ENV) {
        for (int32_t i = 0; i < n; i++)
            rows[i].direct = 0;
        return PH_OK;
    }
    w->jd_env = ph__arena_alloc(&w->arena, ((size_t)env + 1) * sizeof *w->jd_env, "joint block factor");
    if (!w->jd_env) {
        ph__joint_direct_release(w);
        return PH_ERR_NO_MEMORY;
    }
    double *L = w->jd_env, *d = w->jd_d;
    /* Fill and factor row by row (the row's entries are final once the rows
     * above are done). */
    for (k = 0; k < m; k++) {
        const ph__row *rk = &w->rows[w->jd_row[k]];
        const int32_t fk = w->jd_first[k];
        double *Lk = L + w->jd_off[k];
        for (int32_t j = fk; j <= k; j++)
            Lk[j] = ph__rows_entry(rk, &w->rows[w->jd_row[j]], j == k);
        for (int32_t j = fk; j < k; j++) {
            const int32_t fj = w->jd_first[j];
            const double *Lj = L + w->jd_off[j];
            double s = Lk[j];
            for (int32_t q = fk > fj ? fk : fj; q < j; q++)
                s -= Lk[q] * d[q] * Lj[q];
            Lk[j] = s / d[j];
        }
        double s = Lk[k];
        for (int32_t q = fk; q < k; q++)
            s -= Lk[q] * Lk[q] * d[q];
        if (!(s > 1e-12 * Lk[k])) {
            for (int32_t i = 0; i < n; i++)
                rows[i].direct = 0;
            return PH_OK;
        }
        d[k] = s;
        Lk[k] = 1.0;
    }
    w->jd_count = m;
    return PH_OK;
}

void ph__joint_direct_release(ph__world *w) {
    if (!w->jd_piece) return;
    if (w->jd_env) ph__arena_free(&w->arena, w->jd_env);
    ph__arena_free(&w->arena, w->jd_piece);
    w->jd_piece = NULL;
    w->jd_env = NULL;
    w->jd_count = 0;
}

void ph__joint_direct_solve(ph__world *w) {
    const int32_t m = w->jd_count;
    if (m == 0) return;
    ph__sbody *sb = w->sbodies;
    const double *L = w->jd_env, *d = w->jd_d;
    double *z = w->jd_d + m + 1;
    /* z = -y; forward L z' = z; z'' = z' / d; backward L^T delta = z''. */
    for (int32_t k = 0; k < m; k++) {
        const ph__row *r = &w->rows[w->jd_row[k]];
        double s = -(ph__row_jv(sb, r) + r->eps * r->lambda - r->rhs);
        const double *Lk = L + w->jd_off[k];
        for (int32_t q = w->jd_first[k]; q < k; q++)
            s -= Lk[q] * z[q];
        z[k] = s;
    }
    for (int32_t k = 0; k < m; k++)
        z[k] /= d[k];
    for (int32_t k = m - 1; k >= 0; k--) {
        const double *Lk = L + w->jd_off[k];
        const double zk = z[k];
        for (int32_t q = w->jd_first[k]; q < k; q++)
            z[q] -= Lk[q] * zk;
    }
    for (int32_t k = 0; k < m; k++) {
        ph__row *r = &w->rows[w->jd_row[k]];
        /* Projection onto the row's bounds (a no-op for bilateral rows). */
        double nl = r->lambda + z[k];
        nl = nl < r->lo ? r->lo : (nl > r->hi ? r->hi : nl);
        const double dl = nl - r->lambda;
        r->lambda = nl;
        ph__row_apply(sb, r, dl);
    }
}
