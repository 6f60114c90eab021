/*
 * offsets.h: which offset of a partition may be committed (pure: no Kafka,
 * Redis or libev; the daemon calls it and does the commit).
 *
 * Every message consumed is added, in the order consumed, to its
 * partition's list; a finished message is marked done. A partition may be
 * committed up to (one past) the last of the leading run of finished
 * messages: a message that is not finished holds every later one back, so a
 * slow task is never skipped by a commit made for a faster one after it. A
 * revoked partition's list is dropped: its offsets are the next owner's.
 */
#ifndef KIWI_WORKER_OFFSETS_H
#define KIWI_WORKER_OFFSETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef struct kiwi_offsets_partition kiwi_offsets_partition;

/* The in-flight offsets of every partition; zero-initialised is empty.
 * Owns its lists; kiwi_offsets_clear frees them. */
typedef struct kiwi_offsets {
    kiwi_offsets_partition *head;
} kiwi_offsets;

/* Records offset as consumed (not finished) on topic[partition]. Offsets of
 * one partition are added in increasing order. Returns 0, or -1 with err
 * (no memory). */
int kiwi_offsets_add (kiwi_offsets *o, const char *topic, int32_t partition, int64_t offset, kiwi_error_t *err);

/* Marks offset finished. Returns true and sets *commit (the offset to
 * commit: one past the last finished of the leading run) when the
 * partition's committed point moves; false when it does not (an earlier
 * message is unfinished, or the partition is not tracked: revoked). */
bool kiwi_offsets_done (kiwi_offsets *o, const char *topic, int32_t partition, int64_t offset, int64_t *commit);

/* Drops what is tracked of topic[partition] (revoked). */
void kiwi_offsets_revoke (kiwi_offsets *o, const char *topic, int32_t partition);

/* Messages of topic[partition] consumed and not yet committed. */
size_t kiwi_offsets_pending (const kiwi_offsets *o, const char *topic, int32_t partition);

/* Frees every list; o is empty after. */
void kiwi_offsets_clear (kiwi_offsets *o);

#endif
