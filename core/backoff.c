/* The one back-off of every blocking acquire: jittered, growing, and bounded
 * by what the caller knows of the holder. */
#include "core/internal.h"

void lb__backoff_init(lb__backoff *b, int64_t min_ms, int64_t max_ms, uint64_t *rng) {
    b->min_ms = min_ms > 0 ? min_ms : 1;
    b->max_ms = max_ms > b->min_ms ? max_ms : b->min_ms;
    b->cap_ms = b->min_ms;
    b->rng = rng;
}

/* Jitter keeps contenders from attempting in lock step; the doubling cap keeps
 * a long wait from costing the server an attempt per min_ms. A lock cannot be
 * taken before its holder's validity ends, but it may be released at any time,
 * so the sleep never runs past that end (+1 ms): a crashed holder's lock is
 * taken over promptly, even when that end comes before min_ms: min_ms spaces
 * blind attempts, and an attempt at a known end is not blind. The sleep is
 * still at least 1 ms, and a holder that keeps its lock gives a fresh bound,
 * so no waiter spins. */
int64_t lb__backoff_next(lb__backoff *b, int64_t bound_ms) {
    return lb__backoff_next_under(b, bound_ms, b->max_ms);
}

int64_t lb__backoff_next_under(lb__backoff *b, int64_t bound_ms, int64_t ceiling_ms) {
    int64_t top = b->cap_ms < ceiling_ms ? b->cap_ms : ceiling_ms;
    if (top < b->min_ms) top = b->min_ms;
    uint64_t span = (uint64_t)(top - b->min_ms) + 1;
    int64_t ms = b->min_ms + (int64_t)(lb__xorshift(b->rng) % span);
    b->cap_ms = b->cap_ms > b->max_ms / 2 ? b->max_ms : b->cap_ms * 2;
    if (bound_ms >= 0 && bound_ms < ms - 1) ms = bound_ms + 1;
    return ms;
}

/* A waiter asleep for up to 100 ms beside clients that turn the lock over
 * every millisecond loses nearly every race to those that ask sooner (the
 * releasing client, retaking at once, most of all): at 32 clients on one key,
 * max/min acquisitions per client of 5 to 7 and waits near a second. So the
 * sleeps of a waiter refused by a young holder stay short: at most
 * LB__CHURN_FACTOR times the holder's age (our validity less what the holder
 * had left, a fleet usually sharing one validity), never under
 * LB__CHURN_FLOOR_MS, which keeps the extra attempts near one per acquisition.
 * A holder well into its hold is waited for as before. A timestamp read
 * against a clock sampled before the holder wrote it may show a little more
 * than our validity left: up to max_ms more counts as a holder just begun.
 * More than that (a longer validity than ours), or nothing known, sets no
 * ceiling. */
int64_t lb__churn_ceiling_ms(const lb__backoff *b, int64_t ttl_ms, int64_t left_ms) {
    if (ttl_ms <= 0 || left_ms <= 0 || left_ms > ttl_ms + b->max_ms) return b->max_ms;
    int64_t age = left_ms >= ttl_ms ? 0 : ttl_ms - left_ms;
    if (age > b->max_ms / LB__CHURN_FACTOR) return b->max_ms;
    int64_t ceiling = age * LB__CHURN_FACTOR;
    return ceiling > LB__CHURN_FLOOR_MS ? ceiling : LB__CHURN_FLOOR_MS;
}

int lb__no_hand_off(void *ud) {
    (void)ud;
    return LB_EBUSY;
}
