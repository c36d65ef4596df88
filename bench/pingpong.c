/* physd-pingpong: how far apart the machine's two cores are, as the round
 * trip of one cache line between two threads (ns, the median of 9 runs of
 * 20 000 round trips, each after 2 000 untimed ones, each with a partner
 * thread of its own: probe.c). On a VM the host may place two vCPUs on cores that share a
 * cache (tens of ns) or not (hundreds): a two-thread step's speed-up
 * depends on it as much as on physd (docs/profile.md, "After the 21st
 * session's merges"), so bench/rounds.sh records it beside each run.
 * Prints one JSON line: {"probe":"pingpong","round_trip_ns":N}, N null
 * when the process may run on fewer than two cores or a partner thread
 * cannot start. */
#include <stdio.h>
#include <stdlib.h>

#include "probe.h"

#define TRIPS 20000
#define RUNS 9
#define WARM 2000

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    if (!probe_cores_ok()) { /* (no two cores to be near or far) */
        printf("{\"probe\":\"pingpong\",\"round_trip_ns\":null}\n");
        return 0;
    }
    double ns[RUNS];
    for (int r = 0; r < RUNS; r++) {
        ns[r] = probe_round_trip_ns(WARM, TRIPS);
        if (ns[r] < 0) { /* (no partner thread: no distance to print) */
            printf("{\"probe\":\"pingpong\",\"round_trip_ns\":null}\n");
            return 0;
        }
    }
    qsort(ns, RUNS, sizeof ns[0], cmp);
    printf("{\"probe\":\"pingpong\",\"round_trip_ns\":%.0f}\n", ns[RUNS / 2]);
    return 0;
}
