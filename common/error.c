/*
 * error.c: the error value used by every Kiwi module (see error.h).
 */
#include "common/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *vformat (const char *fmt, va_list ap) __attribute__ ((format (printf, 1, 0)));

static char *
vformat (const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf (&s, fmt, ap) < 0)
        return NULL;
    return s;
}

static int make (kiwi_error_t *err, int errno_, int code, const char *fmt, va_list ap)
    __attribute__ ((format (printf, 4, 0)));

static int
make (kiwi_error_t *err, int errno_, int code, const char *fmt, va_list ap)
{
    if (err == NULL)
        return -1;
    kiwi_error_free (err);
    kiwi_error_t e = calloc (1, sizeof *e);
    if (e == NULL)
        return -1;
    e->errno_ = errno_;
    e->code = code;
    char *m = vformat (fmt, ap);
    if (m != NULL && errno_ != 0) {
        char *full = NULL;
        if (asprintf (&full, "%s: %s", m, strerror (errno_)) >= 0) {
            free (m);
            m = full;
        }
    }
    e->msg = m != NULL ? m : strdup ("out of memory formatting an error");
    *err = e;
    return -1;
}

int
kiwi_error_make (kiwi_error_t *err, int errno_, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    make (err, errno_, 0, fmt, ap);
    va_end (ap);
    return -1;
}

int
kiwi_error_make_code (kiwi_error_t *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    make (err, 0, code, fmt, ap);
    va_end (ap);
    return -1;
}

int
kiwi_error_wrap (kiwi_error_t *err, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    va_list ap;
    va_start (ap, fmt);
    char *ctx = vformat (fmt, ap);
    va_end (ap);
    if (ctx == NULL)
        return -1;
    if (*err == NULL) {
        kiwi_error_make (err, 0, "%s", ctx);
        free (ctx);
        return -1;
    }
    char *full = NULL;
    if (asprintf (&full, "%s: %s", ctx, (*err)->msg ? (*err)->msg : "") >= 0) {
        free ((*err)->msg);
        (*err)->msg = full;
    }
    free (ctx);
    return -1;
}

const char *
kiwi_error_msg (kiwi_error_t err)
{
    return err && err->msg ? err->msg : "";
}

int
kiwi_error_code (kiwi_error_t err)
{
    return err ? err->code : 0;
}

void
kiwi_error_free (kiwi_error_t *err)
{
    if (err == NULL || *err == NULL)
        return;
    free ((*err)->msg);
    free (*err);
    *err = NULL;
}

kiwi_error_t
kiwi_error_steal (kiwi_error_t *err)
{
    kiwi_error_t e = *err;
    *err = NULL;
    return e;
}
