/*
 * fs.c: file-system helpers (see fs.h). The tree removal runs coreutils'
 * rm, whose --one-file-system keeps it out of mounts below the tree, which
 * nftw(3) would walk into.
 */
#include "common/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

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

static int64_t
entry_bytes (const struct stat *st)
{
    int64_t blocks = (int64_t) st->st_blocks * 512;
    return blocks > (int64_t) st->st_size ? blocks : (int64_t) st->st_size;
}

/* Adds the entries under the directory dfd (consumed) to *sum. */
static void
tree_bytes_at (int dfd, dev_t dev, int depth, int64_t stop_over, int64_t *sum)
{
    DIR *d = fdopendir (dfd);
    if (d == NULL) {
        close (dfd);
        return;
    }
    struct dirent *e;
    while ((stop_over <= 0 || *sum <= stop_over) && (e = readdir (d)) != NULL) {
        if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat (dirfd (d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        *sum += entry_bytes (&st);
        if (!S_ISDIR (st.st_mode) || st.st_dev != dev || depth >= 64)
            continue;
        int sub = openat (dirfd (d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0)
            tree_bytes_at (sub, dev, depth + 1, stop_over, sum);
    }
    closedir (d);
}

int64_t
kiwi_fs_tree_bytes (const char *path, int64_t stop_over)
{
    struct stat st;
    if (lstat (path, &st) < 0)
        return 0;
    int64_t sum = entry_bytes (&st);
    if (!S_ISDIR (st.st_mode))
        return sum;
    int dfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0)
        tree_bytes_at (dfd, st.st_dev, 1, stop_over, &sum);
    return sum;
}

int
kiwi_fs_map (const char *path, bool absent_ok, kiwi_fs_mapped *m, kiwi_error_t *err)
{
    m->map = NULL;
    m->len = 0;
    cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return absent_ok && errno == ENOENT ? 0 : kiwi_error_make (err, errno, "opening %s", path);
    struct stat st;
    if (fstat (fd, &st) < 0)
        return kiwi_error_make (err, errno, "reading %s", path);
    if (st.st_size == 0)
        return 0;
    void *map = mmap (NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
        return kiwi_error_make (err, errno, "mapping %s", path);
    m->map = map;
    m->len = (size_t) st.st_size;
    return 0;
}

void
kiwi_fs_unmap (kiwi_fs_mapped *m)
{
    if (m->map != NULL)
        munmap (m->map, m->len);
    m->map = NULL;
    m->len = 0;
}
