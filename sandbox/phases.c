/*
 * phases.c: Phase A (install) and Phase B (verify), and the environments
 * each may see. See phases.h and docs/isolation.md.
 */
#include "sandbox/phases.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/archive/archive.h"
#include "sandbox/deps.h"
#include "sandbox/install-reason.h"
#include "common/cleanup.h"
#include "common/fs.h"
#include "common/clock.h"
#include "inspect/lockfile/lockfile.h"
#include "common/log.h"


const char *
kiwi_install_status_str (kiwi_install_status s)
{
    switch (s) {
    case KIWI_INSTALL_OK:
        return "ok";
    case KIWI_INSTALL_SKIPPED:
        return "skipped";
    case KIWI_INSTALL_FAILED:
        return "failed";
    case KIWI_INSTALL_TIMED_OUT:
        return "timed_out";
    case KIWI_INSTALL_KILLED:
        return "killed";
    }
    return "unknown";
}

void
kiwi_install_result_clear (kiwi_install_result *r)
{
    free (r->output);
    r->output = NULL;
}

typedef struct {
    kiwi_buf *manifest;
    kiwi_error_t *err;
} manifest_ctx;

static int
manifest_add (const kiwi_tar_entry *e, void *ud, kiwi_error_t *err)
{
    manifest_ctx *m = ud;
    if (e->type == KIWI_TAR_DIR)
        return 0;
    if (kiwi_buf_append (m->manifest, e->name, strlen (e->name) + 1, err) < 0)
        return -1;
    return 0;
}

/* A relative symlink whose target climbs out of the tree: dockerd refuses a
 * whole archive that holds one ("invalid symlink"), and inside the sandbox
 * it could only point at nothing of the repository's. Left out, logged. */
static bool
escaping_link (const char *relpath, const struct stat *st, void *ud)
{
    if (!S_ISLNK (st->st_mode))
        return false;
    const char *root = ud;
    char path[PATH_MAX], target[PATH_MAX];
    snprintf (path, sizeof path, "%s/%s", root, relpath);
    ssize_t n = readlink (path, target, sizeof target - 1);
    if (n <= 0)
        return false;
    target[n] = '\0';
    if (target[0] == '/')
        return false; /* absolute: a link into the sandbox's own filesystem */
    int depth = 0;
    for (const char *p = relpath; *p; p++)
        if (*p == '/')
            depth++;
    for (const char *p = target; *p;) {
        size_t l = strcspn (p, "/");
        if (l == 2 && p[0] == '.' && p[1] == '.')
            depth--;
        else if (!(l == 1 && p[0] == '.') && l > 0)
            depth++;
        if (depth < 0) {
            kiwi_warn ("leaving out %s: a symlink to %s, outside the repository", relpath, target);
            return true;
        }
        p += l;
        while (*p == '/')
            p++;
    }
    return false;
}

/* The repository's tree as a tar: symlinks stay symlinks, .git stays out. */
static int
pack_tree (const char *host_dir, kiwi_buf *tar, kiwi_error_t *err)
{
    static const char *const exclude[] = { ".git", NULL };
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    o.exclude = exclude;
    o.exclude_fn = escaping_link;
    o.exclude_userdata = (void *) host_dir;
    if (kiwi_archive_from_dir (host_dir, &o, tar, NULL, err) < 0)
        return kiwi_error_wrap (err, "packing %s", host_dir);
    return 0;
}

/* Leaves out every entry but the input files and the directories that
 * lead to them (input files are regular files: kiwi_install_hashed_files). */
typedef struct {
    const char *const *input;
} input_filter;

static bool
not_input (const char *relpath, const struct stat *st, void *ud)
{
    const input_filter *f = ud;
    if (strncmp (relpath, "./", 2) == 0)
        relpath += 2;
    size_t rl = strlen (relpath);
    for (size_t i = 0; f->input[i]; i++) {
        const char *in = f->input[i];
        if (S_ISREG (st->st_mode) && strcmp (in, relpath) == 0)
            return false;
        if (S_ISDIR (st->st_mode) && strncmp (in, relpath, rl) == 0 && in[rl] == '/')
            return false;
    }
    return true;
}

/* The install's input only, as a tar for /kiwi/src. */
static int
pack_input (const char *host_dir, const char *const *input, kiwi_buf *tar, kiwi_error_t *err)
{
    static const char *const exclude[] = { ".git", NULL };
    input_filter f = { input };
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    o.exclude = exclude;
    o.exclude_fn = not_input;
    o.exclude_userdata = &f;
    if (kiwi_archive_from_dir (host_dir, &o, tar, NULL, err) < 0)
        return kiwi_error_wrap (err, "packing the install's input from %s", host_dir);
    return 0;
}

int
kiwi_phase_put_tree (kiwi_sandbox *sb, const char *host_dir, const char *dir, char **manifest, size_t *manifest_len,
                     kiwi_error_t *err)
{
    cleanup_buf kiwi_buf tar = KIWI_BUF_INIT;
    if (pack_tree (host_dir, &tar, err) < 0)
        return -1;
    if (kiwi_sandbox_put_archive (sb, dir, tar.data, tar.len, err) < 0)
        return -1;
    if (manifest != NULL) {
        kiwi_buf m = KIWI_BUF_INIT;
        manifest_ctx mc = { &m, err };
        if (kiwi_archive_list (tar.data, tar.len, manifest_add, &mc, err) < 0) {
            kiwi_buf_free (&m);
            return -1;
        }
        *manifest = kiwi_buf_steal (&m, manifest_len);
    }
    return 0;
}

/* ----- snapshots: two tar files, src.tar and home.tar, in a directory ----- */

/* Writes a snapshot part to its file, within the ceiling shared by the
 * parts (`used` holds what the earlier parts took). */
typedef struct snapshot_sink {
    int fd;
    int failed_errno;
    uint64_t ceiling;  /* bytes; 0 = none */
    uint64_t used;
    kiwi_tar_meter meter;
    bool over;
} snapshot_sink;

static int
write_to_file (const char *data, size_t len, void *ud)
{
    snapshot_sink *f = ud;
    kiwi_tar_meter_feed (&f->meter, data, len);
    if (f->ceiling > 0) {
        uint64_t seen = kiwi_tar_meter_size (&f->meter);
        if (seen > f->ceiling - (f->used < f->ceiling ? f->used : f->ceiling)) {
            f->over = true;
            return -1;
        }
    }
    while (len > 0 && f->failed_errno == 0) {
        ssize_t w = write (f->fd, data, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            f->failed_errno = errno;
            return -1;
        }
        data += w;
        len -= (size_t) w;
    }
    return 0;
}

/* Saves `inner` as a tar at `path` (written to path.partial, renamed when
 * complete). *used grows by its size; past `ceiling` bytes in all the copy
 * stops, the partial file goes, and the error has code KIWI_SBE_DISK. */
static int
save_archive (kiwi_sandbox *sb, const char *inner, const char *path, uint64_t ceiling, uint64_t *used,
              kiwi_error_t *err)
{
    char tmp[PATH_MAX];
    snprintf (tmp, sizeof tmp, "%s.partial", path);
    snapshot_sink f = { .fd = open (tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600), .ceiling = ceiling,
                        .used = *used };
    kiwi_tar_meter_init (&f.meter);
    if (f.fd < 0)
        return kiwi_error_make (err, errno, "creating %s", tmp);
    int rc = kiwi_sandbox_get_archive (sb, inner, write_to_file, &f, err);
    if (f.over) {
        kiwi_error_free (err);
        rc = kiwi_error_make_code (err, KIWI_SBE_DISK, "%s holds more than the %llu bytes left of the ceiling",
                                   inner, (unsigned long long) (ceiling - (*used < ceiling ? *used : ceiling)));
    }
    if (rc == 0 && f.failed_errno)
        rc = kiwi_error_make (err, f.failed_errno, "writing %s", tmp);
    if (rc == 0 && fsync (f.fd) < 0)
        rc = kiwi_error_make (err, errno, "writing %s", tmp);
    close (f.fd);
    if (rc == 0 && rename (tmp, path) < 0)
        rc = kiwi_error_make (err, errno, "renaming %s", tmp);
    if (rc < 0)
        unlink (tmp);
    else
        *used += f.meter.pos;
    return rc;
}

static int
put_file_archive (kiwi_sandbox *sb, const char *path, const char *dir, kiwi_error_t *err)
{
    kiwi_fs_mapped m;
    if (kiwi_fs_map (path, false, &m, err) < 0)
        return kiwi_error_wrap (err, "the snapshot");
    int rc = m.len ? kiwi_sandbox_put_archive (sb, dir, m.map, m.len, err) : 0;
    kiwi_fs_unmap (&m);
    return rc;
}

int
kiwi_phase_snapshot_lower (kiwi_sandbox_env *env, const kiwi_phase_config *cfg, const char *snapshot_dir,
                           int64_t disk_mb, char **lower, kiwi_error_t *err)
{
    *lower = NULL;
    if (snapshot_dir == NULL || cfg->copy_snapshot || !kiwi_sandbox_env_driver (env)->lays_lower)
        return 0;
    uint64_t ceiling = (uint64_t) (disk_mb > 0 ? disk_mb : KIWI_PHASE_DEFAULT_DISK_MB) * 1024 * 1024;
    if (kiwi_deps_prepare (snapshot_dir, ceiling, KIWI_SANDBOX_UID, KIWI_SANDBOX_GID, lower, err) < 0)
        return kiwi_error_wrap (err, "laying the dependency snapshot under the sandbox");
    return 0;
}

int
kiwi_phase_restore_snapshot (kiwi_sandbox *sb, const char *snapshot_dir, kiwi_error_t *err)
{
    static const char *const parts[] = { "src.tar", "home.tar" };
    for (size_t i = 0; i < 2; i++) {
        char p[PATH_MAX];
        snprintf (p, sizeof p, "%s/%s", snapshot_dir, parts[i]);
        if (put_file_archive (sb, p, KIWI_SANDBOX_ROOT, err) < 0)
            return kiwi_error_wrap (err, "restoring the dependency snapshot");
    }
    return 0;
}

/* Runs a small fixed script in the sandbox; failure is an error. */
static int
run_internal (kiwi_sandbox *sb, const char *script, kiwi_error_t *err)
{
    const char *argv[] = { "/bin/sh", "-c", script, NULL };
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = 120000, .output_cap = 2048 };
    kiwi_exec_result r;
    if (kiwi_sandbox_exec (sb, &x, &r, err) < 0)
        return -1;
    int ok = r.exit_code == 0;
    if (!ok)
        kiwi_error_make (err, 0, "`%s` exited with %d: %s", script, r.exit_code, r.output ? r.output : "");
    kiwi_exec_result_clear (&r);
    return ok ? 0 : -1;
}

/* Appends to `b` a find(1) expression, in parentheses, matching the
 * locations: a name without "/" by -name (at any depth), one with "/" by
 * -path '*\/NAME' (`home`: './NAME', relative to the home itself); with
 * `below`, also everything under them. The names are Kiwi's own
 * (kiwi_install_dep_locations), single-quoted all the same. */
static int
find_locations (kiwi_buf *b, const char *const *locs, bool home, bool below, kiwi_error_t *err)
{
    if (kiwi_buf_append (b, " \\(", 3, err) < 0)
        return -1;
    for (size_t i = 0; locs[i]; i++) {
        const char *l = locs[i];
        if (strchr (l, '\'') != NULL)
            return kiwi_error_make (err, EINVAL, "dependency location `%s`", l);
        char one[512];
        bool by_name = !home && strchr (l, '/') == NULL;
        const char *pre = home ? "./" : "*/";
        int n = by_name ? snprintf (one, sizeof one, "%s -name '%s'", i ? " -o" : "", l)
                        : snprintf (one, sizeof one, "%s -path '%s%s'", i ? " -o" : "", pre, l);
        if (n < 0 || (size_t) n >= sizeof one || kiwi_buf_append (b, one, (size_t) n, err) < 0)
            return n < 0 || (size_t) n >= sizeof one ? kiwi_error_make (err, EINVAL, "dependency location") : -1;
        if (below) {
            n = snprintf (one, sizeof one, " -o -path '%s%s/*'", by_name ? "*/" : pre, l);
            if (n < 0 || (size_t) n >= sizeof one || kiwi_buf_append (b, one, (size_t) n, err) < 0)
                return n < 0 || (size_t) n >= sizeof one ? kiwi_error_make (err, EINVAL, "dependency location") : -1;
        }
    }
    if (locs[0] == NULL && kiwi_buf_append (b, " -false", 7, err) < 0)
        return -1;
    return kiwi_buf_append (b, " \\)", 3, err);
}

/* The script that leaves in `dir` only the dependency locations: every
 * other file and link goes, then every directory left empty outside them. */
static int
keep_only (kiwi_buf *b, const char *dir, const char *const *locs, bool home, kiwi_error_t *err)
{
    char head[256];
    int n = snprintf (head, sizeof head, "cd %s && find . -mindepth 1", dir);
    if (kiwi_buf_append (b, head, (size_t) n, err) < 0 || find_locations (b, locs, home, false, err) < 0)
        return -1;
    static const char mid[] = " -prune -o ! -type d -print0 | xargs -0 -r rm -f -- && find . -mindepth 1 -depth "
                              "-type d -empty !";
    if (kiwi_buf_append (b, mid, sizeof mid - 1, err) < 0 || find_locations (b, locs, home, true, err) < 0)
        return -1;
    static const char tail[] = " -delete\n";
    return kiwi_buf_append (b, tail, sizeof tail - 1, err);
}

/* Leaves only the dependency locations (`src` under /kiwi/src, `home`
 * under /kiwi/home): everything else Phase A made or was given (the input
 * files, a file a postinstall wrote into the tree, build output) goes and
 * the scratch area is emptied; then src and home are saved, in one
 * ceiling. */
static int
write_snapshot (kiwi_sandbox *sb, const char *const *src, const char *const *home, const char *snapshot_dir,
                uint64_t ceiling, kiwi_error_t *err)
{
    if (mkdir (snapshot_dir, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", snapshot_dir);
    cleanup_buf kiwi_buf script = KIWI_BUF_INIT;
    static const char head[] = "set -e\n";
    static const char scratch[] = "find " KIWI_SANDBOX_TMP " -mindepth 1 -delete\n";
    if (kiwi_buf_append (&script, head, sizeof head - 1, err) < 0
        || keep_only (&script, KIWI_SANDBOX_SRC, src, false, err) < 0
        || keep_only (&script, KIWI_SANDBOX_HOME, home, true, err) < 0
        || kiwi_buf_append (&script, scratch, sizeof scratch, err) < 0)
        return -1;
    if (run_internal (sb, script.data, err) < 0)
        return kiwi_error_wrap (err, "keeping the dependency locations only");
    char p[PATH_MAX];
    uint64_t used = 0;
    snprintf (p, sizeof p, "%s/src.tar", snapshot_dir);
    if (save_archive (sb, KIWI_SANDBOX_SRC, p, ceiling, &used, err) < 0)
        return -1;
    snprintf (p, sizeof p, "%s/home.tar", snapshot_dir);
    if (save_archive (sb, KIWI_SANDBOX_HOME, p, ceiling, &used, err) < 0) {
        snprintf (p, sizeof p, "%s/src.tar", snapshot_dir);
        unlink (p);
        return -1;
    }
    return 0;
}

int
kiwi_phase_put_ca_bundle (kiwi_sandbox *sb, const char *host_path, kiwi_error_t *err)
{
    cleanup_close int fd = open (host_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make (err, errno, "reading the CA bundle %s (KIWI_CA_BUNDLE)", host_path);
    cleanup_buf kiwi_buf data = KIWI_BUF_INIT;
    char chunk[65536];
    ssize_t n;
    while ((n = read (fd, chunk, sizeof chunk)) > 0)
        if (kiwi_buf_append (&data, chunk, (size_t) n, err) < 0)
            return -1;
    if (n < 0)
        return kiwi_error_make (err, errno, "reading the CA bundle %s", host_path);
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    cleanup_buf kiwi_buf tar = KIWI_BUF_INIT;
    if (kiwi_archive_add_dir (&tar, "ca", 0755, &o, err) < 0
        || kiwi_archive_add_file (&tar, "ca/ca-certificates.crt", data.data, data.len, 0644, &o, err) < 0
        || kiwi_archive_finish (&tar, err) < 0)
        return -1;
    return kiwi_sandbox_put_archive (sb, KIWI_SANDBOX_ROOT, tar.data, tar.len, err);
}

int
kiwi_phase_install (kiwi_sandbox_env *env, const kiwi_phase_config *cfg, const kiwi_install_request *req,
                    kiwi_install_result *r, kiwi_error_t *err)
{
    memset (r, 0, sizeof *r);
    r->exit_code = -1;
    if (req->argv == NULL || req->argv[0] == NULL) {
        r->status = KIWI_INSTALL_SKIPPED;
        snprintf (r->reason, sizeof r->reason, "no dependencies declared: Phase A skipped");
        return 0;
    }
    cleanup_strv kiwi_strv e = KIWI_STRV_INIT;
    if (kiwi_phase_install_env (cfg, req->extra_env, &e, err) < 0)
        return kiwi_error_wrap (err, "Phase A");
    kiwi_sandbox_spec spec = {
        .image = req->image,
        .network = KIWI_NET_INSTALL,
        .env = kiwi_strv_list (&e),
        .limits = req->limits,
        .task_id = req->task_id,
        .phase = "install",
    };
    int64_t t0 = kiwi_mono_ms ();
    kiwi_sandbox *sb = NULL;
    if (kiwi_sandbox_create (env, &spec, &sb, err) < 0)
        return kiwi_error_wrap (err, "Phase A");
    int rc = -1;
    cleanup_strv kiwi_strv all_src = KIWI_STRV_INIT, all_home = KIWI_STRV_INIT;
    const char *const *dep_src = req->dep_src, *const *dep_home = req->dep_home;
    if (dep_src == NULL || dep_home == NULL) {
        if (kiwi_install_dep_locations (NULL, &all_src, &all_home, err) < 0)
            goto out;
        dep_src = dep_src ? dep_src : kiwi_strv_list (&all_src);
        dep_home = dep_home ? dep_home : kiwi_strv_list (&all_home);
    }
    if (req->input != NULL) {
        cleanup_buf kiwi_buf tar = KIWI_BUF_INIT;
        if (pack_input (req->workspace, req->input, &tar, err) < 0
            || kiwi_sandbox_put_archive (sb, KIWI_SANDBOX_SRC, tar.data, tar.len, err) < 0)
            goto out;
    } else if (kiwi_phase_put_tree (sb, req->workspace, KIWI_SANDBOX_SRC, NULL, NULL, err) < 0)
        goto out;
    if (cfg->ca_bundle != NULL && kiwi_phase_put_ca_bundle (sb, cfg->ca_bundle, err) < 0)
        goto out;
    if (req->on_started != NULL) {
        kiwi_sandbox_info info;
        kiwi_error_t ierr = NULL;
        if (kiwi_sandbox_inspect (sb, &info, &ierr) < 0) {
            kiwi_warn ("Phase A: %s: its egress cannot be put down to this install", kiwi_error_msg (ierr));
            info.address[0] = '\0';
        }
        kiwi_error_free (&ierr);
        req->on_started (info.address, req->userdata);
    }
    /* the command the reason names, one line of at most 120 bytes */
    char shown[128];
    snprintf (shown, sizeof shown, "%.120s", req->display && *req->display ? req->display : req->argv[0]);
    for (char *p = shown; *p; p++)
        if ((unsigned char) *p < 0x20 || *p == 0x7f)
            *p = '?';
    int64_t timeout = cfg->install_timeout_ms > 0 ? cfg->install_timeout_ms : KIWI_INSTALL_TIMEOUT_DEFAULT_S * 1000;
    bool task_deadline = false;
    if (req->deadline_ms > 0 && req->deadline_ms < timeout) {
        timeout = req->deadline_ms;
        task_deadline = true;
    }
    kiwi_exec_spec x = {
        .argv = req->argv, .timeout_ms = timeout, .output_cap = 16384, .on_output = req->on_output,
        .userdata = req->userdata,
    };
    kiwi_exec_result xr;
    if (kiwi_sandbox_exec (sb, &x, &xr, err) < 0)
        goto out;
    r->exit_code = xr.exit_code;
    r->output = steal_pointer (&xr.output);
    r->output_dropped = xr.output_dropped;
    if (xr.timed_out) {
        r->status = KIWI_INSTALL_TIMED_OUT;
        snprintf (r->reason, sizeof r->reason, "install `%s` timed out after %lld s (%s)", shown,
                  (long long) (timeout / 1000), task_deadline ? "the task's deadline" : "KIWI_INSTALL_TIMEOUT");
    } else if (xr.sandbox_lost || xr.oom_killed) {
        r->status = KIWI_INSTALL_KILLED;
        snprintf (r->reason, sizeof r->reason, "install `%s` was killed: %s", shown,
                  xr.sandbox_lost ? xr.lost_reason : "memory ceiling reached");
    } else if (xr.exit_code != 0) {
        r->status = KIWI_INSTALL_FAILED;
        int64_t disk_mb = req->limits.disk_mb > 0 ? req->limits.disk_mb : KIWI_PHASE_DEFAULT_DISK_MB;
        kiwi_install_failed_reason (r->reason, sizeof r->reason, shown, xr.exit_code, r->output, disk_mb);
    } else {
        r->status = KIWI_INSTALL_OK;
        int64_t disk_mb = req->limits.disk_mb > 0 ? req->limits.disk_mb : KIWI_PHASE_DEFAULT_DISK_MB;
        uint64_t ceiling = (uint64_t) disk_mb * 1024 * 1024;
        if (write_snapshot (sb, dep_src, dep_home, req->snapshot_dir, ceiling, err) < 0) {
            if (kiwi_error_code (*err) != KIWI_SBE_DISK) {
                kiwi_exec_result_clear (&xr);
                goto out;
            }
            kiwi_warn ("Phase A: %s", kiwi_error_msg (*err));
            kiwi_error_free (err);
            r->status = KIWI_INSTALL_KILLED;
            snprintf (r->reason, sizeof r->reason,
                      "install `%s`: snapshot larger than the sandbox's disk ceiling (%lld MB, KIWI_MAX_SANDBOX_DISK_MB "
                      "raises it)",
                      shown, (long long) disk_mb);
        } else
            snprintf (r->reason, sizeof r->reason, "install `%s` succeeded", shown);
    }
    kiwi_exec_result_clear (&xr);
    rc = 0;
out:
    r->duration_ms = kiwi_mono_ms () - t0;
    {
        kiwi_error_t derr = NULL;
        if (kiwi_sandbox_destroy (sb, &derr) < 0)
            kiwi_warn ("Phase A: %s", kiwi_error_msg (derr));
        kiwi_error_free (&derr);
    }
    if (rc < 0)
        kiwi_error_wrap (err, "Phase A");
    return rc;
}

/* What a verify's sandbox is for `req`: the spec (its environment in *e,
 * its lower layer in *lower), and the snapshot's parts to put when the
 * driver does not lay it (mapped into parts[], listed in puts[]). */
static int
verify_spec (kiwi_sandbox_env *env, const kiwi_phase_config *cfg, const kiwi_verify_request *req,
             kiwi_sandbox_spec *spec, kiwi_strv *e, char **lower, kiwi_fs_mapped parts[2], kiwi_sandbox_put puts[2],
             size_t *nputs, kiwi_strv *withheld, kiwi_strv *missing, kiwi_error_t *err)
{
    *nputs = 0;
    if (kiwi_phase_verify_env (cfg, req->extra_env, req->credentials, e, withheld, missing, err) < 0)
        return -1;
    *spec = (kiwi_sandbox_spec) {
        .image = req->image,
        .network = KIWI_NET_NONE,
        .env = kiwi_strv_list (e),
        .limits = req->limits,
        .task_id = req->task_id,
        .phase = "verify",
        .files_sealed = true, /* the snapshot and the tree go in before the command; only its output comes out */
    };
    /* the snapshot first (laid under /kiwi, or put), the current tree over it */
    if (kiwi_phase_snapshot_lower (env, cfg, req->snapshot_dir, req->limits.disk_mb, lower, err) < 0)
        return -1;
    spec->lower_dir = *lower;
    if (req->snapshot_dir == NULL || *lower != NULL)
        return 0;
    static const char *const names[] = { "src.tar", "home.tar" };
    for (size_t i = 0; i < 2; i++) {
        char p[PATH_MAX];
        snprintf (p, sizeof p, "%s/%s", req->snapshot_dir, names[i]);
        if (kiwi_fs_map (p, false, &parts[i], err) < 0)
            return kiwi_error_wrap (err, "the snapshot");
        if (parts[i].len > 0)
            puts[(*nputs)++] = (kiwi_sandbox_put) { KIWI_SANDBOX_ROOT, parts[i].map, parts[i].len };
    }
    return 0;
}

int
kiwi_phase_verify_ready (kiwi_sandbox_env *env, const kiwi_phase_config *cfg, const kiwi_verify_request *req,
                         kiwi_sandbox **out, kiwi_error_t *err)
{
    *out = NULL;
    cleanup_strv kiwi_strv e = KIWI_STRV_INIT;
    cleanup_free char *lower = NULL;
    kiwi_fs_mapped parts[2] = { { 0 }, { 0 } };
    kiwi_sandbox_put puts[2];
    size_t nputs = 0;
    kiwi_sandbox_spec spec;
    kiwi_sandbox *sb = NULL;
    int rc = verify_spec (env, cfg, req, &spec, &e, &lower, parts, puts, &nputs, NULL, NULL, err);
    if (rc == 0)
        rc = kiwi_sandbox_create (env, &spec, &sb, err);
    for (size_t i = 0; rc == 0 && i < nputs; i++)
        rc = kiwi_sandbox_put_archive (sb, puts[i].dir, puts[i].tar, puts[i].len, err);
    kiwi_fs_unmap (&parts[0]);
    kiwi_fs_unmap (&parts[1]);
    if (rc < 0) {
        kiwi_sandbox_destroy (sb, NULL);
        return kiwi_error_wrap (err, "Phase B, made ahead");
    }
    *out = sb;
    return 0;
}

/* The command as Phase B runs it: the prelude first, its output kept out of
 * the command's unless it fails. *script (owned) is NULL without one. */
static int
verify_script (const kiwi_verify_request *req, char **script, kiwi_error_t *err)
{
    *script = NULL;
    if (req->prelude == NULL || *req->prelude == '\0')
        return 0;
    if (asprintf (script,
                  "{\n%s} >" KIWI_SANDBOX_TMP "/kiwi-prelude.log 2>&1 || { echo 'kiwi: installing the project "
                  "itself (offline, before the tests) failed:' >&2; tail -n 20 " KIWI_SANDBOX_TMP
                  "/kiwi-prelude.log >&2; }\n%s",
                  req->prelude, req->command)
        < 0) {
        *script = NULL;
        return kiwi_error_make (err, ENOMEM, "Phase B");
    }
    return 0;
}

int
kiwi_phase_verify (kiwi_sandbox_env *env, const kiwi_phase_config *cfg, const kiwi_verify_request *req,
                   kiwi_exec_result *r, kiwi_strv *withheld, kiwi_strv *missing, kiwi_error_t *err)
{
    memset (r, 0, sizeof *r);
    r->exit_code = -1;
    cleanup_strv kiwi_strv e = KIWI_STRV_INIT;
    kiwi_fs_mapped parts[2] = { { 0 }, { 0 } };
    kiwi_sandbox_put puts[3];
    size_t nputs = 0;
    int rc = -1;
    kiwi_sandbox_spec spec;
    cleanup_buf kiwi_buf tree = KIWI_BUF_INIT;
    cleanup_free char *lower = NULL;
    cleanup_free char *script = NULL; /* before the first goto: out's clean-up frees it */
    kiwi_sandbox *ready = req->ready;  /* taken: removed on every path */
    if (ready != NULL) {
        /* the sandbox is made: its environment decides nothing now, but
         * the caller's lists of credentials left out are still filled */
        if (kiwi_phase_verify_env (cfg, req->extra_env, req->credentials, &e, withheld, missing, err) < 0)
            goto out;
    } else if (verify_spec (env, cfg, req, &spec, &e, &lower, parts, puts, &nputs, withheld, missing, err) < 0)
        goto out;
    if (pack_tree (req->workspace, &tree, err) < 0 || verify_script (req, &script, err) < 0)
        goto out;
    const char *argv[] = { "/bin/sh", "-c", script ? script : req->command, NULL };
    kiwi_exec_spec x = {
        .argv = argv, .timeout_ms = req->timeout_ms, .output_cap = req->output_cap, .on_output = req->on_output,
        .userdata = req->userdata,
    };
    puts[nputs++] = (kiwi_sandbox_put) { KIWI_SANDBOX_SRC, tree.data, tree.len };
    if (ready != NULL) {
        /* the tree put and the command run by exec: no start on the way */
        rc = kiwi_sandbox_run_in (ready, puts, nputs, &x, r, err);
        ready = NULL; /* removed there */
    } else
        rc = kiwi_sandbox_run_once (env, &spec, puts, nputs, &x, r, err);
out:
    kiwi_sandbox_destroy (ready, NULL);
    kiwi_fs_unmap (&parts[0]);
    kiwi_fs_unmap (&parts[1]);
    if (rc < 0)
        kiwi_error_wrap (err, "Phase B");
    return rc;
}
