/*
 * test_phases_env.c: what may enter a sandbox's environment. Phase A gets
 * nothing secret; Phase B gets only named test credentials and never a
 * model key; the session gets credentials only when allowed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "sandbox/phases.h"

static const char *const worker_env[] = {
    "PATH=/usr/local/sbin:/usr/bin",
    "HOME=/root",
    "LANG=C.UTF-8",
    "ANTHROPIC_API_KEY=sk-ant-fake",
    "OPENAI_API_KEY=sk-openai-fake",
    "GEMINI_API_KEY=gem-fake",
    "KIWI_GIT_TOKEN=ghp_fake",
    "CORP_MODEL_KEY=corp-fake",
    "DATABASE_URL=postgres://test@db/test",
    "STRIPE_TEST_KEY=sk_test_123",
    "HTTPS_PROXY=http://proxy.corp:3128",
    "SSH_AUTH_SOCK=/tmp/agent",
    "KIWI_REDIS_PASSWORD=redis-fake-pw",
    "REDISCLI_AUTH=redis-fake-pw",
    NULL,
};

static const char *const extra_keys[] = { "CORP_MODEL_KEY", NULL };

static kiwi_phase_config
cfg (void)
{
    return (kiwi_phase_config) { .host_env = worker_env, .extra_model_keys = extra_keys };
}

static void
assert_no_secret (const kiwi_strv *e)
{
    for (size_t i = 0; i < e->n; i++) {
        assert_null (strstr (e->v[i], "fake"));
        assert_null (strstr (e->v[i], "sk_test"));
        assert_null (strstr (e->v[i], "postgres://"));
        assert_null (strstr (e->v[i], "SSH_AUTH_SOCK"));
        assert_true (strncmp (e->v[i], "PATH=", 5) != 0);
    }
}

static void
test_install_env_is_allow_list_only (void **state)
{
    kiwi_phase_config c = cfg ();
    kiwi_strv e = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_install_env (&c, NULL, &e, &err), 0);
    assert_no_secret (&e);
    assert_non_null (kiwi_strv_env_get (&e, "HOME"));
    assert_string_equal (kiwi_strv_env_get (&e, "HOME"), "HOME=/kiwi/home");
    assert_string_equal (kiwi_strv_env_get (&e, "LANG"), "LANG=C.UTF-8");
    assert_string_equal (kiwi_strv_env_get (&e, "HTTPS_PROXY"), "HTTPS_PROXY=http://proxy.corp:3128");
    assert_null (kiwi_strv_env_get (&e, "SSL_CERT_FILE"));
    /* exactly: HOME TMPDIR CI LANG HTTPS_PROXY */
    assert_int_equal (e.n, 5);
    kiwi_strv_free (&e);
}

static void
test_install_env_ca_bundle_variables (void **state)
{
    kiwi_phase_config c = cfg ();
    c.ca_bundle = "/etc/ssl/certs/ca-certificates.crt";
    kiwi_strv e = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_install_env (&c, NULL, &e, &err), 0);
    assert_string_equal (kiwi_strv_env_get (&e, "SSL_CERT_FILE"), "SSL_CERT_FILE=" KIWI_SANDBOX_CA_FILE);
    assert_string_equal (kiwi_strv_env_get (&e, "NODE_EXTRA_CA_CERTS"), "NODE_EXTRA_CA_CERTS=" KIWI_SANDBOX_CA_FILE);
    assert_string_equal (kiwi_strv_env_get (&e, "PIP_CERT"), "PIP_CERT=" KIWI_SANDBOX_CA_FILE);
    assert_no_secret (&e);
    kiwi_strv_free (&e);
}

static void
test_proxy_with_credentials_is_refused (void **state)
{
    const char *const env[] = { "https_proxy=http://alice:s3cret@proxy.corp:3128", NULL };
    kiwi_phase_config c = { .host_env = env };
    kiwi_strv e = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_install_env (&c, NULL, &e, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "https_proxy carries credentials"));
    assert_null (strstr (kiwi_error_msg (err), "s3cret"));
    kiwi_error_free (&err);
    kiwi_strv_free (&e);
    /* an '@' after the authority is not user information */
    const char *const ok_env[] = { "HTTP_PROXY=http://proxy.corp:3128/path@x", NULL };
    c.host_env = ok_env;
    assert_int_equal (kiwi_phase_install_env (&c, NULL, &e, &err), 0);
    kiwi_strv_free (&e);
}

static void
test_extra_env_cannot_smuggle_secrets (void **state)
{
    kiwi_phase_config c = cfg ();
    const char *const extra[] = { "GOFLAGS=-mod=mod", "OPENAI_API_KEY=x", NULL };
    kiwi_strv e = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_install_env (&c, extra, &e, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "OPENAI_API_KEY"));
    kiwi_error_free (&err);
    kiwi_strv_free (&e);
}

static void
test_verify_env_named_credentials_only (void **state)
{
    kiwi_phase_config c = cfg ();
    const char *const creds[] = { "DATABASE_URL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY",
                                  "CORP_MODEL_KEY", "KIWI_GIT_TOKEN", "NOT_SET_ANYWHERE", NULL };
    kiwi_strv e = KIWI_STRV_INIT, withheld = KIWI_STRV_INIT, missing = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_verify_env (&c, NULL, creds, &e, &withheld, &missing, &err), 0);
    assert_string_equal (kiwi_strv_env_get (&e, "DATABASE_URL"), "DATABASE_URL=postgres://test@db/test");
    assert_null (kiwi_strv_env_get (&e, "STRIPE_TEST_KEY")); /* not named */
    assert_null (kiwi_strv_env_get (&e, "ANTHROPIC_API_KEY"));
    assert_null (kiwi_strv_env_get (&e, "OPENAI_API_KEY"));
    assert_null (kiwi_strv_env_get (&e, "GEMINI_API_KEY"));
    assert_null (kiwi_strv_env_get (&e, "CORP_MODEL_KEY"));
    assert_null (kiwi_strv_env_get (&e, "KIWI_GIT_TOKEN"));
    assert_int_equal (withheld.n, 5);
    assert_true (kiwi_strv_contains (&missing, "NOT_SET_ANYWHERE"));
    for (size_t i = 0; i < e.n; i++)
        assert_null (strstr (e.v[i], "fake"));
    kiwi_strv_free (&e);
    kiwi_strv_free (&withheld);
    kiwi_strv_free (&missing);
}

static void
test_redis_password_never_enters (void **state)
{
    /* ops/stack.sh's stack.env holds the Redis password twice: as the
     * worker's setting and as redis-cli's variable; a task naming either as
     * a credential gets neither */
    kiwi_phase_config c = cfg ();
    c.session_allow_test_creds = true;
    const char *const creds[] = { "KIWI_REDIS_PASSWORD", "REDISCLI_AUTH", NULL };
    kiwi_strv e = KIWI_STRV_INIT, withheld = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_verify_env (&c, NULL, creds, &e, &withheld, NULL, &err), 0);
    assert_int_equal (withheld.n, 2);
    for (size_t i = 0; i < e.n; i++)
        assert_null (strstr (e.v[i], "redis-fake-pw"));
    kiwi_strv_free (&e);
    kiwi_strv_free (&withheld);
    assert_int_equal (kiwi_phase_session_env (&c, NULL, creds, &e, &withheld, NULL, &err), 0);
    assert_int_equal (withheld.n, 2);
    for (size_t i = 0; i < e.n; i++)
        assert_null (strstr (e.v[i], "redis-fake-pw"));
    kiwi_strv_free (&e);
    kiwi_strv_free (&withheld);
    assert_int_equal (kiwi_phase_install_env (&c, NULL, &e, &err), 0);
    for (size_t i = 0; i < e.n; i++)
        assert_null (strstr (e.v[i], "redis-fake-pw"));
    kiwi_strv_free (&e);
    const char *const extra[] = { "REDISCLI_AUTH=x", NULL };
    assert_int_equal (kiwi_phase_install_env (&c, extra, &e, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "REDISCLI_AUTH"));
    kiwi_error_free (&err);
    kiwi_strv_free (&e);
}

static void
test_session_env_no_credentials_unless_allowed (void **state)
{
    kiwi_phase_config c = cfg ();
    const char *const creds[] = { "DATABASE_URL", "ANTHROPIC_API_KEY", NULL };
    kiwi_strv e = KIWI_STRV_INIT, withheld = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_session_env (&c, NULL, creds, &e, &withheld, NULL, &err), 0);
    assert_null (kiwi_strv_env_get (&e, "DATABASE_URL"));
    assert_int_equal (withheld.n, 2);
    kiwi_strv_free (&e);
    kiwi_strv_free (&withheld);
    c.session_allow_test_creds = true;
    assert_int_equal (kiwi_phase_session_env (&c, NULL, creds, &e, &withheld, NULL, &err), 0);
    assert_non_null (kiwi_strv_env_get (&e, "DATABASE_URL"));
    assert_null (kiwi_strv_env_get (&e, "ANTHROPIC_API_KEY")); /* a model key, even then */
    kiwi_strv_free (&e);
    kiwi_strv_free (&withheld);
}

/* Phase B and the session's commands get no colour variable, as on a CI
 * runner: a library's tests that read them (commander's: FORCE_COLOR=1
 * expects colour, which NO_COLOR=1 beside it refuses) run as in the
 * project's CI; a plan's entry or the test command may still set one. */
static void
test_no_colour_variables (void **state)
{
    kiwi_phase_config c = cfg ();
    kiwi_strv e = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    static const char *const names[] = { "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "PY_COLORS", "CARGO_TERM_COLOR",
                                         NULL };
    for (int phase = 0; phase < 2; phase++) {
        int rc = phase == 0 ? kiwi_phase_verify_env (&c, NULL, NULL, &e, NULL, NULL, &err)
                            : kiwi_phase_session_env (&c, NULL, NULL, &e, NULL, NULL, &err);
        assert_int_equal (rc, 0);
        for (size_t i = 0; names[i]; i++)
            if (kiwi_strv_env_get (&e, names[i]) != NULL)
                fail_msg ("%s is set in %s", kiwi_strv_env_get (&e, names[i]), phase ? "the session" : "Phase B");
        kiwi_strv_free (&e);
    }
    const char *const extra[] = { "FORCE_COLOR=1", NULL };
    assert_int_equal (kiwi_phase_verify_env (&c, extra, NULL, &e, NULL, NULL, &err), 0);
    assert_string_equal (kiwi_strv_env_get (&e, "FORCE_COLOR"), "FORCE_COLOR=1");
    kiwi_strv_free (&e);
}

/* The version from the repository's tags reaches Phase B and the session
 * as SETUPTOOLS_SCM_PRETEND_VERSION, never Phase A; none without one, and
 * none that is not digits and dots. */
static void
test_scm_version (void **state)
{
    kiwi_phase_config c = cfg ();
    kiwi_strv e = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_verify_env (&c, NULL, NULL, &e, NULL, NULL, &err), 0);
    assert_null (kiwi_strv_env_get (&e, "SETUPTOOLS_SCM_PRETEND_VERSION"));
    kiwi_strv_free (&e);
    c.scm_version = "3.1.5.dev1";
    for (int phase = 0; phase < 3; phase++) {
        int rc = phase == 0   ? kiwi_phase_verify_env (&c, NULL, NULL, &e, NULL, NULL, &err)
                 : phase == 1 ? kiwi_phase_session_env (&c, NULL, NULL, &e, NULL, NULL, &err)
                              : kiwi_phase_install_env (&c, NULL, &e, &err);
        assert_int_equal (rc, 0);
        const char *v = kiwi_strv_env_get (&e, "SETUPTOOLS_SCM_PRETEND_VERSION");
        if (phase < 2)
            assert_string_equal (v, "SETUPTOOLS_SCM_PRETEND_VERSION=3.1.5.dev1");
        else
            assert_null (v);
        kiwi_strv_free (&e);
    }
    c.scm_version = "1.0; touch /tmp/x";
    assert_int_equal (kiwi_phase_verify_env (&c, NULL, NULL, &e, NULL, NULL, &err), 0);
    assert_null (kiwi_strv_env_get (&e, "SETUPTOOLS_SCM_PRETEND_VERSION"));
    kiwi_strv_free (&e);
}

/* The commit's time reaches Phase A alone, as pip's and uv's settings
 * (an unlocked install resolves as of the commit); nothing that is not of
 * a time's form. */
static void
test_resolve_before (void **state)
{
    kiwi_phase_config c = cfg ();
    kiwi_strv e = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_phase_install_env (&c, NULL, &e, &err), 0);
    assert_null (kiwi_strv_env_get (&e, "PIP_UPLOADED_PRIOR_TO"));
    kiwi_strv_free (&e);
    c.resolve_before = "2026-08-20T08:01:14-05:00";
    assert_int_equal (kiwi_phase_install_env (&c, NULL, &e, &err), 0);
    assert_string_equal (kiwi_strv_env_get (&e, "PIP_UPLOADED_PRIOR_TO"), "PIP_UPLOADED_PRIOR_TO=2026-08-20T08:01:14-05:00");
    assert_string_equal (kiwi_strv_env_get (&e, "UV_EXCLUDE_NEWER"), "UV_EXCLUDE_NEWER=2026-08-20T08:01:14-05:00");
    kiwi_strv_free (&e);
    assert_int_equal (kiwi_phase_verify_env (&c, NULL, NULL, &e, NULL, NULL, &err), 0);
    assert_null (kiwi_strv_env_get (&e, "PIP_UPLOADED_PRIOR_TO"));
    assert_null (kiwi_strv_env_get (&e, "UV_EXCLUDE_NEWER"));
    kiwi_strv_free (&e);
    c.resolve_before = "2026-08-20T08:01:14 --index-url=http://x";
    assert_int_equal (kiwi_phase_install_env (&c, NULL, &e, &err), 0);
    assert_null (kiwi_strv_env_get (&e, "PIP_UPLOADED_PRIOR_TO"));
    assert_null (kiwi_strv_env_get (&e, "UV_EXCLUDE_NEWER"));
    kiwi_strv_free (&e);
}

/* An index without upload times refuses a resolve as of a time, in pip's
 * and uv's words; other failures are not that. */
static void
test_resolve_before_refused (void **state)
{
    (void) state;
    assert_true (kiwi_phase_resolve_before_refused (
        "Looking in indexes: https://pypi.acme.test/simple/\nERROR: Index https://pypi.acme.test/simple/acme-secret/ "
        "does not provide upload-time metadata.\n"));
    assert_true (kiwi_phase_resolve_before_refused (
        "warning: acme_secret-1.0.0-py3-none-any.whl is missing an upload date, but user provided: "
        "2026-12-07T08:42:54Z\n  x No solution found when resolving dependencies:\n"));
    assert_false (kiwi_phase_resolve_before_refused ("ERROR: No matching distribution found for acme-secret==1.0.0\n"));
    assert_false (kiwi_phase_resolve_before_refused (""));
    assert_false (kiwi_phase_resolve_before_refused (NULL));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_install_env_is_allow_list_only),
        cmocka_unit_test (test_install_env_ca_bundle_variables),
        cmocka_unit_test (test_proxy_with_credentials_is_refused),
        cmocka_unit_test (test_extra_env_cannot_smuggle_secrets),
        cmocka_unit_test (test_verify_env_named_credentials_only),
        cmocka_unit_test (test_session_env_no_credentials_unless_allowed),
        cmocka_unit_test (test_redis_password_never_enters),
        cmocka_unit_test (test_no_colour_variables),
        cmocka_unit_test (test_scm_version),
        cmocka_unit_test (test_resolve_before),
        cmocka_unit_test (test_resolve_before_refused),
    };
    return cmocka_run_group_tests_name ("phases_env", tests, NULL, NULL);
}
