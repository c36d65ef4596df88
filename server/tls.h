/*
 * tls.h — optional TLS on the protocol port (OpenSSL through memory BIOs
 * on the libuv stream; docs/security.md, "TLS").
 *
 * When tls_cert and tls_key are set, every connection accepted on the
 * protocol port gets a ps_tls: ciphertext read from the socket goes into
 * its read BIO, the handshake runs on the loop thread, and once it is done
 * SSL_read's plaintext enters the connection's frame decoder exactly as
 * socket bytes would (into the decoder's window or through the read
 * buffer, so max_frame and max_input_memory hold as they do without TLS).
 * The output queue is unchanged: a write takes entries as usual, SSL_write
 * puts them into the write BIO and its bytes go out with one uv_write; the
 * entries stay in flight (counted by the queue) until that write is done.
 *
 * A first byte that cannot start a TLS record (a plain protobuf client)
 * gets one clear Reply with request id 0, FAILED_PRECONDITION, written
 * without TLS, and the connection is closed. A failed handshake logs one
 * line with OpenSSL's reason, sends the alert and closes; a handshake not
 * done within tls_handshake_timeout is closed.
 */
#ifndef PHYSD_TLS_H
#define PHYSD_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ps_internal.h"

typedef struct ps_tls_ctx ps_tls_ctx;
typedef struct ps_tls ps_tls;

/* Loads the certificate, key and client CA of cfg. *out is NULL when TLS
 * is off (neither tls_cert nor tls_key set). Returns 0, or UV_EINVAL with
 * the reason in err (one of cert/key missing, a file that does not load,
 * a key that does not match the certificate). */
int ps_tls_ctx_create(const ps_config *cfg, ps_tls_ctx **out, char *err, size_t errlen);
void ps_tls_ctx_free(ps_tls_ctx *x);

/* A new accepted connection on a TLS server: creates c->tls. 0 or UV_ENOMEM. */
int ps_tls_conn_start(ps_conn *c, ps_tls_ctx *x);
/* Frees c->tls (from the connection's close callback). */
void ps_tls_conn_free(ps_conn *c);
/* n bytes of ciphertext read from the socket. */
void ps_tls_input(ps_conn *c, const uint8_t *data, size_t n);
/* After a pause of the connection's reading (its loop-time budget, conn.c):
 * decrypts and hands on what OpenSSL still holds, until the next pause. */
void ps_tls_resume(ps_conn *c);
/* For a connection still in its handshake: closes it when it is older
 * than tls_handshake_timeout and returns 1 (the other deadlines do not
 * apply yet); 0 once the handshake is done. */
int ps_tls_check_deadline(ps_conn *c, uint64_t now_ns);
/* Takes the next write's entries from the output queue into c->inflight
 * (at most PS_TLS_WRITE_BYTES of plaintext, at least one entry). */
size_t ps_tls_take(ps_conn *c);
/* Encrypts c->wbufs[0..n) and writes the ciphertext with c->wreq; cb runs
 * once it is written, as uv_write's would. Returns 0 or a negative error
 * (then cb will not run). */
int ps_tls_write(ps_conn *c, unsigned n, uv_write_cb cb);

#define PS_TLS_WRITE_BYTES (256u * 1024u)

/* conn.c's entry points for decrypted input: n bytes at p (in_window: they
 * were written into the frame decoder's window), and the peer's end. */
void ps_conn_plain(ps_conn *c, const uint8_t *p, size_t n, int in_window);
void ps_conn_eof(ps_conn *c);

#endif /* PHYSD_TLS_H */
