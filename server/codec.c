/*
 * codec.c — protocol messages to core types and back; the one place where
 * untrusted values enter the server.
 *
 * Normal path: a decoded protobuf message (already bounded by max_frame) is
 * converted into core structs: ph_settings row by row through the core's
 * settings table (fields matched by name), ph_body_def, ph_shape_def,
 * ph_joint_def and ps_edit field by field. Absent optional fields take the
 * core defaults (or, for settings changes, the current values). Every
 * double is checked to be finite and within the documented range, every
 * enum value against the known values, every count against its limit,
 * mirroring the core's own checks so that a batch that passes here and in
 * the world host's dry run cannot fail halfway through.
 *
 * Failure modes: the first bad field produces INVALID_ARGUMENT (or
 * RESOURCE_EXHAUSTED for counts over a limit) with a message naming the
 * field and, for edit batches, the index of the op; nothing is allocated
 * on failure.
 *
 * Invariants: pure functions of their inputs; no world is read here.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"

/* --------------------------------------------------------------- status */

int ps_fail(ps_status *st, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    st->code = code;
    st->has_index = 0;
    st->index = 0;
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    return code;
}

int ps_fail_at(ps_status *st, int code, uint32_t index, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    st->code = code;
    st->has_index = 1;
    st->index = index;
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    return code;
}

int ps_status_from_core(int err) {
    switch (err) {
    case PH_OK:
        return PS_ST_OK;
    case PH_ERR_INVALID_HANDLE:
        return PS_ST_NOT_FOUND;
    case PH_ERR_INVALID_ARGUMENT:
        return PS_ST_INVALID;
    case PH_ERR_WRONG_KIND:
        return PS_ST_INVALID;
    case PH_ERR_LIMIT:
        return PS_ST_EXHAUSTED;
    default:
        return PS_ST_INTERNAL;
    }
}

const char *ps_status_name(int code) { return pw_status_name(code); }

/* ------------------------------------------------------------ primitives */

static int finite3(ph_vec3 v) { return isfinite(v.x) && isfinite(v.y) && isfinite(v.z); }

int ps_codec_vec3(const Physd__V1__Vec3 *m, ph_vec3 def, double max_abs, ph_vec3 *out) {
    if (!m) {
        *out = def;
        return 0;
    }
    ph_vec3 v = ph_v3(m->x, m->y, m->z);
    if (!finite3(v) || fabs(v.x) > max_abs || fabs(v.y) > max_abs || fabs(v.z) > max_abs) return -1;
    *out = v;
    return 0;
}

int ps_codec_quat(const Physd__V1__Quat *m, ph_quat *out) {
    if (!m) {
        *out = ph_quat_identity();
        return 0;
    }
    if (!isfinite(m->x) || !isfinite(m->y) || !isfinite(m->z) || !isfinite(m->w)) return -1;
    double l = sqrt(m->x * m->x + m->y * m->y + m->z * m->z + m->w * m->w);
    if (!(l >= 1e-9) || !isfinite(l)) return -1;
    out->x = m->x / l, out->y = m->y / l, out->z = m->z / l, out->w = m->w / l;
    return 0;
}

/* The core's envelope (ph_core.h): no edit may put a body outside it. */
#define POS_MAX PH_ENVELOPE_POSITION
#define VEL_MAX PH_ENVELOPE_LINEAR_SPEED
#define ANG_MAX PH_ENVELOPE_ANGULAR_SPEED

/* ------------------------------------------------------------- settings */

/* The Settings message is matched to the core's settings table
 * (ph_settings.h) by field name through protobuf-c's descriptors: a field
 * that is a wrapper (a message whose one field is "value") carries a
 * scalar row, a message of doubles (Vec3, Spook) a composite row part by
 * part. The fields that are the server's rather than the core's are listed
 * here; every other field has a row (tests/server/test_settings_codec.c). */
static const char *const server_fields[] = {"tick_rate"};

int ps_codec_settings_server_field(const char *name) {
    for (size_t i = 0; i < sizeof server_fields / sizeof server_fields[0]; i++)
        if (strcmp(server_fields[i], name) == 0) return 1;
    return 0;
}

const ProtobufCFieldDescriptor *ps_codec_wrapped_value(const ProtobufCFieldDescriptor *f) {
    if (f->type != PROTOBUF_C_TYPE_MESSAGE) return NULL;
    const ProtobufCMessageDescriptor *d = f->descriptor;
    if (d->n_fields != 1 || strcmp(d->fields[0].name, "value") != 0) return NULL;
    return &d->fields[0];
}

/* The protocol type a row's scalar travels as. */
static int wire_type_fits(ph_setting_type t, ProtobufCType w) {
    switch (t) {
    case PH_SETTING_DOUBLE:
        return w == PROTOBUF_C_TYPE_DOUBLE;
    case PH_SETTING_INT:
        return w == PROTOBUF_C_TYPE_INT32;
    case PH_SETTING_BOOL:
        return w == PROTOBUF_C_TYPE_BOOL;
    case PH_SETTING_ENUM:
        return w == PROTOBUF_C_TYPE_ENUM;
    case PH_SETTING_U64:
        return w == PROTOBUF_C_TYPE_UINT64;
    default:
        return 0;
    }
}

int ps_codec_row_fits(const ph_setting *r, const ProtobufCFieldDescriptor *f) {
    const ProtobufCFieldDescriptor *v = ps_codec_wrapped_value(f);
    if (r->type == PH_SETTING_VEC3 || r->type == PH_SETTING_SPOOK) {
        if (v || f->type != PROTOBUF_C_TYPE_MESSAGE) return 0;
        const ProtobufCMessageDescriptor *d = f->descriptor;
        if ((int)d->n_fields != r->n_parts) return 0;
        for (int k = 0; k < r->n_parts; k++) {
            const ProtobufCFieldDescriptor *q = protobuf_c_message_descriptor_get_field_by_name(d, r->parts[k].name);
            if (!q || q->type != PROTOBUF_C_TYPE_DOUBLE || q->label == PROTOBUF_C_LABEL_REPEATED) return 0;
        }
        return 1;
    }
    return v && v->label != PROTOBUF_C_LABEL_REPEATED && wire_type_fits(r->type, v->type);
}

/* One present field into its row of n (a copy of the settings). */
static int decode_row(const ph_setting *r, const ProtobufCFieldDescriptor *f, const ProtobufCMessage *sub,
                      ph_settings *n, ps_status *st) {
    if (!ps_codec_row_fits(r, f))
        return ps_fail(st, PS_ST_INTERNAL, "settings.%s: protocol field does not match the settings table", r->name);
    void *dst = ph_setting_ptr(n, r);
    if (r->type == PH_SETTING_VEC3 || r->type == PH_SETTING_SPOOK) {
        double v[3];
        for (int k = 0; k < r->n_parts; k++) {
            const ProtobufCFieldDescriptor *q =
                protobuf_c_message_descriptor_get_field_by_name(f->descriptor, r->parts[k].name);
            v[k] = *(const double *)((const char *)sub + q->offset);
            if (r->type == PH_SETTING_VEC3 && (!isfinite(v[k]) || fabs(v[k]) > r->max))
                return ps_fail(st, PS_ST_INVALID, "settings.%s must be finite with components in [%g, %g]", r->name,
                               -r->max, r->max);
            if (!isfinite(v[k]))
                return ps_fail(st, PS_ST_INVALID, "settings.%s %s, %s and %s must be finite", r->name, r->parts[0].name,
                               r->parts[1].name, r->parts[2].name);
        }
        memcpy(dst, v, (size_t)r->n_parts * sizeof(double));
        return 0;
    }
    const void *p = (const char *)sub + ps_codec_wrapped_value(f)->offset;
    switch (r->type) {
    case PH_SETTING_DOUBLE: {
        double v = *(const double *)p;
        if (!isfinite(v)) return ps_fail(st, PS_ST_INVALID, "settings.%s must be finite", r->name);
        *(double *)dst = v;
        break;
    }
    case PH_SETTING_INT:
        *(int *)dst = *(const int32_t *)p;
        break;
    case PH_SETTING_BOOL:
        *(int *)dst = *(const protobuf_c_boolean *)p ? 1 : 0;
        break;
    case PH_SETTING_ENUM: {
        /* The protocol's enums use the core's numbering (tested). */
        int v = *(const int *)p;
        if (v < 0 || v >= r->n_values) return ps_fail(st, PS_ST_INVALID, "settings.%s: unknown value %d", r->name, v);
        *(int *)dst = v;
        break;
    }
    case PH_SETTING_U64:
        *(uint64_t *)dst = *(const uint64_t *)p;
        break;
    default:
        break;
    }
    return 0;
}

int ps_codec_settings(const Physd__V1__Settings *m, ph_settings *s, double *tick_rate, const ps_config *cfg,
                      ps_status *st) {
    if (!m) return 0;
    ph_settings n = *s;
    double tr = *tick_rate;
    const ProtobufCMessageDescriptor *d = &physd__v1__settings__descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)((const char *)m + f->offset);
        const ph_setting *r = ph_setting_find(f->name);
        if (!sub || !r) continue;
        if (decode_row(r, f, sub, &n, st)) return st->code;
    }
    /* The server's own rules: max_step_work is bounded by the server's,
     * 0 asks for it; the tick rate lies in the server's range. */
    if (m->max_step_work) {
        uint64_t v = m->max_step_work->value;
        if (v > cfg->max_step_work)
            return ps_fail(st, PS_ST_INVALID,
                           "settings.max_step_work must be at most the server's max_step_work (%llu row updates)",
                           (unsigned long long)cfg->max_step_work);
        n.max_step_work = v ? v : cfg->max_step_work;
    }
    if (m->threads && m->threads->value > cfg->max_world_threads)
        return ps_fail(st, PS_ST_INVALID, "settings.threads must be at most the server's max_world_threads (%d)",
                       cfg->max_world_threads);
    if (m->tick_rate) {
        double v = m->tick_rate->value;
        if (!isfinite(v) || v < cfg->min_tick_rate || v > cfg->max_tick_rate)
            return ps_fail(st, PS_ST_INVALID,
                           "settings.tick_rate must be in [%g, %g] Hz (min_tick_rate, max_tick_rate)",
                           cfg->min_tick_rate, cfg->max_tick_rate);
        tr = v;
    }
    const char *why = NULL;
    if (ph_settings_validate(&n, &why) != PH_OK) return ps_fail(st, PS_ST_INVALID, "settings: %s", why);
    *s = n;
    *tick_rate = tr;
    return 0;
}

/* One row's value into a wrapper or composite message. */
static void encode_row(const ph_setting *r, const ProtobufCFieldDescriptor *f, const ph_settings *s,
                       ProtobufCMessage *sub) {
    const void *src = ph_setting_cptr(s, r);
    if (r->type == PH_SETTING_VEC3 || r->type == PH_SETTING_SPOOK) {
        for (int k = 0; k < r->n_parts; k++) {
            const ProtobufCFieldDescriptor *q =
                protobuf_c_message_descriptor_get_field_by_name(f->descriptor, r->parts[k].name);
            *(double *)((char *)sub + q->offset) = ((const double *)src)[k];
        }
        return;
    }
    void *p = (char *)sub + ps_codec_wrapped_value(f)->offset;
    switch (r->type) {
    case PH_SETTING_DOUBLE:
        *(double *)p = *(const double *)src;
        break;
    case PH_SETTING_INT:
    case PH_SETTING_ENUM:
        *(int32_t *)p = *(const int *)src;
        break;
    case PH_SETTING_BOOL:
        *(protobuf_c_boolean *)p = *(const int *)src != 0;
        break;
    case PH_SETTING_U64:
        *(uint64_t *)p = *(const uint64_t *)src;
        break;
    default:
        break;
    }
}

ps_config ps_config_recovering(const ps_config *cfg) {
    ps_config c = *cfg;
    c.max_step_work = UINT64_MAX;
    const ph_setting *threads = ph_setting_find("threads");
    c.max_world_threads = threads ? (int)threads->max : 64;
    c.min_tick_rate = PS_TICK_RATE_LOWEST;
    c.max_tick_rate = PS_TICK_RATE_HIGHEST;
    if (!cfg->replay_counts_today) c.max_edits_per_batch = PS_MAX_EDITS_PER_BATCH;
    return c;
}

int ps_max_bodies(const ps_server *s) {
    return s->replaying && !s->cfg.replay_counts_today ? PH_MAX_BODIES : s->cfg.max_bodies_per_world;
}

int ps_max_edits(const ps_server *s) {
    return s->replaying && !s->cfg.replay_counts_today ? PS_MAX_EDITS_PER_BATCH : s->cfg.max_edits_per_batch;
}

int ps_tick_rate_fit(const ps_config *cfg, double in, double *out) {
    if (!(in >= PS_TICK_RATE_LOWEST && in <= PS_TICK_RATE_HIGHEST)) return -1;
    *out = in < cfg->min_tick_rate ? cfg->min_tick_rate : in > cfg->max_tick_rate ? cfg->max_tick_rate : in;
    return *out != in;
}

void ps_codec_settings_out(const ph_settings *s, double tick_rate, Physd__V1__Settings *m, void *storage) {
    ps_settings_storage *z = storage;
    physd__v1__settings__init(m);
    const ProtobufCMessageDescriptor *d = &physd__v1__settings__descriptor;
    size_t used = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        const ph_setting *r = ph_setting_find(f->name);
        int tick = !r && strcmp(f->name, "tick_rate") == 0;
        if (r ? !ps_codec_row_fits(r, f) : !tick) continue;
        const ProtobufCMessageDescriptor *sd = f->descriptor;
        size_t size = (sd->sizeof_message + 15) & ~(size_t)15;
        if (used + size > sizeof z->bytes) abort(); /* PS_SETTINGS_STORAGE too small: a programming error */
        ProtobufCMessage *sub = (ProtobufCMessage *)(void *)(z->bytes + used);
        used += size;
        protobuf_c_message_init(sd, sub);
        if (r)
            encode_row(r, f, s, sub);
        else
            *(double *)((char *)sub + ps_codec_wrapped_value(f)->offset) = tick_rate;
        *(ProtobufCMessage **)((char *)m + f->offset) = sub;
    }
}

/* ---------------------------------------------------------------- shapes */

static int decode_shape(const Physd__V1__ShapeDef *m, int body_type, ph_shape_def *d, size_t op, size_t k,
                        ps_status *st) {
    *d = ph_default_shape_def();
#define BAD(...) return ps_fail_at(st, PS_ST_INVALID, (uint32_t)op, __VA_ARGS__)
    switch ((int)m->type) {
    case PHYSD__V1__SHAPE_TYPE__SHAPE_SPHERE:
        d->type = PH_SHAPE_SPHERE;
        break;
    case PHYSD__V1__SHAPE_TYPE__SHAPE_BOX:
        d->type = PH_SHAPE_BOX;
        break;
    case PHYSD__V1__SHAPE_TYPE__SHAPE_CAPSULE:
        d->type = PH_SHAPE_CAPSULE;
        break;
    case PHYSD__V1__SHAPE_TYPE__SHAPE_PLANE:
        d->type = PH_SHAPE_PLANE;
        break;
    default:
        BAD("op %zu: shapes[%zu].type: unknown value %d", op, k, (int)m->type);
    }
    const double lo = 1e-4, hi = 1e4;
    if (m->radius) d->radius = m->radius->value;
    if (m->half_height) d->half_height = m->half_height->value;
    if (ps_codec_vec3(m->half_extents, d->half_extents, hi, &d->half_extents))
        BAD("op %zu: shapes[%zu].half_extents must be finite", op, k);
    if (ps_codec_vec3(m->normal, d->normal, POS_MAX, &d->normal))
        BAD("op %zu: shapes[%zu].normal must be finite", op, k);
    d->offset = m->offset;
    if (m->local) {
        if (ps_codec_vec3(m->local->position, d->local.p, POS_MAX, &d->local.p) ||
            ps_codec_quat(m->local->orientation, &d->local.q))
            BAD("op %zu: shapes[%zu].local must be a finite pose with a non-zero quaternion", op, k);
    }
    if (m->density) d->density = m->density->value;
    if (m->friction) d->friction = m->friction->value;
    d->restitution = m->restitution;
    /* From a thin gas to past osmium; a density near 0 gives a mass near 0
     * and an inverse mass no solver survives. */
    if (!(d->density >= 1e-3 && d->density <= 1e7))
        BAD("op %zu: shapes[%zu].density must be in [1e-3, 1e7] kg/m^3", op, k);
    if (!isfinite(d->friction) || d->friction < 0 || d->friction > 100)
        BAD("op %zu: shapes[%zu].friction must be in [0, 100]", op, k);
    if (!isfinite(d->restitution) || d->restitution < 0 || d->restitution > 1)
        BAD("op %zu: shapes[%zu].restitution must be in [0, 1]", op, k);
    switch (d->type) {
    case PH_SHAPE_SPHERE:
        if (!isfinite(d->radius) || d->radius < lo || d->radius > hi)
            BAD("op %zu: shapes[%zu].radius must be in [1e-4, 1e4] m", op, k);
        break;
    case PH_SHAPE_BOX:
        if (d->half_extents.x < lo || d->half_extents.y < lo || d->half_extents.z < lo)
            BAD("op %zu: shapes[%zu].half_extents must each be in [1e-4, 1e4] m", op, k);
        break;
    case PH_SHAPE_CAPSULE:
        if (!isfinite(d->radius) || d->radius < lo || d->radius > hi)
            BAD("op %zu: shapes[%zu].radius must be in [1e-4, 1e4] m", op, k);
        if (!isfinite(d->half_height) || d->half_height < 0 || d->half_height > hi)
            BAD("op %zu: shapes[%zu].half_height must be in [0, 1e4] m", op, k);
        break;
    case PH_SHAPE_PLANE:
        if (body_type != PH_BODY_STATIC) BAD("op %zu: shapes[%zu]: a plane needs a static body", op, k);
        if (fabs(ph_len(d->normal) - 1.0) >= 1e-6) BAD("op %zu: shapes[%zu].normal must be a unit vector", op, k);
        if (!isfinite(d->offset) || fabs(d->offset) >= 1e12) BAD("op %zu: shapes[%zu].offset must be finite", op, k);
        break;
    default:
        break;
    }
#undef BAD
    return 0;
}

void ps_codec_shape_out(const ph_shape_def *d, Physd__V1__ShapeDef *m, void *storage) {
    ps_shape_storage *z = storage;
    physd__v1__shape_def__init(m);
    for (int k = 0; k < 5; k++)
        physd__v1__double_value__init(&z->d[k]);
    for (int k = 0; k < 3; k++)
        physd__v1__vec3__init(&z->v[k]);
    physd__v1__quat__init(&z->q);
    physd__v1__pose__init(&z->pose);
    m->type = (Physd__V1__ShapeType)d->type; /* same numbering */
    z->d[0].value = d->radius, m->radius = &z->d[0];
    z->d[1].value = d->half_height, m->half_height = &z->d[1];
    z->d[2].value = d->density, m->density = &z->d[2];
    z->d[3].value = d->friction, m->friction = &z->d[3];
    m->restitution = d->restitution;
    m->offset = d->offset;
    z->v[0].x = d->half_extents.x, z->v[0].y = d->half_extents.y, z->v[0].z = d->half_extents.z;
    m->half_extents = &z->v[0];
    z->v[1].x = d->normal.x, z->v[1].y = d->normal.y, z->v[1].z = d->normal.z;
    m->normal = &z->v[1];
    z->v[2].x = d->local.p.x, z->v[2].y = d->local.p.y, z->v[2].z = d->local.p.z;
    z->q.x = d->local.q.x, z->q.y = d->local.q.y, z->q.z = d->local.q.z, z->q.w = d->local.q.w;
    z->pose.position = &z->v[2];
    z->pose.orientation = &z->q;
    m->local = &z->pose;
}

/* ---------------------------------------------------------------- edits */

static int decode_ref(const Physd__V1__BodyRef *m, const ps_edit *ops, size_t i, const char *what, ps_body_ref *r,
                      ps_status *st) {
    r->new_op = -1;
    r->id = 0;
    r->present = 0;
    if (!m || m->ref_case == PHYSD__V1__BODY_REF__REF__NOT_SET)
        return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, "op %zu: %s is required", i, what);
    r->present = 1;
    if (m->ref_case == PHYSD__V1__BODY_REF__REF_ID) {
        r->id = m->id;
        return 0;
    }
    if (m->new_body_op >= i || ops[m->new_body_op].kind != PS_EDIT_ADD_BODY)
        return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                          "op %zu: %s.new_body_op = %u does not name an earlier add_body op", i, what, m->new_body_op);
    r->new_op = (int)m->new_body_op;
    return 0;
}

static int moment_ok(double v) { return v == 0 || (v >= PH_MIN_INERTIA && v <= PH_MAX_INERTIA); }

static int decode_body(const Physd__V1__BodyDef *m, ps_edit *e, size_t i, ps_status *st) {
#define BAD(...) return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, __VA_ARGS__)
    if (!m) BAD("op %zu: add_body.body is required", i);
    ph_body_def *d = &e->bdef;
    *d = ph_default_body_def();
    switch ((int)m->type) {
    case PHYSD__V1__BODY_TYPE__BODY_DYNAMIC:
        d->type = PH_BODY_DYNAMIC;
        break;
    case PHYSD__V1__BODY_TYPE__BODY_STATIC:
        d->type = PH_BODY_STATIC;
        break;
    case PHYSD__V1__BODY_TYPE__BODY_KINEMATIC:
        d->type = PH_BODY_KINEMATIC;
        break;
    default:
        BAD("op %zu: body.type: unknown value %d", i, (int)m->type);
    }
    if (m->pose && (ps_codec_vec3(m->pose->position, d->position, POS_MAX, &d->position) ||
                    ps_codec_quat(m->pose->orientation, &d->orientation)))
        BAD("op %zu: body.pose must be finite (|x| <= %g m) with a non-zero quaternion", i, POS_MAX);
    if (ps_codec_vec3(m->linear_velocity, d->linear_velocity, VEL_MAX, &d->linear_velocity) ||
        ps_codec_vec3(m->angular_velocity, d->angular_velocity, ANG_MAX, &d->angular_velocity) ||
        ph_len(d->linear_velocity) > VEL_MAX || ph_len(d->angular_velocity) > ANG_MAX)
        BAD("op %zu: body velocities must be finite, |v| <= %g m/s and |w| <= %g rad/s", i, VEL_MAX, ANG_MAX);
    d->linear_damping = m->linear_damping;
    d->angular_damping = m->angular_damping;
    if (!isfinite(d->linear_damping) || !isfinite(d->angular_damping) || d->linear_damping < 0 ||
        d->angular_damping < 0)
        BAD("op %zu: body damping must be finite and >= 0", i);
    if (m->gravity_scale) {
        if (!isfinite(m->gravity_scale->value) || fabs(m->gravity_scale->value) > 1e6)
            BAD("op %zu: body.gravity_scale must be finite, |s| <= 1e6", i);
        d->gravity_scale = m->gravity_scale->value;
    }
    d->user_data = m->user_data;
    if (m->n_shapes > PH_MAX_SHAPES_PER_BODY)
        return ps_fail_at(st, PS_ST_EXHAUSTED, (uint32_t)i, "op %zu: %zu shapes, at most %d per body", i, m->n_shapes,
                          PH_MAX_SHAPES_PER_BODY);
    if (m->n_shapes > 0) {
        e->shapes = calloc(m->n_shapes, sizeof *e->shapes);
        if (!e->shapes) return ps_fail(st, PS_ST_INTERNAL, "out of memory");
        for (size_t k = 0; k < m->n_shapes; k++)
            if (decode_shape(m->shapes[k], d->type, &e->shapes[k], i, k, st)) return st->code;
        e->nshapes = (int)m->n_shapes;
    }
    if (m->mass) {
        if (d->type != PH_BODY_DYNAMIC) BAD("op %zu: body.mass is only for dynamic bodies", i);
        e->has_mass = 1;
        e->mass = m->mass->mass;
        if (!(e->mass >= PH_MIN_MASS && e->mass <= PH_MAX_MASS))
            BAD("op %zu: body.mass.mass must be in [%g, %g] kg", i, PH_MIN_MASS, PH_MAX_MASS);
        if (ps_codec_vec3(m->mass->inertia, ph_v3(0, 0, 0), PH_MAX_INERTIA, &e->inertia) || !moment_ok(e->inertia.x) ||
            !moment_ok(e->inertia.y) || !moment_ok(e->inertia.z))
            BAD("op %zu: body.mass.inertia: each moment 0 (axis locked) or in [%g, %g] kg m^2", i, PH_MIN_INERTIA,
                PH_MAX_INERTIA);
    }
#undef BAD
    return 0;
}

static int decode_joint(const Physd__V1__JointDef *m, const ps_edit *ops, ps_edit *e, size_t i, ps_status *st) {
#define BAD(...) return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, __VA_ARGS__)
    if (!m) BAD("op %zu: add_joint.joint is required", i);
    ph_joint_def *d = &e->jdef;
    *d = ph_default_joint_def();
    switch ((int)m->type) {
    case PHYSD__V1__JOINT_TYPE__JOINT_BALL:
        d->type = PH_JOINT_BALL;
        break;
    case PHYSD__V1__JOINT_TYPE__JOINT_HINGE:
        d->type = PH_JOINT_HINGE;
        break;
    case PHYSD__V1__JOINT_TYPE__JOINT_DISTANCE:
        d->type = PH_JOINT_DISTANCE;
        break;
    case PHYSD__V1__JOINT_TYPE__JOINT_FIXED:
        d->type = PH_JOINT_FIXED;
        break;
    default:
        BAD("op %zu: joint.type: unknown value %d", i, (int)m->type);
    }
    if (decode_ref(m->body_a, ops, i, "joint.body_a", &e->ja, st)) return st->code;
    e->jb.new_op = -1;
    e->jb.present = 0;
    if (m->body_b && decode_ref(m->body_b, ops, i, "joint.body_b", &e->jb, st)) return st->code;
    if (ps_codec_vec3(m->anchor_a, d->anchor_a, POS_MAX, &d->anchor_a) ||
        ps_codec_vec3(m->anchor_b, d->anchor_b, POS_MAX, &d->anchor_b) ||
        ps_codec_vec3(m->axis_a, d->axis_a, POS_MAX, &d->axis_a) ||
        ps_codec_vec3(m->axis_b, d->axis_b, POS_MAX, &d->axis_b))
        BAD("op %zu: joint anchors and axes must be finite", i);
    if (m->distance) d->distance = m->distance->value;
    if (m->lower_angle) d->lower_angle = m->lower_angle->value;
    if (m->upper_angle) d->upper_angle = m->upper_angle->value;
    d->enable_limit = m->enable_limit;
    d->enable_motor = m->enable_motor;
    d->motor_speed = m->motor_speed;
    d->max_motor_torque = m->max_motor_torque;
    if (!isfinite(d->distance) || !isfinite(d->lower_angle) || !isfinite(d->upper_angle) || !isfinite(d->motor_speed) ||
        !isfinite(d->max_motor_torque) || d->max_motor_torque < 0)
        BAD("op %zu: joint values must be finite and max_motor_torque >= 0", i);
    if (d->distance > PH_MAX_JOINT_DISTANCE)
        BAD("op %zu: joint.distance must be at most %g m (or absent / < 0 for the current distance)", i,
            PH_MAX_JOINT_DISTANCE);
    if (d->type == PH_JOINT_HINGE && (ph_len(d->axis_a) < 1e-9 || ph_len(d->axis_b) < 1e-9))
        BAD("op %zu: hinge axes must be non-zero", i);
    if (d->type == PH_JOINT_HINGE &&
        (d->lower_angle < -PH_PI || d->upper_angle > PH_PI || d->lower_angle > d->upper_angle))
        BAD("op %zu: hinge limits must satisfy -pi <= lower <= upper <= pi", i);
#undef BAD
    return 0;
}

static int decode_pose_req(const Physd__V1__Pose *p, ps_edit *e, size_t i, const char *what, ps_status *st) {
    if (!p) return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, "op %zu: %s.pose is required", i, what);
    if (ps_codec_vec3(p->position, ph_v3(0, 0, 0), POS_MAX, &e->v1) || ps_codec_quat(p->orientation, &e->q))
        return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                          "op %zu: %s.pose must be finite (|x| <= %g m) with a non-zero quaternion", i, what, POS_MAX);
    return 0;
}

static int decode_vec_req(const Physd__V1__Vec3 *v, ph_vec3 *out, size_t i, const char *what, ps_status *st) {
    if (!v) return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, "op %zu: %s is required", i, what);
    if (ps_codec_vec3(v, ph_v3(0, 0, 0), 1e15, out))
        return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i, "op %zu: %s must be finite (|x| <= 1e15)", i, what);
    return 0;
}

static int decode_op(const Physd__V1__EditOp *m, ps_edit *ops, size_t i, ps_status *st) {
    ps_edit *e = &ops[i];
    memset(e, 0, sizeof *e);
    e->body.new_op = e->ja.new_op = e->jb.new_op = -1;
    switch (m->op_case) {
    case PHYSD__V1__EDIT_OP__OP_ADD_BODY:
        e->kind = PS_EDIT_ADD_BODY;
        return decode_body(m->add_body->body, e, i, st);
    case PHYSD__V1__EDIT_OP__OP_REMOVE_BODY:
        e->kind = PS_EDIT_REMOVE_BODY;
        return decode_ref(m->remove_body->body, ops, i, "remove_body.body", &e->body, st);
    case PHYSD__V1__EDIT_OP__OP_SET_POSE:
        e->kind = PS_EDIT_SET_POSE;
        if (decode_ref(m->set_pose->body, ops, i, "set_pose.body", &e->body, st)) return st->code;
        return decode_pose_req(m->set_pose->pose, e, i, "set_pose", st);
    case PHYSD__V1__EDIT_OP__OP_SET_VELOCITY:
        e->kind = PS_EDIT_SET_VELOCITY;
        if (decode_ref(m->set_velocity->body, ops, i, "set_velocity.body", &e->body, st)) return st->code;
        if (ps_codec_vec3(m->set_velocity->linear, ph_v3(0, 0, 0), VEL_MAX, &e->v1) ||
            ps_codec_vec3(m->set_velocity->angular, ph_v3(0, 0, 0), ANG_MAX, &e->v2) || ph_len(e->v1) > VEL_MAX ||
            ph_len(e->v2) > ANG_MAX)
            return ps_fail_at(st, PS_ST_INVALID, (uint32_t)i,
                              "op %zu: set_velocity: finite, |v| <= %g m/s, |w| <= %g rad/s", i, VEL_MAX, ANG_MAX);
        return 0;
    case PHYSD__V1__EDIT_OP__OP_APPLY_FORCE:
        e->kind = PS_EDIT_APPLY_FORCE;
        if (decode_ref(m->apply_force->body, ops, i, "apply_force.body", &e->body, st)) return st->code;
        if (decode_vec_req(m->apply_force->force, &e->v1, i, "apply_force.force", st)) return st->code;
        e->has_point = m->apply_force->point != NULL;
        if (e->has_point && decode_vec_req(m->apply_force->point, &e->v2, i, "apply_force.point", st)) return st->code;
        return 0;
    case PHYSD__V1__EDIT_OP__OP_APPLY_TORQUE:
        e->kind = PS_EDIT_APPLY_TORQUE;
        if (decode_ref(m->apply_torque->body, ops, i, "apply_torque.body", &e->body, st)) return st->code;
        return decode_vec_req(m->apply_torque->torque, &e->v1, i, "apply_torque.torque", st);
    case PHYSD__V1__EDIT_OP__OP_APPLY_IMPULSE:
        e->kind = PS_EDIT_APPLY_IMPULSE;
        if (decode_ref(m->apply_impulse->body, ops, i, "apply_impulse.body", &e->body, st)) return st->code;
        if (decode_vec_req(m->apply_impulse->impulse, &e->v1, i, "apply_impulse.impulse", st)) return st->code;
        e->has_point = m->apply_impulse->point != NULL;
        if (e->has_point && decode_vec_req(m->apply_impulse->point, &e->v2, i, "apply_impulse.point", st))
            return st->code;
        return 0;
    case PHYSD__V1__EDIT_OP__OP_SET_KINEMATIC_TARGET:
        e->kind = PS_EDIT_SET_KINEMATIC_TARGET;
        if (decode_ref(m->set_kinematic_target->body, ops, i, "set_kinematic_target.body", &e->body, st))
            return st->code;
        return decode_pose_req(m->set_kinematic_target->pose, e, i, "set_kinematic_target", st);
    case PHYSD__V1__EDIT_OP__OP_ADD_JOINT:
        e->kind = PS_EDIT_ADD_JOINT;
        return decode_joint(m->add_joint->joint, ops, e, i, st);
    case PHYSD__V1__EDIT_OP__OP_REMOVE_JOINT:
        e->kind = PS_EDIT_REMOVE_JOINT;
        e->joint = m->remove_joint->joint;
        return 0;
    default:
        return ps_fail_at(st, PS_ST_UNIMPLEMENTED, (uint32_t)i, "op %zu: empty or unknown edit op", i);
    }
}

void ps_edit_batch_free(void *p) {
    ps_edit_batch *b = p;
    if (!b) return;
    for (size_t i = 0; i < b->n; i++)
        free(b->ops[i].shapes);
    free(b->ops);
    free(b);
}

int ps_codec_edit_batch(const Physd__V1__EditBatch *m, int max_ops, ps_edit_batch **out, ps_status *st) {
    return ps_codec_edit_ops(m->ops, m->n_ops, max_ops, out, st);
}

int ps_codec_edit_ops(Physd__V1__EditOp *const *ops, size_t n_ops, int max_ops, ps_edit_batch **out, ps_status *st) {
    if (n_ops > (size_t)max_ops)
        return ps_fail(st, PS_ST_EXHAUSTED, "%zu ops in one batch, at most %d (max_edits_per_batch)", n_ops, max_ops);
    ps_edit_batch *b = calloc(1, sizeof *b);
    if (!b) return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    b->ops = calloc(n_ops ? n_ops : 1, sizeof *b->ops);
    if (!b->ops) {
        free(b);
        return ps_fail(st, PS_ST_INTERNAL, "out of memory");
    }
    for (size_t i = 0; i < n_ops; i++) {
        b->n = i + 1; /* so a failure frees what this op allocated */
        if (decode_op(ops[i], b->ops, i, st)) {
            ps_edit_batch_free(b);
            return st->code;
        }
    }
    b->n = n_ops;
    *out = b;
    return 0;
}

ph_settings ps_default_world_settings(const ps_config *cfg) {
    ph_settings s = ph_default_settings();
    s.sleep = 1;                          /* a server keeps many worlds: resting islands cost nothing */
    s.max_step_work = cfg->max_step_work; /* no step holds a worker without bound */
    s.simd = (ph_simd)cfg->simd;          /* --simd / PHYSD_SIMD */
    return s;
}
