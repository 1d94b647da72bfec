/* lockbridge async: token locks on an event loop. An acquire that waits and a
 * lock that renews itself, on the loop a redisAsyncContext is attached to. */
#ifndef LOCKBRIDGE_ASYNC_H
#define LOCKBRIDGE_ASYNC_H

#include <stddef.h>
#include <stdint.h>

#include "lockbridge/modern.h"
#include "lockbridge/watchdog.h"

#ifdef __cplusplus
extern "C" {
#endif

struct redisAsyncContext;

/* ---- Timers -------------------------------------------------------------------
 * hiredis gives an asynchronous context no timers (0.14 has none, 1.x only a
 * command timeout), so the event loop lends them: one timer per lock handle,
 * made at lb_async_lock_new and destroyed by lb_async_lock_free, and one of
 * the driver's, made at its first release and destroyed by lb_async_free
 * (or the context's end). Every call
 * comes from the loop's thread. lockbridge/adapters/libevent.h fills this for
 * a libevent event_base. */
typedef void (*lb_timer_fn)(void *arg);
typedef struct lb_timers {
    /* A timer on `loop` that calls fire(arg) once per arm; NULL: no memory. */
    void *(*create)(void *loop, lb_timer_fn fire, void *arg);
    /* Fire once after `ms` milliseconds (0: at the loop's next turn),
     * replacing an arm still pending. 0 on success. */
    int (*arm)(void *timer, int64_t ms);
    /* Cancel a pending fire (none pending: nothing). */
    void (*disarm)(void *timer);
    /* Disarm and free. */
    void (*destroy)(void *timer);
    void *loop;
} lb_timers;

/* ---- The driver of one context -------------------------------------------------
 * Options are copied by lb_async_new; the allocator must outlive the driver. */
typedef struct lb_async_options {
    lb_timers timers;              /* required: every function set */
    const lb_allocator *allocator; /* the driver's own memory; NULL: malloc */
} lb_async_options;

/* Defaults: no timers (to be set), malloc. */
void lb_async_options_init(lb_async_options *o);

typedef struct lb_async lb_async;

/* The driver of the locks on `ac`, a context attached to the loop whose
 * timers `o` lends. It takes the context's connect and disconnect callbacks,
 * so that no lock uses the context after hiredis frees it: set yours before
 * this call (with redisAsyncSetConnectCallback and
 * redisAsyncSetDisconnectCallback; they are still called, after every lock
 * was told), never after (hiredis keeps one of each per context). When the
 * context goes (a disconnect, a failed connect, redisAsyncFree of a context
 * that had connected), a wait ends with LB_EIO and a held lock is reported
 * lost (LB_WATCH_UNREACHABLE). hiredis frees a context that never connected
 * without telling anyone: free the driver before you free such a context.
 * LB_EINVAL (no context, a timer function missing), LB_ENOMEM. *out reset on
 * entry. */
int lb_async_new(lb_async **out, struct redisAsyncContext *ac, const lb_async_options *o);
/* Gives the connect and disconnect callbacks back to the context (if it is
 * still there) and frees the driver. Free its locks first: a lock still on it is detached
 * as on a disconnect, and can then only be freed. From a lock's callback too.
 * lb_async_free(NULL) does nothing. */
void lb_async_free(lb_async *a);

/* ---- Token locks on the loop --------------------------------------------------- */
typedef struct lb_async_lock lb_async_lock;

/* The end of an acquire or a release: `status` as the blocking call's, the
 * detail in lb_async_lock_info_of(al).errstr. The callback may free the lock
 * (and the driver). */
typedef void (*lb_async_done_fn)(lb_async_lock *al, int status, void *ud);
/* A held lock lost: its renewal was refused (LB_WATCH_REFUSED: the key no
 * longer holds our token) or not answered before the lease ran out by the
 * lock's clock, the connection included (LB_WATCH_UNREACHABLE). `detail` is
 * never empty, valid during the call. The lock then reads held 0 and can be
 * acquired again; the callback may free it. */
typedef void (*lb_async_lost_fn)(lb_async_lock *al, lb_watch_reason reason, const char *detail,
                                 void *ud);

/* Options are copied by lb_async_lock_new; the clock and allocator named in
 * `lock` must outlive the handle. */
typedef struct lb_async_lock_options {
    /* The token lock's (TTL, fencing, back-off, clock, allocator). Fair mode
     * and a watchdog are refused (LB_EINVAL): a fair wait keeps its queue
     * place through a waiter's thread, and renewal is this handle's own. */
    lb_lock_options lock;
    /* While held, renew to the full TTL when this fraction of it has passed
     * since the last renewal (0 < f < 1: with 1/3 a lock survives two failed
     * renewals in a row); 0: no renewal, the lock lapses with its TTL. */
    double renew_fraction;
    lb_async_lost_fn lost; /* NULL: a loss shows only as held 0 */
    void *lost_ud;
} lb_async_lock_options;

/* Defaults: the token lock's (TTL 30 s, back-off 2 to 100 ms), renewal at a
 * third of the TTL, no loss callback. */
void lb_async_lock_options_init(lb_async_lock_options *o);

/* A token lock on `key` run through `a`. Key rules as lb_lock_new's.
 * LB_EINVAL, LB_ENOMEM (the timer included). *out reset on entry. */
int lb_async_lock_new(lb_async_lock **out, lb_async *a, const char *key, size_t keylen,
                      const lb_async_lock_options *o);
/* Frees the handle and its timer; no callback of it runs afterwards. It never
 * releases: a lock it held lapses with its TTL, unrenewed. With a command in
 * flight the memory is kept until its reply (or the context's end); a lock
 * that reply grants is released then. lb_async_lock_free(NULL) does nothing. */
void lb_async_lock_free(lb_async_lock *al);

/* Attempts until one succeeds or `wait_ms` passes (0: one attempt;
 * INT64_MAX: as long as it takes), sleeping on the handle's timer a jittered
 * back-off never longer than the holder's remaining TTL (as lb_lock_acquire
 * does), and never past the deadline. `done` is called once: LB_OK (held, and
 * renewed from then on), LB_ETIMEDOUT, LB_ECANCELED (lb_async_lock_cancel),
 * or an attempt's error (LB_EWRONGTYPE, LB_EREDIS, LB_EPROTO, LB_EIO when the
 * context goes). An attempt in flight at the deadline is awaited. Returns
 * LB_OK when `done` will be called; without calling it LB_EINVAL, LB_ESTATE
 * (held, or an acquire or release running) or LB_EIO (the context is gone). */
int lb_async_lock_acquire(lb_async_lock *al, int64_t wait_ms, lb_async_done_fn done, void *ud);
/* Stops the renewal and deletes the lock if it still holds our token: `done`
 * gets LB_OK, LB_ELOST (it did not; nothing deleted), or LB_EIO / LB_EREDIS
 * (the outcome is unknown: the lock counts as held and is renewed again).
 * The releases of one loop turn go to the server in one call at the next
 * turn, each answered as it would be alone (docs/async.md).
 * Returns as lb_async_lock_acquire (LB_ESTATE: not held, or an operation
 * running). */
int lb_async_lock_release(lb_async_lock *al, lb_async_done_fn done, void *ud);
/* Ends a wait: its `done` gets LB_ECANCELED, from within this call when no
 * attempt is in flight, else at that attempt's reply (a lock it granted is
 * released first). LB_ESTATE when no acquire is running. */
int lb_async_lock_cancel(lb_async_lock *al);
/* The token lock's snapshot (lb_lock_info): held reads 0 once a loss was
 * reported; deadline_ns moves with each renewal. */
lb_lock_info lb_async_lock_info_of(const lb_async_lock *al);

#ifdef __cplusplus
}
#endif
#endif
