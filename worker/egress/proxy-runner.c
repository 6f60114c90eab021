/*
 * proxy-runner.c: the worker's egress proxy process (see proxy-runner.h).
 */
#include "worker/egress/proxy-runner.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "worker/egress/egress-proxy.h"
#include "worker/egress/egress-record.h"
#include "worker/events.h"
#include "common/log.h"
#include "sandbox/sandbox.h"

#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 30000
/* a Squid that ran this long before it ended is restarted after the first
 * back-off again, not the last one's double */
#define BACKOFF_RESET_AFTER_MS 60000

struct kiwi_proxy_runner {
    struct ev_loop *loop;
    const kiwi_worker_config *cfg;
    kiwi_install_egress egress;
    char dir[PATH_MAX];
    char log_path[PATH_MAX + 16];
    char gateway[INET_ADDRSTRLEN];
    pid_t pid;
    ev_child child;
    ev_timer tick;
    int64_t next_start_ms, backoff_ms, restarts, next_gw_check_ms, started_ms;
    off_t cache_log_from; /* DIR/cache.log's size when this Squid started */
    FILE *log;
    char line[8192];
    size_t line_len;
    int64_t requests, denied, bytes;
    json_t *hosts; /* host -> {requests, bytes} */
    char last_denied[512];
    char error[512];
    kiwi_proxy_denied_cb on_denied;
    void *on_denied_ud;
};

static void child_cb (struct ev_loop *loop, ev_child *w, int revents);

static off_t
cache_log_size (const char *dir)
{
    char path[PATH_MAX + 16];
    struct stat st;
    snprintf (path, sizeof path, "%s/cache.log", dir);
    return stat (path, &st) == 0 ? st.st_size : 0;
}

static int
spawn (kiwi_proxy_runner *r, kiwi_error_t *err)
{
    r->cache_log_from = cache_log_size (r->dir);
    if (kiwi_proxy_start (r->cfg, &r->egress, r->dir, r->gateway, &r->pid, err) < 0) {
        r->pid = 0;
        return -1;
    }
    ev_child_init (&r->child, child_cb, r->pid, 0);
    r->child.data = r;
    ev_child_start (r->loop, &r->child);
    r->error[0] = '\0';
    r->started_ms = kiwi_mono_ms ();
    return 0;
}

/* Why Squid ended, from what DIR/cache.log gained since it started (at
 * offset from; its last 16 KiB): its last FATAL line, or the last of
 * proxy.sh run's own ("proxy: ..."), into buf[cap] (empty when neither is
 * there). */
static void
last_cause (const char *dir, off_t from, char *buf, size_t cap)
{
    char path[PATH_MAX + 16], tailbuf[16384];
    buf[0] = '\0';
    snprintf (path, sizeof path, "%s/cache.log", dir);
    FILE *f = fopen (path, "re");
    if (f == NULL)
        return;
    size_t n = 0;
    struct stat st;
    if (fstat (fileno (f), &st) == 0) {
        if (from > st.st_size)
            from = 0; /* rotated meanwhile */
        if (st.st_size - from > (off_t) sizeof tailbuf - 1)
            from = st.st_size - (off_t) sizeof tailbuf + 1;
        if (fseeko (f, from, SEEK_SET) == 0)
            n = fread (tailbuf, 1, sizeof tailbuf - 1, f);
    }
    fclose (f);
    tailbuf[n] = '\0';
    char *save = NULL;
    for (char *line = strtok_r (tailbuf, "\n", &save); line != NULL; line = strtok_r (NULL, "\n", &save))
        if (strstr (line, "FATAL") != NULL || strncmp (line, "proxy: ", 7) == 0)
            snprintf (buf, cap, "%s", line);
}

static void
child_cb (struct ev_loop *loop, ev_child *w, int revents)
{
    (void) revents;
    kiwi_proxy_runner *r = w->data;
    ev_child_stop (loop, w);
    int st = w->rstatus;
    if (kiwi_mono_ms () - r->started_ms >= BACKOFF_RESET_AFTER_MS)
        r->backoff_ms = BACKOFF_FIRST_MS;
    char cause[256];
    last_cause (r->dir, r->cache_log_from, cause, sizeof cause);
    snprintf (r->error, sizeof r->error, "squid (pid %d) %s %d%s%s%s; restarting in %lld ms", (int) r->pid,
              WIFSIGNALED (st) ? "killed by signal" : "exited with status",
              WIFSIGNALED (st) ? WTERMSIG (st) : WEXITSTATUS (st), cause[0] ? " (" : "", cause,
              cause[0] ? ")" : "", (long long) r->backoff_ms);
    kiwi_warn ("egress proxy: %s", r->error);
    r->pid = 0;
    r->restarts++;
    r->next_start_ms = kiwi_mono_ms () + r->backoff_ms;
    r->backoff_ms = r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
}

static void
on_line (kiwi_proxy_runner *r, char *line)
{
    kiwi_proxy_log_entry e;
    const char *rule;
    switch (kiwi_egress_line_sort (line, &e, &rule)) {
    case KIWI_EGRESS_LINE_DENIED: {
        char allow[600];
        kiwi_egress_allow_with (&e, rule, r->cfg->install_egress, allow, sizeof allow);
        r->denied++;
        snprintf (r->last_denied, sizeof r->last_denied, "%s:%d from %s (%s%s%s; rule: %s; %s would allow it)", e.host,
                  e.port, e.client ? e.client : "-", kiwi_egress_via (&e), e.sni ? ", SNI " : "", e.sni ? e.sni : "",
                  rule, allow);
        kiwi_warn ("egress proxy: denied %s", r->last_denied);
        if (r->on_denied != NULL)
            r->on_denied (&e, rule, r->on_denied_ud);
        break;
    }
    case KIWI_EGRESS_LINE_REQUEST:
        r->requests++;
        r->bytes += e.bytes_out;
        kiwi_egress_count_host (r->hosts, &e, 256);
        break;
    case KIWI_EGRESS_LINE_NONE:
        break;
    }
}

/* Whether the log at r->log_path is no longer the file r->log reads
 * (proxy.sh run rotated it: renamed to <log>.0, a new one started). */
static bool
rotated (const kiwi_proxy_runner *r)
{
    struct stat open_st, path_st;
    return fstat (fileno (r->log), &open_st) == 0 && stat (r->log_path, &path_st) == 0
           && (open_st.st_ino != path_st.st_ino || open_st.st_dev != path_st.st_dev);
}

/* What Squid appended since the last tick; a partial last line waits. When
 * the log was rotated, the old file is read to its end (Squid closed it
 * before it started the new one) and the new one from its start. */
static void
tail (kiwi_proxy_runner *r)
{
    if (r->log == NULL) {
        r->log = fopen (r->log_path, "r");
        if (r->log == NULL)
            return;
    }
    bool moved = rotated (r);
    clearerr (r->log);
    size_t n;
    while ((n = fread (r->line + r->line_len, 1, sizeof r->line - 1 - r->line_len, r->log)) > 0) {
        r->line_len += n;
        r->line[r->line_len] = '\0';
        char *start = r->line, *nl;
        while ((nl = strchr (start, '\n')) != NULL) {
            *nl = '\0';
            on_line (r, start);
            start = nl + 1;
        }
        r->line_len -= (size_t) (start - r->line);
        memmove (r->line, start, r->line_len);
        if (r->line_len == sizeof r->line - 1)
            r->line_len = 0; /* a line that long is not Squid's */
    }
    if (moved) {
        fclose (r->log);
        r->log = NULL;
        r->line_len = 0;
        tail (r);
    }
}

static void
tick_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    (void) loop;
    (void) revents;
    kiwi_proxy_runner *r = w->data;
    /* The install network can be re-created with another subnet (by
     * Docker, or an operator): Squid follows its gateway. */
    if (r->pid > 0 && kiwi_mono_ms () >= r->next_gw_check_ms) {
        char gw[INET_ADDRSTRLEN];
        kiwi_error_t gerr = NULL;
        r->next_gw_check_ms = kiwi_mono_ms () + 1000;
        if (kiwi_proxy_gateway (kiwi_proxy_bridge (r->cfg), gw, sizeof gw, &gerr) == 0
            && strcmp (gw, r->gateway) != 0) {
            kiwi_info ("egress proxy: the install bridge's gateway is now %s (was %s): restarting squid", gw,
                       r->gateway);
            r->backoff_ms = BACKOFF_FIRST_MS;
            kill (-r->pid, SIGTERM);
        }
        kiwi_error_free (&gerr);
    }
    if (r->pid == 0 && kiwi_mono_ms () >= r->next_start_ms) {
        kiwi_error_t err = NULL;
        if (spawn (r, &err) < 0) {
            snprintf (r->error, sizeof r->error, "%s; retrying in %lld ms", kiwi_error_msg (err),
                      (long long) r->backoff_ms);
            kiwi_warn ("egress proxy: %s", r->error);
            r->next_start_ms = kiwi_mono_ms () + r->backoff_ms;
            r->backoff_ms = r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
        }
        kiwi_error_free (&err);
    }
    tail (r);
}

int
kiwi_proxy_runner_start (struct ev_loop *loop, const kiwi_worker_config *cfg, kiwi_proxy_runner **out,
                         kiwi_error_t *err)
{
    *out = NULL;
    bool on;
    kiwi_install_egress e;
    int ports[3];
    if (kiwi_proxy_setting (cfg, &on, &e, ports, err) < 0)
        return -1;
    if (!on)
        return 0;
    kiwi_proxy_runner *r = calloc (1, sizeof *r);
    if (r == NULL) {
        kiwi_install_egress_clear (&e);
        return kiwi_error_make (err, ENOMEM, "egress proxy");
    }
    r->loop = loop;
    r->cfg = cfg;
    r->egress = e;
    r->backoff_ms = BACKOFF_FIRST_MS;
    r->hosts = json_object ();
    if (kiwi_proxy_dir (cfg, r->dir, sizeof r->dir, err) < 0
        || kiwi_proxy_log_path (cfg, r->log_path, sizeof r->log_path, err) < 0 || spawn (r, err) < 0) {
        kiwi_proxy_runner_stop (r);
        return kiwi_error_wrap (err, "KIWI_INSTALL_EGRESS=%s", cfg->install_egress);
    }
    /* what an earlier run logged is not this run's */
    r->log = fopen (r->log_path, "r");
    if (r->log)
        fseek (r->log, 0, SEEK_END);
    ev_timer_init (&r->tick, tick_cb, 0.05, 0.05);
    r->tick.data = r;
    ev_timer_start (loop, &r->tick);
    *out = r;
    return 0;
}

void
kiwi_proxy_runner_on_denied (kiwi_proxy_runner *r, kiwi_proxy_denied_cb fn, void *userdata)
{
    if (r == NULL)
        return;
    r->on_denied = fn;
    r->on_denied_ud = userdata;
}

json_t *
kiwi_proxy_runner_check (const kiwi_proxy_runner *r)
{
    char detail[1536];
    if (r->pid > 0)
        snprintf (detail, sizeof detail,
                  "squid pid %d on %s (%s) ports %s (%s); %lld request(s), %lld byte(s) to %zu host(s), %lld "
                  "denied%s%s; %lld restart(s)",
                  (int) r->pid, r->gateway, kiwi_proxy_bridge (r->cfg), r->cfg->install_proxy_ports,
                  r->cfg->install_egress,
                  (long long) r->requests, (long long) r->bytes, json_object_size (r->hosts), (long long) r->denied,
                  r->last_denied[0] ? ", last: " : "", r->last_denied, (long long) r->restarts);
    else
        snprintf (detail, sizeof detail, "squid not running: %s", r->error[0] ? r->error : "starting");
    return json_pack ("{s:b,s:s,s:I,s:O}", "ok", r->pid > 0, "detail", detail, "checked_at",
                      (json_int_t) kiwi_wall_ms (), "hosts", r->hosts);
}

void
kiwi_proxy_runner_stop (kiwi_proxy_runner *r)
{
    if (r == NULL)
        return;
    if (r->loop)
        ev_timer_stop (r->loop, &r->tick);
    if (r->pid > 0) {
        ev_child_stop (r->loop, &r->child);
        kiwi_proxy_stop (r->pid);
    }
    if (r->log)
        fclose (r->log);
    json_decref (r->hosts);
    kiwi_install_egress_clear (&r->egress);
    free (r);
}
