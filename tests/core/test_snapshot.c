/*
 * test_snapshot.c — exact snapshots (ph_snapshot.h, docs/durability.md).
 *
 * Round trip: for every preset (and, on the small ones, under non-default
 * settings: sleeping, collide_substeps, warm starting off, the other
 * methods and orderings, the scalar paths, Gauss–Seidel joints), a world
 * stepped a while is snapshotted and restored; the original and the
 * restored world then get the same random edits (bodies, shapes and joints
 * created and destroyed, poses, velocities, impulses, forces, kinematic
 * targets, masses, settings) and are stepped side by side: every tick
 * their state hashes are equal, the ids the edits create are equal, and
 * the snapshot of the restored world is byte for byte the original's (and
 * right after the restore, its contact query answers as the original's).
 *
 * Robustness: every byte of a small snapshot flipped is refused (the
 * checksum), and flipped again with the checksum recomputed (so the
 * structural checks are what stands) is refused with a snapshot error or,
 * when the flipped value is still a valid world, restored into one that
 * steps; truncation at every length is refused; the header's cases (magic,
 * version, length) give their codes; an allocation failing at every point
 * of snapshot and restore gives PH_ERR_NO_MEMORY and leaks nothing (the
 * sanitizers). The costs of snapshot and restore are printed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ph_test.h"

#include "alloc.h"
#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "physd/ph_snapshot.h"
#include "world.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int is_snapshot_error(int e) {
    return e == PH_ERR_NOT_SNAPSHOT || e == PH_ERR_SNAPSHOT_VERSION || e == PH_ERR_SNAPSHOT_TRUNCATED ||
           e == PH_ERR_SNAPSHOT_CORRUPT || e == PH_ERR_SNAPSHOT_INVALID;
}

/* Test-local generator (xorshift64*). */
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ull;
}
static double urand(double lo, double hi) {
    return lo + (hi - lo) * (double)(rnd() >> 11) * (1.0 / 9007199254740992.0);
}

static uint8_t *snap(ph_world_id w, size_t *len) {
    uint8_t *d = NULL;
    assert_int_equal(ph_world_snapshot(w, &d, len), PH_OK);
    assert_non_null(d);
    return d;
}

static ph_world_id restore(const uint8_t *d, size_t len) {
    ph_world_id r;
    assert_int_equal(ph_world_restore(d, len, NULL, &r), PH_OK);
    assert_true(ph_world_is_valid(r));
    return r;
}

/* The two worlds' snapshots are the same bytes. */
static void assert_same_snapshot(ph_world_id a, ph_world_id b) {
    size_t la, lb;
    uint8_t *da = snap(a, &la), *db = snap(b, &lb);
    assert_int_equal(la, lb);
    if (memcmp(da, db, la) != 0) {
        size_t k = 0;
        while (da[k] == db[k])
            k++;
        fail_msg("snapshots differ first at byte %zu of %zu", k, la);
    }
    ph_snapshot_free(da);
    ph_snapshot_free(db);
}

/* The contact query answers the same in both worlds (all but the world
 * slot of the ids), bit for bit. */
static void assert_same_contacts(ph_world_id a, ph_world_id b) {
    const int n = ph_world_get_contacts(a, NULL, 0);
    assert_true(n >= 0);
    assert_int_equal(ph_world_get_contacts(b, NULL, 0), n);
    if (n == 0) return;
    ph_contact_info *ca = calloc((size_t)n, sizeof *ca), *cb = calloc((size_t)n, sizeof *cb);
    assert_non_null(ca);
    assert_non_null(cb);
    assert_int_equal(ph_world_get_contacts(a, ca, n), n);
    assert_int_equal(ph_world_get_contacts(b, cb, n), n);
    for (int i = 0; i < n; i++) {
        ca[i].body_a.world0 = ca[i].body_b.world0 = ca[i].shape_a.world0 = ca[i].shape_b.world0 = 0;
        cb[i].body_a.world0 = cb[i].body_b.world0 = cb[i].shape_a.world0 = cb[i].shape_b.world0 = 0;
        assert_memory_equal(&ca[i].point, &cb[i].point, sizeof ca[i].point);
        assert_memory_equal(&ca[i].normal, &cb[i].normal, sizeof ca[i].normal);
        assert_memory_equal(&ca[i].depth, &cb[i].depth, sizeof ca[i].depth);
        assert_memory_equal(&ca[i].normal_impulse, &cb[i].normal_impulse, sizeof ca[i].normal_impulse);
        assert_memory_equal(ca[i].tangent_impulse, cb[i].tangent_impulse, sizeof ca[i].tangent_impulse);
        assert_int_equal(ca[i].feature, cb[i].feature);
        assert_int_equal(ph_body_id_to_u64(ca[i].body_a), ph_body_id_to_u64(cb[i].body_a));
        assert_int_equal(ph_body_id_to_u64(ca[i].body_b), ph_body_id_to_u64(cb[i].body_b));
        assert_int_equal(ph_shape_id_to_u64(ca[i].shape_a), ph_shape_id_to_u64(cb[i].shape_a));
    }
    free(ca);
    free(cb);
}

/* ------------------------------------------------------------ the edits */

/* The same body (by slot order) in both worlds. */
static int pick_body(ph_world_id a, ph_world_id b, ph_body_id *ba, ph_body_id *bb, int dynamic_only) {
    static ph_body_id la[4096], lb[4096];
    const int na = ph_world_get_bodies(a, la, 4096), nb = ph_world_get_bodies(b, lb, 4096);
    assert_int_equal(na, nb);
    if (na <= 0) return 0;
    for (int tries = 0; tries < 8; tries++) {
        const int i = (int)(rnd() % (uint64_t)na);
        assert_int_equal(la[i].index1, lb[i].index1);
        assert_int_equal(la[i].gen, lb[i].gen);
        ph_body_state st;
        assert_int_equal(ph_body_get_state(la[i], &st), PH_OK);
        if (dynamic_only && st.type != PH_BODY_DYNAMIC) continue;
        *ba = la[i];
        *bb = lb[i];
        return 1;
    }
    return 0;
}

static void same_body_id(ph_body_id x, ph_body_id y) {
    assert_int_equal(x.index1, y.index1);
    assert_int_equal(x.gen, y.gen);
}

/* One random edit, made to both worlds with the same arguments. */
static void edit(ph_world_id a, ph_world_id b) {
    ph_body_id xa, xb, ya, yb;
    int ea, eb;
    const int kind = (int)(rnd() % 12);
    switch (kind) {
    case 0: { /* a new body with a box, sphere or capsule (kinematic now and then) */
        ph_body_def bd = ph_default_body_def();
        bd.type = rnd() % 6 == 0 ? PH_BODY_KINEMATIC : PH_BODY_DYNAMIC;
        bd.position = ph_v3(urand(-4, 4), urand(-4, 4), urand(2, 8));
        bd.linear_velocity = ph_v3(urand(-1, 1), urand(-1, 1), urand(-1, 1));
        bd.angular_velocity = ph_v3(urand(-1, 1), urand(-1, 1), urand(-1, 1));
        xa = ph_body_create(a, &bd, &ea);
        xb = ph_body_create(b, &bd, &eb);
        assert_int_equal(ea, eb);
        if (ea) return;
        same_body_id(xa, xb);
        ph_shape_def sd = ph_default_shape_def();
        sd.type = (ph_shape_type)(rnd() % 3);
        sd.radius = urand(0.2, 0.6);
        sd.half_extents = ph_v3(urand(0.2, 0.6), urand(0.2, 0.6), urand(0.2, 0.6));
        sd.restitution = rnd() % 4 == 0 ? 0.5 : 0.0;
        ph_shape_id sa = ph_shape_create(xa, &sd, &ea), sb = ph_shape_create(xb, &sd, &eb);
        assert_int_equal(ea, eb);
        assert_int_equal(sa.index1, sb.index1);
        assert_int_equal(sa.gen, sb.gen);
        return;
    }
    case 1:
        if (!pick_body(a, b, &xa, &xb, 1)) return;
        assert_int_equal(ph_body_destroy(xa), ph_body_destroy(xb));
        return;
    case 2: {
        if (!pick_body(a, b, &xa, &xb, 1)) return;
        const ph_vec3 p = ph_v3(urand(-5, 5), urand(-5, 5), urand(1, 6));
        const ph_quat q = ph_quat_normalize((ph_quat){urand(-1, 1), urand(-1, 1), urand(-1, 1), 1.0});
        assert_int_equal(ph_body_set_transform(xa, p, q), ph_body_set_transform(xb, p, q));
        return;
    }
    case 3: {
        if (!pick_body(a, b, &xa, &xb, 1)) return;
        const ph_vec3 v = ph_v3(urand(-3, 3), urand(-3, 3), urand(-3, 3)), av = ph_v3(urand(-2, 2), 0, urand(-2, 2));
        assert_int_equal(ph_body_set_velocity(xa, v, av), ph_body_set_velocity(xb, v, av));
        return;
    }
    case 4: {
        if (!pick_body(a, b, &xa, &xb, 1)) return;
        ph_body_state st;
        ph_body_get_state(xa, &st);
        const ph_vec3 imp = ph_scale(ph_v3(urand(-1, 1), urand(-1, 1), urand(0, 2)), st.mass);
        const ph_vec3 at = ph_add(st.position, ph_v3(urand(-0.2, 0.2), urand(-0.2, 0.2), 0));
        assert_int_equal(ph_body_apply_impulse(xa, imp, at), ph_body_apply_impulse(xb, imp, at));
        return;
    }
    case 5: {
        if (!pick_body(a, b, &xa, &xb, 1)) return;
        ph_body_state st;
        ph_body_get_state(xa, &st);
        const ph_vec3 f = ph_scale(ph_v3(urand(-20, 20), urand(-20, 20), urand(0, 30)), st.mass);
        const ph_vec3 t = ph_v3(urand(-5, 5), urand(-5, 5), urand(-5, 5));
        assert_int_equal(ph_body_apply_force(xa, f, st.position), ph_body_apply_force(xb, f, st.position));
        assert_int_equal(ph_body_apply_torque(xa, t), ph_body_apply_torque(xb, t));
        return;
    }
    case 6: { /* a joint between two bodies, or to the world frame */
        if (!pick_body(a, b, &xa, &xb, 1)) return;
        ph_joint_def ja = ph_default_joint_def(), jb;
        ja.type = (ph_joint_type)(rnd() % 4);
        ja.body_a = xa;
        ja.anchor_a = ph_v3(urand(-0.5, 0.5), urand(-0.5, 0.5), urand(-0.5, 0.5));
        ja.enable_limit = (int)(rnd() % 2);
        ja.enable_motor = (int)(rnd() % 2);
        ja.motor_speed = 1.0;
        ja.max_motor_torque = 10.0;
        ja.collide_connected = (int)(rnd() % 2);
        jb = ja;
        jb.body_a = xb;
        if (rnd() % 3 && pick_body(a, b, &ya, &yb, 0) && ya.index1 != xa.index1) {
            ja.body_b = ya;
            jb.body_b = yb;
        } else {
            ph_body_state st;
            ph_body_get_state(xa, &st);
            ja.anchor_b = jb.anchor_b = ph_add(st.position, ph_v3(0, 0, 1));
        }
        ph_joint_id ka = ph_joint_create(a, &ja, &ea), kb = ph_joint_create(b, &jb, &eb);
        assert_int_equal(ea, eb);
        assert_int_equal(ka.index1, kb.index1);
        assert_int_equal(ka.gen, kb.gen);
        return;
    }
    case 7: {
        ph_joint_id la[256], lb[256];
        const int na = ph_world_get_joints(a, la, 256), nb = ph_world_get_joints(b, lb, 256);
        assert_int_equal(na, nb);
        if (na <= 0) return;
        const int i = (int)(rnd() % (uint64_t)na);
        assert_int_equal(ph_joint_destroy(la[i]), ph_joint_destroy(lb[i]));
        return;
    }
    case 8: { /* a kinematic target, or a wake */
        if (!pick_body(a, b, &xa, &xb, 0)) return;
        ph_body_state st;
        ph_body_get_state(xa, &st);
        if (st.type == PH_BODY_KINEMATIC) {
            const ph_vec3 p = ph_add(st.position, ph_v3(urand(-0.1, 0.1), urand(-0.1, 0.1), 0));
            assert_int_equal(ph_body_set_kinematic_target(xa, p, st.orientation),
                             ph_body_set_kinematic_target(xb, p, st.orientation));
        } else {
            assert_int_equal(ph_body_wake(xa), ph_body_wake(xb));
        }
        return;
    }
    case 9: { /* mass and damping */
        if (!pick_body(a, b, &xa, &xb, 1)) return;
        const double m = urand(0.5, 50);
        const ph_vec3 in = ph_v3(urand(0.1, 5), urand(0.1, 5), urand(0.1, 5));
        assert_int_equal(ph_body_set_mass(xa, m, in), ph_body_set_mass(xb, m, in));
        assert_int_equal(ph_body_set_damping(xa, 0.1, 0.2), ph_body_set_damping(xb, 0.1, 0.2));
        return;
    }
    case 10: { /* a shape added to a body (a compound), or one removed */
        if (!pick_body(a, b, &xa, &xb, 1)) return;
        ph_shape_id sa[64], sb[64];
        const int na = ph_body_get_shapes(xa, sa, 64), nb = ph_body_get_shapes(xb, sb, 64);
        assert_int_equal(na, nb);
        if (na > 1 && rnd() % 2) {
            const int i = (int)(rnd() % (uint64_t)na);
            assert_int_equal(ph_shape_destroy(sa[i]), ph_shape_destroy(sb[i]));
            return;
        }
        ph_shape_def sd = ph_default_shape_def();
        sd.radius = 0.3;
        sd.local.p = ph_v3(urand(-0.4, 0.4), urand(-0.4, 0.4), 0.5);
        ph_shape_id s1 = ph_shape_create(xa, &sd, &ea), s2 = ph_shape_create(xb, &sd, &eb);
        assert_int_equal(ea, eb);
        assert_int_equal(s1.index1, s2.index1);
        return;
    }
    default: { /* a settings change */
        ph_settings s;
        assert_int_equal(ph_world_get_settings(a, &s), PH_OK);
        s.warm_start_factor = urand(0.5, 1.0);
        s.iterations = 1 + (int)(rnd() % 2);
        assert_int_equal(ph_world_set_settings(a, &s), ph_world_set_settings(b, &s));
        return;
    }
    }
}

/* ------------------------------------------------------------ round trip */

typedef struct variant {
    const char *name;
    void (*apply)(ph_settings *s);
} variant;

static void v_default(ph_settings *s) { (void)s; }
static void v_sleep(ph_settings *s) { s->sleep = 1; }
static void v_substeps(ph_settings *s) { s->collide_substeps = 1; }
static void v_nowarm(ph_settings *s) { s->warm_start = 0; }
static void v_pgssm(ph_settings *s) {
    s->method = PH_METHOD_PGS_SM;
    s->k_pgs = 3;
    s->k_sm = 2;
}
static void v_block(ph_settings *s) { s->method = PH_METHOD_BLOCK_PGS; }
static void v_jacobi(ph_settings *s) { s->method = PH_METHOD_JACOBI; }
static void v_random(ph_settings *s) {
    s->ordering = PH_ORDER_RANDOM;
    s->ordering_per_iteration = 1;
    s->seed = 77;
}
static void v_scalar(ph_settings *s) {
    s->vector_solver = 0;
    s->contact_block = 0;
    s->joint_solver = PH_JOINT_SOLVER_GS;
    s->record_merits = 0;
}
static void v_nocache(ph_settings *s) {
    s->contact_cache_tolerance = 0;
    s->sleep = 1;
    s->collide_substeps = 1;
}

static const variant variants[] = {
    {"default", v_default},      {"sleep", v_sleep},         {"collide_substeps", v_substeps},
    {"no_warm_start", v_nowarm}, {"pgs_sm", v_pgssm},        {"block_pgs", v_block},
    {"jacobi", v_jacobi},        {"random_order", v_random}, {"scalar", v_scalar},
    {"no_cache", v_nocache},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

/* warm steps, then snapshot, restore, and ticks steps side by side with
 * edits (each tick with probability 1/edit_every); the snapshots compared
 * every compare_every ticks. */
static void round_trip(const char *scene, const variant *v, int warm, int ticks, int edit_every, int compare_every) {
    ph_world_def d = ph_default_world_def();
    v->apply(&d.settings);
    int err;
    ph_world_id a = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    assert_int_equal(ph_scene_build(a, scene), PH_OK);
    for (int i = 0; i < warm; i++) {
        const int e = ph_world_step(a);
        assert_true(e == PH_OK || e == PH_ERR_NONFINITE);
    }
    size_t len;
    uint8_t *data = snap(a, &len);
    ph_world_id b = restore(data, len);
    ph_snapshot_free(data);
    assert_int_equal(ph_world_state_hash(a), ph_world_state_hash(b));
    assert_int_equal(ph_world_get_step_count(a), ph_world_get_step_count(b));
    assert_same_snapshot(a, b);
    assert_same_contacts(a, b);
    for (int t = 0; t < ticks; t++) {
        if (edit_every > 0 && rnd() % (uint64_t)edit_every == 0) {
            edit(a, b);
            if (rnd() % 2) edit(a, b);
        }
        const int ea = ph_world_step(a), eb = ph_world_step(b);
        assert_int_equal(ea, eb);
        if (ph_world_state_hash(a) != ph_world_state_hash(b))
            fail_msg("%s/%s: state hashes differ at tick %d after the restore", scene, v->name, t + 1);
        if (compare_every > 0 && (t + 1) % compare_every == 0) assert_same_snapshot(a, b);
    }
    assert_same_snapshot(a, b);
    assert_int_equal(ph_world_destroy(a), PH_OK);
    assert_int_equal(ph_world_destroy(b), PH_OK);
}

/* The grids of 1000 bodies and the pyramids taller than pyramid20 run
 * fewer steps. */
static int big_scene(const char *name) {
    return strstr(name, "1000") != NULL || (strncmp(name, "pyramid", 7) == 0 && ph_scene_find(name)->bodies > 210);
}
/* The grids past 1000 bodies (grid4000 and larger) are grid1000's recipe:
 * left to the benchmarks. */
static int huge_scene(const char *name) { return ph_scene_find(name)->bodies > 1000; }

/* Every preset with the default settings, with and without edits. */
static void test_round_trip_presets(void **state) {
    (void)state;
    for (int i = 0; i < ph_scene_count(); i++) {
        const char *name = ph_scene_at(i)->name;
        if (huge_scene(name)) continue;
        const int big = big_scene(name);
        round_trip(name, &variants[0], big ? 20 : 45, big ? 15 : 40, 0, big ? 5 : 1);
        round_trip(name, &variants[0], big ? 10 : 30, big ? 15 : 60, 3, big ? 5 : 1);
        round_trip(name, &variants[1], big ? 60 : 45, big ? 15 : 40, big ? 0 : 4, big ? 5 : 1);
    }
}

/* The small presets under every variant of the settings, with edits. */
static void test_round_trip_settings(void **state) {
    (void)state;
    for (int i = 0; i < ph_scene_count(); i++) {
        const char *name = ph_scene_at(i)->name;
        if (big_scene(name) || huge_scene(name)) continue;
        for (int k = 1; k < N_VARIANTS; k++)
            round_trip(name, &variants[k], 25, 30, 3, 1);
    }
}

/* A world snapshotted right after creation, after edits without a step,
 * and with retired and freed slots: the ids handed out afterwards are the
 * same. */
static void test_round_trip_edges(void **state) {
    (void)state;
    ph_world_id a = ph_world_create(NULL, NULL);
    size_t len;
    uint8_t *data = snap(a, &len);
    ph_world_id b = restore(data, len);
    ph_snapshot_free(data);
    assert_same_snapshot(a, b);
    ph_test_ground(a, ph_v3(0, 0, 1), 0.5);
    ph_test_ground(b, ph_v3(0, 0, 1), 0.5);
    /* Free-list state: bodies created and destroyed in some order. */
    ph_body_id ids[10];
    for (int i = 0; i < 10; i++)
        ids[i] = ph_test_box(a, PH_BODY_DYNAMIC, ph_v3(i * 1.5, 0, 0.5), ph_quat_identity(), 0.5);
    for (int i = 0; i < 10; i += 3)
        assert_int_equal(ph_body_destroy(ids[i]), PH_OK);
    ph_world_destroy(b);
    data = snap(a, &len);
    b = restore(data, len);
    ph_snapshot_free(data);
    assert_same_snapshot(a, b);
    for (int i = 0; i < 6; i++) {
        ph_body_id x = ph_test_box(a, PH_BODY_DYNAMIC, ph_v3(0, i * 1.5, 3), ph_quat_identity(), 0.5);
        ph_body_id y = ph_test_box(b, PH_BODY_DYNAMIC, ph_v3(0, i * 1.5, 3), ph_quat_identity(), 0.5);
        same_body_id(x, y);
    }
    for (int t = 0; t < 60; t++) {
        assert_int_equal(ph_world_step(a), PH_OK);
        assert_int_equal(ph_world_step(b), PH_OK);
        assert_int_equal(ph_world_state_hash(a), ph_world_state_hash(b));
    }
    assert_same_snapshot(a, b);
    /* Limits: the snapshot's, or others that its bodies must fit. */
    data = snap(a, &len);
    ph_snapshot_limits lim = {5, 0};
    ph_world_id c;
    assert_int_equal(ph_world_restore(data, len, &lim, &c), PH_ERR_LIMIT);
    assert_int_equal(c.index1, 0);
    lim.max_bodies = 0;
    assert_int_equal(ph_world_restore(data, len, &lim, &c), PH_ERR_INVALID_ARGUMENT);
    lim.max_bodies = 13;
    assert_int_equal(ph_world_restore(data, len, &lim, &c), PH_OK);
    int err;
    ph_body_def bd = ph_default_body_def();
    ph_body_create(c, &bd, &err);
    assert_int_equal(err, PH_ERR_LIMIT); /* (the ground and 12 boxes) */
    ph_world_destroy(c);
    /* The header read alone. */
    ph_snapshot_info info;
    assert_int_equal(ph_snapshot_info_get(data, len, &info), PH_OK);
    assert_int_equal(info.version, PH_SNAPSHOT_VERSION);
    assert_int_equal(info.bytes, len);
    assert_int_equal(info.step, 60);
    assert_int_equal(info.bodies, 13);
    ph_snapshot_free(data);
    /* Bad arguments. */
    uint8_t *none = (uint8_t *)1;
    size_t nlen = 7;
    assert_int_equal(ph_world_snapshot((ph_world_id){0, 0}, &none, &nlen), PH_ERR_INVALID_HANDLE);
    assert_null(none);
    assert_int_equal(nlen, 0);
    assert_int_equal(ph_world_snapshot(a, NULL, &nlen), PH_ERR_INVALID_ARGUMENT);
    assert_int_equal(ph_world_restore(NULL, 0, NULL, &c), PH_ERR_INVALID_ARGUMENT);
    ph_snapshot_free(NULL);
    ph_world_destroy(a);
    ph_world_destroy(b);
}

/* ------------------------------------------------------------ robustness */

/* A small world with a bit of everything: a plane, a stack of boxes, a
 * sphere with restitution, a capsule, a hinge with a limit and a motor, a
 * destroyed body (a free slot), after some steps with sleeping on. */
static ph_world_id small_world(void) {
    ph_world_def d = ph_default_world_def();
    d.settings.sleep = 1;
    ph_world_id w = ph_world_create(&d, NULL);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    ph_body_id b0 = ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(0, 0, 0.5), ph_quat_identity(), 0.5);
    ph_body_id b1 = ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(0, 0, 1.5), ph_quat_identity(), 0.5);
    ph_body_id gone = ph_test_box(w, PH_BODY_DYNAMIC, ph_v3(3, 0, 0.5), ph_quat_identity(), 0.5);
    ph_body_def bd = ph_default_body_def();
    bd.position = ph_v3(2, 0, 2);
    int err;
    ph_body_id s = ph_body_create(w, &bd, &err);
    ph_shape_def sd = ph_default_shape_def();
    sd.restitution = 0.5;
    ph_shape_create(s, &sd, &err);
    bd.position = ph_v3(-2, 0, 1);
    ph_body_id c = ph_body_create(w, &bd, &err);
    sd.type = PH_SHAPE_CAPSULE;
    sd.radius = 0.3;
    ph_shape_create(c, &sd, &err);
    ph_joint_def jd = ph_default_joint_def();
    jd.type = PH_JOINT_HINGE;
    jd.body_a = c;
    jd.body_b = b1;
    jd.anchor_a = ph_v3(1, 0, 0);
    jd.anchor_b = ph_v3(-1, 0, 0);
    jd.enable_limit = 1;
    jd.enable_motor = 1;
    jd.max_motor_torque = 5;
    jd.motor_speed = 0.5;
    ph_joint_create(w, &jd, &err);
    assert_int_equal(err, PH_OK);
    (void)b0;
    for (int i = 0; i < 20; i++)
        ph_world_step(w);
    assert_int_equal(ph_body_destroy(gone), PH_OK);
    for (int i = 0; i < 5; i++)
        ph_world_step(w);
    return w;
}

static void put_u64_le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Recomputes the trailer's checksum of a (changed) snapshot. */
static void reseal(uint8_t *d, size_t len) {
    if (len >= 8) put_u64_le(d + len - 8, ph__xxh64(d, len - 8));
}

/* Restores a suspect snapshot: an error of the snapshot family, or a
 * world that steps (steps times; then destroyed). Returns the code. */
static int try_restore(const uint8_t *d, size_t len, int steps) {
    ph_world_id r;
    const int e = ph_world_restore(d, len, NULL, &r);
    if (e != PH_OK) {
        if (!is_snapshot_error(e)) fail_msg("restore gave %s (%d)", ph_err_name(e), e);
        assert_int_equal(r.index1, 0);
        return e;
    }
    for (int i = 0; i < steps; i++)
        ph_world_step(r);
    uint8_t *again;
    size_t alen;
    assert_int_equal(ph_world_snapshot(r, &again, &alen), PH_OK);
    ph_snapshot_free(again);
    assert_int_equal(ph_world_destroy(r), PH_OK);
    return e;
}

static void flip_all(const uint8_t *data, size_t len, size_t stride, const char *what) {
    uint8_t *d = malloc(len);
    assert_non_null(d);
    int counts[2][16] = {{0}};
    for (size_t i = 0; i < len; i += stride) {
        for (int pass = 0; pass < 2; pass++) {
            memcpy(d, data, len);
            d[i] ^= (uint8_t)(pass ? 0x01 : 0xff);
            /* Refused: by the header's checks, and past the header by the
             * checksum. */
            ph_world_id r;
            const int e = ph_world_restore(d, len, NULL, &r);
            if (!is_snapshot_error(e)) fail_msg("%s: byte %zu flipped restored with %s", what, i, ph_err_name(e));
            if (i >= 64 && i < len - 8) assert_int_equal(e, PH_ERR_SNAPSHOT_CORRUPT);
            /* The same flip with the checksum recomputed: the structure's
             * own checks. */
            reseal(d, len);
            const int e2 = try_restore(d, len, len < 100000 ? 3 : 1);
            counts[pass][-e2]++;
        }
    }
    print_message("%s (%zu bytes, every %zu): checksum recomputed, 0xff flips: %d restored, %d invalid, %d other "
                  "refusals; 0x01 flips: %d restored, %d invalid, %d other\n",
                  what, len, stride, counts[0][0], counts[0][12],
                  counts[0][8] + counts[0][9] + counts[0][10] + counts[0][11], counts[1][0], counts[1][12],
                  counts[1][8] + counts[1][9] + counts[1][10] + counts[1][11]);
    free(d);
}

static void test_corrupt_bytes(void **state) {
    (void)state;
    ph_world_id w = small_world();
    size_t len;
    uint8_t *data = snap(w, &len);
    flip_all(data, len, 1, "small world");
    ph_snapshot_free(data);
    ph_world_destroy(w);
    /* A sample of a larger one. */
    w = ph_world_create(NULL, NULL);
    assert_int_equal(ph_scene_build(w, "pyramid20"), PH_OK);
    for (int i = 0; i < 30; i++)
        ph_world_step(w);
    data = snap(w, &len);
    flip_all(data, len, 1009, "pyramid20");
    ph_snapshot_free(data);
    ph_world_destroy(w);
}

static void test_truncated_and_header(void **state) {
    (void)state;
    ph_world_id w = small_world();
    size_t len;
    uint8_t *data = snap(w, &len);
    uint8_t *d = malloc(len + 1);
    assert_non_null(d);
    ph_world_id r;
    int resealed_ok = 0;
    for (size_t n = 0; n < len; n++) {
        assert_int_equal(ph_world_restore(data, n, NULL, &r), PH_ERR_SNAPSHOT_TRUNCATED);
        /* The same length written into the header and the checksum
         * recomputed: the sections must not fit. */
        if (n >= 72) {
            memcpy(d, data, n);
            put_u64_le(d + 24, n);
            reseal(d, n);
            resealed_ok += try_restore(d, n, 1) == PH_OK;
        }
    }
    assert_int_equal(resealed_ok, 0);
    /* Header cases. */
    memcpy(d, data, len);
    d[0] = 'X';
    assert_int_equal(ph_world_restore(d, len, NULL, &r), PH_ERR_NOT_SNAPSHOT);
    memcpy(d, data, len);
    d[6] = 2; /* version 2 */
    assert_int_equal(ph_world_restore(d, len, NULL, &r), PH_ERR_SNAPSHOT_VERSION);
    memcpy(d, data, len);
    d[8] = 1; /* byte order mark */
    assert_int_equal(ph_world_restore(d, len, NULL, &r), PH_ERR_SNAPSHOT_VERSION);
    memcpy(d, data, len);
    d[len] = 0; /* a trailing byte */
    assert_int_equal(ph_world_restore(d, len + 1, NULL, &r), PH_ERR_SNAPSHOT_INVALID);
    memcpy(d, data, len);
    d[len - 1] ^= 0x80; /* the checksum itself */
    assert_int_equal(ph_world_restore(d, len, NULL, &r), PH_ERR_SNAPSHOT_CORRUPT);
    assert_string_equal(ph_strerror(PH_ERR_SNAPSHOT_CORRUPT), "snapshot is corrupt (checksum mismatch)");
    assert_string_equal(ph_err_name(PH_ERR_SNAPSHOT_INVALID), "PH_ERR_SNAPSHOT_INVALID");
    free(d);
    ph_snapshot_free(data);
    ph_world_destroy(w);
}

/* The checksum is XXH64: its published values. */
static void test_checksum(void **state) {
    (void)state;
    assert_true(ph__xxh64("", 0) == 0xef46db3751d8e999ull);
    assert_true(ph__xxh64("abc", 3) == 0x44bc2cf5ad770999ull);
    const char *s = "Nobody inspects the spammish repetition";
    assert_true(ph__xxh64(s, strlen(s)) == 0xfbcea83c8a378bf1ull);
}

/* Every allocation of snapshot and restore failing in turn. */
static void test_alloc_fail(void **state) {
    (void)state;
    ph_world_id w = small_world();
    size_t len;
    uint8_t *data = snap(w, &len);
    int failed = 0;
    for (int64_t k = 1;; k++) {
        uint8_t *d = (uint8_t *)1;
        size_t n = 1;
        ph__alloc_fail_at(k);
        const int e = ph_world_snapshot(w, &d, &n);
        const int64_t made = ph__alloc_count();
        ph__alloc_fail_at(0);
        if (made < k) {
            assert_int_equal(e, PH_OK);
            ph_snapshot_free(d);
            break;
        }
        assert_int_equal(e, PH_ERR_NO_MEMORY);
        assert_null(d);
        failed++;
    }
    assert_true(failed >= 1);
    failed = 0;
    for (int64_t k = 1;; k++) {
        ph_world_id r;
        ph__alloc_fail_at(k);
        const int e = ph_world_restore(data, len, NULL, &r);
        const int64_t made = ph__alloc_count();
        ph__alloc_fail_at(0);
        if (made < k) {
            assert_int_equal(e, PH_OK);
            assert_same_snapshot(w, r);
            ph_world_destroy(r);
            break;
        }
        assert_int_equal(e, PH_ERR_NO_MEMORY);
        assert_int_equal(r.index1, 0);
        failed++;
    }
    assert_true(failed >= 4);
    ph_snapshot_free(data);
    ph_world_destroy(w);
}

/* ------------------------------------------------------------ costs */

static void test_costs(void **state) {
    (void)state;
    const char *scenes[] = {"stack20", "pyramid20", "grid1000", "spheres1000"};
    for (int i = 0; i < 4; i++) {
        ph_world_def d = ph_default_world_def();
        d.settings.sleep = 1;
        ph_world_id w = ph_world_create(&d, NULL);
        assert_int_equal(ph_scene_build(w, scenes[i]), PH_OK);
        for (int t = 0; t < 30; t++)
            ph_world_step(w);
        const int reps = 20;
        size_t len = 0;
        double t0 = now_ms();
        for (int k = 0; k < reps; k++) {
            uint8_t *data = snap(w, &len);
            ph_snapshot_free(data);
        }
        const double snap_ms = (now_ms() - t0) / reps;
        uint8_t *data = snap(w, &len);
        t0 = now_ms();
        for (int k = 0; k < reps; k++)
            ph_world_destroy(restore(data, len));
        const double restore_ms = (now_ms() - t0) / reps;
        t0 = now_ms();
        for (int k = 0; k < reps; k++)
            ph_world_step(w);
        const double step_ms = (now_ms() - t0) / reps;
        ph_step_stats st;
        ph_world_get_stats(w, &st);
        print_message("%-12s %6d bodies %6d manifolds: snapshot %9zu bytes %8.3f ms, restore %8.3f ms (a step: %.3f "
                      "ms)\n",
                      scenes[i], ph_world_body_count(w), st.manifolds, len, snap_ms, restore_ms, step_ms);
        ph_snapshot_free(data);
        ph_world_destroy(w);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checksum),           cmocka_unit_test(test_round_trip_edges),
        cmocka_unit_test(test_round_trip_presets), cmocka_unit_test(test_round_trip_settings),
        cmocka_unit_test(test_corrupt_bytes),      cmocka_unit_test(test_truncated_and_header),
        cmocka_unit_test(test_alloc_fail),         cmocka_unit_test(test_costs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
