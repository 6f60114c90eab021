/*
 * disk.c: a loop-mounted ext4 file per sandbox, as the disk ceiling (see
 * disk.h for why).
 */
#include "disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "proc.h"

struct kiwi_disk {
    char *dir;   /* <state>/sandboxes/<name> */
    char *image; /* dir/disk.img */
    char *mnt;   /* dir/mnt */
    int mounted;
};

static int
mkdir_p (const char *path, mode_t mode)
{
    char tmp[PATH_MAX];
    snprintf (tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir (tmp, mode) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir (tmp, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

static int
unmount_and_remove (const char *dir, kiwi_error_t *err)
{
    char mnt[PATH_MAX + 300], img[PATH_MAX + 300];
    snprintf (mnt, sizeof mnt, "%s/mnt", dir);
    snprintf (img, sizeof img, "%s/disk.img", dir);
    /* lazy: a sandbox that is still being torn down must not pin the mount */
    if (umount2 (mnt, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
        return kiwi_error_make (err, errno, "unmounting %s", mnt);
    if (rmdir (mnt) < 0 && errno != ENOENT)
        return kiwi_error_make (err, errno, "removing %s", mnt);
    if (unlink (img) < 0 && errno != ENOENT)
        return kiwi_error_make (err, errno, "removing %s", img);
    if (rmdir (dir) < 0 && errno != ENOENT)
        return kiwi_error_make (err, errno, "removing %s", dir);
    return 0;
}

int
kiwi_disk_create (const char *state_dir, const char *name, int64_t size_mb, uid_t uid, gid_t gid,
                  kiwi_disk **out, kiwi_error_t *err)
{
    if (size_mb < 16)
        return kiwi_error_make (err, 0, "disk ceiling of %lld MB is below the minimum of 16 MB",
                                (long long) size_mb);
    kiwi_disk *d = calloc (1, sizeof *d);
    if (d == NULL || asprintf (&d->dir, "%s/sandboxes/%s", state_dir, name) < 0
        || asprintf (&d->image, "%s/disk.img", d->dir) < 0 || asprintf (&d->mnt, "%s/mnt", d->dir) < 0) {
        kiwi_disk_destroy (d, NULL);
        return kiwi_error_make (err, ENOMEM, "disk for sandbox %s", name);
    }
    if (mkdir_p (d->mnt, 0700) < 0) {
        kiwi_error_make (err, errno, "creating %s", d->mnt);
        goto fail;
    }
    {
        cleanup_close int fd = open (d->image, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate (fd, (off_t) size_mb * 1024 * 1024) < 0) {
            kiwi_error_make (err, errno, "creating the %lld MB disk file %s", (long long) size_mb, d->image);
            goto fail;
        }
    }
    char ext_opts[128];
    snprintf (ext_opts, sizeof ext_opts, "root_owner=%u:%u,lazy_itable_init=1", (unsigned) uid, (unsigned) gid);
    const char *mkfs[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", ext_opts, d->image, NULL };
    if (kiwi_proc_check (mkfs, NULL, NULL, 60000, err) < 0) {
        kiwi_error_wrap (err, "formatting the sandbox disk");
        goto fail;
    }
    const char *mount_argv[] = { "mount", "-t", "ext4", "-o", "loop,nosuid,nodev", d->image, d->mnt, NULL };
    if (kiwi_proc_check (mount_argv, NULL, NULL, 60000, err) < 0) {
        kiwi_error_wrap (err, "mounting the sandbox disk (needs root and loop devices)");
        goto fail;
    }
    d->mounted = 1;
    static const char *const subdirs[] = { "src", "home", "tmp" };
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        char p[PATH_MAX];
        snprintf (p, sizeof p, "%s/%s", d->mnt, subdirs[i]);
        if ((mkdir (p, 0755) < 0 && errno != EEXIST) || chown (p, uid, gid) < 0) {
            kiwi_error_make (err, errno, "preparing %s", p);
            goto fail;
        }
    }
    char lf[PATH_MAX];
    snprintf (lf, sizeof lf, "%s/lost+found", d->mnt);
    rmdir (lf);
    *out = d;
    return 0;
fail:
    kiwi_disk_destroy (d, NULL);
    return -1;
}

const char *
kiwi_disk_mountpoint (const kiwi_disk *d)
{
    return d->mnt;
}

int
kiwi_disk_destroy (kiwi_disk *d, kiwi_error_t *err)
{
    if (d == NULL)
        return 0;
    int rc = 0;
    if (d->dir != NULL)
        rc = unmount_and_remove (d->dir, err);
    free (d->dir);
    free (d->image);
    free (d->mnt);
    free (d);
    return rc;
}

int
kiwi_disk_reap (const char *state_dir, int (*keep) (const char *name, void *ud), void *ud, int *removed,
                kiwi_error_t *err)
{
    char base[PATH_MAX];
    snprintf (base, sizeof base, "%s/sandboxes", state_dir);
    if (removed)
        *removed = 0;
    DIR *dir = opendir (base);
    if (dir == NULL)
        return errno == ENOENT ? 0 : kiwi_error_make (err, errno, "reading %s", base);
    struct dirent *e;
    int rc = 0;
    while ((e = readdir (dir)) != NULL) {
        if (e->d_name[0] == '.' || (keep && keep (e->d_name, ud)))
            continue;
        char p[PATH_MAX + 256];
        snprintf (p, sizeof p, "%s/%s", base, e->d_name);
        kiwi_error_t one = NULL;
        if (unmount_and_remove (p, &one) < 0) {
            if (rc == 0 && err != NULL)
                *err = kiwi_error_steal (&one);
            kiwi_error_free (&one);
            rc = -1;
        } else if (removed)
            (*removed)++;
    }
    closedir (dir);
    return rc;
}
