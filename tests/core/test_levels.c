/*
 * test_levels.c — the bottom-up levels packed into whole groups
 * (solver_wide.c, pack_levels): the manifolds with slack moved so that
 * each level fills its groups of PH_LANES, keeping every body's manifolds
 * in height order.
 *
 * Checked:
 *
 * - the physics is the bottom-up levels' bit for bit: pyramid20 and
 *   spheres1000 stepped with and without the packing (ph__world.wpack_off,
 *   a core-internal switch no client can reach) have the same state hash,
 *   row count and row updates after every step, and final merits equal to
 *   1e-12 (sums over the batches, whose order changed), and pyramid20
 *   ends with fewer groups packed than bottom-up (158 against 191);
 * - the layout: no two manifolds of a level share a moving body, each
 *   moving body's manifolds have increasing levels in height order (ties
 *   by slot, the sort's rule); on pyramid20 (many short chains) the
 *   packing by lists is taken: levels of at most PH_LANES manifolds, more
 *   of them than the longest chain of manifolds sharing bodies (computed
 *   here from the heights, the bottom-up rule's level count), one group
 *   each, and the groups fall from the bottom-up levels' (about 190) to
 *   at most 162 — fewer batches to visit in every sweep, the point of the
 *   pass (docs/profile.md, "Issue #21, target 6").
 *
 * Normal path: build, step side by side, compare. Failure modes: none
 * beyond the assertions. Invariants: default settings (native point mode,
 * one tile for these scenes), one thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "world.h"

static ph_world_id make_world(const char *scene, int pack_off) {
    int err = 0;
    ph_world_def d = ph_default_world_def();
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    assert_int_equal(ph_scene_build(w, scene), PH_OK);
    ph__world_get(w)->wpack_off = pack_off;
    return w;
}

/* Groups of the last build (first batches). */
static int32_t groups(const ph__world *w) {
    int32_t n = 0;
    for (int32_t b = 0; b < w->wbatch_count; b += w->wbatches[b].glen)
        n++;
    return n;
}

/* fewer: the packed build must make fewer groups than the bottom-up one
 * (pyramid20: the packing's point); otherwise no more. */
static void same_physics(const char *scene, int steps, int fewer) {
    ph_world_id a = make_world(scene, 0), b = make_world(scene, 1);
    for (int s = 0; s < steps; s++) {
        assert_int_equal(ph_world_step(a), PH_OK);
        assert_int_equal(ph_world_step(b), PH_OK);
        ph_step_stats x, y;
        assert_int_equal(ph_world_get_stats(a, &x), PH_OK);
        assert_int_equal(ph_world_get_stats(b, &y), PH_OK);
        if (ph_world_state_hash(a) != ph_world_state_hash(b) || x.rows != y.rows || x.row_updates != y.row_updates)
            fail_msg("%s step %d: the packed levels step differently", scene, s);
        /* The merits are sums over the batches, in their order: equal to
         * rounding. */
        assert_true(fabs(x.fischer_final - y.fischer_final) <= 1e-12 * fabs(y.fischer_final) + 1e-300);
        assert_true(fabs(x.rel_residual - y.rel_residual) <= 1e-12 * fabs(y.rel_residual) + 1e-300);
    }
    const ph__world *wa = ph__world_get(a), *wb = ph__world_get(b);
    fprintf(stderr, "%s after %d steps: %d groups packed, %d bottom-up\n", scene, steps, (int)groups(wa),
            (int)groups(wb));
    if (fewer)
        assert_true(groups(wa) < groups(wb));
    else
        assert_true(groups(wa) <= groups(wb));
    ph_world_destroy(a);
    ph_world_destroy(b);
}

static void test_levels_same_physics(void **state) {
    (void)state;
    same_physics("pyramid20", 120, 1);
    same_physics("spheres1000", 40, 0);
}

/* Manifold i before j in the height order (key, then slot). */
static int before(const ph__world *w, int32_t i, int32_t j) {
    return w->wheight[i] < w->wheight[j] || (w->wheight[i] == w->wheight[j] && i < j);
}

static const ph__world *cmp_w; /* (qsort has no context) */
static int by_height(const void *x, const void *y) {
    const int32_t i = *(const int32_t *)x, j = *(const int32_t *)y;
    return before(cmp_w, i, j) ? -1 : before(cmp_w, j, i) ? 1 : 0;
}

static void test_levels_layout(void **state) {
    (void)state;
    ph_world_id id = make_world("pyramid20", 0), ref = make_world("pyramid20", 1);
    for (int s = 0; s < 60; s++) {
        assert_int_equal(ph_world_step(id), PH_OK);
        assert_int_equal(ph_world_step(ref), PH_OK);
    }
    const ph__world *w = ph__world_get(id);
    assert_true(w->wide_ok && w->wpoint_mode);
    const int32_t nm = w->manifold_count, nsb = w->sbody_count;
    int32_t *ord = malloc(((size_t)nm + 1) * sizeof *ord);
    int32_t *last = malloc(((size_t)nsb + 1) * sizeof *last);
    int32_t *chain = malloc(((size_t)nsb + 1) * sizeof *chain);
    assert_non_null(ord);
    assert_non_null(last);
    assert_non_null(chain);
    int32_t n = 0, levels = 0;
    for (int32_t i = 0; i < nm; i++)
        if (w->wlevel[i] >= 0) {
            ord[n++] = i;
            if (w->wlevel[i] + 1 > levels) levels = w->wlevel[i] + 1;
        }
    assert_true(n > 500); /* pyramid20: 590 manifolds */
    cmp_w = w;
    qsort(ord, (size_t)n, sizeof *ord, by_height);
    /* In height order each body's levels increase (so a level never holds
     * two of its manifolds); the bottom-up chain lengths alongside. */
    for (int32_t x = 0; x <= nsb; x++)
        last[x] = -1, chain[x] = 0;
    int32_t longest = 0;
    for (int32_t q = 0; q < n; q++) {
        const int32_t i = ord[q];
        const int32_t bd[2] = {w->body_to_sbody[w->manifolds[i].ba], w->body_to_sbody[w->manifolds[i].bb]};
        int32_t c = 0;
        for (int t = 0; t < 2; t++) {
            if (!bd[t]) continue;
            if (last[bd[t]] >= 0 && w->wlevel[last[bd[t]]] >= w->wlevel[i])
                fail_msg("body %d: manifold %d (level %d) before %d (level %d) in height order", (int)bd[t],
                         (int)last[bd[t]], (int)w->wlevel[last[bd[t]]], (int)i, (int)w->wlevel[i]);
            if (chain[bd[t]] > c) c = chain[bd[t]];
        }
        for (int t = 0; t < 2; t++)
            if (bd[t]) last[bd[t]] = i, chain[bd[t]] = c + 1;
        if (c + 1 > longest) longest = c + 1;
    }
    /* Either the bottom-up levels' number (deadlines) or levels of one
     * group each (lists), pyramid20's: longer than the longest chain. */
    int32_t *count = calloc((size_t)levels + 1, sizeof *count);
    assert_non_null(count);
    int32_t most = 0;
    for (int32_t q = 0; q < n; q++)
        if (++count[w->wlevel[ord[q]]] > most) most = count[w->wlevel[ord[q]]];
    free(count);
    assert_true(levels > longest);
    assert_true(most <= PH_LANES);
    const int32_t g = groups(w), g0 = groups(ph__world_get(ref));
    assert_int_equal(g, levels);
    fprintf(stderr, "pyramid20 after 60 steps: %d groups in %d levels (bottom-up: %d groups in %d levels)\n", (int)g,
            (int)levels, (int)g0, (int)longest);
    if (g > 162 || g0 < 180) fail_msg("pyramid20 groups: %d packed, %d bottom-up", (int)g, (int)g0);
    free(ord);
    free(last);
    free(chain);
    ph_world_destroy(id);
    ph_world_destroy(ref);
}

/* A coloured island's levels (solver_wide.c, assign_levels; pyramid40 is
 * one island of about 2 400 manifolds, every one coloured: its one-band
 * loop) are the first-fit colouring of the height order top-down, the
 * colours in reverse: each manifold, from the highest, takes the lowest
 * colour neither of its moving bodies has yet. Computed here from the
 * build's order (w->wkeys) and the manifolds' bodies after each of 40
 * steps, most of which make their levels again (relevel). */
static void test_colours_first_fit(void **state) {
    (void)state;
    ph_world_id id = make_world("pyramid40", 0);
    const ph__world *w = ph__world_get(id);
    int checked = 0;
    for (int s = 0; s < 140; s++) {
        assert_int_equal(ph_world_step(id), PH_OK);
        if (s < 100) continue;
        assert_true(w->wide_ok && w->wpoint_mode && w->wbig_any && w->wbig_all);
        const int32_t nm = w->manifold_count, nsb = w->sbody_count, na = w->wreuse_na;
        uint64_t *used = calloc((size_t)nsb + 1, sizeof *used);
        int32_t *col = malloc(((size_t)nm + 1) * sizeof *col);
        assert_non_null(used);
        assert_non_null(col);
        int32_t ncol = 0, n = 0;
        for (int32_t q = na - 1; q >= 0; q--) {
            const int32_t i = w->wkeys[q].slot;
            const int32_t a = w->body_to_sbody[w->manifolds[i].ba], b = w->body_to_sbody[w->manifolds[i].bb];
            const uint64_t u = (a ? used[a] : 0) | (b ? used[b] : 0);
            assert_true(~u != 0); /* (one band: fewer than 64 contacts a body) */
            const int c = __builtin_ctzll(~u);
            if (a) used[a] |= 1ull << c;
            if (b) used[b] |= 1ull << c;
            col[i] = c;
            if (c + 1 > ncol) ncol = c + 1;
        }
        for (int32_t i = 0; i < nm; i++)
            n += w->wlevel[i] >= 0;
        assert_int_equal(n, na);
        for (int32_t q = 0; q < na; q++) {
            const int32_t i = w->wkeys[q].slot;
            if (w->wlevel[i] != ncol - 1 - col[i])
                fail_msg("step %d: manifold %d at level %d, first fit %d", s, (int)i, (int)w->wlevel[i],
                         (int)(ncol - 1 - col[i]));
        }
        checked++;
        free(used);
        free(col);
    }
    assert_int_equal(checked, 40);
    ph_world_destroy(id);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_same_physics),
        cmocka_unit_test(test_levels_layout),
        cmocka_unit_test(test_colours_first_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
