/* physd-pingpong: how far apart the machine's two cores are, as the round
 * trip of one cache line between two threads (ns, median of 9 runs of
 * 20 000 round trips). On a VM the host may place two vCPUs on cores that
 * share a cache (tens of ns) or not (hundreds): a two-thread step's speed-up
 * depends on it as much as on physd (docs/profile.md, "After the 21st
 * session's merges"), so bench/rounds.sh records it beside each run.
 * Prints one JSON line: {"probe":"pingpong","round_trip_ns":N}. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TRIPS 20000
#define RUNS 9

static _Alignas(64) atomic_int flag;

static void *answer(void *arg) {
    (void)arg;
    for (int i = 0; i < TRIPS; i++) {
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    double ns[RUNS];
    for (int r = 0; r < RUNS; r++) {
        atomic_store(&flag, 0);
        pthread_t t;
        if (pthread_create(&t, NULL, answer, NULL) != 0) {
            fprintf(stderr, "physd-pingpong: no thread\n");
            return 1;
        }
        const double t0 = now_ns();
        for (int i = 0; i < TRIPS; i++) {
            atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2) {
            }
        }
        ns[r] = (now_ns() - t0) / TRIPS;
        pthread_join(t, NULL);
    }
    qsort(ns, RUNS, sizeof ns[0], cmp);
    printf("{\"probe\":\"pingpong\",\"round_trip_ns\":%.0f}\n", ns[RUNS / 2]);
    return 0;
}
