/*
 * status.c — the names and messages of the server's own error codes, from
 * PS_ERRNO_MAP (ps_internal.h). The protocol's status codes and their
 * names are shared with the clients (proto/pw_status.h).
 */
#include <uv.h>

#include "ps_internal.h"

const char *ps_strerror(int err) {
    switch (err) {
#define PS_ERR_MSG(name, value, msg)                                                                                   \
    case value:                                                                                                        \
        return msg;
        PS_ERRNO_MAP(PS_ERR_MSG)
#undef PS_ERR_MSG
    case 0:
        return "ok";
    default:
        return err < 0 ? uv_strerror(err) : "unknown error";
    }
}

const char *ps_err_name(int err) {
    switch (err) {
#define PS_ERR_NAME(name, value, msg)                                                                                  \
    case value:                                                                                                        \
        return "PS_E" #name;
        PS_ERRNO_MAP(PS_ERR_NAME)
#undef PS_ERR_NAME
    case 0:
        return "OK";
    default:
        return err < 0 ? uv_err_name(err) : "UNKNOWN";
    }
}

const char *ps_server_strerror(int err) { return ps_strerror(err); }
