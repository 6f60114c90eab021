/*
 * step0.c: Phase A, the first verify, its classification and the one swap
 * (see step0.h, docs/inspection.md).
 */
#include "sandbox/step0.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/enum.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "sandbox/install-reason.h"

KIWI_ENUM_STR_FN (kiwi_step0_status_str, kiwi_step0_status, KIWI_STEP0_STATUSES)

void
kiwi_step0_result_clear (kiwi_step0_result *r)
{
    kiwi_inspection_clear (&r->insp);
    free (r->first_image);
    kiwi_step0_decision_clear (&r->decision);
    kiwi_install_result_clear (&r->install);
    free (r->snapshot_dir);
    kiwi_exec_result_clear (&r->run);
    free (r->reason);
    free (r->image_note);
    free (r->image_unavailable);
    free (r->wish_note);
    memset (r, 0, sizeof *r);
}

char *
kiwi_step0_result_note (const kiwi_step0_result *r)
{
    const char *in = r->image_note, *vn = r->wish_note;
    char *note = NULL;
    if (in == NULL && vn == NULL)
        return NULL;
    if (asprintf (&note, "%s%s%s", in ? in : "", in && vn ? "; " : "", vn ? vn : "") < 0)
        return NULL;
    return note;
}

/* ------------------------------------------------------------- running */

static int
default_install (void *ud, const kiwi_inspection *in, kiwi_install_result *r, char **snapshot_dir, kiwi_error_t *err)
{
    const kiwi_step0_request *rq = ud;
    *snapshot_dir = NULL;
    if (in->install.argv.n == 0)
        return kiwi_phase_install (rq->env, rq->cfg, &(kiwi_install_request) { .argv = NULL }, r, err);
    if (rq->snapshot_root == NULL)
        return kiwi_error_make (err, 0, "no snapshot directory for Phase A");
    if (mkdir (rq->snapshot_root, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", rq->snapshot_root);
    char *dir = NULL;
    if (asprintf (&dir, "%s/%s", rq->snapshot_root, in->cache_key) < 0)
        return kiwi_error_make (err, ENOMEM, "step 0");
    cleanup_strv kiwi_strv dep_src = KIWI_STRV_INIT, dep_home = KIWI_STRV_INIT;
    if (kiwi_install_dep_locations (&in->install, &dep_src, &dep_home, err) < 0) {
        free (dir);
        return -1;
    }
    kiwi_install_request ir = {
        .image = in->image.image,
        .workspace = rq->inspect.root,
        .input = kiwi_strv_list (&in->input),
        .dep_src = kiwi_strv_list (&dep_src),
        .dep_home = kiwi_strv_list (&dep_home),
        .argv = kiwi_strv_list (&in->install.argv),
        .display = in->install.display,
        .extra_env = kiwi_strv_list (&in->install.install_env),
        .limits = rq->limits,
        .deadline_ms = rq->install_deadline_ms,
        .task_id = rq->task_id,
        .snapshot_dir = dir,
        .on_output = rq->on_output,
        .userdata = rq->userdata,
    };
    if (kiwi_phase_install (rq->env, rq->cfg, &ir, r, err) < 0) {
        free (dir);
        return -1;
    }
    if (r->status == KIWI_INSTALL_OK)
        *snapshot_dir = dir;
    else
        free (dir);
    return 0;
}

static bool
install_failed (const kiwi_install_result *r)
{
    return r->status != KIWI_INSTALL_OK && r->status != KIWI_INSTALL_SKIPPED;
}

static int
do_install (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err)
{
    kiwi_install_result_clear (&res->install);
    memset (&res->install, 0, sizeof res->install);
    free (res->snapshot_dir);
    res->snapshot_dir = NULL;
    kiwi_step0_install_fn fn = rq->install ? rq->install : default_install;
    void *ud = rq->install ? rq->install_userdata : (void *) rq;
    if (fn (ud, &res->insp, &res->install, &res->snapshot_dir, err) < 0)
        return kiwi_error_wrap (err, "Phase A for %s", res->insp.image.image);
    res->install_ms += res->install.duration_ms;
    return 0;
}

static int
do_verify (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err)
{
    kiwi_exec_result_clear (&res->run);
    kiwi_verify_request vr = {
        .image = res->insp.image.image,
        .workspace = rq->inspect.root,
        .snapshot_dir = res->snapshot_dir,
        .command = rq->inspect.test_command,
        .prelude = res->insp.install.verify_prelude,
        .extra_env = kiwi_strv_list (&res->insp.install.verify_env),
        .credentials = rq->credentials,
        .limits = rq->limits,
        .timeout_ms = rq->verify_timeout_ms,
        .output_cap = rq->output_cap,
        .task_id = rq->task_id,
        .on_output = rq->on_output,
        .userdata = rq->userdata,
    };
    if (kiwi_phase_verify (rq->env, rq->cfg, &vr, &res->run, NULL, NULL, err) < 0)
        return kiwi_error_wrap (err, "verify in %s", res->insp.image.image);
    res->verify_runs++;
    res->verify_ms += res->run.duration_ms;
    return 0;
}

static int
set_reason (kiwi_step0_result *res, kiwi_error_t *err, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static int
set_reason (kiwi_step0_result *res, kiwi_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    free (res->reason);
    int n = vasprintf (&res->reason, fmt, ap);
    va_end (ap);
    if (n < 0) {
        res->reason = NULL;
        return kiwi_error_make (err, ENOMEM, "step 0");
    }
    return 0;
}

/* Classifies a failure's output into *c and decides on it into *d
 * (cleared first). */
static int
classify_decide (const kiwi_step0_request *rq, kiwi_step0_result *res, const char *phase, const char *output,
                 kiwi_classification *c, kiwi_step0_decision *d, kiwi_error_t *err)
{
    kiwi_classify (rq->classifier, output, c);
    kiwi_step0_decision_clear (d);
    return kiwi_step0_decide (c, phase, rq->inspect.root, rq->inspect.test_command, &res->insp, rq->inspect.catalog,
                              d, err);
}

/* Classifies a failure's output and decides: the result's own. */
static int
examine (const kiwi_step0_request *rq, kiwi_step0_result *res, const char *phase, const char *output,
         kiwi_error_t *err)
{
    res->first_phase = phase;
    return classify_decide (rq, res, phase, output, &res->first, &res->decision, err);
}

/* Makes the inspection's image present (pulling it). An image that cannot
 * be had is an error, except a devcontainer's: resolution then goes on
 * past the devcontainer, and res->image_note says so. */
static int
ensure_image (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err)
{
    kiwi_error_t e = NULL;
    bool pulled = false;
    const char *image = res->insp.image.image;
    if (rq->unavailable_image != NULL && strcmp (image, rq->unavailable_image) == 0)
        kiwi_error_make_code (&e, rq->unavailable_code ? rq->unavailable_code : KIWI_SBE_NO_IMAGE, "%s",
                              rq->unavailable_why ? rq->unavailable_why : "unavailable");
    else if (kiwi_sandbox_ensure_image (rq->env, image, rq->pull_progress, rq->pull_userdata, &pulled, &e) == 0) {
        res->pulled = res->pulled || pulled;
        if (!pulled)
            return 0;
        /* it was not here when it was inspected: its digest, and the
         * install key that names it, are known only now */
        kiwi_inspection ni;
        if (kiwi_inspect_with_image (&rq->inspect, &res->insp.image, &ni, err) < 0)
            return -1;
        kiwi_inspection_clear (&res->insp);
        res->insp = ni; /* now owned by the result */
        return 0;
    }
    if (res->insp.image.source != KIWI_IMAGE_FROM_DEVCONTAINER || kiwi_error_code (e) == KIWI_SBE_CANCELLED
        || kiwi_error_code (e) == KIWI_SBE_UNAVAILABLE) {
        *err = kiwi_error_steal (&e);
        return kiwi_error_wrap (err, "image %s could not be pulled", image);
    }
    cleanup_free char *why = NULL;
    int n = asprintf (&why, "devcontainer image %s could not be pulled: %s", image, kiwi_error_msg (e));
    res->image_code = kiwi_error_code (e);
    free (res->image_unavailable);
    res->image_unavailable = strdup (image);
    kiwi_error_free (&e);
    if (res->image_unavailable == NULL)
        return kiwi_error_make (err, ENOMEM, "step 0");
    if (n < 0)
        return kiwi_error_make (err, ENOMEM, "step 0");
    kiwi_image_resolution next;
    if (kiwi_image_resolve_past_devcontainer (rq->inspect.root, rq->inspect.test_command, rq->inspect.catalog, why,
                                              &next, err)
        < 0)
        return -1;
    kiwi_inspection ni;
    int rc = kiwi_inspect_with_image (&rq->inspect, &next, &ni, err);
    /* "marker go.mod (go)", "the test command runs `npm` (node)": the reason's first clause */
    const char *r = next.reason ? next.reason : "";
    size_t cut = strcspn (r, ";");
    free (res->image_note);
    if (asprintf (&res->image_note, "%s; using %s from %.*s", why, next.image, (int) cut, r) < 0)
        res->image_note = NULL;
    kiwi_image_resolution_clear (&next);
    if (rc < 0)
        return -1;
    kiwi_inspection_clear (&res->insp);
    res->insp = ni; /* now owned by the result */
    free (res->first_image);
    res->first_image = strdup (res->insp.image.image);
    if (res->image_note == NULL || res->first_image == NULL)
        return kiwi_error_make (err, ENOMEM, "step 0");
    kiwi_info ("step 0: %s", res->image_note);
    return ensure_image (rq, res, err);
}

/* Replaces the inspection by the decision's image and re-installs. */
static int
swap (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err)
{
    kiwi_inspection next;
    if (kiwi_inspect_with_image (&rq->inspect, &res->decision.swap_to, &next, err) < 0)
        return -1;
    kiwi_inspection_clear (&res->insp);
    res->insp = next; /* now owned by the result */
    res->swapped = true;
    kiwi_info ("step 0: %s", res->decision.reason);
    if (ensure_image (rq, res, err) < 0)
        return -1;
    return do_install (rq, res, err);
}

static int run (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err);

/* Stops step 0 on one of the sandbox's ceilings: `stop` named, the reason
 * "STOP: `CMD` WHAT its KIND ceiling, N MB (SETTING raises it)". 1, or -1
 * on an error (res->reason NULL). */
static int
ceiling_stop (const kiwi_step0_request *rq, kiwi_step0_result *res, const char *stop, const char *what,
              const char *kind, int64_t mb, const char *setting, kiwi_error_t *err)
{
    res->status = KIWI_STEP0_STOPPED;
    res->decision.action = KIWI_STEP0_STOP;
    snprintf (res->decision.stop, sizeof res->decision.stop, "%s", stop);
    char ceiling[64];
    if (mb > 0)
        snprintf (ceiling, sizeof ceiling, "its %s ceiling, %lld MB", kind, (long long) mb);
    else
        snprintf (ceiling, sizeof ceiling, "its %s ceiling", kind);
    snprintf (res->decision.reason, sizeof res->decision.reason, "%s: `%s` %s %s (%s raises it)",
              stop, rq->inspect.test_command, what, ceiling, setting);
    if (set_reason (res, err, "stopped at step 0: %s", res->decision.reason) < 0)
        return -1;
    return 1;
}

/* A verify run the sandbox's memory ceiling killed (the kernel's OOM
 * killer, as the driver saw it: exit 137 with the ceiling hit, or the
 * sandbox gone with it) is no failure of the code: the tests never got the
 * memory to finish. Step 0 stops, naming the ceiling and the setting that
 * raises it, rather than hand the model a run cut short. 0 when it was not
 * killed so; 1 when the result is set (res->reason); -1 on an error
 * (res->reason NULL). */
static int
out_of_memory (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err)
{
    if (!res->run.oom_killed)
        return 0;
    char what[200];
    snprintf (what, sizeof what, "was killed in %s on reaching", res->insp.image.image);
    return ceiling_stop (rq, res, "out_of_memory", what, "memory", rq->limits.memory_mb, "KIWI_SANDBOX_MEMORY_MB",
                         err);
}

/* A verify run that failed on a full disk (the system's "No space left on
 * device": a build's output filling the sandbox's disk ceiling, tokio's
 * test build past 2 GB) is no failure of the code either: step 0 stops,
 * quoting the line and naming the ceiling and the setting that raises it.
 * The same returns as out_of_memory. */
static int
out_of_disk (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err)
{
    char line[KIWI_INSTALL_QUOTE_MAX + 16];
    if (!kiwi_run_output_disk_full (res->run.output, line, sizeof line))
        return 0;
    char what[400];
    snprintf (what, sizeof what, "ran out of disk in %s: its output says \"%s\"; the sandbox has", res->insp.image.image,
              line);
    return ceiling_stop (rq, res, "out_of_disk", what, "disk", rq->limits.disk_mb, "KIWI_MAX_SANDBOX_DISK_MB", err);
}

/* out_of_memory, then out_of_disk: the sandbox's ceilings, before the
 * classifier reads the output. */
static int
out_of_room (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err)
{
    int rc = out_of_memory (rq, res, err);
    return rc != 0 ? rc : out_of_disk (rq, res, err);
}

int
kiwi_step0_run (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err)
{
    if (run (rq, res, err) < 0)
        return -1;
    /* every version wish is answered: one the catalogue could not meet is
     * named beside the reason, whatever the verdict */
    res->wish_note = kiwi_image_wish_note (&res->insp.image);
    return 0;
}

static int
run (const kiwi_step0_request *rq, kiwi_step0_result *res, kiwi_error_t *err)
{
    memset (res, 0, sizeof *res);
    res->status = KIWI_STEP0_FAILED;
    if (kiwi_inspect (&rq->inspect, &res->insp, err) < 0)
        return -1;
    res->first_image = strdup (res->insp.image.image);
    if (res->first_image == NULL)
        return kiwi_error_make (err, ENOMEM, "step 0");
    if (ensure_image (rq, res, err) < 0)
        return -1;
    if (do_install (rq, res, err) < 0)
        return -1;
    if (install_failed (&res->install)) {
        if (examine (rq, res, "install", res->install.output, err) < 0)
            return -1;
        if (res->decision.action == KIWI_STEP0_SWAP) {
            if (swap (rq, res, err) < 0)
                return -1;
        }
        if (install_failed (&res->install)) {
            res->status = KIWI_STEP0_INSTALL_FAILED;
            /* what the classifier read in the install's output (before a
             * swap only: after one, it read the first install's) */
            char found[700] = "";
            if (!res->swapped)
                kiwi_step0_finding (&res->first, res->insp.image.image, found, sizeof found);
            return set_reason (res, err, "%s%s%s%s%s%s", res->install.reason, found[0] ? "; its output says " : "",
                               found, res->swapped ? " (after a swap: " : "", res->swapped ? res->decision.reason : "",
                               res->swapped ? ")" : "");
        }
    }
    if (do_verify (rq, res, err) < 0)
        return -1;
    if (res->run.exit_code == 0 && !res->run.timed_out && !res->run.sandbox_lost) {
        res->status = KIWI_STEP0_PASSED;
        return set_reason (res, err, "the test command passes in %s%s%s", res->insp.image.image,
                           res->swapped ? " after a swap: " : "", res->swapped ? res->decision.reason : "");
    }
    int oom = out_of_room (rq, res, err);
    if (oom != 0)
        return oom < 0 ? -1 : 0;
    if (res->swapped) { /* the install's failure was the one examined */
        res->status = KIWI_STEP0_FAILED;
        return set_reason (res, err, "an honest failure (exit %d) in %s after a swap", res->run.exit_code,
                           res->insp.image.image);
    }
    if (examine (rq, res, "verify", res->run.output, err) < 0)
        return -1;
    switch (res->decision.action) {
    case KIWI_STEP0_HONEST:
        res->status = KIWI_STEP0_FAILED;
        return set_reason (res, err, "an honest failure (exit %d%s): %s", res->run.exit_code,
                           res->run.timed_out ? ", timed out" : "", res->decision.reason);
    case KIWI_STEP0_STOP:
        res->status = KIWI_STEP0_STOPPED;
        return set_reason (res, err, "stopped at step 0: %s", res->decision.reason);
    case KIWI_STEP0_SWAP:
        break;
    }
    if (swap (rq, res, err) < 0)
        return -1;
    if (install_failed (&res->install)) {
        res->status = KIWI_STEP0_INSTALL_FAILED;
        return set_reason (res, err, "%s (after a swap: %s)", res->install.reason, res->decision.reason);
    }
    if (do_verify (rq, res, err) < 0)
        return -1;
    oom = out_of_room (rq, res, err);
    if (oom != 0)
        return oom < 0 ? -1 : 0;
    bool ok = res->run.exit_code == 0 && !res->run.timed_out && !res->run.sandbox_lost;
    if (!ok) {
        /* the failure in the new image is examined too: a test that needs
         * the network (or a service, a tool) there is a stop, not the
         * code's failure; no second swap is taken, and anything else keeps
         * the swap's classification and decision */
        kiwi_classification c;
        kiwi_step0_decision d = { 0 };
        if (classify_decide (rq, res, "verify", res->run.output, &c, &d, err) < 0) {
            kiwi_step0_decision_clear (&d);
            return -1;
        }
        if (d.action == KIWI_STEP0_STOP) {
            char swapped[sizeof res->decision.reason];
            snprintf (swapped, sizeof swapped, "%s", res->decision.reason);
            kiwi_step0_decision_clear (&res->decision);
            res->decision = d; /* now owned by the result */
            res->first = c;
            res->first_phase = "verify";
            res->status = KIWI_STEP0_STOPPED;
            return set_reason (res, err, "stopped at step 0 after a swap (%s): %s", swapped, res->decision.reason);
        }
        kiwi_step0_decision_clear (&d);
    }
    res->status = ok ? KIWI_STEP0_PASSED : KIWI_STEP0_FAILED;
    return set_reason (res, err, "%s after a swap (%s)", ok ? "passes" : "an honest failure", res->decision.reason);
}
