/*
 * kafka.h: the kiwi command's Kafka clients, the librdkafka way.
 *
 * The producer is idempotent (enable.idempotence, hence acks=all and
 * ordered retries) with message.timeout.ms from the delivery_timeout
 * setting; every produced message carries a kiwi_delivery that its delivery
 * report fills in. The consumer never joins a group and never commits: it
 * assigns partitions directly (a random group.id only satisfies
 * librdkafka), so tailing a topic leaves no trace on the broker.
 *
 * librdkafka's own log lines are routed to log.h (debug level, warnings and
 * errors above); a fatal producer error (idempotence lost) is reported in
 * every later delivery.
 */
#ifndef KIWI_PRODUCER_KAFKA_H
#define KIWI_PRODUCER_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "producer/cli-settings.h"

/* Set by the signal handlers of kiwi_cli_signals_install(). */
extern volatile sig_atomic_t kiwi_cli_stop;

/* Installs SIGINT/SIGTERM handlers (no SA_RESTART) that set kiwi_cli_stop
 * and write a byte to a self-pipe; returns the pipe's read end (non-
 * blocking), for poll(), or < 0. */
int kiwi_cli_signals_install (kiwi_error_t *err);

/* What a delivery report said about one message. `done` turns true once the
 * report arrived (or the message was given up). */
typedef struct kiwi_delivery {
    bool done;
    rd_kafka_resp_err_t err;
    int32_t partition;
    int64_t offset;
    void *user; /* the caller's pointer, untouched */
} kiwi_delivery;

/* Called from rd_kafka_poll() after a delivery report filled in `d`. */
typedef struct kiwi_delivery_cb {
    void (*fn) (kiwi_delivery *d, void *ctx);
    void *ctx;
} kiwi_delivery_cb;

/* Creates the idempotent producer. Delivery reports fill the kiwi_delivery
 * passed with each message, then call cb (may be NULL; borrowed: it must
 * outlive the handle). */
rd_kafka_t *kiwi_cli_producer_new (const kiwi_cli_settings *s, const kiwi_delivery_cb *cb, kiwi_error_t *err);

/* Produces one message (copied) with the key; `d` receives the delivery
 * report. Blocks (polling) while the local queue is full, unless
 * kiwi_cli_stop is set. Returns 0, or < 0 with *err. */
int kiwi_cli_produce (rd_kafka_t *rk, const char *topic, const char *key, size_t key_len, const void *value,
                      size_t len, kiwi_delivery *d, kiwi_error_t *err);

/* Polls until d->done or `timeout_ms` passed (the producer gives up by
 * itself after message.timeout.ms). Returns 0 when delivered, < 0 with *err
 * otherwise. */
int kiwi_cli_produce_wait (rd_kafka_t *rk, kiwi_delivery *d, int timeout_ms, kiwi_error_t *err);

/* Creates the consumer (no group membership, no commits, EOF events on). */
rd_kafka_t *kiwi_cli_consumer_new (const kiwi_cli_settings *s, kiwi_error_t *err);

/* Closes and destroys a consumer from kiwi_cli_consumer_new; NULL is fine. */
void kiwi_cli_consumer_free (rd_kafka_t *rk);


/* Adds every partition of `topic` to the consumer's assignment, starting at
 * `offset` (RD_KAFKA_OFFSET_BEGINNING or RD_KAFKA_OFFSET_END). Returns the
 * number of partitions (0: the topic does not exist yet, nothing
 * assigned), < 0 with *err. */
int kiwi_cli_assign_topic (rd_kafka_t *rk, const char *topic, int64_t offset, int timeout_ms, kiwi_error_t *err);

/* Adds every partition of `topic` to the consumer's assignment, each
 * starting at its first message whose timestamp is at least `since_ms` (ms
 * since the epoch; rd_kafka_offsets_for_times), so that a long-lived topic
 * is not read from its beginning. A partition without such a message starts
 * at the high watermark it had before the lookup (nothing produced after it
 * is missed). since_ms < 0 means the beginning. When `from` is not NULL,
 * *from receives a malloc'd array of n start offsets, by partition (the
 * caller frees it). Returns the number of partitions (0: the topic does not exist yet,
 * nothing assigned), < 0 with *err. */
int kiwi_cli_assign_topic_since (rd_kafka_t *rk, const char *topic, int64_t since_ms, int timeout_ms,
                                 int64_t **from, kiwi_error_t *err);

#endif
