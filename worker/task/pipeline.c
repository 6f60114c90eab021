/*
 * pipeline.c: one task in the task process (see pipeline.h).
 */
#include "worker/task/pipeline.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "worker/task/cache.h"
#include "common/fs.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "worker/egress/egress-proxy.h"
#include "worker/egress/egress-record.h"
#include "worker/gc.h"
#include "common/log.h"
#include "sandbox/phases.h"
#include "worker/task/plan.h"
#include "worker/task/policy.h"
#include "common/proc.h"
#include "worker/task/repo.h"
#include "worker/task/result-fit.h"
#include "worker/task/secrets.h"
#include "worker/task/session.h"
#include "worker/task/store.h"
#include "common/strbuf.h"
#include "schemas/task-input.h"
#include "worker/shutdown.h"
#include "worker/worker-metrics.h"

extern char **environ;

static void
result_error (kiwi_result *out, kiwi_result_status st, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static void
result_error (kiwi_result *out, kiwi_result_status st, const char *fmt, ...)
{
    out->status = st;
    va_list ap;
    va_start (ap, fmt);
    kiwi_str_vset (&out->reason, fmt, ap);
    va_end (ap);
}

static void
rm_rf (const char *path)
{
    kiwi_error_t err = NULL;
    if (kiwi_fs_remove_tree (path, 300000, &err) < 0)
        kiwi_warn ("removing %s: %s", path, kiwi_error_msg (err));
    kiwi_error_free (&err);
}

/* Whether the directory open at `fd` looks like git metadata: a `.git`
 * entry (any case) in it, or the layout of a git directory (HEAD, objects/
 * and refs/), which git would take for a bare repository. */
static bool
looks_like_git (int fd)
{
    struct stat st;
    bool head = fstatat (fd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0;
    bool objects = fstatat (fd, "objects", &st, AT_SYMLINK_NOFOLLOW) == 0;
    bool refs = fstatat (fd, "refs", &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (head && objects && refs)
        return true;
    int dup_fd = dup (fd);
    if (dup_fd < 0)
        return true;
    DIR *d = fdopendir (dup_fd);
    if (d == NULL) {
        close (dup_fd);
        return true;
    }
    rewinddir (d);
    bool hit = false;
    struct dirent *e;
    while (!hit && (e = readdir (d)) != NULL)
        hit = strcasecmp (e->d_name, ".git") == 0;
    closedir (d);
    return hit;
}

/* The repository root inside the workspace: the task's subdirectory, walked
 * one component at a time from the workspace without following a symlink,
 * each a real directory that is neither git metadata nor shaped like it.
 * Caller frees. */
static char *
repo_root (const char *ws, const char *subdir, kiwi_error_t *err)
{
    if (subdir == NULL || *subdir == '\0')
        return strdup (ws);
    char norm[PATH_MAX];
    size_t o = 0;
    if (strlen (subdir) >= sizeof norm - strlen (ws) - 2) {
        kiwi_error_make (err, 0, "subdirectory `%s`: too long", subdir);
        return NULL;
    }
    cleanup_close int fd = open (ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        kiwi_error_make (err, errno, "opening the workspace");
        return NULL;
    }
    for (const char *p = subdir; *p;) {
        size_t l = strcspn (p, "/");
        char comp[256];
        if (l >= sizeof comp) {
            kiwi_error_make (err, 0, "subdirectory `%s`: a component is too long", subdir);
            return NULL;
        }
        memcpy (comp, p, l);
        comp[l] = '\0';
        p += l;
        while (*p == '/')
            p++;
        if (l == 0 || strcmp (comp, ".") == 0)
            continue;
        if (strcmp (comp, "..") == 0) {
            kiwi_error_make (err, 0, "subdirectory `%s`: `..` is not allowed", subdir);
            return NULL;
        }
        if (strncasecmp (comp, ".git", 4) == 0 && strspn (comp + 4, ". ") == l - 4) {
            kiwi_error_make (err, 0, "subdirectory `%s`: git metadata is not a repository root", subdir);
            return NULL;
        }
        int nfd = openat (fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0) {
            int e = errno;
            kiwi_error_make (err, e == ELOOP || e == ENOTDIR ? 0 : e,
                             "subdirectory `%s`: `%s` is %s", subdir, comp,
                             e == ELOOP || e == ENOTDIR ? "a symlink or not a directory: not followed"
                                                        : "not a directory inside the repository");
            return NULL;
        }
        close (fd);
        fd = nfd;
        if (looks_like_git (fd)) {
            kiwi_error_make (err, 0,
                             "subdirectory `%s`: `%s` holds git metadata or is laid out as a git directory (HEAD, "
                             "objects/, refs/): refused",
                             subdir, comp);
            return NULL;
        }
        if (o > 0)
            norm[o++] = '/';
        memcpy (norm + o, comp, l);
        o += l;
    }
    norm[o] = '\0';
    char *out = NULL;
    if (asprintf (&out, "%s%s%s", ws, o ? "/" : "", norm) < 0)
        out = NULL;
    return out;
}

/* The model client: the task's provider and model, or the worker's; the
 * base URL is the one the policy decided (never the task's unless the
 * operator's allow-list holds it). */
static kiwi_model_client *
open_model (const kiwi_pipeline *p, const kiwi_task *task, const char *base_url, char **model_name,
            kiwi_error_t *err)
{
    const kiwi_worker_config *cfg = p->cfg;
    const char *provider_name = cfg->model_provider;
    const char *name = cfg->model_name;
    if (task->has_model) {
        provider_name = kiwi_provider_name (task->model.provider);
        name = task->model.name;
    }
    if (provider_name != NULL && strcmp (provider_name, "scripted") == 0)
        provider_name = "anthropic"; /* the scripted test server speaks the providers' formats */
    const kiwi_model_provider *prov = kiwi_model_provider_find (provider_name, err);
    if (prov == NULL)
        return NULL;
    kiwi_error_t kerr = NULL;
    const char *key = kiwi_model_key_from_env (prov, p->host_env, &kerr);
    if (key == NULL && base_url == NULL) {
        *err = kiwi_error_steal (&kerr);
        return NULL;
    }
    kiwi_error_free (&kerr);
    kiwi_model_config mc = { .base_url = base_url, .api_key = key, .price_input_per_mtok = cfg->price_input_mtok,
                             .price_output_per_mtok = cfg->price_output_mtok };
    mc.redact = p->events->mask; /* no secret leaves in a prompt */
    if (task->limits.has_session_budget_usd_micros && cfg->price_input_mtok <= 0 && cfg->price_output_mtok <= 0)
        kiwi_warn ("task %s has a money budget but no model prices are configured (KIWI_MODEL_PRICE_INPUT, "
                   "KIWI_MODEL_PRICE_OUTPUT): only its token budget, if any, can end it",
                   task->id);
    kiwi_model_client *c = kiwi_model_client_open (prov, &mc, err);
    if (c == NULL)
        return NULL;
    *model_name = strdup (name ? name : "");
    return c;
}

/* What the install callback needs from the pipeline. */
typedef struct install_ctx {
    const kiwi_pipeline *p;
    const kiwi_task *task;
    kiwi_sandbox_env *sb;
    const kiwi_phase_config *pc;
    const char *root;
    kiwi_cache *cache;
    int64_t deadline_ms;
    int *hold; /* the lock holding the snapshot in force against the clean-up (gc.h), or -1 */
    int64_t install_ms; /* spent in install_cb so far (step 0's own time is the rest) */
    kiwi_store *store; /* the shared snapshot store, or NULL */
    const char *egress_log; /* the egress proxy's access log, or NULL (KIWI_INSTALL_EGRESS=open) */
    kiwi_nflog *nflog;      /* --once: the rules' rejects from its bridge (nflog.h), or NULL */
} install_ctx;

/* The Phase A sandbox running now (kiwi_install_request.on_started). */
typedef struct install_run {
    install_ctx *c;
    const char *command;
    char address[46];
    json_t *denials; /* --once: the rules' and the proxy's denials to tell (tell_once_denials) */
} install_run;

/* as the daemon's KIWI__DENIALS_TOLD_MAX */
#define KIWI_ONCE_DENIALS_TOLD_MAX 64

static void
install_started (const char *address, void *ud)
{
    install_run *run = ud;
    snprintf (run->address, sizeof run->address, "%s", address);
    if (address[0] != '\0')
        kiwi_events_sandbox (run->c->p->events, address, run->command);
}

/* kiwi_nflog_read's callback (--once): a rejected packet of this install's
 * sandbox is its egress_denied event. */
static void
firewall_denied (const kiwi_nflog_packet *pk, void *ud)
{
    install_run *run = ud;
    if (strcmp (pk->src, run->address) != 0 || json_array_size (run->denials) >= KIWI_ONCE_DENIALS_TOLD_MAX)
        return;
    json_array_append_new (run->denials, kiwi_nflog_denial_json (pk));
}

/* Every sandbox of `task`: the operator's memory, process and CPU ceilings,
 * the task's effective disk ceiling (kiwi_policy_task). */
static kiwi_sandbox_limits
sandbox_limits (const kiwi_worker_config *cfg, const kiwi_task *task)
{
    return (kiwi_sandbox_limits) { .memory_mb = cfg->memory_mb,
                                   .pids = cfg->pids,
                                   .cpus = (double) cfg->cpus,
                                   .disk_mb = task->limits.disk_mb };
}

static int
by_attempt (const void *a, const void *b)
{
    json_int_t x = json_integer_value (json_object_get (*(json_t *const *) a, "attempted_at"));
    json_int_t y = json_integer_value (json_object_get (*(json_t *const *) b, "attempted_at"));
    return (x > y) - (x < y);
}

/* --once: no daemon publishes the denials as they happen. The rules'
 * (read now from the NFLOG socket, which kept them) and the proxy's
 * (`proxied`, from its log) are each an event here, before the install
 * event, in the order they were attempted, at most
 * KIWI_ONCE_DENIALS_TOLD_MAX of them. */
static void
tell_once_denials (install_ctx *c, install_run *run, json_t *proxied)
{
    kiwi_error_t err = NULL;
    if (c->nflog != NULL) {
        kiwi_nflog_set_callback (c->nflog, firewall_denied, run);
        if (kiwi_nflog_read (c->nflog, &err) < 0) {
            kiwi_warn ("%s", kiwi_error_msg (err));
            kiwi_error_free (&err);
        }
        kiwi_nflog_set_callback (c->nflog, NULL, NULL);
    }
    size_t i, n = 0;
    json_t *d;
    json_array_foreach (proxied, i, d)
        if (n++ < KIWI_ONCE_DENIALS_TOLD_MAX)
            json_array_append_new (run->denials, json_deep_copy (d));
    n = json_array_size (run->denials);
    json_t **all = calloc (n ? n : 1, sizeof *all);
    if (all == NULL) {
        kiwi_warn ("no memory to tell %zu denied attempt(s)", n);
        return;
    }
    for (i = 0; i < n; i++)
        all[i] = json_array_get (run->denials, i);
    qsort (all, n, sizeof *all, by_attempt);
    for (i = 0; i < n && i < KIWI_ONCE_DENIALS_TOLD_MAX; i++) {
        json_t *ep = json_deep_copy (all[i]);
        if (ep != NULL && json_object_set_new (ep, "command", json_string (run->command)) == 0)
            kiwi_events_emit (c->p->events, KIWI_PHASE_INSTALL, "egress_denied", 0, ep);
        else
            json_decref (ep);
    }
    free (all);
}

/* What the install sent through the egress proxy, into the install event
 * `ev` ("egress"); a failed install's reason names the hosts it was denied
 * and the setting that would allow each. */
static void
record_egress (install_ctx *c, install_run *run, int64_t offset, kiwi_install_result *r, json_t *ev)
{
    if (c->egress_log == NULL || run->address[0] == '\0')
        return;
    kiwi_egress_record rec;
    kiwi_error_t err = NULL;
    if (kiwi_egress_record_read (c->egress_log, offset, run->address, c->p->cfg->install_egress, &rec, &err) < 0) {
        json_object_set_new (ev, "egress", json_pack ("{s:s}", "error", kiwi_error_msg (err)));
        kiwi_error_free (&err);
        return;
    }
    size_t i;
    json_t *d;
    if (c->p->own_proxy)
        tell_once_denials (c, run, rec.denied);
    json_object_set_new (ev, "egress", json_pack ("{s:O,s:I,s:I,s:O,s:I}", "hosts", rec.hosts, "requests",
                                                 (json_int_t) rec.requests, "bytes", (json_int_t) rec.bytes,
                                                 "denied", rec.denied, "denials", (json_int_t) rec.denials));
    if (rec.denials > 0 && r->status != KIWI_INSTALL_OK) {
        size_t len = strlen (r->reason);
        const char *said[3] = { NULL, NULL, NULL };
        int nsaid = 0;
        json_array_foreach (rec.denied, i, d) {
            const char *host = json_string_value (json_object_get (d, "host"));
            host = host ? host : "";
            bool dup = false;
            for (int k = 0; k < nsaid; k++)
                dup = dup || strcmp (said[k], host) == 0;
            if (dup)
                continue;
            if (nsaid == 3)
                break;
            said[nsaid++] = host;
            int n = snprintf (r->reason + len, sizeof r->reason - len, "; the egress proxy denied %s:%d (%s; %s allows it)",
                              host, (int) json_integer_value (json_object_get (d, "port")),
                              json_string_value (json_object_get (d, "rule")),
                              json_string_value (json_object_get (d, "allow_with")));
            if (n < 0 || (size_t) n >= sizeof r->reason - len)
                break; /* cut: the reason holds what fitted */
            len += (size_t) n;
        }
    }
    kiwi_egress_record_clear (&rec);
}

/* Fetches the snapshot `digest` from the store into `tmpdir` and publishes
 * it at `snapdir` (a concurrent fetch or install may have won the rename:
 * theirs is as good). */
static int
fetch_snapshot (install_ctx *c, const char *digest, const char *snapdir, const char *tmpdir, kiwi_error_t *err)
{
    int64_t disk_mb = c->task->limits.disk_mb > 0 ? c->task->limits.disk_mb : KIWI_PHASE_DEFAULT_DISK_MB;
    rm_rf (tmpdir);
    if (mkdir (tmpdir, 0700) < 0)
        return kiwi_error_make (err, errno, "creating %s", tmpdir);
    if (kiwi_store_pull (c->store, digest, tmpdir, (uint64_t) disk_mb * 1024 * 1024, err) < 0) {
        rm_rf (tmpdir);
        return -1;
    }
    if (rename (tmpdir, snapdir) < 0) {
        rm_rf (tmpdir);
        if (access (snapdir, R_OK) != 0)
            return kiwi_error_make (err, errno, "keeping the fetched snapshot %s", snapdir);
    }
    return 0;
}

/* Holds `snapshot` for the rest of the task instead of the one held so far.
 * Returns false when it is gone. */
static bool
hold_snapshot (install_ctx *c, const char *snapshot)
{
    int fd = kiwi_gc_snapshot_hold (snapshot);
    if (fd < 0)
        return false;
    if (*c->hold >= 0)
        close (*c->hold);
    *c->hold = fd;
    return true;
}

/* Phase A for `in`, or the cached snapshot of an identical install (the
 * cache key holds the install's input, the image by digest, the command,
 * the driver and the environment Kiwi sets). Phase A gets the input files
 * only and keeps the dependency locations only, so whatever it made is a
 * function of the key.
 * Step 0 calls it for the first image and again after a swap. A failed
 * install is a verdict in r, not an error. Emits the install event. */
static int
install_step (void *ud, const kiwi_inspection *in, kiwi_install_result *r, char **snapshot, kiwi_error_t *err)
{
    install_ctx *c = ud;
    const kiwi_pipeline *p = c->p;
    memset (r, 0, sizeof *r);
    *snapshot = NULL;
    const char *image = in->image.image;
    if (in->install.argv.n == 0) {
        r->status = KIWI_INSTALL_SKIPPED;
        snprintf (r->reason, sizeof r->reason, "no dependencies declared: Phase A skipped");
        kiwi_events_emit (p->events, KIWI_PHASE_INSTALL, "install", 0,
                          json_pack ("{s:s,s:s,s:s}", "status", "skipped", "image", image, "reason",
                                     "no dependencies declared"));
        return 0;
    }
    const char *key = in->cache_key;
    char snapdir[PATH_MAX], snapparent[PATH_MAX], tmpdir[PATH_MAX + 32];
    snprintf (snapparent, sizeof snapparent, "%s/snapshots", p->cfg->state_dir);
    snprintf (snapdir, sizeof snapdir, "%s/%s", snapparent, key);
    snprintf (tmpdir, sizeof tmpdir, "%s.%d.partial", snapdir, (int) getpid ());
    mkdir (snapparent, 0700);
    kiwi_install_entry e;
    int hit = kiwi_cache_get_install (c->cache, key, &e);
    bool fetched = false;
    if (hit == 1 && e.ok) {
        int src = kiwi_snapshot_source (access (snapdir, R_OK) == 0, e.digest, c->store != NULL);
        if (src == KIWI_SNAPSHOT_FETCH) {
            kiwi_error_t ferr = NULL;
            if (fetch_snapshot (c, e.digest, snapdir, tmpdir, &ferr) < 0) {
                kiwi_events_emit (p->events, KIWI_PHASE_INSTALL, "warning", 0,
                                  json_pack ("{s:s,s:s}", "warning", "snapshot not fetched from the store: installing",
                                             "reason", kiwi_error_msg (ferr)));
                kiwi_error_free (&ferr);
                src = KIWI_SNAPSHOT_INSTALL;
            } else
                fetched = true;
        }
        /* removed by the clean-up meanwhile, or nowhere to be had: a miss */
        if (src == KIWI_SNAPSHOT_INSTALL || !hold_snapshot (c, snapdir)) {
            kiwi_install_entry_clear (&e);
            hit = 0;
        } else
            utime (snapdir, NULL); /* in use: the clean-up leaves it */
    }
    if (hit == 1) {
        if (e.ok) {
            *snapshot = strdup (snapdir);
            r->status = KIWI_INSTALL_OK;
            snprintf (r->reason, sizeof r->reason, "cached install `%s`", in->install.display);
            kiwi_events_emit (p->events, KIWI_PHASE_INSTALL, "install", 0,
                              json_pack ("{s:s,s:b,s:b,s:s,s:s,s:s,s:i}", "status", "ok", "cached", 1, "fetched",
                                         fetched, "key", key, "image", image, "command", in->install.display,
                                         "duration_ms", 0));
        } else {
            r->status = KIWI_INSTALL_FAILED;
            snprintf (r->reason, sizeof r->reason, "%s (a cached failure of an identical install)",
                      e.reason ? e.reason : "install failed");
            kiwi_events_emit (p->events, KIWI_PHASE_INSTALL, "install", 0,
                              json_pack ("{s:s,s:b,s:s,s:s,s:s}", "status", "failed", "cached", 1, "key", key,
                                         "image", image, "reason", r->reason));
        }
        kiwi_install_entry_clear (&e);
        return 0;
    }
    cleanup_strv kiwi_strv dep_src = KIWI_STRV_INIT, dep_home = KIWI_STRV_INIT;
    if (kiwi_install_dep_locations (&in->install, &dep_src, &dep_home, err) < 0)
        return -1;
    kiwi_install_request req = {
        .image = image,
        .workspace = c->root,
        .input = kiwi_strv_list (&in->input),
        .dep_src = kiwi_strv_list (&dep_src),
        .dep_home = kiwi_strv_list (&dep_home),
        .argv = kiwi_strv_list (&in->install.argv),
        .extra_env = kiwi_strv_list (&in->install.install_env),
        /* c->task carries the effective limits (kiwi_policy_task) */
        .limits = sandbox_limits (p->cfg, c->task),
        .deadline_ms = c->deadline_ms - kiwi_now_ms () > 1 ? c->deadline_ms - kiwi_now_ms () : 1,
        .task_id = c->task->id,
        .snapshot_dir = tmpdir,
    };
    install_run run = { .c = c, .command = in->install.display, .denials = json_array () };
    int64_t log_offset = 0;
    if (c->egress_log != NULL) {
        log_offset = kiwi_egress_log_mark (c->egress_log);
        req.on_started = install_started;
        req.userdata = &run;
    }
    int prc = kiwi_phase_install (c->sb, c->pc, &req, r, err);
    if (run.address[0] != '\0')
        kiwi_events_sandbox (p->events, NULL, NULL);
    if (prc < 0) {
        json_decref (run.denials);
        rm_rf (tmpdir);
        return -1;
    }
    json_t *ev = json_pack ("{s:s,s:b,s:s,s:s,s:s,s:I,s:i}", "status", kiwi_install_status_str (r->status), "cached",
                            0, "key", key, "image", image, "command", in->install.display, "duration_ms",
                            (json_int_t) r->duration_ms, "exit_code", r->exit_code);
    record_egress (c, &run, log_offset, r, ev);
    json_decref (run.denials);
    if (r->status != KIWI_INSTALL_OK) {
        size_t ol = r->output ? strlen (r->output) : 0;
        json_object_set_new (ev, "reason", json_string (r->reason));
        json_object_set_new (ev, "output_tail", json_string (r->output ? r->output + (ol > 4000 ? ol - 4000 : 0) : ""));
        kiwi_events_emit (p->events, KIWI_PHASE_INSTALL, "install", 0, ev);
        if (r->status == KIWI_INSTALL_FAILED)
            kiwi_cache_put_install (c->cache, key, false, NULL, r->reason);
        rm_rf (tmpdir);
        return 0;
    }
    kiwi_events_emit (p->events, KIWI_PHASE_INSTALL, "install", 0, ev);
    /* publish the snapshot under its key; a concurrent identical install
     * may have won the rename: then use theirs */
    if (rename (tmpdir, snapdir) < 0) {
        rm_rf (tmpdir);
        if (access (snapdir, R_OK) != 0)
            return kiwi_error_make (err, errno, "keeping the install snapshot %s", snapdir);
    }
    if (!hold_snapshot (c, snapdir))
        return kiwi_error_make (err, errno, "holding the install snapshot %s", snapdir);
    char digest[KIWI_STORE_DIGEST_MAX] = "";
    if (c->store != NULL) {
        kiwi_error_t perr = NULL;
        if (kiwi_store_push (c->store, key, snapdir, digest, &perr) < 0) {
            kiwi_events_emit (p->events, KIWI_PHASE_INSTALL, "warning", 0,
                              json_pack ("{s:s,s:s}", "warning", "snapshot not shared: other hosts install again",
                                         "reason", kiwi_error_msg (perr)));
            kiwi_error_free (&perr);
        }
    }
    kiwi_cache_put_install (c->cache, key, true, digest[0] ? digest : NULL, "ok");
    *snapshot = strdup (snapdir);
    return 0;
}

/* install_step, timed for the metrics. */
static int
install_cb (void *ud, const kiwi_inspection *in, kiwi_install_result *r, char **snapshot, kiwi_error_t *err)
{
    install_ctx *c = ud;
    int64_t t0 = kiwi_mono_ms ();
    int rc = install_step (ud, in, r, snapshot, err);
    int64_t ms = kiwi_mono_ms () - t0;
    c->install_ms += ms;
    kiwi_events_observe (c->p->events, KIWI_OBS_PHASE, "install", (double) ms / 1000.0);
    return rc;
}

/* The sandbox driver's report of each sandbox it started, for the metrics. */
static void
sandbox_started (const char *driver, void *ud)
{
    kiwi_events_observe (ud, KIWI_OBS_SANDBOX, driver, 1);
}

/* The task's mask, installed in its event sink and its logger for the
 * length of kiwi_pipeline_run, and what it replaced there. */
typedef struct installed_mask {
    kiwi_mask *mask;
    kiwi_events *events;
    const kiwi_mask *prev_events, *prev_log;
} installed_mask;

static void
installed_mask_clear (installed_mask *im)
{
    if (im->events != NULL) {
        im->events->mask = im->prev_events;
        kiwi_log_set_mask (im->prev_log);
    }
    kiwi_mask_free (im->mask);
}

/* Steps 1-5 of `task` (with its effective limits) as the policy `pol`
 * decided; the result in *out. Returns < 0 when stopped by SIGTERM. */

/* --once: the rules' log of the bridge its proxy is on, read after Phase A
 * (the socket keeps what arrives meanwhile). NULL, with a warning, when it
 * cannot be had: the rules still reject, only the events are missing. */
static kiwi_nflog *
once_nflog (const kiwi_worker_config *cfg)
{
    kiwi_nflog *l = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_proxy_nflog_open (cfg, NULL, NULL, &l, &err) < 0) {
        kiwi_warn ("egress rules: %s: what they reject is not told as egress_denied events", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return NULL;
    }
    return l;
}

static int
run_task (const kiwi_pipeline *p, const kiwi_task *task, const kiwi_task_policy *pol, kiwi_result *out)
{
    const kiwi_worker_config *cfg = p->cfg;
    kiwi_error_t err = NULL;
    int rc = 0;
    int64_t deadline_ms = kiwi_now_ms () + (int64_t) task->limits.timeout_seconds * 1000;
    char ws[PATH_MAX];
    snprintf (ws, sizeof ws, "%s/work/%s-%d", cfg->state_dir, task->id, (int) getpid ());
    char workdir[PATH_MAX];
    snprintf (workdir, sizeof workdir, "%s/work", cfg->state_dir);
    mkdir (cfg->state_dir, 0755);
    mkdir (workdir, 0700);
    kiwi_repo_remove (ws);
    cleanup_free char *commit = NULL, *root = NULL, *snapshot = NULL, *model_name = NULL;
    kiwi_plan plan;
    kiwi_plan_init (&plan);
    kiwi_sandbox_env *sb = NULL;
    kiwi_sandbox_env *sb_ahead = NULL; /* the session's second env: verify sandboxes made ahead */
    kiwi_cache *cache = NULL;
    kiwi_store *store = NULL;
    kiwi_model_client *model = NULL;
    cleanup_strv kiwi_strv model_keys = KIWI_STRV_INIT;
    cleanup_strv kiwi_strv proxy_env = KIWI_STRV_INIT;
    int snapshot_hold = -1;
    pid_t proxy_pid = 0; /* the egress proxy this run started (own_proxy), or 0 */
    kiwi_nflog *nflog = NULL; /* its rules' log (own_proxy), or NULL */

    /* 1. the repository */
    /* the token only where the operator sends it (KIWI_GIT_TOKEN_HOSTS, https) */
    const char *token = pol->git_token ? cfg->git_token : NULL; /* read when the settings were loaded */
    kiwi_repo_opts ro = { .state_dir = cfg->state_dir, .token = token, .timeout_ms = cfg->clone_timeout_s * 1000,
                          .max_mb = cfg->clone_max_mb, .max_checkout_mb = cfg->checkout_max_mb,
                          .max_checkout_files = cfg->checkout_max_files,
                          .protocols = pol->git_protocols[0] ? pol->git_protocols : NULL };
    int64_t c0 = kiwi_mono_ms ();
    int checkout_rc = kiwi_repo_checkout (&ro, task->repo.url, task->repo.ref, ws, &commit, &err);
    kiwi_events_observe (p->events, KIWI_OBS_PHASE, "checkout", (double) (kiwi_mono_ms () - c0) / 1000.0);
    if (checkout_rc < 0) {
        int code = kiwi_error_code (err);
        const char *what = code == KIWI_REPO_E_NO_REF      ? "ref not found"
                           : code == KIWI_REPO_E_TOO_LARGE ? "repository too large"
                           : code == KIWI_REPO_E_UNSAFE    ? "repository refused"
                                                           : "repository unavailable";
        kiwi_events_emit (p->events, KIWI_PHASE_ACCEPTED, "checkout", 0,
                          json_pack ("{s:s,s:s}", "status", what, "reason", kiwi_error_msg (err)));
        result_error (out, KIWI_RESULT_ERROR, "%s: %s", what, kiwi_error_msg (err));
        goto done;
    }
    kiwi_events_emit (p->events, KIWI_PHASE_ACCEPTED, "checkout", 0,
                      json_pack ("{s:s,s:s,s:I}", "status", "ok", "commit", commit, "duration_ms",
                                 (json_int_t) (kiwi_mono_ms () - c0)));
    root = repo_root (ws, task->repo.subdir, &err);
    if (root == NULL) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        goto done;
    }

    /* 2. the sandbox driver */
    const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (cfg->sandbox, &err);
    kiwi_sandbox_config sc = { .docker_socket = cfg->docker_socket, .state_dir = cfg->state_dir,
                               .worker_id = cfg->worker_id,
                               .install_bridge = cfg->install_bridge, .on_start = sandbox_started,
                               .on_start_userdata = p->events, .registries = cfg->image_registries,
                               .registry_auth_file = cfg->registry_auth_file,
                               .pull_timeout_ms = cfg->pull_timeout_s * 1000, .pull_max_mb = cfg->pull_max_mb,
                               .firecracker = &cfg->fc };
    if (drv == NULL || kiwi_sandbox_env_open (drv, &sc, &sb, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "sandbox: %s", kiwi_error_msg (err));
        goto done;
    }
    /* 3. what the repository needs, and Phase A */
    if (kiwi_plan_make (cfg, sb, root, task->test_command, &plan, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "inspecting the repository: %s", kiwi_error_msg (err));
        goto done;
    }

    for (const char *k = cfg->model_key_vars; k && *k;) {
        size_t l = strcspn (k, ",");
        if (l)
            kiwi_strv_addf (&model_keys, "%.*s", (int) l, k);
        k += l;
        if (*k == ',')
            k++;
    }
    bool proxied = false;
    if (kiwi_proxy_phase_env (cfg, &proxy_env, &proxied, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        goto done;
    }
    if (proxied && p->own_proxy && kiwi_proxy_start_once (cfg, &proxy_pid, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        goto done;
    }
    if (proxied && p->own_proxy)
        nflog = once_nflog (cfg);
    kiwi_phase_config pc = {
        .proxy_env = proxied ? kiwi_strv_list (&proxy_env) : NULL,
        .host_env = p->host_env,
        .ca_bundle = cfg->ca_bundle,
        .install_timeout_ms = cfg->install_timeout_s * 1000,
        .extra_model_keys = kiwi_strv_list (&model_keys),
        .session_allow_test_creds = cfg->session_allow_test_creds,
        .copy_snapshot = cfg->snapshot_copy,
    };
    cache = kiwi_cache_open (cfg->redis_host, (int) cfg->redis_port, cfg->redis_user, cfg->redis_password,
                             cfg->cache_ttl_s, cfg->cache_fail_ttl_s);
    kiwi_cache_set_mask (cache, p->events->mask); /* installed by kiwi_pipeline_run */
    if (!kiwi_cache_available (cache))
        kiwi_events_emit (p->events, KIWI_PHASE_INSTALL, "warning", 0,
                          json_pack ("{s:s,s:s}", "warning", "cache unavailable: running uncached", "reason",
                                     kiwi_cache_error (cache)));
    /* 4. Phase A (or its cached snapshot) and step 0, which may swap the
     *    image and install again */
    if (cfg->store_url != NULL && *cfg->store_url != '\0') {
        kiwi_error_t serr = NULL;
        if (kiwi_store_open (cfg->store_url, cfg->store_user, cfg->store_password, &store, &serr) < 0) {
            kiwi_events_emit (p->events, KIWI_PHASE_INSTALL, "warning", 0,
                              json_pack ("{s:s,s:s}", "warning", "snapshot store unusable: snapshots stay on this host",
                                         "reason", kiwi_error_msg (serr)));
            kiwi_error_free (&serr);
        }
    }
    char egress_log[PATH_MAX + 16];
    if (proxied && kiwi_proxy_log_path (cfg, egress_log, sizeof egress_log, &err) < 0) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        goto done;
    }
    install_ctx ic = { .p = p, .task = task, .sb = sb, .pc = &pc, .root = root, .cache = cache,
                       .deadline_ms = deadline_ms, .hold = &snapshot_hold, .store = store,
                       .egress_log = proxied ? egress_log : NULL, .nflog = nflog };
    kiwi_step0_outcome s0;
    int64_t s0_start = kiwi_mono_ms ();
    kiwi_sandbox_limits s0_limits = sandbox_limits (cfg, task);
    int s0_rc = kiwi_plan_step0 (sb, &pc, &plan, root, ws, task, &s0_limits, cfg->sandbox, cache, deadline_ms,
                                 install_cb, &ic, p->events, &s0, &err);
    kiwi_events_observe (p->events, KIWI_OBS_PHASE, "step0",
                         (double) (kiwi_mono_ms () - s0_start - ic.install_ms) / 1000.0);
    if (s0_rc < 0) {
        if (p->stop && *p->stop) {
            rc = -1;
            goto done;
        }
        result_error (out, KIWI_RESULT_ERROR, "step 0: %s", kiwi_error_msg (err));
        goto done;
    }
    if (p->stop && *p->stop) {
        kiwi_step0_outcome_clear (&s0);
        rc = -1;
        goto done;
    }
    if (s0.status == KIWI_STEP0_INSTALL_FAILED) {
        result_error (out, KIWI_RESULT_INSTALL_FAILED, "%s%s%s%s", s0.reason ? s0.reason : "install failed",
                      s0.note ? " (" : "", s0.note ? s0.note : "", s0.note ? ")" : "");
        kiwi_step0_outcome_clear (&s0);
        goto done;
    }
    if (s0.status == KIWI_STEP0_STOPPED && s0.needs_network) {
        result_error (out, KIWI_RESULT_NEEDS_NETWORK, "%s", s0.reason);
        kiwi_step0_outcome_clear (&s0);
        goto done;
    }
    if (s0.status == KIWI_STEP0_STOPPED) {
        /* not the repository's bug: no round is spent on it */
        result_error (out, KIWI_RESULT_NOT_FIXED, "%s%s%s%s", s0.reason, s0.note ? " (" : "", s0.note ? s0.note : "",
                      s0.note ? ")" : "");
        kiwi_step0_outcome_clear (&s0);
        goto done;
    }
    if (s0.status == KIWI_STEP0_PASSED) {
        result_error (out, KIWI_RESULT_NOT_FIXED, "the tests already pass at %s: nothing to fix%s%s%s", task->repo.ref,
                      s0.note ? " (" : "", s0.note ? s0.note : "", s0.note ? ")" : "");
        kiwi_step0_outcome_clear (&s0);
        goto done;
    }
    snapshot = steal_pointer (&s0.snapshot);

    /* 5. the session */
    model = open_model (p, task, pol->model_base_url, &model_name, &err);
    if (model == NULL) {
        result_error (out, KIWI_RESULT_ERROR, "model: %s", kiwi_error_msg (err));
        kiwi_step0_outcome_clear (&s0);
        goto done;
    }
    /* the same driver again, for the session's thread that makes each
     * round's verify sandbox while the models work; it counts its
     * sandboxes itself, on the session's side (on_start runs in the
     * thread that creates) */
    kiwi_sandbox_config sc_ahead = sc;
    sc_ahead.on_start = NULL;
    sc_ahead.on_start_userdata = NULL;
    if (kiwi_sandbox_env_open (drv, &sc_ahead, &sb_ahead, &err) < 0) {
        kiwi_warn ("task %s: no second sandbox env (%s): each verify makes its own sandbox", task->id,
                   kiwi_error_msg (err));
        kiwi_error_free (&err);
        sb_ahead = NULL;
    }
    kiwi_session_env se = {
        .sandbox = sb,
        .sandbox_ahead = sb_ahead,
        .phase_cfg = &pc,
        .image = plan.image,
        .snapshot_dir = snapshot,
        .verify_env = kiwi_strv_list (&plan.verify_env),
        .verify_prelude = plan.verify_prelude,
        .limits = sandbox_limits (cfg, task),
        .workspace = root,
        .checkout = ws,
        .commit = commit,
        .step0_output = s0.output,
        .step0_exit = s0.exit_code,
        .model = model,
        .model_name = model_name,
        .deadline_ms = deadline_ms,
        .events = p->events,
        .stop = p->stop,
    };
    if (kiwi_session_run (&se, task, out, &err) < 0)
        result_error (out, KIWI_RESULT_ERROR, "session: %s", kiwi_error_msg (err));
    if (out->status != KIWI_RESULT_FIXED && s0.note != NULL) {
        char *r = NULL;
        if (asprintf (&r, "%s (%s)", out->reason ? out->reason : "", s0.note) >= 0) {
            free (out->reason);
            out->reason = r;
        }
    }
    if (p->stop && *p->stop)
        rc = -1;
    kiwi_step0_outcome_clear (&s0);

done:
    kiwi_error_free (&err);
    if (model)
        kiwi_model_client_close (model);
    kiwi_cache_close (cache);
    kiwi_store_close (store);
    kiwi_sandbox_env_close (sb_ahead);
    kiwi_sandbox_env_close (sb);
    kiwi_proxy_stop (proxy_pid);
    kiwi_nflog_close (nflog);
    kiwi_plan_clear (&plan);
    if (snapshot_hold >= 0)
        close (snapshot_hold);
    kiwi_repo_remove (ws);
    return rc;
}

int
kiwi_pipeline_run (const kiwi_pipeline *p, const kiwi_task *asked, kiwi_result *out)
{
    const kiwi_worker_config *cfg = p->cfg;
    int64_t t0 = kiwi_mono_ms ();
    out->task_id = strdup (asked->id);
    out->worker_id = strdup (cfg->worker_id);
    out->status = KIWI_RESULT_ERROR;
    int rc = 0;
    kiwi_error_t err = NULL;
    /* the secrets (secrets.h): masked in every event, the result, the logs,
     * the verify cache and the model's prompts, from the first event on (a
     * failed checkout may quote the git token) */
    __attribute__ ((cleanup (installed_mask_clear))) installed_mask im = { 0 };
    im.mask = kiwi_worker_mask (cfg, p->host_env, asked, &err);
    if (im.mask == NULL) {
        result_error (out, KIWI_RESULT_ERROR, "%s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return 0;
    }
    im.events = p->events;
    im.prev_events = p->events->mask;
    p->events->mask = im.mask;
    im.prev_log = kiwi_log_set_mask (im.mask);
    /* the operator's policy, before anything runs: a refusal is the result
     * (no fetch, no sandbox, no model request); otherwise the task runs with
     * the effective limits */
    kiwi_task_policy pol;
    if (kiwi_policy_apply (cfg, asked, &pol, &err) < 0) {
        kiwi_events_emit (p->events, KIWI_PHASE_ACCEPTED, "refused", 0,
                          json_pack ("{s:s}", "reason", kiwi_error_msg (err)));
        result_error (out, KIWI_RESULT_ERROR, "refused by the worker's policy: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
    } else {
        kiwi_task effective = kiwi_policy_task (asked, &pol);
        rc = run_task (p, &effective, &pol, out);
    }
    if (rc < 0)
        return rc; /* stopped: no result, no event; the task is redelivered */
    if (out->status == KIWI_RESULT_FIXED && out->diff == NULL)
        out->diff = strdup ("");
    if (out->status != KIWI_RESULT_FIXED) {
        free (out->diff);
        out->diff = NULL;
    }
    if (kiwi_result_keep_oversized (out, cfg->state_dir, KIWI_RESULT_DIFF_MAX, &err) < 0)
        kiwi_warn ("task %s: %s", asked->id, out->reason);
    kiwi_error_free (&err);
    out->duration_ms = (uint64_t) (kiwi_mono_ms () - t0);
    out->finished_at = kiwi_now_ms ();
    kiwi_events_emit (p->events, KIWI_PHASE_FINISHED, "finished", out->rounds,
                      json_pack ("{s:s,s:s,s:I,s:I}", "status", kiwi_result_status_name (out->status), "reason",
                                 out->reason ? out->reason : "", "rounds", (json_int_t) out->rounds, "duration_ms",
                                 (json_int_t) out->duration_ms));
    kiwi_events_mask_result (im.mask, out);
    return rc;
}

/* ---------- process entry points ---------- */

int
kiwi_pipeline_child_main (const kiwi_worker_config *cfg)
{
    volatile int *stop_flag = kiwi_shutdown_catch ();
    /* the task process dies with the daemon: a worker killed with -9 must
     * not leave its tasks worked on while another worker takes them over */
    prctl (PR_SET_PDEATHSIG, SIGTERM);
    if (getppid () == 1)
        return 75;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            if (cap > 64u * 1024 * 1024)
                return 70;
            buf = realloc (buf, cap);
        }
        ssize_t n = read (0, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t) n;
    }
    kiwi_task task;
    kiwi_error_t err = NULL;
    if (kiwi_task_decode (buf, len, &task, &err) < 0) {
        fprintf (stderr, "kiwi-worker task process: %s\n", kiwi_error_msg (err));
        free (buf);
        return 65;
    }
    free (buf);
    kiwi_events ev;
    kiwi_events_pipe_init (&ev, 3, task.id, cfg->worker_id);
    /* the daemon runs the egress proxy and publishes the denials */
    kiwi_pipeline p = { .cfg = cfg, .host_env = (const char *const *) environ, .events = &ev, .stop = stop_flag };
    kiwi_result r;
    kiwi_result_init (&r);
    int rc = kiwi_pipeline_run (&p, &task, &r);
    int status = 0;
    if (rc < 0)
        status = 75; /* stopped: no result, redelivered */
    else if (ev.result (&ev, &r) < 0)
        status = 74;
    kiwi_result_clear (&r);
    kiwi_task_clear (&task);
    return status;
}

int
kiwi_pipeline_once_main (const kiwi_worker_config *cfg, const char *path)
{
    volatile int *stop_flag = kiwi_shutdown_catch ();
    kiwi_task task;
    kiwi_task_init (&task);
    kiwi_error_t err = NULL;
    char *text = NULL;
    size_t len = 0;
    if (kiwi_read_file (path, 16u * 1024 * 1024, &text, &len, &err) < 0
        || kiwi_task_input_parse (text, len, &task, &err) < 0 || kiwi_task_input_finish (&task, "once", &err) < 0) {
        fprintf (stderr, "kiwi-worker: %s: %s\n", path, kiwi_error_msg (err));
        kiwi_error_free (&err);
        free (text);
        kiwi_task_clear (&task);
        return 2;
    }
    free (text);
    kiwi_events ev;
    kiwi_events_jsonl_init (&ev, stdout, task.id, cfg->worker_id);
    /* the accepted event with the effective limits (a refusal is the
     * pipeline's: its event and its error result) */
    kiwi_task_policy pol;
    if (kiwi_policy_apply (cfg, &task, &pol, &err) == 0)
        kiwi_events_emit (&ev, KIWI_PHASE_ACCEPTED, "accepted", 0,
                          json_pack ("{s:s,s:o}", "worker", cfg->worker_id, "limits", kiwi_policy_limits_json (&pol)));
    kiwi_error_free (&err);
    kiwi_pipeline p = { .cfg = cfg, .host_env = (const char *const *) environ, .events = &ev, .stop = stop_flag,
                        .own_proxy = true };
    kiwi_result r;
    kiwi_result_init (&r);
    int rc = kiwi_pipeline_run (&p, &task, &r);
    int status = 1;
    if (rc == 0) {
        ev.result (&ev, &r);
        status = r.status == KIWI_RESULT_FIXED ? 0 : 1;
    }
    kiwi_result_clear (&r);
    kiwi_task_clear (&task);
    return status;
}
