/*
 * test_install_bridge.c: one install bridge per proxying worker on a host
 * (worker/egress/install-bridge.h): the first free one taken, a named one refused
 * while another process holds it (with that process's pid), every one
 * released when its holder dies, however it dies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fs.h"
#include "worker/egress/install-bridge.h"
#include "sandbox/sandbox.h"

static int
setup (void **state)
{
    char *dir = strdup ("/tmp/kiwi-bridge-test.XXXXXX");
    if (dir == NULL || mkdtemp (dir) == NULL)
        return -1;
    *state = dir;
    return 0;
}

static int
teardown (void **state)
{
    kiwi_fs_remove_tree (*state, 10000, NULL);
    free (*state);
    return 0;
}

static void
test_first_free_and_named (void **state)
{
    char locks[4096];
    snprintf (locks, sizeof locks, "%s/run/kiwi/install-bridges", (char *) *state); /* created when missing */
    char a[16], b[16], c[16];
    int fa = -1, fb = -1, fc = -1;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_bridge_claim (locks, NULL, a, sizeof a, &fa, &err), 0);
    assert_string_equal (a, "kiwi-install0");
    assert_true (fa >= 0);
    assert_int_equal (kiwi_install_bridge_claim (locks, "", b, sizeof b, &fb, &err), 0);
    assert_string_equal (b, "kiwi-install1");
    /* a named one that is held: refused, nothing taken */
    assert_int_equal (kiwi_install_bridge_claim (locks, "kiwi-install1", c, sizeof c, &fc, &err), -1);
    assert_int_equal (fc, -1);
    char pid[64];
    snprintf (pid, sizeof pid, "pid %ld", (long) getpid ());
    assert_non_null (strstr (kiwi_error_msg (err), "KIWI_INSTALL_BRIDGE=kiwi-install1 is held by another worker"));
    assert_non_null (strstr (kiwi_error_msg (err), pid));
    kiwi_error_free (&err);
    /* a named free one, past the first free */
    assert_int_equal (kiwi_install_bridge_claim (locks, "kiwi-install7", c, sizeof c, &fc, &err), 0);
    assert_string_equal (c, "kiwi-install7");
    close (fc);
    /* released: the next one takes the lowest free again */
    close (fa);
    assert_int_equal (kiwi_install_bridge_claim (locks, NULL, a, sizeof a, &fa, &err), 0);
    assert_string_equal (a, "kiwi-install0");
    close (fa);
    close (fb);
}

static void
test_not_a_bridge (void **state)
{
    char name[16];
    int fd = -1;
    kiwi_error_t err = NULL;
    const char *bad[] = { "docker0", "kiwi-install16", "kiwi-install+", "../../etc/passwd" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal (kiwi_install_bridge_claim (*state, bad[i], name, sizeof name, &fd, &err), -1);
        assert_int_equal (fd, -1);
        assert_non_null (strstr (kiwi_error_msg (err), "KIWI_INSTALL_BRIDGE"));
        assert_non_null (strstr (kiwi_error_msg (err), "kiwi-install0 .. kiwi-install15"));
        kiwi_error_free (&err);
    }
}

static void
test_all_held (void **state)
{
    int fds[KIWI_INSTALL_BRIDGES];
    char name[16];
    kiwi_error_t err = NULL;
    for (int i = 0; i < KIWI_INSTALL_BRIDGES; i++)
        assert_int_equal (kiwi_install_bridge_claim (*state, NULL, name, sizeof name, &fds[i], &err), 0);
    assert_string_equal (name, "kiwi-install15");
    int fd = -1;
    assert_int_equal (kiwi_install_bridge_claim (*state, NULL, name, sizeof name, &fd, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "all 16 install bridges"));
    kiwi_error_free (&err);
    for (int i = 0; i < KIWI_INSTALL_BRIDGES; i++)
        close (fds[i]);
}

/* Another process holds kiwi-install0 (its pid named in the refusal);
 * killed with SIGKILL, it holds nothing. */
static void
test_other_process_and_its_death (void **state)
{
    int ready[2];
    assert_int_equal (pipe (ready), 0);
    pid_t child = fork ();
    assert_true (child >= 0);
    if (child == 0) {
        char name[16];
        int fd;
        kiwi_error_t err = NULL;
        int rc = kiwi_install_bridge_claim (*state, "kiwi-install0", name, sizeof name, &fd, &err);
        char c = rc == 0 ? 'y' : 'n';
        if (write (ready[1], &c, 1) != 1)
            _exit (1);
        pause ();
        _exit (0);
    }
    close (ready[1]);
    char c = 0;
    assert_int_equal (read (ready[0], &c, 1), 1);
    close (ready[0]);
    assert_int_equal (c, 'y');
    char name[16];
    int fd = -1;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_install_bridge_claim (*state, "kiwi-install0", name, sizeof name, &fd, &err), -1);
    char pid[64];
    snprintf (pid, sizeof pid, "pid %ld", (long) child);
    assert_non_null (strstr (kiwi_error_msg (err), pid));
    kiwi_error_free (&err);
    assert_int_equal (kiwi_install_bridge_claim (*state, NULL, name, sizeof name, &fd, &err), 0);
    assert_string_equal (name, "kiwi-install1");
    close (fd);
    kill (child, SIGKILL);
    int st;
    assert_int_equal (waitpid (child, &st, 0), child);
    assert_int_equal (kiwi_install_bridge_claim (*state, "kiwi-install0", name, sizeof name, &fd, &err), 0);
    close (fd);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_first_free_and_named, setup, teardown),
        cmocka_unit_test_setup_teardown (test_not_a_bridge, setup, teardown),
        cmocka_unit_test_setup_teardown (test_all_held, setup, teardown),
        cmocka_unit_test_setup_teardown (test_other_process_and_its_death, setup, teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
