/* The migration gate through the tool (`mode set`, `mode get`, `mode config`,
 * `status`), run as a child process against a real redis-server: evidence that
 * outlives sweep, companions told from locks by the library's rule, changes
 * backwards checked, an observation that fails closed, one decision for status
 * and mode set, a stored pattern, named overrides, a minimum time in a stage,
 * the alarm in modern, and refusals that teach. The tool is $LB_TOOL, or
 * $BUILD/lockbridge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "harness/cli.h"
#include "harness/proc.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"

/* How long ago the tests' stages began: far past any minimum stage time, ms. */
#define STAGE_AGO_MS INT64_C(3600000)

static lbt_cli cli;

/* The namespace's stored watch before modern: 100 ms (a command may only
 * lengthen it). */
static void watch_briefly(const char *ns) {
    char key[128];
    snprintf(key, sizeof key, "{%s}:lb-gate", ns);
    lbt_cmd_ok(cli.conn, "HSET %s observe_ms 100", key);
}

/* Namespace `ns` in `mode`, its stage begun an hour ago, as if set long since,
 * watching 100 ms before modern. */
static void ns_in(const char *ns, const char *mode) {
    char key[128];
    snprintf(key, sizeof key, "{%s}:lb-mode", ns);
    lbt_cmd_ok(cli.conn, "SET %s %s", key, mode);
    snprintf(key, sizeof key, "{%s}:lb-gate", ns);
    lbt_cmd_ok(cli.conn, "HSET %s since_ms %lld", key, (long long)(lbt_wall_ms() - STAGE_AGO_MS));
    watch_briefly(ns);
}

static void set_ts(const char *key, int64_t at_ms) {
    lbt_cmd_ok(cli.conn, "SET %s %lld", key, (long long)at_ms);
}

static void expect_exit(int got, int want) {
    if (got != want) fail_msg("exit %d, expected %d:\n%s%s", got, want, cli.proc.out, cli.proc.err);
}

static void expect_out(const char *text) {
    if (!strstr(cli.proc.out, text) && !strstr(cli.proc.err, text))
        fail_msg("no \"%s\" in:\n%s%s", text, cli.proc.out, cli.proc.err);
}

static void expect_no_out(const char *text) {
    if (strstr(cli.proc.out, text) || strstr(cli.proc.err, text))
        fail_msg("\"%s\" in:\n%s%s", text, cli.proc.out, cli.proc.err);
}

/* ---- Hole 1: sweep must not erase the evidence ----------------------------------- */
/* A live TTL-less legacy lock refuses modern; once sweep has given it a TTL it
 * looks like a compat lock, yet modern is still refused: the refusal recorded
 * the legacy writer in the namespace's gate record. */
static void test_legacy_evidence_survives_sweep(void **state) {
    (void)state;
    ns_in("g1", "compat");
    set_ts("g1:l1", lbt_wall_ms() + 600000);
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "g1", "--match", "g1:*",
                            "--observe-ms", "100", NULL), 6);
    expect_out("g1:l1");
    expect_exit(lbt_cli_run(&cli, "sweep", "--ns", "g1", "--match", "g1:*", NULL), 0);
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "g1", "--match", "g1:*",
                            "--observe-ms", "100", NULL), 6);
    expect_out("legacy");
    assert_string_equal(lbt_get(cli.conn, "{g1}:lb-mode"), "compat");
    lbt_cmd_ok(cli.conn, "DEL g1:l1 {g1}:lb-mode {g1}:lb-gate");
}

/* ---- Hole 3: companions by the library's rule -------------------------------------- */
/* The fence of "{id}:lock" is "{id}:lock:fence", a counter: a companion, not an
 * INCR locker. A lock key spelled like a queue companion but holding a
 * timestamp is a lock, and is seen. */
static void test_companions_are_told_from_locks_by_name_and_type(void **state) {
    (void)state;
    ns_in("n3", "legacy");
    lbt_cmd_ok(cli.conn, "SET %s 7", "{g3id}:lock:fence");
    set_ts("{g3user}:queue", lbt_wall_ms() + 600000);
    lbt_cmd_ok(cli.conn, "ZADD %s 1 w", "{g3user}:fair:queue");
    expect_exit(lbt_cli_run(&cli, "status", "--ns", "n3", "--match", "{g3*", "--json", NULL), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    const cJSON *sum = l.line[l.n - 1];
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(sum, "formats");
    assert_true(lbt_num_of(f, "incr") == 0);
    assert_true(lbt_num_of(f, "legacy") == 1);
    assert_true(lbt_num_of(sum, "companion_keys") == 2);
    lbt_lines_free(&l);
    lbt_cmd_ok(cli.conn, "DEL {g3id}:lock:fence {g3user}:queue {g3user}:fair:queue {n3}:lb-mode "
                     "{n3}:lb-gate");
}

/* A clean compat namespace whose only keys are a token lock and its fence goes
 * to modern: the fence is no blocker. */
static void test_a_fence_key_does_not_block_modern(void **state) {
    (void)state;
    ns_in("g3b", "compat");
    lbt_cmd_ok(cli.conn, "SET %s 12", "{g3bid}:lock:fence");
    lbt_cmd_ok(cli.conn, "SET %s %s PX 60000", "{g3bid}:lock", "0123456789abcdef0123456789abcdef");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "g3b", "--match", "{g3bid}*",
                            "--observe-ms", "100", NULL), 0);
    assert_string_equal(lbt_get(cli.conn, "{g3b}:lb-mode"), "modern");
    lbt_cmd_ok(cli.conn, "DEL {g3bid}:lock:fence {g3bid}:lock {g3b}:lb-mode {g3b}:lb-gate");
}

/* ---- Hole 4: stepping back is checked -------------------------------------------- */
/* compat -> legacy while a modern client holds a lock: legacy clients cannot
 * read its token, so the change is refused and names the key. */
static void test_back_to_legacy_is_refused_while_a_modern_client_holds_a_lock(void **state) {
    (void)state;
    ns_in("g4", "compat");
    const char *hold[] = {"-p", cli.port, "hold", "g4:job", "--mode", "modern", "--ttl-ms", "60000",
                          "--hold-ms", "20000", NULL};
    lbt_proc holder;
    lbt_spawn(&holder, hold);
    lbt_wait_lines(&holder, 1);
    expect_exit(lbt_cli_run(&cli, "mode", "set", "legacy", "--ns", "g4", "--match", "g4:*", NULL),
                6);
    expect_out("g4:job");
    assert_string_equal(lbt_get(cli.conn, "{g4}:lb-mode"), "compat");
    lbt_cmd_ok(cli.conn, "DEL g4:job");
    kill(holder.pid, SIGTERM);
    lbt_finish(&holder);
    lbt_cmd_ok(cli.conn, "DEL g4:job {g4}:lb-mode {g4}:lb-gate");
}

/* ---- Hole 6: an observation that could not be made blocks modern ------------------ */
static void test_modern_is_refused_when_info_is_refused(void **state) {
    (void)state;
    ns_in("g6", "compat");
    lbt_cmd_ok(cli.conn, "SET %s %s PX 60000", "g6:a", "0123456789abcdef0123456789abcdef");
    lbt_cmd_ok(cli.conn, "ACL SETUSER g6user on >g6pw ~* &* +@all -info");
    expect_exit(lbt_cli_run(&cli, "--user", "g6user", "-a", "g6pw", "mode", "set", "modern", "--ns",
                            "g6", "--match", "g6:*", "--observe-ms", "100", NULL), 6);
    expect_out("observation");
    assert_string_equal(lbt_get(cli.conn, "{g6}:lb-mode"), "compat");
    /* status cannot claim "ready" where mode set refuses: its verdict says what
     * it leaves out. */
    expect_exit(lbt_cli_run(&cli, "--user", "g6user", "-a", "g6pw", "status", "--ns", "g6",
                            "--match", "g6:*", NULL), 0);
    expect_out("leaves out the SETNX/GETSET observation");
    /* Skipped by name, and said so. */
    expect_exit(lbt_cli_run(&cli, "--user", "g6user", "-a", "g6pw", "mode", "set", "modern", "--ns",
                            "g6", "--match", "g6:*", "--observe-ms", "100", "--override",
                            "observation", NULL), 0);
    expect_out("skipped: [observation]");
    lbt_cmd_ok(cli.conn, "ACL DELUSER g6user");
    lbt_cmd_ok(cli.conn, "DEL g6:a {g6}:lb-mode {g6}:lb-gate");
}

/* Called every second while the tool watches: the first call may come before
 * the tool has read the counts, the second comes after. */
static void reset_stats(void) {
    static int calls;
    if (++calls == 2) freeReplyObject(redisCommand(cli.conn, "CONFIG RESETSTAT"));
}

/* Counts that went down while watching (CONFIG RESETSTAT) prove nothing. */
static void test_modern_is_refused_when_the_counts_go_backwards(void **state) {
    (void)state;
    ns_in("g6b", "compat");
    lbt_cmd_ok(cli.conn, "SET %s %s PX 60000", "g6b:a", "0123456789abcdef0123456789abcdef");
    for (int i = 0; i < 5; i++) lbt_cmd_ok(cli.conn, "SETNX %s 1", "g6b:other");
    lbt_cmd_ok(cli.conn, "DEL g6b:other");
    const char *args[] = {"-p", cli.port, "mode", "set", "modern", "--ns", "g6b", "--match",
                          "g6b:*", "--observe-ms", "4000", NULL};
    lbt_spawn(&cli.proc, args);
    expect_exit(lbt_finish_with(&cli.proc, reset_stats, 1000), 6);
    expect_out("went down");
    lbt_cmd_ok(cli.conn, "DEL g6b:a {g6b}:lb-mode {g6b}:lb-gate");
}

/* ---- Hole 13: the namespace keeps its pattern ------------------------------------ */
static void test_the_namespace_keeps_its_pattern_and_an_empty_scan_proves_nothing(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s %s PX 60000", "billing:a", "0123456789abcdef0123456789abcdef");
    /* A command may only tighten the stored values: shorter ones are stored
     * by name, and said. */
    expect_exit(lbt_cli_run(&cli, "mode", "set", "compat", "--ns", "g13", "--match", "billing:*",
                            "--ttl-ms", "0", "--refresh-ms", "0", NULL), 1);
    expect_exit(lbt_cli_run(&cli, "mode", "config", "--ns", "g13", "--ttl-ms", "0",
                            "--refresh-ms", "0", "--override", "ttl-ms", "--override",
                            "refresh-ms", NULL), 0);
    expect_out("override: ttl-ms loosened from 30000 to 0 ms");
    watch_briefly("g13");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "compat", "--ns", "g13", "--match", "billing:*",
                            NULL), 0);
    expect_exit(lbt_cli_run(&cli, "mode", "get", "--ns", "g13", "--json", NULL), 0);
    expect_out("\"match\":\"billing:*\"");
    /* A mistyped pattern is refused, not scanned. */
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "g13", "--match", "biling2:*",
                            NULL), 1);
    expect_out("mode config");
    /* A pattern that matches nothing, stored on purpose (by name), proves nothing. */
    expect_exit(lbt_cli_run(&cli, "mode", "config", "--ns", "g13", "--match", "biling2:*", NULL),
                1);
    expect_exit(lbt_cli_run(&cli, "mode", "config", "--ns", "g13", "--match", "biling2:*",
                            "--override", "match", NULL), 0);
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "g13", "--observe-ms", "100",
                            NULL), 6);
    expect_out("empty-scan");
    lbt_cmd_ok(cli.conn, "DEL billing:a {g13}:lb-mode {g13}:lb-gate");
}

/* ---- Hole 14: no skipping adjacency ------------------------------------------------ */
static void test_no_override_skips_adjacency(void **state) {
    (void)state;
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "g14", "--force", NULL), 1);
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "g14", "--override", "adjacency",
                            NULL), 1);
    lbt_cmd_ok(cli.conn, "SET %s %s PX 60000", "g14:a", "0123456789abcdef0123456789abcdef");
    watch_briefly("g14");
    static const char *const all[] = {"control-key", "incr", "legacy-writers", "observation",
                                      "modern-clients", "stage-time", "empty-scan", "census"};
    const char *args[40] = {"-p", cli.port, "mode", "set", "modern", "--ns", "g14", "--match",
                            "g14:*", "--observe-ms", "100"};
    int n = 11;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        args[n++] = "--override";
        args[n++] = all[i];
    }
    args[n] = NULL;
    expect_exit(lbt_run(&cli.proc, args), 6);
    expect_out("[adjacency]");
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "{g14}:lb-mode"), 0);
    lbt_cmd_ok(cli.conn, "DEL g14:a {g14}:lb-gate");
}

/* ---- Hole 15: the INCR blocker holds for compat; a stage lasts ---------------------- */
static void test_compat_is_refused_beside_an_incr_counter(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s 3", "g15:counter");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "compat", "--ns", "g15", "--match", "g15:*", NULL),
                6);
    expect_out("g15:counter");
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "{g15}:lb-mode"), 0);
    lbt_cmd_ok(cli.conn, "DEL g15:counter {g15}:lb-gate");
}

static void test_a_stage_lasts_refresh_plus_validity(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s %s PX 60000", "g15s:a", "0123456789abcdef0123456789abcdef");
    watch_briefly("g15s");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "compat", "--ns", "g15s", "--match", "g15s:*",
                            "--ttl-ms", "600000", "--refresh-ms", "1000", NULL), 0);
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "g15s", "--observe-ms", "100",
                            NULL), 6);
    expect_out("stage-time");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "legacy", "--ns", "g15s", NULL), 6);
    expect_out("stage-time");
    assert_string_equal(lbt_get(cli.conn, "{g15s}:lb-mode"), "compat");
    lbt_cmd_ok(cli.conn, "DEL g15s:a {g15s}:lb-mode {g15s}:lb-gate");
}

/* ---- Hole 16: the alarm ------------------------------------------------------------ */
static void test_status_raises_the_alarm_for_a_legacy_writer_in_modern(void **state) {
    (void)state;
    ns_in("g16", "modern");
    set_ts("g16:l1", lbt_wall_ms() + 600000);
    expect_exit(lbt_cli_run(&cli, "status", "--ns", "g16", "--match", "g16:*", NULL), 7);
    expect_out("ALARM");
    expect_out("mode set compat --ns g16");
    lbt_cmd_ok(cli.conn, "DEL g16:l1 {g16}:lb-mode {g16}:lb-gate");
}

/* ---- Refusals that teach ----------------------------------------------------------- */
static void test_a_missing_ns_explains_and_lists_namespaces(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s compat", "{orders}:lb-mode");
    expect_exit(lbt_cli_run(&cli, "status", NULL), 1);
    expect_out("A namespace names one fleet's migration");
    expect_out("--ns orders");
    lbt_cmd_ok(cli.conn, "DEL {orders}:lb-mode");
}

static void test_a_refusal_names_the_keys_with_their_validity(void **state) {
    (void)state;
    ns_in("gk", "compat");
    char key[32];
    for (int i = 0; i < 7; i++) {
        snprintf(key, sizeof key, "gk:%d", i);
        set_ts(key, lbt_wall_ms() + 600000);
    }
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "gk", "--match", "gk:*",
                            "--observe-ms", "100", NULL), 6);
    expect_out("ms left)");
    expect_out("and 2 more (lockbridge status --json lists them all)");
    for (int i = 0; i < 7; i++) {
        snprintf(key, sizeof key, "gk:%d", i);
        lbt_cmd_ok(cli.conn, "DEL %s", key);
    }
    lbt_cmd_ok(cli.conn, "DEL {gk}:lb-mode {gk}:lb-gate");
}

/* ---- The writing evidence counts changes, not sightings ----------------------------- */
static void test_a_static_timestamp_is_not_a_writer(void **state) {
    (void)state;
    ns_in("gw", "compat");
    set_ts("gw:crashed", lbt_wall_ms() - 7200000); /* expired two hours ago, never touched */
    lbt_cmd_ok(cli.conn, "SET %s %s PX 60000", "gw:tok", "0123456789abcdef0123456789abcdef");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "modern", "--ns", "gw", "--match", "gw:*",
                            "--observe-ms", "600", NULL), 0);
    expect_no_out("a legacy client is writing");
    expect_out("stayed unchanged");
    lbt_cmd_ok(cli.conn, "DEL gw:crashed gw:tok {gw}:lb-mode {gw}:lb-gate");
}

static int writes;
static void write_new_timestamp(void) {
    char key[32];
    snprintf(key, sizeof key, "gw2:w%d", writes++);
    lbt_cmd_ok(cli.conn, "SET %s %lld PX 60000", key, (long long)(lbt_wall_ms() - 7200000));
    lbt_cmd_ok(cli.conn, "PERSIST %s", key);
}

static void test_a_timestamp_that_appears_while_watching_is_a_writer(void **state) {
    (void)state;
    ns_in("gw2", "compat");
    lbt_cmd_ok(cli.conn, "HSET %s window_ms 0", "{gw2}:lb-gate");
    lbt_cmd_ok(cli.conn, "SET %s %s PX 60000", "gw2:tok", "0123456789abcdef0123456789abcdef");
    const char *args[] = {"-p", cli.port, "mode", "set", "modern", "--ns", "gw2", "--match",
                          "gw2:*", "--observe-ms", "1500", "--window-ms", "0", NULL};
    lbt_spawn(&cli.proc, args);
    expect_exit(lbt_finish_with(&cli.proc, write_new_timestamp, 200), 6);
    expect_out("appeared or changed");
    lbt_cmd_ok(cli.conn, "DEL gw2:tok {gw2}:lb-mode {gw2}:lb-gate");
    for (int i = 0; i < writes; i++) {
        char key[32];
        snprintf(key, sizeof key, "gw2:w%d", i);
        lbt_cmd_ok(cli.conn, "DEL %s", key);
    }
}

/* ---- Mixed validities are said ------------------------------------------------------- */
/* A timestamp 15 minutes ahead beside a namespace whose stored validity is
 * 30 s: some client writes a longer validity, and lockbridge's wire clients
 * must know it (--fleet-max-ttl-ms) or a lost takeover race shortens it. */
static void test_status_says_when_a_timestamp_outruns_the_stored_validity(void **state) {
    (void)state;
    set_ts("gv:l1", lbt_wall_ms() + 900000);
    expect_exit(lbt_cli_run(&cli, "mode", "config", "--ns", "gv", "--match", "gv:*", "--ttl-ms",
                            "30000", NULL), 0);
    expect_exit(lbt_cli_run(&cli, "status", "--ns", "gv", NULL), 0);
    expect_out("--fleet-max-ttl-ms");
    lbt_cmd_ok(cli.conn, "DEL gv:l1 {gv}:lb-gate");
}

/* ---- A control key holding a wrong value says how to fix it ------------------------- */
static void test_a_wrong_control_key_value_is_named_with_its_fix(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s %s", "{g20}:lb-mode", "Modern");
    expect_exit(lbt_cli_run(&cli, "mode", "get", "--ns", "g20", NULL), 3);
    expect_out("\"Modern\"");
    expect_out("lower case");
    expect_out("lockbridge mode set MODE --ns g20");
    expect_exit(lbt_cli_run(&cli, "mode", "set", "compat", "--ns", "g20", NULL), 3);
    assert_string_equal(lbt_get(cli.conn, "{g20}:lb-mode"), "Modern");
    lbt_cmd_ok(cli.conn, "DEL %s", "{g20}:lb-mode");
}

static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_gate");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legacy_evidence_survives_sweep),
        cmocka_unit_test(test_companions_are_told_from_locks_by_name_and_type),
        cmocka_unit_test(test_a_fence_key_does_not_block_modern),
        cmocka_unit_test(test_back_to_legacy_is_refused_while_a_modern_client_holds_a_lock),
        cmocka_unit_test(test_modern_is_refused_when_info_is_refused),
        cmocka_unit_test(test_modern_is_refused_when_the_counts_go_backwards),
        cmocka_unit_test(test_the_namespace_keeps_its_pattern_and_an_empty_scan_proves_nothing),
        cmocka_unit_test(test_no_override_skips_adjacency),
        cmocka_unit_test(test_compat_is_refused_beside_an_incr_counter),
        cmocka_unit_test(test_a_stage_lasts_refresh_plus_validity),
        cmocka_unit_test(test_status_raises_the_alarm_for_a_legacy_writer_in_modern),
        cmocka_unit_test(test_a_missing_ns_explains_and_lists_namespaces),
        cmocka_unit_test(test_a_refusal_names_the_keys_with_their_validity),
        cmocka_unit_test(test_a_static_timestamp_is_not_a_writer),
        cmocka_unit_test(test_a_timestamp_that_appears_while_watching_is_a_writer),
        cmocka_unit_test(test_a_wrong_control_key_value_is_named_with_its_fix),
        cmocka_unit_test(test_status_says_when_a_timestamp_outruns_the_stored_validity),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
