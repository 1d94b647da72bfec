/* Test harness: sleeping and reading the monotonic clock, for the tests, the
 * harness, the soak and the benchmark. */
#ifndef LBT_SLEEP_H
#define LBT_SLEEP_H

#include <stdint.h>

/* Sleeps `ms` milliseconds, the whole time even if a signal arrives; at once
 * for ms <= 0. */
void lbt_sleep_ms(int64_t ms);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t lbt_mono_ms(void);

#endif
