/* physd-pingpong: how far apart the machine's two cores are, as the round
 * trip of one cache line between two threads (ns, the median of 9 runs of
 * 20 000 round trips, each after 2 000 untimed ones, one partner thread
 * for all). On a VM the host may place two vCPUs on cores that share a
 * cache (tens of ns) or not (hundreds): a two-thread step's speed-up
 * depends on it as much as on physd (docs/profile.md, "After the 21st
 * session's merges"), so bench/rounds.sh records it beside each run.
 * Prints one JSON line: {"probe":"pingpong","round_trip_ns":N}, N null
 * with fewer than two cores online. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define TRIPS 20000
#define RUNS 9
#define WARM 2000

static _Alignas(64) atomic_int flag;

/* Waits until flag is v: spinning, and yielding the core after many polls
 * (a partner descheduled, or one core only: a round trip then takes a
 * context switch, not a wait of a time slice). */
static void wait_for(int v) {
    for (unsigned i = 1; atomic_load_explicit(&flag, memory_order_acquire) != v; i++)
        if (i % 4096 == 0) sched_yield();
}

/* The partner: answers every round trip of the whole (the warm-ups' too). */
static void *answer(void *arg) {
    (void)arg;
    for (int i = 0; i < RUNS * (WARM + TRIPS); i++) {
        wait_for(2 * i + 1);
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
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) { /* (no two cores to be near or far) */
        printf("{\"probe\":\"pingpong\",\"round_trip_ns\":null}\n");
        return 0;
    }
    double ns[RUNS];
    pthread_t t;
    if (pthread_create(&t, NULL, answer, NULL) != 0) {
        fprintf(stderr, "physd-pingpong: no thread\n");
        return 1;
    }
    int i = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = 0;
        for (int k = 0; k < WARM + TRIPS; k++, i++) {
            if (k == WARM) t0 = now_ns(); /* (the warm-up untimed: both threads running, the line shared) */
            atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
            wait_for(2 * i + 2);
        }
        ns[r] = (now_ns() - t0) / TRIPS;
    }
    pthread_join(t, NULL);
    qsort(ns, RUNS, sizeof ns[0], cmp);
    printf("{\"probe\":\"pingpong\",\"round_trip_ns\":%.0f}\n", ns[RUNS / 2]);
    return 0;
}
