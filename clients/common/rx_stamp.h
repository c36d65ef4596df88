/*
 * rx_stamp.h — reads from a socket with the kernel's receive stamp
 * (SO_TIMESTAMPNS), for the tools and tests that measure when bytes
 * arrived as opposed to when the process read them (physd-latency,
 * test_itest_edit_first; docs/streams.md, "The decomposition").
 *
 * Normal path: rx_stamp_enable turns the stamps on for a socket;
 * rx_stamp_recv is one recvmsg that also returns the stamp (CLOCK_REALTIME
 * ns) of the last segment the bytes came from.
 *
 * Failure modes: as setsockopt and recvmsg (-1 with errno); a read that
 * carried no stamp leaves *real_ns unchanged.
 *
 * Invariants: none kept; no state.
 */
#ifndef PHYSD_RX_STAMP_H
#define PHYSD_RX_STAMP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* 0, or -1 with errno. */
int rx_stamp_enable(int fd);
/* recvmsg(fd) of up to n bytes into buf; *real_ns: the stamp when one came
 * with them. Returns what recvmsg returns. */
ssize_t rx_stamp_recv(int fd, void *buf, size_t n, int64_t *real_ns);

#endif /* PHYSD_RX_STAMP_H */
