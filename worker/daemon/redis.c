/*
 * redis.c: the Redis connection and the leases (daemon-internal.h).
 *
 * One async connection (hiredis on the loop): authenticated before anything
 * else is sent, reconnected every 2 s while down (tasks then run uncached
 * and without leases, and the heartbeat says so). A lease is released by
 * its holder only and renewed every third of its TTL while its task runs or
 * its result is being published (the scripts: lease.h).
 */
#include <signal.h>
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
redis_failed (daemon_t *d, const char *why)
{
    if (strcmp (d->redis_error, why) != 0)
        kiwi_warn ("%s; tasks run uncached until it is back", why);
    snprintf (d->redis_error, sizeof d->redis_error, "%s", why);
}

/* The reply to the first command on a connection: AUTH with a password,
 * PING without. Only then is the connection used. */
static void
redis_auth_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    daemon_t *d = ac->data;
    redisReply *reply = r;
    if (reply == NULL || d->redis != ac)
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
    d->redis_ok = true;
    d->redis_error[0] = '\0';
    kiwi_info ("redis %s:%lld connected%s", d->cfg->redis_host, (long long) d->cfg->redis_port,
               with_password ? " and authenticated" : "");
}

static void
redis_connect_cb (const redisAsyncContext *ac, int status)
{
    daemon_t *d = ac->data;
    if (status != REDIS_OK) {
        char why[512];
        snprintf (why, sizeof why, "redis %s:%lld: %s", d->cfg->redis_host, (long long) d->cfg->redis_port,
                  ac->errstr);
        redis_failed (d, why);
        d->redis = NULL;
        d->redis_ok = false;
        return;
    }
}

static void
redis_disconnect_cb (const redisAsyncContext *ac, int status)
{
    daemon_t *d = ac->data;
    if (d->redis == ac) {
        d->redis = NULL;
        if (d->redis_ok)
            kiwi_warn ("redis disconnected: %s; tasks run uncached until it is back",
                       status == REDIS_OK ? "closed" : ac->errstr);
        d->redis_ok = false;
    }
}

void
kiwi__redis_connect (daemon_t *d)
{
    if (d->redis != NULL)
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
    d->redis = ac;
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
    daemon_t *d = w->data;
    if (d->redis == NULL)
        kiwi__redis_connect (d);
}

/* Gives the lease back (compare-and-delete: only if this worker holds it). */
void
kiwi__lease_release (daemon_t *d, const char *task_id)
{
    if (!d->redis_ok)
        return;
    redisAsyncCommand (d->redis, NULL, NULL, "EVAL %s 1 %s%s %s", kiwi_lua_lease_release, KIWI_REDIS_LEASE_PREFIX, task_id,
                       d->cfg->worker_id);
}

void
kiwi__mark_done_published (daemon_t *d, const char *task_id)
{
    if (d->redis_ok)
        redisAsyncCommand (d->redis, NULL, NULL, "HSET %s%s published 1", KIWI_REDIS_DONE_PREFIX, task_id);
}

static void
renew_cb (redisAsyncContext *ac, void *r, void *privdata)
{
    /* privdata: slot index + generation packed */
    redisReply *reply = r;
    uintptr_t v = (uintptr_t) privdata;
    daemon_t *d = ac->data;
    int idx = (int) (v & 0xffff);
    unsigned gen = (unsigned) (v >> 16);
    if (idx >= d->nslots)
        return;
    slot *s = &d->slots[idx];
    if ((s->state != SLOT_RUNNING && s->state != SLOT_PUBLISHING) || (s->generation & 0xffff) != (gen & 0xffff)
        || !s->leased)
        return;
    bool lost = reply != NULL && reply->type == REDIS_REPLY_INTEGER && reply->integer == 0;
    if (lost && s->state == SLOT_PUBLISHING) {
        /* finished: its record is in Redis, so the lease is not taken again
         * by this renewal; whoever gets the task next republishes the same
         * record */
        if (!s->lease_lost)
            kiwi_warn ("task %s: its lease ended while its result is being published", s->task_id);
        s->lease_lost = true;
        return;
    }
    if (lost) {
        /* the lease is gone or someone else's: this worker was taken for
         * dead; stop so the task is not worked twice at the same time */
        kiwi_errorf ("task %s: lost its lease; stopping it here", s->task_id);
        s->revoked = true;
        kill (s->pid, SIGTERM);
    }
}

void
kiwi__lease_timer_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    daemon_t *d = w->data;
    if (!d->redis_ok)
        return;
    for (int i = 0; i < d->nslots; i++) {
        slot *s = &d->slots[i];
        /* a result on its way keeps its lease too: a worker that takes the
         * partition meanwhile waits for the acknowledgement instead of
         * publishing the record a second time */
        if ((s->state != SLOT_RUNNING && s->state != SLOT_PUBLISHING) || !s->leased)
            continue;
        uintptr_t v = (uintptr_t) i | ((uintptr_t) (s->generation & 0xffff) << 16);
        redisAsyncCommand (d->redis, renew_cb, (void *) v, "EVAL %s 2 %s%s %s%s %s %lld", kiwi_lua_lease_renew,
                           KIWI_REDIS_LEASE_PREFIX, s->task_id, KIWI_REDIS_DONE_PREFIX, s->task_id,
                           d->cfg->worker_id, (long long) d->cfg->lease_ttl_s * 1000);
    }
}
