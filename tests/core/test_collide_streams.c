/*
 * test_collide_streams.c — the collision's passes in a cache-friendly form
 * (issue #21, target 3; docs/profile.md "A fifth pass") give the results of
 * the passes they replace, bit for bit.
 *
 * Two worlds of one scene, one with the test switch collide_whole (the
 * one-thread narrowphase's begin/end events merged over all pairs after
 * all the collisions, the broadphase's pair filter reading the shape
 * records), one without (the events found piece by piece right after each
 * piece's collisions, the filter reading the moving shapes' boxes from the
 * compact array the refresh writes), are stepped side by side; after every
 * step the pair lists, every manifold (pair, bodies, normal, points,
 * depths, features, impulses, tangents, body-frame points, the contact
 * cache's reference), the contact events (order and every field) and the
 * state hash must agree. Scenes: pyramid40 with cubes thrown up and pushed
 * out (events far apart in the pair order, in different pieces of 128
 * pairs), grid4000 (the filter dropping pairs of the fat list, the plane's
 * pairs read from its record), cubes landing on a static box (a resting
 * non-plane shape in the fat pairs) and a cube lifted off the ground (a
 * step with no pair at all, whose end event comes from last step's
 * manifold alone).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "contact.h"
#include "ph_test.h"
#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "world.h"

static ph_world_id make_world(int whole) {
    int err = 0;
    ph_world_def d = ph_default_world_def();
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    ph__world_get(w)->collide_whole = whole;
    return w;
}

static ph_world_id scene_world(const char *scene, int whole) {
    ph_world_id w = make_world(whole);
    assert_int_equal(ph_scene_build(w, scene), PH_OK);
    return w;
}

#define SAME(x, y, what)                                                                                               \
    do {                                                                                                               \
        if (memcmp(&(x), &(y), sizeof(x)) != 0) fail_msg("step %d, manifold %d: %s differs", step, i, what);           \
    } while (0)

/* Worlds a and b after the same step: the same pairs, manifolds, events
 * and state. Returns the step's events. */
static int same_worlds(ph_world_id ia, ph_world_id ib, int step) {
    const ph__world *a = ph__world_get(ia), *b = ph__world_get(ib);
    assert_int_equal(a->pair_count, b->pair_count);
    if (a->pair_count > 0) assert_memory_equal(a->pairs, b->pairs, (size_t)a->pair_count * sizeof *a->pairs);
    assert_int_equal(a->manifold_count, b->manifold_count);
    for (int32_t i = 0; i < a->manifold_count; i++) {
        const ph__contact_manifold *x = &a->manifolds[i], *y = &b->manifolds[i];
        SAME(x->sa, y->sa, "sa");
        SAME(x->sb, y->sb, "sb");
        SAME(x->ba, y->ba, "ba");
        SAME(x->bb, y->bb, "bb");
        SAME(x->friction, y->friction, "friction");
        SAME(x->restitution, y->restitution, "restitution");
        SAME(x->m.normal, y->m.normal, "normal");
        SAME(x->m.count, y->m.count, "count");
        for (int k = 0; k < x->m.count; k++) {
            SAME(x->m.pts[k].depth, y->m.pts[k].depth, "depth");
            SAME(x->m.pts[k].feature, y->m.pts[k].feature, "feature");
            SAME(x->loc_a[k], y->loc_a[k], "loc_a");
            SAME(x->loc_b[k], y->loc_b[k], "loc_b");
            SAME(x->depth0[k], y->depth0[k], "depth0");
            SAME(x->ln[k], y->ln[k], "ln");
            SAME(x->lt1[k], y->lt1[k], "lt1");
            SAME(x->lt2[k], y->lt2[k], "lt2");
        }
        SAME(x->t1, y->t1, "t1");
        SAME(x->t2, y->t2, "t2");
        SAME(x->approach, y->approach, "approach");
        SAME(x->ref_r, y->ref_r, "ref_r");
        if (x->ref_r >= 0) {
            SAME(x->ref_q, y->ref_q, "ref_q");
            SAME(x->ref_t, y->ref_t, "ref_t");
            SAME(x->n_loc, y->n_loc, "n_loc");
            SAME(x->ref_side, y->ref_side, "ref_side");
        }
    }
    enum { CAP = 4096 };
    static ph_contact_event ea[CAP], eb[CAP];
    const int na = ph_world_get_contact_events(ia, ea, CAP), nb = ph_world_get_contact_events(ib, eb, CAP);
    if (na != nb) fail_msg("step %d: %d events against %d", step, nb, na);
    assert_true(na <= CAP);
    for (int i = 0; i < na; i++) {
        if (!ph_test_same_event(&ea[i], &eb[i])) fail_msg("step %d: event %d differs", step, i);
    }
    if (ph_world_state_hash(ia) != ph_world_state_hash(ib)) fail_msg("step %d: state hashes differ", step);
    return na;
}

typedef void (*edit_fn)(ph_world_id w, int step);

/* What a case saw in the new world: steps with events, events, steps
 * whose filter dropped fat pairs, steps without pairs but with events,
 * the largest number of pairs. */
typedef struct seen {
    int event_steps, events, filtered, empty_events, max_pairs;
} seen;

static seen run_pair(ph_world_id a, ph_world_id b, int steps, edit_fn edit) {
    seen s = {0, 0, 0, 0, 0};
    for (int k = 0; k < steps; k++) {
        if (edit) {
            edit(a, k);
            edit(b, k);
        }
        assert_int_equal(ph_world_step(a), PH_OK);
        assert_int_equal(ph_world_step(b), PH_OK);
        const int ne = same_worlds(a, b, k);
        const ph__world *w = ph__world_get(b);
        s.event_steps += ne > 0;
        s.events += ne;
        s.filtered += w->fat_ok && w->pair_count < w->fat_pair_count;
        s.empty_events += w->pair_count == 0 && ne > 0;
        if (w->pair_count > s.max_pairs) s.max_pairs = w->pair_count;
    }
    ph_world_destroy(a);
    ph_world_destroy(b);
    return s;
}

static ph_body_id body_at(ph_world_id w, int i) {
    static ph_body_id b[8192];
    const int n = ph_world_get_bodies(w, b, 8192);
    assert_true(n > i);
    return b[i];
}

/* pyramid40 (821 bodies: the ground, then the rows bottom-up, left to
 * right): at step 20 the apex and the right ends of the three rows below
 * are thrown up, landing at different steps, and the two ends of the
 * bottom row pushed out. */
static void throw_apex(ph_world_id w, int k) {
    if (k != 20) return;
    const int n = ph_world_body_count(w);
    assert_int_equal(n, 821);
    for (int q = 0; q < 4; q++)
        assert_int_equal(
            ph_body_set_velocity(body_at(w, n - 1 - q * (q + 3) / 2), ph_v3(0, 0, 2 + 0.5 * q), ph_v3(0, 0, 0)), PH_OK);
    assert_int_equal(ph_body_set_velocity(body_at(w, 1), ph_v3(-3, 0, 0), ph_v3(0, 0, 0)), PH_OK);
    assert_int_equal(ph_body_set_velocity(body_at(w, 40), ph_v3(3, 0, 0), ph_v3(0, 0, 0)), PH_OK);
}

static void test_pyramid40_events(void **state) {
    (void)state;
    const seen s = run_pair(scene_world("pyramid40", 1), scene_world("pyramid40", 0), 70, throw_apex);
    print_message("pyramid40: %d steps with events (%d events), up to %d pairs\n", s.event_steps, s.events,
                  s.max_pairs);
    assert_true(s.max_pairs >= 4 * 128); /* (several pieces) */
    assert_true(s.event_steps >= 3);
    assert_true(s.events >= 10);
}

static void test_grid4000_filter(void **state) {
    (void)state;
    const seen s = run_pair(scene_world("grid4000", 1), scene_world("grid4000", 0), 40, NULL);
    print_message("grid4000: %d steps whose filter dropped fat pairs, %d events\n", s.filtered, s.events);
    assert_true(s.filtered >= 10);
    assert_true(s.events >= 4000); /* (every cube lands) */
}

/* A body of the given type at p holding one box of half extents he (or a
 * ground plane, he.x < 0); returns its shape. */
static ph_shape_id add_body_box(ph_world_id w, ph_body_type type, ph_vec3 p, ph_vec3 he) {
    ph_body_def bd = ph_default_body_def();
    bd.type = type;
    bd.position = p;
    int err = 0;
    const ph_body_id b = ph_body_create(w, &bd, &err);
    assert_int_equal(err, PH_OK);
    ph_shape_def sd = ph_default_shape_def();
    sd.type = he.x < 0 ? PH_SHAPE_PLANE : PH_SHAPE_BOX;
    sd.normal = ph_v3(0, 0, 1);
    sd.half_extents = he;
    const ph_shape_id s = ph_shape_create(b, &sd, &err);
    assert_int_equal(err, PH_OK);
    return s;
}

/* A static box (a table: its shape rests in the resting tree, not
 * refreshed) with eight cubes dropped on it in two layers. */
static ph_world_id table_world(int whole) {
    ph_world_id w = make_world(whole);
    add_body_box(w, PH_BODY_STATIC, ph_v3(0, 0, 0.5), ph_v3(4, 4, 0.5));
    for (int i = 0; i < 8; i++)
        add_body_box(w, PH_BODY_DYNAMIC, ph_v3(-1.65 + 1.1 * (i % 4), 0.3 * (i / 4), 1.6 + 1.3 * (i / 4)),
                     ph_v3(0.5, 0.5, 0.5));
    return w;
}

static void test_static_box(void **state) {
    (void)state;
    const seen s = run_pair(table_world(1), table_world(0), 120, NULL);
    print_message("cubes on a static box: %d events, %d filtered steps\n", s.events, s.filtered);
    assert_true(s.events >= 12); /* (eight on the table, four on the cubes below) */
    assert_true(s.filtered >= 1);
}

/* A shape slot reused: a cube falling beside the table is destroyed at
 * step 10 and a static box created in its shape slot 40 m away, with a
 * new cube dropped onto it. The slot's compact box is the fallen cube's
 * (written by an earlier broadphase), the static box's is in its record
 * only: the filter must tell them apart (else the new cube's pair with it
 * is tested against the old cube's box and dropped). */
static ph_shape_id faller_shape;

static void reuse_slot(ph_world_id w, int k) {
    if (k != 10) return;
    const int n = ph_world_body_count(w);
    assert_int_equal(ph_body_destroy(body_at(w, n - 1)), PH_OK);
    const ph_shape_id s = add_body_box(w, PH_BODY_STATIC, ph_v3(20, 0, 0.5), ph_v3(1, 1, 0.5));
    assert_int_equal(s.index1, faller_shape.index1); /* (the freed slot) */
    add_body_box(w, PH_BODY_DYNAMIC, ph_v3(20, 0, 1.8), ph_v3(0.5, 0.5, 0.5));
}

static ph_world_id faller_world(int whole) {
    ph_world_id w = table_world(whole);
    /* (far from where the new cube lands) */
    faller_shape = add_body_box(w, PH_BODY_DYNAMIC, ph_v3(-20, 0, 1.8), ph_v3(0.5, 0.5, 0.5));
    return w;
}

static void test_slot_reused(void **state) {
    (void)state;
    const ph_world_id a = faller_world(1), b = faller_world(0);
    const seen s = run_pair(a, b, 80, reuse_slot);
    print_message("a shape slot reused by a static box: %d events\n", s.events);
    assert_int_equal(s.events, 25); /* (the table's 24, test_static_box; the new cube landing) */
}

/* One cube resting on the ground plane, lifted 50 m at step 30: the next
 * step has no pair at all, and its end event comes from last step's
 * manifold alone. */
static ph_world_id lone_world(int whole) {
    ph_world_id w = make_world(whole);
    add_body_box(w, PH_BODY_STATIC, ph_v3(0, 0, 0), ph_v3(-1, 0, 0));
    add_body_box(w, PH_BODY_DYNAMIC, ph_v3(0, 0, 0.6), ph_v3(0.5, 0.5, 0.5));
    return w;
}

static void lift(ph_world_id w, int k) {
    if (k == 30) assert_int_equal(ph_body_set_transform(body_at(w, 1), ph_v3(0, 0, 50), ph_quat_identity()), PH_OK);
}

static void test_no_pairs(void **state) {
    (void)state;
    const seen s = run_pair(lone_world(1), lone_world(0), 40, lift);
    print_message("a cube lifted off the ground: %d steps without pairs with events, %d events\n", s.empty_events,
                  s.events);
    assert_int_equal(s.empty_events, 1);
    assert_int_equal(s.events, 2); /* (it lands, then leaves) */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pyramid40_events), cmocka_unit_test(test_grid4000_filter),
        cmocka_unit_test(test_static_box),       cmocka_unit_test(test_slot_reused),
        cmocka_unit_test(test_no_pairs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
