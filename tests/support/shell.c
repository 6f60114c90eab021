/*
 * shell.c: see shell.h. system(3) runs the command: the tests want a shell
 * line with its output in their log, nothing a library would add.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "shell.h"

#include <stdio.h>
#include <stdlib.h>

/* Formats and runs the command; returns system's status. The command goes
 * to *cmd (caller frees) when cmd is not NULL. */
static int
vrun (const char *fmt, va_list ap, char **cmd)
{
    char *line = NULL;
    if (vasprintf (&line, fmt, ap) < 0)
        fail_msg ("a shell command could not be formatted: out of memory");
    int rc = system (line);
    if (cmd != NULL)
        *cmd = line;
    else
        free (line);
    return rc;
}

int
kiwi_test_shf (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    int rc = vrun (fmt, ap, NULL);
    va_end (ap);
    return rc;
}

void
kiwi_test_must (const char *fmt, ...)
{
    char *cmd = NULL;
    va_list ap;
    va_start (ap, fmt);
    int rc = vrun (fmt, ap, &cmd);
    va_end (ap);
    if (rc != 0) {
        char shown[4096];
        snprintf (shown, sizeof shown, "%s", cmd);
        free (cmd);
        fail_msg ("`%s` failed (status %d)", shown, rc);
    }
    free (cmd);
}
