/*
 * readers.c: which consumer groups read a topic (see readers.h).
 */
#include "producer/readers.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One admin request's result event from q, or NULL with *err. */
static rd_kafka_event_t *
admin_wait (rd_kafka_queue_t *q, int timeout_ms, const char *what, kiwi_error_t *err)
{
    rd_kafka_event_t *ev = rd_kafka_queue_poll (q, timeout_ms + 1000);
    if (ev == NULL) {
        kiwi_error_make (err, ETIMEDOUT, "%s: no answer from the broker within %d ms", what, timeout_ms);
        return NULL;
    }
    if (rd_kafka_event_error (ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        kiwi_error_make (err, EIO, "%s: %s", what, rd_kafka_event_error_string (ev));
        rd_kafka_event_destroy (ev);
        return NULL;
    }
    return ev;
}

static rd_kafka_AdminOptions_t *
admin_options (rd_kafka_t *rk, rd_kafka_admin_op_t op, int timeout_ms)
{
    rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new (rk, op);
    char errstr[256];
    if (o != NULL)
        rd_kafka_AdminOptions_set_request_timeout (o, timeout_ms, errstr, sizeof errstr);
    return o;
}

/* The ids of the groups that have members (neither empty nor dead), as the
 * broker lists them. */
static int
live_groups (rd_kafka_t *rk, rd_kafka_queue_t *q, int timeout_ms, kiwi_strv *ids, kiwi_error_t *err)
{
    rd_kafka_AdminOptions_t *o = admin_options (rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS, timeout_ms);
    if (o == NULL)
        return kiwi_error_make (err, ENOMEM, "listing the consumer groups");
    rd_kafka_ListConsumerGroups (rk, o, q);
    rd_kafka_AdminOptions_destroy (o);
    rd_kafka_event_t *ev = admin_wait (q, timeout_ms, "listing the consumer groups", err);
    if (ev == NULL)
        return -1;
    const rd_kafka_ListConsumerGroups_result_t *res = rd_kafka_event_ListConsumerGroups_result (ev);
    size_t n = 0;
    const rd_kafka_ConsumerGroupListing_t **valid = res ? rd_kafka_ListConsumerGroups_result_valid (res, &n) : NULL;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rd_kafka_consumer_group_state_t st = rd_kafka_ConsumerGroupListing_state (valid[i]);
        if (st == RD_KAFKA_CONSUMER_GROUP_STATE_EMPTY || st == RD_KAFKA_CONSUMER_GROUP_STATE_DEAD
            || rd_kafka_ConsumerGroupListing_is_simple_consumer_group (valid[i]))
            continue;
        if (kiwi_strv_add (ids, rd_kafka_ConsumerGroupListing_group_id (valid[i])) < 0)
            rc = kiwi_error_make (err, ENOMEM, "listing the consumer groups");
    }
    rd_kafka_event_destroy (ev);
    return rc;
}

/* Whether member m is assigned a partition of topic. */
static bool
reads (const rd_kafka_MemberDescription_t *m, const char *topic)
{
    const rd_kafka_MemberAssignment_t *a = rd_kafka_MemberDescription_assignment (m);
    const rd_kafka_topic_partition_list_t *p = a ? rd_kafka_MemberAssignment_partitions (a) : NULL;
    for (int i = 0; p != NULL && i < p->cnt; i++)
        if (strcmp (p->elems[i].topic, topic) == 0)
            return true;
    return false;
}

static int
describe (rd_kafka_t *rk, rd_kafka_queue_t *q, const kiwi_strv *ids, const char *topic, int timeout_ms,
          kiwi_topic_readers *out, kiwi_error_t *err)
{
    rd_kafka_AdminOptions_t *o = admin_options (rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS, timeout_ms);
    if (o == NULL)
        return kiwi_error_make (err, ENOMEM, "describing the consumer groups");
    rd_kafka_DescribeConsumerGroups (rk, (const char **) ids->v, ids->n, o, q);
    rd_kafka_AdminOptions_destroy (o);
    rd_kafka_event_t *ev = admin_wait (q, timeout_ms, "describing the consumer groups", err);
    if (ev == NULL)
        return -1;
    const rd_kafka_DescribeConsumerGroups_result_t *res = rd_kafka_event_DescribeConsumerGroups_result (ev);
    size_t n = 0;
    const rd_kafka_ConsumerGroupDescription_t **groups
        = res ? rd_kafka_DescribeConsumerGroups_result_groups (res, &n) : NULL;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const rd_kafka_ConsumerGroupDescription_t *g = groups[i];
        if (rd_kafka_ConsumerGroupDescription_error (g) != NULL)
            continue; /* gone between the two requests */
        const char *id = rd_kafka_ConsumerGroupDescription_group_id (g);
        rd_kafka_consumer_group_state_t st = rd_kafka_ConsumerGroupDescription_state (g);
        size_t nm = rd_kafka_ConsumerGroupDescription_member_count (g);
        int here = 0;
        for (size_t m = 0; m < nm; m++)
            if (reads (rd_kafka_ConsumerGroupDescription_member (g, m), topic))
                here++;
        if (here > 0) {
            out->members += here;
            if (kiwi_strv_add (&out->groups, id) < 0)
                rc = kiwi_error_make (err, ENOMEM, "describing the consumer groups");
        } else if (nm > 0
                   && (st == RD_KAFKA_CONSUMER_GROUP_STATE_PREPARING_REBALANCE
                       || st == RD_KAFKA_CONSUMER_GROUP_STATE_COMPLETING_REBALANCE)) {
            if (kiwi_strv_add (&out->rebalancing, id) < 0)
                rc = kiwi_error_make (err, ENOMEM, "describing the consumer groups");
        }
    }
    rd_kafka_event_destroy (ev);
    return rc;
}

int
kiwi_topic_readers_get (rd_kafka_t *rk, const char *topic, int timeout_ms, kiwi_topic_readers *out,
                        kiwi_error_t *err)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new (rk);
    if (q == NULL)
        return kiwi_error_make (err, ENOMEM, "asking the broker who reads %s", topic);
    cleanup_strv kiwi_strv ids = KIWI_STRV_INIT;
    int rc = live_groups (rk, q, timeout_ms, &ids, err);
    if (rc == 0 && ids.n > 0)
        rc = describe (rk, q, &ids, topic, timeout_ms, out, err);
    rd_kafka_queue_destroy (q);
    return rc;
}

void
kiwi_topic_readers_clear (kiwi_topic_readers *r)
{
    kiwi_strv_free (&r->groups);
    kiwi_strv_free (&r->rebalancing);
    r->members = 0;
}
