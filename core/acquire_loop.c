/* The loop of every blocking acquire (legacy, token, mode-following, with or
 * without a waiter): when to attempt, to sleep, to listen. */
#include "core/internal.h"

/* A wake of nap's own, beside LB__WAKE_*: the clock's hook cancelled the wait. */
enum { WAKE_CANCELED = -1 };

static int64_t left_ms(const lb__wait *s) { return s->deadline - lb__mono_ms(); }

/* Sleeps up to `ms` (never past the deadline), waking early on a release or a
 * hand-off to us, unless deaf: then only the time ends it. With a sleep hook
 * the sleep is the hook's, and on a waiter it is cut into slices with the hook
 * asked between them: the waiter's condition variable is not the
 * application's, so a cancel is seen within one slice. */
static int nap(lb__wait *s, const lb_clock *clock, int64_t ms, int deaf) {
    int64_t left = left_ms(s);
    if (ms > left) ms = left;
    int (*hook)(void *, int64_t) = clock ? clock->sleep_ms : NULL;
    if (!s->ch) {
        if (!hook) {
            lb__sleep_ms(ms);
            return LB__WAKE_TIMEOUT;
        }
        /* The hook may return early without a cancel: the rest is slept. */
        for (int64_t end = lb__mono_ms() + (ms > 0 ? ms : 0);;) {
            int64_t rest = end - lb__mono_ms();
            if (hook(clock->ud, rest > 0 ? rest : 0)) return WAKE_CANCELED;
            if (rest <= 0 || end - lb__mono_ms() <= 0) return LB__WAKE_TIMEOUT;
        }
    }
    if (!hook) return lb__waiter_wait(s->w, s->ch, s->rec, &s->gen, ms, deaf);
    for (int64_t end = lb__mono_ms() + (ms > 0 ? ms : 0);;) {
        if (hook(clock->ud, 0)) return WAKE_CANCELED;
        int64_t rest = end - lb__mono_ms();
        int64_t slice = rest < LB_CANCEL_SLICE_MS ? rest : LB_CANCEL_SLICE_MS;
        int wake = lb__waiter_wait(s->w, s->ch, s->rec, &s->gen, slice > 0 ? slice : 0, deaf);
        if (wake != LB__WAKE_TIMEOUT || end - lb__mono_ms() <= 0) return wake;
    }
}

static int listening(const lb__wait *s) { return s->ch && lb__waiter_listening(s->w, s->ch); }

/* Subscribes, then attempts until acquired, refused or out of time. Every
 * attempt follows a snapshot of the channel's event count, so a release
 * published after the snapshot ends the sleep that follows the attempt. */
static int loop(lb__wait *s, const lb_clock *clock) {
    int ready = LB__WATCH_DOWN, wake = LB__WAKE_TIMEOUT;
    if (s->w)
        s->ch = lb__waiter_watch(s->w, s->channel, s->channellen, s->rec, &s->before, &s->gen,
                                 &ready);
    /* Subscribed since before the first attempt, and no release or hand-off
     * to us read since: one after that attempt is still to be read and will
     * end the sleep, so a second attempt would learn nothing. Without a
     * subscription nothing was learnt since that attempt either: the next one
     * follows a back-off step. */
    int skip = !s->ch || ready == LB__WATCH_QUIET;
    /* The confirmation bumps the count; until then a release could pass
     * unheard, so the next attempt waits for it (bounded). */
    if (s->ch && ready == LB__WATCH_PENDING && left_ms(s) > 0)
        wake = nap(s, clock, s->sleep_ms(s->ud, 0), 0);
    for (;;) {
        if (wake == WAKE_CANCELED) return LB_ECANCELED;
        if (wake == LB__WAKE_HANDED) {
            int rc = s->handed(s->ud);
            if (rc != LB_EBUSY) return rc;
        }
        /* A release heard, and another client took the lock first: others
         * heard it too. Sleeping one back-off step deaf to releases keeps
         * every waiter from answering every release (a herd of attempts of
         * which one can win); alone, a waiter rarely loses such a race. The
         * deaf step is asked for as a polling sleep (listening 0), so that
         * it follows the lock's turn-over as polling does: a back-off grown
         * by lost races, slept deaf whole, starved the losers (at 8 clients
         * one got a twentieth of another's turns, at 32 one got none). */
        int deaf = 0;
        if (!skip) {
            if (s->ch) s->gen = lb__waiter_gen(s->w, s->ch);
            int rc = s->attempt(s->ud);
            if (rc != LB_EBUSY) return rc;
            deaf = s->deaf_after_loss && wake == LB__WAKE_RELEASE;
        }
        skip = 0;
        if (left_ms(s) <= 0) return s->out_of_time(s->ud);
        wake = nap(s, clock, s->sleep_ms(s->ud, listening(s) && !deaf), deaf);
        /* No attempt starts after the deadline: a sleep that ran into it
         * heard no release, and the holder's bound had not passed. */
        if (wake == LB__WAKE_TIMEOUT && left_ms(s) <= 0) return s->out_of_time(s->ud);
    }
}

int lb__wait_run(lb__wait *s) {
    s->ch = NULL;
    s->gen = 0;
    /* Uncontended, one attempt and no subscription. */
    if (s->w) lb__waiter_peek(s->w, s->channel, s->channellen, &s->before);
    int rc = s->attempt(s->ud);
    if (rc == LB_EBUSY) rc = left_ms(s) > 0 ? loop(s, s->clock) : s->out_of_time(s->ud);
    if (s->ch) lb__waiter_unwatch(s->w, s->ch, s->rec);
    return rc;
}
