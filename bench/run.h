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
} run_result;

/* Creates the engine from d and cfg, steps it `steps` times timing each step
 * call with CLOCK_MONOTONIC, and fills r. Returns 0, or -1 with a message in
 * err when the engine could not be created. */
int run_engine(const engine_vtable *ev, const scene_desc *d, const engine_config *cfg, int steps, run_result *r,
               char *err, size_t errlen);

/* Prints r as one JSON line (newline-terminated) on out. */
void run_print_json(FILE *out, const engine_vtable *ev, const scene_desc *d, const engine_config *cfg,
                    const run_result *r, int repeat_index);

#endif /* PHYSD_BENCH_RUN_H */
