/*
 * shell.h: a shell command written as printf arguments, for tests that set
 * up trees, repositories and images with cp, git and rm: run and its status
 * returned (kiwi_test_shf), or run and required to succeed
 * (kiwi_test_must). The command's output passes through to the test's.
 */
#ifndef KIWI_TESTS_SHELL_H
#define KIWI_TESTS_SHELL_H

/* Formats the command and runs it with system(3); returns system's status
 * (0 when it ran and exited 0). A command that cannot be formatted (no
 * memory) fails the test. */
int kiwi_test_shf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* kiwi_test_shf, failing the test (naming the command) unless it returned 0. */
void kiwi_test_must (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

#endif
