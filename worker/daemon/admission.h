/*
 * admission.h: when the daemon takes a task (pure: no Kafka, Redis or
 * libev; the daemon fills a kiwi_admission from its counters and asks).
 *
 * A consumed task passes through: the ready queue (consumed while every
 * slot was taken), its Redis look-up (done record, then lease: "deciding"),
 * parked (another worker holds its lease) and a slot (busy). A look-up in
 * flight holds a slot's place, so that the slots are never promised to more
 * tasks than there are; one task beyond the free slots is taken from Kafka
 * and held (KIWI_ADMISSION_LOOKAHEAD), so a freed slot does not wait for a
 * fetch. A drain takes nothing new and ends when no task runs and no
 * look-up is unanswered (or, after its deadline, when no task runs).
 */
#ifndef KIWI_WORKER_ADMISSION_H
#define KIWI_WORKER_ADMISSION_H

#include <stdbool.h>

/* Tasks taken from Kafka beyond the free slots. The partitions are this
 * worker's alone until a rebalance, so holding the next task costs no other
 * worker anything; it saves the fetch after a resume (librdkafka 2.0.2
 * takes up to 0.5 s to fetch again, most of a short task's time). */
#define KIWI_ADMISSION_LOOKAHEAD 1

/* The daemon's counts at one moment (a view; it owns nothing). */
typedef struct kiwi_admission {
    int nslots;         /* slots configured */
    int busy;           /* slots taken by a task */
    int deciding;       /* tasks whose Redis look-up has not answered */
    int nready;         /* tasks in the ready queue */
    bool parked;        /* at least one task waits for another worker's lease */
    bool draining;      /* told to stop: takes nothing new */
    bool drain_expired; /* the drain deadline passed */
    bool stopped;       /* an isolation check failed and the operator stops taking tasks then */
} kiwi_admission;

/* True when the daemon consumes more from Kafka (false: its partitions are
 * paused): the tasks it holds in every state are fewer than its slots plus
 * the look-ahead. */
bool kiwi_admission_want_tasks (const kiwi_admission *a);

/* True when a task just consumed is looked up at once; false when it joins
 * the ready queue (the queue is not empty, or no slot is free of tasks and
 * look-ups). */
bool kiwi_admission_look_up_now (const kiwi_admission *a);

/* True when a queued or parked task may start its look-up now: not
 * draining, and a slot is free of tasks and look-ups. */
bool kiwi_admission_may_look_up (const kiwi_admission *a);

/* True when a drain is over: no task runs, and no look-up is unanswered
 * (those no longer count once the drain deadline passed). */
bool kiwi_admission_drained (const kiwi_admission *a);

#endif
