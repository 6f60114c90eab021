/*
 * pipeline-install.c: Phase A as the pipeline runs it for step 0 (see
 * pipeline-internal.h): the install cache and the shared snapshot store,
 * the snapshot held against the clean-up, the install event with what the
 * install sent through the egress proxy, and, under --once where no daemon
 * does it, the egress denials told as events.
 */
#include "worker/task/pipeline-internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/enum.h"
#include "common/fs.h"
#include "common/log.h"
#include "worker/egress/egress.h"
#include "worker/egress/egress-proxy.h"
#include "worker/egress/egress-record.h"
#include "worker/egress/fetch-manifest.h"
#include "worker/gc.h"
#include "worker/worker-metrics.h"
#include "worker/task/failout.h"

static void
rm_rf (const char *path)
{
    kiwi_error_t err = NULL;
    if (kiwi_fs_remove_tree (path, 300000, &err) < 0)
        kiwi_warn ("removing %s: %s", path, kiwi_error_msg (err));
    kiwi_error_free (&err);
}

/* The Phase A sandbox running now (kiwi_install_request.on_started). */
typedef struct install_run {
    kiwi__pipeline_install_ctx *c;
    const char *command;
    char address[46];
    kiwi_egress_window window; /* when the sandbox had that address: from its start to its end */
    json_t *denials; /* --once: the rules' and the proxy's denials to tell (tell_once_denials) */
} install_run;

/* as the daemon's KIWI__DENIALS_TOLD_MAX */
#define KIWI_ONCE_DENIALS_TOLD_MAX 64

static void
install_started (const char *address, void *ud)
{
    install_run *run = ud;
    snprintf (run->address, sizeof run->address, "%s", address);
    /* it runs, its command not yet: from here on its address is its own */
    run->window.since_ms = kiwi_wall_ms ();
    if (address[0] != '\0')
        kiwi_events_sandbox (run->c->p->events, address, run->window.since_ms, run->command);
}

/* kiwi_nflog_read's callback (--once): a rejected packet of this install's
 * sandbox is its egress_denied event. */
static void
firewall_denied (const kiwi_nflog_packet *pk, void *ud)
{
    install_run *run = ud;
    if (strcmp (pk->src, run->address) != 0 || !kiwi_egress_in_window (pk->at_ms, run->window)
        || json_array_size (run->denials) >= KIWI_ONCE_DENIALS_TOLD_MAX)
        return;
    json_array_append_new (run->denials, kiwi_nflog_denial_json (pk));
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
tell_once_denials (kiwi__pipeline_install_ctx *c, install_run *run, json_t *proxied)
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
            kiwi_events_emit (c->p->events, KIWI_STAGE_INSTALL, "egress_denied", 0, ep);
        else
            json_decref (ep);
    }
    free (all);
}

/* Adds the denials of `list` (those "via" `via`, or all when NULL) to a
 * failed install's reason: each host once, as long as `said` has room,
 * with the setting that would allow it. */
static void
say_denials (kiwi_install_result *r, json_t *list, const char *via, const char **said, int *nsaid)
{
    size_t i, len = strlen (r->reason);
    json_t *d;
    json_array_foreach (list, i, d) {
        const char *dvia = json_string_value (json_object_get (d, "via"));
        if (via != NULL && (dvia == NULL || strcmp (dvia, via) != 0))
            continue;
        const char *host = json_string_value (json_object_get (d, "host"));
        host = host ? host : "";
        bool dup = false;
        for (int k = 0; k < *nsaid; k++)
            dup = dup || strcmp (said[k], host) == 0;
        if (dup)
            continue;
        if (*nsaid == 3)
            break;
        said[(*nsaid)++] = host;
        /* a refused write names its method ("denied PUT registry.npmjs.org:443") */
        const char *method = json_string_value (json_object_get (d, "method"));
        const char *rule = json_string_value (json_object_get (d, "rule"));
        const char *allow = json_string_value (json_object_get (d, "allow_with"));
        /* a host off the list may be a private registry, which listing
         * alone would not open: it needs its credential, and the proxy
         * holds that only when the operator declares it */
        bool named = rule != NULL && strcmp (rule, KIWI_PROXY_RULE_HOST) == 0 && allow != NULL
                     && strncmp (allow, "KIWI_INSTALL_EGRESS=", 20) == 0;
        int n = snprintf (r->reason + len, sizeof r->reason - len, "; the %s denied %s%s%s:%d (%s; %s allows it%s%s%s)",
                          via ? via : "egress proxy", method ? method : "", method ? " " : "", host,
                          (int) json_integer_value (json_object_get (d, "port")), rule, allow,
                          named ? ", or KIWI_PRIVATE_REGISTRIES=" : "", named ? host : "",
                          named ? "=@FILE if it is a private registry that needs a credential" : "");
        if (n < 0 || (size_t) n >= sizeof r->reason - len)
            break; /* cut: the reason holds what fitted */
        len += (size_t) n;
    }
}

/* What the install downloaded (fetch-manifest.h), into the install event
 * `ev` ("fetched"), and for an install that succeeded as fetched.json in
 * its snapshot `snapdir`. A manifest that cannot be read or kept is said
 * in the event; the install stands. */
static void
record_fetched (kiwi__pipeline_install_ctx *c, install_run *run, kiwi_egress_log_pos offset, kiwi_install_result *r,
                const char *snapdir, json_t *ev)
{
    if (c->fetch_log == NULL || run->address[0] == '\0')
        return;
    kiwi_fetch_manifest m;
    kiwi_error_t err = NULL;
    char hex[65], path[PATH_MAX];
    if (kiwi_fetch_manifest_read (c->fetch_log, offset, run->address, run->window, &m, &err) < 0) {
        json_object_set_new (ev, "fetched", json_pack ("{s:s}", "error", kiwi_error_msg (err)));
        kiwi_error_free (&err);
        return;
    }
    bool kept = false;
    if (r->status == KIWI_INSTALL_OK) {
        snprintf (path, sizeof path, "%s/fetched.json", snapdir);
        if (kiwi_fetch_manifest_write (&m, path, hex, &err) == 0)
            kept = true;
    }
    json_t *sum = kiwi_fetch_manifest_summary (&m, kept ? hex : NULL);
    if (sum && err != NULL)
        json_object_set_new (sum, "error", json_string (kiwi_error_msg (err)));
    kiwi_error_free (&err);
    json_object_set_new (ev, "fetched", sum);
    kiwi_fetch_manifest_clear (&m);
}

/* What the install sent through the egress proxy, into the install event
 * `ev` ("egress"); a failed install's reason names the hosts it was denied
 * and the setting that would allow each. */
static void
record_egress (kiwi__pipeline_install_ctx *c, install_run *run, kiwi_egress_log_pos offset, kiwi_install_result *r,
               json_t *ev)
{
    if (c->egress_log == NULL || run->address[0] == '\0')
        return;
    kiwi_egress_record rec;
    kiwi_error_t err = NULL;
    if (kiwi_egress_record_read (c->egress_log, offset, run->address, run->window, c->p->cfg->install_egress, &rec,
                                 &err) < 0) {
        json_object_set_new (ev, "egress", json_pack ("{s:s}", "error", kiwi_error_msg (err)));
        kiwi_error_free (&err);
        return;
    }
    if (c->p->own_proxy)
        tell_once_denials (c, run, rec.denied);
    json_object_set_new (ev, "egress", json_pack ("{s:O,s:I,s:I,s:O,s:I,s:I}", "hosts", rec.hosts, "requests",
                                                 (json_int_t) rec.requests, "bytes", (json_int_t) rec.bytes,
                                                 "denied", rec.denied, "denials", (json_int_t) rec.denials,
                                                 "tunnels", (json_int_t) rec.tunnels));
    if (rec.incomplete)
        json_object_set_new (json_object_get (ev, "egress"), "incomplete", json_true ());
    if (r->status != KIWI_INSTALL_OK) {
        /* the proxy's denials, then (--once, where this process read
         * them) the firewall's: three hosts at most */
        int nsaid = 0;
        const char *said[3] = { NULL, NULL, NULL };
        if (rec.denials > 0)
            say_denials (r, rec.denied, NULL, said, &nsaid);
        say_denials (r, run->denials, "firewall", said, &nsaid);
    }
    kiwi_egress_record_clear (&rec);
}

/* Fetches the snapshot `digest` from the store into `tmpdir` and publishes
 * it at `snapdir` (a concurrent fetch or install may have won the rename:
 * theirs is as good). */
static int
fetch_snapshot (kiwi__pipeline_install_ctx *c, const char *digest, const char *snapdir, const char *tmpdir, kiwi_error_t *err)
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
hold_snapshot (kiwi__pipeline_install_ctx *c, const char *snapshot)
{
    int fd = kiwi_gc_snapshot_hold (snapshot);
    if (fd < 0)
        return false;
    if (*c->hold >= 0)
        close (*c->hold);
    *c->hold = fd;
    return true;
}

KIWI_ENUM_STR_FN (kiwi_install_fault_str, kiwi_install_fault, KIWI_INSTALL_FAULTS)

kiwi_install_fault
kiwi_install_fault_after (kiwi_install_status status, pid_t before, pid_t after)
{
    if (status == KIWI_INSTALL_OK || status == KIWI_INSTALL_SKIPPED)
        return KIWI_INSTALL_FAULT_NONE;
    return before > 0 && after == before ? KIWI_INSTALL_FAULT_NONE : KIWI_INSTALL_FAULT_PROXY;
}

/* Kiwi's own fault instead of Phase A's verdict: the install event says
 * so (status "error", the cause), nothing is cached, and *err carries the
 * reason for the task's `error` result. Returns -1. */
static int
install_fault (kiwi__pipeline_install_ctx *c, const kiwi_inspection *in, kiwi_install_fault f, const char *why,
               kiwi_error_t *err)
{
    kiwi_events_emit (c->p->events, KIWI_STAGE_INSTALL, "install", 0,
                      json_pack ("{s:s,s:s,s:b,s:s,s:s,s:s,s:s}", "status", "error", "cause", kiwi_install_fault_str (f),
                                 "cached", 0, "key", in->cache_key, "image", in->image.image, "command",
                                 in->install.display, "reason", why));
    return kiwi_error_make (err, 0, "Phase A not run to a verdict (%s, Kiwi's fault, not the repository's; nothing "
                                    "cached): %s",
                            kiwi_install_fault_str (f), why);
}

/* The worker's egress proxy before Phase A, its Squid's pid in *pid. The
 * worker restarts a Squid that ended (after at most PROXY_WAIT_MS of
 * back-off and start), so a task that finds none waits for it rather than
 * failing, within the task's deadline; -1 with why[cap] when it is not
 * back in time. */
#define PROXY_WAIT_MS 45000
static int
proxy_wait (kiwi__pipeline_install_ctx *c, pid_t *pid, char *why, size_t cap)
{
    int64_t start = kiwi_mono_ms (), until = start + PROXY_WAIT_MS;
    if (until > c->deadline_ms)
        until = c->deadline_ms;
    bool told = false;
    for (;;) {
        kiwi_error_t aerr = NULL;
        if (kiwi_proxy_alive (c->p->cfg, pid, &aerr) == 0) {
            if (told)
                kiwi_info ("the egress proxy is back (squid pid %d) after %lld ms", (int) *pid,
                           (long long) (kiwi_mono_ms () - start));
            return 0;
        }
        if (kiwi_mono_ms () >= until) {
            snprintf (why, cap, "%s (waited %lld ms for the worker to restart it)", kiwi_error_msg (aerr),
                      (long long) (kiwi_mono_ms () - start));
            kiwi_error_free (&aerr);
            return -1;
        }
        if (!told)
            kiwi_warn ("%s: waiting up to %lld ms for the worker to restart it before Phase A", kiwi_error_msg (aerr),
                       (long long) (until - kiwi_mono_ms ()));
        told = true;
        kiwi_error_free (&aerr);
        struct timespec ts = { .tv_sec = 0, .tv_nsec = 250 * 1000000L };
        nanosleep (&ts, NULL);
    }
}

/* --once, before its first Phase A: the host's egress rules, as the daemon
 * has them (KIWI_EGRESS_APPLY applies them, egress.sh check compares), or
 * the operator's explicit KIWI_ONCE_EGRESS_UNCHECKED, logged and told as a
 * warning event. 0 when Phase A may run; -1 with why[cap] (the check's
 * detail, with the command that fixes it) when not. */
static int
once_rules (kiwi__pipeline_install_ctx *c, char *why, size_t cap)
{
    const kiwi_worker_config *cfg = c->p->cfg;
    if (c->rules_checked)
        return 0;
    kiwi_egress_apply_if_set (cfg);
    char detail[2048];
    if (kiwi_egress_rules_hold (cfg, detail, sizeof detail)) {
        c->rules_checked = true;
        return 0;
    }
    if (cfg->once_egress_unchecked) {
        kiwi_warn ("KIWI_ONCE_EGRESS_UNCHECKED=true: Phase A runs although the host's egress rules do not hold: %s",
                   detail);
        kiwi_events_emit (c->p->events, KIWI_STAGE_INSTALL, "warning", 0,
                          json_pack ("{s:s,s:s,s:s}", "warning",
                                     "egress rules not in place: Phase A runs without them (KIWI_ONCE_EGRESS_UNCHECKED=true)",
                                     "setting", "KIWI_ONCE_EGRESS_UNCHECKED", "reason", detail));
        c->rules_checked = true;
        c->rules_unchecked = true;
        return 0;
    }
    snprintf (why, cap, "the host's egress rules do not hold, so Phase A would reach what they close: %s (or, knowing "
                        "that, set KIWI_ONCE_EGRESS_UNCHECKED=true)",
              detail);
    return -1;
}

/* Whether the install failed because an index gives no upload times and
 * Phase A was asked to resolve as of the commit's (kiwi_phase_config's
 * resolve_before): it is then run again as of now, and the refusal is no
 * verdict of the install key. */
static bool
time_refused (const kiwi__pipeline_install_ctx *c, const kiwi_install_result *r)
{
    return r->status == KIWI_INSTALL_FAILED && c->pc->resolve_before != NULL
           && kiwi_phase_resolve_before_refused (r->output);
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
    kiwi__pipeline_install_ctx *c = ud;
    const kiwi_pipeline *p = c->p;
    memset (r, 0, sizeof *r);
    *snapshot = NULL;
    const char *image = in->image.image;
    if (in->install.argv.n == 0) {
        r->status = KIWI_INSTALL_SKIPPED;
        snprintf (r->reason, sizeof r->reason, "no dependencies declared: Phase A skipped");
        kiwi_events_emit (p->events, KIWI_STAGE_INSTALL, "install", 0,
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
                kiwi_events_emit (p->events, KIWI_STAGE_INSTALL, "warning", 0,
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
            kiwi_events_emit (p->events, KIWI_STAGE_INSTALL, "install", 0,
                              json_pack ("{s:s,s:b,s:b,s:s,s:s,s:s,s:i}", "status", "ok", "cached", 1, "fetched",
                                         fetched, "key", key, "image", image, "command", in->install.display,
                                         "duration_ms", 0));
        } else {
            r->status = KIWI_INSTALL_FAILED;
            snprintf (r->reason, sizeof r->reason, "%s (a cached failure of an identical install)",
                      e.reason ? e.reason : "install failed");
            kiwi_events_emit (p->events, KIWI_STAGE_INSTALL, "install", 0,
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
        .display = in->install.display,
        .extra_env = kiwi_strv_list (&in->install.install_env),
        /* c->task carries the effective limits (kiwi_policy_task) */
        .limits = kiwi__pipeline_sandbox_limits (p->cfg, c->task),
        .deadline_ms = c->deadline_ms - kiwi_mono_ms () > 1 ? c->deadline_ms - kiwi_mono_ms () : 1,
        .task_id = c->task->id,
        .snapshot_dir = tmpdir,
    };
    /* Kiwi's own state before Phase A: a fault is not the repository's */
    char why[2560];
    if (p->own_proxy && once_rules (c, why, sizeof why) < 0)
        return install_fault (c, in, KIWI_INSTALL_FAULT_EGRESS_RULES, why, err);
    pid_t proxy_before = 0;
    if (c->egress_log != NULL && proxy_wait (c, &proxy_before, why, sizeof why) < 0)
        return install_fault (c, in, KIWI_INSTALL_FAULT_PROXY, why, err);
    install_run run = { .c = c, .command = in->install.display, .denials = json_array () };
    kiwi_egress_log_pos log_offset = { 0 }, fetch_offset = { 0 };
    if (c->egress_log != NULL) {
        log_offset = kiwi_egress_log_mark (c->egress_log);
        if (c->fetch_log != NULL)
            fetch_offset = kiwi_egress_log_mark (c->fetch_log);
        req.on_started = install_started;
        req.userdata = &run;
    }
    int prc = kiwi_phase_install (c->sb, c->pc, &req, r, err);
    /* the sandbox is gone: its address may be another's from now on */
    run.window.until_ms = kiwi_wall_ms ();
    if (run.address[0] != '\0')
        kiwi_events_sandbox (p->events, NULL, 0, NULL);
    if (prc < 0) {
        json_decref (run.denials);
        rm_rf (tmpdir);
        return -1;
    }
    if (c->egress_log != NULL && r->status != KIWI_INSTALL_OK) {
        /* the same proxy from start to end, or the failure is not the
         * repository's */
        pid_t proxy_after = 0;
        kiwi_error_t aerr = NULL;
        if (kiwi_proxy_alive (p->cfg, &proxy_after, &aerr) < 0)
            snprintf (why, sizeof why, "%s during Phase A (squid pid %d before it)", kiwi_error_msg (aerr),
                      (int) proxy_before);
        else
            snprintf (why, sizeof why, "the egress proxy was restarted during Phase A (squid pid %d, now %d)",
                      (int) proxy_before, (int) proxy_after);
        kiwi_error_free (&aerr);
        kiwi_install_fault f = kiwi_install_fault_after (r->status, proxy_before, proxy_after);
        if (f != KIWI_INSTALL_FAULT_NONE) {
            size_t wl = strlen (why);
            snprintf (why + wl, sizeof why - wl, "; the install %s: %s", kiwi_install_status_str (r->status),
                      r->reason);
            json_decref (run.denials);
            rm_rf (tmpdir);
            return install_fault (c, in, f, why, err);
        }
    }
    json_t *ev = json_pack ("{s:s,s:b,s:s,s:s,s:s,s:I,s:i}", "status", kiwi_install_status_str (r->status), "cached",
                            0, "key", key, "image", image, "command", in->install.display, "duration_ms",
                            (json_int_t) r->duration_ms, "exit_code", r->exit_code);
    if (c->rules_unchecked)
        json_object_set_new (ev, "egress_rules", json_string ("not in place (KIWI_ONCE_EGRESS_UNCHECKED=true)"));
    record_egress (c, &run, log_offset, r, ev);
    record_fetched (c, &run, fetch_offset, r, tmpdir, ev);
    json_decref (run.denials);
    if (r->status != KIWI_INSTALL_OK) {
        cleanup_free char *t = kiwi_failout_clean_tail (r->output, 4000, NULL);
        json_object_set_new (ev, "reason", json_string (r->reason));
        json_object_set_new (ev, "output_tail", json_string (t ? t : ""));
        kiwi_events_emit (p->events, KIWI_STAGE_INSTALL, "install", 0, ev);
        /* an index refused the commit's time: not the install key's
         * verdict, since the same install as of now is tried next */
        if (r->status == KIWI_INSTALL_FAILED && !time_refused (c, r))
            kiwi_cache_put_install (c->cache, key, false, NULL, r->reason);
        rm_rf (tmpdir);
        return 0;
    }
    kiwi_events_emit (p->events, KIWI_STAGE_INSTALL, "install", 0, ev);
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
            kiwi_events_emit (p->events, KIWI_STAGE_INSTALL, "warning", 0,
                              json_pack ("{s:s,s:s}", "warning", "snapshot not shared: other hosts install again",
                                         "reason", kiwi_error_msg (perr)));
            kiwi_error_free (&perr);
        }
    }
    kiwi_cache_put_install (c->cache, key, true, digest[0] ? digest : NULL, "ok");
    *snapshot = strdup (snapdir);
    return 0;
}

int
kiwi__pipeline_install (void *ud, const kiwi_inspection *in, kiwi_install_result *r, char **snapshot,
                        kiwi_error_t *err)
{
    kiwi__pipeline_install_ctx *c = ud;
    int64_t t0 = kiwi_mono_ms ();
    int rc = install_step (ud, in, r, snapshot, err);
    /* resolving as of the commit's time needs upload times, which a private
     * index, a mirror or a page of wheels may not give: then as of now, for
     * this and every later install of the task */
    if (rc == 0 && time_refused (c, r)) {
        kiwi_warn ("Phase A: an index gives no upload times, so the install cannot resolve as of the commit's time "
                   "(%s): installing again as of now",
                   c->pc->resolve_before);
        kiwi_events_emit (c->p->events, KIWI_STAGE_INSTALL, "warning", 0,
                          json_pack ("{s:s,s:s}", "warning",
                                     "an index gives no upload times: installing again, resolving as of now",
                                     "reason", r->reason));
        c->pc_as_now = *c->pc;
        c->pc_as_now.resolve_before = NULL;
        c->pc = &c->pc_as_now;
        kiwi_install_result_clear (r);
        rc = install_step (ud, in, r, snapshot, err);
    }
    int64_t ms = kiwi_mono_ms () - t0;
    c->install_ms += ms;
    if (rc == 0) {
        snprintf (c->install_outcome, sizeof c->install_outcome, "%s in %.1f s%s%s",
                  kiwi_install_status_str (r->status), (double) ms / 1000.0, r->reason[0] ? ": " : "", r->reason);
        snprintf (c->install_status, sizeof c->install_status, "%s", kiwi_install_status_str (r->status));
    }
    kiwi_events_observe (c->p->events, KIWI_OBS_PHASE, "install", (double) ms / 1000.0);
    return rc;
}


/* --once: the rules' log of the bridge its proxy is on, read after Phase A
 * (the socket keeps what arrives meanwhile). NULL, with a warning, when it
 * cannot be had: the rules still reject, only the events are missing. */
kiwi_nflog *
kiwi__pipeline_once_nflog (const kiwi_worker_config *cfg)
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

