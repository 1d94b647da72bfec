/* lockbridge cluster: runs any lock's step machines on Redis Cluster, on the
 * primary that owns the key's hash slot, following MOVED and ASK redirections. */
#ifndef LOCKBRIDGE_CLUSTER_H
#define LOCKBRIDGE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "lockbridge/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LB_CLUSTER_SLOTS 16384

/* The hash slot of `key`: CRC16 (XMODEM) of the key, or of its hash tag (the
 * bytes between the first '{' and the next '}' when they are not empty), mod
 * 16384. Companion keys (lb_companion_key) hash to their lock key's slot. */
unsigned lb_cluster_keyslot(const char *key, size_t keylen);

/* Options are copied by lb_cluster_new (strings included): the struct may be
 * reused or freed afterwards; the allocator it points to must outlive the
 * handle. */
typedef struct lb_cluster_options {
    int64_t connect_timeout_ms; /* per connection attempt, milliseconds */
    int64_t command_timeout_ms; /* per command on a node, milliseconds */
    int max_redirects;          /* MOVED/ASK followed per command before giving up */
    int64_t retry_ms;           /* how long one command may be retried while its slot
                                 * has no reachable primary, or the cluster answers
                                 * TRYAGAIN or CLUSTERDOWN, milliseconds */
    int64_t retry_backoff_ms;   /* sleep between those retries, milliseconds */
    const char *username;       /* AUTH on every connection: NULL for none, or for */
    const char *password;       /* the "default" user with only a password; copied */
    const lb_allocator *allocator; /* NULL: malloc; must outlive the handle */
} lb_cluster_options;

/* Defaults: connect timeout 1 s, command timeout 1 s, 5 redirects, retry for
 * 2 s with 50 ms between attempts, no AUTH, malloc. */
void lb_cluster_options_init(lb_cluster_options *o);

typedef struct lb_cluster lb_cluster;

/* Creates a handle from seed addresses, "host:port" ("[v6addr]:port" or
 * "v6addr:port" for IPv6, split at the last ':'), of any nodes of the cluster
 * (n from 1 to 64): the slot map is read at once (CLUSTER SLOTS) from the first
 * seed that answers. *out is reset on entry. LB_EINVAL for a bad address or
 * option, LB_EIO when no seed can be reached (or AUTH fails), LB_EREDIS when
 * the last seed asked answered with an error (not in cluster mode, NOAUTH),
 * LB_EPROTO for a slot map that does not parse.
 * A handle is used by one thread at a time; it keeps one connection per
 * primary, opened when first needed. */
int lb_cluster_new(lb_cluster **out, const char *const *seeds, int n,
                   const lb_cluster_options *o);
void lb_cluster_free(lb_cluster *cl);

/* Reads the slot map again from any known node (the seeds last). On failure
 * the previous map is kept. */
int lb_cluster_refresh(lb_cluster *cl);

/* Run through the target lb_on_cluster(cl), each command of a machine goes to
 * the primary that owns its key's slot (a script's first key; every key of one
 * command must share that slot, as a lock's companion keys do). An answer that
 * says the command did not run there is not shown to the machine but acted on:
 *   MOVED slot addr   the map is read again and the command sent to addr;
 *   ASK slot addr     ASKING, then the command, once, on addr (slot migrating);
 *   TRYAGAIN, CLUSTERDOWN, an unreachable owner
 *                     retried after retry_backoff_ms until retry_ms has passed.
 * Past max_redirects or retry_ms the machine is given the last error reply (it
 * ends with LB_EREDIS) or a transport failure (LB_EIO). A connection lost after
 * a command was sent is never retried, since the command may have run: the
 * machine ends with LB_EIO, and the map is read again before the next command. */

/* What the handle has done since it was created. */
typedef struct lb_cluster_stats {
    int primaries;      /* primaries in the current slot map */
    uint64_t commands;  /* commands sent, ASKING included */
    uint64_t moved;     /* MOVED answers followed */
    uint64_t ask;       /* ASK answers followed */
    uint64_t retries;   /* TRYAGAIN, CLUSTERDOWN and unreachable-node retries */
    uint64_t refreshes; /* slot maps read */
    uint64_t connects;  /* connections opened */
} lb_cluster_stats;
/* LB_OK and *out, or LB_EINVAL (a NULL argument; *out reset when given), as
 * every other _stats_get. */
int lb_cluster_stats_get(const lb_cluster *cl, lb_cluster_stats *out);
/* Writes "host:port" of the primary the map gives for `slot` (at most `cap`
 * bytes with the NUL) and returns its length; LB_ESTATE if no primary serves
 * the slot, LB_EINVAL for a bad argument or a short buffer. buf is reset. */
int lb_cluster_slot_owner(const lb_cluster *cl, unsigned slot, char *buf, size_t cap);
/* Detail of the handle's last failure (refresh, connection), or "". The
 * readers of a const handle (lb_cluster_slot_owner) leave it alone. */
const char *lb_cluster_errstr(const lb_cluster *cl);

/* ---- Asynchronous driver ------------------------------------------------------
 * Runs machines on a cluster from an event loop: one redisAsyncContext per
 * primary, opened when first needed and handed to `attach` (for instance a
 * wrapper of redisLibeventAttach) before its first command; 0 means attached.
 * The slot map is the one of `cl`, a synchronous handle that must outlive
 * this one and is not used elsewhere meanwhile. MOVED and ASK are followed
 * as by lb_target_run on lb_on_cluster, but reading the map again after a MOVED is a
 * blocking CLUSTER SLOTS on `cl` (rare: a resharding or a failover).
 * TRYAGAIN, CLUSTERDOWN and an unreachable primary are not waited out here
 * (there is no timer without the caller's loop): the machine ends with
 * LB_EREDIS or LB_EIO and the caller decides when to try again. */
struct redisAsyncContext;
typedef int (*lb_cluster_attach_fn)(struct redisAsyncContext *ac, void *ud);
typedef struct lb_cluster_async lb_cluster_async;

int lb_cluster_async_new(lb_cluster_async **out, lb_cluster *cl, lb_cluster_attach_fn attach,
                         void *ud);
/* Frees the connections: operations still running end with LB_EIO through
 * their callbacks, before this returns. Not from inside such a callback. */
void lb_cluster_async_free(lb_cluster_async *ca);
/* As lb_async_run, on the primary that owns `key`'s slot: `done` is called
 * exactly once (possibly before this returns) and may free the machine's
 * owner. LB_OK when `done` will be (or was) called; LB_EINVAL, LB_ENOMEM, or
 * LB_ESTATE (the machine is already in flight) without calling it. */
int lb_cluster_async_run(lb_cluster_async *ca, const char *key, size_t keylen, lb_machine *m,
                         const lb_clock *clock, lb_done_fn done, void *ud);

#ifdef __cplusplus
}
#endif
#endif
