/*
 * edits.c — the physctl commands that act on one body or joint of a world
 * (pose, velocity, force, torque, impulse, target, joint add/remove/list)
 * and the per-body queries (body, ray): every edit op and query of the
 * protocol that `add`, `remove` and `dump` do not already cover.
 *
 * Normal path: WORLD and the body or joint ids from the arguments, vectors
 * as x,y,z (or x,y,z,w), then one request: an edit batch of one op (or one
 * op per id), query_bodies, query_joints or raycast; text or, with --json,
 * one JSON document on stdout.
 *
 * Failure modes: bad arguments return EXIT_USAGE before anything is sent
 * (naming the key and what it expected); the server's refusal EXIT_REQUEST
 * with its status and message (a stale id is NOT_FOUND); a lost connection
 * EXIT_LOST.
 *
 * Invariants: the messages are built on the stack or freed before the
 * command returns; nothing here keeps state between commands.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "physctl.h"
#include "suggest.h"

#define OP(x) PHYSD__V1__EDIT_OP__OP_##x

/* A vector argument: "x,y,z" (n = 3) or "x,y,z,w" (n = 4) into v. */
static int vec_arg(ctl *x, const char *what, const char *text, int n, double *v) {
    if (ctl_parse_vec(text, n, v) == 0) return 0;
    return ctl_fail(x, EXIT_USAGE, "%s: expected %s (%d numbers), got '%s'", what, n == 3 ? "x,y,z" : "x,y,z,w", n,
                    text);
}

static void set_vec3(Physd__V1__Vec3 *o, const double *v) {
    physd__v1__vec3__init(o);
    o->x = v[0];
    o->y = v[1];
    o->z = v[2];
}

static void set_quat(Physd__V1__Quat *o, const double *v) {
    physd__v1__quat__init(o);
    o->x = v[0];
    o->y = v[1];
    o->z = v[2];
    o->w = v[3];
}

/* "unknown key 'k'; did you mean ...?" among the keys the command takes. */
static int bad_key(ctl *x, const char *key, const char *const *keys, size_t n) {
    char near[200];
    if (suggest_nearest(key, keys, n, near, sizeof near))
        return ctl_fail(x, EXIT_USAGE, "unknown key '%s'; did you mean %s? (see physctl %s --help)", key, near, x->cmd);
    return ctl_fail(x, EXIT_USAGE, "unknown key '%s' (see physctl %s --help)", key, x->cmd);
}

/* Reads the current state of one body (for the parts of a pose or a
 * velocity the command line leaves out). */
static int body_state(ctl *x, uint64_t w, uint64_t body, smsg **out) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
    q.world_id = w;
    q.body_ids = &body;
    q.n_body_ids = 1;
    m.request_case = REQ(QUERY_BODIES);
    m.query_bodies = &q;
    int r = ctl_call(x, &m, out);
    if (!r && (!(*out)->reply->bodies || (*out)->reply->bodies->n_bodies != 1)) {
        ctl_free(*out);
        *out = NULL;
        return ctl_fail(x, EXIT_REQUEST, "the server sent no state for body %llu", (unsigned long long)body);
    }
    return r;
}

/* Sends one op and prints "world W body B: WHAT at tick T" (or JSON). */
static int send_one(ctl *x, uint64_t w, uint64_t id, const char *idkey, Physd__V1__EditOp *op, const char *what) {
    Physd__V1__EditOp *ops = op;
    smsg *rep;
    int r = ctl_send_edit(x, w, &ops, 1, &rep);
    if (r) return r;
    if (x->json) {
        jw j;
        jw_init(&j, 1);
        jw_object(&j);
        jw_key(&j, "world_id");
        jw_uint(&j, w);
        jw_key(&j, idkey);
        jw_uint(&j, id);
        jw_key(&j, "tick");
        jw_uint(&j, rep->reply->tick);
        jw_key(&j, "result");
        jw_string(&j, what);
        jw_object_end(&j);
        ctl_print_json(&j);
        jw_free(&j);
    } else {
        printf("world %llu body %llu: %s at tick %llu\n", (unsigned long long)w, (unsigned long long)id, what,
               (unsigned long long)rep->reply->tick);
    }
    ctl_free(rep);
    return 0;
}

/* --------------------------------------------------- pose and target */

/* pose and target: pos=x,y,z rot=x,y,z,w; a part left out keeps the
 * body's current value. */
static int pose_command(ctl *x, int argc, char **argv, int target) {
    uint64_t w, body;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r || (r = ctl_id_arg(x, argc, argv, 2, "BODY", &body))) return r;
    static const char *const keys[] = {"pos", "position", "rot", "orientation"};
    double p[3] = {0, 0, 0}, q[4] = {0, 0, 0, 1};
    int have_p = 0, have_q = 0;
    for (int i = 3; i < argc; i++) {
        char *k, *v;
        if (ctl_split_kv(argv[i], &k, &v))
            return ctl_fail(x, EXIT_USAGE, "expected key=value, got '%s' (see physctl %s --help)", argv[i], x->cmd);
        if (!strcmp(k, "pos") || !strcmp(k, "position")) {
            if ((r = vec_arg(x, k, v, 3, p))) return r;
            have_p = 1;
        } else if (!strcmp(k, "rot") || !strcmp(k, "orientation")) {
            if ((r = vec_arg(x, k, v, 4, q))) return r;
            have_q = 1;
        } else {
            return bad_key(x, k, keys, 4);
        }
    }
    if (!have_p && !have_q) return ctl_fail(x, EXIT_USAGE, "give pos=x,y,z and/or rot=x,y,z,w");
    if (!have_p || !have_q) {
        smsg *cur;
        if ((r = body_state(x, w, body, &cur))) return r;
        const Physd__V1__Pose *bp = cur->reply->bodies->bodies[0]->pose;
        if (!have_p && bp && bp->position) {
            p[0] = bp->position->x;
            p[1] = bp->position->y;
            p[2] = bp->position->z;
        }
        if (!have_q && bp && bp->orientation) {
            q[0] = bp->orientation->x;
            q[1] = bp->orientation->y;
            q[2] = bp->orientation->z;
            q[3] = bp->orientation->w;
        }
        ctl_free(cur);
    }
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT;
    Physd__V1__SetPose sp = PHYSD__V1__SET_POSE__INIT;
    Physd__V1__SetKinematicTarget kt = PHYSD__V1__SET_KINEMATIC_TARGET__INIT;
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    Physd__V1__Pose pose = PHYSD__V1__POSE__INIT;
    Physd__V1__Vec3 pos;
    Physd__V1__Quat rot;
    set_vec3(&pos, p);
    set_quat(&rot, q);
    pose.position = &pos;
    pose.orientation = &rot;
    ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ref.id = body;
    if (target) {
        kt.body = &ref;
        kt.pose = &pose;
        op.op_case = OP(SET_KINEMATIC_TARGET);
        op.set_kinematic_target = &kt;
    } else {
        sp.body = &ref;
        sp.pose = &pose;
        op.op_case = OP(SET_POSE);
        op.set_pose = &sp;
    }
    return send_one(x, w, body, "body_id", &op, target ? "kinematic target set" : "pose set");
}

int physctl_pose(ctl *x, int argc, char **argv) { return pose_command(x, argc, argv, 0); }
int physctl_target(ctl *x, int argc, char **argv) { return pose_command(x, argc, argv, 1); }

/* ------------------------------------------------------------ velocity */

int physctl_velocity(ctl *x, int argc, char **argv) {
    uint64_t w, body;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r || (r = ctl_id_arg(x, argc, argv, 2, "BODY", &body))) return r;
    static const char *const keys[] = {"vel", "linear", "angvel", "angular"};
    double lin[3] = {0, 0, 0}, ang[3] = {0, 0, 0};
    int have_l = 0, have_a = 0;
    for (int i = 3; i < argc; i++) {
        char *k, *v;
        if (ctl_split_kv(argv[i], &k, &v))
            return ctl_fail(x, EXIT_USAGE, "expected key=value, got '%s' (see physctl %s --help)", argv[i], x->cmd);
        if (!strcmp(k, "vel") || !strcmp(k, "linear")) {
            if ((r = vec_arg(x, k, v, 3, lin))) return r;
            have_l = 1;
        } else if (!strcmp(k, "angvel") || !strcmp(k, "angular")) {
            if ((r = vec_arg(x, k, v, 3, ang))) return r;
            have_a = 1;
        } else {
            return bad_key(x, k, keys, 4);
        }
    }
    if (!have_l && !have_a) return ctl_fail(x, EXIT_USAGE, "give vel=x,y,z and/or angvel=x,y,z");
    if (!have_l || !have_a) {
        smsg *cur;
        if ((r = body_state(x, w, body, &cur))) return r;
        const Physd__V1__BodyState *bs = cur->reply->bodies->bodies[0];
        const Physd__V1__Vec3 *keep = have_l ? bs->angular_velocity : bs->linear_velocity;
        double *dst = have_l ? ang : lin;
        if (keep) {
            dst[0] = keep->x;
            dst[1] = keep->y;
            dst[2] = keep->z;
        }
        ctl_free(cur);
    }
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT;
    Physd__V1__SetVelocity sv = PHYSD__V1__SET_VELOCITY__INIT;
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    Physd__V1__Vec3 l, a;
    set_vec3(&l, lin);
    set_vec3(&a, ang);
    ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ref.id = body;
    sv.body = &ref;
    sv.linear = &l;
    sv.angular = &a;
    op.op_case = OP(SET_VELOCITY);
    op.set_velocity = &sv;
    return send_one(x, w, body, "body_id", &op, "velocity set");
}

/* ------------------------------------------- force, torque, impulse */

enum { PUSH_FORCE, PUSH_TORQUE, PUSH_IMPULSE };

/* WORLD BODY x,y,z [at=x,y,z] */
static int push_command(ctl *x, int argc, char **argv, int kind) {
    uint64_t w, body;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r || (r = ctl_id_arg(x, argc, argv, 2, "BODY", &body))) return r;
    const char *name = kind == PUSH_FORCE ? "force" : kind == PUSH_TORQUE ? "torque" : "impulse";
    if (argc < 4) return ctl_fail(x, EXIT_USAGE, "missing the %s as x,y,z (see physctl %s --help)", name, x->cmd);
    double v[3], at[3];
    int have_at = 0;
    if ((r = vec_arg(x, name, argv[3], 3, v))) return r;
    for (int i = 4; i < argc; i++) {
        char *k, *val;
        if (kind == PUSH_TORQUE || ctl_split_kv(argv[i], &k, &val))
            return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s' (see physctl %s --help)", argv[i], x->cmd);
        if (strcmp(k, "at") && strcmp(k, "point")) {
            static const char *const keys[] = {"at", "point"};
            return bad_key(x, k, keys, 2);
        }
        if ((r = vec_arg(x, k, val, 3, at))) return r;
        have_at = 1;
    }
    Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT;
    Physd__V1__ApplyForce af = PHYSD__V1__APPLY_FORCE__INIT;
    Physd__V1__ApplyTorque atq = PHYSD__V1__APPLY_TORQUE__INIT;
    Physd__V1__ApplyImpulse ai = PHYSD__V1__APPLY_IMPULSE__INIT;
    Physd__V1__BodyRef ref = PHYSD__V1__BODY_REF__INIT;
    Physd__V1__Vec3 vec, point;
    set_vec3(&vec, v);
    set_vec3(&point, have_at ? at : v);
    ref.ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ref.id = body;
    const char *what;
    if (kind == PUSH_FORCE) {
        af.body = &ref;
        af.force = &vec;
        af.point = have_at ? &point : NULL;
        op.op_case = OP(APPLY_FORCE);
        op.apply_force = &af;
        what = "force applied for the next step";
    } else if (kind == PUSH_TORQUE) {
        atq.body = &ref;
        atq.torque = &vec;
        op.op_case = OP(APPLY_TORQUE);
        op.apply_torque = &atq;
        what = "torque applied for the next step";
    } else {
        ai.body = &ref;
        ai.impulse = &vec;
        ai.point = have_at ? &point : NULL;
        op.op_case = OP(APPLY_IMPULSE);
        op.apply_impulse = &ai;
        what = "impulse applied";
    }
    return send_one(x, w, body, "body_id", &op, what);
}

int physctl_force(ctl *x, int argc, char **argv) { return push_command(x, argc, argv, PUSH_FORCE); }
int physctl_torque(ctl *x, int argc, char **argv) { return push_command(x, argc, argv, PUSH_TORQUE); }
int physctl_impulse(ctl *x, int argc, char **argv) { return push_command(x, argc, argv, PUSH_IMPULSE); }

/* --------------------------------------------------------------- joint */

/* a=ID / b=ID (body_a, body_b) as references to existing bodies. */
static int joint_body(ctl *x, Physd__V1__JointDef *jd, int second, const char *text) {
    uint64_t id;
    if (ctl_parse_u64(text, &id) || id == 0)
        return ctl_fail(x, EXIT_USAGE, "%s: expected a body id, got '%s'", second ? "b" : "a", text);
    Physd__V1__BodyRef *ref = (Physd__V1__BodyRef *)pbj_new(&physd__v1__body_ref__descriptor);
    if (!ref) return ctl_fail(x, EXIT_LOST, "out of memory");
    ref->ref_case = PHYSD__V1__BODY_REF__REF_ID;
    ref->id = id;
    Physd__V1__BodyRef **slot = second ? &jd->body_b : &jd->body_a;
    if (*slot) physd__v1__body_ref__free_unpacked(*slot, NULL);
    *slot = ref;
    return 0;
}

static int joint_add(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 2, &w);
    if (r) return r;
    Physd__V1__JointDef *jd = (Physd__V1__JointDef *)pbj_new(&physd__v1__joint_def__descriptor);
    if (!jd) return ctl_fail(x, EXIT_LOST, "out of memory");
    char err[256];
    for (int i = 3; i < argc && !r; i++) {
        char *k, *v;
        if (ctl_split_kv(argv[i], &k, &v)) {
            r = ctl_fail(x, EXIT_USAGE, "expected key=value, got '%s' (see physctl joint --help)", argv[i]);
        } else if (!strcmp(k, "a") || !strcmp(k, "body_a")) {
            r = joint_body(x, jd, 0, v);
        } else if (!strcmp(k, "b") || !strcmp(k, "body_b")) {
            r = joint_body(x, jd, 1, v);
        } else if (pbj_set_text(&jd->base, k, v, err, sizeof err)) {
            r = ctl_fail(x, EXIT_USAGE, "%s", err);
        }
    }
    if (!r && !jd->body_a) r = ctl_fail(x, EXIT_USAGE, "missing a=BODY (the joint's first body)");
    if (!r) {
        Physd__V1__EditOp op = PHYSD__V1__EDIT_OP__INIT;
        Physd__V1__AddJoint aj = PHYSD__V1__ADD_JOINT__INIT;
        aj.joint = jd;
        op.op_case = OP(ADD_JOINT);
        op.add_joint = &aj;
        r = ctl_edit_add(x, w, &op, "joint_ids");
    }
    physd__v1__joint_def__free_unpacked(jd, NULL);
    return r;
}

static int joint_remove(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 2, &w);
    if (r) return r;
    if (argc < 4) return ctl_fail(x, EXIT_USAGE, "missing JOINT id(s)");
    return ctl_edit_remove(x, w, argv + 3, (size_t)argc - 3, 1);
}

static void print_ref(const Physd__V1__BodyRef *b) {
    if (!b)
        printf(" %-14s", "world");
    else
        printf(" %-14llu", (unsigned long long)b->id);
}

static int joint_list(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 2, &w);
    if (r) return r;
    size_t n = argc > 3 ? (size_t)argc - 3 : 0;
    uint64_t *ids = calloc(n + 1, sizeof *ids);
    if (!ids) return ctl_fail(x, EXIT_LOST, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (ctl_parse_u64(argv[i + 3], &ids[i]) || ids[i] == 0) {
            free(ids);
            return ctl_fail(x, EXIT_USAGE, "bad joint id '%s'", argv[i + 3]);
        }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__QueryJoints q = PHYSD__V1__QUERY_JOINTS__INIT;
    q.world_id = w;
    q.joint_ids = ids;
    q.n_joint_ids = n;
    m.request_case = REQ(QUERY_JOINTS);
    m.query_joints = &q;
    smsg *rep;
    r = ctl_call(x, &m, &rep);
    free(ids);
    if (r) return r;
    const Physd__V1__JointStates *js = rep->reply->joints;
    if (x->json) {
        ctl_print_message(&js->base);
    } else {
        printf("%-14s %-9s %-14s %-14s %s\n", "JOINT", "TYPE", "BODY_A", "BODY_B", "DEFINITION");
        for (size_t i = 0; js && i < js->n_joints; i++) {
            Physd__V1__JointDef *d = js->joints[i]->def;
            char type[32] = "?";
            if (d) pbj_enum_name(&physd__v1__joint_type__descriptor, d->type, type, sizeof type);
            printf("%-14llu %-9s", (unsigned long long)js->joints[i]->joint_id, type);
            print_ref(d ? d->body_a : NULL);
            print_ref(d ? d->body_b : NULL);
            /* The rest of the definition as compact JSON. */
            if (d) {
                Physd__V1__BodyRef *a = d->body_a, *b = d->body_b;
                Physd__V1__JointType t = d->type;
                d->body_a = d->body_b = NULL;
                d->type = 0;
                jw j;
                jw_init(&j, 0);
                pbj_write(&j, &d->base, 0);
                printf(" %s", j.buf ? j.buf : "");
                jw_free(&j);
                d->body_a = a;
                d->body_b = b;
                d->type = t;
            }
            printf("\n");
        }
    }
    ctl_free(rep);
    return 0;
}

int physctl_joint(ctl *x, int argc, char **argv) {
    static const char *const subs[] = {"add", "remove", "list"};
    if (argc < 2) return ctl_fail(x, EXIT_USAGE, "missing add, remove or list (see physctl joint --help)");
    if (!strcmp(argv[1], "add")) return joint_add(x, argc, argv);
    if (!strcmp(argv[1], "remove")) return joint_remove(x, argc, argv);
    if (!strcmp(argv[1], "list")) return joint_list(x, argc, argv);
    char near[100];
    if (suggest_nearest(argv[1], subs, 3, near, sizeof near))
        return ctl_fail(x, EXIT_USAGE, "unknown joint command '%s'; did you mean %s?", argv[1], near);
    return ctl_fail(x, EXIT_USAGE, "unknown joint command '%s' (add, remove or list)", argv[1]);
}

/* ----------------------------------------------------------------- ray */

int physctl_ray(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    if (argc < 4) return ctl_fail(x, EXIT_USAGE, "usage: physctl ray WORLD ORIGIN DIRECTION [MAX_DISTANCE]");
    if (argc > 5) return ctl_fail(x, EXIT_USAGE, "unexpected argument '%s'", argv[5]);
    double o[3], d[3], max = 1e6;
    if ((r = vec_arg(x, "ORIGIN", argv[2], 3, o)) || (r = vec_arg(x, "DIRECTION", argv[3], 3, d))) return r;
    if (argc > 4) {
        char *end;
        max = strtod(argv[4], &end);
        if (*end || end == argv[4] || !(max >= 0) || !isfinite(max))
            return ctl_fail(x, EXIT_USAGE, "MAX_DISTANCE: expected a number >= 0, got '%s'", argv[4]);
    }
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Raycast rc = PHYSD__V1__RAYCAST__INIT;
    Physd__V1__Vec3 ov, dv;
    set_vec3(&ov, o);
    set_vec3(&dv, d);
    rc.world_id = w;
    rc.origin = &ov;
    rc.direction = &dv;
    rc.max_distance = max;
    m.request_case = REQ(RAYCAST);
    m.raycast = &rc;
    smsg *rep;
    if ((r = ctl_call(x, &m, &rep))) return r;
    const Physd__V1__RaycastResult *h = rep->reply->ray;
    if (x->json) {
        ctl_print_message(&h->base);
    } else if (!h || !h->hit) {
        printf("no hit within %g m\n", max);
    } else {
        const Physd__V1__Vec3 zero = PHYSD__V1__VEC3__INIT;
        const Physd__V1__Vec3 *p = h->point ? h->point : &zero, *nn = h->normal ? h->normal : &zero;
        printf("hit body %llu (shape %llu) at %.6g m: point (%.6g, %.6g, %.6g), normal (%.4g, %.4g, %.4g)\n",
               (unsigned long long)h->body_id, (unsigned long long)h->shape_id, h->distance, p->x, p->y, p->z, nn->x,
               nn->y, nn->z);
    }
    ctl_free(rep);
    return 0;
}

/* ---------------------------------------------------------------- body */

int physctl_body(ctl *x, int argc, char **argv) {
    uint64_t w;
    int r = ctl_world_arg(x, argc, argv, 1, &w);
    if (r) return r;
    int shapes = 0;
    uint64_t *ids = calloc((size_t)argc + 1, sizeof *ids);
    size_t n = 0;
    if (!ids) return ctl_fail(x, EXIT_LOST, "out of memory");
    for (int i = 2; i < argc && !r; i++) {
        if (!strcmp(argv[i], "--shapes"))
            shapes = 1;
        else if (ctl_parse_u64(argv[i], &ids[n]) || ids[n] == 0)
            r = ctl_fail(x, EXIT_USAGE, "bad body id '%s'", argv[i]);
        else
            n++;
    }
    if (!r && !n) r = ctl_fail(x, EXIT_USAGE, "missing BODY id(s) (physctl dump WORLD shows every body)");
    smsg *rep = NULL;
    if (!r) {
        Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
        Physd__V1__QueryBodies q = PHYSD__V1__QUERY_BODIES__INIT;
        q.world_id = w;
        q.body_ids = ids;
        q.n_body_ids = n;
        q.include_shapes = shapes;
        m.request_case = REQ(QUERY_BODIES);
        m.query_bodies = &q;
        r = ctl_call(x, &m, &rep);
    }
    free(ids);
    if (r) return r;
    const Physd__V1__BodyStates *bs = rep->reply->bodies;
    if (x->json) {
        ctl_print_message(&bs->base);
    } else {
        for (size_t i = 0; bs && i < bs->n_bodies; i++) {
            const Physd__V1__BodyState *b = bs->bodies[i];
            const Physd__V1__Vec3 zero = PHYSD__V1__VEC3__INIT;
            const Physd__V1__Quat ident = {PROTOBUF_C_MESSAGE_INIT(&physd__v1__quat__descriptor), 0, 0, 0, 1};
            const Physd__V1__Vec3 *p = b->pose && b->pose->position ? b->pose->position : &zero;
            const Physd__V1__Quat *q = b->pose && b->pose->orientation ? b->pose->orientation : &ident;
            const Physd__V1__Vec3 *v = b->linear_velocity ? b->linear_velocity : &zero;
            const Physd__V1__Vec3 *a = b->angular_velocity ? b->angular_velocity : &zero;
            char type[32] = "?";
            pbj_enum_name(&physd__v1__body_type__descriptor, b->type, type, sizeof type);
            printf("body %llu (%s, %g kg, %u shape%s)\n", (unsigned long long)b->body_id, type, b->mass, b->shape_count,
                   b->shape_count == 1 ? "" : "s");
            printf("  position (%.6g, %.6g, %.6g)  orientation (%.6g, %.6g, %.6g, %.6g)\n", p->x, p->y, p->z, q->x,
                   q->y, q->z, q->w);
            printf("  velocity (%.6g, %.6g, %.6g) m/s  angular (%.6g, %.6g, %.6g) rad/s\n", v->x, v->y, v->z, a->x,
                   a->y, a->z);
            for (size_t k = 0; k < b->n_shapes; k++) {
                jw j;
                jw_init(&j, 0);
                pbj_write(&j, &b->shapes[k]->def->base, 0);
                printf("  shape %llu %s\n", (unsigned long long)b->shapes[k]->shape_id, j.buf ? j.buf : "");
                jw_free(&j);
            }
        }
    }
    ctl_free(rep);
    return 0;
}
