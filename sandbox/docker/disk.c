/*
 * disk.c: a loop-mounted ext4 file per sandbox, as the disk ceiling (see
 * disk.h for why).
 */
#include "sandbox/docker/disk.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/cleanup.h"
#include "common/proc.h"

struct kiwi_disk {
    char *dir;   /* <state>/sandboxes/<name> */
    char *image; /* dir/disk.img */
    char *mnt;   /* dir/mnt: the ext4 itself, or the overlay over `lower` */
    char *fs;    /* dir/fs: where the ext4 is mounted under an overlay */
    char *lower; /* dir/lower: where a lower image is mounted */
    int mounted;
    bool lower_used; /* mnt is an overlay over a lower layer, the ext4 at fs */
};

/* Unmounts and removes the directory `dir`/`leaf` (lazy: a sandbox that is
 * still being torn down must not pin the mount). */
static int
unmount_leaf (const char *dir, const char *leaf, kiwi_error_t *err)
{
    char mnt[PATH_MAX + 300];
    snprintf (mnt, sizeof mnt, "%s/%s", dir, leaf);
    if (umount2 (mnt, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
        return kiwi_error_make (err, errno, "unmounting %s", mnt);
    if (rmdir (mnt) < 0 && errno != ENOENT)
        return kiwi_error_make (err, errno, "removing %s", mnt);
    return 0;
}

static int
unmount_and_remove (const char *dir, kiwi_error_t *err)
{
    char img[PATH_MAX + 300];
    snprintf (img, sizeof img, "%s/disk.img", dir);
    /* the overlay (when there is one) first, then what is under it */
    if (unmount_leaf (dir, "mnt", err) < 0 || unmount_leaf (dir, "lower", err) < 0
        || unmount_leaf (dir, "fs", err) < 0)
        return -1;
    if (unlink (img) < 0 && errno != ENOENT)
        return kiwi_error_make (err, errno, "removing %s", img);
    if (rmdir (dir) < 0 && errno != ENOENT)
        return kiwi_error_make (err, errno, "removing %s", dir);
    return 0;
}

/* True for a path overlayfs's option string can carry as it is. */
static bool
overlay_safe_path (const char *p)
{
    return p[0] == '/' && strpbrk (p, ",:\\\n") == NULL;
}

/* Makes `parent`/`leaf` as a directory owned by uid:gid. */
static int
make_owned (const char *parent, const char *leaf, uid_t uid, gid_t gid, kiwi_error_t *err)
{
    char p[PATH_MAX + 300];
    snprintf (p, sizeof p, "%s/%s", parent, leaf);
    if ((mkdir (p, 0755) < 0 && errno != EEXIST) || chown (p, uid, gid) < 0)
        return kiwi_error_make (err, errno, "preparing %s", p);
    return 0;
}

/* Mounts the squashfs image `image` read-only at d->lower (a loop device
 * of its own, freed by the kernel at the last unmount). */
static int
mount_image (kiwi_disk *d, const char *image, kiwi_error_t *err)
{
    if (mkdir (d->lower, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", d->lower);
    const char *argv[] = { "mount", "-t", "squashfs", "-o", "loop,ro,nosuid,nodev", image, d->lower, NULL };
    if (kiwi_proc_check (argv, NULL, NULL, 60000, err) < 0)
        return kiwi_error_wrap (err, "mounting the dependency image %s", image);
    return 0;
}

/* Mounts the overlay at d->mnt: `lower` (a directory, or a squashfs image
 * mounted first) read-only under it, the upper and work directories on the
 * ext4 at d->fs (so every write, copy-ups included, counts against the disk
 * ceiling). */
static int
mount_overlay (kiwi_disk *d, const char *lower, uid_t uid, gid_t gid, kiwi_error_t *err)
{
    struct stat st;
    if (stat (lower, &st) < 0)
        return kiwi_error_make (err, errno, "reading %s", lower);
    if (S_ISREG (st.st_mode)) {
        if (mount_image (d, lower, err) < 0)
            return -1;
        lower = d->lower;
    }
    if (!overlay_safe_path (lower) || !overlay_safe_path (d->fs))
        return kiwi_error_make (err, EINVAL, "%s or %s cannot be an overlay's directory (',', ':' or '\\')", lower,
                                d->fs);
    if (make_owned (d->fs, "upper", uid, gid, err) < 0 || make_owned (d->fs, "work", 0, 0, err) < 0)
        return -1;
    char upper[PATH_MAX + 16];
    snprintf (upper, sizeof upper, "%s/upper", d->fs);
    static const char *const subdirs[] = { "src", "home", "tmp" };
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++)
        if (make_owned (upper, subdirs[i], uid, gid, err) < 0)
            return -1;
    if (mkdir (d->mnt, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", d->mnt);
    cleanup_free char *opts = NULL;
    if (asprintf (&opts, "lowerdir=%s,upperdir=%s/upper,workdir=%s/work", lower, d->fs, d->fs) < 0)
        return kiwi_error_make (err, ENOMEM, "overlay options");
    if (mount ("overlay", d->mnt, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
        return kiwi_error_make (err, errno, "mounting the overlay over %s at %s", lower, d->mnt);
    return 0;
}

int
kiwi_disk_create (const char *state_dir, const char *name, int64_t size_mb, uid_t uid, gid_t gid, const char *lower,
                  kiwi_disk **out, kiwi_error_t *err)
{
    if (size_mb < 16)
        return kiwi_error_make (err, 0, "disk ceiling of %lld MB is below the minimum of 16 MB",
                                (long long) size_mb);
    kiwi_disk *d = calloc (1, sizeof *d);
    if (d == NULL || asprintf (&d->dir, "%s/sandboxes/%s", state_dir, name) < 0
        || asprintf (&d->image, "%s/disk.img", d->dir) < 0 || asprintf (&d->mnt, "%s/mnt", d->dir) < 0
        || asprintf (&d->fs, "%s/fs", d->dir) < 0 || asprintf (&d->lower, "%s/lower", d->dir) < 0) {
        kiwi_disk_destroy (d, NULL);
        return kiwi_error_make (err, ENOMEM, "disk for sandbox %s", name);
    }
    /* without a lower directory the ext4 itself is what the sandbox sees */
    const char *fs = lower != NULL ? d->fs : d->mnt;
    if (kiwi_fs_mkdir_p (fs, 0700) < 0) {
        kiwi_error_make (err, errno, "creating %s", fs);
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
    const char *mount_argv[] = { "mount", "-t", "ext4", "-o", "loop,nosuid,nodev", d->image, fs, NULL };
    if (kiwi_proc_check (mount_argv, NULL, NULL, 60000, err) < 0) {
        kiwi_error_wrap (err, "mounting the sandbox disk (needs root and loop devices)");
        goto fail;
    }
    d->mounted = 1;
    char lf[PATH_MAX];
    snprintf (lf, sizeof lf, "%s/lost+found", fs);
    rmdir (lf);
    if (lower != NULL) {
        d->lower_used = true;
        if (mount_overlay (d, lower, uid, gid, err) < 0)
            goto fail;
    } else {
        static const char *const subdirs[] = { "src", "home", "tmp" };
        for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++)
            if (make_owned (d->mnt, subdirs[i], uid, gid, err) < 0)
                goto fail;
    }
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
kiwi_disk_volume_dir (kiwi_disk *d, size_t index, uid_t uid, gid_t gid, char **path, kiwi_error_t *err)
{
    *path = NULL;
    /* the ext4's root: fs under an overlay, else mnt itself */
    const char *root = d->lower_used ? d->fs : d->mnt;
    char parent[PATH_MAX + 16];
    snprintf (parent, sizeof parent, "%s/.volumes", root);
    if (mkdir (parent, 0755) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", parent);
    char leaf[32];
    snprintf (leaf, sizeof leaf, "%zu", index);
    if (make_owned (parent, leaf, uid, gid, err) < 0)
        return -1;
    if (asprintf (path, "%s/%s", parent, leaf) < 0) {
        *path = NULL;
        return kiwi_error_make (err, ENOMEM, "volume directory %zu", index);
    }
    return 0;
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
    free (d->fs);
    free (d->lower);
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
