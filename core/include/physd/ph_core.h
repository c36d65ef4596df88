/*
 * ph_core.h — the public API of physd's physics core.
 *
 * A world holds bodies; a body holds one or more shapes at local poses (a
 * body with several shapes is a compound); joints link two bodies. All of
 * them are addressed by small handle structs that carry a generation, so a
 * handle to something destroyed (even if its slot has been reused) is
 * detected: every function that takes a handle validates it and returns
 * PH_ERR_INVALID_HANDLE (or a neutral value) instead of touching memory. A
 * slot whose generation would wrap (16 bits for bodies, shapes and joints,
 * 32 for worlds) is retired, never reused: an id names only what it was
 * issued for.
 *
 * Units are SI throughout: metres, kilograms, seconds, radians, newtons.
 * z is up by convention only; gravity is a world setting.
 *
 * Threading: a world may be stepped on any thread, but one world must not be
 * used by two threads at once. Creating and destroying worlds is thread-safe.
 * The core has no I/O, no sockets and no protocol knowledge.
 */
#ifndef PHYSD_PH_CORE_H
#define PHYSD_PH_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "ph_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

/* Functions return 0 (PH_OK) on success or one of these negative codes.
 * One list generates the codes, their names and their messages:
 * XX(name, value, message) gives PH_ERR_<name> = value, named
 * "PH_ERR_<name>" by ph_err_name and described by ph_strerror. */
#define PH_ERRNO_MAP(XX)                                                                                               \
    /* null, stale or forged handle */                                                                                 \
    XX(INVALID_HANDLE, -1, "invalid handle")                                                                           \
    /* NaN/inf, out-of-range value, bad enum */                                                                        \
    XX(INVALID_ARGUMENT, -2, "invalid argument")                                                                       \
    /* a world, body, shape or joint limit is reached */                                                               \
    XX(LIMIT, -3, "limit reached")                                                                                     \
    XX(NO_MEMORY, -4, "out of memory")                                                                                 \
    /* e.g. a plane on a dynamic body */                                                                               \
    XX(WRONG_KIND, -5, "wrong kind of body or shape")                                                                  \
    /* ph_world_step: the step left a body outside the finite envelope (PH_ENVELOPE_*); the world                      \
     * was restored to its state before the step (ph_world_get_fault says which body and what) */                      \
    XX(NONFINITE, -6, "the step left the finite envelope (world restored)")                                            \
    /* ph_world_step: cancelled by ph_world_cancel_step; the world was restored to its state                           \
     * before the step */                                                                                              \
    XX(CANCELLED, -7, "the step was cancelled (world restored)")                                                       \
    /* ph_world_restore (ph_snapshot.h): the data does not start with a snapshot's magic */                            \
    XX(NOT_SNAPSHOT, -8, "not a physd snapshot (bad magic)")                                                           \
    /* ph_world_restore: a format version, byte order or double format this core does not read */                      \
    XX(SNAPSHOT_VERSION, -9, "unsupported snapshot version or format")                                                 \
    /* ph_world_restore: fewer bytes than the snapshot's header or its total length says */                            \
    XX(SNAPSHOT_TRUNCATED, -10, "snapshot is truncated")                                                               \
    /* ph_world_restore: the checksum over the snapshot does not match (a changed byte) */                             \
    XX(SNAPSHOT_CORRUPT, -11, "snapshot is corrupt (checksum mismatch)")                                               \
    /* ph_world_restore: the checksum matches but a field is out of range or inconsistent (a                           \
     * count, an index, a generation, a free list, a non-finite number, a section's length) */                         \
    XX(SNAPSHOT_INVALID, -12, "snapshot is invalid (a field out of range or inconsistent)")

typedef enum ph_error {
    PH_OK = 0,
#define PH_ERR_ENUM(name, value, msg) PH_ERR_##name = (value),
    PH_ERRNO_MAP(PH_ERR_ENUM)
#undef PH_ERR_ENUM
} ph_error;

/* A short English message for an error code ("invalid handle", ...; "ok"
 * for PH_OK, "unknown error" for any other value); never NULL. */
const char *ph_strerror(int err);
/* The code's name, such as "PH_ERR_INVALID_HANDLE" ("PH_OK" for 0,
 * "PH_ERR_UNKNOWN" for any other value); never NULL. */
const char *ph_err_name(int err);

/* --------------------------------------------------------------- handles */

/* index1 is the slot index plus one, so an all-zero handle is null. A
 * world's generation is 32 bits: worlds are made at a client's request
 * rate (creations, resets, rollbacks and past-tick queries each make one),
 * so 16 bits would retire the whole registry in hours (docs/core.md). */
typedef struct ph_world_id {
    uint16_t index1;
    uint32_t gen;
} ph_world_id;

typedef struct ph_body_id {
    int32_t index1;
    uint16_t world0;
    uint16_t gen;
} ph_body_id;

typedef struct ph_shape_id {
    int32_t index1;
    uint16_t world0;
    uint16_t gen;
} ph_shape_id;

typedef struct ph_joint_id {
    int32_t index1;
    uint16_t world0;
    uint16_t gen;
} ph_joint_id;

/* Handles as 64-bit integers (for the wire) and back. 0 is the null id. */
uint64_t ph_body_id_to_u64(ph_body_id id);
ph_body_id ph_body_id_from_u64(ph_world_id w, uint64_t v);
uint64_t ph_joint_id_to_u64(ph_joint_id id);
ph_joint_id ph_joint_id_from_u64(ph_world_id w, uint64_t v);
uint64_t ph_shape_id_to_u64(ph_shape_id id);

/* Maximum number of worlds alive at once in one process. */
#define PH_MAX_WORLDS 4096
/* Hard upper bounds per world (a world's own limits may be lower). */
#define PH_MAX_BODIES 1000000
#define PH_MAX_SHAPES_PER_BODY 64

/* ------------------------------------------------------------- envelope */

/* The finite envelope of a moving body's state. After every step
 * ph_world_step checks each awake dynamic body against it; a body outside
 * it (or with a value that is not finite) makes the step fail with
 * PH_ERR_NONFINITE, and the world is put back exactly as it was before the
 * step. No edit may place a body outside it (PH_ERR_INVALID_ARGUMENT).
 *
 * Why these figures: positions to 1e7 m (per component; Earth's diameter
 * is 1.3e7 m) keep a double's resolution below 2e-9 m, far under the
 * 1e-4 m of the contact cache and the millimetres of contact depths; 1e5
 * m/s is 9 times Earth's escape speed and over 10 times the fastest
 * gun-launched projectile, and at the default step a body at that speed crosses 1.7 km
 * per step, where speculative contacts and the broadphase's swept boxes
 * stop meaning anything; 1e5 rad/s (about a million rpm) is six times the
 * fastest ultracentrifuge, and at the default substep it turns a body by
 * 170 rad per substep. A state beyond them is a blow-up, not a motion. */
#define PH_ENVELOPE_POSITION 1e7      /* m, |x|, |y|, |z| of a body's position */
#define PH_ENVELOPE_LINEAR_SPEED 1e5  /* m/s, |v| */
#define PH_ENVELOPE_ANGULAR_SPEED 1e5 /* rad/s, |w| */
/* | |q|^2 - 1 | of an orientation after a step (each substep renormalizes
 * it to rounding; a larger error means its integration broke down). */
#define PH_ENVELOPE_QUAT_NORM 1e-6

/* What a failed step found (ph_fault.what). */
typedef enum ph_fault_kind {
    PH_FAULT_NONE = 0,             /* no step has failed yet */
    PH_FAULT_POSITION = 1,         /* a position component not finite or beyond PH_ENVELOPE_POSITION */
    PH_FAULT_ORIENTATION = 2,      /* a component not finite, or | |q|^2 - 1 | > PH_ENVELOPE_QUAT_NORM */
    PH_FAULT_LINEAR_VELOCITY = 3,  /* |v| not finite or beyond PH_ENVELOPE_LINEAR_SPEED */
    PH_FAULT_ANGULAR_VELOCITY = 4, /* |w| not finite or beyond PH_ENVELOPE_ANGULAR_SPEED */
} ph_fault_kind;

/* The last step that failed with PH_ERR_NONFINITE. */
typedef struct ph_fault {
    uint64_t step;   /* the number the failed step would have had (the step count after it);
                        0 when no step has failed */
    ph_body_id body; /* the first body outside the envelope, in slot order (null id: none) */
    int what;        /* ph_fault_kind: the first quantity of that body found outside, checked in
                        the order position, orientation, linear velocity, angular velocity */
    double value;    /* that quantity: the position component (m), | |q|^2 - 1 |, |v| (m/s) or
                        |w| (rad/s); NaN or inf when it was not finite */
} ph_fault;

/* Bounds of the values the core accepts for physical properties (each
 * edit outside them gives PH_ERR_INVALID_ARGUMENT). */
#define PH_MIN_MASS 1e-6 /* kg, ph_body_set_mass: a milligram */
#define PH_MAX_MASS 1e12 /* kg: a small mountain; a mass ratio of 1e18 is past any solver */
/* Each principal moment given to ph_body_set_mass is 0 (the axis is
 * locked) or within these, kg m^2: a milligram at a millimetre, and
 * PH_MAX_MASS at 30 m. */
#define PH_MIN_INERTIA 1e-12
#define PH_MAX_INERTIA 1e15
/* m: a distance joint's rest length (given or measured at creation), at
 * most the size of the largest shape (half extents up to 1e4 m). Anchors
 * are bounded by PH_ENVELOPE_POSITION. */
#define PH_MAX_JOINT_DISTANCE 1e4
/* N/m: the stiffness k of every ph_spook (1e15 N/m is a steel bar of 1 m^2
 * section and 0.2 mm length); d is in [0, 1000] time steps and hertz in
 * [0, 1e6]. */
#define PH_MIN_SPOOK_K 1e-6
#define PH_MAX_SPOOK_K 1e15

/* -------------------------------------------------------------- settings */

typedef enum ph_friction_model {
    /* NCP friction of Silcowitz et al. (seeds/000): each tangential impulse is
     * bounded by ±mu·lambda_n using the current normal impulse of the same
     * contact during the iterations. Default. */
    PH_FRICTION_NCP = 0,
    /* Scaled box of Bodin's SPOOK notes (seeds/002, eqs. 43-44): bounds
     * ±mu·m·g·h with m the reduced mass of the pair divided by the number of
     * points of its manifold and g = |gravity|, fixed during the solve. */
    PH_FRICTION_SCALED_BOX = 1,
} ph_friction_model;

/* The solver of the constraint rows (docs/solvers.md). Every method works
 * on the same rows and the same velocity bookkeeping, so switching is a
 * setting, not a rebuild. */
typedef enum ph_method {
    PH_METHOD_PGS = 0,       /* projected Gauss–Seidel with velocity bookkeeping (default) */
    PH_METHOD_PGS_SM = 1,    /* PGS subspace minimization (seeds/000, section 4): k_pgs PGS
                                sweeps estimate the active set, then up to k_sm subspace steps
                                solve the reduced system by conjugate gradients; falls back to
                                the best iterate by the Fischer merit */
    PH_METHOD_BLOCK_PGS = 2, /* blockwise PGS (seeds/001): each contact point's normal and two
                                friction rows, and each joint's rows, solved together exactly
                                as one small problem per visit */
    PH_METHOD_JACOBI = 3,    /* projected Jacobi (all rows from the same iterate), relaxed by
                                jacobi_relaxation; for comparison */
    PH_METHOD_DIRECT = 4,    /* exact reference solver: active-set enumeration, for at most
                                PH_DIRECT_MAX_ROWS rows; larger problems fall back to PGS and
                                report it in ph_step_stats.direct_status */
    PH_METHOD_NNCG = 5,      /* nonsmooth nonlinear conjugate gradients (Silcowitz, Niebe and
                                Erleben 2010): PGS sweeps as the preconditioned gradient,
                                Fletcher-Reeves momentum, restart when the PGS step grows */
    PH_METHOD_APGD = 6,      /* accelerated projected gradient descent (Mazhar, Heyn, Negrut and
                                Tasora 2015): Nesterov momentum, adaptive restart, step size by
                                backtracking, Jacobi-scaled; returns the best iterate by psi */
    PH_METHOD_COUNT
} ph_method;

/* The direct method enumerates up to 3^rows active sets: it is for tiny
 * worlds and for tests. */
#define PH_DIRECT_MAX_ROWS 12

/* How PGS treats the joints' bilateral rows (the linear and angular rows of
 * ball, hinge, fixed and distance joints; limit and motor rows are always
 * scalar projected updates). */
typedef enum ph_joint_solver {
    PH_JOINT_SOLVER_GS = 0,     /* scalar Gauss–Seidel updates, 3-row blocks for ball and fixed
                                   joints' linear rows */
    PH_JOINT_SOLVER_DIRECT = 1, /* all of them as one block solved exactly in every sweep: a sparse
                                   L D L^T factor of their S, once per substep (joint_direct.c) */
    PH_JOINT_SOLVER_COUNT
} ph_joint_solver;

/* The row order the Gauss–Seidel sweep visits (seeds/001, seeds/002). */
typedef enum ph_ordering {
    PH_ORDER_DEFAULT = 0,         /* joints in creation order, then the contact manifolds bottom-up:
                                     sorted by the mean height of their points along -gravity, ties
                                     by pair order; each point's normal, t1, t2 together. Manifolds
                                     that share no moving body are solved four at a time
                                     (solver_wide.c), which is the same sweep */
    PH_ORDER_GRAVITY = 1,         /* contact points (triples) sorted bottom-up along gravity */
    PH_ORDER_RANDOM = 2,          /* a random permutation of the rows from the world's seeded
                                     generator: per step, or per iteration (deterministic) */
    PH_ORDER_COMPLEMENTARITY = 3, /* rows by decreasing complementarity error of the current
                                   iterate (the LCP error term of each row), ties by index */
    PH_ORDER_EFFECTIVE_MASS = 4,  /* rows by decreasing effective mass 1 / S_ii, ties by index */
    PH_ORDER_COUNT
} ph_ordering;

/* Which rows of the reduced PGS–SM system get the regularization gamma
 * (seeds/000, section 5.1). */
typedef enum ph_gamma_scope {
    PH_GAMMA_ALL = 0,      /* every row of the active set (default) */
    PH_GAMMA_FRICTION = 1, /* only friction rows ("only dampening the entries corresponding to
                              friction forces") */
} ph_gamma_scope;

/* The widest instruction set the vector solver may use (settings.simd): a
 * cap on what the CPU has, for comparisons; all give the same numbers. */
typedef enum ph_simd {
    PH_SIMD_BASELINE = 0, /* the x86-64 baseline (SSE2) */
    PH_SIMD_AVX2 = 1,
    PH_SIMD_AVX512 = 2, /* AVX-512VL: no cap (default) */
    PH_SIMD_COUNT
} ph_simd;

/* SPOOK parameters of one constraint kind (seeds/002, eqs. 9-11). */
typedef struct ph_spook {
    double k;     /* stiffness, N/m (per row), [PH_MIN_SPOOK_K, PH_MAX_SPOOK_K]; used when
                     hertz == 0 */
    double d;     /* relaxation, in time steps, [0, 1000] */
    double hertz; /* > 0: the stiffness of each row is instead m_eff (2 pi hertz)^2 with
                     m_eff = 1 / (G M^-1 G^T) of that row, i.e. every row is a spring
                     of this natural frequency whatever the masses; 0 = use k */
} ph_spook;

/* One struct per world; every field may be changed between steps with
 * ph_world_set_settings. Defaults, ranges, units and descriptions are the
 * rows of the settings table (core/src/settings.c, ph_settings.h; the docs'
 * table is generated from it); the comments below explain the fields. */
typedef struct ph_settings {
    double time_step;                 /* s, default 1/60, in (0, 1] */
    int substeps;                     /* default 10, in [1, 64] */
    int iterations;                   /* max solver iterations per substep, default 1, [1, 10000]
                                         (the default budget is 10 x 1 = 10 sweeps per step) */
    double tolerance;                 /* stop when the Fischer merit psi < tolerance; 0 = run all
                                         iterations (default 0), >= 0 */
    ph_vec3 gravity;                  /* m/s^2, default (0, 0, -9.81) */
    ph_spook contact;                 /* default hertz = 110 (mass-independent), d = 5; k = 1e8 when
                                         hertz is set to 0 */
    ph_spook friction;                /* regularization of friction rows, default k = 1e10, d = 4
                                         (only epsilon is used: friction has no position error) */
    ph_spook joint;                   /* default hertz = 180, d = 3; k = 1e10 when hertz is 0 */
    ph_friction_model friction_model; /* default PH_FRICTION_NCP */
    ph_method method;                 /* default PH_METHOD_PGS */
    ph_ordering ordering;             /* default PH_ORDER_DEFAULT */
    int warm_start;                   /* reuse last step's impulses matched by feature keys, default 1 */
    double warm_start_factor;         /* fraction of the cached impulse applied, default 1.0, [0, 1] */
    double restitution_threshold;     /* m/s: approach speed above which a Newton–Coulomb
                                         impact impulse is applied first, default 1.0 */
    double contact_margin;            /* m: contacts are generated up to this separation (speculative),
                                         default 0.02 */
    double contact_cache_tolerance;   /* m: a pair of shapes that had contact points last step and
                                  whose relative pose has moved no point of the smaller shape by
                                  more than this since they were last collided is not collided
                                  again: its points move with the bodies as in the later substeps
                                  (see docs/core.md); 0 = collide every step; default 1e-4, [0, 1] */
    int gyroscopic;                   /* implicit gyroscopic term, default 1 */
    int record_merits;                /* compute merits after every iteration (needed for the
                                         per-iteration statistics), default 1 */
    uint64_t seed;                    /* seed of the world's generator, default 1 */
    int joint_projection;             /* passes of positional correction of the joints' anchors after each
                                         step (nonlinear Gauss–Seidel on positions; velocities are not
                                         changed), default 2, [0, 100] */
    int collide_substeps;             /* 1: every substep runs the broadphase and narrowphase and builds
                                         its rows; 0 (default): only the first, and later substeps move
                                         each contact point with its two bodies, update its depth from
                                         their relative motion along the normal and refresh only the
                                         rows' SPOOK terms (see docs/profile.md) */
    ph_joint_solver joint_solver;     /* PGS only: how the joints' bilateral rows are solved in each
                                    sweep (see ph_joint_solver), default PH_JOINT_SOLVER_DIRECT */
    int vector_solver;                /* 1 (default): with PH_METHOD_PGS and PH_ORDER_DEFAULT the contact
                                         rows are solved four contact points at a time (SIMD, lanes
                                         touch disjoint bodies); 0: the scalar loop in the same order.
                                         With contact_block = 0 both give the same numbers, bit for bit;
                                         with contact_block = 1 the same method, equal to rounding (the
                                         vector path works on the points' relative velocities, the scalar
                                         loop on the rows); {0, 1} */
    int contact_block;                /* 1 (default): with PH_METHOD_PGS in the default or gravity order,
                                         each visit of a contact point solves its normal and two friction
                                         rows together: the exact solution of the point's 3 x 3 system
                                         (sticking, pressing) when it lies within the bounds, else one
                                         projected Gauss–Seidel pass over its three rows; 0: the three rows
                                         one after the other (plain PGS). See docs/core.md; {0, 1} */
    int sleep;                        /* islands of bodies at rest go to sleep, default 0 (the server
                                         turns it on for its worlds); {0, 1} */
    double sleep_linear;              /* m/s: a body that stays within sleep_linear x sleep_time of where
                                         its rest began ... default 0.05 */
    double sleep_angular;             /* rad/s: ... and turns by at most sleep_angular x sleep_time ...
                                         default 0.05 */
    double sleep_time;                /* s: ... for this long is at rest (its mean speeds over the window
                                         below the thresholds); an island whose bodies are all at rest
                                         sleeps, default 0.5 (docs/core.md "Islands and sleeping") */

    /* Solver family (docs/solvers.md). For every method, iterations is the
     * budget in units of one PGS sweep over all rows ("work"), and tolerance
     * stops as soon as the Fischer merit psi < tolerance (the absolute
     * criterion (25) of seeds/000). */
    int ordering_per_iteration;    /* 1: random and complementarity orderings are rebuilt before every
                                      iteration instead of once per step; default 0, {0, 1} */
    int k_pgs;                     /* PGS–SM: PGS sweeps per cycle before the subspace steps, default 25,
                                      [1, 10000] */
    int k_sm;                      /* PGS–SM: maximum subspace steps per cycle, default 5, [0, 1000] */
    double cg_tolerance;           /* PGS–SM: conjugate gradients stop when the residual of the reduced
                                      system ||r||_2 < cg_tolerance (m/s, rad/s), or after |A| iterations;
                                      default 1e-12, [0, 1] */
    double sm_gamma;               /* PGS–SM: regularization gamma added to the diagonal of the reduced
                                      matrix A_AA (units of S: 1/kg), default 0, [0, 1e6] */
    ph_gamma_scope sm_gamma_scope; /* PGS–SM: rows that get gamma, default PH_GAMMA_ALL */
    double sm_stagnation;          /* PGS–SM: epsilon_rel of the stagnation criterion (27): the subspace
                                      phase ends when |psi_k+1 - psi_k| < epsilon_rel psi_k; default 1e-3,
                                      [0, 1] */
    int sm_preconditioner;         /* PGS–SM: preconditioner of the conjugate gradients on the reduced
                                      matrix A_AA: 0 = none (plain CG as in seeds/000), 1 = its diagonal
                                      (default), 2 = incomplete Cholesky IC(0) on the pattern of rows
                                      sharing a body, its cost counted in the work (diagonal after a
                                      breakdown); {0, 1, 2} */
    double jacobi_relaxation;      /* Jacobi: 0 = per-row weights 1 / (rows on the busier body of the
                                      row), which always converges on S = J M^-1 J^T + Sigma; > 0: one
                                      weight for all rows; default 0, [0, 2] */
    double sm_forcing;             /* PGS–SM: eta_max of the forcing term of an inexact subspace solve:
                                      CG also stops at ||r|| <= eta ||r_0||, eta = min(sm_forcing,
                                      sqrt(2 psi)) of the iterate the step starts from (inexact Newton);
                                      0 = solve to cg_tolerance as seeds/000; default 0.03, [0, 1] */
    double sm_proximal;            /* PGS–SM: proximal regularization of the subspace solve, relative to
                                      the diagonal: (A_AA + sm_proximal diag(A_AA)) d = -y_A, a damped step
                                      towards the problem's own solution (unlike sm_gamma, which changes
                                      the solution): near-singular directions (identical friction rows)
                                      are not amplified; the steps are inexact by design, so an unchanged
                                      active set does not end the subspace phase. Default 0 (off), [0, 1] */
    /* Compute budget of one step, in row updates: a sweep of a solve over
     * its n rows costs n, a method's other iterations their work in sweeps
     * times n (ph_step_stats.work; docs/core.md "Compute budget"), summed
     * over the substeps. A solve starts a sweep (a PGS–SM subspace step, a
     * CG iteration) only while it fits in what is left; a step whose budget
     * is spent runs its remaining substeps without sweeps (forces, warm
     * start and integration as usual) and reports budget_exhausted. 0 = no
     * budget (default). */
    uint64_t max_step_work;
    ph_simd simd;                /* cap on the vector solver's instruction set (the CPU's widest when it has less),
                                    default PH_SIMD_AVX512; the numbers are the same for every value */
    int contact_relax;           /* PGS (default and gravity orders): after the solve of every substep k with
                                    k % contact_relax == 0, except the last, one relaxation pass over the
                                    contacts: each normal row solved as a rigid row (no SPOOK bias or
                                    regularization: J_n v = 0 when touching, the gap closed within the
                                    substep when apart), the friction impulses clamped to the new cone. It
                                    only takes kinetic energy out; it keeps tall structures from shaking
                                    apart at one sweep per substep (docs/core.md "Contact relaxation").
                                    0 = none; default 5 (substeps 0 and 5 of the default 10), [0, 64] */
    double joint_refactor_angle; /* rad: with joint_solver = DIRECT the joints' block is factored when
                                    the step collides and again only when its bodies may have turned
                                    more than this since (the sum over the substeps of h max |w|); the
                                    substeps between solve their rebuilt joint rows with that factor
                                    (docs/core.md "The direct joint block"). 0 = factor every substep
                                    (exact); default 0.1, [0, 10] */
    int threads;                 /* threads that step this world (the caller's and threads - 1 of the
                                    world's pool, or the host's task runner): the contact solver's
                                    passes, the integration and the batches' build split among them.
                                    The results are bit for bit the same for every value
                                    (docs/core.md "Threads"); default 1, [1, 8] */
    int joint_step_once;         /* 1: a step whose awake bodies have joints and no contact point
                                    after its collision, whose joints are ball, hinge (no limit, no
                                    motor) or fixed, and whose bodies turn at most
                                    joint_refactor_angle over it (time_step max |w|), is one substep
                                    of the whole time_step: one exact solve of the joints' direct
                                    block (one sweep; joint_solver DIRECT, method PGS, order DEFAULT
                                    or GRAVITY, collide_substeps off), then joint_projection SHAKE
                                    iterations of the joints' positions with that block
                                    (docs/core.md "Joint-only steps"). Any other step runs the
                                    substeps. 0 = always the substeps; default 1 */
} ph_settings;

ph_settings ph_default_settings(void);

/* Checks every field against its row of the settings table; returns 0 or
 * PH_ERR_INVALID_ARGUMENT and, when msg is not NULL, points it at a
 * description of the first bad field (valid until the next call in the
 * same thread). */
int ph_settings_validate(const ph_settings *s, const char **msg);

/* ---------------------------------------------------------------- worlds */

typedef struct ph_world_def {
    ph_settings settings;
    int max_bodies; /* default 100000, [1, PH_MAX_BODIES] */
    int max_joints; /* default 100000 */
} ph_world_def;

ph_world_def ph_default_world_def(void);

/* Creates a world; returns a null id (index1 == 0) on failure and, if err is
 * not NULL, stores the reason (PH_ERR_LIMIT when PH_MAX_WORLDS are alive). */
ph_world_id ph_world_create(const ph_world_def *def, int *err);
int ph_world_destroy(ph_world_id w);
int ph_world_is_valid(ph_world_id w);

int ph_world_get_settings(ph_world_id w, ph_settings *out);
/* Validates and installs new settings; they take effect at the next step.
 * A change of any field but record_merits and simd (the rows flagged
 * PH_SETTING_NO_WAKE in the settings table) wakes every sleeping body (its
 * rest timer restarts): a sleeping island is not stepped, so it would not
 * see a new gravity, step or solver until something touched it. */
int ph_world_set_settings(ph_world_id w, const ph_settings *s);

/* Threads (docs/core.md "Threads"). With settings.threads = n > 1 a step
 * runs its parallel passes on n workers: the stepping thread and, by
 * default, n - 1 threads of a small pool the world owns (started by the
 * first such step, stopped by ph_world_destroy or when n goes down). A host
 * that has threads of its own gives a runner instead: run(user, task, ctx,
 * count) must call task(ctx, i) for every i in [0, count), all of them at
 * the same time (each on its own thread; the calling thread may take one,
 * the tasks wait for each other at barriers), and return when all have
 * returned. The results are bit for bit the same for every n and runner. */
typedef void ph_task_fn(void *ctx, int task);
typedef void ph_task_runner(void *user, ph_task_fn *task, void *ctx, int count);

/* Sets (run != NULL) or clears the host's runner of w's parallel passes
 * (the world's own pool is then stopped). */
int ph_world_set_task_runner(ph_world_id w, ph_task_runner *run, void *user);

/* Advances the world by settings.time_step. Returns PH_ERR_NONFINITE when
 * the step left a body outside the envelope, and PH_ERR_CANCELLED when
 * ph_world_cancel_step stopped it; either way the world is restored exactly
 * to its state before the step: poses, velocities, pending forces and
 * torques, sleep state, the joints' warm-start impulses, the random
 * generator, the step count, and the contact manifolds when the step
 * collided once (else they are dropped and the next step collides afresh).
 * The statistics then describe the failed attempt, and its contact events
 * are dropped. */
int ph_world_step(ph_world_id w);

/* Asks the running step of w, or the next one if none runs, to stop at its
 * next substep or sweep boundary and return PH_ERR_CANCELLED. May be called
 * from any thread while another steps w (a C11 atomic flag; not
 * concurrently with ph_world_destroy of w). The request stays until a step
 * has been cancelled by it, and is cleared when the following step starts;
 * several requests before that are one. */
int ph_world_cancel_step(ph_world_id w);

/* The last step that failed with PH_ERR_NONFINITE (out->what =
 * PH_FAULT_NONE and out->step = 0 when none has). */
int ph_world_get_fault(ph_world_id w, ph_fault *out);

/* Number of steps taken since creation. */
uint64_t ph_world_get_step_count(ph_world_id w);
int ph_world_body_count(ph_world_id w);
/* Raises the world's max_bodies and max_joints (ph_world_def) to at least
 * these, at most PH_MAX_BODIES (never lowers them): a host replaying a
 * history accepted under larger limits. PH_OK, PH_ERR_INVALID_HANDLE or
 * PH_ERR_INVALID_ARGUMENT. The limits are part of the world's snapshot. */
int ph_world_raise_limits(ph_world_id w, int max_bodies, int max_joints);
/* Bodies the next step may move (the awake list: kinematic and dynamic
 * bodies not asleep; it may still count bodies destroyed or put to sleep
 * since the last step), or PH_ERR_INVALID_HANDLE. 0: the next step is idle
 * (docs/core.md, "Islands and sleeping"): it collides, solves and moves
 * nothing and costs well under a microsecond, whatever sleeps. */
int ph_world_awake_count(ph_world_id w);
/* An upper bound of the bodies the next step may move: the awake ones plus
 * every sleeping island an awake shape can touch within the step (its box
 * grown by the contact margin and by how far its velocity carries it, as
 * the step's broadphase grows it; every sleeping body with
 * collide_substeps). limit + 1 once the bound passes limit (the count
 * stops there: its cost is a tree query per awake shape at most), or
 * PH_ERR_INVALID_HANDLE, or PH_ERR_INVALID_ARGUMENT for a limit outside
 * [0, INT32_MAX). A host can tell from it, before a step, that the step
 * will be small although the world is large and a body is awake. */
int ph_world_step_reach(ph_world_id w, int limit);
int ph_world_joint_count(ph_world_id w);

/* Fills out with up to cap live body ids in slot order; returns the number
 * written, or a negative error. */
int ph_world_get_bodies(ph_world_id w, ph_body_id *out, int cap);

/* Fills out with up to cap live joint ids in slot order; returns the number
 * written, or a negative error. */
int ph_world_get_joints(ph_world_id w, ph_joint_id *out, int cap);

/* 64-bit FNV-1a hash of every live body's slot, position, orientation and
 * velocities (bit patterns). Equal on equal states. */
uint64_t ph_world_state_hash(ph_world_id w);

/* An id fence: no body, shape or joint id that this world could have
 * handed out in an earlier life (a run whose last changes were lost, e.g.
 * journaled edits that never reached the disk) is handed out again. Free
 * slots and never-used slots move on two generations; live ids and the
 * physics are unchanged. Part of the world's snapshot. 0 or
 * PH_ERR_INVALID_HANDLE. Not while the world steps. */
int ph_world_fence_ids(ph_world_id w);

/* ---------------------------------------------------------------- bodies */

typedef enum ph_body_type {
    PH_BODY_STATIC = 0,
    PH_BODY_KINEMATIC = 1, /* moved by its velocity, unaffected by forces and contacts */
    PH_BODY_DYNAMIC = 2,
} ph_body_type;

typedef struct ph_body_def {
    ph_body_type type;        /* default PH_BODY_DYNAMIC */
    ph_vec3 position;         /* m, default 0, each component within PH_ENVELOPE_POSITION */
    ph_quat orientation;      /* unit quaternion, default identity (normalized on create) */
    ph_vec3 linear_velocity;  /* m/s, default 0, |v| <= PH_ENVELOPE_LINEAR_SPEED */
    ph_vec3 angular_velocity; /* rad/s in world frame, default 0, |w| <= PH_ENVELOPE_ANGULAR_SPEED */
    double linear_damping;    /* 1/s, default 0: v *= 1/(1 + h·c) per step */
    double angular_damping;   /* 1/s, default 0 */
    double gravity_scale;     /* default 1 */
    uint64_t user_data;       /* opaque, default 0 */
} ph_body_def;

ph_body_def ph_default_body_def(void);

ph_body_id ph_body_create(ph_world_id w, const ph_body_def *def, int *err);
/* Destroys the body, its shapes and every joint attached to it. */
int ph_body_destroy(ph_body_id b);
int ph_body_is_valid(ph_body_id b);

/* The state of a body in one call. */
typedef struct ph_body_state {
    ph_body_type type;
    ph_vec3 position;
    ph_quat orientation;
    ph_vec3 linear_velocity;
    ph_vec3 angular_velocity; /* world frame */
    double mass;              /* kg, 0 for static and kinematic */
    ph_vec3 inertia;          /* principal moments about the centre of mass, body frame */
    int shape_count;
    uint64_t user_data;
    double linear_damping;  /* 1/s */
    double angular_damping; /* 1/s */
    double gravity_scale;
} ph_body_state;

int ph_body_get_state(ph_body_id b, ph_body_state *out);
int ph_body_get_transform(ph_body_id b, ph_transform *out);
/* The position must lie within the envelope (PH_ENVELOPE_POSITION). */
int ph_body_set_transform(ph_body_id b, ph_vec3 position, ph_quat orientation);
/* |linear| <= PH_ENVELOPE_LINEAR_SPEED, |angular| <= PH_ENVELOPE_ANGULAR_SPEED. */
int ph_body_set_velocity(ph_body_id b, ph_vec3 linear, ph_vec3 angular);
/* Force (N) and torque (N m) accumulated for the next step only (the sums
 * must stay finite). */
int ph_body_apply_force(ph_body_id b, ph_vec3 force, ph_vec3 world_point);
int ph_body_apply_torque(ph_body_id b, ph_vec3 torque);
/* Impulse (N s) applied immediately to the velocity; rejected (nothing
 * changes) when the new velocities would leave the envelope. */
int ph_body_apply_impulse(ph_body_id b, ph_vec3 impulse, ph_vec3 world_point);
/* Kinematic bodies: velocities that bring the body to the pose in one step
 * (the pose and those velocities must lie within the envelope). */
int ph_body_set_kinematic_target(ph_body_id b, ph_vec3 position, ph_quat orientation);
/* Overrides the mass properties computed from the shapes. mass in
 * [PH_MIN_MASS, PH_MAX_MASS] kg; inertia is the diagonal inertia (kg m^2)
 * in the body frame, each moment 0 (that axis locked) or in
 * [PH_MIN_INERTIA, PH_MAX_INERTIA]; the centre of mass stays at the body
 * origin. */
int ph_body_set_mass(ph_body_id b, double mass, ph_vec3 inertia);
int ph_body_set_damping(ph_body_id b, double linear, double angular);
/* Angular momentum about the centre of mass (kg m^2/s), world frame. */
int ph_body_get_angular_momentum(ph_body_id b, ph_vec3 *out);
/* Stores in *awake 1 when the body is awake, 0 when it sleeps (static
 * bodies: 0); returns 0, PH_ERR_INVALID_HANDLE (then *awake = 0) or
 * PH_ERR_INVALID_ARGUMENT (awake NULL). Any edit of a body (pose,
 * velocity, force, torque, impulse, kinematic target, mass, shapes,
 * joints) wakes it; contact with an awake body wakes its island at the
 * next step. */
int ph_body_is_awake(ph_body_id b, int *awake);
int ph_body_wake(ph_body_id b);

/* ---------------------------------------------------------------- shapes */

typedef enum ph_shape_type {
    PH_SHAPE_SPHERE = 0,
    PH_SHAPE_BOX = 1,
    PH_SHAPE_CAPSULE = 2, /* segment along local z of half-length half_height, plus radius */
    PH_SHAPE_PLANE = 3,   /* static bodies only: points with n·x <= offset are inside */
    PH_SHAPE_TYPE_COUNT
} ph_shape_type;

typedef struct ph_shape_def {
    ph_shape_type type;   /* default sphere */
    double radius;        /* sphere and capsule, m, default 0.5 */
    ph_vec3 half_extents; /* box, m, default (0.5, 0.5, 0.5) */
    double half_height;   /* capsule: half length of the core segment, m, default 0.5 */
    ph_vec3 normal;       /* plane: unit outward normal in body frame, default (0,0,1) */
    double offset;        /* plane: n·x = offset on the surface, default 0 */
    ph_transform local;   /* pose in the body frame, default identity */
    double density;       /* kg/m^3, default 1000 */
    double friction;      /* default 0.5; a pair uses sqrt(mu_a mu_b) */
    double restitution;   /* default 0; a pair uses max(e_a, e_b) */
} ph_shape_def;

ph_shape_def ph_default_shape_def(void);

/* Adds a shape and recomputes the body's mass properties from all its shapes
 * (unless ph_body_set_mass was called). The centre of mass is the body
 * origin: compound shapes should be placed around it. */
ph_shape_id ph_shape_create(ph_body_id b, const ph_shape_def *def, int *err);
int ph_shape_destroy(ph_shape_id s);
int ph_shape_get_def(ph_shape_id s, ph_shape_def *out);
int ph_body_get_shapes(ph_body_id b, ph_shape_id *out, int cap);

/* Mass (kg) and principal inertia (body frame) of a shape of the given
 * density, about the shape's own centre. Plane: 0. */
void ph_shape_mass(const ph_shape_def *def, double *mass, ph_vec3 *inertia);

/* ---------------------------------------------------------------- joints */

typedef enum ph_joint_type {
    PH_JOINT_BALL = 0,     /* anchors coincide (3 rows) */
    PH_JOINT_HINGE = 1,    /* ball + axis alignment (5 rows) + optional limit and motor */
    PH_JOINT_DISTANCE = 2, /* anchors at a fixed distance (1 row) */
    PH_JOINT_FIXED = 3,    /* ball + relative orientation locked (6 rows) */
} ph_joint_type;

typedef struct ph_joint_def {
    ph_joint_type type;      /* default ball */
    ph_body_id body_a;       /* required */
    ph_body_id body_b;       /* null id = the static world frame */
    ph_vec3 anchor_a;        /* body A local frame, m, components within PH_ENVELOPE_POSITION */
    ph_vec3 anchor_b;        /* body B local frame (world frame when body_b is null), likewise */
    ph_vec3 axis_a;          /* hinge: unit axis in A's frame, default (0,0,1) */
    ph_vec3 axis_b;          /* hinge: unit axis in B's frame, default (0,0,1) */
    double distance;         /* distance joint: rest length, m, <= PH_MAX_JOINT_DISTANCE; < 0 means
                                "current" (which must be within that bound too), default -1 */
    int enable_limit;        /* hinge: default 0 */
    double lower_angle;      /* hinge: rad, >= -pi, default -pi/4 */
    double upper_angle;      /* hinge: rad, <= pi, >= lower, default pi/4 */
    int enable_motor;        /* hinge: default 0 */
    double motor_speed;      /* hinge: target relative angular speed, rad/s */
    double max_motor_torque; /* hinge: N m, >= 0 */
    int collide_connected;   /* contacts between the two joined bodies, default 0 (none) */
} ph_joint_def;

ph_joint_def ph_default_joint_def(void);

ph_joint_id ph_joint_create(ph_world_id w, const ph_joint_def *def, int *err);
int ph_joint_destroy(ph_joint_id j);
int ph_joint_is_valid(ph_joint_id j);
/* The definition the joint was created with (distance resolved to its length). */
int ph_joint_get_def(ph_joint_id j, ph_joint_def *out);
/* Hinge: the angle of B relative to A about the axis, rad, in (-pi, pi]. */
int ph_joint_get_hinge_angle(ph_joint_id j, double *angle);
/* Distance between the two anchors in world space, m (ball, hinge, fixed:
 * the error; distance joint: the current length). */
int ph_joint_get_anchor_separation(ph_joint_id j, double *out);

/* ------------------------------------------------------------ statistics */

#define PH_STATS_MAX_ITERS 1024

/* Kinds of recorded iterations (ph_step_stats.phase). */
#define PH_PHASE_SWEEP 0    /* a PGS, blockwise PGS or Jacobi sweep */
#define PH_PHASE_SUBSPACE 1 /* a PGS–SM subspace step */
#define PH_PHASE_DIRECT 2   /* the direct solve */

typedef enum ph_stage {
    PH_STAGE_BROADPHASE = 0,
    PH_STAGE_NARROWPHASE,
    PH_STAGE_ROWS, /* impacts, row build and warm start */
    PH_STAGE_SOLVE,
    PH_STAGE_INTEGRATE,
    PH_STAGE_COUNT
} ph_stage;

/* Statistics of the last step (of its last substep for the solver parts),
 * measured on the actual constraint rows. */
typedef struct ph_step_stats {
    uint64_t step;  /* the world's step count after this step */
    int iterations; /* iterations actually run */
    int rows;       /* constraint rows */
    int contacts;   /* contact points */
    int manifolds;
    int joints;
    int bodies;           /* live bodies */
    int pairs;            /* broadphase pairs */
    int impacts;          /* Newton–Coulomb impacts applied */
    int islands;          /* islands of the last step (when sleeping is on, else 0) */
    int awake_bodies;     /* dynamic bodies stepped (all of them when sleeping is off) */
    int manifolds_reused; /* manifolds rebuilt by the contact cache without colliding
                             (settings.contact_cache_tolerance) */
    int sleeping_bodies;  /* bodies asleep after the step (sleeping on) */
    int sleeping_islands; /* their islands */
    int shapes_updated;   /* shapes whose boxes the broadphase refreshed (the awake bodies'):
                             sleeping and static ones cost nothing */
    /* Merits after each iteration (recorded when settings.record_merits or
     * tolerance > 0; up to PH_STATS_MAX_ITERS entries): */
    int merit_count;
    double fischer[PH_STATS_MAX_ITERS]; /* psi = 1/2 sum phi_FB^2 (see solver docs) */
    double minmap[PH_STATS_MAX_ITERS];  /* || lambda - clamp(lambda - y, lo, hi) ||_2 */
    double fischer_final;
    double minmap_final;
    /* The relative residual of the (M)LCP, ||r||_2 / ||B||_2 (0 when B = 0),
     * with r_i the part of y_i = (S lambda - B)_i that its conditions
     * forbid: y_i for a row strictly inside its bounds, min(y_i, 0) at its
     * lower bound, max(y_i, 0) at its upper bound, 0 when both bounds are 0
     * (docs/solvers.md). Zero at an exact solution; the plain equation
     * residual ||B - S lambda|| / ||B|| where every row is free (joints). */
    double rel_residual;
    /* The scaled Fischer merit psi / merit_scale, dimensionless and
     * comparable across scenes (docs/solvers.md): merit_scale = 1/2 ||B||^2,
     * the merit psi of the impulses' zero when every row is free, so the
     * scaled merit is ||phi||^2 / ||B||^2 (0 when B = 0). Per-iteration
     * values are fischer[k] / merit_scale. */
    double fischer_scaled_final;
    double merit_scale;
    /* The LCP error of the reordering study (seeds/001), as physd defines it
     * (docs/solvers.md): || D (lambda - clamp(lambda - D^-1 y, lo, hi)) ||_2
     * with D = diag(S), in m/s: the velocity change one projected Gauss–Seidel
     * update of every row would make. Per iteration like fischer/minmap. */
    double lcp_error[PH_STATS_MAX_ITERS];
    double lcp_error_final;
    /* Work after each recorded iteration, cumulative, in units of one PGS
     * sweep over all rows (a PGS sweep is 1; a PGS–SM subspace step counts
     * its residual, its CG matrix-vector products |A|/rows each, the
     * merit it needs and, with sm_preconditioner 2, the factorization and
     * applications of the preconditioner; docs/solvers.md). */
    double work[PH_STATS_MAX_ITERS];
    /* What each recorded iteration was: PH_PHASE_* below. */
    unsigned char phase[PH_STATS_MAX_ITERS];
    double work_final;        /* total work of the solve */
    int method;               /* the ph_method that ran (PH_METHOD_PGS after a direct fallback) */
    int subspace_steps;       /* PGS–SM subspace steps taken */
    int cg_iterations;        /* PGS–SM conjugate-gradient iterations, total */
    int sm_precond_fallbacks; /* PGS–SM with sm_preconditioner 2: subspace steps whose incomplete
                                 Cholesky factorization broke down (a non-positive pivot), so CG
                                 ran with the diagonal preconditioner */
    int restarts;             /* NNCG: momentum restarts (the PGS step grew); APGD: adaptive
                                 restarts of the momentum */
    int best_index;           /* PGS–SM, APGD: index of the returned iterate in the per-iteration arrays
                                 when it fell back to an earlier, better one; -1 otherwise */
    int direct_status;        /* direct method: 1 solved exactly, -1 too many rows (PGS ran instead),
                                 -2 no active set satisfied the conditions (PGS ran instead); 0 for
                                 the other methods */
    double max_penetration;   /* m, deepest contact at collision time of the last substep */
    double stage_ms[PH_STAGE_COUNT];
    double total_ms;
    /* The whole step (every substep), in the unit of settings.max_step_work:
     * row updates made (a method's work in sweeps times its rows, summed
     * over the substeps' solves). */
    uint64_t row_updates;
    int budget_exhausted; /* 1: a solve of the step ran fewer iterations than the settings ask
                             because max_step_work was spent */
} ph_step_stats;

int ph_world_get_stats(ph_world_id w, ph_step_stats *out);
/* The last step's row_updates and budget_exhausted alone: cheap (no final
 * merits are measured), for a server that counts budget stops every step. */
int ph_world_get_work(ph_world_id w, uint64_t *row_updates, int *budget_exhausted);

/* The pass profile, a diagnostic (off by default): while it is on, each
 * pass of the step that the threads share (the narrowphase's pieces, the
 * level build's, the solver's level passes by kind, the passes over
 * bodies; the level passes also on one thread) adds up its calls, its
 * time on the stepping thread from its start to its end, and each
 * worker's time inside it, under the name of the pass's function (the
 * level passes' with their kinds, "claim_pass sweep_refresh+relax").
 * What a two-thread step spends where (docs/profile.md); on, it costs two
 * clock reads per pass and worker, off one test of a pointer a pass. */
#define PH_PASS_WORKERS 8
typedef struct ph_pass_time {
    char name[64];
    int64_t calls;
    double wall_ms;                  /* the stepping thread, from the pass's start to its end */
    double busy_ms[PH_PASS_WORKERS]; /* each worker inside the pass (0: the stepping thread) */
} ph_pass_time;
/* on != 0: clears the profile and starts it; 0: stops and drops it.
 * PH_OK, PH_ERR_INVALID_HANDLE or PH_ERR_NO_MEMORY. */
int ph_world_set_pass_profile(ph_world_id w, int on);
/* Copies up to max passes' figures into out (in the order the passes
 * first ran) and returns how many passes the profile holds (more than max:
 * the rest are not copied; 0 when it is off), or PH_ERR_INVALID_HANDLE, or
 * PH_ERR_INVALID_ARGUMENT for max < 0 or out NULL with max > 0. */
int ph_world_get_pass_profile(ph_world_id w, ph_pass_time *out, int max);

/* ------------------------------------------------------------- contacts */

typedef struct ph_contact_info {
    ph_body_id body_a, body_b;
    ph_shape_id shape_a, shape_b;
    ph_vec3 point;  /* world, midway between the surfaces */
    ph_vec3 normal; /* from A to B */
    double depth;   /* m, > 0 penetrating */
    double normal_impulse;
    double tangent_impulse[2];
    uint32_t feature;
} ph_contact_info;

/* Copies up to cap contact points of the last step; returns the total count. */
int ph_world_get_contacts(ph_world_id w, ph_contact_info *out, int cap);

/* Contact begin/end events of the last step. A shape pair "touches" when
 * its manifold has a point deeper than -1 mm (so a resting contact hovering
 * around zero depth does not flicker; speculative points farther apart do
 * not count). begin: touching now and not in the previous step;
 * end: touching in the previous step and not now (or one of the shapes was
 * destroyed, in which case the ids may already be stale). */
typedef struct ph_contact_event {
    int begin; /* 1 begin, 0 end */
    ph_body_id body_a, body_b;
    ph_shape_id shape_a, shape_b;
    ph_vec3 point;         /* begin: deepest point; end: zero */
    ph_vec3 normal;        /* begin: from A to B; end: zero */
    double approach_speed; /* begin: closing speed, m/s (> 0 approaching), measured at the start
                              of the step in which the pair first came within the contact
                              margin (speculative contacts stop bodies just before they touch) */
} ph_contact_event;

/* Copies up to cap events of the last step; returns the total count. */
int ph_world_get_contact_events(ph_world_id w, ph_contact_event *out, int cap);

/* ---------------------------------------------------------------- queries */

typedef struct ph_ray_hit {
    ph_body_id body;
    ph_shape_id shape;
    ph_vec3 point;   /* world */
    ph_vec3 normal;  /* unit surface normal at the hit, facing the ray origin */
    double distance; /* m along the unit direction */
} ph_ray_hit;

/* Closest hit of the ray origin + t dir/|dir|, 0 <= t <= max_distance, over
 * every shape of the world. Returns 0 and stores in *found 1 (hit filled)
 * or 0 (no hit, hit untouched); or returns PH_ERR_INVALID_HANDLE /
 * PH_ERR_INVALID_ARGUMENT (non-finite input, |dir| = 0, max_distance < 0,
 * hit or found NULL) with *found = 0 when found is not NULL. A ray
 * starting inside a shape hits it at distance 0. */
int ph_world_raycast(ph_world_id w, ph_vec3 origin, ph_vec3 dir, double max_distance, ph_ray_hit *hit, int *found);

#ifdef __cplusplus
}
#endif

#endif /* PHYSD_PH_CORE_H */
