/*
 * test_tiles.c — the tiles of a native step (solver_wide.c's make_tiles,
 * step.c's tiled_substeps): the substeps between the first and the last
 * run tile by tile, all of them for one tile before the next. Checked:
 *
 * - the layout: the tiles partition the solver bodies, their batches are
 *   consecutive and cover all of them, and every lane of a tile's batches
 *   touches only that tile's bodies (or the ground), so no stage of those
 *   substeps couples two tiles;
 * - the physics: a column of boxes stepped inside a world of 64 columns
 *   (several tiles: the first substep's passes after the batches' layout
 *   and the substeps up to the last tile by tile) ends bit for bit where
 *   the same column stepped alone ends (one tile: the substeps over all
 *   batches), with boxes of unequal extents, turned and spinning (groups
 *   whose velocity updates use full inverse inertias);
 * - per-iteration merits (record_merits, the server's default) keep the
 *   tiles: the 64 columns with and without them step tile by tile alike,
 *   end in the same state bit for bit, and the last substep's recorded
 *   merit is the final merit the world without them reports.
 * - the last substep in the tiles (without record_merits: its merits the
 *   lazy final ones): the manifolds moved per tile, the events pushed
 *   after the tiles in manifold order. Against the same world with
 *   record_merits (whose last substep runs over the whole world): the
 *   same contact events at every step (count, order, bodies, shapes,
 *   points and speeds bit for bit), the same deepest penetration,
 *   contact counts, rows and row updates, and the same final merits.
 *
 * Normal path: build, step, compare. Failure modes: none beyond the
 * assertions. Invariants: the worlds use the default settings (native
 * point mode, 10 substeps of 1 sweep, the contacts' relaxation) without
 * per-iteration merits, as the benchmark.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ph_test.h"

#include <stdlib.h>
#include <string.h>

#include "physd/ph_core.h"
#include "physd/ph_snapshot.h"
#include "world.h"

enum { SIDE = 8, LAYERS = 6, STEPS = 60 };

static ph_world_id new_world_merits(int record_merits) {
    ph_world_def d = ph_default_world_def();
    d.settings.record_merits = record_merits;
    int err = -99;
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    ph_test_ground(w, ph_v3(0, 0, 1), 0.5);
    return w;
}

static ph_world_id new_world(void) { return new_world_merits(0); }

/* Column (i, j): LAYERS boxes of half extents 0.5 x 0.4 x 0.3, each
 * turned about z by an angle of its own and spinning a little about a
 * tilted axis, 0.02 m apart. */
static void add_column(ph_world_id w, int i, int j, ph_body_id *out) {
    for (int k = 0; k < LAYERS; k++) {
        ph_body_def bd = ph_default_body_def();
        bd.position = ph_v3(1.5 * i, 1.5 * j, 0.32 + 0.62 * k);
        bd.orientation = ph_quat_axis_angle(ph_v3(0, 0, 1), 0.05 * (i + 2 * j + 3 * k));
        bd.angular_velocity = ph_v3(0.01 * k, -0.02 * i, 0.3 + 0.01 * j);
        int err;
        out[k] = ph_body_create(w, &bd, &err);
        assert_int_equal(err, PH_OK);
        ph_shape_def sd = ph_default_shape_def();
        sd.type = PH_SHAPE_BOX;
        sd.half_extents = ph_v3(0.5, 0.4, 0.3);
        ph_shape_create(out[k], &sd, &err);
        assert_int_equal(err, PH_OK);
    }
}

static ph__world *record(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    assert_non_null(w);
    return w;
}

/* SIDE x SIDE columns after three steps (the tiles made). */
static ph_world_id columns_world(void) {
    ph_world_id id = new_world();
    ph_body_id col[LAYERS];
    for (int j = 0; j < SIDE; j++)
        for (int i = 0; i < SIDE; i++)
            add_column(id, i, j, col);
    for (int s = 0; s < 3; s++)
        assert_int_equal(ph_world_step(id), PH_OK);
    return id;
}

/* The records the solver's passes stream are laid out on cache lines
 * (docs/profile.md, "Issue #21, target 6"): the core's arrays and the body
 * pool 64-byte aligned, a solver body's v, w, inv_mass and inv_i[0][0] and
 * a body's p, q and v.x each within one line, also after the arrays grew
 * (the first step reserves them; 300 bodies grow the pool from 16 five
 * times) and after a snapshot's restore (its own allocation of the pools). */
static void check_lines(const ph__world *w) {
    assert_int_equal((uintptr_t)w->bodies % 64, 0);
    assert_int_equal((uintptr_t)w->sbodies % 64, 0);
    assert_int_equal((uintptr_t)w->vws % 64, 0);
    assert_int_equal((uintptr_t)w->wpts % 64, 0);
    assert_int_equal((uintptr_t)w->wptb % 64, 0);
    assert_int_equal(sizeof(ph__wpoint) % 64, 0); /* (whole lines: the merits' B apart, r21-flat8) */
    assert_int_equal(sizeof(ph__sbody) % 64, 0);
    assert_int_equal(sizeof(ph__body) % 64, 0);
    assert_int_equal(offsetof(ph__body, p) % 64, 0);
    assert_true(offsetof(ph__body, v) + sizeof(double) <= 64);
    assert_true(offsetof(ph__sbody, inv_i) + sizeof(double) <= 64);
    assert_int_equal((uintptr_t)&w->sbodies[w->sbody_count - 1].v % 64, 0);
}

static void test_tiles_cache_lines(void **state) {
    (void)state;
    ph_world_id id = columns_world();
    check_lines(record(id));
    uint8_t *buf = NULL;
    size_t n = 0;
    assert_int_equal(ph_world_snapshot(id, &buf, &n), PH_OK);
    ph_world_id r;
    assert_int_equal(ph_world_restore(buf, n, NULL, &r), PH_OK);
    assert_int_equal(ph_world_step(r), PH_OK);
    check_lines(record(r));
    ph_snapshot_free(buf);
    ph_world_destroy(r);
    ph_world_destroy(id);
}

/* The tiles partition the solver bodies, cover the batches in order, and
 * a tile's lanes touch its own bodies or the ground only. */
static void test_tiles_layout(void **state) {
    (void)state;
    ph_world_id id = columns_world();
    const ph__world *w = record(id);
    assert_true(w->wpoint_mode);
    assert_true(w->tile_count >= 2); /* 64 x 6 x 4 points, about 1024 a tile */
    const int32_t nsb = w->sbody_count;
    assert_int_equal(nsb, 1 + SIDE * SIDE * LAYERS);
    int *seen = calloc((size_t)nsb, sizeof *seen);
    assert_non_null(seen);
    assert_int_equal(w->tile_sbody[0], 0);
    assert_int_equal(w->tile_batch[0], 0);
    assert_int_equal(w->tile_batch[w->tile_count], w->wbatch_count);
    for (int32_t t = 0; t < w->tile_count; t++) {
        assert_true(w->tile_batch[t] <= w->tile_batch[t + 1]);
        for (int32_t q = w->tile_sbody[t]; q < w->tile_sbody[t + 1]; q++) {
            const int32_t s = w->tile_sb[q];
            assert_true(s >= 1 && s < nsb);
            assert_int_equal(seen[s], 0);
            seen[s] = t + 1;
            if (q > w->tile_sbody[t]) assert_true(s > w->tile_sb[q - 1]);
        }
    }
    assert_int_equal(w->tile_sbody[w->tile_count], nsb - 1);
    int32_t groups = 0;
    for (int32_t t = 0; t < w->tile_count; t++) {
        assert_int_equal(w->tile_group[t], groups);
        for (int32_t b = w->tile_batch[t]; b < w->tile_batch[t + 1]; b++) {
            const ph__wbatch *wb = &w->wbatches[b];
            groups += wb->glen > 0;
            for (int j = 0; j < PH_LANES; j++) {
                assert_true(wb->ia[j] == 0 || seen[wb->ia[j]] == t + 1);
                assert_true(wb->ib[j] == 0 || seen[wb->ib[j]] == t + 1);
            }
        }
    }
    free(seen);
    ph_world_destroy(id);
}

/* Bit for bit: a column among 64 (tiled substeps) and the same column
 * alone (one tile, the substeps over all batches). */
static void test_tiles_same_physics(void **state) {
    (void)state;
    ph_world_id all = new_world();
    ph_body_id cols[SIDE * SIDE][LAYERS];
    for (int j = 0; j < SIDE; j++)
        for (int i = 0; i < SIDE; i++)
            add_column(all, i, j, cols[j * SIDE + i]);
    for (int s = 0; s < STEPS; s++)
        assert_int_equal(ph_world_step(all), PH_OK);
    assert_true(record(all)->tile_count >= 2);
    /* (Tile by tile once the columns touch: from the first steps.) */
    assert_true(record(all)->tiled_steps >= STEPS - 5);
    const int pick[][2] = {{0, 0}, {3, 4}, {7, 7}, {7, 0}};
    for (size_t c = 0; c < sizeof pick / sizeof pick[0]; c++) {
        const int i = pick[c][0], j = pick[c][1];
        ph_world_id one = new_world();
        ph_body_id col[LAYERS];
        add_column(one, i, j, col);
        for (int s = 0; s < STEPS; s++)
            assert_int_equal(ph_world_step(one), PH_OK);
        assert_int_equal(record(one)->tile_count, 1);
        assert_int_equal(record(one)->tiled_steps, 0);
        for (int k = 0; k < LAYERS; k++) {
            ph_body_state a, b;
            assert_int_equal(ph_body_get_state(cols[j * SIDE + i][k], &a), PH_OK);
            assert_int_equal(ph_body_get_state(col[k], &b), PH_OK);
            assert_memory_equal(&a.position, &b.position, sizeof a.position);
            assert_memory_equal(&a.orientation, &b.orientation, sizeof a.orientation);
            assert_memory_equal(&a.linear_velocity, &b.linear_velocity, sizeof a.linear_velocity);
            assert_memory_equal(&a.angular_velocity, &b.angular_velocity, sizeof a.angular_velocity);
        }
        /* The column has settled onto the ground and turned (the test
         * compares motion, not rest). */
        ph_transform t;
        assert_int_equal(ph_body_get_transform(col[0], &t), PH_OK);
        assert_true(t.p.z > 0.25 && t.p.z < 0.32);
        ph_world_destroy(one);
    }
    ph_world_destroy(all);
}

/* Per-iteration merits on (the server's default) and off: both worlds
 * step tile by tile, end bit for bit in the same state, and the merit
 * recorded after the last substep's sweep is the final merit measured
 * without records, at every step read. */
static void test_tiles_with_merits(void **state) {
    (void)state;
    ph_world_id rec = new_world_merits(1), lazy = new_world_merits(0);
    ph_body_id a[SIDE * SIDE][LAYERS], b[SIDE * SIDE][LAYERS];
    for (int j = 0; j < SIDE; j++)
        for (int i = 0; i < SIDE; i++) {
            add_column(rec, i, j, a[j * SIDE + i]);
            add_column(lazy, i, j, b[j * SIDE + i]);
        }
    int measured = 0; /* steps with a positive merit */
    for (int s = 0; s < STEPS; s++) {
        assert_int_equal(ph_world_step(rec), PH_OK);
        assert_int_equal(ph_world_step(lazy), PH_OK);
        ph_step_stats sr, sl;
        assert_int_equal(ph_world_get_stats(rec, &sr), PH_OK);
        assert_int_equal(ph_world_get_stats(lazy, &sl), PH_OK);
        assert_int_equal(sr.merit_count, sr.iterations);
        assert_int_equal(sl.merit_count, 0);
        if (sr.rows == 0) continue; /* (falling: nothing to measure) */
        measured += sr.fischer[sr.merit_count - 1] > 0;
        assert_true(sr.fischer[sr.merit_count - 1] == sl.fischer_final);
        assert_true(sr.fischer_final == sl.fischer_final);
        assert_true(sr.minmap_final == sl.minmap_final);
        assert_true(sr.rel_residual == sl.rel_residual);
    }
    assert_true(measured >= STEPS / 2);
    assert_true(record(rec)->tiled_steps >= STEPS - 5);
    assert_true(record(rec)->tiled_steps == record(lazy)->tiled_steps);
    assert_true(ph_world_state_hash(rec) == ph_world_state_hash(lazy));
    for (int c = 0; c < SIDE * SIDE; c++)
        for (int k = 0; k < LAYERS; k++) {
            ph_body_state x, y;
            assert_int_equal(ph_body_get_state(a[c][k], &x), PH_OK);
            assert_int_equal(ph_body_get_state(b[c][k], &y), PH_OK);
            assert_memory_equal(&x.position, &y.position, sizeof x.position);
            assert_memory_equal(&x.orientation, &y.orientation, sizeof x.orientation);
            assert_memory_equal(&x.linear_velocity, &y.linear_velocity, sizeof x.linear_velocity);
            assert_memory_equal(&x.angular_velocity, &y.angular_velocity, sizeof x.angular_velocity);
        }
    ph_world_destroy(rec);
    ph_world_destroy(lazy);
}

/* The merits' B (ph__wpointb) made by the merits from vws and the records
 * after the last substep (the default) against written into w->wptb by its
 * refresh (test switch wb_eager): both worlds over the whole world
 * (record_merits, merits after every sweep), the same per-sweep and final
 * merits and state, bit for bit; rel_residual, the one merit B enters,
 * positive once the columns press. */
static void test_tiles_merits_b(void **state) {
    (void)state;
    ph_world_id lazy = new_world_merits(1), eager = new_world_merits(1);
    ph__world_get(eager)->wb_eager = 1;
    ph_body_id a[LAYERS];
    for (int j = 0; j < SIDE; j++)
        for (int i = 0; i < SIDE; i++) {
            add_column(lazy, i, j, a);
            add_column(eager, i, j, a);
        }
    int pressed = 0;
    for (int s = 0; s < STEPS; s++) {
        assert_int_equal(ph_world_step(lazy), PH_OK);
        assert_int_equal(ph_world_step(eager), PH_OK);
        ph_step_stats sl, se;
        assert_int_equal(ph_world_get_stats(lazy, &sl), PH_OK);
        assert_int_equal(ph_world_get_stats(eager, &se), PH_OK);
        assert_int_equal(sl.merit_count, se.merit_count);
        for (int k = 0; k < sl.merit_count; k++)
            assert_true(sl.fischer[k] == se.fischer[k]);
        assert_true(sl.fischer_final == se.fischer_final);
        assert_true(sl.rel_residual == se.rel_residual);
        pressed += sl.rel_residual > 0;
    }
    assert_true(pressed >= STEPS / 2);
    assert_int_equal(record(lazy)->wb_made, 2);
    assert_int_equal(record(eager)->wb_made, 1);
    assert_true(ph_world_state_hash(lazy) == ph_world_state_hash(eager));
    ph_world_destroy(lazy);
    ph_world_destroy(eager);
}

/* The last substep tile by tile (no record_merits) against over the
 * whole world (record_merits): the same events and statistics, step by
 * step, and the same end state. */
static void test_tiles_last_substep(void **state) {
    (void)state;
    ph_world_id whole = new_world_merits(1), tiled = new_world_merits(0);
    ph_body_id a[LAYERS];
    for (int j = 0; j < SIDE; j++)
        for (int i = 0; i < SIDE; i++) {
            add_column(whole, i, j, a);
            add_column(tiled, i, j, a);
        }
    enum { CAP = 4096 };
    ph_contact_event *ew = calloc(CAP, sizeof *ew), *et = calloc(CAP, sizeof *et);
    assert_non_null(ew);
    assert_non_null(et);
    int events = 0, deep = 0;
    for (int s = 0; s < STEPS; s++) {
        assert_int_equal(ph_world_step(whole), PH_OK);
        assert_int_equal(ph_world_step(tiled), PH_OK);
        const int nw = ph_world_get_contact_events(whole, ew, CAP);
        const int nt = ph_world_get_contact_events(tiled, et, CAP);
        assert_int_equal(nw, nt);
        assert_true(nw <= CAP);
        events += nw;
        for (int k = 0; k < nw; k++) {
            assert_int_equal(ew[k].begin, et[k].begin);
            /* (The ids' world slots differ: two worlds.) */
            assert_int_equal(ew[k].body_a.index1, et[k].body_a.index1);
            assert_int_equal(ew[k].body_a.gen, et[k].body_a.gen);
            assert_int_equal(ew[k].body_b.index1, et[k].body_b.index1);
            assert_int_equal(ew[k].shape_a.index1, et[k].shape_a.index1);
            assert_int_equal(ew[k].shape_b.index1, et[k].shape_b.index1);
            assert_memory_equal(&ew[k].point, &et[k].point, sizeof ew[k].point);
            assert_memory_equal(&ew[k].normal, &et[k].normal, sizeof ew[k].normal);
            assert_true(ew[k].approach_speed == et[k].approach_speed);
        }
        ph_step_stats sw, st;
        assert_int_equal(ph_world_get_stats(whole, &sw), PH_OK);
        assert_int_equal(ph_world_get_stats(tiled, &st), PH_OK);
        assert_true(sw.max_penetration == st.max_penetration);
        deep += st.max_penetration > 0;
        assert_int_equal(sw.contacts, st.contacts);
        assert_int_equal(sw.manifolds, st.manifolds);
        assert_int_equal(sw.rows, st.rows);
        assert_int_equal(sw.iterations, st.iterations);
        assert_true(sw.row_updates == st.row_updates);
        assert_true(sw.fischer_final == st.fischer_final);
        assert_true(sw.minmap_final == st.minmap_final);
        /* (The merits' B, made by the merits in both: ph__wpointb.) */
        assert_true(sw.rel_residual == st.rel_residual);
        assert_true(st.fischer_final == 0 || st.rel_residual > 0); /* (B = 0: rel 0) */
    }
    /* Every column's boxes land on each other (a begin event each) and
     * press into each other. */
    assert_true(events >= SIDE * SIDE * LAYERS);
    assert_true(deep >= STEPS / 2);
    assert_int_equal(record(whole)->tiled_last, 0);
    assert_true(record(tiled)->tiled_last >= STEPS - 5);
    assert_true(record(tiled)->tiled_last == record(whole)->tiled_steps);
    assert_true(ph_world_state_hash(whole) == ph_world_state_hash(tiled));
    free(ew);
    free(et);
    ph_world_destroy(whole);
    ph_world_destroy(tiled);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiles_layout),       cmocka_unit_test(test_tiles_cache_lines),
        cmocka_unit_test(test_tiles_same_physics), cmocka_unit_test(test_tiles_with_merits),
        cmocka_unit_test(test_tiles_last_substep), cmocka_unit_test(test_tiles_merits_b),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
