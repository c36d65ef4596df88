/*
 * step.h — the step's own records (step.c): the substep's plan, what a
 * failed step restores, the forces' share of a substep, and the
 * integration of solver bodies (step.c, integrate_wide.c).
 *
 * The plan. What a substep does is decided in one place, by the pure
 * function ph__plan_substep (step_plan.h), from the settings, the substep's
 * place in the step (k of n) and the few facts known only while stepping
 * (ph__facts); every stage takes the plan and reads no step-control flag
 * from the world. The truth table (native = PGS, DEFAULT order,
 * vector_solver, no capture, and contact_block or neither record_merits nor
 * a tolerance; collide = k == 0 or collide_substeps; last = k == n - 1;
 * "-" = any):
 *
 *   collide  last  restitutive          -> collide
 *   1        -     -                    -> FULL
 *   0        1     -                    -> MOVE_ALL
 *   0        0     1                    -> MOVE_RESTITUTIVE
 *   0        0     0                    -> NONE
 *
 *   collide  native  batches  last  warm          -> rows
 *   1        1       -        -     -             -> NATIVE_BUILD
 *   1        0       -        -     -             -> BUILD
 *   0        1       1        1     not FORCES    -> REFRESH_FAST
 *   0        1       1        1     WITH_FORCES   -> REFRESH_IN_SWEEP_B
 *   0        1       1        0     -             -> REFRESH_IN_SWEEP
 *   0        -       1        -     -  (else)     -> REFRESH_COPY
 *   0        -       0        -     -  (else)     -> REFRESH
 *
 *   collide  contacts  native  batches  last  joints  -> warm
 *   1 or contacts = 0, batches = 1                    -> BATCHES
 *   1 or contacts = 0, batches = 0                    -> ROWS
 *   0        1         1       1        0     -       -> WITH_FORCES
 *   0        1         1       1        1     0       -> WITH_FORCES
 *   0        1         (else)                         -> BODIES
 *
 *   collide  started  restitutive  -> start
 *   0        1        -            -> FUSED (the last integration did it)
 *   (else)            1            -> BODIES_IMPACTS
 *   (else)            0            -> BODIES
 *
 *   method PGS, order DEFAULT or GRAVITY: batches, vector_solver, DEFAULT
 *   and (native or not contact_block) -> PGS_BATCHES, else PGS_ROWS;
 *   any other method or order -> FAMILY.
 *
 *   tolerance > 0, or record_merits in the last substep or off the
 *   native path -> SWEEP; else last -> FINAL; else capture ->
 *   B; else NONE (the rows' B is computed unless NONE). (The statistics
 *   keep the last substep's merits only.)
 *
 *   solve PGS_BATCHES: native and not last -> KEEP (the batches hold the
 *   impulses), else FROM_BATCHES; other solves -> FROM_ROWS.
 *
 *   last or collide_substeps -> next NONE; else restitutive or joint rows
 *   -> APART (the integration records dvc, the next substep starts on its
 *   own); else FUSED_WARM when the next substep's warm would be
 *   WITH_FORCES, else FUSED.
 *
 *   relax: contact_relax > 0, k % contact_relax == 0, not last and a PGS
 *   solve (not FAMILY) -> 1, else 0.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_STEP_H
#define PHYSD_STEP_H

#include <stdint.h>

#include "physd/ph_core.h"

typedef struct ph__world ph__world;

/* What a substep does to the contacts' geometry before its rows. */
typedef enum ph__collide_plan {
    PH_COLLIDE_NONE,             /* nothing: the points stay as collided */
    PH_COLLIDE_MOVE_RESTITUTIVE, /* the points of restitutive pairs moved (impacts read them) */
    PH_COLLIDE_MOVE_ALL,         /* every point moved (last substep: queries, events) */
    PH_COLLIDE_FULL              /* broadphase, narrowphase, events, islands */
} ph__collide_plan;

/* How the substep's solver bodies and forces are made. */
typedef enum ph__start_plan {
    PH_START_BODIES,         /* solver bodies and forces */
    PH_START_BODIES_IMPACTS, /* the same with Newton-Coulomb impacts between */
    PH_START_FUSED           /* already done by the last substep's integration */
} ph__start_plan;

/* Where the contact rows live. */
typedef enum ph__home_plan {
    PH_HOME_ROWS,   /* in rows[] (and, in the DEFAULT order, copied into the batches) */
    PH_HOME_BATCHES /* only in the batches (the native path) */
} ph__home_plan;

/* How the contact rows are made. */
typedef enum ph__rows_plan {
    PH_ROWS_NATIVE_BUILD,       /* the batches built straight from the manifolds */
    PH_ROWS_BUILD,              /* rows[] built (the batches from them in the DEFAULT order) */
    PH_ROWS_REFRESH_IN_SWEEP,   /* the batches refreshed within the first sweep */
    PH_ROWS_REFRESH_IN_SWEEP_B, /* the same with their B (merits) */
    PH_ROWS_REFRESH_FAST,       /* the batches refreshed with B, a pass of its own */
    PH_ROWS_REFRESH,            /* rows[] refreshed */
    PH_ROWS_REFRESH_COPY        /* rows[] refreshed, rhs and lambda copied into the batches */
} ph__rows_plan;

/* How the contacts are warm-started (the joint rows always row by row). */
typedef enum ph__warm_plan {
    PH_WARM_ROWS,       /* row by row in rows[] (or nothing to warm-start) */
    PH_WARM_BATCHES,    /* row by row in the batches' order */
    PH_WARM_BODIES,     /* the last substep's contact impulses body by body (dvc) */
    PH_WARM_WITH_FORCES /* the same, already applied with the forces */
} ph__warm_plan;

/* Which solve runs. */
typedef enum ph__solve_plan {
    PH_SOLVE_FAMILY,     /* another method or order: the rows as a system of the family */
    PH_SOLVE_PGS_ROWS,   /* PGS, every row by the scalar loop */
    PH_SOLVE_PGS_BATCHES /* PGS, the contacts by batches of points */
} ph__solve_plan;

/* What reads the rows' B and when merits are measured (core PGS). */
typedef enum ph__merits_plan {
    PH_MERITS_NONE,  /* nothing reads B */
    PH_MERITS_B,     /* a capture reads B; no merits */
    PH_MERITS_FINAL, /* the last substep: the final merits after the solve */
    PH_MERITS_SWEEP  /* after every sweep (record_merits or a tolerance) */
} ph__merits_plan;

/* Where the contact impulses go after the solve. */
typedef enum ph__store_plan {
    PH_STORE_FROM_ROWS,    /* rows[] into the manifolds */
    PH_STORE_FROM_BATCHES, /* the batches into the manifolds */
    PH_STORE_KEEP          /* kept in the batches (the next refresh warm-starts from them) */
} ph__store_plan;

/* What the integration does besides the positions. */
typedef enum ph__next_plan {
    PH_NEXT_NONE,      /* nothing (last substep, or collide_substeps) */
    PH_NEXT_APART,     /* records dvc; the next substep starts on its own */
    PH_NEXT_FUSED,     /* also the next substep's solver bodies and forces */
    PH_NEXT_FUSED_WARM /* also its body-by-body warm start */
} ph__next_plan;

/* One substep's plan (ph__plan_substep). */
typedef struct ph__plan {
    ph__collide_plan collide;
    ph__start_plan start;
    ph__home_plan home;
    ph__rows_plan rows;
    ph__warm_plan warm;
    ph__solve_plan solve;
    ph__merits_plan merits;
    ph__store_plan store;
    ph__next_plan next;
    int last;  /* 1: the last substep of the step */
    int relax; /* 1: a relaxation pass over the contacts after the solve (core PGS,
                  settings.contact_relax) */
} ph__plan;

/* What only the running step knows, each 0 or 1. A substep plans at its
 * start and again when a collision or its rows change these. */
typedef struct ph__facts {
    int capture;     /* ph_world_step_capture is taking this step */
    int restitutive; /* manifolds with restitution > 0 (from the last collision) */
    int contacts;    /* contact rows (in rows[], or the batches when native) */
    int joints;      /* the world has joints */
    int joint_rows;  /* this substep has joint rows (known after its rows) */
    int batches;     /* the batches hold this step's contact rows */
    int started;     /* the last substep's integration did this one's start */
} ph__facts;

/* The plan of substep k of n (0 <= k < n), ph__plan_substep: a pure
 * function of its arguments, static inline in step_plan.h (the truth
 * table above). */

/* The forces' share of a solver body's substep (step.c). */
typedef struct ph__sforce {
    ph_vec3 dv; /* h (g gravity_scale + force / m) */
    int plain;  /* 1: dv is all the forces do */
} ph__sforce;

/* A body's pose before a step, and its sleep state (step.c's restore). */
/* The statistics of a step with nothing awake, filled in when they are
 * read (step.c; ph_world_get_stats). */
void ph__idle_stats_fill(struct ph__world *w);

typedef struct ph__saved_pose {
    ph_vec3 p;
    ph_quat q;
} ph__saved_pose;

/* A body's sleep state (island.c's criterion): what a failed step puts
 * back (step.c), and for the bodies a contact woke in it also their pose
 * (slot: the body). */
typedef struct ph__saved_sleep {
    double rest_time;
    ph_vec3 rest_p;
    ph_quat rest_q;
    int32_t asleep;
    int32_t slot;
    ph__saved_pose pose;
} ph__saved_sleep;

/* save_state's copies of the awake bodies awake[k0, k1) (their velocities
 * into v_step, w_step, their poses and sleep state into the saved arrays):
 * step.c leaves them to the step's first broadphase (w->save_pending),
 * whose refresh reads the same bodies' lines right after (broad_phase.c). */
void ph__save_bodies(ph__world *w, int32_t k0, int32_t k1);

/* step.c's integration of solver body s (and with next > 0 the start of
 * the next substep), and integrate_wide.c's of bodies [s0, s1), four at a
 * time from s0 where they are plain and isotropic: the same numbers. */
void ph__integrate_body(ph__world *w, int32_t s, double h, int dv, int next, double wf);
void ph__wide_integrate(ph__world *w, int32_t s0, int32_t s1, double h, int dv, int next, double wf);
/* The same over the solver bodies idx[0, n), ascending (a tile's). */
void ph__wide_integrate_list(ph__world *w, const int32_t *idx, int32_t n, double h, int dv, int next, double wf);

#endif /* PHYSD_STEP_H */
