/*
 * pc_client.c — the connection of pc_client.h: connect with a timeout,
 * hello, request ids matched to callbacks, framed reads, coalesced writes,
 * push dispatch, loss of the connection and close.
 *
 * Normal path: pc_client_connect opens a timer (the overall timeout) and a
 * TCP handle, resolves the host (literal addresses directly, names through
 * uv_getaddrinfo, preferring IPv4), connects, starts reading and sends the
 * hello as an ordinary request; its reply completes the connect. Requests
 * are encoded as varint-delimited ClientMessages and appended to an output
 * buffer; at most one uv_write is in flight, and whatever was appended while
 * it ran goes out as one write when it completes (two buffers swapped, so a
 * burst of pipelined requests costs a handful of writes). Reads land in an
 * input buffer; every complete frame is unpacked, dispatched (replies by
 * request id through an open-addressing table, pushes to the handlers) and
 * freed, and the unread tail is moved to the front. A frame or contact
 * push that is one part of several is, with reassemble on, kept in the
 * assembly of its (kind, world, subscription) until every part of its tick
 * is there; then the parts are merged into the first one (arrays appended
 * in part order) and delivered as one message.
 *
 * Failure modes: a synchronous failure returns an error and calls nothing.
 * Resolution, connect or hello failures, and the timeout, end in exactly
 * one connect callback with the error. A lost connection (EOF, read or write
 * error, a frame above max_frame, a frame that does not parse) closes the
 * socket, gives every pending request its error once (in request-id order),
 * then calls on_disconnect. A reply with request id 0 is the server's
 * framing or limit error: its message is kept and the following EOF is
 * reported as PC_EREJECTED.
 *
 * Parts of a tick that never complete (a newer tick's part arrives first)
 * are freed and counted; a stale part (older tick than the assembly's) is
 * dropped and counted.
 *
 * Invariants: the timer handle stays open until pc_client_close, so every
 * close ends in a close callback; the memory is released only there, once
 * both handles are closed and no resolution is pending. Once the state is
 * DISCONNECTED or closing is set, nothing more is sent and no further frame
 * is dispatched. Each pending entry is removed from the table before its
 * callback runs, so a callback runs at most once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pc_tls.h"
#include "physd/pc_client.h"
#include "pw_frame.h"
#include "pc_compact.h"
#include "pw_status.h"

/* ------------------------------------------------------------ errors */

const char *pc_strerror(int err) {
    switch (err) {
#define PC_ERR_MSG(name, value, msg)                                                                                   \
    case value:                                                                                                        \
        return msg;
        PC_ERRNO_MAP(PC_ERR_MSG)
#undef PC_ERR_MSG
    case 0:
        return "ok";
    default:
        return err < 0 ? uv_strerror(err) : "unknown error";
    }
}

const char *pc_err_name(int err) {
    switch (err) {
#define PC_ERR_NAME(name, value, msg)                                                                                  \
    case value:                                                                                                        \
        return "PC_E" #name;
        PC_ERRNO_MAP(PC_ERR_NAME)
#undef PC_ERR_NAME
    case 0:
        return "OK";
    default:
        return err < 0 ? uv_err_name(err) : "UNKNOWN";
    }
}

/* The status names are the protocol's list, shared with the server. */
const char *pc_status_name(int status) { return pw_status_name(status); }

/* ------------------------------------------------------- pending table */

typedef struct pending {
    uint64_t id; /* 0: empty slot */
    pc_reply_cb cb;
    void *data;
} pending;

typedef struct pending_table {
    pending *slots;
    size_t cap; /* a power of two, or 0 */
    size_t count;
} pending_table;

static size_t slot_of(uint64_t id, size_t cap) {
    /* Fibonacci hashing spreads sequential ids. */
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static int table_insert(pending_table *t, uint64_t id, pc_reply_cb cb, void *data) {
    if ((t->count + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        pending *ns = calloc(ncap, sizeof *ns);
        if (!ns) return UV_ENOMEM;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i].id) continue;
            size_t k = slot_of(t->slots[i].id, ncap);
            while (ns[k].id)
                k = (k + 1) & (ncap - 1);
            ns[k] = t->slots[i];
        }
        free(t->slots);
        t->slots = ns;
        t->cap = ncap;
    }
    size_t k = slot_of(id, t->cap);
    while (t->slots[k].id)
        k = (k + 1) & (t->cap - 1);
    t->slots[k].id = id;
    t->slots[k].cb = cb;
    t->slots[k].data = data;
    t->count++;
    return 0;
}

/* Removes id into *out; returns 1 when it was present. Deletion shifts the
 * following entries of the probe run back, so no tombstones are needed. */
static int table_remove(pending_table *t, uint64_t id, pending *out) {
    if (!t->cap || !id) return 0;
    size_t mask = t->cap - 1, k = slot_of(id, t->cap);
    while (t->slots[k].id && t->slots[k].id != id)
        k = (k + 1) & mask;
    if (!t->slots[k].id) return 0;
    *out = t->slots[k];
    t->slots[k].id = 0;
    t->count--;
    size_t hole = k;
    for (size_t j = (k + 1) & mask; t->slots[j].id; j = (j + 1) & mask) {
        size_t home = slot_of(t->slots[j].id, t->cap);
        /* Move j into the hole unless its home lies cyclically in (hole, j]. */
        int stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            t->slots[hole] = t->slots[j];
            t->slots[j].id = 0;
            hole = j;
        }
    }
    return 1;
}

static int cmp_pending(const void *a, const void *b) {
    uint64_t x = ((const pending *)a)->id, y = ((const pending *)b)->id;
    return x < y ? -1 : x > y;
}

/* ------------------------------------------------------------- client */

/* The parts received so far of one tick's frame (or contact events) of
 * one stream. */
typedef struct assembly {
    int kind; /* PHYSD__V1__SERVER_MESSAGE__MSG_FRAME or _MSG_CONTACTS */
    uint64_t world, sub, tick;
    uint32_t parts, have;           /* parts == 0: empty */
    Physd__V1__ServerMessage **msg; /* [parts], NULL until that part came */
} assembly;

/* Every part holds at least one body and a world at most 100000 bodies, so
 * a push claiming more parts is delivered as it comes, never gathered. */
#define PC_MAX_PARTS 100000u

enum { ST_RESOLVING, ST_CONNECTING, ST_HELLO, ST_CONNECTED, ST_DISCONNECTED };

struct pc_client {
    uv_loop_t *loop;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_connect_t creq;
    uv_getaddrinfo_t gai;
    uv_write_t wreq;
    int state;
    int closing;  /* pc_client_close was called */
    int tcp_open; /* the TCP handle is initialized and not yet closing */
    int open_handles;
    int gai_pending;
    int writing;
    int rejected; /* a reply with request id 0 arrived */
    int connect_done;
    pc_connect_cb connect_cb;
    void *connect_data;
    pc_close_cb close_cb;
    void *close_data;
    pc_handlers h;
    pc_options opt;
    char name[129];
    char *cred; /* credentials (copied from the options), NULL: none */
    char errmsg[256];
    int port;
    uint64_t max_frame;
    uint64_t next_id;
    pending_table table;
    uint8_t *out, *wbuf, *in;
    size_t out_len, out_cap, wbuf_len, wbuf_cap, in_len, in_cap;
    struct assembly *asm_; /* frames and contact events in parts, n_asm of them */
    size_t n_asm, cap_asm;
    Physd__V1__ServerMessage *cur;   /* being delivered */
    Physd__V1__ServerMessage *hello; /* kept hello reply */
    pc_counters k;
    void *user;
    pc_tls *tls;                    /* TLS (pc_tls.c), NULL for plain TCP */
    pc_ctable *ctab;                /* compact subscriptions' baselines (pc_compact.c) */
    pc_compact_frame_cb on_compact; /* frames of compact subscriptions not decoded here */
    int tls_err;                    /* the TLS setup failed (errmsg says why): reported at connect */
};

static void on_handle_closed(uv_handle_t *h);

/* Frees the parts held by a and empties it; returns how many there were. */
static uint32_t assembly_clear(assembly *a) {
    uint32_t n = 0;
    for (uint32_t i = 0; a->msg && i < a->parts; i++)
        if (a->msg[i]) {
            physd__v1__server_message__free_unpacked(a->msg[i], NULL);
            n++;
        }
    free(a->msg);
    a->msg = NULL;
    a->parts = a->have = 0;
    return n;
}

static void maybe_free(pc_client *c) {
    if (!c->closing || c->open_handles > 0 || c->gai_pending) return;
    pc_close_cb cb = c->close_cb;
    void *data = c->close_data;
    for (size_t i = 0; i < c->n_asm; i++)
        assembly_clear(&c->asm_[i]);
    free(c->asm_);
    if (c->hello) physd__v1__server_message__free_unpacked(c->hello, NULL);
    pc_ctable_free(c->ctab);
    if (c->cred) {
        memset(c->cred, 0, strlen(c->cred));
        free(c->cred);
    }
    free(c->table.slots);
    free(c->out);
    free(c->wbuf);
    free(c->in);
    pc_tls_free(c->tls);
    free(c);
    if (cb) cb(data);
}

static void on_handle_closed(uv_handle_t *h) {
    pc_client *c = h->data;
    c->open_handles--;
    maybe_free(c);
}

static void close_tcp(pc_client *c) {
    if (!c->tcp_open) return;
    c->tcp_open = 0;
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
}

/* Gives every pending request the error err, once each, in id order. */
static void fail_pending(pc_client *c, int err) {
    if (!c->table.count) return;
    size_t n = 0;
    pending *all = malloc(c->table.count * sizeof *all);
    if (!all) {
        /* Without memory for a copy, deliver straight from the table. */
        for (size_t i = 0; i < c->table.cap; i++) {
            pending p;
            if (c->table.slots[i].id && table_remove(&c->table, c->table.slots[i].id, &p)) {
                if (p.cb) p.cb(c, err, NULL, p.data);
                i = (size_t)-1; /* the table shifted: start again */
            }
        }
        return;
    }
    for (size_t i = 0; i < c->table.cap; i++)
        if (c->table.slots[i].id) all[n++] = c->table.slots[i];
    memset(c->table.slots, 0, c->table.cap * sizeof *c->table.slots);
    c->table.count = 0;
    qsort(all, n, sizeof *all, cmp_pending);
    for (size_t i = 0; i < n; i++)
        if (all[i].cb) all[i].cb(c, err, NULL, all[i].data);
    free(all);
}

static void finish_connect(pc_client *c, int status) {
    if (c->connect_done) return;
    c->connect_done = 1;
    if (c->connect_cb) c->connect_cb(c, status, c->connect_data);
}

/* The connection is gone (or never came): close the socket, fail what is
 * pending, then tell whoever waits (the connect callback or on_disconnect). */
static void disconnect(pc_client *c, int err) {
    if (c->state == ST_DISCONNECTED) return;
    int was_connected = c->state == ST_CONNECTED;
    c->state = ST_DISCONNECTED;
    if (!c->closing) uv_timer_stop(&c->timer);
    if (c->gai_pending) uv_cancel((uv_req_t *)&c->gai);
    close_tcp(c);
    fail_pending(c, err);
    if (!c->connect_done) {
        finish_connect(c, err);
    } else if (was_connected && !c->closing && c->h.on_disconnect) {
        c->h.on_disconnect(c, err, c->h.data);
    }
}

/* ------------------------------------------------------------- writes */

static void on_write(uv_write_t *req, int status);
static int flush_write(pc_client *c);

/* Starts a write of everything appended so far unless one is in flight. */
static int flush(pc_client *c) {
    if (c->writing || !c->out_len || !c->tcp_open) return 0;
    if (c->tls) {
        /* The hello waits for the handshake; then wbuf gets the ciphertext. */
        if (!pc_tls_ready(c->tls)) return 0;
        int r = pc_tls_seal(c->tls, c->out, c->out_len, &c->wbuf, &c->wbuf_len, &c->wbuf_cap);
        if (r < 0) return r;
        c->out_len = 0;
        return flush_write(c);
    }
    uint8_t *b = c->wbuf;
    size_t cap = c->wbuf_cap;
    c->wbuf = c->out;
    c->wbuf_cap = c->out_cap;
    c->wbuf_len = c->out_len;
    c->out = b;
    c->out_cap = cap;
    c->out_len = 0;
    return flush_write(c);
}

static int flush_write(pc_client *c) {
    uv_buf_t buf = uv_buf_init((char *)c->wbuf, (unsigned)c->wbuf_len);
    int r = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &buf, 1, on_write);
    if (r < 0) return r;
    c->writing = 1;
    return 0;
}

static void on_write(uv_write_t *req, int status) {
    pc_client *c = req->data;
    c->writing = 0;
    if (status < 0) {
        disconnect(c, status);
        return;
    }
    c->k.bytes_sent += c->wbuf_len;
    c->wbuf_len = 0;
    if (c->state == ST_DISCONNECTED) return;
    int r = flush(c);
    if (r < 0) disconnect(c, r);
}

static int reserve(uint8_t **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need)
        ncap *= 2;
    uint8_t *nb = realloc(*buf, ncap);
    if (!nb) return UV_ENOMEM;
    *buf = nb;
    *cap = ncap;
    return 0;
}

/* Appends one delimited message to the output buffer; a message longer
 * than the server's max_frame is refused. */
static int append_message(pc_client *c, const Physd__V1__ClientMessage *m) {
    uint64_t max = UINT64_MAX;
    if (c->hello && c->hello->reply->hello->max_frame > 0) max = c->hello->reply->hello->max_frame;
    size_t body = 0, frame = 0;
    if (pw_frame_measure(&m->base, max, &body, &frame) < 0) return PC_ETOOBIG;
    if (reserve(&c->out, &c->out_cap, c->out_len + frame)) return UV_ENOMEM;
    if (pw_frame_write(c->out + c->out_len, &m->base, body) != frame) return PC_EENCODE;
    c->out_len += frame;
    return 0;
}

static int send_request(pc_client *c, Physd__V1__ClientMessage *m, pc_reply_cb cb, void *data) {
    uint64_t id = c->next_id;
    m->request_id = id;
    size_t mark = c->out_len;
    int r = append_message(c, m);
    if (r < 0) return r;
    r = table_insert(&c->table, id, cb, data);
    if (r < 0) {
        c->out_len = mark;
        return r;
    }
    c->next_id++;
    r = flush(c);
    if (r < 0) {
        pending p;
        table_remove(&c->table, id, &p);
        disconnect(c, r);
        return r;
    }
    c->k.requests_sent++;
    return 0;
}

int pc_request(pc_client *c, Physd__V1__ClientMessage *m, pc_reply_cb cb, void *data) {
    if (!c || !m) return UV_EINVAL;
    if (c->closing || c->state != ST_CONNECTED) return PC_ENOTCONN;
    return send_request(c, m, cb, data);
}

/* -------------------------------------------------------------- reads */

/* The assembly of a stream, created when absent; NULL without memory. */
static assembly *assembly_of(pc_client *c, int kind, uint64_t world, uint64_t sub) {
    for (size_t i = 0; i < c->n_asm; i++) {
        assembly *a = &c->asm_[i];
        if (a->kind == kind && a->world == world && a->sub == sub) return a;
    }
    if (c->n_asm == c->cap_asm) {
        size_t ncap = c->cap_asm ? 2 * c->cap_asm : 4;
        assembly *na = realloc(c->asm_, ncap * sizeof *na);
        if (!na) return NULL;
        c->asm_ = na;
        c->cap_asm = ncap;
    }
    assembly *a = &c->asm_[c->n_asm++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->world = world;
    a->sub = sub;
    return a;
}

/* Appends n elements of size sz from src to the malloc'd array *dst of
 * *dn elements; 0 or UV_ENOMEM. */
static int append_array(void *dst, size_t *dn, const void *src, size_t n, size_t sz) {
    if (!n) return 0;
    void **d = dst;
    void *na = realloc(*d, (*dn + n) * sz);
    if (!na) return UV_ENOMEM;
    memcpy((char *)na + *dn * sz, src, n * sz);
    *d = na;
    *dn += n;
    return 0;
}

/* Merges a complete assembly into its first part (bodies and poses, or
 * events, appended in part order) and returns it; the other parts are
 * freed. NULL without memory (everything freed). */
static Physd__V1__ServerMessage *assembly_merge(assembly *a) {
    Physd__V1__ServerMessage *m = a->msg[0];
    int ok = 1;
    for (uint32_t i = 1; i < a->parts && ok; i++) {
        Physd__V1__ServerMessage *p = a->msg[i];
        if (a->kind == PHYSD__V1__SERVER_MESSAGE__MSG_FRAME) {
            size_t nb = m->frame->n_body_ids, np = m->frame->n_poses;
            ok = append_array(&m->frame->body_ids, &nb, p->frame->body_ids, p->frame->n_body_ids, sizeof(uint64_t)) ==
                     0 &&
                 append_array(&m->frame->poses, &np, p->frame->poses, p->frame->n_poses, sizeof(double)) == 0;
            m->frame->n_body_ids = nb;
            m->frame->n_poses = np;
        } else {
            size_t ne = m->contacts->n_events;
            ok = append_array(&m->contacts->events, &ne, p->contacts->events, p->contacts->n_events,
                              sizeof(Physd__V1__ContactEvent *)) == 0;
            if (ok) {
                /* The events now belong to the first part. */
                m->contacts->n_events = ne;
                p->contacts->n_events = 0;
            }
        }
    }
    if (ok) {
        a->msg[0] = NULL;
        if (a->kind == PHYSD__V1__SERVER_MESSAGE__MSG_FRAME) {
            m->frame->part = 0;
            m->frame->parts = 1;
        } else {
            m->contacts->part = 0;
            m->contacts->parts = 1;
        }
    } else {
        m = NULL;
    }
    assembly_clear(a);
    return m;
}

/* Takes the part being delivered (c->cur) into its assembly. Returns the
 * whole message once the tick is complete (then c->cur is that message),
 * or NULL while parts are missing (c->cur is NULL: nothing to deliver). */
static Physd__V1__ServerMessage *assemble(pc_client *c, Physd__V1__ServerMessage *m, uint64_t world, uint64_t sub,
                                          uint64_t tick, uint32_t part, uint32_t parts) {
    assembly *a = assembly_of(c, (int)m->msg_case, world, sub);
    if (!a) return m; /* no memory for the assembly: deliver the part */
    if (a->parts && tick < a->tick) {
        /* A part of an older tick than the one being gathered. */
        c->k.parts_discarded++;
        return NULL; /* c->cur is still m: dispatch frees it */
    }
    if (a->parts && (tick != a->tick || parts != a->parts)) c->k.parts_discarded += assembly_clear(a);
    if (!a->parts) {
        a->msg = calloc(parts, sizeof *a->msg);
        if (!a->msg) return m;
        a->parts = parts;
        a->tick = tick;
    }
    if (a->msg[part]) {
        physd__v1__server_message__free_unpacked(a->msg[part], NULL);
        c->k.parts_discarded++;
        a->have--;
    }
    a->msg[part] = m;
    a->have++;
    c->cur = NULL;
    if (a->have < a->parts) return NULL;
    c->cur = assembly_merge(a);
    return c->cur;
}

static void dispatch(pc_client *c, Physd__V1__ServerMessage *m) {
    c->cur = m;
    switch (m->msg_case) {
    case PHYSD__V1__SERVER_MESSAGE__MSG_REPLY: {
        c->k.replies_received++;
        pending p;
        if (m->reply->request_id == 0) {
            c->rejected = 1;
            snprintf(c->errmsg, sizeof c->errmsg, "%s: %s", pc_status_name((int)m->reply->status),
                     m->reply->message ? m->reply->message : "");
            if (c->h.on_error_reply) c->h.on_error_reply(c, m->reply, c->h.data);
        } else if (table_remove(&c->table, m->reply->request_id, &p) && p.cb) {
            p.cb(c, 0, m->reply, p.data);
        }
        break;
    }
    case PHYSD__V1__SERVER_MESSAGE__MSG_FRAME: {
        const Physd__V1__Frame *f = m->frame;
        c->k.frames++;
        if (f->parts > 1) {
            c->k.parts++;
            if (c->opt.reassemble && f->part < f->parts && f->parts <= PC_MAX_PARTS) {
                m = assemble(c, m, f->world_id, f->subscription_id, f->tick, f->part, f->parts);
                if (!m) break;
            }
        }
        if (c->h.on_frame) c->h.on_frame(c, m->frame, c->h.data);
        break;
    }
    case PHYSD__V1__SERVER_MESSAGE__MSG_COMPACT_FRAME: {
        /* decoded into a Frame for on_frame (pc_compact.c) */
        c->k.frames++;
        if (m->compact_frame->parts > 1) c->k.parts++;
        const uint64_t sub = m->compact_frame->subscription_id, tick = m->compact_frame->tick;
        Physd__V1__ServerMessage *fm = NULL;
        int ack = 0;
        int r = pc_ctable_decode(c->ctab, m->compact_frame, &fm, &ack);
        if (r == PC_CT_UNKNOWN) { /* unsubscribed, or not to be decoded here */
            if (c->on_compact) c->on_compact(c, m->compact_frame, c->h.data);
            break;
        }
        if (r == PC_CT_PARTIAL) break; /* a part: the frame is decoded with its last part */
        if (r == PC_CT_BROKEN) {
            c->k.parts_discarded += (uint64_t)ack;
            break;
        }
        if (r != 0) {
            c->k.compact_errors++;
            if (r == PC_CT_ASK_KEY) pc_stream_control(c, sub, 0, 1, NULL, NULL);
            break;
        }
        physd__v1__server_message__free_unpacked(m, NULL);
        c->cur = m = fm;
        if (ack) pc_stream_control(c, sub, tick, 0, NULL, NULL);
        if (c->h.on_frame) c->h.on_frame(c, m->frame, c->h.data);
        break;
    }
    case PHYSD__V1__SERVER_MESSAGE__MSG_STATS:
        c->k.stats++;
        if (c->h.on_stats) c->h.on_stats(c, m->stats, c->h.data);
        break;
    case PHYSD__V1__SERVER_MESSAGE__MSG_CONTACTS: {
        const Physd__V1__ContactEvents *e = m->contacts;
        c->k.contacts++;
        if (e->parts > 1) {
            c->k.parts++;
            if (c->opt.reassemble && e->part < e->parts && e->parts <= PC_MAX_PARTS) {
                m = assemble(c, m, e->world_id, 0, e->tick, e->part, e->parts);
                if (!m) break;
            }
        }
        if (c->h.on_contacts) c->h.on_contacts(c, m->contacts, c->h.data);
        break;
    }
    case PHYSD__V1__SERVER_MESSAGE__MSG_NOTICE: {
        const Physd__V1__Notice *n = m->notice;
        c->k.notices++;
        if (n->kind == PHYSD__V1__NOTICE_KIND__NOTICE_DROPPED && n->dropped > c->k.dropped_notified)
            c->k.dropped_notified = n->dropped;
        if (n->kind == PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_DESTROYED) {
            /* Parts of the world's last tick will never complete. */
            for (size_t i = 0; i < c->n_asm; i++)
                if (c->asm_[i].world == n->world_id) c->k.parts_discarded += assembly_clear(&c->asm_[i]);
        }
        if (n->kind == PHYSD__V1__NOTICE_KIND__NOTICE_DISCONNECT || n->kind == PHYSD__V1__NOTICE_KIND__NOTICE_SHUTDOWN)
            snprintf(c->errmsg, sizeof c->errmsg, "%s", n->message && n->message[0] ? n->message : "server shutdown");
        if (c->h.on_notice) c->h.on_notice(c, n, c->h.data);
        pc_world_moved mv;
        if (c->h.on_world_moved && !c->closing && pc_notice_moved(n, &mv)) c->h.on_world_moved(c, &mv, c->h.data);
        break;
    }
    case PHYSD__V1__SERVER_MESSAGE__MSG_SNAPSHOT_PART:
        if (c->h.on_snapshot_part) c->h.on_snapshot_part(c, m->snapshot_part, c->h.data);
        break;
    default:
        break; /* A message kind newer than this library: ignored. */
    }
    if (c->cur) physd__v1__server_message__free_unpacked(c->cur, NULL);
    c->cur = NULL;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    pc_client *c = h->data;
    (void)suggested;
    if (c->tls) {
        *buf = pc_tls_read_buf(c->tls); /* ciphertext; pc_tls_input decrypts into c->in */
        return;
    }
    if (reserve(&c->in, &c->in_cap, c->in_len + 65536)) {
        buf->base = NULL;
        buf->len = 0;
        return;
    }
    buf->base = (char *)c->in + c->in_len;
    buf->len = c->in_cap - c->in_len;
}

/* Parses and dispatches every complete frame; returns 0 or the error that
 * ends the connection. */
static int drain_frames(pc_client *c) {
    size_t pos = 0;
    int err = 0;
    while (pos < c->in_len && c->state != ST_DISCONNECTED && !c->closing) {
        uint64_t len = 0;
        size_t hl = 0;
        int r = pw_frame_peek(c->in + pos, c->in_len - pos, c->max_frame, &hl, &len);
        if (r < 0) {
            err = r == PW_ETOOBIG ? PC_ETOOBIG : PC_EPROTO;
            break;
        }
        if (!hl) break; /* the length prefix is not complete */
        if (c->in_len - pos - hl < len) {
            /* Make room for the whole frame at once: the next read lands
             * in a window that holds exactly the bytes still expected (and
             * what follows them). */
            if (reserve(&c->in, &c->in_cap, (c->in_len - pos) + hl + (size_t)len + 65536)) err = UV_ENOMEM;
            break;
        }
        Physd__V1__ServerMessage *m = physd__v1__server_message__unpack(NULL, (size_t)len, c->in + pos + hl);
        pos += hl + (size_t)len;
        if (!m) {
            err = PC_EPROTO;
            break;
        }
        dispatch(c, m);
    }
    if (pos > 0 && pos <= c->in_len) {
        memmove(c->in, c->in + pos, c->in_len - pos);
        c->in_len -= pos;
    }
    return err;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    pc_client *c = s->data;
    (void)buf;
    if (c->state == ST_DISCONNECTED || c->closing) return;
    if (nread == UV_ENOBUFS) {
        disconnect(c, UV_ENOMEM);
        return;
    }
    if (nread < 0) {
        /* After a reply with request id 0 the server closes on purpose;
         * the close may come as a reset (our unread bytes at its end). */
        disconnect(c, c->rejected ? PC_EREJECTED : nread == UV_EOF ? PC_ECLOSED : (int)nread);
        return;
    }
    c->k.bytes_received += (uint64_t)nread;
    if (c->tls) {
        int r = pc_tls_input(c->tls, s, (size_t)nread, &c->in, &c->in_len, &c->in_cap, c->errmsg, sizeof c->errmsg);
        if (r == 1) r = flush(c); /* the handshake is done: the hello goes out */
        int err = drain_frames(c);
        if (!err && r < 0) err = r == PC_ECLOSED && c->rejected ? PC_EREJECTED : r;
        if (err) disconnect(c, err);
        return;
    }
    c->in_len += (size_t)nread;
    int err = drain_frames(c);
    if (err) disconnect(c, err);
}

/* ------------------------------------------------------------ connect */

static void on_hello(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    (void)data;
    if (err) {
        disconnect(c, err);
        return;
    }
    if (r->status != PHYSD__V1__STATUS__STATUS_OK || r->payload_case != PHYSD__V1__REPLY__PAYLOAD_HELLO) {
        snprintf(c->errmsg, sizeof c->errmsg, "%s: %s", pc_status_name((int)r->status), r->message ? r->message : "");
        disconnect(c, r->status == PHYSD__V1__STATUS__STATUS_UNAUTHENTICATED ? PC_EAUTH : PC_EHELLO);
        return;
    }
    c->hello = pc_client_take_message(c);
    if (c->hello->reply->hello->max_frame > 0) c->max_frame = c->hello->reply->hello->max_frame;
    c->state = ST_CONNECTED;
    uv_timer_stop(&c->timer);
    finish_connect(c, 0);
}

static void on_connect(uv_connect_t *req, int status) {
    pc_client *c = req->data;
    if (c->state != ST_CONNECTING) return; /* canceled by a timeout or close */
    if (status < 0) {
        disconnect(c, status);
        return;
    }
    if (c->opt.nodelay) uv_tcp_nodelay(&c->tcp, 1);
    int r = c->tls_err ? PC_ETLS : 0;
    if (r == 0 && c->tls) r = pc_tls_start(c->tls, (uv_stream_t *)&c->tcp, c->errmsg, sizeof c->errmsg);
    if (r == 0) r = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (r < 0) {
        disconnect(c, r);
        return;
    }
    c->state = ST_HELLO;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Hello h = PHYSD__V1__HELLO__INIT;
    h.protocol_version = PC_PROTOCOL_VERSION;
    h.client_name = c->name;
    if (c->cred) {
        h.credentials.data = (uint8_t *)c->cred;
        h.credentials.len = strlen(c->cred);
    }
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_HELLO;
    m.hello = &h;
    r = send_request(c, &m, on_hello, NULL);
    if (r < 0) disconnect(c, r);
}

static int start_connect(pc_client *c, const struct sockaddr *addr) {
    c->state = ST_CONNECTING;
    if (c->opt.rcvbuf > 0) {
        /* SO_RCVBUF before the handshake, so the window it announces fits
         * the buffer (set afterwards, a small buffer stalls behind the
         * window already announced). Binding to the wildcard address of
         * addr's family creates the socket. */
        struct sockaddr_in a4;
        struct sockaddr_in6 a6;
        memset(&a4, 0, sizeof a4);
        memset(&a6, 0, sizeof a6);
        a4.sin_family = AF_INET;
        a6.sin6_family = AF_INET6;
        int r = uv_tcp_bind(
            &c->tcp, addr->sa_family == AF_INET6 ? (const struct sockaddr *)&a6 : (const struct sockaddr *)&a4, 0);
        int v = c->opt.rcvbuf;
        if (r == 0) r = uv_recv_buffer_size((uv_handle_t *)&c->tcp, &v);
        if (r < 0) return r;
    }
    return uv_tcp_connect(&c->creq, &c->tcp, addr, on_connect);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
    pc_client *c = req->data;
    c->gai_pending = 0;
    if (c->closing || c->state != ST_RESOLVING) {
        uv_freeaddrinfo(res);
        maybe_free(c);
        return;
    }
    if (status < 0 || !res) {
        uv_freeaddrinfo(res);
        disconnect(c, status < 0 ? status : UV_EAI_NONAME);
        return;
    }
    const struct addrinfo *pick = res;
    for (const struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    int r = start_connect(c, pick->ai_addr);
    uv_freeaddrinfo(res);
    if (r < 0) disconnect(c, r);
}

static void on_timeout(uv_timer_t *t) {
    pc_client *c = t->data;
    if (!c->connect_done) disconnect(c, UV_ETIMEDOUT);
}

void pc_options_default(pc_options *o) {
    memset(o, 0, sizeof *o);
    o->client_name = "pc_client";
    o->max_frame = 64u << 20;
    o->nodelay = 1;
    o->reassemble = 1;
}

int pc_client_connect(pc_client **out, uv_loop_t *loop, const char *host, int port, int timeout_ms,
                      const pc_options *opts, pc_connect_cb cb, void *data) {
    if (out) *out = NULL;
    if (!out || !loop || !host || !host[0] || port <= 0 || port > 65535 || timeout_ms < 0) return UV_EINVAL;
    pc_client *c = calloc(1, sizeof *c);
    if (!c) return UV_ENOMEM;
    if (opts)
        c->opt = *opts;
    else
        pc_options_default(&c->opt);
    snprintf(c->name, sizeof c->name, "%s", c->opt.client_name ? c->opt.client_name : "pc_client");
    c->opt.client_name = c->name;
    if (c->opt.credentials && c->opt.credentials[0] && !(c->cred = strdup(c->opt.credentials))) {
        free(c);
        return UV_ENOMEM;
    }
    c->opt.credentials = NULL; /* the copy is c->cred */
    /* TLS files are read now; a failure is reported by the connect callback. */
    if (c->opt.tls && pc_tls_new(&c->tls, c->opt.tls, host, c->errmsg, sizeof c->errmsg) < 0) c->tls_err = 1;
    c->opt.tls = NULL;
    c->loop = loop;
    c->port = port;
    c->max_frame = c->opt.max_frame ? c->opt.max_frame : (64u << 20);
    c->next_id = 1;
    c->connect_cb = cb;
    c->connect_data = data;
    c->state = ST_RESOLVING;
    c->tcp.data = c->timer.data = c->creq.data = c->gai.data = c->wreq.data = c;
    int r = uv_timer_init(loop, &c->timer);
    if (r < 0) {
        if (c->tls) pc_tls_free(c->tls);
        free(c->cred);
        free(c);
        return r;
    }
    c->open_handles = 1;
    r = uv_tcp_init(loop, &c->tcp);
    if (r == 0) {
        c->open_handles++;
        c->tcp_open = 1;
    }
    if (r == 0 && timeout_ms > 0) r = uv_timer_start(&c->timer, on_timeout, (uint64_t)timeout_ms, 0);
    if (r == 0) {
        struct sockaddr_in a4;
        struct sockaddr_in6 a6;
        if (uv_ip4_addr(host, port, &a4) == 0) {
            r = start_connect(c, (const struct sockaddr *)&a4);
        } else if (uv_ip6_addr(host, port, &a6) == 0) {
            r = start_connect(c, (const struct sockaddr *)&a6);
        } else {
            char service[16];
            snprintf(service, sizeof service, "%d", port);
            struct addrinfo hints;
            memset(&hints, 0, sizeof hints);
            hints.ai_family = AF_UNSPEC;
            hints.ai_socktype = SOCK_STREAM;
            r = uv_getaddrinfo(loop, &c->gai, on_resolved, host, service, &hints);
            if (r == 0) c->gai_pending = 1;
        }
    }
    if (r < 0) {
        /* Nothing was reported: release quietly from the close callbacks. */
        c->connect_done = 1;
        c->closing = 1;
        c->state = ST_DISCONNECTED;
        close_tcp(c);
        uv_close((uv_handle_t *)&c->timer, on_handle_closed);
        return r;
    }
    *out = c;
    return 0;
}

void pc_client_close(pc_client *c, pc_close_cb cb, void *data) {
    if (!c || c->closing) return;
    c->closing = 1;
    c->close_cb = cb;
    c->close_data = data;
    if (c->state != ST_DISCONNECTED) {
        c->state = ST_DISCONNECTED;
        if (c->gai_pending) uv_cancel((uv_req_t *)&c->gai);
        close_tcp(c);
        fail_pending(c, PC_ECANCELED);
        finish_connect(c, PC_ECANCELED);
    }
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

/* ---------------------------------------------------------- accessors */

void pc_client_set_handlers(pc_client *c, const pc_handlers *h) {
    if (h)
        c->h = *h;
    else
        memset(&c->h, 0, sizeof c->h);
}

Physd__V1__ServerMessage *pc_client_take_message(pc_client *c) {
    Physd__V1__ServerMessage *m = c->cur;
    c->cur = NULL;
    return m;
}

int pc_client_connected(const pc_client *c) { return c && !c->closing && c->state == ST_CONNECTED; }
uv_loop_t *pc_client_loop(const pc_client *c) { return c->loop; }

void pc_client_counters(const pc_client *c, pc_counters *out) {
    *out = c->k;
    out->pending = c->table.count;
}

const Physd__V1__HelloReply *pc_client_server_info(const pc_client *c) {
    return c->hello ? c->hello->reply->hello : NULL;
}

const char *pc_client_error_message(const pc_client *c) { return c->errmsg; }

int pc_frame_is_last_part(const Physd__V1__Frame *f) { return f->parts <= 1 || f->part + 1 >= f->parts; }
void pc_client_set_data(pc_client *c, void *data) { c->user = data; }
void *pc_client_get_data(const pc_client *c) { return c->user; }

pc_ctable **pc__ctable(pc_client *c) { return &c->ctab; }

void pc_client_set_compact_handler(pc_client *c, pc_compact_frame_cb cb) { c->on_compact = cb; }
