/*
 * engine_bullet.cpp — the benchmark's Bullet adapter (C++17, exported to the
 * C harness as engine_bullet).
 *
 * Normal path: a btDiscreteDynamicsWorld with btDbvtBroadphase, the default
 * collision configuration and dispatcher, and btSequentialImpulseConstraint-
 * Solver with solverInfo.m_numIterations = N. Each dynamic or kinematic body
 * of the description becomes one btRigidBody with the description's mass and
 * principal inertia (centre of mass at the body origin) and shape btBoxShape,
 * btSphereShape or btCapsuleShapeZ (a btCompoundShape when the body has
 * several shapes or a shape off the body origin). Each shape of a static body
 * becomes its own static btRigidBody, planes as btStaticPlaneShape. Ball
 * joints are btPoint2PointConstraint with both pivots set exactly, with
 * collisions between the linked bodies disabled (unless cfg->collide_jointed). Every body has
 * DISABLE_DEACTIVATION (no sleeping) and no damping; with cfg->sleep the
 * bodies keep Bullet's deactivation with its defaults (a body whose |v| <
 * 0.8 m/s and |w| < 1 rad/s for gDeactivationTime = 2 s wants to sleep, an
 * island sleeps when all its bodies want to; btRigidBody.h 3.24). A step is
 * stepSimulation(h / substeps, 0) per substep: exactly one internal step of
 * that size, no interpolation.
 *
 * Friction: Bullet combines two bodies' friction as the product; physd uses
 * sqrt(mu_a mu_b). Each body is therefore given friction sqrt(mu), so a pair
 * gets sqrt(mu_a) sqrt(mu_b) = sqrt(mu_a mu_b), i.e. 0.5 for the reference
 * scenes. Restitution is set the same way (all zero here). Friction is per
 * body in Bullet: a body whose shapes have different friction uses its first
 * shape's (a warning goes to stderr).
 *
 * Everything else keeps Bullet's defaults, reported by describe(): ERP 0.2,
 * ERP2 0.2, global CFM 0, split impulse on with penetration threshold -0.04,
 * warm starting factor 0.85, solver mode SOLVER_USE_WARMSTARTING |
 * SOLVER_SIMD, linear slop 0, convex collision margin 0.04 (inside the box
 * extents; sphere and capsule margins are their radius), contact breaking
 * threshold 0.02, implicit gyroscopic term on.
 *
 * Failure modes: a plane on a moving body, or out of memory, make create fail
 * with a message (exceptions never leave this file).
 */
#include "engine.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <new>
#include <vector>

#include <btBulletDynamicsCommon.h>

namespace {

struct bullet_engine {
    std::unique_ptr<btDefaultCollisionConfiguration> config;
    std::unique_ptr<btCollisionDispatcher> dispatcher;
    std::unique_ptr<btDbvtBroadphase> broadphase;
    std::unique_ptr<btSequentialImpulseConstraintSolver> solver;
    std::unique_ptr<btDiscreteDynamicsWorld> world;
    std::vector<std::unique_ptr<btCollisionShape>> shapes;
    std::vector<std::unique_ptr<btRigidBody>> rigid; /* all rigid bodies, static ones included */
    std::vector<std::unique_ptr<btTypedConstraint>> constraints;
    std::vector<btRigidBody *> body_of; /* per description body; NULL when static */
    std::vector<ph_vec3> static_pos;
    std::vector<ph_quat> static_rot;
    double h = 1.0 / 60.0;
    int substeps = 1;
    int collide_jointed = 0;
    int sleep = 0;

    ~bullet_engine() {
        if (world) {
            for (auto &c : constraints)
                world->removeConstraint(c.get());
            for (auto &r : rigid)
                world->removeRigidBody(r.get());
        }
        constraints.clear();
        rigid.clear();
        world.reset();
        solver.reset();
        broadphase.reset();
        dispatcher.reset();
        config.reset();
        shapes.clear();
    }
};

btVector3 bv(ph_vec3 v) { return btVector3(btScalar(v.x), btScalar(v.y), btScalar(v.z)); }
btQuaternion bq(ph_quat q) { return btQuaternion(btScalar(q.x), btScalar(q.y), btScalar(q.z), btScalar(q.w)); }
btTransform bt(ph_transform t) { return btTransform(bq(t.q), bv(t.p)); }

btCollisionShape *convex_shape(bullet_engine *e, const sd_shape &s) {
    btCollisionShape *c = nullptr;
    switch (s.type) {
    case SD_SHAPE_SPHERE:
        c = new btSphereShape(btScalar(s.radius));
        break;
    case SD_SHAPE_BOX:
        c = new btBoxShape(bv(s.half_extents));
        break;
    case SD_SHAPE_CAPSULE:
        c = new btCapsuleShapeZ(btScalar(s.radius), btScalar(2 * s.half_height));
        break;
    case SD_SHAPE_PLANE:
        return nullptr;
    }
    e->shapes.emplace_back(c);
    return c;
}

bool is_identity(const ph_transform &t) {
    return t.p.x == 0 && t.p.y == 0 && t.p.z == 0 && t.q.x == 0 && t.q.y == 0 && t.q.z == 0 && t.q.w == 1;
}

btRigidBody *add_body(bullet_engine *e, double mass, ph_vec3 inertia, btCollisionShape *shape, const btTransform &pose,
                      double mu, double restitution) {
    btRigidBody::btRigidBodyConstructionInfo info(btScalar(mass), nullptr, shape, bv(inertia));
    info.m_startWorldTransform = pose;
    info.m_friction = btScalar(std::sqrt(mu));
    info.m_restitution = btScalar(std::sqrt(restitution));
    info.m_linearDamping = 0;
    info.m_angularDamping = 0;
    auto *rb = new btRigidBody(info);
    e->rigid.emplace_back(rb);
    if (!e->sleep) rb->setActivationState(DISABLE_DEACTIVATION);
    return rb;
}

bool build(bullet_engine *e, const scene_desc *d, const engine_config *cfg, char *err, size_t errlen) {
    e->sleep = cfg->sleep;
    e->h = cfg->time_step;
    e->substeps = cfg->substeps;
    e->collide_jointed = cfg->collide_jointed;
    e->config.reset(new btDefaultCollisionConfiguration());
    e->dispatcher.reset(new btCollisionDispatcher(e->config.get()));
    e->broadphase.reset(new btDbvtBroadphase());
    e->solver.reset(new btSequentialImpulseConstraintSolver());
    e->world.reset(
        new btDiscreteDynamicsWorld(e->dispatcher.get(), e->broadphase.get(), e->solver.get(), e->config.get()));
    e->world->setGravity(bv(cfg->gravity));
    e->world->getSolverInfo().m_numIterations = cfg->iterations;

    e->body_of.assign((size_t)d->body_count, nullptr);
    e->static_pos.resize((size_t)d->body_count);
    e->static_rot.resize((size_t)d->body_count);
    for (int i = 0; i < d->body_count; i++) {
        const sd_body &b = d->bodies[i];
        e->static_pos[(size_t)i] = b.position;
        e->static_rot[(size_t)i] = b.orientation;
        ph_transform bpose = {b.position, b.orientation};
        if (b.type == SD_BODY_STATIC) {
            for (int k = 0; k < b.shape_count; k++) {
                const sd_shape &s = d->shapes[b.first_shape + k];
                ph_transform w = ph_xform_mul(bpose, s.local);
                btRigidBody *rb;
                if (s.type == SD_SHAPE_PLANE) {
                    ph_vec3 n = ph_rotate(w.q, s.normal);
                    ph_vec3 p0 = ph_xform(w, ph_scale(s.normal, s.offset));
                    auto *plane = new btStaticPlaneShape(bv(n), btScalar(ph_dot(n, p0)));
                    e->shapes.emplace_back(plane);
                    rb = add_body(e, 0, ph_v3(0, 0, 0), plane, btTransform::getIdentity(), s.friction, s.restitution);
                } else {
                    rb = add_body(e, 0, ph_v3(0, 0, 0), convex_shape(e, s), bt(w), s.friction, s.restitution);
                }
                e->world->addRigidBody(rb);
            }
            continue;
        }
        if (b.shape_count == 0) {
            std::snprintf(err, errlen, "Bullet: body %d has no shape", i);
            return false;
        }
        btCollisionShape *shape;
        const sd_shape &s0 = d->shapes[b.first_shape];
        for (int k = 0; k < b.shape_count; k++) {
            const sd_shape &s = d->shapes[b.first_shape + k];
            if (s.type == SD_SHAPE_PLANE) {
                std::snprintf(err, errlen, "Bullet: a plane must belong to a static body (body %d)", i);
                return false;
            }
            if (s.friction != s0.friction)
                std::fprintf(stderr, "bullet: body %d has shapes of different friction, using %g\n", i, s0.friction);
        }
        if (b.shape_count == 1 && is_identity(s0.local)) {
            shape = convex_shape(e, s0);
        } else {
            auto *compound = new btCompoundShape();
            e->shapes.emplace_back(compound);
            for (int k = 0; k < b.shape_count; k++) {
                const sd_shape &s = d->shapes[b.first_shape + k];
                compound->addChildShape(bt(s.local), convex_shape(e, s));
            }
            shape = compound;
        }
        bool kinematic = b.type == SD_BODY_KINEMATIC;
        btRigidBody *rb = add_body(e, kinematic ? 0 : b.mass, kinematic ? ph_v3(0, 0, 0) : b.inertia, shape, bt(bpose),
                                   s0.friction, s0.restitution);
        if (kinematic) rb->setCollisionFlags(rb->getCollisionFlags() | btCollisionObject::CF_KINEMATIC_OBJECT);
        rb->setLinearVelocity(bv(b.linear_velocity));
        rb->setAngularVelocity(bv(b.angular_velocity));
        e->world->addRigidBody(rb);
        e->body_of[(size_t)i] = rb;
    }

    for (int j = 0; j < d->joint_count; j++) {
        const sd_joint &jt = d->joints[j];
        int ia = jt.body_a, ib = jt.body_b;
        btRigidBody *a = e->body_of[(size_t)ia];
        btRigidBody *b = ib < 0 ? nullptr : e->body_of[(size_t)ib];
        ph_vec3 pa = jt.anchor_a, pb = jt.anchor_b; /* local to a and b (world when b is absent) */
        if (ib >= 0 && !b) {                        /* static body B: its anchor in world space */
            const sd_body &sb = d->bodies[ib];
            pb = ph_add(sb.position, ph_rotate(sb.orientation, jt.anchor_b));
        }
        if (!a) { /* static body A: swap so that A moves */
            const sd_body &sa = d->bodies[ia];
            ph_vec3 wa = ph_add(sa.position, ph_rotate(sa.orientation, jt.anchor_a));
            a = b;
            b = nullptr;
            pa = pb;
            pb = wa;
        }
        if (!a) {
            std::snprintf(err, errlen, "Bullet: joint %d links two static bodies", j);
            return false;
        }
        btPoint2PointConstraint *c;
        if (b) {
            c = new btPoint2PointConstraint(*a, *b, bv(pa), bv(pb));
        } else {
            c = new btPoint2PointConstraint(*a, bv(pa));
            c->setPivotB(bv(pb)); /* the fixed body sits at the origin: pivot B is a world point */
        }
        e->constraints.emplace_back(c);
        e->world->addConstraint(c, /* disableCollisionsBetweenLinkedBodies */ !e->collide_jointed);
    }
    return true;
}

void *bullet_create(const scene_desc *d, const engine_config *cfg, char *err, size_t errlen) {
    bullet_engine *e = nullptr;
    try {
        e = new bullet_engine();
        if (!build(e, d, cfg, err, errlen)) {
            delete e;
            return nullptr;
        }
        return e;
    } catch (const std::bad_alloc &) {
        delete e;
        std::snprintf(err, errlen, "out of memory");
        return nullptr;
    }
}

void bullet_step(void *p) {
    auto *e = static_cast<bullet_engine *>(p);
    btScalar hs = btScalar(e->h / e->substeps);
    for (int s = 0; s < e->substeps; s++) {
        /* Kinematic bodies follow their velocity (Bullet moves them only
         * through a motion state). */
        for (btRigidBody *rb : e->body_of) {
            if (rb && rb->isKinematicObject()) {
                btTransform next;
                btTransformUtil::integrateTransform(rb->getWorldTransform(), rb->getLinearVelocity(),
                                                    rb->getAngularVelocity(), hs, next);
                rb->setWorldTransform(next);
            }
        }
        e->world->stepSimulation(hs, 0);
    }
}

void bullet_get_pose(void *p, int i, ph_vec3 *pos, ph_quat *rot) {
    auto *e = static_cast<bullet_engine *>(p);
    btRigidBody *rb = e->body_of[(size_t)i];
    if (!rb) {
        *pos = e->static_pos[(size_t)i];
        *rot = e->static_rot[(size_t)i];
        return;
    }
    const btTransform &t = rb->getCenterOfMassTransform();
    const btVector3 &o = t.getOrigin();
    btQuaternion q = t.getRotation();
    *pos = ph_v3(double(o.x()), double(o.y()), double(o.z()));
    rot->x = double(q.x());
    rot->y = double(q.y());
    rot->z = double(q.z());
    rot->w = double(q.w());
}

double bullet_max_penetration(void *p) {
    auto *e = static_cast<bullet_engine *>(p);
    double deepest = 0;
    int n = e->dispatcher->getNumManifolds();
    for (int i = 0; i < n; i++) {
        btPersistentManifold *m = e->dispatcher->getManifoldByIndexInternal(i);
        for (int k = 0; k < m->getNumContacts(); k++) {
            double depth = -double(m->getContactPoint(k).getDistance());
            if (depth > deepest) deepest = depth;
        }
    }
    return deepest;
}

int bullet_contact_count(void *p) {
    auto *e = static_cast<bullet_engine *>(p);
    int total = 0;
    int n = e->dispatcher->getNumManifolds();
    for (int i = 0; i < n; i++)
        total += e->dispatcher->getManifoldByIndexInternal(i)->getNumContacts();
    return total;
}

void bullet_describe(void *p, char *buf, size_t len) {
    auto *e = static_cast<bullet_engine *>(p);
    const btContactSolverInfo &si = e->world->getSolverInfo();
    btBoxShape probe(btVector3(1, 1, 1));
    /* The thresholds every body got (btRigidBodyConstructionInfo's defaults). */
    btRigidBody::btRigidBodyConstructionInfo info(1, nullptr, &probe);
    const double sleep_lin = double(info.m_linearSleepingThreshold),
                 sleep_ang = double(info.m_angularSleepingThreshold);
    std::snprintf(buf, len,
                  "\"solver\":\"btSequentialImpulseConstraintSolver\",\"broadphase\":\"btDbvtBroadphase\","
                  "\"erp\":%.9g,\"erp2\":%.9g,\"global_cfm\":%.9g,\"split_impulse\":%d,"
                  "\"split_impulse_threshold\":%.9g,\"warmstarting_factor\":%.9g,\"solver_mode\":%d,"
                  "\"linear_slop\":%.9g,\"convex_margin\":%.9g,\"contact_breaking_threshold\":%.9g,"
                  "\"friction_per_body\":\"sqrt(mu)\",\"collide_jointed\":%d,\"deactivation\":%d,"
                  "\"linear_sleeping_threshold\":%.9g,\"angular_sleeping_threshold\":%.9g,\"deactivation_time\":%.9g",
                  double(si.m_erp), double(si.m_erp2), double(si.m_globalCfm), si.m_splitImpulse,
                  double(si.m_splitImpulsePenetrationThreshold), double(si.m_warmstartingFactor), si.m_solverMode,
                  double(si.m_linearSlop), double(probe.getMargin()), double(gContactBreakingThreshold),
                  e->collide_jointed, e->sleep, sleep_lin, sleep_ang, double(gDeactivationTime));
}

const char *bullet_precision() { return sizeof(btScalar) == 8 ? "double" : "single"; }

const char *bullet_version() {
    static char v[16];
    std::snprintf(v, sizeof v, "%d.%02d", btGetVersion() / 100, btGetVersion() % 100);
    return v;
}

void bullet_destroy(void *p) { delete static_cast<bullet_engine *>(p); }

int bullet_awake_count(void *p) {
    auto *e = static_cast<bullet_engine *>(p);
    int n = 0;
    for (btRigidBody *rb : e->body_of)
        if (rb && !rb->isStaticOrKinematicObject() && rb->isActive()) n++;
    return n;
}

} // namespace

extern "C" const engine_vtable engine_bullet = {
    "bullet", bullet_create,   bullet_step,      bullet_get_pose, bullet_max_penetration, bullet_contact_count,
    nullptr,  bullet_describe, bullet_precision, bullet_version,  bullet_destroy,         bullet_awake_count,
    nullptr, /* pass_profile */
};
