/*
 * main.c: `kiwi COMMAND ...`: picks the command from the table in cli.c
 * and returns its exit status.
 */
#include <stdio.h>
#include <string.h>

#include "producer/cli.h"
#include "common/log.h"

int
main (int argc, char **argv)
{
    kiwi_log_init ("kiwi");
    if (argc < 2) {
        kiwi_cli_help (stderr);
        return KIWI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp (name, "-h") == 0 || strcmp (name, "--help") == 0 || strcmp (name, "help") == 0) {
        if (argc > 2)
            for (const kiwi_command *c = kiwi_commands; c->cmd; c++)
                if (strcmp (c->cmd->name, argv[2]) == 0) {
                    kiwi_cmd_help (c->cmd, stdout);
                    return KIWI_EXIT_OK;
                }
        kiwi_cli_help (stdout);
        return KIWI_EXIT_OK;
    }
    if (strcmp (name, "--help-config") == 0) {
        kiwi_cli_settings_help (stdout);
        return KIWI_EXIT_OK;
    }
    if (strcmp (name, "--version") == 0 || strcmp (name, "version") == 0) {
        printf ("kiwi %s\n", KIWI_VERSION);
        return KIWI_EXIT_OK;
    }
    for (const kiwi_command *c = kiwi_commands; c->cmd; c++)
        if (strcmp (c->cmd->name, name) == 0)
            return c->run (argc - 1, argv + 1);
    fprintf (stderr, "kiwi: unknown command `%s` (commands: submit, batch, ci-event, tail, wait, watch, fleet, config; see kiwi --help)\n",
             name);
    return KIWI_EXIT_USAGE;
}
