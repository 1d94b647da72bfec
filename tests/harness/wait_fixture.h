/* Test harness: the server and connection the waiting tests share, the token
 * locks and waiters they make, and a blocking acquire on a thread of its own. */
#ifndef LBT_WAIT_FIXTURE_H
#define LBT_WAIT_FIXTURE_H

#include <pthread.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "harness/redis_server.h"
#include "harness/sleep.h"
#include "lockbridge/lockbridge.h"

/* The server a waiting test's group runs against, and the test's own
 * connection to it (for setup and checks). */
extern lbt_redis lbt_server;
extern redisContext *lbt_conn;
/* On its own connection a fair wait blocks there (BLPOP), waiter or none. A
 * read timeout under 220 ms is too short to block: a fair wait on such a
 * connection waits through its waiter, the path a Cluster or Sentinel target
 * takes. lbt_short is connected with it; jobs given a waiter get it too. */
extern const struct timeval lbt_too_short_to_block; /* 200 ms */
extern redisContext *lbt_short;

/* cmocka group fixtures: start lbt_server and connect lbt_conn; stop both. */
int lbt_wait_setup(void **state);
int lbt_wait_teardown(void **state);

/* Polls `ok` until it holds; fails the test after ~10 s (a hang, not a
 * timing judgement). For a file that includes <cmocka.h>. */
#define LBT_EVENTUALLY(ok)                    \
    do {                                      \
        int tries_ = 0;                       \
        while (!(ok)) {                       \
            assert_true(++tries_ < 2000);     \
            lbt_sleep_ms(5);                  \
        }                                     \
    } while (0)

/* A lock on key with the options o. */
lb_lock *lbt_lock_with(const char *key, const lb_lock_options *o);
/* Fair options whose releases yield to outsiders after `every` hand-offs in
 * a row, for `ms`. */
lb_lock_options lbt_yielding(int64_t every, int64_t ms);
/* A lock with a TTL of 30 s, fair or not, backing off bmin..bmax ms. */
lb_lock *lbt_new_lock(const char *key, int fair, int64_t bmin, int64_t bmax);
/* A waiter on lbt_server with default options. */
lb_waiter *lbt_new_waiter(void);
lb_waiter_stats lbt_stats_of(lb_waiter *w);

/* The test's connect callback: while lbt_refuse_connects is set it refuses,
 * counting the refusals in lbt_refused_connects (both atomic). */
extern int lbt_refuse_connects, lbt_refused_connects;
redisContext *lbt_refusable_connect(void *ud);
/* A waiter that connects through lbt_refusable_connect, retrying every 5 to 20 ms. */
lb_waiter *lbt_new_refusable_waiter(void);

/* Runs a token lock's acquire and release on `c`, so that the connection is
 * known to run scripts and the counts a test takes are the waits' own commands. */
void lbt_checked(redisContext *c);
/* Takes and releases the lock once on lbt_conn, so that what a handle does
 * once (the check that the server runs scripts) is out of the way; returns
 * the handle's command count after it. */
uint64_t lbt_warmed_up(lb_lock *l);

/* The queued tokens, oldest first, into out[n][33]; returns how many. */
int lbt_queue_tokens(const char *queue, char out[][33], int n);
/* Whether `token` is queued on `queue`. */
int lbt_queued(const char *queue, const char *token);
/* Whether the client `id` is blocked in a BLPOP now. */
int lbt_blocked_in_blpop(long long id);
/* How many times the server has run `cmd` (INFO commandstats). */
long long lbt_calls_of(const char *cmd);

/* ---- One blocking acquire on a thread of its own ------------------------ */

typedef struct lbt_job {
    lb_lock *l;
    redisContext *c;
    lb_waiter *w;
    int64_t wait_ms;
    long long client_id; /* of c, read before the thread starts */
    int rc;
    int done; /* atomic */
    pthread_t t;
} lbt_job;

/* Starts l's lb_lock_acquire_wait (through w, NULL for none) for at most
 * wait_ms ms on a connection of its own, on a thread of its own. */
void lbt_job_start(lbt_job *j, lb_lock *l, lb_waiter *w, int64_t wait_ms);
/* Whether the wait has returned. */
int lbt_job_done(lbt_job *j);
/* Waits for the thread; returns the wait's result. */
int lbt_job_join(lbt_job *j);
/* Releases the lock if the job holds it and closes its connection. */
void lbt_job_end(lbt_job *j);
/* Starts q's fair wait without a waiter (on one connection: a grant-list
 * wait) and returns once it is the n-th queued on `queue` and blocked in its
 * BLPOP. */
void lbt_start_blocked_on_list(lbt_job *j, lb_lock *q, int64_t wait_ms, const char *queue,
                               long long n);

#endif
