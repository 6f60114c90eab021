/*
 * test_session_tools.c: the Implementer's tools as the model meets them,
 * called through the session's own dispatch (kiwi__session_run_tool) on a
 * workspace in /tmp: read_file numbers lines, reads a range and says how to
 * read on when cut; edit_file shows the result, names the nearest lines
 * when old_text is not found and every line when it occurs more than once;
 * insert_lines; search says literal or regex, case, path, glob and its
 * cap; find_files; give_up ends the task with a kind and a reason. Every
 * hostile argument (a negative, huge or reversed range, a wrong type, a
 * path outside) gets an error and nothing else. The tool table itself:
 * every tool is declared once with a description that documents it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "worker/task/session-internal.h"

static char root[64], outside[64];
static kiwi_session_env env;
static kiwi_task task;
static kiwi__session s;

static void
put (const char *rel, const char *text)
{
    char p[512];
    snprintf (p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen (p, "w");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
}

static char *
slurp (const char *rel)
{
    char p[512];
    snprintf (p, sizeof p, "%s/%s", root, rel);
    FILE *f = fopen (p, "r");
    assert_non_null (f);
    static char buf[1 << 20];
    size_t n = fread (buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose (f);
    return buf;
}

static int
setup (void **state)
{
    snprintf (root, sizeof root, "/tmp/kiwi-tools-XXXXXX");
    snprintf (outside, sizeof outside, "/tmp/kiwi-tools-out-XXXXXX");
    if (mkdtemp (root) == NULL || mkdtemp (outside) == NULL)
        return -1;
    char p[256], t[256];
    snprintf (p, sizeof p, "%s/secret.txt", outside);
    FILE *f = fopen (p, "w");
    fputs ("TOP SECRET\n", f);
    fclose (f);
    snprintf (p, sizeof p, "%s/src", root);
    mkdir (p, 0755);
    snprintf (p, sizeof p, "%s/evil", root);
    snprintf (t, sizeof t, "%s/secret.txt", outside);
    if (symlink (t, p) < 0)
        return -1;
    env = (kiwi_session_env) { .workspace = root, .checkout = root,
                               .limits = { .memory_mb = 2048, .pids = 512, .cpus = 2, .disk_mb = 4096 } };
    kiwi_task_init (&task);
    s = (kiwi__session) { .env = &env, .task = &task };
    kiwi__session_tools_init (&s);
    return 0;
}

static int
teardown (void **state)
{
    kiwi__session_tools_clear (&s);
    kiwi_strv_free (&s.actions);
    kiwi_task_clear (&task);
    char cmd[256];
    snprintf (cmd, sizeof cmd, "rm -rf %s %s", root, outside);
    return system (cmd);
}

/* Calls `name` with the JSON arguments `args`; *is_error says how it went. */
static char *
tool (const char *name, const char *args, bool *is_error)
{
    json_error_t je;
    json_t *a = json_loads (args, JSON_ALLOW_NUL, &je);
    if (a == NULL)
        fail_msg ("bad test JSON %s: %s", args, je.text);
    char *out = kiwi__session_run_tool (&s, name, a, false, is_error);
    json_decref (a);
    assert_non_null (out);
    return out;
}

static void
expect_ok (const char *name, const char *args, const char *const *wants)
{
    bool e = false;
    char *out = tool (name, args, &e);
    if (e)
        fail_msg ("%s %s failed: %s", name, args, out);
    for (size_t i = 0; wants[i]; i++)
        if (strstr (out, wants[i]) == NULL)
            fail_msg ("%s %s: `%s` lacks `%s`", name, args, out, wants[i]);
    free (out);
}

static void
expect_error (const char *name, const char *args, const char *const *wants)
{
    bool e = false;
    char *out = tool (name, args, &e);
    if (!e)
        fail_msg ("%s %s succeeded: %s", name, args, out);
    for (size_t i = 0; wants[i]; i++)
        if (strstr (out, wants[i]) == NULL)
            fail_msg ("%s %s: error `%s` lacks `%s`", name, args, out, wants[i]);
    free (out);
}

#define W(...) ((const char *const[]) { __VA_ARGS__, NULL })

static void
test_read_numbered_and_ranged (void **state)
{
    put ("src/app.js", "const a = 1;\nconst b = 2;\nconst c = 3;\nexport { a, b, c };\n");
    expect_ok ("read_file", "{\"path\":\"src/app.js\"}",
               W ("[src/app.js: 4 lines; showing 1-4]\n", "     1\tconst a = 1;\n", "     4\texport { a, b, c };\n"));
    bool e;
    char *out = tool ("read_file", "{\"path\":\"src/app.js\",\"start_line\":2,\"end_line\":3}", &e);
    assert_false (e);
    assert_string_equal (out, "[src/app.js: 4 lines; showing 2-3]\n     2\tconst b = 2;\n     3\tconst c = 3;\n");
    free (out);
    /* an end past the end reads to the end; a last line without newline counts */
    put ("src/nonl.txt", "one\ntwo");
    expect_ok ("read_file", "{\"path\":\"src/nonl.txt\",\"start_line\":2,\"end_line\":99}",
               W ("[src/nonl.txt: 2 lines; showing 2-2]", "     2\ttwo\n"));
}

static void
test_read_hostile_numbers (void **state)
{
    put ("src/app.js", "a\nb\nc\n");
    expect_error ("read_file", "{\"path\":\"src/app.js\",\"start_line\":0}", W ("start_line", "1.."));
    expect_error ("read_file", "{\"path\":\"src/app.js\",\"start_line\":-5}", W ("start_line", "-5"));
    expect_error ("read_file", "{\"path\":\"src/app.js\",\"start_line\":9000000000000000000}", W ("start_line"));
    expect_error ("read_file", "{\"path\":\"src/app.js\",\"end_line\":-1}", W ("end_line"));
    expect_error ("read_file", "{\"path\":\"src/app.js\",\"start_line\":\"2\"}", W ("must be an integer"));
    expect_error ("read_file", "{\"path\":\"src/app.js\",\"start_line\":1.5}", W ("must be an integer"));
    expect_error ("read_file", "{\"path\":\"src/app.js\",\"start_line\":3,\"end_line\":2}",
                  W ("end_line (2) is before start_line (3)"));
    expect_error ("read_file", "{\"path\":\"src/app.js\",\"start_line\":4}", W ("past the end", "(3 lines)"));
    expect_error ("read_file", "{}", W ("needs a path"));
}

static void
test_read_cut_says_how_to_read_on (void **state)
{
    /* 20000 lines: more than 64 KiB once numbered */
    char p[512];
    snprintf (p, sizeof p, "%s/big.txt", root);
    FILE *f = fopen (p, "w");
    for (int i = 1; i <= 20000; i++)
        fprintf (f, "line number %d\n", i);
    fclose (f);
    bool e;
    char *out = tool ("read_file", "{\"path\":\"big.txt\"}", &e);
    assert_false (e);
    assert_true (strlen (out) <= 64 * 1024 + 200);
    const char *m = strstr (out, "[... cut at 64 KiB after line ");
    assert_non_null (m);
    unsigned last = 0, total = 0, next = 0;
    assert_int_equal (sscanf (m, "[... cut at 64 KiB after line %u of %u: read on with start_line %u]", &last, &total,
                              &next),
                      3);
    assert_int_equal (total, 20000);
    assert_int_equal (next, last + 1);
    char want[64];
    snprintf (want, sizeof want, "%6u\tline number %u\n", last, last);
    assert_non_null (strstr (out, want));
    free (out);
    char args[128];
    snprintf (args, sizeof args, "{\"path\":\"big.txt\",\"start_line\":%u}", next);
    snprintf (want, sizeof want, "%6u\tline number %u\n", next, next);
    expect_ok ("read_file", args, W (want));
}

static void
test_read_paths_stay_inside (void **state)
{
    expect_error ("read_file", "{\"path\":\"/etc/passwd\"}", W ("absolute"));
    expect_error ("read_file", "{\"path\":\"../x\"}", W ("`..`"));
    expect_error ("read_file", "{\"path\":\"evil\"}", W ("symlink"));
    expect_error ("read_file", "{\"path\":\".git/config\"}", W (".git"));
    expect_error ("read_file", "{\"path\":\"src\"}", W ("not a regular file"));
    expect_error ("read_file", "{\"path\":\"src/app\\u0000.js\"}", W ("NUL"));
    put ("bin.dat", "ab");
    char p[512];
    snprintf (p, sizeof p, "%s/bin.dat", root);
    FILE *f = fopen (p, "w");
    fwrite ("a\0b\n", 1, 4, f);
    fclose (f);
    expect_ok ("read_file", "{\"path\":\"bin.dat\"}", W ("binary file of 4 bytes; not shown"));
    put ("empty.txt", "");
    expect_ok ("read_file", "{\"path\":\"empty.txt\"}", W ("[empty.txt: 0 lines (an empty file)]"));
    /* arguments that are not an object are all absent */
    expect_error ("read_file", "[1,2]", W ("needs a path"));
    expect_error ("list_files", "{\"depth\":9}", W ("`depth` is 9"));
    expect_error ("list_files", "{\"path\":\"evil\"}", W ("`evil`"));
    expect_ok ("list_files", "{\"path\":\"src\",\"depth\":1}", W ("src/"));
}

static void
test_edit_shows_the_result (void **state)
{
    put ("sum.js", "// 1\n// 2\n// 3\n// 4\nfunction sum(a, b) {\n  return a - b;\n}\n// 8\n// 9\n// 10\n// 11\n");
    expect_ok ("edit_file", "{\"path\":\"sum.js\",\"old_text\":\"return a - b;\",\"new_text\":\"return a + b;\"}",
               W ("edited sum.js: 1 replacement", "[sum.js: 11 lines; showing 3-9 of the result]",
                  "     3\t// 3\n", "     6\t  return a + b;\n", "     9\t// 9\n"));
    assert_non_null (strstr (slurp ("sum.js"), "  return a + b;\n"));
    bool e;
    char *out = tool ("edit_file", "{\"path\":\"sum.js\",\"old_text\":\"// 1\\n\",\"new_text\":\"\"}", &e);
    assert_false (e);
    assert_null (strstr (out, "// 11")); /* only a few lines either side */
    free (out);
}

static void
test_edit_not_found_names_the_nearest (void **state)
{
    put ("sum.js", "function sum(a, b) {\n    return a - b;\n}\nfunction mul(a, b) {\n  return a * b;\n}\n");
    /* the model's indentation is wrong */
    expect_error ("edit_file",
                  "{\"path\":\"sum.js\",\"old_text\":\"\\treturn a - b;\\n}\",\"new_text\":\"\\treturn a + b;\\n}\"}",
                  W ("old_text was not found in `sum.js` (6 lines)", "     2\t    return a - b;\n"));
    /* nothing like it */
    expect_error ("edit_file", "{\"path\":\"sum.js\",\"old_text\":\"@@\",\"new_text\":\"x\"}",
                  W ("not found", "No line is like"));
    assert_string_equal (slurp ("sum.js"),
                         "function sum(a, b) {\n    return a - b;\n}\nfunction mul(a, b) {\n  return a * b;\n}\n");
}

static void
test_edit_several_matches (void **state)
{
    put ("x.py", "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n");
    expect_error ("edit_file", "{\"path\":\"x.py\",\"old_text\":\"x = 1\",\"new_text\":\"x = 2\"}",
                  W ("occurs 3 times, at lines 1, 3, 5", "replace_all"));
    expect_error ("edit_file",
                  "{\"path\":\"x.py\",\"old_text\":\"x = 1\",\"new_text\":\"x = 2\",\"replace_all\":\"yes\"}",
                  W ("`replace_all` must be true or false"));
    expect_error ("edit_file", "{\"path\":\"x.py\",\"old_text\":\"y = 2\",\"new_text\":\"y = 2\"}", W ("the same"));
    expect_error ("edit_file", "{\"path\":\"x.py\",\"old_text\":\"\",\"new_text\":\"y\"}", W ("empty", "insert_lines"));
    expect_error ("edit_file", "{\"path\":\"x.py\",\"old_text\":7,\"new_text\":\"y\"}", W ("must be a string"));
    assert_string_equal (slurp ("x.py"), "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n");
    expect_ok ("edit_file", "{\"path\":\"x.py\",\"old_text\":\"x = 1\",\"new_text\":\"x = 2\",\"replace_all\":true}",
               W ("3 replacements"));
    assert_string_equal (slurp ("x.py"), "x = 2\ny = 2\nx = 2\nz = 3\nx = 2\n");
    expect_error ("edit_file", "{\"path\":\"../x.py\",\"old_text\":\"a\",\"new_text\":\"b\"}", W ("`..`"));
    expect_error ("edit_file", "{\"path\":\"evil\",\"old_text\":\"TOP\",\"new_text\":\"b\"}", W ("symlink"));
}

static void
test_insert_lines (void **state)
{
    put ("a.txt", "one\ntwo\nthree");
    expect_ok ("insert_lines", "{\"path\":\"a.txt\",\"line\":0,\"text\":\"zero\"}",
               W ("inserted 1 line into a.txt after line 0", "     1\tzero\n"));
    expect_ok ("insert_lines", "{\"path\":\"a.txt\",\"line\":2,\"text\":\"one and a half\\n\"}",
               W ("     3\tone and a half\n"));
    expect_ok ("insert_lines", "{\"path\":\"a.txt\",\"line\":5,\"text\":\"four\\nfive\\n\"}",
               W ("inserted 2 lines", "     7\tfive\n"));
    assert_string_equal (slurp ("a.txt"), "zero\none\none and a half\ntwo\nthree\nfour\nfive\n");
    expect_error ("insert_lines", "{\"path\":\"a.txt\",\"line\":8,\"text\":\"x\"}",
                  W ("line 8 is past the end: the file has 7 lines"));
    expect_error ("insert_lines", "{\"path\":\"a.txt\",\"line\":-1,\"text\":\"x\"}", W ("`line` is -1"));
    expect_error ("insert_lines", "{\"path\":\"a.txt\",\"text\":\"x\"}", W ("needs path, line and text"));
    expect_error ("insert_lines", "{\"path\":\"a.txt\",\"line\":1,\"text\":\"\"}", W ("text is empty"));
    assert_string_equal (slurp ("a.txt"), "zero\none\none and a half\ntwo\nthree\nfour\nfive\n");
}

static void
test_search (void **state)
{
    char p[512];
    snprintf (p, sizeof p, "%s/lib", root);
    mkdir (p, 0755);
    put ("lib/m.py", "def Foo(a):\n    return a.b\n");
    put ("lib/n.js", "axb = 1;\nfoo();\n");
    /* literal by default: the dot is a dot */
    bool e;
    char *out = tool ("search", "{\"pattern\":\"a.b\",\"path\":\"lib\"}", &e);
    assert_false (e);
    assert_string_equal (out, "lib/m.py:2:    return a.b\n");
    free (out);
    expect_ok ("search", "{\"pattern\":\"a.b\",\"path\":\"lib\",\"regex\":true}", W ("lib/m.py:2:", "lib/n.js:1:axb"));
    /* case */
    expect_ok ("search", "{\"pattern\":\"foo\",\"path\":\"lib\"}", W ("lib/n.js:2:foo();"));
    out = tool ("search", "{\"pattern\":\"foo\",\"path\":\"lib\",\"ignore_case\":true}", &e);
    assert_non_null (strstr (out, "lib/m.py:1:def Foo(a):"));
    free (out);
    /* a file, a glob */
    out = tool ("search", "{\"pattern\":\"=\",\"path\":\"lib/n.js\"}", &e);
    assert_string_equal (out, "lib/n.js:1:axb = 1;\n");
    free (out);
    out = tool ("search", "{\"pattern\":\"a\",\"path\":\"lib\",\"glob\":\"*.py\"}", &e);
    assert_null (strstr (out, "n.js"));
    assert_non_null (strstr (out, "m.py"));
    free (out);
    expect_error ("search", "{\"pattern\":\"(\",\"regex\":true}", W ("bad regular expression"));
    expect_error ("search", "{\"pattern\":\"(a)\\\\1\",\"regex\":true}", W ("back-references"));
    expect_error ("search", "{\"pattern\":\"\"}", W ("empty pattern"));
    expect_error ("search", "{\"pattern\":\"x\",\"path\":\"../\"}", W ("`..`"));
    expect_error ("search", "{\"pattern\":\"x\",\"regex\":1}", W ("must be true or false"));
    /* the link is not followed: the secret is never found */
    expect_ok ("search", "{\"pattern\":\"TOP SECRET\"}", W ("no matches"));
}

static void
test_search_and_find_cut_with_a_marker (void **state)
{
    char p[512];
    snprintf (p, sizeof p, "%s/many", root);
    mkdir (p, 0755);
    for (int i = 0; i < 250; i++) {
        snprintf (p, sizeof p, "many/f%03d.txt", i);
        put (p, "needle\n");
    }
    bool e;
    char *out = tool ("search", "{\"pattern\":\"needle\",\"path\":\"many\"}", &e);
    assert_false (e);
    if (strstr (out, "many/f199.txt:1:needle\n... cut at 200 matches; narrow with path or glob") == NULL)
        fail_msg ("search output: %s", out + (strlen (out) > 300 ? strlen (out) - 300 : 0));
    assert_null (strstr (out, "f200"));
    free (out);
    out = tool ("find_files", "{\"glob\":\"f*.txt\",\"path\":\"many\"}", &e);
    assert_false (e);
    assert_non_null (strstr (out, "many/f000.txt\n"));
    assert_non_null (strstr (out, "... cut at 200 files; narrow with path or glob"));
    free (out);
    out = tool ("find_files", "{\"glob\":\"f01?.txt\"}", &e);
    assert_false (e);
    assert_non_null (strstr (out, "many/f010.txt\n"));
    assert_null (strstr (out, "cut at"));
    free (out);
    expect_ok ("find_files", "{\"glob\":\"*.nothing\"}", W ("no files match"));
    expect_error ("find_files", "{}", W ("needs a glob"));
    expect_error ("find_files", "{\"glob\":\"*\",\"path\":\"/etc\"}", W ("absolute"));
}

static void
test_give_up (void **state)
{
    expect_error ("give_up", "{\"kind\":\"bored\",\"reason\":\"x\"}", W ("environment, test_wrong or cannot_fix"));
    expect_error ("give_up", "{\"kind\":\"test_wrong\"}", W ("needs a reason"));
    assert_false (s.gave_up);
    expect_ok ("give_up", "{\"kind\":\"test_wrong\",\"reason\":\"the test expects 4 from sum(1, 2)\"}", W ("gave_up"));
    assert_true (s.gave_up);
    assert_string_equal (s.give_up_reason, "test_wrong: the test expects 4 from sum(1, 2)");
    /* a reason of any size is cut to its bound */
    char *big = malloc (100000 + 64);
    strcpy (big, "{\"kind\":\"cannot_fix\",\"reason\":\"");
    memset (big + strlen (big), 'r', 100000);
    strcpy (big + strlen ("{\"kind\":\"cannot_fix\",\"reason\":\"") + 100000, "\"}");
    bool e;
    free (tool ("give_up", big, &e));
    free (big);
    assert_int_equal (strlen (s.give_up_reason), strlen ("cannot_fix: ") + KIWI__SESSION_GIVE_UP_MAX);
    s.gave_up = false;
    expect_error ("no_such_tool", "{}", W ("unknown tool"));
}

/* The tool called `name` as the session declares it (fails the test when
 * there is none). */
static const kiwi_model_tool *
declared (const char *name)
{
    for (size_t i = 0; i < sizeof s.tools / sizeof s.tools[0]; i++)
        if (s.tools[i].name != NULL && strcmp (s.tools[i].name, name) == 0)
            return &s.tools[i];
    fail_msg ("no tool `%s` is declared", name);
    return NULL;
}

/* The tools are declared once (models render them per provider), each with
 * a description that documents its arguments, bounds and errors. */
static void
test_tool_table (void **state)
{
    const char *names[] = { "list_files", "read_file",  "write_file", "edit_file", "insert_lines",
                            "search",     "find_files", "run",        "run_tests", "give_up" };
    size_t bytes = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const kiwi_model_tool *t = declared (names[i]);
        assert_true (json_is_object (t->parameters));
        assert_true (strlen (t->description) > 40);
        char *d = json_dumps (t->parameters, JSON_COMPACT);
        bytes += strlen (t->description) + strlen (d) + strlen (t->name);
        free (d);
    }
    assert_int_equal (sizeof s.tools / sizeof s.tools[0], sizeof names / sizeof names[0]);
    printf ("tool declarations: %zu bytes\n", bytes);
    const kiwi_model_tool *rd = declared ("read_file"), *sr = declared ("search"), *run = declared ("run");
    json_t *rp = json_object_get (rd->parameters, "properties");
    const char *sl = json_string_value (json_object_get (json_object_get (rp, "start_line"), "description"));
    assert_true (sl != NULL && strstr (sl, "1-based") != NULL);
    assert_non_null (strstr (rd->description, "inclusive"));
    assert_non_null (strstr (declared ("edit_file")->description, "replace_all"));
    assert_non_null (strstr (sr->description, "literal"));
    assert_non_null (strstr (sr->description, "regular expression"));
    assert_non_null (strstr (sr->description, "Case-sensitive"));
    assert_non_null (strstr (sr->description, "path:line:text"));
    assert_non_null (strstr (sr->description, "cut at 200 matches"));
    /* run names its limits and what persists */
    assert_non_null (strstr (run->description, "600 s"));
    assert_non_null (strstr (run->description, "2048 MiB of memory"));
    assert_non_null (strstr (run->description, "2 CPUs"));
    assert_non_null (strstr (run->description, "no network"));
    assert_non_null (strstr (run->description, "made afresh in the next round"));
    assert_non_null (strstr (declared ("run_tests")->description, "End the round"));
}


/* The Architect's tools: the read-only three, the same declarations; its
 * read runs, its write (and run, give_up) is refused and changes nothing. */
static void
test_architect_read_only (void **state)
{
    const char *want[] = { "read_file", "search", "find_files" };
    for (size_t i = 0; i < KIWI__SESSION_N_ARCHITECT_TOOLS; i++) {
        assert_string_equal (s.architect_tools[i].name, want[i]);
        bool found = false;
        for (size_t j = 0; j < KIWI__SESSION_N_TOOLS; j++)
            found = found || (strcmp (s.tools[j].name, want[i]) == 0
                              && strcmp (s.tools[j].description, s.architect_tools[i].description) == 0);
        assert_true (found);
    }
    put ("ro.txt", "one\n");
    const char *calls[][2] = { { "write_file", "{\"path\":\"ro.txt\",\"content\":\"two\\n\"}" },
                               { "edit_file", "{\"path\":\"ro.txt\",\"old_text\":\"one\",\"new_text\":\"two\"}" },
                               { "insert_lines", "{\"path\":\"ro.txt\",\"line\":0,\"text\":\"two\"}" },
                               { "run", "{\"command\":\"echo two > ro.txt\"}" },
                               { "give_up", "{\"kind\":\"cannot_fix\",\"reason\":\"no\"}" } };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        json_t *a = json_loads (calls[i][1], 0, NULL);
        bool e = false;
        char *out = kiwi__session_run_tool (&s, calls[i][0], a, true, &e);
        json_decref (a);
        if (!e || strstr (out, "is not the Architect's") == NULL)
            fail_msg ("%s for the Architect: %s", calls[i][0], out);
        free (out);
    }
    assert_string_equal (slurp ("ro.txt"), "one\n");
    assert_false (s.gave_up);
    json_t *a = json_loads ("{\"path\":\"ro.txt\"}", 0, NULL);
    bool e = true;
    char *out = kiwi__session_run_tool (&s, "read_file", a, true, &e);
    json_decref (a);
    assert_false (e);
    assert_non_null (strstr (out, "     1\tone"));
    free (out);
}

static void
put_in (const char *dir, const char *rel, const char *text)
{
    char p[512], cmd[600];
    snprintf (p, sizeof p, "%s/%s", dir, rel);
    snprintf (cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", p);
    assert_int_equal (system (cmd), 0);
    FILE *f = fopen (p, "w");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
}

/* The repository map: files by path, those the failing output names
 * first; line counts, [test] by path, top-level symbols by language (not
 * nested ones, not a JS const that is not exported), at most 8 a file; cut
 * at its budget with the count of files left out. */
static void
test_map (void **state)
{
    char dir[64];
    snprintf (dir, sizeof dir, "/tmp/kiwi-map-XXXXXX");
    assert_non_null (mkdtemp (dir));
    put_in (dir, "b/z.py", "import os\n\ndef zed():\n    pass\nclass Zoo:\n    def inner(self):\n        pass\n");
    put_in (dir, "a.go", "package a\n\nfunc Alpha() {}\nfunc (r *T) Method() {}\ntype T struct{}\n");
    put_in (dir, "pkg/a_test.go", "package a\nfunc TestAlpha(t *testing.T) {}\n");
    put_in (dir, "web/app.test.ts", "export const x = 1;\n");
    put_in (dir, "web/lib.ts", "export function f() {}\nconst hidden = 2;\nexport default class K {}\nexport const y = 3;\n");
    put_in (dir, "src/lib.rs", "pub fn run() {}\nstruct S;\nimpl<T> Tr for S {\n}\n");
    put_in (dir, "src/test/java/FooTest.java", "public class FooTest {\n}\n");
    put_in (dir, "tests/test_x.py", "def test_x():\n    pass\n");
    put_in (dir, "m.py", "def m1(): pass\ndef m2(): pass\ndef m3(): pass\ndef m4(): pass\ndef m5(): pass\ndef m6(): pass\n"
                         "def m7(): pass\ndef m8(): pass\ndef m9(): pass\ndef m10(): pass\ndef m11(): pass\ndef m12(): pass\n");
    put_in (dir, "zz/named.py", "def boom():\n    raise ValueError\n");
    put_in (dir, "README", "hello\n");
    const char *output = "Traceback (most recent call last):\n  File \"/kiwi/src/zz/named.py\", line 2, in boom\n";
    char *map = kiwi__session_map (dir, output, 12 * 1024, 8);
    assert_non_null (map);
    const char *lines[] = {
        "zz/named.py (2 lines) [in the failing output]: boom\n",
        "README (1 lines)\n",
        "a.go (5 lines): Alpha, Method, T\n",
        "b/z.py (7 lines): zed, Zoo\n",
        "m.py (12 lines): m1, m2, m3, m4, m5, m6, m7, m8, ... 4 more\n",
        "pkg/a_test.go (2 lines) [test]: TestAlpha\n",
        "src/lib.rs (4 lines): run, S, <T> Tr for S\n",
        "src/test/java/FooTest.java (2 lines) [test]: FooTest\n",
        "tests/test_x.py (2 lines) [test]: test_x\n",
        "web/app.test.ts (1 lines) [test]: x\n",
        "web/lib.ts (4 lines): f, K, y\n",
    };
    const char *at = strchr (map, '\n'); /* after the header */
    assert_non_null (at);
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        if (strncmp (at + 1, lines[i], strlen (lines[i])) != 0)
            fail_msg ("map line %zu: want `%s`, map:\n%s", i + 1, lines[i], map);
        at += strlen (lines[i]);
    }
    assert_null (strstr (map, "not shown"));
    assert_null (strstr (map, "hidden"));
    assert_null (strstr (map, "inner"));
    free (map);
    /* a small budget: the named file still first, then a cut line that counts the rest */
    map = kiwi__session_map (dir, output, 400, 8);
    assert_true (strlen (map) <= 400);
    assert_non_null (strstr (map, "\nzz/named.py (2 lines)"));
    size_t shown = 0;
    for (const char *p = strchr (map, '\n') + 1; *p && strncmp (p, "... ", 4) != 0; p = strchr (p, '\n') + 1)
        shown++;
    char want[96];
    snprintf (want, sizeof want, "... %zu more files not shown; use find_files\n", (size_t) 11 - shown);
    if (shown == 0 || shown >= 11 || strstr (map, want) == NULL)
        fail_msg ("cut map (%zu shown) lacks `%s`:\n%s", shown, want, map);
    free (map);
    /* a Python module named by its dotted name (pytest's, an import's): the
     * file, from a src/ layout too, and its package's __init__.py; not a
     * longer name that ends with it, not a lone module name */
    put_in (dir, "src/billing/price.py", "def total():\n    pass\n");
    put_in (dir, "src/billing/__init__.py", "\n");
    put_in (dir, "src/acme/core/__init__.py", "\n");
    put_in (dir, "src/other/price.py", "\n");
    put_in (dir, "src/zbilling/price.py", "\n");
    map = kiwi__session_map (dir,
                             "E   AssertionError: billing.price.total() returned 3\n"
                             "    from notbilling.price import x; see zbilling.pricey and m; import billing\n"
                             "ModuleNotFoundError: No module named 'acme.core'\n",
                             12 * 1024, 8);
    assert_non_null (strstr (map, "src/billing/price.py (2 lines) [in the failing output]: total\n"));
    assert_non_null (strstr (map, "src/acme/core/__init__.py (1 lines) [in the failing output]\n"));
    assert_non_null (strstr (map, "src/billing/__init__.py (1 lines)\n"));
    assert_non_null (strstr (map, "src/other/price.py (1 lines)\n"));
    assert_non_null (strstr (map, "src/zbilling/price.py (1 lines)\n"));
    assert_non_null (strstr (map, "m.py (12 lines): m1"));
    assert_null (strstr (map, "m.py (12 lines) [in"));
    free (map);
    char cmd[128];
    snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal (system (cmd), 0);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_read_numbered_and_ranged),
        cmocka_unit_test (test_read_hostile_numbers),
        cmocka_unit_test (test_read_cut_says_how_to_read_on),
        cmocka_unit_test (test_read_paths_stay_inside),
        cmocka_unit_test (test_edit_shows_the_result),
        cmocka_unit_test (test_edit_not_found_names_the_nearest),
        cmocka_unit_test (test_edit_several_matches),
        cmocka_unit_test (test_insert_lines),
        cmocka_unit_test (test_search),
        cmocka_unit_test (test_search_and_find_cut_with_a_marker),
        cmocka_unit_test (test_give_up),
        cmocka_unit_test (test_tool_table),
        cmocka_unit_test (test_architect_read_only),
        cmocka_unit_test (test_map),
    };
    return cmocka_run_group_tests (tests, setup, teardown);
}
