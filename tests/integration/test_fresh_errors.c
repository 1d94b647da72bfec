/* Error texts are never stale: every public function that reports through a
 * handle's error text (or an errbuf) writes a fresh one, even when it refuses
 * its arguments before doing anything. One table row per such function. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>
#include <hiredis/async.h>

#include "harness/redis_server.h"
#include "lockbridge/adapters/libevent.h"
#include "lockbridge/lockbridge.h"

static lbt_redis server;
static redisContext *conn;

/* The handles a row's call refuses arguments to, and the text it is read by. */
typedef struct fixture {
    lb_lock *lock;
    lb_legacy_lock *legacy;
    lb_mlock *mlock;
    lb_lock *owner;  /* owns `m` */
    lb_machine *m;
    char errbuf[256];
    /* A token lock on an event loop that is never run: its refusals send nothing. */
    struct event_base *base;
    redisAsyncContext *ac;
    lb_async *a;
    lb_async_lock *alock;
} fixture;

typedef enum kind { LOCK, LEGACY, MLOCK, MACHINE, WATCHDOG, WAITER, LEGACY_NEW, ASYNC_LOCK } kind;

static const lb_target none = {LB_TARGET_NONE, NULL};

static void done_cb(lb_machine *m, int status, void *ud) {
    (void)m, (void)status, (void)ud;
    fail_msg("a refused asynchronous run must not call done");
}

/* Each call gives one bad argument and returns its status (-1 for a NULL
 * machine); the table checks the status is an error. */
static int lock_try(fixture *f) { return lb_lock_try_acquire(f->lock, none); }
static int lock_acquire(fixture *f) { return lb_lock_acquire(f->lock, none, 10); }
static int lock_acquire_neg(fixture *f) { return lb_lock_acquire(f->lock, lb_on_conn(conn), -1); }
static int lock_wait(fixture *f) { return lb_lock_acquire_wait(f->lock, none, NULL, 10); }
static int lock_release(fixture *f) { return lb_lock_release(f->lock, none); }
static int lock_extend(fixture *f) {
    return lb_lock_extend(f->lock, none, 1000, LB_EXTEND_REPLACE);
}
static int lock_check(fixture *f) {
    int64_t ttl;
    return lb_lock_check(f->lock, none, &ttl);
}
static int lock_machine(fixture *f) { return lb_lock_machine(f->lock, (lb_op)99, 0) ? 0 : -1; }

static void async_done(lb_async_lock *al, int status, void *ud) {
    (void)al, (void)status, (void)ud;
    fail_msg("a refused asynchronous call must not call done");
}
static int async_acquire(fixture *f) { return lb_async_lock_acquire(f->alock, 10, NULL, NULL); }
static int async_acquire_neg(fixture *f) {
    return lb_async_lock_acquire(f->alock, -1, async_done, NULL);
}
static int async_release(fixture *f) { return lb_async_lock_release(f->alock, NULL, NULL); }
static int async_cancel(fixture *f) { return lb_async_lock_cancel(f->alock); }

static int legacy_try(fixture *f) { return lb_legacy_try_acquire(f->legacy, none); }
static int legacy_acquire(fixture *f) { return lb_legacy_acquire(f->legacy, none, 10); }
static int legacy_release(fixture *f) { return lb_legacy_release(f->legacy, none); }
static int legacy_extend(fixture *f) { return lb_legacy_extend(f->legacy, none, 1000); }
static int legacy_machine(fixture *f) {
    return lb_legacy_machine(f->legacy, LB_OP_CHECK, 0) ? 0 : -1;
}

static int mlock_try(fixture *f) { return lb_mlock_try_acquire(f->mlock, none); }
static int mlock_acquire(fixture *f) { return lb_mlock_acquire(f->mlock, none, 10); }
static int mlock_wait(fixture *f) { return lb_mlock_acquire_wait(f->mlock, none, NULL, 10); }
static int mlock_release(fixture *f) { return lb_mlock_release(f->mlock, none); }
static int mlock_extend(fixture *f) { return lb_mlock_extend(f->mlock, none, 1000); }
static int mlock_refresh(fixture *f) { return lb_mlock_refresh(f->mlock, none); }
static int mlock_machine(fixture *f) {
    return lb_mlock_machine(f->mlock, LB_OP_CHECK, 0) ? 0 : -1;
}

static int machine_step(fixture *f) { return lb_machine_step(f->m, NULL, NULL); }
static int target_run(fixture *f) { return lb_target_run(none, f->m, NULL); }
static int async_run(fixture *f) { return lb_async_run(NULL, f->m, NULL, done_cb, NULL); }
static int cluster_async_run(fixture *f) {
    return lb_cluster_async_run(NULL, "k", 1, f->m, NULL, done_cb, NULL);
}

static int watchdog_new(fixture *f) {
    lb_watchdog_options o;
    lb_watchdog_options_init(&o);
    o.errbuf = f->errbuf, o.errbuf_size = sizeof f->errbuf;
    return lb_watchdog_new(NULL, &o);
}
static int waiter_new(fixture *f) {
    lb_waiter_options o;
    lb_waiter_options_init(&o);
    o.errbuf = f->errbuf, o.errbuf_size = sizeof f->errbuf;
    return lb_waiter_new(NULL, &o);
}

static int legacy_new(fixture *f) {
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    o.errbuf = f->errbuf, o.errbuf_size = sizeof f->errbuf;
    return lb_legacy_lock_new(NULL, "k", 1, &o);
}

typedef struct row {
    const char *fn;
    kind kind;
    int (*call)(fixture *f);
} row;

static const row rows[] = {
    {"lb_lock_try_acquire", LOCK, lock_try},
    {"lb_lock_acquire", LOCK, lock_acquire},
    {"lb_lock_acquire", LOCK, lock_acquire_neg},
    {"lb_lock_acquire_wait", LOCK, lock_wait},
    {"lb_lock_release", LOCK, lock_release},
    {"lb_lock_extend", LOCK, lock_extend},
    {"lb_lock_check", LOCK, lock_check},
    {"lb_lock_machine", LOCK, lock_machine},
    {"lb_legacy_try_acquire", LEGACY, legacy_try},
    {"lb_legacy_acquire", LEGACY, legacy_acquire},
    {"lb_legacy_release", LEGACY, legacy_release},
    {"lb_legacy_extend", LEGACY, legacy_extend},
    {"lb_legacy_machine", LEGACY, legacy_machine},
    {"lb_mlock_try_acquire", MLOCK, mlock_try},
    {"lb_mlock_acquire", MLOCK, mlock_acquire},
    {"lb_mlock_acquire_wait", MLOCK, mlock_wait},
    {"lb_mlock_release", MLOCK, mlock_release},
    {"lb_mlock_extend", MLOCK, mlock_extend},
    {"lb_mlock_refresh", MLOCK, mlock_refresh},
    {"lb_mlock_machine", MLOCK, mlock_machine},
    {"lb_machine_step", MACHINE, machine_step},
    {"lb_target_run", MACHINE, target_run},
    {"lb_async_run", MACHINE, async_run},
    {"lb_cluster_async_run", MACHINE, cluster_async_run},
    {"lb_watchdog_new", WATCHDOG, watchdog_new},
    {"lb_waiter_new", WAITER, waiter_new},
    {"lb_legacy_lock_new", LEGACY_NEW, legacy_new},
    {"lb_async_lock_acquire", ASYNC_LOCK, async_acquire},
    {"lb_async_lock_acquire", ASYNC_LOCK, async_acquire_neg},
    {"lb_async_lock_release", ASYNC_LOCK, async_release},
    {"lb_async_lock_cancel", ASYNC_LOCK, async_cancel},
};

/* Functions of the same families that have no error text to keep fresh: they
 * cannot fail, give their whole answer in their status, or read a handle
 * without changing it (a const handle: lb_cluster_slot_owner and
 * lb_sentinel_primary_addr leave the handle's text, which speaks of its
 * connections, alone). */
static const char *const without_text[] = {
    "lb_lock_new", "lb_lock_free", "lb_lock_options_init", "lb_lock_info_of",
    "lb_lock_force_release", "lb_legacy_lock_free",
    "lb_legacy_options_init", "lb_legacy_info_of", "lb_mlock_new", "lb_mlock_free",
    "lb_mlock_options_init", "lb_mlock_info_of", "lb_mlock_notify", "lb_machine_command",
    "lb_machine_errstr", "lb_machine_commands",
    "lb_lock_name_refused", /* its reason is its return value */
    /* A namespace's calls and lb_inspect have no handle to keep a text in:
     * their status is the whole answer, and a transport failure's detail is
     * the target's (lb_cluster_errstr, lb_sentinel_errstr, the context's). */
    "lb_mode_get", "lb_mode_set", "lb_mode_name", "lb_mode_parse", "lb_mode_message",
    "lb_census_register", "lb_census_list", "lb_census_prune", "lb_census_free", "lb_inspect",
    "lb_async_lock_new", "lb_async_lock_free", "lb_async_lock_options_init",
    "lb_async_lock_info_of",
};

/* The families whose functions report through a handle's text or an errbuf. */
static int in_scope(const char *fn) {
    static const char *const prefixes[] = {"lb_lock_", "lb_legacy_", "lb_mlock_",
                                           "lb_machine_", "lb_mode_", "lb_census_",
                                           "lb_async_lock_"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (strncmp(fn, prefixes[i], strlen(prefixes[i])) == 0) return 1;
    return strcmp(fn, "lb_target_run") == 0 || strcmp(fn, "lb_inspect") == 0 || strcmp(fn, "lb_async_run") == 0 ||
           strcmp(fn, "lb_cluster_async_run") == 0 || strcmp(fn, "lb_watchdog_new") == 0 ||
           strcmp(fn, "lb_waiter_new") == 0 || strcmp(fn, "lb_legacy_lock_new") == 0;
}

static int listed(const char *fn) {
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        if (strcmp(rows[i].fn, fn) == 0) return 1;
    for (size_t i = 0; i < sizeof without_text / sizeof *without_text; i++)
        if (strcmp(without_text[i], fn) == 0) return 1;
    return 0;
}

static const char *text_of(const fixture *f, kind k) {
    switch (k) {
    case LOCK: return lb_lock_info_of(f->lock).errstr;
    case LEGACY: return lb_legacy_info_of(f->legacy).errstr;
    case MLOCK: return lb_mlock_info_of(f->mlock).errstr;
    case MACHINE: return lb_machine_errstr(f->m);
    case ASYNC_LOCK: return lb_async_lock_info_of(f->alock).errstr;
    default: return f->errbuf;
    }
}

/* A real failure of the row's kind, which leaves a text behind. */
static void provoke(fixture *f, kind k) {
    lb_watchdog_options wo;
    lb_waiter_options so;
    lb_legacy_options lo;
    lb_watchdog *wd = NULL;
    lb_waiter *w = NULL;
    lb_legacy_lock *l = NULL;
    switch (k) {
    case LOCK: assert_int_equal(lb_lock_release(f->lock, lb_on_conn(conn)), LB_ESTATE); break;
    case LEGACY:
        assert_int_equal(lb_legacy_release(f->legacy, lb_on_conn(conn)), LB_ESTATE);
        break;
    case MLOCK: assert_int_equal(lb_mlock_release(f->mlock, lb_on_conn(conn)), LB_ESTATE); break;
    case MACHINE:
        f->m = lb_lock_machine(f->owner, LB_OP_RELEASE, 0);
        assert_non_null(f->m);
        assert_int_equal(lb_target_run(lb_on_conn(conn), f->m, NULL), LB_ESTATE);
        break;
    case WATCHDOG:
        lb_watchdog_options_init(&wo);
        wo.host = "127.0.0.1";
        wo.port = 1;
        wo.errbuf = f->errbuf, wo.errbuf_size = sizeof f->errbuf;
        assert_int_equal(lb_watchdog_new(&wd, &wo), LB_EIO);
        break;
    case WAITER:
        lb_waiter_options_init(&so);
        so.host = "127.0.0.1";
        so.port = 1;
        so.errbuf = f->errbuf, so.errbuf_size = sizeof f->errbuf;
        assert_int_equal(lb_waiter_new(&w, &so), LB_EIO);
        break;
    case LEGACY_NEW:
        lb_legacy_options_init(&lo);
        lo.ttl_ms = 500; /* under the release margin */
        lo.errbuf = f->errbuf, lo.errbuf_size = sizeof f->errbuf;
        assert_int_equal(lb_legacy_lock_new(&l, "k", 1, &lo), LB_EINVAL);
        break;
    case ASYNC_LOCK:
        assert_int_equal(lb_async_lock_release(f->alock, async_done, NULL), LB_ESTATE);
        break;
    }
    assert_string_not_equal(text_of(f, k), "");
}

static void test_a_refused_argument_never_shows_the_previous_failure(void **state) {
    (void)state;
    fixture f;
    memset(&f, 0, sizeof f);
    assert_int_equal(lb_lock_new(&f.lock, "fresh:lock", 10, NULL), LB_OK);
    assert_int_equal(lb_lock_new(&f.owner, "fresh:owner", 11, NULL), LB_OK);
    assert_int_equal(lb_legacy_lock_new(&f.legacy, "fresh:legacy", 12, NULL), LB_OK);
    assert_int_equal(lb_mlock_new(&f.mlock, "fresh:mlock", 11, NULL), LB_OK);
    f.base = event_base_new();
    assert_non_null(f.base);
    f.ac = redisAsyncConnect("127.0.0.1", server.port);
    assert_non_null(f.ac);
    assert_int_equal(lb_libevent_async_new(&f.a, f.ac, f.base), LB_OK);
    assert_int_equal(lb_async_lock_new(&f.alock, f.a, "fresh:async", 11, NULL), LB_OK);
    int stale = 0;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        char before[256];
        provoke(&f, rows[i].kind);
        snprintf(before, sizeof before, "%s", text_of(&f, rows[i].kind));
        int rc = rows[i].call(&f);
        const char *now = text_of(&f, rows[i].kind);
        if (rc >= 0 || strcmp(now, before) == 0 || now[0] == '\0') {
            print_message("%s: status %d, text \"%s\" after \"%s\"\n", rows[i].fn, rc, now,
                          before);
            stale++;
        }
    }
    lb_lock_free(f.lock);
    lb_lock_free(f.owner);
    lb_legacy_lock_free(f.legacy);
    lb_mlock_free(f.mlock);
    lb_async_lock_free(f.alock);
    lb_async_free(f.a); /* before a context that never connected */
    redisAsyncFree(f.ac);
    event_base_free(f.base);
    assert_int_equal(stale, 0);
}

/* A function added to these families must join the table or say why not. */
static void test_every_function_with_an_error_text_is_in_the_table(void **state) {
    (void)state;
    FILE *p = popen("sh tools/api-functions.sh", "r");
    assert_non_null(p);
    char fn[128];
    int seen = 0, missing = 0;
    while (fgets(fn, sizeof fn, p)) {
        fn[strcspn(fn, "\n")] = '\0';
        seen++;
        if (in_scope(fn) && !listed(fn)) {
            print_message("%s: neither in the table nor without a text\n", fn);
            missing++;
        }
    }
    assert_int_equal(pclose(p), 0);
    assert_true(seen > 50); /* the list was read */
    assert_int_equal(missing, 0);
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
        cmocka_unit_test(test_a_refused_argument_never_shows_the_previous_failure),
        cmocka_unit_test(test_every_function_with_an_error_text_is_in_the_table),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
