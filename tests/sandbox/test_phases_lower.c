/*
 * test_phases_lower.c: Phase B with the dependency snapshot laid read-only
 * under /kiwi (deps.h, disk.h), under runc and runsc. The snapshot is
 * made once into a squashfs image on the worker and never copied into a
 * sandbox; what a sandbox does to the dependencies (rm -rf node_modules, a
 * changed file, a new file) lands on its own disk and nowhere else: checked
 * from outside on the image (its digest, and its content mounted beside the
 * test), by the next verify, which sees it whole, and by the host's mount
 * table, which holds nothing of a finished sandbox.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/archive/archive.h"
#include "need.h"
#include "sandbox-env.h"
#include "sandbox/phases.h"

extern char **environ;

static const char *drivers[] = { "docker", "gvisor" };
static const char dep_js[] = "module.exports = function pad (s) { return ' ' + s; };\n";

static void
write_tar (const char *path, kiwi_buf *tar)
{
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_archive_finish (tar, &err), 0);
    FILE *f = fopen (path, "wb");
    assert_non_null (f);
    assert_int_equal (fwrite (tar->data, 1, tar->len, f), tar->len);
    fclose (f);
    kiwi_buf_free (tar);
}

/* A snapshot as Phase A leaves it: src/node_modules/pad and a cache in home. */
static void
make_snapshot (const char *dir)
{
    assert_int_equal (mkdir (dir, 0700), 0);
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    kiwi_error_t err = NULL;
    kiwi_buf src = KIWI_BUF_INIT, home = KIWI_BUF_INIT;
    assert_int_equal (kiwi_archive_add_dir (&src, "src", 0755, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_dir (&src, "src/node_modules", 0755, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_dir (&src, "src/node_modules/pad", 0755, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_file (&src, "src/node_modules/pad/index.js", dep_js, sizeof dep_js - 1, 0644,
                                             &o, &err),
                      0);
    assert_int_equal (kiwi_archive_add_dir (&home, "home", 0755, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_dir (&home, "home/.cache", 0755, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_file (&home, "home/.cache/entry", "cached\n", 7, 0644, &o, &err), 0);
    char p[600];
    snprintf (p, sizeof p, "%s/src.tar", dir);
    write_tar (p, &src);
    snprintf (p, sizeof p, "%s/home.tar", dir);
    write_tar (p, &home);
}

static int
verify (kiwi_sandbox_env *env, const kiwi_phase_config *cfg, const char *ws, const char *snap, const char *command,
        char **output)
{
    kiwi_verify_request rq = {
        .image = kiwi_test_env_or ("KIWI_TEST_NODE_IMAGE", "kiwi/node:20"),
        .workspace = ws,
        .snapshot_dir = snap,
        .command = command,
        .limits = { .disk_mb = 64 },
        .timeout_ms = 120000,
        .task_id = "itest-lower",
    };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    if (kiwi_phase_verify (env, cfg, &rq, &r, NULL, NULL, &err) < 0)
        fail_msg ("verify: %s", kiwi_error_msg (err));
    int code = r.exit_code;
    *output = r.output ? strdup (r.output) : strdup ("");
    kiwi_exec_result_clear (&r);
    return code;
}

static char *
slurp (const char *path)
{
    FILE *f = fopen (path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = calloc (1, 4096);
    size_t n = fread (buf, 1, 4095, f);
    buf[n] = '\0';
    fclose (f);
    return buf;
}

/* The image's sha256, by sha256sum. */
static char *
file_digest (const char *path)
{
    char cmd[700];
    snprintf (cmd, sizeof cmd, "sha256sum < '%s'", path);
    FILE *f = popen (cmd, "r");
    assert_non_null (f);
    char *d = calloc (1, 80);
    assert_non_null (fgets (d, 65, f));
    assert_int_equal (pclose (f), 0);
    return d;
}

/* Mounts the image read-only beside the test and checks what it holds: the
 * dependencies as made, owned by the sandbox user, nothing a sandbox wrote. */
static void
check_image (const char *driver, const char *image, const char *base)
{
    char m[400], cmd[1400], p[600];
    snprintf (m, sizeof m, "%s/look", base);
    snprintf (cmd, sizeof cmd, "mkdir -p %s && mount -t squashfs -o loop,ro '%s' %s", m, image, m);
    assert_int_equal (system (cmd), 0);
    snprintf (p, sizeof p, "%s/src/node_modules/pad/index.js", m);
    char *content = slurp (p);
    struct stat st;
    bool owned = lstat (p, &st) == 0 && st.st_uid == 1000 && st.st_gid == 1000;
    snprintf (p, sizeof p, "%s/src/node_modules/pad/planted.js", m);
    bool planted = access (p, F_OK) == 0;
    snprintf (p, sizeof p, "%s/src/node_modules/pad/big", m);
    planted = planted || access (p, F_OK) == 0;
    snprintf (p, sizeof p, "%s/home/.cache/entry", m);
    bool cache = access (p, R_OK) == 0;
    snprintf (cmd, sizeof cmd, "umount %s && rmdir %s", m, m);
    assert_int_equal (system (cmd), 0);
    if (content == NULL || strcmp (content, dep_js) != 0)
        fail_msg ("%s: the image's index.js is %s", driver, content ? content : "missing");
    free (content);
    if (!owned)
        fail_msg ("%s: the image's files are not the sandbox user's", driver);
    if (planted)
        fail_msg ("%s: a file a sandbox wrote is in the image", driver);
    if (!cache)
        fail_msg ("%s: the image has no home/.cache/entry", driver);
}

/* Nothing of a finished sandbox stays mounted: no loop device holds the
 * image (a mount of it would). */
static void
assert_no_mount_left (const char *driver, const char *image)
{
    char cmd[700], line[512] = "";
    snprintf (cmd, sizeof cmd, "losetup -j '%s'", image);
    FILE *f = popen (cmd, "r");
    assert_non_null (f);
    size_t n = fread (line, 1, sizeof line - 1, f);
    line[n] = '\0';
    pclose (f);
    if (n > 0)
        fail_msg ("%s: the image is still attached or mounted after the sandbox: %s", driver, line);
}

static void
test_lower_immune_to_the_sandbox (void **state)
{
    (void) state;
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest-lower");
        char base[256], ws[300], snap[300], p[600];
        snprintf (base, sizeof base, "/tmp/kiwi-lower-%d-%s", (int) getpid (), drivers[i]);
        snprintf (ws, sizeof ws, "%s/ws", base);
        snprintf (snap, sizeof snap, "%s/snap", base);
        char cmd[700];
        snprintf (cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && echo 'console.log(1)' > %s/test.js", base, ws, ws);
        assert_int_equal (system (cmd), 0);
        make_snapshot (snap);
        /* what earlier workers left: the tree extracted before images, a
         * partial image of a process gone, one of a process still running */
        pid_t gone = fork ();
        if (gone == 0)
            _exit (0);
        assert_true (gone > 0);
        waitpid (gone, NULL, 0);
        snprintf (cmd, sizeof cmd,
                  "mkdir -p %s/deps/src/node_modules && touch %s/deps/src/node_modules/old %s/deps.sqfs.%d.1.partial "
                  "%s/deps.sqfs.%d.1.partial",
                  snap, snap, snap, (int) gone, snap, (int) getpid ());
        assert_int_equal (system (cmd), 0);
        kiwi_phase_config cfg = { .host_env = (const char *const *) environ };

        char *out = NULL;
        /* the dependencies are there, the tree over them; then everything
         * of them is attacked from inside */
        int code = verify (env, &cfg, ws, snap,
                           "set -e; grep -q pad /kiwi/src/node_modules/pad/index.js; test -f /kiwi/src/test.js; "
                           "cat /kiwi/home/.cache/entry; echo changed > /kiwi/src/node_modules/pad/index.js; "
                           "echo planted > /kiwi/src/node_modules/pad/planted.js; rm -rf /kiwi/src/node_modules "
                           "/kiwi/home/.cache; test ! -e /kiwi/src/node_modules; echo attacked",
                           &out);
        if (code != 0 || strstr (out, "attacked") == NULL)
            fail_msg ("%s: first verify exited %d: %s", drivers[i], code, out);
        free (out);

        /* from outside: the snapshot's image, made once, root's and
         * unchanged, with the dependencies whole and nothing of the attack */
        snprintf (p, sizeof p, "%s/deps.sqfs", snap);
        struct stat st;
        if (lstat (p, &st) != 0)
            fail_msg ("%s: %s is missing: the snapshot was not laid under the sandbox", drivers[i], p);
        assert_true (S_ISREG (st.st_mode));
        assert_int_equal (st.st_uid, 0);
        assert_int_equal (st.st_mode & 07777, 0644);
        char *digest = file_digest (p);
        snprintf (cmd, sizeof cmd,
                  "test ! -e %s/deps && test ! -e %s/deps.sqfs.%d.1.partial && test -e %s/deps.sqfs.%d.1.partial", snap,
                  snap, (int) gone, snap, (int) getpid ());
        if (system (cmd) != 0)
            fail_msg ("%s: the old tree or a dead process's partial image stayed, or a live one's went", drivers[i]);
        check_image (drivers[i], p, base);
        assert_no_mount_left (drivers[i], p);

        /* the next verify sees it whole, and nothing of the first one */
        code = verify (env, &cfg, ws, snap,
                       "set -e; cat /kiwi/src/node_modules/pad/index.js; test ! -e "
                       "/kiwi/src/node_modules/pad/planted.js; cat /kiwi/home/.cache/entry",
                       &out);
        if (code != 0 || strstr (out, "return ' ' + s") == NULL || strstr (out, "cached") == NULL)
            fail_msg ("%s: second verify exited %d: %s", drivers[i], code, out);
        free (out);

        /* the sandbox's disk still bounds what it writes over the lower */
        code = verify (env, &cfg, ws, snap,
                       "dd if=/dev/zero of=/kiwi/src/node_modules/pad/big bs=1M count=100 2>&1; echo rc=$?", &out);
        if (strstr (out, "No space left") == NULL)
            fail_msg ("%s: a 100 MB write over the lower in a 64 MB sandbox: %s", drivers[i], out);
        free (out);
        check_image (drivers[i], p, base);
        char *after = file_digest (p);
        if (strcmp (digest, after) != 0)
            fail_msg ("%s: the image changed under three sandboxes: %s then %s", drivers[i], digest, after);
        free (digest);
        free (after);
        assert_no_mount_left (drivers[i], p);

        snprintf (cmd, sizeof cmd, "rm -rf %s", base);
        assert_int_equal (system (cmd), 0);
        kiwi_sandbox_env_close (env);
    }
}

/* A snapshot whose tar leads a file through a symlink to the host's /etc:
 * no image is made (nor a partial one), the verify fails naming the entry,
 * and nothing is written through the link. */
static void
test_hostile_snapshot_makes_no_image (void **state)
{
    (void) state;
    kiwi_sandbox_env *env = kiwi_test_sandbox_env ("docker", "itest-lower");
    char base[256], ws[300], snap[300], p[600], cmd[700];
    snprintf (base, sizeof base, "/tmp/kiwi-lower-hostile-%d", (int) getpid ());
    snprintf (ws, sizeof ws, "%s/ws", base);
    snprintf (snap, sizeof snap, "%s/snap", base);
    snprintf (cmd, sizeof cmd, "rm -rf %s && mkdir -p %s/out %s && echo 'x' > %s/t", base, base, ws, ws);
    assert_int_equal (system (cmd), 0);
    assert_int_equal (mkdir (snap, 0700), 0);
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    kiwi_error_t err = NULL;
    kiwi_buf src = KIWI_BUF_INIT, home = KIWI_BUF_INIT;
    char target[300];
    snprintf (target, sizeof target, "%s/out", base);
    assert_int_equal (kiwi_archive_add_dir (&src, "src", 0755, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_symlink (&src, "src/node_modules", target, &o, &err), 0);
    assert_int_equal (kiwi_archive_add_file (&src, "src/node_modules/planted", "x\n", 2, 0755, &o, &err), 0);
    snprintf (p, sizeof p, "%s/src.tar", snap);
    write_tar (p, &src);
    snprintf (p, sizeof p, "%s/home.tar", snap);
    write_tar (p, &home);

    kiwi_phase_config cfg = { .host_env = (const char *const *) environ };
    kiwi_verify_request rq = {
        .image = kiwi_test_env_or ("KIWI_TEST_NODE_IMAGE", "kiwi/node:20"),
        .workspace = ws,
        .snapshot_dir = snap,
        .command = "true",
        .limits = { .disk_mb = 64 },
        .timeout_ms = 120000,
        .task_id = "itest-lower",
    };
    kiwi_exec_result r;
    if (kiwi_phase_verify (env, &cfg, &rq, &r, NULL, NULL, &err) == 0)
        fail_msg ("a snapshot with a path through a symlink was laid (exit %d)", r.exit_code);
    if (strstr (kiwi_error_msg (err), "src/node_modules/planted") == NULL
        || strstr (kiwi_error_msg (err), "symlink") == NULL)
        fail_msg ("the error does not name the entry and the symlink: %s", kiwi_error_msg (err));
    kiwi_error_free (&err);
    snprintf (cmd, sizeof cmd, "test -z \"$(ls -A %s/out)\" && ! ls %s | grep -q sqfs", base, snap);
    if (system (cmd) != 0)
        fail_msg ("something was written through the link, or an image (partial or whole) was left in %s", snap);
    snprintf (cmd, sizeof cmd, "rm -rf %s", base);
    assert_int_equal (system (cmd), 0);
    kiwi_sandbox_env_close (env);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_lower_immune_to_the_sandbox),
        cmocka_unit_test (test_hostile_snapshot_makes_no_image),
    };
    return kiwi_run_group ("phases_lower", tests, NULL, NULL);
}
