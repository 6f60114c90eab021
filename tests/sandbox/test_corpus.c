/*
 * test_corpus.c: every repository of tests/fixtures/repos/ through the real
 * thing: inspection (image, install command, cache key), the real Phase A
 * as production runs it (real package registries, only through the
 * worker's egress proxy with its default allow-list, on an install network
 * with no other way out: proxied-install.h; the CA bundle), the real Phase
 * B (no network) and step 0 (classification, one swap, stop, honest
 * result). Every install that ran must show in the proxy's log.
 * Prints one row per case: repository, test command, install command,
 * image (first -> final when swapped), the version asked (runtime,
 * requirement, the file that says so) and the catalogue version of the
 * image that ran, swapped, classification, outcome;
 * fails when any row differs from the repository's expect.json.
 *
 * Phase A snapshots are cached by the install cache key
 * (kiwi_install_cache_key) for the length of one run (cases that share a key
 * install once), in a directory of the run's own under
 * $KIWI_STATE_DIR/cache/, removed at the end: every run installs for real.
 * KIWI_TEST_INSTALL_CACHE=keep reuses $KIWI_STATE_DIR/cache/corpus across
 * runs instead (a developer's quick re-run); KIWI_TEST_INSTALL_CACHE=/DIR
 * (an absolute path) uses DIR/<driver> and leaves it: tests/run.sh gives
 * one to the whole suite, so the shards of a stage share their installs,
 * and the sanitizer stage lays the snapshots the first stage installed (the
 * same driver's) instead of installing them again; KIWI_TEST_INSTALL_CACHE=0
 * installs every case, even a shared key, anew.
 * KIWI_CORPUS_LAY_FROM=DRIVER (with the suite's cache, KIWI_TEST_INSTALL_CACHE=
 * /DIR): a case lays the snapshot DRIVER's run of the same case installed
 * (DIR/DRIVER/by-case/<repository>.<case>.<image>, a link each run writes
 * to the snapshot it used) instead of installing under this run's driver,
 * unless its expect.json says "install_under_each_driver": true (one
 * repository per package manager) or DRIVER's run left none; its Phase B
 * and step 0 still run under this driver. The gVisor shards take the runc
 * shards' installs this way: Phase A under gVisor is proved once per
 * package manager, not once per repository. KIWI_CORPUS_ONLY=a,b runs
 * only those repositories; KIWI_CORPUS_SHARD=I/N only the I-th of N shards
 * (1 <= I <= N) of the sorted repositories, those whose index modulo N is
 * I - 1, so that N tests, one per shard, cover every repository once. The driver is KIWI_SANDBOX / KIWI_SANDBOX_RUNTIME (docker by
 * default), the catalogue KIWI_IMAGE_CATALOG (ops/images/catalog.local.tsv
 * by default: no registry serves images here).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shell.h"
#include "sandbox-driver.h"
#include "common/cleanup.h"
#include "need.h"
#include "proxied-install.h"
#include "sandbox/step0.h"
#include "worker/egress/egress-proxy.h"

extern char **environ;

#define REPOS KIWI_SOURCE_DIR "/tests/fixtures/repos"

static int64_t
now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The lines of the proxy's access log at `path` (0 when there is none);
 * *bumped the reads (GET, HEAD) it saw inside TLS it terminated, *tunnels
 * the connections it spliced unseen. */
static long
proxy_requests (const char *path, long *bumped, long *tunnels)
{
    *bumped = *tunnels = 0;
    FILE *f = fopen (path, "r");
    if (f == NULL)
        return 0;
    long n = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline (&line, &cap, f) > 0) {
        n++;
        kiwi_proxy_log_entry e; /* the worker's own reading of the line */
        if (kiwi_proxy_log_parse (line, &e) < 0 || e.method == NULL)
            continue;
        *bumped += e.bump && strcmp (e.bump, "bump") == 0
                   && (strcmp (e.method, "GET") == 0 || strcmp (e.method, "HEAD") == 0);
        *tunnels += e.squid_status && strcmp (e.squid_status, "TCP_TUNNEL") == 0;
    }
    free (line);
    fclose (f);
    return n;
}

/* ----- the install cache: snapshot directories named by the cache key ----- */

typedef struct {
    kiwi_sandbox_env *env;
    const kiwi_phase_config *cfg;
    const char *workspace;
    const char *cache_dir;
    bool use_cache;
    bool cached;   /* the last install came from the cache */
    int ran;       /* installs that ran (not from the cache, not skipped) */
    char last_display[256];
    /* the case (run_case sets them) and where its installs are told by case */
    const char *repo;
    size_t idx;
    bool install_here;         /* expect.json: install_under_each_driver */
    char by_case[600];         /* <cache>/by-case, or "" without the suite's cache */
    char lay_from[600];        /* the suite's cache of KIWI_CORPUS_LAY_FROM's driver, or "" */
    const char *lay_driver;
    bool laid;                 /* the last install was laid from lay_from */
    int laid_n;
} install_ctx;

/* "<repo>.<case>.<image>" with every byte but [A-Za-z0-9._-] made '_'. */
static void
case_name (const install_ctx *c, const char *image, char *buf, size_t cap)
{
    snprintf (buf, cap, "%s.%zu.%s", c->repo, c->idx, image);
    for (char *p = buf; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.'
              || *p == '-'))
            *p = '_';
}

/* The snapshot `from`'s run of this case installed in this image: its
 * directory (malloc'd) when complete, else NULL. */
static char *
laid_snapshot (const install_ctx *c, const char *image)
{
    char name[256], link[1024], key[128];
    case_name (c, image, name, sizeof name);
    snprintf (link, sizeof link, "%s/by-case/%s", c->lay_from, name);
    ssize_t n = readlink (link, key, sizeof key - 1);
    if (n <= 0)
        return NULL;
    key[n] = '\0';
    if (strchr (key, '/') != NULL)
        return NULL;
    char dir[1024], done[1100];
    snprintf (dir, sizeof dir, "%s/%s", c->lay_from, key);
    snprintf (done, sizeof done, "%s/.complete", dir);
    return access (done, F_OK) == 0 ? strdup (dir) : NULL;
}

/* by-case/<case> -> <key>: the snapshot this case used, for a run of
 * another driver to lay (a link replaced, never followed). */
static void
tell_case (const install_ctx *c, const char *image, const char *key)
{
    if (c->by_case[0] == '\0')
        return;
    char name[256], link[1024], tmp[1100];
    case_name (c, image, name, sizeof name);
    snprintf (link, sizeof link, "%s/%s", c->by_case, name);
    snprintf (tmp, sizeof tmp, "%s.tmp-%d", link, (int) getpid ());
    mkdir (c->by_case, 0755);
    unlink (tmp);
    if (symlink (key, tmp) == 0 && rename (tmp, link) != 0)
        unlink (tmp);
}

static int
cached_install (void *ud, const kiwi_inspection *in, kiwi_install_result *r, char **snapshot_dir, kiwi_error_t *err)
{
    install_ctx *c = ud;
    *snapshot_dir = NULL;
    c->cached = false;
    c->laid = false;
    snprintf (c->last_display, sizeof c->last_display, "%s", in->install.display);
    memset (r, 0, sizeof *r);
    if (in->install.argv.n == 0) {
        r->status = KIWI_INSTALL_SKIPPED;
        snprintf (r->reason, sizeof r->reason, "no dependencies declared: Phase A skipped");
        return 0;
    }
    char dir[1024], done[1100];
    snprintf (dir, sizeof dir, "%s/%s", c->cache_dir, in->cache_key);
    snprintf (done, sizeof done, "%s/.complete", dir);
    if (c->lay_from[0] != '\0' && !c->install_here && (*snapshot_dir = laid_snapshot (c, in->image.image)) != NULL) {
        r->status = KIWI_INSTALL_OK;
        snprintf (r->reason, sizeof r->reason, "laid from the %s run's install of this case", c->lay_driver);
        c->laid = true;
        c->laid_n++;
        return 0;
    }
    if (c->use_cache && access (done, F_OK) == 0) {
        r->status = KIWI_INSTALL_OK;
        snprintf (r->reason, sizeof r->reason, "cached under %s", in->cache_key);
        c->cached = true;
        tell_case (c, in->image.image, in->cache_key);
        *snapshot_dir = strdup (dir);
        return 0;
    }
    char tmp[1100];
    snprintf (tmp, sizeof tmp, "%s.partial-%d", dir, (int) getpid ());
    kiwi_test_shf ("rm -rf '%s' '%s'", tmp, dir);
    cleanup_strv kiwi_strv dep_src = KIWI_STRV_INIT, dep_home = KIWI_STRV_INIT;
    if (kiwi_install_dep_locations (&in->install, &dep_src, &dep_home, err) < 0)
        return -1;
    kiwi_install_request ir = {
        .image = in->image.image,
        .workspace = c->workspace,
        .input = kiwi_strv_list (&in->input),
        .dep_src = kiwi_strv_list (&dep_src),
        .dep_home = kiwi_strv_list (&dep_home),
        .argv = kiwi_strv_list (&in->install.argv),
        .extra_env = kiwi_strv_list (&in->install.install_env),
        .task_id = "itest-corpus",
        .snapshot_dir = tmp,
    };
    c->ran++;
    if (kiwi_phase_install (c->env, c->cfg, &ir, r, err) < 0)
        return -1;
    if (r->status != KIWI_INSTALL_OK) {
        kiwi_test_shf ("rm -rf '%s'", tmp);
        return 0;
    }
    if (rename (tmp, dir) < 0) {
        /* another shard installed the same key meanwhile: keep its copy */
        int e = errno;
        kiwi_test_shf ("rm -rf '%s'", tmp);
        if ((e != ENOTEMPTY && e != EEXIST) || access (done, F_OK) != 0)
            return kiwi_error_make (err, e, "caching %s", dir);
    }
    FILE *f = fopen (done, "w");
    if (f)
        fclose (f);
    tell_case (c, in->image.image, in->cache_key);
    *snapshot_dir = strdup (dir);
    return 0;
}

/* ----- rows ----- */

/* "node 22": the catalogue row of `ref` for `runtime` that names a version
 * (a "*" row only says which image is the default); "-" when none does. */
static void
catalogue_version (const kiwi_image_catalog *cat, const char *ref, const char *runtime, char *buf, size_t cap)
{
    snprintf (buf, cap, "-");
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < kiwi_image_catalog_size (cat); i++) {
            const kiwi_image_entry *e = kiwi_image_catalog_get (cat, i);
            if (strcmp (e->ref, ref) != 0 || strcmp (e->version, "*") == 0)
                continue;
            if (pass == 0 && runtime && *runtime && strcmp (e->runtime, runtime) != 0)
                continue;
            snprintf (buf, cap, "%s %s", e->runtime, e->version);
            return;
        }
}

typedef struct {
    char repo[64];
    char command[96];
    char install[96];
    char image[64];
    char swapped[8];
    char cls[64];
    char outcome[24];
    char asked[96];   /* the version the repository asks for, and by which file */
    char used[48];    /* the runtime version of the image that ran, per the catalogue */
    char detail[200];
    double secs;
    bool ok;
    char why[512];
} row;

static const char *
jstr (json_t *o, const char *k, const char *def)
{
    json_t *v = json_object_get (o, k);
    return json_is_string (v) ? json_string_value (v) : def;
}

static bool
wanted_repo (const char *name)
{
    const char *only = getenv ("KIWI_CORPUS_ONLY");
    if (only == NULL || *only == '\0')
        return true;
    char buf[1024];
    snprintf (buf, sizeof buf, "%s", only);
    char *save = NULL;
    for (char *t = strtok_r (buf, ",", &save); t; t = strtok_r (NULL, ",", &save))
        if (strcmp (t, name) == 0)
            return true;
    return false;
}

/* Every package manager the corpus installs with (the first word of a
 * case's expected install command) has a repository marked
 * install_under_each_driver: a run that lays another driver's snapshots
 * still runs each one's Phase A under its own driver. */
static void
each_tool_installs_here (char *const *names, size_t n)
{
    char tools[64][32], marked[64];
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        char p[1024];
        snprintf (p, sizeof p, REPOS "/%s/expect.json", names[i]);
        json_t *doc = json_load_file (p, 0, NULL);
        assert_non_null (doc);
        bool here = json_is_true (json_object_get (doc, "install_under_each_driver"));
        size_t ci;
        json_t *c;
        json_array_foreach (json_object_get (doc, "cases"), ci, c)
        {
            char tool[32];
            if (sscanf (jstr (c, "install", "-"), "%31s", tool) != 1 || strcmp (tool, "-") == 0)
                continue;
            size_t k = 0;
            while (k < nt && strcmp (tools[k], tool) != 0)
                k++;
            if (k == nt) {
                assert_true (nt < 64);
                snprintf (tools[nt], sizeof tools[nt], "%s", tool);
                marked[nt++] = 0;
            }
            marked[k] |= here;
        }
        json_decref (doc);
    }
    for (size_t k = 0; k < nt; k++)
        if (!marked[k])
            fail_msg ("no repository that installs with %s says \"install_under_each_driver\": true in its "
                      "expect.json: a gVisor run would never run %s in its own Phase A",
                      tools[k], tools[k]);
}

/* KIWI_CORPUS_SHARD "I/N": *index = I - 1, *count = N; 0/1 when unset. */
static void
corpus_shard (size_t *index, size_t *count)
{
    *index = 0;
    *count = 1;
    const char *v = getenv ("KIWI_CORPUS_SHARD");
    if (v == NULL || *v == '\0')
        return;
    unsigned i = 0, n = 0;
    char extra;
    if (sscanf (v, "%u/%u%c", &i, &n, &extra) != 2 || n == 0 || i == 0 || i > n)
        fail_msg ("KIWI_CORPUS_SHARD=%s: expected I/N with 1 <= I <= N", v);
    *index = i - 1;
    *count = n;
}

static int
cmp_names (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

static void
check (row *r, bool cond, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

static void
check (row *r, bool cond, const char *fmt, ...)
{
    if (cond)
        return;
    r->ok = false;
    size_t l = strlen (r->why);
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (r->why + l, sizeof r->why - l, fmt, ap);
    va_end (ap);
    l = strlen (r->why);
    snprintf (r->why + l, sizeof r->why - l, "; ");
}

static void
run_case (kiwi_sandbox_env *env, const kiwi_phase_config *pc, const kiwi_image_catalog *cat,
          const kiwi_classifier *cl, const char *driver, install_ctx *ictx, const char *repo, size_t idx,
          json_t *want, row *r)
{
    memset (r, 0, sizeof *r);
    r->ok = true;
    const char *command = jstr (want, "command", "");
    snprintf (r->repo, sizeof r->repo, "%s", repo);
    snprintf (r->command, sizeof r->command, "%s", command);
    char ws[512];
    snprintf (ws, sizeof ws, "/tmp/kiwi-corpus-%d/%s-%zu", (int) getpid (), repo, idx);
    assert_int_equal (kiwi_test_shf ("rm -rf '%s' && mkdir -p '%s' && cp -a '%s/%s/.' '%s/' && rm -f '%s/expect.json'",
                                     ws, ws, REPOS, repo, ws, ws),
                      0);
    ictx->workspace = ws;
    ictx->repo = repo;
    ictx->idx = idx;
    kiwi_step0_request rq = {
        .env = env,
        .cfg = pc,
        .inspect = { .root = ws, .test_command = command, .catalog = cat, .driver = driver },
        .classifier = cl,
        .verify_timeout_ms = 300000,
        .task_id = "itest-corpus",
        .install = cached_install,
        .install_userdata = ictx,
    };
    kiwi_step0_result res;
    kiwi_error_t err = NULL;
    int64_t t0 = now_ms ();
    int rc = kiwi_step0_run (&rq, &res, &err);
    r->secs = (double) (now_ms () - t0) / 1000.0;
    if (rc < 0) {
        r->ok = false;
        snprintf (r->outcome, sizeof r->outcome, "error");
        snprintf (r->why, sizeof r->why, "%s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi_step0_result_clear (&res);
        kiwi_test_shf ("rm -rf '%s'", ws);
        return;
    }
    snprintf (r->install, sizeof r->install, "%s%s", res.insp.install.display,
              ictx->cached ? " [cached]" : ictx->laid ? " [laid]" : "");
    if (res.swapped)
        snprintf (r->image, sizeof r->image, "%s -> %s", res.first_image, res.insp.image.image);
    else
        snprintf (r->image, sizeof r->image, "%s", res.insp.image.image);
    snprintf (r->swapped, sizeof r->swapped, "%s", res.swapped ? "yes" : "no");
    snprintf (r->cls, sizeof r->cls, "%s%s%s%s", kiwi_failure_class_str (res.first.cls), res.first.rule[0] ? " (" : "",
              res.first.rule, res.first.rule[0] ? ")" : "");
    snprintf (r->outcome, sizeof r->outcome, "%s", kiwi_step0_status_str (res.status));
    const kiwi_image_resolution *im = &res.insp.image;
    if (im->requirement && *im->requirement)
        snprintf (r->asked, sizeof r->asked, "%s %s (%s)", im->runtime && *im->runtime ? im->runtime : "?",
                  im->requirement, im->requirement_from && *im->requirement_from ? im->requirement_from : "?");
    else
        snprintf (r->asked, sizeof r->asked, "-");
    catalogue_version (cat, im->image, im->runtime, r->used, sizeof r->used);
    if (res.status == KIWI_STEP0_STOPPED)
        snprintf (r->detail, sizeof r->detail, "%s%s%s", res.first.host[0] ? "host " : "", res.first.host,
                  res.first.host[0] ? "" : res.first.version);
    else if (res.swapped)
        snprintf (r->detail, sizeof r->detail, "re-ran in %s", res.insp.image.image);

    /* against expect.json */
    check (r, strcmp (res.first_image, jstr (want, "first_image", "")) == 0, "first image %s, want %s",
           res.first_image, jstr (want, "first_image", ""));
    check (r, strcmp (res.insp.image.image, jstr (want, "image", "")) == 0, "image %s, want %s",
           res.insp.image.image, jstr (want, "image", ""));
    check (r, res.swapped == json_is_true (json_object_get (want, "swapped")), "swapped %d", res.swapped);
    check (r, strcmp (res.insp.install.display, jstr (want, "install", "")) == 0, "install `%s`, want `%s`",
           res.insp.install.display, jstr (want, "install", ""));
    check (r, strcmp (kiwi_failure_class_str (res.first.cls), jstr (want, "classification", "")) == 0,
           "classification %s, want %s", kiwi_failure_class_str (res.first.cls), jstr (want, "classification", ""));
    if (json_object_get (want, "rule"))
        check (r, strcmp (res.first.rule, jstr (want, "rule", "")) == 0, "rule %s, want %s", res.first.rule,
               jstr (want, "rule", ""));
    if (json_object_get (want, "host"))
        check (r, strcmp (res.first.host, jstr (want, "host", "")) == 0, "host %s, want %s", res.first.host,
               jstr (want, "host", ""));
    check (r, strcmp (kiwi_step0_status_str (res.status), jstr (want, "outcome", "")) == 0, "outcome %s, want %s",
           kiwi_step0_status_str (res.status), jstr (want, "outcome", ""));
    /* a version wish: what was asked, by which file, which image ran, and
     * the one line that says so when the catalogue could not answer it */
    json_t *wish = json_object_get (want, "version");
    if (wish != NULL) {
        check (r, strcmp (im->requirement ? im->requirement : "", jstr (wish, "asked", "")) == 0,
               "version asked %s, want %s", im->requirement, jstr (wish, "asked", ""));
        check (r, strcmp (im->requirement_from ? im->requirement_from : "", jstr (wish, "from", "")) == 0,
               "version asked by %s, want %s", im->requirement_from, jstr (wish, "from", ""));
        check (r, strcmp (im->image, jstr (wish, "used", "")) == 0, "version used %s, want %s", im->image,
               jstr (wish, "used", ""));
        bool sat = json_is_true (json_object_get (wish, "satisfied"));
        check (r, im->satisfied == sat, "version satisfied %d", im->satisfied);
        check (r, sat ? res.wish_note == NULL : (res.wish_note && strstr (res.wish_note, jstr (wish, "from", ""))
                                                    && strstr (res.wish_note, jstr (wish, "used", ""))),
               "wish note `%s`", res.wish_note ? res.wish_note : "(none)");
    }
    if (!r->ok || getenv ("KIWI_CORPUS_VERBOSE")) {
        fprintf (stderr, "---- %s `%s`: %s\n  image: %s\n  install: %s (%s)\n", repo, command, res.reason,
                 res.insp.image.reason, res.install.reason, kiwi_install_status_str (res.install.status));
        if (res.install.output && res.install.status != KIWI_INSTALL_OK && res.install.status != KIWI_INSTALL_SKIPPED)
            fprintf (stderr, "  install output (tail):\n%s\n", res.install.output);
        if (res.run.output)
            fprintf (stderr, "  verify output (tail):\n%.6000s\n", res.run.output);
    }
    kiwi_step0_result_clear (&res);
    kiwi_test_shf ("rm -rf '%s'", ws);
}

static void
test_corpus (void **state)
{
    const char *driver = kiwi_test_sandbox_driver ();
    /* Phase A as production runs it: through the worker's egress proxy,
     * on an install network with no other way out */
    kiwi_test_proxied px;
    kiwi_test_proxied_open (&px, driver, "itest-corpus");
    kiwi_sandbox_env *env = px.env;
    kiwi_error_t err = NULL;

    const char *catpath = getenv ("KIWI_IMAGE_CATALOG");
    kiwi_image_catalog *cat = NULL;
    if (kiwi_image_catalog_open (catpath && *catpath ? catpath : KIWI_SOURCE_DIR "/ops/images/catalog.local.tsv", &cat,
                                 &err)
        < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    kiwi_classifier *cl = NULL;
    assert_int_equal (kiwi_classifier_builtin (&cl, &err), 0);
    /* the bundle a worker gives Phase A: KIWI_CA_BUNDLE (or the system's)
     * and Kiwi's CA, whose certificates the proxy shows for the registries */
    /* and, as the worker gives it for a commit made now, a time to resolve
     * Python installs as of (PIP_UPLOADED_PRIOR_TO, UV_EXCLUDE_NEWER) */
    char now[40];
    time_t t_now = time (NULL);
    struct tm tm_now;
    strftime (now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime_r (&t_now, &tm_now));
    kiwi_phase_config pc = { .host_env = (const char *const *) environ,
                             .ca_bundle = px.ca_bundle,
                             .proxy_env = kiwi_strv_list (&px.proxy_env),
                             .resolve_before = now };

    char cache_dir[512];
    const char *uc = getenv ("KIWI_TEST_INSTALL_CACHE");
    bool keep = uc && (strcmp (uc, "keep") == 0 || uc[0] == '/');
    if (uc && uc[0] == '/')
        snprintf (cache_dir, sizeof cache_dir, "%s/%s", uc, driver);
    else if (keep)
        snprintf (cache_dir, sizeof cache_dir, "%s/cache/corpus", kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"));
    else
        snprintf (cache_dir, sizeof cache_dir, "%s/cache/corpus-run-%d", kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"),
                  (int) getpid ());
    assert_int_equal (kiwi_test_shf ("mkdir -p '%s'", cache_dir), 0);
    if (!keep)
        assert_int_equal (kiwi_test_shf ("rm -rf '%s'/*", cache_dir), 0);
    install_ctx ictx = { .env = env, .cfg = &pc, .cache_dir = cache_dir, .use_cache = !(uc && strcmp (uc, "0") == 0) };
    const char *lay = getenv ("KIWI_CORPUS_LAY_FROM");
    if (uc && uc[0] == '/') {
        snprintf (ictx.by_case, sizeof ictx.by_case, "%s/by-case", cache_dir);
        if (lay && *lay && strcmp (lay, driver) != 0) {
            if (strchr (lay, '/') != NULL || strcmp (lay, "..") == 0)
                fail_msg ("KIWI_CORPUS_LAY_FROM=%s: a driver's name", lay);
            snprintf (ictx.lay_from, sizeof ictx.lay_from, "%s/%s", uc, lay);
            ictx.lay_driver = lay;
        }
    }

    /* the repositories, sorted */
    DIR *d = opendir (REPOS);
    assert_non_null (d);
    char *names[128];
    size_t nn = 0, all = 0;
    struct dirent *e;
    while ((e = readdir (d)) != NULL && nn < 128) {
        char p[1024];
        snprintf (p, sizeof p, REPOS "/%s/expect.json", e->d_name);
        if (e->d_name[0] != '.' && access (p, R_OK) == 0 && wanted_repo (e->d_name))
            names[nn++] = strdup (e->d_name);
    }
    closedir (d);
    qsort (names, nn, sizeof *names, cmp_names);
    all = nn;
    if (getenv ("KIWI_CORPUS_ONLY") == NULL) {
        assert_true (all >= 20);
        each_tool_installs_here (names, all);
    }
    /* this shard's repositories, in order */
    size_t shard, shards;
    corpus_shard (&shard, &shards);
    nn = 0;
    for (size_t i = 0; i < all; i++) {
        if (i % shards == shard)
            names[nn++] = names[i];
        else
            free (names[i]);
    }
    assert_true (nn > 0);

    row rows[160];
    size_t nr = 0;
    int64_t t0 = now_ms ();
    for (size_t i = 0; i < nn; i++) {
        char p[1024];
        snprintf (p, sizeof p, REPOS "/%s/expect.json", names[i]);
        json_error_t je;
        json_t *doc = json_load_file (p, 0, &je);
        if (doc == NULL)
            fail_msg ("%s: %s", p, je.text);
        json_t *cases = json_object_get (doc, "cases");
        assert_true (json_is_array (cases) && json_array_size (cases) > 0);
        size_t ci;
        json_t *c;
        json_array_foreach (cases, ci, c)
        {
            if (nr >= sizeof rows / sizeof rows[0])
                break;
            ictx.install_here = json_is_true (json_object_get (doc, "install_under_each_driver"));
            run_case (env, &pc, cat, cl, driver, &ictx, names[i], ci, c, &rows[nr]);
            fprintf (stderr, "corpus: %-24s %-8s %6.1fs %s\n", rows[nr].repo, rows[nr].outcome, rows[nr].secs,
                     rows[nr].ok ? "" : rows[nr].why);
            nr++;
        }
        json_decref (doc);
        free (names[i]);
    }
    double total = (double) (now_ms () - t0) / 1000.0;

    int bad = 0;
    /* the table, columns as wide as their widest cell */
    enum { NCOL = 9 };
    static const char *const head[NCOL] = { "repository", "test command", "install command", "image", "version asked",
                                            "version used", "swapped", "classification", "outcome" };
#define CELLS(r) { (r).repo, (r).command, (r).install, (r).image, (r).asked, (r).used, (r).swapped, (r).cls, (r).outcome }
    int w[NCOL];
    for (int k = 0; k < NCOL; k++)
        w[k] = (int) strlen (head[k]);
    for (size_t i = 0; i < nr; i++) {
        const char *cells[NCOL] = CELLS (rows[i]);
        for (int k = 0; k < NCOL; k++)
            if ((int) strlen (cells[k]) > w[k])
                w[k] = (int) strlen (cells[k]);
    }
    printf ("\n");
    for (int k = 0; k < NCOL; k++)
        printf ("%-*s | ", w[k], head[k]);
    printf ("detail\n");
    for (int k = 0; k < NCOL; k++)
        for (int j = 0; j < w[k] + 3; j++)
            putchar ('-');
    printf ("------\n");
    for (size_t i = 0; i < nr; i++) {
        const char *cells[NCOL] = CELLS (rows[i]);
        for (int k = 0; k < NCOL; k++)
            printf ("%-*s | ", w[k], cells[k]);
        printf ("%s%s%s%s(%.0f s)\n", rows[i].ok ? "" : "MISMATCH: ", rows[i].ok ? "" : rows[i].why, rows[i].detail,
                rows[i].detail[0] ? " " : "", rows[i].secs);
        if (!rows[i].ok)
            bad++;
    }
#undef CELLS
    printf ("\n%zu cases in %zu repositories (shard %zu of %zu, of %zu repositories), %d mismatching, %.0f s (driver %s, "
            "catalogue %s, install cache %s)\n",
            nr, nn, shard + 1, shards, all, bad, total, driver, kiwi_image_catalog_origin (cat),
            !ictx.use_cache       ? "off"
            : uc && uc[0] == '/' ? "the suite's: shared by its shards and stages"
            : keep               ? "kept across runs"
                                 : "this run only: every install real");
    fflush (stdout);
    kiwi_test_shf ("rm -rf /tmp/kiwi-corpus-%d", (int) getpid ());
    if (!keep)
        kiwi_test_shf ("rm -rf '%s'", cache_dir);
    kiwi_classifier_free (cl);
    kiwi_image_catalog_free (cat);
    /* every install that ran went through the proxy: its log has them */
    char logp[600];
    long bumped = 0, tunnels = 0;
    long requests = proxy_requests (kiwi_test_proxied_log (&px, logp, sizeof logp), &bumped, &tunnels);
    printf ("the egress proxy carried %ld request(s) for %d install(s) that ran: %ld read(s) of a registry whose TLS "
            "it terminated, %ld tunnel(s) it could not see into\n",
            requests, ictx.ran, bumped, tunnels);
    if (ictx.lay_from[0] != '\0')
        printf ("%d install(s) laid from the %s run's snapshots of the same cases (KIWI_CORPUS_LAY_FROM); the "
                "repositories marked install_under_each_driver installed under %s\n",
                ictx.laid_n, ictx.lay_driver, driver);
    kiwi_test_proxied_close (&px);
    assert_int_equal (bad, 0);
    /* every registry is read-only: the proxy sees each request (no tunnel
     * to a registry it cannot look into: the allow-list is the registries) */
    if (ictx.ran > 0) {
        assert_true (requests > 0);
        assert_true (bumped > 0);
        assert_int_equal (tunnels, 0);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_corpus),
    };
    return kiwi_run_group ("corpus", tests, NULL, NULL);
}
