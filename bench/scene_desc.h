/*
 * scene_desc.h — the benchmark's neutral description of a scene.
 *
 * physd's presets (ph_scene_build) are the single source of truth for the
 * reference scenes. The benchmark builds a preset into a physd world, reads
 * it back through the public API into this description, and every engine
 * adapter (physd, ODE, Bullet) constructs its own world from it, so all of
 * them run exactly the same bodies, shapes, mass properties and joints.
 *
 * Invariants:
 *  - bodies are in the physd world's slot order (ph_world_get_bodies), so
 *    body i is the same object in every engine;
 *  - a body's shapes are shapes[first_shape .. first_shape + shape_count);
 *  - the centre of mass of every body is its origin (physd's convention), and
 *    mass/inertia are the values physd computed (principal, body frame);
 *  - joints name bodies by index; body_b == -1 is the static world frame, in
 *    which case anchor_b is a world point.
 *
 * The description uses ph_math.h's plain types and helpers (header only);
 * only sd_from_physd_world needs the physd library.
 */
#ifndef PHYSD_BENCH_SCENE_DESC_H
#define PHYSD_BENCH_SCENE_DESC_H

#include <stddef.h>

#include "physd/ph_core.h"
#include "physd/ph_math.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sd_body_type {
    SD_BODY_STATIC = 0,
    SD_BODY_KINEMATIC = 1,
    SD_BODY_DYNAMIC = 2,
} sd_body_type;

typedef enum sd_shape_type {
    SD_SHAPE_SPHERE = 0,
    SD_SHAPE_BOX = 1,
    SD_SHAPE_CAPSULE = 2, /* segment along local z of half-length half_height, plus radius */
    SD_SHAPE_PLANE = 3,   /* static only: n·x <= offset (shape frame) is inside */
} sd_shape_type;

typedef struct sd_shape {
    sd_shape_type type;
    double radius;        /* sphere, capsule (m) */
    ph_vec3 half_extents; /* box (m) */
    double half_height;   /* capsule (m) */
    ph_vec3 normal;       /* plane, unit, shape frame */
    double offset;        /* plane, n·x = offset on the surface */
    ph_transform local;   /* pose of the shape in its body's frame */
    double friction;      /* a pair uses sqrt(mu_a mu_b) */
    double restitution;   /* a pair uses max(e_a, e_b) */
} sd_shape;

typedef struct sd_body {
    sd_body_type type;
    ph_vec3 position;
    ph_quat orientation;
    ph_vec3 linear_velocity;
    ph_vec3 angular_velocity; /* world frame */
    double mass;              /* kg, 0 for static and kinematic */
    ph_vec3 inertia;          /* principal moments about the origin, body frame */
    int first_shape;
    int shape_count;
} sd_body;

typedef enum sd_joint_type {
    SD_JOINT_BALL = 0, /* anchors coincide */
} sd_joint_type;

typedef struct sd_joint {
    sd_joint_type type;
    int body_a;       /* index into bodies */
    int body_b;       /* index into bodies, or -1 for the world frame */
    ph_vec3 anchor_a; /* body A frame */
    ph_vec3 anchor_b; /* body B frame, or world frame when body_b == -1 */
} sd_joint;

typedef struct scene_desc {
    char name[64];   /* preset name, "" for a hand-built description */
    ph_vec3 gravity; /* m/s^2 */
    int body_count;
    sd_body *bodies;
    int shape_count;
    sd_shape *shapes;
    int joint_count;
    sd_joint *joints;
} scene_desc;

/* Releases the arrays of d (not d itself) and zeroes it. */
void sd_free(scene_desc *d);

/* Number of dynamic bodies. */
int sd_dynamic_count(const scene_desc *d);

/* World positions of the two anchors of joint j for the given body poses
 * (arrays indexed like d->bodies). */
void sd_joint_anchors(const scene_desc *d, int j, const ph_vec3 *pos, const ph_quat *rot, ph_vec3 *wa, ph_vec3 *wb);

/* Reads a physd world back into d through the public API (allocates; free
 * with sd_free). name is copied into d->name. Returns 0, or -1 with a message
 * in err for anything the description cannot express (a joint type other
 * than ball, an unknown shape type) or a failing core call. */
int sd_from_physd_world(ph_world_id w, const char *name, scene_desc *d, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* PHYSD_BENCH_SCENE_DESC_H */
