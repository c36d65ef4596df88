/*
 * http.h — physd's HTTP side (http.c, docs/http.md): libwebsockets on the
 * server's own libuv loop, serving /, /ws, /metrics, /healthz and /readyz
 * on its own port (http_listen:http_port; off with http = off).
 *
 * Threads: the loop thread only.
 */
#ifndef PHYSD_HTTP_H
#define PHYSD_HTTP_H

struct ps_server;

/* Starts listening (ps_server_create, after the protocol port): 0, or a
 * negative code with nothing left running (PS_EPROTECTED for a
 * non-loopback http_listen without access control or --insecure; a libuv
 * code when the port cannot be bound). A no-op when http is off. */
int ps_http_start(struct ps_server *s);
/* Shutdown: stops the HTTP side (libwebsockets closes its handles on the
 * loop); called once the protocol connections are gone. Idempotent. */
void ps_http_stop(struct ps_server *s);
/* Frees what is left after the loop ended (ps_server_destroy). */
void ps_http_free(struct ps_server *s);

#endif /* PHYSD_HTTP_H */
