/*
 * decode.c — bounded decoding of a client frame: a wire-level pre-scan
 * that prices the unpacked message before protobuf-c builds it, and an
 * allocator with a budget as the hard guard.
 *
 * Why: protobuf-c unpacks a whole ClientMessage before any count can be
 * checked, and a 4 MiB frame of two million empty ShapeDefs unpacks into
 * about 300 MB (each two-byte element becomes a struct of about 150
 * bytes); unknown fields are stored, not skipped. A limit on the frame's
 * size is therefore no limit on the memory or time of its decoding.
 *
 * Normal path: ps_decode_scan walks the frame's tags with the generated
 * descriptors (ClientMessage and every message type it can contain),
 * adding for each element what protobuf-c will allocate for it: the
 * struct of a submessage, a slot of a repeated array, a string's bytes, an
 * unknown field's record and bytes, plus a malloc overhead per allocation.
 * It reads the top-level request_id on the way, so a refusal can be
 * answered. Within budget, ps_decode_unpack unpacks with an allocator that
 * counts bytes and fails past twice that budget (so a mistake in the
 * estimate cannot become unbounded memory).
 *
 * Failure modes: bytes that are not a well-formed protobuf message (a bad
 * varint, a length past the end, a group or an unknown wire type) give
 * PS_DECODE_MALFORMED (the caller closes the connection, as for a frame
 * protobuf-c cannot parse). Over budget or over PS_DECODE_MAX_UNKNOWN
 * unknown fields give PS_DECODE_TOO_BIG / PS_DECODE_UNKNOWN with
 * request_id set: the caller answers RESOURCE_EXHAUSTED / INVALID_ARGUMENT
 * and the connection stays open. The scan is linear in the frame's bytes
 * and allocates nothing.
 *
 * Invariants: the unpacked message is freed with the default allocator
 * (free_unpacked(m, NULL)): the budget allocator's memory comes from
 * malloc.
 */
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"
#include "pw_fields.h"

#define MALLOC_OVERHEAD 16u /* bytes of bookkeeping per allocation (glibc: 8-16) */
#define MAX_DEPTH 32        /* physd.v1 nests about 6 deep; no recursive types */

typedef struct scan {
    uint64_t mem;
    uint64_t max_mem;
    uint32_t unknown;
    int over;
} scan;

static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    if (*p < end && !(**p & 0x80)) { /* one byte: the common case */
        *out = *(*p)++;
        return 0;
    }
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*p >= end) return -1;
        uint8_t b = *(*p)++;
        if (shift == 63 && (b & 0xfe)) return -1;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* The wire type a scalar field is written with (protobuf-c refuses a
 * mismatch, and so does the scan). */
static int scalar_wire_type(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 1;
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return 5;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return 2;
    default:
        return 0;
    }
}

static void charge(scan *sc, uint64_t bytes) {
    sc->mem += bytes;
    if (sc->mem > sc->max_mem) sc->over = 1;
}

/* A packed run of scalars of wire type wt (0 varint, 1 fixed64, 5 fixed32). */
static int packed_ok(int wt, const uint8_t *p, uint64_t len) {
    if (wt == 1) return len % 8 == 0;
    if (wt == 5) return len % 4 == 0;
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t v;
        if (get_varint(&p, end, &v)) return 0;
    }
    return 1;
}

static int scan_msg(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end, int depth, scan *sc,
                    uint64_t *request_id) {
    if (depth > MAX_DEPTH) return PS_DECODE_MALFORMED;
    /* Repeated fields: protobuf-c sizes each array once from its count. A
     * repeated field's elements come one after another, so the last key's
     * descriptor is kept. */
    uint64_t last_key = UINT64_MAX;
    const ProtobufCFieldDescriptor *last_f = NULL;
    while (p < end && !sc->over) {
        uint64_t key;
        if (get_varint(&p, end, &key)) return PS_DECODE_MALFORMED;
        const uint32_t num = (uint32_t)(key >> 3);
        const int wt = (int)(key & 7);
        if (num == 0 || (key >> 3) > 0x1fffffff) return PS_DECODE_MALFORMED;
        const uint8_t *val = p;
        uint64_t len = 0;
        switch (wt) {
        case 0:
            if (get_varint(&p, end, &len)) return PS_DECODE_MALFORMED;
            break;
        case 1:
            if (end - p < 8) return PS_DECODE_MALFORMED;
            p += 8;
            break;
        case 2:
            if (get_varint(&p, end, &len) || len > (uint64_t)(end - p)) return PS_DECODE_MALFORMED;
            val = p;
            p += len;
            break;
        case 5:
            if (end - p < 4) return PS_DECODE_MALFORMED;
            p += 4;
            break;
        default:
            return PS_DECODE_MALFORMED; /* groups (3, 4) and 6, 7 */
        }
        const ProtobufCFieldDescriptor *f = key == last_key ? last_f : protobuf_c_message_descriptor_get_field(d, num);
        last_key = key;
        last_f = f;
        if (!f) {
            sc->unknown++;
            if (sc->unknown > PS_DECODE_MAX_UNKNOWN) return PS_DECODE_UNKNOWN;
            charge(sc, sizeof(ProtobufCMessageUnknownField) + (uint64_t)(p - val) + 2 * MALLOC_OVERHEAD);
            continue;
        }
        /* A field written with another wire type than its type's (a packed
         * repeated scalar is length-delimited) does not parse. */
        const int want = scalar_wire_type(f->type);
        if (wt != want && !(wt == 2 && f->label == PROTOBUF_C_LABEL_REPEATED && want != 2)) return PS_DECODE_MALFORMED;
        if (depth == 0 && num == 1 && wt == 0 && request_id) *request_id = len;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (wt == 2 && f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_BYTES &&
                f->type != PROTOBUF_C_TYPE_MESSAGE) {
                /* Packed: at most one element per byte. Its contents must
                 * parse as protobuf-c parses them (whole fixed-size
                 * elements, terminated varints), so that a frame the scan
                 * passes is one protobuf-c unpacks: answers given before
                 * unpacking (the access check) then name a real request. */
                if (!packed_ok(want, val, len)) return PS_DECODE_MALFORMED;
                charge(sc, len * pw_field_elem_size(f->type));
            } else {
                charge(sc, pw_field_elem_size(f->type));
            }
        }
        if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            const ProtobufCMessageDescriptor *sd = f->descriptor;
            charge(sc, sd->sizeof_message + MALLOC_OVERHEAD);
            if (len > 0) {
                int r = scan_msg(sd, val, val + len, depth + 1, sc, NULL);
                if (r) return r;
            }
        } else if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES) {
            charge(sc, len + 1 + MALLOC_OVERHEAD);
        }
    }
    return sc->over ? PS_DECODE_TOO_BIG : 0;
}

/* The request id protobuf-c would read (the last field 1), from the top
 * level alone, for a frame the scan stopped early on. */
static uint64_t last_request_id(const uint8_t *p, const uint8_t *end) {
    uint64_t id = 0, key, v;
    while (p < end && get_varint(&p, end, &key) == 0) {
        switch (key & 7) {
        case 0:
            if (get_varint(&p, end, &v)) return id;
            if ((key >> 3) == 1) id = v;
            break;
        case 1:
            if (end - p < 8) return id;
            p += 8;
            break;
        case 2:
            if (get_varint(&p, end, &v) || v > (uint64_t)(end - p)) return id;
            p += v;
            break;
        case 5:
            if (end - p < 4) return id;
            p += 4;
            break;
        default:
            return id;
        }
    }
    return id;
}

/* Skips one field's value of wire type wt; -1 when malformed. */
static int skip_value(const uint8_t **p, const uint8_t *end, int wt, uint64_t *v, const uint8_t **val) {
    *v = 0;
    *val = *p;
    switch (wt) {
    case 0:
        return get_varint(p, end, v);
    case 1:
        if (end - *p < 8) return -1;
        *p += 8;
        return 0;
    case 2:
        if (get_varint(p, end, v) || *v > (uint64_t)(end - *p)) return -1;
        *val = *p;
        *p += *v;
        return 0;
    case 5:
        if (end - *p < 4) return -1;
        *p += 4;
        return 0;
    default:
        return -1;
    }
}

/* A member of ClientMessage's request oneof (unknown fields are skipped,
 * as protobuf-c keeps them aside). */
static int is_request_field(uint32_t num) {
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&physd__v1__client_message__descriptor, num);
    return f && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && f->type == PROTOBUF_C_TYPE_MESSAGE;
}

int ps_decode_peek(const uint8_t *data, size_t len, uint64_t *request_id, unsigned *request_case, uint64_t *world_id) {
    const uint8_t *p = data, *end = data + len;
    *request_id = 0;
    *request_case = 0;
    *world_id = 0;
    while (p < end) {
        uint64_t key, v;
        const uint8_t *val;
        if (get_varint(&p, end, &key) || skip_value(&p, end, (int)(key & 7), &v, &val)) return PS_DECODE_MALFORMED;
        const uint64_t num = key >> 3;
        const int wt = (int)(key & 7);
        if (num == 1 && wt == 0) {
            *request_id = v;
        } else if (num >= 2 && num <= 0x1fffffff && wt == 2 && is_request_field((uint32_t)num)) {
            /* A oneof member replaces another; the same member merges (its
             * world_id is the last one written). */
            if ((unsigned)num != *request_case) *world_id = 0;
            *request_case = (unsigned)num;
            const uint8_t *q = val, *qend = val + v;
            while (q < qend) {
                uint64_t k2, v2;
                const uint8_t *val2;
                if (get_varint(&q, qend, &k2) || skip_value(&q, qend, (int)(k2 & 7), &v2, &val2))
                    return PS_DECODE_MALFORMED;
                if (k2 == ((1u << 3) | 0)) *world_id = v2;
            }
        }
    }
    return 0;
}

int ps_decode_scan(const uint8_t *data, size_t len, uint64_t max_mem, uint64_t *request_id, uint64_t *mem) {
    scan sc = {0, max_mem, 0, 0};
    *request_id = 0;
    charge(&sc, physd__v1__client_message__descriptor.sizeof_message + MALLOC_OVERHEAD);
    int r = scan_msg(&physd__v1__client_message__descriptor, data, data + len, 0, &sc, request_id);
    if (r == PS_DECODE_TOO_BIG || r == PS_DECODE_UNKNOWN) *request_id = last_request_id(data, data + len);
    if (mem) *mem = sc.mem;
    return r;
}

/* ---------------------------------------------------- budget allocator */

typedef struct budget {
    uint64_t used, max;
} budget;

static void *budget_alloc(void *data, size_t size) {
    budget *b = data;
    if (b->used + size + MALLOC_OVERHEAD > b->max) return NULL;
    b->used += size + MALLOC_OVERHEAD;
    return malloc(size);
}

static void budget_free(void *data, void *p) {
    (void)data;
    free(p);
}

ps_msg *ps_decode_unpack(const uint8_t *data, size_t len, uint64_t max_mem, int *over_budget) {
    budget b = {0, max_mem};
    ProtobufCAllocator a = {budget_alloc, budget_free, &b};
    ps_msg *m = physd__v1__client_message__unpack(&a, len, data);
    *over_budget = !m && b.used + 4096 > b.max;
    return m;
}
