/* `lockbridge sweep`, run as a child process against a real redis-server:
 * expired locks given a TTL, old ones deleted and running ones left, all
 * judged by the server's clock; never a value it cannot read, never a lock
 * changed since the scan.
 * The tool is $LB_TOOL, or $BUILD/lockbridge (BUILD defaults to build). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "harness/cli.h"
#include "harness/proxy.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"

static lbt_cli cli;

static long long pexpiretime(const char *key) { return lbt_int(cli.conn, "PEXPIRETIME %s", key); }

/* By default only locks past their timestamp are touched (a live one given a
 * TTL at timestamp + grace would outlast any compat TTL); what was found is
 * recorded in the namespace's gate record first. */
static void test_sweep_expires_expired_locks_deletes_old_ones_and_leaves_running_ones(void **state) {
    (void)state;
    int64_t now = lbt_wall_ms();
    long long running = now + 60000, recent = now - 2000, old = now - 3600000;
    lbt_cmd_ok(cli.conn, "SET %s %lld", "cli:w:run", running);
    lbt_cmd_ok(cli.conn, "SET %s %lld", "cli:w:recent", recent);
    lbt_cmd_ok(cli.conn, "SET %s %lld", "cli:w:old", old);
    /* Dry run: says what it would do, writes nothing. */
    const char *dry[] = {"-p", cli.port, "sweep", "--ns", "swns", "--match", "cli:w:*",
                         "--grace-ms", "10000", "--dry-run", "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, dry, 0);
    assert_true(lbt_num_of(o, "candidates") == 2);
    assert_true(lbt_num_of(o, "to_delete") == 1);
    assert_true(lbt_num_of(o, "live_left_alone") == 1);
    assert_true(lbt_num_of(o, "acted") == 0);
    cJSON_Delete(o);
    assert_int_equal(lbt_int(cli.conn, "PTTL %s", "cli:w:recent"), -1);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:w:old"), 1);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "{swns}:lb-gate"), 0);
    const char *args[] = {"-p", cli.port, "sweep", "--ns", "swns", "--match", "cli:w:*",
                          "--grace-ms", "10000", "--json", NULL};
    o = lbt_run_json(&cli.proc, args, 0);
    assert_true(lbt_num_of(o, "acted") == 2);
    assert_true(lbt_num_of(o, "changed_meanwhile") == 0);
    cJSON_Delete(o);
    /* The running lock keeps no TTL; the expired one's TTL ends exactly at
     * timestamp + grace; the old one is gone. */
    assert_int_equal(lbt_int(cli.conn, "PTTL %s", "cli:w:run"), -1);
    assert_int_equal(pexpiretime("cli:w:recent"), recent + 10000);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:w:old"), 0);
    /* The gate record keeps the latest timestamp found. */
    char v[32];
    snprintf(v, sizeof v, "%lld", running);
    redisReply *r = redisCommand(cli.conn, "HGET %s %s", "{swns}:lb-gate", "legacy_until_ms");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, v);
    freeReplyObject(r);
    /* --expire-live: the running lock too, at timestamp + grace. */
    const char *live[] = {"-p", cli.port, "sweep", "--ns", "swns", "--match", "cli:w:*",
                          "--grace-ms", "10000", "--expire-live", "--json", NULL};
    o = lbt_run_json(&cli.proc, live, 0);
    assert_true(lbt_num_of(o, "acted") == 1);
    cJSON_Delete(o);
    assert_int_equal(pexpiretime("cli:w:run"), running + 10000);
    assert_string_equal(lbt_get(cli.conn, "cli:w:run"), v);
    lbt_cmd_ok(cli.conn, "DEL %s %s %s", "cli:w:run", "cli:w:recent", "{swns}:lb-gate");
}

/* Debian's libfaketime, preloaded into the tool alone to move its host clock. */
#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

/* Every instant is judged by the server's clock: a sweeping host whose clock
 * runs 100 s ahead must not delete a lock with 30 s left (by that host's clock
 * it expired 70 s ago, past any grace below that). */
static void test_sweep_judges_by_the_server_clock_not_the_hosts(void **state) {
    (void)state;
    if (access(FAKETIME_LIB, R_OK) != 0) fail_msg("%s missing: make deps installs faketime",
                                                  FAKETIME_LIB);
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)(lbt_wall_ms() + 30000));
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:skew:k", v);
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL;
    char opts[512];
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "", asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    setenv("LD_PRELOAD", FAKETIME_LIB, 1);
    setenv("FAKETIME", "+100s", 1);
    const char *args[] = {"-p", cli.port, "sweep", "--ns", "swns", "--match", "cli:skew:*",
                          "--grace-ms", "10000", "--json", NULL};
    int rc = lbt_run(&cli.proc, args);
    unsetenv("LD_PRELOAD");
    unsetenv("FAKETIME");
    if (saved) setenv("ASAN_OPTIONS", saved, 1);
    else unsetenv("ASAN_OPTIONS");
    free(saved);
    if (rc != 0) fail_msg("exit %d: %s", rc, cli.proc.err);
    assert_string_equal(lbt_get(cli.conn, "cli:skew:k"), v);
    assert_int_equal(lbt_int(cli.conn, "PTTL %s", "cli:skew:k"), -1);
    lbt_cmd_ok(cli.conn, "DEL %s %s", "cli:skew:k", "{swns}:lb-gate");
}

/* Nothing that is not a TTL-less timestamp in a named epoch codec is touched:
 * unknown values, INCR counters, tokens, compat values, other types, and
 * timestamps on a monotonic clock. */
static void test_sweep_never_touches_what_it_cannot_read(void **state) {
    (void)state;
    static const char *const values[] = {"garbage", "12", "0123456789abcdef0123456789abcdef",
                                         "{\"uid\":\"x\"}", "{\"expiryTime\":5}",
                                         "1700000000000 "};
    char key[32];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "cli:n:%d", i);
        lbt_cmd_ok(cli.conn, "SET %s %s", key, values[i]);
    }
    lbt_cmd_ok(cli.conn, "SET %s %s PX 100000", "cli:n:compat", "1700000000000");
    lbt_cmd_ok(cli.conn, "SADD %s %s", "cli:n:set", "m");
    const char *args[] = {"-p", cli.port, "sweep", "--ns", "swns", "--match", "cli:n:*", "--codec",
                          "ms", "--codec", "json", "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, args, 0);
    assert_true(lbt_num_of(o, "candidates") == 0);
    assert_true(lbt_num_of(o, "skipped_mono") == 1);
    const cJSON *left = cJSON_GetObjectItemCaseSensitive(o, "left_alone");
    assert_true(lbt_num_of(left, "unknown") == 2);
    assert_true(lbt_num_of(left, "incr") == 1);
    assert_true(lbt_num_of(left, "token") == 2);
    assert_true(lbt_num_of(left, "compat") == 1);
    assert_true(lbt_num_of(left, "wrongtype") == 1);
    cJSON_Delete(o);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "cli:n:%d", i);
        assert_string_equal(lbt_get(cli.conn, key), values[i]);
        assert_int_equal(lbt_int(cli.conn, "PTTL %s", key), -1);
    }
    assert_int_equal(lbt_int(cli.conn, "SCARD %s", "cli:n:set"), 1);
    lbt_del_matching(cli.conn, "cli:n:*");
}

/* A lock taken over between the scan and the action is left alone: the sweep
 * runs through a proxy that delays every byte by 300 ms, and the key changes
 * as soon as the server has loaded the sweep's script (its third SCRIPT LOAD,
 * after the reader's for the namespaces' gate records and for the locks), at
 * least 600 ms before the action can reach it. */
static void test_sweep_leaves_a_lock_changed_since_the_scan(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s %lld", "cli:race:k", (long long)(lbt_wall_ms() - 3600000));
    lbt_proxy *p = lbt_proxy_start(cli.server.port);
    assert_non_null(p);
    lbt_proxy_delay(p, 300);
    char pp[16];
    snprintf(pp, sizeof pp, "%d", lbt_proxy_port(p));
    long long before = lbt_calls(cli.conn, "script|load");
    const char *args[] = {"-p", pp, "sweep", "--ns", "swns", "--match", "cli:race:*", "--json",
                          NULL};
    lbt_spawn(&cli.proc, args);
    for (int i = 0; lbt_calls(cli.conn, "script|load") < before + 3; i++) {
        assert_true(i < LBT_STUCK_MS);
        usleep(1000);
    }
    char taken[32];
    snprintf(taken, sizeof taken, "%lld", (long long)(lbt_wall_ms() + 60000));
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:race:k", taken); /* a legacy client's takeover */
    int rc = lbt_finish(&cli.proc);
    lbt_proxy_stop(p);
    assert_int_equal(rc, 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[0], "action"), "delete");
    assert_false(lbt_bool_of(l.line[0], "done"));
    assert_true(lbt_num_of(l.line[1], "changed_meanwhile") == 1);
    assert_true(lbt_num_of(l.line[1], "acted") == 0);
    assert_string_equal(lbt_get(cli.conn, "cli:race:k"), taken);
    assert_int_equal(lbt_int(cli.conn, "PTTL %s", "cli:race:k"), -1);
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:race:k");
    lbt_lines_free(&l);
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_sweep");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_expires_expired_locks_deletes_old_ones_and_leaves_running_ones),
        cmocka_unit_test(test_sweep_judges_by_the_server_clock_not_the_hosts),
        cmocka_unit_test(test_sweep_never_touches_what_it_cannot_read),
        cmocka_unit_test(test_sweep_leaves_a_lock_changed_since_the_scan),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
