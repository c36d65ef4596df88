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

#endif /* PHYSD_BROAD_PHASE_H */
