/*
 * fs.h: file-system helpers the layers above share: making a directory with
 * its parents, removing a tree without leaving its file system, measuring a
 * tree's disk use, mapping a file read-only.
 */
#ifndef KIWI_COMMON_FS_H
#define KIWI_COMMON_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* Makes `path` and any missing parent with `mode` (an existing directory
 * is no error). 0, or -1 with errno set; a path of PATH_MAX or more is
 * ENAMETOOLONG. */
int kiwi_fs_mkdir_p (const char *path, mode_t mode);

/* Removes `path` and everything below it with `rm -rf --one-file-system`,
 * so that a file system mounted below it (a sandbox's disk not yet
 * unmounted, a bind mount) is never entered; a missing path is no error.
 * Waits at most timeout_ms. 0, or -1 with *err (err may be NULL). */
int kiwi_fs_remove_tree (const char *path, long timeout_ms, kiwi_error_t *err);

/* The bytes the tree at `path` takes: for each entry (the top included),
 * the larger of its size and its allocated blocks, symlinks not followed,
 * other file systems not entered, at most 64 levels deep. The walk stops
 * once the sum passes `stop_over` (> 0), so that an answer of "too much"
 * costs no more than the budget. A missing or unreadable entry counts 0
 * (the tree may change while it is walked); a missing top is 0. */
int64_t kiwi_fs_tree_bytes (const char *path, int64_t stop_over);

/* A file mapped read-only; map is NULL (and len 0) for an empty file. */
typedef struct kiwi_fs_mapped {
    void *map;
    size_t len;
} kiwi_fs_mapped;

/* Maps `path` read-only and private. An absent file is an error naming it,
 * or, with `absent_ok`, empty like an empty file. 0, or -1 with *err (m is
 * then empty). */
int kiwi_fs_map (const char *path, bool absent_ok, kiwi_fs_mapped *m, kiwi_error_t *err);

/* Unmaps what kiwi_fs_map() mapped and leaves m empty. Safe on an empty m. */
void kiwi_fs_unmap (kiwi_fs_mapped *m);

#endif
