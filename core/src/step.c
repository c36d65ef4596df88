/*
 * step.c — one world step, read as a script:
 *   for each substep of length h = time_step / substeps:
 *     [first substep, or every one with collide_substeps] broadphase ->
 *     narrowphase (+ warm-start matching, contact events, islands)
 *     [later substeps] move the contact points of restitutive pairs (all of
 *     them in the last substep: queries, events) with their bodies ->
 *     solver bodies -> Newton–Coulomb impacts -> external forces (gravity,
 *     forces, torques, implicit gyroscopic term) -> contact rows (built, or
 *     their gaps moved by the velocities and their SPOOK terms refreshed)
 *     -> joint rows -> warm start (later substeps: the contacts' part body
 *     by body, contact_dv) -> solve -> store impulses -> integrate
 *     positions (symplectic Euler, quaternion q += h/2 (0, w) q,
 *     renormalized; seeds/002 eqs. 35-38), and when nothing comes between
 *     (no collision, impacts or joint rows) the next substep's solver
 *     bodies, forces and warm start in the same pass over the bodies;
 *   then the joints' positional correction (joint_projection passes).
 * A step whose awake bodies have joints and no contact after its collision
 * (and turn little over the step) is one substep of the whole time_step
 * with settings.joint_step_once (joint_step_once(): one exact solve of the
 * joints' direct block), and its positional correction is SHAKE's
 * iteration with that block (ph__joint_project_direct; docs/core.md
 * "Joint-only steps").
 * The substeps between the first and the last run tile by tile (all of
 * them for one tile of whole islands, then the next tile) when nothing in
 * them couples two islands (tiles_fit, tiled_substeps): the same numbers,
 * with a tile's data kept in cache.
 * What each substep does is its plan (ph__plan_substep, step_plan.h; the
 * truth table in step.h): made at its start from the settings and the
 * facts of the running step, made again after a collision and after the
 * rows; substep() is the fixed sequence of stages (pairs, collide, start,
 * rows, order, warm start, solve, store, integrate), each taking the plan
 * and timed into the world's statistics. No step-control flag lives in the
 * world; the last substep's plan, kept by ph_world_step, says whether its
 * integration already started the next one.
 *
 * Failure modes: PH_ERR_NO_MEMORY from a stage fails the step, undone as
 * below (the world as before the step, its forces kept), so a step either
 * stands or changes nothing a later step reads. After the substeps every awake dynamic body is checked against the
 * finite envelope (PH_ENVELOPE_*, a pass over the solver bodies); a body
 * outside it fails the step with PH_ERR_NONFINITE, and the world is put
 * back exactly as it was before the step from what save_state kept (the
 * poses in a dense array, the velocities in v_step / w_step, the sleep
 * state, the joints' impulses, the generator; the manifolds by swapping
 * the arrays back), so that NaN never reaches the next step. A step
 * cancelled by ph_world_cancel_step (seen at every substep and sweep
 * boundary) is undone the same way and returns PH_ERR_CANCELLED. The
 * compute budget (max_step_work, w->limit) caps the sweeps each solve may
 * start; a step that has spent it runs its remaining substeps without
 * sweeps.
 *
 * Invariants: solver body 0 is the fixed ground; every awake dynamic and
 * kinematic body has its own solver body in slot order; contact rows come
 * first in rows[] and joint rows after, while the visiting order puts the
 * joints first; forces and torques are cleared after the step unless it
 * was undone (PH_ERR_NONFINITE: they are part of the state it restores);
 * a step that stands leaves every awake dynamic body inside the envelope.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "body.h"
#include "broad_phase.h"
#include "collide.h"
#include "contact.h"
#include "island.h"
#include "joint.h"
#include "ph_arith.h"
#include "rows.h"
#include "solver.h"
#include "tasks.h"
#include "solver_wide.h"
#include "step.h"
#include "step_plan.h"
#include "world.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Torque-free rotation over one step by the implicit midpoint rule on
 * Euler's equations in the body frame,
 *     I (w1 - w0) + h wm x I wm = 0,  wm = (w0 + w1) / 2,
 * solved by Newton's method (3 iterations, quadratic convergence). The
 * midpoint rule conserves every quadratic invariant of the flow, so both |L|
 * and the kinetic energy are kept up to the Newton tolerance, where explicit
 * Euler would add energy. */
static ph_vec3 gyroscopic(const ph__body *b, ph_vec3 w_world, double h) {
    /* The gyroscopic term is quadratic in w: nothing to do for a body at rest
     * (and most bodies of a resting pile are). */
    if (ph_len2(w_world) < 1e-18) return w_world;
    const ph_vec3 I = b->inertia;
    /* With equal principal moments (spheres, cubes) w x I w = 0 exactly:
     * the rotation is torque-free at constant w. */
    if (I.x == I.y && I.y == I.z) return w_world;
    ph_vec3 w0 = ph_inv_rotate(b->q, w_world);
    const double Ia[3] = {I.x, I.y, I.z};
    ph_vec3 w1 = w0;
    for (int it = 0; it < 3; it++) {
        ph_vec3 wm = ph_scale(ph_add(w0, w1), 0.5);
        ph_vec3 iw = ph_cmul(I, wm);
        ph_vec3 f = ph_add(ph_cmul(I, ph_sub(w1, w0)), ph_scale(ph_cross(wm, iw), h));
        if (ph_len2(f) < 1e-300) break;
        /* d f / d w1 = I + h/2 (skew(wm) I - skew(I wm)) */
        double sw[3][3] = {{0, -wm.z, wm.y}, {wm.z, 0, -wm.x}, {-wm.y, wm.x, 0}};
        double si[3][3] = {{0, -iw.z, iw.y}, {iw.z, 0, -iw.x}, {-iw.y, iw.x, 0}};
        ph_mat3 J;
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                J.m[r][c] = (r == c ? Ia[r] : 0) + 0.5 * h * (sw[r][c] * Ia[c] - si[r][c]);
        ph_vec3 dw;
        if (!ph_mat3_solve(&J, f, &dw)) break;
        w1 = ph_sub(w1, dw);
        if (ph_len2(dw) <= 1e-30 * ph_len2(w1)) break; /* converged to rounding */
    }
    return ph_rotate(b->q, w1);
}

/* Passes over every awake body (the solver bodies, the saved state, the
 * forces, the envelope check) split among the step's workers (open passes
 * of pieces of PIECE_BODIES claimed by whoever runs, ph__tasks_run_pieces;
 * each body written by one) when the solver's are (the last step's
 * schedule) and the bodies are many. */
#define PIECE_BODIES 128 /* bodies in a piece of those passes (ph__tasks_run_pieces) */
static int big_split(const ph__world *w, int32_t n) {
    return w->task_workers > 1 && w->wsched_ok && n >= PH_TASKS_MIN_BODIES;
}

/* Solver bodies: slot 0 the ground, then every awake dynamic or kinematic
 * body in slot order (the awake list). remap = 0 (a later substep of the
 * same step: the set cannot change, and each solver body already holds its
 * body's velocity, which integrate() copied back) only refreshes the world
 * inverse inertia of bodies whose principal moments differ. body_to_sbody
 * stays 0 for every other body slot (only the last set's entries are
 * cleared), so a remap costs the awake bodies alone. With a remap, the
 * same pass over the bodies also makes their forces (prepare_forces) and,
 * with apply, applies them (apply_forces, with the contacts' warm start
 * when warm): each body's operations are those of the three passes, in
 * their order, one read of its records instead of three. */
typedef struct sbody_ctx {
    atomic_int aniso;  /* (an integer count: the same whoever adds) */
    atomic_int forced; /* (likewise) */
    double h, wf;
    int apply, warm;
} sbody_ctx;
static int32_t sbody_range(ph__world *w, int32_t s0, int32_t s1, const sbody_ctx *c, int32_t *forced);
static void sbody_piece(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t piece);
static void forces_ground(ph__world *w);

/* (The records themselves: sbody_range, split with big_split.) */
static int build_solver_bodies(ph__world *w, int remap, double h, int apply, int warm) {
    if (!remap) {
        for (int32_t s = 1; s < w->sbody_count && w->sbody_aniso > 0; s++) {
            ph__sbody *sb = &w->sbodies[s];
            if (sb->iso) continue;
            const ph__body *b = &w->bodies[w->sbody_body[s]];
            ph_mat3 r = ph_mat3_from_quat(b->q);
            sb->inv_i = ph_mat3_rdrt(&r, b->inv_inertia);
        }
        return PH_OK;
    }
    const int32_t hwm = w->body_pool.hwm;
    if (ph__array_reserve(w->body_to_sbody, hwm + 1)) return PH_ERR_NO_MEMORY;
    if (w->b2s_zeroed < hwm + 1) {
        memset(&w->body_to_sbody[w->b2s_zeroed], 0, (size_t)(hwm + 1 - w->b2s_zeroed) * sizeof *w->body_to_sbody);
        w->b2s_zeroed = hwm + 1;
    }
    for (int32_t s = 1; s < w->sbody_count; s++)
        w->body_to_sbody[w->sbody_body[s]] = 0;
    w->sbody_count = 1;
    const int32_t n = w->awake_count + 1;
    if (ph__array_reserve(w->sbodies, n)) return PH_ERR_NO_MEMORY;
    if (ph__array_reserve(w->sbody_body, n)) return PH_ERR_NO_MEMORY;
    w->sbody_body[0] = -1;
    if (ph__array_reserve(w->vw0, n) || ph__array_reserve(w->vws, n) || ph__array_reserve(w->dvc, n) ||
        ph__array_reserve(w->sforce, n))
        return PH_ERR_NO_MEMORY;
    memset(&w->sbodies[0], 0, sizeof(ph__sbody));
    w->sbodies[0].iso = 1;
    w->sbody_count = n; /* (what the passes split) */
    int32_t aniso = 0, forced = 0;
    sbody_ctx c;
    c.h = h;
    c.wf = ph__warm_factor(w);
    c.apply = apply;
    c.warm = warm && c.wf != 0;
    if (big_split(w, n)) {
        atomic_init(&c.aniso, 0);
        atomic_init(&c.forced, 0);
        ph__tasks_run_pieces_at(w, n - 1, PIECE_BODIES, w->wbody_cut, sbody_piece, &c);
        aniso = atomic_load(&c.aniso);
        forced = atomic_load(&c.forced);
    } else {
        aniso = sbody_range(w, 1, n, &c, &forced);
    }
    w->sbody_aniso = aniso;
    /* (Every awake body's force read: whether the step must clear any.) */
    w->step_forced = (w->step_forced > 0 ? w->step_forced : 0) + forced;
    if (apply) forces_ground(w);
    return PH_OK;
}

/* A piece of solver bodies 1 .. sbody_count - 1 (i0, i1 count from 0). */
static void sbody_piece(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t piece) {
    (void)piece;
    sbody_ctx *c = ctx;
    int32_t f = 0;
    const int32_t a = sbody_range(w, 1 + i0, 1 + i1, c, &f);
    if (a) atomic_fetch_add_explicit(&c->aniso, a, memory_order_relaxed);
    if (f) atomic_fetch_add_explicit(&c->forced, f, memory_order_relaxed);
}

static void forces_body(ph__world *w, int32_t s, ph_vec3 g, double h);
static inline void force_body(ph__world *w, int32_t s, double h, int warm, double wf);

/* Whether a force and torque have a bit set (-0.0 too: the clearing after
 * the step writes +0.0, which the pass it replaces must not skip). */
_Static_assert(sizeof(ph_vec3) == 3 * sizeof(uint64_t), "ph_vec3 is three doubles");
static inline int any_bits(ph_vec3 f, ph_vec3 t) {
    uint64_t u[6], o = 0;
    memcpy(&u[0], &f, sizeof f);
    memcpy(&u[3], &t, sizeof t);
    for (int j = 0; j < 6; j++)
        o |= u[j];
    return o != 0;
}

/* build_solver_bodies' records of solver bodies [s0, s1) (each from its
 * awake body), their forces and with c->apply their forces applied;
 * returns how many are anisotropic, *forced how many have a force or
 * torque (the line forces_body reads anyway). */
static int32_t sbody_range(ph__world *w, int32_t s0, int32_t s1, const sbody_ctx *c, int32_t *forced) {
    const ph_vec3 g = w->settings.gravity;
    int32_t aniso = 0, nf = 0;
    for (int32_t s = s0; s < s1; s++) {
        const int32_t i = w->awake[s - 1];
        w->body_to_sbody[i] = s;
        const ph__body *b = &w->bodies[i];
        ph__sbody *sb = &w->sbodies[s];
        w->sbody_body[s] = i;
        sb->v = b->v;
        sb->w = b->w;
        sb->inv_mass = b->inv_mass;
        const ph_vec3 ii = b->inv_inertia;
        if (ii.x == ii.y && ii.y == ii.z) {
            /* Isotropic (spheres, cubes): R D R^T = D, without rounding. */
            memset(&sb->inv_i, 0, sizeof sb->inv_i);
            sb->inv_i.m[0][0] = sb->inv_i.m[1][1] = sb->inv_i.m[2][2] = ii.x;
            sb->iso = 1;
        } else {
            ph_mat3 r = ph_mat3_from_quat(b->q);
            sb->inv_i = ph_mat3_rdrt(&r, ii);
            sb->iso = 0;
            aniso++;
        }
        forces_body(w, s, g, c->h);
        nf += any_bits(b->force, b->torque);
        if (c->apply) force_body(w, s, c->h, c->warm, c->wf);
    }
    *forced = nf;
    return aniso;
}

/* What the forces of a step do in each of its substeps (the same in all:
 * the force and torque accumulators are cleared only after the step): the
 * velocity increment of gravity and force, and whether that is all
 * (dynamic, no torque, no damping, no gyroscopic term: equal principal
 * moments or gyroscopic off). */
static void forces_body(ph__world *w, int32_t s, ph_vec3 g, double h) {
    const ph__body *b = &w->bodies[w->sbody_body[s]];
    ph__sforce *f = &w->sforce[s];
    f->dv = ph_scale(ph_add(ph_scale(g, b->gravity_scale), ph_scale(b->force, b->inv_mass)), h);
    f->plain = b->type == PH_BODY_DYNAMIC && b->torque.x == 0 && b->torque.y == 0 && b->torque.z == 0 &&
               !(b->lin_damp > 0) && !(b->ang_damp > 0) && (w->sbodies[s].iso || !w->settings.gyroscopic);
}

typedef struct forces_ctx {
    double h, wf;
    int warm;
} forces_ctx;

/* The forces of one solver body: vw0 (before them), its velocity after
 * them (vws) and, with warm, the contacts' body-by-body warm start on top
 * (ph__warm_start's first loop, the same operations). */
static inline void force_body(ph__world *w, int32_t s, double h, int warm, double wf) {
    ph__sbody *sb = &w->sbodies[s];
    const ph_vec3 v0 = sb->v, w0 = sb->w;
    w->vw0[s].v = v0;
    w->vw0[s].w = w0;
    const ph__sforce *f = &w->sforce[s];
    ph_vec3 v = v0, av = w0;
    if (f->plain) {
        v = ph_add(v0, f->dv);
    } else {
        const ph__body *b = &w->bodies[w->sbody_body[s]];
        if (b->type == PH_BODY_DYNAMIC) {
            v = ph_add(v0, f->dv);
            if (w->settings.gyroscopic) av = gyroscopic(b, av, h);
            if (b->torque.x != 0 || b->torque.y != 0 || b->torque.z != 0)
                av = ph_add(av, ph_mat3_mulv(&sb->inv_i, ph_scale(b->torque, h)));
            if (b->lin_damp > 0) v = ph_scale(v, 1.0 / (1.0 + h * b->lin_damp));
            if (b->ang_damp > 0) av = ph_scale(av, 1.0 / (1.0 + h * b->ang_damp));
        }
    }
    w->vws[s].v = v;
    w->vws[s].w = av;
    if (warm) {
        v = ph_mul_add(v, wf, w->dvc[s].v);
        av = ph_mul_add(av, wf, w->dvc[s].w);
    }
    sb->v = v;
    sb->w = av;
}

static void forces_ground(ph__world *w) {
    w->vw0[0].v = w->vw0[0].w = ph_v3(0, 0, 0);
    w->vws[0] = w->vw0[0];
}

static void apply_piece(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t piece) {
    (void)piece;
    const forces_ctx *c = ctx;
    for (int32_t s = 1 + i0; s < 1 + i1; s++)
        force_body(w, s, c->h, c->warm, c->wf);
}

static void apply_forces(ph__world *w, double h, int warm) {
    const double wf = ph__warm_factor(w);
    forces_ctx c = {h, wf, warm && wf != 0};
    if (big_split(w, w->sbody_count))
        ph__tasks_run_pieces_at(w, w->sbody_count - 1, PIECE_BODIES, w->wbody_cut, apply_piece, &c);
    else
        apply_piece(w, &c, 0, w->sbody_count - 1, 0);
    forces_ground(w);
}

/* The warm start of a later substep re-applies every contact impulse of
 * the one before, M^-1 J^T lambda with the same J and M^-1 (both kept
 * through the step). Summed over a body's contacts that is exactly the
 * change the contacts made to its velocity in that substep: from after the
 * forces (vws) to the end of the solve, minus what the joints did (their
 * rows are rebuilt each substep and warm-started row by row). So it is
 * applied body by body, in one pass over the bodies instead of one over
 * every contact point (the solver's impulses and the velocities stay
 * consistent, up to rounding). */
static void contact_dv(ph__world *w) {
    /* (The bodies' part, v - vws, is taken in integrate's loop.) */
    for (int32_t i = w->contact_row_count; i < w->row_count; i++) {
        const ph__row *r = &w->rows[i];
        const double dl = -r->lambda;
        if (dl == 0) continue;
        ph__vw *a = &w->dvc[r->ia], *b = &w->dvc[r->ib];
        a->v = ph_mul_add(a->v, -dl * r->ima, r->lin);
        a->w = ph_mul_add(a->w, dl, r->mang_a);
        b->v = ph_mul_add(b->v, dl * r->imb, r->lin);
        b->w = ph_mul_add(b->w, dl, r->mang_b);
    }
    w->dvc[0].v = w->dvc[0].w = ph_v3(0, 0, 0);
}

/* Visiting order: the joint rows (after the contact rows in rows[]) first,
 * then the contact rows in the default bottom-up level order (solver_wide.c)
 * or, with PH_ORDER_GRAVITY, as contact triples sorted bottom-up by height,
 * ties by row index (deterministic). The key array of the broadphase is
 * reused as scratch. */
static int build_order(ph__world *w, const ph__plan *p, int32_t ncontact) {
    if (ph__array_reserve(w->order, w->row_count + 1)) return PH_ERR_NO_MEMORY;
    const int32_t njoint = w->row_count - ncontact;
    if (w->settings.ordering == PH_ORDER_DEFAULT) {
        /* Contacts in level order (solver_wide.c), built once per collision
         * (and by a refresh that found no batches); later substeps refresh
         * the batches' right-hand sides and warm starts. The joint rows go
         * first. */
        const int native = p->home == PH_HOME_BATCHES;
        int e = PH_OK;
        if (!native && (p->rows == PH_ROWS_BUILD || p->rows == PH_ROWS_REFRESH)) e = ph__wide_build(w, ncontact);
        if (e) return e;
        /* The contact part was written behind the joint rows of the substep
         * that built it; a hinge limit row that comes or goes within the
         * step moves where it starts (without this move the sweep would read
         * entries never written, or a joint row past the end). */
        if (!native && w->order_njoint != njoint) {
            memmove(w->order + njoint, w->order + w->order_njoint, (size_t)ncontact * sizeof *w->order);
            w->order_njoint = njoint;
        }
        for (int32_t i = 0; i < njoint; i++)
            w->order[i] = ncontact + i;
        return PH_OK;
    }
    w->wide_ok = 0;
    for (int32_t i = 0; i < njoint; i++)
        w->order[i] = ncontact + i;
    int32_t *o = w->order + njoint;
    for (int32_t i = 0; i < ncontact; i++)
        o[i] = i;
    if (w->settings.ordering == PH_ORDER_GRAVITY && ncontact > 0) {
        int32_t nc = ncontact / 3;
        if (ph__array_reserve(w->sap_keys, nc + 1)) return PH_ERR_NO_MEMORY;
        for (int32_t k = 0; k < nc; k++) {
            w->sap_keys[k].key = w->rows[3 * k].height;
            w->sap_keys[k].slot = 3 * k;
        }
        if (nc > 1) qsort(w->sap_keys, (size_t)nc, sizeof(ph__sap_key), ph__sap_key_cmp);
        for (int32_t k = 0; k < nc; k++) {
            int32_t r = w->sap_keys[k].slot;
            o[3 * k] = r;
            o[3 * k + 1] = r + 1;
            o[3 * k + 2] = r + 2;
        }
    }
    return PH_OK;
}

/* The orientation step (ph_arith.h, shared with integrate_wide.c). */
PH__DEFINE_QUAT_STEP(quat_step, double)

/* One solver body's integration. dv: also the velocity change of the
 * substep's solve, v - vws (the bodies' part of contact_dv). next > 0:
 * also the next substep's start, in the same pass: the world inverse
 * inertia from the new orientation (build_solver_bodies without remap) and
 * the forces, with next = 2 the contacts' warm start too (apply_forces);
 * the same operations on each body, one pass over the bodies instead of
 * two. */
void ph__integrate_body(ph__world *w, int32_t s, double h, int dv, int next, double wf) {
    ph__body *b = &w->bodies[w->sbody_body[s]];
    ph__sbody *sb = &w->sbodies[s];
    /* Through locals: reading back a vector just stored field by field
     * would stall on store forwarding. */
    const ph_vec3 v = sb->v, av = sb->w;
    if (dv) {
        w->dvc[s].v = ph_sub(v, w->vws[s].v);
        w->dvc[s].w = ph_sub(av, w->vws[s].w);
    }
    const ph_quat q0 = b->q;
    b->v = v;
    b->w = av;
    b->p = ph_mul_add(b->p, h, v);
    const double qa[4] = {q0.x, q0.y, q0.z, q0.w};
    double n[4];
    quat_step(av.x, av.y, av.z, 0.0, qa, 0.5 * h, n);
    b->q = ph_quat_normalize((ph_quat){n[0], n[1], n[2], n[3]});
    if (next) {
        if (!sb->iso) {
            ph_mat3 r = ph_mat3_from_quat(b->q);
            sb->inv_i = ph_mat3_rdrt(&r, b->inv_inertia);
        }
        force_body(w, s, h, next == 2 && wf != 0, wf);
    }
}

typedef struct integrate_ctx {
    double h, wf;
    int dv, next;
    atomic_int piece; /* the next piece to claim */
} integrate_ctx;

/* Runs of four solver bodies claimed at a time by integrate_pass. */
#define INTEGRATE_PIECE 64

/* The solver bodies in pieces of whole runs of four (the runs
 * integrate_wide.c makes with one worker), each worker claiming the next
 * piece from an atomic counter (ph__tasks_run_open: a descheduled worker
 * holds no one up), so every body is computed as with one. */
static void integrate_pass(ph__world *w, void *ctx, int worker, int nworkers) {
    (void)worker;
    (void)nworkers;
    integrate_ctx *c = ctx;
    const int32_t nrun = (w->sbody_count - 1 + 3) / 4;
    for (int32_t p; (p = atomic_fetch_add_explicit(&c->piece, 1, memory_order_relaxed)) * INTEGRATE_PIECE < nrun;) {
        const int32_t r0 = p * INTEGRATE_PIECE, r1 = r0 + INTEGRATE_PIECE < nrun ? r0 + INTEGRATE_PIECE : nrun;
        const int32_t s0 = 1 + 4 * r0, s1 = 1 + 4 * r1 < w->sbody_count ? 1 + 4 * r1 : w->sbody_count;
        if (w->settings.vector_solver) {
            ph__wide_integrate(w, s0, s1, c->h, c->dv, c->next, c->wf);
        } else {
            for (int32_t s = s0; s < s1; s++)
                ph__integrate_body(w, s, c->h, c->dv, c->next, c->wf);
        }
    }
}

/* The integration of plan p's substep of length h (integrate; ph__solve
 * may run it inside its last pass). */
static ph__wint integration(const ph__world *w, const ph__plan *p, double h) {
    ph__wint wi = {.h = h, .wf = ph__warm_factor(w), .dv = p->next != PH_NEXT_NONE};
    wi.next = p->next == PH_NEXT_FUSED_WARM ? 2 : p->next == PH_NEXT_FUSED ? 1 : 0;
    return wi;
}

/* Every solver body: four at a time (integrate_wide.c, the same numbers)
 * unless vector_solver is off; with the plan's next (step.h) also dvc and
 * the next substep's start. Split among the step's workers (tasks.c) when
 * there are enough bodies; skipped when the solve's last claimed pass has
 * done it (wi->done: each body once the last group touching it was done,
 * solver_wide.c). The ground and the joints' part of dvc after. */
static void integrate(ph__world *w, const ph__wint *wi) {
    integrate_ctx c = {.h = wi->h, .wf = wi->wf, .dv = wi->dv, .next = wi->next};
    atomic_init(&c.piece, 0);
    /* (Only when the solver's levels are split too, ph__wide's schedule: a
     * world whose solve stays on one thread, a pyramid's chains of small
     * levels, gains less from a split integration than the workers' wake-ups
     * cost.) */
    if (wi->done)
        ;
    else if (w->task_workers > 1 && w->sbody_count > PH_TASKS_MIN_BODIES && w->wsched_ok)
        ph__tasks_run_open(w, integrate_pass, &c);
    else
        integrate_pass(w, &c, 0, 1);
    if (wi->next) forces_ground(w);
    if (wi->dv) contact_dv(w);
}

/* The facts of the running step (step.h's ph__facts) as the world holds
 * them now. home: where the contact rows live (fixed for the step);
 * started: the last substep's integration did this one's start. */
static ph__facts facts(const ph__world *w, ph__home_plan home, int started) {
    ph__facts f;
    f.capture = w->capture != NULL;
    f.restitutive = w->restitutive > 0;
    f.contacts = (home == PH_HOME_BATCHES ? w->native_rows : w->contact_row_count) > 0;
    f.joints = w->joint_pool.count > 0;
    f.joint_rows = w->row_count > w->contact_row_count;
    f.batches = w->wide_ok != 0;
    f.started = started;
    return f;
}

/* Plans substep k of n from the facts as they are now: at its start (p:
 * the last substep's plan, or zero), and again when a stage has changed
 * them (the fields the stages before have used stay the same,
 * step_plan.h). */
static void replan(const ph__world *w, ph__plan *p, int started, int k, int n) {
    const ph__facts f = facts(w, p->home, started);
    *p = ph__plan_substep(&w->settings, &f, k, n);
}

/* Adds the time since t to a stage's statistics; returns now. */
static double lap(ph__world *w, ph_stage stage, double t) {
    const double t1 = now_ms();
    w->stats.stage_ms[stage] += t1 - t;
    return t1;
}

/* Stage: the pairs (broadphase), over the substep with collide_substeps,
 * else over the step. */
static int pairs_stage(ph__world *w, double h) {
    return ph__broadphase(w, w->settings.collide_substeps ? h : w->settings.time_step);
}

/* Whether the step's collision may run tile by tile (r21-tile13,
 * docs/profile.md "A sixteenth pass"; with workers, each collides the
 * tiles it claims: "A seventeenth pass"): its first narrowphase on the
 * native path, right after a step that kept its layout (with the
 * order's predecessors) and ran its substeps in two or more tiles, the
 * same solver bodies and manifolds' counts; no sleeping island (a touched
 * one would join the step), no restitutive pair (no tiles), no joint.
 * Whether it does is then the narrowphase's (ph__narrowphase_tiles_begin)
 * and the tiles' checks. */
static int np_by_tile(const ph__world *w, const ph__plan *p) {
    const ph_settings *s = &w->settings;
    return !w->np_tiles_off && w->steps > 0 && w->np_tile_step == w->steps && w->steps >= w->np_resume &&
           p->home == PH_HOME_BATCHES && w->narrowphases == 1 && !w->collide_whole && !s->collide_substeps &&
           (!s->sleep || w->island_count == 0) && w->restitutive == 0 && w->joint_pool.count == 0 && w->wreuse_ok &&
           w->wpred_ok && !w->wreuse_off && w->tile_count >= 2 && w->tile_mf && w->wpoint_mode &&
           w->manifold_count == w->wreuse_nm && w->awake_count + 1 == w->wreuse_nsb;
}

/* Stage: the contacts' geometry (plan.collide): the narrowphase with the
 * warm-start matching, contact events and islands, or the points moved
 * with their bodies. */
static int collide_stage(ph__world *w, const ph__plan *p) {
    if (w->save_pending) { /* (the broadphase's refresh makes them: not here) */
        ph__save_bodies(w, 0, w->awake_count);
        w->save_pending = 0;
    }
    switch (p->collide) {
    case PH_COLLIDE_FULL: {
        w->narrowphases++; /* (it swaps the manifold arrays first) */
        /* (The tiles' manifolds collided in the tiles, or all of them
         * here with the events; w->restitutive, the restitutive ones.) */
        int e = np_by_tile(w, p) && ph__narrowphase_tiles_begin(w) ? PH_OK : ph__narrowphase(w);
        /* Sleeping islands touched by an awake body join this step. */
        if (e == PH_OK) e = ph__wake_touched(w);
        return e;
    }
    case PH_COLLIDE_MOVE_ALL:
        return ph__refresh_manifolds(w, 1);
    case PH_COLLIDE_MOVE_RESTITUTIVE:
        return ph__refresh_manifolds(w, 0);
    case PH_COLLIDE_NONE:
        break;
    }
    return PH_OK;
}

/* Stage: the solver bodies (remapped after a collision), the impacts and
 * the forces, with the contacts' warm start when plan.warm says so; nothing
 * when the last integration did it (plan.start FUSED). */
static int start_stage(ph__world *w, const ph__plan *p, double h) {
    if (p->start == PH_START_FUSED) return PH_OK;
    const int collide = p->collide == PH_COLLIDE_FULL;
    const int impacts = p->start == PH_START_BODIES_IMPACTS;
    const int warm = p->warm == PH_WARM_WITH_FORCES;
    /* (After a collision the forces are made, and without impacts applied,
     * in build_solver_bodies' pass.) */
    int e = build_solver_bodies(w, collide, h, collide && !impacts, warm);
    if (e) return e;
    if (impacts) w->stats.impacts += ph__impacts(w, h);
    if (!collide || impacts) apply_forces(w, h, warm);
    return PH_OK;
}

/* Stage: the rows (plan.rows). Contact rows first (built after a
 * collision, else kept and refreshed), joint rows after (rebuilt every
 * substep). */
static int rows_stage(ph__world *w, const ph__plan *p, double h) {
    int e;
    w->block_count = 0;
    if (p->rows == PH_ROWS_NATIVE_BUILD || p->rows == PH_ROWS_BUILD) {
        w->row_count = 0;
        e = p->rows == PH_ROWS_NATIVE_BUILD ? ph__wide_build_native(w) : ph__contact_rows(w, h);
        if (e) return e;
        w->contact_row_count = w->row_count;
        if (p->rows == PH_ROWS_BUILD) e = ph__init_gaps(w);
        if (e) return e;
        return ph__joint_rows(w, h, p->merits != PH_MERITS_NONE);
    }
    w->row_count = w->contact_row_count;
    e = ph__joint_rows(w, h, p->merits != PH_MERITS_NONE);
    if (e) return e;
    switch (p->rows) {
    case PH_ROWS_REFRESH_FAST:
        ph__wide_refresh_fast(w, h);
        break;
    case PH_ROWS_REFRESH:
    case PH_ROWS_REFRESH_COPY:
        e = ph__refresh_contact_rows(w, p, h);
        if (e) return e;
        if (p->rows == PH_ROWS_REFRESH_COPY) ph__wide_refresh(w);
        break;
    default: /* (in the first sweep, ph__solve) */
        break;
    }
    return PH_OK;
}

/* A piece of count_contacts' sum (an integer: exact in any order). */
static void count_piece(ph__world *w, void *ctx, int32_t i0, int32_t i1, int32_t piece) {
    (void)piece;
    int n = 0;
    for (int32_t i = i0; i < i1; i++)
        n += w->manifolds[i].m.count;
    atomic_fetch_add_explicit((atomic_int *)ctx, n, memory_order_relaxed);
}

/* The contact statistics, after the last substep (the manifolds do not
 * change between collisions). Split among the workers when the solver's
 * passes are (pieces of 128 manifolds, split as the collision's pairs):
 * read on the stepping thread alone, every manifold's first line was
 * shared with it, and the other worker's collision two steps later paid a
 * cache line's round trip for each line it wrote again (pyramid40 at a
 * far placement: its collision 104 -> 90 us a step; docs/profile.md, "A
 * nineteenth pass"). */
static void count_contacts(ph__world *w) {
    int contacts = 0;
    if (w->task_workers > 1 && w->wsched_ok && w->manifold_count >= PH_TASKS_MIN_BODIES) {
        atomic_int c;
        atomic_init(&c, 0);
        ph__tasks_run_pieces(w, w->manifold_count, 128, count_piece, &c);
        contacts = atomic_load(&c);
    } else {
        for (int32_t i = 0; i < w->manifold_count; i++)
            contacts += w->manifolds[i].m.count;
    }
    w->stats.contacts = contacts;
    w->points_counted = 1;
    w->stats.manifolds = w->manifold_count;
    w->stats.pairs = w->pair_count;
}

enum { TILED_SUBSTEPS = 64 }; /* (settings.substeps' maximum) */

/* Tile t's manifolds collided into their slots and checked
 * (ph__narrowphase_tile, ph__wide_tile_keys): 0, or 1 when the step must
 * run again; *maxpen raised, *reused counted (the worker's own). */
static int np_tile(ph__world *w, int32_t t, double *maxpen, int32_t *reused) {
    const int32_t m0 = w->tile_mf[t], m1 = w->tile_mf[t + 1];
    return ph__narrowphase_tile(w, w->wpoint + m0, m1 - m0, maxpen, reused) || ph__wide_tile_keys(w, t);
}

/* A step collided by tile without a retry: 64 of them halve the wait
 * after the next retry (awake_step). */
static void np_tile_done(ph__world *w) {
    w->np_pending = 0;
    w->np_tile_steps++;
    if (++w->np_good >= 64) {
        w->np_backoff /= 2;
        w->np_good = 0;
    }
}

/* Every tile's manifolds, in tile order, before the fill (a step whose
 * collision ran by tile but whose substeps do not fit the tiles). */
static int np_tiles_all(ph__world *w) {
    double maxpen = w->stats.max_penetration;
    int32_t reused = 0;
    for (int32_t t = 0; t < w->tile_count; t++)
        if (np_tile(w, t, &maxpen, &reused)) return PH__NP_RETRY;
    w->stats.max_penetration = maxpen;
    w->stats.manifolds_reused += reused;
    np_tile_done(w);
    return PH_OK;
}
static int tiles_fit(const ph__world *w, const ph__plan *p0, int n, ph__plan *plans);
static int tiled_substeps(ph__world *w, double h, int n, int last, const ph__plan *plans, ph__plan *p);
static void envelope_tile(const ph__world *w, const int32_t *idx, int32_t n, int32_t *first);

/* Whether the step that has just collided (its first substep) runs as one
 * substep of the whole time_step (settings.joint_step_once, docs/core.md
 * "Joint-only steps"): its awake bodies have joints and no contact point,
 * its joint rows all go to the direct block of the core's PGS, and its
 * bodies turn at most joint_refactor_angle over the step. The choice is
 * the world's (its awake set), made anew in every step from its state. */
static int joint_step_once(ph__world *w, int n) {
    const ph_settings *s = &w->settings;
    if (!s->joint_step_once || n < 2 || s->collide_substeps || w->capture || w->joint_pool.count == 0 ||
        s->method != PH_METHOD_PGS || s->joint_solver != PH_JOINT_SOLVER_DIRECT ||
        (s->ordering != PH_ORDER_DEFAULT && s->ordering != PH_ORDER_GRAVITY))
        return 0;
    for (int32_t i = 0; i < w->manifold_count; i++)
        if (w->manifolds[i].m.count > 0) return 0;
    /* Bilateral joints whose rows turn only with their bodies (ball, hinge,
     * fixed): a hinge limit or motor is a bounded row the sweeps iterate,
     * and a distance joint's row turns with the line between its anchors
     * (undefined at zero length). */
    /* Every awake dynamic body on a joint: a free body keeps the substeps'
     * integration (one symplectic Euler step of a free fall is 2 % long
     * after 45 steps, ten substeps 0.2 %). */
    uint8_t *jointed = ph__arena_alloc(&w->arena, (size_t)w->body_pool.hwm + 1, "jointed bodies");
    if (!jointed) return 0;
    memset(jointed, 0, (size_t)w->body_pool.hwm + 1);
    int ok = 1;
    for (int32_t i = 0; i < w->joint_pool.hwm && ok; i++) {
        const ph__joint *j = &w->joints[i];
        if (!j->alive) continue;
        ok = !(j->type == PH_JOINT_DISTANCE || j->enable_limit || j->enable_motor);
        jointed[j->a] = 1;
        if (j->b >= 0) jointed[j->b] = 1;
    }
    double w2 = 0;
    for (int32_t i = 0; i < w->awake_count && ok; i++) {
        const ph__body *b = &w->bodies[w->awake[i]];
        ok = jointed[w->awake[i]] || b->type != PH_BODY_DYNAMIC;
        const double a2 = ph_len2(b->w);
        w2 = a2 > w2 ? a2 : w2;
    }
    ph__arena_free(&w->arena, jointed);
    if (!ok) return 0;
    /* One factor and one Jacobian for the whole step only while the bodies
     * turn little over it (as joint_refactor_angle bounds a factor's use
     * within a step): a whipping chain's fast links take the substeps. */
    const double turn = s->time_step * sqrt(w2);
    return turn <= s->joint_refactor_angle;
}

/* Substep k of n, as a script: plan, then the stages in a fixed order,
 * each timed into the world's statistics (PH_STAGE_*). p: in, the last
 * substep's plan (zero before the first); out, this one's. *tiled: set
 * to 1 when the rest of this substep and the ones up to the last ran tile
 * by tile (tiled_substeps; p is then substep n - 2's plan), to 2 when the
 * last ran in the tiles too (p is then its plan). A first
 * substep that finds a joint-only step (joint_step_once) becomes the
 * whole step: h = time_step and n = 1 from its collision on (its plan's
 * last = 1, w->joint_once = 1). */
static int substep(ph__world *w, double h, int k, int n, ph__plan *p, int *tiled) {
    const int started = p->next == PH_NEXT_FUSED || p->next == PH_NEXT_FUSED_WARM;
    replan(w, p, started, k, n);
    double t = now_ms();
    int e;
    if (p->collide == PH_COLLIDE_FULL) {
        e = pairs_stage(w, h);
        t = lap(w, PH_STAGE_BROADPHASE, t);
        if (e) return e;
    }
    e = collide_stage(w, p);
    t = lap(w, PH_STAGE_NARROWPHASE, t);
    if (e) return e;
    if (k == 0 && joint_step_once(w, n)) {
        w->joint_once = 1;
        h = w->settings.time_step;
        n = 1;
    }
    if (p->collide == PH_COLLIDE_FULL) replan(w, p, started, k, n); /* (restitutive pairs) */
    e = start_stage(w, p, h);
    if (e == PH_OK) e = rows_stage(w, p, h);
    if (e == PH_OK) e = build_order(w, p, w->contact_row_count);
    if (e) return e;
    replan(w, p, started, k, n); /* (contacts, joint rows, batches) */
    if (p->rows == PH_ROWS_NATIVE_BUILD) {
        /* The batches' numbers (the build left them to here): tile by tile
         * with the substeps up to the last when the step qualifies, else
         * over all batches. */
        ph__plan plans[TILED_SUBSTEPS];
        const int fit = k == 0 && n <= TILED_SUBSTEPS ? tiles_fit(w, p, n, plans) : 0;
        if (fit) {
            plans[0] = *p;
            *tiled = fit;
            lap(w, PH_STAGE_ROWS, t);
            return tiled_substeps(w, h, n, fit == 2, plans, p);
        }
        if (w->np_pending) { /* (the collision by tile, without the tiles: every tile's now) */
            e = np_tiles_all(w);
            if (e) return e;
        }
        ph__wide_fill(w, p, h);
    }
    ph__warm_start(w, p);
    t = lap(w, PH_STAGE_ROWS, t);
    ph__wint wi = integration(w, p, h);
    e = ph__solve(w, p, h, &wi);
    if (e) return e;
    if (w->limit.cancelled) return PH_ERR_CANCELLED; /* (the step is undone) */
    ph__store_impulses(w, p);
    t = lap(w, PH_STAGE_SOLVE, t);
    integrate(w, &wi);
    lap(w, PH_STAGE_INTEGRATE, t);
    if (p->last) count_contacts(w);
    return PH_OK;
}

/* Tiles: the substeps between the first and the last of a native step in
 * point mode (no joints, no capture, budget or per-iteration merits, no
 * restitutive pairs) do the same thing in each: the first sweep with the
 * batches' refresh, the other sweeps, the relaxation pass when planned,
 * and the integration with the next substep's forces and warm start; the
 * first substep, after its collision, solver bodies, forces and the
 * batches' layout, fills the batches, warm-starts them, sweeps, relaxes
 * and integrates the same way. No stage of these couples two islands, so
 * they can run tile by tile (the tiles of solver_wide.c: runs of whole
 * islands of about a thousand contact points), all the substeps of one
 * tile before the next tile: each body and point gets the same operations
 * in the same order, bit for bit, while a tile's batches and bodies stay
 * in the cache from their fill through substep n - 2 instead of being
 * fetched from memory once per substep (docs/profile.md, "Issue #21,
 * targets 3 and 6"). The last substep (the manifolds moved, the first
 * sweep with B, the impulses stored, the integration without a next
 * substep) couples no two islands either when its merits are the lazy
 * final ones (no record_merits): it runs in the tiles too, each tile's
 * manifolds moved once its bodies have their poses, the events pushed
 * after the tiles in manifold order. Returns 1 and the plans of substeps
 * 1 .. n - 2 in plans[] when the step qualifies, 2 and those of 1 .. n - 1
 * when its last substep does too (p0: substep 0's plan after its rows). */
static int tiles_fit(const ph__world *w, const ph__plan *p0, int n, ph__plan *plans) {
    if (n < 3 || w->tile_count < 2 || !w->wpoint_mode || !w->wide_ok || w->capture || w->joint_pool.count > 0 ||
        w->settings.max_step_work != 0 || w->settings.iterations < 1 || p0->next != PH_NEXT_FUSED_WARM ||
        p0->rows != PH_ROWS_NATIVE_BUILD || p0->warm != PH_WARM_BATCHES || p0->solve != PH_SOLVE_PGS_BATCHES ||
        p0->merits != PH_MERITS_NONE || p0->store != PH_STORE_KEEP)
        return 0;
    for (int k = 1; k <= n - 2; k++) {
        const ph__facts f = facts(w, p0->home, 1);
        const ph__plan p = ph__plan_substep(&w->settings, &f, k, n);
        if (p.collide != PH_COLLIDE_NONE || p.start != PH_START_FUSED || p.home != PH_HOME_BATCHES ||
            p.rows != PH_ROWS_REFRESH_IN_SWEEP || p.warm != PH_WARM_WITH_FORCES || p.solve != PH_SOLVE_PGS_BATCHES ||
            p.merits != PH_MERITS_NONE || p.store != PH_STORE_KEEP || p.next != PH_NEXT_FUSED_WARM)
            return 0;
        plans[k] = p;
    }
    const ph__facts f = facts(w, p0->home, 1);
    const ph__plan p = ph__plan_substep(&w->settings, &f, n - 1, n);
    if (p.collide != PH_COLLIDE_MOVE_ALL || p.start != PH_START_FUSED || p.home != PH_HOME_BATCHES ||
        p.rows != PH_ROWS_REFRESH_IN_SWEEP_B || p.warm != PH_WARM_WITH_FORCES || p.solve != PH_SOLVE_PGS_BATCHES ||
        p.merits != PH_MERITS_FINAL || p.store != PH_STORE_FROM_BATCHES || p.next != PH_NEXT_NONE || p.relax ||
        w->tile_mf == NULL)
        return 1;
    plans[n - 1] = p;
    return 2;
}

/* The rest of substep 0 (after its batches' layout) and substeps 1 ..
 * n - 2 tile by tile (tiles_fit said they qualify): per tile, substep 0's
 * fill, warm start, sweeps and relaxation (ph__wide_tile_first; timed as
 * the solve), then per substep ph__solve's sweeps and relaxation
 * (ph__wide_tile_solve), and each time integrate's pass over the tile's
 * bodies; then what those substeps do to the ground and the statistics.
 * With workers and the tiles' schedule (solver_wide.c, wsched_tiles) each
 * worker runs all of them for its own tiles, claimed one by one (a
 * descheduled worker holds up no one): tiles touch disjoint bodies, points
 * and batches and never the ground's stored velocity (point mode never
 * stores solver body 0), so nothing one worker writes is read by another
 * until the pass ends, and every tile gets the operations of one thread.
 * With last, each tile then runs the last substep: its manifolds moved
 * (flagged for the events, narrowphase.c), its sweeps with B, its
 * impulses stored and its bodies integrated; the events and the solve's
 * statistics follow the pass. plans[0 .. n - 2] (n - 1 with last): the
 * substeps' plans; p: out, the plan of the last substep run. */
typedef struct tiled_ctx {
    const ph__plan *plans;
    double h, wf;
    int n, iters, last;
    _Atomic uint64_t took; /* tiles claimed from each end (ph__tasks_next) */
    int32_t mid;           /* worker 0's share: tiles [0, mid) */
    int cancelled[PH__MAX_WORKERS];
    uint8_t *flag;                             /* with last: by manifold (ph__refresh_manifolds_tile) */
    int env;                                   /* with last: the envelope checked per tile (envelope_tile) */
    int32_t env_first[PH__MAX_WORKERS];        /* by worker: the first solver body outside found */
    double maxpen[PH__MAX_WORKERS];            /* with last: each worker's deepest point */
    int64_t points[PH__MAX_WORKERS];           /* and contact points */
    double solve_ms, integrate_ms, collide_ms; /* worker 0's */
    int np;                                    /* the collision by tile */
    atomic_int np_fail;                        /* a tile's check failed: the others stop */
    double np_maxpen[PH__MAX_WORKERS];         /* with np: each worker's deepest point */
    int32_t np_reused[PH__MAX_WORKERS];        /* and the cache's reuses */
} tiled_ctx;

/* Adds the time since *t to *acc (worker 0 only: its own split). */
static void tiled_lap(int worker, double *acc, double *t) {
    if (worker != 0) return;
    const double t1 = now_ms();
    *acc += t1 - *t;
    *t = t1;
}

static void tiled_pass(ph__world *w, void *ctx, int worker, int nworkers) {
    tiled_ctx *c = ctx;
    double t = now_ms();
    ph__cursor cur = {0, 0};
    for (int32_t tile; (tile = ph__tasks_next(&c->took, w->tile_count, c->mid, worker, nworkers, &cur)) >= 0;) {
        /* (A cancel request is seen at every tile; the step is undone.) */
        if (atomic_load_explicit(w->limit.cancel, memory_order_relaxed)) {
            c->cancelled[worker] = 1;
            return;
        }
        const int32_t *idx = w->tile_sb + w->tile_sbody[tile];
        const int32_t nb = w->tile_sbody[tile + 1] - w->tile_sbody[tile];
        /* The collision by tile: the tile's manifolds made right before its
         * fill reads them (np_by_tile), each worker its own tiles' (tiles
         * share no moving body: a tile's collision reads only its own
         * bodies, which no other worker moves). A failed check undoes the
         * step: the other workers stop at their next tile. */
        if (c->np) {
            if (atomic_load_explicit(&c->np_fail, memory_order_relaxed) ||
                np_tile(w, tile, &c->np_maxpen[worker], &c->np_reused[worker])) {
                atomic_store_explicit(&c->np_fail, 1, memory_order_relaxed);
                return;
            }
            tiled_lap(worker, &c->collide_ms, &t);
        }
        for (int k = 0; k <= c->n - 2; k++) {
            if (w->tile_batch[tile] < w->tile_batch[tile + 1]) {
                if (k == 0)
                    ph__wide_tile_first(w, tile, &c->plans[0], c->h, c->iters);
                else
                    ph__wide_tile_solve(w, tile, c->h, c->iters, c->plans[k].relax);
            }
            tiled_lap(worker, &c->solve_ms, &t);
            ph__wide_integrate_list(w, idx, nb, c->h, 1, 2, c->wf);
            tiled_lap(worker, &c->integrate_ms, &t);
        }
        if (!c->last) continue;
        /* The last substep (what substep() would run once every tile had
         * integrated substep n - 2: the tile's manifolds read only its own
         * bodies and the unmoving ones). */
        const int32_t m0 = w->tile_mf[tile], m1 = w->tile_mf[tile + 1];
        ph__refresh_manifolds_tile(w, w->wpoint + m0, m1 - m0, c->flag, &c->maxpen[worker], &c->points[worker]);
        tiled_lap(worker, &c->collide_ms, &t);
        if (w->tile_batch[tile] < w->tile_batch[tile + 1]) ph__wide_tile_last(w, tile, c->h, c->iters);
        tiled_lap(worker, &c->solve_ms, &t);
        ph__wide_integrate_list(w, idx, nb, c->h, 0, 0, c->wf);
        if (c->env) envelope_tile(w, idx, nb, &c->env_first[worker]);
        tiled_lap(worker, &c->integrate_ms, &t);
    }
}

static int tiled_substeps(ph__world *w, double h, int n, int last, const ph__plan *plans, ph__plan *p) {
    int e = ph__joint_direct_factor(w, 1, h); /* (no joint rows: marks the direct block empty, as ph__solve) */
    if (e) return e;
    tiled_ctx c;
    memset(&c, 0, sizeof c);
    atomic_init(&c.took, 0);
    c.mid = ph__wide_tile_split(w);
    c.plans = plans;
    c.h = h;
    c.wf = ph__warm_factor(w);
    c.n = n;
    c.iters = w->settings.iterations;
    c.last = last;
    c.env = last && !w->passes_whole;
    c.np = w->np_pending;
    atomic_init(&c.np_fail, 0);
    for (int k = 0; k < PH__MAX_WORKERS; k++) {
        c.env_first[k] = INT32_MAX;
        c.np_maxpen[k] = w->stats.max_penetration;
    }
    if (last) {
        c.flag = ph__arena_alloc(&w->arena, (size_t)w->manifold_count + 1, "refresh flags");
        if (!c.flag) return PH_ERR_NO_MEMORY;
        memset(c.flag, 0, (size_t)w->manifold_count + 1);
    }
    int nrelax = 0;
    for (int k = 0; k <= n - 2; k++)
        nrelax += plans[k].relax;
    const double t = now_ms();
    w->sbodies[0].v = w->sbodies[0].w = ph_v3(0, 0, 0);
    if (w->task_workers > 1 && w->wsched_ok && w->wsched_tiles)
        ph__tasks_run_open(w, tiled_pass, &c);
    else
        tiled_pass(w, &c, 0, 1);
    w->sbodies[0].v = w->sbodies[0].w = ph_v3(0, 0, 0);
    if (last) w->wb_made = 2; /* (the merits' B from vws: ph__wpointb) */
    /* (Worker 0's own split; its wait for the others counts as solving.) */
    w->stats.stage_ms[PH_STAGE_INTEGRATE] += c.integrate_ms;
    w->stats.stage_ms[PH_STAGE_NARROWPHASE] += c.collide_ms;
    w->stats.stage_ms[PH_STAGE_SOLVE] += now_ms() - t - c.integrate_ms - c.collide_ms;
    for (int k = 0; k < PH__MAX_WORKERS; k++)
        if (c.cancelled[k]) {
            if (c.flag) ph__arena_free(&w->arena, c.flag);
            w->limit.cancelled = 1;
            return PH_ERR_CANCELLED; /* (the step is undone) */
        }
    if (atomic_load_explicit(&c.np_fail, memory_order_relaxed)) { /* (undone, run again: awake_step) */
        if (c.flag) ph__arena_free(&w->arena, c.flag);
        return PH__NP_RETRY;
    }
    if (c.np) {
        /* (A maximum and a sum: exact in any order.) */
        for (int k = 0; k < PH__MAX_WORKERS; k++) {
            if (c.np_maxpen[k] > w->stats.max_penetration) w->stats.max_penetration = c.np_maxpen[k];
            w->stats.manifolds_reused += c.np_reused[k];
        }
        np_tile_done(w); /* (np_pending cleared) */
    }
    /* The ground as each of those substeps leaves it (apply_forces,
     * contact_dv), the rows they count. */
    forces_ground(w);
    w->dvc[0].v = w->dvc[0].w = ph_v3(0, 0, 0);
    const int64_t total = w->row_count + w->native_rows;
    ph__limit_count(&w->limit, (uint64_t)(n - 1) * (uint64_t)c.iters * (uint64_t)total);
    ph__limit_count(&w->limit, (uint64_t)nrelax * (uint64_t)(w->native_rows / 3));
    *p = plans[n - 2];
    w->tiled_steps++;
    w->np_tile_step = w->steps + 1; /* (the next step may collide by tile) */
    if (!last) return PH_OK;
    w->tiled_last++;
    /* The last substep's work outside the tiles: the manifolds of no
     * tile and the events (collide_stage), the rows' count (rows_stage,
     * no joint), the solve's statistics and lazy final merits (ph__solve:
     * a native PGS of iters sweeps), the contact statistics (their points
     * counted as the tiles moved the manifolds). */
    const double t1 = now_ms();
    double maxpen = 0;
    int64_t points = 0;
    for (int k = 0; k < PH__MAX_WORKERS; k++) {
        maxpen = c.maxpen[k] > maxpen ? c.maxpen[k] : maxpen;
        points += c.points[k];
    }
    if (c.env) { /* (check_envelope's answer) */
        w->env_first = INT32_MAX;
        for (int k = 0; k < PH__MAX_WORKERS; k++)
            w->env_first = c.env_first[k] < w->env_first ? c.env_first[k] : w->env_first;
        w->env_tiled = 1;
    }
    e = ph__refresh_manifolds_tiles_end(w, c.flag, maxpen, points);
    ph__arena_free(&w->arena, c.flag);
    if (e) return e;
    lap(w, PH_STAGE_NARROWPHASE, t1);
    w->block_count = 0;
    w->row_count = w->contact_row_count;
    ph__limit_count(&w->limit, (uint64_t)c.iters * (uint64_t)total);
    ph__solve_tiled(w, c.iters);
    *p = plans[n - 1];
    /* (count_contacts': the points counted by the manifolds' move.) */
    w->points_counted = 1;
    w->stats.manifolds = w->manifold_count;
    w->stats.pairs = w->pair_count;
    return PH_OK;
}

/* save_state's copies for awake[k0, k1). */
void ph__save_bodies(ph__world *w, int32_t k0, int32_t k1) {
    ph__saved_pose *sp = w->saved_pose;
    for (int32_t k = k0; k < k1; k++) {
        ph__body *b = &w->bodies[w->awake[k]];
        b->v_step = b->v;
        b->w_step = b->w;
        sp[k].p = b->p;
        sp[k].q = b->q;
    }
    if (w->settings.sleep)
        for (int32_t k = k0; k < k1; k++) {
            const ph__body *b = &w->bodies[w->awake[k]];
            ph__saved_sleep *ss = &w->saved_sleep[k];
            ss->rest_time = b->rest_time;
            ss->rest_p = b->rest_p;
            ss->rest_q = b->rest_q;
            ss->asleep = b->asleep;
        }
}

static void save_piece(ph__world *w, void *ctx, int32_t k0, int32_t k1, int32_t piece) {
    (void)ctx;
    (void)piece;
    ph__save_bodies(w, k0, k1);
}

/* Saves what a step changes and the next step reads, beside the copy of
 * the velocities into v_step, w_step that the step makes anyway: the awake
 * list and its bodies' poses (nothing else moves), their sleep state (only
 * with sleeping on: without it nothing changes it, and
 * ph_world_set_settings wakes every body when it is turned off), the
 * joints' warm-start impulses and the generator. Dense arrays grown as
 * needed: no allocation in the steady state. */
static int save_state(ph__world *w) {
    const int sleep = w->settings.sleep;
    const int32_t n = w->awake_count;
    if (ph__array_reserve(w->saved_awake, n + 1) || ph__array_reserve(w->saved_pose, n + 1) ||
        (sleep && ph__array_reserve(w->saved_sleep, n + 1)) ||
        (w->joint_pool.hwm > 0 && ph__array_reserve(w->saved_jl, 8 * w->joint_pool.hwm + 1)))
        return PH_ERR_NO_MEMORY;
    if (n > 0) memcpy(w->saved_awake, w->awake, (size_t)n * sizeof *w->awake);
    w->saved_count = n;
    /* The bodies' copies: by the first substep's broadphase, block by
     * block right before its refresh reads the same lines (nothing changes
     * a body before it; collide_stage makes them if it has not). */
    w->save_pending = !w->passes_whole;
    if (!w->save_pending && big_split(w, n))
        ph__tasks_run_pieces_at(w, n, PIECE_BODIES, w->wbody_cut, save_piece, NULL);
    else if (!w->save_pending)
        ph__save_bodies(w, 0, n);
    for (int32_t j = 0; j < w->joint_pool.hwm; j++)
        memcpy(&w->saved_jl[8 * j], w->joints[j].lambda, sizeof w->joints[j].lambda);
    w->saved_rng = w->rng;
    w->saved_manifold_count = w->manifold_count;
    w->narrowphases = 0;
    w->env_tiled = w->points_counted = 0;
    w->step_forced = -1; /* (not known until the solver bodies' pass) */
    return PH_OK;
}

static int v3_finite(ph_vec3 v) { return isfinite(v.x) && isfinite(v.y) && isfinite(v.z); }

/* A box a failed step computed from a non-finite pose is made again from
 * the restored one. The next step makes every moving shape's box again
 * before reading it, so only a snapshot of the undone world would see it,
 * and ph_world_restore refuses non-finite boxes: a world paused by
 * NOTICE_NONFINITE could not be snapshotted, rotated into a new journal or
 * moved (the journal fuzz target found it). Only non-finite boxes change,
 * so an undone step that stayed finite leaves the same bytes as before. */
static void finite_boxes(ph__world *w) {
    for (int32_t s = 0; s < w->shape_pool.hwm; s++) {
        ph__shape *sh = &w->shapes[s];
        if (sh->body < 0) continue;
        if (!v3_finite(sh->aabb_lo) || !v3_finite(sh->aabb_hi) || !v3_finite(sh->fat_lo) || !v3_finite(sh->fat_hi) ||
            !isfinite(sh->slack) || !isfinite(sh->spec)) {
            ph__geom_aabb(&sh->geom, ph__shape_pose(w, sh), w->settings.contact_margin, &sh->aabb_lo, &sh->aabb_hi);
            sh->fat_lo = sh->aabb_lo;
            sh->fat_hi = sh->aabb_hi;
            sh->slack = 0;
            sh->spec = 0;
        }
    }
}

/* Puts the world back as save_state found it. The manifolds: a step that
 * collided once swapped last step's manifolds into prev_manifolds and only
 * read them since, so swapping back restores them; after several
 * collisions (collide_substeps) they wait in spare_manifolds (the second
 * narrowphase put them there untouched) and are swapped back from there,
 * so the next step warm-starts as if this one had never run. What the step computed besides
 * (batches, rows, the broadphase's fat boxes) is rebuilt by the next step;
 * the fat boxes, made from the failed poses, are marked stale. Forces and
 * torques are kept: ph_world_step clears them only after a step that
 * stands. */
static void restore_state(ph__world *w) {
    const ph__saved_pose *sp = w->saved_pose;
    const int32_t n = w->saved_count;
    const int32_t nb = w->save_pending ? 0 : n; /* (pending: no body changed yet) */
    w->save_pending = 0;
    for (int32_t k = 0; k < nb; k++) {
        ph__body *b = &w->bodies[w->saved_awake[k]];
        b->p = sp[k].p;
        b->q = sp[k].q;
        b->v = b->v_step;
        b->w = b->w_step;
    }
    if (w->settings.sleep)
        for (int32_t k = 0; k < nb; k++) {
            ph__body *b = &w->bodies[w->saved_awake[k]];
            const ph__saved_sleep *ss = &w->saved_sleep[k];
            b->rest_time = ss->rest_time;
            b->rest_p = ss->rest_p;
            b->rest_q = ss->rest_q;
            b->asleep = (uint8_t)ss->asleep;
        }
    /* The islands a contact woke go back to sleep, the ones put to sleep
     * are gone, and the awake list is the step's first. */
    ph__islands_undo(w);
    if (n > 0) memcpy(w->awake, w->saved_awake, (size_t)n * sizeof *w->awake);
    w->awake_count = n;
    w->awake_dirty = 0;
    for (int32_t j = 0; j < w->joint_pool.hwm; j++)
        memcpy(w->joints[j].lambda, &w->saved_jl[8 * j], sizeof w->joints[j].lambda);
    w->rng = w->saved_rng;
    if (w->narrowphases == 1) {
        ph__contact_manifold *t = w->manifolds;
        w->manifolds = w->prev_manifolds;
        w->manifold_count = w->prev_count;
        w->prev_manifolds = t;
        w->prev_count = 0;
    } else if (w->narrowphases > 1) {
        ph__contact_manifold *t = w->manifolds;
        w->manifolds = w->spare_manifolds;
        w->manifold_count = w->saved_manifold_count;
        w->spare_manifolds = t;
        w->prev_count = 0;
    }
    finite_boxes(w);
    w->narrowphases = 0;
    w->np_pending = 0;
    w->event_count = 0;
    w->fat_ok = 0;
    w->wide_ok = 0;
    w->merits_pending = 0;
}

/* Whether a body is a dynamic one outside the envelope (NaN fails every
 * test). */
static inline int outside_envelope(const ph__body *b) {
    const double vmax2 = PH_ENVELOPE_LINEAR_SPEED * PH_ENVELOPE_LINEAR_SPEED;
    const double wmax2 = PH_ENVELOPE_ANGULAR_SPEED * PH_ENVELOPE_ANGULAR_SPEED;
    if (b->type != PH_BODY_DYNAMIC) return 0;
    const double qn = b->q.x * b->q.x + b->q.y * b->q.y + b->q.z * b->q.z + b->q.w * b->q.w - 1.0;
    const double v2 = ph_len2(b->v), w2 = ph_len2(b->w);
    return !(fabs(b->p.x) <= PH_ENVELOPE_POSITION && fabs(b->p.y) <= PH_ENVELOPE_POSITION &&
             fabs(b->p.z) <= PH_ENVELOPE_POSITION && fabs(qn) <= PH_ENVELOPE_QUAT_NORM && v2 <= vmax2 && w2 <= wmax2);
}

/* The first solver body of [s0, s1) outside the envelope, or -1. */
static int32_t envelope_range(const ph__world *w, int32_t s0, int32_t s1) {
    for (int32_t s = s0; s < s1; s++)
        if (outside_envelope(&w->bodies[w->sbody_body[s]])) return s;
    return -1;
}

/* A tile's share of the envelope check, right after its last integration
 * (tiled_pass: its bodies' records are still in the cache): the first of
 * its solver bodies idx[0, n) (ascending) outside lowers *first. The
 * tiles partition the solver bodies and nothing moves a body after its
 * tile's last integration (no joints in a tiled step), so the least over
 * the tiles is the pass's answer. */
static void envelope_tile(const ph__world *w, const int32_t *idx, int32_t n, int32_t *first) {
    for (int32_t k = 0; k < n; k++) {
        const int32_t s = idx[k];
        if (s >= *first) return;
        if (outside_envelope(&w->bodies[w->sbody_body[s]])) {
            *first = s;
            return;
        }
    }
}

/* A piece's first body outside lowers *first (the least one found by any
 * piece: the first in slot order, whoever finds it). */
static void envelope_piece(ph__world *w, void *ctx, int32_t r0, int32_t r1, int32_t piece) {
    (void)piece;
    atomic_int *first = ctx;
    const int32_t s = envelope_range(w, 1 + r0, 1 + r1);
    int cur = atomic_load_explicit(first, memory_order_relaxed);
    while (s >= 0 && s < cur &&
           !atomic_compare_exchange_weak_explicit(first, &cur, s, memory_order_relaxed, memory_order_relaxed)) {
    }
}

/* The envelope check after a step: every awake dynamic body (the solver
 * bodies, in slot order) with its position, orientation and velocities
 * inside PH_ENVELOPE_*. Written so that NaN fails every test. Fills
 * w->fault with the first body outside and returns PH_ERR_NONFINITE. Split
 * among the step's workers with big_split: the first body outside in slot
 * order is the one reported, whoever finds it. After a step whose last
 * substep ran in the tiles the tiles have done the pass (envelope_tile);
 * only the report is left. */
static int check_envelope(ph__world *w, uint16_t world0) {
    const double vmax2 = PH_ENVELOPE_LINEAR_SPEED * PH_ENVELOPE_LINEAR_SPEED;
    int32_t s = -1;
    if (w->env_tiled) { /* (done by the tiles: tiled_pass) */
        s = w->env_first == INT32_MAX ? -1 : w->env_first;
    } else if (big_split(w, w->sbody_count)) {
        atomic_int first;
        atomic_init(&first, INT32_MAX);
        ph__tasks_run_pieces_at(w, w->sbody_count - 1, PIECE_BODIES, w->wbody_cut, envelope_piece, &first);
        s = atomic_load(&first);
        if (s == INT32_MAX) s = -1;
    } else {
        s = envelope_range(w, 1, w->sbody_count);
    }
    if (s >= 0) {
        const int32_t i = w->sbody_body[s];
        const ph__body *b = &w->bodies[i];
        const double qn = b->q.x * b->q.x + b->q.y * b->q.y + b->q.z * b->q.z + b->q.w * b->q.w - 1.0;
        const double v2 = ph_len2(b->v), w2 = ph_len2(b->w);
        ph_fault *f = &w->fault;
        f->step = w->steps + 1;
        f->body.index1 = i + 1;
        f->body.world0 = world0;
        f->body.gen = b->gen;
        if (!(fabs(b->p.x) <= PH_ENVELOPE_POSITION)) {
            f->what = PH_FAULT_POSITION;
            f->value = b->p.x;
        } else if (!(fabs(b->p.y) <= PH_ENVELOPE_POSITION)) {
            f->what = PH_FAULT_POSITION;
            f->value = b->p.y;
        } else if (!(fabs(b->p.z) <= PH_ENVELOPE_POSITION)) {
            f->what = PH_FAULT_POSITION;
            f->value = b->p.z;
        } else if (!(fabs(qn) <= PH_ENVELOPE_QUAT_NORM)) {
            f->what = PH_FAULT_ORIENTATION;
            f->value = isnan(qn) ? qn : fabs(qn);
        } else if (!(v2 <= vmax2)) {
            f->what = PH_FAULT_LINEAR_VELOCITY;
            f->value = sqrt(v2);
        } else {
            f->what = PH_FAULT_ANGULAR_VELOCITY;
            f->value = sqrt(w2);
        }
        return PH_ERR_NONFINITE;
    }
    return PH_OK;
}

/* The statistics of steps in which nothing is awake (no solver work, no
 * contacts evaluated): the figures of the solve zeroed once when such a
 * run of steps begins; the counts are filled in when they are read
 * (ph__idle_stats_fill), so an idle step writes nothing but the step
 * count. Idle steps are not timed (total_ms 0). */
static void idle_stats(ph__world *w) {
    ph_step_stats *st = &w->stats;
    for (int k = 0; k < PH_STAGE_COUNT; k++)
        st->stage_ms[k] = 0;
    st->iterations = st->rows = st->pairs = st->impacts = st->awake_bodies = 0;
    st->manifolds_reused = st->shapes_updated = st->merit_count = 0;
    st->fischer_final = st->minmap_final = st->rel_residual = st->lcp_error_final = st->work_final = 0;
    st->subspace_steps = st->cg_iterations = st->sm_precond_fallbacks = st->direct_status = 0;
    st->best_index = -1;
    st->max_penetration = 0;
    st->row_updates = 0;
    st->budget_exhausted = 0;
    st->total_ms = 0;
}

void ph__idle_stats_fill(ph__world *w) {
    ph_step_stats *st = &w->stats;
    st->step = w->steps;
    st->bodies = w->body_pool.count;
    st->joints = w->joint_pool.count;
    st->islands = st->sleeping_islands = w->island_count;
    st->sleeping_bodies = w->sleep_bodies;
    st->manifolds = w->manifold_count + w->sleep_manifolds;
    const int64_t c = ph__contact_points(w);
    st->contacts = c > INT32_MAX ? INT32_MAX : (int)c;
}

/* The step's working arrays, which a world with nothing awake does not
 * need: released when such a run of steps begins (a sleeping world keeps
 * its bodies, shapes, islands and resting tree, not a step's scratch), and
 * grown again by the step after the next wake. */
static void release_step_arrays(ph__world *w) {
    ph__world_release_step_arrays(w);
    if (w->manifold_count == 0) { /* (all in the islands' records) */
        ph__array_free(w->manifolds);
        w->manifolds = NULL;
    }
    ph__arena_destroy(&w->arena);
    w->pair_count = w->fat_pair_count = w->jpair_count = w->prev_count = 0;
    w->fat_ok = 0;
    w->row_count = w->contact_row_count = w->block_count = w->order_njoint = 0;
    w->wbatch_count = w->native_rows = w->tile_count = 0;
    w->wide_ok = 0;
    w->sbody_count = w->sbody_aniso = w->b2s_zeroed = 0;
    w->saved_count = w->mlist_count = 0;
    w->event_count = 0;
}

/* A step with no awake body: nothing moves, nothing is collided or
 * solved, and it costs no more than its bookkeeping, whatever sleeps
 * (docs/core.md "Islands and sleeping"): it touches one cache line of the
 * world record. */
static int idle_step(ph__world *w) {
    if (atomic_load(&w->cancel)) { /* (a cancel request stops this step as any other) */
        w->cancel_taken = 1;
        return PH_ERR_CANCELLED;
    }
    if (!w->stats_idle) {
        idle_stats(w);
        release_step_arrays(w);
    }
    w->stats_idle = 1;
    w->event_count = 0;
    w->merits_pending = 0;
    w->steps++;
    return PH_OK;
}

static int awake_step(ph__world *w, ph_world_id id);
static int awake_step_once(ph__world *w, ph_world_id id);

int ph_world_step(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    /* A cancel request that took effect in the last step is over. */
    if (w->cancel_taken) {
        atomic_store(&w->cancel, 0);
        w->cancel_taken = 0;
    }
    /* Islands woken by edits rejoin the step's manifolds first (not part of
     * the step: a failed step leaves them awake, as the edit did). */
    int e = w->pending > 0 || w->awake_dirty ? ph__islands_begin(w) : PH_OK;
    if (e) return e;
    if (w->awake_count == 0) return idle_step(w);
    ph__tasks_begin(w); /* (the workers of this step's passes) */
    e = awake_step(w, id);
    ph__tasks_end(w);
    return e;
}

/* A step with awake bodies (the pool's workers ready). A step whose
 * collision ran by tile and found, in a tile, that today's narrowphase
 * would have made another layout or pushed an event (PH__NP_RETRY) has
 * been undone (restore_state) and runs again with the narrowphase over all
 * pairs. */
static int awake_step(ph__world *w, ph_world_id id) {
    const int e = awake_step_once(w, id);
    if (e != PH__NP_RETRY) return e;
    w->np_retries++;
    w->np_tile_step = 0; /* (not by tile again) */
    /* A retry costs the step's collision and part of its solve twice: the
     * next try waits 1, 2, 4 ... up to 64 steps (halved by every 64 steps
     * collided by tile since), so a world whose contacts keep changing
     * pays some 1/64 more at most. */
    w->np_backoff = w->np_backoff ? (w->np_backoff < 64 ? 2 * w->np_backoff : 64) : 1;
    w->np_good = 0;
    w->np_resume = w->steps + 1 + (uint64_t)w->np_backoff;
    return awake_step_once(w, id);
}

static int awake_step_once(ph__world *w, ph_world_id id) {
    int e;
    double t0 = now_ms();
    ph_step_stats *st = &w->stats;
    w->stats_idle = 0;
    w->hash_ok = 0; /* (ph_world_state_hash's cache) */
    for (int k = 0; k < PH_STAGE_COUNT; k++)
        st->stage_ms[k] = 0;
    st->impacts = 0;
    w->event_count = 0;
    w->merits_pending = 0; /* (last step's, unread: replaced by this step's) */
    w->limit.left = w->settings.max_step_work ? w->settings.max_step_work : UINT64_MAX;
    w->limit.used = 0;
    w->limit.cancel = &w->cancel;
    w->limit.exhausted = w->limit.cancelled = 0;
    e = save_state(w);
    if (e) return e;
    const int n = w->settings.substeps;
    const double h = w->settings.time_step / n;
    ph__plan plan;
    memset(&plan, 0, sizeof plan);
    w->joint_once = 0;
    for (int k = 0; k < n && e == PH_OK; k++) {
        /* (A cancel request is seen at every substep and sweep boundary.)
         * The substeps up to the last may run tile by tile from within
         * the first when nothing couples the tiles (tiles_fit). */
        int tiled = 0;
        e = ph__limit_cancel(&w->limit) ? PH_ERR_CANCELLED : substep(w, h, k, n, &plan, &tiled);
        if (w->joint_once) break; /* (the first substep was the whole step) */
        if (tiled) k = tiled == 2 ? n - 1 : n - 2;
    }
    /* (The contact points as the last substep counted them, and what the
     * islands' end may move out of the step's manifolds.) */
    const int32_t mcount = w->manifold_count;
    const int64_t spoints = w->sleep_points;
    if (e == PH_OK && w->joint_once)
        e = ph__joint_project_direct(w, w->settings.joint_projection, n);
    else if (e == PH_OK && w->settings.joint_projection > 0)
        ph__joint_project(w, w->settings.joint_projection);
    if (e == PH_OK) e = check_envelope(w, (uint16_t)(id.index1 - 1));
    /* The islands at rest go to sleep (timers from the step's end). */
    if (e == PH_OK) e = ph__islands_end(w);
    st->row_updates = w->limit.used;
    st->budget_exhausted = w->limit.exhausted;
    if (e != PH_OK) { /* (NONFINITE, CANCELLED or NO_MEMORY: the step is undone) */
        if (e == PH_ERR_CANCELLED) w->cancel_taken = 1;
        restore_state(w);
        ph__arena_end_step(&w->arena);
        return e;
    }
    /* The forces are cleared: a pass over the bodies only when the solver
     * bodies' pass (which read every awake body's force) found one. */
    for (int32_t k = 0; k < w->saved_count && (w->step_forced != 0 || w->passes_whole); k++) {
        ph__body *b = &w->bodies[w->saved_awake[k]];
        b->force = ph_v3(0, 0, 0);
        b->torque = ph_v3(0, 0, 0);
    }
    ph__islands_commit(w);
    w->steps++;
    st->step = w->steps;
    st->bodies = w->body_pool.count;
    st->awake_bodies = w->sbody_count - 1;
    st->joints = w->joint_pool.count;
    st->sleeping_islands = w->island_count;
    st->sleeping_bodies = w->sleep_bodies;
    st->manifolds = w->manifold_count + w->sleep_manifolds;
    /* The last substep counted the step's points (count_contacts, or the
     * tiles' move); a recount over the manifolds only when the islands'
     * end moved some of them or the sleeping points changed. */
    if (w->points_counted && w->manifold_count == mcount && w->sleep_points == spoints && !w->passes_whole)
        st->contacts = (int)((int64_t)st->contacts + spoints);
    else
        st->contacts = (int)ph__contact_points(w);
    ph__arena_end_step(&w->arena);
    st->total_ms = now_ms() - t0;
    return PH_OK;
}

int ph_world_cancel_step(ph_world_id id) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    atomic_store(&w->cancel, 1);
    return PH_OK;
}

int ph_world_get_fault(ph_world_id id, ph_fault *out) {
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (!out) return PH_ERR_INVALID_ARGUMENT;
    *out = w->fault;
    return PH_OK;
}
