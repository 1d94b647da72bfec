/* lockbridge waiter: blocking acquire of a token lock that wakes on release.
 * A waiter is one subscriber connection per client, read by a thread of its
 * own, carrying the release channel of every lock its users wait for. */
#ifndef LOCKBRIDGE_WAITER_H
#define LOCKBRIDGE_WAITER_H

#include <stdint.h>

#include "lockbridge/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options are copied by lb_waiter_new (strings included): the struct may be
 * reused or freed afterwards; the allocator and connect_ud it points to must
 * outlive the waiter, and errbuf is written during that call only.
 * There is no default server: host and port, or connect, must be given
 * (LB_EINVAL otherwise), so that a forgotten address cannot watch a server
 * the locks are not on. */
typedef struct lb_waiter_options {
    const char *host;           /* subscriber connection: host (NULL by default); copied */
    int port;                   /* and port (0 by default) */
    const char *username;       /* NULL: AUTH with the password alone; copied */
    const char *password;       /* NULL: no AUTH; copied. (Channels ignore SELECT.) */
    int64_t connect_timeout_ms; /* connect and AUTH, and any write, ms (1000, as the
                                 * watchdog's) */
    /* Optional, replaces host, port, username and password: returns a new
     * connected blocking context or NULL. Called by lb_waiter_new, then from
     * the waiter's thread to reconnect. */
    struct redisContext *(*connect)(void *ud);
    void *connect_ud;
    int64_t reconnect_min_ms;   /* pause before a reconnection attempt, doubling */
    int64_t reconnect_max_ms;   /* up to this, ms (10 and 1000) */
    /* A channel nobody waits on stays subscribed this long, ms (1000; 0:
     * unsubscribed at once), so that a client taking the same lock again
     * and again neither subscribes anew nor attempts once more after each
     * confirmation. */
    int64_t linger_ms;
    /* Fair hand-offs reach this waiter on a channel of its own, named by
     * this prefix ("lb-inbox:", at most 64 bytes; copied) and a random
     * token, subscribed at the first fair wait. An ACL user needs the
     * channel pattern (&lb-inbox:*) to subscribe and to publish to it. */
    const char *inbox_prefix;
    const lb_allocator *allocator; /* NULL: malloc; must outlive the waiter */
    /* Optional: where lb_waiter_new says why it failed, NUL-terminated and cut
     * to errbuf_size bytes ("cannot connect to 127.0.0.1:1: Connection
     * refused", "AUTH on 127.0.0.1:6379 failed: WRONGPASS ..."); "" on
     * success. Written only by lb_waiter_new, never kept. */
    char *errbuf;
    size_t errbuf_size;
} lb_waiter_options;

void lb_waiter_options_init(lb_waiter_options *o);

typedef struct lb_waiter lb_waiter;

/* Connects the subscriber connection (LB_EINVAL without a server or with bad
 * options, LB_EIO if connecting fails, LB_EREDIS if AUTH is refused) and
 * starts the
 * thread that reads it. *out is reset on entry; on any failure o->errbuf,
 * when given, says why. The waiter is thread-safe:
 * any number of threads may wait through it at once, each on its own lock
 * handle and command connection. */
int lb_waiter_new(lb_waiter **out, const lb_waiter_options *o);
/* Stops the thread and closes the connection. No wait may be running. */
void lb_waiter_free(lb_waiter *w);

typedef struct lb_waiter_stats {
    uint64_t messages;   /* messages read on release channels */
    uint64_t handoffs;   /* of which fair hand-offs to a waiter of ours */
    uint64_t subscribes; /* SUBSCRIBE commands sent */
    uint64_t reconnects; /* connections re-established after a drop */
    uint64_t sleeps;     /* sleeps begun by waits */
    uint64_t pauses;     /* release channels let go for a while: their lock
                          * turned over faster than waking helps (waits poll) */
    int connected;       /* the subscriber connection is up */
    int channels;        /* channels watched now */
    int blocked;         /* threads asleep in a wait now */
    int inbox;           /* the inbox for fair hand-offs is subscribed */
} lb_waiter_stats;

/* A snapshot of the waiter's counters into *out (zeroed first): LB_OK, or
 * LB_EINVAL when w or out is NULL. */
int lb_waiter_stats_get(lb_waiter *w, lb_waiter_stats *out);

/* Cancelling a wait. Every blocking acquire (lb_lock_acquire[_wait],
 * lb_legacy_acquire, lb_mlock_acquire[_wait]) sleeps through its lock's clock's
 * sleep_ms hook when one is set (lb_clock in lockbridge/core.h); a nonzero
 * return ends the wait with LB_ECANCELED. A wait through a waiter blocks on the
 * waiter instead and asks the hook (ms 0) every LB_CANCEL_SLICE_MS, so another
 * thread's cancel is seen within 10 ms plus any command in flight. A cancelled
 * wait holds nothing and its handle can acquire again; a fair one leaves the
 * queue (best effort, as on a timeout) and releases at once a hand-off that
 * reached it before the cancel (should that release fail, the wait returns
 * LB_OK: the lock is held, and the caller's to release). */


#ifdef __cplusplus
}
#endif
#endif
