/*
 * test_session.c: the Architect/Implementer session end to end through the
 * scripted provider (real libcurl, the Anthropic wire format) and the real
 * Docker sandbox: a fix in one round, a fix that needs two, max-rounds, the
 * session budget, a provider that keeps failing, and a model that tries to
 * write outside the workspace, and a model that gives up. Each ends with
 * the right status and events.
 * Every session has a second env, as the worker gives it, so each round's
 * verify sandbox is made ahead; test_verify_made_ahead checks from outside
 * (dockerd) that it exists while the Architect is still thinking and that
 * the round's verify ran in it, and the deciding verify in the one made
 * while the round's verify ran. test_evalset_replays replays sessions
 * played by hand from the model's seat on bench/evalset's bugs.
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
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "need.h"
#include "scripted-provider.h"
#include "worker/task/repo.h"
#include "worker/task/session.h"

extern char **environ;

static kiwi_scripted_provider sp;
static kiwi_scripted_provider *server = &sp; /* the one sessions talk to */
static kiwi_sandbox_env *sbenv, *sbenv_ahead;
/* this process's worker id: another run of this test (the other build
 * stage, a second checkout) has its own sandboxes, never counted here */
static char worker_id[64];
static const char *session_command = "npm test";
static const char *session_provider = "anthropic", *session_model = "claude-sonnet-4-5-20250929";
static char outside[64];
static const char *const default_step0 = "AssertionError [ERR_ASSERTION]: sum(1, 2) should be 3";
static const char *session_step0 = default_step0;
/* the repository a session works on (a folder of the source tree), its goal
 * and image: js-sum's unless a test says otherwise */
static const char *session_source = "tests/fixtures/examples/js-sum";
static const char *session_goal = "Make the tests pass.";

static int
setup (void **state)
{
    const char *dirs[] = { KIWI_SOURCE_DIR "/tests/fixtures/sessions", NULL };
    kiwi_error_t err = NULL;
    if (kiwi_scripted_provider_start (&sp, dirs, &err) < 0) {
        fprintf (stderr, "scripted provider: %s\n", kiwi_error_msg (err));
        return -1;
    }
    const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find ("docker", &err);
    snprintf (worker_id, sizeof worker_id, "itest-session-%d", (int) getpid ());
    kiwi_sandbox_config cfg = {
        .docker_socket = kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock"),
        .state_dir = kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"),
        .worker_id = worker_id,
    };
    if (kiwi_sandbox_env_open (drv, &cfg, &sbenv, &err) < 0 || kiwi_sandbox_env_open (drv, &cfg, &sbenv_ahead, &err) < 0) {
        fprintf (stderr, "sandbox: %s\n", kiwi_error_msg (err));
        kiwi_sandbox_env_close (sbenv);
        sbenv = sbenv_ahead = NULL; /* each test says so with KIWI_NEED */
        kiwi_error_free (&err);
    }
    snprintf (outside, sizeof outside, "/tmp/kiwi-session-outside-XXXXXX");
    if (mkdtemp (outside) == NULL)
        return -1;
    return 0;
}

static int
teardown (void **state)
{
    kiwi_scripted_provider_stop (&sp);
    kiwi_sandbox_env_close (sbenv);
    kiwi_sandbox_env_close (sbenv_ahead);
    char cmd[128];
    snprintf (cmd, sizeof cmd, "rm -rf %s", outside);
    return system (cmd) == 0 ? 0 : -1;
}

/* A git repository made from session_source (the js-sum example unless a
 * test says otherwise) in `src`, checked out the worker's way (repo.h) into
 * `ws` under the state directory `state`; returns the commit. */
static char *
make_repo (char *src, char *state, char *ws, size_t cap, const char *extra)
{
    snprintf (src, cap, "/tmp/kiwi-session-src-XXXXXX");
    snprintf (state, cap, "/tmp/kiwi-session-state-XXXXXX");
    assert_non_null (mkdtemp (src));
    assert_non_null (mkdtemp (state));
    char cmd[1024];
    snprintf (cmd, sizeof cmd,
              "cp -a %s/%s/. %s/ && ln -s %s %s/evil && cd %s && { %s; } && git init -q && "
              "git -c user.email=t@kiwi -c user.name=t add -A && "
              "git -c user.email=t@kiwi -c user.name=t commit -q -m init && mkdir %s/work",
              KIWI_SOURCE_DIR, session_source, src, outside, src, src, extra ? extra : ":", state);
    assert_int_equal (kiwi_test_sh (cmd, NULL, 0), 0);
    snprintf (ws, cap, "%s/work/ws", state);
    kiwi_repo_opts ro = { .state_dir = state, .timeout_ms = 60000 };
    kiwi_error_t err = NULL;
    char *commit = NULL;
    if (kiwi_repo_checkout (&ro, src, "HEAD", ws, &commit, &err) < 0)
        fail_msg ("checkout: %s", kiwi_error_msg (err));
    return commit;
}

/* Fails the test when a request of `script` (NULL: any) broke the script
 * or the wire format. */
static void
no_violations (kiwi_scripted_provider *srv, const char *script)
{
    char *first = NULL;
    size_t bad = kiwi_scripted_provider_violations (srv, script, &first);
    if (bad != 0)
        fail_msg ("%s: %zu requests broke the script: %s", script ? script : "seat", bad, first ? first : "");
    free (first);
}

typedef struct {
    json_t *events; /* array of {phase, kind, round, payload} */
} collected;

static int
collect_progress (kiwi_events *ev, const kiwi_progress *p)
{
    collected *c = ev->userdata;
    char *json = NULL;
    kiwi_error_t err = NULL;
    json_t *payload = NULL;
    if (p->payload && kiwi_msgpack_to_json (p->payload, p->payload_len, &json, &err) == 0) {
        payload = json_loads (json, 0, NULL);
        free (json);
    }
    kiwi_error_free (&err);
    json_array_append_new (c->events, json_pack ("{s:s,s:s,s:i,s:o*}", "phase", kiwi_stage_name (p->stage), "kind",
                                                 p->kind, "round", (int) p->round, "payload", payload));
    return 0;
}

static int
collect_result (kiwi_events *ev, const kiwi_result *r)
{
    return 0;
}

typedef struct {
    kiwi_result result;
    json_t *events;
    char src[128], state[128], repo[160];
    char *commit;
} outcome;

/* KIWI_SESSION_AGENTS=one for the next session */
static bool session_one_agent;
/* how its Phase A ended (kiwi_session_env.install_status) */
static const char *session_install_status = "ok";

/* The session for `script` on the js-sum repository (plus `extra`, a shell
 * fragment run in it before its commit). */
static void
run_session_on (const char *script, const char *extra, uint32_t max_rounds, uint64_t budget_tokens, outcome *o)
{
    KIWI_NEED (sbenv != NULL, "dockerd for the session sandbox");
    o->commit = make_repo (o->src, o->state, o->repo, sizeof o->src, extra);
    kiwi_error_t err = NULL;
    const kiwi_model_provider *prov = kiwi_model_provider_find (session_provider, &err);
    char *base = kiwi_scripted_provider_base_url (server, session_provider, script);
    kiwi_model_config mc = { .base_url = base, .api_key = kiwi_scripted_provider_key (session_provider),
                             .max_attempts = 3, .backoff_base_ms = 20, .backoff_max_ms = 100,
                             .request_timeout_ms = 20000, .price_input_per_mtok = 3.0, .price_output_per_mtok = 15.0 };
    kiwi_model_client *model = kiwi_model_client_open (prov, &mc, &err);
    assert_non_null (model);
    kiwi_phase_config pc = { .host_env = (const char *const *) environ };
    collected c = { .events = json_array () };
    kiwi_events ev = { .progress = collect_progress, .result = collect_result, .task_id = "session-task",
                       .worker_id = worker_id, .userdata = &c };
    kiwi_task task;
    kiwi_task_init (&task);
    task.id = strdup ("session-task");
    task.repo.url = strdup ("file:///unused");
    task.repo.ref = strdup ("main");
    task.test_command = strdup (session_command);
    task.goal = strdup (session_goal);
    task.limits.max_rounds = max_rounds;
    if (budget_tokens) {
        task.limits.has_session_budget_tokens = true;
        task.limits.session_budget_tokens = budget_tokens;
    }
    kiwi_session_env env = {
        .sandbox = sbenv,
        .sandbox_ahead = sbenv_ahead,
        .phase_cfg = &pc,
        .image = kiwi_test_env_or ("KIWI_TEST_NODE_IMAGE", "kiwi/node:20"),
        .workspace = o->repo,
        .checkout = o->repo,
        .commit = o->commit,
        .step0_output = session_step0,
        .step0_exit = 1,
        .runtime = "node",
        .runtime_version = ">=18, from package.json",
        .install_command = "npm ci",
        .install_outcome = "ok in 3.2 s",
        .install_status = session_install_status,
        .model = model,
        .model_name = session_model,
        .one_agent = session_one_agent,
        .deadline_ms = kiwi_mono_ms () + 600000,
        .events = &ev,
    };
    kiwi_result_init (&o->result);
    if (kiwi_session_run (&env, &task, &o->result, &err) < 0)
        fail_msg ("session: %s", kiwi_error_msg (err));
    o->events = c.events;
    kiwi_task_clear (&task);
    kiwi_model_client_close (model);
    free (base);
}

static void
run_session (const char *script, uint32_t max_rounds, uint64_t budget_tokens, outcome *o)
{
    run_session_on (script, NULL, max_rounds, budget_tokens, o);
}

static void
outcome_clear (outcome *o)
{
    char cmd[512];
    snprintf (cmd, sizeof cmd, "rm -rf %s %s", o->src, o->state);
    assert_int_equal (system (cmd), 0);
    kiwi_result_clear (&o->result);
    json_decref (o->events);
    free (o->commit);
}

static size_t
count_rounds (json_t *events)
{
    size_t n = 0, i;
    json_t *e;
    json_array_foreach (events, i, e) if (strcmp (json_string_value (json_object_get (e, "kind")), "round") == 0) n++;
    return n;
}

static json_t *
round_event (json_t *events, int round)
{
    size_t i;
    json_t *e;
    json_array_foreach (events, i, e)
    {
        if (strcmp (json_string_value (json_object_get (e, "kind")), "round") == 0
            && json_integer_value (json_object_get (e, "round")) == round)
            return json_object_get (e, "payload");
    }
    return NULL;
}

/* The sandboxes dockerd holds for the session's task, of `phase` ("" any). */
static int
task_containers (const char *phase)
{
    char cmd[512], out[4096] = "";
    snprintf (cmd, sizeof cmd,
              "docker -H 'unix://%s' ps -aq --filter label=org.kiwi.task=session-task "
              "--filter label=org.kiwi.worker=%s%s%s | wc -l",
              kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock"), worker_id,
              *phase ? " --filter label=org.kiwi.phase=" : "", phase);
    assert_int_equal (kiwi_test_sh (cmd, out, sizeof out), 0);
    return atoi (out);
}

static void
test_fixed_in_one_round (void **state)
{
    outcome o;
    run_session ("js-sum-one-round", 4, 0, &o);
    if (o.result.status != KIWI_RESULT_FIXED)
        fail_msg ("status %s: %s", kiwi_result_status_name (o.result.status), o.result.reason);
    assert_int_equal (o.result.rounds, 1);
    assert_non_null (o.result.diff);
    assert_non_null (strstr (o.result.diff, "-  return a - b;"));
    assert_non_null (strstr (o.result.diff, "+  return a + b;"));
    assert_int_equal (count_rounds (o.events), 1);
    json_t *r1 = round_event (o.events, 1);
    assert_true (json_is_true (json_object_get (json_object_get (r1, "verify"), "passed")));
    assert_string_equal (json_string_value (json_object_get (r1, "ended")), "passed");
    assert_true (json_integer_value (json_object_get (r1, "tokens_in")) == 1200);
    assert_true (o.result.cost_usd_micros > 0);
    assert_int_equal (kiwi_scripted_provider_requests (&sp, "js-sum-one-round"), 3);
    /* the deciding verify ran on the ref plus the diff, and the diff applies
     * to a fresh clone */
    json_t *pub = json_object_get (r1, "published");
    assert_true (json_is_true (json_object_get (pub, "passed")));
    char patch[256], cmd[1024];
    snprintf (patch, sizeof patch, "%s/result.diff", o.state);
    FILE *f = fopen (patch, "w");
    fputs (o.result.diff, f);
    fclose (f);
    snprintf (cmd, sizeof cmd, "git clone -q %s %s/fresh && cd %s/fresh && git apply --check --binary %s", o.src,
              o.state, o.state, patch);
    assert_int_equal (kiwi_test_sh (cmd, NULL, 0), 0);
    outcome_clear (&o);
}

static void
test_fixed_in_two_rounds (void **state)
{
    outcome o;
    run_session ("js-sum-two-rounds", 4, 0, &o);
    assert_int_equal (o.result.status, KIWI_RESULT_FIXED);
    assert_int_equal (o.result.rounds, 2);
    assert_int_equal (count_rounds (o.events), 2);
    json_t *r1 = round_event (o.events, 1);
    assert_false (json_is_true (json_object_get (json_object_get (r1, "verify"), "passed")));
    assert_true (json_is_true (json_object_get (json_object_get (round_event (o.events, 2), "verify"), "passed")));
    assert_non_null (strstr (o.result.diff, "+  return a + b;"));
    outcome_clear (&o);
}

static void
test_max_rounds (void **state)
{
    outcome o;
    run_session ("js-sum-never", 2, 0, &o);
    assert_int_equal (o.result.status, KIWI_RESULT_MAX_ROUNDS);
    assert_int_equal (o.result.rounds, 2);
    assert_null (o.result.diff);
    assert_int_equal (count_rounds (o.events), 2);
    assert_non_null (strstr (o.result.reason, "max-rounds (2)"));
    outcome_clear (&o);
}

static void
test_budget_exhausted (void **state)
{
    outcome o;
    run_session ("js-sum-budget", 4, 100000, &o);
    assert_int_equal (o.result.status, KIWI_RESULT_BUDGET_EXHAUSTED);
    assert_true (o.result.tokens_in + o.result.tokens_out >= 100000);
    assert_int_equal (count_rounds (o.events), 1);
    assert_string_equal (json_string_value (json_object_get (round_event (o.events, 1), "ended")), "budget_exhausted");
    outcome_clear (&o);
}

static void
test_provider_keeps_failing (void **state)
{
    outcome o;
    run_session ("js-sum-provider-down", 4, 0, &o);
    assert_int_equal (o.result.status, KIWI_RESULT_ERROR);
    assert_non_null (strstr (o.result.reason, "model provider failed"));
    assert_non_null (strstr (o.result.reason, "500"));
    assert_string_equal (json_string_value (json_object_get (round_event (o.events, 1), "ended")), "provider_error");
    /* the verify sandbox made ahead for the round that never came is gone */
    assert_int_equal (task_containers (""), 0);
    outcome_clear (&o);
}

static void
test_writes_outside_refused (void **state)
{
    outcome o;
    run_session ("js-sum-escape", 1, 0, &o);
    assert_int_equal (o.result.status, KIWI_RESULT_MAX_ROUNDS);
    /* nothing was written outside the workspace */
    assert_int_not_equal (access ("/etc/kiwi-escape", F_OK), 0);
    char p[256];
    snprintf (p, sizeof p, "%s/kiwi-escape", outside);
    assert_int_not_equal (access (p, F_OK), 0);
    assert_int_not_equal (access ("/tmp/kiwi-escape", F_OK), 0);
    /* the event names the refusals */
    json_t *acts = json_object_get (round_event (o.events, 1), "actions");
    size_t refused = 0, i;
    json_t *a;
    json_array_foreach (acts, i, a) if (strncmp (json_string_value (a), "refused write_file", 18) == 0) refused++;
    assert_int_equal (refused, 3);
    outcome_clear (&o);
}

/* The round's verify sandbox is made while the Architect still thinks
 * (its answer comes 3 s late): dockerd holds a running verify sandbox of
 * the task then, before the Implementer has written anything. The test
 * marks it from outside, and the round's verify finds the mark: it ran in
 * that sandbox, not in one of its own. The deciding verify of the diff
 * makes its own (no mark), and no sandbox is left at the end. */
static void
test_verify_made_ahead (void **state)
{
    KIWI_NEED (sbenv != NULL, "dockerd for the session sandbox");
    char seen[64], cmd[2048];
    snprintf (seen, sizeof seen, "/tmp/kiwi-session-ahead-%d", (int) getpid ());
    char stop[80];
    snprintf (stop, sizeof stop, "%s.stop", seen);
    unlink (seen);
    unlink (stop);
    const char *sock = kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock");
    /* in the background: every verify sandbox of the task, marked once,
     * for 30 s (a sandbox made in its verify runs the command as its first
     * process at once: the mark cannot come before the command looks) */
    snprintf (cmd, sizeof cmd,
              "( marked=; for i in $(seq 1 300); do for id in $(docker -H 'unix://%s' ps -q --filter "
              "label=org.kiwi.task=session-task --filter label=org.kiwi.worker=%s --filter label=org.kiwi.phase=verify "
              "--filter status=running); do "
              "case \" $marked \" in *\" $id \"*) continue;; esac; "
              "docker -H 'unix://%s' exec \"$id\" touch /kiwi/tmp/marked-from-outside && echo \"$id\" >> %s; "
              "marked=\"$marked $id\"; done; [ -e %s.stop ] && break; sleep 0.1; done ) >/tmp/kiwi-session-ahead.log 2>&1 &",
              sock, worker_id, sock, seen, seen);
    assert_int_equal (kiwi_test_sh (cmd, NULL, 0), 0);
    /* the verify lasts 2 s more: time for the next sandbox to be made
     * while it runs, and marked */
    session_command = "if [ -e /kiwi/tmp/marked-from-outside ]; then echo MADE-AHEAD; fi; sleep 2; npm test";
    outcome o;
    run_session ("js-sum-ahead", 4, 0, &o);
    session_command = "npm test";
    FILE *sf = fopen (stop, "w"); /* the marking loop ends */
    if (sf)
        fclose (sf);
    if (o.result.status != KIWI_RESULT_FIXED)
        fail_msg ("status %s: %s", kiwi_result_status_name (o.result.status), o.result.reason);
    if (access (seen, F_OK) != 0)
        fail_msg ("no verify sandbox of the task ran while the Architect was thinking");
    json_t *r1 = round_event (o.events, 1);
    const char *v = json_string_value (json_object_get (json_object_get (r1, "verify"), "output_tail"));
    const char *pub = json_string_value (json_object_get (json_object_get (r1, "published"), "output_tail"));
    if (v == NULL || strstr (v, "MADE-AHEAD") == NULL)
        fail_msg ("the round's verify did not run in the sandbox made ahead:\n%s", v ? v : "(none)");
    /* the deciding verify of the diff ran in the one made during the
     * round's verify */
    if (pub == NULL || strstr (pub, "MADE-AHEAD") == NULL)
        fail_msg ("the deciding verify did not run in a sandbox made ahead:\n%s", pub ? pub : "(none)");
    assert_int_equal (task_containers (""), 0);
    unlink (seen);
    usleep (500 * 1000); /* the loop sees the stop file within 0.1 s and a docker ps */
    unlink (stop);
    outcome_clear (&o);
}

/* The model puts the fix in a file the repository's .gitignore ignores
 * (node loads ./sum before ./sum.js): the tests pass in the workspace, but
 * the diff does not carry the fix, so the ref plus the diff still fails:
 * not fixed, and the model is told which file was left out. */
static void
test_gitignored_fix_not_fixed (void **state)
{
    outcome o;
    run_session_on ("js-sum-ignored", "printf 'sum\\n' > .gitignore", 2, 0, &o);
    if (o.result.status != KIWI_RESULT_MAX_ROUNDS)
        fail_msg ("status %s: %s", kiwi_result_status_name (o.result.status), o.result.reason);
    assert_null (o.result.diff);
    assert_non_null (strstr (o.result.reason, "not on the ref plus the diff"));
    assert_int_equal (count_rounds (o.events), 2);
    for (int r = 1; r <= 2; r++) {
        json_t *ev = round_event (o.events, r);
        assert_true (json_is_true (json_object_get (json_object_get (ev, "verify"), "passed")));
        json_t *pub = json_object_get (ev, "published");
        assert_false (json_is_true (json_object_get (pub, "passed")));
        assert_string_equal (json_string_value (json_object_get (ev, "ended")), "not_carried");
        assert_non_null (strstr (json_string_value (json_object_get (pub, "note")), "not carried by the diff: sum"));
    }
    /* the second Implementer turn checked that it was told (its expect) */
    assert_int_equal (kiwi_scripted_provider_requests (&sp, "js-sum-ignored"), 4);
    no_violations (&sp, "js-sum-ignored");
    outcome_clear (&o);
}

/* The Implementer calls give_up: the task ends at once with the status
 * gave_up and the model's kind and reason, no verify runs, no round
 * follows, a call after it in the same answer is not run, and nothing of
 * the task is left in dockerd. The script checks what the model was told:
 * the round (1 of 3), the step-0 failure in the Implementer's first message
 * (not only the Architect's plan), the same ten tools, read_file's header
 * and the status line after the tool results. Before that the Architect
 * reads test.js with its own (read-only) tools through the same loop, and
 * its plan follows the answer. Through each provider's wire format: the
 * tools are declared once and every provider gets them. */
static void
give_up_via (const char *provider, const char *model, const char *script)
{
    outcome o;
    session_provider = provider;
    session_model = model;
    run_session (script, 3, 0, &o);
    session_provider = "anthropic";
    session_model = "claude-sonnet-4-5-20250929";
    char *first = NULL;
    size_t bad = kiwi_scripted_provider_violations (&sp, script, &first);
    if (bad != 0)
        fail_msg ("%s: %zu requests broke the script: %s", provider, bad, first ? first : "");
    free (first);
    if (o.result.status != KIWI_RESULT_GAVE_UP)
        fail_msg ("%s: status %s: %s", provider, kiwi_result_status_name (o.result.status), o.result.reason);
    assert_string_equal (kiwi_result_status_name (o.result.status), "gave_up");
    assert_non_null (strstr (o.result.reason, "test_wrong: The test expects sum(1, 2) to be 4"));
    assert_int_equal (o.result.rounds, 1);
    assert_null (o.result.diff);
    assert_int_equal (kiwi_scripted_provider_requests (&sp, script), 4);
    assert_int_equal (count_rounds (o.events), 1);
    json_t *r1 = round_event (o.events, 1);
    assert_string_equal (json_string_value (json_object_get (r1, "ended")), "gave_up");
    assert_null (json_object_get (r1, "verify"));
    /* the write after give_up did not happen */
    char p[256];
    snprintf (p, sizeof p, "%s/late.txt", o.repo);
    assert_int_not_equal (access (p, F_OK), 0);
    assert_int_equal (task_containers (""), 0);
    outcome_clear (&o);
}

static void
test_give_up (void **state)
{
    give_up_via ("anthropic", "claude-sonnet-4-5-20250929", "js-sum-give-up");
    give_up_via ("openai", "gpt-4.1", "js-sum-give-up-openai");
    give_up_via ("gemini", "gemini-2.5-flash", "js-sum-give-up-gemini");
}

/* One answer with 45 tool calls: the round's 40 are counted per call, not
 * per answer, so 40 run, the rest are answered without running, and the
 * round ends with its verify. */
static void
test_tool_calls_capped_per_call (void **state)
{
    outcome o;
    run_session ("js-sum-many-calls", 1, 0, &o);
    no_violations (&sp, "js-sum-many-calls");
    assert_int_equal (o.result.status, KIWI_RESULT_MAX_ROUNDS);
    assert_int_equal (kiwi_scripted_provider_requests (&sp, "js-sum-many-calls"), 2);
    json_t *r1 = round_event (o.events, 1);
    json_t *acts = json_object_get (r1, "actions");
    size_t reads = 0, i;
    json_t *a;
    json_array_foreach (acts, i, a) if (strcmp (json_string_value (a), "read sum.js") == 0) reads++;
    assert_int_equal (reads, 40);
    assert_non_null (json_object_get (r1, "verify"));
    outcome_clear (&o);
}


/* The request bodies of `script` the scripted server received, as JSON
 * text each; *n gets their count. Caller frees each and the array. */
static char **
request_bodies (const char *script, size_t *n)
{
    kiwi_error_t err = NULL;
    json_t *log = kiwi_scripted_provider_log (&sp, script, &err);
    if (log == NULL)
        fail_msg ("log: %s", kiwi_error_msg (err));
    *n = json_array_size (log);
    char **out = calloc (*n + 1, sizeof *out);
    for (size_t i = 0; i < *n; i++)
        out[i] = json_dumps (json_object_get (json_array_get (log, i), "request"), JSON_COMPACT);
    json_decref (log);
    return out;
}

static void
bodies_free (char **b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free (b[i]);
    free (b);
}

static void
body_has (char **b, size_t i, const char *want)
{
    if (strstr (b[i], want) == NULL)
        fail_msg ("request %zu lacks `%s`", i + 1, want);
}

/* Prints the bytes of each request body of `script` from its `from`th on,
 * by round and role. */
static void
print_sizes (const char *script, size_t from)
{
    size_t n = 0;
    char **b = request_bodies (script, &n);
    int round = 0;
    for (size_t i = from; i < n; i++) {
        bool arch = strstr (b[i], "You are the Architect") != NULL;
        if (arch && (i == from || strstr (b[i - 1], "You are the Architect") == NULL))
            round++;
        printf ("request-size %s request %zu round %d %s %zu bytes\n", script, i + 1 - from, round,
                arch ? "architect" : "implementer", strlen (b[i]));
    }
    bodies_free (b, n);
}

/* The Architect remembers and reads. Round 1: its first message has the
 * environment (image, runtime, install and its outcome, test command,
 * limits, no network) and the map (the file the failing output names
 * first, line counts, [test], symbols); it has the three read-only tools:
 * its read_file is answered, its write_file refused, nothing written.
 * Round 2: its message carries its round-1 plan, the Implementer's tool
 * calls and last message, and the workspace's diff; of its 14 reads in
 * one answer 12 run and 2 are answered "not run", then it plans. The
 * script checks each request as it comes; the test checks the bodies the
 * server logged. */
static void
test_architect_memory (void **state)
{
    outcome o;
    session_step0 = "AssertionError [ERR_ASSERTION]: sum(1, 2) should be 3\n    at Object.<anonymous> "
                    "(/kiwi/src/sum.js:3:10)";
    run_session_on ("js-sum-architect-memory",
                    "mkdir -p tests && printf 'def test_extra():\\n    pass\\n\\nclass Helper:\\n' > tests/test_extra.py",
                    2, 0, &o);
    session_step0 = default_step0;
    no_violations (&sp, "js-sum-architect-memory");
    if (o.result.status != KIWI_RESULT_FIXED)
        fail_msg ("status %s: %s", kiwi_result_status_name (o.result.status), o.result.reason);
    assert_int_equal (o.result.rounds, 2);
    size_t n = 0;
    char **b = request_bodies ("js-sum-architect-memory", &n);
    assert_int_equal (n, 8);
    /* round 1's Architect: the environment and the map */
    body_has (b, 0, "no network in this sandbox; dependencies are installed");
    body_has (b, 0, "- install outcome: ok in 3.2 s");
    body_has (b, 0, "sum.js (6 lines) [in the failing output]: sum");
    /* its write was refused, and nothing of it reached the file */
    body_has (b, 1, "is not the Architect's");
    /* round 2's Architect (request 5): its plan, the diff, the Implementer */
    body_has (b, 4, "PLAN-ONE: sum.js line 3 subtracts");
    body_has (b, 4, "+  return b - a;");
    body_has (b, 4, "SUMMARY-ONE: I swapped the operands");
    body_has (b, 4, "- edit sum.js");
    body_has (b, 5, "not run: your tool calls of this round are used up");
    /* the Implementer gets the map too, in its first message of each round
     * (request 3: round 1's; request 7: round 2's, after round 1's) */
    body_has (b, 2, "Repository map (at most 6144 bytes):");
    body_has (b, 2, "sum.js (6 lines) [in the failing output]: sum");
    body_has (b, 2, "tests/test_extra.py (4 lines) [test]: test_extra, Helper");
    size_t maps = 0;
    for (const char *p = b[6]; (p = strstr (p, "Repository map (at most 6144 bytes):")) != NULL; p++)
        maps++;
    assert_int_equal (maps, 2);
    bodies_free (b, n);
    print_sizes ("js-sum-architect-memory", 0);
    json_t *acts = json_object_get (round_event (o.events, 1), "actions");
    size_t refused = 0, i;
    json_t *a;
    json_array_foreach (acts, i, a) if (strncmp (json_string_value (a), "architect: refused write_file sum.js:", 37) == 0)
        refused++;
    assert_int_equal (refused, 1);
    size_t reads = 0;
    acts = json_object_get (round_event (o.events, 2), "actions");
    json_array_foreach (acts, i, a) if (strcmp (json_string_value (a), "architect: read sum.js") == 0) reads++;
    assert_int_equal (reads, 12);
    assert_non_null (strstr (o.result.diff, "+  return a + b;"));
    outcome_clear (&o);
}

/* One agent (KIWI_SESSION_AGENTS=one): no Architect request; the one
 * model's first message carries the failure and the map, no plan, and its
 * system prompt has it plan for itself. */
static void
test_one_agent (void **state)
{
    outcome o;
    session_one_agent = true;
    session_install_status = "skipped";
    run_session ("js-sum-one-agent", 4, 0, &o);
    session_one_agent = false;
    session_install_status = "ok";
    if (o.result.status != KIWI_RESULT_FIXED)
        fail_msg ("status %s: %s", kiwi_result_status_name (o.result.status), o.result.reason);
    assert_int_equal (o.result.rounds, 1);
    assert_non_null (strstr (o.result.diff, "+  return a + b;"));
    /* two requests: the script's expectations (the solo system prompt, the
     * failure, no Architect's plan) held for each */
    assert_int_equal (kiwi_scripted_provider_requests (&sp, "js-sum-one-agent"), 2);
    /* a skipped Phase A is not said to have installed anything */
    size_t n = 0;
    char **b = request_bodies ("js-sum-one-agent", &n);
    assert_int_equal (n, 2);
    body_has (b, 0, "nothing was installed: the repository declares no dependencies");
    assert_null (strstr (b[0], "in this sandbox; dependencies are installed"));
    bodies_free (b, n);
    json_t *r1 = round_event (o.events, 1);
    assert_string_equal (json_string_value (json_object_get (r1, "plan")), "");
    size_t i;
    json_t *a;
    json_array_foreach (json_object_get (r1, "actions"), i, a)
        assert_null (strstr (json_string_value (a), "architect:"));
    outcome_clear (&o);
}

/* What each request to the model weighs: bytes of the body per round and
 * role, for a two-round task (printed; docs/session.md quotes them). */
static void
test_request_sizes (void **state)
{
    outcome o;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_scripted_provider_reset (&sp, "js-sum-two-rounds", &err), 0);
    size_t from = kiwi_scripted_provider_requests (&sp, "js-sum-two-rounds");
    run_session ("js-sum-two-rounds", 2, 0, &o);
    assert_int_equal (o.result.status, KIWI_RESULT_FIXED);
    print_sizes ("js-sum-two-rounds", from);
    outcome_clear (&o);
}

/* Step 0 failed with colour codes and a failure buried under 2000 lines of
 * passing noise: both models' first messages (the script's expect checks
 * the raw bodies) carry the failure's lines, the summary and the note of
 * what was left out, and no escape byte. */
static void
test_failure_shown (void **state)
{
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_buf_append_str (&b, "\x1b[31mFAILED test_noisy_marker_line\x1b[0m\n  expected 3, got -1\n", NULL);
    for (int i = 0; i < 2000; i++)
        kiwi_buf_appendf (&b, NULL, "  \x1b[32m\xe2\x9c\x93\x1b[0m passing noise %04d\n", i);
    kiwi_buf_append_str (&b, "\x1b[31m1 failing, 2000 passing\x1b[0m\n", NULL);
    session_step0 = kiwi_buf_str (&b);
    outcome o;
    run_session ("js-sum-noisy", 2, 0, &o);
    session_step0 = default_step0;
    kiwi_buf_free (&b);
    no_violations (&sp, "js-sum-noisy");
    assert_int_equal (o.result.status, KIWI_RESULT_FIXED);
    outcome_clear (&o);
}

/* A cheap syntax check after each write or edit, reported, not enforced:
 * the Implementer writes a broken .py, .js and .sh, a good .json, a .txt,
 * and fixes sum.js; the tool results it gets (its script's expect) say
 * which checks failed with the checker's first lines and which passed, and
 * nothing for the .txt; every file is written, and the task is fixed. */
static void
test_syntax_check (void **state)
{
    outcome o;
    run_session ("js-sum-syntax", 1, 0, &o);
    no_violations (&sp, "js-sum-syntax");
    if (o.result.status != KIWI_RESULT_FIXED)
        fail_msg ("status %s: %s", kiwi_result_status_name (o.result.status), o.result.reason);
    size_t n = 0;
    char **b = request_bodies ("js-sum-syntax", &n);
    assert_int_equal (n, 3);
    size_t checks = 0;
    for (const char *p = b[2]; (p = strstr (p, "\\nsyntax check (")) != NULL; p++)
        checks++;
    assert_int_equal (checks, 5); /* not notes.txt */
    body_has (b, 2, "SyntaxError");
    bodies_free (b, n);
    const char *names[] = { "bad.py", "bad.js", "bad.sh", "ok.json", "notes.txt", NULL };
    for (size_t i = 0; names[i]; i++) {
        char p[256];
        snprintf (p, sizeof p, "%s/%s", o.repo, names[i]);
        assert_int_equal (access (p, F_OK), 0);
    }
    outcome_clear (&o);
}

/* Whether the JSON object `o` carries cache_control {"type":"ephemeral"}. */
static bool
cache_mark (json_t *o)
{
    json_t *cc = json_object_get (o, "cache_control");
    return json_is_object (cc) && strcmp (json_string_value (json_object_get (cc, "type")) ?: "", "ephemeral") == 0;
}

/* Prompt caching (Anthropic): every request the server received marks the
 * system prompt, the last tool and the conversation's last block with
 * cache_control, and nothing else (3 breakpoints of the 4 allowed); the
 * scripted responses' cache writes and reads are counted in the tokens and
 * cost as computed (input $3, output $15 a million tokens; writes 1.25 and
 * reads 0.1 of the input price). */
static void
test_prompt_cache (void **state)
{
    outcome o;
    run_session ("js-sum-cached", 4, 0, &o);
    no_violations (&sp, "js-sum-cached");
    assert_int_equal (o.result.status, KIWI_RESULT_FIXED);
    kiwi_error_t err = NULL;
    json_t *log = kiwi_scripted_provider_log (&sp, "js-sum-cached", &err);
    assert_int_equal (json_array_size (log), 3);
    size_t i;
    json_t *e;
    json_array_foreach (log, i, e)
    {
        json_t *req = json_object_get (e, "request");
        json_t *sys = json_object_get (req, "system");
        if (!json_is_array (sys) || json_array_size (sys) != 1 || !cache_mark (json_array_get (sys, 0)))
            fail_msg ("request %zu: the system prompt carries no cache breakpoint", i + 1);
        json_t *tools = json_object_get (req, "tools");
        if (!cache_mark (json_array_get (tools, json_array_size (tools) - 1)))
            fail_msg ("request %zu: the last tool carries no cache breakpoint", i + 1);
        json_t *msgs = json_object_get (req, "messages");
        json_t *lc = json_object_get (json_array_get (msgs, json_array_size (msgs) - 1), "content");
        if (!cache_mark (json_array_get (lc, json_array_size (lc) - 1)))
            fail_msg ("request %zu: the conversation's last block carries no cache breakpoint", i + 1);
        char *body = json_dumps (req, JSON_COMPACT);
        size_t marks = 0;
        for (const char *p = body; (p = strstr (p, "\"cache_control\"")) != NULL; p++)
            marks++;
        free (body);
        assert_int_equal (marks, 3);
    }
    json_decref (log);
    /* usage: (input, cache writes, cache reads) 400/3000/0, 400/2000/0,
     * 100/300/5000; 60 output tokens each */
    assert_int_equal (o.result.tokens_in, 400 + 3000 + 400 + 2000 + 100 + 300 + 5000);
    assert_int_equal (o.result.tokens_out, 180);
    /* 900 plain * 3 + 5300 written * 3.75 + 5000 read * 0.3 + 180 * 15
     * = 26775 micro-dollars (every input token at $3 would be 36300) */
    if (o.result.cost_usd_micros < 26774 || o.result.cost_usd_micros > 26775)
        fail_msg ("cost %llu micro-dollars, want 26775", (unsigned long long) o.result.cost_usd_micros);
    json_t *r1 = round_event (o.events, 1);
    assert_int_equal (json_integer_value (json_object_get (r1, "cache_write_tokens")), 5300);
    assert_int_equal (json_integer_value (json_object_get (r1, "cache_read_tokens")), 5000);
    outcome_clear (&o);
}

/* The contents of `path` (at most 64 KiB), or fails the test. */
static char *
slurp (const char *path)
{
    FILE *f = fopen (path, "r");
    if (f == NULL)
        fail_msg ("%s: missing", path);
    char *buf = calloc (1, 65537);
    buf[fread (buf, 1, 65536, f)] = '\0';
    fclose (f);
    return buf;
}

/* The model's seat as a tool: the scripted server in seat mode writes each
 * request to a folder and answers with what a helper process (a person's
 * stand-in, tests/scripted_provider/seat-answers.py) writes there from
 * tests/fixtures/seat/js-sum.json, through `provider`'s wire format: a
 * plan, an edit, run_tests. The session is fixed; every request is in the
 * folder as JSON and as a transcript that shows the Architect's prompt, the
 * tool call and its result. */
static void
seat_via (const char *provider, const char *model)
{
    KIWI_NEED (sbenv != NULL, "dockerd for the session sandbox");
    char seat[64];
    snprintf (seat, sizeof seat, "/tmp/kiwi-session-seat-XXXXXX");
    assert_non_null (mkdtemp (seat));
    kiwi_scripted_provider seat_sp;
    kiwi_error_t err = NULL;
    if (kiwi_scripted_provider_start_seat (&seat_sp, seat, &err) < 0)
        fail_msg ("seat: %s", kiwi_error_msg (err));
    pid_t helper = fork ();
    assert_true (helper >= 0);
    if (helper == 0) {
        execl ("/usr/bin/python3", "python3", KIWI_SOURCE_DIR "/tests/scripted_provider/seat-answers.py", seat,
               KIWI_SOURCE_DIR "/tests/fixtures/seat/js-sum.json", "--max-seconds", "300", (char *) NULL);
        _exit (127);
    }
    server = &seat_sp;
    session_provider = provider;
    session_model = model;
    outcome o;
    run_session ("seat", 1, 0, &o);
    server = &sp;
    session_provider = "anthropic";
    session_model = "claude-sonnet-4-5-20250929";
    int st = 0;
    assert_int_equal (waitpid (helper, &st, 0), helper);
    assert_true (WIFEXITED (st) && WEXITSTATUS (st) == 0);
    no_violations (&seat_sp, NULL);
    kiwi_scripted_provider_stop (&seat_sp);
    if (o.result.status != KIWI_RESULT_FIXED)
        fail_msg ("%s: status %s: %s", provider, kiwi_result_status_name (o.result.status), o.result.reason);
    assert_non_null (strstr (o.result.diff, "+  return a + b;"));
    char p[128];
    for (int k = 1; k <= 3; k++) {
        snprintf (p, sizeof p, "%s/%04d-request.json", seat, k);
        char *body = slurp (p);
        json_t *j = json_loads (body, 0, NULL);
        if (j == NULL)
            fail_msg ("%s is not JSON", p);
        json_decref (j);
        free (body);
    }
    snprintf (p, sizeof p, "%s/0004-request.json", seat);
    assert_int_not_equal (access (p, F_OK), 0);
    snprintf (p, sizeof p, "%s/0001-request.txt", seat);
    char *t1 = slurp (p);
    assert_non_null (strstr (t1, "=== system ===\nYou are the Architect"));
    assert_non_null (strstr (t1, "Round 1 of 1."));
    assert_non_null (strstr (t1, "write 0001-answer.json"));
    free (t1);
    snprintf (p, sizeof p, "%s/0002-request.txt", seat);
    char *t2 = slurp (p);
    assert_non_null (strstr (t2, "PLAN-SEAT: sum.js line 3 subtracts"));
    free (t2);
    snprintf (p, sizeof p, "%s/0003-request.txt", seat);
    char *t3 = slurp (p);
    if (strstr (t3, "[tool call ") == NULL || strstr (t3, "edit_file") == NULL || strstr (t3, "[tool result ") == NULL
        || strstr (t3, "edited sum.js") == NULL)
        fail_msg ("%s: the transcript lacks the edit and its result:\n%s", provider, t3);
    free (t3);
    outcome_clear (&o);
    char cmd[128];
    snprintf (cmd, sizeof cmd, "rm -rf %s", seat);
    if (getenv ("KIWI_KEEP_TEST_FILES") == NULL) /* kept to read */
        assert_int_equal (system (cmd), 0);
}

static void
test_seat (void **state)
{
    seat_via ("anthropic", "claude-sonnet-4-5-20250929");
    seat_via ("openai", "gpt-4.1");
    seat_via ("gemini", "gemini-2.5-flash");
}

/* Replays of the evaluation set (bench/evalset/ID): sessions played by hand
 * from the model's seat on this worker, recorded, and turned into scripts
 * (tests/fixtures/sessions/evalset-ID.json) by
 * tests/scripted_provider/seat-to-script.py. Each turn expects the same
 * model as in the recording (the Architect or the Implementer) and, after
 * tool calls, their results, so a change in the session's flow (who is
 * asked when, which calls are answered, a round more or less) breaks the
 * script. The task ends fixed in the recorded rounds, with the root cause's
 * file changed and the test file not. */
typedef struct {
    const char *id, *script, *goal, *step0;
    const char *fix_file, *fix_line, *test_file;
    uint32_t rounds;
    size_t requests;
    bool one_agent; /* played with KIWI_SESSION_AGENTS=one */
} evalset_replay;

static void
replay_evalset (const evalset_replay *r)
{
    char source[128], script[128], want[256];
    snprintf (source, sizeof source, "bench/evalset/%s/repo", r->id);
    snprintf (script, sizeof script, "evalset-%s", r->script);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_scripted_provider_reset (&sp, script, &err), 0);
    size_t from = kiwi_scripted_provider_requests (&sp, script);
    session_source = source;
    session_goal = r->goal;
    session_step0 = r->step0;
    session_command = "node --test";
    session_one_agent = r->one_agent;
    outcome o;
    run_session_on (script, "rm evil", 4, 0, &o); /* node --test would look into the link */
    session_one_agent = false;
    session_source = "tests/fixtures/examples/js-sum";
    session_goal = "Make the tests pass.";
    session_step0 = default_step0;
    session_command = "npm test";
    json_t *v1 = json_object_get (round_event (o.events, 1), "verify");
    if (o.result.status != KIWI_RESULT_FIXED || o.result.rounds != r->rounds)
        fail_msg ("%s: status %s in %u rounds (want fixed in %u): %s; round 1's verify: %s", r->id,
                  kiwi_result_status_name (o.result.status), (unsigned) o.result.rounds, (unsigned) r->rounds,
                  o.result.reason ? o.result.reason : "", json_string_value (json_object_get (v1, "output_tail")));
    no_violations (&sp, script);
    assert_int_equal (kiwi_scripted_provider_requests (&sp, script) - from, r->requests);
    snprintf (want, sizeof want, "+++ b/%s", r->fix_file);
    if (strstr (o.result.diff, want) == NULL || strstr (o.result.diff, r->fix_line) == NULL)
        fail_msg ("%s: the diff lacks `%s` in %s:\n%s", r->id, r->fix_line, r->fix_file, o.result.diff);
    snprintf (want, sizeof want, "+++ b/%s", r->test_file);
    if (strstr (o.result.diff, want) != NULL)
        fail_msg ("%s: the diff changes the test file %s", r->id, r->test_file);
    print_sizes (script, from);
    outcome_clear (&o);
}

/* js-escape-html's task and step 0, as its replays played them */
#define ESCAPE_GOAL "A user named 'Tom & Jerry' breaks the profile card's HTML: the ampersand is not escaped. Fix it."
#define ESCAPE_STEP0                                                                                         \
    "not ok 4 - ampersand in a name\n  location: '/kiwi/src/test/render.test.js:20:1'\n"                      \
    "    + '<div class=\"card\"><span class=\"name\">Tom & Jerry</span></div>'\n# fail 1"

static void
test_evalset_replays (void **state)
{
    static const evalset_replay replays[] = {
        { "js-escape-html", "js-escape-html",
          ESCAPE_GOAL, ESCAPE_STEP0,
          "lib/escape.js", "+    .replace(/&/g, '&amp;')", "test/render.test.js", 1, 4, false },
        /* the same bug played with the obvious fix first (the & replace last,
         * which double-escapes): round 2's Architect has its plan, the
         * Implementer's calls and the diff (the script checks), and moves it */
        { "js-escape-html", "js-escape-html-2r",
          ESCAPE_GOAL, ESCAPE_STEP0,
          "lib/escape.js", "+    .replace(/&/g, '&amp;')", "test/render.test.js", 2, 7, false },
        { "js-port-config", "js-port-config",
          "`devserve --port 8080` refuses to start and prints `devserve: invalid port: 8080`. 8080 is a valid "
          "port.",
          "not ok 2 - a port on the command line\n  location: '/kiwi/src/test/cli.test.js:12:1'\n    2 !== 0\n# fail 2",
          "src/config.js", "config.port = Number(config.port);", "test/cli.test.js", 1, 5, false },
        { "js-catalog-prices", "js-catalog-prices", "The cart total is garbage (it shows something like 01.502.25). Fix it.",
          "not ok 1 - total of two items\n    + '01.502.25'\n    - 3.75\n"
          "  error: 'total(...).toFixed is not a function'\n    receipt (/kiwi/src/src/cart.js:14:46)\n# fail 2",
          "src/catalog.js", "price: Number(price)", "test/cart.test.js", 1, 4, false },
        /* one agent (played on 2026-12-06, on a build that also put the
         * source of the files the failure names in the first message, since
         * taken out): it reads the code, edits and ends the round in two
         * requests */
        { "js-escape-html", "js-escape-html-one",
          ESCAPE_GOAL, ESCAPE_STEP0,
          "lib/escape.js", "+    .replace(/&/g, '&amp;')", "test/render.test.js", 1, 2, true },
    };
    for (size_t i = 0; i < sizeof replays / sizeof replays[0]; i++)
        replay_evalset (&replays[i]);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_fixed_in_one_round),     cmocka_unit_test (test_fixed_in_two_rounds),
        cmocka_unit_test (test_max_rounds),             cmocka_unit_test (test_budget_exhausted),
        cmocka_unit_test (test_provider_keeps_failing), cmocka_unit_test (test_writes_outside_refused),
        cmocka_unit_test (test_gitignored_fix_not_fixed), cmocka_unit_test (test_verify_made_ahead),
        cmocka_unit_test (test_give_up),                cmocka_unit_test (test_tool_calls_capped_per_call),
        cmocka_unit_test (test_architect_memory),       cmocka_unit_test (test_request_sizes),
        cmocka_unit_test (test_seat),                   cmocka_unit_test (test_prompt_cache),
        cmocka_unit_test (test_failure_shown),          cmocka_unit_test (test_syntax_check),
        cmocka_unit_test (test_evalset_replays),        cmocka_unit_test (test_one_agent),
    };
    if (getenv ("KIWI_TEST_FILTER") != NULL) /* one case, by name (a glob) */
        cmocka_set_test_filter (getenv ("KIWI_TEST_FILTER"));
    return kiwi_run_group ("session", tests, setup, teardown);
}
