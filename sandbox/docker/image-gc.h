/*
 * image-gc.h: the record of the images Kiwi pulled for tasks, and which of
 * them the collection removes.
 *
 * dockerd keeps every image it pulled; Kiwi cannot label one (a label is
 * part of the image's content), so it keeps a record under the state
 * directory: <state>/images/<sha256 of the reference> holds
 * {"ref": ..., "ids": [...]} (the reference as the task named it, and every
 * image Id it stood for when Kiwi pulled it), and the file's mtime is the
 * image's last use. A reference is recorded only when the pull brought it
 * (it was not in dockerd before): an image the operator holds, and the
 * catalogue's images, are never recorded and never collected.
 *
 * The selection is pure: the caller says, for each record, its last use,
 * its size, whether a container uses it and whether the catalogue names
 * it; kiwi_image_gc_select marks what goes:
 *
 *   - by age: unused for longer than idle_s;
 *   - by the watermark: while Docker's storage is above disk_high percent
 *     used, the least recently used, until the sizes removed bring it to
 *     disk_low (an estimate: layers shared with other images free less);
 *     one used in the last grace_s seconds stays (pulled for a task whose
 *     container is not made yet).
 *
 * Never one in use by a container, never one the catalogue names.
 *
 * Ownership: records read are the caller's (kiwi_image_records_free);
 * selection items borrow their reference.
 */
#ifndef KIWI_SANDBOX_DOCKER_IMAGE_GC_H
#define KIWI_SANDBOX_DOCKER_IMAGE_GC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/strv.h"

/* ----- the record ----- */

typedef struct kiwi_image_record {
    char *ref;        /* as the task named it */
    kiwi_strv ids;    /* the image Ids it stood for, oldest first */
    int64_t last_used_s;
    char *file;       /* the record's path */
} kiwi_image_record;

/* Notes that `ref` (now image `id`) was made present for a task: with
 * `pulled` (it was not in dockerd before the pull) the record is made or
 * gains the Id; otherwise an existing record gains the Id and its last use
 * is now, and a reference with no record (not Kiwi's) stays unrecorded.
 * `dir` is made when missing. */
int kiwi_image_record_note (const char *dir, const char *ref, const char *id, bool pulled, kiwi_error_t *err);

/* Every record under `dir` (none when it is missing). A file that is not a
 * record is skipped with a warning. */
int kiwi_image_records_read (const char *dir, kiwi_image_record **out, size_t *n, kiwi_error_t *err);

void kiwi_image_records_free (kiwi_image_record *r, size_t n);

/* ----- the selection ----- */

typedef struct kiwi_image_gc_item {
    const char *ref;
    int64_t last_used_s;
    uint64_t size;      /* bytes */
    bool in_use;        /* a container (running or not) is of this image */
    bool catalogue;     /* the image catalogue names it */
    bool remove;        /* out: the collection removes it */
    bool by_watermark;  /* out: because of the watermark */
} kiwi_image_gc_item;

typedef struct kiwi_image_gc_policy {
    int64_t now_s;
    int64_t idle_s;        /* 0: none by age */
    int64_t grace_s;       /* the watermark spares images used this recently */
    double used_pct;       /* Docker's storage, percent used; < 0: unknown (no watermark) */
    uint64_t total_bytes;  /* its size */
    int disk_high, disk_low; /* high 0: no watermark */
} kiwi_image_gc_policy;

/* Marks the items to remove (see above). Returns how many. */
size_t kiwi_image_gc_select (kiwi_image_gc_item *items, size_t n, const kiwi_image_gc_policy *pol);

#endif
