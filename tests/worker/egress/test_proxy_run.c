/*
 * test_proxy_run.c: the egress proxy run as the worker runs it, decided
 * from outside Squid.
 *   test_env     started as `kiwi-worker --once` starts it
 *                (kiwi_proxy_start_once: proxy.sh conf, then proxy.sh run,
 *                which execs Squid) by a process that holds the worker's
 *                secrets in its environment: the names of the environment
 *                variables of every process of the proxy's process group,
 *                from /proc/<pid>/environ. None of the worker's may be
 *                there (ANTHROPIC_API_KEY, KIWI_REDIS_PASSWORD,
 *                KIWI_GIT_TOKEN, ...): Squid gets PATH and LANG only. And
 *                the log bound (KIWI_INSTALL_PROXY_LOG_MB) reaches
 *                proxy.sh run.
 *   test_runner_rotation  run by the daemon's runner (proxy-runner.h): a
 *                denial logged before Squid rotates its log (SIGUSR1, as
 *                proxy.sh run does past the bound) and one logged after
 *                both reach the runner's callback, in order.
 *
 * The tests run in a network namespace of their own (unshare), with a
 * bridge of their own as the install bridge: nothing on the host changes,
 * and Squid has nowhere to send anything. Need root and Squid; skip (fail
 * in the full suite) without them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <ev.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "need.h"
#include "worker/egress/egress-proxy.h"
#include "worker/egress/proxy-runner.h"

#define BRIDGE "kpxenv0"
#define GATEWAY "10.231.250.1"
#define PROXY_SCRIPT KIWI_SOURCE_DIR "/ops/egress/proxy.sh"
#define PORTS "23128,23129,23130"
#define EXPLICIT_PORT 23128

/* The process group of pid `pgid` from /proc/<p>/stat (the field after
 * the command's closing parenthesis: state ppid pgrp). */
static bool
in_group (const char *pid, pid_t pgid)
{
    char path[64], buf[1024];
    snprintf (path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen (path, "r");
    if (f == NULL)
        return false;
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    fclose (f);
    buf[n] = '\0';
    char *close = strrchr (buf, ')');
    char state;
    int ppid, pgrp;
    return close && sscanf (close + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == (int) pgid;
}

/* Whether a process of group pgid was started with `arg` among its
 * arguments (/proc/<pid>/cmdline). */
static bool
group_has_arg (pid_t pgid, const char *arg)
{
    DIR *d = opendir ("/proc");
    assert_non_null (d);
    struct dirent *de;
    bool found = false;
    while (!found && (de = readdir (d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9' || !in_group (de->d_name, pgid))
            continue;
        char path[64], buf[4096];
        snprintf (path, sizeof path, "/proc/%s/cmdline", de->d_name);
        FILE *f = fopen (path, "r");
        if (f == NULL)
            continue;
        size_t n = fread (buf, 1, sizeof buf - 1, f);
        fclose (f);
        buf[n] = '\0';
        for (size_t i = 0; i < n && !found; i += strlen (buf + i) + 1)
            found = strcmp (buf + i, arg) == 0;
    }
    closedir (d);
    return found;
}

/* The names of the environment variables of every process of group pgid
 * into names (" A B ... ", each once); the number of processes in *procs. */
static void
env_names (pid_t pgid, char *names, size_t cap, int *procs)
{
    DIR *d = opendir ("/proc");
    assert_non_null (d);
    struct dirent *de;
    *procs = 0;
    snprintf (names, cap, " ");
    while ((de = readdir (d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9' || !in_group (de->d_name, pgid))
            continue;
        char path[64];
        snprintf (path, sizeof path, "/proc/%s/environ", de->d_name);
        FILE *f = fopen (path, "r");
        if (f == NULL)
            continue;
        (*procs)++;
        static char env[65536];
        size_t n = fread (env, 1, sizeof env - 1, f);
        fclose (f);
        env[n] = '\0';
        for (size_t i = 0; i < n; i += strlen (env + i) + 1) {
            char name[256];
            snprintf (name, sizeof name, " %.*s ", (int) strcspn (env + i, "="), env + i);
            size_t len = strlen (names);
            if (strstr (names, name) == NULL && len + strlen (name) < cap)
                snprintf (names + len, cap - len, "%s", name + 1);
        }
    }
    closedir (d);
}

static char dir[64];
static kiwi_worker_config cfg;

/* A network namespace of the test's own with the install bridge, the state
 * directory, and the worker's settings (with the worker's secrets in this
 * process's environment). */
static int
group_setup (void **state)
{
    (void) state;
    if (geteuid () != 0 || access ("/usr/sbin/squid", X_OK) != 0)
        return 0; /* each test says what it needs */
    char out[512];
    if (unshare (CLONE_NEWNET) != 0
        || kiwi_test_sh ("ip link set lo up && ip link add " BRIDGE " type bridge && ip addr add " GATEWAY
                         "/24 dev " BRIDGE " && ip link set " BRIDGE " up",
                         out, sizeof out)
               != 0)
        return -1;
    snprintf (dir, sizeof dir, "/tmp/kiwi-proxy-run-XXXXXX");
    if (mkdtemp (dir) == NULL || chmod (dir, 0755) != 0)
        return -1;
    /* the worker's secrets, as a worker holds them */
    setenv ("ANTHROPIC_API_KEY", "sk-test-not-a-key", 1);
    setenv ("KIWI_REDIS_PASSWORD", "not-a-password", 1);
    setenv ("KIWI_GIT_TOKEN", "not-a-token", 1);
    setenv ("KIWI_STORE_PASSWORD", "not-a-password", 1);
    kiwi_worker_config_init (&cfg);
    char state_dir[128];
    snprintf (state_dir, sizeof state_dir, "KIWI_STATE_DIR=%s", dir);
    const char *env[] = { state_dir, "KIWI_INSTALL_BRIDGE=" BRIDGE, "KIWI_EGRESS_PROXY_SCRIPT=" PROXY_SCRIPT,
                          "KIWI_INSTALL_PROXY_PORTS=" PORTS, "KIWI_WORKER_ID=proxy-run-test",
                          "KIWI_INSTALL_PROXY_LOG_MB=7", NULL };
    kiwi_error_t err = NULL;
    int idx = 0;
    if (kiwi_worker_config_load (&cfg, NULL, env, 0, NULL, 0, &idx, &err) < 0) {
        fprintf (stderr, "%s\n", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return -1;
    }
    return 0;
}

static int
group_teardown (void **state)
{
    (void) state;
    if (dir[0] == '\0')
        return 0;
    kiwi_worker_config_clear (&cfg);
    char cmd[128], out[256];
    snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
    kiwi_test_sh (cmd, out, sizeof out);
    return 0;
}

static void
need (void)
{
    KIWI_NEED (geteuid () == 0, "root (a network namespace, Squid's user)");
    KIWI_NEED (access ("/usr/sbin/squid", X_OK) == 0, "squid (Debian: squid-openssl)");
}

static void
test_env (void **state)
{
    (void) state;
    need ();
    kiwi_error_t err = NULL;
    pid_t pid = 0;
    if (kiwi_proxy_start_once (&cfg, &pid, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    assert_true (pid > 0);

    char names[4096];
    int procs = 0;
    env_names (pid, names, sizeof names, &procs);
    bool bound = group_has_arg (pid, "--log-max-mb") && group_has_arg (pid, "7");
    kiwi_proxy_stop (pid);
    assert_true (bound); /* KIWI_INSTALL_PROXY_LOG_MB reached proxy.sh run */
    print_message ("%d process(es) in the proxy's group; their variables: %s\n", procs, names);
    assert_true (procs >= 2); /* squid and proxy.sh's watcher */
    const char *secret[] = { "ANTHROPIC_API_KEY", "KIWI_REDIS_PASSWORD", "KIWI_GIT_TOKEN", "KIWI_STORE_PASSWORD",
                             "KIWI_STATE_DIR", NULL };
    for (size_t i = 0; secret[i]; i++) {
        char want[128];
        snprintf (want, sizeof want, " %s ", secret[i]);
        if (strstr (names, want) != NULL)
            fail_msg ("%s reached the proxy's process group (%s)", secret[i], names);
    }
    /* nothing but PATH and LANG (and what bash sets itself) */
    char copy[sizeof names];
    snprintf (copy, sizeof copy, "%s", names);
    for (char *save = NULL, *n = strtok_r (copy, " ", &save); n; n = strtok_r (NULL, " ", &save))
        if (strcmp (n, "PATH") != 0 && strcmp (n, "LANG") != 0 && strcmp (n, "PWD") != 0 && strcmp (n, "SHLVL") != 0
            && strcmp (n, "_") != 0)
            fail_msg ("the proxy's group has %s in its environment (%s)", n, names);
}

typedef struct {
    int n;
    char hosts[4][64];
} denials;

static void
on_denied (const kiwi_proxy_log_entry *e, const char *rule, void *userdata)
{
    (void) rule;
    denials *d = userdata;
    if (d->n < 4)
        snprintf (d->hosts[d->n], sizeof d->hosts[d->n], "%s", e->host);
    d->n++;
}

/* A connection to the explicit proxy, or -1. */
static int
dial (void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons (EXPLICIT_PORT) };
    inet_pton (AF_INET, GATEWAY, &sa.sin_addr);
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect (fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
        close (fd);
        fd = -1;
    }
    return fd;
}

/* A plain-HTTP request for http://HOST/ to the explicit proxy, answered
 * (403: HOST is not listed) before this returns. */
static void
request (const char *host)
{
    int fd = dial ();
    assert_true (fd >= 0);
    char req[256], buf[512];
    int n = snprintf (req, sizeof req, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host, host);
    assert_int_equal (write (fd, req, (size_t) n), n);
    ssize_t got = read (fd, buf, sizeof buf - 1);
    close (fd);
    assert_true (got > 12);
    buf[got] = '\0';
    assert_non_null (strstr (buf, " 403 "));
}

/* Runs the loop until `cond` holds, at most `ms`. */
#define PUMP(loop, cond, ms)                                                                                           \
    for (int kiwi__i = 0; !(cond) && kiwi__i < (ms) / 10; kiwi__i++) {                                                 \
        ev_run (loop, EVRUN_NOWAIT);                                                                                   \
        usleep (10000);                                                                                                \
    }

static void
test_runner_rotation (void **state)
{
    (void) state;
    need ();
    struct ev_loop *loop = ev_default_loop (0); /* the runner watches its child */
    kiwi_proxy_runner *r = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_proxy_runner_start (loop, &cfg, &r, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    denials d = { 0 };
    kiwi_proxy_runner_on_denied (r, on_denied, &d);
    char pidfile[128], log0[128];
    snprintf (pidfile, sizeof pidfile, "%s/egress-proxy/proxy-run-test/squid.pid", dir);
    snprintf (log0, sizeof log0, "%s/egress-proxy/proxy-run-test/access.log.0", dir);
    pid_t squid = 0;
    int fd = -1;
    for (int i = 0; i < 300 && (squid <= 0 || fd < 0); i++) { /* its pid file, then its port */
        ev_run (loop, EVRUN_NOWAIT);
        usleep (100000);
        FILE *f = fopen (pidfile, "r");
        if (f && fscanf (f, "%d", &squid) != 1)
            squid = 0;
        if (f)
            fclose (f);
        fd = squid > 0 ? dial () : -1;
    }
    assert_true (squid > 0);
    assert_true (fd >= 0);
    close (fd);

    request ("first.kiwi.invalid");
    PUMP (loop, d.n >= 1, 5000);
    assert_int_equal (d.n, 1);
    request ("second.kiwi.invalid"); /* logged, not yet read */
    assert_int_equal (kill (squid, SIGUSR1), 0);
    for (int i = 0; i < 100 && access (log0, F_OK) != 0; i++)
        usleep (50000);
    assert_int_equal (access (log0, F_OK), 0);
    request ("third.kiwi.invalid"); /* in the new file */
    PUMP (loop, d.n >= 3, 5000);
    kiwi_proxy_runner_stop (r);

    assert_int_equal (d.n, 3);
    assert_string_equal (d.hosts[0], "first.kiwi.invalid");
    assert_string_equal (d.hosts[1], "second.kiwi.invalid");
    assert_string_equal (d.hosts[2], "third.kiwi.invalid");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_env),
        cmocka_unit_test (test_runner_rotation),
    };
    return cmocka_run_group_tests (tests, group_setup, group_teardown);
}
