/* Internal declarations of the token lock on an event loop (lb_async_lock),
 * shared by its handle, its wait and its renewal. */
#ifndef LOCKBRIDGE_MODERN_ASYNC_INTERNAL_H
#define LOCKBRIDGE_MODERN_ASYNC_INTERNAL_H

#include "core/async_internal.h"
#include "modern/internal.h"

/* What the handle is doing; a command may be in flight in each. */
enum { AL_IDLE, AL_WAITING, AL_HELD, AL_RELEASING };

struct lb_async_lock {
    lb__async_member member;
    lb_async *a;               /* NULL once the driver is gone */
    lb_timers timers;          /* a copy: the timer outlives a freed driver */
    void *timer;
    int timer_armed;
    lb_lock *lock;             /* acquire and release */
    lb_lock *shadow;           /* renewals, with the lock's token; NULL: none */
    lb_async_lock_options opts;
    int phase;
    int canceled;              /* the wait ends at its attempt's reply */
    int freed;                 /* freed by its owner with a command in flight */
    lb_async_done_fn done;     /* the running acquire's or release's */
    void *done_ud;
    /* The wait. */
    lb__backoff backoff;
    uint64_t rng;
    int64_t wait_end_ns;       /* monotonic, the lock's clock; INT64_MAX: none */
    /* The renewal: `gen` counts acquisitions, so that a renewal answered
     * after its acquisition ended is recognised and ignored. */
    uint64_t gen, renew_gen;
    int64_t renew_every_ns;
    int64_t retry_ns;          /* after a renewal without an answer about the lock */
    /* The release batch this lock's release waits or runs in; the flag on
     * its first lock says the batch was sent again as EVAL. */
    lb_async_lock *batch_next;
    int batch_eval;
};

/* Arms the handle's timer to fire in `ns` (rounded up to ms): LB_OK, or
 * LB_ENOMEM when the loop refused; or disarms it. */
int lb__al_arm(lb_async_lock *al, int64_t ns);
void lb__al_disarm(lb_async_lock *al);
int64_t lb__al_now_ns(const lb_async_lock *al);
/* The context operations go to, or NULL (gone: LB_EIO). */
struct redisAsyncContext *lb__al_conn(const lb_async_lock *al);
/* Ends the running acquire or release: the phase given, then its callback
 * (last: it may free the handle). */
void lb__al_finish(lb_async_lock *al, int phase, int status);
/* Memory of a freed handle is given back once nothing of it is in flight;
 * returns 1 when the handle was freed (or is kept for a reply): the caller
 * stops. */
int lb__al_reap(lb_async_lock *al);
/* A release begun by the handle itself (a cancelled or orphaned wait that
 * won): its end finishes with `status`. */
void lb__al_release_quietly(lb_async_lock *al);

/* A release's end, whichever way it ran (a lb_done_fn). */
void lb__al_released(lb_machine *m, int status, void *ud);
/* Puts a release just begun (its machine begun, not stepped) in the
 * driver's batch: LB_OK, or another status when it must run alone (no
 * driver, batching off, no timer from the loop). */
int lb__al_batch_release(lb_async_lock *al);

/* The wait (modern/async_wait.c): an attempt now, and the timer's call in
 * the AL_WAITING phase. */
void lb__al_attempt(lb_async_lock *al);
void lb__al_wait_timer(lb_async_lock *al);

/* The renewal (modern/async_renew.c): starts after an acquire, the timer's
 * call in the AL_HELD phase, and what a closed context means for it. */
void lb__al_renew_start(lb_async_lock *al);
void lb__al_renew_timer(lb_async_lock *al);
void lb__al_lost(lb_async_lock *al, lb_watch_reason reason, const char *detail);

#endif
