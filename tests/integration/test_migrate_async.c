/* The migration shim's machines driven on the caller's own event loop
 * (libevent) against a real redis-server, in every mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>

#include "harness/mlock_util.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"
#include "migrate/internal.h"

static lbt_redis server;
static redisContext *admin; /* the test's own connection, for setup and checks */

/* ---- The asynchronous driver ------------------------------------------------------- */
typedef struct async_run {
    struct event_base *base;
    redisAsyncContext *ac;
    lb_mlock *l[3];
    lb_machine *m[3]; /* each handle's machine: every operation runs on it */
    int status[3][2]; /* acquire, release */
    int done;
} async_run;

static void async_released(lb_machine *m, int status, void *ud);

static int index_of(async_run *a, lb_machine *m) {
    for (int i = 0; i < 3; i++)
        if (a->m[i] == m) return i;
    return -1;
}

static void async_acquired(lb_machine *m, int status, void *ud) {
    async_run *a = ud;
    int i = index_of(a, m);
    assert_true(i >= 0);
    a->status[i][0] = status;
    if (status != LB_OK) {
        a->done++;
        return;
    }
    assert_int_equal(lb_async_run(a->ac, lb_mlock_machine(a->l[i], LB_OP_RELEASE, 0), NULL, async_released, a),
                     LB_OK);
}

static void async_released(lb_machine *m, int status, void *ud) {
    async_run *a = ud;
    int i = index_of(a, m);
    assert_true(i >= 0);
    a->status[i][1] = status;
    a->done++;
}

/* Callers with their own event loop drive the same machines: a follower (mode
 * read first), a compat takeover of an expired legacy lock (two script calls)
 * and a legacy-mode lock (the legacy machine inside), all on one connection. */
static void test_the_async_driver_runs_every_mode(void **state) {
    (void)state;
    const char *ns = "mt:async";
    lb_ns_keys k;
    char old[LB_VALUE_MAX];
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_cmd_ok(admin, "SET %s modern", k.mode);
    lbt_del(admin, "mt:async:1");
    lbt_del(admin, "mt:async:3");
    size_t oldlen = lbt_expiry_value("ms", -3000, old);
    lbt_cmd_ok(admin, "SET %s %b", "mt:async:2", old, oldlen);
    async_run a;
    memset(&a, 0, sizeof a);
    a.l[0] = lbt_follower("mt:async:1", ns, LB_MODE_COMPAT, 1000);
    a.l[1] = lbt_mlock("mt:async:2", LB_MODE_COMPAT, "ms", 5000, NULL);
    a.l[2] = lbt_mlock("mt:async:3", LB_MODE_LEGACY, "ms", 5000, NULL);
    a.base = event_base_new();
    assert_non_null(a.base);
    a.ac = redisAsyncConnect("127.0.0.1", server.port);
    assert_non_null(a.ac);
    assert_int_equal(redisLibeventAttach(a.ac, a.base), REDIS_OK);
    for (int i = 0; i < 3; i++) {
        a.m[i] = lb_mlock_machine(a.l[i], LB_OP_TRY_ACQUIRE, 0);
        assert_int_equal(lb_async_run(a.ac, a.m[i], NULL, async_acquired, &a), LB_OK);
    }
    /* While in flight, no other operation may start on the handle. */
    assert_null(lb_mlock_machine(a.l[0], LB_OP_RELEASE, 0));
    assert_int_equal(lb_mlock_try_acquire(a.l[0], lb_on_conn(admin)), LB_ESTATE);
    while (a.done < 3) event_base_loop(a.base, EVLOOP_ONCE);
    for (int i = 0; i < 3; i++) {
        if (a.status[i][0] != LB_OK || a.status[i][1] != LB_OK)
            fail_msg("lock %d: acquire %s, release %s: %s", i, lb_err_name(a.status[i][0]),
                     lb_err_name(a.status[i][1]), lb_mlock_info_of(a.l[i]).errstr);
    }
    assert_int_equal(lb_mlock_info_of(a.l[0]).held_mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_info_of(a.l[1]).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_info_of(a.l[2]).held_mode, LB_MODE_LEGACY);
    for (int i = 0; i < 3; i++) lb_mlock_free(a.l[i]);
    redisAsyncFree(a.ac);
    event_base_free(a.base);
    lbt_assert_key(admin, "mt:async:2", NULL, 0);
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
        cmocka_unit_test(test_the_async_driver_runs_every_mode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
