/*
 * http.c — the HTTP side: libwebsockets (Debian's libwebsockets-dev with
 * its libuv event-lib plugin, libwebsockets-evlib-uv) joined to the
 * server's own libuv loop as a foreign loop, on its own port. It serves
 * `/` (the viewer's files built into physd, clients/viewer and
 * docs/viewer.md; a placeholder page when built with PHYSD_VIEWER=OFF),
 * `/ws` (the physd.v1 protocol over WebSocket), `/metrics` (metrics.c),
 * `/healthz` and `/readyz` (docs/http.md).
 *
 * Normal path, /ws: each WebSocket session is a ps_conn opened with
 * ps_conn_open_async, so framing limits, access control, rate limits and
 * the output queue (frame replacement, the hard limit) apply as on TCP.
 * A binary message in is fed to the connection as one frame (its varint
 * length, then the message); each frame the connection writes goes out as
 * one binary message without its varint, one message per writable
 * callback of libwebsockets, and the connection's write completes only
 * when the last message of the batch is handed over — so a browser that
 * stops reading holds the write in flight, its transform frames are
 * replaced in the queue and its backlog reaches output_hard_limit exactly
 * as a TCP reader's does.
 *
 * Failure modes: a message longer than the connection's frame limit
 * (max_unauth_frame before hello, max_frame after) is refused with the TCP
 * wording (the connection's decoder sees its length first); a message
 * split in WebSocket fragments is gathered in memory charged to
 * max_input_memory and must finish within frame_timeout; a text message
 * is a malformed frame. libwebsockets' own errors close the session, which
 * closes the ps_conn.
 *
 * TLS (docs/security.md): with a certificate (http_tls_cert and
 * http_tls_key, else the protocol port's tls_cert and tls_key) and http_tls
 * on, the port speaks https and wss only, through libwebsockets' OpenSSL
 * support: TLS 1.2 at least, handshakes bounded by tls_handshake_timeout,
 * and with tls_client_ca a client certificate it signed required (checked
 * by OpenSSL; LWS_CALLBACK_OPENSSL_PERFORM_CLIENT_CERT_VERIFICATION passes
 * its verdict on, since libwebsockets accepts any certificate when the
 * callback returns 0). The pair is loaded once with OpenSSL before
 * libwebsockets sees it, so a bad file stops the start with a clear reason.
 * The viewer's files are looked up by exact path in a table compiled into
 * physd (viewer_assets.h): no file system access, so no path traversal; any
 * other path is 404.
 *
 * Invariants: the loop thread only. A session and its ps_conn point at
 * each other until either closes: ps_conn_close calls ws_closed (the
 * session then closes its WebSocket), and a WebSocket that closes first
 * closes its ps_conn.
 */
#include <arpa/inet.h>
#include <libwebsockets.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/ssl.h>

#include "http.h"
#include "ps_internal.h"
#include "tls.h"
#include "viewer_assets.h"

typedef struct ps_http {
    ps_server *srv;
    struct lws_context *ctx; /* NULL once libwebsockets finished destroying it (pcontext) */
    struct lws_vhost *vh;
    int port;
    int stopped;
    int tls; /* https and wss only */
} ps_http;

/* One libwebsockets connection: an HTTP transaction or a WebSocket. */
typedef struct sess {
    struct lws *wsi;
    /* HTTP: the response body (LWS_PRE bytes of headroom before it) */
    uint8_t *body;
    size_t body_len, body_off;
    /* WebSocket */
    ps_conn *c;
    size_t next, n; /* the connection's entries in flight: written, all */
    int closing;    /* the ps_conn is gone: close the WebSocket when writable */
    int in_closed;
    uint8_t *msg; /* a message arriving in fragments */
    size_t msg_len, msg_cap;
    uint8_t *wbuf; /* LWS_PRE + the message being written */
    size_t wcap;
} sess;

static ps_http *http_of(struct lws *wsi) { return lws_context_user(lws_get_context(wsi)); }

/* --------------------------------------------------------------- plain HTTP */

static const char index_page[] =
    "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>physd</title></head>\n<body>\n"
    "<h1>physd</h1>\n<p>This physd was built without the browser viewer (PHYSD_VIEWER=OFF, docs/viewer.md). "
    "This port serves:</p>\n<ul>\n"
    "<li><a href=\"/metrics\">/metrics</a> &mdash; Prometheus text exposition</li>\n"
    "<li><a href=\"/healthz\">/healthz</a> &mdash; 200 when the event loop answers</li>\n"
    "<li><a href=\"/readyz\">/readyz</a> &mdash; 200 when listening and every world is recovered and ticking</li>\n"
    "<li><code>/ws</code> &mdash; the physd.v1 protocol over WebSocket: one protobuf message per binary "
    "message (docs/http.md)</li>\n</ul>\n</body></html>\n";

/* 127.0.0.0/8, ::1 or "localhost". */
static int is_loopback(const char *addr) {
    struct in_addr a4;
    struct in6_addr a6;
    if (strcmp(addr, "localhost") == 0) return 1;
    if (inet_pton(AF_INET, addr, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, addr, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

/* Ready: listening, not stopping, every world recovered (done before the
 * loop runs) and either paused or keeping up with its clock. */
static int readiness(ps_server *s, char *why, size_t n) {
    if (s->stopping) return snprintf(why, n, "not ready: shutting down\n"), 0;
    if (!s->listener_open) return snprintf(why, n, "not ready: not listening\n"), 0;
    if (ps_migrate_not_ready(s, why, n)) return 0; /* draining: a load balancer sends new clients elsewhere */
    for (int i = 0; i < s->nhosts; i++) {
        ps_host *h = s->hosts[i];
        if (h->destroying || h->paused) continue;
        double behind = ps_host_behind_s(h);
        if (behind > 1.0)
            return snprintf(why, n, "not ready: world %llu is %.3g s behind its clock\n", (unsigned long long)h->id,
                            behind),
                   0;
    }
    snprintf(why, n, "ready: %d worlds\n", s->nhosts);
    return 1;
}

/* With access control on, /metrics needs the admin token as a bearer
 * token (docs/security.md). */
static int metrics_allowed(ps_server *s, struct lws *wsi) {
    if (!s->auth) return 1;
    char hdr[PS_TOKEN_LEN + 32];
    int n = lws_hdr_copy(wsi, hdr, sizeof hdr, WSI_TOKEN_HTTP_AUTHORIZATION);
    if (n <= 7 || strncmp(hdr, "Bearer ", 7) != 0) return 0;
    char id[PS_TOKEN_ID_LEN + 1];
    uint8_t hash[32];
    if (ps_token_parse(hdr + 7, (size_t)n - 7, id, hash) != 0) return 0;
    const ps_token *t = ps_tokens_check(&s->tokens, id, hash);
    return t && t->world_id == 0 && t->role == PS_ROLE_ADMIN;
}

/* An answer with its cache-control and, when not NULL, content-encoding. */
static int respond_with(struct lws *wsi, sess *ss, unsigned status, const char *ctype, const void *data, size_t len,
                        const char *cache, const char *encoding) {
    free(ss->body);
    ss->body = malloc(LWS_PRE + len + 1);
    if (!ss->body) return -1;
    memcpy(ss->body + LWS_PRE, data, len);
    ss->body_len = len;
    ss->body_off = 0;
    uint8_t buf[LWS_PRE + 1024], *start = buf + LWS_PRE, *p = start, *end = buf + sizeof buf - 1;
    if (lws_add_http_common_headers(wsi, status, ctype, len, &p, end)) return -1;
    if (status == 401 &&
        lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_WWW_AUTHENTICATE, (const unsigned char *)"Bearer", 6, &p, end))
        return -1;
    if (lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:", (const unsigned char *)cache,
                                    (int)strlen(cache), &p, end))
        return -1;
    if (encoding &&
        (lws_add_http_header_by_name(wsi, (const unsigned char *)"content-encoding:", (const unsigned char *)encoding,
                                     (int)strlen(encoding), &p, end) ||
         lws_add_http_header_by_name(wsi, (const unsigned char *)"vary:", (const unsigned char *)"accept-encoding", 15,
                                     &p, end)))
        return -1;
    if (lws_add_http_header_by_name(
            wsi, (const unsigned char *)"x-content-type-options:", (const unsigned char *)"nosniff", 7, &p, end))
        return -1;
    if (lws_finalize_write_http_header(wsi, start, &p, end)) return -1;
    lws_callback_on_writable(wsi);
    return 0;
}

static int respond(struct lws *wsi, sess *ss, unsigned status, const char *ctype, const char *data, size_t len) {
    return respond_with(wsi, ss, status, ctype, data, len, "no-store", NULL);
}

/* A file of the viewer by exact path (the table has no "..", no
 * directories, no file system behind it). */
static const ps_viewer_asset *viewer_asset(const char *uri) {
    for (size_t i = 0; i < ps_viewer_nassets; i++)
        if (strcmp(ps_viewer_assets[i].path, uri) == 0) return &ps_viewer_assets[i];
    return NULL;
}

/* gzip when the request's Accept-Encoding names it with a q above 0 (every
 * browser does). */
static int accepts_gzip(struct lws *wsi) {
    char ae[256], *save = NULL;
    if (lws_hdr_copy(wsi, ae, sizeof ae, WSI_TOKEN_HTTP_ACCEPT_ENCODING) <= 0) return 0;
    for (char *t = strtok_r(ae, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ' || *t == '\t')
            t++;
        size_t n = strcspn(t, " \t;");
        if (n != 4 || strncmp(t, "gzip", 4) != 0) continue;
        const char *q = strstr(t + n, "q=");
        return !q || strtod(q + 2, NULL) > 0;
    }
    return 0;
}

/* Hashed names never change: a year, immutable; the page itself is
 * revalidated on every load so a new physd's page is seen at once. */
static int serve_asset(struct lws *wsi, sess *ss, const ps_viewer_asset *a) {
    const char *cache = a->immutable ? "public, max-age=31536000, immutable" : "no-cache";
    if (accepts_gzip(wsi)) return respond_with(wsi, ss, 200, a->content_type, a->gz, a->gz_len, cache, "gzip");
    return respond_with(wsi, ss, 200, a->content_type, a->data, a->len, cache, NULL);
}

static int on_http(struct lws *wsi, sess *ss, const char *uri) {
    ps_http *hp = http_of(wsi);
    ps_server *s = hp->srv;
    char text[256];
    if (!strcmp(uri, "/healthz")) {
        s->metrics.http_requests[1]++;
        return respond(wsi, ss, 200, "text/plain; charset=utf-8", "ok\n", 3);
    }
    if (!strcmp(uri, "/readyz")) {
        s->metrics.http_requests[2]++;
        int ok = readiness(s, text, sizeof text);
        return respond(wsi, ss, ok ? 200 : 503, "text/plain; charset=utf-8", text, strlen(text));
    }
    if (!strcmp(uri, "/metrics")) {
        s->metrics.http_requests[0]++;
        if (!metrics_allowed(s, wsi)) {
            const char *m = "the admin token is required: Authorization: Bearer <token>\n";
            return respond(wsi, ss, 401, "text/plain; charset=utf-8", m, strlen(m));
        }
        size_t len = 0;
        char *body = ps_metrics_render(s, &len);
        if (!body) return respond(wsi, ss, 500, "text/plain; charset=utf-8", "out of memory\n", 14);
        int r = respond(wsi, ss, 200, "text/plain; version=0.0.4; charset=utf-8", body, len);
        free(body);
        return r;
    }
    s->metrics.http_requests[3]++;
    const ps_viewer_asset *asset = viewer_asset(uri);
    if (asset) return serve_asset(wsi, ss, asset);
    if (!strcmp(uri, "/") || !strcmp(uri, "/index.html"))
        return respond(wsi, ss, 200, "text/html; charset=utf-8", index_page, sizeof index_page - 1);
    if (!strcmp(uri, "/ws")) {
        const char *m = "/ws speaks WebSocket only (physd.v1, binary messages)\n";
        return respond(wsi, ss, 400, "text/plain; charset=utf-8", m, strlen(m));
    }
    return respond(wsi, ss, 404, "text/plain; charset=utf-8", "not found\n", 10);
}

static int http_writable(struct lws *wsi, sess *ss) {
    if (!ss->body) return 0;
    size_t left = ss->body_len - ss->body_off;
    size_t chunk = left > 16384 ? 16384 : left;
    int final = chunk == left;
    /* The LWS_PRE bytes before the chunk are the headroom or bytes already sent. */
    if (lws_write(wsi, ss->body + LWS_PRE + ss->body_off, chunk, final ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) <
        (int)chunk)
        return -1;
    ss->body_off += chunk;
    if (!final) {
        lws_callback_on_writable(wsi);
        return 0;
    }
    free(ss->body);
    ss->body = NULL;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* --------------------------------------------------------------- WebSocket */

static void msg_free(ps_server *s, sess *ss) {
    if (ss->msg) s->input_used -= ss->msg_cap;
    free(ss->msg);
    ss->msg = NULL;
    ss->msg_len = ss->msg_cap = 0;
}

/* The connection closed (ps_conn_close): close the WebSocket once what
 * was handed to libwebsockets is out. */
static void ws_closed(void *arg, ps_conn *c) {
    sess *ss = arg;
    msg_free(c->srv, ss);
    ss->c = NULL;
    ss->closing = 1;
    if (!ss->in_closed) lws_callback_on_writable(ss->wsi);
}

/* The connection starts a write of its entries in flight. */
static void ws_sink(void *arg, ps_conn *c, const uv_buf_t *bufs, unsigned n) {
    (void)bufs;
    (void)n;
    sess *ss = arg;
    ss->next = 0;
    ss->n = c->n_inflight;
    lws_callback_on_writable(ss->wsi);
}

static size_t varint_len(const uint8_t *p, size_t n) {
    size_t k = 0;
    while (k < n && k < 10 && (p[k] & 0x80))
        k++;
    return k + 1;
}

static int ws_writable(struct lws *wsi, sess *ss) {
    if (ss->closing) {
        lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, (unsigned char *)"closed", 6);
        return -1;
    }
    ps_conn *c = ss->c;
    if (!c || !c->writing || ss->next >= ss->n) return 0;
    const ps_out_entry *e = &c->inflight[ss->next];
    const size_t v = varint_len(e->buf->data, e->buf->len);
    const size_t head = e->buf->len - v, len = head + (e->tail ? e->tail->len : 0);
    if (ss->wcap < LWS_PRE + len) {
        uint8_t *nb = realloc(ss->wbuf, LWS_PRE + len);
        if (!nb) {
            ps_conn_close(c, "out of memory for a WebSocket message");
            return 0;
        }
        ss->wbuf = nb;
        ss->wcap = LWS_PRE + len;
    }
    memcpy(ss->wbuf + LWS_PRE, e->buf->data + v, head);
    if (e->tail) memcpy(ss->wbuf + LWS_PRE + head, e->tail->data, e->tail->len);
    if (lws_write(wsi, ss->wbuf + LWS_PRE, len, LWS_WRITE_BINARY) < (int)len) {
        ps_conn_close(c, "WebSocket write failed");
        return -1;
    }
    if (++ss->next < ss->n)
        lws_callback_on_writable(wsi);
    else
        ps_conn_sink_done(c, 0); /* may start the next write (ws_sink) or close (ws_closed) */
    return 0;
}

/* One whole message: its varint length, then its bytes, as a TCP peer
 * would send them. */
static void feed_message(ps_conn *c, const uint8_t *data, size_t len) {
    uint8_t v[10];
    size_t k = 0;
    uint64_t x = len;
    do {
        v[k++] = (uint8_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
        x >>= 7;
    } while (x);
    ps_conn_feed(c, v, k);
    if (len > 0 && !c->closing && !c->close_after_flush) ps_conn_feed(c, data, len);
}

static void refuse(ps_conn *c, int code, const char *msg) {
    ps_log("conn %llu (%s): %s", (unsigned long long)c->id, c->peer, msg);
    ps_reply_error(c, 0, code, msg);
    c->close_after_flush = 1;
    ps_server_mark_dirty(c->srv, c);
}

static void ws_receive(struct lws *wsi, sess *ss, const uint8_t *in, size_t len) {
    ps_conn *c = ss->c;
    if (!c || c->closing || c->close_after_flush) return; /* discarded, as TCP input after an error */
    ps_server *s = c->srv;
    const int first = lws_is_first_fragment(wsi), final = lws_is_final_fragment(wsi);
    if (first && !lws_frame_is_binary(wsi)) {
        refuse(c, PS_ST_INVALID, "malformed frame: a text WebSocket message (physd.v1 messages are binary)");
        return;
    }
    if (first && final) {
        feed_message(c, in, len);
        return;
    }
    /* In parts: gathered, charged to max_input_memory, within frame_timeout. */
    if (first) {
        msg_free(s, ss);
        c->frame_start_ns = ps_now_ns();
    }
    const uint64_t total = ss->msg_len + len;
    if (total > c->framer.max_frame) {
        /* The decoder refuses the length with TCP's words and counts the hit. */
        const size_t more = lws_remaining_packet_payload(wsi);
        msg_free(s, ss);
        c->frame_start_ns = 0;
        uint8_t v[10];
        size_t k = 0;
        uint64_t x = total + more;
        do {
            v[k++] = (uint8_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
            x >>= 7;
        } while (x);
        ps_conn_feed(c, v, k);
        return;
    }
    if (total > ss->msg_cap) {
        size_t ncap = ss->msg_cap ? ss->msg_cap : 65536;
        while (ncap < total)
            ncap *= 2;
        if (ncap > c->framer.max_frame) ncap = c->framer.max_frame;
        if (s->input_used + (ncap - ss->msg_cap) > s->cfg.max_input_memory) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s (max_input_memory = %llu bytes)", ps_strerror(PS_EPOOL),
                     (unsigned long long)s->cfg.max_input_memory);
            PS_LIMIT_HIT(s, MAX_INPUT_MEMORY);
            msg_free(s, ss);
            c->frame_start_ns = 0;
            refuse(c, PS_ST_EXHAUSTED, msg);
            return;
        }
        uint8_t *nm = realloc(ss->msg, ncap);
        if (!nm) {
            refuse(c, PS_ST_INTERNAL, "out of memory for a frame");
            return;
        }
        s->input_used += ncap - ss->msg_cap;
        if (s->input_used > s->input_peak) s->input_peak = s->input_used;
        ss->msg = nm;
        ss->msg_cap = ncap;
    }
    memcpy(ss->msg + ss->msg_len, in, len);
    ss->msg_len += len;
    if (!final) return;
    c->frame_start_ns = 0;
    /* The decoder copies it; the gathering buffer goes back at once. */
    uint8_t *m = ss->msg;
    size_t mlen = ss->msg_len, mcap = ss->msg_cap;
    ss->msg = NULL;
    ss->msg_len = ss->msg_cap = 0;
    feed_message(c, m, mlen);
    s->input_used -= mcap;
    free(m);
}

/* The connection's loop-time budget (conn.c) pauses and resumes reading. */
static void ws_flow(void *arg, int on) {
    sess *ss = arg;
    if (ss->wsi) lws_rx_flow_control(ss->wsi, on);
}

static int ws_established(struct lws *wsi, sess *ss) {
    ps_server *s = http_of(wsi)->srv;
    ss->wsi = wsi;
    ss->c = ps_conn_open_async(s, ws_sink, ws_closed, ss);
    if (!ss->c) return -1;
    ps_conn *c = ss->c;
    c->sink_flow = ws_flow;
    char ip[48] = "?";
    lws_get_peer_simple(wsi, ip, sizeof ip);
    snprintf(c->addr, sizeof c->addr, "%s", ip);
    snprintf(c->peer, sizeof c->peer, "%s:%s", http_of(wsi)->tls ? "wss" : "ws", ip);
    ps_conn_attach_address(c);
    ps_log("conn %llu (%s) WebSocket accepted", (unsigned long long)c->id, c->peer);
    /* The connection limits of the protocol port (docs/limits.md). */
    if (s->nconns > s->cfg.max_connections) {
        char msg[96];
        snprintf(msg, sizeof msg, "too many connections (max_connections = %d)", s->cfg.max_connections);
        PS_LIMIT_HIT(s, MAX_CONNECTIONS);
        refuse(c, PS_ST_EXHAUSTED, msg);
        return 0;
    }
    int same = 0;
    for (ps_conn *o = s->conns; o; o = o->next)
        if (o != c && !o->closing && strcmp(o->addr, c->addr) == 0) same++;
    if (same >= s->cfg.max_connections_per_address) {
        char msg[128];
        snprintf(msg, sizeof msg, "too many connections from %s (max_connections_per_address = %d)", c->addr,
                 s->cfg.max_connections_per_address);
        PS_LIMIT_HIT(s, MAX_CONNECTIONS_PER_ADDRESS);
        refuse(c, PS_ST_EXHAUSTED, msg);
    }
    return 0;
}

/* ----------------------------------------------------------------- callback */

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
    sess *ss = user;
    switch (reason) {
    case LWS_CALLBACK_OPENSSL_PERFORM_CLIENT_CERT_VERIFICATION:
        /* user is the X509_STORE_CTX, len OpenSSL's preverify_ok: 0 accepts. */
        return len ? 0 : 1;
    case LWS_CALLBACK_HTTP:
        ss->wsi = wsi;
        return on_http(wsi, ss, in ? (const char *)in : "/") ? -1 : 0;
    case LWS_CALLBACK_HTTP_WRITEABLE:
        return http_writable(wsi, ss);
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        if (ss) {
            free(ss->body);
            ss->body = NULL;
        }
        return 0;
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: {
        /* WebSocket on /ws only, and not while shutting down. */
        char uri[16];
        ps_http *hp = http_of(wsi);
        if (hp->srv->stopping) return 1;
        if (lws_hdr_copy(wsi, uri, sizeof uri, WSI_TOKEN_GET_URI) <= 0 || strcmp(uri, "/ws") != 0) return 1;
        return 0;
    }
    case LWS_CALLBACK_ESTABLISHED:
        return ws_established(wsi, ss);
    case LWS_CALLBACK_RECEIVE:
        ws_receive(wsi, ss, in, len);
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return ws_writable(wsi, ss);
    case LWS_CALLBACK_CLOSED:
        if (ss->c) {
            ss->in_closed = 1;
            ps_conn_close(ss->c, "WebSocket closed");
        }
        free(ss->wbuf);
        ss->wbuf = NULL;
        return 0;
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static const struct lws_protocols protocols[] = {
    {"physd.v1", callback, sizeof(sess), 65536, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* libwebsockets' errors and warnings, as physd log lines. */
static void lws_emit(int level, const char *line) {
    (void)level;
    char buf[400];
    snprintf(buf, sizeof buf, "%s", line);
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = 0;
    ps_log("http: %s", buf);
}

/* ------------------------------------------------------------------ life */

/* The HTTP side's certificate and key (NULL, NULL: plain HTTP), checked by
 * loading them once with OpenSSL. 0, or UV_EINVAL with the reason on
 * stderr. */
static int tls_files(const ps_config *cfg, const char **cert, const char **key) {
    *cert = *key = NULL;
    const int has_cert = cfg->http_tls_cert[0] != 0, has_key = cfg->http_tls_key[0] != 0;
    if (has_cert != has_key) {
        fprintf(stderr, "physd: HTTPS needs both http_tls_cert and http_tls_key (only %s is set)\n",
                has_cert ? "http_tls_cert" : "http_tls_key");
        return UV_EINVAL;
    }
    if (!cfg->http_tls) {
        if (has_cert) {
            fprintf(stderr, "physd: http_tls_cert is set but http_tls is off\n");
            return UV_EINVAL;
        }
        return 0;
    }
    if (!has_cert) {
        /* The protocol port's pair, already loaded by ps_tls_ctx_create. */
        if (cfg->tls_cert[0] && cfg->tls_key[0]) *cert = cfg->tls_cert, *key = cfg->tls_key;
        return 0;
    }
    ps_config *tmp = malloc(sizeof *tmp);
    if (!tmp) return UV_ENOMEM;
    *tmp = *cfg;
    snprintf(tmp->tls_cert, sizeof tmp->tls_cert, "%s", cfg->http_tls_cert);
    snprintf(tmp->tls_key, sizeof tmp->tls_key, "%s", cfg->http_tls_key);
    ps_tls_ctx *x = NULL;
    char err[512];
    int r = ps_tls_ctx_create(tmp, &x, err, sizeof err);
    ps_tls_ctx_free(x);
    free(tmp);
    if (r < 0) {
        fprintf(stderr, "physd: HTTPS (http_tls_cert, http_tls_key): %s\n", err);
        return r;
    }
    *cert = cfg->http_tls_cert, *key = cfg->http_tls_key;
    return 0;
}

int ps_http_start(ps_server *s) {
    const ps_config *cfg = &s->cfg;
    if (!cfg->http || cfg->no_listen) return 0;
    const char *cert = NULL, *key = NULL;
    int tr = tls_files(cfg, &cert, &key);
    if (tr < 0) return tr;
    if (!s->auth && !is_loopback(cfg->http_listen) && !cfg->insecure) {
        fprintf(stderr,
                "physd: refusing to serve HTTP on %s without access control (protected mode): /ws would accept any "
                "client and /metrics would be public. Set --admin-token-file, or --http-listen 127.0.0.1, or "
                "--insecure (docs/security.md).\n",
                cfg->http_listen);
        return PS_EPROTECTED;
    }
    ps_http *hp = calloc(1, sizeof *hp);
    if (!hp) return UV_ENOMEM;
    hp->srv = s;
    lws_set_log_level(LLL_ERR | LLL_WARN, lws_emit);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[1] = {&s->loop};
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
                   LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN | LWS_SERVER_OPTION_VALIDATE_UTF8;
    if (cert) {
        hp->tls = 1;
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        /* libwebsockets' bounds on a connection that has not finished its
         * handshake: the TLS accept, and a silent new socket. */
        info.timeout_secs = (unsigned)ceil(cfg->tls_handshake_timeout);
        info.timeout_secs_ah_idle = info.timeout_secs;
    }
    info.foreign_loops = loops;
    info.pcontext = &hp->ctx;
    info.user = hp;
    info.server_string = "physd";
    hp->ctx = lws_create_context(&info);
    if (!hp->ctx) {
        free(hp);
        fprintf(stderr, "physd: cannot start the HTTP side (libwebsockets with its libuv event library)\n");
        return UV_EINVAL;
    }
    /* A server on an ephemeral protocol port (tests, scripts starting
     * several) gets an ephemeral HTTP port too unless one was chosen. */
    info.port = cfg->port == 0 && cfg->http_port == PS_DEFAULT_HTTP_PORT ? 0 : cfg->http_port;
    info.iface = cfg->http_listen;
    if (!strchr(cfg->http_listen, ':')) info.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
    info.protocols = protocols;
    info.vhost_name = "physd";
    if (cert) {
        info.ssl_cert_filepath = cert;
        info.ssl_private_key_filepath = key;
        info.ssl_options_set = (long)(SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1); /* TLS 1.2 at least */
        if (cfg->tls_client_ca[0]) {
            info.ssl_ca_filepath = cfg->tls_client_ca;
            info.options |= LWS_SERVER_OPTION_REQUIRE_VALID_OPENSSL_CLIENT_CERT;
        }
    }
    hp->vh = lws_create_vhost(hp->ctx, &info);
    if (!hp->vh) {
        fprintf(stderr, "physd: cannot listen for HTTP on %s:%d\n", cfg->http_listen, info.port);
        /* lws closes its handles on the loop: let it finish before the
         * caller's failure path closes every handle left. */
        lws_context_destroy(hp->ctx);
        for (int k = 0; hp->ctx && k < 10000; k++)
            uv_run(&s->loop, UV_RUN_NOWAIT);
        s->http = hp;
        hp->stopped = 1;
        return UV_EADDRINUSE;
    }
    hp->port = lws_get_vhost_listen_port(hp->vh);
    s->http = hp;
    ps_log("HTTP on %s://%s:%d/ (%s; /ws, /metrics, /healthz, /readyz)%s", hp->tls ? "https" : "http", cfg->http_listen,
           hp->port, ps_viewer_nassets > 0 ? "the viewer" : "no viewer: built with PHYSD_VIEWER=OFF",
           hp->tls && cfg->tls_client_ca[0] ? " with client certificates" : "");
    return 0;
}

void ps_http_stop(ps_server *s) {
    ps_http *hp = s->http;
    if (!hp || hp->stopped) return;
    hp->stopped = 1;
    if (hp->ctx) lws_context_destroy(hp->ctx);
}

void ps_http_free(ps_server *s) {
    ps_http *hp = s->http;
    if (!hp) return;
    if (hp->ctx) lws_context_destroy(hp->ctx);
    free(hp);
    s->http = NULL;
}

int ps_server_http_port(const ps_server *s) { return s->http ? s->http->port : 0; }
