/*
 * daemon.c: the Kafka-fed pool of task slots (see daemon.h).
 *
 * Life of a task message:
 *   consumed ─► decode ─┬─ invalid ─► dead-letter topic ─► (acked) commit
 *                       └─ valid ─► Redis: finished before? ─┬─ yes ─► (republish if never acked) commit
 *                                                           └─ no ─► lease ─┬─ won ─► task process in a slot
 *                                                                           └─ held ─► wait, look again later
 *   task process ─► progress frames ─► numbered, published
 *               └─► result frame ─► Redis record ─► results topic ─► (acked) lease released, commit
 *
 * Offsets are committed per partition up to the first message that is not
 * finished, so a slow task never lets a later commit skip it.
 *
 * This file is the run (d->stop: signals, the drain, a fatal stop) and
 * the egress proxy's set-up (d->proxy); it sets up and tears down every
 * other room (daemon-internal.h).
 */
#include "worker/daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "worker/daemon/daemon-internal.h"
#include "worker/egress/egress.h"
#include "common/kafka-conf.h"
#include "common/log.h"
#include "sandbox/sandbox.h"
#include "common/strv.h"

void
kiwi__fatal (kiwi__daemon *d, const char *fmt, ...)
{
    if (!d->stop.fatal) {
        va_list ap;
        va_start (ap, fmt);
        vsnprintf (d->stop.fatal_msg, sizeof d->stop.fatal_msg, fmt, ap);
        va_end (ap);
    }
    d->stop.fatal = true;
    ev_break (d->loop, EVBREAK_ALL);
}

void
kiwi__out_of_memory (kiwi__daemon *d, const char *what)
{
    kiwi__fatal (d, "out of memory: %s", what);
}

/* Draining ends when no task runs and no look-up is awaiting its reply
 * (after the drain deadline, when no task runs). */
void
kiwi__drain_done_check (kiwi__daemon *d)
{
    kiwi_admission a = kiwi__admission (d);
    if (kiwi_admission_drained (&a))
        ev_break (d->loop, EVBREAK_ALL);
}

static void
drain_deadline_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    kiwi__daemon *d = w->data;
    kiwi_warn ("drain deadline reached: stopping %d task(s); they will be redelivered", d->slots.busy);
    kiwi__slots_kill (d, SIGTERM); /* the task process removes its sandboxes */
    ev_timer_stop (loop, w);
    kiwi__slots_abandon_retries (d);
    d->stop.drain_expired = true;
    kiwi__drain_done_check (d); /* when only look-ups Redis did not answer were left */
}

static void
kill_stragglers_cb (struct ev_loop *loop, ev_timer *w, int revents)
{
    kiwi__slots_kill (w->data, SIGKILL);
}

static void
signal_cb (struct ev_loop *loop, ev_signal *w, int revents)
{
    kiwi__daemon *d = w->data;
    if (d->stop.draining) {
        kiwi_warn ("second signal: stopping now");
        ev_timer_stop (loop, &d->stop.drain_timer);
        drain_deadline_cb (loop, &d->stop.drain_timer, 0);
        return;
    }
    d->stop.draining = true;
    kiwi_info ("draining: no new tasks; %d in flight get %lld s to finish", d->slots.busy,
               (long long) d->cfg->drain_timeout_s);
    kiwi__consumer_set_paused (d, true);
    kiwi__slots_abandon_retries (d);
    /* parked and queued tasks are not ours to finish: they stay uncommitted */
    if (d->admit.nready > 0)
        kiwi_info ("draining: %d task(s) next in line left uncommitted, for redelivery", d->admit.nready);
    kiwi__admit_drop (d, NULL, 0);
    if (d->slots.busy == 0 && d->admit.deciding == 0) {
        ev_break (loop, EVBREAK_ALL);
        return;
    }
    ev_timer_init (&d->stop.drain_timer, drain_deadline_cb, (double) d->cfg->drain_timeout_s, 0.);
    d->stop.drain_timer.data = d;
    ev_timer_start (loop, &d->stop.drain_timer);
}

/* The settings every client of the worker shares, then the operator's
 * properties (kafka.property.*, KIWI_KAFKA_PROPERTIES: SASL, TLS, ...),
 * which may override them. NULL with *err naming the property librdkafka
 * refused. */
static rd_kafka_conf_t *
base_conf (const kiwi_worker_config *cfg, kiwi_error_t *err)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new ();
    char errstr[256];
    rd_kafka_conf_set (conf, "bootstrap.servers", cfg->brokers, errstr, sizeof errstr);
    rd_kafka_conf_set (conf, "client.id", cfg->worker_id, errstr, sizeof errstr);
    rd_kafka_conf_set (conf, "reconnect.backoff.max.ms", "2000", errstr, sizeof errstr);
    cleanup_strv kiwi_strv props = KIWI_STRV_INIT;
    if (kiwi_worker_config_kafka_props (cfg, &props, err) < 0 || kiwi_kafka_props_apply (conf, &props, err) < 0) {
        rd_kafka_conf_destroy (conf);
        return NULL;
    }
    return conf;
}

static int
setup_kafka (kiwi__daemon *d, kiwi_error_t *err)
{
    char errstr[512];
    rd_kafka_conf_t *pc = base_conf (d->cfg, err);
    if (pc == NULL)
        return -1;
    rd_kafka_conf_set (pc, "enable.idempotence", "true", errstr, sizeof errstr);
    rd_kafka_conf_set (pc, "acks", "all", errstr, sizeof errstr);
    rd_kafka_conf_set (pc, "linger.ms", "2", errstr, sizeof errstr);
    char timeout_ms[32];
    snprintf (timeout_ms, sizeof timeout_ms, "%lld", (long long) d->cfg->delivery_timeout * 1000);
    rd_kafka_conf_set (pc, "message.timeout.ms", timeout_ms, errstr, sizeof errstr);
    rd_kafka_conf_set_dr_msg_cb (pc, kiwi__producer_dr_msg_cb);
    rd_kafka_conf_set_opaque (pc, d);
    d->producer.rk = rd_kafka_new (RD_KAFKA_PRODUCER, pc, errstr, sizeof errstr);
    if (d->producer.rk == NULL)
        return kiwi_error_make (err, 0, "kafka producer: %s", errstr);
    /* pc is now owned by the producer */

    rd_kafka_conf_t *cc = base_conf (d->cfg, err);
    if (cc == NULL)
        return -1;
    if (rd_kafka_conf_set (cc, "group.id", d->cfg->group, errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (cc, "enable.auto.commit", "false", errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (cc, "auto.offset.reset", "earliest", errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (cc, "session.timeout.ms", "10000", errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (cc, "heartbeat.interval.ms", "1000", errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (cc, "max.poll.interval.ms", "86400000", errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy (cc);
        return kiwi_error_make (err, 0, "kafka consumer configuration: %s", errstr);
    }
    rd_kafka_conf_set_rebalance_cb (cc, kiwi__consumer_rebalance_cb);
    rd_kafka_conf_set_offset_commit_cb (cc, kiwi__consumer_commit_cb);
    rd_kafka_conf_set_opaque (cc, d);
    d->consumer.rk = rd_kafka_new (RD_KAFKA_CONSUMER, cc, errstr, sizeof errstr);
    if (d->consumer.rk == NULL)
        return kiwi_error_make (err, 0, "kafka consumer: %s", errstr);
    /* cc is now owned by the consumer */
    rd_kafka_poll_set_consumer (d->consumer.rk);
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new (1);
    rd_kafka_topic_partition_list_add (topics, d->cfg->topic_tasks, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe (d->consumer.rk, topics);
    rd_kafka_topic_partition_list_destroy (topics);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        return kiwi_error_make (err, 0, "subscribing to %s: %s", d->cfg->topic_tasks, rd_kafka_err2str (e));

    if (pipe2 (d->consumer.pipe, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2 (d->producer.pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return kiwi_error_make (err, errno, "pipes for kafka events");
    d->consumer.queue = rd_kafka_queue_get_consumer (d->consumer.rk);
    rd_kafka_queue_io_event_enable (d->consumer.queue, d->consumer.pipe[1], "1", 1);
    d->producer.queue = rd_kafka_queue_get_main (d->producer.rk);
    rd_kafka_queue_io_event_enable (d->producer.queue, d->producer.pipe[1], "1", 1);
    ev_io_init (&d->consumer.w, kiwi__consumer_io_cb, d->consumer.pipe[0], EV_READ);
    d->consumer.w.data = d;
    ev_io_start (d->loop, &d->consumer.w);
    ev_io_init (&d->producer.w, kiwi__producer_io_cb, d->producer.pipe[0], EV_READ);
    d->producer.w.data = d;
    ev_io_start (d->loop, &d->producer.w);
    return 0;
}

static void
timer_start (kiwi__daemon *d, ev_timer *t, void (*cb) (struct ev_loop *, ev_timer *, int), double first, double every)
{
    ev_timer_init (t, cb, first, every);
    t->data = d;
    ev_timer_start (d->loop, t);
}

static void
nflog_cb (struct ev_loop *loop, ev_io *w, int revents)
{
    (void) loop;
    (void) revents;
    kiwi__daemon *d = w->data;
    kiwi_error_t err = NULL;
    if (kiwi_nflog_read (d->proxy.nflog, &err) < 0) {
        kiwi_warn ("%s", kiwi_error_msg (err));
        kiwi_error_free (&err);
    }
}

/* The rules' log of this worker's install bridge (nflog.h): group
 * KIWI_EGRESS_NFLOG_GROUP + the bridge's number. Without it the rules
 * still reject; only the events are missing, and the log and the
 * heartbeat's egress_proxy detail say so. */
static void
open_nflog (kiwi__daemon *d)
{
    const char *bridge = kiwi_proxy_bridge (d->cfg);
    kiwi_error_t err = NULL;
    if (kiwi_proxy_nflog_open (d->cfg, kiwi__slots_on_firewall_denied, d, &d->proxy.nflog, &err) == 0) {
        ev_io_init (&d->proxy.nflog_w, nflog_cb, kiwi_nflog_fd (d->proxy.nflog), EV_READ);
        d->proxy.nflog_w.data = d;
        ev_io_start (d->loop, &d->proxy.nflog_w);
        return;
    }
    snprintf (d->proxy.nflog_error, sizeof d->proxy.nflog_error, "%s", kiwi_error_msg (err));
    kiwi_warn ("egress rules: %s: what they reject from %s is not told as egress_denied events", d->proxy.nflog_error,
               bridge);
    kiwi_error_free (&err);
}

int
kiwi_daemon_run (const kiwi_worker_config *cfg, const char *self_exe, kiwi_error_t *err)
{
    kiwi__daemon d = { .cfg = cfg,
                       .self_exe = self_exe,
                       .slots = { .n = (int) cfg->slots },
                       .egress_check = { .fd = -1 },
                       .outbox = { .held = { .max_bytes = KIWI__OUTBOX_MAX_BYTES } } };
    d.egress_check.results = json_object ();
    d.loop = ev_default_loop (EVFLAG_AUTO);
    int slots_rc = kiwi__slots_init (&d);
    if (d.egress_check.results == NULL || d.loop == NULL || slots_rc < 0) {
        kiwi_error_make (err, ENOMEM, "starting the daemon: %s",
                         d.loop == NULL ? "no event loop (libev)" : "out of memory");
        json_decref (d.egress_check.results);
        kiwi__slots_free (&d);
        return -1;
    }
    signal (SIGPIPE, SIG_IGN);
    kiwi_egress_apply_if_set (cfg);
    {
        /* sandboxes a crashed run of this worker left behind */
        const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (cfg->sandbox, NULL);
        kiwi_sandbox_config sc = { .docker_socket = cfg->docker_socket, .state_dir = cfg->state_dir,
                                   .worker_id = cfg->worker_id,
                                   .install_bridge = cfg->install_bridge, .firecracker = &cfg->fc };
        kiwi_sandbox_env *env = NULL;
        kiwi_error_t e = NULL;
        int removed = 0;
        if (drv && kiwi_sandbox_env_open (drv, &sc, &env, &e) == 0 && kiwi_sandbox_reap (env, &removed, &e) == 0) {
            if (removed)
                kiwi_info ("removed %d sandbox part(s) left by an earlier run of %s", removed, cfg->worker_id);
        } else
            kiwi_warn ("reaping old sandboxes: %s", kiwi_error_msg (e));
        kiwi_error_free (&e);
        kiwi_sandbox_env_close (env);
    }
    if ((d.metrics.registry = kiwi_worker_metrics_new (KIWI_VERSION, cfg->worker_id, d.slots.n, err)) == NULL)
        goto out;
    if (cfg->metrics_addr
        && (d.metrics.server = kiwi_worker_metrics_serve (d.metrics.registry, cfg->metrics_addr, err)) == NULL)
        goto out;
    if (d.metrics.server)
        kiwi_info ("metrics at http://%s/metrics", cfg->metrics_addr);
    /* after the reap: opening the sandbox environment creates the install
     * network whose gateway the proxy listens on */
    if (kiwi_proxy_runner_start (d.loop, cfg, &d.proxy.runner, err) < 0)
        goto out;
    kiwi_proxy_runner_on_denied (d.proxy.runner, kiwi__slots_on_egress_denied, &d);
    if (d.proxy.runner != NULL)
        open_nflog (&d);
    if (setup_kafka (&d, err) < 0)
        goto out;
    kiwi__redis_connect (&d);
    ev_signal_init (&d.stop.sigterm_w, signal_cb, SIGTERM);
    d.stop.sigterm_w.data = &d;
    ev_signal_start (d.loop, &d.stop.sigterm_w);
    ev_signal_init (&d.stop.sigint_w, signal_cb, SIGINT);
    d.stop.sigint_w.data = &d;
    ev_signal_start (d.loop, &d.stop.sigint_w);
    timer_start (&d, &d.consumer.poll_timer, kiwi__consumer_poll_timer_cb, 0.5, 0.5);
    timer_start (&d, &d.metrics.heartbeat_timer, kiwi__health_heartbeat_cb, 0.0, (double) cfg->heartbeat_interval_s);
    timer_start (&d, &d.redis.lease_timer, kiwi__redis_lease_timer_cb, (double) cfg->lease_ttl_s / 3.0,
                 (double) cfg->lease_ttl_s / 3.0);
    timer_start (&d, &d.redis.timer, kiwi__redis_timer_cb, 2.0, 2.0);
    timer_start (&d, &d.admit.wait_timer, kiwi__admit_wait_timer_cb, 1.0, 1.0);
    timer_start (&d, &d.egress_check.timer, kiwi__egress_check_timer_cb, 1.0, (double) cfg->egress_interval_s);
    timer_start (&d, &d.gc.timer, kiwi__gc_timer_cb, 1.0, 600.0);
    kiwi_info ("worker %s: %d slot(s), %lld CPU(s) per sandbox, tasks from %s (group %s) at %s", cfg->worker_id,
               d.slots.n, (long long) cfg->cpus, cfg->topic_tasks, cfg->group, cfg->brokers);

    ev_run (d.loop, 0);

    if (d.stop.fatal) {
        kiwi_error_make (err, 0, "%s", d.stop.fatal_msg);
        /* stop the task processes; they remove their sandboxes */
        d.stop.draining = true;
        kiwi__slots_abandon_retries (&d);
        kiwi__slots_kill (&d, SIGTERM);
        ev_timer straggle;
        ev_timer_init (&straggle, kill_stragglers_cb, 15.0, 0.);
        straggle.data = &d;
        ev_timer_start (d.loop, &straggle);
        while (d.slots.busy > 0 && ev_run (d.loop, EVRUN_ONCE))
            ;
        ev_timer_stop (d.loop, &straggle);
    }
    kiwi__health_publish_heartbeat (&d);
    /* every delivery acknowledged (and its offset committed) before the
     * consumer goes */
    kiwi__outbox_flush (&d, 10000);
    rd_kafka_flush (d.producer.rk, 10000);
    rd_kafka_poll (d.producer.rk, 0);
    kiwi_info ("closing the consumer");
    rd_kafka_consumer_close (d.consumer.rk);
out:
    if (d.redis.ctx && d.redis.ok)
        redisAsyncHandleWrite (d.redis.ctx); /* lease releases still buffered go out */
    if (d.redis.ctx)
        redisAsyncFree (d.redis.ctx);
    if (d.consumer.queue)
        rd_kafka_queue_destroy (d.consumer.queue);
    if (d.producer.queue)
        rd_kafka_queue_destroy (d.producer.queue);
    if (d.consumer.rk)
        rd_kafka_destroy (d.consumer.rk);
    if (d.producer.rk)
        rd_kafka_destroy (d.producer.rk);
    if (d.consumer.assignment)
        rd_kafka_topic_partition_list_destroy (d.consumer.assignment);
    kiwi_offsets_clear (&d.consumer.offsets);
    kiwi__consumer_commits_clear (&d);
    kiwi__admit_drop (&d, NULL, 0);
    kiwi__outbox_drop (&d);
    kiwi__egress_check_stop (&d);
    kiwi_proxy_runner_stop (d.proxy.runner);
    if (d.proxy.nflog != NULL) {
        ev_io_stop (d.loop, &d.proxy.nflog_w);
        kiwi_nflog_close (d.proxy.nflog);
    }
    json_decref (d.egress_check.results);
    kiwi_metrics_server_stop (d.metrics.server);
    kiwi_worker_metrics_free (d.metrics.registry);
    kiwi__slots_free (&d);
    return d.stop.fatal || (err && *err) ? -1 : 0;
}
