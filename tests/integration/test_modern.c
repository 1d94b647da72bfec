/* The token lock against a real redis-server: acquire, release, extend, check,
 * fencing, blocking waits, other lockers' values, faults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/failing_alloc.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"

static lbt_redis server;
static redisContext *conn;

static lb_lock *new_lock(const char *key, int64_t ttl_ms, int fencing) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = ttl_ms;
    o.fencing = fencing;
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, key, strlen(key), &o), LB_OK);
    return l;
}

static void test_acquire_writes_a_random_token_with_a_ttl(void **state) {
    (void)state;
    lb_lock *a = new_lock("m:basic", 10000, 0), *b = new_lock("m:basic", 10000, 0);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    const char *tok = lb_lock_info_of(a).token;
    assert_int_equal(strlen(tok), LB_TOKEN_LEN);
    assert_int_equal(strspn(tok, "0123456789abcdef"), LB_TOKEN_LEN);
    assert_string_equal(lbt_get(conn, "m:basic"), tok);
    assert_true(lbt_int(conn, "PTTL %s", "m:basic") > 9000);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(conn)), LB_EBUSY);
    assert_true(lb_lock_info_of(b).holder_ttl_ms > 9000);
    assert_string_not_equal(lb_lock_info_of(b).token, tok);
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK);
    assert_string_equal(lbt_get(conn, "m:basic"), "");
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(conn)), LB_ESTATE);
    lb_lock_free(a);
    lb_lock_free(b);
}

static void test_release_after_expiry_leaves_the_new_holder_alone(void **state) {
    (void)state;
    lb_lock *a = new_lock("m:late", 50, 0), *b = new_lock("m:late", 10000, 0);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    /* Waits for a's TTL to lapse; a wait of INT64_MAX ms means "as long as it
     * takes" (its deadline saturates, it does not wrap into the past). */
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(conn), INT64_MAX), LB_OK);
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_ELOST);
    assert_false(lb_lock_info_of(a).held);
    assert_string_equal(lbt_get(conn, "m:late"), lb_lock_info_of(b).token);
    assert_int_equal(lb_lock_extend(a, lb_on_conn(conn), 1000, LB_EXTEND_REPLACE), LB_ESTATE);
    assert_int_equal(lb_lock_release(b, lb_on_conn(conn)), LB_OK);
    lb_lock_free(a);
    lb_lock_free(b);
}

static void test_extend_replaces_or_adds_to_the_ttl(void **state) {
    (void)state;
    lb_lock *a = new_lock("m:extend", 5000, 0);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_extend(a, lb_on_conn(conn), 20000, LB_EXTEND_REPLACE), LB_OK);
    long long t = lbt_int(conn, "PTTL %s", "m:extend");
    assert_true(t > 19000 && t <= 20000);
    assert_int_equal(lb_lock_extend(a, lb_on_conn(conn), 20000, LB_EXTEND_ADD), LB_OK);
    assert_true(lbt_int(conn, "PTTL %s", "m:extend") > 38000);
    assert_int_equal(lb_lock_extend(a, lb_on_conn(conn), 0, LB_EXTEND_ADD), LB_EINVAL);
    lbt_cmd_ok(conn, "SET m:extend someone-else PX 10000");
    assert_int_equal(lb_lock_extend(a, lb_on_conn(conn), 20000, LB_EXTEND_REPLACE), LB_ELOST);
    assert_string_equal(lbt_get(conn, "m:extend"), "someone-else");
    assert_true(lbt_int(conn, "PTTL %s", "m:extend") <= 10000);
    lbt_cmd_ok(conn, "DEL m:extend");
    lb_lock_free(a);
}

static void test_check_reports_ownership_and_ttl(void **state) {
    (void)state;
    lb_lock *a = new_lock("m:check", 8000, 0);
    int64_t ttl = 0;
    assert_int_equal(lb_lock_check(a, lb_on_conn(conn), &ttl), LB_ESTATE);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_check(a, lb_on_conn(conn), &ttl), LB_OK);
    assert_true(ttl > 7000 && ttl <= 8000);
    assert_int_equal(lb_lock_force_release(lb_on_conn(conn), "m:check", 7), LB_OK);
    assert_int_equal(lb_lock_check(a, lb_on_conn(conn), &ttl), LB_ELOST);
    assert_int_equal(ttl, -1);
    lb_lock_free(a);
}

static void test_fencing_numbers_grow_with_each_acquisition(void **state) {
    (void)state;
    lb_lock *a = new_lock("m:fence", 10000, 1), *b = new_lock("m:fence", 10000, 1);
    int64_t last = 0;
    for (int i = 0; i < 5; i++) {
        lb_lock *l = i % 2 ? b : a;
        assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(conn)), LB_OK);
        assert_true(lb_lock_info_of(l).fence > last);
        last = lb_lock_info_of(l).fence;
        lb_lock *other = i % 2 ? a : b;
        assert_int_equal(lb_lock_try_acquire(other, lb_on_conn(conn)), LB_EBUSY);
        assert_true(lb_lock_info_of(other).holder_ttl_ms > 9000);
        assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
        assert_int_equal(lb_lock_info_of(l).fence, 0);
    }
    /* The counter lives beside the lock, in its hash slot. */
    assert_int_equal(atoll(lbt_get(conn, "{m:fence}:fence")), last);
    lb_lock_free(a);
    lb_lock_free(b);
}

/* A fencing counter that cannot count (a value that is no integer, at its
 * limit, or at 2^53, past which a script's numbers are not exact and two
 * holders could be handed the same one) fails the acquire before the key is
 * written, plain or fair: a lock
 * taken by a call that reports failure would be held by no one for a whole
 * TTL. A fair release handing the lock on fails the same way, having changed
 * nothing: the lock stays ours and the waiter keeps its place. */
static void test_a_fencing_counter_that_cannot_count_fails_before_writing(void **state) {
    (void)state;
    static const char *const counters[] = {"not a number", "9223372036854775807",
                                           "9007199254740991"};
    static const char waiter[] = "0123456789abcdef0123456789abcdef";
    for (int fair = 0; fair < 2; fair++) {
        for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
            lb_lock_options o;
            lb_lock_options_init(&o);
            o.fencing = 1;
            o.fair = fair;
            lb_lock *l = NULL;
            assert_int_equal(lb_lock_new(&l, "m:count", 7, &o), LB_OK);
            lbt_cmd_ok(conn, "SET {m:count}:fence %s", counters[i]);
            int rc = lb_lock_try_acquire(l, lb_on_conn(conn));
            if (rc != LB_EREDIS || lbt_int(conn, "EXISTS m:count") != 0)
                fail_msg("fair %d, counter '%s': %s, key %s", fair, counters[i], lb_err_name(rc),
                         lbt_get(conn, "m:count"));
            assert_false(lb_lock_info_of(l).held);
            if (fair) {
                lbt_cmd_ok(conn, "DEL {m:count}:fence");
                assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(conn)), LB_OK);
                assert_true(lbt_int(conn, "ZADD {m:count}:queue 1 %s", waiter) == 1);
                assert_true(lbt_int(conn, "HSET {m:count}:fair %s %s", waiter, "4102444800000 30000") == 1);
                lbt_cmd_ok(conn, "SET {m:count}:fence %s", counters[i]);
                assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_EREDIS);
                assert_true(lb_lock_info_of(l).held);
                assert_string_equal(lbt_get(conn, "m:count"), lb_lock_info_of(l).token);
                assert_true(lbt_int(conn, "ZCARD {m:count}:queue") == 1);
                lbt_int(conn, "DEL m:count {m:count}:queue {m:count}:fair");
            }
            lbt_int(conn, "DEL {m:count}:fence");
            lb_lock_free(l);
        }
    }
}

static void test_scripts_survive_a_script_flush(void **state) {
    (void)state;
    lb_lock *a = new_lock("m:flush", 10000, 1);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    lbt_cmd_ok(conn, "SCRIPT FLUSH");
    assert_int_equal(lb_lock_extend(a, lb_on_conn(conn), 10000, LB_EXTEND_REPLACE), LB_OK);
    lbt_cmd_ok(conn, "SCRIPT FLUSH");
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK);
    lbt_cmd_ok(conn, "SCRIPT FLUSH");
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK);
    lb_lock_free(a);
}

/* Other token lockers' values (M1 writes {"uid":...}) are held locks, governed
 * by their TTL; a key without TTL is held for good and never touched. */
static void test_other_values_are_held_locks(void **state) {
    (void)state;
    lb_lock *a = new_lock("m:other", 10000, 0);
    lbt_cmd_ok(conn, "SET m:other {\"uid\":\"4a7d\"} PX 150");
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_EBUSY);
    assert_true(lb_lock_info_of(a).holder_ttl_ms >= 0 && lb_lock_info_of(a).holder_ttl_ms <= 150);
    assert_int_equal(lb_lock_acquire(a, lb_on_conn(conn), 5000), LB_OK);
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK);

    lbt_cmd_ok(conn, "SET m:other 1700000000000");
    assert_int_equal(lb_lock_acquire(a, lb_on_conn(conn), 50), LB_ETIMEDOUT);
    assert_int_equal(lb_lock_info_of(a).holder_ttl_ms, -1);
    assert_string_equal(lbt_get(conn, "m:other"), "1700000000000");
    lbt_cmd_ok(conn, "DEL m:other");
    lb_lock_free(a);
}

static void test_a_key_of_another_type_is_never_deleted(void **state) {
    (void)state;
    lb_lock *a = new_lock("m:type", 10000, 0);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    lbt_cmd_ok(conn, "DEL m:type");
    lbt_cmd_ok(conn, "HSET m:type f v");
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_EWRONGTYPE);
    int64_t ttl;
    assert_int_equal(lb_lock_check(a, lb_on_conn(conn), &ttl), LB_EWRONGTYPE);
    redisReply *r = redisCommand(conn, "HGET m:type f");
    assert_non_null(r);
    assert_string_equal(r->str, "v");
    freeReplyObject(r);
    lbt_cmd_ok(conn, "DEL m:type");
    lb_lock_free(a);
}

/* A key that holds a list (or any non-string) is LB_EWRONGTYPE for every lock
 * kind's acquire, and a blocking acquire returns it after one attempt rather
 * than waiting out its timeout as if the lock were busy. */
static void test_a_key_of_another_type_is_wrongtype_and_never_waited_on(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "DEL m:list");
    lbt_cmd_ok(conn, "RPUSH m:list a b");
    lb_lock *m = new_lock("m:list", 10000, 0);
    lb_legacy_lock *g = NULL;
    assert_int_equal(lb_legacy_lock_new(&g, "m:list", 6, NULL), LB_OK);
    lb_mlock_options mo;
    lb_mlock_options_init(&mo);
    mo.mode = LB_MODE_COMPAT;
    lb_mlock *c = NULL;
    assert_int_equal(lb_mlock_new(&c, "m:list", 6, &mo), LB_OK);
    assert_int_equal(lb_lock_try_acquire(m, lb_on_conn(conn)), LB_EWRONGTYPE);
    assert_int_equal(lb_legacy_try_acquire(g, lb_on_conn(conn)), LB_EWRONGTYPE);
    assert_int_equal(lb_mlock_try_acquire(c, lb_on_conn(conn)), LB_EWRONGTYPE);
    uint64_t m0 = lb_lock_info_of(m).commands, g0 = lb_legacy_info_of(g).commands,
             c0 = lb_mlock_info_of(c).commands;
    assert_int_equal(lb_lock_acquire(m, lb_on_conn(conn), 3000), LB_EWRONGTYPE);
    assert_int_equal(lb_legacy_acquire(g, lb_on_conn(conn), 3000), LB_EWRONGTYPE);
    assert_int_equal(lb_mlock_acquire(c, lb_on_conn(conn), 3000), LB_EWRONGTYPE);
    /* One attempt each: nothing was waited on. */
    assert_true(lb_lock_info_of(m).commands - m0 <= 3);
    assert_true(lb_legacy_info_of(g).commands - g0 <= 3);
    assert_true(lb_mlock_info_of(c).commands - c0 <= 2);
    assert_int_equal(lbt_int(conn, "LLEN %s", "m:list"), 2);
    lbt_cmd_ok(conn, "DEL m:list");
    lb_lock_free(m);
    lb_legacy_lock_free(g);
    lb_mlock_free(c);
}

/* The locks are not reentrant: acquiring a handle that holds its lock is
 * LB_ESTATE (and leaves the lock held), as are releasing, extending and
 * checking a handle that never acquired. */
static void test_a_handle_is_not_reentrant_and_has_nothing_to_release_before_acquiring(
    void **state) {
    (void)state;
    lb_lock *a = new_lock("m:reent", 10000, 0);
    int64_t ttl;
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_ESTATE);
    assert_int_equal(lb_lock_extend(a, lb_on_conn(conn), 1000, LB_EXTEND_REPLACE), LB_ESTATE);
    assert_int_equal(lb_lock_check(a, lb_on_conn(conn), &ttl), LB_ESTATE);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    char token[LB_TOKEN_LEN + 1];
    snprintf(token, sizeof token, "%s", lb_lock_info_of(a).token);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_ESTATE);
    assert_int_equal(lb_lock_acquire(a, lb_on_conn(conn), 100), LB_ESTATE);
    assert_true(lb_lock_info_of(a).held);
    assert_string_equal(lbt_get(conn, "m:reent"), token);
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK);
    lb_lock_free(a);
}

/* A blocking acquire without a waiter learns nothing between two attempts
 * unless it sleeps: after a busy attempt it sleeps a back-off step before the
 * next, for every lock kind. With a first step longer than the wait, a busy
 * lock costs exactly one attempt. */
static void test_a_blocking_acquire_sleeps_before_its_second_attempt(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "SET m:step someone-else PX 10000");
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.backoff_min_ms = o.backoff_max_ms = 500;
    lb_lock *m = NULL;
    assert_int_equal(lb_lock_new(&m, "m:step", 6, &o), LB_OK);
    /* The first attempt also checks that the server runs scripts. */
    assert_int_equal(lb_lock_try_acquire(m, lb_on_conn(conn)), LB_EBUSY);
    uint64_t first = lb_lock_info_of(m).commands;
    assert_int_equal(lb_lock_acquire(m, lb_on_conn(conn), 100), LB_ETIMEDOUT);
    assert_int_equal(lb_lock_info_of(m).commands - first, 2); /* SET NX, PTTL */
    lb_lock_free(m);
    lb_mlock_options mo;
    lb_mlock_options_init(&mo);
    mo.mode = LB_MODE_COMPAT;
    mo.backoff_min_ms = mo.backoff_max_ms = 500;
    lb_mlock *c = NULL;
    assert_int_equal(lb_mlock_new(&c, "m:step", 6, &mo), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(c, lb_on_conn(conn)), LB_EBUSY);
    uint64_t before = lb_mlock_info_of(c).commands;
    assert_int_equal(lb_mlock_try_acquire(c, lb_on_conn(conn)), LB_EBUSY);
    uint64_t one = lb_mlock_info_of(c).commands - before; /* a busy attempt */
    assert_int_equal(lb_mlock_acquire(c, lb_on_conn(conn), 100), LB_ETIMEDOUT);
    assert_int_equal(lb_mlock_info_of(c).commands - before, 2 * one);
    lb_mlock_free(c);
    lbt_cmd_ok(conn, "DEL m:step");
}

/* The script check (a lock only a script can release must not be taken from
 * a server that refuses scripts) is made once per connection: a fresh handle
 * per job on a checked connection costs its SET and its release alone, as the
 * server counts them; a new connection is checked again. */
static void test_the_script_check_runs_once_per_connection_not_per_handle(void **state) {
    (void)state;
    redisContext *mine = lbt_redis_connect(&server);
    lb_lock *first = new_lock("m:once", 10000, 0);
    assert_int_equal(lb_lock_try_acquire(first, lb_on_conn(mine)), LB_OK);
    assert_int_equal(lb_lock_release(first, lb_on_conn(mine)), LB_OK);
    assert_in_range(lb_lock_info_of(first).commands, 3, 4); /* check, SET, release */
    lb_lock_free(first);

    lbt_cmd_ok(conn, "CONFIG RESETSTAT");
    for (int job = 0; job < 3; job++) {
        lb_lock *l = new_lock("m:once", 10000, 0);
        assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(mine)), LB_OK);
        assert_int_equal(lb_lock_release(l, lb_on_conn(mine)), LB_OK);
        assert_int_equal(lb_lock_info_of(l).commands, 2);
        lb_lock_free(l);
    }
    assert_int_equal(lbt_calls(conn, "set"), 3);
    assert_int_equal(lbt_calls(conn, "evalsha") + lbt_calls(conn, "eval"), 3); /* releases */

    redisContext *fresh = lbt_redis_connect(&server);
    lb_lock *l = new_lock("m:once", 10000, 0);
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(fresh)), LB_OK);
    assert_in_range(lb_lock_info_of(l).commands, 2, 3); /* checked again, then SET */
    assert_int_equal(lb_lock_release(l, lb_on_conn(fresh)), LB_OK);
    lb_lock_free(l);
    redisFree(fresh);
    redisFree(mine);
}

static void test_blocking_acquire_times_out_while_held(void **state) {
    (void)state;
    lb_lock *a = new_lock("m:wait", 10000, 0), *b = new_lock("m:wait", 10000, 0);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(conn), 100), LB_ETIMEDOUT);
    assert_true(lb_lock_info_of(b).commands >= 2);
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(conn), 1000), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(conn)), LB_OK);
    lb_lock_free(a);
    lb_lock_free(b);
}

static void test_a_dropped_connection_is_an_io_error_never_a_grant(void **state) {
    (void)state;
    redisContext *victim = lbt_redis_connect(&server);
    assert_non_null(victim);
    lb_lock *a = new_lock("m:drop", 10000, 1);
    redisReply *id = redisCommand(victim, "CLIENT ID");
    assert_non_null(id);
    lbt_cmd_ok(conn, "CLIENT KILL ID %lld", id->integer);
    freeReplyObject(id);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(victim)), LB_EIO);
    assert_false(lb_lock_info_of(a).held);
    redisFree(victim);
    lb_lock_free(a);
}

/* A fencing lock: failing the n-th allocation, for every n, leaves nothing
 * live. */
static void test_every_allocation_failure_is_clean(void **state) {
    (void)state;
    for (int n = 1;; n++) {
        lbt_failing_alloc cnt;
        lb_allocator alloc = lbt_failing_allocator(&cnt, n);
        lb_lock_options o;
        lb_lock_options_init(&o);
        o.fencing = 1;
        o.allocator = &alloc;
        lb_lock *l = (lb_lock *)&cnt; /* must be reset on entry */
        int rc = lb_lock_new(&l, "m:alloc", 7, &o);
        if (rc == LB_ENOMEM) {
            assert_null(l);
            assert_int_equal(cnt.live, 0);
            continue;
        }
        assert_int_equal(rc, LB_OK);
        assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(conn)), LB_OK);
        assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
        lb_lock_free(l);
        assert_int_equal(cnt.live, 0);
        assert_true(n > 3); /* handle, key and two companion names */
        break;
    }
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
        cmocka_unit_test(test_acquire_writes_a_random_token_with_a_ttl),
        cmocka_unit_test(test_release_after_expiry_leaves_the_new_holder_alone),
        cmocka_unit_test(test_extend_replaces_or_adds_to_the_ttl),
        cmocka_unit_test(test_check_reports_ownership_and_ttl),
        cmocka_unit_test(test_fencing_numbers_grow_with_each_acquisition),
        cmocka_unit_test(test_a_fencing_counter_that_cannot_count_fails_before_writing),
        cmocka_unit_test(test_scripts_survive_a_script_flush),
        cmocka_unit_test(test_other_values_are_held_locks),
        cmocka_unit_test(test_a_key_of_another_type_is_never_deleted),
        cmocka_unit_test(test_a_key_of_another_type_is_wrongtype_and_never_waited_on),
        cmocka_unit_test(test_a_handle_is_not_reentrant_and_has_nothing_to_release_before_acquiring),
        cmocka_unit_test(test_a_blocking_acquire_sleeps_before_its_second_attempt),
        cmocka_unit_test(test_the_script_check_runs_once_per_connection_not_per_handle),
        cmocka_unit_test(test_blocking_acquire_times_out_while_held),
        cmocka_unit_test(test_a_dropped_connection_is_an_io_error_never_a_grant),
        cmocka_unit_test(test_every_allocation_failure_is_clean),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
