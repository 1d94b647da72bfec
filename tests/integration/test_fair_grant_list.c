/* Fair waits on one connection, blocked on a grant list, against a real
 * redis-server; and what a grant, a free key or an error does to a queue
 * place. */
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
#include "harness/wait_fixture.h"
#include "lockbridge/lockbridge.h"

/* A fair wait without a waiter, on one connection, blocks on its own grant
 * list: the release pushes the grant there and the wait returns on it, with
 * the attempt that queued it and one BLPOP, and no message published. (With
 * a back-off of 5 s and a wait of 4 s it could learn of the hand-off no
 * other way before its deadline.) */
static void test_a_fair_wait_on_one_connection_is_handed_the_lock_on_its_grant_list(
    void **state) {
    (void)state;
    lb_lock *h = lbt_new_lock("w:list", 1, 2, 100), *q = lbt_new_lock("w:list", 1, 5000, 5000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_start_blocked_on_list(&j, q, 4000, "{w:list}:queue", 1);
    uint64_t before = lb_lock_info_of(q).commands;
    long long pubs = lbt_calls_of("publish");
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_true(lb_lock_info_of(q).held);
    assert_string_equal(lbt_get(lbt_conn, "w:list"), lb_lock_info_of(q).token);
    /* The baton's SET NX, mark and BLPOP (nobody released during its
     * block), then the attempt that queued it and the BLPOP on its list. */
    assert_int_equal(before, 5);
    assert_int_equal(lb_lock_info_of(q).commands, 5);
    assert_int_equal(lbt_calls_of("publish"), pubs);
    lbt_job_end(&j);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:list}:queue"), 0);
    lb_lock_free(h);
    lb_lock_free(q);
}

/* End to end: the successor's grant list holds a string by the time its
 * predecessor releases; the hand-off still reaches it, through the attempt
 * after its BLPOP slice ends empty. Its slices last a third of a 6 s lease,
 * so the string is not there when it blocks again. */
static void test_a_waiter_whose_grant_list_is_spoiled_still_gets_its_hand_off(void **state) {
    (void)state;
    lb_lock *h = lbt_new_lock("w:spoil", 1, 2, 100), *q[2];
    lbt_job j[2];
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    for (int i = 0; i < 2; i++) {
        q[i] = lbt_new_lock("w:spoil", 1, 3000, 3000);
        lbt_start_blocked_on_list(&j[i], q[i], 20000, "{w:spoil}:queue", i + 1);
    }
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j[0]), LB_OK); /* q[0] knows q[1] queued behind it */
    redisReply *r = redisCommand(lbt_conn, "ZRANGE {w:spoil}:queue 0 0");
    assert_true(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    char succ[LB_TOKEN_LEN + 1];
    snprintf(succ, sizeof succ, "%s", r->element[0]->str);
    freeReplyObject(r);
    lbt_cmd_ok(lbt_conn, "SET {w:spoil}:grant:%s alien", succ);
    assert_int_equal(lb_lock_release(q[0], lb_on_conn(j[0].c)), LB_OK);
    assert_int_equal(lbt_job_join(&j[1]), LB_OK);
    assert_string_equal(lbt_get(lbt_conn, "w:spoil"), succ);
    assert_int_equal(lb_lock_release(q[1], lb_on_conn(j[1].c)), LB_OK);
    for (int i = 0; i < 2; i++) {
        lbt_job_end(&j[i]);
        lb_lock_free(q[i]);
    }
    lbt_del_matching(lbt_conn, "*w:spoil*");
    lb_lock_free(h);
}

/* Waiters on grant lists are served in arrival order, and a holder that was
 * granted the lock knows who queued behind it: its release pushes the next
 * grant inside the script (one command). The first release, by a holder that
 * took a free lock, learns the head from the script and pushes the grant
 * itself (LPUSH, PEXPIRE). */
static void test_grant_list_waiters_are_served_in_order_and_name_their_successor(void **state) {
    (void)state;
    enum { N = 3 };
    lb_lock *h = lbt_new_lock("w:order", 1, 2, 100), *q[N];
    lbt_job j[N];
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    for (int i = 0; i < N; i++) {
        q[i] = lbt_new_lock("w:order", 1, 2000, 2000);
        lbt_start_blocked_on_list(&j[i], q[i], 20000, "{w:order}:queue", i + 1);
    }
    uint64_t c0 = lb_lock_info_of(h).commands;
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    uint64_t first_release = lb_lock_info_of(h).commands - c0;
    uint64_t later_release[N - 1];
    for (int i = 0; i < N; i++) {
        assert_int_equal(lbt_job_join(&j[i]), LB_OK);
        assert_string_equal(lbt_get(lbt_conn, "w:order"), lb_lock_info_of(q[i]).token);
        for (int k = i + 1; k < N; k++) assert_false(lbt_job_done(&j[k]));
        uint64_t c = lb_lock_info_of(q[i]).commands;
        assert_int_equal(lb_lock_release(q[i], lb_on_conn(j[i].c)), LB_OK);
        if (i < N - 1) later_release[i] = lb_lock_info_of(q[i]).commands - c;
        lbt_job_end(&j[i]);
        lb_lock_free(q[i]);
    }
    /* h took the lock and named no successor: its release pushes the grant
     * (one script with the list's TTL); each later one names it. */
    assert_int_equal(first_release, 2);
    for (int i = 0; i < N - 1; i++) assert_int_equal(later_release[i], 1);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:order"), 0);
    lb_lock_free(h);
}

/* A connection with a read timeout (redisSetTimeout) keeps working through a
 * long fair wait: with 400 ms, its blocks are cut to 100 ms (half the timeout
 * less the 100 ms by which Redis may end a BLPOP late); with 100 ms, too short
 * to block in, the wait polls. Each wait ends as a timeout, out of the queue,
 * the connection still usable; then it is handed the lock. */
static void test_a_grant_list_wait_stays_within_the_connections_read_timeout(void **state) {
    (void)state;
    static const struct { long usec; int blocks; } cases[] = {{400000, 1}, {100000, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_lock *h = lbt_new_lock("w:rcv", 1, 2, 100), *q = lbt_new_lock("w:rcv", 1, 2000, 2000);
        assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
        redisContext *c = lbt_redis_connect(&lbt_server);
        assert_non_null(c);
        lbt_checked(c);
        struct timeval tv = {0, cases[i].usec};
        assert_int_equal(redisSetTimeout(c, tv), REDIS_OK);
        long long blpops = lbt_calls_of("blpop");
        assert_int_equal(lb_lock_acquire(q, lb_on_conn(c), 700), LB_ETIMEDOUT);
        assert_int_equal(c->err, 0);
        long long blocked = lbt_calls_of("blpop") - blpops;
        if (cases[i].blocks) assert_true(blocked >= 3);
        else assert_int_equal(blocked, 0);
        assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:rcv}:queue"), 0);
        assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
        assert_int_equal(lb_lock_acquire(q, lb_on_conn(c), 700), LB_OK);
        assert_int_equal(lb_lock_release(q, lb_on_conn(c)), LB_OK);
        redisFree(c);
        lb_lock_free(h);
        lb_lock_free(q);
    }
}

/* A holder outside the queue hands nothing off, and its release publishes on
 * a channel a grant-list wait does not hear: while such a holder holds, the
 * wait polls (here every 20 ms) rather than blocking for its refresh (20 s
 * with a lease of 60 s), so it takes the lock soon after that holder lets go,
 * not at the end of its 10 s wait. */
static void test_a_grant_list_wait_polls_while_a_client_outside_the_queue_holds(void **state) {
    (void)state;
    lb_lock *out = lbt_new_lock("w:foreign", 0, 20, 20);
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fair_lease_ms = 60000;
    o.backoff_min_ms = o.backoff_max_ms = 20;
    lb_lock *q = lbt_lock_with("w:foreign", &o);
    assert_int_equal(lb_lock_try_acquire(out, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_job_start(&j, q, NULL, 10000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:foreign}:queue") == 1);
    lbt_sleep_ms(100);
    int64_t released = lbt_mono_ms();
    assert_int_equal(lb_lock_release(out, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    int64_t took = lbt_mono_ms() - released;
    lbt_job_end(&j);
    lb_lock_free(out);
    lb_lock_free(q);
    assert_true(took < 5000);
}

/* A release that opens a window for an outsider wakes the head blocked on
 * its grant list even when it did not name that list (it took the lock free:
 * no grant told it its successor): the script returns the wake-up and the
 * releaser pushes it, so the head attempts at the window's end (200 ms), not
 * at its lease refresh (10 s here). */
static void test_a_window_wakes_a_grant_list_head_the_release_did_not_name(void **state) {
    (void)state;
    lb_lock_options o = lbt_yielding(1, 200);
    o.fair_lease_ms = 30000;
    lb_lock *h = lbt_lock_with("w:window", &o), *q = lbt_lock_with("w:window", &o),
            *t = lbt_lock_with("w:window", &o);
    /* A try refused (by a plain SET) is an outsider seen: the queue's state
     * begins; h then takes the free lock as a fair holder the state notes,
     * so q, queued behind it, blocks on its list rather than polling. */
    lbt_cmd_ok(lbt_conn, "SET w:window someone PX 30000");
    assert_int_equal(lb_lock_try_acquire(t, lb_on_conn(lbt_conn)), LB_EBUSY);
    lbt_cmd_ok(lbt_conn, "DEL w:window");
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_start_blocked_on_list(&j, q, 20000, "{w:window}:queue", 1);
    /* A hand-off streak, as if one had gone before: the release is due to yield. */
    lbt_cmd_ok(lbt_conn, "HSET {w:window}:fair ~streak 1");
    int64_t released = lbt_mono_ms();
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_true(lbt_int(lbt_conn, "HEXISTS {w:window}:fair ~open") == 1); /* the window opened */
    assert_int_equal(lbt_job_join(&j), LB_OK);
    int64_t took = lbt_mono_ms() - released;
    assert_true(lb_lock_info_of(q).held);
    assert_int_equal(lb_lock_release(q, lb_on_conn(j.c)), LB_OK);
    lbt_job_end(&j);
    lb_lock_free(h);
    lb_lock_free(q);
    lb_lock_free(t);
    assert_true(took < 3000);
}

/* Steps m over lbt_conn as a client that stops (dies) after `sends` commands. */
static void drive_for(lb_machine *m, int sends) {
    lb_now now = lb_clock_now(NULL);
    int rc = lb_machine_step(m, NULL, &now);
    for (int i = 0; rc == LB_STEP_SEND && i < sends; i++) {
        const lb_cmd *cmd = lb_machine_command(m);
        const char *argv[LB_CMD_MAX_ARGS];
        for (int a = 0; a < cmd->argc; a++) argv[a] = cmd->argv[a];
        redisReply *r = redisCommandArgv(lbt_conn, cmd->argc, argv, cmd->argvlen);
        assert_non_null(r);
        now = lb_clock_now(NULL);
        rc = lb_machine_step(m, r, &now);
        freeReplyObject(r);
    }
}

/* A release that hands the lock to a grant-list waiter it did not name
 * pushes the grant itself. Should the releaser stop right after that push,
 * the list must still lapse, and with the grantee's lock (its TTL, not the
 * releaser's): a grantee gone for good leaves nothing behind. */
static void test_a_grant_the_releaser_pushes_lapses_with_the_grantees_lock(void **state) {
    (void)state;
    static const char g[] = "0123456789abcdef0123456789abcdef";
    lb_lock *h = lbt_new_lock("w:push", 1, 2, 100);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    /* A waiter queued on its grant list (lease far off, TTL 5 s), not
     * blocked on it now: its grant stays in the list. */
    assert_true(lbt_int(lbt_conn, "ZADD {w:push}:queue 1 %s", g) == 1);
    assert_true(lbt_int(lbt_conn, "HSET {w:push}:fair %s %s", g, "4102444800000 5000 *") == 1);
    drive_for(lb_lock_machine(h, LB_OP_RELEASE, 0), 2); /* the script, then the push */
    assert_false(lb_lock_info_of(h).held);
    assert_string_equal(lbt_get(lbt_conn, "w:push"), g);
    char list[64];
    snprintf(list, sizeof list, "{w:push}:grant:%s", g);
    assert_true(lbt_int(lbt_conn, "LLEN %s", list) == 1);
    long long ttl = lbt_int(lbt_conn, "PTTL %s", list);
    assert_true(ttl > 0 && ttl <= 5000);
    lbt_int(lbt_conn, "DEL w:push %s {w:push}:queue {w:push}:fair", list);
    lb_lock_free(h);
}

/* HGET hash field into out (cap bytes); "" when absent. */
static void hget(const char *hash, const char *field, char *out, size_t cap) {
    redisReply *r = redisCommand(lbt_conn, "HGET %s %s", hash, field);
    assert_non_null(r);
    assert_true(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

/* A fair lock whose queued, listening waiter sleeps long (a third of a 60 s
 * lease): nothing but a message or an event makes it attempt during a test. */
static lb_lock *sleepy_lock(const char *key) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 30000;
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 2000;
    o.fair_lease_ms = 60000;
    return lbt_lock_with(key, &o);
}

/* Has h take the key, starts q's wait on w behind it, and returns once q is
 * queued naming its inbox and asleep in its long queued sleep; its token
 * into token[33]. A first, uncontended wait subscribes the inbox (and not
 * the key's channel, so that the wait here subscribes it afresh: queued,
 * subscribed, attempted again, asleep). */
static void queue_asleep(lbt_job *j, lb_lock *h, lb_lock *q, lb_waiter *w, const char *queue,
                         const char *state, char *token) {
    assert_int_equal(lb_lock_acquire_wait(q, lb_on_conn(lbt_short), w, 1000), LB_OK);
    assert_int_equal(lb_lock_release(q, lb_on_conn(lbt_conn)), LB_OK);
    LBT_EVENTUALLY(lbt_stats_of(w).inbox == 1);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    uint64_t sleeps = lbt_stats_of(w).sleeps;
    lbt_job_start(j, q, w, 30000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD %s", queue) == 1 && lbt_stats_of(w).sleeps == sleeps + 2 &&
               lbt_stats_of(w).blocked == 1);
    char tokens[1][33], entry[256];
    assert_int_equal(lbt_queue_tokens(queue, tokens, 1), 1);
    memcpy(token, tokens[0], 33);
    hget(state, token, entry, sizeof entry);
    assert_non_null(strstr(entry, " lb-inbox:"));
}

/* When the key is freed without a hand-off (a DEL, an expiry), a queued
 * waiter that named its inbox keeps its place: a try of another client finds
 * the key kept for that waiter and does not take it. */
static void test_a_waiter_that_named_its_inbox_keeps_its_place_when_the_key_is_freed(
    void **state) {
    (void)state;
    lb_waiter *w = lbt_new_waiter();
    lb_lock *h = lbt_new_lock("w:freed", 1, 2, 100), *t = lbt_new_lock("w:freed", 1, 2, 100);
    lb_lock *q = sleepy_lock("w:freed");
    lbt_job j;
    char token[33];
    queue_asleep(&j, h, q, w, "{w:freed}:queue", "{w:freed}:fair", token);
    lbt_cmd_ok(lbt_conn, "DEL w:freed"); /* as a legacy release would: nothing handed */
    int tried = lb_lock_try_acquire(t, lb_on_conn(lbt_conn));
    int still = lbt_queued("{w:freed}:queue", token);
    /* The thread ends before any assertion. A "released" message (what no
     * DEL sends) wakes the waiter, which takes the free key as the head. */
    if (tried == LB_OK) assert_int_equal(lb_lock_release(t, lb_on_conn(lbt_conn)), LB_OK);
    else lbt_cmd_ok(lbt_conn, "PUBLISH {w:freed}:released released");
    int rc = lbt_job_join(&j);
    lbt_job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(t);
    lb_lock_free(q);
    assert_int_equal(tried, LB_EBUSY);
    assert_true(still);
    assert_int_equal(rc, LB_OK);
}

/* A hand-off the new holder learns of at its next attempt (no waiter here,
 * so no message) started the key's TTL at the release: the lease the handle
 * reports ends no later than the key does, however long after the release
 * that attempt came. */
static void test_a_hand_off_found_by_an_attempt_ends_its_lease_no_later_than_the_key(
    void **state) {
    (void)state;
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = 5000;
    o.fair = 1;
    o.backoff_min_ms = o.backoff_max_ms = 1000;
    o.fair_lease_ms = 10000;
    lb_lock *h = lbt_new_lock("w:late", 1, 2, 100);
    lb_lock *q = lbt_lock_with("w:late", &o);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_job_start(&j, q, NULL, 20000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:late}:queue") == 1);
    char tokens[1][33], first[256], now[256];
    assert_int_equal(lbt_queue_tokens("{w:late}:queue", tokens, 1), 1);
    hget("{w:late}:fair", tokens[0], first, sizeof first);
    /* An attempt refreshed the lease just now: the next is a step (1 s) away. */
    LBT_EVENTUALLY((hget("{w:late}:fair", tokens[0], now, sizeof now), strcmp(now, first) != 0));
    int released = lb_lock_release(h, lb_on_conn(lbt_conn));
    long long pttl = lbt_int(lbt_conn, "PTTL w:late");
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t key_end_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + (pttl + 1) * 1000000;
    int rc = lbt_job_join(&j);
    int64_t deadline = lb_lock_info_of(q).deadline_ns;
    lbt_job_end(&j);
    lb_lock_free(h);
    lb_lock_free(q);
    assert_int_equal(released, LB_OK);
    assert_true(pttl > 0 && pttl <= 5000);
    assert_int_equal(rc, LB_OK);
    if (deadline > key_end_ns)
        fail_msg("the lease ends %lld ms after the key", (long long)(deadline - key_end_ns) / 1000000);
}

/* A hand-off message read late, naming our token at an earlier place in the
 * queue (a grant that lapsed before the waiter heard of it, the token having
 * queued again since), grants nothing: the waiter checks with the server and
 * waits on while the key is another's; the grant for its current place, from
 * the holder's release, is the one it takes. */
static void test_a_late_hand_off_for_an_earlier_queue_place_grants_nothing(void **state) {
    (void)state;
    lb_waiter *w = lbt_new_waiter();
    lb_lock *h = lbt_new_lock("w:stale", 1, 2, 100), *q = sleepy_lock("w:stale");
    lbt_job j;
    char token[33], entry[256], holder[33];
    queue_asleep(&j, h, q, w, "{w:stale}:queue", "{w:stale}:fair", token);
    snprintf(holder, sizeof holder, "%s", lb_lock_info_of(h).token);
    hget("{w:stale}:fair", token, entry, sizeof entry);
    redisReply *r = redisCommand(lbt_conn, "ZSCORE {w:stale}:queue %s", token);
    assert_true(r && r->type == REDIS_REPLY_STRING);
    long long place = atoll(r->str);
    freeReplyObject(r);
    assert_true(place > 1);
    /* The release of that earlier grant published this on the inbox. The
     * wait either returns, or checks with an attempt and sleeps again. */
    char late[64];
    snprintf(late, sizeof late, "%s %lld", token, place - 1);
    uint64_t sleeps = lbt_stats_of(w).sleeps;
    lbt_cmd_ok(lbt_conn, "PUBLISH %s %s", strstr(entry, " lb-inbox:") + 1, late);
    LBT_EVENTUALLY(lbt_job_done(&j) || (lbt_stats_of(w).sleeps > sleeps && lbt_stats_of(w).blocked == 1));
    int early = lbt_job_done(&j);
    char during[33];
    snprintf(during, sizeof during, "%s", lbt_get(lbt_conn, "w:stale"));
    int released = lb_lock_release(h, lb_on_conn(lbt_conn));
    int rc = lbt_job_join(&j);
    char after[33];
    snprintf(after, sizeof after, "%s", lbt_get(lbt_conn, "w:stale"));
    lbt_job_end(&j);
    lb_waiter_free(w);
    lb_lock_free(h);
    lb_lock_free(q);
    assert_false(early); /* it did not take the lock while h held it */
    assert_string_equal(during, holder);
    assert_int_equal(released, LB_OK);
    assert_int_equal(rc, LB_OK);
    assert_string_equal(after, token);
}

/* A wait that ends with an error (here the key turned into a hash while the
 * waiter was queued) leaves the queue: a release would otherwise hand the
 * lock to a token nobody uses, and every waiter would wait out its TTL. The
 * error is still what the wait reports. */
static void test_a_wait_that_fails_with_an_error_leaves_the_queue(void **state) {
    (void)state;
    lb_lock *h = lbt_new_lock("w:err", 1, 2, 100), *q = lbt_new_lock("w:err", 1, 50, 50);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_job_start(&j, q, NULL, 20000);
    LBT_EVENTUALLY(lbt_int(lbt_conn, "ZCARD {w:err}:queue") == 1);
    char tokens[1][33];
    assert_int_equal(lbt_queue_tokens("{w:err}:queue", tokens, 1), 1);
    lbt_cmd_ok(lbt_conn, "MULTI");
    lbt_cmd_ok(lbt_conn, "DEL w:err");
    lbt_cmd_ok(lbt_conn, "HSET w:err f v");
    lbt_cmd_ok(lbt_conn, "EXEC");
    int rc = lbt_job_join(&j);
    int still = lbt_queued("{w:err}:queue", tokens[0]);
    char why[256];
    snprintf(why, sizeof why, "%s", lb_lock_info_of(q).errstr);
    lbt_job_end(&j);
    lbt_cmd_ok(lbt_conn, "DEL w:err");
    lb_lock_free(h);
    lb_lock_free(q);
    assert_int_equal(rc, LB_EWRONGTYPE);
    assert_non_null(strstr(why, "WRONGTYPE"));
    assert_false(still);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_fair_wait_on_one_connection_is_handed_the_lock_on_its_grant_list),
        cmocka_unit_test(test_a_waiter_whose_grant_list_is_spoiled_still_gets_its_hand_off),
        cmocka_unit_test(test_grant_list_waiters_are_served_in_order_and_name_their_successor),
        cmocka_unit_test(test_a_grant_list_wait_stays_within_the_connections_read_timeout),
        cmocka_unit_test(test_a_grant_list_wait_polls_while_a_client_outside_the_queue_holds),
        cmocka_unit_test(test_a_waiter_that_named_its_inbox_keeps_its_place_when_the_key_is_freed),
        cmocka_unit_test(test_a_hand_off_found_by_an_attempt_ends_its_lease_no_later_than_the_key),
        cmocka_unit_test(test_a_late_hand_off_for_an_earlier_queue_place_grants_nothing),
        cmocka_unit_test(test_a_wait_that_fails_with_an_error_leaves_the_queue),
        cmocka_unit_test(test_a_window_wakes_a_grant_list_head_the_release_did_not_name),
        cmocka_unit_test(test_a_grant_the_releaser_pushes_lapses_with_the_grantees_lock),
    };
    return cmocka_run_group_tests(tests, lbt_wait_setup, lbt_wait_teardown);
}
