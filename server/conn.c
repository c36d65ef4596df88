/*
 * conn.c — one client connection: the frame decoder, the output queue and
 * the socket callbacks that drive them.
 *
 * Normal path: libuv reads into the connection's read buffer; the frame
 * decoder (proto/pw_frame.h) parses the varint length incrementally, checks
 * it against max_frame and only then allocates for the body (growing with
 * the bytes that arrive), fills it and hands the complete frame to
 * dispatch. While the body's buffer has room for bytes still expected,
 * reads go straight into it (the decoder's window) without the copy. Replies and pushes are queued on the output
 * queue as refcounted buffers; the server's prepare phase flushes each
 * connection with gathered writes (at most PS_WRITE_BATCH buffers each):
 * on a plain socket first written at once (uv_try_write, usually the whole
 * queue in one writev), what the socket does not take through uv_write,
 * whose callback starts the next.
 *
 * Failure modes: a malformed varint (more than 10 bytes) or a length above
 * max_frame gets an error reply with request id 0 and the connection is
 * closed after that reply is written; so does a frame that protobuf-c cannot
 * parse and a frame cut short by EOF. A read or write error closes the
 * connection. A connection whose backlog (pending output plus output
 * dropped since its last completed write) passes the hard limit is closed.
 *
 * Invariants: handle memory is released only from the close callback and
 * only when no deferred request still holds a reference (refs). Once
 * closing is set nothing more is queued. Queued entries are never in
 * flight: only entries still in the queue are replaced or dropped.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"
#include "tls.h"

/* ---------------------------------------------------------- output queue */

void ps_outq_init(ps_outq *q, uint64_t soft, uint64_t hard) {
    memset(q, 0, sizeof *q);
    q->soft = soft;
    q->hard = hard;
}

void ps_outq_free(ps_outq *q) {
    for (size_t k = 0; k < q->count; k++) {
        ps_buf_unref(q->q[(q->head + k) % q->cap].buf);
        ps_buf_unref(q->q[(q->head + k) % q->cap].tail);
    }
    free(q->q);
    q->q = NULL;
    q->count = q->head = q->cap = 0;
    q->queued_bytes = 0;
}

uint64_t ps_outq_pending(const ps_outq *q) { return q->queued_bytes + q->inflight_bytes; }
uint64_t ps_outq_backlog(const ps_outq *q) { return q->queued_bytes + q->inflight_bytes + q->dropped_bytes; }

static int outq_grow(ps_outq *q) {
    size_t ncap = q->cap ? q->cap * 2 : 16;
    ps_out_entry *nq = malloc(ncap * sizeof *nq);
    if (!nq) return PS_ENOMEM;
    for (size_t k = 0; k < q->count; k++)
        nq[k] = q->q[(q->head + k) % q->cap];
    free(q->q);
    q->q = nq;
    q->cap = ncap;
    q->head = 0;
    return 0;
}

int ps_outq_push(ps_outq *q, ps_buf *buf, int kind, uint64_t stream, int *dropped) {
    return ps_outq_push2(q, buf, NULL, kind, stream, dropped);
}

size_t ps_out_entry_len(const ps_out_entry *e) { return e->buf->len + (e->tail ? e->tail->len : 0); }

int ps_outq_push2(ps_outq *q, ps_buf *buf, ps_buf *tail, int kind, uint64_t stream, int *dropped) {
    const size_t len = buf->len + (tail ? tail->len : 0);
    *dropped = 0;
    if (kind == PS_OUT_FRAME) {
        for (size_t k = 0; k < q->count; k++) {
            ps_out_entry *e = &q->q[(q->head + k) % q->cap];
            if (e->kind == PS_OUT_FRAME && e->stream == stream) {
                const size_t old = ps_out_entry_len(e);
                q->dropped++;
                q->dropped_bytes += old;
                q->queued_bytes -= old;
                if (ps_outq_backlog(q) + len > q->hard) {
                    /* Keep the old entry's accounting consistent before failing. */
                    q->queued_bytes += old;
                    return PS_EHARD;
                }
                ps_buf_unref(e->buf);
                ps_buf_unref(e->tail);
                ps_buf_ref(buf);
                if (tail) ps_buf_ref(tail);
                e->buf = buf;
                e->tail = tail;
                q->queued_bytes += len;
                *dropped = 1;
                return 0;
            }
        }
    }
    if (kind == PS_OUT_EVENT && ps_outq_pending(q) > q->soft) {
        q->dropped++;
        q->dropped_bytes += len;
        *dropped = 1;
        return ps_outq_backlog(q) > q->hard ? PS_EHARD : 0;
    }
    if (ps_outq_backlog(q) + len > q->hard) return PS_EHARD;
    if (q->count == q->cap && outq_grow(q) != 0) return PS_ENOMEM;
    ps_out_entry *e = &q->q[(q->head + q->count) % q->cap];
    e->buf = buf;
    e->tail = tail;
    e->kind = kind;
    e->stream = stream;
    ps_buf_ref(buf);
    if (tail) ps_buf_ref(tail);
    q->count++;
    q->queued_bytes += len;
    return 0;
}

size_t ps_outq_take(ps_outq *q, ps_out_entry *out, size_t max) {
    size_t n = 0;
    while (n < max && q->count > 0) {
        out[n] = q->q[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        q->queued_bytes -= ps_out_entry_len(&out[n]);
        q->inflight_bytes += ps_out_entry_len(&out[n]);
        n++;
    }
    return n;
}

void ps_outq_written(ps_outq *q, uint64_t bytes) {
    q->inflight_bytes -= bytes;
    q->dropped_bytes = 0;
}

/* ------------------------------------------------------------ lifecycle */

void ps_conn_ref(ps_conn *c) { c->refs++; }

void ps_conn_unref(ps_conn *c) {
    if (--c->refs == 0) {
        if (c->abud && --c->abud->refs == 0) free(c->abud);
        ps_conn_free_principals(c);
        ps_bulk_free(c);
        ps_upload_end(c);
        free(c);
    }
}

static void start_drain(ps_conn *c);
static void held_release(ps_conn *c);

static void on_close(uv_handle_t *handle) {
    ps_conn *c = handle->data;
    ps_server *s = c->srv;
    ps_outq_free(&c->outq);
    pw_decoder_free(&c->framer);
    ps_tls_conn_free(c);
    ps_conn_unref(c);
    ps_server_maybe_finish(s);
}

void ps_conn_close(ps_conn *c, const char *why) {
    if (c->closing) return;
    ps_server *s = c->srv;
    c->closing = 1;
    if (c->draining) s->ndraining--;
    ps_log("conn %llu (%s%s%s) closed: %s", (unsigned long long)c->id, c->peer, c->name[0] ? " " : "", c->name, why);
    ps_conn_drop_subs(c);
    held_release(c);
    /* An async sink's write in flight will not complete: release it, and
     * tell the sink's owner (a WebSocket session) the connection is gone. */
    if (c->sink_async && c->writing) ps_conn_sink_done(c, UV_ECANCELED);
    if (c->sink_closed) c->sink_closed(c->sink_arg, c);
    /* Unlink from the connection list and the flush list. */
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nconns--;
    if (c->dirty) {
        ps_conn **pp = &s->dirty;
        while (*pp && *pp != c)
            pp = &(*pp)->dirty_next;
        if (*pp) *pp = c->dirty_next;
        c->dirty = 0;
    }
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

/* ----------------------------------------------------------- lingering */

/* After an error reply that ends the connection, the peer may still have
 * unread bytes in flight (the hello of a refused connection): closing at
 * once would make the kernel reset the connection and the client could lose
 * the reply. So the server sends FIN (uv_shutdown), reads and discards until
 * the peer closes, and gives up after one second (the server's drain timer). */
static void on_drain_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    ps_conn *c = handle->data;
    *buf = uv_buf_init(c->srv->rbuf, sizeof c->srv->rbuf);
}

static void on_drain_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    ps_conn *c = stream->data;
    if (nread < 0 && !c->closing) ps_conn_close(c, "after error reply");
}

static void on_drain_shutdown(uv_shutdown_t *req, int status) {
    ps_conn *c = req->data;
    if (status < 0 && !c->closing) ps_conn_close(c, "after error reply");
    ps_conn_unref(c);
}

static void on_drain_timer(uv_timer_t *t) {
    ps_server *s = t->data;
    uint64_t now = ps_now_ns();
    for (ps_conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->draining && !c->closing && now >= c->drain_deadline_ns)
            ps_conn_close(c, "after error reply (drain timeout)");
    }
    if (s->ndraining == 0) uv_timer_stop(t);
}

static void start_drain(ps_conn *c) {
    if (c->draining || c->closing) return;
    ps_server *s = c->srv;
    if (c->sink) {
        ps_conn_close(c, "after error reply");
        return;
    }
    c->drain_deadline_ns = ps_now_ns() + 1000000000ull;
    c->sreq.data = c;
    ps_conn_ref(c);
    if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_drain_shutdown) != 0) {
        ps_conn_unref(c);
        ps_conn_close(c, "after error reply");
        return;
    }
    c->draining = 1; /* counted in s->ndraining until ps_conn_close */
    s->ndraining++;
    if (uv_read_start((uv_stream_t *)&c->tcp, on_drain_alloc, on_drain_read) != 0) {
        ps_conn_close(c, "after error reply");
        return;
    }
    if (!uv_is_active((uv_handle_t *)&s->drain_timer)) uv_timer_start(&s->drain_timer, on_drain_timer, 100, 100);
}

/* ---------------------------------------------------------------- writes */

/* The in-flight entries were written (status 0) or not (< 0): releases
 * them; a compact frame written whole becomes a baseline. 0 when the
 * connection may write on, else it is closing. */
static int write_done(ps_conn *c, int status) {
    uint64_t bytes = 0;
    for (size_t k = 0; k < c->n_inflight; k++) {
        bytes += ps_out_entry_len(&c->inflight[k]);
        /* A compact frame written whole is a baseline (compact.c). */
        if (status == 0 && !c->closing && c->inflight[k].buf->mark[0]) ps_compact_written(c, &c->inflight[k]);
        ps_buf_unref(c->inflight[k].buf);
        ps_buf_unref(c->inflight[k].tail);
    }
    if (status == 0) {
        c->srv->metrics.bytes_out += bytes;
        c->srv->metrics.frames_out += c->n_inflight;
    }
    c->n_inflight = 0;
    c->writing = 0;
    ps_outq_written(&c->outq, bytes);
    if (c->closing) return -1;
    if (status < 0) {
        ps_conn_close(c, uv_strerror(status));
        return -1;
    }
    return 0;
}

static void on_write(uv_write_t *req, int status) {
    ps_conn *c = req->data;
    if (write_done(c, status) == 0) ps_conn_flush(c);
}

/* Gathered writes tried at once per flush before one goes through libuv's
 * queue: a few, so a large snapshot (image.c pumps its next chunk into the
 * queue as it drains) does not hold the loop. */
#define PS_TRY_WRITES 4

/* One flush: what the queue holds goes out as gathered writes. A plain TCP
 * socket is first written at once (uv_try_write): a subscriber that keeps
 * up takes its tick's frames in that one writev, with no write request,
 * no completion callback in the next loop iteration and no epoll change
 * (libuv re-arms the socket's watcher after each queued write: about half
 * a system call more per subscriber and tick, docs/streams.md). What the
 * socket does not take goes through uv_write, whose callback continues. */
void ps_conn_flush(ps_conn *c) {
    for (int tries = 0;; tries++) {
        if (c->closing || c->writing) return;
        /* fsync always: what a reply acknowledges is on disk before any byte
         * of it leaves (group commit: one fsync per dirty journal). */
        if (c->bulk) ps_bulk_pump(c);
        if (c->srv->jdirty && c->srv->cfg.fsync_mode == PS_FSYNC_ALWAYS) ps_journal_sync_dirty(c->srv);
        size_t n = c->tls ? ps_tls_take(c) : ps_outq_take(&c->outq, c->inflight, PS_WRITE_BATCH);
        if (n == 0) {
            if (c->close_after_flush == 1 && !c->srv->stopping)
                start_drain(c);
            else if (c->close_after_flush)
                ps_conn_close(c, c->close_after_flush == 2 ? "shutdown" : "after error reply");
            return;
        }
        size_t nb = 0, total = 0;
        for (size_t k = 0; k < n; k++) {
            c->wbufs[nb++] = uv_buf_init((char *)c->inflight[k].buf->data, (unsigned)c->inflight[k].buf->len);
            if (c->inflight[k].tail)
                c->wbufs[nb++] = uv_buf_init((char *)c->inflight[k].tail->data, (unsigned)c->inflight[k].tail->len);
            total += ps_out_entry_len(&c->inflight[k]);
        }
        c->n_inflight = n;
        c->wreq.data = c;
        if (c->sink) {
            /* A connection without a socket (tests, fuzzing): the sink takes
             * the bytes and the write completes at once. */
            if (c->sink_async) {
                c->writing = 1; /* until ps_conn_sink_done */
                c->sink(c->sink_arg, c, c->wbufs, (unsigned)nb);
                return;
            }
            c->sink(c->sink_arg, c, c->wbufs, (unsigned)nb);
            c->writing = 1;
            on_write(&c->wreq, 0);
            return;
        }
        uv_buf_t *bufs = c->wbufs;
        int r = 0;
        if (!c->tls && tries < PS_TRY_WRITES) {
            r = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)nb);
            if (r >= 0 && (size_t)r == total) {
                if (write_done(c, 0) < 0) return;
                continue;
            }
            /* Part of it (the rest waits for the socket) or nothing. */
            for (size_t w = r > 0 ? (size_t)r : 0; w > 0;) {
                if (w >= bufs->len) {
                    w -= bufs->len;
                    bufs++;
                    nb--;
                } else {
                    bufs->base += w;
                    bufs->len -= (unsigned)w;
                    w = 0;
                }
            }
            r = r == UV_EAGAIN || r >= 0 ? 0 : r;
        }
        if (r == 0)
            r = c->tls ? ps_tls_write(c, (unsigned)nb, on_write)
                       : uv_write(&c->wreq, (uv_stream_t *)&c->tcp, bufs, (unsigned)nb, on_write);
        if (r < 0) {
            /* The callback will not run: release the buffers here. */
            uint64_t bytes = 0;
            for (size_t k = 0; k < n; k++) {
                bytes += ps_out_entry_len(&c->inflight[k]);
                ps_buf_unref(c->inflight[k].buf);
                ps_buf_unref(c->inflight[k].tail);
            }
            c->n_inflight = 0;
            ps_outq_written(&c->outq, bytes);
            ps_conn_close(c, uv_strerror(r));
            return;
        }
        c->writing = 1;
        return;
    }
}

int ps_conn_send(ps_conn *c, ps_buf *b, int kind, uint64_t stream, int *dropped) {
    return ps_conn_send2(c, b, NULL, kind, stream, dropped);
}

int ps_conn_send2(ps_conn *c, ps_buf *b, ps_buf *tail, int kind, uint64_t stream, int *dropped) {
    int d = 0;
    if (dropped) *dropped = 0;
    if (c->closing || !b) return UV_ECANCELED;
    int r = ps_outq_push2(&c->outq, b, tail, kind, stream, &d);
    if (dropped) *dropped = d;
    if (d) {
        c->srv->metrics.frames_dropped++;
        if (kind == PS_OUT_EVENT) PS_LIMIT_HIT(c->srv, OUTPUT_SOFT_LIMIT);
    }
    if (r == PS_EHARD) {
        PS_LIMIT_HIT(c->srv, OUTPUT_HARD_LIMIT);
        char why[128];
        snprintf(why, sizeof why, "%s (%llu bytes)", ps_strerror(r), (unsigned long long)c->outq.hard);
        ps_conn_close(c, why);
        return r;
    }
    if (r < 0) {
        ps_conn_close(c, ps_strerror(PS_ENOMEM));
        return r;
    }
    ps_server_mark_dirty(c->srv, c);
    return r;
}

void ps_conn_report_drops(ps_conn *c, uint64_t now_ns) {
    if (c->closing || c->outq.dropped == c->drops_reported) return;
    if (now_ns - c->last_drop_notice_ns < 1000000000ull) return;
    c->last_drop_notice_ns = now_ns;
    c->drops_reported = c->outq.dropped;
    Physd__V1__Notice n = PHYSD__V1__NOTICE__INIT;
    n.kind = PHYSD__V1__NOTICE_KIND__NOTICE_DROPPED;
    n.dropped = c->outq.dropped;
    n.message = "pushes replaced or dropped because the connection reads too slowly";
    ps_smsg m = PHYSD__V1__SERVER_MESSAGE__INIT;
    m.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE;
    m.notice = &n;
    ps_buf *b = ps_encode(&m);
    ps_conn_send(c, b, PS_OUT_FRAME, UINT64_MAX, NULL); /* a newer drop notice replaces an unsent one */
    if (b) ps_buf_unref(b);
}

/* --------------------------------------------------------------- replies */

void ps_send_reply(ps_conn *c, ps_reply_msg *r) {
    if (c->closing) return;
    ps_smsg m = PHYSD__V1__SERVER_MESSAGE__INIT;
    m.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_REPLY;
    m.reply = r;
    if (r->status != 0 && (unsigned)r->status < PS_METRICS_STATUS_CODES) c->srv->metrics.errors[r->status]++;
    /* Every frame the server sends fits in the max_frame it announced: a
     * reply that would not is replaced by an error saying so. */
    size_t size = 0, frame = 0;
    if (pw_frame_measure(&m.base, c->srv->cfg.max_frame, &size, &frame) == PW_ETOOBIG) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "the reply would be %zu bytes, over max_frame (%llu): ask for less (fewer ids, no shapes)", size,
                 (unsigned long long)c->srv->cfg.max_frame);
        ps_reply_msg e = PHYSD__V1__REPLY__INIT;
        e.request_id = r->request_id;
        e.status = (Physd__V1__Status)PS_ST_EXHAUSTED;
        e.message = msg;
        e.tick = r->tick;
        m.reply = &e;
        ps_buf *eb = ps_encode(&m);
        if (eb) ps_conn_send(c, eb, PS_OUT_REPLY, 0, NULL);
        ps_buf_unref(eb);
        return;
    }
    ps_buf *b = ps_encode(&m);
    if (!b) {
        ps_conn_close(c, "out of memory encoding a reply");
        return;
    }
    ps_conn_send(c, b, PS_OUT_REPLY, 0, NULL);
    ps_buf_unref(b);
}

void ps_reply_status(ps_conn *c, uint64_t request_id, const ps_status *st, uint64_t tick) {
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    Physd__V1__ErrorDetail d = PHYSD__V1__ERROR_DETAIL__INIT;
    r.request_id = request_id;
    r.status = (Physd__V1__Status)st->code;
    r.message = (char *)st->msg;
    r.tick = tick;
    if (st->has_index) {
        d.index = st->index;
        r.error = &d;
    }
    ps_send_reply(c, &r);
}

void ps_reply_error(ps_conn *c, uint64_t request_id, int code, const char *msg) {
    ps_reply_msg r = PHYSD__V1__REPLY__INIT;
    r.request_id = request_id;
    r.status = (Physd__V1__Status)code;
    r.message = (char *)msg;
    ps_send_reply(c, &r);
}

void ps_send_notice(ps_conn *c, int kind, uint64_t world_id, uint64_t tick, const char *msg) {
    ps_send_notice_by(c, kind, world_id, tick, msg, NULL);
}

void ps_send_notice_by(ps_conn *c, int kind, uint64_t world_id, uint64_t tick, const char *msg, const char *principal) {
    if (c->closing) return;
    Physd__V1__Notice n = PHYSD__V1__NOTICE__INIT;
    n.kind = (Physd__V1__NoticeKind)kind;
    n.world_id = world_id;
    n.tick = tick;
    n.message = (char *)(msg ? msg : "");
    n.principal = (char *)(principal ? principal : "");
    ps_smsg m = PHYSD__V1__SERVER_MESSAGE__INIT;
    m.msg_case = PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE;
    m.notice = &n;
    ps_buf *b = ps_encode(&m);
    ps_conn_send(c, b, PS_OUT_REPLY, 0, NULL);
    if (b) ps_buf_unref(b);
}

/* ----------------------------------------------------------------- reads */

/* Reads go straight into the frame's buffer while it has room for bytes
 * still expected (the decoder's window); otherwise into rbuf, from which
 * the decoder copies (and grows its buffer with what arrived). */
static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    ps_conn *c = handle->data;
    uint8_t *w = NULL;
    size_t n = 0;
    if (!c->closing && !c->close_after_flush && !c->tls && !c->paused_ns) pw_decoder_window(&c->framer, &w, &n);
    /* At most rbuf's size per read, as without the window: the loop turns
     * as often between reads of a large frame (timers stay on time). */
    if (n > sizeof c->srv->rbuf) n = sizeof c->srv->rbuf;
    *buf = n > 0 ? uv_buf_init((char *)w, (unsigned)n) : uv_buf_init(c->srv->rbuf, sizeof c->srv->rbuf);
}

/* Replies with request id 0 and closes once the reply is written. */
static void fatal_frame_error(ps_conn *c, int code, const char *msg) {
    ps_log("conn %llu (%s): %s", (unsigned long long)c->id, c->peer, msg);
    ps_reply_error(c, 0, code, msg);
    c->close_after_flush = 1;
    if (!c->sink) uv_read_stop((uv_stream_t *)&c->tcp);
    ps_server_mark_dirty(c->srv, c);
}

static void conn_eof(ps_conn *c, ssize_t nread) {
    if (nread == UV_EOF && pw_decoder_partial(&c->framer)) {
        char msg[160];
        snprintf(msg, sizeof msg, "truncated frame: EOF after %llu of %llu bytes", (unsigned long long)c->framer.have,
                 (unsigned long long)c->framer.len);
        fatal_frame_error(c, PS_ST_INVALID, msg);
        return;
    }
    if (c->writing || c->outq.count > 0) {
        /* Half-closed by the peer: finish writing what it asked for. */
        c->close_after_flush = 1;
        if (!c->sink) uv_read_stop((uv_stream_t *)&c->tcp);
        ps_server_mark_dirty(c->srv, c);
        return;
    }
    ps_conn_close(c, nread == UV_EOF ? "peer closed" : uv_strerror((int)nread));
}

static int budget_pause(ps_conn *c, const uint8_t *p, size_t left);
static void charged_dispatch(ps_conn *c, const uint8_t *frame, size_t flen);

/* Bytes from the peer: frames are cut out and dispatched one by one; past
 * the connection's loop-time budget the rest waits (budget_pause). */
static void conn_frames(ps_conn *c, const uint8_t *p, size_t left) {
    if (budget_pause(c, p, left)) return;
    while (left > 0 && !c->closing && !c->close_after_flush) {
        size_t used = 0;
        const uint8_t *frame = NULL;
        size_t flen = 0;
        int r = pw_decoder_feed(&c->framer, p, left, &used, &frame, &flen);
        if (r < 0) {
            char msg[160];
            int code = PS_ST_INTERNAL;
            if (r == PS_ETOOBIG) {
                if (!c->hello_done && c->framer.max_frame < c->srv->cfg.max_frame)
                    PS_LIMIT_HIT(c->srv, MAX_UNAUTH_FRAME);
                else
                    PS_LIMIT_HIT(c->srv, MAX_FRAME);
            } else if (r == PS_EPOOL) {
                PS_LIMIT_HIT(c->srv, MAX_INPUT_MEMORY);
            }
            if (r == PS_ETOOBIG && !c->hello_done) {
                snprintf(msg, sizeof msg,
                         "frame length exceeds max_unauth_frame (%llu bytes) before a successful hello",
                         (unsigned long long)c->framer.max_frame);
                code = PS_ST_EXHAUSTED;
            } else if (r == PS_ETOOBIG) {
                snprintf(msg, sizeof msg, "%s (%llu bytes)", ps_strerror(r), (unsigned long long)c->framer.max_frame);
                code = PS_ST_EXHAUSTED;
            } else if (r == PS_EVARINT) {
                snprintf(msg, sizeof msg, "%s", ps_strerror(r));
                code = PS_ST_INVALID;
            } else if (r == PS_EPOOL) {
                snprintf(msg, sizeof msg, "%s (max_input_memory = %llu bytes)", ps_strerror(r),
                         (unsigned long long)c->srv->cfg.max_input_memory);
                code = PS_ST_EXHAUSTED;
            } else {
                snprintf(msg, sizeof msg, "%s for a frame", ps_strerror(PS_ENOMEM));
            }
            fatal_frame_error(c, code, msg);
            return;
        }
        p += used;
        left -= used;
        if (c->srv->input_used > c->srv->input_peak) c->srv->input_peak = c->srv->input_used;
        if (frame) {
            c->frame_start_ns = 0;
            charged_dispatch(c, frame, flen);
            if (budget_pause(c, p, left)) return;
        } else if (c->frame_start_ns == 0 && pw_decoder_partial(&c->framer)) {
            c->frame_start_ns = ps_now_ns();
        }
    }
    if (!c->closing && c->frame_start_ns == 0 && pw_decoder_partial(&c->framer)) c->frame_start_ns = ps_now_ns();
}

static void conn_input(ps_conn *c, const uint8_t *p, size_t left) {
    c->srv->metrics.bytes_in += left;
    conn_frames(c, p, left);
}

/* nread bytes landed in the decoder's window. */
static void conn_window(ps_conn *c, size_t nread) {
    c->srv->metrics.bytes_in += nread;
    const uint8_t *frame = NULL;
    size_t flen = 0;
    pw_decoder_commit(&c->framer, nread, &frame, &flen);
    if (!frame) return;
    c->frame_start_ns = 0;
    charged_dispatch(c, frame, flen);
    budget_pause(c, NULL, 0);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
    ps_conn *c = stream->data;
    if (c->closing || c->close_after_flush) return;
    if (nread < 0) {
        conn_eof(c, nread);
        return;
    }
    if (c->tls) {
        ps_tls_input(c, (const uint8_t *)buf->base, (size_t)nread);
        return;
    }
    if (nread > 0 && buf->base != c->srv->rbuf)
        conn_window(c, (size_t)nread);
    else
        conn_input(c, (const uint8_t *)buf->base, (size_t)nread);
}

/* TLS (tls.c): decrypted bytes, and the peer's close_notify. */
void ps_conn_plain(ps_conn *c, const uint8_t *p, size_t n, int in_window) {
    if (in_window)
        conn_window(c, n);
    else
        conn_input(c, p, n);
}

void ps_conn_eof(ps_conn *c) { conn_eof(c, UV_EOF); }

void ps_conn_feed(ps_conn *c, const uint8_t *data, size_t n) {
    if (c->closing || c->close_after_flush) return;
    if (n == 0 && c->paused_ns) {
        c->held_eof = 1; /* after the held bytes */
        return;
    }
    if (n == 0) {
        conn_eof(c, UV_EOF);
        return;
    }
    conn_input(c, data, n);
}

/* -------------------------------------------------------- pending memory */

int ps_pending_reserve(ps_conn *c, uint64_t bytes, const char *what, ps_status *st) {
    ps_server *s = c->srv;
    const uint64_t max = s->cfg.max_pending_memory, share = max / 4;
    if (s->pending_bytes + bytes > max) {
        PS_LIMIT_HIT(s, MAX_PENDING_MEMORY);
        return ps_fail(st, PS_ST_EXHAUSTED,
                       "waiting requests hold %llu bytes, this one %llu more (max_pending_memory %llu): retry after %s",
                       (unsigned long long)s->pending_bytes, (unsigned long long)bytes, (unsigned long long)max, what);
    }
    if (c->pending_bytes + bytes > share) {
        PS_LIMIT_HIT(s, MAX_PENDING_MEMORY);
        return ps_fail(st, PS_ST_EXHAUSTED,
                       "this connection's waiting requests hold %llu bytes, this one %llu more (its share, "
                       "max_pending_memory / 4: %llu): retry after %s",
                       (unsigned long long)c->pending_bytes, (unsigned long long)bytes, (unsigned long long)share,
                       what);
    }
    s->pending_bytes += bytes;
    c->pending_bytes += bytes;
    return 0;
}

void ps_pending_release(ps_conn *c, uint64_t bytes) {
    c->srv->pending_bytes -= bytes;
    c->pending_bytes -= bytes;
}

/* ------------------------------------------------------ loop-time budget */

/* Every request's time on the loop (decoding, checking, running: at once in
 * ps_dispatch_frame or later at its world's tick boundary) is charged to
 * its connection's bucket of max_conn_loop_ms_per_second, which holds
 * conn_loop_burst_ms. A connection that owes time (the bucket below zero)
 * is not read from until the bucket is back at zero: the socket's reading
 * stops (a WebSocket's through its sink_flow, a TLS connection's decryption
 * too), bytes already read wait in held, and the budget timer resumes it.
 * Nothing is refused or lost: the client only goes slower, and the time it
 * waits does not count against its frame or hello deadline. A request's
 * own cost is not known before it runs (it is bounded by the other limits:
 * max_edits_per_batch, max_bodies_per_world, max_frame), so a connection
 * may overdraw by one request and then waits for what it overdrew. */

void ps_charge_begin(ps_server *s, ps_charge *ch, ps_conn *c) {
    ch->prev = s->charge_top;
    ch->c = c;
    ch->inner_ns = 0;
    ch->start_ns = ps_now_ns();
    s->charge_top = ch;
}

/* A bucket of ms refilled at rate ms per second up to burst (a first use
 * finds it full). */
static void bucket_refill(double *tokens, uint64_t *last, double rate, double burst, uint64_t now) {
    if (*last == 0)
        *tokens = burst;
    else if (now > *last)
        *tokens += rate * (double)(now - *last) * 1e-9;
    if (*tokens > burst) *tokens = burst;
    *last = now;
}

static void conn_refill(ps_conn *c, uint64_t now) {
    const ps_config *cfg = &c->srv->cfg;
    if (cfg->max_conn_loop_ms_per_second > 0)
        bucket_refill(&c->loop_tokens_ms, &c->loop_last_ns, cfg->max_conn_loop_ms_per_second, cfg->conn_loop_burst_ms,
                      now);
    if (c->abud)
        bucket_refill(&c->abud->tokens_ms, &c->abud->last_ns, cfg->max_address_loop_ms_per_second,
                      cfg->conn_loop_burst_ms, now);
}

void ps_charge_end(ps_server *s, ps_charge *ch) {
    const uint64_t now = ps_now_ns();
    const uint64_t el = now - ch->start_ns;
    s->charge_top = ch->prev;
    if (ch->prev) ch->prev->inner_ns += el;
    const uint64_t own = el > ch->inner_ns ? el - ch->inner_ns : 0;
    ps_conn *c = ch->c;
    if (!c) return;
    s->metrics.conn_loop_ns += own;
    conn_refill(c, now);
    if (s->cfg.max_conn_loop_ms_per_second > 0) c->loop_tokens_ms -= (double)own * 1e-6;
    if (c->abud) c->abud->tokens_ms -= (double)own * 1e-6;
}

void ps_conn_attach_address(ps_conn *c) {
    ps_server *s = c->srv;
    if (c->abud || s->cfg.max_address_loop_ms_per_second <= 0) return;
    for (ps_conn *o = s->conns; o; o = o->next)
        if (o != c && o->abud && strcmp(o->addr, c->addr) == 0) {
            c->abud = o->abud;
            c->abud->refs++;
            return;
        }
    c->abud = calloc(1, sizeof *c->abud); /* NULL: this connection goes without (out of memory) */
    if (c->abud) c->abud->refs = 1;
}

static void charged_dispatch(ps_conn *c, const uint8_t *frame, size_t flen) {
    ps_charge ch;
    ps_charge_begin(c->srv, &ch, c);
    const int r = ps_dispatch_frame(c, frame, flen);
    ps_charge_end(c->srv, &ch);
    if (r < 0) fatal_frame_error(c, PS_ST_INVALID, "malformed frame: not a physd.v1.ClientMessage");
}

/* Keeps n bytes for the resume, counted in the server's input memory (past
 * max_input_memory the connection is closed, as for a partial frame). */
static int held_append(ps_conn *c, const uint8_t *p, size_t n) {
    ps_server *s = c->srv;
    if (n == 0) return 0;
    if (c->held_len + n > c->held_cap) {
        size_t ncap = c->held_cap ? c->held_cap : 4096;
        while (ncap < c->held_len + n)
            ncap *= 2;
        if (s->input_used + (ncap - c->held_cap) > s->cfg.max_input_memory) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s (max_input_memory = %llu bytes)", ps_strerror(PS_EPOOL),
                     (unsigned long long)s->cfg.max_input_memory);
            PS_LIMIT_HIT(s, MAX_INPUT_MEMORY);
            fatal_frame_error(c, PS_ST_EXHAUSTED, msg);
            return -1;
        }
        uint8_t *nb = realloc(c->held, ncap);
        if (!nb) {
            fatal_frame_error(c, PS_ST_INTERNAL, "out of memory holding input");
            return -1;
        }
        s->input_used += ncap - c->held_cap;
        if (s->input_used > s->input_peak) s->input_peak = s->input_used;
        c->held = nb;
        c->held_cap = ncap;
    }
    memcpy(c->held + c->held_len, p, n);
    c->held_len += n;
    return 0;
}

static void held_release(ps_conn *c) {
    if (c->held) c->srv->input_used -= c->held_cap;
    free(c->held);
    c->held = NULL;
    c->held_len = c->held_cap = 0;
    if (c->paused_ns) c->srv->metrics.conn_paused_ns += ps_now_ns() - c->paused_ns;
    c->paused_ns = 0;
}

static void budget_arm(ps_server *s, uint64_t now);

/* 1 when the connection waits (its bytes p..left kept in held): paused
 * already, or its bucket is below zero now (reading stops). 0: go on. */
static int budget_pause(ps_conn *c, const uint8_t *p, size_t left) {
    ps_server *s = c->srv;
    if (c->closing || c->close_after_flush) return 0;
    if (!c->paused_ns) {
        const double rate = s->cfg.max_conn_loop_ms_per_second, arate = s->cfg.max_address_loop_ms_per_second;
        if (rate <= 0 && !c->abud) return 0;
        const uint64_t now = ps_now_ns();
        conn_refill(c, now);
        /* Paused until both its own and its address's debts are paid. */
        const double own_s = rate > 0 && c->loop_tokens_ms < 0 ? -c->loop_tokens_ms / rate : 0;
        const double addr_s = c->abud && c->abud->tokens_ms < 0 ? -c->abud->tokens_ms / arate : 0;
        if (own_s <= 0 && addr_s <= 0) return 0;
        c->paused_ns = now;
        c->resume_ns = now + (uint64_t)((own_s > addr_s ? own_s : addr_s) * 1e9) + 1;
        if (own_s >= addr_s)
            PS_LIMIT_HIT(s, MAX_CONN_LOOP_MS_PER_SECOND);
        else
            PS_LIMIT_HIT(s, MAX_ADDRESS_LOOP_MS_PER_SECOND);
        if (c->sink_flow)
            c->sink_flow(c->sink_arg, 0);
        else if (!c->sink)
            uv_read_stop((uv_stream_t *)&c->tcp);
        if (!s->budget_due_ns || c->resume_ns < s->budget_due_ns) budget_arm(s, now);
    }
    held_append(c, p, left);
    return 1;
}

/* The pause is over: the held bytes first, then reading again (unless they
 * paused it once more). Its deadlines move on by the time it waited. */
static void budget_resume(ps_conn *c, uint64_t now) {
    ps_server *s = c->srv;
    const uint64_t waited = now - c->paused_ns;
    s->metrics.conn_paused_ns += waited;
    c->paused_ns = 0;
    if (c->frame_start_ns) c->frame_start_ns += waited;
    if (!c->hello_done) c->accepted_ns += waited;
    if (c->closing || c->close_after_flush) return;
    uint8_t *hb = c->held;
    const size_t hl = c->held_len, hcap = c->held_cap;
    const int eof = c->held_eof;
    c->held = NULL;
    c->held_len = c->held_cap = 0;
    c->held_eof = 0;
    if (hb) {
        conn_frames(c, hb, hl); /* may pause again: the rest goes to a new held */
        s->input_used -= hcap;
        free(hb);
    }
    if (c->closing || c->close_after_flush) return;
    if (c->paused_ns) {
        c->held_eof |= eof;
        return;
    }
    if (eof) {
        conn_eof(c, UV_EOF);
        return;
    }
    if (c->tls) {
        ps_tls_resume(c); /* plaintext OpenSSL still holds */
        if (c->closing || c->close_after_flush || c->paused_ns) return;
    }
    if (c->sink_flow)
        c->sink_flow(c->sink_arg, 1);
    else if (!c->sink && uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
        ps_conn_close(c, "cannot read again after a pause");
}

static void on_budget_timer(uv_timer_t *t) {
    ps_server *s = t->data;
    s->budget_due_ns = 0;
    const uint64_t now = ps_now_ns();
    /* Gathered first: a resumed connection's requests may close others. */
    size_t n = 0, cap = 0;
    ps_conn **due = NULL;
    for (ps_conn *c = s->conns; c; c = c->next) {
        if (!c->paused_ns || c->resume_ns > now + 200000) continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            ps_conn **nd = realloc(due, ncap * sizeof *nd);
            if (!nd) break; /* the others at the next firing */
            due = nd;
            cap = ncap;
        }
        ps_conn_ref(c);
        due[n++] = c;
    }
    for (size_t k = 0; k < n; k++) {
        if (due[k]->paused_ns && !due[k]->closing) budget_resume(due[k], now);
        ps_conn_unref(due[k]);
    }
    free(due);
    budget_arm(s, ps_now_ns());
}

/* Arms the timer for the earliest resume of a paused connection. */
static void budget_arm(ps_server *s, uint64_t now) {
    uint64_t first = 0;
    for (ps_conn *c = s->conns; c; c = c->next)
        if (c->paused_ns && !c->closing && (!first || c->resume_ns < first)) first = c->resume_ns;
    if (!first || s->stopping) {
        s->budget_due_ns = 0;
        uv_timer_stop(&s->budget_timer);
        return;
    }
    const uint64_t ms = first > now ? (first - now + 999999) / 1000000 : 0;
    s->budget_due_ns = first;
    uv_timer_start(&s->budget_timer, on_budget_timer, ms, 0);
}

void ps_conn_budget_init(ps_server *s) {
    uv_timer_init(&s->loop, &s->budget_timer);
    s->budget_timer.data = s;
}

/* Closes connections that have not said hello within hello_timeout or
 * hold a partial frame older than frame_timeout (a slow or stalled sender
 * must not keep input memory or a connection slot). */
void ps_conn_check_deadlines(ps_server *s, uint64_t now) {
    const uint64_t hello_ns = (uint64_t)(s->cfg.hello_timeout * 1e9);
    const uint64_t frame_ns = (uint64_t)(s->cfg.frame_timeout * 1e9);
    for (ps_conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        if (c->closing || c->close_after_flush || c->draining) continue;
        if (c->paused_ns) continue; /* not the peer's delay: its deadlines move on at the resume */
        if (c->tls && ps_tls_check_deadline(c, now)) continue; /* in its TLS handshake */
        char msg[160];
        if (!c->hello_done && now - c->accepted_ns > hello_ns) {
            snprintf(msg, sizeof msg, "no hello within hello_timeout (%g s)", s->cfg.hello_timeout);
            PS_LIMIT_HIT(s, HELLO_TIMEOUT);
        } else if (c->frame_start_ns && now - c->frame_start_ns > frame_ns) {
            snprintf(msg, sizeof msg, "frame incomplete after frame_timeout (%g s): %llu of %llu bytes",
                     s->cfg.frame_timeout, (unsigned long long)c->framer.have, (unsigned long long)c->framer.len);
            PS_LIMIT_HIT(s, FRAME_TIMEOUT);
        } else {
            continue;
        }
        fatal_frame_error(c, PS_ST_DEADLINE, msg);
        pw_decoder_free(&c->framer); /* give the memory back now */
    }
}

static void conn_link(ps_server *s, ps_conn *c) {
    c->srv = s;
    c->refs = 1;
    c->id = ++s->next_conn_id;
    c->accepted_ns = ps_now_ns();
    /* Before a hello succeeds frames are small (max_unauth_frame): an
     * unauthenticated peer costs little (docs/security.md). */
    pw_decoder_init(&c->framer,
                    s->cfg.max_unauth_frame < s->cfg.max_frame ? s->cfg.max_unauth_frame : s->cfg.max_frame);
    pw_decoder_set_pool(&c->framer, &s->input_used, s->cfg.max_input_memory);
    ps_outq_init(&c->outq, s->cfg.output_soft_limit, s->cfg.output_hard_limit);
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    ps_server_start_housekeeping(s);
}

ps_conn *ps_conn_open_virtual(ps_server *s, ps_write_sink sink, void *arg) {
    ps_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (uv_tcp_init(&s->loop, &c->tcp) < 0) {
        free(c);
        return NULL;
    }
    c->tcp.data = c;
    c->sink = sink;
    c->sink_arg = arg;
    conn_link(s, c);
    snprintf(c->peer, sizeof c->peer, "virtual");
    snprintf(c->addr, sizeof c->addr, "virtual");
    s->metrics.connections_total[PS_KIND_VIRTUAL]++;
    return c;
}

ps_conn *ps_conn_open_async(ps_server *s, ps_write_sink sink, void (*closed)(void *arg, ps_conn *c), void *arg) {
    ps_conn *c = ps_conn_open_virtual(s, sink, arg);
    if (!c) return NULL;
    s->metrics.connections_total[PS_KIND_VIRTUAL]--;
    s->metrics.connections_total[PS_KIND_WS]++;
    c->sink_async = 1;
    c->sink_closed = closed;
    return c;
}

void ps_conn_sink_done(ps_conn *c, int status) {
    if (c->writing) on_write(&c->wreq, status);
}

/* Connections from the same address (not counting c). */
static int conns_from(ps_server *s, const ps_conn *c) {
    int n = 0;
    for (ps_conn *o = s->conns; o; o = o->next)
        if (o != c && !o->closing && strcmp(o->addr, c->addr) == 0) n++;
    return n;
}

int ps_conn_accept(ps_server *s) {
    ps_conn *c = calloc(1, sizeof *c);
    if (!c) return UV_ENOMEM;
    int r = uv_tcp_init(&s->loop, &c->tcp);
    if (r < 0) {
        free(c);
        return r;
    }
    c->tcp.data = c;
    conn_link(s, c);
    r = uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->tcp);
    if (r < 0) {
        ps_conn_close(c, uv_strerror(r));
        return r;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    snprintf(c->peer, sizeof c->peer, "?");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_INET) {
        char ip[48];
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "%s:%d", ip, ntohs(((struct sockaddr_in *)&ss)->sin_port));
        snprintf(c->addr, sizeof c->addr, "%s", ip);
    } else if (ss.ss_family == AF_INET6) {
        char ip[48];
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "[%s]:%d", ip, ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
        snprintf(c->addr, sizeof c->addr, "%s", ip);
    }
    ps_conn_attach_address(c);
    if (s->nconns > s->cfg.max_connections) {
        char msg[96];
        snprintf(msg, sizeof msg, "too many connections (max_connections = %d)", s->cfg.max_connections);
        PS_LIMIT_HIT(s, MAX_CONNECTIONS);
        fatal_frame_error(c, PS_ST_EXHAUSTED, msg);
        return 0;
    }
    if (conns_from(s, c) >= s->cfg.max_connections_per_address) {
        PS_LIMIT_HIT(s, MAX_CONNECTIONS_PER_ADDRESS);
        char msg[128];
        snprintf(msg, sizeof msg, "too many connections from %s (max_connections_per_address = %d)", c->addr,
                 s->cfg.max_connections_per_address);
        fatal_frame_error(c, PS_ST_EXHAUSTED, msg);
        return 0;
    }
    ps_log("conn %llu (%s) accepted", (unsigned long long)c->id, c->peer);
    s->metrics.connections_total[s->tls ? PS_KIND_TLS : PS_KIND_TCP]++;
    if (s->tls && ps_tls_conn_start(c, s->tls) < 0) {
        ps_conn_close(c, "out of memory for TLS");
        return 0;
    }
    r = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (r < 0) ps_conn_close(c, uv_strerror(r));
    return 0;
}
