/* Test harness: the race tests' shared policy: named scenarios replayed from a
 * table, and how deep and on which connection every search of them runs. */
#ifndef LBT_RACE_SEARCH_H
#define LBT_RACE_SEARCH_H

#include <stddef.h>

#include "harness/redis_server.h"
#include "race/race.h"

#define LBT_RACE_TTL_MS 5000 /* ms; schedules jump +6000 to pass an expiry */

/* One named schedule and the outcome it must have. */
typedef struct lbt_race_scenario {
    const char *name;
    const char *kinds[LBR_MAX_CLIENTS];
    const char *codec;
    const char *schedule;
    int expect;            /* LBR_OK, LBR_VIOLATION or LBR_BAD_SCHEDULE */
    const char *violation; /* substring expected in the report */
    int overwrites;        /* expected GETSET overwrites (-1: not checked) */
} lbt_race_scenario;

/* Replays each scenario of `t` on key race:lock of `server` (validity
 * LBT_RACE_TTL_MS) and fails the running test at the first outcome that is
 * not the one expected. */
void lbt_race_table(const lbt_redis *server, const lbt_race_scenario *t, size_t n);
#define LBT_RACE_TABLE(server, t) lbt_race_table(server, t, sizeof(t) / sizeof(t[0]))

/* The bound of the two-client fleets' searches: LB_EXPLORE_DEPTH, 5 unset. */
int lbt_explore_depth(void);

/* Runs the search `cfg` on `server` to the depth the policy gives it (see
 * race_search.c); `must_find`: it is expected to find a counterexample. A
 * search that could not run fails the running test. */
lbr_explore_result lbt_search(const lbt_redis *server, lbr_explore_config *cfg, int must_find);

/* One line for a search's outcome: its schedules, and the counterexample and
 * its report when it found one. */
void lbt_print_outcome(const lbr_explore_result *res);

/* Searches a fleet of two or three kinds (k3 NULL: two) on key race:explore,
 * codec `codec`, to `depth` (as lbt_search), with one crash, two clock jumps
 * of 3600 ms and, unless every kind writes atomically, no pause inside an
 * operation; prints a line of its outcome. */
lbr_explore_result lbt_explore_fleet(const lbt_redis *server, const char *k1, const char *k2,
                                     const char *k3, const char *codec, int depth,
                                     int must_find);

/* The value of the control key of `key`'s namespace on `server` ("" when
 * absent), into `out` (`cap` bytes). */
void lbt_race_control_key(const lbt_redis *server, const char *key, char *out, size_t cap);

#endif
