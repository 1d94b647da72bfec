/* A lock that renews itself: a watchdog named in the lock's options, reaching
 * the server through a copy of the target the lock is acquired on, against a
 * real redis-server on a port of its own (never the default one). */
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
#include "lockbridge/lockbridge.h"

static lbt_redis server;
static redisContext *conn;

/* A watchdog given no server at all is refused and says what to set: there
 * is no default address it could renew on by mistake. */
static void test_a_watchdog_without_a_server_is_refused(void **state) {
    (void)state;
    char why[128] = "x";
    lb_watchdog_options o;
    lb_watchdog_options_init(&o);
    o.errbuf = why;
    o.errbuf_size = sizeof why;
    lb_watchdog *wd = (lb_watchdog *)&o; /* reset on entry */
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_EINVAL);
    assert_null(wd);
    assert_non_null(strstr(why, "target"));
}

/* The watchdog of a self-renewing lock: its own copy of the test's
 * connection target, which is on the server's own port, not 6379. */
static lb_watchdog *watchdog_on_target(void) {
    assert_int_not_equal(server.port, 6379);
    lb_watchdog_options o;
    lb_watchdog_options_init(&o);
    o.target = lb_on_conn(conn);
    lb_watchdog *wd = NULL;
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_OK);
    return wd;
}

static lb_lock *renewing_lock(lb_watchdog *wd, const char *key, int64_t ttl_ms) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = ttl_ms;
    o.watchdog = wd;
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, LB_KEY(key), &o), LB_OK);
    return l;
}

/* Acquired with the watchdog option, a 600 ms lock is still ours after four
 * of its TTLs, renewed through the watchdog's copy of the target. */
static void test_renewal_keeps_the_lock_past_its_ttl_through_the_target(void **state) {
    (void)state;
    lb_watchdog *wd = watchdog_on_target();
    lb_lock *l = renewing_lock(wd, "self:kept", 600);
    assert_int_equal(lb_lock_acquire(l, lb_on_conn(conn), 1000), LB_OK);
    lbt_sleep_ms(2400);
    assert_string_equal(lbt_get(conn, "self:kept"), lb_lock_info_of(l).token);
    assert_int_equal(lb_lock_info_of(l).held, 1);
    assert_int_equal(lb_watchdog_check(wd, l, NULL, NULL), LB_OK);
    lb_watchdog_stats st;
    assert_int_equal(lb_watchdog_stats_get(wd, &st), LB_OK);
    assert_true(st.renewals >= 1);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_watchdog_check(wd, l, NULL, NULL), LB_ESTATE); /* release ends the watch */
    lb_lock_free(l);
    lb_watchdog_free(wd);
}

/* A try_acquire is watched too; the key deleted behind the holder's back is
 * reported as lost and the lock reads as not held, which is what a holder
 * checks before each write. */
static void test_a_deleted_key_is_reported_as_lost(void **state) {
    (void)state;
    lb_watchdog *wd = watchdog_on_target();
    lb_lock *l = renewing_lock(wd, "self:deleted", 300);
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_lock_info_of(l).held, 1);
    lbt_cmd_ok(conn, "DEL self:deleted");
    /* The bound only keeps a broken build from hanging (a renewal is due
     * every 100 ms); it is not what is tested. */
    for (int i = 0; i < 500 && lb_lock_info_of(l).held; i++) lbt_sleep_ms(10);
    assert_int_equal(lb_lock_info_of(l).held, 0);
    lb_watch_reason why = LB_WATCH_NONE;
    assert_int_equal(lb_watchdog_check(wd, l, NULL, &why), LB_ELOST);
    assert_int_equal(why, LB_WATCH_REFUSED);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_ELOST);
    lb_lock_free(l);
    lb_watchdog_free(wd);
}

/* What the loss callback was told. */
typedef struct loss_seen {
    int calls;
    const lb_lock *lock;
    lb_watch_reason why;
    char detail[128];
} loss_seen;

static void record_loss(const lb_lock *lock, lb_watch_reason why, const char *detail, void *ud) {
    loss_seen *seen = ud;
    seen->lock = lock;
    seen->why = why;
    snprintf(seen->detail, sizeof seen->detail, "%s", detail);
    __atomic_add_fetch(&seen->calls, 1, __ATOMIC_RELEASE);
}

/* The watchdog's loss callback reaches the locks that name it in their
 * options: a self-renewing lock says when it is lost, with no watch of the
 * caller's own; the watchdog made in one call (lb_watchdog_new_on) or from
 * its options. */
static void loss_is_reported(int one_call) {
    loss_seen seen;
    memset(&seen, 0, sizeof seen);
    lb_watchdog *wd = (lb_watchdog *)&seen; /* reset on entry */
    assert_int_equal(lb_watchdog_new_on(&wd, lb_on_conn(NULL), record_loss, &seen), LB_EINVAL);
    assert_null(wd);
    lb_watchdog_options o;
    lb_watchdog_options_init(&o);
    o.target = lb_on_conn(conn);
    o.lost = record_loss;
    o.lost_ud = &seen;
    int rc = one_call ? lb_watchdog_new_on(&wd, lb_on_conn(conn), record_loss, &seen)
                      : lb_watchdog_new(&wd, &o);
    assert_int_equal(rc, LB_OK);
    lb_lock *l = renewing_lock(wd, "self:told", 300);
    assert_int_equal(lb_lock_acquire(l, lb_on_conn(conn), 1000), LB_OK);
    lbt_cmd_ok(conn, "SET self:told someone-else");
    /* The bound only keeps a broken build from hanging (a renewal is due
     * every 100 ms); it is not what is tested. */
    for (int i = 0; i < 500 && !__atomic_load_n(&seen.calls, __ATOMIC_ACQUIRE); i++)
        lbt_sleep_ms(10);
    assert_int_equal(__atomic_load_n(&seen.calls, __ATOMIC_ACQUIRE), 1);
    assert_ptr_equal(seen.lock, l);
    assert_int_equal(seen.why, LB_WATCH_REFUSED);
    assert_string_not_equal(seen.detail, "");
    assert_int_equal(lb_lock_info_of(l).held, 0);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_ELOST);
    assert_string_equal(lbt_get(conn, "self:told"), "someone-else"); /* never touched */
    lbt_cmd_ok(conn, "DEL self:told");
    lb_lock_free(l);
    lb_watchdog_free(wd);
}

static void test_a_self_renewing_lock_reports_its_loss_to_the_callback(void **state) {
    (void)state;
    loss_is_reported(0);
}

static void test_a_watchdog_made_in_one_call_reports_a_loss_to_its_callback(void **state) {
    (void)state;
    loss_is_reported(1);
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
        cmocka_unit_test(test_a_watchdog_without_a_server_is_refused),
        cmocka_unit_test(test_renewal_keeps_the_lock_past_its_ttl_through_the_target),
        cmocka_unit_test(test_a_deleted_key_is_reported_as_lost),
        cmocka_unit_test(test_a_self_renewing_lock_reports_its_loss_to_the_callback),
        cmocka_unit_test(test_a_watchdog_made_in_one_call_reports_a_loss_to_its_callback),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
