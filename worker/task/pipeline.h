/*
 * pipeline.h: one task, start to finish, in the task process.
 *
 *   1. fetch the repository at its ref (worker side; the git token stays here)
 *   2. inspect it: image, install command, lockfile hash
 *   3. Phase A, or its cached snapshot                  (event: install)
 *   4. step 0: the first verify, classified             (event: step0)
 *   5. the Architect/Implementer session                (events: round)
 *   6. the result: fixed with its diff, or the named reason why not
 *
 * Everything the task leaves on the worker (workspace, sandboxes) is
 * removed on every path, also when SIGTERM stops it.
 */
#ifndef KIWI_WORKER_PIPELINE_H
#define KIWI_WORKER_PIPELINE_H

#include <signal.h>
#include <stdbool.h>

#include "worker/config.h"
#include "worker/events.h"
#include "schemas/result.h"
#include "schemas/task.h"

typedef struct kiwi_pipeline {
    const kiwi_worker_config *cfg;
    const char *const *host_env; /* the worker's environment */
    kiwi_events *events;
    volatile int *stop;          /* set on SIGTERM */
    bool own_proxy;              /* --once: no daemon runs the egress proxy; the run starts its own
                                    (kiwi_proxy_start_once) and publishes each denial itself */
} kiwi_pipeline;

/* Runs `task`; *out always receives a result (status error with the reason
 * when something broke). Returns < 0 only when stopped by SIGTERM before a
 * result (the task is then redelivered). */
int kiwi_pipeline_run (const kiwi_pipeline *p, const kiwi_task *task, kiwi_result *out);

/* The task process: reads an encoded Task from fd 0, runs it, writes frames
 * to fd 3. Returns the process exit status. */
int kiwi_pipeline_child_main (const kiwi_worker_config *cfg);

/* `kiwi-worker --once FILE`: the task from a JSON file, events and the
 * result as JSON lines on stdout. Returns the exit status. */
int kiwi_pipeline_once_main (const kiwi_worker_config *cfg, const char *path);

#endif
