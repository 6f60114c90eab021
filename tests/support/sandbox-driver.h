/*
 * sandbox-driver.h: which sandbox driver a test runs its sandboxes with,
 * from the environment the suite is started in (KIWI_SANDBOX, then
 * KIWI_SANDBOX_RUNTIME, then "docker"), as kiwi-worker's settings would
 * choose it. The programs read it through their settings table; only tests
 * read it here.
 */
#ifndef KIWI_TEST_SANDBOX_DRIVER_H
#define KIWI_TEST_SANDBOX_DRIVER_H

/* The driver's name (static or from the environment). */
const char *kiwi_test_sandbox_driver (void);

#endif
