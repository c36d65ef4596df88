/*
 * bench.c — physd-bench: the reference scenes side by side in physd, Open
 * Dynamics Engine and Bullet, one JSON line per run on stdout.
 *
 * Normal path: for each selected scene, build physd's preset into a scratch
 * world, read it back into the neutral description (scene_desc.c), then for
 * each iteration count, engine and repeat run it (run.c) with the same
 * configuration (h = 1/60, 1 substep, the preset's gravity) and print the
 * line. Progress and diagnostics go to stderr; stdout carries JSON only.
 *
 * Failure modes: bad arguments (a message on stderr, exit 2); a scene that
 * cannot be built or described, or an engine that cannot be created (a
 * message on stderr, the other runs go on, exit 1 at the end).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "physd/ph_core.h"
#include "physd/ph_scenes.h"
#include "physd/ph_settings.h"
#include "probe.h"
#include "run.h"
#include "scene_desc.h"

#define MAX_LIST 64

static const char *const default_scenes[] = {"stack20", "pyramid20", "grid1000", "spheres1000", "chain30"};
static const int default_iterations[] = {10, 20};
static const engine_vtable *const all_engines[] = {&engine_physd, &engine_ode, &engine_bullet};
#define ENGINE_COUNT ((int)(sizeof all_engines / sizeof all_engines[0]))

typedef struct options {
    const char *scenes[MAX_LIST];
    int scene_count;
    const engine_vtable *engines[MAX_LIST];
    int engine_count;
    int iterations[MAX_LIST];
    int iteration_count;
    int steps; /* 0 = the preset's reference length */
    int repeat;
    int substeps;
    int physd_split;      /* physd runs a budget of N sweeps as this many substeps of N / split */
    int physd_joint_once; /* settings.joint_step_once: 1 on, -1 off, 0 the core's default */
    int collide_jointed;
    int physd_from_desc;
    int physd_record_merits;
    int physd_pass_profile;
    int physd_simd;              /* settings.simd */
    int physd_threads[MAX_LIST]; /* settings.threads: physd runs once per entry */
    int thread_count;
    int sleep;      /* sleeping on in every engine */
    int interleave; /* K > 0: each group's runs stepped K steps at a time in turn */
} options;

static void usage(FILE *out) {
    fprintf(out, "usage: physd-bench [options]\n"
                 "Runs the reference scenes in physd, ODE (quickstep) and Bullet (sequential impulse)\n"
                 "with the same time step (1/60 s), iterations and friction; prints one JSON line per run.\n"
                 "Without options: every benchmark scene in every engine at 10 and 20 iterations.\n"
                 "\n"
                 "  --scene NAME          a physd preset (repeatable; default: stack20 pyramid20\n"
                 "                        grid1000 spheres1000 chain30)\n"
                 "  --engine NAME         physd, ode or bullet (repeatable; default: all three)\n"
                 "  --iterations N        solver iterations per step (repeatable; default: 10 and 20)\n"
                 "  --steps N             steps per run (default: the preset's, 600 for the benchmark scenes)\n"
                 "  --repeat R            run each configuration R times, one line each (default 1)\n"
                 "  --substeps N          substeps per step in every engine (default 1)\n"
                 "  --physd-split S       physd spends the iteration budget N as S substeps of N/S\n"
                 "  --physd-joint-once B  physd's settings.joint_step_once 0 or 1 (a joint-only step solved\n"
                 "                        once); default: the core's\n"
                 "                        iterations (default: its default step, N substeps of 1;\n"
                 "                        1 = like the others; ignored with --substeps)\n"
                 "  --sleep               sleeping on in every engine (physd settings.sleep, ODE auto-disable,\n"
                 "                        Bullet deactivation, each with its defaults): adds the time to\n"
                 "                        sleep and the median of the all-asleep steps to each line\n"
                 "  --collide-jointed     ODE and Bullet: let bodies linked by a joint collide too\n"
                 "                        (default: they do not, the usual convention of both)\n"
                 "  --physd-from-desc     build physd's world from the neutral description, not the preset\n"
                 "  --physd-record-merits keep physd's per-iteration merits on (slower; off by default)\n"
                 "  --physd-pass-profile  time physd's passes (ph_world_set_pass_profile): a \"passes\" array\n"
                 "                        in each physd line, every pass's calls, wall and per-worker ms\n"
                 "  --simd L              cap physd's vector solver: baseline, avx2 or avx512 (settings.simd;\n"
                 "                        default: $PHYSD_SIMD, else avx512)\n"
                 "  --threads N           physd's world stepped by N threads (settings.threads, [1, 8];\n"
                 "                        repeatable: one physd run per count; default 1); ODE and Bullet\n"
                 "                        stay single-threaded\n"
                 "  --interleave K        step the runs of each iteration count and repeat (every scene,\n"
                 "                        engine and thread count) together, K steps of each in turn,\n"
                 "                        instead of one after the other; each line adds the median\n"
                 "                        wall and CPU ms of every block (block_ms, block_cpu_ms) for\n"
                 "                        ratios paired within seconds (bench/paired_ratio.py)\n"
                 "  --list                list physd's presets on stdout and exit\n"
                 "  --help                this text\n");
}

static int parse_int(const char *opt, const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "physd-bench: %s needs an integer in [%d, %d], got '%s'\n", opt, lo, hi, s ? s : "");
        return -1;
    }
    *out = (int)v;
    return 0;
}

static const engine_vtable *find_engine(const char *name) {
    for (int i = 0; i < ENGINE_COUNT; i++)
        if (strcmp(all_engines[i]->name, name) == 0) return all_engines[i];
    return NULL;
}

/* Returns 0 to run, 1 to exit successfully (--help, --list), -1 on error. */
static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->repeat = 1;
    o->substeps = 1;
    o->physd_split = 0; /* physd's default step: N substeps x 1 */
    const ph_setting *simd = ph_setting_find("simd");
    o->physd_simd = PH_SIMD_AVX512;
    const char *env = getenv("PHYSD_SIMD"); /* the documented way before --simd */
    if (env && *env && ph_setting_enum_parse(simd, env, &o->physd_simd) != PH_OK)
        fprintf(stderr, "physd-bench: PHYSD_SIMD=%s ignored (baseline, avx2 or avx512)\n", env);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(a, "--list") == 0) {
            for (int k = 0; k < ph_scene_count(); k++) {
                const ph_scene_info *si = ph_scene_at(k);
                printf("%-16s %6d steps %6d bodies  %s\n", si->name, si->steps, si->bodies,
                       si->description ? si->description : "");
            }
            return 1;
        } else if (strcmp(a, "--sleep") == 0) {
            o->sleep = 1;
        } else if (strcmp(a, "--collide-jointed") == 0) {
            o->collide_jointed = 1;
        } else if (strcmp(a, "--physd-from-desc") == 0) {
            o->physd_from_desc = 1;
        } else if (strcmp(a, "--physd-record-merits") == 0) {
            o->physd_record_merits = 1;
        } else if (strcmp(a, "--physd-pass-profile") == 0) {
            o->physd_pass_profile = 1;
        } else if (strcmp(a, "--simd") == 0) {
            if (ph_setting_enum_parse(simd, v, &o->physd_simd) != PH_OK) {
                fprintf(stderr, "physd-bench: --simd needs baseline, avx2 or avx512, got '%s'\n", v ? v : "");
                return -1;
            }
            i++;
        } else if (strcmp(a, "--scene") == 0) {
            if (!v) {
                fprintf(stderr, "physd-bench: --scene needs a name\n");
                return -1;
            }
            if (!ph_scene_find(v)) {
                fprintf(stderr, "physd-bench: unknown scene '%s' (see --list)\n", v);
                return -1;
            }
            if (o->scene_count == MAX_LIST) {
                fprintf(stderr, "physd-bench: too many --scene options\n");
                return -1;
            }
            o->scenes[o->scene_count++] = v;
            i++;
        } else if (strcmp(a, "--engine") == 0) {
            const engine_vtable *ev = v ? find_engine(v) : NULL;
            if (!ev) {
                fprintf(stderr, "physd-bench: --engine needs physd, ode or bullet, got '%s'\n", v ? v : "");
                return -1;
            }
            if (o->engine_count == MAX_LIST) {
                fprintf(stderr, "physd-bench: too many --engine options\n");
                return -1;
            }
            o->engines[o->engine_count++] = ev;
            i++;
        } else if (strcmp(a, "--iterations") == 0) {
            int n;
            if (parse_int(a, v, 1, 10000, &n)) return -1;
            if (o->iteration_count == MAX_LIST) {
                fprintf(stderr, "physd-bench: too many --iterations options\n");
                return -1;
            }
            o->iterations[o->iteration_count++] = n;
            i++;
        } else if (strcmp(a, "--steps") == 0) {
            if (parse_int(a, v, 1, 10000000, &o->steps)) return -1;
            i++;
        } else if (strcmp(a, "--repeat") == 0) {
            if (parse_int(a, v, 1, 1000, &o->repeat)) return -1;
            i++;
        } else if (strcmp(a, "--substeps") == 0) {
            if (parse_int(a, v, 1, 64, &o->substeps)) return -1;
            i++;
        } else if (strcmp(a, "--threads") == 0) {
            if (o->thread_count == MAX_LIST) {
                fprintf(stderr, "physd-bench: too many --threads options\n");
                return -1;
            }
            if (parse_int(a, v, 1, 8, &o->physd_threads[o->thread_count])) return -1;
            o->thread_count++;
            i++;
        } else if (strcmp(a, "--interleave") == 0) {
            if (parse_int(a, v, 1, 100000, &o->interleave)) return -1;
            i++;
        } else if (strcmp(a, "--physd-joint-once") == 0) {
            int on = 0;
            if (parse_int(a, v, 0, 1, &on)) return -1;
            o->physd_joint_once = on ? 1 : -1;
            i++;
        } else if (strcmp(a, "--physd-split") == 0) {
            if (parse_int(a, v, 1, 64, &o->physd_split)) return -1;
            i++;
        } else {
            fprintf(stderr, "physd-bench: unknown argument '%s'\n", a);
            usage(stderr);
            return -1;
        }
    }
    if (o->scene_count == 0) {
        for (size_t k = 0; k < sizeof default_scenes / sizeof default_scenes[0]; k++)
            o->scenes[o->scene_count++] = default_scenes[k];
    }
    if (o->engine_count == 0) {
        for (int k = 0; k < ENGINE_COUNT; k++)
            o->engines[o->engine_count++] = all_engines[k];
    }
    if (o->thread_count == 0) o->physd_threads[o->thread_count++] = 1;
    if (o->iteration_count == 0) {
        for (size_t k = 0; k < sizeof default_iterations / sizeof default_iterations[0]; k++)
            o->iterations[o->iteration_count++] = default_iterations[k];
    }
    return 0;
}

/* Builds the preset into a scratch physd world and reads it back. */
static int describe_scene(const char *name, scene_desc *d) {
    int rc = 0;
    ph_world_def wd = ph_default_world_def();
    ph_world_id w = ph_world_create(&wd, &rc);
    if (rc || !w.index1) {
        fprintf(stderr, "physd-bench: ph_world_create: %s\n", ph_strerror(rc));
        return -1;
    }
    rc = ph_scene_build(w, name);
    if (rc) {
        fprintf(stderr, "physd-bench: ph_scene_build(%s): %s\n", name, ph_strerror(rc));
        ph_world_destroy(w);
        return -1;
    }
    char err[256];
    rc = sd_from_physd_world(w, name, d, err, sizeof err);
    ph_world_destroy(w);
    if (rc) {
        fprintf(stderr, "physd-bench: describing %s: %s\n", name, err);
        return -1;
    }
    return 0;
}

/* One run's configuration: the same step and budget in every engine; physd
 * spends the budget its own default way (N substeps x 1 iteration) unless
 * --physd-split says otherwise. */
static engine_config make_config(const options *o, const scene_desc *d, const engine_vtable *ev, int iterations,
                                 int threads) {
    engine_config cfg = {
        .time_step = 1.0 / 60.0,
        .substeps = o->substeps,
        .iterations = iterations,
        .gravity = d->gravity,
        .collide_jointed = o->collide_jointed,
        .physd_from_desc = o->physd_from_desc,
        .physd_record_merits = o->physd_record_merits,
        .physd_pass_profile = o->physd_pass_profile,
        .physd_simd = o->physd_simd,
        .physd_threads = threads,
        .physd_joint_once = o->physd_joint_once,
        .sleep = o->sleep,
    };
    const int split = o->physd_split > 0 ? o->physd_split : iterations;
    if (strcmp(ev->name, "physd") == 0 && o->substeps == 1 && split > 1 && iterations >= split) {
        cfg.substeps = split;
        cfg.iterations = iterations / split;
    }
    return cfg;
}

static int scene_steps(const options *o, const char *scene) {
    const ph_scene_info *si = ph_scene_find(scene);
    return o->steps > 0 ? o->steps : (si && si->steps > 0 ? si->steps : 600);
}

/* The thread counts an engine runs with: physd's list, once for the others. */
static int engine_threads(const options *o, const engine_vtable *ev) {
    return strcmp(ev->name, "physd") == 0 ? o->thread_count : 1;
}

/* The round trip of a cache line between the two cores now (probe.h): after
 * 2 ms asleep, so that the last block's pool workers have stopped spinning
 * (a physd pool lingers 250 µs after back-to-back steps) and the partner
 * starts on an idle core; the fastest of five short probes (NaN, printed
 * null, when no partner thread starts). */
static double placement_ns(void) {
    const struct timespec pause = {0, 2000000};
    nanosleep(&pause, NULL);
    double best = NAN;
    for (int c = 0; c < 5; c++) {
        const double v = probe_round_trip_ns(c == 0 ? 300 : 20, 400);
        if (v >= 0 && !(v >= best)) best = v;
    }
    return best;
}

/* --interleave K: for each iteration count and repeat, every scene, engine
 * and thread count is created first, then stepped K steps at a time in turn
 * until each has made its steps; the lines come out at the end, in the
 * order of the options. With physd at more than one thread, each round of
 * blocks begins with a probe of how far apart the two cores are
 * (placement_ns; block_rt_ns in the lines: a two-thread block's speed-up
 * depends on it). Returns the failures. */
static int run_interleaved(const options *o) {
    enum { MAX_RUNS = 1024 };
    static scene_desc descs[MAX_LIST];
    static int described[MAX_LIST];
    int failures = 0;
    for (int s = 0; s < o->scene_count; s++) {
        described[s] = describe_scene(o->scenes[s], &descs[s]) == 0;
        if (!described[s]) failures++;
    }
    int probe = 0; /* (physd among the engines at more than one thread, on two cores or more) */
    for (int e = 0; e < o->engine_count; e++)
        if (strcmp(o->engines[e]->name, "physd") == 0)
            for (int t = 0; t < o->thread_count; t++)
                probe |= o->physd_threads[t] > 1;
    probe = probe && probe_cores_ok();
    int group = 0;
    for (int it = 0; it < o->iteration_count; it++) {
        for (int r = 0; r < o->repeat; r++, group++) {
            static run_state *st[MAX_RUNS];
            static const engine_vtable *evs[MAX_RUNS];
            static engine_config cfgs[MAX_RUNS];
            static int scene_of[MAX_RUNS];
            int nruns = 0;
            for (int s = 0; s < o->scene_count; s++) {
                if (!described[s]) continue;
                for (int e = 0; e < o->engine_count; e++) {
                    for (int t = 0; t < engine_threads(o, o->engines[e]); t++) {
                        if (nruns == MAX_RUNS) {
                            fprintf(stderr, "physd-bench: more than %d interleaved runs\n", MAX_RUNS);
                            return failures + 1;
                        }
                        evs[nruns] = o->engines[e];
                        scene_of[nruns] = s;
                        cfgs[nruns] = make_config(o, &descs[s], o->engines[e], o->iterations[it], o->physd_threads[t]);
                        nruns++;
                    }
                }
            }
            for (int k = 0; k < nruns; k++) {
                char err[256];
                st[k] = run_begin(evs[k], &descs[scene_of[k]], &cfgs[k], scene_steps(o, o->scenes[scene_of[k]]), err,
                                  sizeof err);
                if (!st[k]) {
                    fprintf(stderr, "physd-bench: %s on %s: %s\n", evs[k]->name, descs[scene_of[k]].name, err);
                    failures++;
                }
            }
            int max_steps = 0;
            for (int k = 0; k < nruns; k++) {
                const int n = scene_steps(o, o->scenes[scene_of[k]]);
                if (n > max_steps) max_steps = n;
            }
            double *rt = probe ? calloc((size_t)max_steps / (size_t)o->interleave + 2, sizeof *rt) : NULL;
            for (int busy = 1, round = 0; busy; round++) {
                busy = 0;
                /* (no probe in the last round, where no run has steps left) */
                if (rt && (long)round * o->interleave < max_steps) rt[round] = placement_ns();
                for (int k = 0; k < nruns; k++)
                    if (st[k] && run_block(st[k], o->interleave) > 0) busy = 1;
            }
            for (int k = 0; k < nruns; k++) {
                if (!st[k]) continue;
                run_result res;
                run_finish(st[k], &res, 1);
                res.interleave = o->interleave;
                res.group = group;
                res.block_rt_ns = rt;
                run_print_json(stdout, evs[k], &descs[scene_of[k]], &cfgs[k], &res, r);
                run_result_free(&res);
            }
            free(rt);
        }
    }
    for (int s = 0; s < o->scene_count; s++)
        if (described[s]) sd_free(&descs[s]);
    return failures;
}

int main(int argc, char **argv) {
    options o;
    int p = parse_args(argc, argv, &o);
    if (p < 0) return 2;
    if (p > 0) return 0;
    if (o.interleave > 0) return run_interleaved(&o) ? 1 : 0;

    int failures = 0;
    for (int s = 0; s < o.scene_count; s++) {
        scene_desc d;
        if (describe_scene(o.scenes[s], &d) != 0) {
            failures++;
            continue;
        }
        int steps = scene_steps(&o, o.scenes[s]);
        fprintf(stderr, "physd-bench: %s: %d bodies (%d dynamic), %d shapes, %d joints, %d steps\n", d.name,
                d.body_count, sd_dynamic_count(&d), d.shape_count, d.joint_count, steps);
        for (int it = 0; it < o.iteration_count; it++) {
            for (int e = 0; e < o.engine_count; e++) {
                for (int t = 0; t < engine_threads(&o, o.engines[e]); t++) {
                    engine_config cfg = make_config(&o, &d, o.engines[e], o.iterations[it], o.physd_threads[t]);
                    for (int r = 0; r < o.repeat; r++) {
                        run_result res;
                        char err[256];
                        if (run_engine(o.engines[e], &d, &cfg, steps, &res, err, sizeof err) != 0) {
                            fprintf(stderr, "physd-bench: %s on %s: %s\n", o.engines[e]->name, d.name, err);
                            failures++;
                            break;
                        }
                        run_print_json(stdout, o.engines[e], &d, &cfg, &res, r);
                    }
                }
            }
        }
        sd_free(&d);
    }
    return failures ? 1 : 0;
}
