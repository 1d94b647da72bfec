/* Blocking acquire of the mode-following lock, polling or waking on release
 * through a waiter: compat and modern releases publish on the key's release
 * channel; a legacy DEL or an expiry is bounded by the back-off. */
#include "lockbridge/waiter.h"
#include "migrate/internal.h"

static int try_once(void *lock, lb_target t) { return lb_mlock_try_acquire(lock, t); }

static int64_t holder_left_ms(void *lock) { return ((lb_mlock *)lock)->holder_ms; }

int lb_mlock_acquire_wait(lb_mlock *l, lb_target t, lb_waiter *w, int64_t wait_ms) {
    if (!l) return LB_EINVAL;
    l->errstr[0] = '\0';
    if (!t.handle) return lb__refuse(l->errstr, LB_EINVAL, LB__NO_TARGET);
    if (wait_ms < 0) return lb__refuse(l->errstr, LB_EINVAL, LB__NEGATIVE_WAIT);
    lb__poll p = {.lock = l, .t = t, .try_once = try_once, .holder_left_ms = holder_left_ms,
                  .ttl_ms = l->opts.ttl_ms, .clock = l->opts.clock,
                  .foreign_fails = l->opts.foreign_fails_at_once};
    lb__backoff_init(&p.backoff, l->opts.backoff_min_ms, l->opts.backoff_max_ms, &l->rng);
    return lb__poll_run(&p, w, l->channel, l->channellen, wait_ms);
}

/* Without a waiter the same loop polls, sleeping the back-off between
 * attempts (never past the holder's remaining validity). */
int lb_mlock_acquire(lb_mlock *l, lb_target t, int64_t wait_ms) {
    return lb_mlock_acquire_wait(l, t, NULL, wait_ms);
}
