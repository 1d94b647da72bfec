/* Faults against real redis-servers: restarts with and without persistence,
 * paused and sleeping servers, connections cut, delayed, black-holed or
 * losing a reply (through tests/harness/proxy), command timeouts, scripts
 * disabled, maxmemory with noeviction and a read-only replica. Each test says
 * the outcome it expects; in all of them no handle reports a lock it does not
 * hold, no lock is deleted or overwritten by a client that does not hold it,
 * and a lost lock is reported by the next operation. */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/adapters/libevent.h>

#include "harness/failing_alloc.h"
#include "harness/proxy.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "lockbridge/lockbridge.h"

/* ---- helpers ----------------------------------------------------------------- */

/* A connection to `port` whose commands time out after `timeout_ms`. */
static redisContext *connect_port(int port, int64_t timeout_ms) {
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    assert_non_null(c);
    assert_int_equal(c->err, 0);
    assert_int_equal(redisSetTimeout(c, tv), REDIS_OK);
    return c;
}

/* Drops a failed connection and opens a fresh one to the same port. */
static redisContext *reopen(redisContext *c, int port, int64_t timeout_ms) {
    redisFree(c);
    return connect_port(port, timeout_ms);
}

/* Runs a token lock's acquire and release on `c` so that the connection is
 * known to run scripts: the acquires after it send their SET first, which is
 * the command a fault aimed at "the next command" is meant to meet. */
static redisContext *checked(redisContext *c) {
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, "f:checked", 9, NULL), LB_OK);
    assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_lock_release(l, lb_on_conn(c)), LB_OK);
    lb_lock_free(l);
    return c;
}

/* lbt_get of `key` on the server at `port`, but on a connection of its own:
 * the tests read through it after cuts, pauses and restarts, so the view
 * must never depend on the faulty connection a lock handle uses. */
static const char *value_at(int port, const char *key) {
    redisContext *c = connect_port(port, 5000);
    const char *v = lbt_get(c, key);
    redisFree(c);
    return v;
}

static lb_lock *new_lock(const char *key, int64_t ttl_ms, int fencing) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = ttl_ms;
    o.fencing = fencing;
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, key, strlen(key), &o), LB_OK);
    return l;
}

static lb_legacy_lock *new_legacy(const char *key, int64_t ttl_ms, lb_legacy_variant v) {
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    o.ttl_ms = ttl_ms;
    o.variant = v;
    o.release_margin_ms = 50;
    lb_legacy_lock *l = NULL;
    assert_int_equal(lb_legacy_lock_new(&l, key, strlen(key), &o), LB_OK);
    return l;
}

static const char *legacy_value(const lb_legacy_lock *l) { return lb_legacy_info_of(l).value; }

/* Frees a test's token locks, legacy locks and connections; any may be NULL. */
static void free_all(lb_lock *a, lb_lock *b, lb_legacy_lock *la, lb_legacy_lock *lb,
                     redisContext *ca, redisContext *cb) {
    lb_lock_free(a);
    lb_lock_free(b);
    lb_legacy_lock_free(la);
    lb_legacy_lock_free(lb);
    redisFree(ca);
    redisFree(cb);
}

/* Removes what an appendonly server leaves in its directory, so that
 * lbt_redis_stop can remove the directory itself. */
static void remove_aof(const lbt_redis *r) {
    char dir[256], path[512];
    snprintf(dir, sizeof dir, "%s/appendonlydir", r->dir);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* Servers and proxies a test starts, all stopped by the teardown, also when
 * the test fails half-way: a server left running would outlive the test. */
#define MAX_SERVERS 4
static lbt_redis servers[MAX_SERVERS];
static lbt_proxy *proxies[MAX_SERVERS];

static lbt_redis *start_server(const char *const *extra) {
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (servers[i].dir[0]) continue;
        assert_int_equal(lbt_redis_start(&servers[i], extra), 0);
        return &servers[i];
    }
    fail_msg("more than %d servers", MAX_SERVERS);
    return NULL;
}

static lbt_proxy *start_proxy(const lbt_redis *r) {
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (proxies[i]) continue;
        proxies[i] = lbt_proxy_start(r->port);
        assert_non_null(proxies[i]);
        return proxies[i];
    }
    fail_msg("more than %d proxies", MAX_SERVERS);
    return NULL;
}

static int stop_all(void **state) {
    (void)state;
    for (int i = 0; i < MAX_SERVERS; i++) {
        lbt_proxy_stop(proxies[i]);
        proxies[i] = NULL;
        if (!servers[i].dir[0]) continue;
        lbt_redis_kill(&servers[i]);
        remove_aof(&servers[i]);
        lbt_redis_stop(&servers[i]);
        memset(&servers[i], 0, sizeof servers[i]);
    }
    return 0;
}

/* ---- restarts ------------------------------------------------------------------ */

/* Expected: a server restarted without persistence forgets every lock. The
 * holder's connection fails (LB_EIO, the handle still held: the outcome of that
 * command is unknown); once reconnected its release finds another client's lock
 * and reports LB_ELOST, deleting nothing. That another client could take the
 * lock meanwhile is the limit of a single master without persistence. */
static void test_restart_without_persistence_loses_locks_and_says_so(void **state) {
    (void)state;
    lbt_redis *r = start_server(NULL);
    redisContext *ca = connect_port(r->port, 2000);
    lb_lock *a = new_lock("f:rs:m", 20000, 1), *b = new_lock("f:rs:m", 20000, 1);
    lb_legacy_lock *la = new_legacy("f:rs:l", 20000, LB_LEGACY_WIRE);
    lb_legacy_lock *lb = new_legacy("f:rs:l", 20000, LB_LEGACY_WIRE);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(la, lb_on_conn(ca)), LB_OK);
    int64_t fence_before = lb_lock_info_of(a).fence;

    assert_int_equal(lbt_redis_restart(r, NULL), 0);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_EIO);
    assert_true(lb_lock_info_of(a).held);
    ca = reopen(ca, r->port, 2000);
    redisContext *cb = connect_port(r->port, 2000);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(lb, lb_on_conn(cb)), LB_OK);
    /* The fencing counter went with the data: it restarts, so numbers repeat.
     * Fencing needs persistence to mean anything across a restart. */
    assert_true(lb_lock_info_of(b).fence <= fence_before);

    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_ELOST);
    assert_false(lb_lock_info_of(a).held);
    assert_int_equal(lb_legacy_release(la, lb_on_conn(ca)), LB_ELOST);
    assert_string_equal(value_at(r->port, "f:rs:m"), lb_lock_info_of(b).token);
    assert_string_equal(value_at(r->port, "f:rs:l"), legacy_value(lb));
    assert_int_equal(lb_lock_release(b, lb_on_conn(cb)), LB_OK);
    assert_int_equal(lb_legacy_release(lb, lb_on_conn(cb)), LB_OK);

    free_all(a, b, la, lb, ca, cb);
}

/* Expected: with appendonly and fsync on every write, a restart keeps every
 * lock and its remaining TTL: others stay busy, and the holder, once
 * reconnected, releases normally; the fencing counter keeps growing. */
static void test_restart_with_appendonly_keeps_locks_held(void **state) {
    (void)state;
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    lbt_redis *r = start_server(aof);
    redisContext *ca = connect_port(r->port, 2000);
    lb_lock *a = new_lock("f:aof:m", 20000, 1), *b = new_lock("f:aof:m", 20000, 1);
    lb_legacy_lock *la = new_legacy("f:aof:l", 20000, LB_LEGACY_SCRIPTED);
    lb_legacy_lock *lb = new_legacy("f:aof:l", 20000, LB_LEGACY_SCRIPTED);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(la, lb_on_conn(ca)), LB_OK);
    int64_t fence_a = lb_lock_info_of(a).fence;

    assert_int_equal(lbt_redis_restart(r, aof), 0);
    redisContext *cb = connect_port(r->port, 2000);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_EBUSY);
    assert_true(lb_lock_info_of(b).holder_ttl_ms > 0 && lb_lock_info_of(b).holder_ttl_ms <= 20000);
    assert_int_equal(lb_legacy_try_acquire(lb, lb_on_conn(cb)), LB_EBUSY);
    assert_false(lb_lock_info_of(b).held);
    assert_false(lb_legacy_info_of(lb).held);

    ca = reopen(ca, r->port, 2000);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_legacy_release(la, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_OK);
    assert_true(lb_lock_info_of(b).fence > fence_a);
    assert_int_equal(lb_lock_release(b, lb_on_conn(cb)), LB_OK);

    free_all(a, b, la, lb, ca, cb);
}

/* ---- paused and sleeping servers ----------------------------------------------- */

/* Expected: while the server is stopped (SIGSTOP) the holder's extend times out
 * (LB_EIO, not extended); the server's clock runs on, so when it resumes after
 * the TTL the lock has expired: another client takes it, and the old holder's
 * check and release report LB_ELOST without touching the new holder's key.
 * The same for the legacy lock, whose expiry is the contender's clock reading
 * of the value. */
static void test_stopped_server_past_the_ttl_hands_the_lock_on(void **state) {
    (void)state;
    lbt_redis *r = start_server(NULL);
    redisContext *ca = connect_port(r->port, 150), *cb;
    lb_lock *a = new_lock("f:stop:m", 300, 0), *b = new_lock("f:stop:m", 300, 0);
    lb_legacy_lock *la = new_legacy("f:stop:l", 300, LB_LEGACY_WIRE);
    lb_legacy_lock *lb = new_legacy("f:stop:l", 300, LB_LEGACY_WIRE);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(la, lb_on_conn(ca)), LB_OK);

    lbt_redis_pause(r, 1);
    assert_int_equal(lb_lock_extend(a, lb_on_conn(ca), 300, LB_EXTEND_REPLACE), LB_EIO);
    assert_true(lb_lock_info_of(a).held); /* unknown: the extend may yet run */
    lbt_sleep_ms(500);
    lbt_redis_pause(r, 0);

    cb = connect_port(r->port, 2000);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(lb, lb_on_conn(cb)), LB_OK);
    ca = reopen(ca, r->port, 2000);
    int64_t ttl;
    assert_int_equal(lb_lock_check(a, lb_on_conn(ca), &ttl), LB_ELOST);
    assert_false(lb_lock_info_of(a).held);
    assert_int_equal(lb_legacy_release(la, lb_on_conn(ca)), LB_ELOST);
    assert_string_equal(value_at(r->port, "f:stop:m"), lb_lock_info_of(b).token);
    assert_string_equal(value_at(r->port, "f:stop:l"), legacy_value(lb));
    assert_int_equal(lb_lock_release(b, lb_on_conn(cb)), LB_OK);
    assert_int_equal(lb_legacy_release(lb, lb_on_conn(cb)), LB_OK);

    free_all(a, b, la, lb, ca, cb);
}

/* Expected: CLIENT PAUSE WRITE holds every write; a contender's acquire and the
 * holder's release time out (LB_EIO): the contender is not held, the holder
 * still is. When the pause ends, the holder's retry on a new connection
 * releases its lock or reports LB_ELOST (it lapsed meanwhile), and the key
 * never holds anything but the holder's token or nothing; the contender then
 * acquires normally. */
static void test_client_pause_is_a_timeout_never_a_grant(void **state) {
    (void)state;
    lbt_redis *r = start_server(NULL);
    redisContext *ca = connect_port(r->port, 150), *cb = connect_port(r->port, 150);
    lb_lock *a = new_lock("f:pause", 400, 0), *b = new_lock("f:pause", 400, 0);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);

    redisContext *admin = connect_port(r->port, 5000);
    lbt_cmd_ok(admin, "CLIENT PAUSE 700 WRITE");
    redisFree(admin);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_EIO);
    assert_false(lb_lock_info_of(b).held);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_EIO);
    assert_true(lb_lock_info_of(a).held);
    redisFree(cb);
    redisFree(ca);
    lbt_sleep_ms(900); /* past the pause and the TTL */

    ca = connect_port(r->port, 2000);
    cb = connect_port(r->port, 2000);
    const char *now = value_at(r->port, "f:pause");
    int rc = lb_lock_release(a, lb_on_conn(ca));
    if (strcmp(now, lb_lock_info_of(a).token) == 0 || now[0] == '\0')
        assert_true(rc == LB_OK || rc == LB_ELOST);
    else
        fail_msg("the key holds neither the holder's token nor nothing: %s", now);
    assert_false(lb_lock_info_of(a).held);
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(cb), 2000), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(cb)), LB_OK);

    free_all(a, b, NULL, NULL, ca, cb);
}

/* Expected: DEBUG SLEEP blocks the server; an acquire sent meanwhile times out
 * (LB_EIO, not held), but the command waits in the server and runs when it
 * wakes: the key then holds that attempt's token, which nobody believes it
 * holds; it blocks others until its TTL lapses and is then taken normally. */
static void test_debug_sleep_lands_a_timed_out_write_that_lapses(void **state) {
    (void)state;
    static const char *const dbg[] = {"--enable-debug-command", "yes", NULL};
    lbt_redis *r = start_server(dbg);
    redisContext *sleeper = connect_port(r->port, 5000);
    redisContext *ca = connect_port(r->port, 150), *cb = connect_port(r->port, 2000);
    lb_lock *a = new_lock("f:sleep", 400, 0), *b = new_lock("f:sleep", 400, 0);

    /* A first acquire checks that the server runs scripts: done before the
     * sleep, so the command that times out is the SET itself. */
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_OK);
    int done = 0;
    assert_int_equal(redisAppendCommand(sleeper, "DEBUG SLEEP 0.4"), REDIS_OK);
    while (!done) assert_int_equal(redisBufferWrite(sleeper, &done), REDIS_OK);
    lbt_sleep_ms(50);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_EIO);
    assert_false(lb_lock_info_of(a).held);
    void *reply = NULL;
    assert_int_equal(redisGetReply(sleeper, &reply), REDIS_OK); /* awake */
    freeReplyObject(reply);

    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_EBUSY);
    assert_string_equal(value_at(r->port, "f:sleep"), lb_lock_info_of(a).token);
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(cb), 3000), LB_OK);
    assert_string_equal(value_at(r->port, "f:sleep"), lb_lock_info_of(b).token);
    assert_int_equal(lb_lock_release(b, lb_on_conn(cb)), LB_OK);

    free_all(a, b, NULL, NULL, ca, cb);
    redisFree(sleeper);
}

/* ---- connection faults through the proxy ----------------------------------------- */

static lbt_redis *px_server;
static lbt_proxy *px;

static int proxy_setup(void **state) {
    (void)state;
    px_server = start_server(NULL);
    px = start_proxy(px_server);
    return 0;
}

/* Each proxied test gets a fresh server and proxy. */
#define PROXIED(t) cmocka_unit_test_setup_teardown(t, proxy_setup, stop_all)
#define ALONE(t) cmocka_unit_test_teardown(t, stop_all)

/* Expected: an acquire whose reply is lost is LB_EIO and the handle is not
 * held, though the write landed: the modern lock then lapses with its TTL, the
 * legacy one with its timestamp, and others take them after that, not before. */
static void test_acquire_reply_lost_is_not_a_grant_and_lapses(void **state) {
    (void)state;
    int port = lbt_proxy_port(px);
    redisContext *ca = connect_port(port, 150), *cb = connect_port(px_server->port, 2000);
    lb_lock *a = new_lock("f:lost-acq:m", 1500, 0), *b = new_lock("f:lost-acq:m", 1500, 0);
    lb_legacy_lock *la = new_legacy("f:lost-acq:l", 1500, LB_LEGACY_WIRE);
    lb_legacy_lock *lb = new_legacy("f:lost-acq:l", 1500, LB_LEGACY_WIRE);

    /* As in any first acquire, the handle checks once that scripts run: done
     * here, so the reply dropped below is the SET's. */
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_OK);
    lbt_proxy_drop_next_reply(px);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_EIO);
    assert_false(lb_lock_info_of(a).held);
    assert_string_equal(value_at(px_server->port, "f:lost-acq:m"), lb_lock_info_of(a).token);
    ca = reopen(ca, port, 150);
    lbt_proxy_drop_next_reply(px);
    assert_int_equal(lb_legacy_try_acquire(la, lb_on_conn(ca)), LB_EIO);
    assert_false(lb_legacy_info_of(la).held);
    assert_string_not_equal(value_at(px_server->port, "f:lost-acq:l"), "");

    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_EBUSY);
    assert_int_equal(lb_legacy_try_acquire(lb, lb_on_conn(cb)), LB_EBUSY);
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(cb), 3000), LB_OK);
    assert_int_equal(lb_legacy_acquire(lb, lb_on_conn(cb), 3000), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(cb)), LB_OK);
    assert_int_equal(lb_legacy_release(lb, lb_on_conn(cb)), LB_OK);

    free_all(a, b, la, lb, ca, cb);
}

/* Expected: a release whose reply is lost is LB_EIO. The token lock's handle
 * stays held (the outcome is unknown, and a token is ours alone); the key is in
 * fact gone, so the retry on a new connection reports LB_ELOST and deletes
 * nothing. The legacy handle lets the lock go instead (a retry could delete a
 * later holder's byte-equal value): a second release is refused, no command. */
static void test_release_reply_lost_then_retry_reports_lost(void **state) {
    (void)state;
    int port = lbt_proxy_port(px);
    redisContext *ca = connect_port(port, 150);
    lb_lock *a = new_lock("f:lost-rel:m", 10000, 0);
    lb_legacy_lock *la = new_legacy("f:lost-rel:l", 10000, LB_LEGACY_SCRIPTED);
    /* A first round loads the scripts: the reply dropped below must be the
     * script's, not a NOSCRIPT (after which nothing would have run). */
    for (int round = 0; round < 2; round++) {
        if (round) {
            assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_OK);
            assert_int_equal(lb_legacy_release(la, lb_on_conn(ca)), LB_OK);
        }
        assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
        assert_int_equal(lb_legacy_try_acquire(la, lb_on_conn(ca)), LB_OK);
    }

    lbt_proxy_drop_next_reply(px);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_EIO);
    assert_true(lb_lock_info_of(a).held);
    assert_string_equal(value_at(px_server->port, "f:lost-rel:m"), "");
    ca = reopen(ca, port, 150);
    lbt_proxy_drop_next_reply(px);
    assert_int_equal(lb_legacy_release(la, lb_on_conn(ca)), LB_EIO);
    assert_false(lb_legacy_info_of(la).held);
    assert_string_equal(value_at(px_server->port, "f:lost-rel:l"), "");

    ca = reopen(ca, port, 150);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_ELOST);
    assert_int_equal(lb_legacy_release(la, lb_on_conn(ca)), LB_ESTATE);
    assert_false(lb_lock_info_of(a).held);
    assert_false(lb_legacy_info_of(la).held);

    lb_lock_free(a);
    lb_legacy_lock_free(la);
    redisFree(ca);
}

/* Expected: a connection cut before the release reaches Redis is LB_EIO, the
 * handle stays held and the lock is untouched; after reconnecting, the release
 * succeeds. A cut after the command ran (fenced acquire) is LB_EIO, not held,
 * and the lock it wrote lapses with its TTL; the fencing counter moved on, so
 * the next holder's number is still larger than any handed out. */
static void test_cut_connection_before_and_after_the_command(void **state) {
    (void)state;
    int port = lbt_proxy_port(px);
    redisContext *ca = connect_port(port, 1000), *cb = connect_port(px_server->port, 2000);
    lb_lock *a = new_lock("f:cut", 1000, 1), *b = new_lock("f:cut", 1000, 1);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
    int64_t fence_a = lb_lock_info_of(a).fence;

    lbt_proxy_cut_next(px, 0);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_EIO);
    assert_true(lb_lock_info_of(a).held);
    assert_string_equal(value_at(px_server->port, "f:cut"), lb_lock_info_of(a).token);
    ca = checked(reopen(ca, port, 1000));
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_OK);

    lbt_proxy_cut_next(px, 1);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_EIO);
    assert_false(lb_lock_info_of(a).held);
    assert_string_equal(value_at(px_server->port, "f:cut"), lb_lock_info_of(a).token);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_EBUSY);
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(cb), 3000), LB_OK);
    assert_true(lb_lock_info_of(b).fence > fence_a + 1);
    assert_int_equal(lb_lock_release(b, lb_on_conn(cb)), LB_OK);

    /* A cut with nothing in flight shows at the next command. */
    ca = reopen(ca, port, 1000);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
    lbt_proxy_cut(px);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_EIO);
    ca = reopen(ca, port, 1000);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_OK);

    free_all(a, b, NULL, NULL, ca, cb);
}

/* Expected: a delay shorter than the command timeout only slows things down;
 * one longer makes the acquire LB_EIO while its write lands later, and that
 * lock, which nobody believes it holds, lapses with its TTL. */
static void test_delay_below_and_beyond_the_timeout(void **state) {
    (void)state;
    int port = lbt_proxy_port(px);
    redisContext *ca = connect_port(port, 1000), *cb = connect_port(px_server->port, 2000);
    lb_lock *a = new_lock("f:delay", 1500, 0), *b = new_lock("f:delay", 1500, 0);
    lb_legacy_lock *la = new_legacy("f:delay:l", 2000, LB_LEGACY_WIRE);

    lbt_proxy_delay(px, 40);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_lock_extend(a, lb_on_conn(ca), 1500, LB_EXTEND_REPLACE), LB_OK);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(la, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_legacy_release(la, lb_on_conn(ca)), LB_OK);

    redisFree(ca);
    ca = checked(connect_port(port, 150));
    lbt_proxy_delay(px, 400);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_EIO);
    assert_false(lb_lock_info_of(a).held);
    lbt_sleep_ms(500);
    assert_string_equal(value_at(px_server->port, "f:delay"), lb_lock_info_of(a).token);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_EBUSY);
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(cb), 3000), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(cb)), LB_OK);

    free_all(a, b, la, NULL, ca, cb);
}

/* Expected: a black-holed connection (the peer reads and never answers) costs
 * the command timeout and is LB_EIO; the holder stays held, unsure; the lock
 * lapses with its TTL and is taken by another client, and the old holder,
 * reconnected, is told LB_ELOST and deletes nothing. */
static void test_blackhole_is_a_timeout_then_lost(void **state) {
    (void)state;
    int port = lbt_proxy_port(px);
    redisContext *ca = connect_port(port, 150), *cb = connect_port(px_server->port, 2000);
    lb_lock *a = new_lock("f:hole", 1000, 0), *b = new_lock("f:hole", 1000, 0);
    lb_legacy_lock *la = new_legacy("f:hole:l", 1000, LB_LEGACY_SCRIPTED);
    lb_legacy_lock *lb = new_legacy("f:hole:l", 1000, LB_LEGACY_SCRIPTED);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(la, lb_on_conn(ca)), LB_OK);

    lbt_proxy_blackhole(px, 1);
    assert_int_equal(lb_lock_extend(a, lb_on_conn(ca), 5000, LB_EXTEND_REPLACE), LB_EIO);
    assert_true(lb_lock_info_of(a).held);
    ca = reopen(ca, port, 150);
    assert_int_equal(lb_legacy_extend(la, lb_on_conn(ca), 5000), LB_EIO);
    assert_true(lb_legacy_info_of(la).held);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_EBUSY);
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(cb), 3000), LB_OK);
    assert_int_equal(lb_legacy_acquire(lb, lb_on_conn(cb), 3000), LB_OK);
    lbt_proxy_blackhole(px, 0);

    ca = reopen(ca, port, 2000);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_ELOST);
    assert_int_equal(lb_legacy_release(la, lb_on_conn(ca)), LB_ELOST);
    assert_string_equal(value_at(px_server->port, "f:hole"), lb_lock_info_of(b).token);
    assert_string_equal(value_at(px_server->port, "f:hole:l"), legacy_value(lb));
    assert_int_equal(lb_lock_release(b, lb_on_conn(cb)), LB_OK);
    assert_int_equal(lb_legacy_release(lb, lb_on_conn(cb)), LB_OK);

    free_all(a, b, la, lb, ca, cb);
}

/* Expected: with three masters, one black-holed still grants (two votes); two
 * black-holed never grant (LB_EIO: a majority did not answer) and the one live
 * master is left clean; once the proxies pass again, the lock is granted. */
static void test_quorum_with_black_holed_masters(void **state) {
    (void)state;
    lbt_redis *s[3];
    lbt_proxy *p[3];
    redisContext *m[3];
    for (int i = 0; i < 3; i++) {
        s[i] = start_server(NULL);
        p[i] = start_proxy(s[i]);
        m[i] = connect_port(lbt_proxy_port(p[i]), 2000);
    }
    lb_quorum_options o;
    lb_quorum_options_init(&o);
    o.ttl_ms = 5000;
    o.timeout_ms = 150;
    lb_quorum *q = NULL;
    assert_int_equal(lb_quorum_new(&q, "f:q", 3, m, 3, &o), LB_OK);

    lbt_proxy_blackhole(p[0], 1);
    assert_int_equal(lb_quorum_try_acquire(q), LB_OK);
    assert_int_equal(lb_quorum_info_of(q).votes, 2);
    assert_int_equal(lb_quorum_release(q), LB_OK);

    lbt_proxy_blackhole(p[1], 1);
    assert_int_equal(lb_quorum_try_acquire(q), LB_EIO);
    assert_false(lb_quorum_info_of(q).held);
    assert_string_equal(value_at(s[2]->port, "f:q"), "");
    for (int i = 0; i < 3; i++) lbt_proxy_blackhole(p[i], 0);
    assert_int_equal(lb_quorum_acquire(q, 3000), LB_OK);
    for (int i = 0; i < 3; i++) assert_string_equal(value_at(s[i]->port, "f:q"), lb_quorum_info_of(q).token);
    assert_int_equal(lb_quorum_release(q), LB_OK);

    lb_quorum_free(q);
    for (int i = 0; i < 3; i++) redisFree(m[i]);
}

/* ---- the watchdog behind the proxy ------------------------------------------------ */

static lb_watchdog *watchdog_via(int port) {
    lb_watchdog_options o;
    lb_watchdog_options_init(&o);
    o.host = "127.0.0.1";
    o.port = port;
    o.io_timeout_ms = 100;
    o.reconnect_min_ms = 10;
    o.reconnect_max_ms = 50;
    lb_watchdog *wd = NULL;
    assert_int_equal(lb_watchdog_new(&wd, &o), LB_OK);
    return wd;
}

/* Waits (bounded, 5 s) until the watchdog reports `l` lost; returns its check. */
static int wait_lost(lb_watchdog *wd, const lb_lock *l, lb_watch_reason *reason) {
    int rc = LB_OK;
    for (int i = 0; i < 500 && (rc = lb_watchdog_check(wd, l, NULL, reason)) == LB_OK; i++)
        lbt_sleep_ms(10);
    return rc;
}

/* Expected: a watchdog whose connection is cut reconnects and keeps renewing:
 * the lock outlives several TTLs and stays ours. When its connection is then
 * black-holed, no renewal gets through, and it reports the lock lost
 * (unreachable) once the lease has run out by its clock; another client then
 * takes the lock, and the owner's release says LB_ELOST. */
static void test_watchdog_survives_a_cut_and_reports_a_black_hole(void **state) {
    (void)state;
    int port = lbt_proxy_port(px);
    redisContext *ca = connect_port(px_server->port, 2000), *cb = connect_port(px_server->port, 2000);
    lb_lock *a = new_lock("f:wd", 300, 0), *b = new_lock("f:wd", 300, 0);
    lb_watchdog *wd = watchdog_via(port);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(ca)), LB_OK);
    assert_int_equal(lb_watchdog_watch(wd, a, NULL), LB_OK);
    /* The watchdog's connection must be through the proxy before it is cut. */
    for (int i = 0; i < 500 && lbt_proxy_accepted(px) < 1; i++) lbt_sleep_ms(10);
    assert_int_equal(lbt_proxy_accepted(px), 1);

    lbt_proxy_cut(px);
    lbt_sleep_ms(1000); /* more than three TTLs */
    lb_watch_reason reason = (lb_watch_reason)0;
    assert_int_equal(lb_watchdog_check(wd, a, NULL, &reason), LB_OK);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cb)), LB_EBUSY);
    assert_string_equal(value_at(px_server->port, "f:wd"), lb_lock_info_of(a).token);
    lb_watchdog_stats st;
    assert_int_equal(lb_watchdog_stats_get(wd, &st), LB_OK);
    assert_true(st.reconnects >= 1);

    lbt_proxy_blackhole(px, 1);
    assert_int_equal(wait_lost(wd, a, &reason), LB_ELOST);
    assert_int_equal(reason, LB_WATCH_UNREACHABLE);
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(cb), 3000), LB_OK);
    assert_int_equal(lb_lock_release(a, lb_on_conn(ca)), LB_ELOST);
    assert_string_equal(value_at(px_server->port, "f:wd"), lb_lock_info_of(b).token);
    assert_int_equal(lb_lock_release(b, lb_on_conn(cb)), LB_OK);

    lb_watchdog_free(wd);
    free_all(a, b, NULL, NULL, ca, cb);
}

/* ---- server configurations ------------------------------------------------------ */

/* Expected: with EVAL, EVALSHA and SCRIPT renamed away, the wire-only legacy
 * lock works as ever; every lock kind that needs a script later (legacy
 * scripted, modern with and without fencing) fails its first acquire with
 * LB_EREDIS and says why, having written nothing, rather than acquiring a lock
 * it could not release. */
static void test_scripts_disabled_fail_at_acquire_not_at_release(void **state) {
    (void)state;
    static const char *const noeval[] = {"--rename-command", "EVAL", "",
                                         "--rename-command", "EVALSHA", "",
                                         "--rename-command", "SCRIPT", "", NULL};
    lbt_redis *r = start_server(noeval);
    redisContext *c = connect_port(r->port, 2000);

    lb_legacy_lock *w = new_legacy("f:noeval:w", 5000, LB_LEGACY_WIRE);
    lb_legacy_lock *w2 = new_legacy("f:noeval:w", 5000, LB_LEGACY_WIRE);
    assert_int_equal(lb_legacy_try_acquire(w, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(w2, lb_on_conn(c)), LB_EBUSY);
    assert_int_equal(lb_legacy_release(w, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(w2, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_legacy_release(w2, lb_on_conn(c)), LB_OK);

    lb_legacy_lock *s = new_legacy("f:noeval:s", 5000, LB_LEGACY_SCRIPTED);
    assert_int_equal(lb_legacy_try_acquire(s, lb_on_conn(c)), LB_EREDIS);
    assert_false(lb_legacy_info_of(s).held);
    assert_non_null(strstr(lb_legacy_info_of(s).errstr, "script"));
    assert_string_equal(value_at(r->port, "f:noeval:s"), "");

    /* The mode-following lock in legacy mode, scripted variant: its legacy
     * machine's need of scripts is its own (before, SETNX succeeded and the
     * release script was refused: the lock stayed until its timestamp). */
    lb_mlock_options mo;
    lb_mlock_options_init(&mo);
    mo.mode = LB_MODE_LEGACY;
    mo.legacy_variant = LB_LEGACY_SCRIPTED;
    mo.ttl_ms = 5000;
    lb_mlock *ml = NULL;
    assert_int_equal(lb_mlock_new(&ml, "f:noeval:ml", 11, &mo), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(ml, lb_on_conn(c)), LB_EREDIS);
    assert_false(lb_mlock_info_of(ml).held);
    assert_non_null(strstr(lb_mlock_info_of(ml).errstr, "script"));
    assert_string_equal(value_at(r->port, "f:noeval:ml"), "");
    lb_mlock_free(ml);

    for (int fencing = 0; fencing <= 1; fencing++) {
        lb_lock *m = new_lock("f:noeval:m", 5000, fencing);
        assert_int_equal(lb_lock_try_acquire(m, lb_on_conn(c)), LB_EREDIS);
        assert_false(lb_lock_info_of(m).held);
        assert_non_null(strstr(lb_lock_info_of(m).errstr, "script"));
        assert_string_equal(value_at(r->port, "f:noeval:m"), "");
        assert_string_equal(value_at(r->port, "{f:noeval:m}:fence"), "");
        lb_lock_free(m);
    }

    lb_legacy_lock_free(w);
    lb_legacy_lock_free(w2);
    lb_legacy_lock_free(s);
    redisFree(c);
}

static void record_status(lb_machine *m, int status, void *ud) {
    (void)m;
    *(int *)ud = status;
}

/* Runs one operation on the asynchronous driver over libevent; its status. */
static int run_async(int port, lb_machine *m) {
    struct event_base *base = event_base_new();
    assert_non_null(base);
    redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", port);
    assert_non_null(ac);
    assert_int_equal(redisLibeventAttach(ac, base), REDIS_OK);
    int status = 1;
    assert_int_equal(lb_async_run(ac, m, NULL, record_status, &status), LB_OK);
    while (status == 1) event_base_loop(base, EVLOOP_ONCE);
    redisAsyncFree(ac);
    event_base_free(base);
    return status;
}

/* Expected: the same on the asynchronous driver: the first acquire of a token
 * lock fails with LB_EREDIS and writes nothing on a server without scripts,
 * and succeeds (after the check) on one with them. */
static void test_scripts_disabled_fail_at_acquire_on_the_async_driver(void **state) {
    (void)state;
    static const char *const noeval[] = {"--rename-command", "EVAL", "",
                                         "--rename-command", "EVALSHA", "", NULL};
    lbt_redis *off = start_server(noeval), *on = start_server(NULL);
    lb_lock *a = new_lock("f:noeval:async", 5000, 0), *b = new_lock("f:noeval:async", 5000, 0);
    lb_machine *m = lb_lock_machine(a, LB_OP_TRY_ACQUIRE, 0);
    assert_int_equal(run_async(off->port, m), LB_EREDIS);
    assert_false(lb_lock_info_of(a).held);
    assert_non_null(strstr(lb_machine_errstr(m), "script"));
    assert_string_equal(value_at(off->port, "f:noeval:async"), "");
    assert_int_equal(run_async(on->port, lb_lock_machine(b, LB_OP_TRY_ACQUIRE, 0)), LB_OK);
    assert_true(lb_lock_info_of(b).held);
    assert_string_equal(value_at(on->port, "f:noeval:async"), lb_lock_info_of(b).token);
    assert_int_equal(run_async(on->port, lb_lock_machine(b, LB_OP_RELEASE, 0)), LB_OK);
    lb_lock_free(a);
    lb_lock_free(b);
}

/* Expected: under maxmemory with noeviction, writes are refused: a new acquire
 * of any kind is LB_EREDIS (OOM) and writes nothing, but releases (DEL, or a
 * script that only deletes) still work, as does a modern extend (PEXPIRE is
 * not refused); a legacy extend (a SET) is refused and the lock stays held. */
static void test_maxmemory_noeviction_refuses_acquire_not_release(void **state) {
    (void)state;
    lbt_redis *r = start_server(NULL);
    redisContext *c = connect_port(r->port, 2000);
    lbt_cmd_ok(c, "CONFIG SET maxmemory-policy noeviction");
    lb_lock *a = new_lock("f:oom:a", 10000, 1), *b = new_lock("f:oom:b", 10000, 0);
    lb_lock *bf = new_lock("f:oom:b", 10000, 1);
    lb_legacy_lock *lw = new_legacy("f:oom:lw", 10000, LB_LEGACY_WIRE);
    lb_legacy_lock *ls = new_legacy("f:oom:ls", 10000, LB_LEGACY_SCRIPTED);
    lb_legacy_lock *ln = new_legacy("f:oom:ln", 10000, LB_LEGACY_WIRE);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(lw, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(ls, lb_on_conn(c)), LB_OK);

    lbt_cmd_ok(c, "CONFIG SET maxmemory 1");
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(c)), LB_EREDIS);
    assert_non_null(strstr(lb_lock_info_of(b).errstr, "OOM"));
    assert_int_equal(lb_lock_try_acquire(bf, lb_on_conn(c)), LB_EREDIS);
    assert_int_equal(lb_legacy_try_acquire(ln, lb_on_conn(c)), LB_EREDIS);
    assert_false(lb_lock_info_of(b).held || lb_lock_info_of(bf).held || lb_legacy_info_of(ln).held);
    assert_string_equal(value_at(r->port, "f:oom:b"), "");
    assert_string_equal(value_at(r->port, "f:oom:ln"), "");

    assert_int_equal(lb_lock_extend(a, lb_on_conn(c), 10000, LB_EXTEND_REPLACE), LB_OK);
    char before[64];
    snprintf(before, sizeof before, "%s", legacy_value(ls));
    assert_int_equal(lb_legacy_extend(ls, lb_on_conn(c), 20000), LB_EREDIS);
    assert_true(lb_legacy_info_of(ls).held);
    assert_string_equal(value_at(r->port, "f:oom:ls"), before);

    assert_int_equal(lb_lock_release(a, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_legacy_release(lw, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_legacy_release(ls, lb_on_conn(c)), LB_OK);
    assert_string_equal(value_at(r->port, "f:oom:a"), "");
    assert_string_equal(value_at(r->port, "f:oom:lw"), "");
    assert_string_equal(value_at(r->port, "f:oom:ls"), "");

    lbt_cmd_ok(c, "CONFIG SET maxmemory 0");
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(c)), LB_OK);

    lb_lock_free(a);
    lb_lock_free(b);
    lb_lock_free(bf);
    lb_legacy_lock_free(lw);
    lb_legacy_lock_free(ls);
    lb_legacy_lock_free(ln);
    redisFree(c);
}

static int replica_in_sync(int port) {
    redisContext *c = connect_port(port, 2000);
    redisReply *r = redisCommand(c, "INFO replication");
    int up = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up");
    if (r) freeReplyObject(r);
    redisFree(c);
    return up;
}

/* Expected: on a read-only replica every write is refused with READONLY: an
 * acquire of any kind is LB_EREDIS and says READONLY, never LB_OK, even for a
 * key the replica shows as free; a holder's release sent to the replica is
 * LB_EREDIS and leaves both the handle and the master's lock as they were. */
static void test_read_only_replica_refuses_every_write(void **state) {
    (void)state;
    /* Without the delay a diskless full sync waits 5 s for other replicas. */
    static const char *const nodelay[] = {"--repl-diskless-sync-delay", "0", NULL};
    lbt_redis *master = start_server(nodelay);
    char port[16];
    snprintf(port, sizeof port, "%d", master->port);
    const char *const rep[] = {"--replicaof", "127.0.0.1", port, NULL};
    lbt_redis *replica = start_server(rep);
    for (int i = 0; i < 200 && !replica_in_sync(replica->port); i++) lbt_sleep_ms(50);
    assert_true(replica_in_sync(replica->port));

    redisContext *cm = connect_port(master->port, 2000), *cr = connect_port(replica->port, 2000);
    lb_lock *a = new_lock("f:ro", 10000, 0);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(cm)), LB_OK);
    assert_int_equal(lbt_int(cm, "WAIT 1 2000"), 1);

    lb_lock *b = new_lock("f:ro:free", 10000, 0), *bf = new_lock("f:ro:free", 10000, 1);
    lb_legacy_lock *lw = new_legacy("f:ro:free", 10000, LB_LEGACY_WIRE);
    lb_legacy_lock *ls = new_legacy("f:ro:free", 10000, LB_LEGACY_SCRIPTED);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(cr)), LB_EREDIS);
    assert_non_null(strstr(lb_lock_info_of(b).errstr, "READONLY"));
    assert_int_equal(lb_lock_try_acquire(bf, lb_on_conn(cr)), LB_EREDIS);
    assert_int_equal(lb_legacy_try_acquire(lw, lb_on_conn(cr)), LB_EREDIS);
    assert_non_null(strstr(lb_legacy_info_of(lw).errstr, "READONLY"));
    assert_int_equal(lb_legacy_try_acquire(ls, lb_on_conn(cr)), LB_EREDIS);
    assert_false(lb_lock_info_of(b).held || lb_lock_info_of(bf).held || lb_legacy_info_of(lw).held || lb_legacy_info_of(ls).held);

    assert_int_equal(lb_lock_release(a, lb_on_conn(cr)), LB_EREDIS);
    assert_true(lb_lock_info_of(a).held);
    assert_string_equal(value_at(master->port, "f:ro"), lb_lock_info_of(a).token);
    assert_int_equal(lb_lock_release(a, lb_on_conn(cm)), LB_OK);

    free_all(a, b, lw, ls, cm, cr);
    lb_lock_free(bf);
}

/* ---- allocation failure -------------------------------------------------------- */

/* Expected: for every n, failing the n-th allocation makes lb_lock_new return
 * LB_ENOMEM with *out NULL and nothing left allocated, or, once n is past
 * what creation needs, every operation (acquire, extend both ways, check,
 * release, with and without fencing) succeeds without allocating at all. */
static void test_every_allocation_failure_along_token_lock_operations(void **state) {
    (void)state;
    lbt_redis *r = start_server(NULL);
    redisContext *c = connect_port(r->port, 2000);
    for (int fencing = 0; fencing <= 1; fencing++) {
        for (int n = 1;; n++) {
            lbt_failing_alloc f;
            lb_allocator alloc = lbt_failing_allocator(&f, n);
            lb_lock_options o;
            lb_lock_options_init(&o);
            o.fencing = fencing;
            o.allocator = &alloc;
            lb_lock *l = (lb_lock *)&f; /* must be reset on entry */
            int rc = lb_lock_new(&l, "f:alloc", 7, &o);
            if (rc == LB_ENOMEM) {
                assert_null(l);
                assert_int_equal(f.live, 0);
                continue;
            }
            assert_int_equal(rc, LB_OK);
            int created = f.calls;
            int64_t ttl;
            assert_int_equal(lb_lock_try_acquire(l, lb_on_conn(c)), LB_OK);
            assert_int_equal(lb_lock_extend(l, lb_on_conn(c), 5000, LB_EXTEND_REPLACE), LB_OK);
            assert_int_equal(lb_lock_extend(l, lb_on_conn(c), 1000, LB_EXTEND_ADD), LB_OK);
            assert_int_equal(lb_lock_check(l, lb_on_conn(c), &ttl), LB_OK);
            assert_int_equal(lb_lock_release(l, lb_on_conn(c)), LB_OK);
            assert_int_equal(f.calls, created); /* operations allocate nothing */
            lb_lock_free(l);
            assert_int_equal(f.live, 0);
            break;
        }
    }
    redisFree(c);
}

/* Expected: the same for the quorum lock over three masters: creation fails
 * cleanly at every allocation it makes (its handle, its table, each master's
 * lock and their names), and acquire and release allocate nothing. */
static void test_every_allocation_failure_along_quorum_operations(void **state) {
    (void)state;
    redisContext *m[3];
    for (int i = 0; i < 3; i++) m[i] = connect_port(start_server(NULL)->port, 2000);
    int allocations = 0;
    for (int n = 1;; n++) {
        lbt_failing_alloc f;
        lb_allocator alloc = lbt_failing_allocator(&f, n);
        lb_quorum_options o;
        lb_quorum_options_init(&o);
        o.ttl_ms = 5000;
        o.allocator = &alloc;
        lb_quorum *q = (lb_quorum *)&f;
        int rc = lb_quorum_new(&q, "f:qalloc", 8, m, 3, &o);
        if (rc == LB_ENOMEM) {
            assert_null(q);
            assert_int_equal(f.live, 0);
            continue;
        }
        assert_int_equal(rc, LB_OK);
        allocations = f.calls;
        assert_int_equal(lb_quorum_try_acquire(q), LB_OK);
        assert_int_equal(lb_quorum_release(q), LB_OK);
        assert_int_equal(f.calls, allocations);
        lb_quorum_free(q);
        assert_int_equal(f.live, 0);
        break;
    }
    assert_true(allocations >= 2 + 3 * 2); /* handle, table, and per master a lock and names */
    for (int i = 0; i < 3; i++) redisFree(m[i]);
}

int main(void) {
    /* A write on a connection the server closed must be an error, not a signal. */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        ALONE(test_restart_without_persistence_loses_locks_and_says_so),
        ALONE(test_restart_with_appendonly_keeps_locks_held),
        ALONE(test_stopped_server_past_the_ttl_hands_the_lock_on),
        ALONE(test_client_pause_is_a_timeout_never_a_grant),
        ALONE(test_debug_sleep_lands_a_timed_out_write_that_lapses),
        PROXIED(test_acquire_reply_lost_is_not_a_grant_and_lapses),
        PROXIED(test_release_reply_lost_then_retry_reports_lost),
        PROXIED(test_cut_connection_before_and_after_the_command),
        PROXIED(test_delay_below_and_beyond_the_timeout),
        PROXIED(test_blackhole_is_a_timeout_then_lost),
        PROXIED(test_watchdog_survives_a_cut_and_reports_a_black_hole),
        ALONE(test_quorum_with_black_holed_masters),
        ALONE(test_scripts_disabled_fail_at_acquire_not_at_release),
        ALONE(test_scripts_disabled_fail_at_acquire_on_the_async_driver),
        ALONE(test_maxmemory_noeviction_refuses_acquire_not_release),
        ALONE(test_read_only_replica_refuses_every_write),
        ALONE(test_every_allocation_failure_along_token_lock_operations),
        ALONE(test_every_allocation_failure_along_quorum_operations),
    };
    return cmocka_run_group_tests_name("faults", tests, NULL, NULL);
}
