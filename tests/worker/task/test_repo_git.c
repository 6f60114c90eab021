/*
 * test_repo_git.c: the one git command line of repo.c (repo-internal.h):
 * the safety options come before the command, the host's GIT_* variables,
 * HOME and XDG_CONFIG_HOME never reach git, the git directory is explicit,
 * protocol lists become protocol.allow=never plus one allow each, and the
 * token travels only as a header for https.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/task/repo-internal.h"

static const char *const host_env[] = {
    "PATH=/usr/bin:/bin",
    "HOME=/root",
    "XDG_CONFIG_HOME=/root/.config",
    "GIT_DIR=/elsewhere/.git",
    "GIT_WORK_TREE=/elsewhere",
    "GIT_CONFIG_PARAMETERS='core.fsmonitor=touch /tmp/x'",
    "GIT_CONFIG_COUNT=1",
    "GIT_CONFIG_KEY_0=core.sshCommand",
    "GIT_CONFIG_VALUE_0=touch /tmp/x",
    "GIT_EXTERNAL_DIFF=touch /tmp/x",
    "GIT_SSH_COMMAND=touch /tmp/x",
    "GIT_EXEC_PATH=/tmp/evil",
    "GIT_TEMPLATE_DIR=/tmp/evil",
    "GIT_SSL_CAINFO=/etc/kiwi/ca.pem",
    "PAGER=touch /tmp/x",
    "KIWI_GIT_TOKEN=secret-token-value",
    NULL,
};

/* argv holds "-c" `kv` before the command word */
static void
assert_option_before (const kiwi_strv *argv, const char *kv, const char *command)
{
    size_t at = 0, cmd = 0;
    for (size_t i = 1; i < argv->n; i++) {
        if (strcmp (argv->v[i], kv) == 0 && strcmp (argv->v[i - 1], "-c") == 0 && at == 0)
            at = i;
        if (strcmp (argv->v[i], command) == 0 && cmd == 0)
            cmd = i;
    }
    if (at == 0)
        fail_msg ("`-c %s` missing", kv);
    if (cmd == 0 || at > cmd)
        fail_msg ("`-c %s` is not before `%s`", kv, command);
}

/* the value of KEY in a "KEY=VALUE" vector, or NULL */
static const char *
envv (const kiwi_strv *env, const char *key)
{
    const char *kv = kiwi_strv_env_get (env, key);
    return kv ? kv + strlen (key) + 1 : NULL;
}

static size_t
count_prefix (const kiwi_strv *env, const char *prefix)
{
    size_t n = 0;
    for (size_t i = 0; i < env->n; i++)
        n += strncmp (env->v[i], prefix, strlen (prefix)) == 0;
    return n;
}

static void
test_safety_and_environment (void **state)
{
    kiwi__git_call c = { .git_dir = "/state/work/t-1.git", .work_tree = "/state/work/t-1",
                         .index_file = "/state/work/t-1.git/kiwi-diff-index", .home = "/state/work/t-1.git/kiwi-home" };
    const char *args[] = { "add", "--all", NULL };
    kiwi_strv argv = KIWI_STRV_INIT, env = KIWI_STRV_INIT;
    assert_int_equal (kiwi__git_command (&c, args, host_env, &argv, &env), 0);
    assert_string_equal (argv.v[0], "git");
    assert_string_equal (argv.v[1], "--no-pager");
    static const char *const must[] = {
        "core.hooksPath=/dev/null",      "core.fsmonitor=false",          "safe.bareRepository=explicit",
        "core.attributesFile=/dev/null", "core.excludesFile=/dev/null",   "core.pager=cat",
        "credential.helper=",            "core.untrackedCache=false",     "core.protectNTFS=true",
        "core.protectHFS=true",          "submodule.recurse=false",       NULL,
    };
    for (size_t i = 0; must[i]; i++)
        assert_option_before (&argv, must[i], "add");
    assert_string_equal (argv.v[argv.n - 2], "add");
    assert_string_equal (argv.v[argv.n - 1], "--all");
    /* no protocol list: git's defaults */
    for (size_t i = 0; i < argv.n; i++)
        assert_null (strstr (argv.v[i], "protocol."));

    /* the environment: explicit, nothing of the host's git settings */
    assert_string_equal (envv (&env, "GIT_DIR"), "/state/work/t-1.git");
    assert_string_equal (envv (&env, "GIT_WORK_TREE"), "/state/work/t-1");
    assert_string_equal (envv (&env, "GIT_INDEX_FILE"), "/state/work/t-1.git/kiwi-diff-index");
    assert_string_equal (envv (&env, "HOME"), "/state/work/t-1.git/kiwi-home");
    assert_string_equal (envv (&env, "XDG_CONFIG_HOME"), "/state/work/t-1.git/kiwi-home");
    assert_string_equal (envv (&env, "GIT_CONFIG_NOSYSTEM"), "1");
    assert_string_equal (envv (&env, "GIT_CONFIG_GLOBAL"), "/dev/null");
    assert_string_equal (envv (&env, "GIT_ATTR_NOSYSTEM"), "1");
    assert_string_equal (envv (&env, "GIT_NO_REPLACE_OBJECTS"), "1");
    assert_string_equal (envv (&env, "GIT_TERMINAL_PROMPT"), "0");
    assert_string_equal (envv (&env, "GIT_SSL_CAINFO"), "/etc/kiwi/ca.pem");
    assert_string_equal (envv (&env, "PATH"), "/usr/bin:/bin");
    assert_string_equal (envv (&env, "KIWI_GIT_TOKEN"), "secret-token-value");
    assert_non_null (strstr (envv (&env, "GIT_SSH_COMMAND"), "BatchMode=yes"));
    static const char *const gone[] = { "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0",
                                        "GIT_CONFIG_VALUE_0",    "GIT_EXTERNAL_DIFF", "GIT_EXEC_PATH",
                                        "GIT_TEMPLATE_DIR",      "PAGER",             NULL };
    for (size_t i = 0; gone[i]; i++)
        if (envv (&env, gone[i]) != NULL)
            fail_msg ("%s reached git", gone[i]);
    /* each variable once: the host's values are not just shadowed */
    assert_int_equal (count_prefix (&env, "GIT_DIR="), 1);
    assert_int_equal (count_prefix (&env, "HOME="), 1);
    assert_int_equal (count_prefix (&env, "GIT_SSH_COMMAND="), 1);
    for (size_t i = 0; i < env.n; i++)
        assert_null (strstr (env.v[i], "/tmp/x"));
    kiwi_strv_free (&argv);
    kiwi_strv_free (&env);

    /* clone and init name their directory: no GIT_DIR at all */
    kiwi__git_call cc = { .home = "/state/mirrors/kiwi-home" };
    const char *init[] = { "init", "--bare", "--", "/state/work/t-1.git", NULL };
    assert_int_equal (kiwi__git_command (&cc, init, host_env, &argv, &env), 0);
    assert_null (envv (&env, "GIT_DIR"));
    assert_null (envv (&env, "GIT_WORK_TREE"));
    assert_string_equal (envv (&env, "HOME"), "/state/mirrors/kiwi-home");
    kiwi_strv_free (&argv);
    kiwi_strv_free (&env);
}

static void
test_protocols (void **state)
{
    kiwi__git_call c = { .git_dir = "/m.git", .protocols = "https:ssh" };
    const char *args[] = { "fetch", "--", "https://example.com/r.git", NULL };
    kiwi_strv argv = KIWI_STRV_INIT, env = KIWI_STRV_INIT;
    assert_int_equal (kiwi__git_command (&c, args, host_env, &argv, &env), 0);
    assert_option_before (&argv, "protocol.allow=never", "fetch");
    assert_option_before (&argv, "protocol.https.allow=always", "fetch");
    assert_option_before (&argv, "protocol.ssh.allow=always", "fetch");
    size_t allows = 0;
    for (size_t i = 0; i < argv.n; i++)
        allows += strstr (argv.v[i], ".allow=always") != NULL;
    assert_int_equal (allows, 2);
    kiwi_strv_free (&argv);
    kiwi_strv_free (&env);
    /* empty items are skipped; a name that could smuggle an option is refused */
    c.protocols = "https::";
    assert_int_equal (kiwi__git_command (&c, args, host_env, &argv, &env), 0);
    kiwi_strv_free (&argv);
    kiwi_strv_free (&env);
    c.protocols = "https:x=1 -c core.fsmonitor=touch";
    assert_int_equal (kiwi__git_command (&c, args, host_env, &argv, &env), -1);
    kiwi_strv_free (&argv);
    kiwi_strv_free (&env);
}

static void
test_token_only_for_https (void **state)
{
    kiwi__git_call c = { .git_dir = "/m.git", .token = "tok-123", .url = "https://example.com/r.git" };
    const char *args[] = { "fetch", NULL };
    kiwi_strv argv = KIWI_STRV_INIT, env = KIWI_STRV_INIT;
    assert_int_equal (kiwi__git_command (&c, args, host_env, &argv, &env), 0);
    assert_string_equal (envv (&env, "GIT_CONFIG_KEY_0"), "http.extraHeader");
    /* base64 of x-access-token:tok-123 */
    assert_string_equal (envv (&env, "GIT_CONFIG_VALUE_0"),
                         "Authorization: Basic eC1hY2Nlc3MtdG9rZW46dG9rLTEyMw==");
    for (size_t i = 0; i < argv.n; i++)
        assert_null (strstr (argv.v[i], "tok-123"));
    kiwi_strv_free (&argv);
    kiwi_strv_free (&env);
    c.url = "ssh://git@example.com/r.git";
    assert_int_equal (kiwi__git_command (&c, args, host_env, &argv, &env), 0);
    assert_null (envv (&env, "GIT_CONFIG_KEY_0"));
    kiwi_strv_free (&argv);
    kiwi_strv_free (&env);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_safety_and_environment),
        cmocka_unit_test (test_protocols),
        cmocka_unit_test (test_token_only_for_https),
    };
    return cmocka_run_group_tests_name ("repo_git", tests, NULL, NULL);
}
