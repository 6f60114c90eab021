/*
 * test_image_volumes.c: an image's VOLUME paths stay within the sandbox's
 * disk ceiling, under runc and runsc, decided from the host.
 *
 * Images of this test's own (built by the stack's dockerd FROM the base
 * sandbox image, tagged kiwi-test-volumes-<pid>, removed at the end)
 * declare volumes; a sandbox of a 64 MB disk is made from one through the
 * driver. dockerd's inspect shows every mount a bind of the sandbox's own
 * disk and none a volume; no volume appears that this sandbox uses; 200 MB
 * written into the volume paths stop at the ceiling: the bytes are on the
 * sandbox's disk (its directory on the host), at most its size, and
 * dockerd's volumes directory does not grow. Images whose volumes cannot be
 * masked safely (relative, `..`, `/`, /proc, inside /kiwi, too many) are
 * refused by name, leaving no container, disk or volume behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "sandbox/archive/archive.h"
#include "sandbox/docker/docker-api.h"
#include "need.h"
#include "sandbox-env.h"
#include "shell.h"
#include "sandbox/sandbox.h"

#define CEILING_MB 64
#define MB (1024 * 1024)

static const char *drivers[] = { "docker", "gvisor" };
static kiwi_docker *api;
static char repo[64];    /* kiwi-test-volumes-<pid>: every image of this test */
static char worker[64];  /* the sandbox env's worker id: itest-volumes-<pid> */
static int images_made;  /* tags made, for the teardown */
static const char *tags[16];

static const char *
base_image (void)
{
    return kiwi_test_env_or ("KIWI_TEST_IMAGE", "kiwi/base:bookworm");
}

static const char *
state_dir (void)
{
    return kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi");
}

/* Builds `repo`:`tag` from the base image with the Dockerfile lines
 * `lines` (the stack's dockerd, its legacy builder, nothing pulled). */
static void
build_image (const char *tag, const char *lines)
{
    cleanup_free char *dockerfile = NULL;
    assert_true (asprintf (&dockerfile, "FROM %s\n%s\n", base_image (), lines) > 0);
    kiwi_buf tar = KIWI_BUF_INIT;
    kiwi_archive_opts o;
    kiwi_archive_opts_init (&o);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_archive_add_file (&tar, "Dockerfile", dockerfile, strlen (dockerfile), 0644, &o, &err), 0);
    assert_int_equal (kiwi_archive_finish (&tar, &err), 0);
    char path[256];
    snprintf (path, sizeof path, "/build?t=%s:%s&q=1&rm=1&forcerm=1&pull=0", repo, tag);
    kiwi_docker_response r = { 0 };
    if (kiwi_docker_request (api, "POST", path, "application/x-tar", tar.data, tar.len, 300000, &r, &err) < 0)
        fail_msg ("building %s:%s: %s", repo, tag, kiwi_error_msg (err));
    kiwi_buf_free (&tar);
    if (r.status != 200 || (r.body != NULL && strstr (r.body, "errorDetail") != NULL))
        fail_msg ("building %s:%s: HTTP %ld %s", repo, tag, r.status, r.body ? r.body : "");
    kiwi_docker_response_clear (&r);
    tags[images_made++] = tag;
}

static json_t *
docker_get (const char *path)
{
    json_t *j = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_docker_call (api, "GET", path, NULL, 30000, &j, NULL, &err) < 0)
        fail_msg ("GET %s: %s", path, kiwi_error_msg (err));
    return j;
}

/* The names of every volume dockerd holds, as a JSON object of names. */
static json_t *
volume_names (void)
{
    json_t *list = docker_get ("/volumes");
    json_t *names = json_object ();
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get (list, "Volumes"), i, v)
        json_object_set_new (names, json_string_value (json_object_get (v, "Name")), json_true ());
    json_decref (list);
    return names;
}

/* Every volume in `after` and not in `before` belongs to a container of
 * another test (side by side on the same dockerd), never to `container`:
 * the sandbox made no volume. */
static void
no_volume_of (json_t *before, json_t *after, const char *container)
{
    const char *name;
    json_t *v;
    json_object_foreach (after, name, v) {
        if (json_object_get (before, name) != NULL)
            continue;
        char filters[256], path[512];
        snprintf (filters, sizeof filters, "{\"volume\":[\"%s\"]}", name);
        cleanup_free char *enc = kiwi_docker_urlencode (api, filters);
        snprintf (path, sizeof path, "/containers/json?all=1&filters=%s", enc);
        json_t *users = docker_get (path);
        if (json_array_size (users) == 0)
            fail_msg ("volume %s appeared and no other container uses it", name);
        size_t i;
        json_t *c;
        json_array_foreach (users, i, c)
        {
            const char *cname = json_string_value (json_array_get (json_object_get (c, "Names"), 0));
            if (cname != NULL && strstr (cname, container) != NULL)
                fail_msg ("sandbox %s got the volume %s", container, name);
        }
        json_decref (users);
    }
}

/* dockerd's storage root (DockerRootDir). */
static char *
docker_root (void)
{
    json_t *info = docker_get ("/info");
    char *root = strdup (json_string_value (json_object_get (info, "DockerRootDir")) ?: "");
    json_decref (info);
    assert_true (root[0] == '/');
    return root;
}

static uint64_t du_total;

static int
du_one (const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void) p;
    (void) flag;
    (void) f;
    du_total += (uint64_t) st->st_blocks * 512;
    return 0;
}

/* Bytes allocated under `dir` on the host (du), not following links. */
static uint64_t
du (const char *dir)
{
    du_total = 0;
    if (nftw (dir, du_one, 32, FTW_PHYS) < 0)
        fail_msg ("du %s: %m", dir);
    return du_total;
}

static uint64_t
allocated (const char *file)
{
    struct stat st;
    if (stat (file, &st) < 0)
        fail_msg ("stat %s on the host: %m", file);
    return (uint64_t) st.st_blocks * 512;
}

static kiwi_exec_result
run (kiwi_sandbox *sb, const char *script)
{
    const char *argv[] = { "/bin/sh", "-c", script, NULL };
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = 180000, .output_cap = 4096 };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    if (kiwi_sandbox_exec (sb, &x, &r, &err) < 0)
        fail_msg ("exec `%s`: %s", script, kiwi_error_msg (err));
    return r;
}

/* Whether this test's worker has a container or a sandbox disk left. */
static void
nothing_left (void)
{
    char filters[160], path[512];
    snprintf (filters, sizeof filters, "{\"label\":[\"org.kiwi.worker=%s\"]}", worker);
    cleanup_free char *enc = kiwi_docker_urlencode (api, filters);
    snprintf (path, sizeof path, "/containers/json?all=1&filters=%s", enc);
    json_t *list = docker_get (path);
    assert_int_equal (json_array_size (list), 0);
    json_decref (list);
    char dir[512], prefix[128];
    snprintf (dir, sizeof dir, "%s/sandboxes", state_dir ());
    snprintf (prefix, sizeof prefix, "kiwi-%s-", worker);
    DIR *d = opendir (dir);
    struct dirent *e;
    while (d != NULL && (e = readdir (d)) != NULL)
        if (strncmp (e->d_name, prefix, strlen (prefix)) == 0)
            fail_msg ("sandbox disk %s/%s left behind", dir, e->d_name);
    if (d != NULL)
        closedir (d);
}

static kiwi_sandbox_spec
spec_for (const char *image_ref)
{
    static const char *e[] = { "HOME=/kiwi/home", "TMPDIR=/kiwi/tmp", NULL };
    return (kiwi_sandbox_spec) { .image = image_ref, .network = KIWI_NET_NONE, .env = e,
                                 .limits = { .disk_mb = CEILING_MB }, .task_id = "itest", .phase = "verify" };
}

/* The image's volumes are binds of the sandbox's disk; writes there stop
 * at the ceiling, on the disk, and dockerd's volumes do not grow. */
static void
test_volumes_within_the_ceiling (void **state)
{
    (void) state;
    char image_ref[128];
    snprintf (image_ref, sizeof image_ref, "%s:%s", repo, "db");
    cleanup_free char *root = docker_root ();
    char voldir[600];
    snprintf (voldir, sizeof voldir, "%s/volumes", root);
    /* each runtime; with a lower layer under the disk (an overlay at /kiwi,
     * the ext4 beside it: the volume directories are on the ext4 all the
     * same); and a sealed verify (runsc-verify caches its mounts) */
    char lower[] = "/tmp/kiwi-volumes-lower-XXXXXX";
    assert_non_null (mkdtemp (lower));
    kiwi_test_must ("mkdir -p '%s/src' '%s/home'", lower, lower);
    const struct {
        size_t driver;
        bool lower, sealed;
    } runs[] = { { 0, false, false }, { 1, false, false }, { 0, true, false }, { 1, true, false },
                 { 1, false, true } };
    for (size_t run_no = 0; run_no < sizeof runs / sizeof runs[0]; run_no++) {
        size_t i = runs[run_no].driver;
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest-volumes");
        json_t *before = volume_names ();
        uint64_t vol_before = du (voldir);
        kiwi_sandbox_spec spec = spec_for (image_ref);
        spec.lower_dir = runs[run_no].lower ? lower : NULL;
        spec.files_sealed = runs[run_no].sealed;
        kiwi_sandbox *sb = NULL;
        kiwi_error_t err = NULL;
        if (kiwi_sandbox_create (env, &spec, &sb, &err) < 0)
            fail_msg ("%s: create: %s", drivers[i], kiwi_error_msg (err));
        char name[256];
        snprintf (name, sizeof name, "%s", kiwi_sandbox_id (sb));
        char disk_dir[600];
        snprintf (disk_dir, sizeof disk_dir, "%s/sandboxes/%s/", state_dir (), name);

        /* dockerd's own record: binds only, each volume path from the disk */
        char path[512];
        snprintf (path, sizeof path, "/containers/%s/json", name);
        json_t *c = docker_get (path);
        fprintf (stderr, "# %s: runtime %s\n", name,
                 json_string_value (json_object_get (json_object_get (c, "HostConfig"), "Runtime")));
        const char *want[] = { "/data", "/srv/cache", "/srv/cache/inner" };
        char sources[3][600] = { { 0 } };
        char bad_mount[1024] = "";
        size_t k;
        json_t *m;
        json_array_foreach (json_object_get (c, "Mounts"), k, m)
        {
            const char *type = json_string_value (json_object_get (m, "Type"));
            const char *dest = json_string_value (json_object_get (m, "Destination"));
            const char *src = json_string_value (json_object_get (m, "Source"));
            if (strcmp (type, "bind") != 0 && bad_mount[0] == '\0')
                snprintf (bad_mount, sizeof bad_mount, "%s: a %s mount at %s (%s)", drivers[i], type, dest, src);
            for (size_t w = 0; w < 3; w++)
                if (strcmp (dest, want[w]) == 0)
                    snprintf (sources[w], sizeof sources[w], "%s", src);
        }
        json_decref (c);

        /* well past the ceiling, into the volume paths */
        kiwi_exec_result r = run (sb, "dd if=/dev/zero of=/srv/cache/inner/fill bs=1M count=16 2>&1; "
                                      "dd if=/dev/zero of=/data/fill bs=1M count=200 2>&1; echo rc=$?; sync");
        uint64_t vol_after = du (voldir);
        fprintf (stderr, "# %s%s: dockerd's volumes directory %llu KB before the writes, %llu KB after\n",
                 drivers[i], spec.lower_dir ? " (lower layer)" : spec.files_sealed ? " (sealed)" : "",
                 (unsigned long long) vol_before / 1024, (unsigned long long) vol_after / 1024);
        if (vol_after > vol_before + MB)
            fail_msg ("%s: dockerd's volumes grew by %llu MB past the %d MB ceiling", drivers[i],
                      (unsigned long long) (vol_after - vol_before) / MB, CEILING_MB);
        if (bad_mount[0] != '\0')
            fail_msg ("%s", bad_mount);
        for (size_t w = 0; w < 3; w++)
            if (strncmp (sources[w], disk_dir, strlen (disk_dir)) != 0)
                fail_msg ("%s: %s is mounted from `%s`, not from the sandbox's disk %s", drivers[i], want[w],
                          sources[w], disk_dir);
        json_t *after = volume_names ();
        no_volume_of (before, after, name);
        json_decref (after);
        assert_non_null (strstr (r.output, "rc=1"));
        kiwi_exec_result_clear (&r);

        /* from the host: the bytes are on the sandbox's disk, no more than
         * its size */
        char file[700];
        snprintf (file, sizeof file, "%s/fill", sources[0]);
        uint64_t data = allocated (file);
        snprintf (file, sizeof file, "%s/fill", sources[2]);
        uint64_t inner = allocated (file);
        fprintf (stderr, "# %s%s: /data %llu MB, /srv/cache/inner %llu MB on the %d MB disk\n", drivers[i],
                 spec.lower_dir ? " (lower layer)" : spec.files_sealed ? " (sealed)" : "",
                 (unsigned long long) data / MB, (unsigned long long) inner / MB, CEILING_MB);
        assert_true (inner >= 16 * MB && inner <= 17 * MB);
        assert_true (data >= 16 * MB);
        assert_true (data + inner <= (uint64_t) CEILING_MB * MB);
        snprintf (file, sizeof file, "%sdisk.img", disk_dir);
        assert_true (allocated (file) <= (uint64_t) CEILING_MB * MB);
        after = volume_names ();
        no_volume_of (before, after, name);
        json_decref (after);
        json_decref (before);

        assert_int_equal (kiwi_sandbox_destroy (sb, &err), 0);
        kiwi_sandbox_env_close (env);
    }
    kiwi_test_must ("rm -rf '%s'", lower);
    nothing_left ();
}

typedef struct {
    const char *tag;
    const char *why;
} hostile;

static const hostile hostiles[] = {
    { "relative", "`rel/x` is not an absolute path" },
    { "dotdot", "`/a/../kiwi` names `..`" },
    { "root", "`/` is the root" },
    { "proc", "`/proc` lies in the kernel's" },
    { "kiwisrc", "`/kiwi/src` lies inside the sandbox's disk" },
    { "many", "declares 65 volumes; at most 64" },
};

/* Volumes that cannot be masked safely: the sandbox is refused by name,
 * and leaves nothing. */
static void
test_hostile_volumes_refused (void **state)
{
    (void) state;
    for (size_t i = 0; i < 2; i++) {
        kiwi_sandbox_env *env = kiwi_test_sandbox_env (drivers[i], "itest-volumes");
        json_t *before = volume_names ();
        for (size_t h = 0; h < sizeof hostiles / sizeof hostiles[0]; h++) {
            char image_ref[128];
            snprintf (image_ref, sizeof image_ref, "%s:%s", repo, hostiles[h].tag);
            kiwi_sandbox_spec spec = spec_for (image_ref);
            kiwi_sandbox *sb = NULL;
            kiwi_error_t err = NULL;
            if (kiwi_sandbox_create (env, &spec, &sb, &err) == 0) {
                char name[256];
                snprintf (name, sizeof name, "%s", kiwi_sandbox_id (sb));
                kiwi_sandbox_destroy (sb, &err);
                kiwi_error_free (&err);
                fail_msg ("%s: %s: a sandbox was made (%s)", drivers[i], image_ref, name);
            }
            assert_int_equal (kiwi_error_code (err), KIWI_SBE_INVALID);
            if (strstr (kiwi_error_msg (err), hostiles[h].why) == NULL
                || strstr (kiwi_error_msg (err), image_ref) == NULL)
                fail_msg ("%s: %s: expected `%s`: %s", drivers[i], image_ref, hostiles[h].why,
                          kiwi_error_msg (err));
            kiwi_error_free (&err);
            nothing_left ();
        }
        json_t *after = volume_names ();
        no_volume_of (before, after, worker);
        json_decref (after);
        json_decref (before);
        kiwi_sandbox_env_close (env);
    }
}

static int
setup (void **state)
{
    (void) state;
    snprintf (repo, sizeof repo, "kiwi-test-volumes-%d", (int) getpid ());
    snprintf (worker, sizeof worker, "itest-volumes-%d", (int) getpid ());
    kiwi_error_t err = NULL;
    int rc = kiwi_docker_open (kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock"), &api, &err);
    KIWI_NEED (rc == 0, "dockerd: %s", kiwi_error_msg (err));
    /* a database image's shape: a volume, and one inside another, which
     * anyone may write (dockerd copies the mode into a volume it makes) */
    build_image ("db", "USER root\n"
                       "RUN install -d -m 1777 /data /srv/cache /srv/cache/inner\n"
                       "VOLUME [\"/data\", \"/data/\", \"/srv/cache\", \"/srv/cache/inner\", \"/tmp\"]");
    build_image ("relative", "VOLUME [\"/data\", \"rel/x\"]");
    build_image ("dotdot", "VOLUME [\"/a/../kiwi\"]");
    build_image ("root", "VOLUME [\"/\"]");
    build_image ("proc", "VOLUME [\"/proc\"]");
    build_image ("kiwisrc", "VOLUME [\"/kiwi/src\"]");
    char many[2048] = "VOLUME [\"/v/0\"";
    for (int i = 1; i < 65; i++)
        snprintf (many + strlen (many), sizeof many - strlen (many), ", \"/v/%d\"", i);
    snprintf (many + strlen (many), sizeof many - strlen (many), "]");
    build_image ("many", many);
    return 0;
}

/* Removes what a failed test left (this worker's sandboxes, with any
 * volume dockerd gave them), then the test's images. */
static int
teardown (void **state)
{
    (void) state;
    kiwi_sandbox_env *env = kiwi_test_sandbox_env ("docker", "itest-volumes");
    int removed = 0;
    kiwi_error_t rerr = NULL;
    if (kiwi_sandbox_reap (env, &removed, &rerr) < 0)
        fprintf (stderr, "# reap: %s\n", kiwi_error_msg (rerr));
    kiwi_error_free (&rerr);
    kiwi_sandbox_env_close (env);
    for (int i = 0; i < images_made; i++) {
        char path[256];
        snprintf (path, sizeof path, "/images/%s:%s", repo, tags[i]);
        kiwi_error_t err = NULL;
        if (kiwi_docker_call (api, "DELETE", path, NULL, 60000, NULL, NULL, &err) < 0)
            fprintf (stderr, "# removing image %s:%s: %s\n", repo, tags[i], kiwi_error_msg (err));
        kiwi_error_free (&err);
    }
    kiwi_docker_close (api);
    return 0;
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_volumes_within_the_ceiling),
        cmocka_unit_test (test_hostile_volumes_refused),
    };
    return kiwi_run_group ("image_volumes", tests, setup, teardown);
}
