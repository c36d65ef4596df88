/*
 * test_layout_reuse.c — the wide solver's batch layout kept from one step
 * to the next (solver_wide.c, build: when the manifolds, their solver
 * bodies and their points are those of the last native build and its
 * height order is still sorted under this step's heights, the levels,
 * colours, tiles, runs and the batches' indices are the last build's).
 *
 * Checked, each against the same world with the reuse switched off
 * (ph__world.wreuse_off, a core-internal switch no client can reach):
 *
 * - after every step the same state hash, row count, row updates and
 *   final merits bit for bit, and the same layout: every batch's points,
 *   manifolds, bodies, group length and independence, the manifolds' order
 *   (wpoint) and levels, the tiles (batches, groups, bodies, manifolds);
 * - on pyramid20 (bottom-up levels, one tile), pyramid40 (one island of
 *   about 2 400 manifolds: coloured), grid1000 (tiles) and spheres1000, and
 *   through edits: a box dropped on the pyramid, a body removed, gravity
 *   turned (every height key changes), contact_block off and on, another
 *   method and back, sleeping on with a kick that wakes an island, and a
 *   snapshot restored into a new world (no stale cache: its first build is
 *   a full one);
 * - the reuse happens: at least the stated share of the settled steps'
 *   builds reuse the layout;
 * - a build of the same manifolds whose height order changed for some body
 *   (body_orders_kept fails) makes the levels again and keeps the layout
 *   when they come out the same (relevel): on pyramid40 (one and two
 *   threads) some such builds keep it and some make it afresh, on
 *   pyramid20 (bottom-up levels) they make it afresh; each compared with
 *   the full build's layout and state every step (a relevel that kept the
 *   layout on unequal levels fails here at once);
 * - such a build first looks for an earlier layout of the same manifolds
 *   whose order holds again (the layout cache: a side contact's order
 *   flipping back): on pyramid20 at least 20 builds of 110 take one, and
 *   on stack20 gravity turned and back takes the layout from before the
 *   turn; every one compared with the full build's layout and state that
 *   step (an entry taken on an order that does not hold fails here);
 * - it does not happen when the inputs change: the step after a box is
 *   put down touching the pyramid (a manifold appears), after a body is
 *   removed (manifolds disappear), after a resting box is tilted onto an
 *   edge (its manifold's points change), and after gravity turns upwards
 *   (each body's height order reversed) each runs a full build.
 *
 * Normal path: build, step side by side, compare. Failure modes: none
 * beyond the assertions. Invariants: default settings (native point mode),
 * one thread unless stated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "physd/ph_snapshot.h"
#include "world.h"

static ph_world_id make_world(const char *scene, int reuse_off, int threads, int sleep) {
    int err = 0;
    ph_world_def d = ph_default_world_def();
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    assert_int_equal(ph_scene_build(w, scene), PH_OK);
    ph_settings s;
    assert_int_equal(ph_world_get_settings(w, &s), PH_OK);
    s.threads = threads;
    s.sleep = sleep;
    assert_int_equal(ph_world_set_settings(w, &s), PH_OK);
    ph__world_get(w)->wreuse_off = reuse_off;
    return w;
}

/* The layout of a's last build equals b's (when both have batches). */
static void same_layout(ph_world_id ia, ph_world_id ib, int step) {
    const ph__world *a = ph__world_get(ia), *b = ph__world_get(ib);
    assert_int_equal(a->wide_ok, b->wide_ok);
    if (!a->wide_ok) return;
    if (a->wbatch_count != b->wbatch_count || a->tile_count != b->tile_count || a->native_rows != b->native_rows ||
        a->manifold_count != b->manifold_count)
        fail_msg("step %d: batches %d/%d, tiles %d/%d", step, a->wbatch_count, b->wbatch_count, a->tile_count,
                 b->tile_count);
    for (int32_t k = 0; k < a->wbatch_count; k++) {
        const ph__wbatch *x = &a->wbatches[k], *y = &b->wbatches[k];
        if (memcmp(x->point, y->point, sizeof x->point) || memcmp(x->pm, y->pm, sizeof x->pm) ||
            memcmp(x->ia, y->ia, sizeof x->ia) || memcmp(x->ib, y->ib, sizeof x->ib) || x->glen != y->glen ||
            x->indep != y->indep)
            fail_msg("step %d: batch %d differs", step, (int)k);
    }
    for (int32_t i = 0; i < a->manifold_count; i++)
        if (a->wlevel[i] != b->wlevel[i] || a->manifolds[i].row0 != b->manifolds[i].row0)
            fail_msg("step %d: manifold %d's level %d/%d", step, (int)i, a->wlevel[i], b->wlevel[i]);
    int32_t nmf = 0;
    for (int32_t i = 0; i < a->manifold_count; i++)
        nmf += a->wlevel[i] >= 0;
    assert_memory_equal(a->wpoint, b->wpoint, (size_t)nmf * sizeof *a->wpoint);
    if (a->tile_count > 0) {
        const size_t nt = (size_t)a->tile_count + 1;
        assert_memory_equal(a->tile_batch, b->tile_batch, nt * sizeof *a->tile_batch);
        assert_memory_equal(a->tile_group, b->tile_group, nt * sizeof *a->tile_group);
        assert_memory_equal(a->tile_sbody, b->tile_sbody, nt * sizeof *a->tile_sbody);
        assert_memory_equal(a->tile_sb, b->tile_sb, (size_t)a->tile_sbody[a->tile_count] * sizeof *a->tile_sb);
        if (a->tile_count > 1) assert_memory_equal(a->tile_mf, b->tile_mf, nt * sizeof *a->tile_mf);
    }
}

/* One step of both worlds (edit before it), then the comparisons. */
static void step_both(ph_world_id a, ph_world_id b, int step) {
    assert_int_equal(ph_world_step(a), PH_OK);
    assert_int_equal(ph_world_step(b), PH_OK);
    const uint64_t ha = ph_world_state_hash(a), hb = ph_world_state_hash(b);
    if (ha != hb)
        fail_msg("step %d: hash %016llx with reuse, %016llx without", step, (unsigned long long)ha,
                 (unsigned long long)hb);
    ph_step_stats sa, sb;
    assert_int_equal(ph_world_get_stats(a, &sa), PH_OK);
    assert_int_equal(ph_world_get_stats(b, &sb), PH_OK);
    assert_int_equal(sa.rows, sb.rows);
    assert_int_equal(sa.manifolds, sb.manifolds);
    assert_true(sa.row_updates == sb.row_updates);
    if (memcmp(&sa.fischer_final, &sb.fischer_final, sizeof sa.fischer_final) ||
        memcmp(&sa.rel_residual, &sb.rel_residual, sizeof sa.rel_residual))
        fail_msg("step %d: final merits differ", step);
    same_layout(a, b, step);
    assert_int_equal(ph__world_get(b)->wreuse_builds, 0);
}

/* Steps a scene with and without the reuse; the share of native builds
 * from step `settled` on that reused the layout must reach min_share. Of
 * the builds whose height order changed for some body (relevel), at least
 * min_kept kept the layout because the levels came out the same, and at
 * least min_made found other levels and made the layout afresh (each of
 * them compared with the full build's layout every step, step_both). */
static void scene_case(const char *scene, int steps, int settled, double min_share, int threads, int min_kept,
                       int min_made, int min_hits) {
    ph_world_id a = make_world(scene, 0, threads, 0), b = make_world(scene, 1, threads, 0);
    int64_t r0 = 0, f0 = 0, t0 = 0, k0 = 0, h0 = 0;
    for (int k = 0; k < steps; k++) {
        if (k == settled) {
            r0 = ph__world_get(a)->wreuse_builds;
            f0 = ph__world_get(a)->wfull_builds;
            t0 = ph__world_get(a)->wrelevel_tries;
            k0 = ph__world_get(a)->wrelevel_builds;
            h0 = ph__world_get(a)->wlayout_hits;
        }
        step_both(a, b, k);
    }
    const ph__world *w = ph__world_get(a);
    const double reused = (double)(w->wreuse_builds - r0), full = (double)(w->wfull_builds - f0);
    const int64_t tries = w->wrelevel_tries - t0, kept = w->wrelevel_builds - k0, hits = w->wlayout_hits - h0;
    print_message("%s: %.0f of %.0f builds from step %d reused the layout; an earlier layout taken back in %lld; "
                  "order changed in %lld more, levels kept in %lld of those\n",
                  scene, reused, reused + full, settled, (long long)hits, (long long)tries, (long long)kept);
    assert_true(reused + full >= steps - settled);
    assert_true(reused >= min_share * (reused + full));
    assert_true(kept >= min_kept);
    assert_true(tries - kept >= min_made);
    assert_true(hits >= min_hits);
    assert_int_equal(ph__world_get(b)->wrelevel_tries, 0);
    assert_int_equal(ph__world_get(b)->wlayout_hits, 0);
    ph_world_destroy(a);
    ph_world_destroy(b);
}

static void test_pyramid20(void **state) {
    (void)state;
    scene_case("pyramid20", 150, 40, 0.1, 1, 0, 20, 20);
}

static void test_pyramid40_coloured(void **state) {
    (void)state;
    scene_case("pyramid40", 220, 100, 0.2, 1, 15, 15, 0);
}

/* The same with two threads (the sort's fallback split among workers). */
static void test_pyramid40_two_threads(void **state) {
    (void)state;
    scene_case("pyramid40", 160, 100, 0.2, 2, 5, 5, 0);
}

/* The layout cache gives up on a scene whose layouts do not recur
 * (solver_wide.c, lc_on): pyramid40's settled builds make new levels (a
 * first-fit colouring moved by one side contact's flip) that no later
 * build takes back, so after LC_PATIENCE (32) tries without a hit only
 * every 32nd try saves the layout in place (w->wlc_clock counts the
 * saves). Without the patience every try saves (the count was 160 of 160
 * from step 60 on). The layouts themselves are the full build's (the
 * cases above). */
static void test_pyramid40_cache_patience(void **state) {
    (void)state;
    ph_world_id id = make_world("pyramid40", 0, 1, 0);
    const ph__world *w = ph__world_get(id);
    int64_t t0 = 0, c0 = 0, h0 = 0;
    for (int k = 0; k < 220; k++) {
        if (k == 60) t0 = w->wrelevel_tries, c0 = w->wlc_clock, h0 = w->wlayout_hits;
        assert_int_equal(ph_world_step(id), PH_OK);
    }
    const int64_t tries = w->wrelevel_tries - t0, saves = w->wlc_clock - c0, hits = w->wlayout_hits - h0;
    print_message("pyramid40 steps 60-220: %lld builds could take a cached layout, %lld saved theirs, %lld hits\n",
                  (long long)tries, (long long)saves, (long long)hits);
    assert_true(tries >= 64);
    assert_true(saves <= tries / 32 + 32);
    ph_world_destroy(id);
}

static void test_grid1000_tiles(void **state) {
    (void)state;
    scene_case("grid1000", 120, 60, 0.9, 1, 0, 0, 0);
}

static void test_spheres1000(void **state) {
    (void)state;
    scene_case("spheres1000", 120, 60, 0.9, 1, 0, 0, 0);
}

static void test_grid1000_two_threads(void **state) {
    (void)state;
    scene_case("grid1000", 80, 40, 0.9, 2, 0, 0, 0);
}

static ph_body_id body_at(ph_world_id w, int i) {
    ph_body_id b[1024];
    const int n = ph_world_get_bodies(w, b, 1024);
    assert_true(n > i);
    return b[i];
}

/* A unit box resting on the top cube of the stack (its index given):
 * 1 m above its centre, touching (a new manifold at the next build). */
static void put_box_on(ph_world_id w, int top) {
    ph_transform x;
    assert_int_equal(ph_body_get_transform(body_at(w, top), &x), PH_OK);
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(x.p.x, x.p.y, x.p.z + 1.0);
    bd.orientation = x.q;
    int err;
    ph_body_id nb = ph_body_create(w, &bd, &err);
    assert_int_equal(err, PH_OK);
    ph_shape_def sd = ph_default_shape_def();
    sd.type = PH_SHAPE_BOX;
    sd.half_extents = ph_v3(0.5, 0.5, 0.5);
    ph_shape_create(nb, &sd, &err);
    assert_int_equal(err, PH_OK);
}

/* Steps both worlds with `edit` applied to both before the step; returns
 * how many of a's builds in that step reused the layout. */
typedef void (*edit_fn)(ph_world_id w);
static int64_t edited_step(ph_world_id a, ph_world_id b, edit_fn edit, int step) {
    if (edit) {
        edit(a);
        edit(b);
    }
    const int64_t r = ph__world_get(a)->wreuse_builds;
    step_both(a, b, step);
    return ph__world_get(a)->wreuse_builds - r;
}

static int n_top; /* stack20's top cube: the last body */
static void edit_add(ph_world_id w) { put_box_on(w, n_top); }
static void edit_remove(ph_world_id w) {
    ph_body_id b[1024];
    const int n = ph_world_get_bodies(w, b, 1024);
    assert_int_equal(ph_body_destroy(b[n - 1]), PH_OK);
}
static void edit_tilt(ph_world_id w) {
    /* The top cube turned 0.2 rad about x, raised so that one edge rests
     * on the cube below: a face contact of four points becomes an edge. */
    ph_body_id t = body_at(w, n_top);
    ph_transform x;
    assert_int_equal(ph_body_get_transform(t, &x), PH_OK);
    const ph_quat q = ph_quat_axis_angle(ph_v3(1, 0, 0), 0.2);
    assert_int_equal(ph_body_set_transform(t, ph_v3(x.p.x, x.p.y, x.p.z + 0.1), q), PH_OK);
}
static void edit_gravity(ph_world_id w) {
    ph_settings s;
    assert_int_equal(ph_world_get_settings(w, &s), PH_OK);
    s.gravity = ph_v3(0.3, 0.2, 9.81); /* (upwards: the height order reversed) */
    assert_int_equal(ph_world_set_settings(w, &s), PH_OK);
}
static void edit_gravity_back(ph_world_id w) {
    ph_settings s;
    assert_int_equal(ph_world_get_settings(w, &s), PH_OK);
    s.gravity = ph_v3(0, 0, -9.81);
    assert_int_equal(ph_world_set_settings(w, &s), PH_OK);
}
static void edit_block_off(ph_world_id w) {
    ph_settings s;
    assert_int_equal(ph_world_get_settings(w, &s), PH_OK);
    s.contact_block = !s.contact_block;
    assert_int_equal(ph_world_set_settings(w, &s), PH_OK);
}
static void edit_method(ph_world_id w) {
    ph_settings s;
    assert_int_equal(ph_world_get_settings(w, &s), PH_OK);
    s.method = s.method == PH_METHOD_PGS ? PH_METHOD_BLOCK_PGS : PH_METHOD_PGS;
    assert_int_equal(ph_world_set_settings(w, &s), PH_OK);
}

/* Runs k steps of both worlds without edits; returns the reused builds. */
static int64_t quiet_steps(ph_world_id a, ph_world_id b, int *step, int k) {
    const int64_t r = ph__world_get(a)->wreuse_builds;
    for (int i = 0; i < k; i++, (*step)++)
        step_both(a, b, *step);
    return ph__world_get(a)->wreuse_builds - r;
}

/* stack20 through edits, each changing what the layout is made from:
 * the step after each must not reuse it (and gives the same states as the
 * full build every step); quiet runs between them must reuse it again. */
static void test_edits(void **state) {
    (void)state;
    ph_world_id a = make_world("stack20", 0, 1, 0), b = make_world("stack20", 1, 1, 0);
    n_top = ph_world_body_count(a) - 1;
    int k = 0;
    assert_true(quiet_steps(a, b, &k, 60) > 0);
    assert_true(quiet_steps(a, b, &k, 10) >= 5);
    /* A manifold appears. */
    assert_int_equal(edited_step(a, b, edit_add, k++), 0);
    quiet_steps(a, b, &k, 40);
    assert_true(quiet_steps(a, b, &k, 10) >= 5);
    /* Manifolds disappear (the box put on is the last body). */
    assert_int_equal(edited_step(a, b, edit_remove, k++), 0);
    quiet_steps(a, b, &k, 40);
    assert_true(quiet_steps(a, b, &k, 10) >= 5);
    /* A manifold's points change: the top cube on an edge. */
    const int32_t before = ph__world_get(a)->native_rows;
    assert_int_equal(edited_step(a, b, edit_tilt, k++), 0);
    assert_true(ph__world_get(a)->native_rows < before);
    quiet_steps(a, b, &k, 60);
    assert_true(quiet_steps(a, b, &k, 10) >= 5);
    /* Gravity turned upwards for a step, then back: each time every
     * body's manifolds are in the reverse height order. The turn makes
     * the layout afresh; the turn back finds the layout before the turn
     * in the layout cache (its order holds again) and takes it, which
     * step_both checks against the full build's. */
    const int64_t hits = ph__world_get(a)->wlayout_hits;
    assert_int_equal(edited_step(a, b, edit_gravity, k++), 0);
    assert_true(ph__world_get(a)->wlayout_hits == hits);
    assert_int_equal(edited_step(a, b, edit_gravity_back, k++), 1);
    assert_true(ph__world_get(a)->wlayout_hits == hits + 1);
    quiet_steps(a, b, &k, 40);
    assert_true(quiet_steps(a, b, &k, 10) >= 5);
    /* Row mode (contact_block off) and back; another method and back.
     * Row mode's part of the batches (ph__wbrow) has an array of its own,
     * which point mode never reserves (r21-flat9). */
    assert_null(ph__world_get(a)->wrows);
    edited_step(a, b, edit_block_off, k++);
    quiet_steps(a, b, &k, 10);
    assert_non_null(ph__world_get(a)->wrows);
    assert_true(ph__array_cap(ph__world_get(a)->wrows) >= ph__world_get(a)->wbatch_count);
    edited_step(a, b, edit_block_off, k++);
    quiet_steps(a, b, &k, 10);
    edited_step(a, b, edit_method, k++);
    assert_int_equal(quiet_steps(a, b, &k, 5), 0); /* (no native build) */
    edited_step(a, b, edit_method, k++);
    assert_true(quiet_steps(a, b, &k, 20) > 0);
    /* A snapshot restored into a new world: its first build is full, and
     * it steps as the world it came from. */
    uint8_t *snap = NULL;
    size_t len = 0;
    assert_int_equal(ph_world_snapshot(a, &snap, &len), PH_OK);
    ph_snapshot_limits lim = {.max_bodies = 100000, .max_joints = 100000};
    ph_world_id c;
    assert_int_equal(ph_world_restore(snap, len, &lim, &c), PH_OK);
    ph_snapshot_free(snap);
    assert_int_equal(ph__world_get(c)->wreuse_ok, 0);
    for (int i = 0; i < 20; i++, k++) {
        step_both(a, b, k);
        assert_int_equal(ph_world_step(c), PH_OK);
        assert_true(ph_world_state_hash(c) == ph_world_state_hash(a));
        if (i == 0) assert_int_equal(ph__world_get(c)->wreuse_builds, 0);
    }
    assert_true(ph__world_get(c)->wreuse_builds > 0);
    ph_world_destroy(c);
    ph_world_destroy(a);
    ph_world_destroy(b);
}

/* Sleeping on: grid1000's columns fall asleep island by island (the solver
 * bodies renumbered: full builds), then kicks wake islands. */
static void test_sleep_wake(void **state) {
    (void)state;
    ph_world_id a = make_world("grid1000", 0, 1, 1), b = make_world("grid1000", 1, 1, 1);
    for (int k = 0; k < 400; k++) {
        if (k == 150 || k == 300) {
            for (int i = 0; i < 2; i++) {
                const ph_world_id w = i ? b : a;
                const ph_body_id t = body_at(w, k == 150 ? 17 : 555);
                ph_transform x;
                assert_int_equal(ph_body_get_transform(t, &x), PH_OK);
                assert_int_equal(ph_body_apply_impulse(t, ph_v3(3, 1, 0), x.p), PH_OK);
            }
        }
        step_both(a, b, k);
    }
    print_message("grid1000 with sleeping: %lld builds reused, %lld full, %d awake at the end\n",
                  (long long)ph__world_get(a)->wreuse_builds, (long long)ph__world_get(a)->wfull_builds,
                  ph_world_awake_count(a));
    assert_true(ph__world_get(a)->wreuse_builds > 0);
    ph_world_destroy(a);
    ph_world_destroy(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pyramid20),
        cmocka_unit_test(test_pyramid40_coloured),
        cmocka_unit_test(test_pyramid40_two_threads),
        cmocka_unit_test(test_pyramid40_cache_patience),
        cmocka_unit_test(test_grid1000_tiles),
        cmocka_unit_test(test_spheres1000),
        cmocka_unit_test(test_grid1000_two_threads),
        cmocka_unit_test(test_edits),
        cmocka_unit_test(test_sleep_wake),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
