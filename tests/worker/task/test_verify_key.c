/*
 * test_verify_key.c: the verify cache's key (kiwi_plan_verify_key) changes
 * with every field that decides a step-0 run: tree, subdirectory, command,
 * install key, image by tag and by digest, driver, credential names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "worker/task/plan.h"

static void
key (const kiwi_plan_verify_key_input *k, char out[65])
{
    assert_int_equal (kiwi_plan_verify_key (k, out), 0);
    assert_int_equal (strlen (out), 64);
}

static void
test_every_field_counts (void **state)
{
    const char *creds[] = { "NPM_TOKEN", NULL };
    const kiwi_plan_verify_key_input base = { .tree = "t1", .subdir = "", .command = "npm test",
                                              .install_key = "k1", .image = "kiwi/node:22",
                                              .image_id = "sha256:aa", .driver = "docker" };
    char k0[65], k[65];
    key (&base, k0);
    key (&base, k);
    assert_string_equal (k0, k);
    kiwi_plan_verify_key_input v[8];
    for (size_t i = 0; i < 8; i++)
        v[i] = base;
    v[0].tree = "t2";
    v[1].subdir = "/web";
    v[2].command = "npm test -- --ci";
    v[3].install_key = "k2";
    v[4].image = "kiwi/node:20";
    v[5].image_id = "sha256:bb"; /* the same tag, rebuilt */
    v[6].driver = "gvisor";
    v[7].credentials = creds;
    for (size_t i = 0; i < 8; i++) {
        key (&v[i], k);
        if (strcmp (k, k0) == 0)
            fail_msg ("field %zu left the verify key unchanged", i);
    }
    /* one field's end is not the start of another: a credential name
     * holding a newline does not read as two names */
    const char *one[] = { "A\ncredential=B", NULL }, *two[] = { "A", "B", NULL };
    kiwi_plan_verify_key_input a = base, b = base;
    a.credentials = one;
    b.credentials = two;
    key (&a, k0);
    key (&b, k);
    assert_string_not_equal (k0, k);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_every_field_counts),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
