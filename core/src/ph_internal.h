/*
 * ph_internal.h — every internal header of the core at once, for the
 * core's own tests (and code on its way to including only what it needs).
 * The core's sources include the headers of the modules they use:
 * collide.h, body.h, broad_phase.h, contact.h, rows.h, solver.h,
 * solver_wide.h, joint.h, island.h, step.h, pool.h, array.h, arena.h,
 * alloc.h and world.h. Not installed, not
 * part of the API.
 *
 * Invariants:
 *  - bodies, shapes and joints live in slot arrays handed out by one slot
 *    pool (pool.h) with free lists; a slot's generation is bumped on free,
 *    so stale handles fail validation;
 *  - slot order (not pointer or hash order) is the only iteration order, so
 *    stepping is deterministic;
 *  - per-step scratch memory (arena.h) is empty at the end of every step.
 */
#ifndef PHYSD_PH_INTERNAL_H
#define PHYSD_PH_INTERNAL_H

#include "alloc.h"
#include "arena.h"
#include "array.h"
#include "body.h"
#include "broad_phase.h"
#include "collide.h"
#include "contact.h"
#include "island.h"
#include "joint.h"
#include "pool.h"
#include "rows.h"
#include "solver.h"
#include "solver_wide.h"
#include "step.h"
#include "world.h"

#endif /* PHYSD_PH_INTERNAL_H */
