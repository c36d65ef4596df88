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
 * stderr; --help for every command.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

    const char *cmds[] = {"worlds", "create", "destroy", "add",  "remove", "set",  "pause", "resume", "step",
                          "reset",  "watch",  "stats",   "dump", "load",   "save", "ping",  NULL};
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session),
        cmocka_unit_test(test_load_save),
        cmocka_unit_test(test_errors_and_help),
        cmocka_unit_test(test_watch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
