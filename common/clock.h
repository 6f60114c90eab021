/*
 * clock.h: the monotonic clock in milliseconds, for deadlines and
 * durations (never for timestamps that leave the process: those are wall
 * clock).
 */
#ifndef KIWI_CLOCK_H
#define KIWI_CLOCK_H

#include <stdint.h>

/* Milliseconds on CLOCK_MONOTONIC (an arbitrary origin; only differences
 * mean anything). */
int64_t kiwi_mono_ms (void);

#endif
