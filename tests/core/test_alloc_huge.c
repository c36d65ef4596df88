/*
 * test_alloc_huge.c — the core's large blocks are advised for transparent
 * huge pages (alloc.c; issue #21, target 3: docs/profile.md "A tenth
 * pass"), small ones are not.
 *
 * On Linux the kernel lists each mapping of the process in
 * /proc/self/smaps with its VmFlags, where "hg" marks the pages advised by
 * madvise(MADV_HUGEPAGE), whatever the system's THP setting. A block from
 * each of the core's allocators (an array grown past PH__HUGE_MIN, the
 * arena's heap pieces through ph__alloc, ph__calloc, ph__realloc) must have
 * the flag on the huge page inside it; a small array's mapping must not
 * (the process has no other advised memory). Skipped where the kernel has
 * no THP (no /sys/kernel/mm/transparent_hugepage) or not on Linux.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "alloc.h"
#include "array.h"

/* 1 when the mapping holding address p has "hg" among its VmFlags, 0
 * when it has not, -1 when smaps cannot tell. */
static int advised(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, r = -1;
    const uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in = a >= lo && a < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            r = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return r;
}

static int thp_kernel(void) {
#if defined(__linux__)
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    fclose(f);
    return 1;
#else
    return 0;
#endif
}

/* The first whole huge page of a block of n bytes at p. */
static const char *huge_page_in(const void *p) {
    return (const char *)(((uintptr_t)p + PH__HUGE_PAGE - 1) & ~(uintptr_t)(PH__HUGE_PAGE - 1));
}

static void test_large_blocks_advised(void **state) {
    (void)state;
    if (!thp_kernel()) skip();
    /* An array of 8 MB of manifold-sized records (the arrays' allocator). */
    typedef struct rec {
        char b[704];
    } rec;
    rec *a = NULL;
    assert_int_equal(ph__array_reserve(a, (int32_t)((8u << 20) / sizeof(rec))), 0);
    assert_int_equal(advised(huge_page_in(a)), 1);
    /* The plain allocators (the arena's heap pieces and block). */
    char *m = ph__alloc(6u << 20);
    assert_non_null(m);
    assert_int_equal(advised(huge_page_in(m)), 1);
    char *c = ph__calloc(3u << 20, 2);
    assert_non_null(c);
    assert_int_equal(advised(huge_page_in(c)), 1);
    char *r = ph__alloc(64);
    assert_non_null(r);
    r = ph__realloc(r, 5u << 20);
    assert_non_null(r);
    assert_int_equal(advised(huge_page_in(r)), 1);
    ph__free(r);
    ph__free(c);
    ph__free(m);
    ph__array_free(a);
}

static void test_small_blocks_not_advised(void **state) {
    (void)state;
    if (!thp_kernel()) skip();
    /* (Below PH__HUGE_MIN: from malloc's heap or a mapping of its own,
     * neither advised; the process advises nothing else.) */
    double *a = NULL;
    assert_int_equal(ph__array_reserve(a, 1000), 0);
    assert_int_equal(advised(a), 0);
    char *m = ph__alloc(PH__HUGE_MIN - 4096);
    assert_non_null(m);
    assert_int_equal(advised(m + 8192), 0);
    ph__free(m);
    ph__array_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_blocks_advised),
        cmocka_unit_test(test_small_blocks_not_advised),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
