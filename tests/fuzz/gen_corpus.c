/*
 * gen_corpus.c — writes the fuzz target's seed corpus: one file per client
 * session, each a sequence of length-delimited ClientMessage frames (varint
 * length + message), exactly what a client writes on its socket. Every
 * request type and every EditOp kind appears; most sessions are several
 * frames (hello first, then the requests), a few are malformed on purpose.
 *
 * Each fuzz session runs against a server with no worlds whose id counters
 * start again at 1 (fuzz_harness.c), so the first world of a session is
 * world 1, and a new world's first bodies have the ids below.
 *
 * Usage: fuzz_gen_corpus DIR   (writes DIR/<name>.bin, overwriting)
 * Regenerate after a protocol change and commit the files.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physd/v1/physd.pb-c.h"
#include "pw_frame.h"

#define REQ(x) PHYSD__V1__CLIENT_MESSAGE__REQUEST_##x
typedef Physd__V1__ClientMessage cmsg;

/* Body ids of a fresh world: (generation << 32) | (slot + 1). Generation 1
 * (see the replies of fuzz_replay -v corpus/edit_add_body.bin). */
#define BODY(i) (((uint64_t)1 << 32) | (uint64_t)(i))
#define JOINT(i) (((uint64_t)1 << 32) | (uint64_t)(i))

/* ---------------------------------------------------------------- output */

static const char *outdir;
static uint8_t *sbuf;
static size_t slen, scap;
static uint64_t rid;
static int nfiles;

static void put(const void *p, size_t n) {
    if (slen + n > scap) {
        size_t nc = scap ? scap : 4096;
        while (nc < slen + n)
            nc *= 2;
        sbuf = realloc(sbuf, nc);
        if (!sbuf) abort();
        scap = nc;
    }
    memcpy(sbuf + slen, p, n);
    slen += n;
}

static void put_varint(uint64_t v) {
    uint8_t b[PW_VARINT_MAX];
    put(b, pw_varint_put(b, v));
}

static void frame(const cmsg *m) {
    uint8_t *tmp = NULL;
    size_t n = 0;
    if (pw_frame_encode(&m->base, UINT64_MAX, &tmp, &n) < 0) abort();
    put(tmp, n);
    free(tmp);
}

/* A tiny arena for the nested messages of one session. */
static void *arena[4096];
static int narena;

static void *alloc(size_t n) {
    if (narena == (int)(sizeof arena / sizeof arena[0])) abort();
    void *p = calloc(1, n);
    if (!p) abort();
    arena[narena++] = p;
    return p;
}

static void begin(void) {
    slen = 0;
    rid = 0;
}

static void end(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.bin", outdir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(sbuf, 1, slen, f) != slen || fclose(f) != 0) {
        fprintf(stderr, "fuzz_gen_corpus: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    for (int i = 0; i < narena; i++)
        free(arena[i]);
    narena = 0;
    nfiles++;
}

/* ------------------------------------------------------------- messages */

static cmsg *msg(int kind) {
    cmsg *m = alloc(sizeof *m);
    physd__v1__client_message__init(m);
    m->request_id = ++rid;
    m->request_case = (Physd__V1__ClientMessage__RequestCase)kind;
    return m;
}

static Physd__V1__Vec3 *v3(double x, double y, double z) {
    Physd__V1__Vec3 *v = alloc(sizeof *v);
    physd__v1__vec3__init(v);
    v->x = x, v->y = y, v->z = z;
    return v;
}

static Physd__V1__Quat *quat(double x, double y, double z, double w) {
    Physd__V1__Quat *q = alloc(sizeof *q);
    physd__v1__quat__init(q);
    q->x = x, q->y = y, q->z = z, q->w = w;
    return q;
}

static Physd__V1__Pose *pose(Physd__V1__Vec3 *p, Physd__V1__Quat *q) {
    Physd__V1__Pose *o = alloc(sizeof *o);
    physd__v1__pose__init(o);
    o->position = p;
    o->orientation = q;
    return o;
}

static Physd__V1__DoubleValue *dv(double x) {
    Physd__V1__DoubleValue *v = alloc(sizeof *v);
    physd__v1__double_value__init(v);
    v->value = x;
    return v;
}

static Physd__V1__Int32Value *iv(int32_t x) {
    Physd__V1__Int32Value *v = alloc(sizeof *v);
    physd__v1__int32_value__init(v);
    v->value = x;
    return v;
}

static Physd__V1__BoolValue *bv(int x) {
    Physd__V1__BoolValue *v = alloc(sizeof *v);
    physd__v1__bool_value__init(v);
    v->value = x != 0;
    return v;
}

static Physd__V1__UInt64Value *uv(uint64_t x) {
    Physd__V1__UInt64Value *v = alloc(sizeof *v);
    physd__v1__uint64_value__init(v);
    v->value = x;
    return v;
}

static Physd__V1__Spook *spook(double k, double d, double hz) {
    Physd__V1__Spook *s = alloc(sizeof *s);
    physd__v1__spook__init(s);
    s->k = k, s->d = d, s->hertz = hz;
    return s;
}

/* Every Settings field, each a valid value different from the default. */
static Physd__V1__Settings *settings_full(int method) {
    Physd__V1__Settings *s = alloc(sizeof *s);
    physd__v1__settings__init(s);
    s->time_step = dv(1.0 / 120);
    s->substeps = iv(3);
    s->iterations = iv(4);
    s->tolerance = dv(1e-9);
    s->gravity = v3(0, 0, -5);
    s->contact = spook(1e7, 4, 30);
    s->friction = spook(1e9, 4, 0);
    s->joint = spook(1e9, 3, 50);
    Physd__V1__FrictionModelValue *fm = alloc(sizeof *fm);
    physd__v1__friction_model_value__init(fm);
    fm->value = PHYSD__V1__FRICTION_MODEL__FRICTION_SCALED_BOX;
    s->friction_model = fm;
    Physd__V1__MethodValue *me = alloc(sizeof *me);
    physd__v1__method_value__init(me);
    me->value = (Physd__V1__Method)method;
    s->method = me;
    Physd__V1__OrderingValue *o = alloc(sizeof *o);
    physd__v1__ordering_value__init(o);
    o->value = PHYSD__V1__ORDERING__ORDER_RANDOM;
    s->ordering = o;
    s->warm_start = bv(1);
    s->warm_start_factor = dv(0.9);
    s->restitution_threshold = dv(0.5);
    s->contact_margin = dv(0.01);
    s->gyroscopic = bv(0);
    s->record_merits = bv(1);
    s->seed = uv(7);
    s->tick_rate = dv(30);
    s->ordering_per_iteration = bv(1);
    s->k_pgs = iv(10);
    s->k_sm = iv(3);
    s->cg_tolerance = dv(1e-10);
    s->sm_gamma = dv(0.1);
    Physd__V1__GammaScopeValue *gs = alloc(sizeof *gs);
    physd__v1__gamma_scope_value__init(gs);
    gs->value = PHYSD__V1__GAMMA_SCOPE__GAMMA_FRICTION;
    s->sm_gamma_scope = gs;
    s->sm_stagnation = dv(1e-2);
    s->jacobi_relaxation = dv(0.8);
    s->sleep = bv(1);
    s->sleep_linear = dv(0.1);
    s->sleep_angular = dv(0.1);
    s->sleep_time = dv(0.25);
    s->collide_substeps = bv(1);
    s->joint_projection = iv(1);
    s->vector_solver = bv(0);
    s->sm_preconditioner = iv(2);
    s->sm_forcing = dv(0.05);
    Physd__V1__JointSolverValue *js = alloc(sizeof *js);
    physd__v1__joint_solver_value__init(js);
    js->value = PHYSD__V1__JOINT_SOLVER__JOINT_SOLVER_GS;
    s->joint_solver = js;
    s->contact_cache_tolerance = dv(0);
    s->contact_block = bv(0);
    s->max_step_work = uv(1000000);
    return s;
}

/* ---------------------------------------------------------------- shapes */

static Physd__V1__ShapeDef *shape(int type) {
    Physd__V1__ShapeDef *s = alloc(sizeof *s);
    physd__v1__shape_def__init(s);
    s->type = (Physd__V1__ShapeType)type;
    return s;
}

static Physd__V1__ShapeDef *sphere(double r) {
    Physd__V1__ShapeDef *s = shape(PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE);
    s->radius = dv(r);
    s->friction = dv(0.4);
    s->restitution = 0.2;
    return s;
}

static Physd__V1__ShapeDef *box(double x, double y, double z) {
    Physd__V1__ShapeDef *s = shape(PHYSD__V1__SHAPE_TYPE__SHAPE_BOX);
    s->half_extents = v3(x, y, z);
    s->density = dv(500);
    return s;
}

static Physd__V1__ShapeDef *capsule(double r, double hh) {
    Physd__V1__ShapeDef *s = shape(PHYSD__V1__SHAPE_TYPE__SHAPE_CAPSULE);
    s->radius = dv(r);
    s->half_height = dv(hh);
    s->local = pose(v3(0, 0, 0.1), quat(0, 0, 0.2, 1));
    return s;
}

static Physd__V1__ShapeDef *plane(void) {
    Physd__V1__ShapeDef *s = shape(PHYSD__V1__SHAPE_TYPE__SHAPE_PLANE);
    s->normal = v3(0, 0, 1);
    s->offset = 0;
    return s;
}

/* ----------------------------------------------------------------- edits */

static Physd__V1__BodyRef *ref_new(uint32_t op) {
    Physd__V1__BodyRef *r = alloc(sizeof *r);
    physd__v1__body_ref__init(r);
    r->ref_case = PHYSD__V1__BODY_REF__REF_NEW_BODY_OP;
    r->new_body_op = op;
    return r;
}

static Physd__V1__BodyRef *ref_id(uint64_t id) {
    Physd__V1__BodyRef *r = alloc(sizeof *r);
    physd__v1__body_ref__init(r);
    r->ref_case = PHYSD__V1__BODY_REF__REF_ID;
    r->id = id;
    return r;
}

static Physd__V1__EditOp *op(int kind) {
    Physd__V1__EditOp *o = alloc(sizeof *o);
    physd__v1__edit_op__init(o);
    o->op_case = (Physd__V1__EditOp__OpCase)kind;
    return o;
}

#define OP(x) PHYSD__V1__EDIT_OP__OP_##x

/* type: 0 dynamic, 1 static, 2 kinematic; one shape. */
static Physd__V1__EditOp *add_body(int type, double x, double y, double z, Physd__V1__ShapeDef *s) {
    Physd__V1__BodyDef *b = alloc(sizeof *b);
    physd__v1__body_def__init(b);
    b->type = (Physd__V1__BodyType)type;
    b->pose = pose(v3(x, y, z), NULL);
    b->shapes = alloc(sizeof *b->shapes);
    b->shapes[0] = s;
    b->n_shapes = 1;
    Physd__V1__AddBody *a = alloc(sizeof *a);
    physd__v1__add_body__init(a);
    a->body = b;
    Physd__V1__EditOp *o = op(OP(ADD_BODY));
    o->add_body = a;
    return o;
}

/* A dynamic body with two shapes, explicit mass, velocities and damping. */
static Physd__V1__EditOp *add_body_full(void) {
    Physd__V1__EditOp *o = add_body(0, 0, 0, 2, box(0.5, 0.25, 0.25));
    Physd__V1__BodyDef *b = o->add_body->body;
    b->shapes = alloc(2 * sizeof *b->shapes);
    b->shapes[0] = box(0.5, 0.25, 0.25);
    b->shapes[1] = sphere(0.3);
    b->n_shapes = 2;
    b->pose->orientation = quat(0.1, 0, 0, 1);
    b->linear_velocity = v3(1, 0, 0);
    b->angular_velocity = v3(0, 0, 1);
    b->linear_damping = 0.1;
    b->angular_damping = 0.2;
    b->gravity_scale = dv(0.5);
    b->user_data = 42;
    Physd__V1__MassProperties *mp = alloc(sizeof *mp);
    physd__v1__mass_properties__init(mp);
    mp->mass = 3;
    mp->inertia = v3(0.5, 0.6, 0.7);
    b->mass = mp;
    return o;
}

static Physd__V1__EditOp *remove_body(Physd__V1__BodyRef *r) {
    Physd__V1__RemoveBody *x = alloc(sizeof *x);
    physd__v1__remove_body__init(x);
    x->body = r;
    Physd__V1__EditOp *o = op(OP(REMOVE_BODY));
    o->remove_body = x;
    return o;
}

static Physd__V1__EditOp *set_pose(Physd__V1__BodyRef *r) {
    Physd__V1__SetPose *x = alloc(sizeof *x);
    physd__v1__set_pose__init(x);
    x->body = r;
    x->pose = pose(v3(1, 2, 3), quat(0, 0, 0.3826834, 0.9238795));
    Physd__V1__EditOp *o = op(OP(SET_POSE));
    o->set_pose = x;
    return o;
}

static Physd__V1__EditOp *set_velocity(Physd__V1__BodyRef *r) {
    Physd__V1__SetVelocity *x = alloc(sizeof *x);
    physd__v1__set_velocity__init(x);
    x->body = r;
    x->linear = v3(0, 1, 2);
    x->angular = v3(0.5, 0, 0);
    Physd__V1__EditOp *o = op(OP(SET_VELOCITY));
    o->set_velocity = x;
    return o;
}

static Physd__V1__EditOp *apply_force(Physd__V1__BodyRef *r, int with_point) {
    Physd__V1__ApplyForce *x = alloc(sizeof *x);
    physd__v1__apply_force__init(x);
    x->body = r;
    x->force = v3(10, 0, 0);
    if (with_point) x->point = v3(0, 0, 1);
    Physd__V1__EditOp *o = op(OP(APPLY_FORCE));
    o->apply_force = x;
    return o;
}

static Physd__V1__EditOp *apply_torque(Physd__V1__BodyRef *r) {
    Physd__V1__ApplyTorque *x = alloc(sizeof *x);
    physd__v1__apply_torque__init(x);
    x->body = r;
    x->torque = v3(0, 0, 5);
    Physd__V1__EditOp *o = op(OP(APPLY_TORQUE));
    o->apply_torque = x;
    return o;
}

static Physd__V1__EditOp *apply_impulse(Physd__V1__BodyRef *r, int with_point) {
    Physd__V1__ApplyImpulse *x = alloc(sizeof *x);
    physd__v1__apply_impulse__init(x);
    x->body = r;
    x->impulse = v3(0, 3, 0);
    if (with_point) x->point = v3(0.1, 0, 1);
    Physd__V1__EditOp *o = op(OP(APPLY_IMPULSE));
    o->apply_impulse = x;
    return o;
}

static Physd__V1__EditOp *set_kinematic_target(Physd__V1__BodyRef *r) {
    Physd__V1__SetKinematicTarget *x = alloc(sizeof *x);
    physd__v1__set_kinematic_target__init(x);
    x->body = r;
    x->pose = pose(v3(0, 0, 1.5), quat(0, 0.1, 0, 1));
    Physd__V1__EditOp *o = op(OP(SET_KINEMATIC_TARGET));
    o->set_kinematic_target = x;
    return o;
}

static Physd__V1__EditOp *add_joint(int type, Physd__V1__BodyRef *a, Physd__V1__BodyRef *b) {
    Physd__V1__JointDef *j = alloc(sizeof *j);
    physd__v1__joint_def__init(j);
    j->type = (Physd__V1__JointType)type;
    j->body_a = a;
    j->body_b = b;
    j->anchor_a = v3(0, 0, 0.5);
    j->anchor_b = v3(0, 0, -0.5);
    if (type == PHYSD__V1__JOINT_TYPE__JOINT_HINGE) {
        j->axis_a = v3(1, 0, 0);
        j->axis_b = v3(1, 0, 0);
        j->enable_limit = 1;
        j->lower_angle = dv(-0.5);
        j->upper_angle = dv(0.5);
        j->enable_motor = 1;
        j->motor_speed = 1;
        j->max_motor_torque = 10;
    }
    if (type == PHYSD__V1__JOINT_TYPE__JOINT_DISTANCE) j->distance = dv(1.5);
    Physd__V1__AddJoint *x = alloc(sizeof *x);
    physd__v1__add_joint__init(x);
    x->joint = j;
    Physd__V1__EditOp *o = op(OP(ADD_JOINT));
    o->add_joint = x;
    return o;
}

static Physd__V1__EditOp *remove_joint(uint64_t id) {
    Physd__V1__RemoveJoint *x = alloc(sizeof *x);
    physd__v1__remove_joint__init(x);
    x->joint = id;
    Physd__V1__EditOp *o = op(OP(REMOVE_JOINT));
    o->remove_joint = x;
    return o;
}

/* -------------------------------------------------------------- requests */

static void hello_v(uint32_t version, const char *name) {
    cmsg *m = msg(REQ(HELLO));
    Physd__V1__Hello *h = alloc(sizeof *h);
    physd__v1__hello__init(h);
    h->protocol_version = version;
    h->client_name = (char *)name;
    m->hello = h;
    frame(m);
}

static void hello(void) { hello_v(1, "fuzz-seed"); }

/* A hello with credentials (tokens or garbage). */
static void hello_cred(const char *cred) {
    cmsg *m = msg(REQ(HELLO));
    Physd__V1__Hello *h = alloc(sizeof *h);
    physd__v1__hello__init(h);
    h->protocol_version = 1;
    h->client_name = "fuzz-cred";
    h->credentials.data = (uint8_t *)cred;
    h->credentials.len = strlen(cred);
    m->hello = h;
    frame(m);
}

static void create_token(uint64_t w, int role, const char *label) {
    cmsg *m = msg(REQ(CREATE_TOKEN));
    Physd__V1__CreateToken *x = alloc(sizeof *x);
    physd__v1__create_token__init(x);
    x->world_id = w;
    x->role = (Physd__V1__Role)role;
    x->label = (char *)label;
    m->create_token = x;
    frame(m);
}

static void take_snapshot(uint64_t w) {
    cmsg *m = msg(REQ(TAKE_SNAPSHOT));
    Physd__V1__TakeSnapshot *x = alloc(sizeof *x);
    physd__v1__take_snapshot__init(x);
    x->world_id = w;
    m->take_snapshot = x;
    frame(m);
}

/* Worlds that move (docs/fleet.md). The fuzzed server makes no outgoing
 * connections (no_outgoing): MigrateWorld and Drain are checked and
 * refused; ImportWorld runs in full. */
static void migrate_world(uint64_t w, const char *target, const char *cred) {
    cmsg *m = msg(REQ(MIGRATE_WORLD));
    Physd__V1__MigrateWorld *x = alloc(sizeof *x);
    physd__v1__migrate_world__init(x);
    x->world_id = w;
    x->target = (char *)target;
    x->credentials.data = (uint8_t *)cred;
    x->credentials.len = cred ? strlen(cred) : 0;
    m->migrate_world = x;
    frame(m);
}

static void drain(const char *target, int exit_after) {
    cmsg *m = msg(REQ(DRAIN));
    Physd__V1__Drain *x = alloc(sizeof *x);
    physd__v1__drain__init(x);
    x->target = (char *)target;
    x->exit = exit_after;
    m->drain = x;
    frame(m);
}

static void import_world(uint64_t w, uint64_t mig, int phase, const void *data, size_t len, uint32_t part,
                         uint32_t parts) {
    cmsg *m = msg(REQ(IMPORT_WORLD));
    Physd__V1__ImportWorld *x = alloc(sizeof *x);
    Physd__V1__WorldCounters *wc = alloc(sizeof *wc);
    physd__v1__import_world__init(x);
    physd__v1__world_counters__init(wc);
    wc->edits_applied = 5;
    wc->uptime_s = 12.5;
    x->world_id = w;
    x->migration_id = mig;
    x->phase = (Physd__V1__ImportPhase)phase;
    x->data.data = (uint8_t *)data;
    x->data.len = len;
    x->part = part;
    x->parts = parts;
    x->source = "10.0.0.1:7447";
    x->history_ticks = 4;
    x->counters = wc;
    m->import_world = x;
    frame(m);
}

static void restore_world(const char *name, const void *data, size_t len, uint64_t upload, uint32_t part,
                          uint32_t parts) {
    cmsg *m = msg(REQ(RESTORE_WORLD));
    Physd__V1__RestoreWorld *x = alloc(sizeof *x);
    physd__v1__restore_world__init(x);
    x->name = (char *)name;
    x->data.data = (uint8_t *)data;
    x->data.len = len;
    x->upload_id = upload;
    x->part = part;
    x->parts = parts;
    m->restore_world = x;
    frame(m);
}

static void revoke_token(uint64_t w, const char *id) {
    cmsg *m = msg(REQ(REVOKE_TOKEN));
    Physd__V1__RevokeToken *x = alloc(sizeof *x);
    physd__v1__revoke_token__init(x);
    x->world_id = w;
    x->token_id = (char *)id;
    m->revoke_token = x;
    frame(m);
}

static void ping(const char *payload) {
    cmsg *m = msg(REQ(PING));
    Physd__V1__Ping *p = alloc(sizeof *p);
    physd__v1__ping__init(p);
    p->payload.data = (uint8_t *)payload;
    p->payload.len = strlen(payload);
    m->ping = p;
    frame(m);
}

static void create(const char *name, const char *preset, int paused, Physd__V1__Settings *s, Physd__V1__EditOp **ops,
                   size_t nops) {
    cmsg *m = msg(REQ(CREATE_WORLD));
    Physd__V1__CreateWorld *c = alloc(sizeof *c);
    physd__v1__create_world__init(c);
    c->name = (char *)name;
    c->preset = (char *)preset;
    c->start_paused = paused != 0;
    c->settings = s;
    c->scene = ops;
    c->n_scene = nops;
    m->create_world = c;
    frame(m);
}

static void list_worlds(void) {
    cmsg *m = msg(REQ(LIST_WORLDS));
    Physd__V1__ListWorlds *x = alloc(sizeof *x);
    physd__v1__list_worlds__init(x);
    m->list_worlds = x;
    frame(m);
}

static void list_presets(void) {
    cmsg *m = msg(REQ(LIST_PRESETS));
    Physd__V1__ListPresets *x = alloc(sizeof *x);
    physd__v1__list_presets__init(x);
    m->list_presets = x;
    frame(m);
}

static void inspect(uint64_t w, int bodies) {
    cmsg *m = msg(REQ(INSPECT_WORLD));
    Physd__V1__InspectWorld *x = alloc(sizeof *x);
    physd__v1__inspect_world__init(x);
    x->world_id = w;
    x->include_bodies = bodies != 0;
    m->inspect_world = x;
    frame(m);
}

#define WORLD_REQ(fn, CASE, Type, init, field)                                                                         \
    static void fn(uint64_t w) {                                                                                       \
        cmsg *m = msg(REQ(CASE));                                                                                      \
        Type *x = alloc(sizeof *x);                                                                                    \
        init(x);                                                                                                       \
        x->world_id = w;                                                                                               \
        m->field = x;                                                                                                  \
        frame(m);                                                                                                      \
    }
WORLD_REQ(destroy, DESTROY_WORLD, Physd__V1__DestroyWorld, physd__v1__destroy_world__init, destroy_world)
WORLD_REQ(pause, PAUSE, Physd__V1__PauseWorld, physd__v1__pause_world__init, pause)
WORLD_REQ(resume, RESUME, Physd__V1__ResumeWorld, physd__v1__resume_world__init, resume)
WORLD_REQ(reset, RESET, Physd__V1__ResetWorld, physd__v1__reset_world__init, reset)
WORLD_REQ(counters, QUERY_COUNTERS, Physd__V1__QueryCounters, physd__v1__query_counters__init, query_counters)
WORLD_REQ(list_tokens, LIST_TOKENS, Physd__V1__ListTokens, physd__v1__list_tokens__init, list_tokens)

static void step(uint64_t w, uint32_t n) {
    cmsg *m = msg(REQ(STEP));
    Physd__V1__StepWorld *x = alloc(sizeof *x);
    physd__v1__step_world__init(x);
    x->world_id = w;
    x->steps = n;
    m->step = x;
    frame(m);
}

static void edit(uint64_t w, Physd__V1__EditOp **ops, size_t n) {
    cmsg *m = msg(REQ(EDIT));
    Physd__V1__EditBatch *x = alloc(sizeof *x);
    physd__v1__edit_batch__init(x);
    x->world_id = w;
    x->ops = ops;
    x->n_ops = n;
    m->edit = x;
    frame(m);
}

static void change_settings(uint64_t w, Physd__V1__Settings *s) {
    cmsg *m = msg(REQ(CHANGE_SETTINGS));
    Physd__V1__ChangeSettings *x = alloc(sizeof *x);
    physd__v1__change_settings__init(x);
    x->world_id = w;
    x->settings = s;
    m->change_settings = x;
    frame(m);
}

static void subscribe(uint64_t w, int kind, uint32_t every, uint64_t *ids, size_t n, int per_iter) {
    cmsg *m = msg(REQ(SUBSCRIBE));
    Physd__V1__Subscribe *x = alloc(sizeof *x);
    physd__v1__subscribe__init(x);
    x->world_id = w;
    x->kind = (Physd__V1__StreamKind)kind;
    x->every = every;
    x->body_ids = ids;
    x->n_body_ids = n;
    x->per_iteration_merits = per_iter != 0;
    m->subscribe = x;
    frame(m);
}

/* A compact transform subscription (docs/streams.md); res, bound <= 0 and
 * bits 0: absent (defaults). */
static void subscribe_compact(uint64_t w, uint32_t every, double res, double bound, int bits, int ack) {
    cmsg *m = msg(REQ(SUBSCRIBE));
    Physd__V1__Subscribe *x = alloc(sizeof *x);
    physd__v1__subscribe__init(x);
    x->world_id = w;
    x->kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
    x->every = every;
    x->encoding = PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
    if (res != 0) {
        x->resolution = alloc(sizeof *x->resolution);
        physd__v1__double_value__init(x->resolution);
        x->resolution->value = res;
    }
    if (bound != 0) {
        x->bound = alloc(sizeof *x->bound);
        physd__v1__double_value__init(x->bound);
        x->bound->value = bound;
    }
    if (bits != 0) {
        x->rotation_bits = alloc(sizeof *x->rotation_bits);
        physd__v1__int32_value__init(x->rotation_bits);
        x->rotation_bits->value = bits;
    }
    x->explicit_ack = ack != 0;
    m->subscribe = x;
    frame(m);
}

static void stream_control(uint64_t sub, uint64_t ack, int key) {
    cmsg *m = msg(REQ(STREAM_CONTROL));
    Physd__V1__StreamControl *x = alloc(sizeof *x);
    physd__v1__stream_control__init(x);
    x->subscription_id = sub;
    x->ack_tick = ack;
    x->key_frame = key != 0;
    m->stream_control = x;
    frame(m);
}

/* A Region: kind 1 box (h), 2 sphere (r), 3 both; NULL for kind 0. */
static Physd__V1__Region *region(int kind, double cx, double h, double r) {
    if (kind == 0) return NULL;
    Physd__V1__Region *g = alloc(sizeof *g);
    physd__v1__region__init(g);
    g->center = v3(cx, 0, 0);
    if (kind & 1) g->half_extents = v3(h, h, h);
    if (kind & 2) {
        g->radius = alloc(sizeof *g->radius);
        physd__v1__double_value__init(g->radius);
        g->radius->value = r;
    }
    return g;
}

/* A compact subscription with a region and a budget (docs/streams.md, "Regions and budgets"). */
static void subscribe_region(uint64_t w, int kind, double cx, double h, double r, uint32_t budget) {
    cmsg *m = msg(REQ(SUBSCRIBE));
    Physd__V1__Subscribe *x = alloc(sizeof *x);
    physd__v1__subscribe__init(x);
    x->world_id = w;
    x->kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
    x->encoding = PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
    x->region = region(kind, cx, h, r);
    x->budget_bytes = budget;
    m->subscribe = x;
    frame(m);
}

/* StreamControl changing the region (kind as region(); clear) and the budget (>= 0). */
static void stream_interest(uint64_t sub, int kind, double cx, double h, double r, int clear, long long budget) {
    cmsg *m = msg(REQ(STREAM_CONTROL));
    Physd__V1__StreamControl *x = alloc(sizeof *x);
    physd__v1__stream_control__init(x);
    x->subscription_id = sub;
    x->region = region(kind, cx, h, r);
    x->clear_region = clear != 0;
    if (budget >= 0) {
        x->budget_bytes = alloc(sizeof *x->budget_bytes);
        physd__v1__uint64_value__init(x->budget_bytes);
        x->budget_bytes->value = (uint64_t)budget;
    }
    m->stream_control = x;
    frame(m);
}

static void unsubscribe(uint64_t id) {
    cmsg *m = msg(REQ(UNSUBSCRIBE));
    Physd__V1__Unsubscribe *x = alloc(sizeof *x);
    physd__v1__unsubscribe__init(x);
    x->subscription_id = id;
    m->unsubscribe = x;
    frame(m);
}

static void query_bodies(uint64_t w, uint64_t *ids, size_t n, int shapes) {
    cmsg *m = msg(REQ(QUERY_BODIES));
    Physd__V1__QueryBodies *x = alloc(sizeof *x);
    physd__v1__query_bodies__init(x);
    x->world_id = w;
    x->body_ids = ids;
    x->n_body_ids = n;
    x->include_shapes = shapes != 0;
    m->query_bodies = x;
    frame(m);
}

static void query_joints(uint64_t w, uint64_t *ids, size_t n) {
    cmsg *m = msg(REQ(QUERY_JOINTS));
    Physd__V1__QueryJoints *x = alloc(sizeof *x);
    physd__v1__query_joints__init(x);
    x->world_id = w;
    x->joint_ids = ids;
    x->n_joint_ids = n;
    m->query_joints = x;
    frame(m);
}

static void raycast(uint64_t w, double oz, double dz, double maxd) {
    cmsg *m = msg(REQ(RAYCAST));
    Physd__V1__Raycast *x = alloc(sizeof *x);
    physd__v1__raycast__init(x);
    x->world_id = w;
    x->origin = v3(0, 0, oz);
    x->direction = v3(0, 0, dz);
    x->max_distance = maxd;
    m->raycast = x;
    frame(m);
}

/* History and rollback (docs/durability.md): a world keeping history_ticks
 * ticks, an edit batch stamped with a tick, queries at a past tick. */
static void create_hist(const char *name, const char *preset, uint32_t history) {
    cmsg *m = msg(REQ(CREATE_WORLD));
    Physd__V1__CreateWorld *c = alloc(sizeof *c);
    physd__v1__create_world__init(c);
    c->name = (char *)name;
    c->preset = (char *)preset;
    c->start_paused = 1;
    c->history_ticks = history;
    m->create_world = c;
    frame(m);
}

static Physd__V1__UInt64Value *tick_of(uint64_t t) {
    Physd__V1__UInt64Value *v = alloc(sizeof *v);
    physd__v1__uint64_value__init(v);
    v->value = t;
    return v;
}

static void edit_at(uint64_t w, Physd__V1__EditOp **ops, size_t n, uint64_t tick) {
    cmsg *m = msg(REQ(EDIT));
    Physd__V1__EditBatch *x = alloc(sizeof *x);
    physd__v1__edit_batch__init(x);
    x->world_id = w;
    x->ops = ops;
    x->n_ops = n;
    x->tick = tick_of(tick);
    m->edit = x;
    frame(m);
}

static void query_bodies_at(uint64_t w, uint64_t *ids, size_t n, uint64_t tick) {
    cmsg *m = msg(REQ(QUERY_BODIES));
    Physd__V1__QueryBodies *x = alloc(sizeof *x);
    physd__v1__query_bodies__init(x);
    x->world_id = w;
    x->body_ids = ids;
    x->n_body_ids = n;
    x->tick = tick_of(tick);
    m->query_bodies = x;
    frame(m);
}

static void raycast_at(uint64_t w, double oz, double dz, uint64_t tick) {
    cmsg *m = msg(REQ(RAYCAST));
    Physd__V1__Raycast *x = alloc(sizeof *x);
    physd__v1__raycast__init(x);
    x->world_id = w;
    x->origin = v3(0, 0, oz);
    x->direction = v3(0, 0, dz);
    x->max_distance = 100;
    x->tick = tick_of(tick);
    m->raycast = x;
    frame(m);
}

#define ST_TRANSFORMS PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS
#define ST_STATS PHYSD__V1__STREAM_KIND__STREAM_STATS
#define ST_CONTACTS PHYSD__V1__STREAM_KIND__STREAM_CONTACTS
#define J_BALL PHYSD__V1__JOINT_TYPE__JOINT_BALL
#define J_HINGE PHYSD__V1__JOINT_TYPE__JOINT_HINGE
#define J_DISTANCE PHYSD__V1__JOINT_TYPE__JOINT_DISTANCE
#define J_FIXED PHYSD__V1__JOINT_TYPE__JOINT_FIXED

static uint64_t *ids(int n, ...);
#include <stdarg.h>
static uint64_t *ids(int n, ...) {
    uint64_t *v = alloc((size_t)(n ? n : 1) * sizeof *v);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        v[i] = va_arg(ap, uint64_t);
    va_end(ap);
    return v;
}

static Physd__V1__EditOp **ops(int n, ...) {
    Physd__V1__EditOp **v = alloc((size_t)n * sizeof *v);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        v[i] = va_arg(ap, Physd__V1__EditOp *);
    va_end(ap);
    return v;
}

/* A paused empty world 1 with a ground plane (body 1), a dynamic box
 * (body 2), a sphere (body 3) and a kinematic capsule (body 4). */
static void world_with_bodies(void) {
    create("w", "", 1, NULL, NULL, 0);
    edit(1,
         ops(4, add_body(1, 0, 0, 0, plane()), add_body(0, 0, 0, 0.5, box(0.5, 0.5, 0.5)),
             add_body(0, 2, 0, 0.5, sphere(0.5)), add_body(2, -2, 0, 1, capsule(0.25, 0.5))),
         4);
}

/* ------------------------------------------------------------- sessions */

static void gen(void) {
    /* --- sessions and hello */
    begin(), hello(), end("hello");
    begin(), hello(), ping("payload"), ping(""), end("hello_ping");
    begin(), ping("before hello"), list_worlds(), hello(), end("ping_before_hello");
    begin(), hello_v(2, "future"), hello(), hello(), end("hello_bad_version_then_twice");

    /* --- credentials and tokens (the fuzzed server has no admin token file:
     * every hello'd connection is admin, tokens are still made and checked) */
    begin(), hello_cred("phd_0123456789abcdef_0000000000000000000000000000000000000000000000000000000000000000"),
        hello_cred("not a token, , \n phd_x"), hello(), end("hello_bad_credentials");
    begin(), hello(), create("t", "box_on_plane", 1, NULL, NULL, 0), create_token(1, 1, "viewer"),
        create_token(1, 2, "editor"), create_token(1, 3, "owner"), create_token(1, 4, "admin?"),
        create_token(1, 0, "none"), create_token(7, 1, "no world"), list_tokens(1), revoke_token(1, "0123456789abcdef"),
        revoke_token(1, ""), list_tokens(1), destroy(1), list_tokens(1), end("tokens");

    /* --- snapshots: taken in parts; restored from bytes that are not a
     * snapshot, a header with a bad checksum, and an upload in parts */
    {
        static const uint8_t bad_crc[] = {'P', 'H', 'Y', 'S', 'D', 'W', '0', '1', 4, 0, 0, 0, 1, 2, 3, 4, 8, 1, 16, 2};
        begin(), hello(), create("s", "stack20", 1, NULL, NULL, 0), step(1, 3), take_snapshot(1), take_snapshot(9),
            restore_world("", "junk", 4, 0, 0, 0), restore_world("r", bad_crc, sizeof bad_crc, 0, 0, 1),
            restore_world("", bad_crc, 10, 5, 0, 2), restore_world("", bad_crc + 10, 10, 5, 1, 2),
            restore_world("", bad_crc, 10, 6, 0, 3), restore_world("", bad_crc, 10, 6, 2, 3), end("snapshots");
    }

    /* --- worlds that move: migrate and drain are refused (no outgoing
     * connections here); imports in parts, out of order, committed,
     * aborted, asked about */
    {
        static const uint8_t bad_crc[] = {'P', 'H', 'Y', 'S', 'D', 'W', '0', '1', 4, 0, 0, 0, 1, 2, 3, 4, 8, 1, 16, 2};
        begin(), hello(), create("m", "stack20", 0, NULL, NULL, 0), migrate_world(1, "127.0.0.1:7447", NULL),
            migrate_world(1, "nowhere", "phd_x"), migrate_world(1, "[::1]:7447", NULL), migrate_world(9, "h:1", NULL),
            drain("127.0.0.1:1", 1), drain("", 0), counters(1), end("migrate_drain");
        begin(), hello(), import_world(5, 1, 0, bad_crc, sizeof bad_crc, 0, 1),
            import_world(5, 2, 0, bad_crc, 10, 0, 2), import_world(5, 2, 0, bad_crc + 10, 10, 1, 2),
            import_world(5, 3, 0, bad_crc, 10, 1, 2), import_world(5, 3, 1, NULL, 0, 0, 0),
            import_world(5, 3, 2, NULL, 0, 0, 0), import_world(5, 3, 3, NULL, 0, 0, 0),
            import_world(0, 3, 0, "x", 1, 0, 1), import_world(5, 0, 0, "x", 1, 0, 1),
            import_world(5, 4, 9, NULL, 0, 0, 0), end("import_world");
    }

    /* --- worlds */
    begin(), hello(), create("", "", 1, NULL, NULL, 0), end("create_world_empty");
    begin(), hello(), create("running", "box_on_plane", 0, NULL, NULL, 0), list_worlds(), end("create_world_running");
    static const char *presets[] = {"box_on_plane", "stack20",         "chain30",         "pendulum",
                                    "arched_snake", "wire_heavy_load", "sliding_capsule", "incline"};
    for (size_t k = 0; k < sizeof presets / sizeof presets[0]; k++) {
        char name[96];
        begin(), hello(), create(presets[k], presets[k], 1, NULL, NULL, 0), step(1, 2), counters(1);
        snprintf(name, sizeof name, "create_world_preset_%s", presets[k]);
        end(name);
    }
    begin(), hello(), create("x", "no_such_preset", 1, NULL, NULL, 0), end("create_world_unknown_preset");
    for (int method = 0; method <= 4; method++) {
        char name[64];
        begin(), hello(), create("s", "stack20", 1, settings_full(method), NULL, 0), step(1, 2), counters(1);
        snprintf(name, sizeof name, "create_world_settings_method%d", method);
        end(name);
    }
    begin(), hello();
    create("scene", "", 1, NULL,
           ops(5, add_body(1, 0, 0, 0, plane()), add_body(0, 0, 0, 1, box(0.5, 0.5, 0.5)),
               add_body(0, 0, 0, 3, sphere(0.3)), add_joint(J_DISTANCE, ref_new(1), ref_new(2)),
               set_velocity(ref_new(2))),
           5);
    inspect(1, 1), step(1, 3), reset(1), inspect(1, 1), end("create_world_scene");
    begin(), hello(), create("dup", "", 1, NULL, NULL, 0), create("dup", "", 1, NULL, NULL, 0),
        end("create_world_duplicate_name");
    begin(), hello();
    for (int i = 0; i < 5; i++)
        create("", "box_on_plane", 1, NULL, NULL, 0);
    list_worlds(), destroy(2), create("", "", 1, NULL, NULL, 0), list_worlds(), end("create_world_max_worlds");
    begin(), hello(), create("a", "", 1, NULL, NULL, 0), create("b", "pendulum", 0, NULL, NULL, 0), list_worlds(),
        end("list_worlds");
    begin(), hello(), create("i", "stack20", 1, NULL, NULL, 0), inspect(1, 0), inspect(1, 1), inspect(9, 0),
        end("inspect_world");
    begin(), hello(), create("d", "chain30", 1, NULL, NULL, 0), destroy(1), destroy(1), inspect(1, 0), list_worlds(),
        end("destroy_world");

    /* --- edits: one session per op kind */
    begin(), hello(), world_with_bodies(), edit(1, ops(1, add_body_full()), 1), query_bodies(1, ids(1, BODY(5)), 1, 1),
        end("edit_add_body");
    begin(), hello(), world_with_bodies(), edit(1, ops(1, remove_body(ref_id(BODY(3)))), 1),
        edit(1, ops(2, add_body(0, 0, 0, 5, sphere(0.2)), remove_body(ref_new(0))), 2),
        query_bodies(1, ids(1, BODY(3)), 1, 0), end("edit_remove_body");
    begin(), hello(), world_with_bodies(), edit(1, ops(2, set_pose(ref_id(BODY(2))), set_pose(ref_id(BODY(4)))), 2),
        query_bodies(1, ids(2, BODY(2), BODY(4)), 2, 0), end("edit_set_pose");
    begin(), hello(), world_with_bodies(), edit(1, ops(1, set_velocity(ref_id(BODY(2)))), 1),
        edit(1, ops(1, set_velocity(ref_id(BODY(1)))), 1), step(1, 1), end("edit_set_velocity");
    begin(), hello(), world_with_bodies(),
        edit(1, ops(2, apply_force(ref_id(BODY(2)), 0), apply_force(ref_id(BODY(3)), 1)), 2), step(1, 1),
        end("edit_apply_force");
    begin(), hello(), world_with_bodies(), edit(1, ops(1, apply_torque(ref_id(BODY(2)))), 1), step(1, 1),
        end("edit_apply_torque");
    begin(), hello(), world_with_bodies(),
        edit(1, ops(2, apply_impulse(ref_id(BODY(2)), 0), apply_impulse(ref_id(BODY(3)), 1)), 2), step(1, 1),
        end("edit_apply_impulse");
    begin(), hello(), world_with_bodies(), edit(1, ops(1, set_kinematic_target(ref_id(BODY(4)))), 1),
        edit(1, ops(1, set_kinematic_target(ref_id(BODY(2)))), 1), step(1, 2), end("edit_set_kinematic_target");
    begin(), hello(), world_with_bodies();
    edit(1,
         ops(5, add_joint(J_BALL, ref_id(BODY(2)), ref_id(BODY(3))), add_joint(J_HINGE, ref_id(BODY(3)), NULL),
             add_joint(J_DISTANCE, ref_id(BODY(2)), ref_id(BODY(4))),
             add_joint(J_FIXED, ref_id(BODY(4)), ref_id(BODY(3))), add_joint(J_BALL, ref_id(BODY(2)), ref_id(BODY(2)))),
         5);
    edit(1,
         ops(4, add_joint(J_BALL, ref_id(BODY(2)), ref_id(BODY(3))), add_joint(J_HINGE, ref_id(BODY(3)), NULL),
             add_joint(J_DISTANCE, ref_id(BODY(2)), ref_id(BODY(4))),
             add_joint(J_FIXED, ref_id(BODY(4)), ref_id(BODY(3)))),
         4);
    query_joints(1, NULL, 0), step(1, 2), end("edit_add_joint");
    begin(), hello(), world_with_bodies(), edit(1, ops(1, add_joint(J_BALL, ref_id(BODY(2)), ref_id(BODY(3)))), 1),
        edit(1, ops(2, remove_joint(JOINT(1)), remove_joint(JOINT(1))), 2), edit(1, ops(1, remove_joint(JOINT(1))), 1),
        query_joints(1, ids(1, JOINT(1)), 1), end("edit_remove_joint");
    begin(), hello(), world_with_bodies();
    edit(1,
         ops(10, add_body_full(), set_pose(ref_new(0)), set_velocity(ref_new(0)), apply_force(ref_new(0), 1),
             apply_torque(ref_new(0)), apply_impulse(ref_new(0), 0), set_kinematic_target(ref_id(BODY(4))),
             add_joint(J_HINGE, ref_new(0), ref_id(BODY(2))), remove_body(ref_id(BODY(3))), remove_joint(JOINT(1))),
         10);
    edit(1,
         ops(9, add_body_full(), set_pose(ref_new(0)), set_velocity(ref_new(0)), apply_force(ref_new(0), 1),
             apply_torque(ref_new(0)), apply_impulse(ref_new(0), 0), set_kinematic_target(ref_id(BODY(4))),
             add_joint(J_HINGE, ref_new(0), ref_id(BODY(2))), remove_body(ref_id(BODY(3)))),
         9);
    step(1, 3), query_joints(1, NULL, 0), end("edit_every_kind");

    /* --- history and rollback: late, future and out-of-window batches,
     * queries at past ticks (the requests after a StepWorld run at its
     * first tick boundary, tick 1: tick 0 is late there) */
    begin(), hello(), create_hist("h", "stack20", 8), step(1, 6),
        edit_at(1, ops(1, set_velocity(ref_id(BODY(3)))), 1, 0),
        edit_at(1, ops(1, add_body(0, 0, 0, 30, sphere(0.5))), 1, 0), step(1, 2), counters(1),
        end("rollback_late_edit");
    begin(), hello(), create_hist("h", "stack20", 8), step(1, 2),
        edit_at(1, ops(1, apply_impulse(ref_id(BODY(4)), 0)), 1, 3),
        edit_at(1, ops(1, set_pose(ref_id(BODY(2)))), 1, 2), step(1, 4), end("rollback_future_edit");
    begin(), hello(), create_hist("h", "stack20", 4), step(1, 10),
        edit_at(1, ops(1, set_velocity(ref_id(BODY(3)))), 1, 0),
        edit_at(1, ops(1, set_velocity(ref_id(BODY(3)))), 1, UINT64_MAX), create_hist("x", "", 100000),
        create("n", "box_on_plane", 1, NULL, NULL, 0), edit_at(2, ops(1, set_velocity(ref_id(BODY(2)))), 1, 0),
        edit_at(2, ops(1, set_velocity(ref_id(BODY(2)))), 1, 1), change_settings(1, NULL),
        edit_at(1, ops(1, set_velocity(ref_id(BODY(3)))), 1, 0), end("rollback_window");
    begin(), hello(), create_hist("h", "box_drop", 16), step(1, 10), query_bodies_at(1, ids(1, BODY(2)), 1, 0),
        raycast_at(1, 10, -1, 0), raycast_at(1, 10, -1, 1), query_bodies_at(1, ids(1, BODY(2)), 1, UINT64_MAX),
        step(1, 3), raycast_at(1, 10, -1, 2), end("lag_compensation");

    /* --- settings and control */
    begin(), hello(), create("c", "stack20", 1, NULL, NULL, 0), change_settings(1, settings_full(1)),
        change_settings(1, NULL), step(1, 2), end("change_settings");
    begin(), hello(), create("p", "box_on_plane", 0, NULL, NULL, 0), pause(1), step(1, 3), resume(1), pause(1),
        counters(1), end("pause_step_resume");
    begin(), hello(), create("r", "box_on_plane", 1, NULL, NULL, 0), resume(1), end("resume");
    begin(), hello(), create("s", "pendulum", 1, NULL, NULL, 0), step(1, 0), step(1, 5), step(1, 1), counters(1),
        end("step");
    begin(), hello(), create("s", "pendulum", 0, NULL, NULL, 0), step(1, 1), end("step_running_world");
    begin(), hello(), world_with_bodies(), step(1, 2), reset(1), counters(1), query_bodies(1, ids(1, BODY(2)), 1, 0),
        end("reset");
    begin(), hello(), create("r", "stack20", 1, NULL, NULL, 0), step(1, 50), reset(1), pause(1), destroy(1),
        end("reset_during_step");

    /* --- subscriptions */
    begin(), hello(), create("t", "box_drop", 1, NULL, NULL, 0), subscribe(1, ST_TRANSFORMS, 1, NULL, 0, 0), step(1, 3),
        end("subscribe_transforms");
    begin(), hello(), world_with_bodies(), subscribe(1, ST_TRANSFORMS, 2, ids(2, BODY(2), BODY(3)), 2, 0),
        subscribe(1, ST_TRANSFORMS, 1, ids(1, BODY(77)), 1, 0), step(1, 4), end("subscribe_transforms_bodies");
    begin(), hello(), create("s", "stack20", 1, NULL, NULL, 0), subscribe(1, ST_STATS, 1, NULL, 0, 0),
        subscribe(1, ST_STATS, 1, NULL, 0, 1), step(1, 2), end("subscribe_stats");
    begin(), hello(), create("c", "box_drop", 1, NULL, NULL, 0), subscribe(1, ST_CONTACTS, 1, NULL, 0, 0), step(1, 40),
        end("subscribe_contacts");
    begin(), hello(), create("u", "box_on_plane", 1, NULL, NULL, 0), subscribe(1, ST_TRANSFORMS, 1, NULL, 0, 0),
        subscribe(1, ST_STATS, 3, NULL, 0, 0), unsubscribe(1), unsubscribe(1), unsubscribe(99), step(1, 3), destroy(1),
        end("unsubscribe");
    begin(), hello(), create("k", "box_on_plane", 1, NULL, NULL, 0), subscribe(1, 7, 1, NULL, 0, 0),
        subscribe(1, ST_STATS, 1, ids(1, BODY(1)), 1, 0), subscribe(1, ST_STATS, 2000000, NULL, 0, 0),
        end("subscribe_bad");
    begin(), hello(), create("cs", "box_drop", 1, NULL, NULL, 0), subscribe_compact(1, 1, 0, 0, 0, 0),
        subscribe_compact(1, 2, 0.01, 50, 8, 1), step(1, 3), stream_control(1, 2, 0), stream_control(2, 1, 0),
        stream_control(1, 0, 1), step(1, 2), stream_control(99, 0, 1), end("subscribe_compact");
    begin(), hello(), create("cb", "box_on_plane", 1, NULL, NULL, 0), subscribe_compact(1, 1, -1, 0, 0, 0),
        subscribe_compact(1, 1, 0, 1e9, 0, 0), subscribe_compact(1, 1, 0, 0, 99, 0),
        subscribe_compact(1, 1, 1e-6, 1e4, 0, 0), step(1, 1), end("subscribe_compact_bad");
    begin(), hello(), create("rg", "cubes901", 1, NULL, NULL, 0), subscribe_region(1, 1, 0, 3, 0, 0),
        subscribe_region(1, 2, 2, 0, 5, 4096), step(1, 3), stream_interest(1, 2, -1, 0, 2, 0, -1),
        stream_interest(2, 0, 0, 0, 0, 1, 0), stream_interest(2, 1, 0, 1, 0, 0, 1024), step(1, 3),
        end("subscribe_region");
    begin(), hello(), create("rb", "box_on_plane", 1, NULL, NULL, 0), subscribe_region(1, 3, 0, 1, 1, 0),
        subscribe_region(1, 1, 0, -1, 0, 0), subscribe_region(1, 2, 1e300, 0, 1, 0),
        subscribe_region(1, 2, 0, 0, 1e300, 0), subscribe_region(1, 0, 0, 0, 0, 1000),
        subscribe_region(1, 1, 0, 1, 0, 4096), stream_interest(1, 1, 0, 1, 0, 1, -1),
        stream_interest(1, 0, 0, 0, 0, 0, 5), stream_interest(1, 2, 0, 0, -3, 0, -1), step(1, 2),
        end("subscribe_region_bad");
    begin(), hello(), create("many", "box_on_plane", 1, NULL, NULL, 0);
    for (int i = 0; i < 18; i++)
        subscribe(1, i % 3, 1, NULL, 0, 0);
    step(1, 2), end("subscribe_max_subscriptions");

    /* --- queries */
    begin(), hello(), world_with_bodies(), query_bodies(1, ids(4, BODY(1), BODY(2), BODY(3), BODY(4)), 4, 1),
        query_bodies(1, ids(1, BODY(99)), 1, 0), query_bodies(1, NULL, 0, 0), end("query_bodies");
    begin(), hello(), world_with_bodies(), raycast(1, 10, -1, 100), raycast(1, 10, 1, 100), raycast(1, 10, 0, 1),
        raycast(1, 10, -1, -1), end("raycast");
    begin(), hello(), create("q", "stack20", 1, NULL, NULL, 0), counters(1), step(1, 2), counters(1), counters(5),
        end("query_counters");
    begin(), hello(), create("j", "chain30", 1, NULL, NULL, 0), query_joints(1, NULL, 0),
        query_joints(1, ids(2, JOINT(1), JOINT(30)), 2), query_joints(1, ids(1, JOINT(999)), 1), end("query_joints");
    begin(), hello(), list_presets(), end("list_presets");

    /* --- one long session with every request type */
    begin(), hello(), ping("x"), list_presets();
    create("all", "", 1, settings_full(0),
           ops(3, add_body(1, 0, 0, 0, plane()), add_body(0, 0, 0, 0.5, box(0.5, 0.5, 0.5)),
               add_body(0, 0, 0, 2, sphere(0.5))),
           3);
    list_worlds(), inspect(1, 1);
    edit(1,
         ops(10, add_body(2, 3, 0, 1, capsule(0.2, 0.4)), set_pose(ref_id(BODY(3))), set_velocity(ref_id(BODY(2))),
             apply_force(ref_id(BODY(2)), 1), apply_torque(ref_id(BODY(3))), apply_impulse(ref_id(BODY(3)), 1),
             set_kinematic_target(ref_new(0)), add_joint(J_BALL, ref_id(BODY(2)), ref_id(BODY(3))),
             add_joint(J_HINGE, ref_new(0), NULL), remove_body(ref_new(0))),
         10);
    subscribe(1, ST_TRANSFORMS, 1, NULL, 0, 0), subscribe(1, ST_STATS, 1, NULL, 0, 1),
        subscribe(1, ST_CONTACTS, 1, NULL, 0, 0);
    step(1, 3), change_settings(1, settings_full(2)), query_bodies(1, ids(2, BODY(2), BODY(3)), 2, 1),
        raycast(1, 5, -1, 10), counters(1), query_joints(1, NULL, 0);
    edit(1, ops(1, remove_joint(JOINT(1))), 1);
    create_token(1, 1, "v"), list_tokens(1), revoke_token(1, "0000000000000000"), take_snapshot(1);
    migrate_world(1, "127.0.0.1:1", NULL), import_world(1, 7, 3, NULL, 0, 0, 0);
    unsubscribe(2), resume(1), pause(1), reset(1), inspect(1, 0), destroy(1), list_worlds(), drain("127.0.0.1:1", 0);
    end("session_every_request");

    /* --- malformed input: the server answers with request id 0 and closes */
    begin(), hello();
    {
        uint8_t bad[11] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
        put(bad, sizeof bad);
    }
    end("bad_varint");
    begin(), hello(), put_varint(65537), end("frame_too_big");
    begin(), hello(), put_varint(100), put("\x08\x05\x12", 3), end("truncated_frame");
    begin(), hello(), put_varint(3), put("\x08\x05\x17", 3), ping("after"), end("garbage_frame");
    begin(), hello(), put_varint(0), put_varint(2), put("\x08\x07", 2), put_varint(5), put("\xa8\x1f\x01\x08\x09", 5),
        ping("after"), end("empty_and_unknown_frames");
    begin(), hello(), create("w", "", 1, NULL, NULL, 0), put_varint(300), end("partial_frame_eof");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_gen_corpus DIR\n");
        return 2;
    }
    outdir = argv[1];
    gen();
    free(sbuf);
    printf("fuzz_gen_corpus: %d files in %s\n", nfiles, outdir);
    return 0;
}
