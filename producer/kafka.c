/*
 * kafka.c: producer and consumer set-up, delivery tracking and signal
 * handling shared by the kiwi commands (see kafka.h).
 */
#include "producer/kafka.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/kafka-conf.h"
#include "common/log.h"

volatile sig_atomic_t kiwi_cli_stop;
static int signal_pipe_w = -1;

static void
on_signal (int sig)
{
    int saved = errno;
    kiwi_cli_stop = sig;
    if (signal_pipe_w >= 0) {
        char c = 1;
        ssize_t r = write (signal_pipe_w, &c, 1);
        (void) r;
    }
    errno = saved;
}

int
kiwi_cli_signals_install (kiwi_error_t *err)
{
    int p[2];
    if (pipe2 (p, O_CLOEXEC | O_NONBLOCK) < 0)
        return kiwi_error_make (err, errno, "creating the signal pipe");
    signal_pipe_w = p[1];
    struct sigaction sa;
    memset (&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset (&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: poll() returns EINTR */
    if (sigaction (SIGINT, &sa, NULL) < 0 || sigaction (SIGTERM, &sa, NULL) < 0)
        return kiwi_error_make (err, errno, "installing signal handlers");
    signal (SIGPIPE, SIG_IGN);
    return p[0];
}

static void
log_cb (const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    /* syslog levels. librdkafka logs every failed connection attempt at 3
     * (error); error_cb reports the state that matters (all brokers down),
     * so only 0..2 are shown above debug. */
    if (level <= 2)
        kiwi_warn ("kafka: %s: %s", fac, buf);
    else
        kiwi_debug ("kafka: %s: %s", fac, buf);
}

static void
error_cb (rd_kafka_t *rk, int e, const char *reason, void *opaque)
{
    if (e == RD_KAFKA_RESP_ERR__FATAL) {
        char buf[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error (rk, buf, sizeof buf);
        kiwi_errorf ("kafka: fatal error: %s: %s", rd_kafka_err2name (orig), buf);
        return;
    }
    if (e == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        kiwi_warn ("kafka: all brokers are down (%s)", reason);
    else
        kiwi_debug ("kafka: %s: %s", rd_kafka_err2name ((rd_kafka_resp_err_t) e), reason);
}

static void
dr_msg_cb (rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    kiwi_delivery *d = m->_private;
    if (d == NULL)
        return;
    d->done = true;
    d->err = m->err;
    d->partition = m->partition;
    d->offset = m->offset;
    const kiwi_delivery_cb *cb = opaque;
    if (cb != NULL && cb->fn != NULL)
        cb->fn (d, cb->ctx);
}

static int
conf_set (rd_kafka_conf_t *conf, const char *k, const char *v, kiwi_error_t *err)
{
    char errstr[512];
    if (rd_kafka_conf_set (conf, k, v, errstr, sizeof errstr) != RD_KAFKA_CONF_OK)
        return kiwi_error_make (err, 0, "kafka configuration %s=%s: %s", k, v, errstr);
    return 0;
}

/* The operator's properties (SASL, TLS, ...), after Kiwi's own: they may
 * override them. */
static int
operator_props (rd_kafka_conf_t *conf, const kiwi_cli_settings *s, kiwi_error_t *err)
{
    cleanup_strv kiwi_strv pairs = KIWI_STRV_INIT;
    if (kiwi_cli_settings_kafka_props (s, &pairs, err) < 0)
        return -1;
    return kiwi_kafka_props_apply (conf, &pairs, err);
}

rd_kafka_t *
kiwi_cli_producer_new (const kiwi_cli_settings *s, const kiwi_delivery_cb *cb, kiwi_error_t *err)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new ();
    char timeout[32];
    snprintf (timeout, sizeof timeout, "%llu", (unsigned long long) s->delivery_timeout * 1000ULL);
    if (conf_set (conf, "bootstrap.servers", s->brokers, err) < 0 || conf_set (conf, "client.id", "kiwi-cli", err) < 0
        || conf_set (conf, "enable.idempotence", "true", err) < 0 || conf_set (conf, "acks", "all", err) < 0
        || conf_set (conf, "message.timeout.ms", timeout, err) < 0 || conf_set (conf, "linger.ms", "5", err) < 0
        || conf_set (conf, "compression.codec", "lz4", err) < 0 || operator_props (conf, s, err) < 0) {
        rd_kafka_conf_destroy (conf);
        return NULL;
    }
    rd_kafka_conf_set_opaque (conf, (void *) cb); /* borrowed: the caller keeps it alive */
    rd_kafka_conf_set_dr_msg_cb (conf, dr_msg_cb);
    rd_kafka_conf_set_log_cb (conf, log_cb);
    rd_kafka_conf_set_error_cb (conf, error_cb);
    char errstr[512];
    rd_kafka_t *rk = rd_kafka_new (RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (rk == NULL) {
        rd_kafka_conf_destroy (conf);
        kiwi_error_make (err, 0, "creating the Kafka producer: %s", errstr);
        return NULL;
    }
    /* conf is now owned by rk */
    return rk;
}

int
kiwi_cli_produce (rd_kafka_t *rk, const char *topic, const char *key, size_t key_len, const void *value, size_t len,
                  kiwi_delivery *d, kiwi_error_t *err)
{
    d->done = false;
    d->err = RD_KAFKA_RESP_ERR_NO_ERROR;
    d->partition = -1;
    d->offset = -1;
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev (
            rk, RD_KAFKA_V_TOPIC (topic), RD_KAFKA_V_KEY (key, key_len), RD_KAFKA_V_VALUE ((void *) value, len),
            RD_KAFKA_V_MSGFLAGS (RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE (d), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            return 0;
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL && !kiwi_cli_stop) {
            /* Back off: serve delivery reports until the queue drains a bit. */
            rd_kafka_poll (rk, 100);
            continue;
        }
        if (e == RD_KAFKA_RESP_ERR__FATAL) {
            char buf[512];
            rd_kafka_fatal_error (rk, buf, sizeof buf);
            return kiwi_error_make (err, 0, "producing to %s: fatal: %s", topic, buf);
        }
        return kiwi_error_make (err, 0, "producing to %s: %s", topic, rd_kafka_err2str (e));
    }
}

int
kiwi_cli_produce_wait (rd_kafka_t *rk, kiwi_delivery *d, int timeout_ms, kiwi_error_t *err)
{
    int64_t until = kiwi_mono_ms () + timeout_ms;
    while (!d->done && kiwi_mono_ms () < until)
        rd_kafka_poll (rk, 100);
    if (!d->done)
        return kiwi_error_make (err, 0, "not delivered: no delivery report within %d ms", timeout_ms);
    if (d->err != RD_KAFKA_RESP_ERR_NO_ERROR)
        return kiwi_error_make (err, 0, "not delivered: %s", rd_kafka_err2str (d->err));
    return 0;
}

rd_kafka_t *
kiwi_cli_consumer_new (const kiwi_cli_settings *s, kiwi_error_t *err)
{
    uint64_t r = 0;
    if (getrandom (&r, sizeof r, 0) != (ssize_t) sizeof r)
        r = (uint64_t) getpid () ^ (uint64_t) time (NULL);
    char group[64];
    snprintf (group, sizeof group, "kiwi-cli-%016llx", (unsigned long long) r);
    rd_kafka_conf_t *conf = rd_kafka_conf_new ();
    if (conf_set (conf, "bootstrap.servers", s->brokers, err) < 0 || conf_set (conf, "client.id", "kiwi-cli", err) < 0
        || conf_set (conf, "group.id", group, err) < 0 || conf_set (conf, "enable.auto.commit", "false", err) < 0
        || conf_set (conf, "enable.auto.offset.store", "false", err) < 0
        || conf_set (conf, "enable.partition.eof", "true", err) < 0
        || conf_set (conf, "allow.auto.create.topics", "false", err) < 0
        || conf_set (conf, "fetch.wait.max.ms", "50", err) < 0 || operator_props (conf, s, err) < 0) {
        rd_kafka_conf_destroy (conf);
        return NULL;
    }
    rd_kafka_conf_set_log_cb (conf, log_cb);
    rd_kafka_conf_set_error_cb (conf, error_cb);
    char errstr[512];
    rd_kafka_t *rk = rd_kafka_new (RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (rk == NULL) {
        rd_kafka_conf_destroy (conf);
        kiwi_error_make (err, 0, "creating the Kafka consumer: %s", errstr);
        return NULL;
    }
    /* conf is now owned by rk */
    rd_kafka_poll_set_consumer (rk);
    return rk;
}

void
kiwi_cli_consumer_free (rd_kafka_t *rk)
{
    if (rk == NULL)
        return;
    rd_kafka_consumer_close (rk);
    rd_kafka_destroy (rk);
}

/* The number of partitions of `topic`. Returns 0 when it does not exist,
 * > 0 otherwise, < 0 with *err when the broker cannot be asked. */
static int
kiwi_cli_topic_partitions (rd_kafka_t *rk, const char *topic, int timeout_ms, kiwi_error_t *err)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new (rk, topic, NULL);
    if (rkt == NULL)
        return kiwi_error_make (err, errno, "topic %s", topic);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata (rk, 0, rkt, &md, timeout_ms);
    rd_kafka_topic_destroy (rkt);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        return kiwi_error_make (err, 0, "asking the brokers about topic %s: %s", topic, rd_kafka_err2str (e));
    int n = 0;
    if (md->topic_cnt == 1) {
        const rd_kafka_metadata_topic_t *t = &md->topics[0];
        if (t->err == RD_KAFKA_RESP_ERR_NO_ERROR)
            n = t->partition_cnt;
        else if (t->err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART && t->err != RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE) {
            rd_kafka_metadata_destroy (md);
            return kiwi_error_make (err, 0, "topic %s: %s", topic, rd_kafka_err2str (t->err));
        }
    }
    rd_kafka_metadata_destroy (md);
    return n;
}

int
kiwi_cli_assign_topic (rd_kafka_t *rk, const char *topic, int64_t offset, int timeout_ms, kiwi_error_t *err)
{
    int n = kiwi_cli_topic_partitions (rk, topic, timeout_ms, err);
    if (n <= 0)
        return n;
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new (n);
    for (int p = 0; p < n; p++)
        rd_kafka_topic_partition_list_add (parts, topic, p)->offset = offset;
    rd_kafka_error_t *e = rd_kafka_incremental_assign (rk, parts);
    rd_kafka_topic_partition_list_destroy (parts);
    if (e != NULL) {
        kiwi_error_make (err, 0, "assigning the partitions of %s: %s", topic, rd_kafka_error_string (e));
        rd_kafka_error_destroy (e);
        return -1;
    }
    return n;
}

int
kiwi_cli_assign_topic_since (rd_kafka_t *rk, const char *topic, int64_t since_ms, int timeout_ms, int64_t **from,
                             kiwi_error_t *err)
{
    if (from != NULL)
        *from = NULL;
    int n = kiwi_cli_topic_partitions (rk, topic, timeout_ms, err);
    if (n <= 0)
        return n;
    int64_t *start = calloc ((size_t) n, sizeof *start);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new (n);
    if (start == NULL || parts == NULL) {
        free (start);
        if (parts != NULL)
            rd_kafka_topic_partition_list_destroy (parts);
        return kiwi_error_make (err, ENOMEM, "assigning the partitions of %s", topic);
    }
    int r = n;
    if (since_ms < 0) {
        for (int p = 0; p < n; p++)
            start[p] = RD_KAFKA_OFFSET_BEGINNING;
    } else {
        /* The ends first: a partition with no message as new as since_ms
         * starts there, so what is produced after the lookup is read. One
         * request for every partition: offsets_for_times of "latest". */
        rd_kafka_topic_partition_list_t *ends = rd_kafka_topic_partition_list_new (n);
        for (int p = 0; p < n; p++)
            rd_kafka_topic_partition_list_add (ends, topic, p)->offset = RD_KAFKA_OFFSET_END;
        rd_kafka_resp_err_t e = rd_kafka_offsets_for_times (rk, ends, timeout_ms);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
            r = kiwi_error_make (err, 0, "asking for the end of %s: %s", topic, rd_kafka_err2str (e));
        for (int i = 0; r > 0 && i < ends->cnt; i++) {
            const rd_kafka_topic_partition_t *tp = &ends->elems[i];
            if (tp->err != RD_KAFKA_RESP_ERR_NO_ERROR || tp->offset < 0)
                r = kiwi_error_make (err, 0, "asking for the end of %s [%d]: %s", topic, (int) tp->partition,
                                     rd_kafka_err2str (tp->err));
            else if (tp->partition >= 0 && tp->partition < n)
                start[tp->partition] = tp->offset;
        }
        rd_kafka_topic_partition_list_destroy (ends);
        for (int p = 0; p < n && r > 0; p++)
            rd_kafka_topic_partition_list_add (parts, topic, p)->offset = since_ms;
        if (r > 0) {
            e = rd_kafka_offsets_for_times (rk, parts, timeout_ms);
            if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
                r = kiwi_error_make (err, 0, "looking up the offsets of %s at %lld ms: %s", topic,
                                     (long long) since_ms, rd_kafka_err2str (e));
        }
        for (int i = 0; r > 0 && i < parts->cnt; i++) {
            const rd_kafka_topic_partition_t *tp = &parts->elems[i];
            if (tp->err != RD_KAFKA_RESP_ERR_NO_ERROR)
                r = kiwi_error_make (err, 0, "looking up the offsets of %s [%d]: %s", topic, (int) tp->partition,
                                     rd_kafka_err2str (tp->err));
            else if (tp->offset >= 0 && tp->partition >= 0 && tp->partition < n)
                start[tp->partition] = tp->offset;
        }
        rd_kafka_topic_partition_list_destroy (parts);
        parts = rd_kafka_topic_partition_list_new (n);
    }
    if (r > 0) {
        for (int p = 0; p < n; p++) {
            rd_kafka_topic_partition_list_add (parts, topic, p)->offset = start[p];
            kiwi_debug ("%s [%d]: reading from offset %lld", topic, p, (long long) start[p]);
        }
        rd_kafka_error_t *e = rd_kafka_incremental_assign (rk, parts);
        if (e != NULL) {
            r = kiwi_error_make (err, 0, "assigning the partitions of %s: %s", topic, rd_kafka_error_string (e));
            rd_kafka_error_destroy (e);
        }
    }
    rd_kafka_topic_partition_list_destroy (parts);
    if (r > 0 && from != NULL)
        *from = start;
    else
        free (start);
    return r;
}
