/*
 * commands.c — the physctl commands (all but watch): each parses its own
 * arguments, sends its requests through ctl_call and prints text or, with
 * --json, one JSON document on stdout.
 *
 * Normal path: arguments → protocol messages (settings, bodies and shapes
 * through the descriptor-driven key=value setter of pbjson.c, so every
 * protocol field is reachable) → request(s) → output.
 *
 * Failure modes: bad arguments return EXIT_USAGE before anything is sent;
 * a refused request EXIT_REQUEST with the server's status and message; a
 * lost connection EXIT_LOST; file problems EXIT_FILE. Messages go to
 * stderr.
 *
 * Invariants: every message built here is freed before the command
 * returns; replies are freed with physd__v1__server_message__free_unpacked.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "physctl.h"
#include "scene_file.h"
#include "suggest.h"

static int simple_world_request(ctl *x, int argc, char **argv, Physd__V1__ClientMessage__RequestCase kind,
                                const char *done) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    if (argc > 2) return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[2]);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__PauseWorld pw = PHYSD__V1__PAUSE_WORLD__INIT;
    Physd__V1__ResumeWorld rs = PHYSD__V1__RESUME_WORLD__INIT;
    Physd__V1__ResetWorld rt = PHYSD__V1__RESET_WORLD__INIT;
    Physd__V1__DestroyWorld dw = PHYSD__V1__DESTROY_WORLD__INIT;
    pw.world_id = rs.world_id = rt.world_id = dw.world_id = w;
    m.request_case = kind;
    switch (kind) {
    case REQ(PAUSE):
        m.pause = &pw;
        break;
    case REQ(RESUME):
        m.resume = &rs;
        break;
    case REQ(RESET):
        m.reset = &rt;
        break;
    default:
        m.destroy_world = &dw;
        break;
    }
    smsg *rep;
    if ((r = ctl_call(x, &m, &rep))) return r;
    if (x->json) {
        jw j;
        jw_init(&j, 1);
        jw_object(&j);
        jw_key(&j, "world_id");
        jw_uint(&j, w);
        jw_key(&j, "tick");
        jw_uint(&j, rep->reply->tick);
        jw_key(&j, "result");
        jw_string(&j, done);
        jw_object_end(&j);
        ctl_print_json(&j);
        jw_free(&j);
    } else {
        printf("world %llu %s at tick %llu\n", (unsigned long long)w, done, (unsigned long long)rep->reply->tick);
    }
    ctl_free(rep);
    return 0;
}

/* -------------------------------------------------------------- worlds */

static int cmd_worlds(ctl *x, int argc, char **argv) {
    if (argc > 1) return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[1]);
    if (x->servers && !x->chosen) return physctl_worlds_fleet(x); /* every server's (fleet.c) */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListWorlds l = PHYSD__V1__LIST_WORLDS__INIT;
    m.request_case = REQ(LIST_WORLDS);
    m.list_worlds = &l;
    smsg *rep;
    int r = ctl_call(x, &m, &rep);
    if (r) return r;
    const Physd__V1__WorldList *wl = rep->reply->worlds;
    if (x->json) {
        ctl_print_message(&wl->base);
    } else {
        printf("%-6s %-20s %-16s %-8s %10s %7s %7s %5s\n", "ID", "NAME", "PRESET", "STATE", "TICK", "BODIES", "JOINTS",
               "SUBS");
        for (size_t i = 0; i < wl->n_worlds; i++) {
            const Physd__V1__WorldInfo *w = wl->worlds[i];
            printf("%-6llu %-20s %-16s %-8s %10llu %7u %7u %5u\n", (unsigned long long)w->world_id,
                   w->name && w->name[0] ? w->name : "-", w->preset && w->preset[0] ? w->preset : "-",
                   w->paused ? "paused" : "running", (unsigned long long)w->tick, w->body_count, w->joint_count,
                   w->subscriptions);
        }
    }
    ctl_free(rep);
    return 0;
}

/* -------------------------------------------------------------- create */

/* Applies key=value arguments to a Settings message. */
static int apply_settings(ctl *x, Physd__V1__Settings *s, char *arg) {
    char *k, *v, err[256];
    if (ctl_split_kv(arg, &k, &v))
        return ctl_fail(x, EXIT_USAGE, "expected key=value, got '%s' (see physctl %s --help)", arg, x->cmd);
    if (pbj_set_text(&s->base, k, v, err, sizeof err)) return ctl_fail(x, EXIT_USAGE, "%s", err);
    return 0;
}

/* Asks the server for its presets: 0 and *out (caller frees), or an exit
 * code (printed unless quiet, which also makes an error status fail). */
static int list_presets(ctl *x, int quiet, smsg **out) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListPresets lp = PHYSD__V1__LIST_PRESETS__INIT;
    m.request_case = REQ(LIST_PRESETS);
    m.list_presets = &lp;
    *out = NULL;
    if (!quiet) return ctl_call(x, &m, out);
    smsg *rep = NULL;
    int r = ctl_call_any(x, &m, &rep);
    if (r) return r;
    if (rep->reply->status != PHYSD__V1__STATUS__STATUS_OK ||
        rep->reply->payload_case != PHYSD__V1__REPLY__PAYLOAD_PRESETS) {
        ctl_free(rep);
        return EXIT_REQUEST;
    }
    *out = rep;
    return 0;
}

/* "; did you mean 'pyramid20'? (physctl presets lists them)" for an
 * unknown preset name, from the server's list; "" without one. */
static void preset_hint(ctl *x, const char *name, char *buf, size_t n) {
    buf[0] = 0;
    smsg *rep;
    if (list_presets(x, 1, &rep)) return;
    const Physd__V1__PresetList *pl = rep->reply->presets;
    const char **names = calloc(pl->n_presets ? pl->n_presets : 1, sizeof *names);
    for (size_t i = 0; names && i < pl->n_presets; i++)
        names[i] = pl->presets[i]->name;
    char near[200];
    if (names && suggest_nearest(name, names, pl->n_presets, near, sizeof near))
        snprintf(buf, n, "; did you mean %s? (physctl presets lists them)", near);
    else
        snprintf(buf, n, " (physctl presets lists them)");
    free(names);
    ctl_free(rep);
}

static int cmd_presets(ctl *x, int argc, char **argv) {
    if (argc > 1) return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[1]);
    smsg *rep;
    int r = list_presets(x, 0, &rep);
    if (r) return r;
    const Physd__V1__PresetList *pl = rep->reply->presets;
    if (x->json) {
        ctl_print_message(&pl->base);
    } else {
        printf("%-18s %7s  %s\n", "NAME", "BODIES", "DESCRIPTION");
        for (size_t i = 0; i < pl->n_presets; i++) {
            const Physd__V1__PresetInfo *p = pl->presets[i];
            printf("%-18s %7u  %s\n", p->name, p->bodies, p->description ? p->description : "");
        }
    }
    ctl_free(rep);
    return 0;
}

/* Writes a token to path, readable by its owner only (mode 0600, a new file). */
static int write_token_file(ctl *x, const char *path, const char *token) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return ctl_fail(x, EXIT_FILE, "--token-out %s: %s", path, strerror(errno));
    size_t n = strlen(token);
    int ok = write(fd, token, n) == (ssize_t)n && write(fd, "\n", 1) == 1;
    ok = close(fd) == 0 && ok;
    return ok ? 0 : ctl_fail(x, EXIT_FILE, "--token-out %s: %s", path, strerror(errno));
}

/* After a reply that carries a new token: to --token-out FILE, else (text
 * output, the server requires tokens) to stderr, since it is shown once. */
static int deliver_token(ctl *x, const Physd__V1__TokenInfo *t, const char *out_path, int force_stderr) {
    if (!t || !t->token || !t->token[0]) return 0;
    if (out_path) return write_token_file(x, out_path, t->token);
    if (!x->json && force_stderr)
        fprintf(stderr, "physctl %s: the %s token of world %llu (shown once; keep it): %s\n", x->cmd,
                t->role == PHYSD__V1__ROLE__ROLE_OWNER    ? "owner"
                : t->role == PHYSD__V1__ROLE__ROLE_EDITOR ? "editor"
                                                          : "viewer",
                (unsigned long long)t->world_id, t->token);
    return 0;
}

static int cmd_create(ctl *x, int argc, char **argv) {
    const char *preset = NULL, *name = NULL, *token_out = NULL;
    uint64_t history = 0;
    int paused = 0, r = 0;
    Physd__V1__Settings *s = (Physd__V1__Settings *)pbj_new(&physd__v1__settings__descriptor);
    int any = 0;
    for (int i = 1; i < argc && !r; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--scene") || !strcmp(a, "--preset") || !strcmp(a, "--name") || !strcmp(a, "--token-out")) {
            if (i + 1 >= argc) {
                r = ctl_fail(x, EXIT_USAGE, "%s needs a value", a);
                break;
            }
            if (!strcmp(a, "--name"))
                name = argv[++i];
            else if (!strcmp(a, "--token-out"))
                token_out = argv[++i];
            else
                preset = argv[++i];
        } else if (!strcmp(a, "--paused")) {
            paused = 1;
        } else if (!strcmp(a, "--history")) {
            if (i + 1 >= argc || ctl_parse_u64(argv[i + 1], &history) || history > 4096) {
                r = ctl_fail(x, EXIT_USAGE, "--history needs a number of ticks (0..4096)");
                break;
            }
            i++;
        } else if (a[0] == '-') {
            r = ctl_fail(x, EXIT_USAGE, "unknown option '%s'", a);
        } else {
            r = apply_settings(x, s, argv[i]);
            any = 1;
        }
    }
    if (!r) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
        cw.name = (char *)(name ? name : "");
        cw.preset = (char *)(preset ? preset : "");
        cw.settings = any ? s : NULL;
        cw.start_paused = paused;
        cw.history_ticks = (uint32_t)history;
        m.request_case = REQ(CREATE_WORLD);
        m.create_world = &cw;
        smsg *rep;
        r = ctl_call_any(x, &m, &rep);
        if (!r && rep->reply->status == PHYSD__V1__STATUS__STATUS_NOT_FOUND && preset) {
            /* The only NOT_FOUND of create_world: an unknown preset. */
            char hint[256];
            preset_hint(x, preset, hint, sizeof hint);
            r = ctl_fail(x, EXIT_REQUEST, "NOT_FOUND: %s%s", rep->reply->message ? rep->reply->message : "", hint);
        } else if (!r && rep->reply->status != PHYSD__V1__STATUS__STATUS_OK) {
            r = ctl_fail_reply(x, rep);
        } else if (!r) {
            const Physd__V1__HelloReply *hr = pc_client_server_info(x->c);
            r = deliver_token(x, rep->reply->world->owner_token, token_out, hr && hr->access_control);
            if (x->json)
                ctl_print_message(&rep->reply->world->base);
            else
                printf("%llu\n", (unsigned long long)rep->reply->world->world_id);
        }
        ctl_free(rep);
    }
    physd__v1__settings__free_unpacked(s, NULL);
    return r;
}

/* physctl token create WORLD --role R [--label L] [--token-out F] | revoke WORLD ID | list WORLD */
static int cmd_token(ctl *x, int argc, char **argv) {
    if (argc < 3) return ctl_fail(x, EXIT_USAGE, "usage: token create|revoke|list WORLD ... (physctl token --help)");
    const char *sub = argv[1];
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 2, &w);
    if (r) return r;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateToken ct = PHYSD__V1__CREATE_TOKEN__INIT;
    Physd__V1__RevokeToken rt = PHYSD__V1__REVOKE_TOKEN__INIT;
    Physd__V1__ListTokens lt = PHYSD__V1__LIST_TOKENS__INIT;
    const char *token_out = NULL;
    if (!strcmp(sub, "create")) {
        ct.world_id = w;
        ct.label = "";
        for (int i = 3; i < argc; i++) {
            if (i + 1 >= argc) return ctl_fail(x, EXIT_USAGE, "%s needs a value", argv[i]);
            if (!strcmp(argv[i], "--role")) {
                const char *v = argv[++i];
                if (!strcmp(v, "viewer"))
                    ct.role = PHYSD__V1__ROLE__ROLE_VIEWER;
                else if (!strcmp(v, "editor"))
                    ct.role = PHYSD__V1__ROLE__ROLE_EDITOR;
                else if (!strcmp(v, "owner"))
                    ct.role = PHYSD__V1__ROLE__ROLE_OWNER;
                else
                    return ctl_fail(x, EXIT_USAGE, "--role must be viewer, editor or owner, not '%s'", v);
            } else if (!strcmp(argv[i], "--label")) {
                ct.label = argv[++i];
            } else if (!strcmp(argv[i], "--token-out")) {
                token_out = argv[++i];
            } else {
                return ctl_fail(x, EXIT_USAGE, "unknown option '%s'", argv[i]);
            }
        }
        if (ct.role == PHYSD__V1__ROLE__ROLE_NONE)
            return ctl_fail(x, EXIT_USAGE, "--role viewer|editor|owner is needed");
        m.request_case = REQ(CREATE_TOKEN);
        m.create_token = &ct;
    } else if (!strcmp(sub, "revoke")) {
        if (argc != 4) return ctl_fail(x, EXIT_USAGE, "usage: token revoke WORLD TOKEN_ID");
        rt.world_id = w;
        rt.token_id = argv[3];
        m.request_case = REQ(REVOKE_TOKEN);
        m.revoke_token = &rt;
    } else if (!strcmp(sub, "list")) {
        if (argc != 3) return ctl_fail(x, EXIT_USAGE, "usage: token list WORLD");
        lt.world_id = w;
        m.request_case = REQ(LIST_TOKENS);
        m.list_tokens = &lt;
    } else {
        return ctl_fail(x, EXIT_USAGE, "unknown token command '%s' (create, revoke, list)", sub);
    }
    smsg *rep;
    if ((r = ctl_call(x, &m, &rep))) return r;
    if (m.request_case == REQ(CREATE_TOKEN)) {
        const Physd__V1__TokenInfo *t = rep->reply->token;
        if (token_out) r = write_token_file(x, token_out, t->token);
        if (x->json)
            ctl_print_message(&t->base);
        else if (!r)
            printf("%s\n", token_out ? t->token_id : t->token);
    } else if (m.request_case == REQ(REVOKE_TOKEN)) {
        if (x->json) {
            jw j;
            jw_init(&j, 1);
            jw_object(&j);
            jw_key(&j, "world_id");
            jw_uint(&j, w);
            jw_key(&j, "revoked");
            jw_string(&j, rt.token_id);
            jw_object_end(&j);
            ctl_print_json(&j);
        } else {
            printf("token %s of world %llu revoked\n", rt.token_id, (unsigned long long)w);
        }
    } else if (x->json) {
        ctl_print_message(&rep->reply->tokens->base);
    } else {
        const Physd__V1__TokenList *tl = rep->reply->tokens;
        printf("%-16s  %-6s  %-10s  %s\n", "TOKEN_ID", "ROLE", "CREATED", "LABEL");
        for (size_t i = 0; i < tl->n_tokens; i++) {
            const Physd__V1__TokenInfo *t = tl->tokens[i];
            printf("%-16s  %-6s  %-10llu  %s\n", t->token_id,
                   t->role == PHYSD__V1__ROLE__ROLE_OWNER    ? "owner"
                   : t->role == PHYSD__V1__ROLE__ROLE_EDITOR ? "editor"
                                                             : "viewer",
                   (unsigned long long)t->created_unix, t->label);
        }
    }
    ctl_free(rep);
    return r;
}

/* ------------------------------------------------------------ snapshots */

typedef struct snap_buf {
    uint8_t *data;
    size_t len, cap;
    uint32_t next, parts;
    int bad;
} snap_buf;

static void on_snap_part(pc_client *c, const Physd__V1__SnapshotPart *p, void *data) {
    (void)c;
    snap_buf *b = data;
    if (b->bad || p->part != b->next) {
        b->bad = 1;
        return;
    }
    if (b->len + p->data.len > b->cap) {
        size_t ncap = b->cap ? b->cap : 1 << 20;
        while (ncap < b->len + p->data.len)
            ncap *= 2;
        uint8_t *nd = realloc(b->data, ncap);
        if (!nd) {
            b->bad = 1;
            return;
        }
        b->data = nd;
        b->cap = ncap;
    }
    memcpy(b->data + b->len, p->data.data, p->data.len);
    b->len += p->data.len;
    b->next++;
    b->parts = p->parts;
}

/* physctl snapshot WORLD FILE: the world's exact snapshot to FILE. */
static int cmd_snapshot(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    if (argc != 3) return ctl_fail(x, EXIT_USAGE, "usage: snapshot WORLD FILE");
    if ((r = ctl_connect(x))) return r;
    snap_buf b = {0};
    pc_handlers h = {0};
    h.on_snapshot_part = on_snap_part;
    h.data = &b;
    pc_client_set_handlers(x->c, &h);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__TakeSnapshot t = PHYSD__V1__TAKE_SNAPSHOT__INIT;
    t.world_id = w;
    m.request_case = REQ(TAKE_SNAPSHOT);
    m.take_snapshot = &t;
    smsg *rep;
    if ((r = ctl_call(x, &m, &rep))) {
        free(b.data);
        return r;
    }
    const Physd__V1__SnapshotInfo *si = rep->reply->snapshot;
    if (b.bad || !si || b.len != si->bytes || b.next != si->parts) {
        r = ctl_fail(x, EXIT_LOST, "the snapshot's parts did not arrive whole (%zu of %llu bytes)", b.len,
                     (unsigned long long)(si ? si->bytes : 0));
    } else {
        FILE *f = fopen(argv[2], "wb");
        if (!f || fwrite(b.data, 1, b.len, f) != b.len || fclose(f) != 0) {
            if (f) fclose(f);
            r = ctl_fail(x, EXIT_FILE, "cannot write %s: %s", argv[2], strerror(errno));
        } else if (x->json) {
            ctl_print_message(&si->base);
        } else {
            printf("world %llu: snapshot of %llu bytes at tick %llu (state hash %016llx) written to %s\n",
                   (unsigned long long)w, (unsigned long long)si->bytes, (unsigned long long)si->tick,
                   (unsigned long long)si->state_hash, argv[2]);
        }
    }
    free(b.data);
    ctl_free(rep);
    return r;
}

/* physctl restore FILE [--name N] [--paused] [--token-out F]: a new world
 * from a snapshot file, uploaded in parts that fit the server's frames. */
static int cmd_restore(ctl *x, int argc, char **argv) {
    const char *file = NULL, *name = "", *token_out = NULL;
    int paused = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--paused")) {
            paused = 1;
        } else if (!strcmp(argv[i], "--name") || !strcmp(argv[i], "--token-out")) {
            if (i + 1 >= argc) return ctl_fail(x, EXIT_USAGE, "%s needs a value", argv[i]);
            if (!strcmp(argv[i], "--name"))
                name = argv[++i];
            else
                token_out = argv[++i];
        } else if (argv[i][0] == '-' || file) {
            return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[i]);
        } else {
            file = argv[i];
        }
    }
    if (!file) return ctl_fail(x, EXIT_USAGE, "usage: restore FILE [--name N] [--paused] [--token-out FILE]");
    FILE *f = fopen(file, "rb");
    if (!f) return ctl_fail(x, EXIT_FILE, "cannot read %s: %s", file, strerror(errno));
    uint8_t *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 1 << 20;
            uint8_t *nd = realloc(data, cap);
            if (!nd) {
                free(data);
                fclose(f);
                return ctl_fail(x, EXIT_FILE, "out of memory reading %s", file);
            }
            data = nd;
        }
        size_t got = fread(data + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    fclose(f);
    int r = ctl_connect(x);
    if (r) {
        free(data);
        return r;
    }
    const Physd__V1__HelloReply *hr = pc_client_server_info(x->c);
    const size_t per = hr && hr->max_frame > 8192 ? (size_t)hr->max_frame - 4096 : 60000;
    const uint32_t parts = (uint32_t)(len <= per ? 1 : (len + per - 1) / per);
    const uint64_t upload_id = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    smsg *rep = NULL;
    for (uint32_t k = 0; k < parts && !r; k++) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__RestoreWorld rw = PHYSD__V1__RESTORE_WORLD__INIT;
        rw.name = (char *)name;
        rw.data.data = data + (size_t)k * per;
        rw.data.len = k + 1 < parts ? per : len - (size_t)k * per;
        rw.upload_id = upload_id;
        rw.part = k;
        rw.parts = parts;
        rw.start_paused = paused;
        m.request_case = REQ(RESTORE_WORLD);
        m.restore_world = &rw;
        if (rep) ctl_free(rep);
        rep = NULL;
        r = ctl_call(x, &m, &rep);
    }
    free(data);
    if (r) return r;
    const Physd__V1__WorldInfo *wi = rep->reply->world;
    if (!wi) {
        ctl_free(rep);
        return ctl_fail(x, EXIT_LOST, "the server's reply to the last part carries no world");
    }
    r = deliver_token(x, wi->owner_token, token_out, hr && hr->access_control);
    if (x->json)
        ctl_print_message(&wi->base);
    else
        printf("%llu\n", (unsigned long long)wi->world_id);
    ctl_free(rep);
    return r;
}

static int cmd_destroy(ctl *x, int argc, char **argv) {
    return simple_world_request(x, argc, argv, REQ(DESTROY_WORLD), "destroyed");
}
static int cmd_pause(ctl *x, int argc, char **argv) {
    return simple_world_request(x, argc, argv, REQ(PAUSE), "paused");
}
static int cmd_resume(ctl *x, int argc, char **argv) {
    return simple_world_request(x, argc, argv, REQ(RESUME), "resumed");
}
static int cmd_reset(ctl *x, int argc, char **argv) { return simple_world_request(x, argc, argv, REQ(RESET), "reset"); }

/* ----------------------------------------------------------------- add */

/* Short names for the common BodyDef paths. */
static const struct {
    const char *alias, *path;
} body_aliases[] = {
    {"shape", "shapes.0.type"},
    {"radius", "shapes.0.radius"},
    {"half_extents", "shapes.0.half_extents"},
    {"half", "shapes.0.half_extents"},
    {"half_height", "shapes.0.half_height"},
    {"normal", "shapes.0.normal"},
    {"offset", "shapes.0.offset"},
    {"density", "shapes.0.density"},
    {"friction", "shapes.0.friction"},
    {"restitution", "shapes.0.restitution"},
    {"pos", "pose.position"},
    {"position", "pose.position"},
    {"rot", "pose.orientation"},
    {"orientation", "pose.orientation"},
    {"vel", "linear_velocity"},
    {"angvel", "angular_velocity"},
    {NULL, NULL},
};

/* The volume of a single solid shape with its defaults (m^3), or 0. */
static double shape_volume(const Physd__V1__ShapeDef *sd) {
    const double pi = 3.14159265358979323846;
    double r = sd->radius ? sd->radius->value : 0.5;
    switch (sd->type) {
    case PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE:
        return 4.0 / 3.0 * pi * r * r * r;
    case PHYSD__V1__SHAPE_TYPE__SHAPE_BOX: {
        const Physd__V1__Vec3 *h = sd->half_extents;
        return h ? 8.0 * h->x * h->y * h->z : 1.0;
    }
    case PHYSD__V1__SHAPE_TYPE__SHAPE_CAPSULE: {
        double hh = sd->half_height ? sd->half_height->value : 0.5;
        return pi * r * r * 2.0 * hh + 4.0 / 3.0 * pi * r * r * r;
    }
    default:
        return 0;
    }
}

/* 1 when text is one finite number. */
static int is_one_number(const char *text) {
    char *end;
    double v = strtod(text, &end);
    return end != text && !*end && isfinite(v);
}

/* Whether key names something of a BodyDef: an alias, "mass", or a path
 * whose first part is a BodyDef field. */
static int body_key_known(const char *key) {
    if (!strcmp(key, "mass")) return 1;
    for (int a = 0; body_aliases[a].alias; a++)
        if (!strcmp(key, body_aliases[a].alias)) return 1;
    char top[64];
    size_t len = strcspn(key, ".");
    if (len >= sizeof top) return 0;
    memcpy(top, key, len);
    top[len] = 0;
    return protobuf_c_message_descriptor_get_field_by_name(&physd__v1__body_def__descriptor, top) != NULL;
}

static int unknown_body_key(ctl *x, const char *key) {
    const char *cands[64];
    size_t n = 0;
    cands[n++] = "mass";
    for (int a = 0; body_aliases[a].alias && n < 48; a++)
        cands[n++] = body_aliases[a].alias;
    const ProtobufCMessageDescriptor *d = &physd__v1__body_def__descriptor;
    for (unsigned i = 0; i < d->n_fields && n < 64; i++)
        cands[n++] = d->fields[i].name;
    char near[200];
    if (suggest_nearest(key, cands, n, near, sizeof near))
        return ctl_fail(x, EXIT_USAGE, "unknown key '%s'; did you mean %s? (see physctl %s --help)", key, near, x->cmd);
    return ctl_fail(x, EXIT_USAGE, "unknown key '%s' (see physctl %s --help)", key, x->cmd);
}

/* Builds a BodyDef from key=value arguments. */
static int build_body(ctl *x, int argc, char **argv, int first, Physd__V1__BodyDef **out) {
    Physd__V1__BodyDef *b = (Physd__V1__BodyDef *)pbj_new(&physd__v1__body_def__descriptor);
    double mass = -1;
    char err[256];
    int r = 0;
    for (int i = first; i < argc && !r; i++) {
        char *k, *v;
        if (ctl_split_kv(argv[i], &k, &v)) {
            r = ctl_fail(x, EXIT_USAGE, "expected key=value, got '%s' (see physctl %s --help)", argv[i], x->cmd);
            break;
        }
        if (!body_key_known(k)) {
            r = unknown_body_key(x, k);
            break;
        }
        if (!strcmp(k, "mass")) {
            char *end;
            mass = strtod(v, &end);
            if (*end || !(mass > 0)) r = ctl_fail(x, EXIT_USAGE, "mass: expected a positive number, got '%s'", v);
            continue;
        }
        const char *path = k;
        for (int a = 0; body_aliases[a].alias; a++)
            if (!strcmp(k, body_aliases[a].alias)) path = body_aliases[a].path;
        /* A cube's half extents (and an isotropic inertia) may be one
         * number: half=1 is half=1,1,1. */
        size_t pl = strlen(path);
        int cube = (pl >= 12 && !strcmp(path + pl - 12, "half_extents")) || !strcmp(path, "mass.inertia");
        char triple[200];
        const char *text = v;
        if (cube && is_one_number(v) && strlen(v) < 60) {
            snprintf(triple, sizeof triple, "%s,%s,%s", v, v, v);
            text = triple;
        }
        if (pbj_set_text(&b->base, path, text, err, sizeof err)) {
            const char *leaf = strrchr(path, '.') ? strrchr(path, '.') + 1 : path;
            if (cube)
                r = ctl_fail(x, EXIT_USAGE, "%s: expected x,y,z or one number, got '%s'", k, v);
            else if (path != k && !strncmp(err, leaf, strlen(leaf)) && err[strlen(leaf)] == ':')
                /* Name the key as it was written: "pos: expected x,y,z ...". */
                r = ctl_fail(x, EXIT_USAGE, "%s%s", k, err + strlen(leaf));
            else
                r = ctl_fail(x, EXIT_USAGE, "%s", err);
        }
    }
    if (!r && b->n_shapes == 0) {
        /* No shape given: a sphere of the default radius. */
        pbj_set_text(&b->base, "shapes.0.type", "sphere", err, sizeof err);
    }
    if (!r && mass > 0) {
        /* mass=M scales the density of a single solid shape, so the
         * inertia follows from the shape. */
        double vol = b->n_shapes == 1 ? shape_volume(b->shapes[0]) : 0;
        if (!(vol > 0)) {
            r = ctl_fail(x, EXIT_USAGE,
                         "mass= needs exactly one sphere, box or capsule; use mass.mass= and "
                         "mass.inertia= otherwise");
        } else {
            char txt[64];
            snprintf(txt, sizeof txt, "%.17g", mass / vol);
            pbj_set_text(&b->base, "shapes.0.density", txt, err, sizeof err);
        }
    }
    if (r) {
        physd__v1__body_def__free_unpacked(b, NULL);
        return r;
    }
    *out = b;
    return 0;
}

static int cmd_add(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    Physd__V1__BodyDef *b;
    if ((r = build_body(x, argc, argv, 2, &b))) return r;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT;
    Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
    ab.body = b;
    op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
    op.add_body = &ab;
    r = ctl_edit_add(x, w, &op, "body_ids");
    physd__v1__body_def__free_unpacked(b, NULL);
    return r;
}

static int cmd_remove(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    if (argc < 3) return ctl_fail(x, EXIT_USAGE, "missing BODY id(s)");
    return ctl_edit_remove(x, w, argv + 2, (size_t)argc - 2, 0);
}

/* ----------------------------------------------------------------- set */

static int cmd_set(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    if (argc < 3) return ctl_fail(x, EXIT_USAGE, "missing key=value (see physctl set --help)");
    Physd__V1__Settings *s = (Physd__V1__Settings *)pbj_new(&physd__v1__settings__descriptor);
    smsg *cur = NULL;
    /* A dotted key (contact.hertz) changes one part of a message that is
     * replaced as a whole, so start from the world's current value. */
    for (int i = 2; i < argc && !r; i++) {
        const char *dot = strchr(argv[i], '.'), *eq = strchr(argv[i], '=');
        if (!dot || (eq && eq < dot)) continue;
        if (!cur) {
            Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
            iw.world_id = w;
            m.request_case = REQ(INSPECT_WORLD);
            m.inspect_world = &iw;
            if ((r = ctl_call(x, &m, &cur))) break;
        }
        char top[64];
        size_t len = (size_t)(dot - argv[i]);
        if (len >= sizeof top) continue;
        memcpy(top, argv[i], len);
        top[len] = 0;
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(&physd__v1__settings__descriptor, top);
        if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        ProtobufCMessage **mine = (ProtobufCMessage **)((char *)s + f->offset);
        ProtobufCMessage *theirs = *(ProtobufCMessage **)((char *)cur->reply->world->settings + f->offset);
        if (*mine || !theirs) continue;
        jw j;
        jw_init(&j, 0);
        pbj_write(&j, theirs, PBJ_EMIT_DEFAULTS);
        char err[256];
        if (!j.oom) pbj_set_text(&s->base, top, j.buf, err, sizeof err);
        jw_free(&j);
    }
    for (int i = 2; i < argc && !r; i++)
        r = apply_settings(x, s, argv[i]);
    if (!r) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__ChangeSettings cs = PHYSD__V1__CHANGE_SETTINGS__INIT;
        cs.world_id = w;
        cs.settings = s;
        m.request_case = REQ(CHANGE_SETTINGS);
        m.change_settings = &cs;
        smsg *rep;
        r = ctl_call(x, &m, &rep);
        if (!r) {
            const Physd__V1__Settings *res = rep->reply->settings;
            if (x->json) {
                ctl_print_message(&res->base);
            } else {
                /* The resulting value of every key that was given. */
                const ProtobufCMessageDescriptor *d = &physd__v1__settings__descriptor;
                for (unsigned k = 0; k < d->n_fields; k++) {
                    const ProtobufCFieldDescriptor *f = &d->fields[k];
                    if (!*(void **)((char *)s + f->offset)) continue;
                    jw j;
                    jw_init(&j, 0);
                    pbj_write(&j, *(ProtobufCMessage **)((char *)res + f->offset), PBJ_EMIT_DEFAULTS);
                    printf("%s = %s\n", f->name, j.buf ? j.buf : "?");
                    jw_free(&j);
                }
                printf("(from tick %llu)\n", (unsigned long long)rep->reply->tick + 1);
            }
            ctl_free(rep);
        }
    }
    ctl_free(cur);
    physd__v1__settings__free_unpacked(s, NULL);
    return r;
}

/* ---------------------------------------------------------------- step */

static int cmd_step(ctl *x, int argc, char **argv) {
    uint64_t w, n = 1;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    if (argc > 2 && (ctl_parse_u64(argv[2], &n) || n < 1 || n > 100000))
        return ctl_fail(x, EXIT_USAGE, "N must be 1..100000, got '%s'", argv[2]);
    if (argc > 3) return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[3]);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__StepWorld sw = PHYSD__V1__STEP_WORLD__INIT;
    sw.world_id = w;
    sw.steps = (uint32_t)n;
    m.request_case = REQ(STEP);
    m.step = &sw;
    smsg *rep;
    /* The reply comes when the steps are done, however long they take:
     * only an explicit --timeout bounds the wait. */
    int saved = x->timeout_ms;
    if (!x->timeout_given) x->timeout_ms = 0;
    r = ctl_call_any(x, &m, &rep);
    x->timeout_ms = saved;
    if (r) return r;
    const Physd__V1__Reply *rp = rep->reply;
    int cancelled = rp->status == PHYSD__V1__STATUS__STATUS_CANCELLED ||
                    (rp->payload_case == PHYSD__V1__REPLY__PAYLOAD_STEP && rp->step->cancelled);
    if (rp->status != PHYSD__V1__STATUS__STATUS_OK && !cancelled) {
        r = ctl_fail_reply(x, rep);
        ctl_free(rep);
        return r;
    }
    uint64_t done = rp->payload_case == PHYSD__V1__REPLY__PAYLOAD_STEP ? rp->step->steps_done : 0;
    if (x->json) {
        jw j;
        jw_init(&j, 1);
        jw_object(&j);
        jw_key(&j, "world_id");
        jw_uint(&j, w);
        jw_key(&j, "steps_done");
        jw_uint(&j, done);
        jw_key(&j, "steps");
        jw_uint(&j, n);
        jw_key(&j, "cancelled");
        jw_bool(&j, cancelled);
        if (cancelled) {
            jw_key(&j, "message");
            jw_string(&j, rp->message ? rp->message : "");
        }
        jw_key(&j, "tick");
        jw_uint(&j, rp->tick);
        jw_object_end(&j);
        ctl_print_json(&j);
        jw_free(&j);
    } else if (cancelled) {
        printf("world %llu: %llu of %llu steps, then cancelled, tick %llu\n", (unsigned long long)w,
               (unsigned long long)done, (unsigned long long)n, (unsigned long long)rp->tick);
    } else {
        printf("world %llu: %llu steps, tick %llu\n", (unsigned long long)w, (unsigned long long)done,
               (unsigned long long)rp->tick);
    }
    if (cancelled)
        r = ctl_fail(x, EXIT_REQUEST, "CANCELLED after %llu of %llu steps: %s", (unsigned long long)done,
                     (unsigned long long)n, rp->message && rp->message[0] ? rp->message : "ended by another request");
    ctl_free(rep);
    return r;
}

/* --------------------------------------------------------------- stats */

typedef struct stats_wait {
    uint64_t world;
    smsg *got;
} stats_wait;

static void on_stats_push(pc_client *c, const Physd__V1__Stats *s, void *data) {
    stats_wait *sw = data;
    if (sw->got || s->world_id != sw->world) return;
    sw->got = pc_client_take_message(c);
}

static void on_wait_timer(uv_timer_t *t) { *(int *)t->data = 1; }

static void on_timer_closed(uv_handle_t *h) { *(int *)h->data = 2; }

static void print_stats_text(const Physd__V1__Stats *s) {
    char name[32];
    printf("tick %llu  method %s (setting %s)  iterations %u/%u  rows %u  contacts %u  joints %u  bodies %u\n",
           (unsigned long long)s->tick, pbj_enum_name(&physd__v1__method__descriptor, s->method, name, sizeof name),
           pbj_enum_name(&physd__v1__method__descriptor, s->method_setting, name + 16, 16), s->iterations,
           s->max_iterations, s->rows, s->contacts, s->joints, s->bodies);
    printf("merits: fischer %.3e (scaled %.3e)  minmap %.3e  rel_residual %.3e  lcp_error %.3e m/s  max_penetration "
           "%.3e m\n",
           s->fischer_final, s->fischer_scaled_final, s->minmap_final, s->rel_residual, s->lcp_error_final,
           s->max_penetration);
    printf("collision: pairs %u  manifolds %u (%u reused by the contact cache)  awake bodies %u  islands %u\n",
           s->pairs, s->manifolds, s->manifolds_reused, s->awake_bodies, s->islands);
    if (s->n_stage_ms >= 5)
        printf("ms: broadphase %.3f  narrowphase %.3f  rows %.3f  solve %.3f  integrate %.3f  total %.3f\n",
               s->stage_ms[0], s->stage_ms[1], s->stage_ms[2], s->stage_ms[3], s->stage_ms[4], s->total_ms);
}

static int cmd_stats(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    int solver = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--solver"))
            solver = 1;
        else
            return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[i]);
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryCounters qc = PHYSD__V1__QUERY_COUNTERS__INIT;
    qc.world_id = w;
    m.request_case = REQ(QUERY_COUNTERS);
    m.query_counters = &qc;
    smsg *rep;
    if ((r = ctl_call(x, &m, &rep))) return r;
    stats_wait sw = {w, NULL};
    char state[320];
    world_state ws = ctl_world_state(w, rep->reply->counters, NULL, state, sizeof state);
    if (solver && ws == WS_PAUSED) {
        fprintf(stderr, "physctl stats: world %llu is %s\n", (unsigned long long)w, state);
        solver = 0;
    }
    if (solver) {
        /* One statistics push of the next step (running worlds only). */
        pc_handlers h = {0};
        h.on_stats = on_stats_push;
        h.data = &sw;
        pc_client_set_handlers(x->c, &h);
        Physd__V1__ClientMessage sm = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Subscribe sub = PHYSD__V1__SUBSCRIBE__INIT;
        sub.world_id = w;
        sub.kind = PHYSD__V1__STREAM_KIND__STREAM_STATS;
        sub.per_iteration_merits = 1;
        sm.request_case = REQ(SUBSCRIBE);
        sm.subscribe = &sub;
        smsg *srep;
        if ((r = ctl_call(x, &sm, &srep))) {
            ctl_free(rep);
            return r;
        }
        ctl_free(srep);
        int expired = 0;
        uv_timer_t t;
        uv_timer_init(&x->loop, &t);
        t.data = &expired;
        uv_timer_start(&t, on_wait_timer, 2000, 0);
        while (!sw.got && !expired && pc_client_connected(x->c))
            uv_run(&x->loop, UV_RUN_ONCE);
        /* The timer lives on this stack frame: wait for its close to
         * complete before returning (libuv finishes closes on the next
         * loop iteration, which never blocks while one is pending). */
        uv_close((uv_handle_t *)&t, on_timer_closed);
        while (expired != 2)
            uv_run(&x->loop, UV_RUN_ONCE);
        pc_client_set_handlers(x->c, NULL);
        if (!sw.got) fprintf(stderr, "physctl stats: no solver statistics within 2 s\n");
    }
    const Physd__V1__WorldCounters *k = rep->reply->counters;
    if (x->json) {
        jw j;
        jw_init(&j, 1);
        jw_object(&j);
        jw_key(&j, "world_id");
        jw_uint(&j, w);
        jw_key(&j, "state");
        jw_string(&j, ctl_world_state_name(ws));
        jw_key(&j, "counters");
        pbj_write(&j, &k->base, PBJ_EMIT_DEFAULTS);
        if (sw.got) {
            jw_key(&j, "stats");
            pbj_write(&j, &sw.got->stats->base, PBJ_EMIT_DEFAULTS);
        }
        jw_object_end(&j);
        ctl_print_json(&j);
        jw_free(&j);
    } else {
        printf("world %llu: tick %llu (total %llu, overrun %llu), %u bodies, %u joints, %u contacts, %.1f Hz, up "
               "%.1f s\n",
               (unsigned long long)w, (unsigned long long)k->tick, (unsigned long long)k->ticks_total,
               (unsigned long long)k->overrun_ticks, k->body_count, k->joint_count, k->contact_count, k->tick_rate,
               k->uptime_s);
        printf("step: last %.3f ms, mean %.3f ms\n", k->last_step_ms, k->mean_step_ms);
        printf("edits: %llu ops in %llu batches applied, %llu batches rejected\n", (unsigned long long)k->edits_applied,
               (unsigned long long)k->batches_applied, (unsigned long long)k->batches_rejected);
        printf("pushes: %llu frames encoded, %llu queued, %llu dropped\n", (unsigned long long)k->frames_encoded,
               (unsigned long long)k->pushes_queued, (unsigned long long)k->pushes_dropped);
        printf("state: %s\n", state);
        if (k->budget_steps || k->nonfinite_steps || k->resets)
            printf("also: %llu steps stopped at max_step_work, %llu steps left the finite envelope, %llu resets\n",
                   (unsigned long long)k->budget_steps, (unsigned long long)k->nonfinite_steps,
                   (unsigned long long)k->resets);
        if (sw.got) print_stats_text(sw.got->stats);
    }
    ctl_free(sw.got);
    ctl_free(rep);
    return 0;
}

static int cmd_counters(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    if (argc > 2) return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[2]);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryCounters qc = PHYSD__V1__QUERY_COUNTERS__INIT;
    qc.world_id = w;
    m.request_case = REQ(QUERY_COUNTERS);
    m.query_counters = &qc;
    smsg *rep;
    if ((r = ctl_call(x, &m, &rep))) return r;
    const Physd__V1__WorldCounters *k = rep->reply->counters;
    char state[320];
    world_state ws = ctl_world_state(w, k, NULL, state, sizeof state);
    if (x->json) {
        ctl_print_message(&k->base);
    } else {
        /* Every field by its protocol name, so new counters show up. */
        const ProtobufCMessageDescriptor *d = &physd__v1__world_counters__descriptor;
        for (unsigned i = 0; i < d->n_fields; i++) {
            const ProtobufCFieldDescriptor *f = &d->fields[i];
            const void *p = (const char *)k + f->offset;
            printf("%-18s ", f->name);
            switch (f->type) {
            case PROTOBUF_C_TYPE_DOUBLE:
                printf("%.6g\n", *(const double *)p);
                break;
            case PROTOBUF_C_TYPE_BOOL:
                printf("%s\n", *(const protobuf_c_boolean *)p ? "true" : "false");
                break;
            case PROTOBUF_C_TYPE_UINT32:
                printf("%u\n", *(const uint32_t *)p);
                break;
            case PROTOBUF_C_TYPE_UINT64:
                printf("%llu\n", (unsigned long long)*(const uint64_t *)p);
                break;
            default:
                printf("?\n");
                break;
            }
        }
        printf("%-18s %s (%s)\n", "state", ctl_world_state_name(ws), state);
    }
    ctl_free(rep);
    return 0;
}

/* ---------------------------------------------------------- dump, save */

/* Fetches the world (with settings and body ids) and its bodies. */
static int fetch_world(ctl *x, uint64_t w, int shapes, smsg **world, smsg **bodies) {
    *world = *bodies = NULL;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__InspectWorld iw = PHYSD__V1__INSPECT_WORLD__INIT;
    iw.world_id = w;
    iw.include_bodies = 1;
    m.request_case = REQ(INSPECT_WORLD);
    m.inspect_world = &iw;
    int r = ctl_call(x, &m, world);
    if (r) return r;
    const Physd__V1__WorldInfo *wi = (*world)->reply->world;
    Physd__V1__ClientMessage q = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryBodies qb = PHYSD__V1__QUERY_BODIES__INIT;
    qb.world_id = w;
    qb.body_ids = wi->body_ids;
    qb.n_body_ids = wi->n_body_ids;
    qb.include_shapes = shapes;
    q.request_case = REQ(QUERY_BODIES);
    q.query_bodies = &qb;
    if (wi->n_body_ids == 0) return 0;
    if (wi->n_body_ids > 10000) return ctl_fail(x, EXIT_REQUEST, "more than 10000 bodies: not supported yet");
    r = ctl_call(x, &q, bodies);
    if (r) {
        ctl_free(*world);
        *world = NULL;
    }
    return r;
}

static int cmd_dump(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    int shapes = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--shapes"))
            shapes = 1;
        else
            return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[i]);
    }
    smsg *world, *bodies;
    if ((r = fetch_world(x, w, shapes, &world, &bodies))) return r;
    Physd__V1__WorldInfo *wi = world->reply->world;
    /* The ids are repeated in the bodies: leave them out of "world". */
    size_t nids = wi->n_body_ids;
    wi->n_body_ids = 0;
    jw j;
    jw_init(&j, 1);
    jw_object(&j);
    jw_key(&j, "world");
    pbj_write(&j, &wi->base, PBJ_EMIT_DEFAULTS);
    jw_key(&j, "bodies");
    jw_array(&j);
    if (bodies)
        for (size_t i = 0; i < bodies->reply->bodies->n_bodies; i++)
            pbj_write(&j, &bodies->reply->bodies->bodies[i]->base, PBJ_EMIT_DEFAULTS);
    jw_array_end(&j);
    jw_object_end(&j);
    wi->n_body_ids = nids;
    ctl_print_json(&j);
    jw_free(&j);
    ctl_free(world);
    ctl_free(bodies);
    return 0;
}

static int cmd_save(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    if (argc != 3) return ctl_fail(x, EXIT_USAGE, "usage: physctl save WORLD FILE");
    smsg *world, *bodies;
    if ((r = fetch_world(x, w, 1, &world, &bodies))) return r;
    Physd__V1__WorldInfo *wi = world->reply->world;
    scene s;
    memset(&s, 0, sizeof s);
    s.name = wi->name && wi->name[0] ? wi->name : NULL;
    s.paused = wi->paused;
    s.settings = wi->settings;
    size_t n = bodies ? bodies->reply->bodies->n_bodies : 0;
    s.bodies = calloc(n ? n : 1, sizeof *s.bodies);
    /* Body states become body definitions; the parts are moved over. */
    for (size_t i = 0; s.bodies && i < n; i++) {
        Physd__V1__BodyState *bs = bodies->reply->bodies->bodies[i];
        Physd__V1__BodyDef *bd = (Physd__V1__BodyDef *)pbj_new(&physd__v1__body_def__descriptor);
        if (!bd) break;
        s.bodies[s.n_bodies++] = bd;
        bd->type = bs->type;
        bd->pose = bs->pose;
        bs->pose = NULL;
        bd->linear_velocity = bs->linear_velocity;
        bs->linear_velocity = NULL;
        bd->angular_velocity = bs->angular_velocity;
        bs->angular_velocity = NULL;
        bd->user_data = bs->user_data;
        bd->linear_damping = bs->linear_damping;
        bd->angular_damping = bs->angular_damping;
        if (bs->gravity_scale != 1.0) {
            bd->gravity_scale = (Physd__V1__DoubleValue *)pbj_new(&physd__v1__double_value__descriptor);
            if (bd->gravity_scale) bd->gravity_scale->value = bs->gravity_scale;
        }
        bd->shapes = calloc(bs->n_shapes ? bs->n_shapes : 1, sizeof *bd->shapes);
        for (size_t k = 0; bd->shapes && k < bs->n_shapes; k++) {
            bd->shapes[k] = bs->shapes[k]->def;
            bs->shapes[k]->def = NULL;
            bd->n_shapes++;
        }
        if (bs->type == PHYSD__V1__BODY_TYPE__BODY_DYNAMIC && bs->mass > 0) {
            bd->mass = (Physd__V1__MassProperties *)pbj_new(&physd__v1__mass_properties__descriptor);
            if (bd->mass) {
                bd->mass->mass = bs->mass;
                bd->mass->inertia = bs->inertia;
                bs->inertia = NULL;
            }
        }
    }
    /* Joints: read back, their bodies named by the index of their AddBody op
     * in the file (the order of the bodies above). */
    smsg *joints = NULL;
    if (s.n_bodies == n && wi->joint_count > 0) {
        Physd__V1__ClientMessage q = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__QueryJoints qj = PHYSD__V1__QUERY_JOINTS__INIT;
        qj.world_id = w;
        q.request_case = REQ(QUERY_JOINTS);
        q.query_joints = &qj;
        r = ctl_call(x, &q, &joints);
        size_t nj = r ? 0 : joints->reply->joints->n_joints;
        s.joints = calloc(nj ? nj : 1, sizeof *s.joints);
        for (size_t i = 0; !r && s.joints && i < nj; i++) {
            Physd__V1__JointDef *jd = joints->reply->joints->joints[i]->def;
            Physd__V1__BodyRef *refs[2] = {jd->body_a, jd->body_b};
            for (int e = 0; e < 2; e++) {
                if (!refs[e] || refs[e]->ref_case != PHYSD__V1__BODY_REF__REF_ID) continue;
                size_t k = 0;
                while (k < n && bodies->reply->bodies->bodies[k]->body_id != refs[e]->id)
                    k++;
                if (k == n) {
                    r = ctl_fail(x, EXIT_REQUEST, "joint %llu names body %llu, which is not in the world",
                                 (unsigned long long)joints->reply->joints->joints[i]->joint_id,
                                 (unsigned long long)refs[e]->id);
                    break;
                }
                refs[e]->ref_case = PHYSD__V1__BODY_REF__REF_NEW_BODY_OP;
                refs[e]->new_body_op = (uint32_t)k;
            }
            if (r) break;
            s.joints[s.n_joints++] = jd;
            joints->reply->joints->joints[i]->def = NULL;
        }
        if (!r && !s.joints) r = ctl_fail(x, EXIT_FILE, "out of memory");
    }
    if (r) {
        /* reported above */
    } else if (s.n_bodies != n) {
        r = ctl_fail(x, EXIT_FILE, "out of memory");
    } else if (scene_write(argv[2], &s) != 0) {
        r = ctl_fail(x, EXIT_FILE, "cannot write %s: %s", argv[2], strerror(errno));
    } else {
        if (x->json) {
            jw j;
            jw_init(&j, 1);
            jw_object(&j);
            jw_key(&j, "world_id");
            jw_uint(&j, w);
            jw_key(&j, "file");
            jw_string(&j, argv[2]);
            jw_key(&j, "bodies");
            jw_uint(&j, s.n_bodies);
            jw_key(&j, "joints");
            jw_uint(&j, s.n_joints);
            jw_object_end(&j);
            ctl_print_json(&j);
            jw_free(&j);
        } else {
            printf("saved world %llu (%zu bodies, %zu joints) to %s\n", (unsigned long long)w, s.n_bodies, s.n_joints,
                   argv[2]);
        }
    }
    for (size_t i = 0; i < s.n_bodies; i++)
        physd__v1__body_def__free_unpacked(s.bodies[i], NULL);
    free(s.bodies);
    for (size_t i = 0; i < s.n_joints; i++)
        physd__v1__joint_def__free_unpacked(s.joints[i], NULL);
    free(s.joints);
    ctl_free(joints);
    ctl_free(world);
    ctl_free(bodies);
    return r;
}

/* ---------------------------------------------------------------- load */

/* Picks the name of a loaded world: want itself when no live world has
 * it, else want-2, want-3, ... (the first free one). 0, or an exit code. */
static int free_world_name(ctl *x, const char *want, char *out, size_t n) {
    snprintf(out, n, "%s", want);
    if (!want[0]) return 0;
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__ListWorlds l = PHYSD__V1__LIST_WORLDS__INIT;
    m.request_case = REQ(LIST_WORLDS);
    m.list_worlds = &l;
    smsg *rep;
    int r = ctl_call(x, &m, &rep);
    if (r) return r;
    const Physd__V1__WorldList *wl = rep->reply->worlds;
    for (int k = 1; k < 100000; k++) {
        if (k > 1) {
            /* Names are at most 64 bytes: shorten the base for the suffix. */
            char suffix[16];
            snprintf(suffix, sizeof suffix, "-%d", k);
            size_t base = strlen(want), room = 64 - strlen(suffix);
            if (base > room) base = room;
            snprintf(out, n, "%.*s%s", (int)base, want, suffix);
        }
        int used = 0;
        for (size_t i = 0; i < wl->n_worlds && !used; i++)
            used = wl->worlds[i]->name && !strcmp(wl->worlds[i]->name, out);
        if (!used) break;
    }
    ctl_free(rep);
    return 0;
}

/* Adds the scene's bodies and joints to world w by edit batches of at
 * most max ops: one atomic batch when everything fits, else the bodies
 * first and then the joints, whose references to the file's bodies become
 * the new ids. The new ids go to body_ids[n_bodies] and joint_ids[n_joints]. */
static int load_by_edits(ctl *x, uint64_t w, scene *s, size_t max, uint64_t *body_ids, uint64_t *joint_ids,
                         size_t *batches) {
    size_t nops = s->n_bodies + s->n_joints;
    Physd__V1__EditOp *op = calloc(nops ? nops : 1, sizeof *op);
    Physd__V1__EditOp **ops = calloc(nops ? nops : 1, sizeof *ops);
    Physd__V1__AddBody *ab = calloc(s->n_bodies ? s->n_bodies : 1, sizeof *ab);
    Physd__V1__AddJoint *aj = calloc(s->n_joints ? s->n_joints : 1, sizeof *aj);
    int r = 0;
    *batches = 0;
    if (!op || !ops || !ab || !aj) r = ctl_fail(x, EXIT_LOST, "out of memory");
    for (size_t i = 0; !r && i < s->n_bodies; i++) {
        physd__v1__edit_op__init(&op[i]);
        physd__v1__add_body__init(&ab[i]);
        ab[i].body = s->bodies[i];
        op[i].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        op[i].add_body = &ab[i];
        ops[i] = &op[i];
    }
    for (size_t i = 0; !r && i < s->n_joints; i++) {
        size_t k = s->n_bodies + i;
        physd__v1__edit_op__init(&op[k]);
        physd__v1__add_joint__init(&aj[i]);
        aj[i].joint = s->joints[i];
        op[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_JOINT;
        op[k].add_joint = &aj[i];
        ops[k] = &op[k];
    }
    int whole = nops <= max;
    for (size_t at = 0; !r && at < nops;) {
        /* Split mode: bodies and joints never share a batch. */
        size_t end = at + max < nops ? at + max : nops;
        if (!whole && at < s->n_bodies && end > s->n_bodies) end = s->n_bodies;
        if (!whole && at >= s->n_bodies) {
            for (size_t k = at; k < end; k++) {
                Physd__V1__JointDef *jd = s->joints[k - s->n_bodies];
                Physd__V1__BodyRef *refs[2] = {jd->body_a, jd->body_b};
                for (int e = 0; e < 2; e++)
                    if (refs[e] && refs[e]->ref_case == PHYSD__V1__BODY_REF__REF_NEW_BODY_OP) {
                        uint32_t b = refs[e]->new_body_op;
                        if (b >= s->n_bodies) {
                            r = ctl_fail(x, EXIT_FILE, "joints[%zu]: body %u is not in the file's bodies",
                                         k - s->n_bodies, b);
                            break;
                        }
                        refs[e]->ref_case = PHYSD__V1__BODY_REF__REF_ID;
                        refs[e]->id = body_ids[b];
                    }
            }
            if (r) break;
        }
        smsg *rep = NULL;
        r = ctl_send_edit(x, w, ops + at, end - at, &rep);
        if (!r) {
            const Physd__V1__EditResult *er = rep->reply->edit;
            for (size_t k = at; k < end && er && k - at < er->n_new_ids; k++) {
                if (k < s->n_bodies)
                    body_ids[k] = er->new_ids[k - at];
                else
                    joint_ids[k - s->n_bodies] = er->new_ids[k - at];
            }
            (*batches)++;
        }
        ctl_free(rep);
        at = end;
    }
    free(op);
    free(ops);
    free(ab);
    free(aj);
    return r;
}

static int cmd_load(ctl *x, int argc, char **argv) {
    const char *file = NULL, *name = NULL;
    int paused = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--name") && i + 1 < argc)
            name = argv[++i];
        else if (!strcmp(argv[i], "--paused"))
            paused = 1;
        else if (!strcmp(argv[i], "--running"))
            paused = 0;
        else if (argv[i][0] != '-' && !file)
            file = argv[i];
        else
            return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[i]);
    }
    if (!file) return ctl_fail(x, EXIT_USAGE, "missing FILE");
    scene s;
    char err[400];
    if (scene_read(file, &s, err, sizeof err)) return ctl_fail(x, EXIT_FILE, "%s", err);
    if (paused < 0) paused = s.paused;
    size_t nops = s.n_bodies + s.n_joints;
    uint64_t *body_ids = calloc(s.n_bodies + 1, sizeof *body_ids);
    uint64_t *joint_ids = calloc(s.n_joints + 1, sizeof *joint_ids);
    Physd__V1__EditOp *op = calloc(nops + 1, sizeof *op);
    Physd__V1__EditOp **ops = calloc(nops + 1, sizeof *ops);
    Physd__V1__AddBody *ab = calloc(s.n_bodies + 1, sizeof *ab);
    Physd__V1__AddJoint *aj = calloc(s.n_joints + 1, sizeof *aj);
    char wname[80];
    smsg *rep = NULL;
    uint64_t w = 0;
    size_t batches = 0;
    int r = body_ids && joint_ids && op && ops && ab && aj ? ctl_connect(x) : ctl_fail(x, EXIT_LOST, "out of memory");
    /* A name in use (the world that was saved, say) gets a suffix; an
     * explicit --name is used as it is. */
    if (!r && name)
        snprintf(wname, sizeof wname, "%s", name);
    else if (!r)
        r = free_world_name(x, s.name ? s.name : "", wname, sizeof wname);
    if (!r && !name && s.name && strcmp(wname, s.name) != 0)
        fprintf(stderr, "physctl load: a world named '%s' exists: this one is '%s' (--name N chooses another)\n",
                s.name, wname);
    /* The scene travels in the create request (CreateWorld.scene, so that
     * reset restores it) when it fits in one batch and names only its own
     * bodies; otherwise the world is created paused and filled by edits. */
    const Physd__V1__HelloReply *hello = r ? NULL : pc_client_server_info(x->c);
    size_t max = hello && hello->max_edits_per_batch ? hello->max_edits_per_batch : 10000;
    int own_refs = 1;
    for (size_t i = 0; i < s.n_joints; i++)
        if ((s.joints[i]->body_a && s.joints[i]->body_a->ref_case == PHYSD__V1__BODY_REF__REF_ID) ||
            (s.joints[i]->body_b && s.joints[i]->body_b->ref_case == PHYSD__V1__BODY_REF__REF_ID))
            own_refs = 0;
    int use_scene = nops > 0 && nops <= max && own_refs;
    const char *why_edits = nops == 0    ? NULL
                            : !own_refs  ? "its joints name bodies of the preset by id, which a scene cannot"
                            : nops > max ? "it has more bodies and joints than the server's max_edits_per_batch"
                                         : NULL;
    for (size_t i = 0; !r && use_scene && i < s.n_bodies; i++) {
        physd__v1__edit_op__init(&op[i]);
        physd__v1__add_body__init(&ab[i]);
        ab[i].body = s.bodies[i];
        op[i].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
        op[i].add_body = &ab[i];
        ops[i] = &op[i];
    }
    for (size_t i = 0; !r && use_scene && i < s.n_joints; i++) {
        size_t k = s.n_bodies + i;
        physd__v1__edit_op__init(&op[k]);
        physd__v1__add_joint__init(&aj[i]);
        aj[i].joint = s.joints[i];
        op[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_JOINT;
        op[k].add_joint = &aj[i];
        ops[k] = &op[k];
    }
    int created_paused = use_scene || nops == 0 ? paused : 1;
    if (!r) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
        cw.name = wname;
        cw.preset = s.preset ? s.preset : "";
        cw.settings = s.settings;
        cw.start_paused = created_paused;
        cw.scene = use_scene ? ops : NULL;
        cw.n_scene = use_scene ? nops : 0;
        m.request_case = REQ(CREATE_WORLD);
        m.create_world = &cw;
        r = ctl_call(x, &m, &rep);
        if (!r) w = rep->reply->world->world_id;
    }
    if (!r && use_scene) {
        /* The new ids, one per scene op; a server that predates
         * CreateWorld.scene ignores the scene and sends none. */
        const Physd__V1__WorldInfo *wi = rep->reply->world;
        if (wi->n_scene_ids != nops) {
            use_scene = 0;
            why_edits = "this server does not apply CreateWorld.scene";
        }
        for (size_t i = 0; use_scene && i < nops; i++) {
            if (i < s.n_bodies)
                body_ids[i] = wi->scene_ids[i];
            else
                joint_ids[i - s.n_bodies] = wi->scene_ids[i];
        }
    }
    if (!r && !use_scene && nops) {
        r = load_by_edits(x, w, &s, max, body_ids, joint_ids, &batches);
        if (!r)
            fprintf(stderr,
                    "physctl load: warning: %s loaded by %zu edit batch%s, not as the world's scene (%s): `physctl "
                    "reset %llu` will not restore it\n",
                    file, batches, batches == 1 ? "" : "es", why_edits ? why_edits : "see above",
                    (unsigned long long)w);
        if (!r && created_paused && !paused) {
            Physd__V1__ClientMessage rm = PHYSD__V1__CLIENT_MESSAGE__INIT;
            Physd__V1__ResumeWorld rw = PHYSD__V1__RESUME_WORLD__INIT;
            rw.world_id = w;
            rm.request_case = REQ(RESUME);
            rm.resume = &rw;
            smsg *rr;
            r = ctl_call(x, &rm, &rr);
            ctl_free(rr);
        }
    }
    if (!r) {
        if (x->json) {
            jw j;
            jw_init(&j, 1);
            jw_object(&j);
            jw_key(&j, "world_id");
            jw_uint(&j, w);
            jw_key(&j, "name");
            jw_string(&j, wname);
            jw_key(&j, "body_ids");
            jw_array_inline(&j);
            for (size_t i = 0; i < s.n_bodies; i++)
                jw_uint(&j, body_ids[i]);
            jw_array_end(&j);
            jw_key(&j, "joint_ids");
            jw_array_inline(&j);
            for (size_t i = 0; i < s.n_joints; i++)
                jw_uint(&j, joint_ids[i]);
            jw_array_end(&j);
            jw_key(&j, "paused");
            jw_bool(&j, paused);
            jw_key(&j, "scene");
            jw_bool(&j, use_scene);
            jw_key(&j, "edit_batches");
            jw_uint(&j, batches);
            jw_object_end(&j);
            ctl_print_json(&j);
            jw_free(&j);
        } else {
            printf("%llu\n", (unsigned long long)w);
        }
    } else if (w) {
        fprintf(stderr, "physctl load: world %llu was created but the scene could not be loaded into it\n",
                (unsigned long long)w);
    }
    free(body_ids);
    free(joint_ids);
    free(op);
    free(ops);
    free(ab);
    free(aj);
    ctl_free(rep);
    scene_free(&s);
    return r;
}

/* ---------------------------------------------------------------- ping */

static int cmd_ping(ctl *x, int argc, char **argv) {
    uint64_t count = 1;
    if (argc > 1 && (ctl_parse_u64(argv[1], &count) || count < 1))
        return ctl_fail(x, EXIT_USAGE, "bad count '%s'", argv[1]);
    int r = ctl_connect(x);
    if (r) return r;
    const Physd__V1__HelloReply *h = pc_client_server_info(x->c);
    double best = 1e9, sum = 0;
    for (uint64_t i = 0; i < count; i++) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__Ping p = PHYSD__V1__PING__INIT;
        m.request_case = REQ(PING);
        m.ping = &p;
        uint64_t t0 = uv_hrtime();
        smsg *rep;
        if ((r = ctl_call(x, &m, &rep))) return r;
        double ms = (double)(uv_hrtime() - t0) / 1e6;
        ctl_free(rep);
        sum += ms;
        if (ms < best) best = ms;
    }
    if (x->json) {
        jw j;
        jw_init(&j, 1);
        jw_object(&j);
        jw_key(&j, "server");
        jw_string(&j, h->server);
        jw_key(&j, "session_id");
        jw_uint(&j, h->session_id);
        jw_key(&j, "pings");
        jw_uint(&j, count);
        jw_key(&j, "min_ms");
        jw_double(&j, best);
        jw_key(&j, "mean_ms");
        jw_double(&j, sum / (double)count);
        jw_object_end(&j);
        ctl_print_json(&j);
        jw_free(&j);
    } else {
        printf("%s at %s:%d (session %llu): %llu ping%s, min %.3f ms, mean %.3f ms\n", h->server, x->host, x->port,
               (unsigned long long)h->session_id, (unsigned long long)count, count == 1 ? "" : "s", best,
               sum / (double)count);
    }
    return 0;
}

/* --------------------------------------------------------------- table */

const command physctl_commands[] = {
    /* (several servers and worlds that move: fleet.c, docs/fleet.md) */
    {"worlds", "", "list the worlds", "Prints id, name, preset, state, tick and counts of every world.\n", cmd_worlds,
     0},
    {"presets", "", "list the built-in scenes (for create --scene)",
     "Prints the name, dynamic bodies and description of every preset the server has (--json adds the\n"
     "length of each one's reference run, in steps).\n",
     cmd_presets, 0},
    {"create", "[--scene NAME] [--name N] [--paused] [--history N] [key=value...]", "create a world; prints its id",
     "--scene NAME (or --preset) builds a built-in scene (physctl presets lists them: stack20, pyramid20, chain30,\n"
     "box_drop, ...; a misspelt name gets the nearest ones).\n"
     "--history N keeps the last N ticks for late edits (physctl --at-tick T) and past-tick queries.\n"
     "--token-out FILE writes the new world's owner token to FILE (mode 0600); without it, a server with access\n"
     "control gets the token printed on stderr (it is shown once).\n"
     "Example: physctl create --scene stack20 --name demo iterations=2 tick_rate=120\n\n",
     cmd_create, 1},
    {"destroy", "WORLD", "destroy a world", "", cmd_destroy, 0},
    {"token", "create|revoke|list WORLD ...", "mint, revoke or list a world's tokens (owner or admin)",
     "physctl token create WORLD --role viewer|editor|owner [--label L] [--token-out FILE]\n"
     "    prints the new token (shown once; with --token-out it goes to FILE, mode 0600, and its id is printed)\n"
     "physctl token revoke WORLD TOKEN_ID   connections holding it lose it at once\n"
     "physctl token list WORLD              ids, roles, creation times and labels (never the secrets)\n"
     "Credentials come from PHYSD_TOKEN or --token-file FILE (docs/security.md).\n",
     cmd_token, 0},
    {"add", "WORLD [key=value...]", "add a body; prints its id",
     "Keys: type=dynamic|static|kinematic, shape=sphere|box|capsule|plane, radius=R, half=x,y,z or half=H (box half\n"
     "extents; one number is a cube), half_height=H (capsule), normal=x,y,z and offset=D (plane), mass=M (sets the\n"
     "density of the single shape so that the body's mass is M), density, friction, restitution, pos=x,y,z,\n"
     "rot=x,y,z,w (quaternion), vel=x,y,z, angvel=x,y,z, and any BodyDef field by path (linear_damping=0.1,\n"
     "gravity_scale=0, mass.mass=2 mass.inertia=1,1,1, shapes.1.type=box shapes.1.local.position=0,0,1).\n"
     "Without shape=, the body is a sphere of radius 0.5. A misspelt key gets the nearest ones.\n"
     "Example: physctl add 1 shape=box half=0.5 mass=2 pos=0,0,3\n",
     cmd_add, 0},
    {"remove", "WORLD BODY...", "remove bodies (with their shapes and joints)", "", cmd_remove, 0},
    {"pose", "WORLD BODY [pos=x,y,z] [rot=x,y,z,w]", "move a body (set_pose)",
     "Sets the body's position and/or orientation (a quaternion x,y,z,w) at the next tick boundary; the part\n"
     "not given keeps its current value.\nExample: physctl pose 1 4294967298 pos=0,0,5\n",
     physctl_pose, 0},
    {"velocity", "WORLD BODY [vel=x,y,z] [angvel=x,y,z]", "set a body's velocity (set_velocity)",
     "Sets the linear (m/s) and/or angular (rad/s, world frame) velocity; the part not given keeps its current\n"
     "value. Not for static bodies.\nExample: physctl velocity 1 4294967298 vel=0,0,5\n",
     physctl_velocity, 0},
    {"force", "WORLD BODY x,y,z [at=x,y,z]", "apply a force during the next step",
     "A force in N that acts during the next step only, at a world point (default: the centre of mass).\n"
     "For a lasting push send it every tick, or use impulse.\nExample: physctl force 1 4294967298 0,0,500\n",
     physctl_force, 0},
    {"torque", "WORLD BODY x,y,z", "apply a torque during the next step",
     "A torque in N m (world frame) that acts during the next step only.\n", physctl_torque, 0},
    {"impulse", "WORLD BODY x,y,z [at=x,y,z]", "apply an impulse",
     "An impulse in N s applied to the velocity at the next tick boundary, at a world point (default: the\n"
     "centre of mass).\nExample: physctl impulse 1 4294967298 0,0,10\n",
     physctl_impulse, 0},
    {"target", "WORLD BODY [pos=x,y,z] [rot=x,y,z,w]", "move a kinematic body to a pose over the next step",
     "Kinematic bodies only: the body reaches the pose at the end of the next step (its velocity follows).\n",
     physctl_target, 0},
    {"joint", "add|remove|list WORLD ...", "add, remove or list joints",
     "physctl joint add WORLD type=ball|hinge|distance|fixed a=BODY [b=BODY] [key=value...]\n"
     "  prints the joint's id. Without b= the joint holds body a to the world. Keys: any JointDef field\n"
     "  (docs/protocol.md): anchor_a=x,y,z (body a's frame) anchor_b=x,y,z (body b's frame, or a world point)\n"
     "  axis_a=x,y,z axis_b=x,y,z (hinge), distance=D (distance joint; default: the current distance),\n"
     "  enable_limit=true lower_angle= upper_angle= enable_motor=true motor_speed= max_motor_torque=.\n"
     "physctl joint remove WORLD JOINT...\n"
     "physctl joint list WORLD [JOINT...]   every joint (or the given ones) with its definition\n"
     "Example: physctl joint add 1 type=hinge a=4294967298 anchor_b=0,0,5 axis_a=0,1,0 axis_b=0,1,0\n",
     physctl_joint, 0},
    {"set", "WORLD key=value...", "change world or solver settings",
     "Changes apply from the next step; prints the resulting values. A misspelt key gets the\n"
     "nearest ones.\nExample: physctl set 1 iterations=2 method=pgs_sm contact.hertz=30\n\n",
     cmd_set, 1},
    {"settings", "[--markdown]", "describe every world setting (no server needed)",
     "Prints each field of the protocol's Settings message with its default, range, unit and meaning,\n"
     "from the core's settings table (docs/protocol.md has the same table); --markdown prints that table.\n",
     ctl_cmd_settings, 0},
    {"pause", "WORLD", "stop a world's clock", "", cmd_pause, 0},
    {"resume", "WORLD", "restart a world's clock", "", cmd_resume, 0},
    {"step", "WORLD [N]", "run N steps (default 1) of a paused world",
     "The reply comes once the steps are done (physctl waits as long as they take unless --timeout is\n"
     "given); prints the steps done and the new tick. A reset, pause or\n"
     "destroy of the world meanwhile cancels the rest: the steps done are printed, \"cancelled\" is said,\n"
     "and the exit code is 1.\n",
     cmd_step, 0},
    {"reset", "WORLD", "rebuild a world from its creation request (preset and scene)",
     "Bodies and joints added since are gone and every old id becomes stale; a world made by `load` gets its\n"
     "file's scene back.\n",
     cmd_reset, 0},
    {"watch", "WORLD [--stats|--contacts] [--every K] [--bodies N] [--seconds S] [--count N]",
     "live view of bodies, convergence statistics or contact events",
     "Bodies (default): subscribes to transform frames every K-th tick (default 6) and shows the first N\n"
     "bodies (default 20) with position and orientation, updating in place on a terminal.\n"
     "--stats: subscribes to solver statistics with per-iteration merits and draws the Fischer-Burmeister\n"
     "merit per iteration as a text plot (log scale), with the method, rows, contacts and stage times.\n"
     "--contacts: prints every contact begin and end event, one line each (same as physctl events).\n"
     "A status line says when the world is paused, asleep (every body at rest, nothing to solve) or falling\n"
     "behind its tick rate (ticks skipped); the counters are read once a second.\n"
     "Stops after S seconds or N updates if given, on Ctrl-C, or when the world is destroyed.\n"
     "With --json, prints one JSON object per update (one per line), and {\"world_id\", \"state\", ...}\n"
     "lines when the world's state changes.\n",
     physctl_watch, 0},
    {"events", "WORLD [--seconds S] [--count N]", "contact begin and end events as they happen",
     "The same as physctl watch WORLD --contacts.\n", physctl_events, 0},
    {"stats", "WORLD [--solver]", "world counters and state (and the next step's solver statistics)",
     "--solver also waits (up to 2 s) for the next step's statistics with per-iteration merits.\n", cmd_stats, 0},
    {"counters", "WORLD", "every counter of a world",
     "Prints every field of the protocol's WorldCounters (ticks, overruns, edits, pushes, step times, paused,\n"
     "awake bodies, budget and non-finite steps, resets, how far behind) and the world's state.\n",
     cmd_counters, 0},
    {"body", "WORLD BODY... [--shapes]", "the state of some bodies",
     "Pose, velocities, mass and shapes (with --shapes) of the given bodies; physctl dump shows them all.\n",
     physctl_body, 0},
    {"ray", "WORLD ORIGIN DIRECTION [MAX_DISTANCE]", "cast a ray; prints the closest hit",
     "ORIGIN and DIRECTION as x,y,z (the direction need not be unit); MAX_DISTANCE in m (default 1e6).\n"
     "Example: physctl ray 1 0,0,50 0,0,-1\n",
     physctl_ray, 0},
    {"dump", "WORLD [--shapes]", "the world and every body's state as JSON",
     "Prints {\"world\": WorldInfo, \"bodies\": [BodyState...]} with every field (docs/protocol.md);\n"
     "--shapes includes each body's shapes.\n",
     cmd_dump, 0},
    {"load", "FILE [--name N] [--paused|--running]", "create a world from a scene file; prints its id",
     "The scene file format is described in docs/clients.md. The world is created with the file's bodies and\n"
     "joints as its scene (CreateWorld.scene: one request, and `physctl reset` restores them) and runs unless\n"
     "the file says \"paused\": true (or --paused). A scene larger than the server's max_edits_per_batch is\n"
     "added by edit batches instead (a warning says so: reset then does not restore it). When a world has\n"
     "the file's name already, the new one is NAME-2 (or -3, ...); --name N chooses the name.\n",
     cmd_load, 0},
    {"snapshot", "WORLD FILE", "write a world's exact snapshot to FILE (docs/durability.md)",
     "Every body, shape and joint with its id, the warm starts, the contact cache, sleep state and the\n"
     "generator: physctl restore FILE makes a world whose steps are bit for bit the original's.\n",
     cmd_snapshot, 0},
    {"restore", "FILE [--name N] [--paused] [--token-out FILE]", "a new world from a snapshot file; prints its id",
     "The snapshot is uploaded in parts that fit the server's frames. The new world has a new world id, the\n"
     "snapshot's body, shape and joint ids, its tick and settings.\n",
     cmd_restore, 0},
    {"save", "WORLD FILE", "write a world to a scene file",
     "Writes the name, paused flag, every setting, every body (pose, velocities, damping, gravity scale, shapes,\n"
     "mass and inertia) and every joint in the format of docs/clients.md; physctl load FILE makes a copy.\n",
     cmd_save, 0},
    {"ping", "[N]", "round-trip time to the server", "", cmd_ping, 0},
    {"migrate", "WORLD --to HOST:PORT [--to-token-file F]", "move a world to another physd (admin)",
     "The world goes on at HOST:PORT with the same id, body and joint ids, tokens and tick: its state hash\n"
     "sequence continues as if it had not moved. Its subscribers are told (NOTICE_WORLD_MOVED) and requests\n"
     "sent here afterwards are redirected. --to-token-file gives the target's token for the server's hello\n"
     "(default: the server's own admin token, for a fleet that shares one). Prints where it went, its tick,\n"
     "state hash, image size and how long it did not tick; if the move fails it stays here and ticks on.\n"
     "Example: physctl migrate 3 --to 10.0.0.7:7447\n",
     physctl_migrate, 0},
    {"release", "WORLD [--moved] [--to-token-file F]", "settle a world whose move is in doubt (admin)",
     "A move is in doubt when the commit went out and the target's answer never came: the world is frozen\n"
     "here until the target says whether it took it. release asks the target now and its answer decides.\n"
     "Only if the target cannot be reached (no connection or no answer in 5 s) does your choice apply,\n"
     "journaled: the world ticks here again (default; the target is gone for good, and a copy it holds if\n"
     "it comes back must be destroyed there), or with --moved it is taken as moved (requests redirected).\n"
     "--to-token-file: the target's token, when it refuses the server's own.\n"
     "Example: physctl release 3\n",
     physctl_release, 0},
    {"drain", "--to HOST:PORT [--to-token-file F] [--exit]", "move every world of the server to another (admin)",
     "One world after another (as migrate); meanwhile the server refuses new worlds and tells every\n"
     "connection (NOTICE_DRAINING). Prints each world's outcome; exit 1 if some stay. With --exit the server\n"
     "shuts down once every world moved.\n",
     physctl_drain, 0},
    {"fleet", "", "the load of each server of --servers and where a new world goes",
     "Needs --servers HOST:PORT,... (or PHYSD_SERVERS). Prints each server's worlds, bodies and awake bodies;\n"
     "a new world goes to the one with the fewest awake bodies, then the fewest worlds (docs/fleet.md).\n",
     physctl_fleet, 0},
    {NULL, NULL, NULL, NULL, NULL, 0},
};
