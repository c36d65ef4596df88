/*
 * main.c — the physd executable: command line, config file, signals.
 *
 *   physd [--config FILE] [--listen ADDR] [--port N] [--max-frame BYTES] ...
 *         [--demo | --no-demo] [--help] [--version]
 *
 * Normal path: defaults, then the config file (key = value lines), then
 * the flags (later ones win); the demo world is on unless --no-demo. The
 * server runs until SIGINT or SIGTERM, then shuts down gracefully (stop
 * accepting, flush, close) and exits 0. The executable holds no client:
 * a world is watched with `physctl watch WORLD` (--watch, which once did
 * that here, says so and exits 2).
 *
 * Failure modes: a bad flag or config line prints a message and exits 2;
 * a bind failure exits 1; an unclean loop shutdown exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "physd/ph_scenes.h"
#include "server.h"

/* Levenshtein distance of two short names (for "did you mean"). */
static int edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

/* Prints the unknown preset's nearest names and every preset. */
static void unknown_preset(const char *name) {
    fprintf(stderr, "physd: --demo-scene: no preset named \"%s\"", name);
    int best = 99;
    for (int i = 0; i < ph_scene_count(); i++) {
        int dist = edit_distance(name, ph_scene_at(i)->name);
        if (dist < best) best = dist;
    }
    if (best <= 3) {
        fprintf(stderr, "; did you mean");
        for (int i = 0; i < ph_scene_count(); i++)
            if (edit_distance(name, ph_scene_at(i)->name) == best) fprintf(stderr, " %s", ph_scene_at(i)->name);
        fprintf(stderr, "?");
    }
    fprintf(stderr, "\npresets:");
    for (int i = 0; i < ph_scene_count(); i++)
        fprintf(stderr, " %s", ph_scene_at(i)->name);
    fprintf(stderr, "\n");
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: physd [options]           run the server (default 127.0.0.1:%d, demo world on)\n"
            "options (also accepted as \"name = value\" lines in --config FILE):\n"
            "  --config FILE            read options from FILE first (flags override it)\n"
            "  --demo / --no-demo       create the demo world (default: on)\n"
            "  --insecure               listen beyond loopback without access control (docs/security.md)\n"
            "usage: physd --replay DIR/worlds/N.journal   rebuild a world offline from its journal, check every\n"
            "                           recorded state hash, print a JSON line (exit 0 all equal, 1 one differs,\n"
            "                           2 unreadable); docs/durability.md\n",
            PS_DEFAULT_PORT);
    ps_config_print_help(f);
}

/* physd --replay FILE: the world of one journal rebuilt offline (no
 * listener, no data directory), every state hash checked. */
static int replay_journal(ps_config *cfg, const char *path, int simd_given) {
    cfg->replay_simd = simd_given ? cfg->simd : -1;
    cfg->no_listen = 1;
    cfg->demo = 0;
    cfg->handle_signals = 0;
    cfg->data_dir[0] = 0;
    cfg->admin_token_file[0] = 0;
    ps_server *s = NULL;
    int r = ps_server_create(&s, cfg);
    if (r < 0) {
        fprintf(stderr, "physd --replay: %s\n", ps_server_strerror(r));
        return 2;
    }
    ps_replay_result res;
    r = ps_server_replay(s, path, &res);
    if (r < 0) {
        fprintf(stderr, "physd --replay: %s: %s\n", path,
                r == UV_EINVAL ? "not a journal with a valid creation record" : uv_strerror(r));
    } else {
        printf("{\"world_id\":%llu,\"tick\":%llu,\"epoch\":%llu,\"paused\":%s,\"destroyed\":%s,\"records\":%llu,"
               "\"hashes_checked\":%llu,\"mismatches\":%llu,\"first_mismatch_tick\":%llu,\"state_hash\":\"%016llx\","
               "\"cut_at\":%llu}\n",
               (unsigned long long)res.world_id, (unsigned long long)res.tick, (unsigned long long)res.epoch,
               res.paused ? "true" : "false", res.destroyed ? "true" : "false", (unsigned long long)res.records,
               (unsigned long long)res.hashes_checked, (unsigned long long)res.mismatches,
               (unsigned long long)res.first_mismatch_tick, (unsigned long long)res.state_hash,
               (unsigned long long)res.cut_at);
        fflush(stdout);
    }
    ps_server_stop(s);
    ps_server_run(s);
    ps_server_destroy(s);
    return r < 0 ? 2 : res.mismatches ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *replay = NULL;
    ps_config cfg;
    ps_config_defaults(&cfg);
    /* PHYSD_SIMD (documented before the simd option existed) sets its
     * default; --simd and the config file override it. */
    const char *simd = getenv("PHYSD_SIMD");
    const char *simd_why = NULL;
    if (simd && *simd && ps_config_set(&cfg, "simd", simd, &simd_why) != 0)
        fprintf(stderr, "physd: PHYSD_SIMD=%s ignored: %s\n", simd, simd_why);
    cfg.demo = 1;
    cfg.handle_signals = 1;
    /* Agones sets AGONES_SDK_HTTP_PORT in a GameServer's containers: speak
     * its SDK (docs/deploy.md); agones_sdk_port in the config or a flag wins. */
    const char *agones = getenv("AGONES_SDK_HTTP_PORT");
    if (agones && *agones && ps_config_set(&cfg, "agones_sdk_port", agones, NULL) != 0) {
        fprintf(stderr, "physd: AGONES_SDK_HTTP_PORT=%s is not a port\n", agones);
        return 2;
    }
    /* The config file first, so that flags override it. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "physd: --config needs a file\n");
                return 2;
            }
            char err[256];
            if (ps_config_load(&cfg, argv[i + 1], err, sizeof err) != 0) {
                fprintf(stderr, "physd: %s\n", err);
                return 2;
            }
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--version")) {
            printf("physd %s (protocol %d)\n", PS_VERSION, PS_PROTOCOL_VERSION);
            return 0;
        }
        if (!strcmp(a, "--config")) {
            i++;
            continue;
        }
        if (!strcmp(a, "--demo")) {
            cfg.demo = 1;
            continue;
        }
        if (!strcmp(a, "--no-demo")) {
            cfg.demo = 0;
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            cfg.quiet = 1;
            continue;
        }
        if (!strcmp(a, "--insecure")) {
            cfg.insecure = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "physd: unexpected argument \"%s\" (see --help)\n", a);
            return 2;
        }
        char name[64];
        const char *value = NULL;
        const char *eq = strchr(a + 2, '=');
        size_t nlen = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
        if (nlen >= sizeof name) nlen = sizeof name - 1;
        memcpy(name, a + 2, nlen);
        name[nlen] = 0;
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc)
            value = argv[++i];
        else {
            fprintf(stderr, "physd: --%s needs a value\n", name);
            return 2;
        }
        if (!strcmp(name, "replay")) {
            replay = value;
            continue;
        }
        if (!strcmp(name, "watch")) {
            fprintf(stderr, "physd: --watch is gone: watch a world with physctl watch %s (docs/clients.md)\n", value);
            return 2;
        }
        const char *why = NULL;
        if (ps_config_set(&cfg, name, value, &why) != 0) {
            fprintf(stderr, "physd: --%s %s: %s\n", name, value, why);
            return 2;
        }
    }
    if (cfg.demo && !ph_scene_find(cfg.demo_scene)) {
        unknown_preset(cfg.demo_scene);
        return 2;
    }
    if (replay) {
        int simd_given = 0;
        for (int i = 1; i < argc; i++)
            simd_given |= !strncmp(argv[i], "--simd", 6);
        return replay_journal(&cfg, replay, simd_given);
    }
    ps_server *s = NULL;
    int r = ps_server_create(&s, &cfg);
    if (r < 0) {
        fprintf(stderr, "physd: cannot start on %s:%d: %s\n", cfg.listen, cfg.port, ps_server_strerror(r));
        return 1;
    }
    r = ps_server_run(s);
    ps_server_destroy(s);
    return r == 0 ? 0 : 1;
}
