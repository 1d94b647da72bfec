/* Polling waits against a real redis-server: the back-off beside a lock turned
 * over fast or beside a fair queue, standing back after a release, and a wait
 * cancelled by its sleep hook, with and without a waiter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/cancel.h"
#include "harness/churn.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "harness/wait_fixture.h"
#include "lockbridge/lockbridge.h"

/* A wait of 8 s with a back-off of 4 s on a lock held for 30 s: only the
 * cancel can end it early. The bound on how soon is generous (2 s, a quarter
 * of the wait); the wait is cancelled within a slice of 10 ms when healthy. */
static void cancel_one_wait(const char *key, int fair, int with_waiter) {
    lbt_canceller c;
    lbt_canceller_init(&c);
    lb_waiter *w = with_waiter ? lbt_new_waiter() : NULL;
    lb_lock *h = lbt_new_lock(key, fair, 2, 100);
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = fair;
    o.backoff_min_ms = 4000;
    o.backoff_max_ms = 4000;
    o.clock = &c.clock;
    lb_lock *b = lbt_lock_with(key, &o);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);

    lbt_job j;
    int64_t start = lbt_mono_ms();
    lbt_job_start(&j, b, w, 8000);
    char queue[64];
    snprintf(queue, sizeof queue, "ZCARD {%s}:queue", key);
    if (fair) LBT_EVENTUALLY(lbt_int(lbt_conn, queue) == 1);
    else lbt_sleep_ms(100);
    assert_false(lbt_job_done(&j));
    lbt_cancel(&c);
    assert_int_equal(lbt_job_join(&j), LB_ECANCELED);
    assert_true(lbt_mono_ms() - start < 2000);

    /* Nothing held, the queue place given up, the handle as good as new. */
    assert_false(lb_lock_info_of(b).held);
    if (fair) assert_int_equal(lbt_int(lbt_conn, queue), 0);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job_end(&j);
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
    lbt_holder h = {lbt_redis_connect(&lbt_server), key};
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
    assert_int_equal(lb_lock_acquire(l, lb_on_conn(lbt_conn), wait_ms), LB_ETIMEDOUT);
    assert_true(sleeps.calls >= 5);
    assert_int_equal(sleeps.after_failures, 0);
    lbt_cmd_ok(lbt_conn, "DEL %s", key);
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
    lbt_cmd_ok(lbt_conn, "HSET {w:queued}:fair ~streak 0");
    lbt_cmd_ok(lbt_conn, "PEXPIRE {w:queued}:fair 60000");
    assert_in_range(longest_sleep_beside("w:queued", 1, 1500), 41, 100);
    assert_true(lbt_int(lbt_conn, "HEXISTS {w:queued}:fair ~seen") == 1); /* it noted itself */
    lbt_cmd_ok(lbt_conn, "DEL {w:queued}:fair");
}

/* An outsider beside a fair queue that has just released lets the others
 * in first: its next wait, begun at once, sleeps the rest of backoff_max_ms
 * (100 ms) before its first attempt, though the lock is free. A wait of 0 ms
 * does not (nothing is waited for), nor does one begun once that time has
 * passed, nor one whose last note found the queue more than a second ago (a
 * client left alone after the queue has gone). */
static void test_an_outsider_beside_a_queue_stands_back_after_its_release(void **state) {
    (void)state;
    lbt_cmd_ok(lbt_conn, "HSET {w:back}:fair ~streak 0");
    lbt_cmd_ok(lbt_conn, "PEXPIRE {w:back}:fair 60000");
    lbt_sleeps sleeps = {0};
    lb_clock clock = {.sleep_ms = lbt_sleeps_record, .ud = &sleeps};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.clock = &clock;
    lb_lock *l = lbt_lock_with("w:back", &o);
    static const struct { int64_t hold_ms, pause_ms, wait_ms, lo, hi; } cases[] = {
        {0, 0, 2000, 50, 100}, /* at once: stands back */
        {0, 0, 0, 0, 0},       /* a try: never */
        {0, 150, 2000, 0, 0},  /* 150 ms after the release: no longer */
        {1100, 0, 2000, 0, 0}, /* the queue last found over a second ago: no */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* Refused for 300 ms, it notes itself after 100 and finds the queue.
         * The holder is a lockbridge token: a value of another kind would
         * be an outside holder, which a wait stands back longer for. */
        lbt_cmd_ok(lbt_conn, "SET w:back 0123456789abcdef0123456789abcdef PX 300");
        assert_int_equal(lb_lock_acquire(l, lb_on_conn(lbt_conn), 5000), LB_OK);
        assert_true(lbt_int(lbt_conn, "HEXISTS {w:back}:fair ~seen") == 1);
        if (cases[i].hold_ms) lbt_sleep_ms((int)cases[i].hold_ms);
        assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
        if (cases[i].pause_ms) lbt_sleep_ms((int)cases[i].pause_ms);
        sleeps.longest_ms = 0;
        assert_int_equal(lb_lock_acquire(l, lb_on_conn(lbt_conn), cases[i].wait_ms), LB_OK);
        if (sleeps.longest_ms < cases[i].lo || sleeps.longest_ms > cases[i].hi)
            fail_msg("case %zu: slept %lld ms before taking a free lock", i, (long long)sleeps.longest_ms);
        assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
        lbt_sleep_ms(150); /* past the stand-back: the next case starts afresh */
    }
    lbt_cmd_ok(lbt_conn, "DEL {w:back}:fair");
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
    lb_lock *l = lbt_lock_with("w:heard", &o);
    for (int listening = 0; listening < 2; listening++) {
        redisContext *sub = NULL;
        if (listening) {
            sub = lbt_redis_connect(&lbt_server);
            assert_non_null(sub);
            freeReplyObject(redisCommand(sub, "SUBSCRIBE {w:heard}:released"));
        }
        assert_int_equal(lb_lock_acquire(l, lb_on_conn(lbt_conn), 1000), LB_OK);
        assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
        sleeps.longest_ms = 0;
        assert_int_equal(lb_lock_acquire(l, lb_on_conn(lbt_conn), 1000), LB_OK);
        if (listening) assert_in_range(sleeps.longest_ms, 50, 100);
        else assert_int_equal(sleeps.longest_ms, 0);
        assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
        if (sub) redisFree(sub);
        lbt_sleep_ms(150);
    }
    lb_lock_free(l);
}

/* One round of the outsider tests: the key is held by a JVM locker's JSON
 * token (a client outside the queue) when our try meets it, then freed; `ago`
 * ms later our wait takes the key, releases it and waits again at once. The
 * longest sleep of that last wait, ms. */
static int64_t wait_after_meeting(lb_lock *l, lbt_sleeps *sleeps, int64_t ago) {
    lbt_cmd_ok(lbt_conn, "SET w:jvm {\"uid\":\"7d0c6f1e\"} PX 30000");
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(lbt_conn)), LB_EBUSY);
    lbt_cmd_ok(lbt_conn, "DEL w:jvm");
    lbt_sleep_ms(ago);
    assert_int_equal(lb_lock_acquire(l, lb_on_conn(lbt_conn), 5000), LB_OK);
    assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
    sleeps->longest_ms = 0;
    assert_int_equal(lb_lock_acquire(l, lb_on_conn(lbt_conn), 5000), LB_OK);
    assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
    return sleeps->longest_ms;
}

/* A wait that found the key held by a value that is no lockbridge token (a
 * client outside the queue: a JVM locker's JSON token) stands back 250 ms
 * after its own release (LB__OUTSIDER_STAND_BACK_MS), so that a client
 * polling every 200 ms finds the key free: its next wait, begun at once,
 * sleeps the rest of that before its first attempt, though the lock is free.
 * A wait that never met such a holder takes the free lock at once. */
static void test_a_wait_that_met_an_outside_holder_stands_back_after_its_release(void **state) {
    (void)state;
    lbt_sleeps sleeps = {0};
    lb_clock clock = {.sleep_ms = lbt_sleeps_record, .ud = &sleeps};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.clock = &clock;
    lb_lock *l = lbt_lock_with("w:jvm", &o);
    assert_int_equal(lb_lock_acquire(l, lb_on_conn(lbt_conn), 5000), LB_OK);
    assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
    sleeps.longest_ms = 0;
    assert_int_equal(lb_lock_acquire(l, lb_on_conn(lbt_conn), 5000), LB_OK);
    assert_int_equal(sleeps.longest_ms, 0);
    assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
    /* Met 150 ms before (more than LB__OUTSIDER_TURNS_MS): it stands back. */
    assert_in_range(wait_after_meeting(l, &sleeps, 150), 150, 250);
    lb_lock_free(l);
}

/* An outsider met holding less than LB__OUTSIDER_TURNS_MS (100 ms) ago is
 * taking turns of its own: a client that retakes at once after its release
 * keeps the key for many, and standing back after each of ours would hand it
 * nearly all of them (beside 2 JVM threads, 2 polling clients got 21 turns
 * each against 5280). The wait asks at once, as polling does. */
static void test_a_wait_that_met_the_outsider_holding_just_now_does_not_stand_back(void **state) {
    (void)state;
    lbt_sleeps sleeps = {0};
    lb_clock clock = {.sleep_ms = lbt_sleeps_record, .ud = &sleeps};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.clock = &clock;
    lb_lock *l = lbt_lock_with("w:jvm", &o);
    assert_int_equal(wait_after_meeting(l, &sleeps, 0), 0);
    lb_lock_free(l);
}

/* A fair release that finds an outsider noted tells its caller so (5), and a
 * fair wait on one connection, which would take the key back at once by its
 * SET NX or the baton, stands back after it; a fair wait through a waiter
 * queues instead, where the queue's windows serve the outsider, and does not
 * (standing back after every release starved the queue in the bench's mixed
 * row: one waiter got a twelfth of another's turns). */
static void test_only_a_fair_wait_without_a_waiter_stands_back_for_a_noted_outsider(void **state) {
    (void)state;
    lbt_sleeps sleeps = {0};
    lb_clock clock = {.sleep_ms = lbt_sleeps_record, .ud = &sleeps};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.clock = &clock;
    lb_lock *l = lbt_lock_with("w:noted", &o);
    lb_waiter *w = lbt_new_waiter();
    for (int with_waiter = 0; with_waiter < 2; with_waiter++) {
        assert_int_equal(lb_lock_acquire(l, lb_on_conn(lbt_conn), 5000), LB_OK);
        lbt_cmd_ok(lbt_conn, "SET {w:noted}:outsider 1 PX 2000");
        assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
        sleeps.longest_ms = 0;
        assert_int_equal(lb_lock_acquire_wait(l, lb_on_conn(lbt_conn), with_waiter ? w : NULL, 5000),
                         LB_OK);
        if (with_waiter) assert_int_equal(sleeps.longest_ms, 0);
        else assert_in_range(sleeps.longest_ms, 150, 250);
        assert_int_equal(lb_lock_release(l, lb_on_conn(lbt_conn)), LB_OK);
        lbt_cmd_ok(lbt_conn, "DEL {w:noted}:outsider");
        lbt_sleep_ms(300);
    }
    lb_waiter_free(w);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_polling_wait_beside_a_lock_turned_over_fast_asks_within_20_ms),
        cmocka_unit_test(test_a_polling_wait_beside_a_fair_queue_keeps_its_back_off),
        cmocka_unit_test(test_an_outsider_beside_a_queue_stands_back_after_its_release),
        cmocka_unit_test(test_a_polling_wait_stands_back_when_its_release_was_heard),
        cmocka_unit_test(test_a_wait_that_met_an_outside_holder_stands_back_after_its_release),
        cmocka_unit_test(test_a_wait_that_met_the_outsider_holding_just_now_does_not_stand_back),
        cmocka_unit_test(test_only_a_fair_wait_without_a_waiter_stands_back_for_a_noted_outsider),
        cmocka_unit_test(test_a_polling_wait_is_cancelled_promptly_by_the_sleep_hook),
        cmocka_unit_test(test_a_wait_on_a_waiter_is_cancelled_promptly_by_the_sleep_hook),
    };
    return cmocka_run_group_tests(tests, lbt_wait_setup, lbt_wait_teardown);
}
