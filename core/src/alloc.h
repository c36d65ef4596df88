/*
 * alloc.h — the core's one way to the heap (alloc.c): every allocation of
 * the core goes through ph__alloc, ph__calloc, ph__realloc and ph__free, so
 * a test can make the k-th allocation fail and check what the caller does.
 *
 * Normal path: the four are malloc, calloc, realloc and free; the whole
 * huge pages (PH__HUGE_PAGE) inside a block of PH__HUGE_MIN bytes or more
 * are advised for transparent huge pages (Linux: madvise MADV_HUGEPAGE).
 *
 * Failure modes: with the test hook armed (ph__alloc_fail_at), the k-th
 * allocation counted from the arming returns NULL (as the system's would)
 * and changes nothing; ph__free never fails.
 *
 * Invariants: the hook's state is per thread, so a test arming it is not
 * disturbed by other threads; disarmed, the only cost is one comparison.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_ALLOC_H
#define PHYSD_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* A transparent huge page on x86-64 and the smallest block advised for them. */
#define PH__HUGE_PAGE ((size_t)2 << 20)
#define PH__HUGE_MIN ((size_t)2 << 20)
/* Tests and measurements: 1 = no block advised (every thread's). */
extern int ph__alloc_no_huge;

void *ph__alloc(size_t n);
void *ph__calloc(size_t count, size_t n);
void *ph__realloc(void *p, size_t n);
/* aligned_alloc: align a power of two, n rounded up to a multiple of it;
 * counted like the others (ph__alloc_fail_at). */
void *ph__alloc_aligned(size_t align, size_t n);
void ph__free(void *p);

/* Test-only: makes the k-th allocation (k >= 1) of this thread from now
 * fail, and every one after it succeed; k = 0 disarms. Counting restarts. */
void ph__alloc_fail_at(int64_t k);
/* Allocations of this thread since the last ph__alloc_fail_at. */
int64_t ph__alloc_count(void);

#endif /* PHYSD_ALLOC_H */
