/*
 * decide.h: what a classified step-0 failure leads to (the "deciding" half
 * of step 0, sandbox/step0.h runs it): a missing runtime or a version
 * mismatch swaps the image, a build that needs the network or a runtime no
 * image has stops the task with the cause by name, anything else is an
 * honest result. Pure: reads the repository and the catalogue, runs
 * nothing.
 *
 * Ownership: a kiwi_step0_decision owns its swap_to
 * (kiwi_step0_decision_clear).
 */
#ifndef KIWI_INSPECT_DECIDE_H
#define KIWI_INSPECT_DECIDE_H

#include "common/error.h"
#include "inspect/classify.h"
#include "inspect/inspect.h"

#define KIWI_STEP0_ACTIONS(X)                                                                                \
    X (KIWI_STEP0_HONEST, "honest") /* report the failure as it is */                                        \
    X (KIWI_STEP0_SWAP, "swap")     /* another image, re-install, re-run once */                             \
    X (KIWI_STEP0_STOP, "stop")     /* stop at step 0 with the cause */

typedef enum {
#define KIWI__S0A_ENUM(name, str) name,
    KIWI_STEP0_ACTIONS (KIWI__S0A_ENUM)
#undef KIWI__S0A_ENUM
} kiwi_step0_action;

const char *kiwi_step0_action_str (kiwi_step0_action a);

typedef struct kiwi_step0_decision {
    kiwi_step0_action action;
    kiwi_image_resolution swap_to; /* KIWI_STEP0_SWAP: the new image (owned) */
    char stop[32];                 /* KIWI_STEP0_STOP: the stop's name (needs_network, missing_tool,
                                    * needs_service, no_image, no_version; out_of_memory and
                                    * out_of_disk, which step 0 sets itself from the run); ""
                                    * otherwise */
    char reason[768];              /* one line: the cause by name, or why it is honest */
} kiwi_step0_decision;

void kiwi_step0_decision_clear (kiwi_step0_decision *d);

/* The classifier's finding in words, for a failure that is not decided on
 * here (a failed install's reason): "it could not reach HOST for WHAT
 * (rule)", "it runs `CMD`, which IMAGE does not have (rule)", "it needs
 * RUNTIME VERSION (rule)"; "" for KIWI_FAILURE_NONE. `image` may be NULL. */
void kiwi_step0_finding (const kiwi_classification *c, const char *image, char *dst, size_t cap);

/* What a classified failure leads to, for the repository at `root` whose
 * current inspection is `in`. Pure: runs nothing. `phase` is "install" or
 * "verify" (a network failure during Phase A is not a step-0 stop). */
int kiwi_step0_decide (const kiwi_classification *c, const char *phase, const char *root, const char *test_command,
                       const kiwi_inspection *in, const kiwi_image_catalog *cat, kiwi_step0_decision *d,
                       kiwi_error_t *err);

#endif
