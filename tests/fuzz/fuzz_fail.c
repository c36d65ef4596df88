/*
 * fuzz_fail.c — the fuzz targets' one way to fail (fuzz_harness.h): the
 * message libFuzzer and fuzz_replay show, then abort().
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_harness.h"

void physd_fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "physd fuzz: invariant violated: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}
