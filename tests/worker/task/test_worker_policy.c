/*
 * test_worker_policy.c: task fields under the operator's policy
 * (worker/task/policy.c): model base URLs against the allow-list (prefix tricks
 * included), repository schemes, scp-form ssh, file:// and local paths
 * (inside the state directory, through symlinks, gitfiles and alternates),
 * the git token's hosts, limits clamped to the ceilings, defaults, and the
 * test-credential allow-list.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shell.h"
#include "worker/config.h"
#include "worker/task/policy.h"
#include "schemas/task.h"

typedef struct fixture {
    kiwi_worker_config cfg;
    kiwi_task task;
    char tmp[64];
    char state[PATH_MAX];
} fixture;

static void
set (kiwi_worker_config *c, const char *name, const char *value)
{
    kiwi_error_t err = NULL;
    if (kiwi_worker_config_set (c, name, value, "test", &err) < 0)
        fail_msg ("%s=%s: %s", name, value, kiwi_error_msg (err));
}

static int
setup (void **state)
{
    fixture *f = calloc (1, sizeof *f);
    kiwi_worker_config_init (&f->cfg);
    snprintf (f->tmp, sizeof f->tmp, "/tmp/kiwi-policy-XXXXXX");
    assert_non_null (mkdtemp (f->tmp));
    snprintf (f->state, sizeof f->state, "%s/state", f->tmp);
    mkdir (f->state, 0755);
    set (&f->cfg, "state.dir", f->state);
    kiwi_task_init (&f->task);
    f->task.id = strdup ("t1");
    f->task.repo.url = strdup ("https://github.com/o/r.git");
    f->task.repo.ref = strdup ("main");
    f->task.test_command = strdup ("npm test");
    f->task.goal = strdup ("fix");
    *state = f;
    return 0;
}

static int
teardown (void **state)
{
    fixture *f = *state;
    kiwi_test_must ("rm -rf '%s'", f->tmp);
    kiwi_task_clear (&f->task);
    kiwi_worker_config_clear (&f->cfg);
    free (f);
    return 0;
}

/* Applies the policy; returns the refusal message ("" when accepted). */
static const char *
decide (fixture *f, kiwi_task_policy *pol)
{
    static char msg[2048];
    kiwi_error_t err = NULL;
    kiwi_task_policy local;
    if (pol == NULL)
        pol = &local;
    msg[0] = '\0';
    if (kiwi_policy_apply (&f->cfg, &f->task, pol, &err) < 0) {
        assert_int_equal (kiwi_error_code (err), KIWI_POLICY_E_REFUSED);
        snprintf (msg, sizeof msg, "%s", kiwi_error_msg (err));
        assert_true (msg[0] != '\0');
    }
    kiwi_error_free (&err);
    return msg;
}

static void
repo (fixture *f, const char *url)
{
    free (f->task.repo.url);
    f->task.repo.url = strdup (url);
}

static void
base_url (fixture *f, const char *url)
{
    f->task.has_model = true;
    f->task.model.provider = KIWI_PROVIDER_ANTHROPIC;
    free (f->task.model.name);
    f->task.model.name = strdup ("m");
    free (f->task.model.base_url);
    f->task.model.base_url = url ? strdup (url) : NULL;
}

/* The policy's verdict on the task as it is now: want exactly ("" when
 * accepted), or, with want NULL, any refusal. */
static void
expect_verdict (fixture *f, const char *want)
{
    const char *got = decide (f, NULL);
    if (want == NULL)
        assert_string_not_equal (got, "");
    else
        assert_string_equal (got, want);
}

/* The task's repository URL set to url, then expect_verdict. */
static void
expect_repo (fixture *f, const char *url, const char *want)
{
    repo (f, url);
    expect_verdict (f, want);
}

/* The task's repository URL set to url: accepted, and with Kiwi's git
 * token for its host exactly when token. */
static void
expect_token (fixture *f, const char *url, bool token)
{
    kiwi_task_policy pol;
    repo (f, url);
    assert_string_equal (decide (f, &pol), "");
    if (pol.git_token != token)
        fail_msg ("%s: git token %s, expected %s", url, pol.git_token ? "given" : "withheld",
                  token ? "given" : "withheld");
}

/* The task's model base URL set to url, then expect_verdict. */
static void
expect_base_url (fixture *f, const char *url, const char *want)
{
    base_url (f, url);
    expect_verdict (f, want);
}

/* ---------- URLs ---------- */

static void
test_url_parse (void **state)
{
    kiwi_url u;
    assert_int_equal (kiwi_url_parse ("HTTPS://Api.Example.COM./v1?x#y", &u), 0);
    assert_string_equal (u.scheme, "https");
    assert_string_equal (u.host, "api.example.com");
    assert_int_equal (u.port, 443);
    assert_string_equal (u.path, "/v1");
    assert_false (u.userinfo);
    assert_int_equal (kiwi_url_parse ("http://[::1]:8080", &u), 0);
    assert_string_equal (u.host, "[::1]");
    assert_int_equal (u.port, 8080);
    assert_string_equal (u.path, "/");
    assert_int_equal (kiwi_url_parse ("https://a@b.example/", &u), 0);
    assert_true (u.userinfo);
    assert_string_equal (u.host, "b.example");
    assert_true (kiwi_url_parse ("no-scheme.example/v1", &u) < 0);
    assert_true (kiwi_url_parse ("https://host:/x", &u) < 0);
    assert_true (kiwi_url_parse ("https://host:99999/x", &u) < 0);
    assert_true (kiwi_url_parse ("https://ho%73t/x", &u) < 0);
    assert_true (kiwi_url_parse ("https://ho\\st/x", &u) < 0);
    assert_true (kiwi_url_parse ("https:///x", &u) < 0);
}

static void
test_url_under (void **state)
{
    const char *allowed = "https://allowed.example";
    assert_true (kiwi_url_under ("https://allowed.example", allowed));
    assert_true (kiwi_url_under ("https://allowed.example/", allowed));
    assert_true (kiwi_url_under ("https://ALLOWED.example:443/v1/messages", allowed));
    /* the tricks a textual prefix lets through */
    assert_false (kiwi_url_under ("https://allowed.example.evil.com", allowed));
    assert_false (kiwi_url_under ("https://allowed.example@evil.com", allowed));
    assert_false (kiwi_url_under ("https://allowed.example:secret@evil.com/", allowed));
    assert_false (kiwi_url_under ("https://allowed.example:8443/", allowed));
    assert_false (kiwi_url_under ("http://allowed.example/", allowed));
    assert_false (kiwi_url_under ("https://evil.com/https://allowed.example", allowed));
    assert_false (kiwi_url_under ("https://user@allowed.example/", allowed));
    /* path prefixes end at a segment */
    assert_true (kiwi_url_under ("https://gw.example/team/v1", "https://gw.example/team"));
    assert_true (kiwi_url_under ("https://gw.example/team/", "https://gw.example/team/"));
    assert_false (kiwi_url_under ("https://gw.example/teamevil", "https://gw.example/team"));
    assert_false (kiwi_url_under ("https://gw.example/other", "https://gw.example/team/"));
    assert_false (kiwi_url_under ("https://gw.example/team/../other", "https://gw.example/team/"));
    assert_false (kiwi_url_under ("https://gw.example/team/%2e%2e/other", "https://gw.example/team/"));
    assert_false (kiwi_url_under ("https://gw.example/team/..%2fother", "https://gw.example/team/"));
    assert_true (kiwi_url_under ("http://127.0.0.1:4000/script/x", "http://127.0.0.1:4000/"));
    assert_false (kiwi_url_under ("http://127.0.0.1:4001/script/x", "http://127.0.0.1:4000/"));
}

/* ---------- the model ---------- */

static void
test_model_base_url (void **state)
{
    fixture *f = *state;
    kiwi_task_policy pol;
    /* no base URL in the task: the operator's (unset: the provider's) */
    assert_string_equal (decide (f, &pol), "");
    assert_null (pol.model_base_url);
    set (&f->cfg, "KIWI_MODEL_BASE_URL", "https://gateway.internal/v1");
    assert_string_equal (decide (f, &pol), "");
    assert_string_equal (pol.model_base_url, "https://gateway.internal/v1");
    /* empty allow-list: a task cannot choose */
    base_url (f, "https://x/");
    assert_string_equal (decide (f, &pol), "task.model.base_url: https://x/ is not in KIWI_MODEL_BASE_URLS (empty: "
                                            "tasks cannot choose a base URL)");
    set (&f->cfg, "KIWI_MODEL_BASE_URLS", "");
    assert_string_not_equal (decide (f, NULL), "");
    set (&f->cfg, "KIWI_MODEL_BASE_URLS", "https://allowed.example, http://127.0.0.1:4000/script/");
    expect_base_url (f, "https://allowed.example.evil.com/v1",
                     "task.model.base_url: https://allowed.example.evil.com/v1 is not in KIWI_MODEL_BASE_URLS "
                     "(https://allowed.example, http://127.0.0.1:4000/script/)");
    expect_base_url (f, "https://allowed.example@evil/", NULL);
    expect_base_url (f, "http://127.0.0.1:4000/other", NULL);
    base_url (f, "http://127.0.0.1:4000/script/two-rounds");
    assert_string_equal (decide (f, &pol), "");
    assert_string_equal (pol.model_base_url, "http://127.0.0.1:4000/script/two-rounds");
    base_url (f, "https://allowed.example/v1");
    assert_string_equal (decide (f, &pol), "");
    assert_string_equal (pol.model_base_url, "https://allowed.example/v1");
    /* a model map without a base URL keeps the operator's */
    base_url (f, NULL);
    assert_string_equal (decide (f, &pol), "");
    assert_string_equal (pol.model_base_url, "https://gateway.internal/v1");
}

/* ---------- repositories ---------- */

static void
test_repo_schemes (void **state)
{
    fixture *f = *state;
    kiwi_task_policy pol;
    assert_string_equal (decide (f, &pol), "");
    assert_string_equal (pol.git_protocols, "https:ssh");
    assert_false (pol.local_repo);
    expect_repo (f, "ssh://git@example.com/o/r.git", "");
    expect_repo (f, "git+ssh://git@example.com/o/r.git", "");
    expect_repo (f, "git@example.com:o/r.git", ""); /* scp form */
    expect_repo (f, "example.com:o/r.git", "");
    expect_repo (f, "-oProxyCommand=x:o/r.git", "task.repo.url: -oProxyCommand=x:o/r.git names no ssh host");
    expect_repo (f, "ssh://-oProxyCommand=x/r.git", NULL);
    expect_repo (f, "git://127.0.0.1:9418/r.git",
                 "task.repo.url: git://127.0.0.1:9418/r.git: scheme git is not in KIWI_REPO_SCHEMES (https,ssh)");
    expect_repo (f, "http://example.com/r.git", NULL);
    expect_repo (f, "ftp://example.com/r.git", NULL);
    expect_repo (f, "ext::sh -c touch% /tmp/pwned",
                 "task.repo.url: ext::sh -c touch% /tmp/pwned: git's transport::address form is not accepted");
    expect_repo (f, "fd::3", NULL);
    set (&f->cfg, "KIWI_REPO_SCHEMES", "https,ssh,git");
    repo (f, "git://127.0.0.1:9418/r.git");
    assert_string_equal (decide (f, &pol), "");
    assert_string_equal (pol.git_protocols, "https:ssh:git");
    set (&f->cfg, "KIWI_REPO_SCHEMES", "https,gopher");
    assert_string_not_equal (decide (f, NULL), "");
    set (&f->cfg, "KIWI_REPO_SCHEMES", "ssh");
    expect_repo (f, "https://github.com/o/r.git", NULL);
}

static void
test_local_repos (void **state)
{
    fixture *f = *state;
    kiwi_task_policy pol;
    char path[PATH_MAX + 64], url[PATH_MAX + 80];
    snprintf (path, sizeof path, "%s/repo", f->tmp);
    kiwi_test_must ("git init -q --bare '%s'", path);
    repo (f, path);
    char want[PATH_MAX + 200];
    snprintf (want, sizeof want, "task.repo.url: %s is a local repository, and KIWI_ALLOW_LOCAL_REPOS is false", path);
    assert_string_equal (decide (f, NULL), want);
    snprintf (url, sizeof url, "file://%s", path);
    expect_repo (f, url, NULL);
    set (&f->cfg, "KIWI_ALLOW_LOCAL_REPOS", "true");
    assert_string_equal (decide (f, &pol), "");
    assert_true (pol.local_repo);
    assert_string_equal (pol.git_protocols, "https:ssh:file");
    snprintf (url, sizeof url, "file://localhost%s", path);
    expect_repo (f, url, "");
    expect_repo (f, path, "");
    expect_repo (f, "file://otherhost/srv/r.git", NULL);
    snprintf (url, sizeof url, "%s/none", f->tmp);
    expect_repo (f, url, NULL);

    /* another tenant's mirror under the state directory: refused, however named */
    char mirror[PATH_MAX + 64];
    snprintf (mirror, sizeof mirror, "%s/mirrors/0123abcd.git", f->state);
    kiwi_test_must ("mkdir -p '%s/mirrors' && git init -q --bare '%s'", f->state, mirror);
    repo (f, mirror);
    assert_non_null (strstr (decide (f, NULL), "inside the worker's state directory"));
    snprintf (url, sizeof url, "file://%s", mirror);
    repo (f, url);
    assert_non_null (strstr (decide (f, NULL), "inside the worker's state directory"));
    snprintf (url, sizeof url, "%s/../state/./mirrors/0123abcd.git", f->state);
    repo (f, url);
    assert_non_null (strstr (decide (f, NULL), "inside the worker's state directory"));
    /* a symlink to it */
    snprintf (url, sizeof url, "%s/link.git", f->tmp);
    kiwi_test_must ("ln -s '%s' '%s'", mirror, url);
    repo (f, url);
    assert_non_null (strstr (decide (f, NULL), "inside the worker's state directory"));
    /* a gitfile pointing at it */
    snprintf (url, sizeof url, "%s/gitfile-repo", f->tmp);
    kiwi_test_must ("mkdir -p '%s' && printf 'gitdir: %s\\n' > '%s/.git'", url, mirror, url);
    repo (f, url);
    assert_non_null (strstr (decide (f, NULL), "inside the worker's state directory"));
    /* a repository borrowing its objects through alternates */
    snprintf (url, sizeof url, "%s/borrower.git", f->tmp);
    kiwi_test_must ("git init -q --bare '%s' && echo '%s/objects' > '%s/objects/info/alternates'", url, mirror, url);
    repo (f, url);
    assert_non_null (strstr (decide (f, NULL), "inside the worker's state directory"));
    /* the state directory itself */
    repo (f, f->state);
    assert_non_null (strstr (decide (f, NULL), "inside the worker's state directory"));
    /* a sibling whose name starts like it is not inside */
    snprintf (url, sizeof url, "%s/state-other", f->tmp);
    kiwi_test_must ("git init -q --bare '%s'", url);
    expect_repo (f, url, "");
}

static void
test_git_token_hosts (void **state)
{
    fixture *f = *state;
    kiwi_task_policy pol;
    assert_string_equal (decide (f, &pol), "");
    assert_true (pol.git_token); /* default: github.com */
    expect_token (f, "https://GitHub.com:443/o/r.git", true);
    expect_token (f, "https://github.com.evil.com/o/r.git", false); /* fetched, without the token */
    expect_token (f, "https://github.com@evil.com/o/r.git", false);
    expect_token (f, "https://github.com:8443/o/r.git", false);
    expect_token (f, "https://127.0.0.1:4443/o/r.git", false);
    set (&f->cfg, "KIWI_REPO_SCHEMES", "https,http,ssh");
    expect_token (f, "http://github.com/o/r.git", false); /* never over plain http */
    expect_token (f, "git@github.com:o/r.git", false);
    set (&f->cfg, "KIWI_GIT_TOKEN_HOSTS", "git.internal:8443, gitlab.example");
    expect_token (f, "https://git.internal:8443/o/r.git", true);
    expect_token (f, "https://gitlab.example/o/r.git", true);
    expect_token (f, "https://github.com/o/r.git", false);
    set (&f->cfg, "KIWI_GIT_TOKEN_HOSTS", "");
    expect_token (f, "https://gitlab.example/o/r.git", false);
}

/* ---------- limits ---------- */

static void
test_limits_defaults (void **state)
{
    fixture *f = *state;
    kiwi_task_policy pol;
    /* the task says nothing: the operator's values */
    assert_string_equal (decide (f, &pol), "");
    assert_int_equal (pol.limits.timeout_seconds, 1800);
    assert_int_equal (pol.limits.disk_mb, 2048);
    assert_int_equal (pol.limits.max_rounds, 8);
    assert_true (pol.limits.has_session_budget_tokens);
    assert_int_equal (pol.limits.session_budget_tokens, 2000000);
    assert_int_equal (pol.memory_mb, 2048);
    assert_int_equal (pol.pids, 512);
    assert_int_equal (pol.cpus, kiwi_worker_auto_cpus (sysconf (_SC_NPROCESSORS_ONLN)));
    set (&f->cfg, "TaskTimeoutSeconds", "3600");
    set (&f->cfg, "MaxSandboxDiskMB", "64");
    set (&f->cfg, "KIWI_MAX_ROUNDS", "20");
    set (&f->cfg, "KIWI_SESSION_BUDGET", "5000");
    set (&f->cfg, "KIWI_SANDBOX_MEMORY_MB", "256");
    set (&f->cfg, "KIWI_SANDBOX_CPUS", "3");
    assert_string_equal (decide (f, &pol), "");
    assert_int_equal (pol.limits.timeout_seconds, 3600);
    assert_int_equal (pol.limits.disk_mb, 64);
    assert_int_equal (pol.limits.max_rounds, 20);
    assert_int_equal (pol.limits.session_budget_tokens, 5000);
    assert_int_equal (pol.memory_mb, 256);
    assert_int_equal (pol.cpus, 3);
}

static void
test_limits_clamped (void **state)
{
    fixture *f = *state;
    kiwi_task_policy pol;
    set (&f->cfg, "KIWI_TASK_TIMEOUT", "600");
    set (&f->cfg, "KIWI_MAX_SANDBOX_DISK_MB", "64");
    set (&f->cfg, "KIWI_MAX_ROUNDS", "3");
    set (&f->cfg, "KIWI_SESSION_BUDGET", "100000");
    /* a task asking for everything */
    f->task.limits.timeout_seconds = 86400;
    f->task.limits.disk_mb = 1048576;
    f->task.limits.max_rounds = 100;
    f->task.limits.has_session_budget_tokens = true;
    f->task.limits.session_budget_tokens = UINT64_MAX;
    f->task.limits.has_session_budget_usd_micros = true;
    f->task.limits.session_budget_usd_micros = 2500000;
    assert_string_equal (decide (f, &pol), "");
    assert_int_equal (pol.limits.timeout_seconds, 600);
    assert_int_equal (pol.limits.disk_mb, 64);
    assert_int_equal (pol.limits.max_rounds, 3);
    assert_int_equal (pol.limits.session_budget_tokens, 100000);
    assert_true (pol.limits.has_session_budget_usd_micros);
    assert_int_equal (pol.limits.session_budget_usd_micros, 2500000);
    /* a task asking for less keeps it */
    f->task.limits.timeout_seconds = 60;
    f->task.limits.disk_mb = 32;
    f->task.limits.max_rounds = 2;
    f->task.limits.session_budget_tokens = 10;
    assert_string_equal (decide (f, &pol), "");
    assert_int_equal (pol.limits.timeout_seconds, 60);
    assert_int_equal (pol.limits.disk_mb, 32);
    assert_int_equal (pol.limits.max_rounds, 2);
    assert_int_equal (pol.limits.session_budget_tokens, 10);
    /* the copy the pipeline runs with */
    kiwi_task eff = kiwi_policy_task (&f->task, &pol);
    assert_int_equal (eff.limits.disk_mb, 32);
    assert_ptr_equal (eff.id, f->task.id);
}

/* ---------- test credentials ---------- */

static void
test_credentials (void **state)
{
    fixture *f = *state;
    f->task.test_credentials = calloc (2, sizeof (char *));
    f->task.test_credentials[0] = strdup ("DB_PASSWORD");
    f->task.test_credentials[1] = strdup ("AWS_SECRET_ACCESS_KEY");
    f->task.n_test_credentials = 2;
    assert_string_equal (decide (f, NULL), "task.test_credentials[0]: DB_PASSWORD is not in KIWI_TEST_CREDENTIALS "
                                           "(empty: tasks cannot ask for credentials)");
    set (&f->cfg, "KIWI_TEST_CREDENTIALS", "DB_PASSWORD,STRIPE_TEST_KEY");
    assert_string_equal (decide (f, NULL), "task.test_credentials[1]: AWS_SECRET_ACCESS_KEY is not in "
                                           "KIWI_TEST_CREDENTIALS (DB_PASSWORD,STRIPE_TEST_KEY)");
    set (&f->cfg, "KIWI_TEST_CREDENTIALS", "AWS_SECRET_ACCESS_KEY, DB_PASSWORD");
    assert_string_equal (decide (f, NULL), "");
    set (&f->cfg, "KIWI_TEST_CREDENTIALS", "db_password,AWS_SECRET_ACCESS_KEY");
    assert_string_not_equal (decide (f, NULL), ""); /* names are exact */
}

static void
test_check_config (void **state)
{
    fixture *f = *state;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_policy_check_config (&f->cfg, &err), 0);
    set (&f->cfg, "KIWI_MODEL_BASE_URLS", "https://gw.example/v1, http://127.0.0.1:4000/");
    set (&f->cfg, "KIWI_GIT_TOKEN_HOSTS", "github.com, git.internal:8443");
    set (&f->cfg, "KIWI_REPO_SCHEMES", "https, ssh, git, http");
    assert_int_equal (kiwi_policy_check_config (&f->cfg, &err), 0);
    set (&f->cfg, "KIWI_REPO_SCHEMES", "https,ext");
    assert_true (kiwi_policy_check_config (&f->cfg, &err) < 0);
    assert_non_null (strstr (kiwi_error_msg (err), "KIWI_REPO_SCHEMES: unknown scheme `ext`"));
    kiwi_error_free (&err);
    set (&f->cfg, "KIWI_REPO_SCHEMES", "https");
    set (&f->cfg, "KIWI_MODEL_BASE_URLS", "gw.example/v1");
    assert_true (kiwi_policy_check_config (&f->cfg, &err) < 0);
    assert_string_equal (kiwi_error_msg (err), "KIWI_MODEL_BASE_URLS: `gw.example/v1` is not a URL prefix "
                                               "(scheme://host[:port][/path], no user@)");
    kiwi_error_free (&err);
    set (&f->cfg, "KIWI_MODEL_BASE_URLS", "https://u@gw.example/");
    assert_true (kiwi_policy_check_config (&f->cfg, &err) < 0);
    kiwi_error_free (&err);
    set (&f->cfg, "KIWI_MODEL_BASE_URLS", "");
    set (&f->cfg, "KIWI_GIT_TOKEN_HOSTS", "https://github.com");
    assert_true (kiwi_policy_check_config (&f->cfg, &err) < 0);
    assert_non_null (strstr (kiwi_error_msg (err), "KIWI_GIT_TOKEN_HOSTS"));
    kiwi_error_free (&err);
}

static void
test_help_lists_settings (void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream (&buf, &len);
    kiwi_worker_config_help (m);
    fclose (m);
    const char *names[] = { "KIWI_MODEL_BASE_URLS", "KIWI_GIT_TOKEN_HOSTS", "KIWI_REPO_SCHEMES",
                            "KIWI_ALLOW_LOCAL_REPOS", "KIWI_TEST_CREDENTIALS" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_non_null (strstr (buf, names[i]));
    free (buf);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_url_parse),
        cmocka_unit_test (test_url_under),
        cmocka_unit_test_setup_teardown (test_model_base_url, setup, teardown),
        cmocka_unit_test_setup_teardown (test_repo_schemes, setup, teardown),
        cmocka_unit_test_setup_teardown (test_local_repos, setup, teardown),
        cmocka_unit_test_setup_teardown (test_git_token_hosts, setup, teardown),
        cmocka_unit_test_setup_teardown (test_limits_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown (test_limits_clamped, setup, teardown),
        cmocka_unit_test_setup_teardown (test_credentials, setup, teardown),
        cmocka_unit_test_setup_teardown (test_check_config, setup, teardown),
        cmocka_unit_test (test_help_lists_settings),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
