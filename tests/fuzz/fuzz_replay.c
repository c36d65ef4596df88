/*
 * fuzz_replay.c — runs corpus files through the fuzz target without
 * libFuzzer: the regression run of the normal (GCC, ASan + UBSan) test
 * build, and a way to replay one crash input under a debugger.
 *
 * Usage: fuzz_replay [-v] [-m MODE] PATH...
 *   PATH   a file, or a directory whose regular files are all replayed
 *          (sorted by name, dot files skipped)
 *   -m     chunk mode 0..3 (fuzz_harness.h); default: every mode, so each
 *          file runs four times with its frames cut four ways
 *   -v     print every reply (-v -v: pushes too)
 * A session waits up to 2 s for its worlds to go idle (PHYSD_FUZZ_SETTLE_MS
 * overrides).
 * Exits 0 when every session passed (a failed invariant aborts), 2 on a
 * usage or I/O error.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fuzz_harness.h"

static int verbose = 0;
static int only_mode = -1;
static unsigned long files = 0;

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) abort();
    size_t r;
    while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            cap *= 2;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) abort();
            buf = nb;
        }
    }
    fclose(f);
    if (verbose) fprintf(stderr, "== %s\n", path);
    for (int m = 0; m < PF_CHUNK_MODES; m++)
        if (only_mode < 0 || only_mode == m) physd_fuzz_run(buf, n, m, verbose);
    free(buf);
    files++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int replay_path(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) return replay_file(path);
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return -1;
    }
    size_t cap = 64, n = 0;
    char **names = malloc(cap * sizeof *names);
    if (!names) abort();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap *= 2;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn) abort();
            names = nn;
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (!names[n]) abort();
        snprintf(names[n], len, "%s/%s", path, e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t k = 0; k < n; k++) {
        struct stat fs;
        if (stat(names[k], &fs) == 0 && S_ISREG(fs.st_mode) && replay_file(names[k]) != 0) rc = -1;
        free(names[k]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    int npaths = 0;
    LLVMFuzzerInitialize(&argc, &argv);
    /* Long enough for every StepWorld of the corpus to finish, so that the
     * every-request-gets-its-reply check runs on each session. */
    physd_fuzz_set_settle_ms(2000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0) {
            verbose++;
        } else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
            only_mode = atoi(argv[++i]);
            if (only_mode < 0 || only_mode >= PF_CHUNK_MODES) {
                fprintf(stderr, "fuzz_replay: -m takes 0..%d\n", PF_CHUNK_MODES - 1);
                return 2;
            }
        } else {
            npaths++;
            if (replay_path(argv[i]) != 0) rc = 2;
        }
    }
    if (npaths == 0) {
        fprintf(stderr, "usage: fuzz_replay [-v] [-m MODE] PATH...\n");
        return 2;
    }
    physd_fuzz_shutdown();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const physd_fuzz_stats *s = physd_fuzz_get_stats();
    printf("fuzz_replay: %lu files, %llu sessions, %llu requests, %llu replies (%llu ok), %llu pushes, "
           "%llu sessions ended by the server, %llu settled, %.2f s\n",
           files, (unsigned long long)s->sessions, (unsigned long long)s->requests, (unsigned long long)s->replies,
           (unsigned long long)s->replies_ok, (unsigned long long)s->pushes, (unsigned long long)s->server_closed,
           (unsigned long long)s->settled, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    if (files == 0) {
        fprintf(stderr, "fuzz_replay: no corpus files found\n");
        return 2;
    }
    return rc;
}
