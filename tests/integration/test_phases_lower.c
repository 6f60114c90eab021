/*
 * test_phases_lower.c: Phase B with the dependency snapshot laid read-only
 * under /kiwi (deps.h, disk.h), under runc and runsc. The snapshot is
 * extracted once on the worker and never copied into a sandbox; what a
 * sandbox does to the dependencies (rm -rf node_modules, a changed file, a
 * new file) lands on its own disk and nowhere else: checked from outside on
 * the extracted tree, and by the next verify, which sees it whole.
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

#include "sandbox/archive.h"
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

        /* from outside: the snapshot's tree, laid once, is whole */
        snprintf (p, sizeof p, "%s/deps/src/node_modules/pad/index.js", snap);
        char *content = slurp (p);
        if (content == NULL)
            fail_msg ("%s: %s is missing: the snapshot was not laid under the sandbox, or the sandbox removed it",
                      drivers[i], p);
        assert_string_equal (content, dep_js);
        free (content);
        snprintf (p, sizeof p, "%s/deps/src/node_modules/pad/planted.js", snap);
        assert_int_not_equal (access (p, F_OK), 0);
        snprintf (p, sizeof p, "%s/deps/home/.cache/entry", snap);
        assert_int_equal (access (p, R_OK), 0);
        struct stat st;
        snprintf (p, sizeof p, "%s/deps", snap);
        assert_int_equal (lstat (p, &st), 0);
        assert_int_equal (st.st_uid, 0);

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
        snprintf (p, sizeof p, "%s/deps/src/node_modules/pad/big", snap);
        assert_int_not_equal (access (p, F_OK), 0);

        snprintf (cmd, sizeof cmd, "rm -rf %s", base);
        assert_int_equal (system (cmd), 0);
        kiwi_sandbox_env_close (env);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_lower_immune_to_the_sandbox),
    };
    return kiwi_run_group ("phases_lower", tests, NULL, NULL);
}
