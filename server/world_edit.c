/*
 * world_edit.c — an edit batch applied to a hosted world atomically: a dry
 * run that checks every op against the world and the ops before it, then
 * the ops applied in order (ps_host_apply_edits).
 *
 * Normal path: the dry run resolves each op's body references (existing
 * ids, bodies added earlier in the batch, removed ones), follows the pose
 * and speed bounds of every body the batch moves (track), and checks what
 * the core would refuse; only when the whole batch passes are the ops
 * applied, and the new ids written per op.
 *
 * Failure modes: the first op that fails the dry run gives its status and
 * index and nothing is applied; out of memory is INTERNAL. An op that the
 * core refuses after the dry run passed is a bug: logged and reported as
 * INTERNAL with the ops before it applied.
 *
 * Invariants: a batch the dry run accepts never fails in the core (speed
 * bounds are upper bounds); the world's body and joint counts and the
 * host's edit counters are updated after every batch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"

/* ---------------------------------------------------------------- edits */

/* What the dry run knows of a body the batch moves: its pose and bounds
 * of its speeds after the ops so far. The core refuses an impulse or a
 * kinematic target that would put a body outside the envelope, and a
 * distance joint longer than PH_MAX_JOINT_DISTANCE; those checks depend
 * on the state the earlier ops of the batch leave, so the dry run follows
 * it (with upper bounds for speeds: a batch it accepts never fails). */
typedef struct track {
    uint64_t id; /* existing body (new_op < 0) */
    int new_op;  /* or the AddBody op */
    int type;
    ph_vec3 p;
    ph_quat q;
    double vb, wb;          /* bounds of |v| and |w| */
    double inv_mass, inv_i; /* 1/m and the largest 1/I of a principal moment (0: locked or not dynamic) */
} track;

/* A set of non-zero ids (open addressing, cap a power of two at least
 * twice what it will hold): the batch's lookups in constant time. A batch
 * of 10 000 ops searched lists of up to 20 000 entries op by op before
 * (31 ms a batch, 69 % of it in that search; bench/edit_flood.py). */
typedef struct id_set {
    uint64_t *keys; /* 0: empty */
    size_t mask;
} id_set;

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

static int id_set_init(id_set *s, size_t n) {
    const size_t cap = pow2_at_least(2 * n + 1);
    s->keys = calloc(cap, sizeof *s->keys);
    s->mask = cap - 1;
    return s->keys ? 0 : -1;
}

static int id_set_has(const id_set *s, uint64_t id) {
    if (id == 0) return 0;
    for (size_t i = mix64(id) & s->mask;; i = (i + 1) & s->mask) {
        if (s->keys[i] == id) return 1;
        if (s->keys[i] == 0) return 0;
    }
}

static void id_set_add(id_set *s, uint64_t id) {
    size_t i = mix64(id) & s->mask;
    while (s->keys[i] != 0 && s->keys[i] != id)
        i = (i + 1) & s->mask;
    s->keys[i] = id;
}

/* Per-batch bookkeeping for the dry run. */
typedef struct batch_state {
    track *trk;
    size_t ntrk;
    uint32_t *trk_index; /* trk[] by body reference: index + 1, 0 empty (trk_mask + 1 slots) */
    size_t trk_mask;
    const ps_edit *ops;
    size_t n;
    id_set removed;       /* body ids removed earlier in the batch */
    uint8_t *new_removed; /* per op: the body this AddBody creates was removed */
    id_set removed_joints;
    int peak_bodies, peak_joints; /* the most the batch makes the world hold at once (dry_run) */
} batch_state;

static int was_removed(const batch_state *b, uint64_t id) { return id_set_has(&b->removed, id); }

/* Checks a body reference at op i; returns the body type in *type. */
static int check_ref(ps_host *h, batch_state *b, size_t i, const ps_body_ref *r, const char *what, int *type,
                     ps_status *st) {
    if (r->new_op >= 0) {
        if (b->new_removed[r->new_op])
            return ps_fail_at(st, PS_ST_NOT_FOUND, (uint32_t)i,
                              "op %zu: %s: the body of op %d was removed earlier in the batch", i, what, r->new_op);
        *type = b->ops[r->new_op].bdef.type;
        return 0;
    }
    ph_body_state s;
    ph_body_id id = ps_core_body(h, r->id);
    if (was_removed(b, r->id) || ph_body_get_state(id, &s) != PH_OK)
        return ps_fail_at(st, PS_ST_NOT_FOUND, (uint32_t)i, "op %zu: %s: no such body %llu", i, what,
                          (unsigned long long)r->id);
    *type = s.type;
    return 0;
}

/* The tracked state of the body r names (added on first use). */
static track *track_of(ps_host *h, batch_state *b, const ps_body_ref *r) {
    const uint64_t key = r->new_op >= 0 ? (uint64_t)r->new_op * 2 + 1 : r->id * 2;
    size_t slot = mix64(key) & b->trk_mask;
    for (; b->trk_index[slot]; slot = (slot + 1) & b->trk_mask) {
        track *k = &b->trk[b->trk_index[slot] - 1];
        if (r->new_op >= 0 ? k->new_op == r->new_op : (k->new_op < 0 && k->id == r->id)) return k;
    }
    track *t = &b->trk[b->ntrk++];
    b->trk_index[slot] = (uint32_t)b->ntrk;
    memset(t, 0, sizeof *t);
    t->new_op = r->new_op;
    t->id = r->id;
    if (r->new_op >= 0) {
        const ph_body_def *d = &b->ops[r->new_op].bdef;
        t->type = d->type;
        t->p = d->position;
        t->q = ph_quat_normalize(d->orientation);
        t->vb = ph_len(d->linear_velocity);
        t->wb = ph_len(d->angular_velocity);
        return t; /* mass unknown until created (impulses on it are refused) */
    }
    ph_body_state s;
    if (ph_body_get_state(ps_core_body(h, r->id), &s) != PH_OK) return t;
    t->type = s.type;
    t->p = s.position;
    t->q = s.orientation;
    t->vb = ph_len(s.linear_velocity);
    t->wb = ph_len(s.angular_velocity);
    if (s.type == PH_BODY_DYNAMIC) {
        t->inv_mass = s.mass > 0 ? 1.0 / s.mass : 0;
        const double m[3] = {s.inertia.x, s.inertia.y, s.inertia.z};
        for (int k = 0; k < 3; k++)
            if (m[k] > 0 && 1.0 / m[k] > t->inv_i) t->inv_i = 1.0 / m[k];
    }
    return t;
}

/* 1 when speeds within the envelope (with a margin for rounding). */
static int speeds_fit(double v, double w) {
    return v <= PH_ENVELOPE_LINEAR_SPEED * (1 - 1e-9) && w <= PH_ENVELOPE_ANGULAR_SPEED * (1 - 1e-9);
}

static int track_op(ps_host *h, batch_state *b, size_t i, ps_status *st) {
    const ps_edit *e = &b->ops[i];
    track *t;
    switch (e->kind) {
    case PS_EDIT_SET_POSE:
        t = track_of(h, b, &e->body);
        t->p = e->v1;
        t->q = e->q;
        return 0;
    case PS_EDIT_SET_VELOCITY:
        t = track_of(h, b, &e->body);
        t->vb = ph_len(e->v1);
        t->wb = ph_len(e->v2);
        return 0;
    case PS_EDIT_APPLY_IMPULSE: {
        t = track_of(h, b, &e->body);
        if (t->type != PH_BODY_DYNAMIC) return 0; /* no effect on other bodies */
        if (t->new_op >= 0)
            return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                              "op %zu: apply_impulse on a body added in the same batch: give it its velocity in "
                              "add_body instead",
                              i);
        const ph_vec3 r = e->has_point ? ph_sub(e->v2, t->p) : ph_v3(0, 0, 0);
        t->vb += ph_len(e->v1) * t->inv_mass;
        t->wb += ph_len(ph_cross(r, e->v1)) * t->inv_i;
        if (!speeds_fit(t->vb, t->wb))
            return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                              "op %zu: apply_impulse would take the body past the envelope (|v| <= %g m/s, |w| <= %g "
                              "rad/s)",
                              i, PH_ENVELOPE_LINEAR_SPEED, PH_ENVELOPE_ANGULAR_SPEED);
        return 0;
    }
    case PS_EDIT_SET_KINEMATIC_TARGET: {
        t = track_of(h, b, &e->body);
        const double dt = h->settings.time_step;
        const double v = ph_len(ph_sub(e->v1, t->p)) / dt;
        ph_quat dq = ph_quat_mul(e->q, ph_quat_conj(t->q));
        if (dq.w < 0) dq = (ph_quat){-dq.x, -dq.y, -dq.z, -dq.w};
        const double sn = sqrt(dq.x * dq.x + dq.y * dq.y + dq.z * dq.z);
        const double w = 2.0 * atan2(sn, dq.w) / dt;
        if (!speeds_fit(v, w))
            return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                              "op %zu: set_kinematic_target: reaching it in one step of %g s needs |v| = %g m/s, |w| "
                              "= %g rad/s, past the envelope (%g, %g)",
                              i, dt, v, w, PH_ENVELOPE_LINEAR_SPEED, PH_ENVELOPE_ANGULAR_SPEED);
        t->vb = v;
        t->wb = w;
        return 0;
    }
    case PS_EDIT_ADD_JOINT: {
        if (e->jdef.type != PH_JOINT_DISTANCE || e->jdef.distance >= 0) return 0;
        track *a = track_of(h, b, &e->ja);
        ph_vec3 pa = ph_add(a->p, ph_rotate(a->q, e->jdef.anchor_a)), pb = e->jdef.anchor_b;
        if (e->jb.present) {
            track *tb = track_of(h, b, &e->jb);
            pb = ph_add(tb->p, ph_rotate(tb->q, e->jdef.anchor_b));
        }
        const double len = ph_len(ph_sub(pb, pa));
        if (!(len <= PH_MAX_JOINT_DISTANCE * (1 - 1e-9)))
            return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                              "op %zu: a distance joint of the current length %g m: at most %g m", i, len,
                              PH_MAX_JOINT_DISTANCE);
        return 0;
    }
    default:
        return 0;
    }
}

static int dry_run(ps_host *h, batch_state *b, ps_status *st) {
    int bodies = h->body_count, joints = h->joint_count;
    const int max_bodies = ps_max_bodies(h->srv);
    for (size_t i = 0; i < b->n; i++) {
        const ps_edit *e = &b->ops[i];
        int type = 0, tb = 0;
        switch (e->kind) {
        case PS_EDIT_ADD_BODY:
            if (++bodies > max_bodies)
                return ps_fail_at(st, PS_ST_EXHAUSTED, (uint32_t)i,
                                  "op %zu: the world would exceed max_bodies_per_world (%d)", i, max_bodies);
            if (bodies > b->peak_bodies) b->peak_bodies = bodies;
            break;
        case PS_EDIT_REMOVE_BODY:
            if (check_ref(h, b, i, &e->body, "remove_body", &type, st)) return st->code;
            if (e->body.new_op >= 0)
                b->new_removed[e->body.new_op] = 1;
            else
                id_set_add(&b->removed, e->body.id);
            bodies--;
            break;
        case PS_EDIT_SET_POSE:
            if (check_ref(h, b, i, &e->body, "set_pose", &type, st)) return st->code;
            break;
        case PS_EDIT_SET_VELOCITY:
            if (check_ref(h, b, i, &e->body, "set_velocity", &type, st)) return st->code;
            if (type == PH_BODY_STATIC)
                return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, "op %zu: set_velocity on a static body", i);
            break;
        case PS_EDIT_APPLY_FORCE:
        case PS_EDIT_APPLY_TORQUE:
        case PS_EDIT_APPLY_IMPULSE:
            if (check_ref(h, b, i, &e->body, "apply", &type, st)) return st->code;
            break;
        case PS_EDIT_SET_KINEMATIC_TARGET:
            if (check_ref(h, b, i, &e->body, "set_kinematic_target", &type, st)) return st->code;
            if (type != PH_BODY_KINEMATIC)
                return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                                  "op %zu: set_kinematic_target on a body that is not kinematic", i);
            break;
        case PS_EDIT_ADD_JOINT:
            if (check_ref(h, b, i, &e->ja, "add_joint body_a", &type, st)) return st->code;
            if (e->jb.present && check_ref(h, b, i, &e->jb, "add_joint body_b", &tb, st)) return st->code;
            if (e->jb.present && e->ja.new_op == e->jb.new_op && (e->ja.new_op >= 0 || e->ja.id == e->jb.id))
                return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, "op %zu: a joint needs two different bodies", i);
            if (++joints > max_bodies)
                return ps_fail_at(st, PS_ST_EXHAUSTED, (uint32_t)i,
                                  "op %zu: the world would exceed its joint limit (%d)", i, max_bodies);
            if (joints > b->peak_joints) b->peak_joints = joints;
            break;
        case PS_EDIT_REMOVE_JOINT: {
            ph_joint_id j = ps_core_joint(h, e->joint);
            ph_joint_def jd;
            int gone = ph_joint_get_def(j, &jd) != PH_OK || id_set_has(&b->removed_joints, e->joint);
            if (!gone)
                gone = was_removed(b, ps_wire_body(h, jd.body_a)) ||
                       (jd.body_b.index1 && was_removed(b, ps_wire_body(h, jd.body_b)));
            if (gone)
                return ps_fail_at(st, PS_ST_NOT_FOUND, (uint32_t)i, "op %zu: no such joint %llu", i,
                                  (unsigned long long)e->joint);
            id_set_add(&b->removed_joints, e->joint);
            joints--;
            break;
        }
        default:
            return ps_fail_at(st, PS_ST_INTERNAL, (uint32_t)i, "op %zu: unknown op kind", i);
        }
        if (track_op(h, b, i, st)) return st->code;
    }
    return 0;
}

static ph_body_id resolve(ps_host *h, const ps_body_ref *r, const ph_body_id *created) {
    if (r->new_op >= 0) return created[r->new_op];
    return ps_core_body(h, r->id);
}

static int apply_one(ps_host *h, const ps_edit *e, ph_body_id *created, size_t i, uint64_t *new_id) {
    int err = PH_OK;
    ph_body_id b = {0, 0, 0};
    if (e->kind != PS_EDIT_ADD_BODY && e->kind != PS_EDIT_ADD_JOINT && e->kind != PS_EDIT_REMOVE_JOINT)
        b = resolve(h, &e->body, created);
    ph_transform t;
    switch (e->kind) {
    case PS_EDIT_ADD_BODY: {
        b = ph_body_create(h->world, &e->bdef, &err);
        if (err != PH_OK) return err;
        for (int k = 0; k < e->nshapes && err == PH_OK; k++)
            ph_shape_create(b, &e->shapes[k], &err);
        if (err == PH_OK && e->has_mass) err = ph_body_set_mass(b, e->mass, e->inertia);
        if (err != PH_OK) {
            ph_body_destroy(b);
            return err;
        }
        created[i] = b;
        *new_id = ps_wire_body(h, b);
        return 0;
    }
    case PS_EDIT_REMOVE_BODY:
        return ph_body_destroy(b);
    case PS_EDIT_SET_POSE:
        return ph_body_set_transform(b, e->v1, e->q);
    case PS_EDIT_SET_VELOCITY:
        return ph_body_set_velocity(b, e->v1, e->v2);
    case PS_EDIT_APPLY_FORCE:
        if (!e->has_point && (err = ph_body_get_transform(b, &t)) != PH_OK) return err;
        return ph_body_apply_force(b, e->v1, e->has_point ? e->v2 : t.p);
    case PS_EDIT_APPLY_TORQUE:
        return ph_body_apply_torque(b, e->v1);
    case PS_EDIT_APPLY_IMPULSE:
        if (!e->has_point && (err = ph_body_get_transform(b, &t)) != PH_OK) return err;
        return ph_body_apply_impulse(b, e->v1, e->has_point ? e->v2 : t.p);
    case PS_EDIT_SET_KINEMATIC_TARGET:
        return ph_body_set_kinematic_target(b, e->v1, e->q);
    case PS_EDIT_ADD_JOINT: {
        ph_joint_def d = e->jdef;
        d.body_a = resolve(h, &e->ja, created);
        if (e->jb.present) d.body_b = resolve(h, &e->jb, created);
        ph_joint_id j = ph_joint_create(h->world, &d, &err);
        if (err != PH_OK) return err;
        *new_id = ps_wire_joint(h, j);
        return 0;
    }
    case PS_EDIT_REMOVE_JOINT:
        return ph_joint_destroy(ps_core_joint(h, e->joint));
    default:
        return PH_ERR_INVALID_ARGUMENT;
    }
}

int ps_host_apply_edits(ps_host *h, const ps_edit *ops, size_t n, uint64_t *new_ids, ps_status *st) {
    batch_state b;
    memset(&b, 0, sizeof b);
    b.ops = ops;
    b.n = n;
    const int sets_ok = id_set_init(&b.removed, n) == 0 && id_set_init(&b.removed_joints, n) == 0;
    b.new_removed = calloc(n ? n : 1, 1);
    b.trk = malloc((2 * n + 1) * sizeof *b.trk); /* at most two bodies per op */
    const size_t tcap = pow2_at_least(2 * (2 * n + 1));
    b.trk_index = calloc(tcap, sizeof *b.trk_index);
    b.trk_mask = tcap - 1;
    ph_body_id *created = calloc(n ? n : 1, sizeof *created);
    int rc = 0;
    if (!sets_ok || !b.new_removed || !created || !b.trk || !b.trk_index) {
        rc = ps_fail(st, PS_ST_INTERNAL, "out of memory");
    } else if ((rc = dry_run(h, &b, st)) == 0) {
        /* A journal replaying (ps_max_bodies): a world built under a larger
         * max_bodies_per_world than today's gets the room its history
         * needs in the core (created with today's limit, so a world that
         * never needs more keeps the same snapshot bytes). */
        if (h->srv->replaying) ph_world_raise_limits(h->world, b.peak_bodies, b.peak_joints);
        for (size_t i = 0; i < n; i++) {
            new_ids[i] = 0;
            int err = apply_one(h, &ops[i], created, i, &new_ids[i]);
            if (err != PH_OK) {
                /* The dry run mirrors the core's checks, so this is a bug. */
                rc = ps_fail_at(st, PS_ST_INTERNAL, (uint32_t)i,
                                "op %zu failed after validation (%s); ops before it were applied", i, ph_strerror(err));
                ps_log("world %llu: %s", (unsigned long long)h->id, st->msg);
                break;
            }
        }
    }
    free(b.removed.keys);
    free(b.new_removed);
    free(b.removed_joints.keys);
    free(b.trk);
    free(b.trk_index);
    free(created);
    h->body_count = ph_world_body_count(h->world);
    h->joint_count = ph_world_joint_count(h->world);
    if (rc == 0) {
        h->edits_applied += n;
        h->batches_applied++;
    } else {
        h->batches_rejected++;
    }
    return rc;
}
