/* Test harness: the server and connection the waiting tests share, the token
 * locks and waiters they make, and a blocking acquire on a thread of its own. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/redis_util.h"
#include "harness/wait_fixture.h"

lbt_redis lbt_server;
redisContext *lbt_conn;
redisContext *lbt_short;
const struct timeval lbt_too_short_to_block = {0, 200000};

int lbt_wait_setup(void **state) {
    (void)state;
    if (lbt_redis_start(&lbt_server, NULL) != 0) return -1;
    lbt_conn = lbt_redis_connect(&lbt_server);
    lbt_short = lbt_redis_connect(&lbt_server);
    if (!lbt_conn || !lbt_short) return -1;
    return redisSetTimeout(lbt_short, lbt_too_short_to_block) == REDIS_OK ? 0 : -1;
}

int lbt_wait_teardown(void **state) {
    (void)state;
    if (lbt_conn) redisFree(lbt_conn);
    if (lbt_short) redisFree(lbt_short);
    lbt_redis_stop(&lbt_server);
    return 0;
}

/* A lock on key with the options o. */
lb_lock *lbt_lock_with(const char *key, const lb_lock_options *o) {
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, key, strlen(key), o), LB_OK);
    return l;
}

/* Fair options whose releases yield to outsiders after `every` hand-offs in
 * a row, for `ms`. */
lb_lock_options lbt_yielding(int64_t every, int64_t ms) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fair_yield_every = every;
    o.fair_yield_ms = ms;
    return o;
}

lb_lock *lbt_new_lock(const char *key, int fair, int64_t bmin, int64_t bmax) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = fair;
    o.backoff_min_ms = bmin;
    o.backoff_max_ms = bmax;
    return lbt_lock_with(key, &o);
}

lb_waiter *lbt_new_waiter(void) {
    lb_waiter_options o;
    lb_waiter_options_init(&o);
    o.host = "127.0.0.1";
    o.port = lbt_server.port;
    lb_waiter *w = NULL;
    assert_int_equal(lb_waiter_new(&w, &o), LB_OK);
    return w;
}

/* The queued tokens, oldest first, into out[n][33]; returns how many. */
int lbt_queue_tokens(const char *queue, char out[][33], int n) {
    redisReply *r = redisCommand(lbt_conn, "ZRANGE %s 0 -1", queue);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    int k = 0;
    for (size_t i = 0; i < r->elements && k < n; i++) snprintf(out[k++], 33, "%s", r->element[i]->str);
    freeReplyObject(r);
    return k;
}

lb_waiter_stats lbt_stats_of(lb_waiter *w) {
    lb_waiter_stats st;
    lb_waiter_stats_get(w, &st);
    return st;
}

/* Runs a token lock's acquire and release on `c`, so that the connection is
 * known to run scripts and the counts below are the waits' own commands. */
void lbt_checked(redisContext *c) {
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, "w:checked", 9, NULL), LB_OK);
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_lock_release(l, lb_on_conn(c)), LB_OK);
    lb_lock_free(l);
}

/* Takes and releases the lock once, so that what a handle does once (the
 * check that the server runs scripts) is out of the way; returns the
 * handle's command count after it. */
uint64_t lbt_warmed_up(lb_lock *l) {
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
    return lb_lock_info_of(l).commands;
}

static void *job_run(void *arg) {
    lbt_job *j = arg;
    j->rc = lb_lock_acquire_wait(j->l, lb_on_conn(j->c), j->w, j->wait_ms);
    __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

void lbt_job_start(lbt_job *j, lb_lock *l, lb_waiter *w, int64_t wait_ms) {
    memset(j, 0, sizeof *j);
    j->l = l;
    j->w = w;
    j->wait_ms = wait_ms;
    j->c = lbt_redis_connect(&lbt_server);
    assert_non_null(j->c);
    lbt_checked(j->c);
    /* On its own connection a fair wait blocks there, waiter or none; a read
     * timeout too short to block (under 220 ms) sends it through its waiter,
     * the path a Cluster or Sentinel target takes, which these jobs test. */
    if (w) assert_int_equal(redisSetTimeout(j->c, lbt_too_short_to_block), REDIS_OK);
    j->client_id = lbt_int(j->c, "CLIENT ID");
    assert_int_equal(pthread_create(&j->t, NULL, job_run, j), 0);
}

int lbt_job_done(lbt_job *j) { return __atomic_load_n(&j->done, __ATOMIC_ACQUIRE); }

int lbt_job_join(lbt_job *j) {
    pthread_join(j->t, NULL);
    return j->rc;
}

void lbt_job_end(lbt_job *j) {
    if (lb_lock_info_of(j->l).held) assert_int_equal(lb_lock_release(j->l, lb_on_conn(j->c)), LB_OK);
    redisFree(j->c);
}

/* The test's connect callback, which it can make refuse. */
int lbt_refuse_connects, lbt_refused_connects;
redisContext *lbt_refusable_connect(void *ud) {
    (void)ud;
    if (__atomic_load_n(&lbt_refuse_connects, __ATOMIC_ACQUIRE)) {
        __atomic_fetch_add(&lbt_refused_connects, 1, __ATOMIC_ACQ_REL);
        return NULL;
    }
    return lbt_redis_connect(&lbt_server);
}

/* A waiter that connects through lbt_refusable_connect, retrying every 5 to 20 ms. */
lb_waiter *lbt_new_refusable_waiter(void) {
    lb_waiter_options o;
    lb_waiter_options_init(&o);
    o.connect = lbt_refusable_connect;
    o.reconnect_min_ms = 5;
    o.reconnect_max_ms = 20;
    lb_waiter *w = NULL;
    assert_int_equal(lb_waiter_new(&w, &o), LB_OK);
    return w;
}

int lbt_queued(const char *queue, const char *token) {
    redisReply *r = redisCommand(lbt_conn, "ZSCORE %s %s", queue, token);
    assert_non_null(r);
    int yes = r->type != REDIS_REPLY_NIL;
    freeReplyObject(r);
    return yes;
}

/* From CLIENT LIST: a client gone is not blocked. */
int lbt_blocked_in_blpop(long long id) {
    redisReply *r = redisCommand(lbt_conn, "CLIENT LIST ID %lld", id);
    assert_non_null(r);
    int yes = r->type == REDIS_REPLY_STRING && strstr(r->str, "cmd=blpop") != NULL;
    freeReplyObject(r);
    return yes;
}

long long lbt_calls_of(const char *cmd) {
    redisReply *r = redisCommand(lbt_conn, "INFO commandstats");
    assert_non_null(r);
    char field[64];
    snprintf(field, sizeof field, "cmdstat_%s:calls=", cmd);
    const char *at = r->type == REDIS_REPLY_STRING ? strstr(r->str, field) : NULL;
    long long n = at ? strtoll(at + strlen(field), NULL, 10) : 0;
    freeReplyObject(r);
    return n;
}

/* Starts q's fair wait without a waiter (on one connection: a grant-list
 * wait) and returns once it is the n-th queued on `queue` and blocked in its
 * BLPOP. */
void lbt_start_blocked_on_list(lbt_job *j, lb_lock *q, int64_t wait_ms, const char *queue,
                                  long long n) {
    lbt_job_start(j, q, NULL, wait_ms);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD %s", queue) == n && lbt_blocked_in_blpop(j->client_id));
}
