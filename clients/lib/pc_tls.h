/*
 * pc_tls.h — the client library's TLS (internal): OpenSSL through memory
 * BIOs on the client's libuv stream. pc_client.c calls these hooks; the
 * TLS logic is in pc_tls.c.
 */
#ifndef PHYSD_PC_TLS_H
#define PHYSD_PC_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "physd/pc_client.h"

typedef struct pc_tls pc_tls;

/* A client-side TLS session for host (options copied). Returns 0 or
 * PC_ETLS with the reason in err (a CA or certificate file that does not
 * load). */
int pc_tls_new(pc_tls **out, const pc_tls_options *o, const char *host, char *err, size_t errlen);
void pc_tls_free(pc_tls *t);
/* Starts the handshake (the ClientHello goes out on stream). 0 or an error. */
int pc_tls_start(pc_tls *t, uv_stream_t *stream, char *err, size_t errlen);
/* Where the next socket read lands (ciphertext). */
uv_buf_t pc_tls_read_buf(pc_tls *t);
/* n bytes of ciphertext arrived (in pc_tls_read_buf's buffer): drives the
 * handshake and appends the plaintext to *in (*len bytes used of *cap,
 * grown with realloc). Returns 1 when the handshake finished during this
 * call, 0, PC_ECLOSED once the peer sent close_notify (after its last
 * bytes were appended), or PC_ETLS / UV_ENOMEM with the reason in err. */
int pc_tls_input(pc_tls *t, uv_stream_t *stream, size_t n, uint8_t **in, size_t *len, size_t *cap, char *err,
                 size_t errlen);
/* 1 once the handshake is done (application data may be sent). */
int pc_tls_ready(const pc_tls *t);
/* Encrypts n bytes into *out (grown with realloc; *out_len set). 0 or an error. */
int pc_tls_seal(pc_tls *t, const uint8_t *p, size_t n, uint8_t **out, size_t *out_len, size_t *out_cap);

#endif /* PHYSD_PC_TLS_H */
