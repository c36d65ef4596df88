/*
 * auth.c — tokens, the token table, the admin token file, credentials, and
 * the failed-hello back-off per source address (auth.h, docs/security.md).
 *
 * Normal path: ps_token_make draws an id and a secret from getrandom and
 * keeps SHA-256 of the secret (OpenSSL's libcrypto); ps_credentials_check
 * splits a hello's credentials, parses each token, finds its entry by id
 * and compares the hashes with CRYPTO_memcmp.
 *
 * Failure modes: a malformed, unknown or revoked token makes the whole
 * credentials check fail (the caller answers UNAUTHENTICATED); an admin
 * token file with group or other permission bits, owned by another user,
 * not a regular file or not holding one token refuses the start.
 *
 * Invariants: the secret part of a token is never stored or logged; a
 * table entry is found by its id only (ids are public), and its hash is
 * compared in constant time.
 */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char HEX[] = "0123456789abcdef";

static int fill_random(uint8_t *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(p + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

static void hex(char *out, const uint8_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = HEX[in[i] >> 4];
        out[2 * i + 1] = HEX[in[i] & 15];
    }
    out[2 * n] = 0;
}

static int is_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

int ps_token_id_ok(const char *id) { return id && strlen(id) == PS_TOKEN_ID_LEN && is_hex(id, PS_TOKEN_ID_LEN); }

static int sha256(const char *in, size_t n, uint8_t out[32]) {
    unsigned len = 0;
    return EVP_Digest(in, n, out, &len, EVP_sha256(), NULL) == 1 && len == 32 ? 0 : -1;
}

int ps_token_make(uint64_t world_id, int role, const char *label, ps_token *t, char out[PS_TOKEN_LEN + 1]) {
    uint8_t rnd[PS_TOKEN_ID_LEN / 2 + PS_TOKEN_SECRET_LEN / 2];
    memset(t, 0, sizeof *t);
    if (fill_random(rnd, sizeof rnd)) return -1;
    hex(t->id, rnd, PS_TOKEN_ID_LEN / 2);
    char secret[PS_TOKEN_SECRET_LEN + 1];
    hex(secret, rnd + PS_TOKEN_ID_LEN / 2, PS_TOKEN_SECRET_LEN / 2);
    int r = sha256(secret, PS_TOKEN_SECRET_LEN, t->hash);
    snprintf(out, PS_TOKEN_LEN + 1, "phd_%s_%s", t->id, secret);
    OPENSSL_cleanse(secret, sizeof secret);
    OPENSSL_cleanse(rnd, sizeof rnd);
    if (r) return -1;
    t->world_id = world_id;
    t->role = role;
    snprintf(t->label, sizeof t->label, "%s", label ? label : "");
    t->created_unix = (uint64_t)time(NULL);
    return 0;
}

int ps_token_parse(const char *s, size_t n, char id[PS_TOKEN_ID_LEN + 1], uint8_t hash[32]) {
    if (n != PS_TOKEN_LEN || memcmp(s, "phd_", 4) != 0 || s[4 + PS_TOKEN_ID_LEN] != '_') return -1;
    const char *pid = s + 4, *psec = s + 5 + PS_TOKEN_ID_LEN;
    if (!is_hex(pid, PS_TOKEN_ID_LEN) || !is_hex(psec, PS_TOKEN_SECRET_LEN)) return -1;
    memcpy(id, pid, PS_TOKEN_ID_LEN);
    id[PS_TOKEN_ID_LEN] = 0;
    return sha256(psec, PS_TOKEN_SECRET_LEN, hash);
}

/* ------------------------------------------------------------- the table */

static size_t bucket(const char *id) {
    /* ids are random hex: their first three digits are uniform */
    size_t h = 0;
    for (int i = 0; i < 3 && id[i]; i++)
        h = h * 16 + (size_t)(id[i] <= '9' ? id[i] - '0' : id[i] - 'a' + 10);
    return h % PS_TOKEN_BUCKETS;
}

void ps_tokens_init(ps_token_table *tt) { memset(tt, 0, sizeof *tt); }

void ps_tokens_free(ps_token_table *tt) {
    for (size_t i = 0; i < PS_TOKEN_BUCKETS; i++) {
        ps_token *t = tt->b[i];
        while (t) {
            ps_token *n = t->next;
            OPENSSL_cleanse(t, sizeof *t);
            free(t);
            t = n;
        }
        tt->b[i] = NULL;
    }
    tt->n = 0;
}

ps_token *ps_tokens_add(ps_token_table *tt, const ps_token *t) {
    ps_token *c = malloc(sizeof *c);
    if (!c) return NULL;
    *c = *t;
    size_t k = bucket(c->id);
    c->next = tt->b[k];
    tt->b[k] = c;
    tt->n++;
    return c;
}

ps_token *ps_tokens_find(ps_token_table *tt, const char *id) {
    for (ps_token *t = tt->b[bucket(id)]; t; t = t->next)
        if (strcmp(t->id, id) == 0) return t;
    return NULL;
}

ps_token *ps_tokens_check(ps_token_table *tt, const char id[PS_TOKEN_ID_LEN + 1], const uint8_t hash[32]) {
    ps_token *t = ps_tokens_find(tt, id);
    if (!t || CRYPTO_memcmp(t->hash, hash, 32) != 0) return NULL;
    return t;
}

void ps_tokens_remove(ps_token_table *tt, const char *id) {
    for (ps_token **pp = &tt->b[bucket(id)]; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->id, id) == 0) {
            ps_token *t = *pp;
            *pp = t->next;
            OPENSSL_cleanse(t, sizeof *t);
            free(t);
            tt->n--;
            return;
        }
}

void ps_tokens_each(ps_token_table *tt, uint64_t world_id, void (*fn)(const ps_token *t, void *arg), void *arg) {
    for (size_t i = 0; i < PS_TOKEN_BUCKETS; i++)
        for (ps_token *t = tt->b[i]; t; t = t->next)
            if (t->world_id == world_id) fn(t, arg);
}

size_t ps_tokens_count_world(ps_token_table *tt, uint64_t world_id) {
    size_t n = 0;
    for (size_t i = 0; i < PS_TOKEN_BUCKETS; i++)
        for (ps_token *t = tt->b[i]; t; t = t->next)
            n += t->world_id == world_id;
    return n;
}

void ps_tokens_remove_world(ps_token_table *tt, uint64_t world_id) {
    if (world_id == 0) return;
    for (size_t i = 0; i < PS_TOKEN_BUCKETS; i++) {
        ps_token **pp = &tt->b[i];
        while (*pp) {
            if ((*pp)->world_id == world_id) {
                ps_token *t = *pp;
                *pp = t->next;
                OPENSSL_cleanse(t, sizeof *t);
                free(t);
                tt->n--;
            } else {
                pp = &(*pp)->next;
            }
        }
    }
}

/* ------------------------------------------------------- the admin token */

int ps_admin_token_load(const char *path, ps_token *t, int *created, char *err, size_t errlen) {
    *created = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        char tok[PS_TOKEN_LEN + 2];
        if (ps_token_make(0, PS_ROLE_ADMIN, "admin", t, tok)) {
            snprintf(err, errlen, "no randomness from the OS for the admin token");
            return -1;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            snprintf(err, errlen, "cannot create the admin token file %s: %s", path, strerror(errno));
            OPENSSL_cleanse(tok, sizeof tok);
            return -1;
        }
        size_t n = strlen(tok);
        tok[n++] = '\n';
        ssize_t w = write(fd, tok, n);
        OPENSSL_cleanse(tok, sizeof tok);
        if (w != (ssize_t)n || fsync(fd) != 0) {
            snprintf(err, errlen, "cannot write the admin token file %s: %s", path, strerror(errno));
            close(fd);
            unlink(path);
            return -1;
        }
        close(fd);
        *created = 1;
        return 0;
    }
    if (fd < 0) {
        snprintf(err, errlen, "cannot open the admin token file %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "the admin token file %s is not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(err, errlen, "the admin token file %s is owned by uid %u, not by physd's user (uid %u)", path,
                 (unsigned)st.st_uid, (unsigned)geteuid());
        close(fd);
        return -1;
    }
    if (st.st_mode & 077) {
        snprintf(err, errlen, "the admin token file %s is readable by others (mode %03o): chmod 600 %s", path,
                 (unsigned)(st.st_mode & 0777), path);
        close(fd);
        return -1;
    }
    char buf[PS_TOKEN_LEN + 8];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    size_t len = n > 0 ? (size_t)n : 0;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        len--;
    memset(t, 0, sizeof *t);
    if (ps_token_parse(buf, len, t->id, t->hash)) {
        OPENSSL_cleanse(buf, sizeof buf);
        snprintf(err, errlen,
                 "the admin token file %s does not hold one token (phd_<16 hex>_<64 hex>); delete it to have physd "
                 "generate one",
                 path);
        return -1;
    }
    OPENSSL_cleanse(buf, sizeof buf);
    t->world_id = 0;
    t->role = PS_ROLE_ADMIN;
    snprintf(t->label, sizeof t->label, "admin");
    t->created_unix = (uint64_t)st.st_mtime;
    return 0;
}

/* ---------------------------------------------------------- credentials */

static int is_sep(uint8_t ch) { return ch == ' ' || ch == ',' || ch == '\t' || ch == '\n' || ch == '\r'; }

int ps_credentials_check(ps_token_table *tt, const uint8_t *cred, size_t len, ps_token **out, int max, int *bad) {
    *bad = -1;
    if (len > PS_MAX_CREDENTIALS) {
        *bad = -2;
        return -1;
    }
    int n = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && is_sep(cred[i]))
            i++;
        if (i >= len) break;
        size_t j = i;
        while (j < len && !is_sep(cred[j]))
            j++;
        if (n >= max || n >= PS_MAX_HELLO_TOKENS) {
            *bad = -2;
            return -1;
        }
        char id[PS_TOKEN_ID_LEN + 1];
        uint8_t hash[32];
        ps_token *t = NULL;
        if (ps_token_parse((const char *)cred + i, j - i, id, hash) == 0) t = ps_tokens_check(tt, id, hash);
        OPENSSL_cleanse(hash, sizeof hash);
        if (!t) {
            *bad = n;
            return -1;
        }
        out[n++] = t;
        i = j;
    }
    return n;
}

/* ------------------------------------------------------- failed hellos */

static ps_authfail *af_find(ps_authfail_table *t, const char *addr, int create, uint64_t now_ns) {
    ps_authfail *oldest = NULL;
    for (int i = 0; i < PS_AUTHFAIL_SLOTS; i++) {
        ps_authfail *e = &t->e[i];
        if (e->addr[0] && strcmp(e->addr, addr) == 0) return e;
        if (!oldest || !e->addr[0] || (oldest->addr[0] && e->last_ns < oldest->last_ns)) oldest = e;
    }
    if (!create) return NULL;
    /* Full: the record idle longest makes room (an attacker with many
     * addresses can only forget old records, never lengthen a wait). */
    memset(oldest, 0, sizeof *oldest);
    snprintf(oldest->addr, sizeof oldest->addr, "%s", addr);
    oldest->last_ns = now_ns;
    return oldest;
}

uint64_t ps_authfail_wait_until(ps_authfail_table *t, const char *addr, uint64_t now_ns, double window_s) {
    ps_authfail *e = af_find(t, addr, 0, now_ns);
    if (!e) return 0;
    if ((double)(now_ns - e->last_ns) > window_s * 1e9 && now_ns >= e->next_ok_ns) {
        memset(e, 0, sizeof *e); /* quiet for a window: forgotten */
        return 0;
    }
    return e->next_ok_ns > now_ns ? e->next_ok_ns : 0;
}

double ps_authfail_record(ps_authfail_table *t, const char *addr, uint64_t now_ns, double window_s, int free_failures,
                          double base_s, double max_s) {
    ps_authfail *e = af_find(t, addr, 1, now_ns);
    if ((double)(now_ns - e->last_ns) > window_s * 1e9) e->fails = 0;
    if (e->fails < UINT32_MAX) e->fails++;
    e->last_ns = now_ns;
    t->total_failures++;
    if ((int)e->fails <= free_failures) return 0;
    double d = base_s;
    for (uint32_t k = (uint32_t)free_failures + 1; k < e->fails && d < max_s; k++)
        d *= 2;
    if (d > max_s) d = max_s;
    e->next_ok_ns = now_ns + (uint64_t)(d * 1e9);
    return d;
}

const char *ps_role_name(int role) {
    switch (role) {
    case PS_ROLE_VIEWER:
        return "viewer";
    case PS_ROLE_EDITOR:
        return "editor";
    case PS_ROLE_OWNER:
        return "owner";
    case PS_ROLE_ADMIN:
        return "admin";
    default:
        return "none";
    }
}
