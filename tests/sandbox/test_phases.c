/*
 * test_phases.c: Phase A and Phase B against the real dockerd, under runc
 * and runsc. A real dependency is installed from the npm registry in Phase A
 * (through the CA bundle), snapshotted without the repository's own files,
 * and used offline by Phase B; a file deleted from the tree since the
 * install does not come back; failures and timeouts of Phase A are named; a
 * sparse file of 8 GB apparent size left by an install in a 128 MB sandbox
 * never reaches the worker's disk (the snapshot is bounded as it streams).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/archive/archive.h"
#include "need.h"
#include "sandbox-env.h"
#include "sandbox/phases.h"

extern char **environ;

static const char *drivers[] = { "docker", "gvisor" };

static const char *
node_image (void)
{
    return kiwi_test_env_or ("KIWI_TEST_NODE_IMAGE", "kiwi/node:20");
}

/* A scratch copy of a fixture: Phase B must see the current tree, so tests
 * change the copy, never the fixture. */
static char *
copy_fixture (const char *name)
{
    char *dir = NULL;
    assert_true (asprintf (&dir, "/tmp/kiwi-phases-%d-%s", (int) getpid (), name) > 0);
    char cmd[1024];
    snprintf (cmd, sizeof cmd, "rm -rf %s && cp -a %s/tests/fixtures/phases/%s %s", dir, KIWI_SOURCE_DIR, name, dir);
    assert_int_equal (system (cmd), 0);
    return dir;
}

static void
rm_rf (const char *dir)
{
    char cmd[1024];
    snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal (system (cmd), 0);
}

typedef struct {
    bool found;
} scan_ctx;

static int
scan_for_is_number (const kiwi_tar_entry *e, void *ud, kiwi_error_t *err)
{
    scan_ctx *s = ud;
    if (strcmp (e->name, "src/node_modules/is-number/package.json") == 0)
        s->found = true;
    /* the repository's own files are not in the snapshot */
    if (strcmp (e->name, "src/test.js") == 0 || strcmp (e->name, "src/package.json") == 0)
        fail_msg ("snapshot holds the repository's own file %s", e->name);
    return 0;
}

static void
test_install_then_verify_offline (void **state)
{
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest-phases");
        char *ws = copy_fixture ("npm-tiny");
        char stale[512];
        snprintf (stale, sizeof stale, "%s/stale.js", ws);
        FILE *f = fopen (stale, "w");
        fputs ("// present at install time only\n", f);
        fclose (f);
        /* a relative link climbing out of the tree is left out (dockerd
         * would refuse the whole archive); one inside stays */
        char link[600];
        snprintf (link, sizeof link, "%s/escape-rel", ws);
        assert_int_equal (symlink ("../../../../../../etc/passwd", link), 0);
        snprintf (link, sizeof link, "%s/inside-rel", ws);
        assert_int_equal (symlink ("test.js", link), 0);
        char snap[512];
        snprintf (snap, sizeof snap, "%s.snapshot", ws);
        kiwi_phase_config cfg = {
            .host_env = (const char *const *) environ,
            .ca_bundle = "/etc/ssl/certs/ca-certificates.crt",
        };
        const char *argv[] = { "npm", "ci", "--no-audit", "--no-fund", NULL };
        kiwi_install_request ireq = {
            .image = node_image (), .workspace = ws, .argv = argv, .task_id = "itest-phases", .snapshot_dir = snap,
        };
        kiwi_install_result ir;
        kiwi_error_t err = NULL;
        if (kiwi_phase_install (env, &cfg, &ireq, &ir, &err) < 0)
            fail_msg ("%s: %s", drivers[i], kiwi_error_msg (err));
        if (ir.status != KIWI_INSTALL_OK)
            fail_msg ("%s: install: %s\n%s", drivers[i], ir.reason, ir.output);
        kiwi_install_result_clear (&ir);

        /* the snapshot: dependencies only */
        char p[600];
        snprintf (p, sizeof p, "%s/src.tar", snap);
        FILE *tf = fopen (p, "rb");
        assert_non_null (tf);
        fseek (tf, 0, SEEK_END);
        long n = ftell (tf);
        rewind (tf);
        char *tar = malloc ((size_t) n);
        assert_int_equal (fread (tar, 1, (size_t) n, tf), (size_t) n);
        fclose (tf);
        scan_ctx sc = { 0 };
        assert_int_equal (kiwi_archive_list (tar, (size_t) n, scan_for_is_number, &sc, &err), 0);
        assert_true (sc.found);
        free (tar);

        /* the tree changes after the install: stale.js is gone */
        assert_int_equal (unlink (stale), 0);
        kiwi_verify_request vreq = {
            .image = node_image (),
            .workspace = ws,
            .snapshot_dir = snap,
            .command = "npm test 2>&1; echo net=$(cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' | tr '\\n' ,); "
                       "test -e stale.js && echo STALE-PRESENT; test -e /kiwi/ca && echo CA-PRESENT; "
                       "test -L escape-rel && echo ESCAPE-PRESENT; test -L inside-rel && echo INSIDE-LINK; "
                       "echo ssl=${SSL_CERT_FILE:-unset}",
            .timeout_ms = 120000,
            .task_id = "itest-phases",
        };
        kiwi_exec_result vr;
        if (kiwi_phase_verify (env, &cfg, &vreq, &vr, NULL, NULL, &err) < 0)
            fail_msg ("%s: verify: %s", drivers[i], kiwi_error_msg (err));
        if (strstr (vr.output, "tiny-ok") == NULL)
            fail_msg ("%s: verify output:\n%s", drivers[i], vr.output);
        assert_non_null (strstr (vr.output, "net=lo,"));
        assert_null (strstr (vr.output, "STALE-PRESENT"));
        assert_null (strstr (vr.output, "CA-PRESENT"));
        assert_null (strstr (vr.output, "ESCAPE-PRESENT"));
        assert_non_null (strstr (vr.output, "INSIDE-LINK"));
        assert_non_null (strstr (vr.output, "ssl=unset"));
        assert_int_equal (vr.exit_code, 0);
        kiwi_exec_result_clear (&vr);

        /* without the snapshot the same verify fails: the dependency really
         * came from Phase A */
        vreq.snapshot_dir = NULL;
        vreq.command = "npm test";
        assert_int_equal (kiwi_phase_verify (env, &cfg, &vreq, &vr, NULL, NULL, &err), 0);
        assert_int_not_equal (vr.exit_code, 0);
        assert_non_null (strstr (vr.output, "Cannot find module 'is-number'"));
        kiwi_exec_result_clear (&vr);

        snprintf (p, sizeof p, "rm -rf %s", snap);
        assert_int_equal (system (p), 0);
        rm_rf (ws);
        free (ws);
        kiwi_sandbox_env_close (env);
    }
}

static void
test_install_failure_and_timeout_are_named (void **state)
{
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest-phases");
        char *ws = copy_fixture ("npm-tiny");
        kiwi_phase_config cfg = { .host_env = (const char *const *) environ, .install_timeout_ms = 3000 };
        const char *fail_argv[] = { "/bin/sh", "-c", "echo resolving; echo 'error: E404 no such package' >&2; exit 7", NULL };
        kiwi_install_request ireq = {
            .image = node_image (), .workspace = ws, .argv = fail_argv, .display = "npm ci",
            .task_id = "itest-phases", .snapshot_dir = "/nonexistent",
        };
        kiwi_install_result ir;
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_phase_install (env, &cfg, &ireq, &ir, &err), 0);
        assert_int_equal (ir.status, KIWI_INSTALL_FAILED);
        assert_int_equal (ir.exit_code, 7);
        assert_non_null (strstr (ir.reason, "exited with status 7"));
        assert_non_null (strstr (ir.output, "E404 no such package"));
        /* the reason says why: the output's error line, quoted */
        assert_non_null (strstr (ir.reason, "install `npm ci` exited with status 7: \"error: E404 no such package\""));
        kiwi_install_result_clear (&ir);

        /* a full disk is named, with the sandbox's ceiling */
        const char *full_argv[] = { "/bin/sh", "-c", "echo 'tar: big.bin: Cannot write: No space left on device' >&2; exit 2",
                                    NULL };
        ireq.argv = full_argv;
        assert_int_equal (kiwi_phase_install (env, &cfg, &ireq, &ir, &err), 0);
        assert_int_equal (ir.status, KIWI_INSTALL_FAILED);
        assert_non_null (strstr (ir.reason, "exited with status 2: the sandbox's disk is full"));
        assert_non_null (strstr (ir.reason, "No space left on device"));
        kiwi_install_result_clear (&ir);

        const char *slow_argv[] = { "sleep", "infinity", NULL };
        ireq.argv = slow_argv;
        assert_int_equal (kiwi_phase_install (env, &cfg, &ireq, &ir, &err), 0);
        assert_int_equal (ir.status, KIWI_INSTALL_TIMED_OUT);
        assert_non_null (strstr (ir.reason, "KIWI_INSTALL_TIMEOUT"));
        kiwi_install_result_clear (&ir);

        ireq.argv = NULL;
        assert_int_equal (kiwi_phase_install (env, &cfg, &ireq, &ir, &err), 0);
        assert_int_equal (ir.status, KIWI_INSTALL_SKIPPED);
        kiwi_install_result_clear (&ir);
        rm_rf (ws);
        free (ws);
        kiwi_sandbox_env_close (env);
    }
}

/* Disk use of a host directory in KiB (du -sk, or --apparent-size). */
static long
du_kib (const char *dir, bool apparent)
{
    char cmd[1024];
    snprintf (cmd, sizeof cmd, "du -sk %s %s 2>/dev/null", apparent ? "--apparent-size" : "", dir);
    FILE *p = popen (cmd, "r");
    assert_non_null (p);
    long kib = -1;
    if (fscanf (p, "%ld", &kib) != 1)
        kib = -1;
    pclose (p);
    return kib;
}

static void
test_sparse_snapshot_is_bounded (void **state)
{
    /* KIWI_TEST_SPARSE_SIZE: a smaller apparent size, to run this against
     * an old build without filling the disk */
    const char *size = kiwi_test_env_or ("KIWI_TEST_SPARSE_SIZE", "8G");
    const char *state_dir = kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi");
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest-phases");
        char *ws = NULL, *parent = NULL, *snap = NULL, *extra = NULL;
        assert_true (asprintf (&ws, "/tmp/kiwi-phases-%d-sparse", (int) getpid ()) > 0);
        char cmd[2048];
        snprintf (cmd, sizeof cmd, "rm -rf %s && cp -a %s/tests/fixtures/hostile/sparse-snapshot %s", ws,
                  KIWI_SOURCE_DIR, ws);
        assert_int_equal (system (cmd), 0);
        /* the snapshot goes where the worker keeps them: the state dir */
        assert_true (asprintf (&parent, "%s/snapshots/itest-sparse-%d-%s", state_dir, (int) getpid (), drivers[i])
                     > 0);
        snprintf (cmd, sizeof cmd, "mkdir -p %s", parent);
        assert_int_equal (system (cmd), 0);
        assert_true (asprintf (&snap, "%s/key.%d.partial", parent, (int) getpid ()) > 0);
        assert_true (asprintf (&extra, "SPARSE_SIZE=%s", size) > 0);
        long before = du_kib (parent, false), before_apparent = du_kib (parent, true);
        kiwi_phase_config cfg = { .host_env = (const char *const *) environ };
        const char *argv[] = { "/bin/sh", "sparse.sh", NULL };
        const char *env_extra[] = { extra, NULL };
        kiwi_install_request ireq = {
            .image = node_image (), .workspace = ws, .argv = argv, .extra_env = env_extra,
            .limits = { .disk_mb = 128 }, .task_id = "itest-phases-sparse", .snapshot_dir = snap,
        };
        kiwi_install_result ir;
        kiwi_error_t err = NULL;
        if (kiwi_phase_install (env, &cfg, &ireq, &ir, &err) < 0)
            fail_msg ("%s: %s", drivers[i], kiwi_error_msg (err));
        /* the file was made, at its full apparent size, inside the sandbox */
        if (ir.output == NULL || strstr (ir.output, "SPARSE exit=0") == NULL)
            fail_msg ("%s: the install did not make the sparse file:\n%s", drivers[i], ir.output);
        long after = du_kib (parent, false), after_apparent = du_kib (parent, true);
        print_message ("%s: install %s: %s; %s du -sk %ld -> %ld KiB (apparent %ld -> %ld)\n", drivers[i],
                       kiwi_install_status_str (ir.status), ir.reason, parent, before, after, before_apparent,
                       after_apparent);
        if (ir.status != KIWI_INSTALL_KILLED)
            fail_msg ("%s: an install leaving a %s sparse file in a 128 MB sandbox ended %s (%s)", drivers[i], size,
                      kiwi_install_status_str (ir.status), ir.reason);
        assert_non_null (strstr (ir.reason, "snapshot larger than the sandbox's disk ceiling (128 MB, KIWI_MAX_SANDBOX_DISK_MB raises it)"));
        /* nothing of it stayed on the worker's disk: no growth beyond a few MB */
        assert_true (after >= 0 && after - before < 4096);
        assert_true (after_apparent >= 0 && after_apparent - before_apparent < 4096);
        snprintf (cmd, sizeof cmd, "test -z \"$(find %s -type f)\"", parent);
        if (system (cmd) != 0)
            fail_msg ("%s: files left under %s", drivers[i], parent);
        kiwi_install_result_clear (&ir);
        snprintf (cmd, sizeof cmd, "rm -rf %s %s", parent, ws);
        assert_int_equal (system (cmd), 0);
        free (ws);
        free (parent);
        free (snap);
        free (extra);
        kiwi_sandbox_env_close (env);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_install_then_verify_offline),
        cmocka_unit_test (test_install_failure_and_timeout_are_named),
        cmocka_unit_test (test_sparse_snapshot_is_bounded),
    };
    return kiwi_run_group ("phases", tests, NULL, NULL);
}
