/* `lockbridge status`, run as a child process against a real redis-server:
 * formats counted and the next stage judged, every key read across scan and
 * read batches, and the census as status and mode set read it.
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

/* A small fleet under "cli:s:*": two live legacy locks, one expired an hour
 * ago, one compat, one token, one unknown, one hash, and a fencing counter
 * (a companion key, not a lock). */
static void fill_fleet(void) {
    int64_t now = lbt_wall_ms();
    lbt_cmd_ok(cli.conn, "SET %s %lld", "cli:s:a", (long long)(now + 60000));
    lbt_cmd_ok(cli.conn, "SET %s %lld", "cli:s:b", (long long)(now + 60000));
    lbt_cmd_ok(cli.conn, "SET %s %lld", "cli:s:old", (long long)(now - 3600000 * 2));
    lbt_cmd_ok(cli.conn, "SET %s %lld PX 90000", "cli:s:c", (long long)(now + 60000));
    lbt_cmd_ok(cli.conn, "SET %s %s PX 45000", "cli:s:t", "0123456789abcdef0123456789abcdef");
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:s:junk", "hello");
    lbt_cmd_ok(cli.conn, "HSET %s %s %s", "cli:s:h", "f", "v");
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:s:a}:fence", "7");
}

static void test_status_counts_formats_and_judges_the_next_stage(void **state) {
    (void)state;
    fill_fleet();
    /* Set: without a control key, a token beside followers that may be legacy
     * is an alarm. */
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:ns}:lb-mode", "legacy");
    lbt_cmd_ok(cli.conn, "HSET %s since_ms %lld", "{cli:ns}:lb-gate",
               (long long)(lbt_wall_ms() - 3600000));
    const char *args[] = {"-p", cli.port, "status", "--ns", "cli:ns", "--match", "*cli:s:*",
                          "--count", "2", "--json", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 0); /* legacy -> compat: no blocker */
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 8); /* seven locks and the summary */
    for (int i = 0; i < 7; i++) assert_string_equal(lbt_str_of(l.line[i], "event"), "lock");
    cJSON *o = l.line[7];
    assert_string_equal(lbt_str_of(o, "event"), "status");
    assert_string_equal(lbt_str_of(o, "mode"), "legacy");
    assert_true(lbt_bool_of(o, "mode_key_present"));
    assert_true(lbt_num_of(o, "keys") == 7);
    assert_true(lbt_num_of(o, "companion_keys") == 1);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "formats");
    assert_true(lbt_num_of(f, "legacy") == 3);
    assert_true(lbt_num_of(f, "compat") == 1);
    assert_true(lbt_num_of(f, "token") == 1);
    assert_true(lbt_num_of(f, "unknown") == 1);
    assert_true(lbt_num_of(f, "wrongtype") == 1);
    assert_true(lbt_num_of(f, "incr") == 0);
    assert_true(lbt_num_of(o, "ttl_less") == 5);
    assert_true(lbt_num_of(o, "legacy_expired_present") == 1);
    assert_true(lbt_num_of(o, "token_max_pttl_ms") > 0 &&
                lbt_num_of(o, "token_max_pttl_ms") <= 45000);
    assert_string_equal(lbt_str_of(o, "next"), "legacy -> compat");
    assert_string_equal(lbt_str_of(o, "verdict"), "ready");
    /* The expired lock, the value in no known format, and the timestamps
     * running 60 s ahead of the validity judged by (the default 30 s, as
     * mode set judges). */
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "notes")), 3);
    assert_non_null(strstr(lbt_str_of(o, "judged_by"), "window 3600000 ms (default)"));
    lbt_lines_free(&l);

    /* In compat, the live TTL-less values are a legacy writer's (the one no
     * codec reads too): modern is not safe yet. Text output names the
     * blocker; --limit cuts the rows. */
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:ns}:lb-mode", "compat");
    const char *text[] = {"-p", cli.port, "status", "--ns", "cli:ns", "--match", "cli:s:*",
                          "--limit", "2", NULL};
    assert_int_equal(lbt_run(&cli.proc, text), 6);
    assert_non_null(strstr(cli.proc.out, "compat -> modern: not ready"));
    assert_non_null(strstr(cli.proc.out, "blocker: [legacy-writers] 3 TTL-less value(s)"));
    assert_non_null(strstr(cli.proc.out, "... 5 more"));
    lbt_cmd_ok(cli.conn, "DEL %s", "{cli:ns}:lb-mode");
    lbt_del_matching(cli.conn, "cli:s:*");
    lbt_cmd_ok(cli.conn, "DEL %s", "{cli:s:a}:fence");
}

/* A fair lock under contention keeps its baton list and its last waiter's
 * mark beside the key; the mark holds a token with a TTL, as a lock does,
 * and is a companion all the same (it was counted as a token lock). */
static void test_status_counts_the_baton_and_its_mark_as_companions(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s %s PX 45000", "cli:b:t", "0123456789abcdef0123456789abcdef");
    lbt_cmd_ok(cli.conn, "SET %s %s PX 45000", "{cli:b:t}:bwait", "fedcba9876543210fedcba9876543210");
    assert_int_equal(lbt_int(cli.conn, "RPUSH %s %s", "{cli:b:t}:baton",
                             "00112233445566778899aabbccddeeff 30000 100"), 1);
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:nsb}:lb-mode", "modern");
    const char *args[] = {"-p", cli.port, "status", "--ns", "cli:nsb", "--match", "*cli:b:*",
                          "--json", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    cJSON *o = l.line[l.n - 1];
    assert_string_equal(lbt_str_of(o, "event"), "status");
    assert_true(lbt_num_of(o, "keys") == 1);
    assert_true(lbt_num_of(o, "companion_keys") == 2);
    assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(o, "formats"), "token") == 1);
    lbt_lines_free(&l);
    lbt_cmd_ok(cli.conn, "DEL %s %s %s %s %s", "cli:b:t", "{cli:b:t}:bwait", "{cli:b:t}:baton",
               "{cli:nsb}:lb-mode", "{cli:nsb}:lb-gate");
}

/* More keys than one SCAN step and than one read batch: every key is read
 * once, whatever COUNT says. */
static void test_status_reads_every_key_across_batches(void **state) {
    (void)state;
    int64_t now = lbt_wall_ms();
    for (int base = 0; base < 2500; base += 500) {
        for (int i = base; i < base + 500; i++)
            redisAppendCommand(cli.conn, "SET cli:many:%d %lld PX 60000", i,
                               (long long)(now + 50000));
        for (int i = base; i < base + 500; i++) {
            redisReply *r;
            assert_int_equal(redisGetReply(cli.conn, (void **)&r), REDIS_OK);
            freeReplyObject(r);
        }
    }
    static const char *const counts[] = {"10", "1000", "5000"};
    for (int i = 0; i < 3; i++) {
        const char *args[] = {"-p", cli.port, "status", "--ns", "cli:ns", "--match", "cli:many:*",
                              "--count", counts[i], "--limit", "0", "--json", NULL};
        cJSON *o = lbt_run_json(&cli.proc, args, 0);
        assert_true(lbt_num_of(o, "keys") == 2500);
        assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(o, "formats"), "compat") == 2500);
        cJSON_Delete(o);
    }
    lbt_del_matching(cli.conn, "cli:many:*");
}

static void census_add(const char *id, lb_mode mode, int64_t age_ms) {
    lb_census_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.id, sizeof e.id, "%s", id);
    e.mode = mode;
    snprintf(e.version, sizeof e.version, "0.1.0");
    snprintf(e.host, sizeof e.host, "test");
    e.pid = 1;
    lb_now now = lb_clock_now(NULL);
    now.wall_us -= age_ms * 1000;
    assert_int_equal(lb_census_register(lb_on_conn(cli.conn), "cli:cns", 7, &e, &now), LB_OK);
}

static void test_status_and_mode_set_read_the_census(void **state) {
    (void)state;
    census_add("j1", LB_MODE_COMPAT, 0);
    census_add("j2", LB_MODE_COMPAT, 0);
    census_add("j3", LB_MODE_LEGACY, 120000); /* stale, but within the window */
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:cns}:lb-mode", "compat");
    lbt_cmd_ok(cli.conn, "HSET %s observe_ms 100", "{cli:cns}:lb-gate");
    const char *args[] = {"-p", cli.port, "status", "--ns", "cli:cns", "--match", "cli:nothing:*",
                          "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, args, 6);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "census");
    assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(c, "compat"), "live") == 2);
    assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(c, "legacy"), "stale") == 1);
    assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(c, "legacy"), "live") == 0);
    assert_string_equal(lbt_str_of(o, "verdict"), "not ready");
    cJSON_Delete(o);
    const char *set[] = {"-p", cli.port, "mode", "set", "modern", "--observe-ms", "100", "--ns",
                         "cli:cns", "--match", "cli:nothing:*", "--json", NULL};
    o = lbt_run_json(&cli.proc, set, 6);
    assert_string_equal(lbt_str_of(o, "outcome"), "refused");
    assert_string_equal(lbt_get(cli.conn, "{cli:cns}:lb-mode"), "compat");
    cJSON_Delete(o);
    /* Outside a window shorter than its age (stored: a command may only widen
     * it), the legacy entry no longer counts. */
    lbt_cmd_ok(cli.conn, "HSET %s window_ms 60000", "{cli:cns}:lb-gate");
    /* (The control key was written by hand, so when the stage began is not
     * known, and the pattern matches nothing: both checks skipped by name.) */
    const char *narrow[] = {"-p", cli.port, "mode", "set", "modern", "--observe-ms", "100", "--ns",
                            "cli:cns", "--match", "cli:nothing:*", "--window-ms", "60000",
                            "--override", "stage-time", "--override", "empty-scan", "--json", NULL};
    o = lbt_run_json(&cli.proc, narrow, 0);
    assert_true(lbt_bool_of(o, "changed"));
    assert_string_equal(lbt_get(cli.conn, "{cli:cns}:lb-mode"), "modern");
    cJSON_Delete(o);
    lbt_cmd_ok(cli.conn, "DEL %s %s %s", "{cli:cns}:lb-mode", "{cli:cns}:lb-census",
               "{cli:cns}:lb-gate");
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_status");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_counts_formats_and_judges_the_next_stage),
        cmocka_unit_test(test_status_counts_the_baton_and_its_mark_as_companions),
        cmocka_unit_test(test_status_reads_every_key_across_batches),
        cmocka_unit_test(test_status_and_mode_set_read_the_census),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
