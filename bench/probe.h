/* probe.h — how far apart the machine's two cores are, as the round trip of
 * one cache line between two threads: physd-pingpong's measurement, and
 * physd-bench --interleave's before each round of blocks (block_rt_ns).
 *
 * Each probe starts a partner thread that keeps off the prober's core
 * (its affinity: every other core; a thread woken or started beside the
 * prober was often put on the prober's own core, where a round trip is a
 * context switch, some 4 µs), answers the probe's round trips and ends; a
 * probe's first `warm` round trips (the line becoming shared) are not
 * timed. The prober itself is not pinned. On a VM the
 * host may place two vCPUs on cores that share a cache (tens of ns) or not
 * (hundreds): a two-thread step's speed-up depends on it as much as on
 * physd (docs/profile.md, "After the 21st session's merges").
 *
 * Failure modes: probe_cores_ok says 0 when the process may run on fewer
 * than two cores (its affinity; then no probe means anything); a probe whose
 * partner thread cannot start returns -1. Not thread safe: one caller. */
#ifndef PHYSD_BENCH_PROBE_H
#define PHYSD_BENCH_PROBE_H

/* 1 when the process may run on two cores or more (the probe means something). */
int probe_cores_ok(void);
/* The mean round trip of `trips` timed ones after `warm` untimed (ns; -1
 * when no thread starts). */
double probe_round_trip_ns(int warm, int trips);

#endif
