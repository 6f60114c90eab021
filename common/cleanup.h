/*
 * cleanup.h: scope-bound cleanup helpers (GCC/Clang cleanup attribute) and
 * visible ownership transfer.
 *
 *   cleanup_free char *s = strdup ("x");        freed at end of scope
 *   cleanup_close int fd = open (...);          closed at end of scope (if >= 0)
 *   return steal_pointer (&s);                  ownership leaves the scope
 *   int keep = get_and_reset (&fd);             same for descriptors
 */
#ifndef KIWI_COMMON_CLEANUP_H
#define KIWI_COMMON_CLEANUP_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void
kiwi__freep (void *p)
{
    void **pp = (void **) p;
    free (*pp);
    *pp = NULL;
}

static inline void
kiwi__closep (int *fd)
{
    if (*fd >= 0)
        close (*fd);
    *fd = -1;
}

static inline void
kiwi__fclosep (FILE **f)
{
    if (*f != NULL)
        fclose (*f);
    *f = NULL;
}

#define cleanup_free __attribute__ ((cleanup (kiwi__freep)))
#define cleanup_close __attribute__ ((cleanup (kiwi__closep)))
#define cleanup_fclose __attribute__ ((cleanup (kiwi__fclosep)))

static inline void *
kiwi__steal_pointer (void *pp)
{
    void **p = (void **) pp;
    void *v = *p;
    *p = NULL;
    return v;
}
#define steal_pointer(pp) ((__typeof__ (*(pp))) kiwi__steal_pointer (pp))

static inline int
get_and_reset (int *fd)
{
    int v = *fd;
    *fd = -1;
    return v;
}

#endif
