/* The baton a fair release passes to a wait blocked on it, against a real
 * redis-server: who gets it, the mark a wait leaves and takes away, and
 * releases that pass none. */
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

/* A fair lock whose blocking waits block on the baton for `baton_ms`. */
static lb_lock *baton_lock(const char *key, int64_t baton_ms) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 5000;
    o.fair_baton_ms = baton_ms;
    return lbt_lock_with(key, &o);
}

/* With nobody queued, a release passes the lock down the baton list: the
 * waiter that blocked first gets it (a fresh token, written by the release)
 * with its SET NX, its mark and one BLPOP, and nothing queues. The last
 * waiter to block leaves its own mark behind: its release must not take it
 * for another waiter's, or it would pass the lock to nobody and the key
 * would stay held for a whole TTL. */
static void test_a_release_passes_the_baton_to_the_waiter_that_blocked_first(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:baton*");
    lb_lock *h = lbt_new_lock("w:baton", 1, 2, 100), *q[2];
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    char htoken[LB_TOKEN_LEN + 1];
    snprintf(htoken, sizeof htoken, "%s", lb_lock_info_of(h).token);
    lbt_job j[2];
    for (int i = 0; i < 2; i++) {
        q[i] = baton_lock("w:baton", 20000);
        lbt_job_start(&j[i], q[i], NULL, 10000);
        LBT_EVENTUALLY(lbt_blocked_in_blpop(j[i].client_id));
    }
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j[0]), LB_OK);
    assert_string_equal(lbt_get(lbt_conn, "w:baton"), lb_lock_info_of(q[0]).token);
    assert_string_not_equal(lb_lock_info_of(q[0]).token, htoken);
    assert_int_equal(lb_lock_info_of(q[0]).commands, 3);
    assert_false(lbt_job_done(&j[1]));
    assert_int_equal(lb_lock_release(q[0], lb_on_conn(j[0].c)), LB_OK);
    assert_int_equal(lbt_job_join(&j[1]), LB_OK);
    assert_string_equal(lbt_get(lbt_conn, "w:baton"), lb_lock_info_of(q[1]).token);
    assert_int_equal(lb_lock_release(q[1], lb_on_conn(j[1].c)), LB_OK);
    /* Its own mark went with the key: h, taking the free key and releasing
     * at once, deletes it rather than pass it to nobody. */
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:baton {w:baton}:baton {w:baton}:queue {w:baton}:bwait"), 0);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:baton"), 0);
    for (int i = 0; i < 2; i++) {
        lbt_job_end(&j[i]);
        lb_lock_free(q[i]);
    }
    lbt_del_matching(lbt_conn, "*w:baton*");
    lb_lock_free(h);
}

static int64_t frozen_mono_ns(void *ud) {
    (void)ud;
    return 1000000000000LL;
}

/* A polling lock outside fair mode on a frozen clock, so that a note it
 * makes is as fresh at its release however slow the machine. */
static const lb_clock frozen_clock = {NULL, frozen_mono_ns, NULL, 0, NULL};
static lb_lock *frozen_poller(const char *key) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.backoff_min_ms = 5;
    o.backoff_max_ms = 20;
    o.clock = &frozen_clock;
    return lbt_lock_with(key, &o);
}

/* A client outside fair mode that noted fair clients beside it (a polling
 * wait refused while a fair waiter was blocked on the baton) and then took
 * the key releases it as a fair holder would: the baton goes to the waiter
 * blocked on it. Before, it deleted the key: the waiter, blocked on a list
 * that nothing pushed, waited out its block (here 20 s) while the poller,
 * asking again at once, took the key turn after turn (the bench's mixed row
 * with fair waits on the baton: 354 turns a second against 6234). A user
 * whose ACL refuses the companions notes nothing and releases plainly. */
static void test_a_poller_that_noted_baton_waiters_passes_them_the_baton(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:court*");
    lb_lock *f1 = baton_lock("w:court", 20000), *f2 = baton_lock("w:court", 20000),
            *p = frozen_poller("w:court");
    assert_int_equal(lb_lock_try_acquire(f1, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_job_start(&j, f2, NULL, 30000);
    LBT_EVENTUALLY(lbt_blocked_in_blpop(j.client_id));
    /* Refused for 300 ms, the poller notes itself and finds f2's mark. */
    assert_int_equal(lb_lock_acquire(p, lb_on_conn(lbt_conn), 300), LB_ETIMEDOUT);
    assert_int_equal(lb_lock_release(f1, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    lbt_job_end(&j); /* f2 releases: nobody marked, the key is free */
    assert_int_equal(lb_lock_try_acquire(p, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job_start(&j, f1, NULL, 30000);
    LBT_EVENTUALLY(lbt_blocked_in_blpop(j.client_id));
    assert_int_equal(lb_lock_release(p, lb_on_conn(lbt_conn)), LB_OK);
    /* The baton wrote a fresh token at the key: nobody could take it freed. */
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:court"), 1);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_string_equal(lbt_get(lbt_conn, "w:court"), lb_lock_info_of(f1).token);
    lbt_job_end(&j);
    lb_lock_free(f1);
    lb_lock_free(f2);
    lb_lock_free(p);
    lbt_del_matching(lbt_conn, "*w:court*");
}

/* Two fair waiters' tokens, as marks. */
#define MARK_C "cccccccccccccccccccccccccccccccc"
#define MARK_D "dddddddddddddddddddddddddddddddd"

/* A courteous release the server refuses whole (here an ACL that covers the
 * companions a note uses, not the queue's or the baton's) changes nothing,
 * and the plain release runs instead: the lock is released, no error. */
static void test_a_courteous_release_refused_whole_releases_plainly(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:acl*");
    lbt_cmd_ok(lbt_conn, "ACL SETUSER noter reset on >pw ~w:acl ~{w:acl}:fair ~{w:acl}:outsider "
                         "~{w:acl}:bwait &* +@all");
    redisContext *c = lbt_redis_connect(&lbt_server);
    assert_non_null(c);
    lbt_cmd_ok(c, "AUTH noter pw");
    lb_lock *p = frozen_poller("w:acl");
    lbt_cmd_ok(lbt_conn, "SET w:acl %s PX 30000", MARK_D);
    lbt_cmd_ok(lbt_conn, "SET {w:acl}:bwait %s PX 30000", MARK_C); /* a fair waiter's mark */
    assert_int_equal(lb_lock_acquire(p, lb_on_conn(c), 300), LB_ETIMEDOUT);
    lbt_cmd_ok(lbt_conn, "DEL w:acl");
    assert_int_equal(lb_lock_try_acquire(p, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_lock_release(p, lb_on_conn(c)), LB_OK);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:acl"), 0);
    assert_string_equal(lbt_get(lbt_conn, "{w:acl}:bwait"), MARK_C);
    lb_lock_free(p);
    redisFree(c);
    lbt_cmd_ok(lbt_conn, "ACL DELUSER noter");
    lbt_del_matching(lbt_conn, "*w:acl*");
}

/* A client that locks in a loop: a wait begun right after its release
 * handed the lock on knows the key is held, and sends only its mark and its
 * BLPOP. (The lock's clock is frozen, so "right after" holds however slow
 * the machine.) */
static void test_a_wait_right_after_handing_the_lock_on_skips_its_set_nx(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:loop*");
    lb_clock frozen = {NULL, frozen_mono_ns, NULL, 0, NULL};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 5000;
    o.fair_baton_ms = 20000;
    o.clock = &frozen;
    lb_lock *a = lbt_lock_with("w:loop", &o), *b = lbt_lock_with("w:loop", &o);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job jb, ja;
    lbt_job_start(&jb, b, NULL, 10000);
    LBT_EVENTUALLY(lbt_blocked_in_blpop(jb.client_id));
    assert_int_equal(lb_lock_release(a, lb_on_conn(lbt_conn)), LB_OK); /* the baton, to b */
    assert_int_equal(lbt_job_join(&jb), LB_OK);
    uint64_t before = lb_lock_info_of(a).commands;
    lbt_job_start(&ja, a, NULL, 10000);
    LBT_EVENTUALLY(lbt_blocked_in_blpop(ja.client_id));
    assert_int_equal(lb_lock_release(b, lb_on_conn(jb.c)), LB_OK); /* the baton, to a */
    assert_int_equal(lbt_job_join(&ja), LB_OK);
    assert_int_equal(lb_lock_info_of(a).commands - before, 2);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ja.c)), LB_OK);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:loop {w:loop}:bwait"), 0);
    lbt_job_end(&ja);
    lbt_job_end(&jb);
    lb_lock_free(a);
    lb_lock_free(b);
    lbt_del_matching(lbt_conn, "*w:loop*");
}

/* A holder that got the lock by the baton and hands it to a queued waiter
 * leaves no mark behind: the waiter (queued without a mark, as a wait with
 * fair_baton_ms 0 does) releases into an empty queue, and a mark still
 * alive would make that release pass the lock to nobody, the key then held
 * by no client for the releaser's whole TTL. */
static void test_a_holder_by_baton_takes_its_mark_away_when_it_hands_to_the_queue(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:stale*");
    lb_lock *h = lbt_new_lock("w:stale", 1, 2, 100), *b = baton_lock("w:stale", 20000);
    lb_lock *q = baton_lock("w:stale", 0); /* no baton: it queues */
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job jb, jq;
    lbt_job_start(&jb, b, NULL, 10000);
    LBT_EVENTUALLY(lbt_blocked_in_blpop(jb.client_id));
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK); /* the baton, to b */
    assert_int_equal(lbt_job_join(&jb), LB_OK);
    lbt_start_blocked_on_list(&jq, q, 10000, "{w:stale}:queue", 1);
    assert_int_equal(lb_lock_release(b, lb_on_conn(jb.c)), LB_OK); /* to the queue, q */
    assert_int_equal(lbt_job_join(&jq), LB_OK);
    assert_string_equal(lbt_get(lbt_conn, "w:stale"), lb_lock_info_of(q).token);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:stale}:bwait"), 0);
    assert_int_equal(lb_lock_release(q, lb_on_conn(jq.c)), LB_OK);
    /* Released with nobody waiting: free, not held by a token nobody has. */
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:stale {w:stale}:baton"), 0);
    lbt_job_end(&jq);
    lbt_job_end(&jb);
    lb_lock_free(q);
    lb_lock_free(b);
    lb_lock_free(h);
    lbt_del_matching(lbt_conn, "*w:stale*");
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
        lbt_del_matching(lbt_conn, "*w:clob*");
        lb_lock *h = lbt_new_lock("w:clob", 1, 2, 100), *q = baton_lock("w:clob", 2000);
        assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
        if (i == 0) lbt_cmd_ok(lbt_conn, spoilers[i]);
        else assert_int_equal(lbt_int(lbt_conn, spoilers[i]), 1);
        lbt_job j;
        lbt_job_start(&j, q, NULL, 10000);
        LBT_EVENTUALLY(lbt_blocked_in_blpop(j.client_id));
        if (i == 0) {
            assert_string_equal(lbt_get(lbt_conn, "{w:clob}:bwait"), "someone-elses");
        } else {
            redisReply *r = redisCommand(lbt_conn, "TYPE {w:clob}:bwait");
            assert_true(r && r->type == REDIS_REPLY_STATUS);
            assert_string_equal(r->str, "list");
            freeReplyObject(r);
        }
        /* No mark of a waiter: the release frees the key rather than pass
         * it down the baton list, and the wait gets it all the same. */
        assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
        assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:clob}:baton"), 0);
        assert_int_equal(lbt_job_join(&j), LB_OK);
        assert_string_equal(lbt_get(lbt_conn, "w:clob"), lb_lock_info_of(q).token);
        lbt_job_end(&j);
        lb_lock_free(q);
        lb_lock_free(h);
    }
    lbt_del_matching(lbt_conn, "*w:clob*");
}

/* A release by a lock whose TTL is under four baton lives (400 ms) passes no
 * baton, however many wait on the list: a baton that short (its life a
 * quarter of the TTL, down to 1 ms) could reach its receiver with no lease
 * left. The waiter gets the key with its own token once its block ends.
 * (The key is given a long TTL by hand, so that the holder's 399 ms do not
 * run out before its release.) */
static void test_a_release_with_a_ttl_under_four_baton_lives_passes_no_baton(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:brief*");
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.ttl_ms = 399;
    lb_lock *h = lbt_lock_with("w:brief", &o), *q = baton_lock("w:brief", 2000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_cmd_ok(lbt_conn, "PEXPIRE w:brief 30000");
    lbt_job j;
    lbt_job_start(&j, q, NULL, 10000);
    LBT_EVENTUALLY(lbt_blocked_in_blpop(j.client_id));
    char own[LB_TOKEN_LEN + 1];
    snprintf(own, sizeof own, "%s", lbt_get(lbt_conn, "{w:brief}:bwait"));
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_string_equal(lb_lock_info_of(q).token, own);
    lbt_job_end(&j);
    lb_lock_free(q);
    lb_lock_free(h);
    lbt_del_matching(lbt_conn, "*w:brief*");
}

/* A wait whose BLPOP on the baton ends early (here CLIENT UNBLOCK, as an
 * operator might send) takes its mark away before it queues: left for its
 * TTL (20 s here), a release in that time would pass the lock to nobody. A
 * wait with a TTL under 400 ms queues at once: a baton's life (up to
 * 100 ms) would take too much of its lease. */
static void test_a_wait_that_stops_blocking_early_takes_its_mark_away(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:unblock*");
    lb_lock *h = lbt_new_lock("w:unblock", 1, 2, 100), *q = baton_lock("w:unblock", 20000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_job_start(&j, q, NULL, 10000);
    LBT_EVENTUALLY(lbt_blocked_in_blpop(j.client_id));
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:unblock}:bwait"), 1);
    assert_int_equal(lbt_int(lbt_conn, "CLIENT UNBLOCK %lld", j.client_id), 1);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:unblock}:queue") == 1);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:unblock}:bwait"), 0);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    lbt_job_end(&j);
    lb_lock_free(q);

    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.ttl_ms = 399;
    o.fair_baton_ms = 20000;
    o.fair_lease_ms = 60000; /* no lease refresh during the test */
    q = lbt_lock_with("w:unblock", &o);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job_start(&j, q, NULL, 10000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:unblock}:queue") == 1);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    /* The attempt that queued it and the BLPOP its grant ended: no SET NX,
     * no mark, no BLPOP on the baton. */
    assert_int_equal(lb_lock_info_of(q).commands, 2);
    lbt_job_end(&j);
    lb_lock_free(q);
    lb_lock_free(h);
    lbt_del_matching(lbt_conn, "*w:unblock*");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_release_passes_the_baton_to_the_waiter_that_blocked_first),
        cmocka_unit_test(test_a_wait_that_stops_blocking_early_takes_its_mark_away),
        cmocka_unit_test(test_a_wait_right_after_handing_the_lock_on_skips_its_set_nx),
        cmocka_unit_test(test_a_holder_by_baton_takes_its_mark_away_when_it_hands_to_the_queue),
        cmocka_unit_test(test_a_baton_wait_never_writes_its_mark_over_a_foreign_value),
        cmocka_unit_test(test_a_release_with_a_ttl_under_four_baton_lives_passes_no_baton),
        cmocka_unit_test(test_a_poller_that_noted_baton_waiters_passes_them_the_baton),
        cmocka_unit_test(test_a_courteous_release_refused_whole_releases_plainly),
    };
    return cmocka_run_group_tests(tests, lbt_wait_setup, lbt_wait_teardown);
}
