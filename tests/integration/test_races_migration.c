/* The migration shim's races against a real redis-server: compat and modern
 * clients beside every other kind, the operator's mode write as a step of its
 * own, followers rereading the mode, and the searches for the staged
 * rollout's holes. */
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

/* ---- Migration: compat and modern clients of the shim beside every other kind ---- */

/* The cross-format acquire in the races of a migration: an expired legacy lock
 * is taken over only if unchanged since judged, whoever else is racing for it;
 * a switch of the namespace's mode lands between operations of the followers,
 * and an operation keeps the mode it started in. */
static void test_migration_races(void **state) {
    (void)state;
    static const lbt_race_scenario t[] = {
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
    LBT_RACE_TABLE(&server, t);
}

static void assert_mode(const char *key, const char *want) {
    char got[32];
    lbt_race_control_key(&server, key, got, sizeof got);
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
    cfg.ttl_ms = LBT_RACE_TTL_MS;
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
    const lbt_race_scenario t[] = {
        {"a follower keeps the mode it read until its refresh interval has passed",
         {"switch-legacy-compat", "lb-follow-compat-refresh"}, 0, later, LBR_OK, 0, 0},
        {"modern written while a follower may still act in the legacy it just read",
         {"switch-legacy-compat", "lb-follow-compat-refresh", "switch-compat-modern"}, 0, skip,
         LBR_VIOLATION, "the mode reads modern while B may still act in legacy", -1},
    };
    LBT_RACE_TABLE(&server, t);
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
        lbr_explore_result r = lbt_explore_fleet(&server, fleets[i].a, fleets[i].b, fleets[i].c, fleets[i].codec,
                                       lbt_explore_depth() - fleets[i].less, 0);
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
        lbr_explore_result res = lbt_search(&server, &cfg, h->expect_counterexample);
        printf("  %s (hole %d), depth %d from '%s'", h->name, h->hole, cfg.depth, h->prefix);
        lbt_print_outcome(&res);
        if (h->expect_counterexample && !res.violation)
            fail_msg("%s: the search no longer finds hole %d", h->name, h->hole);
        if (!h->expect_counterexample && res.violation) fail_msg("%s", res.report);
        if (res.violation && h->violation && !strstr(res.report, h->violation))
            fail_msg("%s: expected a report of '%s'", h->name, h->violation);
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
        cmocka_unit_test(test_migration_races),
        cmocka_unit_test(test_an_operators_mode_write_is_a_step_of_its_own),
        cmocka_unit_test(test_followers_reread_the_mode_every_refresh_interval),
        cmocka_unit_test(test_exploration_of_migration_fleets),
        cmocka_unit_test(test_exploration_finds_open_holes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
