/*
 * test_netlock_callers.c: the network lock, seen from every caller.
 *
 * test_sandbox_netlock.c locks what the Docker driver sends for a given
 * spec. This suite locks what each caller ASKS for: a recording driver
 * (a const vtable like the real ones) keeps every spec it is given, and
 * the suite runs the real Phase A, Phase B and step 0 code over it (with a
 * swap, so both of step 0's verify runs and both installs are seen). Every
 * sandbox outside Phase A must ask for KIWI_NET_NONE, Phase A for
 * KIWI_NET_INSTALL and nothing else, and no secret of the worker's
 * environment may be in a networked sandbox's environment. If a caller
 * starts asking for a network, this suite fails, whatever the driver does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>

#include "inspect/classify.h"
#include "inspect/image/image.h"
#include "sandbox/phases.h"
#include "sandbox/sandbox.h"
#include "sandbox/step0.h"

#define MAX_REC 32

typedef struct rec {
    kiwi_net_mode network;
    char phase[32];
    char image[128];
    char env[4096]; /* the whole environment, one "K=V" per line */
    char argv0[256];
} rec;

static rec recs[MAX_REC];
static size_t nrecs;
/* the output and exit status of verify runs in image `fail_image` */
static const char *fail_image, *fail_output;

static void
record (const kiwi_sandbox_spec *spec)
{
    assert_true (nrecs < MAX_REC);
    rec *r = &recs[nrecs++];
    memset (r, 0, sizeof *r);
    r->network = spec->network;
    snprintf (r->phase, sizeof r->phase, "%s", spec->phase ? spec->phase : "");
    snprintf (r->image, sizeof r->image, "%s", spec->image ? spec->image : "");
    size_t o = 0;
    for (size_t i = 0; spec->env && spec->env[i]; i++)
        o += (size_t) snprintf (r->env + o, o < sizeof r->env ? sizeof r->env - o : 0, "%s\n", spec->env[i]);
}

typedef struct box {
    size_t rec;
} box;

static int
rd_open (const kiwi_sandbox_config *cfg, void **priv, kiwi_error_t *err)
{
    (void) cfg;
    (void) err;
    *priv = NULL;
    return 0;
}

static void
rd_close (void *priv)
{
    (void) priv;
}

static int
rd_create (void *priv, const kiwi_sandbox_spec *spec, void **sb, kiwi_error_t *err)
{
    (void) priv;
    (void) err;
    record (spec);
    box *b = calloc (1, sizeof *b);
    b->rec = nrecs - 1;
    *sb = b;
    return 0;
}

static const char *
rd_id (void *sb)
{
    (void) sb;
    return "recorded";
}

static int
rd_put (void *sb, const char *dir, const void *tar, size_t len, kiwi_error_t *err)
{
    (void) sb, (void) dir, (void) tar, (void) len, (void) err;
    return 0;
}

/* an empty tar stream (two zero blocks) for every archive asked for */
static int
rd_get (void *sb, const char *path, kiwi_archive_sink sink, void *userdata, kiwi_error_t *err)
{
    (void) sb, (void) path, (void) err;
    static const char zeros[1024];
    return sink (zeros, sizeof zeros, userdata) < 0 ? -1 : 0;
}

static void
result_for (const rec *r, const kiwi_exec_spec *x, kiwi_exec_result *res)
{
    memset (res, 0, sizeof *res);
    bool verify = strcmp (r->phase, "install") != 0;
    if (verify && fail_image && strcmp (r->image, fail_image) == 0) {
        res->exit_code = 2;
        res->output = strdup (fail_output);
    } else {
        res->exit_code = 0;
        res->output = strdup ("ok\n");
    }
    (void) x;
}

static int
rd_exec (void *sb, const kiwi_exec_spec *x, kiwi_exec_result *res, kiwi_error_t *err)
{
    (void) err;
    box *b = sb;
    snprintf (recs[b->rec].argv0, sizeof recs[b->rec].argv0, "%s", x->argv && x->argv[0] ? x->argv[0] : "");
    result_for (&recs[b->rec], x, res);
    return 0;
}

static int
rd_inspect (void *sb, kiwi_sandbox_info *info, kiwi_error_t *err)
{
    (void) sb, (void) err;
    memset (info, 0, sizeof *info);
    return 0;
}

static int
rd_destroy (void *sb, kiwi_error_t *err)
{
    (void) err;
    free (sb);
    return 0;
}

static int
rd_run_once (void *priv, const kiwi_sandbox_spec *spec, const kiwi_sandbox_put *puts, size_t nputs,
             const kiwi_exec_spec *x, kiwi_exec_result *res, kiwi_error_t *err)
{
    (void) priv, (void) puts, (void) nputs, (void) err;
    record (spec);
    result_for (&recs[nrecs - 1], x, res);
    return 0;
}

static const kiwi_sandbox_driver recording = {
    .name = "recording",
    .description = "records every spec it is given",
    .open = rd_open,
    .close = rd_close,
    .create = rd_create,
    .id = rd_id,
    .put_archive = rd_put,
    .get_archive = rd_get,
    .exec = rd_exec,
    .inspect = rd_inspect,
    .destroy = rd_destroy,
    .run_once = rd_run_once,
};

/* The worker's environment: every kind of secret a worker holds. */
static const char *const host_env[] = {
    "PATH=/usr/bin:/bin",
    "HOME=/root",
    "LANG=C.UTF-8",
    "ANTHROPIC_API_KEY=sk-ant-canary-1",
    "OPENAI_API_KEY=sk-openai-canary-2",
    "GEMINI_API_KEY=gem-canary-3",
    "KIWI_GIT_TOKEN=ghp_canary_4",
    "KIWI_REDIS_PASSWORD=redis-canary-5",
    "AWS_SECRET_ACCESS_KEY=aws-canary-6",
    "APP_TEST_TOKEN=app-canary-7",
    "HTTPS_PROXY=http://proxy.internal:3128",
    NULL,
};

static const char *const canaries[] = { "sk-ant-canary-1", "sk-openai-canary-2", "gem-canary-3", "ghp_canary_4",
                                        "redis-canary-5", "aws-canary-6", "app-canary-7", NULL };

static kiwi_phase_config pcfg = { .host_env = host_env };

static kiwi_sandbox_env *
open_env (void)
{
    kiwi_sandbox_config sc = { .state_dir = "/nonexistent", .worker_id = "w1" };
    kiwi_sandbox_env *env = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_sandbox_env_open (&recording, &sc, &env, &err), 0);
    nrecs = 0;
    fail_image = fail_output = NULL;
    return env;
}

/* The lock: what every recorded sandbox asked for. Returns how many were
 * networked. */
static size_t
assert_locked (void)
{
    size_t networked = 0;
    assert_true (nrecs > 0);
    for (size_t i = 0; i < nrecs; i++) {
        const rec *r = &recs[i];
        if (strcmp (r->phase, "install") == 0) {
            assert_int_equal (r->network, KIWI_NET_INSTALL);
            networked++;
            /* the networked phase holds no secret at all */
            for (size_t c = 0; canaries[c]; c++)
                if (strstr (r->env, canaries[c]) != NULL)
                    fail_msg ("Phase A sandbox %zu carries the secret %s:\n%s", i, canaries[c], r->env);
        } else {
            if (r->network != KIWI_NET_NONE)
                fail_msg ("sandbox %zu (phase `%s`) asked for network mode %d", i, r->phase, (int) r->network);
            /* model keys, the git token and Kiwi's own settings never enter */
            for (size_t c = 0; c < 5; c++)
                if (strstr (r->env, canaries[c]) != NULL)
                    fail_msg ("sandbox %zu (phase `%s`) carries the worker secret %s", i, r->phase, canaries[c]);
        }
    }
    return networked;
}

static void
test_verify_asks_for_no_network (void **state)
{
    (void) state;
    kiwi_sandbox_env *env = open_env ();
    /* a task naming the model key and the git token as credentials, too */
    const char *creds[] = { "APP_TEST_TOKEN", "ANTHROPIC_API_KEY", "KIWI_GIT_TOKEN", NULL };
    char ws[] = "/tmp/kiwi-netlock-XXXXXX";
    assert_non_null (mkdtemp (ws));
    kiwi_verify_request rq = { .image = "kiwi/node:22", .workspace = ws, .command = "npm test", .credentials = creds,
                               .task_id = "t1" };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_verify (env, &pcfg, &rq, &r, NULL, NULL, &err), 0);
    kiwi_exec_result_clear (&r);
    assert_int_equal (nrecs, 1);
    assert_int_equal (assert_locked (), 0);
    /* the credential the test needs does arrive */
    assert_non_null (strstr (recs[0].env, "APP_TEST_TOKEN=app-canary-7"));
    kiwi_sandbox_env_close (env);
    rmdir (ws);
}

static void
test_install_asks_for_install_network_only (void **state)
{
    (void) state;
    kiwi_sandbox_env *env = open_env ();
    char ws[] = "/tmp/kiwi-netlock-XXXXXX", snap[PATH_MAX];
    assert_non_null (mkdtemp (ws));
    snprintf (snap, sizeof snap, "%s.snap", ws);
    const char *argv[] = { "npm", "ci", NULL };
    kiwi_install_request rq = { .image = "kiwi/node:22", .workspace = ws, .argv = argv, .task_id = "t1",
                                .snapshot_dir = snap };
    kiwi_install_result r;
    kiwi_error_t err = NULL;
    if (kiwi_phase_install (env, &pcfg, &rq, &r, &err) < 0)
        fail_msg ("install: %s", kiwi_error_msg (err));
    kiwi_install_result_clear (&r);
    assert_true (nrecs >= 1);
    assert_true (assert_locked () >= 1);
    kiwi_sandbox_env_close (env);
    char cmd[2 * PATH_MAX + 16];
    snprintf (cmd, sizeof cmd, "rm -rf '%s' '%s'", ws, snap);
    assert_int_equal (system (cmd), 0);
}

/* Step 0 with a swap: the first image lacks the runtime the command needs,
 * so step 0 installs, verifies, swaps, installs again and verifies again. */
static void
test_step0_with_a_swap_asks_for_no_network (void **state)
{
    (void) state;
    kiwi_sandbox_env *env = open_env ();
    fail_image = "kiwi/python:3.11";
    fail_output = "node --test\nmake: node: No such file or directory\nmake: *** [Makefile:2: test] Error 127\n";
    kiwi_image_catalog *cat = NULL;
    kiwi_classifier *cls = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_image_catalog_open (KIWI_SOURCE_DIR "/ops/images/catalog.local.tsv", &cat, &err), 0);
    assert_int_equal (kiwi_classifier_builtin (&cls, &err), 0);
    char snaps[] = "/tmp/kiwi-netlock-snap-XXXXXX";
    assert_non_null (mkdtemp (snaps));
    const char *creds[] = { "APP_TEST_TOKEN", "OPENAI_API_KEY", NULL };
    kiwi_step0_request rq = {
        .env = env,
        .cfg = &pcfg,
        .inspect = { .root = KIWI_SOURCE_DIR "/tests/fixtures/repos/missing-executable-swap",
                     .test_command = "make test", .catalog = cat, .driver = "docker" },
        .classifier = cls,
        .credentials = creds,
        .task_id = "t1",
        .snapshot_root = snaps,
    };
    kiwi_step0_result r;
    if (kiwi_step0_run (&rq, &r, &err) < 0)
        fail_msg ("step 0: %s", kiwi_error_msg (err));
    assert_true (r.swapped);
    assert_int_equal (r.verify_runs, 2);
    kiwi_step0_result_clear (&r);
    size_t verifies = 0;
    for (size_t i = 0; i < nrecs; i++)
        verifies += strcmp (recs[i].phase, "install") != 0;
    assert_int_equal (verifies, 2);
    assert_int_equal (assert_locked (), 2); /* one install per image */
    kiwi_classifier_free (cls);
    kiwi_image_catalog_free (cat);
    kiwi_sandbox_env_close (env);
    char cmd[PATH_MAX + 16];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", snaps);
    assert_int_equal (system (cmd), 0);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_verify_asks_for_no_network),
        cmocka_unit_test (test_install_asks_for_install_network_only),
        cmocka_unit_test (test_step0_with_a_swap_asks_for_no_network),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
