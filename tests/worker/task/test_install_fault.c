/*
 * test_install_fault.c: Phase A's outcome is the repository's only when
 * Kiwi's own part held (worker/task/pipeline-internal.h): the decision
 * after an install, and the egress proxy's liveness as kiwi_proxy_alive
 * (worker/egress/egress-proxy.h) reads it from outside the proxy: the
 * process its pid file names, that process's command line and state, and
 * its port. The "proxy" is a shell whose command line names the
 * configuration as Squid's does, beside a listener on loopback.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fs.h"
#include "worker/config.h"
#include "worker/egress/egress-proxy.h"
#include "worker/task/pipeline-internal.h"

static void
test_fault_after (void **state)
{
    (void) state;
    /* a verdict of the repository's: the same proxy from start to end */
    assert_int_equal (kiwi_install_fault_after (KIWI_INSTALL_FAILED, 100, 100), KIWI_INSTALL_FAULT_NONE);
    assert_int_equal (kiwi_install_fault_after (KIWI_INSTALL_TIMED_OUT, 100, 100), KIWI_INSTALL_FAULT_NONE);
    /* a failure while the proxy died, or was replaced */
    assert_int_equal (kiwi_install_fault_after (KIWI_INSTALL_FAILED, 100, 0), KIWI_INSTALL_FAULT_PROXY);
    assert_int_equal (kiwi_install_fault_after (KIWI_INSTALL_FAILED, 100, 101), KIWI_INSTALL_FAULT_PROXY);
    assert_int_equal (kiwi_install_fault_after (KIWI_INSTALL_TIMED_OUT, 100, 0), KIWI_INSTALL_FAULT_PROXY);
    assert_int_equal (kiwi_install_fault_after (KIWI_INSTALL_KILLED, 0, 0), KIWI_INSTALL_FAULT_PROXY);
    /* what a successful install made stands */
    assert_int_equal (kiwi_install_fault_after (KIWI_INSTALL_OK, 100, 0), KIWI_INSTALL_FAULT_NONE);
    assert_int_equal (kiwi_install_fault_after (KIWI_INSTALL_SKIPPED, 0, 0), KIWI_INSTALL_FAULT_NONE);
    assert_string_equal (kiwi_install_fault_str (KIWI_INSTALL_FAULT_PROXY), "egress_proxy");
    assert_string_equal (kiwi_install_fault_str (KIWI_INSTALL_FAULT_EGRESS_RULES), "egress_rules");
    assert_string_equal (kiwi_install_fault_str (KIWI_INSTALL_FAULT_NONE), "none");
}

typedef struct fixture {
    char dir[64];      /* the state dir */
    char proxy[128];   /* <state>/egress-proxy/<id> */
    int listener;
    int port;
    kiwi_worker_config cfg;
} fixture;

static int
setup (void **state)
{
    fixture *f = calloc (1, sizeof *f);
    if (f == NULL)
        return -1;
    snprintf (f->dir, sizeof f->dir, "/tmp/kiwi-fault-test.XXXXXX");
    if (mkdtemp (f->dir) == NULL)
        return -1;
    snprintf (f->proxy, sizeof f->proxy, "%s/egress-proxy/fault-test", f->dir);
    if (kiwi_fs_mkdir_p (f->proxy, 0700) < 0)
        return -1;
    f->listener = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    socklen_t len = sizeof sa;
    if (f->listener < 0 || bind (f->listener, (struct sockaddr *) &sa, sizeof sa) < 0 || listen (f->listener, 8) < 0
        || getsockname (f->listener, (struct sockaddr *) &sa, &len) < 0)
        return -1;
    f->port = ntohs (sa.sin_port);
    char ports[32];
    snprintf (ports, sizeof ports, "%d,%d,%d", f->port, f->port + 1, f->port + 2);
    kiwi_worker_config_init (&f->cfg);
    /* the "install bridge" is loopback: its gateway is 127.0.0.1 */
    if (kiwi_worker_config_set (&f->cfg, "KIWI_STATE_DIR", f->dir, "test", NULL) < 0
        || kiwi_worker_config_set (&f->cfg, "KIWI_WORKER_ID", "fault-test", "test", NULL) < 0
        || kiwi_worker_config_set (&f->cfg, "KIWI_INSTALL_BRIDGE", "lo", "test", NULL) < 0
        || kiwi_worker_config_set (&f->cfg, "KIWI_INSTALL_PROXY_PORTS", ports, "test", NULL) < 0)
        return -1;
    *state = f;
    return 0;
}

static int
teardown (void **state)
{
    fixture *f = *state;
    if (f->listener >= 0)
        close (f->listener);
    kiwi_worker_config_clear (&f->cfg);
    kiwi_fs_remove_tree (f->dir, 10000, NULL);
    free (f);
    return 0;
}

/* A process whose command line is `sh -c ... -f <proxy dir>/squid.conf`,
 * as Squid's is `squid -N -n kiwi<hash> -f <proxy dir>/squid.conf`. */
static pid_t
fake_squid (const fixture *f)
{
    char conf[256];
    snprintf (conf, sizeof conf, "%s/squid.conf", f->proxy);
    pid_t pid = fork ();
    if (pid == 0) {
        setpgid (0, 0); /* its sleep goes with it (kill (-pid)) */
        execl ("/bin/sh", "sh", "-c", "exec >/dev/null 2>&1; sleep 60; true", "-f", conf, (char *) NULL);
        _exit (127);
    }
    return pid;
}

static void
write_pid (const fixture *f, long pid)
{
    char path[256];
    snprintf (path, sizeof path, "%s/squid.pid", f->proxy);
    FILE *fp = fopen (path, "w");
    assert_non_null (fp);
    fprintf (fp, "%ld\n", pid);
    fclose (fp);
}

/* kiwi_proxy_alive's verdict: the pid when alive, else 0 with the error
 * containing `want`. */
static pid_t
alive (fixture *f, const char *want)
{
    pid_t pid = -1;
    kiwi_error_t err = NULL;
    int rc = kiwi_proxy_alive (&f->cfg, &pid, &err);
    if (want == NULL) {
        if (rc < 0)
            fail_msg ("not alive: %s", kiwi_error_msg (err));
        return pid;
    }
    assert_int_equal (rc, -1);
    assert_int_equal (pid, 0);
    if (strstr (kiwi_error_msg (err), want) == NULL)
        fail_msg ("'%s' not in '%s'", want, kiwi_error_msg (err));
    assert_non_null (strstr (kiwi_error_msg (err), "fault-test"));
    kiwi_error_free (&err);
    return 0;
}

static void
test_liveness (void **state)
{
    fixture *f = *state;
    alive (f, "names no process"); /* never started */
    pid_t sq = fake_squid (f);
    assert_true (sq > 0);
    write_pid (f, sq);
    for (int i = 0; i < 100; i++) { /* until the child has exec'd its command line */
        char path[64], buf[256] = "";
        snprintf (path, sizeof path, "/proc/%d/cmdline", (int) sq);
        FILE *fp = fopen (path, "r");
        size_t n = fp ? fread (buf, 1, sizeof buf - 1, fp) : 0;
        if (fp)
            fclose (fp);
        if (n > 3 && strcmp (buf, "sh") == 0)
            break;
        usleep (20000);
    }
    assert_int_equal (alive (f, NULL), sq);
    /* stopped: it accepts nothing */
    kill (sq, SIGSTOP);
    int st;
    waitpid (sq, &st, WUNTRACED);
    alive (f, "is stopped");
    kill (sq, SIGCONT);
    assert_int_equal (alive (f, NULL), sq);
    /* nothing on the port */
    close (f->listener);
    f->listener = -1;
    alive (f, "does not accept connections on 127.0.0.1");
    /* the pid file naming a process that runs something else (a pid
     * reused, or another worker's Squid) */
    write_pid (f, (long) getpid ());
    alive (f, "is not running");
    /* dead, its pid file left behind (SIGKILL) */
    write_pid (f, sq);
    kill (-sq, SIGKILL);
    waitpid (sq, &st, 0);
    alive (f, "is not running");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_fault_after),
        cmocka_unit_test_setup_teardown (test_liveness, setup, teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
