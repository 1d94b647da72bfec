/* The token lock on an event loop (lockbridge/async.h) on libevent against a
 * real redis-server: waits that end by a release, a deadline or a cancel,
 * renewal past the TTL, losses reported, and the context's end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>

#include "harness/failing_alloc.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "lockbridge/adapters/libevent.h"
#include "lockbridge/lockbridge.h"

static lbt_redis server;
static redisContext *conn; /* the test's own blocking connection */

/* A loop, its context and driver, and a ticker so that a turn of the loop
 * never blocks for long when nothing else is due (a hang guard: loops below
 * stop after LOOP_TURNS_MAX turns, never on a duration). */
#define TICK_MS 5
#define LOOP_TURNS_MAX 4000
typedef struct loop {
    struct event_base *base;
    struct event *tick;
    redisAsyncContext *ac;
    lb_async *a;
} loop;

static void on_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg;
}

static void loop_open_with(loop *lp, const lb_allocator *alloc) {
    memset(lp, 0, sizeof *lp);
    lp->base = event_base_new();
    assert_non_null(lp->base);
    lp->tick = event_new(lp->base, -1, EV_PERSIST, on_tick, NULL);
    struct timeval tv = {0, TICK_MS * 1000};
    assert_int_equal(event_add(lp->tick, &tv), 0);
    lp->ac = redisAsyncConnect("127.0.0.1", server.port);
    assert_non_null(lp->ac);
    assert_int_equal(lp->ac->err, 0);
    assert_int_equal(redisLibeventAttach(lp->ac, lp->base), REDIS_OK);
    lb_async_options o;
    lb_async_options_init(&o);
    o.timers = lb_libevent_timers(lp->base);
    o.allocator = alloc;
    assert_int_equal(lb_async_new(&lp->a, lp->ac, &o), LB_OK);
}

static void loop_open(loop *lp) { loop_open_with(lp, NULL); }

static void loop_close(loop *lp) {
    if (lp->ac) redisAsyncFree(lp->ac);
    lb_async_free(lp->a);
    event_free(lp->tick);
    event_base_free(lp->base);
}

/* Runs the loop until *flag is set. */
static void run_until(loop *lp, const int *flag) {
    for (int turns = 0; !*flag; turns++) {
        assert_true(turns < LOOP_TURNS_MAX);
        event_base_loop(lp->base, EVLOOP_ONCE);
    }
}

static void run_for_ms(loop *lp, int64_t ms) {
    int64_t end = lbt_mono_ms() + ms;
    while (lbt_mono_ms() < end) event_base_loop(lp->base, EVLOOP_ONCE);
}

/* What a callback saw. */
typedef struct seen {
    int done, status;
    int lost;
    lb_watch_reason reason;
    char detail[160];
} seen;

static void on_done(lb_async_lock *al, int status, void *ud) {
    seen *s = ud;
    (void)al;
    s->done++;
    s->status = status;
}

static void on_lost(lb_async_lock *al, lb_watch_reason reason, const char *detail, void *ud) {
    seen *s = ud;
    (void)al;
    s->lost++;
    s->reason = reason;
    snprintf(s->detail, sizeof s->detail, "%s", detail);
}

/* backoff_ms: the wait's every sleep (then bounded by the holder's TTL);
 * 0: the default back-off. */
static lb_async_lock *new_lock_sleeping(loop *lp, const char *key, int64_t ttl_ms, seen *s,
                                        int64_t backoff_ms) {
    lb_async_lock_options o;
    lb_async_lock_options_init(&o);
    o.lock.ttl_ms = ttl_ms;
    if (backoff_ms) o.lock.backoff_min_ms = o.lock.backoff_max_ms = backoff_ms;
    o.lost = on_lost;
    o.lost_ud = s;
    lb_async_lock *al;
    assert_int_equal(lb_async_lock_new(&al, lp->a, key, strlen(key), &o), LB_OK);
    return al;
}

static lb_async_lock *new_lock(loop *lp, const char *key, int64_t ttl_ms, seen *s) {
    return new_lock_sleeping(lp, key, ttl_ms, s, 0);
}

/* A wait refused once sleeps this long (its holder's TTL is longer): it is
 * asleep, nothing in flight, for as long as a test looks at it. */
#define LONG_SLEEP_MS 20000

/* A lock held by another client, on the test's blocking connection. */
static lb_lock *hold(const char *key, int64_t ttl_ms) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = ttl_ms;
    lb_lock *l;
    assert_int_equal(lb_lock_new(&l, key, strlen(key), &o), LB_OK);
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(conn)), LB_OK);
    return l;
}

/* Runs the loop until `al` has been refused at least once (its first attempt
 * answered: SET, then PTTL). */
static void run_until_refused(loop *lp, lb_async_lock *al) {
    for (int turns = 0; lb_async_lock_info_of(al).holder_ttl_ms < 0; turns++) {
        assert_true(turns < LOOP_TURNS_MAX);
        event_base_loop(lp->base, EVLOOP_ONCE);
    }
}

static void release_and_free(loop *lp, lb_async_lock *al) {
    seen s = {0};
    assert_int_equal(lb_async_lock_release(al, on_done, &s), LB_OK);
    run_until(lp, &s.done);
    assert_int_equal(s.status, LB_OK);
    lb_async_lock_free(al);
}

static void test_a_wait_gets_the_lock_when_its_holder_releases(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    lb_lock *holder = hold("al:wait", 30000);
    seen s = {0};
    lb_async_lock *al = new_lock(&lp, "al:wait", 30000, &s);
    assert_int_equal(lb_async_lock_acquire(al, INT64_MAX, on_done, &s), LB_OK);
    run_until_refused(&lp, al);
    assert_int_equal(s.done, 0); /* still waiting */
    assert_int_equal(lb_lock_release(holder, lb_on_conn(conn)), LB_OK);
    run_until(&lp, &s.done);
    assert_int_equal(s.status, LB_OK);
    lb_lock_info i = lb_async_lock_info_of(al);
    assert_true(i.held);
    assert_string_equal(lbt_get(conn, "al:wait"), i.token);
    release_and_free(&lp, al);
    assert_int_equal(lbt_int(conn, "EXISTS al:wait"), 0);
    lb_lock_free(holder);
    loop_close(&lp);
}

/* Many waits on one connection, four per key: each gets its key once, and
 * every key is free at the end. */
typedef struct crowd {
    int pending, granted, failed;
} crowd;

static void crowd_released(lb_async_lock *al, int status, void *ud) {
    crowd *c = ud;
    if (status != LB_OK) c->failed++;
    lb_async_lock_free(al);
    c->pending--;
}

static void crowd_acquired(lb_async_lock *al, int status, void *ud) {
    crowd *c = ud;
    int rc = status;
    if (status == LB_OK) {
        c->granted++;
        rc = lb_async_lock_release(al, crowd_released, c);
    }
    if (rc != LB_OK) crowd_released(al, rc, c);
}

static void test_waits_on_one_connection_each_get_their_contended_key(void **state) {
    (void)state;
    enum { N = 400, PER_KEY = 4 };
    loop lp;
    loop_open(&lp);
    crowd c = {N, 0, 0};
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof key, "al:crowd:%d", i / PER_KEY);
        lb_async_lock *al;
        assert_int_equal(lb_async_lock_new(&al, lp.a, LB_KEY(key), NULL), LB_OK);
        assert_int_equal(lb_async_lock_acquire(al, INT64_MAX, crowd_acquired, &c), LB_OK);
    }
    for (int turns = 0; c.pending > 0; turns++) {
        assert_true(turns < LOOP_TURNS_MAX);
        event_base_loop(lp.base, EVLOOP_ONCE);
    }
    assert_int_equal(c.failed, 0);
    assert_int_equal(c.granted, N);
    assert_int_equal(lbt_int(conn, "DBSIZE"), 0);
    loop_close(&lp);
}

static void test_a_wait_ends_at_its_deadline_while_the_holder_keeps_the_lock(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    lb_lock *holder = hold("al:deadline", 30000);
    seen s = {0};
    lb_async_lock *al = new_lock(&lp, "al:deadline", 30000, &s);
    assert_int_equal(lb_async_lock_acquire(al, 50, on_done, &s), LB_OK);
    run_until(&lp, &s.done);
    assert_int_equal(s.done, 1);
    assert_int_equal(s.status, LB_ETIMEDOUT);
    lb_lock_info i = lb_async_lock_info_of(al);
    assert_false(i.held);
    assert_non_null(strstr(i.errstr, "deadline"));
    assert_string_equal(lbt_get(conn, "al:deadline"), lb_lock_info_of(holder).token);
    /* A wait of 0 is one attempt. */
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_OK);
    while (s.done < 2) event_base_loop(lp.base, EVLOOP_ONCE);
    assert_int_equal(s.status, LB_ETIMEDOUT);
    assert_int_equal(lb_lock_release(holder, lb_on_conn(conn)), LB_OK);
    lb_lock_free(holder);
    lb_async_lock_free(al);
    loop_close(&lp);
}

static void test_a_cancel_ends_a_wait_asleep_at_once(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    lb_lock *holder = hold("al:cancel", 30000);
    seen s = {0};
    lb_async_lock *al = new_lock_sleeping(&lp, "al:cancel", 30000, &s, LONG_SLEEP_MS);
    assert_int_equal(lb_async_lock_cancel(al), LB_ESTATE); /* nothing to cancel */
    assert_int_equal(lb_async_lock_acquire(al, INT64_MAX, on_done, &s), LB_OK);
    run_until_refused(&lp, al);
    /* The attempt was answered; the wait sleeps on its timer. */
    assert_int_equal(lb_async_lock_cancel(al), LB_OK);
    assert_int_equal(s.done, 1); /* told within the call */
    assert_int_equal(s.status, LB_ECANCELED);
    assert_false(lb_async_lock_info_of(al).held);
    assert_string_equal(lbt_get(conn, "al:cancel"), lb_lock_info_of(holder).token);
    /* The handle waits again after a cancel. */
    assert_int_equal(lb_lock_release(holder, lb_on_conn(conn)), LB_OK);
    assert_int_equal(lb_async_lock_acquire(al, INT64_MAX, on_done, &s), LB_OK);
    while (s.done < 2) event_base_loop(lp.base, EVLOOP_ONCE);
    assert_int_equal(s.status, LB_OK);
    release_and_free(&lp, al);
    lb_lock_free(holder);
    loop_close(&lp);
}

/* A cancel while the attempt is in flight is told at its reply; a lock that
 * attempt won is released first: the key is left free. */
static void test_a_cancel_during_a_winning_attempt_releases_what_it_won(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    seen s = {0};
    lb_async_lock *al = new_lock(&lp, "al:cancel:won", 30000, &s);
    assert_int_equal(lb_async_lock_acquire(al, INT64_MAX, on_done, &s), LB_OK);
    assert_int_equal(lb_async_lock_cancel(al), LB_OK);
    assert_int_equal(s.done, 0);
    run_until(&lp, &s.done);
    assert_int_equal(s.status, LB_ECANCELED);
    assert_false(lb_async_lock_info_of(al).held);
    assert_int_equal(lbt_int(conn, "EXISTS al:cancel:won"), 0);
    lb_async_lock_free(al);
    loop_close(&lp);
}

static void test_renewal_keeps_a_lock_past_its_ttl(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    seen s = {0};
    lb_async_lock *al = new_lock(&lp, "al:renew", 300, &s);
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_OK);
    run_until(&lp, &s.done);
    assert_int_equal(s.status, LB_OK);
    int64_t first_deadline = lb_async_lock_info_of(al).deadline_ns;
    uint64_t commands = lb_async_lock_info_of(al).commands;
    run_for_ms(&lp, 1000); /* more than three TTLs */
    lb_lock_info i = lb_async_lock_info_of(al);
    assert_int_equal(s.lost, 0);
    assert_true(i.held);
    assert_true(i.deadline_ns > first_deadline);
    assert_true(i.commands >= commands + 3); /* renewals: 1 s / 100 ms, a few at least */
    assert_string_equal(lbt_get(conn, "al:renew"), i.token);
    assert_true(lbt_int(conn, "PTTL al:renew") > 0);
    release_and_free(&lp, al);
    /* Released: nothing renews it any more. */
    assert_int_equal(lbt_int(conn, "EXISTS al:renew"), 0);
    run_for_ms(&lp, 150);
    assert_int_equal(lbt_int(conn, "EXISTS al:renew"), 0);
    loop_close(&lp);
}

/* Free never releases, and stops the renewal: the key lapses with its TTL. */
static void test_a_freed_lock_is_no_longer_renewed_and_lapses(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    seen s = {0};
    lb_async_lock *al = new_lock(&lp, "al:lapse", 300, &s);
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_OK);
    run_until(&lp, &s.done);
    assert_int_equal(s.status, LB_OK);
    char token[LB_TOKEN_LEN + 1];
    snprintf(token, sizeof token, "%s", lb_async_lock_info_of(al).token);
    lb_async_lock_free(al);
    assert_string_equal(lbt_get(conn, "al:lapse"), token); /* not released */
    for (int turns = 0; lbt_int(conn, "EXISTS al:lapse"); turns++) {
        assert_true(turns < LOOP_TURNS_MAX); /* renewed for ever otherwise */
        event_base_loop(lp.base, EVLOOP_ONCE);
    }
    assert_int_equal(s.lost, 0);
    loop_close(&lp);
}

static void check_loss_by(const char *change) {
    loop lp;
    loop_open(&lp);
    seen s = {0};
    lb_async_lock *al = new_lock(&lp, "al:lost", 300, &s);
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_OK);
    run_until(&lp, &s.done);
    assert_int_equal(s.status, LB_OK);
    lbt_cmd_ok(conn, change);
    run_until(&lp, &s.lost);
    assert_int_equal(s.lost, 1);
    assert_int_equal(s.reason, LB_WATCH_REFUSED);
    assert_true(s.detail[0] != '\0');
    lb_lock_info i = lb_async_lock_info_of(al);
    assert_false(i.held);
    assert_int_equal(lb_async_lock_release(al, on_done, &s), LB_ESTATE);
    lb_async_lock_free(al);
    loop_close(&lp);
}

/* The other client's value is left alone. */
static void test_a_lock_overwritten_is_reported_lost(void **state) {
    (void)state;
    check_loss_by("SET al:lost other PX 30000");
    assert_string_equal(lbt_get(conn, "al:lost"), "other");
    lbt_cmd_ok(conn, "DEL al:lost");
}

static void test_a_lock_deleted_is_reported_lost(void **state) {
    (void)state;
    check_loss_by("DEL al:lost");
    assert_int_equal(lbt_int(conn, "EXISTS al:lost"), 0);
}

/* Renewals refused with an error reply are retried until the lease ends,
 * then the loss is reported as unreachable, with the server's refusal. */
static void test_renewals_refused_until_the_lease_ends_report_the_loss(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    seen s = {0};
    lb_async_lock *al = new_lock(&lp, "al:refused", 300, &s);
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_OK);
    run_until(&lp, &s.done);
    assert_int_equal(s.status, LB_OK);
    lbt_cmd_ok(conn, "ACL SETUSER default -evalsha -eval");
    run_until(&lp, &s.lost);
    lbt_cmd_ok(conn, "ACL SETUSER default +@all");
    assert_int_equal(s.reason, LB_WATCH_UNREACHABLE);
    /* The server's refusal, as the renewal read it (its words are the server's own). */
    assert_true(strncmp(s.detail, "extend: ", 8) == 0 && s.detail[8] != '\0');
    assert_false(lb_async_lock_info_of(al).held);
    lb_async_lock_free(al);
    loop_close(&lp);
}

/* A renewal the server does not answer before the lease ends (a paused
 * server) is a loss; the handle freed with that renewal in flight is given
 * back at its reply (here, the context's end). */
static void test_a_renewal_unanswered_before_the_lease_ends_is_a_loss(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    seen s = {0};
    lb_async_lock *al = new_lock(&lp, "al:paused", 300, &s);
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_OK);
    run_until(&lp, &s.done);
    assert_int_equal(s.status, LB_OK);
    lbt_cmd_ok(conn, "CLIENT PAUSE 2000 ALL");
    run_until(&lp, &s.lost);
    assert_int_equal(s.reason, LB_WATCH_UNREACHABLE);
    assert_false(lb_async_lock_info_of(al).held);
    lb_async_lock_free(al);
    loop_close(&lp);
    lbt_cmd_ok(conn, "CLIENT UNPAUSE");
}

static int disconnected_called;
static void on_app_disconnect(const redisAsyncContext *ac, int status) {
    (void)ac, (void)status;
    disconnected_called++;
}

/* The context freed: a wait asleep ends with LB_EIO, a held lock is lost
 * (unreachable), and the application's own disconnect callback still runs. */
static void test_the_end_of_the_context_ends_waits_and_reports_held_locks_lost(void **state) {
    (void)state;
    loop lp;
    memset(&lp, 0, sizeof lp);
    lp.base = event_base_new();
    lp.tick = event_new(lp.base, -1, EV_PERSIST, on_tick, NULL);
    struct timeval tv = {0, TICK_MS * 1000};
    event_add(lp.tick, &tv);
    lp.ac = redisAsyncConnect("127.0.0.1", server.port);
    assert_int_equal(redisLibeventAttach(lp.ac, lp.base), REDIS_OK);
    assert_int_equal(redisAsyncSetDisconnectCallback(lp.ac, on_app_disconnect), REDIS_OK);
    lb_async_options o;
    lb_async_options_init(&o);
    o.timers = lb_libevent_timers(lp.base);
    assert_int_equal(lb_async_new(&lp.a, lp.ac, &o), LB_OK);
    disconnected_called = 0;
    lb_lock *holder = hold("al:gone:busy", 30000);
    seen sw = {0}, sh = {0};
    lb_async_lock *waiter = new_lock_sleeping(&lp, "al:gone:busy", 30000, &sw, LONG_SLEEP_MS);
    lb_async_lock *held = new_lock(&lp, "al:gone:held", 30000, &sh);
    assert_int_equal(lb_async_lock_acquire(held, 0, on_done, &sh), LB_OK);
    run_until(&lp, &sh.done);
    assert_int_equal(sh.status, LB_OK);
    assert_int_equal(lb_async_lock_acquire(waiter, INT64_MAX, on_done, &sw), LB_OK);
    run_until_refused(&lp, waiter);
    redisAsyncFree(lp.ac); /* both asleep on their timers: told within the call */
    lp.ac = NULL;
    assert_int_equal(sw.done, 1);
    assert_int_equal(sw.status, LB_EIO);
    assert_int_equal(sh.lost, 1);
    assert_int_equal(sh.reason, LB_WATCH_UNREACHABLE);
    assert_false(lb_async_lock_info_of(held).held);
    assert_int_equal(disconnected_called, 1);
    /* Nothing more goes to the context. */
    assert_int_equal(lb_async_lock_acquire(waiter, 0, on_done, &sw), LB_EIO);
    assert_non_null(strstr(lb_async_lock_info_of(waiter).errstr, "closed"));
    lb_async_lock_free(waiter);
    lb_async_lock_free(held);
    assert_int_equal(lb_lock_release(holder, lb_on_conn(conn)), LB_OK);
    lb_lock_free(holder);
    lbt_cmd_ok(conn, "DEL al:gone:held");
    loop_close(&lp);
}

static int connect_status = 1;
static void on_app_connect(const redisAsyncContext *ac, int status) {
    (void)ac;
    connect_status = status;
}

/* A context to a port nothing listens on, its driver made on `lp`; with the
 * application's connect callback set first when `app_cb`. */
static redisAsyncContext *connect_nowhere(loop *lp, int app_cb) {
    int port = lbt_free_port();
    assert_true(port > 0);
    memset(lp, 0, sizeof *lp);
    lp->base = event_base_new();
    redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", port);
    assert_non_null(ac);
    assert_int_equal(redisLibeventAttach(ac, lp->base), REDIS_OK);
    if (app_cb) assert_int_equal(redisAsyncSetConnectCallback(ac, on_app_connect), REDIS_OK);
    lb_async_options o;
    lb_async_options_init(&o);
    o.timers = lb_libevent_timers(lp->base);
    assert_int_equal(lb_async_new(&lp->a, ac, &o), LB_OK);
    return ac;
}

/* A connection that fails before it is up is freed by hiredis without a
 * disconnect: a wait in flight ends with LB_EIO, nothing is sent on it
 * afterwards, and the application's connect callback still hears of it. */
static void test_a_failed_connect_ends_waits_and_sends_nothing_more(void **state) {
    (void)state;
    loop lp;
    connect_status = 1;
    connect_nowhere(&lp, 1);
    seen s = {0};
    lb_async_lock *al = new_lock(&lp, "al:noconn", 30000, &s);
    while (connect_status == 1) event_base_loop(lp.base, EVLOOP_ONCE);
    assert_int_equal(connect_status, REDIS_ERR);
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_EIO);
    assert_int_equal(s.done, 0);
    lb_async_lock_free(al);
    lb_async_free(lp.a); /* the context is gone: not touched */
    event_base_free(lp.base);

    connect_nowhere(&lp, 0);
    al = new_lock(&lp, "al:noconn", 30000, &s);
    assert_int_equal(lb_async_lock_acquire(al, INT64_MAX, on_done, &s), LB_OK);
    while (!s.done) event_base_loop(lp.base, EVLOOP_ONCE); /* the connect's failure ends it */
    assert_int_equal(s.status, LB_EIO);
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_EIO);
    lb_async_lock_free(al);
    lb_async_free(lp.a);
    event_base_free(lp.base);
}

/* A handle freed while its attempt is in flight runs no callback; a lock
 * that attempt won is released at its reply. One freed asleep is gone at once. */
static void test_freeing_a_waiting_lock_runs_no_callback_and_leaves_the_key_free(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    seen s = {0};
    lb_async_lock *al = new_lock(&lp, "al:freed", 30000, &s);
    long long sets = lbt_calls(conn, "set");
    assert_int_equal(lb_async_lock_acquire(al, INT64_MAX, on_done, &s), LB_OK);
    lb_async_lock_free(al);
    /* Until its SET has run and the key is free again. */
    for (int turns = 0; lbt_calls(conn, "set") == sets || lbt_int(conn, "EXISTS al:freed"); turns++) {
        assert_true(turns < LOOP_TURNS_MAX);
        event_base_loop(lp.base, EVLOOP_ONCE);
    }
    lb_lock *holder = hold("al:freed", 30000);
    al = new_lock_sleeping(&lp, "al:freed", 30000, &s, LONG_SLEEP_MS);
    assert_int_equal(lb_async_lock_acquire(al, INT64_MAX, on_done, &s), LB_OK);
    run_until_refused(&lp, al);
    lb_async_lock_free(al);
    run_for_ms(&lp, 20);
    assert_int_equal(s.done, 0);
    assert_int_equal(s.lost, 0);
    assert_int_equal(lb_lock_release(holder, lb_on_conn(conn)), LB_OK);
    lb_lock_free(holder);
    loop_close(&lp);
}

static void test_arguments_and_states_are_refused_with_a_fresh_text(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    lb_async_lock_options o;
    lb_async_lock_options_init(&o);
    lb_async_lock *al = (lb_async_lock *)&o;
    o.lock.fair = 1;
    assert_int_equal(lb_async_lock_new(&al, lp.a, "al:args", 7, &o), LB_EINVAL);
    assert_null(al);
    o.lock.fair = 0;
    o.renew_fraction = 1;
    assert_int_equal(lb_async_lock_new(&al, lp.a, "al:args", 7, &o), LB_EINVAL);
    o.renew_fraction = 0; /* no renewal */
    assert_int_equal(lb_async_lock_new(&al, NULL, "al:args", 7, &o), LB_EINVAL);
    assert_int_equal(lb_async_lock_new(&al, lp.a, "al:args", 7, &o), LB_OK);
    lb_async_options ao;
    lb_async_options_init(&ao);
    lb_async *a = (lb_async *)&ao;
    assert_int_equal(lb_async_new(&a, lp.ac, &ao), LB_EINVAL); /* no timers */
    assert_null(a);
    seen s = {0};
    assert_int_equal(lb_async_lock_release(al, on_done, &s), LB_ESTATE);
    assert_string_equal(lb_async_lock_info_of(al).errstr, "not held by this handle");
    assert_int_equal(lb_async_lock_acquire(al, -1, on_done, &s), LB_EINVAL);
    assert_non_null(strstr(lb_async_lock_info_of(al).errstr, "wait_ms"));
    assert_int_equal(lb_async_lock_acquire(al, 0, NULL, &s), LB_EINVAL);
    assert_non_null(strstr(lb_async_lock_info_of(al).errstr, "callback"));
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_OK);
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_ESTATE);
    assert_non_null(strstr(lb_async_lock_info_of(al).errstr, "running"));
    run_until(&lp, &s.done);
    assert_int_equal(s.status, LB_OK);
    assert_string_equal(lb_async_lock_info_of(al).errstr, "");
    assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_ESTATE);
    assert_string_equal(lb_async_lock_info_of(al).errstr, "already held by this handle");
    release_and_free(&lp, al);
    loop_close(&lp);
}

/* Failing the n-th allocation of the driver and a renewing lock, for every
 * n, leaves nothing live. */
static void test_every_allocation_failure_is_clean(void **state) {
    (void)state;
    for (int n = 1;; n++) {
        lbt_failing_alloc cnt;
        lb_allocator alloc = lbt_failing_allocator(&cnt, n);
        loop lp;
        memset(&lp, 0, sizeof lp);
        lp.base = event_base_new();
        lp.ac = redisAsyncConnect("127.0.0.1", server.port);
        assert_int_equal(redisLibeventAttach(lp.ac, lp.base), REDIS_OK);
        lb_async_options ao;
        lb_async_options_init(&ao);
        ao.timers = lb_libevent_timers(lp.base);
        ao.allocator = &alloc;
        int rc = lb_async_new(&lp.a, lp.ac, &ao);
        lb_async_lock *al = NULL;
        if (rc == LB_OK) {
            lb_async_lock_options o;
            lb_async_lock_options_init(&o);
            o.lock.allocator = &alloc;
            o.lock.fencing = 1;
            rc = lb_async_lock_new(&al, lp.a, "al:alloc", 8, &o);
        }
        if (rc == LB_OK) {
            seen s = {0};
            assert_int_equal(lb_async_lock_acquire(al, 0, on_done, &s), LB_OK);
            while (!s.done) event_base_loop(lp.base, EVLOOP_ONCE);
            assert_int_equal(s.status, LB_OK);
            s.done = 0;
            assert_int_equal(lb_async_lock_release(al, on_done, &s), LB_OK);
            while (!s.done) event_base_loop(lp.base, EVLOOP_ONCE);
            assert_int_equal(s.status, LB_OK);
        } else {
            assert_int_equal(rc, LB_ENOMEM);
            assert_null(al);
        }
        lb_async_lock_free(al);
        /* A context that never connected is freed without a disconnect
         * callback: the driver goes first. */
        lb_async_free(lp.a);
        redisAsyncFree(lp.ac);
        event_base_free(lp.base);
        assert_int_equal(cnt.live, 0);
        if (rc == LB_OK) {
            /* The driver; the handle, its lock and three names, its renewing
             * lock and two names. */
            assert_int_equal(n, 10);
            break;
        }
    }
}

/* Locks on one connection held at once, each acquired through the loop. */
#define BATCH_LOCKS 6
static void acquire_all(loop *lp, lb_async_lock **al, seen *s, const char *prefix) {
    for (int i = 0; i < BATCH_LOCKS; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s%d", prefix, i);
        al[i] = new_lock(lp, key, 30000, &s[i]);
        assert_int_equal(lb_async_lock_acquire(al[i], 0, on_done, &s[i]), LB_OK);
    }
    for (int i = 0; i < BATCH_LOCKS; i++) {
        run_until(lp, &s[i].done);
        assert_int_equal(s[i].status, LB_OK);
        s[i].done = 0;
    }
}

static long long script_calls(void) {
    return lbt_calls(conn, "evalsha") + lbt_calls(conn, "eval");
}

/* Releases asked for in one loop turn: one script call on the server, and each
 * lock answered as its own release: ours deleted, one overwritten or gone
 * lost (the other value kept), one of another type its WRONGTYPE. */
static void test_releases_in_one_turn_are_one_call_each_answered_as_its_own(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    lb_async_lock *al[BATCH_LOCKS];
    seen s[BATCH_LOCKS] = {0};
    acquire_all(&lp, al, s, "batch:one:");
    lbt_cmd_ok(conn, "SET batch:one:1 someone-else");
    lbt_cmd_ok(conn, "DEL batch:one:2");
    lbt_cmd_ok(conn, "DEL batch:one:3");
    lbt_cmd_ok(conn, "HSET batch:one:3 f v");
    long long calls = script_calls();
    for (int i = 0; i < BATCH_LOCKS; i++)
        assert_int_equal(lb_async_lock_release(al[i], on_done, &s[i]), LB_OK);
    for (int i = 0; i < BATCH_LOCKS; i++) run_until(&lp, &s[i].done);
    assert_int_equal(script_calls() - calls, 1);
    int expect[BATCH_LOCKS] = {LB_OK, LB_ELOST, LB_ELOST, LB_EWRONGTYPE, LB_OK, LB_OK};
    for (int i = 0; i < BATCH_LOCKS; i++) {
        assert_int_equal(s[i].done, 1);
        assert_int_equal(s[i].status, expect[i]);
    }
    assert_non_null(strstr(lb_async_lock_info_of(al[3]).errstr, "WRONGTYPE"));
    assert_string_equal(lbt_get(conn, "batch:one:1"), "someone-else");
    assert_int_equal(lbt_int(conn, "HLEN batch:one:3"), 1);
    assert_int_equal(lbt_int(conn, "EXISTS batch:one:0 batch:one:4 batch:one:5"), 0);
    assert_int_equal(lb_async_lock_info_of(al[0]).held, 0);
    assert_int_equal(lb_async_lock_info_of(al[3]).held, 1); /* outcome unknown: still ours */
    lbt_cmd_ok(conn, "DEL batch:one:1 batch:one:3");
    for (int i = 0; i < BATCH_LOCKS; i++) lb_async_lock_free(al[i]);
    loop_close(&lp);
}

/* A server that forgot the script (SCRIPT FLUSH) is sent its body once, and
 * every lock of the batch is released. */
static void test_a_batch_after_a_script_flush_releases_every_lock(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    lb_async_lock *al[BATCH_LOCKS];
    seen s[BATCH_LOCKS] = {0};
    acquire_all(&lp, al, s, "batch:flush:");
    lbt_cmd_ok(conn, "SCRIPT FLUSH");
    for (int i = 0; i < BATCH_LOCKS; i++)
        assert_int_equal(lb_async_lock_release(al[i], on_done, &s[i]), LB_OK);
    for (int i = 0; i < BATCH_LOCKS; i++) {
        run_until(&lp, &s[i].done);
        assert_int_equal(s[i].status, LB_OK);
        lb_async_lock_free(al[i]);
    }
    assert_int_equal(lbt_int(conn, "EXISTS batch:flush:0 batch:flush:5"), 0);
    loop_close(&lp);
}

/* A call refused whole (here: one of its keys became read-only to the
 * connection's user) answers none of its locks: each release is sent again
 * alone, and gets its own answer. */
static void test_a_batch_refused_whole_releases_each_lock_on_its_own(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "ACL SETUSER batcher reset on >pw ~batch:acl:* &* +@all");
    loop lp;
    loop_open(&lp);
    assert_int_equal(redisAsyncCommand(lp.ac, NULL, NULL, "AUTH batcher pw"), REDIS_OK);
    lb_async_lock *al[2];
    seen s[2] = {0};
    al[0] = new_lock(&lp, "batch:acl:0", 30000, &s[0]);
    al[1] = new_lock(&lp, "batch:acl:1", 30000, &s[1]);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(lb_async_lock_acquire(al[i], 0, on_done, &s[i]), LB_OK);
        run_until(&lp, &s[i].done);
        assert_int_equal(s[i].status, LB_OK);
        s[i].done = 0;
    }
    lbt_cmd_ok(conn, "ACL SETUSER batcher resetkeys ~batch:acl:0 %%R~batch:acl:1");
    for (int i = 0; i < 2; i++)
        assert_int_equal(lb_async_lock_release(al[i], on_done, &s[i]), LB_OK);
    for (int i = 0; i < 2; i++) run_until(&lp, &s[i].done);
    assert_int_equal(s[0].status, LB_OK);
    assert_int_equal(s[1].status, LB_EREDIS);
    assert_non_null(strstr(lb_async_lock_info_of(al[1]).errstr, "NOPERM"));
    assert_int_equal(lbt_int(conn, "EXISTS batch:acl:0"), 0);
    assert_int_equal(lbt_int(conn, "EXISTS batch:acl:1"), 1);
    for (int i = 0; i < 2; i++) lb_async_lock_free(al[i]);
    loop_close(&lp);
    lbt_cmd_ok(conn, "DEL batch:acl:1");
    lbt_cmd_ok(conn, "ACL DELUSER batcher");
}

/* The driver freed while releases wait for their turn: they are sent first,
 * and each lock is told it was released. */
static void test_releases_waiting_when_the_driver_is_freed_are_sent(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    lb_async_lock *al[BATCH_LOCKS];
    seen s[BATCH_LOCKS] = {0};
    acquire_all(&lp, al, s, "batch:free:");
    for (int i = 0; i < BATCH_LOCKS; i++)
        assert_int_equal(lb_async_lock_release(al[i], on_done, &s[i]), LB_OK);
    lb_async_free(lp.a);
    lp.a = NULL;
    for (int i = 0; i < BATCH_LOCKS; i++) {
        run_until(&lp, &s[i].done);
        assert_int_equal(s[i].status, LB_OK);
        lb_async_lock_free(al[i]);
    }
    assert_int_equal(lbt_int(conn, "EXISTS batch:free:0 batch:free:5"), 0);
    loop_close(&lp);
}

/* The context freed while releases wait for their turn: nothing was sent, so
 * each ends with LB_EIO (the outcome unknown to it, as for any release in
 * flight) and, the connection gone, each lock is then reported lost. */
static void test_releases_waiting_when_the_context_goes_end_with_eio(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    lb_async_lock *al[BATCH_LOCKS];
    seen s[BATCH_LOCKS] = {0};
    acquire_all(&lp, al, s, "batch:gone:");
    for (int i = 0; i < BATCH_LOCKS; i++)
        assert_int_equal(lb_async_lock_release(al[i], on_done, &s[i]), LB_OK);
    redisAsyncFree(lp.ac);
    lp.ac = NULL;
    for (int i = 0; i < BATCH_LOCKS; i++) {
        assert_int_equal(s[i].done, 1);
        assert_int_equal(s[i].status, LB_EIO);
        assert_int_equal(s[i].lost, 1);
        assert_int_equal(s[i].reason, LB_WATCH_UNREACHABLE);
        lb_async_lock_free(al[i]);
    }
    assert_int_equal(lbt_int(conn, "EXISTS batch:gone:0 batch:gone:5"), 2); /* never sent */
    lbt_del_matching(conn, "batch:gone:*");
    loop_close(&lp);
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
        cmocka_unit_test(test_a_wait_gets_the_lock_when_its_holder_releases),
        cmocka_unit_test(test_waits_on_one_connection_each_get_their_contended_key),
        cmocka_unit_test(test_a_wait_ends_at_its_deadline_while_the_holder_keeps_the_lock),
        cmocka_unit_test(test_a_cancel_ends_a_wait_asleep_at_once),
        cmocka_unit_test(test_a_cancel_during_a_winning_attempt_releases_what_it_won),
        cmocka_unit_test(test_renewal_keeps_a_lock_past_its_ttl),
        cmocka_unit_test(test_a_freed_lock_is_no_longer_renewed_and_lapses),
        cmocka_unit_test(test_a_lock_overwritten_is_reported_lost),
        cmocka_unit_test(test_a_lock_deleted_is_reported_lost),
        cmocka_unit_test(test_renewals_refused_until_the_lease_ends_report_the_loss),
        cmocka_unit_test(test_a_renewal_unanswered_before_the_lease_ends_is_a_loss),
        cmocka_unit_test(test_the_end_of_the_context_ends_waits_and_reports_held_locks_lost),
        cmocka_unit_test(test_a_failed_connect_ends_waits_and_sends_nothing_more),
        cmocka_unit_test(test_freeing_a_waiting_lock_runs_no_callback_and_leaves_the_key_free),
        cmocka_unit_test(test_arguments_and_states_are_refused_with_a_fresh_text),
        cmocka_unit_test(test_every_allocation_failure_is_clean),
        cmocka_unit_test(test_releases_in_one_turn_are_one_call_each_answered_as_its_own),
        cmocka_unit_test(test_a_batch_after_a_script_flush_releases_every_lock),
        cmocka_unit_test(test_a_batch_refused_whole_releases_each_lock_on_its_own),
        cmocka_unit_test(test_releases_waiting_when_the_driver_is_freed_are_sent),
        cmocka_unit_test(test_releases_waiting_when_the_context_goes_end_with_eio),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
