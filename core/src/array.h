/*
 * array.h — the typed growable array of the core (array.c): a plain typed
 * pointer (ph__pair *pairs, ...) whose capacity lives in a small header in
 * front of the elements, so the world keeps no capacity fields and the hot
 * paths index the arrays as before.
 *
 * Normal path: ph__array_reserve(a, need) makes room for need elements of
 * *a's type (a NULL array has capacity 0), growing geometrically (64, then
 * doubling) and keeping the elements; the fast path is one comparison,
 * inline. The count of elements in use is the owner's (w->pair_count, ...).
 * ph__array_free releases an array (NULL is fine).
 *
 * Failure modes: a capacity past INT32_MAX elements or a failed allocation
 * gives PH_ERR_NO_MEMORY with the array unchanged.
 *
 * Invariants: the elements are 64-byte aligned (a cache line: a record of
 * 64 bytes, or one aligned to them, never straddles two lines); the header is
 * never read through a NULL array; new elements are not initialized.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_ARRAY_H
#define PHYSD_ARRAY_H

#include <stddef.h>
#include <stdint.h>

/* What sits in front of an array's elements. */
typedef struct ph__array_head {
    _Alignas(64) int32_t cap; /* elements allocated */
} ph__array_head;

/* Elements allocated for array a (0 for NULL). */
static inline int32_t ph__array_cap(const void *a) { return a ? ((const ph__array_head *)a)[-1].cap : 0; }

/* The slow path of ph__array_reserve: 0 or PH_ERR_NO_MEMORY. */
int ph__array_grow(void **a, int32_t need, size_t elem);

static inline int ph__array_reserve_(void **a, int32_t need, size_t elem) {
    return need <= ph__array_cap(*a) ? 0 : ph__array_grow(a, need, elem);
}

/* Makes room for need elements in the typed array a (an lvalue such as
 * w->pairs); 0 or PH_ERR_NO_MEMORY. */
#define ph__array_reserve(a, need) ph__array_reserve_((void **)&(a), (need), sizeof *(a))

/* Releases an array made by ph__array_reserve (NULL is fine). */
void ph__array_free(void *a);

#endif /* PHYSD_ARRAY_H */
