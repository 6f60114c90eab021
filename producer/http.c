/*
 * http.c: the HTTP server behind `kiwi ci-event --listen` (see http.h).
 *
 * libmicrohttpd does the HTTP: it parses requests (and refuses malformed
 * ones), decodes chunked bodies, answers `Expect: 100-continue`, writes
 * responses, times out idle connections and enforces the connection
 * limits. It runs in its external epoll mode, so the caller's one-thread
 * poll() loop (with its signal and Kafka wake-up fds) drives it; a request
 * answered later (after a delivery report) is suspended meanwhile and
 * resumed by kiwi_http_respond.
 *
 * Kiwi keeps: the listening socket (made here, so that `--listen` parsing
 * and its errors, port 0 and the bound address stay ours), the body bound
 * checked while the body is read (413 from the Content-Length, or as soon
 * as a body grows past it), 411 for a POST with no body framing, whole
 * bodies collected for the handler, and JSON error bodies for its own
 * refusals.
 */
#include "producer/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/log.h"
#include "producer/cli-opts.h"

/* A connection's memory in libmicrohttpd: its head (parsed in place) and
 * read buffer; a head that does not fit is refused with 431. */
#define MEMORY_LIMIT KIWI_HTTP_HEAD_MAX

/* One request, from its head to its completion (libmicrohttpd's req_cls). */
typedef struct exchange {
    struct exchange *prev, *next; /* srv->list */
    uint64_t id;
    struct MHD_Connection *mc;
    kiwi_buf body;              /* at most srv->lim.max_body bytes */
    bool refused;               /* answered before the body was read */
    bool dispatched;            /* the handler has it */
    bool answered;              /* kiwi_http_respond was called */
    bool suspended;
    struct MHD_Response *resp;  /* the answer, until queued */
    unsigned status;
    char peer[80];
} exchange;

struct kiwi_http_server {
    struct MHD_Daemon *mhd;
    int lfd;                    /* until stop_accepting */
    char address[96];
    kiwi_http_limits lim;
    kiwi_http_handler handler;
    void *ctx;
    exchange *list;
    uint64_t next_id;
    size_t n_conns;
};

const char *
kiwi_http_header_get (const kiwi_http_request *r, const char *name)
{
    return MHD_lookup_connection_value (r->mhd, MHD_HEADER_KIND, name);
}

/* ---------------------------------------------------------------- the socket */

static void
format_addr (const struct sockaddr *sa, char *buf, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
        inet_ntop (AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs (in->sin_port);
        snprintf (buf, cap, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
        inet_ntop (AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs (in6->sin6_port);
        snprintf (buf, cap, "[%s]:%u", host, port);
    } else
        snprintf (buf, cap, "?");
}

/* A listening socket on "HOST:PORT" in *out. */
static int
listen_socket (const char *listen_on, int *out, kiwi_error_t *err)
{
    /* HOST:PORT, [V6]:PORT, :PORT */
    char host[256], port[16];
    const char *colon = strrchr (listen_on, ':');
    if (colon == NULL || colon[1] == '\0' || strlen (colon + 1) > 5
        || strspn (colon + 1, "0123456789") != strlen (colon + 1) || atoi (colon + 1) > 65535) {
        return kiwi_error_make_code (err, KIWI_CLI_EUSAGE,
                                     "--listen: `%s` is not ADDR:PORT (e.g. 127.0.0.1:8080, [::1]:8080, :8080)",
                                     listen_on);
    }
    size_t hl = (size_t) (colon - listen_on);
    const char *h = listen_on;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= sizeof host)
        return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "--listen: host too long");
    memcpy (host, h, hl);
    host[hl] = '\0';
    snprintf (port, sizeof port, "%s", colon + 1);

    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo (hl ? host : NULL, port, &hints, &ai);
    if (gai != 0)
        return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "--listen: cannot resolve `%s`: %s", listen_on,
                                     gai_strerror (gai));
    int fd = -1, saved = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket (a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind (fd, a->ai_addr, a->ai_addrlen) == 0 && listen (fd, 128) == 0)
            break;
        saved = errno;
        close (fd);
        fd = -1;
    }
    freeaddrinfo (ai);
    if (fd < 0)
        return kiwi_error_make (err, saved, "listening on %s", listen_on);
    *out = fd;
    return 0;
}

/* ---------------------------------------------------------------- exchanges */

static void
mhd_log (void *cls, const char *fmt, va_list ap)
{
    (void) cls;
    char msg[512];
    vsnprintf (msg, sizeof msg, fmt, ap);
    msg[strcspn (msg, "\n")] = '\0';
    kiwi_info ("webhook listener: %s", msg);
}

static exchange *
find (kiwi_http_server *srv, uint64_t id)
{
    for (exchange *e = srv->list; e; e = e->next)
        if (e->id == id)
            return e;
    return NULL;
}

/* Sets e's answer; the next access-handler call queues it. */
static int
set_answer (exchange *e, unsigned status, const char *content_type, const char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer (len, (void *) body, MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return -1;
    if (MHD_add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES
        || MHD_add_response_header (r, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES
        || MHD_add_response_header (r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") != MHD_YES) {
        MHD_destroy_response (r);
        return -1;
    }
    if (e->resp != NULL)
        MHD_destroy_response (e->resp);
    e->resp = r;
    e->status = status;
    return 0;
}

static enum MHD_Result
queue_answer (struct MHD_Connection *c, exchange *e)
{
    enum MHD_Result rc = MHD_queue_response (c, e->status, e->resp);
    MHD_destroy_response (e->resp);
    e->resp = NULL;
    return rc;
}

/* Kiwi's own refusal: {"error": msg} (msg is ours, ASCII) in *body. */
static int
error_body (char *body, size_t cap, exchange *e, unsigned status, const char *msg)
{
    kiwi_info ("%s: %u: %s", e->peer, status, msg);
    e->refused = true;
    return snprintf (body, cap, "{\"error\":\"%s\"}\n", msg);
}

/* A refusal queued from the head. */
static enum MHD_Result
refuse (struct MHD_Connection *c, exchange *e, unsigned status, const char *msg)
{
    char body[512];
    int n = error_body (body, sizeof body, e, status, msg);
    if (set_answer (e, status, "application/json", body, (size_t) n) < 0)
        return MHD_NO;
    return queue_answer (c, e);
}

/* A refusal while the body is read. libmicrohttpd queues no response then
 * (it takes one from the head or after the whole body): the answer is
 * written on the socket directly (the 100 Continue, if any, is out: the
 * body is coming) and the connection closed, the rest unread. */
static enum MHD_Result
refuse_mid_body (struct MHD_Connection *c, exchange *e, unsigned status, const char *msg)
{
    char body[256], all[512];
    int n = error_body (body, sizeof body, e, status, msg);
    n = snprintf (all, sizeof all,
                  "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n"
                  "Cache-Control: no-store\r\n\r\n%s",
                  status, MHD_get_reason_phrase_for (status), n, body);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info (c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL && send (ci->connect_fd, all, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT) == n)
        shutdown (ci->connect_fd, SHUT_WR);
    return MHD_NO;
}

/* The head is in: checks the framing and the bound before any body. */
static enum MHD_Result
on_head (kiwi_http_server *srv, struct MHD_Connection *c, exchange *e, const char *method)
{
    const char *cl = MHD_lookup_connection_value (c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value (c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (cl == NULL && te == NULL && strcmp (method, MHD_HTTP_METHOD_POST) == 0)
        return refuse (c, e, MHD_HTTP_LENGTH_REQUIRED, "Content-Length (or a chunked body) required");
    unsigned long long n = cl != NULL ? strtoull (cl, NULL, 10) : 0;
    if (n > srv->lim.max_body) {
        char msg[128];
        snprintf (msg, sizeof msg, "body of %llu bytes is over the limit of %zu bytes", n, srv->lim.max_body);
        return refuse (c, e, MHD_HTTP_CONTENT_TOO_LARGE, msg);
    }
    return MHD_YES;
}

/* A piece of the body: kept, unless it takes the body over the bound. */
static enum MHD_Result
on_body (kiwi_http_server *srv, struct MHD_Connection *c, exchange *e, const char *data, size_t n)
{
    if (n > srv->lim.max_body - e->body.len) {
        char msg[128];
        snprintf (msg, sizeof msg, "body over the limit of %zu bytes", srv->lim.max_body);
        return refuse_mid_body (c, e, MHD_HTTP_CONTENT_TOO_LARGE, msg);
    }
    if (kiwi_buf_append (&e->body, data, n, NULL) < 0)
        return refuse_mid_body (c, e, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    return MHD_YES;
}

/* The body is complete: hand the request over; queue its answer if it came
 * during the call, else wait for it suspended. */
static enum MHD_Result
dispatch (kiwi_http_server *srv, struct MHD_Connection *c, exchange *e, const char *url, const char *method)
{
    kiwi_http_request req = {
        .conn = e->id, .method = method, .target = url, .body = kiwi_buf_str (&e->body), .body_len = e->body.len,
        .peer = e->peer, .mhd = c,
    };
    e->dispatched = true;
    srv->handler (srv, &req, srv->ctx);
    if (e->resp != NULL)
        return queue_answer (c, e);
    e->suspended = true;
    MHD_suspend_connection (c);
    return MHD_YES;
}

static enum MHD_Result
on_request (void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
            const char *upload_data, size_t *upload_data_size, void **req_cls)
{
    (void) version;
    kiwi_http_server *srv = cls;
    exchange *e = *req_cls;
    if (e == NULL) {
        if ((e = calloc (1, sizeof *e)) == NULL)
            return MHD_NO;
        e->id = srv->next_id++;
        e->mc = c;
        kiwi_buf_init (&e->body, srv->lim.max_body);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info (c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci != NULL && ci->client_addr != NULL)
            format_addr (ci->client_addr, e->peer, sizeof e->peer);
        else
            snprintf (e->peer, sizeof e->peer, "?");
        e->next = srv->list;
        if (srv->list != NULL)
            srv->list->prev = e;
        srv->list = e;
        *req_cls = e;
        return on_head (srv, c, e, method);
    }
    if (e->refused) { /* what the client still sends is dropped */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return on_body (srv, c, e, upload_data, n);
    }
    if (!e->dispatched)
        return dispatch (srv, c, e, url, method);
    /* resumed by kiwi_http_respond */
    if (e->resp == NULL)
        return MHD_NO;
    return queue_answer (c, e);
}

static void
on_completed (void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode toe)
{
    (void) c;
    (void) toe;
    kiwi_http_server *srv = cls;
    exchange *e = *req_cls;
    if (e == NULL)
        return;
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        srv->list = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    if (e->resp != NULL)
        MHD_destroy_response (e->resp);
    kiwi_buf_free (&e->body);
    free (e);
    *req_cls = NULL;
}

static void
on_connection (void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode toe)
{
    (void) c;
    (void) socket_context;
    kiwi_http_server *srv = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED)
        srv->n_conns++;
    else if (srv->n_conns > 0)
        srv->n_conns--;
}

/* ---------------------------------------------------------------- the server */

kiwi_http_server *
kiwi_http_server_new (const char *listen_on, const kiwi_http_limits *limits, kiwi_http_handler handler, void *ctx,
                      kiwi_error_t *err)
{
    int fd = -1;
    if (listen_socket (listen_on, &fd, err) < 0)
        return NULL;
    kiwi_http_server *srv = calloc (1, sizeof *srv);
    if (srv == NULL) {
        kiwi_error_make (err, ENOMEM, "listening on %s", listen_on);
        goto fail;
    }
    srv->lfd = fd;
    srv->lim = *limits;
    if (srv->lim.timeout_s == 0)
        srv->lim.timeout_s = KIWI_HTTP_TIMEOUT_S;
    if (srv->lim.conns_max == 0)
        srv->lim.conns_max = KIWI_HTTP_CONNS_MAX;
    if (srv->lim.per_ip_max == 0)
        srv->lim.per_ip_max = KIWI_HTTP_PER_IP_MAX;
    srv->handler = handler;
    srv->ctx = ctx;
    srv->next_id = 1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    bool v6 = false;
    if (getsockname (fd, (struct sockaddr *) &ss, &sl) == 0) {
        format_addr ((struct sockaddr *) &ss, srv->address, sizeof srv->address);
        v6 = ss.ss_family == AF_INET6;
    }
    srv->mhd = MHD_start_daemon (
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL,
        on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, (MHD_socket) fd,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
        MHD_OPTION_CONNECTION_TIMEOUT, srv->lim.timeout_s, MHD_OPTION_CONNECTION_LIMIT, srv->lim.conns_max,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, srv->lim.per_ip_max, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t) MEMORY_LIMIT, MHD_OPTION_END);
    if (srv->mhd != NULL)
        return srv;
    kiwi_error_make (err, 0, "listening on %s: libmicrohttpd did not start", listen_on);
fail:
    close (fd);
    free (srv);
    return NULL;
}

const char *
kiwi_http_server_address (const kiwi_http_server *srv)
{
    return srv->address;
}

int
kiwi_http_server_poll (kiwi_http_server *srv, int extra_fd, int extra_fd2, int timeout_ms, kiwi_error_t *err)
{
    const union MHD_DaemonInfo *di = MHD_get_daemon_info (srv->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    struct pollfd pf[3] = {
        { di != NULL ? di->epoll_fd : -1, POLLIN, 0 },
        { extra_fd, POLLIN, 0 },
        { extra_fd2, POLLIN, 0 },
    };
    MHD_UNSIGNED_LONG_LONG mhd_ms = 0;
    if (MHD_get_timeout (srv->mhd, &mhd_ms) == MHD_YES && mhd_ms < (MHD_UNSIGNED_LONG_LONG) timeout_ms)
        timeout_ms = (int) mhd_ms;
    int r = poll (pf, 3, timeout_ms);
    if (r < 0 && errno != EINTR)
        return kiwi_error_make (err, errno, "poll");
    if (MHD_run (srv->mhd) != MHD_YES)
        return kiwi_error_make (err, 0, "libmicrohttpd could not serve its connections");
    return r > 0 && ((pf[1].revents & POLLIN) || (pf[2].revents & POLLIN));
}

int
kiwi_http_respond (kiwi_http_server *srv, uint64_t id, int status, const char *content_type, const char *body,
                   size_t len)
{
    exchange *e = find (srv, id);
    if (e == NULL || !e->dispatched || e->answered)
        return -1;
    if (set_answer (e, (unsigned) status, content_type, body, len) < 0)
        return -1;
    e->answered = true;
    if (e->suspended) {
        e->suspended = false;
        MHD_resume_connection (e->mc);
    }
    return 0;
}

void
kiwi_http_server_stop_accepting (kiwi_http_server *srv)
{
    if (srv->lfd < 0)
        return;
    MHD_socket fd = MHD_quiesce_daemon (srv->mhd);
    if (fd != MHD_INVALID_SOCKET)
        close (fd);
    srv->lfd = -1;
}

size_t
kiwi_http_server_open_connections (const kiwi_http_server *srv)
{
    return srv->n_conns;
}

void
kiwi_http_server_free (kiwi_http_server *srv)
{
    if (srv == NULL)
        return;
    /* libmicrohttpd stops only with no connection suspended */
    static const char stopping[] = "{\"error\":\"the listener is stopping\"}\n";
    for (exchange *e = srv->list; e; e = e->next)
        if (e->suspended && kiwi_http_respond (srv, e->id, 503, "application/json", stopping, sizeof stopping - 1) < 0) {
            e->suspended = false;
            MHD_resume_connection (e->mc);
        }
    kiwi_http_server_stop_accepting (srv);
    MHD_stop_daemon (srv->mhd);
    free (srv);
}
