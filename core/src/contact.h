/*
 * contact.h — contacts: the manifolds of a step (narrowphase.c, with the contact
 * cache and the events), the impacts (impacts.c) and the contact rows
 * (contact_rows.c).
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_CONTACT_H
#define PHYSD_CONTACT_H

#include "collide.h"
#include "rows.h"
#include "step.h"

typedef struct ph__world ph__world;

/* A cached contact point of the last step, for warm starting. */
typedef struct ph__cached_point {
    uint32_t feature;
    double ln, lt1, lt2;
} ph__cached_point;

/* One manifold of the current step, between shape slots sa < sb... */
typedef struct ph__contact_manifold {
    int32_t sa, sb; /* shape slots (the pair key, sa < sb by slot) */
    int32_t ba, bb; /* body slots */
    double friction, restitution;
    ph__manifold m;
    int32_t row0;   /* first of its 3 rows per point (normal, t1, t2), this step */
    ph_vec3 t1, t2; /* friction directions; cached impulses are in this basis */
    /* Where each point was on each body (body frames) and its depth when the
     * shapes were last collided: later substeps of the same step move the
     * point with the bodies instead of colliding again. */
    ph_vec3 loc_a[PH_MAX_MANIFOLD_POINTS], loc_b[PH_MAX_MANIFOLD_POINTS];
    double depth0[PH_MAX_MANIFOLD_POINTS];
    double approach; /* relative normal speed (m/s, > 0 closing) at the start of the
                        step in which the pair first came within the margin */
    double ln[PH_MAX_MANIFOLD_POINTS], lt1[PH_MAX_MANIFOLD_POINTS], lt2[PH_MAX_MANIFOLD_POINTS];
    /* The contact cache (narrowphase.c): the state of the last real collision,
     * kept unchanged by the steps that rebuild the manifold from it. */
    ph_vec3 n_loc; /* the normal in ba's body frame */
    ph_vec3 ref_t; /* the origin of the cache body's frame in the other body's frame */
    ph_quat ref_q; /* q_ba^-1 q_bb */
    double ref_r;  /* m: radius about its body origin of the cache side's shape;
                      -1: no reference (collided with the cache off) */
    int ref_side;  /* the cache side: 1 = bb's shape (ref_t in ba's frame), 0 = ba's */
} ph__contact_manifold;

/* Manifolds, warm-start impulses matched, the begin/end events against last
 * step's manifolds pushed; w->restitutive counted. */
int ph__narrowphase(ph__world *w);

/* The collision run tile by tile (r21-tile13): the begin collides what no
 * tile holds and checks that the pairs touching are last step's (1: the
 * tiles' manifolds are pending, w->np_pending; 0: nothing changed, run
 * ph__narrowphase); a tile's manifolds (slots slot[0, n)) collided into
 * their slots (0: as today's narrowphase, 1: the step must run again),
 * raising *maxpen to their deepest point and adding their cache reuses to
 * *reused (the caller's, one per worker: tiles of different workers run
 * side by side; the caller folds them into w->stats). */
int ph__narrowphase_tiles_begin(ph__world *w);
int ph__narrowphase_tile(ph__world *w, const int32_t *slot, int32_t n, double *maxpen, int32_t *reused);

int ph__impacts(ph__world *w, double h); /* Newton–Coulomb impacts; returns count */
/* Substeps after the first: move the points with the bodies (all = 0: only
 * those of restitutive pairs, which the impacts read). */
int ph__refresh_manifolds(ph__world *w, int all);
/* The last substep's ph__refresh_manifolds(w, 1) tile by tile (step.c):
 * one tile's manifolds mf[0, n) (flag[i]: 1 moved, 2 stops, 3 starts
 * touching; *maxpen raised, *points counts their points), then the rest
 * (flag 0), the events in manifold order, the statistics' deepest point
 * and contact points. */
void ph__refresh_manifolds_tile(ph__world *w, const int32_t *mf, int32_t n, uint8_t *flag, double *maxpen,
                                int64_t *points);
int ph__refresh_manifolds_tiles_end(ph__world *w, const uint8_t *flag, double maxpen, int64_t points);
/* Point k of cm in world space now: midway between its two material points,
 * moved with their bodies (the stored m.pts[k].point is what the
 * collision or the cache's move wrote: the fill, the batch layout's
 * heights, the impacts and begin events read it). */
ph_vec3 ph__manifold_point(const ph__world *w, const ph__contact_manifold *cm, int k);
/* The contact rows' gaps (w->wgap) from the collision's depths (the native
 * build puts them in the batches itself). */
int ph__init_gaps(ph__world *w);
/* Later substeps: the contact rows' gaps moved by the velocities and their
 * SPOOK terms refreshed (the rows path; their B when plan.merits is not
 * NONE). */
int ph__refresh_contact_rows(ph__world *w, const ph__plan *p, double h);
int ph__contact_rows(ph__world *w, double h);
/* The relaxation pass (settings.contact_relax) over the contact rows among
 * order[0..n), in that order: each point's normal solved as a rigid row
 * (J_n v = 0 when touching, the gap w->wgap closed within the substep of
 * length h when apart; lambda_n >= 0), its friction impulses clamped to
 * the new bounds; the velocities follow. */
void ph__contact_relax_rows(ph__world *w, const int32_t *order, int32_t n, double h);

/* What the rows of one substep's contact points share. */
typedef struct ph__contact_ctx {
    ph__spook_coef cn, cf;
    double h, g, wsf;
    int box;
    ph_vec3 down;
} ph__contact_ctx;
void ph__contact_ctx_init(const ph__world *w, double h, ph__contact_ctx *c);
/* The three rows (normal, t1, t2) of point k of a manifold whose bodies
 * have solver bodies, as ph__contact_rows builds them (the friction rows'
 * NCP link is left to the caller: normal = -1). */
void ph__contact_point_rows(ph__world *w, const ph__contact_ctx *c, const ph__contact_manifold *cm, int k,
                            ph__row r[3]);

#endif /* PHYSD_CONTACT_H */
