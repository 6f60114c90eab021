/*
 * defaults.h: names and defaults shared by kiwi-worker and the kiwi command,
 * so the two never disagree on a topic or a Redis key.
 */
#ifndef KIWI_COMMON_DEFAULTS_H
#define KIWI_COMMON_DEFAULTS_H

/* Topics (docs/architecture.md, "Message flow"). Tasks are keyed by repository URL,
 * progress and results by task id, heartbeats by worker id. */
#define KIWI_TOPIC_TASKS_DEFAULT "kiwi.tasks"
#define KIWI_TOPIC_PROGRESS_DEFAULT "kiwi.progress"
#define KIWI_TOPIC_RESULTS_DEFAULT "kiwi.results"
#define KIWI_TOPIC_HEARTBEATS_DEFAULT "kiwi.heartbeats"
#define KIWI_TOPIC_DLQ_DEFAULT "kiwi.dlq"
#define KIWI_GROUP_DEFAULT "kiwi-workers"

#define KIWI_BROKERS_DEFAULT "127.0.0.1:19092"
#define KIWI_STATE_DIR_DEFAULT "/var/lib/kiwi"

/* Redis keys. <id> is a task id, <hash> a cache key (docs/inspection.md). */
#define KIWI_REDIS_LEASE_PREFIX "kiwi:lease:"     /* kiwi:lease:<id> = worker id, PX ttl */
#define KIWI_REDIS_DONE_PREFIX "kiwi:done:"       /* kiwi:done:<id> = the encoded Result */
#define KIWI_REDIS_ATTEMPT_PREFIX "kiwi:attempt:" /* kiwi:attempt:<id> = runs leased so far, done TTL */
#define KIWI_REDIS_INSTALL_PREFIX "kiwi:install:" /* kiwi:install:<hash> = snapshot record */
#define KIWI_REDIS_VERIFY_PREFIX "kiwi:verify:"   /* kiwi:verify:<hash> = verify record */
#define KIWI_REDIS_DIFF_PREFIX "kiwi:diff:"       /* kiwi:diff:<id> = a whole diff too large for the results topic */

/* What the egress checks fetch (KIWI_EGRESS_PROBE_URL) */
#define KIWI_EGRESS_PROBE_URL_DEFAULT "https://registry.npmjs.org/"

#endif
