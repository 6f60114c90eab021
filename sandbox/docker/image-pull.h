/*
 * image-pull.h: what a driver needs to pull an image through the Docker
 * Engine API (POST /images/create) without trusting the reference:
 *
 *   - reading an image reference the way Docker does (`node:22` is
 *     docker.io/library/node:22; a first component with a dot, a colon or
 *     `localhost` is a registry);
 *   - the operator's allow-list of registries (KIWI_IMAGE_REGISTRIES);
 *   - the X-Registry-Auth header for a registry, from a Docker
 *     config.json-style file (KIWI_REGISTRY_AUTH_FILE);
 *   - the pull's progress stream: one JSON object per line, `status`,
 *     `id`, `progressDetail {current, total}`, `error`/`errorDetail`.
 *
 * The pulling itself is the driver's (driver.c); these pieces are
 * pure and unit-tested.
 *
 * Ownership: a kiwi_image_ref owns nothing (fixed buffers); a header from
 * kiwi_registry_auth_header is the caller's and holds a credential: free
 * it with kiwi_registry_auth_free, never log it. A kiwi_pull_stream owns
 * its buffers (kiwi_pull_stream_clear).
 */
#ifndef KIWI_SANDBOX_IMAGE_PULL_H
#define KIWI_SANDBOX_IMAGE_PULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

/* ----- references ----- */

typedef struct kiwi_image_ref {
    char domain[256];     /* "docker.io", "ghcr.io", "127.0.0.1:5000" */
    char path[512];       /* "library/node", "devcontainers/base" */
    char tag[128];        /* "22", "latest" when none is written; "" with a digest only */
    char digest[160];     /* "sha256:..." or "" */
} kiwi_image_ref;

/* Parses `ref` ("node:22", "ghcr.io/x/y:1", "127.0.0.1:5000/kiwi/test:1",
 * "x@sha256:..."). Docker's normalisation: no registry is docker.io (and
 * index.docker.io, registry-1.docker.io are docker.io), a single docker.io
 * component is under library/, no tag is "latest". Returns 0, or < 0 with
 * *err naming what is wrong (empty, upper case in the path, too long). */
int kiwi_image_ref_parse (const char *ref, kiwi_image_ref *out, kiwi_error_t *err);

/* The full name without tag or digest ("docker.io/library/node"), for
 * fromImage. Returns `buf`. */
const char *kiwi_image_ref_name (const kiwi_image_ref *r, char *buf, size_t cap);

/* Whether `domain` is on `allow_list`: registry names separated by commas
 * or white space, compared case-insensitively after the same normalisation
 * (docker.io, index.docker.io and registry-1.docker.io are one). An empty
 * or NULL list allows nothing. */
bool kiwi_registry_allowed (const char *allow_list, const char *domain);

/* Whether the reference is on `allow_list`, whose entries are a registry
 * ("ghcr.io": all of it) or a registry and a repository path prefix
 * ("ghcr.io/acme": ghcr.io/acme and ghcr.io/acme/..., never
 * ghcr.io/acme-other), separated as above. */
bool kiwi_image_allowed (const char *allow_list, const kiwi_image_ref *r);

/* ----- credentials ----- */

/* The value of X-Registry-Auth for the reference `r` from the Docker
 * config.json-style file at `auth_file`: the base64url of
 * {"username","password","serveraddress"} (or
 * {"identitytoken","serveraddress"}) of the entry in "auths" that covers
 * it, whose "auth" is base64 of user:password or which has
 * username/password. An entry's key is a registry and a repository path
 * prefix ("ghcr.io/acme": ghcr.io/acme/..., the longest that covers the
 * reference wins) or, Docker's own form, a registry alone ("ghcr.io",
 * "https://ghcr.io", for docker.io also "https://index.docker.io/v1/"):
 * a registry-wide entry is used for an operator's image only
 * (`operator_image`: one of the image catalogue), never for a reference a
 * repository chose. Returns 1 with *value set (the caller's;
 * kiwi_registry_auth_free), 0 when no entry covers the reference (pull
 * anonymously), < 0 when the file cannot be read or is not such a file.
 * The error never quotes the file's contents. */
int kiwi_registry_auth_header (const char *auth_file, const kiwi_image_ref *r, bool operator_image, char **value,
                               kiwi_error_t *err);

/* Wipes and frees a credential string. NULL is a no-op. */
void kiwi_registry_auth_free (char *value);

/* ----- the pull's progress stream ----- */

#define KIWI_PULL_MAX_LAYERS 512

typedef struct kiwi_pull_layer {
    char id[80];
    uint64_t current;
    uint64_t total;
} kiwi_pull_layer;

typedef struct kiwi_pull_stream {
    kiwi_buf line;         /* the unfinished line */
    bool line_skip;        /* the line went over PULL_LINE_MAX: dropped up to its newline */
    kiwi_pull_layer *layers;
    size_t n_layers;
    uint64_t bytes_total;  /* the sum of the layers' sizes the stream reported */
    uint64_t bytes_done;   /* the sum of what was downloaded of them */
    char error[512];       /* the stream's `error` / `errorDetail.message`, or "" */
    char status[256];      /* the last `status` without an id ("Digest: ...", "Status: ...") */
    bool bad;              /* a line that is not a JSON object, or a line beyond 64 KiB */
} kiwi_pull_stream;

void kiwi_pull_stream_init (kiwi_pull_stream *s);
void kiwi_pull_stream_clear (kiwi_pull_stream *s);

/* Feeds bytes as they arrive (lines may be split anywhere). Returns 0, or
 * < 0 on allocation failure. A malformed line sets `bad` and is skipped;
 * more than KIWI_PULL_MAX_LAYERS layers are counted in bytes_total no more
 * (the size bound then holds for what was counted). */
int kiwi_pull_stream_feed (kiwi_pull_stream *s, const char *data, size_t len);

/* Ends the stream (a last line without a newline). */
int kiwi_pull_stream_finish (kiwi_pull_stream *s);

#endif
