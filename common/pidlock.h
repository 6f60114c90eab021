/*
 * pidlock.h: a lock a process holds for as long as it runs, and that names
 * its holder to whoever finds it taken.
 *
 * An exclusive flock(2) on a file holding the holder's pid: the kernel
 * releases it when the process ends, however it ends, so a crash leaves no
 * stale lock; the pid is only what the next process's error names.
 */
#ifndef KIWI_COMMON_PIDLOCK_H
#define KIWI_COMMON_PIDLOCK_H

#include <stddef.h>

#include "common/error.h"

/* Takes the lock at `path` (created 0644; a symlink there is refused):
 * 1 with *fd the open lock (close-on-exec: no child keeps it; the caller
 * closes it to let go), 0 when another process holds it (`holder`, of
 * `cap` bytes, then says "pid N", or "another process" when the file names
 * none), -1 with *err naming the file. */
int kiwi_pidlock_take (const char *path, int *fd, char *holder, size_t cap, kiwi_error_t *err);

#endif
