/*
 * test_cli_util.h: what the kiwi command's integration suites share:
 * running the built `kiwi` (KIWI_CLI_BIN) with its output captured or in
 * the background, and producing and consuming test messages on the real
 * broker with librdkafka directly (an independent path from the command's).
 */
#ifndef KIWI_TEST_CLI_UTIL_H
#define KIWI_TEST_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The broker of the stack (KIWI_KAFKA_BROKERS, else the stack env file). */
const char *cli_brokers (void);

/* True when the broker answers a metadata request within 10 s. */
bool cli_broker_up (void);

/* Runs KIWI_CLI_BIN with argv (NULL-terminated, without argv[0]); stdin
 * from `input` (NULL: empty). *out and *err receive stdout and stderr
 * (malloc'd, NUL-terminated; either may be NULL to discard). Returns the
 * exit status, or -1 if it did not exit normally within timeout_s. */
int cli_run (const char *const *argv, const char *input, size_t input_len, char **out, char **err, int timeout_s);

/* Starts KIWI_CLI_BIN in the background; *out_fd and *err_fd (either may be
 * NULL: inherited) read its stdout and stderr. */
pid_t cli_spawn (const char *const *argv, int *out_fd, int *err_fd);

/* Reads one line (without the newline) from fd within timeout_ms. Returns
 * its length, or -1 on timeout or end of file. Keeps unread bytes per fd. */
ssize_t cli_read_line (int fd, char *buf, size_t cap, int timeout_ms);

/* Waits for pid; returns its exit status, or -1 if it did not exit within
 * timeout_ms (it is then killed). */
int cli_wait (pid_t pid, int timeout_ms);

/* Everything readable from fd until end of file or timeout_ms (malloc'd). */
char *cli_slurp (int fd, int timeout_ms);

/* Produces one message and waits for its acknowledgement (fails the test
 * otherwise). key may be NULL. */
void cli_produce (const char *topic, const char *key, const void *value, size_t len);

/* A producer for many messages: cli_producer_send queues one (ts_ms: its
 * timestamp in ms since the epoch, 0: now), cli_producer_done flushes and
 * fails the test unless every message was acknowledged. */
typedef struct cli_producer cli_producer;
cli_producer *cli_producer_new (void);
void cli_producer_send (cli_producer *p, const char *topic, const char *key, const void *value, size_t len,
                        int64_t ts_ms);
void cli_producer_done (cli_producer *p);

/* Milliseconds since the epoch. */
int64_t cli_wall_ms (void);

typedef struct cli_msg {
    char *key;       /* NULL when the message had none */
    size_t key_len;
    char *value;
    size_t len;
    int32_t partition;
    int64_t offset;
} cli_msg;

/* Reads `topic` from the beginning until `want` messages arrived or
 * timeout_ms passed; returns how many (*out malloc'd, cli_msgs_free). */
size_t cli_consume (const char *topic, size_t want, int timeout_ms, cli_msg **out);
void cli_msgs_free (cli_msg *m, size_t n);

/* Messages on `topic` now (sum of high minus low watermarks), or -1 when it
 * does not exist. */
long long cli_topic_count (const char *topic);

/* Whether `topic` exists on the broker. */
bool cli_topic_exists (const char *topic);

/* A member of a consumer group of its own subscribed to `topic` (which must
 * exist), returned once the group assigned it a partition of the topic
 * (fails the test after timeout_ms); cli_group_leave closes it. */
typedef struct rd_kafka_s cli_member;
cli_member *cli_group_join (const char *topic, int timeout_ms);
void cli_group_leave (cli_member *m);

/* Milliseconds on the monotonic clock. */
int64_t cli_now_ms (void);

#endif
