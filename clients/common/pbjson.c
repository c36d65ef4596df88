/*
 * pbjson.c — the descriptor-driven JSON mapping of pbjson.h.
 *
 * Normal path (write): walk the message's fields in number order; skip an
 * unset oneof member, an absent message, an empty repeated field and (unless
 * PBJ_EMIT_DEFAULTS) a zero scalar; write wrappers as their value, Vec3 and
 * Quat as inline arrays, enums by name. Read: for each JSON member, find the
 * field by name and assign it, allocating sub-messages, strings and
 * repeated arrays with malloc so that protobuf_c_message_free_unpacked can
 * release them.
 *
 * Failure modes: an unknown field, a value of the wrong JSON type, an
 * unknown enum name, a number out of the field's range, a bad array length
 * or out of memory gives -1 and a message naming the field; the message
 * being built keeps whatever was assigned before (still freeable).
 *
 * Invariants: every pointer stored in a message was allocated here (or is
 * the field's default), so freeing with the NULL allocator is safe.
 */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pbjson.h"
#include "pw_fields.h"
#include "suggest.h"

#define FIELD_PTR(m, off) ((void *)((char *)(m) + (off)))
#define CFIELD_PTR(m, off) ((const void *)((const char *)(m) + (off)))

static int errf(char *err, size_t n, const char *fmt, const char *a, const char *b) {
    if (err) snprintf(err, n, fmt, a, b);
    return -1;
}

/* "; did you mean 'x'?" naming the fields of d nearest to name, or "". */
static void field_hint(const ProtobufCMessageDescriptor *d, const char *name, char *buf, size_t n) {
    const char *cands[256];
    size_t k = 0;
    for (unsigned i = 0; i < d->n_fields && k < 256; i++)
        cands[k++] = d->fields[i].name;
    char near[200];
    buf[0] = 0;
    if (suggest_nearest(name, cands, k, near, sizeof near)) snprintf(buf, n, "; did you mean %s?", near);
}

/* "unknown WHAT 'name' (in Type); did you mean 'x'?" */
static int unknown_field(const ProtobufCMessageDescriptor *d, const char *what, const char *name, char *err, size_t n) {
    char hint[256];
    field_hint(d, name, hint, sizeof hint);
    if (err) snprintf(err, n, "unknown %s '%s' (in %s)%s", what, name, d->short_name, hint);
    return -1;
}

/* The fields of d as "a,b,c" (the array form of a message). */
static void field_list(const ProtobufCMessageDescriptor *d, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (unsigned i = 0; i < d->n_fields && k < n; i++) {
        int w = snprintf(buf + k, n - k, "%s%s", i ? "," : "", d->fields[i].name);
        if (w < 0) break;
        k += (size_t)w;
    }
}

ProtobufCMessage *pbj_new(const ProtobufCMessageDescriptor *d) {
    ProtobufCMessage *m = malloc(d->sizeof_message);
    if (m) d->message_init(m);
    return m;
}

/* A wrapper: one field named "value". */
static int is_wrapper(const ProtobufCMessageDescriptor *d) {
    return d->n_fields == 1 && strcmp(d->fields[0].name, "value") == 0;
}

/* Messages printed as inline arrays of their fields. */
static int is_vector(const ProtobufCMessageDescriptor *d) {
    return strcmp(d->name, "physd.v1.Vec3") == 0 || strcmp(d->name, "physd.v1.Quat") == 0;
}

/* The length of the common prefix of the enum's value names, cut after its
 * last underscore ("METHOD_"). */
static size_t enum_prefix(const ProtobufCEnumDescriptor *d) {
    if (d->n_values < 2) return 0;
    size_t p = strlen(d->values[0].name);
    for (unsigned i = 1; i < d->n_values; i++) {
        size_t k = 0;
        while (k < p && d->values[i].name[k] == d->values[0].name[k])
            k++;
        p = k;
    }
    while (p > 0 && d->values[0].name[p - 1] != '_')
        p--;
    return p;
}

const char *pbj_enum_name(const ProtobufCEnumDescriptor *d, int value, char *buf, size_t n) {
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(d, value);
    if (!v) return NULL;
    size_t p = enum_prefix(d), k = 0;
    for (const char *s = v->name + p; *s && k + 1 < n; s++)
        buf[k++] = (char)tolower((unsigned char)*s);
    buf[k] = 0;
    return buf;
}

int pbj_enum_parse(const ProtobufCEnumDescriptor *d, const char *text, int *value) {
    size_t p = enum_prefix(d);
    for (unsigned i = 0; i < d->n_values; i++) {
        if (strcasecmp(text, d->values[i].name) == 0 || strcasecmp(text, d->values[i].name + p) == 0) {
            *value = d->values[i].value;
            return 0;
        }
    }
    char *end;
    long v = strtol(text, &end, 10);
    if (*text && !*end && protobuf_c_enum_descriptor_get_value(d, (int)v)) {
        *value = (int)v;
        return 0;
    }
    return -1;
}

void pbj_describe_field(const ProtobufCFieldDescriptor *f, char *buf, size_t n) {
    const ProtobufCFieldDescriptor *g = f;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const ProtobufCMessageDescriptor *d = f->descriptor;
        if (is_wrapper(d)) {
            g = &d->fields[0];
        } else {
            size_t k = (size_t)snprintf(buf, n, "[");
            for (unsigned i = 0; i < d->n_fields && k < n; i++)
                k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", d->fields[i].name);
            if (k < n) snprintf(buf + k, n - k, "]");
            return;
        }
    }
    switch (g->type) {
    case PROTOBUF_C_TYPE_BOOL:
        snprintf(buf, n, "true | false");
        break;
    case PROTOBUF_C_TYPE_STRING:
        snprintf(buf, n, "string");
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *e = g->descriptor;
        size_t k = 0;
        char name[64];
        buf[0] = 0;
        for (unsigned i = 0; i < e->n_values && k < n; i++)
            k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? " | " : "",
                                  pbj_enum_name(e, e->values[i].value, name, sizeof name));
        break;
    }
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_FLOAT:
        snprintf(buf, n, "number");
        break;
    default:
        snprintf(buf, n, "integer");
        break;
    }
}

/* ------------------------------------------------------------- writing */

static void write_message(jw *w, const ProtobufCMessage *m, int flags);

static void write_scalar(jw *w, const ProtobufCFieldDescriptor *f, const void *p, int flags) {
    char name[64];
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        jw_int(w, *(const int32_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        jw_uint(w, *(const uint32_t *)p);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        jw_int(w, *(const int64_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        jw_uint(w, *(const uint64_t *)p);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
        jw_double(w, *(const float *)p);
        break;
    case PROTOBUF_C_TYPE_DOUBLE:
        jw_double(w, *(const double *)p);
        break;
    case PROTOBUF_C_TYPE_BOOL:
        jw_bool(w, *(const protobuf_c_boolean *)p);
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        int v = *(const int *)p;
        const char *s = pbj_enum_name(f->descriptor, v, name, sizeof name);
        if (s)
            jw_string(w, s);
        else
            jw_int(w, v);
        break;
    }
    case PROTOBUF_C_TYPE_STRING:
        jw_string(w, *(char *const *)p);
        break;
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        jw_array_inline(w);
        for (size_t i = 0; i < b->len; i++)
            jw_uint(w, b->data[i]);
        jw_array_end(w);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        write_message(w, *(ProtobufCMessage *const *)p, flags);
        break;
    }
}

static int scalar_is_zero(const ProtobufCFieldDescriptor *f, const void *p) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return !s || !s[0];
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)p)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(void *const *)p == NULL;
    case PROTOBUF_C_TYPE_DOUBLE:
        return *(const double *)p == 0.0 && !signbit(*(const double *)p);
    case PROTOBUF_C_TYPE_FLOAT:
        return *(const float *)p == 0.0f;
    default: {
        size_t sz = pw_field_elem_size(f->type);
        static const unsigned char zero[8];
        return memcmp(p, zero, sz) == 0;
    }
    }
}

static void write_message(jw *w, const ProtobufCMessage *m, int flags) {
    if (!m) {
        jw_null(w);
        return;
    }
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (is_wrapper(d)) {
        write_scalar(w, &d->fields[0], CFIELD_PTR(m, d->fields[0].offset), flags);
        return;
    }
    if (strcmp(d->name, "physd.v1.BodyRef") == 0) {
        /* The reader's shorthand: a bare number is the index of an AddBody op. */
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, "new_body_op");
        if (f && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)CFIELD_PTR(m, f->quantifier_offset) == f->id) {
            jw_uint(w, *(const uint32_t *)CFIELD_PTR(m, f->offset));
            return;
        }
    }
    if (is_vector(d)) {
        jw_array_inline(w);
        for (unsigned i = 0; i < d->n_fields; i++)
            jw_double(w, *(const double *)CFIELD_PTR(m, d->fields[i].offset));
        jw_array_end(w);
        return;
    }
    jw_object(w);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const void *p = CFIELD_PTR(m, f->offset);
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *)CFIELD_PTR(m, f->quantifier_offset) != f->id) continue;
            jw_key(w, f->name);
            write_scalar(w, f, p, flags);
            continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)CFIELD_PTR(m, f->quantifier_offset);
            if (!n) continue; /* an empty list reads back the same when absent */
            jw_key(w, f->name);
            if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING)
                jw_array(w);
            else
                jw_array_inline(w);
            const char *arr = *(const char *const *)p;
            size_t sz = pw_field_elem_size(f->type);
            for (size_t k = 0; k < n; k++)
                write_scalar(w, f, arr + k * sz, flags);
            jw_array_end(w);
            continue;
        }
        if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            if (!*(void *const *)p) continue;
        } else if (!(flags & PBJ_EMIT_DEFAULTS) && f->type != PROTOBUF_C_TYPE_ENUM && scalar_is_zero(f, p)) {
            /* Enums are always written: "type": "dynamic" reads better. */
            continue;
        }
        jw_key(w, f->name);
        write_scalar(w, f, p, flags);
    }
    jw_object_end(w);
}

void pbj_write(jw *w, const ProtobufCMessage *m, int flags) { write_message(w, m, flags); }

/* ------------------------------------------------------------- reading */

static int read_into(ProtobufCMessage *m, const js_value *v, char *err, size_t n);

/* Stores one scalar (or a message pointer) at p from v. */
static int read_scalar(const ProtobufCFieldDescriptor *f, const js_value *v, void *p, char *err, size_t n) {
    char what[64];
    switch (f->type) {
    case PROTOBUF_C_TYPE_MESSAGE: {
        ProtobufCMessage *sub = NULL;
        if (pbj_read(f->descriptor, v, &sub, err, n)) {
            if (sub) protobuf_c_message_free_unpacked(sub, NULL);
            if (err && f->label != PROTOBUF_C_LABEL_REPEATED) {
                /* Name the field (list entries are named by the caller): "radius: expected a number", not the
                 * wrapper's "value: ...". */
                char inner[200];
                const char *rest = err;
                if (is_wrapper(f->descriptor) && strncmp(err, "value: ", 7) == 0) rest = err + 7;
                snprintf(inner, sizeof inner, "%s", rest);
                snprintf(err, n, "%s: %s", f->name, inner);
            }
            return -1;
        }
        ProtobufCMessage **slot = p;
        if (*slot) protobuf_c_message_free_unpacked(*slot, NULL);
        *slot = sub;
        return 0;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (v->type == JS_BOOL) {
            *(protobuf_c_boolean *)p = v->boolean != 0;
            return 0;
        }
        if (v->type == JS_NUMBER && (v->num == 0 || v->num == 1)) {
            *(protobuf_c_boolean *)p = v->num != 0;
            return 0;
        }
        if (v->type == JS_STRING && (!strcmp(v->str, "true") || !strcmp(v->str, "on") || !strcmp(v->str, "yes"))) {
            *(protobuf_c_boolean *)p = 1;
            return 0;
        }
        if (v->type == JS_STRING && (!strcmp(v->str, "false") || !strcmp(v->str, "off") || !strcmp(v->str, "no"))) {
            *(protobuf_c_boolean *)p = 0;
            return 0;
        }
        return errf(err, n, "%s: expected true or false%s", f->name, "");
    case PROTOBUF_C_TYPE_ENUM: {
        int e;
        if (v->type == JS_STRING && pbj_enum_parse(f->descriptor, v->str, &e) == 0) {
            *(int *)p = e;
            return 0;
        }
        if (v->type == JS_NUMBER && v->num == floor(v->num) &&
            protobuf_c_enum_descriptor_get_value(f->descriptor, (int)v->num)) {
            *(int *)p = (int)v->num;
            return 0;
        }
        pbj_describe_field(f, what, sizeof what);
        return errf(err, n, "%s: expected one of %s", f->name, what);
    }
    case PROTOBUF_C_TYPE_STRING: {
        if (v->type != JS_STRING) return errf(err, n, "%s: expected a string%s", f->name, "");
        char *s = malloc(v->len + 1);
        if (!s) return errf(err, n, "%s: out of memory%s", f->name, "");
        memcpy(s, v->str, v->len + 1);
        char **slot = p;
        if (*slot && *slot != (const char *)f->default_value && *slot != protobuf_c_empty_string) free(*slot);
        *slot = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        ProtobufCBinaryData *b = p;
        uint8_t *data = NULL;
        size_t len = 0;
        if (v->type == JS_STRING) {
            len = v->len;
            data = malloc(len ? len : 1);
            if (data) memcpy(data, v->str, len);
        } else if (v->type == JS_ARRAY) {
            len = v->n;
            data = malloc(len ? len : 1);
            for (size_t i = 0; data && i < len; i++) {
                if (v->items[i].type != JS_NUMBER || v->items[i].num < 0 || v->items[i].num > 255) {
                    free(data);
                    return errf(err, n, "%s: expected byte values 0..255%s", f->name, "");
                }
                data[i] = (uint8_t)v->items[i].num;
            }
        } else {
            return errf(err, n, "%s: expected a string or an array of bytes%s", f->name, "");
        }
        if (!data) return errf(err, n, "%s: out of memory%s", f->name, "");
        free(b->data);
        b->data = data;
        b->len = len;
        return 0;
    }
    default:
        break;
    }
    /* Numbers. */
    double x;
    if (v->type == JS_NUMBER) {
        x = v->num;
    } else {
        return errf(err, n, "%s: expected a number%s", f->name, "");
    }
    switch (f->type) {
    case PROTOBUF_C_TYPE_DOUBLE:
        *(double *)p = x;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT:
        *(float *)p = (float)x;
        return 0;
    default:
        break;
    }
    if (x != floor(x)) return errf(err, n, "%s: expected an integer%s", f->name, "");
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        if (x < INT32_MIN || x > INT32_MAX) return errf(err, n, "%s: out of range%s", f->name, "");
        *(int32_t *)p = (int32_t)x;
        return 0;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if (x < 0 || x > UINT32_MAX) return errf(err, n, "%s: out of range%s", f->name, "");
        *(uint32_t *)p = (uint32_t)x;
        return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if (x < -9.2e18 || x > 9.2e18) return errf(err, n, "%s: out of range%s", f->name, "");
        *(int64_t *)p = (int64_t)x;
        return 0;
    default: /* uint64, fixed64: exact when written as an integer */
        if (x < 0) return errf(err, n, "%s: out of range%s", f->name, "");
        *(uint64_t *)p = v->is_uint ? v->u : (uint64_t)x;
        return 0;
    }
}

static void free_repeated(const ProtobufCFieldDescriptor *f, ProtobufCMessage *m) {
    size_t *np = FIELD_PTR(m, f->quantifier_offset);
    void **arr = FIELD_PTR(m, f->offset);
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        for (size_t i = 0; i < *np; i++)
            if (((ProtobufCMessage **)*arr)[i]) protobuf_c_message_free_unpacked(((ProtobufCMessage **)*arr)[i], NULL);
    } else if (f->type == PROTOBUF_C_TYPE_STRING) {
        for (size_t i = 0; i < *np; i++)
            free(((char **)*arr)[i]);
    } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
        for (size_t i = 0; i < *np; i++)
            free(((ProtobufCBinaryData *)*arr)[i].data);
    }
    free(*arr);
    *arr = NULL;
    *np = 0;
}

/* Clears a oneof's current member before another one is set. */
static void clear_oneof(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    uint32_t *cs = FIELD_PTR(m, f->quantifier_offset);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *g = &d->fields[i];
        if (g->quantifier_offset != f->quantifier_offset || !(g->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) continue;
        if (*cs != g->id) continue;
        void *p = FIELD_PTR(m, g->offset);
        if (g->type == PROTOBUF_C_TYPE_MESSAGE && *(ProtobufCMessage **)p) {
            protobuf_c_message_free_unpacked(*(ProtobufCMessage **)p, NULL);
            *(ProtobufCMessage **)p = NULL;
        } else if (g->type == PROTOBUF_C_TYPE_STRING) {
            char **s = p;
            if (*s && *s != (const char *)g->default_value && *s != protobuf_c_empty_string) free(*s);
            *s = NULL;
        }
    }
    *cs = 0;
}

static int assign_field(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, const js_value *v, char *err,
                        size_t n) {
    void *p = FIELD_PTR(m, f->offset);
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        if (v->type != JS_ARRAY) return errf(err, n, "%s: expected an array%s", f->name, "");
        free_repeated(f, m);
        size_t sz = pw_field_elem_size(f->type);
        void *arr = calloc(v->n ? v->n : 1, sz);
        if (!arr) return errf(err, n, "%s: out of memory%s", f->name, "");
        *(void **)p = arr;
        size_t *np = FIELD_PTR(m, f->quantifier_offset);
        for (size_t i = 0; i < v->n; i++) {
            *np = i + 1; /* counted before reading so a failure frees it */
            if (read_scalar(f, &v->items[i], (char *)arr + i * sz, err, n)) {
                char inner[200];
                snprintf(inner, sizeof inner, "%s", err ? err : "");
                if (err) snprintf(err, n, "%s[%zu]: %s", f->name, i, inner);
                return -1;
            }
        }
        return 0;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        clear_oneof(m, f);
        if (read_scalar(f, v, p, err, n)) return -1;
        *(uint32_t *)FIELD_PTR(m, f->quantifier_offset) = f->id;
        return 0;
    }
    return read_scalar(f, v, p, err, n);
}

int pbj_assign(ProtobufCMessage *m, const char *key, const js_value *v, char *err, size_t n) {
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, key);
    if (!f) return unknown_field(m->descriptor, "field", key, err, n);
    if (assign_field(m, f, v, err, n)) {
        if (err && strncmp(err, key, strlen(key)) != 0) {
            char inner[200];
            snprintf(inner, sizeof inner, "%s", err);
            snprintf(err, n, "%s: %s", key, inner);
        }
        return -1;
    }
    return 0;
}

static int read_into(ProtobufCMessage *m, const js_value *v, char *err, size_t n) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (v->type == JS_OBJECT) {
        for (size_t i = 0; i < v->n; i++) {
            const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, v->keys[i]);
            if (!f) return unknown_field(d, "field", v->keys[i], err, n);
            if (assign_field(m, f, &v->items[i], err, n)) return -1;
        }
        return 0;
    }
    if (strcmp(d->name, "physd.v1.BodyRef") == 0 && v->type == JS_NUMBER) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, "new_body_op");
        return assign_field(m, f, v, err, n);
    }
    if (is_wrapper(d)) return assign_field(m, &d->fields[0], v, err, n);
    char fields[160];
    field_list(d, fields, sizeof fields);
    if (v->type == JS_ARRAY) {
        if (v->n != d->n_fields) {
            /* "expected x,y,z (3 values), got 2" */
            if (err) snprintf(err, n, "expected %s (%u values), got %zu", fields, d->n_fields, v->n);
            return -1;
        }
        for (size_t i = 0; i < v->n; i++)
            if (assign_field(m, &d->fields[i], &v->items[i], err, n)) return -1;
        return 0;
    }
    /* Vectors are written x,y,z; other messages also as objects. */
    if (err)
        snprintf(err, n, "expected %s%s, not %s%s", fields, is_vector(d) ? "" : " or an object",
                 v->type == JS_ARRAY || v->type == JS_OBJECT ? "an " : "a ", js_type_name(v->type));
    return -1;
}

int pbj_read(const ProtobufCMessageDescriptor *d, const js_value *v, ProtobufCMessage **out, char *err, size_t n) {
    *out = pbj_new(d);
    if (!*out) return errf(err, n, "%s: out of memory%s", d->short_name, "");
    return read_into(*out, v, err, n);
}

/* Turns command-line text into a JSON value (see pbj_set_text). */
static int text_value(const char *text, js_value *v) {
    if (js_parse(text, strlen(text), v, NULL, 0) == 0) return 0;
    if (strchr(text, ',')) {
        size_t len = strlen(text);
        char *b = malloc(len + 3);
        if (!b) return -1;
        b[0] = '[';
        memcpy(b + 1, text, len);
        b[len + 1] = ']';
        b[len + 2] = 0;
        int r = js_parse(b, len + 2, v, NULL, 0);
        free(b);
        if (r == 0) return 0;
    }
    memset(v, 0, sizeof *v);
    v->type = JS_STRING;
    v->len = strlen(text);
    v->str = malloc(v->len + 1);
    if (!v->str) return -1;
    memcpy(v->str, text, v->len + 1);
    return 0;
}

int pbj_set_text(ProtobufCMessage *m, const char *path, const char *text, char *err, size_t n) {
    char seg[128];
    const char *s = path;
    for (;;) {
        const char *dot = strchr(s, '.');
        size_t len = dot ? (size_t)(dot - s) : strlen(s);
        if (len == 0 || len >= sizeof seg) return errf(err, n, "bad key '%s'%s", path, "");
        memcpy(seg, s, len);
        seg[len] = 0;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, seg);
        if (!f) {
            if (!strcmp(seg, path)) return unknown_field(m->descriptor, "key", path, err, n);
            char hint[256];
            field_hint(m->descriptor, seg, hint, sizeof hint);
            if (err) snprintf(err, n, "unknown key '%s' (no '%s' in %s)%s", path, seg, m->descriptor->short_name, hint);
            return -1;
        }
        if (!dot) {
            js_value v;
            int r0 = 0;
            if (f->type == PROTOBUF_C_TYPE_STRING && f->label != PROTOBUF_C_LABEL_REPEATED) {
                /* A string field takes the text as it is. */
                memset(&v, 0, sizeof v);
                v.type = JS_STRING;
                v.len = strlen(text);
                v.str = malloc(v.len + 1);
                if (v.str)
                    memcpy(v.str, text, v.len + 1);
                else
                    r0 = -1;
            } else {
                r0 = text_value(text, &v);
            }
            if (r0) return errf(err, n, "%s: out of memory%s", path, "");
            int r = assign_field(m, f, &v, err, n);
            js_free(&v);
            return r;
        }
        s = dot + 1;
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) return errf(err, n, "'%s' has no sub-keys (in %s)", seg, path);
        void *p = FIELD_PTR(m, f->offset);
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            /* The next segment is an index; entries up to it are created. */
            char *end;
            unsigned long idx = strtoul(s, &end, 10);
            if (end == s || (*end && *end != '.') || idx > 10000)
                return errf(err, n, "'%s' needs an index (in %s)", seg, path);
            size_t *np = FIELD_PTR(m, f->quantifier_offset);
            ProtobufCMessage ***arr = p;
            if (idx >= *np) {
                ProtobufCMessage **na = realloc(*arr, (idx + 1) * sizeof *na);
                if (!na) return errf(err, n, "%s: out of memory%s", path, "");
                *arr = na;
                while (*np <= idx) {
                    na[*np] = pbj_new(f->descriptor);
                    if (!na[*np]) return errf(err, n, "%s: out of memory%s", path, "");
                    (*np)++;
                }
            }
            m = (*arr)[idx];
            if (!*end) return errf(err, n, "'%s' needs a field after the index", path, "");
            s = end + 1;
            continue;
        }
        ProtobufCMessage **slot = p;
        if (!*slot) {
            if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) clear_oneof(m, f);
            *slot = pbj_new(f->descriptor);
            if (!*slot) return errf(err, n, "%s: out of memory%s", path, "");
            if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) *(uint32_t *)FIELD_PTR(m, f->quantifier_offset) = f->id;
        }
        m = *slot;
    }
}
