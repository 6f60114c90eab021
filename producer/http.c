/*
 * http.c: the small HTTP/1.1 server behind `kiwi ci-event --listen` (see
 * http.h). One thread, non-blocking sockets, poll(); each connection moves
 * HEAD → BODY → WAIT (the handler has it) → WRITE → LINGER (the response is
 * out, the write side shut down, what the client still sends is read and
 * dropped for a moment so it sees the response rather than a reset) → closed.
 */
#include "http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "log.h"
#include "opts.h"

#define LINGER_MS 2000

typedef enum { C_HEAD, C_BODY, C_WAIT, C_WRITE, C_LINGER } conn_state;

typedef struct conn {
    int fd;
    uint64_t id;
    conn_state state;
    char *in;             /* the head (and the first body bytes), KIWI_HTTP_HEAD_MAX + 1 */
    size_t in_len;
    size_t head_len;
    char *body;           /* content_length bytes */
    size_t body_len;
    kiwi_http_request req;
    char *out;
    size_t out_len, out_off;
    int64_t deadline;     /* CLOCK_MONOTONIC ms */
    char peer[80];
} conn;

struct kiwi_http_server {
    int lfd;
    char address[96];
    size_t max_body;
    kiwi_http_handler handler;
    void *ctx;
    conn *conns[KIWI_HTTP_CONNS_MAX];
    size_t n_conns;
    uint64_t next_id;
};

/* ---------------------------------------------------------------- parsing */

const char *
kiwi_http_reason (int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

const char *
kiwi_http_header_get (const kiwi_http_request *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++)
        if (strcasecmp (r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

static bool
is_tchar (unsigned char c)
{
    return isalnum (c) || strchr ("!#$%&'*+-.^_`|~", c) != NULL;
}

static int
refuse (int *status, int code, kiwi_error_t *err, const char *msg)
{
    *status = code;
    return kiwi_error_make (err, 0, "%s", msg);
}

/* Ends the line at p: returns the start of the next line, or NULL. Lines
 * end with CRLF or a bare LF. */
static char *
cut_line (char *p, char *end)
{
    char *nl = memchr (p, '\n', (size_t) (end - p));
    if (nl == NULL)
        return NULL;
    if (nl > p && nl[-1] == '\r')
        nl[-1] = '\0';
    *nl = '\0';
    return nl + 1;
}

int
kiwi_http_parse_head (char *buf, size_t len, kiwi_http_request *req, int *status, kiwi_error_t *err)
{
    /* Find the blank line that ends the head. */
    size_t head = 0;
    for (size_t i = 0; i < len && i < KIWI_HTTP_HEAD_MAX; i++)
        if (buf[i] == '\n' && ((i >= 1 && buf[i - 1] == '\n') || (i >= 3 && memcmp (buf + i - 3, "\r\n\r\n", 4) == 0))) {
            head = i + 1;
            break;
        }
    if (head == 0) {
        if (len >= KIWI_HTTP_HEAD_MAX)
            return refuse (status, 431, err, "request head larger than 64 KiB");
        return 0;
    }
    if (memchr (buf, '\0', head) != NULL)
        return refuse (status, 400, err, "NUL byte in the request head");

    memset (req, 0, sizeof *req);
    req->content_length = -1;
    char *end = buf + head;
    char *p = buf;
    /* tolerate empty lines before the request line (RFC 9112 2.2) */
    while (p < end && (*p == '\r' || *p == '\n'))
        p++;
    char *line = p;
    p = cut_line (p, end);
    if (p == NULL)
        return refuse (status, 400, err, "malformed request line");
    char *sp1 = strchr (line, ' ');
    char *sp2 = sp1 ? strchr (sp1 + 1, ' ') : NULL;
    if (sp1 == NULL || sp2 == NULL || sp1 == line || sp2 == sp1 + 1 || strchr (sp2 + 1, ' ') != NULL)
        return refuse (status, 400, err, "malformed request line");
    *sp1 = '\0';
    *sp2 = '\0';
    for (char *m = line; *m; m++)
        if (!is_tchar ((unsigned char) *m))
            return refuse (status, 400, err, "malformed method");
    for (unsigned char *t = (unsigned char *) sp1 + 1; *t; t++)
        if (*t <= 0x20 || *t == 0x7f)
            return refuse (status, 400, err, "malformed request target");
    const char *version = sp2 + 1;
    if (strncmp (version, "HTTP/", 5) != 0 || !isdigit ((unsigned char) version[5]) || version[6] != '.'
        || !isdigit ((unsigned char) version[7]) || version[8] != '\0')
        return refuse (status, 400, err, "malformed HTTP version");
    if (version[5] != '1')
        return refuse (status, 505, err, "only HTTP/1.x is supported");
    req->method = line;
    req->target = sp1 + 1;
    req->minor_version = version[7] - '0';

    while (p < end) {
        line = p;
        p = cut_line (p, end);
        if (p == NULL)
            return refuse (status, 400, err, "malformed header");
        if (*line == '\0')
            break; /* the blank line */
        if (*line == ' ' || *line == '\t')
            return refuse (status, 400, err, "obsolete header line folding");
        char *colon = strchr (line, ':');
        if (colon == NULL || colon == line)
            return refuse (status, 400, err, "malformed header");
        *colon = '\0';
        for (char *n = line; *n; n++)
            if (!is_tchar ((unsigned char) *n))
                return refuse (status, 400, err, "malformed header name");
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t vl = strlen (v);
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            v[--vl] = '\0';
        for (unsigned char *c = (unsigned char *) v; *c; c++)
            if ((*c < 0x20 && *c != '\t') || *c == 0x7f)
                return refuse (status, 400, err, "control character in a header value");
        if (req->n_headers == KIWI_HTTP_HEADERS_MAX)
            return refuse (status, 431, err, "more than 100 headers");
        req->headers[req->n_headers++] = (kiwi_http_header) { line, v };

        if (strcasecmp (line, "Content-Length") == 0) {
            if (*v == '\0' || strlen (v) > 18 || strspn (v, "0123456789") != strlen (v))
                return refuse (status, 400, err, "malformed Content-Length");
            long long cl = strtoll (v, NULL, 10);
            if (req->content_length >= 0 && req->content_length != cl)
                return refuse (status, 400, err, "conflicting Content-Length headers");
            req->content_length = cl;
        } else if (strcasecmp (line, "Transfer-Encoding") == 0)
            return refuse (status, 501, err, "Transfer-Encoding is not supported; send Content-Length");
    }
    if (req->content_length < 0 && (strcmp (req->method, "POST") == 0 || strcmp (req->method, "PUT") == 0))
        return refuse (status, 411, err, "Content-Length required");
    return (int) head;
}

/* ---------------------------------------------------------------- server */

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

kiwi_http_server *
kiwi_http_server_new (const char *listen_on, size_t max_body, kiwi_http_handler handler, void *ctx,
                      kiwi_error_t *err)
{
    /* HOST:PORT, [V6]:PORT, :PORT */
    char host[256], port[16];
    const char *colon = strrchr (listen_on, ':');
    if (colon == NULL || colon[1] == '\0' || strlen (colon + 1) > 5
        || strspn (colon + 1, "0123456789") != strlen (colon + 1) || atoi (colon + 1) > 65535) {
        kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "--listen: `%s` is not ADDR:PORT (e.g. 127.0.0.1:8080, [::1]:8080, :8080)",
                              listen_on);
        return NULL;
    }
    size_t hl = (size_t) (colon - listen_on);
    const char *h = listen_on;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= sizeof host) {
        kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "--listen: host too long");
        return NULL;
    }
    memcpy (host, h, hl);
    host[hl] = '\0';
    snprintf (port, sizeof port, "%s", colon + 1);

    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo (hl ? host : NULL, port, &hints, &ai);
    if (gai != 0) {
        kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "--listen: cannot resolve `%s`: %s", listen_on, gai_strerror (gai));
        return NULL;
    }
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
    if (fd < 0) {
        kiwi_error_make (err, saved, "listening on %s", listen_on);
        return NULL;
    }
    kiwi_http_server *srv = calloc (1, sizeof *srv);
    if (srv == NULL) {
        close (fd);
        kiwi_error_make (err, ENOMEM, "listening on %s", listen_on);
        return NULL;
    }
    srv->lfd = fd;
    srv->max_body = max_body;
    srv->handler = handler;
    srv->ctx = ctx;
    srv->next_id = 1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname (fd, (struct sockaddr *) &ss, &sl) == 0)
        format_addr ((struct sockaddr *) &ss, srv->address, sizeof srv->address);
    return srv;
}

const char *
kiwi_http_server_address (const kiwi_http_server *srv)
{
    return srv->address;
}

void
kiwi_http_server_stop_accepting (kiwi_http_server *srv)
{
    if (srv->lfd >= 0)
        close (srv->lfd);
    srv->lfd = -1;
}

size_t
kiwi_http_server_open_connections (const kiwi_http_server *srv)
{
    size_t n = 0;
    for (size_t i = 0; i < srv->n_conns; i++)
        if (srv->conns[i]->state != C_LINGER)
            n++;
    return n;
}

static void
conn_free (conn *c)
{
    if (c->fd >= 0)
        close (c->fd);
    free (c->in);
    free (c->body);
    free (c->out);
    free (c);
}

static void
drop (kiwi_http_server *srv, size_t i)
{
    conn_free (srv->conns[i]);
    srv->conns[i] = srv->conns[--srv->n_conns];
}

static conn *
find (kiwi_http_server *srv, uint64_t id)
{
    for (size_t i = 0; i < srv->n_conns; i++)
        if (srv->conns[i]->id == id)
            return srv->conns[i];
    return NULL;
}

/* Writes what it can of the response; moves on to LINGER when all is out.
 * Returns < 0 when the connection should be dropped. */
static int
flush_out (conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send (c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -1;
        }
        c->out_off += (size_t) w;
    }
    shutdown (c->fd, SHUT_WR);
    c->state = C_LINGER;
    c->deadline = kiwi_mono_ms () + LINGER_MS;
    return 0;
}

static int
respond (conn *c, int status, const char *content_type, const char *body, size_t len)
{
    free (c->out);
    c->out = NULL;
    int n = asprintf (&c->out,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n"
                      "Cache-Control: no-store\r\n\r\n",
                      status, kiwi_http_reason (status), content_type, len);
    if (n < 0) {
        c->out = NULL;
        return -1;
    }
    char *all = realloc (c->out, (size_t) n + len);
    if (all == NULL)
        return -1;
    memcpy (all + n, body, len);
    c->out = all;
    c->out_len = (size_t) n + len;
    c->out_off = 0;
    c->state = C_WRITE;
    c->deadline = kiwi_mono_ms () + KIWI_HTTP_REQUEST_TIMEOUT_MS;
    return flush_out (c);
}

/* An error answer with {"error": msg}; msg is ours (ASCII). */
static int
respond_error (conn *c, int status, const char *msg)
{
    char body[512];
    size_t n = 0;
    n += (size_t) snprintf (body, sizeof body, "{\"error\":\"");
    for (const char *p = msg; *p && n < sizeof body - 8; p++) {
        if (*p == '"' || *p == '\\')
            body[n++] = '\\';
        body[n++] = (unsigned char) *p < 0x20 ? ' ' : *p;
    }
    n += (size_t) snprintf (body + n, sizeof body - n, "\"}\n");
    kiwi_info ("%s: %d %s: %s", c->peer, status, kiwi_http_reason (status), msg);
    return respond (c, status, "application/json", body, n);
}

int
kiwi_http_respond (kiwi_http_server *srv, uint64_t id, int status, const char *content_type, const char *body,
                   size_t len)
{
    conn *c = find (srv, id);
    if (c == NULL || c->state != C_WAIT)
        return -1;
    if (respond (c, status, content_type, body, len) < 0) {
        /* Not freed here: the caller may be inside this connection's
         * dispatch. The next round drops it. */
        c->state = C_LINGER;
        c->deadline = 0;
        return -1;
    }
    return 0;
}

static void
accept_all (kiwi_http_server *srv)
{
    while (srv->lfd >= 0 && srv->n_conns < KIWI_HTTP_CONNS_MAX) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4 (srv->lfd, (struct sockaddr *) &ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                kiwi_warn ("accepting a connection: %s", strerror (errno));
            return;
        }
        conn *c = calloc (1, sizeof *c);
        if (c != NULL && (c->in = malloc (KIWI_HTTP_HEAD_MAX + 1)) == NULL) {
            free (c);
            c = NULL;
        }
        if (c == NULL) {
            close (fd);
            return;
        }
        c->fd = fd;
        c->id = srv->next_id++;
        c->state = C_HEAD;
        c->deadline = kiwi_mono_ms () + KIWI_HTTP_REQUEST_TIMEOUT_MS;
        format_addr ((struct sockaddr *) &ss, c->peer, sizeof c->peer);
        srv->conns[srv->n_conns++] = c;
    }
}

/* The body is complete: hand the request over. */
static void
dispatch (kiwi_http_server *srv, conn *c)
{
    c->state = C_WAIT;
    c->req.conn = c->id;
    c->req.body = c->body ? c->body : "";
    c->req.body_len = c->body_len;
    c->req.peer = c->peer;
    srv->handler (srv, &c->req, srv->ctx);
}

/* Reads what is there. Returns < 0 when the connection should be dropped. */
static int
on_readable (kiwi_http_server *srv, conn *c)
{
    if (c->state == C_LINGER) {
        char sink[16384];
        ssize_t r = recv (c->fd, sink, sizeof sink, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return -1;
        return 0;
    }
    if (c->state == C_HEAD) {
        ssize_t r = recv (c->fd, c->in + c->in_len, KIWI_HTTP_HEAD_MAX - c->in_len, 0);
        if (r < 0)
            return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        if (r == 0)
            return -1; /* the client left before a full head */
        c->in_len += (size_t) r;
        int status = 0;
        kiwi_error_t err = NULL;
        int head = kiwi_http_parse_head (c->in, c->in_len, &c->req, &status, &err);
        if (head == 0)
            return 0;
        if (head < 0) {
            int rr = respond_error (c, status, kiwi_error_msg (err));
            kiwi_error_free (&err);
            return rr;
        }
        c->head_len = (size_t) head;
        size_t want = c->req.content_length > 0 ? (size_t) c->req.content_length : 0;
        if (c->req.content_length > 0 && (unsigned long long) c->req.content_length > srv->max_body) {
            char msg[128];
            snprintf (msg, sizeof msg, "body of %lld bytes is over the limit of %zu bytes", c->req.content_length,
                      srv->max_body);
            return respond_error (c, 413, msg);
        }
        if (want > 0 && (c->body = malloc (want)) == NULL)
            return respond_error (c, 500, "out of memory");
        size_t have = c->in_len - c->head_len;
        if (have > want)
            have = want; /* bytes after the body: a pipelined request, ignored */
        if (have > 0)
            memcpy (c->body, c->in + c->head_len, have);
        c->body_len = have;
        c->state = C_BODY;
        const char *expect = kiwi_http_header_get (&c->req, "Expect");
        if (expect != NULL && strcasecmp (expect, "100-continue") == 0 && c->body_len < want) {
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            ssize_t w = send (c->fd, cont, sizeof cont - 1, MSG_NOSIGNAL);
            (void) w; /* a fresh socket's buffer takes it; if not, the client sends the body after its wait */
        }
    } else if (c->state == C_BODY) {
        size_t want = (size_t) c->req.content_length;
        ssize_t r = recv (c->fd, c->body + c->body_len, want - c->body_len, 0);
        if (r < 0)
            return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        if (r == 0)
            return -1;
        c->body_len += (size_t) r;
    } else
        return 0;
    if (c->state == C_BODY && c->body_len == (size_t) (c->req.content_length > 0 ? c->req.content_length : 0))
        dispatch (srv, c);
    return 0;
}

int
kiwi_http_server_poll (kiwi_http_server *srv, int extra_fd, int extra_fd2, int timeout_ms, kiwi_error_t *err)
{
    struct pollfd pf[KIWI_HTTP_CONNS_MAX + 3];
    size_t n = 0;
    int64_t now = kiwi_mono_ms ();
    int64_t next = now + timeout_ms;
    size_t lidx = SIZE_MAX, e1 = SIZE_MAX, e2 = SIZE_MAX;
    if (srv->lfd >= 0 && srv->n_conns < KIWI_HTTP_CONNS_MAX) {
        lidx = n;
        pf[n++] = (struct pollfd) { srv->lfd, POLLIN, 0 };
    }
    if (extra_fd >= 0) {
        e1 = n;
        pf[n++] = (struct pollfd) { extra_fd, POLLIN, 0 };
    }
    if (extra_fd2 >= 0) {
        e2 = n;
        pf[n++] = (struct pollfd) { extra_fd2, POLLIN, 0 };
    }
    size_t first_conn = n;
    size_t nc = srv->n_conns;
    for (size_t i = 0; i < nc; i++) {
        conn *c = srv->conns[i];
        short ev = c->state == C_WRITE ? POLLOUT : c->state == C_WAIT ? 0 : POLLIN;
        pf[n++] = (struct pollfd) { c->fd, ev, 0 };
        if (c->state != C_WAIT && c->deadline < next)
            next = c->deadline;
    }
    int wait = next > now ? (int) (next - now) : 0;
    int r = poll (pf, n, wait);
    if (r < 0) {
        if (errno == EINTR)
            return 0;
        return kiwi_error_make (err, errno, "poll");
    }
    int extra_ready = (e1 != SIZE_MAX && (pf[e1].revents & POLLIN)) || (e2 != SIZE_MAX && (pf[e2].revents & POLLIN));

    /* Serve the connections polled (by identity: the array may shrink). */
    conn *polled[KIWI_HTTP_CONNS_MAX];
    short revents[KIWI_HTTP_CONNS_MAX];
    for (size_t i = 0; i < nc; i++) {
        polled[i] = srv->conns[i];
        revents[i] = pf[first_conn + i].revents;
    }
    now = kiwi_mono_ms ();
    for (size_t i = 0; i < nc; i++) {
        conn *c = polled[i];
        size_t idx = 0;
        while (idx < srv->n_conns && srv->conns[idx] != c)
            idx++;
        if (idx == srv->n_conns)
            continue; /* dropped meanwhile */
        int rc = 0;
        if (revents[i] & (POLLIN | POLLHUP | POLLERR)) {
            if (c->state == C_WAIT)
                rc = (revents[i] & (POLLHUP | POLLERR)) ? -1 : 0;
            else if (c->state != C_WRITE)
                rc = on_readable (srv, c);
        }
        if (rc == 0 && c->state == C_WRITE && (revents[i] & (POLLOUT | POLLERR | POLLHUP)))
            rc = flush_out (c);
        if (rc == 0 && c->state != C_WAIT && now >= c->deadline) {
            if (c->state == C_HEAD || c->state == C_BODY)
                rc = respond_error (c, 408, "request not complete within 30 s");
            else
                rc = -1;
        }
        if (rc < 0) {
            /* the pointer may have moved if the handler responded; look again */
            for (size_t k = 0; k < srv->n_conns; k++)
                if (srv->conns[k] == c) {
                    drop (srv, k);
                    break;
                }
        }
    }
    if (lidx != SIZE_MAX && (pf[lidx].revents & POLLIN))
        accept_all (srv);
    return extra_ready;
}

void
kiwi_http_server_free (kiwi_http_server *srv)
{
    if (srv == NULL)
        return;
    kiwi_http_server_stop_accepting (srv);
    while (srv->n_conns > 0)
        drop (srv, srv->n_conns - 1);
    free (srv);
}
