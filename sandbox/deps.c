/*
 * deps.c: extracting a dependency snapshot once per key (see deps.h).
 */
#include "sandbox/deps.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/archive.h"
#include "common/fs.h"
#include "common/cleanup.h"
#include "common/proc.h"

/* nftw offers no user data: the owner goes through thread-local storage. */
static _Thread_local uid_t chown_uid;
static _Thread_local gid_t chown_gid;
static _Thread_local const char *chown_top;

static int
chown_one (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) flag;
    if (ftw->level == 0 && strcmp (path, chown_top) == 0)
        return 0; /* the top stays root's */
    return lchown (path, chown_uid, chown_gid) < 0 ? -1 : 0;
}

/* Extracts `dir`/`part` into `dest`. An empty or absent part is nothing. */
static int
extract_part (const char *dir, const char *part, const char *dest, kiwi_extract_opts *o, kiwi_error_t *err)
{
    char p[PATH_MAX];
    snprintf (p, sizeof p, "%s/%s", dir, part);
    cleanup_close int fd = open (p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : kiwi_error_make (err, errno, "opening %s", p);
    struct stat st;
    if (fstat (fd, &st) < 0)
        return kiwi_error_make (err, errno, "reading %s", p);
    if (st.st_size == 0)
        return 0;
    void *map = mmap (NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
        return kiwi_error_make (err, errno, "mapping %s", p);
    int rc = kiwi_archive_extract (map, (size_t) st.st_size, dest, o, NULL, err);
    munmap (map, (size_t) st.st_size);
    return rc < 0 ? kiwi_error_wrap (err, "extracting %s", p) : 0;
}

int
kiwi_deps_prepare (const char *snapshot_dir, uint64_t max_bytes, uid_t uid, gid_t gid, char **lower,
                   kiwi_error_t *err)
{
    *lower = NULL;
    cleanup_free char *final = NULL, *tmp = NULL;
    if (asprintf (&final, "%s/deps", snapshot_dir) < 0
        || asprintf (&tmp, "%s/deps.%d.%lu.partial", snapshot_dir, (int) getpid (), (unsigned long) pthread_self ())
               < 0)
        return kiwi_error_make (err, ENOMEM, "dependency tree");
    struct stat st;
    if (lstat (final, &st) == 0 && S_ISDIR (st.st_mode)) {
        *lower = steal_pointer (&final);
        return 0;
    }
    kiwi_fs_remove_tree (tmp, 600000, NULL);
    if (mkdir (tmp, 0755) < 0)
        return kiwi_error_make (err, errno, "creating %s", tmp);
    kiwi_extract_opts o = { .max_bytes = max_bytes > 0 ? (size_t) max_bytes : SIZE_MAX,
                            .max_entries = SIZE_MAX / 2, .preserve_mtime = true };
    static const char *const parts[] = { "src.tar", "home.tar" };
    static const char *const dirs[] = { "src", "home" };
    for (size_t i = 0; i < 2; i++) {
        char d[PATH_MAX];
        snprintf (d, sizeof d, "%s/%s", tmp, dirs[i]);
        if ((mkdir (d, 0755) < 0 && errno != EEXIST) || extract_part (snapshot_dir, parts[i], tmp, &o, err) < 0) {
            if (err && *err == NULL)
                kiwi_error_make (err, errno, "creating %s", d);
            kiwi_fs_remove_tree (tmp, 600000, NULL);
            return -1;
        }
    }
    chown_uid = uid;
    chown_gid = gid;
    chown_top = tmp;
    if (nftw (tmp, chown_one, 64, FTW_PHYS) != 0) {
        kiwi_error_make (err, errno, "giving %s to the sandbox user", tmp);
        kiwi_fs_remove_tree (tmp, 600000, NULL);
        return -1;
    }
    if (rename (tmp, final) < 0) {
        int e = errno;
        kiwi_fs_remove_tree (tmp, 600000, NULL);
        if (lstat (final, &st) != 0 || !S_ISDIR (st.st_mode))
            return kiwi_error_make (err, e, "keeping %s", final);
    }
    *lower = steal_pointer (&final);
    return 0;
}
