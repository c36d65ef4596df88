/*
 * settings.c — the settings table: every field of ph_settings as one row
 * (name, type, default, range, unit, one-line description, offset), and
 * what is derived from it in the core: the defaults, the checks, lookup by
 * name, the comparison that decides whether a change wakes sleeping bodies,
 * and the text of defaults and ranges for help and docs.
 *
 * Normal path: ph_default_settings writes every row's default into a zeroed
 * struct; ph_settings_validate checks the rows in table order, then the
 * cross-field checks (none today: every check is one row's); the server's
 * codec and physctl walk the same rows by name.
 *
 * Failure modes: a value outside its row's range gives
 * PH_ERR_INVALID_ARGUMENT with a message naming the field and the range
 * (formatted into a per-thread buffer, so concurrent validations do not
 * share it).
 *
 * Invariants: pure data and pure functions, no dependency on the rest of
 * the core (tools link this file alone); every field of ph_settings has
 * exactly one row (the size check below and tests/core/test_settings.c).
 * The step never looks a setting up by name: it reads the struct's fields.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "physd/ph_settings.h"

#define F(field) offsetof(ph_settings, field)
#define INF HUGE_VAL

_Static_assert(sizeof(ph_friction_model) == sizeof(int) && sizeof(ph_method) == sizeof(int) &&
                   sizeof(ph_ordering) == sizeof(int) && sizeof(ph_joint_solver) == sizeof(int) &&
                   sizeof(ph_gamma_scope) == sizeof(int) && sizeof(ph_simd) == sizeof(int),
               "enum rows are stored as int");
#if UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(sizeof(ph_settings) == 344, "a new ph_settings field: give it a row in the table below");
#endif

static const ph_setting_part vec3_parts[] = {{"x", 0, 0, ""}, {"y", 0, 0, ""}, {"z", 0, 0, ""}};
static const ph_setting_part spook_parts[] = {
    {"k", PH_MIN_SPOOK_K, PH_MAX_SPOOK_K, "N/m"}, {"d", 0, 1000, ""}, {"hertz", 0, 1e6, "Hz"}};

static const char *const friction_models[] = {"ncp", "scaled_box"};
static const char *const methods[] = {"pgs", "pgs_sm", "block_pgs", "jacobi", "direct", "nncg", "apgd"};
static const char *const orderings[] = {"default", "gravity", "random", "complementarity", "effective_mass"};
static const char *const joint_solvers[] = {"gs", "direct"};
static const char *const gamma_scopes[] = {"all", "friction"};
static const char *const simds[] = {"baseline", "avx2", "avx512"};

#define N(a) (int)(sizeof(a) / sizeof((a)[0]))

/* clang-format off */
/* Row makers: the field, its default, range, flags, unit, description. */
#define ROW(f, t) .name = #f, .type = t, .offset = F(f)
#define DBL(f, d, lo, hi, fl, u, text) {ROW(f, PH_SETTING_DOUBLE), .def = d, .min = lo, .max = hi, .flags = fl, .unit = u, .doc = text}
#define INT(f, d, lo, hi, u, text)     {ROW(f, PH_SETTING_INT), .def = d, .min = lo, .max = hi, .unit = u, .doc = text}
#define BOOL(f, d, fl, text)           {ROW(f, PH_SETTING_BOOL), .def = d, .max = 1, .flags = fl, .unit = "", .doc = text}
#define ENUM(f, d, vals, fl, text)     {ROW(f, PH_SETTING_ENUM), .def = d, .max = N(vals) - 1, .flags = fl, .unit = "", .doc = text, \
                                        .names = vals, .n_values = N(vals)}
#define U64(f, d, u, text)             {ROW(f, PH_SETTING_U64), .def = d, .max = INF, .unit = u, .doc = text}
#define VEC3(f, x, y, z, bound, u, text) {ROW(f, PH_SETTING_VEC3), .def_parts = {x, y, z}, .max = bound, .unit = u, .doc = text, \
                                        .parts = vec3_parts, .n_parts = 3}
#define SPOOK(f, k, d, hz, text)       {ROW(f, PH_SETTING_SPOOK), .def_parts = {k, d, hz}, .unit = "", .doc = text, \
                                        .parts = spook_parts, .n_parts = 3}

static const ph_setting table[] = {
    {ROW(time_step, PH_SETTING_DOUBLE), .def = 1.0 / 60.0, .def_text = "1/60", .min = 0, .max = 1,
     .flags = PH_SETTING_MIN_OPEN, .unit = "s", .doc = "simulated time of one step (h)"},
    INT(substeps, 10, 1, 64, "", "equal substeps per step (solve and integration each; collision: collide_substeps)"),
    INT(iterations, 1, 1, 10000, "", "solver iterations per substep, in PGS sweeps (default 10 x 1 = 10 sweeps per step)"),
    DBL(tolerance, 0, 0, INF, 0, "", "stop early when the Fischer merit psi falls below it; 0 = run every iteration"),
    VEC3(gravity, 0, 0, -9.81, 1e4, "m/s^2", "acceleration of every dynamic body (times its gravity_scale)"),
    SPOOK(contact, 1e8, 5, 110, "SPOOK of contacts: hertz > 0 makes every row a spring of that frequency on its effective mass; 0 uses k; d in substeps"),
    SPOOK(friction, 1e10, 4, 0, "SPOOK regularization of the friction rows (only epsilon is used)"),
    SPOOK(joint, 1e10, 3, 180, "SPOOK of the joints' rows, as contact"),
    ENUM(friction_model, PH_FRICTION_NCP, friction_models, 0, "friction bounds: +-mu lambda_n with the current normal impulse (ncp), or +-mu m g h / n (scaled_box)"),
    ENUM(method, PH_METHOD_PGS, methods, 0, "solver of the rows (docs/solvers.md); direct is exact up to 12 rows, else PGS runs"),
    ENUM(ordering, PH_ORDER_DEFAULT, orderings, 0, "row order of Gauss-Seidel sweeps (default: joints, then contact manifolds bottom-up)"),
    BOOL(warm_start, 1, 0, "reuse last step's impulses matched by feature keys"),
    DBL(warm_start_factor, 1, 0, 1, 0, "", "fraction of the cached impulse applied"),
    DBL(restitution_threshold, 1, 0, INF, 0, "m/s", "approach speed above which restitutive pairs get a Newton-Coulomb impulse"),
    DBL(contact_margin, 0.02, 0, 1, 0, "m", "contacts are generated up to this separation (speculative)"),
    DBL(contact_cache_tolerance, 1e-4, 0, 1, 0, "m", "a pair that moved no point of its smaller shape more than this since its last collision keeps its manifold; 0 = off"),
    BOOL(gyroscopic, 1, 0, "implicit gyroscopic term"),
    BOOL(record_merits, 1, PH_SETTING_NO_WAKE, "compute merits after every iteration (per-iteration statistics)"),
    U64(seed, 1, "", "seed of the world's generator (randomized orderings)"),
    INT(joint_projection, 2, 0, 100, "", "passes of positional correction of the joints' anchors after each step"),
    BOOL(collide_substeps, 0, 0, "collide in every substep; off: once per step, later substeps move the contact points with the bodies"),
    ENUM(joint_solver, PH_JOINT_SOLVER_DIRECT, joint_solvers, 0, "PGS: the joints' bilateral rows as one exactly solved block per sweep (direct) or scalar updates (gs)"),
    BOOL(vector_solver, 1, 0, "PGS in the default order solves contact points four at a time (SIMD); off: the scalar loop"),
    BOOL(contact_block, 1, 0, "PGS (default or gravity order) solves each contact point's normal and friction rows as one 3x3 block"),
    BOOL(sleep, 0, 0, "islands of bodies at rest sleep (the server turns it on for its worlds)"),
    DBL(sleep_linear, 0.05, 0, INF, 0, "m/s", "a body whose mean speed stays below this ..."),
    DBL(sleep_angular, 0.05, 0, INF, 0, "rad/s", "... and whose mean turning rate stays below this ..."),
    DBL(sleep_time, 0.5, 0, 1e6, 0, "s", "... over this long is at rest; an island all at rest sleeps"),
    BOOL(ordering_per_iteration, 0, 0, "rebuild random and complementarity orders before every iteration"),
    INT(k_pgs, 25, 1, 10000, "", "PGS-SM: PGS sweeps per cycle before the subspace steps"),
    INT(k_sm, 5, 0, 1000, "", "PGS-SM: at most this many subspace steps per cycle"),
    DBL(cg_tolerance, 1e-12, 0, 1, 0, "", "PGS-SM: conjugate gradients stop when the reduced residual is below it (m/s, rad/s)"),
    DBL(sm_gamma, 0, 0, 1e6, 0, "1/kg", "PGS-SM: regularization gamma added to the reduced matrix's diagonal"),
    ENUM(sm_gamma_scope, PH_GAMMA_ALL, gamma_scopes, 0, "PGS-SM: rows that get gamma"),
    DBL(sm_stagnation, 1e-3, 0, 1, 0, "", "PGS-SM: epsilon_rel of the stagnation criterion that ends the subspace phase"),
    INT(sm_preconditioner, 1, 0, 2, "", "PGS-SM: CG preconditioner, 0 none, 1 diagonal, 2 incomplete Cholesky IC(0)"),
    DBL(jacobi_relaxation, 0, 0, 2, 0, "", "Jacobi: one weight for all rows; 0 = per-row weights"),
    DBL(sm_forcing, 0.03, 0, 1, 0, "", "PGS-SM: eta_max of the forcing term of inexact subspace solves; 0 = solve to cg_tolerance"),
    DBL(sm_proximal, 0, 0, 1, 0, "", "PGS-SM: proximal term of the subspace solve, relative to the diagonal (the solution unchanged); 0 = off"),
    U64(max_step_work, 0, "row updates", "compute budget of one step (rows x sweeps over the substeps); 0 = none"),
    ENUM(simd, PH_SIMD_AVX512, simds, PH_SETTING_NO_WAKE, "cap on the vector solver's instruction set (same numbers for every value)"),
    INT(contact_relax, 5, 0, 64, "substeps", "PGS: a rigid relaxation pass over the contacts after the solve of every this many substeps (not the last); 0 = none"),
    DBL(joint_refactor_angle, 0.1, 0, 10, 0, "rad", "direct joints: factor again within a step only once the block's bodies may have turned this far; 0 = every substep"),
    {ROW(threads, PH_SETTING_INT), .def = 1, .min = 1, .max = 8, .flags = PH_SETTING_NO_WAKE, .unit = "",
     .doc = "threads that step the world (the caller's and a pool's); the same numbers for every value"},
    BOOL(joint_step_once, 1, 0, "a step with joints and no contact whose bodies turn at most joint_refactor_angle: one exact solve of the direct joint block over the whole step, then joint_projection SHAKE iterations; off: the substeps"),
};
/* clang-format on */

#define NROWS N(table)

int ph_setting_count(void) { return NROWS; }

const ph_setting *ph_setting_at(int i) { return i >= 0 && i < NROWS ? &table[i] : NULL; }

const ph_setting *ph_setting_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < NROWS; i++)
        if (strcmp(table[i].name, name) == 0) return &table[i];
    return NULL;
}

int ph_setting_enum_parse(const ph_setting *r, const char *text, int *value) {
    for (int k = 0; r && text && r->type == PH_SETTING_ENUM && k < r->n_values; k++)
        if (strcmp(r->names[k], text) == 0) {
            *value = k;
            return PH_OK;
        }
    return PH_ERR_INVALID_ARGUMENT;
}

/* -------------------------------------------------------------- defaults */

static void set_default(ph_settings *s, const ph_setting *r) {
    void *p = ph_setting_ptr(s, r);
    switch (r->type) {
    case PH_SETTING_DOUBLE:
        *(double *)p = r->def;
        break;
    case PH_SETTING_INT:
    case PH_SETTING_BOOL:
    case PH_SETTING_ENUM:
        *(int *)p = (int)r->def;
        break;
    case PH_SETTING_U64:
        *(uint64_t *)p = (uint64_t)r->def;
        break;
    case PH_SETTING_VEC3:
    case PH_SETTING_SPOOK:
        for (int k = 0; k < r->n_parts; k++)
            ((double *)p)[k] = r->def_parts[k];
        break;
    }
}

ph_settings ph_default_settings(void) {
    ph_settings s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < NROWS; i++)
        set_default(&s, &table[i]);
    return s;
}

/* ---------------------------------------------------------------- checks */

static _Thread_local char msg_buf[256];

static int bad(const char **msg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(const char **msg, const char *fmt, ...) {
    if (msg) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg_buf, sizeof msg_buf, fmt, ap);
        va_end(ap);
        *msg = msg_buf;
    }
    return PH_ERR_INVALID_ARGUMENT;
}

static int in_range(const ph_setting *r, double v) {
    if (!isfinite(v)) return 0;
    if (r->flags & PH_SETTING_MIN_OPEN ? !(v > r->min) : !(v >= r->min)) return 0;
    return v <= r->max;
}

static const char *unit_sep(const char *unit) { return unit[0] ? " " : ""; }

int ph_setting_check(const ph_settings *s, const ph_setting *r, const char **msg) {
    const void *p = ph_setting_cptr(s, r);
    char range[160];
    switch (r->type) {
    case PH_SETTING_DOUBLE:
    case PH_SETTING_INT: {
        double v = r->type == PH_SETTING_DOUBLE ? *(const double *)p : (double)*(const int *)p;
        if (in_range(r, v)) return PH_OK;
        if (isinf(r->max))
            return bad(msg, "%s must be finite and >= %g%s%s", r->name, r->min, unit_sep(r->unit), r->unit);
        ph_setting_range_text(r, range, sizeof range);
        return bad(msg, "%s must be in %s%s%s", r->name, range, unit_sep(r->unit), r->unit);
    }
    case PH_SETTING_BOOL: {
        int v = *(const int *)p;
        return v == 0 || v == 1 ? PH_OK : bad(msg, "%s must be 0 or 1", r->name);
    }
    case PH_SETTING_ENUM: {
        int v = *(const int *)p;
        if (v >= 0 && v < r->n_values) return PH_OK;
        ph_setting_range_text(r, range, sizeof range);
        return bad(msg, "unknown %s %d (one of %s)", r->name, v, range);
    }
    case PH_SETTING_U64:
        return PH_OK;
    case PH_SETTING_VEC3: {
        const double *v = p;
        if (isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2]) &&
            sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) <= r->max)
            return PH_OK;
        return bad(msg, "%s must be finite, |%s| <= %g%s%s", r->name, r->name, r->max, unit_sep(r->unit), r->unit);
    }
    case PH_SETTING_SPOOK: {
        const double *v = p;
        int ok = 1;
        for (int k = 0; k < r->n_parts; k++)
            ok &= isfinite(v[k]) && v[k] >= r->parts[k].min && v[k] <= r->parts[k].max;
        if (ok) return PH_OK;
        ph_setting_range_text(r, range, sizeof range);
        return bad(msg, "%s must have %s", r->name, range);
    }
    }
    return bad(msg, "%s: unknown row type", r->name);
}

/* Checks that involve more than one row: none today (every check above is
 * one row's). A new one goes here, after the table's. */
static int cross_checks(const ph_settings *s, const char **msg) {
    (void)s;
    (void)msg;
    return PH_OK;
}

int ph_settings_validate(const ph_settings *s, const char **msg) {
    if (!s) return bad(msg, "settings is NULL");
    for (int i = 0; i < NROWS; i++) {
        int e = ph_setting_check(s, &table[i], msg);
        if (e != PH_OK) return e;
    }
    int e = cross_checks(s, msg);
    if (e != PH_OK) return e;
    if (msg) *msg = "ok";
    return PH_OK;
}

/* ------------------------------------------------------------ comparison */

static int row_differs(const ph_settings *a, const ph_settings *b, const ph_setting *r) {
    const void *pa = ph_setting_cptr(a, r), *pb = ph_setting_cptr(b, r);
    switch (r->type) {
    case PH_SETTING_DOUBLE:
        return *(const double *)pa != *(const double *)pb;
    case PH_SETTING_INT:
    case PH_SETTING_BOOL:
    case PH_SETTING_ENUM:
        return *(const int *)pa != *(const int *)pb;
    case PH_SETTING_U64:
        return *(const uint64_t *)pa != *(const uint64_t *)pb;
    case PH_SETTING_VEC3:
    case PH_SETTING_SPOOK:
        for (int k = 0; k < r->n_parts; k++)
            if (((const double *)pa)[k] != ((const double *)pb)[k]) return 1;
        return 0;
    }
    return 1;
}

int ph_settings_motion_differ(const ph_settings *a, const ph_settings *b) {
    for (int i = 0; i < NROWS; i++)
        if (!(table[i].flags & PH_SETTING_NO_WAKE) && row_differs(a, b, &table[i])) return 1;
    return 0;
}

/* ------------------------------------------------------------------ text */

void ph_setting_default_text(const ph_setting *r, char *buf, size_t n) {
    if (!n) return;
    if (r->def_text) {
        snprintf(buf, n, "%s", r->def_text);
        return;
    }
    switch (r->type) {
    case PH_SETTING_BOOL:
        snprintf(buf, n, "%s", r->def ? "true" : "false");
        break;
    case PH_SETTING_ENUM:
        snprintf(buf, n, "%s", r->names[(int)r->def]);
        break;
    case PH_SETTING_VEC3:
        snprintf(buf, n, "(%g, %g, %g)", r->def_parts[0], r->def_parts[1], r->def_parts[2]);
        break;
    case PH_SETTING_SPOOK:
        snprintf(buf, n, "%s %g, %s %g, %s %g", r->parts[0].name, r->def_parts[0], r->parts[1].name, r->def_parts[1],
                 r->parts[2].name, r->def_parts[2]);
        break;
    case PH_SETTING_INT:
    case PH_SETTING_U64:
        snprintf(buf, n, "%.0f", r->def);
        break;
    default: {
        /* %g when it reads back as the same number, else every digit. */
        char t[64];
        snprintf(t, sizeof t, "%g", r->def);
        snprintf(buf, n, strtod(t, NULL) == r->def ? "%g" : "%.17g", r->def);
        break;
    }
    }
}

void ph_setting_range_text(const ph_setting *r, char *buf, size_t n) {
    if (!n) return;
    buf[0] = 0;
    switch (r->type) {
    case PH_SETTING_DOUBLE:
    case PH_SETTING_INT:
        if (isinf(r->max))
            snprintf(buf, n, "%s %g", r->flags & PH_SETTING_MIN_OPEN ? ">" : ">=", r->min);
        else
            snprintf(buf, n, "%c%g, %g]", r->flags & PH_SETTING_MIN_OPEN ? '(' : '[', r->min, r->max);
        break;
    case PH_SETTING_BOOL:
        snprintf(buf, n, "true, false");
        break;
    case PH_SETTING_U64:
        snprintf(buf, n, "[0, 2^64)");
        break;
    case PH_SETTING_ENUM: {
        size_t used = 0;
        for (int k = 0; k < r->n_values && used < n; k++) {
            int w = snprintf(buf + used, n - used, "%s%s", k ? ", " : "", r->names[k]);
            if (w < 0) break;
            used += (size_t)w;
        }
        break;
    }
    case PH_SETTING_VEC3:
        snprintf(buf, n, "finite, |%s| <= %g", r->name, r->max);
        break;
    case PH_SETTING_SPOOK: {
        size_t used = 0;
        for (int k = 0; k < r->n_parts && used < n; k++) {
            const ph_setting_part *q = &r->parts[k];
            int w = snprintf(buf + used, n - used, "%s%s in [%g, %g]%s%s", k ? ", " : "", q->name, q->min, q->max,
                             unit_sep(q->unit), q->unit);
            if (w < 0) break;
            used += (size_t)w;
        }
        break;
    }
    }
}
