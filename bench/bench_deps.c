/*
 * bench_deps.c: what a verify costs with a real dependency tree, against
 * `docker run` of an image with the same dependencies baked in, in one run
 * on the same machine (ratios, never absolute thresholds). Interleaved so
 * drift hits every side alike:
 *
 *   1. Kiwi's Phase B verify of the test command (the snapshot laid
 *      read-only under /kiwi, the tree put over it) against `docker run --rm
 *      --network none` of the baked image, and against the same with the
 *      CPU and memory ceilings a Kiwi sandbox has by default (`--cpus
 *      --memory`: the first baseline has no quota, and the test runner
 *      uses every core); and the old copying verify (KIWI_SNAPSHOT_COPY=true)
 *      in the same run;
 *   2. Kiwi's verify of `true` with the same snapshot against `docker run
 *      --rm --network none IMAGE true`, with its sandbox made in the
 *      verify (step 0) and made ahead (a session round's verify, made
 *      while the models work, and the deciding verify of a diff, made
 *      while the round's verify runs: kiwi_phase_verify_ready, timed apart
 *      and printed, then the verify); the test command's
 *      verify made ahead too;
 *   3. with a store (KIWI_STORE_URL): a fresh host's first verify of the key
 *      (the snapshot fetched from the store and checked, its image made, then the
 *      verify) against a warm host's verify.
 *
 * The fixture is bench/fixtures/ts-jest (typescript, jest, ts-jest,
 * eslint), installed once by Kiwi's own Phase A as the worker runs it (the
 * plan's command and settings, the install's input only, the dependency
 * locations kept) into --work and reused afterwards; --snapshot DIR takes a snapshot made elsewhere instead (src.tar
 * and home.tar, as Phase A writes them).
 *
 * It runs as production does: the worker's settings from the environment
 * (kiwi-worker's KIWI_* variables), the host's egress rules applied first
 * with KIWI_EGRESS_APPLY=true and checked (egress.sh check, as the
 * worker's metadata_blocked check runs it: missing rules stop the bench,
 * naming the command that fixes them), and Phase A through the worker's
 * egress proxy (Squid, started as `kiwi-worker --once` starts it, unless
 * KIWI_INSTALL_EGRESS=open). --open-egress skips the rules' check, and the
 * figures then say they were not made in the production configuration.
 *
 * Usage: bench_deps [--driver docker|gvisor] [--image IMAGE] [--runs N] [--work DIR] [--command CMD]
 *                   [--snapshot DIR] [--cpus N] [--open-egress]
 * --cpus N gives Kiwi's sandboxes N cores (KIWI_SANDBOX_CPUS), and the
 * limited baseline the same.
 * Reads the stack's env (KIWI_DOCKER_SOCKET, KIWI_STATE_DIR, KIWI_STORE_URL).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench-util.h"
#include "sandbox/docker/docker-internal.h"
#include "inspect/lockfile/lockfile.h"
#include "sandbox/phases.h"
#include "sandbox/sandbox.h"
#include "worker/config.h"
#include "worker/egress/egress-proxy.h"
#include "worker/egress/private-registry.h"
#include "worker/egress/egress.h"
#include "worker/task/store.h"

extern char **environ;

/* Kiwi's sandboxes in this run: the driver's defaults, or --cpus N (as
 * KIWI_SANDBOX_CPUS=N gives a worker's). */
static kiwi_sandbox_limits limits;

static int sh (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static int
sh (const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (cmd, sizeof cmd, fmt, ap);
    va_end (ap);
    const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    return cli (argv);
}

/* The time of one verify; with `made` (a session round's verify), its
 * sandbox is made ahead first (kiwi_phase_verify_ready, the part a session
 * does while the models work), timed apart into *made. */
static double
timed_verify_as (kiwi_sandbox_env *env, const kiwi_phase_config *pc, const char *image, const char *ws,
                 const char *snap, const char *command, double *made)
{
    kiwi_verify_request vr = { .image = image, .workspace = ws, .snapshot_dir = snap, .command = command,
                               .limits = limits, .timeout_ms = 600000, .task_id = "bench" };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    double t0 = now_ms ();
    if (made != NULL) {
        if (kiwi_phase_verify_ready (env, pc, &vr, &vr.ready, &err) < 0) {
            fprintf (stderr, "bench: making the verify's sandbox ahead: %s\n", kiwi_error_msg (err));
            exit (1);
        }
        *made = now_ms () - t0;
        t0 = now_ms ();
    }
    if (kiwi_phase_verify (env, pc, &vr, &r, NULL, NULL, &err) < 0 || r.exit_code != 0) {
        fprintf (stderr, "bench: verify `%s`: %s %s\n", command, err ? kiwi_error_msg (err) : "", r.output ? r.output : "");
        exit (1);
    }
    kiwi_exec_result_clear (&r);
    return now_ms () - t0;
}

static double
timed_verify (kiwi_sandbox_env *env, const kiwi_phase_config *pc, const char *image, const char *ws,
              const char *snap, const char *command)
{
    return timed_verify_as (env, pc, image, ws, snap, command, NULL);
}

static double
timed_cli (const char *const *argv)
{
    double t0 = now_ms ();
    if (cli (argv) != 0)
        exit (1);
    return now_ms () - t0;
}

static void
report (const char *what, const char *a, double *av, const char *b, double *bv, int n, const char *target)
{
    double x = median (av, n), y = median (bv, n);
    printf ("%s (%d runs): %s median %.1f ms, %s median %.1f ms, ratio %.2f (target %s)\n", what, n, a, x, b, y, x / y,
            target);
}

/* The worker's settings from the environment into *wc (worker id
 * "bench-deps"), its egress rules applied (KIWI_EGRESS_APPLY=true) and
 * checked unless open_egress; what holds is described in `said`. */
static int
production_setup (kiwi_worker_config *wc, bool open_egress, char *said, size_t cap)
{
    kiwi_error_t err = NULL;
    kiwi_worker_config_init (wc);
    if (kiwi_worker_config_load (wc, NULL, (const char *const *) environ, 0, NULL, 0, NULL, &err) < 0
        || kiwi_worker_config_set (wc, "worker.id", "bench-deps", "bench_deps", &err) < 0) {
        fprintf (stderr, "bench: the worker's settings: %s\n", kiwi_error_msg (err));
        return -1;
    }
    if (wc->egress_apply && kiwi_egress_apply_rules (wc, &err) < 0) {
        fprintf (stderr, "bench: applying the egress rules (KIWI_EGRESS_APPLY=true): %s\n", kiwi_error_msg (err));
        return -1;
    }
    char detail[2048];
    bool hold = kiwi_egress_rules_hold (wc, detail, sizeof detail);
    if (!hold && !open_egress) {
        fprintf (stderr, "bench: not the production configuration: the host's egress rules: %s\n"
                         "bench: (set KIWI_EGRESS_APPLY=true to apply them first, or pass --open-egress to measure "
                         "without them)\n",
                 detail);
        return -1;
    }
    snprintf (said, cap, "%s; KIWI_INSTALL_EGRESS=%s",
              hold ? (wc->egress_apply ? "egress rules applied and checked" : "egress rules in place (checked)")
                   : "NOT production: egress rules missing (--open-egress)",
              wc->install_egress && *wc->install_egress ? wc->install_egress : "registries");
    return 0;
}

int
main (int argc, char **argv)
{
    bench_opts o = { .driver = "docker", .image = "kiwi/node:22", .runs = 5 };
    const char *work = "/var/tmp/kiwi-bench-deps";
    const char *command = "npx jest", *given = NULL;
    bool open_egress = false;
    for (int i = 1; i < argc; i++) {
        if (bench_opt (argc, argv, &i, &o))
            continue;
        if (strcmp (argv[i], "--work") == 0 && i + 1 < argc)
            work = argv[++i];
        else if (strcmp (argv[i], "--command") == 0 && i + 1 < argc)
            command = argv[++i];
        else if (strcmp (argv[i], "--snapshot") == 0 && i + 1 < argc)
            given = argv[++i];
        else if (strcmp (argv[i], "--cpus") == 0 && i + 1 < argc && atof (argv[i + 1]) > 0)
            limits.cpus = atof (argv[++i]);
        else if (strcmp (argv[i], "--open-egress") == 0)
            open_egress = true;
        else {
            fprintf (stderr, "usage: bench_deps [--driver docker|gvisor] [--image IMAGE] [--runs N] [--work DIR] "
                             "[--command CMD] [--snapshot DIR] [--cpus N] [--open-egress]\n");
            return strcmp (argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    const char *driver = o.driver, *image = o.image;
    int runs = o.runs < 3 ? 3 : o.runs;
    const char *store_url = getenv ("KIWI_STORE_URL");
    const kiwi_sandbox_driver *drv = NULL;
    kiwi_sandbox_env *env = bench_env_open (driver, &drv);
    if (env == NULL)
        return 1;
    kiwi_error_t err = NULL;
    /* the production configuration: the worker's settings, its egress
     * rules, its proxy for Phase A */
    kiwi_worker_config wc;
    char production[1024];
    if (production_setup (&wc, open_egress, production, sizeof production) < 0)
        return 1;
    const char *runtime = strcmp (drv->name, "gvisor") == 0 ? "runsc" : "runc";
    char ws[1024], snap[1024], bake[1024], fresh[1024], baked[256];
    snprintf (ws, sizeof ws, "%s/tree", work);
    snprintf (snap, sizeof snap, "%s/snapshot", work);
    if (given != NULL)
        snprintf (snap, sizeof snap, "%s", given);
    snprintf (bake, sizeof bake, "%s/bake", work);
    snprintf (fresh, sizeof fresh, "%s/fresh", work);
    snprintf (baked, sizeof baked, "kiwi-bench/deps-%s", runtime);
    mkdir (work, 0700);
    if (sh ("rm -rf %s && cp -a %s/bench/fixtures/ts-jest %s", ws, KIWI_SOURCE_DIR, ws) != 0)
        return 1;
    kiwi_phase_config lower = { .host_env = (const char *const *) environ };
    kiwi_phase_config copy = { .host_env = (const char *const *) environ, .copy_snapshot = true };

    /* the dependencies: Kiwi's own Phase A, once */
    char p[1100];
    snprintf (p, sizeof p, "%s/src.tar", snap);
    if (access (p, R_OK) != 0) {
        /* as the worker installs: the plan's command and settings, Phase A
         * given the install's input only, the dependency locations kept */
        cleanup_strv kiwi_strv proxy_env = KIWI_STRV_INIT;
        bool proxied = false;
        pid_t proxy_pid = 0;
        if (kiwi_proxy_phase_env (&wc, &proxy_env, &proxied, &err) < 0
            || (proxied && kiwi_proxy_start_once (&wc, &proxy_pid, &err) < 0)) {
            fprintf (stderr, "bench: the egress proxy: %s\n", kiwi_error_msg (err));
            return 1;
        }
        fprintf (stderr, "bench: Phase A %s\n", proxied ? "through the egress proxy (as the worker runs it)"
                                                          : "with open egress (KIWI_INSTALL_EGRESS=open)");
        /* the CA bundle the worker gives Phase A (behind the proxy, with
         * Kiwi's CA: the registries' TLS is the proxy's) */
        char phase_ca[PATH_MAX];
        const char *bundle = NULL;
        if (kiwi_egress_phase_ca_bundle (&wc, proxied, phase_ca, sizeof phase_ca, &bundle, &err) < 0) {
            fprintf (stderr, "bench: Phase A's CA bundle: %s\n", kiwi_error_msg (err));
            kiwi_proxy_stop (proxy_pid);
            return 1;
        }
        kiwi_phase_config ic = { .host_env = (const char *const *) environ,
                                 .proxy_env = proxied ? kiwi_strv_list (&proxy_env) : NULL,
                                 .ca_bundle = bundle ? bundle : "/etc/ssl/certs/ca-certificates.crt",
                                 .install_timeout_ms = (int64_t) wc.install_timeout_s * 1000 };
        kiwi_install_plan plan;
        kiwi_strv input = KIWI_STRV_INIT, dep_src = KIWI_STRV_INIT, dep_home = KIWI_STRV_INIT;
        if (kiwi_install_plan_make (ws, "node", &plan, &err) < 0 || plan.argv.n == 0
            || kiwi_install_hashed_files (ws, &plan, &input, &err) < 0
            || kiwi_install_dep_locations (&plan, &dep_src, &dep_home, &err) < 0) {
            fprintf (stderr, "bench: the install plan: %s\n", err ? kiwi_error_msg (err) : "no install command");
            return 1;
        }
        kiwi_install_request ir = { .image = image, .workspace = ws, .input = kiwi_strv_list (&input),
                                    .dep_src = kiwi_strv_list (&dep_src), .dep_home = kiwi_strv_list (&dep_home),
                                    .argv = kiwi_strv_list (&plan.argv), .extra_env = kiwi_strv_list (&plan.install_env),
                                    .task_id = "bench", .snapshot_dir = snap };
        kiwi_install_result res;
        fprintf (stderr, "bench: installing the fixture's dependencies once (Phase A: %s)\n", plan.display);
        int irc = kiwi_phase_install (env, &ic, &ir, &res, &err);
        kiwi_proxy_stop (proxy_pid);
        if (irc < 0 || res.status != KIWI_INSTALL_OK) {
            fprintf (stderr, "bench: install: %s %s\n", err ? kiwi_error_msg (err) : res.reason,
                     res.output ? res.output : "");
            return 1;
        }
        kiwi_install_result_clear (&res);
        kiwi_install_plan_clear (&plan);
        kiwi_strv_free (&input);
        kiwi_strv_free (&dep_src);
        kiwi_strv_free (&dep_home);
    }
    char *deps = NULL;
    if (kiwi_phase_snapshot_lower (env, &lower, snap, 0, &deps, &err) < 0 || deps == NULL) {
        fprintf (stderr, "bench: %s\n", err ? kiwi_error_msg (err) : "the driver lays no snapshot");
        return 1;
    }
    /* the image, mounted beside the bench to be counted and baked */
    char look[1100];
    snprintf (look, sizeof look, "%s/look", work);
    if (sh ("umount %s 2>/dev/null; mkdir -p %s && mount -t squashfs -o loop,ro %s %s", look, look, deps, look) != 0)
        return 1;
    char line[512] = "";
    snprintf (p, sizeof p, "echo $(du -sb --apparent-size %s/src | cut -f1) bytes, $(find %s/src -type f | wc -l) files "
              "in src, $(du -sb --apparent-size %s/home | cut -f1) bytes, $(find %s/home -type f | wc -l) files in home",
              look, look, look, look);
    FILE *du = popen (p, "r");
    if (du != NULL && fgets (line, sizeof line, du) != NULL)
        printf ("dependencies: %s", line);
    if (du != NULL)
        pclose (du);

    /* the baseline: the same dependencies and tree baked into an image */
    if (sh ("rm -rf %s && cp -a %s %s", bake, look, bake) != 0 || sh ("umount %s && rmdir %s", look, look) != 0
        || sh ("cp -a %s/. %s/src/", ws, bake) != 0)
        return 1;
    char script[4096];
    snprintf (script, sizeof script,
              "docker rm -f kiwi-bench-bake >/dev/null 2>&1; docker create --name kiwi-bench-bake %s true >/dev/null "
              "&& docker cp %s/. kiwi-bench-bake:/kiwi && docker commit kiwi-bench-bake %s >/dev/null; rc=$?; "
              "docker rm -f kiwi-bench-bake >/dev/null; exit $rc",
              image, bake, baked);
    if (sh ("%s", script) != 0)
        return 1;
    snprintf (script, sizeof script, "cd /kiwi/src && %s", command);
    const char *run_cmd[] = { "docker", "run",  "--rm",          "--network", "none", "--runtime", runtime,
                              "--user", "1000:1000", "-e", "HOME=/kiwi/home", baked, "/bin/sh", "-c", script, NULL };
    const char *run_true[] = { "docker", "run", "--rm", "--network", "none", "--runtime", runtime, image, "true", NULL };
    /* the same with the CPU and memory ceilings every Kiwi sandbox has by
     * default: what is left between the two is how the dependencies and
     * the tree arrive, not the quota (jest runs a worker per core) */
    char cpus[32], mem[32];
    snprintf (cpus, sizeof cpus, "%.2f", limits.cpus > 0 ? limits.cpus : KIWI_SANDBOX_DEFAULT_CPUS);
    snprintf (mem, sizeof mem, "%dm", KIWI_SANDBOX_DEFAULT_MEMORY_MB);
    const char *run_limited[] = { "docker", "run", "--rm", "--network", "none", "--runtime", runtime, "--cpus", cpus,
                                  "--memory", mem, "--memory-swap", mem, "--user", "1000:1000", "-e",
                                  "HOME=/kiwi/home", baked, "/bin/sh", "-c", script, NULL };

    kiwi_store *store = NULL;
    char digest[KIWI_STORE_DIGEST_MAX] = "";
    if (store_url != NULL && *store_url) {
        if (kiwi_store_open (store_url, getenv ("KIWI_STORE_USER"), getenv ("KIWI_STORE_PASSWORD"), &store, &err) < 0
            || kiwi_store_push (store, "bench-deps", snap, digest, &err) < 0) {
            fprintf (stderr, "bench: store: %s\n", kiwi_error_msg (err));
            return 1;
        }
    }

    double *kl = calloc ((size_t) runs, sizeof (double)), *kc = calloc ((size_t) runs, sizeof (double));
    double *dr = calloc ((size_t) runs, sizeof (double)), *kt = calloc ((size_t) runs, sizeof (double));
    double *dt = calloc ((size_t) runs, sizeof (double)), *fr = calloc ((size_t) runs, sizeof (double));
    double *wm = calloc ((size_t) runs, sizeof (double)), *dl = calloc ((size_t) runs, sizeof (double));
    double *ka = calloc ((size_t) runs, sizeof (double)), *kla = calloc ((size_t) runs, sizeof (double));
    double *km = calloc ((size_t) runs, sizeof (double)), *klm = calloc ((size_t) runs, sizeof (double));
    /* warm-up: caches of the page cache and dockerd alike */
    timed_verify (env, &lower, image, ws, snap, command);
    timed_cli (run_cmd);
    for (int i = 0; i < runs; i++) {
        kl[i] = timed_verify (env, &lower, image, ws, snap, command);
        dr[i] = timed_cli (run_cmd);
        dl[i] = timed_cli (run_limited);
        kc[i] = timed_verify (env, &copy, image, ws, snap, command);
        kla[i] = timed_verify_as (env, &lower, image, ws, snap, command, &klm[i]);
        kt[i] = timed_verify (env, &lower, image, ws, snap, "true");
        dt[i] = timed_cli (run_true);
        ka[i] = timed_verify_as (env, &lower, image, ws, snap, "true", &km[i]);
        if (store != NULL) {
            char tmp[1100];
            snprintf (tmp, sizeof tmp, "%s.partial", fresh);
            sh ("rm -rf %s %s && mkdir %s", fresh, tmp, tmp);
            double t0 = now_ms ();
            if (kiwi_store_pull (store, digest, tmp, 0, &err) < 0 || rename (tmp, fresh) < 0) {
                fprintf (stderr, "bench: pull: %s\n", err ? kiwi_error_msg (err) : strerror (errno));
                return 1;
            }
            timed_verify (env, &lower, image, ws, fresh, command);
            fr[i] = now_ms () - t0;
            wm[i] = timed_verify (env, &lower, image, ws, snap, command);
        }
    }
    printf ("driver %s, image %s, command `%s`, Kiwi's sandboxes %s cores\n", drv->name, image, command, cpus);
    printf ("configuration: %s\n", production);
    report ("verify of the test command", "kiwi (laid)", kl, "docker run (baked)", dr, runs, "<= 1.10");
    report ("the same, against docker run with the CPU and memory ceilings of Kiwi's sandboxes", "kiwi (laid)", kl,
            "docker run (baked, --cpus --memory)", dl, runs, "<= 1.10");
    report ("the same, a session's verify (its sandbox made ahead: a round's, the deciding one)",
            "kiwi (laid, made ahead)", kla, "docker run (baked)", dr, runs, "<= 1.10");
    report ("the same, against docker run with the CPU and memory ceilings of Kiwi's sandboxes", "kiwi (laid, made ahead)", kla,
            "docker run (baked, --cpus --memory)", dl, runs, "<= 1.10");
    report ("old copying verify of the test command", "kiwi (copied)", kc, "docker run (baked)", dr, runs, "-");
    report ("verify of `true` with the snapshot, its sandbox made in the verify (step 0)",
            "kiwi", kt, "docker run true", dt, runs, "-");
    report ("verify of `true` with the snapshot, a session's verify (its sandbox made ahead: a round's, the deciding one)",
            "kiwi (made ahead)", ka, "docker run true", dt, runs, "<= 0.90");
    printf ("making the sandbox ahead, off the verify's path: median %.1f ms (`true`), %.1f ms (test command)\n",
            median (km, runs), median (klm, runs));
    if (store != NULL)
        report ("first verify of a key another host installed", "fresh host (fetch + image + verify)", fr,
                "warm host", wm, runs, "<= 1.20");
    else
        printf ("first verify on a fresh host: no KIWI_STORE_URL, not measured\n");
    kiwi_store_close (store);
    kiwi_sandbox_env_close (env);
    kiwi_worker_config_clear (&wc);
    free (deps);
    return 0;
}
