/*
 * cli.h: the commands of `kiwi` and what they share: exit statuses, the
 * command table, and the start of every command (parse, --help, settings).
 *
 * Each command is `int kiwi_cmd_<name> (int argc, char **argv)` with argv[0]
 * the command name; it returns the process's exit status. Commands print
 * their results on stdout and diagnostics on stderr (log.h); only main()
 * exits.
 */
#ifndef KIWI_PRODUCER_CLI_H
#define KIWI_PRODUCER_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "common/error.h"
#include "producer/cli-opts.h"
#include "schemas/result.h"
#include "producer/cli-settings.h"

/* Exit statuses shared by every command. */
#define KIWI_EXIT_MAP(X)                                                                                      \
    X (OK, 0, "success")                                                                                      \
    X (FAILURE, 1, "failure: the broker could not be reached, a message was not delivered, I/O error")       \
    X (USAGE, 2, "usage or configuration error (unknown option, bad setting value)")                        \
    X (INVALID, 3, "invalid input: a task, a batch line or an event was rejected")

typedef enum {
#define KIWI__EXIT_ENUM(id, code, meaning) KIWI_EXIT_##id = code,
    KIWI_EXIT_MAP (KIWI__EXIT_ENUM)
#undef KIWI__EXIT_ENUM
} kiwi_exit;

/* `kiwi wait`: one exit status per result status, and one for the wait
 * itself running out of time (124, as timeout(1)). */
#define KIWI_WAIT_EXIT_MAP(X)                                                                                 \
    X (FIXED, 0)                                                                                              \
    X (NOT_FIXED, 10)                                                                                         \
    X (INSTALL_FAILED, 11)                                                                                    \
    X (NEEDS_NETWORK, 12)                                                                                     \
    X (BUDGET_EXHAUSTED, 13)                                                                                  \
    X (MAX_ROUNDS, 14)                                                                                        \
    X (TIMED_OUT, 15)                                                                                         \
    X (ERROR, 16)                                                                                             \
    X (GAVE_UP, 17)
#define KIWI_EXIT_WAIT_TIMEOUT 124

/* The exit status for a result status (KIWI_WAIT_EXIT_MAP). */
int kiwi_wait_exit_code (kiwi_result_status s);

/* The exit status for an error: USAGE for KIWI_CLI_EUSAGE, INVALID for
 * KIWI_WIRE_EINVALID, FAILURE otherwise. */
int kiwi_exit_for (kiwi_error_t err);

/* The start of every command: parses argv[1..] against cmd, answers --help
 * (on stdout), loads the settings from the environment and the flags, sets
 * the log level. Returns 0 to go on, or > 0 when the command is done, with
 * *exit_code set (0 after --help; USAGE after a usage error, which is
 * logged). */
int kiwi_cli_begin (const kiwi_cmd *cmd, int argc, char **argv, kiwi_args *args, kiwi_cli_settings *s,
                    int *exit_code);

/* Logs an error with a prefix and frees it; returns kiwi_exit_for (*err). */
int kiwi_cli_fail (kiwi_error_t *err, const char *what);

/* Prints one line to stdout and flushes it, so pipes see it at once. */
void kiwi_cli_println (const char *line);

/* Produces one finished task on the tasks topic (key: its repository URL)
 * with a fresh producer, waits for the delivery report and prints the task
 * id, or with `json` the line {"id", "topic", "partition", "offset"}.
 * Returns 0, or < 0 with *err when it was not delivered. */
struct kiwi_task;
int kiwi_cli_submit_task (const kiwi_cli_settings *s, const struct kiwi_task *t, bool json, kiwi_error_t *err);

/* Reads the task fields given as options (ids below KIWI_OPT_OWN) into *t,
 * in command-line order; --ci-context names a file (or -). */
int kiwi_cli_task_options (const kiwi_args *args, struct kiwi_task *t, kiwi_error_t *err);

/* The manifest of a batch (cmd-watch.c): written by `kiwi batch` at its
 * start (complete = false) and end (complete = true, with the counts) as
 * <batch_dir>/<batch id>.json, read by `kiwi watch` for the submission time
 * and the total. */
typedef struct kiwi_batch_manifest {
    char batch_id[160];
    int64_t submitted_at; /* ms since the epoch */
    bool complete;        /* the submission ended: the counts are final */
    uint64_t accepted, rejected, delivered;
} kiwi_batch_manifest;

int kiwi_cli_manifest_write (const kiwi_cli_settings *s, const kiwi_batch_manifest *m, kiwi_error_t *err);


/* How kiwi_cli_watch follows a batch. */
typedef struct kiwi_cli_watch_opts {
    bool read_tasks;        /* learn the batch's task ids from the tasks topic (kiwi watch); false: the
                             * watch already holds them all (kiwi batch --wait) */
    bool no_progress_topic; /* do not read the progress topic (no "running" count) */
    int64_t since_ms;       /* read every topic from this time (ms since the epoch); < 0: the beginning */
    unsigned long long timeout_s; /* 0: until complete */
    bool quiet, json, stats;
    bool failed;            /* set by the loop when the results file cannot be written */
} kiwi_cli_watch_opts;

/* Follows the batch in *w (kiwi_watch, watch.h; its results file already
 * open) until it is complete, interrupted (kiwi_cli_stop) or timed out:
 * progress line (redrawn on a terminal, periodic lines otherwise), then the
 * outcome table (or with json one JSON object) on stdout. Returns the exit
 * status: 0 complete, 124 timed out, 1 interrupted or failed. */
struct kiwi_watch;
int kiwi_cli_watch (const kiwi_cli_settings *s, struct kiwi_watch *w, kiwi_cli_watch_opts *o);

/* The commands. */
typedef struct kiwi_command {
    const kiwi_cmd *cmd;
    int (*run) (int argc, char **argv);
} kiwi_command;

extern const kiwi_cmd kiwi_cmd_submit_def, kiwi_cmd_batch_def, kiwi_cmd_ci_event_def, kiwi_cmd_tail_def,
    kiwi_cmd_wait_def, kiwi_cmd_config_def, kiwi_cmd_watch_def, kiwi_cmd_fleet_def;

int kiwi_cmd_submit (int argc, char **argv);
int kiwi_cmd_batch (int argc, char **argv);
int kiwi_cmd_ci_event (int argc, char **argv);
int kiwi_cmd_tail (int argc, char **argv);
int kiwi_cmd_wait (int argc, char **argv);
int kiwi_cmd_watch (int argc, char **argv);
int kiwi_cmd_fleet (int argc, char **argv);

/* The table of commands, ending with { NULL, NULL }. */
extern const kiwi_command kiwi_commands[];

/* Prints the top-level help (`kiwi --help`). */
void kiwi_cli_help (FILE *out);

#endif
