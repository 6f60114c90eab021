/*
 * skip.c: counting skipped cmocka cases and turning the count into the
 * exit status ctest reads (see skip.h).
 */
#include "skip.h"

#include <stdio.h>

static int skipped;

static void
vnote (const char *fmt, va_list ap)
{
    fflush (stderr);
    fputs ("SKIP: ", stdout);
    vprintf (fmt, ap);
    fputc ('\n', stdout);
    fflush (stdout);
}

void
kiwi_test_note_skip (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vnote (fmt, ap);
    va_end (ap);
    skipped++;
}

int
kiwi_test_skipped (void)
{
    return skipped;
}

int
kiwi_test_status (int cmocka_failed)
{
    if (cmocka_failed != 0)
        return 1;
    return skipped > 0 ? KIWI_TEST_SKIP_CODE : 0;
}

int
kiwi_test_skip_all (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    vnote (fmt, ap);
    va_end (ap);
    skipped++;
    return KIWI_TEST_SKIP_CODE;
}
