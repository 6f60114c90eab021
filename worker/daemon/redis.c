/*
 * redis.c: the Redis connection and the leases, d->redis
 * (daemon-internal.h).
 *
 * One async connection (hiredis on the loop): authenticated before anything
 * else is sent, reconnected every 2 s while down (tasks then run uncached
 * and without leases, and the heartbeat says so). A lease is released by
 * its holder only and renewed every third of its TTL while its task runs or
 * its result is being published (the scripts: lease.h).
 */
#include <hiredis/adapters/libev.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>
#include "worker/daemon/daemon-internal.h"

#include "worker/task/cache.h"
#include "worker/daemon/lease.h"
#include "common/log.h"

/* Records why Redis is not usable; logs it when the reason changes (a
 * retry every 2 s with the same wrong password logs once). */
static void
redis_failed (kiwi__daemon *d, const char *why)
{
    if (strcmp (d->redis.error, why) != 0)
        kiwi_warn ("%s; tasks run uncached until it is back", why);
    snprintf (d->redis.error, sizeof d->redis.error, "%s", why);
}

/* The reply to the first command on a connection: AUTH with a password,
 * PING without. Only then is the connection used. */
static void
redis_auth_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    kiwi__daemon *d = ac->data;
    redisReply *reply = r;
    if (reply == NULL || d->redis.ctx != ac)
        return; /* disconnected meanwhile: redis_disconnect_cb saw to it */
    bool with_password = d->cfg->redis_password != NULL && *d->cfg->redis_password;
    char why[512];
    if (kiwi_redis_auth_reply (d->cfg->redis_host, (int) d->cfg->redis_port, with_password,
                               reply->type == REDIS_REPLY_ERROR, reply->str, why, sizeof why)
        < 0) {
        redis_failed (d, why);
        redisAsyncDisconnect (ac);
        return;
    }
    d->redis.ok = true;
    d->redis.error[0] = '\0';
    kiwi_info ("redis %s:%lld connected%s", d->cfg->redis_host, (long long) d->cfg->redis_port,
               with_password ? " and authenticated" : "");
}

static void
redis_connect_cb (const redisAsyncContext *ac, int status)
{
    kiwi__daemon *d = ac->data;
    if (status != REDIS_OK) {
        char why[512];
        snprintf (why, sizeof why, "redis %s:%lld: %s", d->cfg->redis_host, (long long) d->cfg->redis_port,
                  ac->errstr);
        redis_failed (d, why);
        d->redis.ctx = NULL;
        d->redis.ok = false;
        return;
    }
}

static void
redis_disconnect_cb (const redisAsyncContext *ac, int status)
{
    kiwi__daemon *d = ac->data;
    if (d->redis.ctx == ac) {
        d->redis.ctx = NULL;
        if (d->redis.ok)
            kiwi_warn ("redis disconnected: %s; tasks run uncached until it is back",
                       status == REDIS_OK ? "closed" : ac->errstr);
        d->redis.ok = false;
    }
}

void
kiwi__redis_connect (kiwi__daemon *d)
{
    if (d->redis.ctx != NULL)
        return;
    /* hiredis 0.14: non-blocking connect; a Redis that does not answer
     * shows as a connect failure or a disconnect, never a blocked loop */
    redisAsyncContext *ac = redisAsyncConnect (d->cfg->redis_host, (int) d->cfg->redis_port);
    if (ac == NULL)
        return;
    if (ac->err) {
        kiwi_warn ("redis: %s", ac->errstr);
        redisAsyncFree (ac);
        return;
    }
    ac->data = d;
    redisLibevAttach (d->loop, ac);
    redisAsyncSetConnectCallback (ac, redis_connect_cb);
    redisAsyncSetDisconnectCallback (ac, redis_disconnect_cb);
    d->redis.ctx = ac;
    /* queued now, sent first once connected; nothing else is sent before
     * its reply says the connection may be used (redis_ok) */
    const char *user = d->cfg->redis_user, *password = d->cfg->redis_password;
    if (password && *password && user && *user)
        redisAsyncCommand (ac, redis_auth_cb, NULL, "AUTH %s %s", user, password);
    else if (password && *password)
        redisAsyncCommand (ac, redis_auth_cb, NULL, "AUTH %s", password);
    else
        redisAsyncCommand (ac, redis_auth_cb, NULL, "PING");
}

void
kiwi__redis_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    kiwi__daemon *d = w->data;
    if (d->redis.ctx == NULL)
        kiwi__redis_connect (d);
}

/* Gives the lease back (compare-and-delete: only if this worker holds it). */
void
kiwi__redis_lease_release (kiwi__daemon *d, const char *task_id)
{
    if (!d->redis.ok)
        return;
    redisAsyncCommand (d->redis.ctx, NULL, NULL, "EVAL %s 1 %s%s %s", kiwi_lua_lease_release, KIWI_REDIS_LEASE_PREFIX, task_id,
                       d->cfg->worker_id);
}

void
kiwi__redis_mark_done_published (kiwi__daemon *d, const char *task_id)
{
    if (d->redis.ok)
        redisAsyncCommand (d->redis.ctx, NULL, NULL, "HSET %s%s published 1", KIWI_REDIS_DONE_PREFIX, task_id);
}

static void
renew_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    /* privdata: slot index + generation packed */
    redisReply *reply = r;
    uintptr_t v = (uintptr_t) privdata;
    kiwi__daemon *d = ac->data;
    int idx = (int) (v & 0xffff);
    unsigned gen = (unsigned) (v >> 16);
    bool lost = reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer == 0;
    kiwi__slots_lease_renewed (d, idx, gen, lost);
}

void
kiwi__redis_lease_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    kiwi__daemon *d = w->data;
    if (!d->redis.ok)
        return;
    for (int i = 0; i < d->slots.n; i++) {
        kiwi__daemon_slot *s = &d->slots.list[i];
        /* a result on its way keeps its lease too: a worker that takes the
         * partition meanwhile waits for the acknowledgement instead of
         * publishing the record a second time */
        if ((s->state != KIWI__SLOT_RUNNING && s->state != KIWI__SLOT_PUBLISHING) || !s->leased)
            continue;
        uintptr_t v = (uintptr_t) i | ((uintptr_t) (s->generation & 0xffff) << 16);
        redisAsyncCommand (d->redis.ctx, renew_cb, (void *) v, "EVAL %s 2 %s%s %s%s %s %lld", kiwi_lua_lease_renew,
                           KIWI_REDIS_LEASE_PREFIX, s->task_id, KIWI_REDIS_DONE_PREFIX, s->task_id,
                           d->cfg->worker_id, (long long) d->cfg->lease_ttl_s * 1000);
    }
}
