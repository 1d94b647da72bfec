/* Waiting on the migration shim's handle against a real redis-server: woken by
 * a compat or modern release, cancelled by the clock's sleep hook, polling
 * beside a lock turned over fast, and a foreign value failing at once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/churn.h"
#include "harness/mlock_util.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "harness/cancel.h"
#include "lockbridge/lockbridge.h"
#include "migrate/internal.h"

static lbt_redis server;
static redisContext *admin; /* the test's own connection, for setup and checks */

typedef struct mjob {
    lb_mlock *l;
    redisContext *c;
    lb_waiter *w;
    int64_t wait_ms;
    int rc;
    int done; /* atomic */
} mjob;

static void *mjob_main(void *ud) {
    mjob *j = ud;
    j->rc = lb_mlock_acquire_wait(j->l, lb_on_conn(j->c), j->w, j->wait_ms);
    __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static lb_waiter_stats waiter_stats(lb_waiter *w) {
    lb_waiter_stats st;
    lb_waiter_stats_get(w, &st);
    return st;
}

/* In compat and in modern mode a waiting handle wakes on the holder's
 * release: its back-off (5 s) is longer than its deadline (4 s), so only the
 * release message can get it the lock in time. */
static void test_a_waiting_mlock_wakes_on_a_compat_or_modern_release(void **state) {
    (void)state;
    for (int m = LB_MODE_COMPAT; m <= LB_MODE_MODERN; m++) {
        lbt_del(admin, "mig:wake");
        lb_waiter_options wo;
        lb_waiter_options_init(&wo);
        wo.host = "127.0.0.1";
        wo.port = server.port;
        lb_waiter *w = NULL;
        assert_int_equal(lb_waiter_new(&w, &wo), LB_OK);
        lb_mlock *a = lbt_mlock("mig:wake", (lb_mode)m, NULL, 30000, NULL), *b = NULL;
        lb_mlock_options o;
        lb_mlock_options_init(&o);
        o.mode = (lb_mode)m;
        o.backoff_min_ms = o.backoff_max_ms = 5000;
        assert_int_equal(lb_mlock_new(&b, "mig:wake", 8, &o), LB_OK);
        assert_int_equal(lb_mlock_try_acquire(a, lb_on_conn(admin)), LB_OK);
        mjob j = {.l = b, .c = lbt_redis_connect(&server), .w = w, .wait_ms = 4000};
        assert_non_null(j.c);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, mjob_main, &j), 0);
        /* Asleep after the attempt that followed the subscription. */
        for (int i = 0; !(waiter_stats(w).sleeps >= 2 && waiter_stats(w).blocked == 1); i++) {
            assert_true(i < 2000);
            usleep(5000);
        }
        assert_int_equal(lb_mlock_release(a, lb_on_conn(admin)), LB_OK);
        pthread_join(th, NULL);
        assert_int_equal(j.rc, LB_OK);
        assert_true(lb_mlock_info_of(b).held);
        lbt_assert_key_is_ours(admin, "mig:wake", b);
        assert_true(waiter_stats(w).messages >= 1);
        assert_int_equal(lb_mlock_release(b, lb_on_conn(j.c)), LB_OK);
        redisFree(j.c);
        lb_waiter_free(w);
        lb_mlock_free(a);
        lb_mlock_free(b);
    }
}

/* A handle asleep on the waiter (back-off 5 s, wait 8 s) ends with
 * LB_ECANCELED soon after another thread cancels (2 s: a generous bound),
 * holding nothing; it acquires once the holder is gone. */
static void test_a_waiting_mlock_is_cancelled_by_the_clocks_sleep_hook(void **state) {
    (void)state;
    lbt_del(admin, "mig:cancel");
    lbt_canceller c;
    lbt_canceller_init(&c);
    lb_waiter_options wo;
    lb_waiter_options_init(&wo);
    wo.host = "127.0.0.1";
    wo.port = server.port;
    lb_waiter *w = NULL;
    assert_int_equal(lb_waiter_new(&w, &wo), LB_OK);
    lb_mlock *a = lbt_mlock("mig:cancel", LB_MODE_MODERN, NULL, 30000, NULL), *b = NULL;
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.mode = LB_MODE_MODERN;
    o.backoff_min_ms = o.backoff_max_ms = 5000;
    o.clock = &c.clock;
    assert_int_equal(lb_mlock_new(&b, "mig:cancel", 10, &o), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(a, lb_on_conn(admin)), LB_OK);
    mjob j = {.l = b, .c = lbt_redis_connect(&server), .w = w, .wait_ms = 8000};
    assert_non_null(j.c);
    pthread_t th;
    int64_t start = lbt_mono_ms();
    assert_int_equal(pthread_create(&th, NULL, mjob_main, &j), 0);
    for (int i = 0; waiter_stats(w).blocked != 1; i++) {
        assert_true(i < 2000);
        usleep(5000);
    }
    lbt_cancel(&c);
    pthread_join(th, NULL);
    assert_int_equal(j.rc, LB_ECANCELED);
    assert_true(lbt_mono_ms() - start < 2000);
    assert_false(lb_mlock_info_of(b).held);
    lbt_assert_key_is_ours(admin, "mig:cancel", a);
    assert_int_equal(lb_mlock_release(a, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(b, lb_on_conn(j.c)), LB_OK);
    assert_int_equal(lb_mlock_release(b, lb_on_conn(j.c)), LB_OK);
    redisFree(j.c);
    lb_waiter_free(w);
    lb_mlock_free(a);
    lb_mlock_free(b);
    lbt_canceller_destroy(&c);
}

/* ---- Polling beside a lock turned over fast ------------------------------------------ */
/* A compat holder that writes its value afresh (valid 30 s from the wall
 * clock's now, with its TTL), and that instant. */
typedef struct fresh_holder {
    lbt_holder h;
    int64_t written_us;
} fresh_holder;

static int renew_compat(void *ud) {
    fresh_holder *f = ud;
    lb_codec codec;
    lb_now now = lb_clock_now(NULL);
    int64_t span = 0;
    char v[64];
    size_t len = 0;
    if (lb_codec_parse(&codec, "ms") != LB_OK || lb_codec_ms_to_units(&codec, 30000, &span) != LB_OK ||
        lb_codec_encode(&codec, lb_codec_now(&codec, &now) + span, v, sizeof v, &len) != LB_OK)
        return -1;
    f->written_us = now.wall_us;
    redisReply *r = redisCommand(f->h.c, "SET %s %b PX 31000", f->h.key, v, len);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* The waiter's wall clock beside a holder written afresh before each attempt:
 * the instant of the last write, so that the holder is just begun (age 0) at
 * every attempt however late a busy host runs it. (On the real clock, an
 * attempt a few ms late saw a holder a few ms old, and the 20x rule let it
 * sleep 60 or 80 ms.) ud: the lbt_sleeps whose hook renews the holder. */
static int64_t at_the_last_write(void *ud) {
    const lbt_sleeps *s = ud;
    return ((const fresh_holder *)s->after_ud)->written_us;
}

/* As for the token lock: a compat waiter refused by holders only ever just
 * begun sleeps about 20 ms between attempts (up to 40 when an attempt is a
 * ms late), not the back-off's 100 ms; a holder left to age is waited for
 * with the whole back-off. */
static void test_a_compat_wait_beside_a_lock_turned_over_fast_asks_within_20_ms(void **state) {
    (void)state;
    for (int young = 1; young >= 0; young--) {
        fresh_holder f = {{lbt_redis_connect(&server), "mig:young"}, 0};
        assert_non_null(f.h.c);
        lbt_sleeps sleeps = {.after = young ? renew_compat : NULL, .after_ud = &f};
        lb_clock clock = {.sleep_ms = lbt_sleeps_record, .ud = &sleeps,
                          .wall_us = young ? at_the_last_write : NULL};
        lb_mlock *l = lbt_mlock(f.h.key, LB_MODE_COMPAT, "ms", 30000, &clock);
        assert_int_equal(renew_compat(&f), 0);
        assert_int_equal(lb_mlock_acquire(l, lb_on_conn(admin), young ? 1000 : 1500), LB_ETIMEDOUT);
        assert_true(sleeps.calls >= 5);
        assert_int_equal(sleeps.after_failures, 0);
        if (young) assert_in_range(sleeps.longest_ms, 1, 40);
        else assert_in_range(sleeps.longest_ms, 41, 100);
        lbt_del(admin, f.h.key);
        redisFree(f.h.c);
        lb_mlock_free(l);
    }
}

/* A sleep hook that counts the wait's sleeps and cancels at the first. */
static int count_and_cancel(void *ud, int64_t ms) {
    (void)ms;
    ++*(int *)ud;
    return 1;
}

/* With foreign_fails_at_once a blocking acquire that meets a value left alone
 * returns LB_EFOREIGN without sleeping; without it, the wait sleeps on. */
static void test_a_foreign_value_fails_a_blocking_mlock_acquire_at_once_when_asked(void **state) {
    (void)state;
    const char *key = "mf:foreignfast";
    lbt_cmd_ok(admin, "SET %s %s", key, "owner-42");
    int sleeps = 0;
    lb_clock clock = {NULL, NULL, NULL, 0, count_and_cancel};
    clock.ud = &sleeps;
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.mode = LB_MODE_COMPAT;
    o.clock = &clock;
    o.foreign_fails_at_once = 1;
    lb_mlock *l = NULL;
    assert_int_equal(lb_mlock_new(&l, LB_KEY(key), &o), LB_OK);
    assert_int_equal(lb_mlock_acquire(l, lb_on_conn(admin), 60000), LB_EFOREIGN);
    assert_int_equal(sleeps, 0);
    lb_mlock_free(l);
    o.foreign_fails_at_once = 0;
    assert_int_equal(lb_mlock_new(&l, LB_KEY(key), &o), LB_OK);
    assert_int_equal(lb_mlock_acquire(l, lb_on_conn(admin), 60000), LB_ECANCELED);
    assert_int_equal(sleeps, 1);
    lbt_assert_key(admin, key, "owner-42", 8);
    lb_mlock_free(l);
    lbt_cmd_ok(admin, "DEL %s", key);
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
        cmocka_unit_test(test_a_waiting_mlock_wakes_on_a_compat_or_modern_release),
        cmocka_unit_test(test_a_waiting_mlock_is_cancelled_by_the_clocks_sleep_hook),
        cmocka_unit_test(test_a_compat_wait_beside_a_lock_turned_over_fast_asks_within_20_ms),
        cmocka_unit_test(test_a_foreign_value_fails_a_blocking_mlock_acquire_at_once_when_asked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
