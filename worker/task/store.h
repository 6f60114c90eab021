/*
 * store.h: the fleet's shared store of install snapshots, an OCI registry
 * spoken to through the OCI distribution API (docs/store.md says why).
 *
 * A snapshot (the directory kiwi_phase_install() writes: src.tar and
 * home.tar, and fetched.json, what Phase A downloaded, when the install
 * went through the egress proxy) is pushed as an OCI artifact: each file a
 * blob named by its sha256 digest, a small config blob, and an image manifest (artifact type
 * KIWI_STORE_ARTIFACT_TYPE) tagged with the install key. The Redis install
 * entry records the manifest's digest (cache.h); another host pulls by that
 * digest, never by the tag, and checks every byte: the manifest's digest,
 * then each blob's digest and size as it streams to disk. Anything that does
 * not match is refused and nothing of it is kept.
 *
 * The store is addressed as http(s)://host[:port]/<repository> (the
 * repository holds every key's manifest). Credentials (optional) go as HTTP
 * basic auth to the store only; they never enter a sandbox (the worker's
 * KIWI_* settings never do, phases.h).
 *
 * Ownership: kiwi_store_open() returns a handle the caller closes with
 * kiwi_store_close(); one handle per thread.
 */
#ifndef KIWI_WORKER_STORE_H
#define KIWI_WORKER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/sha256.h"

#define KIWI_STORE_ARTIFACT_TYPE "application/vnd.kiwi.snapshot.v1"
#define KIWI_STORE_CONFIG_TYPE "application/vnd.kiwi.snapshot.config.v1+json"
#define KIWI_STORE_LAYER_TYPE "application/vnd.kiwi.snapshot.layer.v1.tar"
/* the fetch manifest (fetched.json, fetch-manifest.h), a third layer when
 * the snapshot has one */
#define KIWI_STORE_FETCHED_TYPE "application/vnd.kiwi.snapshot.fetched.v1+json"
#define KIWI_STORE_PARTS 3
#define KIWI_STORE_DIGEST_MAX 72 /* "sha256:" + 64 hex + NUL, rounded */

typedef struct kiwi_store kiwi_store;

/* `url`: http(s)://host[:port]/repository. `user`/`password` may be NULL. */
int kiwi_store_open (const char *url, const char *user, const char *password, kiwi_store **out, kiwi_error_t *err);
void kiwi_store_close (kiwi_store *s);

/* Pushes the snapshot at `snapshot_dir` under the tag `key` (blobs the
 * store already holds are not sent again). `digest` receives the
 * manifest's digest. */
int kiwi_store_push (kiwi_store *s, const char *key, const char *snapshot_dir, char digest[KIWI_STORE_DIGEST_MAX],
                     kiwi_error_t *err);

/* Pulls the snapshot whose manifest has `digest` into the existing
 * directory `dest_dir` (src.tar, home.tar and fetched.json when it has
 * one), each part at most `max_bytes`
 * (0 = no bound). Refuses a manifest or blob whose bytes do not hash to
 * their digest. */
int kiwi_store_pull (kiwi_store *s, const char *digest, const char *dest_dir, uint64_t max_bytes, kiwi_error_t *err);

/* Where a task's snapshot comes from once Redis holds an "ok" entry for
 * its key: this host's copy, the store (by the entry's digest), or a new
 * install. The same for every driver: the drivers only ever see a local
 * snapshot directory. */
typedef enum {
    KIWI_SNAPSHOT_LOCAL = 0,
    KIWI_SNAPSHOT_FETCH,
    KIWI_SNAPSHOT_INSTALL,
} kiwi_snapshot_src;

kiwi_snapshot_src kiwi_snapshot_source (bool have_local, const char *digest, bool have_store);

/* ----- the checks, exposed for their tests ----- */

/* A parsed snapshot manifest: the parts by name. */
typedef struct kiwi_store_part {
    char name[16];                       /* "src.tar", "home.tar", "fetched.json"; "" for a part it lacks */
    char digest[KIWI_STORE_DIGEST_MAX];
    uint64_t size;
} kiwi_store_part;

/* Checks that `body` hashes to `digest` and is a Kiwi snapshot manifest
 * naming src.tar and home.tar, and fetched.json or not, as layers with
 * well-formed digests, no other and none twice; fills parts[] by index
 * (src.tar, home.tar, fetched.json). */
int kiwi_store_check_manifest (const char *body, size_t len, const char *digest, kiwi_store_part parts[KIWI_STORE_PARTS],
                               kiwi_error_t *err);

/* A blob being received: bytes are hashed and counted as they come. */
typedef struct kiwi_store_blob_check {
    kiwi_sha256 sha;
    uint64_t seen;
} kiwi_store_blob_check;

void kiwi_store_blob_check_init (kiwi_store_blob_check *c);
void kiwi_store_blob_check_feed (kiwi_store_blob_check *c, const void *data, size_t len);
/* 0 when what was fed has `digest` and `size`, else -1 naming both. */
int kiwi_store_blob_check_end (kiwi_store_blob_check *c, const char *digest, uint64_t size, kiwi_error_t *err);

/* True for "sha256:" followed by 64 lower-case hex digits. */
bool kiwi_store_digest_valid (const char *digest);

#endif
