/*
 * health.c: what the worker says of itself, d->egress_check and d->gc
 * (daemon-internal.h).
 *
 * The heartbeat (its counts, Redis, the egress proxy and every egress
 * check, each cause of degradation), the egress-check process (kiwi-worker
 * --egress-check, one line of JSON per check) whose failed isolation checks
 * degrade the worker, and the clean-up process of the state dir
 * (kiwi-worker --gc).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "worker/daemon/daemon-internal.h"

#include "worker/egress/egress.h"
#include "schemas/heartbeat.h"
#include "common/clock.h"
#include "common/log.h"

void
kiwi__health_publish_heartbeat (kiwi__daemon *d)
{
    kiwi_heartbeat h;
    kiwi_heartbeat_init (&h);
    h.worker_id = d->cfg->worker_id;
    h.version = (char *) KIWI_VERSION;
    h.ts = kiwi_wall_ms ();
    h.slots_total = (uint32_t) d->slots.n;
    h.slots_busy = (uint32_t) d->slots.busy;
    h.tasks_done = d->slots.done;
    h.tasks_failed = d->slots.failed;
    h.cache_hits = d->slots.cache_hits;
    h.cache_misses = d->slots.cache_misses;
    h.redis_ok = d->redis.ok;
    /* the proxy's state is the daemon's own, not the check process's */
    json_t *pcheck = d->proxy.runner ? kiwi_proxy_runner_check (d->proxy.runner) : NULL;
    bool proxy_down = pcheck && !json_is_true (json_object_get (pcheck, "ok"));
    if (pcheck) {
        /* and whether what the rules reject reaches the tasks' events */
        char detail[2048];
        if (d->proxy.nflog)
            snprintf (detail, sizeof detail, "%s; rejected packets read from netlink log group %u (%llu lost)",
                      json_string_value (json_object_get (pcheck, "detail")), kiwi_nflog_group (d->proxy.nflog),
                      (unsigned long long) kiwi_nflog_dropped (d->proxy.nflog));
        else
            snprintf (detail, sizeof detail, "%s; rejected packets not read: %s",
                      json_string_value (json_object_get (pcheck, "detail")), d->proxy.nflog_error);
        json_object_set_new (pcheck, "detail", json_string (detail));
        json_object_set (d->egress_check.results, "egress_proxy", pcheck);
    }
    h.degraded = d->stop.draining || !d->redis.ok || d->egress_check.isolation_failed || proxy_down;
    /* every cause, not the first: Redis down on a worker whose egress checks
     * fail must still show */
    char reason[sizeof d->egress_check.degraded_reason + 1200] = "";
    if (d->egress_check.isolation_failed)
        snprintf (reason, sizeof reason, "%s", d->egress_check.degraded_reason);
    if (d->stop.draining)
        snprintf (reason + strlen (reason), sizeof reason - strlen (reason), "%sdraining: taking no new tasks",
                  reason[0] ? "; " : "");
    if (!d->redis.ok)
        snprintf (reason + strlen (reason), sizeof reason - strlen (reason),
                  "%sredis unreachable or refused: %s: tasks run uncached and without leases", reason[0] ? "; " : "",
                  d->redis.error[0] ? d->redis.error : "not connected");
    if (proxy_down)
        snprintf (reason + strlen (reason), sizeof reason - strlen (reason),
                  "%segress proxy down: %s: Phase A installs fail until it is back", reason[0] ? "; " : "",
                  json_string_value (json_object_get (pcheck, "detail")));
    if (h.degraded)
        h.degraded_reason = reason;
    kiwi_egress_check checks[8];
    size_t n = 0;
    const char *name;
    json_t *v;
    json_object_foreach (d->egress_check.results, name, v)
    {
        if (n == 8)
            break;
        checks[n].name = (char *) name;
        checks[n].ok = json_is_true (json_object_get (v, "ok"));
        checks[n].detail = (char *) json_string_value (json_object_get (v, "detail"));
        checks[n].checked_at = json_integer_value (json_object_get (v, "checked_at"));
        n++;
    }
    h.egress = n ? checks : NULL;
    h.n_egress = n;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_heartbeat_encode (&h, &buf, &len, &err) == 0)
        kiwi__produce (d, d->cfg->topic_heartbeats, d->cfg->worker_id, buf, len, NULL);
    else
        kiwi_warn ("heartbeat: %s", kiwi_error_msg (err));
    kiwi_error_free (&err);
    free (buf);
    json_decref (pcheck);
}

void
kiwi__health_heartbeat_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    kiwi__health_publish_heartbeat (w->data);
}

static void
egress_line (kiwi__daemon *d, const char *line)
{
    json_error_t je;
    json_t *j = json_loads (line, 0, &je);
    const char *n = json_string_value (json_object_get (j, "name"));
    char *name = n ? strdup (n) : NULL; /* the key outlives the "name" member */
    if (name != NULL) {
        kiwi_worker_metrics_egress (d->metrics.registry, name, json_is_true (json_object_get (j, "ok")));
        json_object_del (j, "name");
        json_object_set (d->egress_check.results, name, j);
    }
    free (name);
    json_decref (j);
}

static void
egress_io_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    kiwi__daemon *d = w->data;
    for (;;) {
        ssize_t n = read (d->egress_check.fd, d->egress_check.buf + d->egress_check.len, sizeof d->egress_check.buf - 1 - d->egress_check.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            ev_io_stop (loop, w);
            close (d->egress_check.fd);
            d->egress_check.fd = -1;
            return;
        }
        d->egress_check.len += (size_t) n;
        d->egress_check.buf[d->egress_check.len] = '\0';
        char *nl;
        while ((nl = strchr (d->egress_check.buf, '\n')) != NULL) {
            *nl = '\0';
            egress_line (d, d->egress_check.buf);
            size_t used = (size_t) (nl + 1 - d->egress_check.buf);
            memmove (d->egress_check.buf, nl + 1, d->egress_check.len - used + 1);
            d->egress_check.len -= used;
        }
        if (d->egress_check.len == sizeof d->egress_check.buf - 1)
            d->egress_check.len = 0; /* a line that long is not ours */
    }
}

#define KIWI_REASON_DETAIL_MAX 480

static void
egress_evaluate (kiwi__daemon *d)
{
    bool failed = false;
    char reason[sizeof d->egress_check.degraded_reason - 100] = ""; /* room for the suffix below */
    const char *name;
    json_t *v;
    json_object_foreach (d->egress_check.results, name, v)
    {
        if (!kiwi_egress_is_isolation_check (name) || json_is_true (json_object_get (v, "ok")))
            continue;
        failed = true;
        /* each failing check named, with its detail up to what the check
         * printed (the heartbeat's checks carry it whole) and at most
         * KIWI_REASON_DETAIL_MAX bytes: one long detail must not push the
         * next check's name out of the reason */
        const char *detail = json_string_value (json_object_get (v, "detail")) ?: "";
        const char *says = strstr (detail, "; check says: ");
        int dl = (int) (says ? (size_t) (says - detail) : strlen (detail));
        if (dl > KIWI_REASON_DETAIL_MAX)
            dl = KIWI_REASON_DETAIL_MAX;
        size_t l = strlen (reason);
        snprintf (reason + l, sizeof reason - l, "%segress check %s failed: %.*s", l ? "; " : "", name, dl, detail);
    }
    if (failed && !d->egress_check.isolation_failed)
        kiwi_errorf ("degraded: %s%s", reason,
                     d->cfg->egress_stop_when_degraded ? "; taking no new tasks until the checks pass" : "");
    else if (!failed && d->egress_check.isolation_failed)
        kiwi_info ("egress checks pass again: taking tasks");
    d->egress_check.isolation_failed = failed;
    snprintf (d->egress_check.degraded_reason, sizeof d->egress_check.degraded_reason, "%s%s", reason,
              failed && d->cfg->egress_stop_when_degraded ? "; taking no new tasks until the checks pass" : "");
    kiwi__consumer_update_pause (d);
    kiwi__health_publish_heartbeat (d);
}

static void
egress_child_cb (struct ev_loop *loop, ev_child *w, int revents)
{
    kiwi__daemon *d = w->data;
    ev_child_stop (loop, w);
    if (d->egress_check.fd >= 0)
        egress_io_cb (loop, &d->egress_check.io, 0);
    if (d->egress_check.fd >= 0) {
        ev_io_stop (loop, &d->egress_check.io);
        close (d->egress_check.fd);
        d->egress_check.fd = -1;
    }
    d->egress_check.pid = 0;
    d->egress_check.len = 0;
    egress_evaluate (d);
}

/* So that a stopped worker leaves no container. */
void
kiwi__egress_check_stop (kiwi__daemon *d)
{
    pid_t pid = d->egress_check.pid;
    if (pid <= 0)
        return;
    kill (pid, SIGTERM);
    for (int i = 0; i < 200; i++) {
        pid_t r = waitpid (pid, NULL, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return;
        usleep (100000);
    }
    kiwi_warn ("egress checks: process %d still running 20 s after SIGTERM; left to finish on its own", (int) pid);
}

void
kiwi__egress_check_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    kiwi__daemon *d = w->data;
    if (d->egress_check.pid > 0 || d->stop.draining)
        return;
    int out[2];
    if (pipe2 (out, O_CLOEXEC) < 0)
        return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init (&fa);
    posix_spawn_file_actions_adddup2 (&fa, out[1], 1);
    char *argv[] = { (char *) d->self_exe, (char *) "--egress-check", NULL };
    pid_t pid;
    int rc = posix_spawn (&pid, d->self_exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy (&fa);
    close (out[1]);
    if (rc != 0) {
        close (out[0]);
        kiwi_warn ("egress checks: cannot start: %s", strerror (rc));
        return;
    }
    fcntl (out[0], F_SETFL, O_NONBLOCK);
    d->egress_check.fd = out[0];
    d->egress_check.pid = pid;
    ev_io_init (&d->egress_check.io, egress_io_cb, d->egress_check.fd, EV_READ);
    d->egress_check.io.data = d;
    ev_io_start (loop, &d->egress_check.io);
    ev_child_init (&d->egress_check.child, egress_child_cb, pid, 0);
    d->egress_check.child.data = d;
    ev_child_start (loop, &d->egress_check.child);
}

static void
gc_child_cb (struct ev_loop *loop, ev_child *w, int revents)
{
    kiwi__daemon *d = w->data;
    ev_child_stop (loop, w);
    d->gc.pid = 0;
}

/* At start and every 10 minutes a process of its own collects workspaces
 * of dead task processes, idle mirrors and snapshots, and the least
 * recently used above the disk watermark, and the images it pulled for
 * tasks (kiwi-worker --gc; gc.h, kiwi_sandbox_gc_images). Without
 * Redis it still runs: snapshots then go by idle age only. */
void
kiwi__gc_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    kiwi__daemon *d = w->data;
    if (d->stop.draining || d->gc.pid > 0) /* one pass at a time */
        return;
    /* the settings it needs as flags: the daemon's own may have come from
     * its command line, which the environment does not carry */
    const kiwi_worker_config *cf = d->cfg;
    char port[24], done_ttl[24], mirror_idle[24], snapshot_idle[24], image_idle[24], high[24], low[24];
    snprintf (port, sizeof port, "%lld", (long long) cf->redis_port);
    snprintf (done_ttl, sizeof done_ttl, "%lld", (long long) cf->done_ttl_s);
    snprintf (mirror_idle, sizeof mirror_idle, "%lld", (long long) cf->gc_mirror_idle_s);
    snprintf (snapshot_idle, sizeof snapshot_idle, "%lld", (long long) cf->gc_snapshot_idle_s);
    snprintf (image_idle, sizeof image_idle, "%lld", (long long) cf->gc_image_idle_s);
    snprintf (high, sizeof high, "%lld", (long long) cf->gc_disk_high);
    snprintf (low, sizeof low, "%lld", (long long) cf->gc_disk_low);
    char *argv[] = { (char *) d->self_exe, (char *) "--gc", (char *) "--state-dir", cf->state_dir,
                     (char *) "--redis-host", cf->redis_host, (char *) "--redis-port", port,
                     (char *) "--done-ttl", done_ttl, (char *) "--gc-mirror-idle", mirror_idle,
                     (char *) "--gc-snapshot-idle", snapshot_idle, (char *) "--gc-disk-high", high,
                     (char *) "--gc-disk-low", low, (char *) "--gc-image-idle", image_idle,
                     (char *) "--sandbox", cf->sandbox, (char *) "--docker-socket", cf->docker_socket,
                     /* last: absent when unset (the default catalogue) */
                     cf->image_catalog ? (char *) "--image-catalog" : NULL, cf->image_catalog, NULL };
    pid_t pid;
    if (posix_spawn (&pid, d->self_exe, NULL, NULL, argv, environ) != 0)
        return;
    d->gc.pid = pid;
    ev_child_init (&d->gc.child, gc_child_cb, pid, 0);
    d->gc.child.data = d;
    ev_child_start (loop, &d->gc.child);
}
