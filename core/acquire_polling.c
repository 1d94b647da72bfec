/* The blocking acquire of the lock kinds that are never handed a lock (legacy,
 * mode-following): attempts through the core wait loop, a value left alone
 * waited out like a busy lock, sleeps bounded by the holder's validity. */
#include "core/internal.h"

static int attempt(void *ud) {
    lb__poll *p = ud;
    int rc = p->try_once(p->lock, p->t);
    /* A value left alone (LB_EFOREIGN) may be replaced by its writer with one
     * we understand: it is waited out like a busy lock, unless the caller
     * would rather hear of it at once. */
    p->foreign = rc == LB_EFOREIGN;
    return p->foreign && !p->foreign_fails ? LB_EBUSY : rc;
}

/* Polling, and the deaf step of a wait that lost a race after a release,
 * follow the lock's turn-over (core/backoff.c); a wait that hears releases
 * keeps its back-off, which a release cuts short. */
static int64_t sleep_ms(void *ud, int listening) {
    lb__poll *p = ud;
    int64_t left = p->holder_left_ms(p->lock);
    if (listening) return lb__backoff_next(&p->backoff, left);
    return lb__backoff_next_under(&p->backoff, left,
                                  lb__churn_ceiling_ms(&p->backoff, p->ttl_ms, left));
}

static int out_of_time(void *ud) { return ((lb__poll *)ud)->foreign ? LB_EFOREIGN : LB_ETIMEDOUT; }

int lb__poll_run(lb__poll *p, struct lb_waiter *w, const char *channel, size_t channellen,
                 int64_t wait_ms) {
    p->foreign = 0;
    lb__wait run = {.w = w, .channel = channel, .channellen = channellen,
                    .deadline = lb__deadline_ms(wait_ms), .deaf_after_loss = 1, .ud = p,
                    .attempt = attempt, .sleep_ms = sleep_ms, .out_of_time = out_of_time,
                    .handed = lb__no_hand_off, .clock = p->clock};
    return lb__wait_run(&run);
}
