/*
 * rx_stamp.c — socket reads with the kernel's receive stamp (rx_stamp.h).
 */
#include "rx_stamp.h"

#include <string.h>
#include <sys/socket.h>
#include <time.h>

#ifndef SCM_TIMESTAMPNS
#define SCM_TIMESTAMPNS SO_TIMESTAMPNS
#endif

int rx_stamp_enable(int fd) {
    const int one = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
}

ssize_t rx_stamp_recv(int fd, void *buf, size_t n, int64_t *real_ns) {
    struct iovec iov = {buf, n};
    union {
        char b[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } ctl;
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.b;
    m.msg_controllen = sizeof ctl.b;
    const ssize_t r = recvmsg(fd, &m, 0);
    if (r > 0)
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(c), sizeof ts);
                *real_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
            }
    return r;
}
