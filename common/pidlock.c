/*
 * pidlock.c: a lock held for a process's life (see pidlock.h).
 */
#include "common/pidlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

/* The lock file's content: the holder's pid, into who. */
static void
holder_of (const char *path, char *who, size_t cap)
{
    snprintf (who, cap, "another process");
    FILE *f = fopen (path, "re");
    if (f == NULL)
        return;
    long pid = 0;
    if (fscanf (f, "%ld", &pid) == 1 && pid > 0)
        snprintf (who, cap, "pid %ld", pid);
    fclose (f);
}

int
kiwi_pidlock_take (const char *path, int *fd, char *holder, size_t cap, kiwi_error_t *err)
{
    *fd = -1;
    int f = open (path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (f < 0)
        return kiwi_error_make (err, errno, "lock %s", path);
    if (flock (f, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close (f);
        if (e == EWOULDBLOCK) {
            holder_of (path, holder, cap);
            return 0;
        }
        return kiwi_error_make (err, e, "lock %s", path);
    }
    char pid[32];
    int len = snprintf (pid, sizeof pid, "%ld\n", (long) getpid ());
    if (ftruncate (f, 0) < 0 || pwrite (f, pid, (size_t) len, 0) != len) {
        int e = errno;
        close (f);
        return kiwi_error_make (err, e, "lock %s", path);
    }
    *fd = f;
    return 1;
}
