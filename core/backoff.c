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
    uint64_t span = (uint64_t)(b->cap_ms - b->min_ms) + 1;
    int64_t ms = b->min_ms + (int64_t)(lb__xorshift(b->rng) % span);
    b->cap_ms = b->cap_ms > b->max_ms / 2 ? b->max_ms : b->cap_ms * 2;
    if (bound_ms >= 0 && bound_ms < ms - 1) ms = bound_ms + 1;
    return ms;
}

int lb__no_hand_off(void *ud) {
    (void)ud;
    return LB_EBUSY;
}
