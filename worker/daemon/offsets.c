/*
 * offsets.c: the commit point of each partition (see offsets.h). A list per
 * partition, in consumption order, with a done flag per message; a worker
 * holds few messages at once (its slots and a look-ahead), so a linear scan
 * is all it needs.
 */
#include "worker/daemon/offsets.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct kiwi_offsets_partition {
    kiwi_offsets_partition *next;
    char *topic;
    int32_t partition;
    int64_t *offsets;
    bool *done;
    size_t n, cap;
};

static kiwi_offsets_partition *
find (const kiwi_offsets *o, const char *topic, int32_t partition)
{
    for (kiwi_offsets_partition *t = o->head; t; t = t->next)
        if (t->partition == partition && strcmp (t->topic, topic) == 0)
            return t;
    return NULL;
}

static void
partition_free (kiwi_offsets_partition *t)
{
    free (t->topic);
    free (t->offsets);
    free (t->done);
    free (t);
}

int
kiwi_offsets_add (kiwi_offsets *o, const char *topic, int32_t partition, int64_t offset, kiwi_error_t *err)
{
    kiwi_offsets_partition *t = find (o, topic, partition);
    if (t == NULL) {
        t = calloc (1, sizeof *t);
        if (t == NULL || (t->topic = strdup (topic)) == NULL) {
            free (t);
            return kiwi_error_make (err, ENOMEM, "tracking %s[%d]", topic, (int) partition);
        }
        t->partition = partition;
        t->next = o->head;
        o->head = t;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        int64_t *offsets = realloc (t->offsets, cap * sizeof *offsets);
        if (offsets == NULL)
            return kiwi_error_make (err, ENOMEM, "tracking %s[%d]@%lld", topic, (int) partition, (long long) offset);
        t->offsets = offsets;
        bool *done = realloc (t->done, cap * sizeof *done);
        if (done == NULL)
            return kiwi_error_make (err, ENOMEM, "tracking %s[%d]@%lld", topic, (int) partition, (long long) offset);
        t->done = done;
        t->cap = cap;
    }
    t->offsets[t->n] = offset;
    t->done[t->n] = false;
    t->n++;
    return 0;
}

bool
kiwi_offsets_done (kiwi_offsets *o, const char *topic, int32_t partition, int64_t offset, int64_t *commit)
{
    kiwi_offsets_partition *t = find (o, topic, partition);
    if (t == NULL)
        return false; /* revoked: the next owner gets it again */
    for (size_t i = 0; i < t->n; i++)
        if (t->offsets[i] == offset)
            t->done[i] = true;
    size_t k = 0;
    int64_t next = -1;
    while (k < t->n && t->done[k])
        next = t->offsets[k++] + 1;
    if (k == 0)
        return false;
    memmove (t->offsets, t->offsets + k, (t->n - k) * sizeof *t->offsets);
    memmove (t->done, t->done + k, (t->n - k) * sizeof *t->done);
    t->n -= k;
    *commit = next;
    return true;
}

void
kiwi_offsets_revoke (kiwi_offsets *o, const char *topic, int32_t partition)
{
    kiwi_offsets_partition **tp = &o->head;
    while (*tp) {
        kiwi_offsets_partition *t = *tp;
        if (t->partition == partition && strcmp (t->topic, topic) == 0) {
            *tp = t->next;
            partition_free (t);
        } else
            tp = &t->next;
    }
}

size_t
kiwi_offsets_pending (const kiwi_offsets *o, const char *topic, int32_t partition)
{
    const kiwi_offsets_partition *t = find (o, topic, partition);
    return t ? t->n : 0;
}

void
kiwi_offsets_clear (kiwi_offsets *o)
{
    while (o->head) {
        kiwi_offsets_partition *t = o->head;
        o->head = t->next;
        partition_free (t);
    }
}
