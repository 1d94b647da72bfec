/* The fair scripts run directly as the library runs them, against a real
 * redis-server: what a release chooses and costs, how a baton is taken, the
 * TTLs of what they write, and the arguments and foreign values they refuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "harness/wait_fixture.h"
#include "lockbridge/lockbridge.h"
#include "modern/internal.h"

/* Every command the server has run (INFO commandstats, script internals
 * included), less the INFO calls that read them. */
static long long server_calls(void) {
    redisReply *r = redisCommand(lbt_conn, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    long long n = 0;
    for (const char *at = strstr(r->str, ":calls="); at; at = strstr(at + 1, ":calls="))
        n += strtoll(at + 7, NULL, 10);
    freeReplyObject(r);
    return n - lbt_calls_of("info");
}

/* Lock `k` held by aaaa with bbbb queued behind it (lease far off, TTL
 * `entry`'s), its queue and state given TTLs; `window`: an outsider seen and
 * a hand-off made, so that the release's window is due. */
static void hold_with_one_waiter(const char *k, const char *entry, int window) {
    lbt_cmd_ok(lbt_conn, "SET %s aaaa PX 30000", k);
    lbt_cmd_ok(lbt_conn, "ZADD {%s}:queue 1 bbbb", k);
    lbt_cmd_ok(lbt_conn, "HSET {%s}:fair bbbb %s", k, entry);
    if (window) lbt_cmd_ok(lbt_conn, "HSET {%s}:fair ~streak 1 ~seen 1", k);
    lbt_cmd_ok(lbt_conn, "PEXPIRE {%s}:queue 60000", k);
    lbt_cmd_ok(lbt_conn, "PEXPIRE {%s}:fair 60000", k);
}

/* Two waiters' marks: their tokens. */
#define MARK_C "cccccccccccccccccccccccccccccccc"
#define MARK_D "dddddddddddddddddddddddddddddddd"

/* The release script's choice, row by row: a queued waiter comes before a
 * waiter blocked on the baton; with nobody queued, a live mark other than
 * the caller's own gets the baton (a fresh token at the key with the
 * caller's TTL, the baton with its life as TTL); no mark, or the caller's
 * own, deletes the key (the caller's own mark goes in every branch: its wait
 * is over). A value that is no token is no mark. A baton list of another type, or one holding an
 * element already, never leaves the key to a baton nobody can pop first. */
static void test_a_release_chooses_between_the_queue_and_the_baton(void **state) {
    (void)state;
    static const struct {
        int queued;         /* bbbb waits in the queue */
        const char *mark;   /* the mark left, or NULL */
        const char *marked; /* the caller's own mark, "-": none */
        const char *list;   /* what lies at the baton list's name first */
        long long result;      /* -1: the grant, for the caller to push */
        const char *key_after; /* NULL: deleted; "fresh": the baton's token */
        int mark_after;        /* the mark is still there */
    } rows[] = {
        {1, MARK_C, "-", NULL, -1, "bbbb", 1},
        {1, MARK_C, MARK_C, NULL, -1, "bbbb", 0}, /* ours: it goes all the same */
        {0, MARK_C, "-", NULL, 2, "fresh", 1},
        {0, MARK_C, MARK_D, NULL, 2, "fresh", 1},
        {0, MARK_C, MARK_C, NULL, 1, NULL, 0}, /* our own: it goes with the key */
        {0, NULL, "-", NULL, 1, NULL, 0},
        {0, MARK_C, "-", "string", 1, NULL, 1},
        {0, "someone-elses", "-", NULL, 1, NULL, 1}, /* no token: no mark */
        {0, MARK_C, "-", "element", 2, "fresh", 1},
    };
    const char *fresh = "ffffffffffffffffffffffffffffffff";
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbt_del_matching(lbt_conn, "*w:pass*");
        if (rows[i].queued) hold_with_one_waiter("w:pass", "99999999999999 30000 *", 0);
        else lbt_cmd_ok(lbt_conn, "SET w:pass aaaa PX 30000");
        if (rows[i].mark) lbt_cmd_ok(lbt_conn, "SET {w:pass}:bwait %s PX 10000", rows[i].mark);
        if (rows[i].list && strcmp(rows[i].list, "string") == 0)
            lbt_cmd_ok(lbt_conn, "SET {w:pass}:baton alien PX 10000");
        if (rows[i].list && strcmp(rows[i].list, "element") == 0)
            assert_int_equal(lbt_int(lbt_conn, "RPUSH {w:pass}:baton stale"), 1);
        char args[200];
        snprintf(args, sizeof args, "aaaa 0 200 - %s %s 20000 100 {w:pass}:released", fresh,
                 rows[i].marked);
        redisReply *r = redisCommand(lbt_conn, "EVAL %s 6 w:pass {w:pass}:queue {w:pass}:fair "
                                           "{w:pass}:grant:aaaa {w:pass}:baton {w:pass}:bwait %s",
                                     lb__script_modern_fair_release.body, args);
        assert_non_null(r);
        if (rows[i].result == -1) {
            assert_int_equal(r->type, REDIS_REPLY_STRING);
            assert_memory_equal(r->str, "bbbb ", 5);
        } else {
            if (r->type != REDIS_REPLY_INTEGER) fail_msg("row %zu: %s", i, r->str ? r->str : "?");
            assert_int_equal(r->integer, rows[i].result);
        }
        freeReplyObject(r);
        assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:pass}:bwait"), rows[i].mark_after);
        const char *want = rows[i].key_after;
        if (!want) {
            assert_int_equal(lbt_int(lbt_conn, "EXISTS w:pass"), 0);
        } else if (strcmp(want, "fresh") == 0) {
            assert_string_equal(lbt_get(lbt_conn, "w:pass"), fresh);
            long long ttl = lbt_int(lbt_conn, "PTTL w:pass");
            assert_true(ttl > 19000 && ttl <= 20000);
            assert_int_equal(lbt_int(lbt_conn, "LLEN {w:pass}:baton"), 1);
            redisReply *e = redisCommand(lbt_conn, "LINDEX {w:pass}:baton 0");
            assert_true(e && e->type == REDIS_REPLY_STRING);
            char elem[64];
            snprintf(elem, sizeof elem, "%s 20000 100", fresh);
            assert_string_equal(e->str, elem);
            freeReplyObject(e);
            long long life = lbt_int(lbt_conn, "PTTL {w:pass}:baton");
            assert_true(life > 0 && life <= 100);
        } else {
            assert_string_equal(lbt_get(lbt_conn, "w:pass"), want);
            assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:pass}:baton"), 0);
        }
    }
    /* A baton's TTL past what a lockbridge client takes (10^12 ms) is
     * refused before anything is written: its receiver would refuse it
     * after popping it, and the key would keep a token nobody holds. */
    lbt_del_matching(lbt_conn, "*w:pass*");
    lbt_cmd_ok(lbt_conn, "SET w:pass aaaa PX 30000");
    lbt_cmd_ok(lbt_conn, "SET {w:pass}:bwait %s PX 10000", MARK_C);
    redisReply *r = redisCommand(lbt_conn, "EVAL %s 6 w:pass {w:pass}:queue {w:pass}:fair "
                                       "{w:pass}:grant:aaaa {w:pass}:baton {w:pass}:bwait %s",
                                 lb__script_modern_fair_release.body,
                                 "aaaa 0 200 - ffff - 2000000000000 100 {w:pass}:released");
    assert_true(r && r->type == REDIS_REPLY_ERROR);
    freeReplyObject(r);
    assert_string_equal(lbt_get(lbt_conn, "w:pass"), "aaaa");
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:pass}:baton"), 0);
    lbt_del_matching(lbt_conn, "*w:pass*");
}

/* A release that passes the baton costs the server its script and five
 * commands in it: one MGET reads the key and the mark together, then
 * ZPOPMIN (the queue comes first), RPUSH and PEXPIRE of the baton, and the
 * SET of the fresh token. With the waiter's guarded mark (a script of its
 * own) and its BLPOP, a turn of a client that locks in a loop is 12 server
 * commands, its section's 2 included. (Reading the mark and the key with a
 * GET each made it 13.) */
static void test_a_release_that_passes_the_baton_costs_six_commands(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:cheap*");
    lbt_cmd_ok(lbt_conn, "SET w:cheap aaaa PX 30000");
    lbt_cmd_ok(lbt_conn, "SET {w:cheap}:bwait %s PX 10000", MARK_C);
    const char *args = "aaaa 0 200 - ffffffffffffffffffffffffffffffff - 20000 100 "
                       "{w:cheap}:released";
    long long before = server_calls();
    redisReply *r = redisCommand(lbt_conn, "EVAL %s 6 w:cheap {w:cheap}:queue {w:cheap}:fair "
                                       "{w:cheap}:grant:aaaa {w:cheap}:baton {w:cheap}:bwait %s",
                                 lb__script_modern_fair_release.body, args);
    long long cost = server_calls() - before;
    assert_true(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    assert_int_equal(lbt_int(lbt_conn, "LLEN {w:cheap}:baton"), 1);
    if (cost > 6) fail_msg("the release ran %lld commands", cost);
    lbt_del_matching(lbt_conn, "*w:cheap*");
}

/* Beside the baton a release reads the outsider note with the key and the
 * mark, one MGET: with none there it passes the baton for the same six
 * commands. With a note written since the last window, it frees the key for
 * a window (3: the mark stays, its waiter's block ends empty and it queues,
 * kept off by ~open); within 4 windows' length of that one it passes the
 * baton and says an outsider is noted (4), so that its caller stands back. */
static int64_t release_beside_note(const char *fresh) {
    char args[200];
    snprintf(args, sizeof args, "aaaa 16 200 - %s - 20000 100 {w:out}:released", fresh);
    redisReply *r = redisCommand(lbt_conn, "EVAL %s 7 w:out {w:out}:queue {w:out}:fair "
                                       "{w:out}:grant:aaaa {w:out}:baton {w:out}:bwait "
                                       "{w:out}:outsider %s",
                                 lb__script_modern_fair_release.body, args);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_INTEGER) fail_msg("release: %s", r->str ? r->str : "?");
    int64_t v = r->integer;
    freeReplyObject(r);
    return v;
}

static void test_a_baton_release_opens_a_window_for_a_noted_outsider(void **state) {
    (void)state;
    const char *fresh = "ffffffffffffffffffffffffffffffff";
    lbt_del_matching(lbt_conn, "*w:out*");
    lbt_cmd_ok(lbt_conn, "SET w:out aaaa PX 30000");
    lbt_cmd_ok(lbt_conn, "SET {w:out}:bwait %s PX 10000", MARK_C);
    long long before = server_calls();
    assert_int_equal(release_beside_note(fresh), 2);
    long long cost = server_calls() - before;
    if (cost > 6) fail_msg("the release ran %lld commands", cost);
    lbt_del_matching(lbt_conn, "*w:out*");

    lbt_cmd_ok(lbt_conn, "SET w:out aaaa PX 30000");
    lbt_cmd_ok(lbt_conn, "SET {w:out}:bwait %s PX 10000", MARK_C);
    lbt_cmd_ok(lbt_conn, "SET {w:out}:outsider 1 PX 2000");
    assert_int_equal(release_beside_note(fresh), 3);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:out"), 0);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:out}:bwait"), 1);
    assert_int_equal(lbt_int(lbt_conn, "HEXISTS {w:out}:fair ~open"), 1);
    assert_true(lbt_int(lbt_conn, "PTTL {w:out}:fair") > 200);

    lbt_cmd_ok(lbt_conn, "SET w:out aaaa PX 30000");
    assert_int_equal(release_beside_note(fresh), 4);
    assert_int_equal(lbt_int(lbt_conn, "LLEN {w:out}:baton"), 1);
    lbt_del_matching(lbt_conn, "*w:out*");
}

/* A note of a lockbridge client outside fair mode (' lb' after the time)
 * opens windows as any note does, but a baton passed beside it answers 2:
 * such a client hands the key back at its release, and fair callers that
 * stood back 250 ms after each release for it (as they must for a client
 * that does not) left the key idle: 28 baton waiters beside 4 polling
 * clients made 365 acquisitions in 3 s against 16100 alone. The note script
 * writes ' lb' for a caller that saw no foreign holder, and never over a
 * live bare note. */
static void test_a_note_of_a_lockbridge_client_opens_windows_without_a_stand_back(void **state) {
    (void)state;
    const char *fresh = "ffffffffffffffffffffffffffffffff";
    lbt_del_matching(lbt_conn, "*w:out*");
    lbt_cmd_ok(lbt_conn, "SET w:out aaaa PX 30000");
    lbt_cmd_ok(lbt_conn, "SET {w:out}:bwait %s PX 10000", MARK_C);
    lbt_cmd_ok(lbt_conn, "SET {w:out}:outsider %s PX 2000", "1 lb");
    assert_int_equal(release_beside_note(fresh), 3);
    lbt_cmd_ok(lbt_conn, "SET w:out aaaa PX 30000");
    assert_int_equal(release_beside_note(fresh), 2);
    assert_int_equal(lbt_int(lbt_conn, "LLEN {w:out}:baton"), 1);
    lbt_del_matching(lbt_conn, "*w:out*");
    /* The note script: ' lb' from a client that saw none, bare from one
     * that saw a foreign holder, and ' lb' never over a live bare note. */
    static const struct {
        const char *before, *saw;
        int bare_after;
    } rows[] = {{NULL, "0", 0}, {NULL, "1", 1}, {"5 lb", "1", 1}, {"5", "0", 1}, {"5 lb", "0", 0}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbt_del_matching(lbt_conn, "*w:out*");
        lbt_cmd_ok(lbt_conn, "SET {w:out}:bwait %s PX 10000", MARK_C);
        if (rows[i].before) lbt_cmd_ok(lbt_conn, "SET {w:out}:outsider %s PX 2000", rows[i].before);
        redisReply *r =
            redisCommand(lbt_conn, "EVAL %s 3 {w:out}:fair {w:out}:outsider {w:out}:bwait 2000 %s",
                         lb__script_modern_note_outsider.body, rows[i].saw);
        assert_true(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        freeReplyObject(r);
        const char *v = lbt_get(lbt_conn, "{w:out}:outsider");
        int bare = v && strspn(v, "0123456789") == strlen(v);
        int lb = v && strlen(v) > 3 && strcmp(v + strlen(v) - 3, " lb") == 0;
        if (!v || bare != rows[i].bare_after || (!bare && !lb))
            fail_msg("row %zu: the note is '%s'", i, v ? v : "(none)");
    }
    lbt_del_matching(lbt_conn, "*w:out*");
}

/* A hand-off to a queued waiter beside a noted outsider answers 2, as without
 * a note: the queue's windows serve the outsider, and a releaser that stood
 * back after every hand-off starved the queue (28 waiters made 260
 * acquisitions a second beside 4 polling clients, against 2424). */
static void test_a_queue_hand_off_beside_a_noted_outsider_says_only_handed(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:out*");
    lbt_cmd_ok(lbt_conn, "SET w:out aaaa PX 30000");
    lbt_int(lbt_conn, "ZADD {w:out}:queue 1 bbbb");
    lbt_int(lbt_conn, "HSET {w:out}:fair bbbb %s", "9999999999999 30000 lb-inbox:t");
    lbt_int(lbt_conn, "PEXPIRE {w:out}:fair 30000");
    lbt_cmd_ok(lbt_conn, "SET {w:out}:outsider 1 PX 2000");
    assert_int_equal(release_beside_note("ffffffffffffffffffffffffffffffff"), 2);
    assert_string_equal(lbt_get(lbt_conn, "w:out"), "bbbb");
    lbt_del_matching(lbt_conn, "*w:out*");
}

/* A probe (the fresh token prefixed with 'p') asks for a window where the
 * baton would pass, so that a client that does not queue, never seen while
 * the baton passes, can take the key: the first one asked for only starts
 * the schedule (the baton passes, the next probe 2 s on); one due opens a
 * window and doubles the interval while no outsider is noted; one not due
 * passes the baton. */
/* A field of a hash as a number, -1 when absent. */
static long long state_field(const char *hash, const char *field) {
    redisReply *r = redisCommand(lbt_conn, "HGET %s %s", hash, field);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
    freeReplyObject(r);
    return v;
}

static int64_t probe_release(void) {
    lbt_cmd_ok(lbt_conn, "SET w:probe aaaa PX 30000");
    lbt_cmd_ok(lbt_conn, "SET {w:probe}:bwait %s PX 10000", MARK_C);
    const char *args = "aaaa 16 200 - pffffffffffffffffffffffffffffffff - 20000 100 "
                       "{w:probe}:released";
    redisReply *r = redisCommand(lbt_conn, "EVAL %s 7 w:probe {w:probe}:queue {w:probe}:fair "
                                       "{w:probe}:grant:aaaa {w:probe}:baton {w:probe}:bwait "
                                       "{w:probe}:outsider %s",
                                 lb__script_modern_fair_release.body, args);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_INTEGER) fail_msg("release: %s", r->str ? r->str : "?");
    int64_t v = r->integer;
    freeReplyObject(r);
    lbt_cmd_ok(lbt_conn, "DEL {w:probe}:baton");
    return v;
}

static void test_a_probe_opens_a_window_only_when_due_and_rarer_each_time(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:probe*");
    assert_int_equal(probe_release(), 2);
    assert_int_equal(state_field("{w:probe}:fair", "~pint"), 2000);
    assert_true(state_field("{w:probe}:fair", "~pnext") > 0);
    assert_int_equal(probe_release(), 2); /* not due */
    lbt_cmd_ok(lbt_conn, "HSET {w:probe}:fair ~pnext 1");
    assert_int_equal(probe_release(), 3);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:probe"), 0);
    assert_int_equal(state_field("{w:probe}:fair", "~pint"), 4000);
    assert_true(lbt_int(lbt_conn, "HEXISTS {w:probe}:fair ~open") == 1);
    assert_int_equal(probe_release(), 2); /* the next is 4 s on */
    lbt_del_matching(lbt_conn, "*w:probe*");
}

/* Each client passing the baton asks for a probe once a second: one not due
 * costs the baton pass two reads (TIME, the schedule's HMGET) and nothing
 * more. (It also deleted the streak and ~until, as if lapsed waiters had
 * been popped: 0.006 commands per acquisition at 32 clients, for nothing.) */
static void test_a_probe_not_due_costs_two_commands_more(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:probe*");
    assert_int_equal(probe_release(), 2); /* starts the schedule */
    long long before = server_calls();
    assert_int_equal(probe_release(), 2);
    long long cost = server_calls() - before - 3; /* the SETs and the DEL around it */
    lbt_cmd_ok(lbt_conn, "SET w:probe aaaa PX 30000");
    lbt_cmd_ok(lbt_conn, "SET {w:probe}:bwait %s PX 10000", MARK_C);
    const char *args = "aaaa 16 200 - ffffffffffffffffffffffffffffffff - 20000 100 "
                       "{w:probe}:released";
    before = server_calls();
    redisReply *r = redisCommand(lbt_conn, "EVAL %s 7 w:probe {w:probe}:queue {w:probe}:fair "
                                       "{w:probe}:grant:aaaa {w:probe}:baton {w:probe}:bwait "
                                       "{w:probe}:outsider %s",
                                 lb__script_modern_fair_release.body, args);
    long long plain = server_calls() - before;
    assert_true(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    if (cost != plain + 2)
        fail_msg("a pass asking for a probe not due ran %lld commands, one not asking %lld", cost,
                 plain);
    lbt_del_matching(lbt_conn, "*w:probe*");
}

/* A client outside fair mode releasing while a window left for such
 * clients is open ('o' before the fresh token) frees the key for the rest
 * of the window, with a waiter marked on the baton; a fair holder passes
 * the baton all the same. (A baton passed by the first outsider to get in
 * ended the window at its first turn: in the bench's mixed row one of four
 * polling clients got no turn in 2 s.) */
static void test_an_outsiders_release_in_an_open_window_passes_no_baton(void **state) {
    (void)state;
    static const struct {
        const char *prefix;
        int freed;
    } rows[] = {{"o", 1}, {"op", 1}, {"", 0}, {"p", 0}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbt_del_matching(lbt_conn, "*w:open*");
        lbt_cmd_ok(lbt_conn, "SET w:open aaaa PX 30000");
        lbt_cmd_ok(lbt_conn, "SET {w:open}:bwait %s PX 10000", MARK_C);
        lbt_cmd_ok(lbt_conn, "HSET {w:open}:fair ~open 99999999999999 ~pnext 99999999999999");
        lbt_cmd_ok(lbt_conn, "PEXPIRE {w:open}:fair 10000");
        char args[200];
        snprintf(args, sizeof args,
                 "aaaa 16 200 - %sffffffffffffffffffffffffffffffff - 20000 100 {w:open}:released",
                 rows[i].prefix);
        redisReply *r = redisCommand(lbt_conn, "EVAL %s 7 w:open {w:open}:queue {w:open}:fair "
                                           "{w:open}:grant:aaaa {w:open}:baton {w:open}:bwait "
                                           "{w:open}:outsider %s",
                                     lb__script_modern_fair_release.body, args);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_INTEGER) fail_msg("row %zu: %s", i, r->str ? r->str : "?");
        long long v = r->integer;
        freeReplyObject(r);
        long long held = lbt_int(lbt_conn, "EXISTS w:open");
        if (rows[i].freed && (v != 6 || held != 0))
            fail_msg("'%s': reply %lld, key held %lld: the window was ended", rows[i].prefix, v, held);
        if (!rows[i].freed && (v != 2 || held != 1))
            fail_msg("'%s': reply %lld, key held %lld: no baton passed", rows[i].prefix, v, held);
    }
    lbt_del_matching(lbt_conn, "*w:open*");
}

/* A clock that moves on 100 ms at each reading. */
static int64_t stepping_ns;
static int64_t stepping_mono_ns(void *ud) {
    (void)ud;
    return __atomic_add_fetch(&stepping_ns, 100000000LL, __ATOMIC_SEQ_CST);
}

/* A baton whose lease is over by the time its receiver reads it (here a
 * baton of 4 ms, read on a clock that has moved on 100 ms since the BLPOP's
 * send) is no acquisition: the receiver gives its token back and goes on
 * waiting, and the wait returns LB_OK only with a lease still to run. Before,
 * it returned LB_OK with its lease already over. */
static void test_a_baton_with_no_lease_left_is_no_acquisition(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:short*");
    lb_clock stepping = {NULL, stepping_mono_ns, NULL, 0, NULL};
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fair = 1;
    o.backoff_min_ms = 2;
    o.backoff_max_ms = 100;
    o.fair_baton_ms = 20000;
    o.clock = &stepping;
    lb_lock *q = lbt_lock_with("w:short", &o);
    lbt_cmd_ok(lbt_conn, "SET w:short aaaa PX 30000");
    lbt_job j;
    lbt_job_start(&j, q, NULL, 10000);
    LBT_EVENTUALLY(lbt_blocked_in_blpop(j.client_id));
    char args[160];
    snprintf(args, sizeof args, "aaaa 0 200 - ffffffffffffffffffffffffffffffff - 4 1 {w:short}:released");
    redisReply *r = redisCommand(lbt_conn, "EVAL %s 6 w:short {w:short}:queue {w:short}:fair "
                                       "{w:short}:grant:aaaa {w:short}:baton {w:short}:bwait %s",
                                 lb__script_modern_fair_release.body, args);
    assert_true(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    lb_lock_info info = lb_lock_info_of(q);
    assert_true(info.held);
    assert_true(info.deadline_ns > stepping_mono_ns(NULL));
    assert_string_equal(lbt_get(lbt_conn, "w:short"), info.token);
    lbt_job_end(&j);
    lb_lock_free(q);
    lbt_del_matching(lbt_conn, "*w:short*");
}

/* A baton "token ttl life" makes its token the lock's, with a lease of the
 * shorter of the two TTLs counted from the BLPOP's send less the baton's
 * life (the key's TTL began at the push, at most that life before the pop);
 * anything else is refused, the lock left as it was. */
static void test_a_baton_is_taken_only_as_the_release_wrote_it(void **state) {
    (void)state;
    static const struct {
        const char *element;
        int64_t own_ttl_ms;
        int rc;
        int64_t lease_ms; /* from the send */
    } rows[] = {
        {"0123456789abcdef0123456789abcdef 20000 100", 30000, LB_OK, 19900},
        {"0123456789abcdef0123456789abcdef 20000 100", 5000, LB_OK, 4900},
        {"0123456789abcdef0123456789abcdef 400 100", 30000, LB_OK, 300},
        {"0123456789abcdef0123456789abcdef 400 101", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef 20000 0", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef 0 100", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef 20000", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef 20000 100 7", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcde 20000 100", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdeg 20000 100", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef 2e4 100", 30000, LB_EPROTO, 0},
        {"0123456789abcdef0123456789abcdef -20000 100", 30000, LB_EPROTO, 0},
        {"", 30000, LB_EPROTO, 0},
    };
    const int64_t sent = 1000000000000LL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lb_lock_options o;
        lb_lock_options_init(&o);
        o.fair = 1;
        o.ttl_ms = rows[i].own_ttl_ms;
        lb_lock *l = lbt_lock_with("w:take", &o);
        assert_int_equal(lb__fair_begin_wait(l), LB_OK);
        char before[LB_TOKEN_LEN + 1];
        snprintf(before, sizeof before, "%s", lb_lock_info_of(l).token);
        int rc = lb__fair_take_baton(l, rows[i].element, strlen(rows[i].element), sent);
        if (rc != rows[i].rc) fail_msg("row %zu: %s", i, lb_err_name(rc));
        lb_lock_info info = lb_lock_info_of(l);
        if (rc == LB_OK) {
            assert_true(info.held);
            assert_memory_equal(info.token, rows[i].element, LB_TOKEN_LEN);
            assert_int_equal(info.deadline_ns, sent + rows[i].lease_ms * 1000000);
        } else {
            assert_false(info.held);
            assert_string_equal(info.token, before);
        }
        lb_lock_free(l);
    }
}

/* Every key a fair lock writes beside its own lapses on its own: after a
 * hand-off and the last release, each one left has a TTL. (The release that
 * granted the lock deleted the grantee's entry from the state hash first,
 * which emptied it, and wrote the hand-off count into a new hash with no TTL:
 * every lock name contended once kept one for ever.) */
static void test_no_key_a_fair_lock_writes_is_left_without_a_ttl(void **state) {
    (void)state;
    lb_lock *h = lbt_new_lock("w:tidy", 1, 2, 100), *q = lbt_new_lock("w:tidy", 1, 5000, 5000);
    assert_int_equal(lb_lock_try_acquire(h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_start_blocked_on_list(&j, q, 4000, "{w:tidy}:queue", 1);
    assert_int_equal(lb_lock_release(h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    assert_int_equal(lb_lock_release(q, lb_on_conn(j.c)), LB_OK);
    lbt_job_end(&j);
    redisReply *r = redisCommand(lbt_conn, "KEYS *w:tidy*");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_true(r->elements >= 1); /* the state hash, which notes the last holder */
    for (size_t i = 0; i < r->elements; i++) {
        long long ttl = lbt_int(lbt_conn, "PTTL %s", r->element[i]->str);
        if (ttl <= 0) fail_msg("%s has no TTL (%lld)", r->element[i]->str, ttl);
    }
    freeReplyObject(r);
    lb_lock_free(h);
    lb_lock_free(q);
}

/* A wait attempt of `token` on fair lock `k` (TTL 30 s, lease 3 s, blocking
 * on its grant list), run as the library runs it; returns the reply. */
/* A wait attempt of `token` on `k` as a grant-list waiter with a lease of
 * `lease` ms. */
static redisReply *fair_wait_attempt_leased(const char *k, const char *token, const char *lease) {
    char arg[128];
    snprintf(arg, sizeof arg, "wait %s 30000 %s *", token, lease);
    redisReply *r = redisCommand(lbt_conn, "EVAL %s 3 %s {%s}:queue {%s}:fair %s",
                                 lb__script_modern_fair_acquire.body, k, k, k, arg);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_ARRAY) fail_msg("wait attempt: %s", r->str ? r->str : "?");
    return r;
}

static redisReply *fair_wait_attempt(const char *k, const char *token) {
    return fair_wait_attempt_leased(k, token, "3000");
}

/* Tokens as a lockbridge client draws them (a release checks the grants it
 * pushes itself). */
#define CCCC "cccccccccccccccccccccccccccccccc"
#define DDDD "dddddddddddddddddddddddddddddddd"

/* Fair lock `k`: h took it, q queued on its grant list and was handed it
 * (the release noted q as the holder); q now holds, the queue is empty. */
static void hand_to_second(const char *k, lb_lock **h, lb_lock **q) {
    char queue[64];
    snprintf(queue, sizeof queue, "{%s}:queue", k);
    *h = lbt_new_lock(k, 1, 2, 100);
    *q = lbt_new_lock(k, 1, 5000, 5000);
    assert_int_equal(lb_lock_try_acquire(*h, lb_on_conn(lbt_conn)), LB_OK);
    lbt_job j;
    lbt_start_blocked_on_list(&j, *q, 4000, queue, 1);
    assert_int_equal(lb_lock_release(*h, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_job_join(&j), LB_OK);
    redisFree(j.c); /* q goes on holding */
    assert_string_equal(lbt_get(lbt_conn, k), lb_lock_info_of(*q).token);
}

/* A waiter that keeps its place beside a fair holder costs the server the
 * attempt's script and six commands in it (TIME, GET, one read of the
 * state, ZADD, HSET, and a PEXPIRE NX that gives a queue formed anew its
 * TTL): the holder's expiry is the one its grant noted, and the queue's
 * TTLs, kept for twice a lease at a time, are not read or written again
 * while they have a lease or more to run. Its wait's hint stays within what
 * the key has left. (Each wait used to read the key's TTL and both TTLs and
 * write them back: nine or ten commands.) */
static void test_a_waiter_keeping_its_place_beside_a_fair_holder_costs_seven_commands(void **state) {
    (void)state;
    lb_lock *h, *q;
    hand_to_second("w:cost", &h, &q);
    freeReplyObject(fair_wait_attempt("w:cost", CCCC)); /* queued anew: TTLs set */
    /* What the key has left is read before the attempt: the hint, taken
     * later, may be no more (read after, a busy host's delay between the
     * two made a right hint look too long). */
    long long left = lbt_int(lbt_conn, "PTTL w:cost");
    long long before = server_calls();
    redisReply *r = fair_wait_attempt("w:cost", CCCC);
    long long cost = server_calls() - before;
    assert_int_equal(r->elements, 4);
    assert_int_equal(r->element[0]->integer, 0);
    long long hint = r->element[1]->integer;
    if (hint <= 0 || hint > left + 1) fail_msg("hint %lld, the key had %lld ms left", hint, left);
    freeReplyObject(r);
    if (cost > 7) fail_msg("the attempt ran %lld commands", cost);
    assert_true(lbt_int(lbt_conn, "PTTL {w:cost}:queue") > 3000);
    assert_true(lbt_int(lbt_conn, "PTTL {w:cost}:fair") > 3000);
    lbt_del_matching(lbt_conn, "*w:cost*");
    lb_lock_free(h);
    lb_lock_free(q);
}

/* A wait attempt of `token` whose grant comes on the channel `inbox`. */
static void fair_wait_on_inbox(const char *k, const char *token, const char *inbox) {
    char arg[128];
    snprintf(arg, sizeof arg, "wait %s 30000 3000 %s", token, inbox);
    redisReply *r = redisCommand(lbt_conn, "EVAL %s 3 %s {%s}:queue {%s}:fair %s",
                                 lb__script_modern_fair_acquire.body, k, k, k, arg);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_ARRAY) fail_msg("wait attempt: %s", r->str ? r->str : "?");
    freeReplyObject(r);
}

/* A hand-off to a waiter told on its inbox (a wait through a waiter) leaves
 * the queue's TTL note (~until) alone while others still wait: the next
 * wait to join keeps to seven commands. (The release deleted the note at
 * every such hand-off, as if the queue were empty: every wait then read and
 * wrote both TTLs again, nine or ten commands, about 1.6 more per turn in
 * the bench's fair row through waiters.) */
static void test_a_wait_joining_after_a_hand_off_to_an_inbox_costs_seven_commands(void **state) {
    (void)state;
    lbt_cmd_ok(lbt_conn, "SET w:inbox aaaa PX 30000");
    fair_wait_on_inbox("w:inbox", CCCC, "lb-inbox:c");
    fair_wait_on_inbox("w:inbox", DDDD, "lb-inbox:d");
    redisReply *r = redisCommand(lbt_conn, "EVAL %s 4 w:inbox {w:inbox}:queue {w:inbox}:fair "
                                       "{w:inbox}:grant:aaaa %s",
                                 lb__script_modern_fair_release.body, "aaaa 0 200 - {w:inbox}:released");
    assert_true(r && r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    assert_string_equal(lbt_get(lbt_conn, "w:inbox"), CCCC);
    long long before = server_calls();
    fair_wait_on_inbox("w:inbox", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "lb-inbox:e");
    long long cost = server_calls() - before;
    if (cost > 7) fail_msg("the wait ran %lld commands", cost);
    assert_true(lbt_int(lbt_conn, "PTTL {w:inbox}:queue") > 3000);
    assert_true(lbt_int(lbt_conn, "PTTL {w:inbox}:fair") > 3000);
    lbt_del_matching(lbt_conn, "*w:inbox*");
}

/* A queue formed again (after a hand-off emptied it, or after another
 * program deleted it while the state still ran for long) lapses on its own:
 * the wait that forms it gives it a TTL, whatever the state says of the
 * queue's last TTL. */
static void test_a_queue_formed_again_is_given_a_ttl(void **state) {
    (void)state;
    static const char *const rows[] = {"emptied by a hand-off", "deleted by another program"};
    for (int i = 0; i < 2; i++) {
        lb_lock *h, *q;
        hand_to_second("w:again", &h, &q);
        freeReplyObject(fair_wait_attempt("w:again", CCCC));
        if (i == 0) {
            /* q hands the lock on to cccc: the queue empties again. */
            assert_int_equal(lb_lock_release(q, lb_on_conn(lbt_conn)), LB_OK);
            assert_string_equal(lbt_get(lbt_conn, "w:again"), CCCC);
        } else {
            lbt_cmd_ok(lbt_conn, "DEL {w:again}:queue");
        }
        freeReplyObject(fair_wait_attempt("w:again", DDDD));
        long long ttl = lbt_int(lbt_conn, "PTTL {w:again}:queue");
        if (ttl <= 0) fail_msg("%s: the queue formed again has PTTL %lld", rows[i], ttl);
        lbt_del_matching(lbt_conn, "*w:again*");
        lb_lock_free(h);
        lb_lock_free(q);
    }
}

/* Another program deletes the queue beside waiters with different leases.
 * The wait that forms it again gives it what the state notes the TTLs have
 * left (~until), which covers every live waiter's lease: twice its own,
 * shorter lease let the queue lapse under a live waiter with a longer one
 * (cccc here), whose refreshes left the queue's TTL alone, and the next
 * release deleted the key instead of handing it over. */
static void test_a_queue_formed_again_outlives_every_live_lease(void **state) {
    (void)state;
    lb_lock *h, *q;
    hand_to_second("w:lease", &h, &q);
    freeReplyObject(fair_wait_attempt_leased("w:lease", CCCC, "10000"));
    lbt_cmd_ok(lbt_conn, "DEL {w:lease}:queue");
    freeReplyObject(fair_wait_attempt_leased("w:lease", DDDD, "1000"));
    freeReplyObject(fair_wait_attempt_leased("w:lease", CCCC, "10000"));
    long long ttl = lbt_int(lbt_conn, "PTTL {w:lease}:queue");
    if (ttl < 9000)
        fail_msg("the queue formed again lapses in %lld ms, within cccc's lease of 10000 ms", ttl);
    lbt_del_matching(lbt_conn, "*w:lease*");
    lb_lock_free(h);
    lb_lock_free(q);
}

/* The holder's expiry as the state notes it (~hexp) is another program's to
 * spoil: a value no release writes (no decimal integer, or further off than
 * any fair TTL) is not taken as the wait's hint; the key's own TTL is. (As
 * it was taken, 1e300 or inf came back as -2^63 and a far date past 10^12
 * ms: every fair wait on the key failed with LB_EPROTO.) */
static void test_a_wait_does_not_trust_a_spoiled_holder_expiry(void **state) {
    (void)state;
    static const char *const rows[] = {"1e300", "inf", "99999999999999999", "1e14",
                                       "-5",    "12abc", "",                 "0x7fffffffffff"};
    lb_lock *h, *q;
    hand_to_second("w:hexp", &h, &q);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbt_cmd_ok(lbt_conn, "HSET {w:hexp}:fair ~hexp %s", rows[i]);
        redisReply *r = fair_wait_attempt("w:hexp", CCCC);
        long long ok = r->element[0]->integer, hint = r->element[1]->integer;
        freeReplyObject(r);
        if (ok != 0 || hint < 0 || hint > 30000)
            fail_msg("~hexp '%s': reply %lld, hint %lld ms (the key has %lld)", rows[i], ok, hint,
                     lbt_int(lbt_conn, "PTTL w:hexp"));
    }
    lbt_del_matching(lbt_conn, "*w:hexp*");
    lb_lock_free(h);
    lb_lock_free(q);
}

/* A grant names the next holder's fencing number in digits however large it
 * is (below 2^53, past which the counter is refused): Lua wrote 10^14 and
 * above as "1e+14", which no waiter reads, and every hand-off then waited
 * for the waiter's next attempt. */
static void test_a_grant_writes_a_large_fencing_number_in_digits(void **state) {
    (void)state;
    lbt_del_matching(lbt_conn, "*w:big*");
    hold_with_one_waiter("w:big", "99999999999999 30000 *", 0);
    lbt_cmd_ok(lbt_conn, "SET {w:big}:fence 99999999999999");
    redisReply *r = redisCommand(lbt_conn, "EVAL %s 5 w:big {w:big}:queue {w:big}:fair "
                                       "{w:big}:grant:aaaa {w:big}:fence %s",
                                 lb__script_modern_fair_release.body, "aaaa 16 200 - w:big:ch");
    assert_non_null(r);
    if (r->type != REDIS_REPLY_STRING) fail_msg("release: %s", r->str ? r->str : "?");
    assert_string_equal(r->str, "bbbb 1 100000000000000 -");
    freeReplyObject(r);
    lbt_del_matching(lbt_conn, "*w:big*");
}

/* The script that pushes a grant refuses arguments it cannot read before it
 * writes anything: Redis keeps what a failing script wrote, and a grant list
 * pushed without its TTL would never lapse. (The key holds the grantee's
 * token with no TTL, so a grant's list would take the TTL given.) */
static void test_the_grant_push_refuses_bad_arguments_before_it_writes(void **state) {
    (void)state;
    static const struct { const char *grant, *ms; } rows[] = {
        {"nothex 1 0 0 -", "1000"}, /* no grantee */
        {"abcd 0 0 -", "soon"},     /* a window's wake-up, no TTL */
        {"abcd 1 0 0 -", "soon"},   /* a grant, no TTL */
        {"abcd 0 0 -", "0"},        /* a TTL that deletes the wake-up at once */
        {"abcd 0 0 -", "100000000000000000000"}, /* past 2^53: a float to PEXPIRE */
    };
    lbt_cmd_ok(lbt_conn, "SET w:push abcd");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        redisReply *r = redisCommand(lbt_conn, "EVAL %s 2 w:push {w:push}:grant:abcd %s %s",
                                     lb__script_modern_fair_push.body, rows[i].grant, rows[i].ms);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_ERROR) fail_msg("row %zu: no error", i);
        freeReplyObject(r);
        assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:push}:grant:abcd"), 0);
    }
    lbt_cmd_ok(lbt_conn, "DEL w:push");
}

/* The fair scripts refuse numbers no lockbridge client sends (a TTL or lease
 * of 0, with a leading zero, which Redis reads as no integer, or past 10^13
 * ms, which Lua would hand to SET PX or PEXPIRE as a float) before their
 * first write; a queued entry with such a TTL counts as lapsed. Before, a fenced attempt with TTL 0 spent a fencing
 * number and then failed, a wait queued a TTL that every release then
 * failed on after popping it (the lock kept, the waiter's place lost), a
 * lease of 0 deleted the queue and state, a lease past the bound failed after
 * queueing, and a release took a window length it could not use (a window
 * that never falls due) without a word. */
static void test_the_fair_scripts_refuse_numbers_they_cannot_use_before_they_write(void **state) {
    (void)state;
    static const char *const attempts[] = {
        "try cccc 0 3000",
        "try cccc 030000 3000", /* Redis reads no integer with a leading zero */
        "wait cccc 030000 3000",
        "wait cccc 100000000000000000000 3000",
        "wait cccc 30000 0",
        "wait cccc 30000 100000000000000000000",
    };
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) {
        lbt_del_matching(lbt_conn, "*w:num*");
        lbt_cmd_ok(lbt_conn, "SET {w:num}:fence 5");
        if (strncmp(attempts[i], "wait", 4) == 0) lbt_cmd_ok(lbt_conn, "SET w:num aaaa PX 30000");
        redisReply *r = redisCommand(lbt_conn, "EVAL %s 4 w:num {w:num}:queue {w:num}:fair "
                                           "{w:num}:fence %s",
                                     lb__script_modern_fair_acquire.body, attempts[i]);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_ERROR) fail_msg("attempt %zu: no error", i);
        freeReplyObject(r);
        assert_string_equal(lbt_get(lbt_conn, "{w:num}:fence"), "5");
        assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:num}:queue {w:num}:fair"), 0);
        if (attempts[i][0] == 't') assert_int_equal(lbt_int(lbt_conn, "EXISTS w:num"), 0);
    }
    static const struct {
        const char *args, *entry; /* the release's arguments; bbbb's queue entry */
        int error;                /* 1: refused, nothing changed; 0: released */
    } releases[] = {
        {"aaaa 1 100000000000000000000 - {w:num}:released", "99999999999999 30000 *", 1},
        {"aaaa 0 200 - {w:num}:released", "99999999999999 100000000000000000000 *", 0},
        {"aaaa 0 200 - {w:num}:released", "99999999999999 030000 *", 0},
    };
    for (size_t i = 0; i < sizeof releases / sizeof releases[0]; i++) {
        lbt_del_matching(lbt_conn, "*w:num*");
        hold_with_one_waiter("w:num", releases[i].entry, 1);
        redisReply *r = redisCommand(lbt_conn, "EVAL %s 4 w:num {w:num}:queue {w:num}:fair "
                                           "{w:num}:grant:aaaa %s",
                                     lb__script_modern_fair_release.body, releases[i].args);
        assert_non_null(r);
        if (releases[i].error) {
            if (r->type != REDIS_REPLY_ERROR) fail_msg("release %zu: no error", i);
            assert_string_equal(lbt_get(lbt_conn, "w:num"), "aaaa");
            assert_int_equal(lbt_int(lbt_conn, "ZCARD {w:num}:queue"), 1);
            assert_true(lbt_int(lbt_conn, "PTTL {w:num}:queue") > 0);
        } else {
            if (r->type != REDIS_REPLY_INTEGER) fail_msg("release %zu: %s", i, r->str ? r->str : "?");
            assert_int_equal(r->integer, 1);
            assert_int_equal(lbt_int(lbt_conn, "EXISTS w:num"), 0);
        }
        freeReplyObject(r);
    }
    lbt_del_matching(lbt_conn, "*w:num*");
}

/* A value of another type at the successor's grant list name (no lockbridge
 * client writes one) refuses the release's push. The hand-off stands (the
 * grantee's next attempt, once its BLPOP ends empty or is refused, finds the
 * lock its own), and a window opens as it would, the head kept in a queue
 * that still lapses. Before, the release failed after popping the
 * head: the head was lost, or put back into a queue with no TTL. */
static void test_a_grant_list_of_another_type_does_not_stop_a_release(void **state) {
    (void)state;
    static const struct {
        const char *args; /* the release's arguments */
        int window;       /* an outsider seen and a hand-off made: a window is due */
        long long reply;
        const char *key_after;     /* NULL: deleted */
        long long queued_after;
    } rows[] = {
        {"aaaa 0 200 bbbb {w:alien}:released", 0, 2, "bbbb", 0},
        {"aaaa 1 200 bbbb {w:alien}:released", 1, 1, NULL, 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbt_del_matching(lbt_conn, "*w:alien*");
        hold_with_one_waiter("w:alien", "99999999999999 30000 *", rows[i].window);
        lbt_cmd_ok(lbt_conn, "SET {w:alien}:grant:bbbb alien");
        redisReply *r = redisCommand(lbt_conn, "EVAL %s 4 w:alien {w:alien}:queue {w:alien}:fair "
                                           "{w:alien}:grant:bbbb %s",
                                     lb__script_modern_fair_release.body, rows[i].args);
        assert_non_null(r);
        if (r->type != REDIS_REPLY_INTEGER) fail_msg("row %zu: %s", i, r->str ? r->str : "?");
        assert_int_equal(r->integer, rows[i].reply);
        freeReplyObject(r);
        if (rows[i].key_after) assert_string_equal(lbt_get(lbt_conn, "w:alien"), rows[i].key_after);
        else assert_int_equal(lbt_int(lbt_conn, "EXISTS w:alien"), 0);
        assert_int_equal(lbt_int(lbt_conn, "ZCARD {w:alien}:queue"), rows[i].queued_after);
        if (rows[i].queued_after) assert_true(lbt_int(lbt_conn, "PTTL {w:alien}:queue") > 0);
        assert_string_equal(lbt_get(lbt_conn, "{w:alien}:grant:bbbb"), "alien");
    }
    lbt_del_matching(lbt_conn, "*w:alien*");
}

/* A value of another type at the queue's or the state's name (no lockbridge
 * client writes one) leaves no fair hand-off possible, but the holder still
 * releases: the lock is deleted as a plain release would delete it, and the
 * foreign value is left alone. A grantee that finds the lock handed to it
 * holds it, whatever it could not tidy. Before, the release failed (for a
 * state of another type, after popping the head) with the lock kept until
 * its TTL, and the grantee's attempt failed with the key holding its token. */
static void test_a_queue_or_state_of_another_type_does_not_stop_a_release(void **state) {
    (void)state;
    static const struct {
        const char *alien; /* the companion that holds a string */
        int queued;        /* a waiter queued (with a readable state) */
    } rows[] = {
        {"{w:alien}:fair", 1},
        {"{w:alien}:queue", 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbt_del_matching(lbt_conn, "*w:alien*");
        lbt_cmd_ok(lbt_conn, "SET w:alien aaaa PX 30000");
        if (rows[i].queued) lbt_cmd_ok(lbt_conn, "ZADD {w:alien}:queue 1 bbbb");
        lbt_cmd_ok(lbt_conn, "SET %s alien", rows[i].alien);
        redisReply *r = redisCommand(lbt_conn, "EVAL %s 4 w:alien {w:alien}:queue {w:alien}:fair "
                                           "{w:alien}:grant:bbbb %s",
                                     lb__script_modern_fair_release.body,
                                     "aaaa 16 200 bbbb {w:alien}:released");
        assert_non_null(r);
        if (r->type != REDIS_REPLY_INTEGER) fail_msg("row %zu: %s", i, r->str ? r->str : "?");
        assert_int_equal(r->integer, 1);
        freeReplyObject(r);
        assert_int_equal(lbt_int(lbt_conn, "EXISTS w:alien"), 0);
        assert_string_equal(lbt_get(lbt_conn, rows[i].alien), "alien");
        assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:alien}:grant:bbbb"), 0);

        /* Handed the lock, bbbb's attempt finds it its own. */
        lbt_cmd_ok(lbt_conn, "SET w:alien bbbb PX 30000");
        r = redisCommand(lbt_conn, "EVAL %s 3 w:alien {w:alien}:queue {w:alien}:fair %s",
                         lb__script_modern_fair_acquire.body, "wait bbbb 30000 3000 *");
        assert_non_null(r);
        if (r->type != REDIS_REPLY_ARRAY) fail_msg("row %zu: %s", i, r->str ? r->str : "?");
        assert_true(r->elements >= 1 && r->element[0]->type == REDIS_REPLY_INTEGER);
        assert_int_equal(r->element[0]->integer, 1);
        freeReplyObject(r);
        assert_string_equal(lbt_get(lbt_conn, rows[i].alien), "alien");
    }
    lbt_del_matching(lbt_conn, "*w:alien*");
}

/* End to end: a program writes a string over a fair lock's state while it
 * is held. The holder's release still frees the lock; fair attempts then fail
 * with WRONGTYPE, a clear error that writes nothing, until the string goes. */
static void test_a_fair_lock_beside_a_foreign_state_releases_and_then_refuses_clearly(void **state) {
    (void)state;
    lb_lock *a = lbt_new_lock("w:foreign", 1, 2, 100), *b = lbt_new_lock("w:foreign", 1, 2, 100);
    lbt_del_matching(lbt_conn, "*w:foreign*");
    assert_int_equal(lb_lock_try_acquire(a, lb_on_conn(lbt_conn)), LB_OK);
    lbt_cmd_ok(lbt_conn, "SET {w:foreign}:fair alien");
    assert_int_equal(lb_lock_release(a, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:foreign"), 0);
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(lbt_conn)), LB_EWRONGTYPE);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:foreign {w:foreign}:queue"), 0);
    /* A blocking wait on one connection takes a free key with a plain SET NX
     * first, which reads no state; its release deletes the key as a plain
     * one does. Held, a wait on a key queues, and the state refuses it. */
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(lbt_conn), 200), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lbt_int(lbt_conn, "EXISTS w:foreign"), 0);
    lbt_cmd_ok(lbt_conn, "SET w:foreign someone PX 30000");
    assert_int_equal(lb_lock_acquire(b, lb_on_conn(lbt_conn), 200), LB_EWRONGTYPE);
    lbt_cmd_ok(lbt_conn, "DEL w:foreign");
    assert_int_equal(lbt_int(lbt_conn, "EXISTS {w:foreign}:queue"), 0);
    assert_string_equal(lbt_get(lbt_conn, "{w:foreign}:fair"), "alien");
    lbt_cmd_ok(lbt_conn, "DEL {w:foreign}:fair");
    assert_int_equal(lb_lock_try_acquire(b, lb_on_conn(lbt_conn)), LB_OK);
    assert_int_equal(lb_lock_release(b, lb_on_conn(lbt_conn)), LB_OK);
    lbt_del_matching(lbt_conn, "*w:foreign*");
    lb_lock_free(a);
    lb_lock_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_release_chooses_between_the_queue_and_the_baton),
        cmocka_unit_test(test_a_release_that_passes_the_baton_costs_six_commands),
        cmocka_unit_test(test_a_baton_release_opens_a_window_for_a_noted_outsider),
        cmocka_unit_test(test_a_note_of_a_lockbridge_client_opens_windows_without_a_stand_back),
        cmocka_unit_test(test_a_queue_hand_off_beside_a_noted_outsider_says_only_handed),
        cmocka_unit_test(test_a_probe_opens_a_window_only_when_due_and_rarer_each_time),
        cmocka_unit_test(test_a_probe_not_due_costs_two_commands_more),
        cmocka_unit_test(test_an_outsiders_release_in_an_open_window_passes_no_baton),
        cmocka_unit_test(test_a_baton_is_taken_only_as_the_release_wrote_it),
        cmocka_unit_test(test_a_baton_with_no_lease_left_is_no_acquisition),
        cmocka_unit_test(test_no_key_a_fair_lock_writes_is_left_without_a_ttl),
        cmocka_unit_test(test_a_waiter_keeping_its_place_beside_a_fair_holder_costs_seven_commands),
        cmocka_unit_test(test_a_wait_joining_after_a_hand_off_to_an_inbox_costs_seven_commands),
        cmocka_unit_test(test_a_queue_formed_again_is_given_a_ttl),
        cmocka_unit_test(test_a_queue_formed_again_outlives_every_live_lease),
        cmocka_unit_test(test_a_wait_does_not_trust_a_spoiled_holder_expiry),
        cmocka_unit_test(test_a_grant_writes_a_large_fencing_number_in_digits),
        cmocka_unit_test(test_the_grant_push_refuses_bad_arguments_before_it_writes),
        cmocka_unit_test(test_the_fair_scripts_refuse_numbers_they_cannot_use_before_they_write),
        cmocka_unit_test(test_a_grant_list_of_another_type_does_not_stop_a_release),
        cmocka_unit_test(test_a_queue_or_state_of_another_type_does_not_stop_a_release),
        cmocka_unit_test(test_a_fair_lock_beside_a_foreign_state_releases_and_then_refuses_clearly),
    };
    return cmocka_run_group_tests(tests, lbt_wait_setup, lbt_wait_teardown);
}
