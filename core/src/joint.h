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

/* The same rows in position form: their right-hand side is -g(q), the
 * constraint's error at the bodies' poses now, with no warm start and no
 * velocity term (ph__joint_project_direct's Newton steps; h sets the
 * rows' SPOOK regularization as in the step). */
int ph__joint_rows_position(ph__world *w, double h);

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
 * joint_direct.c): `iterations` Newton steps on the joints' position
 * constraints g(q) = 0, each solving (J M^-1 J^T + Sigma) dmu = -g with the
 * direct block factored at the poses of that iteration and moving the
 * bodies by M^-1 J^T dmu; velocities unchanged. Then the joints' impulses
 * are put back into per-substep units (divided by substeps). PH_OK or
 * PH_ERR_NO_MEMORY. */
int ph__joint_project_direct(ph__world *w, int iterations, int substeps);

#endif /* PHYSD_JOINT_H */
