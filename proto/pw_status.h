/*
 * pw_status.h — the protocol's status codes (physd.proto's enum Status),
 * written once for the server and the clients: number, name (without the
 * STATUS_ prefix) and a one-line meaning, from one X-macro list as libuv's
 * UV_ERRNO_MAP. The server answers with these codes (server/ps_internal.h
 * names them PS_ST_*); the client library names them with pc_status_name.
 *
 * Invariants: every row is a value of physd.proto's Status with the same
 * number and name (pw_status.c checks each row against the generated enum
 * at compile time; tests/clients/test_client_lib.c checks that every value
 * of the enum has a row).
 */
#ifndef PHYSD_PW_STATUS_H
#define PHYSD_PW_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* name, value, meaning. */
#define PW_STATUS_MAP(XX)                                                                                              \
    XX(OK, 0, "success")                                                                                               \
    XX(CANCELLED, 1, "a step request ended early by reset, pause or destroy_world")                                    \
    XX(INVALID_ARGUMENT, 3, "a value out of its range or not finite, or a malformed frame")                            \
    XX(DEADLINE_EXCEEDED, 4, "no hello within hello_timeout, or a frame not complete within frame_timeout")            \
    XX(NOT_FOUND, 5, "unknown or stale id, or unknown preset")                                                         \
    XX(ALREADY_EXISTS, 6, "a world name in use")                                                                       \
    XX(PERMISSION_DENIED, 7, "the credentials do not allow this request on this world")                                \
    XX(RESOURCE_EXHAUSTED, 8, "a limit of the server (docs/limits.md)")                                                \
    XX(FAILED_PRECONDITION, 9, "not possible in this state (before hello, world running, ...)")                        \
    XX(ABORTED, 10, "aborted")                                                                                         \
    XX(UNIMPLEMENTED, 12, "an empty or unknown request")                                                               \
    XX(INTERNAL, 13, "out of memory, or a bug")                                                                        \
    XX(UNAVAILABLE, 14, "reserved (shutting down)")                                                                    \
    XX(UNAUTHENTICATED, 16, "no valid credential: send hello with a token (docs/security.md)")

enum {
#define PW_STATUS_ENUM(name, value, msg) PW_STATUS_##name = (value),
    PW_STATUS_MAP(PW_STATUS_ENUM)
#undef PW_STATUS_ENUM
};

/* The status's name, such as "NOT_FOUND", or "UNKNOWN_STATUS"; never NULL. */
const char *pw_status_name(int status);
/* The status's one-line meaning, or "unknown status"; never NULL. */
const char *pw_status_message(int status);

#ifdef __cplusplus
}
#endif

#endif /* PHYSD_PW_STATUS_H */
