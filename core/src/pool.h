/*
 * pool.h — slot pools with generations: the one allocator of body, shape
 * and joint slots (pool.c).
 *
 * A pool hands out slots of a growable array of records. Each record keeps
 * its own 16-bit generation (a uint16_t at gen_off) and a free-list link
 * (an int32_t at link_off); the pool keeps the bookkeeping: capacity, the
 * high-water mark, the head of the free list and the live count. The
 * records array itself stays a typed pointer in the world (w->bodies, ...),
 * so the hot paths index it directly.
 *
 * Normal path: ph__pool_alloc pops the most recently freed slot (a LIFO
 * free list) or takes the next never-used one, growing the array
 * geometrically (new records zeroed); the record is zeroed and its
 * generation is the next one. ph__pool_free bumps the generation and pushes
 * the slot on the free list. Marking a record dead (alive = 0, body = -1)
 * is the caller's: the handle lookups in world.h check it with the
 * generation.
 *
 * Failure modes: a failed allocation gives PH_ERR_NO_MEMORY with the pool
 * and the array unchanged.
 *
 * Invariants: a slot is freed by bumping its generation (gen + 1) and
 * reused with the next one (gen + 2), skipping 0. When that would wrap past
 * 0xffff, a handle issued for the slot long ago could name what the slot
 * holds next: such a slot is retired instead, never put on the free list
 * again (freed at generation 0xfffe or 0xffff). It costs one slot per 32768
 * reuses.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_POOL_H
#define PHYSD_POOL_H

#include <stddef.h>
#include <stdint.h>

/* Where a pool's records keep their generation and free-list link. */
typedef struct ph__pool_layout {
    size_t elem;     /* bytes per record */
    size_t gen_off;  /* offset of the record's uint16_t generation */
    size_t link_off; /* offset of the record's int32_t free-list link (-1 ends) */
} ph__pool_layout;

typedef struct ph__pool {
    int32_t cap;        /* records allocated */
    int32_t hwm;        /* slots ever used: [0, hwm) */
    int32_t free;       /* head of the free list, -1 when empty */
    int32_t count;      /* live slots */
    uint16_t fresh_gen; /* a never-used slot is handed out at the generation after this one (0 until a fence) */
} ph__pool;

static inline uint16_t ph__next_gen(uint16_t g) { return (uint16_t)(g == 0xffff ? 1 : g + 1); }

/* A slot freed while in use at this generation is retired (see above). */
static inline int ph__retires(uint16_t gen_in_use) { return gen_in_use >= 0xfffe; }

/* An empty pool (no records yet). */
void ph__pool_init(ph__pool *p);

/* Takes a slot from *records (grown as needed): its record zeroed but for
 * its new generation and a link of -1. Sets *slot and *gen; 0 or
 * PH_ERR_NO_MEMORY (nothing changed). */
int ph__pool_alloc(ph__pool *p, void **records, const ph__pool_layout *l, int32_t *slot, uint16_t *gen);

/* Frees a live slot: its generation bumped, the slot pushed on the free
 * list unless it retires. The rest of the record is left as it is. */
void ph__pool_free(ph__pool *p, void *records, const ph__pool_layout *l, int32_t slot);

/* An id fence (ph_world_fence_ids): every handle the pool could have
 * handed out after this moment in an earlier life of the world (a run
 * whose last changes were lost) is never handed out again: each free
 * slot's next generation and the generation of never-used slots move on
 * by two. Free slots that would wrap are retired. */
void ph__pool_fence(ph__pool *p, void *records, const ph__pool_layout *l);

#endif /* PHYSD_POOL_H */
