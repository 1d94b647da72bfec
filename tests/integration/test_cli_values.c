/* The tool's judgement of timestamp values that codecs could misread, run as a
 * child process against a real redis-server: values outside the plausibility
 * window and values several --codec read differently are reported as
 * ambiguous, never swept, never taken over by any lock, and count as legacy
 * evidence in the gate. The tool is $LB_TOOL, or $BUILD/lockbridge. */
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
#include "harness/proc.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"

/* Grace given to sweep in these tests, ms (its default, written out). */
#define GRACE_MS 60000

static lbt_cli cli;

/* The key still holds exactly `value`, with no TTL. */
static void assert_untouched(const char *key, const char *value) {
    assert_string_equal(lbt_get(cli.conn, key), value);
    assert_int_equal(lbt_int(cli.conn, "PTTL %s", key), -1);
}

/* The key still holds `value`; if sweep gave it a TTL, the TTL ends at its
 * true expiry `at_ms` + grace, never at a misread instant. */
static void assert_never_misread(const char *key, const char *value, int64_t at_ms) {
    assert_string_equal(lbt_get(cli.conn, key), value);
    long long end = lbt_int(cli.conn, "PEXPIRETIME %s", key);
    if (end != -1 && end != at_ms + GRACE_MS)
        fail_msg("%s: expires at %lld, its timestamp + grace is %lld", key, end,
                 (long long)(at_ms + GRACE_MS));
}

/* ---- A value outside the window of the only codec named --------------------------- */
/* R's live value (epoch seconds, ten digits) read with the default ms codec is
 * an instant of January 1970: implausible, so ambiguous, and s is named. */
static void test_a_seconds_value_beside_the_ms_codec_is_ambiguous_and_names_s(void **state) {
    (void)state;
    char secs[32];
    snprintf(secs, sizeof secs, "%lld", (long long)(lbt_wall_ms() / 1000 + 600));
    lbt_cmd_ok(cli.conn, "SET %s %s", "cv:r", secs);
    const char *inspect[] = {"-p", cli.port, "inspect", "cv:r", "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, inspect, 0);
    assert_string_equal(lbt_str_of(o, "format"), "ambiguous");
    assert_string_equal(lbt_str_of(o, "ambiguity"), "implausible");
    assert_string_equal(lbt_str_of(o, "codec"), "ms");
    assert_true(lbt_num_of(o, "read_as") == (double)atoll(secs));
    assert_string_equal(lbt_str_of(o, "plausible_codec"), "s");
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "expired"));
    cJSON_Delete(o);
    /* status: the row says so, and no expired legacy lock is found to sweep. */
    const char *status[] = {"-p", cli.port, "status", "--ns", "cv:ns", "--match", "cv:r", "--json",
                            NULL};
    assert_int_equal(lbt_run(&cli.proc, status), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[0], "format"), "ambiguous");
    assert_string_equal(lbt_str_of(l.line[0], "plausible_codec"), "s");
    assert_true(lbt_num_of(l.line[1], "legacy_expired_present") == 0);
    assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(l.line[1], "formats"), "ambiguous") ==
                1);
    assert_null(strstr(cli.proc.out, "lockbridge sweep"));
    lbt_lines_free(&l);
    const char *text[] = {"-p", cli.port, "status", "--ns", "cv:ns", "--match", "cv:r", NULL};
    assert_int_equal(lbt_run(&cli.proc, text), 0);
    assert_non_null(strstr(cli.proc.out, "implausible as ms; s"));
    lbt_cmd_ok(cli.conn, "DEL %s", "cv:r");
}

static void test_sweep_plans_nothing_for_a_value_outside_the_window(void **state) {
    (void)state;
    char secs[32];
    snprintf(secs, sizeof secs, "%lld", (long long)(lbt_wall_ms() / 1000 + 600));
    lbt_cmd_ok(cli.conn, "SET %s %s", "cv:w", secs);
    const char *dry[] = {"-p", cli.port, "sweep", "--ns", "swns", "--match", "cv:w", "--dry-run",
                         "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, dry, 0);
    assert_string_equal(lbt_str_of(o, "event"), "sweep_summary");
    assert_true(lbt_num_of(o, "candidates") == 0);
    assert_true(lbt_num_of(o, "to_delete") == 0);
    assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(o, "left_alone"), "ambiguous") == 1);
    cJSON_Delete(o);
    const char *wet[] = {"-p", cli.port, "sweep", "--ns", "swns", "--match", "cv:w", "--json",
                         NULL};
    o = lbt_run_json(&cli.proc, wet, 0);
    assert_true(lbt_num_of(o, "acted") == 0);
    cJSON_Delete(o);
    assert_untouched("cv:w", secs);
    lbt_cmd_ok(cli.conn, "DEL %s", "cv:w");
}

/* No lock takes it over: the legacy lock (wire and scripted) and the
 * cross-format acquire of compat and of a namespace in modern each report a
 * foreign value (exit 3) and leave it as it was. The plain token lock judges
 * no values: the key is simply held (exit 2). */
static void test_no_lock_takes_over_a_value_outside_the_window(void **state) {
    (void)state;
    static const struct {
        const char *opt[4];
        int exit;
        const char *status;
        int names_s; /* the detail names s as the codec that reads it */
    } cases[] = {
        {{"--mode", "legacy", "--variant", "wire"}, 3, "LB_EFOREIGN", 1},
        {{"--mode", "legacy", "--variant", "scripted"}, 3, "LB_EFOREIGN", 1},
        {{"--mode", "compat", NULL, NULL}, 3, "LB_EFOREIGN", 1},
        {{"--ns", "cv:hns", NULL, NULL}, 3, "LB_EFOREIGN", 1}, /* the namespace is modern */
        {{"--mode", "modern", NULL, NULL}, 2, "LB_ETIMEDOUT", 0},
    };
    char secs[32];
    snprintf(secs, sizeof secs, "%lld", (long long)(lbt_wall_ms() / 1000 + 600));
    lbt_cmd_ok(cli.conn, "SET %s %s", "cv:h", secs);
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cv:hns}:lb-mode", "modern");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[12] = {"-p", cli.port, "hold", "cv:h", "--wait-ms", "20"};
        int n = 6;
        for (int j = 0; j < 4 && cases[i].opt[j]; j++) args[n++] = cases[i].opt[j];
        args[n] = NULL;
        int rc = lbt_run(&cli.proc, args);
        if (rc != cases[i].exit)
            fail_msg("%s %s: exit %d: %s", cases[i].opt[0], cases[i].opt[1], rc, cli.proc.out);
        lbt_lines l;
        lbt_parse(&cli.proc, &l);
        assert_int_equal(l.n, 1);
        assert_string_equal(lbt_str_of(l.line[0], "event"), "not_acquired");
        assert_string_equal(lbt_str_of(l.line[0], "status"), cases[i].status);
        if (cases[i].names_s && !strstr(lbt_str_of(l.line[0], "detail"), "s reads it plausibly"))
            fail_msg("%s %s: %s", cases[i].opt[0], cases[i].opt[1], lbt_str_of(l.line[0], "detail"));
        lbt_lines_free(&l);
        assert_untouched("cv:h", secs);
    }
    lbt_cmd_ok(cli.conn, "DEL %s %s %s", "cv:h", "{cv:hns}:lb-mode", "{cv:hns}:lb-census");
}

/* ---- Several codecs ---------------------------------------------------------------- */
/* With ms and s both named, in either order, R's value reads as seconds and
 * L1's as milliseconds: each what it is. Sweep neither deletes R's live lock
 * (1970 by ms) nor gives L1's a deadline tens of millennia away (by s). */
static void test_with_ms_and_s_each_value_reads_as_what_it_is(void **state) {
    (void)state;
    static const char *const orders[][4] = {{"--codec", "ms", "--codec", "s"},
                                            {"--codec", "s", "--codec", "ms"}};
    for (size_t i = 0; i < 2; i++) {
        int64_t now = lbt_wall_ms();
        int64_t r_s = now / 1000 + 600, l1_ms = now + 600000;
        char r[32], l1[32];
        snprintf(r, sizeof r, "%lld", (long long)r_s);
        snprintf(l1, sizeof l1, "%lld", (long long)l1_ms);
        lbt_cmd_ok(cli.conn, "SET %s %s", "cv:m:r", r);
        lbt_cmd_ok(cli.conn, "SET %s %s", "cv:m:l1", l1);
        const char *sweep[] = {"-p", cli.port, "sweep", "--ns", "swns", "--match", "cv:m:*",
                               orders[i][0], orders[i][1], orders[i][2], orders[i][3], "--grace-ms",
                               "60000", "--json", NULL};
        cJSON *o = lbt_run_json(&cli.proc, sweep, 0);
        assert_true(lbt_num_of(o, "to_delete") == 0);
        cJSON_Delete(o);
        assert_never_misread("cv:m:r", r, r_s * 1000);
        assert_never_misread("cv:m:l1", l1, l1_ms);
        static const struct {
            const char *key, *codec;
        } reads[] = {{"cv:m:r", "s"}, {"cv:m:l1", "ms"}};
        for (size_t k = 0; k < 2; k++) {
            const char *args[] = {"-p", cli.port, "inspect", reads[k].key, orders[i][0],
                                  orders[i][1], orders[i][2], orders[i][3], "--json", NULL};
            cJSON *got = lbt_run_json(&cli.proc, args, 0);
            /* A timestamp: legacy, or compat once sweep gave it a TTL. */
            const char *format = lbt_str_of(got, "format");
            if (strcmp(format, "legacy") != 0 && strcmp(format, "compat") != 0)
                fail_msg("%s: format %s", reads[k].key, format);
            assert_string_equal(lbt_str_of(got, "codec"), reads[k].codec);
            assert_false(lbt_bool_of(got, "expired"));
            double left = lbt_num_of(got, "remaining_ms");
            assert_true(left > 500000 && left <= 601000);
            cJSON_Delete(got);
        }
        lbt_cmd_ok(cli.conn, "DEL %s %s", "cv:m:r", "cv:m:l1");
    }
}

/* A JSON value two codecs read as two plausible instants on different clocks
 * (epoch ms, and 28 minutes of a host's uptime in ns) is ambiguous: both
 * readings are reported, and sweep leaves it as it was. */
static void test_codecs_that_disagree_make_a_value_ambiguous_and_sweep_leaves_it(void **state) {
    (void)state;
    char v[64];
    snprintf(v, sizeof v, "{\"expiryTime\":%lld}", (long long)(lbt_wall_ms() + 600000));
    lbt_cmd_ok(cli.conn, "SET %s %s", "cv:d", v);
    const char *inspect[] = {"-p", cli.port, "inspect", "cv:d", "--codec", "json", "--codec",
                             "json:unit=ms,clock=epoch", "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, inspect, 0);
    assert_string_equal(lbt_str_of(o, "format"), "ambiguous");
    assert_string_equal(lbt_str_of(o, "ambiguity"), "disagree");
    assert_string_equal(lbt_str_of(o, "codec"), "json:field=expiryTime,unit=ns,clock=mono");
    assert_string_equal(lbt_str_of(o, "codec2"), "json:field=expiryTime,unit=ms,clock=epoch");
    cJSON_Delete(o);
    const char *sweep[] = {"-p", cli.port, "sweep", "--ns", "swns", "--match", "cv:d", "--codec",
                           "json:unit=ms,clock=epoch", "--codec", "json", "--json", NULL};
    o = lbt_run_json(&cli.proc, sweep, 0);
    assert_true(lbt_num_of(o, "candidates") == 0);
    assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(o, "left_alone"), "ambiguous") == 1);
    cJSON_Delete(o);
    assert_untouched("cv:d", v);
    lbt_cmd_ok(cli.conn, "DEL %s", "cv:d");
}

/* ---- The gate ---------------------------------------------------------------------- */
/* A TTL-less ambiguous value is a legacy client's write whose expiry no codec
 * can judge: it keeps a compat namespace from moving to modern. */
static void test_an_ambiguous_value_is_legacy_evidence_for_the_gate(void **state) {
    (void)state;
    char secs[32];
    snprintf(secs, sizeof secs, "%lld", (long long)(lbt_wall_ms() / 1000 + 600));
    lbt_cmd_ok(cli.conn, "SET %s %s", "cv:g", secs);
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cv:gns}:lb-mode", "compat");
    lbt_cmd_ok(cli.conn, "HSET %s observe_ms 0", "{cv:gns}:lb-gate");
    const char *status[] = {"-p", cli.port, "status", "--ns", "cv:gns", "--match", "cv:g", "--json",
                            NULL};
    cJSON *o = lbt_run_json(&cli.proc, status, 6);
    assert_string_equal(lbt_str_of(o, "next"), "compat -> modern");
    assert_string_equal(lbt_str_of(o, "verdict"), "not ready");
    assert_true(lbt_num_of(o, "legacy_recent") == 1);
    cJSON_Delete(o);
    const char *set[] = {"-p", cli.port, "mode", "set", "modern", "--ns", "cv:gns", "--match",
                         "cv:g", "--observe-ms", "0", NULL};
    assert_int_equal(lbt_run(&cli.proc, set), 6);
    assert_string_equal(lbt_get(cli.conn, "{cv:gns}:lb-mode"), "compat");
    assert_untouched("cv:g", secs);
    lbt_cmd_ok(cli.conn, "DEL %s %s %s", "cv:g", "{cv:gns}:lb-mode", "{cv:gns}:lb-gate");
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_values");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_seconds_value_beside_the_ms_codec_is_ambiguous_and_names_s),
        cmocka_unit_test(test_sweep_plans_nothing_for_a_value_outside_the_window),
        cmocka_unit_test(test_no_lock_takes_over_a_value_outside_the_window),
        cmocka_unit_test(test_with_ms_and_s_each_value_reads_as_what_it_is),
        cmocka_unit_test(test_codecs_that_disagree_make_a_value_ambiguous_and_sweep_leaves_it),
        cmocka_unit_test(test_an_ambiguous_value_is_legacy_evidence_for_the_gate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
