/*
 * daemon-internal.h: the rooms of the daemon (daemon.h) and what they share.
 *
 * One kiwi__daemon, owned by kiwi_daemon_run and used from one thread (the
 * libev loop's), is handed to every room. Its state is one sub-struct per
 * room; a room writes only its own (daemon.c sets every one up and tears it
 * down) and reads the others'.
 *
 *   daemon.c   the run (stop), the egress proxy (proxy), metrics: set-up
 *              of Kafka, timers and signals, the drain, tear-down
 *              calls: consume, admit, slots, produce, redis, health
 *   consume.c  messages in (consumer): tracked offsets and their commits,
 *              dead letters, pausing, rebalances
 *              calls: admit, slots, produce, the run
 *   admit.c    what a consumed task becomes (admit): a finished record
 *              looked up, a lease won, parked, or queued for a free slot;
 *              the counts admission.h decides on
 *              calls: slots, consume, produce, the run
 *   slots.c    task processes (slots): spawning, their frames, events and
 *              results published, delivery retries, a slot freed
 *              calls: produce, redis, consume, admit, the run
 *   produce.c  messages out (producer, outbox): delivery reports, the
 *              outbox (outbox.h) while the producer's queue is full
 *              calls: slots, redis, consume
 *   redis.c    the Redis connection (redis), leases released and renewed
 *              calls: slots
 *   health.c   heartbeats, the egress-check process (egress_check), the
 *              clean-up one (gc)
 *              calls: produce, consume
 *
 * The run is called back (by consume, admit and slots) only to stop
 * (kiwi__fatal) or to end a drain. Three pairs still call each other:
 * slots and produce (a result goes out, its report comes back), admit and
 * slots (a task starts, a freed slot takes the next), consume and admit (a
 * consumed task is admitted, a decision pauses consumption or commits).
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

/* A sandbox denied a thousand times tells the first ones: its install event
 * counts them all. */
#define KIWI__DENIALS_TOLD_MAX 64

typedef struct kiwi__daemon kiwi__daemon;

/* Where a message came from, so its offset can be committed later. */
typedef struct kiwi__daemon_origin {
    char *topic;
    int32_t partition;
    int64_t offset;
} kiwi__daemon_origin;

typedef enum {
    KIWI__SLOT_FREE = 0,
    KIWI__SLOT_STARTING,
    KIWI__SLOT_RUNNING,
    KIWI__SLOT_PUBLISHING
} kiwi__daemon_slot_state;

typedef struct kiwi__daemon_slot {
    kiwi__daemon *d;
    int index;
    kiwi__daemon_slot_state state;
    pid_t pid;
    int fd;
    ev_io io;
    ev_child child;
    kiwi_frame_reader reader;
    char *task_id;
    char *raw; /* the task message, as consumed */
    size_t raw_len;
    kiwi__daemon_origin from;
    uint64_t seq;     /* of this run's events, from 1 */
    uint32_t attempt; /* this run of the task, from 1 (Redis); 0: unknown */
    bool have_result;
    char *result; /* encoded Result from the task process */
    size_t result_len;
    bool revoked; /* its partition went elsewhere: publish, never commit */
    bool leased;
    bool lease_lost; /* its lease ended while its result was being published (said once) */
    char hash[65]; /* kiwi_task_body_sha256 of the task ("": unknown): its finished record's, its result's */
    int64_t started_ms; /* kiwi_mono_ms when its task process started, for the duration */
    unsigned generation; /* tells delivery reports of an old occupant apart */
    ev_timer retry;      /* the result produced again after a failed delivery */
    int deliveries_failed;
    bool minimal;        /* `result` is the minimal one: the broker refused the whole as too large */
    bool counted;        /* its result is in the metrics */
    /* its Phase A sandbox while it runs (a sandbox frame; "" otherwise):
     * the egress proxy's denials from that address are this task's */
    char install_address[46];
    int64_t install_since_ms; /* when that sandbox started (kiwi_egress_window) */
    char install_command[1024];
    int denials_told; /* egress_denied events of this run (at most KIWI__DENIALS_TOLD_MAX) */
} kiwi__daemon_slot;

/* A task waiting for another worker's lease on it to end (admit.c). */
typedef struct kiwi__daemon_waiting kiwi__daemon_waiting;

/* A consumed task on its way to a decision (admit.c). */
typedef struct kiwi__daemon_decide_ctx {
    kiwi__daemon *d;
    char *task_id;
    char *raw;
    size_t raw_len;
    kiwi__daemon_origin from;
    struct kiwi__daemon_decide_ctx *next; /* in d->admit.ready_head */
} kiwi__daemon_decide_ctx;

typedef enum { KIWI__ACK_NONE = 0, KIWI__ACK_RESULT, KIWI__ACK_COMMIT } kiwi__daemon_ack_kind;

/* What to do when the broker acknowledges a message (owned by the message
 * in flight; freed by its delivery report or when it is given up). */
typedef struct kiwi__daemon_ack {
    kiwi__daemon_ack_kind kind;
    int slot;
    unsigned generation;
    kiwi__daemon_origin from; /* KIWI__ACK_COMMIT */
    char *task_id;            /* KIWI__ACK_COMMIT: the task, named in the commit's log line (NULL: none) */
    bool republished;         /* KIWI__ACK_COMMIT of a republished result: its record is marked published */
} kiwi__daemon_ack;

/* The run: written by daemon.c (the signals, the drain) and through
 * kiwi__fatal by any room; read by admit.c, consume.c, slots.c and
 * health.c. */
typedef struct kiwi__daemon_stop {
    ev_signal sigterm_w, sigint_w;
    ev_timer drain_timer;
    bool draining;
    bool drain_expired; /* the drain deadline passed: unanswered look-ups no longer hold the exit */
    bool fatal;
    char fatal_msg[512];
} kiwi__daemon_stop;

/* A commit asked of the broker and not answered yet (consume.c). */
typedef struct kiwi__daemon_commit kiwi__daemon_commit;

/* Messages in: written by consume.c (set up and torn down by daemon.c);
 * no other room looks inside. */
typedef struct kiwi__daemon_consumer {
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
    int pipe[2];
    ev_io w;
    ev_timer poll_timer;
    rd_kafka_topic_partition_list_t *assignment;
    kiwi_offsets offsets; /* consumed and not yet committed, per partition */
    kiwi__daemon_commit *commits, *commits_tail; /* asked, awaiting kiwi__consumer_commit_cb, oldest first */
    bool paused;
} kiwi__daemon_consumer;

/* Messages out: written by produce.c (set up and torn down by daemon.c);
 * consume.c's poll timer polls the producer too. */
typedef struct kiwi__daemon_producer {
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
    int pipe[2];
    ev_io w;
} kiwi__daemon_producer;

/* Held while the producer's queue is full: written by produce.c; slots.c
 * reads last_err. */
typedef struct kiwi__daemon_outbox {
    kiwi_outbox held;              /* outbox.h, at most KIWI__OUTBOX_MAX_BYTES */
    ev_timer timer;                /* the next offer of what the outbox holds */
    rd_kafka_resp_err_t last_err;  /* why the last kiwi__produce was refused */
} kiwi__daemon_outbox;

/* Tasks between consumption and a slot: written by admit.c; read by
 * daemon.c (the drain's log), and by every room through kiwi__admission. */
typedef struct kiwi__daemon_admit {
    int deciding; /* tasks consumed whose Redis look-up has not answered yet */
    /* consumed while every slot was taken: started (looked up) in order as
     * slots free, so a freed slot does not wait for Kafka (up to
     * KIWI_ADMISSION_LOOKAHEAD of them; uncommitted, dropped on a drain or revoke) */
    kiwi__daemon_decide_ctx *ready_head, *ready_tail;
    int nready;
    kiwi__daemon_waiting *waiting; /* parked */
    ev_timer wait_timer;
} kiwi__daemon_admit;

/* The task slots and the counts of their results: written by slots.c (set
 * up and freed there, for daemon.c); read by admit.c (kiwi__admission),
 * consume.c, redis.c (the lease renewals) and health.c (the heartbeat). */
typedef struct kiwi__daemon_slots {
    kiwi__daemon_slot *list;
    int n, busy;
    uint64_t done, failed, cache_hits, cache_misses;
} kiwi__daemon_slots;

/* The Redis connection: written by redis.c (freed by daemon.c); read by
 * admit.c, slots.c, consume.c and health.c, admit.c and slots.c sending
 * their commands on ctx. */
typedef struct kiwi__daemon_redis {
    redisAsyncContext *ctx;
    bool ok;          /* connected and authenticated */
    char error[512];  /* why not, for the log (once per change) and the heartbeat */
    ev_timer timer;       /* reconnects */
    ev_timer lease_timer; /* renewals */
} kiwi__daemon_redis;

/* The egress checks: the last result of each, from the check process:
 * written by health.c; read by admit.c (isolation_failed). */
typedef struct kiwi__daemon_egress_check {
    ev_timer timer;
    ev_child child;
    ev_io io;
    int fd;
    pid_t pid;
    char buf[16384];
    size_t len;
    json_t *results;          /* object: name -> {ok, detail, checked_at} */
    bool isolation_failed;    /* a failed isolation check: degraded */
    char degraded_reason[2048];
} kiwi__daemon_egress_check;

/* The clean-up process (kiwi-worker --gc): written by health.c. */
typedef struct kiwi__daemon_gc {
    ev_timer timer;
    pid_t pid; /* running, or 0 */
    ev_child child;
} kiwi__daemon_gc;

/* What /metrics shows (worker-metrics.h) and the heartbeat's timer: set up
 * by daemon.c; every room feeds the registry. */
typedef struct kiwi__daemon_metrics {
    kiwi_worker_metrics *registry;
    kiwi_metrics_server *server; /* serving it on KIWI_METRICS_ADDR, or NULL */
    ev_timer heartbeat_timer;    /* health.c's */
} kiwi__daemon_metrics;

/* Phase A's egress proxy and the rules' log: written by daemon.c; read by
 * health.c (the heartbeat); their denials go to slots.c. */
typedef struct kiwi__daemon_proxy {
    kiwi_proxy_runner *runner; /* or NULL (KIWI_INSTALL_EGRESS=open) */
    kiwi_nflog *nflog;         /* what the rules rejected from its bridge (nflog.h), or NULL */
    ev_io nflog_w;
    char nflog_error[512];     /* why nflog is NULL with the proxy on */
} kiwi__daemon_proxy;

struct kiwi__daemon {
    const kiwi_worker_config *cfg; /* these three: fixed once the loop runs */
    const char *self_exe;
    struct ev_loop *loop;
    kiwi__daemon_stop stop;
    kiwi__daemon_consumer consumer;
    kiwi__daemon_producer producer;
    kiwi__daemon_outbox outbox;
    kiwi__daemon_admit admit;
    kiwi__daemon_slots slots;
    kiwi__daemon_redis redis;
    kiwi__daemon_egress_check egress_check;
    kiwi__daemon_gc gc;
    kiwi__daemon_metrics metrics;
    kiwi__daemon_proxy proxy;
};

/* daemon.c: the run */
/* Stops the worker as for a fatal error (the loop ends; tasks in flight are
 * stopped and, uncommitted, redelivered); the first message stands. */
void kiwi__fatal (kiwi__daemon *d, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
/* kiwi__fatal for memory: what = what could not be had. */
void kiwi__out_of_memory (kiwi__daemon *d, const char *what);
/* Ends the loop when a drain has nothing left to wait for. */
void kiwi__drain_done_check (kiwi__daemon *d);

/* consume.c: messages in */
/* The consumer's queue signalled its pipe: consumes what it holds. */
void kiwi__consumer_io_cb (struct ev_loop *loop, ev_io *w, int revents);
/* Every 0.5 s: polls both queues, refreshes the metrics' state. */
void kiwi__consumer_poll_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);
/* librdkafka's rebalance callback (opaque: the daemon). */
void kiwi__consumer_rebalance_cb (rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
                                  void *opaque);
/* Pauses or resumes consumption as admission.h wants. */
void kiwi__consumer_update_pause (kiwi__daemon *d);
/* Pauses (or resumes) the assigned partitions, whatever admission says. */
void kiwi__consumer_set_paused (kiwi__daemon *d, bool pause);
/* Marks a message finished and commits its partition up to the first
 * unfinished message (offsets.h). task_id, when not NULL, is the message's
 * task: the commit's log line names it. */
void kiwi__consumer_offset_done (kiwi__daemon *d, const kiwi__daemon_origin *o, const char *task_id);
/* librdkafka's offset commit callback (opaque: the daemon): logs how each
 * commit went, `task ID: offset committed (TOPIC[PARTITION]@OFFSET)` once
 * the broker has taken it. */
void kiwi__consumer_commit_cb (rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *offsets,
                               void *opaque);
/* Forgets the commits not answered (the consumer destroyed). */
void kiwi__consumer_commits_clear (kiwi__daemon *d);
/* Empties the wake-up pipe of a librdkafka queue (non-blocking). */
void kiwi__drain_pipe (int fd);
/* Copies where m came from into o. Returns 0, or -1 without memory. */
int kiwi__origin_set (kiwi__daemon_origin *o, const rd_kafka_message_t *m);
/* Frees what o holds (it can be set again). */
void kiwi__origin_clear (kiwi__daemon_origin *o);

/* admit.c: consumed tasks on their way to a slot */
/* The daemon's counts, for the rules of admission.h. */
kiwi_admission kiwi__admission (const kiwi__daemon *d);
/* A consumed task (taken): looked up now if a slot is free, else queued. */
void kiwi__admit (kiwi__daemon *d, kiwi__daemon_decide_ctx *c);
/* Queued tasks into the slots that are free. */
void kiwi__admit_pump (kiwi__daemon *d);
/* Queued and parked tasks dropped, uncommitted: all of them, or those of
 * one partition (topic NULL: all). */
void kiwi__admit_drop (kiwi__daemon *d, const char *topic, int32_t partition);
/* Parks a task (taking task_id, raw and from) to be looked at again in
 * after_ms. Returns 0, or -1 without memory (then nothing is taken). */
int kiwi__admit_park (kiwi__daemon *d, char *task_id, char *raw, size_t raw_len, kiwi__daemon_origin *from,
                      int64_t after_ms);
/* Every second: parked tasks whose time has come are looked up again. */
void kiwi__admit_wait_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);

/* slots.c: task processes */
/* Allocates d->slots.n free slots. Returns 0, or -1 without memory. */
int kiwi__slots_init (kiwi__daemon *d);
/* Frees the slots and what they hold, at exit. */
void kiwi__slots_free (kiwi__daemon *d);
/* Sends sig to every running task process. */
void kiwi__slots_kill (kiwi__daemon *d, int sig);
/* True while a slot holds task_id (running it, or publishing its result). */
bool kiwi__slots_holding (const kiwi__daemon *d, const char *task_id);
/* A partition went elsewhere: its tasks publish but never commit. */
void kiwi__slots_revoke (kiwi__daemon *d, const char *topic, int32_t partition);
/* Takes a slot for a task and starts its process, its events stamped with
 * `attempt` (0: unknown). Ownership of task_id, raw and from moves. */
void kiwi__slots_start_run (kiwi__daemon *d, char *task_id, char *raw, size_t raw_len, kiwi__daemon_origin *from,
                            bool leased, uint32_t attempt);
/* kiwi__slots_start_run without a lease, its attempt unknown. */
void kiwi__slots_start_task (kiwi__daemon *d, char *task_id, char *raw, size_t raw_len, kiwi__daemon_origin *from,
                             bool leased);
/* Results waiting to be produced again are left to the next owner (a drain
 * or a fatal error: the worker stops). */
void kiwi__slots_abandon_retries (kiwi__daemon *d);
/* The broker acknowledged the result of slot idx (ignored when the slot's
 * generation moved on): lease released, offset committed, slot freed. */
void kiwi__slots_result_acked (kiwi__daemon *d, int idx, unsigned generation);
/* The result of slot idx will not be delivered (e: why): produced again,
 * or cut down when too large (len bytes); ignored as above. */
void kiwi__slots_result_failed (kiwi__daemon *d, int idx, unsigned generation, rd_kafka_resp_err_t e, size_t len);
/* Redis answered the renewal of slot idx's lease (lost: it is gone or
 * someone else's); ignored when the slot moved on. */
void kiwi__slots_lease_renewed (kiwi__daemon *d, int idx, unsigned generation, bool lost);
/* kiwi_proxy_runner_on_denied's callback (userdata: the daemon): a denial
 * from a running install's address becomes that task's `egress_denied`
 * event. */
void kiwi__slots_on_egress_denied (const kiwi_proxy_log_entry *e, const char *rule, void *userdata);
/* kiwi_nflog_open's callback (userdata: the daemon): a packet the egress
 * rules rejected from a running install's address, the same. */
void kiwi__slots_on_firewall_denied (const kiwi_nflog_packet *p, void *userdata);

/* produce.c: messages out */
/* Hands a message to the producer, or holds it in the outbox while the
 * producer's queue is full. Returns 0, or -1 with d->outbox.last_err when
 * it was refused (a is then still the caller's). */
int kiwi__produce (kiwi__daemon *d, const char *topic, const char *key, const void *buf, size_t len,
                   kiwi__daemon_ack *a);
/* The producer's queue signalled its pipe: delivery reports are served. */
void kiwi__producer_io_cb (struct ev_loop *loop, ev_io *w, int revents);
/* librdkafka's delivery report callback (opaque: the daemon). */
void kiwi__producer_dr_msg_cb (rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque);
/* Frees an ack and what it owns (NULL: nothing). */
void kiwi__ack_free (kiwi__daemon_ack *a);
/* Offers the outbox's messages to the producer until it has room for no
 * more or the outbox is empty; at exit with block_ms > 0, waits for room up
 * to that long. */
void kiwi__outbox_flush (kiwi__daemon *d, int block_ms);
/* Frees what the outbox still holds, at exit. */
void kiwi__outbox_drop (kiwi__daemon *d);

/* redis.c: the connection and the leases */
/* Connects (not blocking) unless connected or connecting. */
void kiwi__redis_connect (kiwi__daemon *d);
/* Every 2 s: reconnects while down. */
void kiwi__redis_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);
/* Every third of the lease TTL: renews the leases of the slots that hold one. */
void kiwi__redis_lease_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);
/* Gives the lease back (compare-and-delete: only if this worker holds it). */
void kiwi__redis_lease_release (kiwi__daemon *d, const char *task_id);
/* Marks the finished record's result as published. */
void kiwi__redis_mark_done_published (kiwi__daemon *d, const char *task_id);

/* health.c: what the worker says of itself */
/* Produces a heartbeat now. */
void kiwi__health_publish_heartbeat (kiwi__daemon *d);
/* Every heartbeat interval: a heartbeat. */
void kiwi__health_heartbeat_cb (struct ev_loop *loop, ev_timer *w, int revents);
/* Starts an egress-check process unless one runs or the worker drains. */
void kiwi__egress_check_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);
/* On the way out: the check in flight (if any) is cancelled and given 20 s
 * to destroy its sandbox. */
void kiwi__egress_check_stop (kiwi__daemon *d);
/* Starts a clean-up process unless one runs or the worker drains. */
void kiwi__gc_timer_cb (struct ev_loop *loop, ev_timer *w, int revents);

#endif
