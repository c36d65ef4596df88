/*
 * arena.h — the per-step arena (arena.c): scratch memory that does not
 * outlive one call inside a step, taken and given back in LIFO order,
 * named for the reader.
 *
 * Normal path: ph__arena_alloc takes the next 16-byte-aligned piece of the
 * arena's block (at least 16 bytes, so never NULL and never shared);
 * ph__arena_free gives back the most recent one. When the
 * block is too small (the first steps, or a step larger than any before)
 * the piece comes from the heap (ph__alloc) instead, and the end of the
 * step (ph__arena_end_step) grows the block to the largest total seen, so
 * the steady state allocates nothing.
 *
 * Failure modes: a heap fallback that fails, or more than PH__ARENA_DEPTH
 * pieces at once, gives NULL (the caller returns PH_ERR_NO_MEMORY). A free
 * out of LIFO order, or a step (or an arena's life) that ends with a piece
 * still taken, is a bug in the core: abort().
 *
 * Invariants: the arena is empty between steps; what must outlive a step
 * (manifolds, pairs, events, solver arrays reused by the next step) lives
 * in the world's growable arrays (array.h), never here. Two kinds of
 * arena: the world's (w->arena, for everything inside ph_world_step) and a
 * standalone call's own (lcp.c: zeroed on its stack, so every piece is a
 * heap allocation, destroyed empty before the call returns).
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_ARENA_H
#define PHYSD_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define PH__ARENA_DEPTH 16

typedef struct ph__arena_piece {
    char *p;          /* the piece */
    size_t size;      /* bytes, a multiple of 16 */
    const char *name; /* what it holds (for a debugger) */
    int heap;         /* 1: from the heap, not the block */
} ph__arena_piece;

typedef struct ph__arena {
    char *block;   /* the arena's memory */
    size_t cap;    /* bytes in block */
    size_t used;   /* bytes of block taken */
    size_t want;   /* bytes taken in all (block and heap) */
    size_t peak;   /* the largest want seen */
    int32_t count; /* pieces taken */
    ph__arena_piece piece[PH__ARENA_DEPTH];
} ph__arena;

/* A piece of size bytes (16-byte aligned, not initialized), or NULL. */
void *ph__arena_alloc(ph__arena *a, size_t size, const char *name);
/* Gives back p, which must be the most recent piece taken. */
void ph__arena_free(ph__arena *a, void *p);
/* The end of a step: aborts unless the arena is empty, then grows the
 * block to the peak (a failed growth keeps the old block). */
void ph__arena_end_step(ph__arena *a);
/* Releases the block; aborts unless the arena is empty. */
void ph__arena_destroy(ph__arena *a);

#endif /* PHYSD_ARENA_H */
