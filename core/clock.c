/* The injectable clock: wall and monotonic readings with a per-client offset. */
#include <time.h>

#include "core/internal.h"

static int64_t system_wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t system_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* t + offset_ms * per_ms, saturating: an absurd offset gives an absurd but
 * defined reading (far past or far future), never a wrapped one. */
static int64_t shift(int64_t t, int64_t offset_ms, int64_t per_ms) {
    int64_t d, r;
    if (lb__mul64(offset_ms, per_ms, &d) != 0) d = offset_ms < 0 ? INT64_MIN : INT64_MAX;
    if (lb__add64(t, d, &r) != 0) r = d < 0 ? INT64_MIN : INT64_MAX;
    return r;
}

lb_now lb_clock_now(const lb_clock *clock) {
    lb_now now;
    if (!clock) {
        now.wall_us = system_wall_us();
        now.mono_ns = system_mono_ns();
        return now;
    }
    now.wall_us = clock->wall_us ? clock->wall_us(clock->ud) : system_wall_us();
    now.mono_ns = clock->mono_ns ? clock->mono_ns(clock->ud) : system_mono_ns();
    now.wall_us = shift(now.wall_us, clock->offset_ms, 1000);
    now.mono_ns = shift(now.mono_ns, clock->offset_ms, 1000000);
    return now;
}
