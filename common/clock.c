/*
 * clock.c: see clock.h.
 */
#include "common/clock.h"

#include <time.h>

/* Milliseconds on `clock`. */
static int64_t
ms_on (clockid_t clock)
{
    struct timespec ts;
    clock_gettime (clock, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
kiwi_mono_ms (void)
{
    return ms_on (CLOCK_MONOTONIC);
}

int64_t
kiwi_wall_ms (void)
{
    return ms_on (CLOCK_REALTIME);
}
