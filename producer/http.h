/*
 * http.h: a small HTTP/1.1 server on one thread with poll(), enough to
 * receive webhooks: one request per connection (every response says
 * "Connection: close"), bodies framed by Content-Length only, bounded head
 * and body sizes, per-connection deadlines, and responses that the handler
 * may give later (after a Kafka delivery report, say).
 *
 * What it refuses, before the handler sees anything: a head over 64 KiB
 * (431), a malformed request line or header (400), HTTP other than 1.0/1.1
 * (505), Transfer-Encoding (501: GitHub sends Content-Length), a POST or
 * PUT without Content-Length (411), a body over the limit (413, answered
 * from the head, so an `Expect: 100-continue` client never sends it), a
 * request not complete within 30 s (408). `Expect: 100-continue` is
 * answered with 100 Continue.
 *
 * Ownership: the server owns its connections and their buffers; a request
 * passed to the handler is valid only during the call (its connection id
 * stays valid until the response is given or the client goes away).
 */
#ifndef KIWI_PRODUCER_HTTP_H
#define KIWI_PRODUCER_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define KIWI_HTTP_HEAD_MAX (64 * 1024)
#define KIWI_HTTP_HEADERS_MAX 100
#define KIWI_HTTP_CONNS_MAX 128
#define KIWI_HTTP_REQUEST_TIMEOUT_MS 30000

typedef struct kiwi_http_header {
    const char *name;
    const char *value;
} kiwi_http_header;

typedef struct kiwi_http_request {
    uint64_t conn;          /* for kiwi_http_respond */
    const char *method;     /* "POST" */
    const char *target;     /* "/github" */
    int minor_version;      /* HTTP/1.<minor> */
    kiwi_http_header headers[KIWI_HTTP_HEADERS_MAX];
    size_t n_headers;
    long long content_length; /* -1 when absent */
    const char *body;
    size_t body_len;
    const char *peer;       /* "127.0.0.1:50112" */
} kiwi_http_request;

/* The value of the first header called `name` (case-insensitive), or NULL. */
const char *kiwi_http_header_get (const kiwi_http_request *r, const char *name);

/* Parses the head in buf[0..len) in place (NUL-terminates the pieces).
 * Returns 0 when no complete head is there yet, > 0 (the head's length,
 * blank line included) when it parsed, < 0 when the request must be
 * refused, with *status set to the HTTP status and *err to why. */
int kiwi_http_parse_head (char *buf, size_t len, kiwi_http_request *req, int *status, kiwi_error_t *err);

/* The reason phrase of a status ("Accepted"). */
const char *kiwi_http_reason (int status);

typedef struct kiwi_http_server kiwi_http_server;

/* Called once per complete request. It answers now or later with
 * kiwi_http_respond (req->conn). */
typedef void (*kiwi_http_handler) (kiwi_http_server *srv, const kiwi_http_request *req, void *ctx);

/* Listens on "HOST:PORT" ("127.0.0.1:8080", "[::1]:0", ":8080" for every
 * address; port 0 picks a free one). */
kiwi_http_server *kiwi_http_server_new (const char *listen, size_t max_body, kiwi_http_handler handler, void *ctx,
                                        kiwi_error_t *err);

/* The bound address, "127.0.0.1:43127". Borrowed. */
const char *kiwi_http_server_address (const kiwi_http_server *srv);

/* One round: polls the listening socket, the connections and `extra_fd`
 * (if >= 0) for at most timeout_ms, then serves what is ready. Returns 1
 * when extra_fd is readable, 0 otherwise, < 0 on a poll failure. EINTR
 * counts as a normal return. */
int kiwi_http_server_poll (kiwi_http_server *srv, int extra_fd, int extra_fd2, int timeout_ms, kiwi_error_t *err);

/* Answers request `conn` and closes the connection once written. Returns
 * < 0 if that connection is gone (the client left or timed out). */
int kiwi_http_respond (kiwi_http_server *srv, uint64_t conn, int status, const char *content_type, const char *body,
                       size_t len);

/* Closes the listening socket: no new connections. */
void kiwi_http_server_stop_accepting (kiwi_http_server *srv);

/* Connections open (reading, waiting for their handler or writing). */
size_t kiwi_http_server_open_connections (const kiwi_http_server *srv);

void kiwi_http_server_free (kiwi_http_server *srv);

#endif
