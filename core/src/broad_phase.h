/*
 * broad_phase.h — the broadphase (broad_phase.c): sort keys, shape pairs and the pass
 * that lists the pairs whose boxes overlap.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_BROAD_PHASE_H
#define PHYSD_BROAD_PHASE_H

#include <stdint.h>

typedef struct ph__world ph__world;

typedef struct ph__sap_key {
    double key;
    int32_t slot;
} ph__sap_key;

/* qsort order of sap keys: by key, ties by slot (deterministic). */
int ph__sap_key_cmp(const void *x, const void *y);

typedef struct ph__pair {
    int32_t sa, sb;
} ph__pair;

/* AABBs grown by the margin and by how far each shape can move within dt
 * (the time until the next collision), sorted pairs in w->pairs. */
int ph__broadphase(ph__world *w, double dt);

struct ph__shape;
/* The AABB of a shape that does not move (a static body's, a sleeping
 * body's): its box grown by the contact margin alone (spec = 0), the same
 * bits as the broadphase gives a shape of a body at rest. */
void ph__rest_box(const ph__world *w, struct ph__shape *sh);

#endif /* PHYSD_BROAD_PHASE_H */
