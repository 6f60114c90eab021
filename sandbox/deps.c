/*
 * deps.c: a dependency snapshot made into a squashfs image once per key
 * (see deps.h).
 *
 * The image is written by tar2sqfs (Debian's squashfs-tools-ng); what it
 * reads is a tar stream Kiwi writes itself (kiwi_archive_rewrite()), never
 * the snapshot's own tars, and it runs as nobody, so a tool that was not
 * written for hostile input only ever sees clean names, owners and modes.
 * The pump below is hand-written because kiwi_proc_run() takes no input:
 * the stream goes over a socket (MSG_NOSIGNAL: a tar2sqfs that died is an
 * error, not a SIGPIPE) while its messages are read from a pipe, with one
 * deadline for both.
 */
#include "sandbox/deps.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/archive/archive.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/proc.h"
#include "common/cleanup.h"

#define NOBODY 65534
#define BUILD_TIMEOUT_MS (10 * 60 * 1000)
#define MESSAGES_CAP 4096

/* The running tar2sqfs: its input, its messages, the deadline. */
typedef struct pump {
    pid_t pid;
    int in;             /* our end of its stdin (a socket) */
    int msgs;           /* its stdout and stderr */
    char said[MESSAGES_CAP + 1];
    size_t said_len;
    long deadline;
    char buf[1 << 18];  /* small entries are gathered before a send */
    size_t fill;
} pump;

/* Reads what tar2sqfs printed, keeping the first MESSAGES_CAP bytes. */
static void
drain_messages (pump *p)
{
    char chunk[4096];
    ssize_t r;
    while ((r = read (p->msgs, chunk, sizeof chunk)) > 0) {
        size_t room = MESSAGES_CAP - p->said_len;
        size_t n = (size_t) r < room ? (size_t) r : room;
        /* it may quote entry names, which the install chose: printable
         * ASCII only reaches an error message */
        for (size_t i = 0; i < n; i++)
            p->said[p->said_len + i] = chunk[i] >= 0x20 && chunk[i] < 0x7f ? chunk[i] : chunk[i] == '\n' ? ' ' : '?';
        p->said_len += n;
        p->said[p->said_len] = '\0';
    }
    if (r == 0) {
        close (p->msgs);
        p->msgs = -1;
    }
}

static int
send_all (pump *p, const char *data, size_t len, kiwi_error_t *err)
{
    while (len > 0) {
        long left = p->deadline - kiwi_mono_ms ();
        if (left <= 0)
            return kiwi_error_make (err, ETIMEDOUT, "tar2sqfs took longer than %d s", BUILD_TIMEOUT_MS / 1000);
        struct pollfd fds[2] = { { .fd = p->in, .events = POLLOUT }, { .fd = p->msgs, .events = POLLIN } };
        int n = poll (fds, p->msgs >= 0 ? 2 : 1, (int) left);
        if (n < 0 && errno != EINTR)
            return kiwi_error_make (err, errno, "waiting for tar2sqfs");
        if (n <= 0)
            continue;
        if (p->msgs >= 0 && (fds[1].revents & (POLLIN | POLLHUP)))
            drain_messages (p);
        if (!(fds[0].revents & (POLLOUT | POLLERR | POLLHUP)))
            continue;
        ssize_t w = send (p->in, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (w < 0)
            return kiwi_error_make (err, errno, "tar2sqfs stopped reading%s%s", p->said_len ? ": " : "", p->said);
        data += w;
        len -= (size_t) w;
    }
    return 0;
}

static int
flush (pump *p, kiwi_error_t *err)
{
    size_t n = p->fill;
    p->fill = 0;
    return n ? send_all (p, p->buf, n, err) : 0;
}

static int
pump_sink (const void *data, size_t len, void *ud, kiwi_error_t *err)
{
    pump *p = ud;
    if (len <= sizeof p->buf - p->fill) {
        memcpy (p->buf + p->fill, data, len);
        p->fill += len;
        return 0;
    }
    if (flush (p, err) < 0)
        return -1;
    if (len <= sizeof p->buf / 2) {
        memcpy (p->buf, data, len);
        p->fill = len;
        return 0;
    }
    return send_all (p, data, len, err);
}

/* Starts tar2sqfs as nobody, writing the image to `out` (its fd 3). */
static int
pump_start (pump *p, int out, uid_t uid, gid_t gid, kiwi_error_t *err)
{
    int sv[2] = { -1, -1 }, pv[2] = { -1, -1 };
    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || pipe2 (pv, O_CLOEXEC | O_NONBLOCK) < 0) {
        int e = errno;
        if (sv[0] >= 0) {
            close (sv[0]);
            close (sv[1]);
        }
        return kiwi_error_make (err, e, "connecting to tar2sqfs");
    }
    char defaults[96];
    snprintf (defaults, sizeof defaults, "uid=%u,gid=%u,mode=0755,mtime=0", (unsigned) uid, (unsigned) gid);
    const char *argv[] = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--no-new-privs",
                           "tar2sqfs", "--quiet", "--force", "--no-xattr", "--no-skip", "--compressor", "lz4",
                           "--num-jobs", "2", "--defaults", defaults, "/proc/self/fd/3", NULL };
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init (&fa);
    posix_spawnattr_init (&attr);
    posix_spawn_file_actions_adddup2 (&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2 (&fa, pv[1], 1);
    posix_spawn_file_actions_adddup2 (&fa, pv[1], 2);
    posix_spawn_file_actions_adddup2 (&fa, out, 3);
    kiwi_proc_spawnattr_child (&attr);
    /* nothing of the worker's environment (its store password, provider
     * keys) goes to a process of nobody's */
    static const char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL };
    int rc = posix_spawnp (&p->pid, argv[0], &fa, &attr, (char *const *) argv, (char *const *) envp);
    posix_spawn_file_actions_destroy (&fa);
    posix_spawnattr_destroy (&attr);
    close (sv[1]);
    close (pv[1]);
    p->in = sv[0];
    p->msgs = pv[0];
    if (rc != 0) {
        close (p->in);
        close (p->msgs);
        p->in = p->msgs = -1;
        return kiwi_error_make (err, rc, "cannot run setpriv and tar2sqfs (squashfs-tools-ng; ops/setup.sh)");
    }
    p->deadline = kiwi_mono_ms () + BUILD_TIMEOUT_MS;
    return 0;
}

/* Ends the stream, waits for tar2sqfs (killing it on `failed` or at the
 * deadline) and reports how it ended. */
static int
pump_finish (pump *p, bool failed, kiwi_error_t *err)
{
    if (p->in >= 0) {
        shutdown (p->in, SHUT_WR);
        close (p->in);
        p->in = -1;
    }
    if (failed)
        kill (-p->pid, SIGKILL);
    while (p->msgs >= 0) {
        long left = p->deadline - kiwi_mono_ms ();
        if (left <= 0) {
            kill (-p->pid, SIGKILL);
            if (!failed)
                kiwi_error_make (err, ETIMEDOUT, "tar2sqfs took longer than %d s", BUILD_TIMEOUT_MS / 1000);
            failed = true;
            break;
        }
        struct pollfd f = { .fd = p->msgs, .events = POLLIN };
        if (poll (&f, 1, (int) left) > 0)
            drain_messages (p);
    }
    if (p->msgs >= 0)
        close (p->msgs);
    int status = 0;
    while (waitpid (p->pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (failed)
        return -1;
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
        return kiwi_error_make (err, 0, "tar2sqfs failed (status %d)%s%s", status, p->said_len ? ": " : "",
                                p->said);
    return 0;
}

static const unsigned char empty_tar[1024];

/* Maps `dir`/`name` as a part; an empty or absent tar is an empty archive. */
static int
map_part (const char *dir, const char *name, char *path, size_t path_size, kiwi_fs_mapped *m,
          kiwi_rewrite_part *part, kiwi_error_t *err)
{
    snprintf (path, path_size, "%s/%s", dir, name);
    if (kiwi_fs_map (path, true, m, err) < 0)
        return -1;
    *part = (kiwi_rewrite_part) { .tar = m->len ? m->map : empty_tar, .len = m->len ? m->len : sizeof empty_tar,
                                  .what = path };
    return 0;
}

/* Writes the image of the snapshot into the open file `out`. */
static int
build_image (const char *snapshot_dir, int out, uint64_t max_bytes, uid_t uid, gid_t gid, kiwi_error_t *err)
{
    kiwi_fs_mapped maps[2] = { { 0 }, { 0 } };
    char paths[2][PATH_MAX];
    kiwi_rewrite_part parts[2];
    int rc = -1;
    pump *p = NULL;
    if (map_part (snapshot_dir, "src.tar", paths[0], sizeof paths[0], &maps[0], &parts[0], err) < 0
        || map_part (snapshot_dir, "home.tar", paths[1], sizeof paths[1], &maps[1], &parts[1], err) < 0)
        goto out;
    if ((p = calloc (1, sizeof *p)) == NULL) {
        kiwi_error_make (err, ENOMEM, "dependency image");
        goto out;
    }
    if (fchown (out, NOBODY, NOBODY) < 0) {
        kiwi_error_make (err, errno, "handing the image file to tar2sqfs");
        goto out;
    }
    if (pump_start (p, out, uid, gid, err) < 0)
        goto out;
    kiwi_extract_opts o = { .max_bytes = max_bytes > 0 ? (size_t) max_bytes : SIZE_MAX, .max_entries = SIZE_MAX / 2 };
    bool failed = kiwi_archive_rewrite (parts, 2, (uint32_t) uid, (uint32_t) gid, &o, pump_sink, p, NULL, err) < 0
                  || flush (p, err) < 0;
    if (pump_finish (p, failed, err) < 0) {
        kiwi_error_wrap (err, "making the dependency image");
        goto out;
    }
    if (fchown (out, 0, 0) < 0 || fchmod (out, 0644) < 0 || fsync (out) < 0) {
        kiwi_error_make (err, errno, "keeping the dependency image");
        goto out;
    }
    rc = 0;
out:
    kiwi_fs_unmap (&maps[0]);
    kiwi_fs_unmap (&maps[1]);
    free (p);
    return rc;
}

/* Removes what earlier workers left in the snapshot directory: the tree
 * extracted before images (`deps/`), and partial images and trees of
 * processes that no longer run (a worker killed while making one). */
static void
drop_leftovers (const char *snapshot_dir)
{
    DIR *d = opendir (snapshot_dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir (d)) != NULL) {
        char p[PATH_MAX];
        int pid = 0;
        if (strcmp (e->d_name, "deps") == 0)
            pid = -1;
        else if (sscanf (e->d_name, KIWI_DEPS_IMAGE ".%d.", &pid) != 1 && sscanf (e->d_name, "deps.%d.", &pid) != 1)
            continue;
        if (strstr (e->d_name, ".partial") == NULL && pid != -1)
            continue;
        if (pid > 0 && (kill (pid, 0) == 0 || errno != ESRCH))
            continue; /* still being made */
        snprintf (p, sizeof p, "%s/%s", snapshot_dir, e->d_name);
        if (unlink (p) < 0 && errno == EISDIR)
            kiwi_fs_remove_tree (p, 600000, NULL);
    }
    closedir (d);
}

int
kiwi_deps_prepare (const char *snapshot_dir, uint64_t max_bytes, uid_t uid, gid_t gid, char **lower,
                   kiwi_error_t *err)
{
    *lower = NULL;
    cleanup_free char *final = NULL, *tmp = NULL;
    if (asprintf (&final, "%s/" KIWI_DEPS_IMAGE, snapshot_dir) < 0
        || asprintf (&tmp, "%s/" KIWI_DEPS_IMAGE ".%d.%lu.partial", snapshot_dir, (int) getpid (),
                     (unsigned long) pthread_self ())
               < 0)
        return kiwi_error_make (err, ENOMEM, "dependency image");
    struct stat st;
    if (lstat (final, &st) == 0 && S_ISREG (st.st_mode)) {
        *lower = steal_pointer (&final);
        return 0;
    }
    unlink (tmp);
    cleanup_close int out = open (tmp, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return kiwi_error_make (err, errno, "creating %s", tmp);
    if (build_image (snapshot_dir, out, max_bytes, uid, gid, err) < 0) {
        unlink (tmp);
        return -1;
    }
    /* concurrent tasks of one key make the same image: any rename may win */
    if (rename (tmp, final) < 0) {
        int e = errno;
        unlink (tmp);
        return kiwi_error_make (err, e, "keeping %s", final);
    }
    drop_leftovers (snapshot_dir);
    *lower = steal_pointer (&final);
    return 0;
}
