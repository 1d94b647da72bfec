/* `lockbridge unlock`, run as a child process against a real redis-server:
 * only the exact value named is deleted, and nothing without --expect.
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

/* Only the exact value named is deleted, in one script; anything else is left
 * and shown; without --expect nothing is sent. */
static void test_unlock_deletes_only_the_value_named(void **state) {
    (void)state;
    static const struct {
        const char *set;    /* SET arguments after the key; NULL: absent; "hash": a hash */
        const char *expect; /* --expect, as typed */
        int exit;
        int deleted;
    } cases[] = {
        {"1795539092965", "1795539092965", 0, 1},
        {"1795539092965", "1795539092966", 3, 0},
        {"1795539092965", "179553909296", 3, 0},
        {"a\001b", "a\\x01b", 0, 1},        /* a control byte, typed \x01 */
        {"p\\q", "p\\\\q", 0, 1},           /* a backslash, typed \\ */
        {NULL, "1795539092965", 3, 0},
        {"hash", "v", 3, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lbt_cmd_ok(cli.conn, "DEL %s", "cli:un:k");
        if (cases[i].set && strcmp(cases[i].set, "hash") == 0)
            lbt_cmd_ok(cli.conn, "HSET %s f v", "cli:un:k");
        else if (cases[i].set) {
            const char *argv[] = {"SET", "cli:un:k", cases[i].set};
            redisReply *r = redisCommandArgv(cli.conn, 3, argv, NULL);
            assert_non_null(r);
            freeReplyObject(r);
        }
        const char *args[] = {"-p", cli.port, "unlock", "cli:un:k", "--expect", cases[i].expect,
                              "--json", NULL};
        int rc = lbt_run(&cli.proc, args);
        if (rc != cases[i].exit) fail_msg("case %zu: exit %d: %s", i, rc, cli.proc.out);
        cJSON *o = cJSON_Parse(cli.proc.out);
        assert_non_null(o);
        assert_int_equal(lbt_bool_of(o, "deleted"), cases[i].deleted);
        cJSON_Delete(o);
        assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:un:k"),
                         cases[i].set && !cases[i].deleted ? 1 : 0);
    }
    /* Without --expect: a usage error, nothing sent, nothing deleted. */
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:un:k", "x");
    long long before = lbt_calls(cli.conn, "eval");
    const char *bare[] = {"-p", cli.port, "unlock", "cli:un:k", NULL};
    assert_int_equal(lbt_run(&cli.proc, bare), 1);
    assert_int_equal(lbt_calls(cli.conn, "eval"), before);
    assert_string_equal(lbt_get(cli.conn, "cli:un:k"), "x");
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:un:k");
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_unlock");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlock_deletes_only_the_value_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
