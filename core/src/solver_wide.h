/*
 * solver_wide.h — the wide contact solver's data and entry points (solver_wide.c): the
 * contact rows of PH_LANES points side by side in batches, point mode's
 * blocks and groups, and the passes over them.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_SOLVER_WIDE_H
#define PHYSD_SOLVER_WIDE_H

#include "solver.h"

typedef struct ph__world ph__world;

/* The contact rows of PH_LANES contact points side by side (solver_wide.c):
 * one lane per point, structure of arrays. 8-byte alignment so that the
 * arrays can live in ordinary allocations (the loads are unaligned ones). */
#ifndef PH_LANES
#define PH_LANES 4 /* 8 also works (measured slower here, docs/profile.md) */
#endif
typedef double ph__vd __attribute__((vector_size(PH_LANES * 8), aligned(8)));

typedef struct ph__wrow {
    ph__vd lin[3], ang_a[3], ang_b[3], mang_a[3], mang_b[3];
    ph__vd inv_diag, eps, rhs, lambda;
    ph__vd B; /* the row's SPOOK right-hand side B (merits only) */
} ph__wrow;

/* A batch's header, both modes (w->wbatches[b]): 192 bytes, three whole
 * lines, consecutive batches' headers contiguous (row mode's part, which
 * point mode never touches, is ph__wbrow, in an array of its own:
 * docs/profile.md, r21-flat9). */
typedef struct ph__wbatch {
    /* What a point-mode visit reads first, on aligned lines: the bound
     * (mu, box), the gap, the lanes' bodies (the group's first batch); then
     * the group's and the store's fields. */
    _Alignas(64) ph__vd mu;
    ph__vd box; /* the scaled-box friction bound */
    ph__vd gap; /* the points' gaps (-depth), moved along each substep (natively here,
                   else copied from the rows' w->wgap) */
    int32_t ia[PH_LANES], ib[PH_LANES];
    int32_t glen;            /* first batch of a group: the group's batches (points 0..glen-1 of
                                the same lanes' manifolds, consecutive); 0 in the others */
    int32_t indep;           /* first batch of a group: 1 when the group touches no body of the
                                group before it (same level) */
    int32_t aniso;           /* first batch of a group, point mode: 1 when a body of some lane
                                has unequal principal moments (the velocity updates then use
                                the full inverse inertias kept in ph__wginert, w->wgin) */
    int32_t point[PH_LANES]; /* contact point (rows 3p..3p+2), -1: empty lane */
    int32_t pm[PH_LANES];    /* its manifold (pm >> 2) and point in it (pm & 3) */
} ph__wbatch;

/* Row mode's part of a batch (settings.contact_block off, or a build from
 * the rows: ph__wide_build), in w->wrows[b] beside w->wbatches[b]: the
 * lanes' inverse masses and the three rows. Only row mode's builds reserve
 * w->wrows (1 984 bytes, 31 lines, a batch); point mode keeps its numbers
 * in w->wpts. */
typedef struct ph__wbrow {
    _Alignas(64) ph__vd ima; /* (imb on the same line) */
    ph__vd imb;
    ph__wrow r[3]; /* normal, t1, t2 */
} ph__wbrow;
#if PH_LANES == 4
_Static_assert(sizeof(ph__wbatch) == 192 && sizeof(ph__wbrow) == 1984, "a batch's header is three lines");
#endif

/* Point mode (settings.contact_block on a native step): the same batches'
 * points as 3 x 3 blocks, in w->wpts[b] beside w->wbatches[b]
 * (solver_wide.c). Rows i = normal, t1, t2 along dir[i]; J_i v is dir_i .
 * (v_b + w_b x rb - v_a - w_a x ra), so the rows themselves are not
 * stored. K = J M^-1 J^T + diag(eps) is the point's block of the system;
 * the hot part (read in every sweep) comes first. 28 vectors: 896 bytes, 14
 * whole cache lines (the merits' B is in w->wptb, ph__wpointb). */
typedef struct ph__wpoint {
    ph__vd ra[3], rb[3]; /* the point from each body's centre of mass (m) */
    ph__vd eps[3];       /* SPOOK regularization of each row */
    ph__vd rhs;          /* the normal row's right-hand side (the friction rows' are 0) */
    ph__vd lam[3];       /* impulses of normal, t1, t2 (N s) */
    ph__vd kinv[6];      /* K^-1 (symmetric): 00 01 02 11 12 22 */
    ph__vd koff[3];      /* K01 K02 K12, */
    ph__vd kd[3];        /* K_ii and */
    ph__vd inv[3];       /* 1 / K_ii: a point whose block solution leaves the bounds */
} ph__wpoint;

/* The rows' SPOOK right-hand side B of a batch's points, read by the merits
 * only, kept out of ph__wpoint so that the fill, warm start, sweeps and
 * refreshes that stream the records do not carry its 96 bytes
 * (docs/profile.md, r21-flat8). w->wb_made says where the merits find it:
 * 0 nowhere, B is 0 (the build; a fill without need_b, which used to write
 * those zeros into every record); 1 in w->wptb[b], beside w->wpts[b] (a
 * fill with need_b, a refresh pass of its own); 2 made by the merits from
 * vws and the records (the last substep's refresh in its first sweep,
 * whose B that is: nothing changes vws, the right-hand sides, arms or
 * directions until the next step, which the merits are read before). */
typedef struct ph__wpointb {
    ph__vd B[3];
} ph__wpointb;

/* What a group's points share (point mode, w->wgroups[group]): 288 bytes,
 * consecutive groups contiguous. */
typedef struct ph__wgroup {
    ph__vd dir[3][3]; /* normal, t1, t2 (dir[i][component]) */
} ph__wgroup;

/* An aniso group's bodies' world inverse inertias when K was made (point
 * mode, w->wgin[group] beside w->wgroups[group]): the same M^-1 in K
 * and in the velocity updates, as the rows' M^-1 J^T is kept through the
 * step. Written and read for groups with aniso set only, so that the
 * passes over the groups of isotropic bodies (a grid's boxes) walk the
 * directions alone (docs/profile.md, r21-flat9). */
typedef struct ph__wginert {
    ph__vd ia[9], ib[9];
} ph__wginert;

/* The default (bottom-up level) order of the contact rows and their batches
 * (solver_wide.c); ncontact = number of contact rows (triples first in
 * rows[]). Writes the contact part of w->order. */
int ph__wide_build(ph__world *w, int32_t ncontact);
void ph__wide_refresh(ph__world *w); /* rows' rhs, lambda and gap into the batches */
/* The contacts' relaxation pass (settings.contact_relax) over the batches,
 * in their order: contact_rows.c's ph__contact_relax_rows in row mode (the
 * same numbers), on the points' relative velocities in point mode (equal
 * to rounding); h: the substep. */
void ph__wide_relax(ph__world *w, double h);
/* The wide solver's instruction set on this CPU: 2 AVX-512VL, 1 AVX2, 0
 * baseline, capped by cap (settings.simd, same numbering). */
int ph__simd_level(ph_simd cap);
void ph__wide_sweep(ph__world *w); /* one PGS pass over the batches */
/* The same, each group's batches refreshed just before they are swept
 * (later substeps of the native path: the gaps moved by the velocities, the
 * right-hand sides, the warm-start impulses kept; with need_b also the B of
 * the merits, from vws): one pass instead of two. */
void ph__wide_sweep_refresh(ph__world *w, double h, int need_b);
/* A substep's last sweep (with the refresh when refresh, as
 * ph__wide_sweep_refresh), with relax then the relaxation (ph__wide_relax),
 * and with wi the integration that follows (step.c), each solver body once
 * the last group touching it is done: the same numbers, one claimed pass
 * with threads (a level of the relaxation starts where the sweep's last
 * one is done for its bodies: solver_wide.c, claim_pass). wi->done is set
 * when the integration ran (a claimed pass: the schedule on, workers). */
void ph__wide_sweep_end(ph__world *w, double h, int refresh, int need_b, int relax, ph__wint *wi);
void ph__wide_store(ph__world *w); /* the batches' lambda into the rows */
/* That refresh with B as a pass of its own, before the warm start (the last
 * substep of a world with joints, whose warm start comes after its rows). */
void ph__wide_refresh_fast(ph__world *w, double h);
/* The batches built straight from the manifolds, without contact rows
 * (plan.rows NATIVE_BUILD; their B in the last substep); same numbers as
 * building the rows first. The build lays the batches out; their numbers
 * are written by the fill, which the caller runs before any pass reads
 * them: ph__wide_fill over all batches, or ph__wide_tile_first tile by
 * tile (the same numbers: a batch's fill reads its own points and bodies
 * only). */
int ph__wide_build_native(ph__world *w);
void ph__wide_fill(ph__world *w, const ph__plan *p, double h);
void ph__wide_warm_start(ph__world *w); /* the batches' impulses onto the bodies */
/* Tile t's share of a later native substep in point mode (step.c's
 * tiled_substeps): its batches' first sweep with the refresh (no B), iters
 * - 1 more sweeps, and with relax the relaxation pass; the same numbers as
 * the passes over all batches, whose other tiles touch other bodies. */
void ph__wide_tile_solve(ph__world *w, int32_t t, double h, int iters, int relax);
/* Tile t's share of the first substep after a native build in point mode
 * (its plan p: warm start by batches, no B): its batches' fill, warm
 * start, iters sweeps and with p->relax the relaxation pass; the same
 * numbers as ph__wide_fill, ph__wide_warm_start, the sweeps and
 * ph__wide_relax over all batches. */
void ph__wide_tile_first(ph__world *w, int32_t t, const ph__plan *p, double h, int iters);
/* The collision run tile by tile (r21-tile13): tile t's share of the
 * native build's checks once its manifolds are collided (their parts as
 * the kept layout's, their heights, each body's order still sorted):
 * 0 when they hold, 1 when the step must run again (PH__NP_RETRY). */
int ph__wide_tile_keys(ph__world *w, int32_t t);
/* (A private return of the step's stages: the collision by tile found the
 * layout or the contacts changed; step.c undoes the step and runs it
 * again with today's narrowphase.) */
#define PH__NP_RETRY (-1000)
/* Worker 0's share of the tiles when the workers claim them from both ends
 * (ph__tasks_next): the tiles [0, split) that hold about 1 / task_workers
 * of the batches. */
int32_t ph__wide_tile_split(const ph__world *w);
/* Group g's height in the claimed passes' schedule (its first point's
 * manifold's, the key that orders a level's groups; make_splits). */
double ph__wide_group_height(const ph__world *w, int32_t g);
/* Tile t's share of the last native substep in point mode: its batches'
 * first sweep with the refresh and the merits' B, iters - 1 more sweeps,
 * and its impulses stored into its manifolds; the same numbers as
 * ph__wide_sweep_refresh(w, h, 1), the sweeps and ph__wide_store_impulses
 * over all batches. */
void ph__wide_tile_last(ph__world *w, int32_t t, double h, int iters);
void ph__wide_store_impulses(ph__world *w); /* the batches' impulses into the manifolds */

/* Adds the merit terms of the contact rows held in the batches (native
 * steps), as solver.c's merits() does for rows. */
void ph__wide_merits(const ph__world *w, ph__merit *m);

/* The fused integration's bodies four at a time, any four
 * (integrate_wide.c; solver_wide.c's claimed pass): up to three wait in
 * ph__igather for the next call; ph__wide_integrate_flush integrates them.
 * Each body's numbers are those of step.c's ph__integrate_body. */
typedef struct ph__igather {
    int32_t sl[4];
    int n;
} ph__igather;
void ph__wide_integrate_gather(ph__world *w, ph__igather *g, const int32_t *idx, int32_t n, double h, int dv, int next,
                               double wf);
void ph__wide_integrate_flush(ph__world *w, ph__igather *g, double h, int dv, int next, double wf);

#endif /* PHYSD_SOLVER_WIDE_H */
