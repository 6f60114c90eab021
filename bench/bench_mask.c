/*
 * bench_mask.c: what masking a 64 KiB output costs (common/mask.h), for a
 * few set sizes, with no secret in the text and with many, against copying
 * the same text (strdup, measured in the same run): the work every event
 * with an output tail does anyway.
 *
 * Usage: bench_mask [--runs N] [--size BYTES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/mask.h"

static double
now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int
cmp_double (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double
median (double *v, int n)
{
    qsort (v, (size_t) n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* Test-like output: lines of words, with `hits` secrets planted. */
static char *
make_text (size_t size, char values[][40], int nvalues, int hits)
{
    char *t = malloc (size + 1);
    static const char *const words[] = { "ok ", "test ", "passed ", "at ", "Object.<anonymous> ", "(/kiwi/src/",
                                         "index.js:12:7)\n", "expected ", "received ", "42 " };
    size_t n = 0;
    for (unsigned i = 0; n < size; i++) {
        const char *w = words[(i * 7 + i / 3) % 10];
        size_t l = strlen (w);
        if (n + l > size)
            l = size - n;
        memcpy (t + n, w, l);
        n += l;
    }
    t[size] = '\0';
    for (int h = 0; h < hits && nvalues > 0; h++) {
        size_t at = (size_t) h * (size / (size_t) (hits + 1)) + 5;
        const char *v = values[h % nvalues];
        if (at + strlen (v) < size)
            memcpy (t + at, v, strlen (v));
    }
    return t;
}

int
main (int argc, char **argv)
{
    int runs = 200;
    size_t size = 64 * 1024;
    for (int i = 1; i < argc; i++) {
        if (strcmp (argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi (argv[++i]);
        else if (strcmp (argv[i], "--size") == 0 && i + 1 < argc)
            size = (size_t) atol (argv[++i]);
        else {
            fprintf (stderr, "usage: bench_mask [--runs N] [--size BYTES]\n");
            return 2;
        }
    }
    if (runs < 1)
        runs = 1;
    static char values[64][40];
    for (int i = 0; i < 64; i++)
        snprintf (values[i], sizeof values[i], "ghp_%02dQx7vLk2mZp9RtWq%04d", i, i * 37);
    const int sets[] = { 1, 8, 40 };
    const int hit_counts[] = { 0, 100 };
    double *t = malloc (sizeof *t * (size_t) runs);
    printf ("%zu-byte output, median of %d runs\n", size, runs);
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        kiwi_error_t err = NULL;
        kiwi_mask *m = kiwi_mask_new (&err);
        for (int i = 0; i < sets[s]; i++)
            kiwi_mask_add (m, values[i], &err);
        for (size_t h = 0; h < sizeof hit_counts / sizeof hit_counts[0]; h++) {
            char *text = make_text (size, values, sets[s], hit_counts[h]);
            double copy_us, mask_us;
            for (int r = 0; r < runs; r++) {
                double t0 = now_us ();
                char *c = strdup (text);
                t[r] = now_us () - t0;
                free (c);
            }
            copy_us = median (t, runs);
            for (int r = 0; r < runs; r++) {
                double t0 = now_us ();
                char *c = kiwi_mask_apply (m, text);
                t[r] = now_us () - t0;
                free (c);
            }
            mask_us = median (t, runs);
            printf ("%2d secrets, %3d occurrences: mask %8.1f us, copy %6.1f us, ratio %6.1f\n", sets[s],
                    hit_counts[h], mask_us, copy_us, copy_us > 0 ? mask_us / copy_us : 0);
            free (text);
        }
        kiwi_mask_free (m);
    }
    free (t);
    return 0;
}
