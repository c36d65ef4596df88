/*
 * pc_tls.c — TLS for pc_client (pc_tls.h): one SSL_CTX and SSL per
 * client, driven through two memory BIOs on the client's libuv stream.
 *
 * Normal path: pc_tls_new makes the context (TLS 1.2 at least, peer
 * verification on, the CA file or the system's default paths, the client
 * certificate when given) and the SSL with the name to check (host name
 * with SNI, or an IP address). pc_tls_start writes the ClientHello;
 * pc_tls_input takes each read's ciphertext, drives the handshake, and
 * appends the plaintext to the client's input buffer, where the frame
 * parser finds it as it would find socket bytes. pc_tls_seal encrypts the
 * client's output buffer for its one write in flight. Records OpenSSL makes
 * by itself (handshake flights, alerts) are written at once with a write
 * of their own, so every record leaves in the order it was made.
 *
 * Failure modes: a failed handshake returns PC_ETLS with OpenSSL's reason
 * and, for a certificate that does not verify, the verification error
 * ("certificate verify failed (certificate has expired)"); a server that
 * answers without TLS is named as such.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "pc_tls.h"

struct pc_tls {
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    int ready;
    int first; /* the server's first byte, -1 before it */
    char host[256];
    uint8_t rbuf[65536];
};

void pc_tls_options_default(pc_tls_options *t) { memset(t, 0, sizeof *t); }

static const char *reason(char *buf, size_t n) {
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    if (r)
        snprintf(buf, n, "%s", r);
    else if (e)
        ERR_error_string_n(e, buf, n);
    else
        snprintf(buf, n, "unexpected end of the handshake");
    ERR_clear_error();
    return buf;
}

static int is_ip(const char *s) {
    unsigned char a[16];
    return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

int pc_tls_new(pc_tls **out, const pc_tls_options *o, const char *host, char *err, size_t errlen) {
    *out = NULL;
    char why[256];
    pc_tls *t = calloc(1, sizeof *t);
    if (!t) return UV_ENOMEM;
    t->first = -1;
    const char *name = o->server_name && o->server_name[0] ? o->server_name : host;
    snprintf(t->host, sizeof t->host, "%s", name);
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (!t->ctx) goto fail_ossl;
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    if (o->ca_file && o->ca_file[0]) {
        if (SSL_CTX_load_verify_locations(t->ctx, o->ca_file, NULL) != 1) {
            snprintf(err, errlen, "TLS: cannot load the CA file %s: %s", o->ca_file, reason(why, sizeof why));
            goto fail;
        }
    } else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
        snprintf(err, errlen, "TLS: cannot load the system's CA paths: %s", reason(why, sizeof why));
        goto fail;
    }
    if (o->cert_file && o->cert_file[0]) {
        const char *key = o->key_file && o->key_file[0] ? o->key_file : o->cert_file;
        if (SSL_CTX_use_certificate_chain_file(t->ctx, o->cert_file) != 1) {
            snprintf(err, errlen, "TLS: cannot load the certificate %s: %s", o->cert_file, reason(why, sizeof why));
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(t->ctx) != 1) {
            snprintf(err, errlen, "TLS: cannot use the key %s with %s: %s", key, o->cert_file, reason(why, sizeof why));
            goto fail;
        }
    }
    t->ssl = SSL_new(t->ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        goto fail_ossl;
    }
    BIO_set_mem_eof_return(t->rbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_connect_state(t->ssl);
    int ok;
    if (is_ip(t->host)) {
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), t->host) == 1;
    } else {
        ok = SSL_set_tlsext_host_name(t->ssl, t->host) == 1 && SSL_set1_host(t->ssl, t->host) == 1;
    }
    if (!ok) {
        snprintf(err, errlen, "TLS: cannot check the name %s: %s", t->host, reason(why, sizeof why));
        goto fail;
    }
    *out = t;
    return 0;
fail_ossl:
    snprintf(err, errlen, "TLS: %s", reason(why, sizeof why));
fail:
    pc_tls_free(t);
    return PC_ETLS;
}

void pc_tls_free(pc_tls *t) {
    if (!t) return;
    SSL_free(t->ssl);
    SSL_CTX_free(t->ctx);
    free(t);
}

int pc_tls_ready(const pc_tls *t) { return t->ready; }

uv_buf_t pc_tls_read_buf(pc_tls *t) { return uv_buf_init((char *)t->rbuf, sizeof t->rbuf); }

typedef struct records_write {
    uv_write_t req;
    uint8_t data[];
} records_write;

static void on_records_written(uv_write_t *req, int status) {
    (void)status; /* a failed write shows as a read error or EOF */
    free(req);
}

/* Writes what OpenSSL put into the write BIO by itself. */
static int send_records(pc_tls *t, uv_stream_t *stream) {
    size_t n = BIO_ctrl_pending(t->wbio);
    if (n == 0) return 0;
    records_write *w = malloc(sizeof *w + n);
    if (!w) return UV_ENOMEM;
    if (BIO_read(t->wbio, w->data, (int)n) != (int)n) {
        free(w);
        return UV_EIO;
    }
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)n);
    int r = uv_write(&w->req, stream, &b, 1, on_records_written);
    if (r < 0) free(w);
    return r;
}

static int handshake_error(pc_tls *t, char *err, size_t errlen) {
    char why[256];
    reason(why, sizeof why);
    long v = SSL_get_verify_result(t->ssl);
    if (t->first >= 0 && t->first != 0x16 && t->first != 0x15)
        snprintf(err, errlen,
                 "TLS handshake with %s failed: the server did not answer with TLS (first byte 0x%02x): is TLS on "
                 "at the server? (%s)",
                 t->host, t->first, why);
    else if (v != X509_V_OK)
        snprintf(err, errlen, "TLS handshake with %s failed: %s (%s)", t->host, why, X509_verify_cert_error_string(v));
    else
        snprintf(err, errlen, "TLS handshake with %s failed: %s", t->host, why);
    return PC_ETLS;
}

int pc_tls_start(pc_tls *t, uv_stream_t *stream, char *err, size_t errlen) {
    int r = SSL_do_handshake(t->ssl);
    int e = SSL_get_error(t->ssl, r);
    if (r != 1 && e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return handshake_error(t, err, errlen);
    return send_records(t, stream);
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

int pc_tls_input(pc_tls *t, uv_stream_t *stream, size_t n, uint8_t **in, size_t *len, size_t *cap, char *err,
                 size_t errlen) {
    if (n == 0) return 0;
    if (t->first < 0) t->first = t->rbuf[0];
    if (BIO_write(t->rbio, t->rbuf, (int)n) != (int)n) return UV_ENOMEM;
    int done = 0;
    if (!t->ready) {
        int r = SSL_do_handshake(t->ssl);
        if (r != 1) {
            int e = SSL_get_error(t->ssl, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                send_records(t, stream); /* the alert */
                return handshake_error(t, err, errlen);
            }
            return send_records(t, stream);
        }
        t->ready = done = 1;
    }
    for (;;) {
        if (reserve(in, cap, *len + 16384)) return UV_ENOMEM;
        size_t room = *cap - *len;
        int r = SSL_read(t->ssl, *in + *len, room > INT_MAX ? INT_MAX : (int)room);
        if (r > 0) {
            *len += (size_t)r;
            continue;
        }
        int e = SSL_get_error(t->ssl, r);
        int w = send_records(t, stream);
        if (w < 0) return w;
        if (e == SSL_ERROR_WANT_READ) return done;
        if (e == SSL_ERROR_ZERO_RETURN) return PC_ECLOSED;
        char why[256];
        snprintf(err, errlen, "TLS error: %s", reason(why, sizeof why));
        return PC_ETLS;
    }
}

int pc_tls_seal(pc_tls *t, const uint8_t *p, size_t n, uint8_t **out, size_t *out_len, size_t *out_cap) {
    while (n > 0) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
        if (SSL_write(t->ssl, p, chunk) != chunk) {
            ERR_clear_error();
            return PC_ETLS;
        }
        p += chunk;
        n -= (size_t)chunk;
    }
    size_t len = BIO_ctrl_pending(t->wbio);
    if (reserve(out, out_cap, len)) return UV_ENOMEM;
    if (len > 0 && BIO_read(t->wbio, *out, (int)len) != (int)len) return PC_ETLS;
    *out_len = len;
    return 0;
}
