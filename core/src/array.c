/*
 * array.c — growth and release of the core's typed growable arrays (see
 * array.h).
 *
 * Normal path: the capacity doubles from 64 until it holds what is asked;
 * a new 64-byte aligned block (header and elements) is allocated and the
 * elements copied into it (realloc keeps only malloc's 16 bytes).
 *
 * Failure modes: a capacity past INT32_MAX elements, a size past SIZE_MAX
 * or a failed allocation gives PH_ERR_NO_MEMORY, the array unchanged.
 *
 * Invariants: an array's pointer is either NULL or just past its header.
 */
#include "alloc.h"
#include "array.h"

#include <stdlib.h>
#include <string.h>

#include "physd/ph_core.h"

int ph__array_grow(void **a, int32_t need, size_t elem) {
    const int32_t cap = ph__array_cap(*a);
    if (need <= cap) return PH_OK;
    int64_t nc = cap ? (int64_t)cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    if (nc > INT32_MAX || (size_t)nc > (SIZE_MAX - sizeof(ph__array_head)) / elem) return PH_ERR_NO_MEMORY;
    ph__array_head *old = *a ? (ph__array_head *)*a - 1 : NULL;
    ph__array_head *h = ph__alloc_aligned(_Alignof(ph__array_head), sizeof *h + (size_t)nc * elem);
    if (!h) return PH_ERR_NO_MEMORY;
    if (old) {
        memcpy(h + 1, old + 1, (size_t)cap * elem);
        ph__free(old);
    }
    h->cap = (int32_t)nc;
    *a = h + 1;
    return PH_OK;
}

void ph__array_free(void *a) {
    if (a) ph__free((ph__array_head *)a - 1);
}
