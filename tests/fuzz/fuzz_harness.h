/*
 * fuzz_harness.h — the physd fuzz target: bytes fed to a real connection
 * (framer, dispatch, world host, broadcast) of one in-process server whose
 * only missing piece is the socket (ps_conn_open_virtual). Used by the
 * libFuzzer build (clang, -DPHYSD_FUZZ=ON) and by fuzz_replay, the corpus
 * replayer of the normal (GCC, sanitized) test build. The WebSocket target
 * is the same file built with PHYSD_FUZZ_WS; the snapshot target
 * (fuzz_snapshot.c) implements this interface too, its four modes being
 * fix-ups of the snapshot instead of ways to cut it.
 */
#ifndef PHYSD_FUZZ_HARNESS_H
#define PHYSD_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* How the input is cut into the pieces fed to the connection. */
enum {
    PF_CHUNK_WHOLE = 0, /* one feed */
    PF_CHUNK_BYTES = 1, /* one byte per feed (long inputs: 1..3 bytes) */
    PF_CHUNK_SMALL = 2, /* pseudo-random pieces of 1..64 bytes, the loop run between them */
    PF_CHUNK_LARGE = 3, /* pseudo-random pieces of 1..4096 bytes, the loop run between them */
    PF_CHUNK_MODES = 4,
    PF_CHUNK_AUTO = -1, /* chosen from a hash of the input (what libFuzzer uses) */
};

/* libFuzzer's entry points (also called by fuzz_replay). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One session: data fed to a fresh connection cut as mode says, then EOF,
 * teardown and the invariant checks (abort() with a message on failure).
 * verbose > 0 prints the replies to stderr. Returns 0. */
int physd_fuzz_run(const uint8_t *data, size_t size, int mode, int verbose);

/* Shuts the server down cleanly (fuzz_replay at exit: LeakSanitizer then
 * sees nothing of it). */
void physd_fuzz_shutdown(void);

/* How long a session may run the loop waiting for its worlds to go idle
 * (StepWorld requests to finish); PHYSD_FUZZ_SETTLE_MS takes precedence. */
void physd_fuzz_set_settle_ms(double ms);

/* A broken invariant: "physd fuzz: invariant violated: " and the message
 * on stderr, then abort() (fuzz_fail.c, shared by the targets). */
void physd_fuzz_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;

/* FNV-1a of an input: what PF_CHUNK_AUTO picks a mode by (fuzz_fail.c). */
uint64_t physd_fuzz_hash(const uint8_t *d, size_t n);

/* Prints the counters over all inputs run so far, one line's middle part
 * without a newline (fuzz_replay's summary: "N sessions, ..."). */
void physd_fuzz_print_stats(FILE *f);

#endif /* PHYSD_FUZZ_HARNESS_H */
