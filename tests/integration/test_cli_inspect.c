/* `lockbridge inspect`, run as a child process against a real redis-server:
 * the format of every kind of key and its details, the codecs tried in order,
 * and text for people.
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

static void test_inspect_names_the_format_of_every_kind_of_key(void **state) {
    (void)state;
    char live[32], big[5000];
    snprintf(live, sizeof live, "%lld", (long long)(lbt_wall_ms() + 60000));
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:i:legacy", live);
    lbt_cmd_ok(cli.conn, "SET %s %s PX 90000", "cli:i:compat", live);
    lbt_cmd_ok(cli.conn, "SET %s %s PX 90000", "cli:i:token", "0123456789abcdef0123456789abcdef");
    lbt_cmd_ok(cli.conn, "SET %s %s PX 90000", "cli:i:uid", "{\"uid\":\"4f1c\"}");
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:i:incr", "2");
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:i:junk", "not a lock");
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:i:big", big);
    lbt_cmd_ok(cli.conn, "RPUSH %s %s", "cli:i:list", "a");
    static const struct {
        const char *key, *format, *type;
        int pttl; /* 1: a number, 0: null, -1: absent field */
    } cases[] = {
        {"cli:i:legacy", "legacy", "string", 0}, {"cli:i:compat", "compat", "string", 1},
        {"cli:i:token", "token", "string", 1},   {"cli:i:uid", "token", "string", 1},
        {"cli:i:incr", "incr", "string", 0},     {"cli:i:junk", "unknown", "string", 0},
        {"cli:i:big", "unknown", "string", 0},   {"cli:i:list", "wrongtype", "list", 0},
        {"cli:i:none", "absent", "none", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {"-p", cli.port, "inspect", cases[i].key, "--json", NULL};
        cJSON *o = lbt_run_json(&cli.proc, args, 0);
        assert_string_equal(lbt_str_of(o, "event"), "inspect");
        if (strcmp(lbt_str_of(o, "format"), cases[i].format) != 0)
            fail_msg("%s: format %s", cases[i].key, lbt_str_of(o, "format"));
        assert_string_equal(lbt_str_of(o, "type"), cases[i].type);
        const cJSON *pttl = cJSON_GetObjectItemCaseSensitive(o, "pttl_ms");
        if (cases[i].pttl == 1) assert_true(lbt_num_of(o, "pttl_ms") > 0);
        if (cases[i].pttl == 0) assert_true(cJSON_IsNull(pttl));
        if (cases[i].pttl == -1) assert_null(pttl);
        cJSON_Delete(o);
    }
    /* Details: the codec and expiry of a timestamp, the token's kind, the
     * counter, and a long value shown cut with its length. */
    const char *leg[] = {"-p", cli.port, "inspect", "cli:i:legacy", "--json", "--ttl-ms", "90000",
                         NULL};
    cJSON *o = lbt_run_json(&cli.proc, leg, 0);
    assert_string_equal(lbt_str_of(o, "codec"), "ms");
    assert_string_equal(lbt_str_of(o, "value"), live);
    assert_true(lbt_num_of(o, "expiry") == (double)atoll(live));
    assert_true(lbt_num_of(o, "expiry_epoch_ms") == (double)atoll(live));
    assert_false(lbt_bool_of(o, "expired"));
    assert_true(lbt_num_of(o, "remaining_ms") > 50000 && lbt_num_of(o, "remaining_ms") <= 60000);
    assert_true(lbt_num_of(o, "holder_age_ms") >= 30000 && lbt_num_of(o, "holder_age_ms") < 40000);
    cJSON_Delete(o);
    const char *uid[] = {"-p", cli.port, "inspect", "cli:i:uid", "--json", NULL};
    o = lbt_run_json(&cli.proc, uid, 0);
    assert_string_equal(lbt_str_of(o, "token"), "json-uid");
    cJSON_Delete(o);
    const char *incr[] = {"-p", cli.port, "inspect", "cli:i:incr", "--json", NULL};
    o = lbt_run_json(&cli.proc, incr, 0);
    assert_true(lbt_num_of(o, "counter") == 2);
    cJSON_Delete(o);
    const char *bigargs[] = {"-p", cli.port, "inspect", "cli:i:big", "--json", "--max-bytes", "10",
                             NULL};
    o = lbt_run_json(&cli.proc, bigargs, 0);
    assert_string_equal(lbt_str_of(o, "value"), "xxxxxxxxxx");
    assert_true(lbt_num_of(o, "length") == (double)(sizeof big - 1));
    assert_true(lbt_bool_of(o, "truncated"));
    cJSON_Delete(o);
    lbt_cmd_ok(cli.conn, "DEL cli:i:legacy cli:i:compat cli:i:token cli:i:uid cli:i:incr cli:i:junk "
           "cli:i:big cli:i:list");
}

/* Every codec reads the value: a seconds value is a timestamp for --codec s
 * whatever the order, and ambiguous for ms alone (an instant of 1970). */
static void test_inspect_tries_the_codecs_in_order(void **state) {
    (void)state;
    char secs[32];
    snprintf(secs, sizeof secs, "%lld", (long long)(lbt_wall_ms() / 1000 + 600));
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:i:secs", secs);
    const char *both[] = {"-p", cli.port, "inspect", "cli:i:secs", "--codec", "s", "--codec", "ms",
                          "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, both, 0);
    assert_string_equal(lbt_str_of(o, "format"), "legacy");
    assert_string_equal(lbt_str_of(o, "codec"), "s");
    assert_false(lbt_bool_of(o, "expired"));
    cJSON_Delete(o);
    const char *ms[] = {"-p", cli.port, "inspect", "cli:i:secs", "--json", NULL};
    o = lbt_run_json(&cli.proc, ms, 0);
    assert_string_equal(lbt_str_of(o, "format"), "ambiguous");
    assert_string_equal(lbt_str_of(o, "plausible_codec"), "s");
    cJSON_Delete(o);
    /* Text for people: a table of the same fields, bytes escaped. */
    lbt_cmd_ok(cli.conn, "SET %s %b", "cli:i:bin", "\x01\xff", (size_t)2);
    const char *text[] = {"-p", cli.port, "inspect", "cli:i:bin", NULL};
    assert_int_equal(lbt_run(&cli.proc, text), 0);
    assert_non_null(strstr(cli.proc.out, "\\x01\\xff"));
    assert_non_null(strstr(cli.proc.out, "unknown"));
    lbt_cmd_ok(cli.conn, "DEL %s %s", "cli:i:secs", "cli:i:bin");
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_inspect");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inspect_names_the_format_of_every_kind_of_key),
        cmocka_unit_test(test_inspect_tries_the_codecs_in_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
