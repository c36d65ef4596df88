/*
 * fuzz_snapshot.c — the snapshot target (docs/fuzzing.md, "The snapshot
 * target"): arbitrary bytes given to ph_world_restore, the decoder behind
 * RestoreWorld (an admin's snapshot bytes) and a server's restart from its
 * journal. It implements fuzz_harness.h, so fuzz_replay links with it as
 * fuzz_snapshot_replay, and libFuzzer's build is physd_fuzz_snapshot.
 *
 * A snapshot ends in an XXH64 checksum of everything before it and says
 * its own length in its header, so almost every mutation of a valid one is
 * refused before a section is read. The "mode" of an input (fuzz_harness.h
 * names them chunk modes; here they are the fix-ups) is therefore:
 *   0  the bytes as they are (the header's and the checksum's refusals);
 *   1  the length field and the checksum made to match the bytes, so the
 *      sections' checks are what stands, the snapshot's own limits;
 *   2  the same with small limits (max_bodies 64, max_joints 16:
 *      PH_ERR_LIMIT);
 *   3  the same as 1, and the restored world stepped four times (when its
 *      settings ask for at most 640 sweeps a step).
 * PF_CHUNK_AUTO picks 0 for one input in eight, else 1..3, by a hash.
 *
 * Invariants (a failure aborts with "physd fuzz: invariant violated"):
 * - ph_world_restore returns PH_OK or one of PH_ERR_NOT_SNAPSHOT,
 *   PH_ERR_SNAPSHOT_VERSION, _TRUNCATED, _CORRUPT, _INVALID, PH_ERR_LIMIT,
 *   PH_ERR_NO_MEMORY, and on an error its id is the null id and no
 *   registry slot has been taken;
 * - ph_snapshot_info_get agrees with it about the header: a header it
 *   refuses is refused by the restore with the same code, and an accepted
 *   snapshot's header is accepted, with the restored world's body and
 *   joint counts;
 * - a restored world's own snapshot restores into a world whose snapshot
 *   is the same bytes again: a fixed point. For a snapshot the core wrote
 *   it is the input itself (the format's promise, test_snapshot); a crafted
 *   one may carry derived values that the restore makes again (a plane's
 *   box of +-1e300, say), and is then spelled the world's way ("respelled"
 *   in the counts);
 * - stepped (mode 3), the world steps, or its step is refused with
 *   PH_ERR_NONFINITE (a body pushed out of the envelope) and the world's
 *   state hash is what it was before the step; it is destroyed with
 *   nothing left.
 * Besides these, ASan, UBSan and LeakSanitizer watch every input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_harness.h"
#include "physd/ph_core.h"
#include "physd/ph_snapshot.h"
/* (the registry, where a refused restore must leave nothing; world.h
 * through it: the checksum, ph__xxh64, that makes a mutated snapshot's
 * trailer match) */
#include "fuzz_registry.h"

#define SNAP_LENGTH_AT 24 /* the header's u64 total length (snapshot.c, check_header) */
#define SNAP_HEADER 64
#define SNAP_TRAILER 8
#define SNAP_MAX (1u << 22) /* larger inputs are not fixed up (libFuzzer's -max_len is far below) */

static struct {
    unsigned long long inputs, fixed, restored, normalized, nonfinite, refused[5], limit, stepped, steps;
} st;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

/* (No server, no event loop: nothing settles and nothing is left to shut
 * down; each input destroys the worlds it made. fuzz_replay calls these.) */
void physd_fuzz_set_settle_ms(double ms) { (void)ms; }
void physd_fuzz_shutdown(void) {}

void physd_fuzz_print_stats(FILE *f) {
    fprintf(f,
            "%llu inputs, %llu fixed up, %llu restored (%llu respelled, %llu stepped, %llu steps, %llu steps refused "
            "as non-finite), refused: %llu not a snapshot, "
            "%llu version, %llu truncated, %llu corrupt, %llu invalid, %llu limit",
            st.inputs, st.fixed, st.restored, st.normalized, st.stepped, st.steps, st.nonfinite, st.refused[0],
            st.refused[1], st.refused[2], st.refused[3], st.refused[4], st.limit);
}

static int refusal_index(int e) {
    switch (e) {
    case PH_ERR_NOT_SNAPSHOT:
        return 0;
    case PH_ERR_SNAPSHOT_VERSION:
        return 1;
    case PH_ERR_SNAPSHOT_TRUNCATED:
        return 2;
    case PH_ERR_SNAPSHOT_CORRUPT:
        return 3;
    case PH_ERR_SNAPSHOT_INVALID:
        return 4;
    default:
        return -1;
    }
}

/* The restored world's own snapshot, and that snapshot restored: the same
 * bytes again (a fixed point). Against the input (data, NULL: restored
 * with other limits, which its snapshot records), counted when they differ
 * (a derived value, say a plane's box, that the restore makes again). */
static void check_round_trip(ph_world_id w, const uint8_t *data, size_t size, int depth) {
    uint8_t *again = NULL;
    size_t alen = 0;
    int e = ph_world_snapshot(w, &again, &alen);
    if (e == PH_ERR_NO_MEMORY) return;
    if (e != PH_OK) physd_fuzz_fail("ph_world_snapshot of a restored world: %s", ph_err_name(e));
    if (data && (alen != size || memcmp(again, data, size) != 0)) {
        if (depth > 0) {
            size_t at = 0;
            while (at < size && at < alen && again[at] == data[at])
                at++;
            physd_fuzz_fail(
                "a restored snapshot's world gives another snapshot (%zu bytes against %zu, first at byte %zu)", alen,
                size, at);
        }
        st.normalized++;
    }
    if (depth == 0) {
        ph_world_id w2;
        e = ph_world_restore(again, alen, NULL, &w2);
        if (e == PH_OK) {
            check_round_trip(w2, again, alen, 1);
            ph_world_destroy(w2);
        } else if (e != PH_ERR_NO_MEMORY && e != PH_ERR_LIMIT) {
            physd_fuzz_fail("a restored world's own snapshot is refused: %s", ph_err_name(e));
        }
    }
    ph_snapshot_free(again);
}

int physd_fuzz_run(const uint8_t *in, size_t size, int mode, int verbose) {
    st.inputs++;
    if (mode < 0 || mode >= PF_CHUNK_MODES) {
        const uint64_t h = physd_fuzz_hash(in, size);
        mode = (h & 7) == 0 ? 0 : 1 + (int)((h >> 3) % 3);
    }
    uint8_t *data = malloc(size ? size : 1);
    if (!data) abort();
    memcpy(data, in, size);
    if (mode > 0 && size >= SNAP_HEADER + SNAP_TRAILER && size <= SNAP_MAX) {
        const uint64_t n = size;
        for (int k = 0; k < 8; k++)
            data[SNAP_LENGTH_AT + k] = (uint8_t)(n >> (8 * k));
        const uint64_t c = ph__xxh64(data, size - SNAP_TRAILER);
        for (int k = 0; k < 8; k++)
            data[size - SNAP_TRAILER + k] = (uint8_t)(c >> (8 * k));
        st.fixed++;
    }
    const ph_snapshot_limits small = {64, 16};
    fuzz_take_slots();
    ph_world_id w = {0, 0};
    const int e = ph_world_restore(data, size, mode == 2 ? &small : NULL, &w);
    ph_snapshot_info info;
    const int ei = ph_snapshot_info_get(data, size, &info);
    if (verbose) fprintf(stderr, "snapshot fuzz: %zu bytes, mode %d: %s\n", size, mode, ph_err_name(e));
    if (e != PH_OK) {
        const int r = refusal_index(e);
        if (r >= 0)
            st.refused[r]++;
        else if (e == PH_ERR_LIMIT)
            st.limit++;
        else if (e != PH_ERR_NO_MEMORY)
            physd_fuzz_fail("ph_world_restore returned %s", ph_err_name(e));
        if (w.index1 != 0) physd_fuzz_fail("a refused restore gave a world id");
        if (fuzz_new_slot() >= 0)
            physd_fuzz_fail("a refused restore left a world in registry slot %d", fuzz_new_slot());
        /* The restore checks the header first: a header refused is the
         * restore's refusal too. */
        if (ei != PH_OK && ei != e)
            physd_fuzz_fail("ph_snapshot_info_get says %s, the restore %s", ph_err_name(ei), ph_err_name(e));
        free(data);
        return 0;
    }
    st.restored++;
    if (ei != PH_OK)
        physd_fuzz_fail("a restored snapshot's header is refused by ph_snapshot_info_get: %s", ph_err_name(ei));
    if ((int)info.bodies != ph_world_body_count(w) || (int)info.joints != ph_world_joint_count(w))
        physd_fuzz_fail("the header says %u bodies and %u joints, the world has %d and %d", info.bodies, info.joints,
                        ph_world_body_count(w), ph_world_joint_count(w));
    check_round_trip(w, mode == 2 ? NULL : data, size, 0);
    ph_settings set;
    /* (stepped when its budget is at most 640 sweeps a step: a snapshot may
     * ask for 64 x 10 000, seconds a step, which would read as a hang) */
    if (mode == 3 && ph_world_get_settings(w, &set) == PH_OK && (long)set.substeps * set.iterations <= 640) {
        st.stepped++;
        for (int k = 0; k < 4; k++) {
            const uint64_t h0 = ph_world_state_hash(w);
            const int s = ph_world_step(w);
            if (s == PH_ERR_NONFINITE) {
                /* (a body pushed out of the envelope, say by a pending
                 * force: the step is refused and undone, ph_world_step) */
                if (ph_world_state_hash(w) != h0)
                    physd_fuzz_fail("a refused step (%s) changed the world", ph_err_name(s));
                st.nonfinite++;
                break;
            }
            if (s == PH_ERR_NO_MEMORY) break;
            if (s != PH_OK) physd_fuzz_fail("a restored world's step %d: %s", k, ph_err_name(s));
            st.steps++;
        }
    }
    if (ph_world_destroy(w) != PH_OK) physd_fuzz_fail("a restored world could not be destroyed");
    if (ph_world_is_valid(w)) physd_fuzz_fail("a destroyed world's id is still valid");
    free(data);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    physd_fuzz_run(data, size, PF_CHUNK_AUTO, 0);
    return 0;
}
