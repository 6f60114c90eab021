/*
 * metrics-http.c: GET /metrics over libmicrohttpd (see metrics-http.h).
 *
 * The listening socket is made here (so that a port in use or an address
 * that is not this machine's is an error with its errno) and handed to
 * libmicrohttpd, which closes it when stopped.
 */
#include "worker/metrics-http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "worker/metrics.h"
#include "common/settings.h"

struct kiwi_metrics_server {
    struct MHD_Daemon *mhd;
    kiwi_metrics_render_fn render;
    void *ud;
    int port;
};

static void
mhd_log (void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf (msg, sizeof msg, fmt, ap);
    size_t l = strlen (msg);
    while (l > 0 && msg[l - 1] == '\n')
        msg[--l] = '\0';
    kiwi_warn ("metrics endpoint: %s", msg);
}

static enum MHD_Result
reply (struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len, bool owned)
{
    struct MHD_Response *r = MHD_create_response_from_buffer (len, body,
                                                              owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (r == NULL) {
        if (owned)
            free (body);
        return MHD_NO;
    }
    MHD_add_response_header (r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header (r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response (c, status, r);
    MHD_destroy_response (r);
    return rc;
}

static enum MHD_Result
handle (void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
        const char *upload_data, size_t *upload_data_size, void **req_cls)
{
    kiwi_metrics_server *s = cls;
    static char not_allowed[] = "only GET and HEAD\n", not_found[] = "not found: the metrics are at /metrics\n",
                failed[] = "the metrics could not be rendered\n";
    if (strcmp (method, MHD_HTTP_METHOD_GET) != 0 && strcmp (method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply (c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", not_allowed, strlen (not_allowed), false);
    if (strcmp (url, "/metrics") != 0)
        return reply (c, MHD_HTTP_NOT_FOUND, "text/plain", not_found, strlen (not_found), false);
    size_t len = 0;
    char *body = s->render (s->ud, &len);
    if (body == NULL)
        return reply (c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", failed, strlen (failed), false);
    return reply (c, MHD_HTTP_OK, KIWI_METRICS_CONTENT_TYPE, body, len, true);
}

/* A listening TCP socket on host:port, or -1 with *err. */
static int
listen_on (const char *addr, const char *host, int port, int *bound_port, kiwi_error_t *err)
{
    char service[8];
    snprintf (service, sizeof service, "%d", port);
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG };
    struct addrinfo *res = NULL;
    int gai = getaddrinfo (host, service, &hints, &res);
    if (gai != 0)
        return kiwi_error_make (err, 0, "metrics address `%s`: %s", addr, gai_strerror (gai));
    int fd = socket (res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        kiwi_error_make (err, errno, "metrics address `%s`: socket", addr);
        freeaddrinfo (res);
        return -1;
    }
    int one = 1;
    setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (res->ai_family == AF_INET6)
        setsockopt (fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind (fd, res->ai_addr, res->ai_addrlen) < 0 || listen (fd, 16) < 0) {
        kiwi_error_make (err, errno, "metrics address `%s`: cannot listen there", addr);
        freeaddrinfo (res);
        close (fd);
        return -1;
    }
    freeaddrinfo (res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    *bound_port = port;
    if (getsockname (fd, (struct sockaddr *) &ss, &sl) == 0)
        *bound_port = ntohs (ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                                      : ((struct sockaddr_in *) &ss)->sin_port);
    return fd;
}

kiwi_metrics_server *
kiwi_metrics_server_start (const char *addr, kiwi_metrics_render_fn render, void *ud, kiwi_error_t *err)
{
    char host[256];
    int port;
    bool v6;
    if (kiwi_hostport_split (addr, host, sizeof host, &port, &v6, err) < 0) {
        kiwi_error_wrap (err, "metrics address `%s`", addr);
        return NULL;
    }
    kiwi_metrics_server *s = calloc (1, sizeof *s);
    if (s == NULL) {
        kiwi_error_make (err, ENOMEM, "metrics endpoint");
        return NULL;
    }
    s->render = render;
    s->ud = ud;
    int fd = listen_on (addr, host, port, &s->port, err);
    if (fd < 0) {
        free (s);
        return NULL;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    bool is_v6 = getsockname (fd, (struct sockaddr *) &ss, &sl) == 0 && ss.ss_family == AF_INET6;
    /* the server's thread inherits a mask with every signal blocked: they
     * are the loop's (SIGTERM drains, SIGCHLD reaps task processes) */
    sigset_t all, old;
    sigfillset (&all);
    pthread_sigmask (SIG_SETMASK, &all, &old);
    s->mhd = MHD_start_daemon (MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | (is_v6 ? MHD_USE_IPv6 : 0), 0,
                               NULL, NULL, handle, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                               MHD_OPTION_LISTEN_SOCKET, (MHD_socket) fd, MHD_OPTION_CONNECTION_LIMIT,
                               (unsigned int) 32, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) 10, MHD_OPTION_END);
    pthread_sigmask (SIG_SETMASK, &old, NULL);
    if (s->mhd == NULL) {
        close (fd);
        free (s);
        kiwi_error_make (err, 0, "metrics address `%s`: libmicrohttpd did not start", addr);
        return NULL;
    }
    return s;
}

int
kiwi_metrics_server_port (const kiwi_metrics_server *s)
{
    return s->port;
}

void
kiwi_metrics_server_stop (kiwi_metrics_server *s)
{
    if (s == NULL)
        return;
    MHD_stop_daemon (s->mhd);
    free (s);
}
