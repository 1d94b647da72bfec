/* `lockbridge mode get` and `mode set`, run as a child process against a real
 * redis-server: modern refused while a legacy client writes (between its
 * locks too) unless overridden, stepping back, a jump back refused, and
 * control keys that hold no mode left alone. test_cli_gate.c takes the
 * gate's checks one by one.
 * The tool is $LB_TOOL, or $BUILD/lockbridge (BUILD defaults to build). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "harness/cli.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"

static lbt_cli cli;

static void test_mode_set_refuses_modern_while_legacy_writes_unless_overridden(void **state) {
    (void)state;
    const char *get[] = {"-p", cli.port, "mode", "get", "--ns", "cli:m", "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, get, 0);
    assert_string_equal(lbt_str_of(o, "mode"), "legacy");
    assert_false(lbt_bool_of(o, "control_key_present"));
    cJSON_Delete(o);
    /* The namespace's stored watch before modern: 100 ms. */
    lbt_cmd_ok(cli.conn, "HSET %s observe_ms 100", "{cli:m}:lb-gate");
    /* legacy -> modern skips a stage: refused even with no evidence at all. */
    const char *jump[] = {"-p", cli.port, "mode", "set", "modern", "--observe-ms", "100", "--ns",
                          "cli:m", "--match", "cli:m:*", "--json", NULL};
    o = lbt_run_json(&cli.proc, jump, 6);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "{cli:m}:lb-mode"), 0);
    cJSON_Delete(o);
    /* The first set stores the pattern; a stage here lasts no time at all (as
     * stored: a command may only lengthen it). */
    lbt_cmd_ok(cli.conn, "HSET %s ttl_ms 0 refresh_ms 0", "{cli:m}:lb-gate");
    const char *compat[] = {"-p", cli.port, "mode", "set", "compat", "--ns", "cli:m", "--match",
                            "cli:m:*", NULL};
    assert_int_equal(lbt_run(&cli.proc, compat), 0);
    assert_string_equal(lbt_get(cli.conn, "{cli:m}:lb-mode"), "compat");
    /* A TTL-less timestamp: a legacy client is still writing. */
    lb_legacy_lock *legacy = lbt_legacy_holder(cli.conn, "cli:m:lock");
    assert_int_equal(lbt_run(&cli.proc, jump), 6);
    assert_string_equal(lbt_get(cli.conn, "{cli:m}:lb-mode"), "compat");
    assert_non_null(strstr(cli.proc.out, "TTL-less value"));
    const char *forced[] = {"-p", cli.port, "mode", "set", "modern", "--observe-ms", "100", "--ns",
                            "cli:m", "--match", "cli:m:*", "--override", "legacy-writers", "--json",
                            NULL};
    o = lbt_run_json(&cli.proc, forced, 0);
    const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(o, "skipped");
    assert_true(cJSON_GetArraySize(skipped) >= 1);
    assert_string_equal(lbt_str_of(cJSON_GetArrayItem(skipped, 0), "check"), "legacy-writers");
    assert_string_equal(lbt_get(cli.conn, "{cli:m}:lb-mode"), "modern");
    cJSON_Delete(o);
    assert_int_equal(lb_legacy_release(legacy, lb_on_conn(cli.conn)), LB_OK);
    lb_legacy_lock_free(legacy);
    /* Stepping back: allowed, with the tokens still held and their PTTL. */
    lbt_cmd_ok(cli.conn, "SET %s %s PX 40000", "cli:m:tok", "0123456789abcdef0123456789abcdef");
    const char *back[] = {"-p", cli.port, "mode", "set", "compat", "--ns", "cli:m", "--match",
                          "cli:m:*", "--json", NULL};
    o = lbt_run_json(&cli.proc, back, 0);
    assert_true(lbt_bool_of(o, "changed"));
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "warnings");
    assert_true(cJSON_GetArraySize(w) >= 1);
    assert_non_null(strstr(cJSON_GetArrayItem(w, 0)->valuestring, "1 token value(s)"));
    assert_string_equal(lbt_get(cli.conn, "{cli:m}:lb-mode"), "compat");
    cJSON_Delete(o);
    /* Already there: nothing to do. */
    assert_int_equal(lbt_run(&cli.proc, back), 0);
    lbt_cmd_ok(cli.conn, "DEL %s %s %s", "{cli:m}:lb-mode", "cli:m:tok", "{cli:m}:lb-gate");
}

/* A legacy client that releases its locks leaves no key for one scan to find:
 * the observation still sees it, by repeated scans and by the server's count
 * of SETNX/GETSET calls. Once it has stopped, modern is allowed. */
static lbt_proc legacy_client;

static void test_mode_set_modern_observes_a_legacy_client_between_its_locks(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:obs}:lb-mode", "compat");
    lbt_cmd_ok(cli.conn, "HSET %s observe_ms 100", "{cli:obs}:lb-gate");
    const char *contend[] = {"-p", cli.port, "contend", "cli:obs:k", "--clients", "1", "--seconds",
                             "2", "--counter-key", "cli:obs:count", "--cs-sleep-ms", "5",
                             "--ttl-ms", "300", "--release-margin-ms", "50", NULL};
    lbt_spawn(&legacy_client, contend);
    const char *set[] = {"-p", cli.port, "mode", "set", "modern", "--ns", "cli:obs", "--match",
                         "cli:obs:k*", "--observe-ms", "500", "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, set, 6);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "blockers");
    int calls = 0;
    for (int i = 0; i < cJSON_GetArraySize(b); i++)
        calls += strstr(lbt_str_of(cJSON_GetArrayItem(b, i), "reason"),
                        "SETNX/GETSET call") != NULL;
    assert_int_equal(calls, 1);
    cJSON_Delete(o);
    assert_string_equal(lbt_get(cli.conn, "{cli:obs}:lb-mode"), "compat");
    assert_int_equal(lbt_finish(&legacy_client), 0);
    /* Stopped: nothing is written meanwhile, and modern is set once the window
     * (here 0: the last lock's expiry) has passed. The control key was written
     * by hand, so the stage's start is unknown, and the released lock left no
     * key to scan: those two checks are skipped by name. A window of 0 is
     * stored first (mode config's named override): a command may only widen it. */
    const char *zero[] = {"-p", cli.port, "mode", "config", "--ns", "cli:obs", "--window-ms", "0",
                          "--override", "window-ms", NULL};
    assert_int_equal(lbt_run(&cli.proc, zero), 0);
    const char *quiet[] = {"-p", cli.port, "mode", "set", "modern", "--ns", "cli:obs", "--match",
                           "cli:obs:k*", "--observe-ms", "300", "--window-ms", "0", "--override",
                           "stage-time", "--override", "empty-scan", NULL};
    assert_int_equal(lbt_run(&cli.proc, quiet), 0);
    assert_string_equal(lbt_get(cli.conn, "{cli:obs}:lb-mode"), "modern");
    lbt_cmd_ok(cli.conn, "DEL %s %s %s", "{cli:obs}:lb-mode", "cli:obs:count", "{cli:obs}:lb-gate");
}

/* modern -> legacy skips a stage; a control key holding garbage is left alone. */
static void test_mode_refuses_jumps_back_and_foreign_control_keys(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:m2}:lb-mode", "modern");
    const char *back[] = {"-p", cli.port, "mode", "set", "legacy", "--ns", "cli:m2", "--match",
                          "cli:m2:*", NULL};
    assert_int_equal(lbt_run(&cli.proc, back), 6);
    assert_string_equal(lbt_get(cli.conn, "{cli:m2}:lb-mode"), "modern");
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:m2}:lb-mode", "sideways");
    const char *status[] = {"-p", cli.port, "status", "--ns", "cli:m2", "--match", "cli:m2:*",
                            "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, status, 6);
    assert_string_equal(lbt_str_of(o, "mode"), "unreadable");
    assert_string_equal(lbt_str_of(o, "verdict"), "not ready");
    cJSON_Delete(o);
    const char *get[] = {"-p", cli.port, "mode", "get", "--ns", "cli:m2", NULL};
    const char *set[] = {"-p", cli.port, "mode", "set", "compat", "--ns", "cli:m2", NULL};
    assert_int_equal(lbt_run(&cli.proc, get), 3);
    assert_int_equal(lbt_run(&cli.proc, set), 3);
    assert_string_equal(lbt_get(cli.conn, "{cli:m2}:lb-mode"), "sideways");
    lbt_cmd_ok(cli.conn, "DEL %s", "{cli:m2}:lb-mode");
    lbt_cmd_ok(cli.conn, "HSET %s %s %s", "{cli:m2}:lb-mode", "f", "v");
    assert_int_equal(lbt_run(&cli.proc, get), 3);
    assert_int_equal(lbt_int(cli.conn, "HLEN %s", "{cli:m2}:lb-mode"), 1);
    lbt_cmd_ok(cli.conn, "DEL %s", "{cli:m2}:lb-mode");
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_mode");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode_set_refuses_modern_while_legacy_writes_unless_overridden),
        cmocka_unit_test(test_mode_refuses_jumps_back_and_foreign_control_keys),
        cmocka_unit_test(test_mode_set_modern_observes_a_legacy_client_between_its_locks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
