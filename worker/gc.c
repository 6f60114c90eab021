/*
 * gc.c: collecting workspaces, mirrors, snapshots and results under the
 * state directory, by owner, by age and by a disk watermark (see gc.h).
 */
#include "worker/gc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/strv.h"

void
kiwi_gc_opts_init (kiwi_gc_opts *o, const char *state_dir)
{
    memset (o, 0, sizeof *o);
    o->state_dir = state_dir;
    o->mirror_idle_s = 7 * 86400;
    o->snapshot_idle_s = 7 * 86400;
    o->disk_high = 85;
    o->disk_low = 75;
}

/* The default usage function: statvfs. */
static int
kiwi_gc_statvfs_usage (const char *path, double *used_pct, void *userdata, kiwi_error_t *err)
{
    (void) userdata;
    struct statvfs sv;
    if (statvfs (path, &sv) < 0)
        return kiwi_error_make (err, errno, "statvfs %s", path);
    double used = (double) (sv.f_blocks - sv.f_bfree), avail = (double) sv.f_bavail;
    *used_pct = used + avail > 0 ? 100.0 * used / (used + avail) : 0.0;
    return 0;
}

static int
rm_entry (const char *path)
{
    kiwi_error_t err = NULL;
    int rc = kiwi_fs_remove_tree (path, 600000, &err);
    if (rc < 0)
        kiwi_warn ("clean-up: removing %s: %s", path, kiwi_error_msg (err));
    kiwi_error_free (&err);
    return rc;
}

static int64_t
mtime_of (const char *path)
{
    struct stat st;
    return lstat (path, &st) == 0 ? (int64_t) st.st_mtime : 0;
}

/* ----- workspaces ----- */

/* Whether pid is alive and runs an executable called `exe` (a task process
 * of this worker runs with its credentials, so its exe can be read). */
static bool
owner_alive (pid_t pid, const char *exe)
{
    char p[64], target[PATH_MAX];
    snprintf (p, sizeof p, "/proc/%d/exe", (int) pid);
    ssize_t n = readlink (p, target, sizeof target - 1);
    if (n < 0) /* gone, or a process this worker may not look into: no task process of its own */
        return false;
    target[n] = '\0';
    const char *base = strrchr (target, '/');
    base = base ? base + 1 : target;
    return strncmp (base, exe, strlen (exe)) == 0;
}

/* The pid at the end of "<task>-<pid>[.partial]", or 0. */
static pid_t
name_pid (const char *name, const char *suffix_sep)
{
    const char *dash = strrchr (name, suffix_sep[0]);
    if (dash == NULL || dash[1] == '\0')
        return 0;
    char *end = NULL;
    long v = strtol (dash + 1, &end, 10);
    if (end == dash + 1 || (*end != '\0' && *end != '.') || v <= 0 || v > INT32_MAX)
        return 0;
    return (pid_t) v;
}

/* Records the mirrors a workspace borrows objects from: a checkout's git
 * directory is the workspace's sibling "<ws>.git" (worker/task/repo.c),
 * whose alternates name the mirror's objects directory. */
static void
note_alternates (const char *ws, kiwi_strv *borrowed)
{
    char p[PATH_MAX + 64];
    snprintf (p, sizeof p, "%s.git/objects/info/alternates", ws);
    FILE *f = fopen (p, "re");
    if (f == NULL)
        return;
    char line[PATH_MAX + 2];
    while (fgets (line, sizeof line, f)) {
        line[strcspn (line, "\n")] = '\0';
        char real[PATH_MAX];
        if (line[0] && realpath (line, real) != NULL)
            kiwi_strv_add (borrowed, real);
    }
    fclose (f);
}

/* What one collection pass works with; each directory walk uses its part. */
typedef struct gc_pass {
    const kiwi_gc_opts *o;
    int64_t now;
    kiwi_strv *borrowed; /* objects directories that live workspaces borrow */
    kiwi_gc_stats *st;
    struct cand **v;     /* mirror and snapshot candidates */
    size_t *n, *cap;
    bool *oom;           /* set when a candidate could not be kept */
} gc_pass;

/* One entry of a directory under the state directory. */
typedef struct gc_entry {
    const char *base; /* <state>/<sub> */
    const char *name;
    const char *path; /* <base>/<name> */
    struct stat sb;   /* lstat of path */
} gc_entry;

/* Calls fn for each entry of <state>/<sub> whose name does not start with
 * '.' and that lstat can read; a missing directory has none. */
static void
each_entry (const gc_pass *g, const char *sub, void (*fn) (const gc_pass *g, const gc_entry *e))
{
    char base[PATH_MAX];
    snprintf (base, sizeof base, "%s/%s", g->o->state_dir, sub);
    DIR *d = opendir (base);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir (d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[PATH_MAX + 256];
        snprintf (path, sizeof path, "%s/%s", base, de->d_name);
        gc_entry e = { .base = base, .name = de->d_name, .path = path };
        if (lstat (path, &e.sb) == 0)
            fn (g, &e);
    }
    closedir (d);
}

static void
gc_workspace (const gc_pass *g, const gc_entry *e)
{
    if (!S_ISDIR (e->sb.st_mode))
        return;
    const char *exe = g->o->owner_exe ? g->o->owner_exe : "kiwi-worker";
    pid_t pid = name_pid (e->name, "-");
    bool alive = pid > 0 && owner_alive (pid, exe);
    bool too_old = g->now - (int64_t) e->sb.st_mtime > KIWI_GC_WORKSPACE_MAX_AGE_S;
    if (alive && !too_old) {
        note_alternates (e->path, g->borrowed);
        return;
    }
    kiwi_info ("clean-up: workspace %s (%s)", e->path, alive ? "older than any task" : "its task process is gone");
    if (rm_entry (e->path) == 0)
        g->st->workspaces++;
}

/* ----- candidates: mirrors and snapshots ----- */

typedef enum { C_MIRROR, C_SNAPSHOT } cand_kind;

typedef struct cand {
    cand_kind kind;
    char path[PATH_MAX];  /* the mirror or snapshot directory */
    char lock[PATH_MAX];  /* its lock file */
    char key[256];        /* a snapshot's cache key */
    int64_t last_use;
    bool gone;
} cand;

static int
cand_cmp (const void *a, const void *b)
{
    const cand *x = a, *y = b;
    return x->last_use < y->last_use ? -1 : x->last_use > y->last_use ? 1 : 0;
}

static bool
borrowed_by (const kiwi_strv *borrowed, const char *mirror)
{
    char objects[PATH_MAX + 16], real[PATH_MAX];
    snprintf (objects, sizeof objects, "%s/objects", mirror);
    if (realpath (objects, real) == NULL)
        return false;
    for (size_t i = 0; i < borrowed->n; i++)
        if (strcmp (borrowed->v[i], real) == 0)
            return true;
    return false;
}

/* Removes a candidate if nobody holds it: its lock taken exclusively
 * without waiting (a fetch in progress, or a task holding a snapshot, keeps
 * it), a mirror no live workspace borrows from. Returns 1 removed, 0 kept
 * (in use), < 0 failed. */
static int
remove_unheld (cand *c, const kiwi_strv *borrowed, kiwi_gc_stats *st)
{
    if (c->kind == C_MIRROR && borrowed_by (borrowed, c->path)) {
        st->in_use++;
        return 0;
    }
    cleanup_close int fd = open (c->lock, O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        kiwi_warn ("clean-up: %s: %s", c->lock, strerror (errno));
        return -1;
    }
    if (flock (fd, LOCK_EX | LOCK_NB) < 0) {
        st->in_use++;
        return 0;
    }
    /* a use may have finished just before the lock was ours */
    int rc = rm_entry (c->path) == 0 ? 1 : -1;
    if (rc == 1)
        c->gone = true;
    /* a mirror's lock file stays: a checkout waiting on it must not end up
     * holding a lock nobody else can see; a snapshot's goes with it */
    return rc;
}

static void
add_cand (const gc_pass *g, const cand *c)
{
    if (*g->n == *g->cap) {
        size_t cap = *g->cap ? *g->cap * 2 : 32;
        cand *v = realloc (*g->v, cap * sizeof *v);
        if (v == NULL) {
            *g->oom = true;
            return;
        }
        *g->v = v;
        *g->cap = cap;
    }
    (*g->v)[(*g->n)++] = *c;
}

/* <hex>.incoming: a fetch not yet taken into its mirror, which lives only
 * while the mirror's lock is held (worker/task/repo.c); with the lock free,
 * a worker died mid-fetch and left it. */
static void
gc_incoming (const gc_pass *g, const gc_entry *e, size_t hex_len)
{
    char lock[PATH_MAX];
    snprintf (lock, sizeof lock, "%s/%.*s.lock", e->base, (int) hex_len, e->name);
    cleanup_close int fd = open (lock, O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || flock (fd, LOCK_EX | LOCK_NB) < 0)
        return; /* a fetch in progress */
    kiwi_info ("clean-up: interrupted fetch %s", e->path);
    if (rm_entry (e->path) == 0)
        g->st->fetches++;
}

static void
list_mirror (const gc_pass *g, const gc_entry *e)
{
    size_t l = strlen (e->name);
    if (l > 9 && l <= 200 && strcmp (e->name + l - 9, ".incoming") == 0 && S_ISDIR (e->sb.st_mode)) {
        gc_incoming (g, e, l - 9);
        return;
    }
    if (l < 5 || strcmp (e->name + l - 4, ".git") != 0 || l > 200 || !S_ISDIR (e->sb.st_mode))
        return;
    cand c = { .kind = C_MIRROR };
    snprintf (c.path, sizeof c.path, "%s", e->path);
    snprintf (c.lock, sizeof c.lock, "%s/%.*s.lock", e->base, (int) (l - 4), e->name);
    char fh[PATH_MAX + 16];
    snprintf (fh, sizeof fh, "%s/FETCH_HEAD", c.path);
    c.last_use = (int64_t) e->sb.st_mtime;
    int64_t t = mtime_of (c.lock);
    if (t > c.last_use)
        c.last_use = t;
    t = mtime_of (fh);
    if (t > c.last_use)
        c.last_use = t;
    add_cand (g, &c);
}

static void
list_snapshot (const gc_pass *g, const gc_entry *e)
{
    if (strlen (e->name) >= 200 || !S_ISDIR (e->sb.st_mode))
        return;
    const char *partial = strstr (e->name, ".partial");
    if (partial != NULL) {
        /* <key>.<pid>.partial: an install in progress, or interrupted */
        char head[256];
        snprintf (head, sizeof head, "%.*s", (int) (partial - e->name), e->name);
        pid_t pid = name_pid (head, ".");
        bool alive = pid > 0 && (kill (pid, 0) == 0 || errno == EPERM);
        if (!alive || g->now - (int64_t) e->sb.st_mtime > KIWI_GC_PARTIAL_MAX_AGE_S) {
            kiwi_info ("clean-up: interrupted install snapshot %s", e->path);
            if (rm_entry (e->path) == 0)
                g->st->partials++;
        }
        return;
    }
    cand c = { .kind = C_SNAPSHOT, .last_use = (int64_t) e->sb.st_mtime };
    snprintf (c.path, sizeof c.path, "%s", e->path);
    snprintf (c.lock, sizeof c.lock, "%s/lock", e->path);
    snprintf (c.key, sizeof c.key, "%s", e->name);
    add_cand (g, &c);
}

static void
gc_result (const gc_pass *g, const gc_entry *e)
{
    if (!S_ISREG (e->sb.st_mode) || g->now - (int64_t) e->sb.st_mtime <= g->o->results_max_age_s)
        return;
    if (unlink (e->path) == 0)
        g->st->results++;
}

int
kiwi_gc_run (const kiwi_gc_opts *o, kiwi_gc_stats *st, kiwi_error_t *err)
{
    memset (st, 0, sizeof *st);
    st->used_before = st->used_after = -1;
    struct stat sb;
    if (stat (o->state_dir, &sb) < 0 || !S_ISDIR (sb.st_mode))
        return kiwi_error_make (err, errno ? errno : ENOTDIR, "clean-up: state directory %s", o->state_dir);
    int64_t now = o->now_s > 0 ? o->now_s : (int64_t) time (NULL);
    cleanup_strv kiwi_strv borrowed = KIWI_STRV_INIT;
    cand *v = NULL;
    size_t n = 0, cap = 0;
    bool oom = false;
    gc_pass g = { .o = o, .now = now, .borrowed = &borrowed, .st = st, .v = &v, .n = &n, .cap = &cap, .oom = &oom };
    each_entry (&g, "work", gc_workspace);
    if (o->results_max_age_s > 0)
        each_entry (&g, "results", gc_result);
    each_entry (&g, "mirrors", list_mirror);
    each_entry (&g, "snapshots", list_snapshot);
    if (oom) {
        free (v);
        return kiwi_error_make (err, ENOMEM, "clean-up: the list of mirrors and snapshots");
    }

    /* by age */
    for (size_t i = 0; i < n; i++) {
        cand *c = &v[i];
        int64_t idle = now - c->last_use;
        bool go;
        const char *why;
        if (c->kind == C_MIRROR) {
            go = idle > o->mirror_idle_s;
            why = "unused for KIWI_GC_MIRROR_IDLE";
        } else {
            go = idle > o->snapshot_idle_s;
            why = "unused for KIWI_GC_SNAPSHOT_IDLE";
            if (!go && idle > KIWI_GC_EXPIRED_IDLE_S && o->entry_exists && o->entry_exists (c->key, o->entry_userdata) == 0) {
                go = true;
                why = "its cache entry expired";
            }
        }
        if (!go)
            continue;
        kiwi_info ("clean-up: %s %s (%s)", c->kind == C_MIRROR ? "mirror" : "snapshot", c->path, why);
        if (remove_unheld (c, &borrowed, st) == 1) {
            if (c->kind == C_MIRROR)
                st->mirrors++;
            else
                st->snapshots++;
        }
    }

    /* by the watermark, least recently used first */
    if (o->disk_high > 0) {
        kiwi_gc_usage_fn usage = o->usage ? o->usage : kiwi_gc_statvfs_usage;
        kiwi_error_t uerr = NULL;
        double used = 0;
        if (usage (o->state_dir, &used, o->usage_userdata, &uerr) < 0) {
            kiwi_warn ("clean-up: disk watermark not checked: %s", kiwi_error_msg (uerr));
            kiwi_error_free (&uerr);
        } else {
            st->used_before = st->used_after = used;
            if (used >= (double) o->disk_high) {
                kiwi_info ("clean-up: %s is %.1f%% used (KIWI_GC_DISK_HIGH %d%%): removing the least recently used "
                           "mirrors and snapshots until below %d%%",
                           o->state_dir, used, o->disk_high, o->disk_low);
                qsort (v, n, sizeof *v, cand_cmp);
                for (size_t i = 0; i < n && used >= (double) o->disk_low; i++) {
                    cand *c = &v[i];
                    if (c->gone)
                        continue;
                    if (now - c->last_use < KIWI_GC_GRACE_S) {
                        st->in_use++;
                        continue;
                    }
                    if (remove_unheld (c, &borrowed, st) != 1)
                        continue;
                    kiwi_info ("clean-up: %s %s (disk watermark)", c->kind == C_MIRROR ? "mirror" : "snapshot",
                               c->path);
                    if (c->kind == C_MIRROR)
                        st->watermark_mirrors++;
                    else
                        st->watermark_snapshots++;
                    if (usage (o->state_dir, &used, o->usage_userdata, &uerr) < 0) {
                        kiwi_warn ("clean-up: disk watermark: %s", kiwi_error_msg (uerr));
                        kiwi_error_free (&uerr);
                        break;
                    }
                    st->used_after = used;
                }
                if (used >= (double) o->disk_low)
                    kiwi_warn ("clean-up: %s still %.1f%% used: what is left is in use", o->state_dir, used);
            }
        }
    }
    free (v);
    return 0;
}

int
kiwi_gc_snapshot_hold (const char *snapshot_dir)
{
    char lock[PATH_MAX + 8], part[PATH_MAX + 16];
    snprintf (lock, sizeof lock, "%s/lock", snapshot_dir);
    int fd = open (lock, O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    if (flock (fd, LOCK_SH) < 0) {
        close (fd);
        return -1;
    }
    /* the collection may have removed it while this waited for the lock */
    snprintf (part, sizeof part, "%s/src.tar", snapshot_dir);
    if (access (part, R_OK) != 0) {
        close (fd);
        return -1;
    }
    return fd;
}
