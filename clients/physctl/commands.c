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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "physctl.h"
#include "scene_file.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
typedef Physd__V1__ServerMessage smsg;

static void free_msg(smsg *m) {
    if (m) physd__v1__server_message__free_unpacked(m, NULL);
}

/* argv[idx] as a world id. */
static int world_arg(ctl *x, int argc, char **argv, int idx, uint64_t *w) {
    if (idx >= argc) return ctl_fail(x, EXIT_USAGE, "missing WORLD (see physctl %s --help)", x->cmd);
    if (ctl_parse_u64(argv[idx], w) || *w == 0) return ctl_fail(x, EXIT_USAGE, "bad world id '%s'", argv[idx]);
    return 0;
}

/* Splits "key=value"; returns 0 or -1 when there is no '='. */
static int split_kv(char *arg, char **key, char **val) {
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg) return -1;
    *eq = 0;
    *key = arg;
    *val = eq + 1;
    return 0;
}

static int simple_world_request(ctl *x, int argc, char **argv, Physd__V1__ClientMessage__RequestCase kind,
                                const char *done) {
    uint64_t w;
    int r = world_arg(x, argc, argv, 1, &w);
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
    free_msg(rep);
    return 0;
}

/* -------------------------------------------------------------- worlds */

static int cmd_worlds(ctl *x, int argc, char **argv) {
    if (argc > 1) return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[1]);
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
    free_msg(rep);
    return 0;
}

/* -------------------------------------------------------------- create */

/* Applies key=value arguments to a Settings message. */
static int apply_settings(ctl *x, Physd__V1__Settings *s, char *arg) {
    char *k, *v, err[256];
    if (split_kv(arg, &k, &v))
        return ctl_fail(x, EXIT_USAGE, "expected key=value, got '%s' (see physctl %s --help)", arg, x->cmd);
    if (pbj_set_text(&s->base, k, v, err, sizeof err)) return ctl_fail(x, EXIT_USAGE, "%s", err);
    return 0;
}

static int cmd_create(ctl *x, int argc, char **argv) {
    const char *preset = NULL, *name = NULL;
    int paused = 0, r = 0;
    Physd__V1__Settings *s = (Physd__V1__Settings *)pbj_new(&physd__v1__settings__descriptor);
    int any = 0;
    for (int i = 1; i < argc && !r; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--scene") || !strcmp(a, "--preset") || !strcmp(a, "--name")) {
            if (i + 1 >= argc) {
                r = ctl_fail(x, EXIT_USAGE, "%s needs a value", a);
                break;
            }
            if (!strcmp(a, "--name"))
                name = argv[++i];
            else
                preset = argv[++i];
        } else if (!strcmp(a, "--paused")) {
            paused = 1;
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
        m.request_case = REQ(CREATE_WORLD);
        m.create_world = &cw;
        smsg *rep;
        r = ctl_call(x, &m, &rep);
        if (!r) {
            if (x->json)
                ctl_print_message(&rep->reply->world->base);
            else
                printf("%llu\n", (unsigned long long)rep->reply->world->world_id);
            free_msg(rep);
        }
    }
    physd__v1__settings__free_unpacked(s, NULL);
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

/* Builds a BodyDef from key=value arguments. */
static int build_body(ctl *x, int argc, char **argv, int first, Physd__V1__BodyDef **out) {
    Physd__V1__BodyDef *b = (Physd__V1__BodyDef *)pbj_new(&physd__v1__body_def__descriptor);
    double mass = -1;
    char err[256];
    int r = 0;
    for (int i = first; i < argc && !r; i++) {
        char *k, *v;
        if (split_kv(argv[i], &k, &v)) {
            r = ctl_fail(x, EXIT_USAGE, "expected key=value, got '%s' (see physctl %s --help)", argv[i], x->cmd);
            break;
        }
        if (!strcmp(k, "mass")) {
            char *end;
            mass = strtod(v, &end);
            if (*end || !(mass > 0)) r = ctl_fail(x, EXIT_USAGE, "mass must be a positive number, got '%s'", v);
            continue;
        }
        const char *path = k;
        for (int a = 0; body_aliases[a].alias; a++)
            if (!strcmp(k, body_aliases[a].alias)) path = body_aliases[a].path;
        if (pbj_set_text(&b->base, path, v, err, sizeof err)) r = ctl_fail(x, EXIT_USAGE, "%s", err);
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

static void print_ids(ctl *x, const char *key, const uint64_t *ids, size_t n, uint64_t world, uint64_t tick) {
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

static int send_edit(ctl *x, uint64_t w, Physd__V1__EditOp **ops, size_t n, smsg **rep) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__EditBatch eb = PHYSD__V1__EDIT_BATCH__INIT;
    eb.world_id = w;
    eb.ops = ops;
    eb.n_ops = n;
    m.request_case = REQ(EDIT);
    m.edit = &eb;
    return ctl_call(x, &m, rep);
}

static int cmd_add(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    Physd__V1__BodyDef *b;
    if ((r = build_body(x, argc, argv, 2, &b))) return r;
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT, *ops = &op;
    Physd__V1__AddBody ab = PHYSD__V1__ADD_BODY__INIT;
    ab.body = b;
    op.op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
    op.add_body = &ab;
    smsg *rep;
    r = send_edit(x, w, &ops, 1, &rep);
    if (!r) {
        print_ids(x, "body_ids", rep->reply->edit->new_ids, rep->reply->edit->n_new_ids, w, rep->reply->tick);
        free_msg(rep);
    }
    physd__v1__body_def__free_unpacked(b, NULL);
    return r;
}

static int cmd_remove(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    if (argc < 3) return ctl_fail(x, EXIT_USAGE, "missing BODY id(s)");
    size_t n = (size_t)argc - 2;
    Physd__V1__EditOp *op = calloc(n, sizeof *op);
    Physd__V1__EditOp **ops = calloc(n, sizeof *ops);
    Physd__V1__RemoveBody *rb = calloc(n, sizeof *rb);
    Physd__V1__BodyRef *ref = calloc(n, sizeof *ref);
    if (!op || !ops || !rb || !ref) r = ctl_fail(x, EXIT_LOST, "out of memory");
    for (size_t i = 0; i < n && !r; i++) {
        uint64_t id;
        if (ctl_parse_u64(argv[i + 2], &id)) {
            r = ctl_fail(x, EXIT_USAGE, "bad body id '%s'", argv[i + 2]);
            break;
        }
        physd__v1__edit_op__init(&op[i]);
        physd__v1__remove_body__init(&rb[i]);
        physd__v1__body_ref__init(&ref[i]);
        ref[i].ref_case = PHYSD__V1__BODY_REF__REF_ID;
        ref[i].id = id;
        rb[i].body = &ref[i];
        op[i].op_case = PHYSD__V1__EDIT_OP__OP_REMOVE_BODY;
        op[i].remove_body = &rb[i];
        ops[i] = &op[i];
    }
    smsg *rep = NULL;
    if (!r) r = send_edit(x, w, ops, n, &rep);
    if (!r) {
        if (x->json) {
            print_ids(x, "removed", NULL, 0, w, rep->reply->tick);
        } else {
            printf("removed %zu bod%s from world %llu\n", n, n == 1 ? "y" : "ies", (unsigned long long)w);
        }
    }
    free_msg(rep);
    free(op);
    free(ops);
    free(rb);
    free(ref);
    return r;
}

/* ----------------------------------------------------------------- set */

static int cmd_set(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = world_arg(x, argc, argv, 1, &w);
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
            free_msg(rep);
        }
    }
    free_msg(cur);
    physd__v1__settings__free_unpacked(s, NULL);
    return r;
}

/* ---------------------------------------------------------------- step */

static int cmd_step(ctl *x, int argc, char **argv) {
    uint64_t w, n = 1;
    int r = world_arg(x, argc, argv, 1, &w);
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
    if ((r = ctl_call(x, &m, &rep))) return r;
    uint64_t done = rep->reply->payload_case == PHYSD__V1__REPLY__PAYLOAD_STEP ? rep->reply->step->steps_done : 0;
    if (x->json) {
        jw j;
        jw_init(&j, 1);
        jw_object(&j);
        jw_key(&j, "world_id");
        jw_uint(&j, w);
        jw_key(&j, "steps_done");
        jw_uint(&j, done);
        jw_key(&j, "tick");
        jw_uint(&j, rep->reply->tick);
        jw_object_end(&j);
        ctl_print_json(&j);
        jw_free(&j);
    } else {
        printf("world %llu: %llu steps, tick %llu\n", (unsigned long long)w, (unsigned long long)done,
               (unsigned long long)rep->reply->tick);
    }
    free_msg(rep);
    return 0;
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
    printf("merits: fischer %.3e  minmap %.3e  rel_residual %.3e  lcp_error %.3e m/s  max_penetration %.3e m\n",
           s->fischer_final, s->minmap_final, s->rel_residual, s->lcp_error_final, s->max_penetration);
    printf("collision: pairs %u  manifolds %u (%u reused by the contact cache)  awake bodies %u  islands %u\n",
           s->pairs, s->manifolds, s->manifolds_reused, s->awake_bodies, s->islands);
    if (s->n_stage_ms >= 5)
        printf("ms: broadphase %.3f  narrowphase %.3f  rows %.3f  solve %.3f  integrate %.3f  total %.3f\n",
               s->stage_ms[0], s->stage_ms[1], s->stage_ms[2], s->stage_ms[3], s->stage_ms[4], s->total_ms);
}

static int cmd_stats(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = world_arg(x, argc, argv, 1, &w);
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
            free_msg(rep);
            return r;
        }
        free_msg(srep);
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
        if (!sw.got) fprintf(stderr, "physctl stats: no solver statistics within 2 s (is the world paused?)\n");
    }
    const Physd__V1__WorldCounters *k = rep->reply->counters;
    if (x->json) {
        jw j;
        jw_init(&j, 1);
        jw_object(&j);
        jw_key(&j, "world_id");
        jw_uint(&j, w);
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
        if (sw.got) print_stats_text(sw.got->stats);
    }
    free_msg(sw.got);
    free_msg(rep);
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
        free_msg(*world);
        *world = NULL;
    }
    return r;
}

static int cmd_dump(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = world_arg(x, argc, argv, 1, &w);
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
    free_msg(world);
    free_msg(bodies);
    return 0;
}

static int cmd_save(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = world_arg(x, argc, argv, 1, &w);
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
                while (k < n && bodies->reply->bodies->bodies[k]->body_id != refs[e]->id) k++;
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
            printf("saved world %llu (%zu bodies, %zu joints) to %s\n", (unsigned long long)w, s.n_bodies,
                   s.n_joints, argv[2]);
        }
    }
    for (size_t i = 0; i < s.n_bodies; i++)
        physd__v1__body_def__free_unpacked(s.bodies[i], NULL);
    free(s.bodies);
    for (size_t i = 0; i < s.n_joints; i++)
        physd__v1__joint_def__free_unpacked(s.joints[i], NULL);
    free(s.joints);
    free_msg(joints);
    free_msg(world);
    free_msg(bodies);
    return r;
}

/* ---------------------------------------------------------------- load */

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
    /* The world starts paused, gets its bodies and joints in one batch at
     * its first tick boundary, and then runs unless it should stay paused. */
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__CreateWorld cw = PHYSD__V1__CREATE_WORLD__INIT;
    cw.name = (char *)(name ? name : s.name ? s.name : "");
    cw.preset = s.preset ? s.preset : "";
    cw.settings = s.settings;
    cw.start_paused = 1;
    m.request_case = REQ(CREATE_WORLD);
    m.create_world = &cw;
    smsg *rep = NULL, *erep = NULL, *rrep = NULL;
    int r = ctl_call(x, &m, &rep);
    uint64_t w = r ? 0 : rep->reply->world->world_id;
    Physd__V1__EditOp *op = calloc(nops ? nops : 1, sizeof *op);
    Physd__V1__EditOp **ops = calloc(nops ? nops : 1, sizeof *ops);
    Physd__V1__AddBody *ab = calloc(s.n_bodies ? s.n_bodies : 1, sizeof *ab);
    Physd__V1__AddJoint *aj = calloc(s.n_joints ? s.n_joints : 1, sizeof *aj);
    if (!r && (!op || !ops || !ab || !aj)) r = ctl_fail(x, EXIT_LOST, "out of memory");
    if (!r && nops) {
        for (size_t i = 0; i < s.n_bodies; i++) {
            physd__v1__edit_op__init(&op[i]);
            physd__v1__add_body__init(&ab[i]);
            ab[i].body = s.bodies[i];
            op[i].op_case = PHYSD__V1__EDIT_OP__OP_ADD_BODY;
            op[i].add_body = &ab[i];
            ops[i] = &op[i];
        }
        for (size_t i = 0; i < s.n_joints; i++) {
            size_t k = s.n_bodies + i;
            physd__v1__edit_op__init(&op[k]);
            physd__v1__add_joint__init(&aj[i]);
            aj[i].joint = s.joints[i];
            op[k].op_case = PHYSD__V1__EDIT_OP__OP_ADD_JOINT;
            op[k].add_joint = &aj[i];
            ops[k] = &op[k];
        }
        r = send_edit(x, w, ops, nops, &erep);
    }
    if (!r && !paused) {
        Physd__V1__ClientMessage rm = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__ResumeWorld rw = PHYSD__V1__RESUME_WORLD__INIT;
        rw.world_id = w;
        rm.request_case = REQ(RESUME);
        rm.resume = &rw;
        r = ctl_call(x, &rm, &rrep);
    }
    if (!r) {
        if (x->json) {
            jw j;
            jw_init(&j, 1);
            jw_object(&j);
            jw_key(&j, "world_id");
            jw_uint(&j, w);
            jw_key(&j, "body_ids");
            jw_array_inline(&j);
            for (size_t i = 0; erep && i < s.n_bodies; i++)
                jw_uint(&j, erep->reply->edit->new_ids[i]);
            jw_array_end(&j);
            jw_key(&j, "joint_ids");
            jw_array_inline(&j);
            for (size_t i = 0; erep && i < s.n_joints; i++)
                jw_uint(&j, erep->reply->edit->new_ids[s.n_bodies + i]);
            jw_array_end(&j);
            jw_key(&j, "paused");
            jw_bool(&j, paused);
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
    free(op);
    free(ops);
    free(ab);
    free(aj);
    free_msg(rep);
    free_msg(erep);
    free_msg(rrep);
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
        free_msg(rep);
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

#define SETTINGS_HELP                                                                                                  \
    "Settings are key=value pairs named as in the protocol's Settings message (docs/protocol.md):\n"                   \
    "  time_step substeps iterations tolerance gravity=x,y,z contact=k,d,hertz friction=k,d,hertz\n"                   \
    "  joint=k,d,hertz friction_model=ncp|scaled_box method=pgs|pgs_sm|block_pgs|jacobi|direct\n"                      \
    "  ordering=default|gravity|random|complementarity|effective_mass ordering_per_iteration warm_start\n"             \
    "  warm_start_factor restitution_threshold contact_margin gyroscopic record_merits seed tick_rate\n"               \
    "  k_pgs k_sm cg_tolerance sm_gamma sm_gamma_scope=all|friction sm_stagnation jacobi_relaxation\n"                 \
    "  sm_preconditioner=0|1|2 (none, diagonal, IC(0)) sm_forcing sleep sleep_linear sleep_angular sleep_time\n"       \
    "  collide_substeps joint_projection vector_solver joint_solver=gs|direct contact_cache_tolerance\n"               \
    "  contact_block\n"                                                                                              \
    "A dotted key changes one part: contact.hertz=30, gravity.z=-1.62. Booleans: true/false.\n"

const command physctl_commands[] = {
    {"worlds", "", "list the worlds", "Prints id, name, preset, state, tick and counts of every world.\n", cmd_worlds},
    {"create", "[--scene NAME] [--name N] [--paused] [key=value...]", "create a world; prints its id",
     "--scene NAME (or --preset) builds a built-in scene (docs/scenes.md: stack20, pyramid20, chain30, box_drop, "
     "...).\n" SETTINGS_HELP "Example: physctl create --scene stack20 --name demo iterations=20 tick_rate=120\n",
     cmd_create},
    {"destroy", "WORLD", "destroy a world", "", cmd_destroy},
    {"add", "WORLD [key=value...]", "add a body; prints its id",
     "Keys: type=dynamic|static|kinematic, shape=sphere|box|capsule|plane, radius=R, half=x,y,z (box half\n"
     "extents), half_height=H (capsule), normal=x,y,z and offset=D (plane), mass=M (sets the density of the\n"
     "single shape so that the body's mass is M), density, friction, restitution, pos=x,y,z, rot=x,y,z,w\n"
     "(quaternion), vel=x,y,z, angvel=x,y,z, and any BodyDef field by path (linear_damping=0.1,\n"
     "gravity_scale=0, mass.mass=2 mass.inertia=1,1,1, shapes.1.type=box shapes.1.local.position=0,0,1).\n"
     "Without shape=, the body is a sphere of radius 0.5.\n"
     "Example: physctl add 1 shape=box half=0.5,0.5,0.5 mass=2 pos=0,0,3\n",
     cmd_add},
    {"remove", "WORLD BODY...", "remove bodies (with their shapes and joints)", "", cmd_remove},
    {"set", "WORLD key=value...", "change world or solver settings",
     SETTINGS_HELP "Changes apply from the next step; prints the resulting values.\n"
                   "Example: physctl set 1 iterations=20 method=pgs_sm contact.hertz=30\n",
     cmd_set},
    {"pause", "WORLD", "stop a world's clock", "", cmd_pause},
    {"resume", "WORLD", "restart a world's clock", "", cmd_resume},
    {"step", "WORLD [N]", "run N steps (default 1) of a paused world",
     "The reply comes once the steps are done; prints the new tick.\n", cmd_step},
    {"reset", "WORLD", "rebuild a world from its creation request", "", cmd_reset},
    {"watch", "WORLD [--stats] [--every K] [--bodies N] [--seconds S] [--count N]",
     "live view of bodies or convergence statistics",
     "Bodies (default): subscribes to transform frames every K-th tick (default 6) and shows the first N\n"
     "bodies (default 20) with position and orientation, updating in place on a terminal.\n"
     "--stats: subscribes to solver statistics with per-iteration merits and draws the Fischer-Burmeister\n"
     "merit per iteration as a text plot (log scale), with the method, rows, contacts and stage times.\n"
     "Stops after S seconds or N updates if given, on Ctrl-C, or when the world is destroyed.\n"
     "With --json, prints one JSON object per update (one per line).\n",
     physctl_watch},
    {"stats", "WORLD [--solver]", "world counters (and the next step's solver statistics)",
     "--solver also waits (up to 2 s) for the next step's statistics with per-iteration merits.\n", cmd_stats},
    {"dump", "WORLD [--shapes]", "the world and every body's state as JSON",
     "Prints {\"world\": WorldInfo, \"bodies\": [BodyState...]} with every field (docs/protocol.md);\n"
     "--shapes includes each body's shapes.\n",
     cmd_dump},
    {"load", "FILE [--name N] [--paused|--running]", "create a world from a scene file; prints its id",
     "The scene file format is described in docs/clients.md. The world is created paused, the bodies and\n"
     "joints are added in one atomic batch, then it runs unless the file says \"paused\": true (or --paused).\n",
     cmd_load},
    {"save", "WORLD FILE", "write a world to a scene file",
     "Writes the settings and every body (pose, velocities, shapes, mass and inertia) in the format of\n"
     "docs/clients.md. Joints, damping and gravity scale cannot be read back through the protocol and are\n"
     "not saved (a warning names the joints).\n",
     cmd_save},
    {"ping", "[N]", "round-trip time to the server", "", cmd_ping},
    {NULL, NULL, NULL, NULL, NULL},
};
