/*
 * arena.c — the per-step arena (see arena.h): LIFO pieces of one block with
 * a heap fallback, the block grown between steps to the largest total a
 * step needed.
 *
 * Normal path: alloc bumps used; free drops it back; end_step checks the
 * arena is empty and grows the block when the peak outgrew it.
 *
 * Failure modes: NULL from alloc when the heap fallback fails or the depth
 * is exhausted; abort() on a free out of order or a piece left at the end
 * of a step or at destruction (bugs of the core, never of its caller).
 *
 * Invariants: used <= cap; want >= used; count pieces, the last on top.
 */
#include "arena.h"

#include <stdlib.h>

#include "alloc.h"

void *ph__arena_alloc(ph__arena *a, size_t size, const char *name) {
    if (a->count == PH__ARENA_DEPTH || size > SIZE_MAX - 15) return NULL;
    size = size ? (size + 15) & ~(size_t)15 : 16; /* (a piece is never empty: distinct, never NULL) */
    ph__arena_piece *pc = &a->piece[a->count];
    if (size <= a->cap - a->used) {
        pc->p = a->block + a->used;
        pc->heap = 0;
        a->used += size;
    } else {
        pc->p = ph__alloc(size);
        if (!pc->p) return NULL;
        pc->heap = 1;
    }
    pc->size = size;
    pc->name = name;
    a->count++;
    a->want += size;
    if (a->want > a->peak) a->peak = a->want;
    return pc->p;
}

void ph__arena_free(ph__arena *a, void *p) {
    if (a->count == 0 || a->piece[a->count - 1].p != p) abort(); /* (not LIFO: a bug of the core) */
    const ph__arena_piece *pc = &a->piece[--a->count];
    a->want -= pc->size;
    if (pc->heap)
        ph__free(pc->p);
    else
        a->used -= pc->size;
}

void ph__arena_end_step(ph__arena *a) {
    if (a->count != 0) abort(); /* (a piece outlived its step: a bug of the core) */
    if (a->peak <= a->cap) return;
    char *b = ph__realloc(a->block, a->peak);
    if (!b) return; /* (the heap fallback goes on serving) */
    a->block = b;
    a->cap = a->peak;
}

void ph__arena_destroy(ph__arena *a) {
    if (a->count != 0) abort(); /* (a piece outlived its arena: a bug of the core) */
    ph__free(a->block);
    a->block = NULL;
    a->cap = a->used = a->want = a->peak = 0;
    a->count = 0;
}
