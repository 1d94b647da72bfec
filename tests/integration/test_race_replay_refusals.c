/* `lockbridge race` against a real redis-server, refusing what does not parse:
 * malformed and oversized requests close only their connection, and bad
 * schedules and catalogue files are usage errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "harness/proc.h"
#include "harness/race_client.h"
#include "harness/redis_server.h"
#include "tool/common/loopback.h"

#define KEY "race:lock"

static lbt_redis server;
static char port[16];

/* Malformed and oversized requests close the sender's connection; the proxy
 * goes on, and a well-formed client then follows the schedule. */
static void test_malformed_requests_close_only_their_connection(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX", "--key", KEY, "--json",
                          "--start-timeout-ms", "10000", NULL};
    static const char *const bad[] = {"*2\r\n$-5\r\n", "*99999999999999999999\r\n",
                                      "*1\r\n$2000000000\r\n", "PING\r\n", "*1\r\n$3\r\nGETxx"};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 1);
    int ap = lbt_port_of(&p, 'A');
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int fd = lb__loopback_connect(ap);
        assert_true(fd >= 0);
        assert_true(write(fd, bad[i], strlen(bad[i])) == (ssize_t)strlen(bad[i]));
        char buf[64];
        assert_int_equal(read(fd, buf, sizeof buf), 0); /* closed by the proxy */
        close(fd);
    }
    redisContext *a = lbt_client_conn(ap);
    lbt_send_cmd(a, "SETNX %s 1", KEY);
    lbt_expect_reply_int(a, 1);
    assert_int_equal(lbt_finish(&p), 0);
    assert_non_null(strstr(p.out, "\"verdict\":\"passed\""));
    redisFree(a);
}

/* Schedules and catalogue files that do not parse are usage errors. */
static void test_bad_schedules_are_refused(void **state) {
    (void)state;
    static const char *const scheds[] = {"", "A:SET$", "Z:GET", "+x", "+-5", "A!!", "A~"};
    for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++) {
        const char *args[] = {"-p", port, "race", "--schedule", scheds[i], NULL};
        lbt_proc p;
        assert_int_equal(lbt_run(&p, args), 1);
    }
    char path[] = "/tmp/lb-race-XXXXXX";
    int fd = mkstemp(path);
    const char bad[] = "# expect L1=maybe\nA:SETNX\n";
    assert_true(write(fd, bad, sizeof bad - 1) == (ssize_t)(sizeof bad - 1));
    close(fd);
    const char *args[] = {"-p", port, "race", "--file", path, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 1);
    assert_non_null(strstr(p.err, "expect NAME="));
    unlink(path);

    /* A schedule line longer than a schedule may be is refused, not cut
     * short into another schedule that parses. */
    char line[1200] = "";
    for (int i = 0; i < 31; i++) strcat(line, "A:ABCDEFGHIJKLMNOPQRSTUVWXYZABCDE ");
    strcat(line, "\n");
    fd = mkstemp(strcpy(path, "/tmp/lb-race-XXXXXX"));
    assert_true(write(fd, line, strlen(line)) == (ssize_t)strlen(line));
    close(fd);
    const char *longer[] = {"-p", port, "race", "--file", path, "--start-timeout-ms", "100",
                            NULL};
    assert_int_equal(lbt_run(&p, longer), 1);
    assert_non_null(strstr(p.err, "one schedule only"));
    unlink(path);

    /* A token that does not parse is refused at its file and line. */
    const char typo[] = "# race: a typo\n\nA:SETNX +31OO B:SETNX\n";
    fd = mkstemp(strcpy(path, "/tmp/lb-race-XXXXXX"));
    assert_true(write(fd, typo, sizeof typo - 1) == (ssize_t)(sizeof typo - 1));
    close(fd);
    const char *at[] = {"-p", port, "race", "--file", path, NULL};
    assert_int_equal(lbt_run(&p, at), 1);
    char want[128];
    snprintf(want, sizeof want, "%s:3: bad token \"+31OO\"", path);
    if (!strstr(p.err, want)) fail_msg("expected '%s' in: %s", want, p.err);
    unlink(path);
}

static int setup(void **state) {
    (void)state;
    if (lbt_tool_init("test_race_replay_refusals") != 0) return -1;
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
        cmocka_unit_test(test_malformed_requests_close_only_their_connection),
        cmocka_unit_test(test_bad_schedules_are_refused),
    };
    /* RACE_TEST_FILTER="*pattern*" runs only the matching tests. */
    if (getenv("RACE_TEST_FILTER")) cmocka_set_test_filter(getenv("RACE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
