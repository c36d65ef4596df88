/*
 * placement.h — sharding worlds across several physd servers
 * (docs/fleet.md), shared by physctl and physload.
 *
 * The rule: a new world goes to the server with the least load, where a
 * server's load is the number of awake bodies in its worlds (the sum of
 * WorldCounters.awake_bodies: what its steps cost) plus the bodies of the
 * worlds placed on it by this client and not measured yet; ties go to the
 * server with fewer worlds, then to the one listed first. A server that
 * did not answer, or whose worlds reach its max_worlds, gets none.
 *
 * Normal path: pl_parse_servers, pl_probe (blocking: one connection per
 * server on a loop of its own, ListWorlds then QueryCounters of each
 * world), then pl_choose / pl_place for each world to place.
 *
 * Failure modes: a list that does not parse gives -1 with a message; a
 * server that does not answer is marked down (its error kept) and skipped.
 */
#ifndef PHYSD_PLACEMENT_H
#define PHYSD_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "physd/pc_client.h"

#define PL_MAX_SERVERS 64

typedef struct pl_server {
    char host[256];
    int port;
    char address[300]; /* as given */
    int up;            /* answered the probe */
    char error[256];   /* why not */
    int worlds;        /* worlds it has (that this client may see) */
    int max_worlds;    /* from its hello */
    uint64_t bodies;   /* bodies in its worlds */
    uint64_t awake;    /* awake bodies in its worlds */
    int placed;        /* worlds placed on it since the probe */
    uint64_t placed_bodies;
} pl_server;

/* Parses "HOST:PORT,HOST:PORT,..." (spaces allowed after commas) into
 * out[0..*n); at most max. 0, or -1 with err. */
int pl_parse_servers(const char *list, pl_server *out, int max, int *n, char *err, size_t errlen);
/* Measures each server's load; opts (may be NULL) carries credentials and
 * TLS. Returns how many answered. */
int pl_probe(pl_server *s, int n, const pc_options *opts, int timeout_ms);
/* A server's load by the rule above. */
uint64_t pl_load(const pl_server *s);
/* The index of the server the next world goes to, or -1 when none can
 * take one. */
int pl_choose(const pl_server *s, int n);
/* Counts a world of `bodies` bodies as placed on server i. */
void pl_place(pl_server *s, int i, uint64_t bodies);

#endif
