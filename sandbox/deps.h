/*
 * deps.h: a dependency snapshot made once into a read-only squashfs image,
 * laid under every Phase B and session sandbox of its key (disk.h
 * mounts it per sandbox as the overlay's lower layer) instead of being
 * copied or extracted file by file.
 *
 * Layout: <snapshot>/deps.sqfs next to the snapshot's src.tar and home.tar,
 * so the snapshot's clean-up lock (gc.h) and its removal cover it: a plain
 * file, never kept mounted. Inside the image: src/ and home/, every entry
 * owned by the sandbox user, modes & 0777, as the install left them (Phase
 * B may change them: in its own upper layer). The tars are hostile: they are
 * read with extraction's rules (archive.h: no absolute names or "..", nothing
 * through a symlink, hardlinks only to earlier files, no devices) and
 * rewritten by Kiwi before tar2sqfs sees a byte; file content is bounded by
 * `max_bytes` per tar. The image file is root's, 0644.
 *
 * Concurrent tasks of one key: each writes deps.sqfs.<pid>.<tid>.partial
 * and renames it into place (the images are the same; any rename may win).
 * The one that makes the image also removes what earlier workers left: the
 * tree extracted before images (deps/) and partial images or trees of
 * processes that no longer run.
 */
#ifndef KIWI_SANDBOX_DEPS_H
#define KIWI_SANDBOX_DEPS_H

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

#define KIWI_DEPS_IMAGE "deps.sqfs"

/* The image of the snapshot at `snapshot_dir`, made now when it is not
 * there yet (needs setpriv and tar2sqfs). *lower receives its path (free()
 * it). */
int kiwi_deps_prepare (const char *snapshot_dir, uint64_t max_bytes, uid_t uid, gid_t gid, char **lower,
                       kiwi_error_t *err);

#endif
