/*
 * fuzz_replay.c — runs corpus files through the fuzz target without
 * libFuzzer: the regression run of the normal (GCC, ASan + UBSan) test
 * build, and a way to replay one crash input under a debugger.
 *
 * Usage: fuzz_replay [-v] [-m MODE] [--mutate N [--seconds S] [--seed X]] PATH...
 *   PATH   a file, or a directory whose regular files are all replayed
 *          (sorted by name, dot files skipped)
 *   -m     chunk mode 0..3 (fuzz_harness.h; the snapshot target's
 *          fix-ups, fuzz_snapshot.c); default: every mode, so each file
 *          runs four times with its frames cut four ways
 *   -v     print every reply (-v -v: pushes too)
 *   --mutate N  after the replay, N inputs made by mutating the files
 *          (byte flips, inserts, deletes, copies, splices of two files,
 *          truncation; a fixed seed, so a run is repeatable), each run once
 *          with the chunk mode its hash picks; --seconds S stops earlier.
 *          Each input is written to fuzz-mutate-current.bin in the current
 *          directory before it runs: after a crash that file reproduces it.
 *          This is the bounded fuzzing run of the GCC test build (no
 *          coverage guidance; libFuzzer's build has that).
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
static int keep_inputs = 0; /* --mutate: keep the files for mutation */
typedef struct input {
    unsigned char *data;
    size_t len;
} input;
static input *inputs;
static size_t ninputs, inputs_cap;
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
    if (keep_inputs) {
        if (ninputs == inputs_cap) {
            inputs_cap = inputs_cap ? 2 * inputs_cap : 64;
            input *ni = realloc(inputs, inputs_cap * sizeof *ni);
            if (!ni) abort();
            inputs = ni;
        }
        inputs[ninputs].data = buf;
        inputs[ninputs++].len = n;
    } else {
        free(buf);
    }
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

/* ------------------------------------------------------------ mutations */

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

#define MUT_MAX 65536

/* One random change of buf[0..*n) (capacity MUT_MAX). */
static void mutate_once(unsigned char *buf, size_t *n) {
    static const unsigned char interesting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x10, 0x12, 0x22, 0x3f, 0xfe};
    size_t len = *n;
    switch (rnd() % 8) {
    case 0: /* flip a bit */
        if (len) buf[below(len)] ^= (unsigned char)(1u << (rnd() % 8));
        break;
    case 1: /* an interesting byte */
        if (len) buf[below(len)] = interesting[below(sizeof interesting)];
        break;
    case 2: /* insert random bytes */
    {
        size_t k = 1 + below(8), at = below(len + 1);
        if (len + k > MUT_MAX) break;
        memmove(buf + at + k, buf + at, len - at);
        for (size_t i = 0; i < k; i++)
            buf[at + i] = (unsigned char)rnd();
        *n = len + k;
        break;
    }
    case 3: /* delete a range */
    {
        if (!len) break;
        size_t at = below(len), k = 1 + below(len - at < 16 ? len - at : 16);
        memmove(buf + at, buf + at + k, len - at - k);
        *n = len - k;
        break;
    }
    case 4: /* copy a range elsewhere (repeats requests, frames, fields) */
    {
        if (!len) break;
        size_t from = below(len), k = 1 + below(len - from), at = below(len + 1);
        if (len + k > MUT_MAX) break;
        unsigned char *tmp = malloc(k);
        if (!tmp) abort();
        memcpy(tmp, buf + from, k);
        memmove(buf + at + k, buf + at, len - at);
        memcpy(buf + at, tmp, k);
        free(tmp);
        *n = len + k;
        break;
    }
    case 5: /* splice: the tail of another input after a prefix of this one */
    {
        const input *o = &inputs[below(ninputs)];
        size_t at = below(len + 1), from = below(o->len + 1), k = o->len - from;
        if (at + k > MUT_MAX) k = MUT_MAX - at;
        memcpy(buf + at, o->data + from, k);
        *n = at + k;
        break;
    }
    case 6: /* truncate */
        if (len) *n = below(len);
        break;
    default: /* add or subtract a small number to a byte (lengths, ids, counts) */
        if (len) buf[below(len)] += (unsigned char)(1 + below(4)) * (rnd() & 1 ? 1 : 0xff);
        break;
    }
}

static unsigned long run_mutations(unsigned long count, double seconds, uint64_t seed) {
    if (ninputs == 0) return 0;
    rng_state = seed ? seed : 0x9e3779b97f4a7c15ull;
    unsigned char *buf = malloc(MUT_MAX);
    if (!buf) abort();
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long done = 0;
    for (; done < count; done++) {
        if (seconds > 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 > seconds) break;
        }
        const input *base = &inputs[below(ninputs)];
        size_t n = base->len < MUT_MAX ? base->len : MUT_MAX;
        memcpy(buf, base->data, n);
        int k = 1 + (int)below(4);
        for (int i = 0; i < k; i++)
            mutate_once(buf, &n);
        FILE *f = fopen("fuzz-mutate-current.bin", "wb");
        if (f) {
            fwrite(buf, 1, n, f);
            fclose(f);
        }
        physd_fuzz_run(buf, n, PF_CHUNK_AUTO, verbose > 1);
    }
    remove("fuzz-mutate-current.bin");
    free(buf);
    return done;
}

int main(int argc, char **argv) {
    int npaths = 0;
    unsigned long mutations = 0;
    double seconds = 0;
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--mutate") == 0) keep_inputs = 1;
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
        } else if (strcmp(argv[i], "--mutate") == 0 && i + 1 < argc) {
            mutations = strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
        } else {
            npaths++;
            if (replay_path(argv[i]) != 0) rc = 2;
        }
    }
    if (npaths == 0) {
        fprintf(stderr, "usage: fuzz_replay [-v] [-m MODE] [--mutate N [--seconds S] [--seed X]] PATH...\n");
        return 2;
    }
    unsigned long mutated = 0;
    if (mutations > 0) {
        /* A short settle: the mutated StepWorld requests must not make the
         * run long (the reply check then covers only settled sessions). */
        physd_fuzz_set_settle_ms(10);
        mutated = run_mutations(mutations, seconds, seed);
    }
    for (size_t k = 0; k < ninputs; k++)
        free(inputs[k].data);
    free(inputs);
    physd_fuzz_shutdown();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("fuzz_replay: %lu files, %lu mutated inputs, ", files, mutated);
    physd_fuzz_print_stats(stdout);
    printf(", %.2f s\n", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    if (files == 0) {
        fprintf(stderr, "fuzz_replay: no corpus files found\n");
        return 2;
    }
    return rc;
}
