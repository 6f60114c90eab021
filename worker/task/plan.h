/*
 * plan.h: what the task process needs to know about a repository, and
 * step 0, on top of the repository inspection in sandbox/ (inspect.h,
 * step0.h).
 *
 * Ownership: a kiwi_plan owns its strings and vectors (kiwi_plan_clear).
 * Step 0's install callback and result are step0.h's (kiwi_step0_install_fn,
 * kiwi_step0_result); the result is the caller's to clear.
 */
#ifndef KIWI_WORKER_PLAN_H
#define KIWI_WORKER_PLAN_H

#include "worker/task/cache.h"
#include "worker/config.h"
#include "worker/events.h"
#include "inspect/inspect.h"
#include "sandbox/phases.h"
#include "sandbox/step0.h"
#include "common/strv.h"
#include "schemas/task.h"

typedef struct kiwi_plan {
    char *image;              /* the sandbox image for both phases */
    char *image_reason;       /* why that image (devcontainer, command, marker...) */
    kiwi_strv install_argv;   /* empty: no dependencies, Phase A skipped */
    kiwi_strv install_env;    /* non-secret settings for Phase A ("K=V") */
    kiwi_strv verify_env;     /* non-secret settings for Phase B and the session */
    char *cache_key;          /* the install cache key (kiwi_install_cache_key): input + image by digest +
                                 command + driver + the environment Kiwi sets */
    char *image_id;           /* the image by digest ("" unknown) */
    char *verify_prelude;     /* the install's offline part for every Phase B (NULL: none) */
    kiwi_strv key_env;        /* kiwi_phase_install_key_env(), for the key */
    kiwi_sandbox_env *sandbox; /* where image Ids are asked (borrowed from the task) */
    kiwi_inspection insp;     /* the inspection behind the fields above */
    kiwi_image_catalog *cat;  /* the image catalogue (KIWI_IMAGE_CATALOG or the default) */
} kiwi_plan;

void kiwi_plan_init (kiwi_plan *p);
void kiwi_plan_clear (kiwi_plan *p);

/* What decides a step-0 run, for the verify cache (kiwi:verify:<key>). */
typedef struct kiwi_plan_verify_key_input {
    const char *tree;                /* the checkout's tree id */
    const char *subdir;              /* the repository root inside it ("" for the top) */
    const char *command;             /* the test command */
    const char *install_key;         /* the install cache key ("no-install" when skipped) */
    const char *image;               /* by tag */
    const char *image_id;            /* by digest ("" unknown) */
    const char *driver;
    const char *const *credentials;  /* names of the test credentials given (NULL: none); a run that held
                                        any is never cached, the names keep the key honest all the same */
} kiwi_plan_verify_key_input;

/* SHA-256 hex of every field above. 0, or -1 out of memory. */
int kiwi_plan_verify_key (const kiwi_plan_verify_key_input *k, char out[65]);

/* The environment Kiwi sets in Phase A as the install cache key takes it
 * (kiwi_install_key_input.kiwi_env), appended to *out:
 * kiwi_phase_install_key_env() for `host_env` and KIWI_CA_BUNDLE,
 * "kiwi-install-egress=<KIWI_INSTALL_EGRESS>", and with
 * KIWI_PRIVATE_REGISTRIES one "kiwi-private-registry=HOST[/PREFIX]
 * scope-sha256=HEX" per registry (private-registry.h). Kiwi's own CA is
 * not in it: which CA signs the proxy's certificates decides nothing Phase
 * A installs, and the registry lines already say Phase A trusts it. An
 * error when KIWI_PRIVATE_REGISTRIES is refused or a credential file
 * cannot be read. */
int kiwi_plan_key_env (const kiwi_worker_config *cfg, const char *const *host_env, kiwi_strv *out,
                       kiwi_error_t *err);

/* Inspects the repository at `root` for `test_command`; image Ids are
 * asked of `sandbox`'s driver (borrowed for the plan's life). */
int kiwi_plan_make (const kiwi_worker_config *cfg, kiwi_sandbox_env *sandbox, const char *root,
                    const char *test_command, kiwi_plan *p, kiwi_error_t *err);

/* The first verify, before any model-generated code ran, classified; a
 * missing runtime or a version mismatch swaps the image (updating *plan)
 * and re-runs once. Emits the step0 event. `root` is the repository root the
 * sandbox gets; `checkout` the top of the checkout (repo.h) it lies in, whose
 * tree id keys the verify cache. `limits` are the sandboxes' (the
 * operator's memory, pids and CPUs, the task's disk). `install` is the
 * pipeline's Phase A (or its cached snapshot), called for the first image
 * and again after a swap; the plan follows the inspection it installs for.
 *
 * Returns 0 with *res filled whatever the verdict (kiwi_step0_result_clear),
 * < 0 (nothing to clear) when step 0 could not run. What the worker reads of it: status (see
 * KIWI_STEP0_STATUSES); run.exit_code and run.output, the verify's output
 * tail for the Architect; snapshot_dir, the dependency snapshot in force
 * (NULL: none); reason, one line on why (for install_failed, the install's
 * own reason; for a stopped step 0, the cause by name, the host, the
 * command); first.cls, KIWI_FAILURE_NEEDS_NETWORK when a stopped build
 * needs the network rather than a runtime or version no image here has;
 * swapped; and kiwi_step0_result_note, what the result says besides (a
 * devcontainer image not had, a version wish not answered). A verify served
 * from the verify cache sets only status, run.exit_code, run.output,
 * snapshot_dir and wish_note (reason, when its install failed); its
 * inspection is the plan's. */
int kiwi_plan_step0 (kiwi_sandbox_env *sb, const kiwi_phase_config *pc, kiwi_plan *plan, const char *root,
                     const char *checkout, const kiwi_task *task, const kiwi_sandbox_limits *limits,
                     const char *driver, kiwi_cache *cache,
                     int64_t deadline_ms, kiwi_step0_install_fn install, void *install_ud, kiwi_events *events,
                     kiwi_step0_result *res, kiwi_error_t *err);


#endif
