/* Waiting that wakes on release, and fair mode, against a real redis-server:
 * wake-ups counted in attempts rather than timed, the TTL bound for releases
 * that publish nothing, a killed subscriber, FIFO hand-offs, dead waiters,
 * shares among contending threads, a client outside the queue, and what a
 * grant, a free key or an error does to a queue place. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "harness/churn.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "harness/cancel.h"
#include "lockbridge/lockbridge.h"
#include "modern/internal.h"

static lbt_redis server;
static redisContext *conn;

/* A lock on key with the options o. */
static lb_lock *lock_with(const char *key, const lb_lock_options *o) {
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, key, strlen(key), o), LB_OK);
    return l;
}

/* Fair options whose releases yield to outsiders after `every` hand-offs in
 * a row, for `ms`. */
static lb_lock_options yielding(int64_t every, int64_t ms) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fair_yield_every = every;
    o.fair_yield_ms = ms;
    return o;
}

static lb_lock *new_lock(const char *key, int fair, int64_t bmin, int64_t bmax) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = fair;
    o.backoff_min_ms = bmin;
    o.backoff_max_ms = bmax;
    return lock_with(key, &o);
}

static lb_waiter *new_waiter(void) {
    lb_waiter_options o;
    lb_waiter_options_init(&o);
    o.port = server.port;
    lb_waiter *w = NULL;
    assert_int_equal(lb_waiter_new(&w, &o), LB_OK);
    return w;
}

/* The queued tokens, oldest first, into out[n][33]; returns how many. */
static int queue_tokens(const char *queue, char out[][33], int n) {
    redisReply *r = redisCommand(conn, "ZRANGE %s 0 -1", queue);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    int k = 0;
    for (size_t i = 0; i < r->elements && k < n; i++) snprintf(out[k++], 33, "%s", r->element[i]->str);
    freeReplyObject(r);
    return k;
}

/* Polls `ok` until it holds; fails the test after ~10 s (a hang, not a
 * timing judgement). */
#define EVENTUALLY(ok)                                                    \
    do {                                                                  \
        int tries_ = 0;                                                   \
        while (!(ok)) {                                                   \
            assert_true(++tries_ < 2000);                                 \
            lbt_sleep_ms(5);                                                  \
        }                                                                 \
    } while (0)

static lb_waiter_stats stats_of(lb_waiter *w) {
    lb_waiter_stats st;
    lb_waiter_stats_get(w, &st);
    return st;
}

/* Runs a token lock's acquire and release on `c`, so that the connection is
 * known to run scripts and the counts below are the waits' own commands. */
static void checked(redisContext *c) {
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, "w:checked", 9, NULL), LB_OK);
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_lock_release(l, lb_on_conn(c)), LB_OK);
    lb_lock_free(l);
}

/* Takes and releases the lock once, so that what a handle does once (the
 * check that the server runs scripts) is out of the way; returns the
 * handle's command count after it. */
static uint64_t warmed_up(lb_lock *l) {
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
    return lb_lock_info_of(l).commands;
}

/* ---- One blocking acquire on a thread of its own ------------------------ */

typedef struct job {
    lb_lock *l;
    redisContext *c;
    lb_waiter *w;
    int64_t wait_ms;
    long long client_id; /* of c, read before the thread starts */
    int rc;
    int done; /* atomic */
    pthread_t t;
} job;

static void *job_run(void *arg) {
    job *j = arg;
    j->rc = lb_lock_acquire_wait(j->l, lb_on_conn(j->c), j->w, j->wait_ms);
    __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void job_start(job *j, lb_lock *l, lb_waiter *w, int64_t wait_ms) {
    memset(j, 0, sizeof *j);
    j->l = l;
    j->w = w;
    j->wait_ms = wait_ms;
    j->c = lbt_redis_connect(&server);
    assert_non_null(j->c);
    checked(j->c);
    j->client_id = lbt_int(j->c, "CLIENT ID");
    assert_int_equal(pthread_create(&j->t, NULL, job_run, j), 0);
}

static int job_done(job *j) { return __atomic_load_n(&j->done, __ATOMIC_ACQUIRE); }

static int job_join(job *j) {
    pthread_join(j->t, NULL);
    return j->rc;
}

static void job_end(job *j) {
    if (lb_lock_info_of(j->l).held) assert_int_equal(lb_lock_release(j->l, lb_on_conn(j->c)), LB_OK);
    redisFree(j->c);
}

/* ---- Waking on release ------------------------------------------------------ */

/* With a back-off of 5 s and a deadline of 4 s, only the release message can
 * get the waiter the lock: its second sleep is cut short by the release. */
static void test_a_release_wakes_the_waiter_long_before_its_back_off(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock *a = new_lock("w:wake", 0, 2, 100), *b = new_lock("w:wake", 0, 5000, 5000);
    uint64_t base = warmed_up(b);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    job j;
    job_start(&j, b, w, 4000);
    /* First sleep: awaiting the subscription; second: after the attempt that
     * followed it. The release comes during the second. */
    EVENTUALLY(stats_of(w).sleeps >= 2 && stats_of(w).blocked == 1);
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    assert_string_equal(lbt_get(conn, "w:wake"), lb_lock_info_of(b).token);
    /* Three attempts: SET+PTTL, SET+PTTL after subscribing, SET on release. */
    assert_int_equal(lb_lock_info_of(b).commands - base, 5);
    lb_waiter_stats st = stats_of(w);
    assert_true(st.messages >= 1);
    assert_int_equal(st.subscribes, 1);
    job_end(&j);
    /* Nobody watches now: the channel is unsubscribed and forgotten. */
    EVENTUALLY(stats_of(w).channels == 0);
    lb_waiter_free(w);
    lb_lock_free(a);
    lb_lock_free(b);
}

/* Two clients wait; a release wakes both, one wins and the other's attempt
 * fails. The loser then sleeps its back-off (1 s) deaf: the winner's release
 * 300 ms later does not wake it (at 32 clients, answering every release made
 * a herd of attempts of which one could win). */
static void test_a_waiter_that_lost_the_race_after_a_release_sleeps_its_back_off(void **state) {
    (void)state;
    lb_waiter *w1 = new_waiter(), *w2 = new_waiter();
    lb_lock *h = new_lock("w:deaf", 0, 2, 100), *a = new_lock("w:deaf", 0, 1000, 1000),
            *b = new_lock("w:deaf", 0, 1000, 1000);
    (void)warmed_up(a);
    (void)warmed_up(b);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job ja, jb;
    job_start(&ja, a, w1, 30000);
    job_start(&jb, b, w2, 30000);
    /* Each: attempted, slept awaiting its subscription, attempted, asleep. */
    EVENTUALLY(stats_of(w1).blocked == 1 && stats_of(w1).sleeps == 2 &&
               stats_of(w2).blocked == 1 && stats_of(w2).sleeps == 2);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    EVENTUALLY(job_done(&ja) || job_done(&jb));
    job *win = job_done(&ja) ? &ja : &jb, *lose = win == &ja ? &jb : &ja;
    lb_waiter *lw = win == &ja ? w2 : w1;
    assert_int_equal(job_join(win), LB_OK);
    /* The loser woke, attempted, and sleeps again. */
    EVENTUALLY(stats_of(lw).sleeps == 3 && stats_of(lw).blocked == 1);
    job_end(win); /* releases, and publishes */
    lbt_sleep_ms(300);
    int done_early = job_done(lose);
    uint64_t sleeps = stats_of(lw).sleeps;
    assert_int_equal(job_join(lose), LB_OK);
    job_end(lose);
    lb_waiter_free(w1);
    lb_waiter_free(w2);
    lb_lock_free(h);
    lb_lock_free(a);
    lb_lock_free(b);
    assert_false(done_early);
    assert_int_equal(sleeps, 3); /* still the same sleep */
}

/* A waiter that keeps losing races after releases (here: a release
 * published while the key is written afresh, a holder just begun, each time)
 * sleeps its deaf step as polling does beside a lock turned over fast: its
 * back-off floor (30 ms) rather than a step of its grown back-off (up to 1 s,
 * drawn at random: a loser slept it whole, deaf, while others took turns, and
 * starved). Three losses in a row, each followed by its next attempt within
 * 200 ms; the grown back-off would give that about one time in six. */
static void test_a_waiter_that_keeps_losing_races_after_releases_asks_again_soon(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock *l = new_lock("w:lose", 0, 30, 1000);
    (void)warmed_up(l);
    lbt_cmd_ok(conn, "SET w:lose someone PX 30000");
    job j;
    job_start(&j, l, w, 20000);
    /* Its back-off grows with every sleep a timeout ends: 30, 60, ... 1000. */
    EVENTUALLY(stats_of(w).blocked == 1 && stats_of(w).sleeps >= 7);
    int64_t slowest = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t before = stats_of(w).sleeps;
        lbt_cmd_ok(conn, "SET w:lose someone PX 30000");
        lbt_int(conn, "PUBLISH {w:lose}:released released");
        int64_t heard = lbt_mono_ms();
        /* The deaf step begins, then, after its attempt, the next sleep. */
        EVENTUALLY(stats_of(w).sleeps >= before + 2);
        int64_t ms = lbt_mono_ms() - heard;
        if (ms > slowest) slowest = ms;
    }
    assert_false(job_done(&j));
    lbt_cmd_ok(conn, "DEL w:lose");
    lbt_int(conn, "PUBLISH {w:lose}:released released");
    assert_int_equal(job_join(&j), LB_OK);
    job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(l);
    assert_true(slowest < 200);
}

/* A legacy client releases with a bare DEL and publishes nothing: the sleep
 * is bounded by the holder's TTL (400 ms), far below the 5 s back-off, so the
 * waiter gets the lock before its 3 s deadline. */
static void test_a_bare_del_is_noticed_within_the_holders_ttl(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock *b = new_lock("w:del", 0, 5000, 5000);
    uint64_t base = warmed_up(b);
    lbt_cmd_ok(conn, "SET w:del legacy-holder PX 400");
    job j;
    job_start(&j, b, w, 3000);
    EVENTUALLY(stats_of(w).sleeps >= 2 || job_done(&j));
    lbt_cmd_ok(conn, "DEL w:del");
    assert_int_equal(job_join(&j), LB_OK);
    assert_true(lb_lock_info_of(b).commands - base <= 5);
    assert_int_equal(stats_of(w).messages, 0);
    job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(b);
}

/* The test's connect callback, which it can make refuse. */
static int refuse_connects, refused_connects;
static redisContext *test_connect(void *ud) {
    (void)ud;
    if (__atomic_load_n(&refuse_connects, __ATOMIC_ACQUIRE)) {
        __atomic_fetch_add(&refused_connects, 1, __ATOMIC_ACQ_REL);
        return NULL;
    }
    return lbt_redis_connect(&server);
}

/* A waiter that connects through test_connect, retrying every 5 to 20 ms. */
static lb_waiter *new_refusable_waiter(void) {
    lb_waiter_options o;
    lb_waiter_options_init(&o);
    o.connect = test_connect;
    o.reconnect_min_ms = 5;
    o.reconnect_max_ms = 20;
    lb_waiter *w = NULL;
    assert_int_equal(lb_waiter_new(&w, &o), LB_OK);
    return w;
}

/* The subscriber is killed and cannot reconnect: a release goes unheard, the
 * waiter falls back to its back-off (300 ms) and still gets the lock, never
 * before the holder lets go. Once connecting works again the waiter is back
 * and a release wakes the next wait at once. */
static void test_a_killed_subscriber_degrades_to_back_off_and_reconnects(void **state) {
    (void)state;
    lb_waiter *w = new_refusable_waiter();
    lb_lock *a = new_lock("w:kill", 0, 2, 100), *b = new_lock("w:kill", 0, 300, 300);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    job j;
    job_start(&j, b, w, 10000);
    EVENTUALLY(stats_of(w).sleeps >= 2);
    __atomic_store_n(&refuse_connects, 1, __ATOMIC_RELEASE);
    lbt_cmd_ok(conn, "CLIENT KILL TYPE pubsub");
    EVENTUALLY(!stats_of(w).connected);
    /* Attempts go on and fail while the holder keeps the lock. */
    lbt_sleep_ms(700);
    assert_false(job_done(&j));
    assert_string_equal(lbt_get(conn, "w:kill"), lb_lock_info_of(a).token);
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK); /* published to nobody */
    assert_int_equal(job_join(&j), LB_OK);
    assert_string_equal(lbt_get(conn, "w:kill"), lb_lock_info_of(b).token);
    assert_false(stats_of(w).connected);
    job_end(&j);
    /* Refused connections were retried after a delay doubling from 5 to 20 ms
     * (about 50 in this time), not in a tight loop. */
    int tries = __atomic_load_n(&refused_connects, __ATOMIC_ACQUIRE);
    assert_true(tries >= 1 && tries < 200);

    __atomic_store_n(&refuse_connects, 0, __ATOMIC_RELEASE);
    EVENTUALLY(stats_of(w).connected);
    assert_true(stats_of(w).reconnects >= 1);
    lb_lock *c = new_lock("w:kill", 0, 5000, 5000);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    uint64_t sleeps = stats_of(w).sleeps;
    job_start(&j, c, w, 4000);
    EVENTUALLY(stats_of(w).sleeps >= sleeps + 2 && stats_of(w).blocked == 1);
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(a);
    lb_lock_free(b);
    lb_lock_free(c);
}

/* One waiter serves many threads and many locks at once. */
static void test_one_waiter_serves_many_threads_and_locks(void **state) {
    (void)state;
    enum { N = 6 };
    lb_waiter *w = new_waiter();
    lb_lock *holders[N], *waiters[N];
    job jobs[N];
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "w:many:%d", i % 3);
        holders[i] = new_lock(key, 0, 2, 100);
        waiters[i] = new_lock(key, 0, 5000, 5000);
    }
    for (int i = 0; i < 3; i++) assert_int_equal(lb_lock_try_acquire(holders[i], lb_on_conn(conn)), LB_OK);
    for (int i = 0; i < N; i++) job_start(&jobs[i], waiters[i], w, 20000);
    EVENTUALLY(stats_of(w).blocked == N);
    assert_int_equal(stats_of(w).channels, 3);
    /* Each release lets one waiter of that key in; its release the next. */
    for (int i = 0; i < 3; i++) assert_int_equal(lb_lock_release(holders[i], lb_on_conn(conn)), LB_OK);
    int finished = 0;
    while (finished < N) {
        for (int i = 0; i < N; i++) {
            if (jobs[i].c && job_done(&jobs[i])) {
                assert_int_equal(job_join(&jobs[i]), LB_OK);
                job_end(&jobs[i]);
                jobs[i].c = NULL;
                finished++;
            }
        }
        lbt_sleep_ms(2);
    }
    assert_int_equal(stats_of(w).subscribes, 3);
    lb_waiter_free(w);
    for (int i = 0; i < N; i++) {
        lb_lock_free(holders[i]);
        lb_lock_free(waiters[i]);
    }
}

/* ---- Fair mode -------------------------------------------------------------- */

/* A job of `jobs` that has finished and not been ended, or -1. */
static int finished_job(job *jobs, int n) {
    for (int m = 0; m < n; m++)
        if (jobs[m].c && job_done(&jobs[m])) return m;
    return -1;
}

static int queued(const char *queue, const char *token) {
    redisReply *r = redisCommand(conn, "ZSCORE %s %s", queue, token);
    assert_non_null(r);
    int yes = r->type != REDIS_REPLY_NIL;
    freeReplyObject(r);
    return yes;
}

/* Waiters queue in arrival order, and each release hands the lock to the
 * oldest: the key holds that waiter's token the moment release returns. */
static void test_fair_hand_offs_follow_arrival_order(void **state) {
    (void)state;
    enum { N = 5 };
    lb_waiter *w = new_waiter();
    lb_lock *h = new_lock("w:fifo", 1, 2, 100), *ls[N];
    job jobs[N];
    char tokens[N][33];
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    for (int i = 0; i < N; i++) {
        ls[i] = new_lock("w:fifo", 1, 2000, 2000);
        job_start(&jobs[i], ls[i], w, 30000);
        EVENTUALLY(lbt_int(conn, "ZCARD {w:fifo}:queue") == i + 1);
    }
    assert_int_equal(queue_tokens("{w:fifo}:queue", tokens, N), N);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    for (int i = 0; i < N; i++) {
        /* Handed to the oldest: its token is at the key before it even wakes. */
        assert_string_equal(lbt_get(conn, "w:fifo"), tokens[i]);
        int k;
        EVENTUALLY((k = finished_job(jobs, N)) >= 0);
        assert_int_equal(job_join(&jobs[k]), LB_OK);
        assert_string_equal(lb_lock_info_of(ls[k]).token, tokens[i]);
        job_end(&jobs[k]);
        jobs[k].c = NULL;
    }
    assert_string_equal(lbt_get(conn, "w:fifo"), "");
    /* Waiters asleep learn of their hand-off from the message alone. */
    assert_true(stats_of(w).handoffs >= 1 && stats_of(w).handoffs <= N);
    assert_int_equal(lbt_int(conn, "EXISTS {w:fifo}:queue"), 0);
    lb_waiter_free(w);
    lb_lock_free(h);
    for (int i = 0; i < N; i++) lb_lock_free(ls[i]);
}

/* A hand-off costs the waiter nothing but the attempt that queued it: the
 * first waiter of a key also attempts once more after subscribing; a waiter
 * that finds the channel subscribed already sleeps right after queueing, and
 * the release's message is all it needs. */
static void test_a_queued_waiter_needs_one_command_when_the_channel_is_watched(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock *h = new_lock("w:one", 1, 2, 100), *w1 = new_lock("w:one", 1, 2000, 2000),
            *w2 = new_lock("w:one", 1, 2000, 2000);
    uint64_t base1 = warmed_up(w1), base2 = warmed_up(w2);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job j1, j2;
    job_start(&j1, w1, w, 30000);
    EVENTUALLY(stats_of(w).sleeps >= 2 && stats_of(w).blocked == 1);
    job_start(&j2, w2, w, 30000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:one}:queue") == 2 && stats_of(w).blocked == 2);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j1), LB_OK);
    assert_int_equal(lb_lock_info_of(w1).commands - base1, 2);
    job_end(&j1); /* hands the lock to w2 */
    assert_int_equal(job_join(&j2), LB_OK);
    assert_int_equal(lb_lock_info_of(w2).commands - base2, 1);
    assert_int_equal(stats_of(w).handoffs, 2);
    job_end(&j2);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(w1);
    lb_lock_free(w2);
}

/* Queued and listening, a fair waiter sends nothing until its hand-off: not
 * at every back-off step (2..20 ms here), only when a third of its lease
 * (30 s) is up or the holder's TTL runs out. */
static void test_a_queued_listening_waiter_attempts_no_more_until_its_hand_off(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = 1;
    o.backoff_min_ms = 2;
    o.backoff_max_ms = 20;
    o.fair_lease_ms = 30000;
    lb_lock *h = new_lock("w:quiet", 1, 2, 100);
    lb_lock *q = lock_with("w:quiet", &o);
    uint64_t base = warmed_up(q);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job j;
    job_start(&j, q, w, 30000);
    /* Queued, subscribed, attempted once more after the confirmation, asleep. */
    EVENTUALLY(lbt_int(conn, "ZCARD {w:quiet}:queue") == 1 && stats_of(w).sleeps >= 2 &&
               stats_of(w).blocked == 1);
    /* Before the subscription is confirmed the wait may poll at its back-off
     * steps (a busy host confirms late); once asleep, nothing more. */
    uint64_t queued = lb_lock_info_of(q).commands - base;
    lbt_sleep_ms(300); /* fifteen back-off steps and more */
    uint64_t asleep = lb_lock_info_of(q).commands - base;
    /* The thread ends before any assertion, so a failure leaves none behind. */
    int released = lb_lock_release(h, lb_on_conn(conn));
    int rc = job_join(&j);
    uint64_t total = lb_lock_info_of(q).commands - base, handoffs = stats_of(w).handoffs;
    job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(q);
    assert_true(queued >= 2); /* the queueing attempt, and one after the confirmation */
    assert_int_equal(asleep, queued);
    assert_int_equal(released, LB_OK);
    assert_int_equal(rc, LB_OK);
    assert_int_equal(total, asleep); /* the hand-off costs the waiter no command */
    assert_int_equal(handoffs, 1);
}

static lb_waiter *new_waiter_lingering(int64_t linger_ms) {
    lb_waiter_options o;
    lb_waiter_options_init(&o);
    o.port = server.port;
    o.linger_ms = linger_ms;
    lb_waiter *w = NULL;
    assert_int_equal(lb_waiter_new(&w, &o), LB_OK);
    return w;
}

/* One fair round: h holds, q waits and is handed the lock, then lets it go.
 * Returns the commands q sent. q's release, with nobody queued, publishes
 * "released": the round waits (up to a second) for the waiter to read it,
 * so that it cannot wake the next round's wait, which would then attempt
 * once more (seen on a loaded machine). */
static uint64_t fair_round(lb_lock *h, lb_lock *q, lb_waiter *w) {
    uint64_t before = lb_lock_info_of(q).commands;
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job j;
    job_start(&j, q, w, 30000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:linger}:queue") == 1 && stats_of(w).blocked == 1);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    uint64_t sent = lb_lock_info_of(q).commands - before;
    uint64_t heard = stats_of(w).messages;
    job_end(&j);
    for (int i = 0; i < 200 && stats_of(w).channels > 0 && stats_of(w).messages == heard; i++)
        lbt_sleep_ms(5);
    return sent;
}

/* A subscriber's next message as "channel payload" (pattern messages too). */
static void next_message(redisContext *sub, char *out, size_t cap) {
    redisReply *r = NULL;
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_true(r->type == REDIS_REPLY_ARRAY && r->elements >= 3);
    size_t n = r->elements;
    snprintf(out, cap, "%s %s", r->element[n - 2]->str, r->element[n - 1]->str);
    freeReplyObject(r);
}

/* A fair hand-off is published on the inbox of the waiter it names, not on
 * the lock's channel: the other clients watching the lock hear nothing of it
 * (with 32 clients, one wake-up per hand-off instead of 32). */
static void test_a_fair_hand_off_wakes_only_the_client_it_names(void **state) {
    (void)state;
    lb_waiter *w1 = new_waiter(), *w2 = new_waiter();
    lb_lock *h = new_lock("w:inbox", 1, 2, 100), *q1 = new_lock("w:inbox", 1, 2000, 2000),
            *q2 = new_lock("w:inbox", 1, 2000, 2000);
    /* A first fair wait subscribes each waiter's inbox. */
    lb_lock *ls[2] = {q1, q2};
    lb_waiter *ws[2] = {w1, w2};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(lb_lock_acquire_wait(ls[i], lb_on_conn(conn), ws[i], 1000), LB_OK);
        assert_int_equal(lb_lock_release(ls[i], lb_on_conn(conn)), LB_OK);
        EVENTUALLY(stats_of(ws[i]).inbox == 1);
    }
    redisContext *sub = lbt_redis_connect(&server);
    assert_non_null(sub);
    lbt_cmd_ok(sub, "SUBSCRIBE {w:inbox}:released");
    lbt_cmd_ok(sub, "PSUBSCRIBE lb-inbox:*");
    /* A marker on a channel of its own (one on the lock's would wake q2). */
    lbt_cmd_ok(sub, "SUBSCRIBE w:inbox-marker");

    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job j1, j2;
    job_start(&j1, q1, w1, 30000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:inbox}:queue") == 1 && stats_of(w1).blocked == 1);
    job_start(&j2, q2, w2, 30000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:inbox}:queue") == 2 && stats_of(w2).blocked == 1);
    char first[LB_TOKEN_LEN + 1], place[32];
    redisReply *z = redisCommand(conn, "ZRANGE {w:inbox}:queue 0 0 WITHSCORES");
    assert_true(z && z->type == REDIS_REPLY_ARRAY && z->elements == 2);
    snprintf(first, sizeof first, "%s", z->element[0]->str);
    snprintf(place, sizeof place, "%.0f", atof(z->element[1]->str));
    freeReplyObject(z);

    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j1), LB_OK);
    assert_int_equal(stats_of(w1).handoffs, 1);
    lbt_cmd_ok(conn, "PUBLISH w:inbox-marker marker");
    /* In order: the hand-off on an inbox, then the marker; nothing between.
     * The grant names the token and the queue place it was given for. */
    char msg[256], want[256];
    next_message(sub, msg, sizeof msg);
    assert_memory_equal(msg, "lb-inbox:", 9);
    snprintf(want, sizeof want, " %s %s", first, place);
    assert_string_equal(strchr(msg, ' '), want);
    next_message(sub, msg, sizeof msg);
    assert_string_equal(msg, "w:inbox-marker marker");
    assert_int_equal(stats_of(w2).handoffs, 0);

    job_end(&j1); /* releases: the lock goes to q2 */
    assert_int_equal(job_join(&j2), LB_OK);
    assert_int_equal(stats_of(w2).handoffs, 1);
    job_end(&j2);
    redisFree(sub);
    lb_waiter_free(w1);
    lb_waiter_free(w2);
    lb_lock_free(h);
    lb_lock_free(q1);
    lb_lock_free(q2);
}

/* A hand-off published while the waiter's connection was down is not lost:
 * once the waiter is back and subscribed again, its wait attempts and finds
 * its token at the key, long before its queued sleep (bounded by the holder's
 * TTL, 30 s) would have ended. */
static void test_a_hand_off_missed_while_the_waiter_was_down_is_found_after_it_is_back(
    void **state) {
    (void)state;
    lb_waiter *w = new_refusable_waiter();
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 5000;
    o.fair_lease_ms = 120000;
    lb_lock *h = new_lock("w:down", 1, 2, 100);
    lb_lock *q = lock_with("w:down", &o);
    assert_int_equal(lb_lock_acquire_wait(q, lb_on_conn(conn), w, 1000), LB_OK); /* subscribes the inbox */
    assert_int_equal(lb_lock_release(q, lb_on_conn(conn)), LB_OK);
    EVENTUALLY(stats_of(w).inbox == 1);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    uint64_t sleeps = stats_of(w).sleeps;
    job j;
    job_start(&j, q, w, 60000);
    /* Queued, subscribed (the first sleep), attempted again, and now in the
     * queued sleep that only a message or an event ends early. */
    EVENTUALLY(lbt_int(conn, "ZCARD {w:down}:queue") == 1 && stats_of(w).sleeps == sleeps + 2 &&
               stats_of(w).blocked == 1);
    redisReply *z = redisCommand(conn, "ZRANGE {w:down}:queue 0 0");
    assert_true(z && z->type == REDIS_REPLY_ARRAY && z->elements == 1);
    char token[LB_TOKEN_LEN + 1];
    snprintf(token, sizeof token, "%s", z->element[0]->str);
    freeReplyObject(z);
    /* The queue entry names the inbox. */
    redisReply *e = redisCommand(conn, "HGET {w:down}:fair %s", token);
    assert_true(e && e->type == REDIS_REPLY_STRING && strstr(e->str, " lb-inbox:"));
    freeReplyObject(e);

    __atomic_store_n(&refuse_connects, 1, __ATOMIC_RELEASE);
    lbt_cmd_ok(conn, "CLIENT KILL TYPE pubsub");
    EVENTUALLY(!stats_of(w).connected);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK); /* handed to q, told nobody */
    assert_string_equal(lbt_get(conn, "w:down"), token);
    assert_false(job_done(&j));
    __atomic_store_n(&refuse_connects, 0, __ATOMIC_RELEASE);
    EVENTUALLY(job_done(&j));
    assert_int_equal(job_join(&j), LB_OK);
    assert_true(lb_lock_info_of(q).held);
    assert_string_equal(lb_lock_info_of(q).token, token);
    job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(q);
}

/* A client that waits on the same lock again within linger_ms finds the
 * channel still subscribed: no SUBSCRIBE, and the one attempt that queues it
 * is all it sends. Past linger_ms the channel is let go. */
static void test_a_channel_stays_subscribed_for_linger_ms_after_its_last_wait(void **state) {
    (void)state;
    lb_waiter *w = new_waiter_lingering(60000);
    lb_lock *h = new_lock("w:linger", 1, 2, 100), *q = new_lock("w:linger", 1, 2000, 2000);
    (void)warmed_up(q);
    /* A fresh channel: queued, then again once subscribed (2); or, when the
     * hand-off lands before the subscription is confirmed, the first attempt
     * alone (1): the order depends on scheduling. */
    assert_in_range(fair_round(h, q, w), 1, 2);
    assert_int_equal(stats_of(w).channels, 1);
    /* The inbox's subscription is confirmed on the waiter's thread, maybe
     * after that first hand-off: a wait that begins before it attempts again
     * once it is confirmed, to name the inbox (2 commands). */
    EVENTUALLY(stats_of(w).inbox == 1);
    assert_int_equal(fair_round(h, q, w), 1);
    assert_int_equal(fair_round(h, q, w), 1);
    assert_int_equal(stats_of(w).subscribes, 1);
    lb_waiter_free(w);

    w = new_waiter_lingering(50);
    assert_in_range(fair_round(h, q, w), 1, 2);
    EVENTUALLY(stats_of(w).channels == 0);
    assert_in_range(fair_round(h, q, w), 1, 2);
    assert_int_equal(stats_of(w).subscribes, 2); /* let go, then subscribed anew */
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(q);
}

/* A waiter that died while queued (its connection killed) keeps its place
 * until its lease lapses; then the release skips it. */
static void test_a_dead_waiter_is_skipped_once_its_lease_lapses(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 100;
    o.fair_lease_ms = 400;
    lb_lock *h = new_lock("w:dead", 1, 2, 100), *d = lock_with("w:dead", &o),
            *b = new_lock("w:dead", 1, 2000, 2000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job jd, jb;
    job_start(&jd, d, w, 30000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:dead}:queue") == 1);
    job_start(&jb, b, w, 5000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:dead}:queue") == 2);
    char tokens[2][33];
    assert_int_equal(queue_tokens("{w:dead}:queue", tokens, 2), 2);
    lbt_cmd_ok(conn, "CLIENT KILL ID %lld", jd.client_id);
    assert_int_equal(job_join(&jd), LB_EIO); /* died, still queued */
    lbt_sleep_ms(600);                           /* its lease (400 ms) lapses */
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_string_equal(lbt_get(conn, "w:dead"), tokens[1]);
    assert_int_equal(job_join(&jb), LB_OK);
    assert_string_equal(lb_lock_info_of(b).token, tokens[1]);
    assert_false(queued("{w:dead}:queue", tokens[0]));
    job_end(&jb);
    redisFree(jd.c);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(d);
    lb_lock_free(b);
}

/* K threads each take the lock again and again: with fair mode every one of
 * them gets a share, and never two at once. */
typedef struct contender {
    lb_lock *l;
    lb_waiter *w;
    int *stop, *inside, *overlap;
    int got;
} contender;

static void *contend(void *arg) {
    contender *c = arg;
    redisContext *cc = lbt_redis_connect(&server);
    /* Stops on its own too, so a failed test does not leave it running. */
    int64_t until = lbt_mono_ms() + 30000;
    while (!__atomic_load_n(c->stop, __ATOMIC_ACQUIRE) && lbt_mono_ms() < until) {
        int rc = lb_lock_acquire_wait(c->l, lb_on_conn(cc), c->w, 200);
        if (rc == LB_ETIMEDOUT) continue;
        if (rc != LB_OK) break;
        if (__atomic_fetch_add(c->inside, 1, __ATOMIC_ACQ_REL) != 0)
            __atomic_store_n(c->overlap, 1, __ATOMIC_RELEASE);
        lbt_sleep_ms(1);
        __atomic_fetch_sub(c->inside, 1, __ATOMIC_ACQ_REL);
        __atomic_fetch_add(&c->got, 1, __ATOMIC_ACQ_REL);
        if (lb_lock_release(c->l, lb_on_conn(cc)) != LB_OK) break;
    }
    redisFree(cc);
    return NULL;
}

static int rounds(contender *cs, int k) {
    int n = 0;
    for (int i = 0; i < k; i++) n += __atomic_load_n(&cs[i].got, __ATOMIC_ACQUIRE);
    return n;
}

/* Starts `n` threads contending for `key` with options `o` through `w`,
 * sharing the stop flag and the overlap check. */
static void start_contenders(contender *cs, pthread_t *ts, int n, const char *key,
                             const lb_lock_options *o, lb_waiter *w, int *stop, int *inside,
                             int *overlap) {
    for (int i = 0; i < n; i++) {
        memset(&cs[i], 0, sizeof cs[i]);
        cs[i].l = lock_with(key, o);
        cs[i].w = w;
        cs[i].stop = stop;
        cs[i].inside = inside;
        cs[i].overlap = overlap;
        assert_int_equal(pthread_create(&ts[i], NULL, contend, &cs[i]), 0);
    }
}

static void test_no_fair_waiter_starves_among_contending_threads(void **state) {
    (void)state;
    enum { K = 4, ROUNDS = 60 };
    lb_waiter *w = new_waiter();
    contender cs[K];
    pthread_t ts[K];
    int stop = 0, inside = 0, overlap = 0;
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fair_yield_every = 0;
    o.backoff_min_ms = 1;
    o.backoff_max_ms = 2;
    start_contenders(cs, ts, K, "w:share", &o, w, &stop, &inside, &overlap);
    /* As EVENTUALLY, but the threads stop before any assertion. */
    for (int tries = 0; rounds(cs, K) < ROUNDS && tries < 2000; tries++) lbt_sleep_ms(5);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    int total = 0;
    for (int i = 0; i < K; i++) {
        pthread_join(ts[i], NULL);
        total += cs[i].got;
    }
    assert_false(overlap);
    assert_true(total >= ROUNDS);
    for (int i = 0; i < K; i++) {
        /* Round robin gives each total/K; a share of a quarter of that is
         * far from starving. */
        assert_true(cs[i].got * K * 4 >= total);
        lb_lock_free(cs[i].l);
    }
    lb_waiter_free(w);
}

/* A client outside the queue (fair mode off) beside fair threads that keep
 * the queue full: refused for 100 ms it notes itself, so every
 * fair_yield_every hand-offs the lock is left free for fair_yield_ms, and the
 * outsider, polling every 50 ms, gets its turn. (Unnoted, it never would:
 * windows open only for outsiders seen.) */
static void test_a_non_fair_client_beside_fair_ones_gets_a_turn(void **state) {
    (void)state;
    enum { K = 3 };
    lb_waiter *w = new_waiter();
    contender cs[K];
    pthread_t ts[K];
    int stop = 0, inside = 0, overlap = 0;
    lb_lock_options o = yielding(8, 150);
    start_contenders(cs, ts, K, "w:mixed", &o, w, &stop, &inside, &overlap);
    for (int tries = 0; lbt_int(conn, "ZCARD {w:mixed}:queue") < 1 && tries < 2000; tries++)
        lbt_sleep_ms(5);
    lb_lock *outsider = new_lock("w:mixed", 0, 50, 50);
    int rc = lb_lock_acquire(outsider, lb_on_conn(conn), 8000);
    int ours = rc == LB_OK && strcmp(lbt_get(conn, "w:mixed"), lb_lock_info_of(outsider).token) == 0;
    int released = rc == LB_OK ? lb_lock_release(outsider, lb_on_conn(conn)) : LB_OK;
    /* The threads stop before any assertion, so a failure leaves none behind. */
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    int got = 1;
    for (int i = 0; i < K; i++) {
        pthread_join(ts[i], NULL);
        got = got && rounds(&cs[i], 1) > 0;
        lb_lock_free(cs[i].l);
    }
    assert_int_equal(rc, LB_OK);
    assert_true(ours);
    assert_int_equal(released, LB_OK);
    assert_true(got);
    assert_false(overlap);
    lb_lock_free(outsider);
    lb_waiter_free(w);
}

/* A field of the fair state hash as a number, -1 when absent. */
static long long state_field(const char *hash, const char *field) {
    redisReply *r = redisCommand(conn, "HGET %s %s", hash, field);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
    freeReplyObject(r);
    return v;
}

/* Windows for outsiders open only for one seen: fair threads alone hand the
 * lock on and on without ever leaving it free (no window noted in the state),
 * and a fair client polling with tries, refused and noted, brings windows in
 * which it gets the lock. */
static void test_windows_open_only_once_an_outsider_is_seen(void **state) {
    (void)state;
    enum { K = 3, ALONE = 200 };
    lb_waiter *w = new_waiter();
    contender cs[K];
    pthread_t ts[K];
    int stop = 0, inside = 0, overlap = 0;
    lb_lock_options o = yielding(2, 5);
    start_contenders(cs, ts, K, "w:thin", &o, w, &stop, &inside, &overlap);
    for (int tries = 0; rounds(cs, K) < ALONE && tries < 2000; tries++) lbt_sleep_ms(5);
    int alone = rounds(cs, K);
    long long window_alone = state_field("{w:thin}:fair", "~last");
    /* Another fair client polls with tries every millisecond (outside the
     * queue, as lb_lock_try_acquire is): refused while the queue holds the
     * lock, it is noted and a window opens. */
    lb_lock *outsider = lock_with("w:thin", &o);
    int got = 0;
    for (int tries = 0; got == 0 && tries < 4000; tries++) {
        if (lb_lock_try_acquire(outsider, lb_on_conn(conn)) == LB_OK) {
            got++;
            lb_lock_release(outsider, lb_on_conn(conn));
        }
        lbt_sleep_ms(1);
    }
    long long window_seen = state_field("{w:thin}:fair", "~last");
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < K; i++) {
        pthread_join(ts[i], NULL);
        lb_lock_free(cs[i].l);
    }
    lb_lock_free(outsider);
    lb_waiter_free(w);
    assert_true(alone >= ALONE);
    assert_int_equal(window_alone, -1);
    assert_true(got > 0);
    assert_true(window_seen > 0);
    assert_false(overlap);
}

/* A queue alone is never kept off the lock: with a window of 5 s due after
 * every hand-off, the second hand-off still goes to the waiter at once (it
 * would otherwise wait out its 2 s). */
static void test_a_queue_alone_is_never_kept_off_the_lock(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock_options o = yielding(1, 5000);
    lb_lock *h = lock_with("w:alone", &o), *a = lock_with("w:alone", &o),
            *b = lock_with("w:alone", &o);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job ja, jb;
    job_start(&ja, a, w, 2000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:alone}:queue") == 1);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&ja), LB_OK);
    job_start(&jb, b, w, 2000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:alone}:queue") == 1);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ja.c)), LB_OK);
    int rc = job_join(&jb);
    job_end(&ja);
    job_end(&jb);
    lb_lock_free(h);
    lb_lock_free(a);
    lb_lock_free(b);
    lb_waiter_free(w);
    assert_int_equal(rc, LB_OK);
}

/* A wait outside fair mode that stays refused notes itself in the fair state
 * beside a queue (which is how a poller that never finds the lock free is
 * seen at all), and writes nothing where no queue is. */
static void test_a_refused_outsider_notes_itself_only_beside_a_queue(void **state) {
    (void)state;
    lb_lock *plain = new_lock("w:plain", 0, 20, 20);
    lbt_cmd_ok(conn, "SET w:plain someone-else PX 30000");
    assert_int_equal(lb_lock_acquire(plain, lb_on_conn(conn), 300), LB_ETIMEDOUT);
    long long no_queue = lbt_int(conn, "EXISTS {w:plain}:fair");
    lbt_cmd_ok(conn, "DEL w:plain");

    lb_waiter *w = new_waiter();
    lb_lock *h = new_lock("w:outside", 1, 2, 100), *q = new_lock("w:outside", 1, 2000, 2000),
            *out = new_lock("w:outside", 0, 20, 20);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job jq;
    job_start(&jq, q, w, 30000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:outside}:queue") == 1);
    long long before = state_field("{w:outside}:fair", "~seen");
    assert_int_equal(lb_lock_acquire(out, lb_on_conn(conn), 300), LB_ETIMEDOUT);
    long long noted = state_field("{w:outside}:fair", "~seen");
    long long ttl = lbt_int(conn, "PTTL {w:outside}:fair");
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&jq), LB_OK);
    job_end(&jq);
    lb_lock_free(h);
    lb_lock_free(q);
    lb_lock_free(out);
    lb_lock_free(plain);
    lb_waiter_free(w);
    assert_int_equal(no_queue, 0);
    assert_int_equal(before, -1);
    assert_true(noted > 0);
    assert_true(ttl > 0);
}

/* A fair attempt that finds the lock held by a token no fair grant wrote (a
 * non-fair or legacy client's) notes an outsider; one that finds a fair
 * holder does not. */
static void test_a_fair_waiter_notes_a_holder_outside_the_queue(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock *h = new_lock("w:note", 1, 2, 100), *a = new_lock("w:note", 1, 2000, 2000),
            *b = new_lock("w:note", 1, 2000, 2000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job ja, jb;
    job_start(&ja, a, w, 30000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:note}:queue") == 1);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK); /* handed to a */
    assert_int_equal(job_join(&ja), LB_OK);
    /* a holds by a fair grant: b queueing behind it notes nobody. */
    job_start(&jb, b, w, 30000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:note}:queue") == 1 && stats_of(w).blocked == 1);
    long long quiet = state_field("{w:note}:fair", "~seen");
    /* A client outside fair mode takes the key as a's lease ends. */
    job_end(&ja);
    assert_int_equal(job_join(&jb), LB_OK);
    job_end(&jb);
    lbt_cmd_ok(conn, "SET w:note someone-else PX 30000");
    assert_int_equal(lb_lock_acquire_wait(a, lb_on_conn(conn), w, 50), LB_ETIMEDOUT);
    long long noted = state_field("{w:note}:fair", "~seen");
    lbt_cmd_ok(conn, "DEL w:note");
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(a);
    lb_lock_free(b);
    assert_int_equal(quiet, -1);
    assert_true(noted > 0);
}

/* A fair waiter that gives up leaves the queue at once (no lease to wait
 * out), and a try of a fair lock does not jump a queue. */
static void test_a_fair_waiter_that_times_out_leaves_the_queue(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock *h = new_lock("w:leave", 1, 2, 100), *b = new_lock("w:leave", 1, 2, 20);
    lb_lock *t = new_lock("w:leave", 1, 2, 100);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_acquire_wait(b, lb_on_conn(conn), w, 100), LB_ETIMEDOUT);
    assert_int_equal(lbt_int(conn, "EXISTS {w:leave}:queue"), 0);
    assert_false(lb_lock_info_of(b).held);

    /* Queued behind the holder, b2 is the one a free lock is kept for. */
    lb_lock *b2 = new_lock("w:leave", 1, 300, 300);
    job j;
    job_start(&j, b2, NULL, 5000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:leave}:queue") == 1);
    char tokens[1][33];
    assert_int_equal(queue_tokens("{w:leave}:queue", tokens, 1), 1);
    lbt_cmd_ok(conn, "DEL w:leave"); /* as a legacy release would: nothing handed */
    assert_int_equal(lb_lock_try_acquire(t, lb_on_conn(conn)), LB_EBUSY);
    const char *v = lbt_get(conn, "w:leave");
    assert_true(v[0] == '\0' || strcmp(v, tokens[0]) == 0);
    assert_int_equal(job_join(&j), LB_OK);
    assert_string_equal(lb_lock_info_of(b2).token, tokens[0]);
    job_end(&j);
    lb_lock_free(b2);
    assert_int_equal(lb_lock_try_acquire(t, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_release(t, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_ELOST);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(b);
    lb_lock_free(t);
}

/* A fair waiter treats a key without TTL (a legacy lock) as held for good and
 * a key of another type as an error; neither is ever written. */
static void test_fair_mode_never_touches_a_foreign_key(void **state) {
    (void)state;
    lb_lock *l = new_lock("w:foreign", 1, 2, 20);
    lbt_cmd_ok(conn, "SET w:foreign 1700000000000");
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(conn), NULL, 100), LB_ETIMEDOUT);
    assert_int_equal(lb_lock_info_of(l).holder_ttl_ms, -1);
    assert_string_equal(lbt_get(conn, "w:foreign"), "1700000000000");
    assert_int_equal(lbt_int(conn, "PTTL w:foreign"), -1);
    assert_int_equal(lbt_int(conn, "EXISTS {w:foreign}:queue"), 0);
    lbt_cmd_ok(conn, "DEL w:foreign");
    lbt_cmd_ok(conn, "HSET w:foreign f v");
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(conn)), LB_EWRONGTYPE);
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(conn), NULL, 100), LB_EWRONGTYPE);
    assert_int_equal(lbt_int(conn, "HLEN w:foreign"), 1);
    assert_int_equal(lbt_int(conn, "EXISTS {w:foreign}:queue"), 0);
    lbt_cmd_ok(conn, "DEL w:foreign");
    lb_lock_free(l);
}

/* Fencing numbers travel with a hand-off and keep growing. */
static void test_a_hand_off_carries_the_next_fencing_number(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fencing = 1;
    o.backoff_min_ms = o.backoff_max_ms = 2000;
    lb_lock *h = lock_with("w:fence", &o), *b = lock_with("w:fence", &o);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    int64_t first = lb_lock_info_of(h).fence;
    assert_true(first > 0);
    job j;
    job_start(&j, b, w, 20000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:fence}:queue") == 1 && stats_of(w).sleeps >= 2);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    assert_int_equal(lb_lock_info_of(b).fence, first + 1);
    assert_int_equal(stats_of(w).handoffs, 1);
    job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(b);
}

/* ---- Grant lists: fair waits on one connection ------------------------------ */

/* The client id's current command, from CLIENT LIST ("" when gone). */
static int blocked_in_blpop(long long id) {
    redisReply *r = redisCommand(conn, "CLIENT LIST ID %lld", id);
    assert_non_null(r);
    int yes = r->type == REDIS_REPLY_STRING && strstr(r->str, "cmd=blpop") != NULL;
    freeReplyObject(r);
    return yes;
}

static long long calls_of(const char *cmd) {
    redisReply *r = redisCommand(conn, "INFO commandstats");
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
static void start_blocked_on_list(job *j, lb_lock *q, int64_t wait_ms, const char *queue,
                                  long long n) {
    job_start(j, q, NULL, wait_ms);
    EVENTUALLY(lbt_int(conn, "ZCARD %s", queue) == n && blocked_in_blpop(j->client_id));
}

/* A fair wait without a waiter, on one connection, blocks on its own grant
 * list: the release pushes the grant there and the wait returns on it, with
 * the attempt that queued it and one BLPOP, and no message published. (With
 * a back-off of 5 s and a wait of 4 s it could learn of the hand-off no
 * other way before its deadline.) */
static void test_a_fair_wait_on_one_connection_is_handed_the_lock_on_its_grant_list(
    void **state) {
    (void)state;
    lb_lock *h = new_lock("w:list", 1, 2, 100), *q = new_lock("w:list", 1, 5000, 5000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job j;
    start_blocked_on_list(&j, q, 4000, "{w:list}:queue", 1);
    uint64_t before = lb_lock_info_of(q).commands;
    long long pubs = calls_of("publish");
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    assert_true(lb_lock_info_of(q).held);
    assert_string_equal(lbt_get(conn, "w:list"), lb_lock_info_of(q).token);
    /* The baton's SET NX, mark and BLPOP (nobody released during its
     * block), then the attempt that queued it and the BLPOP on its list. */
    assert_int_equal(before, 5);
    assert_int_equal(lb_lock_info_of(q).commands, 5);
    assert_int_equal(calls_of("publish"), pubs);
    job_end(&j);
    assert_int_equal(lbt_int(conn, "EXISTS {w:list}:queue"), 0);
    lb_lock_free(h);
    lb_lock_free(q);
}

static void hold_with_one_waiter(const char *k, const char *entry, int window);

/* A fair lock whose blocking waits block on the baton for `baton_ms`. */
static lb_lock *baton_lock(const char *key, int64_t baton_ms) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 5000;
    o.fair_baton_ms = baton_ms;
    return lock_with(key, &o);
}

/* With nobody queued, a release passes the lock down the baton list: the
 * waiter that blocked first gets it (a fresh token, written by the release)
 * with its SET NX, its mark and one BLPOP, and nothing queues. The last
 * waiter to block leaves its own mark behind: its release must not take it
 * for another waiter's, or it would pass the lock to nobody and the key
 * would stay held for a whole TTL. */
static void test_a_release_passes_the_baton_to_the_waiter_that_blocked_first(void **state) {
    (void)state;
    lbt_del_matching(conn, "*w:baton*");
    lb_lock *h = new_lock("w:baton", 1, 2, 100), *q[2];
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    char htoken[LB__TOKEN_CAP];
    snprintf(htoken, sizeof htoken, "%s", lb_lock_info_of(h).token);
    job j[2];
    for (int i = 0; i < 2; i++) {
        q[i] = baton_lock("w:baton", 20000);
        job_start(&j[i], q[i], NULL, 10000);
        EVENTUALLY(blocked_in_blpop(j[i].client_id));
    }
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j[0]), LB_OK);
    assert_string_equal(lbt_get(conn, "w:baton"), lb_lock_info_of(q[0]).token);
    assert_string_not_equal(lb_lock_info_of(q[0]).token, htoken);
    assert_int_equal(lb_lock_info_of(q[0]).commands, 3);
    assert_false(job_done(&j[1]));
    assert_int_equal(lb_lock_release(q[0], lb_on_conn(j[0].c)), LB_OK);
    assert_int_equal(job_join(&j[1]), LB_OK);
    assert_string_equal(lbt_get(conn, "w:baton"), lb_lock_info_of(q[1]).token);
    assert_int_equal(lb_lock_release(q[1], lb_on_conn(j[1].c)), LB_OK);
    /* Its own mark went with the key: h, taking the free key and releasing
     * at once, deletes it rather than pass it to nobody. */
    assert_int_equal(lbt_int(conn, "EXISTS w:baton {w:baton}:baton {w:baton}:queue {w:baton}:bwait"), 0);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lbt_int(conn, "EXISTS w:baton"), 0);
    for (int i = 0; i < 2; i++) {
        job_end(&j[i]);
        lb_lock_free(q[i]);
    }
    lbt_del_matching(conn, "*w:baton*");
    lb_lock_free(h);
}

/* Two waiters' marks: their tokens. */
#define MARK_C "cccccccccccccccccccccccccccccccc"
#define MARK_D "dddddddddddddddddddddddddddddddd"

/* The release script's choice, row by row: a queued waiter comes before a
 * waiter blocked on the baton; with nobody queued, a live mark other than
 * the caller's own gets the baton (a fresh token at the key with the
 * caller's TTL, the baton with its life as TTL); no mark, or the caller's
 * own, deletes the key (the caller's own mark goes in every branch: its wait
 * is over). A value that is no token is no mark. A baton list of another type, or one holding an
 * element already, never leaves the key to a baton nobody can pop first. */
static void test_a_release_chooses_between_the_queue_and_the_baton(void **state) {
    (void)state;
    static const struct {
        int queued;         /* bbbb waits in the queue */
        const char *mark;   /* the mark left, or NULL */
        const char *marked; /* the caller's own mark, "-": none */
        const char *list;   /* what lies at the baton list's name first */
        long long result;      /* -1: the grant, for the caller to push */
        const char *key_after; /* NULL: deleted; "fresh": the baton's token */
        int mark_after;        /* the mark is still there */
    } rows[] = {
        {1, MARK_C, "-", NULL, -1, "bbbb", 1},
        {1, MARK_C, MARK_C, NULL, -1, "bbbb", 0}, /* ours: it goes all the same */
        {0, MARK_C, "-", NULL, 2, "fresh", 1},
        {0, MARK_C, MARK_D, NULL, 2, "fresh", 1},
        {0, MARK_C, MARK_C, NULL, 1, NULL, 0}, /* our own: it goes with the key */
        {0, NULL, "-", NULL, 1, NULL, 0},
        {0, MARK_C, "-", "string", 1, NULL, 1},
        {0, "someone-elses", "-", NULL, 1, NULL, 1}, /* no token: no mark */
        {0, MARK_C, "-", "element", 2, "fresh", 1},
    };
    const char *fresh = "ffffffffffffffffffffffffffffffff";
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbt_del_matching(conn, "*w:pass*");
        if (rows[i].queued) hold_with_one_waiter("w:pass", "99999999999999 30000 *", 0);
        else lbt_cmd_ok(conn, "SET w:pass aaaa PX 30000");
        if (rows[i].mark) lbt_cmd_ok(conn, "SET {w:pass}:bwait %s PX 10000", rows[i].mark);
        if (rows[i].list && strcmp(rows[i].list, "string") == 0)
            lbt_cmd_ok(conn, "SET {w:pass}:baton alien PX 10000");
        if (rows[i].list && strcmp(rows[i].list, "element") == 0)
            assert_int_equal(lbt_int(conn, "RPUSH {w:pass}:baton stale"), 1);
        char args[200];
        snprintf(args, sizeof args, "aaaa 0 200 - %s %s 20000 100 {w:pass}:released", fresh,
                 rows[i].marked);
        redisReply *r = redisCommand(conn, "EVAL %s 6 w:pass {w:pass}:queue {w:pass}:fair "
                                           "{w:pass}:grant:aaaa {w:pass}:baton {w:pass}:bwait %s",
                                     lb__script_modern_fair_release.body, args);
        assert_non_null(r);
        if (rows[i].result == -1) {
            assert_int_equal(r->type, REDIS_REPLY_STRING);
            assert_memory_equal(r->str, "bbbb ", 5);
        } else {
            if (r->type != REDIS_REPLY_INTEGER) fail_msg("row %zu: %s", i, r->str ? r->str : "?");
            assert_int_equal(r->integer, rows[i].result);
        }
        freeReplyObject(r);
        assert_int_equal(lbt_int(conn, "EXISTS {w:pass}:bwait"), rows[i].mark_after);
        const char *want = rows[i].key_after;
        if (!want) {
            assert_int_equal(lbt_int(conn, "EXISTS w:pass"), 0);
        } else if (strcmp(want, "fresh") == 0) {
            assert_string_equal(lbt_get(conn, "w:pass"), fresh);
            long long ttl = lbt_int(conn, "PTTL w:pass");
            assert_true(ttl > 19000 && ttl <= 20000);
            assert_int_equal(lbt_int(conn, "LLEN {w:pass}:baton"), 1);
            redisReply *e = redisCommand(conn, "LINDEX {w:pass}:baton 0");
            assert_true(e && e->type == REDIS_REPLY_STRING);
            char elem[64];
            snprintf(elem, sizeof elem, "%s 20000 100", fresh);
            assert_string_equal(e->str, elem);
            freeReplyObject(e);
            long long life = lbt_int(conn, "PTTL {w:pass}:baton");
            assert_true(life > 0 && life <= 100);
        } else {
            assert_string_equal(lbt_get(conn, "w:pass"), want);
            assert_int_equal(lbt_int(conn, "EXISTS {w:pass}:baton"), 0);
        }
    }
    /* A baton's TTL past what a lockbridge client takes (10^12 ms) is
     * refused before anything is written: its receiver would refuse it
     * after popping it, and the key would keep a token nobody holds. */
    lbt_del_matching(conn, "*w:pass*");
    lbt_cmd_ok(conn, "SET w:pass aaaa PX 30000");
    lbt_cmd_ok(conn, "SET {w:pass}:bwait %s PX 10000", MARK_C);
    redisReply *r = redisCommand(conn, "EVAL %s 6 w:pass {w:pass}:queue {w:pass}:fair "
                                       "{w:pass}:grant:aaaa {w:pass}:baton {w:pass}:bwait %s",
                                 lb__script_modern_fair_release.body,
                                 "aaaa 0 200 - ffff - 2000000000000 100 {w:pass}:released");
    assert_true(r && r->type == REDIS_REPLY_ERROR);
    freeReplyObject(r);
    assert_string_equal(lbt_get(conn, "w:pass"), "aaaa");
    assert_int_equal(lbt_int(conn, "EXISTS {w:pass}:baton"), 0);
    lbt_del_matching(conn, "*w:pass*");
}

/* A release that passes the baton costs the server its script and five
 * commands in it: one MGET reads the key and the mark together, then
 * ZPOPMIN (the queue comes first), RPUSH and PEXPIRE of the baton, and the
 * SET of the fresh token. With the waiter's guarded mark (a script of its
 * own) and its BLPOP, a turn of a client that locks in a loop is 12 server
 * commands, its section's 2 included. (Reading the mark and the key with a
 * GET each made it 13.) */
static long long server_calls(void);

static void test_a_release_that_passes_the_baton_costs_six_commands(void **state) {
    (void)state;
    lbt_del_matching(conn, "*w:cheap*");
    lbt_cmd_ok(conn, "SET w:cheap aaaa PX 30000");
    lbt_cmd_ok(conn, "SET {w:cheap}:bwait %s PX 10000", MARK_C);
    const char *args = "aaaa 0 200 - ffffffffffffffffffffffffffffffff - 20000 100 "
                       "{w:cheap}:released";
    long long before = server_calls();
    redisReply *r = redisCommand(conn, "EVAL %s 6 w:cheap {w:cheap}:queue {w:cheap}:fair "
                                       "{w:cheap}:grant:aaaa {w:cheap}:baton {w:cheap}:bwait %s",
                                 lb__script_modern_fair_release.body, args);
    long long cost = server_calls() - before;
    assert_true(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    assert_int_equal(lbt_int(conn, "LLEN {w:cheap}:baton"), 1);
    if (cost > 6) fail_msg("the release ran %lld commands", cost);
    lbt_del_matching(conn, "*w:cheap*");
}

static int64_t frozen_mono_ns(void *ud) {
    (void)ud;
    return 1000000000000LL;
}

/* A client that locks in a loop: a wait begun right after its release
 * handed the lock on knows the key is held, and sends only its mark and its
 * BLPOP. (The lock's clock is frozen, so "right after" holds however slow
 * the machine.) */
static void test_a_wait_right_after_handing_the_lock_on_skips_its_set_nx(void **state) {
    (void)state;
    lbt_del_matching(conn, "*w:loop*");
    lb_clock frozen = {NULL, frozen_mono_ns, NULL, 0, NULL};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 5000;
    o.fair_baton_ms = 20000;
    o.clock = &frozen;
    lb_lock *a = lock_with("w:loop", &o), *b = lock_with("w:loop", &o);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    job jb, ja;
    job_start(&jb, b, NULL, 10000);
    EVENTUALLY(blocked_in_blpop(jb.client_id));
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK); /* the baton, to b */
    assert_int_equal(job_join(&jb), LB_OK);
    uint64_t before = lb_lock_info_of(a).commands;
    job_start(&ja, a, NULL, 10000);
    EVENTUALLY(blocked_in_blpop(ja.client_id));
    assert_int_equal(lb_lock_release(b, lb_on_conn(jb.c)), LB_OK); /* the baton, to a */
    assert_int_equal(job_join(&ja), LB_OK);
    assert_int_equal(lb_lock_info_of(a).commands - before, 2);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ja.c)), LB_OK);
    assert_int_equal(lbt_int(conn, "EXISTS w:loop {w:loop}:bwait"), 0);
    job_end(&ja);
    job_end(&jb);
    lb_lock_free(a);
    lb_lock_free(b);
    lbt_del_matching(conn, "*w:loop*");
}

/* A holder that got the lock by the baton and hands it to a queued waiter
 * leaves no mark behind: the waiter (queued without a mark, as a wait with
 * fair_baton_ms 0 does) releases into an empty queue, and a mark still
 * alive would make that release pass the lock to nobody, the key then held
 * by no client for the releaser's whole TTL. */
static void test_a_holder_by_baton_takes_its_mark_away_when_it_hands_to_the_queue(void **state) {
    (void)state;
    lbt_del_matching(conn, "*w:stale*");
    lb_lock *h = new_lock("w:stale", 1, 2, 100), *b = baton_lock("w:stale", 20000);
    lb_lock *q = baton_lock("w:stale", 0); /* no baton: it queues */
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job jb, jq;
    job_start(&jb, b, NULL, 10000);
    EVENTUALLY(blocked_in_blpop(jb.client_id));
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK); /* the baton, to b */
    assert_int_equal(job_join(&jb), LB_OK);
    start_blocked_on_list(&jq, q, 10000, "{w:stale}:queue", 1);
    assert_int_equal(lb_lock_release(b, lb_on_conn(jb.c)), LB_OK); /* to the queue, q */
    assert_int_equal(job_join(&jq), LB_OK);
    assert_string_equal(lbt_get(conn, "w:stale"), lb_lock_info_of(q).token);
    assert_int_equal(lbt_int(conn, "EXISTS {w:stale}:bwait"), 0);
    assert_int_equal(lb_lock_release(q, lb_on_conn(jq.c)), LB_OK);
    /* Released with nobody waiting: free, not held by a token nobody has. */
    assert_int_equal(lbt_int(conn, "EXISTS w:stale {w:stale}:baton"), 0);
    job_end(&jq);
    job_end(&jb);
    lb_lock_free(q);
    lb_lock_free(b);
    lb_lock_free(h);
    lbt_del_matching(conn, "*w:stale*");
}

/* The mark is written only over nothing or another mark: a value of another
 * kind at its name (another program's key, or a key of another type) stays
 * as it was, and a release does not take it for a waiter's mark. Before, the
 * mark's plain SET overwrote it: a lock held at that name lost its holder's
 * value, and a second client could take it. */
static void test_a_baton_wait_never_writes_its_mark_over_a_foreign_value(void **state) {
    (void)state;
    static const char *const spoilers[] = {"SET {w:clob}:bwait someone-elses PX 30000",
                                           "RPUSH {w:clob}:bwait element"};
    for (size_t i = 0; i < sizeof spoilers / sizeof spoilers[0]; i++) {
        lbt_del_matching(conn, "*w:clob*");
        lb_lock *h = new_lock("w:clob", 1, 2, 100), *q = baton_lock("w:clob", 2000);
        assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
        if (i == 0) lbt_cmd_ok(conn, spoilers[i]);
        else assert_int_equal(lbt_int(conn, spoilers[i]), 1);
        job j;
        job_start(&j, q, NULL, 10000);
        EVENTUALLY(blocked_in_blpop(j.client_id));
        if (i == 0) {
            assert_string_equal(lbt_get(conn, "{w:clob}:bwait"), "someone-elses");
        } else {
            redisReply *r = redisCommand(conn, "TYPE {w:clob}:bwait");
            assert_true(r && r->type == REDIS_REPLY_STATUS);
            assert_string_equal(r->str, "list");
            freeReplyObject(r);
        }
        /* No mark of a waiter: the release frees the key rather than pass
         * it down the baton list, and the wait gets it all the same. */
        assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
        assert_int_equal(lbt_int(conn, "EXISTS {w:clob}:baton"), 0);
        assert_int_equal(job_join(&j), LB_OK);
        assert_string_equal(lbt_get(conn, "w:clob"), lb_lock_info_of(q).token);
        job_end(&j);
        lb_lock_free(q);
        lb_lock_free(h);
    }
    lbt_del_matching(conn, "*w:clob*");
}

/* A clock that moves on 100 ms at each reading. */
static int64_t stepping_ns;
static int64_t stepping_mono_ns(void *ud) {
    (void)ud;
    return __atomic_add_fetch(&stepping_ns, 100000000LL, __ATOMIC_SEQ_CST);
}

/* A baton whose lease is over by the time its receiver reads it (here a
 * baton of 4 ms, read on a clock that has moved on 100 ms since the BLPOP's
 * send) is no acquisition: the receiver gives its token back and goes on
 * waiting, and the wait returns LB_OK only with a lease still to run. Before,
 * it returned LB_OK with its lease already over. */
static void test_a_baton_with_no_lease_left_is_no_acquisition(void **state) {
    (void)state;
    lbt_del_matching(conn, "*w:short*");
    lb_clock stepping = {NULL, stepping_mono_ns, NULL, 0, NULL};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.backoff_min_ms = 2;
    o.backoff_max_ms = 100;
    o.fair_baton_ms = 20000;
    o.clock = &stepping;
    lb_lock *q = lock_with("w:short", &o);
    lbt_cmd_ok(conn, "SET w:short aaaa PX 30000");
    job j;
    job_start(&j, q, NULL, 10000);
    EVENTUALLY(blocked_in_blpop(j.client_id));
    char args[160];
    snprintf(args, sizeof args, "aaaa 0 200 - ffffffffffffffffffffffffffffffff - 4 1 {w:short}:released");
    redisReply *r = redisCommand(conn, "EVAL %s 6 w:short {w:short}:queue {w:short}:fair "
                                       "{w:short}:grant:aaaa {w:short}:baton {w:short}:bwait %s",
                                 lb__script_modern_fair_release.body, args);
    assert_true(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    assert_int_equal(job_join(&j), LB_OK);
    lb_lock_info info = lb_lock_info_of(q);
    assert_true(info.held);
    assert_true(info.deadline_ns > stepping_mono_ns(NULL));
    assert_string_equal(lbt_get(conn, "w:short"), info.token);
    job_end(&j);
    lb_lock_free(q);
    lbt_del_matching(conn, "*w:short*");
}

/* A release by a lock whose TTL is under four baton lives (400 ms) passes no
 * baton, however many wait on the list: a baton that short (its life a
 * quarter of the TTL, down to 1 ms) could reach its receiver with no lease
 * left. The waiter gets the key with its own token once its block ends.
 * (The key is given a long TTL by hand, so that the holder's 399 ms do not
 * run out before its release.) */
static void test_a_release_with_a_ttl_under_four_baton_lives_passes_no_baton(void **state) {
    (void)state;
    lbt_del_matching(conn, "*w:brief*");
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.ttl_ms = 399;
    lb_lock *h = lock_with("w:brief", &o), *q = baton_lock("w:brief", 2000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    lbt_cmd_ok(conn, "PEXPIRE w:brief 30000");
    job j;
    job_start(&j, q, NULL, 10000);
    EVENTUALLY(blocked_in_blpop(j.client_id));
    char own[LB__TOKEN_CAP];
    snprintf(own, sizeof own, "%s", lbt_get(conn, "{w:brief}:bwait"));
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    assert_string_equal(lb_lock_info_of(q).token, own);
    job_end(&j);
    lb_lock_free(q);
    lb_lock_free(h);
    lbt_del_matching(conn, "*w:brief*");
}

/* A wait whose BLPOP on the baton ends early (here CLIENT UNBLOCK, as an
 * operator might send) takes its mark away before it queues: left for its
 * TTL (20 s here), a release in that time would pass the lock to nobody. A
 * wait with a TTL under 400 ms queues at once: a baton's life (up to
 * 100 ms) would take too much of its lease. */
static void test_a_wait_that_stops_blocking_early_takes_its_mark_away(void **state) {
    (void)state;
    lbt_del_matching(conn, "*w:unblock*");
    lb_lock *h = new_lock("w:unblock", 1, 2, 100), *q = baton_lock("w:unblock", 20000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job j;
    job_start(&j, q, NULL, 10000);
    EVENTUALLY(blocked_in_blpop(j.client_id));
    assert_int_equal(lbt_int(conn, "EXISTS {w:unblock}:bwait"), 1);
    assert_int_equal(lbt_int(conn, "CLIENT UNBLOCK %lld", j.client_id), 1);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:unblock}:queue") == 1);
    assert_int_equal(lbt_int(conn, "EXISTS {w:unblock}:bwait"), 0);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    job_end(&j);
    lb_lock_free(q);

    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.ttl_ms = 399;
    o.fair_baton_ms = 20000;
    o.fair_lease_ms = 60000; /* no lease refresh during the test */
    q = lock_with("w:unblock", &o);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job_start(&j, q, NULL, 10000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:unblock}:queue") == 1);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    /* The attempt that queued it and the BLPOP its grant ended: no SET NX,
     * no mark, no BLPOP on the baton. */
    assert_int_equal(lb_lock_info_of(q).commands, 2);
    job_end(&j);
    lb_lock_free(q);
    lb_lock_free(h);
    lbt_del_matching(conn, "*w:unblock*");
}

/* A baton "token ttl life" makes its token the lock's, with a lease of the
 * shorter of the two TTLs counted from the BLPOP's send less the baton's
 * life (the key's TTL began at the push, at most that life before the pop);
 * anything else is refused, the lock left as it was. */
static void test_a_baton_is_taken_only_as_the_release_wrote_it(void **state) {
    (void)state;
    static const struct {
        const char *element;
        int64_t own_ttl_ms;
        int rc;
        int64_t lease_ms; /* from the send */
    } rows[] = {
        {"0123456789abcdef0123456789abcdef 20000 100", 30000, LB_OK, 19900},
        {"0123456789abcdef0123456789abcdef 20000 100", 5000, LB_OK, 4900},
        {"0123456789abcdef0123456789abcdef 400 100", 30000, LB_OK, 300},
        {"0123456789abcdef0123456789abcdef 400 101", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef 20000 0", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef 0 100", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef 20000", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef 20000 100 7", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcde 20000 100", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdeg 20000 100", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef 2e4 100", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef -20000 100", 30000, LB_EPROTO, 0},
        {"", 30000, LB_EPROTO, 0},
    };
    const int64_t sent = 1000000000000LL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lb_lock_options o;
        lb_lock_options_init(&o);
        o.fair = 1;
        o.ttl_ms = rows[i].own_ttl_ms;
        lb_lock *l = lock_with("w:take", &o);
        assert_int_equal(lb__fair_begin_wait(l), LB_OK);
        char before[LB__TOKEN_CAP];
        snprintf(before, sizeof before, "%s", lb_lock_info_of(l).token);
        int rc = lb__fair_take_baton(l, rows[i].element, strlen(rows[i].element), sent);
        if (rc != rows[i].rc) fail_msg("row %zu: %s", i, lb_err_name(rc));
        lb_lock_info info = lb_lock_info_of(l);
        if (rc == LB_OK) {
            assert_true(info.held);
            assert_memory_equal(info.token, rows[i].element, LB_TOKEN_LEN);
            assert_int_equal(info.deadline_ns, sent + rows[i].lease_ms * 1000000);
        } else {
            assert_false(info.held);
            assert_string_equal(info.token, before);
        }
        lb_lock_free(l);
    }
}

/* Every key a fair lock writes beside its own lapses on its own: after a
 * hand-off and the last release, each one left has a TTL. (The release that
 * granted the lock deleted the grantee's entry from the state hash first,
 * which emptied it, and wrote the hand-off count into a new hash with no TTL:
 * every lock name contended once kept one for ever.) */
static void test_no_key_a_fair_lock_writes_is_left_without_a_ttl(void **state) {
    (void)state;
    lb_lock *h = new_lock("w:tidy", 1, 2, 100), *q = new_lock("w:tidy", 1, 5000, 5000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job j;
    start_blocked_on_list(&j, q, 4000, "{w:tidy}:queue", 1);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    assert_int_equal(lb_lock_release(q, lb_on_conn(j.c)), LB_OK);
    job_end(&j);
    redisReply *r = redisCommand(conn, "KEYS *w:tidy*");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_true(r->elements >= 1); /* the state hash, which notes the last holder */
    for (size_t i = 0; i < r->elements; i++) {
        long long ttl = lbt_int(conn, "PTTL %s", r->element[i]->str);
        if (ttl <= 0) fail_msg("%s has no TTL (%lld)", r->element[i]->str, ttl);
    }
    freeReplyObject(r);
    lb_lock_free(h);
    lb_lock_free(q);
}

/* Every command the server has run (INFO commandstats, script internals
 * included), less the INFO calls that read them. */
static long long server_calls(void) {
    redisReply *r = redisCommand(conn, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    long long n = 0;
    for (const char *at = strstr(r->str, ":calls="); at; at = strstr(at + 1, ":calls="))
        n += strtoll(at + 7, NULL, 10);
    freeReplyObject(r);
    return n - calls_of("info");
}

/* A wait attempt of `token` on fair lock `k` (TTL 30 s, lease 3 s, blocking
 * on its grant list), run as the library runs it; returns the reply. */
/* A wait attempt of `token` on `k` as a grant-list waiter with a lease of
 * `lease` ms. */
static redisReply *fair_wait_attempt_leased(const char *k, const char *token, const char *lease) {
    char arg[128];
    snprintf(arg, sizeof arg, "wait %s 30000 %s *", token, lease);
    redisReply *r = redisCommand(conn, "EVAL %s 3 %s {%s}:queue {%s}:fair %s",
                                 lb__script_modern_fair_acquire.body, k, k, k, arg);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_ARRAY) fail_msg("wait attempt: %s", r->str ? r->str : "?");
    return r;
}

static redisReply *fair_wait_attempt(const char *k, const char *token) {
    return fair_wait_attempt_leased(k, token, "3000");
}

/* Tokens as a lockbridge client draws them (a release checks the grants it
 * pushes itself). */
#define CCCC "cccccccccccccccccccccccccccccccc"
#define DDDD "dddddddddddddddddddddddddddddddd"

/* Fair lock `k`: h took it, q queued on its grant list and was handed it
 * (the release noted q as the holder); q now holds, the queue is empty. */
static void hand_to_second(const char *k, lb_lock **h, lb_lock **q) {
    char queue[64];
    snprintf(queue, sizeof queue, "{%s}:queue", k);
    *h = new_lock(k, 1, 2, 100);
    *q = new_lock(k, 1, 5000, 5000);
    assert_int_equal(lb_lock_try_acquire(*h, lb_on_conn(conn)), LB_OK);
    job j;
    start_blocked_on_list(&j, *q, 4000, queue, 1);
    assert_int_equal(lb_lock_release(*h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    redisFree(j.c); /* q goes on holding */
    assert_string_equal(lbt_get(conn, k), lb_lock_info_of(*q).token);
}

/* A waiter that keeps its place beside a fair holder costs the server the
 * attempt's script and six commands in it (TIME, GET, one read of the
 * state, ZADD, HSET, and a PEXPIRE NX that gives a queue formed anew its
 * TTL): the holder's expiry is the one its grant noted, and the queue's
 * TTLs, kept for twice a lease at a time, are not read or written again
 * while they have a lease or more to run. Its wait's hint stays within what
 * the key has left. (Each wait used to read the key's TTL and both TTLs and
 * write them back: nine or ten commands.) */
static void test_a_waiter_keeping_its_place_beside_a_fair_holder_costs_seven_commands(void **state) {
    (void)state;
    lb_lock *h, *q;
    hand_to_second("w:cost", &h, &q);
    freeReplyObject(fair_wait_attempt("w:cost", CCCC)); /* queued anew: TTLs set */
    /* What the key has left is read before the attempt: the hint, taken
     * later, may be no more (read after, a busy host's delay between the
     * two made a right hint look too long). */
    long long left = lbt_int(conn, "PTTL w:cost");
    long long before = server_calls();
    redisReply *r = fair_wait_attempt("w:cost", CCCC);
    long long cost = server_calls() - before;
    assert_int_equal(r->elements, 4);
    assert_int_equal(r->element[0]->integer, 0);
    long long hint = r->element[1]->integer;
    if (hint <= 0 || hint > left + 1) fail_msg("hint %lld, the key had %lld ms left", hint, left);
    freeReplyObject(r);
    if (cost > 7) fail_msg("the attempt ran %lld commands", cost);
    assert_true(lbt_int(conn, "PTTL {w:cost}:queue") > 3000);
    assert_true(lbt_int(conn, "PTTL {w:cost}:fair") > 3000);
    lbt_del_matching(conn, "*w:cost*");
    lb_lock_free(h);
    lb_lock_free(q);
}

/* A queue formed again (after a hand-off emptied it, or after another
 * program deleted it while the state still ran for long) lapses on its own:
 * the wait that forms it gives it a TTL, whatever the state says of the
 * queue's last TTL. */
static void test_a_queue_formed_again_is_given_a_ttl(void **state) {
    (void)state;
    static const char *const rows[] = {"emptied by a hand-off", "deleted by another program"};
    for (int i = 0; i < 2; i++) {
        lb_lock *h, *q;
        hand_to_second("w:again", &h, &q);
        freeReplyObject(fair_wait_attempt("w:again", CCCC));
        if (i == 0) {
            /* q hands the lock on to cccc: the queue empties again. */
            assert_int_equal(lb_lock_release(q, lb_on_conn(conn)), LB_OK);
            assert_string_equal(lbt_get(conn, "w:again"), CCCC);
        } else {
            lbt_cmd_ok(conn, "DEL {w:again}:queue");
        }
        freeReplyObject(fair_wait_attempt("w:again", DDDD));
        long long ttl = lbt_int(conn, "PTTL {w:again}:queue");
        if (ttl <= 0) fail_msg("%s: the queue formed again has PTTL %lld", rows[i], ttl);
        lbt_del_matching(conn, "*w:again*");
        lb_lock_free(h);
        lb_lock_free(q);
    }
}

/* Another program deletes the queue beside waiters with different leases.
 * The wait that forms it again gives it what the state notes the TTLs have
 * left (~until), which covers every live waiter's lease: twice its own,
 * shorter lease let the queue lapse under a live waiter with a longer one
 * (cccc here), whose refreshes left the queue's TTL alone, and the next
 * release deleted the key instead of handing it over. */
static void test_a_queue_formed_again_outlives_every_live_lease(void **state) {
    (void)state;
    lb_lock *h, *q;
    hand_to_second("w:lease", &h, &q);
    freeReplyObject(fair_wait_attempt_leased("w:lease", CCCC, "10000"));
    lbt_cmd_ok(conn, "DEL {w:lease}:queue");
    freeReplyObject(fair_wait_attempt_leased("w:lease", DDDD, "1000"));
    freeReplyObject(fair_wait_attempt_leased("w:lease", CCCC, "10000"));
    long long ttl = lbt_int(conn, "PTTL {w:lease}:queue");
    if (ttl < 9000)
        fail_msg("the queue formed again lapses in %lld ms, within cccc's lease of 10000 ms", ttl);
    lbt_del_matching(conn, "*w:lease*");
    lb_lock_free(h);
    lb_lock_free(q);
}

/* The holder's expiry as the state notes it (~hexp) is another program's to
 * spoil: a value no release writes (no decimal integer, or further off than
 * any fair TTL) is not taken as the wait's hint; the key's own TTL is. (As
 * it was taken, 1e300 or inf came back as -2^63 and a far date past 10^12
 * ms: every fair wait on the key failed with LB_EPROTO.) */
static void test_a_wait_does_not_trust_a_spoiled_holder_expiry(void **state) {
    (void)state;
    static const char *const rows[] = {"1e300", "inf", "99999999999999999", "1e14",
                                       "-5",    "12abc", "",                 "0x7fffffffffff"};
    lb_lock *h, *q;
    hand_to_second("w:hexp", &h, &q);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbt_cmd_ok(conn, "HSET {w:hexp}:fair ~hexp %s", rows[i]);
        redisReply *r = fair_wait_attempt("w:hexp", CCCC);
        long long ok = r->element[0]->integer, hint = r->element[1]->integer;
        freeReplyObject(r);
        if (ok != 0 || hint < 0 || hint > 30000)
            fail_msg("~hexp '%s': reply %lld, hint %lld ms (the key has %lld)", rows[i], ok, hint,
                     lbt_int(conn, "PTTL w:hexp"));
    }
    lbt_del_matching(conn, "*w:hexp*");
    lb_lock_free(h);
    lb_lock_free(q);
}

static void hold_with_one_waiter(const char *k, const char *entry, int window);

/* A grant names the next holder's fencing number in digits however large it
 * is (below 2^53, past which the counter is refused): Lua wrote 10^14 and
 * above as "1e+14", which no waiter reads, and every hand-off then waited
 * for the waiter's next attempt. */
static void test_a_grant_writes_a_large_fencing_number_in_digits(void **state) {
    (void)state;
    lbt_del_matching(conn, "*w:big*");
    hold_with_one_waiter("w:big", "99999999999999 30000 *", 0);
    lbt_cmd_ok(conn, "SET {w:big}:fence 99999999999999");
    redisReply *r = redisCommand(conn, "EVAL %s 5 w:big {w:big}:queue {w:big}:fair "
                                       "{w:big}:grant:aaaa {w:big}:fence %s",
                                 lb__script_modern_fair_release.body, "aaaa 16 200 - w:big:ch");
    assert_non_null(r);
    if (r->type != REDIS_REPLY_STRING) fail_msg("release: %s", r->str ? r->str : "?");
    assert_string_equal(r->str, "bbbb 1 100000000000000 -");
    freeReplyObject(r);
    lbt_del_matching(conn, "*w:big*");
}

/* The script that pushes a grant refuses arguments it cannot read before it
 * writes anything: Redis keeps what a failing script wrote, and a grant list
 * pushed without its TTL would never lapse. (The key holds the grantee's
 * token with no TTL, so a grant's list would take the TTL given.) */
static void test_the_grant_push_refuses_bad_arguments_before_it_writes(void **state) {
    (void)state;
    static const struct { const char *grant, *ms; } rows[] = {
        {"nothex 1 0 0 -", "1000"}, /* no grantee */
        {"abcd 0 0 -", "soon"},     /* a window's wake-up, no TTL */
        {"abcd 1 0 0 -", "soon"},   /* a grant, no TTL */
        {"abcd 0 0 -", "0"},        /* a TTL that deletes the wake-up at once */
        {"abcd 0 0 -", "100000000000000000000"}, /* past 2^53: a float to PEXPIRE */
    };
    lbt_cmd_ok(conn, "SET w:push abcd");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        redisReply *r = redisCommand(conn, "EVAL %s 2 w:push {w:push}:grant:abcd %s %s",
                                     lb__script_modern_fair_push.body, rows[i].grant, rows[i].ms);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_ERROR) fail_msg("row %zu: no error", i);
        freeReplyObject(r);
        assert_int_equal(lbt_int(conn, "EXISTS {w:push}:grant:abcd"), 0);
    }
    lbt_cmd_ok(conn, "DEL w:push");
}

/* Lock `k` held by aaaa with bbbb queued behind it (lease far off, TTL
 * `entry`'s), its queue and state given TTLs; `window`: an outsider seen and
 * a hand-off made, so that the release's window is due. */
static void hold_with_one_waiter(const char *k, const char *entry, int window) {
    lbt_cmd_ok(conn, "SET %s aaaa PX 30000", k);
    lbt_cmd_ok(conn, "ZADD {%s}:queue 1 bbbb", k);
    lbt_cmd_ok(conn, "HSET {%s}:fair bbbb %s", k, entry);
    if (window) lbt_cmd_ok(conn, "HSET {%s}:fair ~streak 1 ~seen 1", k);
    lbt_cmd_ok(conn, "PEXPIRE {%s}:queue 60000", k);
    lbt_cmd_ok(conn, "PEXPIRE {%s}:fair 60000", k);
}

/* The fair scripts refuse numbers no lockbridge client sends (a TTL or lease
 * of 0, with a leading zero, which Redis reads as no integer, or past 10^13
 * ms, which Lua would hand to SET PX or PEXPIRE as a float) before their
 * first write; a queued entry with such a TTL counts as lapsed. Before, a fenced attempt with TTL 0 spent a fencing
 * number and then failed, a wait queued a TTL that every release then
 * failed on after popping it (the lock kept, the waiter's place lost), a
 * lease of 0 deleted the queue and state, a lease past the bound failed after
 * queueing, and a release took a window length it could not use (a window
 * that never falls due) without a word. */
static void test_the_fair_scripts_refuse_numbers_they_cannot_use_before_they_write(void **state) {
    (void)state;
    static const char *const attempts[] = {
        "try cccc 0 3000",
        "try cccc 030000 3000", /* Redis reads no integer with a leading zero */
        "wait cccc 030000 3000",
        "wait cccc 100000000000000000000 3000",
        "wait cccc 30000 0",
        "wait cccc 30000 100000000000000000000",
    };
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) {
        lbt_del_matching(conn, "*w:num*");
        lbt_cmd_ok(conn, "SET {w:num}:fence 5");
        if (strncmp(attempts[i], "wait", 4) == 0) lbt_cmd_ok(conn, "SET w:num aaaa PX 30000");
        redisReply *r = redisCommand(conn, "EVAL %s 4 w:num {w:num}:queue {w:num}:fair "
                                           "{w:num}:fence %s",
                                     lb__script_modern_fair_acquire.body, attempts[i]);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_ERROR) fail_msg("attempt %zu: no error", i);
        freeReplyObject(r);
        assert_string_equal(lbt_get(conn, "{w:num}:fence"), "5");
        assert_int_equal(lbt_int(conn, "EXISTS {w:num}:queue {w:num}:fair"), 0);
        if (attempts[i][0] == 't') assert_int_equal(lbt_int(conn, "EXISTS w:num"), 0);
    }
    static const struct {
        const char *args, *entry; /* the release's arguments; bbbb's queue entry */
        int error;                /* 1: refused, nothing changed; 0: released */
    } releases[] = {
        {"aaaa 1 100000000000000000000 - {w:num}:released", "99999999999999 30000 *", 1},
        {"aaaa 0 200 - {w:num}:released", "99999999999999 100000000000000000000 *", 0},
        {"aaaa 0 200 - {w:num}:released", "99999999999999 030000 *", 0},
    };
    for (size_t i = 0; i < sizeof releases / sizeof releases[0]; i++) {
        lbt_del_matching(conn, "*w:num*");
        hold_with_one_waiter("w:num", releases[i].entry, 1);
        redisReply *r = redisCommand(conn, "EVAL %s 4 w:num {w:num}:queue {w:num}:fair "
                                           "{w:num}:grant:aaaa %s",
                                     lb__script_modern_fair_release.body, releases[i].args);
        assert_non_null(r);
        if (releases[i].error) {
            if (r->type != REDIS_REPLY_ERROR) fail_msg("release %zu: no error", i);
            assert_string_equal(lbt_get(conn, "w:num"), "aaaa");
            assert_int_equal(lbt_int(conn, "ZCARD {w:num}:queue"), 1);
            assert_true(lbt_int(conn, "PTTL {w:num}:queue") > 0);
        } else {
            if (r->type != REDIS_REPLY_INTEGER) fail_msg("release %zu: %s", i, r->str ? r->str : "?");
            assert_int_equal(r->integer, 1);
            assert_int_equal(lbt_int(conn, "EXISTS w:num"), 0);
        }
        freeReplyObject(r);
    }
    lbt_del_matching(conn, "*w:num*");
}

/* A value of another type at the successor's grant list name (no lockbridge
 * client writes one) refuses the release's push. The hand-off stands (the
 * grantee's next attempt, once its BLPOP ends empty or is refused, finds the
 * lock its own), and a window opens as it would, the head kept in a queue
 * that still lapses. Before, the release failed after popping the
 * head: the head was lost, or put back into a queue with no TTL. */
static void test_a_grant_list_of_another_type_does_not_stop_a_release(void **state) {
    (void)state;
    static const struct {
        const char *args; /* the release's arguments */
        int window;       /* an outsider seen and a hand-off made: a window is due */
        long long reply;
        const char *key_after;     /* NULL: deleted */
        long long queued_after;
    } rows[] = {
        {"aaaa 0 200 bbbb {w:alien}:released", 0, 2, "bbbb", 0},
        {"aaaa 1 200 bbbb {w:alien}:released", 1, 1, NULL, 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbt_del_matching(conn, "*w:alien*");
        hold_with_one_waiter("w:alien", "99999999999999 30000 *", rows[i].window);
        lbt_cmd_ok(conn, "SET {w:alien}:grant:bbbb alien");
        redisReply *r = redisCommand(conn, "EVAL %s 4 w:alien {w:alien}:queue {w:alien}:fair "
                                           "{w:alien}:grant:bbbb %s",
                                     lb__script_modern_fair_release.body, rows[i].args);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_INTEGER) fail_msg("row %zu: %s", i, r->str ? r->str : "?");
        assert_int_equal(r->integer, rows[i].reply);
        freeReplyObject(r);
        if (rows[i].key_after) assert_string_equal(lbt_get(conn, "w:alien"), rows[i].key_after);
        else assert_int_equal(lbt_int(conn, "EXISTS w:alien"), 0);
        assert_int_equal(lbt_int(conn, "ZCARD {w:alien}:queue"), rows[i].queued_after);
        if (rows[i].queued_after) assert_true(lbt_int(conn, "PTTL {w:alien}:queue") > 0);
        assert_string_equal(lbt_get(conn, "{w:alien}:grant:bbbb"), "alien");
    }
    lbt_del_matching(conn, "*w:alien*");
}

/* A value of another type at the queue's or the state's name (no lockbridge
 * client writes one) leaves no fair hand-off possible, but the holder still
 * releases: the lock is deleted as a plain release would delete it, and the
 * foreign value is left alone. A grantee that finds the lock handed to it
 * holds it, whatever it could not tidy. Before, the release failed (for a
 * state of another type, after popping the head) with the lock kept until
 * its TTL, and the grantee's attempt failed with the key holding its token. */
static void test_a_queue_or_state_of_another_type_does_not_stop_a_release(void **state) {
    (void)state;
    static const struct {
        const char *alien; /* the companion that holds a string */
        int queued;        /* a waiter queued (with a readable state) */
    } rows[] = {
        {"{w:alien}:fair", 1},
        {"{w:alien}:queue", 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbt_del_matching(conn, "*w:alien*");
        lbt_cmd_ok(conn, "SET w:alien aaaa PX 30000");
        if (rows[i].queued) lbt_cmd_ok(conn, "ZADD {w:alien}:queue 1 bbbb");
        lbt_cmd_ok(conn, "SET %s alien", rows[i].alien);
        redisReply *r = redisCommand(conn, "EVAL %s 4 w:alien {w:alien}:queue {w:alien}:fair "
                                           "{w:alien}:grant:bbbb %s",
                                     lb__script_modern_fair_release.body,
                                     "aaaa 16 200 bbbb {w:alien}:released");
        assert_non_null(r);
        if (r->type != REDIS_REPLY_INTEGER) fail_msg("row %zu: %s", i, r->str ? r->str : "?");
        assert_int_equal(r->integer, 1);
        freeReplyObject(r);
        assert_int_equal(lbt_int(conn, "EXISTS w:alien"), 0);
        assert_string_equal(lbt_get(conn, rows[i].alien), "alien");
        assert_int_equal(lbt_int(conn, "EXISTS {w:alien}:grant:bbbb"), 0);

        /* Handed the lock, bbbb's attempt finds it its own. */
        lbt_cmd_ok(conn, "SET w:alien bbbb PX 30000");
        r = redisCommand(conn, "EVAL %s 3 w:alien {w:alien}:queue {w:alien}:fair %s",
                         lb__script_modern_fair_acquire.body, "wait bbbb 30000 3000 *");
        assert_non_null(r);
        if (r->type != REDIS_REPLY_ARRAY) fail_msg("row %zu: %s", i, r->str ? r->str : "?");
        assert_true(r->elements >= 1 && r->element[0]->type == REDIS_REPLY_INTEGER);
        assert_int_equal(r->element[0]->integer, 1);
        freeReplyObject(r);
        assert_string_equal(lbt_get(conn, rows[i].alien), "alien");
    }
    lbt_del_matching(conn, "*w:alien*");
}

/* End to end: a program writes a string over a fair lock's state while it
 * is held. The holder's release still frees the lock; fair attempts then fail
 * with WRONGTYPE, a clear error that writes nothing, until the string goes. */
static void test_a_fair_lock_beside_a_foreign_state_releases_and_then_refuses_clearly(void **state) {
    (void)state;
    lb_lock *a = new_lock("w:foreign", 1, 2, 100), *b = new_lock("w:foreign", 1, 2, 100);
    lbt_del_matching(conn, "*w:foreign*");
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    lbt_cmd_ok(conn, "SET {w:foreign}:fair alien");
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lbt_int(conn, "EXISTS w:foreign"), 0);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(conn)), LB_EWRONGTYPE);
    assert_int_equal(lbt_int(conn, "EXISTS w:foreign {w:foreign}:queue"), 0);
    /* A blocking wait on one connection takes a free key with a plain SET NX
     * first, which reads no state; its release deletes the key as a plain
     * one does. Held, a wait on a key queues, and the state refuses it. */
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(conn), 200), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lbt_int(conn, "EXISTS w:foreign"), 0);
    lbt_cmd_ok(conn, "SET w:foreign someone PX 30000");
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(conn), 200), LB_EWRONGTYPE);
    lbt_cmd_ok(conn, "DEL w:foreign");
    assert_int_equal(lbt_int(conn, "EXISTS {w:foreign}:queue"), 0);
    assert_string_equal(lbt_get(conn, "{w:foreign}:fair"), "alien");
    lbt_cmd_ok(conn, "DEL {w:foreign}:fair");
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(conn)), LB_OK);
    lbt_del_matching(conn, "*w:foreign*");
    lb_lock_free(a);
    lb_lock_free(b);
}

/* End to end: the successor's grant list holds a string by the time its
 * predecessor releases; the hand-off still reaches it, through the attempt
 * after its BLPOP slice ends empty. Its slices last a third of a 6 s lease,
 * so the string is not there when it blocks again. */
static void test_a_waiter_whose_grant_list_is_spoiled_still_gets_its_hand_off(void **state) {
    (void)state;
    lb_lock *h = new_lock("w:spoil", 1, 2, 100), *q[2];
    job j[2];
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    for (int i = 0; i < 2; i++) {
        q[i] = new_lock("w:spoil", 1, 3000, 3000);
        start_blocked_on_list(&j[i], q[i], 20000, "{w:spoil}:queue", i + 1);
    }
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j[0]), LB_OK); /* q[0] knows q[1] queued behind it */
    redisReply *r = redisCommand(conn, "ZRANGE {w:spoil}:queue 0 0");
    assert_true(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    char succ[LB_TOKEN_LEN + 1];
    snprintf(succ, sizeof succ, "%s", r->element[0]->str);
    freeReplyObject(r);
    lbt_cmd_ok(conn, "SET {w:spoil}:grant:%s alien", succ);
    assert_int_equal(lb_lock_release(q[0], lb_on_conn(j[0].c)), LB_OK);
    assert_int_equal(job_join(&j[1]), LB_OK);
    assert_string_equal(lbt_get(conn, "w:spoil"), succ);
    assert_int_equal(lb_lock_release(q[1], lb_on_conn(j[1].c)), LB_OK);
    for (int i = 0; i < 2; i++) {
        job_end(&j[i]);
        lb_lock_free(q[i]);
    }
    lbt_del_matching(conn, "*w:spoil*");
    lb_lock_free(h);
}

/* Waiters on grant lists are served in arrival order, and a holder that was
 * granted the lock knows who queued behind it: its release pushes the next
 * grant inside the script (one command). The first release, by a holder that
 * took a free lock, learns the head from the script and pushes the grant
 * itself (LPUSH, PEXPIRE). */
static void test_grant_list_waiters_are_served_in_order_and_name_their_successor(void **state) {
    (void)state;
    enum { N = 3 };
    lb_lock *h = new_lock("w:order", 1, 2, 100), *q[N];
    job j[N];
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    for (int i = 0; i < N; i++) {
        q[i] = new_lock("w:order", 1, 2000, 2000);
        start_blocked_on_list(&j[i], q[i], 20000, "{w:order}:queue", i + 1);
    }
    uint64_t c0 = lb_lock_info_of(h).commands;
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    uint64_t first_release = lb_lock_info_of(h).commands - c0;
    uint64_t later_release[N - 1];
    for (int i = 0; i < N; i++) {
        assert_int_equal(job_join(&j[i]), LB_OK);
        assert_string_equal(lbt_get(conn, "w:order"), lb_lock_info_of(q[i]).token);
        for (int k = i + 1; k < N; k++) assert_false(job_done(&j[k]));
        uint64_t c = lb_lock_info_of(q[i]).commands;
        assert_int_equal(lb_lock_release(q[i], lb_on_conn(j[i].c)), LB_OK);
        if (i < N - 1) later_release[i] = lb_lock_info_of(q[i]).commands - c;
        job_end(&j[i]);
        lb_lock_free(q[i]);
    }
    /* h took the lock and named no successor: its release pushes the grant
     * (one script with the list's TTL); each later one names it. */
    assert_int_equal(first_release, 2);
    for (int i = 0; i < N - 1; i++) assert_int_equal(later_release[i], 1);
    assert_int_equal(lbt_int(conn, "EXISTS w:order"), 0);
    lb_lock_free(h);
}

/* A connection with a read timeout (redisSetTimeout) keeps working through a
 * long fair wait: with 400 ms, its blocks are cut to 100 ms (half the timeout
 * less the 100 ms by which Redis may end a BLPOP late); with 100 ms, too short
 * to block in, the wait polls. Each wait ends as a timeout, out of the queue,
 * the connection still usable; then it is handed the lock. */
static void test_a_grant_list_wait_stays_within_the_connections_read_timeout(void **state) {
    (void)state;
    static const struct { long usec; int blocks; } cases[] = {{400000, 1}, {100000, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_lock *h = new_lock("w:rcv", 1, 2, 100), *q = new_lock("w:rcv", 1, 2000, 2000);
        assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
        redisContext *c = lbt_redis_connect(&server);
        assert_non_null(c);
        checked(c);
        struct timeval tv = {0, cases[i].usec};
        assert_int_equal(redisSetTimeout(c, tv), REDIS_OK);
        long long blpops = calls_of("blpop");
        assert_int_equal(lb_lock_acquire(q, lb_on_conn(c), 700), LB_ETIMEDOUT);
        assert_int_equal(c->err, 0);
        long long blocked = calls_of("blpop") - blpops;
        if (cases[i].blocks) assert_true(blocked >= 3);
        else assert_int_equal(blocked, 0);
        assert_int_equal(lbt_int(conn, "EXISTS {w:rcv}:queue"), 0);
        assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
        assert_int_equal(lb_lock_acquire(q, lb_on_conn(c), 700), LB_OK);
        assert_int_equal(lb_lock_release(q, lb_on_conn(c)), LB_OK);
        redisFree(c);
        lb_lock_free(h);
        lb_lock_free(q);
    }
}

/* A holder outside the queue hands nothing off, and its release publishes on
 * a channel a grant-list wait does not hear: while such a holder holds, the
 * wait polls (here every 20 ms) rather than blocking for its refresh (20 s
 * with a lease of 60 s), so it takes the lock soon after that holder lets go,
 * not at the end of its 10 s wait. */
static void test_a_grant_list_wait_polls_while_a_client_outside_the_queue_holds(void **state) {
    (void)state;
    lb_lock *out = new_lock("w:foreign", 0, 20, 20);
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fair_lease_ms = 60000;
    o.backoff_min_ms = o.backoff_max_ms = 20;
    lb_lock *q = lock_with("w:foreign", &o);
    assert_int_equal(lb_lock_try_acquire(out, lb_on_conn(conn)), LB_OK);
    job j;
    job_start(&j, q, NULL, 10000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:foreign}:queue") == 1);
    lbt_sleep_ms(100);
    int64_t released = lbt_mono_ms();
    assert_int_equal(lb_lock_release(out, lb_on_conn(conn)), LB_OK);
    assert_int_equal(job_join(&j), LB_OK);
    int64_t took = lbt_mono_ms() - released;
    job_end(&j);
    lb_lock_free(out);
    lb_lock_free(q);
    assert_true(took < 5000);
}

/* A release that opens a window for an outsider wakes the head blocked on
 * its grant list even when it did not name that list (it took the lock free:
 * no grant told it its successor): the script returns the wake-up and the
 * releaser pushes it, so the head attempts at the window's end (200 ms), not
 * at its lease refresh (10 s here). */
static void test_a_window_wakes_a_grant_list_head_the_release_did_not_name(void **state) {
    (void)state;
    lb_lock_options o = yielding(1, 200);
    o.fair_lease_ms = 30000;
    lb_lock *h = lock_with("w:window", &o), *q = lock_with("w:window", &o),
            *t = lock_with("w:window", &o);
    /* A try refused (by a plain SET) is an outsider seen: the queue's state
     * begins; h then takes the free lock as a fair holder the state notes,
     * so q, queued behind it, blocks on its list rather than polling. */
    lbt_cmd_ok(conn, "SET w:window someone PX 30000");
    assert_int_equal(lb_lock_try_acquire(t, lb_on_conn(conn)), LB_EBUSY);
    lbt_cmd_ok(conn, "DEL w:window");
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job j;
    start_blocked_on_list(&j, q, 20000, "{w:window}:queue", 1);
    /* A hand-off streak, as if one had gone before: the release is due to yield. */
    lbt_cmd_ok(conn, "HSET {w:window}:fair ~streak 1");
    int64_t released = lbt_mono_ms();
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_true(lbt_int(conn, "HEXISTS {w:window}:fair ~open") == 1); /* the window opened */
    assert_int_equal(job_join(&j), LB_OK);
    int64_t took = lbt_mono_ms() - released;
    assert_true(lb_lock_info_of(q).held);
    assert_int_equal(lb_lock_release(q, lb_on_conn(j.c)), LB_OK);
    job_end(&j);
    lb_lock_free(h);
    lb_lock_free(q);
    lb_lock_free(t);
    assert_true(took < 3000);
}

/* Steps m over conn as a client that stops (dies) after `sends` commands. */
static void drive_for(lb_machine *m, int sends) {
    lb_now now = lb_clock_now(NULL);
    int rc = lb_machine_step(m, NULL, &now);
    for (int i = 0; rc == LB_STEP_SEND && i < sends; i++) {
        const lb_cmd *cmd = lb_machine_command(m);
        const char *argv[LB_CMD_MAX_ARGS];
        for (int a = 0; a < cmd->argc; a++) argv[a] = cmd->argv[a];
        redisReply *r = redisCommandArgv(conn, cmd->argc, argv, cmd->argvlen);
        assert_non_null(r);
        now = lb_clock_now(NULL);
        rc = lb_machine_step(m, r, &now);
        freeReplyObject(r);
    }
}

/* A release that hands the lock to a grant-list waiter it did not name
 * pushes the grant itself. Should the releaser stop right after that push,
 * the list must still lapse, and with the grantee's lock (its TTL, not the
 * releaser's): a grantee gone for good leaves nothing behind. */
static void test_a_grant_the_releaser_pushes_lapses_with_the_grantees_lock(void **state) {
    (void)state;
    static const char g[] = "0123456789abcdef0123456789abcdef";
    lb_lock *h = new_lock("w:push", 1, 2, 100);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    /* A waiter queued on its grant list (lease far off, TTL 5 s), not
     * blocked on it now: its grant stays in the list. */
    assert_true(lbt_int(conn, "ZADD {w:push}:queue 1 %s", g) == 1);
    assert_true(lbt_int(conn, "HSET {w:push}:fair %s %s", g, "4102444800000 5000 *") == 1);
    drive_for(lb_lock_machine(h, LB_OP_RELEASE, 0), 2); /* the script, then the push */
    assert_false(lb_lock_info_of(h).held);
    assert_string_equal(lbt_get(conn, "w:push"), g);
    char list[64];
    snprintf(list, sizeof list, "{w:push}:grant:%s", g);
    assert_true(lbt_int(conn, "LLEN %s", list) == 1);
    long long ttl = lbt_int(conn, "PTTL %s", list);
    assert_true(ttl > 0 && ttl <= 5000);
    lbt_int(conn, "DEL w:push %s {w:push}:queue {w:push}:fair", list);
    lb_lock_free(h);
}

/* ---- Queue places, grants and errors ------------------------------------------ */

/* HGET hash field into out (cap bytes); "" when absent. */
static void hget(const char *hash, const char *field, char *out, size_t cap) {
    redisReply *r = redisCommand(conn, "HGET %s %s", hash, field);
    assert_non_null(r);
    assert_true(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

/* A fair lock whose queued, listening waiter sleeps long (a third of a 60 s
 * lease): nothing but a message or an event makes it attempt during a test. */
static lb_lock *sleepy_lock(const char *key) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 2000;
    o.fair_lease_ms = 60000;
    return lock_with(key, &o);
}

/* Has h take the key, starts q's wait on w behind it, and returns once q is
 * queued naming its inbox and asleep in its long queued sleep; its token
 * into token[33]. A first, uncontended wait subscribes the inbox (and not
 * the key's channel, so that the wait here subscribes it afresh: queued,
 * subscribed, attempted again, asleep). */
static void queue_asleep(job *j, lb_lock *h, lb_lock *q, lb_waiter *w, const char *queue,
                         const char *state, char *token) {
    assert_int_equal(lb_lock_acquire_wait(q, lb_on_conn(conn), w, 1000), LB_OK);
    assert_int_equal(lb_lock_release(q, lb_on_conn(conn)), LB_OK);
    EVENTUALLY(stats_of(w).inbox == 1);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    uint64_t sleeps = stats_of(w).sleeps;
    job_start(j, q, w, 30000);
    EVENTUALLY(lbt_int(conn, "ZCARD %s", queue) == 1 && stats_of(w).sleeps == sleeps + 2 &&
               stats_of(w).blocked == 1);
    char tokens[1][33], entry[256];
    assert_int_equal(queue_tokens(queue, tokens, 1), 1);
    memcpy(token, tokens[0], 33);
    hget(state, token, entry, sizeof entry);
    assert_non_null(strstr(entry, " lb-inbox:"));
}

/* When the key is freed without a hand-off (a DEL, an expiry), a queued
 * waiter that named its inbox keeps its place: a try of another client finds
 * the key kept for that waiter and does not take it. */
static void test_a_waiter_that_named_its_inbox_keeps_its_place_when_the_key_is_freed(
    void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock *h = new_lock("w:freed", 1, 2, 100), *t = new_lock("w:freed", 1, 2, 100);
    lb_lock *q = sleepy_lock("w:freed");
    job j;
    char token[33];
    queue_asleep(&j, h, q, w, "{w:freed}:queue", "{w:freed}:fair", token);
    lbt_cmd_ok(conn, "DEL w:freed"); /* as a legacy release would: nothing handed */
    int tried = lb_lock_try_acquire(t, lb_on_conn(conn));
    int still = queued("{w:freed}:queue", token);
    /* The thread ends before any assertion. A "released" message (what no
     * DEL sends) wakes the waiter, which takes the free key as the head. */
    if (tried == LB_OK) assert_int_equal(lb_lock_release(t, lb_on_conn(conn)), LB_OK);
    else lbt_cmd_ok(conn, "PUBLISH {w:freed}:released released");
    int rc = job_join(&j);
    job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(t);
    lb_lock_free(q);
    assert_int_equal(tried, LB_EBUSY);
    assert_true(still);
    assert_int_equal(rc, LB_OK);
}

/* A hand-off the new holder learns of at its next attempt (no waiter here,
 * so no message) started the key's TTL at the release: the lease the handle
 * reports ends no later than the key does, however long after the release
 * that attempt came. */
static void test_a_hand_off_found_by_an_attempt_ends_its_lease_no_later_than_the_key(
    void **state) {
    (void)state;
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 5000;
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 1000;
    o.fair_lease_ms = 10000;
    lb_lock *h = new_lock("w:late", 1, 2, 100);
    lb_lock *q = lock_with("w:late", &o);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job j;
    job_start(&j, q, NULL, 20000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:late}:queue") == 1);
    char tokens[1][33], first[256], now[256];
    assert_int_equal(queue_tokens("{w:late}:queue", tokens, 1), 1);
    hget("{w:late}:fair", tokens[0], first, sizeof first);
    /* An attempt refreshed the lease just now: the next is a step (1 s) away. */
    EVENTUALLY((hget("{w:late}:fair", tokens[0], now, sizeof now), strcmp(now, first) != 0));
    int released = lb_lock_release(h, lb_on_conn(conn));
    long long pttl = lbt_int(conn, "PTTL w:late");
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t key_end_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + (pttl + 1) * 1000000;
    int rc = job_join(&j);
    int64_t deadline = lb_lock_info_of(q).deadline_ns;
    job_end(&j);
    lb_lock_free(h);
    lb_lock_free(q);
    assert_int_equal(released, LB_OK);
    assert_true(pttl > 0 && pttl <= 5000);
    assert_int_equal(rc, LB_OK);
    if (deadline > key_end_ns)
        fail_msg("the lease ends %lld ms after the key", (long long)(deadline - key_end_ns) / 1000000);
}

/* A hand-off message read late, naming our token at an earlier place in the
 * queue (a grant that lapsed before the waiter heard of it, the token having
 * queued again since), grants nothing: the waiter checks with the server and
 * waits on while the key is another's; the grant for its current place, from
 * the holder's release, is the one it takes. */
static void test_a_late_hand_off_for_an_earlier_queue_place_grants_nothing(void **state) {
    (void)state;
    lb_waiter *w = new_waiter();
    lb_lock *h = new_lock("w:stale", 1, 2, 100), *q = sleepy_lock("w:stale");
    job j;
    char token[33], entry[256], holder[33];
    queue_asleep(&j, h, q, w, "{w:stale}:queue", "{w:stale}:fair", token);
    snprintf(holder, sizeof holder, "%s", lb_lock_info_of(h).token);
    hget("{w:stale}:fair", token, entry, sizeof entry);
    redisReply *r = redisCommand(conn, "ZSCORE {w:stale}:queue %s", token);
    assert_true(r && r->type == REDIS_REPLY_STRING);
    long long place = atoll(r->str);
    freeReplyObject(r);
    assert_true(place > 1);
    /* The release of that earlier grant published this on the inbox. The
     * wait either returns, or checks with an attempt and sleeps again. */
    char late[64];
    snprintf(late, sizeof late, "%s %lld", token, place - 1);
    uint64_t sleeps = stats_of(w).sleeps;
    lbt_cmd_ok(conn, "PUBLISH %s %s", strstr(entry, " lb-inbox:") + 1, late);
    EVENTUALLY(job_done(&j) || (stats_of(w).sleeps > sleeps && stats_of(w).blocked == 1));
    int early = job_done(&j);
    char during[33];
    snprintf(during, sizeof during, "%s", lbt_get(conn, "w:stale"));
    int released = lb_lock_release(h, lb_on_conn(conn));
    int rc = job_join(&j);
    char after[33];
    snprintf(after, sizeof after, "%s", lbt_get(conn, "w:stale"));
    job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(q);
    assert_false(early); /* it did not take the lock while h held it */
    assert_string_equal(during, holder);
    assert_int_equal(released, LB_OK);
    assert_int_equal(rc, LB_OK);
    assert_string_equal(after, token);
}

/* A wait that ends with an error (here the key turned into a hash while the
 * waiter was queued) leaves the queue: a release would otherwise hand the
 * lock to a token nobody uses, and every waiter would wait out its TTL. The
 * error is still what the wait reports. */
static void test_a_wait_that_fails_with_an_error_leaves_the_queue(void **state) {
    (void)state;
    lb_lock *h = new_lock("w:err", 1, 2, 100), *q = new_lock("w:err", 1, 50, 50);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);
    job j;
    job_start(&j, q, NULL, 20000);
    EVENTUALLY(lbt_int(conn, "ZCARD {w:err}:queue") == 1);
    char tokens[1][33];
    assert_int_equal(queue_tokens("{w:err}:queue", tokens, 1), 1);
    lbt_cmd_ok(conn, "MULTI");
    lbt_cmd_ok(conn, "DEL w:err");
    lbt_cmd_ok(conn, "HSET w:err f v");
    lbt_cmd_ok(conn, "EXEC");
    int rc = job_join(&j);
    int still = queued("{w:err}:queue", tokens[0]);
    char why[256];
    snprintf(why, sizeof why, "%s", lb_lock_info_of(q).errstr);
    job_end(&j);
    lbt_cmd_ok(conn, "DEL w:err");
    lb_lock_free(h);
    lb_lock_free(q);
    assert_int_equal(rc, LB_EWRONGTYPE);
    assert_non_null(strstr(why, "WRONGTYPE"));
    assert_false(still);
}

static void test_bad_options_and_arguments_are_refused(void **state) {
    (void)state;
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fair_lease_ms = o.backoff_max_ms; /* no longer than a back-off step */
    lb_lock *l = (lb_lock *)&o;
    assert_int_equal(lb_lock_new(&l, "w:bad", 5, &o), LB_EINVAL);
    assert_null(l);
    lb_lock_options_init(&o);
    o.fair = 2;
    assert_int_equal(lb_lock_new(&l, "w:bad", 5, &o), LB_EINVAL);
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fair_yield_ms = 0;
    assert_int_equal(lb_lock_new(&l, "w:bad", 5, &o), LB_EINVAL);
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fair_baton_ms = -1;
    assert_int_equal(lb_lock_new(&l, "w:bad", 5, &o), LB_EINVAL);
    /* A fair lock named by a hash tag alone would share its queue, grant
     * lists and baton with the lock named by the tag's content ("{x}:queue"
     * is both's): a release of one could hand the other's waiter a lock
     * written at its own key. Other names, and plain locks, are taken. */
    lb_lock_options_init(&o);
    o.fair = 1;
    static const struct { const char *key; int ok; } names[] = {
        {"{w:bad}", 0}, {"{}", 0}, {"{a{b}", 0}, {"{w:bad}x", 1}, {"x{w:bad}", 1},
        {"{a}b}", 1}, {"w:bad", 1}, {"{", 1},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        l = NULL;
        int rc = lb_lock_new(&l, names[i].key, strlen(names[i].key), &o);
        if (rc != (names[i].ok ? LB_OK : LB_EINVAL)) fail_msg("%s: %s", names[i].key, lb_err_name(rc));
        lb_lock_free(l);
    }
    lb_lock_options_init(&o);
    assert_int_equal(lb_lock_new(&l, "{w:bad}", 7, &o), LB_OK);
    lb_lock_free(l);

    lb_waiter_options wo;
    lb_waiter_options_init(&wo);
    wo.port = 0;
    lb_waiter *w = (lb_waiter *)&wo;
    assert_int_equal(lb_waiter_new(&w, &wo), LB_EINVAL);
    assert_null(w);
    lb_waiter_options_init(&wo);
    wo.port = server.port;
    wo.host = "127.0.0.1";
    wo.connect = test_connect;
    __atomic_store_n(&refuse_connects, 1, __ATOMIC_RELEASE);
    assert_int_equal(lb_waiter_new(&w, &wo), LB_EIO);
    __atomic_store_n(&refuse_connects, 0, __ATOMIC_RELEASE);
    assert_null(w);
    lb_waiter_free(NULL);
    lb_waiter_stats st;
    lb_waiter_stats_get(NULL, &st);
    assert_int_equal(st.channels, 0);

    lb_waiter_options_init(&wo);
    wo.port = server.port;
    wo.username = "someone"; /* a username needs a password */
    assert_int_equal(lb_waiter_new(&w, &wo), LB_EINVAL);
    lb_waiter_options_init(&wo);
    wo.port = server.port;
    wo.linger_ms = -1;
    assert_int_equal(lb_waiter_new(&w, &wo), LB_EINVAL);

    l = new_lock("w:bad", 0, 2, 100);
    assert_int_equal(lb_lock_acquire_wait(NULL, lb_on_conn(conn), NULL, 10), LB_EINVAL);
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(NULL), NULL, 10), LB_EINVAL);
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(conn), NULL, -1), LB_EINVAL);
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(conn), NULL, 0), LB_OK);
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(conn), NULL, 0), LB_ESTATE);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
    lb_lock_free(l);
}

/* A server that wants a password: the waiter authenticates, and a refusal is
 * LB_EREDIS, distinct from a server out of reach. Connections made before
 * requirepass stay authenticated. */
/* A failed lb_waiter_new says why in the caller's buffer: the address and
 * the system's reason for a dead port, the server's answer for a refused
 * AUTH (in test_the_waiter_authenticates), the options for bad ones. */
static void test_a_failed_waiter_new_says_why_in_the_callers_buffer(void **state) {
    (void)state;
    char why[256];
    lb_waiter_options o;
    lb_waiter_options_init(&o);
    o.port = 1;
    o.errbuf = why;
    o.errbuf_size = sizeof why;
    lb_waiter *w = NULL;
    assert_int_equal(lb_waiter_new(&w, &o), LB_EIO);
    assert_non_null(strstr(why, "127.0.0.1:1"));
    assert_non_null(strstr(why, "refused"));
    o.port = 0;
    assert_int_equal(lb_waiter_new(&w, &o), LB_EINVAL);
    assert_string_equal(why, "invalid waiter options");
    o.port = server.port;
    assert_int_equal(lb_waiter_new(&w, &o), LB_OK);
    assert_string_equal(why, "");
    lb_waiter_free(w);
}

static void test_the_waiter_authenticates(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "CONFIG SET requirepass s3cret");
    lb_waiter_options wo;
    lb_waiter_options_init(&wo);
    wo.port = server.port;
    wo.password = "wrong";
    char why[256];
    wo.errbuf = why;
    wo.errbuf_size = sizeof why;
    lb_waiter *w = NULL;
    int refused = lb_waiter_new(&w, &wo);
    char refusal[256];
    memcpy(refusal, why, sizeof why);
    wo.password = "s3cret";
    int accepted = lb_waiter_new(&w, &wo);
    lbt_cmd_ok(conn, "CONFIG SET requirepass \"\"");
    assert_int_equal(refused, LB_EREDIS);
    assert_non_null(strstr(refusal, "AUTH"));
    assert_true(strstr(refusal, "WRONGPASS") || strstr(refusal, "invalid password"));
    assert_int_equal(accepted, LB_OK);
    assert_true(stats_of(w).connected);
    lb_waiter_free(w);
}

/* Fails the n-th allocation; counts what is live so leaks show. */
typedef struct counting { int fail_at, calls, live; } counting;
static void *count_malloc(void *ud, size_t n) {
    counting *c = ud;
    if (++c->calls == c->fail_at) return NULL;
    __atomic_fetch_add(&c->live, 1, __ATOMIC_RELAXED);
    return malloc(n);
}
static void count_free(void *ud, void *p) {
    __atomic_fetch_sub(&((counting *)ud)->live, 1, __ATOMIC_RELAXED);
    free(p);
}

static void test_every_allocation_failure_is_clean(void **state) {
    (void)state;
    for (int n = 1;; n++) {
        counting cnt = {n, 0, 0};
        lb_allocator alloc = {count_malloc, count_free, &cnt};
        lb_lock_options o;
        lb_lock_options_init(&o);
        o.fair = 1;
        o.allocator = &alloc;
        lb_lock *l = NULL;
        int rc = lb_lock_new(&l, "w:alloc", 7, &o);
        if (rc == LB_ENOMEM) {
            assert_null(l);
            assert_int_equal(cnt.live, 0);
            continue;
        }
        assert_int_equal(rc, LB_OK);
        lb_waiter_options wo;
        lb_waiter_options_init(&wo);
        wo.port = server.port;
        wo.allocator = &alloc;
        lb_waiter *w = NULL;
        rc = lb_waiter_new(&w, &wo);
        if (rc == LB_ENOMEM) {
            assert_null(w);
            lb_lock_free(l);
            assert_int_equal(cnt.live, 0);
            continue;
        }
        assert_int_equal(rc, LB_OK);
        /* Past here, a failed channel allocation only costs the wake-up. */
        assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(conn), w, 1000), LB_OK);
        assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
        lb_waiter_free(w);
        lb_lock_free(l);
        assert_int_equal(cnt.live, 0);
        break;
    }
}

/* ---- Cancelling a wait ------------------------------------------------------ */

/* A wait of 8 s with a back-off of 4 s on a lock held for 30 s: only the
 * cancel can end it early. The bound on how soon is generous (2 s, a quarter
 * of the wait); the wait is cancelled within a slice of 10 ms when healthy. */
static void cancel_one_wait(const char *key, int fair, int with_waiter) {
    lbt_canceller c;
    lbt_canceller_init(&c);
    lb_waiter *w = with_waiter ? new_waiter() : NULL;
    lb_lock *h = new_lock(key, fair, 2, 100);
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = fair;
    o.backoff_min_ms = 4000;
    o.backoff_max_ms = 4000;
    o.clock = &c.clock;
    lb_lock *b = lock_with(key, &o);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(conn)), LB_OK);

    job j;
    int64_t start = lbt_mono_ms();
    job_start(&j, b, w, 8000);
    char queue[64];
    snprintf(queue, sizeof queue, "ZCARD {%s}:queue", key);
    if (fair) EVENTUALLY(lbt_int(conn, queue) == 1);
    else lbt_sleep_ms(100);
    assert_false(job_done(&j));
    lbt_cancel(&c);
    assert_int_equal(job_join(&j), LB_ECANCELED);
    assert_true(lbt_mono_ms() - start < 2000);

    /* Nothing held, the queue place given up, the handle as good as new. */
    assert_false(lb_lock_info_of(b).held);
    if (fair) assert_int_equal(lbt_int(conn, queue), 0);
    assert_int_equal(lb_lock_release(h, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(conn)), LB_OK);
    job_end(&j);
    lb_lock_free(b);
    lb_lock_free(h);
    lb_waiter_free(w);
    lbt_canceller_destroy(&c);
}

/* ---- Polling beside a lock turned over fast ------------------------------------------ */
/* Writes the key afresh with a whole TTL: to a waiter, a holder just begun.
 * The waiter reads the holder's age as its own validity (30 s) less the PTTL
 * it meets, and counts up to its back-off's 100 ms more than its validity as
 * age 0; a PTTL of 30 s plus 90 ms keeps the holder just begun for an attempt
 * that a busy host runs up to 90 ms after the write (on 30 s flat, an
 * attempt 3 ms late met a holder 3 ms old and the 20x rule let it sleep 60). */
static int renew_young(void *ud) {
    lbt_holder *h = ud;
    redisReply *r = redisCommand(h->c, "SET %s someone-else PX 30090", h->key);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* The longest sleep of a polling wait that times out; `young`: the key is
 * rewritten after each sleep (each attempt meets a holder just begun), else
 * written once and left to age. */
static int64_t longest_sleep_beside(const char *key, int young, int64_t wait_ms) {
    lbt_holder h = {lbt_redis_connect(&server), key};
    assert_non_null(h.c);
    lbt_sleeps sleeps = {.after = young ? renew_young : NULL, .after_ud = &h};
    lb_clock clock = {.sleep_ms = lbt_sleeps_record, .ud = &sleeps};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.clock = &clock;
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, key, strlen(key), &o), LB_OK);
    assert_int_equal(renew_young(&h), 0);
    assert_int_equal(lb_lock_acquire(l, lb_on_conn(conn), wait_ms), LB_ETIMEDOUT);
    assert_true(sleeps.calls >= 5);
    assert_int_equal(sleeps.after_failures, 0);
    lbt_cmd_ok(conn, "DEL %s", key);
    redisFree(h.c);
    lb_lock_free(l);
    return sleeps.longest_ms;
}

/* A waiter refused by holders only ever just begun (a lock turned over fast)
 * sleeps at most 20 times the holder's age, never less than 20 ms, between
 * attempts: here about 20 ms (up to 40 when an attempt is a ms late), not the
 * back-off's 100 ms, asleep that long it would lose every race to clients
 * that ask sooner. A holder left to age is waited for with the whole
 * back-off, as before. */
static void test_a_polling_wait_beside_a_lock_turned_over_fast_asks_within_20_ms(void **state) {
    (void)state;
    assert_in_range(longest_sleep_beside("w:young", 1, 1000), 1, 40);
    assert_in_range(longest_sleep_beside("w:aging", 0, 1500), 41, 100);
}

/* Beside a fair queue (found by the wait's outsider note, after 100 ms
 * refused) the same wait keeps its whole back-off: the queue hands the lock
 * over at every release, and asking sooner would only take the queue's
 * turns. */
static void test_a_polling_wait_beside_a_fair_queue_keeps_its_back_off(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "HSET {w:queued}:fair ~streak 0");
    lbt_cmd_ok(conn, "PEXPIRE {w:queued}:fair 60000");
    assert_in_range(longest_sleep_beside("w:queued", 1, 1500), 41, 100);
    assert_true(lbt_int(conn, "HEXISTS {w:queued}:fair ~seen") == 1); /* it noted itself */
    lbt_cmd_ok(conn, "DEL {w:queued}:fair");
}

/* An outsider beside a fair queue that has just released lets the others
 * in first: its next wait, begun at once, sleeps the rest of backoff_max_ms
 * (100 ms) before its first attempt, though the lock is free. A wait of 0 ms
 * does not (nothing is waited for), nor does one begun once that time has
 * passed, nor one whose last note found the queue more than a second ago (a
 * client left alone after the queue has gone). */
static void test_an_outsider_beside_a_queue_stands_back_after_its_release(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "HSET {w:back}:fair ~streak 0");
    lbt_cmd_ok(conn, "PEXPIRE {w:back}:fair 60000");
    lbt_sleeps sleeps = {0};
    lb_clock clock = {.sleep_ms = lbt_sleeps_record, .ud = &sleeps};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.clock = &clock;
    lb_lock *l = lock_with("w:back", &o);
    static const struct { int64_t hold_ms, pause_ms, wait_ms, lo, hi; } cases[] = {
        {0, 0, 2000, 50, 100}, /* at once: stands back */
        {0, 0, 0, 0, 0},       /* a try: never */
        {0, 150, 2000, 0, 0},  /* 150 ms after the release: no longer */
        {1100, 0, 2000, 0, 0}, /* the queue last found over a second ago: no */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* Refused for 300 ms, it notes itself after 100 and finds the queue. */
        lbt_cmd_ok(conn, "SET w:back someone PX 300");
        assert_int_equal(lb_lock_acquire(l, lb_on_conn(conn), 5000), LB_OK);
        assert_true(lbt_int(conn, "HEXISTS {w:back}:fair ~seen") == 1);
        if (cases[i].hold_ms) lbt_sleep_ms((int)cases[i].hold_ms);
        assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
        if (cases[i].pause_ms) lbt_sleep_ms((int)cases[i].pause_ms);
        sleeps.longest_ms = 0;
        assert_int_equal(lb_lock_acquire(l, lb_on_conn(conn), cases[i].wait_ms), LB_OK);
        if (sleeps.longest_ms < cases[i].lo || sleeps.longest_ms > cases[i].hi)
            fail_msg("case %zu: slept %lld ms before taking a free lock", i, (long long)sleeps.longest_ms);
        assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
        lbt_sleep_ms(150); /* past the stand-back: the next case starts afresh */
    }
    lbt_cmd_ok(conn, "DEL {w:back}:fair");
    lb_lock_free(l);
}

/* A polling wait whose last release reached clients listening for it (a
 * fair queue's waiters, waits on release) lets them in first the same way,
 * with no note needed: its first wait after that release begins with the
 * rest of backoff_max_ms asleep. With no one listening, it takes the free
 * lock at once. */
static void test_a_polling_wait_stands_back_when_its_release_was_heard(void **state) {
    (void)state;
    lbt_sleeps sleeps = {0};
    lb_clock clock = {.sleep_ms = lbt_sleeps_record, .ud = &sleeps};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.clock = &clock;
    lb_lock *l = lock_with("w:heard", &o);
    for (int listening = 0; listening < 2; listening++) {
        redisContext *sub = NULL;
        if (listening) {
            sub = lbt_redis_connect(&server);
            assert_non_null(sub);
            freeReplyObject(redisCommand(sub, "SUBSCRIBE {w:heard}:released"));
        }
        assert_int_equal(lb_lock_acquire(l, lb_on_conn(conn), 1000), LB_OK);
        assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
        sleeps.longest_ms = 0;
        assert_int_equal(lb_lock_acquire(l, lb_on_conn(conn), 1000), LB_OK);
        if (listening) assert_in_range(sleeps.longest_ms, 50, 100);
        else assert_int_equal(sleeps.longest_ms, 0);
        assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
        if (sub) redisFree(sub);
        lbt_sleep_ms(150);
    }
    lb_lock_free(l);
}

static void test_a_polling_wait_is_cancelled_promptly_by_the_sleep_hook(void **state) {
    (void)state;
    cancel_one_wait("w:cancel-poll", 0, 0);
    cancel_one_wait("w:cancel-poll-fair", 1, 0);
}

static void test_a_wait_on_a_waiter_is_cancelled_promptly_by_the_sleep_hook(void **state) {
    (void)state;
    cancel_one_wait("w:cancel-waiter", 0, 1);
    cancel_one_wait("w:cancel-waiter-fair", 1, 1);
}

static int setup(void **state) {
    (void)state;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    conn = lbt_redis_connect(&server);
    return conn ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (conn) redisFree(conn);
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_release_wakes_the_waiter_long_before_its_back_off),
        cmocka_unit_test(test_a_waiter_that_lost_the_race_after_a_release_sleeps_its_back_off),
        cmocka_unit_test(test_a_waiter_that_keeps_losing_races_after_releases_asks_again_soon),
        cmocka_unit_test(test_a_bare_del_is_noticed_within_the_holders_ttl),
        cmocka_unit_test(test_a_killed_subscriber_degrades_to_back_off_and_reconnects),
        cmocka_unit_test(test_one_waiter_serves_many_threads_and_locks),
        cmocka_unit_test(test_fair_hand_offs_follow_arrival_order),
        cmocka_unit_test(test_a_queued_waiter_needs_one_command_when_the_channel_is_watched),
        cmocka_unit_test(test_a_queued_listening_waiter_attempts_no_more_until_its_hand_off),
        cmocka_unit_test(test_a_fair_hand_off_wakes_only_the_client_it_names),
        cmocka_unit_test(test_a_hand_off_missed_while_the_waiter_was_down_is_found_after_it_is_back),
        cmocka_unit_test(test_a_channel_stays_subscribed_for_linger_ms_after_its_last_wait),
        cmocka_unit_test(test_a_dead_waiter_is_skipped_once_its_lease_lapses),
        cmocka_unit_test(test_no_fair_waiter_starves_among_contending_threads),
        cmocka_unit_test(test_a_non_fair_client_beside_fair_ones_gets_a_turn),
        cmocka_unit_test(test_windows_open_only_once_an_outsider_is_seen),
        cmocka_unit_test(test_a_queue_alone_is_never_kept_off_the_lock),
        cmocka_unit_test(test_a_refused_outsider_notes_itself_only_beside_a_queue),
        cmocka_unit_test(test_a_fair_waiter_notes_a_holder_outside_the_queue),
        cmocka_unit_test(test_a_fair_waiter_that_times_out_leaves_the_queue),
        cmocka_unit_test(test_fair_mode_never_touches_a_foreign_key),
        cmocka_unit_test(test_a_hand_off_carries_the_next_fencing_number),
        cmocka_unit_test(test_a_fair_wait_on_one_connection_is_handed_the_lock_on_its_grant_list),
        cmocka_unit_test(test_a_release_passes_the_baton_to_the_waiter_that_blocked_first),
        cmocka_unit_test(test_a_release_chooses_between_the_queue_and_the_baton),
        cmocka_unit_test(test_a_release_that_passes_the_baton_costs_six_commands),
        cmocka_unit_test(test_a_baton_is_taken_only_as_the_release_wrote_it),
        cmocka_unit_test(test_a_wait_that_stops_blocking_early_takes_its_mark_away),
        cmocka_unit_test(test_a_wait_right_after_handing_the_lock_on_skips_its_set_nx),
        cmocka_unit_test(test_a_holder_by_baton_takes_its_mark_away_when_it_hands_to_the_queue),
        cmocka_unit_test(test_a_baton_wait_never_writes_its_mark_over_a_foreign_value),
        cmocka_unit_test(test_a_baton_with_no_lease_left_is_no_acquisition),
        cmocka_unit_test(test_a_release_with_a_ttl_under_four_baton_lives_passes_no_baton),
        cmocka_unit_test(test_no_key_a_fair_lock_writes_is_left_without_a_ttl),
        cmocka_unit_test(test_a_waiter_keeping_its_place_beside_a_fair_holder_costs_seven_commands),
        cmocka_unit_test(test_a_queue_formed_again_is_given_a_ttl),
        cmocka_unit_test(test_a_queue_formed_again_outlives_every_live_lease),
        cmocka_unit_test(test_a_wait_does_not_trust_a_spoiled_holder_expiry),
        cmocka_unit_test(test_a_grant_writes_a_large_fencing_number_in_digits),
        cmocka_unit_test(test_the_grant_push_refuses_bad_arguments_before_it_writes),
        cmocka_unit_test(test_the_fair_scripts_refuse_numbers_they_cannot_use_before_they_write),
        cmocka_unit_test(test_a_grant_list_of_another_type_does_not_stop_a_release),
        cmocka_unit_test(test_a_queue_or_state_of_another_type_does_not_stop_a_release),
        cmocka_unit_test(test_a_fair_lock_beside_a_foreign_state_releases_and_then_refuses_clearly),
        cmocka_unit_test(test_a_waiter_whose_grant_list_is_spoiled_still_gets_its_hand_off),
        cmocka_unit_test(test_grant_list_waiters_are_served_in_order_and_name_their_successor),
        cmocka_unit_test(test_a_grant_list_wait_stays_within_the_connections_read_timeout),
        cmocka_unit_test(test_a_grant_list_wait_polls_while_a_client_outside_the_queue_holds),
        cmocka_unit_test(test_a_waiter_that_named_its_inbox_keeps_its_place_when_the_key_is_freed),
        cmocka_unit_test(test_a_hand_off_found_by_an_attempt_ends_its_lease_no_later_than_the_key),
        cmocka_unit_test(test_a_late_hand_off_for_an_earlier_queue_place_grants_nothing),
        cmocka_unit_test(test_a_wait_that_fails_with_an_error_leaves_the_queue),
        cmocka_unit_test(test_a_window_wakes_a_grant_list_head_the_release_did_not_name),
        cmocka_unit_test(test_a_grant_the_releaser_pushes_lapses_with_the_grantees_lock),
        cmocka_unit_test(test_a_polling_wait_beside_a_lock_turned_over_fast_asks_within_20_ms),
        cmocka_unit_test(test_a_polling_wait_beside_a_fair_queue_keeps_its_back_off),
        cmocka_unit_test(test_an_outsider_beside_a_queue_stands_back_after_its_release),
        cmocka_unit_test(test_a_polling_wait_stands_back_when_its_release_was_heard),
        cmocka_unit_test(test_a_polling_wait_is_cancelled_promptly_by_the_sleep_hook),
        cmocka_unit_test(test_a_wait_on_a_waiter_is_cancelled_promptly_by_the_sleep_hook),
        cmocka_unit_test(test_bad_options_and_arguments_are_refused),
        cmocka_unit_test(test_a_failed_waiter_new_says_why_in_the_callers_buffer),
        cmocka_unit_test(test_the_waiter_authenticates),
        cmocka_unit_test(test_every_allocation_failure_is_clean),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
