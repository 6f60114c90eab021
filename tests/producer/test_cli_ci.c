/*
 * test_cli_ci.c: GitHub CI events to tasks (workflow_run and check_run
 * failures from tests/fixtures/ci/, everything else ignored with a reason,
 * malformed events refused) and X-Hub-Signature-256 verification with
 * GitHub's documented test vector.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "producer/ci.h"
#include "producer/cli-settings.h"
#include "schemas/task-input.h"
#include "schemas/wire.h"

#define FIXTURES KIWI_SOURCE_DIR "/tests/fixtures/ci/"
#define SHA "9fceb02d0ae598e95dc970b74767f19372d61af8"

/* Not inlined: GCC 12 at -O3 takes a pointer into the returned text for
 * one to the local that received it (-Wdangling-pointer). */
static __attribute__ ((noinline)) char *
fixture (const char *name, size_t *len)
{
    char *text = NULL;
    kiwi_error_t err = NULL;
    char path[512];
    snprintf (path, sizeof path, "%s%s", FIXTURES, name);
    if (kiwi_read_file (path, 1 << 20, &text, len, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    return text;
}

static const kiwi_ci_options plain = { .test_command = "npm test", .goal_template = KIWI_CI_GOAL_DEFAULT };

static void
test_workflow_run_failure (void **state)
{
    size_t len;
    char *body = fixture ("workflow_run.completed.failure.json", &len);
    kiwi_task t;
    char *why = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_ci_event_to_task ("workflow_run", body, len, &plain, &t, &why, &err), KIWI_CI_TASK);
    assert_null (why);
    assert_string_equal (t.id, "gh-run-7065301437-2-3562f6b24dc8a23b");
    assert_string_equal (t.repo.url, "https://github.com/acme/widgets.git");
    assert_string_equal (t.repo.ref, SHA);
    assert_null (t.repo.subdir);
    assert_string_equal (t.test_command, "npm test");
    assert_string_equal (t.goal, "CI run CI failed on " SHA ": make it pass");
    assert_string_equal (t.source, "ci-event");
    assert_string_equal (t.ci_context, "GitHub Actions workflow run failed.\n"
                                       "workflow: CI\n"
                                       "workflow file: .github/workflows/ci.yml\n"
                                       "run: https://github.com/acme/widgets/actions/runs/7065301437\n"
                                       "attempt: 2\n"
                                       "event: push\n"
                                       "repository: acme/widgets\n"
                                       "branch: feature/faster-sum\n"
                                       "commit: " SHA "\n"
                                       "commit message: Make sum faster\n\nUse a single pass.\n"
                                       "logs: https://api.github.com/repos/acme/widgets/actions/runs/7065301437/logs\n");
    assert_int_equal (kiwi_task_validate (&t, &err), 0);
    kiwi_task_clear (&t);

    /* the event is recognised without its name, too */
    assert_int_equal (kiwi_ci_event_to_task (NULL, body, len, &plain, &t, &why, &err), KIWI_CI_TASK);
    assert_string_equal (t.id, "gh-run-7065301437-2-3562f6b24dc8a23b");
    kiwi_task_clear (&t);
    free (body);
}

static void
test_check_run_failure (void **state)
{
    size_t len;
    char *body = fixture ("check_run.completed.failure.json", &len);
    kiwi_task base;
    kiwi_task_init (&base);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_task_input_set (&base, KIWI_TF_MAX_ROUNDS, "3", "--max-rounds", &err), 0);
    assert_int_equal (kiwi_task_input_set (&base, KIWI_TF_CRED, "NPM_TOKEN", "--cred", &err), 0);
    kiwi_ci_options o = { .test_command = "npm ci && npm test",
                          .goal_template = "{name} failed on {branch} ({repo}, {event}): see {url}",
                          .base = &base };
    kiwi_task t;
    char *why = NULL;
    assert_int_equal (kiwi_ci_event_to_task ("check_run", body, len, &o, &t, &why, &err), KIWI_CI_TASK);
    assert_string_equal (t.id, "gh-check-19398730211-49cb0229348f4d1f");
    assert_string_equal (t.repo.url, "https://github.com/acme/widgets.git");
    assert_string_equal (t.repo.ref, SHA);
    assert_string_equal (t.test_command, "npm ci && npm test");
    assert_string_equal (t.goal, "test (20.x) failed on feature/faster-sum (acme/widgets, check_run): see "
                                 "https://github.com/acme/widgets/actions/runs/7065301437/job/19398730211");
    assert_int_equal (t.limits.max_rounds, 3);
    assert_int_equal (t.n_test_credentials, 1);
    /* title, summary and text are the context */
    assert_non_null (strstr (t.ci_context, "check: test (20.x)\n"));
    assert_non_null (strstr (t.ci_context, "\n1 failing test\n"));
    assert_non_null (strstr (t.ci_context, "\nJest reported 1 failing test in src/sum.test.ts\n"));
    assert_non_null (strstr (t.ci_context, "> 4 |   expect(sum(1, 2)).toBe(3);"));
    assert_non_null (strstr (t.ci_context, "Tests:       1 failed, 52 passed, 53 total"));
    assert_true (strncmp (t.ci_context, "GitHub check run failed.\n", 25) == 0);
    kiwi_task_clear (&t);
    kiwi_task_clear (&base);
    free (body);
}

static void
test_flags_win (void **state)
{
    size_t len;
    char *body = fixture ("check_run.completed.failure.json", &len);
    kiwi_task base;
    kiwi_task_init (&base);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_task_input_set (&base, KIWI_TF_ID, "my-own-id", "--id", &err), 0);
    assert_int_equal (kiwi_task_input_set (&base, KIWI_TF_TEST, "make ci", "--test", &err), 0);
    assert_int_equal (kiwi_task_input_set (&base, KIWI_TF_GOAL, "just fix it", "--goal", &err), 0);
    kiwi_ci_options o = { .test_command = "ignored: the flag wins", .goal_template = KIWI_CI_GOAL_DEFAULT, .base = &base };
    kiwi_task t;
    char *why = NULL;
    assert_int_equal (kiwi_ci_event_to_task ("check_run", body, len, &o, &t, &why, &err), KIWI_CI_TASK);
    assert_string_equal (t.id, "my-own-id");
    assert_string_equal (t.test_command, "make ci");
    assert_string_equal (t.goal, "just fix it");
    kiwi_task_clear (&t);
    kiwi_task_clear (&base);
    free (body);
}

static void
ignored (const char *file, const char *event, const char *want)
{
    size_t len;
    char *body = fixture (file, &len);
    kiwi_task t;
    char *why = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_ci_event_to_task (event, body, len, &plain, &t, &why, &err), KIWI_CI_IGNORED);
    assert_non_null (why);
    if (strcmp (why, want) != 0)
        fail_msg ("%s: got %s", file, why);
    free (why);
    free (body);
}

static void
test_ignored_events (void **state)
{
    ignored ("workflow_run.completed.success.json", "workflow_run",
             "workflow_run completed with conclusion `success`: only failures are turned into tasks");
    ignored ("workflow_run.requested.json", "workflow_run",
             "workflow_run event with action `requested`: only completed runs are turned into tasks");
    ignored ("check_run.created.json", "check_run",
             "check_run event with action `created`: only completed check runs are turned into tasks");
    ignored ("ping.json", "ping", "`ping` event: only workflow_run and check_run failures are turned into tasks");
    ignored ("ping.json", NULL, "`ping` event: only workflow_run and check_run failures are turned into tasks");
    ignored ("workflow_run.completed.failure.json", "push",
             "`push` event: only workflow_run and check_run failures are turned into tasks");
    /* the header names the event: a workflow_run payload sent as check_run has no check_run */
    ignored ("workflow_run.completed.failure.json", "check_run",
             "check_run completed with conclusion `(none)`: only failures are turned into tasks");
}

/* Applies `edit` (a JSON object merged into the payload at `path`, or a
 * deletion when value is NULL) and expects an error with `want`. */
static void
malformed (const char *file, const char *parent, const char *key, json_t *value, const char *want)
{
    size_t len;
    char *body = fixture (file, &len);
    json_t *root = json_loads (body, 0, NULL);
    json_t *obj = parent ? json_object_get (root, parent) : root;
    if (value == NULL)
        json_object_del (obj, key);
    else
        json_object_set_new (obj, key, value);
    char *edited = json_dumps (root, 0);
    json_decref (root);
    kiwi_task t;
    char *why = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_ci_event_to_task (NULL, edited, strlen (edited), &plain, &t, &why, &err), KIWI_CI_ERROR);
    if (strcmp (kiwi_error_msg (err), want) != 0)
        fail_msg ("got %s, want %s", kiwi_error_msg (err), want);
    assert_int_equal (kiwi_error_code (err), KIWI_WIRE_EINVALID);
    kiwi_error_free (&err);
    free (edited);
    free (body);
}

static void
test_malformed_events (void **state)
{
    malformed ("workflow_run.completed.failure.json", "repository", "clone_url", NULL,
               "workflow_run event: repository.clone_url: required field missing");
    malformed ("workflow_run.completed.failure.json", "workflow_run", "head_sha", json_integer (7),
               "workflow_run event: workflow_run.head_sha: expected a non-empty string");
    malformed ("workflow_run.completed.failure.json", "workflow_run", "id", NULL,
               "workflow_run event: workflow_run.id: required field missing");
    malformed ("check_run.completed.failure.json", "check_run", "head_sha", json_string (""),
               "check_run event: check_run.head_sha: expected a non-empty string");
    malformed ("check_run.completed.failure.json", NULL, "repository", NULL,
               "check_run event: repository.clone_url: required field missing");
    malformed ("check_run.completed.failure.json", "repository", "clone_url", json_string ("--upload-pack=evil"),
               "task.repo.url: must not start with '-'");

    kiwi_task t;
    char *why = NULL;
    kiwi_error_t err = NULL;
    static const char *bad[] = { "", "{", "{\"action\": \"completed\",}", "[1,2,3]", "\"workflow_run\"", "null" };
    static const char *want[] = {
        "malformed JSON at line 1 column 0: '[' or '{' expected near end of file",
        "malformed JSON at line 1 column 1: string or '}' expected near end of file",
        "malformed JSON at line 1 column 24: string or '}' expected near '}'",
        "malformed event: expected a JSON object",
        "malformed JSON at line 1 column 14: '[' or '{' expected near '\"workflow_run\"'",
        "malformed JSON at line 1 column 4: '[' or '{' expected near 'null'",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal (kiwi_ci_event_to_task ("workflow_run", bad[i], strlen (bad[i]), &plain, &t, &why, &err),
                          KIWI_CI_ERROR);
        if (strcmp (kiwi_error_msg (err), want[i]) != 0)
            fail_msg ("%s: got %s", bad[i], kiwi_error_msg (err));
        kiwi_error_free (&err);
    }
}

static void
test_long_check_output_keeps_the_tail (void **state)
{
    size_t len;
    char *body = fixture ("check_run.completed.failure.json", &len);
    json_t *root = json_loads (body, 0, NULL);
    json_t *out = json_object_get (json_object_get (root, "check_run"), "output");
    size_t n = 300000;
    char *big = malloc (n + 64);
    for (size_t i = 0; i < n; i++)
        big[i] = (i % 80 == 79) ? '\n' : 'a' + (char) (i % 26);
    strcpy (big + n, "\nTHE LAST LINE\n");
    json_object_set_new (out, "text", json_string (big));
    free (big);
    char *edited = json_dumps (root, 0);
    json_decref (root);
    kiwi_task t;
    char *why = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_ci_event_to_task ("check_run", edited, strlen (edited), &plain, &t, &why, &err),
                      KIWI_CI_TASK);
    assert_true (strlen (t.ci_context) <= 262144);
    assert_true (strncmp (t.ci_context, "[... earlier output cut ...]\n", 29) == 0);
    assert_non_null (strstr (t.ci_context, "THE LAST LINE\n"));
    kiwi_task_clear (&t);
    free (edited);
    free (body);
}

/* GitHub's documented example ("Validating webhook deliveries"). */
static const char gh_secret[] = "It's a Secret to Everybody";
static const char gh_payload[] = "Hello, World!";
static const char gh_signature[] = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

static void
test_signature_vector (void **state)
{
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_ci_verify_signature (gh_secret, strlen (gh_secret), gh_payload, strlen (gh_payload),
                                                gh_signature, &err),
                      0);
    char sig[80];
    assert_int_equal (kiwi_ci_sign (gh_secret, strlen (gh_secret), gh_payload, strlen (gh_payload), sig, sizeof sig),
                      0);
    assert_string_equal (sig, gh_signature);
    /* hex digits in upper case are the same digest */
    char upper[80];
    strcpy (upper, gh_signature);
    for (char *p = upper + 7; *p; p++)
        if (*p >= 'a' && *p <= 'f')
            *p = (char) (*p - 'a' + 'A');
    assert_int_equal (
        kiwi_ci_verify_signature (gh_secret, strlen (gh_secret), gh_payload, strlen (gh_payload), upper, &err), 0);
}

static void
sig_fails (const char *secret, const char *body, const char *header, const char *want)
{
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_ci_verify_signature (secret, strlen (secret), body, strlen (body), header, &err), -1);
    assert_string_equal (kiwi_error_msg (err), want);
    kiwi_error_free (&err);
}

static void
test_signature_refusals (void **state)
{
    sig_fails (gh_secret, "Hello, World?", gh_signature, "X-Hub-Signature-256 does not match the body");
    sig_fails ("It's a secret to everybody", gh_payload, gh_signature, "X-Hub-Signature-256 does not match the body");
    sig_fails (gh_secret, gh_payload, NULL, "missing X-Hub-Signature-256 header");
    sig_fails (gh_secret, gh_payload, "", "missing X-Hub-Signature-256 header");
    const char *malformed_msg = "malformed X-Hub-Signature-256 header (expected sha256=<64 hex digits>)";
    sig_fails (gh_secret, gh_payload, "sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
               malformed_msg);
    sig_fails (gh_secret, gh_payload, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1",
               malformed_msg);
    sig_fails (gh_secret, gh_payload, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e177",
               malformed_msg);
    sig_fails (gh_secret, gh_payload, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1g",
               malformed_msg);
    sig_fails (gh_secret, gh_payload, "sha256=", malformed_msg);
    sig_fails (gh_secret, gh_payload, "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", malformed_msg);
    /* one flipped bit in the digest */
    sig_fails (gh_secret, gh_payload, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e16",
               "X-Hub-Signature-256 does not match the body");
}

/* The ring of deliveries already produced: found by delivery id or by task
 * id, the oldest forgotten when full. */
static void
test_seen_ring (void **state)
{
    kiwi_ci_seen s;
    assert_int_equal (kiwi_ci_seen_init (&s, 3), 0);
    assert_null (kiwi_ci_seen_find (&s, "d1", "gh-run-1-1"));
    kiwi_ci_seen_add (&s, "d1", "gh-run-1-1");
    kiwi_ci_seen_add (&s, NULL, "gh-check-2");
    kiwi_ci_seen_add (&s, "d3", "gh-run-3-1");
    assert_string_equal (kiwi_ci_seen_find (&s, "d1", NULL), "gh-run-1-1");
    assert_string_equal (kiwi_ci_seen_find (&s, "other", "gh-check-2"), "gh-check-2"); /* redelivered, new id */
    assert_string_equal (kiwi_ci_seen_find (&s, NULL, "gh-run-3-1"), "gh-run-3-1");
    assert_null (kiwi_ci_seen_find (&s, NULL, NULL));
    assert_null (kiwi_ci_seen_find (&s, "d2", "gh-run-1-2")); /* a re-run attempt is a new task */
    /* full: the oldest (d1) goes */
    kiwi_ci_seen_add (&s, "d4", "gh-run-4-1");
    assert_null (kiwi_ci_seen_find (&s, "d1", "gh-run-1-1"));
    assert_string_equal (kiwi_ci_seen_find (&s, "d4", NULL), "gh-run-4-1");
    assert_string_equal (kiwi_ci_seen_find (&s, NULL, "gh-check-2"), "gh-check-2");
    for (int i = 0; i < 100; i++) {
        char d[32], id[32];
        snprintf (d, sizeof d, "x%d", i);
        snprintf (id, sizeof id, "gh-run-%d-1", 100 + i);
        kiwi_ci_seen_add (&s, d, id);
    }
    assert_int_equal (s.n, 3);
    assert_null (kiwi_ci_seen_find (&s, "d4", NULL));
    assert_string_equal (kiwi_ci_seen_find (&s, "x99", NULL), "gh-run-199-1");
    assert_string_equal (kiwi_ci_seen_find (&s, "x97", NULL), "gh-run-197-1");
    assert_null (kiwi_ci_seen_find (&s, "x96", NULL));
    kiwi_ci_seen_clear (&s);
}

/* The id's tag: the first 64 bits of HMAC-SHA256(secret, M) (of SHA-256(M)
 * without a secret), M = "kiwi-ci-task-id", the base id, the clone URL and
 * the commit, each ended by a NUL; the vectors were computed apart with
 * Python's hmac and hashlib. */
static void
test_task_id_derivation (void **state)
{
    static const char secret[] = "It's a Secret to Everybody";
    static const char url[] = "https://github.com/acme/widgets.git";
    char a[160], b[160];
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_ci_task_id (secret, strlen (secret), "gh-run-7065301437-2", url, SHA, a, sizeof a, &err), 0);
    assert_string_equal (a, "gh-run-7065301437-2-8147e440f255e40a");
    assert_int_equal (kiwi_ci_task_id (NULL, 0, "gh-run-7065301437-2", url, SHA, b, sizeof b, &err), 0);
    assert_string_equal (b, "gh-run-7065301437-2-3562f6b24dc8a23b");
    /* the same event again: the same id */
    assert_int_equal (kiwi_ci_task_id (secret, strlen (secret), "gh-run-7065301437-2", url, SHA, b, sizeof b, &err), 0);
    assert_string_equal (a, b);
    /* another repository, commit, run, attempt or secret: another id */
    assert_int_equal (kiwi_ci_task_id (secret, strlen (secret), "gh-run-7065301437-2",
                                       "https://github.com/mallory/widgets.git", SHA, b, sizeof b, &err),
                      0);
    assert_string_not_equal (a, b);
    assert_int_equal (kiwi_ci_task_id (secret, strlen (secret), "gh-run-7065301437-2", url,
                                       "0000000000000000000000000000000000000000", b, sizeof b, &err),
                      0);
    assert_string_not_equal (a, b);
    assert_int_equal (kiwi_ci_task_id (secret, strlen (secret), "gh-run-7065301437-3", url, SHA, b, sizeof b, &err), 0);
    assert_true (strncmp (b, "gh-run-7065301437-3-", 20) == 0);
    assert_string_not_equal (a + 20, b + 20);
    assert_int_equal (kiwi_ci_task_id ("another secret", 14, "gh-run-7065301437-2", url, SHA, b, sizeof b, &err), 0);
    assert_string_not_equal (a, b);
    /* the parts cannot slide into one another */
    assert_int_equal (kiwi_ci_task_id (secret, strlen (secret), "gh-run-7065301437-2", url, SHA, a, sizeof a, &err), 0);
    assert_int_equal (kiwi_ci_task_id (secret, strlen (secret), "gh-run-7065301437-2",
                                       "https://github.com/acme/widgets.git" SHA, "", b, sizeof b, &err),
                      0);
    assert_string_not_equal (a, b);
    /* no room: an error, not a cut id */
    assert_true (kiwi_ci_task_id (secret, strlen (secret), "gh-run-7065301437-2", url, SHA, b, 30, &err) < 0);
    assert_non_null (strstr (kiwi_error_msg (err), "too long"));
    kiwi_error_free (&err);

    /* through the event: with the secret, the keyed id; an event naming
     * another repository under the same run gets another id */
    size_t len;
    char *body = fixture ("workflow_run.completed.failure.json", &len);
    kiwi_ci_options o = { "npm test", KIWI_CI_GOAL_DEFAULT, NULL, secret, strlen (secret) };
    kiwi_task t;
    char *why = NULL;
    assert_int_equal (kiwi_ci_event_to_task ("workflow_run", body, len, &o, &t, &why, &err), KIWI_CI_TASK);
    assert_string_equal (t.id, "gh-run-7065301437-2-8147e440f255e40a");
    kiwi_task_clear (&t);
    const char *at = strstr (body, "https://github.com/acme/widgets.git");
    assert_non_null (at);
    size_t off = (size_t) (at - body) + strlen ("https://github.com/");
    memcpy (body + off, "evil", 4); /* acme -> evil */
    assert_int_equal (kiwi_ci_event_to_task ("workflow_run", body, len, &o, &t, &why, &err), KIWI_CI_TASK);
    assert_string_equal (t.repo.url, "https://github.com/evil/widgets.git");
    assert_true (strncmp (t.id, "gh-run-7065301437-2-", 20) == 0);
    assert_string_not_equal (t.id, "gh-run-7065301437-2-8147e440f255e40a");
    kiwi_task_clear (&t);
    free (body);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_workflow_run_failure),
        cmocka_unit_test (test_check_run_failure),
        cmocka_unit_test (test_flags_win),
        cmocka_unit_test (test_ignored_events),
        cmocka_unit_test (test_malformed_events),
        cmocka_unit_test (test_long_check_output_keeps_the_tail),
        cmocka_unit_test (test_signature_vector),
        cmocka_unit_test (test_signature_refusals),
        cmocka_unit_test (test_seen_ring),
        cmocka_unit_test (test_task_id_derivation),
    };
    return cmocka_run_group_tests_name ("cli_ci", tests, NULL, NULL);
}
