/*
 * bench_sandbox.c: what Kiwi's driver costs against the Docker CLI, measured
 * in one run on the same machine (ratios, never absolute thresholds).
 *
 *   1. A Phase B verify of `true` through Kiwi (fresh sandbox, tree put by
 *      archive, exec, removal) against `docker run --rm --network none
 *      IMAGE true`.
 *   2. An exec of `true` in a persistent sandbox through Kiwi against
 *      `docker exec CONTAINER true` on the same container.
 *   3. The worker-side memory each live sandbox adds (resident set growth
 *      over N live sandboxes).
 *
 * Usage: bench_sandbox [--driver docker|gvisor] [--image IMAGE] [--runs N]
 * Reads the stack's env file for the Docker socket (see tests/support).
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"
#include "sandbox/phases.h"
#include "common/proc.h"
#include "sandbox/sandbox.h"

extern char **environ;

static long
rss_kib (void)
{
    FILE *f = fopen ("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets (line, sizeof line, f))
        if (strncmp (line, "VmRSS:", 6) == 0)
            kib = atol (line + 6);
    if (f)
        fclose (f);
    return kib;
}

int
main (int argc, char **argv)
{
    bench_opts o = { .driver = "docker", .image = "kiwi/base:bookworm", .runs = 15 };
    for (int i = 1; i < argc; i++) {
        if (!bench_opt (argc, argv, &i, &o)) {
            fprintf (stderr, "usage: bench_sandbox [--driver docker|gvisor] [--image IMAGE] [--runs N]\n");
            return strcmp (argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    const char *driver = o.driver, *image = o.image;
    int runs = o.runs < 3 ? 3 : o.runs;
    const kiwi_sandbox_driver *drv = NULL;
    kiwi_sandbox_env *env = bench_env_open (driver, &drv);
    if (env == NULL)
        return 1;
    kiwi_error_t err = NULL;
    const char *runtime = strcmp (drv->name, "gvisor") == 0 ? "runsc" : "runc";
    char ws[] = "/tmp/kiwi-bench-XXXXXX";
    if (mkdtemp (ws) == NULL)
        return 1;
    double *kiwi_t = calloc ((size_t) runs, sizeof (double)), *cli_t = calloc ((size_t) runs, sizeof (double));
    kiwi_phase_config pc = { .host_env = (const char *const *) environ };

    /* 1. verify of `true`, interleaved so drift hits both alike */
    const char *run_argv[] = { "docker", "run", "--rm", "--network", "none", "--runtime", runtime, image, "true", NULL };
    cli (run_argv); /* warm-up */
    for (int i = 0; i < runs; i++) {
        kiwi_verify_request vr = { .image = image, .workspace = ws, .command = "true", .timeout_ms = 60000,
                                   .task_id = "bench" };
        kiwi_exec_result r;
        double t0 = now_ms ();
        if (kiwi_phase_verify (env, &pc, &vr, &r, NULL, NULL, &err) < 0 || r.exit_code != 0) {
            fprintf (stderr, "bench: verify: %s\n", kiwi_error_msg (err));
            return 1;
        }
        kiwi_t[i] = now_ms () - t0;
        kiwi_exec_result_clear (&r);
        t0 = now_ms ();
        if (cli (run_argv) != 0)
            return 1;
        cli_t[i] = now_ms () - t0;
    }
    double kv = median (kiwi_t, runs), cv = median (cli_t, runs);
    printf ("verify `true` (%s, %d runs): kiwi median %.1f ms, docker run median %.1f ms, ratio %.2f\n", drv->name,
            runs, kv, cv, kv / cv);

    /* 2. exec in the persistent sandbox */
    kiwi_sandbox_spec spec = { .image = image, .network = KIWI_NET_NONE, .task_id = "bench", .phase = "session" };
    kiwi_sandbox *sb = NULL;
    if (kiwi_sandbox_create (env, &spec, &sb, &err) < 0) {
        fprintf (stderr, "bench: %s\n", kiwi_error_msg (err));
        return 1;
    }
    char cname[256];
    snprintf (cname, sizeof cname, "%s", kiwi_sandbox_id (sb));
    const char *exec_argv[] = { "docker", "exec", cname, "true", NULL };
    const char *true_argv[] = { "true", NULL };
    int xruns = runs * 3;
    double *kx = calloc ((size_t) xruns, sizeof (double)), *cx = calloc ((size_t) xruns, sizeof (double));
    for (int i = 0; i < xruns; i++) {
        kiwi_exec_spec x = { .argv = true_argv, .timeout_ms = 60000 };
        kiwi_exec_result r;
        double t0 = now_ms ();
        if (kiwi_sandbox_exec (sb, &x, &r, &err) < 0 || r.exit_code != 0) {
            fprintf (stderr, "bench: exec: %s\n", kiwi_error_msg (err));
            return 1;
        }
        kx[i] = now_ms () - t0;
        kiwi_exec_result_clear (&r);
        t0 = now_ms ();
        if (cli (exec_argv) != 0)
            return 1;
        cx[i] = now_ms () - t0;
    }
    double ke = median (kx, xruns), ce = median (cx, xruns);
    printf ("exec `true` in a persistent sandbox (%s, %d runs): kiwi median %.1f ms, docker exec median %.1f ms, "
            "ratio %.2f\n",
            drv->name, xruns, ke, ce, ke / ce);
    kiwi_sandbox_destroy (sb, &err);

    /* 3. worker-side memory per live sandbox */
    enum { LIVE = 8 };
    kiwi_sandbox *live[LIVE];
    long before = rss_kib ();
    size_t heap_before = mallinfo2 ().uordblks;
    for (int i = 0; i < LIVE; i++)
        if (kiwi_sandbox_create (env, &spec, &live[i], &err) < 0) {
            fprintf (stderr, "bench: %s\n", kiwi_error_msg (err));
            return 1;
        }
    long after = rss_kib ();
    size_t heap_after = mallinfo2 ().uordblks;
    for (int i = 0; i < LIVE; i++)
        kiwi_sandbox_destroy (live[i], &err);
    printf ("worker memory per live sandbox (%s, %d live): %zu bytes of heap each; resident %ld KiB before, "
            "%ld KiB after\n",
            drv->name, LIVE, (heap_after - heap_before) / LIVE, before, after);
    rmdir (ws);
    free (kiwi_t);
    free (cli_t);
    free (kx);
    free (cx);
    kiwi_sandbox_env_close (env);
    return 0;
}
