/*
 * repo.c: mirrors, checkouts and diffs with git (see repo.h).
 */
#include "repo.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "proc.h"
#include "sha256.h"
#include "strv.h"

extern char **environ;

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *
base64 (const char *in)
{
    size_t n = strlen (in);
    char *out = malloc (4 * ((n + 2) / 3) + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t) (unsigned char) in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t) (unsigned char) in[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char) in[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* git's environment: the worker's, minus anything that could redirect git,
 * plus the token header for https and a non-interactive ssh. */
static int
git_env (const kiwi_repo_opts *o, const char *url, kiwi_strv *env)
{
    for (size_t i = 0; environ[i]; i++)
        if (strncmp (environ[i], "GIT_", 4) != 0)
            kiwi_strv_add (env, environ[i]);
    kiwi_strv_add (env, "GIT_TERMINAL_PROMPT=0");
    kiwi_strv_add (env, "GIT_SSH_COMMAND=ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new");
    const char *cainfo = getenv ("GIT_SSL_CAINFO");
    if (cainfo != NULL)
        kiwi_strv_addf (env, "GIT_SSL_CAINFO=%s", cainfo);
    if (o->token != NULL && *o->token && strncmp (url, "https://", 8) == 0) {
        char *cred = NULL;
        if (asprintf (&cred, "x-access-token:%s", o->token) < 0)
            return -1;
        cleanup_free char *enc = base64 (cred);
        free (cred);
        kiwi_strv_add (env, "GIT_CONFIG_COUNT=1");
        kiwi_strv_add (env, "GIT_CONFIG_KEY_0=http.extraHeader");
        kiwi_strv_addf (env, "GIT_CONFIG_VALUE_0=Authorization: Basic %s", enc ? enc : "");
    }
    return 0;
}

/* Runs git; a failure is an error with `code`, quoting git's output (which
 * never holds the token: it travels in a header). */
static int
git (const kiwi_repo_opts *o, const kiwi_strv *env, const char *const *argv, int64_t timeout_ms, int code,
     char **out, kiwi_error_t *err)
{
    kiwi_proc_result r;
    if (kiwi_proc_run (argv, kiwi_strv_list (env), NULL, (long) timeout_ms, 8192, &r, err) < 0)
        return -1;
    int rc = 0;
    if (r.timed_out)
        rc = kiwi_error_make_code (err, KIWI_REPO_E_TIMEOUT, "git %s timed out after %lld s", argv[1],
                                   (long long) (timeout_ms / 1000));
    else if (r.exit_code != 0) {
        size_t l = r.output ? strlen (r.output) : 0;
        while (l && (r.output[l - 1] == '\n' || r.output[l - 1] == ' '))
            r.output[--l] = '\0';
        rc = kiwi_error_make_code (err, code, "git %s failed (status %d): %s", argv[1], r.exit_code,
                                   r.output ? r.output : "");
    }
    if (rc == 0 && out != NULL) {
        *out = r.output;
        r.output = NULL;
    }
    kiwi_proc_result_clear (&r);
    return rc;
}

static int64_t
dir_size_mb (const char *dir)
{
    const char *argv[] = { "du", "-sm", dir, NULL };
    kiwi_proc_result r;
    kiwi_error_t err = NULL;
    int64_t mb = -1;
    if (kiwi_proc_run (argv, NULL, NULL, 60000, 256, &r, &err) == 0 && r.exit_code == 0)
        mb = atoll (r.output);
    kiwi_error_free (&err);
    kiwi_proc_result_clear (&r);
    return mb;
}

int
kiwi_repo_checkout (const kiwi_repo_opts *o, const char *url, const char *ref, const char *workspace, char **commit,
                    kiwi_error_t *err)
{
    if (url[0] == '-' || ref[0] == '-')
        return kiwi_error_make_code (err, KIWI_REPO_E_FETCH, "refusing a repository URL or ref starting with '-'");
    char hex[65];
    kiwi_sha256_hex (url, hex);
    char mirrors[PATH_MAX], mirror[PATH_MAX + 80], lock[PATH_MAX + 100];
    snprintf (mirrors, sizeof mirrors, "%s/mirrors", o->state_dir);
    snprintf (mirror, sizeof mirror, "%s/%s.git", mirrors, hex);
    snprintf (lock, sizeof lock, "%s/%s.lock", mirrors, hex);
    if (mkdir (o->state_dir, 0755) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", o->state_dir);
    if (mkdir (mirrors, 0700) < 0 && errno != EEXIST)
        return kiwi_error_make (err, errno, "creating %s", mirrors);
    cleanup_strv kiwi_strv env = KIWI_STRV_INIT;
    if (git_env (o, url, &env) < 0)
        return kiwi_error_make (err, ENOMEM, "git environment");
    int64_t timeout = o->timeout_ms > 0 ? o->timeout_ms : 600000;

    /* one fetch at a time per mirror; others wait for it and reuse it */
    cleanup_close int lfd = open (lock, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (lfd < 0 || flock (lfd, LOCK_EX) < 0)
        return kiwi_error_make (err, errno, "locking %s", lock);
    struct stat st;
    int rc;
    if (stat (mirror, &st) < 0) {
        const char *argv[] = { "git", "clone", "--mirror", "--quiet", "--", url, mirror, NULL };
        rc = git (o, &env, argv, timeout, KIWI_REPO_E_FETCH, NULL, err);
        if (rc < 0) {
            const char *rm[] = { "rm", "-rf", mirror, NULL };
            kiwi_proc_check (rm, NULL, NULL, 60000, NULL);
        }
    } else {
        const char *argv[] = { "git", "-C", mirror, "fetch", "--prune", "--quiet", "--force", "--tags",
                               "--", url, "+refs/*:refs/*", NULL };
        rc = git (o, &env, argv, timeout, KIWI_REPO_E_FETCH, NULL, err);
    }
    if (rc < 0)
        return kiwi_error_wrap (err, "fetching %s", url);
    if (o->max_mb > 0) {
        int64_t mb = dir_size_mb (mirror);
        if (mb > o->max_mb)
            return kiwi_error_make_code (err, KIWI_REPO_E_TOO_LARGE,
                                         "repository %s is %lld MB, above the %lld MB ceiling (KIWI_CLONE_MAX_MB)",
                                         url, (long long) mb, (long long) o->max_mb);
    }
    char spec[600];
    snprintf (spec, sizeof spec, "%s^{commit}", ref);
    char *sha = NULL;
    const char *rev[] = { "git", "-C", mirror, "rev-parse", "--verify", "--quiet", "--end-of-options", spec, NULL };
    if (git (o, &env, rev, 60000, KIWI_REPO_E_NO_REF, &sha, err) < 0) {
        kiwi_error_free (err);
        return kiwi_error_make_code (err, KIWI_REPO_E_NO_REF, "ref `%s` does not exist in %s", ref, url);
    }
    sha[strcspn (sha, "\n")] = '\0';
    flock (lfd, LOCK_UN);

    const char *clone[] = { "git", "clone", "--shared", "--no-checkout", "--quiet", "--", mirror, workspace, NULL };
    if (git (o, &env, clone, timeout, KIWI_REPO_E_FETCH, NULL, err) < 0) {
        free (sha);
        return kiwi_error_wrap (err, "creating the workspace");
    }
    const char *co[] = { "git", "-C", workspace, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach",
                         sha, NULL };
    if (git (o, &env, co, timeout, KIWI_REPO_E_FETCH, NULL, err) < 0) {
        free (sha);
        return kiwi_error_wrap (err, "checking out %s", ref);
    }
    *commit = sha;
    return 0;
}

int
kiwi_repo_diff (const char *workspace, const char *commit, char **diff, kiwi_error_t *err)
{
    kiwi_repo_opts o = { 0 };
    cleanup_strv kiwi_strv env = KIWI_STRV_INIT;
    git_env (&o, "", &env);
    /* include new files: mark them intent-to-add (index only) */
    const char *add[] = { "git", "-C", workspace, "add", "--all", "--intent-to-add", "--", ".", NULL };
    if (git (&o, &env, add, 120000, 0, NULL, err) < 0)
        return kiwi_error_wrap (err, "diff");
    kiwi_proc_result r;
    const char *argv[] = { "git", "-C", workspace, "-c", "core.quotepath=false", "diff", "--binary", "--no-color",
                           "--no-ext-diff", commit, "--", NULL };
    if (kiwi_proc_run (argv, kiwi_strv_list (&env), NULL, 120000, 16u * 1024 * 1024, &r, err) < 0)
        return -1;
    if (r.exit_code != 0) {
        kiwi_error_make (err, 0, "git diff failed (status %d): %s", r.exit_code, r.output ? r.output : "");
        kiwi_proc_result_clear (&r);
        return -1;
    }
    *diff = r.output;
    return 0;
}

int
kiwi_repo_tree_id (const char *workspace, char **tree, kiwi_error_t *err)
{
    kiwi_repo_opts o = { 0 };
    cleanup_strv kiwi_strv env = KIWI_STRV_INIT;
    git_env (&o, "", &env);
    /* a throwaway index, so the workspace's own index is left alone */
    char idx[PATH_MAX];
    snprintf (idx, sizeof idx, "%s/.git/kiwi-tree-index", workspace);
    kiwi_strv_addf (&env, "GIT_INDEX_FILE=%s", idx);
    const char *rd[] = { "git", "-C", workspace, "read-tree", "HEAD", NULL };
    const char *add[] = { "git", "-C", workspace, "add", "--all", "--", ".", NULL };
    const char *wt[] = { "git", "-C", workspace, "write-tree", NULL };
    char *out = NULL;
    int rc = git (&o, &env, rd, 120000, 0, NULL, err);
    if (rc == 0)
        rc = git (&o, &env, add, 120000, 0, NULL, err);
    if (rc == 0)
        rc = git (&o, &env, wt, 120000, 0, &out, err);
    unlink (idx);
    if (rc < 0)
        return kiwi_error_wrap (err, "hashing the tree");
    out[strcspn (out, "\n")] = '\0';
    *tree = out;
    return 0;
}
