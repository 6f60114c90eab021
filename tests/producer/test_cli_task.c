/*
 * test_cli_task.c: tasks from JSON task files and from flag values: the
 * shape, type errors named by field, unknown keys refused, the overlay of
 * flags on a file, completion (id, submitted_at, source) and validation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "schemas/task-input.h"
#include "schemas/task.h"
#include "schemas/wire.h"

static const char full_json[]
    = "{\n"
      "  \"v\": 1,\n"
      "  \"id\": \"fix-widgets-42\",\n"
      "  \"repo\": {\"url\": \"https://git.example.test/acme/widgets.git\", \"ref\": \"main\", \"subdir\": \"api\"},\n"
      "  \"test_command\": \"npm test\",\n"
      "  \"goal\": \"Make the tests pass: \\u00fcn\\u00efc\\u00f6d\\u00e9\",\n"
      "  \"ci_context\": \"FAIL src/sum.test.js\\n\",\n"
      "  \"limits\": {\"max_rounds\": 5, \"session_budget_tokens\": 200000,\n"
      "             \"session_budget_usd_micros\": 2500000, \"timeout_seconds\": 900, \"disk_mb\": 4096},\n"
      "  \"model\": {\"provider\": \"anthropic\", \"name\": \"claude-sonnet-4-5\", \"base_url\": \"http://127.0.0.1:9/\"},\n"
      "  \"test_credentials\": [\"DATABASE_URL\", \"NPM_TOKEN\"],\n"
      "  \"submitted_at\": 1764450000123,\n"
      "  \"source\": \"my-bot\"\n"
      "}\n";

static void
test_full_file (void **state)
{
    kiwi_task t;
    kiwi_task_init (&t);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_task_input_parse (full_json, strlen (full_json), &t, &err), 0);
    assert_string_equal (t.id, "fix-widgets-42");
    assert_string_equal (t.repo.url, "https://git.example.test/acme/widgets.git");
    assert_string_equal (t.repo.ref, "main");
    assert_string_equal (t.repo.subdir, "api");
    assert_string_equal (t.test_command, "npm test");
    assert_string_equal (t.goal, "Make the tests pass: \xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9");
    assert_string_equal (t.ci_context, "FAIL src/sum.test.js\n");
    assert_int_equal (t.limits.max_rounds, 5);
    assert_true (t.limits.has_session_budget_tokens);
    assert_int_equal (t.limits.session_budget_tokens, 200000);
    assert_int_equal (t.limits.session_budget_usd_micros, 2500000);
    assert_int_equal (t.limits.timeout_seconds, 900);
    assert_int_equal (t.limits.disk_mb, 4096);
    assert_true (t.has_model);
    assert_int_equal (t.model.provider, KIWI_PROVIDER_ANTHROPIC);
    assert_string_equal (t.model.name, "claude-sonnet-4-5");
    assert_string_equal (t.model.base_url, "http://127.0.0.1:9/");
    assert_int_equal (t.n_test_credentials, 2);
    assert_string_equal (t.test_credentials[1], "NPM_TOKEN");
    assert_int_equal (t.submitted_at, 1764450000123LL);
    assert_string_equal (t.source, "my-bot");
    assert_int_equal (kiwi_task_input_finish (&t, "submit", &err), 0);
    assert_string_equal (t.source, "my-bot"); /* kept */
    assert_int_equal (t.submitted_at, 1764450000123LL);

    /* what `kiwi tail tasks` prints is a task file again */
    char *json = NULL;
    assert_int_equal (kiwi_task_to_json (&t, &json, &err), 0);
    kiwi_task back;
    kiwi_task_init (&back);
    assert_int_equal (kiwi_task_input_parse (json, strlen (json), &back, &err), 0);
    char *a = NULL, *b = NULL;
    size_t al = 0, bl = 0;
    assert_int_equal (kiwi_task_encode (&t, &a, &al, &err), 0);
    assert_int_equal (kiwi_task_encode (&back, &b, &bl, &err), 0);
    assert_int_equal (al, bl);
    assert_memory_equal (a, b, al);
    free (a);
    free (b);
    free (json);
    kiwi_task_clear (&back);
    kiwi_task_clear (&t);
}

/* Parses text on a fresh task; expects failure with exactly `want`. */
static void
parse_fails (const char *text, const char *want)
{
    kiwi_task t;
    kiwi_task_init (&t);
    kiwi_error_t err = NULL;
    if (kiwi_task_input_parse (text, strlen (text), &t, &err) == 0)
        fail_msg ("accepted: %s", text);
    if (strcmp (kiwi_error_msg (err), want) != 0)
        fail_msg ("for %s\n  got:  %s\n  want: %s", text, kiwi_error_msg (err), want);
    assert_int_equal (kiwi_error_code (err), KIWI_WIRE_EINVALID);
    kiwi_error_free (&err);
    kiwi_task_clear (&t);
}

static void
test_type_errors (void **state)
{
    parse_fails ("{\"limits\": {\"max_rounds\": \"5\"}}", "task.limits.max_rounds: expected integer, got string");
    parse_fails ("{\"limits\": {\"max_rounds\": 5.5}}",
                 "task.limits.max_rounds: expected integer, got number with a fraction");
    parse_fails ("{\"limits\": {\"disk_mb\": -1}}", "task.limits.disk_mb: must not be negative, got -1");
    parse_fails ("{\"repo\": \"https://x/y.git\"}", "task.repo: expected object, got string");
    parse_fails ("{\"id\": 7}", "task.id: expected string, got integer");
    parse_fails ("{\"goal\": null}", "task.goal: null is not a value; leave the field out instead");
    parse_fails ("{\"test_credentials\": [\"A\", 1]}", "task.test_credentials[1]: expected string, got integer");
    parse_fails ("{\"test_credentials\": \"A\"}", "task.test_credentials: expected array of strings, got string");
    parse_fails ("{\"model\": {\"provider\": \"acme\"}}",
                 "task.model.provider: unknown value \"acme\" (expected anthropic, openai, gemini, scripted)");
    parse_fails ("{\"v\": 2}", "task.v: version 2 is not supported (accepted: 1)");
    parse_fails ("{\"submitted_at\": \"now\"}", "task.submitted_at: expected integer, got string");
    parse_fails ("[1, 2]", "task: expected object, got array");
    parse_fails ("{\"goal\": \"a\\u0000b\"}",
                 "invalid JSON at column 19: \\u0000 is not allowed without JSON_ALLOW_NUL near '\"a\\u0000b\"'");
}

static void
test_unknown_keys_refused (void **state)
{
    parse_fails ("{\"tset_command\": \"make\"}",
                 "task.tset_command: unknown field (known: v, id, repo, test_command, goal, ci_context, limits, model, "
                 "test_credentials, submitted_at, source, batch_id)");
    parse_fails ("{\"limits\": {\"max_round\": 3}}",
                 "task.limits.max_round: unknown field (known: max_rounds, session_budget_tokens, "
                 "session_budget_usd_micros, timeout_seconds, disk_mb)");
    parse_fails ("{\"repo\": {\"branch\": \"main\"}}", "task.repo.branch: unknown field (known: url, ref, subdir)");
}

static void
test_invalid_json (void **state)
{
    parse_fails ("{\"goal\": \"x\",}", "invalid JSON at column 14: string or '}' expected near '}'");
    parse_fails ("{\n  \"goal\": \"x\"\n  \"test_command\": \"y\"\n}",
                 "invalid JSON at line 3 column 16: '}' expected near '\"test_command\"'");
    parse_fails ("{\"id\": \"a\", \"id\": \"b\"}", "invalid JSON at column 16: duplicate object key near '\"id\"'");
    parse_fails ("", "invalid JSON at column 0: '[' or '{' expected near end of file");
}

static void
test_validation_names_the_field (void **state)
{
    static const struct {
        const char *json, *want;
    } cases[] = {
        { "{\"repo\": {\"ref\": \"main\"}, \"test_command\": \"t\", \"goal\": \"g\"}",
          "task.repo.url: required field missing" },
        { "{\"repo\": {\"url\": \"u\"}, \"test_command\": \"t\", \"goal\": \"g\"}", "task.repo.ref: required field missing" },
        { "{\"repo\": {\"url\": \"u\", \"ref\": \"r\"}, \"goal\": \"g\"}", "task.test_command: required field missing" },
        { "{\"repo\": {\"url\": \"u\", \"ref\": \"r\"}, \"test_command\": \"t\", \"goal\": \"g\", \"limits\": "
          "{\"max_rounds\": 0}}",
          "task.limits.max_rounds: must be between 1 and 100, got 0" },
        { "{\"repo\": {\"url\": \"-u\", \"ref\": \"r\"}, \"test_command\": \"t\", \"goal\": \"g\"}", "task.repo.url:" },
        { "{\"repo\": {\"url\": \"u\", \"ref\": \"r\", \"subdir\": \"../x\"}, \"test_command\": \"t\", \"goal\": \"g\"}",
          "task.repo.subdir:" },
        { "{\"id\": \"no spaces\", \"repo\": {\"url\": \"u\", \"ref\": \"r\"}, \"test_command\": \"t\", \"goal\": \"g\"}",
          "task.id: invalid character 0x20 at byte 2" },
        { "{\"repo\": {\"url\": \"u\", \"ref\": \"r\"}, \"test_command\": \"t\", \"goal\": \"g\", \"model\": {\"name\": "
          "\"m\"}}",
          "task.model.provider: required field missing" },
        { "{\"repo\": {\"url\": \"u\", \"ref\": \"r\"}, \"test_command\": \"t\", \"goal\": \"g\", \"test_credentials\": "
          "[\"lower\"]}",
          "task.test_credentials[0]:" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiwi_task t;
        kiwi_task_init (&t);
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_task_input_parse (cases[i].json, strlen (cases[i].json), &t, &err), 0);
        assert_int_equal (kiwi_task_input_finish (&t, "submit", &err), -1);
        if (strncmp (kiwi_error_msg (err), cases[i].want, strlen (cases[i].want)) != 0)
            fail_msg ("case %zu: got %s, want %s...", i, kiwi_error_msg (err), cases[i].want);
        kiwi_error_free (&err);
        kiwi_task_clear (&t);
    }
}

static void
test_flags_overlay_file (void **state)
{
    kiwi_task t;
    kiwi_task_init (&t);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_task_input_parse (full_json, strlen (full_json), &t, &err), 0);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_REF, "release-2", "--ref", &err), 0);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_MAX_ROUNDS, "12", "--max-rounds", &err), 0);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_BUDGET_USD, "0.75", "--budget-usd", &err), 0);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_CRED, "EXTRA_TOKEN", "--cred", &err), 0);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_PROVIDER, "openai", "--provider", &err), 0);
    assert_string_equal (t.repo.ref, "release-2");
    assert_string_equal (t.repo.url, "https://git.example.test/acme/widgets.git"); /* from the file */
    assert_int_equal (t.limits.max_rounds, 12);
    assert_int_equal (t.limits.timeout_seconds, 900);
    assert_int_equal (t.limits.session_budget_usd_micros, 750000);
    assert_int_equal (t.n_test_credentials, 3);
    assert_string_equal (t.test_credentials[2], "EXTRA_TOKEN");
    assert_int_equal (t.model.provider, KIWI_PROVIDER_OPENAI);
    assert_string_equal (t.model.name, "claude-sonnet-4-5");
    kiwi_task_clear (&t);
}

static void
test_flag_values (void **state)
{
    kiwi_task t;
    kiwi_task_init (&t);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_MAX_ROUNDS, "ten", "--max-rounds", &err), -1);
    assert_string_equal (kiwi_error_msg (err), "--max-rounds: `ten` is not a whole number");
    kiwi_error_free (&err);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_TIMEOUT, "-3", "--timeout", &err), -1);
    assert_string_equal (kiwi_error_msg (err), "--timeout: `-3` is not a whole number");
    kiwi_error_free (&err);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_BUDGET_USD, "1.0000001", "--budget-usd", &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "is not an amount of US dollars"));
    kiwi_error_free (&err);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_PROVIDER, "acme", "--provider", &err), -1);
    assert_string_equal (kiwi_error_msg (err),
                         "--provider: unknown provider `acme` (accepted: anthropic, openai, gemini, scripted)");
    kiwi_error_free (&err);
    /* huge limits are clamped so validation names the range */
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_MAX_ROUNDS, "99999999999", "--max-rounds", &err), 0);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_REPO, "https://x/y.git", "--repo", &err), 0);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_REF, "main", "--ref", &err), 0);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_TEST, "make", "--test", &err), 0);
    assert_int_equal (kiwi_task_input_set (&t, KIWI_TF_GOAL, "pass", "--goal", &err), 0);
    assert_int_equal (kiwi_task_input_finish (&t, "submit", &err), -1);
    assert_string_equal (kiwi_error_msg (err), "task.limits.max_rounds: must be between 1 and 100, got 4294967295");
    kiwi_error_free (&err);
    kiwi_task_clear (&t);
}

static void
test_usd (void **state)
{
    static const struct {
        const char *s;
        int ok;
        uint64_t micros;
    } cases[] = {
        { "1", 1, 1000000 },       { "1.5", 1, 1500000 }, { "0.000001", 1, 1 }, { "12.345678", 1, 12345678 },
        { ".5", 1, 500000 },       { "3.", 1, 3000000 },  { "0", 1, 0 },        { "1.0000001", 0, 0 },
        { "", 0, 0 },              { ".", 0, 0 },         { "-1", 0, 0 },       { "1e3", 0, 0 },
        { "$5", 0, 0 },            { "1,5", 0, 0 },       { "18446744073709", 1, 18446744073709000000ULL },
        { "18446744073710", 0, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t m = 0;
        int r = kiwi_parse_usd_micros (cases[i].s, &m);
        if ((r == 0) != cases[i].ok)
            fail_msg ("%s: %s", cases[i].s, r == 0 ? "accepted" : "refused");
        if (r == 0 && m != cases[i].micros)
            fail_msg ("%s: got %llu", cases[i].s, (unsigned long long) m);
    }
}

static void
test_finish_fills_in (void **state)
{
    kiwi_task t;
    kiwi_task_init (&t);
    kiwi_error_t err = NULL;
    const char *json = "{\"repo\":{\"url\":\"https://x/y.git\",\"ref\":\"main\"},\"test_command\":\"t\",\"goal\":\"g\"}";
    assert_int_equal (kiwi_task_input_parse (json, strlen (json), &t, &err), 0);
    assert_int_equal (kiwi_task_input_finish (&t, "batch", &err), 0);
    regex_t re;
    assert_int_equal (regcomp (&re, "^kiwi-[0-9]{8}T[0-9]{6}\\.[0-9]{3}Z-[0-9a-f]{16}$", REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal (regexec (&re, t.id, 0, NULL, 0), 0);
    regfree (&re);
    assert_true (t.submitted_at > 1700000000000LL);
    assert_string_equal (t.source, "batch");
    kiwi_task_clear (&t);
}

static int
cmp_str (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

static void
test_ids_are_unique (void **state)
{
    enum { N = 20000 };
    char **ids = calloc (N, sizeof *ids);
    kiwi_error_t err = NULL;
    for (int i = 0; i < N; i++) {
        ids[i] = malloc (64);
        assert_int_equal (kiwi_task_id_new (ids[i], 64, &err), 0);
        assert_true (strlen (ids[i]) <= KIWI_TASK_ID_MAX);
    }
    qsort (ids, N, sizeof *ids, cmp_str);
    for (int i = 1; i < N; i++)
        if (strcmp (ids[i - 1], ids[i]) == 0)
            fail_msg ("duplicate id %s", ids[i]);
    for (int i = 0; i < N; i++)
        free (ids[i]);
    free (ids);
    char small[16];
    assert_int_equal (kiwi_task_id_new (small, sizeof small, &err), -1);
    kiwi_error_free (&err);
}

static void
test_copy (void **state)
{
    kiwi_task a, b;
    kiwi_task_init (&a);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_task_input_parse (full_json, strlen (full_json), &a, &err), 0);
    assert_int_equal (kiwi_task_copy (&b, &a, &err), 0);
    char *x = NULL, *y = NULL;
    size_t xl = 0, yl = 0;
    assert_int_equal (kiwi_task_encode (&a, &x, &xl, &err), 0);
    kiwi_task_clear (&a); /* the copy owns its own strings */
    assert_int_equal (kiwi_task_encode (&b, &y, &yl, &err), 0);
    assert_int_equal (xl, yl);
    assert_memory_equal (x, y, xl);
    free (x);
    free (y);
    kiwi_task_clear (&b);
}

static void
test_field_lookup (void **state)
{
    static const struct {
        const char *name;
        kiwi_task_field f;
    } cases[] = {
        { "url", KIWI_TF_REPO },           { "repo", KIWI_TF_REPO },
        { "repo.url", KIWI_TF_REPO },      { "ref", KIWI_TF_REF },
        { "test", KIWI_TF_TEST },          { "test_command", KIWI_TF_TEST },
        { "test-command", KIWI_TF_TEST },  { "Test_Command", KIWI_TF_TEST },
        { "max_rounds", KIWI_TF_MAX_ROUNDS }, { "max-rounds", KIWI_TF_MAX_ROUNDS },
        { "limits.max_rounds", KIWI_TF_MAX_ROUNDS }, { "budget_usd", KIWI_TF_BUDGET_USD },
        { "session_budget_usd_micros", KIWI_TF_UNSET }, { "model", KIWI_TF_MODEL },
        { "name", KIWI_TF_UNSET },         { "cred", KIWI_TF_CRED },
        { "test_credentials", KIWI_TF_CRED }, { "ci_context", KIWI_TF_CI_CONTEXT },
        { "timeout", KIWI_TF_TIMEOUT },    { "timeout_seconds", KIWI_TF_TIMEOUT },
        { "colour", KIWI_TF_UNSET },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (kiwi_task_field_lookup (cases[i].name) != cases[i].f)
            fail_msg ("%s: got %d, want %d", cases[i].name, kiwi_task_field_lookup (cases[i].name), cases[i].f);
}

static void
test_read_file (void **state)
{
    char path[] = "/tmp/kiwi-test-read-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    char buf[100000];
    memset (buf, 'x', sizeof buf);
    assert_int_equal (write (fd, buf, sizeof buf), (ssize_t) sizeof buf);
    close (fd);
    char *text = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_read_file (path, sizeof buf, &text, &len, &err), 0);
    assert_int_equal (len, sizeof buf);
    assert_int_equal (text[len], '\0');
    free (text);
    assert_int_equal (kiwi_read_file (path, sizeof buf - 1, &text, &len, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "larger than 99999 bytes"));
    kiwi_error_free (&err);
    unlink (path);
    assert_int_equal (kiwi_read_file (path, 10, &text, &len, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "cannot open"));
    kiwi_error_free (&err);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_full_file),
        cmocka_unit_test (test_type_errors),
        cmocka_unit_test (test_unknown_keys_refused),
        cmocka_unit_test (test_invalid_json),
        cmocka_unit_test (test_validation_names_the_field),
        cmocka_unit_test (test_flags_overlay_file),
        cmocka_unit_test (test_flag_values),
        cmocka_unit_test (test_usd),
        cmocka_unit_test (test_finish_fills_in),
        cmocka_unit_test (test_ids_are_unique),
        cmocka_unit_test (test_copy),
        cmocka_unit_test (test_field_lookup),
        cmocka_unit_test (test_read_file),
    };
    return cmocka_run_group_tests_name ("cli_task", tests, NULL, NULL);
}
