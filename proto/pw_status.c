/*
 * pw_status.c — names and meanings of the protocol's status codes, from
 * PW_STATUS_MAP (pw_status.h); each row checked against the enum that
 * protoc-c generated from physd.proto.
 */
#include "pw_status.h"

#include "physd/v1/physd.pb-c.h"

#define PW_STATUS_CHECK(name, value, msg)                                                                              \
    _Static_assert(PHYSD__V1__STATUS__STATUS_##name == (value), "PW_STATUS_MAP: " #name " differs from physd.proto");
PW_STATUS_MAP(PW_STATUS_CHECK)
#undef PW_STATUS_CHECK

const char *pw_status_name(int status) {
    switch (status) {
#define PW_STATUS_NAME(name, value, msg)                                                                               \
    case value:                                                                                                        \
        return #name;
        PW_STATUS_MAP(PW_STATUS_NAME)
#undef PW_STATUS_NAME
    default:
        return "UNKNOWN_STATUS";
    }
}

const char *pw_status_message(int status) {
    switch (status) {
#define PW_STATUS_MSG(name, value, msg)                                                                                \
    case value:                                                                                                        \
        return msg;
        PW_STATUS_MAP(PW_STATUS_MSG)
#undef PW_STATUS_MSG
    default:
        return "unknown status";
    }
}
