/*
 * engine_physd.c — the benchmark's physd adapter.
 *
 * Normal path: a fresh physd world is built with the scene's preset
 * (ph_scene_build, the same call the description was read from), so physd
 * runs its scene exactly as shipped, preset settings included; then the
 * harness configuration is applied (time step, substeps, iterations, gravity)
 * and settings.record_merits is switched off unless asked for, because the
 * other engines compute no per-iteration merits either. With
 * cfg->physd_from_desc (or a description that is not a preset) the world is
 * instead rebuilt from the neutral description with the public API, mass
 * properties set to the described ones, which checks the read-back.
 *
 * Failure modes: a core call failing, or a preset whose bodies differ from
 * the description (count or initial pose), make create fail with a message.
 * A failing step is reported once on stderr.
 *
 * Invariants: body i of the description is ids[i], the world's i-th body in
 * slot order.
 */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physd/ph_core.h"
#include "physd/ph_scenes.h"

typedef struct physd_engine {
    ph_world_id world;
    int body_count;
    ph_body_id *ids;
    ph_contact_info *contacts;
    int contact_cap;
    int step_error_reported;
    ph_step_stats *stats; /* large: on the heap */
    int from_preset;
    int threads;
} physd_engine;

static void physd_destroy(void *p) {
    physd_engine *e = p;
    if (!e) return;
    if (e->world.index1) ph_world_destroy(e->world);
    free(e->ids);
    free(e->contacts);
    free(e->stats);
    free(e);
}

static void *fail(physd_engine *e, char *err, size_t errlen, const char *what, int code) {
    if (code)
        snprintf(err, errlen, "physd: %s: %s", what, ph_strerror(code));
    else
        snprintf(err, errlen, "physd: %s", what);
    physd_destroy(e);
    return NULL;
}

static int build_from_desc(physd_engine *e, const scene_desc *d, char *err, size_t errlen) {
    ph_body_id *made = calloc((size_t)d->body_count + 1, sizeof *made);
    if (!made) {
        snprintf(err, errlen, "physd: out of memory");
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < d->body_count && rc == 0; i++) {
        const sd_body *b = &d->bodies[i];
        ph_body_def bd = ph_default_body_def();
        bd.type = b->type == SD_BODY_STATIC      ? PH_BODY_STATIC
                  : b->type == SD_BODY_KINEMATIC ? PH_BODY_KINEMATIC
                                                 : PH_BODY_DYNAMIC;
        bd.position = b->position;
        bd.orientation = b->orientation;
        bd.linear_velocity = b->linear_velocity;
        bd.angular_velocity = b->angular_velocity;
        made[i] = ph_body_create(e->world, &bd, &rc);
        if (rc) {
            snprintf(err, errlen, "physd: ph_body_create: %s", ph_strerror(rc));
            break;
        }
        for (int k = 0; k < b->shape_count && rc == 0; k++) {
            const sd_shape *s = &d->shapes[b->first_shape + k];
            ph_shape_def sd = ph_default_shape_def();
            sd.type = s->type == SD_SHAPE_SPHERE    ? PH_SHAPE_SPHERE
                      : s->type == SD_SHAPE_BOX     ? PH_SHAPE_BOX
                      : s->type == SD_SHAPE_CAPSULE ? PH_SHAPE_CAPSULE
                                                    : PH_SHAPE_PLANE;
            sd.radius = s->radius;
            sd.half_extents = s->half_extents;
            sd.half_height = s->half_height;
            sd.normal = s->normal;
            sd.offset = s->offset;
            sd.local = s->local;
            sd.friction = s->friction;
            sd.restitution = s->restitution;
            ph_shape_create(made[i], &sd, &rc);
            if (rc) snprintf(err, errlen, "physd: ph_shape_create: %s", ph_strerror(rc));
        }
        if (rc == 0 && b->type == SD_BODY_DYNAMIC) {
            rc = ph_body_set_mass(made[i], b->mass, b->inertia);
            if (rc) snprintf(err, errlen, "physd: ph_body_set_mass: %s", ph_strerror(rc));
        }
    }
    for (int j = 0; j < d->joint_count && rc == 0; j++) {
        const sd_joint *jt = &d->joints[j];
        ph_joint_def jd = ph_default_joint_def();
        jd.type = PH_JOINT_BALL;
        jd.body_a = made[jt->body_a];
        if (jt->body_b >= 0) jd.body_b = made[jt->body_b];
        jd.anchor_a = jt->anchor_a;
        jd.anchor_b = jt->anchor_b;
        ph_joint_create(e->world, &jd, &rc);
        if (rc) snprintf(err, errlen, "physd: ph_joint_create: %s", ph_strerror(rc));
    }
    free(made);
    return rc ? -1 : 0;
}

static void *physd_create(const scene_desc *d, const engine_config *cfg, char *err, size_t errlen) {
    physd_engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "physd: out of memory");
        return NULL;
    }
    e->stats = calloc(1, sizeof *e->stats);
    e->ids = calloc((size_t)d->body_count + 1, sizeof *e->ids);
    if (!e->stats || !e->ids) return fail(e, err, errlen, "out of memory", 0);

    ph_world_def wd = ph_default_world_def();
    if (wd.max_bodies < d->body_count) wd.max_bodies = d->body_count;
    if (wd.max_joints < d->joint_count) wd.max_joints = d->joint_count;
    int rc = 0;
    e->world = ph_world_create(&wd, &rc);
    if (rc || !e->world.index1) return fail(e, err, errlen, "ph_world_create", rc);

    e->from_preset = !cfg->physd_from_desc && d->name[0] && ph_scene_find(d->name) != NULL;
    if (e->from_preset) {
        rc = ph_scene_build(e->world, d->name);
        if (rc) return fail(e, err, errlen, "ph_scene_build", rc);
    } else if (build_from_desc(e, d, err, errlen) != 0) {
        physd_destroy(e);
        return NULL;
    }

    ph_settings s;
    rc = ph_world_get_settings(e->world, &s);
    if (rc) return fail(e, err, errlen, "ph_world_get_settings", rc);
    s.time_step = cfg->time_step;
    s.substeps = cfg->substeps;
    s.iterations = cfg->iterations;
    s.gravity = cfg->gravity;
    s.record_merits = cfg->physd_record_merits;
    s.simd = (ph_simd)cfg->physd_simd;
    s.threads = cfg->physd_threads > 0 ? cfg->physd_threads : 1;
    if (cfg->physd_joint_once) s.joint_step_once = cfg->physd_joint_once > 0;
    s.sleep = cfg->sleep;
    rc = ph_world_set_settings(e->world, &s);
    if (rc) return fail(e, err, errlen, "ph_world_set_settings", rc);
    e->threads = s.threads;
    if (cfg->physd_pass_profile) {
        rc = ph_world_set_pass_profile(e->world, 1);
        if (rc) return fail(e, err, errlen, "ph_world_set_pass_profile", rc);
    }

    int n = ph_world_get_bodies(e->world, e->ids, d->body_count + 1);
    if (n < 0) return fail(e, err, errlen, "ph_world_get_bodies", n);
    if (n != d->body_count) return fail(e, err, errlen, "the world's body count differs from the description", 0);
    e->body_count = n;
    for (int i = 0; i < n; i++) {
        ph_transform t;
        rc = ph_body_get_transform(e->ids[i], &t);
        if (rc) return fail(e, err, errlen, "ph_body_get_transform", rc);
        if (ph_len(ph_sub(t.p, d->bodies[i].position)) > 1e-12)
            return fail(e, err, errlen, "a body's initial position differs from the description", 0);
    }
    return e;
}

static void physd_step(void *p) {
    physd_engine *e = p;
    int rc = ph_world_step(e->world);
    if (rc && !e->step_error_reported) {
        fprintf(stderr, "physd: ph_world_step: %s\n", ph_strerror(rc));
        e->step_error_reported = 1;
    }
}

static void physd_get_pose(void *p, int i, ph_vec3 *pos, ph_quat *rot) {
    physd_engine *e = p;
    ph_transform t;
    if (ph_body_get_transform(e->ids[i], &t) != 0) {
        *pos = ph_v3(NAN, NAN, NAN);
        rot->x = rot->y = rot->z = rot->w = NAN;
        return;
    }
    *pos = t.p;
    *rot = t.q;
}

/* Copies the last step's contacts into e->contacts; returns their number. */
static int fetch_contacts(physd_engine *e) {
    int total = ph_world_get_contacts(e->world, e->contacts, e->contact_cap);
    if (total > e->contact_cap) {
        int cap = total + total / 2 + 16;
        ph_contact_info *c = realloc(e->contacts, (size_t)cap * sizeof *c);
        if (!c) return -1;
        e->contacts = c;
        e->contact_cap = cap;
        total = ph_world_get_contacts(e->world, e->contacts, e->contact_cap);
    }
    return total < e->contact_cap ? total : e->contact_cap;
}

static double physd_max_penetration(void *p) {
    physd_engine *e = p;
    int n = fetch_contacts(e);
    if (n < 0) return NAN;
    double deepest = 0;
    for (int i = 0; i < n; i++)
        if (e->contacts[i].depth > deepest) deepest = e->contacts[i].depth;
    return deepest;
}

static int physd_contact_count(void *p) { return fetch_contacts(p); }

static void physd_extra(void *p, engine_extra *out) {
    physd_engine *e = p;
    if (ph_world_get_stats(e->world, e->stats) != 0) return;
    out->final_merit = e->stats->fischer_final;
    out->final_rel_residual = e->stats->rel_residual;
    out->final_minmap = e->stats->minmap_final;
}

static void physd_describe(void *p, char *buf, size_t len) {
    physd_engine *e = p;
    ph_settings s;
    if (ph_world_get_settings(e->world, &s) != 0) {
        snprintf(buf, len, "\"error\":\"ph_world_get_settings\"");
        return;
    }
    snprintf(buf, len,
             "\"built_from\":\"%s\",\"method\":%d,\"friction_model\":%d,\"ordering\":%d,"
             "\"contact_k\":%.9g,\"contact_d\":%.9g,\"joint_k\":%.9g,\"joint_d\":%.9g,"
             "\"warm_start\":%d,\"warm_start_factor\":%.9g,\"contact_margin\":%.9g,"
             "\"restitution_threshold\":%.9g,\"tolerance\":%.9g,\"gyroscopic\":%d,\"record_merits\":%d,"
             "\"sleep\":%d,\"sleep_linear\":%.9g,\"sleep_angular\":%.9g,\"sleep_time\":%.9g,"
             "\"joint_step_once\":%d",
             e->from_preset ? "preset" : "description", (int)s.method, (int)s.friction_model, (int)s.ordering,
             s.contact.k, s.contact.d, s.joint.k, s.joint.d, s.warm_start, s.warm_start_factor, s.contact_margin,
             s.restitution_threshold, s.tolerance, s.gyroscopic, s.record_merits, s.sleep, s.sleep_linear,
             s.sleep_angular, s.sleep_time, s.joint_step_once);
}

static int physd_awake_count(void *p) {
    physd_engine *e = p;
    int n = 0;
    for (int i = 0; i < e->body_count; i++) {
        ph_body_state st;
        int awake = 0;
        if (ph_body_get_state(e->ids[i], &st) == 0 && st.type == PH_BODY_DYNAMIC &&
            ph_body_is_awake(e->ids[i], &awake) == 0)
            n += awake;
    }
    return n;
}

static void physd_pass_profile(void *p, char *buf, size_t len) {
    physd_engine *e = p;
    enum { MAX = 48 };
    ph_pass_time t[MAX];
    buf[0] = 0;
    const int n = ph_world_get_pass_profile(e->world, t, MAX);
    size_t at = 0;
    for (int i = 0; i < n && i < MAX && at < len; i++) {
        int k = snprintf(buf + at, len - at, "%s{\"name\":\"%s\",\"calls\":%lld,\"wall_ms\":%.6g,\"busy_ms\":[",
                         i ? "," : "", t[i].name, (long long)t[i].calls, t[i].wall_ms);
        for (int w = 0; w < e->threads && w < PH_PASS_WORKERS && k >= 0 && at + (size_t)k < len; w++) {
            const int m = snprintf(buf + at + k, len - at - (size_t)k, "%s%.6g", w ? "," : "", t[i].busy_ms[w]);
            k = m < 0 ? -1 : k + m;
        }
        if (k >= 0 && at + (size_t)k < len) k += snprintf(buf + at + k, len - at - (size_t)k, "]}");
        if (k < 0 || at + (size_t)k >= len) { /* (too long: the passes that fit) */
            buf[at] = 0;
            break;
        }
        at += (size_t)k;
    }
}

static const char *physd_precision(void) { return "double"; }
static const char *physd_version(void) { return "dev"; }

const engine_vtable engine_physd = {
    .name = "physd",
    .create = physd_create,
    .step = physd_step,
    .get_pose = physd_get_pose,
    .max_penetration = physd_max_penetration,
    .contact_count = physd_contact_count,
    .extra = physd_extra,
    .describe = physd_describe,
    .precision = physd_precision,
    .version = physd_version,
    .destroy = physd_destroy,
    .awake_count = physd_awake_count,
    .pass_profile = physd_pass_profile,
};
