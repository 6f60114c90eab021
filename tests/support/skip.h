/*
 * skip.h: skipped test cases that ctest sees. cmocka's skip() marks a case
 * skipped but the program still exits 0, so ctest would report "Passed" for
 * a suite that ran nothing. Here every skip goes through KIWI_SKIP(), which
 * prints one "SKIP: reason" line and counts it, and a suite's main ends with
 * kiwi_run_group(), which exits KIWI_TEST_SKIP_CODE (ctest's
 * SKIP_RETURN_CODE, set for every test by kiwi_add_test) when a case skipped
 * and none failed. tests/run.sh lists every skip with its reason and fails
 * the full suite on a skip it does not allow.
 *
 * Use inside a cmocka test function (KIWI_SKIP leaves it through skip()),
 * never in a group set-up: a set-up that cannot run should fail or return
 * kiwi_test_skip_all() from main.
 */
#ifndef KIWI_TESTS_SKIP_H
#define KIWI_TESTS_SKIP_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* The exit status of a test program that skipped something and failed
 * nothing; the shell tests use the same (exit 77). */
#define KIWI_TEST_SKIP_CODE 77

/* Prints "SKIP: <reason>" on stdout (in order with cmocka's own lines, so
 * the log shows which case it belongs to) and counts one skipped case. */
void kiwi_test_note_skip (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* Skipped cases counted so far in this process. */
int kiwi_test_skipped (void);

/* The program's exit status from what cmocka returned: 1 when any case
 * failed (cmocka returns a count, which an exit status would truncate),
 * KIWI_TEST_SKIP_CODE when none failed and some skipped, else 0. */
int kiwi_test_status (int cmocka_failed);

/* For a whole program that cannot run here: prints the SKIP line and
 * returns KIWI_TEST_SKIP_CODE (return it from main). */
int kiwi_test_skip_all (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* Skips the current case, visibly and counted. */
#define KIWI_SKIP(...)                                                                                       \
    do {                                                                                                     \
        kiwi_test_note_skip (__VA_ARGS__);                                                                   \
        skip ();                                                                                             \
    } while (0)

/* cmocka_run_group_tests_name(), with the exit status of kiwi_test_status(). */
#define kiwi_run_group(name, tests, setup, teardown)                                                         \
    kiwi_test_status (cmocka_run_group_tests_name (name, tests, setup, teardown))

#endif
