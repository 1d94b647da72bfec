/* Searches of the gate with the real tool against a real redis-server: no
 * legacy client beside a token, and no modern one in a stage that forbids it,
 * whatever the operators and followers do in between. */
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
    int less;                           /* depth: lbt_explore_depth() less this */
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
    lbt_race_control_key(&server, wc.key, got, sizeof got);
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
    cfg.depth = lbt_explore_depth() - g->less;
    cfg.max_jumps = g->max_jumps;
    cfg.jump_ms = LBR_STAGE_MS;
    assert_start_reached(g, &cfg);
    /* The gate's searches are short (a few hundred schedules at most) and
     * find their holes on a tool without the gate's rules only at the depth
     * they are written for: the quick run keeps it. */
    lbr_explore_result res = lbt_search(&server, &cfg, 1);
    printf("  %s, depth %d from '%s'", g->name, cfg.depth, g->prefix);
    lbt_print_outcome(&res);
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
        cmocka_unit_test(test_search_no_legacy_beside_a_token_after_the_control_key_vanished),
        cmocka_unit_test(test_search_no_modern_in_a_fresh_compat_stage_with_two_operators),
        cmocka_unit_test(test_search_no_modern_past_a_live_legacy_lock_with_the_host_clock_ahead),
        cmocka_unit_test(test_search_no_modern_past_a_live_legacy_lock_with_the_host_clock_right),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
