/*
 * install-reason.h: why a failed Phase A failed, in words a user can act
 * on. An install's exit status alone ("install `/bin/sh` exited with status
 * 1") says nothing; its output usually does. These read the output (the
 * tail Phase A kept) for a full disk and for the last line that reads as
 * an error, and write them into the install's reason. The step-0
 * classifier's finding on the same output (a host it could not reach, a
 * command not found) is added by step 0 (sandbox/step0.h), the egress
 * proxy's denials by the worker's Phase A (worker/task/pipeline-install.c).
 *
 * The output is the sandbox's, hostile: what is quoted is bounded, ANSI
 * colour sequences are removed and every other control character is
 * escaped (\xNN), so the reason stays one line. Secrets in it are masked
 * where every reason is, in the result and the events (worker/task/secrets.h).
 *
 * Pure functions over strings; nothing is allocated.
 */
#ifndef KIWI_SANDBOX_INSTALL_REASON_H
#define KIWI_SANDBOX_INSTALL_REASON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* At most this many bytes of an output line are quoted. */
#define KIWI_INSTALL_QUOTE_MAX 240

/* Whether the output says the disk was full: "No space left on device"
 * or ENOSPC on a line of it. When `line` is not NULL, the first such line
 * is quoted into it (capacity cap, escaped as above). */
bool kiwi_install_output_disk_full (const char *output, char *line, size_t cap);

/* The same for a test run's output: only the system's own message ("No
 * space left on device", in any case), not a bare ENOSPC, which a test's
 * name may hold. */
bool kiwi_run_output_disk_full (const char *output, char *line, size_t cap);

/* The last line of `output` that reads as an error (an "error", "ERR!",
 * "fatal", "failed", "not found", "No such file", "cannot", "could not"
 * line), skipping lines that only point elsewhere ("A complete log of this
 * run can be found in", pip's "[notice]") and stack frames ("    at
 * new ResponseError (...)": a function's name is no cause); without one,
 * the last non-empty line. Quoted into `dst` (escaped as above, cut at
 * KIWI_INSTALL_QUOTE_MAX bytes with "..."); "" when the output is empty.
 * Only the last 80 lines are looked at. */
void kiwi_install_error_line (const char *output, char *dst, size_t cap);

/* The reason of an install that exited with `code`: "install `ARGV0`
 * exited with status CODE", then what the output says: the disk full
 * (with the sandbox's ceiling, `disk_mb`, MaxSandboxDiskMB), else the last
 * error line. Written into dst (capacity cap, at least 64). */
void kiwi_install_failed_reason (char *dst, size_t cap, const char *argv0, int code, const char *output,
                                 int64_t disk_mb);

#endif
