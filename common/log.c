/*
 * log.c: timestamped, masked log lines on stderr (see log.h).
 */
#include "common/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static kiwi_log_level threshold = KIWI_LOG_INFO;
static char program_name[64] = "kiwi";
static _Atomic (const kiwi_mask *) line_mask;

#define LINE_MAX_BYTES 4096

static const char *const level_names[] = { "debug", "info", "warn", "error" };

int
kiwi_log_level_parse (const char *s, kiwi_log_level *out)
{
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++)
        if (strcmp (s, level_names[i]) == 0) {
            *out = (kiwi_log_level) i;
            return 0;
        }
    return -1;
}

void
kiwi_log_init (const char *program)
{
    if (program != NULL)
        snprintf (program_name, sizeof program_name, "%s", program);
}

void
kiwi_log_set_level (kiwi_log_level level)
{
    threshold = level;
}

const kiwi_mask *
kiwi_log_set_mask (const kiwi_mask *m)
{
    return atomic_exchange (&line_mask, m);
}

void
kiwi_log (kiwi_log_level level, const char *fmt, ...)
{
    if (level < threshold)
        return;
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r (&ts.tv_sec, &tm);
    char when[32];
    strftime (when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    /* the whole message is masked before it is cut to length, so a secret
     * cut in half at the end of a long line is still masked */
    char *msg = NULL;
    va_list ap;
    va_start (ap, fmt);
    int ml = vasprintf (&msg, fmt, ap);
    va_end (ap);
    if (ml < 0) {
        fprintf (stderr, "%s.%03ldZ %s[%d] %s: (a log line was dropped: out of memory)\n", when,
                 ts.tv_nsec / 1000000L, program_name, (int) getpid (), level_names[level]);
        return;
    }
    size_t len = kiwi_mask_apply_buf (atomic_load (&line_mask), msg, (size_t) ml);
    if (len > LINE_MAX_BYTES)
        len = LINE_MAX_BYTES;
    fprintf (stderr, "%s.%03ldZ %s[%d] %s: %.*s\n", when, ts.tv_nsec / 1000000L, program_name, (int) getpid (),
             level_names[level], (int) len, msg);
    free (msg);
}
