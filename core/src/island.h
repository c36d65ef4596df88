/*
 * island.h — sleeping (island.c): islands of touching and joined bodies, their rest
 * timers, and waking a body.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_ISLAND_H
#define PHYSD_ISLAND_H

#include "body.h"

typedef struct ph__world ph__world;

int ph__islands(ph__world *w, double h); /* sleeping: islands, rest timers, wake/sleep */

/* Wakes a body (no-op for static bodies): it is stepped again and its rest
 * timer restarts. */
void ph__wake(ph__body *b);

#endif /* PHYSD_ISLAND_H */
