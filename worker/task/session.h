/*
 * session.h: the Architect/Implementer session, the layer above the sandbox.
 *
 * The Architect reads the task (goal, CI-failure context, the environment,
 * the step-0 output, a map of the repository; from round 2 its earlier
 * plans, the Implementer's calls and last message, the workspace's diff),
 * checks the code with read-only tools, and writes a plan. The Implementer follows it
 * with tools — list, read (bounded), write, edit, search, run (in the
 * round's persistent sandbox, no network), run_tests (a Phase B verify) —
 * and every round ends with a verify. Tests passing there are not yet a
 * fix: the result's diff is made, applied to a fresh checkout of the commit,
 * and the same verify runs on that tree; only when it passes too does the
 * session end as fixed (otherwise the model is told what the diff did not
 * carry and the session goes on). Max-rounds and the session budget (tokens or money) end it with
 * that status; a provider that keeps failing ends it as an error naming the
 * failure. Every round emits its progress event.
 *
 * The model keys stay in this process: the model client is called from here,
 * and no sandbox's environment ever holds a key (phases.h).
 */
#ifndef KIWI_WORKER_SESSION_H
#define KIWI_WORKER_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "worker/events.h"
#include "models/models.h"
#include "sandbox/phases.h"
#include "schemas/result.h"
#include "schemas/task.h"

typedef struct kiwi_session_env {
    kiwi_sandbox_env *sandbox;
    kiwi_sandbox_env *sandbox_ahead;  /* the same driver and configuration, opened again for the thread that
                                         makes verify sandboxes ahead (session-verify.c; what it makes is handed to
                                         `sandbox`), or NULL: verifies make their own */
    const kiwi_phase_config *phase_cfg;
    const char *image;
    const char *snapshot_dir;         /* Phase A's snapshot, or NULL */
    const char *const *verify_env;    /* extra env for Phase B and the session ("K=V") */
    const char *verify_prelude;       /* the install's offline part, first in every Phase B (or NULL) */
    kiwi_sandbox_limits limits;
    const char *workspace;            /* the repository's root on the worker (the task's subdirectory) */
    const char *checkout;             /* the checkout's top (repo.h): workspace is it or inside it */
    const char *commit;               /* the task's ref, resolved: diffs are against it */
    const char *step0_output;         /* the first failing verify's output tail */
    int step0_exit;
    /* what both models are told of the environment (each may be NULL) */
    const char *runtime;              /* the runtime inspection resolved ("node") */
    const char *runtime_version;      /* its version requirement and where it came from */
    const char *install_command;      /* Phase A's command ("-" when there was none) */
    const char *install_outcome;      /* how Phase A ended, and in how long */
    const char *install_status;       /* kiwi_install_status_str of it ("ok", "skipped", ...), or NULL */
    kiwi_model_client *model;
    const char *model_name;
    bool one_agent;                   /* KIWI_SESSION_AGENTS=one: no Architect, the Implementer plans itself */
    int64_t deadline_ms;              /* kiwi_mono_ms when the task's time is up */
    kiwi_events *events;
    volatile int *stop;               /* set by SIGTERM: end now */
} kiwi_session_env;

/* Runs the session for `task`; fills *out (status, reason, diff when fixed,
 * rounds, tokens, cost). Returns < 0 only when it could not run at all. */
int kiwi_session_run (const kiwi_session_env *env, const kiwi_task *task, kiwi_result *out, kiwi_error_t *err);

#endif
