/*
 * test_cli_opts.c: the option parser (spellings, task fields, settings
 * flags, errors), the help made from the same tables, the exit statuses of
 * `kiwi wait`, and docs/cli.md carrying every command's --help verbatim.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "producer/cli.h"
#include "producer/cli-opts.h"
#include "schemas/task-input.h"

enum { O_FOLLOW = KIWI_OPT_OWN, O_LIMIT, O_FILE };

static const kiwi_opt t_opts[] = {
    { O_FOLLOW, "follow", 'f', NULL, "follow" },
    { O_LIMIT, "limit", 'n', "N", "limit" },
    { O_FILE, "file", 0, "PATH", "file" },
    { 0, NULL, 0, NULL, NULL },
};

static const kiwi_cmd t_cmd = {
    .name = "demo",
    .synopsis = "demo [OPTIONS] ARG",
    .summary = "a demo",
    .description = "Demo command.",
    .opts = t_opts,
    .task_fields = KIWI_TASK_FIELD_BIT (KIWI_TF_REPO) | KIWI_TASK_FIELD_BIT (KIWI_TF_MAX_ROUNDS),
};

static int
parse (kiwi_args *a, kiwi_error_t *err, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *) "demo";
    va_list ap;
    va_start (ap, err);
    const char *s;
    while ((s = va_arg (ap, const char *)) != NULL)
        argv[argc++] = (char *) s;
    va_end (ap);
    memset (a, 0, sizeof *a);
    return kiwi_args_parse (&t_cmd, argc, argv, 1, a, err);
}

static void
test_spellings (void **state)
{
    kiwi_args a;
    kiwi_error_t err = NULL;
    assert_int_equal (parse (&a, &err, "x", "--limit", "5", "-f", "--file=/tmp/a=b", "-n7", "--repo", "https://r",
                             "--max-rounds=3", "--brokers", "h:1", "--tasks-topic=t.t", "-", "--", "--follow", NULL),
                      0);
    assert_int_equal (a.n_pos, 3);
    assert_string_equal (a.pos[0], "x");
    assert_string_equal (a.pos[1], "-");
    assert_string_equal (a.pos[2], "--follow");
    assert_int_equal (a.n_opts, 6);
    assert_int_equal (a.opts[0].id, O_LIMIT);
    assert_string_equal (a.opts[0].value, "5");
    assert_int_equal (a.opts[1].id, O_FOLLOW);
    assert_null (a.opts[1].value);
    assert_int_equal (a.opts[2].id, O_FILE);
    assert_string_equal (a.opts[2].value, "/tmp/a=b");
    assert_int_equal (a.opts[3].id, O_LIMIT);
    assert_string_equal (a.opts[3].value, "7");
    assert_string_equal (a.opts[3].spelling, "-n7");
    assert_int_equal (a.opts[4].id, KIWI_TF_REPO);
    assert_string_equal (a.opts[4].value, "https://r");
    assert_int_equal (a.opts[5].id, KIWI_TF_MAX_ROUNDS);
    assert_string_equal (a.settings[KIWI_SETTING_BROKERS], "h:1");
    assert_string_equal (a.settings[KIWI_SETTING_TOPIC_TASKS], "t.t");
    assert_false (a.help);
    kiwi_args_clear (&a);

    assert_int_equal (parse (&a, &err, "-fn", "9", NULL), 0);
    assert_int_equal (a.n_opts, 2);
    assert_int_equal (a.opts[1].id, O_LIMIT);
    assert_string_equal (a.opts[1].value, "9");
    kiwi_args_clear (&a);

    assert_int_equal (parse (&a, &err, "--whatever-else", "-h", NULL), -1); /* unknown first */
    kiwi_error_free (&err);
    kiwi_args_clear (&a);
    assert_int_equal (parse (&a, &err, "-h", NULL), 0);
    assert_true (a.help);
    kiwi_args_clear (&a);
    assert_int_equal (parse (&a, &err, "arg", "--help", NULL), 0);
    assert_true (a.help);
    kiwi_args_clear (&a);
}

static void
usage_error (const char *want, ...)
{
    char *argv[16];
    int argc = 0;
    argv[argc++] = (char *) "demo";
    va_list ap;
    va_start (ap, want);
    const char *s;
    while ((s = va_arg (ap, const char *)) != NULL)
        argv[argc++] = (char *) s;
    va_end (ap);
    kiwi_args a = { 0 };
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_args_parse (&t_cmd, argc, argv, 1, &a, &err), -1);
    assert_string_equal (kiwi_error_msg (err), want);
    assert_int_equal (kiwi_error_code (err), KIWI_CLI_EUSAGE);
    assert_int_equal (kiwi_exit_for (err), KIWI_EXIT_USAGE);
    kiwi_error_free (&err);
    kiwi_args_clear (&a);
}

static void
test_errors (void **state)
{
    usage_error ("unknown option `--nope` (see kiwi demo --help)", "--nope", NULL);
    usage_error ("unknown option `--goal` (see kiwi demo --help)", "--goal", "g", NULL); /* not one of its fields */
    usage_error ("unknown option `-z` (see kiwi demo --help)", "-z", NULL);
    usage_error ("option `--limit` needs a value", "--limit", NULL);
    usage_error ("option `-n` needs a value", "-n", NULL);
    usage_error ("option `--brokers` needs a value", "--brokers", NULL);
    usage_error ("option `--follow` takes no value", "--follow=yes", NULL);
}

static void
test_numbers (void **state)
{
    unsigned long long n = 0;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_parse_u64 ("--limit", "12", 1, 100, &n, &err), 0);
    assert_int_equal (n, 12);
    assert_int_equal (kiwi_parse_u64 ("--limit", "0", 1, 100, &n, &err), -1);
    assert_string_equal (kiwi_error_msg (err), "--limit: 0 is out of range (accepted: 1 to 100)");
    kiwi_error_free (&err);
    assert_int_equal (kiwi_parse_u64 ("--limit", "1e3", 1, 100, &n, &err), -1);
    assert_string_equal (kiwi_error_msg (err), "--limit: `1e3` is not a whole number (accepted: 1 to 100)");
    kiwi_error_free (&err);
    assert_int_equal (kiwi_parse_u64 ("--limit", "-1", 1, 100, &n, &err), -1);
    kiwi_error_free (&err);
}

static char *
help_of (const kiwi_cmd *cmd)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&out, &len);
    kiwi_cmd_help (cmd, f);
    fclose (f);
    return out;
}

static void
test_help_from_the_tables (void **state)
{
    char *h = help_of (&t_cmd);
    assert_true (strncmp (h, "Usage: kiwi demo [OPTIONS] ARG\n\nDemo command.\n", 46) == 0);
    assert_non_null (strstr (h, "\nTask fields:\n  --repo URL "));
    assert_non_null (strstr (h, "  --max-rounds N "));
    assert_null (strstr (h, "--goal"));
    assert_non_null (strstr (h, "  -f, --follow "));
    assert_non_null (strstr (h, "  -n, --limit N "));
    assert_non_null (strstr (h, "  -h, --help "));
    assert_non_null (strstr (h, "--brokers"));
    free (h);

    /* every command: every option it parses is in its help */
    for (const kiwi_command *c = kiwi_commands; c->cmd; c++) {
        h = help_of (c->cmd);
        for (const kiwi_opt *o = c->cmd->opts; o && o->name; o++) {
            char want[96];
            snprintf (want, sizeof want, "--%s", o->name);
            if (strstr (h, want) == NULL)
                fail_msg ("kiwi %s --help lacks %s", c->cmd->name, want);
        }
        assert_non_null (strstr (h, "Exit status:\n  0 "));
        free (h);
    }
}

static void
test_wait_exit_codes (void **state)
{
    int seen[256] = { 0 };
    for (int s = KIWI_RESULT_UNSET + 1; s < KIWI_RESULT__END; s++) {
        int code = kiwi_wait_exit_code ((kiwi_result_status) s);
        assert_true (code >= 0 && code < 256);
        if (seen[code])
            fail_msg ("exit status %d used twice", code);
        seen[code] = 1;
        assert_true (code == 0 || code >= 10); /* apart from the shared 1, 2, 3 */
    }
    assert_int_equal (kiwi_wait_exit_code (KIWI_RESULT_FIXED), 0);
    assert_int_equal (kiwi_wait_exit_code (KIWI_RESULT_NOT_FIXED), 10);
    assert_int_equal (kiwi_wait_exit_code (KIWI_RESULT_ERROR), 16);
    assert_false (seen[KIWI_EXIT_WAIT_TIMEOUT]);
    /* the help of kiwi wait lists each */
    char *h = help_of (&kiwi_cmd_wait_def);
    for (int s = KIWI_RESULT_UNSET + 1; s < KIWI_RESULT__END; s++) {
        char want[96];
        snprintf (want, sizeof want, "\n  %-4d %s", kiwi_wait_exit_code ((kiwi_result_status) s),
                  kiwi_result_status_name ((kiwi_result_status) s));
        if (strstr (h, want) == NULL)
            fail_msg ("kiwi wait --help lacks `%s`", want + 1);
    }
    assert_non_null (strstr (h, "\n  124  the wait timed out"));
    free (h);
}

static void
test_docs_carry_every_help (void **state)
{
    FILE *f = fopen (KIWI_SOURCE_DIR "/docs/cli.md", "r");
    assert_non_null (f);
    char *doc = NULL;
    size_t cap = 0;
    ssize_t n = getdelim (&doc, &cap, '\0', f);
    fclose (f);
    assert_true (n > 0);
    for (const kiwi_command *c = kiwi_commands; c->cmd; c++) {
        char *h = help_of (c->cmd);
        if (strstr (doc, h) == NULL)
            fail_msg ("docs/cli.md lacks the current `kiwi %s --help` (regenerate it: kiwi %s --help)", c->cmd->name,
                      c->cmd->name);
        free (h);
    }
    char *top = NULL;
    size_t len = 0;
    FILE *m = open_memstream (&top, &len);
    kiwi_cli_help (m);
    fclose (m);
    if (strstr (doc, top) == NULL)
        fail_msg ("docs/cli.md lacks the current `kiwi --help`");
    free (top);
    free (doc);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_spellings),      cmocka_unit_test (test_errors),
        cmocka_unit_test (test_numbers),        cmocka_unit_test (test_help_from_the_tables),
        cmocka_unit_test (test_wait_exit_codes), cmocka_unit_test (test_docs_carry_every_help),
    };
    return cmocka_run_group_tests_name ("cli_opts", tests, NULL, NULL);
}
