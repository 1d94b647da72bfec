/* lockbridge watchdog: one background thread with its own connection renews any
 * number of held token locks and tells each owner at once when one is lost. */
#ifndef LOCKBRIDGE_WATCHDOG_H
#define LOCKBRIDGE_WATCHDOG_H

#include <stdint.h>

#include "lockbridge/modern.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a watched lock was reported lost. */
typedef enum lb_watch_reason {
    LB_WATCH_NONE = 0, /* not lost (what lb_watchdog_check gives while it renews) */
    /* The renewal script found the key without our token: it was overwritten,
     * deleted, or expired and perhaps taken by another client. */
    LB_WATCH_REFUSED = 1,
    /* No renewal succeeded before our lease ran out by the watchdog's clock:
     * the connection was down, the server stalled or answered with errors. */
    LB_WATCH_UNREACHABLE = 2,
    /* max_hold_ms was reached: renewal stopped and the lease ran out. */
    LB_WATCH_MAX_HOLD = 3
} lb_watch_reason;

/* "LB_WATCH_REFUSED" etc. ("LB_WATCH_NONE" for 0); never NULL ("LB_WATCH_UNKNOWN"). */
const char *lb_watch_reason_name(lb_watch_reason reason);

/* Called once per watch, on the watchdog's thread, without the watchdog's
 * mutex held, when the lock is lost. `lock` identifies the handle; it belongs
 * to its owner's thread and must not be used here unless the owner arranges it.
 * `detail` says why, never empty (the renewal's error, or the reason's own
 * sentence when the last renewal worked); it is valid during the call. The callback may call lb_watchdog_check,
 * lb_watchdog_stats_get and lb_watchdog_unwatch; it must not free the watchdog and
 * should be short: every other lock of the watchdog waits for it, and so does
 * an unwatch (or release, or free) of this lock. */
typedef void (*lb_watch_lost_fn)(const lb_lock *lock, lb_watch_reason reason,
                                 const char *detail, void *ud);

/* Options are copied by lb_watchdog_new (strings included): the struct may be
 * reused or freed afterwards; the clock, allocator and connect_ud it points
 * to must outlive the watchdog, and errbuf is written during that call only. */
typedef struct lb_watchdog_options {
    /* Where the watchdog renews: the target the locks are acquired on. The
     * watchdog never shares the owners' handles: it opens its own copy at
     * lb_watchdog_new, on the same address (or Unix socket) as a connection
     * target, or with the same seeds, sentinels, primary name, credentials
     * and options as a Cluster or Sentinel target, whose copy then follows
     * MOVED and failovers by itself. The target is only read during
     * lb_watchdog_new. There is no default server: one of target, host and
     * port, or connect must be given (LB_EINVAL otherwise). */
    lb_target target;
    /* Or an address: used when target is unset. */
    const char *host;            /* NULL by default; copied */
    int port;                    /* 0 by default */
    /* AUTH and SELECT on a connection target's copy or on host:port (a
     * Cluster or Sentinel copy has the original's credentials). */
    const char *username;        /* NULL: AUTH with the password alone; copied */
    const char *password;        /* NULL: no AUTH; copied */
    int db;                      /* > 0: SELECT db after connecting */
    int64_t connect_timeout_ms;  /* connect (and AUTH, SELECT) timeout, ms */
    int64_t io_timeout_ms;       /* command timeout, ms; never longer than the
                                  * time to the earliest lease end */
    int64_t reconnect_min_ms;    /* delay after a failed connect, ms, doubling */
    int64_t reconnect_max_ms;    /* ... up to this, ms */
    /* Instead of target, host/port/username/password/db: returns a new connected
     * context that the watchdog then owns (redisFree), or NULL. Called by
     * lb_watchdog_new on the caller's thread, then on the watchdog's thread. */
    struct redisContext *(*connect)(void *ud);
    void *connect_ud;
    const lb_clock *clock;           /* NULL: the system monotonic clock */
    const lb_allocator *allocator;   /* NULL: malloc */
    /* Optional: where lb_watchdog_new says why it failed, NUL-terminated and
     * cut to errbuf_size bytes ("cannot connect to 127.0.0.1:1: Connection
     * refused", "AUTH on 127.0.0.1:6379 failed: WRONGPASS ..."); "" on
     * success. Written only by lb_watchdog_new, never kept. */
    char *errbuf;
    size_t errbuf_size;
    /* The loss callback of the locks this watchdog watches because their
     * lb_lock_options.watchdog names it (their watches have the default
     * lb_watch_options with this callback and ud); lb_watchdog_watch's own
     * options set their own. NULL: a loss is seen through lb_lock_info_of's
     * `held` and lb_watchdog_check only. */
    lb_watch_lost_fn lost;
    void *lost_ud;
} lb_watchdog_options;

/* Defaults: no server (set target, or host and port, or connect), no AUTH,
 * db 0, connect and command timeouts 1000 ms, reconnect delay 10 to 500 ms,
 * system clock, malloc, no loss callback. */
void lb_watchdog_options_init(lb_watchdog_options *o);

typedef struct lb_watchdog lb_watchdog;

/* Connects (LB_EIO when it cannot, LB_EREDIS when AUTH or SELECT is refused)
 * and starts the thread, which runs with every signal blocked. *out is reset
 * on entry. On any failure o->errbuf, when given, says why. */
int lb_watchdog_new(lb_watchdog **out, const lb_watchdog_options *o);
/* The common case in one call: a watchdog with the default options on its own
 * copy of target `t`, whose loss callback (may be NULL) is `lost` with `ud`,
 * for the locks that name it in lb_lock_options.watchdog. As lb_watchdog_new,
 * without the reason of a failure (LB_EINVAL for a target without a handle). */
int lb_watchdog_new_on(lb_watchdog **out, lb_target t, lb_watch_lost_fn lost, void *ud);
/* Stops the thread and closes the connection. Locks still watched stop being
 * renewed and lapse with their TTL (they are not released). Call it when no
 * thread is using a lock it watches, and never from a lost callback.
 * lb_watchdog_free(NULL) is a no-op. */
void lb_watchdog_free(lb_watchdog *wd);

/* Options of one watch (lb_watchdog_options are those of the watchdog, shared
 * by its watches). Options are copied by lb_watchdog_watch: the struct may be
 * reused or freed afterwards; ud is handed to the callback as it is. */
typedef struct lb_watch_options {
    /* Renew when this fraction of the TTL has passed since the last renewal
     * (0 < f < 1): with 1/3 a lock survives two failed renewals in a row. */
    double renew_fraction;
    /* Never extend the lease past watch time + this, ms; 0: no limit. The last
     * renewal is trimmed to end there; a lease is never shortened. */
    int64_t max_hold_ms;
    lb_watch_lost_fn lost;   /* NULL: lost locks are only seen by lb_watchdog_check */
    void *ud;
} lb_watch_options;

/* Defaults: renew at 1/3 of the TTL, no hold limit, no callback. */
void lb_watch_options_init(lb_watch_options *o);

/* Starts renewing `lock`, which must be held (LB_ESTATE otherwise, LB_EEXPIRED
 * when its lease already ran out by its clock). The renewal is the extend
 * script (compare the token, then PEXPIRE ttl) on the watchdog's connection,
 * so it never extends another client's lock. Watching a lock this watchdog
 * already watches replaces that watch; a lock watched by another watchdog is
 * LB_ESTATE. Call it on the thread that owns the lock. */
int lb_watchdog_watch(lb_watchdog *wd, lb_lock *lock, const lb_watch_options *o);
/* Stops renewing `lock`. Returns once no renewal or callback of it is running
 * and none will start: after it, nothing extends the lock and its callback
 * never runs. lb_lock_release and lb_lock_free do the same first, so a watched
 * lock may simply be released or freed. LB_ESTATE if not watched by `wd`. */
int lb_watchdog_unwatch(lb_watchdog *wd, lb_lock *lock);
/* The watchdog's view of `lock`, from any thread: LB_OK while it renews it,
 * LB_ELOST once it was reported lost (*reason set), LB_ESTATE if not watched.
 * *deadline_ns: the end of the current lease by the watchdog's monotonic
 * clock, which lb_lock_info_of(lock).deadline_ns also gives while watched.
 * Outputs may be NULL. */
int lb_watchdog_check(lb_watchdog *wd, const lb_lock *lock, int64_t *deadline_ns,
                      lb_watch_reason *reason);

typedef struct lb_watchdog_stats {
    uint64_t renewals;   /* renewals the server accepted */
    uint64_t failures;   /* renewal attempts without an answer about the lock:
                          * no connection, I/O error, error reply */
    uint64_t reconnects; /* connections opened after the first */
    uint64_t lost;       /* locks reported lost */
    uint64_t watched;    /* locks watched now, lost ones included */
} lb_watchdog_stats;

/* A consistent snapshot, from any thread. */
int lb_watchdog_stats_get(lb_watchdog *wd, lb_watchdog_stats *out);

#ifdef __cplusplus
}
#endif
#endif
