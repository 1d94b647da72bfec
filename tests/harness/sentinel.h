/* Test harness: a primary, its replica and three Redis Sentinels watching
 * them, all local redis-server processes on free loopback ports. */
#ifndef LOCKBRIDGE_TEST_SENTINEL_H
#define LOCKBRIDGE_TEST_SENTINEL_H

#include "harness/redis_server.h"

#define LBT_SENTINELS 3
#define LBT_SENTINEL_NAME "lbmaster"

typedef struct lbt_sentinels {
    lbt_redis data[2];                /* [0] starts as primary, [1] as its replica */
    lbt_redis sentinel[LBT_SENTINELS];
    char addr[LBT_SENTINELS][32];     /* "127.0.0.1:port" of each sentinel */
} lbt_sentinels;

/* Starts the primary, the replica (waiting for its link) and three sentinels
 * (quorum 2, down-after 1 s) that monitor LBT_SENTINEL_NAME, and waits until
 * every sentinel knows the replica. 0 or -1. */
int lbt_sentinels_start(lbt_sentinels *s);
void lbt_sentinels_stop(lbt_sentinels *s);
/* Waits up to `timeout_ms` until a data server is a replica with its link up
 * and every sentinel knows a healthy replica (after a failover, the old
 * primary once it has been turned into one and has synced). 0 or -1. */
int lbt_sentinels_wait_replica(lbt_sentinels *s, int timeout_ms);
/* The index (0 or 1) of the data server that sentinel 0 names as primary, or -1. */
int lbt_sentinels_primary(lbt_sentinels *s);
/* Waits up to `timeout_ms` until every sentinel names data server `i` and it
 * says ROLE master. 0 or -1. */
int lbt_sentinels_wait_primary(lbt_sentinels *s, int i, int timeout_ms);

#endif
