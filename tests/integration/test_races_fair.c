/* The fair token lock's races against a real redis-server: its blocking wait
 * step by step, and the searches of fair, list and baton fleets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "harness/redis_server.h"
#include "harness/sleep.h"
#include "harness/race_search.h"
#include "race/race.h"

static lbt_redis server;

/* ---- The fair token lock: a blocking wait, step by step ---------------------------- */

/* A wait keeps one token and one queue place until it holds the lock; a
 * release hands the lock to the oldest live waiter and publishes the grant on
 * its inbox ("X@" reads it). Two schedules replay the bugs of the old fair
 * mode, each as the search found it (see test_exploration_of_fair_lock_fleets). */
static void test_fair_lock_races(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
        {"lb-fair: a release hands the lock to the waiter, which reads the grant",
         {"lb-fair", "lb-fair"}, 0,
         "A:modern_fair_acquire B:modern_fair_acquire A:modern_fair_release B@ "
         "B:modern_fair_release A?", LBR_OK, 0, 0},
        {"lb-fair: a waiter finds its hand-off by an attempt", {"lb-fair", "lb-fair"}, 0,
         "A:modern_fair_acquire B:modern_fair_acquire A:modern_fair_release +1000 "
         "B:modern_fair_acquire B:modern_fair_release", LBR_OK, 0, 0},
        {"lb-fair: a waiter that lapsed from the queue does not block the lock",
         {"lb-fair", "lb-fair"}, 0, "A B +6000 A A B A B@ B", LBR_OK, 0, 0},
        {"a queue joined without a TTL never lapses", {"lb-fair", "naive-queue-forever"}, 0,
         "A:modern_fair_acquire B:ZADD", LBR_VIOLATION, "queue is left without a TTL", -1},
        /* Bug B: the hand-off found by B's attempt 3 s after the release
         * leases what the key has left, not the whole TTL from the attempt:
         * 3 s later the key has lapsed, and so has B's lease, when A takes it. */
        {"lb-fair: a hand-off found late leases what the key has left", {"lb-fair", "lb-fair"}, 0,
         "A B A +3000 B +3000 A", LBR_OK, 0, 0},
        /* Bug C: B's grant lapsed unread, A took the lock, B queued again (a
         * new place) and then read the late grant: it names the old place. */
        {"lb-fair: a late grant for an earlier place grants nothing", {"lb-fair", "lb-fair"}, 0,
         "A B A +6000 A B B@ B", LBR_OK, 0, 0},
        {"lb-fair-fenced: the grant carries the fencing number", {"lb-fair-fenced", "lb-fair-fenced"}, 0,
         "A B A B@ B A?", LBR_OK, 0, 0},
        {"lb-fair beside lb-modern: the plain token lock ignores the queue", {"lb-fair", "lb-modern"}, 0,
         "A B A B +6000 A A B A B", LBR_OK, 0, 0},
        /* Grant lists: A took the lock free, so its release learns the head
         * from the script and pushes the grant itself (one script); B,
         * granted with no one behind it, releases in one command. */
        {"lb-fair-list: the releaser pushes the grant, the waiter pops it", {"lb-fair-list", "lb-fair-list"}, 0,
         "A:modern_fair_acquire B:modern_fair_acquire A:modern_fair_release A:modern_fair_push B@ "
         "B:modern_fair_release A?", LBR_OK, 0, 0},
        /* A grant list lapses with the key its grant wrote (one PX for
         * both): no late grant outlives its lock to be read. */
        {"lb-fair-list: a grant left unread lapses with its key", {"lb-fair-list", "lb-fair-list"}, 0,
         "A B A A +6000 B@", LBR_BAD_SCHEDULE, "B has no message waiting", -1},
        {"lb-fair-list: a grantee that died leaves the lock free after its TTL",
         {"lb-fair-list", "lb-fair-list"}, 0, "A B A A B! +6000 A?", LBR_OK, 0, 0},
        {"lb-fair-list-fenced: the pushed grant carries the fencing number",
         {"lb-fair-list-fenced", "lb-fair-list-fenced"}, 0, "A B A A B@ B A?", LBR_OK, 0, 0},
        /* Waits with a deadline: B's third attempt is its leave. Left, it
         * is handed nothing: A's release frees the lock (no grant to push:
         * A's next step is an attempt), and A takes it again. */
        {"lb-fair-list-leave: a wait out of time leaves the queue",
         {"lb-fair-list", "lb-fair-list-leave"}, 0,
         "A B B B A:modern_fair_release A:modern_fair_acquire A:modern_fair_release B?", LBR_OK,
         0, 0},
        /* The hand-off beat the leave: the leave finds the key its own and
         * holds it; the grant A pushes afterwards is never read. */
        {"lb-fair-list-leave: a leave that finds the lock handed to it holds it",
         {"lb-fair-list", "lb-fair-list-leave"}, 0,
         "A B B A:modern_fair_release B:modern_fair_acquire B:modern_fair_release "
         "A:modern_fair_push A?", LBR_OK, 0, 0},
        /* Yield windows (the "-yield" kinds: after every hand-off, once an
         * outsider was seen, 500 ms). C (lb-modern) holding while B's grant
         * is the last noted makes D's attempt note an outsider. D takes the
         * lock with B and A queued behind; B's grant names A; B's release
         * finds a window due: A keeps its place, woken on its list with a
         * grant of place 0, which grants nothing. The outsider gets in; A,
         * once the window has passed. */
        {"lb-fair-list-yield: a window wakes the head, and an outsider gets in",
         {"lb-fair-list-yield", "lb-fair-list-yield", "lb-modern", "lb-fair-list-yield"}, 0,
         "A B A A B@ B C D C D B A D D D B@ B:modern_fair_release A@ A:modern_fair_acquire "
         "C:SET C:modern_release +600 A:modern_fair_acquire A:modern_fair_release", LBR_OK, 0, 0},
        /* Three waiters: B's grant names C, queued behind it, so B's release
         * names C's list and the script pushes there itself (no push step
         * of B's; C@ would find nothing otherwise). */
        {"lb-fair-list: a grant names the next waiter, whose list the release names",
         {"lb-fair-list", "lb-fair-list", "lb-fair-list"}, 0,
         "A B C A A B@ B:modern_fair_release C@ C:modern_fair_release B?", LBR_OK, 0, 0},
        /* The releaser's own push comes after a pause: B's key lapsed, C took
         * the free lock and B queued again. The push finds the key no longer
         * B's and pushes nothing (before, its LPUSH made a list the place
         * check alone kept from granting: found by
         * test_exploration_of_fair_list_fleets_of_three with it removed). */
        {"lb-fair-list: a grant whose key lapsed before its push is not pushed",
         {"lb-fair-list", "lb-fair-list", "lb-fair-list"}, 0,
         "A B C A +6000 C:modern_fair_acquire B:modern_fair_acquire A:modern_fair_push B@",
         LBR_BAD_SCHEDULE, "B has no message waiting", -1},
        /* Another program left a string at C's grant list name (D): B's
         * release, whose grant named C, cannot push there. It hands the lock
         * to C all the same, and C finds it its own at its next attempt
         * (before, the push failed the release after C was popped). */
        {"lb-fair-list: a string at the successor's grant list does not stop a release",
         {"lb-fair-list", "lb-fair-list", "lb-fair-list", "spoil-grants"}, 0,
         "A B C A A B@ D:EVAL B:modern_fair_release C:modern_fair_acquire "
         "C:modern_fair_release A?", LBR_OK, 0, 0},
        /* C replaces the state with a string (3000 ms) while B waits: A's
         * release can hand nothing off and releases as a plain one would
         * (before, it failed after popping B). No fair attempt succeeds
         * until the string lapses. */
        {"lb-fair-list: a state of another type does not stop a release",
         {"lb-fair-list", "lb-fair-list", "spoil-fair"}, 0,
         "A B C:SET A:modern_fair_release +4000 B?", LBR_OK, 0, 0},
        /* A handed the lock to B; C then replaces the state, then the
         * queue: B's attempt finds the lock its own and holds it (before,
         * tidying its queue entry failed the attempt, the key holding B's
         * token), and releases it. */
        {"lb-fair-list: a grantee holds its hand-off beside a queue of another type",
         {"lb-fair-list", "lb-fair-list", "spoil-fair"}, 0,
         "A B A:modern_fair_release A:modern_fair_push C:SET C:SET B:modern_fair_acquire "
         "B:modern_fair_release +4000 A?", LBR_OK, 0, 0},
    };
    LBT_RACE_TABLE(&server, t);
}

/* A search of a fair fleet: its clients, the pauses' length and number, the
 * depth, the crashes allowed, and the state it starts from (NULL: an empty
 * world). */
typedef struct fair_search {
    const char *kinds[LBR_MAX_CLIENTS];
    int64_t jump_ms;
    int jumps;
    int depth;
    int crashes;
    const char *prefix;
} fair_search;

/* Every interleaving of a fair fleet up to a bound: attempts, hand-off reads
 * (one), the pauses and the crashes allowed. Pauses of 1000 ms against a
 * TTL of 1500 ms let a key lapse between two of them and a lease outlive the
 * first; pauses of 2000 ms let a grant lapse before it is read. Rows that
 * find nothing must have searched. */
/* `ttls`: per client, ms (NULL or 0: the world's 1500 ms); `must_find`: the
 * row expects a counterexample (see search_depth). */
static lbr_explore_result explore_fair_ttls(const fair_search *f, const int64_t *ttls,
                                            int must_find) {
    lbr_explore_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.world.key = "race:fair";
    cfg.world.ttl_ms = 1500;
    lb_codec_parse(&cfg.world.codec, "ms");
    memcpy(cfg.world.kinds, f->kinds, sizeof cfg.world.kinds);
    for (int i = 0; ttls && i < LBR_MAX_CLIENTS && f->kinds[i]; i++)
        cfg.world.client_ttl_ms[i] = ttls[i];
    cfg.depth = f->depth;
    cfg.max_crashes = f->crashes;
    cfg.max_jumps = f->jumps;
    cfg.jump_ms = f->jump_ms;
    cfg.max_reads = 1;
    cfg.prefix = f->prefix;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    lbr_explore_result res = lbt_search(&server, &cfg, must_find);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  explored");
    for (int i = 0; i < LBR_MAX_CLIENTS && f->kinds[i]; i++)
        printf("%s%s", i ? " + " : " ", f->kinds[i]);
    for (int i = 0; ttls && i < LBR_MAX_CLIENTS && f->kinds[i]; i++)
        printf("%s%lld", i ? "/" : " (TTLs ms ", (long long)(ttls[i] ? ttls[i] : 1500));
    if (ttls) printf(")");
    printf(", %d pause%s of %lld ms, depth %d, %d crash%s%s%s", f->jumps,
           f->jumps == 1 ? "" : "s", (long long)f->jump_ms, cfg.depth, f->crashes, f->crashes == 1 ? "" : "es", f->prefix ? ", after " : "",
           f->prefix ? f->prefix : "");
    printf(", %.1f s", (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    lbt_print_outcome(&res);
    if (!res.violation) assert_true(res.schedules > 100);
    return res;
}

static lbr_explore_result explore_fair(const fair_search *f) {
    return explore_fair_ttls(f, NULL, 0);
}

static void explore_fair_rows(const fair_search *rows, size_t n) {
    for (size_t i = 0; i < n; i++) {
        lbr_explore_result r = explore_fair(&rows[i]);
        if (r.violation) fail_msg("%s", r.report);
    }
}

/* Rows by what they reach: both pause lengths for two fair clients (which
 * found the old fair mode's bugs), the fenced grant and the plain token lock
 * beside the queue one step shallower where that keeps the test short. */
static void test_exploration_of_fair_lock_fleets(void **state) {
    (void)state;
    static const fair_search rows[] = {
        {{"lb-fair", "lb-fair"}, 1000, 2, 5, 1, NULL},
        {{"lb-fair", "lb-fair"}, 2000, 2, 5, 1, NULL},
        {{"lb-fair-fenced", "lb-fair-fenced"}, 1000, 2, 4, 1, NULL},
        {{"lb-fair-fenced", "lb-fair-fenced"}, 2000, 2, 4, 1, NULL},
        {{"lb-fair", "lb-modern"}, 1000, 2, 5, 1, NULL},
        {{"lb-fair", "lb-modern"}, 2000, 2, 4, 1, NULL},
        {{"lb-fair-list", "lb-fair-list"}, 1000, 2, 5, 1, NULL},
        {{"lb-fair-list", "lb-fair-list"}, 2000, 2, 5, 1, NULL},
        /* From the first hand-off pushed by its releaser (acquire, queue,
         * release, push), where the grant waits unread. */
        {{"lb-fair-list", "lb-fair-list"}, 2000, 2, 4, 1, "A B A A"},
        {{"lb-fair-list-fenced", "lb-fair-list-fenced"}, 2000, 2, 4, 1, "A B A A"},
        {{"lb-fair-list", "lb-fair"}, 2000, 2, 4, 1, NULL},
    };
    explore_fair_rows(rows, sizeof rows / sizeof rows[0]);
    /* Validities that differ: each hand-off writes the grantee's own. */
    static const fair_search mixed[] = {
        {{"lb-fair-list", "lb-fair-list"}, 2000, 2, 5, 1, NULL},
        {{"lb-fair-fenced", "lb-fair-fenced"}, 2000, 2, 4, 1, NULL},
    };
    static const int64_t ttls[][2] = {{1500, 6000}, {6000, 1500}};
    for (size_t i = 0; i < sizeof mixed / sizeof mixed[0]; i++) {
        lbr_explore_result r = explore_fair_ttls(&mixed[i], ttls[i], 0);
        if (r.violation) fail_msg("%s", r.report);
    }
}

/* Three grant-list waiters, from states only three reach: A holding with B
 * and C queued (its release, having taken the lock free, pushes B's grant
 * itself, a step others come between), and B holding by a grant that named
 * C (its release names C's list: the script pushes). When that push was
 * LPUSH then PEXPIRE, the first row, with take_grant's place check removed,
 * found B and C holding together (docs/races.md). */
static void test_exploration_of_fair_list_fleets_of_three(void **state) {
    (void)state;
    static const fair_search rows[] = {
        {{"lb-fair-list", "lb-fair-list", "lb-fair-list"}, 2000, 1, 5, 0, "A B C"},
        {{"lb-fair-list", "lb-fair-list", "lb-fair-list"}, 2000, 1, 3, 1, "A B C A A B@"},
    };
    explore_fair_rows(rows, sizeof rows / sizeof rows[0]);
}

/* Beside a program that writes strings where a fair lock keeps its companions
 * (which no lockbridge client does): at queued waiters' grant list names
 * (spoil-grants), from B holding by a grant that names C and from the yield
 * rows' state (B holds by a grant naming A, an outsider was seen: B's release
 * opens a window and wakes A); over the state and the queue (spoil-fair). A
 * release may not fail with the lock its own; no key may be left without a
 * TTL. On the release script that pushed with redis.call, the first two rows
 * find B's release failing (after 450 and 106 schedules); on the scripts
 * that read the queue and state with redis.call, the third finds A's release
 * failing after popping B (191), and, with that release fixed, the fourth
 * finds C told it did not get the lock its key holds (754). */
static void test_exploration_beside_strings_at_companion_names(void **state) {
    (void)state;
    static const fair_search rows[] = {
        {{"lb-fair-list", "lb-fair-list", "lb-fair-list", "spoil-grants"}, 2000, 1, 3, 0,
         "A B C A A B@"},
        {{"lb-fair-list-yield", "lb-fair-list-yield", "lb-modern", "lb-fair-list-yield",
          "spoil-grants"}, 600, 1, 3, 0, "A B A A B@ B C D C D B A D D D B@"},
        {{"lb-fair-list", "lb-fair-list", "spoil-fair"}, 2000, 1, 4, 1, NULL},
        {{"lb-fair-list", "lb-fair-list", "lb-fair-list", "spoil-fair"}, 2000, 1, 3, 0,
         "A B C A A B@"},
    };
    explore_fair_rows(rows, sizeof rows / sizeof rows[0]);
}

/* A candidate hand-off, modelled before it is built (tests/race/baton_parts.c):
 * waiters block on one list per lock, and a release that knows of a waiter
 * writes a fresh token at the key with its own TTL and pushes it there; the
 * receiver takes it without confirming it. It counts the shorter of its TTL
 * and the baton's from its pop less the baton's life (75% of the TTL here),
 * since a baton that waited in the list started its key's TTL before the
 * pop. From the state where A holds and B has waited once (set its mark,
 * found no baton), pauses of 800 ms against a TTL of 1500 ms let a baton
 * wait in the list and the key lapse after the next pause; TTLs of 500 and
 * 1500 ms give B a baton shorter than its own TTL. The first three rows must
 * find nothing. The last two are receivers that over-count (from the pop:
 * baton-no-margin; their own TTL: baton-own-ttl): each must be found holding
 * past its key's end while the other client takes the lapsed key. */
static void test_exploration_of_a_hand_off_on_one_list(void **state) {
    (void)state;
    static const int64_t mixed[] = {500, 1500};
    static const int64_t short_long[] = {400, 1500};
    static const struct {
        fair_search f;
        const int64_t *ttls;
        int expect_counterexample;
    } rows[] = {
        {{{"baton", "baton"}, 800, 2, 6, 0, "A B B B"}, NULL, 0},
        {{{"baton", "baton", "baton"}, 800, 2, 4, 1, "A B B B C C C"}, NULL, 0},
        {{{"baton", "baton"}, 600, 2, 6, 0, "A B B B"}, mixed, 0},
        {{{"baton-no-margin", "baton-no-margin"}, 800, 2, 5, 0, "A B B B"}, NULL, 1},
        {{{"baton-own-ttl", "baton-own-ttl"}, 600, 1, 5, 0, "A B B B"}, mixed, 1},
        /* The fair lock's own wait, baton first, then its queue. */
        {{{"lb-fair-baton", "lb-fair-baton"}, 800, 2, 6, 0, NULL}, NULL, 0},
        {{{"lb-fair-baton", "lb-fair-baton", "lb-fair-baton"}, 800, 1, 4, 0, "A B B B C C C"}, NULL, 0},
        {{{"lb-fair-baton", "lb-fair-baton", "lb-fair-list"}, 2000, 1, 4, 1, "A B B B"}, NULL, 0},
        {{{"lb-fair-baton", "lb-fair-baton"}, 350, 2, 5, 0, "A B B B A +90"}, short_long, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbr_explore_result r =
            explore_fair_ttls(&rows[i].f, rows[i].ttls, rows[i].expect_counterexample);
        if (r.violation != rows[i].expect_counterexample)
            fail_msg("row %zu: %s", i, r.violation ? r.report : "no counterexample found");
    }
}

/* Baton waits beside waits that queue without a mark, beside a lock named
 * like the baton's mark, and with TTLs of their own, under bounded liveness
 * (race.h: a release leaves no key held by nobody while others wait, and
 * LB_OK always comes with a lease to run). Each row starts from a state its
 * prefix builds (B holds by the baton; or C, another program's token
 * locker, holds "{race:baton2}:bwait" while B's wait is about to mark) and
 * searches on from there. Before the fixes, rows 0 and 1 found a holder by
 * baton that handed the lock to the queue leaving its mark, and the queued
 * waiter's release (on its grant list, or through a subscription) passing
 * the lock to nobody; row 2 found the mark written over C's lock, and D
 * taking that lock while C held it; row 3 found a release taking C's value
 * for a waiter's mark and passing the lock to nobody; row 4 found a baton
 * from a 100 ms TTL bringing B LB_OK with its lease over. Rows 5 to 7 put
 * a client outside fair mode whose every release goes as a fair holder's
 * beside the waiters: with a script that wrote the fresh token for such a
 * caller but pushed no baton, row 5 found the key held by nobody after 21
 * schedules. */
static void test_exploration_of_baton_waits_under_bounded_liveness(void **state) {
    (void)state;
    static const struct {
        const char *kinds[LBR_MAX_CLIENTS];
        const char *keys[LBR_MAX_CLIENTS]; /* NULL: the world's key */
        int64_t ttls[LBR_MAX_CLIENTS];     /* 0: 1500 ms */
        const char *prefix;
        int depth, jumps;
        int64_t jump_ms;
        int bounded; /* bounded liveness judged too */
    } rows[] = {
        {{"lb-fair-baton", "lb-fair-baton", "lb-fair-list"}, {NULL}, {0}, "A B B A B", 5, 0, 0, 1},
        {{"lb-fair-baton", "lb-fair-baton", "lb-fair"}, {NULL}, {0}, "A B B A B", 5, 0, 0, 1},
        {{"lb-fair-baton", "lb-fair-baton", "M1", "M1"},
         {NULL, NULL, "{race:baton2}:bwait", "{race:baton2}:bwait"}, {0}, "C A B", 3, 1, 200, 0},
        {{"lb-fair-baton", "lb-fair-baton", "M1", "M1"},
         {NULL, NULL, "{race:baton2}:bwait", "{race:baton2}:bwait"}, {0}, "C A B", 3, 1, 200, 1},
        {{"lb-fair-baton", "lb-fair-baton"}, {NULL}, {100, 1500}, "A B B", 3, 1, 80, 1},
        /* A client outside fair mode whose releases go as a fair holder's
         * (modern/fair.c, lb__fair_courteous), beside baton waiters, and
         * beside waiters queued on grant lists and on inboxes. */
        {{"lb-fair-baton", "lb-fair-baton", "lb-modern-courteous"}, {NULL}, {0}, "C A B", 5, 0, 0, 1},
        {{"lb-fair-list", "lb-fair-list", "lb-modern-courteous"}, {NULL}, {0}, "C A B", 5, 0, 0, 1},
        {{"lb-fair", "lb-fair", "lb-modern-courteous"}, {NULL}, {0}, "C A B", 5, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbr_explore_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.world.key = "race:baton2";
        cfg.world.ttl_ms = 1500;
        cfg.world.bounded_liveness = rows[i].bounded;
        lb_codec_parse(&cfg.world.codec, "ms");
        memcpy(cfg.world.kinds, rows[i].kinds, sizeof cfg.world.kinds);
        memcpy(cfg.world.client_key, rows[i].keys, sizeof cfg.world.client_key);
        memcpy(cfg.world.client_ttl_ms, rows[i].ttls, sizeof cfg.world.client_ttl_ms);
        cfg.prefix = rows[i].prefix;
        /* `make explore` searches each row deeper by as much as it raises the
         * default bound (5). */
        cfg.depth = rows[i].depth + (lbt_explore_depth() > 5 ? lbt_explore_depth() - 5 : 0);
        cfg.max_jumps = rows[i].jumps;
        cfg.jump_ms = rows[i].jump_ms;
        cfg.max_reads = 1;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        lbr_explore_result res = lbt_search(&server, &cfg, 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("  explored row %zu%s, depth %d, after %s, %.1f s", i,
               rows[i].bounded ? " under bounded liveness" : "", cfg.depth, rows[i].prefix,
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        lbt_print_outcome(&res);
        if (res.violation) fail_msg("row %zu: %s", i, res.report);
        assert_true(res.schedules > 20);
    }
}

/* Real time between two steps moves no client's clock, and lapses no key:
 * here 150 ms pass, 15 ms before each of B's ten steps, after A's acquire
 * with a 100 ms TTL; no virtual time passes, and B must find the key held. Before the world
 * gave the server's TTLs back the real time between its tokens, the key
 * lapsed and B took it while A's clock still gave it its whole lease (as a
 * slow build did in the row above with a 20 ms margin). */
static void test_real_time_between_steps_lapses_no_key_a_clock_says_lives(void **state) {
    (void)state;
    static const char *const kinds[][2] = {{"lb-modern", "lb-modern"},
                                           {"lb-fair-baton", "lb-fair-baton"}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        lbr_world_config wc;
        memset(&wc, 0, sizeof wc);
        wc.key = "race:realtime";
        wc.ttl_ms = 1500;
        wc.client_ttl_ms[0] = 100;
        wc.kinds[0] = kinds[i][0];
        wc.kinds[1] = kinds[i][1];
        wc.port = server.port;
        lb_codec_parse(&wc.codec, "ms");
        lbr_world *w = lbr_world_new(&wc);
        assert_non_null(w);
        assert_int_equal(lbr_run(w, "A"), LBR_OK);
        for (int step = 0; step < 10; step++) {
            lbt_sleep_ms(15);
            if (lbr_run(w, "B") != LBR_OK) fail_msg("%s: %s", kinds[i][0], lbr_violation(w));
        }
        lbr_world_free(w);
    }
}

/* Beside a program that deletes the queue while waiters are in it (an
 * operator clearing keys): the state still says the queue's TTL has long to
 * run, and the wait that forms the queue again must give it one all the
 * same (no key may be left without a TTL), and one that outlives every live
 * lease (no pause may see the queue lapse under a waiter whose lease goes
 * on). With the wait's PEXPIRE NX removed, each of the first two rows finds
 * a queue left without a TTL (after 195 and 455 schedules); with it giving
 * twice the forming waiter's own lease, the third finds the queue lapsing
 * under B's longer lease. */
static void test_exploration_beside_a_program_that_deletes_the_queue(void **state) {
    (void)state;
    static const fair_search rows[] = {
        {{"lb-fair-list", "lb-fair-list", "spoil-queue"}, 2000, 1, 4, 1, NULL},
        {{"lb-fair-list", "lb-fair-list", "lb-fair-list", "spoil-queue"}, 2000, 1, 3, 0, "A B C"},
        /* Leases of 4000 ms (B) and 1000 ms (C): C forms the queue again. */
        {{"lb-fair-list", "lb-fair-list-long", "lb-fair-list", "spoil-queue"}, 2500, 1, 3, 0,
         "A B D C"},
    };
    explore_fair_rows(rows, sizeof rows / sizeof rows[0]);
}

/* Waits that give up (the "-leave" kinds leave after two busy attempts)
 * beside waits that do not: a leave racing a hand-off, a grant pushed to a
 * wait that has left, and, among three, a leave between a release's script
 * and its push. Then yield windows, from the state of the hand-written row
 * (B holds by a grant naming A, an outsider was seen): B's release opens a
 * window and wakes A, pauses of 600 ms pass the window. */
static void test_exploration_of_fair_leaves_and_windows(void **state) {
    (void)state;
    static const fair_search rows[] = {
        {{"lb-fair-list", "lb-fair-list-leave"}, 2000, 2, 5, 1, NULL},
        {{"lb-fair", "lb-fair-leave"}, 2000, 2, 5, 0, NULL},
        {{"lb-fair-list", "lb-fair-list-leave", "lb-fair-list"}, 2000, 1, 4, 0, "A B C B"},
        {{"lb-fair-list-yield", "lb-fair-list-yield", "lb-modern", "lb-fair-list-yield"}, 600, 2,
         3, 0, "A B A A B@ B C D C D B A D D D B@"},
    };
    explore_fair_rows(rows, sizeof rows / sizeof rows[0]);
}

/* A world whose fencing counter cannot count (left holding no integer, or at
 * its limit, by an operator or another program): every fenced acquire fails
 * with the server's error, and none may leave the key holding its token
 * (held by no one until it expires: "told it did not get the lock, but the
 * key holds its value"). On the scripts before, which set the key and then
 * counted, the first fenced acquire of each row did. */
static void test_exploration_with_a_fencing_counter_that_cannot_count(void **state) {
    (void)state;
    static const struct { const char *a, *b, *fence; int depth; } rows[] = {
        {"lb-modern-fenced", "lb-modern-fenced", "not-a-number", 4},
        {"lb-modern-fenced", "lb-modern", "9223372036854775807", 4},
        {"lb-fair-fenced", "lb-fair-fenced", "9223372036854775807", 4},
        {"lb-fair-list-fenced", "lb-modern", "not-a-number", 4},
        /* Past 2^53: a Lua number is no longer every integer, and INCR's
         * 2^53+3 came back as 2^53+4, as did the next one. */
        {"lb-modern-fenced", "lb-modern-fenced", "9007199254740993", 5},
        {"lb-fair-list-fenced", "lb-fair-list-fenced", "9007199254740993", 5},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbr_explore_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.world.key = "race:fence";
        cfg.world.ttl_ms = 1500;
        cfg.world.fence_value = rows[i].fence;
        lb_codec_parse(&cfg.world.codec, "ms");
        cfg.world.kinds[0] = rows[i].a;
        cfg.world.kinds[1] = rows[i].b;
        cfg.depth = rows[i].depth;
        cfg.max_crashes = 1;
        cfg.max_jumps = 1;
        cfg.jump_ms = 2000;
        cfg.max_reads = 1;
        lbr_explore_result res = lbt_search(&server, &cfg, 0);
        printf("  explored %s + %s, counter '%s'", rows[i].a, rows[i].b, rows[i].fence);
        lbt_print_outcome(&res);
        if (res.violation) fail_msg("%s", res.report);
        assert_true(res.schedules > 100);
    }
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

/* An argument runs only the tests whose names match it (a cmocka glob, e.g.
 * "test_exploration_finds_*"). */
int main(int argc, char **argv) {
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fair_lock_races),
        cmocka_unit_test(test_exploration_of_fair_lock_fleets),
        cmocka_unit_test(test_exploration_of_fair_list_fleets_of_three),
        cmocka_unit_test(test_exploration_beside_strings_at_companion_names),
        cmocka_unit_test(test_exploration_beside_a_program_that_deletes_the_queue),
        cmocka_unit_test(test_exploration_of_a_hand_off_on_one_list),
        cmocka_unit_test(test_exploration_of_baton_waits_under_bounded_liveness),
        cmocka_unit_test(test_real_time_between_steps_lapses_no_key_a_clock_says_lives),
        cmocka_unit_test(test_exploration_of_fair_leaves_and_windows),
        cmocka_unit_test(test_exploration_with_a_fencing_counter_that_cannot_count),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
