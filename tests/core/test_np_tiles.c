/*
 * test_np_tiles.c — the collision run tile by tile (r21-tile13; step.c's
 * np_by_tile, narrowphase.c's ph__narrowphase_tiles_begin and
 * ph__narrowphase_tile, solver_wide.c's ph__wide_tile_keys): after a step
 * that kept its layout and ran its last substep in the tiles, the next
 * step collides only what no tile holds up front and each tile's
 * manifolds right before the tile's first substep; a tile that finds the
 * layout or the contacts changed has the step undone and run again with
 * the narrowphase over all pairs. Checked against the same world with it
 * off (np_tiles_off), step after step: the state hash, the contact count,
 * the manifolds' count and every manifold's depths and impulses, the
 * events (count, order, bodies, shapes, points), the deepest point and
 * the cache's reuses; and that the settled grid does collide by tile
 * (most steps) and that pushes, lifts and a removed body (steps run
 * again, or not by tile) stay the same.
 *
 * Normal path: build two worlds, step, compare. Failure modes: none beyond
 * the assertions. Invariants: default settings; one thread but in test_np_tiles_threads (2 and 4).
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
#include "world.h"

static ph_world_id make(const char *scene, int off) {
    ph_world_def d = ph_default_world_def();
    if (d.max_bodies < 5000) d.max_bodies = 5000;
    int err = -99;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    assert_int_equal(ph_scene_build(w, scene), PH_OK);
    ph__world_get(w)->np_tiles_off = off;
    return w;
}

static void same_worlds(ph_world_id ia, ph_world_id ib, int step) {
    const ph__world *a = ph__world_get(ia), *b = ph__world_get(ib);
    if (ph_world_state_hash(ia) != ph_world_state_hash(ib)) fail_msg("step %d: the states differ", step);
    assert_int_equal(a->stats.contacts, b->stats.contacts);
    assert_int_equal(a->stats.manifolds_reused, b->stats.manifolds_reused);
    assert_true(a->stats.max_penetration == b->stats.max_penetration);
    assert_int_equal(a->manifold_count, b->manifold_count);
    for (int32_t i = 0; i < a->manifold_count; i++) {
        const ph__contact_manifold *x = &a->manifolds[i], *y = &b->manifolds[i];
        if (x->sa != y->sa || x->sb != y->sb || x->m.count != y->m.count || x->row0 != y->row0)
            fail_msg("step %d: manifold %d differs", step, (int)i);
        for (int k = 0; k < x->m.count; k++)
            if (x->m.pts[k].depth != y->m.pts[k].depth || x->ln[k] != y->ln[k] || x->lt1[k] != y->lt1[k] ||
                x->lt2[k] != y->lt2[k])
                fail_msg("step %d: manifold %d point %d differs", step, (int)i, k);
    }
    ph_contact_event ea[64], eb[64];
    const int na = ph_world_get_contact_events(ia, ea, 64), nb = ph_world_get_contact_events(ib, eb, 64);
    assert_int_equal(na, nb);
    for (int k = 0; k < na && k < 64; k++)
        if (ea[k].begin != eb[k].begin || ea[k].body_a.index1 != eb[k].body_a.index1 ||
            ea[k].body_b.index1 != eb[k].body_b.index1 || ea[k].shape_a.index1 != eb[k].shape_a.index1 ||
            ea[k].shape_b.index1 != eb[k].shape_b.index1 || memcmp(&ea[k].point, &eb[k].point, sizeof ea[k].point) ||
            memcmp(&ea[k].normal, &eb[k].normal, sizeof ea[k].normal) ||
            memcmp(&ea[k].approach_speed, &eb[k].approach_speed, sizeof ea[k].approach_speed))
            fail_msg("step %d: event %d differs", step, k);
}

/* Body n of a scene's world (the ground is 0). */
static ph_body_id body_at(ph_world_id w, int n) {
    static ph_body_id ids[5000];
    const int c = ph_world_get_bodies(w, ids, 5000);
    assert_true(n < c);
    return ids[n];
}

static void set_threads(ph_world_id w, int threads) {
    ph_settings s;
    assert_int_equal(ph_world_get_settings(w, &s), PH_OK);
    s.threads = threads;
    assert_int_equal(ph_world_set_settings(w, &s), PH_OK);
}

/* grid1000 settled, then disturbed: a push sideways (contacts that break,
 * a layout made again), a lift (a box leaves its contact for some steps),
 * a removed box (the counts change): every step the same as with the
 * collision over all pairs (world b, one thread). World a steps with
 * threads (each worker colliding the tiles it claims). */
static void grid_disturbed(int threads) {
    ph_world_id a = make("grid1000", 0), b = make("grid1000", 1);
    set_threads(a, threads);
    for (int s = 0; s < 260; s++) {
        if (s == 120 || s == 180 || s == 220) {
            ph_world_id ws[2] = {a, b};
            for (int q = 0; q < 2; q++) {
                if (s == 120)
                    assert_int_equal(ph_body_set_velocity(body_at(ws[q], 905), ph_v3(0.8, 0, 0), ph_v3(0, 0, 0)),
                                     PH_OK);
                else if (s == 180)
                    assert_int_equal(ph_body_set_velocity(body_at(ws[q], 955), ph_v3(0, 0, 1.5), ph_v3(0, 0, 0)),
                                     PH_OK);
                else
                    assert_int_equal(ph_body_destroy(body_at(ws[q], 990)), PH_OK);
            }
        }
        assert_int_equal(ph_world_step(a), PH_OK);
        assert_int_equal(ph_world_step(b), PH_OK);
        same_worlds(a, b, s);
    }
    const ph__world *wa = ph__world_get(a), *wb = ph__world_get(b);
    print_message("grid1000, %d thread(s): %lld of 260 steps collided by tile, %lld run again\n", threads,
                  (long long)wa->np_tile_steps, (long long)wa->np_retries);
    assert_int_equal(wb->np_tile_steps, 0);
    assert_int_equal(wb->np_retries, 0);
    assert_true(wa->np_tile_steps >= 150); /* (settled from step ~30 on, but for the disturbances) */
    assert_true(wa->np_retries >= 1);      /* (the push and the lift: some step ran again) */
    ph_world_destroy(a);
    ph_world_destroy(b);
}

static void test_np_tiles_grid(void **state) {
    (void)state;
    grid_disturbed(1);
}

/* 64 small pyramids (rows of 3, 2, 1 cubes), several tiles: two cubes
 * side by side on one below give it two manifolds at the same height to
 * rounding, whose order flips from step to step (docs/profile.md, "Fourth
 * pass") — each flip is a tile whose order check fails and a step run
 * again (or the layout made again): the same states as without. */
static void pyramids(int period, int64_t *by_tile, int64_t *retries) {
    ph_world_id w[2];
    ph_body_id mid[2][64]; /* each pyramid's middle base cube */
    for (int q = 0; q < 2; q++) {
        ph_world_def d = ph_default_world_def();
        d.settings.record_merits = 0;
        int err = -99;
        w[q] = ph_world_create(&d, &err);
        assert_int_equal(err, PH_OK);
        ph_body_def gd = ph_default_body_def();
        gd.type = PH_BODY_STATIC;
        ph_body_id g = ph_body_create(w[q], &gd, &err);
        ph_shape_def gs = ph_default_shape_def();
        gs.type = PH_SHAPE_PLANE;
        gs.normal = ph_v3(0, 0, 1);
        ph_shape_create(g, &gs, &err);
        assert_int_equal(err, PH_OK);
        for (int p = 0; p < 64; p++)
            for (int row = 0; row < 3; row++)
                for (int c = 0; c < 3 - row; c++) {
                    ph_body_def bd = ph_default_body_def();
                    bd.position = ph_v3(5.0 * (p % 8) + 1.05 * c + 0.525 * row, 5.0 * (p / 8), 0.5 + 1.0 * row);
                    ph_body_id b = ph_body_create(w[q], &bd, &err);
                    assert_int_equal(err, PH_OK);
                    if (row == 0 && c == 1) mid[q][p] = b;
                    ph_shape_def sd = ph_default_shape_def();
                    sd.type = PH_SHAPE_BOX;
                    sd.half_extents = ph_v3(0.5, 0.5, 0.5);
                    ph_shape_create(b, &sd, &err);
                    assert_int_equal(err, PH_OK);
                }
        ph__world_get(w[q])->np_tiles_off = q;
    }
    for (int s = 0; s < 240; s++) {
        /* From step 60 on, every period-th step the middle base cubes
         * tilted by 2e-4 rad about y, the sign alternating: the two
         * manifolds on each swap heights (their order flips) with the same
         * pairs touching. */
        for (int q = 0; q < 2 && s >= 60 && s % period == 0; q++)
            for (int p = 0; p < 64; p++) {
                ph_transform t;
                assert_int_equal(ph_body_get_transform(mid[q][p], &t), PH_OK);
                const double a = (s / period) % 2 ? 2e-4 : -2e-4;
                assert_int_equal(ph_body_set_transform(mid[q][p], t.p, ph_quat_axis_angle(ph_v3(0, 1, 0), a)), PH_OK);
            }
        assert_int_equal(ph_world_step(w[0]), PH_OK);
        assert_int_equal(ph_world_step(w[1]), PH_OK);
        same_worlds(w[0], w[1], s);
    }
    const ph__world *a = ph__world_get(w[0]);
    print_message("pyramids, a tilt every %d steps: %d tiles, %lld of 240 steps collided by tile, %lld run again\n",
                  period, (int)a->tile_count, (long long)a->np_tile_steps, (long long)a->np_retries);
    assert_true(a->tile_count >= 2);
    *by_tile = a->np_tile_steps;
    *retries = a->np_retries;
    ph_world_destroy(w[0]);
    ph_world_destroy(w[1]);
}

static void test_np_tiles_pyramids(void **state) {
    (void)state;
    int64_t by_tile, retries;
    pyramids(6, &by_tile, &retries);
    assert_true(by_tile > 0);
    assert_true(retries >= 1);
}

/* Contacts whose order flips every 4th step: a try by tile on such a step
 * fails and the step runs again (45 of 180 disturbed steps without a
 * wait), so the tries back off (1, 2, 4 ... 64 steps): a handful run
 * again — and the states stay the same as without. */
static void test_np_tiles_backoff(void **state) {
    (void)state;
    int64_t by_tile, retries;
    pyramids(4, &by_tile, &retries);
    assert_true(retries >= 3);
    assert_true(retries <= 12);
}

/* With two and four threads each worker collides the tiles it claims:
 * the same disturbed grid, every step the same as one thread colliding
 * over all pairs (a tile whose check fails stops the others and the step
 * runs again, whichever worker found it). */
static void test_np_tiles_threads(void **state) {
    (void)state;
    grid_disturbed(2);
    grid_disturbed(4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_np_tiles_grid),
        cmocka_unit_test(test_np_tiles_pyramids),
        cmocka_unit_test(test_np_tiles_backoff),
        cmocka_unit_test(test_np_tiles_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
