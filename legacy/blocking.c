/* Blocking legacy acquire: attempts with a jittered back-off until a deadline.
 * Real time is read here, in the driver layer, never inside the step machine. */

#include "legacy/internal.h"

/* The next sleep: uniform in [min, cap], where cap doubles after each busy
 * attempt up to backoff_max_ms. Jitter keeps contenders from attempting in
 * lock step. A holder's lock cannot be taken before its expiry, but it may be
 * released at any time, so the sleep never runs past that expiry: waking just
 * after it lets us take over a crashed holder's lock promptly. */
static int64_t next_sleep(lb_legacy_lock *l, int64_t *cap, const lb_now *now) {
    int64_t lo = l->opts.backoff_min_ms, span = *cap - lo + 1;
    int64_t ms = lo + (int64_t)(lb__xorshift(&l->rng) % (uint64_t)span);
    if (*cap < l->opts.backoff_max_ms) *cap = *cap * 2 > l->opts.backoff_max_ms
                                                  ? l->opts.backoff_max_ms : *cap * 2;
    int64_t t;
    /* The observed expiry is whatever a value said (up to INT64_MAX), and a
     * clock offset can push `now` anywhere: overflow means "far away". */
    int64_t left;
    if (lb_legacy_observed_expiry(l, &t) == LB_OK &&
        lb__sub64(t, lb_codec_now(&l->codec, now), &left) == 0) {
        int64_t until = lb__codec_units_to_ms(&l->codec, left);
        if (until < ms - 1) ms = until + 1 < lo ? lo : until + 1;
    }
    return ms;
}

int lb_legacy_acquire(lb_legacy_lock *l, struct redisContext *c, int64_t wait_ms) {
    if (!l || !c || wait_ms < 0) return LB_EINVAL;
    int64_t deadline = lb__deadline_ms(wait_ms), cap = l->opts.backoff_min_ms;
    for (;;) {
        int rc = lb_legacy_try_acquire(l, c);
        if (rc != LB_EBUSY && rc != LB_EFOREIGN) return rc;
        int64_t left = deadline - lb__mono_ms();
        if (left <= 0) return rc == LB_EFOREIGN ? LB_EFOREIGN : LB_ETIMEDOUT;
        lb_now now = lb_clock_now(l->opts.clock);
        int64_t ms = next_sleep(l, &cap, &now);
        lb__sleep_ms(ms < left ? ms : left);
    }
}
