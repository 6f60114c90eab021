/*
 * session.c: the Architect/Implementer session (see session.h).
 *
 * One round: the Architect plans (from the task, the repository map and the
 * last verify's output), the Implementer works the plan with tools until it
 * stops calling them, calls run_tests, or reaches its per-round tool limit;
 * then the round's verify runs. Tokens and cost are checked after every
 * model call.
 *
 * The round's verify sandbox is made ahead, while the models work: a
 * thread of the session creates and starts it (kiwi_phase_verify_ready)
 * through an env of its own (kiwi_session_env.sandbox_ahead), and the
 * verify takes it after joining the thread, so the container's start is off
 * the verify's path. While the round's verify runs, the thread makes the
 * next one: the deciding verify of the diff takes it when the round
 * passed, the next round's verify otherwise. The thread touches nothing
 * else of the session; what it made is handed over by pthread_join and
 * then to the session's env (kiwi_sandbox_adopt), so the thread's env is
 * never driven by two threads. A sandbox made ahead and not used
 * (the round ended another way) is removed; one that could not be made is
 * logged and the verify makes its own, as without.
 */
#include "worker/task/session.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "worker/task/repo.h"
#include "worker/worker-metrics.h"
#include "worker/task/wspath.h"

#define READ_MAX (64 * 1024)
#define OUTPUT_TAIL (16 * 1024)
#define TOOL_CALLS_PER_ROUND 40
#define MAP_ENTRIES 400
#define MAX_TOKENS 8192
#define N_TOOLS 7 /* tool_defs, below */

static const char architect_system[]
    = "You are the Architect in Kiwi, a system that fixes code so that a repository's tests pass. You read the "
      "task, the repository map and the failing test output, and you write a short, concrete plan for the "
      "Implementer: which files to look at, what the cause most likely is, and what to change. You do not edit "
      "files yourself. Keep the plan under 300 words.";

static const char implementer_system[]
    = "You are the Implementer in Kiwi. Follow the Architect's plan using the tools. Paths are relative to the "
      "repository root. Commands run in a sandbox without network access. Make the smallest change that makes "
      "the tests pass; do not weaken or delete tests. When you believe the change is complete, call run_tests. "
      "If run_tests fails, read its output and continue.";

typedef struct session {
    const kiwi_session_env *env;
    const kiwi_task *task;
    kiwi_model_tool tools[N_TOOLS];
    uint64_t tokens_in, tokens_out;
    uint64_t budget_tokens;   /* 0: none */
    uint64_t budget_micros;   /* 0: none */
    double cost;              /* dollars */
    kiwi_sandbox *box;        /* the round's persistent sandbox, created on first use */
    kiwi_strv actions;        /* what the Implementer did this round, for the event */
    int tests_requested;
    kiwi_exec_result last_verify;
    bool have_verify;
    char *not_carried;        /* the last round passed only in the workspace: what the diff lacked */
    int64_t round_started_ms; /* kiwi_mono_ms at the start of the round, for its duration */
    kiwi_strv creds;          /* the task's test credentials, NULL-terminated */
    struct {
        pthread_t thread;
        bool running;           /* started and not yet joined */
        kiwi_verify_request req;
        kiwi_sandbox *box;      /* what the thread made, or NULL */
        kiwi_error_t err;       /* why it made none */
        bool lent;              /* the sandbox taken last still goes through sandbox_ahead (the
                                   driver cannot hand it over): nothing is made while it is used */
    } ahead;                  /* the round's verify sandbox, made ahead */
} session;

static json_t *
schema (const char *json)
{
    json_error_t e;
    return json_loads (json, 0, &e);
}

static int64_t
remaining_ms (const session *s)
{
    if (s->env->deadline_ms <= 0)
        return 0;
    int64_t left = s->env->deadline_ms - kiwi_now_ms ();
    return left > 1 ? left : 1;
}

static bool
out_of_time (const session *s)
{
    return s->env->deadline_ms > 0 && kiwi_now_ms () >= s->env->deadline_ms;
}

/* Accounts one model call; true when the budget is spent. */
static bool
account (session *s, const kiwi_model_response *r)
{
    s->tokens_in += r->usage.input_tokens;
    s->tokens_out += r->usage.output_tokens;
    s->cost += kiwi_model_client_cost (s->env->model, r->usage);
    if (s->budget_tokens && s->tokens_in + s->tokens_out >= s->budget_tokens)
        return true;
    if (s->budget_micros && (uint64_t) (s->cost * 1e6) >= s->budget_micros)
        return true;
    return false;
}

static char *
repo_map (const session *s)
{
    kiwi_strv files = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    kiwi_ws_list (s->env->workspace, "", 4, MAP_ENTRIES, &files, &err);
    kiwi_error_free (&err);
    char *out = kiwi_strv_join_lines (&files);
    kiwi_strv_free (&files);
    return out;
}

/* The tail of `s`, at most `max` bytes, with a note if cut. Caller frees. */
static char *
tail (const char *text, size_t max)
{
    size_t l = text ? strlen (text) : 0;
    char *out = NULL;
    if (l <= max)
        return strdup (text ? text : "");
    if (asprintf (&out, "[... %zu bytes cut ...]\n%s", l - max, text + l - max) < 0)
        return NULL;
    return out;
}

/* ---------- verify ---------- */

/* Phase B's request for this task, but for the tree and the time left: the
 * same image, snapshot, environment and credentials every time. */
static void
verify_request (session *s, kiwi_verify_request *req)
{
    *req = (kiwi_verify_request) {
        .image = s->env->image,
        .snapshot_dir = s->env->snapshot_dir,
        .command = s->task->test_command,
        .prelude = s->env->verify_prelude,
        .extra_env = s->env->verify_env,
        .credentials = kiwi_strv_list (&s->creds),
        .limits = s->env->limits,
        .output_cap = OUTPUT_TAIL,
        .task_id = s->task->id,
    };
}

static void *
ahead_main (void *arg)
{
    session *s = arg;
    kiwi_phase_verify_ready (s->env->sandbox_ahead, s->env->phase_cfg, &s->ahead.req, &s->ahead.box,
                             &s->ahead.err);
    return NULL;
}

/* Starts making the round's verify sandbox, unless there is no env for it
 * or one is made or being made. */
static void
ahead_start (session *s)
{
    if (s->env->sandbox_ahead == NULL || s->ahead.running || s->ahead.box != NULL)
        return;
    verify_request (s, &s->ahead.req);
    /* the thread takes no signal: SIGTERM stays the session's own */
    sigset_t all, old;
    sigfillset (&all);
    pthread_sigmask (SIG_SETMASK, &all, &old);
    int e = pthread_create (&s->ahead.thread, NULL, ahead_main, s);
    pthread_sigmask (SIG_SETMASK, &old, NULL);
    if (e != 0) {
        kiwi_debug ("task %s: no thread to make the verify's sandbox ahead (%s)", s->task->id, strerror (e));
        return;
    }
    s->ahead.running = true;
}

/* The sandbox made ahead (owned by the caller), or NULL; waits for the
 * thread when it is still at work. */
static kiwi_sandbox *
ahead_take (session *s)
{
    if (s->ahead.running) {
        pthread_join (s->ahead.thread, NULL);
        s->ahead.running = false;
    }
    if (s->ahead.err != NULL) {
        kiwi_warn ("task %s: the verify's sandbox could not be made ahead (%s): the verify makes its own",
                   s->task->id, kiwi_error_msg (s->ahead.err));
        kiwi_error_free (&s->ahead.err);
    }
    kiwi_sandbox *box = s->ahead.box;
    s->ahead.box = NULL;
    s->ahead.lent = false;
    if (box != NULL) {
        kiwi_events_observe (s->env->events, KIWI_OBS_SANDBOX, kiwi_sandbox_env_driver (s->env->sandbox_ahead)->name,
                             1);
        /* the session's env takes it over, so the thread's env is free to
         * make the next one while a verify runs in this one */
        kiwi_error_t e = NULL;
        if (kiwi_sandbox_adopt (s->env->sandbox, box, &e) < 0) {
            kiwi_debug ("task %s: %s", s->task->id, kiwi_error_msg (e));
            kiwi_error_free (&e);
            s->ahead.lent = true;
        }
    }
    return box;
}

/* Removes a sandbox made ahead that no verify took. */
static void
ahead_drop (session *s)
{
    if (!s->ahead.running && s->ahead.box == NULL && s->ahead.err == NULL)
        return;
    kiwi_sandbox *box = ahead_take (s);
    kiwi_error_t e = NULL;
    if (box != NULL && kiwi_sandbox_destroy (box, &e) < 0) {
        kiwi_warn ("task %s: removing the verify's sandbox made ahead: %s", s->task->id, kiwi_error_msg (e));
        kiwi_error_free (&e);
    }
}

/* Phase B over `tree` (the workspace, or the clean tree of the published
 * diff): the same image, snapshot, environment and credentials; in the
 * sandbox made ahead when there is one. With `next`, the sandbox of the
 * verify after this one (the deciding verify's when this one passes, else
 * the next round's) is made while this one runs. */
static int
verify (session *s, const char *tree, bool next, kiwi_exec_result *r, kiwi_error_t *err)
{
    kiwi_verify_request req;
    verify_request (s, &req);
    req.workspace = tree;
    req.timeout_ms = remaining_ms (s);
    req.ready = ahead_take (s);
    if (next && !s->ahead.lent)
        ahead_start (s);
    int64_t t0 = kiwi_mono_ms ();
    int rc = kiwi_phase_verify (s->env->sandbox, s->env->phase_cfg, &req, r, NULL, NULL, err);
    kiwi_events_observe (s->env->events, KIWI_OBS_PHASE, "verify", (double) (kiwi_mono_ms () - t0) / 1000.0);
    return rc;
}

/* The deciding verify: the commit checked out afresh plus exactly `diff`
 * (what the result publishes), verified like the workspace. Returns < 0
 * when it could not run. */
static int
verify_published (session *s, const char *diff, kiwi_exec_result *r, kiwi_error_t *err)
{
    char clean[PATH_MAX], tree[PATH_MAX * 2];
    kiwi_repo_clean_dir (s->env->checkout, clean, sizeof clean);
    kiwi_repo_discard (clean);
    if (kiwi_repo_materialise (s->env->checkout, s->env->commit, diff, clean, err) < 0) {
        kiwi_repo_discard (clean);
        return -1;
    }
    /* the repository root inside it, as the workspace is inside the checkout */
    const char *sub = s->env->workspace;
    size_t cl = strlen (s->env->checkout);
    if (strncmp (sub, s->env->checkout, cl) == 0 && (sub[cl] == '/' || sub[cl] == '\0'))
        sub += cl;
    else
        sub = "";
    snprintf (tree, sizeof tree, "%s%s", clean, sub);
    int rc = verify (s, tree, false, r, err); /* in the sandbox made during the round's verify */
    kiwi_repo_discard (clean);
    return rc;
}

/* What the diff did not carry, for the model: a sentence. Caller frees. */
static char *
not_carried_note (session *s)
{
    cleanup_strv kiwi_strv files = KIWI_STRV_INIT;
    kiwi_error_t e = NULL;
    kiwi_repo_not_carried (s->env->checkout, 20, &files, &e);
    kiwi_error_free (&e);
    char *list = NULL;
    if (files.n == 0)
        list = strdup ("(no ignored file found: check file modes, symlinks and files outside the repository root)");
    else {
        size_t len = 1;
        for (size_t i = 0; i < files.n; i++)
            len += strlen (files.v[i]) + 2;
        list = malloc (len);
        if (list != NULL) {
            list[0] = '\0';
            for (size_t i = 0; i < files.n; i++) {
                if (i)
                    strcat (list, ", ");
                strcat (list, files.v[i]);
            }
        }
    }
    char *out = NULL;
    if (asprintf (&out,
                  "the tests passed in the workspace but not on the ref plus your diff (the change that would be "
                  "published): files ignored by .gitignore or otherwise not carried by the diff: %s",
                  list ? list : "")
        < 0)
        out = NULL;
    free (list);
    return out;
}

/* ---------- the round's persistent sandbox ---------- */

static int
box_ready (session *s, kiwi_error_t *err)
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

static void
box_drop (session *s)
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
typedef char *(*tool_fn) (session *s, json_t *args, const char *path, kiwi_error_t *err);

static char *
tool_list_files (session *s, json_t *args, const char *path, kiwi_error_t *err)
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
tool_read_file (session *s, json_t *args, const char *path, kiwi_error_t *err)
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
tool_write_file (session *s, json_t *args, const char *path, kiwi_error_t *err)
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
tool_edit_file (session *s, json_t *args, const char *path, kiwi_error_t *err)
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
tool_search (session *s, json_t *args, const char *path, kiwi_error_t *err)
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
tool_run (session *s, json_t *args, const char *path, kiwi_error_t *err)
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
    int64_t t = remaining_ms (s);
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = t > 600000 || t == 0 ? 600000 : t, .output_cap = OUTPUT_TAIL };
    kiwi_exec_result r;
    if (kiwi_sandbox_exec (s->box, &x, &r, err) < 0) {
        box_drop (s);
        return NULL;
    }
    if (asprintf (&out, "exit status %d%s%s\n%s", r.exit_code, r.timed_out ? " (timed out)" : "",
                  r.sandbox_lost ? " (the sandbox died)" : "", r.output ? r.output : "")
        < 0)
        out = NULL;
    if (r.timed_out || r.sandbox_lost)
        box_drop (s);
    kiwi_exec_result_clear (&r);
    kiwi_strv_addf (&s->actions, "run %.80s", cmd);
    return out;
}

static char *
tool_run_tests (session *s, json_t *args, const char *path, kiwi_error_t *err)
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
} tool_defs[N_TOOLS] = {
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
static void
tools_init (session *s)
{
    for (size_t i = 0; i < N_TOOLS; i++)
        s->tools[i] = (kiwi_model_tool) { tool_defs[i].name, tool_defs[i].description,
                                          schema (tool_defs[i].parameters) };
}

static void
tools_clear (session *s)
{
    for (size_t i = 0; i < N_TOOLS; i++)
        json_decref (s->tools[i].parameters);
}

/* Runs one tool call; returns its content (caller frees) and sets *is_error. */
static char *
run_tool (session *s, const char *name, json_t *args, bool *is_error)
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
    for (size_t i = 0; i < N_TOOLS; i++)
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

/* ---------- model calls ---------- */

static int
call (session *s, const char *system, kiwi_model_conversation *conv, bool with_tools, kiwi_model_response *resp,
      kiwi_error_t *err)
{
    kiwi_model_request req = {
        .model = s->env->model_name,
        .system = system,
        .conversation = conv,
        .tools = with_tools ? s->tools : NULL,
        .n_tools = with_tools ? N_TOOLS : 0,
        .max_tokens = MAX_TOKENS,
    };
    memset (resp, 0, sizeof *resp);
    return kiwi_model_client_call (s->env->model, &req, resp, err);
}

typedef enum { ROUND_VERIFY, ROUND_BUDGET, ROUND_PROVIDER, ROUND_TIME, ROUND_STOPPED } round_end;

static round_end
implement (session *s, kiwi_model_conversation *conv, kiwi_error_t *err)
{
    for (int calls = 0; calls < TOOL_CALLS_PER_ROUND; calls++) {
        if (out_of_time (s))
            return ROUND_TIME;
        if (s->env->stop && *s->env->stop)
            return ROUND_STOPPED;
        kiwi_model_response resp;
        if (call (s, implementer_system, conv, true, &resp, err) < 0)
            return ROUND_PROVIDER;
        bool spent = account (s, &resp);
        size_t ncalls = kiwi_model_message_n_tool_calls (&resp.message);
        /* keep the calls to answer before the message moves */
        kiwi_strv ids = KIWI_STRV_INIT, names = KIWI_STRV_INIT;
        json_t *arglist = json_array ();
        for (size_t i = 0; i < ncalls; i++) {
            const kiwi_model_block *b = kiwi_model_message_tool_call (&resp.message, i);
            kiwi_strv_add (&ids, b->id ? b->id : "");
            kiwi_strv_add (&names, b->name ? b->name : "");
            json_array_append (arglist, b->arguments ? b->arguments : json_object ());
        }
        kiwi_error_t e = NULL;
        kiwi_model_conv_take_message (conv, &resp.message, &e);
        kiwi_error_free (&e);
        kiwi_model_response_clear (&resp);
        for (size_t i = 0; i < ncalls; i++) {
            bool is_error = false;
            char *content = run_tool (s, names.v[i], json_array_get (arglist, i), &is_error);
            kiwi_model_conv_add_tool_result (conv, ids.v[i], names.v[i], content ? content : "", is_error, &e);
            kiwi_error_free (&e);
            free (content);
        }
        kiwi_strv_free (&ids);
        kiwi_strv_free (&names);
        json_decref (arglist);
        if (spent)
            return ROUND_BUDGET;
        if (ncalls == 0 || s->tests_requested)
            return ROUND_VERIFY;
    }
    return ROUND_VERIFY;
}

static int
architect (session *s, int round, const char *map, char **plan, kiwi_error_t *err, bool *spent)
{
    cleanup_model_conv kiwi_model_conversation conv = KIWI_MODEL_CONVERSATION_INIT;
    cleanup_free char *out = tail (s->have_verify ? s->last_verify.output : s->env->step0_output, 12000);
    char *msg = NULL;
    if (asprintf (&msg,
                  "Task: %s\n\nTest command: %s\n\n%s%s%s"
                  "Round %d. The last test run exited with status %d. Its output (tail):\n%s\n\n"
                  "Repository map:\n%s",
                  s->task->goal, s->task->test_command, s->task->ci_context ? "CI failure context:\n" : "",
                  s->task->ci_context ? s->task->ci_context : "", s->task->ci_context ? "\n\n" : "", round,
                  s->have_verify ? s->last_verify.exit_code : s->env->step0_exit, out ? out : "", map)
        < 0)
        return kiwi_error_make (err, ENOMEM, "architect prompt");
    int rc = kiwi_model_conv_add_user_text (&conv, msg, err);
    free (msg);
    if (rc < 0)
        return -1;
    kiwi_model_response resp;
    if (call (s, architect_system, &conv, false, &resp, err) < 0)
        return -1;
    *spent = account (s, &resp);
    *plan = kiwi_model_message_text (&resp.message);
    kiwi_model_response_clear (&resp);
    if (*plan == NULL)
        *plan = strdup ("");
    return 0;
}

static void
finish (session *s, kiwi_result *out, kiwi_result_status st, const char *reason, int rounds)
{
    out->status = st;
    free (out->reason);
    out->reason = reason ? strdup (reason) : NULL;
    out->rounds = (uint32_t) rounds;
    out->tokens_in = s->tokens_in;
    out->tokens_out = s->tokens_out;
    out->cost_usd_micros = (uint64_t) (s->cost * 1e6);
}

static void
emit_round (session *s, int round, const char *plan, const kiwi_exec_result *v, const kiwi_exec_result *pub,
            const char *ended)
{
    json_t *acts = json_array ();
    for (size_t i = 0; i < s->actions.n; i++)
        json_array_append_new (acts, json_string (s->actions.v[i]));
    json_t *p = json_pack ("{s:i,s:s%,s:o,s:I,s:I,s:f,s:s}", "round", round, "plan", plan ? plan : "",
                           plan ? strlen (plan) > 2000 ? (size_t) 2000 : strlen (plan) : (size_t) 0, "actions", acts,
                           "tokens_in", (json_int_t) s->tokens_in, "tokens_out", (json_int_t) s->tokens_out,
                           "cost_usd", s->cost, "ended", ended);
    if (v != NULL) {
        cleanup_free char *t = tail (v->output, 2000);
        json_object_set_new (p, "verify",
                             json_pack ("{s:i,s:b,s:b,s:I,s:s}", "exit_code", v->exit_code, "passed",
                                        v->exit_code == 0 && !v->timed_out, "timed_out", v->timed_out,
                                        "duration_ms", (json_int_t) v->duration_ms, "output_tail", t ? t : ""));
    }
    if (pub != NULL) {
        cleanup_free char *t = tail (pub->output, 2000);
        json_t *pj = json_pack ("{s:i,s:b,s:b,s:I,s:s}", "exit_code", pub->exit_code, "passed",
                                pub->exit_code == 0 && !pub->timed_out, "timed_out", pub->timed_out, "duration_ms",
                                (json_int_t) pub->duration_ms, "output_tail", t ? t : "");
        if (s->not_carried != NULL)
            json_object_set_new (pj, "note", json_string (s->not_carried));
        json_object_set_new (p, "published", pj);
    }
    kiwi_events_emit (s->env->events, KIWI_PHASE_ROUND, "round", (uint32_t) round, p);
    kiwi_events_observe (s->env->events, KIWI_OBS_PHASE, "round",
                         (double) (kiwi_mono_ms () - s->round_started_ms) / 1000.0);
}

int
kiwi_session_run (const kiwi_session_env *env, const kiwi_task *task, kiwi_result *out, kiwi_error_t *err)
{
    session s = { .env = env, .task = task };
    tools_init (&s);
    if (task->limits.has_session_budget_tokens)
        s.budget_tokens = task->limits.session_budget_tokens;
    if (task->limits.has_session_budget_usd_micros)
        s.budget_micros = task->limits.session_budget_usd_micros;
    cleanup_free char *map = repo_map (&s);
    cleanup_model_conv kiwi_model_conversation conv = KIWI_MODEL_CONVERSATION_INIT;
    int max_rounds = (int) task->limits.max_rounds;
    int round = 0;
    int rc = 0;
    /* the task's credential list is not NULL-terminated on the wire */
    for (size_t i = 0; i < task->n_test_credentials; i++)
        if (kiwi_strv_add (&s.creds, task->test_credentials[i]) < 0) {
            rc = kiwi_error_make (err, ENOMEM, "session");
            goto done;
        }
    for (round = 1; round <= max_rounds; round++) {
        s.round_started_ms = kiwi_mono_ms ();
        kiwi_strv_free (&s.actions);
        s.tests_requested = 0;
        if (out_of_time (&s)) {
            finish (&s, out, KIWI_RESULT_TIMED_OUT, "TaskTimeoutSeconds reached during the session", round - 1);
            goto done;
        }
        ahead_start (&s); /* while the models work */
        char *plan = NULL;
        bool spent = false;
        kiwi_error_t e = NULL;
        if (architect (&s, round, map, &plan, &e, &spent) < 0) {
            char reason[1024];
            snprintf (reason, sizeof reason, "model provider failed (architect, round %d): %s", round,
                      kiwi_error_msg (e));
            kiwi_error_free (&e);
            emit_round (&s, round, NULL, NULL, NULL, "provider_error");
            finish (&s, out, KIWI_RESULT_ERROR, reason, round);
            goto done;
        }
        if (spent) {
            emit_round (&s, round, plan, NULL, NULL, "budget_exhausted");
            free (plan);
            finish (&s, out, KIWI_RESULT_BUDGET_EXHAUSTED, "session budget spent", round);
            goto done;
        }
        /* the Implementer continues one conversation across rounds */
        char *msg = NULL;
        if (round == 1) {
            if (asprintf (&msg, "Task: %s\nTest command: %s\n\nThe Architect's plan:\n%s", task->goal,
                          task->test_command, plan)
                < 0)
                msg = NULL;
        } else {
            cleanup_free char *t = tail (s.last_verify.output, 12000);
            if (s.not_carried != NULL) {
                if (asprintf (&msg,
                              "Not fixed yet: %s. Put the change in files the diff carries. The run on the ref plus "
                              "your diff exited with status %d:\n%s\n\nThe Architect's new plan:\n%s",
                              s.not_carried, s.last_verify.exit_code, t ? t : "", plan)
                    < 0)
                    msg = NULL;
            } else if (asprintf (&msg, "The tests still fail (exit status %d):\n%s\n\nThe Architect's new plan:\n%s",
                                 s.last_verify.exit_code, t ? t : "", plan)
                       < 0)
                msg = NULL;
        }
        /* after tool results, the text joins that user turn: turns alternate */
        kiwi_model_message *last = kiwi_model_conv_last (&conv);
        if (last != NULL && last->role == KIWI_MODEL_ROLE_USER)
            kiwi_model_message_add_text (last, msg ? msg : plan, &e);
        else
            kiwi_model_conv_add_user_text (&conv, msg ? msg : plan, &e);
        kiwi_error_free (&e);
        free (msg);
        round_end how = implement (&s, &conv, &e);
        box_drop (&s);
        if (how == ROUND_PROVIDER) {
            char reason[1024];
            snprintf (reason, sizeof reason, "model provider failed (implementer, round %d): %s", round,
                      kiwi_error_msg (e));
            kiwi_error_free (&e);
            emit_round (&s, round, plan, NULL, NULL, "provider_error");
            free (plan);
            finish (&s, out, KIWI_RESULT_ERROR, reason, round);
            goto done;
        }
        if (how == ROUND_STOPPED) {
            free (plan);
            rc = kiwi_error_make (err, 0, "stopped");
            goto done;
        }
        /* the round ends with a verify, whatever else happened */
        if (s.have_verify)
            kiwi_exec_result_clear (&s.last_verify);
        s.have_verify = false;
        if (verify (&s, env->workspace, true, &s.last_verify, &e) < 0) {
            char reason[1024];
            snprintf (reason, sizeof reason, "verify failed to run (round %d): %s", round, kiwi_error_msg (e));
            kiwi_error_free (&e);
            emit_round (&s, round, plan, NULL, NULL, "error");
            free (plan);
            finish (&s, out, KIWI_RESULT_ERROR, reason, round);
            goto done;
        }
        s.have_verify = true;
        bool passed = s.last_verify.exit_code == 0 && !s.last_verify.timed_out;
        free (s.not_carried);
        s.not_carried = NULL;
        if (passed) {
            /* a fix only if the published diff is one: verify the ref plus
             * exactly the diff, in a fresh tree */
            char *diff = NULL;
            kiwi_exec_result pub;
            memset (&pub, 0, sizeof pub);
            int prc = kiwi_repo_diff (env->checkout, env->commit, &diff, &e);
            if (prc == 0)
                prc = verify_published (&s, diff, &pub, &e);
            if (prc < 0) {
                char reason[1024];
                snprintf (reason, sizeof reason, "tests pass but the diff could not be checked: %s",
                          kiwi_error_msg (e));
                kiwi_error_free (&e);
                emit_round (&s, round, plan, &s.last_verify, NULL, "error");
                free (plan);
                free (diff);
                kiwi_exec_result_clear (&pub);
                finish (&s, out, KIWI_RESULT_ERROR, reason, round);
                goto done;
            }
            bool held = pub.exit_code == 0 && !pub.timed_out;
            if (!held)
                s.not_carried = not_carried_note (&s);
            emit_round (&s, round, plan, &s.last_verify, &pub, held ? "passed" : "not_carried");
            free (plan);
            if (held) {
                kiwi_exec_result_clear (&pub);
                finish (&s, out, KIWI_RESULT_FIXED, "tests pass on the ref plus the diff", round);
                out->diff = diff;
                goto done;
            }
            free (diff);
            /* what the next round learns from is the published tree's run */
            kiwi_exec_result_clear (&s.last_verify);
            s.last_verify = pub;
        } else {
            const char *ended = how == ROUND_BUDGET ? "budget_exhausted" : how == ROUND_TIME ? "timed_out" : "failed";
            emit_round (&s, round, plan, &s.last_verify, NULL, ended);
            free (plan);
        }
        if (how == ROUND_BUDGET) {
            finish (&s, out, KIWI_RESULT_BUDGET_EXHAUSTED, "session budget spent; the tests still fail", round);
            goto done;
        }
        if (how == ROUND_TIME || out_of_time (&s)) {
            finish (&s, out, KIWI_RESULT_TIMED_OUT, "TaskTimeoutSeconds reached; the tests still fail", round);
            goto done;
        }
    }
    {
        char reason[256];
        if (s.not_carried != NULL)
            snprintf (reason, sizeof reason,
                      "max-rounds (%d) reached; the tests pass in the workspace but not on the ref plus the diff",
                      max_rounds);
        else
            snprintf (reason, sizeof reason, "max-rounds (%d) reached; the tests still fail", max_rounds);
        finish (&s, out, KIWI_RESULT_MAX_ROUNDS, reason, max_rounds);
    }
done:
    box_drop (&s);
    ahead_drop (&s);
    kiwi_strv_free (&s.creds);
    if (s.have_verify)
        kiwi_exec_result_clear (&s.last_verify);
    kiwi_strv_free (&s.actions);
    free (s.not_carried);
    tools_clear (&s);
    return rc;
}
