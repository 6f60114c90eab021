/*
 * repo.c: mirrors, checkouts and diffs with git (see repo.h). Every git
 * call is built by kiwi__git_command (repo-internal.h) and run by git_run,
 * which keeps stdout apart from stderr (a diff is stdout alone), bounds
 * both, and can stop git early (the checkout measure), or once a directory
 * it writes passes a size (git_run_watched: the mirror's fetch).
 */
#include "worker/task/repo.h"
#include "worker/task/repo-internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/base64.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/proc.h"
#include "common/sha256.h"

extern char **environ;

#define GIT_TIMEOUT_MS 120000
#define DIFF_MAX (16u * 1024 * 1024)

/* ---------- the one git command line ---------- */

/* Options on every call: they beat any configuration file, the git
 * directory's own included. */
static const char *const safety[] = {
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.attributesFile=/dev/null",
    "core.excludesFile=/dev/null",
    "core.pager=cat",
    "core.askPass=",
    "core.symlinks=true",
    "core.protectNTFS=true",
    "core.protectHFS=true",
    "core.quotepath=false",
    "safe.bareRepository=explicit",
    "credential.helper=",
    "submodule.recurse=false",
    "advice.detachedHead=false",
    NULL,
};

static bool
env_dropped (const char *kv)
{
    static const char *const drop[] = { "GIT_", "HOME=", "XDG_CONFIG_HOME=", "EDITOR=", "VISUAL=", "PAGER=", NULL };
    for (size_t i = 0; drop[i]; i++)
        if (strncmp (kv, drop[i], strlen (drop[i])) == 0)
            return true;
    return false;
}

int
kiwi__git_command (const kiwi__git_call *c, const char *const *args, const char *const *host_env, kiwi_strv *argv,
                   kiwi_strv *env)
{
    int bad = 0;
    bad |= kiwi_strv_add (argv, "git");
    bad |= kiwi_strv_add (argv, "--no-pager");
    for (size_t i = 0; safety[i]; i++) {
        bad |= kiwi_strv_add (argv, "-c");
        bad |= kiwi_strv_add (argv, safety[i]);
    }
    if (c->protocols != NULL) {
        bad |= kiwi_strv_add (argv, "-c");
        bad |= kiwi_strv_add (argv, "protocol.allow=never");
        for (const char *p = c->protocols; *p;) {
            size_t l = strcspn (p, ":");
            if (l > 0) {
                for (size_t i = 0; i < l; i++)
                    if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '+' || p[i] == '-'
                          || p[i] == '.'))
                        return -1;
                bad |= kiwi_strv_add (argv, "-c");
                bad |= kiwi_strv_addf (argv, "protocol.%.*s.allow=always", (int) l, p);
            }
            p += l;
            if (*p == ':')
                p++;
        }
    }
    for (size_t i = 0; args[i]; i++)
        bad |= kiwi_strv_add (argv, args[i]);

    for (size_t i = 0; host_env && host_env[i]; i++)
        if (!env_dropped (host_env[i]))
            bad |= kiwi_strv_add (env, host_env[i]);
    const char *home = c->home ? c->home : "/nonexistent";
    bad |= kiwi_strv_addf (env, "HOME=%s", home);
    bad |= kiwi_strv_addf (env, "XDG_CONFIG_HOME=%s", home);
    bad |= kiwi_strv_add (env, "GIT_CONFIG_NOSYSTEM=1");
    bad |= kiwi_strv_add (env, "GIT_CONFIG_SYSTEM=/dev/null");
    bad |= kiwi_strv_add (env, "GIT_CONFIG_GLOBAL=/dev/null");
    bad |= kiwi_strv_add (env, "GIT_ATTR_NOSYSTEM=1");
    bad |= kiwi_strv_add (env, "GIT_NO_REPLACE_OBJECTS=1");
    bad |= kiwi_strv_add (env, "GIT_TERMINAL_PROMPT=0");
    bad |= kiwi_strv_add (env, "GIT_OPTIONAL_LOCKS=0");
    bad |= kiwi_strv_add (env, "GIT_SSH_COMMAND=ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new");
    for (size_t i = 0; host_env && host_env[i]; i++)
        if (strncmp (host_env[i], "GIT_SSL_CAINFO=", 15) == 0)
            bad |= kiwi_strv_add (env, host_env[i]);
    if (c->git_dir != NULL)
        bad |= kiwi_strv_addf (env, "GIT_DIR=%s", c->git_dir);
    if (c->work_tree != NULL)
        bad |= kiwi_strv_addf (env, "GIT_WORK_TREE=%s", c->work_tree);
    if (c->index_file != NULL)
        bad |= kiwi_strv_addf (env, "GIT_INDEX_FILE=%s", c->index_file);
    if (c->token != NULL && *c->token && c->url != NULL && strncmp (c->url, "https://", 8) == 0) {
        cleanup_free char *cred = NULL;
        if (asprintf (&cred, "x-access-token:%s", c->token) < 0)
            return -1;
        cleanup_free char *enc = kiwi_base64 (cred, strlen (cred));
        if (enc == NULL)
            return -1;
        bad |= kiwi_strv_add (env, "GIT_CONFIG_COUNT=1");
        bad |= kiwi_strv_add (env, "GIT_CONFIG_KEY_0=http.extraHeader");
        bad |= kiwi_strv_addf (env, "GIT_CONFIG_VALUE_0=Authorization: Basic %s", enc);
    }
    return bad ? -1 : 0;
}

/* ---------- running it ---------- */

/* Where git's stdout goes: to `sink` (which returns non-zero to stop git),
 * or kept up to `cap` bytes (over: *over set, git stopped). */
typedef int (*git_sink) (void *ud, const char *data, size_t len);

typedef struct git_out {
    git_sink sink;
    void *ud;
    size_t cap;   /* the most kept in out (0: nothing kept) */
    kiwi_buf out; /* what git printed, NUL-terminated (out.data NULL: nothing) */
    bool over;
    bool stopped; /* the sink or the cap stopped git */
} git_out;

static void
git_out_clear (git_out *o)
{
    kiwi_buf_free (&o->out);
}

static int
keep (git_out *o, const char *chunk, size_t n)
{
    if (o->sink != NULL)
        return o->sink (o->ud, chunk, n);
    if (o->cap == 0)
        return 0;
    o->out.max = o->cap;
    if (kiwi_buf_append (&o->out, chunk, n, NULL) < 0) { /* past the cap, or out of memory */
        o->over = true;
        return 1;
    }
    return 0;
}

/* A directory git writes into, bounded while git runs: no file git or a
 * helper it starts (index-pack, unpack-objects, a transport) writes may
 * pass max_bytes (RLIMIT_FSIZE, set as git starts, inherited by every
 * helper; no core dump either), and the directory's size is taken every
 * WATCH_EVERY_MS, git's process group killed once it passes max_bytes. */
typedef struct git_watch {
    const char *dir;
    int64_t max_bytes;
    bool over; /* git was stopped: the directory passed max_bytes */
} git_watch;

#define WATCH_EVERY_MS 100

/* Puts git (pid, started a moment ago) under the watch's file size limit. */
static int
watch_limit (pid_t pid, const git_watch *w)
{
    struct rlimit fsize = { (rlim_t) w->max_bytes, (rlim_t) w->max_bytes }, core = { 0, 0 };
    if (prlimit (pid, RLIMIT_FSIZE, &fsize, NULL) < 0)
        return -1;
    return prlimit (pid, RLIMIT_CORE, &core, NULL);
}

/* Runs git with the call's settings in `cwd` (never inside a work tree
 * without GIT_DIR). A non-zero exit is an error with `code`, quoting the
 * stderr tail (which never holds the token: it travels in a header); a
 * stop by the sink or the cap is not, nor one by the watch (w->over set;
 * w may be NULL). */
static int
git_run_watched (const kiwi__git_call *c, const char *const *args, const char *cwd, int64_t timeout_ms, int code,
                 git_out *out, git_watch *w, kiwi_error_t *err)
{
    cleanup_strv kiwi_strv argv = KIWI_STRV_INIT, env = KIWI_STRV_INIT;
    if (kiwi__git_command (c, args, (const char *const *) environ, &argv, &env) < 0)
        return kiwi_error_make (err, ENOMEM, "building the git command");
    git_out none = { 0 };
    if (out == NULL)
        out = &none;
    int opipe[2], epipe[2];
    if (pipe2 (opipe, O_CLOEXEC) < 0)
        return kiwi_error_make (err, errno, "pipe for git");
    if (pipe2 (epipe, O_CLOEXEC) < 0) {
        close (opipe[0]);
        close (opipe[1]);
        return kiwi_error_make (err, errno, "pipe for git");
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init (&fa);
    posix_spawnattr_init (&attr);
    posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2 (&fa, opipe[1], 1);
    posix_spawn_file_actions_adddup2 (&fa, epipe[1], 2);
    if (cwd != NULL)
        posix_spawn_file_actions_addchdir_np (&fa, cwd);
    kiwi_proc_spawnattr_child (&attr);
    pid_t pid;
    int rc = posix_spawnp (&pid, "git", &fa, &attr, argv.v, env.v);
    posix_spawn_file_actions_destroy (&fa);
    posix_spawnattr_destroy (&attr);
    close (opipe[1]);
    close (epipe[1]);
    if (rc != 0) {
        close (opipe[0]);
        close (epipe[0]);
        return kiwi_error_make (err, rc, "cannot run git");
    }
    char etail[2048];
    size_t elen = 0;
    bool timed_out = false, killed = false, unlimited = false;
    int limit_errno = 0;
    if (w != NULL && watch_limit (pid, w) < 0) {
        limit_errno = errno;
        unlimited = true;
        killed = true;
        kill (-pid, SIGKILL);
    }
    int64_t deadline = kiwi_mono_ms () + (timeout_ms > 0 ? timeout_ms : GIT_TIMEOUT_MS);
    int64_t next_look = kiwi_mono_ms () + WATCH_EVERY_MS;
    int tick = w != NULL ? WATCH_EVERY_MS : 1000;
    struct pollfd p[2] = { { .fd = opipe[0], .events = POLLIN }, { .fd = epipe[0], .events = POLLIN } };
    while (p[0].fd >= 0 || p[1].fd >= 0) {
        int64_t now = kiwi_mono_ms (), left = deadline - now;
        if (left <= 0) {
            kill (-pid, SIGKILL);
            timed_out = true;
            break;
        }
        if (w != NULL && !killed && now >= next_look) {
            if (kiwi_fs_tree_bytes (w->dir, w->max_bytes) > w->max_bytes) {
                w->over = true;
                killed = true;
                kill (-pid, SIGKILL);
            }
            next_look = kiwi_mono_ms () + WATCH_EVERY_MS;
        }
        int n = poll (p, 2, (int) (left > tick ? tick : left));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || p[i].revents == 0)
                continue;
            char chunk[16384];
            ssize_t r = read (p[i].fd, chunk, sizeof chunk);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                close (p[i].fd);
                p[i].fd = -1;
                continue;
            }
            if (i == 1) {
                size_t k = (size_t) r < sizeof etail - 1 ? (size_t) r : sizeof etail - 1;
                if (elen + k > sizeof etail - 1) {
                    size_t drop = elen + k - (sizeof etail - 1);
                    memmove (etail, etail + drop, elen - drop);
                    elen -= drop;
                }
                memcpy (etail + elen, chunk + r - k, k);
                elen += k;
            } else if (!killed && keep (out, chunk, (size_t) r) != 0) {
                out->stopped = true;
                killed = true;
                kill (-pid, SIGKILL);
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (p[i].fd >= 0)
            close (p[i].fd);
    int status = 0;
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    etail[elen] = '\0';
    while (elen && (etail[elen - 1] == '\n' || etail[elen - 1] == ' '))
        etail[--elen] = '\0';
    const char *verb = args[0];
    for (size_t i = 0; args[i]; i++)
        if (args[i][0] != '-') {
            verb = args[i];
            break;
        }
    if (timed_out) {
        git_out_clear (&none);
        return kiwi_error_make_code (err, code == KIWI_REPO_E_FETCH ? KIWI_REPO_E_TIMEOUT : code,
                                     "git %s timed out after %lld s", verb,
                                     (long long) ((timeout_ms > 0 ? timeout_ms : GIT_TIMEOUT_MS) / 1000));
    }
    if (unlimited)
        return kiwi_error_make (err, limit_errno, "limiting the size of the files git %s writes", verb);
    if (killed)
        return 0;
    int exit_code = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + (WIFSIGNALED (status) ? WTERMSIG (status) : 0);
    if (exit_code != 0)
        return kiwi_error_make_code (err, code, "git %s failed (status %d): %s", verb, exit_code, etail);
    git_out_clear (&none);
    return 0;
}

static int
git_run (const kiwi__git_call *c, const char *const *args, const char *cwd, int64_t timeout_ms, int code, git_out *out,
         kiwi_error_t *err)
{
    return git_run_watched (c, args, cwd, timeout_ms, code, out, NULL, err);
}

/* ---------- the mirror ---------- */

/* Where `url`'s mirror and its companions live under the state directory:
 * <state>/mirrors/<sha256(url)>.git, its .incoming fetch and .lock, and
 * the empty home every mirror's git gets. */
typedef struct mirror_paths {
    char dir[PATH_MAX];          /* <state>/mirrors */
    char git[PATH_MAX + 80];     /* the mirror */
    char incoming[PATH_MAX + 80];
    char lock[PATH_MAX + 100];
    char home[PATH_MAX + 32];
} mirror_paths;

static void
mirror_paths_init (mirror_paths *m, const char *state_dir, const char *url)
{
    char hex[65];
    kiwi_sha256_hex (url, hex);
    snprintf (m->dir, sizeof m->dir, "%s/mirrors", state_dir);
    snprintf (m->git, sizeof m->git, "%s/%s.git", m->dir, hex);
    snprintf (m->incoming, sizeof m->incoming, "%s/%s.incoming", m->dir, hex);
    snprintf (m->lock, sizeof m->lock, "%s/%s.lock", m->dir, hex);
    snprintf (m->home, sizeof m->home, "%s/kiwi-home", m->dir);
}

/* ---------- the version tags give ---------- */

void
kiwi_repo_version_from_describe (const char *describe, char *version, size_t cap)
{
    version[0] = '\0';
    if (describe == NULL || cap < 2)
        return;
    char line[512];
    snprintf (line, sizeof line, "%.*s", (int) strcspn (describe, "\r\n"), describe);
    /* TAG-D-gHASH: the tag may hold dashes itself, the last two are git's */
    char *g = strrchr (line, '-');
    if (g == NULL || g[1] != 'g' || g == line)
        return;
    *g = '\0';
    char *d = strrchr (line, '-');
    if (d == NULL || d == line)
        return;
    *d++ = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long long dist = strtoull (d, &end, 10);
    if (errno != 0 || end == d || *end != '\0' || dist > 1000000000ULL)
        return;
    /* the release numbers: the first digit that starts a name's part (after
     * the start, a "v", a dash, an underscore or a slash), then N(.N)* */
    const char *t = line;
    while (*t && !(isdigit ((unsigned char) *t)
                   && (t == line || strchr ("vV-_/", t[-1]) != NULL)))
        t++;
    if (*t == '\0')
        return;
    unsigned long long part[8];
    int n = 0;
    while (n < 8 && isdigit ((unsigned char) *t)) {
        errno = 0;
        part[n] = strtoull (t, &end, 10);
        if (errno != 0 || end - t > 9)
            return;
        n++;
        t = end;
        if (*t != '.' || !isdigit ((unsigned char) t[1]))
            break;
        t++;
    }
    if (n == 0)
        return;
    if (dist > 0)
        part[n - 1]++;
    size_t len = 0;
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t) snprintf (version + len, cap - len, "%s%llu", i ? "." : "", part[i]);
    if (dist > 0 && len < cap)
        len += (size_t) snprintf (version + len, cap - len, ".dev%llu", dist);
    if (len >= cap)
        version[0] = '\0'; /* cut would be another version */
}

/* Runs git `args` (naming `commit`, a full commit id) in the mirror of
 * `url`, read while no fetch writes it; what it printed into out (its
 * first line, "" when git failed: no tag is git's error). < 0 only for a
 * bad id or when the lock cannot be taken. */
static int
mirror_query (const kiwi_repo_opts *o, const char *url, const char *commit, const char *const *args, char *out,
              size_t cap, kiwi_error_t *err)
{
    out[0] = '\0';
    if (strlen (commit) != 40 || strspn (commit, "0123456789abcdef") != 40)
        return kiwi_error_make (err, EINVAL, "not a commit id: %s", commit);
    mirror_paths mp;
    mirror_paths_init (&mp, o->state_dir, url);
    kiwi__git_call mc = { .git_dir = mp.git, .home = mp.home };
    cleanup_close int lfd = open (mp.lock, O_RDWR | O_CLOEXEC);
    if (lfd < 0 || flock (lfd, LOCK_SH) < 0)
        return kiwi_error_make (err, errno, "locking %s", mp.lock);
    git_out go = { .cap = 4096 };
    kiwi_error_t gerr = NULL;
    if (git_run (&mc, args, mp.git, 60000, KIWI_REPO_E_FETCH, &go, &gerr) == 0 && go.out.data != NULL)
        snprintf (out, cap, "%.*s", (int) strcspn (go.out.data, "\r\n"), go.out.data);
    kiwi_error_free (&gerr);
    git_out_clear (&go);
    return 0;
}

int
kiwi_repo_version (const kiwi_repo_opts *o, const char *url, const char *commit, char *version, size_t cap,
                   kiwi_error_t *err)
{
    version[0] = '\0';
    char line[512];
    const char *args[] = { "describe", "--tags", "--long", "--abbrev=12", "--match", "*[0-9]*", commit, NULL };
    if (mirror_query (o, url, commit, args, line, sizeof line, err) < 0)
        return -1;
    if (line[0] != '\0')
        kiwi_repo_version_from_describe (line, version, cap);
    return 0;
}

int
kiwi_repo_commit_time (const kiwi_repo_opts *o, const char *url, const char *commit, char *iso, size_t cap,
                       kiwi_error_t *err)
{
    iso[0] = '\0';
    char line[128];
    const char *args[] = { "show", "-s", "--format=%cI", commit, NULL };
    if (mirror_query (o, url, commit, args, line, sizeof line, err) < 0)
        return -1;
    /* 2026-08-20T08:01:14-05:00 or ...Z: nothing else reaches an install */
    size_t n = strlen (line);
    if (n >= 20 && n < 40 && n < cap && line[0] >= '0' && line[0] <= '9' && line[10] == 'T'
        && strspn (line, "0123456789-:T+Z") == n)
        memcpy (iso, line, n + 1);
    return 0;
}

/* ---------- layout ---------- */

/* The git directory of a checkout: "<workspace>.git". */
static void
kiwi_repo_git_dir (const char *workspace, char *buf, size_t cap)
{
    snprintf (buf, cap, "%s.git", workspace);
}

void
kiwi_repo_clean_dir (const char *workspace, char *buf, size_t cap)
{
    snprintf (buf, cap, "%s.clean", workspace);
}

void
kiwi_repo_discard (const char *dir)
{
    kiwi_fs_remove_tree (dir, 300000, NULL);
}

void
kiwi_repo_remove (const char *workspace)
{
    char p[PATH_MAX];
    kiwi_fs_remove_tree (workspace, 300000, NULL);
    kiwi_repo_git_dir (workspace, p, sizeof p);
    kiwi_fs_remove_tree (p, 300000, NULL);
    kiwi_repo_clean_dir (workspace, p, sizeof p);
    kiwi_fs_remove_tree (p, 300000, NULL);
}

/* The call for a checkout's git directory, its work tree at `work_tree`. */
typedef struct ws_call {
    char git_dir[PATH_MAX];
    char home[PATH_MAX + 16];
    char index[PATH_MAX + 32];
    kiwi__git_call c;
} ws_call;

static void
ws_call_init (ws_call *w, const char *workspace, const char *work_tree, const char *index_name)
{
    memset (w, 0, sizeof *w);
    kiwi_repo_git_dir (workspace, w->git_dir, sizeof w->git_dir);
    snprintf (w->home, sizeof w->home, "%s/kiwi-home", w->git_dir);
    w->c.git_dir = w->git_dir;
    w->c.work_tree = work_tree;
    w->c.home = w->home;
    if (index_name != NULL) {
        snprintf (w->index, sizeof w->index, "%s/%s", w->git_dir, index_name);
        w->c.index_file = w->index;
    }
}

static int
write_text (const char *path, const char *text, size_t len, kiwi_error_t *err)
{
    cleanup_close int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return kiwi_error_make (err, errno, "creating %s", path);
    while (len > 0) {
        ssize_t w = write (fd, text, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return kiwi_error_make (err, errno, "writing %s", path);
        text += w;
        len -= (size_t) w;
    }
    return 0;
}

/* ---------- the checkout's measure ---------- */

typedef struct measure {
    char rec[8192]; /* the record being read (mode type id size\tpath) */
    size_t rl;
    bool rec_long;  /* the record is longer than rec: only its size part counts */
    uint64_t files, bytes;
    uint64_t max_files, max_bytes;
    bool over;
} measure;

static void
measure_record (measure *m)
{
    m->rec[m->rl < sizeof m->rec ? m->rl : sizeof m->rec - 1] = '\0';
    m->files++;
    /* "<mode> <type> <id> <size>\t<path>": size is "-" for trees and gitlinks */
    char *tab = strchr (m->rec, '\t');
    if (tab != NULL) {
        *tab = '\0';
        char *sp = strrchr (m->rec, ' ');
        if (sp != NULL && sp[1] >= '0' && sp[1] <= '9')
            m->bytes += strtoull (sp + 1, NULL, 10);
    }
    if ((m->max_files && m->files > m->max_files) || (m->max_bytes && m->bytes > m->max_bytes))
        m->over = true;
}

static int
measure_sink (void *ud, const char *data, size_t len)
{
    measure *m = ud;
    for (size_t i = 0; i < len && !m->over; i++) {
        if (data[i] == '\0') {
            measure_record (m);
            m->rl = 0;
            continue;
        }
        if (m->rl < sizeof m->rec - 1)
            m->rec[m->rl] = data[i];
        m->rl++;
    }
    return m->over ? 1 : 0;
}

/* ---------- no git metadata in a work tree ---------- */

/* Finds an entry named `.git` (any case) under dfd, without following
 * links; *found receives its path. Consumes dfd. */
static int
find_dotgit (int dfd, const char *prefix, char *found, size_t cap, int depth)
{
    DIR *d = fdopendir (dfd);
    if (d == NULL) {
        close (dfd);
        return 0;
    }
    struct dirent *e;
    int hit = 0;
    while (!hit && (e = readdir (d)) != NULL) {
        if (strcmp (e->d_name, ".") == 0 || strcmp (e->d_name, "..") == 0)
            continue;
        char rel[PATH_MAX];
        snprintf (rel, sizeof rel, "%s%s%s", prefix, *prefix ? "/" : "", e->d_name);
        if (strcasecmp (e->d_name, ".git") == 0) {
            snprintf (found, cap, "%s", rel);
            hit = 1;
            break;
        }
        struct stat st;
        if (depth < 1024 && fstatat (dirfd (d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode)) {
            int sub = openat (dirfd (d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                hit = find_dotgit (sub, rel, found, cap, depth + 1);
        }
    }
    closedir (d);
    return hit;
}

/* ---------- the mirror, fetched within its ceiling ---------- */

#define MB (1024 * 1024)

/* The time left before `deadline`, at least 1 ms (git_run takes 0 as its
 * default). */
static int64_t
left_ms (int64_t deadline)
{
    int64_t left = deadline - kiwi_mono_ms ();
    return left > 0 ? left : 1;
}

/* A fetch's failure as it is, or, when git ran out of time, naming the
 * setting that bounds it. Returns -1. */
static int
fetch_failed (int64_t timeout, kiwi_error_t *err)
{
    if (kiwi_error_code (*err) != KIWI_REPO_E_TIMEOUT)
        return -1;
    kiwi_error_free (err);
    return kiwi_error_make_code (err, KIWI_REPO_E_TIMEOUT,
                                 "it took longer than %lld s (KIWI_CLONE_TIMEOUT): git was stopped and what it "
                                 "wrote removed",
                                 (long long) (timeout / 1000));
}

/* Points a new mirror's HEAD where the remote's points (what clone
 * --mirror does), when the remote says: "ref: <target>\tHEAD". */
static int
mirror_head (const kiwi__git_call *fc, const char *incoming, const char *url, int64_t deadline, kiwi_error_t *err)
{
    git_out ls = { .cap = 4096 };
    const char *lr[] = { "ls-remote", "--symref", "--", url, "HEAD", NULL };
    if (git_run (fc, lr, incoming, left_ms (deadline), KIWI_REPO_E_FETCH, &ls, err) < 0)
        return -1;
    char target[256] = "";
    for (const char *l = ls.out.data; l != NULL && *l; l = strchr (l, '\n') ? strchr (l, '\n') + 1 : "") {
        size_t n = strcspn (l, "\n");
        if (n > 16 && n - 10 < sizeof target && strncmp (l, "ref: refs/", 10) == 0
            && strncmp (l + n - 5, "\tHEAD", 5) == 0) {
            snprintf (target, sizeof target, "%.*s", (int) (n - 10), l + 5);
            break;
        }
    }
    git_out_clear (&ls);
    if (!*target)
        return 0;
    kiwi__git_call hc = { .git_dir = incoming, .home = fc->home };
    const char *sr[] = { "symbolic-ref", "HEAD", target, NULL };
    return git_run (&hc, sr, incoming, 60000, KIWI_REPO_E_FETCH, NULL, err);
}

/* Moves the packs a fetch wrote into `from` (incoming's objects/pack) to
 * the mirror's: each index last, so that git never sees an index without
 * its pack. A pack's name is its content's hash: one already there is the
 * same pack. */
static int
mirror_take_packs (const char *from, const char *to, kiwi_error_t *err)
{
    for (int idx = 0; idx < 2; idx++) {
        DIR *d = opendir (from);
        if (d == NULL)
            return kiwi_error_make (err, errno, "opening %s", from);
        struct dirent *e;
        while ((e = readdir (d)) != NULL) {
            size_t l = strlen (e->d_name);
            bool is_idx = l > 4 && strcmp (e->d_name + l - 4, ".idx") == 0;
            bool is_keep = l > 5 && strcmp (e->d_name + l - 5, ".keep") == 0;
            if (strncmp (e->d_name, "pack-", 5) != 0 || is_keep || is_idx != (idx == 1))
                continue;
            char a[PATH_MAX], b[PATH_MAX];
            snprintf (a, sizeof a, "%s/%s", from, e->d_name);
            snprintf (b, sizeof b, "%s/%s", to, e->d_name);
            if (rename (a, b) < 0) {
                int saved = errno;
                closedir (d);
                return kiwi_error_make (err, saved, "moving %s into the mirror", e->d_name);
            }
        }
        closedir (d);
    }
    return 0;
}

/* Fetches `url` into `mirror`, its lock held, bounded while git runs. The
 * fetch goes into `incoming`, a bare repository of its own that starts
 * with an existing mirror's refs (packed) and borrows its objects
 * (alternates), so only what is new comes and only changed refs are
 * written; git's files there are bounded by what the ceiling leaves
 * (o->max_mb less the mirror's size) while it writes them (git_watch). The
 * mirror's objects and ref values are not touched until the fetch is
 * complete and within the ceiling: a new mirror is then `incoming`
 * renamed; an existing one takes its packs and its refs (a fetch from
 * `incoming` that finds every object present). A refused, failed or
 * timed-out fetch leaves the mirror as it was (absent, or with its objects
 * and refs). The caller removes `incoming` whatever the outcome. */
static int
mirror_fetch (const kiwi_repo_opts *o, const char *url, const char *mirror, const char *incoming, const char *mhome,
              kiwi_error_t *err)
{
    int64_t timeout = o->timeout_ms > 0 ? o->timeout_ms : 600000;
    int64_t deadline = kiwi_mono_ms () + timeout;
    kiwi_fs_remove_tree (incoming, 300000, NULL); /* left by a worker that died */
    struct stat st;
    bool fresh = stat (mirror, &st) < 0;
    int64_t max = o->max_mb > 0 ? o->max_mb * MB : 0;

    kiwi__git_call ic = { .home = mhome };
    const char *init[] = { "init", "--bare", "--quiet", "--template=", "--", incoming, NULL };
    if (git_run (&ic, init, mhome, 60000, KIWI_REPO_E_FETCH, NULL, err) < 0)
        return -1;
    char p[PATH_MAX + 80];
    if (!fresh) {
        char alt[PATH_MAX + 16];
        int n = snprintf (alt, sizeof alt, "%s/objects\n", mirror);
        snprintf (p, sizeof p, "%s/objects/info", incoming);
        mkdir (p, 0755);
        snprintf (p, sizeof p, "%s/objects/info/alternates", incoming);
        if (write_text (p, alt, (size_t) n, err) < 0)
            return -1;
        /* the mirror's refs, packed, as incoming's own: the fetch writes
         * only those that changed (a ref file each) */
        kiwi__git_call pc = { .git_dir = mirror, .home = mhome };
        const char *pr[] = { "pack-refs", "--all", "--prune", NULL };
        if (git_run (&pc, pr, mirror, 60000, KIWI_REPO_E_FETCH, NULL, err) < 0)
            return -1;
        char packed[PATH_MAX + 80];
        snprintf (packed, sizeof packed, "%s/packed-refs", mirror);
        kiwi_fs_mapped m;
        if (kiwi_fs_map (packed, true, &m, err) < 0)
            return -1;
        snprintf (p, sizeof p, "%s/packed-refs", incoming);
        int wrc = m.len > 0 ? write_text (p, m.map, m.len, err) : 0;
        kiwi_fs_unmap (&m);
        if (wrc < 0)
            return -1;
    }
    int64_t held = fresh ? 0 : kiwi_fs_tree_bytes (mirror, 0); /* its refs packed */
    kiwi__git_call fc = { .git_dir = incoming, .home = mhome, .protocols = o->protocols, .token = o->token,
                          .url = url };
    if (fresh && mirror_head (&fc, incoming, url, deadline, err) < 0)
        return fetch_failed (timeout, err);

    git_watch w = { .dir = incoming };
    if (max > 0)
        w.max_bytes = kiwi_fs_tree_bytes (incoming, 0) + (max > held ? max - held : 0);
    const char *fa[] = { "fetch", "--prune", "--quiet", "--force", "--", url, "+refs/*:refs/*", NULL };
    int rc = git_run_watched (&fc, fa, incoming, left_ms (deadline), KIWI_REPO_E_FETCH, NULL, max > 0 ? &w : NULL, err);
    if (rc < 0 && kiwi_error_code (*err) == KIWI_REPO_E_TIMEOUT)
        return fetch_failed (timeout, err);
    if (max > 0) {
        /* a file stopped at the limit fails git: what it wrote reaches it */
        int64_t got = kiwi_fs_tree_bytes (incoming, 0);
        if (w.over || (rc < 0 ? got >= w.max_bytes : got > w.max_bytes)) {
            kiwi_error_free (err);
            return kiwi_error_make_code (err, KIWI_REPO_E_TOO_LARGE,
                                         "the mirror would pass its %lld MB ceiling (KIWI_CLONE_MAX_MB; it held "
                                         "%lld MB before): git was stopped as it wrote past it and what it wrote "
                                         "removed",
                                         (long long) o->max_mb, (long long) (held / MB));
        }
    }
    if (rc < 0)
        return -1;

    kiwi__git_call lc = { .git_dir = fresh ? incoming : mirror, .home = mhome, .protocols = "file" };
    if (fresh) {
        const char *pr[] = { "pack-refs", "--all", "--prune", NULL };
        if (git_run (&lc, pr, incoming, 60000, KIWI_REPO_E_FETCH, NULL, err) < 0)
            return -1;
        if (rename (incoming, mirror) < 0)
            return kiwi_error_make (err, errno, "renaming %s to %s", incoming, mirror);
        return 0;
    }
    char to[PATH_MAX + 80];
    snprintf (p, sizeof p, "%s/objects/pack", incoming);
    snprintf (to, sizeof to, "%s/objects/pack", mirror);
    if (mirror_take_packs (p, to, err) < 0)
        return -1;
    const char *take[] = { "fetch", "--prune", "--quiet", "--force", "--", incoming, "+refs/*:refs/*", NULL };
    return git_run (&lc, take, mirror, timeout, KIWI_REPO_E_FETCH, NULL, err);
}

/* ---------- checkout ---------- */

int
kiwi_repo_checkout (const kiwi_repo_opts *o, const char *url, const char *ref, const char *workspace, char **commit,
                    kiwi_error_t *err)
{
    if (url[0] == '-' || ref[0] == '-')
        return kiwi_error_make_code (err, KIWI_REPO_E_FETCH, "refusing a repository URL or ref starting with '-'");
    mirror_paths mp;
    mirror_paths_init (&mp, o->state_dir, url);
    const char *mirrors = mp.dir, *mirror = mp.git, *incoming = mp.incoming, *lock = mp.lock, *mhome = mp.home;
    if (mkdir (o->state_dir, 0755) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", o->state_dir);
    if (mkdir (mirrors, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", mirrors);
    if (mkdir (mhome, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", mhome);
    int64_t timeout = o->timeout_ms > 0 ? o->timeout_ms : 600000;
    kiwi__git_call mc = { .git_dir = mirror, .home = mhome };

    /* one fetch at a time per mirror; others wait for it and reuse it */
    cleanup_close int lfd = open (lock, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (lfd < 0 || flock (lfd, LOCK_EX) < 0)
        return kiwi_error_make (err, errno, "locking %s", lock);
    int rc = mirror_fetch (o, url, mirror, incoming, mhome, err);
    kiwi_fs_remove_tree (incoming, 300000, NULL); /* taken, or refused */
    if (rc < 0)
        return kiwi_error_wrap (err, "fetching %s", url);
    char spec[600];
    snprintf (spec, sizeof spec, "%s^{commit}", ref);
    git_out rev = { .cap = 4096 };
    const char *rp[] = { "rev-parse", "--verify", "--quiet", "--end-of-options", spec, NULL };
    if (git_run (&mc, rp, mirror, 60000, KIWI_REPO_E_NO_REF, &rev, err) < 0 || rev.out.data == NULL) {
        git_out_clear (&rev);
        kiwi_error_free (err);
        return kiwi_error_make_code (err, KIWI_REPO_E_NO_REF, "ref `%s` does not exist in %s", ref, url);
    }
    cleanup_free char *sha = kiwi_buf_steal (&rev.out, NULL);
    sha[strcspn (sha, "\n")] = '\0';
    flock (lfd, LOCK_UN);

    /* the checkout's git directory, beside the work tree: a bare repository
     * that borrows the mirror's objects and holds no ref but a detached HEAD */
    char parent[PATH_MAX];
    snprintf (parent, sizeof parent, "%s", workspace);
    char *slash = strrchr (parent, '/');
    if (slash != NULL && slash != parent)
        *slash = '\0';
    ws_call w;
    ws_call_init (&w, workspace, workspace, NULL);
    {
        kiwi__git_call ic = { .home = mhome };
        const char *init[] = { "init", "--bare", "--quiet", "--template=", "--", w.git_dir, NULL };
        if (git_run (&ic, init, parent, 60000, KIWI_REPO_E_FETCH, NULL, err) < 0)
            return kiwi_error_wrap (err, "creating the checkout's git directory");
    }
    char p[PATH_MAX + 64];
    snprintf (p, sizeof p, "%s/objects/info", w.git_dir);
    mkdir (p, 0755);
    snprintf (p, sizeof p, "%s/info", w.git_dir);
    mkdir (p, 0755);
    if (mkdir (w.home, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", w.home);
    {
        char alt[PATH_MAX + 16];
        int n = snprintf (alt, sizeof alt, "%s/objects\n", mirror);
        snprintf (p, sizeof p, "%s/objects/info/alternates", w.git_dir);
        if (write_text (p, alt, (size_t) n, err) < 0)
            return -1;
        /* byte for byte: no end-of-line, filter, ident or encoding
         * conversion, whatever the repository's .gitattributes say */
        static const char attrs[] = "* -text !eol -filter -ident -working-tree-encoding !diff !merge\n";
        snprintf (p, sizeof p, "%s/info/attributes", w.git_dir);
        if (write_text (p, attrs, sizeof attrs - 1, err) < 0)
            return -1;
    }
    const char *head[] = { "update-ref", "--no-deref", "HEAD", sha, NULL };
    if (git_run (&w.c, head, w.git_dir, 60000, KIWI_REPO_E_FETCH, NULL, err) < 0)
        return kiwi_error_wrap (err, "checking out %s", ref);

    /* measured before anything is written: a tree that names the same
     * subtree many times is enumerated only up to the ceiling */
    measure *m = calloc (1, sizeof *m);
    if (m == NULL)
        return kiwi_error_make (err, ENOMEM, "measuring the checkout");
    m->max_files = o->max_checkout_files > 0 ? (uint64_t) o->max_checkout_files : 0;
    m->max_bytes = o->max_checkout_mb > 0 ? (uint64_t) o->max_checkout_mb * 1024 * 1024 : 0;
    git_out mo = { .sink = measure_sink, .ud = m };
    const char *ls[] = { "ls-tree", "-r", "-l", "-z", "--full-tree", sha, NULL };
    rc = git_run (&w.c, ls, w.git_dir, timeout, KIWI_REPO_E_FETCH, &mo, err);
    if (rc == 0 && m->over) {
        if (m->max_files && m->files > m->max_files)
            rc = kiwi_error_make_code (err, KIWI_REPO_E_TOO_LARGE,
                                       "the checkout of %s at %s has more than %llu files, above the ceiling "
                                       "(KIWI_CHECKOUT_MAX_FILES=%lld): nothing was written",
                                       url, ref, (unsigned long long) m->max_files, (long long) o->max_checkout_files);
        else
            rc = kiwi_error_make_code (err, KIWI_REPO_E_TOO_LARGE,
                                       "the checkout of %s at %s holds more than %llu bytes of files, above the "
                                       "ceiling (KIWI_CHECKOUT_MAX_MB=%lld): nothing was written",
                                       url, ref, (unsigned long long) m->bytes, (long long) o->max_checkout_mb);
    }
    free (m);
    if (rc < 0)
        return kiwi_error_wrap (err, "measuring %s", ref);

    if (mkdir (workspace, 0755) < 0)
        return kiwi_error_make (err, errno, "creating %s", workspace);
    const char *rt[] = { "read-tree", "--reset", "-u", sha, NULL };
    if (git_run (&w.c, rt, w.git_dir, timeout, KIWI_REPO_E_FETCH, NULL, err) < 0) {
        if (strstr (kiwi_error_msg (*err), "invalid path") != NULL) {
            char msg[1024];
            snprintf (msg, sizeof msg, "%s", kiwi_error_msg (*err));
            kiwi_error_free (err);
            return kiwi_error_make_code (err, KIWI_REPO_E_UNSAFE,
                                         "the tree of %s at %s carries a path git refuses to check out (%s)", url,
                                         ref, msg);
        }
        return kiwi_error_wrap (err, "checking out %s", ref);
    }
    char found[PATH_MAX] = "";
    int dfd = open (workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return kiwi_error_make (err, errno, "opening %s", workspace);
    if (find_dotgit (dfd, "", found, sizeof found, 0))
        return kiwi_error_make_code (err, KIWI_REPO_E_UNSAFE,
                                     "the tree of %s at %s carries git metadata (`%s`): refused", url, ref, found);
    *commit = steal_pointer (&sha);
    return 0;
}

/* ---------- diffs and trees ---------- */

int
kiwi_repo_diff (const char *workspace, const char *commit, char **diff, kiwi_error_t *err)
{
    ws_call w;
    ws_call_init (&w, workspace, workspace, "kiwi-diff-index");
    unlink (w.index);
    /* a throwaway index: the commit, then the work tree over it */
    const char *rd[] = { "read-tree", commit, NULL };
    const char *add[] = { "add", "--all", NULL };
    const char *df[] = { "diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-textconv",
                         "--no-renames", commit, "--", NULL };
    git_out out = { .cap = DIFF_MAX };
    int rc = git_run (&w.c, rd, w.git_dir, GIT_TIMEOUT_MS, 0, NULL, err);
    if (rc == 0)
        rc = git_run (&w.c, add, w.git_dir, GIT_TIMEOUT_MS, 0, NULL, err);
    if (rc == 0)
        rc = git_run (&w.c, df, w.git_dir, GIT_TIMEOUT_MS, 0, &out, err);
    unlink (w.index);
    if (rc == 0 && out.over)
        rc = kiwi_error_make (err, 0, "the diff is larger than %u MB", DIFF_MAX >> 20);
    if (rc < 0) {
        git_out_clear (&out);
        return kiwi_error_wrap (err, "diff");
    }
    *diff = out.out.data ? kiwi_buf_steal (&out.out, NULL) : strdup ("");
    return 0;
}

int
kiwi_repo_not_carried (const char *workspace, size_t max, kiwi_strv *out, kiwi_error_t *err)
{
    ws_call w;
    ws_call_init (&w, workspace, workspace, "kiwi-ignored-index");
    unlink (w.index);
    const char *rd[] = { "read-tree", "HEAD", NULL };
    const char *ls[] = { "ls-files", "-z", "--others", "--ignored", "--exclude-standard", NULL };
    git_out o = { .cap = 256 * 1024 };
    int rc = git_run (&w.c, rd, w.git_dir, GIT_TIMEOUT_MS, 0, NULL, err);
    if (rc == 0)
        rc = git_run (&w.c, ls, w.git_dir, GIT_TIMEOUT_MS, 0, &o, err);
    unlink (w.index);
    if (rc < 0)
        return kiwi_error_wrap (err, "listing ignored files");
    size_t n = 0;
    for (size_t i = 0; o.out.data && i < o.out.len && n < max; n++) {
        size_t l = strnlen (o.out.data + i, o.out.len - i);
        if (i + l >= o.out.len && o.over)
            break; /* cut by the cap */
        kiwi_strv_addf (out, "%.*s", (int) l, o.out.data + i);
        i += l + 1;
    }
    git_out_clear (&o);
    return 0;
}

int
kiwi_repo_materialise (const char *workspace, const char *commit, const char *diff, const char *dest,
                       kiwi_error_t *err)
{
    ws_call w;
    ws_call_init (&w, workspace, dest, "kiwi-clean-index");
    unlink (w.index);
    if (mkdir (dest, 0755) < 0)
        return kiwi_error_make (err, errno, "creating %s", dest);
    const char *rt[] = { "read-tree", "--reset", "-u", commit, NULL };
    int rc = git_run (&w.c, rt, w.git_dir, GIT_TIMEOUT_MS, 0, NULL, err);
    unlink (w.index);
    if (rc < 0)
        return kiwi_error_wrap (err, "checking %s out afresh", commit);
    if (diff == NULL || *diff == '\0')
        return 0;
    char patch[PATH_MAX + 32];
    snprintf (patch, sizeof patch, "%s/kiwi-result.diff", w.git_dir);
    if (write_text (patch, diff, strlen (diff), err) < 0)
        return -1;
    /* in the clean tree's root, GIT_DIR set: no discovery */
    const char *ap[] = { "apply", "--binary", "--whitespace=nowarn", "--", patch, NULL };
    rc = git_run (&w.c, ap, dest, GIT_TIMEOUT_MS, 0, NULL, err);
    unlink (patch);
    if (rc < 0)
        return kiwi_error_wrap (err, "applying the diff to %s", commit);
    return 0;
}

int
kiwi_repo_tree_id (const char *workspace, char **tree, kiwi_error_t *err)
{
    /* a throwaway index, so the checkout's own index is left alone */
    ws_call w;
    ws_call_init (&w, workspace, workspace, "kiwi-tree-index");
    unlink (w.index);
    const char *rd[] = { "read-tree", "HEAD", NULL };
    const char *add[] = { "add", "--all", NULL };
    const char *wt[] = { "write-tree", NULL };
    git_out out = { .cap = 4096 };
    int rc = git_run (&w.c, rd, w.git_dir, GIT_TIMEOUT_MS, 0, NULL, err);
    if (rc == 0)
        rc = git_run (&w.c, add, w.git_dir, GIT_TIMEOUT_MS, 0, NULL, err);
    if (rc == 0)
        rc = git_run (&w.c, wt, w.git_dir, GIT_TIMEOUT_MS, 0, &out, err);
    unlink (w.index);
    if (rc == 0 && out.out.data == NULL)
        rc = kiwi_error_make (err, 0, "git write-tree printed nothing");
    if (rc < 0) {
        git_out_clear (&out);
        return kiwi_error_wrap (err, "hashing the tree");
    }
    out.out.data[strcspn (out.out.data, "\n")] = '\0';
    *tree = kiwi_buf_steal (&out.out, NULL);
    return 0;
}
