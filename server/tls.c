/*
 * tls.c — TLS on the protocol port through OpenSSL memory BIOs (tls.h).
 *
 * Normal path: ps_tls_ctx_create loads the PEM certificate chain and key
 * (and the client CA when tls_client_ca is set) into one SSL_CTX, TLS 1.2
 * at least. Each accepted connection gets an SSL with two memory BIOs. The
 * first two bytes are sniffed: a TLS record starts 0x16 0x03; a protobuf
 * frame never does (its second byte is a field tag, and field 0 does not
 * exist). Then SSL_do_handshake runs on every read until it is done, and
 * SSL_read feeds the frame decoder. Everything OpenSSL writes into the
 * write BIO outside an application write (handshake flights, alerts) is
 * sent at once with a uv_write of its own, so records leave in the order
 * OpenSSL made them.
 *
 * Failure modes: a plain client gets a clear Reply in clear text and the
 * connection closes; a handshake error logs OpenSSL's reason, sends the
 * alert and closes (close_after_flush); an error after the handshake closes
 * the connection; a handshake older than tls_handshake_timeout is closed.
 *
 * Invariants: everything runs on the loop thread; the SSL (and its BIOs)
 * is freed in the connection's close callback, after libuv has called
 * every write callback.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tls.h"

struct ps_tls_ctx {
    SSL_CTX *ctx;
    double handshake_timeout;
};

enum { TLS_SNIFF, TLS_HANDSHAKE, TLS_OPEN, TLS_FAILED };

struct ps_tls {
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    int state;
    uint64_t handshake_ns;
    uint8_t sniff[2];
    size_t nsniff;
    uint8_t *app_buf; /* ciphertext of the connection's write in flight */
    uv_write_cb app_cb;
    uint8_t plain[16384]; /* SSL_read's output when the decoder has no window */
};

/* ------------------------------------------------------------ context */

/* The last OpenSSL error as text (and the queue cleared). */
static const char *ossl_reason(char *buf, size_t n) {
    unsigned long e = ERR_peek_last_error();
    if (!e) {
        snprintf(buf, n, "unknown error");
    } else {
        const char *r = ERR_reason_error_string(e);
        if (r)
            snprintf(buf, n, "%s", r);
        else
            ERR_error_string_n(e, buf, n);
    }
    ERR_clear_error();
    return buf;
}

int ps_tls_ctx_create(const ps_config *cfg, ps_tls_ctx **out, char *err, size_t errlen) {
    *out = NULL;
    int has_cert = cfg->tls_cert[0] != 0, has_key = cfg->tls_key[0] != 0;
    if (!has_cert && !has_key) {
        if (cfg->tls_client_ca[0]) {
            snprintf(err, errlen, "tls_client_ca is set but TLS is off: set tls_cert and tls_key too");
            return UV_EINVAL;
        }
        return 0;
    }
    if (!has_cert || !has_key) {
        snprintf(err, errlen, "TLS needs both tls_cert and tls_key (only %s is set)",
                 has_cert ? "tls_cert" : "tls_key");
        return UV_EINVAL;
    }
    char why[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errlen, "TLS: SSL_CTX_new: %s", ossl_reason(why, sizeof why));
        return UV_EINVAL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* No session tickets (clients do not resume: one connection each), no
     * renegotiation; idle connections give their record buffers back. */
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
        snprintf(err, errlen, "tls_cert %s: cannot load the certificate: %s", cfg->tls_cert,
                 ossl_reason(why, sizeof why));
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1) {
        snprintf(err, errlen, "tls_key %s: cannot load the private key: %s", cfg->tls_key,
                 ossl_reason(why, sizeof why));
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "tls_key %s does not match tls_cert %s: %s", cfg->tls_key, cfg->tls_cert,
                 ossl_reason(why, sizeof why));
        goto fail;
    }
    X509 *cert = SSL_CTX_get0_certificate(ctx);
    if (cert && X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
        ps_log("warning: tls_cert %s has expired: clients will refuse the handshake", cfg->tls_cert);
    if (cfg->tls_client_ca[0]) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->tls_client_ca);
        if (!names || SSL_CTX_load_verify_locations(ctx, cfg->tls_client_ca, NULL) != 1) {
            if (names) sk_X509_NAME_pop_free(names, X509_NAME_free);
            snprintf(err, errlen, "tls_client_ca %s: cannot load: %s", cfg->tls_client_ca,
                     ossl_reason(why, sizeof why));
            goto fail;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    ps_tls_ctx *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "TLS: out of memory");
        goto fail;
    }
    x->ctx = ctx;
    x->handshake_timeout = cfg->tls_handshake_timeout;
    *out = x;
    return 0;
fail:
    SSL_CTX_free(ctx);
    return UV_EINVAL;
}

void ps_tls_ctx_free(ps_tls_ctx *x) {
    if (!x) return;
    SSL_CTX_free(x->ctx);
    free(x);
}

/* ---------------------------------------------------------- connection */

int ps_tls_conn_start(ps_conn *c, ps_tls_ctx *x) {
    ps_tls *t = calloc(1, sizeof *t);
    if (!t) return UV_ENOMEM;
    t->ssl = SSL_new(x->ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        SSL_free(t->ssl);
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        free(t);
        ERR_clear_error();
        return UV_ENOMEM;
    }
    /* An empty read BIO says "retry", not EOF: the socket's EOF is conn.c's. */
    BIO_set_mem_eof_return(t->rbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_accept_state(t->ssl);
    t->handshake_ns = (uint64_t)(x->handshake_timeout * 1e9);
    c->tls = t;
    return 0;
}

void ps_tls_conn_free(ps_conn *c) {
    ps_tls *t = c->tls;
    if (!t) return;
    SSL_free(t->ssl);
    free(t->app_buf);
    free(t);
    c->tls = NULL;
}

typedef struct records_write {
    uv_write_t req;
    ps_conn *c;
    uint8_t data[];
} records_write;

static void on_records_written(uv_write_t *req, int status) {
    records_write *w = (records_write *)req;
    ps_conn *c = w->c;
    if (status < 0 && !c->closing) ps_conn_close(c, uv_strerror(status));
    ps_conn_unref(c);
    free(w);
}

/* Sends what OpenSSL wrote into the write BIO (handshake, alerts). */
static int send_records(ps_conn *c) {
    ps_tls *t = c->tls;
    size_t n = BIO_ctrl_pending(t->wbio);
    if (n == 0 || c->closing) return 0;
    records_write *w = malloc(sizeof *w + n);
    if (!w) return UV_ENOMEM;
    if (BIO_read(t->wbio, w->data, (int)n) != (int)n) {
        free(w);
        return UV_EIO;
    }
    w->c = c;
    ps_conn_ref(c);
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)n);
    int r = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_records_written);
    if (r < 0) {
        ps_conn_unref(c);
        free(w);
    }
    return r;
}

/* A client that does not speak TLS: one Reply in clear text, then close. */
static void plain_client(ps_conn *c) {
    ps_log("conn %llu (%s): not a TLS ClientHello (first bytes 0x%02x 0x%02x): a plain client on the TLS port",
           (unsigned long long)c->id, c->peer, c->tls->sniff[0], c->tls->nsniff > 1 ? c->tls->sniff[1] : 0);
    ps_tls_conn_free(c); /* from here the connection writes in clear */
    ps_reply_error(c, 0, PS_ST_PRECONDITION,
                   "this port requires TLS (physd was started with tls_cert): connect with --tls");
    c->close_after_flush = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    ps_server_mark_dirty(c->srv, c);
}

/* Logs why the handshake failed, sends the alert and closes after it. */
static void handshake_failed(ps_conn *c, int sslerr) {
    ps_tls *t = c->tls;
    char why[256];
    if (sslerr == SSL_ERROR_SSL)
        ossl_reason(why, sizeof why);
    else
        snprintf(why, sizeof why, "SSL error %d", sslerr);
    long v = SSL_get_verify_result(t->ssl);
    char verify[160] = "";
    if (v != X509_V_OK) snprintf(verify, sizeof verify, " (client certificate: %s)", X509_verify_cert_error_string(v));
    ps_log("conn %llu (%s): TLS handshake failed: %s%s", (unsigned long long)c->id, c->peer, why, verify);
    t->state = TLS_FAILED;
    send_records(c);
    c->close_after_flush = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    ps_server_mark_dirty(c->srv, c);
}

static void read_plain(ps_conn *c) {
    ps_tls *t = c->tls;
    /* Paused by its loop-time budget (conn.c): what OpenSSL holds waits. */
    while (c->tls && !c->closing && !c->close_after_flush && !c->paused_ns) {
        uint8_t *w = NULL;
        size_t n = 0;
        pw_decoder_window(&c->framer, &w, &n);
        int in_window = n > 0;
        if (!in_window) {
            w = t->plain;
            n = sizeof t->plain;
        }
        if (n > INT_MAX) n = INT_MAX;
        int r = SSL_read(t->ssl, w, (int)n);
        if (r > 0) {
            ps_conn_plain(c, w, (size_t)r, in_window);
            continue;
        }
        int e = SSL_get_error(t->ssl, r);
        if (send_records(c) < 0) {
            ps_conn_close(c, "TLS: cannot write");
            return;
        }
        if (e == SSL_ERROR_WANT_READ) return;
        if (e == SSL_ERROR_ZERO_RETURN) { /* close_notify: the peer's end */
            ps_conn_eof(c);
            return;
        }
        char why[256], msg[300];
        snprintf(msg, sizeof msg, "TLS error: %s", e == SSL_ERROR_SSL ? ossl_reason(why, sizeof why) : "SSL_read");
        ps_conn_close(c, msg);
        return;
    }
}

void ps_tls_resume(ps_conn *c) {
    if (c->tls && c->tls->state == TLS_OPEN) read_plain(c);
}

void ps_tls_input(ps_conn *c, const uint8_t *p, size_t n) {
    ps_tls *t = c->tls;
    if (n == 0) return;
    if (BIO_write(t->rbio, p, (int)n) != (int)n) {
        ps_conn_close(c, "TLS: out of memory");
        return;
    }
    if (t->state == TLS_SNIFF) {
        for (size_t k = 0; k < n && t->nsniff < 2; k++)
            t->sniff[t->nsniff++] = p[k];
        if (t->sniff[0] != 0x16 || (t->nsniff == 2 && t->sniff[1] != 0x03)) {
            plain_client(c);
            return;
        }
        if (t->nsniff < 2) return;
        t->state = TLS_HANDSHAKE;
    }
    if (t->state == TLS_HANDSHAKE) {
        int r = SSL_do_handshake(t->ssl);
        if (r != 1) {
            int e = SSL_get_error(t->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                if (send_records(c) < 0) ps_conn_close(c, "TLS: cannot write the handshake");
                return;
            }
            handshake_failed(c, e);
            return;
        }
        if (send_records(c) < 0) {
            ps_conn_close(c, "TLS: cannot write the handshake");
            return;
        }
        t->state = TLS_OPEN;
        X509 *peer = SSL_get0_peer_certificate(t->ssl);
        char subject[160] = "";
        if (peer) X509_NAME_oneline(X509_get_subject_name(peer), subject, sizeof subject);
        ps_log("conn %llu (%s) TLS: %s %s%s%s", (unsigned long long)c->id, c->peer, SSL_get_version(t->ssl),
               SSL_get_cipher_name(t->ssl), peer ? ", client " : "", subject);
    }
    if (t->state == TLS_OPEN) read_plain(c);
}

int ps_tls_check_deadline(ps_conn *c, uint64_t now_ns) {
    ps_tls *t = c->tls;
    if (t->state == TLS_OPEN) return 0;
    if (t->state != TLS_FAILED && now_ns - c->accepted_ns > t->handshake_ns) {
        char msg[128];
        snprintf(msg, sizeof msg, "TLS handshake not done within tls_handshake_timeout (%g s)",
                 (double)t->handshake_ns / 1e9);
        ps_conn_close(c, msg);
    }
    return 1;
}

/* --------------------------------------------------------------- writes */

size_t ps_tls_take(ps_conn *c) {
    size_t n = 0;
    uint64_t bytes = 0;
    while (n < PS_WRITE_BATCH && bytes < PS_TLS_WRITE_BYTES && ps_outq_take(&c->outq, &c->inflight[n], 1) == 1)
        bytes += ps_out_entry_len(&c->inflight[n++]);
    return n;
}

static void on_app_written(uv_write_t *req, int status) {
    ps_conn *c = req->data;
    ps_tls *t = c->tls;
    uv_write_cb cb = t->app_cb;
    free(t->app_buf);
    t->app_buf = NULL;
    cb(req, status);
}

int ps_tls_write(ps_conn *c, unsigned n, uv_write_cb cb) {
    ps_tls *t = c->tls;
    if (t->state != TLS_OPEN) return UV_ENOTCONN;
    for (unsigned k = 0; k < n; k++) {
        if (c->wbufs[k].len == 0) continue;
        if (SSL_write(t->ssl, c->wbufs[k].base, (int)c->wbufs[k].len) != (int)c->wbufs[k].len) {
            ERR_clear_error();
            return UV_EIO;
        }
    }
    size_t len = BIO_ctrl_pending(t->wbio);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) return UV_ENOMEM;
    if (BIO_read(t->wbio, buf, (int)len) != (int)len) {
        free(buf);
        return UV_EIO;
    }
    t->app_buf = buf;
    t->app_cb = cb;
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
    int r = uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, on_app_written);
    if (r < 0) {
        free(buf);
        t->app_buf = NULL;
    }
    return r;
}
