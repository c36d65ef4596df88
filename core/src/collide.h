/*
 * collide.h — the narrowphase's geometry: a shape's geometry independent of body and
 * world, the manifolds of two shapes, and their world AABBs (collide.c).
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_COLLIDE_H
#define PHYSD_COLLIDE_H

#include "physd/ph_core.h"

/* The geometry of a shape, independent of body and world. */
typedef struct ph__geom {
    ph_shape_type type;
    double radius;        /* sphere, capsule */
    ph_vec3 half_extents; /* box */
    double half_height;   /* capsule: core segment from (0,0,-h) to (0,0,h) */
    ph_vec3 normal;       /* plane (local frame) */
    double offset;        /* plane */
} ph__geom;

typedef struct ph__mpoint {
    ph_vec3 point;    /* world, midway between the two surfaces */
    double depth;     /* > 0 penetrating, < 0 separated (down to -margin) */
    uint32_t feature; /* stable id of the pair of features that made the point */
} ph__mpoint;

#define PH_MAX_MANIFOLD_POINTS 4

typedef struct ph__manifold {
    ph_vec3 normal; /* unit, world, from shape A towards shape B */
    int count;      /* 0..4 */
    ph__mpoint pts[PH_MAX_MANIFOLD_POINTS];
} ph__manifold;

/* Collides geometry a at world pose ta with geometry b at pose tb. Points with
 * separation up to margin (>= 0) are reported. Fills m (normal from a to b)
 * and returns m->count. Plane–plane returns 0. Every ordered pair of types is
 * handled (internally swapped where needed, with the normal flipped so it
 * still points from a to b). Never allocates. */
int ph__collide(const ph__geom *a, ph_transform ta, const ph__geom *b, ph_transform tb, double margin, ph__manifold *m);

/* World-space AABB of a geometry at a pose, grown by margin on every side.
 * Planes get an infinite box (+-1e300) except along their normal when the
 * normal is axis aligned. */
void ph__geom_aabb(const ph__geom *g, ph_transform t, double margin, ph_vec3 *lo, ph_vec3 *hi);

/* The parts of a finite shape's world AABB: ph__geom_aabb(g, t, margin) is,
 * bit for bit, base_lo - (ext + margin) and base_hi + (ext + margin) per
 * component, so a box can be grown by several margins from one rotation. */
void ph__geom_aabb_parts(const ph__geom *g, ph_transform t, ph_vec3 *base_lo, ph_vec3 *base_hi, ph_vec3 *ext);

#endif /* PHYSD_COLLIDE_H */
