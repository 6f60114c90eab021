/*
 * fs.c: file-system helpers (see fs.h). The tree removal runs coreutils'
 * rm, whose --one-file-system keeps it out of mounts below the tree, which
 * nftw(3) would walk into.
 */
#include "common/fs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#include "common/proc.h"

int
kiwi_fs_mkdir_p (const char *path, mode_t mode)
{
    char tmp[PATH_MAX];
    if (snprintf (tmp, sizeof tmp, "%s", path) >= (int) sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir (tmp, mode) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir (tmp, mode) < 0 && errno != EEXIST ? -1 : 0;
}

int
kiwi_fs_remove_tree (const char *path, long timeout_ms, kiwi_error_t *err)
{
    const char *argv[] = { "rm", "-rf", "--one-file-system", "--", path, NULL };
    return kiwi_proc_check (argv, NULL, NULL, timeout_ms, err);
}
