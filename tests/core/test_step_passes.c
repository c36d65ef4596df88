/*
 * test_step_passes.c — the step's passes over every awake body that
 * issue #21's r21-flat4 folded into others (step.c; docs/profile.md "An
 * eighth pass"), each against the same world with the test switch
 * passes_whole (the passes run whole after the step, as before):
 *
 * - the envelope check of a step whose last substep ran in the tiles is
 *   done tile by tile right after each tile's last integration: a body
 *   pushed out of the envelope is caught, and the body reported is the
 *   first in slot order (a body of the last tile whose slot is below a
 *   body of the first tile that also left), with the same fault as the
 *   whole pass gives;
 * - the contact points of the step's statistics are the last substep's
 *   count (no recount over the manifolds) unless the islands' end moved
 *   manifolds: at every step of a world going to sleep they equal
 *   ph__contact_points and the old world's;
 * - the save of a step's awake bodies (v_step, w_step, the poses and sleep
 *   state a failed step puts back) made block by block by the first
 *   broadphase's refresh: the same events, a cancelled and a failed step
 *   put back as before;
 * - the forces are cleared after a step by a pass that runs only when the
 *   solver bodies' pass found a force or torque with a bit set: a force
 *   (and a -0.0 component) is cleared as before, and a step without one
 *   skips the pass.
 *
 * Normal path: build two worlds, step, compare. Failure modes: none
 * beyond the assertions. Invariants: the default settings (native point
 * mode, tiles) without per-iteration merits, as the benchmark.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ph_test.h"

#include <math.h>
#include <string.h>

#include "island.h"
#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "world.h"

static ph_world_id scene_world(const char *scene, int sleep, int whole) {
    ph_world_def d = ph_default_world_def();
    d.settings.sleep = sleep;
    d.settings.record_merits = 0; /* (as the benchmark: the last substep in the tiles) */
    int err = -99;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    assert_int_equal(ph_scene_build(w, scene), PH_OK);
    ph__world_get(w)->passes_whole = whole;
    return w;
}

static ph_step_stats stats_of(ph_world_id w) {
    ph_step_stats st;
    assert_int_equal(ph_world_get_stats(w, &st), PH_OK);
    return st;
}

/* Steps both worlds; they must stay the same world. */
static void step_pair(ph_world_id a, ph_world_id b, int k) {
    assert_int_equal(ph_world_step(a), PH_OK);
    assert_int_equal(ph_world_step(b), PH_OK);
    if (ph_world_state_hash(a) != ph_world_state_hash(b)) fail_msg("step %d: state hashes differ", k);
    const ph_step_stats sa = stats_of(a), sb = stats_of(b);
    assert_int_equal(sa.contacts, sb.contacts);
    assert_int_equal(sa.manifolds, sb.manifolds);
    assert_int_equal((int)ph__contact_points(ph__world_get(b)), sb.contacts);
    /* The events (their approach speeds from the saved velocities). */
    enum { CAP = 4096 };
    static ph_contact_event ea[CAP], eb[CAP];
    const int na = ph_world_get_contact_events(a, ea, CAP), nb = ph_world_get_contact_events(b, eb, CAP);
    assert_int_equal(na, nb);
    assert_true(na <= CAP);
    for (int i = 0; i < na; i++) { /* (the handles name different worlds: their slots) */
        if (!ph_test_same_event(&ea[i], &eb[i])) fail_msg("step %d: event %d differs", k, i);
    }
}

/* grid1000 settled (its last substeps in the tiles); two bodies pushed
 * out of the envelope by a force the step applies (their speculative
 * reach, from the velocities before the step, does not change the
 * islands): X, the last solver body of the first tile, and Y, the first
 * of the last tile, whose slot is below X's. */
static void test_envelope_in_tiles(void **state) {
    (void)state;
    ph_world_id a = scene_world("grid1000", 0, 1), b = scene_world("grid1000", 0, 0);
    for (int k = 0; k < 60; k++)
        step_pair(a, b, k);
    ph__world *wb = ph__world_get(b), *wa = ph__world_get(a);
    const int64_t last0 = wb->tiled_last;
    step_pair(a, b, 60);
    assert_true(wb->tiled_last == last0 + 1); /* (settled: the last substep in the tiles) */
    assert_true(wa->tiled_last > 0);          /* (the old world tiles too, its envelope whole) */
    assert_true(wb->tile_count >= 2);
    int32_t x = -1, y = -1;
    for (int32_t s = 1; s < wb->sbody_count; s++) {
        if (wb->tile_of[s] == 0) x = s;
        if (wb->tile_of[s] == wb->tile_count - 1 && y < 0) y = s;
    }
    assert_true(x > 0 && y > 0);
    const int32_t bx = wb->sbody_body[x], by = wb->sbody_body[y];
    print_message("tiles %d: X solver body %d (slot %d), Y %d (slot %d)\n", (int)wb->tile_count, (int)x, (int)bx,
                  (int)y, (int)by);
    assert_true(by < bx); /* (Y first in slot order, found in a later tile) */
    const uint64_t h0 = ph_world_state_hash(b);
    for (int k = 0; k < 2; k++) {
        ph__world *w = k ? wb : wa;
        w->bodies[bx].force = ph_v3(0, 0, 1e13); /* (|v| far above 1e5 after the step) */
        w->bodies[by].force = ph_v3(0, 0, 1e13);
    }
    assert_int_equal(ph_world_step(a), PH_ERR_NONFINITE);
    assert_int_equal(ph_world_step(b), PH_ERR_NONFINITE);
    assert_true(wb->tiled_last == last0 + 2); /* (the failed step ran its last substep in the tiles) */
    assert_true(wb->env_tiled);               /* (and the tiles checked the envelope) */
    assert_false(wa->env_tiled);
    ph_fault fa, fb;
    assert_int_equal(ph_world_get_fault(a, &fa), PH_OK);
    assert_int_equal(ph_world_get_fault(b, &fb), PH_OK);
    assert_int_equal(fb.what, PH_FAULT_LINEAR_VELOCITY);
    assert_int_equal(fb.body.index1, by + 1);
    assert_int_equal(fa.what, fb.what);
    assert_int_equal(fa.body.index1, fb.body.index1);
    assert_int_equal(fa.body.gen, fb.body.gen);
    assert_true(fb.value > 1e5);
    assert_memory_equal(&fa.value, &fb.value, sizeof fa.value);
    assert_true(ph_world_state_hash(b) == h0); /* (the step undone) */
    /* Y back inside: X is then the one. */
    for (int k = 0; k < 2; k++)
        (k ? wb : wa)->bodies[by].force = ph_v3(0, 0, 0);
    assert_int_equal(ph_world_step(a), PH_ERR_NONFINITE);
    assert_int_equal(ph_world_step(b), PH_ERR_NONFINITE);
    assert_int_equal(ph_world_get_fault(a, &fa), PH_OK);
    assert_int_equal(ph_world_get_fault(b, &fb), PH_OK);
    assert_int_equal(fb.body.index1, bx + 1);
    assert_int_equal(fa.body.index1, fb.body.index1);
    assert_memory_equal(&fa.value, &fb.value, sizeof fa.value);
    /* Both back inside: the worlds go on alike. */
    for (int k = 0; k < 2; k++)
        (k ? wb : wa)->bodies[bx].force = ph_v3(0, 0, 0);
    for (int k = 61; k < 64; k++)
        step_pair(a, b, k);
    assert_true(wb->tiled_last == last0 + 6);
    ph_world_destroy(a);
    ph_world_destroy(b);
}

/* pyramid20 with sleeping on, to sleep and woken by a force: the contact
 * points of every step's statistics, counted or recounted. */
static void test_contact_points(void **state) {
    (void)state;
    ph_world_id a = scene_world("pyramid20", 1, 1), b = scene_world("pyramid20", 1, 0);
    int k = 0, slept = 0;
    for (; k < 900 && !slept; k++) {
        step_pair(a, b, k);
        slept = stats_of(b).sleeping_bodies > 0;
    }
    print_message("pyramid20 asleep after %d steps, %d contacts\n", k, stats_of(b).contacts);
    assert_true(slept);
    assert_true(stats_of(b).contacts > 0);
    /* A sphere dropped 40 m away: awake steps beside the sleeping points
     * (counted by the last substep: those of the sphere alone). */
    for (int j = 0; j < 2; j++) {
        ph_body_def bd = ph_default_body_def();
        bd.position = ph_v3(40, 40, 1.0);
        int err = -99;
        ph_body_id s = ph_body_create(j ? b : a, &bd, &err);
        assert_int_equal(err, PH_OK);
        ph_shape_def sd = ph_default_shape_def();
        ph_shape_create(s, &sd, &err);
        assert_int_equal(err, PH_OK);
    }
    const int asleep = stats_of(b).contacts;
    int beside = 0;
    for (int j = 0; j < 40; j++, k++) {
        step_pair(a, b, k);
        beside += stats_of(b).awake_bodies == 1 && stats_of(b).contacts > asleep;
    }
    assert_true(beside > 0); /* (the sphere's contact counted beside the pyramid's) */
    ph_body_id ids[4];
    assert_true(ph_world_get_bodies(b, ids, 4) >= 2);
    ph_body_id ida[4];
    assert_true(ph_world_get_bodies(a, ida, 4) >= 2);
    /* A push on a body wakes the island (its manifolds back in the step). */
    for (int j = 1; j < 2; j++) {
        assert_int_equal(ph_body_apply_force(ida[j], ph_v3(50, 0, 0), ph_v3(0, 0, 0)), PH_OK);
        assert_int_equal(ph_body_apply_force(ids[j], ph_v3(50, 0, 0), ph_v3(0, 0, 0)), PH_OK);
    }
    for (int j = 0; j < 5; j++, k++)
        step_pair(a, b, k);
    assert_int_equal(stats_of(b).sleeping_bodies, 0);
    ph_world_destroy(a);
    ph_world_destroy(b);
}

/* The forces' clearing: a force, a -0.0 component, none. */
static void test_forces_cleared(void **state) {
    (void)state;
    ph_world_id a = scene_world("grid1000", 0, 1), b = scene_world("grid1000", 0, 0);
    for (int k = 0; k < 20; k++)
        step_pair(a, b, k);
    ph__world *wa = ph__world_get(a), *wb = ph__world_get(b);
    assert_int_equal(wb->step_forced, 0); /* (no force: the pass skipped) */
    const int32_t i = wb->awake[wb->awake_count / 2];
    wa->bodies[i].force = wb->bodies[i].force = ph_v3(0, 0, 30);
    step_pair(a, b, 20);
    assert_int_equal(wb->step_forced, 1);
    assert_true(wb->bodies[i].force.z == 0 && wa->bodies[i].force.z == 0);
    /* -0.0: cleared to +0.0 as the whole pass does. */
    wa->bodies[i].torque.y = wb->bodies[i].torque.y = -0.0;
    assert_true(signbit(wb->bodies[i].torque.y));
    step_pair(a, b, 21);
    assert_int_equal(wb->step_forced, 1);
    assert_false(signbit(wb->bodies[i].torque.y));
    assert_memory_equal(&wa->bodies[i].torque, &wb->bodies[i].torque, sizeof(ph_vec3));
    step_pair(a, b, 22);
    assert_int_equal(wb->step_forced, 0);
    ph_world_destroy(a);
    ph_world_destroy(b);
}

/* The save of the awake bodies, made by the first broadphase's refresh:
 * a step cancelled before it (nothing to restore), one failing after it
 * (the poses, velocities and sleep state put back from the copies), and
 * the worlds going on alike, with sleeping on. */
static void test_save_in_refresh(void **state) {
    (void)state;
    ph_world_id a = scene_world("grid1000", 1, 1), b = scene_world("grid1000", 1, 0);
    for (int k = 0; k < 20; k++)
        step_pair(a, b, k);
    ph__world *wa = ph__world_get(a), *wb = ph__world_get(b);
    const uint64_t h0 = ph_world_state_hash(b);
    assert_int_equal(ph_world_cancel_step(a), PH_OK);
    assert_int_equal(ph_world_cancel_step(b), PH_OK);
    assert_int_equal(ph_world_step(a), PH_ERR_CANCELLED);
    assert_int_equal(ph_world_step(b), PH_ERR_CANCELLED);
    assert_false(wb->save_pending);
    assert_true(ph_world_state_hash(b) == h0);
    assert_true(ph_world_state_hash(a) == h0);
    step_pair(a, b, 20); /* (the cancel is over) */
    const uint64_t h1 = ph_world_state_hash(b);
    const int32_t i = wb->awake[wb->awake_count / 3];
    wa->bodies[i].force = wb->bodies[i].force = ph_v3(0, 0, 1e13); /* (|v| far above 1e5 after the step) */
    assert_int_equal(ph_world_step(a), PH_ERR_NONFINITE);
    assert_int_equal(ph_world_step(b), PH_ERR_NONFINITE);
    assert_true(ph_world_state_hash(b) == h1); /* (every awake body put back from the refresh's copies) */
    assert_true(ph_world_state_hash(a) == h1);
    wa->bodies[i].force = wb->bodies[i].force = ph_v3(0, 0, 0);
    for (int k = 21; k < 40; k++)
        step_pair(a, b, k);
    ph_world_destroy(a);
    ph_world_destroy(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope_in_tiles),
        cmocka_unit_test(test_contact_points),
        cmocka_unit_test(test_forces_cleared),
        cmocka_unit_test(test_save_in_refresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
