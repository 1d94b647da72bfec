/* The gate fails closed, through the tool against a real redis-server: an
 * absent control key, a value in no known format, a host clock that runs
 * ahead, values given on the command line, a second operator, a sweep of
 * another namespace's keys and a step back the alarm asks for. Each test
 * asserts the verdict (exit status, the mode left) before any output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/cli.h"
#include "harness/proc.h"
#include "harness/redis_util.h"

/* How long ago a test's stage began: past any minimum stage time, ms. */
#define STAGE_AGO_MS INT64_C(3600000)
#define TOKEN "0123456789abcdef0123456789abcdef"

/* Debian's libfaketime, preloaded into the tool alone to move its host clock. */
#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

static lbt_cli cli;

/* Namespace `ns` in `mode` (NULL: no control key), its stage begun `ago_ms`
 * ago, scanning `ns`:* and watching 100 ms before modern. */
static void ns_at(const char *ns, const char *mode, int64_t ago_ms) {
    char key[128], match[64];
    snprintf(key, sizeof key, "{%s}:lb-mode", ns);
    if (mode) lbt_cmd_ok(cli.conn, "SET %s %s", key, mode);
    snprintf(key, sizeof key, "{%s}:lb-gate", ns);
    snprintf(match, sizeof match, "%s:*", ns);
    lbt_cmd_ok(cli.conn, "HSET %s since_ms %lld match %s observe_ms 100", key,
               (long long)(lbt_wall_ms() - ago_ms), match);
}

static void ns_drop(const char *ns) {
    lbt_cmd_ok(cli.conn, "DEL {%s}:lb-mode {%s}:lb-gate {%s}:lb-census", ns, ns, ns);
}

static const char *mode_of(const char *ns) {
    char key[128];
    snprintf(key, sizeof key, "{%s}:lb-mode", ns);
    return lbt_get(cli.conn, key);
}

/* A field of the namespace's gate record, as stored. */
static long long gate_field(const char *ns, const char *field) {
    redisReply *r = redisCommand(cli.conn, "HGET {%s}:lb-gate %s", ns, field);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    long long v = atoll(r->str);
    freeReplyObject(r);
    return v;
}

static void expect_exit(int got, int want) {
    if (got != want) fail_msg("exit %d, expected %d:\n%s%s", got, want, cli.proc.out, cli.proc.err);
}

static void expect_out(const char *text) {
    if (!strstr(cli.proc.out, text) && !strstr(cli.proc.err, text))
        fail_msg("no \"%s\" in:\n%s%s", text, cli.proc.out, cli.proc.err);
}

/* ---- An absent control key ---------------------------------------------------------- */
/* The control key deleted under a modern fleet: followers keep modern, so
 * legacy is refused beside a live token, status raises the alarm, and the
 * step it advises (compat, which every follower can share keys with) is taken. */
static void test_an_absent_control_key_is_judged_as_every_mode_a_follower_may_be_in(void **st) {
    (void)st;
    ns_at("f1", NULL, STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "SET f1:job %s PX 600000", TOKEN);
    expect_exit(lbt_cli_run(&cli, "mode", "set", "legacy", "--ns", "f1", NULL), 6);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "{f1}:lb-mode"), 0);
    expect_out("[modern-clients]");
    expect_exit(lbt_cli_run(&cli, "status", "--ns", "f1", NULL), 7);
    expect_out("mode set compat --ns f1");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "compat", "--ns", "f1", NULL), 0);
    assert_string_equal(mode_of("f1"), "compat");
    lbt_cmd_ok(cli.conn, "DEL f1:job");
    ns_drop("f1");
}

/* ---- A corrupt gate record ------------------------------------------------------------ */
/* Evidence that does not parse could have been any instant: it refuses, named. */
static void test_a_gate_record_field_that_does_not_parse_refuses(void **st) {
    (void)st;
    ns_at("f1c", "compat", STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "SET f1c:tok %s PX 600000", TOKEN);
    lbt_cmd_ok(cli.conn, "HSET {f1c}:lb-gate legacy_until_ms soon");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "f1c", NULL), 6);
    assert_string_equal(mode_of("f1c"), "compat");
    expect_out("legacy_until_ms");
    expect_exit(lbt_cli_run(&cli, "status", "--ns", "f1c", NULL), 6);
    lbt_cmd_ok(cli.conn, "DEL f1c:tok");
    ns_drop("f1c");
}

/* ---- A second operator ---------------------------------------------------------------- */
static lbt_proc other;
static int other_done;

/* Another operator steps back to legacy and forward to compat while the first
 * one watches before modern: a new compat stage that followers have not all
 * seen. Called every 500 ms while the first one runs. */
static void another_operator(void) {
    static int calls;
    if (++calls != 2) return; /* the first call may come before the tool read the stage */
    other_done++;
    const char *back[] = {"-p", cli.port, "mode", "set", "legacy", "--ns", "f2", NULL};
    const char *fwd[] = {"-p", cli.port, "mode", "set", "compat", "--ns", "f2", "--override",
                         "stage-time", NULL};
    if (lbt_run(&other, back) != 0) fail_msg("legacy: %s%s", other.out, other.err);
    if (lbt_run(&other, fwd) != 0) fail_msg("compat: %s%s", other.out, other.err);
}

static void test_a_change_between_check_and_write_refuses_the_write(void **st) {
    (void)st;
    ns_at("f2", "compat", STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "HSET {f2}:lb-gate observe_ms 3000");
    lbt_cmd_ok(cli.conn, "SET f2:a %lld PX 600000", (long long)(lbt_wall_ms() + 600000));
    const char *args[] = {"-p", cli.port, "mode", "set", "modern", "--ns", "f2", NULL};
    lbt_spawn(&cli.proc, args);
    expect_exit(lbt_finish_with(&cli.proc, another_operator, 500), 6);
    assert_true(other_done > 0);
    assert_string_equal(mode_of("f2"), "compat");
    expect_out("another change");
    lbt_cmd_ok(cli.conn, "DEL f2:a");
    ns_drop("f2");
}

/* ---- Values in no known format -------------------------------------------------------- */
/* Only legacy clients write without a TTL: a TTL-less value no codec reads (a
 * JSON lock on a monotonic clock, seconds with a fraction under the ms codec)
 * is a legacy writer's. */
static void test_a_ttl_less_value_in_no_known_format_is_legacy_evidence(void **st) {
    (void)st;
    ns_at("f3", "compat", STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "SET f3:tok %s PX 600000", TOKEN);
    lbt_cmd_ok(cli.conn, "SET f3:json {\"expiryTime\":123456789}");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "f3", NULL), 6);
    assert_string_equal(mode_of("f3"), "compat");
    expect_out("[legacy-writers]");
    lbt_cmd_ok(cli.conn, "DEL f3:json {f3}:lb-gate");
    ns_at("f3", "modern", STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "SET f3:float %lld.5", (long long)(lbt_wall_ms() / 1000 + 600));
    expect_exit(lbt_cli_run(&cli, "status", "--ns", "f3", NULL), 7);
    expect_out("ALARM");
    lbt_cmd_ok(cli.conn, "DEL f3:tok f3:float");
    ns_drop("f3");
}

/* ---- The command line only tightens ------------------------------------------------- */
static void test_command_line_values_cannot_loosen_the_stored_configuration(void **st) {
    (void)st;
    ns_at("f4", "legacy", 0);
    lbt_cmd_ok(cli.conn, "HSET {f4}:lb-gate ttl_ms 600000 refresh_ms 1000");
    lbt_cmd_ok(cli.conn, "SET f4:a %lld", (long long)(lbt_wall_ms() - 600000));
    expect_exit(lbt_cli_run(&cli, "mode", "set", "compat", "--ns", "f4", "--ttl-ms", "0",
                            "--refresh-ms", "0", NULL), 1);
    assert_string_equal(mode_of("f4"), "legacy");
    expect_out("--override ttl-ms");
    expect_exit(lbt_cli_run(&cli, "mode", "config", "--ns", "f4", "--ttl-ms", "0", NULL), 1);
    assert_int_equal(gate_field("f4", "ttl_ms"), 600000);
    /* A stricter value is taken, and the verdict says what it judged by. */
    expect_exit(lbt_cli_run(&cli, "mode", "set", "compat", "--ns", "f4", "--ttl-ms", "900000",
                            NULL), 6);
    assert_string_equal(mode_of("f4"), "legacy");
    expect_out("validity 900000 ms");
    /* The window: a legacy lock expired 10 minutes ago is within the stored one. */
    ns_at("f4", "compat", STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "HSET {f4}:lb-gate ttl_ms 30000");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "f4", "--window-ms", "1000",
                            NULL), 1);
    assert_string_equal(mode_of("f4"), "compat");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "f4", "--stale-ms", "1",
                            NULL), 1);
    assert_string_equal(mode_of("f4"), "compat");
    /* Loosening is a named override of mode config, and said so. */
    expect_exit(lbt_cli_run(&cli, "mode", "config", "--ns", "f4", "--ttl-ms", "0", "--override",
                            "ttl-ms", NULL), 0);
    assert_int_equal(gate_field("f4", "ttl_ms"), 0);
    expect_out("override");
    lbt_cmd_ok(cli.conn, "DEL f4:a");
    ns_drop("f4");
}

/* ---- One verdict ------------------------------------------------------------------- */
/* status and mode set judge by the same values from the same inputs: a
 * validity given to both lengthens the stage time for both. */
static void test_status_and_mode_set_reach_one_verdict_from_the_same_values(void **st) {
    (void)st;
    ns_at("fv", "legacy", 60000);
    lbt_cmd_ok(cli.conn, "SET fv:a %lld", (long long)(lbt_wall_ms() + 60000));
    expect_exit(lbt_cli_run(&cli, "status", "--ns", "fv", "--ttl-ms", "600000", NULL), 6);
    expect_out("[stage-time]");
    expect_out("validity 600000 ms (given), refresh 1000 ms (default)");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "compat", "--ns", "fv", "--ttl-ms", "600000",
                            NULL), 6);
    assert_string_equal(mode_of("fv"), "legacy");
    expect_out("[stage-time]");
    expect_out("validity 600000 ms (given), refresh 1000 ms (default)");
    lbt_cmd_ok(cli.conn, "DEL fv:a");
    ns_drop("fv");
}

/* ---- Only the server's clock ------------------------------------------------------- */
/* Runs the tool with its host clock `offset` ahead ("+7200s"). */
static int run_ahead(const char *offset, const char *const *args) {
    if (access(FAKETIME_LIB, R_OK) != 0) fail_msg("%s missing: make deps installs faketime",
                                                  FAKETIME_LIB);
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL, opts[512];
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "", asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    setenv("LD_PRELOAD", FAKETIME_LIB, 1);
    setenv("FAKETIME", offset, 1);
    int rc = lbt_run(&cli.proc, args);
    unsetenv("LD_PRELOAD");
    unsetenv("FAKETIME");
    if (saved) setenv("ASAN_OPTIONS", saved, 1);
    else unsetenv("ASAN_OPTIONS");
    free(saved);
    return rc;
}

/* A live legacy lock with 30 minutes left, seen for the first time by a host
 * whose clock runs two hours ahead: by that clock it expired past the window. */
static void test_expiry_and_window_are_judged_by_the_servers_clock(void **st) {
    (void)st;
    ns_at("f5", "compat", STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "SET f5:tok %s PX 600000", TOKEN);
    lbt_cmd_ok(cli.conn, "SET f5:l1 %lld", (long long)(lbt_wall_ms() + 1800000));
    const char *set[] = {"-p", cli.port, "mode", "set", "modern", "--ns", "f5", NULL};
    expect_exit(run_ahead("+7200s", set), 6);
    assert_string_equal(mode_of("f5"), "compat");
    expect_out("[legacy-writers]");
    ns_drop("f5");
    ns_at("f5", "modern", STAGE_AGO_MS);
    const char *status[] = {"-p", cli.port, "status", "--ns", "f5", NULL};
    expect_exit(run_ahead("+7200s", status), 7);
    expect_out("ALARM");
    lbt_cmd_ok(cli.conn, "DEL f5:tok f5:l1");
    ns_drop("f5");
}

/* ---- Sweep files evidence where it belongs ------------------------------------------ */
static void test_sweep_refuses_a_pattern_outside_its_namespace(void **st) {
    (void)st;
    ns_at("f6a", "compat", STAGE_AGO_MS);
    ns_at("f6b", "compat", STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "SET f6a:old %lld", (long long)(lbt_wall_ms() - 600000));
    expect_exit(lbt_cli_run(&cli, "sweep", "--ns", "f6b", "--match", "f6a:*", NULL), 1);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "f6a:old"), 1);
    expect_out("mode config");
    lbt_cmd_ok(cli.conn, "DEL f6a:old");
    ns_drop("f6a");
    ns_drop("f6b");
}

static void test_sweep_files_evidence_under_every_namespace_whose_keys_it_finds(void **st) {
    (void)st;
    ns_at("f6a", "compat", STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "SET f6a:old %lld", (long long)(lbt_wall_ms() - 600000));
    /* A namespace whose stored pattern covers another's keys files the
     * evidence under both. */
    ns_at("f6", "compat", STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "HSET {f6}:lb-gate match f6*");
    expect_exit(lbt_cli_run(&cli, "sweep", "--ns", "f6", NULL), 0);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "f6a:old"), 0);
    lbt_cmd_ok(cli.conn, "SET f6a:tok %s PX 600000", TOKEN);
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "f6a", NULL), 6);
    assert_string_equal(mode_of("f6a"), "compat");
    expect_out("[legacy-writers]");
    lbt_cmd_ok(cli.conn, "DEL f6a:tok");
    ns_drop("f6a");
    ns_drop("f6");
}

/* ---- A server-wide signal is not one namespace's evidence --------------------------- */
static int setnx_calls;
static const char *setnx_prefix = "f7a";
/* A legacy locker's acquire and release, on a fresh key each time. */
static void a_legacy_locker(void) {
    char key[32];
    snprintf(key, sizeof key, "%s:k%d", setnx_prefix, setnx_calls++);
    lbt_cmd_ok(cli.conn, "SETNX %s 1", key);
    lbt_cmd_ok(cli.conn, "DEL %s", key);
}

static void test_another_namespaces_legacy_calls_do_not_block_modern(void **st) {
    (void)st;
    ns_at("f7", "compat", STAGE_AGO_MS);
    lbt_cmd_ok(cli.conn, "HSET {f7}:lb-gate observe_ms 1500");
    lbt_cmd_ok(cli.conn, "SET f7:tok %s PX 600000", TOKEN);
    const char *args[] = {"-p", cli.port, "mode", "set", "modern", "--ns", "f7", NULL};
    /* The namespace's own keys: refused, by the per-key check. */
    setnx_prefix = "f7";
    lbt_spawn(&cli.proc, args);
    expect_exit(lbt_finish_with(&cli.proc, a_legacy_locker, 200), 6);
    assert_true(setnx_calls > 0);
    assert_string_equal(mode_of("f7"), "compat");
    expect_out("[legacy-writers]");
    lbt_cmd_ok(cli.conn, "HDEL {f7}:lb-gate legacy_until_ms");
    /* Another namespace's keys: noted, not counted. */
    setnx_prefix = "f7a";
    setnx_calls = 0;
    lbt_spawn(&cli.proc, args);
    expect_exit(lbt_finish_with(&cli.proc, a_legacy_locker, 200), 0);
    assert_true(setnx_calls > 0);
    assert_string_equal(mode_of("f7"), "modern");
    expect_out("on other keys");
    lbt_cmd_ok(cli.conn, "DEL f7:tok");
    ns_drop("f7");
}

/* ---- Stepping toward safety --------------------------------------------------------- */
/* A moment into a modern stage whose validity is 30 minutes, a legacy writer
 * shows up: the alarm's advice goes through as printed, with no stage time. */
static void test_the_alarms_advice_is_accepted_as_printed(void **st) {
    (void)st;
    ns_at("f8", "modern", 0);
    lbt_cmd_ok(cli.conn, "HSET {f8}:lb-gate ttl_ms 1800000");
    lbt_cmd_ok(cli.conn, "SET f8:l1 %lld", (long long)(lbt_wall_ms() + 600000));
    expect_exit(lbt_cli_run(&cli, "status", "--ns", "f8", NULL), 7);
    expect_out("`lockbridge mode set compat --ns f8`");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "compat", "--ns", "f8", NULL), 0);
    assert_string_equal(mode_of("f8"), "compat");
    lbt_cmd_ok(cli.conn, "DEL f8:l1");
    ns_drop("f8");
}

static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_gate_closed");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_an_absent_control_key_is_judged_as_every_mode_a_follower_may_be_in),
        cmocka_unit_test(test_a_gate_record_field_that_does_not_parse_refuses),
        cmocka_unit_test(test_a_change_between_check_and_write_refuses_the_write),
        cmocka_unit_test(test_a_ttl_less_value_in_no_known_format_is_legacy_evidence),
        cmocka_unit_test(test_command_line_values_cannot_loosen_the_stored_configuration),
        cmocka_unit_test(test_status_and_mode_set_reach_one_verdict_from_the_same_values),
        cmocka_unit_test(test_expiry_and_window_are_judged_by_the_servers_clock),
        cmocka_unit_test(test_sweep_refuses_a_pattern_outside_its_namespace),
        cmocka_unit_test(test_sweep_files_evidence_under_every_namespace_whose_keys_it_finds),
        cmocka_unit_test(test_another_namespaces_legacy_calls_do_not_block_modern),
        cmocka_unit_test(test_the_alarms_advice_is_accepted_as_printed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
