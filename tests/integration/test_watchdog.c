/* The watchdog against a real redis-server: short-TTL locks kept for several
 * TTLs, many locks on one thread, lost locks (overwritten, deleted, server
 * paused), the hold limit, reconnects, and unwatch or release racing renewal. */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "lockbridge/lockbridge.h"

static lbt_redis server;
static lbt_redis secured; /* a second server, with requirepass */
static redisContext *conn;

/* ---- helpers ---------------------------------------------------------------- */

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What lost callbacks reported, shared with the watchdog's thread. */
typedef struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    int reason;
    int64_t at_ns;           /* when the last call ran */
    int after_release;       /* calls that ran once `released` was set */
    int released;
    char detail[160];
    lb_watchdog *wd;         /* when set, the callback queries the watchdog */
    int check_rc;
} recorder;

static void rec_init(recorder *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static void rec_destroy(recorder *r) {
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

static void on_lost(const lb_lock *lock, lb_watch_reason reason, const char *detail, void *ud) {
    recorder *r = ud;
    int check_rc = 0;
    /* The callback runs without the watchdog's mutex: these would deadlock. */
    if (r->wd) {
        lb_watchdog_stats st;
        check_rc = lb_watchdog_check(r->wd, lock, NULL, NULL);
        if (lb_watchdog_stats_get(r->wd, &st) != LB_OK) check_rc = 99;
    }
    pthread_mutex_lock(&r->mu);
    r->calls++;
    r->reason = (int)reason;
    r->at_ns = mono_ns();
    r->check_rc = check_rc;
    if (r->released) r->after_release++;
    snprintf(r->detail, sizeof r->detail, "%s", detail ? detail : "(null)");
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Waits up to `max_ms` for a first call; returns the number of calls. The
 * bound only keeps a broken build from hanging; it is not what is tested. */
static int rec_wait(recorder *r, int64_t max_ms) {
    int64_t end = mono_ns() + max_ms * 1000000;
    pthread_mutex_lock(&r->mu);
    while (r->calls == 0 && mono_ns() < end) {
        pthread_mutex_unlock(&r->mu);
        lbt_sleep_ms(5);
        pthread_mutex_lock(&r->mu);
    }
    int n = r->calls;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Every loss says why, whatever its reason: never NULL, never "". */
static void assert_detail_given(recorder *r) {
    pthread_mutex_lock(&r->mu);
    int given = r->detail[0] != '\0' && strcmp(r->detail, "(null)") != 0;
    pthread_mutex_unlock(&r->mu);
    assert_true(given);
}

static int rec_calls(recorder *r) {
    pthread_mutex_lock(&r->mu);
    int n = r->calls;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static lb_watchdog *new_watchdog(void) {
    lb_watchdog_options o;
    lb_watchdog_options_init(&o);
    o.host = "127.0.0.1";
    o.port = server.port;
    lb_watchdog *wd = NULL;
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_OK);
    assert_non_null(wd);
    return wd;
}

static lb_lock *held_lock(const char *key, int64_t ttl_ms) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = ttl_ms;
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, key, strlen(key), &o), LB_OK);
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(conn)), LB_OK);
    return l;
}

static void watch(lb_watchdog *wd, lb_lock *l, recorder *r, double fraction, int64_t max_hold) {
    lb_watch_options o;
    lb_watch_options_init(&o);
    if (fraction > 0) o.renew_fraction = fraction;
    o.max_hold_ms = max_hold;
    o.lost = r ? on_lost : NULL;
    o.ud = r;
    assert_int_equal(lb_watchdog_watch(wd, l, &o), LB_OK);
}

/* Waits (bounded) until the key is gone; returns whether it went. */
static int wait_gone(const char *key, int64_t max_ms) {
    int64_t end = mono_ns() + max_ms * 1000000;
    while (lbt_int(conn, "EXISTS %s", key) != 0) {
        if (mono_ns() > end) return 0;
        lbt_sleep_ms(10);
    }
    return 1;
}

static int thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static lb_watchdog_stats stats(lb_watchdog *wd) {
    lb_watchdog_stats st;
    assert_int_equal(lb_watchdog_stats_get(wd, &st), LB_OK);
    return st;
}

/* ---- keeping locks ---------------------------------------------------------- */

static void test_keeps_a_300ms_lock_held_for_five_ttls(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    lb_lock *l = held_lock("wd:keep", 300);
    int64_t acquired_deadline = lb_lock_info_of(l).deadline_ns;
    watch(wd, l, &r, 0, 0);
    for (int i = 0; i < 15; i++) {
        lbt_sleep_ms(100);
        assert_string_equal(lbt_get(conn, "wd:keep"), lb_lock_info_of(l).token);
    }
    int64_t deadline = 0;
    assert_int_equal(lb_watchdog_check(wd, l, &deadline, NULL), LB_OK);
    assert_true(deadline > acquired_deadline);
    /* The handle's own deadline follows the renewals. */
    assert_true(lb_lock_info_of(l).deadline_ns > acquired_deadline);
    lb_watchdog_stats st = stats(wd);
    assert_true(st.renewals >= 3);
    assert_int_equal(st.lost, 0);
    assert_int_equal(st.watched, 1);
    assert_int_equal(rec_calls(&r), 0);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lbt_int(conn, "EXISTS %s", "wd:keep"), 0);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

static void test_one_thread_renews_forty_locks(void **state) {
    (void)state;
    enum { N = 40 };
    int before = thread_count();
    lb_watchdog *wd = new_watchdog();
    assert_int_equal(thread_count(), before + 1);
    recorder r;
    rec_init(&r);
    lb_lock *locks[N];
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "wd:many:%d", i);
        locks[i] = held_lock(key, 300);
        watch(wd, locks[i], &r, 0, 0);
    }
    assert_int_equal(thread_count(), before + 1);
    for (int round = 0; round < 5; round++) {
        lbt_sleep_ms(200);
        for (int i = 0; i < N; i++) {
            snprintf(key, sizeof key, "wd:many:%d", i);
            assert_string_equal(lbt_get(conn, key), lb_lock_info_of(locks[i]).token);
        }
    }
    lb_watchdog_stats st = stats(wd);
    assert_int_equal(st.watched, N);
    assert_true(st.renewals >= 2 * N);
    assert_int_equal(rec_calls(&r), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(lb_lock_release(locks[i], lb_on_conn(conn)), LB_OK);
        lb_lock_free(locks[i]);
    }
    assert_int_equal(stats(wd).watched, 0);
    lb_watchdog_free(wd);
    assert_int_equal(thread_count(), before);
    rec_destroy(&r);
}

/* ---- lost locks --------------------------------------------------------------- */

static void test_lost_at_once_when_another_client_overwrites_the_value(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    lb_lock *l = held_lock("wd:overwritten", 300);
    watch(wd, l, &r, 0, 0);
    lbt_cmd_ok(conn, "SET wd:overwritten intruder");
    assert_int_equal(rec_wait(&r, 5000), 1);
    assert_int_equal(r.reason, LB_WATCH_REFUSED);
    assert_detail_given(&r);
    /* The watchdog's extend compares first: the intruder's key keeps no TTL. */
    assert_string_equal(lbt_get(conn, "wd:overwritten"), "intruder");
    assert_int_equal(lbt_int(conn, "PTTL %s", "wd:overwritten"), -1);
    lb_watch_reason reason = (lb_watch_reason)0;
    assert_int_equal(lb_watchdog_check(wd, l, NULL, &reason), LB_ELOST);
    assert_int_equal(reason, LB_WATCH_REFUSED);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_ELOST);
    assert_string_equal(lbt_get(conn, "wd:overwritten"), "intruder");
    assert_int_equal(rec_calls(&r), 1);
    lbt_cmd_ok(conn, "DEL wd:overwritten");
    lb_lock_free(l);
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

/* A watch covers one acquisition: acquiring the handle again (its owner saw
 * the loss first) ends the old watch, which must not report the new
 * acquisition's predecessor lost or renew with the old token later. */
static void test_acquiring_again_ends_the_old_watch(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    lb_lock *l = held_lock("wd:again", 30000);
    watch(wd, l, &r, 0, 0); /* renewal due in 10 s: none during the test */
    lbt_cmd_ok(conn, "DEL wd:again");
    int64_t ttl;
    assert_int_equal(lb_lock_check(l, lb_on_conn(conn), &ttl), LB_ELOST);
    assert_int_equal(stats(wd).watched, 1);
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(conn)), LB_OK);
    assert_int_equal(stats(wd).watched, 0);
    assert_int_equal(rec_calls(&r), 0);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

static void test_lost_at_once_when_the_key_is_deleted(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    lb_lock *l = held_lock("wd:deleted", 30000);
    /* A 30 s lock renewed every 10 ms: the loss is seen at the next renewal,
     * long before the TTL. */
    watch(wd, l, &r, 1.0 / 3000, 0);
    lbt_cmd_ok(conn, "DEL wd:deleted");
    assert_int_equal(rec_wait(&r, 5000), 1);
    assert_int_equal(r.reason, LB_WATCH_REFUSED);
    assert_detail_given(&r);
    assert_int_equal(lbt_int(conn, "EXISTS %s", "wd:deleted"), 0);
    assert_int_equal(stats(wd).lost, 1);
    lb_lock_free(l);
    assert_int_equal(stats(wd).watched, 0);
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

static void test_lost_when_the_server_is_paused_past_the_ttl(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    lb_lock *l = held_lock("wd:paused", 300);
    watch(wd, l, &r, 0, 0);
    lbt_sleep_ms(150);
    lbt_redis_pause(&server, 1);
    int calls = rec_wait(&r, 5000);
    int64_t deadline = 0;
    int check = lb_watchdog_check(wd, l, &deadline, NULL);
    lbt_redis_pause(&server, 0);
    assert_int_equal(calls, 1);
    assert_int_equal(r.reason, LB_WATCH_UNREACHABLE);
    assert_detail_given(&r);
    assert_int_equal(check, LB_ELOST);
    /* Reported when the lease ran out by the watchdog's clock, not before. */
    assert_true(r.at_ns >= deadline);
    assert_true(strlen(r.detail) > 0);
    lb_lock_release(l, lb_on_conn(conn)); /* whatever the resumed server says */
    lbt_cmd_ok(conn, "DEL wd:paused");
    lb_lock_free(l);
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

static void test_max_hold_stops_renewal_and_is_reported_as_such(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    lb_lock *l = held_lock("wd:maxhold", 300);
    int64_t acquired_deadline = lb_lock_info_of(l).deadline_ns;
    int64_t before = mono_ns();
    watch(wd, l, &r, 0, 700);
    int64_t after = mono_ns();
    assert_int_equal(rec_wait(&r, 5000), 1);
    assert_int_equal(r.reason, LB_WATCH_MAX_HOLD);
    assert_detail_given(&r);
    int64_t deadline = 0;
    lb_watch_reason reason = (lb_watch_reason)0;
    assert_int_equal(lb_watchdog_check(wd, l, &deadline, &reason), LB_ELOST);
    assert_int_equal(reason, LB_WATCH_MAX_HOLD);
    /* Renewed past the acquired lease, never past the limit, reported at its end. */
    assert_true(stats(wd).renewals >= 1);
    assert_true(deadline > acquired_deadline);
    assert_true(deadline <= after + 700 * INT64_C(1000000));
    assert_true(deadline >= before + 700 * INT64_C(1000000) - 300 * INT64_C(1000000));
    assert_true(r.at_ns >= deadline);
    /* Nobody releases it: the key lapses by itself. */
    assert_true(wait_gone("wd:maxhold", 5000));
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_ELOST);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

static void test_max_hold_below_the_ttl_never_shortens_the_lease(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    lb_lock *l = held_lock("wd:short-hold", 400);
    int64_t acquired_deadline = lb_lock_info_of(l).deadline_ns;
    watch(wd, l, &r, 0.1, 100);
    assert_int_equal(rec_wait(&r, 5000), 1);
    assert_int_equal(r.reason, LB_WATCH_MAX_HOLD);
    assert_detail_given(&r);
    assert_int_equal(stats(wd).renewals, 0);
    assert_true(r.at_ns >= acquired_deadline);
    lb_lock_free(l);
    lbt_cmd_ok(conn, "DEL wd:short-hold");
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

static void test_reconnects_when_its_connection_is_killed(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    lb_lock *l = held_lock("wd:killed", 300);
    watch(wd, l, &r, 0, 0);
    for (int i = 0; i < 3; i++) {
        lbt_sleep_ms(150);
        lbt_cmd_ok(conn, "CLIENT KILL TYPE normal");
    }
    for (int i = 0; i < 6; i++) {
        lbt_sleep_ms(100);
        assert_string_equal(lbt_get(conn, "wd:killed"), lb_lock_info_of(l).token);
    }
    lb_watchdog_stats st = stats(wd);
    assert_true(st.reconnects >= 1);
    assert_int_equal(rec_calls(&r), 0);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

/* A restarted server (persistence off) forgot the lock and the script: the
 * watchdog reconnects, sends the script body again, and reports the refusal. */
static void test_server_restart_is_reported_as_refused_after_reconnecting(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    lb_lock *l = held_lock("wd:restart", 5000);
    watch(wd, l, &r, 0.02, 0);
    lbt_sleep_ms(300);
    assert_true(stats(wd).renewals >= 1);
    redisFree(conn);
    conn = NULL;
    assert_int_equal(lbt_redis_restart(&server, NULL), 0);
    conn = lbt_redis_connect(&server);
    assert_non_null(conn);
    assert_int_equal(rec_wait(&r, 10000), 1);
    assert_int_equal(r.reason, LB_WATCH_REFUSED);
    assert_detail_given(&r);
    assert_true(stats(wd).reconnects >= 1);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_ELOST);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

static void test_lost_callback_runs_without_the_watchdog_mutex(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    r.wd = wd;
    lb_lock *l = held_lock("wd:callback", 300);
    watch(wd, l, &r, 0, 0);
    lbt_cmd_ok(conn, "DEL wd:callback");
    assert_int_equal(rec_wait(&r, 5000), 1);
    assert_int_equal(r.check_rc, LB_ELOST);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

/* ---- ending a watch ------------------------------------------------------------ */

/* Each round: a lock renewed every millisecond; after a random moment its owner
 * unwatches and releases (even rounds) or just releases (odd rounds); then
 * another client takes the key for a minute. No renewal may follow the
 * release: no lost callback (a renewal landing after the release would be
 * refused and reported), and the next holder's TTL untouched. An unwatch that
 * unlinks and frees the entry without waiting for the renewal in flight
 * crashes here within the 300 rounds. */
static void test_unwatch_or_release_racing_renewal_leaves_nothing_behind(void **state) {
    (void)state;
    enum { ROUNDS = 300 };
    lb_watchdog *wd = new_watchdog();
    recorder *recs = calloc(ROUNDS, sizeof *recs);
    assert_non_null(recs);
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 60000;
    lb_lock *next = NULL;
    assert_int_equal(lb_lock_new(&next, "wd:race", 7, &o), LB_OK);
    unsigned seed = 12345;
    for (int i = 0; i < ROUNDS; i++) {
        recorder *r = &recs[i];
        rec_init(r);
        lb_lock *l = held_lock("wd:race", 100);
        watch(wd, l, r, 0.01, 0);
        seed = seed * 1103515245u + 12345u;
        struct timespec ts = {0, (long)((seed >> 8) % 2500) * 1000};
        nanosleep(&ts, NULL);
        if (i % 2 == 0) assert_int_equal(lb_watchdog_unwatch(wd, l), LB_OK);
        assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
        pthread_mutex_lock(&r->mu);
        r->released = 1;
        pthread_mutex_unlock(&r->mu);
        lb_lock_free(l);
        assert_int_equal(lb_lock_try_acquire(next, lb_on_conn(conn)), LB_OK);
        assert_true(lbt_int(conn, "PTTL %s", "wd:race") > 59000);
        assert_int_equal(lb_lock_release(next, lb_on_conn(conn)), LB_OK);
    }
    lbt_sleep_ms(20);
    int calls = 0, late = 0;
    for (int i = 0; i < ROUNDS; i++) {
        calls += recs[i].calls;
        late += recs[i].after_release;
        rec_destroy(&recs[i]);
    }
    lb_watchdog_stats st = stats(wd);
    print_message("rounds %d, renewals %llu, callbacks %d (after release %d)\n", ROUNDS,
                  (unsigned long long)st.renewals, calls, late);
    assert_int_equal(calls, 0);
    assert_int_equal(st.lost, 0);
    assert_int_equal(st.watched, 0);
    assert_true(st.renewals > 0);
    lb_lock_free(next);
    lb_watchdog_free(wd);
    free(recs);
}

/* A callback that is running when its lock is unwatched. */
typedef struct slow_callback {
    int started, finished; /* atomics */
} slow_callback;

static void on_lost_slowly(const lb_lock *lock, lb_watch_reason reason, const char *detail,
                           void *ud) {
    slow_callback *s = ud;
    (void)lock, (void)reason, (void)detail;
    __atomic_store_n(&s->started, 1, __ATOMIC_SEQ_CST);
    lbt_sleep_ms(100);
    __atomic_store_n(&s->finished, 1, __ATOMIC_SEQ_CST);
}

static void test_unwatch_waits_for_a_callback_in_flight(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    slow_callback s = {0, 0};
    lb_lock *l = held_lock("wd:slow", 30000);
    lb_watch_options o;
    lb_watch_options_init(&o);
    o.renew_fraction = 1.0 / 3000;
    o.lost = on_lost_slowly;
    o.ud = &s;
    assert_int_equal(lb_watchdog_watch(wd, l, &o), LB_OK);
    lbt_cmd_ok(conn, "DEL wd:slow");
    int64_t end = mono_ns() + INT64_C(5000000000);
    while (!__atomic_load_n(&s.started, __ATOMIC_SEQ_CST) && mono_ns() < end) lbt_sleep_ms(1);
    assert_true(__atomic_load_n(&s.started, __ATOMIC_SEQ_CST));
    assert_int_equal(lb_watchdog_unwatch(wd, l), LB_OK);
    /* Once unwatch returns the callback is over: its data may be freed. */
    assert_true(__atomic_load_n(&s.finished, __ATOMIC_SEQ_CST));
    lb_lock_free(l);
    lb_watchdog_free(wd);
}

/* A callback that ends its own watch: the owner arranged that the lock is
 * not used elsewhere meanwhile. */
typedef struct self_unwatch {
    recorder rec;
    lb_watchdog *wd;
    lb_lock *lock;
    int unwatch_rc;
} self_unwatch;

static void on_lost_unwatch(const lb_lock *lock, lb_watch_reason reason, const char *detail,
                            void *ud) {
    self_unwatch *s = ud;
    (void)lock, (void)reason, (void)detail;
    int rc = lb_watchdog_unwatch(s->wd, s->lock);
    pthread_mutex_lock(&s->rec.mu);
    s->unwatch_rc = rc;
    s->rec.calls++;
    pthread_mutex_unlock(&s->rec.mu);
}

static void test_a_callback_may_end_its_own_watch(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    self_unwatch s;
    rec_init(&s.rec);
    s.wd = wd;
    s.unwatch_rc = 1;
    s.lock = held_lock("wd:self", 30000);
    lb_watch_options o;
    lb_watch_options_init(&o);
    o.renew_fraction = 1.0 / 3000;
    o.lost = on_lost_unwatch;
    o.ud = &s;
    assert_int_equal(lb_watchdog_watch(wd, s.lock, &o), LB_OK);
    lbt_cmd_ok(conn, "DEL wd:self");
    assert_int_equal(rec_wait(&s.rec, 5000), 1);
    assert_int_equal(s.unwatch_rc, LB_OK);
    assert_int_equal(lb_watchdog_check(wd, s.lock, NULL, NULL), LB_ESTATE);
    assert_int_equal(stats(wd).watched, 0);
    assert_int_equal(lb_lock_release(s.lock, lb_on_conn(conn)), LB_ELOST);
    lb_lock_free(s.lock);
    lb_watchdog_free(wd);
    rec_destroy(&s.rec);
}

static void test_freeing_a_watched_lock_stops_its_renewal(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    recorder r;
    rec_init(&r);
    lb_lock *l = held_lock("wd:freed", 300);
    watch(wd, l, &r, 0.1, 0);
    lbt_sleep_ms(100);
    lb_lock_free(l); /* not released: the key must lapse with its TTL */
    assert_int_equal(stats(wd).watched, 0);
    assert_true(wait_gone("wd:freed", 5000));
    assert_int_equal(rec_calls(&r), 0);
    assert_int_equal(stats(wd).lost, 0);
    lb_watchdog_free(wd);
    rec_destroy(&r);
}

static void test_freeing_the_watchdog_detaches_its_locks(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog();
    lb_lock *a = held_lock("wd:orphan:a", 5000), *b = held_lock("wd:orphan:b", 5000);
    watch(wd, a, NULL, 0, 0);
    watch(wd, b, NULL, 0, 0);
    lb_watchdog_free(wd);
    assert_int_equal(lb_lock_release(a, lb_on_conn(conn)), LB_OK);
    lb_lock_free(a);
    lb_lock_free(b);
    lbt_cmd_ok(conn, "DEL wd:orphan:b");
}

static void test_watch_again_replaces_and_other_watchdogs_are_refused(void **state) {
    (void)state;
    lb_watchdog *wd = new_watchdog(), *other = new_watchdog();
    lb_lock *l = held_lock("wd:rewatch", 5000);
    watch(wd, l, NULL, 0, 0);
    watch(wd, l, NULL, 0.5, 0);
    assert_int_equal(stats(wd).watched, 1);
    assert_int_equal(lb_watchdog_watch(other, l, NULL), LB_ESTATE);
    assert_int_equal(lb_watchdog_unwatch(other, l), LB_ESTATE);
    assert_int_equal(lb_watchdog_check(other, l, NULL, NULL), LB_ESTATE);
    assert_int_equal(lb_watchdog_unwatch(wd, l), LB_OK);
    assert_int_equal(lb_watchdog_unwatch(wd, l), LB_ESTATE);
    assert_int_equal(stats(wd).watched, 0);
    assert_int_equal(lb_watchdog_watch(other, l, NULL), LB_OK);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
    assert_int_equal(stats(other).watched, 0);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    lb_watchdog_free(other);
}

/* ---- arguments and states --------------------------------------------------------- */

typedef struct watch_case {
    const char *name;
    double fraction;
    int64_t max_hold_ms;
    int expect;
} watch_case;

static void test_watch_options_are_checked(void **state) {
    (void)state;
    static const watch_case cases[] = {
        {"zero fraction", 0.0, 0, LB_EINVAL},
        {"whole ttl", 1.0, 0, LB_EINVAL},
        {"negative fraction", -0.5, 0, LB_EINVAL},
        {"not a number", NAN, 0, LB_EINVAL},
        {"infinite", INFINITY, 0, LB_EINVAL},
        {"negative hold", 0.3, -1, LB_EINVAL},
        {"huge hold", 0.3, INT64_MAX, LB_EINVAL},
        {"tiny fraction", 1e-9, 0, LB_OK},
        {"half, held 1 s", 0.5, 1000, LB_OK},
    };
    lb_watchdog *wd = new_watchdog();
    lb_lock *l = held_lock("wd:options", 5000);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_watch_options o;
        lb_watch_options_init(&o);
        o.renew_fraction = cases[i].fraction;
        o.max_hold_ms = cases[i].max_hold_ms;
        int rc = lb_watchdog_watch(wd, l, &o);
        if (rc != cases[i].expect) fail_msg("%s: %s", cases[i].name, lb_err_name(rc));
    }
    assert_int_equal(lb_watchdog_watch(NULL, l, NULL), LB_EINVAL);
    assert_int_equal(lb_watchdog_watch(wd, NULL, NULL), LB_EINVAL);
    assert_int_equal(lb_watchdog_unwatch(NULL, l), LB_EINVAL);
    assert_int_equal(lb_watchdog_check(wd, NULL, NULL, NULL), LB_EINVAL);
    assert_int_equal(lb_watchdog_stats_get(wd, NULL), LB_EINVAL);
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
    /* Not held any more; then a lease that already ran out. */
    assert_int_equal(lb_watchdog_watch(wd, l, NULL), LB_ESTATE);
    lb_lock *brief = held_lock("wd:brief", 30);
    lbt_sleep_ms(60);
    assert_int_equal(lb_watchdog_watch(wd, brief, NULL), LB_EEXPIRED);
    assert_int_equal(stats(wd).watched, 0);
    lb_lock_free(brief);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    lb_watchdog_free(NULL);
    lb_watchdog_options_init(NULL);
    lb_watch_options_init(NULL);
}

static void test_reason_names(void **state) {
    (void)state;
    assert_string_equal(lb_watch_reason_name(LB_WATCH_REFUSED), "LB_WATCH_REFUSED");
    assert_string_equal(lb_watch_reason_name(LB_WATCH_UNREACHABLE), "LB_WATCH_UNREACHABLE");
    assert_string_equal(lb_watch_reason_name(LB_WATCH_MAX_HOLD), "LB_WATCH_MAX_HOLD");
    assert_string_equal(lb_watch_reason_name(LB_WATCH_NONE), "LB_WATCH_NONE");
    assert_string_equal(lb_watch_reason_name(-7), "LB_WATCH_UNKNOWN");
}

typedef struct new_case {
    const char *name;
    const char *host;
    int port; /* -1: the test server's */
    int64_t timeout_ms;
    int expect;
} new_case;

static void test_watchdog_options_are_checked(void **state) {
    (void)state;
    static const new_case cases[] = {
        {"no host", NULL, -1, 1000, LB_EINVAL},
        {"empty host", "", -1, 1000, LB_EINVAL},
        {"port 0", "127.0.0.1", 0, 1000, LB_EINVAL},
        {"port too big", "127.0.0.1", 70000, 1000, LB_EINVAL},
        {"zero timeout", "127.0.0.1", -1, 0, LB_EINVAL},
        {"nothing listening", "127.0.0.1", 1, 1000, LB_EIO},
        {"the server", "127.0.0.1", -1, 1000, LB_OK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_watchdog_options o;
        lb_watchdog_options_init(&o);
        o.host = cases[i].host;
        o.port = cases[i].port < 0 ? server.port : cases[i].port;
        o.connect_timeout_ms = cases[i].timeout_ms;
        lb_watchdog *wd = (lb_watchdog *)&o; /* reset on entry */
        int rc = lb_watchdog_new(&wd, &o);
        if (rc != cases[i].expect) fail_msg("%s: %s", cases[i].name, lb_err_name(rc));
        assert_true(rc == LB_OK ? wd != NULL : wd == NULL);
        lb_watchdog_free(wd);
    }
    assert_int_equal(lb_watchdog_new(NULL, NULL), LB_EINVAL);
}

/* A failed lb_watchdog_new says why in the caller's buffer: the address and
 * the system's reason for a dead port, the server's answer for a refused
 * AUTH, the options for bad ones; a buffer too small is cut, not overrun. */
static void test_a_failed_new_says_why_in_the_callers_buffer(void **state) {
    (void)state;
    char why[256];
    lb_watchdog_options o;
    lb_watchdog_options_init(&o);
    o.host = "127.0.0.1";
    o.port = 1;
    o.errbuf = why;
    o.errbuf_size = sizeof why;
    lb_watchdog *wd = NULL;
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_EIO);
    assert_non_null(strstr(why, "127.0.0.1:1"));
    assert_non_null(strstr(why, "refused"));

    static const char *const extra[] = {"--requirepass", "s3cret", NULL};
    assert_int_equal(lbt_redis_start(&secured, extra), 0);
    o.port = secured.port;
    o.password = "wrong";
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_EREDIS);
    assert_non_null(strstr(why, "AUTH"));
    assert_true(strstr(why, "WRONGPASS") || strstr(why, "invalid password"));
    o.password = "s3cret";
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_OK);
    assert_string_equal(why, "");
    lb_watchdog_free(wd);
    lbt_redis_stop(&secured);

    o.port = 0;
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_EINVAL);
    assert_string_equal(why, "invalid watchdog options");
    char small[8] = "xxxxxxx";
    o.port = 1;
    o.errbuf = small;
    o.errbuf_size = 4;
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_EIO);
    assert_string_equal(small, "can");
    assert_int_equal(small[4], 'x');
}

/* An allocator that fails from the Nth allocation on (the watchdog's thread
 * allocates nothing through it, so plain counters do). */
typedef struct failing {
    int left; /* allocations still granted; -1: all */
    int live;
} failing;

static void *failing_malloc(void *ud, size_t size) {
    failing *f = ud;
    if (f->left == 0) return NULL;
    if (f->left > 0) f->left--;
    f->live++;
    return malloc(size);
}

static void failing_free(void *ud, void *p) {
    failing *f = ud;
    f->live--;
    free(p);
}

static void test_allocation_failures_leave_nothing_behind(void **state) {
    (void)state;
    failing f = {-1, 0};
    lb_allocator a = {failing_malloc, failing_free, &f};
    lb_watchdog_options o;
    lb_watchdog_options_init(&o);
    o.host = "127.0.0.1";
    o.port = server.port;
    o.username = "default";
    o.password = NULL;
    o.allocator = &a;
    lb_watchdog *wd = NULL;
    int n, rc;
    for (n = 0; n < 20; n++) {
        f.left = n;
        if ((rc = lb_watchdog_new(&wd, &o)) == LB_OK) break;
        assert_int_equal(rc, LB_ENOMEM);
        assert_null(wd);
        assert_int_equal(f.live, 0);
    }
    assert_int_equal(rc, LB_OK);
    assert_true(n >= 2); /* the handle and its host at least */
    lb_lock *l = held_lock("wd:alloc", 5000);
    for (n = 0; n < 20; n++) {
        int before = f.live;
        f.left = n;
        if ((rc = lb_watchdog_watch(wd, l, NULL)) == LB_OK) break;
        assert_int_equal(rc, LB_ENOMEM);
        assert_int_equal(f.live, before);
        assert_int_equal(stats(wd).watched, 0);
    }
    assert_int_equal(rc, LB_OK);
    assert_true(n >= 2);
    f.left = -1;
    assert_int_equal(lb_lock_release(l, lb_on_conn(conn)), LB_OK);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    assert_int_equal(f.live, 0);
}

/* ---- connecting -------------------------------------------------------------------- */

static int connects;

static redisContext *connect_secured(void *ud) {
    __atomic_add_fetch((int *)ud, 1, __ATOMIC_SEQ_CST);
    redisContext *c = lbt_redis_connect(&secured);
    if (c) {
        redisReply *r = redisCommand(c, "AUTH s3cret");
        if (r) freeReplyObject(r);
        r = redisCommand(c, "SELECT 2");
        if (r) freeReplyObject(r);
    }
    return c;
}

static void test_connects_with_password_and_db_or_a_callback(void **state) {
    (void)state;
    static const char *const extra[] = {"--requirepass", "s3cret", NULL};
    assert_int_equal(lbt_redis_start(&secured, extra), 0);
    redisContext *owner = lbt_redis_connect(&secured);
    assert_non_null(owner);
    redisReply *rep = redisCommand(owner, "AUTH s3cret");
    freeReplyObject(rep);
    rep = redisCommand(owner, "SELECT 2");
    freeReplyObject(rep);

    lb_watchdog_options o;
    lb_watchdog_options_init(&o);
    o.host = "127.0.0.1";
    o.port = secured.port;
    lb_watchdog *wd = NULL;
    o.password = "wrong";
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_EREDIS);
    o.password = "s3cret";
    o.db = 2;
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_OK);

    lb_lock_options lo;
    lb_lock_options_init(&lo);
    lo.ttl_ms = 300;
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, "wd:secured", 10, &lo), LB_OK);
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(owner)), LB_OK);
    recorder r;
    rec_init(&r);
    watch(wd, l, &r, 0, 0);
    lbt_sleep_ms(700);
    assert_string_equal(lbt_get(owner, "wd:secured"), lb_lock_info_of(l).token);
    assert_int_equal(rec_calls(&r), 0);
    assert_int_equal(lb_lock_release(l, lb_on_conn(owner)), LB_OK);
    lb_watchdog_free(wd);

    /* The same through a connect callback, which is called again after a kill. */
    lb_watchdog_options_init(&o);
    o.connect = connect_secured;
    o.connect_ud = &connects;
    o.host = NULL;
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_OK);
    assert_int_equal(__atomic_load_n(&connects, __ATOMIC_SEQ_CST), 1);
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(owner)), LB_OK);
    watch(wd, l, &r, 0, 0);
    lbt_sleep_ms(150);
    rep = redisCommand(owner, "CLIENT KILL TYPE normal");
    freeReplyObject(rep);
    lbt_sleep_ms(500);
    assert_string_equal(lbt_get(owner, "wd:secured"), lb_lock_info_of(l).token);
    assert_true(__atomic_load_n(&connects, __ATOMIC_SEQ_CST) >= 2);
    assert_int_equal(rec_calls(&r), 0);
    assert_int_equal(lb_lock_release(l, lb_on_conn(owner)), LB_OK);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    rec_destroy(&r);
    redisFree(owner);
    lbt_redis_stop(&secured);
}

/* ---- setup ------------------------------------------------------------------------- */

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
        cmocka_unit_test(test_keeps_a_300ms_lock_held_for_five_ttls),
        cmocka_unit_test(test_acquiring_again_ends_the_old_watch),
        cmocka_unit_test(test_one_thread_renews_forty_locks),
        cmocka_unit_test(test_lost_at_once_when_another_client_overwrites_the_value),
        cmocka_unit_test(test_lost_at_once_when_the_key_is_deleted),
        cmocka_unit_test(test_lost_when_the_server_is_paused_past_the_ttl),
        cmocka_unit_test(test_max_hold_stops_renewal_and_is_reported_as_such),
        cmocka_unit_test(test_max_hold_below_the_ttl_never_shortens_the_lease),
        cmocka_unit_test(test_reconnects_when_its_connection_is_killed),
        cmocka_unit_test(test_server_restart_is_reported_as_refused_after_reconnecting),
        cmocka_unit_test(test_lost_callback_runs_without_the_watchdog_mutex),
        cmocka_unit_test(test_unwatch_or_release_racing_renewal_leaves_nothing_behind),
        cmocka_unit_test(test_unwatch_waits_for_a_callback_in_flight),
        cmocka_unit_test(test_a_callback_may_end_its_own_watch),
        cmocka_unit_test(test_freeing_a_watched_lock_stops_its_renewal),
        cmocka_unit_test(test_freeing_the_watchdog_detaches_its_locks),
        cmocka_unit_test(test_watch_again_replaces_and_other_watchdogs_are_refused),
        cmocka_unit_test(test_watch_options_are_checked),
        cmocka_unit_test(test_reason_names),
        cmocka_unit_test(test_watchdog_options_are_checked),
        cmocka_unit_test(test_a_failed_new_says_why_in_the_callers_buffer),
        cmocka_unit_test(test_allocation_failures_leave_nothing_behind),
        cmocka_unit_test(test_connects_with_password_and_db_or_a_callback),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
