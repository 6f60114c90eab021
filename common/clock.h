/*
 * clock.h: the two clocks, in milliseconds. The monotonic one is for
 * deadlines, timeouts and durations; the wall clock is for timestamps that
 * people and other hosts read (events, results, Kafka message times), never
 * for deadlines, as it jumps when the time is set.
 */
#ifndef KIWI_CLOCK_H
#define KIWI_CLOCK_H

#include <stdint.h>

/* Milliseconds on CLOCK_MONOTONIC (an arbitrary origin; only differences
 * mean anything). */
int64_t kiwi_mono_ms (void);

/* Milliseconds since the Unix epoch on CLOCK_REALTIME: for timestamps that
 * people and other hosts read, never for deadlines. */
int64_t kiwi_wall_ms (void);

#endif
