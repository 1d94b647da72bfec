/* Blocking token-lock acquire: attempts with a jittered back-off until a
 * deadline. The sleep never outlasts the holder's remaining TTL, so a lock that
 * simply expires (or is released by a client that publishes nothing) is taken
 * within one back-off step. Real time is read here, in the driver layer. */

#include "lockbridge/wait.h"
#include "modern/internal.h"

/* Uniform in [min, cap], cap doubling to backoff_max_ms; no longer than the
 * holder's TTL (+1 ms) when known. */
static int64_t next_sleep(lb_lock *l, int64_t *cap) {
    int64_t lo = l->opts.backoff_min_ms;
    int64_t ms = lo + (int64_t)(lb__xorshift(&l->rng) % (uint64_t)(*cap - lo + 1));
    *cap = *cap * 2 < l->opts.backoff_max_ms ? *cap * 2 : l->opts.backoff_max_ms;
    if (l->holder_ttl_ms >= 0 && l->holder_ttl_ms + 1 < ms) ms = l->holder_ttl_ms + 1;
    return ms;
}

int lb_lock_acquire(lb_lock *l, struct redisContext *c, int64_t wait_ms) {
    if (!l || !c || wait_ms < 0) return LB_EINVAL;
    /* A fair waiter must hold its place in the queue (modern/acquire_wait.c). */
    if (l->fair) return lb_lock_acquire_wait(l, c, NULL, wait_ms);
    int64_t deadline = lb__deadline_ms(wait_ms), cap = l->opts.backoff_min_ms;
    for (;;) {
        int rc = lb_lock_try_acquire(l, c);
        if (rc != LB_EBUSY) return rc;
        int64_t left = deadline - lb__mono_ms();
        if (left <= 0) return LB_ETIMEDOUT;
        int64_t ms = next_sleep(l, &cap);
        lb__sleep_ms(ms < left ? ms : left);
    }
}
