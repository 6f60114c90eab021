/*
 * disk.h: the sandbox's size-bounded writable area.
 *
 * overlay2 on ext4 ignores `storage-opt size`, and this kernel has no XFS or
 * ext4 project quotas, so the ceiling (MaxSandboxDiskMB) is a filesystem of
 * exactly that size: a sparse file formatted as ext4, loop-mounted on the
 * worker side and mounted into the container at /kiwi (the container's own
 * root filesystem is read-only). Writes beyond the size fail with ENOSPC
 * inside the sandbox; the host disk is untouched. Only the empty filesystem
 * is mounted: the repository and every other file still move by archive.
 *
 * Layout on the worker: <state>/sandboxes/<name>/{disk.img,mnt/}; inside the
 * filesystem: src/ home/ tmp/ owned by the sandbox user.
 *
 * With a lower layer (a dependency snapshot's squashfs image, see deps.h,
 * loop-mounted read-only, nosuid and nodev at <name>/lower for this sandbox
 * alone; or a directory) the ext4 is mounted at <name>/fs instead and
 * <name>/mnt is an overlayfs: lowerdir = the snapshot (never written:
 * overlayfs copies a file up before any change, and removals are whiteouts
 * in the upper layer; the image is read-only besides), upperdir and
 * workdir on the ext4 (fs/upper, fs/work), so the ceiling bounds every write,
 * copy-ups included. The sandbox still sees one bind mount, mnt at /kiwi,
 * and the dependencies are there without a byte copied.
 *
 * Ownership: kiwi_disk_create() returns a disk owned by the caller;
 * kiwi_disk_destroy() unmounts, deletes and frees it (also on error).
 */
#ifndef KIWI_SANDBOX_DISK_H
#define KIWI_SANDBOX_DISK_H

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct kiwi_disk kiwi_disk;

/* `lower`: a squashfs image file or a host directory, laid read-only
 * under the disk (its src/ and home/ appear at /kiwi/src and /kiwi/home),
 * or NULL. An image is mounted here and unmounted by kiwi_disk_destroy()
 * and kiwi_disk_reap(), so nothing stays mounted past the sandbox. */
int kiwi_disk_create (const char *state_dir, const char *name, int64_t size_mb, uid_t uid, gid_t gid,
                      const char *lower, kiwi_disk **out, kiwi_error_t *err);

/* Host path of the mounted filesystem. Borrowed. */
const char *kiwi_disk_mountpoint (const kiwi_disk *d);

/* Makes directory number `index` for an image volume on the disk's
 * filesystem (.volumes/<index> at its root: beside the overlay's upper and
 * work directories when there is a lower layer, else at /kiwi/.volumes in
 * the sandbox), owned by uid:gid, and sets *path to its host path (owned
 * by the caller). Mounted over the volume's path in the container, it holds
 * what the sandbox writes there within the same ceiling as /kiwi
 * (volumes.h). */
int kiwi_disk_volume_dir (kiwi_disk *d, size_t index, uid_t uid, gid_t gid, char **path, kiwi_error_t *err);

int kiwi_disk_destroy (kiwi_disk *d, kiwi_error_t *err);

/* Removes <state>/sandboxes/<name> for every name for which keep(name)
 * returns 0: unmounts and deletes what a crashed worker left. */
int kiwi_disk_reap (const char *state_dir, int (*keep) (const char *name, void *ud), void *ud, int *removed,
                    kiwi_error_t *err);

#endif
