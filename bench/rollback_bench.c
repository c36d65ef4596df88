/*
 * rollback_bench.c — physd-rollback-bench: what a world's history and a
 * rollback cost in the core (docs/durability.md, "History and rollback").
 *
 * Per scene (stack20, pyramid20, grid1000 by default; others by name on
 * the command line), with the server's world settings (sleeping on): the
 * world is stepped 40 ticks keeping a snapshot after each step, as a world
 * with history_ticks >= 32 does. Then, in interleaved rounds, a rollback of
 * N ticks (N = 1, 5, 10, 32) is timed as the server does it: restore the
 * snapshot of tick P - N and re-simulate N ticks, taking the snapshot of
 * each (the new history). One step and one snapshot are timed in the same
 * rounds for scale (on the world itself, which goes on stepping). One
 * JSON line per scene and N with the median over the rounds; --rounds R
 * (default 7); --no-sleep: sleeping off (every body awake, the worst case).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "physd/ph_snapshot.h"

#define WARM 40
static const int Ns[] = {1, 5, 10, 32};
#define NN (int)(sizeof Ns / sizeof Ns[0])

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Restores snap and re-simulates n ticks keeping their snapshots; ms. */
static double rollback(const uint8_t *snap, size_t len, int n) {
    const double t0 = now_ms();
    ph_world_id w;
    if (ph_world_restore(snap, len, NULL, &w) != PH_OK) abort();
    for (int k = 0; k < n; k++) {
        uint8_t *s;
        size_t l;
        if (ph_world_step(w) != PH_OK || ph_world_snapshot(w, &s, &l) != PH_OK) abort();
        ph_snapshot_free(s);
    }
    const double dt = now_ms() - t0;
    ph_world_destroy(w);
    return dt;
}

static int sleep_on = 1;

static void bench_scene(const char *name, int rounds) {
    ph_world_def def = ph_default_world_def();
    def.settings.sleep = sleep_on;
    int err = 0;
    ph_world_id w = ph_world_create(&def, &err);
    if (!w.index1 || ph_scene_build(w, name) != PH_OK) {
        fprintf(stderr, "cannot build %s\n", name);
        exit(1);
    }
    uint8_t *snaps[WARM + 1];
    size_t lens[WARM + 1];
    if (ph_world_snapshot(w, &snaps[0], &lens[0]) != PH_OK) abort();
    for (int t = 1; t <= WARM; t++)
        if (ph_world_step(w) != PH_OK || ph_world_snapshot(w, &snaps[t], &lens[t]) != PH_OK) abort();
    double *rb = calloc((size_t)(NN * rounds), sizeof *rb), *st = calloc((size_t)rounds, sizeof *st),
           *sn = calloc((size_t)rounds, sizeof *sn);
    size_t hist_bytes = 0;
    for (int t = WARM - 32; t <= WARM; t++)
        hist_bytes += lens[t];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < NN; i++) {
            const int k = (i + r) % NN; /* interleaved, a different order each round */
            rb[k * rounds + r] = rollback(snaps[WARM - Ns[k]], lens[WARM - Ns[k]], Ns[k]);
        }
        /* One step and one snapshot of the world itself, past tick WARM
         * (its steady state, not a first step after a restore). */
        double t0 = now_ms();
        if (ph_world_step(w) != PH_OK) abort();
        st[r] = now_ms() - t0;
        uint8_t *s;
        size_t l;
        t0 = now_ms();
        if (ph_world_snapshot(w, &s, &l) != PH_OK) abort();
        sn[r] = now_ms() - t0;
        ph_snapshot_free(s);
    }
    const double step_ms = median(st, rounds), snap_ms = median(sn, rounds);
    for (int k = 0; k < NN; k++) {
        const double ms = median(&rb[k * rounds], rounds);
        printf("{\"bench\":\"rollback\",\"scene\":\"%s\",\"sleep\":%d,\"bodies\":%d,\"ticks\":%d,\"rounds\":%d,\"resim_"
               "ms\":%.4f,"
               "\"per_tick_ms\":%.4f,\"step_ms\":%.4f,\"snapshot_ms\":%.4f,\"snapshot_bytes\":%zu,"
               "\"history32_bytes\":%zu}\n",
               name, sleep_on, ph_world_body_count(w), Ns[k], rounds, ms, ms / Ns[k], step_ms, snap_ms, lens[WARM],
               hist_bytes);
    }
    fflush(stdout);
    for (int t = 0; t <= WARM; t++)
        ph_snapshot_free(snaps[t]);
    free(rb);
    free(st);
    free(sn);
    ph_world_destroy(w);
}

int main(int argc, char **argv) {
    int rounds = 7, named = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-sleep")) {
            sleep_on = 0;
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
            if (rounds < 1 || rounds > 1000) rounds = 7;
        } else {
            bench_scene(argv[i], rounds);
            named = 1;
        }
    }
    if (!named) {
        bench_scene("stack20", rounds);
        bench_scene("pyramid20", rounds);
        bench_scene("grid1000", rounds);
    }
    return 0;
}
