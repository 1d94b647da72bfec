/* `lockbridge race` against a real redis-server, recorded and repeated: a
 * row whose outcome changes between replays is flaky, and a client's own
 * recorded sequence replays as written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "harness/proc.h"
#include "harness/race_client.h"
#include "harness/redis_server.h"

#define KEY "race:lock"

static lbt_redis server;
static char port[16];
static char java_cp[512];

/* The lock's validity T of a replay, ms: short, since the catalogue's pauses
 * are multiples of it (3.1T). */
#define SHORT_TTL_MS 300

/* --repeat: a row whose outcome changes between replays is flaky. B is built
 * to flap: every other run it deletes A's lock (caught) or only reads it
 * (passed); the same schedule replayed three times says so, and a steady row
 * replayed as often keeps its verdict. */
static void test_a_row_whose_outcome_changes_is_flaky(void **state) {
    (void)state;
    char dir[] = "/tmp/lb-race-flap-XXXXXX", ca[600], cb[1200], junit[300];
    assert_non_null(mkdtemp(dir));
    snprintf(junit, sizeof junit, "%s/report.xml", dir);
    snprintf(ca, sizeof ca, "A=redis-cli -p {port} SETNX " KEY " 1 >/dev/null && exec sleep 60");
    snprintf(cb, sizeof cb,
             "B=if [ -e %s/deleted ]; then rm %s/deleted; exec redis-cli -p {port} GET " KEY
             "; else : > %s/deleted; exec redis-cli -p {port} DEL " KEY "; fi",
             dir, dir, dir);
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX B", "--key", KEY,
                          "--repeat", "3", "--json", "--junit", junit, "--client", ca,
                          "--client", cb, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 6);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "flaky");
    assert_string_equal(lbt_str_of(res[0], "detail"),
                        "flaky over 3 runs: caught:deleted 2, passed 1");
    assert_int_equal((int)lbt_num_of(res[0], "runs"), 3);
    lbt_expect_in(lbt_str_of(res[0], "trace"), "--- run 1 of 3: caught:deleted ---\n");
    lbt_expect_in(lbt_str_of(res[0], "trace"), "--- run 2 of 3: passed ---\n");
    cJSON_Delete(res[0]);
    lbt_expect_in(lbt_read_file(junit), "<failure type=\"flaky\" message=\"expected pass: flaky over 3 "
                                "runs: caught:deleted 2, passed 1\"/>");
    unlink(junit);

    /* A steady client: the same verdict three times, not flaky. */
    snprintf(cb, sizeof cb, "B=exec redis-cli -p {port} DEL " KEY);
    args[sizeof args / sizeof args[0] - 2] = cb;
    assert_int_equal(lbt_run(&p, args), 6);
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "caught");
    assert_int_equal((int)lbt_num_of(res[0], "runs"), 3);
    cJSON_Delete(res[0]);
    unlink(junit);
    char state_file[300];
    snprintf(state_file, sizeof state_file, "%s/deleted", dir);
    unlink(state_file);
    rmdir(dir);
}

/* race record: a client's own sequence, printed as tokens, replays as written. */
static void test_a_recorded_sequence_replays_as_written(void **state) {
    (void)state;
    char line[1024], ca[1100];
    lbt_client_line(java_cp, "lockbridge-hold", SHORT_TTL_MS, line, sizeof line);
    snprintf(ca, sizeof ca, "A=%s", line);
    const char *rec[] = {"-p", port, "race", "record", "--key", KEY, "--record-steps", "5",
                         "--json", "--client", ca, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, rec), 0);
    const char *at = strstr(p.out, "\"event\":\"race_record\"");
    assert_non_null(at);
    lbt_lines lines;
    lbt_parse(&p, &lines);
    const cJSON *r = lines.line[lines.n - 1];
    char tokens[256];
    snprintf(tokens, sizeof tokens, "%s", lbt_str_of(r, "tokens"));
    assert_int_equal((int)lbt_num_of(r, "recorded"), 5);
    lbt_lines_free(&lines);
    /* lockbridge's wire lock: SETNX, then its release reads and deletes. */
    assert_string_equal(tokens, "A:SETNX A:GET A:DEL A:SETNX A:GET");
    const char *replay_args[] = {"-p", port, "race", "--schedule", tokens, "--key", KEY, "--json",
                                 "--client", ca, NULL};
    assert_int_equal(lbt_run(&p, replay_args), 0);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "passed");
    assert_int_equal((int)lbt_num_of(res[0], "followed"), 5);
    cJSON_Delete(res[0]);
}

static int setup(void **state) {
    (void)state;
    if (lbt_tool_init("test_race_replay_record") != 0) return -1;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    snprintf(port, sizeof port, "%d", server.port);
    const char *build = getenv("BUILD");
    snprintf(java_cp, sizeof java_cp, "%s/java", build && *build ? build : "build");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_row_whose_outcome_changes_is_flaky),
        cmocka_unit_test(test_a_recorded_sequence_replays_as_written),
    };
    /* RACE_TEST_FILTER="*pattern*" runs only the matching tests. */
    if (getenv("RACE_TEST_FILTER")) cmocka_set_test_filter(getenv("RACE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
