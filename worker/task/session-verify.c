/*
 * session-verify.c: the round's verify (Phase B) and the deciding verify
 * of the published diff, for the session (see session-internal.h).
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
#include "worker/task/session-internal.h"

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

/* Phase B's request for this task, but for the tree and the time left: the
 * same image, snapshot, environment and credentials every time. */
static void
verify_request (kiwi__session *s, kiwi_verify_request *req)
{
    *req = (kiwi_verify_request) {
        .image = s->env->image,
        .snapshot_dir = s->env->snapshot_dir,
        .command = s->task->test_command,
        .prelude = s->env->verify_prelude,
        .extra_env = s->env->verify_env,
        .credentials = kiwi_strv_list (&s->creds),
        .limits = s->env->limits,
        .output_cap = KIWI__SESSION_OUTPUT_KEPT,
        .task_id = s->task->id,
    };
}

static void *
ahead_main (void *arg)
{
    kiwi__session *s = arg;
    kiwi_phase_verify_ready (s->env->sandbox_ahead, s->env->phase_cfg, &s->ahead.req, &s->ahead.box,
                             &s->ahead.err);
    return NULL;
}

/* Starts making the round's verify sandbox, unless there is no env for it
 * or one is made or being made. */
void
kiwi__session_ahead_start (kiwi__session *s)
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
ahead_take (kiwi__session *s)
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
void
kiwi__session_ahead_drop (kiwi__session *s)
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
int
kiwi__session_verify (kiwi__session *s, const char *tree, bool next, kiwi_exec_result *r, kiwi_error_t *err)
{
    kiwi_verify_request req;
    verify_request (s, &req);
    req.workspace = tree;
    req.timeout_ms = kiwi__session_remaining_ms (s);
    req.ready = ahead_take (s);
    if (next && !s->ahead.lent)
        kiwi__session_ahead_start (s);
    int64_t t0 = kiwi_mono_ms ();
    int rc = kiwi_phase_verify (s->env->sandbox, s->env->phase_cfg, &req, r, NULL, NULL, err);
    kiwi_events_observe (s->env->events, KIWI_OBS_PHASE, "verify", (double) (kiwi_mono_ms () - t0) / 1000.0);
    return rc;
}

/* The deciding verify: the commit checked out afresh plus exactly `diff`
 * (what the result publishes), verified like the workspace. Returns < 0
 * when it could not run. */
int
kiwi__session_verify_published (kiwi__session *s, const char *diff, kiwi_exec_result *r,
                                 kiwi_error_t *err)
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
    int rc = kiwi__session_verify (s, tree, false, r, err); /* in the sandbox made during the round's verify */
    kiwi_repo_discard (clean);
    return rc;
}

/* What the diff did not carry, for the model: a sentence. Caller frees. */
char *
kiwi__session_not_carried_note (kiwi__session *s)
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
