/*
 * placement.c — see placement.h: which of several physd servers a new
 * world goes to (docs/fleet.md).
 *
 * Normal path: each server is probed in turn with the client library's
 * blocking helpers on a private loop: connect, ListWorlds (the worlds and
 * their body counts), then QueryCounters of each world (its awake bodies),
 * all pipelined and awaited together. pl_choose then applies the rule.
 *
 * Failure modes: a server that cannot be reached or refuses is marked
 * down with the reason; a world that disappears between the list and its
 * counters counts with its listed bodies, none awake.
 *
 * Invariants: the probe's loop is closed before pl_probe returns.
 */
#include "placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pl_parse_servers(const char *list, pl_server *out, int max, int *n, char *err, size_t errlen) {
    *n = 0;
    if (!list || !list[0]) {
        snprintf(err, errlen, "no server addresses given");
        return -1;
    }
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        char one[300];
        if ((size_t)(e - p) >= sizeof one) {
            snprintf(err, errlen, "server address too long");
            return -1;
        }
        memcpy(one, p, (size_t)(e - p));
        one[e - p] = 0;
        if (*n >= max) {
            snprintf(err, errlen, "more than %d servers", max);
            return -1;
        }
        pl_server *s = &out[*n];
        memset(s, 0, sizeof *s);
        if (pc_parse_address(one, s->host, sizeof s->host, &s->port) != 0) {
            snprintf(err, errlen, "bad server address '%s' (expected HOST:PORT)", one);
            return -1;
        }
        snprintf(s->address, sizeof s->address, "%s", one);
        (*n)++;
        p = e;
    }
    if (*n == 0) {
        snprintf(err, errlen, "no server addresses given");
        return -1;
    }
    return 0;
}

typedef struct probe {
    pl_server *s;
    int pending;
} probe;

static void on_counters(pc_client *c, int err, const Physd__V1__Reply *r, void *data) {
    (void)c;
    probe *p = data;
    p->pending--;
    if (!err && r->status == PHYSD__V1__STATUS__STATUS_OK && r->payload_case == PHYSD__V1__REPLY__PAYLOAD_COUNTERS)
        p->s->awake += r->counters->awake_bodies;
}

static void probe_one(pl_server *s, const pc_options *opts, int timeout_ms) {
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        snprintf(s->error, sizeof s->error, "cannot create an event loop");
        return;
    }
    pc_client *c = NULL;
    char why[256] = "";
    int r = pc_connect_sync_msg(&c, &loop, s->host, s->port, timeout_ms, opts, why, sizeof why);
    if (r < 0) {
        snprintf(s->error, sizeof s->error, "%s (%s)%s%s", pc_strerror(r), pc_err_name(r), why[0] ? ": " : "", why);
    } else {
        const Physd__V1__HelloReply *hr = pc_client_server_info(c);
        s->max_worlds = hr ? (int)hr->max_worlds : 0;
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
        m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_LIST_WORLDS;
        m.list_worlds = &lw;
        Physd__V1__ServerMessage *rep = NULL;
        r = pc_call(c, &m, timeout_ms, &rep);
        if (r < 0) {
            snprintf(s->error, sizeof s->error, "%s (%s)", pc_strerror(r), pc_err_name(r));
        } else if (rep->reply->status != PHYSD__V1__STATUS__STATUS_OK || !rep->reply->worlds) {
            snprintf(s->error, sizeof s->error, "%s: %s", pc_status_name((int)rep->reply->status), rep->reply->message);
        } else {
            probe p = {s, 0};
            const Physd__V1__WorldList *wl = rep->reply->worlds;
            s->worlds = (int)wl->n_worlds;
            for (size_t i = 0; i < wl->n_worlds; i++) {
                s->bodies += wl->worlds[i]->body_count;
                if (pc_world_request(c, PHYSD__V1__CLIENT_MESSAGE__REQUEST_QUERY_COUNTERS, wl->worlds[i]->world_id,
                                     on_counters, &p) == 0)
                    p.pending++;
            }
            while (p.pending > 0 && pc_client_connected(c))
                uv_run(&loop, UV_RUN_ONCE);
            s->up = p.pending == 0;
            if (!s->up) snprintf(s->error, sizeof s->error, "the connection was lost during the probe");
        }
        if (rep) physd__v1__server_message__free_unpacked(rep, NULL);
        pc_close_sync(c);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}

int pl_probe(pl_server *s, int n, const pc_options *opts, int timeout_ms) {
    int up = 0;
    for (int i = 0; i < n; i++) {
        s[i].up = 0;
        s[i].error[0] = 0;
        s[i].worlds = 0;
        s[i].bodies = s[i].awake = 0;
        s[i].placed = 0;
        s[i].placed_bodies = 0;
        probe_one(&s[i], opts, timeout_ms);
        up += s[i].up;
    }
    return up;
}

uint64_t pl_load(const pl_server *s) { return s->awake + s->placed_bodies; }

int pl_choose(const pl_server *s, int n) {
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (!s[i].up) continue;
        const int worlds = s[i].worlds + s[i].placed;
        if (s[i].max_worlds > 0 && worlds >= s[i].max_worlds) continue;
        if (best < 0) {
            best = i;
            continue;
        }
        const uint64_t a = pl_load(&s[i]), b = pl_load(&s[best]);
        const int wb = s[best].worlds + s[best].placed;
        if (a < b || (a == b && worlds < wb)) best = i;
    }
    return best;
}

void pl_place(pl_server *s, int i, uint64_t bodies) {
    s[i].placed++;
    s[i].placed_bodies += bodies;
}
