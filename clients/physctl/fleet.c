/*
 * fleet.c — physctl with several servers and worlds that move
 * (docs/fleet.md): `--servers LIST` (placement of new worlds by the rule
 * of clients/common/placement.h, the server of a world found by asking
 * each, `worlds` across all of them), the `fleet`, `migrate`, `release`
 * (a move in doubt) and `drain` commands, and following a redirect when a
 * world moved.
 *
 * Normal path: with --servers, the first command that needs a connection
 * picks its server (a new world: the least loaded; a WORLD argument: the
 * one that lists it) and sets host and port; the connection is then made
 * as without --servers. A request answered with a redirect is sent again
 * to the address in it (ctl_call_any, at most 4 hops).
 *
 * Failure modes: no server answers, a world on none of them or on several
 * (ids that collide: give each server its own world_id_base) are usage or
 * request errors with the reason; a redirect whose address does not parse
 * is returned to the caller as the error it is.
 *
 * Invariants: the probes run on loops of their own (pl_probe), closed
 * before the command goes on; one connection per run, as always.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "physctl.h"
#include "placement.h"

static int parse_servers(ctl *x, pl_server *s, int *n) {
    char err[256];
    if (pl_parse_servers(x->servers, s, PL_MAX_SERVERS, n, err, sizeof err))
        return ctl_fail(x, EXIT_USAGE, "--servers: %s", err);
    return 0;
}

static void choose(ctl *x, const pl_server *s) {
    snprintf(x->host_buf, sizeof x->host_buf, "%s", s->host);
    x->host = x->host_buf;
    x->port = s->port;
    x->chosen = 1;
}

int ctl_fleet_place(ctl *x) {
    pl_server s[PL_MAX_SERVERS];
    int n = 0, r = parse_servers(x, s, &n);
    if (r) return r;
    pc_options o;
    pc_tls_options tls;
    ctl_client_options(x, &o, &tls);
    if (pl_probe(s, n, &o, x->timeout_ms) == 0)
        return ctl_fail(x, EXIT_CONNECT, "no server of --servers answered (the first: %s: %s)", s[0].address,
                        s[0].error);
    const int i = pl_choose(s, n);
    if (i < 0) return ctl_fail(x, EXIT_REQUEST, "every server of --servers is full (max_worlds) or down");
    choose(x, &s[i]);
    if (!x->json)
        fprintf(stderr, "physctl %s: placed on %s (least loaded: %llu awake bodies in %d worlds)\n", x->cmd,
                s[i].address, (unsigned long long)pl_load(&s[i]), s[i].worlds);
    return 0;
}

int ctl_fleet_locate(ctl *x, uint64_t world) {
    pl_server s[PL_MAX_SERVERS];
    int n = 0, r = parse_servers(x, s, &n);
    if (r) return r;
    if (world == 0) { /* nothing to look for: the first server */
        choose(x, &s[0]);
        return 0;
    }
    pc_options o;
    pc_tls_options tls;
    ctl_client_options(x, &o, &tls);
    int found = -1, also = -1, up = 0;
    for (int i = 0; i < n; i++) {
        uv_loop_t loop;
        if (uv_loop_init(&loop) != 0) continue;
        pc_client *c = NULL;
        if (pc_connect_sync(&c, &loop, s[i].host, s[i].port, x->timeout_ms, &o) == 0) {
            up++;
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
            m.request_case = REQ(LIST_WORLDS);
            m.list_worlds = &lw;
            smsg *rep = NULL;
            if (pc_call(c, &m, x->timeout_ms, &rep) == 0 && rep->reply->worlds)
                for (size_t k = 0; k < rep->reply->worlds->n_worlds; k++)
                    if (rep->reply->worlds->worlds[k]->world_id == world) {
                        if (found < 0)
                            found = i;
                        else if (also < 0)
                            also = i;
                    }
            ctl_free(rep);
            pc_close_sync(c);
        }
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
    }
    if (also >= 0)
        return ctl_fail(x, EXIT_USAGE,
                        "world %llu is on %s and on %s (their ids collide: give each server its own world_id_base); "
                        "name one with --host and --port",
                        (unsigned long long)world, s[found].address, s[also].address);
    if (found < 0) {
        if (up == 0) return ctl_fail(x, EXIT_CONNECT, "no server of --servers answered");
        return ctl_fail(x, EXIT_REQUEST, "NOT_FOUND: world %llu is on none of the %d servers",
                        (unsigned long long)world, n);
    }
    choose(x, &s[found]);
    return 0;
}

int ctl_follow_redirect(ctl *x, const Physd__V1__ServerMessage *rep) {
    pc_world_moved mv;
    if (!rep || rep->msg_case != PHYSD__V1__SERVER_MESSAGE__MSG_REPLY || !pc_reply_moved(rep->reply, &mv) || !mv.port)
        return 0;
    if (x->c) pc_close_sync(x->c);
    x->c = NULL;
    snprintf(x->host_buf, sizeof x->host_buf, "%s", mv.host);
    x->host = x->host_buf;
    x->port = mv.port;
    x->chosen = 1;
    if (!x->json)
        fprintf(stderr, "physctl %s: world %llu moved to %s (at tick %llu): asking there\n", x->cmd,
                (unsigned long long)mv.world_id, mv.address, (unsigned long long)mv.tick);
    int r = ctl_connect(x);
    return r ? -r : 1;
}

/* ----------------------------------------------------------- commands */

int physctl_worlds_fleet(ctl *x) {
    pl_server s[PL_MAX_SERVERS];
    int n = 0, r = parse_servers(x, s, &n);
    if (r) return r;
    pc_options o;
    pc_tls_options tls;
    ctl_client_options(x, &o, &tls);
    jw j;
    if (x->json) {
        jw_init(&j, 1);
        jw_object(&j);
        jw_key(&j, "servers");
        jw_array(&j);
    } else {
        printf("%-22s %-6s %-20s %-16s %-8s %10s %7s %5s\n", "SERVER", "ID", "NAME", "PRESET", "STATE", "TICK",
               "BODIES", "SUBS");
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        uv_loop_t loop;
        if (uv_loop_init(&loop) != 0) continue;
        pc_client *c = NULL;
        smsg *rep = NULL;
        char why[256] = "";
        int e = pc_connect_sync_msg(&c, &loop, s[i].host, s[i].port, x->timeout_ms, &o, why, sizeof why);
        if (e == 0) {
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__ListWorlds lw = PHYSD__V1__LIST_WORLDS__INIT;
            m.request_case = REQ(LIST_WORLDS);
            m.list_worlds = &lw;
            e = pc_call(c, &m, x->timeout_ms, &rep);
        }
        const Physd__V1__WorldList *wl = e == 0 && rep && rep->reply->worlds ? rep->reply->worlds : NULL;
        if (!wl) {
            failed++;
            fprintf(stderr, "physctl %s: %s: %s%s%s\n", x->cmd, s[i].address, e ? pc_strerror(e) : "refused",
                    why[0] ? ": " : "", why);
        }
        if (x->json) {
            jw_object(&j);
            jw_key(&j, "server");
            jw_string(&j, s[i].address);
            jw_key(&j, "up");
            jw_bool(&j, wl != NULL);
            if (wl) {
                jw_key(&j, "worlds");
                pbj_write(&j, &wl->base, PBJ_EMIT_DEFAULTS);
            }
            jw_object_end(&j);
        } else {
            for (size_t k = 0; wl && k < wl->n_worlds; k++) {
                const Physd__V1__WorldInfo *w = wl->worlds[k];
                printf("%-22s %-6llu %-20s %-16s %-8s %10llu %7u %5u\n", s[i].address, (unsigned long long)w->world_id,
                       w->name && w->name[0] ? w->name : "-", w->preset && w->preset[0] ? w->preset : "-",
                       w->paused ? "paused" : "running", (unsigned long long)w->tick, w->body_count, w->subscriptions);
            }
        }
        ctl_free(rep);
        if (c) pc_close_sync(c);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
    }
    if (x->json) {
        jw_array_end(&j);
        jw_object_end(&j);
        ctl_print_json(&j);
        jw_free(&j);
    }
    return failed == n ? EXIT_CONNECT : 0;
}

int physctl_fleet(ctl *x, int argc, char **argv) {
    if (argc > 1) return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[1]);
    if (!x->servers) return ctl_fail(x, EXIT_USAGE, "give the servers: --servers HOST:PORT,... (or PHYSD_SERVERS)");
    pl_server s[PL_MAX_SERVERS];
    int n = 0, r = parse_servers(x, s, &n);
    if (r) return r;
    pc_options o;
    pc_tls_options tls;
    ctl_client_options(x, &o, &tls);
    const int up = pl_probe(s, n, &o, x->timeout_ms);
    const int next = pl_choose(s, n);
    if (x->json) {
        jw j;
        jw_init(&j, 1);
        jw_object(&j);
        jw_key(&j, "servers");
        jw_array(&j);
        for (int i = 0; i < n; i++) {
            jw_object(&j);
            jw_key(&j, "server");
            jw_string(&j, s[i].address);
            jw_key(&j, "up");
            jw_bool(&j, s[i].up);
            if (!s[i].up) {
                jw_key(&j, "error");
                jw_string(&j, s[i].error);
            }
            jw_key(&j, "worlds");
            jw_int(&j, s[i].worlds);
            jw_key(&j, "max_worlds");
            jw_int(&j, s[i].max_worlds);
            jw_key(&j, "bodies");
            jw_uint(&j, s[i].bodies);
            jw_key(&j, "awake_bodies");
            jw_uint(&j, s[i].awake);
            jw_key(&j, "load");
            jw_uint(&j, pl_load(&s[i]));
            jw_object_end(&j);
        }
        jw_array_end(&j);
        jw_key(&j, "next");
        if (next >= 0)
            jw_string(&j, s[next].address);
        else
            jw_null(&j);
        jw_object_end(&j);
        ctl_print_json(&j);
        jw_free(&j);
    } else {
        printf("%-22s %-5s %7s %10s %8s %8s\n", "SERVER", "UP", "WORLDS", "MAX", "BODIES", "AWAKE");
        for (int i = 0; i < n; i++) {
            if (s[i].up)
                printf("%-22s %-5s %7d %10d %8llu %8llu\n", s[i].address, "yes", s[i].worlds, s[i].max_worlds,
                       (unsigned long long)s[i].bodies, (unsigned long long)s[i].awake);
            else
                printf("%-22s %-5s %s\n", s[i].address, "no", s[i].error);
        }
        if (next >= 0)
            printf("a new world goes to %s (the fewest awake bodies, then the fewest worlds)\n", s[next].address);
        else
            printf("no server can take a new world\n");
    }
    return up == 0 ? EXIT_CONNECT : 0;
}

/* --to HOST:PORT, --to-token-file F, --exit (drain). */
typedef struct move_args {
    const char *to;
    char cred[4097];
    int exit_after;
} move_args;

/* --to-token-file F: the target's token into a->cred. */
static int read_target_token(ctl *x, const char *path, move_args *a) {
    FILE *f = fopen(path, "r");
    if (!f) return ctl_fail(x, EXIT_FILE, "--to-token-file %s: %s", path, strerror(errno));
    size_t n = fread(a->cred, 1, sizeof a->cred - 1, f);
    fclose(f);
    a->cred[n] = 0;
    while (n > 0 && (a->cred[n - 1] == '\n' || a->cred[n - 1] == ' '))
        a->cred[--n] = 0;
    return 0;
}

static int parse_move_args(ctl *x, int argc, char **argv, int first, int allow_exit, move_args *a) {
    memset(a, 0, sizeof *a);
    for (int i = first; i < argc; i++) {
        if (!strcmp(argv[i], "--exit") && allow_exit) {
            a->exit_after = 1;
        } else if ((!strcmp(argv[i], "--to") || !strcmp(argv[i], "--to-token-file")) && i + 1 < argc) {
            if (!strcmp(argv[i], "--to")) {
                a->to = argv[++i];
                continue;
            }
            int r = read_target_token(x, argv[++i], a);
            if (r) return r;
        } else {
            return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s' (see physctl %s --help)", argv[i], x->cmd);
        }
    }
    char host[256];
    int port;
    if (!a->to) return ctl_fail(x, EXIT_USAGE, "missing --to HOST:PORT");
    if (pc_parse_address(a->to, host, sizeof host, &port))
        return ctl_fail(x, EXIT_USAGE, "bad --to '%s' (expected HOST:PORT)", a->to);
    return 0;
}

static void print_moved(const Physd__V1__MovedWorld *w) {
    if (w->status == PHYSD__V1__STATUS__STATUS_OK)
        printf("world %llu moved to %s at tick %llu (state hash %016llx, %llu bytes, frozen %.1f ms)\n",
               (unsigned long long)w->world_id, w->address, (unsigned long long)w->tick,
               (unsigned long long)w->state_hash, (unsigned long long)w->bytes, w->frozen_ms);
    else
        printf("world %llu stays: %s: %s\n", (unsigned long long)w->world_id, pc_status_name((int)w->status),
               w->message);
}

int physctl_migrate(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    move_args a;
    if ((r = parse_move_args(x, argc, argv, 2, 0, &a))) return r;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__MigrateWorld mw = PHYSD__V1__MIGRATE_WORLD__INIT;
    mw.world_id = w;
    mw.target = (char *)a.to;
    mw.credentials.data = (uint8_t *)a.cred;
    mw.credentials.len = strlen(a.cred);
    m.request_case = REQ(MIGRATE_WORLD);
    m.migrate_world = &mw;
    if (!x->timeout_given) x->timeout_ms = 0; /* as long as the move takes */
    smsg *rep;
    r = ctl_call(x, &m, &rep);
    memset(a.cred, 0, sizeof a.cred);
    if (r) return r;
    const Physd__V1__MigrateReply *mr = rep->reply->migrate;
    if (x->json)
        ctl_print_message(mr ? &mr->base : &rep->reply->base);
    else if (mr && mr->n_worlds == 1)
        print_moved(mr->worlds[0]);
    ctl_free(rep);
    return 0;
}

int physctl_release(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    move_args a;
    memset(&a, 0, sizeof a);
    int moved = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--moved")) {
            moved = 1;
        } else if (!strcmp(argv[i], "--to-token-file") && i + 1 < argc) {
            if ((r = read_target_token(x, argv[++i], &a))) return r;
        } else {
            return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s' (see physctl %s --help)", argv[i], x->cmd);
        }
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__MigrateWorld mw = PHYSD__V1__MIGRATE_WORLD__INIT;
    mw.world_id = w;
    mw.release = moved ? PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_MOVED : PHYSD__V1__DOUBT_RELEASE__DOUBT_RELEASE_HERE;
    mw.credentials.data = (uint8_t *)a.cred;
    mw.credentials.len = strlen(a.cred);
    m.request_case = REQ(MIGRATE_WORLD);
    m.migrate_world = &mw;
    if (!x->timeout_given) x->timeout_ms = 0; /* the target is asked first (5 s at most) */
    smsg *rep;
    r = ctl_call(x, &m, &rep);
    memset(a.cred, 0, sizeof a.cred);
    if (r) return r;
    const Physd__V1__MigrateReply *mr = rep->reply->migrate;
    if (x->json) {
        ctl_print_message(mr ? &mr->base : &rep->reply->base);
    } else if (mr && mr->n_worlds == 1) {
        const Physd__V1__MovedWorld *mv = mr->worlds[0];
        printf("world %llu %s at tick %llu (state hash %016llx): %s\n", (unsigned long long)mv->world_id,
               mv->status == PHYSD__V1__STATUS__STATUS_OK ? "is at the target" : "ticks here",
               (unsigned long long)mv->tick, (unsigned long long)mv->state_hash, mv->message);
    }
    ctl_free(rep);
    return 0;
}

int physctl_drain(ctl *x, int argc, char **argv) {
    move_args a;
    int r = parse_move_args(x, argc, argv, 1, 1, &a);
    if (r) return r;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Drain d = PHYSD__V1__DRAIN__INIT;
    d.target = (char *)a.to;
    d.credentials.data = (uint8_t *)a.cred;
    d.credentials.len = strlen(a.cred);
    d.exit = a.exit_after;
    m.request_case = REQ(DRAIN);
    m.drain = &d;
    if (!x->timeout_given) x->timeout_ms = 0;
    smsg *rep;
    r = ctl_call_any(x, &m, &rep);
    memset(a.cred, 0, sizeof a.cred);
    if (r) return r;
    const Physd__V1__MigrateReply *mr = rep->reply->migrate;
    if (x->json) {
        ctl_print_message(mr ? &mr->base : &rep->reply->base);
    } else {
        for (size_t i = 0; mr && i < mr->n_worlds; i++)
            print_moved(mr->worlds[i]);
        printf("%s\n", rep->reply->status == PHYSD__V1__STATUS__STATUS_OK ? "drained" : rep->reply->message);
    }
    if (rep->reply->status != PHYSD__V1__STATUS__STATUS_OK) r = ctl_fail_reply(x, rep);
    ctl_free(rep);
    return r;
}
