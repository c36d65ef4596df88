/*
 * access.c — who a connection is and what it may do: its principals, its
 * role on a world, revocation, the cleanup when a world goes, the audit
 * log and the notices to a world's owners (docs/security.md).
 *
 * Normal path: a hello's valid tokens become the connection's principals
 * (copies of the token's id, world and role); create_world adds the new
 * world's owner token to its creator. A request's role on a world is the
 * highest of its principals' (the admin token: every world). With access
 * control off (no admin_token_file, loopback only), a connection after
 * its hello acts as admin, as an unprotected Redis does.
 *
 * Failure modes: revoking a token removes it from every connection at
 * once; subscriptions a connection's remaining principals no longer allow
 * end with NOTICE_ACCESS_REVOKED. A destroyed world's tokens are removed.
 *
 * Invariants: a principal's token is in the server's table; no secret is
 * logged (the audit log names tokens by id).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"

int ps_conn_authenticated(const ps_conn *c) { return c->hello_done && (!c->srv->auth || c->nprinc > 0); }

int ps_conn_role(const ps_conn *c, uint64_t world) {
    if (!c->hello_done) return PS_ROLE_NONE;
    if (!c->srv->auth) return PS_ROLE_ADMIN;
    int best = PS_ROLE_NONE;
    for (int i = 0; i < c->nprinc; i++) {
        const ps_principal *p = &c->princ[i];
        if (p->world_id == 0 && p->role == PS_ROLE_ADMIN) return PS_ROLE_ADMIN;
        if (world != 0 && p->world_id == world && p->role > best) best = p->role;
    }
    return best;
}

int ps_conn_add_principal(ps_conn *c, const ps_token *t) {
    for (int i = 0; i < c->nprinc; i++)
        if (strcmp(c->princ[i].id, t->id) == 0) return 0;
    if (c->nprinc == c->princ_cap) {
        int ncap = c->princ_cap ? 2 * c->princ_cap : 4;
        ps_principal *np = realloc(c->princ, (size_t)ncap * sizeof *np);
        if (!np) return PS_ENOMEM;
        c->princ = np;
        c->princ_cap = ncap;
    }
    ps_principal *p = &c->princ[c->nprinc++];
    memcpy(p->id, t->id, sizeof p->id);
    p->world_id = t->world_id;
    p->role = t->role;
    return 0;
}

void ps_conn_free_principals(ps_conn *c) {
    free(c->princ);
    c->princ = NULL;
    c->nprinc = c->princ_cap = 0;
}

/* world 0: the connection's highest principal, whatever its world. */
const char *ps_conn_principal(const ps_conn *c, uint64_t world, char *buf, size_t n) {
    const ps_principal *best = NULL;
    for (int i = 0; i < c->nprinc; i++) {
        const ps_principal *p = &c->princ[i];
        if (p->world_id == 0 || world == 0 || p->world_id == world)
            if (!best || (p->world_id == 0 ? PS_ROLE_ADMIN : p->role) > best->role) best = p;
    }
    if (!best)
        snprintf(buf, n, "anonymous");
    else if (best->world_id == 0)
        snprintf(buf, n, "admin:%s", best->id);
    else
        snprintf(buf, n, "token:%s", best->id);
    return buf;
}

/* Ends the subscriptions of c that its principals no longer allow. */
static void drop_unallowed_subs(ps_conn *c, const char *token_id, const char *by) {
    ps_sub *sub = c->subs;
    int ended = 0;
    uint64_t world = 0;
    while (sub) {
        ps_sub *next = sub->cnext;
        ps_host *h = sub->host;
        if (ps_conn_role(c, h->id) < PS_ROLE_VIEWER) {
            world = h->id;
            ps_host_unsubscribe(h, c, sub->id);
            ended++;
        }
        sub = next;
    }
    char msg[160];
    snprintf(msg, sizeof msg, "token %s was revoked%s", token_id,
             ended ? "; the subscriptions it allowed have ended" : "");
    ps_send_notice_by(c, PHYSD__V1__NOTICE_KIND__NOTICE_ACCESS_REVOKED, world, 0, msg, by);
}

int ps_access_revoke(ps_server *s, const char *token_id, const char *by) {
    ps_tokens_remove(&s->tokens, token_id);
    int affected = 0;
    for (ps_conn *c = s->conns; c; c = c->next) {
        int hit = 0;
        for (int i = 0; i < c->nprinc; i++)
            if (strcmp(c->princ[i].id, token_id) == 0) {
                c->princ[i] = c->princ[--c->nprinc];
                hit = 1;
                break;
            }
        if (!hit) continue;
        affected++;
        drop_unallowed_subs(c, token_id, by);
    }
    return affected;
}

void ps_access_world_gone(ps_server *s, uint64_t world) {
    ps_tokens_remove_world(&s->tokens, world);
    for (ps_conn *c = s->conns; c; c = c->next)
        for (int i = 0; i < c->nprinc;)
            if (c->princ[i].world_id == world)
                c->princ[i] = c->princ[--c->nprinc];
            else
                i++;
}

void ps_audit(ps_conn *c, uint64_t world, const char *action, int status, const char *detail) {
    char who[64];
    ps_conn_principal(c, world, who, sizeof who);
    ps_log("audit: %s world %llu by %s (conn %llu, %s): %s%s%s", action, (unsigned long long)world, who,
           (unsigned long long)c->id, c->peer, ps_status_name(status), detail && detail[0] ? "; " : "",
           detail ? detail : "");
}

void ps_notify_owners(ps_server *s, ps_conn *actor, uint64_t world, int kind, uint64_t tick, const char *msg) {
    char who[64];
    ps_conn_principal(actor, world, who, sizeof who);
    for (ps_conn *c = s->conns; c; c = c->next) {
        if (c == actor) continue;
        int owner = 0;
        for (int i = 0; i < c->nprinc && !owner; i++)
            owner = c->princ[i].world_id == world && c->princ[i].role == PS_ROLE_OWNER;
        if (owner) ps_send_notice_by(c, kind, world, tick, msg, who);
    }
}
