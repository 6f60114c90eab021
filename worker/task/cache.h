/*
 * cache.h: the install and verify cache in Redis, used by the task process.
 *
 * kiwi:install:<key> (a hash): status ("ok" or "failed"), digest (the
 *   snapshot's manifest digest in the shared store, store.h; empty when it
 *   was not shared), host (the worker that made it), reason. An "ok" entry
 *   lives KIWI_CACHE_TTL; a failure only KIWI_CACHE_FAIL_TTL. The key is
 *   kiwi_install_cache_key(): the install's input (the only files Phase A
 *   receives), the image by tag and digest, the install command, the driver
 *   and the environment Kiwi sets (docs/inspection.md). A cached failure is
 *   stored under the same key. Every host keeps its copy of a snapshot at
 *   <state>/snapshots/<key>; a hit absent there is fetched from the store
 *   by its digest, and one with no digest is a miss.
 * kiwi:verify:<key> (a hash): exit code, output tail (masked) and the
 *   marker `masked` of a verify, keyed by kiwi_plan_verify_key() (tree,
 *   subdirectory, command, install key, image by tag and digest, driver,
 *   credential names), so a baseline run on the same commit is not
 *   repeated; a run that held credentials is never stored.
 *
 * Every connection authenticates (AUTH [user] password) when a password is
 * configured.
 *
 * Redis unreachable: every call reports "unavailable" (never blocks longer
 * than its timeout) and the task runs uncached.
 *
 * A verify entry is served to every task with the same key, whoever asked
 * for it, so what is stored is masked first with the cache's mask (the
 * task's secrets, kiwi_cache_set_mask): a credential one task's test
 * printed never reaches another task. Entries carry `masked 1`; one without
 * it (stored unmasked, by an older worker) is a miss.
 */
#ifndef KIWI_WORKER_CACHE_H
#define KIWI_WORKER_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/mask.h"

typedef struct kiwi_cache kiwi_cache;

typedef struct kiwi_install_entry {
    bool ok;
    char *digest; /* "sha256:<hex>" of the snapshot's manifest in the store, or NULL */
    char *reason;
} kiwi_install_entry;

typedef struct kiwi_verify_entry {
    int exit_code;
    char *output;
} kiwi_verify_entry;

/* Never fails: an unreachable Redis gives a cache that is unavailable.
 * With a password (KIWI_REDIS_PASSWORD; `user` for an ACL user, or NULL)
 * the connection sends AUTH first; a refused or missing password makes the
 * cache unavailable with a reason naming the setting. */
kiwi_cache *kiwi_cache_open (const char *host, int port, const char *user, const char *password, int64_t ttl_s,
                             int64_t fail_ttl_s);

/* The first reply on a new connection (AUTH's with a password, PING's
 * without): 0 when the connection may be used, else -1 with `why` saying
 * what is wrong and naming KIWI_REDIS_PASSWORD. Shared by the cache and the
 * daemon's connection. */
int kiwi_redis_auth_reply (const char *host, int port, bool with_password, bool is_error, const char *reply, char *why,
                           size_t cap);
bool kiwi_cache_available (const kiwi_cache *c);
/* Why it is unavailable (for the warning event). Borrowed. */
const char *kiwi_cache_error (const kiwi_cache *c);
void kiwi_cache_close (kiwi_cache *c);

/* Secrets masked out of every output and reason stored from now on (NULL:
 * none). Borrowed: it must outlive the cache or be set back to NULL. */
void kiwi_cache_set_mask (kiwi_cache *c, const kiwi_mask *m);

/* 1 hit, 0 miss, < 0 unavailable. */
int kiwi_cache_get_install (kiwi_cache *c, const char *key, kiwi_install_entry *e);
int kiwi_cache_put_install (kiwi_cache *c, const char *key, bool ok, const char *digest, const char *reason);
void kiwi_install_entry_clear (kiwi_install_entry *e);

int kiwi_cache_get_verify (kiwi_cache *c, const char *key, kiwi_verify_entry *e);
int kiwi_cache_put_verify (kiwi_cache *c, const char *key, int exit_code, const char *output);
void kiwi_verify_entry_clear (kiwi_verify_entry *e);

/* One clean-up pass of cfg's state dir (gc.h) with this cache telling
 * which install entries expired (when Redis is reachable; without it,
 * snapshots go by idle age only). Logs what went. < 0 when the state dir
 * cannot be read. */
struct kiwi_settings; /* kiwi_worker_config (config.h) */
int kiwi_cache_gc_main (const struct kiwi_settings *cfg);

#endif
