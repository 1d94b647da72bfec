/* Waiting that wakes on release, through a waiter, against a real redis-server:
 * wake-ups counted in attempts rather than timed, the TTL bound for releases
 * that publish nothing, a killed subscriber, one waiter for many threads; and
 * what a waiter and a wait refuse, authentication, allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/failing_alloc.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "harness/wait_fixture.h"
#include "lockbridge/lockbridge.h"

/* With a back-off of 5 s and a deadline of 4 s, only the release message can
 * get the waiter the lock: its second sleep is cut short by the release. */
static void test_a_release_wakes_the_waiter_long_before_its_back_off(void **state) {
    (void)state;
    lb_waiter *w = lbt_new_waiter();
    lb_lock *a = lbt_new_lock("w:wake", 0, 2, 100), *b = lbt_new_lock("w:wake", 0, 5000, 5000);
    uint64_t base = lbt_warmed_up(b);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_job_start(&j, b, w, 4000);
    /* First sleep: awaiting the subscription; second: after the attempt that
     * followed it. The release comes during the second. */
    LBT_EVENTUALLY(lbt_stats_of(w).sleeps >= 2 && lbt_stats_of(w).blocked == 1);
    assert_int_equal(lb_lock_release(a, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_string_equal(lbt_get(lbt_conn, "w:wake"), lb_lock_info_of(b).token);
    /* Three attempts: SET+PTTL, SET+PTTL after subscribing, SET on release. */
    assert_int_equal(lb_lock_info_of(b).commands - base, 5);
    lb_waiter_stats st = lbt_stats_of(w);
    assert_true(st.messages >= 1);
    assert_int_equal(st.subscribes, 1);
    lbt_job_end(&j);
    /* Nobody watches now: the channel is unsubscribed and forgotten. */
    LBT_EVENTUALLY(lbt_stats_of(w).channels == 0);
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
    lb_waiter *w1 = lbt_new_waiter(), *w2 = lbt_new_waiter();
    lb_lock *h = lbt_new_lock("w:deaf", 0, 2, 100), *a = lbt_new_lock("w:deaf", 0, 1000, 1000),
            *b = lbt_new_lock("w:deaf", 0, 1000, 1000);
    (void)lbt_warmed_up(a);
    (void)lbt_warmed_up(b);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job ja, jb;
    lbt_job_start(&ja, a, w1, 30000);
    lbt_job_start(&jb, b, w2, 30000);
    /* Each: attempted, slept awaiting its subscription, attempted, asleep. */
    LBT_EVENTUALLY(lbt_stats_of(w1).blocked == 1 && lbt_stats_of(w1).sleeps == 2 &&
               lbt_stats_of(w2).blocked == 1 && lbt_stats_of(w2).sleeps == 2);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    LBT_EVENTUALLY(lbt_job_done(&ja) || lbt_job_done(&jb));
    lbt_job *win = lbt_job_done(&ja) ? &ja : &jb, *lose = win == &ja ? &jb : &ja;
    lb_waiter *lw = win == &ja ? w2 : w1;
    assert_int_equal(lbt_job_join(win), LB_OK);
    /* The loser woke, attempted, and sleeps again. */
    LBT_EVENTUALLY(lbt_stats_of(lw).sleeps == 3 && lbt_stats_of(lw).blocked == 1);
    lbt_job_end(win); /* releases, and publishes */
    lbt_sleep_ms(300);
    int done_early = lbt_job_done(lose);
    uint64_t sleeps = lbt_stats_of(lw).sleeps;
    assert_int_equal(lbt_job_join(lose), LB_OK);
    lbt_job_end(lose);
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
    lb_waiter *w = lbt_new_waiter();
    lb_lock *l = lbt_new_lock("w:lose", 0, 30, 1000);
    (void)lbt_warmed_up(l);
    lbt_cmd_ok(lbt_conn, "SET w:lose someone PX 30000");
    lbt_job j;
    lbt_job_start(&j, l, w, 20000);
    /* Its back-off grows with every sleep a timeout ends: 30, 60, ... 1000. */
    LBT_EVENTUALLY(lbt_stats_of(w).blocked == 1 && lbt_stats_of(w).sleeps >= 7);
    int64_t slowest = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t before = lbt_stats_of(w).sleeps;
        lbt_cmd_ok(lbt_conn, "SET w:lose someone PX 30000");
        lbt_int(lbt_conn, "PUBLISH {w:lose}:released released");
        int64_t heard = lbt_mono_ms();
        /* The deaf step begins, then, after its attempt, the next sleep. */
        LBT_EVENTUALLY(lbt_stats_of(w).sleeps >= before + 2);
        int64_t ms = lbt_mono_ms() - heard;
        if (ms > slowest) slowest = ms;
    }
    assert_false(lbt_job_done(&j));
    lbt_cmd_ok(lbt_conn, "DEL w:lose");
    lbt_int(lbt_conn, "PUBLISH {w:lose}:released released");
    assert_int_equal(lbt_job_join(&j), LB_OK);
    lbt_job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(l);
    assert_true(slowest < 200);
}

/* A legacy client releases with a bare DEL and publishes nothing: the sleep
 * is bounded by the holder's TTL (400 ms), far below the 5 s back-off, so the
 * waiter gets the lock before its 3 s deadline. */
static void test_a_bare_del_is_noticed_within_the_holders_ttl(void **state) {
    (void)state;
    lb_waiter *w = lbt_new_waiter();
    lb_lock *b = lbt_new_lock("w:del", 0, 5000, 5000);
    uint64_t base = lbt_warmed_up(b);
    lbt_cmd_ok(lbt_conn, "SET w:del legacy-holder PX 400");
    lbt_job j;
    lbt_job_start(&j, b, w, 3000);
    LBT_EVENTUALLY(lbt_stats_of(w).sleeps >= 2 || lbt_job_done(&j));
    lbt_cmd_ok(lbt_conn, "DEL w:del");
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_true(lb_lock_info_of(b).commands - base <= 5);
    assert_int_equal(lbt_stats_of(w).messages, 0);
    lbt_job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(b);
}

/* The subscriber is killed and cannot reconnect: a release goes unheard, the
 * waiter falls back to its back-off (300 ms) and still gets the lock, never
 * before the holder lets go. Once connecting works again the waiter is back
 * and a release wakes the next wait at once. */
static void test_a_killed_subscriber_degrades_to_back_off_and_reconnects(void **state) {
    (void)state;
    lb_waiter *w = lbt_new_refusable_waiter();
    lb_lock *a = lbt_new_lock("w:kill", 0, 2, 100), *b = lbt_new_lock("w:kill", 0, 300, 300);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_job_start(&j, b, w, 10000);
    LBT_EVENTUALLY(lbt_stats_of(w).sleeps >= 2);
    __atomic_store_n(&lbt_refuse_connects, 1, __ATOMIC_RELEASE);
    lbt_cmd_ok(lbt_conn, "CLIENT KILL TYPE pubsub");
    LBT_EVENTUALLY(!lbt_stats_of(w).connected);
    /* Attempts go on and fail while the holder keeps the lock. */
    lbt_sleep_ms(700);
    assert_false(lbt_job_done(&j));
    assert_string_equal(lbt_get(lbt_conn, "w:kill"), lb_lock_info_of(a).token);
    assert_int_equal(lb_lock_release(a, lb_on_conn(lbt_conn)), LB_OK); /* published to nobody */
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_string_equal(lbt_get(lbt_conn, "w:kill"), lb_lock_info_of(b).token);
    assert_false(lbt_stats_of(w).connected);
    lbt_job_end(&j);
    /* Refused connections were retried after a delay doubling from 5 to 20 ms
     * (about 50 in this time), not in a tight loop. */
    int tries = __atomic_load_n(&lbt_refused_connects, __ATOMIC_ACQUIRE);
    assert_true(tries >= 1 && tries < 200);

    __atomic_store_n(&lbt_refuse_connects, 0, __ATOMIC_RELEASE);
    LBT_EVENTUALLY(lbt_stats_of(w).connected);
    assert_true(lbt_stats_of(w).reconnects >= 1);
    lb_lock *c = lbt_new_lock("w:kill", 0, 5000, 5000);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(lbt_conn)), LB_OK);
    uint64_t sleeps = lbt_stats_of(w).sleeps;
    lbt_job_start(&j, c, w, 4000);
    LBT_EVENTUALLY(lbt_stats_of(w).sleeps >= sleeps + 2 && lbt_stats_of(w).blocked == 1);
    assert_int_equal(lb_lock_release(a, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    lbt_job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(a);
    lb_lock_free(b);
    lb_lock_free(c);
}

/* Subscribers of a channel, as the server counts them. */
static long long subscribers(const char *channel) {
    redisReply *r = redisCommand(lbt_conn, "PUBSUB NUMSUB %s", channel);
    assert_non_null(r);
    assert_true(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    long long n = r->element[1]->integer;
    freeReplyObject(r);
    return n;
}

/* A lock released twice within LB__CHURN_GAP_MS (20 ms) turns over faster
 * than waking its waits helps (each release would wake them all, one could
 * win): the waiter lets its channel go, the wait polls its back-off
 * meanwhile and still gets the lock, and a second later the channel is
 * subscribed again for the wait still watching it. */
static void test_a_lock_that_churns_is_let_go_and_its_waits_poll(void **state) {
    (void)state;
    lb_waiter *w = lbt_new_waiter();
    lb_lock *l = lbt_new_lock("w:churn", 0, 5, 20);
    (void)lbt_warmed_up(l);
    lbt_cmd_ok(lbt_conn, "SET w:churn someone PX 30000");
    lbt_job j;
    lbt_job_start(&j, l, w, 20000);
    LBT_EVENTUALLY(subscribers("{w:churn}:released") == 1 && lbt_stats_of(w).blocked == 1);
    /* Two releases 1 ms apart, the key held again by someone else. */
    lbt_int(lbt_conn, "PUBLISH {w:churn}:released released");
    lbt_int(lbt_conn, "PUBLISH {w:churn}:released released");
    LBT_EVENTUALLY(subscribers("{w:churn}:released") == 0);
    assert_int_equal(lbt_stats_of(w).pauses, 1);
    assert_false(lbt_job_done(&j));
    /* Let go, the wait polls: a bare DEL, which publishes nothing, is found
     * by its back-off of at most 20 ms, long before the pause ends. */
    uint64_t subs = lbt_stats_of(w).subscribes;
    lbt_cmd_ok(lbt_conn, "DEL w:churn");
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_int_equal(lbt_stats_of(w).subscribes, subs);
    lbt_job_end(&j);
    /* A wait that begins during the pause polls, and once the pause is over
     * its channel is subscribed again. */
    lbt_cmd_ok(lbt_conn, "SET w:churn someone PX 30000");
    assert_int_equal(subscribers("{w:churn}:released"), 0);
    lbt_job_start(&j, l, w, 20000);
    LBT_EVENTUALLY(subscribers("{w:churn}:released") == 1);
    lbt_cmd_ok(lbt_conn, "DEL w:churn");
    assert_int_equal(lbt_job_join(&j), LB_OK);
    lbt_job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(l);
}

/* One waiter serves many threads and many locks at once. */
static void test_one_waiter_serves_many_threads_and_locks(void **state) {
    (void)state;
    enum { N = 6 };
    lb_waiter *w = lbt_new_waiter();
    lb_lock *holders[N], *waiters[N];
    lbt_job jobs[N];
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "w:many:%d", i % 3);
        holders[i] = lbt_new_lock(key, 0, 2, 100);
        waiters[i] = lbt_new_lock(key, 0, 5000, 5000);
    }
    for (int i = 0; i < 3; i++) assert_int_equal(lb_lock_try_acquire(holders[i], lb_on_conn(lbt_conn)), LB_OK);
    for (int i = 0; i < N; i++) lbt_job_start(&jobs[i], waiters[i], w, 20000);
    LBT_EVENTUALLY(lbt_stats_of(w).blocked == N);
    assert_int_equal(lbt_stats_of(w).channels, 3);
    /* Each release lets one waiter of that key in; its release the next. */
    for (int i = 0; i < 3; i++) assert_int_equal(lb_lock_release(holders[i], lb_on_conn(lbt_conn)), LB_OK);
    int finished = 0;
    while (finished < N) {
        for (int i = 0; i < N; i++) {
            if (jobs[i].c && lbt_job_done(&jobs[i])) {
                assert_int_equal(lbt_job_join(&jobs[i]), LB_OK);
                lbt_job_end(&jobs[i]);
                jobs[i].c = NULL;
                finished++;
            }
        }
        lbt_sleep_ms(2);
    }
    /* One SUBSCRIBE per key, and one more for each key let go meanwhile
     * (the holder's release and the first waiter's come within a few ms:
     * churn) and still watched when its pause ended. */
    lb_waiter_stats st = lbt_stats_of(w);
    assert_true(st.subscribes >= 3 && st.subscribes <= 3 + st.pauses);
    lb_waiter_free(w);
    for (int i = 0; i < N; i++) {
        lb_lock_free(holders[i]);
        lb_lock_free(waiters[i]);
    }
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
    wo.host = "127.0.0.1";
    wo.port = 0;
    lb_waiter *w = (lb_waiter *)&wo;
    assert_int_equal(lb_waiter_new(&w, &wo), LB_EINVAL);
    assert_null(w);
    lb_waiter_options_init(&wo);
    wo.port = lbt_server.port;
    wo.host = "127.0.0.1";
    wo.connect = lbt_refusable_connect;
    __atomic_store_n(&lbt_refuse_connects, 1, __ATOMIC_RELEASE);
    assert_int_equal(lb_waiter_new(&w, &wo), LB_EIO);
    __atomic_store_n(&lbt_refuse_connects, 0, __ATOMIC_RELEASE);
    assert_null(w);
    lb_waiter_free(NULL);
    lb_waiter_stats st;
    lb_waiter_stats_get(NULL, &st);
    assert_int_equal(st.channels, 0);

    lb_waiter_options_init(&wo);
    wo.host = "127.0.0.1";
    wo.port = lbt_server.port;
    wo.username = "someone"; /* a username needs a password */
    assert_int_equal(lb_waiter_new(&w, &wo), LB_EINVAL);
    lb_waiter_options_init(&wo);
    wo.host = "127.0.0.1";
    wo.port = lbt_server.port;
    wo.linger_ms = -1;
    assert_int_equal(lb_waiter_new(&w, &wo), LB_EINVAL);

    l = lbt_new_lock("w:bad", 0, 2, 100);
    assert_int_equal(lb_lock_acquire_wait(NULL, lb_on_conn(lbt_conn), NULL, 10), LB_EINVAL);
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(NULL), NULL, 10), LB_EINVAL);
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(lbt_conn), NULL, -1), LB_EINVAL);
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(lbt_conn), NULL, 0), LB_OK);
    assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(lbt_conn), NULL, 0), LB_ESTATE);
    assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
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
    o.host = "127.0.0.1";
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
    o.port = lbt_server.port;
    assert_int_equal(lb_waiter_new(&w, &o), LB_OK);
    assert_string_equal(why, "");
    lb_waiter_free(w);
}

/* A waiter has no default server: options that name neither a host nor a
 * connect callback are refused, rather than watching 127.0.0.1:6379 while the
 * locks live elsewhere. */
static void test_a_waiter_without_a_server_is_refused(void **state) {
    (void)state;
    char why[256] = "untouched";
    lb_waiter_options o;
    lb_waiter_options_init(&o);
    o.errbuf = why;
    o.errbuf_size = sizeof why;
    lb_waiter *w = (lb_waiter *)&o;
    assert_int_equal(lb_waiter_new(&w, &o), LB_EINVAL);
    assert_null(w);
    assert_non_null(strstr(why, "no server"));
    o.port = lbt_server.port; /* a port alone names no server either */
    assert_int_equal(lb_waiter_new(&w, &o), LB_EINVAL);
    assert_non_null(strstr(why, "no server"));
    assert_int_equal(lb_waiter_new(&w, NULL), LB_EINVAL);
    assert_null(w);
    o.host = "127.0.0.1";
    assert_int_equal(lb_waiter_new(&w, &o), LB_OK);
    assert_string_equal(why, "");
    lb_waiter_free(w);
}

static void test_the_waiter_authenticates(void **state) {
    (void)state;
    lbt_cmd_ok(lbt_conn, "CONFIG SET requirepass s3cret");
    lb_waiter_options wo;
    lb_waiter_options_init(&wo);
    wo.host = "127.0.0.1";
    wo.port = lbt_server.port;
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
    lbt_cmd_ok(lbt_conn, "CONFIG SET requirepass \"\"");
    assert_int_equal(refused, LB_EREDIS);
    assert_non_null(strstr(refusal, "AUTH"));
    assert_true(strstr(refusal, "WRONGPASS") || strstr(refusal, "invalid password"));
    assert_int_equal(accepted, LB_OK);
    assert_true(lbt_stats_of(w).connected);
    lb_waiter_free(w);
}

/* A fair lock and a waiter: failing the n-th allocation, for every n,
 * leaves nothing live. */
static void test_every_allocation_failure_is_clean(void **state) {
    (void)state;
    for (int n = 1;; n++) {
        lbt_failing_alloc cnt;
        lb_allocator alloc = lbt_failing_allocator(&cnt, n);
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
        wo.host = "127.0.0.1";
        wo.port = lbt_server.port;
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
        assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(lbt_conn), w, 1000), LB_OK);
        assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
        lb_waiter_free(w);
        lb_lock_free(l);
        assert_int_equal(cnt.live, 0);
        break;
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_release_wakes_the_waiter_long_before_its_back_off),
        cmocka_unit_test(test_a_waiter_that_lost_the_race_after_a_release_sleeps_its_back_off),
        cmocka_unit_test(test_a_waiter_that_keeps_losing_races_after_releases_asks_again_soon),
        cmocka_unit_test(test_a_bare_del_is_noticed_within_the_holders_ttl),
        cmocka_unit_test(test_a_killed_subscriber_degrades_to_back_off_and_reconnects),
        cmocka_unit_test(test_a_lock_that_churns_is_let_go_and_its_waits_poll),
        cmocka_unit_test(test_one_waiter_serves_many_threads_and_locks),
        cmocka_unit_test(test_bad_options_and_arguments_are_refused),
        cmocka_unit_test(test_a_failed_waiter_new_says_why_in_the_callers_buffer),
        cmocka_unit_test(test_a_waiter_without_a_server_is_refused),
        cmocka_unit_test(test_the_waiter_authenticates),
        cmocka_unit_test(test_every_allocation_failure_is_clean),
    };
    return cmocka_run_group_tests(tests, lbt_wait_setup, lbt_wait_teardown);
}
