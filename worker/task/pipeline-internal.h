/*
 * pipeline-internal.h: what the pieces of the task pipeline share
 * (pipeline.c runs the task; pipeline-install.c is Phase A and its
 * snapshot, the callback step 0 calls; pipeline-main.c the task process's
 * entry points).
 */
#ifndef KIWI_WORKER_PIPELINE_INTERNAL_H
#define KIWI_WORKER_PIPELINE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "worker/egress/nflog.h"
#include "worker/task/cache.h"
#include "worker/task/pipeline.h"
#include "worker/task/store.h"
#include "inspect/inspect.h"
#include "sandbox/phases.h"

/* What the install callback needs from the pipeline. */
typedef struct kiwi__pipeline_install_ctx {
    const kiwi_pipeline *p;
    const kiwi_task *task;
    kiwi_sandbox_env *sb;
    const kiwi_phase_config *pc;
    const char *root;
    kiwi_cache *cache;
    int64_t deadline_ms;
    int *hold; /* the lock holding the snapshot in force against the clean-up (gc.h), or -1 */
    int64_t install_ms; /* spent in kiwi__pipeline_install so far (step 0's own time is the rest) */
    char install_outcome[640]; /* how the last Phase A ended and in how long, for the session's models */
    char install_status[16];   /* its kiwi_install_status_str, "" before any */
    kiwi_store *store; /* the shared snapshot store, or NULL */
    const char *egress_log; /* the egress proxy's access log, or NULL (KIWI_INSTALL_EGRESS=open) */
    const char *fetch_log;  /* its fetch digest's log (fetch-manifest.h), or NULL with egress_log */
    kiwi_nflog *nflog;      /* --once: the rules' rejects from its bridge (nflog.h), or NULL */
    bool rules_checked;     /* --once: the host's egress rules were found to hold (or the operator opted out) */
    bool rules_unchecked;   /* --once: they do not, and KIWI_ONCE_EGRESS_UNCHECKED let Phase A run anyway */
    kiwi_phase_config pc_as_now; /* *pc without resolve_before, once an index refused it (pc points here then) */
} kiwi__pipeline_install_ctx;

/* Why Phase A gave no verdict of the repository's: Kiwi's own fault. A
 * fault is the task's `error` (the daemon's, like any error; --once's exit
 * status) and is never stored in the install cache, so that it never
 * becomes the answer to every task with the same install key. */
#define KIWI_INSTALL_FAULTS(X)                                                                                        \
    X (KIWI_INSTALL_FAULT_NONE, "none")                 /* the outcome is the repository's (ok, failed, timed out) */ \
    X (KIWI_INSTALL_FAULT_PROXY, "egress_proxy")        /* the egress proxy absent, dead or restarted meanwhile */    \
    X (KIWI_INSTALL_FAULT_EGRESS_RULES, "egress_rules") /* --once: the host's egress rules do not hold */
#define KIWI__FAULT_ENUM(name, str) name,
typedef enum { KIWI_INSTALL_FAULTS (KIWI__FAULT_ENUM) } kiwi_install_fault;
#undef KIWI__FAULT_ENUM
const char *kiwi_install_fault_str (kiwi_install_fault f);

/* The fault, if any, of an install that ran behind the egress proxy: the
 * proxy's pid before Phase A (`before`, > 0: it was checked alive then)
 * and after it (`after`: 0 when kiwi_proxy_alive failed). A failed or
 * timed-out install is the repository's only when the same proxy carried
 * it from start to end; a successful one stands whatever happened to the
 * proxy after (what it made is a function of the install key). */
kiwi_install_fault kiwi_install_fault_after (kiwi_install_status status, pid_t before, pid_t after);

/* Every sandbox of `task`: the operator's memory, process and CPU ceilings,
 * the task's effective disk ceiling (kiwi_policy_task). */
kiwi_sandbox_limits kiwi__pipeline_sandbox_limits (const kiwi_worker_config *cfg, const kiwi_task *task);

/* Phase A for `in`, or the cached snapshot of an identical install, timed
 * for the metrics: the kiwi_step0_install_fn step 0 calls, with a
 * kiwi__pipeline_install_ctx as `ud`. A failed install is a verdict in r,
 * not an error. Emits the install event. */
int kiwi__pipeline_install (void *ud, const kiwi_inspection *in, kiwi_install_result *r, char **snapshot,
                            kiwi_error_t *err);

/* --once: the rules' log of the bridge its proxy is on (owned by the
 * caller, kiwi_nflog_close), or NULL with a warning. */
kiwi_nflog *kiwi__pipeline_once_nflog (const kiwi_worker_config *cfg);

#endif
