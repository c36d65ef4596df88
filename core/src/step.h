/*
 * step.h — the step's own records (step.c): what a failed step restores, the
 * forces' share of a substep, and the integration of solver bodies
 * (step.c, integrate_wide.c).
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_STEP_H
#define PHYSD_STEP_H

#include <stdint.h>

#include "physd/ph_core.h"

typedef struct ph__world ph__world;

/* The forces' share of a solver body's substep (step.c). */
typedef struct ph__sforce {
    ph_vec3 dv; /* h (g gravity_scale + force / m) */
    int plain;  /* 1: dv is all the forces do */
} ph__sforce;

/* A body's pose before a step, and its sleep state (step.c's restore). */
typedef struct ph__saved_pose {
    ph_vec3 p;
    ph_quat q;
} ph__saved_pose;

typedef struct ph__saved_sleep {
    double rest_time;
    int32_t asleep;
} ph__saved_sleep;

/* step.c's integration of solver body s (and with next > 0 the start of
 * the next substep), and integrate_wide.c's of all of them, four at a time
 * where they are plain and isotropic: the same numbers. */
void ph__integrate_body(ph__world *w, int32_t s, double h, int dv, int next, double wf);
void ph__wide_integrate(ph__world *w, double h, int dv, int next, double wf);

#endif /* PHYSD_STEP_H */
