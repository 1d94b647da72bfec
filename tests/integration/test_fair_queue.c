/* Fair mode's queue against a real redis-server: FIFO hand-offs through a
 * waiter, hand-offs on a waiter's inbox, dead waiters, shares among contending
 * threads, and clients outside the queue with the windows left for them. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "harness/wait_fixture.h"
#include "lockbridge/lockbridge.h"

/* A job of `jobs` that has finished and not been ended, or -1. */
static int finished_job(lbt_job *jobs, int n) {
    for (int m = 0; m < n; m++)
        if (jobs[m].c && lbt_job_done(&jobs[m])) return m;
    return -1;
}

/* Waiters queue in arrival order, and each release hands the lock to the
 * oldest: the key holds that waiter's token the moment release returns. */
static void test_fair_hand_offs_follow_arrival_order(void **state) {
    (void)state;
    enum { N = 5 };
    lb_waiter *w = lbt_new_waiter();
    lb_lock *h = lbt_new_lock("w:fifo", 1, 2, 100), *ls[N];
    lbt_job jobs[N];
    char tokens[N][33];
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    for (int i = 0; i < N; i++) {
        ls[i] = lbt_new_lock("w:fifo", 1, 2000, 2000);
        lbt_job_start(&jobs[i], ls[i], w, 30000);
        LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:fifo}:queue") == i + 1);
    }
    assert_int_equal(lbt_queue_tokens("{w:fifo}:queue", tokens, N), N);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    for (int i = 0; i < N; i++) {
        /* Handed to the oldest: its token is at the key before it even wakes. */
        assert_string_equal(lbt_get(lbt_conn, "w:fifo"), tokens[i]);
        int k;
        LBT_EVENTUALLY((k = finished_job(jobs, N)) >= 0);
        assert_int_equal(lbt_job_join(&jobs[k]), LB_OK);
        assert_string_equal(lb_lock_info_of(ls[k]).token, tokens[i]);
        lbt_job_end(&jobs[k]);
        jobs[k].c = NULL;
    }
    assert_string_equal(lbt_get(lbt_conn, "w:fifo"), "");
    /* Waiters asleep learn of their hand-off from the message alone. */
    assert_true(lbt_stats_of(w).handoffs >= 1 && lbt_stats_of(w).handoffs <= N);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:fifo}:queue"), 0);
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
    lb_waiter *w = lbt_new_waiter();
    lb_lock *h = lbt_new_lock("w:one", 1, 2, 100), *w1 = lbt_new_lock("w:one", 1, 2000, 2000),
            *w2 = lbt_new_lock("w:one", 1, 2000, 2000);
    uint64_t base1 = lbt_warmed_up(w1), base2 = lbt_warmed_up(w2);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j1, j2;
    lbt_job_start(&j1, w1, w, 30000);
    LBT_EVENTUALLY(lbt_stats_of(w).sleeps >= 2 && lbt_stats_of(w).blocked == 1);
    lbt_job_start(&j2, w2, w, 30000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:one}:queue") == 2 && lbt_stats_of(w).blocked == 2);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j1), LB_OK);
    assert_int_equal(lb_lock_info_of(w1).commands - base1, 2);
    lbt_job_end(&j1); /* hands the lock to w2 */
    assert_int_equal(lbt_job_join(&j2), LB_OK);
    assert_int_equal(lb_lock_info_of(w2).commands - base2, 1);
    assert_int_equal(lbt_stats_of(w).handoffs, 2);
    lbt_job_end(&j2);
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
    lb_waiter *w = lbt_new_waiter();
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = 1;
    o.backoff_min_ms = 2;
    o.backoff_max_ms = 20;
    o.fair_lease_ms = 30000;
    lb_lock *h = lbt_new_lock("w:quiet", 1, 2, 100);
    lb_lock *q = lbt_lock_with("w:quiet", &o);
    uint64_t base = lbt_warmed_up(q);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_job_start(&j, q, w, 30000);
    /* Queued, subscribed, attempted once more after the confirmation, asleep. */
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:quiet}:queue") == 1 && lbt_stats_of(w).sleeps >= 2 &&
               lbt_stats_of(w).blocked == 1);
    /* Before the subscription is confirmed the wait may poll at its back-off
     * steps (a busy host confirms late); once asleep, nothing more. */
    uint64_t queued = lb_lock_info_of(q).commands - base;
    lbt_sleep_ms(300); /* fifteen back-off steps and more */
    uint64_t asleep = lb_lock_info_of(q).commands - base;
    /* The thread ends before any assertion, so a failure leaves none behind. */
    int released = lb_lock_release(h, lb_on_conn(lbt_conn));
    int rc = lbt_job_join(&j);
    uint64_t total = lb_lock_info_of(q).commands - base, handoffs = lbt_stats_of(w).handoffs;
    lbt_job_end(&j);
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
    o.host = "127.0.0.1";
    o.port = lbt_server.port;
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
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_job_start(&j, q, w, 30000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:linger}:queue") == 1 && lbt_stats_of(w).blocked == 1);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    uint64_t sent = lb_lock_info_of(q).commands - before;
    uint64_t heard = lbt_stats_of(w).messages;
    lbt_job_end(&j);
    for (int i = 0; i < 200 && lbt_stats_of(w).channels > 0 && lbt_stats_of(w).messages == heard; i++)
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
    lb_waiter *w1 = lbt_new_waiter(), *w2 = lbt_new_waiter();
    lb_lock *h = lbt_new_lock("w:inbox", 1, 2, 100), *q1 = lbt_new_lock("w:inbox", 1, 2000, 2000),
            *q2 = lbt_new_lock("w:inbox", 1, 2000, 2000);
    /* A first fair wait subscribes each waiter's inbox. */
    lb_lock *ls[2] = {q1, q2};
    lb_waiter *ws[2] = {w1, w2};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(lb_lock_acquire_wait(ls[i], lb_on_conn(lbt_short), ws[i], 1000), LB_OK);
        assert_int_equal(lb_lock_release(ls[i], lb_on_conn(lbt_conn)), LB_OK);
        LBT_EVENTUALLY(lbt_stats_of(ws[i]).inbox == 1);
    }
    redisContext *sub = lbt_redis_connect(&lbt_server);
    assert_non_null(sub);
    lbt_cmd_ok(sub, "SUBSCRIBE {w:inbox}:released");
    lbt_cmd_ok(sub, "PSUBSCRIBE lb-inbox:*");
    /* A marker on a channel of its own (one on the lock's would wake q2). */
    lbt_cmd_ok(sub, "SUBSCRIBE w:inbox-marker");

    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j1, j2;
    lbt_job_start(&j1, q1, w1, 30000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:inbox}:queue") == 1 && lbt_stats_of(w1).blocked == 1);
    lbt_job_start(&j2, q2, w2, 30000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:inbox}:queue") == 2 && lbt_stats_of(w2).blocked == 1);
    char first[LB_TOKEN_LEN + 1], place[32];
    redisReply *z = redisCommand(lbt_conn, "ZRANGE {w:inbox}:queue 0 0 WITHSCORES");
    assert_true(z && z->type == REDIS_REPLY_ARRAY && z->elements == 2);
    snprintf(first, sizeof first, "%s", z->element[0]->str);
    snprintf(place, sizeof place, "%.0f", atof(z->element[1]->str));
    freeReplyObject(z);

    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j1), LB_OK);
    assert_int_equal(lbt_stats_of(w1).handoffs, 1);
    lbt_cmd_ok(lbt_conn, "PUBLISH w:inbox-marker marker");
    /* In order: the hand-off on an inbox, then the marker; nothing between.
     * The grant names the token and the queue place it was given for. */
    char msg[256], want[256];
    next_message(sub, msg, sizeof msg);
    assert_memory_equal(msg, "lb-inbox:", 9);
    snprintf(want, sizeof want, " %s %s", first, place);
    assert_string_equal(strchr(msg, ' '), want);
    next_message(sub, msg, sizeof msg);
    assert_string_equal(msg, "w:inbox-marker marker");
    assert_int_equal(lbt_stats_of(w2).handoffs, 0);

    lbt_job_end(&j1); /* releases: the lock goes to q2 */
    assert_int_equal(lbt_job_join(&j2), LB_OK);
    assert_int_equal(lbt_stats_of(w2).handoffs, 1);
    lbt_job_end(&j2);
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
    lb_waiter *w = lbt_new_refusable_waiter();
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 5000;
    o.fair_lease_ms = 120000;
    lb_lock *h = lbt_new_lock("w:down", 1, 2, 100);
    lb_lock *q = lbt_lock_with("w:down", &o);
    assert_int_equal(lb_lock_acquire_wait(q, lb_on_conn(lbt_short), w, 1000), LB_OK); /* subscribes the inbox */
    assert_int_equal(lb_lock_release(q, lb_on_conn(lbt_conn)), LB_OK);
    LBT_EVENTUALLY(lbt_stats_of(w).inbox == 1);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    uint64_t sleeps = lbt_stats_of(w).sleeps;
    lbt_job j;
    lbt_job_start(&j, q, w, 60000);
    /* Queued, subscribed (the first sleep), attempted again, and now in the
     * queued sleep that only a message or an event ends early. */
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:down}:queue") == 1 && lbt_stats_of(w).sleeps == sleeps + 2 &&
               lbt_stats_of(w).blocked == 1);
    redisReply *z = redisCommand(lbt_conn, "ZRANGE {w:down}:queue 0 0");
    assert_true(z && z->type == REDIS_REPLY_ARRAY && z->elements == 1);
    char token[LB_TOKEN_LEN + 1];
    snprintf(token, sizeof token, "%s", z->element[0]->str);
    freeReplyObject(z);
    /* The queue entry names the inbox. */
    redisReply *e = redisCommand(lbt_conn, "HGET {w:down}:fair %s", token);
    assert_true(e && e->type == REDIS_REPLY_STRING && strstr(e->str, " lb-inbox:"));
    freeReplyObject(e);

    __atomic_store_n(&lbt_refuse_connects, 1, __ATOMIC_RELEASE);
    lbt_cmd_ok(lbt_conn, "CLIENT KILL TYPE pubsub");
    LBT_EVENTUALLY(!lbt_stats_of(w).connected);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK); /* handed to q, told nobody */
    assert_string_equal(lbt_get(lbt_conn, "w:down"), token);
    assert_false(lbt_job_done(&j));
    __atomic_store_n(&lbt_refuse_connects, 0, __ATOMIC_RELEASE);
    LBT_EVENTUALLY(lbt_job_done(&j));
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_true(lb_lock_info_of(q).held);
    assert_string_equal(lb_lock_info_of(q).token, token);
    lbt_job_end(&j);
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
    lb_lock *h = lbt_new_lock("w:linger", 1, 2, 100), *q = lbt_new_lock("w:linger", 1, 2000, 2000);
    (void)lbt_warmed_up(q);
    /* A fresh channel: queued, then again once subscribed (2); or, when the
     * hand-off lands before the subscription is confirmed, the first attempt
     * alone (1): the order depends on scheduling. */
    assert_in_range(fair_round(h, q, w), 1, 2);
    assert_int_equal(lbt_stats_of(w).channels, 1);
    /* The inbox's subscription is confirmed on the waiter's thread, maybe
     * after that first hand-off: a wait that begins before it attempts again
     * once it is confirmed, to name the inbox (2 commands). */
    LBT_EVENTUALLY(lbt_stats_of(w).inbox == 1);
    assert_int_equal(fair_round(h, q, w), 1);
    assert_int_equal(fair_round(h, q, w), 1);
    assert_int_equal(lbt_stats_of(w).subscribes, 1);
    lb_waiter_free(w);

    w = new_waiter_lingering(50);
    assert_in_range(fair_round(h, q, w), 1, 2);
    LBT_EVENTUALLY(lbt_stats_of(w).channels == 0);
    assert_in_range(fair_round(h, q, w), 1, 2);
    assert_int_equal(lbt_stats_of(w).subscribes, 2); /* let go, then subscribed anew */
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(q);
}

/* A waiter that died while queued (its connection killed) keeps its place
 * until its lease lapses; then the release skips it. */
static void test_a_dead_waiter_is_skipped_once_its_lease_lapses(void **state) {
    (void)state;
    lb_waiter *w = lbt_new_waiter();
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 100;
    o.fair_lease_ms = 400;
    lb_lock *h = lbt_new_lock("w:dead", 1, 2, 100), *d = lbt_lock_with("w:dead", &o),
            *b = lbt_new_lock("w:dead", 1, 2000, 2000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job jd, jb;
    lbt_job_start(&jd, d, w, 30000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:dead}:queue") == 1);
    lbt_job_start(&jb, b, w, 5000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:dead}:queue") == 2);
    char tokens[2][33];
    assert_int_equal(lbt_queue_tokens("{w:dead}:queue", tokens, 2), 2);
    lbt_cmd_ok(lbt_conn, "CLIENT KILL ID %lld", jd.client_id);
    assert_int_equal(lbt_job_join(&jd), LB_EIO); /* died, still queued */
    lbt_sleep_ms(600);                           /* its lease (400 ms) lapses */
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_string_equal(lbt_get(lbt_conn, "w:dead"), tokens[1]);
    assert_int_equal(lbt_job_join(&jb), LB_OK);
    assert_string_equal(lb_lock_info_of(b).token, tokens[1]);
    assert_false(lbt_queued("{w:dead}:queue", tokens[0]));
    lbt_job_end(&jb);
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
    redisContext *cc = lbt_redis_connect(&lbt_server);
    /* Waiting through the waiter (see lbt_too_short_to_block): the queue's
     * path, which these tests are about. */
    if (cc && c->w) redisSetTimeout(cc, lbt_too_short_to_block);
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
        cs[i].l = lbt_lock_with(key, o);
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
    lb_waiter *w = lbt_new_waiter();
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

/* Fair threads keep the lock busy: through a waiter they fill the queue;
 * on their own connections (baton) they mark the baton list. */
static int queued(const char *queue, int baton) {
    if (!baton) return lbt_int(lbt_conn, "ZCARD %s", queue) >= 1;
    char mark[96];
    snprintf(mark, sizeof mark, "%.*s:bwait", (int)(strlen(queue) - strlen(":queue")), queue);
    return lbt_int(lbt_conn, "EXISTS %s", mark) == 1;
}

/* A client outside the queue (fair mode off) beside fair threads that keep
 * the lock busy: refused for 100 ms it notes itself, so every
 * fair_yield_every hand-offs the lock is left free for fair_yield_ms, and the
 * outsider, polling every 50 ms, gets its turn. (Unnoted, it never would:
 * windows open only for outsiders seen.) */
static void non_fair_client_gets_a_turn(const char *key, const char *queue, int baton) {
    enum { K = 3 };
    lb_waiter *w = baton ? NULL : lbt_new_waiter();
    contender cs[K];
    pthread_t ts[K];
    int stop = 0, inside = 0, overlap = 0;
    lb_lock_options o = lbt_yielding(8, 150);
    start_contenders(cs, ts, K, key, &o, w, &stop, &inside, &overlap);
    for (int tries = 0; !queued(queue, baton) && tries < 2000; tries++)
        lbt_sleep_ms(5);
    lb_lock *outsider = lbt_new_lock(key, 0, 50, 50);
    int rc = lb_lock_acquire(outsider, lb_on_conn(lbt_conn), 8000);
    int ours = rc == LB_OK && strcmp(lbt_get(lbt_conn, key), lb_lock_info_of(outsider).token) == 0;
    int released = rc == LB_OK ? lb_lock_release(outsider, lb_on_conn(lbt_conn)) : LB_OK;
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
    if (w) lb_waiter_free(w);
}

static void test_a_non_fair_client_beside_fair_ones_gets_a_turn(void **state) {
    (void)state;
    non_fair_client_gets_a_turn("w:mixed", "{w:mixed}:queue", 0);
}

/* The same beside fair threads passing the baton on their own connections. */
static void test_a_non_fair_client_beside_baton_passers_gets_a_turn(void **state) {
    (void)state;
    non_fair_client_gets_a_turn("w:bmixed", "{w:bmixed}:queue", 1);
}

/* A field of the fair state hash as a number, -1 when absent. */
static long long state_field(const char *hash, const char *field) {
    redisReply *r = redisCommand(lbt_conn, "HGET %s %s", hash, field);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
    freeReplyObject(r);
    return v;
}

/* Windows for outsiders open only for one seen: fair threads alone hand the
 * lock on and on without ever leaving it free (no window noted in the state),
 * and a fair client polling with tries, refused and noted, brings windows in
 * which it gets the lock. */
static void windows_open_once_seen(const char *key, const char *state_key, int baton) {
    enum { K = 3, ALONE = 200 };
    lb_waiter *w = baton ? NULL : lbt_new_waiter();
    contender cs[K];
    pthread_t ts[K];
    int stop = 0, inside = 0, overlap = 0;
    lb_lock_options o = lbt_yielding(2, 5);
    start_contenders(cs, ts, K, key, &o, w, &stop, &inside, &overlap);
    for (int tries = 0; rounds(cs, K) < ALONE && tries < 2000; tries++) lbt_sleep_ms(5);
    int alone = rounds(cs, K);
    long long window_alone = state_field(state_key, "~last");
    /* Another fair client polls with tries every millisecond (outside the
     * queue, as lb_lock_try_acquire is): refused while the queue holds the
     * lock, it is noted and a window opens. */
    lb_lock *outsider = lbt_lock_with(key, &o);
    int got = 0;
    for (int tries = 0; got == 0 && tries < 4000; tries++) {
        if (lb_lock_try_acquire(outsider, lb_on_conn(lbt_conn)) == LB_OK) {
            got++;
            lb_lock_release(outsider, lb_on_conn(lbt_conn));
        }
        lbt_sleep_ms(1);
    }
    long long window_seen = state_field(state_key, "~last");
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < K; i++) {
        pthread_join(ts[i], NULL);
        lb_lock_free(cs[i].l);
    }
    lb_lock_free(outsider);
    if (w) lb_waiter_free(w);
    assert_true(alone >= ALONE);
    assert_int_equal(window_alone, -1);
    assert_true(got > 0);
    assert_true(window_seen > 0);
    assert_false(overlap);
}

static void test_windows_open_only_once_an_outsider_is_seen(void **state) {
    (void)state;
    windows_open_once_seen("w:thin", "{w:thin}:fair", 0);
}

/* The same with fair threads passing the baton on their own connections. */
static void test_baton_windows_open_only_once_an_outsider_is_seen(void **state) {
    (void)state;
    windows_open_once_seen("w:bthin", "{w:bthin}:fair", 1);
}

/* A queue alone is never kept off the lock: with a window of 5 s due after
 * every hand-off, the second hand-off still goes to the waiter at once (it
 * would otherwise wait out its 2 s). */
static void test_a_queue_alone_is_never_kept_off_the_lock(void **state) {
    (void)state;
    lb_waiter *w = lbt_new_waiter();
    lb_lock_options o = lbt_yielding(1, 5000);
    lb_lock *h = lbt_lock_with("w:alone", &o), *a = lbt_lock_with("w:alone", &o),
            *b = lbt_lock_with("w:alone", &o);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job ja, jb;
    lbt_job_start(&ja, a, w, 2000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:alone}:queue") == 1);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&ja), LB_OK);
    lbt_job_start(&jb, b, w, 2000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:alone}:queue") == 1);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ja.c)), LB_OK);
    int rc = lbt_job_join(&jb);
    lbt_job_end(&ja);
    lbt_job_end(&jb);
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
    lb_lock *plain = lbt_new_lock("w:plain", 0, 20, 20);
    lbt_cmd_ok(lbt_conn, "SET w:plain someone-else PX 30000");
    assert_int_equal(lb_lock_acquire(plain, lb_on_conn(lbt_conn), 300), LB_ETIMEDOUT);
    long long no_queue = lbt_int(lbt_conn, "EXISTS {w:plain}:fair");
    lbt_cmd_ok(lbt_conn, "DEL w:plain");

    lb_waiter *w = lbt_new_waiter();
    lb_lock *h = lbt_new_lock("w:outside", 1, 2, 100), *q = lbt_new_lock("w:outside", 1, 2000, 2000),
            *out = lbt_new_lock("w:outside", 0, 20, 20);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job jq;
    lbt_job_start(&jq, q, w, 30000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:outside}:queue") == 1);
    long long before = state_field("{w:outside}:fair", "~seen");
    assert_int_equal(lb_lock_acquire(out, lb_on_conn(lbt_conn), 300), LB_ETIMEDOUT);
    long long noted = state_field("{w:outside}:fair", "~seen");
    long long ttl = lbt_int(lbt_conn, "PTTL {w:outside}:fair");
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&jq), LB_OK);
    lbt_job_end(&jq);
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
    lb_waiter *w = lbt_new_waiter();
    lb_lock *h = lbt_new_lock("w:note", 1, 2, 100), *a = lbt_new_lock("w:note", 1, 2000, 2000),
            *b = lbt_new_lock("w:note", 1, 2000, 2000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job ja, jb;
    lbt_job_start(&ja, a, w, 30000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:note}:queue") == 1);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK); /* handed to a */
    assert_int_equal(lbt_job_join(&ja), LB_OK);
    /* a holds by a fair grant: b queueing behind it notes nobody. */
    lbt_job_start(&jb, b, w, 30000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:note}:queue") == 1 && lbt_stats_of(w).blocked == 1);
    long long quiet = state_field("{w:note}:fair", "~seen");
    /* A client outside fair mode takes the key as a's lease ends. */
    lbt_job_end(&ja);
    assert_int_equal(lbt_job_join(&jb), LB_OK);
    lbt_job_end(&jb);
    lbt_cmd_ok(lbt_conn, "SET w:note someone-else PX 30000");
    assert_int_equal(lb_lock_acquire_wait(a, lb_on_conn(lbt_short), w, 50), LB_ETIMEDOUT);
    long long noted = state_field("{w:note}:fair", "~seen");
    lbt_cmd_ok(lbt_conn, "DEL w:note");
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
    lb_waiter *w = lbt_new_waiter();
    lb_lock *h = lbt_new_lock("w:leave", 1, 2, 100), *b = lbt_new_lock("w:leave", 1, 2, 20);
    lb_lock *t = lbt_new_lock("w:leave", 1, 2, 100);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lb_lock_acquire_wait(b, lb_on_conn(lbt_short), w, 100), LB_ETIMEDOUT);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:leave}:queue"), 0);
    assert_false(lb_lock_info_of(b).held);

    /* Queued behind the holder, b2 is the one a free lock is kept for. */
    lb_lock *b2 = lbt_new_lock("w:leave", 1, 300, 300);
    lbt_job j;
    lbt_job_start(&j, b2, NULL, 5000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:leave}:queue") == 1);
    char tokens[1][33];
    assert_int_equal(lbt_queue_tokens("{w:leave}:queue", tokens, 1), 1);
    lbt_cmd_ok(lbt_conn, "DEL w:leave"); /* as a legacy release would: nothing handed */
    assert_int_equal(lb_lock_try_acquire(t, lb_on_conn(lbt_conn)), LB_EBUSY);
    const char *v = lbt_get(lbt_conn, "w:leave");
    assert_true(v[0] == '\0' || strcmp(v, tokens[0]) == 0);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_string_equal(lb_lock_info_of(b2).token, tokens[0]);
    lbt_job_end(&j);
    lb_lock_free(b2);
    assert_int_equal(lb_lock_try_acquire(t, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lb_lock_release(t, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_ELOST);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(b);
    lb_lock_free(t);
}

/* A fair waiter treats a key without TTL (a legacy lock) as held for good and
 * a key of another type as an error; neither is ever written. */
static void test_fair_mode_never_touches_a_foreign_key(void **state) {
    (void)state;
    lb_lock *l = lbt_new_lock("w:foreign", 1, 2, 20);
    lbt_cmd_ok(lbt_conn, "SET w:foreign 1700000000000");
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(lbt_conn), NULL, 100), LB_ETIMEDOUT);
    assert_int_equal(lb_lock_info_of(l).holder_ttl_ms, -1);
    assert_string_equal(lbt_get(lbt_conn, "w:foreign"), "1700000000000");
    assert_int_equal(lbt_int(lbt_conn, "PTTL w:foreign"), -1);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:foreign}:queue"), 0);
    lbt_cmd_ok(lbt_conn, "DEL w:foreign");
    lbt_cmd_ok(lbt_conn, "HSET w:foreign f v");
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(lbt_conn)), LB_EWRONGTYPE);
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(lbt_conn), NULL, 100), LB_EWRONGTYPE);
    assert_int_equal(lbt_int(lbt_conn, "HLEN w:foreign"), 1);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:foreign}:queue"), 0);
    lbt_cmd_ok(lbt_conn, "DEL w:foreign");
    lb_lock_free(l);
}

/* Fencing numbers travel with a hand-off and keep growing. */
static void test_a_hand_off_carries_the_next_fencing_number(void **state) {
    (void)state;
    lb_waiter *w = lbt_new_waiter();
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fencing = 1;
    o.backoff_min_ms = o.backoff_max_ms = 2000;
    lb_lock *h = lbt_lock_with("w:fence", &o), *b = lbt_lock_with("w:fence", &o);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    int64_t first = lb_lock_info_of(h).fence;
    assert_true(first > 0);
    lbt_job j;
    lbt_job_start(&j, b, w, 20000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:fence}:queue") == 1 && lbt_stats_of(w).sleeps >= 2);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_int_equal(lb_lock_info_of(b).fence, first + 1);
    assert_int_equal(lbt_stats_of(w).handoffs, 1);
    lbt_job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fair_hand_offs_follow_arrival_order),
        cmocka_unit_test(test_a_queued_waiter_needs_one_command_when_the_channel_is_watched),
        cmocka_unit_test(test_a_queued_listening_waiter_attempts_no_more_until_its_hand_off),
        cmocka_unit_test(test_a_fair_hand_off_wakes_only_the_client_it_names),
        cmocka_unit_test(test_a_hand_off_missed_while_the_waiter_was_down_is_found_after_it_is_back),
        cmocka_unit_test(test_a_channel_stays_subscribed_for_linger_ms_after_its_last_wait),
        cmocka_unit_test(test_a_dead_waiter_is_skipped_once_its_lease_lapses),
        cmocka_unit_test(test_no_fair_waiter_starves_among_contending_threads),
        cmocka_unit_test(test_a_non_fair_client_beside_fair_ones_gets_a_turn),
        cmocka_unit_test(test_a_non_fair_client_beside_baton_passers_gets_a_turn),
        cmocka_unit_test(test_windows_open_only_once_an_outsider_is_seen),
        cmocka_unit_test(test_baton_windows_open_only_once_an_outsider_is_seen),
        cmocka_unit_test(test_a_queue_alone_is_never_kept_off_the_lock),
        cmocka_unit_test(test_a_refused_outsider_notes_itself_only_beside_a_queue),
        cmocka_unit_test(test_a_fair_waiter_notes_a_holder_outside_the_queue),
        cmocka_unit_test(test_a_fair_waiter_that_times_out_leaves_the_queue),
        cmocka_unit_test(test_fair_mode_never_touches_a_foreign_key),
        cmocka_unit_test(test_a_hand_off_carries_the_next_fencing_number),
    };
    return cmocka_run_group_tests(tests, lbt_wait_setup, lbt_wait_teardown);
}
