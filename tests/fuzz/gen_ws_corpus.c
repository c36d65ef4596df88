/*
 * gen_ws_corpus.c — writes the seed corpus of the WebSocket fuzz target
 * (fuzz_harness.c built with PHYSD_FUZZ_WS; the script format is described
 * above its ws_run).
 *
 * Normal path: every session of the TCP corpus (a sequence of
 * length-delimited ClientMessage frames) becomes two scripts: NAME.ws, a
 * browser that keeps up (each message, then writable events and a loop
 * turn), and NAME.stall.ws, one that stops reading (each message, then loop
 * turns only, more turns at the end, then the browser goes away with writes
 * in flight). Then five scripts of its own: a paused world stepped 12
 * times with a raw, a compact or a stats subscription and a browser that
 * never reads (frame replacement and the hard limit: grid1000 frames are
 * 66 KB, the target's hard limit 256 KiB), and contact events or raw frames
 * to a browser that reads one message now and then (the soft limit).
 *
 * Usage: fuzz_gen_ws_corpus TCP_CORPUS_DIR OUT_DIR (writes OUT_DIR/NAME.ws,
 * overwriting). Regenerate when the TCP corpus changes and commit the files.
 *
 * Failure modes: an unreadable input or unwritable output exits 1 naming
 * the file; a TCP corpus file whose frames do not parse is converted up to
 * its first bad frame, whose bytes become one last message (the fuzz
 * target sees the same refusal).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physd/v1/physd.pb-c.h"
#include "pw_frame.h"

enum { OP_MESSAGE = 0, OP_WRITABLE = 1, OP_LOOP = 2, OP_GONE = 3 };

static uint8_t *out;
static size_t olen, ocap;

static void put(const void *p, size_t n) {
    if (olen + n > ocap) {
        size_t nc = ocap ? ocap : 4096;
        while (nc < olen + n)
            nc *= 2;
        out = realloc(out, nc);
        if (!out) abort();
        ocap = nc;
    }
    memcpy(out + olen, p, n);
    olen += n;
}

static void op(int kind, int arg) {
    uint8_t b = (uint8_t)(kind | (arg << 2));
    put(&b, 1);
}

static void message(const uint8_t *p, size_t n) {
    uint8_t v[PW_VARINT_MAX];
    op(OP_MESSAGE, 0);
    put(v, pw_varint_put(v, n));
    put(p, n);
}

static void pb_message(const Physd__V1__ClientMessage *m) {
    size_t n = physd__v1__client_message__get_packed_size(m);
    uint8_t *b = malloc(n ? n : 1);
    if (!b) abort();
    physd__v1__client_message__pack(m, b);
    message(b, n);
    free(b);
}

static void save(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(out, 1, olen, f) != olen || fclose(f) != 0) {
        fprintf(stderr, "fuzz_gen_ws_corpus: cannot write %s\n", path);
        exit(1);
    }
    olen = 0;
}

/* One TCP corpus file as the two scripts. */
static void convert(const char *in_dir, const char *name, const char *out_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", in_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_gen_ws_corpus: cannot read %s\n", path);
        exit(1);
    }
    uint8_t *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            data = realloc(data, cap);
            if (!data) abort();
        }
        size_t r = fread(data + n, 1, cap - n, f);
        if (r == 0) break;
        n += r;
    }
    fclose(f);
    char base[1024];
    snprintf(base, sizeof base, "%s", name);
    char *dot = strrchr(base, '.');
    if (dot) *dot = 0;
    for (int stall = 0; stall < 2; stall++) {
        size_t off = 0;
        while (off < n) {
            size_t used = 0;
            uint64_t len = 0;
            if (pw_frame_peek(data + off, n - off, UINT64_MAX, &used, &len) < 0 || used == 0 || len > n - off - used) {
                message(data + off, n - off); /* the malformed rest as one message */
                break;
            }
            message(data + off + used, (size_t)len);
            off += used + (size_t)len;
            if (stall) {
                op(OP_LOOP, 7);
            } else {
                op(OP_WRITABLE, 15);
                op(OP_LOOP, 0);
            }
        }
        if (stall) {
            for (int k = 0; k < 30; k++)
                op(OP_LOOP, 7);
            op(OP_GONE, 0);
        }
        snprintf(path, sizeof path, "%s%s.ws", base, stall ? ".stall" : "");
        save(out_dir, path);
    }
    free(data);
}

/* hello, a paused world of preset, one subscription of kind (compact when
 * compact), 12 steps (enough for the hard limit with grid1000, cheap under
 * ASan); then the browser stalls (reads one message every read_every loop
 * records; 0: never) and goes away. */
static void stall_session(const char *out_dir, const char *name, const char *preset, int kind, int compact,
                          int read_every) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Hello h = PHYSD__V1__HELLO__INIT;
    h.protocol_version = 1;
    h.client_name = "fuzz-ws";
    m.request_id = 1;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_HELLO;
    m.hello = &h;
    pb_message(&m);
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.preset = (char *)preset;
    cw.start_paused = 1;
    m.request_id = 2;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_CREATE_WORLD;
    m.create_world = &cw;
    pb_message(&m);
    Physd__V1__Subscribe sub = PHYSD__V1__SUBSCRIBE__INIT;
    sub.world_id = 1;
    sub.kind = (Physd__V1__StreamKind)kind;
    sub.every = 1;
    sub.per_iteration_merits = kind == PHYSD__V1__STREAM_KIND__STREAM_STATS;
    if (compact) sub.encoding = PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
    m.request_id = 3;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_SUBSCRIBE;
    m.subscribe = &sub;
    pb_message(&m);
    op(OP_WRITABLE, 3);
    op(OP_LOOP, 0);
    op(OP_WRITABLE, 3);
    Physd__V1__StepWorld st = PHYSD__V1__STEP_WORLD__INIT;
    st.world_id = 1;
    st.steps = 12;
    m.request_id = 4;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_STEP;
    m.step = &st;
    pb_message(&m);
    for (int k = 0; k < 20; k++) {
        op(OP_LOOP, 7);
        if (read_every && k % read_every == 0) op(OP_WRITABLE, 0);
    }
    op(OP_GONE, 1);
    save(out_dir, name);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: fuzz_gen_ws_corpus TCP_CORPUS_DIR OUT_DIR\n");
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "fuzz_gen_ws_corpus: cannot open %s\n", argv[1]);
        return 1;
    }
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".bin") != 0) continue;
        names = realloc(names, (n + 1) * sizeof *names);
        if (!names || !(names[n] = strdup(e->d_name))) abort();
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    for (size_t k = 0; k < n; k++) {
        convert(argv[1], names[k], argv[2]);
        free(names[k]);
    }
    free(names);
    stall_session(argv[2], "stall_raw_grid1000.ws", "grid1000", PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 0, 0);
    stall_session(argv[2], "stall_compact_grid1000.ws", "grid1000", PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 1, 0);
    stall_session(argv[2], "stall_stats_stack20.ws", "stack20", PHYSD__V1__STREAM_KIND__STREAM_STATS, 0, 0);
    stall_session(argv[2], "slow_contacts_box_drop.ws", "box_drop", PHYSD__V1__STREAM_KIND__STREAM_CONTACTS, 0, 5);
    stall_session(argv[2], "slow_raw_grid1000.ws", "grid1000", PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS, 0, 3);
    printf("fuzz_gen_ws_corpus: %zu sessions converted, 5 stall scripts, in %s\n", n, argv[2]);
    free(out);
    return 0;
}
