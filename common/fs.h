/*
 * fs.h: file-system helpers the layers above share: making a directory with
 * its parents, removing a tree without leaving its file system.
 */
#ifndef KIWI_COMMON_FS_H
#define KIWI_COMMON_FS_H

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

#endif
