/*
 * cli-opts.h: command-line options for the kiwi command, described as data.
 *
 * Each command is a kiwi_cmd: its name, synopsis, description, a table of
 * options (kiwi_opt, common/opts.h), the task fields it takes as options
 * (task-input.h: --repo, --max-rounds, ...) and its exit statuses. One table
 * drives both parsing (kiwi_args_parse, over the common parser
 * kiwi_opts_parse) and the --help text (kiwi_cmd_help), so the two never
 * disagree. Every command also takes the configuration flags of the settings
 * table (settings.h: --brokers, --tasks-topic, ...), which the parser
 * records separately for kiwi_cli_settings_load(). The spellings and the
 * ownership of kiwi_args are common/opts.h's.
 */
#ifndef KIWI_PRODUCER_CLI_OPTS_H
#define KIWI_PRODUCER_CLI_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "common/opts.h"
#include "producer/cli-settings.h"

/* Option ids below KIWI_OPT_OWN are task fields (task-input.h: the option
 * --max-rounds has id KIWI_TF_MAX_ROUNDS); a command's own options start at
 * KIWI_OPT_OWN. */
#define KIWI_OPT_OWN 100
#define KIWI_TASK_FIELD_BIT(f) (1u << (f))
#define KIWI_TASK_FIELDS_ALL 0xfffffffeu

/* Exit statuses, for --help and docs/cli.md. Ends with { -1, NULL }. */
typedef struct kiwi_exit_doc {
    int code;
    const char *meaning;
} kiwi_exit_doc;

typedef struct kiwi_cmd {
    const char *name;              /* "submit" */
    const char *synopsis;          /* after "Usage: kiwi "; lines separated by '\n' */
    const char *summary;           /* one line, for `kiwi --help` */
    const char *description;       /* paragraphs, wrapped by hand */
    const kiwi_opt *opts;          /* may be NULL; ids >= KIWI_OPT_OWN */
    uint32_t task_fields;          /* task-field options it takes: bit (1 << kiwi_task_field) */
    const kiwi_exit_doc *exits;    /* may be NULL */
} kiwi_cmd;

/* Error code of a usage error (unknown option, missing value, bad value). */
#define KIWI_CLI_EUSAGE (KIWI_ERR_RANGE_CLI + 1)

/* Parses argv[from..argc) against cmd's options and the settings flags.
 * Returns 0, or < 0 with *err (code KIWI_CLI_EUSAGE) naming the option.
 * *out must be zeroed or cleared before the call. */
int kiwi_args_parse (const kiwi_cmd *cmd, int argc, char **argv, int from, kiwi_args *out, kiwi_error_t *err);

/* Prints the full help of cmd: usage, description, options, configuration
 * flags and exit statuses. */
void kiwi_cmd_help (const kiwi_cmd *cmd, FILE *out);

/* Strict number parsing for option values, with errors naming `what`
 * ("--max-rounds"): a decimal integer in [min, max]. */
int kiwi_parse_u64 (const char *what, const char *s, unsigned long long min, unsigned long long max,
                    unsigned long long *out, kiwi_error_t *err);

#endif
