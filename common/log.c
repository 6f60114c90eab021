/*
 * log.c: timestamped log lines on stderr (see log.h).
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static kiwi_log_level threshold = KIWI_LOG_INFO;
static char program_name[64] = "kiwi";

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

int
kiwi_log_init (const char *program, kiwi_error_t *err)
{
    if (program != NULL)
        snprintf (program_name, sizeof program_name, "%s", program);
    const char *lv = getenv ("KIWI_LOG_LEVEL");
    if (lv != NULL && *lv != '\0') {
        kiwi_log_level l;
        if (kiwi_log_level_parse (lv, &l) < 0)
            return kiwi_error_make (err, 0,
                                    "KIWI_LOG_LEVEL: invalid value `%s` (accepted: debug, info, warn, error)", lv);
        threshold = l;
    }
    return 0;
}

void
kiwi_log_set_level (kiwi_log_level level)
{
    threshold = level;
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
    char line[4096];
    int n = snprintf (line, sizeof line, "%s.%03ldZ %s[%d] %s: ", when, ts.tv_nsec / 1000000L, program_name,
                      (int) getpid (), level_names[level]);
    va_list ap;
    va_start (ap, fmt);
    if (n > 0 && (size_t) n < sizeof line)
        vsnprintf (line + n, sizeof line - (size_t) n, fmt, ap);
    va_end (ap);
    fprintf (stderr, "%s\n", line);
}
