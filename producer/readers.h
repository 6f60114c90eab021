/*
 * readers.h: which consumer groups read a topic, as the broker tells it
 * (the admin API's ListConsumerGroups, then DescribeConsumerGroups of the
 * groups that have members). kiwi wait, watch and batch --wait ask it when
 * workers are up but nothing moves: a worker that consumes another tasks
 * topic, or sits in a group that is still rebalancing, takes none of ours.
 *
 * Ownership: kiwi_topic_readers owns its lists; kiwi_topic_readers_clear()
 * frees them.
 */
#ifndef KIWI_PRODUCER_READERS_H
#define KIWI_PRODUCER_READERS_H

#include <librdkafka/rdkafka.h>

#include "common/error.h"
#include "common/strv.h"

typedef struct kiwi_topic_readers {
    kiwi_strv groups;      /* groups with a member assigned a partition of the topic */
    int members;           /* those members, over every group */
    kiwi_strv rebalancing; /* groups with members that are rebalancing (assignments not yet known) */
} kiwi_topic_readers;

#define KIWI_TOPIC_READERS_INIT { KIWI_STRV_INIT, 0, KIWI_STRV_INIT }

/* Fills *out (initialised by the caller) with the readers of `topic`
 * through rk (any handle: the command's consumer will do), each broker
 * request bounded by timeout_ms. Groups that are empty or dead are not
 * described. -1 with *err when the broker does not answer or refuses. */
int kiwi_topic_readers_get (rd_kafka_t *rk, const char *topic, int timeout_ms, kiwi_topic_readers *out,
                            kiwi_error_t *err);
void kiwi_topic_readers_clear (kiwi_topic_readers *r);

#endif
