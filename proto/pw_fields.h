/*
 * pw_fields.h — facts about protobuf-c's in-memory layout of messages that
 * more than one descriptor walker needs (the server's decode pre-scan,
 * server/decode.c, and the clients' JSON mapping, clients/common/pbjson.c).
 */
#ifndef PHYSD_PW_FIELDS_H
#define PHYSD_PW_FIELDS_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/* Bytes protobuf-c stores for one element of a repeated field of type t
 * (the stride of its array): 8 for 64-bit scalars and doubles, a pointer
 * for strings and messages, a ProtobufCBinaryData for bytes, 4 otherwise
 * (32-bit scalars, floats, enums, protobuf_c_boolean). */
static inline size_t pw_field_elem_size(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    default:
        return 4;
    }
}

#endif /* PHYSD_PW_FIELDS_H */
