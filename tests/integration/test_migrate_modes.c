/* Modes and the control key against a real redis-server: mode and namespace
 * names, the mode read, set, compared and published, and handles following it
 * on refresh and on notification (from a subscriber thread). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/mlock_util.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"

static lbt_redis server;
static redisContext *admin; /* the test's own connection, for setup and checks */

/* ---- Modes and the control key ----------------------------------------------------------- */
static void test_mode_names_round_trip_and_strangers_are_refused(void **state) {
    (void)state;
    static const struct { const char *s; int rc; lb_mode m; } t[] = {
        {"legacy", LB_OK, LB_MODE_LEGACY}, {"compat", LB_OK, LB_MODE_COMPAT},
        {"modern", LB_OK, LB_MODE_MODERN}, {"Modern", LB_EINVAL, LB_MODE_LEGACY},
        {"modern ", LB_EINVAL, LB_MODE_LEGACY}, {"", LB_EINVAL, LB_MODE_LEGACY},
        {"compatible", LB_EINVAL, LB_MODE_LEGACY},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        lb_mode m = LB_MODE_MODERN;
        assert_int_equal(lb_mode_parse(t[i].s, strlen(t[i].s), &m), t[i].rc);
        assert_int_equal(m, t[i].m);
        if (t[i].rc == LB_OK) assert_string_equal(lb_mode_name(m), t[i].s);
    }
    assert_string_equal(lb_mode_name((lb_mode)7), "unknown");
    lb_mode m;
    assert_int_equal(lb_mode_parse("compat\0x", 8, &m), LB_EINVAL);
}

static void test_namespace_names_share_one_slot_and_bad_names_are_refused(void **state) {
    (void)state;
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, "orders", 6), LB_OK);
    assert_string_equal(k.mode, "{orders}:lb-mode");
    assert_string_equal(k.channel, "{orders}:lb-mode-ch");
    assert_string_equal(k.census, "{orders}:lb-census");
    assert_int_equal(k.modelen, strlen(k.mode));
    assert_int_equal(lb_ns_keys_init(&k, "{app}:orders", 12), LB_OK);
    assert_string_equal(k.mode, "{app}:orders:lb-mode");
    assert_int_equal(lb_ns_keys_init(&k, "a}b", 3), LB_EINVAL);
    assert_string_equal(k.mode, "");
    assert_int_equal(lb_ns_keys_init(&k, "", 0), LB_EINVAL);
    char big[400];
    memset(big, 'n', sizeof big);
    assert_int_equal(lb_ns_keys_init(&k, big, sizeof big), LB_EINVAL);
}

static void test_mode_is_read_set_compared_and_published(void **state) {
    (void)state;
    const char *ns = "mt:modes";
    lb_ns_keys k;
    lb_mode m;
    int found;
    long long receivers = -1;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(admin, k.mode);
    assert_int_equal(lb_mode_get(lb_on_conn(admin), ns, strlen(ns), &m, &found), LB_OK);
    assert_int_equal(found, 0);

    /* A subscriber hears every set. */
    redisContext *sub = lbt_redis_connect(&server);
    assert_non_null(sub);
    lbt_cmd_ok(sub, "SUBSCRIBE %s", k.channel);
    redisReply *r;
    assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), LB_MODE_COMPAT, NULL, &receivers), LB_OK);
    assert_int_equal(receivers, 1);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_int_equal(lb_mode_message(r, &m), LB_OK);
    assert_int_equal(m, LB_MODE_COMPAT);
    freeReplyObject(r);
    redisFree(sub);

    assert_int_equal(lb_mode_get(lb_on_conn(admin), ns, strlen(ns), &m, &found), LB_OK);
    assert_int_equal(found, 1);
    assert_int_equal(m, LB_MODE_COMPAT);
    /* Compare-and-set: refused when the current mode is not the expected one. */
    lb_mode expect = LB_MODE_LEGACY;
    assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), LB_MODE_MODERN, &expect, NULL), LB_ESTATE);
    assert_int_equal(lb_mode_get(lb_on_conn(admin), ns, strlen(ns), &m, &found), LB_OK);
    assert_int_equal(m, LB_MODE_COMPAT);
    expect = LB_MODE_COMPAT;
    assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), LB_MODE_MODERN, &expect, NULL), LB_OK);
    assert_int_equal(lb_mode_get(lb_on_conn(admin), ns, strlen(ns), &m, &found), LB_OK);
    assert_int_equal(m, LB_MODE_MODERN);
    /* An absent key counts as legacy for the comparison. */
    lbt_del(admin, k.mode);
    expect = LB_MODE_LEGACY;
    assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), LB_MODE_COMPAT, &expect, NULL), LB_OK);

    /* A control key holding something else is reported, not guessed at. */
    lbt_cmd_ok(admin, "SET %s %s", k.mode, "turbo");
    assert_int_equal(lb_mode_get(lb_on_conn(admin), ns, strlen(ns), &m, &found), LB_EFOREIGN);
    assert_int_equal(found, 0);
    assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), LB_MODE_MODERN, &expect, NULL), LB_ESTATE);
    lbt_del(admin, k.mode);
    lbt_cmd_ok(admin, "HSET %s a b", k.mode);
    assert_int_equal(lb_mode_get(lb_on_conn(admin), ns, strlen(ns), &m, &found), LB_EWRONGTYPE);
    assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), LB_MODE_MODERN, NULL, NULL), LB_EWRONGTYPE);
    lbt_del(admin, k.mode);
    assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), (lb_mode)9, NULL, NULL), LB_EINVAL);
}

/* ---- Following the control key ---------------------------------------------------------------- */
static void test_mode_changes_are_picked_up_on_refresh_and_notification(void **state) {
    (void)state;
    const char *ns = "mt:follow", *key = "mt:follow:k";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(admin, k.mode);
    lbt_del(admin, key);
    /* Absent control key: the configured mode. */
    lb_mlock *l = lbt_follower(key, ns, LB_MODE_LEGACY, 3600000);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_LEGACY);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    /* A set is not seen before the refresh interval without a notification. */
    assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), LB_MODE_COMPAT, NULL, NULL), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_LEGACY);
    /* The operation in flight ends in its own mode even after a notification. */
    lb_mlock_notify(l);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_info_of(l).mode, LB_MODE_COMPAT);
    assert_true(lbt_pttl(admin, key) > 0);
    /* Switched while held: release still speaks the mode it acquired in. */
    assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), LB_MODE_MODERN, NULL, NULL), LB_OK);
    assert_int_equal(lb_mlock_refresh(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    lbt_assert_key(admin, key, NULL, 0);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_MODERN);
    assert_int_equal(strlen(lb_mlock_info_of(l).value), 32);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    /* A refresh interval of 0 reads before every acquire; a garbage control
     * key keeps the last known mode; so does a deleted one (evicted, lost in a
     * failover): a follower configured legacy that has seen modern never moves
     * two stages because the key vanished, and says the key is missing. */
    lb_mlock *e = lbt_follower(key, ns, LB_MODE_LEGACY, 0);
    assert_int_equal(lb_mlock_try_acquire(e, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(e).held_mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_release(e, lb_on_conn(admin)), LB_OK);
    lbt_cmd_ok(admin, "SET %s %s", k.mode, "warp");
    assert_int_equal(lb_mlock_try_acquire(e, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(e).held_mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_release(e, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(e).control_key_missing, 0);
    lbt_del(admin, k.mode);
    assert_int_equal(lb_mlock_try_acquire(e, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(e).held_mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_info_of(e).control_key_missing, 1);
    assert_int_equal(lb_mlock_release(e, lb_on_conn(admin)), LB_OK);
    /* Written again: read again, no longer missing. */
    lbt_cmd_ok(admin, "SET %s %s", k.mode, "compat");
    assert_int_equal(lb_mlock_try_acquire(e, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(e).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_info_of(e).control_key_missing, 0);
    assert_int_equal(lb_mlock_release(e, lb_on_conn(admin)), LB_OK);
    /* A follower that never read a mode uses its configured one. */
    lbt_del(admin, k.mode);
    lb_mlock *fresh = lbt_follower(key, ns, LB_MODE_LEGACY, 0);
    assert_int_equal(lb_mlock_try_acquire(fresh, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(fresh).held_mode, LB_MODE_LEGACY);
    assert_int_equal(lb_mlock_info_of(fresh).control_key_missing, 0);
    assert_int_equal(lb_mlock_release(fresh, lb_on_conn(admin)), LB_OK);
    lb_mlock_free(fresh);
    /* A handle without a namespace cannot refresh or follow. */
    lb_mlock *n = lbt_mlock(key, LB_MODE_COMPAT, NULL, 5000, NULL);
    assert_int_equal(lb_mlock_refresh(n, lb_on_conn(admin)), LB_EINVAL);
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.follow = 1;
    lb_mlock *bad = (lb_mlock *)&o;
    assert_int_equal(lb_mlock_new(&bad, key, strlen(key), &o), LB_EINVAL);
    assert_null(bad);
    lb_mlock_free(l);
    lb_mlock_free(e);
    lb_mlock_free(n);
}

/* A subscriber thread relays mode messages to the handle, as an application
 * with its own SUBSCRIBE connection would. */
typedef struct relay {
    lb_mlock *l;
    const char *channel;
    int subscribed;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lb_mode heard;
} relay;

static void *relay_main(void *ud) {
    relay *r = ud;
    redisContext *sub = lbt_redis_connect(&server);
    redisReply *rep = sub ? redisCommand(sub, "SUBSCRIBE %s", r->channel) : NULL;
    if (rep) freeReplyObject(rep);
    pthread_mutex_lock(&r->mu);
    r->subscribed = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (sub && redisGetReply(sub, (void **)&rep) == REDIS_OK) {
        if (lb_mode_message(rep, &r->heard) == LB_OK) lb_mlock_notify(r->l);
        freeReplyObject(rep);
    }
    if (sub) redisFree(sub);
    return NULL;
}

static void test_a_notification_makes_the_next_acquire_reread(void **state) {
    (void)state;
    const char *ns = "mt:notify", *key = "mt:notify:k";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(admin, k.mode);
    lbt_del(admin, key);
    lb_mlock *l = lbt_follower(key, ns, LB_MODE_COMPAT, 3600000);
    assert_int_equal(lb_mlock_refresh(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).mode, LB_MODE_COMPAT);
    relay r = {l, k.channel, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
               LB_MODE_LEGACY};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, relay_main, &r), 0);
    pthread_mutex_lock(&r.mu);
    while (!r.subscribed) pthread_cond_wait(&r.cv, &r.mu);
    pthread_mutex_unlock(&r.mu);
    /* The subscriber may still be between its SUBSCRIBE and the server's
     * registration: set until someone is notified. */
    long long receivers = 0;
    for (int i = 0; i < 500 && receivers == 0; i++) {
        assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), LB_MODE_MODERN, NULL, &receivers),
                         LB_OK);
        if (receivers == 0) usleep(2000);
    }
    assert_int_equal(receivers, 1);
    pthread_join(th, NULL);
    assert_int_equal(r.heard, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    lb_mlock_free(l);
}

static int setup(void **state) {
    (void)state;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    admin = lbt_redis_connect(&server);
    return admin ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (admin) redisFree(admin);
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode_names_round_trip_and_strangers_are_refused),
        cmocka_unit_test(test_namespace_names_share_one_slot_and_bad_names_are_refused),
        cmocka_unit_test(test_mode_is_read_set_compared_and_published),
        cmocka_unit_test(test_mode_changes_are_picked_up_on_refresh_and_notification),
        cmocka_unit_test(test_a_notification_makes_the_next_acquire_reread),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
