/*
 * install-reason.c: a failed install's reason from its output (see
 * install-reason.h).
 */
#include "sandbox/install-reason.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define KIWI__REASON_LINES 80

/* Case-insensitive: does [s, s+n) contain `needle`? */
static bool
has (const char *s, size_t n, const char *needle)
{
    size_t l = strlen (needle);
    for (size_t i = 0; l <= n && i <= n - l; i++)
        if (strncasecmp (s + i, needle, l) == 0)
            return true;
    return false;
}

/* Quotes [s, s+n) into dst: what a terminal shows of it (the part after
 * the last carriage return), leading and trailing blanks trimmed, ANSI CSI
 * sequences dropped, other control characters and DEL as \xNN, at most
 * KIWI_INSTALL_QUOTE_MAX bytes of the line ("..." after a cut). */
static void
quote (const char *s, size_t n, char *dst, size_t cap)
{
    if (cap == 0)
        return;
    for (size_t i = n; i > 0; i--)
        if (s[i - 1] == '\r' && i < n) {
            n -= i;
            s += i;
            break;
        }
    while (n > 0 && (*s == ' ' || *s == '\t' || *s == '\r'))
        s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    size_t o = 0, used = 0;
    bool cut = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c == 0x1b && i + 1 < n && s[i + 1] == '[') {
            size_t j = i + 2;
            while (j < n && (unsigned char) s[j] >= 0x20 && (unsigned char) s[j] <= 0x3f)
                j++;
            if (j < n && (unsigned char) s[j] >= 0x40 && (unsigned char) s[j] <= 0x7e) {
                i = j;
                continue;
            }
        }
        char esc[5];
        size_t w = 1;
        if (c < 0x20 || c == 0x7f)
            w = (size_t) snprintf (esc, sizeof esc, "\\x%02x", c);
        else {
            esc[0] = (char) c;
            esc[1] = '\0';
        }
        if (used + w > KIWI_INSTALL_QUOTE_MAX || o + w + 4 > cap) {
            cut = true;
            break;
        }
        memcpy (dst + o, esc, w);
        o += w;
        used += w;
    }
    if (cut && o + 4 <= cap) {
        memcpy (dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

/* Whether [s, s+n) contains one of `words` (NULL-terminated). */
static bool
has_any (const char *s, size_t n, const char *const *words)
{
    for (; *words; words++)
        if (has (s, n, *words))
            return true;
    return false;
}

/* Lines that only point elsewhere or advertise: never the reason. */
static const char *const noise_words[] = {
    "a complete log of this run can be found in",
    "[notice]",
    "note: this error originates from a subprocess",
    "for more information",
    "run with --stacktrace",
    "run with --info or --debug",
    "re-run maven using the -x switch",
    "to see the full stack trace",
    "get more help at",
    "npm error a complete log",
    "this error happened while installing", /* pnpm, after its error */
    "] [help ",                             /* Maven: "[ERROR] [Help 1] http://cwiki..." */
    "[error] -> [help ",                    /* Maven: the pointer on a line of its own */
    NULL,
};

/* Lines that read as an error. */
static const char *const error_words[] = {
    "error", "err!", "fatal", "failed", "failure", "not found", "no such file", "cannot", "can't",
    "could not", "unable to", "denied", "refused", "exception", "no matching", "unsatisfiable", NULL,
};

/* A stack frame (`    at f (file:1:2)`, Node.js and Java): it names a
 * function, which may read as an error (ResponseError), never the cause. */
static bool
stack_frame (const char *s, size_t n)
{
    while (n > 0 && (*s == ' ' || *s == '\t'))
        s++, n--;
    return n > 3 && strncmp (s, "at ", 3) == 0;
}

/* Whether [s, s+n) has anything but blanks (a bare \r counts as blank),
 * after Maven's "[ERROR]" or "[WARNING]" prefix: Maven prints the prefix
 * alone between its paragraphs. */
static bool
blank (const char *s, size_t n)
{
    static const char *const prefixes[] = { "[ERROR]", "[WARNING]", NULL };
    for (size_t k = 0; prefixes[k]; k++) {
        size_t l = strlen (prefixes[k]);
        if (n >= l && strncmp (s, prefixes[k], l) == 0) {
            s += l;
            n -= l;
            break;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

static bool
disk_full (const char *output, bool bare_code, char *line, size_t cap)
{
    if (line != NULL && cap > 0)
        line[0] = '\0';
    for (const char *p = output ? output : ""; *p;) {
        size_t n = strcspn (p, "\n");
        if (has (p, n, "No space left on device") || (bare_code && has (p, n, "ENOSPC"))) {
            if (line != NULL)
                quote (p, n, line, cap);
            return true;
        }
        p += n;
        if (*p == '\n')
            p++;
    }
    return false;
}

bool
kiwi_install_output_disk_full (const char *output, char *line, size_t cap)
{
    return disk_full (output, true, line, cap);
}

bool
kiwi_run_output_disk_full (const char *output, char *line, size_t cap)
{
    return disk_full (output, false, line, cap);
}

void
kiwi_install_error_line (const char *output, char *dst, size_t cap)
{
    if (cap == 0)
        return;
    dst[0] = '\0';
    const char *out = output ? output : "";
    /* walk back over the last KIWI__REASON_LINES lines */
    const char *end = out + strlen (out);
    const char *last_any = NULL;
    size_t last_any_n = 0;
    int seen = 0;
    while (end > out && seen < KIWI__REASON_LINES) {
        const char *e = end;
        if (e > out && e[-1] == '\n')
            e--;
        const char *s = e;
        while (s > out && s[-1] != '\n')
            s--;
        size_t n = (size_t) (e - s);
        end = s;
        seen++;
        if (blank (s, n) || has_any (s, n, noise_words))
            continue;
        if (!stack_frame (s, n) && has_any (s, n, error_words)) {
            quote (s, n, dst, cap);
            return;
        }
        if (last_any == NULL) {
            last_any = s;
            last_any_n = n;
        }
    }
    if (last_any != NULL)
        quote (last_any, last_any_n, dst, cap);
}

void
kiwi_install_failed_reason (char *dst, size_t cap, const char *argv0, int code, const char *output,
                            int64_t disk_mb)
{
    char line[KIWI_INSTALL_QUOTE_MAX + 48];
    int n = snprintf (dst, cap, "install `%s` exited with status %d", argv0 ? argv0 : "?", code);
    if (n < 0 || (size_t) n >= cap)
        return;
    size_t len = (size_t) n;
    if (kiwi_install_output_disk_full (output, line, sizeof line))
        snprintf (dst + len, cap - len,
                  ": the sandbox's disk is full (%lld MB, KIWI_MAX_SANDBOX_DISK_MB raises it; the install needs "
                  "more, or less left in its download caches): \"%s\"",
                  (long long) disk_mb, line);
    else {
        kiwi_install_error_line (output, line, sizeof line);
        if (line[0] != '\0')
            snprintf (dst + len, cap - len, ": \"%s\"", line);
        else
            snprintf (dst + len, cap - len, " and printed nothing");
    }
}
