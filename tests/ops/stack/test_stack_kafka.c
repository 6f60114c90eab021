/*
 * test_stack_kafka.c: a Task produced with librdkafka to a fresh topic on
 * the real broker is consumed back and decodes equal; kcat sees the same
 * bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "need.h"
#include "schemas/task.h"

static const char *
brokers (void)
{
    return kiwi_test_env_or ("KIWI_KAFKA_BROKERS", "127.0.0.1:19092");
}

static void
sample_task (kiwi_task *t, const char *id)
{
    kiwi_task_init (t);
    t->id = strdup (id);
    t->repo.url = strdup ("https://git.example.test/acme/widgets.git");
    t->repo.ref = strdup ("main");
    t->repo.subdir = strdup ("services/api");
    t->test_command = strdup ("npm test");
    t->goal = strdup ("Make the tests pass: ünïcödé and \"quotes\"");
    t->ci_context = strdup ("FAIL src/sum.test.js\n  expected 3, received 4\n");
    t->limits.max_rounds = 5;
    t->limits.has_session_budget_tokens = true;
    t->limits.session_budget_tokens = 200000;
    t->has_model = true;
    t->model.provider = KIWI_PROVIDER_ANTHROPIC;
    t->model.name = strdup ("claude-sonnet-4-5");
    t->n_test_credentials = 1;
    t->test_credentials = calloc (1, sizeof (char *));
    t->test_credentials[0] = strdup ("DATABASE_URL");
    t->submitted_at = 1764450000123;
    t->source = strdup ("submit");
}

static rd_kafka_t *
make (rd_kafka_type_t type, const char *group)
{
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new ();
    rd_kafka_conf_set (conf, "bootstrap.servers", brokers (), errstr, sizeof errstr);
    if (type == RD_KAFKA_PRODUCER) {
        rd_kafka_conf_set (conf, "enable.idempotence", "true", errstr, sizeof errstr);
        rd_kafka_conf_set (conf, "acks", "all", errstr, sizeof errstr);
    } else {
        rd_kafka_conf_set (conf, "group.id", group, errstr, sizeof errstr);
        rd_kafka_conf_set (conf, "auto.offset.reset", "earliest", errstr, sizeof errstr);
        rd_kafka_conf_set (conf, "enable.auto.commit", "false", errstr, sizeof errstr);
    }
    rd_kafka_t *rk = rd_kafka_new (type, conf, errstr, sizeof errstr);
    if (rk == NULL)
        fail_msg ("rd_kafka_new: %s", errstr);
    /* conf is now owned by rk */
    return rk;
}

static int
broker_up (rd_kafka_t *rk)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata (rk, 0, NULL, &md, 10000);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        return 0;
    rd_kafka_metadata_destroy (md);
    return 1;
}

static void
test_task_roundtrip_through_broker (void **state)
{
    rd_kafka_t *p = make (RD_KAFKA_PRODUCER, NULL);
    KIWI_NEED (broker_up (p), "kafka at %s", brokers ());
    char *topic = kiwi_test_unique ("kiwi.test.tasks");
    char *id = kiwi_test_unique ("task");
    kiwi_task t;
    sample_task (&t, id);
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_task_encode (&t, &buf, &len, &err), 0);

    rd_kafka_resp_err_t e
        = rd_kafka_producev (p, RD_KAFKA_V_TOPIC (topic), RD_KAFKA_V_KEY (t.repo.url, strlen (t.repo.url)),
                             RD_KAFKA_V_VALUE (buf, len), RD_KAFKA_V_MSGFLAGS (RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    assert_int_equal (e, RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal (rd_kafka_flush (p, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal (rd_kafka_outq_len (p), 0);
    rd_kafka_destroy (p);

    rd_kafka_t *c = make (RD_KAFKA_CONSUMER, id);
    rd_kafka_poll_set_consumer (c);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new (1);
    rd_kafka_topic_partition_list_add (parts, topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    assert_int_equal (rd_kafka_assign (c, parts), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy (parts);
    rd_kafka_message_t *m = NULL;
    time_t until = time (NULL) + 30;
    while (time (NULL) < until) {
        m = rd_kafka_consumer_poll (c, 500);
        if (m == NULL)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
            break;
        rd_kafka_message_destroy (m);
        m = NULL;
    }
    assert_non_null (m);
    assert_int_equal (m->len, len);
    assert_memory_equal (m->payload, buf, len);
    kiwi_task back;
    assert_int_equal (kiwi_task_decode (m->payload, m->len, &back, &err), 0);
    assert_string_equal (back.id, t.id);
    assert_string_equal (back.repo.url, t.repo.url);
    assert_string_equal (back.repo.subdir, t.repo.subdir);
    assert_string_equal (back.goal, t.goal);
    assert_string_equal (back.ci_context, t.ci_context);
    assert_int_equal (back.limits.max_rounds, 5);
    assert_int_equal (back.limits.session_budget_tokens, 200000);
    assert_int_equal (back.model.provider, KIWI_PROVIDER_ANTHROPIC);
    assert_string_equal (back.test_credentials[0], "DATABASE_URL");
    assert_int_equal (back.submitted_at, t.submitted_at);
    /* re-encoding what we decoded gives the same bytes */
    char *again = NULL;
    size_t again_len = 0;
    assert_int_equal (kiwi_task_encode (&back, &again, &again_len, &err), 0);
    assert_int_equal (again_len, len);
    assert_memory_equal (again, buf, len);
    free (again);
    kiwi_task_clear (&back);
    rd_kafka_message_destroy (m);
    rd_kafka_consumer_close (c);
    rd_kafka_destroy (c);

    /* kcat, an independent client, reads the same bytes */
    char cmd[1024], out[65536];
    snprintf (cmd, sizeof cmd, "kcat -b %s -C -t %s -p 0 -o beginning -c 1 -e -q -f '%%S' 2>&1", brokers (), topic);
    assert_int_equal (kiwi_test_sh (cmd, out, sizeof out), 0);
    assert_int_equal (atoi (out), (int) len);
    char path[256];
    snprintf (path, sizeof path, "/tmp/%s.bin", id);
    FILE *f = fopen (path, "wb");
    fwrite (buf, 1, len, f);
    fclose (f);
    snprintf (cmd, sizeof cmd, "kcat -b %s -C -t %s -p 0 -o beginning -c 1 -e -q -f '%%s' | cmp - %s && echo same",
              brokers (), topic, path);
    assert_int_equal (kiwi_test_sh (cmd, out, sizeof out), 0);
    assert_string_equal (out, "same\n");
    snprintf (cmd, sizeof cmd, "kcat -b %s -C -t %s -p 0 -o beginning -c 1 -e -q -f '%%k'", brokers (), topic);
    assert_int_equal (kiwi_test_sh (cmd, out, sizeof out), 0);
    assert_string_equal (out, t.repo.url);
    remove (path);
    free (buf);
    kiwi_task_clear (&t);
    free (topic);
    free (id);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_task_roundtrip_through_broker),
    };
    return kiwi_run_group ("stack_kafka", tests, NULL, NULL);
}
