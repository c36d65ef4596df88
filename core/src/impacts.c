/*
 * impacts.c — Newton–Coulomb impacts of restitutive contacts (seeds/002,
 * eqs. 1-7).
 *
 * Normal path: for the fast approaching points of restitutive pairs, apply
 * impulses to the solver bodies' velocities before the rows are solved.
 *
 * Failure modes: none (no allocation).
 *
 * Invariants: only points approaching faster than the world's
 * restitution_threshold (or closing their gap within the step) get an
 * impulse; the count is returned.
 */
#include <string.h>

#include "contact.h"
#include "rows.h"
#include "world.h"

/* Velocity of body point r (relative to the centre) of solver body s. */
static ph_vec3 point_vel(const ph__sbody *s, ph_vec3 r) { return ph_add(s->v, ph_cross(s->w, r)); }

static void apply_impulse(ph__sbody *s, ph_vec3 r, ph_vec3 j) {
    s->v = ph_mul_add(s->v, s->inv_mass, j);
    s->w = ph_add(s->w, ph_mat3_mulv(&s->inv_i, ph_cross(r, j)));
}

int ph__impacts(ph__world *w, double h) {
    const double thr = w->settings.restitution_threshold;
    int count = 0;
    for (int32_t i = 0; i < w->manifold_count; i++) {
        ph__contact_manifold *cm = &w->manifolds[i];
        const double e = cm->restitution, mu = cm->friction;
        if (e <= 0) continue; /* inelastic contacts are left to the solver */
        ph__sbody *sa = &w->sbodies[w->body_to_sbody[cm->ba]];
        ph__sbody *sb = &w->sbodies[w->body_to_sbody[cm->bb]];
        const ph_vec3 n = cm->m.normal;
        for (int k = 0; k < cm->m.count; k++) {
            const double gap = -cm->m.pts[k].depth;
            ph_vec3 pt = cm->m.pts[k].point;
            ph_vec3 ra = ph_sub(pt, w->bodies[cm->ba].p), rb = ph_sub(pt, w->bodies[cm->bb].p);
            ph_vec3 u = ph_sub(point_vel(sb, rb), point_vel(sa, ra));
            double un = ph_dot(u, n);
            /* Touching, or separated but closing the gap within this step
             * (a speculative point would otherwise stop the body inelastically
             * just before it touches). */
            if (un >= -thr || (gap > 0 && -un * h < gap)) continue;
            ph_mat3 K;
            memset(&K, 0, sizeof K);
            ph__add_collision_k(&K, sa->inv_mass, &sa->inv_i, ra);
            ph__add_collision_k(&K, sb->inv_mass, &sb->inv_i, rb);
            /* Stick: u' = -e u_n n (eq. 1-2), I = K^-1 (u' - u). */
            ph_vec3 target = ph_scale(n, -e * un);
            ph_vec3 J;
            if (!ph_mat3_solve(&K, ph_sub(target, u), &J)) continue;
            double jn = ph_dot(J, n);
            ph_vec3 jt = ph_sub(J, ph_scale(n, jn));
            if (ph_len(jt) > mu * jn) {
                /* Sliding (eqs. 4-5): friction opposes the tangential velocity. */
                ph_vec3 ut = ph_sub(u, ph_scale(n, un));
                ph_vec3 tdir = ph_normalize(ut);
                ph_vec3 kd = ph_mat3_mulv(&K, ph_sub(n, ph_scale(tdir, mu)));
                double den = ph_dot(n, kd);
                if (den <= 1e-300) continue;
                double j = -(1.0 + e) * un / den;
                J = ph_sub(ph_scale(n, j), ph_scale(tdir, mu * j));
            }
            apply_impulse(sb, rb, J);
            apply_impulse(sa, ra, ph_neg(J));
            count++;
        }
    }
    return count;
}
