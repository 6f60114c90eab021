/*
 * test_cli_batch.c: `kiwi batch` lines: TSV with and without a header,
 * JSON lines, defaults from flags, and the exact rejection messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "producer/batch.h"
#include "schemas/task-input.h"
#include "schemas/wire.h"

/* Feeds lines (NUL-separated list ending with an empty string) through one
 * parser; the outcome of each line is written to out[] as "skip", "task",
 * "reject: <msg>" or "fatal: <msg>"; tasks go to tasks[]. */
typedef struct run {
    char out[32][512];
    kiwi_task tasks[32];
    size_t n_tasks;
} run;

static void
feed (kiwi_batch_parser *p, const char *const *lines, run *r)
{
    r->n_tasks = 0;
    for (size_t i = 0; lines[i] != NULL; i++) {
        char *copy = strdup (lines[i]);
        kiwi_task t;
        kiwi_error_t err = NULL;
        kiwi_batch_line_kind k = kiwi_batch_line (p, i + 1, copy, strlen (copy), &t, &err);
        switch (k) {
        case KIWI_BATCH_LINE_SKIP: snprintf (r->out[i], sizeof r->out[i], "skip"); break;
        case KIWI_BATCH_LINE_TASK:
            snprintf (r->out[i], sizeof r->out[i], "task");
            r->tasks[r->n_tasks++] = t;
            break;
        case KIWI_BATCH_LINE_REJECT:
            snprintf (r->out[i], sizeof r->out[i], "reject: %s", kiwi_error_msg (err));
            assert_int_equal (kiwi_error_code (err), KIWI_WIRE_EINVALID);
            break;
        case KIWI_BATCH_LINE_FATAL: snprintf (r->out[i], sizeof r->out[i], "fatal: %s", kiwi_error_msg (err)); break;
        }
        kiwi_error_free (&err);
        free (copy);
    }
}

static void
run_clear (run *r)
{
    for (size_t i = 0; i < r->n_tasks; i++)
        kiwi_task_clear (&r->tasks[i]);
    r->n_tasks = 0;
}

/* A flag's default for every task of a batch, as `kiwi batch` sets it. */
typedef struct flag_default {
    kiwi_task_field field;
    const char *value;
    const char *flag;
} flag_default;

/* Initialises *defaults and sets each of flags (ending with a NULL flag),
 * asserting that every one is accepted. The caller clears *defaults. */
static void
defaults_from_flags (kiwi_task *defaults, const flag_default *flags)
{
    kiwi_task_init (defaults);
    for (size_t i = 0; flags[i].flag != NULL; i++) {
        kiwi_error_t err = NULL;
        int rc = kiwi_task_input_set (defaults, flags[i].field, flags[i].value, flags[i].flag, &err);
        if (rc != 0)
            fail_msg ("%s %s: %s", flags[i].flag, flags[i].value, kiwi_error_msg (err));
    }
}

/* Asserts the outcome of each line: want[i] is line i+1's exactly or, when
 * it ends in "...", how it starts; want ends with NULL. */
static void
expect_outcomes (const run *r, const char *const *want)
{
    for (size_t i = 0; want[i] != NULL; i++) {
        size_t n = strlen (want[i]);
        if (n >= 3 && strcmp (want[i] + n - 3, "...") == 0) {
            if (strncmp (r->out[i], want[i], n - 3) != 0)
                fail_msg ("line %zu: \"%s\" does not start with \"%.*s\"", i + 1, r->out[i], (int) (n - 3), want[i]);
        } else
            assert_string_equal (r->out[i], want[i]);
    }
}

/* Clears what a test with defaults made: the tasks, the parser, the defaults. */
static void
batch_clear (run *r, kiwi_batch_parser *p, kiwi_task *defaults)
{
    run_clear (r);
    kiwi_batch_parser_clear (p);
    kiwi_task_clear (defaults);
}

static void
test_tsv_without_header (void **state)
{
    kiwi_task defaults;
    defaults_from_flags (&defaults, (const flag_default[]) { { KIWI_TF_GOAL, "make the tests pass", "--goal" },
                                                             { KIWI_TF_MAX_ROUNDS, "4", "--max-rounds" },
                                                             { 0, NULL, NULL } });
    kiwi_batch_parser p;
    kiwi_batch_parser_init (&p, KIWI_BATCH_AUTO, &defaults);
    const char *lines[] = {
        "# repositories to fix, url ref test goal",
        "https://git.example.test/a.git\tmain\tmake test\tfix the flaky sum test",
        "https://git.example.test/b.git\tv2.1\tnpm test",
        "",
        "   ",
        "https://git.example.test/c.git\t\tmake test",
        "https://git.example.test/d.git\tmain",
        "https://git.example.test/e.git\tmain\tpytest -q\tgoal\textra",
        "https://git.example.test/f.git\tmain\tcargo test\r",
        "\tmain\tmake test",
        "-oops\tmain\tmake",
        NULL,
    };
    run r;
    feed (&p, lines, &r);
    expect_outcomes (&r, (const char *const[]) {
                             "skip", "task", "task", "skip", "skip",
                             "reject: task.repo.ref: required field missing",
                             "reject: task.test_command: required field missing",
                             "reject: 5 cells, but without a header the columns are url, ref, test_command, goal",
                             "task",
                             "reject: task.repo.url: required field missing",
                             "reject: task.repo.url: ...",
                             NULL });
    assert_int_equal (p.format, KIWI_BATCH_TSV);

    assert_int_equal (r.n_tasks, 3);
    kiwi_task *a = &r.tasks[0], *b = &r.tasks[1], *f = &r.tasks[2];
    assert_string_equal (a->repo.url, "https://git.example.test/a.git");
    assert_string_equal (a->repo.ref, "main");
    assert_string_equal (a->test_command, "make test");
    assert_string_equal (a->goal, "fix the flaky sum test");
    assert_int_equal (a->limits.max_rounds, 4);
    assert_string_equal (a->source, "batch");
    assert_non_null (a->id);
    assert_string_equal (b->goal, "make the tests pass"); /* the default */
    assert_string_equal (b->repo.ref, "v2.1");
    assert_string_equal (f->test_command, "cargo test"); /* CR dropped */
    assert_string_not_equal (a->id, b->id);
    batch_clear (&r, &p, &defaults);
}

static void
test_tsv_with_header (void **state)
{
    kiwi_task defaults;
    defaults_from_flags (&defaults, (const flag_default[]) { { KIWI_TF_TEST, "make check", "--test" },
                                                             { KIWI_TF_GOAL, "pass", "--goal" },
                                                             { KIWI_TF_CRED, "DEFAULT_TOKEN", "--cred" },
                                                             { 0, NULL, NULL } });
    kiwi_batch_parser p;
    kiwi_batch_parser_init (&p, KIWI_BATCH_AUTO, &defaults);
    const char *lines[] = {
        "URL\tref\tid\tmax-rounds\tbudget_usd\tcred\tsubdir\tprovider\tmodel",
        "https://x/a.git\tmain\tjob-1\t3\t0.5\tA_TOKEN, B_TOKEN\tsvc/api\tanthropic\tclaude-x",
        "https://x/b.git\tdev\t\t\t\t\t\t\t",
        "https://x/c.git\tdev\tjob-1",
        "https://x/d.git\tdev\tjob-2\tmany",
        "https://x/e.git\tdev\tjob-3\t0",
        "https://x/f.git\tdev\tjob-4\t1\t1\tX\ta\tb\tc\td",
        "https://x/g.git\tdev\tjob-5\t1\t1\tX\t\tgemini\t",
        NULL,
    };
    run r;
    feed (&p, lines, &r);
    expect_outcomes (&r, (const char *const[]) {
                             "skip", "task", "task",
                             "reject: task.id: `job-1` already used on line 2",
                             "reject: column limits.max_rounds: `many` is not a whole number",
                             "reject: task.limits.max_rounds: must be between 1 and 100, got 0",
                             "reject: 10 cells, but the header names 9 columns",
                             "reject: task.model.name: required field missing",
                             NULL });
    assert_int_equal (r.n_tasks, 2);
    kiwi_task *a = &r.tasks[0], *b = &r.tasks[1];
    assert_string_equal (a->id, "job-1");
    assert_int_equal (a->limits.max_rounds, 3);
    assert_int_equal (a->limits.session_budget_usd_micros, 500000);
    assert_int_equal (a->n_test_credentials, 2); /* the column replaces the default */
    assert_string_equal (a->test_credentials[0], "A_TOKEN");
    assert_string_equal (a->test_credentials[1], "B_TOKEN");
    assert_string_equal (a->repo.subdir, "svc/api");
    assert_string_equal (a->model.name, "claude-x");
    assert_string_equal (a->test_command, "make check");
    assert_int_equal (b->limits.max_rounds, 8); /* empty cells: defaults */
    assert_int_equal (b->n_test_credentials, 1);
    assert_string_equal (b->test_credentials[0], "DEFAULT_TOKEN");
    assert_false (b->has_model);
    batch_clear (&r, &p, &defaults);
}

static void
test_bad_header_is_fatal (void **state)
{
    kiwi_batch_parser p;
    kiwi_batch_parser_init (&p, KIWI_BATCH_TSV, NULL);
    const char *lines[] = { "url\tref\tcolour", NULL };
    run r;
    feed (&p, lines, &r);
    assert_true (strncmp (r.out[0], "fatal: header: unknown column `colour` (known: url, ref,", 56) == 0);
    kiwi_batch_parser_clear (&p);

    kiwi_batch_parser_init (&p, KIWI_BATCH_TSV, NULL);
    const char *twice[] = { "url\tref\ttest\ttest_command", NULL };
    feed (&p, twice, &r);
    assert_string_equal (r.out[0], "fatal: header: column `test_command` named twice");
    kiwi_batch_parser_clear (&p);
}

static void
test_jsonl (void **state)
{
    kiwi_task defaults;
    defaults_from_flags (&defaults, (const flag_default[]) { { KIWI_TF_GOAL, "default goal", "--goal" },
                                                             { KIWI_TF_TIMEOUT, "600", "--timeout" },
                                                             { 0, NULL, NULL } });
    kiwi_batch_parser p;
    kiwi_batch_parser_init (&p, KIWI_BATCH_AUTO, &defaults);
    const char *lines[] = {
        "{\"repo\":{\"url\":\"https://x/a.git\",\"ref\":\"main\"},\"test_command\":\"make\"}",
        "  {\"id\":\"t-2\",\"repo\":{\"url\":\"https://x/b.git\",\"ref\":\"main\"},\"test_command\":\"make\","
        "\"goal\":\"own goal\",\"limits\":{\"timeout_seconds\":60},\"ci_context\":\"tab\\there\\nnewline\"}",
        "# a comment",
        "{\"repo\":{\"url\":\"https://x/c.git\"},\"test_command\":\"make\"}",
        "not json",
        "{\"repo\":{\"url\":\"https://x/c.git\",\"ref\":\"main\"},\"test_command\":\"make\",\"colour\":\"red\"}",
        "[\"https://x/d.git\", \"main\"]",
        "{\"repo\":{\"url\":\"https://x/e.git\",\"ref\":\"main\"},\"test_command\":\"make\",\"limits\":{\"max_rounds\":"
        "\"3\"}}",
        "{\"repo\":{\"url\":\"https://x/f.git\",\"ref\":\"main\"},\"test_command\":\"make\"",
        NULL,
    };
    run r;
    feed (&p, lines, &r);
    assert_int_equal (p.format, KIWI_BATCH_JSONL);
    expect_outcomes (&r, (const char *const[]) {
                             "task", "task", "skip",
                             "reject: task.repo.ref: required field missing",
                             "reject: invalid JSON at column 3: '[' or '{' expected near 'not'",
                             "reject: task.colour: unknown field (known: v, id, repo,...",
                             "reject: task: expected object, got array",
                             "reject: task.limits.max_rounds: expected integer, got string",
                             "reject: invalid JSON at column 68: '}' expected near end of file",
                             NULL });
    assert_int_equal (r.n_tasks, 2);
    assert_string_equal (r.tasks[0].goal, "default goal");
    assert_int_equal (r.tasks[0].limits.timeout_seconds, 600);
    assert_string_equal (r.tasks[1].id, "t-2");
    assert_string_equal (r.tasks[1].goal, "own goal");
    assert_int_equal (r.tasks[1].limits.timeout_seconds, 60);
    assert_string_equal (r.tasks[1].ci_context, "tab\there\nnewline");
    batch_clear (&r, &p, &defaults);
}

static void
test_forced_format (void **state)
{
    kiwi_batch_format f;
    assert_int_equal (kiwi_batch_format_parse ("jsonl", &f), 0);
    assert_int_equal (f, KIWI_BATCH_JSONL);
    assert_int_equal (kiwi_batch_format_parse ("tsv", &f), 0);
    assert_int_equal (kiwi_batch_format_parse ("csv", &f), -1);

    /* forced JSON lines: a TSV line is invalid JSON */
    kiwi_batch_parser p;
    kiwi_batch_parser_init (&p, KIWI_BATCH_JSONL, NULL);
    const char *lines[] = { "https://x/a.git\tmain\tmake\tgoal", NULL };
    run r;
    feed (&p, lines, &r);
    assert_true (strncmp (r.out[0], "reject: invalid JSON at column ", 31) == 0);
    kiwi_batch_parser_clear (&p);

    /* forced TSV: a line starting with '{' is cells */
    kiwi_batch_parser_init (&p, KIWI_BATCH_TSV, NULL);
    const char *l2[] = { "{weird}\tmain\tmake\tgoal", NULL };
    feed (&p, l2, &r);
    assert_string_equal (r.out[0], "task");
    assert_string_equal (r.tasks[0].repo.url, "{weird}");
    run_clear (&r);
    kiwi_batch_parser_clear (&p);
}

static void
test_nul_byte (void **state)
{
    kiwi_batch_parser p;
    kiwi_batch_parser_init (&p, KIWI_BATCH_TSV, NULL);
    char line[] = "https://x/a.git\tmain\tma\0ke\tgoal";
    kiwi_task t;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_batch_line (&p, 1, line, sizeof line - 1, &t, &err), KIWI_BATCH_LINE_REJECT);
    assert_string_equal (kiwi_error_msg (err), "line contains a NUL byte");
    kiwi_error_free (&err);
    kiwi_batch_parser_clear (&p);
}

static void
test_many_ids (void **state)
{
    /* the duplicate-id table grows past its first size */
    kiwi_batch_parser p;
    kiwi_batch_parser_init (&p, KIWI_BATCH_TSV, NULL);
    char head[] = "url\tref\ttest\tgoal\tid";
    kiwi_task t;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_batch_line (&p, 1, head, strlen (head), &t, &err), KIWI_BATCH_LINE_SKIP);
    for (int i = 0; i < 5000; i++) {
        char line[128];
        int n = snprintf (line, sizeof line, "https://x/%d.git\tmain\tmake\tg\tid-%d", i, i);
        assert_int_equal (kiwi_batch_line (&p, (unsigned long) i + 2, line, (size_t) n, &t, &err),
                          KIWI_BATCH_LINE_TASK);
        kiwi_task_clear (&t);
    }
    char dup[] = "https://x/again.git\tmain\tmake\tg\tid-4321";
    assert_int_equal (kiwi_batch_line (&p, 9999, dup, strlen (dup), &t, &err), KIWI_BATCH_LINE_REJECT);
    assert_string_equal (kiwi_error_msg (err), "task.id: `id-4321` already used on line 4323");
    kiwi_error_free (&err);
    kiwi_batch_parser_clear (&p);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_tsv_without_header), cmocka_unit_test (test_tsv_with_header),
        cmocka_unit_test (test_bad_header_is_fatal), cmocka_unit_test (test_jsonl),
        cmocka_unit_test (test_forced_format),      cmocka_unit_test (test_nul_byte),
        cmocka_unit_test (test_many_ids),
    };
    return cmocka_run_group_tests_name ("cli_batch", tests, NULL, NULL);
}
