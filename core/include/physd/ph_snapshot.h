/*
 * ph_snapshot.h — exact snapshots of a world (docs/durability.md).
 *
 * A snapshot is a versioned, checksummed byte string holding everything
 * the next step of a world reads: its settings (every row of the settings
 * table), step count and random generator, every body, shape and joint
 * slot with its generation and the pools' free lists (so the ids handed
 * out after a restore are the ones the original would hand out), pending
 * forces, sleep state, the joints' warm-start impulses, the contact
 * manifolds of the last step (warm starting, the contact cache) and the
 * broadphase's persistent order and pair cache. A world restored from it
 * and stepped N times has, bit for bit, the state of the original stepped N
 * times, and its own snapshot is byte for byte the original's.
 *
 * The bytes are little-endian, written field by field (no struct is
 * copied, so no padding or pointer leaks and the format does not depend on
 * the compiler), doubles as their IEEE-754 bit patterns. The checksum
 * (64-bit, XXH64) detects accidental damage; it is not a MAC and does not
 * authenticate the data.
 */
#ifndef PHYSD_PH_SNAPSHOT_H
#define PHYSD_PH_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "ph_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The format version this core writes and the only one it reads. */
#define PH_SNAPSHOT_VERSION 1

/* Writes a snapshot of w into a new buffer (allocated by the core: free it
 * with ph_snapshot_free) and its length into *len. Returns 0,
 * PH_ERR_INVALID_HANDLE, PH_ERR_INVALID_ARGUMENT (out or len NULL) or
 * PH_ERR_NO_MEMORY; on error *out = NULL and *len = 0 (when not NULL).
 * The world is not changed (reading its last step's statistics is not
 * part of it). */
int ph_world_snapshot(ph_world_id w, uint8_t **out, size_t *len);
/* Frees a buffer of ph_world_snapshot (NULL is fine). */
void ph_snapshot_free(uint8_t *data);

/* Limits of a restored world (the snapshot's own when NULL is passed). */
typedef struct ph_snapshot_limits {
    int max_bodies; /* [1, PH_MAX_BODIES] */
    int max_joints; /* [0, PH_MAX_BODIES] */
} ph_snapshot_limits;

/* Creates a new world from a snapshot; *out is its id. Everything is
 * checked before it is trusted: the magic (PH_ERR_NOT_SNAPSHOT), the
 * version, byte order and double format (PH_ERR_SNAPSHOT_VERSION), the
 * length (PH_ERR_SNAPSHOT_TRUNCATED when data holds fewer bytes than the
 * snapshot says, PH_ERR_SNAPSHOT_INVALID when more), the checksum
 * (PH_ERR_SNAPSHOT_CORRUPT), then every section, count, index, generation,
 * free list and number (PH_ERR_SNAPSHOT_INVALID). limits: NULL keeps the
 * snapshot's limits; else the new world's limits, which its bodies and
 * joints must fit (PH_ERR_LIMIT). Also PH_ERR_INVALID_ARGUMENT (data or
 * out NULL, bad limits), PH_ERR_NO_MEMORY and PH_ERR_LIMIT (no world
 * slot). On error *out is the null id and nothing is left allocated. The
 * restored world's statistics, contact events and fault record start
 * empty, as a new world's. */
int ph_world_restore(const uint8_t *data, size_t len, const ph_snapshot_limits *limits, ph_world_id *out);

/* What a snapshot's header says, after the same checks of the header,
 * length and checksum as ph_world_restore (the sections are not parsed). */
typedef struct ph_snapshot_info {
    uint32_t version;
    uint64_t bytes;                             /* total length */
    uint64_t step;                              /* the world's step count */
    uint32_t bodies, shapes, joints, manifolds; /* live ones; the last step's manifolds */
    uint32_t sections;
} ph_snapshot_info;

int ph_snapshot_info_get(const uint8_t *data, size_t len, ph_snapshot_info *out);

#ifdef __cplusplus
}
#endif

#endif /* PHYSD_PH_SNAPSHOT_H */
