/*
 * scene_desc.c — reading a physd world back into the neutral description,
 * and small helpers on the description.
 *
 * Normal path: list the world's bodies in slot order, copy each body's state
 * (type, pose, velocities, mass, principal inertia) and its shapes' defs,
 * then list the joints and turn their body handles into body indices.
 *
 * Failure modes: a core call returning an error, a joint whose bodies are not
 * in the body list, a joint type other than ball, or out of memory; each
 * returns -1 with a message and leaves d empty.
 */
#include "scene_desc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sd_free(scene_desc *d) {
    free(d->bodies);
    free(d->shapes);
    free(d->joints);
    memset(d, 0, sizeof *d);
}

int sd_dynamic_count(const scene_desc *d) {
    int n = 0;
    for (int i = 0; i < d->body_count; i++)
        if (d->bodies[i].type == SD_BODY_DYNAMIC) n++;
    return n;
}

void sd_joint_anchors(const scene_desc *d, int j, const ph_vec3 *pos, const ph_quat *rot, ph_vec3 *wa, ph_vec3 *wb) {
    const sd_joint *jt = &d->joints[j];
    *wa = ph_add(pos[jt->body_a], ph_rotate(rot[jt->body_a], jt->anchor_a));
    if (jt->body_b < 0)
        *wb = jt->anchor_b;
    else
        *wb = ph_add(pos[jt->body_b], ph_rotate(rot[jt->body_b], jt->anchor_b));
}

static int same_body(ph_body_id a, ph_body_id b) {
    return a.index1 == b.index1 && a.world0 == b.world0 && a.gen == b.gen;
}

static int body_index(const ph_body_id *ids, int n, ph_body_id b) {
    for (int i = 0; i < n; i++)
        if (same_body(ids[i], b)) return i;
    return -1;
}

static int fail(scene_desc *d, ph_body_id *ids, char *err, size_t errlen, const char *what, int code) {
    if (code != 0)
        snprintf(err, errlen, "%s: %s", what, ph_strerror(code));
    else
        snprintf(err, errlen, "%s", what);
    free(ids);
    sd_free(d);
    return -1;
}

int sd_from_physd_world(ph_world_id w, const char *name, scene_desc *d, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name ? name : "");

    ph_settings st;
    int rc = ph_world_get_settings(w, &st);
    if (rc != 0) return fail(d, NULL, err, errlen, "ph_world_get_settings", rc);
    d->gravity = st.gravity;

    int nb = ph_world_body_count(w);
    if (nb < 0) return fail(d, NULL, err, errlen, "ph_world_body_count", nb);
    ph_body_id *ids = calloc((size_t)(nb > 0 ? nb : 1), sizeof *ids);
    d->bodies = calloc((size_t)(nb > 0 ? nb : 1), sizeof *d->bodies);
    if (!ids || !d->bodies) return fail(d, ids, err, errlen, "out of memory", 0);
    rc = ph_world_get_bodies(w, ids, nb);
    if (rc < 0) return fail(d, ids, err, errlen, "ph_world_get_bodies", rc);
    if (rc != nb) return fail(d, ids, err, errlen, "ph_world_get_bodies returned fewer bodies than the count", 0);
    d->body_count = nb;

    /* First pass: states and the total number of shapes. */
    int total_shapes = 0;
    for (int i = 0; i < nb; i++) {
        ph_body_state s;
        rc = ph_body_get_state(ids[i], &s);
        if (rc != 0) return fail(d, ids, err, errlen, "ph_body_get_state", rc);
        sd_body *b = &d->bodies[i];
        switch (s.type) {
        case PH_BODY_STATIC:
            b->type = SD_BODY_STATIC;
            break;
        case PH_BODY_KINEMATIC:
            b->type = SD_BODY_KINEMATIC;
            break;
        case PH_BODY_DYNAMIC:
            b->type = SD_BODY_DYNAMIC;
            break;
        default:
            return fail(d, ids, err, errlen, "unknown body type", 0);
        }
        b->position = s.position;
        b->orientation = s.orientation;
        b->linear_velocity = s.linear_velocity;
        b->angular_velocity = s.angular_velocity;
        b->mass = s.mass;
        b->inertia = s.inertia;
        b->first_shape = total_shapes;
        b->shape_count = s.shape_count;
        total_shapes += s.shape_count;
    }

    d->shapes = calloc((size_t)(total_shapes > 0 ? total_shapes : 1), sizeof *d->shapes);
    ph_shape_id sid[PH_MAX_SHAPES_PER_BODY];
    if (!d->shapes) return fail(d, ids, err, errlen, "out of memory", 0);
    for (int i = 0; i < nb; i++) {
        sd_body *b = &d->bodies[i];
        if (b->shape_count > PH_MAX_SHAPES_PER_BODY)
            return fail(d, ids, err, errlen, "body has more than PH_MAX_SHAPES_PER_BODY shapes", 0);
        rc = ph_body_get_shapes(ids[i], sid, PH_MAX_SHAPES_PER_BODY);
        if (rc < 0) return fail(d, ids, err, errlen, "ph_body_get_shapes", rc);
        if (rc != b->shape_count) return fail(d, ids, err, errlen, "shape count differs from the body state", 0);
        for (int k = 0; k < rc; k++) {
            ph_shape_def sd;
            int rs = ph_shape_get_def(sid[k], &sd);
            if (rs != 0) return fail(d, ids, err, errlen, "ph_shape_get_def", rs);
            sd_shape *o = &d->shapes[b->first_shape + k];
            switch (sd.type) {
            case PH_SHAPE_SPHERE:
                o->type = SD_SHAPE_SPHERE;
                break;
            case PH_SHAPE_BOX:
                o->type = SD_SHAPE_BOX;
                break;
            case PH_SHAPE_CAPSULE:
                o->type = SD_SHAPE_CAPSULE;
                break;
            case PH_SHAPE_PLANE:
                o->type = SD_SHAPE_PLANE;
                break;
            default:
                return fail(d, ids, err, errlen, "unknown shape type", 0);
            }
            o->radius = sd.radius;
            o->half_extents = sd.half_extents;
            o->half_height = sd.half_height;
            o->normal = sd.normal;
            o->offset = sd.offset;
            o->local = sd.local;
            o->friction = sd.friction;
            o->restitution = sd.restitution;
        }
    }
    d->shape_count = total_shapes;

    int nj = ph_world_joint_count(w);
    if (nj < 0) return fail(d, ids, err, errlen, "ph_world_joint_count", nj);
    if (nj > 0) {
        ph_joint_id *jids = calloc((size_t)nj, sizeof *jids);
        d->joints = calloc((size_t)nj, sizeof *d->joints);
        if (!jids || !d->joints) {
            free(jids);
            return fail(d, ids, err, errlen, "out of memory", 0);
        }
        rc = ph_world_get_joints(w, jids, nj);
        if (rc != nj) {
            free(jids);
            return fail(d, ids, err, errlen, "ph_world_get_joints", rc < 0 ? rc : 0);
        }
        for (int j = 0; j < nj; j++) {
            ph_joint_def jd;
            rc = ph_joint_get_def(jids[j], &jd);
            if (rc != 0) {
                free(jids);
                return fail(d, ids, err, errlen, "ph_joint_get_def", rc);
            }
            if (jd.type != PH_JOINT_BALL) {
                free(jids);
                return fail(d, ids, err, errlen, "only ball joints can be described", 0);
            }
            sd_joint *o = &d->joints[j];
            o->type = SD_JOINT_BALL;
            o->body_a = body_index(ids, nb, jd.body_a);
            o->body_b = jd.body_b.index1 == 0 ? -1 : body_index(ids, nb, jd.body_b);
            o->anchor_a = jd.anchor_a;
            o->anchor_b = jd.anchor_b;
            if (o->body_a < 0 || (jd.body_b.index1 != 0 && o->body_b < 0)) {
                free(jids);
                return fail(d, ids, err, errlen, "joint body not found in the body list", 0);
            }
        }
        free(jids);
        d->joint_count = nj;
    }
    free(ids);
    return 0;
}
