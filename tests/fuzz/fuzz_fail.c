/*
 * fuzz_fail.c — what the fuzz targets share (fuzz_harness.h): their one
 * way to fail (the message libFuzzer and fuzz_replay show, then abort()),
 * and the hash of an input that picks its mode.
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

uint64_t physd_fuzz_hash(const uint8_t *d, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 1099511628211ull;
    return h;
}
