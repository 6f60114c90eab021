/*
 * bench-util.h: what the benchmarks share: a monotonic clock in ms, the
 * median of a sample, a command run to its end (the Docker CLI, the
 * baseline every benchmark measures against) and the options of the
 * sandbox benchmarks.
 */
#ifndef KIWI_BENCH_UTIL_H
#define KIWI_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/proc.h"
#include "sandbox/sandbox.h"

static inline double
now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline int
cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static inline double
median (double *v, int n)
{
    qsort (v, (size_t) n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Runs argv to its end; its exit status, or -1 when it could not run. */
static inline int
cli (const char *const *argv)
{
    kiwi_proc_result r;
    kiwi_error_t err = NULL;
    if (kiwi_proc_run (argv, NULL, NULL, 600000, 4096, &r, &err) < 0) {
        fprintf (stderr, "bench: %s\n", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return -1;
    }
    int rc = r.exit_code;
    if (rc != 0)
        fprintf (stderr, "bench: `%s %s` exited %d: %s\n", argv[0], argv[1], rc, r.output);
    kiwi_proc_result_clear (&r);
    return rc;
}

/* The options every sandbox benchmark takes: --driver, --image, --runs. */
typedef struct bench_opts {
    const char *driver;
    const char *image;
    int runs;
} bench_opts;

/* When argv[*i] is one of bench_opts' options and has its value, takes
 * both into *o (advancing *i past the value) and returns 1; 0 otherwise. */
static inline int
bench_opt (int argc, char **argv, int *i, bench_opts *o)
{
    if (*i + 1 >= argc)
        return 0;
    if (strcmp (argv[*i], "--driver") == 0)
        o->driver = argv[++*i];
    else if (strcmp (argv[*i], "--image") == 0)
        o->image = argv[++*i];
    else if (strcmp (argv[*i], "--runs") == 0)
        o->runs = atoi (argv[++*i]);
    else
        return 0;
    return 1;
}

/* Opens the sandbox environment of `driver` on the stack's dockerd
 * (KIWI_DOCKER_SOCKET, KIWI_STATE_DIR). NULL, having said why, when it
 * cannot. */
static inline kiwi_sandbox_env *
bench_env_open (const char *driver, const kiwi_sandbox_driver **drv_out)
{
    const char *sock = getenv ("KIWI_DOCKER_SOCKET");
    const char *state = getenv ("KIWI_STATE_DIR");
    kiwi_error_t err = NULL;
    const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (driver, &err);
    kiwi_sandbox_env *env = NULL;
    kiwi_sandbox_config cfg = { .docker_socket = sock ? sock : "/var/run/docker.sock",
                                .state_dir = state ? state : "/var/lib/kiwi", .worker_id = "bench" };
    if (drv == NULL || kiwi_sandbox_env_open (drv, &cfg, &env, &err) < 0) {
        fprintf (stderr, "bench: %s\n", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return NULL;
    }
    *drv_out = drv;
    return env;
}

#endif
