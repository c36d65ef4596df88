/*
 * engine.h — the small interface every engine adapter of the benchmark
 * implements (physd, Open Dynamics Engine, Bullet).
 *
 * An adapter builds its own world from a neutral scene description
 * (scene_desc.h) and a configuration that is the same for all engines, steps
 * it, and answers a few questions about the last step. The harness (bench.c)
 * times the step call and computes every other figure itself from the body
 * poses, identically for all engines.
 *
 * Invariants: body indices are the description's; get_pose is valid for
 * every body (static ones included) after create and after each step;
 * nothing an adapter prints goes to stdout.
 */
#ifndef PHYSD_BENCH_ENGINE_H
#define PHYSD_BENCH_ENGINE_H

#include <stddef.h>

#include "scene_desc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct engine_config {
    double time_step;        /* s, one call of step() advances this much */
    int substeps;            /* the step is split into this many equal substeps */
    int iterations;          /* solver iterations per substep */
    ph_vec3 gravity;         /* m/s^2 */
    int collide_jointed;     /* ODE, Bullet: bodies linked by a joint also collide (default 0) */
    int physd_from_desc;     /* physd only: build from the description instead of the preset */
    int physd_record_merits; /* physd only: settings.record_merits */
    int physd_pass_profile;  /* physd only: the pass profile on (ph_world_set_pass_profile) */
    int physd_simd;          /* physd only: settings.simd (a ph_simd) */
    int physd_threads;       /* physd only: settings.threads (the others run on one thread) */
    int physd_joint_once;    /* physd only: settings.joint_step_once 1 on, -1 off, 0 the core's default */
    int sleep;               /* sleeping on in every engine (physd settings.sleep, ODE auto-disable,
                                Bullet deactivation), each with its own default criterion */
} engine_config;

/* Figures an engine may report about its last step; fields it cannot report
 * are left NaN (printed as null). */
typedef struct engine_extra {
    double final_merit;        /* physd: Fischer merit after the last iteration */
    double final_rel_residual; /* physd: ||B - S lambda|| / ||B|| */
    double final_minmap;       /* physd: min-map merit after the last iteration */
} engine_extra;

typedef struct engine_vtable {
    const char *name; /* "physd", "ode", "bullet" */
    /* Returns an opaque engine, or NULL with a message in err. */
    void *(*create)(const scene_desc *d, const engine_config *cfg, char *err, size_t errlen);
    /* Advances by cfg->time_step (collision detection included). */
    void (*step)(void *e);
    /* Pose of body i (centre of mass = body origin). */
    void (*get_pose)(void *e, int i, ph_vec3 *p, ph_quat *q);
    /* Deepest penetration (m, >= 0) among the contacts of the last step, as
     * the engine reports it; 0 without contacts. */
    double (*max_penetration)(void *e);
    /* Number of contact points of the last step, as the engine reports it. */
    int (*contact_count)(void *e);
    /* Optional (may be NULL): figures of the last step. */
    void (*extra)(void *e, engine_extra *out);
    /* Optional (may be NULL): a JSON object body (without braces) describing
     * the engine's settings, e.g. "\"erp\":0.2,\"cfm\":1e-10". */
    void (*describe)(void *e, char *buf, size_t len);
    const char *(*precision)(void); /* "double" or "single" */
    const char *(*version)(void);
    void (*destroy)(void *e);
    /* Optional (may be NULL): dynamic bodies awake (not asleep, disabled or
     * deactivated) after the last step. */
    int (*awake_count)(void *e);
    /* Optional (may be NULL): the pass profile of the steps so far as the
     * body of a JSON array ("" when there is none). */
    void (*pass_profile)(void *e, char *buf, size_t len);
} engine_vtable;

extern const engine_vtable engine_physd;
extern const engine_vtable engine_ode;
extern const engine_vtable engine_bullet;

#ifdef __cplusplus
}
#endif

#endif /* PHYSD_BENCH_ENGINE_H */
