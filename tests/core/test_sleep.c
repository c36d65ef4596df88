/*
 * test_sleep.c — sleeping islands (docs/core.md "Islands and sleeping"):
 * an island at rest leaves the step (no broadphase refresh, narrowphase
 * pair, solver row or integration: the step's counters say so, and an awake
 * island steps bit for bit as if the sleeping one were not there); a world
 * with nothing awake does the same work whatever sleeps in it, and one
 * awake body costs the same whether a pyramid or a thousand-box grid
 * sleeps beside it; islands wake as a whole when hit, edited, when the
 * settings change or when their support goes (destroyed, moved, its shape
 * removed, a kinematic support taken away), and nothing is left asleep in
 * mid-air; a step that fails (no memory) while an island wakes or falls
 * asleep leaves the world as a twin that never failed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ph_test.h"

#include <string.h>

#include "alloc.h"
#include "physd/ph_core.h"
#include "physd/ph_scenes.h"

static int awake(ph_body_id b) {
    int a = -1;
    assert_int_equal(ph_body_is_awake(b, &a), PH_OK);
    return a;
}

static ph_world_id sleep_world(void) {
    ph_world_def d = ph_default_world_def();
    d.settings.sleep = 1;
    int err;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    return w;
}

static ph_step_stats *stats(ph_world_id w) {
    static ph_step_stats st;
    assert_int_equal(ph_world_get_stats(w, &st), PH_OK);
    return &st;
}

/* 1 when every dynamic body sleeps. */
static int all_asleep(ph_world_id w) {
    ph_body_id ids[2048];
    const int n = ph_world_get_bodies(w, ids, 2048);
    assert_true(n >= 0 && n <= 2048);
    for (int i = 0; i < n; i++) {
        ph_body_state st;
        assert_int_equal(ph_body_get_state(ids[i], &st), PH_OK);
        if (st.type == PH_BODY_DYNAMIC && awake(ids[i])) return 0;
    }
    return 1;
}

/* Steps until every dynamic body sleeps (at most max steps); returns the
 * steps. */
static int step_until_asleep(ph_world_id w, int max) {
    for (int s = 1; s <= max; s++) {
        assert_int_equal(ph_world_step(w), PH_OK);
        if (all_asleep(w)) return s;
    }
    fail_msg("not asleep after %d steps", max);
    return -1;
}

/* A stack of n unit cubes at (x, y), exactly touching. */
static void stack(ph_world_id w, double x, double y, int n, ph_body_id *out) {
    for (int i = 0; i < n; i++)
        out[i] = ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(x, y, 0.5 + i), ph_quat_identity(), 0.5);
}

/* Every sleeping body has a contact point (nothing sleeps in mid-air). */
static void assert_supported(ph_world_id w) {
    ph_body_id ids[2048];
    const int n = ph_world_get_bodies(w, ids, 2048);
    assert_true(n >= 0 && n <= 2048);
    const int nc = ph_world_get_contacts(w, NULL, 0);
    ph_contact_info *c = nc > 0 ? test_malloc((size_t)nc * sizeof *c) : NULL;
    assert_int_equal(ph_world_get_contacts(w, c, nc), nc);
    for (int i = 0; i < n; i++) {
        ph_body_state st;
        assert_int_equal(ph_body_get_state(ids[i], &st), PH_OK);
        if (st.type != PH_BODY_DYNAMIC || awake(ids[i])) continue;
        int touching = 0;
        for (int k = 0; k < nc && !touching; k++)
            touching =
                (c[k].body_a.index1 == ids[i].index1 || c[k].body_b.index1 == ids[i].index1) && c[k].depth > -0.02;
        if (!touching) fail_msg("body %d sleeps at z = %.4f with no contact", ids[i].index1, st.position.z);
    }
    if (c) test_free(c);
}

/* ------------------------------------------------------- costs nothing */

/* A world whose islands all sleep: its step refreshes no shape, makes no
 * pair, no row, no iteration, steps no body, for pyramid20 and grid1000
 * alike; with one falling sphere added far away, the step's work is that
 * sphere's (one shape, at most one pair, with the ground) in both worlds. */
static void test_asleep_world_costs_nothing(void **state) {
    (void)state;
    const char *scenes[] = {"pyramid20", "grid1000"};
    int work[2][4];
    for (int k = 0; k < 2; k++) {
        ph_world_id w = sleep_world();
        assert_int_equal(ph_scene_build(w, scenes[k]), PH_OK);
        const int steps = step_until_asleep(w, 600);
        assert_int_equal(ph_world_step(w), PH_OK); /* (the last one stepped them, then they slept) */
        const ph_scene_info *si = ph_scene_find(scenes[k]);
        ph_step_stats *st = stats(w);
        print_message("%s: asleep after %d steps: %d bodies in %d islands, %d contacts kept\n", scenes[k], steps,
                      st->sleeping_bodies, st->sleeping_islands, st->contacts);
        assert_int_equal(st->sleeping_bodies, si->bodies);
        assert_int_equal(st->awake_bodies, 0);
        assert_int_equal(st->pairs, 0);
        assert_int_equal(st->rows, 0);
        assert_int_equal(st->iterations, 0);
        assert_int_equal(st->shapes_updated, 0);
        assert_true(st->row_updates == 0);
        assert_true(st->contacts > 0); /* (they are kept, with their impulses) */
        assert_true(st->sleeping_islands >= 1);
        assert_supported(w);
        /* One sphere dropped 40 m away (it lands after about 19 steps and
         * could sleep 30 steps later): only it is stepped. */
        ph_body_def bd = ph_default_body_def();
        bd.position = ph_v3(40, 40, 1.0);
        int err;
        ph_body_id s = ph_body_create(w, &bd, &err);
        ph_shape_def sd = ph_default_shape_def();
        ph_shape_create(s, &sd, &err);
        assert_int_equal(err, PH_OK);
        int maxpairs = 0;
        for (int i = 0; i < 40; i++) {
            assert_int_equal(ph_world_step(w), PH_OK);
            st = stats(w);
            assert_int_equal(st->awake_bodies, 1);
            assert_int_equal(st->shapes_updated, 1);
            assert_int_equal(st->sleeping_bodies, si->bodies);
            if (st->pairs > maxpairs) maxpairs = st->pairs;
        }
        work[k][0] = st->awake_bodies;
        work[k][1] = st->shapes_updated;
        work[k][2] = maxpairs;
        work[k][3] = st->rows;
        ph_world_destroy(w);
    }
    print_message("one awake sphere: pairs %d / %d, rows %d / %d\n", work[0][2], work[1][2], work[0][3], work[1][3]);
    assert_int_equal(work[0][2], 1); /* the sphere and the ground */
    assert_memory_equal(work[0], work[1], sizeof work[0]);
}

/* An island asleep beside an awake one changes nothing for the awake one:
 * a three-box stack kept awake (a small force on its top box every step)
 * steps bit for bit the same, with the same pairs, rows and work, in a
 * world where pyramid20 sleeps 30 m away (the stack created after it fell
 * asleep) and in one without it. */
static void test_sleeping_island_is_not_stepped(void **state) {
    (void)state;
    ph_world_id a = sleep_world(), b = sleep_world();
    ph_test_ground(a, ph_v3(0, 0, 1), 0.5);
    ph_test_ground(b, ph_v3(0, 0, 1), 0.5);
    for (int r = 0; r < 20; r++)
        for (int i = 0; i < 20 - r; i++)
            ph_test_box(b, PH_BODY_DYNAMIC, ph_v3((double)i - 0.5 * (double)(19 - r), 30, 0.5 + r), ph_quat_identity(),
                        0.5);
    step_until_asleep(b, 600);
    assert_int_equal(stats(b)->sleeping_bodies, 210);
    ph_body_id sa[3], sb[3];
    stack(a, 0, 0, 3, sa);
    stack(b, 0, 0, 3, sb);
    for (int i = 0; i < 120; i++) {
        const ph_vec3 f = ph_v3(50, 0, 0), at = ph_v3(0, 0, 3);
        assert_int_equal(ph_body_apply_force(sa[2], f, at), PH_OK);
        assert_int_equal(ph_body_apply_force(sb[2], f, at), PH_OK);
        assert_int_equal(ph_world_step(a), PH_OK);
        assert_int_equal(ph_world_step(b), PH_OK);
        ph_step_stats ta = *stats(a), tb = *stats(b);
        assert_int_equal(ta.awake_bodies, 3);
        assert_int_equal(tb.awake_bodies, 3);
        assert_int_equal(tb.sleeping_bodies, 210);
        assert_int_equal(ta.pairs, tb.pairs);
        assert_int_equal(ta.rows, tb.rows);
        assert_int_equal(ta.shapes_updated, 3);
        assert_int_equal(tb.shapes_updated, 3);
        assert_true(ta.row_updates == tb.row_updates);
        for (int k = 0; k < 3; k++) {
            ph_body_state x, y;
            ph_body_get_state(sa[k], &x);
            ph_body_get_state(sb[k], &y);
            assert_memory_equal(&x.position, &y.position, sizeof x.position);
            assert_memory_equal(&x.orientation, &y.orientation, sizeof x.orientation);
            assert_memory_equal(&x.linear_velocity, &y.linear_velocity, sizeof x.linear_velocity);
        }
    }
    ph_world_destroy(a);
    ph_world_destroy(b);
}

/* ----------------------------------------------------------- waking */

/* Two stacks asleep; a sphere thrown at one wakes all of that stack in the
 * step of the contact, the other stays asleep; the hit stack moves. */
static void test_hit_wakes_the_island(void **state) {
    (void)state;
    ph_world_id w = sleep_world();
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_id s1[4], s2[4];
    stack(w, 0, 0, 4, s1);
    stack(w, 10, 0, 4, s2);
    step_until_asleep(w, 300);
    assert_int_equal(stats(w)->sleeping_islands, 2);
    ph_transform top0;
    ph_body_get_transform(s1[3], &top0);
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(-3, 0, 3.5);
    bd.linear_velocity = ph_v3(15, 0, 0);
    bd.gravity_scale = 0;
    int err;
    ph_body_id ball = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    sd.radius = 0.3;
    sd.density = 5000;
    ph_shape_create(ball, &sd, &err);
    int woke = -1, reach_far = -1, reach_max = 0;
    for (int s = 0; s < 30; s++) {
        /* ph_world_step_reach bounds what the step moves: the ball alone
         * while it is far, the ball and the whole first stack once it can
         * touch it, never the second stack. */
        const int reach = ph_world_step_reach(w, 1000);
        if (s == 0) reach_far = reach;
        if (reach > reach_max) reach_max = reach;
        if (reach > 1) assert_int_equal(ph_world_step_reach(w, 2), 3); /* limit + 1 past the limit */
        assert_int_equal(ph_world_step(w), PH_OK);
        assert_true(stats(w)->awake_bodies <= reach);
        const int a0 = awake(s1[0]);
        for (int k = 1; k < 4; k++)
            assert_int_equal(awake(s1[k]), a0); /* as a whole */
        assert_int_equal(awake(s2[0]), 0);
        if (a0 && woke < 0) {
            woke = s;
            assert_int_equal(stats(w)->awake_bodies, 5); /* stepped in that very step */
            assert_int_equal(stats(w)->sleeping_bodies, 4);
        }
    }
    ph_transform top1;
    ph_body_get_transform(s1[3], &top1);
    print_message("woken at step %d, top box pushed %.3f m; step reach %d while far, at most %d\n", woke,
                  top1.p.x - top0.p.x, reach_far, reach_max);
    assert_int_equal(reach_far, 1);
    assert_int_equal(reach_max, 5);
    assert_int_equal(ph_world_step_reach(w, -1), PH_ERR_INVALID_ARGUMENT);
    /* A body destroyed since the last step is still in the awake list until
     * the next step settles it: the bound skips it (ASan would see a read
     * of its freed shapes). */
    for (int k = 0; k < 4; k++)
        assert_int_equal(ph_body_destroy(s1[k]), PH_OK);
    assert_int_equal(ph_body_destroy(ball), PH_OK);
    const int after = ph_world_step_reach(w, 1000);
    assert_true(after >= 0 && after <= 5);
    assert_int_equal(ph_world_step(w), PH_OK);
    assert_int_equal(ph_world_step_reach(w, 1000), 0); /* the second stack sleeps on */
    assert_int_equal(ph_world_step_reach((ph_world_id){0, 0}, 10), PH_ERR_INVALID_HANDLE);
    assert_true(woke >= 0 && woke < 15);
    assert_true(top1.p.x - top0.p.x > 0.05);
    ph_world_destroy(w);
}

/* An edit of one body wakes its whole island at once (not the other);
 * after it falls asleep again a settings change wakes everything, a
 * change of record_merits alone nothing. */
static void test_edit_and_settings_wake(void **state) {
    (void)state;
    ph_world_id w = sleep_world();
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_id s1[3], s2[3];
    stack(w, 0, 0, 3, s1);
    stack(w, 5, 0, 3, s2);
    step_until_asleep(w, 300);
    assert_int_equal(ph_body_apply_impulse(s1[0], ph_v3(0, 0, 1), ph_v3(0, 0, 0.5)), PH_OK);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(awake(s1[k]), 1);
        assert_int_equal(awake(s2[k]), 0);
    }
    assert_int_equal(ph_world_step(w), PH_OK);
    assert_int_equal(stats(w)->awake_bodies, 3);
    step_until_asleep(w, 300);
    ph_settings set;
    assert_int_equal(ph_world_get_settings(w, &set), PH_OK);
    set.record_merits = !set.record_merits;
    assert_int_equal(ph_world_set_settings(w, &set), PH_OK);
    assert_int_equal(awake(s1[0]) + awake(s2[0]), 0);
    set.contact_margin = 0.03;
    assert_int_equal(ph_world_set_settings(w, &set), PH_OK);
    for (int k = 0; k < 3; k++)
        assert_int_equal(awake(s1[k]) + awake(s2[k]), 2);
    assert_int_equal(ph_world_step(w), PH_OK);
    assert_int_equal(stats(w)->awake_bodies, 6);
    assert_int_equal(stats(w)->sleeping_bodies, 0);
    ph_world_destroy(w);
}

/* A box asleep on a support, and the support goes: destroyed (a static
 * box, a dynamic box under a stack), moved away (a static box, a kinematic
 * box), or its shape removed: the box wakes and falls, and afterwards
 * nothing sleeps without a contact. */
enum { GO_DESTROY_STATIC, GO_MOVE_STATIC, GO_SHAPE_STATIC, GO_MOVE_KINEMATIC, GO_DESTROY_DYNAMIC, GO_COUNT };

static void test_removed_support(void **state) {
    (void)state;
    static const char *what[] = {"static support destroyed", "static support moved", "static support's shape removed",
                                 "kinematic support moved", "dynamic support destroyed"};
    for (int how = 0; how < GO_COUNT; how++) {
        ph_world_id w = sleep_world();
        ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
        const ph_body_type type = how == GO_MOVE_KINEMATIC    ? PH_BODY_KINEMATIC
                                  : how == GO_DESTROY_DYNAMIC ? PH_BODY_DYNAMIC
                                                              : PH_BODY_STATIC;
        /* The support at z = 2.5 (a dynamic one rests on a static pillar
         * that stays), the box on it at 3.5, a bystander stack apart. */
        ph_body_id pillar = {0, 0, 0};
        if (how == GO_DESTROY_DYNAMIC)
            pillar = ph_test_box(w, PH_BODY_STATIC, ph_v3(0, 0, 1.0), ph_quat_identity(), 0.5);
        ph_body_id sup =
            ph_test_box(w, type, ph_v3(0, 0, how == GO_DESTROY_DYNAMIC ? 2.0 : 2.5), ph_quat_identity(), 0.5);
        ph_body_id box = ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(0, 0, how == GO_DESTROY_DYNAMIC ? 3.0 : 3.5),
                                     ph_quat_identity(), 0.5);
        ph_body_id other[2];
        stack(w, 8, 0, 2, other);
        step_until_asleep(w, 300);
        assert_int_equal(awake(box), 0);
        ph_transform t0;
        ph_body_get_transform(box, &t0);
        switch (how) {
        case GO_DESTROY_STATIC:
        case GO_DESTROY_DYNAMIC:
            assert_int_equal(ph_body_destroy(sup), PH_OK);
            break;
        case GO_MOVE_STATIC:
        case GO_MOVE_KINEMATIC:
            assert_int_equal(ph_body_set_transform(sup, ph_v3(20, 0, 2.5), ph_quat_identity()), PH_OK);
            break;
        case GO_SHAPE_STATIC: {
            ph_shape_id sh;
            assert_int_equal(ph_body_get_shapes(sup, &sh, 1), 1);
            assert_int_equal(ph_shape_destroy(sh), PH_OK);
            break;
        }
        }
        assert_int_equal(ph_world_step(w), PH_OK);
        assert_int_equal(awake(box), 1);
        assert_int_equal(awake(other[0]), 0); /* (the bystander sleeps on) */
        for (int i = 0; i < 120; i++)
            assert_int_equal(ph_world_step(w), PH_OK);
        ph_transform t1;
        ph_body_get_transform(box, &t1);
        print_message("%s: the box fell %.3f m\n", what[how], t0.p.z - t1.p.z);
        assert_true(t0.p.z - t1.p.z > (how == GO_DESTROY_DYNAMIC ? 0.9 : 1.9));
        assert_supported(w);
        (void)pillar;
        ph_world_destroy(w);
    }
}

/* A box thrown straight up is never asleep until it has landed; a static
 * box created where a sleeping box lies wakes it. */
static void test_never_asleep_in_mid_air(void **state) {
    (void)state;
    ph_world_id w = sleep_world();
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_id box = ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(0, 0, 0.5), ph_quat_identity(), 0.5);
    step_until_asleep(w, 300);
    assert_int_equal(ph_body_set_velocity(box, ph_v3(0, 0, 3), ph_v3(0, 0, 0)), PH_OK);
    int landed = 0;
    for (int i = 0; i < 200; i++) {
        assert_int_equal(ph_world_step(w), PH_OK);
        ph_transform t;
        ph_body_get_transform(box, &t);
        if (t.p.z > 0.52) assert_int_equal(awake(box), 1);
        if (t.p.z < 0.51 && i > 10) landed = 1;
    }
    assert_true(landed);
    assert_int_equal(awake(box), 0);
    assert_supported(w);
    /* A static box put across it wakes it (it is pushed out). */
    ph_test_box(w, PH_BODY_STATIC, ph_v3(0.8, 0, 0.5), ph_quat_identity(), 0.5);
    assert_int_equal(awake(box), 1);
    ph_world_destroy(w);
}

/* ----------------------------------------------------- failed steps */

/* Steps a with the k-th allocation failing, k = 1, 2, ... until the step
 * stands, and its twin b once: every failed step changes nothing, and the
 * step that stands matches the twin (poses, velocities, sleep flags). */
static void step_failing(ph_world_id a, ph_world_id b, int *failed) {
    const uint64_t h0 = ph_world_state_hash(a);
    for (int64_t k = 1;; k++) {
        ph__alloc_fail_at(k);
        const int e = ph_world_step(a);
        const int64_t made = ph__alloc_count();
        ph__alloc_fail_at(0);
        if (made < k || e == PH_OK) {
            assert_int_equal(e, PH_OK);
            break;
        }
        assert_int_equal(e, PH_ERR_NO_MEMORY);
        assert_true(ph_world_state_hash(a) == h0);
        ++*failed;
    }
    assert_int_equal(ph_world_step(b), PH_OK);
    assert_true(ph_world_state_hash(a) == ph_world_state_hash(b));
    ph_body_id ia[64], ib[64];
    const int n = ph_world_get_bodies(a, ia, 64);
    assert_int_equal(ph_world_get_bodies(b, ib, 64), n);
    for (int i = 0; i < n; i++)
        assert_int_equal(awake(ia[i]), awake(ib[i]));
}

/* Two stacks fall asleep and one is hit, every step failing first at each
 * of its allocations in turn (among them those of the islands put to sleep
 * and of the island a contact wakes). */
static void test_failed_steps_undo_sleep_and_wake(void **state) {
    (void)state;
    ph_world_id w[2];
    for (int t = 0; t < 2; t++) {
        w[t] = sleep_world();
        ph_test_ground(w[t], ph_v3(0, 0, 1), 0.5);
        ph_body_id s[3];
        stack(w[t], 0, 0, 3, s);
        stack(w[t], 6, 0, 3, s);
    }
    int failed = 0;
    for (int i = 0; i < 45; i++)
        step_failing(w[0], w[1], &failed);
    assert_int_equal(stats(w[0])->sleeping_bodies, 6);
    for (int t = 0; t < 2; t++) {
        ph_body_def bd = ph_default_body_def();
        bd.position = ph_v3(-3, 0, 1.5);
        bd.linear_velocity = ph_v3(12, 0, 0);
        bd.gravity_scale = 0;
        int err;
        ph_body_id ball = ph_body_create(w[t], &bd, &err);
        ph_shape_def sd = ph_default_shape_def();
        sd.radius = 0.3;
        ph_shape_create(ball, &sd, &err);
    }
    for (int i = 0; i < 30; i++)
        step_failing(w[0], w[1], &failed);
    print_message("%d steps failed and were undone\n", failed);
    assert_int_equal(stats(w[0])->sleeping_bodies, 3);
    assert_true(failed > 0);
    ph_world_destroy(w[0]);
    ph_world_destroy(w[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asleep_world_costs_nothing),
        cmocka_unit_test(test_sleeping_island_is_not_stepped),
        cmocka_unit_test(test_hit_wakes_the_island),
        cmocka_unit_test(test_edit_and_settings_wake),
        cmocka_unit_test(test_removed_support),
        cmocka_unit_test(test_never_asleep_in_mid_air),
        cmocka_unit_test(test_failed_steps_undo_sleep_and_wake),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
