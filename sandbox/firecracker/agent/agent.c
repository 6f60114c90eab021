/*
 * agent.c: the requests kiwi-fc-agent answers (see agent.h and proto.h).
 *
 * exec: the command runs in a process group of its own, with the request's
 * environment as its whole environment, as the request's user, in its
 * working directory, with stdin from /dev/null. Its stdout and stderr are
 * sent as they come; at the deadline the whole group is killed; the host
 * hanging up kills it too. Whether the kernel's OOM killer ran meanwhile
 * is read from /proc/vmstat (oom_kill), the guest being the sandbox.
 *
 * put/get: tar streams through sandbox/archive/, the same hostile-archive
 * checks as on the host. Files are unpacked with the sandbox user's
 * credentials, so they are owned by it and go nowhere it could not write.
 */
#include "sandbox/firecracker/agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/archive/archive.h"
#include "common/cleanup.h"
#include "sandbox/firecracker/agent/proto.h"
#include "common/strv.h"

extern char **environ;

/* ----- users ----- */

/* Finds `name` (or the number `id` when name is NULL) in a passwd/group
 * style file; returns the line's third and fourth fields. */
static bool
lookup_db (const char *path, const char *name, long id, long *f3, long *f4)
{
    cleanup_fclose FILE *f = fopen (path, "re");
    if (f == NULL)
        return false;
    char line[1024];
    while (fgets (line, sizeof line, f)) {
        char *save = NULL;
        char *n = strtok_r (line, ":", &save);
        strtok_r (NULL, ":", &save); /* password */
        char *a = strtok_r (NULL, ":", &save);
        char *b = strtok_r (NULL, ":\n", &save);
        if (n == NULL || a == NULL)
            continue;
        if ((name != NULL && strcmp (n, name) == 0) || (name == NULL && atol (a) == id)) {
            *f3 = atol (a);
            *f4 = b ? atol (b) : -1;
            return true;
        }
    }
    return false;
}

static bool
parse_num (const char *s, long *out)
{
    if (*s == '\0')
        return false;
    char *end = NULL;
    errno = 0;
    long v = strtol (s, &end, 10);
    if (errno || *end || v < 0)
        return false;
    *out = v;
    return true;
}

int
kiwi_agent_resolve_user (const char *root, const char *spec, uid_t *uid, gid_t *gid, kiwi_error_t *err)
{
    char passwd[PATH_MAX], group[PATH_MAX];
    snprintf (passwd, sizeof passwd, "%s/etc/passwd", root ? root : "");
    snprintf (group, sizeof group, "%s/etc/group", root ? root : "");
    char u[256];
    snprintf (u, sizeof u, "%s", spec);
    char *g = strchr (u, ':');
    if (g)
        *g++ = '\0';
    long uid_v, gid_v = -1, primary = -1, tmp;
    if (parse_num (u, &uid_v))
        primary = uid_v;
    else if (lookup_db (passwd, u, 0, &uid_v, &primary))
        ;
    else
        return kiwi_error_make (err, 0, "unknown user `%s` (not a number, not in %s)", u, passwd);
    if (g == NULL || *g == '\0')
        gid_v = primary;
    else if (!parse_num (g, &gid_v)) {
        if (!lookup_db (group, g, 0, &gid_v, &tmp))
            return kiwi_error_make (err, 0, "unknown group `%s` (not a number, not in %s)", g, group);
    }
    *uid = (uid_t) uid_v;
    *gid = (gid_t) gid_v;
    return 0;
}

/* Drops to uid/gid when running as root and the user differs. */
static int
become (uid_t uid, gid_t gid)
{
    if (geteuid () != 0)
        return uid == geteuid () ? 0 : -1;
    if (setgroups (0, NULL) < 0 || setgid (gid) < 0 || setuid (uid) < 0)
        return -1;
    return 0;
}

/* ----- exec ----- */

static long
oom_kills (void)
{
    cleanup_fclose FILE *f = fopen ("/proc/vmstat", "re");
    if (f == NULL)
        return -1;
    char key[64];
    long v;
    while (fscanf (f, "%63s %ld", key, &v) == 2)
        if (strcmp (key, "oom_kill") == 0)
            return v;
    return -1;
}

/* True when the host closed its end (or sent something it must not). */
static bool
host_gone (int fd)
{
    char c;
    ssize_t r = recv (fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && errno == ENOTSOCK)
        r = read (fd, &c, 0) == 0 ? 1 : -1;
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) || r > 0;
}

static void
exec_child (int out, int errfd, const char *const *argv, char **envv, const char *workdir, bool have_user,
            uid_t uid, gid_t gid, long nproc)
{
    setpgid (0, 0);
    signal (SIGPIPE, SIG_DFL);
    int devnull = open ("/dev/null", O_RDONLY);
    if (devnull >= 0 && devnull != 0) {
        dup2 (devnull, 0);
        close (devnull);
    }
    dup2 (out, 1);
    dup2 (errfd, 2);
    if (nproc > 0) {
        struct rlimit rl = { (rlim_t) nproc, (rlim_t) nproc };
        setrlimit (RLIMIT_NPROC, &rl);
    }
    if (have_user && become (uid, gid) < 0) {
        dprintf (2, "kiwi-fc-agent: cannot become %u:%u: %s\n", (unsigned) uid, (unsigned) gid, strerror (errno));
        _exit (126);
    }
    if (chdir (workdir) < 0) {
        dprintf (2, "kiwi-fc-agent: cannot enter the working directory %s: %s\n", workdir, strerror (errno));
        _exit (126);
    }
    environ = envv;
    execvp (argv[0], (char *const *) argv);
    int e = errno;
    dprintf (2, "kiwi-fc-agent: cannot run `%s`: %s\n", argv[0], strerror (e));
    _exit (e == ENOENT ? 127 : 126);
}

static int
send_exit (int fd, int code, int sig, bool timed_out, bool oom)
{
    cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
    kiwi_error_t e = NULL;
    int rc = -1;
    if (kiwi_fcp_put_int (&b, KIWI_FCF_CODE, code, &e) == 0 && kiwi_fcp_put_int (&b, KIWI_FCF_SIGNAL, sig, &e) == 0
        && kiwi_fcp_put_int (&b, KIWI_FCF_TIMED_OUT, timed_out, &e) == 0
        && kiwi_fcp_put_int (&b, KIWI_FCF_OOM, oom, &e) == 0)
        rc = kiwi_fcp_send (fd, KIWI_FCP_EXIT, b.data, b.len, &e);
    kiwi_error_free (&e);
    return rc;
}

/* Forwards what is readable on *pfd as `type` frames; closes it at EOF.
 * Returns < 0 when the host cannot be written to. */
static int
forward (int conn, int *pfd, int type, char *buf)
{
    ssize_t r = read (*pfd, buf, KIWI_FCP_CHUNK);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (r <= 0) {
        close (*pfd);
        *pfd = -1;
        return 0;
    }
    kiwi_error_t e = NULL;
    int rc = kiwi_fcp_send (conn, type, buf, (size_t) r, &e);
    kiwi_error_free (&e);
    return rc;
}

static int
do_exec (int fd, const kiwi_fcp_frame *req, const kiwi_agent_config *cfg)
{
    cleanup_strv kiwi_strv argv = KIWI_STRV_INIT;
    cleanup_strv kiwi_strv envv = KIWI_STRV_INIT;
    size_t pos = 0;
    int tag;
    const char *v;
    size_t n;
    kiwi_error_t e = NULL;
    int frc;
    while ((frc = kiwi_fcp_next_field (req->payload, req->len, &pos, &tag, &v, &n, &e)) == 1) {
        if (tag == KIWI_FCF_ARG || tag == KIWI_FCF_ENV) {
            char *s = strndup (v, n);
            if (s == NULL || kiwi_strv_take (tag == KIWI_FCF_ARG ? &argv : &envv, s) < 0)
                return kiwi_fcp_send_error (fd, ENOMEM, "exec: out of memory");
        }
    }
    if (frc < 0) {
        int rc = kiwi_fcp_send_error (fd, EPROTO, "exec: %s", kiwi_error_msg (e));
        kiwi_error_free (&e);
        return rc;
    }
    if (argv.n == 0)
        return kiwi_fcp_send_error (fd, EINVAL, "exec: empty command");
    cleanup_free char *workdir = kiwi_fcp_get_str (req, KIWI_FCF_WORKDIR);
    cleanup_free char *user = kiwi_fcp_get_str (req, KIWI_FCF_USER);
    int64_t timeout_ms = kiwi_fcp_get_int (req, KIWI_FCF_TIMEOUT_MS, 0);
    long nproc = (long) kiwi_fcp_get_int (req, KIWI_FCF_NPROC, 0);
    const char *who = user ? user : cfg->default_user;
    uid_t uid = 0;
    gid_t gid = 0;
    if (who != NULL && kiwi_agent_resolve_user (NULL, who, &uid, &gid, &e) < 0) {
        int rc = kiwi_fcp_send_error (fd, EINVAL, "exec: %s", kiwi_error_msg (e));
        kiwi_error_free (&e);
        return rc;
    }
    const char *wd = workdir ? workdir : cfg->default_workdir ? cfg->default_workdir : "/";

    int po[2], pe[2];
    if (pipe2 (po, O_CLOEXEC) < 0)
        return kiwi_fcp_send_error (fd, errno, "exec: pipe: %s", strerror (errno));
    if (pipe2 (pe, O_CLOEXEC) < 0) {
        int en = errno;
        close (po[0]);
        close (po[1]);
        return kiwi_fcp_send_error (fd, en, "exec: pipe: %s", strerror (en));
    }
    long oom_before = oom_kills ();
    /* the environment list must exist even when empty */
    char *empty_env[] = { NULL };
    char **env = envv.n ? envv.v : empty_env;
    pid_t pid = fork ();
    if (pid < 0) {
        int en = errno;
        close (po[0]);
        close (po[1]);
        close (pe[0]);
        close (pe[1]);
        return kiwi_fcp_send_error (fd, en, "exec: fork: %s", strerror (en));
    }
    if (pid == 0)
        exec_child (po[1], pe[1], kiwi_strv_list (&argv), env, wd, who != NULL, uid, gid, nproc);
    setpgid (pid, pid); /* also from here: no race with the kill below */
    close (po[1]);
    close (pe[1]);
    int outfd = po[0], errfd = pe[0];
    int64_t start = kiwi_fcp_now_ms ();
    int64_t deadline = timeout_ms > 0 ? start + timeout_ms : 0;
    bool exited = false, timed_out = false, lost = false;
    int status = 0;
    int64_t exited_at = 0;
    char *buf = malloc (KIWI_FCP_CHUNK);
    if (buf == NULL) {
        kill (-pid, SIGKILL);
        lost = true;
    }
    while (!lost) {
        if (!exited && waitpid (pid, &status, WNOHANG) == pid) {
            exited = true;
            exited_at = kiwi_fcp_now_ms ();
        }
        int64_t now = kiwi_fcp_now_ms ();
        if (exited && outfd < 0 && errfd < 0)
            break;
        /* processes left in the background may hold the pipes: a short
         * grace for the last output, then the command is over */
        if (exited && now - exited_at > 200)
            break;
        if (!exited && deadline && now >= deadline) {
            kill (-pid, SIGKILL);
            waitpid (pid, &status, 0);
            exited = timed_out = true;
            break;
        }
        struct pollfd p[3] = { { .fd = fd, .events = POLLIN }, { .fd = outfd, .events = POLLIN },
                               { .fd = errfd, .events = POLLIN } };
        int wait = 100;
        if (deadline && deadline - now < wait)
            wait = (int) (deadline - now);
        if (poll (p, 3, wait < 0 ? 0 : wait) < 0 && errno != EINTR)
            break;
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && host_gone (fd)) {
            lost = true;
            break;
        }
        if (outfd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))
            && forward (fd, &outfd, KIWI_FCP_STDOUT, buf) < 0)
            lost = true;
        if (errfd >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR))
            && forward (fd, &errfd, KIWI_FCP_STDERR, buf) < 0)
            lost = true;
    }
    free (buf);
    if (outfd >= 0)
        close (outfd);
    if (errfd >= 0)
        close (errfd);
    if (lost) {
        kill (-pid, SIGKILL);
        if (!exited)
            waitpid (pid, &status, 0);
        return -1;
    }
    long oom_after = oom_kills ();
    int code = -1, sig = 0;
    if (WIFEXITED (status))
        code = WEXITSTATUS (status);
    else if (WIFSIGNALED (status)) {
        sig = WTERMSIG (status);
        code = 128 + sig;
    }
    bool oom = oom_before >= 0 && oom_after > oom_before;
    return send_exit (fd, code, sig, timed_out, oom);
}

/* ----- put ----- */

static int
do_put (int fd, const kiwi_fcp_frame *req, const kiwi_agent_config *cfg)
{
    cleanup_free char *dir = kiwi_fcp_get_str (req, KIWI_FCF_PATH);
    cleanup_free char *user = kiwi_fcp_get_str (req, KIWI_FCF_USER);
    cleanup_buf kiwi_buf tar = KIWI_BUF_INIT;
    kiwi_fcp_frame f = { 0 };
    kiwi_error_t e = NULL;
    bool too_big = false;
    for (;;) {
        int rc = kiwi_fcp_recv (fd, 0, &f, &e);
        if (rc <= 0 || f.type != KIWI_FCP_DATA) {
            kiwi_error_free (&e);
            kiwi_fcp_frame_clear (&f);
            return -1;
        }
        if (f.len == 0)
            break;
        if (too_big || tar.len + f.len > KIWI_ARCHIVE_DEFAULT_MAX_BYTES) {
            too_big = true;
            continue;
        }
        if (kiwi_buf_append (&tar, f.payload, f.len, &e) < 0) {
            kiwi_error_free (&e);
            too_big = true;
        }
    }
    kiwi_fcp_frame_clear (&f);
    if (dir == NULL || *dir != '/')
        return kiwi_fcp_send_error (fd, EINVAL, "put: the directory must be an absolute path");
    if (too_big)
        return kiwi_fcp_send_error (fd, EFBIG, "put: the archive is over %zu bytes or memory ran out",
                                    KIWI_ARCHIVE_DEFAULT_MAX_BYTES);
    const char *who = user ? user : cfg->default_user;
    if (who != NULL) {
        uid_t uid;
        gid_t gid;
        if (kiwi_agent_resolve_user (NULL, who, &uid, &gid, &e) < 0) {
            int rc = kiwi_fcp_send_error (fd, EINVAL, "put: %s", kiwi_error_msg (e));
            kiwi_error_free (&e);
            return rc;
        }
        if (become (uid, gid) < 0)
            return kiwi_fcp_send_error (fd, errno, "put: cannot become %s: %s", who, strerror (errno));
    }
    struct stat st;
    if (stat (dir, &st) < 0 || !S_ISDIR (st.st_mode))
        return kiwi_fcp_send_error (fd, ENOENT, "put: no directory %s in the sandbox", dir);
    if (kiwi_archive_extract (tar.data, tar.len, dir, NULL, NULL, &e) < 0) {
        int rc = kiwi_fcp_send_error (fd, kiwi_error_msg (e) && strstr (kiwi_error_msg (e), "No space") ? ENOSPC : EIO,
                                      "put: unpacking into %s: %s", dir, kiwi_error_msg (e));
        kiwi_error_free (&e);
        return rc;
    }
    return kiwi_fcp_send (fd, KIWI_FCP_OK, NULL, 0, &e) < 0 ? (kiwi_error_free (&e), -1) : 0;
}

/* ----- get ----- */

static int
read_file (const char *path, kiwi_buf *out, kiwi_error_t *err)
{
    cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return kiwi_error_make (err, errno, "opening %s", path);
    char buf[65536];
    for (;;) {
        ssize_t r = read (fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return kiwi_error_make (err, errno, "reading %s", path);
        if (r == 0)
            return 0;
        if (out->len + (size_t) r > KIWI_ARCHIVE_DEFAULT_MAX_BYTES)
            return kiwi_error_make (err, EFBIG, "%s is over %zu bytes", path, KIWI_ARCHIVE_DEFAULT_MAX_BYTES);
        if (kiwi_buf_append (out, buf, (size_t) r, err) < 0)
            return -1;
    }
}

/* Packs `path` the way Docker's GET /archive does: the entry names start
 * with the path's last component. */
static int
pack (const char *path, kiwi_buf *tar, kiwi_error_t *err)
{
    char trimmed[PATH_MAX];
    snprintf (trimmed, sizeof trimmed, "%s", path);
    size_t tl = strlen (trimmed);
    while (tl > 1 && trimmed[tl - 1] == '/')
        trimmed[--tl] = '\0';
    const char *base = strrchr (trimmed, '/');
    base = base && base[1] ? base + 1 : trimmed;
    struct stat st;
    if (lstat (trimmed, &st) < 0)
        return kiwi_error_make (err, errno, "%s", trimmed);
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    o.uid = (uint32_t) st.st_uid;
    o.gid = (uint32_t) st.st_gid;
    if (S_ISDIR (st.st_mode)) {
        o.prefix = strcmp (trimmed, "/") == 0 ? NULL : base;
        return kiwi_archive_from_dir (trimmed, &o, tar, NULL, err);
    }
    o.mtime_mode = KIWI_ARCHIVE_MTIME_FIXED;
    o.mtime = (int64_t) st.st_mtime;
    if (S_ISLNK (st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlink (trimmed, target, sizeof target - 1);
        if (n < 0)
            return kiwi_error_make (err, errno, "reading the link %s", trimmed);
        target[n] = '\0';
        if (kiwi_archive_add_symlink (tar, base, target, &o, err) < 0)
            return -1;
    } else if (S_ISREG (st.st_mode)) {
        cleanup_buf kiwi_buf data = KIWI_BUF_INIT;
        if (read_file (trimmed, &data, err) < 0)
            return -1;
        if (kiwi_archive_add_file (tar, base, data.data, data.len, (int) (st.st_mode & 0777), &o, err) < 0)
            return -1;
    } else
        return kiwi_error_make (err, 0, "%s is not a file, directory or symlink", trimmed);
    return kiwi_archive_finish (tar, err);
}

static int
do_get (int fd, const kiwi_fcp_frame *req)
{
    cleanup_free char *path = kiwi_fcp_get_str (req, KIWI_FCF_PATH);
    if (path == NULL || *path != '/')
        return kiwi_fcp_send_error (fd, EINVAL, "get: the path must be absolute");
    cleanup_buf kiwi_buf tar = KIWI_BUF_INIT;
    kiwi_error_t e = NULL;
    if (pack (path, &tar, &e) < 0) {
        int en = (*e).errno_;
        int rc = kiwi_fcp_send_error (fd, en, "get: %s", kiwi_error_msg (e));
        kiwi_error_free (&e);
        return rc;
    }
    for (size_t off = 0; off < tar.len; off += KIWI_FCP_CHUNK) {
        size_t n = tar.len - off < KIWI_FCP_CHUNK ? tar.len - off : KIWI_FCP_CHUNK;
        if (kiwi_fcp_send (fd, KIWI_FCP_DATA, tar.data + off, n, &e) < 0) {
            kiwi_error_free (&e);
            return -1;
        }
    }
    if (kiwi_fcp_send (fd, KIWI_FCP_DATA, NULL, 0, &e) < 0) {
        kiwi_error_free (&e);
        return -1;
    }
    return 0;
}

/* ----- dispatch ----- */

int
kiwi_agent_serve (int fd, const kiwi_agent_config *cfg)
{
    kiwi_fcp_frame req = { 0 };
    kiwi_error_t e = NULL;
    int rc = kiwi_fcp_recv (fd, 0, &req, &e);
    if (rc <= 0) {
        if (rc < 0 && kiwi_error_code (e) == KIWI_FCP_EPROTO)
            kiwi_fcp_send_error (fd, EPROTO, "%s", kiwi_error_msg (e));
        kiwi_error_free (&e);
        kiwi_fcp_frame_clear (&req);
        return -1;
    }
    switch (req.type) {
    case KIWI_FCP_HELLO: {
        kiwi_buf b = KIWI_BUF_INIT;
        rc = kiwi_fcp_put_str (&b, KIWI_FCF_VERSION, KIWI_FCP_VERSION, &e);
        if (rc == 0)
            rc = kiwi_fcp_send (fd, KIWI_FCP_OK, b.data, b.len, &e);
        kiwi_buf_free (&b);
        kiwi_error_free (&e);
        break;
    }
    case KIWI_FCP_EXEC:
        rc = do_exec (fd, &req, cfg);
        break;
    case KIWI_FCP_PUT:
        rc = do_put (fd, &req, cfg);
        break;
    case KIWI_FCP_GET:
        rc = do_get (fd, &req);
        break;
    default:
        rc = kiwi_fcp_send_error (fd, EPROTO, "a %s frame is not a request", kiwi_fcp_type_str (req.type));
    }
    kiwi_fcp_frame_clear (&req);
    return rc < 0 ? -1 : 0;
}
