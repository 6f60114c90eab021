/*
 * test_store_registry.c: the snapshot store client (store.h) against a real
 * OCI registry, the CNCF Distribution server Debian packages as
 * docker-registry, started by the test on a free loopback port with its
 * storage in the test's directory. A snapshot pushed under its key comes
 * back byte for byte by its manifest digest; a second push of the same
 * snapshot sends no blob again and names the same digest; a blob changed in
 * the registry's own storage is refused on the way back, and nothing of it
 * is kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "need.h"
#include "worker/task/store.h"

static char base[256];
static pid_t registry = -1;
static int port;

static int
free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    socklen_t l = sizeof a;
    if (fd < 0 || bind (fd, (struct sockaddr *) &a, sizeof a) < 0 || getsockname (fd, (struct sockaddr *) &a, &l) < 0)
        return -1;
    close (fd);
    return ntohs (a.sin_port);
}

static void
start_registry (void)
{
    snprintf (base, sizeof base, "/tmp/kiwi-store-%d", (int) getpid ());
    char cmd[600];
    snprintf (cmd, sizeof cmd, "rm -rf %s && mkdir -p %s/data", base, base);
    assert_int_equal (system (cmd), 0);
    KIWI_NEED (system ("command -v docker-registry >/dev/null") == 0, "docker-registry (ops/setup.sh installs it)");
    port = free_port ();
    assert_true (port > 0);
    char conf[300];
    snprintf (conf, sizeof conf, "%s/config.yml", base);
    FILE *f = fopen (conf, "w");
    assert_non_null (f);
    fprintf (f, "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s/data\n"
                "http:\n  addr: 127.0.0.1:%d\n",
             base, port);
    fclose (f);
    registry = fork ();
    assert_true (registry >= 0);
    if (registry == 0) {
        char logp[300];
        snprintf (logp, sizeof logp, "%s/registry.log", base);
        if (freopen (logp, "w", stdout) == NULL || freopen (logp, "a", stderr) == NULL)
            _exit (127);
        execlp ("docker-registry", "docker-registry", "serve", conf, (char *) NULL);
        _exit (127);
    }
    for (int i = 0; i < 100; i++) {
        snprintf (cmd, sizeof cmd, "curl -fsS -o /dev/null http://127.0.0.1:%d/v2/ 2>/dev/null", port);
        if (system (cmd) == 0)
            return;
        usleep (100000);
    }
    fail_msg ("docker-registry did not answer on 127.0.0.1:%d (see %s/registry.log)", port, base);
}

static void
stop_registry (void)
{
    if (registry > 0) {
        kill (registry, SIGTERM);
        waitpid (registry, NULL, 0);
        registry = -1;
    }
    char cmd[600];
    snprintf (cmd, sizeof cmd, "rm -rf %s", base);
    if (base[0])
        assert_int_equal (system (cmd), 0);
}

static void
write_file (const char *dir, const char *name, size_t size, unsigned seed)
{
    char p[600];
    snprintf (p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen (p, "wb");
    assert_non_null (f);
    for (size_t i = 0; i < size; i++)
        fputc ((int) ((i * 131 + seed) & 0xff), f);
    fclose (f);
}

static int
same_file (const char *a, const char *b)
{
    char cmd[1300];
    snprintf (cmd, sizeof cmd, "cmp -s %s %s", a, b);
    return system (cmd) == 0;
}

static void
test_push_pull_and_tamper (void **state)
{
    (void) state;
    start_registry ();
    char url[128], snap[300], back[300], again[300];
    snprintf (url, sizeof url, "http://127.0.0.1:%d/kiwi/snapshots", port);
    snprintf (snap, sizeof snap, "%s/snap", base);
    snprintf (back, sizeof back, "%s/back", base);
    snprintf (again, sizeof again, "%s/again", base);
    assert_int_equal (mkdir (snap, 0700), 0);
    assert_int_equal (mkdir (back, 0700), 0);
    assert_int_equal (mkdir (again, 0700), 0);
    write_file (snap, "src.tar", 3 * 1024 * 1024 + 17, 1); /* several curl buffers */
    write_file (snap, "home.tar", 10240, 2);

    kiwi_store *s = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_store_open (url, NULL, NULL, &s, &err), 0);
    char digest[KIWI_STORE_DIGEST_MAX], digest2[KIWI_STORE_DIGEST_MAX];
    const char *key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    if (kiwi_store_push (s, key, snap, digest, &err) < 0)
        fail_msg ("push: %s", kiwi_error_msg (err));
    assert_true (kiwi_store_digest_valid (digest));
    if (kiwi_store_push (s, key, snap, digest2, &err) < 0)
        fail_msg ("second push: %s", kiwi_error_msg (err));
    assert_string_equal (digest, digest2);

    /* the registry tags the manifest with the key */
    char cmd[1200];
    snprintf (cmd, sizeof cmd,
              "curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' "
              "http://127.0.0.1:%d/v2/kiwi/snapshots/manifests/%s | sha256sum | grep -q %s",
              port, key, digest + 7);
    assert_int_equal (system (cmd), 0);

    if (kiwi_store_pull (s, digest, back, 0, &err) < 0)
        fail_msg ("pull: %s", kiwi_error_msg (err));
    char a[700], b[700];
    snprintf (a, sizeof a, "%s/src.tar", snap);
    snprintf (b, sizeof b, "%s/src.tar", back);
    assert_true (same_file (a, b));
    snprintf (a, sizeof a, "%s/home.tar", snap);
    snprintf (b, sizeof b, "%s/home.tar", back);
    assert_true (same_file (a, b));

    /* a bound below the part's size refuses it before any byte */
    assert_int_equal (kiwi_store_pull (s, digest, again, 1024, &err), -1);
    kiwi_error_free (&err);

    /* one byte of src.tar's blob changed inside the registry's storage */
    snprintf (cmd, sizeof cmd,
              "f=$(sha256sum %s/snap/src.tar | cut -c1-64); "
              "p=%s/data/docker/registry/v2/blobs/sha256/$(echo $f | cut -c1-2)/$f/data; "
              "test -f $p && printf 'X' | dd of=$p bs=1 seek=1000 conv=notrunc status=none",
              base, base);
    assert_int_equal (system (cmd), 0);
    assert_int_equal (kiwi_store_pull (s, digest, again, 0, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "refused"));
    kiwi_error_free (&err);
    snprintf (b, sizeof b, "%s/src.tar", again);
    assert_int_not_equal (access (b, F_OK), 0);
    snprintf (b, sizeof b, "%s/src.tar.partial", again);
    assert_int_not_equal (access (b, F_OK), 0);

    /* a digest the store does not hold */
    assert_int_equal (kiwi_store_pull (s, "sha256:0000000000000000000000000000000000000000000000000000000000000000",
                                       again, 0, &err),
                      -1);
    kiwi_error_free (&err);
    kiwi_store_close (s);
    stop_registry ();
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_push_pull_and_tamper),
    };
    int rc = kiwi_run_group ("store_registry", tests, NULL, NULL);
    if (registry > 0)
        stop_registry ();
    return rc;
}
