/* Test harness: a local Redis Cluster of six redis-servers (three primaries,
 * three replicas) on free loopback ports, built with redis-cli --cluster. */
#ifndef LOCKBRIDGE_TEST_CLUSTER_H
#define LOCKBRIDGE_TEST_CLUSTER_H

#include "harness/redis_server.h"

#define LBT_CLUSTER_NODES 6

typedef struct lbt_cluster {
    lbt_redis node[LBT_CLUSTER_NODES];
    char seed[LBT_CLUSTER_NODES][32]; /* "127.0.0.1:port" of each node */
} lbt_cluster;

/* Starts six cluster-enabled servers (node timeout `node_timeout_ms`, any
 * replica may be promoted however stale), joins them with redis-cli --cluster
 * create --cluster-replicas 1 and waits for lbt_cluster_wait_ok. 0 or -1. */
int lbt_cluster_start(lbt_cluster *c, int node_timeout_ms);
/* Stops every server and removes their directories (crashed ones included). */
void lbt_cluster_stop(lbt_cluster *c);
/* Waits up to `timeout_ms` until every live node says cluster_state:ok with all
 * 16384 slots served and every live replica's link to its primary is up. */
int lbt_cluster_wait_ok(lbt_cluster *c, int timeout_ms);
/* Index of the live node that the cluster says serves `slot`, or -1. */
int lbt_cluster_owner(lbt_cluster *c, unsigned slot);
/* Index of a live replica of node `primary`, or -1. */
int lbt_cluster_replica_of(lbt_cluster *c, int primary);
/* Whether node i is a primary now (ROLE). */
int lbt_cluster_is_primary(lbt_cluster *c, int i);
/* The node's cluster id (CLUSTER MYID) into id[41]; 0 or -1. */
int lbt_cluster_id(lbt_cluster *c, int i, char id[41]);
/* Kills node i with SIGKILL: no shutdown, no goodbye to its peers. */
void lbt_cluster_crash(lbt_cluster *c, int i);

#endif
