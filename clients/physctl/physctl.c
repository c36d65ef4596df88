/*
 * physctl.c — the physd command line: global options, the command table,
 * help, the connection and the request helper.
 *
 *   physctl [--host H] [--port P] [--json] [--timeout MS] COMMAND [ARGS...]
 *
 * Normal path: parse the global options (also PHYSD_HOST / PHYSD_PORT from
 * the environment; the options may also follow the command), find the
 * command, take the global options out of its arguments, let it parse them,
 * connect on first use, run its requests with pc_call, print text or JSON
 * on stdout, close the connection and the loop, exit 0.
 *
 * Failure modes: every error goes to stderr as "physctl COMMAND: ..." and
 * sets the exit code of physctl.h (1 request refused by the server, 2 usage,
 * 3 cannot connect, 4 connection lost or timed out, 5 file error).
 *
 * Invariants: one connection per run; the loop is closed before exit
 * (uv_loop_close returns 0, else a warning is printed).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "physctl.h"
#include "suggest.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: physctl [--host H] [--port P] [--json] [--timeout MS] [--tls [--ca FILE]] COMMAND [ARGS...]\n\n"
            "Controls a physd server (default 127.0.0.1:%d; PHYSD_HOST, PHYSD_PORT, PHYSD_TLS, PHYSD_CA).\n\n"
            "commands:\n",
            PC_DEFAULT_PORT);
    for (const command *c = physctl_commands; c->name; c++) {
        char head[200];
        snprintf(head, sizeof head, "%s %s", c->name, c->args);
        /* A long synopsis gets its summary on the next line. */
        if (strlen(head) > 34)
            fprintf(f, "  %s\n  %-34s %s\n", head, "", c->summary);
        else
            fprintf(f, "  %-34s %s\n", head, c->summary);
    }
    fprintf(f,
            "\noptions:\n"
            "  --host H        server address or name (default 127.0.0.1)\n"
            "  --port P        server port (default %d)\n"
            "  --servers LIST  several servers, HOST:PORT,... (PHYSD_SERVERS): create places the world on the least\n"
            "                  loaded, a WORLD argument finds its server, worlds lists them all (docs/fleet.md);\n"
            "                  --host or --port names one server instead\n"
            "  --json          print results as JSON (for scripts)\n"
            "  --timeout MS    connect and reply timeout in ms (default 10000; 0 = none)\n"
            "  --token-file F  credentials: the token(s) in file F (else PHYSD_TOKEN; docs/security.md)\n"
            "  --at-tick T     edits (add, pose, velocity, ...) are for tick T: late ones roll the world back\n"
            "                  (a world created with --history N), future ones wait (docs/durability.md)\n"
            "  --tls           connect with TLS; the server's certificate is verified and must name the host\n"
            "  --ca FILE       TLS: PEM file of the CA to trust (default: the system's CAs)\n"
            "  --cert FILE     TLS: client certificate (a server started with tls_client_ca)\n"
            "  --key FILE      TLS: the key of --cert (default: in the --cert file)\n"
            "  --help          this text; `physctl COMMAND --help` describes a command\n"
            "  (the options may also follow the command: physctl worlds --json)\n"
            "  --version       print the version\n\n"
            "exit codes: 0 ok, 1 the server refused the request, 2 usage error, 3 cannot connect,\n"
            "            4 connection lost or timed out, 5 file error\n",
            PC_DEFAULT_PORT);
}

const command *ctl_find_command(const char *name) {
    for (const command *c = physctl_commands; c->name; c++)
        if (!strcmp(c->name, name)) return c;
    return NULL;
}

/* " (did you mean 'x'?)" for a mistyped command, or "". */
static const char *command_hint(const char *name) {
    static char buf[256];
    const char *names[64];
    size_t n = 0;
    for (const command *c = physctl_commands; c->name && n < 64; c++)
        names[n++] = c->name;
    char near[200];
    buf[0] = 0;
    if (suggest_nearest(name, names, n, near, sizeof near)) snprintf(buf, sizeof buf, "; did you mean %s?", near);
    return buf;
}

static void command_help(const command *c) {
    printf("usage: physctl [global options] %s %s\n\n%s\n", c->name, c->args, c->summary);
    if (c->help && c->help[0]) printf("\n%s", c->help);
    if (c->settings_keys) ctl_print_settings_keys(stdout);
}

int ctl_fail(ctl *x, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "physctl%s%s: ", x->cmd ? " " : "", x->cmd ? x->cmd : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int ctl_parse_u64(const char *s, uint64_t *v) {
    if (!s || !*s || *s == '-') return -1;
    char *end;
    unsigned long long u = strtoull(s, &end, 0);
    if (*end) return -1;
    *v = u;
    return 0;
}

void ctl_client_options(ctl *x, pc_options *o, pc_tls_options *tls) {
    pc_options_default(o);
    o->client_name = "physctl";
    o->credentials = x->token[0] ? x->token : NULL;
    pc_tls_options_default(tls);
    tls->ca_file = x->ca;
    tls->cert_file = x->cert;
    tls->key_file = x->key;
    if (x->tls) o->tls = tls;
}

int ctl_connect(ctl *x) {
    if (x->c) return 0;
    if (x->servers && !x->chosen) {
        /* Several servers (fleet.c): a new world goes to the least loaded;
         * anything else without a world asks the first. */
        int pr = !strcmp(x->cmd, "create") || !strcmp(x->cmd, "load") || !strcmp(x->cmd, "restore")
                     ? ctl_fleet_place(x)
                     : ctl_fleet_locate(x, 0);
        if (pr) return pr;
    }
    pc_options o;
    pc_tls_options tls;
    ctl_client_options(x, &o, &tls);
    char why[512];
    int r = pc_connect_sync_msg(&x->c, &x->loop, x->host, x->port, x->timeout_ms, &o, why, sizeof why);
    if (r < 0) {
        /* pc_connect_sync_msg released the client and kept its message. */
        return ctl_fail(x, EXIT_CONNECT, "cannot connect to %s:%d: %s (%s)%s%s", x->host, x->port, pc_strerror(r),
                        pc_err_name(r), why[0] ? ": " : "", why);
    }
    return 0;
}

int ctl_call_any(ctl *x, Physd__V1__ClientMessage *m, Physd__V1__ServerMessage **out) {
    *out = NULL;
    int r = ctl_connect(x);
    if (r) return r;
    Physd__V1__ServerMessage *rep = NULL;
    for (int hops = 0;; hops++) {
        r = pc_call(x->c, m, x->timeout_ms, &rep);
        if (r < 0) {
            const char *why = pc_client_error_message(x->c);
            return ctl_fail(x, EXIT_LOST, "%s (%s)%s%s", pc_strerror(r), pc_err_name(r), why[0] ? ": " : "", why);
        }
        /* The world moved to another server: follow it (a few hops at most). */
        if (hops >= 4) break;
        int f = ctl_follow_redirect(x, rep);
        if (f == 0) break;
        physd__v1__server_message__free_unpacked(rep, NULL);
        rep = NULL;
        if (f < 0) return -f;
    }
    *out = rep;
    return 0;
}

int ctl_fail_reply(ctl *x, const Physd__V1__ServerMessage *rep) {
    return ctl_fail(x, EXIT_REQUEST, "%s: %s", pc_status_name((int)rep->reply->status),
                    rep->reply->message ? rep->reply->message : "");
}

int ctl_call(ctl *x, Physd__V1__ClientMessage *m, Physd__V1__ServerMessage **out) {
    Physd__V1__ServerMessage *rep = NULL;
    int r = ctl_call_any(x, m, &rep);
    if (r) return r;
    if (rep->reply->status != PHYSD__V1__STATUS__STATUS_OK) {
        int code = ctl_fail_reply(x, rep);
        physd__v1__server_message__free_unpacked(rep, NULL);
        return code;
    }
    *out = rep;
    return 0;
}

const char *ctl_world_state_name(world_state s) {
    switch (s) {
    case WS_PAUSED:
        return "paused";
    case WS_BEHIND:
        return "behind";
    case WS_ASLEEP:
        return "asleep";
    default:
        return "running";
    }
}

world_state ctl_world_state(uint64_t world, const Physd__V1__WorldCounters *k, const Physd__V1__WorldCounters *prev,
                            char *buf, size_t n) {
    unsigned long long w = (unsigned long long)world;
    unsigned long long tick = (unsigned long long)k->tick;
    double period = k->tick_rate > 0 ? 1.0 / k->tick_rate : 0;
    if (k->paused) {
        snprintf(buf, n,
                 "paused at tick %llu: no steps, so no new frames or statistics (physctl resume %llu, or physctl step "
                 "%llu N)",
                 tick, w, w);
        return WS_PAUSED;
    }
    int skipping = prev && k->overrun_ticks > prev->overrun_ticks && k->ticks_total >= prev->ticks_total;
    if (skipping || (period > 0 && k->behind_s > 2 * period)) {
        snprintf(buf, n,
                 "falling behind at tick %llu: %llu ticks skipped so far, %.3f s behind its %.4g Hz clock (a step "
                 "takes %.2f ms on average, a tick is %.2f ms)",
                 tick, (unsigned long long)k->overrun_ticks, k->behind_s, k->tick_rate, k->mean_step_ms, period * 1e3);
        return WS_BEHIND;
    }
    if (k->awake_bodies == 0 && k->body_count > 0) {
        snprintf(buf, n,
                 "asleep at tick %llu: every body is at rest (0 awake), so the solver has nothing to do; an "
                 "edit or a moving body wakes it",
                 tick);
        return WS_ASLEEP;
    }
    snprintf(buf, n, "running at tick %llu: %u awake bodies (%u bodies in all), %.4g Hz", tick, k->awake_bodies,
             k->body_count, k->tick_rate);
    return WS_RUNNING;
}

void ctl_free(Physd__V1__ServerMessage *m) {
    if (m) physd__v1__server_message__free_unpacked(m, NULL);
}

int ctl_world_arg(ctl *x, int argc, char **argv, int idx, uint64_t *w) {
    if (idx >= argc) return ctl_fail(x, EXIT_USAGE, "missing WORLD (see physctl %s --help)", x->cmd);
    if (ctl_parse_u64(argv[idx], w) || *w == 0) return ctl_fail(x, EXIT_USAGE, "bad world id '%s'", argv[idx]);
    /* Several servers: the one that has it (fleet.c). */
    if (x->servers && !x->chosen && !x->c) return ctl_fleet_locate(x, *w);
    return 0;
}

int ctl_id_arg(ctl *x, int argc, char **argv, int idx, const char *what, uint64_t *id) {
    if (idx >= argc) return ctl_fail(x, EXIT_USAGE, "missing %s (see physctl %s --help)", what, x->cmd);
    if (ctl_parse_u64(argv[idx], id) || *id == 0) return ctl_fail(x, EXIT_USAGE, "bad %s id '%s'", what, argv[idx]);
    return 0;
}

int ctl_split_kv(char *arg, char **key, char **val) {
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg) return -1;
    *eq = 0;
    *key = arg;
    *val = eq + 1;
    return 0;
}

int ctl_parse_vec(const char *s, int n, double *v) {
    const char *p = s;
    for (int i = 0; i < n; i++) {
        char *end;
        v[i] = strtod(p, &end);
        if (end == p || !isfinite(v[i])) return -1;
        p = end;
        if (i + 1 < n) {
            if (*p != ',') return -1;
            p++;
        }
    }
    return *p ? -1 : 0;
}

int ctl_send_edit(ctl *x, uint64_t w, Physd__V1__EditOp **ops, size_t n, Physd__V1__ServerMessage **rep) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = w;
    eb.ops = ops;
    eb.n_ops = n;
    Physd__V1__UInt64Value t = PHYSD__V1__UINT64_VALUE__INIT;
    if (x->has_tick) {
        t.value = x->at_tick;
        eb.tick = &t;
    }
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    return ctl_call(x, &m, rep);
}

void ctl_print_ids(ctl *x, const char *key, const uint64_t *ids, size_t n, uint64_t world, uint64_t tick) {
    if (x->json) {
        jw j;
        jw_init(&j, 1);
        jw_object(&j);
        jw_key(&j, "world_id");
        jw_uint(&j, world);
        jw_key(&j, "tick");
        jw_uint(&j, tick);
        jw_key(&j, key);
        jw_array_inline(&j);
        for (size_t i = 0; i < n; i++)
            jw_uint(&j, ids[i]);
        jw_array_end(&j);
        jw_object_end(&j);
        ctl_print_json(&j);
        jw_free(&j);
    } else {
        for (size_t i = 0; i < n; i++)
            printf("%llu\n", (unsigned long long)ids[i]);
    }
}

int ctl_edit_add(ctl *x, uint64_t w, Physd__V1__EditOp *op, const char *key) {
    smsg *rep;
    int r = ctl_send_edit(x, w, &op, 1, &rep);
    if (r) return r;
    ctl_print_ids(x, key, rep->reply->edit->new_ids, rep->reply->edit->n_new_ids, w, rep->reply->tick);
    ctl_free(rep);
    return 0;
}

int ctl_edit_remove(ctl *x, uint64_t w, char **ids, size_t n, int joints) {
    const char *what = joints ? "joint" : "body";
    Physd__V1__EditOp *op = calloc(n, sizeof *op);
    Physd__V1__EditOp **ops = calloc(n, sizeof *ops);
    Physd__V1__RemoveBody *rb = calloc(n, sizeof *rb);
    Physd__V1__RemoveJoint *rj = calloc(n, sizeof *rj);
    Physd__V1__BodyRef *ref = calloc(n, sizeof *ref);
    int r = !op || !ops || !rb || !rj || !ref ? ctl_fail(x, EXIT_LOST, "out of memory") : 0;
    for (size_t i = 0; i < n && !r; i++) {
        uint64_t id;
        if (ctl_parse_u64(ids[i], &id) || (joints && id == 0)) {
            r = ctl_fail(x, EXIT_USAGE, "bad %s id '%s'", what, ids[i]);
            break;
        }
        physd__v1__edit_op__init(&op[i]);
        if (joints) {
            physd__v1__remove_joint__init(&rj[i]);
            rj[i].joint = id;
            op[i].op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_JOINT;
            op[i].remove_joint = &rj[i];
        } else {
            physd__v1__remove_body__init(&rb[i]);
            physd__v1__body_ref__init(&ref[i]);
            ref[i].ref_case = PHYSD__V1__BODY_REF__REF_ID;
            ref[i].id = id;
            rb[i].body = &ref[i];
            op[i].op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
            op[i].remove_body = &rb[i];
        }
        ops[i] = &op[i];
    }
    smsg *rep = NULL;
    if (!r) r = ctl_send_edit(x, w, ops, n, &rep);
    if (!r) {
        if (x->json)
            ctl_print_ids(x, "removed", NULL, 0, w, rep->reply->tick);
        else if (joints)
            printf("removed %zu joint%s from world %llu\n", n, n == 1 ? "" : "s", (unsigned long long)w);
        else
            printf("removed %zu bod%s from world %llu\n", n, n == 1 ? "y" : "ies", (unsigned long long)w);
    }
    ctl_free(rep);
    free(op);
    free(ops);
    free(rb);
    free(rj);
    free(ref);
    return r;
}

void ctl_print_json(jw *w) {
    if (jw_print(w, stdout) != 0) fprintf(stderr, "physctl: out of memory or write error printing JSON\n");
}

void ctl_print_message(const ProtobufCMessage *m) {
    jw w;
    jw_init(&w, 1);
    pbj_write(&w, m, PBJ_EMIT_DEFAULTS);
    ctl_print_json(&w);
    jw_free(&w);
}

/* Credentials from a file (a token per line or separated by spaces);
 * PHYSD_TOKEN is the default. Returns 0 or -1 after printing why. */
static int read_token_file(ctl *x, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        ctl_fail(x, EXIT_FILE, "--token-file %s: %s", path, strerror(errno));
        return -1;
    }
    char buf[4097];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    int big = !feof(f);
    fclose(f);
    buf[n] = 0;
    if (big) {
        ctl_fail(x, EXIT_FILE, "--token-file %s: longer than 4096 bytes", path);
        return -1;
    }
    memcpy(x->token, buf, n + 1);
    memset(buf, 0, sizeof buf);
    return 0;
}

static int is_help(const char *a) { return !strcmp(a, "--help") || !strcmp(a, "-h"); }

/* A global option at argv[*i] (before or after the command): sets
 * *matched when argv[*i] is one, applies it and moves *i past its value.
 * Returns 0, or -1 (after printing why) for a bad value. */
static int global_option(ctl *x, int argc, char **argv, int *i, int *matched) {
    const char *a = argv[*i];
    *matched = 0;
    const char *eq = strchr(a, '=');
    char name[32];
    size_t nl = eq ? (size_t)(eq - a) : strlen(a);
    if (nl >= sizeof name) return 0;
    memcpy(name, a, nl);
    name[nl] = 0;
    if (!strcmp(a, "--json") || !strcmp(a, "--tls")) {
        *(a[2] == 'j' ? &x->json : &x->tls) = 1;
        *matched = 1;
        return 0;
    }
    if (!strcmp(name, "--ca") || !strcmp(name, "--cert") || !strcmp(name, "--key")) {
        const char *file = eq ? eq + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
        *matched = 1;
        if (!file || !file[0]) {
            ctl_fail(x, EXIT_USAGE, "%s needs a file", name);
            return -1;
        }
        if (!strcmp(name, "--ca"))
            x->ca = file;
        else if (!strcmp(name, "--cert"))
            x->cert = file;
        else
            x->key = file;
        return 0;
    }
    if (strcmp(name, "--host") && strcmp(name, "--port") && strcmp(name, "--timeout") && strcmp(name, "--token-file") &&
        strcmp(name, "--at-tick") && strcmp(name, "--servers"))
        return 0;
    *matched = 1;
    const char *val = eq ? eq + 1 : (*i + 1 < argc ? argv[++*i] : NULL);
    if (!val) {
        ctl_fail(x, EXIT_USAGE, "%s needs a value", name);
        return -1;
    }
    if (!strcmp(name, "--token-file")) return read_token_file(x, val);
    if (!strcmp(name, "--at-tick")) {
        if (ctl_parse_u64(val, &x->at_tick)) {
            ctl_fail(x, EXIT_USAGE, "bad --at-tick '%s'", val);
            return -1;
        }
        x->has_tick = 1;
        return 0;
    }
    if (!strcmp(name, "--servers")) {
        x->servers = val[0] ? val : NULL;
        return 0;
    }
    if (!strcmp(name, "--host")) {
        if (!val[0]) {
            ctl_fail(x, EXIT_USAGE, "--host needs a value");
            return -1;
        }
        x->host = val;
        x->chosen = 1; /* one server named: it wins over --servers / PHYSD_SERVERS */
        return 0;
    }
    char *end;
    long v = strtol(val, &end, 10);
    if (!val[0] || *end || v < 0 || (!strcmp(name, "--port") && (v < 1 || v > 65535)) || v > 86400000) {
        ctl_fail(x, EXIT_USAGE, "bad %s '%s'", name, val);
        return -1;
    }
    if (!strcmp(name, "--port")) {
        x->port = (int)v;
        x->chosen = 1;
    } else {
        x->timeout_ms = (int)v;
        x->timeout_given = 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    ctl x;
    memset(&x, 0, sizeof x);
    x.host = getenv("PHYSD_HOST") && getenv("PHYSD_HOST")[0] ? getenv("PHYSD_HOST") : "127.0.0.1";
    x.port = PC_DEFAULT_PORT;
    x.timeout_ms = 10000;
    if (getenv("PHYSD_TOKEN")) snprintf(x.token, sizeof x.token, "%s", getenv("PHYSD_TOKEN"));
    if (getenv("PHYSD_TLS") && getenv("PHYSD_TLS")[0] && strcmp(getenv("PHYSD_TLS"), "0")) x.tls = 1;
    if (getenv("PHYSD_CA") && getenv("PHYSD_CA")[0]) x.ca = getenv("PHYSD_CA");
    if (getenv("PHYSD_SERVERS") && getenv("PHYSD_SERVERS")[0]) x.servers = getenv("PHYSD_SERVERS");
    const char *env_port = getenv("PHYSD_PORT");
    if (env_port && env_port[0]) {
        char *end;
        long v = strtol(env_port, &end, 10);
        if (*end || v < 1 || v > 65535) {
            fprintf(stderr, "physctl: bad PHYSD_PORT '%s' (expected 1..65535)\n", env_port);
            return EXIT_USAGE;
        }
        x.port = (int)v;
    }
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            usage(stdout);
            return EXIT_OK;
        }
        if (!strcmp(a, "--version")) {
            printf("physctl %s (protocol %d)\n", PC_VERSION, PC_PROTOCOL_VERSION);
            return EXIT_OK;
        }
        int matched = 0;
        if (global_option(&x, argc, argv, &i, &matched) < 0) return EXIT_USAGE;
        if (matched) continue;
        fprintf(stderr, "physctl: unknown option '%s' (see physctl --help)\n", a);
        return EXIT_USAGE;
    }
    if (i >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[i];
    if (!strcmp(name, "help")) {
        if (i + 1 < argc) {
            const command *c = ctl_find_command(argv[i + 1]);
            if (c) {
                command_help(c);
                return EXIT_OK;
            }
            fprintf(stderr, "physctl: unknown command '%s'%s\n", argv[i + 1], command_hint(argv[i + 1]));
            return EXIT_USAGE;
        }
        usage(stdout);
        return EXIT_OK;
    }
    const command *cmd = ctl_find_command(name);
    if (!cmd) {
        fprintf(stderr, "physctl: unknown command '%s'%s (see physctl --help)\n", name, command_hint(name));
        return EXIT_USAGE;
    }
    /* The command's own arguments, without the global options that may
     * follow it (physctl worlds --json, physctl step 2 10 --port 7448). */
    char **args = calloc((size_t)(argc - i) + 1, sizeof *args);
    if (!args) return ctl_fail(&x, EXIT_LOST, "out of memory");
    int nargs = 0;
    x.cmd = cmd->name;
    for (int k = i; k < argc; k++) {
        if (k > i && is_help(argv[k])) {
            command_help(cmd);
            free(args);
            return EXIT_OK;
        }
        int matched = 0;
        if (k > i && global_option(&x, argc, argv, &k, &matched) < 0) {
            free(args);
            return EXIT_USAGE;
        }
        if (!matched) args[nargs++] = argv[k];
    }
    args[nargs] = NULL;
    if (uv_loop_init(&x.loop) != 0) {
        free(args);
        return ctl_fail(&x, EXIT_CONNECT, "cannot create an event loop");
    }
    int rc = cmd->run(&x, nargs, args);
    if (x.c) pc_close_sync(x.c);
    uv_run(&x.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&x.loop) != 0) fprintf(stderr, "physctl: warning: the event loop did not close cleanly\n");
    fflush(stdout);
    free(args);
    return rc;
}
