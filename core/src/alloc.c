/*
 * alloc.c — the core's heap functions and their test hook (see alloc.h).
 *
 * Normal path: malloc, calloc, realloc and free, with a per-thread count of
 * allocations (every call that can fail: ph__alloc, ph__calloc,
 * ph__realloc).
 *
 * Failure modes: the armed allocation returns NULL without calling the
 * system; a realloc that fails leaves its block as it was.
 *
 * Invariants: the counter and the armed index are thread-local.
 */
#include "alloc.h"

#include <stdlib.h>

static _Thread_local int64_t alloc_count, alloc_fail_at;

/* One more allocation: 1 when it is the one to fail. */
static int fails(void) {
    alloc_count++;
    return alloc_count == alloc_fail_at;
}

void *ph__alloc(size_t n) { return fails() ? NULL : malloc(n); }
void *ph__calloc(size_t count, size_t n) { return fails() ? NULL : calloc(count, n); }
void *ph__realloc(void *p, size_t n) { return fails() ? NULL : realloc(p, n); }
void *ph__alloc_aligned(size_t align, size_t n) {
    return fails() ? NULL : aligned_alloc(align, (n + align - 1) / align * align);
}
void ph__free(void *p) { free(p); }

void ph__alloc_fail_at(int64_t k) {
    alloc_fail_at = k > 0 ? k : 0;
    alloc_count = 0;
}

int64_t ph__alloc_count(void) { return alloc_count; }
