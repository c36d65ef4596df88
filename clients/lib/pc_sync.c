/*
 * pc_sync.c — the blocking helpers of pc_client.h for command-line tools
 * and tests: connect, call and close by running the loop one iteration at a
 * time until the awaited callback has run.
 *
 * Normal path: start the asynchronous operation with a small heap record
 * as its callback data, then uv_run(loop, UV_RUN_ONCE) until the record is
 * marked done.
 *
 * Failure modes: a timed-out pc_call returns PC_ETIMEDOUT and leaves its
 * record behind marked abandoned; the reply callback frees it whenever it
 * finally runs (every pending request gets its callback once, at the latest
 * when the client is closed). A failed connect closes the client before
 * returning.
 *
 * Invariants: these must not run inside a callback of the same loop
 * (libuv forbids re-entering uv_run). The timeout timer is closed before
 * pc_call returns and its memory freed in its close callback.
 */
#include <stdio.h>
#include <stdlib.h>

#include "physd/pc_client.h"

typedef struct sync_connect {
    int done, status;
} sync_connect;

static void on_sync_connect(pc_client *c, int status, void *data) {
    (void)c;
    sync_connect *s = data;
    s->done = 1;
    s->status = status;
}

int pc_connect_sync(pc_client **out, uv_loop_t *loop, const char *host, int port, int timeout_ms,
                    const pc_options *opts) {
    return pc_connect_sync_msg(out, loop, host, port, timeout_ms, opts, NULL, 0);
}

int pc_connect_sync_msg(pc_client **out, uv_loop_t *loop, const char *host, int port, int timeout_ms,
                        const pc_options *opts, char *msg, size_t msglen) {
    sync_connect s = {0, 0};
    if (msg && msglen) msg[0] = 0;
    pc_client *c = NULL;
    *out = NULL;
    int r = pc_client_connect(&c, loop, host, port, timeout_ms, opts, on_sync_connect, &s);
    if (r < 0) {
        /* The half-made client is released by its close callbacks. */
        uv_run(loop, UV_RUN_NOWAIT);
        return r;
    }
    while (!s.done)
        uv_run(loop, UV_RUN_ONCE);
    if (s.status < 0) {
        if (msg && msglen) snprintf(msg, msglen, "%s", pc_client_error_message(c));
        pc_close_sync(c);
        return s.status;
    }
    *out = c;
    return 0;
}

typedef struct sync_call {
    int done, err, abandoned;
    Physd__V1__ServerMessage *msg;
} sync_call;

static void on_sync_reply(pc_client *c, int err, const Physd__V1__Reply *reply, void *data) {
    sync_call *s = data;
    (void)reply;
    if (s->abandoned) {
        free(s);
        return;
    }
    s->done = 1;
    s->err = err;
    if (!err) s->msg = pc_client_take_message(c);
}

static void on_timer(uv_timer_t *t) { *(int *)t->data = 1; }
static void on_timer_closed(uv_handle_t *h) { free(h); }

int pc_call(pc_client *c, Physd__V1__ClientMessage *m, int timeout_ms, Physd__V1__ServerMessage **reply) {
    *reply = NULL;
    sync_call *s = calloc(1, sizeof *s);
    if (!s) return UV_ENOMEM;
    int r = pc_request(c, m, on_sync_reply, s);
    if (r < 0) {
        free(s);
        return r;
    }
    uv_loop_t *loop = pc_client_loop(c);
    uv_timer_t *t = NULL;
    int expired = 0;
    if (timeout_ms > 0 && (t = malloc(sizeof *t)) != NULL) {
        uv_timer_init(loop, t);
        t->data = &expired;
        uv_timer_start(t, on_timer, (uint64_t)timeout_ms, 0);
    }
    while (!s->done && !expired)
        uv_run(loop, UV_RUN_ONCE);
    if (t) uv_close((uv_handle_t *)t, on_timer_closed);
    if (!s->done) {
        s->abandoned = 1;
        return PC_ETIMEDOUT;
    }
    r = s->err;
    *reply = s->msg;
    free(s);
    return r;
}

static void on_sync_closed(void *data) { *(int *)data = 1; }

void pc_close_sync(pc_client *c) {
    if (!c) return;
    int done = 0;
    uv_loop_t *loop = pc_client_loop(c);
    pc_client_close(c, on_sync_closed, &done);
    while (!done)
        uv_run(loop, UV_RUN_ONCE);
}
