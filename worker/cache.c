/*
 * cache.c: the Redis install/verify cache (see cache.h).
 */
#include "cache.h"

#include <dirent.h>
#include <hiredis/hiredis.h>
#include <sys/stat.h>
#include <time.h>
#include <utime.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "defaults.h"

struct kiwi_cache {
    redisContext *rc;
    int64_t ttl_s, fail_ttl_s;
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
    redisReply *r = cmd (c, "HMGET %s%s status snapshot reason", KIWI_REDIS_INSTALL_PREFIX, key);
    if (r == NULL)
        return -1;
    const char *st = field (r, 0);
    int hit = 0;
    if (st != NULL) {
        e->ok = strcmp (st, "ok") == 0;
        e->snapshot = field (r, 1) ? strdup (field (r, 1)) : NULL;
        e->reason = field (r, 2) ? strdup (field (r, 2)) : NULL;
        hit = 1;
        if (e->ok && (e->snapshot == NULL || access (e->snapshot, R_OK) != 0)) {
            /* made on another machine, or cleaned up: a miss here */
            kiwi_install_entry_clear (e);
            hit = 0;
        } else if (e->ok)
            utime (e->snapshot, NULL); /* in use: the clean-up leaves it */
    }
    freeReplyObject (r);
    return hit;
}

int
kiwi_cache_put_install (kiwi_cache *c, const char *key, bool ok, const char *snapshot, const char *reason)
{
    int64_t ttl = ok ? c->ttl_s : c->fail_ttl_s;
    if (ttl <= 0)
        return 0;
    char host[256] = "";
    gethostname (host, sizeof host - 1);
    redisReply *r = cmd (c, "HSET %s%s status %s snapshot %s reason %s host %s", KIWI_REDIS_INSTALL_PREFIX, key,
                         ok ? "ok" : "failed", snapshot ? snapshot : "", reason ? reason : "", host);
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
    free (e->snapshot);
    free (e->reason);
    memset (e, 0, sizeof *e);
}

int
kiwi_cache_get_verify (kiwi_cache *c, const char *key, kiwi_verify_entry *e)
{
    memset (e, 0, sizeof *e);
    redisReply *r = cmd (c, "HMGET %s%s exit output", KIWI_REDIS_VERIFY_PREFIX, key);
    if (r == NULL)
        return -1;
    int hit = 0;
    if (field (r, 0) != NULL) {
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
    redisReply *r = cmd (c, "HSET %s%s exit %d output %s", KIWI_REDIS_VERIFY_PREFIX, key, exit_code,
                         output ? output : "");
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

int
kiwi_cache_install_exists (kiwi_cache *c, const char *key)
{
    redisReply *r = cmd (c, "EXISTS %s%s", KIWI_REDIS_INSTALL_PREFIX, key);
    if (r == NULL)
        return -1;
    int v = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
    freeReplyObject (r);
    return v;
}

int
kiwi_cache_gc_snapshots (kiwi_cache *c, const char *state_dir, int64_t idle_s, int *removed)
{
    *removed = 0;
    if (!kiwi_cache_available (c))
        return 0;
    char base[4096];
    snprintf (base, sizeof base, "%s/snapshots", state_dir);
    DIR *d = opendir (base);
    if (d == NULL)
        return 0;
    time_t now = time (NULL);
    struct dirent *e;
    while ((e = readdir (d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4400];
        snprintf (path, sizeof path, "%s/%s", base, e->d_name);
        struct stat st;
        if (lstat (path, &st) < 0 || !S_ISDIR (st.st_mode))
            continue;
        bool partial = strstr (e->d_name, ".partial") != NULL;
        if (partial ? now - st.st_mtime < 86400 : now - st.st_mtime < idle_s)
            continue;
        if (!partial && kiwi_cache_install_exists (c, e->d_name) != 0)
            continue; /* still cached, or Redis went away: keep it */
        char cmd[4500];
        snprintf (cmd, sizeof cmd, "%s", path);
        const char *argv[] = { "rm", "-rf", "--one-file-system", "--", cmd, NULL };
        pid_t pid = fork ();
        if (pid == 0) {
            execvp ("rm", (char *const *) argv);
            _exit (127);
        }
        int status = 0;
        if (pid > 0 && waitpid (pid, &status, 0) == pid && WIFEXITED (status) && WEXITSTATUS (status) == 0)
            (*removed)++;
    }
    closedir (d);
    return 0;
}
