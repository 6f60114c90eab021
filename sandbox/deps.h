/*
 * deps.h: a dependency snapshot extracted once on the worker, to be laid
 * read-only under every Phase B and session sandbox of its key (disk.h's
 * overlay) instead of being copied into each of them.
 *
 * Layout: <snapshot>/deps/{src,home}/... next to the snapshot's src.tar and
 * home.tar, so the snapshot's clean-up lock (gc.h) and its removal cover it.
 * The top directory is root's, 0755; the entries belong to the sandbox user
 * as the install left them (Phase B may change them: in its own upper
 * layer). Extraction treats the tars as hostile (archive.h: nothing written
 * outside the directory, no setuid bits, no devices, no hardlinks) and is
 * bounded by `max_bytes` of file content.
 *
 * Concurrent tasks of one key: each extracts into deps.<pid>.<tid>.partial
 * and renames it into place; the first rename wins, the others remove
 * theirs.
 */
#ifndef KIWI_SANDBOX_DEPS_H
#define KIWI_SANDBOX_DEPS_H

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* The extracted tree of the snapshot at `snapshot_dir`, extracted now when
 * it is not there yet. *lower receives its path (free() it). */
int kiwi_deps_prepare (const char *snapshot_dir, uint64_t max_bytes, uid_t uid, gid_t gid, char **lower,
                       kiwi_error_t *err);

#endif
