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
    lb_waiter *w;
    lb__wchan *ch;
    uint64_t gen;
    int64_t deadline, cap;
    int foreign; /* the last attempt met a value left alone */
} mwait;

static int64_t left_ms(const mwait *s) {
    return s->deadline == INT64_MAX ? INT64_MAX : s->deadline - lb__mono_ms();
}

static int nap(mwait *s, int64_t ms, int deaf) {
    if (!s->ch) {
        lb__sleep_ms(ms);
        return LB__WAKE_TIMEOUT;
    }
    return lb__waiter_wait(s->w, s->ch, NULL, &s->gen, ms, deaf);
}

static int attempt(mwait *s) {
    int rc = lb_mlock_try_acquire(s->l, s->c);
    s->foreign = rc == LB_EFOREIGN;
    return rc == LB_EFOREIGN ? LB_EBUSY : rc;
}

static int out_of_time(const mwait *s) { return s->foreign ? LB_EFOREIGN : LB_ETIMEDOUT; }

/* As the token lock's wait (modern/acquire_wait.c): the attempt that may fail
 * follows the subscription, every later one a snapshot of the channel's event
 * count; a waiter that heard a release and lost the race sleeps one back-off
 * step deaf. */
static int wait_loop(mwait *s, const lb__wpeek *before) {
    lb_mlock *l = s->l;
    int ready = LB__WATCH_DOWN, wake = LB__WAKE_TIMEOUT;
    s->ch = lb__waiter_watch(s->w, l->channel, l->channellen, NULL, before, &s->gen, &ready);
    int skip = s->ch && ready == LB__WATCH_QUIET;
    int64_t left = left_ms(s);
    if (s->ch && ready == LB__WATCH_PENDING && left > 0) {
        int64_t ms = lb__mlock_next_sleep(l, &s->cap);
        wake = nap(s, ms < left ? ms : left, 0);
    }
    for (;;) {
        int deaf = 0;
        if (!skip) {
            if (s->ch) s->gen = lb__waiter_gen(s->w, s->ch);
            int rc = attempt(s);
            if (rc != LB_EBUSY) return rc;
            deaf = wake == LB__WAKE_RELEASE;
        }
        skip = 0;
        left = left_ms(s);
        if (left <= 0) return out_of_time(s);
        int64_t ms = lb__mlock_next_sleep(l, &s->cap);
        wake = nap(s, ms < left ? ms : left, deaf);
        if (wake == LB__WAKE_TIMEOUT && left_ms(s) <= 0) return out_of_time(s);
    }
}

int lb_mlock_acquire_wait(lb_mlock *l, struct redisContext *c, lb_waiter *w, int64_t wait_ms) {
    if (!l || !c || wait_ms < 0) return LB_EINVAL;
    if (!w) return lb_mlock_acquire(l, c, wait_ms);
    mwait s = {.l = l, .c = c, .w = w, .cap = l->opts.backoff_min_ms};
    s.deadline = lb__deadline_ms(wait_ms);
    lb__wpeek before;
    lb__waiter_peek(w, l->channel, l->channellen, &before);
    int rc = attempt(&s);
    if (rc != LB_EBUSY) return rc;
    if (left_ms(&s) <= 0) return out_of_time(&s);
    rc = wait_loop(&s, &before);
    if (s.ch) lb__waiter_unwatch(w, s.ch, NULL);
    return rc;
}
