/*
 * test_cli_util.c: running `kiwi` and talking to the broker for the kiwi
 * command's integration suites (see test_cli_util.h).
 */
#include "test_cli_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stack-env.h"

extern char **environ;

int64_t
cli_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *
cli_brokers (void)
{
    return kiwi_test_env_or ("KIWI_KAFKA_BROKERS", "127.0.0.1:19092");
}

static rd_kafka_t *
client (rd_kafka_type_t type)
{
    char errstr[512], group[64];
    rd_kafka_conf_t *conf = rd_kafka_conf_new ();
    rd_kafka_conf_set (conf, "bootstrap.servers", cli_brokers (), errstr, sizeof errstr);
    rd_kafka_conf_set (conf, "log_level", "2", errstr, sizeof errstr);
    if (type == RD_KAFKA_PRODUCER) {
        rd_kafka_conf_set (conf, "enable.idempotence", "true", errstr, sizeof errstr);
        rd_kafka_conf_set (conf, "linger.ms", "1", errstr, sizeof errstr);
    } else {
        snprintf (group, sizeof group, "kiwi-test-%d-%lld", (int) getpid (), (long long) cli_now_ms ());
        rd_kafka_conf_set (conf, "group.id", group, errstr, sizeof errstr);
        rd_kafka_conf_set (conf, "enable.auto.commit", "false", errstr, sizeof errstr);
        rd_kafka_conf_set (conf, "allow.auto.create.topics", "false", errstr, sizeof errstr);
    }
    rd_kafka_t *rk = rd_kafka_new (type, conf, errstr, sizeof errstr);
    if (rk == NULL)
        fail_msg ("rd_kafka_new: %s", errstr);
    /* conf is now owned by rk */
    return rk;
}

bool
cli_broker_up (void)
{
    rd_kafka_t *rk = client (RD_KAFKA_PRODUCER);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata (rk, 0, NULL, &md, 10000);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
        rd_kafka_metadata_destroy (md);
    rd_kafka_destroy (rk);
    return e == RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* Topic partition count, 0 when absent. */
static int
partitions (rd_kafka_t *rk, const char *topic)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new (rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata (rk, 0, rkt, &md, 10000);
    rd_kafka_topic_destroy (rkt);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_msg ("metadata for %s: %s", topic, rd_kafka_err2str (e));
    int n = md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR ? md->topics[0].partition_cnt : 0;
    rd_kafka_metadata_destroy (md);
    return n;
}

bool
cli_topic_exists (const char *topic)
{
    rd_kafka_t *rk = client (RD_KAFKA_CONSUMER);
    int n = partitions (rk, topic);
    rd_kafka_destroy (rk);
    return n > 0;
}

long long
cli_topic_count (const char *topic)
{
    rd_kafka_t *rk = client (RD_KAFKA_CONSUMER);
    int n = partitions (rk, topic);
    long long total = n > 0 ? 0 : -1;
    for (int p = 0; p < n; p++) {
        int64_t lo = 0, hi = 0;
        rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets (rk, topic, p, &lo, &hi, 10000);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
            fail_msg ("watermarks of %s [%d]: %s", topic, p, rd_kafka_err2str (e));
        total += hi - lo;
    }
    rd_kafka_destroy (rk);
    return total;
}

void
cli_produce (const char *topic, const char *key, const void *value, size_t len)
{
    rd_kafka_t *rk = client (RD_KAFKA_PRODUCER);
    rd_kafka_resp_err_t e = rd_kafka_producev (
        rk, RD_KAFKA_V_TOPIC (topic), RD_KAFKA_V_KEY (key, key ? strlen (key) : 0),
        RD_KAFKA_V_VALUE ((void *) value, len), RD_KAFKA_V_MSGFLAGS (RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_msg ("produce to %s: %s", topic, rd_kafka_err2str (e));
    if (rd_kafka_flush (rk, 30000) != RD_KAFKA_RESP_ERR_NO_ERROR || rd_kafka_outq_len (rk) != 0)
        fail_msg ("produce to %s: not acknowledged", topic);
    rd_kafka_destroy (rk);
}

struct cli_producer {
    rd_kafka_t *rk;
};

cli_producer *
cli_producer_new (void)
{
    cli_producer *p = calloc (1, sizeof *p);
    p->rk = client (RD_KAFKA_PRODUCER);
    return p;
}

void
cli_producer_send (cli_producer *p, const char *topic, const char *key, const void *value, size_t len, int64_t ts_ms)
{
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev (
            p->rk, RD_KAFKA_V_TOPIC (topic), RD_KAFKA_V_KEY (key, key ? strlen (key) : 0),
            RD_KAFKA_V_VALUE ((void *) value, len), RD_KAFKA_V_MSGFLAGS (RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_TIMESTAMP (ts_ms), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll (p->rk, 100);
            continue;
        }
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
            fail_msg ("produce to %s: %s", topic, rd_kafka_err2str (e));
        rd_kafka_poll (p->rk, 0);
        return;
    }
}

void
cli_producer_done (cli_producer *p)
{
    if (rd_kafka_flush (p->rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR || rd_kafka_outq_len (p->rk) != 0)
        fail_msg ("produce: not every message was acknowledged");
    rd_kafka_destroy (p->rk);
    free (p);
}

int64_t
cli_wall_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

cli_member *
cli_group_join (const char *topic, int timeout_ms)
{
    rd_kafka_t *rk = client (RD_KAFKA_CONSUMER);
    rd_kafka_poll_set_consumer (rk);
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new (1);
    rd_kafka_topic_partition_list_add (sub, topic, RD_KAFKA_PARTITION_UA);
    if (rd_kafka_subscribe (rk, sub) != RD_KAFKA_RESP_ERR_NO_ERROR)
        fail_msg ("subscribe %s", topic);
    rd_kafka_topic_partition_list_destroy (sub);
    for (int64_t until = cli_now_ms () + timeout_ms;;) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll (rk, 200);
        if (msg != NULL)
            rd_kafka_message_destroy (msg);
        rd_kafka_topic_partition_list_t *a = NULL;
        bool assigned = rd_kafka_assignment (rk, &a) == RD_KAFKA_RESP_ERR_NO_ERROR && a != NULL && a->cnt > 0;
        if (a != NULL)
            rd_kafka_topic_partition_list_destroy (a);
        if (assigned)
            return rk;
        if (cli_now_ms () >= until)
            fail_msg ("no partition of %s assigned within %d ms", topic, timeout_ms);
    }
}

void
cli_group_leave (cli_member *m)
{
    rd_kafka_consumer_close (m);
    rd_kafka_destroy (m);
}

size_t
cli_consume (const char *topic, size_t want, int timeout_ms, cli_msg **out)
{
    rd_kafka_t *rk = client (RD_KAFKA_CONSUMER);
    rd_kafka_poll_set_consumer (rk);
    int64_t until = cli_now_ms () + timeout_ms;
    int n = 0;
    while ((n = partitions (rk, topic)) == 0 && cli_now_ms () < until)
        usleep (200000);
    size_t got = 0, cap = want ? want : 16;
    cli_msg *m = calloc (cap, sizeof *m);
    if (n > 0) {
        rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new (n);
        for (int p = 0; p < n; p++)
            rd_kafka_topic_partition_list_add (parts, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
        if (rd_kafka_assign (rk, parts) != RD_KAFKA_RESP_ERR_NO_ERROR)
            fail_msg ("assign %s", topic);
        rd_kafka_topic_partition_list_destroy (parts);
        while (got < want && cli_now_ms () < until) {
            rd_kafka_message_t *msg = rd_kafka_consumer_poll (rk, 200);
            if (msg == NULL)
                continue;
            if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                if (got == cap)
                    m = realloc (m, (cap *= 2) * sizeof *m);
                cli_msg *c = &m[got++];
                c->key = msg->key ? malloc (msg->key_len + 1) : NULL;
                if (c->key) {
                    memcpy (c->key, msg->key, msg->key_len);
                    c->key[msg->key_len] = '\0';
                }
                c->key_len = msg->key_len;
                c->value = malloc (msg->len + 1);
                memcpy (c->value, msg->payload, msg->len);
                c->value[msg->len] = '\0';
                c->len = msg->len;
                c->partition = msg->partition;
                c->offset = msg->offset;
            }
            rd_kafka_message_destroy (msg);
        }
    }
    rd_kafka_consumer_close (rk);
    rd_kafka_destroy (rk);
    *out = m;
    return got;
}

void
cli_msgs_free (cli_msg *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free (m[i].key);
        free (m[i].value);
    }
    free (m);
}

/* ---------------------------------------------------------------- processes */

pid_t
cli_spawn (const char *const *argv, int *out_fd, int *err_fd)
{
    const char *args[64];
    size_t n = 0;
    args[n++] = KIWI_CLI_BIN;
    for (size_t i = 0; argv[i] && n < 63; i++)
        args[n++] = argv[i];
    args[n] = NULL;
    int po[2] = { -1, -1 }, pe[2] = { -1, -1 };
    if ((out_fd && pipe2 (po, O_CLOEXEC) < 0) || (err_fd && pipe2 (pe, O_CLOEXEC) < 0))
        fail_msg ("pipe: %s", strerror (errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init (&fa);
    posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
    if (out_fd)
        posix_spawn_file_actions_adddup2 (&fa, po[1], 1);
    if (err_fd)
        posix_spawn_file_actions_adddup2 (&fa, pe[1], 2);
    pid_t pid;
    int r = posix_spawn (&pid, KIWI_CLI_BIN, &fa, NULL, (char *const *) args, environ);
    posix_spawn_file_actions_destroy (&fa);
    if (r != 0)
        fail_msg ("spawn %s: %s", KIWI_CLI_BIN, strerror (r));
    if (out_fd) {
        close (po[1]);
        *out_fd = po[0];
    }
    if (err_fd) {
        close (pe[1]);
        *err_fd = pe[0];
    }
    return pid;
}

int
cli_wait (pid_t pid, int timeout_ms)
{
    int64_t until = cli_now_ms () + timeout_ms;
    int st = 0;
    for (;;) {
        pid_t w = waitpid (pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED (st) ? WEXITSTATUS (st) : 128 + WTERMSIG (st);
        if (cli_now_ms () >= until) {
            kill (pid, SIGKILL);
            waitpid (pid, &st, 0);
            return -1;
        }
        usleep (20000);
    }
}

/* Per-fd leftovers for cli_read_line. */
static struct {
    int fd;
    char buf[1 << 16];
    size_t len;
} pending[16];

ssize_t
cli_read_line (int fd, char *out, size_t cap, int timeout_ms)
{
    size_t slot = 0;
    while (slot < 16 && pending[slot].fd != fd && pending[slot].fd != 0)
        slot++;
    if (slot == 16)
        fail_msg ("too many line readers");
    pending[slot].fd = fd;
    int64_t until = cli_now_ms () + timeout_ms;
    for (;;) {
        char *nl = memchr (pending[slot].buf, '\n', pending[slot].len);
        if (nl != NULL) {
            size_t n = (size_t) (nl - pending[slot].buf);
            size_t c = n < cap - 1 ? n : cap - 1;
            memcpy (out, pending[slot].buf, c);
            out[c] = '\0';
            memmove (pending[slot].buf, nl + 1, pending[slot].len - n - 1);
            pending[slot].len -= n + 1;
            return (ssize_t) c;
        }
        int64_t left = until - cli_now_ms ();
        if (left <= 0 || pending[slot].len == sizeof pending[slot].buf)
            return -1;
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll (&p, 1, (int) left) <= 0)
            return -1;
        ssize_t r = read (fd, pending[slot].buf + pending[slot].len, sizeof pending[slot].buf - pending[slot].len);
        if (r <= 0)
            return -1;
        pending[slot].len += (size_t) r;
    }
}

char *
cli_slurp (int fd, int timeout_ms)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc (cap);
    int64_t until = cli_now_ms () + timeout_ms;
    for (;;) {
        int64_t left = until - cli_now_ms ();
        struct pollfd p = { fd, POLLIN, 0 };
        if (left <= 0 || poll (&p, 1, (int) left) <= 0)
            break;
        if (n + 1 >= cap)
            buf = realloc (buf, cap *= 2);
        ssize_t r = read (fd, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t) r;
    }
    buf[n] = '\0';
    return buf;
}

int
cli_run (const char *const *argv, const char *input, size_t input_len, char **out, char **err, int timeout_s)
{
    const char *args[64];
    size_t n = 0;
    args[n++] = KIWI_CLI_BIN;
    for (size_t i = 0; argv[i] && n < 63; i++)
        args[n++] = argv[i];
    args[n] = NULL;
    int pi[2], po[2], pe[2];
    if (pipe2 (pi, O_CLOEXEC) < 0 || pipe2 (po, O_CLOEXEC) < 0 || pipe2 (pe, O_CLOEXEC) < 0)
        fail_msg ("pipe: %s", strerror (errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init (&fa);
    posix_spawn_file_actions_adddup2 (&fa, pi[0], 0);
    posix_spawn_file_actions_adddup2 (&fa, po[1], 1);
    posix_spawn_file_actions_adddup2 (&fa, pe[1], 2);
    pid_t pid;
    int r = posix_spawn (&pid, KIWI_CLI_BIN, &fa, NULL, (char *const *) args, environ);
    posix_spawn_file_actions_destroy (&fa);
    if (r != 0)
        fail_msg ("spawn %s: %s", KIWI_CLI_BIN, strerror (r));
    close (pi[0]);
    close (po[1]);
    close (pe[1]);
    fcntl (pi[1], F_SETFL, O_NONBLOCK);

    /* Feed stdin and drain stdout and stderr together: no pipe fills up. */
    size_t in_off = 0;
    if (input == NULL || input_len == 0) {
        close (pi[1]);
        pi[1] = -1;
    }
    char *bufs[2] = { malloc (65536), malloc (65536) };
    size_t lens[2] = { 0, 0 }, caps[2] = { 65536, 65536 };
    int fds[2] = { po[0], pe[0] };
    int64_t until = cli_now_ms () + (int64_t) timeout_s * 1000;
    while ((fds[0] >= 0 || fds[1] >= 0) && cli_now_ms () < until) {
        struct pollfd p[3];
        int np = 0;
        for (int i = 0; i < 2; i++)
            p[np++] = (struct pollfd) { fds[i], POLLIN, 0 };
        p[np++] = (struct pollfd) { pi[1], POLLOUT, 0 };
        if (poll (p, (nfds_t) np, 200) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
                continue;
            if (lens[i] + 65536 > caps[i])
                bufs[i] = realloc (bufs[i], caps[i] *= 2);
            ssize_t rr = read (fds[i], bufs[i] + lens[i], caps[i] - lens[i] - 1);
            if (rr <= 0) {
                close (fds[i]);
                fds[i] = -1;
            } else
                lens[i] += (size_t) rr;
        }
        if (pi[1] >= 0 && (p[2].revents & (POLLOUT | POLLERR))) {
            ssize_t w = write (pi[1], input + in_off, input_len - in_off);
            if (w > 0)
                in_off += (size_t) w;
            if (w < 0 && errno != EAGAIN) {
                close (pi[1]);
                pi[1] = -1;
            }
            if (in_off == input_len && pi[1] >= 0) {
                close (pi[1]);
                pi[1] = -1;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close (fds[i]);
    if (pi[1] >= 0)
        close (pi[1]);
    bufs[0][lens[0]] = '\0';
    bufs[1][lens[1]] = '\0';
    if (out)
        *out = bufs[0];
    else
        free (bufs[0]);
    if (err)
        *err = bufs[1];
    else
        free (bufs[1]);
    int64_t left = until - cli_now_ms ();
    return cli_wait (pid, left > 0 ? (int) left : 1);
}
