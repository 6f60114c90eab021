/*
 * test_proxy_env.c: the egress proxy started as the worker starts it
 * (kiwi_proxy_start_once: proxy.sh conf, then proxy.sh run, which execs
 * Squid) by a process that holds the worker's secrets in its environment;
 * decided from outside Squid: the names of the environment variables of
 * every process of the proxy's process group, from /proc/<pid>/environ.
 * None of the worker's may be there (ANTHROPIC_API_KEY, KIWI_REDIS_PASSWORD,
 * KIWI_GIT_TOKEN, ...): Squid gets PATH and LANG only. And the log bound
 * (KIWI_INSTALL_PROXY_LOG_MB) reaches proxy.sh run.
 *
 * The test runs in a network namespace of its own (unshare), with a bridge
 * of its own as the install bridge: nothing on the host changes, and Squid
 * has nowhere to send anything. Needs root and Squid; skips (fails in the
 * full suite) without them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "need.h"
#include "worker/egress/egress-proxy.h"

#define BRIDGE "kpxenv0"
#define GATEWAY "10.231.250.1"
#define PROXY_SCRIPT KIWI_SOURCE_DIR "/ops/egress/proxy.sh"

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

static void
test_proxy_env (void **state)
{
    (void) state;
    KIWI_NEED (geteuid () == 0, "root (a network namespace, Squid's user)");
    KIWI_NEED (access ("/usr/sbin/squid", X_OK) == 0, "squid (Debian: squid-openssl)");
    assert_int_equal (unshare (CLONE_NEWNET), 0);
    char out[512];
    assert_int_equal (kiwi_test_sh ("ip link set lo up && ip link add " BRIDGE " type bridge && ip addr add " GATEWAY
                                    "/24 dev " BRIDGE " && ip link set " BRIDGE " up",
                                    out, sizeof out),
                      0);
    char dir[] = "/tmp/kiwi-proxy-env-XXXXXX";
    assert_non_null (mkdtemp (dir));
    assert_int_equal (chmod (dir, 0755), 0);

    /* the worker's secrets, as a worker holds them */
    setenv ("ANTHROPIC_API_KEY", "sk-test-not-a-key", 1);
    setenv ("KIWI_REDIS_PASSWORD", "not-a-password", 1);
    setenv ("KIWI_GIT_TOKEN", "not-a-token", 1);
    setenv ("KIWI_STORE_PASSWORD", "not-a-password", 1);

    kiwi_worker_config cfg;
    kiwi_worker_config_init (&cfg);
    char state_dir[128];
    snprintf (state_dir, sizeof state_dir, "KIWI_STATE_DIR=%s", dir);
    const char *env[] = { state_dir, "KIWI_INSTALL_BRIDGE=" BRIDGE, "KIWI_EGRESS_PROXY_SCRIPT=" PROXY_SCRIPT,
                          "KIWI_INSTALL_PROXY_PORTS=23128,23129,23130", "KIWI_WORKER_ID=proxy-env-test",
                          "KIWI_INSTALL_PROXY_LOG_MB=7", NULL };
    kiwi_error_t err = NULL;
    int idx = 0;
    assert_int_equal (kiwi_worker_config_load (&cfg, NULL, env, 0, NULL, 0, &idx, &err), 0);
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

    kiwi_worker_config_clear (&cfg);
    char cmd[256];
    snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
    kiwi_test_sh (cmd, out, sizeof out);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_proxy_env),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
