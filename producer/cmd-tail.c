/*
 * cmd-tail.c: `kiwi tail TOPIC`: every message of a topic as one JSON line,
 * decoded with the topic's schema when its type is known. Without --follow
 * it stops at the end the topic had when it started; with it, it runs
 * until SIGINT/SIGTERM (or --limit). The consumer assigns partitions
 * itself: no group, no commits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "producer/cli.h"
#include "common/clock.h"
#include "producer/kafka.h"
#include "common/log.h"
#include "producer/render.h"

enum { OPT_FOLLOW = KIWI_OPT_OWN, OPT_FROM_BEGINNING, OPT_FROM_END, OPT_TASK, OPT_LIMIT, OPT_TYPE, OPT_META };

static const kiwi_opt tail_opts[] = {
    { OPT_FOLLOW, "follow", 'f', NULL, "keep reading new messages until SIGINT/SIGTERM (or --limit)" },
    { OPT_FROM_BEGINNING, "from-beginning", 0, NULL, "start at the oldest message (the default without --follow)" },
    { OPT_FROM_END, "from-end", 0, NULL, "start after the newest message (the default with --follow)" },
    { OPT_TASK, "task", 0, "ID", "only messages about this task (message key, or the decoded task id)" },
    { OPT_LIMIT, "limit", 'n', "N", "stop after printing N messages" },
    { OPT_TYPE, "type", 0, "T", "decode as task, progress, result, heartbeat, deadletter or raw (default: by topic)" },
    { OPT_META, "meta", 0, NULL, "wrap each message: {\"topic\",\"partition\",\"offset\",\"timestamp\",\"key\",\"message\"}" },
    { 0, NULL, 0, NULL, NULL },
};

static const kiwi_exit_doc tail_exits[] = {
    { 0, "reached the end of the topic, or --limit, or stopped by SIGINT/SIGTERM" },
    { 1, "the broker could not be reached, or the topic does not exist (without --follow)" },
    { 2, "usage or configuration error" },
    { -1, NULL },
};

const kiwi_cmd kiwi_cmd_tail_def = {
    .name = "tail",
    .synopsis = "tail [OPTIONS] TOPIC",
    .summary = "print a topic's messages as JSON lines",
    .description
    = "TOPIC is a short name (tasks, progress, results, heartbeats, dlq: the configured topic of that\n"
      "kind) or a topic name. Each message is printed as one JSON line (stdout is flushed per line):\n"
      "decoded with the message type's schema when the topic's type is known (or given with --type),\n"
      "else rendered from msgpack generically. A message that does not decode becomes\n"
      "{\"error\", \"type\", \"topic\", \"partition\", \"offset\", \"key\", \"raw_base64\"[, \"raw_msgpack\"]}.\n"
      "Without --follow it reads from the beginning to the end the topic had at start, then exits;\n"
      "with --follow it starts at the end (or --from-beginning) and waits for new messages, also for\n"
      "a topic that does not exist yet.",
    .opts = tail_opts,
    .exits = tail_exits,
};

typedef struct part_end {
    int64_t high; /* high watermark at start: offsets below it are "the topic" */
    bool done;
} part_end;

int
kiwi_cmd_tail (int argc, char **argv)
{
    kiwi_args args = { 0 };
    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    kiwi_error_t err = NULL;
    rd_kafka_t *rk = NULL;
    part_end *ends = NULL;
    int sigfd = -1;
    int code = 0;
    if (kiwi_cli_begin (&kiwi_cmd_tail_def, argc, argv, &args, &s, &code) != 0)
        goto out;

    bool follow = false, meta = false, type_given = false;
    int from = 0; /* 0: default, 1: beginning, 2: end */
    const char *task = NULL;
    unsigned long long limit = 0;
    kiwi_msg_type type = KIWI_MSG_RAW;
    code = KIWI_EXIT_USAGE;
    for (size_t i = 0; i < args.n_opts; i++) {
        const kiwi_arg *a = &args.opts[i];
        switch (a->id) {
        case OPT_FOLLOW: follow = true; break;
        case OPT_FROM_BEGINNING: from = 1; break;
        case OPT_FROM_END: from = 2; break;
        case OPT_TASK: task = a->value; break;
        case OPT_META: meta = true; break;
        case OPT_LIMIT:
            if (kiwi_parse_u64 (a->spelling, a->value, 1, 1000000000ULL, &limit, &err) < 0) {
                code = kiwi_cli_fail (&err, "tail");
                goto out;
            }
            break;
        case OPT_TYPE:
            if (kiwi_msg_type_parse (a->value, &type) < 0) {
                kiwi_errorf ("tail: --type: unknown type `%s` (accepted: task, progress, result, heartbeat, "
                             "deadletter, raw)",
                             a->value);
                goto out;
            }
            type_given = true;
            break;
        default: break;
        }
    }
    if (args.n_pos != 1) {
        kiwi_errorf ("tail: expected one TOPIC (tasks, progress, results, heartbeats, dlq, or a topic name)");
        goto out;
    }

    /* The topic and its type. */
    const char *const configured[KIWI_MSG__END] = {
        [KIWI_MSG_TASK] = s.topic_tasks,           [KIWI_MSG_PROGRESS] = s.topic_progress,
        [KIWI_MSG_RESULT] = s.topic_results,       [KIWI_MSG_HEARTBEAT] = s.topic_heartbeats,
        [KIWI_MSG_DEADLETTER] = s.topic_dlq,
    };
    const char *topic = args.pos[0];
    kiwi_msg_type by_topic = KIWI_MSG_RAW;
    if (kiwi_msg_type_from_short (topic, &by_topic) == 0)
        topic = configured[by_topic];
    else
        for (int t = 1; t < KIWI_MSG__END; t++)
            if (strcmp (configured[t], topic) == 0)
                by_topic = (kiwi_msg_type) t;
    if (!type_given)
        type = by_topic;
    bool from_beginning = from == 1 || (from == 0 && !follow);

    if ((sigfd = kiwi_cli_signals_install (&err)) < 0 || (rk = kiwi_cli_consumer_new (&s, &err)) == NULL) {
        code = kiwi_cli_fail (&err, "tail");
        goto out;
    }
    int timeout_ms = (int) s.delivery_timeout * 1000;
    int n_parts = kiwi_cli_assign_topic (rk, topic, from_beginning ? RD_KAFKA_OFFSET_BEGINNING : RD_KAFKA_OFFSET_END,
                                         timeout_ms, &err);
    if (n_parts < 0) {
        code = kiwi_cli_fail (&err, "tail");
        goto out;
    }
    if (n_parts == 0 && !follow) {
        kiwi_errorf ("tail: topic `%s` does not exist at %s", topic, s.brokers);
        code = KIWI_EXIT_FAILURE;
        goto out;
    }
    if (n_parts == 0)
        kiwi_info ("topic `%s` does not exist yet; waiting for it", topic);

    /* Without --follow: where the topic ends now. */
    size_t left = 0;
    if (!follow) {
        if (!from_beginning) {
            code = KIWI_EXIT_OK; /* from the end without following: nothing to show */
            goto out;
        }
        ends = calloc ((size_t) n_parts, sizeof *ends);
        if (ends == NULL) {
            kiwi_errorf ("tail: out of memory");
            code = KIWI_EXIT_FAILURE;
            goto out;
        }
        for (int p = 0; p < n_parts; p++) {
            int64_t lo = 0, hi = 0;
            rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets (rk, topic, p, &lo, &hi, timeout_ms);
            if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
                kiwi_errorf ("tail: the end of %s [%d]: %s", topic, p, rd_kafka_err2str (e));
                code = KIWI_EXIT_FAILURE;
                goto out;
            }
            ends[p].high = hi;
            ends[p].done = hi <= lo;
            if (!ends[p].done)
                left++;
        }
    }

    unsigned long long printed = 0;
    int64_t next_check = kiwi_mono_ms () + 1000;
    code = KIWI_EXIT_OK;
    while (!kiwi_cli_stop && (follow || left > 0) && (limit == 0 || printed < limit)) {
        if (follow && n_parts == 0 && kiwi_mono_ms () >= next_check) {
            n_parts = kiwi_cli_assign_topic (rk, topic, RD_KAFKA_OFFSET_BEGINNING, timeout_ms, &err);
            if (n_parts < 0) {
                kiwi_warn ("tail: %s", kiwi_error_msg (err));
                kiwi_error_free (&err);
                n_parts = 0;
            }
            next_check = kiwi_mono_ms () + 1000;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll (rk, 200);
        if (m == NULL)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (ends != NULL && m->partition < n_parts && !ends[m->partition].done) {
                ends[m->partition].done = true;
                left--;
            }
            rd_kafka_message_destroy (m);
            continue;
        }
        if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            kiwi_warn ("tail: %s: %s", topic, rd_kafka_message_errstr (m));
            bool fatal = m->err == RD_KAFKA_RESP_ERR__FATAL;
            rd_kafka_message_destroy (m);
            if (fatal) {
                code = KIWI_EXIT_FAILURE;
                break;
            }
            continue;
        }
        bool in_range = true;
        if (ends != NULL && m->partition < n_parts) {
            part_end *pe = &ends[m->partition];
            in_range = !pe->done && m->offset < pe->high;
            if (!pe->done && m->offset + 1 >= pe->high) {
                pe->done = true;
                left--;
            }
        }
        if (in_range) {
            bool key_match = task != NULL && m->key != NULL && m->key_len == strlen (task)
                             && memcmp (m->key, task, m->key_len) == 0;
            kiwi_msg_meta mm = { topic, m->partition, m->offset, rd_kafka_message_timestamp (m, NULL), m->key,
                                 m->key_len };
            cleanup_free char *line = NULL;
            cleanup_free char *tid = NULL;
            bool decoded = false;
            if (kiwi_render_message (type, &mm, m->payload, m->len, meta, &line, task && !key_match ? &tid : NULL,
                                     &decoded, &err)
                < 0) {
                rd_kafka_message_destroy (m);
                code = kiwi_cli_fail (&err, "tail");
                break;
            }
            if (task == NULL || key_match || (tid != NULL && strcmp (tid, task) == 0)) {
                kiwi_cli_println (line);
                printed++;
            }
        }
        rd_kafka_message_destroy (m);
    }
out:
    kiwi_cli_consumer_free (rk);
    if (sigfd >= 0)
        close (sigfd);
    free (ends);
    kiwi_args_clear (&args);
    kiwi_cli_settings_clear (&s);
    return code;
}
