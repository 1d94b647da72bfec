/* Test harness: a sleep hook that records what a wait asked for and acts
 * after each sleep. */
#include "harness/churn.h"

#include <time.h>

int lbt_sleeps_record(void *ud, int64_t ms) {
    lbt_sleeps *s = ud;
    if (ms > s->longest_ms) s->longest_ms = ms;
    s->calls++;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (ms > 0 && nanosleep(&ts, &ts) != 0) {
    }
    if (s->after && s->after(s->after_ud) != 0) s->after_failures++;
    return 0;
}
