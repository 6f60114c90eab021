/*
 * proxy-runner.h: the worker's egress proxy process, kept alive in the
 * daemon's event loop.
 *
 * kiwi_proxy_runner_start() writes the configuration and starts Squid
 * (egress-proxy.h); when it dies it is started again after a back-off (1 s,
 * doubling to 30 s) and the heartbeat's `egress_proxy` check reports it
 * down meanwhile. Every 50 ms the runner reads what Squid appended to its
 * access log (following it to the new file when proxy.sh run rotated it
 * past its bound): each request is counted by host, and each denied attempt is
 * logged with the host, port, SNI, rule and the setting that would allow
 * it, and counted; the daemon is told of each (kiwi_proxy_runner_on_denied)
 * to publish it as the event of the task whose install it came from.
 *
 * Ownership: the runner owns its child, its log file and its counters;
 * kiwi_proxy_runner_stop() stops the child (SIGTERM to its process group,
 * then SIGKILL after 5 s) and frees everything.
 */
#ifndef KIWI_WORKER_PROXY_RUNNER_H
#define KIWI_WORKER_PROXY_RUNNER_H

#include <ev.h>
#include <jansson.h>

#include "worker/config.h"
#include "worker/egress/egress-proxy.h"
#include "common/error.h"

typedef struct kiwi_proxy_runner kiwi_proxy_runner;

/* NULL in *out (and 0 returned) with KIWI_INSTALL_EGRESS=open. An error
 * for a bad setting or a proxy that cannot be configured or started. */
int kiwi_proxy_runner_start (struct ev_loop *loop, const kiwi_worker_config *cfg, kiwi_proxy_runner **out,
                             kiwi_error_t *err);

/* Tells fn of every denied attempt as it is read (at most 50 ms after
 * Squid logged it), with the log entry (valid for the call only) and the
 * rule that denied it. NULL fn: nobody is told. A NULL runner: nothing. */
typedef void (*kiwi_proxy_denied_cb) (const kiwi_proxy_log_entry *e, const char *rule, void *userdata);
void kiwi_proxy_runner_on_denied (kiwi_proxy_runner *r, kiwi_proxy_denied_cb fn, void *userdata);

/* The `egress_proxy` check: {ok, detail, checked_at}, new reference. */
json_t *kiwi_proxy_runner_check (const kiwi_proxy_runner *r);

void kiwi_proxy_runner_stop (kiwi_proxy_runner *r);

#endif
