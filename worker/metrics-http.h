/*
 * metrics-http.h: the HTTP endpoint Prometheus scrapes (GET /metrics).
 *
 * libmicrohttpd serves it from a thread of its own, so a slow or stuck
 * client never holds the daemon's loop; each request renders the text
 * afresh through the caller's function (which must be thread-safe:
 * worker-metrics.h is). Other paths answer 404, other methods 405. The
 * worker's signals stay with its loop: the server's threads block them all.
 *
 * Ownership: kiwi_metrics_server_start returns a server the caller stops
 * (and frees) with kiwi_metrics_server_stop; `ud` is borrowed until then.
 */
#ifndef KIWI_WORKER_METRICS_HTTP_H
#define KIWI_WORKER_METRICS_HTTP_H

#include <stddef.h>

#include "common/error.h"

/* The accepted form of an address (KIWI_METRICS_ADDR_FORM) and its check,
 * kiwi_hostport_split, are the settings table's (common/settings.h). */

typedef char *(*kiwi_metrics_render_fn) (void *ud, size_t *len);

typedef struct kiwi_metrics_server kiwi_metrics_server;

/* Listens on `addr` (HOST:PORT; a host name must resolve to an address of
 * this machine) and serves `render`'s text at /metrics. NULL with *err
 * naming the address when it cannot (a port in use, a bad address). */
kiwi_metrics_server *kiwi_metrics_server_start (const char *addr, kiwi_metrics_render_fn render, void *ud,
                                                kiwi_error_t *err);

/* The port listened on. */
int kiwi_metrics_server_port (const kiwi_metrics_server *s);

/* Stops serving, closes the socket, frees. NULL is a no-op. */
void kiwi_metrics_server_stop (kiwi_metrics_server *s);

#endif
