/*
 * http.h: the webhook listener's HTTP server, libmicrohttpd driven from the
 * caller's poll() loop (one thread, no server thread): one request per
 * connection (every response says "Connection: close"), a bounded body,
 * per-connection timeouts, connection limits, and responses that the
 * handler may give later (after a Kafka delivery report, say).
 *
 * What it refuses before the handler sees anything, with {"error": ...}: a
 * POST without a Content-Length or a chunked body (411), a Content-Length
 * over the bound (413 from the head, so an `Expect: 100-continue` client
 * never sends the body), a chunked body that grows over the bound (413 at
 * once, the rest unread). libmicrohttpd refuses malformed requests (400),
 * heads over 64 KiB (431) and HTTP other than 1.x (505), answers
 * `Expect: 100-continue`, closes connections idle for the timeout (no
 * answer), leaves connections over the total limit waiting to be accepted
 * and closes those over the per-address limit at once.
 *
 * Ownership: the server owns its connections and their buffers; a request
 * passed to the handler is valid only during the call (its connection id
 * stays valid until the response is given or the server is freed).
 */
#ifndef KIWI_PRODUCER_HTTP_H
#define KIWI_PRODUCER_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define KIWI_HTTP_HEAD_MAX (64 * 1024)
#define KIWI_HTTP_CONNS_MAX 128
#define KIWI_HTTP_PER_IP_MAX 64
#define KIWI_HTTP_TIMEOUT_S 30

struct MHD_Connection;

typedef struct kiwi_http_request {
    uint64_t conn;          /* for kiwi_http_respond */
    const char *method;     /* "POST" */
    const char *target;     /* the path, "/github" (a ?query is not part of it) */
    const char *body;
    size_t body_len;
    const char *peer;       /* "127.0.0.1:50112" */
    struct MHD_Connection *mhd; /* for kiwi_http_header_get */
} kiwi_http_request;

/* The value of the header called `name` (case-insensitive), or NULL. */
const char *kiwi_http_header_get (const kiwi_http_request *r, const char *name);

/* The server's bounds; a 0 field takes the default named beside it. */
typedef struct kiwi_http_limits {
    size_t max_body;        /* bytes; required */
    unsigned timeout_s;     /* idle connection closed after; KIWI_HTTP_TIMEOUT_S */
    unsigned conns_max;     /* connections at once; KIWI_HTTP_CONNS_MAX */
    unsigned per_ip_max;    /* from one address; KIWI_HTTP_PER_IP_MAX */
} kiwi_http_limits;

typedef struct kiwi_http_server kiwi_http_server;

/* Called once per complete request. It answers now or later with
 * kiwi_http_respond (req->conn). */
typedef void (*kiwi_http_handler) (kiwi_http_server *srv, const kiwi_http_request *req, void *ctx);

/* Listens on "HOST:PORT" ("127.0.0.1:8080", "[::1]:0", ":8080" for every
 * address; port 0 picks a free one). */
kiwi_http_server *kiwi_http_server_new (const char *listen, const kiwi_http_limits *limits, kiwi_http_handler handler,
                                        void *ctx, kiwi_error_t *err);

/* The bound address, "127.0.0.1:43127". Borrowed. */
const char *kiwi_http_server_address (const kiwi_http_server *srv);

/* One round: polls the server's sockets and `extra_fd`, `extra_fd2` (each
 * if >= 0) for at most timeout_ms, then serves what is ready. Returns 1
 * when an extra fd is readable, 0 otherwise, < 0 on a poll failure. EINTR
 * counts as a normal return. */
int kiwi_http_server_poll (kiwi_http_server *srv, int extra_fd, int extra_fd2, int timeout_ms, kiwi_error_t *err);

/* Answers request `conn` (a copy of body is taken); the connection closes
 * once it is written. Returns < 0 if `conn` is not waiting for an answer. */
int kiwi_http_respond (kiwi_http_server *srv, uint64_t conn, int status, const char *content_type, const char *body,
                       size_t len);

/* Closes the listening socket: no new connections. */
void kiwi_http_server_stop_accepting (kiwi_http_server *srv);

/* Connections open (reading, waiting for their handler or writing). */
size_t kiwi_http_server_open_connections (const kiwi_http_server *srv);

/* Answers what still waits with 503, then closes everything. */
void kiwi_http_server_free (kiwi_http_server *srv);

#endif
