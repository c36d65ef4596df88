/*
 * run.h — one benchmark run: one engine, one scene description, one
 * configuration; the figures are measured by the harness identically for
 * every engine and printed as one JSON line.
 */
#ifndef PHYSD_BENCH_RUN_H
#define PHYSD_BENCH_RUN_H

#include <stdio.h>

#include "engine.h"
#include "scene_desc.h"

typedef struct run_result {
    int ok;     /* 0 when the engine could not be created */
    int bodies; /* dynamic bodies */
    int steps;
    double ms_median, ms_mean, ms_min, ms_max, total_s;
    double cpu_ms_median;     /* median CPU time of the calling thread in the step call (a shared machine's
                                 descheduling left out) */
    double drift_max_m;       /* max horizontal distance of a dynamic body from its start, at the end */
    double top_loss_m;        /* start z - end z of the initially highest dynamic body */
    double penetration_max_m; /* engine-reported deepest contact of the last step */
    int contacts_last;        /* engine-reported contact points of the last step */
    int below_ground;         /* dynamic bodies with centre z < 0 at the end */
    double joint_error_max_m; /* max over the run and the joints of the anchor distance (NaN: no joints) */
    double joint_error_final_m;
    double time_to_sleep_s;  /* sleep mode: the first step end with every dynamic body asleep, in
                                simulated seconds (NaN: never, or no sleep mode) */
    int awake_last;          /* sleep mode: dynamic bodies awake after the last step (-1: not known) */
    double asleep_us_median; /* sleep mode: median wall time of the steps that began with every dynamic
                                body asleep, microseconds (NaN: none) */
    int nan;                 /* a pose became non-finite */
    int nan_step;            /* first step (1-based) with a non-finite pose, 0 if none */
    engine_extra extra;
    char settings[1024]; /* engine's describe() output */
    char passes[6144];   /* engine's pass_profile() output ("": none) */
    /* Interleaved runs (physd-bench --interleave K): the run was stepped in
     * blocks of K steps in turn with the other runs of its group; the median
     * wall and CPU ms of each block's steps, block by block (NULL and 0
     * otherwise). A block of one run and the same block of another ran
     * within seconds of each other, so their ratio is paired. */
    int interleave, group, blocks;
    double *block_ms, *block_cpu_ms;
    /* With block_rt_ns (not owned: the group's), each block's round of
     * blocks began with a probe of the two cores' distance (probe.h), ns. */
    const double *block_rt_ns;
} run_result;

/* A run in progress (stepped in blocks). */
typedef struct run_state run_state;

/* Creates the engine from d and cfg, steps it `steps` times timing each step
 * call with CLOCK_MONOTONIC, and fills r. Returns 0, or -1 with a message in
 * err when the engine could not be created. */
int run_engine(const engine_vtable *ev, const scene_desc *d, const engine_config *cfg, int steps, run_result *r,
               char *err, size_t errlen);

/* The same run in three parts: run_begin creates the engine and reads the
 * start poses (NULL with a message in err when it cannot be created);
 * run_block steps it up to `count` more steps, timing each, and records the
 * block's medians (returns the steps made: 0 once all `steps` are done);
 * run_finish computes the end figures into out, destroys the engine and frees
 * st (with keep_blocks, out takes the block arrays: run_result_free). */
run_state *run_begin(const engine_vtable *ev, const scene_desc *d, const engine_config *cfg, int steps, char *err,
                     size_t errlen);
int run_block(run_state *st, int count);
void run_finish(run_state *st, run_result *out, int keep_blocks);
void run_result_free(run_result *r);

/* Prints r as one JSON line (newline-terminated) on out. */
void run_print_json(FILE *out, const engine_vtable *ev, const scene_desc *d, const engine_config *cfg,
                    const run_result *r, int repeat_index);

#endif /* PHYSD_BENCH_RUN_H */
