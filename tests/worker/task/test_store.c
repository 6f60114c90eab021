/*
 * test_store.c: the snapshot store's checks (store.h). What the store sends
 * is refused unless every byte hashes to the digest Redis recorded: a
 * tampered manifest, a tampered or truncated or lengthened blob; a manifest
 * naming other parts is refused too. And where a snapshot comes from is the
 * same decision for every driver.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "worker/task/store.h"

static void
digest_text (const char *s, size_t n, char out[KIWI_STORE_DIGEST_MAX])
{
    kiwi_sha256 sha;
    unsigned char d[32];
    char hex[65];
    kiwi_sha256_init (&sha);
    kiwi_sha256_update (&sha, s, n);
    kiwi_sha256_final (&sha, d);
    kiwi_sha256_digest_hex (d, hex);
    snprintf (out, KIWI_STORE_DIGEST_MAX, "sha256:%s", hex);
}

static int
check_blob (const char *data, size_t n, const char *digest, uint64_t size)
{
    kiwi_store_blob_check c;
    kiwi_store_blob_check_init (&c);
    /* fed in two pieces, as a download arrives */
    kiwi_store_blob_check_feed (&c, data, n / 2);
    kiwi_store_blob_check_feed (&c, data + n / 2, n - n / 2);
    kiwi_error_t err = NULL;
    int rc = kiwi_store_blob_check_end (&c, digest, size, &err);
    if (rc < 0)
        assert_non_null (strstr (kiwi_error_msg (err), "refused"));
    kiwi_error_free (&err);
    return rc;
}

static void
test_blob_tampered_is_refused (void **state)
{
    (void) state;
    const char blob[] = "node_modules/left-pad/index.js: module.exports = pad;";
    char d[KIWI_STORE_DIGEST_MAX];
    digest_text (blob, sizeof blob - 1, d);
    assert_int_equal (check_blob (blob, sizeof blob - 1, d, sizeof blob - 1), 0);
    char bad[sizeof blob];
    memcpy (bad, blob, sizeof blob);
    bad[5] ^= 1; /* one bit */
    assert_int_equal (check_blob (bad, sizeof blob - 1, d, sizeof blob - 1), -1);
    /* truncated, and with a byte more, under the announced size */
    assert_int_equal (check_blob (blob, sizeof blob - 2, d, sizeof blob - 1), -1);
    assert_int_equal (check_blob (blob, sizeof blob - 1, d, sizeof blob - 2), -1);
}

static const char manifest_fmt[]
    = "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
      "\"artifactType\":\"" KIWI_STORE_ARTIFACT_TYPE "\",\"config\":{\"mediaType\":\"" KIWI_STORE_CONFIG_TYPE
      "\",\"digest\":\"%s\",\"size\":2},\"layers\":["
      "{\"mediaType\":\"" KIWI_STORE_LAYER_TYPE "\",\"digest\":\"%s\",\"size\":10,"
      "\"annotations\":{\"org.opencontainers.image.title\":\"%s\"}},"
      "{\"mediaType\":\"" KIWI_STORE_LAYER_TYPE "\",\"digest\":\"%s\",\"size\":20,"
      "\"annotations\":{\"org.opencontainers.image.title\":\"%s\"}}]}";

/* three layers: the two tars and a third named by the last %s */
static const char manifest3_fmt[]
    = "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
      "\"artifactType\":\"" KIWI_STORE_ARTIFACT_TYPE "\",\"config\":{\"mediaType\":\"" KIWI_STORE_CONFIG_TYPE
      "\",\"digest\":\"%s\",\"size\":2},\"layers\":["
      "{\"mediaType\":\"" KIWI_STORE_LAYER_TYPE "\",\"digest\":\"%s\",\"size\":10,"
      "\"annotations\":{\"org.opencontainers.image.title\":\"%s\"}},"
      "{\"mediaType\":\"" KIWI_STORE_LAYER_TYPE "\",\"digest\":\"%s\",\"size\":20,"
      "\"annotations\":{\"org.opencontainers.image.title\":\"%s\"}},"
      "{\"mediaType\":\"" KIWI_STORE_FETCHED_TYPE "\",\"digest\":\"%s\",\"size\":30,"
      "\"annotations\":{\"org.opencontainers.image.title\":\"%s\"}}]}";

/* The fetch manifest rides along as a third layer; without it a snapshot
 * is as before; no tar may be missing. */
static void
test_manifest_fetched_layer (void **state)
{
    (void) state;
    char a[KIWI_STORE_DIGEST_MAX], b[KIWI_STORE_DIGEST_MAX], c[KIWI_STORE_DIGEST_MAX], cfg[KIWI_STORE_DIGEST_MAX];
    digest_text ("a", 1, a);
    digest_text ("b", 1, b);
    digest_text ("c", 1, c);
    digest_text ("{}", 2, cfg);
    char m[4096], d[KIWI_STORE_DIGEST_MAX];
    int n = snprintf (m, sizeof m, manifest3_fmt, cfg, a, "home.tar", b, "src.tar", c, "fetched.json");
    digest_text (m, (size_t) n, d);
    kiwi_store_part parts[KIWI_STORE_PARTS];
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_store_check_manifest (m, (size_t) n, d, parts, &err), 0);
    assert_string_equal (parts[2].name, "fetched.json");
    assert_string_equal (parts[2].digest, c);
    assert_int_equal (parts[2].size, 30);
    assert_string_equal (parts[0].digest, b);
    /* two layers: no fetched.json part */
    n = snprintf (m, sizeof m, manifest_fmt, cfg, a, "home.tar", b, "src.tar");
    digest_text (m, (size_t) n, d);
    assert_int_equal (kiwi_store_check_manifest (m, (size_t) n, d, parts, &err), 0);
    assert_string_equal (parts[2].name, "");
    /* the manifest in place of a tar, or twice */
    const char *bad[][3] = { { "home.tar", "fetched.json", "fetched.json" }, { "home.tar", "home.tar", "fetched.json" },
                             { "fetched.json", "src.tar", "x.tar" } };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        n = snprintf (m, sizeof m, manifest3_fmt, cfg, a, bad[i][0], b, bad[i][1], c, bad[i][2]);
        digest_text (m, (size_t) n, d);
        assert_int_equal (kiwi_store_check_manifest (m, (size_t) n, d, parts, &err), -1);
        kiwi_error_free (&err);
    }
}

static void
test_manifest_checked (void **state)
{
    (void) state;
    char a[KIWI_STORE_DIGEST_MAX], b[KIWI_STORE_DIGEST_MAX], cfg[KIWI_STORE_DIGEST_MAX];
    digest_text ("a", 1, a);
    digest_text ("b", 1, b);
    digest_text ("{}", 2, cfg);
    char m[4096], d[KIWI_STORE_DIGEST_MAX];
    int n = snprintf (m, sizeof m, manifest_fmt, cfg, a, "home.tar", b, "src.tar");
    digest_text (m, (size_t) n, d);
    kiwi_store_part parts[KIWI_STORE_PARTS];
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_store_check_manifest (m, (size_t) n, d, parts, &err), 0);
    assert_string_equal (parts[0].name, "src.tar");
    assert_string_equal (parts[0].digest, b);
    assert_int_equal (parts[0].size, 20);
    assert_string_equal (parts[1].digest, a);

    /* the same manifest with another blob's digest in it: refused by its
     * own digest before anything of it is used */
    char t[4096];
    int tn = snprintf (t, sizeof t, manifest_fmt, cfg, a, "home.tar", a, "src.tar");
    assert_int_equal (kiwi_store_check_manifest (t, (size_t) tn, d, parts, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "refused"));
    kiwi_error_free (&err);

    /* well hashed, but naming a part that is not a snapshot's */
    tn = snprintf (t, sizeof t, manifest_fmt, cfg, a, "../etc.tar", b, "src.tar");
    char td[KIWI_STORE_DIGEST_MAX];
    digest_text (t, (size_t) tn, td);
    assert_int_equal (kiwi_store_check_manifest (t, (size_t) tn, td, parts, &err), -1);
    kiwi_error_free (&err);
    /* twice the same part */
    tn = snprintf (t, sizeof t, manifest_fmt, cfg, a, "src.tar", b, "src.tar");
    digest_text (t, (size_t) tn, td);
    assert_int_equal (kiwi_store_check_manifest (t, (size_t) tn, td, parts, &err), -1);
    kiwi_error_free (&err);
    /* a digest that is not one */
    assert_int_equal (kiwi_store_check_manifest (m, (size_t) n, "sha256:../../x", parts, &err), -1);
    kiwi_error_free (&err);
}

static void
test_digest_valid (void **state)
{
    (void) state;
    char d[KIWI_STORE_DIGEST_MAX];
    digest_text ("x", 1, d);
    assert_true (kiwi_store_digest_valid (d));
    d[10] = 'G';
    assert_false (kiwi_store_digest_valid (d));
    assert_false (kiwi_store_digest_valid ("sha512:00"));
    assert_false (kiwi_store_digest_valid (NULL));
    assert_false (kiwi_store_digest_valid (""));
}

/* The source of a snapshot: local copy first, then the store by digest,
 * else an install. Every driver (docker, gvisor, firecracker) gets its
 * snapshot through this one decision in the pipeline, before the driver is
 * involved. */
static void
test_snapshot_source (void **state)
{
    (void) state;
    char d[KIWI_STORE_DIGEST_MAX];
    digest_text ("x", 1, d);
    assert_int_equal (kiwi_snapshot_source (true, d, true), KIWI_SNAPSHOT_LOCAL);
    assert_int_equal (kiwi_snapshot_source (true, NULL, false), KIWI_SNAPSHOT_LOCAL);
    assert_int_equal (kiwi_snapshot_source (false, d, true), KIWI_SNAPSHOT_FETCH);
    assert_int_equal (kiwi_snapshot_source (false, d, false), KIWI_SNAPSHOT_INSTALL);
    assert_int_equal (kiwi_snapshot_source (false, NULL, true), KIWI_SNAPSHOT_INSTALL);
    assert_int_equal (kiwi_snapshot_source (false, "/var/lib/kiwi/snapshots/k", true), KIWI_SNAPSHOT_INSTALL);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_blob_tampered_is_refused),
        cmocka_unit_test (test_manifest_checked),
        cmocka_unit_test (test_manifest_fetched_layer),
        cmocka_unit_test (test_digest_valid),
        cmocka_unit_test (test_snapshot_source),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
