/*
 * policy.c: a task's fields under the operator's policy (see policy.h).
 *
 * URLs are parsed before they are compared: a textual prefix would let
 * `https://allowed.example.evil.com` or `https://allowed.example@evil`
 * pass for `https://allowed.example`. Local repository paths are resolved
 * (symlinks, gitfiles, alternates) before they are compared with the state
 * directory, where other tasks' mirrors live.
 */
#include "worker/task/policy.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>


#define REFUSE(err, ...) kiwi_error_make_code (err, KIWI_POLICY_E_REFUSED, __VA_ARGS__)

/* ---------- lists ("a, b,c") ---------- */

/* Whether a list has no item: kiwi_strv_split_list would find none (every
 * byte a comma or white space). */
static bool
list_empty (const char *list)
{
    for (const char *p = list; p && *p; p++)
        if (*p != ',' && !isspace ((unsigned char) *p))
            return false;
    return true;
}

static bool
list_has (const char *list, const char *name, bool nocase)
{
    cleanup_strv kiwi_strv items = KIWI_STRV_INIT;
    if (kiwi_strv_split_list (&items, list, NULL, NULL) < 0)
        return false;
    for (size_t i = 0; i < items.n; i++)
        if (nocase ? strcasecmp (items.v[i], name) == 0 : strcmp (items.v[i], name) == 0)
            return true;
    return false;
}

/* ---------- URLs ---------- */

static int
default_port (const char *scheme)
{
    static const struct {
        const char *scheme;
        int port;
    } ports[] = { { "http", 80 }, { "https", 443 }, { "ssh", 22 }, { "git", 9418 } };
    for (size_t i = 0; i < sizeof ports / sizeof ports[0]; i++)
        if (strcmp (scheme, ports[i].scheme) == 0)
            return ports[i].port;
    return 0;
}

int
kiwi_url_parse (const char *s, kiwi_url *out)
{
    memset (out, 0, sizeof *out);
    size_t sl = 0;
    if (!isalpha ((unsigned char) s[0]))
        return -1;
    while (isalnum ((unsigned char) s[sl]) || s[sl] == '+' || s[sl] == '-' || s[sl] == '.')
        sl++;
    if (strncmp (s + sl, "://", 3) != 0 || sl >= sizeof out->scheme)
        return -1;
    for (size_t i = 0; i < sl; i++)
        out->scheme[i] = (char) tolower ((unsigned char) s[i]);
    const char *auth = s + sl + 3;
    size_t al = strcspn (auth, "/?#");
    const char *host = auth, *end = auth + al;
    for (const char *q = auth; q < end; q++) {
        if (*q == '@') {
            out->userinfo = true;
            host = q + 1;
        }
        if (*q == '\\' || *q == '%' || (unsigned char) *q <= ' ')
            return -1;
    }
    const char *hend, *port = NULL;
    if (*host == '[') {
        hend = memchr (host, ']', (size_t) (end - host));
        if (hend == NULL)
            return -1;
        hend++;
        if (hend < end && *hend != ':')
            return -1;
    } else {
        hend = memchr (host, ':', (size_t) (end - host));
        if (hend == NULL)
            hend = end;
    }
    if (hend < end)
        port = hend + 1;
    size_t hl = (size_t) (hend - host);
    if (hl > 1 && host[hl - 1] == '.' && *host != '[') /* "example.com." is example.com */
        hl--;
    if (hl == 0 || hl >= sizeof out->host)
        return -1;
    for (size_t i = 0; i < hl; i++) {
        unsigned char c = (unsigned char) host[i];
        if (!(isalnum (c) || c == '.' || c == '-' || c == '_' || (*host == '[' && (c == ':' || c == '[' || c == ']'))))
            return -1;
        out->host[i] = (char) tolower (c);
    }
    if (port != NULL) {
        if (port == end)
            return -1;
        long v = 0;
        for (const char *q = port; q < end; q++) {
            if (!isdigit ((unsigned char) *q))
                return -1;
            v = v * 10 + (*q - '0');
            if (v > 65535)
                return -1;
        }
        if (v == 0)
            return -1;
        out->port = (int) v;
    } else
        out->port = default_port (out->scheme);
    size_t pl = strcspn (end, "?#");
    if (pl >= sizeof out->path)
        return -1;
    if (pl == 0)
        snprintf (out->path, sizeof out->path, "/");
    else
        snprintf (out->path, sizeof out->path, "%.*s", (int) pl, end);
    if (out->path[0] != '/')
        return -1;
    return 0;
}

/* A path a server or libcurl could turn into another one: dot segments,
 * encoded dots or slashes, backslashes. */
static bool
path_tricky (const char *path)
{
    if (strchr (path, '\\') != NULL || strcasestr (path, "%2e") != NULL || strcasestr (path, "%2f") != NULL
        || strcasestr (path, "%5c") != NULL)
        return true;
    for (const char *p = path; p != NULL; p = strchr (p + 1, '/')) {
        const char *seg = p + 1;
        size_t l = strcspn (seg, "/");
        if ((l == 1 && seg[0] == '.') || (l == 2 && seg[0] == '.' && seg[1] == '.'))
            return true;
    }
    return false;
}

bool
kiwi_url_under (const char *url, const char *prefix)
{
    kiwi_url u, p;
    if (kiwi_url_parse (url, &u) < 0 || kiwi_url_parse (prefix, &p) < 0)
        return false;
    if (u.userinfo || p.userinfo || path_tricky (u.path))
        return false;
    if (strcmp (u.scheme, p.scheme) != 0 || strcmp (u.host, p.host) != 0 || u.port != p.port)
        return false;
    size_t l = strlen (p.path);
    if (strncmp (u.path, p.path, l) != 0)
        return false;
    return p.path[l - 1] == '/' || u.path[l] == '\0' || u.path[l] == '/';
}

/* ---------- the model ---------- */

static int
decide_model (const kiwi_worker_config *cfg, const kiwi_task *task, kiwi_task_policy *out, kiwi_error_t *err)
{
    out->model_base_url = cfg->model_base_url;
    if (!task->has_model || task->model.base_url == NULL)
        return 0;
    const char *want = task->model.base_url;
    if (list_empty (cfg->model_base_urls))
        return REFUSE (err,
                       "task.model.base_url: %s is not in KIWI_MODEL_BASE_URLS (empty: tasks cannot choose a base "
                       "URL)",
                       want);
    cleanup_strv kiwi_strv items = KIWI_STRV_INIT;
    if (kiwi_strv_split_list (&items, cfg->model_base_urls, NULL, err) < 0)
        return -1;
    for (size_t i = 0; i < items.n; i++)
        if (kiwi_url_under (want, items.v[i])) {
            out->model_base_url = want;
            return 0;
        }
    return REFUSE (err, "task.model.base_url: %s is not in KIWI_MODEL_BASE_URLS (%s)", want, cfg->model_base_urls);
}

/* ---------- the repository ---------- */

static const char *const known_schemes[] = { "https", "http", "ssh", "git" };

static int
check_schemes (const char *list, kiwi_error_t *err)
{
    cleanup_strv kiwi_strv items = KIWI_STRV_INIT;
    if (kiwi_strv_split_list (&items, list, NULL, err) < 0)
        return -1;
    for (size_t i = 0; i < items.n; i++) {
        const char *item = items.v[i];
        bool ok = false;
        for (size_t k = 0; k < sizeof known_schemes / sizeof known_schemes[0]; k++)
            ok = ok || strcasecmp (item, known_schemes[k]) == 0;
        if (!ok)
            return REFUSE (err,
                           "KIWI_REPO_SCHEMES: unknown scheme `%s` (known: https, http, ssh, git; local paths and "
                           "file:// are KIWI_ALLOW_LOCAL_REPOS)",
                           item);
    }
    return 0;
}

/* True when `path` (resolved) is the state directory or inside it. */
static bool
inside (const char *real, const char *state_real)
{
    size_t l = strlen (state_real);
    while (l > 1 && state_real[l - 1] == '/')
        l--;
    return strncmp (real, state_real, l) == 0 && (real[l] == '\0' || real[l] == '/' || l == 1);
}

/* The directory a gitfile ("gitdir: PATH") points to, resolved against the
 * file's directory, into out; false when `file` is not one. */
static bool
read_gitfile (const char *file, char *out, size_t cap)
{
    FILE *f = fopen (file, "re");
    if (f == NULL)
        return false;
    char line[PATH_MAX + 16] = "";
    bool ok = fgets (line, sizeof line, f) != NULL && strncmp (line, "gitdir:", 7) == 0;
    fclose (f);
    if (!ok)
        return false;
    char *g = line + 7;
    while (*g == ' ')
        g++;
    g[strcspn (g, "\r\n")] = '\0';
    if (*g == '/')
        snprintf (out, cap, "%s", g);
    else {
        char dir[PATH_MAX];
        snprintf (dir, sizeof dir, "%s", file);
        char *slash = strrchr (dir, '/');
        if (slash)
            *slash = '\0';
        snprintf (out, cap, "%s/%s", slash ? dir : ".", g);
    }
    return true;
}

/* Refuses `real` (a resolved path git would read objects from) and the
 * alternates it names when any is inside the state directory. */
static int
check_git_dir (const char *real, const char *state_real, const char *url, int depth, kiwi_error_t *err)
{
    if (inside (real, state_real))
        return REFUSE (err,
                       "task.repo.url: %s is inside the worker's state directory %s (other tasks' mirrors): refused "
                       "even with KIWI_ALLOW_LOCAL_REPOS",
                       url, state_real);
    if (depth > 4)
        return 0;
    const char *subs[] = { "objects/info/alternates", ".git/objects/info/alternates" };
    for (size_t i = 0; i < 2; i++) {
        char alt[PATH_MAX + 64];
        snprintf (alt, sizeof alt, "%s/%s", real, subs[i]);
        FILE *f = fopen (alt, "re");
        if (f == NULL)
            continue;
        char line[PATH_MAX];
        int rc = 0;
        while (rc == 0 && fgets (line, sizeof line, f)) {
            line[strcspn (line, "\r\n")] = '\0';
            if (line[0] == '\0' || line[0] == '#')
                continue;
            char joined[2 * PATH_MAX + 2], r[PATH_MAX];
            if (line[0] == '/')
                snprintf (joined, sizeof joined, "%s", line);
            else /* relative to the objects directory */
                snprintf (joined, sizeof joined, "%s/%s%s", real, i == 0 ? "objects/" : ".git/objects/", line);
            if (realpath (joined, r) != NULL)
                rc = check_git_dir (r, state_real, url, depth + 1, err);
        }
        fclose (f);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int
check_local (const kiwi_worker_config *cfg, const char *url, kiwi_error_t *err)
{
    if (!cfg->allow_local_repos)
        return REFUSE (err, "task.repo.url: %s is a local repository, and KIWI_ALLOW_LOCAL_REPOS is false", url);
    const char *path = url;
    if (strncasecmp (url, "file://", 7) == 0) {
        path = url + 7;
        if (strncasecmp (path, "localhost/", 10) == 0)
            path += 9;
        if (*path != '/')
            return REFUSE (err, "task.repo.url: %s: a file:// URL names no host but localhost", url);
    }
    char real[PATH_MAX], state_real[PATH_MAX];
    if (realpath (path, real) == NULL)
        return REFUSE (err, "task.repo.url: %s: no such local repository", url);
    if (realpath (cfg->state_dir, state_real) == NULL)
        snprintf (state_real, sizeof state_real, "%s", cfg->state_dir);
    if (check_git_dir (real, state_real, url, 0, err) < 0)
        return -1;
    /* git follows a gitfile (the path itself, or its .git) to the real
     * repository */
    struct stat st;
    char gf[PATH_MAX + 8], target[2 * PATH_MAX], treal[PATH_MAX];
    if (stat (real, &st) == 0 && S_ISDIR (st.st_mode))
        snprintf (gf, sizeof gf, "%s/.git", real);
    else
        snprintf (gf, sizeof gf, "%s", real);
    if (stat (gf, &st) == 0 && S_ISREG (st.st_mode) && read_gitfile (gf, target, sizeof target)
        && realpath (target, treal) != NULL && check_git_dir (treal, state_real, url, 0, err) < 0)
        return -1;
    return 0;
}

static int
decide_repo (const kiwi_worker_config *cfg, const kiwi_task *task, kiwi_task_policy *out, kiwi_error_t *err)
{
    const char *url = task->repo.url;
    const char *schemes = cfg->repo_schemes;
    if (check_schemes (schemes, err) < 0)
        return -1;
    /* git's protocols for this task: what the operator allows */
    out->git_protocols[0] = '\0';
    for (size_t i = 0; i < sizeof known_schemes / sizeof known_schemes[0]; i++)
        if (list_has (schemes, known_schemes[i], true))
            snprintf (out->git_protocols + strlen (out->git_protocols),
                      sizeof out->git_protocols - strlen (out->git_protocols), "%s%s",
                      out->git_protocols[0] ? ":" : "", known_schemes[i]);
    if (cfg->allow_local_repos)
        snprintf (out->git_protocols + strlen (out->git_protocols),
                  sizeof out->git_protocols - strlen (out->git_protocols), "%sfile",
                  out->git_protocols[0] ? ":" : "");

    size_t first_slash = strcspn (url, "/");
    const char *dc = strstr (url, "::");
    if (dc != NULL && (size_t) (dc - url) < first_slash)
        return REFUSE (err, "task.repo.url: %s: git's transport::address form is not accepted", url);
    const char *scheme = NULL;
    char sbuf[16] = "";
    const char *sep = strstr (url, "://");
    if (sep != NULL && (size_t) (sep - url) < first_slash) {
        size_t l = (size_t) (sep - url);
        snprintf (sbuf, sizeof sbuf, "%.*s", (int) (l < sizeof sbuf ? l : sizeof sbuf - 1), url);
        for (char *c = sbuf; *c; c++)
            *c = (char) tolower ((unsigned char) *c);
        if (strcmp (sbuf, "file") == 0) {
            out->local_repo = true;
            return check_local (cfg, url, err);
        }
        if (strcmp (sbuf, "git+ssh") == 0 || strcmp (sbuf, "ssh+git") == 0)
            scheme = "ssh";
        else
            scheme = sbuf;
        kiwi_url u;
        if (kiwi_url_parse (url, &u) < 0 || u.host[0] == '-')
            return REFUSE (err, "task.repo.url: %s is not a URL git can be trusted with", url);
        if (!list_has (schemes, scheme, true))
            return REFUSE (err, "task.repo.url: %s: scheme %s is not in KIWI_REPO_SCHEMES (%s)", url, sbuf,
                           schemes ? schemes : "");
        if (strcmp (scheme, "https") == 0 && !u.userinfo) {
            cleanup_strv kiwi_strv items = KIWI_STRV_INIT;
            if (kiwi_strv_split_list (&items, cfg->git_token_hosts, NULL, err) < 0)
                return -1;
            for (size_t i = 0; i < items.n; i++) {
                const char *item = items.v[i];
                kiwi_url h;
                char as_url[320];
                snprintf (as_url, sizeof as_url, "https://%s/", item);
                if (kiwi_url_parse (as_url, &h) == 0 && !h.userinfo && strcmp (h.host, u.host) == 0
                    && h.port == u.port)
                    out->git_token = true;
            }
        }
        return 0;
    }
    /* [user@]host:path is ssh (a colon before the first slash) */
    const char *colon = strchr (url, ':');
    if (colon != NULL && (size_t) (colon - url) < first_slash) {
        const char *at = memchr (url, '@', (size_t) (colon - url));
        const char *host = at ? at + 1 : url;
        if (host == colon || *host == '-')
            return REFUSE (err, "task.repo.url: %s names no ssh host", url);
        if (!list_has (schemes, "ssh", true))
            return REFUSE (err, "task.repo.url: %s: scheme ssh (user@host:path) is not in KIWI_REPO_SCHEMES (%s)",
                           url, schemes ? schemes : "");
        return 0;
    }
    out->local_repo = true;
    return check_local (cfg, url, err);
}

/* ---------- limits ---------- */

/* A limit at the schema's default was not asked for: the operator's value.
 * Otherwise the task's, never above the operator's. */
static uint64_t
clamp (uint64_t asked, uint64_t schema_default, int64_t ceiling)
{
    uint64_t c = ceiling > 0 ? (uint64_t) ceiling : 0;
    if (asked == schema_default || asked > c)
        return c;
    return asked;
}

static void
decide_limits (const kiwi_worker_config *cfg, const kiwi_task *task, kiwi_task_policy *out)
{
    const kiwi_task_limits *l = &task->limits;
    out->limits = *l;
    out->limits.timeout_seconds = (uint32_t) clamp (l->timeout_seconds, KIWI_TASK_TIMEOUT_DEFAULT, cfg->task_timeout_s);
    out->limits.disk_mb = (uint32_t) clamp (l->disk_mb, KIWI_TASK_DISK_MB_DEFAULT, cfg->max_disk_mb);
    out->limits.max_rounds = (uint32_t) clamp (l->max_rounds, KIWI_TASK_MAX_ROUNDS_DEFAULT, cfg->max_rounds);
    uint64_t budget = (uint64_t) cfg->session_budget_tokens;
    out->limits.has_session_budget_tokens = true;
    out->limits.session_budget_tokens
        = l->has_session_budget_tokens && l->session_budget_tokens < budget ? l->session_budget_tokens : budget;
    out->memory_mb = cfg->memory_mb;
    out->pids = cfg->pids;
    out->cpus = cfg->cpus;
}

/* ---------- test credentials ---------- */

static int
decide_credentials (const kiwi_worker_config *cfg, const kiwi_task *task, kiwi_error_t *err)
{
    for (size_t i = 0; i < task->n_test_credentials; i++) {
        const char *name = task->test_credentials[i];
        if (!list_has (cfg->test_credentials, name, false))
            return REFUSE (err, "task.test_credentials[%zu]: %s is not in KIWI_TEST_CREDENTIALS (%s)", i, name,
                           list_empty (cfg->test_credentials) ? "empty: tasks cannot ask for credentials"
                                                               : cfg->test_credentials);
    }
    return 0;
}

int
kiwi_policy_check_config (const kiwi_worker_config *cfg, kiwi_error_t *err)
{
    if (check_schemes (cfg->repo_schemes, err) < 0)
        return -1;
    cleanup_strv kiwi_strv items = KIWI_STRV_INIT;
    if (kiwi_strv_split_list (&items, cfg->model_base_urls, NULL, err) < 0)
        return -1;
    kiwi_url u;
    for (size_t i = 0; i < items.n; i++)
        if (kiwi_url_parse (items.v[i], &u) < 0 || u.userinfo)
            return kiwi_error_make (err, 0,
                                    "KIWI_MODEL_BASE_URLS: `%s` is not a URL prefix (scheme://host[:port][/path], no "
                                    "user@)",
                                    items.v[i]);
    cleanup_strv kiwi_strv hosts = KIWI_STRV_INIT;
    if (kiwi_strv_split_list (&hosts, cfg->git_token_hosts, NULL, err) < 0)
        return -1;
    for (size_t i = 0; i < hosts.n; i++) {
        const char *item = hosts.v[i];
        char as_url[2100];
        snprintf (as_url, sizeof as_url, "https://%s/", item);
        if (strpbrk (item, "/@?#") != NULL || kiwi_url_parse (as_url, &u) < 0)
            return kiwi_error_make (err, 0, "KIWI_GIT_TOKEN_HOSTS: `%s` is not a host or host:port", item);
    }
    return 0;
}

int
kiwi_policy_apply (const kiwi_worker_config *cfg, const kiwi_task *task, kiwi_task_policy *out, kiwi_error_t *err)
{
    memset (out, 0, sizeof *out);
    decide_limits (cfg, task, out);
    if (decide_model (cfg, task, out, err) < 0 || decide_repo (cfg, task, out, err) < 0
        || decide_credentials (cfg, task, err) < 0)
        return -1;
    return 0;
}

kiwi_task
kiwi_policy_task (const kiwi_task *task, const kiwi_task_policy *pol)
{
    kiwi_task t = *task;
    t.limits = pol->limits;
    return t;
}

json_t *
kiwi_policy_limits_json (const kiwi_task_policy *pol)
{
    const kiwi_task_limits *l = &pol->limits;
    json_t *o = json_pack ("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b}", "timeout_seconds", (json_int_t) l->timeout_seconds,
                           "disk_mb", (json_int_t) l->disk_mb, "max_rounds", (json_int_t) l->max_rounds,
                           "session_budget_tokens", (json_int_t) l->session_budget_tokens, "memory_mb",
                           (json_int_t) pol->memory_mb, "pids", (json_int_t) pol->pids, "cpus", (json_int_t) pol->cpus,
                           "git_token", pol->git_token);
    if (o != NULL && l->has_session_budget_usd_micros)
        json_object_set_new (o, "session_budget_usd_micros", json_integer ((json_int_t) l->session_budget_usd_micros));
    return o;
}
