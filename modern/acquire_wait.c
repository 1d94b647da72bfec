/* Blocking acquire that wakes on release: attempts on the caller's connection,
 * sleeps on the waiter between them, bounded by a jittered back-off and the
 * holder's remaining TTL; in fair mode it keeps its place in the queue. */
#include <string.h>

#include "lockbridge/wait.h"
#include "modern/internal.h"

/* Uniform in [min, cap], cap doubling to backoff_max_ms; no longer than the
 * holder's TTL (+1 ms) when known, so an expiry or a bare DEL (no message)
 * costs at most that. */
static int64_t next_sleep(lb_lock *l, int64_t *cap) {
    int64_t lo = l->opts.backoff_min_ms;
    int64_t ms = lo + (int64_t)(lb__xorshift(&l->rng) % (uint64_t)(*cap - lo + 1));
    *cap = *cap > l->opts.backoff_max_ms / 2 ? l->opts.backoff_max_ms : *cap * 2;
    if (l->holder_ttl_ms >= 0 && l->holder_ttl_ms + 1 < ms) ms = l->holder_ttl_ms + 1;
    return ms;
}

typedef struct wait_state {
    lb_lock *l;
    struct redisContext *c;
    lb_waiter *w;
    lb__wchan *ch;
    lb__wrec rec;
    uint64_t gen;
    lb__wpeek before; /* the channel before the first attempt */
    int64_t deadline, cap;
} wait_state;

/* Sleeps up to `ms`, waking early on a release or a hand-off to us (unless
 * deaf: then only the time ends it). */
static int nap(wait_state *s, int64_t ms, int deaf) {
    if (!s->ch) {
        lb__sleep_ms(ms);
        return LB__WAKE_TIMEOUT;
    }
    return lb__waiter_wait(s->w, s->ch, &s->rec, &s->gen, ms, deaf);
}

static int64_t left_ms(const wait_state *s) { return s->deadline - lb__mono_ms(); }

/* An attempt; a fair one names the waiter's inbox once it is listening, so
 * that a hand-off wakes this client alone. */
static int attempt(wait_state *s) {
    if (s->l->fair && s->w) {
        const char *inbox;
        size_t len = lb__waiter_inbox(s->w, &inbox);
        lb__fair_set_inbox(s->l, inbox, len);
    }
    return lb_lock_try_acquire(s->l, s->c);
}

/* A fair waiter queued and listening needs no attempt until its hand-off
 * message comes (it ends the sleep), a release or a lost subscription
 * (events, which end it too), the holder's TTL or the head's lease runs out
 * (the script's hint, in holder_ttl_ms: a holder that died hands off
 * nothing), or its own lease wants refreshing. A third of the lease leaves
 * two thirds of it as margin for a late wake-up; never shorter than the
 * back-off bound, which the lease exceeds (lb__fair_valid). */
static int64_t queued_sleep(wait_state *s) {
    lb_lock *l = s->l;
    if (!s->ch || !lb__waiter_listening(s->w, s->ch)) return next_sleep(l, &s->cap);
    int64_t ms = lb__fair_lease_ms(l) / 3;
    if (ms < l->opts.backoff_max_ms) ms = l->opts.backoff_max_ms;
    if (l->holder_ttl_ms >= 0 && l->holder_ttl_ms + 1 < ms) ms = l->holder_ttl_ms + 1;
    return ms;
}

/* A fair waiter out of time leaves the queue; the script reports the lock
 * ours instead if a hand-off reached us first. */
static int give_up(wait_state *s) {
    if (!s->l->fair) return LB_ETIMEDOUT;
    lb__fair_set_mode(s->l, LB__FAIR_LEAVE);
    int rc = lb_lock_try_acquire(s->l, s->c);
    return rc == LB_OK ? LB_OK : LB_ETIMEDOUT;
}

/* Subscribes, then attempts until acquired, refused or out of time. Every
 * attempt follows a snapshot of the channel's event count, so a release
 * published after the snapshot ends the sleep that follows the attempt. */
static int wait_loop(wait_state *s) {
    lb_lock *l = s->l;
    int ready = LB__WATCH_DOWN, wake = LB__WAKE_TIMEOUT;
    if (s->w) {
        if (l->fair) memcpy(s->rec.token, l->token, LB__TOKEN_CAP);
        s->ch = lb__waiter_watch(s->w, l->channel, l->channellen, l->fair ? &s->rec : NULL,
                                 &s->before, &s->gen, &ready);
    }
    /* Subscribed since before the first attempt, and no release or hand-off
     * to us read since: one after that attempt is still to be read and will
     * end the sleep, so a second attempt would learn nothing. */
    int skip = s->ch && ready == LB__WATCH_QUIET;
    int64_t left = left_ms(s);
    if (s->ch && ready == LB__WATCH_PENDING && left > 0) {
        /* The confirmation bumps the count; until then a release could pass
         * unheard, so the next attempt waits for it (bounded). */
        int64_t ms = next_sleep(l, &s->cap);
        wake = nap(s, ms < left ? ms : left, 0);
    }
    for (;;) {
        /* A hand-off without a fencing number (from a releaser without
         * fencing) is confirmed by the next attempt, which reads the counter. */
        if (wake == LB__WAKE_HANDED && (s->rec.fence > 0 || !l->opts.fencing))
            return lb__fair_handed(l, l->opts.fencing ? s->rec.fence : 0);
        /* A release heard, and another client took the lock first: others
         * heard it too. Sleeping one back-off step deaf to releases keeps
         * every waiter from answering every release (a herd of attempts of
         * which one can win); alone, a waiter rarely loses such a race. */
        int deaf = 0;
        if (!skip) {
            if (s->ch) s->gen = lb__waiter_gen(s->w, s->ch);
            int rc = attempt(s);
            if (rc != LB_EBUSY) return rc;
            deaf = !l->fair && wake == LB__WAKE_RELEASE;
        }
        skip = 0;
        left = left_ms(s);
        if (left <= 0) return give_up(s);
        int64_t ms = l->fair ? queued_sleep(s) : next_sleep(l, &s->cap);
        wake = nap(s, ms < left ? ms : left, deaf);
        /* No attempt starts after the deadline: a sleep that ran into it
         * heard no release, and the TTL bound had not passed. */
        if (wake == LB__WAKE_TIMEOUT && left_ms(s) <= 0) return give_up(s);
    }
}

int lb_lock_acquire_wait(lb_lock *l, struct redisContext *c, lb_waiter *w, int64_t wait_ms) {
    if (!l || !c || wait_ms < 0) return LB_EINVAL;
    if (l->held) return LB_ESTATE;
    wait_state s;
    memset(&s, 0, sizeof s);
    s.l = l;
    s.c = c;
    s.w = w;
    s.deadline = lb__deadline_ms(wait_ms);
    s.cap = l->opts.backoff_min_ms;
    if (l->fair && lb__fair_begin_wait(l) != LB_OK) return LB_EIO;
    /* Uncontended, one attempt and no subscription. */
    if (w) lb__waiter_peek(w, l->channel, l->channellen, &s.before);
    int rc = attempt(&s);
    if (rc == LB_EBUSY) rc = left_ms(&s) > 0 ? wait_loop(&s) : give_up(&s);
    if (s.ch) lb__waiter_unwatch(w, s.ch, l->fair ? &s.rec : NULL);
    if (l->fair) lb__fair_end_wait(l);
    return rc;
}
