/* The tool's command line, run as a child process: bad arguments to every
 * command exit 1 with a one-line message and touch nothing; help and version
 * exit 0.
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

static void test_bad_arguments_exit_1_with_a_one_line_message(void **state) {
    (void)state;
    static const char *const cases[][12] = {
        {"hold", "cli:args", "--ttl-ms", "abc"},
        {"hold", "cli:args", "--ttl-ms", "10x"},
        {"hold", "cli:args", "--ttl-ms", ""},
        {"hold", "cli:args", "--ttl-ms", " 5"},
        {"hold", "cli:args", "--ttl-ms", "+5"},
        {"hold", "cli:args", "--ttl-ms", "0"},
        {"hold", "cli:args", "--wait-ms", "-1"},
        {"hold", "cli:args", "--hold-ms", "-5"},
        {"hold", "cli:args", "--ttl-ms", "9223372036854775808"},
        {"hold", "cli:args", "--wait-ms", "99999999999999999999"},
        {"hold", "cli:args", "--ttl-ms"},
        {"hold", "cli:args", "--ttl-ms", "1", "--ttl-ms", "2"},
        {"hold", "cli:args", "--no-such-option"},
        {"hold", "cli:args", "--help=yes"},
        {"hold"},
        {"hold", "cli:args", "extra"},
        {"hold", ""},
        {"hold", "cli:args", "--codec", "xml"},
        {"hold", "cli:args", "--codec", "json:unit=fortnights"},
        {"hold", "cli:args", "--mode", "sideways"},
        {"hold", "cli:args", "--mode", "Modern"},
        {"hold", "cli:args", "--mode", ""},
        {"hold", "cli:args", "--mode", "modern", "--codec", "s"},
        {"hold", "cli:args", "--mode", "modern", "--variant", "wire"},
        {"hold", "cli:args", "--mode", "modern", "--release-margin-ms", "5"},
        {"hold", "cli:args", "--fencing"},
        {"hold", "cli:args", "--mode", "legacy", "--fencing"},
        {"hold", "cli:args", "--mode", "modern", "--fencing=yes"},
        {"hold", "cli:args", "--watchdog"},
        {"hold", "cli:args", "--mode", "compat", "--fair"},
        {"hold", "cli:args", "--mode", "compat", "--fencing"},
        {"hold", "cli:args", "--mode", "compat", "--variant", "scripted"},
        {"hold", "cli:args", "--mode", "modern", "--ns", "n", "--fencing"},
        {"hold", "cli:args", "--ns", "n", "--watchdog"},
        {"hold", "cli:args", "--grace-ms", "5"},
        {"hold", "cli:args", "--mode", "compat", "--grace-ms", "-5"},
        {"hold", "cli:args", "--ns", ""},
        {"hold", "cli:args", "--ns", "x}y"},
        {"hold", "cli:args", "--ttl-ms", "500"},
        {"hold", "cli:args", "--ttl-ms", "1000", "--release-margin-ms", "1000"},
        {"hold", "cli:args", "--json", "--json"},
        {"hold", "{cli:args}:bwait"}, /* a companion's name: no lock may take it */
        {"hold", "{cli:args}:queue", "--mode", "modern", "--fair"},
        {"hold", "{cli:args}:fence", "--mode", "legacy"},
        {"hold", "{cli:args}:lb-mode", "--mode", "compat"},
        {"clock", "extra"},
        {"clock", "--samples", "0"},
        {"clock", "--samples", "1001"},
        {"clock", "--samples", "3.5"},
        {"clock", "--threshold-ms", "-1"},
        {"clock", "--threshold-ms", "1000000000001"},
        {"clock", "--interval-ms", "60001"},
        {"clock", "--clock-offset-ms", "--5"},
        {"clock", "--mode", "modern"},
        {"inspect"},
        {"inspect", ""},
        {"inspect", "a", "b"},
        {"inspect", "k", "--max-bytes", "4098"},
        {"inspect", "k", "--codec", "xml"},
        {"inspect", "k", "--codec", "ms", "--codec", "ms"},
        {"inspect", "k", "--ttl-ms", "0"},
        {"status"},
        {"status", "--ns", ""},
        {"status", "--ns", "a}b"},
        {"status", "--ns", "n", "--match", ""},
        {"status", "--ns", "n", "--match", "lock:[abc"},
        {"status", "--ns", "n", "--match", "lock:\\"},
        {"status", "--ns", "n", "--count", "0"},
        {"status", "--ns", "n", "--count", "100001"},
        {"status", "--ns", "n", "--window-ms", "-1"},
        {"status", "--ns", "n", "--limit", "x"},
        {"status", "--ns", "n", "extra"},
        {"mode"},
        {"mode", "get"},
        {"mode", "flip", "--ns", "n"},
        {"mode", "get", "modern", "--ns", "n"},
        {"mode", "get", "--ns", "n", "--override", "incr"},
        {"mode", "set", "modern", "--ns", "n", "--force"},
        {"mode", "set", "modern", "--ns", "n", "--override", "adjacency"},
        {"mode", "set", "--ns", "n"},
        {"mode", "set", "sideways", "--ns", "n"},
        {"mode", "set", "Modern", "--ns", "n"},
        {"mode", "set", "modern", "--ns", "n", "--match", "[x"},
        {"mode", "set", "modern", "--ns", "n", "--observe-ms", "-1"},
        {"mode", "set", "modern", "--ns", "n", "--observe-ms", "3600001"},
        {"mode", "get", "--ns", "n", "--observe-ms", "5"},
        {"sweep", "--ns", "swns", "extra"},
        {"sweep", "--ns", "swns", "--grace-ms", "-1"},
        {"sweep", "--ns", "swns", "--grace-ms", "1000000000001"},
        {"sweep", "--ns", "swns", "--match", "a[b"},
        {"sweep", "--ns", "swns", "--dry-run=1"},
        {"sweep", "--ns", "swns", "--codec", "json", "--codec", "json:field=expiryTime,unit=ns,clock=mono"},
        {"hold", "cli:args", "--variant", "magic"},
        {"hold", "cli:args", "-p", "0"},
        {"hold", "cli:args", "-p", "65536"},
        {"hold", "cli:args", "-n", "-1"},
        {"hold", "cli:args", "--user", "alice"},
        {"no-such-command"},
        {"--bogus", "hold", "cli:args"},
        {NULL},
        {"contend", "cli:args", "--seconds", "1", "--counter-key", "cli:argc"},
        {"contend", "cli:args", "--clients", "0", "--seconds", "1", "--counter-key", "c"},
        {"contend", "cli:args", "--clients", "1025", "--seconds", "1", "--counter-key", "c"},
        {"contend", "cli:args", "--clients", "2", "--counter-key", "cli:argc"},
        {"contend", "cli:args", "--clients", "2", "--seconds", "1"},
        {"contend", "cli:args", "--clients", "2", "--seconds", "1", "--counter-key",
         "cli:args"},
        {"contend", "cli:args", "--clients", "2", "--seconds", "1", "--counter-key", "c",
         "--abandon-every", "-3"},
        {"contend", "{cli:args}:baton", "--clients", "2", "--seconds", "1", "--counter-key", "c"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[16];
        int n = 0;
        for (int j = 0; cases[i][j]; j++) args[n++] = cases[i][j];
        args[n++] = "-p";
        args[n++] = cli.port;
        args[n] = NULL;
        int rc = lbt_run(&cli.proc, args);
        if (rc != 1) fail_msg("case %zu (%s %s): exit %d", i, args[0], args[1], rc);
        assert_int_equal(cli.proc.outlen, 0);
        char *nl = strchr(cli.proc.err, '\n');
        assert_non_null(nl);
        /* One line; a missing --ns goes on to explain what a namespace is. */
        if (!strstr(cli.proc.err, "--ns NS is required"))
            assert_int_equal((size_t)(nl - cli.proc.err) + 1, cli.proc.errlen);
        else assert_non_null(strstr(cli.proc.err, "A namespace names"));
        assert_non_null(strstr(cli.proc.err, "--help"));
    }
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:args"), 0);
}

static void test_help_and_version_exit_0(void **state) {
    (void)state;
    static const char *const cases[][4] = {
        {"--help"}, {"help"}, {"help", "hold"}, {"hold", "--help"}, {"contend", "--help"},
        {"--help", "contend"}, {"clock", "--help"}, {"inspect", "--help"},
        {"status", "--help"}, {"mode", "--help"}, {"sweep", "--help"}, {"help", "sweep"},
        {"--help", "sweep"},
    };
    static const char *const expect[] = {"hold", "contend", "usage: lockbridge hold",
                                         "usage: lockbridge hold", "usage: lockbridge contend",
                                         "usage: lockbridge contend", "usage: lockbridge clock",
                                         "usage: lockbridge inspect", "usage: lockbridge status",
                                         "usage: lockbridge mode", "usage: lockbridge sweep",
                                         "usage: lockbridge sweep", "usage: lockbridge sweep"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(lbt_run(&cli.proc, cases[i]), 0);
        assert_non_null(strstr(cli.proc.out, expect[i]));
    }
    const char *general[] = {"--help", NULL};
    assert_int_equal(lbt_run(&cli.proc, general), 0);
    static const char *const names[] = {"hold", "contend", "clock", "inspect", "status", "mode",
                                        "sweep"};
    for (int i = 0; i < 7; i++) {
        char row[32];
        snprintf(row, sizeof row, "  %s ", names[i]);
        assert_non_null(strstr(cli.proc.out, row));
    }
    const char *version[] = {"--version", NULL};
    assert_int_equal(lbt_run(&cli.proc, version), 0);
    assert_non_null(strstr(cli.proc.out, lb_version()));
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_args");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments_exit_1_with_a_one_line_message),
        cmocka_unit_test(test_help_and_version_exit_0),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
