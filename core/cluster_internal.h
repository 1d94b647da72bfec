/* Internal definitions of the cluster driver shared by core/cluster.c and
 * core/slots.c: node addresses, the slot map and the parsers of what the
 * cluster says about itself (CLUSTER SLOTS, MOVED, ASK). */
#ifndef LOCKBRIDGE_CORE_CLUSTER_INTERNAL_H
#define LOCKBRIDGE_CORE_CLUSTER_INTERNAL_H

#include <stdint.h>

#include "lockbridge/cluster.h"
#include "core/internal.h"

struct redisReply;

/* A host name or address as the cluster announces it: at most 255 bytes. */
#define LB__HOST_CAP 256
/* Owner of a slot nobody serves. */
#define LB__NO_NODE 0xFFFFu
/* Primaries a slot map may name: Redis Cluster is designed for up to 1000. */
#define LB__NODES_MAX 4096

typedef struct lb__addr {
    char host[LB__HOST_CAP];
    int port;
} lb__addr;

/* A parsed slot map: owner[slot] indexes addrs, or is LB__NO_NODE. */
typedef struct lb__slotmap {
    uint16_t owner[LB_CLUSTER_SLOTS];
    lb__addr *addrs;
    int naddrs, cap;
    const lb_allocator *allocator;
} lb__slotmap;

/* Parses "host:port" (split at the last ':'; "[v6]:port" brackets dropped).
 * An empty host becomes `fallback_host` (NULL: refused). LB_EINVAL if bad. */
int lb__addr_parse(const char *s, size_t len, const char *fallback_host, lb__addr *out);
int lb__addr_equal(const lb__addr *a, const lb__addr *b);

/* Builds a slot map from a CLUSTER SLOTS reply. A primary announced with an
 * empty or nil host is at `fallback_host` (the node that answered); one
 * announced as "?" (unknown endpoint) serves its slots to nobody. LB_EPROTO
 * for any reply that is not exactly that shape (overlapping ranges included),
 * LB_ENOMEM; `out` is then empty. Free with lb__slotmap_clear. */
int lb__slotmap_parse(lb__slotmap *out, const struct redisReply *r, const char *fallback_host,
                      const lb_allocator *a);
void lb__slotmap_clear(lb__slotmap *m);
/* Index of `addr` in the map's addresses, adding it if new; -1 on failure. */
int lb__slotmap_node(lb__slotmap *m, const lb__addr *addr);

/* Redirections in an error reply: "MOVED <slot> <addr>" or "ASK <slot> <addr>". */
typedef enum lb__redirect { LB__REDIRECT_NONE = 0, LB__REDIRECT_MOVED, LB__REDIRECT_ASK } lb__redirect;
/* Classifies an error reply's text; for MOVED and ASK fills *slot and *to (an
 * empty host in the address is `fallback_host`). A malformed redirection is
 * LB__REDIRECT_NONE: the reply then goes to the machine as the error it is. */
lb__redirect lb__redirect_parse(const char *s, size_t len, const char *fallback_host,
                                unsigned *slot, lb__addr *to);
/* Error replies after which the command did not run and may be sent again
 * after a pause: TRYAGAIN, CLUSTERDOWN, LOADING. */
int lb__cluster_retryable(const char *s, size_t len);

/* What the asynchronous driver uses of a (synchronous) cluster handle: the
 * slot map, read again when stale (blocking), MOVED followed the same way,
 * the counters, options and credentials. */
int lb__cluster_owner(lb_cluster *cl, unsigned slot, lb__addr *out);
void lb__cluster_moved(lb_cluster *cl, unsigned slot, const lb__addr *to);
void lb__cluster_mark_stale(lb_cluster *cl);
lb_cluster_stats *lb__cluster_stats(lb_cluster *cl);
const lb_cluster_options *lb__cluster_options(const lb_cluster *cl);
void lb__cluster_auth(const lb_cluster *cl, const char **username, const char **password);

#endif
