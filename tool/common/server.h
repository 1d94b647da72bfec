/* The tool's servers: connecting, a single server or a Cluster's primaries,
 * Sentinel, where one key's commands go, and what INFO commandstats counts. */
#ifndef LOCKBRIDGE_CLI_SERVER_H
#define LOCKBRIDGE_CLI_SERVER_H

#include "tool/common/cli.h"
#include "tool/common/keys.h"

/* ---- Connection ------------------------------------------------------------------ */
/* Connects, authenticates and selects the database. Returns the context, or NULL
 * with a one-line reason in `err`. */
redisContext *lb__cli_connect(const lb__cli_conn *o, char *err, size_t errcap);
/* "127.0.0.1:6379" or "unix:/path", for messages. */
void lb__cli_endpoint(const lb__cli_conn *o, char *out, size_t cap);

/* ---- Single server or cluster (topology.c) -------------------------------------- */
/* A primary of a cluster: the tool's connection options with its address. */
typedef struct lb__cli_node {
    lb__cli_conn conn; /* conn.host points to host */
    char host[256];
    char name[300];    /* "host:port", for messages */
} lb__cli_node;

typedef struct lb__cli_topo {
    int cluster;       /* 0: a single server; the fields below are empty */
    lb__cli_node *node;
    size_t n;          /* primaries in the slot map */
    int *owner;        /* LB_CLUSTER_SLOTS entries: index in node, or -1 */
} lb__cli_topo;

/* Asks the server `c` is connected to (with `base`'s options) whether it is a
 * cluster node (INFO cluster), and if so reads the slot map (CLUSTER SLOTS).
 * 0, or -1 with `err`; clear `t` after 0. */
int lb__cli_topo_read(lb__cli_topo *t, redisContext *c, const lb__cli_conn *base, char *err,
                      size_t cap);
void lb__cli_topo_clear(lb__cli_topo *t);
/* A connection to primary i; NULL with `err` naming it. */
redisContext *lb__cli_connect_primary(const lb__cli_topo *t, size_t i, char *err, size_t cap);
/* Where namespace ns's control key and census live: `c` itself on a single
 * server, else a new connection to the primary that owns their slot. NULL
 * with `err`. Give back with lb__cli_ns_done. */
redisContext *lb__cli_connect_ns(const lb__cli_topo *t, redisContext *c, const char *ns,
                                 char *err, size_t cap);
/* Where `key` lives: `c` on a single server, else its slot's primary. */
redisContext *lb__cli_connect_key(const lb__cli_topo *t, redisContext *c, const char *key,
                                  size_t keylen, char *err, size_t cap);
/* Gives back a connection from lb__cli_connect_ns or lb__cli_connect_key. */
void lb__cli_ns_done(redisContext *ns_c, redisContext *c);
/* Connects as the command line says, reads the topology, reaches the primary
 * of namespace ns's keys (nc; c itself on a single server) and calls fn; its
 * exit code, or that of the connection error. Everything is closed after. */
typedef int (*lb__cli_ns_fn)(const lb__cli_args *a, const lb__cli_topo *t, redisContext *c,
                             redisContext *nc, const char *ns, void *ud);
int lb__cli_on_ns(const lb__cli_args *a, const char *ns, lb__cli_ns_fn fn, void *ud);
/* ---- Sentinel (sentinel.c) ------------------------------------------------------- */
/* With --sentinel: checks the options and points a->conn at the primary the
 * sentinels name for --master. 0 (nothing to do without --sentinel), or an
 * exit code after printing the error. */
int lb__cli_sentinel_resolve(lb__cli_args *a);

/* ---- Routing one key's command (route.c) --------------------------------------- */
/* The connection options of the servers a command about one key talks to. On
 * one server they are all the command line's; on a Cluster node, each is the
 * primary that owns that key's slot, and `cluster` follows redirections. */
typedef struct lb__cli_route {
    lb__cli_conn seed;  /* the command line's */
    lb__cli_conn key;   /* the key's primary */
    lb__cli_conn ns;    /* the namespace's primary (control key, census) */
    lb__cli_conn other; /* the primary of the other key named (a counter) */
    char key_host[256], ns_host[256], other_host[256];
    lb_cluster *cluster; /* NULL on a single server */
} lb__cli_route;
/* Connects as the command line says, asks whether the node is in cluster mode
 * and fills `r` (ns and other may be NULL). 0, or -1 with `err`. */
int lb__cli_route_open(lb__cli_route *r, const lb__cli_args *a, const char *key, const char *ns,
                       const char *other, char *err, size_t cap);
void lb__cli_route_close(lb__cli_route *r);
/* Another cluster handle for the same cluster (one per thread). */
int lb__cli_route_cluster(const lb__cli_route *r, lb_cluster **out, char *err, size_t cap);
/* Where lock operations go: through `cl` on a Cluster, else on `c`. */
lb_target lb__cli_route_target(lb_cluster *cl, redisContext *c);

/* Called after a server's scan finished, on its connection (0 or -1 with `err`). */
typedef int (*lb__cli_after_fn)(redisContext *c, void *ud, char *err, size_t cap);
/* Scans (as lb__cli_scan) the server of `c`, or every primary of the cluster,
 * each on its own connection, calling `after` (may be NULL) at the end of each.
 * *scanned adds up the keys, *servers counts the servers fully scanned. 0, 1
 * stopped by fn, -1 with `err` (naming the primary on a cluster). */
int lb__cli_scan_each(const lb__cli_topo *t, redisContext *c, const lb__cli_scanopts *o,
                      lb__cli_key_fn fn, lb__cli_after_fn after, void *ud, uint64_t *scanned,
                      int *servers, char *err, size_t cap);
/* lb__cli_legacy_calls over every primary, summed (-1 if one cannot be read).
 * 0, or -1 with `err` when a primary cannot be reached. */
int lb__cli_legacy_calls_all(const lb__cli_topo *t, redisContext *c, int64_t *calls, char *err,
                             size_t cap);

/* ---- Commands counted (cmdstats.c) ------------------------------------------------- */
/* The server's count of SETNX and GETSET calls so far (INFO commandstats,
 * cmdstats.c), or -1 if it cannot be read: only the legacy protocol sends them. */
int64_t lb__cli_legacy_calls(redisContext *c);
/* The server's count of every command so far but INFO (INFO commandstats: a
 * script's own commands count beside its EVALSHA), or -1 if it cannot be read
 * (refused by an ACL, or a reply that does not parse). */
int64_t lb__cli_server_calls(redisContext *c);

#endif
