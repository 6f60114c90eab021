/*
 * test_volumes.c: which of an image's declared volumes the Docker driver
 * masks with its disk, and which images it refuses (sandbox/docker/volumes.h):
 * paths cleaned as dockerd cleans them and each masked once, the sandbox's
 * own mounts left to mask theirs, and every hostile key refused by name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/docker/volumes.h"
#include "sandbox/sandbox.h"

static const char *const covered[] = { "/kiwi", "/tmp", NULL };

/* Plans the volumes of the JSON object `text`; returns the masks. */
static char **
plan (const char *text)
{
    json_t *v = json_loads (text, JSON_DECODE_ANY, NULL);
    assert_non_null (v);
    char **masks = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_volumes_plan (v, KIWI_SANDBOX_ROOT, covered, &masks, &err) < 0)
        fail_msg ("%s: %s", text, kiwi_error_msg (err));
    json_decref (v);
    return masks;
}

static size_t
count (char **masks)
{
    size_t n = 0;
    while (masks[n] != NULL)
        n++;
    return n;
}

static bool
has (char **masks, const char *path)
{
    for (size_t i = 0; masks[i] != NULL; i++)
        if (strcmp (masks[i], path) == 0)
            return true;
    return false;
}

/* The volumes `volumes` (a JSON object) are refused with `why` in the
 * message, code KIWI_SBE_INVALID. */
static void
refused_json (json_t *volumes, const char *why)
{
    char **masks = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_volumes_plan (volumes, KIWI_SANDBOX_ROOT, covered, &masks, &err), -1);
    assert_null (masks);
    assert_int_equal (kiwi_error_code (err), KIWI_SBE_INVALID);
    if (strstr (kiwi_error_msg (err), why) == NULL)
        fail_msg ("expected `%s` in: %s", why, kiwi_error_msg (err));
    kiwi_error_free (&err);
}

static void
refused (const char *key, const char *why)
{
    json_t *v = json_object ();
    json_object_set_new (v, "/fine", json_object ());
    json_object_set_new (v, key, json_object ());
    refused_json (v, why);
    json_decref (v);
}

static void
test_none (void **state)
{
    (void) state;
    char **masks = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_volumes_plan (NULL, KIWI_SANDBOX_ROOT, covered, &masks, &err), 0);
    assert_int_equal (count (masks), 0);
    kiwi_volumes_free (masks);
    masks = plan ("null");
    assert_int_equal (count (masks), 0);
    kiwi_volumes_free (masks);
    masks = plan ("{}");
    assert_int_equal (count (masks), 0);
    kiwi_volumes_free (masks);
}

static void
test_cleaned_once_and_covered_left (void **state)
{
    (void) state;
    char **masks = plan ("{\"/data\":{}, \"/data/\":{}, \"//data//.\":{}, \"/var/x//y/.\":{}, \"/srv/a\":{},"
                         " \"/srv/a/b\":{}, \"/tmp\":{}, \"/tmp/cache\":{}, \"/kiwi\":{}, \"/kiwi/\":{},"
                         " \"/procfs\":{}, \"/kiwi2\":{}, \"/./devices\":{}}");
    assert_int_equal (count (masks), 8);
    const char *want[] = { "/data", "/var/x/y", "/srv/a", "/srv/a/b", "/tmp/cache", "/procfs", "/kiwi2", "/devices" };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!has (masks, want[i]))
            fail_msg ("%s not masked", want[i]);
    /* the sandbox's own mounts mask a volume there already */
    assert_false (has (masks, "/tmp"));
    assert_false (has (masks, "/kiwi"));
    kiwi_volumes_free (masks);
}

static void
test_hostile_keys_refused (void **state)
{
    (void) state;
    refused ("rel/x", "`rel/x` is not an absolute path");
    refused ("", "is not an absolute path");
    refused ("./data", "is not an absolute path");
    refused ("/a/../kiwi", "`/a/../kiwi` names `..`");
    refused ("/data/..", "names `..`");
    refused ("/", "`/` is the root");
    refused ("//", "is the root");
    refused ("/./", "is the root");
    refused ("/proc", "`/proc` lies in the kernel's");
    refused ("/proc/sys/kernel", "lies in the kernel's");
    refused ("/sys", "lies in the kernel's");
    refused ("//sys/fs/cgroup", "lies in the kernel's");
    refused ("/dev/shm", "lies in the kernel's");
    refused ("/kiwi/src", "`/kiwi/src` lies inside the sandbox's disk");
    refused ("/kiwi//home/.", "lies inside the sandbox's disk");
    /* a control character is refused, and not printed as it is */
    refused ("/a\nb", "`/a?b` holds a control character");
    refused ("/a\x7f", "holds a control character");
    char long_key[KIWI_VOLUME_PATH_MAX + 2];
    long_key[0] = '/';
    memset (long_key + 1, 'a', KIWI_VOLUME_PATH_MAX);
    long_key[KIWI_VOLUME_PATH_MAX + 1] = '\0';
    refused (long_key, "is longer than 1024 bytes");
    long_key[KIWI_VOLUME_PATH_MAX] = '\0'; /* exactly the maximum: fine */
    json_t *v = json_object ();
    json_object_set_new (v, long_key, json_object ());
    char **masks = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_volumes_plan (v, KIWI_SANDBOX_ROOT, covered, &masks, &err), 0);
    assert_int_equal (count (masks), 1);
    kiwi_volumes_free (masks);
    json_decref (v);
    /* not an object at all */
    v = json_string ("/data");
    refused_json (v, "Config.Volumes is not an object");
    json_decref (v);
}

static void
test_too_many_refused (void **state)
{
    (void) state;
    json_t *v = json_object ();
    char key[32];
    for (int i = 0; i < KIWI_VOLUMES_MAX; i++) {
        snprintf (key, sizeof key, "/v/%d", i);
        json_object_set_new (v, key, json_object ());
    }
    char **masks = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_volumes_plan (v, KIWI_SANDBOX_ROOT, covered, &masks, &err), 0);
    assert_int_equal (count (masks), KIWI_VOLUMES_MAX);
    kiwi_volumes_free (masks);
    json_object_set_new (v, "/v/one-more", json_object ());
    refused_json (v, "declares 65 volumes; at most 64");
    json_decref (v);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_none),
        cmocka_unit_test (test_cleaned_once_and_covered_left),
        cmocka_unit_test (test_hostile_keys_refused),
        cmocka_unit_test (test_too_many_refused),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
