/*
 * test_classify.c: the step-0 classifier's table (inspect/classify.tsv) on
 * output captured from the real tools in Kiwi's images
 * (tests/fixtures/captured/, made by capture.sh there). Every captured file
 * has an expectation (expect.tsv: class, rule, extracted fields; "none" for
 * honest failures such as assertions, type and lint errors, and the same
 * network errors merely logged by a passing test), every rule is reached by
 * some captured output, reserved names (.invalid, .test, .localhost,
 * localhost) are never blamed, context conditions decide by the nearest
 * boundary line, the work per output is bounded, and the table's parser
 * names its errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/classify.h"
#include "inspect/inspect-internal.h"

#define CAPTURED KIWI_SOURCE_DIR "/tests/fixtures/captured"

static kiwi_classifier *table;

static int
setup (void **state)
{
    kiwi_error_t err = NULL;
    if (kiwi_classifier_builtin (&table, &err) < 0) {
        fprintf (stderr, "%s\n", kiwi_error_msg (err));
        return -1;
    }
    return 0;
}

static int
teardown (void **state)
{
    kiwi_classifier_free (table);
    return 0;
}

static char *
read_captured (const char *name)
{
    char path[1024];
    snprintf (path, sizeof path, CAPTURED "/%s", name);
    char *text = NULL;
    kiwi_error_t err = NULL;
    if (kiwi__read_file (path, 8 << 20, &text, NULL, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    return text;
}

/* "host=a what=b" -> the classification's fields, all others empty. */
static void
expected_fields (const char *spec, kiwi_classification *want)
{
    char buf[1024];
    snprintf (buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *kv = strtok_r (buf, " ", &save); kv; kv = strtok_r (NULL, " ", &save)) {
        char *eq = strchr (kv, '=');
        assert_non_null (eq);
        *eq = '\0';
        const char *v = eq + 1;
        if (strcmp (kv, "host") == 0)
            snprintf (want->host, sizeof want->host, "%s", v);
        else if (strcmp (kv, "command") == 0)
            snprintf (want->command, sizeof want->command, "%s", v);
        else if (strcmp (kv, "runtime") == 0)
            snprintf (want->runtime, sizeof want->runtime, "%s", v);
        else if (strcmp (kv, "version") == 0)
            snprintf (want->version, sizeof want->version, "%s", v);
        else if (strcmp (kv, "what") == 0)
            snprintf (want->what, sizeof want->what, "%s", v);
        else if (strcmp (kv, "port") == 0)
            snprintf (want->port, sizeof want->port, "%s", v);
        else
            fail_msg ("expect.tsv: unknown field %s", kv);
    }
}

typedef struct {
    char file[128];
    char cls[32];
    char rule[64];
    char fields[512];
} expectation;

static size_t
load_expectations (expectation **out)
{
    char *text = read_captured ("expect.tsv");
    size_t n = 0, cap = 0;
    expectation *v = NULL;
    char *save = NULL;
    for (char *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save)) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            v = realloc (v, cap * sizeof *v);
            assert_non_null (v);
        }
        expectation *e = &v[n++];
        memset (e, 0, sizeof *e);
        char *f[4] = { 0 };
        char *p = line;
        for (int i = 0; i < 4 && p; i++) {
            f[i] = p;
            char *tab = strchr (p, '\t');
            if (tab)
                *tab = '\0';
            p = tab ? tab + 1 : NULL;
        }
        assert_non_null (f[2]);
        snprintf (e->file, sizeof e->file, "%s", f[0]);
        snprintf (e->cls, sizeof e->cls, "%s", f[1]);
        snprintf (e->rule, sizeof e->rule, "%s", f[2]);
        snprintf (e->fields, sizeof e->fields, "%s", f[3] ? f[3] : "");
    }
    free (text);
    *out = v;
    return n;
}

static void
test_captured_outputs (void **state)
{
    expectation *ex = NULL;
    size_t n = load_expectations (&ex);
    assert_true (n >= 40);
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        char *out = read_captured (ex[i].file);
        kiwi_classification got, want;
        memset (&want, 0, sizeof want);
        kiwi_classify (table, out, &got);
        expected_fields (ex[i].fields, &want);
        bool ok = strcmp (kiwi_failure_class_str (got.cls), ex[i].cls) == 0
                  && strcmp (got.rule[0] ? got.rule : "-", ex[i].rule) == 0 && strcmp (got.host, want.host) == 0
                  && strcmp (got.command, want.command) == 0 && strcmp (got.runtime, want.runtime) == 0
                  && strcmp (got.version, want.version) == 0 && strcmp (got.what, want.what) == 0
                  && strcmp (got.port, want.port) == 0;
        if (!ok) {
            failures++;
            fprintf (stderr,
                     "MISMATCH %s: got %s %s host=%s command=%s runtime=%s version=%s what=%s port=%s (evidence: %s); "
                     "want %s %s %s\n",
                     ex[i].file, kiwi_failure_class_str (got.cls), got.rule, got.host, got.command, got.runtime,
                     got.version, got.what, got.port, got.evidence, ex[i].cls, ex[i].rule, ex[i].fields);
        } else
            printf ("ok   %-32s %-16s %-24s %s\n", ex[i].file, ex[i].cls, ex[i].rule, ex[i].fields);
        free (out);
    }
    free (ex);
    assert_int_equal (failures, 0);
}

/* Nothing captured goes unchecked. */
static void
test_every_capture_has_an_expectation (void **state)
{
    expectation *ex = NULL;
    size_t n = load_expectations (&ex);
    DIR *d = opendir (CAPTURED);
    assert_non_null (d);
    struct dirent *e;
    int missing = 0;
    while ((e = readdir (d)) != NULL) {
        size_t l = strlen (e->d_name);
        if (l < 5 || strcmp (e->d_name + l - 4, ".txt") != 0)
            continue;
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = strcmp (ex[i].file, e->d_name) == 0;
        if (!found) {
            fprintf (stderr, "no expectation for captured %s\n", e->d_name);
            missing++;
        }
    }
    closedir (d);
    free (ex);
    assert_int_equal (missing, 0);
}

/* Every rule's pattern matches some real output (on its own, even where an
 * earlier rule wins for that output): no rule is written from imagination. */
static void
test_every_rule_has_evidence (void **state)
{
    expectation *ex = NULL;
    size_t n = load_expectations (&ex);
    char **outs = calloc (n, sizeof *outs);
    for (size_t i = 0; i < n; i++)
        outs[i] = read_captured (ex[i].file);
    /* a one-rule classifier per rule, from the table's own text */
    char *tsv = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi__read_file (KIWI_SOURCE_DIR "/inspect/classify.tsv", 1 << 20, &tsv, NULL, &err), 0);
    int orphans = 0;
    size_t rules = 0;
    char *save = NULL;
    for (char *line = strtok_r (tsv, "\n", &save); line; line = strtok_r (NULL, "\n", &save)) {
        if (line[0] == '#')
            continue;
        kiwi_classifier *one = NULL;
        assert_int_equal (kiwi_classifier_parse (line, strlen (line), "rule", &one, &err), 0);
        rules++;
        bool hit = false;
        for (size_t i = 0; i < n && !hit; i++) {
            kiwi_classification c;
            hit = kiwi_classify (one, outs[i], &c) != KIWI_FAILURE_NONE;
        }
        if (!hit) {
            fprintf (stderr, "rule %s matches no captured output\n", kiwi_classifier_rule_name (one, 0));
            orphans++;
        }
        kiwi_classifier_free (one);
    }
    assert_int_equal (rules, kiwi_classifier_size (table));
    for (size_t i = 0; i < n; i++)
        free (outs[i]);
    free (outs);
    free (ex);
    free (tsv);
    assert_int_equal (orphans, 0);
}

/* Honest failures stay honest even when they talk about networks. */
static void
test_narrow_by_construction (void **state)
{
    static const char *const honest[] = {
        "AssertionError: expected 'getaddrinfo ENOTFOUND api.example.com' to equal 'ok'\n",
        "    - 'request to https://registry.npmjs.org/x failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org'\n",
        "TypeError: fetch failed\n    at async Test.run\n",
        "Error: connect ECONNREFUSED 127.0.0.1:5432\n",
        "src/a.ts(3,9): error TS2322: Type 'string' is not assignable to type 'number'.\n",
        "./app.go:4:2: result declared but not used\n",
        "E   ModuleNotFoundError: No module named 'requests'\n",
        "error[E0308]: mismatched types\n",
        "FAILED test_x.py::test_y - assert 'Could not resolve host' in ''\n",
        /* logged, not failed with: node --test's comment lines, Jest's console block, pytest's captured log,
         * printStackTrace next to a print, t.Log in a passing Go test, a traceback no unittest ERROR: holds */
        "# Error: getaddrinfo EAI_AGAIN api.example.com\n",
        "  console.error\n    Error: getaddrinfo ENOTFOUND api.example.com\n",
        "  console.log\n    getaddrinfo EAI_AGAIN api.example.com\n",
        "WARNING  root:x.py:3 Failed to resolve 'api.example.com' ([Errno -3] Temporary failure in name resolution)\n",
        "offline: java.net.UnknownHostException: a.example.com\njava.net.UnknownHostException: a.example.com\n",
        "=== RUN   TestX\n    x_test.go:3: dial tcp: lookup a.example.com on 10.0.0.53:53: no such host\n"
        "--- PASS: TestX (0.00s)\n",
        "socket.gaierror: [Errno -3] Temporary failure in name resolution\n",
        "Error: getaddrinfo EAI_AGAIN api.example.com\n",
        /* node's printed error with its stack, then the script's own verdict */
        "Error: getaddrinfo EAI_AGAIN api.example.com\n    at GetAddrInfoReqWrap.onlookupall [as oncomplete] "
        "(node:dns:122:26) {\n  errno: -3001\n}\nFAIL: the bundle is too large\n",
        /* a YAML error field that is not followed by its code: a value inside an assertion's actual */
        "  actual:\n  error: 'getaddrinfo EAI_AGAIN api.example.com'\n  stack: |-\n",
        /* a name no network resolves */
        "curl: (6) Could not resolve host: mirror.invalid\n",
        "curl: (6) Could not resolve host: db.test\n",
        "curl: (6) Could not resolve host: LOCALHOST.\n",
        "curl: (6) Could not resolve host: api.localhost\n",
        "",
    };
    for (size_t i = 0; i < sizeof honest / sizeof honest[0]; i++) {
        kiwi_classification c;
        assert_int_equal (kiwi_classify (table, honest[i], &c), KIWI_FAILURE_NONE);
        assert_string_equal (c.rule, "");
    }
    kiwi_classification c;
    assert_int_equal (kiwi_classify (table, NULL, &c), KIWI_FAILURE_NONE);
}

static void expect_parse_error (const char *text, const char *needle);

/* A reserved name does not count, and the search goes on at the next line;
 * names that merely contain a reserved word are not reserved. */
static void
test_reserved_names (void **state)
{
    kiwi_classification c;
    assert_int_equal (kiwi_classify (table,
                                     "curl: (6) Could not resolve host: nothing.invalid\n"
                                     "curl: (6) Could not resolve host: cdn.example.org\n",
                                     &c),
                      KIWI_FAILURE_NEEDS_NETWORK);
    assert_string_equal (c.host, "cdn.example.org");
    assert_string_equal (c.evidence, "curl: (6) Could not resolve host: cdn.example.org");
    static const char *const not_reserved[] = { "testing.com", "latest", "mytest.example.org", "invalid.example.com",
                                                "localhost.example.com", "test.com" };
    for (size_t i = 0; i < sizeof not_reserved / sizeof not_reserved[0]; i++) {
        char out[256];
        snprintf (out, sizeof out, "curl: (6) Could not resolve host: %s\n", not_reserved[i]);
        assert_int_equal (kiwi_classify (table, out, &c), KIWI_FAILURE_NEEDS_NETWORK);
        assert_string_equal (c.host, not_reserved[i]);
    }
}

/* before= and after= conditions: the nearest boundary line decides, none
 * found is no match, and their syntax errors are named. */
static void
test_conditions (void **state)
{
    const char *t = "needs_network\tgo\t^    x_test\\.go:[0-9]+: lookup ([a-z.]+)$\thost=\\1 "
                    "after=~^--- (PASS|FAIL)~^--- FAIL~\n"
                    "needs_network\tjs\t^    getaddrinfo ([a-z.]+)$\thost=\\1 before=~^  (● |console)~^  ● ~\n";
    kiwi_classifier *c = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_classifier_parse (t, strlen (t), "t.tsv", &c, &err), 0);
    kiwi_classification r;
    /* the first block passed, the second failed: the second line decides */
    assert_int_equal (kiwi_classify (c,
                                     "    x_test.go:1: lookup a.example\n--- PASS: A\n"
                                     "    x_test.go:2: lookup b.example\n--- FAIL: B\n",
                                     &r),
                      KIWI_FAILURE_NEEDS_NETWORK);
    assert_string_equal (r.host, "b.example");
    assert_string_equal (r.rule, "go");
    assert_int_equal (kiwi_classify (c, "    x_test.go:1: lookup a.example\n--- PASS: A\n", &r), KIWI_FAILURE_NONE);
    assert_int_equal (kiwi_classify (c, "    x_test.go:1: lookup a.example\n", &r), KIWI_FAILURE_NONE);
    assert_int_equal (kiwi_classify (c, "  ● t\n\n    getaddrinfo c.example\n", &r), KIWI_FAILURE_NEEDS_NETWORK);
    assert_string_equal (r.host, "c.example");
    assert_int_equal (kiwi_classify (c, "  ● t\n  console.log\n    getaddrinfo c.example\n", &r), KIWI_FAILURE_NONE);
    assert_int_equal (kiwi_classify (c, "    getaddrinfo c.example\n", &r), KIWI_FAILURE_NONE);
    kiwi_classifier_free (c);
    /* a boundary further than the bound (400 lines) is not looked for */
    size_t n = 500 * 2 + 64;
    char *far = malloc (n);
    assert_non_null (far);
    char *p = far;
    p += sprintf (p, "  ● t\n");
    for (int i = 0; i < 450; i++)
        *p++ = '\n';
    sprintf (p, "    getaddrinfo c.example\n");
    assert_int_equal (kiwi_classifier_parse (t, strlen (t), "t.tsv", &c, &err), 0);
    assert_int_equal (kiwi_classify (c, far, &r), KIWI_FAILURE_NONE);
    free (far);
    kiwi_classifier_free (c);
    /* the end (start) of the output is a boundary, an empty line */
    const char *e = "needs_network\tend\t^died: ([a-z.]+)$\thost=\\1 after=~^[^[:space:]]~^$~ before=~.~^(Traceback)?$~\n";
    assert_int_equal (kiwi_classifier_parse (e, strlen (e), "t.tsv", &c, &err), 0);
    assert_int_equal (kiwi_classify (c, "died: d.example\n\tfrom a\n\n", &r), KIWI_FAILURE_NEEDS_NETWORK);
    assert_string_equal (r.host, "d.example");
    assert_int_equal (kiwi_classify (c, "Traceback\ndied: d.example", &r), KIWI_FAILURE_NEEDS_NETWORK);
    assert_int_equal (kiwi_classify (c, "died: d.example\n\tfrom a\nok 2 tests\n", &r), KIWI_FAILURE_NONE);
    assert_int_equal (kiwi_classify (c, "log\ndied: d.example\n", &r), KIWI_FAILURE_NONE);
    kiwi_classifier_free (c);
    expect_parse_error ("needs_network\tx\tfoo\tafter=~a~b\n", "condition `after` is not ~BOUNDARY~VERDICT~");
    expect_parse_error ("needs_network\tx\tfoo\tbefore=a\n", "condition `before` is not ~BOUNDARY~VERDICT~");
    expect_parse_error ("needs_network\tx\tfoo\tafter=~a~b~ after=~a~b~\n", "condition `after` given twice");
    expect_parse_error ("needs_network\tx\tfoo\tafter=~(~b~\n", "t.tsv:1: pattern `(`");
}

/* The work one output can cause is bounded: a rule gives up after 256
 * matching lines that do not count. */
static void
test_candidates_are_bounded (void **state)
{
    size_t line = strlen ("curl: (6) Could not resolve host: x.invalid\n");
    char *out = malloc (300 * line + 128);
    assert_non_null (out);
    char *p = out;
    for (int i = 0; i < 300; i++)
        p += sprintf (p, "curl: (6) Could not resolve host: x.invalid\n");
    sprintf (p, "curl: (6) Could not resolve host: cdn.example.org\n");
    kiwi_classification c;
    assert_int_equal (kiwi_classify (table, out, &c), KIWI_FAILURE_NONE);
    assert_int_equal (kiwi_classify (table, out + 100 * line, &c), KIWI_FAILURE_NEEDS_NETWORK);
    assert_string_equal (c.host, "cdn.example.org");
    free (out);
}

/* Extracted text is untrusted: control characters replaced, bounded. */
static void
test_extracted_values_are_cleaned (void **state)
{
    char out[2048];
    char host[600];
    memset (host, 'a', sizeof host - 1);
    host[sizeof host - 1] = '\0';
    snprintf (out, sizeof out, "curl: (6) Could not resolve host: %s\n", host);
    kiwi_classification c;
    assert_int_equal (kiwi_classify (table, out, &c), KIWI_FAILURE_NEEDS_NETWORK);
    assert_int_equal (strlen (c.host), sizeof c.host - 1);
    /* colours are removed before matching: the command is "pytest", not "py?[31mtest" */
    assert_int_equal (kiwi_classify (table, "sh: 1: py\x1b[31mtest: not found\n", &c), KIWI_FAILURE_MISSING_RUNTIME);
    assert_string_equal (c.command, "pytest");
    assert_int_equal (kiwi_classify (table, "\x1b[1m\x1b[31mcurl: (6) Could not resolve host: a.example.org\x1b[0m\n", &c),
                      KIWI_FAILURE_NEEDS_NETWORK);
    assert_string_equal (c.host, "a.example.org");
    assert_string_equal (c.evidence, "curl: (6) Could not resolve host: a.example.org");
    /* an escape that is not a CSI sequence stays, replaced in what is reported */
    assert_int_equal (kiwi_classify (table, "sh: 1: py\x1b]0;x\x07test: not found\n", &c), KIWI_FAILURE_NONE);
    assert_int_equal (kiwi_classify (table, "x\x07y\nsh: 1: cargo: not found\n", &c), KIWI_FAILURE_MISSING_RUNTIME);
    assert_string_equal (c.command, "cargo");
    assert_string_equal (c.evidence, "sh: 1: cargo: not found");
}

static void
expect_parse_error (const char *text, const char *needle)
{
    kiwi_classifier *c = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_classifier_parse (text, strlen (text), "t.tsv", &c, &err), -1);
    assert_null (c);
    if (strstr (kiwi_error_msg (err), needle) == NULL)
        fail_msg ("error `%s` does not mention `%s`", kiwi_error_msg (err), needle);
    kiwi_error_free (&err);
}

static void
test_table_errors_are_named (void **state)
{
    expect_parse_error ("# only comments\n", "no rules");
    expect_parse_error ("needs_network\tx\n", "t.tsv:1");
    expect_parse_error ("# c\nbroken_class\tx\tfoo\thost=a\n", "t.tsv:2: unknown class `broken_class`");
    expect_parse_error ("needs_network\tx\t(unclosed\thost=a\n", "t.tsv:1: pattern `(unclosed`");
    expect_parse_error ("needs_network\tx\tfoo\tports=1\n", "unknown field `ports`");
    expect_parse_error ("needs_network\tx\tfoo\thost=a host=b\n", "given twice");
    expect_parse_error ("needs_network\tx\tfoo\thost=~bar\n", "second ~");
    expect_parse_error ("none\tx\tfoo\thost=a\n", "unknown class `none`");
    kiwi_classifier *c = NULL;
    kiwi_error_t err = NULL;
    const char *ok = "# a comment\r\n\nneeds_network\tmine\tfetching ([a-z.]+) failed\thost=\\1 what=~item ([0-9]+)~#\\1\n";
    assert_int_equal (kiwi_classifier_parse (ok, strlen (ok), "t.tsv", &c, &err), 0);
    assert_int_equal (kiwi_classifier_size (c), 1);
    assert_string_equal (kiwi_classifier_rule_name (c, 0), "mine");
    assert_int_equal (kiwi_classifier_rule_class (c, 0), KIWI_FAILURE_NEEDS_NETWORK);
    kiwi_classification r;
    assert_int_equal (kiwi_classify (c, "item 42\nfetching cdn.example.org failed\n", &r), KIWI_FAILURE_NEEDS_NETWORK);
    assert_string_equal (r.host, "cdn.example.org");
    assert_string_equal (r.what, "#42");
    kiwi_classifier_free (c);
    assert_int_equal (kiwi_classifier_load ("/nonexistent/classify.tsv", &c, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "/nonexistent/classify.tsv"));
    kiwi_error_free (&err);
}

static void
test_class_names_round_trip (void **state)
{
    for (int i = KIWI_FAILURE_NONE; i <= KIWI_FAILURE_NEEDS_SERVICE; i++) {
        kiwi_failure_class back;
        assert_int_equal (kiwi_failure_class_parse (kiwi_failure_class_str ((kiwi_failure_class) i), &back), 0);
        assert_int_equal (back, i);
    }
    kiwi_failure_class x;
    assert_int_equal (kiwi_failure_class_parse ("network", &x), -1);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_captured_outputs),
        cmocka_unit_test (test_every_capture_has_an_expectation),
        cmocka_unit_test (test_every_rule_has_evidence),
        cmocka_unit_test (test_narrow_by_construction),
        cmocka_unit_test (test_reserved_names),
        cmocka_unit_test (test_conditions),
        cmocka_unit_test (test_candidates_are_bounded),
        cmocka_unit_test (test_extracted_values_are_cleaned),
        cmocka_unit_test (test_table_errors_are_named),
        cmocka_unit_test (test_class_names_round_trip),
    };
    return cmocka_run_group_tests_name ("classify", tests, setup, teardown);
}
