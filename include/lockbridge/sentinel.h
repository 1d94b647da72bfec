/* lockbridge sentinel: runs any lock's step machines on the primary that a
 * set of Redis Sentinels names, and finds the new one after a failover. */
#ifndef LOCKBRIDGE_SENTINEL_H
#define LOCKBRIDGE_SENTINEL_H

#include <stddef.h>
#include <stdint.h>

#include "lockbridge/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options are copied by lb_sentinel_new (strings included): the struct may be
 * reused or freed afterwards; the allocator it points to must outlive the
 * handle. */
typedef struct lb_sentinel_options {
    int64_t connect_timeout_ms; /* per connection attempt (sentinel or primary), ms */
    int64_t command_timeout_ms; /* per command, milliseconds */
    int64_t retry_ms;           /* how long one command may wait for a primary to be
                                 * found (none reachable, or it answers READONLY
                                 * because it was demoted), milliseconds */
    int64_t retry_backoff_ms;   /* sleep between those attempts, milliseconds */
    int64_t recheck_ms;         /* a command sent this long after the sentinels were
                                 * last asked asks one again first, ms (0: every
                                 * command); see below */
    int subscribe;              /* 1: listen for the sentinels' +switch-master
                                 * announcements (default); 0: rechecks only */
    const char *username;       /* AUTH on the primary: NULL for none, or for the */
    const char *password;       /* "default" user with only a password; copied */
    const lb_allocator *allocator; /* NULL: malloc; must outlive the handle */
} lb_sentinel_options;

/* Defaults: connect and command timeouts 1 s, retry for 5 s (a Sentinel
 * failover takes seconds) with 100 ms between attempts, recheck after 1 s,
 * subscribed, no AUTH, malloc.
 *
 * Why recheck: after a failover the old primary, if it is still up, goes on
 * accepting writes until the sentinels get round to demoting it (seconds),
 * and everything written there meanwhile is discarded when it becomes a
 * replica. A client that only looked for a new primary on errors would keep
 * taking locks there. The handle subscribes to the sentinels' +switch-master
 * announcements (one more connection, read without waiting before each
 * command) and forgets the old primary as soon as one arrives; asking a
 * sentinel every recheck_ms bounds the delay if the announcement is missed. */
void lb_sentinel_options_init(lb_sentinel_options *o);

typedef struct lb_sentinel lb_sentinel;

/* Creates a handle for the primary Sentinel knows as `name`, from sentinel
 * addresses "host:port" (n from 1 to 16), and finds it at once: each sentinel
 * in turn is asked SENTINEL get-master-addr-by-name, and the address it gives
 * is used only if that server says ROLE master. *out is reset on entry.
 * LB_EINVAL for bad arguments, LB_EIO when no primary could be found within
 * retry_ms (lb_sentinel_errstr says why). One thread at a time. */
int lb_sentinel_new(lb_sentinel **out, const char *const *sentinels, int n, const char *name,
                    const lb_sentinel_options *o);
void lb_sentinel_free(lb_sentinel *s);

/* The connection to the primary, found again if it failed or was demoted
 * since: for commands of the application's own (every lockbridge call takes
 * lb_on_sentinel(s)). Owned by the handle; valid until the next call on it.
 * NULL if none could be found. */
struct redisContext *lb_sentinel_primary(lb_sentinel *s);

typedef struct lb_sentinel_stats {
    uint64_t resolves;  /* times the sentinels were asked */
    uint64_t switches;  /* times the primary's address changed */
    uint64_t readonly;  /* READONLY answers seen (a demoted primary) */
    uint64_t announced; /* +switch-master announcements about our primary */
    uint64_t retries;
} lb_sentinel_stats;
/* LB_OK and *out, or LB_EINVAL (a NULL argument; *out reset when given). */
int lb_sentinel_stats_get(const lb_sentinel *s, lb_sentinel_stats *out);
/* Writes "host:port" of the current primary; its length, or LB_ESTATE if none
 * is known, LB_EINVAL for a short buffer. buf is reset on entry. */
int lb_sentinel_primary_addr(const lb_sentinel *s, char *buf, size_t cap);
/* Detail of the handle's last failure to find or reach the primary, or "".
 * lb_sentinel_primary_addr, a reader of a const handle, leaves it alone. */
const char *lb_sentinel_errstr(const lb_sentinel *s);

#ifdef __cplusplus
}
#endif
#endif
