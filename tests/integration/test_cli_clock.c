/* `lockbridge clock`, run as a child process against a real redis-server:
 * agreement with a server on the same host, the skewed and uncertain
 * verdicts, a server without TIME, and text or JSON output (--json accepted
 * anywhere, by hold too).
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
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"

static lbt_cli cli;

/* Piped, hold and contend write JSON lines as they always have; --json is
 * accepted anywhere; the clock command writes a table unless asked for JSON. */
static void test_json_flag_anywhere_and_text_by_default_for_clock(void **state) {
    (void)state;
    const char *hold[] = {"--json", "-p", cli.port, "hold", "cli:json", NULL};
    assert_int_equal(lbt_run(&cli.proc, hold), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    lbt_lines_free(&l);
    const char *text[] = {"-p", cli.port, "clock", "--samples", "2", NULL};
    assert_int_equal(lbt_run(&cli.proc, text), 0);
    assert_non_null(strstr(cli.proc.out, "median offset"));
    assert_non_null(strstr(cli.proc.out, "verdict         ok"));
    assert_null(cJSON_Parse(cli.proc.out)); /* not JSON */
    const char *json[] = {"-p", cli.port, "clock", "--samples", "2", "--json", NULL};
    assert_int_equal(lbt_run(&cli.proc, json), 0);
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(lbt_str_of(l.line[0], "event"), "clock");
    lbt_lines_free(&l);
}

static void test_clock_agrees_with_a_local_server(void **state) {
    (void)state;
    const char *args[] = {"-p", cli.port, "clock", "--samples", "5", "--interval-ms", "0", "--json",
                          NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 1);
    cJSON *o = l.line[0];
    const cJSON *samples = cJSON_GetObjectItemCaseSensitive(o, "samples"), *it;
    assert_int_equal(cJSON_GetArraySize(samples), 5);
    double max_rtt = 0;
    cJSON_ArrayForEach(it, samples) {
        assert_true(lbt_num_of(it, "rtt_ms") >= 0);
        if (lbt_num_of(it, "rtt_ms") > max_rtt) max_rtt = lbt_num_of(it, "rtt_ms");
    }
    /* Same host, same clock: the offset is within the uncertainty plus the
     * server's microsecond rounding and the output's. */
    double unc = lbt_num_of(o, "uncertainty_ms");
    assert_true(unc >= 0 && unc <= max_rtt / 2 + 0.001);
    double off = lbt_num_of(o, "offset_ms");
    assert_true(off >= -(unc + 0.01) && off <= unc + 0.01);
    assert_true(lbt_num_of(o, "threshold_ms") == 1000);
    assert_string_equal(lbt_str_of(o, "verdict"), "ok");
    const cJSON *rtt = cJSON_GetObjectItemCaseSensitive(o, "rtt_ms");
    assert_true(lbt_num_of(rtt, "min") <= lbt_num_of(rtt, "median"));
    assert_true(lbt_num_of(rtt, "median") <= lbt_num_of(rtt, "max"));
    lbt_lines_free(&l);
}

/* A host whose clock is an hour late is far outside the threshold; a threshold
 * of zero can never be confirmed (the round trip is never zero). Both exit 6. */
static void test_clock_verdicts_skewed_and_uncertain_exit_6(void **state) {
    (void)state;
    static const struct {
        const char *offset, *threshold, *verdict;
    } cases[] = {
        {"3600000", "1000", "skewed"},
        {"-3600000", "1000", "skewed"},
        {"0", "0", "uncertain"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {"-p", cli.port, "clock", "--clock-offset-ms", cases[i].offset,
                              "--threshold-ms", cases[i].threshold, "--samples", "3", "--json",
                              NULL};
        assert_int_equal(lbt_run(&cli.proc, args), 6);
        lbt_lines l;
        lbt_parse(&cli.proc, &l);
        assert_int_equal(l.n, 1);
        assert_string_equal(lbt_str_of(l.line[0], "verdict"), cases[i].verdict);
        if (cases[i].offset[0] != '0') {
            double off = lbt_num_of(l.line[0], "offset_ms");
            double expect = -(double)atoll(cases[i].offset);
            assert_true(off > expect - 100 && off < expect + 100);
        }
        lbt_lines_free(&l);
    }
}

/* A server without TIME (renamed away) answers with an error: exit 4. */
static void test_clock_without_time_command_exits_4(void **state) {
    (void)state;
    lbt_redis notime;
    const char *extra[] = {"--rename-command", "TIME", "\"\"", NULL};
    assert_int_equal(lbt_redis_start(&notime, extra), 0);
    char p[16];
    snprintf(p, sizeof p, "%d", notime.port);
    const char *args[] = {"-p", p, "clock", "--json", NULL};
    int rc = lbt_run(&cli.proc, args);
    lbt_redis_stop(&notime);
    assert_int_equal(rc, 4);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(lbt_str_of(l.line[0], "event"), "error");
    assert_non_null(strstr(cli.proc.err, "TIME"));
    lbt_lines_free(&l);
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_clock");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_flag_anywhere_and_text_by_default_for_clock),
        cmocka_unit_test(test_clock_agrees_with_a_local_server),
        cmocka_unit_test(test_clock_verdicts_skewed_and_uncertain_exit_6),
        cmocka_unit_test(test_clock_without_time_command_exits_4),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
