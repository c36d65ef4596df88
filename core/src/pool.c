/*
 * pool.c — slot pools with generations (see pool.h): allocation from a LIFO
 * free list or the high-water mark, freeing with a generation bump and
 * retirement of slots whose generation would wrap.
 *
 * Normal path: alloc pops the free list or grows the records array
 * geometrically (16, then doubling; a new 64-byte aligned block, the
 * records copied: ph__body is aligned to a cache line); free pushes.
 * Neither is on a hot path: handle lookups read the records directly
 * (world.h).
 *
 * Failure modes: a failed growth gives PH_ERR_NO_MEMORY and changes
 * nothing.
 *
 * Invariants: the sequence of (slot, generation) pairs handed out depends
 * only on the sequence of allocs and frees.
 */
#include "alloc.h"
#include "pool.h"

#include <stdlib.h>
#include <string.h>

#include "physd/ph_core.h"

static uint16_t gen_of(const void *records, const ph__pool_layout *l, int32_t slot) {
    uint16_t g;
    memcpy(&g, (const char *)records + (size_t)slot * l->elem + l->gen_off, sizeof g);
    return g;
}

static int32_t link_of(const void *records, const ph__pool_layout *l, int32_t slot) {
    int32_t n;
    memcpy(&n, (const char *)records + (size_t)slot * l->elem + l->link_off, sizeof n);
    return n;
}

static void set_gen_link(void *records, const ph__pool_layout *l, int32_t slot, uint16_t g, int32_t n) {
    char *r = (char *)records + (size_t)slot * l->elem;
    memcpy(r + l->gen_off, &g, sizeof g);
    memcpy(r + l->link_off, &n, sizeof n);
}

void ph__pool_init(ph__pool *p) {
    p->cap = p->hwm = p->count = 0;
    p->free = -1;
    p->fresh_gen = 0;
}

/* Grows the records to hold at least need, the new ones zeroed. */
static int grow(ph__pool *p, void **records, size_t elem, int32_t need) {
    if (need <= p->cap) return PH_OK;
    int64_t nc = p->cap ? (int64_t)p->cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    if (nc > INT32_MAX) return PH_ERR_NO_MEMORY;
    void *r = ph__alloc_aligned(64, (size_t)nc * elem);
    if (!r) return PH_ERR_NO_MEMORY;
    if (*records) {
        memcpy(r, *records, (size_t)p->cap * elem);
        ph__free(*records);
    }
    memset((char *)r + (size_t)p->cap * elem, 0, (size_t)(nc - p->cap) * elem);
    *records = r;
    p->cap = (int32_t)nc;
    return PH_OK;
}

int ph__pool_alloc(ph__pool *p, void **records, const ph__pool_layout *l, int32_t *slot, uint16_t *gen) {
    int32_t s;
    uint16_t prev;
    if (p->free >= 0) {
        s = p->free;
        p->free = link_of(*records, l, s);
        prev = gen_of(*records, l, s);
    } else {
        const int e = grow(p, records, l->elem, p->hwm + 1);
        if (e) return e;
        s = p->hwm++;
        prev = p->fresh_gen;
    }
    const uint16_t g = ph__next_gen(prev);
    memset((char *)*records + (size_t)s * l->elem, 0, l->elem);
    set_gen_link(*records, l, s, g, -1);
    p->count++;
    *slot = s;
    *gen = g;
    return PH_OK;
}

void ph__pool_free(ph__pool *p, void *records, const ph__pool_layout *l, int32_t slot) {
    const uint16_t g = gen_of(records, l, slot);
    if (ph__retires(g)) {
        set_gen_link(records, l, slot, ph__next_gen(g), -1);
    } else {
        set_gen_link(records, l, slot, ph__next_gen(g), p->free);
        p->free = slot;
    }
    p->count--;
}

void ph__pool_fence(ph__pool *p, void *records, const ph__pool_layout *l) {
    /* Rebuild the free list in its order, each slot two generations on. */
    int32_t head = -1, tail = -1;
    for (int32_t s = p->free; s >= 0;) {
        const int32_t next = link_of(records, l, s);
        const uint16_t g = ph__next_gen(ph__next_gen(gen_of(records, l, s)));
        if (!ph__retires(g) && g < 0xfffd) {
            set_gen_link(records, l, s, g, -1);
            if (tail >= 0)
                set_gen_link(records, l, tail, gen_of(records, l, tail), s);
            else
                head = s;
            tail = s;
        } else {
            set_gen_link(records, l, s, g, -1); /* retired: never on the free list again */
        }
        s = next;
    }
    p->free = head;
    if (p->fresh_gen < 0xfff0) p->fresh_gen = (uint16_t)(p->fresh_gen + 2);
}
