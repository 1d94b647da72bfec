/* The programs of examples/ run as a reader would run them, against a real
 * redis-server and a real Cluster, so that they cannot rot; and each stays
 * within the length the first-hour programs are held to. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "harness/cluster.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"

static lbt_redis server;
static redisContext *conn;

/* Runs build/examples/NAME with `args`, its stdout and stderr into out;
 * returns its exit status (-1 if it did not exit). */
static int run_example(const char *name, const char *args, char *out, size_t cap) {
    const char *build = getenv("BUILD");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/examples/%s %s 2>&1", build && *build ? build : "build", name,
             args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    print_message("%s %s:\n%s", name, args, out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Lines of examples/NAME.c, as wc -l counts them. */
static int lines_of(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "examples/%s.c", name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int n = 0, ch;
    while ((ch = fgetc(f)) != EOF) n += ch == '\n';
    fclose(f);
    return n;
}

/* The programs a C developer's first hour asks for, at most this long. */
static void test_the_first_hour_programs_stay_short(void **state) {
    (void)state;
    assert_in_range(lines_of("legacy_lock"), 1, 25);
    assert_in_range(lines_of("watched_lock"), 1, 40);
    assert_in_range(lines_of("cluster_lock"), 1, 25);
}

static void test_the_legacy_lock_takes_and_releases_a_timestamp_lock(void **state) {
    (void)state;
    char out[4096], port[16];
    snprintf(port, sizeof port, "%d", server.port);
    lbt_cmd_ok(conn, "DEL orders:42");
    assert_int_equal(run_example("legacy_lock", port, out, sizeof out), 0);
    assert_non_null(strstr(out, "orders:42: LB_OK"));
    assert_string_equal(lbt_get(conn, "orders:42"), ""); /* released */
    /* A live value of the fleet's is waited for, then given up, and kept. */
    char live[32];
    snprintf(live, sizeof live, "%lld", (long long)(lb_clock_now(NULL).wall_us / 1000 + 600000));
    lbt_cmd_ok(conn, "SET orders:42 %s", live);
    assert_int_equal(run_example("legacy_lock", port, out, sizeof out), 1);
    assert_non_null(strstr(out, "LB_ETIMEDOUT"));
    assert_string_equal(lbt_get(conn, "orders:42"), live);
    lbt_cmd_ok(conn, "DEL orders:42");
}

/* The self-renewing lock outlives its TTL, writes each step with its fencing
 * number, and releases. */
static void test_the_watched_lock_renews_itself_and_fences_its_writes(void **state) {
    (void)state;
    char out[4096], port[16];
    snprintf(port, sizeof port, "%d", server.port);
    lbt_cmd_ok(conn, "DEL report:7 report:7:data {report:7}:fence");
    assert_int_equal(run_example("watched_lock", port, out, sizeof out), 0);
    assert_non_null(strstr(out, "report:7: LB_OK"));
    assert_string_equal(lbt_get(conn, "report:7"), "");
    redisReply *r = redisCommand(conn, "HGET report:7:data fence");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, "1"); /* the first acquisition's number wrote last */
    freeReplyObject(r);
    assert_int_equal(run_example("fenced_worker", port, out, sizeof out), 0);
    assert_non_null(strstr(out, "refused by the resource"));
}

static void test_the_cluster_lock_runs_on_the_keys_primary(void **state) {
    (void)state;
    lbt_cluster cluster;
    char out[4096], seeds[128];
    assert_int_equal(lbt_cluster_start(&cluster, 5000), 0);
    snprintf(seeds, sizeof seeds, "%s %s", cluster.seed[0], cluster.seed[4]);
    int rc = run_example("cluster_lock", seeds, out, sizeof out);
    int rc_none = run_example("cluster_lock", "", out + 2048, sizeof out - 2048);
    lbt_cluster_stop(&cluster);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "holding orders:{42} on 127.0.0.1:"));
    assert_non_null(strstr(out, "orders:{42}: LB_OK"));
    assert_int_equal(rc_none, 1); /* no seed: said, not crashed */
}

static int setup(void **state) {
    (void)state;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    conn = lbt_redis_connect(&server);
    return conn ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (conn) redisFree(conn);
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_first_hour_programs_stay_short),
        cmocka_unit_test(test_the_legacy_lock_takes_and_releases_a_timestamp_lock),
        cmocka_unit_test(test_the_watched_lock_renews_itself_and_fences_its_writes),
        cmocka_unit_test(test_the_cluster_lock_runs_on_the_keys_primary),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
