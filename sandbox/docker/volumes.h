/*
 * volumes.h: the volumes an image declares (Config.Volumes), made safe.
 *
 * dockerd gives every path an image declares with VOLUME an anonymous
 * volume: a directory in its own storage, outside the sandbox's disk, that
 * no ceiling bounds. It makes none for a path where the container already
 * has a mount, so the driver mounts a directory of the sandbox's own disk
 * over each such path (disk.h, kiwi_disk_volume_dir). This module decides,
 * from the image's list alone, which paths get such a mount, and refuses
 * with a named reason a list that cannot be masked safely. The keys come
 * from the image, so they are hostile.
 */
#ifndef KIWI_SANDBOX_DOCKER_VOLUMES_H
#define KIWI_SANDBOX_DOCKER_VOLUMES_H

#include <jansson.h>

#include "common/error.h"

/* Most volumes an image may declare (each is one more mount). */
#define KIWI_VOLUMES_MAX 64
/* Longest volume path, in bytes. */
#define KIWI_VOLUME_PATH_MAX 1024

/* Checks the keys of `volumes` (a JSON object as Config.Volumes holds it;
 * NULL, null or empty: none) and sets *masks to the paths that need a mount
 * of their own: each cleaned as dockerd cleans it (repeated and trailing
 * slashes and `.` components dropped), each once, and none that is one of
 * `covered` (the targets the sandbox mounts anyway, such as /kiwi and /tmp,
 * which mask a volume there; NULL-terminated, may be NULL).
 *
 * Refused, returning -1 with *err naming the path and the reason: more than
 * KIWI_VOLUMES_MAX keys; a key that is not a relative-free absolute path
 * (not starting with `/`, or with a `..` component), is longer than
 * KIWI_VOLUME_PATH_MAX, holds a control character, is `/`, lies in /proc,
 * /sys or /dev (the kernel's), or lies inside `root` (the sandbox's disk,
 * whose workspace a volume would hide). *masks is a NULL-terminated array
 * the caller frees with kiwi_volumes_free; NULL on error. */
int kiwi_volumes_plan (json_t *volumes, const char *root, const char *const *covered, char ***masks,
                       kiwi_error_t *err);

void kiwi_volumes_free (char **masks);

#endif
