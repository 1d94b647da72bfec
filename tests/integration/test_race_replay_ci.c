/* `lockbridge race` against a real redis-server, as CI runs it: a run ended by
 * a signal or a lost server cleans up and reports, proxy ports come from the
 * range given, and a set-up failure is a JUnit error. */
#include <dirent.h>
#include <signal.h>
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
#define CATALOGUE "catalogue"

static lbt_redis server;
static char port[16];

/* ---- Ending a run: signals and a lost server ---------------------------------------------- */

/* Processes whose command line has `mark` (other than this test). */
static int processes_with(const char *mark) {
    int n = 0;
    DIR *d = opendir("/proc");
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        char path[300], cmd[4096];
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == (int)getpid()) continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
        for (size_t i = 0; i < len; i++)
            if (!cmd[i]) cmd[i] = ' ';
        cmd[len] = '\0';
        if (strstr(cmd, mark)) n++;
    }
    closedir(d);
    return n;
}

static int entries_in(const char *dir) {
    int n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* SIGTERM (a CI job's timeout) mid-catalogue: the clients, the tool's own
 * redis-server and its folders are gone when it exits, and the JUnit report
 * has the rows done and the rest as errors. */
static void test_sigterm_stops_everything_and_writes_the_report(void **state) {
    (void)state;
    char tmp[] = "/tmp/lb-race-term-XXXXXX", junit[300], line[1024], cl[4][1100];
    assert_non_null(mkdtemp(tmp));
    snprintf(junit, sizeof junit, "%s.xml", tmp);
    /* The key names the run: every process of it has the folder's name. */
    snprintf(line, sizeof line,
             "while :; do %s hold %s:lock -p {port} --ttl-ms 300 --release-margin-ms 60 "
             "--wait-ms 60000 --hold-ms 0 >/dev/null 2>&1; done",
             lbt_tool(), tmp);
    for (int i = 0; i < 4; i++) snprintf(cl[i], sizeof cl[i], "%c=%s", 'A' + i, line);
    char key[300];
    snprintf(key, sizeof key, "%s:lock", tmp);
    const char *args[] = {"race", "--catalogue", CATALOGUE, "--locker", "lockbridge-hold",
                          "--key", key, "--ttl-ms", "300", "--json", "--junit", junit,
                          "--client", cl[0], "--client", cl[1], "--client", cl[2],
                          "--client", cl[3], NULL};
    setenv("TMPDIR", tmp, 1);
    lbt_proc p;
    lbt_spawn(&p, args);
    unsetenv("TMPDIR");
    lbt_wait_lines(&p, 4 + 2); /* the ports, a skipped row and one replayed */
    assert_true(processes_with(tmp) > 0);
    kill(p.pid, SIGTERM);
    assert_int_equal(lbt_finish(&p), 128 + SIGTERM);
    assert_int_equal(processes_with(tmp), 0);
    assert_int_equal(entries_in(tmp), 0);
    assert_non_null(strstr(p.err, "the run was stopped by signal 15"));
    const char *x = lbt_read_file(junit);
    assert_non_null(strstr(x, "<testsuite name=\"lockbridge race\" tests=\"16\" failures=\"0\" "));
    assert_non_null(strstr(x, "name=\"crash-and-takeover\""));
    assert_non_null(strstr(x, "<error message=\"not run: the run was stopped by signal 15\"/>"));
    assert_null(strstr(x, "<failure"));
    unlink(junit);
    rmdir(tmp);
}

/* The server lost in the middle of a schedule ends the run at once with
 * exit 4, the row an error, not a wait per row and exit 6. */
static void test_a_server_lost_mid_run_exits_4(void **state) {
    (void)state;
    lbt_redis lost;
    assert_int_equal(lbt_redis_start(&lost, NULL), 0);
    char lport[16];
    snprintf(lport, sizeof lport, "%d", lost.port);
    const char *args[] = {"-p", lport, "race", "--schedule", "A:SETNX +600000 A:DEL", "--key",
                          KEY, "--json", "--start-timeout-ms", "10000", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 1);
    redisContext *a = lbt_client_conn(lbt_port_of(&p, 'A'));
    lbt_send_cmd(a, "SETNX %s 1", KEY);
    lbt_expect_reply_int(a, 1);
    lbt_redis_kill(&lost);
    assert_int_equal(lbt_finish(&p), 4);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "error");
    assert_string_equal(lbt_str_of(res[0], "detail"), "the Redis server closed A's connection");
    assert_non_null(strstr(p.err, "the Redis server was lost during schedule"));
    cJSON_Delete(res[0]);
    redisFree(a);
    lbt_redis_stop(&lost);
}

/* ---- CI details ------------------------------------------------------------------------------ */

/* A loopback port free now (nothing keeps it free: the tests below only need
 * one that is likely so). */
static int a_free_port(void) {
    int p = lbt_free_port();
    assert_true(p > 0);
    return p;
}

/* --ports LO-HI: every client's port is in the range. */
static void test_the_proxy_ports_come_from_the_range_given(void **state) {
    (void)state;
    int lo = a_free_port() / 2 + 16384; /* in 16384..49151, above most services */
    char range[32];
    snprintf(range, sizeof range, "%d-%d", lo, lo + 40);
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX B:SETNX C:SETNX", "--key",
                          KEY, "--json", "--ports", range, "--start-timeout-ms", "100", NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 6);
    for (char c = 'A'; c <= 'C'; c++) {
        int cp = lbt_port_of(&p, c);
        if (cp < lo || cp > lo + 40) fail_msg("client %c: port %d, not in %s", c, cp, range);
    }
}

/* The tool's own redis-server takes its port from the range too: with a range
 * of one port, nothing is left for the proxy, and the set-up failure is an
 * <error> of the JUnit report, which is written all the same. */
static void test_a_set_up_failure_is_a_junit_error(void **state) {
    (void)state;
    char range[32], junit[] = "/tmp/lb-race-junit-XXXXXX";
    int one = a_free_port();
    snprintf(range, sizeof range, "%d-%d", one, one);
    close(mkstemp(junit));
    const char *args[] = {"race", "--schedule", "A:SETNX", "--key", KEY, "--ports", range,
                          "--junit", junit, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 4);
    char want[200];
    snprintf(want, sizeof want,
             "<error message=\"not run: no free loopback port in %s for client A\"/>", range);
    const char *x = lbt_read_file(junit);
    if (!strstr(x, want)) fail_msg("expected '%s' in:\n%s", want, x);
    assert_non_null(strstr(x, "tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\""));
    /* A command line refused is reported too. */
    const char *bad[] = {"-p", port, "race", "--schedule", "A:SETNX +x", "--junit", junit, NULL};
    assert_int_equal(lbt_run(&p, bad), 1);
    assert_non_null(strstr(lbt_read_file(junit), "<testcase classname=\"lockbridge.race.client\" "
                                             "name=\"set-up\""));
    assert_non_null(strstr(lbt_read_file(junit), "errors=\"1\""));
    unlink(junit);
}

static int setup(void **state) {
    (void)state;
    if (lbt_tool_init("test_race_replay_ci") != 0) return -1;
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
        cmocka_unit_test(test_sigterm_stops_everything_and_writes_the_report),
        cmocka_unit_test(test_a_server_lost_mid_run_exits_4),
        cmocka_unit_test(test_the_proxy_ports_come_from_the_range_given),
        cmocka_unit_test(test_a_set_up_failure_is_a_junit_error),
    };
    /* RACE_TEST_FILTER="*pattern*" runs only the matching tests. */
    if (getenv("RACE_TEST_FILTER")) cmocka_set_test_filter(getenv("RACE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
