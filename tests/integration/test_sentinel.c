/* The Sentinel driver against three real sentinels watching a primary and its
 * replica: the primary found through any sentinel and checked, bad names and
 * addresses refused, and a forced failover followed, with what it did to
 * locks taken across it counted and printed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "harness/proc.h"
#include "harness/redis_util.h"
#include "harness/sentinel.h"
#include "harness/sleep.h"
#include "lockbridge/lockbridge.h"

static lbt_sentinels env;

static int setup(void **state) {
    (void)state;
    return lbt_sentinels_start(&env);
}

static int teardown(void **state) {
    (void)state;
    lbt_sentinels_stop(&env);
    return 0;
}

static lb_sentinel *new_handle(void) {
    const char *addrs[] = {"127.0.0.1:1", env.addr[1], env.addr[2]}; /* the first is closed */
    lb_sentinel *s = NULL;
    assert_int_equal(lb_sentinel_new(&s, addrs, 3, LBT_SENTINEL_NAME, NULL), LB_OK);
    return s;
}

static lb_lock *new_lock(const char *key) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 60000;
    o.fencing = 1;
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, key, strlen(key), &o), LB_OK);
    return l;
}

/* The value at `key` on data server i, "" if absent. */
static const char *value_on(int i, const char *key) {
    redisContext *c = lbt_redis_connect(&env.data[i]);
    assert_non_null(c);
    const char *v = lbt_get(c, key);
    redisFree(c);
    return v;
}

static void assert_primary_is(lb_sentinel *s, int i) {
    char addr[64], want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", env.data[i].port);
    assert_true(lb_sentinel_primary_addr(s, addr, sizeof addr) > 0);
    assert_string_equal(addr, want);
}

static void test_the_primary_is_found_through_any_sentinel_and_locks_work(void **state) {
    (void)state;
    int p = lbt_sentinels_primary(&env);
    assert_true(p >= 0);
    lb_sentinel *s = new_handle();
    assert_primary_is(s, p);
    lb_lock *a = new_lock("s:basic"), *b = new_lock("s:basic");
    assert_int_equal(lb_lock_acquire(a, lb_on_sentinel(s), 1000), LB_OK);
    assert_string_equal(value_on(p, "s:basic"), lb_lock_info_of(a).token);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_sentinel(s)), LB_EBUSY);
    assert_int_equal(lb_lock_extend(a, lb_on_sentinel(s), 30000, LB_EXTEND_REPLACE), LB_OK);
    int64_t ttl;
    assert_int_equal(lb_lock_check(a, lb_on_sentinel(s), &ttl), LB_OK);
    assert_true(ttl > 0);
    assert_int_equal(lb_lock_release(a, lb_on_sentinel(s)), LB_OK);
    /* The connection serves the single-server calls as well. */
    redisContext *c = lb_sentinel_primary(s);
    assert_non_null(c);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(c)), LB_OK);
    lb_legacy_options lo;
    lb_legacy_options_init(&lo);
    lo.variant = LB_LEGACY_SCRIPTED;
    lb_legacy_lock *l = NULL;
    assert_int_equal(lb_legacy_lock_new(&l, "s:legacy", 8, &lo), LB_OK);
    assert_int_equal(lb_legacy_acquire(l, lb_on_sentinel(s), 1000), LB_OK);
    assert_int_equal(lb_legacy_extend(l, lb_on_sentinel(s), 20000), LB_OK);
    assert_int_equal(lb_legacy_release(l, lb_on_sentinel(s)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(l, lb_on_sentinel(s)), LB_OK);
    assert_int_equal(lb_legacy_release(l, lb_on_sentinel(s)), LB_OK);
    lb_legacy_lock_free(l);
    lb_lock_free(a);
    lb_lock_free(b);
    lb_sentinel_free(s);
}

/* A self-renewing lock behind Sentinel: the watchdog's own copy of the
 * sentinel target (the same sentinels, the closed one included, and primary
 * name) finds the primary and renews there, past four of the lock's TTLs. */
static void test_a_self_renewing_lock_renews_on_the_primary_behind_sentinel(void **state) {
    (void)state;
    int p = lbt_sentinels_primary(&env);
    assert_true(p >= 0);
    lb_sentinel *s = new_handle();
    lb_watchdog_options wo;
    lb_watchdog_options_init(&wo);
    wo.target = lb_on_sentinel(s);
    lb_watchdog *wd = NULL;
    assert_int_equal(lb_watchdog_new(&wd, &wo), LB_OK);
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 600;
    o.watchdog = wd;
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, LB_KEY("s:renewed"), &o), LB_OK);
    assert_int_equal(lb_lock_acquire(l, lb_on_sentinel(s), 1000), LB_OK);
    struct timespec ts = {2, 400 * 1000000};
    nanosleep(&ts, NULL);
    assert_int_equal(lb_lock_info_of(l).held, 1);
    assert_string_equal(value_on(p, "s:renewed"), lb_lock_info_of(l).token);
    assert_int_equal(lb_lock_release(l, lb_on_sentinel(s)), LB_OK);
    lb_lock_free(l);
    lb_watchdog_free(wd);
    lb_sentinel_free(s);
}

/* The waiter's connect callback, as an application behind Sentinel writes it:
 * it asks the sentinels where the primary is now (a handle of its own: the
 * callback runs on the waiter's thread) and connects there. */
static redisContext *connect_to_primary(void *ud) {
    const char *addrs[] = {env.addr[0], env.addr[1], env.addr[2]};
    char addr[64];
    lb_sentinel *s = NULL;
    redisContext *c = NULL;
    (void)ud;
    if (lb_sentinel_new(&s, addrs, 3, LBT_SENTINEL_NAME, NULL) == LB_OK &&
        lb_sentinel_primary_addr(s, addr, sizeof addr) > 0) {
        char *colon = strrchr(addr, ':');
        *colon = '\0';
        c = redisConnect(addr, atoi(colon + 1));
    }
    lb_sentinel_free(s);
    if (c && c->err) {
        redisFree(c);
        c = NULL;
    }
    return c;
}

typedef struct fair_wait {
    lb_lock *l;
    lb_sentinel *s; /* the waiting thread's own handle */
    lb_waiter *w;
    int rc;
} fair_wait;

static void *fair_waiter(void *arg) {
    fair_wait *f = arg;
    f->rc = lb_lock_acquire_wait(f->l, lb_on_sentinel(f->s), f->w, 10000);
    return NULL;
}

/* Every lock kind runs behind Sentinel: the mode-following lock (its namespace
 * read and its lock written on the primary), and a fair lock whose waiter,
 * queued on the primary, is handed the lock by the holder's release. */
/* The namespace calls and lb_inspect take a target: behind Sentinel they
 * reach the primary the sentinels name, found through them. */
static void test_the_namespace_and_inspect_calls_reach_the_primary(void **state) {
    (void)state;
    int p = lbt_sentinels_primary(&env);
    assert_true(p >= 0);
    lb_sentinel *s = new_handle();
    lb_target t = lb_on_sentinel(s);
    const char *ns = "s-calls";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, LB_KEY(ns)), LB_OK);
    lb_mode m;
    int found;
    assert_int_equal(lb_mode_set(t, LB_KEY(ns), LB_MODE_MODERN, NULL, NULL), LB_OK);
    assert_string_equal(value_on(p, k.mode), "modern");
    assert_int_equal(lb_mode_get(t, LB_KEY(ns), &m, &found), LB_OK);
    assert_int_equal(m, LB_MODE_MODERN);
    assert_int_equal(found, 1);
    lb_census_entry e, *es = NULL;
    memset(&e, 0, sizeof e);
    snprintf(e.id, sizeof e.id, "behind-sentinel");
    e.mode = LB_MODE_MODERN;
    lb_now now = lb_clock_now(NULL);
    size_t n = 0;
    assert_int_equal(lb_census_register(t, LB_KEY(ns), &e, &now), LB_OK);
    assert_int_equal(lb_census_list(t, LB_KEY(ns), &now, 60000, NULL, &es, &n), LB_OK);
    assert_int_equal(n, 1);
    assert_string_equal(es[0].id, "behind-sentinel");
    lb_census_free(NULL, es);
    lb_codec ms;
    lb_class c;
    assert_int_equal(lb_codec_parse(&ms, "ms"), LB_OK);
    assert_int_equal(lb_inspect(t, LB_KEY(k.mode), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_UNKNOWN); /* a mode name is no lock value */
    redisContext *pc = lbt_redis_connect(&env.data[p]);
    lbt_cmd_ok(pc, "DEL %s %s", k.mode, k.census);
    redisFree(pc);
    lb_sentinel_free(s);
}

static void test_the_mode_following_lock_and_a_fair_wait_run_behind_sentinel(void **state) {
    (void)state;
    int p = lbt_sentinels_primary(&env);
    assert_true(p >= 0);
    lb_sentinel *s = new_handle(), *s2 = new_handle();
    const char *ns = "s-ns";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    redisContext *pc = lbt_redis_connect(&env.data[p]);
    lbt_cmd_ok(pc, "SET %s modern", k.mode);
    lb_mlock_options mo;
    lb_mlock_options_init(&mo);
    mo.ns = ns;
    mo.follow = 1;
    mo.mode = LB_MODE_LEGACY;
    lb_mlock *m = NULL;
    assert_int_equal(lb_mlock_new(&m, "s:mlock", 7, &mo), LB_OK);
    assert_int_equal(lb_mlock_acquire(m, lb_on_sentinel(s), 2000), LB_OK);
    assert_int_equal(lb_mlock_info_of(m).held_mode, LB_MODE_MODERN);
    assert_string_equal(value_on(p, "s:mlock"), lb_mlock_info_of(m).value);
    assert_int_equal(lb_mlock_release(m, lb_on_sentinel(s)), LB_OK);
    assert_string_equal(value_on(p, "s:mlock"), "");
    lb_mlock_free(m);

    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.ttl_ms = 20000;
    lb_lock *a = NULL, *b = NULL;
    assert_int_equal(lb_lock_new(&a, "s:fair", 6, &o), LB_OK);
    assert_int_equal(lb_lock_new(&b, "s:fair", 6, &o), LB_OK);
    lb_waiter_options wo;
    lb_waiter_options_init(&wo);
    wo.connect = connect_to_primary;
    lb_waiter *w = NULL;
    assert_int_equal(lb_waiter_new(&w, &wo), LB_OK);
    assert_int_equal(lb_lock_try_acquire(a, lb_on_sentinel(s)), LB_OK);
    fair_wait f = {b, s2, w, 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fair_waiter, &f), 0);
    char queue[64];
    assert_true(lb_companion_key("s:fair", 6, "queue", queue, sizeof queue) > 0);
    int64_t until = lbt_mono_ms() + 5000;
    while (lbt_int(pc, "ZCARD %s", queue) == 0 && lbt_mono_ms() < until) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(lb_lock_release(a, lb_on_sentinel(s)), LB_OK);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(f.rc, LB_OK);
    assert_string_equal(value_on(p, "s:fair"), lb_lock_info_of(b).token);
    lb_waiter_stats ws;
    assert_int_equal(lb_waiter_stats_get(w, &ws), LB_OK);
    assert_int_equal(ws.handoffs, 1); /* handed over, not found by polling */
    assert_int_equal(lb_lock_release(b, lb_on_sentinel(s2)), LB_OK);
    lbt_cmd_ok(pc, "DEL %s %s", k.mode, k.census);
    redisFree(pc);
    lb_waiter_free(w);
    lb_lock_free(a);
    lb_lock_free(b);
    lb_sentinel_free(s);
    lb_sentinel_free(s2);
}

static void test_unknown_names_non_sentinels_and_bad_arguments_are_refused(void **state) {
    (void)state;
    lb_sentinel_options o;
    lb_sentinel_options_init(&o);
    o.retry_ms = 0;
    lb_sentinel *s = (lb_sentinel *)1;
    const char *addrs[] = {env.addr[0]};
    assert_int_equal(lb_sentinel_new(&s, addrs, 1, "nobody", &o), LB_EIO);
    assert_null(s);
    /* A data server is no sentinel: it answers SENTINEL with an error. */
    char data_addr[32];
    snprintf(data_addr, sizeof data_addr, "127.0.0.1:%d", env.data[0].port);
    const char *not_sentinel[] = {data_addr};
    assert_int_equal(lb_sentinel_new(&s, not_sentinel, 1, LBT_SENTINEL_NAME, &o), LB_EIO);
    assert_null(s);
    assert_int_equal(lb_sentinel_new(&s, addrs, 0, LBT_SENTINEL_NAME, &o), LB_EINVAL);
    assert_int_equal(lb_sentinel_new(&s, addrs, 1, "", &o), LB_EINVAL);
    assert_int_equal(lb_sentinel_new(&s, addrs, 1, NULL, &o), LB_EINVAL);
    const char *bad[] = {"127.0.0.1"};
    assert_int_equal(lb_sentinel_new(&s, bad, 1, LBT_SENTINEL_NAME, &o), LB_EINVAL);
    o.username = "u"; /* a user needs a password */
    assert_int_equal(lb_sentinel_new(&s, addrs, 1, LBT_SENTINEL_NAME, &o), LB_EINVAL);
    assert_int_equal(lb_sentinel_new(NULL, addrs, 1, LBT_SENTINEL_NAME, NULL), LB_EINVAL);
    lb_sentinel_free(NULL);
    assert_null(lb_sentinel_primary(NULL));
}

/* A client of the failover test: a handle and what happened to its locks. */
typedef struct follower {
    lb_sentinel *s;
    int subscribe;
    int taken, failed, released, lost, on_new, on_old;
    int64_t followed_ms;
} follower;

static void follower_init(follower *f, int subscribe) {
    memset(f, 0, sizeof *f);
    f->subscribe = subscribe;
    const char *addrs[] = {"127.0.0.1:1", env.addr[1], env.addr[2]}; /* the first is closed */
    lb_sentinel_options o;
    lb_sentinel_options_init(&o);
    o.subscribe = subscribe;
    assert_int_equal(lb_sentinel_new(&f->s, addrs, 3, LBT_SENTINEL_NAME, &o), LB_OK);
}

/* One lock taken and released on a fresh key; `promoted` says whether every
 * sentinel already names the new primary. */
static void follower_step(follower *f, int i, int promoted, const char *old_addr) {
    char key[40], addr[64];
    snprintf(key, sizeof key, "s:during:%d:%d", f->subscribe, i);
    lb_lock *l = new_lock(key);
    int rc = lb_lock_try_acquire(l, lb_on_sentinel(f->s));
    lb_sentinel_primary_addr(f->s, addr, sizeof addr);
    if (rc == LB_OK) {
        f->taken++;
        if (promoted) {
            if (strcmp(addr, old_addr) == 0) f->on_old++;
            else if (f->on_new++ == 0) f->followed_ms = lbt_mono_ms();
        }
        rc = lb_lock_release(l, lb_on_sentinel(f->s));
        if (rc == LB_OK) f->released++;
        else if (rc == LB_ELOST) f->lost++;
        else f->failed++;
    } else {
        f->failed++;
    }
    lb_lock_free(l);
}

static void follower_report(const follower *f, int64_t switched_ms) {
    lb_sentinel_stats st;
    lb_sentinel_stats_get(f->s, &st);
    print_message("sentinel failover, %s: %d locks taken during it, %d released, %d lost, "
                  "%d failed; after the sentinels switched: %d taken on the old primary "
                  "(split-brain), %d on the new, the first %lld ms after the switch was seen; "
                  "%llu resolves, %llu READONLY answers, %llu primary switches, "
                  "%llu announcements\n",
                  f->subscribe ? "announcements heard" : "rechecks only", f->taken, f->released,
                  f->lost, f->failed, f->on_old, f->on_new,
                  (long long)(f->on_new ? f->followed_ms - switched_ms : -1),
                  (unsigned long long)st.resolves, (unsigned long long)st.readonly,
                  (unsigned long long)st.switches, (unsigned long long)st.announced);
    assert_int_equal(f->on_new, 50);
    assert_true(st.switches >= 1);
    if (f->subscribe) assert_true(st.announced >= 1); /* heard from the subscription */
    else assert_int_equal(st.announced, 0);
}

/* SENTINEL FAILOVER promotes the replica without asking the primary to stop
 * first. Locks confirmed on the replica (WAIT) must survive it. Two clients,
 * one listening for the sentinels' announcements and one relying on rechecks
 * alone, take locks in turn while it runs; what happened to them is counted:
 * taken, failed, released, lost, and taken on the old primary after every
 * sentinel named the new one (split-brain: the old primary, up and not yet
 * demoted, discards them when it becomes a replica). */
static void test_a_forced_failover_is_followed_to_the_new_primary(void **state) {
    (void)state;
    enum { HELD = 20 };
    int p = lbt_sentinels_primary(&env), r = 1 - p;
    assert_true(p >= 0);
    follower f[2];
    follower_init(&f[0], 1);
    follower_init(&f[1], 0);
    lb_sentinel *s = f[0].s;
    lb_lock *held[HELD];
    for (int i = 0; i < HELD; i++) {
        char key[32];
        snprintf(key, sizeof key, "s:held:%d", i);
        held[i] = new_lock(key);
        assert_int_equal(lb_lock_try_acquire(held[i], lb_on_sentinel(s)), LB_OK);
    }
    /* Every write so far is on the replica before the failover starts
     * (waiting less than the handle's 1 s command timeout). */
    redisReply *w = redisCommand(lb_sentinel_primary(s), "WAIT 1 900");
    assert_non_null(w);
    assert_int_equal(w->integer, 1);
    freeReplyObject(w);

    redisContext *c = lbt_redis_connect(&env.sentinel[0]);
    assert_non_null(c);
    redisReply *fo = redisCommand(c, "SENTINEL FAILOVER %s", LBT_SENTINEL_NAME);
    assert_non_null(fo);
    if (fo->type == REDIS_REPLY_ERROR) fail_msg("SENTINEL FAILOVER: %s", fo->str);
    freeReplyObject(fo);
    redisFree(c);

    int promoted = 0;
    int64_t switched_ms = 0, limit = lbt_mono_ms() + 30000;
    char old_addr[64];
    snprintf(old_addr, sizeof old_addr, "127.0.0.1:%d", env.data[p].port);
    for (int i = 0; lbt_mono_ms() < limit && (f[0].on_new < 50 || f[1].on_new < 50); i++) {
        for (int k = 0; k < 2; k++)
            if (f[k].on_new < 50) follower_step(&f[k], i, promoted, old_addr);
        if (!promoted && i % 5 == 0 && lbt_sentinels_wait_primary(&env, r, 0) == 0) {
            promoted = 1;
            switched_ms = lbt_mono_ms();
        }
    }
    assert_true(promoted);
    for (int k = 0; k < 2; k++) follower_report(&f[k], switched_ms);
    assert_int_equal(lbt_sentinels_wait_primary(&env, r, 20000), 0);
    assert_primary_is(s, r);
    /* Locks confirmed on the replica before the failover are still ours. */
    for (int i = 0; i < HELD; i++) {
        assert_int_equal(lb_lock_release(held[i], lb_on_sentinel(s)), LB_OK);
        lb_lock_free(held[i]);
    }
    /* The handle's connection now serves the single-server calls on the new
     * primary. */
    lb_lock *late = new_lock("s:late");
    redisContext *now = lb_sentinel_primary(s);
    assert_non_null(now);
    assert_int_equal(lb_lock_try_acquire(late, lb_on_conn(now)), LB_OK);
    assert_string_equal(value_on(r, "s:late"), lb_lock_info_of(late).token);
    assert_int_equal(lb_lock_release(late, lb_on_conn(now)), LB_OK);
    lb_lock_free(late);
    lb_sentinel_free(f[0].s);
    lb_sentinel_free(f[1].s);
}

/* An operator demotes the primary by hand (REPLICAOF) while the sentinels still
 * name it: a write there is answered READONLY and did not run, the handle asks
 * the sentinels again, and the server they name is refused because it says it
 * is a replica. The acquire fails without writing anything anywhere. */
static void test_a_demoted_primary_is_refused_not_written(void **state) {
    (void)state;
    int p = lbt_sentinels_primary(&env), r = 1 - p;
    assert_true(p >= 0);
    const char *addrs[] = {env.addr[0]};
    lb_sentinel_options o;
    lb_sentinel_options_init(&o);
    o.retry_ms = 500;
    o.subscribe = 0;
    o.recheck_ms = 60000;
    lb_sentinel *s = NULL;
    assert_int_equal(lb_sentinel_new(&s, addrs, 1, LBT_SENTINEL_NAME, &o), LB_OK);
    /* Make the replica a primary of its own first, so the demoted one has
     * something to follow, then demote the primary. */
    redisContext *rc_ctx = lbt_redis_connect(&env.data[r]);
    redisContext *pc = lbt_redis_connect(&env.data[p]);
    assert_non_null(rc_ctx);
    assert_non_null(pc);
    redisReply *x = redisCommand(rc_ctx, "REPLICAOF NO ONE");
    assert_non_null(x);
    freeReplyObject(x);
    x = redisCommand(pc, "REPLICAOF 127.0.0.1 %d", env.data[r].port);
    assert_non_null(x);
    assert_int_equal(x->type, REDIS_REPLY_STATUS);
    freeReplyObject(x);
    lb_lock *l = new_lock("s:demoted");
    int rc = lb_lock_try_acquire(l, lb_on_sentinel(s));
    lb_sentinel_stats st;
    lb_sentinel_stats_get(s, &st);
    char err[160];
    snprintf(err, sizeof err, "%s", lb_lock_info_of(l).errstr);
    /* Put things back as the sentinels expect them before judging. */
    x = redisCommand(pc, "REPLICAOF NO ONE");
    if (x) freeReplyObject(x);
    x = redisCommand(rc_ctx, "REPLICAOF 127.0.0.1 %d", env.data[p].port);
    if (x) freeReplyObject(x);
    redisFree(rc_ctx);
    redisFree(pc);
    print_message("demoted primary: %s (%s); %llu READONLY answers, %llu resolves\n",
                  lb_err_name(rc), err, (unsigned long long)st.readonly,
                  (unsigned long long)st.resolves);
    assert_int_equal(rc, LB_EREDIS); /* the READONLY answer says why */
    assert_non_null(strstr(err, "READONLY"));
    assert_true(st.readonly >= 1);
    assert_true(st.resolves >= 2);
    assert_string_equal(value_on(p, "s:demoted"), "");
    assert_string_equal(value_on(r, "s:demoted"), "");
    lb_lock_free(l);
    lb_sentinel_free(s);
}

/* ---- the tool behind Sentinel ---------------------------------------------------- */
static lbt_proc proc;

/* `lockbridge --sentinel ... --master NAME` finds the primary through the
 * sentinels (the first one given is closed) and holds a lock there, in each
 * mode; the options are checked. */
static void test_the_tool_finds_the_primary_through_the_sentinels(void **state) {
    (void)state;
    if (lbt_tool_init("test_sentinel") != 0) skip();
    int p = lbt_sentinels_primary(&env);
    static const char *const modes[] = {"legacy", "compat", "modern"};
    for (size_t m = 0; m < 3; m++) {
        const char *args[] = {"--sentinel", "127.0.0.1:1", "--sentinel", env.addr[1],
                              "--master", LBT_SENTINEL_NAME, "hold", "tool:behind-sentinel",
                              "--mode", modes[m], "--hold-ms", "0", "--json", NULL};
        int rc = lbt_run(&proc, args);
        if (rc != 0) fail_msg("%s: exit %d: %s %s", modes[m], rc, proc.out, proc.err);
        assert_non_null(strstr(proc.out, "\"event\":\"acquired\""));
        assert_non_null(strstr(proc.out, "\"event\":\"released\""));
        assert_string_equal(value_on(p, "tool:behind-sentinel"), "");
    }
    static const struct {
        const char *args[10];
        int exit;
        const char *says;
    } bad[] = {
        {{"--sentinel", "127.0.0.1:1", "inspect", "k", NULL}, 1, "--master"},
        {{"--master", LBT_SENTINEL_NAME, "inspect", "k", NULL}, 1, "--sentinel"},
        {{"-p", "6379", "--sentinel", "127.0.0.1:1", "--master", "x", "inspect", "k"}, 1, "-p"},
        {{"--sentinel", "127.0.0.1:1", "--master", LBT_SENTINEL_NAME, "inspect", "k", NULL},
         4, "no primary"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(lbt_run(&proc, bad[i].args), bad[i].exit);
        if (!strstr(proc.err, bad[i].says)) fail_msg("case %zu: %s", i, proc.err);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_primary_is_found_through_any_sentinel_and_locks_work),
        cmocka_unit_test(test_a_self_renewing_lock_renews_on_the_primary_behind_sentinel),
        cmocka_unit_test(test_the_mode_following_lock_and_a_fair_wait_run_behind_sentinel),
        cmocka_unit_test(test_the_namespace_and_inspect_calls_reach_the_primary),
        cmocka_unit_test(test_unknown_names_non_sentinels_and_bad_arguments_are_refused),
        cmocka_unit_test(test_the_tool_finds_the_primary_through_the_sentinels),
        cmocka_unit_test(test_a_forced_failover_is_followed_to_the_new_primary),
        /* Last: it leaves the sentinels to sort out a hand-made demotion. */
        cmocka_unit_test(test_a_demoted_primary_is_refused_not_written),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
