/* The waiting acquire of the token lock on an event loop: attempts through
 * the asynchronous driver, the back-off slept on the handle's timer. */
#include <string.h>

#include <hiredis/async.h>

#include "modern/async_internal.h"

#define NS_PER_MS INT64_C(1000000)

static void on_attempt(lb_machine *m, int rc, void *ud);

void lb__al_attempt(lb_async_lock *al) {
    redisAsyncContext *ac = lb__al_conn(al);
    lb_machine *m = ac ? lb__lock_try_acquire_machine(al->lock) : NULL;
    if (!m) {
        lb__refuse(al->lock->errstr, LB_EIO, "the connection closed during the wait");
        lb__al_finish(al, AL_IDLE, LB_EIO);
        return;
    }
    /* `on_attempt` is called once, maybe from within: nothing after this. */
    lb_async_run(ac, m, al->lock->opts.clock, on_attempt, al);
}

void lb__al_wait_timer(lb_async_lock *al) { lb__al_attempt(al); }

/* The sleep after a refused attempt, as the blocking acquire's polling: a
 * jittered back-off that never runs past the holder's remaining TTL and, beside
 * a holder just begun, follows the lock's turn-over (core/backoff.c); and
 * never past the wait's end, where one last attempt is made. */
static int64_t sleep_ns(lb_async_lock *al, int64_t now) {
    lb_lock *l = al->lock;
    int64_t left = l->holder_ttl_ms;
    int64_t ms = lb__backoff_next_under(&al->backoff, left,
                                        lb__churn_ceiling_ms(&al->backoff, l->opts.ttl_ms, left));
    int64_t ns = ms * NS_PER_MS; /* ms is at most backoff_max_ms */
    return al->wait_end_ns - now < ns ? al->wait_end_ns - now : ns;
}

static void timed_out(lb_async_lock *al) {
    char why[LB__ERRSTR_CAP];
    memcpy(why, al->lock->errstr, sizeof why);
    lb__refuse(al->lock->errstr, LB_ETIMEDOUT, "not acquired before the deadline; last attempt: %s",
               why);
    lb__al_finish(al, AL_IDLE, LB_ETIMEDOUT);
}

/* A wait cancelled, or a handle freed, while its attempt was in flight: a
 * lock the attempt won is released before the wait ends. */
static void abandon(lb_async_lock *al, int rc) {
    if (rc == LB_OK) {
        lb__al_release_quietly(al);
        return;
    }
    if (lb__al_reap(al)) return;
    lb__refuse(al->lock->errstr, LB_ECANCELED, "wait cancelled");
    lb__al_finish(al, AL_IDLE, LB_ECANCELED);
}

static void on_attempt(lb_machine *m, int rc, void *ud) {
    lb_async_lock *al = ud;
    memcpy(al->lock->errstr, m->errstr, sizeof al->lock->errstr);
    if (rc == LB_EIO) lb__async_note_eio(al->a);
    if (al->freed || al->canceled) {
        abandon(al, rc);
        return;
    }
    if (rc == LB_OK) {
        lb__al_renew_start(al);
        lb__al_finish(al, AL_HELD, LB_OK);
        return;
    }
    if (rc != LB_EBUSY) {
        lb__al_finish(al, AL_IDLE, rc);
        return;
    }
    int64_t now = lb__al_now_ns(al);
    if (now >= al->wait_end_ns) {
        timed_out(al);
        return;
    }
    if (lb__al_arm(al, sleep_ns(al, now)) != LB_OK) {
        lb__refuse(al->lock->errstr, LB_ENOMEM, "the event loop could not arm the wait's timer");
        lb__al_finish(al, AL_IDLE, LB_ENOMEM);
    }
}

/* The wait's end on the lock's clock: now + wait_ms, INT64_MAX when that
 * is beyond what the clock can hold (a wait as long as it takes). */
static int64_t wait_end(const lb_async_lock *al, int64_t wait_ms) {
    int64_t ns, end;
    if (lb__mul64(wait_ms, NS_PER_MS, &ns) || lb__add64(lb__al_now_ns(al), ns, &end))
        return INT64_MAX;
    return end;
}

int lb_async_lock_acquire(lb_async_lock *al, int64_t wait_ms, lb_async_done_fn done, void *ud) {
    if (!al) return LB_EINVAL;
    char *errstr = al->lock->errstr;
    errstr[0] = '\0';
    if (!done) return lb__refuse(errstr, LB_EINVAL, "invalid argument: no done callback");
    if (wait_ms < 0) return lb__refuse(errstr, LB_EINVAL, LB__NEGATIVE_WAIT);
    if (al->phase == AL_HELD) return lb__refuse(errstr, LB_ESTATE, "already held by this handle");
    if (al->phase != AL_IDLE || lb__machine_in_flight(&al->lock->m))
        return lb__refuse(errstr, LB_ESTATE, "an acquire or a release is running on this handle");
    if (!lb__al_conn(al)) return lb__refuse(errstr, LB_EIO, "the connection is closed");
    lb_lock *l = al->lock;
    lb__backoff_init(&al->backoff, l->opts.backoff_min_ms, l->opts.backoff_max_ms, &al->rng);
    al->wait_end_ns = wait_end(al, wait_ms);
    al->phase = AL_WAITING;
    al->canceled = 0;
    al->done = done;
    al->done_ud = ud;
    lb__al_attempt(al);
    return LB_OK;
}
