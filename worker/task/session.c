/*
 * session.c: the Architect/Implementer session (see session.h).
 *
 * One round: the Architect plans (from the task, the environment, the
 * repository map (session-map.c), the last verify's output and, from round
 * 2, what the rounds before did; with read-only tools), the Implementer
 * works the plan with tools until it stops calling them, calls run_tests,
 * or reaches its per-round tool limit; then the round's verify runs. Both
 * models' tool calls go through one loop (tool_loop). Tokens and cost are checked after every
 * model call.
 *
 * The round's verify and the sandbox made ahead for it are in
 * session-verify.c, the Implementer's tools in session-tools.c; what they
 * share is session-internal.h.
 */
#include "worker/task/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "worker/task/failout.h"
#include "worker/task/repo.h"
#include "worker/task/session-internal.h"
#include "worker/worker-metrics.h"
#include "worker/task/wspath.h"

#define MAX_TOKENS 8192

#define STR_(x) #x
#define STR(x) STR_ (x)

/* what the Architect's message carries from the rounds before (bytes) */
#define PLAN_CUT 2000         /* each earlier plan */
#define PLANS_KEPT 3          /* the last plans shown */
#define DIFF_CUT 8000         /* the workspace's diff */
#define SAID_CUT 2000         /* the Implementer's last message */
#define CALLS_SHOWN 60        /* the Implementer's tool calls listed */
#define OUTPUT_CUT 12000      /* the last run's output */

static const char architect_system[]
    = "You are the Architect in Kiwi, a system that fixes code so that a repository's tests pass. You read the "
      "task, the environment, the repository map and the failing test output, and you write a short, concrete plan "
      "for the Implementer: which files to look at, what the cause most likely is, and what to change, citing "
      "real paths and line numbers. You have read-only tools (read_file, search, find_files) to check the code "
      "before you plan: at most " STR (KIWI__SESSION_ARCHITECT_CALLS) " tool calls a round; calls past that are "
      "not run, and you then write the plan from what you have. You do not edit files or run commands yourself: "
      "the Implementer does. Your plan is your answer without a tool call; keep it under 300 words. The task has "
      "a fixed number of rounds: each message says which round this is. From round 2 on, your message also "
      "carries your earlier plans, what the Implementer did and said, the diff of the workspace so far and the "
      "last round's failing output: do not propose a plan that already failed; say what was wrong with it.";


/* How a round works, as both the Implementer's prompts say it; `next` is
 * what the next round brings. */
#define ROUND_RULES(next)                                                                                         \
    "How a round works: you may make at most " STR (KIWI__SESSION_CALLS_PER_ROUND) " tool calls in a round, "     \
    "and every batch of tool results ends with a status line: the round (round k of N), the tool calls left "     \
    "in it, and the budget and time left. The round ends when you call run_tests, when you answer without "       \
    "calling a tool, or when its tool calls are used up; each way, the test command then runs on the "           \
    "workspace in a fresh sandbox. If the tests pass there and on the task's commit plus the diff of your "       \
    "changes, the task is fixed and ends. If they fail and rounds are left, the next round starts: " next ". "    \
    "After the last round, the task ends unfixed. The sandbox of `run` lasts for one round. If the task cannot "  \
    "be done (the environment is broken, the test itself is wrong, or you find no fix), call give_up with the "   \
    "kind and the reason rather than spend the remaining rounds."

static const char implementer_system[]
    = "You are the Implementer in Kiwi. Follow the Architect's plan using the tools. Paths are relative to the "
      "repository root. Make the smallest change that makes the tests pass; do not weaken or delete tests.\n"
      ROUND_RULES ("the Architect writes a new plan, and you get the failing output and that plan in this "
                   "conversation");

/* One agent (KIWI_SESSION_AGENTS=one): no Architect; the one model reads,
 * plans and edits, the same tools, the same rounds. */
static const char solo_system[]
    = "You are the engineer in Kiwi, a system that fixes code so that a repository's tests pass. Read the failing "
      "output and the code, find the cause, and fix it with the tools. Paths are relative to the repository root. "
      "Make the smallest change that makes the tests pass; do not weaken or delete tests.\n"
      ROUND_RULES ("you get the failing output in this conversation");

int64_t
kiwi__session_remaining_ms (const kiwi__session *s)
{
    if (s->env->deadline_ms <= 0)
        return 0;
    int64_t left = s->env->deadline_ms - kiwi_mono_ms ();
    return left > 1 ? left : 1;
}

static bool
out_of_time (const kiwi__session *s)
{
    return s->env->deadline_ms > 0 && kiwi_mono_ms () >= s->env->deadline_ms;
}

/* Accounts one model call; true when the budget is spent. */
static bool
account (kiwi__session *s, const kiwi_model_response *r)
{
    s->tokens_in += r->usage.input_tokens;
    s->tokens_out += r->usage.output_tokens;
    s->cache_write += r->usage.cache_write_tokens;
    s->cache_read += r->usage.cache_read_tokens;
    s->cost += kiwi_model_client_cost (s->env->model, r->usage);
    if (s->budget_tokens && s->tokens_in + s->tokens_out >= s->budget_tokens)
        return true;
    if (s->budget_micros && (uint64_t) (s->cost * 1e6) >= s->budget_micros)
        return true;
    return false;
}

/* The head of `text`, at most `max` bytes, with a marker when cut. Caller
 * frees. */
static char *
head (const char *text, size_t max)
{
    size_t l = text ? strlen (text) : 0;
    char *out = NULL;
    if (l <= max)
        return strdup (text ? text : "");
    if (asprintf (&out, "%.*s\n[... cut: %zu bytes more]", (int) max, text, l - max) < 0)
        return NULL;
    return out;
}

/* The tail of `text` cleaned of escape sequences, at most `max` bytes,
 * with a note if cut. Caller frees. */
static char *
tail (const char *text, size_t max)
{
    size_t cut = 0;
    cleanup_free char *last = kiwi_failout_clean_tail (text, max, &cut);
    char *out = NULL;
    if (last == NULL || cut == 0)
        return steal_pointer (&last);
    if (asprintf (&out, "[... %zu bytes cut ...]\n%s", cut, last) < 0)
        return NULL;
    return out;
}

/* The environment both models are told of in the first message of each
 * round. Caller frees. */
static char *
environment (const kiwi__session *s)
{
    const kiwi_session_env *e = s->env;
    const kiwi_sandbox_limits *l = &e->limits;
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_buf_appendf (&b, NULL, "Environment:\n- image: %s\n", e->image ? e->image : "(unknown)");
    if (e->runtime && *e->runtime)
        kiwi_buf_appendf (&b, NULL, "- runtime: %s%s%s\n", e->runtime,
                          e->runtime_version && *e->runtime_version ? ", version " : "",
                          e->runtime_version && *e->runtime_version ? e->runtime_version : "");
    kiwi_buf_appendf (&b, NULL, "- install (Phase A): %s%s%s\n", e->install_command ? "`" : "",
                      e->install_command ? e->install_command : "(not told)", e->install_command ? "`" : "");
    if (e->install_outcome)
        kiwi_buf_appendf (&b, NULL, "- install outcome: %s\n", e->install_outcome);
    kiwi_buf_appendf (&b, NULL, "- test command: %s\n- sandbox limits:", s->task->test_command);
    if (l->cpus > 0)
        kiwi_buf_appendf (&b, NULL, " %g CPUs,", l->cpus);
    if (l->memory_mb > 0)
        kiwi_buf_appendf (&b, NULL, " %lld MiB of memory,", (long long) l->memory_mb);
    kiwi_buf_appendf (&b, NULL, " %d s a command", KIWI__SESSION_RUN_TIMEOUT_S);
    if (e->deadline_ms > 0)
        kiwi_buf_appendf (&b, NULL, ", %lld s left for the task", (long long) (kiwi__session_remaining_ms (s) / 1000));
    /* what Phase A did, not what it might have done */
    const char *st = e->install_status;
    kiwi_buf_append_str (&b,
                         st == NULL || strcmp (st, "ok") == 0
                             ? "\n- no network in this sandbox; dependencies are installed.\n"
                         : strcmp (st, "skipped") == 0
                             ? "\n- no network in this sandbox; nothing was installed: the repository declares no "
                               "dependencies.\n"
                             : "\n- no network in this sandbox; the install did not complete, so dependencies may be "
                               "missing.\n",
                         NULL);
    return kiwi_buf_steal (&b, NULL);
}

/* ---------- model calls ---------- */

/* Who calls the model, with which tools and how many calls a round. */
typedef struct role {
    const char *name;       /* "architect", "implementer" */
    const char *system;
    const kiwi_model_tool *tools;
    size_t n_tools;
    int calls;              /* tool calls a round */
    bool read_only;         /* only the read-only tools run */
} role;

static int
call (kiwi__session *s, const role *r, kiwi_model_conversation *conv, kiwi_model_response *resp, kiwi_error_t *err)
{
    kiwi_model_request req = {
        .model = s->env->model_name,
        .system = r->system,
        .conversation = conv,
        .tools = r->tools,
        .n_tools = r->n_tools,
        .max_tokens = MAX_TOKENS,
    };
    memset (resp, 0, sizeof *resp);
    return kiwi_model_client_call (s->env->model, &req, resp, err);
}

typedef enum { ROUND_VERIFY, ROUND_BUDGET, ROUND_PROVIDER, ROUND_TIME, ROUND_STOPPED, ROUND_GAVE_UP } round_end;

/* The line that ends a batch of tool results: where the round and the
 * task stand. Caller frees. */
static char *
status_line (const kiwi__session *s, int round, int max_rounds, int calls_left)
{
    char budget[96] = "", time_left[64] = "";
    if (s->budget_tokens) {
        uint64_t used = s->tokens_in + s->tokens_out;
        snprintf (budget, sizeof budget, "; tokens left: %llu",
                  (unsigned long long) (used < s->budget_tokens ? s->budget_tokens - used : 0));
    }
    if (s->budget_micros) {
        uint64_t used = (uint64_t) (s->cost * 1e6);
        snprintf (budget + strlen (budget), sizeof budget - strlen (budget), "; budget left: $%.2f",
                  (double) (used < s->budget_micros ? s->budget_micros - used : 0) / 1e6);
    }
    if (s->env->deadline_ms > 0)
        snprintf (time_left, sizeof time_left, "; time left: %lld s",
                  (long long) (kiwi__session_remaining_ms (s) / 1000));
    char *out = NULL;
    if (asprintf (&out, "\n[round %d of %d; tool calls left this round: %d%s%s]", round, max_rounds, calls_left,
                  budget, time_left)
        < 0)
        out = NULL;
    return out;
}

/* One model's turn in a round, tools and all: calls the model until it
 * answers without a tool call, calls run_tests or give_up, or has made its
 * round's tool calls. Calls past the count are answered "not run"; the
 * Architect then gets one more call to write its plan. *said gets the
 * text of the model's last answer that had one (caller frees; may stay
 * NULL). */
static round_end
tool_loop (kiwi__session *s, const role *r, kiwi_model_conversation *conv, int round, int max_rounds, char **said,
           kiwi_error_t *err)
{
    int used = 0;
    int after_cap = r->read_only ? 1 : 0; /* model calls allowed once the count is used up */
    for (;;) {
        if (used >= r->calls && after_cap-- <= 0)
            return ROUND_VERIFY;
        if (out_of_time (s))
            return ROUND_TIME;
        if (s->env->stop && *s->env->stop)
            return ROUND_STOPPED;
        kiwi_model_response resp;
        if (call (s, r, conv, &resp, err) < 0)
            return ROUND_PROVIDER;
        bool spent = account (s, &resp);
        char *text = kiwi_model_message_text (&resp.message);
        if (text != NULL && *text != '\0') {
            free (*said);
            *said = text;
        } else
            free (text);
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
        /* every call gets its answer (the wire wants one per call), but
         * only those within the round's count run, and none after one that
         * ends the round or the task */
        for (size_t i = 0; i < ncalls; i++) {
            bool is_error = true;
            char *content = NULL;
            if (s->gave_up || s->tests_requested)
                content = strdup ("not run: an earlier call in this answer ended the round");
            else if (used >= r->calls)
                content = strdup (r->read_only
                                      ? "not run: your tool calls of this round are used up; write the plan now"
                                      : "not run: this round's tool calls are used up; the tests run now");
            else {
                content = kiwi__session_run_tool (s, names.v[i], json_array_get (arglist, i), r->read_only,
                                                  &is_error);
                used++;
            }
            if (i + 1 == ncalls) {
                cleanup_free char *st = status_line (s, round, max_rounds, r->calls - used);
                char *joined = NULL;
                if (st != NULL && asprintf (&joined, "%s%s", content ? content : "", st) >= 0) {
                    free (content);
                    content = joined;
                }
            }
            kiwi_model_conv_add_tool_result (conv, ids.v[i], names.v[i], content ? content : "", is_error, &e);
            kiwi_error_free (&e);
            free (content);
        }
        kiwi_strv_free (&ids);
        kiwi_strv_free (&names);
        json_decref (arglist);
        if (s->gave_up)
            return ROUND_GAVE_UP;
        if (spent)
            return ROUND_BUDGET;
        if (ncalls == 0 || s->tests_requested)
            return ROUND_VERIFY;
    }
}

static round_end
implement (kiwi__session *s, kiwi_model_conversation *conv, int round, int max_rounds, kiwi_error_t *err)
{
    role r = { "implementer", s->env->one_agent ? solo_system : implementer_system, s->tools, KIWI__SESSION_N_TOOLS,
               KIWI__SESSION_CALLS_PER_ROUND, false };
    free (s->impl_said);
    s->impl_said = NULL;
    size_t first = s->actions.n;
    round_end how = tool_loop (s, &r, conv, round, max_rounds, &s->impl_said, err);
    /* what the next round's Architect is told the Implementer did */
    kiwi_strv_free (&s->impl_calls);
    for (size_t i = first; i < s->actions.n; i++)
        kiwi_strv_add (&s->impl_calls, s->actions.v[i]);
    return how;
}

/* What the Architect learns from the rounds before this one: its plans,
 * what the Implementer did and said, the workspace's diff. Each part cut
 * at its bound, with a marker. */
static void
memory (kiwi__session *s, int round, kiwi_buf *b)
{
    size_t from = s->plans.n > PLANS_KEPT ? s->plans.n - PLANS_KEPT : 0;
    kiwi_buf_appendf (b, NULL, "Your earlier plans (the last %d; each at most %d bytes%s):\n", PLANS_KEPT, PLAN_CUT,
                      from ? "; older ones left out" : "");
    for (size_t i = from; i < s->plans.n; i++) {
        cleanup_free char *p = head (s->plans.v[i], PLAN_CUT);
        kiwi_buf_appendf (b, NULL, "--- plan of round %zu ---\n%s\n", i + 1, p ? p : "");
    }
    kiwi_buf_appendf (b, NULL, "\nWhat the Implementer did in round %d (its tool calls, at most %d):\n", round - 1,
                      CALLS_SHOWN);
    for (size_t i = 0; i < s->impl_calls.n && i < CALLS_SHOWN; i++)
        kiwi_buf_appendf (b, NULL, "- %s\n", s->impl_calls.v[i]);
    if (s->impl_calls.n > CALLS_SHOWN)
        kiwi_buf_appendf (b, NULL, "[... cut: %zu calls more]\n", s->impl_calls.n - CALLS_SHOWN);
    if (s->impl_calls.n == 0)
        kiwi_buf_append_str (b, "(no tool call)\n", NULL);
    cleanup_free char *said = head (s->impl_said ? s->impl_said : "(nothing)", SAID_CUT);
    kiwi_buf_appendf (b, NULL, "\nThe Implementer's last message in round %d (at most %d bytes):\n%s\n", round - 1,
                      SAID_CUT, said ? said : "");
    char *diff = NULL;
    kiwi_error_t e = NULL;
    if (kiwi_repo_diff (s->env->checkout, s->env->commit, &diff, &e) < 0) {
        kiwi_buf_appendf (b, NULL, "\nThe workspace's diff could not be made: %s\n", kiwi_error_msg (e));
        kiwi_error_free (&e);
        return;
    }
    cleanup_free char *d = head (diff, DIFF_CUT);
    free (diff);
    kiwi_buf_appendf (b, NULL,
                      "\nThe workspace's changes so far (git diff against the task's commit, at most %d bytes):\n%s\n",
                      DIFF_CUT, d && *d ? d : "(none)\n");
}

static int
architect (kiwi__session *s, int round, char **plan, kiwi_error_t *err, bool *spent)
{
    cleanup_model_conv kiwi_model_conversation conv = KIWI_MODEL_CONVERSATION_INIT;
    const char *last = s->have_verify ? s->last_verify.output : s->env->step0_output;
    cleanup_free char *out = kiwi_failout_fit (last, OUTPUT_CUT);
    cleanup_free char *env = environment (s);
    cleanup_free char *map = kiwi__session_map (s->env->workspace, last, KIWI__SESSION_MAP_BUDGET,
                                                KIWI__SESSION_MAP_SYMBOLS);
    kiwi_buf mem = KIWI_BUF_INIT;
    if (round > 1)
        memory (s, round, &mem);
    char *msg = NULL;
    if (asprintf (&msg,
                  "Round %d of %d.\nTask: %s\n\n%s\n%s%s%s%s%s"
                  "The last test run exited with status %d. Its output (at most %d bytes: its failures, then "
                  "its end):\n%s\n\n"
                  "Repository map (at most %d bytes):\n%s",
                  round, (int) s->task->limits.max_rounds, s->task->goal, env ? env : "",
                  s->task->ci_context ? "CI failure context:\n" : "", s->task->ci_context ? s->task->ci_context : "",
                  s->task->ci_context ? "\n\n" : "", kiwi_buf_str (&mem), mem.len ? "\n" : "",
                  s->have_verify ? s->last_verify.exit_code : s->env->step0_exit, OUTPUT_CUT, out ? out : "",
                  KIWI__SESSION_MAP_BUDGET, map ? map : "")
        < 0)
        msg = NULL;
    kiwi_buf_free (&mem);
    if (msg == NULL)
        return kiwi_error_make (err, ENOMEM, "architect prompt");
    int rc = kiwi_model_conv_add_user_text (&conv, msg, err);
    free (msg);
    if (rc < 0)
        return -1;
    role r = { "architect", architect_system, s->architect_tools, KIWI__SESSION_N_ARCHITECT_TOOLS,
               KIWI__SESSION_ARCHITECT_CALLS, true };
    size_t first = s->actions.n;
    *plan = NULL;
    round_end how = tool_loop (s, &r, &conv, round, (int) s->task->limits.max_rounds, plan, err);
    /* the event tells the Architect's calls apart */
    for (size_t i = first; i < s->actions.n; i++) {
        char *a = NULL;
        if (asprintf (&a, "architect: %s", s->actions.v[i]) >= 0) {
            free (s->actions.v[i]);
            s->actions.v[i] = a;
        }
    }
    if (how == ROUND_PROVIDER)
        return -1;
    *spent = how == ROUND_BUDGET;
    if (*plan == NULL)
        *plan = strdup ("");
    kiwi_strv_add (&s->plans, *plan);
    return 0;
}

static void
finish (kiwi__session *s, kiwi_result *out, kiwi_result_status st, const char *reason, int rounds)
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
emit_round (kiwi__session *s, int round, const char *plan, const kiwi_exec_result *v, const kiwi_exec_result *pub,
            const char *ended)
{
    json_t *acts = json_array ();
    for (size_t i = 0; i < s->actions.n; i++)
        json_array_append_new (acts, json_string (s->actions.v[i]));
    json_t *p = json_pack ("{s:i,s:s%,s:o,s:I,s:I,s:I,s:I,s:f,s:s}", "round", round, "plan", plan ? plan : "",
                           plan ? strlen (plan) > 2000 ? (size_t) 2000 : strlen (plan) : (size_t) 0, "actions", acts,
                           "tokens_in", (json_int_t) s->tokens_in, "tokens_out", (json_int_t) s->tokens_out,
                           "cache_write_tokens", (json_int_t) s->cache_write, "cache_read_tokens",
                           (json_int_t) s->cache_read, "cost_usd", s->cost, "ended", ended);
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
    kiwi_events_emit (s->env->events, KIWI_STAGE_ROUND, "round", (uint32_t) round, p);
    kiwi_events_observe (s->env->events, KIWI_OBS_PHASE, "round",
                         (double) (kiwi_mono_ms () - s->round_started_ms) / 1000.0);
}

int
kiwi_session_run (const kiwi_session_env *env, const kiwi_task *task, kiwi_result *out, kiwi_error_t *err)
{
    kiwi__session s = { .env = env, .task = task };
    kiwi__session_tools_init (&s);
    if (task->limits.has_session_budget_tokens)
        s.budget_tokens = task->limits.session_budget_tokens;
    if (task->limits.has_session_budget_usd_micros)
        s.budget_micros = task->limits.session_budget_usd_micros;
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
        kiwi__session_ahead_start (&s); /* while the models work */
        char *plan = NULL;
        bool spent = false;
        kiwi_error_t e = NULL;
        if (!env->one_agent && architect (&s, round, &plan, &e, &spent) < 0) {
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
        /* the Architect's plan closes the message; one agent plans itself */
        const char *plan_head = plan == NULL   ? ""
                                : round == 1 ? "\n\nThe Architect's plan:\n"
                                             : "\n\nThe Architect's new plan:\n";
        const char *plan_text = plan ? plan : "";
        if (round == 1) {
            cleanup_free char *t = kiwi_failout_fit (env->step0_output, 8000);
            if (asprintf (&msg,
                          "Round 1 of %d.\nTask: %s\nTest command: %s\n\nThe test command failed before any "
                          "change (exit status %d). Its output (tail):\n%s%s%s",
                          max_rounds, task->goal, task->test_command, env->step0_exit, t ? t : "", plan_head,
                          plan_text)
                < 0)
                msg = NULL;
        } else {
            cleanup_free char *t = kiwi_failout_fit (s.last_verify.output, 12000);
            if (s.not_carried != NULL) {
                if (asprintf (&msg,
                              "Round %d of %d. Not fixed yet: %s. Put the change in files the diff carries. The run "
                              "on the ref plus your diff exited with status %d:\n%s%s%s",
                              round, max_rounds, s.not_carried, s.last_verify.exit_code, t ? t : "", plan_head,
                              plan_text)
                    < 0)
                    msg = NULL;
            } else if (asprintf (&msg, "Round %d of %d. The tests still fail (exit status %d):\n%s%s%s", round,
                                 max_rounds, s.last_verify.exit_code, t ? t : "", plan_head, plan_text)
                       < 0)
                msg = NULL;
        }
        /* the environment first, every round, and the map last: made afresh
         * (it follows the workspace and the last failing output) */
        cleanup_free char *envb = environment (&s);
        cleanup_free char *map = kiwi__session_map (env->workspace, round == 1 ? env->step0_output : s.last_verify.output,
                                                    KIWI__SESSION_IMPL_MAP_BUDGET, KIWI__SESSION_MAP_SYMBOLS);
        if (msg != NULL && envb != NULL) {
            char *m = NULL;
            if (asprintf (&m, "%s\n%s\n\nRepository map (at most %d bytes):\n%s", envb, msg,
                          KIWI__SESSION_IMPL_MAP_BUDGET, map ? map : "(none)")
                >= 0) {
                free (msg);
                msg = m;
            }
        }
        /* after tool results, the text joins that user turn: turns alternate */
        kiwi_model_message *last = kiwi_model_conv_last (&conv);
        if (last != NULL && last->role == KIWI_MODEL_ROLE_USER)
            kiwi_model_message_add_text (last, msg ? msg : plan ? plan : "(no message)", &e);
        else
            kiwi_model_conv_add_user_text (&conv, msg ? msg : plan ? plan : "(no message)", &e);
        kiwi_error_free (&e);
        free (msg);
        round_end how = implement (&s, &conv, round, max_rounds, &e);
        kiwi__session_box_drop (&s);
        if (how == ROUND_GAVE_UP) {
            /* the model's word ends the task: no verify, no more rounds */
            char reason[KIWI__SESSION_GIVE_UP_MAX + 128];
            snprintf (reason, sizeof reason, "the model gave up in round %d (%s)", round,
                      s.give_up_reason ? s.give_up_reason : "");
            emit_round (&s, round, plan, NULL, NULL, "gave_up");
            free (plan);
            finish (&s, out, KIWI_RESULT_GAVE_UP, reason, round);
            goto done;
        }
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
        if (kiwi__session_verify (&s, env->workspace, true, &s.last_verify, &e) < 0) {
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
                prc = kiwi__session_verify_published (&s, diff, &pub, &e);
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
                s.not_carried = kiwi__session_not_carried_note (&s);
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
    kiwi__session_box_drop (&s);
    kiwi__session_ahead_drop (&s);
    kiwi_strv_free (&s.creds);
    if (s.have_verify)
        kiwi_exec_result_clear (&s.last_verify);
    kiwi_strv_free (&s.actions);
    kiwi_strv_free (&s.plans);
    kiwi_strv_free (&s.impl_calls);
    free (s.impl_said);
    free (s.not_carried);
    kiwi__session_tools_clear (&s);
    return rc;
}
