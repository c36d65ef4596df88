/*
 * pc_fleet.c — worlds that move between physd instances, the client's
 * side (pc_client.h, docs/fleet.md): server addresses, redirects and
 * NOTICE_WORLD_MOVED read into a pc_world_moved, and the MigrateWorld and
 * Drain request builders.
 *
 * Normal path: a client that gets a redirect (a reply STATUS_UNAVAILABLE
 * with Reply.moved) or a NOTICE_WORLD_MOVED reads the new address with
 * pc_reply_moved / pc_notice_moved, connects there and sends the request
 * again (or subscribes again).
 *
 * Failure modes: an address that does not parse (no host, a port outside
 * 1..65535, an unclosed bracket, text after the port) gives UV_EINVAL; a
 * moved message whose address does not parse is returned with port 0.
 *
 * Invariants: nothing here keeps a pointer to its arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physd/pc_client.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x

int pc_parse_address(const char *text, char *host, size_t hostlen, int *port) {
    if (!text || !host || hostlen == 0 || !port) return UV_EINVAL;
    const char *h = text, *colon = NULL;
    size_t hn;
    if (text[0] == '[') { /* [IPv6]:PORT */
        const char *close = strchr(text, ']');
        if (!close) return UV_EINVAL;
        h = text + 1;
        hn = (size_t)(close - h);
        if (close[1] == ':')
            colon = close + 1;
        else if (close[1] != 0)
            return UV_EINVAL;
    } else {
        colon = strrchr(text, ':');
        if (colon && strchr(text, ':') != colon) colon = NULL; /* a bare IPv6 address: no port */
        hn = colon ? (size_t)(colon - text) : strlen(text);
    }
    if (hn == 0 || hn >= hostlen) return UV_EINVAL;
    int p = PC_DEFAULT_PORT;
    if (colon) {
        char *end = NULL;
        long v = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || v < 1 || v > 65535) return UV_EINVAL;
        p = (int)v;
    }
    memcpy(host, h, hn);
    host[hn] = 0;
    *port = p;
    return 0;
}

static void fill_moved(pc_world_moved *out, uint64_t world, const char *address, uint64_t tick, uint64_t hash) {
    memset(out, 0, sizeof *out);
    out->world_id = world;
    snprintf(out->address, sizeof out->address, "%s", address ? address : "");
    out->tick = tick;
    out->state_hash = hash;
    if (pc_parse_address(out->address, out->host, sizeof out->host, &out->port) != 0) {
        out->host[0] = 0;
        out->port = 0;
    }
}

int pc_reply_moved(const Physd__V1__Reply *r, pc_world_moved *out) {
    if (!r || r->status != PHYSD__V1__STATUS__STATUS_UNAVAILABLE ||
        r->payload_case != PHYSD__V1__REPLY__PAYLOAD_MOVED || !r->moved)
        return 0;
    if (out) fill_moved(out, r->moved->world_id, r->moved->address, r->moved->tick, r->moved->state_hash);
    return 1;
}

int pc_notice_moved(const Physd__V1__Notice *n, pc_world_moved *out) {
    if (!n || n->kind != PHYSD__V1__NOTICE_KIND__NOTICE_WORLD_MOVED) return 0;
    if (out) fill_moved(out, n->world_id, n->address, n->tick, n->state_hash);
    return 1;
}

int pc_migrate_world(pc_client *c, uint64_t world, const char *target, const char *credentials, pc_reply_cb cb,
                     void *data) {
    if (!target) return UV_EINVAL;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__MigrateWorld mw = PHYSD__V1__MIGRATE_WORLD__INIT;
    mw.world_id = world;
    mw.target = (char *)target;
    if (credentials) {
        mw.credentials.data = (uint8_t *)credentials;
        mw.credentials.len = strlen(credentials);
    }
    m.request_case = REQ(MIGRATE_WORLD);
    m.migrate_world = &mw;
    return pc_request(c, &m, cb, data);
}

int pc_drain(pc_client *c, const char *target, const char *credentials, int exit_after, pc_reply_cb cb, void *data) {
    if (!target) return UV_EINVAL;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Drain d = PHYSD__V1__DRAIN__INIT;
    d.target = (char *)target;
    if (credentials) {
        d.credentials.data = (uint8_t *)credentials;
        d.credentials.len = strlen(credentials);
    }
    d.exit = exit_after != 0;
    m.request_case = REQ(DRAIN);
    m.drain = &d;
    return pc_request(c, &m, cb, data);
}
