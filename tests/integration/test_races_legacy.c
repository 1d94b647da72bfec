/* The regression catalogue of the legacy lockers' races: each race of the
 * deployed lockers, and of token locks beside them, replayed step by step
 * against a real redis-server, for lockbridge's clients (which must pass) and
 * for the lockers that have the bug (which the harness must catch); and the
 * searches of lockbridge's and the naive lockers' fleets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness/redis_server.h"
#include "harness/race_search.h"
#include "race/race.h"

static lbt_redis server;


/* A holder crashes; after its expiry a contender takes the lock over. */
static void test_crash_and_takeover(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
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
    LBT_RACE_TABLE(&server, t);
}

/* Two racers see the same expired value; both GETSET. Only the one that got the
 * expired value back may hold; the loser's GETSET has already overwritten. */
static void test_two_racers_take_over_one_expired_lock(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
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
    LBT_RACE_TABLE(&server, t);
}

/* GET after a failed SETNX returns nil: the holder released in between. */
static void test_get_nil_means_released(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
        {"lb-wire retries SETNX after a nil GET", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX B:SETNX A:GET A:DEL B:GET B:SETNX", LBR_OK, 0, 0},
        {"lb-wire after a nil GET meets a new holder", {"lb-wire", "lb-wire", "lb-wire"}, 0,
         "A:SETNX B:SETNX A:GET A:DEL B:GET C:SETNX B:SETNX B:GET", LBR_OK, 0, 0},
        {"L1's catch-all DEL on a nil GET deletes a live lock", {"lb-wire", "L1", "lb-wire"}, 0,
         "A:SETNX B:SETNX A:GET A:DEL B:GET C:SETNX B:DEL", LBR_VIOLATION,
         "B deleted C's valid lock", -1},
    };
    LBT_RACE_TABLE(&server, t);
}

/* GETSET returns nil: the key vanished between GET and GETSET. R's rule (and
 * lockbridge's) says our GETSET created it: held. L4 says not held, and leaves
 * its value in a key nobody holds. */
static void test_getset_nil(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
        {"lb-wire holds after a nil GETSET", {"L2", "lb-wire", "lb-wire"}, 0,
         "A:SETNX +6000 B:SETNX B:GET A:DEL B:GETSET C:SETNX C:GET B:GET B:DEL C?",
         LBR_OK, 0, 0},
        {"L3 holds after a nil GETSET", {"L2", "L3", "lb-wire"}, "json",
         "A:SETNX +6000 B:SETNX B:GET A:DEL B:GETSET C:SETNX C:GET", LBR_OK, 0, 0},
        {"L4's nil GETSET leaves a lock nobody holds", {"L2", "L4", "lb-wire"}, 0,
         "A:SETNX +6000 B:SETNX B:GET A:DEL B:GETSET C?", LBR_VIOLATION,
         "liveness: C", -1},
    };
    LBT_RACE_TABLE(&server, t);
}

/* A holder outlives its timeout, a contender takes over, then the first
 * holder releases. */
static void test_late_release_after_takeover(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
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
    LBT_RACE_TABLE(&server, t);
}

/* A release (GET, compare, DEL) races a takeover of the same expiring lock. */
static void test_release_racing_a_takeover(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
        {"lb-wire refuses the DEL near expiry", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX +5500 B:SETNX A:GET +600 B:GET B:GETSET", LBR_OK, 0, 0},
        {"L5's GET-compare-DEL deletes the taker's lock", {"L5", "lb-wire"}, "float",
         "A:SETNX +6000 B:SETNX A:GET B:GET B:GETSET A:DEL", LBR_VIOLATION,
         "A deleted B's valid lock", -1},
        {"lb-scripted release is atomic", {"lb-scripted", "lb-scripted"}, 0,
         "A:SETNX +6000 B:SETNX B:GET A:legacy_release B:legacy_takeover", LBR_OK, 0, 0},
    };
    LBT_RACE_TABLE(&server, t);
}

/* The wire protocol's operations take two commands. The release's margin covers
 * clock skew and a round trip; a client paused between its GET and its DEL for
 * longer than the margin deletes whoever took the lock over meanwhile. A client
 * paused between GET and GETSET writes a stale expiry over a fresh holder's,
 * shortening its lock. Only atomic operations close these windows: the
 * scripted variant passes the same schedules. */
static void test_wire_paused_mid_operation(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
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
    LBT_RACE_TABLE(&server, t);
}

/* The protocol trusts clocks: a client whose clock runs early by more than the
 * time left on a lock takes it over while its holder still holds it. No client
 * can prevent this; the harness must see it, and see nothing within the skew. */
static void test_clocks_early_and_late(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
        {"lb-wire with an early clock breaks exclusion", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX B~6000 B:SETNX B:GET B:GETSET", LBR_VIOLATION, "mutual exclusion", -1},
        {"lb-wire with a small skew is safe", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX B~3000 B:SETNX B:GET B:SETNX", LBR_OK, 0, 0},
        {"a late clock delays takeover of a crashed lock", {"lb-wire", "lb-wire"}, 0,
         "A:SETNX A! B~-3000 +6000 B:SETNX B:GET B:SETNX +3000 B:GET B:GETSET", LBR_OK, 0, 0},
    };
    LBT_RACE_TABLE(&server, t);
}

/* INCR-based lockers: a crash between INCR and EXPIRE, and the double INCR. */
static void test_incr_lockers(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
        {"INCR then EXPIRE: a crash between leaves a key forever", {"naive-incr-expire",
                                                                     "naive-incr-expire"}, 0,
         "A:INCR A! +60000 B?", LBR_VIOLATION, "liveness: B", -1},
        {"L1's double INCR deletes a live lock", {"L1-incr2", "L1-incr2"}, 0,
         "A:INCR A:EXPIRE B:INCR B:INCR B:DEL", LBR_VIOLATION, "B deleted A's valid lock", -1},
    };
    LBT_RACE_TABLE(&server, t);
}

/* L3's overwrite: the losing racer's GETSET replaces the winner's value, so the
 * winner's release (GET, compare) no longer recognises it. */
static void test_overwritten_timestamp(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
        {"L3 racers: the winner cannot release", {"lb-wire", "L3", "L3", "lb-wire"}, "json",
         "A:SETNX A! +6000 B:SETNX B:GET C:SETNX C:GET B:GETSET C:GETSET B:GET D?",
         LBR_VIOLATION, "liveness: D", -1},
        {"lb-scripted racers: no overwrite, the winner releases",
         {"lb-wire", "lb-scripted", "lb-scripted", "lb-wire"}, "json",
         "A:SETNX A! +6000 B:SETNX B:GET C:SETNX C:GET B:legacy_takeover C:legacy_takeover "
         "B:legacy_release D?", LBR_OK, 0, 0},
    };
    LBT_RACE_TABLE(&server, t);
}

/* Every interleaving up to a bound. LB_EXPLORE_DEPTH raises the bound of the
 * two-client fleets (the three-client bound is one less). */

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
        lbr_explore_result r = lbt_explore_fleet(&server, fleets[i].a, fleets[i].b, fleets[i].c, fleets[i].codec,
                                       lbt_explore_depth() - fleets[i].less, 0);
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
        lbr_explore_result res = lbt_search(&server, &cfg, rows[i].expect_counterexample);
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
        lbr_explore_result r = lbt_explore_fleet(&server, naive[i].kind, naive[i].kind, NULL, "ms", 6, 1);
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
    static const lbt_race_scenario t[] = {
        {"lb-wire leaves an M1 token alone until its TTL lapses", {"M1", "lb-wire"}, 0,
         "A:SET B:SETNX B:GET B:SETNX B:GET +6000 B:SETNX", LBR_OK, 0, 0},
        {"lb-scripted leaves an M1 token alone", {"M1", "lb-scripted"}, "json",
         "A:SET B:SETNX B:GET A:EVAL B?", LBR_OK, 0, 0},
        {"L3 takes over a live M1 token lock", {"M1", "L3"}, "json",
         "A:SET B:SETNX B:GET B:GETSET", LBR_VIOLATION, "overwrote A's valid lock", -1},
    };
    LBT_RACE_TABLE(&server, t);
}

/* lockbridge's token lock in the same races: its TTL does what the legacy
 * timestamp did, its scripts do what compare-and-set did; and the legacy
 * lockers that must never meet token values are caught when they do. */
static void test_token_lock_races(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
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
    LBT_RACE_TABLE(&server, t);
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
        cmocka_unit_test(test_exploration_finds_no_violation_in_lockbridge_fleets),
        cmocka_unit_test(test_exploration_finds_naive_lockers_violations),
        cmocka_unit_test(test_exploration_of_mixed_validities),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
