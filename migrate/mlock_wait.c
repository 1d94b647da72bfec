/* Blocking acquire of the mode-following lock that wakes on release, through
 * the token lock's waiter: compat and modern releases publish on the key's
 * release channel; a legacy DEL or an expiry is bounded by the back-off. */
#include <hiredis/hiredis.h>

#include "lockbridge/wait.h"
#include "migrate/internal.h"
#include "modern/internal.h"

typedef struct mwait {
    lb_mlock *l;
    redisContext *c;
    int64_t cap; /* the back-off's current bound, ms */
    int foreign; /* the last attempt met a value left alone */
} mwait;

/* A value left alone (LB_EFOREIGN) is waited out like a busy lock. */
static int attempt(void *ud) {
    mwait *s = ud;
    int rc = lb_mlock_try_acquire(s->l, s->c);
    s->foreign = rc == LB_EFOREIGN;
    return rc == LB_EFOREIGN ? LB_EBUSY : rc;
}

static int64_t sleep_ms(void *ud, int listening) {
    mwait *s = ud;
    (void)listening;
    return lb__mlock_next_sleep(s->l, &s->cap);
}

static int out_of_time(void *ud) { return ((mwait *)ud)->foreign ? LB_EFOREIGN : LB_ETIMEDOUT; }

static int no_hand_off(void *ud) {
    (void)ud;
    return LB_EBUSY;
}

int lb_mlock_acquire_wait(lb_mlock *l, struct redisContext *c, lb_waiter *w, int64_t wait_ms) {
    if (!l || !c || wait_ms < 0) return LB_EINVAL;
    if (!w) return lb_mlock_acquire(l, c, wait_ms);
    mwait s = {.l = l, .c = c, .cap = l->opts.backoff_min_ms};
    lb__wait run = {.w = w, .channel = l->channel, .channellen = l->channellen,
                    .deadline = lb__deadline_ms(wait_ms), .deaf_after_loss = 1, .ud = &s,
                    .attempt = attempt, .sleep_ms = sleep_ms, .out_of_time = out_of_time,
                    .handed = no_hand_off};
    return lb__wait_run(&run);
}
