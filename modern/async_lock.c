/* The token lock on an event loop (lb_async_lock): its handle, its timer,
 * release and cancel, and what becomes of it when its context goes. */
#include <math.h>
#include <string.h>

#include <hiredis/async.h>

#include "modern/async_internal.h"

#define NS_PER_MS INT64_C(1000000)

void lb_async_lock_options_init(lb_async_lock_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    lb_lock_options_init(&o->lock);
    o->renew_fraction = 1.0 / 3.0;
}

int64_t lb__al_now_ns(const lb_async_lock *al) {
    return lb_clock_now(al->lock->opts.clock).mono_ns;
}

redisAsyncContext *lb__al_conn(const lb_async_lock *al) { return lb__async_conn(al->a); }

int lb__al_arm(lb_async_lock *al, int64_t ns) {
    int64_t ms = ns <= 0 ? 0 : ns / NS_PER_MS + (ns % NS_PER_MS != 0);
    al->timer_armed = al->timers.arm(al->timer, ms) == 0;
    return al->timer_armed ? LB_OK : LB_ENOMEM;
}

void lb__al_disarm(lb_async_lock *al) {
    if (al->timer_armed) al->timers.disarm(al->timer);
    al->timer_armed = 0;
}

static int in_flight(const lb_async_lock *al) {
    return lb__machine_in_flight(&al->lock->m) ||
           (al->shadow && lb__machine_in_flight(&al->shadow->m));
}

int lb__al_reap(lb_async_lock *al) {
    if (!al->freed) return 0;
    if (in_flight(al)) return 1; /* its reply comes back here */
    if (al->a) lb__async_leave(al->a, &al->member);
    al->timers.destroy(al->timer);
    const lb_allocator *alloc = al->opts.lock.allocator;
    lb_lock_free(al->shadow);
    lb_lock_free(al->lock);
    lb__free(alloc, al);
    return 1;
}

void lb__al_finish(lb_async_lock *al, int phase, int status) {
    lb_async_done_fn done = al->done;
    void *ud = al->done_ud;
    al->phase = phase;
    al->canceled = 0;
    al->done = NULL;
    if (lb__al_reap(al)) return;
    if (done) done(al, status, ud);
}

static void on_timer(void *arg) {
    lb_async_lock *al = arg;
    al->timer_armed = 0;
    if (al->phase == AL_WAITING) lb__al_wait_timer(al);
    else if (al->phase == AL_HELD) lb__al_renew_timer(al);
}

/* The context is gone, or the driver freed: a wait asleep ends, a held lock
 * is lost (nothing can renew it); commands in flight end by their replies. */
static void on_closed(lb__async_member *mb) {
    lb_async_lock *al = (lb_async_lock *)(void *)mb;
    al->a = NULL;
    if (al->freed) return;
    if (al->phase == AL_WAITING && !lb__machine_in_flight(&al->lock->m)) {
        lb__al_disarm(al);
        lb__refuse(al->lock->errstr, LB_EIO, "the connection closed during the wait");
        lb__al_finish(al, AL_IDLE, LB_EIO);
    } else if (al->phase == AL_HELD) {
        lb__al_lost(al, LB_WATCH_UNREACHABLE,
                    "the connection closed: the lock is no longer renewed and lapses with its TTL");
    }
}

static int valid_options(const lb_async_lock_options *o) {
    double f = o->renew_fraction;
    return !o->lock.fair && !o->lock.watchdog && isfinite(f) && f >= 0 && f < 1;
}

/* The handle renewals run on: the lock's key, TTL, clock and allocator. */
static int new_shadow(lb_async_lock *al, const char *key, size_t keylen) {
    lb_lock_options so;
    lb_lock_options_init(&so);
    so.ttl_ms = al->opts.lock.ttl_ms;
    so.clock = al->opts.lock.clock;
    so.allocator = al->opts.lock.allocator;
    return lb_lock_new(&al->shadow, key, keylen, &so);
}

int lb_async_lock_new(lb_async_lock **out, lb_async *a, const char *key, size_t keylen,
                      const lb_async_lock_options *o) {
    lb_async_lock_options defaults;
    if (!out) return LB_EINVAL;
    *out = NULL;
    if (!a) return LB_EINVAL;
    if (!o) {
        lb_async_lock_options_init(&defaults);
        o = &defaults;
    }
    if (!valid_options(o)) return LB_EINVAL;
    lb_async_lock *al = lb__alloc(o->lock.allocator, sizeof *al);
    if (!al) return LB_ENOMEM;
    memset(al, 0, sizeof *al);
    al->opts = *o;
    al->timers = a->opts.timers;
    al->rng = lb__random_seed();
    int rc = lb_lock_new(&al->lock, key, keylen, &o->lock);
    if (rc == LB_OK && o->renew_fraction > 0) rc = new_shadow(al, key, keylen);
    if (rc == LB_OK) {
        al->timer = al->timers.create(al->timers.loop, on_timer, al);
        if (!al->timer) rc = LB_ENOMEM;
    }
    if (rc != LB_OK) {
        lb_lock_free(al->shadow);
        lb_lock_free(al->lock);
        lb__free(o->lock.allocator, al);
        return rc;
    }
    al->a = a;
    al->member.closed = on_closed;
    lb__async_join(a, &al->member);
    *out = al;
    return LB_OK;
}

void lb_async_lock_free(lb_async_lock *al) {
    if (!al) return;
    al->freed = 1;
    al->done = NULL;
    al->opts.lost = NULL;
    lb__al_disarm(al);
    lb__al_reap(al);
}

/* A release's end. One whose outcome is unknown (LB_EIO, LB_EREDIS) leaves
 * the lock held: renewal resumes, and a cancelled wait is told it holds the
 * lock after all. */
void lb__al_released(lb_machine *m, int status, void *ud) {
    lb_async_lock *al = ud;
    int canceled = al->canceled;
    memcpy(al->lock->errstr, m->errstr, sizeof al->lock->errstr);
    if (status == LB_EIO) lb__async_note_eio(al->a);
    if (lb__al_reap(al)) return;
    if (al->lock->held) {
        lb__al_renew_start(al);
        lb__al_finish(al, AL_HELD, canceled ? LB_OK : status);
        return;
    }
    if (canceled)
        lb__refuse(al->lock->errstr, LB_ECANCELED,
                   "wait cancelled; the lock its last attempt won was released");
    lb__al_finish(al, AL_IDLE, canceled ? LB_ECANCELED : status);
}

static int start_release(lb_async_lock *al, redisAsyncContext *ac) {
    lb_machine *m = lb__lock_release_machine(al->lock);
    al->gen++; /* a renewal in flight is now stale */
    lb__al_disarm(al);
    al->phase = AL_RELEASING;
    if (!m) return lb__refuse(al->lock->errstr, LB_ESTATE, LB__IN_FLIGHT);
    if (lb__al_batch_release(al) == LB_OK) return LB_OK;
    return lb_async_run(ac, m, al->lock->opts.clock, lb__al_released, al);
}

void lb__al_release_quietly(lb_async_lock *al) {
    redisAsyncContext *ac = lb__al_conn(al);
    if (ac && start_release(al, ac) == LB_OK) return;
    /* No connection to release it on: it lapses with its TTL, unrenewed. */
    al->lock->held = 0;
    if (lb__al_reap(al)) return;
    lb__refuse(al->lock->errstr, LB_ECANCELED,
               "wait cancelled; the lock its last attempt won lapses with its TTL (no "
               "connection to release it on)");
    lb__al_finish(al, AL_IDLE, LB_ECANCELED);
}

int lb_async_lock_release(lb_async_lock *al, lb_async_done_fn done, void *ud) {
    if (!al) return LB_EINVAL;
    char *errstr = al->lock->errstr;
    errstr[0] = '\0';
    if (!done) return lb__refuse(errstr, LB_EINVAL, "invalid argument: no done callback");
    if (al->phase == AL_IDLE) return lb__refuse(errstr, LB_ESTATE, "not held by this handle");
    if (al->phase != AL_HELD)
        return lb__refuse(errstr, LB_ESTATE, "an acquire or a release is running on this handle");
    redisAsyncContext *ac = lb__al_conn(al);
    if (!ac) return lb__refuse(errstr, LB_EIO, "the connection is closed");
    al->done = done;
    al->done_ud = ud;
    int rc = start_release(al, ac);
    if (rc != LB_OK) { /* not started: still held, renewed again */
        al->done = NULL;
        lb__al_renew_start(al);
        al->phase = AL_HELD;
    }
    return rc;
}

int lb_async_lock_cancel(lb_async_lock *al) {
    if (!al) return LB_EINVAL;
    if (al->phase != AL_WAITING)
        return lb__refuse(al->lock->errstr, LB_ESTATE, "no acquire is running on this handle");
    if (lb__machine_in_flight(&al->lock->m)) {
        al->canceled = 1; /* told at the attempt's reply */
        return LB_OK;
    }
    lb__al_disarm(al);
    lb__refuse(al->lock->errstr, LB_ECANCELED, "wait cancelled");
    lb__al_finish(al, AL_IDLE, LB_ECANCELED);
    return LB_OK;
}

lb_lock_info lb_async_lock_info_of(const lb_async_lock *al) {
    if (!al) return lb_lock_info_of(NULL);
    lb_lock_info i = lb_lock_info_of(al->lock);
    if (al->shadow) i.commands += al->shadow->m.total;
    return i;
}
