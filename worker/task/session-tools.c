/*
 * session-tools.c: the Implementer's tools, one table of name, description,
 * parameters (JSON Schema) and handler, declared once and rendered by each
 * provider (models/): the file tools (session-files.c), run a command in
 * the round's persistent sandbox (no network, made on first use, dropped at
 * the end of the round or when it died), run_tests, which ends the round
 * with its verify, and give_up, which ends the task (see
 * session-internal.h). Each description says what the tool does, its
 * bounds and its errors: it is all the model knows of it.
 */
#include "worker/task/session-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "worker/task/failout.h"

static json_t *
schema (const char *json)
{
    json_error_t e;
    return json_loads (json, 0, &e);
}

/* ---------- the round's persistent sandbox ---------- */

static int
box_ready (kiwi__session *s, kiwi_error_t *err)
{
    if (s->box == NULL) {
        cleanup_strv kiwi_strv e = KIWI_STRV_INIT, creds = KIWI_STRV_INIT;
        for (size_t i = 0; i < s->task->n_test_credentials; i++)
            kiwi_strv_add (&creds, s->task->test_credentials[i]);
        if (kiwi_phase_session_env (s->env->phase_cfg, s->env->verify_env, kiwi_strv_list (&creds), &e, NULL, NULL,
                                    err)
            < 0)
            return -1;
        cleanup_free char *lower = NULL;
        if (kiwi_phase_snapshot_lower (s->env->sandbox, s->env->phase_cfg, s->env->snapshot_dir,
                                       s->env->limits.disk_mb, &lower, err)
            < 0)
            return -1;
        kiwi_sandbox_spec spec = { .image = s->env->image, .network = KIWI_NET_NONE, .env = kiwi_strv_list (&e),
                                   .limits = s->env->limits, .task_id = s->task->id, .phase = "session",
                                   .lower_dir = lower };
        if (kiwi_sandbox_create (s->env->sandbox, &spec, &s->box, err) < 0)
            return -1;
        if (s->env->snapshot_dir && lower == NULL
            && kiwi_phase_restore_snapshot (s->box, s->env->snapshot_dir, err) < 0)
            return -1;
    }
    /* the sandbox sees the workspace as it is now */
    return kiwi_phase_put_tree (s->box, s->env->workspace, KIWI_SANDBOX_SRC, NULL, NULL, err);
}

void
kiwi__session_box_drop (kiwi__session *s)
{
    if (s->box == NULL)
        return;
    kiwi_error_t err = NULL;
    if (kiwi_sandbox_destroy (s->box, &err) < 0)
        kiwi_warn ("session sandbox: %s", kiwi_error_msg (err));
    kiwi_error_free (&err);
    s->box = NULL;
}

/* ---------- the Implementer's tools: one table of name, description,
 * parameters and handler ---------- */

/* A tool's handler: as kiwi__tool_read_file (session-internal.h). Each adds
 * its line to s->actions. */
typedef char *(*tool_fn) (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err);

static const char *
arg_str (json_t *args, const char *key)
{
    return json_string_value (json_object_get (args, key));
}

static char *
tool_run (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    (void) path;
    json_t *c = json_object_get (args, "command");
    const char *cmd = json_string_value (c);
    char *out = NULL;
    if (cmd == NULL || *cmd == '\0')
        return kiwi_error_make (err, 0, "run needs a command"), NULL;
    if (strlen (cmd) != json_string_length (c))
        return kiwi_error_make (err, 0, "run: the command holds a NUL byte"), NULL;
    if (box_ready (s, err) < 0)
        return NULL;
    const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    int64_t t = kiwi__session_remaining_ms (s);
    int64_t cap = KIWI__SESSION_RUN_TIMEOUT_S * 1000;
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = t > cap || t == 0 ? cap : t,
                         .output_cap = KIWI__SESSION_OUTPUT_KEPT };
    kiwi_exec_result r;
    if (kiwi_sandbox_exec (s->box, &x, &r, err) < 0) {
        kiwi__session_box_drop (s);
        return NULL;
    }
    cleanup_free char *shown = kiwi_failout_fit (r.output, KIWI__SESSION_OUTPUT_TAIL);
    if (asprintf (&out, "exit status %d%s%s\n%s", r.exit_code, r.timed_out ? " (timed out)" : "",
                  r.sandbox_lost ? " (the sandbox died)" : "", shown ? shown : "")
        < 0)
        out = NULL;
    if (r.timed_out || r.sandbox_lost)
        kiwi__session_box_drop (s);
    kiwi_exec_result_clear (&r);
    kiwi_strv_addf (&s->actions, "run %.80s", cmd);
    return out;
}

static char *
tool_run_tests (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    (void) args;
    (void) path;
    (void) err;
    s->tests_requested = 1;
    kiwi_strv_add (&s->actions, "run_tests");
    return strdup ("running the tests: this round ends; the result follows at the start of the next round");
}

static const char *const give_up_kinds[] = { "environment", "test_wrong", "cannot_fix" };

static char *
tool_give_up (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    (void) path;
    const char *kind = arg_str (args, "kind"), *reason = arg_str (args, "reason");
    bool known = false;
    for (size_t i = 0; kind && i < sizeof give_up_kinds / sizeof give_up_kinds[0]; i++)
        known = known || strcmp (kind, give_up_kinds[i]) == 0;
    if (!known)
        return kiwi_error_make (err, 0, "give_up: kind must be environment, test_wrong or cannot_fix"), NULL;
    if (reason == NULL || *reason == '\0')
        return kiwi_error_make (err, 0, "give_up needs a reason"), NULL;
    free (s->give_up_reason);
    /* the reason as far as its first NUL byte, cut to its bound */
    if (asprintf (&s->give_up_reason, "%s: %.*s", kind, KIWI__SESSION_GIVE_UP_MAX, reason) < 0) {
        s->give_up_reason = NULL;
        return NULL;
    }
    s->gave_up = true;
    kiwi_strv_addf (&s->actions, "give_up %s", kind);
    return strdup ("giving up: the task ends now, with the status gave_up and your reason");
}

#define SYNTAX_NOTE                                                                                                   \
    " After the change, a .py, .js/.mjs/.cjs, .json or .sh file is checked for syntax in the round's sandbox "    \
    "(python3 -m py_compile, node --check, a JSON parse, bash -n; when the image has the tool): the answer's last " \
    "line says `syntax check (...): ok`, or shows the checker's first lines. The file is written either way."

#define PATH_ERRORS                                                                                                   \
    " Path errors (every tool): a path that is absolute, holds `..` or a NUL byte, goes through a symlink, names "  \
    ".git, or names nothing is refused."

static const struct {
    const char *name;
    const char *description; /* NULL: made by tools_init (run's names the task's limits) */
    const char *parameters;  /* JSON Schema of the arguments */
    tool_fn run;
    bool read_only;          /* the Architect has it too */
} tool_defs[KIWI__SESSION_N_TOOLS] = {
    { "list_files",
      "List files and directories under a directory of the repository, recursively to `depth` (1..8, default 2), "
      "sorted. Directories end with '/', symlinks show as `name -> (symlink)` and are never followed, .git is hidden "
      "and node_modules is not entered. At most 500 entries; then the last line says `... cut at 500 entries`. "
      "Errors: a depth outside 1..8, a path that is not a directory." PATH_ERRORS,
      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"description\":\"a directory relative to "
      "the repository root; empty for the root\"},\"depth\":{\"type\":\"integer\",\"description\":\"1..8, default "
      "2\"}},\"required\":[]}",
      kiwi__tool_list_files, false },
    { "read_file",
      "Read a text file of the repository with its lines numbered (`    12\\t<line>`), after a header "
      "`[path: N lines; showing A-B]`. start_line and end_line (1-based, inclusive) choose the lines; by default the "
      "whole file, and an end_line past the end reads to the end. At most 64 KiB of lines are shown and a line over "
      "2000 bytes is cut with a note; when the output is cut, its last line says `[... cut at 64 KiB after line L "
      "of N: read on with start_line L+1]`. A binary file is named, not shown; an empty one is said to be. "
      "Errors: no path; not a regular file; larger than 8 MiB; start_line past the end; end_line before "
      "start_line; a number that is not an integer or is below 1." PATH_ERRORS,
      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"start_line\":{\"type\":\"integer\","
      "\"description\":\"the first line shown, 1-based; default 1\"},\"end_line\":{\"type\":\"integer\","
      "\"description\":\"the last line shown, inclusive; default the last line\"}},\"required\":[\"path\"]}",
      kiwi__tool_read_file, true },
    { "write_file",
      "Create or replace a whole file of the repository (parent directories are made; at most 8 MiB). To change "
      "part of a file, use edit_file or insert_lines. Errors: no path or no content, content over 8 MiB or "
      "holding a NUL byte." SYNTAX_NOTE PATH_ERRORS,
      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"}},"
      "\"required\":[\"path\",\"content\"]}",
      kiwi__tool_write_file, false },
    { "edit_file",
      "Replace old_text by new_text in a file. old_text must match the file's bytes exactly (whitespace and "
      "indentation included) and occur exactly once, unless replace_all is true, which replaces every occurrence. "
      "On success the answer shows the result's lines around the (first) change, numbered. Errors: old_text not "
      "found (the error names the file and shows, numbered, the lines most like old_text's first line); old_text "
      "occurs several times and replace_all is not true (the error gives the count and the line of each); old_text "
      "empty (use insert_lines) or equal to new_text; the file or the result larger than 8 MiB; the file not a "
      "regular file." SYNTAX_NOTE PATH_ERRORS,
      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"old_text\":{\"type\":\"string\"},"
      "\"new_text\":{\"type\":\"string\"},\"replace_all\":{\"type\":\"boolean\",\"description\":\"replace every "
      "occurrence; default false\"}},\"required\":[\"path\",\"old_text\",\"new_text\"]}",
      kiwi__tool_edit_file, false },
    { "insert_lines",
      "Insert text into a file after line `line`: 0 inserts at the top, the file's line count at the end. A "
      "newline is added to text when it lacks one. The answer shows the result's lines around the insertion, "
      "numbered. Errors: line past the end of the file (the error gives the line count) or below 0; text empty; "
      "the file or the result larger than 8 MiB; the file not a regular file." SYNTAX_NOTE PATH_ERRORS,
      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"line\":{\"type\":\"integer\","
      "\"description\":\"insert after this line; 0 = at the top\"},\"text\":{\"type\":\"string\"}},"
      "\"required\":[\"path\",\"line\",\"text\"]}",
      kiwi__tool_insert_lines, false },
    { "search",
      "Find lines in the repository's files. pattern is literal text, unless regex is true: then it is a POSIX "
      "extended regular expression (e.g. `foo(Bar|Baz)\\(`; no back-references). Case-sensitive unless "
      "ignore_case is true. path is a file or a directory (default: the whole repository). glob keeps only files "
      "whose name matches it (e.g. `*.py`; a glob with a '/' matches the path from the root, e.g. `src/*/*.js`). "
      "Output: one `path:line:text` per match (text cut at 300 bytes), files in name order, or `no matches`. At "
      "most 200 matches; when there are more, the last line says `... cut at 200 matches; narrow with path or "
      "glob`. Binary files, files over 1 MiB, .git and node_modules are not searched. Errors: a pattern or glob "
      "empty or over 1000 bytes, a bad regular expression, a path that is not a directory or a text file." PATH_ERRORS,
      "{\"type\":\"object\",\"properties\":{\"pattern\":{\"type\":\"string\"},\"path\":{\"type\":\"string\","
      "\"description\":\"a file or a directory; default the repository root\"},\"glob\":{\"type\":\"string\","
      "\"description\":\"file names to search, e.g. *.py\"},\"regex\":{\"type\":\"boolean\",\"description\":"
      "\"pattern is a POSIX extended regular expression; default false (literal)\"},\"ignore_case\":{\"type\":"
      "\"boolean\",\"description\":\"default false\"}},\"required\":[\"pattern\"]}",
      kiwi__tool_search, true },
    { "find_files",
      "Find files by name under a directory (default: the whole repository, at any depth; .git and node_modules "
      "skipped). glob matches the file's name (e.g. `*_test.go`), or, when it holds a '/', the path from the root. "
      "One path a line, sorted; at most 200, then the last line says `... cut at 200 files; narrow with path or "
      "glob`. Errors: a glob empty or over 1000 bytes, a path that is not a directory." PATH_ERRORS,
      "{\"type\":\"object\",\"properties\":{\"glob\":{\"type\":\"string\"},\"path\":{\"type\":\"string\","
      "\"description\":\"a directory; default the repository root\"}},\"required\":[\"glob\"]}",
      kiwi__tool_find_files, true },
    { "run", NULL,
      "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":[\"command\"]}",
      tool_run, false },
    { "run_tests",
      "End the round: the task's test command runs on the workspace in a fresh sandbox (no network). If it passes, "
      "and passes again on the task's commit plus the diff of your changes, the task is fixed. If it fails, its "
      "output reaches you at the start of the next round (with the Architect's new plan, when there is one), when "
      "rounds are left. Tool "
      "calls after it in the same answer are not run.",
      "{\"type\":\"object\",\"properties\":{},\"required\":[]}", tool_run_tests, false },
    { "give_up",
      "End the task now, without a fix, instead of spending the remaining rounds: when the environment is broken "
      "(kind environment), the test itself is wrong or cannot pass (test_wrong), or you cannot find a fix "
      "(cannot_fix). The task's result has the status gave_up and says the kind and your reason (at most 2000 "
      "bytes kept). Tool calls after it in the same answer are not run. Errors: a kind not one of the three, an "
      "empty reason.",
      "{\"type\":\"object\",\"properties\":{\"kind\":{\"type\":\"string\",\"enum\":[\"environment\",\"test_wrong\","
      "\"cannot_fix\"]},\"reason\":{\"type\":\"string\",\"description\":\"what is wrong, for the people who read "
      "the result\"}},\"required\":[\"kind\",\"reason\"]}",
      tool_give_up, false },
};

/* run's description: the limits of this task's sandbox. Caller frees. */
static char *
run_description (const kiwi__session *s)
{
    const kiwi_sandbox_limits *l = &s->env->limits;
    char cpu[48] = "", mem[48] = "", pids[48] = "", disk[48] = "";
    if (l->cpus > 0)
        snprintf (cpu, sizeof cpu, ", %g CPUs", l->cpus);
    if (l->memory_mb > 0)
        snprintf (mem, sizeof mem, ", %lld MiB of memory", (long long) l->memory_mb);
    if (l->pids > 0)
        snprintf (pids, sizeof pids, ", %lld processes", (long long) l->pids);
    if (l->disk_mb > 0)
        snprintf (disk, sizeof disk, ", %lld MiB written", (long long) l->disk_mb);
    char *out = NULL;
    if (asprintf (&out,
                  "Run a shell command (/bin/sh -c) in the repository's sandbox, in the repository root. The "
                  "dependencies are installed; there is no network at all. Limits: %d s a command (less when the "
                  "task's time runs out sooner)%s%s%s%s. The sandbox persists through the round (files it writes "
                  "stay between run calls) and is made afresh in the next round; a command that times out or "
                  "kills it loses it, and the next run makes a new one. Before each command the workspace's "
                  "files are copied in; what a command changes in the sandbox does not come back to the "
                  "workspace, so change files with write_file, edit_file or insert_lines. Output: `exit status "
                  "N`, then at most 16 KiB of stdout and stderr, colour codes removed: when longer, the lines "
                  "with failure markers (FAIL, Error, Traceback, panicked...) and the ones after them, then the "
                  "end, the rest shown as `[... N lines of passing output left out]`.",
                  KIWI__SESSION_RUN_TIMEOUT_S, cpu, mem, pids, disk)
        < 0)
        out = NULL;
    return out;
}

/* The tools as the model client takes them (their parameters parsed). */
void
kiwi__session_tools_init (kiwi__session *s)
{
    s->run_description = run_description (s);
    for (size_t i = 0; i < KIWI__SESSION_N_TOOLS; i++) {
        const char *d = tool_defs[i].description;
        if (d == NULL)
            d = s->run_description ? s->run_description : "Run a shell command in the repository's sandbox.";
        s->tools[i] = (kiwi_model_tool) { tool_defs[i].name, d, schema (tool_defs[i].parameters) };
    }
    /* the Architect's: the same declarations, the read-only ones */
    size_t n = 0;
    for (size_t i = 0; i < KIWI__SESSION_N_TOOLS && n < KIWI__SESSION_N_ARCHITECT_TOOLS; i++)
        if (tool_defs[i].read_only) {
            s->architect_tools[n] = s->tools[i];
            json_incref (s->architect_tools[n++].parameters);
        }
}

void
kiwi__session_tools_clear (kiwi__session *s)
{
    for (size_t i = 0; i < KIWI__SESSION_N_TOOLS; i++)
        json_decref (s->tools[i].parameters);
    for (size_t i = 0; i < KIWI__SESSION_N_ARCHITECT_TOOLS; i++)
        json_decref (s->architect_tools[i].parameters);
    free (s->run_description);
    s->run_description = NULL;
    free (s->give_up_reason);
    s->give_up_reason = NULL;
}

/* ---------- a cheap syntax check after a file changed ---------- */

static bool
changes_file (tool_fn fn)
{
    return fn == kiwi__tool_write_file || fn == kiwi__tool_edit_file || fn == kiwi__tool_insert_lines;
}

/* By the file's suffix: what checks it, in the sandbox, as `sh -c SCRIPT sh
 * FILE`; exit 99 when the image has no such tool (then nothing is said). */
static const struct {
    const char *suffixes[4];
    const char *label;
    const char *script;
} checkers[] = {
    { { ".py", NULL }, "python3 -m py_compile",
      "command -v python3 >/dev/null 2>&1 || exit 99; exec python3 -m py_compile \"./$1\"" },
    { { ".js", ".mjs", ".cjs", NULL }, "node --check",
      "command -v node >/dev/null 2>&1 || exit 99; exec node --check \"./$1\"" },
    { { ".json", NULL }, "JSON parse",
      "if command -v python3 >/dev/null 2>&1; then exec python3 -m json.tool \"./$1\" >/dev/null; "
      "elif command -v node >/dev/null 2>&1; then exec node -e "
      "'JSON.parse(require(\"fs\").readFileSync(process.argv[1], \"utf8\"))' \"./$1\"; else exit 99; fi" },
    { { ".sh", NULL }, "bash -n", "command -v bash >/dev/null 2>&1 || exit 99; exec bash -n \"./$1\"" },
};

#define CHECK_TIMEOUT_MS 20000 /* a checker's wall clock (its expiry ends the sandbox) */
#define CHECK_LINES 10         /* lines of a failed check shown */

/* What the syntax check of `path` (just written) says, to append to the
 * tool's answer: "syntax check (node --check): ok", or its first lines; NULL
 * when the file has no checker, the image lacks it, or there is no sandbox.
 * Reported, never enforced. Caller frees. */
static char *
syntax_check (kiwi__session *s, const char *path)
{
    const char *dot = strrchr (path, '.');
    if (dot == NULL || s->env->sandbox == NULL)
        return NULL;
    size_t k = 0, n = sizeof checkers / sizeof checkers[0];
    bool found = false;
    for (; k < n && !found; k++)
        for (size_t j = 0; checkers[k].suffixes[j] && !found; j++)
            found = strcmp (dot, checkers[k].suffixes[j]) == 0;
    if (!found)
        return NULL;
    k--;
    kiwi_error_t err = NULL;
    char *out = NULL;
    if (box_ready (s, &err) < 0) {
        if (asprintf (&out, "syntax check: not run (%s)", kiwi_error_msg (err)) < 0)
            out = NULL;
        kiwi_error_free (&err);
        return out;
    }
    const char *argv[] = { "/bin/sh", "-c", checkers[k].script, "sh", path, NULL };
    int64_t t = kiwi__session_remaining_ms (s);
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = t > CHECK_TIMEOUT_MS || t == 0 ? CHECK_TIMEOUT_MS : t,
                         .output_cap = 8192 };
    kiwi_exec_result r;
    if (kiwi_sandbox_exec (s->box, &x, &r, &err) < 0) {
        kiwi__session_box_drop (s);
        if (asprintf (&out, "syntax check: not run (%s)", kiwi_error_msg (err)) < 0)
            out = NULL;
        kiwi_error_free (&err);
        return out;
    }
    if (r.timed_out || r.sandbox_lost) {
        kiwi__session_box_drop (s);
        if (asprintf (&out, "syntax check (%s): %s", checkers[k].label,
                      r.timed_out ? "timed out" : "the sandbox died")
            < 0)
            out = NULL;
    } else if (r.exit_code == 0) {
        if (asprintf (&out, "syntax check (%s): ok", checkers[k].label) < 0)
            out = NULL;
    } else if (r.exit_code != 99) {
        cleanup_free char *c = kiwi_failout_clean (r.output);
        size_t cut = 0, lines = 0;
        while (c && c[cut] && lines < CHECK_LINES && cut < 1500)
            lines += c[cut++] == '\n';
        if (asprintf (&out, "syntax check (%s) failed (exit status %d; the file is written as it is):\n%.*s%s",
                      checkers[k].label, r.exit_code, (int) cut, c ? c : "", c && c[cut] ? "[...]\n" : "")
            < 0)
            out = NULL;
    }
    kiwi_exec_result_clear (&r);
    return out;
}

/* Runs one tool call; returns its content (caller frees) and sets *is_error. */
char *
kiwi__session_run_tool (kiwi__session *s, const char *name, json_t *args, bool read_only, bool *is_error)
{
    kiwi_error_t err = NULL;
    char *out = NULL;
    *is_error = false;
    if (!json_is_object (args))
        args = NULL; /* every argument absent */
    const char *path = arg_str (args, "path");
    if (path != NULL && strlen (path) != json_string_length (json_object_get (args, "path"))) {
        kiwi_error_make (&err, 0, "a path with a NUL byte is not allowed");
        path = NULL;
        goto fail;
    }
    for (size_t i = 0; i < KIWI__SESSION_N_TOOLS; i++)
        if (strcmp (name, tool_defs[i].name) == 0) {
            if (read_only && !tool_defs[i].read_only) {
                kiwi_error_make (&err, 0,
                                 "`%s` is not the Architect's: it reads (read_file, search, find_files) and plans; "
                                 "the Implementer changes files and runs commands",
                                 tool_defs[i].name);
                goto fail;
            }
            if ((out = tool_defs[i].run (s, args, path, &err)) == NULL && err != NULL)
                goto fail;
            /* a file changed: its syntax, where the image can check it */
            cleanup_free char *check = NULL;
            if (out != NULL && path != NULL && changes_file (tool_defs[i].run))
                check = syntax_check (s, path);
            char *with = NULL;
            if (check != NULL && asprintf (&with, "%s\n%s", out, check) >= 0) {
                free (out);
                out = with;
            }
            return out;
        }
    kiwi_error_make (&err, 0, "unknown tool `%.64s`", name);
fail:
    *is_error = true;
    kiwi_strv_addf (&s->actions, "refused %.64s %.80s: %.120s", name, path ? path : "", kiwi_error_msg (err));
    out = strdup (kiwi_error_msg (err));
    kiwi_error_free (&err);
    return out;
}
