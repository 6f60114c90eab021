/*
 * shutdown.h: SIGTERM and SIGINT as a request to stop, for the worker's child
 * processes (a task, the egress checks): the sandbox work in flight is
 * cancelled (kiwi_sandbox_set_cancel) and its sandboxes are destroyed on
 * the way out, which the default action of the signals would skip.
 */
#ifndef KIWI_WORKER_SHUTDOWN_H
#define KIWI_WORKER_SHUTDOWN_H

/* Installs the handlers and the sandbox cancel flag; returns the flag,
 * nonzero once a signal came (static storage: never freed). */
volatile int *kiwi_shutdown_catch (void);

#endif
