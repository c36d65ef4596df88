/*
 * test_threads.c — a world stepped by 1, 2 and 4 threads (settings.threads,
 * tasks.c) gives bit-identical states after every step.
 *
 * Each case builds the same scene in three worlds that differ only in
 * `threads`, steps them side by side and compares ph_world_state_hash
 * (positions, orientations, velocities, impulses of every body, joint and
 * manifold) after each step: the grid presets (grid4000 and a few steps of
 * grid16000, whose islands the workers share out as whole tiles; grid4000
 * at rest and pushed, checked to take that path), pyramid40 (one island,
 * coloured into a few wide levels that the workers split; pyramid20 keeps
 * the bottom-up levels), a grid with ball joints
 * between neighbouring boxes (the joints' direct block among the
 * contacts), sleeping on (islands put to sleep and woken by an impulse),
 * the row back end (contact_block off: its passes stay on one thread), a
 * host task runner (ph_world_set_task_runner) instead of the world's pool,
 * a step that fails the envelope check, and the integration fused into a
 * substep's last claimed pass (its lists, every body integrated once per
 * substep, bodies of no group), and the split narrowphase's pieces of
 * any size, and the native build's first loop split (every manifold's
 * row0). And the pool's pace: after steps that follow each other
 * closely its threads spin on (linger) instead of sleeping, after a
 * step that came late they sleep. The statistics that count
 * work (rows, manifolds, row updates), the final merits and the contact
 * events (order and every field) agree too, bit for bit.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "ph_test.h"
#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "tasks.h"
#include "world.h"

enum { NW = 3 };
static const int thread_counts[NW] = {1, 2, 4};

typedef void (*edit_fn)(ph_world_id w, int step);

static ph_world_id make_world(const char *scene, int threads, int sleep, int contact_block) {
    int err = 0;
    ph_world_def d = ph_default_world_def();
    ph_world_id w = ph_world_create(&d, &err);
    assert_int_equal(err, PH_OK);
    assert_int_equal(ph_scene_build(w, scene), PH_OK);
    ph_settings s;
    assert_int_equal(ph_world_get_settings(w, &s), PH_OK);
    s.threads = threads;
    s.sleep = sleep;
    s.contact_block = contact_block;
    assert_int_equal(ph_world_set_settings(w, &s), PH_OK);
    return w;
}

/* Steps the three worlds `steps` times, edit(w, k) before step k, and
 * checks after each step that their states and work counts agree. */
/* The contact events of the last step of worlds a and b: the same, in the
 * same order (begin or end, shapes, bodies, point, normal, speed, bit for
 * bit). */
static int events_total;

static void same_events(ph_world_id a, ph_world_id b, int step) {
    enum { CAP = 4096 };
    static ph_contact_event ea[CAP], eb[CAP];
    const int na = ph_world_get_contact_events(a, ea, CAP), nb = ph_world_get_contact_events(b, eb, CAP);
    if (na != nb) fail_msg("step %d: %d events against %d", step, nb, na);
    events_total += na;
    for (int i = 0; i < na && i < CAP; i++) {
        if (!ph_test_same_event(&ea[i], &eb[i])) fail_msg("step %d: event %d differs", step, i);
    }
}

static void run_case(ph_world_id *w, int steps, edit_fn edit) {
    for (int k = 0; k < steps; k++) {
        uint64_t h[NW];
        ph_step_stats st[NW];
        for (int i = 0; i < NW; i++) {
            if (edit) edit(w[i], k);
            assert_int_equal(ph_world_step(w[i]), PH_OK);
            h[i] = ph_world_state_hash(w[i]);
            assert_int_equal(ph_world_get_stats(w[i], &st[i]), PH_OK);
        }
        for (int i = 1; i < NW; i++) {
            same_events(w[0], w[i], k);
            if (h[i] != h[0])
                fail_msg("step %d: threads %d hash %016llx, threads 1 %016llx", k, thread_counts[i],
                         (unsigned long long)h[i], (unsigned long long)h[0]);
            assert_int_equal(st[i].rows, st[0].rows);
            assert_int_equal(st[i].manifolds, st[0].manifolds);
            assert_int_equal(st[i].contacts, st[0].contacts); /* (count_contacts split among the workers) */
            assert_true(st[i].row_updates == st[0].row_updates);
            /* The final merit, a sum over the batches in their layout's
             * order: the layout (tiles, levels) is the same at every
             * thread count, and the sum is taken on one thread, so it is
             * equal to the last bit too. */
            const double f0 = st[0].fischer_final, fi = st[i].fischer_final;
            if (memcmp(&fi, &f0, sizeof fi) != 0)
                fail_msg("step %d: threads %d fischer_final %.17g, threads 1 %.17g", k, thread_counts[i], fi, f0);
            const double r0 = st[0].rel_residual, ri = st[i].rel_residual;
            if (memcmp(&ri, &r0, sizeof ri) != 0)
                fail_msg("step %d: threads %d rel_residual %.17g, threads 1 %.17g", k, thread_counts[i], ri, r0);
        }
    }
}

static void scene_case(const char *scene, int steps, int sleep, int contact_block, edit_fn edit) {
    ph_world_id w[NW];
    for (int i = 0; i < NW; i++)
        w[i] = make_world(scene, thread_counts[i], sleep, contact_block);
    run_case(w, steps, edit);
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

static void test_grid4000(void **state) {
    (void)state;
    scene_case("grid4000", 30, 0, 1, NULL);
}

static void test_grid16000(void **state) {
    (void)state;
    scene_case("grid16000", 4, 0, 1, NULL);
}

static void test_pyramid40(void **state) {
    (void)state;
    scene_case("pyramid40", 40, 0, 1, NULL);
}

/* The contact events of a narrowphase split among the workers (an open
 * pass of pieces of 128 pairs, narrowphase.c: each piece finds the events
 * of its range of pairs against last step's manifolds, and they are pushed
 * in piece order after the pass). pyramid40 with its schedule on; at step
 * 20 the apex and the right ends of the three rows below are thrown up
 * (their contacts end, then begin again as they land, at different
 * steps) and a cube at each end of the bottom row is pushed out sideways
 * (its neighbours' contacts end): events from pairs far apart in the pair
 * order, in different pieces, in the same steps. The events of every step
 * are compared with one thread's, event by event, in run_case; here it is
 * checked that such steps happen with the narrowphase split (two and four
 * threads: the schedule on, more pairs than a piece), and that some of
 * them have events from both ends of the pair order, so that pieces pushed
 * out of order would fail the comparison. */
static int shapes_n, events_step;

static void throw_apex(ph_world_id w, int k) {
    (void)k; /* (run_case steps once at a time here: events_step is the step) */
    if (events_step != 20) return;
    ph_body_id b[1000];
    const int n = ph_world_get_bodies(w, b, 1000);
    assert_int_equal(n, 821);   /* (the ground, then the rows bottom-up, left to right) */
    for (int q = 0; q < 4; q++) /* (the apex and the right ends of the rows below: landing at different steps) */
        assert_int_equal(ph_body_set_velocity(b[n - 1 - q * (q + 3) / 2], ph_v3(0, 0, 2 + 0.5 * q), ph_v3(0, 0, 0)),
                         PH_OK);
    assert_int_equal(ph_body_set_velocity(b[1], ph_v3(-3, 0, 0), ph_v3(0, 0, 0)), PH_OK);
    assert_int_equal(ph_body_set_velocity(b[40], ph_v3(3, 0, 0), ph_v3(0, 0, 0)), PH_OK);
}

static void events_case(int32_t piece2, int32_t piece4) {
    ph_world_id w[NW];
    for (int i = 0; i < NW; i++)
        w[i] = make_world("pyramid40", thread_counts[i], 0, 1);
    ph__world_get(w[1])->collide_piece = piece2;
    ph__world_get(w[2])->collide_piece = piece4;
    shapes_n = (int)ph__world_get(w[0])->shape_pool.hwm;
    int split_steps = 0, split_events = 0, spread = 0;
    for (events_step = 0; events_step < 120; events_step++) {
        const int split = ph__world_get(w[1])->wsched_ok && ph__world_get(w[2])->wsched_ok; /* (last step's) */
        events_total = 0;
        run_case(w, 1, throw_apex);
        const ph__world *two = ph__world_get(w[1]);
        assert_true(two->pair_count >= 4 * 128);
        if (!split || events_total == 0) continue;
        split_steps++;
        split_events += events_total / (NW - 1);
        enum { CAP = 4096 };
        static ph_contact_event ev[CAP];
        const int ne = ph_world_get_contact_events(w[1], ev, CAP);
        int lo = 0, hi = 0;
        for (int q = 0; q < ne && q < CAP; q++) {
            lo |= (int)ev[q].shape_a.index1 < shapes_n / 4;
            hi |= (int)ev[q].shape_a.index1 > 3 * shapes_n / 4;
        }
        spread += lo && hi;
    }
    print_message("steps with events from a split narrowphase: %d (%d events), from both ends: %d\n", split_steps,
                  split_events, spread);
    assert_true(split_steps >= 3);
    assert_true(split_events >= 10);
    assert_true(spread >= 1);
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

static void test_events_split(void **state) {
    (void)state;
    events_case(0, 0);
}

/* The split narrowphase's pieces of any size (narrowphase.c, SPLIT_PAIRS
 * by default, here one pair a piece at two threads and seven at four:
 * pieces with no manifold, pieces whose range of last step's manifolds is
 * empty, a last piece shorter than the others) give one thread's
 * manifolds and events, in its order. */
static void test_pieces_fine(void **state) {
    (void)state;
    events_case(1, 7);
}

/* The levels of world w's last build (one tile: each run of groups is a
 * level): their number, and whether any two manifolds of one level share a
 * moving body (solver body > 0), which would make a level's split wrong. */
static int levels_of(const ph__world *w, int *shared) {
    int levels = 0;
    *shared = 0;
    int32_t *seen = calloc((size_t)w->sbody_count + 1, sizeof *seen);
    assert_non_null(seen);
    for (int32_t b = 0; b < w->wbatch_count; b += w->wbatches[b].glen) {
        const ph__wbatch *g = &w->wbatches[b];
        assert_true(g->glen > 0);
        if (!g->indep) levels++;
        for (int j = 0; j < PH_LANES; j++) {
            if (g->point[j] < 0) continue;
            const int32_t body[2] = {g->ia[j], g->ib[j]};
            for (int k = 0; k < 2; k++) {
                if (body[k] == 0) continue;
                if (seen[body[k]] == levels) *shared = 1;
                seen[body[k]] = levels;
            }
        }
    }
    free(seen);
    return levels;
}

/* The claimed passes' dependencies (solver_wide.c, make_deps), against
 * a search of all pairs: for each group, the first and last group of the
 * segment before its own (segment 0: the last segment) that share a
 * moving body with it, -1 as the last when none does. A group runs once
 * those are done, so a range too narrow would let two threads race on a
 * body. */
static int group_bodies(const ph__world *w, int32_t g, int32_t *bd) {
    const ph__wbatch *wb = &w->wbatches[w->wgfirst[g]];
    int n = 0;
    for (int j = 0; j < PH_LANES; j++) {
        if (wb->point[j] < 0) continue;
        if (wb->ia[j] > 0) bd[n++] = wb->ia[j];
        if (wb->ib[j] > 0) bd[n++] = wb->ib[j];
    }
    return n;
}

static void check_deps(const ph__world *w) {
    const int32_t nseg = w->wseg_count, *sg = w->wsegs;
    assert_true(nseg >= 2);
    int32_t with = 0;
    for (int32_t k = 0; k < nseg; k++) {
        const int32_t pk = (k + nseg - 1) % nseg;
        for (int32_t g = sg[4 * k]; g < sg[4 * k + 1]; g++) {
            int32_t a[2 * PH_LANES], b[2 * PH_LANES], lo = -1, hi = -1;
            const int na = group_bodies(w, g, a);
            for (int32_t h = sg[4 * pk]; h < sg[4 * pk + 1]; h++) {
                const int nb = group_bodies(w, h, b);
                int share = 0;
                for (int x = 0; x < na; x++)
                    for (int y = 0; y < nb; y++)
                        share |= a[x] == b[y];
                if (!share) continue;
                if (lo < 0) lo = h;
                hi = h;
            }
            assert_int_equal(w->wgdep[2 * g + 1], hi);
            if (hi >= 0) assert_int_equal(w->wgdep[2 * g], lo);
            with += hi >= 0;
        }
    }
    assert_true(with > 0);
}

/* The integration fused into a substep's last claimed pass
 * (solver_wide.c, make_int and claim_pass): every solver body is listed
 * once, under the last group in the pass's order whose batches (any of
 * them, searched here) touch it, or among the bodies of no group, which
 * the pass integrates at its end. A body listed under an earlier group
 * would be integrated while a later group still solves it. */
static void check_int(const ph__world *w) {
    const int32_t ng = w->wgroup_count, nsb = w->sbody_count, *gi = w->wintg, *list = w->wint + ng + 3;
    int32_t *last = malloc((size_t)nsb * sizeof *last), *seen = calloc((size_t)nsb, sizeof *seen);
    assert_non_null(last);
    assert_non_null(seen);
    for (int32_t b = 0; b < nsb; b++)
        last[b] = -1;
    for (int32_t g = 0; g < ng; g++)
        for (int32_t b = w->wgfirst[g]; b < w->wgfirst[g + 1]; b++)
            for (int j = 0; j < PH_LANES; j++) {
                const ph__wbatch *wb = &w->wbatches[b];
                if (wb->point[j] < 0) continue;
                last[wb->ia[j]] = last[wb->ib[j]] = g;
            }
    assert_int_equal(gi[0], 0);
    assert_int_equal(gi[ng + 1], nsb - 1);
    for (int32_t g = 0; g <= ng; g++) {
        assert_true(gi[g] <= gi[g + 1]);
        for (int32_t i = gi[g]; i < gi[g + 1]; i++) {
            const int32_t b = list[i];
            assert_true(b >= 1 && b < nsb);
            assert_int_equal(seen[b]++, 0);
            assert_int_equal(last[b], g < ng ? g : -1);
        }
    }
    free(last);
    free(seen);
}

/* The fused integration's counts over one step of worlds w[1] and w[2]
 * (2 and 4 threads) against what they were before it (pass[i], sb[i]):
 * with the level schedule on, each of the step's `fused` substeps
 * integrated in its last claimed pass (w->wint_passes), every solver body
 * exactly once in each (w->wint_sb); one thread never does. Returns
 * whether the schedule was on. */
static int fused_step(ph_world_id *w, int64_t *pass, int64_t *sb, int fused) {
    assert_int_equal(ph__world_get(w[0])->wint_passes, 0);
    int on = 1;
    for (int i = 1; i < NW; i++) {
        const ph__world *x = ph__world_get(w[i]);
        const int64_t dp = x->wint_passes - pass[i], dsb = x->wint_sb - sb[i];
        pass[i] = x->wint_passes;
        sb[i] = x->wint_sb;
        if (!x->wsched_ok || x->wsched_tiles) {
            on = 0;
            continue;
        }
        if (dp != fused)
            fail_msg("threads %d: %lld substeps integrated in a claimed pass, not %d (%lld in all)", thread_counts[i],
                     (long long)dp, fused, (long long)x->wint_passes);
        assert_true(dsb == dp * (x->sbody_count - 1));
        check_int(x);
    }
    return on;
}

/* pyramid40 is one island of about 2 400 manifolds: its manifolds are
 * coloured (solver_wide.c, PH_COLOUR_MIN) into a few wide levels instead
 * of the bottom-up order's some 225 levels of 1-5 groups, so that two
 * workers split its sweeps (the level schedule on, not the tiles); no two
 * manifolds of a level share a moving body, and the states stay the same
 * bit for bit at 1, 2 and 4 threads (run_case); the schedule's
 * dependencies are checked (check_deps). pyramid20 (590 manifolds)
 * keeps the bottom-up levels. */
static void test_pyramid40_coloured(void **state) {
    (void)state;
    ph_world_id w[NW];
    for (int i = 0; i < NW; i++)
        w[i] = make_world("pyramid40", thread_counts[i], 0, 1);
    int split = 0;
    int64_t pass[NW] = {0}, sb[NW] = {0};
    for (int k = 0; k < 30; k++) {
        run_case(w, 1, NULL);
        /* (Each of the 10 substeps but the last, which records its merits
         * sweep by sweep: record_merits is on by default.) */
        fused_step(w, pass, sb, 9);
        const ph__world *one = ph__world_get(w[0]), *two = ph__world_get(w[1]);
        if (!one->wide_ok) continue;
        int shared = 1;
        const int levels = levels_of(one, &shared);
        assert_false(shared);
        assert_true(levels >= 6 && levels <= 12);
        assert_int_equal(levels_of(two, &shared), levels);
        if (two->wsched_ok && !two->wsched_tiles) {
            split++;
            check_deps(two);
        }
    }
    assert_true(split >= 25);
    /* The sweep and the relaxation of the substeps that relax (0 and 5 of
     * 10 by default) claimed as one pass, with 2 and 4 threads. */
    assert_true(ph__world_get(w[1])->wfused_passes >= 2 * 25);
    assert_true(ph__world_get(w[2])->wfused_passes >= 2 * 25);
    assert_int_equal(ph__world_get(w[0])->wfused_passes, 0);
    ph_world_id p = make_world("pyramid20", 1, 0, 1);
    for (int k = 0; k < 10; k++)
        assert_int_equal(ph_world_step(p), PH_OK);
    int shared = 1;
    const int levels = levels_of(ph__world_get(p), &shared);
    print_message("pyramid20's bottom-up levels: %d\n", levels);
    assert_false(shared);
    assert_true(levels > 60);
    ph_world_destroy(p);
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

/* pyramid40 at each thread count (its schedule on) without per-sweep
 * merits (the last substep's merits lazy: it fuses too); substeps and
 * iterations when not 0. */
static void fused_worlds(ph_world_id w[NW], int substeps, int iterations) {
    for (int i = 0; i < NW; i++) {
        w[i] = make_world("pyramid40", thread_counts[i], 0, 1);
        ph_settings st;
        assert_int_equal(ph_world_get_settings(w[i], &st), PH_OK);
        if (substeps) st.substeps = substeps;
        if (iterations) st.iterations = iterations;
        st.record_merits = 0;
        assert_int_equal(ph_world_set_settings(w[i], &st), PH_OK);
    }
}

/* The fused integration with bodies of no group and bodies that are
 * not integrated four at a time: pyramid40 (its schedule on) with 40
 * spheres and 12 spinning boxes of unequal sides (anisotropic, so their
 * forces are not a plain velocity increment) falling from 300 m, touching
 * nothing; 2 substeps of 4 sweeps (so that the middle substeps do not go
 * to the tiles, and the integration follows the fourth sweep of each;
 * substep 0 relaxes too; no per-sweep merits, so that the last substep,
 * whose integration has no next substep, fuses too). Each of the 2
 * substeps integrates in its last
 * claimed pass, every body once (fused_step), the 52 falling bodies among
 * those of no group, and the states equal one thread's bit for bit
 * (run_case). */
static void test_fused_free(void **state) {
    (void)state;
    ph_world_id w[NW];
    fused_worlds(w, 2, 4);
    for (int i = 0; i < NW; i++) {
        for (int q = 0; q < 52; q++) {
            ph_body_def bd = ph_default_body_def();
            bd.position = ph_v3(-60 + 3.0 * (q % 13), 60 + 3.0 * (q / 13), 300);
            ph_shape_def sd = ph_default_shape_def();
            if (q >= 40) {
                bd.angular_velocity = ph_v3(0.3 * q, 1, -2);
                sd.type = PH_SHAPE_BOX;
                sd.half_extents = ph_v3(0.2, 0.5, 0.9);
            }
            int err = 0;
            const ph_body_id b = ph_body_create(w[i], &bd, &err);
            assert_int_equal(err, PH_OK);
            ph_shape_create(b, &sd, &err);
            assert_int_equal(err, PH_OK);
        }
    }
    int64_t pass[NW] = {0}, sb[NW] = {0};
    int on = 0;
    for (int k = 0; k < 20; k++) {
        run_case(w, 1, NULL);
        if (!fused_step(w, pass, sb, 2)) continue;
        on++;
        const ph__world *two = ph__world_get(w[1]);
        assert_int_equal(two->wintg[two->wgroup_count + 1] - two->wintg[two->wgroup_count], 52);
    }
    print_message("steps with the integration fused, bodies of no group among them: %d of 20\n", on);
    assert_true(on >= 15);
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

/* The fused integration gathers any four bodies that a claimed piece's
 * groups end into the lanes (integrate_wide.c, ph__wide_integrate_gather;
 * the last one to three of a worker's pass in lanes repeated), and
 * integrates one by one those whose forces are not a plain velocity
 * increment: pyramid40 (its schedule on) with every seventh cube damped
 * (so not plain: in contact, among the groups' bodies), no per-sweep merits
 * (all 10 substeps fuse, the last one without a next substep). Each
 * substep integrates in its last claimed pass, every body once
 * (fused_step), and the states equal one thread's bit for bit
 * (run_case). */
static void test_fused_mixed(void **state) {
    (void)state;
    ph_world_id w[NW];
    fused_worlds(w, 0, 0);
    for (int i = 0; i < NW; i++) {
        ph_body_id b[1000];
        const int n = ph_world_get_bodies(w[i], b, 1000);
        assert_int_equal(n, 821);
        for (int q = 3; q < n; q += 7)
            assert_int_equal(ph_body_set_damping(b[q], 0.0, 0.5), PH_OK);
    }
    int64_t pass[NW] = {0}, sb[NW] = {0};
    int on = 0;
    for (int k = 0; k < 20; k++) {
        run_case(w, 1, NULL);
        if (!fused_step(w, pass, sb, 10)) continue;
        on++;
        const ph__world *two = ph__world_get(w[1]);
        int32_t damped = 0; /* (in the groups' lists) */
        for (int32_t i = 0; i < two->wintg[two->wgroup_count]; i++)
            damped += !two->sforce[two->wint[two->wgroup_count + 3 + i]].plain;
        assert_true(damped >= 100);
    }
    print_message("steps with the integration fused, damped bodies among the groups': %d of 20\n", on);
    assert_true(on >= 15);
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

/* grid4000 until its columns rest (no restitutive pair left): 400
 * islands in tiles of whole islands, which the workers share out whole
 * (solver_wide.c, wsched_tiles): every pass of the first and last
 * substeps and all the middle substeps of a tile (step.c, tiled_substeps)
 * on one worker, no barrier inside; the broadphase's boxes and its filter
 * of the reused pairs split too (broad_phase.c, with the schedule). Checked to be the path taken: the
 * tiles' schedule on, and steps in which the middle substeps qualify for
 * the tiles (no restitutive pair, no joints). A push at step 60 wakes a
 * column's pairs into restitution for a while. */
static void push_late(ph_world_id w, int k) {
    if (k != 60) return;
    ph_body_id b[200];
    assert_int_equal(ph_world_get_bodies(w, b, 200), 200);
    ph_transform x;
    assert_int_equal(ph_body_get_transform(b[150], &x), PH_OK);
    assert_int_equal(ph_body_apply_impulse(b[150], ph_v3(4, 0, 1), x.p), PH_OK);
}

static void test_tiles_shared(void **state) {
    (void)state;
    ph_world_id w[NW];
    for (int i = 0; i < NW; i++)
        w[i] = make_world("grid4000", thread_counts[i], 0, 1);
    int tiled = 0;
    events_total = 0;
    for (int k = 0; k < 90; k++) {
        run_case(w, 1, k >= 60 ? push_late : NULL);
        const ph__world *one = ph__world_get(w[0]), *two = ph__world_get(w[1]), *four = ph__world_get(w[2]);
        /* (Every thread count lays the batches out the same.) */
        assert_int_equal(two->tile_count, one->tile_count);
        assert_int_equal(four->wbatch_count, one->wbatch_count);
        assert_int_equal(one->wsched_ok, 0); /* (one thread: no schedule) */
        if (two->wide_ok && two->restitutive == 0 && two->wsched_ok && two->wsched_tiles && four->wsched_tiles &&
            two->tile_count >= 8)
            tiled++;
    }
    print_message("steps with the tiles shared among workers: %d of 90\n", tiled);
    assert_true(tiled >= 20);
    assert_true(events_total > 1000); /* (the columns' landing: begin events compared above) */
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

/* A step that leaves two bodies outside the finite envelope (one in each
 * half of the solver bodies, so in different workers' shares of the
 * check): every thread count reports the first in slot order, with the
 * same value, and puts the world back as it was (the same hash as before
 * the step, at every thread count). */
static void test_envelope_fault(void **state) {
    (void)state;
    ph_world_id w[NW];
    for (int i = 0; i < NW; i++)
        w[i] = make_world("grid4000", thread_counts[i], 0, 1);
    run_case(w, 12, NULL);
    uint64_t before = 0;
    ph_fault f0;
    for (int i = 0; i < NW; i++) {
        ph_body_id b[3001];
        assert_int_equal(ph_world_get_bodies(w[i], b, 3001), 3001);
        const uint64_t h = ph_world_state_hash(w[i]);
        if (i == 0) before = h;
        assert_true(h == before);
        /* (The edits stay inside the bounds; the step's forces take the
         * bodies out.) */
        ph_transform x;
        assert_int_equal(ph_body_get_transform(b[3000], &x), PH_OK);
        assert_int_equal(ph_body_apply_force(b[3000], ph_v3(0, 0, 1e12), x.p), PH_OK);
        assert_int_equal(ph_body_get_transform(b[40], &x), PH_OK);
        assert_int_equal(ph_body_apply_force(b[40], ph_v3(1e12, 0, 0), x.p), PH_OK);
        const uint64_t edited = ph_world_state_hash(w[i]);
        assert_int_equal(ph_world_step(w[i]), PH_ERR_NONFINITE);
        assert_true(ph_world_state_hash(w[i]) == edited); /* (undone) */
        ph_fault f;
        assert_int_equal(ph_world_get_fault(w[i], &f), PH_OK);
        assert_int_equal(f.what, PH_FAULT_LINEAR_VELOCITY);
        assert_int_equal(f.body.index1, b[40].index1);
        assert_true(f.value > PH_ENVELOPE_LINEAR_SPEED);
        if (i == 0) f0 = f;
        assert_true(memcmp(&f.value, &f0.value, sizeof f.value) == 0);
        assert_true(f.step == f0.step);
    }
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

/* A push on one box at step 3 and a kick to another at step 20 (the
 * islands touched wake; the others may sleep meanwhile). */
static void poke(ph_world_id w, int k) {
    if (k != 3 && k != 20 && k != 80) return;
    ph_body_id b[4000];
    const int n = ph_world_get_bodies(w, b, 4000);
    assert_true(n > 100);
    const ph_body_id t = b[k == 3 ? 17 : k == 20 ? n / 2 : n - 5];
    ph_transform x;
    assert_int_equal(ph_body_get_transform(t, &x), PH_OK);
    assert_int_equal(ph_body_apply_impulse(t, ph_v3(3, 1, 0), x.p), PH_OK);
}

static void test_sleep_on(void **state) {
    (void)state;
    scene_case("grid4000", 90, 1, 1, poke);
}

/* contact_block off: row mode, whose passes run on one thread whatever
 * the setting says. */
static void test_row_mode(void **state) {
    (void)state;
    scene_case("grid1000", 20, 0, 0, NULL);
}

/* grid4000 with every column's boxes 0-1 and 2-3 joined by ball joints at
 * their shared face (the direct joint block, solved before the contacts in
 * each sweep, on worker 0) and one box pushed. */
static void join_columns(ph_world_id w) {
    ph_body_id b[4001];
    const int n = ph_world_get_bodies(w, b, 4001);
    assert_int_equal(n, 4001); /* the ground's body, then the boxes */
    int joints = 0;
    /* (The preset makes the grid layer by layer, 400 boxes a layer.) */
    for (int i = 1; i + 400 < n && joints < 200; i += 2) {
        ph_transform xa, xb;
        assert_int_equal(ph_body_get_transform(b[i], &xa), PH_OK);
        assert_int_equal(ph_body_get_transform(b[i + 400], &xb), PH_OK);
        assert_float_equal(xa.p.x, xb.p.x, 1e-9);
        assert_float_equal(xa.p.y, xb.p.y, 1e-9);
        assert_float_equal(xb.p.z - xa.p.z, 1.1, 1e-9);
        ph_joint_def d = ph_default_joint_def();
        d.type = PH_JOINT_BALL;
        d.body_a = b[i];
        d.body_b = b[i + 400];
        d.anchor_a = ph_v3(0, 0, 0.55);
        d.anchor_b = ph_v3(0, 0, -0.55);
        int err = 0;
        ph_joint_create(w, &d, &err);
        assert_int_equal(err, PH_OK);
        joints++;
    }
    assert_int_equal(joints, 200);
}

static void push_first(ph_world_id w, int k) {
    if (k != 5) return;
    ph_body_id b[2];
    assert_int_equal(ph_world_get_bodies(w, b, 2), 2);
    ph_transform x;
    assert_int_equal(ph_body_get_transform(b[1], &x), PH_OK);
    assert_int_equal(ph_body_apply_impulse(b[1], ph_v3(0, 20, 0), x.p), PH_OK);
}

static void test_joints(void **state) {
    (void)state;
    ph_world_id w[NW];
    for (int i = 0; i < NW; i++) {
        w[i] = make_world("grid4000", thread_counts[i], 0, 1);
        join_columns(w[i]);
    }
    run_case(w, 25, push_first);
    ph_step_stats st;
    assert_int_equal(ph_world_get_stats(w[0], &st), PH_OK);
    assert_int_equal(st.joints, 200);
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

/* A host runner: one thread per task beyond the first, started and joined
 * on every call (slow, but all tasks run at the same time). */
typedef struct host_arg {
    ph_task_fn *task;
    void *ctx;
    int i;
} host_arg;

static int host_calls;

static void *host_thread(void *p) {
    host_arg *a = p;
    a->task(a->ctx, a->i);
    return NULL;
}

static void host_run(void *user, ph_task_fn *task, void *ctx, int count) {
    (void)user;
    host_calls++;
    pthread_t th[8];
    host_arg a[8];
    assert_true(count >= 2 && count <= 8);
    for (int i = 1; i < count; i++) {
        a[i] = (host_arg){task, ctx, i};
        assert_int_equal(pthread_create(&th[i], NULL, host_thread, &a[i]), 0);
    }
    task(ctx, 0);
    for (int i = 1; i < count; i++)
        pthread_join(th[i], NULL);
}

static void test_host_runner(void **state) {
    (void)state;
    ph_world_id w[NW];
    for (int i = 0; i < NW; i++)
        w[i] = make_world("grid4000", thread_counts[i], 0, 1);
    assert_int_equal(ph_world_set_task_runner(w[2], host_run, NULL), PH_OK);
    host_calls = 0;
    run_case(w, 16, NULL); /* (the boxes touch from step 9) */
    print_message("host runner calls: %d\n", host_calls);
    /* (Every step's parallel passes went through it: the broadphase's, the
     * solver bodies', the tiles' from substep 0's fill through substep
     * n - 2 as one pass, the last substep's; 105 calls in 16 steps.) */
    assert_true(host_calls > 16 * 5);
    assert_int_equal(ph_world_set_task_runner(w[2], NULL, NULL), PH_OK);
    run_case(w, 2, NULL); /* back on the world's own pool */
    ph_world_id bad = {0};
    assert_int_equal(ph_world_set_task_runner(bad, host_run, NULL), PH_ERR_INVALID_HANDLE);
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

/* The setting's range, and a change of thread count between steps. */
static void test_setting(void **state) {
    (void)state;
    ph_settings s = ph_default_settings();
    assert_int_equal(s.threads, 1);
    s.threads = 0;
    assert_int_equal(ph_settings_validate(&s, NULL), PH_ERR_INVALID_ARGUMENT);
    s.threads = 9;
    assert_int_equal(ph_settings_validate(&s, NULL), PH_ERR_INVALID_ARGUMENT);
    s.threads = 8;
    assert_int_equal(ph_settings_validate(&s, NULL), PH_OK);
    ph_world_id w[NW];
    for (int i = 0; i < NW; i++)
        w[i] = make_world("grid4000", 1, 0, 1);
    run_case(w, 2, NULL);
    for (int i = 0; i < NW; i++) { /* 1 -> 1, 2, 4 */
        ph_settings t;
        assert_int_equal(ph_world_get_settings(w[i], &t), PH_OK);
        t.threads = thread_counts[i];
        assert_int_equal(ph_world_set_settings(w[i], &t), PH_OK);
    }
    run_case(w, 3, NULL);
    for (int i = 0; i < NW; i++) { /* -> 8, 3, 1 */
        ph_settings t;
        assert_int_equal(ph_world_get_settings(w[i], &t), PH_OK);
        t.threads = i == 0 ? 8 : i == 1 ? 3 : 1;
        assert_int_equal(ph_world_set_settings(w[i], &t), PH_OK);
    }
    run_case(w, 3, NULL);
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

/* The native build's first loop split among the workers (solver_wide.c,
 * keys_split: two open passes of pieces of manifolds, the second numbering
 * each piece's rows from the pieces before it): every manifold's row0,
 * part in the layout and height as one thread's, each step of pyramid40
 * (2 380 manifolds, split from the second step on). The state hash does
 * not see row0 (the point passes index their records by batch), so it is
 * compared here. */
static void test_keys_split(void **state) {
    (void)state;
    ph_world_id w[NW];
    for (int i = 0; i < NW; i++)
        w[i] = make_world("pyramid40", thread_counts[i], 0, 1);
    int split = 0;
    for (int k = 0; k < 12; k++) {
        const ph__world *x = ph__world_get(w[1]);
        split += x->wsched_ok && x->manifold_count >= 16 * PH_TASKS_MIN_GROUPS;
        run_case(w, 1, NULL);
        const ph__world *a = ph__world_get(w[0]);
        for (int i = 1; i < NW; i++) {
            const ph__world *b = ph__world_get(w[i]);
            assert_int_equal(b->manifold_count, a->manifold_count);
            for (int32_t m = 0; m < a->manifold_count; m++) {
                if (b->manifolds[m].row0 != a->manifolds[m].row0)
                    fail_msg("step %d: threads %d manifold %d row0 %d, threads 1 %d", k, thread_counts[i], m,
                             b->manifolds[m].row0, a->manifolds[m].row0);
                assert_true(b->wsig[m] == a->wsig[m]);
                if (a->manifolds[m].row0 >= 0) assert_memory_equal(&b->wheight[m], &a->wheight[m], sizeof(double));
            }
        }
    }
    print_message("steps with the build's first loop split: %d of 12\n", split);
    assert_true(split >= 10);
    for (int i = 0; i < NW; i++)
        ph_world_destroy(w[i]);
}

/* The claims from both ends up to a split (tasks.c, ph__tasks_claim_to),
 * on one thread: the two ends' claims interleaved in a few patterns (the
 * back late, the front late, alternating), for every split of n pieces.
 * Every piece is claimed once; an end claims within its own share (front
 * [0, mid), back [mid, n)) as long as any of it is left, and beyond it
 * only then, at the split's edge (the claims stay contiguous from each
 * end); two ends claiming in turn with equal shares meet at mid. The same
 * for ph__tasks_claim_share, whose claim within an end's share takes all
 * that is left of it: two ends claiming in turn make one claim each. */
static int32_t claim(int whole, _Atomic uint64_t *took, int32_t n, int back, int32_t mid, int32_t *c) {
    return whole ? ph__tasks_claim_share(took, n, back, 4, mid, c) : ph__tasks_claim_to(took, n, back, 4, mid, c);
}

static void test_claim_to(void **state) {
    (void)state;
    for (int whole = 0; whole < 2; whole++)
        for (int32_t n = 1; n <= 40; n++)
            for (int32_t mid = 0; mid <= n; mid++)
                for (int pattern = 0; pattern < 4; pattern++) {
                    _Atomic uint64_t took;
                    atomic_init(&took, 0);
                    int32_t seen[64] = {0}, f = 0, b = 0, turn = 0, claims[2] = {0, 0};
                    for (int32_t round = 0;; round++) {
                        /* 0: alternating; 1: the back starts after 3 claims; 2: the front
                         * after 3; 3: the back only after the front has none left */
                        int back = round % 2;
                        if (pattern == 1) back = round < 3 ? 0 : round % 2;
                        if (pattern == 2) back = round < 3 ? 1 : round % 2;
                        if (pattern == 3) back = turn;
                        int32_t c, m = claim(whole, &took, n, back, mid, &c);
                        if (m == 0 && pattern == 3 && !turn) {
                            turn = 1;
                            continue;
                        }
                        if (m == 0) {
                            const int other = claim(whole, &took, n, !back, mid, &c);
                            assert_int_equal(other, 0);
                            break;
                        }
                        assert_true(m >= 1 && c >= 0 && c + m <= n);
                        claims[back]++;
                        for (int32_t i = c; i < c + m; i++)
                            seen[i]++;
                        if (!back) {
                            assert_int_equal(c, f); /* (contiguous from the front) */
                            /* within its share while any of it was left; with
                             * ph__tasks_claim_share all that is left of it */
                            if (f < mid) assert_true(c + m <= mid);
                            if (f < mid && whole) assert_int_equal(c + m, mid < n - b ? mid : n - b);
                            f += m;
                        } else {
                            assert_int_equal(c + m, n - b);
                            if (n - b > mid) assert_true(c >= mid);
                            if (n - b > mid && whole) assert_int_equal(c, mid > f ? mid : f);
                            b += m;
                        }
                    }
                    for (int32_t i = 0; i < n; i++)
                        assert_int_equal(seen[i], 1);
                    /* (in turn with equal shares: they meet at mid; with
                     * ph__tasks_claim_share in one claim each) */
                    if (whole && pattern == 0 && mid > 0 && mid < n) {
                        assert_int_equal(claims[0], 1);
                        assert_int_equal(claims[1], 1);
                    }
                    if (pattern == 0 && 2 * mid == n) assert_int_equal(f, mid);
                }
    /* ph__tasks_next: the items one by one, each once, the front's first
     * from 0 and the back's first from its share. */
    _Atomic uint64_t took;
    atomic_init(&took, 0);
    ph__cursor c0 = {0, 0}, c1 = {0, 0};
    int32_t seen[20] = {0};
    assert_int_equal(ph__tasks_next(&took, 20, 8, 0, 2, &c0), 0);
    const int32_t first_back = ph__tasks_next(&took, 20, 8, 1, 2, &c1);
    assert_true(first_back >= 8);
    seen[0]++;
    seen[first_back]++;
    for (int32_t i, k = 0; k < 40; k++)
        if ((i = ph__tasks_next(&took, 20, 8, k % 2, 2, k % 2 ? &c1 : &c0)) >= 0) seen[i]++;
    for (int32_t i = 0; i < 20; i++)
        assert_int_equal(seen[i], 1);
}

/* The unordered claimed passes (the fill, the store: solver_wide.c,
 * claim_free) claimed segment by segment from both ends up to each
 * segment's split, as the ordered ones, so that a group's records stay
 * with the worker that sweeps them. pyramid40 at two threads with the
 * test's record of which worker ran each group of the last unordered pass
 * (w->wfree_worker; each worker makes its first claim while the other waits):
 * the parallel segments split at one height (every group before a split
 * lower than every group at a split) with some half of their batches
 * before the splits; the other worker's first claim was in the first
 * segment (claimed over all groups at once it was the last segment's
 * last piece); in each segment worker 0's groups come before the
 * other's. */
static void test_free_split(void **state) {
    (void)state;
    ph_world_id id = make_world("pyramid40", 2, 0, 1);
    ph__world *x = ph__world_get(id);
    uint8_t *own = malloc(1 << 16);
    assert_non_null(own);
    int checked = 0;
    for (int k = 0; k < 8; k++) {
        memset(own, 0xff, 1 << 16);
        x->wfree_worker = own;
        assert_int_equal(ph_world_step(id), PH_OK);
        x->wfree_worker = NULL;
        if (!x->wsched_ok || x->wsched_tiles || x->task_workers < 2) continue;
        const int32_t nseg = x->wseg_count, *sg = x->wsegs, ng = x->wgroup_count;
        assert_true(ng < (1 << 16) && nseg >= 2);
        /* (the splits at one height: every group before a split below
         * every group at one; worker 0's share some half of the batches) */
        double below = -INFINITY, above = INFINITY;
        int32_t share = 0, all = 0;
        for (int32_t q = 0; q < nseg; q++) {
            const int32_t g0 = sg[4 * q], g1 = sg[4 * q + 1], split = sg[4 * q + 3], *gf = x->wgfirst;
            assert_true(split >= g0 && split <= g1);
            if (sg[4 * q + 2]) {
                for (int32_t g = g0; g < split; g++)
                    below = fmax(below, ph__wide_group_height(x, g));
                if (split < g1) above = fmin(above, ph__wide_group_height(x, split));
                share += gf[split] - gf[g0];
                all += gf[g1] - gf[g0];
            }
            int seen1 = 0;
            for (int32_t g = g0; g < g1; g++) {
                assert_true(own[g] <= 1);
                if (own[g] == 0) assert_false(seen1); /* (worker 0's before the other's) */
                seen1 |= own[g] == 1;
            }
        }
        if (!(below < above)) fail_msg("step %d: a group below a split at %g, one at a split at %g", k, below, above);
        if (!(10 * share >= 3 * all && 10 * share <= 7 * all))
            fail_msg("step %d: worker 0's share %d of %d batches", k, share, all);
        int32_t first1 = -1;
        for (int32_t g = 0; g < ng && first1 < 0; g++)
            if (own[g] == 1) first1 = g;
        if (first1 >= sg[1])
            fail_msg("step %d: the other worker's first group %d, after segment 0 [0, %d)", k, first1, sg[1]);
        assert_true(first1 >= 0);
        checked++;
    }
    print_message("steps checked: %d of 8\n", checked);
    assert_true(checked >= 6);
    free(own);
    ph_world_destroy(id);
}

/* ph__tasks_run_pieces_at: the pieces end at the cut and start again
 * there (worker 0's share exactly the items before it), every item in one
 * piece, no piece longer than its size or empty, each piece number once;
 * a cut outside (0, n) or one worker: ph__tasks_run_pieces's pieces. */
enum { AT_MAX = 600 };
typedef struct at_ctx {
    atomic_int seen[AT_MAX], piece_seen[AT_MAX], bad;
    int32_t cut, size, n;
    int split; /* (a cut in (0, n) and two workers) */
} at_ctx;

static void at_piece(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t piece) {
    (void)w;
    at_ctx *c = ctx;
    if (i1 <= i0 || i1 - i0 > c->size || i0 < 0 || i1 > c->n || piece < 0 || piece >= AT_MAX)
        atomic_fetch_add(&c->bad, 1);
    else if (c->split && i0 < c->cut && i1 > c->cut)
        atomic_fetch_add(&c->bad, 1); /* (across the cut) */
    else if (!c->split && i0 != piece * c->size)
        atomic_fetch_add(&c->bad, 1); /* (without a cut: piece k starts at k * size) */
    if (piece >= 0 && piece < AT_MAX) atomic_fetch_add(&c->piece_seen[piece], 1);
    for (int32_t i = i0; i < i1 && i >= 0 && i < AT_MAX; i++)
        atomic_fetch_add(&c->seen[i], 1);
}

static void test_pieces_at(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        ph_world_id id = make_world("pyramid20", threads, 0, 1);
        assert_int_equal(ph_world_step(id), PH_OK); /* (the pool started) */
        ph__world *x = ph__world_get(id);
        assert_int_equal(x->task_workers, threads);
        const int32_t ns[] = {1, 5, 127, 128, 129, 300, 555}, sizes[] = {1, 7, 128};
        for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
            for (size_t b = 0; b < sizeof sizes / sizeof *sizes; b++) {
                const int32_t n = ns[a], size = sizes[b];
                if (n / size + 2 >= AT_MAX) continue;
                const int32_t cuts[] = {-1, 0, 1, size - 1, size, size + 1, n / 2, n - 1, n, n + 5};
                for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
                    static at_ctx c;
                    memset(&c, 0, sizeof c);
                    c.cut = cuts[k];
                    c.size = size;
                    c.n = n;
                    c.split = c.cut > 0 && c.cut < n && threads > 1;
                    ph__tasks_run_pieces_at(x, n, size, c.cut, at_piece, &c);
                    assert_int_equal(atomic_load(&c.bad), 0);
                    for (int32_t i = 0; i < n; i++)
                        assert_int_equal(atomic_load(&c.seen[i]), 1);
                    const int32_t np = c.split ? ph__tasks_pieces(c.cut, size) + ph__tasks_pieces(n - c.cut, size)
                                               : ph__tasks_pieces(n, size);
                    for (int32_t q = 0; q < AT_MAX; q++)
                        assert_int_equal(atomic_load(&c.piece_seen[q]), q < np);
                }
            }
        ph_world_destroy(id);
    }
}

static int cmp_int(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The sweep's boundary: pyramid40's solver bodies touched by both
 * workers' shares of the level passes (worker 1's: each split segment's
 * groups from its split), and the hand-offs of one sweep (a body's
 * records moving to the other core, counted over the segments in order
 * and around to the next sweep). The split at one height leaves about one
 * row of the wall on both sides (row 11 of 40: 28 boxes, and 9 of row
 * 12); before the lone small colour was split too, 54 bodies and 142
 * hand-offs a sweep (docs/profile.md, "A twentieth pass"). */
static void test_boundary(void **state) {
    (void)state;
    ph_world_id id = make_world("pyramid40", 2, 0, 1);
    ph__world *x = ph__world_get(id);
    int steps = 0, lone = 0, boths[60];
    int64_t hand = 0;
    for (int k = 0; k < 60; k++) {
        assert_int_equal(ph_world_step(id), PH_OK);
        if (!x->wsched_ok || x->wsched_tiles || x->wgdep_groups == 0) continue;
        const int32_t nsb = x->sbody_count, nseg = x->wseg_count, *sg = x->wsegs;
        uint8_t *seen = calloc((size_t)nsb, 1);
        int8_t *last = malloc((size_t)nsb);
        assert_non_null(seen);
        assert_non_null(last);
        memset(last, -1, (size_t)nsb);
        for (int sweep = 0; sweep < 2; sweep++)
            for (int32_t q = 0; q < nseg; q++) {
                if (sweep == 0 && sg[4 * q + 2] == 2 && sg[4 * q + 3] > sg[4 * q] && sg[4 * q + 3] < sg[4 * q + 1])
                    lone++;
                for (int32_t g = sg[4 * q]; g < sg[4 * q + 1]; g++) {
                    const int8_t wk = (int8_t)(sg[4 * q + 2] && g >= sg[4 * q + 3]);
                    const ph__wbatch *wb = &x->wbatches[x->wgfirst[g]];
                    for (int j = 0; j < PH_LANES; j++) {
                        if (wb->point[j] < 0) continue;
                        const int32_t bd[2] = {wb->ia[j], wb->ib[j]};
                        for (int t = 0; t < 2; t++) {
                            if (bd[t] <= 0) continue;
                            if (sweep == 1 && last[bd[t]] >= 0 && last[bd[t]] != wk) hand++;
                            last[bd[t]] = wk;
                            seen[bd[t]] |= (uint8_t)(1 << wk);
                        }
                    }
                }
            }
        int both = 0;
        for (int32_t b = 1; b < nsb; b++)
            both += seen[b] == 3;
        boths[steps] = both;
        free(seen);
        free(last);
        steps++;
    }
    assert_true(steps >= 50);
    qsort(boths, (size_t)steps, sizeof *boths, cmp_int);
    const int both = boths[steps / 2];
    print_message("%d steps: %d bodies on both sides (median; %d-%d), %.1f hand-offs a sweep; %d lone small levels "
                  "split\n",
                  steps, both, boths[0], boths[steps - 1], (double)hand / steps, lone);
    assert_true(lone >= steps * 3 / 4); /* (the last colour, most steps) */
    assert_true(both >= 28 && both <= 46);
    assert_true(hand <= 128 * (int64_t)steps);
}

/* Where the passes over bodies and the layout split pyramid40 at two
 * threads (solver_wide.c, body_cut and run_cuts): the bodies' split
 * (w->wbody_cut) is the one with the fewest bodies on the wrong side of it
 * (a body's side: the worker that integrates it, the owner of its last
 * group); a layout made by two workers splits each wide level at the
 * group where the schedule made after it splits that level, so each
 * worker writes the batches it will fill, sweep and store. */
static void test_cuts(void **state) {
    (void)state;
    ph_world_id id = make_world("pyramid40", 2, 0, 1);
    ph__world *x = ph__world_get(id);
    enum { CAP = 4096 };
    int32_t *runs = malloc(2 * CAP * sizeof *runs);
    assert_non_null(runs);
    x->wcut_test = runs;
    x->wcut_cap = CAP;
    int body_steps = 0, layout_steps = 0, worst = 0;
    int32_t off_groups = 0, wide_levels = 0;
    for (int k = 0; k < 60; k++) {
        assert_int_equal(ph_world_step(id), PH_OK);
        if (!x->wsched_ok || x->wsched_tiles || !x->wintg || x->wgdep_groups == 0) continue;
        const int32_t nsb = x->sbody_count, ng = x->wgroup_count, nseg = x->wseg_count, *sg = x->wsegs;
        assert_int_equal(x->wint_bodies, nsb);
        /* each body's side */
        int8_t *side = calloc((size_t)nsb, 1);
        assert_non_null(side);
        const int32_t *gi = x->wintg, *list = x->wint + ng + 3;
        for (int32_t q = 0; q < nseg; q++)
            for (int32_t g = sg[4 * q]; g < sg[4 * q + 1]; g++)
                for (int32_t i = gi[g]; i < gi[g + 1]; i++)
                    side[list[i]] = g >= sg[4 * q + 3];
        int32_t best = INT32_MAX, at = -1;
        for (int32_t c = 0; c < nsb; c++) { /* (items [0, c): solver bodies 1 .. c) */
            int32_t wrong = 0;
            for (int32_t s = 1; s < nsb; s++)
                wrong += (s - 1 < c) == side[s];
            if (wrong < best) best = wrong;
            if (c == x->wbody_cut) at = wrong;
        }
        free(side);
        assert_true(x->wbody_cut > 0 && x->wbody_cut < nsb - 1);
        if (at != best)
            fail_msg("step %d: %d bodies on the wrong side of the cut %d, %d at the best", k, at, x->wbody_cut, best);
        if (best > worst) worst = best;
        body_steps++;
        if (x->wcut_runs == 0) continue;
        /* the layout's cut in each wide level against the schedule's split */
        layout_steps++;
        for (int32_t q = 0; q < nseg; q++) {
            if (!sg[4 * q + 2]) continue;
            int32_t r = 0;
            while (r < x->wcut_runs && runs[2 * r] != sg[4 * q])
                r++;
            assert_true(r < x->wcut_runs); /* (a wide level is a run of its own) */
            const int32_t d = runs[2 * r + 1] - sg[4 * q + 3];
            off_groups += d < 0 ? -d : d;
            wide_levels++;
        }
    }
    x->wcut_test = NULL;
    free(runs);
    print_message("steps: %d with the bodies' cut (at most %d bodies on the wrong side), %d with a layout cut; %d "
                  "groups off the splits in %d wide levels\n",
                  body_steps, worst, layout_steps, off_groups, wide_levels);
    assert_true(body_steps >= 50);
    assert_true(layout_steps >= 5);
    assert_true(wide_levels >= 5 * layout_steps);
    assert_int_equal(off_groups, 0);
    ph_world_destroy(id);
}

/* The pass profile (ph_world_set_pass_profile): off, nothing; on, the
 * level passes by kind at one thread (pyramid40: 8 sweeps with the
 * refresh a step, on the stepping thread alone: busy = wall); at two
 * threads the shared passes too, each worker's time inside a pass within
 * the pass's time on the stepping thread (both on one clock, the worker's
 * nested in the pass); the errors of the getter. */
static const ph_pass_time *find_pass(const ph_pass_time *t, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

static void test_pass_profile(void **state) {
    (void)state;
    enum { MAX = 48, STEPS = 10 };
    static ph_pass_time t[MAX];
    for (int threads = 1; threads <= 2; threads++) {
        ph_world_id id = make_world("pyramid40", threads, 0, 1);
        assert_int_equal(ph_world_step(id), PH_OK);
        assert_int_equal(ph_world_get_pass_profile(id, t, MAX), 0);
        assert_int_equal(ph_world_set_pass_profile(id, 1), PH_OK);
        for (int k = 0; k < STEPS; k++)
            assert_int_equal(ph_world_step(id), PH_OK);
        const int n = ph_world_get_pass_profile(id, t, MAX);
        assert_true(n >= 4 && n <= MAX);
        const ph_pass_time *sr = find_pass(t, n, "claim_pass sweep_refresh");
        assert_non_null(sr);
        assert_int_equal(sr->calls, 8 * STEPS);
        assert_non_null(find_pass(t, n, "claim_pass fill"));
        assert_non_null(find_pass(t, n, "claim_pass store"));
        double busy = 0;
        for (int i = 0; i < n; i++) {
            assert_true(t[i].calls > 0 && t[i].wall_ms > 0);
            for (int w = 0; w < PH_PASS_WORKERS; w++) {
                assert_true(t[i].busy_ms[w] >= 0 && t[i].busy_ms[w] <= t[i].wall_ms);
                if (w >= threads) assert_true(t[i].busy_ms[w] == 0);
            }
            if (threads == 1 && strncmp(t[i].name, "claim_pass", 10) == 0) /* (timed once: busy is wall) */
                assert_true(t[i].busy_ms[0] == t[i].wall_ms);
            busy += t[i].busy_ms[threads - 1];
        }
        if (threads == 2) {
            assert_non_null(find_pass(t, n, "collide_piece"));
            assert_true(busy > 0); /* (the other worker ran) */
        }
        print_message("threads %d: %d passes, the sweeps with the refresh %.3f ms in %lld calls\n", threads, n,
                      sr->wall_ms, (long long)sr->calls);
        /* (only the first max copied; the count all the same) */
        assert_int_equal(ph_world_get_pass_profile(id, t, 1), n);
        assert_int_equal(ph_world_get_pass_profile(id, NULL, 0), n);
        assert_int_equal(ph_world_get_pass_profile(id, NULL, 1), PH_ERR_INVALID_ARGUMENT);
        assert_int_equal(ph_world_get_pass_profile(id, t, -1), PH_ERR_INVALID_ARGUMENT);
        /* on again: cleared */
        assert_int_equal(ph_world_set_pass_profile(id, 1), PH_OK);
        assert_int_equal(ph_world_get_pass_profile(id, t, MAX), 0);
        assert_int_equal(ph_world_step(id), PH_OK);
        assert_int_equal(find_pass(t, ph_world_get_pass_profile(id, t, MAX), "claim_pass sweep_refresh")->calls, 8);
        assert_int_equal(ph_world_set_pass_profile(id, 0), PH_OK);
        assert_int_equal(ph_world_get_pass_profile(id, t, MAX), 0);
        ph_world_destroy(id);
        assert_int_equal(ph_world_set_pass_profile(id, 1), PH_ERR_INVALID_HANDLE);
        assert_int_equal(ph_world_get_pass_profile(id, t, MAX), PH_ERR_INVALID_HANDLE);
    }
}

/* The pool's pace between steps (tasks.c, LINGER_NS): a step begun right
 * after the last one ended leaves the workers spinning for a while after
 * it (a deadline), one begun 20 ms after the last one leaves them to
 * sleep (no deadline). Back to back here means a loop of steps with
 * nothing between them; a test thread the machine holds up between two
 * steps for longer than LINGER_NS misses one, so of ten such steps at
 * least one must have left a deadline (all of them on an idle machine). */
static void test_linger(void **state) {
    (void)state;
    ph_world_id w = make_world("pyramid40", 2, 0, 1);
    const ph__world *x = ph__world_get(w);
    int set = 0;
    for (int k = 0; k < 12; k++) {
        assert_int_equal(ph_world_step(w), PH_OK);
        if (k >= 2) set += ph__tasks_linger_until(x) != 0;
    }
    print_message("back to back: %d of 10 steps left the workers spinning; %lld sleeps in 12 steps\n", set,
                  (long long)ph__tasks_sleeps(x));
    assert_true(set >= 1);
    for (int k = 0; k < 3; k++) {
        const struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
        assert_int_equal(ph_world_step(w), PH_OK);
        assert_true(ph__tasks_linger_until(x) == 0);
    }
    /* (Back to back again: the second step after the pause lingers.) */
    set = 0;
    for (int k = 0; k < 6; k++) {
        assert_int_equal(ph_world_step(w), PH_OK);
        if (k >= 1) set += ph__tasks_linger_until(x) != 0;
    }
    assert_true(set >= 1);
    ph_world_destroy(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setting),
        cmocka_unit_test(test_grid4000),
        cmocka_unit_test(test_pyramid40),
        cmocka_unit_test(test_joints),
        cmocka_unit_test(test_sleep_on),
        cmocka_unit_test(test_row_mode),
        cmocka_unit_test(test_host_runner),
        cmocka_unit_test(test_grid16000),
        cmocka_unit_test(test_tiles_shared),
        cmocka_unit_test(test_envelope_fault),
        cmocka_unit_test(test_pyramid40_coloured),
        cmocka_unit_test(test_fused_free),
        cmocka_unit_test(test_fused_mixed),
        cmocka_unit_test(test_events_split),
        cmocka_unit_test(test_pieces_fine),
        cmocka_unit_test(test_keys_split),
        cmocka_unit_test(test_linger),
        cmocka_unit_test(test_claim_to),
        cmocka_unit_test(test_free_split),
        cmocka_unit_test(test_pieces_at),
        cmocka_unit_test(test_cuts),
        cmocka_unit_test(test_boundary),
        cmocka_unit_test(test_pass_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
