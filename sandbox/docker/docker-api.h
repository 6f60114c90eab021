/*
 * docker-api.h: a small client for the Docker Engine API over its unix
 * socket, with libcurl (CURLOPT_UNIX_SOCKET_PATH). No `docker` CLI.
 *
 * kiwi_docker_open() pings the daemon and negotiates the API version: the
 * lower of the daemon's ApiVersion and KIWI_DOCKER_API_MAX, refusing daemons
 * older than KIWI_DOCKER_API_MIN. Every later path is prefixed with
 * "/v<version>".
 *
 * Threading: a kiwi_docker owns one curl easy handle and is used by one
 * thread (or process) at a time.
 */
#ifndef KIWI_SANDBOX_DOCKER_API_H
#define KIWI_SANDBOX_DOCKER_API_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"

#define KIWI_DOCKER_API_MIN "1.40"
#define KIWI_DOCKER_API_MAX "1.43"

typedef struct kiwi_docker kiwi_docker;

/* Body of a response, NUL-terminated for convenience. Owned by the caller:
 * free with kiwi_docker_response_clear(). */
typedef struct kiwi_docker_response {
    long status;
    char *body;
    size_t len;
} kiwi_docker_response;

/* Called with each chunk of a streamed response body. Return 0 to go on,
 * < 0 to abort the transfer. */
typedef int (*kiwi_docker_sink) (const char *data, size_t len, void *userdata);

/* Connects to the daemon at `socket_path` (a path, or "unix://path"), pings
 * it and negotiates the API version. On success *out is owned by the caller
 * (kiwi_docker_close). */
int kiwi_docker_open (const char *socket_path, kiwi_docker **out, kiwi_error_t *err);

void kiwi_docker_close (kiwi_docker *d);

/* The negotiated version, e.g. "1.41". Borrowed. */
const char *kiwi_docker_api_version (const kiwi_docker *d);

/* The socket path in use. Borrowed. */
const char *kiwi_docker_socket_path (const kiwi_docker *d);

/* One request. `path` is relative to the versioned prefix ("/containers/json")
 * unless it starts with "//", which sends it unversioned ("//_ping" → "/_ping").
 * `body` may be NULL. `timeout_ms` 0 means no limit. A transport failure is an
 * error; an HTTP status is not (the caller reads resp->status). */
int kiwi_docker_request (kiwi_docker *d, const char *method, const char *path, const char *content_type,
                         const void *body, size_t body_len, long timeout_ms, kiwi_docker_response *resp,
                         kiwi_error_t *err);

/* Called about every `tick_ms` while a streamed request is in flight, also
 * when no data arrives. Return 0 to go on, < 0 to abort the transfer. */
typedef int (*kiwi_docker_tick) (void *userdata);

/* Same, but the body goes to `sink` as it arrives (logs, exec output, archives).
 * A response whose status is not 2xx is collected instead and returned in
 * *status / err as with kiwi_docker_call(). `tick` may be NULL. An abort by
 * the sink or the tick is an error with code KIWI_DOCKER_ABORTED. */
#define KIWI_DOCKER_ABORTED (KIWI_ERR_RANGE_DOCKER + 1)
int kiwi_docker_request_stream (kiwi_docker *d, const char *method, const char *path, const char *content_type,
                                const void *body, size_t body_len, long timeout_ms, kiwi_docker_sink sink,
                                void *userdata, long *status, kiwi_error_t *err);
int kiwi_docker_request_stream_tick (kiwi_docker *d, const char *method, const char *path, const char *content_type,
                                     const void *body, size_t body_len, long timeout_ms, kiwi_docker_sink sink,
                                     void *userdata, kiwi_docker_tick tick, long tick_ms, long *status,
                                     kiwi_error_t *err);
/* Same with one extra request header ("X-Registry-Auth: ..."; NULL for
 * none). The header may hold a credential: it is sent, never logged and not
 * kept after the call. */
int kiwi_docker_request_stream_header (kiwi_docker *d, const char *method, const char *path, const char *header,
                                       const char *content_type, const void *body, size_t body_len, long timeout_ms,
                                       kiwi_docker_sink sink, void *userdata, kiwi_docker_tick tick, long tick_ms,
                                       long *status, kiwi_error_t *err);

/* JSON in, JSON out. `body` may be NULL (not stolen). On a 2xx status *out
 * (if non-NULL) receives the parsed body (a new reference, or NULL for an
 * empty body). Any other status is an error whose message carries the
 * daemon's "message" field and the status; *status (if non-NULL) is set in
 * both cases so callers can treat e.g. 404 or 304 specially. */
int kiwi_docker_call (kiwi_docker *d, const char *method, const char *path, json_t *body, long timeout_ms,
                      json_t **out, long *status, kiwi_error_t *err);

void kiwi_docker_response_clear (kiwi_docker_response *r);

/* GET /images/<name>/json: *doc (owned by the caller) is dockerd's record
 * of the image; *status (may be NULL) the HTTP status, 404 for an image the
 * daemon does not hold. */
int kiwi_docker_image_inspect (kiwi_docker *d, const char *name, json_t **doc, long *status, kiwi_error_t *err);

/* The Id ("sha256:...") of the image `name` (GET /images/<name>/json): the
 * image by digest, whatever tag names it. *id is owned by the caller; an
 * image the daemon does not hold is an error (status 404). */
int kiwi_docker_image_id (kiwi_docker *d, const char *name, char **id, kiwi_error_t *err);

/* Percent-encodes `s` for use in a query string. Caller frees. */
char *kiwi_docker_urlencode (kiwi_docker *d, const char *s);

#endif
