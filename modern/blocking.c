/* Blocking acquire of the token lock, polling or waking on release: attempts on
 * the target, sleeps (on the waiter, when given) between them, bounded by a jittered back-off and the
 * holder's remaining TTL; in fair mode it keeps its place in the queue. */
#include <string.h>

#include <hiredis/hiredis.h>

#include "lockbridge/wait.h"
#include "modern/internal.h"

typedef struct wait_state {
    lb_lock *l;
    lb_target t;
    lb_waiter *w;
    lb__wrec rec;
    lb__backoff backoff;
    int lists;          /* a fair wait on its own connection: baton, grant list */
    int64_t note_at_ms; /* outside fair mode: when a refused wait notes itself next */
} wait_state;

/* An attempt; a fair one names the waiter's inbox once it is listening, so
 * that a hand-off wakes this client alone. A wait outside fair mode refused
 * for LB__OUTSIDER_NOTE_MS notes itself beside a fair queue (if any), and
 * again every as long while refused: fair releases open windows only for
 * outsiders seen, and a client that only ever finds the lock held is seen
 * by nothing else. Its failure is ignored: the attempt's result stands. */
static int attempt(void *ud) {
    wait_state *s = ud;
    if (s->l->fair && s->w && !s->lists) {
        const char *inbox;
        size_t len = lb__waiter_inbox(s->w, &inbox);
        lb__fair_set_inbox(s->l, inbox, len);
    }
    int64_t seen = s->l->outsider_ns;
    int rc = lb__lock_try(s->l, s->t);
    /* A fair attempt that found an outside holder writes the outsider note,
     * which the baton's releases read. */
    if (rc == LB_EBUSY && s->l->fair && s->l->outsider_ns != seen) lb__lock_note_due(s->l, s->t, 1);
    if (rc != LB_EBUSY || s->l->fair) return rc;
    int64_t now = lb__mono_ms();
    if (s->note_at_ms == 0) s->note_at_ms = now + LB__OUTSIDER_NOTE_MS;
    if (now < s->note_at_ms) return rc;
    s->note_at_ms = now + LB__OUTSIDER_NOTE_MS;
    char why[sizeof s->l->errstr];
    memcpy(why, s->l->errstr, sizeof why);
    (void)lb__lock_note_outsider(s->l, s->t, 0);
    memcpy(s->l->errstr, why, sizeof why);
    return rc;
}

/* A fair waiter queued and listening needs no attempt until its hand-off
 * message comes (it ends the sleep), a release or a lost subscription
 * (events, which end it too), the holder's TTL or the head's lease runs out
 * (the script's hint, in holder_ttl_ms: a holder that died hands off
 * nothing), or its own lease wants refreshing. A third of the lease leaves
 * two thirds of it as margin for a late wake-up; never shorter than the
 * back-off bound, which the lease exceeds (lb__fair_valid). */
static int64_t sleep_ms(void *ud, int listening) {
    wait_state *s = ud;
    lb_lock *l = s->l;
    /* Polling, and a listening wait's deaf step after a lost race (asked
     * for with listening 0), follow the lock's turn-over (core/backoff.c); a
     * wait that hears releases keeps its back-off, which a release cuts
     * short. So does a wait beside a fair queue (the lock's last note found
     * one): the queue hands the lock over at every release, and asking
     * sooner would only take its turns (the queue's rate fell to a third in
     * the bench's mixed row). */
    if (!l->fair && !listening && !l->note_found_queue)
        return lb__backoff_next_under(&s->backoff, l->holder_ttl_ms,
                                      lb__churn_ceiling_ms(&s->backoff, l->opts.ttl_ms,
                                                           l->holder_ttl_ms));
    if (!l->fair || !listening) return lb__backoff_next(&s->backoff, l->holder_ttl_ms);
    int64_t ms = lb__fair_lease_ms(l) / 3;
    if (ms < l->opts.backoff_max_ms) ms = l->opts.backoff_max_ms;
    if (l->holder_ttl_ms >= 0 && l->holder_ttl_ms + 1 < ms) ms = l->holder_ttl_ms + 1;
    return ms;
}

/* A fair waiter out of time leaves the queue; the script reports the lock
 * ours instead if a hand-off reached us first. */
static int give_up(void *ud) {
    wait_state *s = ud;
    if (!s->l->fair) return LB_ETIMEDOUT;
    lb__fair_set_mode(s->l, LB__FAIR_LEAVE);
    int rc = lb__lock_try(s->l, s->t);
    return rc == LB_OK ? LB_OK : LB_ETIMEDOUT;
}

/* A single connection already known broken: nothing more can be sent on it.
 * (A cluster or sentinel target opens a new one for the next command.) */
static int broken(lb_target t) {
    return t.kind == LB_TARGET_CONN && ((redisContext *)t.handle)->err;
}

/* A fair wait that ended with an error (an error reply, a reply it cannot
 * read) or was cancelled would keep its place: a release would hand the lock
 * to a token nobody uses, and every waiter behind it would wait out that TTL.
 * It leaves, best effort (not over a connection already known broken: its
 * place lapses with its lease). Should the leave find that a hand-off reached
 * us, the wait got what it asked for; otherwise it reports its own error,
 * message included. */
static int leave_on_error(wait_state *s, int rc) {
    if (rc == LB_OK || rc == LB_ETIMEDOUT || broken(s->t)) return rc;
    char why[sizeof s->l->errstr];
    memcpy(why, s->l->errstr, sizeof why);
    lb__fair_set_mode(s->l, LB__FAIR_LEAVE);
    if (lb__lock_try(s->l, s->t) == LB_OK) {
        if (rc != LB_ECANCELED) return LB_OK;
        /* A cancelled wait holds nothing: a hand-off that beat the cancel
         * is passed on at once, to the next in the queue. Should that
         * release fail, the lock is ours and the caller is told so. */
        if (lb_lock_release(s->l, s->t) != LB_OK && s->l->held) return LB_OK;
    }
    memcpy(s->l->errstr, why, sizeof why);
    return rc;
}

/* A hand-off without a fencing number (from a releaser without fencing) is
 * confirmed by the next attempt, which reads the counter. */
static int handed(void *ud) {
    wait_state *s = ud;
    lb_lock *l = s->l;
    if (l->opts.fencing && s->rec.got_fence <= 0) return LB_EBUSY;
    return lb__fair_handed(l, s->rec.got_place, l->opts.fencing ? s->rec.got_fence : 0);
}

/* When a wait blocked on its grant list must attempt again, ms after its
 * last attempt: to refresh its lease (as a listening waiter does), or when
 * the holder's TTL runs out (a holder that died hands off nothing). A holder
 * outside the queue hands nothing off either, and its release publishes on a
 * channel this wait does not hear: the wait polls then, one back-off step. */
static int64_t refresh_ms(wait_state *s) {
    lb_lock *l = s->l;
    if (lb__fair_holder_foreign(l)) return lb__backoff_next(&s->backoff, l->holder_ttl_ms);
    int64_t ms = lb__fair_lease_ms(l) / 3;
    if (ms < l->opts.backoff_max_ms) ms = l->opts.backoff_max_ms;
    if (l->holder_ttl_ms >= 0 && l->holder_ttl_ms + 1 < ms) ms = l->holder_ttl_ms + 1;
    return ms;
}

enum { BLPOP_REFUSED = 1 }; /* beside the LB_* codes, which are 0 or negative */

/* A fair wait on one connection blocks on its own grant list: the release
 * pushes the grant there and Redis answers the BLPOP in the same pass, one
 * wake-up per hand-off and nothing else on the connection. Blocks are cut
 * into slices: at the next attempt due (refresh_ms), within half the
 * connection's read timeout, and every LB_CANCEL_SLICE_MS when the clock has
 * a sleep hook (asked between slices). Redis may end a BLPOP up to its
 * timer's period late (LB__BLPOP_LATE_MS) when it has nothing else to do, so
 * a wait can end that much past its deadline: polling the last stretch
 * instead would leave a grant pushed then unread for a back-off step, the
 * lock idle meanwhile. A server that refuses BLPOP, or a read timeout too
 * short for it, sends the wait back to polling (BLPOP_REFUSED). */
static int grant_wait(wait_state *s, int64_t deadline) {
    lb_lock *l = s->l;
    redisContext *c = s->t.handle;
    const lb_clock *clock = l->opts.clock;
    int (*hook)(void *, int64_t) = clock ? clock->sleep_ms : NULL;
    int64_t max = lb__fair_block_max_ms(c);
    if (max <= 0) return BLPOP_REFUSED;
    if (hook && max > LB_CANCEL_SLICE_MS) max = LB_CANCEL_SLICE_MS;
    int rc = attempt(s);
    int64_t next = lb__mono_ms() + refresh_ms(s);
    while (rc == LB_EBUSY) {
        int64_t now = lb__mono_ms();
        if (now >= deadline) return give_up(s);
        if (hook && hook(clock->ud, 0)) return LB_ECANCELED;
        int64_t until = next < deadline ? next : deadline;
        int b = lb__fair_block(l, c, until - now < max ? until - now : max);
        if (b == LB_OK) return LB_OK;
        if (b == LB_EREDIS) return BLPOP_REFUSED;
        if (b != LB_EBUSY && b != LB_ETIMEDOUT) return b;
        if (b == LB_ETIMEDOUT && lb__mono_ms() < next) continue;
        if (lb__mono_ms() >= deadline) return give_up(s);
        rc = attempt(s);
        next = lb__mono_ms() + refresh_ms(s);
    }
    return rc;
}

/* A baton that reached us with less than LB__BATON_MARGIN_MS of lease left
 * is no acquisition: its token is released (the release deletes our mark,
 * and may pass the lock on to another waiter) and the wait goes on in the
 * queue with its own token. A release that fails leaves the token to lapse
 * with the key's short TTL; the wait reports that failure. */
static int give_back(wait_state *s) {
    lb_lock *l = s->l;
    int rc = lb_lock_release(l, s->t);
    l->held = 0;
    memcpy(l->token, s->rec.token, LB__TOKEN_CAP);
    return rc == LB_OK || rc == LB_ELOST ? LB_ETIMEDOUT : rc;
}

/* A fair wait on one connection first tries the baton: a free key taken with
 * SET NX, else one block of up to fair_baton_ms on the baton list, which
 * a release with no one queued passes the lock down (one list per lock, so
 * Redis serves its waiters in the order they blocked, and a hand-off costs a
 * release script and that one BLPOP). A wait the baton did not reach in that
 * time queues (grant_wait), and a release serves the queue first: a waiter
 * is never passed over for long by waiters who came after it. Not with a
 * fixed token (the baton brings its own), fencing (a release hands no
 * number with the baton), a TTL under 400 ms or a read timeout too short to
 * block. */
static int baton_wait(wait_state *s, int64_t deadline) {
    lb_lock *l = s->l;
    redisContext *c = s->t.handle;
    const lb_clock *clock = l->opts.clock;
    /* A receiver counts its lease less the baton's life (up to
     * LB__BATON_LIFE_MS): a TTL under four times that would leave it little. */
    if (l->fixed_token || l->opts.fencing || l->opts.fair_baton_ms <= 0 ||
        l->opts.ttl_ms < (int64_t)4 * LB__BATON_LIFE_MS)
        return BLPOP_REFUSED;
    int64_t max = lb__fair_block_max_ms(c);
    if (max <= 0) return BLPOP_REFUSED;
    if (clock && clock->sleep_ms && max > LB_CANCEL_SLICE_MS) max = LB_CANCEL_SLICE_MS;
    if (max > l->opts.fair_baton_ms) max = l->opts.fair_baton_ms;
    /* The mark lapses with the block: kept under our TTL less a baton's
     * life, it lapses before a key we are passed (with a TTL like ours) can,
     * so that a receiver that dies holding leaves no mark alive to draw a
     * baton once its key is gone. */
    if (max > l->opts.ttl_ms - LB__BATON_LIFE_MS) max = l->opts.ttl_ms - LB__BATON_LIFE_MS;
    int64_t left = deadline - lb__mono_ms();
    int64_t seen = l->outsider_ns;
    int rc = lb__fair_baton_wait(l, c, left < max ? left : max);
    /* Its SET NX found a holder outside the queue, which the baton's
     * releases learn only from the outsider note. */
    if (l->outsider_ns != seen && !lb__machine_in_flight(&l->m)) lb__lock_note_due(l, s->t, 1);
    if (rc == LB_OK && !lb__fair_lease_usable(l)) rc = give_back(s);
    /* Out of time with no baton: the wait never queued, and its mark lapsed
     * before its BLPOP ended, so nothing is left to undo. */
    if (rc == LB_ETIMEDOUT && lb__mono_ms() >= deadline) return LB_ETIMEDOUT;
    if (rc == LB_ETIMEDOUT || rc == LB_EREDIS) return BLPOP_REFUSED;
    return rc;
}

/* Our attempts found the key held by a value that is no lockbridge token
 * less than LB__OUTSIDER_SEEN_MS ago: a client that does not queue shares
 * the key. */
static int outsider_near(const lb_lock *l, int64_t now_ns) {
    return l->outsider_ns && now_ns - l->outsider_ns <= (int64_t)LB__OUTSIDER_SEEN_MS * 1000000;
}

/* A plain wait's own attempt found the outsider holding less than a
 * LB__OUTSIDER_TURNS_MS ago: it is getting turns of its own (a client that retakes at
 * once after its release keeps the key for many), and standing back after
 * each of ours would hand it nearly all of them (beside 2 such JVM threads, 2
 * polling clients got 21 turns each against 5280). The wait then asks as
 * polling does; once the outsider has not been met for that long, our
 * releases leave it the key again. */
static int outsider_taking_turns(const lb_lock *l, int64_t now_ns) {
    return !l->fair && l->outsider_held_ns &&
           now_ns - l->outsider_held_ns <= (int64_t)LB__OUTSIDER_TURNS_MS * 1000000;
}

/* A wait outside a fair queue (its lock's last note, less than
 * LB__QUEUE_NOTED_MS ago, found one), or a polling wait whose lock's last
 * release reached clients listening for it, begun less than backoff_max_ms
 * after that release lets the others in first, for the rest of that time (at
 * most wait_ms). The client that has just released, awake and asking again
 * at once, beat the queue's head (woken by the release message) and the
 * other outsiders to the free lock, turn after turn (in the bench's mixed row
 * one of four outsiders took all 293 turns). Listeners are a fair queue's
 * waiters or waits on release; a wait on release itself counts its own
 * subscription among them, so it does not stand back on that sign. A wait
 * whose attempts found a client outside the queue holding the key (see
 * outsider_near), fair or not, stands back LB__OUTSIDER_STAND_BACK_MS after
 * our release instead (a fair wait would take the key back at once, by its
 * SET NX or the baton): a client that polls every 200 ms and retakes at once after its
 * own release never finds the key free while we poll faster and retake at
 * once (2 such threads got 22 turns against 3897 in 5 s). The time slept is
 * the wait's. Slept through the clock's hook when it has one;
 * nonzero: cancelled. */
static int stand_back(const lb_lock *l, const lb_waiter *w, int64_t *wait_ms) {
    if (!l->released_ns) return 0;
    const lb_clock *clock = l->opts.clock;
    lb_now now = lb_clock_now(clock); /* the clock the release and note were timed by */
    int queue = l->note_found_queue &&
                now.mono_ns - l->noted_ns <= (int64_t)LB__QUEUE_NOTED_MS * 1000000;
    int64_t span = l->opts.backoff_max_ms;
    /* A fair wait through a waiter queues: the queue's windows serve the
     * outsider, and standing back after every release starved the queue
     * (in the bench's mixed row one waiter got a twelfth of another's turns). */
    int near = outsider_near(l, now.mono_ns) && !(l->fair && w);
    if (near && !outsider_taking_turns(l, now.mono_ns))
        span = LB__OUTSIDER_STAND_BACK_MS;
    else if (near) return 0;
    else if (l->fair || (!queue && !(l->heard_release && !w))) return 0;
    int64_t ms = span - (now.mono_ns - l->released_ns) / 1000000;
    if (ms > *wait_ms) ms = *wait_ms;
    if (ms <= 0) return 0;
    *wait_ms -= ms;
    if (clock && clock->sleep_ms) return clock->sleep_ms(clock->ud, ms);
    lb__sleep_ms(ms);
    return 0;
}

int lb_lock_acquire_wait(lb_lock *l, lb_target t, lb_waiter *w, int64_t wait_ms) {
    if (!l) return LB_EINVAL;
    l->errstr[0] = '\0';
    if (!t.handle) return lb__refuse(l->errstr, LB_EINVAL, LB__NO_TARGET);
    if (wait_ms < 0) return lb__refuse(l->errstr, LB_EINVAL, LB__NEGATIVE_WAIT);
    if (l->held) return lb__refuse(l->errstr, LB_ESTATE, "already held by this handle");
    if (stand_back(l, w, &wait_ms))
        return lb__refuse(l->errstr, LB_ECANCELED, "cancelled by the clock's sleep hook");
    wait_state s;
    memset(&s, 0, sizeof s);
    s.l = l;
    s.t = t;
    s.w = w;
    lb__backoff_init(&s.backoff, l->opts.backoff_min_ms, l->opts.backoff_max_ms, &l->rng);
    lb__wait run = {.w = w, .channel = l->channel, .channellen = l->channellen,
                    .rec = l->fair ? &s.rec : NULL, .deadline = lb__deadline_ms(wait_ms),
                    .deaf_after_loss = !l->fair, .ud = &s, .attempt = attempt,
                    .sleep_ms = sleep_ms, .out_of_time = give_up, .handed = handed,
                    .clock = l->opts.clock};
    if (l->fair && lb__fair_begin_wait(l) != LB_OK) return LB_EIO;
    /* The wait keeps one token throughout: its record names it. */
    if (l->fair) memcpy(s.rec.token, l->token, LB__TOKEN_CAP);
    int rc = BLPOP_REFUSED;
    /* On one connection a fair wait blocks there, waiter or none: a hand-off
     * through a waiter costs a message and two thread wake-ups more, and on
     * 2 CPUs ran at three quarters of the baton's rate with twice its
     * commands. The waiter still serves fair waits where no connection is
     * the wait's own (Cluster and Sentinel targets), and the waits that fall
     * back from BLPOP. */
    if (l->fair && t.kind == LB_TARGET_CONN) {
        s.lists = 1;
        lb__fair_set_inbox(l, LB__FAIR_LISTS, 1);
        rc = baton_wait(&s, run.deadline);
        if (rc == BLPOP_REFUSED) rc = grant_wait(&s, run.deadline);
        lb__fair_set_inbox(l, NULL, 0);
        s.lists = 0;
    }
    if (rc == BLPOP_REFUSED) rc = lb__wait_run(&run);
    if (l->fair) {
        rc = leave_on_error(&s, rc);
        lb__fair_end_wait(l);
    }
    return lb__lock_watch_acquired(l, t, rc);
}

/* Without a waiter the same loop polls: attempts spaced by the back-off, never
 * sleeping past the holder's TTL, so an expiry or a release is seen within one
 * step. A fair lock still keeps its place in the queue. */
int lb_lock_acquire(lb_lock *l, lb_target t, int64_t wait_ms) {
    return lb_lock_acquire_wait(l, t, NULL, wait_ms);
}
