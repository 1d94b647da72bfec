/* Blocking acquire of the mode-following lock, polling or waking on release
 * through a waiter: compat and modern releases publish on the key's
 * release channel; a legacy DEL or an expiry is bounded by the back-off. */
#include <hiredis/hiredis.h>

#include "lockbridge/wait.h"
#include "migrate/internal.h"

typedef struct mwait {
    lb_mlock *l;
    lb_target t;
    lb__backoff backoff;
    int foreign; /* the last attempt met a value left alone */
} mwait;

/* A value left alone (LB_EFOREIGN) is waited out like a busy lock. */
static int attempt(void *ud) {
    mwait *s = ud;
    int rc = lb_mlock_try_acquire(s->l, s->t);
    s->foreign = rc == LB_EFOREIGN;
    return rc == LB_EFOREIGN ? LB_EBUSY : rc;
}

static int64_t sleep_ms(void *ud, int listening) {
    mwait *s = ud;
    (void)listening;
    return lb__backoff_next(&s->backoff, s->l->holder_ms);
}

static int out_of_time(void *ud) { return ((mwait *)ud)->foreign ? LB_EFOREIGN : LB_ETIMEDOUT; }

int lb_mlock_acquire_wait(lb_mlock *l, lb_target t, lb_waiter *w, int64_t wait_ms) {
    if (!l || !t.handle || wait_ms < 0) return LB_EINVAL;
    mwait s = {.l = l, .t = t};
    lb__backoff_init(&s.backoff, l->opts.backoff_min_ms, l->opts.backoff_max_ms, &l->rng);
    lb__wait run = {.w = w, .channel = l->channel, .channellen = l->channellen,
                    .deadline = lb__deadline_ms(wait_ms), .deaf_after_loss = 1, .ud = &s,
                    .attempt = attempt, .sleep_ms = sleep_ms, .out_of_time = out_of_time,
                    .handed = lb__no_hand_off};
    return lb__wait_run(&run);
}

/* Without a waiter the same loop polls, sleeping the back-off between
 * attempts (never past the holder's remaining validity). */
int lb_mlock_acquire(lb_mlock *l, lb_target t, int64_t wait_ms) {
    return lb_mlock_acquire_wait(l, t, NULL, wait_ms);
}
