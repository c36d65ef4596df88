/*
 * ps_client.c — the blocking client of ps_client.h.
 *
 * Normal path: connect, then write delimited ClientMessages and read
 * delimited ServerMessages through an internal buffer; poll() bounds every
 * wait.
 *
 * Failure modes: connect/send errors return -1; EOF or a read error sets
 * eof and makes ps_client_recv return NULL; a frame that does not parse
 * returns NULL (and is consumed).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ps_client.h"
#include "pw_frame.h"

int ps_client_connect(ps_client *c, const char *host, int port, int rcvbuf) {
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->next_id = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    c->fd = fd;
    return 0;
}

void ps_client_close(ps_client *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}

int ps_client_send_raw(ps_client *c, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int ps_client_send(ps_client *c, const Physd__V1__ClientMessage *m) {
    uint8_t *b = NULL;
    size_t n = 0;
    if (pw_frame_encode(&m->base, UINT64_MAX, &b, &n) < 0) return -1;
    int r = ps_client_send_raw(c, b, n);
    free(b);
    return r;
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A complete frame at the start of buf: returns its total length (header
 * included) and sets *hl, or 0 when more bytes are needed. */
static size_t frame_ready(const ps_client *c, size_t *hl, uint64_t *len) {
    if (pw_frame_peek(c->buf, c->len, UINT64_MAX, hl, len) < 0 || !*hl) return 0;
    return c->len - *hl >= *len ? (size_t)(*hl + *len) : 0;
}

Physd__V1__ServerMessage *ps_client_recv(ps_client *c, int timeout_ms) {
    uint64_t deadline = now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
    for (;;) {
        size_t hl = 0;
        uint64_t len = 0;
        size_t total = frame_ready(c, &hl, &len);
        if (total) {
            Physd__V1__ServerMessage *m = physd__v1__server_message__unpack(NULL, (size_t)len, c->buf + hl);
            memmove(c->buf, c->buf + total, c->len - total);
            c->len -= total;
            return m;
        }
        if (c->eof) return NULL;
        uint64_t now = now_ms();
        if (now >= deadline) return NULL;
        struct pollfd p = {c->fd, POLLIN, 0};
        int r = poll(&p, 1, (int)(deadline - now));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return NULL;
        if (c->cap - c->len < 65536) {
            size_t ncap = c->cap ? c->cap * 2 : 131072;
            while (ncap - c->len < 65536)
                ncap *= 2;
            uint8_t *nb = realloc(c->buf, ncap);
            if (!nb) return NULL;
            c->buf = nb;
            c->cap = ncap;
        }
        ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            c->eof = 1;
            continue;
        }
        c->len += (size_t)n;
    }
}

Physd__V1__ServerMessage *ps_client_call(ps_client *c, Physd__V1__ClientMessage *m, int timeout_ms) {
    m->request_id = c->next_id++;
    if (ps_client_send(c, m) != 0) return NULL;
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        uint64_t now = now_ms();
        if (now >= deadline) return NULL;
        Physd__V1__ServerMessage *r = ps_client_recv(c, (int)(deadline - now));
        if (!r) {
            if (c->eof) return NULL;
            continue;
        }
        if (r->msg_case == PHYSD__V1__SERVER_MESSAGE__MSG_REPLY &&
            (r->reply->request_id == m->request_id || r->reply->request_id == 0))
            return r;
        c->pushes_skipped++;
        physd__v1__server_message__free_unpacked(r, NULL);
    }
}

int ps_client_hello(ps_client *c, const char *name) {
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Hello h = PHYSD__V1__HELLO__INIT;
    h.protocol_version = 1;
    h.client_name = (char *)name;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_HELLO;
    m.hello = &h;
    Physd__V1__ServerMessage *r = ps_client_call(c, &m, 5000);
    if (!r) return -1;
    int st = (int)r->reply->status;
    physd__v1__server_message__free_unpacked(r, NULL);
    return st;
}
