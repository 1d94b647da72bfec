/* The quorum lock against five real redis-servers: a majority is enough, a
 * minority never grants, time spent is taken off the validity, a restarted
 * master is reconnected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "harness/redis_server.h"
#include "lockbridge/lockbridge.h"

#define N 5

static lbt_redis servers[N];
static redisContext *masters[N];

static void connect_all(void) {
    for (int i = 0; i < N; i++) {
        if (masters[i]) redisFree(masters[i]);
        masters[i] = lbt_redis_connect(&servers[i]);
        assert_non_null(masters[i]);
    }
}

static void restart_stopped(void) {
    for (int i = 0; i < N; i++)
        if (servers[i].pid <= 0) assert_int_equal(lbt_redis_restart(&servers[i], NULL), 0);
}

static lb_quorum *new_quorum_timeout(const char *key, int64_t ttl_ms, int64_t timeout_ms) {
    lb_quorum_options o;
    lb_quorum_options_init(&o);
    o.ttl_ms = ttl_ms;
    o.timeout_ms = timeout_ms; /* what a stalled master costs */
    lb_quorum *q = NULL;
    assert_int_equal(lb_quorum_new(&q, key, strlen(key), masters, N, &o), LB_OK);
    return q;
}

static lb_quorum *new_quorum(const char *key, int64_t ttl_ms) {
    return new_quorum_timeout(key, ttl_ms, 300);
}

/* How many live masters, other than `skip` (-1: none), hold `value` at `key`. */
static int holders_except(const char *key, const char *value, int skip) {
    int n = 0;
    for (int i = 0; i < N; i++) {
        if (servers[i].pid <= 0 || i == skip) continue;
        redisContext *c = lbt_redis_connect(&servers[i]);
        assert_non_null(c);
        redisReply *r = redisCommand(c, "GET %s", key);
        if (r && r->type == REDIS_REPLY_STRING && strcmp(r->str, value) == 0) n++;
        if (r) freeReplyObject(r);
        redisFree(c);
    }
    return n;
}

static int holders(const char *key, const char *value) {
    return holders_except(key, value, -1);
}

static void test_all_masters_up_grants_once(void **state) {
    (void)state;
    lb_quorum *a = new_quorum("q:all", 10000), *b = new_quorum("q:all", 10000);
    assert_int_equal(lb_quorum_try_acquire(a), LB_OK);
    assert_int_equal(lb_quorum_info_of(a).votes, N);
    assert_true(lb_quorum_info_of(a).validity_ms > 0 && lb_quorum_info_of(a).validity_ms < 10000);
    assert_int_equal(holders("q:all", lb_quorum_info_of(a).token), N);
    assert_int_equal(lb_quorum_try_acquire(b), LB_EBUSY);
    assert_int_equal(holders("q:all", lb_quorum_info_of(b).token), 0);
    assert_int_equal(lb_quorum_release(a), LB_OK);
    assert_int_equal(holders("q:all", lb_quorum_info_of(a).token), 0);
    assert_int_equal(lb_quorum_acquire(b, 2000), LB_OK);
    assert_int_equal(lb_quorum_release(b), LB_OK);
    lb_quorum_free(a);
    lb_quorum_free(b);
}

static void test_two_masters_down_still_grants(void **state) {
    (void)state;
    lbt_redis_kill(&servers[1]);
    lbt_redis_kill(&servers[3]);
    lb_quorum *a = new_quorum("q:two", 10000);
    assert_int_equal(lb_quorum_try_acquire(a), LB_OK);
    assert_int_equal(lb_quorum_info_of(a).votes, 3);
    assert_int_equal(lb_quorum_release(a), LB_OK);
    lb_quorum_free(a);
    restart_stopped();
}

static void test_three_masters_down_never_grants(void **state) {
    (void)state;
    lbt_redis_kill(&servers[0]);
    lbt_redis_kill(&servers[2]);
    lbt_redis_kill(&servers[4]);
    lb_quorum *a = new_quorum("q:three", 10000);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(lb_quorum_try_acquire(a), LB_EIO);
        assert_false(lb_quorum_info_of(a).held);
        /* The two live masters accepted the token, and were told to let go. */
        assert_int_equal(holders("q:three", lb_quorum_info_of(a).token), 0);
    }
    assert_int_equal(lb_quorum_acquire(a, 300), LB_ETIMEDOUT);
    /* Masters come back: the failed connections are reconnected. */
    restart_stopped();
    assert_int_equal(lb_quorum_try_acquire(a), LB_OK);
    assert_int_equal(lb_quorum_info_of(a).votes, N);
    assert_int_equal(lb_quorum_release(a), LB_OK);
    lb_quorum_free(a);
}

static void test_a_minority_holder_blocks_nobody_and_a_majority_holder_everybody(void **state) {
    (void)state;
    for (int i = 0; i < 2; i++) {
        redisReply *r = redisCommand(masters[i], "SET q:split other PX 10000");
        freeReplyObject(r);
    }
    lb_quorum *a = new_quorum("q:split", 10000);
    assert_int_equal(lb_quorum_try_acquire(a), LB_OK);
    assert_int_equal(lb_quorum_info_of(a).votes, 3);
    assert_int_equal(lb_quorum_release(a), LB_OK);
    assert_int_equal(holders("q:split", "other"), 2); /* theirs left alone */
    redisReply *r = redisCommand(masters[2], "SET q:split other PX 10000");
    freeReplyObject(r);
    assert_int_equal(lb_quorum_try_acquire(a), LB_EBUSY);
    assert_int_equal(holders("q:split", lb_quorum_info_of(a).token), 0);
    assert_int_equal(holders("q:split", "other"), 3);
    lb_quorum_free(a);
}

/* A stalled master costs the command timeout the quorum sets (300 ms; the
 * harness's connections would wait 5 s); that time is taken off the validity,
 * with the drift allowance. The stalled master's connection was reconnected
 * by an earlier test, so this also checks that a reconnect keeps the timeout. */
static void test_time_spent_is_taken_off_the_validity(void **state) {
    (void)state;
    lbt_redis_pause(&servers[4], 1);
    lb_quorum *a = new_quorum("q:slow", 2000);
    assert_int_equal(lb_quorum_try_acquire(a), LB_OK);
    assert_int_equal(lb_quorum_info_of(a).votes, 4);
    assert_true(lb_quorum_info_of(a).validity_ms <= 2000 - 300 - 22);
    lbt_redis_pause(&servers[4], 0);
    lb_quorum *b = new_quorum_timeout("q:slow2", 300, 299); /* the stall eats the ttl */
    lbt_redis_pause(&servers[4], 1);
    assert_int_not_equal(lb_quorum_try_acquire(b), LB_OK);
    /* The stalled master may still apply b's SET once it resumes (its reply
     * was lost, not its write): that copy expires with the ttl. */
    assert_int_equal(holders_except("q:slow2", lb_quorum_info_of(b).token, 4), 0);
    lbt_redis_pause(&servers[4], 0);
    assert_int_equal(lb_quorum_release(a), LB_OK);
    lb_quorum_free(a);
    lb_quorum_free(b);
    connect_all(); /* the timed-out connection is not reusable */
}

static void test_bad_arguments_are_refused(void **state) {
    (void)state;
    lb_quorum *q = (lb_quorum *)1;
    assert_int_equal(lb_quorum_new(&q, "k", 1, masters, 0, NULL), LB_EINVAL);
    assert_null(q);
    assert_int_equal(lb_quorum_new(&q, "", 0, masters, N, NULL), LB_EINVAL);
    assert_int_equal(lb_quorum_new(&q, "k", 1, masters, N, NULL), LB_OK);
    assert_int_equal(lb_quorum_release(q), LB_ESTATE);
    lb_quorum_free(q);
    lb_quorum_free(NULL);
}

static int setup(void **state) {
    (void)state;
    for (int i = 0; i < N; i++)
        if (lbt_redis_start(&servers[i], NULL) != 0) return -1;
    for (int i = 0; i < N; i++) {
        masters[i] = lbt_redis_connect(&servers[i]);
        if (!masters[i]) return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < N; i++) {
        if (masters[i]) redisFree(masters[i]);
        lbt_redis_stop(&servers[i]);
    }
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_masters_up_grants_once),
        cmocka_unit_test(test_two_masters_down_still_grants),
        cmocka_unit_test(test_three_masters_down_never_grants),
        cmocka_unit_test(test_a_minority_holder_blocks_nobody_and_a_majority_holder_everybody),
        cmocka_unit_test(test_time_spent_is_taken_off_the_validity),
        cmocka_unit_test(test_bad_arguments_are_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
