/* lockbridge modern: the token lock. SET key token NX PX ttl with a 128-bit
 * random token; release and extend are compare-then-act scripts; an optional
 * fencing counter is incremented by the script that acquires. */
#ifndef LOCKBRIDGE_MODERN_H
#define LOCKBRIDGE_MODERN_H

#include <stddef.h>
#include <stdint.h>

#include "lockbridge/core.h"
#include "lockbridge/waiter.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lb_watchdog;

/* Options are copied by lb_lock_new: the struct may be reused or freed
 * afterwards; the clock, allocator and watchdog it points to must outlive the
 * lock. */
typedef struct lb_lock_options {
    int64_t ttl_ms;         /* Redis TTL of the lock, milliseconds */
    int fencing;            /* 1: acquire through a script that also returns the
                             * next value of the key's fencing counter */
    int64_t backoff_min_ms; /* blocking acquire: first sleep, milliseconds */
    int64_t backoff_max_ms; /* blocking acquire: longest sleep, milliseconds */
    const lb_clock *clock;  /* NULL: system clocks; must outlive the lock */
    const lb_allocator *allocator; /* NULL: malloc; must outlive the lock */
    /* Fair mode (see lockbridge/waiter.h): blocking acquires queue and a release
     * hands the lock to the oldest live waiter. Every client of a key must use
     * it, with the same fencing setting. */
    int fair;                 /* 1: fair mode */
    int64_t fair_lease_ms;    /* a queued waiter not heard of for this long is
                               * skipped, ms; 0: 2 x backoff_max_ms, at least 1000 */
    int64_t fair_yield_every; /* after this many hand-offs in a row a release
                               * may leave the lock free, count; 0: never */
    int64_t fair_yield_ms;    /* and queued waiters keep off it this long, ms;
                               * such windows open only for a client outside
                               * the queue seen since the last, 4 x this apart */
    int64_t fair_baton_ms;    /* a blocking wait on one connection first blocks
                               * this long (at most ttl_ms less 100) on the
                               * lock's baton list, which a release with
                               * nobody queued passes the lock down, then
                               * queues, ms; 0: it queues at once */
    /* A self-renewing lock: each successful lb_lock_try_acquire,
     * lb_lock_acquire and lb_lock_acquire_wait is watched by this watchdog
     * (lockbridge/watchdog.h) with the default watch options, and release and
     * free end the watch. Once the watchdog finds the lock lost,
     * lb_lock_info_of(l).held reads 0: check it before each write to what the
     * lock protects. NULL: no renewal. Asynchronous acquires (lb_lock_machine)
     * are not watched: call lb_watchdog_watch, or use an lb_async_lock
     * (lockbridge/async.h), which renews itself on the event loop. */
    struct lb_watchdog *watchdog;
} lb_lock_options;

/* Defaults: ttl 30 s, no fencing, back-off 2 to 100 ms, system clock, malloc;
 * not fair (when fair: lease 2 x backoff_max_ms but at least 1 s, a yield of
 * 200 ms after 16 hand-offs in a row, 100 ms blocked on the baton). */
void lb_lock_options_init(lb_lock_options *o);

typedef struct lb_lock lb_lock;

/* Creates a handle for `key` (any bytes but a companion's name, see
 * lb_lock_name_refused; with fencing, a key whose companion name exists, see
 * lb_companion_key; with fair mode, not a hash tag alone, "{K}", whose
 * companions are those of K: LB_EINVAL). *out is reset on entry. */
int lb_lock_new(lb_lock **out, const char *key, size_t keylen, const lb_lock_options *o);
void lb_lock_free(lb_lock *l);

/* One attempt with a fresh token: LB_OK (held), LB_EBUSY (held by another:
 * lb_lock_info_of(l).holder_ttl_ms tells for how long), LB_EWRONGTYPE, LB_EREDIS, LB_EIO. */
int lb_lock_try_acquire(lb_lock *l, lb_target t);
/* Attempts until `wait_ms` passes, sleeping a jittered back-off bounded by the
 * holder's remaining TTL. LB_ETIMEDOUT at the deadline. A fair lock on one
 * connection (lb_on_conn) queues and blocks on its own grant list instead
 * (BLPOP, in slices), where a release pushes its hand-off. */
int lb_lock_acquire(lb_lock *l, lb_target t, int64_t wait_ms);
/* Deletes the lock if it still holds our token. LB_ELOST if it did not (it
 * expired, or was taken after expiry: nothing is deleted). */
int lb_lock_release(lb_lock *l, lb_target t);
/* Extends the TTL if the key still holds our token: to `ms` from now
 * (LB_EXTEND_REPLACE) or by `ms` more (LB_EXTEND_ADD). LB_ELOST otherwise. */
typedef enum lb_extend_mode { LB_EXTEND_REPLACE = 0, LB_EXTEND_ADD } lb_extend_mode;
int lb_lock_extend(lb_lock *l, lb_target t, int64_t ms, lb_extend_mode mode);
/* Asks Redis whether the key still holds our token, and its remaining TTL:
 * LB_OK with *ttl_ms set (-1 when unknown) if it does, LB_ELOST if not. */
int lb_lock_check(lb_lock *l, lb_target t, int64_t *ttl_ms);

/* Deletes the key whatever it holds, on target `t` (through a Cluster, on the
 * primary that owns the key's slot): for operators clearing a stuck lock.
 * LB_OK (deleted, or already absent), LB_EINVAL, LB_EIO, LB_EREDIS. */
int lb_lock_force_release(lb_target t, const char *key, size_t keylen);

/* The machine of one operation on `l`, for callers that do their own I/O (see
 * lb_machine_step and lb_async_run): LB_OP_TRY_ACQUIRE, LB_OP_RELEASE,
 * LB_OP_EXTEND, LB_OP_EXTEND_ADD or LB_OP_CHECK. One operation at a time per
 * handle: starting one abandons an operation left unfinished by its caller.
 * NULL for another op, or while lb_async_run drives the handle's machine (the
 * sync calls then return LB_ESTATE). */
lb_machine *lb_lock_machine(lb_lock *l, lb_op op, int64_t ms);

/* A snapshot of the handle's state. Strings point into the handle: valid until
 * its next operation or lb_lock_free. */
typedef struct lb_lock_info {
    int held;              /* 1 from a successful acquire to its release or loss */
    const char *token;     /* our token (NUL-terminated, LB_TOKEN_LEN hex digits);
                            * "" before the first acquisition */
    int64_t fence;         /* the fencing number of the current acquisition
                            * (fencing on, held), else 0 */
    int64_t holder_ttl_ms; /* the holder's remaining TTL seen by the last failed
                            * attempt, ms; -1 unknown */
    int64_t deadline_ns;   /* our lease by our own clock: monotonic ns at which the
                            * TTL set by the last acquire, extend or watchdog
                            * renewal lapses, counted from when the command was
                            * sent */
    uint64_t commands;     /* Redis commands sent for this handle since its creation */
    const char *errstr;    /* detail of the last failure, or "" */
} lb_lock_info;
lb_lock_info lb_lock_info_of(const lb_lock *l);

/* ---- Quorum lock across independent masters ----------------------------------
 * One token is written with SET NX PX to every master in turn; the lock is held
 * when a majority accepted it and the time left, ttl - elapsed - drift, is
 * positive. Otherwise every master is asked to release (a write whose reply was
 * lost may have landed) and the attempt fails. Masters are independent servers,
 * not replicas of one another.
 * Options are copied by lb_quorum_new: the struct may be reused or freed
 * afterwards; the clock and allocator it points to must outlive the handle. */
typedef struct lb_quorum_options {
    int64_t ttl_ms;          /* lock TTL on each master, milliseconds */
    int64_t drift_extra_ms;  /* clock drift allowance: ttl * drift_ppm / 1e6 plus this, ms */
    int64_t drift_ppm;       /* parts per million of the ttl */
    int64_t timeout_ms;      /* per-master command timeout, ms; below the ttl */
    int64_t retry_min_ms;    /* blocking acquire: random delay between rounds, ms */
    int64_t retry_max_ms;
    const lb_clock *clock;   /* NULL: system clocks; must outlive the handle */
    const lb_allocator *allocator; /* NULL: malloc; must outlive the handle */
} lb_quorum_options;

/* Defaults: ttl 30 s, drift 1% + 2 ms, master timeout 100 ms, retry delay 50
 * to 200 ms. */
void lb_quorum_options_init(lb_quorum_options *o);

typedef struct lb_quorum lb_quorum;

/* `key`: any bytes but a companion's name (lb_lock_name_refused: LB_EINVAL).
 * `masters` (n of them, 1 to 64) stay owned by the caller and must outlive the
 * handle. The handle sets their command timeout to timeout_ms (redisSetTimeout),
 * so a stalled master costs at most that, and reconnects a context that has
 * failed at the next attempt (with the same timeout). */
int lb_quorum_new(lb_quorum **out, const char *key, size_t keylen,
                  struct redisContext **masters, int n, const lb_quorum_options *o);
void lb_quorum_free(lb_quorum *q);
/* One round: LB_OK (held by a majority, validity positive), LB_EBUSY (a
 * majority could not be had, or too late), LB_EIO (fewer than a majority of
 * masters answered at all). Never LB_OK without a majority. */
int lb_quorum_try_acquire(lb_quorum *q);
/* Rounds separated by a random delay until `wait_ms` passes: LB_ETIMEDOUT. */
int lb_quorum_acquire(lb_quorum *q, int64_t wait_ms);
/* Releases on every master (compare-and-delete). LB_OK if a majority still
 * held our token, LB_ELOST otherwise. */
int lb_quorum_release(lb_quorum *q);
typedef struct lb_quorum_info {
    int held;
    const char *token;   /* the token written to the masters; "" before the first try */
    int votes;           /* masters that accepted the last acquisition */
    int64_t validity_ms; /* validity left at the moment of acquisition, ms (0 if
                          * not held) */
} lb_quorum_info;
lb_quorum_info lb_quorum_info_of(const lb_quorum *q);

/* ---- Waiting through a waiter (waiter.h) --------------------------------------- */
/* Acquires `l` on target `t`, waiting up to `wait_ms` (INT64_MAX: as long
 * as it takes). Between attempts it sleeps the lock's jittered back-off, never
 * longer than the holder's remaining TTL, and wakes at once when the holder's
 * release is published on the lock's channel (w may be NULL: back-off only).
 * A wait whose attempt after a release failed (another client was first)
 * sleeps its next back-off step deaf to releases. A fair lock
 * (lb_lock_options.fair) on one connection (lb_on_conn) waits as
 * lb_lock_acquire does, on the baton and then its grant list, w given or
 * not; on a Cluster or Sentinel target it queues, keeps its place by its
 * attempts, and may be handed the lock by a release, told on w's inbox,
 * without another command. No
 * attempt starts after the deadline. Returns LB_OK, LB_ETIMEDOUT,
 * LB_ECANCELED (the clock's sleep_ms hook; lockbridge/waiter.h), or an
 * attempt's error (LB_EWRONGTYPE, LB_EIO...). A
 * fair waiter that times out leaves the queue; if a hand-off reached it at
 * that moment it returns LB_OK instead. */
int lb_lock_acquire_wait(lb_lock *l, lb_target t, lb_waiter *w, int64_t wait_ms);

#ifdef __cplusplus
}
#endif
#endif
