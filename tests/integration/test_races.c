/* The regression catalogue of lock races: each race of the deployed lockers,
 * replayed step by step against a real redis-server, for lockbridge's clients
 * (which must pass) and for the lockers that have the bug (which the harness
 * must catch). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "harness/redis_server.h"
#include "race/race.h"

static lbt_redis server;

#define TTL 5000 /* ms; schedules jump +6000 to pass an expiry */

typedef struct scenario {
    const char *name;
    const char *kinds[LBR_MAX_CLIENTS];
    const char *codec;
    const char *schedule;
    int expect;            /* LBR_OK, LBR_VIOLATION or LBR_BAD_SCHEDULE */
    const char *violation; /* substring expected in the report */
    int overwrites;        /* expected GETSET overwrites (-1: not checked) */
} scenario;

static int run_scenario(const scenario *s) {
    lbr_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.port = server.port;
    cfg.key = "race:lock";
    cfg.ttl_ms = TTL;
    lb_codec_parse(&cfg.codec, s->codec ? s->codec : "ms");
    memcpy(cfg.kinds, s->kinds, sizeof cfg.kinds);
    lbr_world *w = lbr_world_new(&cfg);
    assert_non_null(w);
    int rc = lbr_run(w, s->schedule);
    printf("  %-58s %s%s\n", s->name, rc == LBR_OK ? "ok: " : "", rc == LBR_OK ? lbr_trace(w)
                                                                          : lbr_violation(w));
    if (rc != s->expect) fail_msg("%s: expected %d, got %d: %s", s->name, s->expect, rc,
                                  rc == LBR_OK ? lbr_trace(w) : lbr_violation(w));
    if (s->violation && !strstr(lbr_violation(w), s->violation))
        fail_msg("%s: expected a report of '%s'", s->name, s->violation);
    if (s->overwrites >= 0 && lbr_overwrites(w) != s->overwrites)
        fail_msg("%s: expected %d overwrites, saw %d", s->name, s->overwrites, lbr_overwrites(w));
    lbr_world_free(w);
    return rc;
}

static void run_table(const scenario *t, size_t n) {
    for (size_t i = 0; i < n; i++) run_scenario(&t[i]);
}
#define RUN_TABLE(t) run_table(t, sizeof(t) / sizeof(t[0]))

/* A holder crashes; after its expiry a contender takes the lock over. */
static void test_crash_and_takeover(void **state) {
    (void)state;
    static const scenario t[] = {
        {"lb-wire takes over a crashed lock", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX A! +6000 B:SETNX B:GET B:GETSET B?", LBR_OK, 0, 0},
        {"lb-scripted takes over a crashed lock", {"lb-scripted", "lb-scripted"}, 0,
         "A:SETNX A! +6000 B:SETNX B:GET B:legacy_takeover B?", LBR_OK, 0, 0},
        {"lb-wire takes over a crashed L1's lock", {"L1", "lb-wire"}, 0,
         "A:SETNX A! +6000 B:SETNX B:GET B:GETSET", LBR_OK, 0, 0},
        {"lb-wire takes over a crashed L3's JSON lock", {"L3", "lb-wire"}, "json", 
         "A:SETNX A! +6000 B:SETNX B:GET B:GETSET", LBR_OK, 0, 0},
        {"lb-wire takes over a crashed L5's float lock", {"L5", "lb-wire"}, "float",
         "A:SETNX A! +6000 B:SETNX B:GET B:GETSET", LBR_OK, 0, 0},
        {"lb-scripted takes over a crashed R's seconds lock", {"R", "lb-scripted"}, "s",
         "A:SETNX A! +7000 B:SETNX B:GET B:legacy_takeover", LBR_OK, 0, 0},
        {"a crashed lock is not taken before its expiry", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX A! +4000 B:SETNX B:GET B:SETNX", LBR_OK, 0, 0},
    };
    RUN_TABLE(t);
}

/* Two racers see the same expired value; both GETSET. Only the one that got the
 * expired value back may hold; the loser's GETSET has already overwritten. */
static void test_two_racers_take_over_one_expired_lock(void **state) {
    (void)state;
    static const scenario t[] = {
        /* The wire protocol cannot avoid the loser's overwrite: the winner no
         * longer recognises its value and leaves it to expire (a liveness cost,
         * not a double grant). */
        {"lb-wire racers: one wins, loser's overwrite delays the next holder", {"lb-wire", "lb-wire", "lb-wire"}, 0,
         "A:SETNX A! +6000 B:SETNX B:GET +1 C:SETNX C:GET B:GETSET C:GETSET B:GET C? ",
         LBR_VIOLATION, "liveness: C", 1},
        {"lb-scripted racers: the loser writes nothing", {"lb-wire", "lb-scripted", "lb-scripted"}, 0,
         "A:SETNX A! +6000 B:SETNX B:GET C:SETNX C:GET B:legacy_takeover C:legacy_takeover "
         "B:legacy_release C? ", LBR_OK, 0, 0},
        {"R racers", {"R", "R", "R"}, "s",
         "A:SETNX A! +7000 B:SETNX B:GET +1000 C:SETNX C:GET B:GETSET C:GETSET", LBR_OK, 0, 1},
        {"naive DEL-then-SETNX racers delete each other", {"lb-wire", "naive-del-takeover",
                                                           "naive-del-takeover"}, 0,
         "A:SETNX A! +6000 B:SETNX B:GET C:SETNX C:GET B:DEL B:SETNX C:DEL", LBR_VIOLATION,
         "C deleted B's valid lock", -1},
    };
    RUN_TABLE(t);
}

/* GET after a failed SETNX returns nil: the holder released in between. */
static void test_get_nil_means_released(void **state) {
    (void)state;
    static const scenario t[] = {
        {"lb-wire retries SETNX after a nil GET", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX B:SETNX A:GET A:DEL B:GET B:SETNX", LBR_OK, 0, 0},
        {"lb-wire after a nil GET meets a new holder", {"lb-wire", "lb-wire", "lb-wire"}, 0,
         "A:SETNX B:SETNX A:GET A:DEL B:GET C:SETNX B:SETNX B:GET", LBR_OK, 0, 0},
        {"L1's catch-all DEL on a nil GET deletes a live lock", {"lb-wire", "L1", "lb-wire"}, 0,
         "A:SETNX B:SETNX A:GET A:DEL B:GET C:SETNX B:DEL", LBR_VIOLATION,
         "B deleted C's valid lock", -1},
    };
    RUN_TABLE(t);
}

/* GETSET returns nil: the key vanished between GET and GETSET. R's rule (and
 * lockbridge's) says our GETSET created it: held. L4 says not held, and leaves
 * its value in a key nobody holds. */
static void test_getset_nil(void **state) {
    (void)state;
    static const scenario t[] = {
        {"lb-wire holds after a nil GETSET", {"L2", "lb-wire", "lb-wire"}, 0,
         "A:SETNX +6000 B:SETNX B:GET A:DEL B:GETSET C:SETNX C:GET B:GET B:DEL C?",
         LBR_OK, 0, 0},
        {"L3 holds after a nil GETSET", {"L2", "L3", "lb-wire"}, "json",
         "A:SETNX +6000 B:SETNX B:GET A:DEL B:GETSET C:SETNX C:GET", LBR_OK, 0, 0},
        {"L4's nil GETSET leaves a lock nobody holds", {"L2", "L4", "lb-wire"}, 0,
         "A:SETNX +6000 B:SETNX B:GET A:DEL B:GETSET C?", LBR_VIOLATION,
         "liveness: C", -1},
    };
    RUN_TABLE(t);
}

/* A holder outlives its timeout, a contender takes over, then the first
 * holder releases. */
static void test_late_release_after_takeover(void **state) {
    (void)state;
    static const scenario t[] = {
        {"lb-wire late release finds the lock lost", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX +6000 B:SETNX B:GET B:GETSET A:GET B:GET B:DEL", LBR_OK, 0, 0},
        {"lb-scripted late release finds the lock lost", {"lb-scripted", "lb-scripted"}, 0,
         "A:SETNX +6000 B:SETNX B:GET B:legacy_takeover A:legacy_release", LBR_OK, 0, 0},
        {"R checks its own timeout before DEL", {"R", "lb-wire"}, "s",
         "A:SETNX +7000 B:SETNX B:GET B:GETSET A:- B:GET B:DEL", LBR_OK, 0, 0},
        {"L2's unconditional DEL deletes the new holder's lock", {"L2", "lb-wire"}, 0,
         "A:SETNX +6000 B:SETNX B:GET B:GETSET A:DEL", LBR_VIOLATION, "A deleted B's valid lock", -1},
        {"L1 owner's unconditional DEL deletes the new holder's lock", {"L1", "lb-scripted"}, 0,
         "A:SETNX +6000 B:SETNX B:GET B:legacy_takeover A:DEL", LBR_VIOLATION,
         "A deleted B's valid lock", -1},
        {"naive unconditional DEL", {"naive-unconditional-del", "lb-wire"}, 0,
         "A:SETNX +6000 B:SETNX B:GET B:GETSET A:DEL", LBR_VIOLATION, "A deleted B's valid lock", -1},
    };
    RUN_TABLE(t);
}

/* A release (GET, compare, DEL) races a takeover of the same expiring lock. */
static void test_release_racing_a_takeover(void **state) {
    (void)state;
    static const scenario t[] = {
        {"lb-wire refuses the DEL near expiry", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX +5500 B:SETNX A:GET +600 B:GET B:GETSET", LBR_OK, 0, 0},
        {"L5's GET-compare-DEL deletes the taker's lock", {"L5", "lb-wire"}, "float",
         "A:SETNX +6000 B:SETNX A:GET B:GET B:GETSET A:DEL", LBR_VIOLATION,
         "A deleted B's valid lock", -1},
        {"lb-scripted release is atomic", {"lb-scripted", "lb-scripted"}, 0,
         "A:SETNX +6000 B:SETNX B:GET A:legacy_release B:legacy_takeover", LBR_OK, 0, 0},
    };
    RUN_TABLE(t);
}

/* The wire protocol's operations take two commands. The release's margin covers
 * clock skew and a round trip; a client paused between its GET and its DEL for
 * longer than the margin deletes whoever took the lock over meanwhile. A client
 * paused between GET and GETSET writes a stale expiry over a fresh holder's,
 * shortening its lock. Only atomic operations close these windows: the
 * scripted variant passes the same schedules. */
static void test_wire_paused_mid_operation(void **state) {
    (void)state;
    static const scenario t[] = {
        {"lb-wire paused between GET and DEL past the margin", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX A:GET B:SETNX +7000 B:GET B:GETSET A:DEL", LBR_VIOLATION,
         "A deleted B's valid lock", -1},
        {"lb-wire paused less than the margin is safe", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX +3000 A:GET B:SETNX +900 A:DEL B:GET B:SETNX", LBR_OK, 0, 0},
        {"lb-scripted paused anywhere is safe", {"lb-scripted", "lb-scripted"}, 0,
         "A:SETNX B:SETNX +7000 B:GET B:legacy_takeover A:legacy_release B:legacy_release", LBR_OK, 0, 0},
        {"lb-wire paused between GET and GETSET shortens a fresh lock", {"lb-wire", "lb-scripted"}, 0,
         "B:SETNX A:SETNX +6000 A:GET B:legacy_release +3000 B:SETNX A:GETSET", LBR_VIOLATION,
         "A overwrote B's valid lock with an earlier", -1},
        {"lb-scripted paused between GET and takeover writes nothing", {"lb-scripted", "lb-scripted"}, 0,
         "B:SETNX A:SETNX +6000 A:GET B:legacy_release +3000 B:SETNX A:legacy_takeover B:legacy_release",
         LBR_OK, 0, 0},
    };
    RUN_TABLE(t);
}

/* The protocol trusts clocks: a client whose clock runs early by more than the
 * time left on a lock takes it over while its holder still holds it. No client
 * can prevent this; the harness must see it, and see nothing within the skew. */
static void test_clocks_early_and_late(void **state) {
    (void)state;
    static const scenario t[] = {
        {"lb-wire with an early clock breaks exclusion", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX B~6000 B:SETNX B:GET B:GETSET", LBR_VIOLATION, "mutual exclusion", -1},
        {"lb-wire with a small skew is safe", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX B~3000 B:SETNX B:GET B:SETNX", LBR_OK, 0, 0},
        {"a late clock delays takeover of a crashed lock", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX A! B~-3000 +6000 B:SETNX B:GET B:SETNX +3000 B:GET B:GETSET", LBR_OK, 0, 0},
    };
    RUN_TABLE(t);
}

/* INCR-based lockers: a crash between INCR and EXPIRE, and the double INCR. */
static void test_incr_lockers(void **state) {
    (void)state;
    static const scenario t[] = {
        {"INCR then EXPIRE: a crash between leaves a key forever", {"naive-incr-expire",
                                                                     "naive-incr-expire"}, 0,
         "A:INCR A! +60000 B?", LBR_VIOLATION, "liveness: B", -1},
        {"L1's double INCR deletes a live lock", {"L1-incr2", "L1-incr2"}, 0,
         "A:INCR A:EXPIRE B:INCR B:INCR B:DEL", LBR_VIOLATION, "B deleted A's valid lock", -1},
    };
    RUN_TABLE(t);
}

/* L3's overwrite: the losing racer's GETSET replaces the winner's value, so the
 * winner's release (GET, compare) no longer recognises it. */
static void test_overwritten_timestamp(void **state) {
    (void)state;
    static const scenario t[] = {
        {"L3 racers: the winner cannot release", {"lb-wire", "L3", "L3", "lb-wire"}, "json",
         "A:SETNX A! +6000 B:SETNX B:GET C:SETNX C:GET B:GETSET C:GETSET B:GET D?",
         LBR_VIOLATION, "liveness: D", -1},
        {"lb-scripted racers: no overwrite, the winner releases",
         {"lb-wire", "lb-scripted", "lb-scripted", "lb-wire"}, "json",
         "A:SETNX A! +6000 B:SETNX B:GET C:SETNX C:GET B:legacy_takeover C:legacy_takeover "
         "B:legacy_release D?", LBR_OK, 0, 0},
    };
    RUN_TABLE(t);
}

/* Every interleaving up to a bound. LB_EXPLORE_DEPTH raises the bound of the
 * two-client fleets (the three-client bound is one less). */
static int explore_depth(void) {
    const char *d = getenv("LB_EXPLORE_DEPTH");
    int v = d ? atoi(d) : 0;
    return v > 0 && v < 20 ? v : 5;
}

/* How deep the searches go. Each is written at the depth `make explore` runs
 * it to (LB_EXPLORE=full). `make test` runs it one step shallower, which cuts
 * the schedules it replays by about the branching factor, but never below
 * the depth at which a fleet of its size still replays a hundred schedules
 * or more (four steps for two clients, three for three, two beyond), so that
 * every scenario keeps a search in the quick run. A search that must find a
 * counterexample keeps its depth: a shallower one may not reach it. */
static int search_depth(const lbr_explore_config *cfg, int must_find) {
    const char *mode = getenv("LB_EXPLORE");
    int clients = 0;
    while (clients < LBR_MAX_CLIENTS && cfg->world.kinds[clients]) clients++;
    int floor = clients <= 2 ? 4 : clients == 3 ? 3 : 2; /* steps */
    if (must_find || (mode && strcmp(mode, "full") == 0) || cfg->depth <= floor)
        return cfg->depth;
    return cfg->depth - 1;
}

/* Clients whose every write is a single atomic command or script. */
/* Runs a search on the test's server over one borrowed connection (each
 * world of the search would open its own otherwise), to the depth
 * search_depth gives; the search must run: a world that broke (the operator's
 * tool did not run as intended) fails it. */
static lbr_explore_result search(lbr_explore_config *cfg, int must_find) {
    lbr_explore_result res;
    cfg->depth = search_depth(cfg, must_find);
    cfg->world.port = server.port;
    cfg->world.conn = lbt_redis_connect(&server);
    assert_non_null(cfg->world.conn);
    int rc = lbr_explore(cfg, &res);
    redisFree(cfg->world.conn);
    cfg->world.conn = NULL;
    if (rc != 0) fail_msg("the search could not run: %s", res.report[0] ? res.report : "no world");
    return res;
}

/* One line for a search's outcome: its schedules, and the counterexample
 * and its report when it found one. */
static void print_outcome(const lbr_explore_result *res) {
    printf(": %ld schedules (%ld outside the model)%s%s\n", res->schedules, res->pruned,
           res->violation ? "\n    counterexample: " : ", none found",
           res->violation ? res->counterexample : "");
    if (res->violation) printf("    report: %s\n", res->report);
}

static int atomic_kind(const char *k) {
    return !k || strcmp(k, "lb-scripted") == 0 || strncmp(k, "lb-modern", 9) == 0 ||
           strcmp(k, "M1") == 0 || strcmp(k, "lb-compat") == 0 ||
           strcmp(k, "lb-migrate-modern") == 0 || strcmp(k, "lb-follow-compat") == 0 ||
           strcmp(k, "switch-compat-modern") == 0;
}

static int all_scripted(const char *k1, const char *k2, const char *k3) {
    return atomic_kind(k1) && atomic_kind(k2) && atomic_kind(k3);
}

static lbr_explore_result explore(const char *k1, const char *k2, const char *k3,
                                  const char *codec, int depth, int must_find) {
    lbr_explore_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.world.key = "race:explore";
    /* Pauses that pass any expiry, anywhere between two operations. Inside an operation of the wire protocol (GET then GETSET, GET
     * then DEL) a long pause defeats any GETSET locker, lockbridge's wire variant
     * included (test_wire_paused_mid_operation shows how); fleets with a wire
     * participant are explored without such pauses, all-scripted fleets with. */
    cfg.world.ttl_ms = 1500;
    cfg.world.bound_midop_pauses = !all_scripted(k1, k2, k3);
    lb_codec_parse(&cfg.world.codec, codec);
    cfg.world.kinds[0] = k1;
    cfg.world.kinds[1] = k2;
    cfg.world.kinds[2] = k3;
    cfg.depth = depth;
    cfg.max_crashes = 1;
    cfg.max_jumps = 2;
    cfg.jump_ms = 3600;
    lbr_explore_result res = search(&cfg, must_find);
    printf("  explored %s, depth %d: %ld schedules (%ld outside the model), %ld steps%s%s\n",
           k3 ? "3 clients" : "2 clients", cfg.depth, res.schedules, res.pruned, res.steps,
           res.violation ? ", counterexample: " : "", res.violation ? res.counterexample : "");
    return res;
}

static void test_exploration_finds_no_violation_in_lockbridge_fleets(void **state) {
    (void)state;
    static const struct { const char *a, *b, *c, *codec; int less; } fleets[] = {
        {"lb-wire", "lb-wire", NULL, "ms", 0},
        {"lb-scripted", "lb-scripted", NULL, "ms", 0},
        {"lb-wire", "lb-scripted", NULL, "json", 0},
        {"lb-wire", "R", NULL, "s", 0},
        {"lb-scripted", "R", NULL, "s", 0},
        {"lb-wire", "M1", NULL, "ms", 0},
        {"lb-modern", "lb-modern", NULL, "ms", 0},
        {"lb-modern-fenced", "M1", NULL, "ms", 0},
        {"lb-modern", "lb-modern-fenced", "M1", "ms", 2},
        {"lb-wire", "lb-scripted", "lb-wire", "ms", 2},
        {"lb-scripted", "lb-scripted", "R", "s", 2},
    };
    for (size_t i = 0; i < sizeof fleets / sizeof fleets[0]; i++) {
        printf("  fleet %s + %s%s%s (%s)\n", fleets[i].a, fleets[i].b, fleets[i].c ? " + " : "",
               fleets[i].c ? fleets[i].c : "", fleets[i].codec);
        lbr_explore_result r = explore(fleets[i].a, fleets[i].b, fleets[i].c, fleets[i].codec,
                                       explore_depth() - fleets[i].less, 0);
        if (r.violation) fail_msg("%s", r.report);
        assert_true(r.schedules > 100);
    }
}

/* Fleets the field has and a uniform world hides: clients writing different
 * validities. An expired lock (a crashed holder's), L1 with 15 minutes and a
 * lockbridge wire client with 30 s; pauses of 31 s. Each row states what the
 * search must find, in one place: the option that closes the hole is the
 * row's difference. */
static void test_exploration_of_mixed_validities(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int64_t fleet_max_ttl_ms; /* lockbridge's fleet_max_ttl_ms */
        int expect_counterexample;
    } rows[] = {
        /* The wire takeover as it was: a lost GETSET race leaves the loser's
         * 30 s expiry over L1's 15 minutes; 31 s later the loser takes the
         * lock over while L1 is still inside. */
        {"L1 (15 min) + lb-wire (30 s), fleet_max_ttl_ms 0", 0, 1},
        /* The fix: the takeover writes the fleet's longest validity. */
        {"L1 (15 min) + lb-wire (30 s), fleet_max_ttl_ms 15 min", 900000, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        lbr_explore_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.world.key = "race:mixed";
        lb_codec_parse(&cfg.world.codec, "ms");
        cfg.world.kinds[0] = "L1";
        cfg.world.kinds[1] = "lb-wire";
        cfg.world.client_ttl_ms[0] = 900000;
        cfg.world.client_ttl_ms[1] = 30000;
        cfg.world.ttl_ms = 30000;
        cfg.world.fleet_max_ttl_ms = rows[i].fleet_max_ttl_ms;
        /* Clocks agree within the release margin (1 s): a loser's value that
         * ends within it of the winner's is the allowed skew. */
        cfg.world.skew_tolerance_ms = 1000;
        cfg.world.start_expired = 1;
        cfg.world.bound_midop_pauses = 1;
        cfg.world.midop_pause_max_ms = 1000;
        /* A fixed depth: from 9 steps on, the search reaches L1's own catch-all
         * DEL after a nil GET (L1 deletes a lock it does not hold), a fault of
         * L1's that the catalogue's "GET returns nil" row and the L1 x2
         * exploration already show, not the takeover this row is about. */
        cfg.depth = 7;
        cfg.max_jumps = 1;
        cfg.jump_ms = 31000;
        lbr_explore_result res = search(&cfg, rows[i].expect_counterexample);
        printf("  %s: %ld schedules (%ld outside the model)%s%s\n", rows[i].name, res.schedules,
               res.pruned, res.violation ? "\n    -> " : "", res.violation ? res.report : "");
        if (res.violation != rows[i].expect_counterexample)
            fail_msg("%s: %s", rows[i].name,
                     res.violation ? res.report : "the search found no counterexample");
    }
}

/* The explorer must be able to fail: naive fleets have known counterexamples. */
static void test_exploration_finds_naive_lockers_violations(void **state) {
    (void)state;
    static const struct { const char *kind, *finding; } naive[] = {
        {"naive-del-takeover", ""},
        {"naive-unconditional-del", ""},
        {"L2", ""},
        {"L1", ""},
        {"naive-fence-first", "not above"}, /* a number below an earlier holder's */
    };
    for (size_t i = 0; i < sizeof naive / sizeof naive[0]; i++) {
        printf("  fleet %s x2\n", naive[i].kind);
        lbr_explore_result r = explore(naive[i].kind, naive[i].kind, NULL, "ms", 6, 1);
        if (!r.violation) fail_msg("no violation found for %s", naive[i].kind);
        printf("    -> %s\n", r.report);
        if (!strstr(r.report, naive[i].finding)) fail_msg("expected '%s'", naive[i].finding);
    }
}

/* Token locks (M1's SET NX PX) on a key legacy clients also use. lockbridge
 * reads a token as foreign, leaves it alone and waits for its TTL; L3 reads a
 * JSON value without its field as expired and takes a live token lock over. */
static void test_token_locks_beside_legacy_clients(void **state) {
    (void)state;
    static const scenario t[] = {
        {"lb-wire leaves an M1 token alone until its TTL lapses", {"M1", "lb-wire"}, 0,
         "A:SET B:SETNX B:GET B:SETNX B:GET +6000 B:SETNX", LBR_OK, 0, 0},
        {"lb-scripted leaves an M1 token alone", {"M1", "lb-scripted"}, "json",
         "A:SET B:SETNX B:GET A:EVAL B?", LBR_OK, 0, 0},
        {"L3 takes over a live M1 token lock", {"M1", "L3"}, "json",
         "A:SET B:SETNX B:GET B:GETSET", LBR_VIOLATION, "overwrote A's valid lock", -1},
    };
    RUN_TABLE(t);
}

/* lockbridge's token lock in the same races: its TTL does what the legacy
 * timestamp did, its scripts do what compare-and-set did; and the legacy
 * lockers that must never meet token values are caught when they do. */
static void test_token_lock_races(void **state) {
    (void)state;
    static const scenario t[] = {
        {"lb-modern: a crashed holder's lock lapses with its TTL", {"lb-modern", "lb-modern"}, 0,
         "A:SET A! +4000 B:SET B:PTTL +2000 B:SET B:modern_release", LBR_OK, 0, 0},
        {"lb-modern: a late release finds the lock lost", {"lb-modern", "lb-modern"}, 0,
         "A:SET +6000 B:SET A:modern_release B:modern_release", LBR_OK, 0, 0},
        {"lb-modern-fenced: takeover after a crash", {"lb-modern-fenced", "lb-modern-fenced"}, 0,
         "A:modern_acquire_fenced A! +6000 B:modern_acquire_fenced B:modern_release", LBR_OK, 0, 0},
        {"lb-modern beside M1", {"M1", "lb-modern"}, 0,
         "A:SET B:SET B:PTTL A:EVAL B:SET", LBR_OK, 0, 0},
        {"lb-wire leaves an lb-modern token alone", {"lb-modern", "lb-wire"}, 0,
         "A:SET B:SETNX B:GET A:modern_release B?", LBR_OK, 0, 0},
        {"L1 deletes a live token lock it cannot parse", {"lb-modern", "L1"}, 0,
         "A:SET B:SETNX B:GET B:DEL", LBR_VIOLATION, "B deleted A's valid lock", -1},
        {"a fencing number taken before the lock is overtaken",
         {"naive-fence-first", "naive-fence-first"}, 0, "A:INCR B:INCR B:SET B:EVAL A:SET",
         LBR_VIOLATION, "A holds the lock with fencing number 1, not above 2", -1},
        {"lb-modern-fenced: numbers grow from holder to holder",
         {"lb-modern-fenced", "lb-modern-fenced"}, 0,
         "A:modern_acquire_fenced B:modern_acquire_fenced A:modern_release "
         "B:modern_acquire_fenced B:modern_release A:modern_acquire_fenced",
         LBR_OK, 0, 0},
    };
    RUN_TABLE(t);
}

/* ---- The fair token lock: a blocking wait, step by step ---------------------------- */

/* A wait keeps one token and one queue place until it holds the lock; a
 * release hands the lock to the oldest live waiter and publishes the grant on
 * its inbox ("X@" reads it). Two schedules replay the bugs of the old fair
 * mode, each as the search found it (see test_exploration_of_fair_lock_fleets). */
static void test_fair_lock_races(void **state) {
    (void)state;
    static const scenario t[] = {
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
    RUN_TABLE(t);
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
    lbr_explore_result res = search(&cfg, must_find);
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
    print_outcome(&res);
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
 * from a 100 ms TTL bringing B LB_OK with its lease over. */
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
        cfg.depth = rows[i].depth + (explore_depth() > 5 ? explore_depth() - 5 : 0);
        cfg.max_jumps = rows[i].jumps;
        cfg.jump_ms = rows[i].jump_ms;
        cfg.max_reads = 1;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        lbr_explore_result res = search(&cfg, 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("  explored row %zu%s, depth %d, after %s, %.1f s", i,
               rows[i].bounded ? " under bounded liveness" : "", cfg.depth, rows[i].prefix,
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        print_outcome(&res);
        if (res.violation) fail_msg("row %zu: %s", i, res.report);
        assert_true(res.schedules > 20);
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
        lbr_explore_result res = search(&cfg, 0);
        printf("  explored %s + %s, counter '%s'", rows[i].a, rows[i].b, rows[i].fence);
        print_outcome(&res);
        if (res.violation) fail_msg("%s", res.report);
        assert_true(res.schedules > 100);
    }
}

/* ---- Migration: compat and modern clients of the shim beside every other kind ---- */

/* The cross-format acquire in the races of a migration: an expired legacy lock
 * is taken over only if unchanged since judged, whoever else is racing for it;
 * a switch of the namespace's mode lands between operations of the followers,
 * and an operation keeps the mode it started in. */
static void test_migration_races(void **state) {
    (void)state;
    static const scenario t[] = {
        {"lb-compat takes over a crashed legacy holder's expired lock", {"lb-wire", "lb-compat"},
         0, "A:SETNX A! +6000 B:migrate_acquire B:migrate_acquire B:migrate_release", LBR_OK, 0,
         0},
        {"two lb-compat racers for one expired legacy lock: one wins",
         {"lb-wire", "lb-compat", "lb-compat"}, 0,
         "A:SETNX A! +6000 B:migrate_acquire C:migrate_acquire C:migrate_acquire "
         "B:migrate_acquire C:migrate_release B?",
         LBR_OK, 0, 0},
        {"a legacy takeover between lb-compat's judgement and its takeover",
         {"lb-wire", "lb-compat", "lb-wire"}, 0,
         "A:SETNX A! +6000 B:migrate_acquire C:SETNX C:GET C:GETSET B:migrate_acquire "
         "C:GET C:DEL B?",
         LBR_OK, 0, 0},
        {"a legacy GETSET racing an lb-compat takeover", {"lb-wire", "lb-compat", "lb-wire"}, 0,
         "A:SETNX A! +6000 B:migrate_acquire C:SETNX C:GET B:migrate_acquire C:GETSET "
         "B:migrate_release C?",
         LBR_OK, 0, -1},
        {"R (seconds) beside lb-compat", {"R", "lb-compat"}, "s",
         "B:migrate_acquire A:SETNX A:GET B:migrate_release A? A! +8000 B?", LBR_OK, 0, 0},
        {"L1 reads an lb-compat value as a live timestamp", {"lb-compat", "L1"}, 0,
         "A:migrate_acquire B:SETNX B:GET A:migrate_release B?", LBR_OK, 0, 0},
        {"lb-migrate-modern respects a legacy lock left behind until its timestamp",
         {"lb-wire", "lb-migrate-modern"}, 0,
         "A:SETNX B:migrate_acquire A! +6000 B:migrate_acquire B:migrate_acquire "
         "B:migrate_release",
         LBR_OK, 0, 0},
        {"lb-compat and lb-migrate-modern hand the lock back and forth",
         {"lb-compat", "lb-migrate-modern"}, 0,
         "A:migrate_acquire B:migrate_acquire A:migrate_release B:migrate_acquire "
         "A:migrate_acquire B:migrate_release A?",
         LBR_OK, 0, 0},
        {"switch compat->modern while a follower holds a compat lock",
         {"switch-compat-modern", "lb-follow-compat", "lb-follow-compat"}, 0,
         "B:migrate_touch B:migrate_acquire A:EVAL A:mode_set C:migrate_touch C:migrate_acquire "
         "B:migrate_release C:migrate_touch C:migrate_acquire C:migrate_release B?",
         LBR_OK, 0, 0},
        {"step back modern->compat while a follower holds a token",
         {"switch-compat-modern", "lb-follow-compat", "lb-follow-compat"}, 0,
         "A:EVAL A:mode_set B:migrate_touch B:migrate_acquire A:EVAL A:mode_set C:migrate_touch "
         "C:migrate_acquire B:migrate_release C?",
         LBR_OK, 0, 0},
        {"step back compat->legacy while a follower holds a compat lock",
         {"switch-legacy-compat", "lb-follow-legacy", "lb-follow-legacy"}, 0,
         "A:EVAL A:mode_set B:migrate_touch B:migrate_acquire A:EVAL A:mode_set "
         "C:migrate_touch C:SETNX C:GET B:migrate_release C?",
         LBR_OK, 0, 0},
        {"legacy beside modern is unsafe even for lockbridge: a wire GETSET over a token",
         {"lb-wire", "lb-migrate-modern", "lb-wire"}, 0,
         "A:SETNX A! +6000 C:SETNX C:GET B:migrate_acquire B:migrate_acquire C:GETSET",
         LBR_VIOLATION, "overwrote B's valid lock", -1},
        {"the same race beside compat is the legacy overwrite, counted apart",
         {"lb-wire", "lb-compat", "lb-wire"}, 0,
         "A:SETNX A! +6000 C:SETNX C:GET B:migrate_acquire B:migrate_acquire C:GETSET "
         "B:migrate_release C?",
         LBR_OK, 0, -1},
        {"legacy beside modern is the unsafe pair: L1 deletes a token lock",
         {"lb-migrate-modern", "L1"}, 0, "A:migrate_acquire B:SETNX B:GET B:DEL", LBR_VIOLATION,
         "B deleted A's valid lock", -1},
    };
    RUN_TABLE(t);
}

/* The control key's value as the world's server holds it ("" when absent). */
static void control_key(const char *key, char *out, size_t cap) {
    lb_ns_keys nk;
    assert_int_equal(lb_ns_keys_init(&nk, key, strlen(key)), LB_OK);
    redisContext *c = lbt_redis_connect(&server);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "GET %s", nk.mode);
    assert_non_null(r);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    redisFree(c);
}

static void assert_mode(const char *key, const char *want) {
    char got[32];
    control_key(key, got, sizeof got);
    if (strcmp(got, want) != 0) fail_msg("control key of %s: '%s', expected '%s'", key, got, want);
}

/* A list operator's command is two steps, its scan and checks, then its mode
 * write (held back until then), so that anything may happen between them; a
 * command the gate refuses ends at its first step. Its stage time runs on
 * the world's clock: a pause ages the stage the tool stamped. */
static void test_an_operators_mode_write_is_a_step_of_its_own(void **state) {
    (void)state;
    lbr_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.port = server.port;
    cfg.key = "race:ops";
    cfg.ttl_ms = TTL;
    lb_codec_parse(&cfg.codec, "ms");
    cfg.kinds[0] = "operator:compat,legacy,legacy";
    lbr_world *w = lbr_world_new(&cfg);
    assert_non_null(w);
    assert_int_equal(lbr_run(w, "A:PING"), LBR_OK);
    assert_mode(cfg.key, ""); /* scanned; the write waits */
    assert_int_equal(lbr_run(w, "A:PING"), LBR_OK);
    assert_mode(cfg.key, "compat");
    /* legacy on a compat stage younger than the stage time: refused at once */
    assert_int_equal(lbr_run(w, "A:PING"), LBR_OK);
    assert_mode(cfg.key, "compat");
    char pause[32];
    snprintf(pause, sizeof pause, "+%d A:PING", LBR_STAGE_MS);
    assert_int_equal(lbr_run(w, pause), LBR_OK);
    assert_mode(cfg.key, "compat");
    assert_int_equal(lbr_run(w, "A:PING"), LBR_OK);
    assert_mode(cfg.key, "legacy");
    printf("  %s\n", lbr_trace(w));
    lbr_world_free(w);
}

/* Followers that re-read the mode only once their refresh interval has
 * passed on the world's clock act in the mode they read until then; the
 * control key must never read a mode two stages from one they may still act
 * in. */
static void test_followers_reread_the_mode_every_refresh_interval(void **state) {
    (void)state;
    static char later[256], skip[160];
    snprintf(later, sizeof later,
             "A:EVAL A:mode_set B:migrate_touch B:migrate_acquire B:migrate_release A:EVAL "
             "A:mode_set B:migrate_acquire B:migrate_release +%d B:migrate_touch B:SETNX B?",
             LBR_REFRESH_MS);
    snprintf(skip, sizeof skip,
             "A:EVAL A:mode_set A:EVAL A:mode_set B:migrate_touch C:EVAL C:mode_set");
    const scenario t[] = {
        {"a follower keeps the mode it read until its refresh interval has passed",
         {"switch-legacy-compat", "lb-follow-compat-refresh"}, 0, later, LBR_OK, 0, 0},
        {"modern written while a follower may still act in the legacy it just read",
         {"switch-legacy-compat", "lb-follow-compat-refresh", "switch-compat-modern"}, 0, skip,
         LBR_VIOLATION, "the mode reads modern while B may still act in legacy", -1},
    };
    RUN_TABLE(t);
}

static void test_exploration_of_migration_fleets(void **state) {
    (void)state;
    static const struct { const char *a, *b, *c, *codec; int less; } fleets[] = {
        {"lb-compat", "lb-compat", NULL, "ms", 0},
        {"lb-compat", "lb-wire", NULL, "ms", 0},
        {"lb-compat", "lb-scripted", NULL, "json", 0},
        {"lb-compat", "R", NULL, "s", 0},
        {"lb-compat", "lb-migrate-modern", NULL, "ms", 0},
        {"lb-migrate-modern", "M1", NULL, "ms", 0},
        {"lb-compat", "lb-compat", "lb-wire", "ms", 2},
        {"lb-migrate-modern", "lb-compat", "lb-scripted", "ms", 2},
        {"switch-compat-modern", "lb-follow-compat", "lb-follow-compat", "ms", 1},
        {"switch-legacy-compat", "lb-follow-legacy", "lb-wire", "ms", 1},
    };
    for (size_t i = 0; i < sizeof fleets / sizeof fleets[0]; i++) {
        printf("  fleet %s + %s%s%s (%s)\n", fleets[i].a, fleets[i].b, fleets[i].c ? " + " : "",
               fleets[i].c ? fleets[i].c : "", fleets[i].codec);
        lbr_explore_result r = explore(fleets[i].a, fleets[i].b, fleets[i].c, fleets[i].codec,
                                       explore_depth() - fleets[i].less, 0);
        if (r.violation) fail_msg("%s", r.report);
        assert_true(r.schedules > 100);
    }
}

/* ---- Searches for the migration holes of the staged rollout ----------------------
 * Each is a search (exhaustive to its depth from its starting state) whose
 * expected outcome is one flag. Each found its hole on the code before the
 * hole's fix (expect_counterexample was 1 then, and the search proved it can
 * find it); with the fix, the same search must find none. Hole 8's fix is an
 * option, so the search runs both ways: with the option off it must still
 * find the shortened lock. */
typedef struct hole_search {
    const char *name;
    int hole;
    int expect_counterexample;
    const char *kinds[LBR_MAX_CLIENTS];
    int64_t ttl_ms[LBR_MAX_CLIENTS];    /* per client; 0: 1500 */
    int64_t offset_ms[LBR_MAX_CLIENTS]; /* per client clock offset */
    const char *codec;
    const char *prefix; /* the state the search starts from */
    int depth;
    const char *violation; /* substring of the report expected when found */
    int64_t fleet_max_ttl_ms; /* lockbridge's legacy clients' option */
} hole_search;

static const hole_search hole_searches[] = {
    /* Hole 8: a lockbridge wire client with a short validity loses a GETSET
     * race to L1 with a long one and writes its earlier expiry over L1's live
     * lock. Clock offsets stay within the margin. Closed by fleet_max_ttl_ms
     * (the fleet's longest validity: L1's); without it, still found. */
    {"hole 8: a short-validity wire loser shortens L1's lock (fleet_max_ttl_ms 0)", 8, 1,
     {"lb-wire", "L1", "lb-wire"}, {1500, 9000, 1500}, {0, 0, -100}, "ms",
     "A:SETNX A! +3600", 6, "overwrote B's valid lock with an earlier", 0},
    {"hole 8: the same fleet with fleet_max_ttl_ms at L1's validity", 8, 0,
     {"lb-wire", "L1", "lb-wire"}, {1500, 9000, 1500}, {0, 0, -100}, "ms",
     "A:SETNX A! +3600", 6, NULL, 9000},
    /* Hole 5, fixed (a follower that has seen a mode keeps it when the control
     * key vanishes): the namespace is modern, a follower configured legacy has
     * read it, the key is deleted. Before the fix: "moved two stages at once:
     * modern -> legacy" after 15 schedules. */
    {"hole 5: a vanished control key moves a legacy-configured follower two stages", 5, 0,
     {"switch-compat-modern", "lb-follow-legacy", "vanish-mode"}, {0}, {0}, "ms",
     "A:EVAL A:mode_set B:migrate_touch", 4, NULL, 0},
    /* Hole 1, fixed (evidence of a legacy writer survives sweep): the operator
     * runs the real tool: mode set compat, sweep --expire-live, mode set modern.
     * Before the fix: "the gate let modern in while B" at the first schedule. */
    {"hole 1: sweep erases the gate's evidence of a live legacy lock", 1, 0,
     {"operator", "L1"}, {0, 600000}, {0}, "ms", "B:SETNX", 3, NULL, 0},
    /* Hole 4, fixed (compat -> legacy refused while live tokens or modern
     * census entries exist). Before: "the gate let legacy in while B". */
    {"hole 4: mode set legacy goes back past a follower holding a token", 4, 0,
     {"operator-back", "lb-follow-compat"}, {0}, {0}, "ms",
     "A A B:migrate_touch B:migrate_acquire", 2, NULL, 0},
};

static void test_exploration_finds_open_holes(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof hole_searches / sizeof hole_searches[0]; i++) {
        const hole_search *h = &hole_searches[i];
        lbr_explore_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.world.key = "race:explore";
        cfg.world.ttl_ms = 1500;
        cfg.world.bound_midop_pauses = 1;
        cfg.world.midop_pause_max_ms = 0;
        lb_codec_parse(&cfg.world.codec, h->codec);
        memcpy(cfg.world.kinds, h->kinds, sizeof cfg.world.kinds);
        memcpy(cfg.world.client_ttl_ms, h->ttl_ms, sizeof cfg.world.client_ttl_ms);
        memcpy(cfg.world.client_offset_ms, h->offset_ms, sizeof cfg.world.client_offset_ms);
        cfg.world.fleet_max_ttl_ms = h->fleet_max_ttl_ms;
        cfg.world.skew_tolerance_ms = h->fleet_max_ttl_ms ? 1000 : 0; /* the release margin */
        cfg.prefix = h->prefix;
        cfg.depth = h->depth;
        cfg.max_crashes = 0;
        cfg.max_jumps = 0;
        lbr_explore_result res = search(&cfg, h->expect_counterexample);
        printf("  %s (hole %d), depth %d from '%s'", h->name, h->hole, cfg.depth, h->prefix);
        print_outcome(&res);
        if (h->expect_counterexample && !res.violation)
            fail_msg("%s: the search no longer finds hole %d", h->name, h->hole);
        if (!h->expect_counterexample && res.violation) fail_msg("%s", res.report);
        if (res.violation && h->violation && !strstr(res.report, h->violation))
            fail_msg("%s: expected a report of '%s'", h->name, h->violation);
    }
}

/* ---- Searches of the gate with the real tool --------------------------------------
 * The operator runs today's tool; followers re-read the mode every refresh
 * interval; the control key may vanish; the operator's host clock may be
 * off. Each search expects nothing found: a counterexample is a way past the
 * gate, printed with the schedule that replays it. Depths grow with
 * LB_EXPLORE_DEPTH (`make explore`). */
typedef struct gate_search {
    const char *name;
    const char *kinds[LBR_MAX_CLIENTS];
    int64_t ttl_ms[LBR_MAX_CLIENTS];    /* per client; 0: 1500 */
    int64_t offset_ms[LBR_MAX_CLIENTS]; /* per client clock offset */
    const char *prefix;                 /* the state the search starts from */
    int less;                           /* depth: explore_depth() less this */
    int max_jumps;                      /* pauses of LBR_STAGE_MS */
    const char *start_mode;             /* the mode the prefix leaves */
    int waiting;                        /* 1 + an operator whose write the prefix leaves held */
} gate_search;

/* The prefix reaches the state the search is meant to start from, with the
 * tool under test: a search from elsewhere (a setup the tool refused) would
 * find nothing and prove nothing. */
static void assert_start_reached(const gate_search *g, const lbr_explore_config *cfg) {
    char got[32];
    lbr_world_config wc = cfg->world;
    wc.port = server.port;
    lbr_world *w = lbr_world_new(&wc);
    assert_non_null(w);
    int rc = lbr_run(w, g->prefix);
    if (rc != LBR_OK) fail_msg("%s: the start '%s' did not run: %s", g->name, g->prefix,
                               lbr_violation(w));
    control_key(wc.key, got, sizeof got);
    if (strcmp(got, g->start_mode) != 0)
        fail_msg("%s: the start '%s' leaves the mode '%s', not '%s'", g->name, g->prefix, got,
                 g->start_mode);
    if (g->waiting && !lbr_running(w, g->waiting - 1))
        fail_msg("%s: after '%s', %c's mode write does not wait", g->name, g->prefix,
                 'A' + g->waiting - 1);
    lbr_world_free(w);
}

static void run_gate_search(const gate_search *g) {
    lbr_explore_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.world.key = "race:gate";
    cfg.world.ttl_ms = 1500;
    lb_codec_parse(&cfg.world.codec, "ms");
    memcpy(cfg.world.kinds, g->kinds, sizeof cfg.world.kinds);
    memcpy(cfg.world.client_ttl_ms, g->ttl_ms, sizeof cfg.world.client_ttl_ms);
    memcpy(cfg.world.client_offset_ms, g->offset_ms, sizeof cfg.world.client_offset_ms);
    cfg.prefix = g->prefix;
    cfg.depth = explore_depth() - g->less;
    cfg.max_jumps = g->max_jumps;
    cfg.jump_ms = LBR_STAGE_MS;
    assert_start_reached(g, &cfg);
    /* The gate's searches are short (a few hundred schedules at most) and
     * find their holes on a tool without the gate's rules only at the depth
     * they are written for: the quick run keeps it. */
    lbr_explore_result res = search(&cfg, 1);
    printf("  %s, depth %d from '%s'", g->name, cfg.depth, g->prefix);
    print_outcome(&res);
    if (res.violation) fail_msg("%s: a way past the gate: %s", g->name, res.report);
    assert_true(res.schedules > 0);
}

/* The control key vanishes under a modern fleet (B holds a token, read in
 * modern); an operator then sets legacy. Whatever the order of the deletion,
 * the operator's scan and its write, legacy must not be written beside the
 * token. */
static void test_search_no_legacy_beside_a_token_after_the_control_key_vanished(void **state) {
    (void)state;
    static const gate_search g = {
        "legacy set after the control key vanished under a modern fleet",
        {"operator:legacy", "lb-follow-compat-refresh", "vanish-mode", "switch-compat-modern"},
        {0}, {0}, "D:EVAL D:mode_set D! B:migrate_touch B:migrate_acquire", 2, 0, "modern", 0};
    run_gate_search(&g);
}

/* Two operators: A's `mode set modern` has judged an old compat stage and
 * waits to write; B's legacy has been written. Whatever follows (a pause, the
 * follower C re-reading the mode, B's compat, A's write), modern must not land
 * while C may still act in legacy. */
static void test_search_no_modern_in_a_fresh_compat_stage_with_two_operators(void **state) {
    (void)state;
    static char prefix[128];
    snprintf(prefix, sizeof prefix, "C C B B C +%d A B B", LBR_STAGE_MS);
    static const gate_search g0 = {
        "two operators: modern judged on an old compat stage, written after legacy",
        {"operator:modern", "operator:compat,legacy,compat", "lb-follow-compat-refresh"},
        {0}, {0}, NULL, 1, 1, "legacy", 1};
    gate_search g = g0;
    g.prefix = prefix;
    run_gate_search(&g);
}

/* The operator's host clock runs `ahead_ms` ahead; L1 holds a 30-minute lock
 * that no scan has seen before. `mode set modern` must not go through. */
static void search_past_a_live_legacy_lock(const char *name, int64_t ahead_ms) {
    static char prefix[64];
    snprintf(prefix, sizeof prefix, "A A +%d B:SETNX", LBR_STAGE_MS);
    gate_search g = {name, {"operator:compat,modern", "L1"}, {0, 1800000}, {ahead_ms, 0},
                     prefix, 2, 0, "compat", 0};
    run_gate_search(&g);
}

static void test_search_no_modern_past_a_live_legacy_lock_with_the_host_clock_ahead(void **state) {
    (void)state;
    search_past_a_live_legacy_lock("operator's host clock 2 h ahead, L1's 30-minute lock live",
                                   7200000);
}

/* The same search with the operator's clock right: the world's clock reaches
 * the tool (a search that found nothing here and something above proves the
 * offset is what it finds). */
static void test_search_no_modern_past_a_live_legacy_lock_with_the_host_clock_right(void **state) {
    (void)state;
    search_past_a_live_legacy_lock("operator's host clock right, L1's 30-minute lock live", 0);
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
        cmocka_unit_test(test_crash_and_takeover),
        cmocka_unit_test(test_two_racers_take_over_one_expired_lock),
        cmocka_unit_test(test_get_nil_means_released),
        cmocka_unit_test(test_getset_nil),
        cmocka_unit_test(test_late_release_after_takeover),
        cmocka_unit_test(test_release_racing_a_takeover),
        cmocka_unit_test(test_wire_paused_mid_operation),
        cmocka_unit_test(test_clocks_early_and_late),
        cmocka_unit_test(test_incr_lockers),
        cmocka_unit_test(test_overwritten_timestamp),
        cmocka_unit_test(test_token_locks_beside_legacy_clients),
        cmocka_unit_test(test_token_lock_races),
        cmocka_unit_test(test_fair_lock_races),
        cmocka_unit_test(test_exploration_of_fair_lock_fleets),
        cmocka_unit_test(test_exploration_of_fair_list_fleets_of_three),
        cmocka_unit_test(test_exploration_beside_strings_at_companion_names),
        cmocka_unit_test(test_exploration_beside_a_program_that_deletes_the_queue),
        cmocka_unit_test(test_exploration_of_a_hand_off_on_one_list),
        cmocka_unit_test(test_exploration_of_baton_waits_under_bounded_liveness),
        cmocka_unit_test(test_exploration_of_fair_leaves_and_windows),
        cmocka_unit_test(test_exploration_with_a_fencing_counter_that_cannot_count),
        cmocka_unit_test(test_exploration_finds_no_violation_in_lockbridge_fleets),
        cmocka_unit_test(test_exploration_finds_naive_lockers_violations),
        cmocka_unit_test(test_exploration_of_mixed_validities),
        cmocka_unit_test(test_migration_races),
        cmocka_unit_test(test_an_operators_mode_write_is_a_step_of_its_own),
        cmocka_unit_test(test_followers_reread_the_mode_every_refresh_interval),
        cmocka_unit_test(test_exploration_of_migration_fleets),
        cmocka_unit_test(test_exploration_finds_open_holes),
        cmocka_unit_test(test_search_no_legacy_beside_a_token_after_the_control_key_vanished),
        cmocka_unit_test(test_search_no_modern_in_a_fresh_compat_stage_with_two_operators),
        cmocka_unit_test(test_search_no_modern_past_a_live_legacy_lock_with_the_host_clock_ahead),
        cmocka_unit_test(test_search_no_modern_past_a_live_legacy_lock_with_the_host_clock_right),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
