/* The asynchronous driver on a libevent loop against a real redis-server:
 * many operations in flight on one connection, contention decided by the
 * server, disconnects ending every pending operation with LB_EIO. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>

#include "harness/redis_server.h"
#include "lockbridge/lockbridge.h"

static lbt_redis server;

typedef struct loop {
    struct event_base *base;
    redisAsyncContext *ac;
    int pending;
    int results[16]; /* count per -status */
    int acquired, released;
} loop;

static void loop_open(loop *lp) {
    memset(lp, 0, sizeof *lp);
    lp->base = event_base_new();
    assert_non_null(lp->base);
    lp->ac = redisAsyncConnect("127.0.0.1", server.port);
    assert_non_null(lp->ac);
    assert_int_equal(lp->ac->err, 0);
    assert_int_equal(redisLibeventAttach(lp->ac, lp->base), REDIS_OK);
}

static void loop_close(loop *lp) {
    if (lp->ac) redisAsyncFree(lp->ac);
    event_base_free(lp->base);
}

static void count(loop *lp, int status) {
    if (status <= 0 && status > -16) lp->results[-status]++;
}

/* A token lock per key: acquire, then release from the acquire's callback. */
typedef struct job {
    loop *lp;
    lb_lock *lock;
    uint64_t after_acquire, after_release; /* the handle's command count then */
} job;

static void released(lb_machine *m, int status, void *ud) {
    job *j = ud;
    (void)m;
    if (status == LB_OK) j->lp->released++;
    j->after_release = lb_lock_info_of(j->lock).commands;
    count(j->lp, status);
    j->lp->pending--;
    lb_lock_free(j->lock); /* the callback may free the machine's owner */
    j->lock = NULL;
}

static void acquired(lb_machine *m, int status, void *ud) {
    job *j = ud;
    (void)m;
    if (status != LB_OK) {
        count(j->lp, status);
        j->lp->pending--;
        return;
    }
    j->lp->acquired++;
    j->after_acquire = lb_lock_info_of(j->lock).commands;
    assert_int_equal(lb_async_run(j->lp->ac, lb_lock_machine(j->lock, LB_OP_RELEASE, 0), NULL, released, j),
                     LB_OK);
}

/* Starts a fresh handle per key on `lp` and runs the loop until every job
 * acquired and released. */
static void run_wave(loop *lp, job *jobs, int n) {
    lp->acquired = lp->released = 0;
    for (int i = 0; i < n; i++) {
        char key[32];
        int len = snprintf(key, sizeof key, "async:%d", i);
        jobs[i].lp = lp;
        assert_int_equal(lb_lock_new(&jobs[i].lock, key, (size_t)len, NULL), LB_OK);
        lp->pending++;
        assert_int_equal(lb_async_run(lp->ac, lb_lock_machine(jobs[i].lock, LB_OP_TRY_ACQUIRE, 0),
                                      NULL, acquired, &jobs[i]),
                         LB_OK);
    }
    while (lp->pending > 0) event_base_loop(lp->base, EVLOOP_ONCE);
    assert_int_equal(lp->acquired, n);
    assert_int_equal(lp->released, n);
}

static void test_one_thread_runs_thousands_of_locks_at_once(void **state) {
    (void)state;
    enum { N = 3000 };
    loop lp;
    loop_open(&lp);
    job *jobs = calloc(N, sizeof *jobs);
    assert_non_null(jobs);
    run_wave(&lp, jobs, N);
    /* Commands run through the event loop count as the blocking calls' do.
     * The first wave is sent before any reply arrives, so each fresh handle
     * checks that the server runs scripts (its EVALSHA, and the EVAL after a
     * NOSCRIPT), then SETs, then runs the release script. */
    for (int i = 0; i < N; i++) {
        assert_in_range(jobs[i].after_acquire, 2, 3);
        assert_in_range(jobs[i].after_release - jobs[i].after_acquire, 1, 2);
    }
    /* The connection is now known to run scripts: fresh handles on it skip
     * the check, a SET and a release each. */
    run_wave(&lp, jobs, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(jobs[i].after_acquire, 1);
        assert_int_equal(jobs[i].after_release - jobs[i].after_acquire, 1);
    }
    redisContext *c = lbt_redis_connect(&server);
    redisReply *r = redisCommand(c, "DBSIZE");
    assert_int_equal(r->integer, 0); /* every lock released */
    freeReplyObject(r);
    redisFree(c);
    free(jobs);
    loop_close(&lp);
}

typedef struct vote {
    loop *lp;
    int status;
} vote;

static void record(lb_machine *m, int status, void *ud) {
    vote *v = ud;
    (void)m;
    v->status = status;
    v->lp->pending--;
}

/* Legacy locks run on the same driver; the server orders contenders. */
static void test_contending_legacy_handles_get_one_grant(void **state) {
    (void)state;
    enum { N = 8 };
    loop lp;
    loop_open(&lp);
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    o.variant = LB_LEGACY_SCRIPTED;
    lb_legacy_lock *locks[N];
    vote votes[N];
    for (int i = 0; i < N; i++) {
        assert_int_equal(lb_legacy_lock_new(&locks[i], "async:legacy", 12, &o), LB_OK);
        votes[i] = (vote){&lp, 1};
        lp.pending++;
        assert_int_equal(lb_async_run(lp.ac, lb_legacy_machine(locks[i], LB_OP_TRY_ACQUIRE, 0), NULL,
                                      record, &votes[i]),
                         LB_OK);
    }
    while (lp.pending > 0) event_base_loop(lp.base, EVLOOP_ONCE);
    int granted = 0;
    for (int i = 0; i < N; i++) {
        if (votes[i].status == LB_OK) granted++;
        else assert_int_equal(votes[i].status, LB_EBUSY);
    }
    assert_int_equal(granted, 1);
    for (int i = 0; i < N; i++) {
        if (lb_legacy_info_of(locks[i]).held) {
            lp.pending++;
            lb_async_run(lp.ac, lb_legacy_machine(locks[i], LB_OP_RELEASE, 0), NULL, record, &votes[i]);
        }
    }
    while (lp.pending > 0) event_base_loop(lp.base, EVLOOP_ONCE);
    for (int i = 0; i < N; i++) lb_legacy_lock_free(locks[i]);
    loop_close(&lp);
}

static void test_freeing_the_context_ends_pending_operations_with_eio(void **state) {
    (void)state;
    enum { N = 50 };
    loop lp;
    loop_open(&lp);
    lb_lock *locks[N];
    vote votes[N];
    for (int i = 0; i < N; i++) {
        char key[32];
        int n = snprintf(key, sizeof key, "async:gone:%d", i);
        assert_int_equal(lb_lock_new(&locks[i], key, (size_t)n, NULL), LB_OK);
        votes[i] = (vote){&lp, 1};
        lp.pending++;
        assert_int_equal(lb_async_run(lp.ac, lb_lock_machine(locks[i], LB_OP_TRY_ACQUIRE, 0), NULL,
                                      record, &votes[i]),
                         LB_OK);
    }
    /* A machine in flight cannot be started twice. */
    assert_null(lb_lock_machine(locks[0], LB_OP_TRY_ACQUIRE, 0));
    redisAsyncFree(lp.ac);
    lp.ac = NULL;
    assert_int_equal(lp.pending, 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(votes[i].status, LB_EIO);
        assert_false(lb_lock_info_of(locks[i]).held);
        lb_lock_free(locks[i]);
    }
    loop_close(&lp);
}

static void test_an_operation_that_sends_nothing_still_reports(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    lb_lock *l;
    vote v = {&lp, 1};
    assert_int_equal(lb_lock_new(&l, "async:none", 10, NULL), LB_OK);
    lp.pending = 1;
    assert_int_equal(lb_async_run(lp.ac, lb_lock_machine(l, LB_OP_RELEASE, 0), NULL, record, &v), LB_OK);
    assert_int_equal(lp.pending, 0);
    assert_int_equal(v.status, LB_ESTATE);
    assert_int_equal(lb_async_run(NULL, lb_lock_machine(l, LB_OP_RELEASE, 0), NULL, record, &v), LB_EINVAL);
    lb_lock_free(l);
    loop_close(&lp);
}

/* While the async driver runs a handle's operation, no other operation can
 * start on that handle (its pending reply belongs to the running one), sync or
 * step-machine; the running operation then ends as if nothing happened. */
static void test_no_operation_starts_while_one_is_in_flight(void **state) {
    (void)state;
    loop lp;
    loop_open(&lp);
    redisContext *c = lbt_redis_connect(&server);
    assert_non_null(c);
    lb_lock *m;
    lb_legacy_lock *g;
    assert_int_equal(lb_lock_new(&m, "async:busy:m", 12, NULL), LB_OK);
    assert_int_equal(lb_legacy_lock_new(&g, "async:busy:g", 12, NULL), LB_OK);
    vote vm = {&lp, 1}, vg = {&lp, 1};
    lp.pending = 2;
    assert_int_equal(lb_async_run(lp.ac, lb_lock_machine(m, LB_OP_TRY_ACQUIRE, 0), NULL, record, &vm), LB_OK);
    assert_int_equal(lb_async_run(lp.ac, lb_legacy_machine(g, LB_OP_TRY_ACQUIRE, 0), NULL, record, &vg),
                     LB_OK);
    assert_null(lb_lock_machine(m, LB_OP_TRY_ACQUIRE, 0));
    assert_null(lb_lock_machine(m, LB_OP_RELEASE, 0));
    assert_null(lb_lock_machine(m, LB_OP_EXTEND_ADD, 1000));
    assert_null(lb_lock_machine(m, LB_OP_CHECK, 0));
    assert_int_equal(lb_lock_release(m, lb_on_conn(c)), LB_ESTATE);
    assert_null(lb_legacy_machine(g, LB_OP_TRY_ACQUIRE, 0));
    assert_null(lb_legacy_machine(g, LB_OP_RELEASE, 0));
    assert_null(lb_legacy_machine(g, LB_OP_EXTEND, 1000));
    assert_int_equal(lb_legacy_release(g, lb_on_conn(c)), LB_ESTATE);
    while (lp.pending > 0) event_base_loop(lp.base, EVLOOP_ONCE);
    assert_int_equal(vm.status, LB_OK);
    assert_int_equal(vg.status, LB_OK);
    assert_true(lb_lock_info_of(m).held && lb_legacy_info_of(g).held);
    /* Once it has ended, the handle takes operations again. */
    assert_int_equal(lb_lock_release(m, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_legacy_release(g, lb_on_conn(c)), LB_OK);
    lb_lock_free(m);
    lb_legacy_lock_free(g);
    redisFree(c);
    loop_close(&lp);
}

static int setup(void **state) {
    (void)state;
    return lbt_redis_start(&server, NULL);
}

static int teardown(void **state) {
    (void)state;
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_thread_runs_thousands_of_locks_at_once),
        cmocka_unit_test(test_contending_legacy_handles_get_one_grant),
        cmocka_unit_test(test_freeing_the_context_ends_pending_operations_with_eio),
        cmocka_unit_test(test_an_operation_that_sends_nothing_still_reports),
        cmocka_unit_test(test_no_operation_starts_while_one_is_in_flight),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
