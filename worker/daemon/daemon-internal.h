/*
 * daemon-internal.h: the rooms of the daemon (daemon.h) and what they share.
 *
 * One daemon_t, owned by kiwi_daemon_run and used from one thread (the libev
 * loop's), is handed to every room:
 *
 *   daemon.c          the loop: set-up of Kafka, timers and signals, pausing
 *                     (admission.h decides), the drain, tear-down
 *   consume.c         messages in: tracked offsets, dead letters, rebalances
 *   admit.c           what a consumed task becomes: a finished record looked
 *                     up, a lease won, parked, or queued for a free slot
 *   slots.c           task processes: spawning, their frames, events and
 *                     results published, delivery retries, a slot freed
 *   produce.c         messages out: the producer, its delivery reports and
 *                     the outbox (outbox.h) while its queue is full; commits
 *   redis.c           the Redis connection, leases released and renewed
 *   health.c          heartbeats, the egress-check process, the clean-up one
 *
 * Names shared between rooms carry the kiwi__ prefix; everything else is
 * static to its room.
 */
#ifndef KIWI_WORKER_DAEMON_INTERNAL_H
#define KIWI_WORKER_DAEMON_INTERNAL_H

#include <ev.h>
#include <hiredis/async.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "worker/daemon/admission.h"
#include "worker/config.h"
#include "common/defaults.h"
#include "worker/events.h"
#include "worker/metrics-http.h"
#include "worker/egress/nflog.h"
#include "worker/daemon/offsets.h"
#include "worker/daemon/outbox.h"
#include "worker/egress/proxy-runner.h"
#include "worker/worker-metrics.h"

extern char **environ;

/* Held messages are bounded: past this a new message is refused as though
 * the producer had refused it (its task stays uncommitted). */
#define KIWI__OUTBOX_MAX_BYTES (64u * 1024u * 1024u)

typedef enum { SLOT_FREE = 0, SLOT_STARTING, SLOT_RUNNING, SLOT_PUBLISHING } slot_state;

typedef struct daemon daemon_t;

/* Where a message came from, so its offset can be committed later. */
typedef struct origin {
    char *topic;
    int32_t partition;
    int64_t offset;
} origin;

typedef struct slot {
    daemon_t *d;
    int index;
    slot_state state;
    pid_t pid;
    int fd;
    ev_io io;
    ev_child child;
    kiwi_frame_reader reader;
    char *task_id;
    char *raw; /* the task message, as consumed */
    size_t raw_len;
    origin from;
    uint64_t seq;     /* of this run's events, from 1 */
    uint32_t attempt; /* this run of the task, from 1 (Redis); 0: unknown */
    bool have_result;
    char *result; /* encoded Result from the task process */
    size_t result_len;
    bool revoked; /* its partition went elsewhere: publish, never commit */
    bool leased;
    bool lease_lost; /* its lease ended while its result was being published (said once) */
    char hash[65]; /* kiwi_policy_task_hash of the task, kept in its finished record */
    int64_t started_ms;
    unsigned generation; /* tells delivery reports of an old occupant apart */
    ev_timer retry;      /* the result produced again after a failed delivery */
    int deliveries_failed;
    bool minimal;        /* `result` is the minimal one: the broker refused the whole as too large */
    bool counted;        /* its result is in the metrics */
    /* its Phase A sandbox while it runs (a sandbox frame; "" otherwise):
     * the egress proxy's denials from that address are this task's */
    char install_address[46];
    char install_command[1024];
    int denials_told; /* egress_denied events of this run (at most KIWI__DENIALS_TOLD_MAX) */
} slot;

/* A sandbox denied a thousand times tells the first ones: its install event
 * counts them all. */
#define KIWI__DENIALS_TOLD_MAX 64

/* A task waiting for another worker's lease on it to end. */
typedef struct waiting {
    struct waiting *next;
    char *task_id;
    char *raw;
    size_t raw_len;
    origin from;
    int64_t next_look_ms;
} waiting;

/* A consumed task on its way to a decision (admit.c). */
typedef struct decide_ctx {
    daemon_t *d;
    char *task_id;
    char *raw;
    size_t raw_len;
    origin from;
    struct decide_ctx *next; /* in d->ready_head */
} decide_ctx;

typedef enum { ACK_NONE = 0, ACK_RESULT, ACK_COMMIT } ack_kind;

/* What to do when the broker acknowledges a message (owned by the message
 * in flight; freed by its delivery report or when it is given up). */
typedef struct ack {
    ack_kind kind;
    int slot;
    unsigned generation;
    origin from;      /* ACK_COMMIT */
    char *task_id;    /* ACK_COMMIT of a republished result */
} ack;

struct daemon {
    const kiwi_worker_config *cfg;
    const char *self_exe;
    struct ev_loop *loop;
    rd_kafka_t *consumer, *producer;
    rd_kafka_queue_t *cq, *pq;
    int cq_pipe[2], pq_pipe[2];
    ev_io cq_w, pq_w;
    ev_timer poll_timer, heartbeat_timer, lease_timer, redis_timer, wait_timer, drain_timer, gc_timer;
    ev_signal sigterm_w, sigint_w;
    redisAsyncContext *redis;
    bool redis_ok;          /* connected and authenticated */
    char redis_error[512];  /* why not, for the log (once per change) and the heartbeat */
    slot *slots;
    int nslots, busy;
    int deciding; /* tasks consumed whose Redis look-up has not answered yet */
    /* consumed while every slot was taken: started (looked up) in order as
     * slots free, so a freed slot does not wait for Kafka (up to
     * KIWI_LOOKAHEAD of them; uncommitted, dropped on a drain or revoke) */
    decide_ctx *ready_head, *ready_tail;
    int nready;
    bool paused;
    bool draining;
    bool drain_expired; /* the drain deadline passed: unanswered look-ups no longer hold the exit */
    bool fatal;
    char fatal_msg[512];
    rd_kafka_topic_partition_list_t *assignment;
    kiwi_offsets offsets; /* consumed and not yet committed, per partition */
    waiting *waiting;
    uint64_t done, failed, cache_hits, cache_misses;
    int64_t started_ms;
    /* egress checks: the last result of each, from the check process */
    ev_timer egress_timer;
    ev_child egress_child;
    ev_io egress_io;
    int egress_fd;
    pid_t egress_pid;
    char egress_buf[16384];
    size_t egress_len;
    json_t *egress;           /* object: name -> {ok, detail, checked_at} */
    bool isolation_failed;    /* a failed isolation check: degraded */
    char degraded_reason[1024];
    rd_kafka_resp_err_t produce_err; /* why the last produce() was refused */
    kiwi_outbox outbox;              /* held while the producer's queue is full (outbox.h), at most
                                      * KIWI__OUTBOX_MAX_BYTES */
    ev_timer outbox_timer;           /* the next offer of what the outbox holds */
    pid_t gc_pid;                    /* the clean-up process (kiwi-worker --gc) running, or 0 */
    ev_child gc_child;
    kiwi_worker_metrics *metrics;    /* what /metrics shows (worker-metrics.h) */
    kiwi_metrics_server *metrics_server; /* serving it on KIWI_METRICS_ADDR, or NULL */
    kiwi_proxy_runner *proxy;        /* Phase A's egress proxy, or NULL (KIWI_INSTALL_EGRESS=open) */
    kiwi_nflog *nflog;               /* what the rules rejected from its bridge (nflog.h), or NULL */
    ev_io nflog_w;
    char nflog_error[512];           /* why nflog is NULL with the proxy on */
};

/* Stops the worker as for a fatal error (the loop ends; tasks in flight are
 * stopped and, uncommitted, redelivered): what = what could not be had. */
void kiwi__out_of_memory (daemon_t *d, const char *what);


/* admit.c */
void kiwi__admit (daemon_t *d, decide_ctx *c);
void kiwi__drop_ready (daemon_t *d, const char *topic, int32_t partition);
void kiwi__pump_ready (daemon_t *d);
void kiwi__wait_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);
void kiwi__waiting_free (waiting *w);

/* consume.c */
void kiwi__cq_cb (struct ev_loop *loop, ev_io *w, int revents);
void kiwi__poll_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);
void kiwi__pq_cb (struct ev_loop *loop, ev_io *w, int revents);
void kiwi__rebalance_cb (rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts, void *opaque);

/* health.c */
void kiwi__egress_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);
void kiwi__gc_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);
void kiwi__heartbeat_cb (struct ev_loop *loop, ev_timer *w, int revents);
void kiwi__publish_heartbeat (daemon_t *d);
void kiwi__stop_egress_check (pid_t pid);

/* produce.c */
int kiwi__produce (daemon_t *d, const char *topic, const char *key, const void *buf, size_t len, ack *a);
void kiwi__dr_msg_cb (rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque);
void kiwi__offset_done (daemon_t *d, const origin *o);
void kiwi__origin_clear (origin *o);
int kiwi__origin_set (origin *o, const rd_kafka_message_t *m);

/* redis.c */
void kiwi__lease_release (daemon_t *d, const char *task_id);
void kiwi__lease_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);
void kiwi__mark_done_published (daemon_t *d, const char *task_id);
void kiwi__redis_connect (daemon_t *d);
void kiwi__redis_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);

/* slots.c */
void kiwi__abandon_retries (daemon_t *d);
/* kiwi_proxy_runner_on_denied's callback (userdata: the daemon): a denial
 * from a running install's address becomes that task's `egress_denied`
 * event. */
void kiwi__on_egress_denied (const kiwi_proxy_log_entry *e, const char *rule, void *userdata);
/* kiwi_nflog_open's callback (userdata: the daemon): a packet the egress
 * rules rejected from a running install's address, the same. */
void kiwi__on_firewall_denied (const kiwi_nflog_packet *p, void *userdata);
void kiwi__on_result_acked (daemon_t *d, slot *s);
void kiwi__result_not_delivered (daemon_t *d, slot *s, const char *why);
void kiwi__result_too_large (daemon_t *d, slot *s, size_t len, const char *why);
void kiwi__start_run (daemon_t *d, char *task_id, char *raw, size_t raw_len, origin *from, bool leased, uint32_t attempt);
void kiwi__start_task (daemon_t *d, char *task_id, char *raw, size_t raw_len, origin *from, bool leased);

/* daemon.c */
kiwi_admission kiwi__admission (const daemon_t *d);
void kiwi__drain_done_check (daemon_t *d);
void kiwi__update_pause (daemon_t *d);

/* produce.c, besides */
/* Frees an ack and what it owns (NULL: nothing). */
void kiwi__ack_free (ack *a);
/* Offers the outbox's messages to the producer until it has room for no
 * more or the outbox is empty; at exit with block_ms > 0, waits for room up
 * to that long. */
void kiwi__outbox_flush (daemon_t *d, int block_ms);
/* Frees what the outbox still holds, at exit. */
void kiwi__outbox_drop (daemon_t *d);

#endif
