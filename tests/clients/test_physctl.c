/*
 * test_physctl.c — physctl sessions (the built binary, as a child process)
 * against an in-process physd on 127.0.0.1.
 *
 * Shows: create a paused world with settings, add bodies (a plane, a
 * sphere and a box with mass=, pose and velocity), step 10 while paused,
 * dump, and compare the JSON with values computed here (masses, inertias,
 * the semi-implicit Euler free fall z = z0 - g h^2 n(n+1)/2, v = -g h n,
 * x = x0 + v h n); `set` with a dotted key; `load` then `save` round-trips
 * a scene file (the saved values equal the file's, and load + save of the
 * saved file is byte-identical); exit codes 1, 2, 3, 5 with messages on
 * stderr; --help for every command; the nearest names offered for a
 * misspelt command, setting, body key or joint subcommand, and the exact
 * message of a bad vector; half=H as a cube; global options after the
 * command and PHYSD_PORT; every edit op with numbers (pose and velocity
 * keep the part not given, an impulse of (0, m, 0) adds 1 m/s, a force of
 * m g for one step holds v_z, a torque of 60 I adds 1 rad/s in a step, a
 * kinematic target is reached in one step), joints added, listed and
 * removed, ray casts (6.5 m down to a sphere's top), counters, contact
 * events. With the server of issue 14 (test_server_features): presets
 * listed and a misspelt one suggested, watch --stats on a paused world
 * says "paused at tick N", a step request cancelled by a reset reports
 * its steps and exits 1, load uses CreateWorld.scene under a free name
 * (roundtrip-2) and reset restores the loaded scene.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"
#include "json.h"
#include "tool_run.h"

static int port;
static char port_s[16];
static char dir[64];

static int setup(void **state) {
    (void)state;
    ps_config cfg;
    itest_config(&cfg);
    port = itest_start(&cfg);
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(dir, sizeof dir, "/tmp/physctl-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    itest_stop();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* Runs physctl --port P [--json] args...; returns the result. */
static tool_result ctl(int json, const char *a0, ...) {
    char *argv[32];
    int n = 0;
    argv[n++] = PHYSCTL_BIN;
    argv[n++] = "--port";
    argv[n++] = port_s;
    if (json) argv[n++] = "--json";
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    tool_result r;
    assert_int_equal(tool_run(argv, &r), 0);
    return r;
}

/* Runs a command that must succeed and parses its stdout as JSON. */
static js_value ctl_json(const char *a0, ...) {
    char *argv[32];
    int n = 0;
    argv[n++] = PHYSCTL_BIN;
    argv[n++] = "--port";
    argv[n++] = port_s;
    argv[n++] = "--json";
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    tool_result r;
    assert_int_equal(tool_run(argv, &r), 0);
    if (r.code != 0) fail_msg("physctl %s: exit %d: %s", a0, r.code, r.err);
    js_value v;
    char err[200];
    if (js_parse(r.out, strlen(r.out), &v, err, sizeof err)) fail_msg("physctl %s: bad JSON (%s): %s", a0, err, r.out);
    tool_result_free(&r);
    return v;
}

static const js_value *at(const js_value *v, const char *path) {
    char seg[64];
    const char *s = path;
    while (v && *s) {
        const char *dot = strchr(s, '.');
        size_t len = dot ? (size_t)(dot - s) : strlen(s);
        memcpy(seg, s, len);
        seg[len] = 0;
        if (v->type == JS_ARRAY) {
            size_t i = (size_t)atoi(seg);
            v = i < v->n ? &v->items[i] : NULL;
        } else {
            v = js_get(v, seg);
        }
        s = dot ? dot + 1 : s + len;
    }
    if (!v) fail_msg("no %s in the JSON", path);
    return v;
}

static double num(const js_value *v, const char *path) {
    const js_value *x = at(v, path);
    assert_int_equal(x->type, JS_NUMBER);
    return x->num;
}

static void test_session(void **state) {
    (void)state;
    js_value w = ctl_json("create", "--paused", "--name", "session", "gravity=0,0,-10", "iterations=20", NULL);
    uint64_t world = (uint64_t)num(&w, "world_id");
    assert_true(world > 0);
    assert_true(at(&w, "paused")->boolean);
    assert_int_equal((int)num(&w, "settings.iterations"), 20);
    assert_float_equal(num(&w, "settings.gravity.2"), -10, 0);
    js_free(&w);
    char ws[24];
    snprintf(ws, sizeof ws, "%llu", (unsigned long long)world);

    /* Text output of add is the new id. */
    tool_result r = ctl(0, "add", ws, "type=static", "shape=plane", NULL);
    assert_int_equal(r.code, 0);
    assert_true(strtoull(r.out, NULL, 10) > 0);
    tool_result_free(&r);
    js_value s = ctl_json("add", ws, "shape=sphere", "radius=0.5", "mass=2", "pos=0,0,3", NULL);
    uint64_t sphere = (uint64_t)num(&s, "body_ids.0");
    js_free(&s);
    js_value b = ctl_json("add", ws, "shape=box", "half=0.5,0.5,0.5", "mass=8", "pos=3,0,10", "vel=1,0,0", NULL);
    uint64_t box = (uint64_t)num(&b, "body_ids.0");
    js_free(&b);

    js_value st = ctl_json("step", ws, "10", NULL);
    assert_int_equal((int)num(&st, "steps_done"), 10);
    assert_int_equal((int)num(&st, "tick"), 10);
    js_free(&st);

    js_value d = ctl_json("dump", ws, "--shapes", NULL);
    assert_int_equal((int)num(&d, "world.tick"), 10);
    assert_true(at(&d, "world.paused")->boolean);
    assert_int_equal((int)num(&d, "world.body_count"), 3);
    const js_value *bodies = at(&d, "bodies");
    assert_int_equal(bodies->n, 3);
    /* Free fall under g = 10 for n = 10 steps of h = 1/60 s: every
     * explicit integrator gives v = -g h n exactly and moves x by v h n;
     * z lies between explicit Euler (z0 - g h^2 n(n-1)/2) and
     * semi-implicit Euler (z0 - g h^2 n(n+1)/2); and both bodies fall by
     * the same amount. */
    const double h = 1.0 / 60.0, g = 10.0, n = 10;
    const double drop_lo = g * h * h * n * (n - 1) / 2, drop_hi = g * h * h * n * (n + 1) / 2;
    double sphere_drop = -1, box_drop = -2;
    int seen = 0;
    for (size_t i = 0; i < bodies->n; i++) {
        const js_value *bd = &bodies->items[i];
        uint64_t id = at(bd, "body_id")->u;
        if (id == sphere) {
            seen++;
            assert_string_equal(at(bd, "type")->str, "dynamic");
            assert_float_equal(num(bd, "mass"), 2.0, 1e-12);
            assert_float_equal(num(bd, "inertia.0"), 0.4 * 2.0 * 0.25, 1e-12);
            assert_float_equal(num(bd, "pose.position.0"), 0.0, 1e-12);
            assert_float_equal(num(bd, "linear_velocity.2"), -g * h * n, 1e-12);
            assert_float_equal(num(bd, "shapes.0.def.radius"), 0.5, 0);
            assert_string_equal(at(bd, "shapes.0.def.type")->str, "sphere");
            sphere_drop = 3.0 - num(bd, "pose.position.2");
        } else if (id == box) {
            seen++;
            assert_float_equal(num(bd, "mass"), 8.0, 1e-12);
            assert_float_equal(num(bd, "inertia.1"), 8.0 / 12.0 * 2.0, 1e-12);
            assert_float_equal(num(bd, "pose.position.0"), 3.0 + n * h, 1e-12);
            assert_float_equal(num(bd, "linear_velocity.0"), 1.0, 1e-12);
            assert_float_equal(num(bd, "linear_velocity.2"), -g * h * n, 1e-12);
            assert_float_equal(num(bd, "pose.orientation.3"), 1.0, 1e-12);
            box_drop = 10.0 - num(bd, "pose.position.2");
        } else {
            seen++;
            assert_string_equal(at(bd, "type")->str, "static");
            assert_float_equal(num(bd, "mass"), 0.0, 0);
            assert_float_equal(num(bd, "pose.position.2"), 0.0, 0);
        }
    }
    assert_int_equal(seen, 3);
    assert_true(sphere_drop >= drop_lo - 1e-12 && sphere_drop <= drop_hi + 1e-12);
    assert_float_equal(sphere_drop, box_drop, 1e-12);
    printf("    after 10 paused steps: fall %.9f m (bounds %.9f..%.9f), v_z = %.9f m/s, box x = %.9f m\n", sphere_drop,
           drop_lo, drop_hi, -g * h * n, 3.0 + n * h);
    js_free(&d);

    /* set with a dotted key keeps the other two Spook parameters. */
    js_value set = ctl_json("set", ws, "contact.hertz=30", "method=pgs_sm", "iterations=25", NULL);
    assert_float_equal(num(&set, "contact.hertz"), 30, 0);
    assert_float_equal(num(&set, "contact.k"), 1e8, 0);
    assert_float_equal(num(&set, "contact.d"), 5, 0);
    assert_string_equal(at(&set, "method")->str, "pgs_sm");
    assert_int_equal((int)num(&set, "iterations"), 25);
    js_free(&set);
    /* The PGS–SM preconditioner and forcing term (protocol fields 35, 36). */
    set = ctl_json("set", ws, "sm_preconditioner=2", "sm_forcing=0.1", NULL);
    assert_int_equal((int)num(&set, "sm_preconditioner"), 2);
    assert_float_equal(num(&set, "sm_forcing"), 0.1, 0);
    assert_string_equal(at(&set, "method")->str, "pgs_sm");
    js_free(&set);

    /* Worlds lists it; stats counts the edits. */
    js_value l = ctl_json("worlds", NULL);
    assert_true(at(&l, "worlds")->n >= 1);
    js_free(&l);
    js_value k = ctl_json("stats", ws, NULL);
    assert_int_equal((int)num(&k, "counters.edits_applied"), 3);
    assert_int_equal((int)num(&k, "counters.ticks_total"), 10);
    js_free(&k);
    r = ctl(0, "destroy", ws, NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
}

static const char *scene_a = "{\n"
                             "  \"format\": \"physd-scene\", \"version\": 1, \"name\": \"roundtrip\",\n"
                             "  \"paused\": true,\n"
                             "  \"settings\": {\"iterations\": 15, \"method\": \"block_pgs\", \"tick_rate\": 120},\n"
                             "  \"bodies\": [\n"
                             "    {\"type\": \"static\", \"shapes\": [{\"type\": \"plane\"}]},\n"
                             "    {\"pose\": {\"position\": [0, 0, 2]}, \"linear_velocity\": [0.5, 0, 0],\n"
                             "     \"shapes\": [{\"type\": \"sphere\", \"radius\": 0.25, \"density\": 500}]},\n"
                             "    {\"pose\": {\"position\": [1, 0, 3], \"orientation\": [0, 0, 0.6, 0.8]},\n"
                             "     \"mass\": {\"mass\": 3, \"inertia\": [1, 2, 3]},\n"
                             "     \"shapes\": [{\"type\": \"box\", \"half_extents\": [0.5, 0.25, 0.1], "
                             "\"friction\": 0.8}]}\n"
                             "  ],\n"
                             "  \"joints\": [{\"type\": \"distance\", \"body_a\": 1, \"body_b\": 2}]\n"
                             "}\n";

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    return b;
}

static void test_load_save(void **state) {
    (void)state;
    char a[128], b[128], c[128];
    snprintf(a, sizeof a, "%s/a.json", dir);
    snprintf(b, sizeof b, "%s/b.json", dir);
    snprintf(c, sizeof c, "%s/c.json", dir);
    FILE *f = fopen(a, "w");
    fputs(scene_a, f);
    fclose(f);

    js_value l = ctl_json("load", a, NULL);
    char ws[24];
    snprintf(ws, sizeof ws, "%llu", (unsigned long long)num(&l, "world_id"));
    assert_int_equal(at(&l, "body_ids")->n, 3);
    assert_int_equal(at(&l, "joint_ids")->n, 1);
    js_free(&l);
    tool_result r = ctl(0, "save", ws, b, NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);

    js_value v;
    char err[200];
    assert_int_equal(js_parse_file(b, &v, err, sizeof err), 0);
    assert_string_equal(at(&v, "name")->str, "roundtrip");
    assert_true(at(&v, "paused")->boolean);
    assert_int_equal((int)num(&v, "settings.iterations"), 15);
    assert_string_equal(at(&v, "settings.method")->str, "block_pgs");
    assert_float_equal(num(&v, "settings.tick_rate"), 120, 0);
    assert_int_equal(at(&v, "bodies")->n, 3);
    assert_string_equal(at(&v, "bodies.0.type")->str, "static");
    assert_string_equal(at(&v, "bodies.0.shapes.0.type")->str, "plane");
    assert_float_equal(num(&v, "bodies.1.pose.position.2"), 2, 0);
    assert_float_equal(num(&v, "bodies.1.linear_velocity.0"), 0.5, 0);
    assert_float_equal(num(&v, "bodies.1.shapes.0.radius"), 0.25, 0);
    assert_float_equal(num(&v, "bodies.1.shapes.0.density"), 500, 0);
    const double pi = 3.14159265358979323846, m1 = 500 * 4.0 / 3.0 * pi * 0.25 * 0.25 * 0.25;
    assert_float_equal(num(&v, "bodies.1.mass.mass"), m1, 1e-12);
    assert_float_equal(num(&v, "bodies.1.mass.inertia.0"), 0.4 * m1 * 0.0625, 1e-12);
    assert_float_equal(num(&v, "bodies.2.mass.mass"), 3, 0);
    assert_float_equal(num(&v, "bodies.2.mass.inertia.2"), 3, 0);
    assert_float_equal(num(&v, "bodies.2.pose.orientation.2"), 0.6, 1e-15);
    assert_float_equal(num(&v, "bodies.2.pose.orientation.3"), 0.8, 1e-15);
    assert_float_equal(num(&v, "bodies.2.shapes.0.half_extents.1"), 0.25, 0);
    assert_float_equal(num(&v, "bodies.2.shapes.0.friction"), 0.8, 0);
    /* The joint comes back with its bodies named by their index in the file
     * and its rest length resolved: |(1, 0, 3) - (0, 0, 2)| = sqrt 2. */
    assert_int_equal(at(&v, "joints")->n, 1);
    assert_string_equal(at(&v, "joints.0.type")->str, "distance");
    assert_int_equal((int)num(&v, "joints.0.body_a"), 1);
    assert_int_equal((int)num(&v, "joints.0.body_b"), 2);
    assert_true(fabs(num(&v, "joints.0.distance") - sqrt(2.0)) < 1e-12);
    js_free(&v);

    /* The saved file is a fixed point: load + save gives the same bytes. */
    r = ctl(0, "destroy", ws, NULL);
    tool_result_free(&r);
    r = ctl(0, "load", b, NULL);
    assert_int_equal(r.code, 0);
    snprintf(ws, sizeof ws, "%llu", strtoull(r.out, NULL, 10));
    tool_result_free(&r);
    r = ctl(0, "save", ws, c, NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    char *bb = read_all(b), *cc = read_all(c);
    assert_string_equal(bb, cc);
    printf("    load a.json, save b.json (%zu bytes), load b.json, save c.json: identical\n", strlen(bb));
    free(bb);
    free(cc);
    r = ctl(0, "destroy", ws, NULL);
    tool_result_free(&r);
}

static void test_errors_and_help(void **state) {
    (void)state;
    tool_result r = ctl(0, "step", "999", "1", NULL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "NOT_FOUND"));
    assert_string_equal(r.out, "");
    tool_result_free(&r);
    r = ctl(0, "set", "1", "no_such_setting=3", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "unknown key 'no_such_setting'"));
    tool_result_free(&r);
    r = ctl(0, "frobnicate", NULL);
    assert_int_equal(r.code, 2);
    tool_result_free(&r);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing.json", dir);
    r = ctl(0, "load", missing, NULL);
    assert_int_equal(r.code, 5);
    assert_non_null(strstr(r.err, "No such file"));
    tool_result_free(&r);
    /* A scene file with a typo names the line and the field. */
    char bad[128];
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    FILE *f = fopen(bad, "w");
    fputs("{\"format\": \"physd-scene\", \"version\": 1,\n \"bodies\": [{\"shapes\": [{\"radius\": \"big\"}]}]}\n", f);
    fclose(f);
    r = ctl(0, "load", bad, NULL);
    assert_int_equal(r.code, 5);
    assert_non_null(strstr(r.err, "bodies[0] (line 2): shapes[0]: radius"));
    tool_result_free(&r);

    /* No server: exit 3. */
    char *argv[] = {PHYSCTL_BIN, "--port", "1", "--timeout", "2000", "worlds", NULL};
    assert_int_equal(tool_run(argv, &r), 0);
    assert_int_equal(r.code, 3);
    assert_non_null(strstr(r.err, "cannot connect"));
    tool_result_free(&r);

    const char *cmds[] = {"worlds", "presets", "create",  "destroy", "add",   "remove",   "pose",  "velocity",
                          "force",  "torque",  "impulse", "target",  "joint", "set",      "pause", "resume",
                          "step",   "reset",   "watch",   "events",  "stats", "counters", "body",  "ray",
                          "dump",   "load",    "save",    "ping",    NULL};
    for (int i = 0; cmds[i]; i++) {
        r = ctl(0, cmds[i], "--help", NULL);
        assert_int_equal(r.code, 0);
        assert_non_null(strstr(r.out, "usage: physctl"));
        tool_result_free(&r);
    }
}

static void test_watch(void **state) {
    (void)state;
    tool_result r = ctl(0, "create", "--scene", "stack20", NULL);
    assert_int_equal(r.code, 0);
    char ws[24];
    snprintf(ws, sizeof ws, "%llu", strtoull(r.out, NULL, 10));
    tool_result_free(&r);
    r = ctl(0, "watch", ws, "--stats", "--count", "2", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Fischer-Burmeister merit per iteration"));
    assert_non_null(strstr(r.out, "method pgs"));
    tool_result_free(&r);
    r = ctl(0, "watch", ws, "--every", "2", "--bodies", "3", "--count", "2", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "... 18 more"));
    tool_result_free(&r);
    /* The solver statistics in text: the stack's 20 manifolds, and the
     * contact cache's count beside them. */
    r = ctl(0, "stats", ws, "--solver", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "manifolds 20 ("));
    assert_non_null(strstr(r.out, "reused by the contact cache"));
    tool_result_free(&r);
    r = ctl(0, "destroy", ws, NULL);
    tool_result_free(&r);
}

/* Runs physctl with the given argv after the binary (no --port added). */
static tool_result ctl_raw(const char *a0, ...) {
    char *argv[32];
    int n = 0;
    argv[n++] = PHYSCTL_BIN;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    tool_result r;
    assert_int_equal(tool_run(argv, &r), 0);
    return r;
}

/* The first body of `physctl body W ID --json`. */
static js_value body_json(const char *ws, uint64_t id) {
    char ids[24];
    snprintf(ids, sizeof ids, "%llu", (unsigned long long)id);
    return ctl_json("body", ws, ids, NULL);
}

/* Mistakes get precise messages: the nearest names, what a key expected. */
static void test_suggestions(void **state) {
    (void)state;
    js_value w = ctl_json("create", "--paused", NULL);
    char ws[24];
    snprintf(ws, sizeof ws, "%llu", (unsigned long long)num(&w, "world_id"));
    js_free(&w);
    tool_result r = ctl(0, "set", ws, "iteratons=2", NULL);
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "physctl set: unknown key 'iteratons' (in Settings); did you mean 'iterations'?\n");
    tool_result_free(&r);
    r = ctl(0, "set", ws, "contact.herz=30", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "did you mean 'hertz'?"));
    tool_result_free(&r);
    r = ctl(0, "add", ws, "hlaf=1", NULL);
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "physctl add: unknown key 'hlaf'; did you mean 'half'? (see physctl add --help)\n");
    tool_result_free(&r);
    r = ctl(0, "add", ws, "shape=box", "half=a,b", NULL);
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "physctl add: half: expected x,y,z or one number, got 'a,b'\n");
    tool_result_free(&r);
    r = ctl(0, "add", ws, "pos=1", NULL);
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "physctl add: pos: expected x,y,z, not a number\n");
    tool_result_free(&r);
    r = ctl(0, "add", ws, "vel=1,2", NULL);
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "physctl add: vel: expected x,y,z (3 values), got 2\n");
    tool_result_free(&r);
    r = ctl(0, "wolds", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "unknown command 'wolds'; did you mean 'worlds'?"));
    tool_result_free(&r);
    r = ctl(0, "joint", "lst", ws, NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "did you mean 'list'?"));
    tool_result_free(&r);
    /* half=H is a cube. */
    js_value b = ctl_json("add", ws, "shape=box", "half=1", "mass=8", NULL);
    uint64_t box = (uint64_t)num(&b, "body_ids.0");
    js_free(&b);
    char ids[24];
    snprintf(ids, sizeof ids, "%llu", (unsigned long long)box);
    js_value q = ctl_json("body", ws, ids, "--shapes", NULL);
    for (int k = 0; k < 3; k++) {
        char path[64];
        snprintf(path, sizeof path, "bodies.0.shapes.0.def.half_extents.%d", k);
        assert_float_equal(num(&q, path), 1.0, 0);
    }
    assert_float_equal(num(&q, "bodies.0.mass"), 8.0, 1e-12);
    js_free(&q);
    /* Global options after the command, and PHYSD_PORT. */
    r = ctl_raw("worlds", "--port", port_s, "--json", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"worlds\": ["));
    tool_result_free(&r);
    r = ctl_raw("step", ws, "--port=", NULL);
    assert_int_equal(r.code, 2);
    tool_result_free(&r);
    setenv("PHYSD_PORT", port_s, 1);
    r = ctl_raw("step", ws, "2", "--json", NULL);
    unsetenv("PHYSD_PORT");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"steps_done\": 2"));
    assert_non_null(strstr(r.out, "\"cancelled\": false"));
    tool_result_free(&r);
    r = ctl(0, "destroy", ws, NULL);
    tool_result_free(&r);
}

/* Every edit op and query from the command line, with numbers checked:
 * pose, velocity, impulse (dv = J / m), force for one step (F = m g holds
 * a falling sphere's velocity), torque (dw = T h / I), kinematic target,
 * joints, ray casts. */
static void test_edit_commands(void **state) {
    (void)state;
    js_value w = ctl_json("create", "--paused", "gravity=0,0,-10", NULL);
    char ws[24];
    snprintf(ws, sizeof ws, "%llu", (unsigned long long)num(&w, "world_id"));
    js_free(&w);
    tool_result r = ctl(0, "add", ws, "type=static", "shape=plane", NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    js_value a = ctl_json("add", ws, "shape=sphere", "radius=0.5", "pos=0,0,3", NULL);
    uint64_t sphere = (uint64_t)num(&a, "body_ids.0");
    js_free(&a);
    a = ctl_json("add", ws, "shape=box", "half=0.5", "pos=5,0,3", NULL);
    uint64_t box = (uint64_t)num(&a, "body_ids.0");
    js_free(&a);
    a = ctl_json("add", ws, "type=kinematic", "shape=box", "half=0.5", "pos=0,5,1", NULL);
    uint64_t kin = (uint64_t)num(&a, "body_ids.0");
    js_free(&a);
    char ss[24], bs[24], ks[24];
    snprintf(ss, sizeof ss, "%llu", (unsigned long long)sphere);
    snprintf(bs, sizeof bs, "%llu", (unsigned long long)box);
    snprintf(ks, sizeof ks, "%llu", (unsigned long long)kin);

    /* Ray casts: straight down onto the sphere's top (z = 3.5), and up. */
    js_value ray = ctl_json("ray", ws, "0,0,10", "0,0,-1", NULL);
    assert_true(at(&ray, "hit")->boolean);
    assert_int_equal(at(&ray, "body_id")->u, sphere);
    assert_float_equal(num(&ray, "distance"), 6.5, 1e-9);
    assert_float_equal(num(&ray, "normal.2"), 1.0, 1e-9);
    js_free(&ray);
    ray = ctl_json("ray", ws, "0,0,10", "0,0,1", NULL);
    assert_false(at(&ray, "hit")->boolean);
    js_free(&ray);
    r = ctl(0, "ray", ws, "0,0,10", "0,0,-1", "2", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "no hit within 2 m\n");
    tool_result_free(&r);

    /* Pose: the part not given is kept. */
    r = ctl(0, "pose", ws, ss, "pos=1,2,3", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "pose set at tick 0"));
    tool_result_free(&r);
    r = ctl(0, "pose", ws, ss, "rot=0,0,0.6,0.8", NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    js_value b = body_json(ws, sphere);
    assert_float_equal(num(&b, "bodies.0.pose.position.1"), 2, 0);
    assert_float_equal(num(&b, "bodies.0.pose.position.2"), 3, 0);
    assert_float_equal(num(&b, "bodies.0.pose.orientation.2"), 0.6, 1e-15);
    assert_float_equal(num(&b, "bodies.0.pose.orientation.3"), 0.8, 1e-15);
    const double m = num(&b, "bodies.0.mass"), inertia = num(&b, "bodies.0.inertia.2");
    js_free(&b);
    const double pi = 3.14159265358979323846;
    assert_float_equal(m, 1000 * 4.0 / 3.0 * pi * 0.125, 1e-9);
    assert_float_equal(inertia, 0.4 * m * 0.25, 1e-9);

    /* Velocity: both parts, then one (the other kept). */
    r = ctl(0, "velocity", ws, ss, "vel=1,0,0", "angvel=0,0,0", NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    r = ctl(0, "velocity", ws, ss, "angvel=0,0,2", NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    /* An impulse of (0, m, 0) N s adds 1 m/s along y. */
    char imp[64];
    snprintf(imp, sizeof imp, "0,%.17g,0", m);
    r = ctl(0, "impulse", ws, ss, imp, NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "impulse applied"));
    tool_result_free(&r);
    b = body_json(ws, sphere);
    assert_float_equal(num(&b, "bodies.0.linear_velocity.0"), 1, 1e-12);
    assert_float_equal(num(&b, "bodies.0.linear_velocity.1"), 1, 1e-12);
    assert_float_equal(num(&b, "bodies.0.linear_velocity.2"), 0, 1e-12);
    assert_float_equal(num(&b, "bodies.0.angular_velocity.2"), 2, 1e-12);
    js_free(&b);

    /* A force of m g upwards for the next step holds v_z at 0 through it;
     * a torque T = 60 I about z adds T h / I = 1 rad/s in that step. */
    char force[64], torque[64];
    snprintf(force, sizeof force, "0,0,%.17g", m * 10);
    snprintf(torque, sizeof torque, "0,0,%.17g", 60 * inertia);
    r = ctl(0, "force", ws, ss, force, NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    r = ctl(0, "torque", ws, ss, torque, NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    /* The kinematic box reaches its target at the end of the step. */
    r = ctl(0, "target", ws, ks, "pos=0,5,2", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "kinematic target set"));
    tool_result_free(&r);
    r = ctl(0, "step", ws, "1", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, ": 1 steps, tick 1"));
    tool_result_free(&r);
    b = body_json(ws, sphere);
    assert_float_equal(num(&b, "bodies.0.linear_velocity.2"), 0, 1e-12);
    assert_float_equal(num(&b, "bodies.0.angular_velocity.2"), 3, 1e-9);
    js_free(&b);
    b = body_json(ws, kin);
    assert_float_equal(num(&b, "bodies.0.pose.position.2"), 2, 1e-12);
    js_free(&b);
    /* The next step has no force: v_z = -g h. */
    r = ctl(0, "step", ws, NULL);
    tool_result_free(&r);
    b = body_json(ws, sphere);
    assert_float_equal(num(&b, "bodies.0.linear_velocity.2"), -10.0 / 60.0, 1e-12);
    js_free(&b);

    /* Joints: add a distance joint, list it, remove it. */
    char aa[40], bb[40];
    snprintf(aa, sizeof aa, "a=%s", ss);
    snprintf(bb, sizeof bb, "b=%s", bs);
    js_value j = ctl_json("joint", "add", ws, "type=distance", aa, bb, NULL);
    uint64_t joint = at(&j, "joint_ids.0")->u;
    assert_true(joint > 0);
    js_free(&j);
    char js_[24];
    snprintf(js_, sizeof js_, "%llu", (unsigned long long)joint);
    j = ctl_json("joint", "list", ws, NULL);
    assert_int_equal(at(&j, "joints")->n, 1);
    assert_int_equal(at(&j, "joints.0.joint_id")->u, joint);
    assert_string_equal(at(&j, "joints.0.def.type")->str, "distance");
    assert_int_equal(at(&j, "joints.0.def.body_a.id")->u, sphere);
    assert_int_equal(at(&j, "joints.0.def.body_b.id")->u, box);
    assert_true(num(&j, "joints.0.def.distance") > 4);
    js_free(&j);
    r = ctl(0, "joint", "list", ws, NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "distance"));
    tool_result_free(&r);
    r = ctl(0, "joint", "add", ws, "type=ball", NULL);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "missing a=BODY"));
    tool_result_free(&r);
    r = ctl(0, "joint", "remove", ws, js_, NULL);
    assert_int_equal(r.code, 0);
    char removed[64];
    snprintf(removed, sizeof removed, "removed 1 joint from world %s\n", ws);
    assert_string_equal(r.out, removed);
    tool_result_free(&r);
    j = ctl_json("joint", "list", ws, NULL);
    assert_null(js_get(&j, "joints"));
    js_free(&j);
    /* A stale id is the server's NOT_FOUND. */
    r = ctl(0, "joint", "remove", ws, js_, NULL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "NOT_FOUND"));
    tool_result_free(&r);

    /* Counters: every field, and the state. */
    js_value k = ctl_json("counters", ws, NULL);
    assert_int_equal((int)num(&k, "tick"), 2);
    assert_int_equal((int)num(&k, "body_count"), 4);
    js_free(&k);
    r = ctl(0, "counters", ws, NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "edits_applied "));
    assert_non_null(strstr(r.out, "\nstate "));
    tool_result_free(&r);
    r = ctl(0, "destroy", ws, NULL);
    tool_result_free(&r);
}

/* Contact events: a box dropped at 240 Hz lands; events --count 1 prints
 * its begin event and ends. */
static void test_events(void **state) {
    (void)state;
    js_value w = ctl_json("create", "--scene", "box_drop", "tick_rate=240", NULL);
    char ws[24];
    snprintf(ws, sizeof ws, "%llu", (unsigned long long)num(&w, "world_id"));
    js_free(&w);
    tool_result r = ctl(0, "events", ws, "--count", "1", "--seconds", "20", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, " begin bodies "));
    tool_result_free(&r);
    r = ctl(0, "destroy", ws, NULL);
    tool_result_free(&r);
}

/* With the server of issue 14: presets listed and suggested; watch on a
 * paused world says so; step cancelled by a reset; load creates the world
 * with its scene under a free name, and reset restores the scene. */
static void test_server_features(void **state) {
    (void)state;
    js_value p = ctl_json("presets", NULL);
    int found = 0;
    for (size_t i = 0; i < at(&p, "presets")->n; i++)
        found |= !strcmp(at(&at(&p, "presets")->items[i], "name")->str, "pyramid20");
    assert_true(found);
    js_free(&p);
    tool_result r = ctl(0, "create", "--scene", "pyramid", NULL);
    assert_int_equal(r.code, 1);
    /* (pyramid20 first; pyramid30 and pyramid40 are as near.) */
    assert_non_null(strstr(r.err, "did you mean 'pyramid20'"));
    tool_result_free(&r);

    /* watch --stats right after pause: "paused at tick N". */
    js_value w = ctl_json("create", "--scene", "stack20", NULL);
    char ws[24];
    snprintf(ws, sizeof ws, "%llu", (unsigned long long)num(&w, "world_id"));
    js_free(&w);
    r = ctl(0, "pause", ws, NULL);
    assert_int_equal(r.code, 0);
    unsigned long long tick = 0;
    assert_int_equal(sscanf(r.out, "world %*u paused at tick %llu", &tick), 1);
    tool_result_free(&r);
    r = ctl(0, "watch", ws, "--stats", "--count", "1", NULL);
    assert_int_equal(r.code, 0);
    char want[64];
    snprintf(want, sizeof want, "paused at tick %llu", tick);
    assert_non_null(strstr(r.out, want));
    tool_result_free(&r);

    /* A long step request cancelled by a reset. */
    char *argv[] = {PHYSCTL_BIN, "--port", port_s, "step", ws, "100000", NULL};
    tool_proc proc;
    assert_int_equal(tool_start(argv, &proc), 0);
    struct timespec half = {0, 500000000};
    nanosleep(&half, NULL);
    r = ctl(0, "reset", ws, NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    tool_wait(&proc, &r);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "of 100000 steps, then cancelled"));
    assert_non_null(strstr(r.err, "CANCELLED after "));
    tool_result_free(&r);
    r = ctl(0, "destroy", ws, NULL);
    tool_result_free(&r);

    /* load: the scene in the create request, a free name, reset restores. */
    char a[128];
    snprintf(a, sizeof a, "%s/scene.json", dir);
    FILE *f = fopen(a, "w");
    fputs(scene_a, f);
    fclose(f);
    js_value l1 = ctl_json("load", a, NULL);
    js_value l2 = ctl_json("load", a, NULL);
    assert_string_equal(at(&l1, "name")->str, "roundtrip");
    assert_string_equal(at(&l2, "name")->str, "roundtrip-2");
    assert_true(at(&l2, "scene")->boolean);
    assert_int_equal((int)num(&l2, "edit_batches"), 0);
    assert_int_equal(at(&l2, "body_ids")->n, 3);
    assert_int_equal(at(&l2, "joint_ids")->n, 1);
    char w1[24], w2[24];
    snprintf(w1, sizeof w1, "%llu", (unsigned long long)num(&l1, "world_id"));
    snprintf(w2, sizeof w2, "%llu", (unsigned long long)num(&l2, "world_id"));
    js_free(&l1);
    js_free(&l2);
    r = ctl(0, "add", w2, "pos=0,0,9", NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    r = ctl(0, "reset", w2, NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    js_value d = ctl_json("dump", w2, NULL);
    assert_int_equal((int)num(&d, "world.body_count"), 3);
    assert_int_equal((int)num(&d, "world.joint_count"), 1);
    js_free(&d);
    r = ctl(0, "destroy", w1, NULL);
    tool_result_free(&r);
    r = ctl(0, "destroy", w2, NULL);
    tool_result_free(&r);
}

static char *slurp_trim(const char *path) {
    char *t = read_all(path);
    assert_non_null(t);
    size_t n = strlen(t);
    while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == ' '))
        t[--n] = 0;
    return t;
}

/* The digits of "state_hash" in physctl stats --json (as text: a 64-bit
 * number does not fit a double). */
static void stats_hash(const char *ws, char *out, size_t n) {
    tool_result r = ctl(1, "stats", ws, NULL);
    assert_int_equal(r.code, 0);
    const char *p = strstr(r.out, "\"state_hash\"");
    assert_non_null(p);
    p = strchr(p, ':') + 1;
    while (*p == ' ' || *p == '"')
        p++;
    size_t k = 0;
    while (k + 1 < n && p[k] >= '0' && p[k] <= '9') {
        out[k] = p[k];
        k++;
    }
    out[k] = 0;
    assert_true(k > 0);
    tool_result_free(&r);
}

/* --history and --at-tick: a velocity sent 5 ticks late to a world with a
 * history gives the world the same state as the same edit on time; a world
 * without one refuses it. */
static void test_late_edit(void **state) {
    (void)state;
    char ws[2][32], ids[2][32];
    for (int k = 0; k < 2; k++) {
        tool_result r = ctl(0, "create", "--scene", "box_on_plane", "--paused", "--history", "16", NULL);
        assert_int_equal(r.code, 0);
        snprintf(ws[k], sizeof ws[k], "%llu", strtoull(r.out, NULL, 10));
        tool_result_free(&r);
        r = ctl(0, "add", ws[k], "shape=sphere", "pos=0,0,3", NULL);
        assert_int_equal(r.code, 0);
        snprintf(ids[k], sizeof ids[k], "%llu", strtoull(r.out, NULL, 10));
        tool_result_free(&r);
    }
    assert_string_equal(ids[0], ids[1]);
    /* World 0: on time at tick 5. World 1: at tick 10, stamped 5. */
    tool_result r = ctl(0, "step", ws[0], "5", NULL);
    tool_result_free(&r);
    r = ctl(0, "velocity", ws[0], ids[0], "vel=2,0,4", NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    r = ctl(0, "step", ws[0], "5", NULL);
    tool_result_free(&r);
    r = ctl(0, "step", ws[1], "10", NULL);
    tool_result_free(&r);
    r = ctl(0, "--at-tick", "5", "velocity", ws[1], ids[1], "vel=2,0,4", NULL);
    if (r.code != 0) fail_msg("late velocity: %s", r.err);
    tool_result_free(&r);
    char h0[32], h1[32];
    stats_hash(ws[0], h0, sizeof h0);
    stats_hash(ws[1], h1, sizeof h1);
    assert_string_equal(h0, h1);
    /* Without a history: refused. */
    r = ctl(0, "create", "--scene", "box_on_plane", "--paused", NULL);
    char w3[32];
    snprintf(w3, sizeof w3, "%llu", strtoull(r.out, NULL, 10));
    tool_result_free(&r);
    r = ctl(0, "step", w3, "10", NULL);
    tool_result_free(&r);
    r = ctl(0, "--at-tick", "5", "add", w3, "shape=sphere", NULL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "FAILED_PRECONDITION"));
    tool_result_free(&r);
}

/* physctl with credentials against a server with access control: the
 * owner token of a new world to a file, a viewer token minted, listed and
 * revoked; PHYSD_TOKEN; the exit codes of refusals (docs/security.md). */
static void test_tokens(void **state) {
    (void)state;
    itest_stop();
    char admin[128], owner[128], viewer[128];
    snprintf(admin, sizeof admin, "%s/admin.token", dir);
    snprintf(owner, sizeof owner, "%s/owner.token", dir);
    snprintf(viewer, sizeof viewer, "%s/viewer.token", dir);
    ps_config cfg;
    itest_config(&cfg);
    snprintf(cfg.admin_token_file, sizeof cfg.admin_token_file, "%s", admin);
    port = itest_start(&cfg);
    snprintf(port_s, sizeof port_s, "%d", port);

    tool_result r = ctl(0, "worlds", NULL);
    assert_int_equal(r.code, 3); /* cannot connect: no credential */
    assert_non_null(strstr(r.err, "refused the credentials"));
    tool_result_free(&r);

    r = ctl(0, "--token-file", admin, "create", "--scene", "box_drop", "--token-out", owner, NULL);
    if (r.code != 0) fail_msg("create: %s", r.err);
    const uint64_t w = strtoull(r.out, NULL, 10);
    assert_true(w > 0);
    tool_result_free(&r);
    struct stat st;
    assert_int_equal(stat(owner, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char ws[32];
    snprintf(ws, sizeof ws, "%llu", (unsigned long long)w);

    r = ctl(0, "--token-file", owner, "token", "create", ws, "--role", "viewer", "--label", "tv", "--token-out", viewer,
            NULL);
    if (r.code != 0) fail_msg("token create: %s", r.err);
    char viewer_id[32];
    snprintf(viewer_id, sizeof viewer_id, "%.16s", r.out);
    assert_int_equal(strlen(viewer_id), 16);
    tool_result_free(&r);

    /* The viewer sees its world and may not pause it. */
    r = ctl(1, "--token-file", viewer, "worlds", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"viewer\""));
    tool_result_free(&r);
    r = ctl(0, "--token-file", viewer, "pause", ws, NULL);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "PERMISSION_DENIED"));
    tool_result_free(&r);

    /* PHYSD_TOKEN: the owner lists the tokens (no secrets) and revokes the viewer's. */
    char *otok = slurp_trim(owner);
    setenv("PHYSD_TOKEN", otok, 1);
    r = ctl(0, "token", "list", ws, NULL);
    unsetenv("PHYSD_TOKEN");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, viewer_id));
    assert_non_null(strstr(r.out, "viewer"));
    assert_null(strstr(r.out, "phd_")); /* never a secret */
    tool_result_free(&r);
    r = ctl(0, "--token-file", owner, "token", "revoke", ws, viewer_id, NULL);
    assert_int_equal(r.code, 0);
    tool_result_free(&r);
    r = ctl(0, "--token-file", viewer, "worlds", NULL);
    assert_int_equal(r.code, 3);
    tool_result_free(&r);
    free(otok);

    itest_stop();
    itest_config(&cfg);
    port = itest_start(&cfg);
    snprintf(port_s, sizeof port_s, "%d", port);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session), cmocka_unit_test(test_load_save),       cmocka_unit_test(test_errors_and_help),
        cmocka_unit_test(test_watch),   cmocka_unit_test(test_suggestions),     cmocka_unit_test(test_edit_commands),
        cmocka_unit_test(test_events),  cmocka_unit_test(test_server_features), cmocka_unit_test(test_late_edit),
        cmocka_unit_test(test_tokens),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
