/*
 * session-tools.c: the Implementer's tools, one table of name, description,
 * parameters (JSON Schema) and handler: list, read (bounded), write, edit
 * and search the workspace (wspath.h), run a command in the round's
 * persistent sandbox (no network, made on first use, dropped at the end of
 * the round or when it died), and run_tests, which ends the round with its
 * verify (see session-internal.h).
 */
#include "worker/task/session-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "worker/task/wspath.h"

#define READ_MAX (64 * 1024)

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

/* ---------- tools ---------- */

static const char *
arg_str (json_t *args, const char *key)
{
    return json_string_value (json_object_get (args, key));
}

/* ---------- the Implementer's tools: one table of name, description,
 * parameters and handler ---------- */

/* A tool's handler: its content (caller frees), or NULL with *err set (a
 * NULL without *err is out of memory). `path` is the call's "path"
 * argument, checked for NUL bytes, or NULL. Each adds its line to
 * s->actions. */
typedef char *(*tool_fn) (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err);

static char *
tool_list_files (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    kiwi_strv files = KIWI_STRV_INIT;
    json_t *d = json_object_get (args, "depth");
    int depth = json_is_integer (d) ? (int) json_integer_value (d) : 2;
    if (depth < 1 || depth > 8)
        depth = 2;
    if (kiwi_ws_list (s->env->workspace, path ? path : "", depth, 500, &files, err) < 0)
        return NULL;
    char *out = kiwi_strv_join_lines (&files);
    kiwi_strv_free (&files);
    kiwi_strv_addf (&s->actions, "list %s", path && *path ? path : ".");
    return out;
}

static char *
tool_read_file (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    json_t *o = json_object_get (args, "offset");
    size_t off = json_is_integer (o) && json_integer_value (o) > 0 ? (size_t) json_integer_value (o) : 0;
    char *data = NULL, *out = NULL;
    size_t len = 0;
    int truncated = 0;
    if (path == NULL) {
        kiwi_error_make (err, 0, "read_file needs a path");
        return NULL;
    }
    if (kiwi_ws_read (s->env->workspace, path, off, READ_MAX, &data, &len, &truncated, err) < 0)
        return NULL;
    if (truncated) {
        if (asprintf (&out, "%s\n[... truncated: read again with offset %zu ...]", data, off + len) < 0)
            out = NULL;
        free (data);
    } else
        out = data;
    kiwi_strv_addf (&s->actions, "read %s", path);
    return out;
}

static char *
tool_write_file (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    const char *content = arg_str (args, "content");
    char *out = NULL;
    if (path == NULL || content == NULL) {
        kiwi_error_make (err, 0, "write_file needs path and content");
        return NULL;
    }
    if (kiwi_ws_write (s->env->workspace, path, content, strlen (content), err) < 0)
        return NULL;
    kiwi_strv_addf (&s->actions, "write %s", path);
    if (asprintf (&out, "wrote %zu bytes to %s", strlen (content), path) < 0)
        out = NULL;
    return out;
}

static char *
tool_edit_file (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    const char *old = arg_str (args, "old_text"), *nw = arg_str (args, "new_text");
    char *out = NULL;
    if (path == NULL || old == NULL || nw == NULL) {
        kiwi_error_make (err, 0, "edit_file needs path, old_text and new_text");
        return NULL;
    }
    if (kiwi_ws_edit (s->env->workspace, path, old, nw, err) < 0)
        return NULL;
    kiwi_strv_addf (&s->actions, "edit %s", path);
    if (asprintf (&out, "edited %s", path) < 0)
        out = NULL;
    return out;
}

static char *
tool_search (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    const char *text = arg_str (args, "text");
    kiwi_strv hits = KIWI_STRV_INIT;
    if (kiwi_ws_search (s->env->workspace, path ? path : "", text, 200, &hits, err) < 0)
        return NULL;
    char *out = hits.n ? kiwi_strv_join_lines (&hits) : strdup ("no matches\n");
    kiwi_strv_free (&hits);
    kiwi_strv_addf (&s->actions, "search %.60s", text ? text : "");
    return out;
}

static char *
tool_run (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    (void) path;
    const char *cmd = arg_str (args, "command");
    char *out = NULL;
    if (cmd == NULL) {
        kiwi_error_make (err, 0, "run needs a command");
        return NULL;
    }
    if (box_ready (s, err) < 0)
        return NULL;
    const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    int64_t t = kiwi__session_remaining_ms (s);
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = t > 600000 || t == 0 ? 600000 : t, .output_cap = KIWI__SESSION_OUTPUT_TAIL };
    kiwi_exec_result r;
    if (kiwi_sandbox_exec (s->box, &x, &r, err) < 0) {
        kiwi__session_box_drop (s);
        return NULL;
    }
    if (asprintf (&out, "exit status %d%s%s\n%s", r.exit_code, r.timed_out ? " (timed out)" : "",
                  r.sandbox_lost ? " (the sandbox died)" : "", r.output ? r.output : "")
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
    return strdup ("running the tests: the result follows at the end of the round");
}

static const struct {
    const char *name;
    const char *description;
    const char *parameters; /* JSON Schema of the arguments */
    tool_fn run;
} tool_defs[KIWI__SESSION_N_TOOLS] = {
    { "list_files", "List files and directories under a directory of the repository (recursively, to a depth).",
      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"description\":\"directory relative to "
      "the repository root; empty for the root\"},\"depth\":{\"type\":\"integer\"}},\"required\":[]}",
      tool_list_files },
    { "read_file", "Read a file of the repository (at most 64 KiB from an offset).",
      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"offset\":{\"type\":\"integer\"}},"
      "\"required\":[\"path\"]}",
      tool_read_file },
    { "write_file", "Create or replace a whole file of the repository.",
      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"}},"
      "\"required\":[\"path\",\"content\"]}",
      tool_write_file },
    { "edit_file", "Replace exactly one occurrence of old_text by new_text in a file.",
      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"old_text\":{\"type\":\"string\"},"
      "\"new_text\":{\"type\":\"string\"}},\"required\":[\"path\",\"old_text\",\"new_text\"]}",
      tool_edit_file },
    { "search", "Find lines containing a text in the repository's files.",
      "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"}},"
      "\"required\":[\"text\"]}",
      tool_search },
    { "run", "Run a shell command in the repository's sandbox (no network). Output is truncated to its last 16 KiB.",
      "{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":[\"command\"]}",
      tool_run },
    { "run_tests",
      "Run the repository's test command in a fresh sandbox (no network) and report the result. Ends the round.",
      "{\"type\":\"object\",\"properties\":{},\"required\":[]}", tool_run_tests },
};

/* The tools as the model client takes them (their parameters parsed). */
void
kiwi__session_tools_init (kiwi__session *s)
{
    for (size_t i = 0; i < KIWI__SESSION_N_TOOLS; i++)
        s->tools[i] = (kiwi_model_tool) { tool_defs[i].name, tool_defs[i].description,
                                          schema (tool_defs[i].parameters) };
}

void
kiwi__session_tools_clear (kiwi__session *s)
{
    for (size_t i = 0; i < KIWI__SESSION_N_TOOLS; i++)
        json_decref (s->tools[i].parameters);
}

/* Runs one tool call; returns its content (caller frees) and sets *is_error. */
char *
kiwi__session_run_tool (kiwi__session *s, const char *name, json_t *args, bool *is_error)
{
    kiwi_error_t err = NULL;
    char *out = NULL;
    *is_error = false;
    const char *path = arg_str (args, "path");
    if (path != NULL && strlen (path) != json_string_length (json_object_get (args, "path"))) {
        kiwi_error_make (&err, 0, "a path with a NUL byte is not allowed");
        path = NULL;
        goto fail;
    }
    for (size_t i = 0; i < KIWI__SESSION_N_TOOLS; i++)
        if (strcmp (name, tool_defs[i].name) == 0) {
            if ((out = tool_defs[i].run (s, args, path, &err)) != NULL || err == NULL)
                return out;
            goto fail;
        }
    kiwi_error_make (&err, 0, "unknown tool `%s`", name);
fail:
    *is_error = true;
    kiwi_strv_addf (&s->actions, "refused %s %.80s: %.120s", name, path ? path : "", kiwi_error_msg (err));
    out = strdup (kiwi_error_msg (err));
    kiwi_error_free (&err);
    return out;
}
