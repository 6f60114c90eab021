/*
 * step0.h: Phase A, then the first verify run, before any model-generated
 * code ran, and what its failure means (spec: "Which image the sandbox
 * uses", "When a repository cannot be verified offline").
 *
 *   1. inspect the repository (inspect.h), make its image present (a
 *      missing one is pulled, kiwi_sandbox_ensure_image; a devcontainer
 *      image that cannot be had is reported in image_note and resolution
 *      goes on past the devcontainer), and run Phase A for its image
 *      (through the caller's install function: its cache, or a plain
 *      kiwi_phase_install into snapshot_root/<cache key>);
 *   2. run the test command once in Phase B;
 *   3. a failure is classified (classify.h) and decided on:
 *      - a missing runtime or a version mismatch swaps the image (the
 *        runtime the missing command belongs to, the version the output or
 *        the repository asks for), re-installs for it and re-runs once;
 *        only that re-run's output is for the Implementer;
 *      - a build that needs the network stops at step 0 with the cause by
 *        name: the rule, the host it tried, what it fetched, the command;
 *      - so does a runtime or version no image in the catalogue has, a
 *        tool the test command itself runs that the image lacks
 *        (missing_tool), and a refused connection to a port the
 *        repository gives a service (needs_service); the decision's `stop`
 *        names which;
 *      - a run the sandbox's memory ceiling killed stops too
 *        (out_of_memory), naming the ceiling and the setting that raises it,
 *        and so does one whose output says the disk was full (out_of_disk);
 *      - anything else is an honest result.
 *   Only the first failure is examined: at most one swap, and the re-run's
 *   result is final. An install failure is examined the same way (a
 *   version the install itself refuses swaps); otherwise it ends the task
 *   with the install's reason (sandbox/install-reason.h: what the output
 *   says) and the classifier's finding on its output.
 *
 * Ownership: a kiwi_step0_result owns everything in it
 * (kiwi_step0_result_clear). The request's pointers are borrowed.
 */
#ifndef KIWI_SANDBOX_STEP0_H
#define KIWI_SANDBOX_STEP0_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "inspect/decide.h"
#include "inspect/inspect.h"
#include "sandbox/phases.h"

#define KIWI_STEP0_STATUSES(X)                                                                               \
    X (KIWI_STEP0_PASSED, "passed")           /* the tests pass: nothing to fix */                         \
    X (KIWI_STEP0_FAILED, "failed")           /* an honest failure: the session starts */                  \
    X (KIWI_STEP0_STOPPED, "stopped")         /* the environment cannot verify it: the cause is named */  \
    X (KIWI_STEP0_INSTALL_FAILED, "install_failed") /* Phase A failed: the task ends with its reason */

typedef enum {
#define KIWI__S0_ENUM(name, str) name,
    KIWI_STEP0_STATUSES (KIWI__S0_ENUM)
#undef KIWI__S0_ENUM
} kiwi_step0_status;

const char *kiwi_step0_status_str (kiwi_step0_status s);

/* Runs Phase A for an inspection (or hands over a cached snapshot of an
 * identical one). Returns 0 when Phase A ran to a verdict (r->status,
 * r->reason) or was skipped, < 0 when it could not run (*err says why,
 * r->reason may too). *snapshot_dir receives the snapshot to give Phase B
 * (owned; NULL when skipped). */
typedef int (*kiwi_step0_install_fn) (void *userdata, const kiwi_inspection *in, kiwi_install_result *r,
                                      char **snapshot_dir, kiwi_error_t *err);

typedef struct kiwi_step0_request {
    kiwi_sandbox_env *env;
    const kiwi_phase_config *cfg;
    kiwi_inspect_request inspect;    /* root, test command, catalogue, driver */
    const kiwi_classifier *classifier;
    const char *const *credentials;  /* the task's test credentials (names) */
    kiwi_sandbox_limits limits;
    int64_t verify_timeout_ms;       /* each verify run; 0 = none */
    int64_t install_deadline_ms;     /* the task's remaining time for Phase A; 0 = none */
    size_t output_cap;               /* 0 = 64 KiB */
    const char *task_id;
    kiwi_step0_install_fn install;   /* NULL: kiwi_phase_install into snapshot_root/<key> */
    void *install_userdata;
    const char *snapshot_root;       /* used when install is NULL */
    kiwi_output_cb on_output;        /* live output of every run, optional */
    void *userdata;
    kiwi_pull_progress_cb pull_progress; /* while an image is pulled, optional */
    void *pull_userdata;
    const char *unavailable_image;   /* an image the caller already failed to have (not pulled again), or NULL */
    const char *unavailable_why;     /* and why */
    int unavailable_code;            /* and its error code (kiwi_sandbox_errcode; 0: KIWI_SBE_NO_IMAGE) */
} kiwi_step0_request;

typedef struct kiwi_step0_result {
    kiwi_step0_status status;
    kiwi_inspection insp;            /* the inspection in force (the new image's after a swap) */
    char *first_image;               /* the image step 0 started with */
    bool swapped;
    const char *first_phase;         /* where the examined failure came from: "install", "verify", or NULL */
    kiwi_classification first;       /* the first failure's classification (KIWI_FAILURE_NONE if none) */
    kiwi_step0_decision decision;    /* what it led to */
    kiwi_install_result install;     /* the last Phase A (status SKIPPED when nothing to install) */
    char *snapshot_dir;              /* the dependency snapshot in force, or NULL */
    kiwi_exec_result run;            /* the last verify run: the output that may reach the Implementer */
    int verify_runs;                 /* 0, 1 or 2 */
    int64_t install_ms, verify_ms;   /* time spent in Phase A and in Phase B, in total */
    char *reason;                    /* one line: what step 0 concluded and why */
    bool pulled;                     /* an image was pulled for step 0 */
    char *image_note;                /* the devcontainer image could not be had: why, and what was used
                                      * instead ("devcontainer image X could not be pulled: ...; using Y
                                      * from marker go.mod (go)"); NULL otherwise */
    char *image_unavailable;         /* with image_note: that devcontainer image */
    int image_code;                  /* and the error code that said why (KIWI_SBE_REFUSED: the operator's
                                      * settings refused it; KIWI_SBE_NO_IMAGE: the registry did not give
                                      * it; KIWI_SBE_TIMEOUT), 0 otherwise */
    char *wish_note;                 /* a version the repository asks for that the image in force does not
                                      * have: which, by which file, which image ran instead
                                      * (kiwi_image_wish_note); NULL otherwise */
} kiwi_step0_result;

void kiwi_step0_result_clear (kiwi_step0_result *r);

/* What a result says besides its reason: image_note and wish_note, joined
 * by "; " when both are there. NULL when neither is (or out of memory);
 * caller frees. */
char *kiwi_step0_result_note (const kiwi_step0_result *r);

/* Runs step 0 (see above). Returns 0 with res->status set whatever the
 * verdict, < 0 when something could not run at all (the sandbox, the
 * snapshot directory). */
int kiwi_step0_run (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err);

#endif
