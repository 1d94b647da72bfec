/* Fair mode's step machines fed hand-built replies, without a server: the
 * commands they emit in each mode, every reply the scripts can give, and
 * malformed, error and missing replies, which never grant and never drop a
 * lock we may hold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lockbridge/lockbridge.h"
#include "modern/internal.h"
#include "unit/lbt_fake.h"

enum { X_NONE, X_INT, X_STR, X_NIL, X_ERR, X_ARR };

typedef struct rep {
    int kind;
    long long i;
    const char *s;
    int n;          /* X_ARR: elements, each an integer unless `strings` */
    long long e[4];
    int strings;
} rep;

typedef struct built {
    redisReply top, elems[4];
    redisReply *ptrs[4];
} built;

static const redisReply *build(built *b, const rep *d) {
    if (d->kind == X_NONE) return NULL;
    memset(b, 0, sizeof *b);
    redisReply *r = &b->top;
    switch (d->kind) {
    case X_INT: r->type = REDIS_REPLY_INTEGER; r->integer = d->i; break;
    case X_STR: r->type = REDIS_REPLY_STRING; break;
    case X_NIL: r->type = REDIS_REPLY_NIL; break;
    case X_ERR: r->type = REDIS_REPLY_ERROR; break;
    default: r->type = REDIS_REPLY_ARRAY; break;
    }
    if (d->s) {
        r->str = (char *)d->s;
        r->len = strlen(d->s);
    }
    if (d->kind == X_ARR) {
        for (int i = 0; i < d->n; i++) {
            b->elems[i].type = d->strings ? REDIS_REPLY_STRING : REDIS_REPLY_INTEGER;
            b->elems[i].integer = d->e[i];
            b->elems[i].str = (char *)"1";
            b->elems[i].len = 1;
            b->ptrs[i] = &b->elems[i];
        }
        r->elements = (size_t)d->n;
        r->element = b->ptrs;
    }
    return r;
}

static lbt_fake_time t0 = {INT64_C(1700000000000000), INT64_C(5000000000000)};

static lb_lock *fair_lock(int fencing) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.fencing = fencing;
    o.ttl_ms = 30000;
    o.backoff_max_ms = 100;
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, "job:7", 5, &o), LB_OK);
    return l;
}

static const lb_now *now(void) {
    static lb_now n;
    n.wall_us = t0.wall_us;
    n.mono_ns = t0.mono_ns;
    return &n;
}

/* Runs one operation: start, then one reply. */
static int run_one(lb_machine *m, const rep *reply) {
    built b;
    assert_int_equal(lb_machine_step(m, NULL, now()), LB_STEP_SEND);
    return lb_machine_step(m, build(&b, reply), now());
}

static void arg_is(const lb_cmd *c, int i, const char *want) {
    assert_true(i < c->argc);
    assert_int_equal(c->argvlen[i], strlen(want));
    assert_memory_equal(c->argv[i], want, strlen(want));
}

static void test_each_mode_sends_one_script_over_lock_queue_and_state(void **state) {
    (void)state;
    static const struct { int mode, fencing; const char *numkeys, *word; } cases[] = {
        {LB__FAIR_TRY, 0, "3", "try"},
        {LB__FAIR_WAIT, 0, "3", "wait"},
        {LB__FAIR_LEAVE, 0, "3", "leave"},
        {LB__FAIR_WAIT, 1, "4", "wait"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_lock *l = fair_lock(cases[i].fencing);
        if (cases[i].mode != LB__FAIR_TRY) assert_int_equal(lb__fair_begin_wait(l), LB_OK);
        lb__fair_set_mode(l, cases[i].mode);
        lb_machine *m = lb_lock_machine(l, LB_OP_TRY_ACQUIRE, 0);
        assert_int_equal(lb_machine_step(m, NULL, now()), LB_STEP_SEND);
        const lb_cmd *c = lb_machine_command(m);
        arg_is(c, 0, "EVALSHA");
        arg_is(c, 1, lb__script_modern_fair_acquire.sha1);
        arg_is(c, 2, cases[i].numkeys);
        arg_is(c, 3, "job:7");
        arg_is(c, 4, "{job:7}:queue");
        arg_is(c, 5, "{job:7}:fair");
        int last = cases[i].fencing ? 7 : 6;
        if (cases[i].fencing) arg_is(c, 6, "{job:7}:fence");
        assert_int_equal(c->argc, last + 1);
        char want[128];
        /* Lease: twice the back-off ceiling, but at least a second. */
        snprintf(want, sizeof want, "%s %s 30000 1000", cases[i].word, lb_lock_info_of(l).token);
        arg_is(c, last, want);
        lb_lock_free(l);
    }
}

static void test_a_wait_keeps_its_token_across_attempts(void **state) {
    (void)state;
    lb_lock *l = fair_lock(0);
    static const rep busy = {X_ARR, 0, NULL, 3, {0, 500, 0}, 0};
    assert_int_equal(lb__fair_begin_wait(l), LB_OK);
    char first[LB__TOKEN_CAP];
    assert_int_equal(run_one(lb_lock_machine(l, LB_OP_TRY_ACQUIRE, 0), &busy), LB_EBUSY);
    memcpy(first, lb_lock_info_of(l).token, sizeof first);
    assert_int_equal(run_one(lb_lock_machine(l, LB_OP_TRY_ACQUIRE, 0), &busy), LB_EBUSY);
    assert_string_equal(lb_lock_info_of(l).token, first);
    lb__fair_end_wait(l);
    assert_int_equal(run_one(lb_lock_machine(l, LB_OP_TRY_ACQUIRE, 0), &busy), LB_EBUSY);
    assert_string_not_equal(lb_lock_info_of(l).token, first);
    lb_lock_free(l);
}

static void test_acquire_replies(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int fencing;
        rep reply;
        int rc, held;
        int64_t fence, holder_ttl;
        int64_t lease_ms; /* when held: the deadline, counted from the send */
    } cases[] = {
        {"free", 0, {X_ARR, 0, NULL, 3, {1, 0, 30000}, 0}, LB_OK, 1, 0, -1, 30000},
        {"handed, fenced", 1, {X_ARR, 0, NULL, 3, {1, 42, 30000}, 0}, LB_OK, 1, 42, -1, 30000},
        {"handed at a release before", 0, {X_ARR, 0, NULL, 3, {1, 0, 1200}, 0}, LB_OK, 1, 0, -1,
         1200},
        {"handed, the key without TTL", 0, {X_ARR, 0, NULL, 3, {1, 0, -1}, 0}, LB_OK, 1, 0, -1,
         30000},
        {"more left than our TTL", 0, {X_ARR, 0, NULL, 3, {1, 0, 90000}, 0}, LB_OK, 1, 0, -1,
         30000},
        {"nothing left", 0, {X_ARR, 0, NULL, 3, {1, 0, 0}, 0}, LB_OK, 1, 0, -1, 0},
        {"negative time left", 0, {X_ARR, 0, NULL, 3, {1, 0, -2}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"fenced without a number", 1, {X_ARR, 0, NULL, 3, {1, 0, 30000}, 0}, LB_EPROTO, 0, 0,
         -1, 0},
        {"a number without fencing", 0, {X_ARR, 0, NULL, 3, {1, 9, 30000}, 0}, LB_OK, 1, 0, -1,
         30000},
        {"held", 0, {X_ARR, 0, NULL, 3, {0, 1500, 0}, 0}, LB_EBUSY, 0, 0, 1500, 0},
        {"held without TTL", 0, {X_ARR, 0, NULL, 3, {0, -1, 0}, 0}, LB_EBUSY, 0, 0, -1, 0},
        {"left the queue", 0, {X_ARR, 0, NULL, 3, {0, -2, 0}, 0}, LB_EBUSY, 0, 0, 0, 0},
        {"negative place", 0, {X_ARR, 0, NULL, 3, {0, 1500, -1}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"negative hint", 0, {X_ARR, 0, NULL, 3, {0, -3, 0}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"a hint beyond any TTL", 0, {X_ARR, 0, NULL, 3, {0, 1000000000001LL, 0}, 0}, LB_EPROTO, 0,
         0, -1, 0},
        {"unknown status", 0, {X_ARR, 0, NULL, 3, {2, 5, 0}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"negative fence", 1, {X_ARR, 0, NULL, 3, {1, -4, 30000}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"four elements, ours", 0, {X_ARR, 0, NULL, 4, {1, 0, 0, 0}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"held by a client outside the queue", 0, {X_ARR, 0, NULL, 4, {0, 1500, 0, 1}, 0}, LB_EBUSY,
         0, 0, 1500, 0},
        {"held by a fair holder", 0, {X_ARR, 0, NULL, 4, {0, 1500, 0, 0}, 0}, LB_EBUSY, 0, 0, 1500,
         0},
        {"an unknown holder flag", 0, {X_ARR, 0, NULL, 4, {0, 1500, 0, 3}, 0}, LB_EPROTO, 0, 0, -1,
         0},
        {"two elements", 0, {X_ARR, 0, NULL, 2, {1, 0}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"one element", 0, {X_ARR, 0, NULL, 1, {1}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"string elements", 0, {X_ARR, 0, NULL, 3, {1, 0, 30000}, 1}, LB_EPROTO, 0, 0, -1, 0},
        {"an integer", 0, {X_INT, 1, NULL, 0, {0}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"nil", 0, {X_NIL, 0, NULL, 0, {0}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"a string", 0, {X_STR, 0, "OK", 0, {0}, 0}, LB_EPROTO, 0, 0, -1, 0},
        {"wrong type", 0, {X_ERR, 0, "WRONGTYPE Operation against a key", 0, {0}, 0},
         LB_EWRONGTYPE, 0, 0, -1, 0},
        {"an error", 0, {X_ERR, 0, "ERR fair acquire: bad arguments", 0, {0}, 0}, LB_EREDIS, 0, 0,
         -1, 0},
        {"no reply", 0, {X_NONE, 0, NULL, 0, {0}, 0}, LB_EIO, 0, 0, -1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_lock *l = fair_lock(cases[i].fencing);
        int rc = run_one(lb_lock_machine(l, LB_OP_TRY_ACQUIRE, 0), &cases[i].reply);
        if (rc != cases[i].rc) fail_msg("%s: %s", cases[i].name, lb_err_name(rc));
        assert_int_equal(lb_lock_info_of(l).held, cases[i].held);
        assert_int_equal(lb_lock_info_of(l).fence, cases[i].fence);
        assert_int_equal(lb_lock_info_of(l).holder_ttl_ms, cases[i].holder_ttl);
        if (cases[i].held)
            assert_int_equal(lb_lock_info_of(l).deadline_ns,
                             t0.mono_ns + cases[i].lease_ms * INT64_C(1000000));
        lb_lock_free(l);
    }
}

/* A hand-off message is taken only for the queue place the wait's last
 * attempt reported: a grant of an earlier place of the same token (read late,
 * after it lapsed and the token queued again), or one naming no place, is
 * left for an attempt to check. */
static void test_a_grant_is_taken_only_for_the_current_queue_place(void **state) {
    (void)state;
    lb_lock *l = fair_lock(0);
    static const rep queued = {X_ARR, 0, NULL, 3, {0, 500, 1700000000000002LL}, 0};
    static const rep kept = {X_ARR, 0, NULL, 3, {0, 500, 0}, 0};
    assert_int_equal(lb__fair_begin_wait(l), LB_OK);
    assert_int_equal(lb__fair_handed(l, 1700000000000002LL, 0), LB_EBUSY); /* not queued yet */
    assert_int_equal(run_one(lb_lock_machine(l, LB_OP_TRY_ACQUIRE, 0), &queued), LB_EBUSY);
    assert_int_equal(run_one(lb_lock_machine(l, LB_OP_TRY_ACQUIRE, 0), &kept), LB_EBUSY);
    assert_int_equal(lb__fair_handed(l, 1700000000000001LL, 0), LB_EBUSY);
    assert_int_equal(lb__fair_handed(l, -1, 0), LB_EBUSY);
    assert_false(lb_lock_info_of(l).held);
    assert_int_equal(lb__fair_handed(l, 1700000000000002LL, 0), LB_OK);
    assert_true(lb_lock_info_of(l).held);
    assert_int_equal(lb_lock_info_of(l).deadline_ns, t0.mono_ns + INT64_C(30000) * 1000000);
    lb__fair_end_wait(l);
    lb_lock_free(l);
}

/* An answer we cannot read leaves the handle held: the lock may still be
 * ours, and the caller may retry the release; it lapses with its TTL. */
static void test_release_replies(void **state) {
    (void)state;
    static const struct { const char *name; rep reply; int rc, held; } cases[] = {
        {"handed off", {X_INT, 2, NULL, 0, {0}, 0}, LB_OK, 0},
        {"released", {X_INT, 1, NULL, 0, {0}, 0}, LB_OK, 0},
        {"not ours", {X_INT, 0, NULL, 0, {0}, 0}, LB_ELOST, 0},
        /* Freed into a window for outsiders beside the baton. */
        {"released into a window", {X_INT, 3, NULL, 0, {0}, 0}, LB_OK, 0},
        /* Handed off or released with an outsider noted. */
        {"handed off beside an outsider", {X_INT, 4, NULL, 0, {0}, 0}, LB_OK, 0},
        {"released beside an outsider", {X_INT, 5, NULL, 0, {0}, 0}, LB_OK, 0},
        {"unknown integer", {X_INT, 6, NULL, 0, {0}, 0}, LB_EPROTO, 1},
        {"negative", {X_INT, -1, NULL, 0, {0}, 0}, LB_EPROTO, 1},
        {"an array", {X_ARR, 0, NULL, 1, {1}, 0}, LB_EPROTO, 1},
        {"nil", {X_NIL, 0, NULL, 0, {0}, 0}, LB_EPROTO, 1},
        {"an error", {X_ERR, 0, "ERR fair release: bad arguments", 0, {0}, 0}, LB_EREDIS, 1},
        {"no reply", {X_NONE, 0, NULL, 0, {0}, 0}, LB_EIO, 1},
        /* Handed to a waiter on another grant list: released, and the grant
         * is ours to push (the next command). */
        {"a grant to push", {X_STR, 0, "0123456789abcdef0123456789abcdef 17 0 -", 0, {0}, 0},
         LB_STEP_SEND, 0},
        /* A window opened: released, and the head's wake-up is ours to push. */
        {"a wake-up to push", {X_STR, 0, "0123456789abcdef0123456789abcdef 0 0 -", 0, {0}, 0},
         LB_STEP_SEND, 0},
        /* The script answers with a string only once it gave the lock up:
         * one it cannot read still leaves the lock not ours. */
        {"a grant naming no token", {X_STR, 0, "xyz 17 0 -", 0, {0}, 0}, LB_EPROTO, 0},
        {"a grant too long", {X_STR, 0, "0123456789abcdef0123456789abcdef 1 2 "
                                        "0123456789abcdef0123456789abcdef 0123456789"
                                        "0123456789012345678901234567890123456789", 0, {0}, 0},
         LB_EPROTO, 0},
        {"a string", {X_STR, 0, "OK", 0, {0}, 0}, LB_EPROTO, 0},
    };
    static const rep acquired = {X_ARR, 0, NULL, 3, {1, 0, 30000}, 0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_lock *l = fair_lock(0);
        assert_int_equal(run_one(lb_lock_machine(l, LB_OP_TRY_ACQUIRE, 0), &acquired), LB_OK);
        lb_machine *m = lb_lock_machine(l, LB_OP_RELEASE, 0);
        assert_int_equal(lb_machine_step(m, NULL, now()), LB_STEP_SEND);
        const lb_cmd *c = lb_machine_command(m);
        arg_is(c, 1, lb__script_modern_fair_release.sha1);
        /* No successor known (the lock was taken, not granted): the script
         * gets our own grant list and "-". */
        char want[128];
        snprintf(want, sizeof want, "{job:7}:grant:%s", lb_lock_info_of(l).token);
        arg_is(c, 6, want);
        /* Without fencing, the baton's list and mark and the outsider note,
         * and in the argument a fresh token for a baton, no mark of ours
         * ('-'), our TTL and the baton's life (100 ms, under a quarter of the
         * TTL). */
        arg_is(c, 2, "7");
        arg_is(c, 7, "{job:7}:baton");
        arg_is(c, 8, "{job:7}:bwait");
        arg_is(c, 9, "{job:7}:outsider");
        char fresh[LB_TOKEN_LEN + 1];
        assert_true(c->argvlen[10] > (size_t)(2 * LB_TOKEN_LEN + 10));
        memcpy(fresh, c->argv[10] + LB_TOKEN_LEN + 10, LB_TOKEN_LEN);
        fresh[LB_TOKEN_LEN] = '\0';
        assert_string_not_equal(fresh, lb_lock_info_of(l).token);
        snprintf(want, sizeof want, "%s 16 200 - %s - 30000 100 {job:7}:released",
                 lb_lock_info_of(l).token, fresh);
        arg_is(c, 10, want);
        assert_int_equal(c->argc, 11);
        built b;
        int rc = lb_machine_step(m, build(&b, &cases[i].reply), now());
        if (rc != cases[i].rc) fail_msg("%s: %s", cases[i].name, lb_err_name(rc));
        assert_int_equal(lb_lock_info_of(l).held, cases[i].held);
        if (rc == LB_STEP_SEND) {
            c = lb_machine_command(m);
            /* One script pushes the grant and gives the list its TTL: a
             * releaser that stops after it leaves no list that never lapses. */
            arg_is(c, 0, "EVALSHA");
            arg_is(c, 1, lb__script_modern_fair_push.sha1);
            arg_is(c, 2, "2");
            arg_is(c, 3, "job:7");
            arg_is(c, 4, "{job:7}:grant:0123456789abcdef0123456789abcdef");
            arg_is(c, 5, cases[i].reply.s);
            arg_is(c, 6, "30000");
            assert_int_equal(c->argc, 7);
            /* The push is best effort: the release stands, whatever it got. */
            static const rep pushed[] = {{X_INT, 1, NULL, 0, {0}, 0},
                                         {X_ERR, 0, "NOPERM", 0, {0}, 0},
                                         {X_NONE, 0, NULL, 0, {0}, 0}};
            assert_int_equal(lb_machine_step(m, build(&b, &pushed[i % 3]), now()), LB_OK);
        }
        lb_lock_free(l);
    }
}

/* The mark a wait left names it in the release ("fresh marked ttl life"),
 * so that the last waiter's release does not pass the lock to nobody; a
 * release that failed keeps the lock, and its retry names the mark still. */
static void test_a_release_names_the_mark_its_wait_left_until_it_succeeds(void **state) {
    (void)state;
    static const rep failures[] = {{X_ERR, 0, "ERR busy", 0, {0}, 0}, {X_NONE, 0, NULL, 0, {0}, 0},
                                   {X_INT, 7, NULL, 0, {0}, 0}};
    for (size_t i = 0; i < sizeof failures / sizeof failures[0]; i++) {
        lb_lock *l = fair_lock(0);
        assert_int_equal(lb__fair_begin_wait(l), LB_OK);
        char marked[LB__TOKEN_CAP];
        snprintf(marked, sizeof marked, "%s", lb_lock_info_of(l).token);
        const char *baton = "0123456789abcdef0123456789abcdef 30000 100";
        assert_int_equal(lb__fair_take_baton(l, baton, strlen(baton), t0.mono_ns), LB_OK);
        for (int round = 0; round < 3; round++) {
            lb_machine *m = lb_lock_machine(l, LB_OP_RELEASE, 0);
            assert_int_equal(lb_machine_step(m, NULL, now()), LB_STEP_SEND);
            const lb_cmd *c = lb_machine_command(m);
            char want[64];
            snprintf(want, sizeof want, " %s 30000 100 ", round < 2 ? marked : "-");
            assert_true(c->argc == 11);
            if (!memmem(c->argv[10], c->argvlen[10], want, strlen(want)))
                fail_msg("round %d: %.*s", round, (int)c->argvlen[10], c->argv[10]);
            built b;
            static const rep released = {X_INT, 1, NULL, 0, {0}, 0};
            int rc = lb_machine_step(m, build(&b, round == 0 ? &failures[i] : &released), now());
            if (round == 0) {
                assert_true(rc != LB_OK);
                assert_true(lb_lock_info_of(l).held);
            } else if (round == 1) {
                assert_int_equal(rc, LB_OK);
                assert_false(lb_lock_info_of(l).held);
                /* Held again, not by a baton: no mark of ours any more. */
                static const rep acquired = {X_ARR, 0, NULL, 3, {1, 0, 30000}, 0};
                assert_int_equal(run_one(lb_lock_machine(l, LB_OP_TRY_ACQUIRE, 0), &acquired), LB_OK);
            }
        }
        lb_lock_free(l);
    }
}

static void test_release_of_a_lock_not_held_sends_nothing(void **state) {
    (void)state;
    lb_lock *l = fair_lock(0);
    assert_int_equal(lb_machine_step(lb_lock_machine(l, LB_OP_RELEASE, 0), NULL, now()), LB_ESTATE);
    lb_lock_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_mode_sends_one_script_over_lock_queue_and_state),
        cmocka_unit_test(test_a_wait_keeps_its_token_across_attempts),
        cmocka_unit_test(test_acquire_replies),
        cmocka_unit_test(test_a_grant_is_taken_only_for_the_current_queue_place),
        cmocka_unit_test(test_release_replies),
        cmocka_unit_test(test_a_release_names_the_mark_its_wait_left_until_it_succeeds),
        cmocka_unit_test(test_release_of_a_lock_not_held_sends_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
