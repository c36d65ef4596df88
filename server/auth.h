/*
 * auth.h — access control: tokens, the principals of a connection, roles,
 * and the failed-hello record per source address (docs/security.md).
 *
 * A token is "phd_<id>_<secret>": id is 16 hex digits (public: lists,
 * revocations and the audit log name a token by it), secret 64 hex digits
 * (256 bits from getrandom). The server keeps only SHA-256(secret) and
 * compares hashes in constant time (CRYPTO_memcmp). Tokens are high-entropy
 * random strings, not passwords, so one hash round suffices: guessing one
 * means guessing 256 bits.
 *
 * Invariants: a token's secret is never logged and never kept after the
 * reply that returns it; every token in the table belongs to the admin
 * (world 0) or to a live world; a connection's principals name tokens in
 * the table (revocation and world destruction remove them at once).
 */
#ifndef PHYSD_PS_AUTH_H
#define PHYSD_PS_AUTH_H

#include <stddef.h>
#include <stdint.h>

/* Roles, as physd.proto's Role (ordered: each may do what those before may). */
enum { PS_ROLE_NONE = 0, PS_ROLE_VIEWER = 1, PS_ROLE_EDITOR = 2, PS_ROLE_OWNER = 3, PS_ROLE_ADMIN = 4 };

/* What a request needs, besides a role on its world. */
enum {
    PS_NEED_NONE = -2, /* allowed before hello and without a credential (hello, ping) */
    PS_NEED_AUTH = -1, /* any valid principal (list_worlds, list_presets, unsubscribe) */
    /* PS_ROLE_VIEWER .. PS_ROLE_ADMIN: that role on the request's world (ADMIN: on the server) */
};

#define PS_TOKEN_ID_LEN 16
#define PS_TOKEN_SECRET_LEN 64
#define PS_TOKEN_LEN (4 + PS_TOKEN_ID_LEN + 1 + PS_TOKEN_SECRET_LEN) /* "phd_" id "_" secret */
#define PS_MAX_HELLO_TOKENS 16
#define PS_MAX_CREDENTIALS 4096

typedef struct ps_token {
    struct ps_token *next; /* bucket chain */
    char id[PS_TOKEN_ID_LEN + 1];
    uint64_t world_id; /* 0: the admin token */
    int role;
    char label[65];
    uint8_t hash[32];
    uint64_t created_unix;
} ps_token;

#define PS_TOKEN_BUCKETS 4096

typedef struct ps_token_table {
    ps_token *b[PS_TOKEN_BUCKETS];
    size_t n;
} ps_token_table;

/* One principal of a connection: a copy of a token's id, world and role. */
typedef struct ps_principal {
    char id[PS_TOKEN_ID_LEN + 1];
    uint64_t world_id;
    int role;
} ps_principal;

/* Makes a new random token: fills t (id, hash, world, role, label, time)
 * and writes the token's string (PS_TOKEN_LEN chars and a NUL) to out.
 * Returns 0, or -1 when the OS has no randomness to give. */
int ps_token_make(uint64_t world_id, int role, const char *label, ps_token *t, char out[PS_TOKEN_LEN + 1]);
/* Parses a token's string: its id and the hash of its secret. Returns 0,
 * or -1 when s is not a well-formed token. */
int ps_token_parse(const char *s, size_t n, char id[PS_TOKEN_ID_LEN + 1], uint8_t hash[32]);
/* Whether id has a token id's form (PS_TOKEN_ID_LEN lowercase hex digits,
 * what ps_token_make writes and ps_token_parse reads). */
int ps_token_id_ok(const char *id);

void ps_tokens_init(ps_token_table *tt);
void ps_tokens_free(ps_token_table *tt);
/* Adds a copy of t; returns the table's token or NULL (out of memory). */
ps_token *ps_tokens_add(ps_token_table *tt, const ps_token *t);
ps_token *ps_tokens_find(ps_token_table *tt, const char *id);
/* The token whose id and hash match (hash compared in constant time), or NULL. */
ps_token *ps_tokens_check(ps_token_table *tt, const char id[PS_TOKEN_ID_LEN + 1], const uint8_t hash[32]);
void ps_tokens_remove(ps_token_table *tt, const char *id);
/* Calls fn for every token of world (0: the admin's); fn may not change the table. */
void ps_tokens_each(ps_token_table *tt, uint64_t world_id, void (*fn)(const ps_token *t, void *arg), void *arg);
size_t ps_tokens_count_world(ps_token_table *tt, uint64_t world_id);
/* Removes every token of world_id. */
void ps_tokens_remove_world(ps_token_table *tt, uint64_t world_id);

/* The admin token: read from path (a regular file owned by this user,
 * mode without group or other bits), or, when path does not exist,
 * generated and written there with mode 0600 (*created set). Fills t.
 * Returns 0, or -1 with a readable reason in err. */
int ps_admin_token_load(const char *path, ps_token *t, int *created, char *err, size_t errlen);

/* Splits credentials (tokens separated by spaces, commas, tabs or
 * newlines) and checks each against the table. Returns the number of
 * tokens (all valid) with their table entries in out, or -1 with the
 * index of the first bad one in *bad (-2: too many or too long). */
int ps_credentials_check(ps_token_table *tt, const uint8_t *cred, size_t len, ps_token **out, int max, int *bad);

/* Failed hellos per source address, with a back-off (docs/security.md). */
#define PS_AUTHFAIL_SLOTS 1024
typedef struct ps_authfail {
    char addr[48];
    uint32_t fails;      /* within the window */
    uint64_t last_ns;    /* last failure */
    uint64_t next_ok_ns; /* hellos from addr wait until then */
} ps_authfail;

typedef struct ps_authfail_table {
    ps_authfail e[PS_AUTHFAIL_SLOTS];
    uint64_t total_failures;
    uint64_t total_delayed;
} ps_authfail_table;

/* The time (ns) before which a hello from addr must wait (0: none). */
uint64_t ps_authfail_wait_until(ps_authfail_table *t, const char *addr, uint64_t now_ns, double window_s);
/* Records a failure; returns the back-off now in force for addr, s. */
double ps_authfail_record(ps_authfail_table *t, const char *addr, uint64_t now_ns, double window_s, int free_failures,
                          double base_s, double max_s);

/* The role name ("viewer", ...), never NULL. */
const char *ps_role_name(int role);

#endif /* PHYSD_PS_AUTH_H */
