/*
 * engine_ode.c — the benchmark's Open Dynamics Engine adapter.
 *
 * Normal path: one dWorld, one hash space, one geom per description shape
 * (geoms of dynamic and kinematic bodies attached with their local offset,
 * geoms of static bodies placed in the world with no body, planes as ODE's
 * non-placeable dPlane), one dBody per non-static body with the description's
 * mass and principal inertia (centre of mass at the body origin), and one
 * ball joint per description joint with both anchors set exactly.
 *
 * A step is dSpaceCollide (up to 4 contacts per geom pair from dCollide,
 * each made a contact joint with the dContactApprox1 friction pyramid and
 * mu = sqrt(mu_a mu_b), no bounce, no soft ERP/CFM so the world's apply),
 * dWorldQuickStep with the configured iterations, then emptying the contact
 * joint group. ODE's documented defaults are left alone: ERP 0.2, CFM 1e-10
 * (double precision build; 1e-5 in single), SOR w 1.3, contact surface layer
 * 0, unlimited max correcting velocity, gyroscopic mode on, no damping.
 * Auto-disable (sleeping) is switched off explicitly (it is off by default);
 * with cfg->sleep it is on with ODE's default thresholds (dWorldSetAutoDisable*
 * left alone), and pairs whose bodies are both disabled or static are not
 * collided (the usual near callback of an ODE program that sleeps).
 *
 * Failure modes: a description ODE cannot express (a plane on a moving body)
 * makes create fail with a message. ODE itself does not report errors here.
 *
 * Invariants: ODE is initialised once per process (dInitODE2) and never
 * closed while an engine lives; pairs of geoms on the same body and pairs of
 * static geoms do not collide, nor (unless cfg->collide_jointed) pairs of
 * bodies linked by a joint.
 */
#include "engine.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ode/ode.h>

#if !defined(dDOUBLE)
#error "the benchmark expects ODE in double precision (dDOUBLE)"
#endif

#define MAX_CONTACTS_PER_PAIR 4

typedef struct ode_engine {
    dWorldID world;
    dSpaceID space;
    dJointGroupID contacts;
    int body_count;
    dBodyID *bodies;     /* per description body; NULL for static bodies */
    ph_vec3 *static_pos; /* pose of static bodies */
    ph_quat *static_rot;
    int geom_count;
    dGeomID *geoms;
    double *geom_mu; /* per geom, the shape's friction */
    double h;
    int substeps;
    double last_depth; /* deepest contact of the last (sub)step */
    int last_contacts;
    int collide_jointed;
    int sleep;
} ode_engine;

static int ode_initialised;

static void to_dquat(ph_quat q, dQuaternion out) {
    out[0] = q.w;
    out[1] = q.x;
    out[2] = q.y;
    out[3] = q.z;
}

static void near_callback(void *data, dGeomID g1, dGeomID g2) {
    ode_engine *e = data;
    dBodyID b1 = dGeomGetBody(g1);
    dBodyID b2 = dGeomGetBody(g2);
    if (!b1 && !b2) return;                                                               /* static against static */
    if (b1 == b2) return;                                                                 /* two geoms of one body */
    if (e->sleep && (!b1 || !dBodyIsEnabled(b1)) && (!b2 || !dBodyIsEnabled(b2))) return; /* nothing awake */
    if (!e->collide_jointed && b1 && b2 && dAreConnectedExcluding(b1, b2, dJointTypeContact)) return;
    dContact c[MAX_CONTACTS_PER_PAIR];
    int n = dCollide(g1, g2, MAX_CONTACTS_PER_PAIR, &c[0].geom, sizeof c[0]);
    if (n <= 0) return;
    double mu = sqrt(*(const double *)dGeomGetData(g1) * *(const double *)dGeomGetData(g2));
    for (int i = 0; i < n; i++) {
        c[i].surface.mode = dContactApprox1;
        c[i].surface.mu = mu;
        c[i].surface.bounce = 0;
        if (c[i].geom.depth > e->last_depth) e->last_depth = c[i].geom.depth;
        dJointID j = dJointCreateContact(e->world, e->contacts, &c[i]);
        dJointAttach(j, b1, b2);
    }
    e->last_contacts += n;
}

static void ode_destroy(void *p) {
    ode_engine *e = p;
    if (!e) return;
    if (e->contacts) dJointGroupDestroy(e->contacts);
    if (e->space) dSpaceDestroy(e->space); /* cleanup mode on: destroys the geoms */
    if (e->world) dWorldDestroy(e->world); /* destroys bodies and joints */
    free(e->bodies);
    free(e->static_pos);
    free(e->static_rot);
    free(e->geoms);
    free(e->geom_mu);
    free(e);
}

static dGeomID make_geom(ode_engine *e, const sd_shape *s) {
    switch (s->type) {
    case SD_SHAPE_SPHERE:
        return dCreateSphere(e->space, s->radius);
    case SD_SHAPE_BOX:
        return dCreateBox(e->space, 2 * s->half_extents.x, 2 * s->half_extents.y, 2 * s->half_extents.z);
    case SD_SHAPE_CAPSULE:
        return dCreateCapsule(e->space, s->radius, 2 * s->half_height);
    case SD_SHAPE_PLANE:
        break;
    }
    return NULL;
}

static void *ode_create(const scene_desc *d, const engine_config *cfg, char *err, size_t errlen) {
    if (!ode_initialised) {
        if (!dInitODE2(0)) {
            snprintf(err, errlen, "dInitODE2 failed");
            return NULL;
        }
        if (!dCheckConfiguration("ODE_double_precision")) {
            snprintf(err, errlen, "libode is not a double precision build");
            return NULL;
        }
        ode_initialised = 1;
    }
    ode_engine *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    e->h = cfg->time_step;
    e->substeps = cfg->substeps;
    e->collide_jointed = cfg->collide_jointed;
    e->body_count = d->body_count;
    e->geom_count = d->shape_count;
    e->bodies = calloc((size_t)d->body_count + 1, sizeof *e->bodies);
    e->static_pos = calloc((size_t)d->body_count + 1, sizeof *e->static_pos);
    e->static_rot = calloc((size_t)d->body_count + 1, sizeof *e->static_rot);
    e->geoms = calloc((size_t)d->shape_count + 1, sizeof *e->geoms);
    e->geom_mu = calloc((size_t)d->shape_count + 1, sizeof *e->geom_mu);
    if (!e->bodies || !e->static_pos || !e->static_rot || !e->geoms || !e->geom_mu) {
        snprintf(err, errlen, "out of memory");
        ode_destroy(e);
        return NULL;
    }

    e->world = dWorldCreate();
    dWorldSetGravity(e->world, cfg->gravity.x, cfg->gravity.y, cfg->gravity.z);
    dWorldSetQuickStepNumIterations(e->world, cfg->iterations);
    e->sleep = cfg->sleep;
    dWorldSetAutoDisableFlag(e->world, cfg->sleep ? 1 : 0);
    e->space = dHashSpaceCreate(0);
    dSpaceSetCleanup(e->space, 1);
    e->contacts = dJointGroupCreate(0);

    for (int i = 0; i < d->body_count; i++) {
        const sd_body *b = &d->bodies[i];
        dQuaternion q;
        to_dquat(b->orientation, q);
        e->static_pos[i] = b->position;
        e->static_rot[i] = b->orientation;
        dBodyID body = NULL;
        if (b->type != SD_BODY_STATIC) {
            body = dBodyCreate(e->world);
            dBodySetPosition(body, b->position.x, b->position.y, b->position.z);
            dBodySetQuaternion(body, q);
            dBodySetLinearVel(body, b->linear_velocity.x, b->linear_velocity.y, b->linear_velocity.z);
            dBodySetAngularVel(body, b->angular_velocity.x, b->angular_velocity.y, b->angular_velocity.z);
            if (b->type == SD_BODY_KINEMATIC) {
                dBodySetKinematic(body);
            } else {
                dMass m;
                dMassSetParameters(&m, b->mass, 0, 0, 0, b->inertia.x, b->inertia.y, b->inertia.z, 0, 0, 0);
                dBodySetMass(body, &m);
            }
            dBodySetAutoDisableFlag(body, cfg->sleep ? 1 : 0);
            e->bodies[i] = body;
        }
        for (int k = 0; k < b->shape_count; k++) {
            int si = b->first_shape + k;
            const sd_shape *s = &d->shapes[si];
            ph_transform world = ph_xform_mul((ph_transform){b->position, b->orientation}, s->local);
            dGeomID g;
            if (s->type == SD_SHAPE_PLANE) {
                if (body) {
                    snprintf(err, errlen, "ODE: a plane must belong to a static body (body %d)", i);
                    ode_destroy(e);
                    return NULL;
                }
                ph_vec3 n = ph_rotate(world.q, s->normal);
                ph_vec3 p0 = ph_xform(world, ph_scale(s->normal, s->offset));
                g = dCreatePlane(e->space, n.x, n.y, n.z, ph_dot(n, p0));
            } else {
                g = make_geom(e, s);
                if (body) {
                    dGeomSetBody(g, body);
                    dQuaternion lq;
                    to_dquat(s->local.q, lq);
                    dGeomSetOffsetPosition(g, s->local.p.x, s->local.p.y, s->local.p.z);
                    dGeomSetOffsetQuaternion(g, lq);
                } else {
                    dQuaternion wq;
                    to_dquat(world.q, wq);
                    dGeomSetPosition(g, world.p.x, world.p.y, world.p.z);
                    dGeomSetQuaternion(g, wq);
                }
            }
            e->geoms[si] = g;
            e->geom_mu[si] = s->friction;
            dGeomSetData(g, &e->geom_mu[si]);
        }
    }

    for (int j = 0; j < d->joint_count; j++) {
        const sd_joint *jt = &d->joints[j];
        int ia = jt->body_a, ib = jt->body_b;
        /* World anchors at the start, and B's anchor in B's frame. */
        const sd_body *ba = &d->bodies[ia];
        ph_vec3 wa = ph_add(ba->position, ph_rotate(ba->orientation, jt->anchor_a));
        ph_vec3 wb = jt->anchor_b, lb = jt->anchor_b;
        if (ib >= 0) {
            const sd_body *bb = &d->bodies[ib];
            wb = ph_add(bb->position, ph_rotate(bb->orientation, jt->anchor_b));
        }
        dBodyID a = e->bodies[ia];
        dBodyID b = ib < 0 ? NULL : e->bodies[ib];
        if (!a) { /* ODE wants the moving body first; B then becomes the world */
            a = b;
            b = NULL;
            ph_vec3 tw = wa;
            wa = wb;
            wb = tw;
        }
        if (!a) {
            snprintf(err, errlen, "ODE: joint %d links two static bodies", j);
            ode_destroy(e);
            return NULL;
        }
        /* dJointSetBallAnchor takes a world point and sets both anchors;
         * dJointSetBallAnchor2 then sets the second anchor alone, in body
         * 2's frame (or in the world when body 2 is absent). */
        dJointID jid = dJointCreateBall(e->world, 0);
        dJointAttach(jid, a, b);
        dJointSetBallAnchor(jid, wa.x, wa.y, wa.z);
        if (b)
            dJointSetBallAnchor2(jid, lb.x, lb.y, lb.z);
        else
            dJointSetBallAnchor2(jid, wb.x, wb.y, wb.z);
        dVector3 g1, g2;
        dJointGetBallAnchor(jid, g1);
        dJointGetBallAnchor2(jid, g2);
        double e1 = ph_len(ph_sub(ph_v3(g1[0], g1[1], g1[2]), wa));
        double e2 = ph_len(ph_sub(ph_v3(g2[0], g2[1], g2[2]), wb));
        if (!(e1 < 1e-9 && e2 < 1e-9)) {
            snprintf(err, errlen, "ODE: joint %d anchors not set as described (errors %g, %g m)", j, e1, e2);
            ode_destroy(e);
            return NULL;
        }
    }
    return e;
}

static void ode_step(void *p) {
    ode_engine *e = p;
    double hs = e->h / e->substeps;
    for (int s = 0; s < e->substeps; s++) {
        e->last_depth = 0;
        e->last_contacts = 0;
        dSpaceCollide(e->space, e, near_callback);
        dWorldQuickStep(e->world, hs);
        dJointGroupEmpty(e->contacts);
    }
}

static void ode_get_pose(void *p, int i, ph_vec3 *pos, ph_quat *rot) {
    ode_engine *e = p;
    dBodyID b = e->bodies[i];
    if (!b) {
        *pos = e->static_pos[i];
        *rot = e->static_rot[i];
        return;
    }
    const dReal *x = dBodyGetPosition(b);
    const dReal *q = dBodyGetQuaternion(b);
    *pos = ph_v3(x[0], x[1], x[2]);
    rot->w = q[0];
    rot->x = q[1];
    rot->y = q[2];
    rot->z = q[3];
}

static double ode_max_penetration(void *p) { return ((ode_engine *)p)->last_depth; }
static int ode_contact_count(void *p) { return ((ode_engine *)p)->last_contacts; }

static void ode_describe(void *p, char *buf, size_t len) {
    ode_engine *e = p;
    char vel[32];
    double mcv = (double)dWorldGetContactMaxCorrectingVel(e->world);
    if (isfinite(mcv))
        snprintf(vel, sizeof vel, "%.9g", mcv);
    else
        snprintf(vel, sizeof vel, "\"inf\"");
    snprintf(buf, len,
             "\"stepper\":\"dWorldQuickStep\",\"space\":\"hash\",\"friction\":\"dContactApprox1\","
             "\"max_contacts_per_pair\":%d,\"erp\":%.9g,\"cfm\":%.9g,\"sor_w\":%.9g,"
             "\"contact_surface_layer\":%.9g,\"contact_max_correcting_vel\":%s,\"collide_jointed\":%d,"
             "\"auto_disable\":%d,\"auto_disable_linear_threshold\":%.9g,\"auto_disable_angular_threshold\":%.9g,"
             "\"auto_disable_steps\":%d,\"auto_disable_time\":%.9g,\"auto_disable_average_samples\":%d",
             MAX_CONTACTS_PER_PAIR, (double)dWorldGetERP(e->world), (double)dWorldGetCFM(e->world),
             (double)dWorldGetQuickStepW(e->world), (double)dWorldGetContactSurfaceLayer(e->world), vel,
             e->collide_jointed, dWorldGetAutoDisableFlag(e->world),
             (double)dWorldGetAutoDisableLinearThreshold(e->world),
             (double)dWorldGetAutoDisableAngularThreshold(e->world), dWorldGetAutoDisableSteps(e->world),
             (double)dWorldGetAutoDisableTime(e->world), (int)dWorldGetAutoDisableAverageSamplesCount(e->world));
}

static int ode_awake_count(void *p) {
    ode_engine *e = p;
    int n = 0;
    for (int i = 0; i < e->body_count; i++)
        if (e->bodies[i] && !dBodyIsKinematic(e->bodies[i]) && dBodyIsEnabled(e->bodies[i])) n++;
    return n;
}

static const char *ode_precision(void) { return "double"; }
static const char *ode_version(void) { return dODE_VERSION; }

const engine_vtable engine_ode = {
    .name = "ode",
    .create = ode_create,
    .step = ode_step,
    .get_pose = ode_get_pose,
    .max_penetration = ode_max_penetration,
    .contact_count = ode_contact_count,
    .extra = NULL,
    .describe = ode_describe,
    .precision = ode_precision,
    .version = ode_version,
    .destroy = ode_destroy,
    .awake_count = ode_awake_count,
};
