/*
 * topics-clean.c: kiwi-test-topics-clean, run by tests/run.sh when a run
 * ends: deletes the topics the test suites made on the stack's broker, so
 * that partitions do not pile up from run to run (a broker holding
 * thousands of them takes minutes to come back after the fault suites'
 * restarts). Only names under the suites' own prefixes are touched
 * (kiwi.itest. and kiwi.test.: tests/worker/sh/lib.sh and
 * kiwi_test_unique); anything else on the broker is left alone.
 *
 * Usage: kiwi-test-topics-clean BROKERS
 * Prints how many topics and partitions it deleted; exit 0, or 1 with why
 * when the broker does not answer or refuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

static const char *const prefixes[] = { "kiwi.itest.", "kiwi.test." };

static int
is_test_topic (const char *name)
{
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp (name, prefixes[i], strlen (prefixes[i])) == 0)
            return 1;
    return 0;
}

/* Deletes names[0..n) in one request; 0, or -1 having said why. */
static int
delete_batch (rd_kafka_t *rk, char **names, size_t n)
{
    rd_kafka_DeleteTopic_t **del = calloc (n, sizeof *del);
    if (del == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        del[i] = rd_kafka_DeleteTopic_new (names[i]);
    rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new (rk, RD_KAFKA_ADMIN_OP_DELETETOPICS);
    char errstr[256];
    rd_kafka_AdminOptions_set_operation_timeout (o, 60000, errstr, sizeof errstr);
    rd_kafka_queue_t *q = rd_kafka_queue_new (rk);
    rd_kafka_DeleteTopics (rk, del, n, o, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll (q, 120000);
    int rc = 0;
    if (ev == NULL || rd_kafka_event_error (ev)) {
        fprintf (stderr, "kiwi-test-topics-clean: deleting %zu topics: %s\n", n,
                 ev ? rd_kafka_event_error_string (ev) : "no answer within 120 s");
        rc = -1;
    } else {
        size_t cnt = 0;
        const rd_kafka_topic_result_t **res
            = rd_kafka_DeleteTopics_result_topics (rd_kafka_event_DeleteTopics_result (ev), &cnt);
        for (size_t i = 0; i < cnt; i++)
            if (rd_kafka_topic_result_error (res[i]) != RD_KAFKA_RESP_ERR_NO_ERROR
                && rd_kafka_topic_result_error (res[i]) != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
                fprintf (stderr, "kiwi-test-topics-clean: %s: %s\n", rd_kafka_topic_result_name (res[i]),
                         rd_kafka_topic_result_error_string (res[i]));
    }
    if (ev != NULL)
        rd_kafka_event_destroy (ev);
    rd_kafka_queue_destroy (q);
    rd_kafka_AdminOptions_destroy (o);
    rd_kafka_DeleteTopic_destroy_array (del, n);
    free (del);
    return rc;
}

int
main (int argc, char **argv)
{
    if (argc != 2 || strcmp (argv[1], "--help") == 0) {
        fprintf (argc == 2 ? stdout : stderr, "usage: kiwi-test-topics-clean BROKERS\n"
                                              "deletes the test suites' topics (kiwi.itest.*, kiwi.test.*)\n");
        return argc == 2 ? 0 : 2;
    }
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new ();
    if (rd_kafka_conf_set (conf, "bootstrap.servers", argv[1], errstr, sizeof errstr) != RD_KAFKA_CONF_OK
        || rd_kafka_conf_set (conf, "log_level", "2", errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
        fprintf (stderr, "kiwi-test-topics-clean: %s\n", errstr);
        rd_kafka_conf_destroy (conf);
        return 1;
    }
    rd_kafka_t *rk = rd_kafka_new (RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (rk == NULL) {
        fprintf (stderr, "kiwi-test-topics-clean: %s\n", errstr);
        return 1;
    }
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata (rk, 1, NULL, &md, 30000);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf (stderr, "kiwi-test-topics-clean: the topics of %s: %s\n", argv[1], rd_kafka_err2str (e));
        rd_kafka_destroy (rk);
        return 1;
    }
    char **names = calloc ((size_t) md->topic_cnt + 1, sizeof *names);
    size_t n = 0;
    long parts = 0;
    for (int i = 0; names != NULL && i < md->topic_cnt; i++)
        if (is_test_topic (md->topics[i].topic)) {
            names[n++] = md->topics[i].topic;
            parts += md->topics[i].partition_cnt;
        }
    int rc = names == NULL ? 1 : 0;
    for (size_t at = 0; rc == 0 && at < n; at += 500)
        rc = delete_batch (rk, names + at, n - at < 500 ? n - at : 500) < 0;
    if (rc == 0)
        printf ("kiwi-test-topics-clean: deleted %zu test topics (%ld partitions) of %d on %s\n", n, parts,
                md->topic_cnt, argv[1]);
    free (names);
    rd_kafka_metadata_destroy (md);
    rd_kafka_destroy (rk);
    return rc;
}
