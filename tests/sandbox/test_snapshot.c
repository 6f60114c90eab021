/*
 * test_snapshot.c: the install snapshot against the real dockerd and the
 * npm registry, under the driver KIWI_SANDBOX names (docker, gvisor).
 *
 * tests/fixtures/snapshot/plant-a and plant-b have the same install input
 * (package.json, package-lock.json made by npm, the workspace member
 * packages/tool's package.json) and different other files; their root
 * postinstall plants ./planted-pass in the tree and copies src/secret.txt
 * into node_modules when it can read it, and the member's postinstall and
 * prepare do the like. Step 0 on plant-a runs Phase A and Phase B for real:
 *
 *   - both repositories have one install key;
 *   - the snapshot holds the dependency but neither the planted file nor
 *     the repository's own files, no copy of src/secret.txt, and no mark
 *     of either postinstall: the repository's own scripts, the root's and
 *     the member's, never ran in Phase A, with the network on, and Phase A
 *     never had the secret (checked from outside, in the snapshot's tar);
 *   - they run offline at the start of Phase B instead, the member's
 *     before the root's, where the tree they build from is;
 *   - plant-b verified over plant-a's snapshot still fails its test (it
 *     passes only with ./planted-pass in the tree), and its workspace holds
 *     exactly its own tree besides node_modules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shell.h"
#include "sandbox-driver.h"
#include "sandbox/archive/archive.h"
#include "inspect/classify.h"
#include "inspect/image/image.h"
#include "need.h"
#include "sandbox-env.h"
#include "sandbox/phases.h"
#include "sandbox/step0.h"

extern char **environ;

#define FIXTURES KIWI_SOURCE_DIR "/tests/fixtures/snapshot"

typedef struct {
    bool dependency, mark, member_mark, member_link;
    char bad[4096];
} scan_ctx;

/* Every entry of the snapshot's src part: the tree's own directory, or in
 * node_modules. */
static int
scan_src (const kiwi_tar_entry *e, void *ud, kiwi_error_t *err)
{
    scan_ctx *s = ud;
    const char *n = e->name;
    if (strncmp (n, "./", 2) == 0)
        n += 2;
    if (strcmp (n, "src/node_modules/is-number/package.json") == 0)
        s->dependency = true;
    if (strcmp (n, "src/node_modules/.postinstall-ran") == 0)
        s->mark = true;
    if (strcmp (n, "src/node_modules/.member-postinstall-ran") == 0)
        s->member_mark = true;
    if (strcmp (n, "src/node_modules/tool") == 0)
        s->member_link = true;
    bool ok = strcmp (n, "src") == 0 || strcmp (n, "src/") == 0
              || (strncmp (n, "src/node_modules", 16) == 0 && (n[16] == '\0' || n[16] == '/'));
    if (!ok || strstr (n, "exfil") != NULL) {
        size_t l = strlen (s->bad);
        snprintf (s->bad + l, sizeof s->bad - l, " %s", n);
    }
    return 0;
}

static void
scan_part (const char *snapshot, const char *part, kiwi_archive_list_fn fn, void *ud)
{
    char p[1024];
    snprintf (p, sizeof p, "%s/%s", snapshot, part);
    FILE *f = fopen (p, "rb");
    assert_non_null (f);
    fseek (f, 0, SEEK_END);
    long n = ftell (f);
    rewind (f);
    char *tar = malloc ((size_t) n + 1);
    assert_int_equal (fread (tar, 1, (size_t) n, f), (size_t) n);
    fclose (f);
    kiwi_error_t err = NULL;
    if (kiwi_archive_list (tar, (size_t) n, fn, ud, &err) < 0)
        fail_msg ("%s: %s", p, kiwi_error_msg (err));
    free (tar);
}

static void
test_snapshot_input_and_contents (void **state)
{
    const char *driver = kiwi_test_sandbox_driver ();
    kiwi_sandbox_env *env = kiwi_test_sandbox_env (driver, "itest-snapshot");
    kiwi_error_t err = NULL;
    kiwi_image_catalog *cat = NULL;
    if (kiwi_image_catalog_open (KIWI_SOURCE_DIR "/ops/images/catalog.local.tsv", &cat, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    kiwi_classifier *cl = NULL;
    assert_int_equal (kiwi_classifier_builtin (&cl, &err), 0);

    /* scratch copies: the fixtures stay as they are */
    char a[256], b[256], snaps[256];
    snprintf (a, sizeof a, "/tmp/kiwi-snapshot-%d-a", (int) getpid ());
    snprintf (b, sizeof b, "/tmp/kiwi-snapshot-%d-b", (int) getpid ());
    snprintf (snaps, sizeof snaps, "/tmp/kiwi-snapshot-%d-snaps", (int) getpid ());
    kiwi_test_must ("rm -rf %s %s %s && cp -a %s/plant-a %s && cp -a %s/plant-b %s", a, b, snaps, FIXTURES, a, FIXTURES,
                    b);

    /* one install input, one key */
    kiwi_inspection ia, ib;
    kiwi_inspect_request qa = { .root = a, .test_command = "node --test", .catalog = cat, .driver = driver };
    kiwi_inspect_request qb = { .root = b, .test_command = "node --test", .catalog = cat, .driver = driver };
    assert_int_equal (kiwi_inspect (&qa, &ia, &err), 0);
    assert_int_equal (kiwi_inspect (&qb, &ib, &err), 0);
    assert_true (ia.cache_key[0] != '\0');
    assert_string_equal (ia.cache_key, ib.cache_key);

    const char *ca = access ("/etc/ssl/certs/ca-certificates.crt", R_OK) == 0 ? "/etc/ssl/certs/ca-certificates.crt"
                                                                              : NULL;
    kiwi_phase_config pc = { .host_env = (const char *const *) environ, .ca_bundle = ca };
    kiwi_step0_request rq = {
        .env = env,
        .cfg = &pc,
        .inspect = qa,
        .classifier = cl,
        .verify_timeout_ms = 120000,
        .install_deadline_ms = 300000,
        .task_id = "itest-snapshot",
        .snapshot_root = snaps,
    };
    kiwi_step0_result res;
    if (kiwi_step0_run (&rq, &res, &err) < 0)
        fail_msg ("step 0 on plant-a: %s", kiwi_error_msg (err));
    if (res.install.status != KIWI_INSTALL_OK || res.snapshot_dir == NULL)
        fail_msg ("plant-a's install: %s\n%s", res.install.reason, res.install.output ? res.install.output : "");
    if (res.status != KIWI_STEP0_PASSED)
        fail_msg ("plant-a's own test should pass: %s\n%s", res.reason ? res.reason : "",
                  res.run.output ? res.run.output : "");

    /* the snapshot, from outside */
    scan_ctx sc = { 0 };
    scan_part (res.snapshot_dir, "src.tar", scan_src, &sc);
    assert_true (sc.dependency);
    if (sc.mark)
        fail_msg ("the repository's own postinstall ran in Phase A, with the network on");
    if (sc.member_mark)
        fail_msg ("the workspace member's own postinstall ran in Phase A, with the network on");
    assert_true (sc.member_link); /* npm linked the member: it was a member in Phase A */
    if (ia.install.verify_prelude == NULL || strstr (ia.install.verify_prelude, "npm run postinstall") == NULL)
        fail_msg ("plant-a's postinstall is not in Phase B's prelude: %s",
                  ia.install.verify_prelude ? ia.install.verify_prelude : "(none)");
    if (sc.bad[0])
        fail_msg ("the snapshot holds what is not a dependency location:%s", sc.bad);

    /* the member's scripts and the root's run offline at the start of
     * Phase B, in the tree they build from: the member's first */
    kiwi_exec_result r;
    kiwi_verify_request va = {
        .image = ia.image.image,
        .workspace = a,
        .snapshot_dir = res.snapshot_dir,
        .command = "ls -1 packages/tool/prepared-by-member node_modules/.member-postinstall-ran planted-pass "
                   "node_modules/exfil.txt node_modules/exfil-member.txt",
        .prelude = ia.install.verify_prelude,
        .timeout_ms = 120000,
        .task_id = "itest-snapshot",
    };
    if (kiwi_phase_verify (env, &pc, &va, &r, NULL, NULL, &err) < 0)
        fail_msg ("verify plant-a with the prelude: %s", kiwi_error_msg (err));
    if (r.exit_code != 0)
        fail_msg ("Phase B's prelude did not run the member's and the root's scripts:\n%s\nprelude:\n%s", r.output,
                  ia.install.verify_prelude);
    kiwi_exec_result_clear (&r);

    /* plant-b over plant-a's snapshot: its test still fails, and its
     * workspace is its tree plus node_modules */
    kiwi_verify_request vr = {
        .image = ia.image.image,
        .workspace = b,
        .snapshot_dir = res.snapshot_dir,
        .command = "node --test",
        .timeout_ms = 120000,
        .task_id = "itest-snapshot",
    };
    if (kiwi_phase_verify (env, &pc, &vr, &r, NULL, NULL, &err) < 0)
        fail_msg ("verify plant-b: %s", kiwi_error_msg (err));
    if (r.exit_code == 0)
        fail_msg ("plant-b's failing test passed over plant-a's snapshot (a planted file):\n%s", r.output);
    kiwi_exec_result_clear (&r);
    vr.command = "node -e \"require('is-number')\" && find . -path ./node_modules -prune -o ! -type d -print | sort";
    if (kiwi_phase_verify (env, &pc, &vr, &r, NULL, NULL, &err) < 0)
        fail_msg ("verify plant-b: %s", kiwi_error_msg (err));
    assert_int_equal (r.exit_code, 0);
    assert_string_equal (r.output,
                         "./package-lock.json\n./package.json\n./packages/tool/package.json\n./planted.test.js\n");
    kiwi_exec_result_clear (&r);

    kiwi_step0_result_clear (&res);
    kiwi_inspection_clear (&ia);
    kiwi_inspection_clear (&ib);
    kiwi_test_must ("rm -rf %s %s %s", a, b, snaps);
    kiwi_classifier_free (cl);
    kiwi_image_catalog_free (cat);
    kiwi_sandbox_env_close (env);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_snapshot_input_and_contents),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
