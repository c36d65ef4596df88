/*
 * pc_compact.h — the client library's compact-stream decoder (internal):
 * per compact subscription its parameters and the states of the frames
 * it decoded recently, any of which the server may name as a baseline.
 */
#ifndef PHYSD_PC_COMPACT_H
#define PHYSD_PC_COMPACT_H

#include "physd/pc_client.h"

typedef struct pc_ctable pc_ctable;

enum {
    PC_CT_UNKNOWN = 1, /* no such compact subscription (unsubscribed): dropped */
    PC_CT_ASK_KEY = 2, /* not decodable (baseline unknown, malformed): ask for a key frame */
    PC_CT_FAILED = 3,  /* not decodable, a key frame is already asked for, or out of memory */
    PC_CT_PARTIAL = 4, /* a part of a frame in parts, kept until the frame is whole */
    PC_CT_BROKEN = 5,  /* a part out of sequence: the frame is dropped (not an error: the server
                          never takes a frame whose parts broke off for a baseline) */
};

/* The client's table (created on first use). */
pc_ctable **pc__ctable(pc_client *c);
/* Decodes f against its subscription's baselines into a new ServerMessage
 * holding the Frame (*out; free with free_unpacked); *ack: the library
 * should acknowledge it (with PC_CT_BROKEN: the parts dropped). 0 or
 * PC_CT_*. */
int pc_ctable_decode(pc_ctable *t, const Physd__V1__CompactFrame *f, Physd__V1__ServerMessage **out, int *ack);
void pc_ctable_free(pc_ctable *t);
/* Fills a Region message from r (its parts in the given messages); 0 when
 * r is NULL or of kind NONE (no region). */
int pc__region_msg(const pc_region *r, Physd__V1__Region *rg, Physd__V1__Vec3 *centre, Physd__V1__Vec3 *half,
                   Physd__V1__DoubleValue *radius);
/* Drops a subscription's baselines (pc_unsubscribe). */
void pc_compact_forget(pc_client *c, uint64_t sub);

#endif /* PHYSD_PC_COMPACT_H */
