/* Test harness: the race tests' shared policy: named scenarios replayed from a
 * table, and how deep and on which connection every search runs (cmocka
 * assertions: linked into the test binaries only). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/race_search.h"

static int run_scenario(const lbt_redis *server, const lbt_race_scenario *s) {
    lbr_world_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.port = server->port;
    cfg.key = "race:lock";
    cfg.ttl_ms = LBT_RACE_TTL_MS;
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

void lbt_race_table(const lbt_redis *server, const lbt_race_scenario *t, size_t n) {
    for (size_t i = 0; i < n; i++) run_scenario(server, &t[i]);
}

/* Every interleaving up to a bound. LB_EXPLORE_DEPTH raises the bound of the
 * two-client fleets (the three-client bound is one less). */
int lbt_explore_depth(void) {
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

/* Runs a search on the test's server over one borrowed connection (each
 * world of the search would open its own otherwise), to the depth
 * search_depth gives; the search must run: a world that broke (the operator's
 * tool did not run as intended) fails it. */
lbr_explore_result lbt_search(const lbt_redis *server, lbr_explore_config *cfg, int must_find) {
    lbr_explore_result res;
    cfg->depth = search_depth(cfg, must_find);
    cfg->world.port = server->port;
    cfg->world.conn = lbt_redis_connect(server);
    assert_non_null(cfg->world.conn);
    int rc = lbr_explore(cfg, &res);
    redisFree(cfg->world.conn);
    cfg->world.conn = NULL;
    if (rc != 0) fail_msg("the search could not run: %s", res.report[0] ? res.report : "no world");
    return res;
}

void lbt_print_outcome(const lbr_explore_result *res) {
    printf(": %ld schedules (%ld outside the model)%s%s\n", res->schedules, res->pruned,
           res->violation ? "\n    counterexample: " : ", none found",
           res->violation ? res->counterexample : "");
    if (res->violation) printf("    report: %s\n", res->report);
}

/* Clients whose every write is a single atomic command or script. */
static int atomic_kind(const char *k) {
    return !k || strcmp(k, "lb-scripted") == 0 || strncmp(k, "lb-modern", 9) == 0 ||
           strcmp(k, "M1") == 0 || strcmp(k, "lb-compat") == 0 ||
           strcmp(k, "lb-migrate-modern") == 0 || strcmp(k, "lb-follow-compat") == 0 ||
           strcmp(k, "switch-compat-modern") == 0;
}

static int all_scripted(const char *k1, const char *k2, const char *k3) {
    return atomic_kind(k1) && atomic_kind(k2) && atomic_kind(k3);
}

lbr_explore_result lbt_explore_fleet(const lbt_redis *server, const char *k1, const char *k2,
                                     const char *k3, const char *codec, int depth,
                                     int must_find) {
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
    lbr_explore_result res = lbt_search(server, &cfg, must_find);
    printf("  explored %s, depth %d: %ld schedules (%ld outside the model), %ld steps%s%s\n",
           k3 ? "3 clients" : "2 clients", cfg.depth, res.schedules, res.pruned, res.steps,
           res.violation ? ", counterexample: " : "", res.violation ? res.counterexample : "");
    return res;
}

void lbt_race_control_key(const lbt_redis *server, const char *key, char *out, size_t cap) {
    lb_ns_keys nk;
    assert_int_equal(lb_ns_keys_init(&nk, key, strlen(key)), LB_OK);
    redisContext *c = lbt_redis_connect(server);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "GET %s", nk.mode);
    assert_non_null(r);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    redisFree(c);
}
