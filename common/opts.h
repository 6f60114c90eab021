/*
 * opts.h: the one command-line parser of kiwi and kiwi-worker. A command
 * describes its options as data, a table of kiwi_opt, and kiwi_opts_parse()
 * reads argv against it and against the flags of the settings table
 * (settings.h: --brokers, --slots, ...), which it records by setting for
 * kiwi_settings_load(). kiwi's commands (producer/opts.h) add their synopsis
 * and the --help text made from the same table; kiwi-worker (worker/main.c,
 * worker/config.c) picks its mode flags out first and reads its settings
 * flags second.
 *
 * Accepted spellings: --name VALUE, --name=VALUE, -x VALUE, -xVALUE for
 * options with a value; --name and -x for switches (-fn5: switches and a
 * last option with its value, together); "--" ends the options; "-" alone
 * is a positional argument (stdin). Options and positional arguments may be
 * mixed. kiwi_opts_spec.flags changes this where kiwi-worker always did
 * otherwise (KIWI_OPTS_*).
 *
 * Errors are values: a usage error (unknown option, missing value, a value
 * given to a switch) is returned with spec->error_code and a message that
 * names the option: "unknown option `--nope` (see kiwi demo --help)",
 * "option `--limit` needs a value", "option `--follow` takes no value".
 *
 * Ownership: a kiwi_args borrows its values from argv; kiwi_args_clear()
 * frees only its arrays.
 */
#ifndef KIWI_COMMON_OPTS_H
#define KIWI_COMMON_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/error.h"
#include "common/settings.h"

/* An option id that stands for a setting: the option sets that setting,
 * as its own flag would (an alias such as kiwi-worker's -sandbox-runtime). */
#define KIWI_OPT_SETTING(setting_id) (-1 - (int) (setting_id))

/* One option of a command. A table ends with an entry whose name is NULL. */
typedef struct kiwi_opt {
    int id;              /* the command's identifier for this option (> 0), or KIWI_OPT_SETTING (...) */
    const char *name;    /* long name without "--" */
    char short_name;     /* 'f' for -f, or 0 */
    const char *metavar; /* "URL" for an option taking a value; NULL for a switch */
    const char *help;    /* one line; NULL where the program writes its --help by hand */
} kiwi_opt;

/* One option as it was given. */
typedef struct kiwi_arg {
    int id;
    const char *value;    /* NULL for a switch */
    const char *spelling; /* "--repo" or "-f": for error messages */
} kiwi_arg;

typedef struct kiwi_args {
    kiwi_arg *opts;      /* in command-line order */
    size_t n_opts;
    char **pos;          /* positional arguments, in order */
    size_t n_pos;
    /* Values of configuration flags, by setting (NULL: not given); the last
     * one given wins. */
    const char *settings[KIWI_SETTING__COUNT];
    bool help;           /* -h or --help was given (KIWI_OPTS_HELP) */
    int end;             /* the index in argv where the options ended (argc, or see KIWI_OPTS_STOP) */
} kiwi_args;

/* kiwi_opts_spec.flags */
#define KIWI_OPTS_HELP 1u       /* -h and --help set args->help */
#define KIWI_OPTS_STOP 2u       /* the options end at the first positional argument, or after "--":
                                   args->end is its index and nothing from there is read */
#define KIWI_OPTS_ONE_DASH 4u   /* -name is --name (no single-letter options) */
#define KIWI_OPTS_BOOL_ALONE 8u /* a boolean setting's flag without =VALUE is "true" when no value
                                   follows it (the end, or an argument starting with '-') */
#define KIWI_OPTS_KEEP 16u      /* a first pass: every argument that is not an option of the table (an
                                   unknown option, one it cannot take, "--", a positional one) is kept
                                   in order in args->pos and nothing is an error; single letters only
                                   alone ("-h", not "-hx") */
#define KIWI_OPTS_QUOTE_ARG 32u /* errors quote the argument as given ("--slots", "-x=1"), not the
                                   option's name */

/* How to parse: the table, which settings' flags, how errors read. */
typedef struct kiwi_opts_spec {
    const kiwi_opt *opts;  /* may be NULL */
    unsigned settings;     /* KIWI_PROGRAM_* whose settings' flags are taken (0: none) */
    const char *help_hint; /* "kiwi submit --help": "unknown option `X` (see HINT)" */
    int error_code;        /* the code of usage errors (kiwi_error_code) */
    unsigned flags;        /* KIWI_OPTS_* */
} kiwi_opts_spec;

/* Parses argv[from..argc) against spec. Returns 0, or < 0 with *err (code
 * spec->error_code) naming the option. *out must be zeroed or cleared
 * before the call. */
int kiwi_opts_parse (const kiwi_opts_spec *spec, int argc, char **argv, int from, kiwi_args *out,
                     kiwi_error_t *err);

void kiwi_args_clear (kiwi_args *a);

/* One option's line of a --help text: "  -f, --file PATH           help". */
void kiwi_opt_help_line (const kiwi_opt *o, FILE *out);

#endif
