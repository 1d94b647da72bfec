/* `lockbridge race` against a real redis-server: a schedule the clients do not
 * follow names its cause (a client that exits, never connects, bypasses the
 * proxy, uses other keys, closes a held command, or is not given). */
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

/* Runs `sched` with client A's command line `a_cmd` (NULL: none) and returns the
 * detail of the one race_result, which must be not followed. */
static const char *not_followed_detail(const char *sched, const char *a_cmd, const char *start_ms,
                                       lbt_proc *p) {
    char ca[1200];
    snprintf(ca, sizeof ca, "A=%s", a_cmd ? a_cmd : "");
    const char *args[] = {"-p", port, "race", "--schedule", sched, "--key", KEY, "--json",
                          "--start-timeout-ms", start_ms, "--step-timeout-ms", "1000",
                          "--client", ca, NULL};
    if (!a_cmd) args[sizeof args / sizeof args[0] - 3] = NULL;
    assert_int_equal(lbt_run(p, args), 6);
    const char *d = strstr(p->out, "\"verdict\":\"not_followed\"");
    assert_non_null(d);
    static char detail[1024];
    cJSON *res[2];
    assert_int_equal(lbt_results_of(p, res, 2), 1);
    snprintf(detail, sizeof detail, "%s", lbt_str_of(res[0], "detail"));
    cJSON_Delete(res[0]);
    printf("  %s\n", detail);
    return detail;
}

/* A client whose process ends (a classpath typo) is named at once with its
 * exit status and the last lines of its stderr, not after the start timeout. */
static void test_a_client_that_exits_is_named_with_its_status_and_stderr(void **state) {
    (void)state;
    lbt_proc p;
    const char *d = not_followed_detail(
        "A:SETNX", "echo 'Error: Could not find or load main class LegacyLockerz' >&2; exit 3",
        "600000", &p);
    assert_string_equal(d, "A's process exited with status 3; its stderr ends: Error: Could "
                           "not find or load main class LegacyLockerz");
}

/* A client that never connects to its port: the port is named. */
static void test_a_client_that_never_connects_is_named(void **state) {
    (void)state;
    lbt_proc p;
    const char *d = not_followed_detail("A:SETNX", "exec sleep 60", "300", &p);
    lbt_expect_in(d, "A never connected to its port ");
    lbt_expect_in(d, " within 300 ms of the start");
}

/* A client given the server's port instead of {port}: its connection is seen
 * on the server, and the detail says so. */
static void test_a_client_connected_straight_to_the_server_is_named(void **state) {
    (void)state;
    char line[1024];
    snprintf(line, sizeof line,
             "exec %s hold " KEY " -p %s --ttl-ms 60000 --hold-ms 60000 >/dev/null 2>&1",
             lbt_tool(), port);
    lbt_proc p;
    const char *d = not_followed_detail("A:SETNX", line, "1500", &p);
    lbt_expect_in(d, "A never connected to its port ");
    lbt_expect_in(d, "a client connected straight to the server? ({port} is its port)");
}

/* A client that only sends commands on other keys (a --key typo). */
static void test_a_client_on_other_keys_only_is_named(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX", "--key", KEY, "--json",
                          "--start-timeout-ms", "800", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 1);
    redisContext *a = lbt_client_conn(lbt_port_of(&p, 'A'));
    lbt_send_cmd(a, "SETNX %s 1", "race:lokc");
    lbt_expect_reply_int(a, 1);
    assert_int_equal(lbt_finish(&p), 6);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "detail"),
                        "A sent only commands on other keys than " KEY
                        " (1, the last: SETNX race:lokc 1)");
    cJSON_Delete(res[0]);
    redisFree(a);
}

/* A client that gives up on a command held at the proxy (its read timeout)
 * and closes its connection: the command and how long it was held. */
static void test_a_client_that_closes_a_held_command_is_named(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX A:GET B:SETNX", "--key", KEY,
                          "--json", "--start-timeout-ms", "10000", "--step-timeout-ms", "1000",
                          NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 2);
    redisContext *a = lbt_client_conn(lbt_port_of(&p, 'A')), *b = lbt_client_conn(lbt_port_of(&p, 'B'));
    lbt_send_cmd(b, "SETNX %s 2", KEY);
    lbt_send_cmd(a, "SETNX %s 1", KEY);
    lbt_expect_reply_int(a, 1);
    redisFree(b); /* B's SETNX is still held: A:GET comes first */
    lbt_send_cmd(a, "GET %s", KEY);
    lbt_expect_reply_any(a);
    assert_int_equal(lbt_finish(&p), 6);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    const char *d = lbt_str_of(res[0], "detail");
    lbt_expect_in(d, "B closed its connection while its SETNX was held at the proxy (");
    lbt_expect_in(d, " ms): a read timeout shorter than the schedule's waits?");
    cJSON_Delete(res[0]);
    redisFree(a);
}

/* A schedule naming a client no --client starts is refused before anything
 * runs, naming the client and the file's line. */
static void test_a_schedule_naming_a_client_not_given_is_refused(void **state) {
    (void)state;
    char path[] = "/tmp/lb-race-XXXXXX";
    int fd = mkstemp(path);
    const char text[] = "# race: three clients\nA:SETNX B:SETNX\n[L9] A:SETNX C:SETNX\n";
    assert_true(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
    close(fd);
    const char *args[] = {"-p", port, "race", "--file", path, "--locker", "L9",
                          "--client", "A=exec sleep 60", "--client", "B=exec sleep 60", NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 1);
    char want[128];
    snprintf(want, sizeof want, "%s:3: the schedule names client C, given no --client", path);
    lbt_expect_in(p.err, want);
    unlink(path);
}

static int setup(void **state) {
    (void)state;
    if (lbt_tool_init("test_race_replay_not_followed") != 0) return -1;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    snprintf(port, sizeof port, "%d", server.port);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_client_that_exits_is_named_with_its_status_and_stderr),
        cmocka_unit_test(test_a_client_that_never_connects_is_named),
        cmocka_unit_test(test_a_client_connected_straight_to_the_server_is_named),
        cmocka_unit_test(test_a_client_on_other_keys_only_is_named),
        cmocka_unit_test(test_a_client_that_closes_a_held_command_is_named),
        cmocka_unit_test(test_a_schedule_naming_a_client_not_given_is_refused),
    };
    /* RACE_TEST_FILTER="*pattern*" runs only the matching tests. */
    if (getenv("RACE_TEST_FILTER")) cmocka_set_test_filter(getenv("RACE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
