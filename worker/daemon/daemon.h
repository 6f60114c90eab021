/*
 * daemon.h: kiwi-worker's long-running side.
 *
 * One libev loop drives everything: librdkafka's consumer and producer
 * queues (through their io-event fds), hiredis's libev adapter, timers
 * (heartbeats, lease renewal, reconnects, the state dir's clean-up) and signals.
 * Each task runs in a task process of its own (kiwi-worker --task-child),
 * which reports progress and its result over a pipe; the daemon numbers the
 * events, publishes them, and commits the task's offset only after its
 * result is acknowledged by the broker.
 *
 * Delivery is at least once; a Redis lease per task keeps a task from being
 * worked twice at the same time, and a record of finished tasks keeps a
 * redelivered task from producing a second, different result.
 */
#ifndef KIWI_WORKER_DAEMON_H
#define KIWI_WORKER_DAEMON_H

#include "worker/config.h"
#include "common/error.h"

/* Runs until SIGTERM/SIGINT (then drains: no new tasks, in-flight tasks get
 * drain_timeout to finish, their sandboxes go, the consumer closes). Returns
 * 0 after a clean drain, < 0 on a fatal error (a fatal Kafka error, ...). */
int kiwi_daemon_run (const kiwi_worker_config *cfg, const char *self_exe, kiwi_error_t *err);

#endif
