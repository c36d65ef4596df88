/*
 * alloc.c — the core's heap functions and their test hook (see alloc.h).
 *
 * Normal path: malloc, calloc, realloc and free, with a per-thread count of
 * allocations (every call that can fail: ph__alloc, ph__calloc,
 * ph__realloc). A block of PH__HUGE_MIN bytes or more is advised to the
 * kernel for transparent huge pages (the whole 2 MB pages inside it: a
 * system whose THP setting is "madvise", Debian's default, otherwise backs
 * every array by 4 kB pages, and a large world's passes then miss the TLB
 * and restart the hardware prefetcher every 4 kB: docs/profile.md, "A
 * tenth pass").
 *
 * Failure modes: the armed allocation returns NULL without calling the
 * system; a realloc that fails leaves its block as it was.
 *
 * Invariants: the counter and the armed index are thread-local.
 */
#if defined(__linux__) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* (madvise and MADV_HUGEPAGE: not in the build's POSIX level) */
#endif
#include "alloc.h"

#include <stdint.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

static _Thread_local int64_t alloc_count, alloc_fail_at;

/* One more allocation: 1 when it is the one to fail. */
static int fails(void) {
    alloc_count++;
    return alloc_count == alloc_fail_at;
}

/* p (NULL, or a block of n bytes) with the whole huge pages inside it
 * advised for transparent huge pages when n >= PH__HUGE_MIN (a hint: its
 * failure, or a kernel without THP, changes nothing). */
int ph__alloc_no_huge;

static void *huge(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p && n >= PH__HUGE_MIN && !ph__alloc_no_huge) {
        const uintptr_t page = PH__HUGE_PAGE;
        const uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + n) & ~(page - 1);
        if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    }
#else
    (void)n;
#endif
    return p;
}

void *ph__alloc(size_t n) { return fails() ? NULL : huge(malloc(n), n); }
void *ph__calloc(size_t count, size_t n) { return fails() ? NULL : huge(calloc(count, n), count * n); }
void *ph__realloc(void *p, size_t n) { return fails() ? NULL : huge(realloc(p, n), n); }
void *ph__alloc_aligned(size_t align, size_t n) {
    const size_t m = (n + align - 1) / align * align;
    return fails() ? NULL : huge(aligned_alloc(align, m), m);
}
void ph__free(void *p) { free(p); }

void ph__alloc_fail_at(int64_t k) {
    alloc_fail_at = k > 0 ? k : 0;
    alloc_count = 0;
}

int64_t ph__alloc_count(void) { return alloc_count; }
