/*
 * run.c — one benchmark run and its JSON line.
 *
 * Normal path: create the engine (not timed), record every body's start
 * pose, then for each step time the engine's step call alone with
 * clock_gettime(CLOCK_MONOTONIC) (collision detection is inside that call in
 * every engine) and, outside the timed region, read all poses back to check
 * they are finite and to measure joint errors from the poses and the
 * description's local anchors. After the last step compute the end figures
 * from the poses and ask the engine for its deepest contact.
 *
 * In sleep mode (cfg->sleep) the engine's awake count is read after every
 * step, also outside the timed region: the time to sleep (first step end
 * with nothing awake) and the median time of the steps that began with
 * everything asleep.
 *
 * Failure modes: an engine that cannot be created (message in err); out of
 * memory. A simulation that blows up is not an error: it is reported as
 * "nan": true and the figures that became non-finite print as null.
 *
 * Invariant: every figure except the step time, penetration, contact count
 * and the physd-only merits is computed here from poses, so it means the same
 * for every engine.
 */
#define _POSIX_C_SOURCE 200809L

#include "run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* CPU time of the calling thread (every engine steps in it). */
static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int pose_finite(ph_vec3 p, ph_quat q) {
    return isfinite(p.x) && isfinite(p.y) && isfinite(p.z) && isfinite(q.x) && isfinite(q.y) && isfinite(q.z) &&
           isfinite(q.w);
}

/* Reads all poses; returns 1 if all are finite. */
static int read_poses(const engine_vtable *ev, void *e, int n, ph_vec3 *pos, ph_quat *rot) {
    int finite = 1;
    for (int i = 0; i < n; i++) {
        ev->get_pose(e, i, &pos[i], &rot[i]);
        if (!pose_finite(pos[i], rot[i])) finite = 0;
    }
    return finite;
}

/* Max anchor distance over all joints for the given poses (NaN if any is). */
static double joint_error(const scene_desc *d, const ph_vec3 *pos, const ph_quat *rot) {
    double worst = 0;
    for (int j = 0; j < d->joint_count; j++) {
        ph_vec3 wa, wb;
        sd_joint_anchors(d, j, pos, rot, &wa, &wb);
        double err = ph_len(ph_sub(wa, wb));
        if (!(err <= worst)) worst = err; /* also takes NaN */
    }
    return worst;
}

int run_engine(const engine_vtable *ev, const scene_desc *d, const engine_config *cfg, int steps, run_result *r,
               char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->extra.final_merit = NAN;
    r->extra.final_rel_residual = NAN;
    r->extra.final_minmap = NAN;
    r->joint_error_max_m = NAN;
    r->joint_error_final_m = NAN;
    r->time_to_sleep_s = NAN;
    r->asleep_us_median = NAN;
    r->awake_last = -1;
    r->steps = steps;
    r->bodies = sd_dynamic_count(d);

    int n = d->body_count;
    ph_vec3 *start = calloc((size_t)n + 1, sizeof *start);
    ph_vec3 *pos = calloc((size_t)n + 1, sizeof *pos);
    ph_quat *rot = calloc((size_t)n + 1, sizeof *rot);
    double *ms = calloc((size_t)steps + 1, sizeof *ms);
    double *idle = calloc((size_t)steps + 1, sizeof *idle); /* steps begun with everything asleep */
    double *cpu = calloc((size_t)steps + 1, sizeof *cpu);
    if (!start || !pos || !rot || !ms || !idle || !cpu) {
        free(start);
        free(pos);
        free(rot);
        free(ms);
        free(idle);
        free(cpu);
        snprintf(err, errlen, "out of memory");
        return -1;
    }

    void *e = ev->create(d, cfg, err, errlen);
    if (!e) {
        free(start);
        free(pos);
        free(rot);
        free(ms);
        free(idle);
        free(cpu);
        return -1;
    }
    const int count_awake = cfg->sleep && ev->awake_count;
    int awake = count_awake ? ev->awake_count(e) : -1, nidle = 0;
    if (ev->describe) ev->describe(e, r->settings, sizeof r->settings);

    if (!read_poses(ev, e, n, pos, rot)) {
        r->nan = 1;
    }
    memcpy(start, pos, (size_t)n * sizeof *start);
    if (d->joint_count > 0) r->joint_error_max_m = joint_error(d, pos, rot);

    /* The initially highest dynamic body (the first one on ties). */
    int top = -1;
    for (int i = 0; i < n; i++)
        if (d->bodies[i].type == SD_BODY_DYNAMIC && (top < 0 || start[i].z > start[top].z)) top = i;

    int progress_every = steps >= 10 ? steps / 10 : 1;
    for (int s = 0; s < steps; s++) {
        double c0 = cpu_ms(), t0 = now_ms();
        ev->step(e);
        double t1 = now_ms(), c1 = cpu_ms();
        ms[s] = t1 - t0;
        cpu[s] = c1 - c0;
        if (awake == 0) idle[nidle++] = ms[s];
        if (count_awake) {
            awake = ev->awake_count(e);
            if (awake == 0 && !isfinite(r->time_to_sleep_s)) r->time_to_sleep_s = (s + 1) * cfg->time_step;
        }
        if (!read_poses(ev, e, n, pos, rot) && !r->nan) {
            r->nan = 1;
            r->nan_step = s + 1;
        }
        if (d->joint_count > 0) {
            double je = joint_error(d, pos, rot);
            if (!(je <= r->joint_error_max_m)) r->joint_error_max_m = je;
        }
        if ((s + 1) % progress_every == 0)
            fprintf(stderr, "\r%s %s it=%d: step %d/%d", ev->name, d->name, cfg->iterations, s + 1, steps);
    }
    fprintf(stderr, "\n");

    double sum = 0;
    for (int s = 0; s < steps; s++)
        sum += ms[s];
    r->total_s = sum * 1e-3;
    if (steps > 0) {
        r->ms_mean = sum / steps;
        qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
        r->ms_min = ms[0];
        r->ms_max = ms[steps - 1];
        r->ms_median = steps % 2 ? ms[steps / 2] : 0.5 * (ms[steps / 2 - 1] + ms[steps / 2]);
        qsort(cpu, (size_t)steps, sizeof *cpu, cmp_double);
        r->cpu_ms_median = steps % 2 ? cpu[steps / 2] : 0.5 * (cpu[steps / 2 - 1] + cpu[steps / 2]);
    }
    r->awake_last = awake;
    if (nidle > 0) {
        qsort(idle, (size_t)nidle, sizeof *idle, cmp_double);
        r->asleep_us_median = 1e3 * (nidle % 2 ? idle[nidle / 2] : 0.5 * (idle[nidle / 2 - 1] + idle[nidle / 2]));
    }

    r->drift_max_m = 0;
    r->top_loss_m = top >= 0 ? start[top].z - pos[top].z : NAN;
    for (int i = 0; i < n; i++) {
        if (d->bodies[i].type != SD_BODY_DYNAMIC) continue;
        double dx = pos[i].x - start[i].x, dy = pos[i].y - start[i].y;
        double drift = sqrt(dx * dx + dy * dy);
        if (!(drift <= r->drift_max_m)) r->drift_max_m = drift;
        if (pos[i].z < 0) r->below_ground++;
    }
    if (d->joint_count > 0) r->joint_error_final_m = joint_error(d, pos, rot);
    r->penetration_max_m = ev->max_penetration(e);
    r->contacts_last = ev->contact_count(e);
    if (ev->extra) ev->extra(e, &r->extra);
    r->ok = 1;

    ev->destroy(e);
    free(start);
    free(pos);
    free(rot);
    free(ms);
    free(idle);
    free(cpu);
    return 0;
}

/* A number, or null when it is not finite. */
static void put_num(FILE *out, const char *key, double v) {
    if (isfinite(v))
        fprintf(out, ",\"%s\":%.9g", key, v);
    else
        fprintf(out, ",\"%s\":null", key);
}

void run_print_json(FILE *out, const engine_vtable *ev, const scene_desc *d, const engine_config *cfg,
                    const run_result *r, int repeat_index) {
    double mu = NAN;
    for (int i = 0; i < d->shape_count; i++)
        if (d->shapes[i].type != SD_SHAPE_PLANE) {
            mu = d->shapes[i].friction;
            break;
        }
    fprintf(out, "{\"engine\":\"%s\",\"engine_version\":\"%s\",\"precision\":\"%s\",\"scene\":\"%s\"", ev->name,
            ev->version(), ev->precision(), d->name);
    fprintf(out, ",\"bodies\":%d,\"joints\":%d,\"steps\":%d,\"iterations\":%d,\"substeps\":%d,\"budget\":%d", r->bodies,
            d->joint_count, r->steps, cfg->iterations, cfg->substeps, cfg->iterations * cfg->substeps);
    put_num(out, "h", cfg->time_step);
    put_num(out, "mu", mu);
    fprintf(out, ",\"repeat\":%d", repeat_index);
    /* (ODE and Bullet step on one thread whatever --threads says.) */
    fprintf(out, ",\"threads\":%d", strcmp(ev->name, "physd") == 0 && cfg->physd_threads > 1 ? cfg->physd_threads : 1);
    put_num(out, "ms_per_step_median", r->ms_median);
    put_num(out, "ms_per_step_mean", r->ms_mean);
    put_num(out, "ms_per_step_min", r->ms_min);
    put_num(out, "ms_per_step_max", r->ms_max);
    put_num(out, "total_s", r->total_s);
    put_num(out, "us_per_body_step", r->bodies > 0 ? 1e3 * r->ms_median / r->bodies : NAN);
    put_num(out, "cpu_ms_per_step_median", r->cpu_ms_median);
    put_num(out, "cpu_us_per_body_step", r->bodies > 0 ? 1e3 * r->cpu_ms_median / r->bodies : NAN);
    fprintf(out, ",\"sleep\":%s", cfg->sleep ? "true" : "false");
    put_num(out, "time_to_sleep_s", r->time_to_sleep_s);
    if (r->awake_last >= 0)
        fprintf(out, ",\"awake_last\":%d", r->awake_last);
    else
        fprintf(out, ",\"awake_last\":null");
    put_num(out, "asleep_us_median", r->asleep_us_median);
    put_num(out, "drift_max_m", r->drift_max_m);
    put_num(out, "top_loss_m", r->top_loss_m);
    put_num(out, "penetration_max_m", r->penetration_max_m);
    fprintf(out, ",\"contacts_last\":%d,\"below_ground\":%d", r->contacts_last, r->below_ground);
    put_num(out, "joint_error_max_m", r->joint_error_max_m);
    put_num(out, "joint_error_final_m", r->joint_error_final_m);
    fprintf(out, ",\"nan\":%s", r->nan ? "true" : "false");
    if (r->nan) fprintf(out, ",\"nan_step\":%d", r->nan_step);
    put_num(out, "final_merit", r->extra.final_merit);
    put_num(out, "final_rel_residual", r->extra.final_rel_residual);
    put_num(out, "final_minmap", r->extra.final_minmap);
    fprintf(out, ",\"settings\":{%s}}\n", r->settings);
    fflush(out);
}
