/* lockbridge under a least-privilege ACL user: only the lock keys' pattern (and
 * their companions), only the commands the locks send or their scripts run. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "harness/redis_server.h"
#include "harness/sleep.h"
#include "lockbridge/lockbridge.h"

static lbt_redis server;
static redisContext *locker; /* authenticated as the restricted user */

/* The ACL documented in docs/reliability.md for a fleet whose lock keys are
 * "locks:*": the keys, their companions ({locks:...}:fence, :queue, :fair), the
 * release channel, the waiters' inboxes (fair hand-offs), and the commands
 * sent or run by scripts. */
static const char *const acl_rules[] = {
    "ACL", "SETUSER", "locker", "reset", "on", ">s3cret",
    "~locks:*", "~{locks:*}:*", "&{locks:*}:released", "&lb-inbox:*",
    "+ping", "+setnx", "+get", "+getset", "+del", "+set", "+pttl", "+evalsha", "+eval",
    "+pexpire", "+incr", "+publish", "+time", "+type", "+hget", "+hset", "+hdel",
    "+zadd", "+zrange", "+zrem", "+zpopmin", "+hmget", "+blpop", "+lpush", "+rpush", "+mget",
};

static redisContext *as_locker(void) {
    redisContext *c = lbt_redis_connect(&server);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "AUTH locker s3cret");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    return c;
}

static void test_legacy_locks_work_as_the_restricted_user(void **state) {
    (void)state;
    for (int v = 0; v < 2; v++) {
        lb_legacy_options o;
        lb_legacy_options_init(&o);
        o.variant = v ? LB_LEGACY_SCRIPTED : LB_LEGACY_WIRE;
        lb_legacy_lock *a, *b;
        assert_int_equal(lb_legacy_lock_new(&a, "locks:legacy", 12, &o), LB_OK);
        assert_int_equal(lb_legacy_lock_new(&b, "locks:legacy", 12, &o), LB_OK);
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(locker)), LB_OK);
        assert_int_equal(lb_legacy_try_acquire(b, lb_on_conn(locker)), LB_EBUSY);
        if (v) assert_int_equal(lb_legacy_extend(a, lb_on_conn(locker), 60000), LB_OK);
        assert_int_equal(lb_legacy_release(a, lb_on_conn(locker)), LB_OK);
        assert_int_equal(lb_legacy_try_acquire(b, lb_on_conn(locker)), LB_OK);
        assert_int_equal(lb_legacy_release(b, lb_on_conn(locker)), LB_OK);
        lb_legacy_lock_free(a);
        lb_legacy_lock_free(b);
    }
}

static void test_token_locks_with_fencing_and_fair_mode_work_as_the_restricted_user(void **state) {
    (void)state;
    for (int mode = 0; mode < 3; mode++) {
        lb_lock_options o;
        lb_lock_options_init(&o);
        o.fencing = mode >= 1;
        o.fair = mode == 2;
        lb_lock *a, *b;
        assert_int_equal(lb_lock_new(&a, "locks:token", 11, &o), LB_OK);
        assert_int_equal(lb_lock_new(&b, "locks:token", 11, &o), LB_OK);
        assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(locker)), LB_OK);
        assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(locker)), LB_EBUSY);
        int64_t ttl;
        assert_int_equal(lb_lock_extend(a, lb_on_conn(locker), 60000, LB_EXTEND_ADD), LB_OK);
        assert_int_equal(lb_lock_check(a, lb_on_conn(locker), &ttl), LB_OK);
        assert_int_equal(lb_lock_release(a, lb_on_conn(locker)), LB_OK);
        assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(locker)), LB_OK);
        if (o.fencing) assert_true(lb_lock_info_of(b).fence > lb_lock_info_of(a).fence);
        assert_int_equal(lb_lock_release(b, lb_on_conn(locker)), LB_OK);
        lb_lock_free(a);
        lb_lock_free(b);
    }
}

static void test_compat_and_modern_modes_work_as_the_restricted_user(void **state) {
    (void)state;
    for (int m = LB_MODE_COMPAT; m <= LB_MODE_MODERN; m++) {
        lb_mlock_options o;
        lb_mlock_options_init(&o);
        o.mode = (lb_mode)m;
        lb_mlock *a, *b;
        assert_int_equal(lb_mlock_new(&a, "locks:mig", 9, &o), LB_OK);
        assert_int_equal(lb_mlock_new(&b, "locks:mig", 9, &o), LB_OK);
        assert_int_equal(lb_mlock_try_acquire(a, lb_on_conn(locker)), LB_OK);
        assert_int_equal(lb_mlock_try_acquire(b, lb_on_conn(locker)), LB_EBUSY);
        assert_int_equal(lb_mlock_extend(a, lb_on_conn(locker), 60000), LB_OK);
        assert_int_equal(lb_mlock_release(a, lb_on_conn(locker)), LB_OK);
        assert_int_equal(lb_mlock_try_acquire(b, lb_on_conn(locker)), LB_OK);
        assert_int_equal(lb_mlock_release(b, lb_on_conn(locker)), LB_OK);
        lb_mlock_free(a);
        lb_mlock_free(b);
    }
}

/* A user named `name` with the rules above less those starting with `drop`
 * (a command such as "+blpop", or "&" for every channel), then `extra` (NULL:
 * none), on a connection of its own. */
static redisContext *as_user_without(const char *name, const char *drop, const char *extra) {
    redisContext *admin = lbt_redis_connect(&server);
    assert_non_null(admin);
    const char *argv[64];
    int n = 0;
    for (size_t i = 0; i < sizeof acl_rules / sizeof acl_rules[0]; i++)
        if (strncmp(acl_rules[i], drop, strlen(drop)) != 0) argv[n++] = i == 2 ? name : acl_rules[i];
    if (extra) argv[n++] = extra;
    redisReply *r = redisCommandArgv(admin, n, argv, NULL);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(admin);
    redisContext *c = lbt_redis_connect(&server);
    assert_non_null(c);
    r = redisCommand(c, "AUTH %s s3cret", name);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    return c;
}

/* The value of field in the server's newest ACL LOG entry, or NULL. The log
 * records a refusal as data (which user, which kind of object, which object),
 * the same on every server that has ACLs, where the error text is each
 * server's own wording. */
static const char *newest_refusal(redisReply *log, const char *field) {
    if (!log || log->type != REDIS_REPLY_ARRAY || log->elements < 1) return NULL;
    redisReply *e = log->element[0];
    if (e->type != REDIS_REPLY_ARRAY) return NULL;
    for (size_t i = 0; i + 1 < e->elements; i += 2)
        if (e->element[i]->type == REDIS_REPLY_STRING && strcmp(e->element[i]->str, field) == 0 &&
            e->element[i + 1]->type == REDIS_REPLY_STRING)
            return e->element[i + 1]->str;
    return NULL;
}

/* Asserts that the server's newest ACL refusal denied user the channel. */
static void assert_channel_refused(redisContext *admin, const char *user, const char *channel) {
    redisReply *log = redisCommand(admin, "ACL LOG 1");
    assert_non_null(newest_refusal(log, "reason"));
    assert_string_equal(newest_refusal(log, "reason"), "channel");
    assert_string_equal(newest_refusal(log, "username"), user);
    assert_string_equal(newest_refusal(log, "object"), channel);
    freeReplyObject(log);
}

typedef struct waiting {
    lb_lock *l;
    redisContext *c;
    int rc;
} waiting;

static void *wait_for_it(void *arg) {
    waiting *w = arg;
    w->rc = lb_lock_acquire(w->l, lb_on_conn(w->c), 10000);
    return NULL;
}

/* A fair hand-off to a waiter blocked on its grant list (BLPOP, LPUSH) works as
 * the restricted user; a user refused BLPOP still gets the lock, its wait
 * polling instead. */
static void test_fair_hand_offs_on_grant_lists_work_as_the_restricted_user(void **state) {
    (void)state;
    for (int refused = 0; refused < 2; refused++) {
        lb_lock_options o;
        lb_lock_options_init(&o);
        o.fair = 1;
        o.fencing = 1;
        o.backoff_max_ms = 50;
        lb_lock *h, *q;
        assert_int_equal(lb_lock_new(&h, "locks:fair", 10, &o), LB_OK);
        assert_int_equal(lb_lock_new(&q, "locks:fair", 10, &o), LB_OK);
        assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(locker)), LB_OK);
        waiting w = {q, refused ? as_user_without("noblock", "+blpop", NULL) : as_locker(), 0};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_for_it, &w), 0);
        redisContext *admin = lbt_redis_connect(&server);
        assert_non_null(admin);
        for (int tries = 0; tries < 2000; tries++) {
            redisReply *r = redisCommand(admin, "ZCARD {locks:fair}:queue");
            long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
            freeReplyObject(r);
            if (n == 1) break;
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
        int64_t fence = lb_lock_info_of(h).fence;
        assert_int_equal(lb_lock_release(h, lb_on_conn(locker)), LB_OK);
        pthread_join(t, NULL);
        assert_int_equal(w.rc, LB_OK);
        assert_int_equal(lb_lock_info_of(q).fence, fence + 1);
        assert_int_equal(lb_lock_release(q, lb_on_conn(w.c)), LB_OK);
        redisFree(admin);
        redisFree(w.c);
        lb_lock_free(h);
        lb_lock_free(q);
    }
}

/* A fair release that passes the baton (RPUSH on the lock's baton list) to a
 * wait blocked on it works as the restricted user: the wait gets the lock,
 * the release is not refused. */
static void test_a_baton_hand_off_works_as_the_restricted_user(void **state) {
    (void)state;
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.ttl_ms = 5000;
    lb_lock *h, *q;
    assert_int_equal(lb_lock_new(&h, "locks:baton", 11, &o), LB_OK);
    assert_int_equal(lb_lock_new(&q, "locks:baton", 11, &o), LB_OK);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(locker)), LB_OK);
    waiting w = {q, as_locker(), 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_it, &w), 0);
    redisContext *admin = lbt_redis_connect(&server);
    assert_non_null(admin);
    for (int tries = 0; tries < 2000; tries++) { /* the wait's mark: it blocks on the baton */
        redisReply *r = redisCommand(admin, "EXISTS {locks:baton}:bwait");
        long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
        freeReplyObject(r);
        if (n == 1) break;
        lbt_sleep_ms(1);
    }
    int rc = lb_lock_release(h, lb_on_conn(locker));
    if (rc != LB_OK) print_message("release: %s\n", lb_lock_info_of(h).errstr);
    assert_int_equal(rc, LB_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, LB_OK);
    assert_int_equal(lb_lock_release(q, lb_on_conn(w.c)), LB_OK);
    redisFree(admin);
    redisFree(w.c);
    lb_lock_free(h);
    lb_lock_free(q);
}

/* The ACL is enforced: a key outside the pattern is refused with a clear error,
 * nothing is written, and the handle holds nothing. */
static void test_a_key_outside_the_pattern_is_refused_cleanly(void **state) {
    (void)state;
    lb_lock *t;
    lb_legacy_lock *g;
    assert_int_equal(lb_lock_new(&t, "other:token", 11, NULL), LB_OK);
    assert_int_equal(lb_legacy_lock_new(&g, "other:legacy", 12, NULL), LB_OK);
    assert_int_equal(lb_lock_try_acquire(t, lb_on_conn(locker)), LB_EREDIS);
    assert_non_null(strstr(lb_lock_info_of(t).errstr, "NOPERM"));
    assert_false(lb_lock_info_of(t).held);
    assert_int_equal(lb_legacy_try_acquire(g, lb_on_conn(locker)), LB_EREDIS);
    assert_false(lb_legacy_info_of(g).held);
    redisContext *admin = lbt_redis_connect(&server);
    assert_non_null(admin);
    redisReply *r = redisCommand(admin, "EXISTS other:token other:legacy");
    assert_non_null(r);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    redisFree(admin);
    lb_lock_free(t);
    lb_legacy_lock_free(g);
}

/* A release whose PUBLISH the ACL refuses fails with the server's error and
 * changes nothing: the key still holds the token and the handle still holds
 * the lock (the script publishes before it deletes), so the error never
 * hides a lock already given up. */
static void test_a_release_refused_its_channel_deletes_nothing(void **state) {
    (void)state;
    redisContext *nochan = as_user_without("nochan", "&", "resetchannels");
    redisContext *admin = lbt_redis_connect(&server);
    assert_non_null(admin);
    lb_lock *t;
    assert_int_equal(lb_lock_new(&t, "locks:nochan", 12, NULL), LB_OK);
    assert_int_equal(lb_lock_try_acquire(t, lb_on_conn(nochan)), LB_OK);
    freeReplyObject(redisCommand(admin, "ACL LOG RESET"));
    assert_int_equal(lb_lock_release(t, lb_on_conn(nochan)), LB_EREDIS);
    assert_true(lb_lock_info_of(t).errstr[0] != '\0');
    assert_channel_refused(admin, "nochan", "{locks:nochan}:released");
    assert_true(lb_lock_info_of(t).held);
    redisReply *r = redisCommand(admin, "GET locks:nochan");
    assert_true(r && r->type == REDIS_REPLY_STRING);
    assert_string_equal(r->str, lb_lock_info_of(t).token);
    freeReplyObject(r);
    assert_int_equal(lb_lock_release(t, lb_on_conn(locker)), LB_OK);

    /* The same for a fair lock (its release publishes "released"). */
    lb_lock_options fo;
    lb_lock_options_init(&fo);
    fo.fair = 1;
    lb_lock *f;
    assert_int_equal(lb_lock_new(&f, "locks:nochan", 12, &fo), LB_OK);
    assert_int_equal(lb_lock_try_acquire(f, lb_on_conn(nochan)), LB_OK);
    assert_int_equal(lb_lock_release(f, lb_on_conn(nochan)), LB_EREDIS);
    assert_true(lb_lock_info_of(f).held);
    r = redisCommand(admin, "GET locks:nochan");
    assert_true(r && r->type == REDIS_REPLY_STRING);
    assert_string_equal(r->str, lb_lock_info_of(f).token);
    freeReplyObject(r);
    assert_int_equal(lb_lock_release(f, lb_on_conn(locker)), LB_OK);
    lb_lock_free(f);

    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.mode = LB_MODE_COMPAT;
    lb_mlock *m;
    assert_int_equal(lb_mlock_new(&m, "locks:nochan", 12, &o), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(m, lb_on_conn(nochan)), LB_OK);
    r = redisCommand(admin, "GET locks:nochan");
    assert_true(r && r->type == REDIS_REPLY_STRING);
    char value[256];
    snprintf(value, sizeof value, "%s", r->str);
    freeReplyObject(r);
    assert_int_equal(lb_mlock_release(m, lb_on_conn(nochan)), LB_EREDIS);
    r = redisCommand(admin, "GET locks:nochan");
    assert_true(r && r->type == REDIS_REPLY_STRING);
    assert_string_equal(r->str, value);
    freeReplyObject(r);
    assert_int_equal(lb_mlock_release(m, lb_on_conn(locker)), LB_OK);

    /* A mode change refused its announcement is not made either. */
    assert_int_equal(lb_mode_set(lb_on_conn(nochan), "locks:ns", 8, LB_MODE_COMPAT, NULL, NULL), LB_EREDIS);
    r = redisCommand(admin, "EXISTS {locks:ns}:lb-mode");
    assert_true(r && r->type == REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    lb_mlock_free(m);
    lb_lock_free(t);
    redisFree(admin);
    redisFree(nochan);
}

/* A fair release refused one of the commands its hand-off needs (the
 * message on the release channel, the fencing counter's INCR) fails before
 * it writes anything: the waiter keeps its queue place, no fencing number is
 * spent, and the lock stays ours. */
static void test_a_fair_release_refused_a_command_changes_nothing(void **state) {
    (void)state;
    static const struct { const char *user, *drop, *extra; } cases[] = {
        {"fairnochan", "&", "resetchannels"},
        {"fairnoincr", "+incr", NULL},
    };
    static const char waiter[] = "0123456789abcdef0123456789abcdef";
    redisContext *admin = lbt_redis_connect(&server);
    assert_non_null(admin);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redisContext *refused = as_user_without(cases[i].user, cases[i].drop, cases[i].extra);
        lb_lock_options o;
        lb_lock_options_init(&o);
        o.fair = 1;
        o.fencing = 1;
        lb_lock *h;
        assert_int_equal(lb_lock_new(&h, "locks:refused", 13, &o), LB_OK);
        assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(locker)), LB_OK);
        /* A waiter queued with no inbox: its grant goes on the release
         * channel, and a fencing number with it. */
        freeReplyObject(redisCommand(admin, "ZADD {locks:refused}:queue 1 %s", waiter));
        freeReplyObject(redisCommand(admin, "HSET {locks:refused}:fair %s %s", waiter, "4102444800000 30000"));
        assert_int_equal(lb_lock_release(h, lb_on_conn(refused)), LB_EREDIS);
        assert_true(lb_lock_info_of(h).held);
        redisReply *r = redisCommand(admin, "GET locks:refused");
        assert_true(r && r->type == REDIS_REPLY_STRING);
        assert_string_equal(r->str, lb_lock_info_of(h).token);
        freeReplyObject(r);
        r = redisCommand(admin, "ZSCORE {locks:refused}:queue %s", waiter);
        if (!r || r->type != REDIS_REPLY_STRING) fail_msg("%s: the waiter lost its place", cases[i].user);
        freeReplyObject(r);
        r = redisCommand(admin, "GET {locks:refused}:fence");
        assert_true(r && r->type == REDIS_REPLY_STRING);
        if (strtoll(r->str, NULL, 10) != lb_lock_info_of(h).fence)
            fail_msg("%s: a fencing number was spent", cases[i].user);
        freeReplyObject(r);
        freeReplyObject(redisCommand(admin, "DEL locks:refused {locks:refused}:queue {locks:refused}:fair"));
        lb_lock_free(h);
        redisFree(refused);
    }
    redisFree(admin);
}

/* A user set up before fair releases read the key and the baton's mark
 * with one MGET (an ACL without +mget) still takes and releases a fair
 * lock: the release reads them with GET instead. */
static void test_a_fair_release_works_for_a_user_refused_mget(void **state) {
    (void)state;
    redisContext *old = as_user_without("nomget", "+mget", NULL);
    redisContext *admin = lbt_redis_connect(&server);
    assert_non_null(admin);
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    assert_true(o.fair_baton_ms > 0); /* the release reads the mark */
    lb_lock *f;
    assert_int_equal(lb_lock_new(&f, "locks:nomget", 12, &o), LB_OK);
    assert_int_equal(lb_lock_try_acquire(f, lb_on_conn(old)), LB_OK);
    assert_int_equal(lb_lock_release(f, lb_on_conn(old)), LB_OK);
    assert_false(lb_lock_info_of(f).held);
    redisReply *r = redisCommand(admin, "EXISTS locks:nomget");
    assert_true(r && r->type == REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 0);
    freeReplyObject(r);
    lb_lock_free(f);
    redisFree(admin);
    redisFree(old);
}

static int setup(void **state) {
    (void)state;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    redisContext *admin = lbt_redis_connect(&server);
    if (!admin) return -1;
    size_t n = sizeof acl_rules / sizeof acl_rules[0];
    redisReply *r = redisCommandArgv(admin, (int)n, (const char **)acl_rules, NULL);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    redisFree(admin);
    if (!ok) return -1;
    locker = as_locker();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (locker) redisFree(locker);
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legacy_locks_work_as_the_restricted_user),
        cmocka_unit_test(test_token_locks_with_fencing_and_fair_mode_work_as_the_restricted_user),
        cmocka_unit_test(test_compat_and_modern_modes_work_as_the_restricted_user),
        cmocka_unit_test(test_fair_hand_offs_on_grant_lists_work_as_the_restricted_user),
        cmocka_unit_test(test_a_baton_hand_off_works_as_the_restricted_user),
        cmocka_unit_test(test_a_key_outside_the_pattern_is_refused_cleanly),
        cmocka_unit_test(test_a_release_refused_its_channel_deletes_nothing),
        cmocka_unit_test(test_a_fair_release_refused_a_command_changes_nothing),
        cmocka_unit_test(test_a_fair_release_works_for_a_user_refused_mget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
