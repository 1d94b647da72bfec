/* Real time for the blocking drivers: the monotonic clock in milliseconds, a
 * sleep that survives signals, and deadlines that saturate instead of wrapping. */
#include <errno.h>
#include <time.h>

#include "core/internal.h"

int64_t lb__mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void lb__sleep_ms(int64_t ms) {
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* A wait of INT64_MAX ms means "as long as it takes"; the deadline then
 * saturates rather than wrapping into the past. */
int64_t lb__deadline_ms(int64_t wait_ms) {
    int64_t deadline;
    if (lb__add64(lb__mono_ms(), wait_ms, &deadline) != 0) return INT64_MAX;
    return deadline;
}
