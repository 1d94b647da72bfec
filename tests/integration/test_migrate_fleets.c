/* Mixed fleets of adjacent modes on one counter against a real redis-server:
 * threads and processes, and a mode switch in the middle of contention. */
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/mlock_util.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"

static lbt_redis server;
static redisContext *admin; /* the test's own connection, for setup and checks */

/* ---- Mixed fleets on a shared counter ------------------------------------------------------ */
#define COUNTER "mt:counter"
#define ROUNDS 60

typedef struct worker {
    const char *key;
    lb_mode mode;
    const char *ns; /* set: follow its control key */
    int rounds;     /* at least this many increments */
    atomic_int *until; /* set: and more until it is non-zero */
    int done;       /* increments made */
    int failures;
    int by_mode[3]; /* acquisitions in each mode */
    char why[160];
} worker;

/* Lock, read the counter, write it back plus one, unlock: a lost update shows
 * as a final count below the number of increments. */
static int work(worker *wk, redisContext *c) {
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.mode = wk->mode;
    o.ttl_ms = 20000;
    o.backoff_max_ms = 20;
    if (wk->ns) {
        o.ns = wk->ns;
        o.follow = 1;
        o.mode_refresh_ms = 2;
        o.census_refresh_ms = 0;
    }
    lb_mlock *l = NULL;
    if (lb_mlock_new(&l, wk->key, strlen(wk->key), &o) != LB_OK) return -1;
    for (int i = 0; i < wk->rounds || (wk->until && !atomic_load(wk->until)); i++) {
        int rc = lb_mlock_acquire(l, lb_on_conn(c), 20000);
        if (rc != LB_OK) {
            snprintf(wk->why, sizeof wk->why, "acquire: %s %s", lb_err_name(rc), lb_mlock_info_of(l).errstr);
            wk->failures++;
            break;
        }
        wk->by_mode[lb_mlock_info_of(l).held_mode]++;
        redisReply *r = redisCommand(c, "GET %s", COUNTER);
        long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
        if (r) freeReplyObject(r);
        r = redisCommand(c, "SET %s %lld", COUNTER, v + 1);
        if (r) freeReplyObject(r);
        wk->done++;
        rc = lb_mlock_release(l, lb_on_conn(c));
        if (rc != LB_OK) {
            snprintf(wk->why, sizeof wk->why, "release: %s %s", lb_err_name(rc), lb_mlock_info_of(l).errstr);
            wk->failures++;
        }
    }
    lb_mlock_free(l);
    return wk->failures ? -1 : 0;
}

static void *worker_main(void *ud) {
    worker *wk = ud;
    redisContext *c = lbt_redis_connect(&server);
    if (!c) {
        wk->failures++;
        return NULL;
    }
    work(wk, c);
    redisFree(c);
    return NULL;
}

static long long counter_value(void) {
    redisReply *r = redisCommand(admin, "GET %s", COUNTER);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    return v;
}

/* Threads of one process, thread i in modes[i], each with its own connection
 * and lock handle on `key`. */
static void run_threads(const lb_mode *modes, int n, const char *key) {
    pthread_t th[8];
    worker w[8];
    assert_true(n <= 8);
    lbt_del(admin, COUNTER);
    lbt_del(admin, key);
    for (int i = 0; i < n; i++) {
        w[i] = (worker){key, modes[i], NULL, ROUNDS, NULL, 0, 0, {0}, ""};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    int total = 0;
    for (int i = 0; i < n; i++) {
        if (w[i].failures) fail_msg("worker %d (%s): %s", i, lb_mode_name(w[i].mode), w[i].why);
        total += w[i].done;
    }
    assert_int_equal(total, n * ROUNDS);
    assert_int_equal(counter_value(), total);
}

static void test_legacy_and_compat_threads_lose_no_update(void **state) {
    (void)state;
    const lb_mode modes[4] = {LB_MODE_LEGACY, LB_MODE_COMPAT, LB_MODE_LEGACY, LB_MODE_COMPAT};
    run_threads(modes, 4, "mt:mixed1");
}

static void test_compat_and_modern_threads_lose_no_update(void **state) {
    (void)state;
    const lb_mode modes[4] = {LB_MODE_MODERN, LB_MODE_COMPAT, LB_MODE_MODERN, LB_MODE_COMPAT};
    run_threads(modes, 4, "mt:mixed2");
}

/* Separate processes: nothing shared but Redis. */
static void run_processes(const lb_mode *modes, int n, const char *key) {
    pid_t pids[8];
    lbt_del(admin, COUNTER);
    lbt_del(admin, key);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            worker wk = {key, modes[i], NULL, ROUNDS, NULL, 0, 0, {0}, ""};
            redisContext *c = lbt_redis_connect(&server);
            int rc = c ? work(&wk, c) : -1;
            if (rc) fprintf(stderr, "child %d (%s): %s\n", i, lb_mode_name(modes[i]), wk.why);
            if (c) redisFree(c);
            _exit(rc ? 1 : 0);
        }
    }
    for (int i = 0; i < n; i++) {
        int st = 0;
        assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    assert_int_equal(counter_value(), n * ROUNDS);
}

static void test_legacy_and_compat_processes_lose_no_update(void **state) {
    (void)state;
    const lb_mode modes[3] = {LB_MODE_LEGACY, LB_MODE_COMPAT, LB_MODE_COMPAT};
    run_processes(modes, 3, "mt:proc1");
}

static void test_compat_and_modern_processes_lose_no_update(void **state) {
    (void)state;
    const lb_mode modes[3] = {LB_MODE_COMPAT, LB_MODE_MODERN, LB_MODE_MODERN};
    run_processes(modes, 3, "mt:proc2");
}

/* Followers of the control key while it steps legacy -> compat -> modern and
 * back, each step adjacent, in the middle of contention. */
typedef struct stepper {
    const char *ns;
    atomic_int done;
} stepper;

static void *stepper_main(void *ud) {
    stepper *s = ud;
    static const lb_mode path[] = {LB_MODE_COMPAT, LB_MODE_MODERN, LB_MODE_COMPAT,
                                   LB_MODE_LEGACY, LB_MODE_COMPAT, LB_MODE_MODERN};
    redisContext *c = lbt_redis_connect(&server);
    if (!c) return NULL;
    for (size_t i = 0; i < sizeof path / sizeof path[0]; i++) {
        usleep(40000);
        lb_mode_set(lb_on_conn(c), s->ns, strlen(s->ns), path[i], NULL, NULL);
    }
    usleep(40000);
    atomic_store(&s->done, 1);
    redisFree(c);
    return NULL;
}

static void test_a_mode_switch_mid_contention_loses_no_update(void **state) {
    (void)state;
    const char *ns = "mt:switch";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(admin, k.mode);
    worker w[4];
    for (int i = 0; i < 4; i++)
        w[i] = (worker){"mt:switched", LB_MODE_LEGACY, ns, 20, NULL, 0, 0, {0}, ""};
    stepper s;
    s.ns = ns;
    atomic_init(&s.done, 0);
    for (int i = 0; i < 4; i++) w[i].until = &s.done;
    pthread_t st, th[4];
    lbt_del(admin, COUNTER);
    lbt_del(admin, "mt:switched");
    assert_int_equal(pthread_create(&st, NULL, stepper_main, &s), 0);
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    pthread_join(st, NULL);
    int by_mode[3] = {0, 0, 0}, total = 0;
    for (int i = 0; i < 4; i++) {
        if (w[i].failures) fail_msg("worker %d: %s", i, w[i].why);
        total += w[i].done;
        for (int m = 0; m < 3; m++) by_mode[m] += w[i].by_mode[m];
    }
    printf("  acquisitions by mode: legacy %d, compat %d, modern %d\n", by_mode[0], by_mode[1],
           by_mode[2]);
    assert_int_equal(counter_value(), total);
    /* The workers ran through every switch: each mode was used. */
    assert_true(by_mode[0] > 0 && by_mode[1] > 0 && by_mode[2] > 0);
    lbt_del(admin, k.mode);
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
        cmocka_unit_test(test_legacy_and_compat_threads_lose_no_update),
        cmocka_unit_test(test_compat_and_modern_threads_lose_no_update),
        cmocka_unit_test(test_legacy_and_compat_processes_lose_no_update),
        cmocka_unit_test(test_compat_and_modern_processes_lose_no_update),
        cmocka_unit_test(test_a_mode_switch_mid_contention_loses_no_update),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
