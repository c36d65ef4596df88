/*
 * fanout.c — physd-streambench --subscribers N: the leanest reader for
 * issue #18's load target (docs/streams.md, "Measured: 1000 subscribers"):
 * N connections to one running world, each subscribed to all its bodies
 * (compact at the default precision, or raw frames with --raw), read by
 * one thread on one epoll set. Nothing is decoded: each connection's bytes
 * are split into length-delimited messages, and of each push (Frame,
 * ServerMessage field 2, or CompactFrame, field 6) only the tick is read
 * from the first bytes of the message; the rest is skipped in place. So
 * the generator's own CPU per frame is a recv's share and a few dozen
 * instructions, and what it costs the two cores beside physd is on the
 * report (its own user and system seconds a second).
 *
 * Normal path: connect all (blocking, one at a time), send Hello and
 * Subscribe on each, switch to non-blocking, then read for --warmup
 * seconds (not counted) and --seconds (counted). Per subscriber: the
 * ticks it got, the ticks missing between two it got (a tick it never got
 * while later ones came: a frame replaced in the server's queue or a tick
 * the world skipped), the Notices (field 5: the server's drop notices).
 * A frame in parts counts its tick once. One JSON object on stdout.
 *
 * Failure modes: a connection that fails or closes is counted
 * (closed) and not read again; a message whose head cannot be parsed
 * (a varint past 10 bytes) closes that connection and counts it (bad).
 * Exit 3 when the first connection cannot be made.
 *
 * Invariants: the per-connection state is fixed (no allocation per
 * message); a message's head is kept only up to HEAD bytes, enough for
 * the push's field tag, its length and its world_id and tick.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fanout.h"
#include "physd/v1/physd.pb-c.h"

#define HEAD 40

typedef struct sub {
    int fd;
    uint64_t left;   /* bytes of the current message still to come (0: a length prefix next) */
    uint8_t pre[10]; /* the length prefix so far */
    int npre;
    uint8_t head[HEAD]; /* the current message's first bytes */
    int nhead;
    uint64_t last_tick, ticks, missing, notices, pushes, replies;
    int counting, closed;
} sub;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A varint at p[0..n): its value and length, 0 when incomplete or too long. */
static int varint(const uint8_t *p, int n, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < n && i < 10; i++) {
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            return i + 1;
        }
    }
    return 0;
}

/* A whole message's head (or its first HEAD bytes): the push's tick. */
static void message_done(sub *s) {
    uint64_t tag, len, f, v;
    int k = varint(s->head, s->nhead, &tag);
    if (!k) return;
    if ((tag >> 3) == 5) s->notices += s->counting;
    if ((tag >> 3) == 1) s->replies++;
    if ((tag >> 3) != 2 && (tag >> 3) != 6) return;
    int m = varint(s->head + k, s->nhead - k, &len);
    if (!m) return;
    int p = k + m;
    uint64_t tick = 0;
    while (p < s->nhead) {
        int a = varint(s->head + p, s->nhead - p, &f);
        if (!a || (f & 7) != 0) break; /* world_id and tick come first, as varints */
        int b = varint(s->head + p + a, s->nhead - p - a, &v);
        if (!b) break;
        p += a + b;
        if ((f >> 3) == 2) {
            tick = v;
            break;
        }
    }
    if (!tick) return;
    if (s->counting) s->pushes++;
    if (tick == s->last_tick) return; /* another part of the same frame */
    if (s->counting) {
        s->ticks++;
        if (s->last_tick && tick > s->last_tick + 1) s->missing += tick - s->last_tick - 1;
    }
    s->last_tick = tick;
}

/* Splits n bytes of s's stream into messages. -1: a bad prefix. */
static int feed(sub *s, const uint8_t *p, size_t n) {
    while (n > 0) {
        if (s->left == 0) {
            s->pre[s->npre++] = *p++;
            n--;
            uint64_t len;
            if (varint(s->pre, s->npre, &len)) {
                s->npre = 0;
                s->nhead = 0;
                s->left = len;
                if (len == 0) message_done(s);
            } else if (s->npre == 10) {
                return -1;
            }
            continue;
        }
        size_t take = n < s->left ? n : (size_t)s->left;
        if (s->nhead < HEAD) {
            size_t h = (size_t)(HEAD - s->nhead) < take ? (size_t)(HEAD - s->nhead) : take;
            memcpy(s->head + s->nhead, p, h);
            s->nhead += (int)h;
        }
        p += take;
        n -= take;
        s->left -= take;
        if (s->left == 0) message_done(s);
    }
    return 0;
}

static int send_msg(int fd, Physd__V1__ClientMessage *m) {
    uint8_t buf[512];
    size_t len = physd__v1__client_message__get_packed_size(m);
    if (len + 10 > sizeof buf) return -1;
    size_t k = 0;
    uint64_t v = len;
    do {
        buf[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    physd__v1__client_message__pack(m, buf + k);
    return send(fd, buf, k + len, MSG_NOSIGNAL) == (ssize_t)(k + len) ? 0 : -1;
}

static int open_sub(const char *host, int port, uint64_t world, int raw, uint64_t id) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Physd__V1__ClientMessage m = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Hello hello = PHYSD__V1__HELLO__INIT;
    hello.protocol_version = 1;
    hello.client_name = "physd-streambench";
    m.request_id = 1;
    m.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_HELLO;
    m.hello = &hello;
    Physd__V1__ClientMessage s = PHYSD__V1__CLIENT_MESSAGE__INIT;
    Physd__V1__Subscribe sb = PHYSD__V1__SUBSCRIBE__INIT;
    sb.world_id = world;
    sb.kind = PHYSD__V1__STREAM_KIND__STREAM_TRANSFORMS;
    sb.encoding = raw ? PHYSD__V1__TRANSFORM_ENCODING__ENCODING_RAW : PHYSD__V1__TRANSFORM_ENCODING__ENCODING_COMPACT;
    s.request_id = 2 + id;
    s.request_case = PHYSD__V1__CLIENT_MESSAGE__REQUEST_SUBSCRIBE;
    s.subscribe = &sb;
    if (send_msg(fd, &m) || send_msg(fd, &s)) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int fanout_main(int argc, char **argv) {
    const char *host = "127.0.0.1";
    int port = 7878, n = 1000, raw = 0;
    uint64_t world = 1;
    double seconds = 20, warmup = 3;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--raw"))
            raw = 1;
        else if (v && !strcmp(argv[i], "--host"))
            host = argv[++i];
        else if (v && !strcmp(argv[i], "--port"))
            port = atoi(argv[++i]);
        else if (v && !strcmp(argv[i], "--subscribers"))
            n = atoi(argv[++i]);
        else if (v && !strcmp(argv[i], "--world"))
            world = strtoull(argv[++i], NULL, 10);
        else if (v && !strcmp(argv[i], "--seconds"))
            seconds = atof(argv[++i]);
        else if (v && !strcmp(argv[i], "--warmup"))
            warmup = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: physd-streambench --subscribers N [--world W] [--seconds S] [--warmup S] [--raw] "
                            "[--host H] [--port P]\n");
            return 2;
        }
    }
    if (n < 1 || n > 100000 || !(seconds > 0) || !(warmup >= 0) || port <= 0 || port > 65535) return 2;
    sub *subs = calloc((size_t)n, sizeof *subs);
    int ep = epoll_create1(0);
    if (!subs || ep < 0) return 1;
    int open = 0;
    for (int i = 0; i < n; i++) {
        subs[i].fd = open_sub(host, port, world, raw, (uint64_t)i);
        if (subs[i].fd < 0) {
            if (i == 0) {
                fprintf(stderr, "physd-streambench: cannot connect to %s:%d\n", host, port);
                return 3;
            }
            subs[i].closed = 1;
            continue;
        }
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &subs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, subs[i].fd, &e);
        open++;
    }
    static uint8_t buf[1 << 18];
    struct epoll_event ev[256];
    const double t_start = now_s(), t_count = t_start + warmup, t_end = t_count + seconds;
    double cpu0 = 0, t0 = 0;
    uint64_t bytes = 0, bad = 0;
    int counting = 0;
    for (;;) {
        double t = now_s();
        if (!counting && t >= t_count) {
            counting = 1;
            for (int i = 0; i < n; i++)
                subs[i].counting = 1;
            cpu0 = cpu_s();
            t0 = t;
        }
        if (t >= t_end) break;
        int k = epoll_wait(ep, ev, 256, 50);
        for (int j = 0; j < k; j++) {
            sub *s = ev[j].data.ptr;
            for (;;) {
                ssize_t r = recv(s->fd, buf, sizeof buf, 0);
                if (r > 0) {
                    if (counting) bytes += (uint64_t)r;
                    if (feed(s, buf, (size_t)r) < 0) {
                        bad++;
                        r = 0;
                    } else if ((size_t)r < sizeof buf) {
                        break;
                    } else {
                        continue;
                    }
                }
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
                epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
                close(s->fd);
                s->closed = 1;
                open--;
                break;
            }
        }
    }
    const double wall = now_s() - t0, cpu = cpu_s() - cpu0;
    uint64_t ticks = 0, missing = 0, notices = 0, pushes = 0, readers = 0, closed = 0, with_missing = 0;
    uint64_t *per = calloc((size_t)n, sizeof *per);
    for (int i = 0; i < n; i++) {
        closed += subs[i].closed;
        if (subs[i].ticks) per[readers++] = subs[i].ticks;
        ticks += subs[i].ticks;
        missing += subs[i].missing;
        with_missing += subs[i].missing > 0;
        notices += subs[i].notices;
        pushes += subs[i].pushes;
    }
    if (readers) qsort(per, readers, sizeof *per, cmp_u64);
    printf("{\"encoding\": \"%s\", \"subscribers\": %d, \"connected\": %d, \"closed\": %llu, \"bad\": %llu, "
           "\"seconds\": %.3f, \"readers\": %llu, \"ticks_per_s_per_subscriber_min\": %.2f, "
           "\"ticks_per_s_per_subscriber_median\": %.2f, \"missing_ticks\": %llu, \"subscribers_missing\": %llu, "
           "\"notices\": %llu, \"pushes\": %llu, \"mb_per_s\": %.2f, \"cpu_cores\": %.3f}\n",
           raw ? "raw" : "compact", n, open, (unsigned long long)closed, (unsigned long long)bad, wall,
           (unsigned long long)readers, readers ? (double)per[0] / wall : 0.0,
           readers ? (double)per[readers / 2] / wall : 0.0, (unsigned long long)missing,
           (unsigned long long)with_missing, (unsigned long long)notices, (unsigned long long)pushes,
           (double)bytes / wall / 1e6, cpu / wall);
    free(per);
    for (int i = 0; i < n; i++)
        if (!subs[i].closed) close(subs[i].fd);
    free(subs);
    close(ep);
    return 0;
}
