/*
 * plan.c: the task process's view of a repository, on top of the
 * repository inspection (inspect/inspect.h) and step 0 (sandbox/step0.h);
 * adds the worker's caches: the install snapshot (through the pipeline's
 * install callback) and the verify cache for the baseline run.
 */
#include "worker/task/plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "worker/task/failout.h"
#include "worker/task/repo.h"
#include "worker/egress/private-registry.h"
#include "common/sha256.h"

extern char **environ;

/* What step 0 keeps of its test run's output: the whole of most runs, so
 * that a failure printed early in a long run (a TAP `not ok` under
 * thousands of passes) still reaches the models (failout.h fits it for
 * them); and what the verify cache keeps of it, fitted the same way. */
#define STEP0_OUTPUT_KEPT (256 * 1024)
#define STEP0_OUTPUT_CACHED (32 * 1024)

void
kiwi_plan_init (kiwi_plan *p)
{
    memset (p, 0, sizeof *p);
}

static void
plan_fields_clear (kiwi_plan *p)
{
    free (p->image);
    free (p->image_reason);
    kiwi_strv_free (&p->install_argv);
    kiwi_strv_free (&p->install_env);
    kiwi_strv_free (&p->verify_env);
    free (p->cache_key);
    free (p->image_id);
    free (p->verify_prelude);
    p->image = p->image_reason = p->cache_key = p->image_id = p->verify_prelude = NULL;
}

void
kiwi_plan_clear (kiwi_plan *p)
{
    plan_fields_clear (p);
    kiwi_strv_free (&p->key_env);
    kiwi_inspection_clear (&p->insp);
    kiwi_image_catalog_free (p->cat);
    memset (p, 0, sizeof *p);
}

static int
copy_strv (kiwi_strv *dst, const kiwi_strv *src)
{
    for (size_t i = 0; i < src->n; i++)
        if (kiwi_strv_add (dst, src->v[i]) < 0)
            return -1;
    return 0;
}

/* Copies an inspection's image, install command, environments and cache
 * key into the plan's fields. */
static int
kiwi_plan_from_inspection (kiwi_plan *p, const kiwi_inspection *in, kiwi_error_t *err)
{
    plan_fields_clear (p);
    p->image = strdup (in->image.image);
    p->image_reason = strdup (in->image.reason ? in->image.reason : "");
    /* skipped installs still need a key for the verify cache */
    p->cache_key = strdup (in->cache_key[0] ? in->cache_key : "no-install");
    p->image_id = strdup (in->image_id ? in->image_id : "");
    if (in->install.verify_prelude != NULL && (p->verify_prelude = strdup (in->install.verify_prelude)) == NULL)
        return kiwi_error_make (err, ENOMEM, "plan");
    if (p->image == NULL || p->image_reason == NULL || p->cache_key == NULL || p->image_id == NULL
        || copy_strv (&p->install_argv, &in->install.argv) < 0 || copy_strv (&p->install_env, &in->install.install_env) < 0
        || copy_strv (&p->verify_env, &in->install.verify_env) < 0)
        return kiwi_error_make (err, ENOMEM, "plan");
    return 0;
}

/* The image's Id from the sandbox driver (kiwi_inspect_request.image_id). */
static int
image_id_of (void *ud, const char *image, char **id, kiwi_error_t *err)
{
    const kiwi_plan *p = ud;
    if (p->sandbox == NULL)
        return kiwi_error_make (err, 0, "no sandbox driver");
    return kiwi_sandbox_image_id (p->sandbox, image, id, err);
}

/* The inspection request of the plan: the key takes the image by digest and
 * the environment Kiwi sets in Phase A. */
static kiwi_inspect_request
inspect_request (kiwi_plan *p, const char *root, const char *test_command, const char *driver)
{
    return (kiwi_inspect_request) { .root = root, .test_command = test_command, .catalog = p->cat,
                                    .driver = driver, .image_id = image_id_of, .image_id_ud = p,
                                    .kiwi_env = kiwi_strv_list (&p->key_env) };
}

/* The verify cache's key of the plan into key, or "" when the plan's image
 * has no known digest (or the key cannot be made): such a run is not
 * cached. */
static void
verify_key (const kiwi_plan *plan, const char *tree, const char *sub, const char *command, const char *driver,
            char key[65])
{
    key[0] = '\0';
    if (plan->image_id == NULL || plan->image_id[0] == '\0')
        return;
    kiwi_plan_verify_key_input vk = { .tree = tree, .subdir = sub, .command = command, .install_key = plan->cache_key,
                                      .image = plan->image, .image_id = plan->image_id, .driver = driver };
    if (kiwi_plan_verify_key (&vk, key) < 0)
        key[0] = '\0';
}

/* The plan's inspection made again for the same image, now that it is
 * present: its digest and the install key that names it. */
static int
replan_with_image (kiwi_plan *p, const char *root, const char *test_command, const char *driver, kiwi_error_t *err)
{
    kiwi_inspect_request rq = inspect_request (p, root, test_command, driver);
    kiwi_inspection ni;
    if (kiwi_inspect_with_image (&rq, &p->insp.image, &ni, err) < 0)
        return -1;
    kiwi_inspection_clear (&p->insp);
    p->insp = ni; /* now owned by the plan */
    return kiwi_plan_from_inspection (p, &p->insp, err);
}

int
kiwi_plan_key_env (const kiwi_worker_config *cfg, const char *const *host_env, kiwi_strv *out, kiwi_error_t *err)
{
    kiwi_phase_config pc = { .host_env = host_env, .ca_bundle = cfg->ca_bundle };
    /* a proxy with credentials is refused by Phase A itself, naming it; a
     * repository with nothing to install must not fail on it here */
    kiwi_error_t kerr = NULL;
    if (kiwi_phase_install_key_env (&pc, out, &kerr) < 0) {
        kiwi_warn ("install cache key: %s", kiwi_error_msg (kerr));
        kiwi_error_free (&kerr);
    }
    /* what Phase A may reach decides what it can install: a failure because
     * a host was denied must not be served once the operator allows it */
    if (kiwi_strv_addf (out, "kiwi-install-egress=%s",
                        cfg->install_egress && *cfg->install_egress ? cfg->install_egress : "registries")
        < 0)
        return kiwi_error_make (err, ENOMEM, "install cache key");
    /* whose private packages Phase A could read: each registry and its
     * credential's scope hash, never the credential (private-registry.h) */
    kiwi_private_registries pr;
    if (kiwi_private_registries_parse (cfg->private_registries, &pr, err) < 0)
        return kiwi_error_wrap (err, "install cache key");
    int rc = kiwi_private_registries_key_env (&pr, out, err);
    kiwi_private_registries_clear (&pr);
    if (rc == 0)
        rc = kiwi_go_private_key_env (cfg, out, err);
    return rc < 0 ? kiwi_error_wrap (err, "install cache key") : 0;
}

int
kiwi_plan_make (const kiwi_worker_config *cfg, kiwi_sandbox_env *sandbox, const char *root,
                const char *test_command, kiwi_plan *p, kiwi_error_t *err)
{
    if (kiwi_image_catalog_open (cfg->image_catalog, &p->cat, err) < 0)
        return -1;
    p->sandbox = sandbox;
    if (kiwi_plan_key_env (cfg, (const char *const *) environ, &p->key_env, err) < 0)
        return -1;
    kiwi_inspect_request rq = inspect_request (p, root, test_command, cfg->sandbox);
    if (kiwi_inspect (&rq, &p->insp, err) < 0)
        return -1;
    return kiwi_plan_from_inspection (p, &p->insp, err);
}

typedef struct {
    kiwi_step0_install_fn fn;
    void *ud;
    kiwi_plan *plan;
} install_bridge;

static int
bridge_install (void *userdata, const kiwi_inspection *in, kiwi_install_result *r, char **snapshot_dir,
                kiwi_error_t *err)
{
    install_bridge *b = userdata;
    /* the plan follows the inspection step 0 is installing for (a swap) */
    if (kiwi_plan_from_inspection (b->plan, in, err) < 0)
        return -1;
    return b->fn (b->ud, in, r, snapshot_dir, err);
}

/* image_pull events while step 0 pulls an image: one when the bytes move,
 * and the last one with the image's size. */
typedef struct {
    kiwi_events *events;
    uint64_t last_done;
    bool started;
} pull_events;

static void
on_pull (const char *image, uint64_t done, uint64_t total, void *userdata)
{
    pull_events *pe = userdata;
    if (pe->started && done == pe->last_done)
        return;
    pe->started = true;
    pe->last_done = done;
    kiwi_events_emit (pe->events, KIWI_STAGE_STEP0, "image_pull", 0,
                      json_pack ("{s:s,s:I,s:I}", "image", image, "bytes", (json_int_t) done, "bytes_total",
                                 (json_int_t) total));
}

/* The version wish of the image in force: which version was asked for, by
 * which file, which image ran, and whether it has that version. NULL when
 * nothing asked for a version. */
static json_t *
version_json (const kiwi_image_resolution *im)
{
    if (im->requirement == NULL || im->requirement[0] == '\0')
        return NULL;
    return json_pack ("{s:s,s:s,s:s,s:s,s:b}", "runtime", im->runtime ? im->runtime : "", "asked", im->requirement,
                      "from", im->requirement_from ? im->requirement_from : "", "used", im->image, "satisfied",
                      im->satisfied);
}

int
kiwi_plan_verify_key (const kiwi_plan_verify_key_input *k, char out[65])
{
    char *in = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&in, &len);
    if (f == NULL)
        return -1;
    /* v2: the image by digest, the subdirectory always, the credential
     * names; every field with its length, so that no field (the task's
     * command, its subdirectory) can stand in for the next */
    const char *names[] = { "tree", "subdir", "command", "install", "image", "image-id", "driver" };
    const char *vals[] = { k->tree, k->subdir, k->command, k->install_key, k->image, k->image_id, k->driver };
    fputs ("kiwi-verify-v2\n", f);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        fprintf (f, "%s=%zu:%s\n", names[i], strlen (vals[i] ? vals[i] : ""), vals[i] ? vals[i] : "");
    for (size_t i = 0; k->credentials && k->credentials[i]; i++)
        fprintf (f, "credential=%zu:%s\n", strlen (k->credentials[i]), k->credentials[i]);
    if (fclose (f) != 0) {
        free (in);
        return -1;
    }
    kiwi_sha256_hex (in, out);
    free (in);
    return 0;
}

static json_t *
classification_json (const kiwi_step0_result *r)
{
    const kiwi_classification *c = &r->first;
    return json_pack ("{s:s,s:s,s:s}", "class", kiwi_failure_class_str (c->cls), "rule", c->rule, "evidence",
                      c->evidence);
}

int
kiwi_plan_step0 (kiwi_sandbox_env *sb, const kiwi_phase_config *pc, kiwi_plan *plan, const char *root,
                 const char *checkout, const kiwi_task *task, const kiwi_sandbox_limits *limits,
                 const char *driver, kiwi_cache *cache,
                 int64_t deadline_ms, kiwi_step0_install_fn install, void *install_ud, kiwi_events *events,
                 kiwi_step0_result *res, kiwi_error_t *err)
{
    memset (res, 0, sizeof *res);
    res->status = KIWI_STEP0_FAILED;
    cleanup_strv kiwi_strv creds = KIWI_STRV_INIT;
    for (size_t i = 0; i < task->n_test_credentials; i++)
        kiwi_strv_add (&creds, task->test_credentials[i]);

    /* the verify cache: the same tree, subdirectory, command, image (by tag
     * and digest), driver and install key ran before (only honest results
     * are kept, never a swap) */
    cleanup_free char *tree = NULL;
    char key[65] = "";
    size_t cl = strlen (checkout);
    const char *sub = strncmp (root, checkout, cl) == 0 && root[cl] == '/' ? root + cl : "";
    /* a run that holds credentials is neither served from the cache nor
     * kept in it: its output is that task's alone (another task on the
     * same tree and command must not read what it printed) */
    bool cacheable = task->n_test_credentials == 0 && kiwi_repo_tree_id (checkout, &tree, NULL) == 0;
    /* a cached run is of the plan's image, which must be here (pulled if
     * need be) for its digest to be in the key: one that cannot be had
     * leaves it to step 0's resolution */
    pull_events pe = { .events = events };
    bool pulled = false;
    cleanup_free char *unavailable = NULL, *unavailable_ref = NULL;
    int unavailable_code = 0;
    if (cacheable) {
        kiwi_error_t e = NULL;
        if (kiwi_sandbox_ensure_image (sb, plan->image, on_pull, &pe, &pulled, &e) < 0) {
            cacheable = false;
            /* step 0 is told, and does not pull it again */
            if (kiwi_error_code (e) != KIWI_SBE_CANCELLED && kiwi_error_code (e) != KIWI_SBE_UNAVAILABLE) {
                unavailable = strdup (kiwi_error_msg (e));
                unavailable_ref = strdup (plan->image); /* plan->image changes as step 0 installs */
                unavailable_code = kiwi_error_code (e);
            }
        }
        kiwi_error_free (&e);
    }
    /* an image that was not here when the plan was made had no digest, nor
     * had the keys that name it: the plan is made again with the image
     * present (an entry under an unknown digest would answer for whatever
     * image the tag names on the next host that pulls it) */
    if (cacheable && pulled && replan_with_image (plan, root, task->test_command, driver, err) < 0)
        return -1;
    if (cacheable)
        verify_key (plan, tree, sub, task->test_command, driver, key);
    kiwi_verify_entry ve;
    if (key[0] && kiwi_cache_get_verify (cache, key, &ve) == 1) {
        /* the install still has to be in place for the session */
        kiwi_install_result ir;
        memset (&ir, 0, sizeof ir);
        if (install (install_ud, &plan->insp, &ir, &res->snapshot_dir, err) < 0) {
            /* an install that could not run to a verdict (a sandbox error,
             * Kiwi's own fault: pipeline-install.c) is the task's error,
             * as on step 0's own path, never the repository's */
            kiwi_verify_entry_clear (&ve);
            kiwi_install_result_clear (&ir);
            return -1;
        }
        kiwi_install_result_clear (&ir);
        res->run.exit_code = ve.exit_code;
        res->run.output = steal_pointer (&ve.output);
        kiwi_verify_entry_clear (&ve);
        res->status = res->run.exit_code == 0 ? KIWI_STEP0_PASSED : KIWI_STEP0_FAILED;
        json_t *cev = json_pack ("{s:b,s:b,s:i,s:s,s:s,s:b}", "cached", 1, "pulled", pulled, "exit_code",
                                 res->run.exit_code, "status", kiwi_step0_status_str (res->status),
                                 "image", plan->image, "swapped", 0);
        json_t *ver = version_json (&plan->insp.image);
        if (ver)
            json_object_set_new (cev, "version", ver);
        res->wish_note = kiwi_image_wish_note (&plan->insp.image);
        if (res->wish_note)
            json_object_set_new (cev, "note", json_string (res->wish_note));
        kiwi_events_emit (events, KIWI_STAGE_STEP0, "step0", 0, cev);
        return 0;
    }

    kiwi_classifier *cls = NULL;
    if (kiwi_classifier_builtin (&cls, err) < 0)
        return -1;
    install_bridge b = { .fn = install, .ud = install_ud, .plan = plan };
    int64_t left = deadline_ms - kiwi_mono_ms ();
    kiwi_step0_request rq = {
        .env = sb,
        .cfg = pc,
        .inspect = inspect_request (plan, root, task->test_command, driver),
        .classifier = cls,
        .credentials = kiwi_strv_list (&creds),
        .limits = *limits,
        .verify_timeout_ms = left > 1 ? left : 1,
        .install_deadline_ms = left > 1 ? left : 1,
        .output_cap = STEP0_OUTPUT_KEPT,
        .task_id = task->id,
        .install = bridge_install,
        .install_userdata = &b,
        .pull_progress = on_pull,
        .pull_userdata = &pe,
        .unavailable_image = unavailable ? unavailable_ref : NULL,
        .unavailable_why = unavailable,
        .unavailable_code = unavailable_code,
    };
    int rc = kiwi_step0_run (&rq, res, err);
    kiwi_classifier_free (cls);
    if (rc < 0 || kiwi_plan_from_inspection (plan, &res->insp, err) < 0) {
        kiwi_step0_result_clear (res);
        return -1;
    }
    /* the reason the result gives: step 0's, else its decision's; an
     * install failure's starts with the install's own (what its output
     * says, the egress denials) and adds what the classifier read in it */
    char *reason = strdup (res->reason ? res->reason : res->decision.reason);
    if (res->status == KIWI_STEP0_INSTALL_FAILED) {
        free (reason);
        reason = strdup (res->reason ? res->reason : (res->install.reason[0] ? res->install.reason : "install failed"));
    }
    free (res->reason);
    res->reason = reason;
    cleanup_free char *output = kiwi_failout_clean_tail (res->run.output, 2000, NULL);
    json_t *ev = json_pack ("{s:b,s:s,s:i,s:s,s:b,s:s,s:s,s:i,s:I,s:s}", "cached", 0, "status",
                            kiwi_step0_status_str (res->status), "exit_code", res->run.exit_code, "image",
                            plan->image, "swapped", res->swapped, "first_image",
                            res->first_image ? res->first_image : plan->image, "reason",
                            res->reason ? res->reason : "", "verify_runs", res->verify_runs, "duration_ms",
                            (json_int_t) (res->install_ms + res->verify_ms), "output_tail", output ? output : "");
    json_object_set_new (ev, "classification", classification_json (res));
    if (res->decision.stop[0] != '\0')
        json_object_set_new (ev, "stop", json_string (res->decision.stop));
    json_object_set_new (ev, "image_reason", json_string (res->insp.image.reason ? res->insp.image.reason : ""));
    json_object_set_new (ev, "pulled", json_boolean (res->pulled || pulled));
    if (res->image_note)
        json_object_set_new (ev, "image_note", json_string (res->image_note));
    /* the same typed: which image, and whether the operator's settings
     * refused it or it could not be had */
    if (res->image_unavailable)
        json_object_set_new (ev, "image_unavailable",
                             json_pack ("{s:s,s:s}", "image", res->image_unavailable, "cause",
                                        res->image_code == KIWI_SBE_REFUSED    ? "refused"
                                        : res->image_code == KIWI_SBE_TIMEOUT  ? "timeout"
                                        : res->image_code == KIWI_SBE_NO_IMAGE ? "unavailable"
                                                                               : "failed"));
    json_t *ver = version_json (&res->insp.image);
    if (ver)
        json_object_set_new (ev, "version", ver);
    /* what the result says besides its own reason: the image that could
     * not be had, the version that was not there */
    if (res->image_note || res->wish_note) {
        cleanup_free char *note = kiwi_step0_result_note (res);
        json_object_set_new (ev, "note", json_string (note ? note : ""));
    }
    kiwi_events_emit (events, KIWI_STAGE_STEP0, "step0", 0, ev);
    /* kept under the plan's image only when that image ran */
    if (key[0] && !res->swapped && res->image_note == NULL && !res->run.timed_out
        && (res->status == KIWI_STEP0_PASSED || res->status == KIWI_STEP0_FAILED)) {
        /* the cache keeps the failure as the models get it, not the whole run */
        cleanup_free char *fit = kiwi_failout_fit (res->run.output, STEP0_OUTPUT_CACHED);
        kiwi_cache_put_verify (cache, key, res->run.exit_code, fit ? fit : res->run.output);
    }
    return 0;
}
