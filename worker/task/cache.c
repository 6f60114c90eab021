/*
 * cache.c: the Redis install/verify cache (see cache.h).
 */
#include "worker/task/cache.h"

#include <hiredis/hiredis.h>
#include <sys/stat.h>
#include <time.h>
#include <utime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/config.h"
#include "common/defaults.h"
#include "worker/gc.h"
#include "sandbox/sandbox.h"
#include "common/log.h"

struct kiwi_cache {
    redisContext *rc;
    int64_t ttl_s, fail_ttl_s;
    const kiwi_mask *mask; /* borrowed */
    char error[256];
};

int
kiwi_redis_auth_reply (const char *host, int port, bool with_password, bool is_error, const char *reply, char *why,
                       size_t cap)
{
    if (!is_error)
        return 0;
    if (reply == NULL)
        reply = "";
    /* AUTH to a Redis without a password: nothing to refuse; go on */
    if (with_password && strstr (reply, "without any password configured") != NULL)
        return 0;
    if (with_password)
        snprintf (why, cap, "redis %s:%d refused the password in KIWI_REDIS_PASSWORD%s (%s)", host, port,
                  strncmp (reply, "WRONGPASS", 9) == 0 ? " (or the user in KIWI_REDIS_USER)" : "", reply);
    else if (strncmp (reply, "NOAUTH", 6) == 0)
        snprintf (why, cap, "redis %s:%d requires a password: KIWI_REDIS_PASSWORD is not set (%s)", host, port, reply);
    else
        snprintf (why, cap, "redis %s:%d: %s", host, port, reply);
    return -1;
}

kiwi_cache *
kiwi_cache_open (const char *host, int port, const char *user, const char *password, int64_t ttl_s,
                 int64_t fail_ttl_s)
{
    kiwi_cache *c = calloc (1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->ttl_s = ttl_s;
    c->fail_ttl_s = fail_ttl_s;
    struct timeval tv = { 1, 0 };
    c->rc = redisConnectWithTimeout (host, port, tv);
    if (c->rc == NULL || c->rc->err) {
        snprintf (c->error, sizeof c->error, "redis %s:%d: %s", host, port, c->rc ? c->rc->errstr : "out of memory");
        if (c->rc)
            redisFree (c->rc);
        c->rc = NULL;
        return c;
    }
    struct timeval cmd = { 2, 0 };
    redisSetTimeout (c->rc, cmd);
    /* AUTH first when a password is configured; PING otherwise, so that a
     * Redis that wants one says so now, by name, and not on the first
     * cache read. The password itself is never in a message. */
    bool with_password = password != NULL && *password != '\0';
    redisReply *r;
    if (with_password && user != NULL && *user != '\0')
        r = redisCommand (c->rc, "AUTH %s %s", user, password);
    else if (with_password)
        r = redisCommand (c->rc, "AUTH %s", password);
    else
        r = redisCommand (c->rc, "PING");
    if (r == NULL || kiwi_redis_auth_reply (host, port, with_password, r->type == REDIS_REPLY_ERROR, r->str, c->error,
                                            sizeof c->error)
                         < 0) {
        if (r == NULL)
            snprintf (c->error, sizeof c->error, "redis %s:%d: %s", host, port, c->rc->errstr);
        if (r)
            freeReplyObject (r);
        redisFree (c->rc);
        c->rc = NULL;
        return c;
    }
    freeReplyObject (r);
    return c;
}

bool
kiwi_cache_available (const kiwi_cache *c)
{
    return c != NULL && c->rc != NULL;
}

const char *
kiwi_cache_error (const kiwi_cache *c)
{
    return c ? c->error : "no cache";
}

void
kiwi_cache_close (kiwi_cache *c)
{
    if (c == NULL)
        return;
    if (c->rc)
        redisFree (c->rc);
    free (c);
}

void
kiwi_cache_set_mask (kiwi_cache *c, const kiwi_mask *m)
{
    if (c != NULL)
        c->mask = m;
}

/* A command; on a connection error the cache becomes unavailable. */
static redisReply *
cmd (kiwi_cache *c, const char *fmt, ...)
{
    if (!kiwi_cache_available (c))
        return NULL;
    va_list ap;
    va_start (ap, fmt);
    redisReply *r = redisvCommand (c->rc, fmt, ap);
    va_end (ap);
    if (r == NULL) {
        snprintf (c->error, sizeof c->error, "redis: %s", c->rc->errstr);
        redisFree (c->rc);
        c->rc = NULL;
    }
    return r;
}

static const char *
field (const redisReply *r, size_t i)
{
    if (r->type != REDIS_REPLY_ARRAY || i >= r->elements || r->element[i]->type != REDIS_REPLY_STRING)
        return NULL;
    return r->element[i]->str;
}

int
kiwi_cache_get_install (kiwi_cache *c, const char *key, kiwi_install_entry *e)
{
    memset (e, 0, sizeof *e);
    redisReply *r = cmd (c, "HMGET %s%s status digest reason", KIWI_REDIS_INSTALL_PREFIX, key);
    if (r == NULL)
        return -1;
    const char *st = field (r, 0);
    int hit = 0;
    if (st != NULL) {
        e->ok = strcmp (st, "ok") == 0;
        const char *d = field (r, 1);
        e->digest = d != NULL && *d != '\0' ? strdup (d) : NULL;
        e->reason = field (r, 2) ? strdup (field (r, 2)) : NULL;
        hit = 1;
    }
    freeReplyObject (r);
    return hit;
}

int
kiwi_cache_put_install (kiwi_cache *c, const char *key, bool ok, const char *digest, const char *reason)
{
    int64_t ttl = ok ? c->ttl_s : c->fail_ttl_s;
    if (ttl <= 0)
        return 0;
    char host[256] = "";
    gethostname (host, sizeof host - 1);
    char *masked = kiwi_mask_apply (c->mask, reason ? reason : "");
    if (masked == NULL)
        return -1;
    redisReply *r = cmd (c, "HSET %s%s status %s digest %s reason %s host %s", KIWI_REDIS_INSTALL_PREFIX, key,
                         ok ? "ok" : "failed", digest ? digest : "", masked, host);
    free (masked);
    if (r == NULL)
        return -1;
    freeReplyObject (r);
    r = cmd (c, "EXPIRE %s%s %lld", KIWI_REDIS_INSTALL_PREFIX, key, (long long) ttl);
    if (r == NULL)
        return -1;
    freeReplyObject (r);
    return 0;
}

void
kiwi_install_entry_clear (kiwi_install_entry *e)
{
    free (e->digest);
    free (e->reason);
    memset (e, 0, sizeof *e);
}

int
kiwi_cache_get_verify (kiwi_cache *c, const char *key, kiwi_verify_entry *e)
{
    memset (e, 0, sizeof *e);
    redisReply *r = cmd (c, "HMGET %s%s exit output masked", KIWI_REDIS_VERIFY_PREFIX, key);
    if (r == NULL)
        return -1;
    int hit = 0;
    /* an entry without the marker was stored unmasked (by a worker before
     * masking): it may hold another task's secret, so it is a miss */
    if (field (r, 0) != NULL && field (r, 2) != NULL && strcmp (field (r, 2), "1") == 0) {
        e->exit_code = atoi (field (r, 0));
        e->output = strdup (field (r, 1) ? field (r, 1) : "");
        hit = 1;
    }
    freeReplyObject (r);
    return hit;
}

int
kiwi_cache_put_verify (kiwi_cache *c, const char *key, int exit_code, const char *output)
{
    char *masked = kiwi_mask_apply (c->mask, output ? output : "");
    if (masked == NULL)
        return -1; /* not cached rather than cached unmasked */
    redisReply *r = cmd (c, "HSET %s%s exit %d output %s masked 1", KIWI_REDIS_VERIFY_PREFIX, key, exit_code, masked);
    free (masked);
    if (r == NULL)
        return -1;
    freeReplyObject (r);
    r = cmd (c, "EXPIRE %s%s %lld", KIWI_REDIS_VERIFY_PREFIX, key, (long long) c->ttl_s);
    if (r == NULL)
        return -1;
    freeReplyObject (r);
    return 0;
}

void
kiwi_verify_entry_clear (kiwi_verify_entry *e)
{
    free (e->output);
    memset (e, 0, sizeof *e);
}

/* Whether an install entry still exists (snapshot clean-up). 1, 0, < 0. */
static int
kiwi_cache_install_exists (kiwi_cache *c, const char *key)
{
    redisReply *r = cmd (c, "EXISTS %s%s", KIWI_REDIS_INSTALL_PREFIX, key);
    if (r == NULL)
        return -1;
    int v = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
    freeReplyObject (r);
    return v;
}

static int
entry_exists (const char *key, void *ud)
{
    return kiwi_cache_install_exists (ud, key);
}

/* The images Kiwi pulled for tasks (kiwi_sandbox_gc_images): a driver that
 * cannot be opened (dockerd down) leaves them to the next pass. */
static void
gc_images (const kiwi_worker_config *cfg)
{
    kiwi_error_t err = NULL;
    kiwi_sandbox_env *sb = NULL;
    const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (cfg->sandbox, &err);
    kiwi_sandbox_config sc = { .docker_socket = cfg->docker_socket, .state_dir = cfg->state_dir,
                               .worker_id = cfg->worker_id, .install_bridge = cfg->install_bridge,
                               .image_catalog = cfg->image_catalog, .firecracker = &cfg->fc };
    if (drv != NULL && drv->gc_images == NULL)
        return; /* the driver pulls nothing */
    kiwi_sandbox_image_gc gc = { .idle_s = cfg->gc_image_idle_s, .grace_s = KIWI_GC_GRACE_S,
                                 .disk_high = (int) cfg->gc_disk_high, .disk_low = (int) cfg->gc_disk_low };
    if (drv == NULL || kiwi_sandbox_env_open (drv, &sc, &sb, &err) < 0 || kiwi_sandbox_gc_images (sb, &gc, &err) < 0)
        kiwi_warn ("image clean-up: %s", kiwi_error_msg (err));
    else
        kiwi_info ("image clean-up: removed %d pulled image(s) (%d by the disk watermark); %d kept in use, %d could "
                   "not be removed; Docker's storage %.1f%% used",
                   gc.removed, gc.removed_watermark, gc.in_use, gc.failed, gc.used_before);
    kiwi_error_free (&err);
    kiwi_sandbox_env_close (sb);
}

int
kiwi_cache_gc_main (const kiwi_worker_config *cfg)
{
    kiwi_cache *c = kiwi_cache_open (cfg->redis_host, (int) cfg->redis_port, cfg->redis_user, cfg->redis_password,
                                    cfg->cache_ttl_s, cfg->cache_fail_ttl_s);
    if (!kiwi_cache_available (c))
        kiwi_warn ("clean-up: snapshots by idle age only: %s", kiwi_cache_error (c));
    kiwi_gc_opts o;
    kiwi_gc_opts_init (&o, cfg->state_dir);
    o.mirror_idle_s = cfg->gc_mirror_idle_s;
    o.snapshot_idle_s = cfg->gc_snapshot_idle_s;
    o.results_max_age_s = cfg->done_ttl_s;
    o.disk_high = (int) cfg->gc_disk_high;
    o.disk_low = (int) cfg->gc_disk_low;
    if (kiwi_cache_available (c)) {
        o.entry_exists = entry_exists;
        o.entry_userdata = c;
    }
    kiwi_gc_stats st;
    kiwi_error_t err = NULL;
    int rc = kiwi_gc_run (&o, &st, &err);
    if (rc < 0)
        kiwi_warn ("%s", kiwi_error_msg (err));
    else
        kiwi_info ("clean-up: removed %d workspace(s), %d interrupted install(s), %d interrupted fetch(es), "
                   "%d mirror(s), %d snapshot(s), %d whole diff(s) by age; %d mirror(s), %d snapshot(s) by the disk "
                   "watermark; %d kept in use; disk %.1f%% -> %.1f%%",
                   st.workspaces, st.partials, st.fetches, st.mirrors, st.snapshots, st.results,
                   st.watermark_mirrors, st.watermark_snapshots, st.in_use, st.used_before, st.used_after);
    kiwi_error_free (&err);
    kiwi_cache_close (c);
    gc_images (cfg);
    return rc;
}
