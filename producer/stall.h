/*
 * stall.h: saying why nothing moves, for the commands that wait on workers
 * (kiwi wait, kiwi watch, kiwi batch --wait). Beside their own topics they
 * read the heartbeats topic (from now minus the window kiwi fleet uses) into
 * a fleet (fleet.h), from the time nothing has moved for half the stall
 * time; once nothing has moved for the stall_after setting
 * (cli.stall_after, KIWI_STALL_AFTER, --stall-after), they warn with the
 * fleet's diagnosis (kiwi_fleet_diagnose): no heartbeat at all, no worker
 * up, or every worker degraded with its reasons; and when a worker is up,
 * whether any consumer group reads the tasks topic (readers.h, asked every
 * KIWI_STALL_READERS_EVERY_MS at most: kiwi_fleet_diagnose_readers). A
 * diagnosis is said once,
 * and again only when it changes (or after a worker was up in between).
 *
 * Ownership: a kiwi_stall owns its fleet and the last diagnosis said; it
 * borrows the settings and the consumer, which must outlive it.
 * kiwi_stall_clear() frees what it owns.
 */
#ifndef KIWI_PRODUCER_STALL_H
#define KIWI_PRODUCER_STALL_H

#include <stdbool.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "producer/cli-settings.h"
#include "producer/fleet.h"

typedef struct kiwi_stall {
    kiwi_fleet fleet;
    const char *topic;    /* the heartbeats topic (borrowed from the settings) */
    const char *tasks;    /* the tasks topic (borrowed from the settings) */
    int64_t window_ms;    /* heartbeats are read back this far */
    int64_t after_ms;     /* quiet this long before a diagnosis; 0: never */
    int64_t moved_at;     /* monotonic ms of the last movement */
    int64_t next_assign;  /* monotonic ms of the next look for the topic */
    bool looked;          /* the topic was looked for once */
    int n_parts;          /* its partitions, when assigned (0: not yet) */
    bool *caught;         /* each partition read to its end once */
    int n_caught;
    char *said;           /* the diagnosis said last, NULL: none */
    char *readers_said;   /* the consumer groups' diagnosis at the last look, NULL: none */
    int64_t next_readers; /* monotonic ms of the next look at the consumer groups */
} kiwi_stall;

#define KIWI_STALL_READERS_EVERY_MS 10000

/* Sets up st from the settings (stall_after, gone_after, topic_heartbeats,
 * topic_tasks)
 * with now_mono (kiwi_mono_ms) as the last movement. */
void kiwi_stall_init (kiwi_stall *st, const kiwi_cli_settings *s, int64_t now_mono);
void kiwi_stall_clear (kiwi_stall *st);

/* Something moved (a task was taken, progressed or finished). */
void kiwi_stall_moved (kiwi_stall *st, int64_t now_mono);

/* Whether m is a message of the heartbeats topic; then it was taken into
 * the fleet (an undecodable one is skipped). The caller still destroys m. */
bool kiwi_stall_message (kiwi_stall *st, const rd_kafka_message_t *m);

/* Called on every pass of the caller's loop: adds the heartbeats topic to
 * rk's assignment while it is not, once nothing moved for after_ms / 2
 * (looked for once a second at most), and, when
 * nothing has moved for after_ms, the heartbeats read back were read to
 * their end (or there is no such topic) and the diagnosis differs from the
 * one said last, returns what to say: "nothing moved for N s: DIAGNOSIS",
 * malloc'd (the caller warns with it and frees it); else NULL. */
char *kiwi_stall_tick (kiwi_stall *st, rd_kafka_t *rk, int64_t now_mono);

#endif
