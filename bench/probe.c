/* probe.c — see probe.h. */
#define _GNU_SOURCE /* (sched_getcpu, CPU_SET, pthread_setaffinity_np) */
#include "probe.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static _Alignas(64) atomic_int flag; /* the line that moves: 2i + 1 asked, 2i + 2 answered */

/* Waits until flag is v: spinning, and yielding the core after many polls
 * (a partner descheduled, or one core only: a round trip then takes a
 * context switch, not a wait of a time slice). */
static void wait_for(int v) {
    for (unsigned i = 1; atomic_load_explicit(&flag, memory_order_acquire) != v; i++)
        if (i % 4096 == 0) sched_yield();
}

typedef struct partner_arg {
    int n;   /* round trips to answer */
    int cpu; /* the prober's core, which the partner keeps off (-1: not known) */
} partner_arg;

/* The partner: on any core but the prober's, answers n round trips. */
static void *answer(void *arg) {
    const partner_arg *a = arg;
    const int n = a->n;
    cpu_set_t set;
    if (a->cpu >= 0 && a->cpu < CPU_SETSIZE && sched_getaffinity(0, sizeof set, &set) == 0) {
        /* (the cores this process may use, but the prober's) */
        CPU_CLR(a->cpu, &set);
        if (CPU_COUNT(&set) > 0) (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* (a hint) */
    }
    for (int i = 0; i < n; i++) {
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

int probe_cores_ok(void) {
    /* (the cores this process may run on: a container's cpuset may allow
     * fewer than are online) */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return sysconf(_SC_NPROCESSORS_ONLN) >= 2;
    return CPU_COUNT(&set) >= 2;
}

double probe_round_trip_ns(int warm, int trips) {
    const int n = warm + trips;
    partner_arg a = {n, sched_getcpu()};
    atomic_store_explicit(&flag, 0, memory_order_release);
    pthread_t partner;
    if (pthread_create(&partner, NULL, answer, &a) != 0) return -1;
    double t0 = now_ns();
    for (int k = 0; k < n; k++) {
        if (k == warm) t0 = now_ns();
        atomic_store_explicit(&flag, 2 * k + 1, memory_order_release);
        wait_for(2 * k + 2);
    }
    pthread_join(partner, NULL);
    return trips > 0 ? (now_ns() - t0) / trips : 0;
}
