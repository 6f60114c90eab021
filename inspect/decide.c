/*
 * decide.c: the step-0 decision on a classified failure (see decide.h,
 * docs/inspection.md).
 */
#include "inspect/decide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/enum.h"
#include "common/cleanup.h"

KIWI_ENUM_STR_FN (kiwi_step0_action_str, kiwi_step0_action, KIWI_STEP0_ACTIONS)

void
kiwi_step0_decision_clear (kiwi_step0_decision *d)
{
    kiwi_image_resolution_clear (&d->swap_to);
    memset (d, 0, sizeof *d);
}

/* ------------------------------------------------------------- deciding */

/* The requirement a version the output states stands for: "classfile:65"
 * is Java 21, "edition:2024" Rust 1.85; a bare version of a runtime that
 * stays compatible upwards (Go, Rust, Java) is a minimum. */
static void
stated_requirement (const char *runtime, const char *version, char *out, size_t cap)
{
    out[0] = '\0';
    if (version == NULL || *version == '\0')
        return;
    if (strncmp (version, "classfile:", 10) == 0) {
        int cf = atoi (version + 10);
        if (cf > 44)
            snprintf (out, cap, ">=%d", cf - 44);
        return;
    }
    if (strncmp (version, "edition:", 8) == 0) {
        static const struct {
            const char *edition, *rust;
        } eds[] = { { "2018", ">=1.31" }, { "2021", ">=1.56" }, { "2024", ">=1.85" } };
        for (size_t i = 0; i < sizeof eds / sizeof eds[0]; i++)
            if (strcmp (version + 8, eds[i].edition) == 0)
                snprintf (out, cap, "%s", eds[i].rust);
        return;
    }
    bool bare = version[0] >= '0' && version[0] <= '9';
    bool minimum = strcmp (runtime, "go") == 0 || strcmp (runtime, "rust") == 0 || strcmp (runtime, "java") == 0;
    snprintf (out, cap, "%s%s", bare && minimum ? ">=" : "", version);
}

static int
set_swap (kiwi_step0_decision *d, const char *root, const char *dir, const char *runtime, const char *req,
          const kiwi_image_catalog *cat, kiwi_error_t *err)
{
    return kiwi_image_for_runtime (root, dir, runtime, req, cat, &d->swap_to, err);
}

int
kiwi_step0_decide (const kiwi_classification *c, const char *phase, const char *root, const char *test_command,
                   const kiwi_inspection *in, const kiwi_image_catalog *cat, kiwi_step0_decision *d,
                   kiwi_error_t *err)
{
    memset (d, 0, sizeof *d);
    d->action = KIWI_STEP0_HONEST;
    const char *cur_rt = in->image.runtime ? in->image.runtime : "";
    const char *cur_img = in->image.image ? in->image.image : "";
    const char *dir = in->image.project_dir ? in->image.project_dir : "";
    const char *cmd = test_command ? test_command : "";
    switch (c->cls) {
    case KIWI_FAILURE_NONE:
        snprintf (d->reason, sizeof d->reason, "no rule of the classifier matched: an honest result");
        return 0;
    case KIWI_FAILURE_NEEDS_NETWORK:
        if (strcmp (phase, "verify") != 0) {
            snprintf (d->reason, sizeof d->reason, "%s: Phase A has the network; the install failure stands",
                      c->rule);
            return 0;
        }
        d->action = KIWI_STEP0_STOP;
        char tried[600];
        if (c->host[0] && c->what[0])
            snprintf (tried, sizeof tried, "tried to reach %s for %s", c->host, c->what);
        else if (c->host[0])
            snprintf (tried, sizeof tried, "tried to reach %s", c->host);
        else
            snprintf (tried, sizeof tried, "needed %s from the network", c->what[0] ? c->what : "something");
        snprintf (d->reason, sizeof d->reason,
                  "needs the network (%s): %s while running `%s`; Phase B has no network, so no change to the code "
                  "can make it pass here",
                  c->rule, tried, cmd);
        return 0;
    case KIWI_FAILURE_MISSING_RUNTIME: {
        const char *rt = kiwi_runtime_of_executable (c->command);
        if (rt == NULL) {
            snprintf (d->reason, sizeof d->reason,
                      "%s: `%s` is not found, but it belongs to no runtime the classifier knows: an honest result",
                      c->rule, c->command);
            return 0;
        }
        if (strcmp (rt, cur_rt) == 0) {
            snprintf (d->reason, sizeof d->reason,
                      "%s: `%s` is %s's and the image runs %s: a missing dependency or script, an honest result",
                      c->rule, c->command, rt, cur_rt);
            return 0;
        }
        if (!kiwi_image_catalog_has_runtime (cat, rt)) {
            d->action = KIWI_STEP0_STOP;
            snprintf (d->reason, sizeof d->reason,
                      "the test command needs `%s` (%s), which is not in %s and no image in the catalogue (%s) "
                      "provides",
                      c->command, rt, cur_img, kiwi_image_catalog_origin (cat));
            return 0;
        }
        int rc = set_swap (d, root, dir, rt, NULL, cat, err);
        if (rc < 0)
            return -1;
        d->action = KIWI_STEP0_SWAP;
        snprintf (d->reason, sizeof d->reason, "%s: `%s` is not in %s; it is %s's: %s", c->rule, c->command, cur_img,
                  rt, d->swap_to.reason);
        return 0;
    }
    case KIWI_FAILURE_VERSION_MISMATCH: {
        const char *rt = c->runtime[0] ? c->runtime : cur_rt;
        char req[96];
        const char *req_from = "the failure";
        stated_requirement (rt, c->version, req, sizeof req);
        cleanup_free char *mreq = NULL, *mfrom = NULL;
        if (!req[0]) {
            /* the output names no version: the repository's own markers must
             * ask for one the current image does not have */
            kiwi_version_prefer prefer;
            if (kiwi_version_markers (root, dir, rt, &mreq, &mfrom, &prefer, err) < 0)
                return -1;
            const kiwi_image_entry *cur = kiwi_image_catalog_by_ref (cat, cur_img);
            bool cur_ok = mreq != NULL && cur != NULL && strcmp (cur->runtime, rt) == 0
                          && strcmp (cur->version, "*") != 0 && kiwi_version_req_allows (mreq, cur->version) == 1;
            if (mreq == NULL || cur_ok) {
                snprintf (d->reason, sizeof d->reason,
                          "%s: looks like an older %s%s%s%s, but nothing asks for another version%s%s: an "
                          "honest result",
                          c->rule, rt, c->what[0] ? " (" : "", c->what, c->what[0] ? ")" : "",
                          cur_ok ? " than " : "", cur_ok ? cur_img : "");
                return 0;
            }
            snprintf (req, sizeof req, "%s", mreq);
            req_from = mfrom;
        }
        if (!kiwi_image_catalog_has_runtime (cat, rt)) {
            d->action = KIWI_STEP0_STOP;
            snprintf (d->reason, sizeof d->reason, "%s: needs %s %s (%s), and no image in the catalogue runs %s",
                      c->rule, rt, req, req_from, rt);
            return 0;
        }
        bool sat = false;
        kiwi_version_prefer prefer = strcmp (rt, "java") == 0 ? KIWI_PREFER_LOWEST : KIWI_PREFER_HIGHEST;
        const kiwi_image_entry *e = kiwi_image_catalog_choose (cat, rt, req, prefer, &sat);
        if (e == NULL || !sat) {
            d->action = KIWI_STEP0_STOP;
            snprintf (d->reason, sizeof d->reason,
                      "%s: needs %s %s (%s), which no image in the catalogue (%s) has%s%s; no change to the code "
                      "is attempted for it",
                      c->rule, rt, req, req_from, kiwi_image_catalog_origin (cat), e ? ": the nearest is " : "",
                      e ? e->ref : "");
            return 0;
        }
        if (strcmp (e->ref, cur_img) == 0) {
            snprintf (d->reason, sizeof d->reason,
                      "%s: %s asks for %s %s and %s already has it: an honest result", c->rule, req_from, rt, req,
                      cur_img);
            return 0;
        }
        if (set_swap (d, root, dir, rt, req, cat, err) < 0)
            return -1;
        if (d->swap_to.image == NULL) {
            snprintf (d->reason, sizeof d->reason, "%s: no image for %s %s: an honest result", c->rule, rt, req);
            return 0;
        }
        free (d->swap_to.requirement_from);
        d->swap_to.requirement_from = strdup (req_from);
        d->action = KIWI_STEP0_SWAP;
        snprintf (d->reason, sizeof d->reason, "%s%s%s%s: %s asks for %s %s, which %s lacks: swap %s -> %s", c->rule,
                  c->what[0] ? " (" : "", c->what, c->what[0] ? ")" : "", req_from, rt, req, cur_img, cur_img,
                  d->swap_to.image);
        return 0;
    }
    }
    return 0;
}

