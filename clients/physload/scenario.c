/*
 * scenario.c — physload's scenario: defaults, command-line flags and JSON
 * scenario files (the same keys: --edit-rate and "edit_rate").
 *
 * Normal path: defaults, then PHYSD_HOST / PHYSD_PORT from the environment,
 * then the flags in order; --scenario FILE applies the file's keys at that
 * point, so later flags override it.
 *
 * Failure modes: an unknown flag or key, a value out of its range or a bad
 * file returns -1 with a message.
 *
 * Invariants: a scenario that passed has clients >= 1, worlds in
 * [1, clients], positive duration and rates >= 0.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physload.h"

void scenario_defaults(scenario *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->host, sizeof s->host, "127.0.0.1");
    s->port = PC_DEFAULT_PORT;
    s->clients = 10;
    s->duration = 10;
    s->ramp = 1;
    s->worlds = 0; /* 0: clients / 5, at least 1 */
    snprintf(s->preset, sizeof s->preset, "box_drop");
    s->tick_rate = 60;
    s->edit_rate = 2;
    s->query_rate = 5;
    s->subscribe_every = 1;
    s->subscribers = 1;
    s->timeout_ms = 5000;
    s->resolution = 0.001;
    s->bound = 1000;
    s->rotation_bits = 12;
    s->raw_checkers = 2;
    s->decoders = 100000;
    s->editors = 100000;
}

int scenario_parse_region(const char *text, pc_region *out) {
    memset(out, 0, sizeof *out);
    if (!text[0]) return 0;
    double v[6];
    int n = 0;
    char tail;
    if (!strncmp(text, "sphere:", 7)) {
        n = sscanf(text + 7, "%lf,%lf,%lf,%lf%c", &v[0], &v[1], &v[2], &v[3], &tail);
        if (n != 4) return -1;
        out->kind = PC_REGION_SPHERE;
        out->radius = v[3];
    } else if (!strncmp(text, "box:", 4)) {
        n = sscanf(text + 4, "%lf,%lf,%lf,%lf,%lf,%lf%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail);
        if (n != 6) return -1;
        out->kind = PC_REGION_BOX;
        for (int k = 0; k < 3; k++)
            out->half_extents[k] = v[3 + k];
    } else {
        return -1;
    }
    for (int k = 0; k < 3; k++)
        out->center[k] = v[k];
    for (int k = 0; k < (out->kind == PC_REGION_BOX ? 6 : 4); k++)
        if (!isfinite(v[k]) || fabs(v[k]) > 1e7 || (k >= 3 && v[k] < 0)) return -1;
    return 0;
}

int scenario_from_env(scenario *s, char *err, size_t n) {
    const char *host = getenv("PHYSD_HOST"), *port = getenv("PHYSD_PORT");
    if (host && host[0]) {
        if (strlen(host) >= sizeof s->host) {
            snprintf(err, n, "PHYSD_HOST is too long");
            return -1;
        }
        snprintf(s->host, sizeof s->host, "%s", host);
    }
    if (port && port[0]) {
        char *end;
        long v = strtol(port, &end, 10);
        if (*end || v < 1 || v > 65535) {
            snprintf(err, n, "bad PHYSD_PORT '%s' (expected 1..65535)", port);
            return -1;
        }
        s->port = (int)v;
    }
    const char *servers = getenv("PHYSD_SERVERS");
    if (servers && servers[0]) {
        if (strlen(servers) >= sizeof s->servers) {
            snprintf(err, n, "PHYSD_SERVERS is too long");
            return -1;
        }
        snprintf(s->servers, sizeof s->servers, "%s", servers);
    }
    const char *tls = getenv("PHYSD_TLS"), *ca = getenv("PHYSD_CA");
    if (tls && tls[0] && strcmp(tls, "0")) s->tls = 1;
    if (ca && ca[0]) snprintf(s->ca, sizeof s->ca, "%s", ca);
    return 0;
}

enum { K_INT, K_DOUBLE, K_STRING, K_BOOL };

static const struct key {
    const char *name;
    int kind;
    size_t off;
    double lo, hi;
    const char *help;
} keys[] = {
    {"host", K_STRING, offsetof(scenario, host), 0, 0, "server address (default 127.0.0.1, or PHYSD_HOST)"},
    {"port", K_INT, offsetof(scenario, port), 1, 65535, "server port (default 7447, or PHYSD_PORT)"},
    {"servers", K_STRING, offsetof(scenario, servers), 0, 0,
     "several servers HOST:PORT,... (or PHYSD_SERVERS): each world goes to the least loaded (docs/fleet.md)"},
    {"clients", K_INT, offsetof(scenario, clients), 1, 100000, "connections (default 10)"},
    {"duration", K_DOUBLE, offsetof(scenario, duration), 0.1, 86400, "seconds of load, ramp-up included (default 10)"},
    {"ramp", K_DOUBLE, offsetof(scenario, ramp), 0, 86400, "seconds over which the clients connect (default 1)"},
    {"worlds", K_INT, offsetof(scenario, worlds), 0, 100000,
     "worlds, created by the first clients; client i uses world i mod worlds (default clients/5, at least 1)"},
    {"preset", K_STRING, offsetof(scenario, preset), 0, 0, "scene of each world (default box_drop)"},
    {"tick_rate", K_DOUBLE, offsetof(scenario, tick_rate), 0.001, 1000, "Hz of each world (default 60)"},
    {"edit_rate", K_DOUBLE, offsetof(scenario, edit_rate), 0, 1000,
     "edit batches per second per client: add a sphere, then remove it (default 2)"},
    {"editors", K_INT, offsetof(scenario, editors), 0, 100000,
     "only the first N clients send edit batches (default all)"},
    {"query_rate", K_DOUBLE, offsetof(scenario, query_rate), 0, 1000,
     "body queries (up to 10 bodies) per second per client (default 5)"},
    {"subscribe_every", K_INT, offsetof(scenario, subscribe_every), 0, 1000000,
     "subscribers get transform frames every k-th tick; 0: nobody subscribes (default 1)"},
    {"subscribers", K_DOUBLE, offsetof(scenario, subscribers), 0, 1, "fraction of clients that subscribe (default 1)"},
    {"keep", K_BOOL, offsetof(scenario, keep), 0, 0, "keep the worlds at the end (default: destroy them)"},
    {"json", K_BOOL, offsetof(scenario, json), 0, 0, "print the report as one JSON object"},
    {"quiet", K_BOOL, offsetof(scenario, quiet), 0, 0, "no progress line"},
    {"timeout_ms", K_INT, offsetof(scenario, timeout_ms), 1, 600000, "connect timeout in ms (default 5000)"},
    {"tls", K_BOOL, offsetof(scenario, tls), 0, 0, "connect with TLS, the server verified (or PHYSD_TLS=1)"},
    {"ca", K_STRING, offsetof(scenario, ca), 0, 0,
     "TLS: PEM file of the CA to trust (or PHYSD_CA; default: the system's)"},
    {"cert", K_STRING, offsetof(scenario, cert), 0, 0, "TLS: PEM client certificate (a server with tls_client_ca)"},
    {"key", K_STRING, offsetof(scenario, key), 0, 0, "TLS: PEM key of --cert (default: in the --cert file)"},
    {"compact", K_BOOL, offsetof(scenario, compact), 0, 0,
     "subscribers take compact transform frames (docs/streams.md), decoded and checked"},
    {"resolution", K_DOUBLE, offsetof(scenario, resolution), 1e-6, 1, "compact: position quantum in m (default 0.001)"},
    {"bound", K_DOUBLE, offsetof(scenario, bound), 1e-6, 1e7, "compact: position bound in m (default 1000)"},
    {"rotation_bits", K_INT, offsetof(scenario, rotation_bits), 6, 24, "compact: bits per rotation component (12)"},
    {"region", K_STRING, offsetof(scenario, region), 0, 0,
     "compact: interest region sphere:x,y,z,r or box:x,y,z,hx,hy,hz (default none)"},
    {"budget", K_INT, offsetof(scenario, budget), 0, 1000000000,
     "compact: bytes per second per subscriber, 0 or >= 1024 (default 0: none)"},
    {"raw_checkers", K_INT, offsetof(scenario, raw_checkers), 0, 100000,
     "compact: subscribers that also take raw frames and compare them with the decoded ones (default 2)"},
    {"decoders", K_INT, offsetof(scenario, decoders), 0, 100000,
     "compact: subscribers that decode every frame (the checkers always); the others read and count (default all)"},
    {"predict", K_BOOL, offsetof(scenario, predict), 0, 0,
     "compact: frames predict changed bodies from the two newest baselines (docs/streams.md)"},
    {"drive", K_BOOL, offsetof(scenario, drive), 0, 0,
     "cubes901: each world's first client pushes the large cube through the grid (one apply_force a tick)"},
    {NULL, 0, 0, 0, 0, NULL},
};

static const struct key *find_key(const char *name) {
    char norm[64];
    size_t i = 0;
    for (; name[i] && i + 1 < sizeof norm; i++)
        norm[i] = name[i] == '-' ? '_' : name[i];
    norm[i] = 0;
    for (const struct key *k = keys; k->name; k++)
        if (!strcmp(k->name, norm)) return k;
    return NULL;
}

static int set_number(scenario *s, const struct key *k, double v, char *err, size_t n) {
    if (k->kind == K_BOOL) {
        *(int *)((char *)s + k->off) = v != 0;
        return 0;
    }
    if (!(v >= k->lo && v <= k->hi)) {
        snprintf(err, n, "%s must be in [%g, %g]", k->name, k->lo, k->hi);
        return -1;
    }
    if (k->kind == K_INT) {
        if (v != (double)(int)v) {
            snprintf(err, n, "%s must be an integer", k->name);
            return -1;
        }
        *(int *)((char *)s + k->off) = (int)v;
    } else {
        *(double *)((char *)s + k->off) = v;
    }
    return 0;
}

static int set_text(scenario *s, const struct key *k, const char *text, char *err, size_t n) {
    if (k->kind == K_STRING) {
        char *dst = (char *)s + k->off;
        size_t cap = k->off == offsetof(scenario, preset)    ? sizeof s->preset
                     : k->off == offsetof(scenario, servers) ? sizeof s->servers
                                                             : sizeof s->host; /* 64, 1024 or 256 */
        if (strlen(text) >= cap) {
            snprintf(err, n, "%s is too long", k->name);
            return -1;
        }
        snprintf(dst, cap, "%s", text);
        return 0;
    }
    char *end;
    double v = strtod(text, &end);
    if (*end || end == text) {
        snprintf(err, n, "%s: '%s' is not a number", k->name, text);
        return -1;
    }
    return set_number(s, k, v, err, n);
}

int scenario_from_json(scenario *s, const js_value *v, char *err, size_t n) {
    if (v->type != JS_OBJECT) {
        snprintf(err, n, "a scenario is a JSON object");
        return -1;
    }
    for (size_t i = 0; i < v->n; i++) {
        const struct key *k = find_key(v->keys[i]);
        const js_value *x = &v->items[i];
        if (!k) {
            snprintf(err, n, "unknown scenario key \"%s\"", v->keys[i]);
            return -1;
        }
        int r;
        if (k->kind == K_STRING) {
            if (x->type != JS_STRING) {
                snprintf(err, n, "\"%s\" must be a string", k->name);
                return -1;
            }
            r = set_text(s, k, x->str, err, n);
        } else if (k->kind == K_BOOL) {
            if (x->type != JS_BOOL) {
                snprintf(err, n, "\"%s\" must be true or false", k->name);
                return -1;
            }
            r = set_number(s, k, x->boolean, err, n);
        } else {
            if (x->type != JS_NUMBER) {
                snprintf(err, n, "\"%s\" must be a number", k->name);
                return -1;
            }
            r = set_number(s, k, x->num, err, n);
        }
        if (r) return r;
    }
    return 0;
}

void scenario_usage(void) {
    printf("usage: physload [--scenario FILE] [--KEY VALUE ...] [--json] [--quiet]\n\n"
           "Drives many scripted clients against a physd server from one event loop and reports\n"
           "requests per second, reply latency percentiles, frames and bytes received, drops and errors;\n"
           "at the end it compares its counts with the server's own (query_counters of each world).\n\n"
           "keys (flags --edit-rate 2 or --edit-rate=2; in a scenario file \"edit_rate\": 2):\n");
    for (const struct key *k = keys; k->name; k++) {
        char flag[40];
        snprintf(flag, sizeof flag, "--%s", k->name);
        for (char *p = flag + 2; *p; p++)
            if (*p == '_') *p = '-';
        printf("  %-20s %s\n", flag, k->help);
    }
    printf("  %-20s %s\n", "--scenario FILE", "read keys from a JSON object first (later flags override)");
    printf("\nexit codes: 0 no errors and the counts agree, 1 errors or a disagreement, 2 usage,\n"
           "            3 no server at the address (the first connection failed; physload stops at once)\n");
}

int scenario_from_args(scenario *s, int argc, char **argv, int *help, char *err, size_t n) {
    *help = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            scenario_usage();
            *help = 1;
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, n, "unexpected argument '%s'", a);
            return -1;
        }
        char name[64];
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, a + 2, len);
        name[len] = 0;
        if (!strcmp(name, "scenario")) {
            const char *file = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!file) {
                snprintf(err, n, "--scenario needs a file");
                return -1;
            }
            js_value v;
            char msg[300];
            if (js_parse_file(file, &v, msg, sizeof msg)) {
                snprintf(err, n, "%s", msg);
                return -1;
            }
            int r = scenario_from_json(s, &v, msg, sizeof msg);
            js_free(&v);
            if (r) {
                snprintf(err, n, "%s: %s", file, msg);
                return -1;
            }
            continue;
        }
        const struct key *k = find_key(name);
        if (!k) {
            snprintf(err, n, "unknown option '--%s' (see physload --help)", name);
            return -1;
        }
        if (k->kind == K_BOOL && !eq) {
            set_number(s, k, 1, err, n);
            continue;
        }
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val) {
            snprintf(err, n, "--%s needs a value", name);
            return -1;
        }
        if (set_text(s, k, val, err, n)) return -1;
    }
    if (s->worlds == 0) s->worlds = s->clients / 5 > 0 ? s->clients / 5 : 1;
    if (s->worlds > s->clients) {
        snprintf(err, n, "worlds (%d) must not exceed clients (%d)", s->worlds, s->clients);
        return -1;
    }
    if (s->ramp >= s->duration) s->ramp = s->duration / 2;
    if (scenario_parse_region(s->region, &s->region_parsed) != 0) {
        snprintf(err, n, "region '%s': expected sphere:x,y,z,r or box:x,y,z,hx,hy,hz (finite, |x| <= 1e7, sizes >= 0)",
                 s->region);
        return -1;
    }
    if (s->predict && !s->compact) {
        snprintf(err, n, "predict is for compact subscribers (--compact)");
        return -1;
    }
    if (s->drive && strcmp(s->preset, "cubes901") != 0) {
        snprintf(err, n, "drive is for the cubes901 preset (its large cube)");
        return -1;
    }
    if (s->budget > 0 && s->budget < 1024) {
        snprintf(err, n, "budget must be 0 or at least 1024 bytes per second");
        return -1;
    }
    if (s->bound / s->resolution > 1073741824.0) {
        snprintf(err, n, "bound / resolution must be at most 2^30");
        return -1;
    }
    return 0;
}

void scenario_write_json(jw *w, const scenario *s) {
    jw_object(w);
    for (const struct key *k = keys; k->name; k++) {
        if (!strcmp(k->name, "json") || !strcmp(k->name, "quiet")) continue;
        jw_key(w, k->name);
        const void *p = (const char *)s + k->off;
        switch (k->kind) {
        case K_STRING:
            jw_string(w, p);
            break;
        case K_INT:
            jw_int(w, *(const int *)p);
            break;
        case K_BOOL:
            jw_bool(w, *(const int *)p);
            break;
        default:
            jw_double(w, *(const double *)p);
            break;
        }
    }
    jw_object_end(w);
}
