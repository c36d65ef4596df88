/*
 * ordering.c — the row orders of the Gauss–Seidel family (seeds/001 on
 * reordering, seeds/002 on ordering by gravity and randomizing between
 * steps "or even within the iteration").
 *
 * Normal path: ph__order_build writes a permutation of 0..n-1 into s->order:
 *   DEFAULT, GRAVITY: the order the system came with (the world builds them
 *     in step.c); a standalone problem with heights is sorted by gravity;
 *   RANDOM: a Fisher–Yates shuffle drawn from the world's seeded generator
 *     (splitmix64), so a run is deterministic for a fixed seed;
 *   COMPLEMENTARITY: rows by decreasing LCP-error term of the current
 *     iterate, |d_i (lambda_i - clamp(lambda_i - y_i / d_i))|;
 *   EFFECTIVE_MASS: rows by decreasing 1 / S_ii.
 * Sorted orders break ties by row index, so they never depend on qsort's
 * instability. RANDOM and COMPLEMENTARITY are rebuilt before every
 * iteration when settings.ordering_per_iteration is 1; the others are
 * fixed for the step.
 *
 * Failure modes: none (the sort keys are the caller's scratch).
 * Invariant: s->order is a permutation of 0..n-1 after every call.
 */
#include <stdlib.h>

#include "solver.h"

uint64_t ph__rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint32_t ph__rng_below(uint64_t *state, uint32_t n) {
    /* The largest multiple of n that fits in 32 bits bounds the accepted draws. */
    const uint64_t range = 1ull << 32;
    const uint64_t limit = range - range % n;
    for (;;) {
        uint64_t r = ph__rng_next(state) >> 32;
        if (r < limit) return (uint32_t)(r % n);
    }
}

/* Sort keys: decreasing key, then increasing index. */
static int cmp_desc(const void *x, const void *y) {
    const ph__order_key *a = x, *b = y;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return a->row < b->row ? -1 : (a->row > b->row);
}

static int cmp_asc(const void *x, const void *y) {
    const ph__order_key *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->row < b->row ? -1 : (a->row > b->row);
}

/* Sorts the rows by k[i].key (k[i].row = i) into s->order. */
static void sort_rows(ph__sys *s, ph__order_key *k, int descending) {
    const int32_t n = s->n;
    qsort(k, (size_t)n, sizeof *k, descending ? cmp_desc : cmp_asc);
    for (int32_t i = 0; i < n; i++)
        s->order[i] = k[i].row;
}

void ph__order_gravity(ph__sys *s, ph__order_key *keys) {
    for (int32_t i = 0; i < s->n; i++) {
        keys[i].key = s->height ? s->height[i] : 0.0;
        keys[i].row = i;
    }
    sort_rows(s, keys, 0);
}

void ph__order_build(ph__sys *s, int first, ph__order_key *keys) {
    const int32_t n = s->n;
    if (s->fixed_order || n == 0) return;
    const ph_ordering kind = s->set->ordering;
    if (!first && !s->set->ordering_per_iteration) return;
    switch (kind) {
    case PH_ORDER_DEFAULT:
    case PH_ORDER_GRAVITY:
    case PH_ORDER_COUNT:
        /* Fixed for the step: built by the world (step.c) or at creation. */
        break;
    case PH_ORDER_RANDOM:
        for (int32_t i = 0; i < n; i++)
            s->order[i] = i;
        for (int32_t i = n - 1; i > 0; i--) {
            int32_t j = (int32_t)ph__rng_below(s->rng, (uint32_t)i + 1);
            int32_t t = s->order[i];
            s->order[i] = s->order[j];
            s->order[j] = t;
        }
        break;
    case PH_ORDER_COMPLEMENTARITY:
        for (int32_t i = 0; i < n; i++) {
            double lo, hi;
            ph__sys_bounds(s, i, &lo, &hi);
            ph__merit m = {0, 0, 0, 0, 0};
            ph__merit_row(s->lambda[i], s->ops->row_y(s, i), lo, hi, s->diag[i], &m);
            keys[i].key = m.lcp_error; /* the square: the same order as the magnitude */
            keys[i].row = i;
        }
        sort_rows(s, keys, 1);
        break;
    case PH_ORDER_EFFECTIVE_MASS:
        if (!first) break;
        for (int32_t i = 0; i < n; i++) {
            keys[i].key = s->diag[i] > 0 ? 1.0 / s->diag[i] : 0.0;
            keys[i].row = i;
        }
        sort_rows(s, keys, 1);
        break;
    }
}
