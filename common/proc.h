/*
 * proc.h: running a helper program (mkfs, mount, git) from the worker side,
 * without a shell: argv is passed as is, output captured and bounded, and a
 * deadline enforced (SIGKILL to the child's process group on expiry).
 */
#ifndef KIWI_COMMON_PROC_H
#define KIWI_COMMON_PROC_H

#include <spawn.h>
#include <stddef.h>

#include "common/error.h"

typedef struct kiwi_proc_result {
    int exit_code;   /* exit status, or 128+signal; -1 if it could not run */
    int timed_out;   /* killed by the deadline */
    char *output;    /* stdout+stderr tail (NUL-terminated), owned; free() it */
} kiwi_proc_result;

/* Runs argv[0] (searched in PATH) with argv, envp (NULL = inherit), in
 * `cwd` (NULL = current), for at most timeout_ms (0 = no limit), keeping the
 * last `cap` bytes of output. Returns 0 when the program ran (whatever its
 * exit code: check res->exit_code), < 0 when it could not be started. */
int kiwi_proc_run (const char *const *argv, const char *const *envp, const char *cwd, long timeout_ms, size_t cap,
                   kiwi_proc_result *res, kiwi_error_t *err);

/* Like kiwi_proc_run, but a non-zero exit or a timeout is an error too,
 * naming the program and quoting the output tail. */
int kiwi_proc_check (const char *const *argv, const char *const *envp, const char *cwd, long timeout_ms,
                     kiwi_error_t *err);

void kiwi_proc_result_clear (kiwi_proc_result *r);

/* Sets up `attr` (initialised by the caller) as every helper is started:
 * in a process group of its own (a deadline kills the group), with no
 * signal blocked and every signal's default action. */
void kiwi_proc_spawnattr_child (posix_spawnattr_t *attr);

#endif
