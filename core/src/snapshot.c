/*
 * snapshot.c — exact snapshots of a world and their restore (ph_snapshot.h,
 * the format in docs/durability.md).
 *
 * Normal path: ph_world_snapshot sums the sizes of the records (each
 * kind's size measured by writing a stand-in), allocates one buffer of
 * exactly that length and writes into it, once: a fixed header, the sections (settings by the settings table's rows,
 * the world's counters, the three slot pools with every slot, the broadphase's persistent state, the last step's
 * manifolds), then an XXH64 checksum of everything before it. Every field is written on its own, little-endian, doubles
 * as their bit patterns. ph_world_restore checks the header, the length and the checksum, then reads the sections into
 * a world record that is not yet in the registry, checks every cross-reference (lists, free lists, indices, counts) and
 * only then registers it.
 *
 * Failure modes: a bad snapshot gives one of the PH_ERR_*SNAPSHOT* codes
 * (ph_core.h) and a failed allocation PH_ERR_NO_MEMORY; either way the
 * record and everything it owns is freed and no world is created. Nothing
 * is allocated before the count that sizes it has been bounded by the
 * bytes that remain.
 *
 * Invariants: what is written is exactly what is read back, field by field
 * (the writer and the reader below are kept side by side); unused parts of
 * records (dead slots, manifold points past the count, a manifold's cache
 * reference when it has none) are not written and are zero after a
 * restore, so a restored world's snapshot equals the original's byte for
 * byte.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "body.h"
#include "contact.h"
#include "island.h"
#include "physd/ph_settings.h"
#include "physd/ph_snapshot.h"
#include "pool.h"
#include "world.h"

_Static_assert(sizeof(double) == 8 && sizeof(uint64_t) == 8, "doubles are IEEE-754 binary64");

#define MAGIC "PHSNAP"
#define HEADER_BYTES 64
#define SECTION_BYTES 16 /* tag, reserved, length */
#define TRAILER_BYTES 8  /* the checksum */
#define BYTE_ORDER_MARK 0x01020304u
#define DOUBLE_MARK (-2.5) /* bits 0xc004000000000000 */

#define TAG(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
/* The required sections, in this order. A section whose tag starts with a
 * lower-case letter is optional: a reader that does not know it skips it. */
static const uint32_t section_tags[] = {TAG('S', 'E', 'T', 'T'), TAG('W', 'R', 'L', 'D'), TAG('B', 'O', 'D', 'Y'),
                                        TAG('S', 'H', 'A', 'P'), TAG('J', 'O', 'I', 'N'), TAG('B', 'R', 'P', 'H'),
                                        TAG('M', 'A', 'N', 'I')};
#define N_SECTIONS ((int)(sizeof section_tags / sizeof section_tags[0]))

/* ------------------------------------------------------------ checksum */

/* XXH64 (Yann Collet's xxHash, 64-bit variant, seed 0), written here from
 * its specification: detects accidental damage, authenticates nothing. */
#define XP1 11400714785074694791ull
#define XP2 14029467366897019727ull
#define XP3 1609587929392839161ull
#define XP4 9650029242287828579ull
#define XP5 2870177450012600261ull

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t ld64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static inline uint32_t ld32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t xround(uint64_t acc, uint64_t in) { return rotl64(acc + in * XP2, 31) * XP1; }

static inline uint64_t xmerge(uint64_t h, uint64_t v) { return (h ^ xround(0, v)) * XP1 + XP4; }

uint64_t ph__xxh64(const void *data, size_t len) {
    const uint8_t *p = data, *end = p + len;
    uint64_t h;
    if (len >= 32) {
        uint64_t v1 = XP1 + XP2, v2 = XP2, v3 = 0, v4 = 0 - XP1;
        const uint8_t *limit = end - 32;
        do {
            v1 = xround(v1, ld64(p));
            v2 = xround(v2, ld64(p + 8));
            v3 = xround(v3, ld64(p + 16));
            v4 = xround(v4, ld64(p + 24));
            p += 32;
        } while (p <= limit);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = xmerge(h, v1);
        h = xmerge(h, v2);
        h = xmerge(h, v3);
        h = xmerge(h, v4);
    } else {
        h = XP5;
    }
    h += (uint64_t)len;
    while (end - p >= 8) {
        h ^= xround(0, ld64(p));
        h = rotl64(h, 27) * XP1 + XP4;
        p += 8;
    }
    if (end - p >= 4) {
        h ^= (uint64_t)ld32(p) * XP1;
        h = rotl64(h, 23) * XP2 + XP3;
        p += 4;
    }
    while (p < end) {
        h ^= (uint64_t)(*p) * XP5;
        h = rotl64(h, 11) * XP1;
        p++;
    }
    h ^= h >> 33;
    h *= XP2;
    h ^= h >> 29;
    h *= XP3;
    h ^= h >> 32;
    return h;
}

/* -------------------------------------------------------------- writer */

/* Writes at p + n; the caller has sized p exactly (snapshot_size). */
typedef struct wr {
    uint8_t *p;
    size_t n;
} wr;

static inline void put_u8(wr *o, uint8_t v) { o->p[o->n++] = v; }
static inline void put_u16(wr *o, uint16_t v) {
    o->p[o->n] = (uint8_t)v;
    o->p[o->n + 1] = (uint8_t)(v >> 8);
    o->n += 2;
}
static inline void put_u32(wr *o, uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(o->p + o->n, &v, 4);
#else
    for (int i = 0; i < 4; i++)
        o->p[o->n + (size_t)i] = (uint8_t)(v >> (8 * i));
#endif
    o->n += 4;
}
static inline void put_u64(wr *o, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(o->p + o->n, &v, 8);
#else
    for (int i = 0; i < 8; i++)
        o->p[o->n + (size_t)i] = (uint8_t)(v >> (8 * i));
#endif
    o->n += 8;
}
static inline void put_i32(wr *o, int32_t v) { put_u32(o, (uint32_t)v); }
static inline void put_f64(wr *o, double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    put_u64(o, u);
}
static inline void put_v3(wr *o, ph_vec3 v) {
    put_f64(o, v.x);
    put_f64(o, v.y);
    put_f64(o, v.z);
}
static inline void put_q(wr *o, ph_quat q) {
    put_f64(o, q.x);
    put_f64(o, q.y);
    put_f64(o, q.z);
    put_f64(o, q.w);
}

/* -------------------------------------------------------------- reader */

/* A reader over [n, end) of p; bad is sticky: every read after an overrun
 * or a failed check gives zeros, and the caller checks bad before it
 * allocates or trusts anything. */
typedef struct rd {
    const uint8_t *p;
    size_t n, end;
    int bad;
} rd;

static inline int need(rd *r, size_t k) {
    if (r->bad || r->end - r->n < k) {
        r->bad = 1;
        return 0;
    }
    return 1;
}
static inline uint8_t get_u8(rd *r) { return need(r, 1) ? r->p[r->n++] : 0; }
static inline uint16_t get_u16(rd *r) {
    if (!need(r, 2)) return 0;
    uint16_t v = (uint16_t)(r->p[r->n] | r->p[r->n + 1] << 8);
    r->n += 2;
    return v;
}
static inline uint32_t get_u32(rd *r) {
    if (!need(r, 4)) return 0;
    uint32_t v = ld32(r->p + r->n);
    r->n += 4;
    return v;
}
static inline uint64_t get_u64(rd *r) {
    if (!need(r, 8)) return 0;
    uint64_t v = ld64(r->p + r->n);
    r->n += 8;
    return v;
}
static inline int32_t get_i32(rd *r) { return (int32_t)get_u32(r); }
static inline double get_f64(rd *r) {
    uint64_t u = get_u64(r);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}
/* A finite double (anything else marks the reader bad). */
static inline double get_fin(rd *r) {
    double d = get_f64(r);
    if (!isfinite(d)) r->bad = 1;
    return d;
}
static inline ph_vec3 get_v3(rd *r) {
    ph_vec3 v;
    v.x = get_fin(r);
    v.y = get_fin(r);
    v.z = get_fin(r);
    return v;
}
static inline ph_quat get_q(rd *r) {
    ph_quat q;
    q.x = get_fin(r);
    q.y = get_fin(r);
    q.z = get_fin(r);
    q.w = get_fin(r);
    return q;
}
/* A flag: 0 or 1. */
static inline uint8_t get_flag(rd *r) {
    uint8_t v = get_u8(r);
    if (v > 1) r->bad = 1;
    return v;
}
static inline void check(rd *r, int ok) {
    if (!ok) r->bad = 1;
}

/* ------------------------------------------------------------ sections */

/* Settings: every row of the settings table by name, so a setting added
 * later is a row an older snapshot lacks (it takes its default), not a new
 * format. */
static void put_settings(wr *o, const ph_settings *s) {
    const int n = ph_setting_count();
    put_u32(o, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        const ph_setting *r = ph_setting_at(i);
        const size_t len = strlen(r->name);
        put_u8(o, (uint8_t)len);
        for (size_t k = 0; k < len; k++)
            put_u8(o, (uint8_t)r->name[k]);
        put_u8(o, (uint8_t)r->type);
        const void *f = ph_setting_cptr(s, r);
        switch (r->type) {
        case PH_SETTING_DOUBLE:
            put_f64(o, *(const double *)f);
            break;
        case PH_SETTING_INT:
        case PH_SETTING_BOOL:
        case PH_SETTING_ENUM:
            put_i32(o, *(const int *)f);
            break;
        case PH_SETTING_U64:
            put_u64(o, *(const uint64_t *)f);
            break;
        case PH_SETTING_VEC3:
        case PH_SETTING_SPOOK:
            for (int k = 0; k < 3; k++)
                put_f64(o, ((const double *)f)[k]);
            break;
        }
    }
}

/* The rows of a snapshot into s (defaults for rows it lacks): PH_OK,
 * PH_ERR_SNAPSHOT_VERSION (a row this core does not have) or
 * PH_ERR_SNAPSHOT_INVALID. */
static int get_settings(rd *r, ph_settings *s) {
    *s = ph_default_settings();
    const int nrows = ph_setting_count();
    uint8_t seen[128] = {0};
    if (nrows > (int)sizeof seen) return PH_ERR_SNAPSHOT_INVALID;
    const uint32_t n = get_u32(r);
    if (n > (uint32_t)nrows) return PH_ERR_SNAPSHOT_INVALID;
    for (uint32_t i = 0; i < n && !r->bad; i++) {
        char name[64];
        const uint8_t len = get_u8(r);
        if (len >= sizeof name || !need(r, len)) return PH_ERR_SNAPSHOT_INVALID;
        memcpy(name, r->p + r->n, len);
        name[len] = 0;
        r->n += len;
        const uint8_t type = get_u8(r);
        const ph_setting *row = ph_setting_find(name);
        if (!row) return PH_ERR_SNAPSHOT_VERSION;
        const int idx = (int)(row - ph_setting_at(0));
        if (seen[idx] || type != (uint8_t)row->type) return PH_ERR_SNAPSHOT_INVALID;
        seen[idx] = 1;
        void *f = ph_setting_ptr(s, row);
        switch (row->type) {
        case PH_SETTING_DOUBLE:
            *(double *)f = get_f64(r);
            break;
        case PH_SETTING_INT:
        case PH_SETTING_BOOL:
        case PH_SETTING_ENUM:
            *(int *)f = get_i32(r);
            break;
        case PH_SETTING_U64:
            *(uint64_t *)f = get_u64(r);
            break;
        case PH_SETTING_VEC3:
        case PH_SETTING_SPOOK:
            for (int k = 0; k < 3; k++)
                ((double *)f)[k] = get_f64(r);
            break;
        }
    }
    if (r->bad || ph_settings_validate(s, NULL) != PH_OK) return PH_ERR_SNAPSHOT_INVALID;
    return PH_OK;
}

static void put_pool(wr *o, const ph__pool *p) {
    put_i32(o, p->hwm);
    put_i32(o, p->free);
    put_i32(o, p->count);
}

static void put_body(wr *o, const ph__body *b) {
    put_u16(o, b->gen);
    put_u8(o, b->alive);
    put_i32(o, b->next_free);
    if (b->alive) {
        put_u8(o, (uint8_t)b->type);
        put_u8(o, b->mass_override);
        put_u8(o, b->asleep);
        put_v3(o, b->p);
        put_q(o, b->q);
        put_v3(o, b->v);
        put_v3(o, b->w);
        put_v3(o, b->force);
        put_v3(o, b->torque);
        put_f64(o, b->inv_mass);
        put_v3(o, b->inertia);
        put_v3(o, b->inv_inertia);
        put_f64(o, b->mass);
        put_f64(o, b->lin_damp);
        put_f64(o, b->ang_damp);
        put_f64(o, b->gravity_scale);
        put_u64(o, b->user_data);
        put_i32(o, b->first_shape);
        put_i32(o, b->shape_count);
        put_v3(o, b->v_step);
        put_v3(o, b->w_step);
        put_f64(o, b->rest_time);
    }
}

static void put_bodies(wr *o, const ph__world *w) {
    put_pool(o, &w->body_pool);
    for (int32_t i = 0; i < w->body_pool.hwm; i++)
        put_body(o, &w->bodies[i]);
}

static void put_shape(wr *o, const ph__shape *s) {
    put_u16(o, s->gen);
    put_i32(o, s->body);
    put_i32(o, s->next);
    if (s->body >= 0) {
        put_u8(o, s->local_identity);
        put_u8(o, (uint8_t)s->geom.type);
        put_f64(o, s->geom.radius);
        put_v3(o, s->geom.half_extents);
        put_f64(o, s->geom.half_height);
        put_v3(o, s->geom.normal);
        put_f64(o, s->geom.offset);
        put_v3(o, s->local.p);
        put_q(o, s->local.q);
        put_f64(o, s->density);
        put_f64(o, s->friction);
        put_f64(o, s->restitution);
        put_v3(o, s->aabb_lo);
        put_v3(o, s->aabb_hi);
        put_v3(o, s->fat_lo);
        put_v3(o, s->fat_hi);
        put_f64(o, s->slack);
        put_u64(o, s->sap_stamp);
        put_f64(o, s->spec);
    }
}

static void put_shapes(wr *o, const ph__world *w) {
    put_pool(o, &w->shape_pool);
    for (int32_t i = 0; i < w->shape_pool.hwm; i++)
        put_shape(o, &w->shapes[i]);
}

static void put_joint(wr *o, const ph__joint *j) {
    put_u16(o, j->gen);
    put_u8(o, j->alive);
    put_i32(o, j->next_free);
    if (j->alive) {
        put_u8(o, (uint8_t)j->type);
        put_i32(o, j->a);
        put_i32(o, j->b);
        put_v3(o, j->anchor_a);
        put_v3(o, j->anchor_b);
        put_v3(o, j->axis_a);
        put_v3(o, j->axis_b);
        put_q(o, j->rel_q);
        put_v3(o, j->ref_a);
        put_v3(o, j->ref_b);
        put_f64(o, j->distance);
        put_u8(o, (uint8_t)j->enable_limit);
        put_u8(o, (uint8_t)j->enable_motor);
        put_u8(o, (uint8_t)j->collide_connected);
        put_f64(o, j->lower);
        put_f64(o, j->upper);
        put_f64(o, j->motor_speed);
        put_f64(o, j->max_motor_torque);
        for (int k = 0; k < 8; k++)
            put_f64(o, j->lambda[k]);
    }
}

static void put_joints(wr *o, const ph__world *w) {
    put_pool(o, &w->joint_pool);
    for (int32_t i = 0; i < w->joint_pool.hwm; i++)
        put_joint(o, &w->joints[i]);
}

/* The broadphase's fat-box pairs can be reused by the next pass. */
static int fat_valid(const ph__world *w) { return w->fat_ok && w->fat_version == w->bp_version; }

static void put_broadphase(wr *o, const ph__world *w) {
    put_i32(o, w->sap_axis);
    put_u64(o, w->sap_pass);
    put_i32(o, w->sap_count);
    for (int32_t i = 0; i < w->sap_count; i++)
        put_i32(o, w->sap_order[i]);
    const int fat = fat_valid(w);
    put_u8(o, (uint8_t)fat);
    put_i32(o, fat ? w->fat_pair_count : 0);
    for (int32_t i = 0; fat && i < w->fat_pair_count; i++) {
        put_i32(o, w->fat_pairs[i].sa);
        put_i32(o, w->fat_pairs[i].sb);
    }
}

static void put_manifold(wr *o, const ph__contact_manifold *cm) {
    put_i32(o, cm->sa);
    put_i32(o, cm->sb);
    put_i32(o, cm->ba);
    put_i32(o, cm->bb);
    put_f64(o, cm->friction);
    put_f64(o, cm->restitution);
    put_v3(o, cm->m.normal);
    put_u8(o, (uint8_t)cm->m.count);
    for (int k = 0; k < cm->m.count; k++) {
        put_v3(o, cm->m.pts[k].point);
        put_f64(o, cm->m.pts[k].depth);
        put_u32(o, cm->m.pts[k].feature);
        put_v3(o, cm->loc_a[k]);
        put_v3(o, cm->loc_b[k]);
        put_f64(o, cm->depth0[k]);
        put_f64(o, cm->ln[k]);
        put_f64(o, cm->lt1[k]);
        put_f64(o, cm->lt2[k]);
    }
    put_v3(o, cm->t1);
    put_v3(o, cm->t2);
    put_f64(o, cm->approach);
    put_f64(o, cm->ref_r);
    if (cm->ref_r < 0) return; /* (no cache reference: the rest is unset) */
    put_v3(o, cm->n_loc);
    put_v3(o, cm->ref_t);
    put_q(o, cm->ref_q);
    put_u8(o, (uint8_t)cm->ref_side);
}

/* Every manifold, the step's and the sleeping islands' (w->mlist, listed
 * in pair order by ph_world_snapshot). */
static void put_manifolds(wr *o, const ph__world *w) {
    put_i32(o, w->mlist_count);
    for (int32_t i = 0; i < w->mlist_count; i++)
        put_manifold(o, w->mlist[i]);
}

/* The section in front of its payload: its length is patched in once the
 * payload is written (o->n before and after). */
static void put_section(wr *o, uint32_t tag, void (*body)(wr *, const ph__world *), const ph__world *w) {
    put_u32(o, tag);
    put_u32(o, 0);
    const size_t at = o->n;
    put_u64(o, 0);
    body(o, w);
    wr patch = {o->p, at};
    put_u64(&patch, (uint64_t)(o->n - at - 8));
}

static void put_settings_w(wr *o, const ph__world *w) { put_settings(o, &w->settings); }

static void put_world(wr *o, const ph__world *w) {
    put_i32(o, w->max_bodies);
    put_i32(o, w->max_joints);
    put_u64(o, w->steps);
    put_u64(o, w->rng);
}

/* The optional id-fence section ("fnce", ph_world_fence_ids): each pool's
 * fresh_gen, written only after a fence, so snapshots of worlds that never
 * had one keep their bytes. */
#define FENCE_TAG TAG('f', 'n', 'c', 'e')
static int has_fence(const ph__world *w) {
    return w->body_pool.fresh_gen || w->shape_pool.fresh_gen || w->joint_pool.fresh_gen;
}
static void put_fence(wr *o, const ph__world *w) {
    put_u16(o, w->body_pool.fresh_gen);
    put_u16(o, w->shape_pool.fresh_gen);
    put_u16(o, w->joint_pool.fresh_gen);
}

/* The optional sleep-criterion section ("rest"): every live body's rest
 * reference (where its rest began, island.c), written only with sleeping
 * on, so snapshots of worlds that do not sleep keep their bytes. Without
 * it a restore starts every rest at the body's pose. */
#define REST_TAG TAG('r', 'e', 's', 't')
static int has_rest(const ph__world *w) { return w->settings.sleep != 0; }
static void put_rest(wr *o, const ph__world *w) {
    for (int32_t i = 0; i < w->body_pool.hwm; i++) {
        if (!w->bodies[i].alive) continue;
        put_v3(o, w->bodies[i].rest_p);
        put_q(o, w->bodies[i].rest_q);
    }
}

/* The whole snapshot. */
static void put_all(wr *o, const ph__world *w) {
    for (int i = 0; i < 6; i++)
        put_u8(o, (uint8_t)MAGIC[i]);
    put_u16(o, PH_SNAPSHOT_VERSION);
    put_u32(o, BYTE_ORDER_MARK);
    put_u32(o, HEADER_BYTES);
    put_f64(o, DOUBLE_MARK);
    put_u64(o, 0); /* the total length, patched below */
    put_u64(o, w->steps);
    put_u32(o, (uint32_t)w->body_pool.count);
    put_u32(o, (uint32_t)w->shape_pool.count);
    put_u32(o, (uint32_t)w->joint_pool.count);
    put_u32(o, (uint32_t)w->mlist_count);
    put_u32(o, (uint32_t)(N_SECTIONS + has_fence(w) + has_rest(w)));
    put_u32(o, 0); /* flags */
    void (*const bodies[N_SECTIONS])(wr *, const ph__world *) = {
        put_settings_w, put_world, put_bodies, put_shapes, put_joints, put_broadphase, put_manifolds};
    for (int i = 0; i < N_SECTIONS; i++)
        put_section(o, section_tags[i], bodies[i], w);
    if (has_fence(w)) put_section(o, FENCE_TAG, put_fence, w);
    if (has_rest(w)) put_section(o, REST_TAG, put_rest, w);
    wr patch = {o->p, 24};
    put_u64(&patch, (uint64_t)(o->n + TRAILER_BYTES));
    put_u64(o, ph__xxh64(o->p, o->n));
}

/* The bytes of the record that f writes for x (at most 1 KiB). */
#define MEASURE(f, x)                                                                                                  \
    do {                                                                                                               \
        wr m_ = {scratch, 0};                                                                                          \
        f(&m_, x);                                                                                                     \
        size = m_.n;                                                                                                   \
    } while (0)

/* The exact length of w's snapshot: the records' sizes measured on
 * stand-ins (a live and a dead slot, a manifold with and without points
 * and cache reference), then summed, without a pass that writes. */
static size_t snapshot_size(const ph__world *w) {
    uint8_t scratch[1024];
    size_t size, total = HEADER_BYTES + (size_t)N_SECTIONS * SECTION_BYTES + TRAILER_BYTES;
    total += 4;
    for (int i = 0; i < ph_setting_count(); i++) {
        const ph_setting *r = ph_setting_at(i);
        const size_t v = r->type == PH_SETTING_DOUBLE || r->type == PH_SETTING_U64   ? 8
                         : r->type == PH_SETTING_VEC3 || r->type == PH_SETTING_SPOOK ? 24
                                                                                     : 4;
        total += 2 + strlen(r->name) + v;
    }
    MEASURE(put_world, w);
    total += size;
    ph__body b;
    memset(&b, 0, sizeof b);
    MEASURE(put_body, &b);
    const size_t body_dead = size;
    b.alive = 1;
    MEASURE(put_body, &b);
    const size_t body_live = size;
    total += 12;
    for (int32_t i = 0; i < w->body_pool.hwm; i++)
        total += w->bodies[i].alive ? body_live : body_dead;
    ph__shape sh;
    memset(&sh, 0, sizeof sh);
    MEASURE(put_shape, &sh);
    const size_t shape_live = size;
    sh.body = -1;
    MEASURE(put_shape, &sh);
    const size_t shape_dead = size;
    total += 12;
    for (int32_t i = 0; i < w->shape_pool.hwm; i++)
        total += w->shapes[i].body >= 0 ? shape_live : shape_dead;
    ph__joint j;
    memset(&j, 0, sizeof j);
    MEASURE(put_joint, &j);
    const size_t joint_dead = size;
    j.alive = 1;
    MEASURE(put_joint, &j);
    const size_t joint_live = size;
    total += 12;
    for (int32_t i = 0; i < w->joint_pool.hwm; i++)
        total += w->joints[i].alive ? joint_live : joint_dead;
    total += 4 + 8 + 4 + 4 * (size_t)w->sap_count + 1 + 4 + (fat_valid(w) ? 8 * (size_t)w->fat_pair_count : 0);
    ph__contact_manifold cm;
    memset(&cm, 0, sizeof cm);
    cm.ref_r = -1;
    MEASURE(put_manifold, &cm);
    const size_t m_base = size;
    cm.m.count = 1;
    MEASURE(put_manifold, &cm);
    const size_t m_point = size - m_base;
    cm.m.count = 0;
    cm.ref_r = 0;
    MEASURE(put_manifold, &cm);
    const size_t m_ref = size - m_base;
    total += 4;
    for (int32_t i = 0; i < w->mlist_count; i++) {
        const ph__contact_manifold *c = w->mlist[i];
        total += m_base + (size_t)c->m.count * m_point + (c->ref_r < 0 ? 0 : m_ref);
    }
    if (has_fence(w)) total += SECTION_BYTES + 6;
    if (has_rest(w)) total += SECTION_BYTES + (size_t)w->body_pool.count * 56;
    return total;
}

int ph_world_snapshot(ph_world_id id, uint8_t **out, size_t *len) {
    if (out) *out = NULL;
    if (len) *len = 0;
    ph__world *w = ph__world_get(id);
    if (!w) return PH_ERR_INVALID_HANDLE;
    if (!out || !len) return PH_ERR_INVALID_ARGUMENT;
    if (ph__manifold_list(w) < 0) return PH_ERR_NO_MEMORY;
    const size_t size = snapshot_size(w);
    uint8_t *buf = ph__alloc(size);
    if (!buf) return PH_ERR_NO_MEMORY;
    wr o = {buf, 0};
    put_all(&o, w);
    if (o.n != size) abort(); /* (a bug of snapshot_size: the buffer overran) */
    *out = buf;
    *len = o.n;
    return PH_OK;
}

void ph_snapshot_free(uint8_t *data) { ph__free(data); }

/* ------------------------------------------------------------- restore */

/* The header, the length and the checksum; fills info. */
static int check_header(const uint8_t *data, size_t len, ph_snapshot_info *info) {
    const size_t m = len < 6 ? len : 6;
    if (memcmp(data, MAGIC, m) != 0) return PH_ERR_NOT_SNAPSHOT;
    if (len < 8) return PH_ERR_SNAPSHOT_TRUNCATED;
    rd r = {data, 6, len, 0};
    info->version = get_u16(&r);
    if (info->version != PH_SNAPSHOT_VERSION) return PH_ERR_SNAPSHOT_VERSION;
    if (len < HEADER_BYTES) return PH_ERR_SNAPSHOT_TRUNCATED;
    const uint32_t bom = get_u32(&r), hbytes = get_u32(&r);
    const double dmark = get_f64(&r);
    if (bom != BYTE_ORDER_MARK || hbytes != HEADER_BYTES || dmark != DOUBLE_MARK) return PH_ERR_SNAPSHOT_VERSION;
    info->bytes = get_u64(&r);
    if (info->bytes > len) return PH_ERR_SNAPSHOT_TRUNCATED;
    if (info->bytes < len || info->bytes < HEADER_BYTES + TRAILER_BYTES) return PH_ERR_SNAPSHOT_INVALID;
    if (ph__xxh64(data, len - TRAILER_BYTES) != ld64(data + len - TRAILER_BYTES)) return PH_ERR_SNAPSHOT_CORRUPT;
    info->step = get_u64(&r);
    info->bodies = get_u32(&r);
    info->shapes = get_u32(&r);
    info->joints = get_u32(&r);
    info->manifolds = get_u32(&r);
    info->sections = get_u32(&r);
    if (get_u32(&r) != 0 || info->sections < N_SECTIONS) return PH_ERR_SNAPSHOT_INVALID; /* (flags: none yet) */
    return PH_OK;
}

int ph_snapshot_info_get(const uint8_t *data, size_t len, ph_snapshot_info *out) {
    if (!data || !out) return PH_ERR_INVALID_ARGUMENT;
    ph_snapshot_info info;
    memset(&info, 0, sizeof info);
    const int e = check_header(data, len, &info);
    if (e == PH_OK) *out = info;
    return e;
}

/* A pool's bookkeeping, its records allocated (zeroed, hwm of them) once
 * hwm is bounded by the bytes left (each slot takes at least min_slot). */
static int get_pool(rd *r, ph__pool *p, void **records, size_t elem, size_t min_slot) {
    const int32_t hwm = get_i32(r), free = get_i32(r), count = get_i32(r);
    if (r->bad || hwm < 0 || count < 0 || count > hwm || free < -1 || free >= hwm ||
        (uint64_t)hwm > (r->end - r->n) / min_slot)
        return PH_ERR_SNAPSHOT_INVALID;
    ph__pool_init(p);
    if (hwm > 0) {
        *records = ph__alloc_aligned(64, (size_t)hwm * elem); /* (the records' alignment, pool.c) */
        if (!*records) return PH_ERR_NO_MEMORY;
        memset(*records, 0, (size_t)hwm * elem);
    }
    p->cap = p->hwm = hwm;
    p->free = free;
    p->count = count;
    return PH_OK;
}

/* Slot i's generation and link (what every slot has). */
static int get_body(rd *r, ph__body *b) {
    b->gen = get_u16(r);
    b->alive = get_flag(r);
    b->next_free = get_i32(r);
    if (!b->alive) return !r->bad;
    const uint8_t type = get_u8(r);
    check(r, type <= PH_BODY_DYNAMIC && b->gen != 0 && b->next_free == -1);
    b->type = (ph_body_type)type;
    b->mass_override = get_flag(r);
    b->asleep = get_flag(r);
    b->p = get_v3(r);
    b->q = get_q(r);
    b->v = get_v3(r);
    b->w = get_v3(r);
    b->force = get_v3(r);
    b->torque = get_v3(r);
    b->inv_mass = get_fin(r);
    b->inertia = get_v3(r);
    b->inv_inertia = get_v3(r);
    b->mass = get_fin(r);
    b->lin_damp = get_fin(r);
    b->ang_damp = get_fin(r);
    b->gravity_scale = get_fin(r);
    b->user_data = get_u64(r);
    b->first_shape = get_i32(r);
    b->shape_count = get_i32(r);
    b->v_step = get_v3(r);
    b->w_step = get_v3(r);
    b->rest_time = get_fin(r);
    const double qn = b->q.x * b->q.x + b->q.y * b->q.y + b->q.z * b->q.z + b->q.w * b->q.w;
    check(r, fabs(qn - 1.0) <= 1e-3 && b->inv_mass >= 0 && b->mass >= 0 && b->lin_damp >= 0 && b->ang_damp >= 0 &&
                 b->rest_time >= 0 && b->shape_count >= 0 && b->shape_count <= PH_MAX_SHAPES_PER_BODY &&
                 b->inv_inertia.x >= 0 && b->inv_inertia.y >= 0 && b->inv_inertia.z >= 0);
    /* A dynamic body stays inside the envelope (edits and steps keep it). */
    if (b->type == PH_BODY_DYNAMIC) check(r, ph__position_ok(b->p) && ph__speeds_ok(b->v, b->w));
    return !r->bad;
}

/* A shape's geometry within the bounds ph_shape_create checks. */
static int geom_ok(const ph__geom *g) {
    const double lo = 1e-4, hi = 1e4;
    switch (g->type) {
    case PH_SHAPE_SPHERE:
        return g->radius >= lo && g->radius <= hi;
    case PH_SHAPE_BOX:
        return g->half_extents.x >= lo && g->half_extents.y >= lo && g->half_extents.z >= lo &&
               g->half_extents.x <= hi && g->half_extents.y <= hi && g->half_extents.z <= hi;
    case PH_SHAPE_CAPSULE:
        return g->radius >= lo && g->radius <= hi && g->half_height >= 0 && g->half_height <= hi;
    case PH_SHAPE_PLANE:
        return fabs(ph_len(g->normal) - 1.0) < 1e-6 && fabs(g->offset) < 1e12;
    default:
        return 0;
    }
}

static int get_shape(rd *r, ph__shape *s) {
    s->gen = get_u16(r);
    s->body = get_i32(r);
    s->next = get_i32(r);
    check(r, s->body >= -1);
    if (s->body < 0) return !r->bad;
    s->local_identity = get_flag(r);
    const uint8_t type = get_u8(r);
    check(r, type < PH_SHAPE_TYPE_COUNT && s->gen != 0);
    s->geom.type = (ph_shape_type)type;
    s->geom.radius = get_fin(r);
    s->geom.half_extents = get_v3(r);
    s->geom.half_height = get_fin(r);
    s->geom.normal = get_v3(r);
    s->geom.offset = get_fin(r);
    s->local.p = get_v3(r);
    s->local.q = get_q(r);
    s->density = get_fin(r);
    s->friction = get_fin(r);
    s->restitution = get_fin(r);
    s->aabb_lo = get_v3(r);
    s->aabb_hi = get_v3(r);
    s->fat_lo = get_v3(r);
    s->fat_hi = get_v3(r);
    s->slack = get_fin(r);
    s->sap_stamp = get_u64(r);
    s->spec = get_fin(r);
    check(r, geom_ok(&s->geom) && ph_quat_len(s->local.q) > 0.5 && s->density > 0 && s->friction >= 0 &&
                 s->restitution >= 0 && s->restitution <= 1 && s->slack >= 0 && s->spec >= 0);
    return !r->bad;
}

static int get_joint(rd *r, ph__joint *j) {
    j->gen = get_u16(r);
    j->alive = get_flag(r);
    j->next_free = get_i32(r);
    if (!j->alive) return !r->bad;
    const uint8_t type = get_u8(r);
    check(r, type <= PH_JOINT_FIXED && j->gen != 0 && j->next_free == -1);
    j->type = (ph_joint_type)type;
    j->a = get_i32(r);
    j->b = get_i32(r);
    j->anchor_a = get_v3(r);
    j->anchor_b = get_v3(r);
    j->axis_a = get_v3(r);
    j->axis_b = get_v3(r);
    j->rel_q = get_q(r);
    j->ref_a = get_v3(r);
    j->ref_b = get_v3(r);
    j->distance = get_fin(r);
    j->enable_limit = get_flag(r);
    j->enable_motor = get_flag(r);
    j->collide_connected = get_flag(r);
    j->lower = get_fin(r);
    j->upper = get_fin(r);
    j->motor_speed = get_fin(r);
    j->max_motor_torque = get_fin(r);
    for (int k = 0; k < 8; k++)
        j->lambda[k] = get_fin(r);
    return !r->bad;
}

static int get_manifold(rd *r, ph__contact_manifold *cm) {
    memset(cm, 0, sizeof *cm);
    cm->sa = get_i32(r);
    cm->sb = get_i32(r);
    cm->ba = get_i32(r);
    cm->bb = get_i32(r);
    cm->friction = get_fin(r);
    cm->restitution = get_fin(r);
    cm->m.normal = get_v3(r);
    cm->m.count = get_u8(r);
    check(r, cm->m.count <= PH_MAX_MANIFOLD_POINTS);
    for (int k = 0; k < cm->m.count && !r->bad; k++) {
        cm->m.pts[k].point = get_v3(r);
        cm->m.pts[k].depth = get_fin(r);
        cm->m.pts[k].feature = get_u32(r);
        cm->loc_a[k] = get_v3(r);
        cm->loc_b[k] = get_v3(r);
        cm->depth0[k] = get_fin(r);
        cm->ln[k] = get_fin(r);
        cm->lt1[k] = get_fin(r);
        cm->lt2[k] = get_fin(r);
    }
    cm->row0 = -1;
    cm->t1 = get_v3(r);
    cm->t2 = get_v3(r);
    cm->approach = get_fin(r);
    cm->ref_r = get_fin(r);
    if (cm->ref_r >= 0) {
        cm->n_loc = get_v3(r);
        cm->ref_t = get_v3(r);
        cm->ref_q = get_q(r);
        cm->ref_side = get_flag(r);
    } else {
        check(r, cm->ref_r == -1);
    }
    check(r, cm->friction >= 0 && cm->restitution >= 0 && cm->restitution <= 1);
    return !r->bad;
}

/* A pool's free list: every slot on it dead, none twice, and the live
 * slots as many as the pool says. dead(i) tells a dead slot, link(i) its
 * link; mark is scratch of hwm bytes (zeroed). */
typedef struct pool_view {
    const void *records;
    size_t elem, link_off, dead_off;
    int dead_is_neg_body; /* shapes: dead when the int32 at dead_off is < 0; else a uint8 alive flag */
} pool_view;

static int slot_dead(const pool_view *v, int32_t i) {
    const char *rec = (const char *)v->records + (size_t)i * v->elem;
    if (v->dead_is_neg_body) {
        int32_t b;
        memcpy(&b, rec + v->dead_off, sizeof b);
        return b < 0;
    }
    return rec[v->dead_off] == 0;
}

static int32_t slot_link(const pool_view *v, int32_t i) {
    int32_t n;
    memcpy(&n, (const char *)v->records + (size_t)i * v->elem + v->link_off, sizeof n);
    return n;
}

static int free_list_ok(const ph__pool *p, const pool_view *v, uint8_t *mark) {
    int32_t live = 0;
    for (int32_t i = 0; i < p->hwm; i++)
        live += !slot_dead(v, i);
    if (live != p->count) return 0;
    memset(mark, 0, (size_t)p->hwm);
    int32_t steps = 0;
    for (int32_t s = p->free; s >= 0; s = slot_link(v, s)) {
        if (s >= p->hwm || mark[s] || !slot_dead(v, s) || ++steps > p->hwm - p->count) return 0;
        mark[s] = 1;
    }
    /* (Dead slots off the list are retired: their generation ran out.) */
    return 1;
}

static int pair_less(int32_t a1, int32_t b1, int32_t a2, int32_t b2) { return a1 < a2 || (a1 == a2 && b1 < b2); }

/* Cross-references of a world read from a snapshot. */
static int world_ok(ph__world *w) {
    const int32_t nb = w->body_pool.hwm, ns = w->shape_pool.hwm, nj = w->joint_pool.hwm;
    const int32_t most = nb > ns ? (nb > nj ? nb : nj) : (ns > nj ? ns : nj);
    uint8_t *mark = ph__alloc((size_t)most + 1);
    if (!mark) return PH_ERR_NO_MEMORY;
    int ok = 1;
    const pool_view vb = {w->bodies, sizeof(ph__body), offsetof(ph__body, next_free), offsetof(ph__body, alive), 0};
    const pool_view vs = {w->shapes, sizeof(ph__shape), offsetof(ph__shape, next), offsetof(ph__shape, body), 1};
    const pool_view vj = {w->joints, sizeof(ph__joint), offsetof(ph__joint, next_free), offsetof(ph__joint, alive), 0};
    ok = free_list_ok(&w->body_pool, &vb, mark) && free_list_ok(&w->shape_pool, &vs, mark) &&
         free_list_ok(&w->joint_pool, &vj, mark);
    /* Each live shape on a live body; each live body's shape list made of
     * its own shapes, shape_count long; together they hold every live
     * shape once. */
    for (int32_t s = 0; s < ns && ok; s++) {
        const ph__shape *sh = &w->shapes[s];
        if (sh->body < 0) continue;
        ok = sh->body < nb && w->bodies[sh->body].alive && sh->next >= -1 && sh->next < ns &&
             (sh->geom.type != PH_SHAPE_PLANE || w->bodies[sh->body].type == PH_BODY_STATIC);
    }
    int64_t listed = 0;
    for (int32_t i = 0; i < nb && ok; i++) {
        const ph__body *b = &w->bodies[i];
        if (!b->alive) continue;
        int32_t s = b->first_shape, k = 0;
        for (; ok && k < b->shape_count; k++) {
            ok = s >= 0 && s < ns && w->shapes[s].body == i;
            if (ok) s = w->shapes[s].next;
        }
        ok = ok && s == -1;
        listed += b->shape_count;
    }
    ok = ok && listed == w->shape_pool.count;
    for (int32_t j = 0; j < nj && ok; j++) {
        const ph__joint *jt = &w->joints[j];
        if (!jt->alive) continue;
        ok = jt->a >= 0 && jt->a < nb && w->bodies[jt->a].alive && jt->b >= -1 && jt->b < nb && jt->b != jt->a &&
             (jt->b < 0 || w->bodies[jt->b].alive);
    }
    /* The broadphase: its order names shape slots; its fat pairs, when
     * usable, pairs of live shapes in sorted order. */
    ok = ok && w->sap_axis >= 0 && w->sap_axis <= 2 && w->sap_count <= ns;
    for (int32_t i = 0; i < w->sap_count && ok; i++)
        ok = w->sap_order[i] >= 0 && w->sap_order[i] < ns;
    for (int32_t s = 0; s < ns && ok; s++)
        ok = w->shapes[s].body < 0 || w->shapes[s].sap_stamp <= w->sap_pass;
    for (int32_t i = 0; i < w->fat_pair_count && ok; i++) {
        const ph__pair p = w->fat_pairs[i];
        ok = p.sa >= 0 && p.sa < p.sb && p.sb < ns && w->shapes[p.sa].body >= 0 && w->shapes[p.sb].body >= 0 &&
             (i == 0 || pair_less(w->fat_pairs[i - 1].sa, w->fat_pairs[i - 1].sb, p.sa, p.sb));
    }
    /* The manifolds: sorted by shape pair; a manifold with points between
     * live shapes of the bodies it names (one whose shape was destroyed
     * keeps its slots with no points). */
    for (int32_t i = 0; i < w->manifold_count && ok; i++) {
        const ph__contact_manifold *cm = &w->manifolds[i];
        ok = cm->sa >= 0 && cm->sa < cm->sb && cm->sb < ns && cm->ba >= 0 && cm->ba < nb && cm->bb >= 0 &&
             cm->bb < nb && (i == 0 || pair_less(w->manifolds[i - 1].sa, w->manifolds[i - 1].sb, cm->sa, cm->sb));
        if (ok && cm->m.count > 0)
            ok = w->shapes[cm->sa].body == cm->ba && w->shapes[cm->sb].body == cm->bb && w->bodies[cm->ba].alive &&
                 w->bodies[cm->bb].alive;
    }
    ph__free(mark);
    return ok ? PH_OK : PH_ERR_SNAPSHOT_INVALID;
}

/* One section: its tag and its payload as a reader of its own (PH_OK), or
 * PH_ERR_SNAPSHOT_INVALID (a bad reserved word or a length past the end). */
static int read_section(rd *all, uint32_t *tag, rd *sec) {
    *tag = get_u32(all);
    const uint32_t reserved = get_u32(all);
    const uint64_t n = get_u64(all);
    if (all->bad || reserved != 0 || n > all->end - all->n) return PH_ERR_SNAPSHOT_INVALID;
    sec->p = all->p;
    sec->n = all->n;
    sec->end = all->n + (size_t)n;
    sec->bad = 0;
    all->n += (size_t)n;
    return PH_OK;
}

/* An optional section: its tag starts with a lower-case letter. */
static int optional_tag(uint32_t tag) { return (tag & 0xff) >= 'a' && (tag & 0xff) <= 'z'; }

/* The next required section, which must be tag; optional sections this
 * core does not know are skipped. *seen counts every section read. */
static int next_section(rd *all, uint32_t tag, rd *sec, uint32_t *seen) {
    for (;;) {
        uint32_t t;
        const int e = read_section(all, &t, sec);
        if (e) return e;
        ++*seen;
        if (t == tag) return PH_OK;
        if (!optional_tag(t)) return PH_ERR_SNAPSHOT_INVALID;
    }
}

/* A section read to its end and found good. */
static int section_done(const rd *sec) { return !sec->bad && sec->n == sec->end; }

static int restore_into(ph__world *w, rd *all, const ph_snapshot_info *info, uint32_t *seen) {
    rd sec;
    int e;
    /* Bodies, shapes, joints: every slot, then the records checked. */
    if ((e = next_section(all, section_tags[2], &sec, seen))) return e;
    if ((e = get_pool(&sec, &w->body_pool, (void **)&w->bodies, sizeof(ph__body), 7))) return e;
    for (int32_t i = 0; i < w->body_pool.hwm; i++)
        if (!get_body(&sec, &w->bodies[i])) return PH_ERR_SNAPSHOT_INVALID;
    if (!section_done(&sec)) return PH_ERR_SNAPSHOT_INVALID;

    if ((e = next_section(all, section_tags[3], &sec, seen))) return e;
    if ((e = get_pool(&sec, &w->shape_pool, (void **)&w->shapes, sizeof(ph__shape), 10))) return e;
    for (int32_t i = 0; i < w->shape_pool.hwm; i++)
        if (!get_shape(&sec, &w->shapes[i])) return PH_ERR_SNAPSHOT_INVALID;
    if (!section_done(&sec)) return PH_ERR_SNAPSHOT_INVALID;

    if ((e = next_section(all, section_tags[4], &sec, seen))) return e;
    if ((e = get_pool(&sec, &w->joint_pool, (void **)&w->joints, sizeof(ph__joint), 7))) return e;
    for (int32_t i = 0; i < w->joint_pool.hwm; i++)
        if (!get_joint(&sec, &w->joints[i])) return PH_ERR_SNAPSHOT_INVALID;
    if (!section_done(&sec)) return PH_ERR_SNAPSHOT_INVALID;

    /* The broadphase. */
    if ((e = next_section(all, section_tags[5], &sec, seen))) return e;
    w->sap_axis = get_i32(&sec);
    w->sap_pass = get_u64(&sec);
    const int32_t nsap = get_i32(&sec);
    if (sec.bad || nsap < 0 || (uint64_t)nsap > (sec.end - sec.n) / 4) return PH_ERR_SNAPSHOT_INVALID;
    if (ph__array_reserve(w->sap_order, nsap + 1)) return PH_ERR_NO_MEMORY;
    for (int32_t i = 0; i < nsap; i++)
        w->sap_order[i] = get_i32(&sec);
    w->sap_count = nsap;
    const uint8_t fat = get_flag(&sec);
    const int32_t nfat = get_i32(&sec);
    if (sec.bad || nfat < 0 || (!fat && nfat != 0) || (uint64_t)nfat > (sec.end - sec.n) / 8)
        return PH_ERR_SNAPSHOT_INVALID;
    if (ph__array_reserve(w->fat_pairs, nfat + 1)) return PH_ERR_NO_MEMORY;
    for (int32_t i = 0; i < nfat; i++) {
        w->fat_pairs[i].sa = get_i32(&sec);
        w->fat_pairs[i].sb = get_i32(&sec);
    }
    w->fat_pair_count = nfat;
    w->bp_version = 1;
    w->fat_version = fat ? 1 : 0;
    w->fat_ok = fat;
    if (!section_done(&sec)) return PH_ERR_SNAPSHOT_INVALID;

    /* The last step's manifolds. */
    if ((e = next_section(all, section_tags[6], &sec, seen))) return e;
    const int32_t nm = get_i32(&sec);
    if (sec.bad || nm < 0 || (uint64_t)nm > (sec.end - sec.n) / 100) return PH_ERR_SNAPSHOT_INVALID;
    if (ph__array_reserve(w->manifolds, nm + 1)) return PH_ERR_NO_MEMORY;
    for (int32_t i = 0; i < nm; i++)
        if (!get_manifold(&sec, &w->manifolds[i])) return PH_ERR_SNAPSHOT_INVALID;
    w->manifold_count = nm;
    if (!section_done(&sec)) return PH_ERR_SNAPSHOT_INVALID;
    for (int32_t i = 0; i < w->body_pool.hwm; i++) { /* (without a rest section: rests begin now) */
        w->bodies[i].rest_p = w->bodies[i].p;
        w->bodies[i].rest_q = w->bodies[i].q;
    }
    while (all->n < all->end) { /* (optional sections after the last one) */
        uint32_t t;
        if (read_section(all, &t, &sec) || !optional_tag(t)) return PH_ERR_SNAPSHOT_INVALID;
        ++*seen;
        if (t == FENCE_TAG) {
            w->body_pool.fresh_gen = get_u16(&sec);
            w->shape_pool.fresh_gen = get_u16(&sec);
            w->joint_pool.fresh_gen = get_u16(&sec);
            if (!section_done(&sec) || w->body_pool.fresh_gen > 0xfff0 || w->shape_pool.fresh_gen > 0xfff0 ||
                w->joint_pool.fresh_gen > 0xfff0)
                return PH_ERR_SNAPSHOT_INVALID;
        } else if (t == REST_TAG) {
            for (int32_t i = 0; i < w->body_pool.hwm; i++) {
                ph__body *b = &w->bodies[i];
                if (!b->alive) continue;
                b->rest_p = get_v3(&sec);
                b->rest_q = get_q(&sec);
                const ph_quat q = b->rest_q;
                check(&sec, fabs(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w - 1.0) <= 1e-3);
            }
            if (!section_done(&sec)) return PH_ERR_SNAPSHOT_INVALID;
        }
    }
    if (*seen != info->sections) return PH_ERR_SNAPSHOT_INVALID;

    /* The header's counts, the limits, then every cross-reference. */
    if (info->step != w->steps || info->bodies != (uint32_t)w->body_pool.count ||
        info->shapes != (uint32_t)w->shape_pool.count || info->joints != (uint32_t)w->joint_pool.count ||
        info->manifolds != (uint32_t)w->manifold_count)
        return PH_ERR_SNAPSHOT_INVALID;
    e = world_ok(w);
    /* The sleeping islands, the awake list and the resting tree, derived. */
    return e == PH_OK ? ph__sleep_rebuild(w) : e;
}

int ph_world_restore(const uint8_t *data, size_t len, const ph_snapshot_limits *limits, ph_world_id *out) {
    if (out) *out = (ph_world_id){0, 0};
    if (!data || !out) return PH_ERR_INVALID_ARGUMENT;
    if (limits && (limits->max_bodies < 1 || limits->max_bodies > PH_MAX_BODIES || limits->max_joints < 0 ||
                   limits->max_joints > PH_MAX_BODIES))
        return PH_ERR_INVALID_ARGUMENT;
    ph_snapshot_info info;
    int e = check_header(data, len, &info);
    if (e) return e;
    rd all = {data, HEADER_BYTES, len - TRAILER_BYTES, 0};
    uint32_t seen = 0;

    /* The settings and the world's counters make the record. */
    rd sec;
    ph_world_def def;
    if ((e = next_section(&all, section_tags[0], &sec, &seen))) return e;
    if ((e = get_settings(&sec, &def.settings))) return e;
    if (!section_done(&sec)) return PH_ERR_SNAPSHOT_INVALID;
    if ((e = next_section(&all, section_tags[1], &sec, &seen))) return e;
    def.max_bodies = get_i32(&sec);
    def.max_joints = get_i32(&sec);
    const uint64_t steps = get_u64(&sec), rng = get_u64(&sec);
    if (!section_done(&sec) || def.max_bodies < 1 || def.max_bodies > PH_MAX_BODIES || def.max_joints < 0 ||
        def.max_joints > PH_MAX_BODIES)
        return PH_ERR_SNAPSHOT_INVALID;
    if (limits) {
        def.max_bodies = limits->max_bodies;
        def.max_joints = limits->max_joints;
    }
    ph__world *w = ph__world_new(&def, &e);
    if (!w) return e == PH_ERR_NO_MEMORY ? e : PH_ERR_SNAPSHOT_INVALID;
    w->steps = steps;
    w->rng = rng;
    e = restore_into(w, &all, &info, &seen);
    if (e == PH_OK && (w->body_pool.count > w->max_bodies || w->joint_pool.count > w->max_joints))
        e = limits ? PH_ERR_LIMIT : PH_ERR_SNAPSHOT_INVALID;
    if (e == PH_OK) e = ph__world_register(w, out);
    if (e != PH_OK) ph__world_free(w);
    return e;
}
