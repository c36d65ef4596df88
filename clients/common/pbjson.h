/*
 * pbjson.h — protobuf-c messages to and from JSON, driven by the generated
 * descriptors, so every message of physd.proto (settings, bodies, shapes,
 * joints, replies, statistics) has one JSON form without hand-written
 * tables, and fields added to the protocol appear by themselves.
 *
 * The JSON form: field names as in the .proto; enums as the lower-case
 * value name without the enum's common prefix ("pgs", "dynamic",
 * "sphere"); wrapper messages (DoubleValue, Int32Value, ...) as their bare
 * value; Vec3 and Quat as arrays [x, y, z] and [x, y, z, w]; any message
 * may also be given as an array of its fields in order (Spook [k, d,
 * hertz]); a oneof member as its own field name; uint64 as integers; bytes
 * as an array of byte values; a BodyRef may be a bare integer, meaning
 * {"new_body_op": n} (the n-th body added by the same batch).
 *
 * Messages built by the readers are allocated with malloc and freed with
 * protobuf_c_message_free_unpacked(m, NULL).
 */
#ifndef PHYSD_CLIENTS_PBJSON_H
#define PHYSD_CLIENTS_PBJSON_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "json.h"

enum {
    PBJ_EMIT_DEFAULTS = 1, /* also write proto3 scalars that are 0, "" or false */
};

/* A new message with its defaults (malloc), or NULL. */
ProtobufCMessage *pbj_new(const ProtobufCMessageDescriptor *d);
/* Writes m as a JSON value. */
void pbj_write(jw *w, const ProtobufCMessage *m, int flags);
/* Builds a new message of type d from v; 0, or -1 with err. */
int pbj_read(const ProtobufCMessageDescriptor *d, const js_value *v, ProtobufCMessage **out, char *err, size_t n);
/* Sets the member key of m from v (replacing what was there). */
int pbj_assign(ProtobufCMessage *m, const char *key, const js_value *v, char *err, size_t n);
/* Sets a dotted path ("contact.hertz", "shapes.0.radius", "gravity") from
 * command-line text: JSON when it parses as JSON, a list when it holds
 * commas ("0,0,-9.81"), else a string ("pgs"). Intermediate messages and
 * repeated entries are created as needed. */
int pbj_set_text(ProtobufCMessage *m, const char *path, const char *text, char *err, size_t n);
/* The JSON name of an enum value ("pgs"), or NULL for an unknown value. */
const char *pbj_enum_name(const ProtobufCEnumDescriptor *d, int value, char *buf, size_t n);
/* Parses an enum from its JSON name, full name or number; 0 or -1. */
int pbj_enum_parse(const ProtobufCEnumDescriptor *d, const char *text, int *value);
/* A one-line description of a field's JSON type, such as "number",
 * "[x, y, z]" or "pgs | pgs_sm | ..." (for --help). */
void pbj_describe_field(const ProtobufCFieldDescriptor *f, char *buf, size_t n);

#endif
