/*
 * joint.h — joints in the step: their rows (joint.c), the direct block of their
 * bilateral rows (joint_direct.c), their hinge angle and the positional
 * correction of their anchors.
 *
 * Internal to the core (and its tests); not installed.
 */
#ifndef PHYSD_JOINT_H
#define PHYSD_JOINT_H

#include "body.h"

typedef struct ph__world ph__world;

/* The joint rows of a substep of length h, appended to rows[] (their B,
 * for the merits, only when need_b; else 0). */
int ph__joint_rows(ph__world *w, double h, int need_b);

/* The errors g(q) of the joint rows at the bodies' poses now, written to
 * g[row - contact_row_count] for each joint row of the step (rows of
 * ball, hinge and fixed joints without limit or motor: the linear rows'
 * anchor separation, the angular rows' errors as ph__joint_rows has them). */
void ph__joint_errors(const ph__world *w, double *g);

/* The bilateral joint rows as one directly solved block (joint_direct.c):
 * factored when fresh (the substep collided), when the joint rows' layout
 * changed or when the block's bodies may have turned more than
 * settings.joint_refactor_angle since the last factorization (h: the
 * substep), else the last factor is kept (PH_ERR_NO_MEMORY or PH_OK; a
 * factorization that fails leaves the rows to the scalar loop); solved at
 * each sweep. */
int ph__joint_direct_factor(ph__world *w, int fresh, double h);
void ph__joint_direct_solve(ph__world *w);

double ph__hinge_angle(const ph__world *w, const ph__joint *j);
/* Positional correction of the joints' anchors after a step. */
void ph__joint_project(ph__world *w, int iterations);
/* Positional correction after a step solved once (w->joint_once,
 * joint_direct.c): `iterations` SHAKE iterations on the joints' position
 * constraints g(q) = 0 along the step's own Jacobian, each solving
 * (J M^-1 J^T + Sigma) dmu = -g with the step's factor, moving the bodies by
 * M^-1 J^T dmu and their velocities by that over time_step; the scalar
 * correction when the rows are not all in the block. Then the joints'
 * impulses are put back into per-substep units (divided by substeps).
 * PH_OK or PH_ERR_NO_MEMORY. */
int ph__joint_project_direct(ph__world *w, int iterations, int substeps);

#endif /* PHYSD_JOINT_H */
