/*
 * fetch-manifest.h: what one install downloaded, for a user to audit: every
 * response the egress proxy passed to its sandbox in the clear (plain HTTP
 * and every registry's HTTPS, which the proxy terminates), with its host,
 * path, status, size and the SHA-256 of its body, as kiwi-fetch-digest
 * logged them (fetch-digest.h).
 *
 * The task process marks the fetch digest's log before Phase A starts and
 * reads the lines of the sandbox's address and time window after it ended,
 * as it reads the access log (egress-record.h). An install that succeeded
 * keeps the manifest as fetched.json beside src.tar and home.tar: in the
 * local snapshot and, as a third layer, in the store (store.h); the install
 * event carries its summary (kiwi_fetch_manifest_summary) and its digest.
 *
 * What is not in it: a connection the proxy tunnelled without terminating
 * its TLS (a host on KIWI_INSTALL_EGRESS that is not a registry); the
 * install event counts those as `tunnels` (egress-record.h).
 *
 * Ownership: a kiwi_fetch_manifest owns its JSON (kiwi_fetch_manifest_clear).
 */
#ifndef KIWI_WORKER_FETCH_MANIFEST_H
#define KIWI_WORKER_FETCH_MANIFEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "worker/egress/egress-record.h"

/* At most this many responses listed; the rest are counted (left_out). */
#define KIWI_FETCH_MANIFEST_MAX 20000

typedef struct kiwi_fetch_manifest {
    json_t *fetched;  /* [{method, host, path, status, size, sha256 | cut: true}], in the order they ended */
    int64_t requests; /* every response of the sandbox's, listed or not */
    int64_t bytes;    /* their bodies' bytes */
    int64_t files;    /* responses 200-299 with a body: each listed with its digest */
    int64_t cut;      /* bodies that did not end (no digest) */
    int64_t left_out; /* responses past KIWI_FETCH_MANIFEST_MAX */
    bool incomplete;  /* the log was rotated twice since the mark: its start is gone */
} kiwi_fetch_manifest;

/* The lines of the digest log at log_path from `from` on whose client is
 * `client` and whose time is in `window` (egress-record.h). A missing log
 * is an empty manifest. */
int kiwi_fetch_manifest_read (const char *log_path, kiwi_egress_log_pos from, const char *client,
                              kiwi_egress_window window, kiwi_fetch_manifest *m, kiwi_error_t *err);

/* The manifest as a file (fetched.json): {"version": 1, "requests",
 * "bytes", "files", "cut", "left_out", "incomplete", "fetched": [...]},
 * written to a temporary file renamed into place; the SHA-256 of its
 * bytes into hex. */
int kiwi_fetch_manifest_write (const kiwi_fetch_manifest *m, const char *path, char hex[65], kiwi_error_t *err);

/* The install event's summary: {requests, bytes, files, manifest
 * ("fetched.json", or null when the install kept none), sha256 (the
 * file's, or null)}, and cut, left_out and incomplete when they are not 0.
 * New reference. */
json_t *kiwi_fetch_manifest_summary (const kiwi_fetch_manifest *m, const char *hex);

void kiwi_fetch_manifest_clear (kiwi_fetch_manifest *m);

#endif
