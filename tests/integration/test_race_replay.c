/* `lockbridge race` against real processes, its catalogue and its verdicts:
 * the project's Java lockers and the lockbridge tool itself replay the shipped
 * catalogue's schedules through the proxy in front of a real redis-server; a
 * client played by the test checks the proxy's own checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "harness/proc.h"
#include "harness/race_client.h"
#include "harness/redis_server.h"
/* The proxy's reading of values, tested on its own (a pure function). */
#include "tool/race/race_value.c"

#define KEY "race:lock"
#define COUNTER "race:counter"
#define CATALOGUE "catalogue"

static lbt_redis server;
static char port[16];
static char java_cp[512];
static int have_java;

/* The lock's validity T of a replay, ms: short, since the catalogue's pauses
 * are multiples of it (3.1T), but a whole second for the lockers whose unit is
 * the second (R; the INCR lockers' EXPIRE) and for the fleets that mix
 * validities, whose rows are written for 1 s beside 10 s. */
#define SHORT_TTL_MS 300
#define SECOND_TTL_MS 1000

static int needs_a_second(const char *locker) {
    static const char *const slow[] = {"R", "L1-10s", "lockbridge-hold-fleet-max", "L1-INCR",
                                       "L1-INCR2", NULL};
    for (int i = 0; slow[i]; i++)
        if (strcmp(locker, slow[i]) == 0) return 1;
    return 0;
}

typedef struct replay {
    int code;
    lbt_lines lines;
    const cJSON *result; /* the race_result line */
} replay;

/* Replays one catalogue file with clients A..D run as fleet[0..3], under the
 * expectations of `name`; with_counter 0: no --counter-key, so that only the
 * lock key's replies are judged. */
static void replay_fleet(const char *file, const char *name, const char *const fleet[4],
                         int with_counter, replay *r) {
    char path[256], cl[4][1100], ttl[16];
    int t = SHORT_TTL_MS;
    for (int i = 0; i < 4; i++)
        if (needs_a_second(fleet[i])) t = SECOND_TTL_MS;
    snprintf(ttl, sizeof ttl, "%d", t);
    for (int i = 0; i < 4; i++) {
        char line[1024];
        lbt_client_line(java_cp, fleet[i], t, line, sizeof line);
        snprintf(cl[i], sizeof cl[i], "%c=%s", 'A' + i, line);
    }
    snprintf(path, sizeof path, CATALOGUE "/%s", file);
    const char *args[] = {"-p", port, "race", "--file", path, "--locker", name, "--key", KEY,
                          "--ttl-ms", ttl, "--json", "--client", cl[0], "--client", cl[1],
                          "--client", cl[2], "--client", cl[3], "--counter-key", COUNTER, NULL};
    if (!with_counter) args[sizeof args / sizeof args[0] - 3] = NULL;
    lbt_proc p;
    r->code = lbt_run(&p, args);
    lbt_parse(&p, &r->lines);
    r->result = NULL;
    for (int i = 0; i < r->lines.n; i++)
        if (strcmp(lbt_str_of(r->lines.line[i], "event"), "race_result") == 0)
            r->result = r->lines.line[i];
    assert_non_null(r->result);
    printf("  %-26s %-32s %s %s: %s\n", file, name, lbt_str_of(r->result, "verdict"),
           lbt_str_of(r->result, "kind"), lbt_str_of(r->result, "detail"));
}

/* Every client the same locker. */
static void replay_row_with(const char *file, const char *locker, int with_counter, replay *r) {
    const char *const fleet[4] = {locker, locker, locker, locker};
    replay_fleet(file, locker, fleet, with_counter, r);
}

static void replay_row(const char *file, const char *locker, replay *r) {
    replay_row_with(file, locker, 1, r);
}

static const char *trace_of(const replay *r) { return lbt_str_of(r->result, "trace"); }

/* A caught row: the violation named, seen on the wire, expected by the file. */
static void expect_caught(const replay *r, const char *kind, const char *detail) {
    assert_string_equal(lbt_str_of(r->result, "verdict"), "caught");
    assert_string_equal(lbt_str_of(r->result, "kind"), kind);
    if (!strstr(lbt_str_of(r->result, "detail"), detail))
        fail_msg("expected '%s' in: %s", detail, lbt_str_of(r->result, "detail"));
    assert_true(lbt_bool_of(r->result, "ok"));
    assert_int_equal(r->code, 0);
}

/* A passed row: every token carried out, nothing seen. */
static void expect_passed(const replay *r) {
    assert_string_equal(lbt_str_of(r->result, "verdict"), "passed");
    assert_int_equal((int)lbt_num_of(r->result, "followed"), (int)lbt_num_of(r->result, "tokens"));
    assert_non_null(strstr(trace_of(r), "followed to the end"));
    assert_true(lbt_bool_of(r->result, "ok"));
    assert_int_equal(r->code, 0);
}

static int skip_without_java(void) {
    if (have_java) return 0;
    printf("race replay: java or the Java lockers are missing; skipped\n");
    return 1;
}

/* L1 after a nil GET: its catch-all handler DELs the key, which C holds by then. */
static void test_l1_catch_all_del_is_caught_by_the_nil_get_schedule(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    replay r;
    replay_row("get-nil.race", "L1", &r);
    expect_caught(&r, "deleted", "B deleted C's lock while C holds it");
    /* The wire shows why: B's GET found nothing, C got in, B's DEL removed it. */
    assert_non_null(strstr(trace_of(&r), "B -> GET " KEY "\n  B <- nil"));
    assert_non_null(strstr(trace_of(&r), "C acquired (SETNX replied 1)"));
    lbt_lines_free(&r.lines);
}

/* L4 after a nil GETSET: not acquired, its value left in a key nobody holds. */
static void test_l4_nil_getset_leaves_a_lock_nobody_can_take(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    replay r;
    replay_row("getset-nil.race", "L4", &r);
    expect_caught(&r, "liveness", "C could not acquire within 12 commands");
    assert_non_null(strstr(trace_of(&r), "B <- nil"));
    assert_null(strstr(trace_of(&r), "B acquired"));
    lbt_lines_free(&r.lines);
}

/* L3 racers: the loser's value replaces the winner's, whose release then no
 * longer recognises it: the lock stays until the loser's expiry. */
static void test_l3_overwritten_timestamp_is_caught(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    replay r;
    replay_row("overwritten-timestamp.race", "L3", &r);
    expect_caught(&r, "liveness", "D could not acquire");
    assert_non_null(strstr(trace_of(&r), "B acquired (GETSET returned the value its GET saw)"));
    assert_non_null(
        strstr(trace_of(&r), "note: C replaced B's value with an equal or later expiry"));
    lbt_lines_free(&r.lines);
}

/* L1's second INCR generation: B's second INCR past 2 is taken as a dead lock
 * and B deletes the key A holds. Judged from the lock key alone (no counter):
 * A's EXPIRE, which completes its acquisition, does not end its hold. */
static void test_l1_incr2_double_incr_is_caught(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    replay r;
    replay_row_with("double-incr.race", "L1-INCR2", 0, &r);
    expect_caught(&r, "deleted", "B deleted A's lock while A holds it");
    assert_non_null(strstr(trace_of(&r), "A acquired (INCR replied 1)"));
    assert_non_null(strstr(trace_of(&r), "B -> INCR " KEY "\n  B <- :3"));
    lbt_lines_free(&r.lines);
}

/* R and L4 take a crashed holder's lock over, and hold it. */
static void test_r_and_l4_pass_crash_and_takeover(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    static const char *const lockers[] = {"R", "L4"};
    for (int i = 0; i < 2; i++) {
        replay r;
        replay_row("crash-and-takeover.race", lockers[i], &r);
        expect_passed(&r);
        assert_non_null(strstr(trace_of(&r), "[A!] A is frozen"));
        assert_non_null(strstr(trace_of(&r), "B acquired (GETSET returned the value its GET saw)"));
        lbt_lines_free(&r.lines);
    }
}

/* Does the trace have `want`? Reports the trace when not. */
static void expect_trace(const replay *r, const char *want) {
    if (!strstr(trace_of(r), want)) fail_msg("expected '%s' in the trace:\n%s", want, trace_of(r));
}

/* Two GETSET racers for one expired lock: only the one whose GETSET returned
 * the expired value holds; the loser's later expiry is noted, not counted. */
static void test_two_racers_one_takeover_passes(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    replay r;
    replay_row("two-racers.race", "L4", &r);
    expect_passed(&r);
    expect_trace(&r, "B acquired (GETSET returned the value its GET saw)");
    expect_trace(&r, "note: C replaced B's value with an equal or later expiry");
    assert_null(strstr(trace_of(&r), "C acquired"));
    lbt_lines_free(&r.lines);
}

/* A pause between GET and GETSET: B's GETSET, computed before the pause,
 * writes an earlier expiry over C's fresh lock. The limit of every GETSET
 * protocol, lockbridge's wire variant included. */
static void test_a_pause_between_get_and_getset_shortens_a_fresh_lock(void **state) {
    (void)state;
    static const char *const lockers[] = {"lockbridge-hold", "L1"};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && skip_without_java()) skip();
        replay r;
        replay_row("pause-in-takeover.race", lockers[i], &r);
        expect_caught(&r, "overwritten", "B overwrote C's lock while C holds it (GETSET)");
        expect_trace(&r, "C acquired (GETSET returned the value its GET saw)");
        lbt_lines_free(&r.lines);
    }
}

/* A pause between a release's GET and its DEL: the compare was right when it
 * was made, and the DEL deletes the lock B took over meanwhile. */
static void test_a_pause_between_get_and_del_deletes_the_takers_lock(void **state) {
    (void)state;
    static const char *const lockers[] = {"lockbridge-hold", "L3"};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && skip_without_java()) skip();
        replay r;
        replay_row("pause-in-release.race", lockers[i], &r);
        expect_caught(&r, "deleted", "A deleted B's lock while B holds it (DEL)");
        expect_trace(&r, "B acquired (GETSET returned the value its GET saw)");
        lbt_lines_free(&r.lines);
    }
}

/* A release whose GET comes back after the pause with its own, expired,
 * value: L3 compares the value only and deletes B's lock; lockbridge's wire
 * release refuses within its margin, sends no DEL, and its next attempt finds
 * B's lock. */
static void test_release_racing_a_takeover(void **state) {
    (void)state;
    replay r;
    replay_row("release-racing-takeover.race", "lockbridge-hold", &r);
    expect_passed(&r);
    /* A's GET came back with its own expired value; no DEL followed, and its
     * next attempt found B's lock. */
    expect_trace(&r, "B acquired (GETSET returned the value its GET saw)\n[A:SETNX]\n");
    assert_null(strstr(trace_of(&r), "A -> DEL"));
    lbt_lines_free(&r.lines);
    if (skip_without_java()) skip();
    replay_row("release-racing-takeover.race", "L3", &r);
    expect_caught(&r, "deleted", "A deleted B's lock while B holds it (DEL)");
    lbt_lines_free(&r.lines);
}

/* L1 (10 s) and lockbridge's wire client (1 s) race for an expired lock; L1
 * wins. The loser's overwrite ends 9 s before L1's lock unless the wire
 * takeover writes the fleet's longest validity (--fleet-max-ttl-ms). */
static void test_a_takeover_race_between_different_validities(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    const char *const fleet[4] = {"L1", "L1-10s", "lockbridge-hold", "L1"};
    replay r;
    replay_fleet("mixed-validities.race", "L1+L1-10s+lockbridge-hold", fleet, 1, &r);
    expect_caught(&r, "overwritten", "C overwrote B's lock while B holds it (GETSET)");
    lbt_lines_free(&r.lines);
    const char *const fixed[4] = {"L1", "L1-10s", "lockbridge-hold-fleet-max", "L1"};
    replay_fleet("mixed-validities.race", "L1+L1-10s+lockbridge-hold-fleet-max", fixed, 1, &r);
    expect_passed(&r);
    expect_trace(&r, "note: C replaced B's value with an equal or later expiry");
    lbt_lines_free(&r.lines);
}

/* R's live seconds read as milliseconds: L1 takes over a lock of 1970 that
 * A holds; lockbridge finds the value outside its plausible window and
 * leaves it. */
static void test_a_codec_mismatch(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    const char *const l1[4] = {"R", "L1", "L1", "L1"};
    replay r;
    replay_fleet("codec-mismatch.race", "R+L1", l1, 1, &r);
    expect_caught(&r, "exclusion",
                  "B acquired (GETSET returned the value its GET saw) while A holds the lock");
    lbt_lines_free(&r.lines);
    const char *const lb[4] = {"R", "lockbridge-hold", "lockbridge-hold", "lockbridge-hold"};
    replay_fleet("codec-mismatch.race", "R+lockbridge-hold", lb, 1, &r);
    expect_passed(&r);
    assert_null(strstr(trace_of(&r), "B -> GETSET"));
    lbt_lines_free(&r.lines);
}

/* A token lock beside legacy clients: L1's catch-all DEL deletes lockbridge's
 * live token lock; L3 takes M1's JSON token over (no expiry field: expired);
 * lockbridge's legacy client leaves the token alone until its TTL ends. */
static void test_a_token_lock_beside_legacy_clients(void **state) {
    (void)state;
    const char *const lb[4] = {"lb-modern", "lockbridge-hold", "lockbridge-hold",
                               "lockbridge-hold"};
    replay r;
    replay_fleet("token-beside-legacy.race", "lb-modern+lockbridge-hold", lb, 1, &r);
    expect_passed(&r);
    expect_trace(&r, "B acquired (SETNX replied 1)");
    lbt_lines_free(&r.lines);
    if (skip_without_java()) skip();
    const char *const l1[4] = {"lb-modern", "L1", "L1", "L1"};
    replay_fleet("token-beside-legacy.race", "lb-modern+L1", l1, 1, &r);
    expect_caught(&r, "deleted", "B deleted A's lock while A holds it (DEL)");
    lbt_lines_free(&r.lines);
    const char *const l3[4] = {"M1", "L3", "L3", "L3"};
    replay_fleet("token-beside-legacy.race", "M1+L3", l3, 1, &r);
    expect_caught(&r, "overwritten", "B overwrote A's lock while A holds it (GETSET)");
    expect_trace(&r, "B <- \"{\"uid\":");
    lbt_lines_free(&r.lines);
}

/* Token locks in the catalogue's races: Redis expires a crashed holder's key;
 * a release script held through the pause deletes only its own token, so
 * the SET NX that follows it fails while B holds. (The token lock's attempt
 * is SET NX PX GET: nil means written.) */
static void test_token_locks_pass_the_same_races(void **state) {
    (void)state;
    const char *const fleet[4] = {"lb-modern", "lb-modern", "lb-modern", "lb-modern"};
    replay r;
    replay_fleet("modern-crash.race", "lb-modern", fleet, 1, &r);
    expect_passed(&r);
    expect_trace(&r, "[+3.1T] 930 ms: nobody's lock command goes through\n[B:SET]\n  B -> SET " KEY);
    expect_trace(&r, "B acquired (SET NX GET replied nil)");
    lbt_lines_free(&r.lines);
    replay_fleet("modern-late-release.race", "lb-modern", fleet, 1, &r);
    expect_passed(&r);
    expect_trace(&r, "B acquired (SET NX GET replied nil)");
    expect_trace(&r, "[C:SET]\n  C -> SET " KEY);
    /* Refused, the SET NX GET answers the holder's token. */
    expect_trace(&r, "  C <- \"");
    lbt_lines_free(&r.lines);
}

/* lockbridge's own tool through the whole shipped catalogue: every row that
 * applies to it followed to its end with nothing caught, but the two pauses
 * inside a wire operation, which no GETSET protocol survives and which are
 * caught as expected; the others skipped. The JUnit report says the same. */
static void test_lockbridge_hold_passes_the_catalogue(void **state) {
    (void)state;
    char line[1024], clients[4][1100], junit[] = "/tmp/lb-race-junit-XXXXXX";
    lbt_client_line(java_cp, "lockbridge-hold", SHORT_TTL_MS, line, sizeof line);
    for (int i = 0; i < 4; i++) snprintf(clients[i], sizeof clients[i], "%c=%s", 'A' + i, line);
    close(mkstemp(junit));
    const char *args[] = {"-p", port, "race", "--catalogue", CATALOGUE, "--locker",
                          "lockbridge-hold", "--key", KEY, "--ttl-ms", "300", "--json",
                          "--junit", junit, "--client", clients[0], "--client", clients[1],
                          "--client", clients[2], "--client", clients[3], NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 0);
    cJSON *res[32];
    int n = lbt_results_of(&p, res, 32), passed = 0, caught = 0, skipped = 0;
    assert_int_equal(n, 16);
    for (int i = 0; i < n; i++) {
        const char *v = lbt_str_of(res[i], "verdict");
        printf("  %-22s lockbridge-hold  %s\n", lbt_str_of(res[i], "race"), v);
        assert_true(lbt_bool_of(res[i], "ok"));
        if (strcmp(v, "skipped") == 0) {
            skipped++;
        } else if (strncmp(lbt_str_of(res[i], "race"), "pause-in-", 9) == 0) {
            assert_string_equal(v, "caught");
            caught++;
        } else {
            assert_string_equal(v, "passed");
            assert_int_equal((int)lbt_num_of(res[i], "followed"),
                             (int)lbt_num_of(res[i], "tokens"));
            assert_non_null(strstr(lbt_str_of(res[i], "trace"), "acquired"));
            passed++;
        }
        cJSON_Delete(res[i]);
    }
    assert_int_equal(passed, 5);
    assert_int_equal(caught, 2);
    assert_int_equal(skipped, 9);
    const char *x = lbt_read_file(junit);
    assert_non_null(strstr(x, "<testsuite name=\"lockbridge race\" tests=\"16\" failures=\"0\" "
                              "errors=\"0\" skipped=\"9\" time=\""));
    assert_non_null(strstr(x, "<testcase classname=\"lockbridge.race.lockbridge-hold\" "
                              "name=\"crash-and-takeover\""));
    assert_null(strstr(x, "<failure"));
    unlink(junit);
}

/* The shipped catalogue, as it is, against L1 with a client library's default
 * 2 s read timeout: its pauses are multiples of the validity, so a short
 * validity (300 ms) keeps every held command well inside the timeout, and
 * every row meets its expectation. */
static void test_the_catalogue_runs_as_shipped_on_a_2s_read_timeout(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    char clients[4][1100];
    for (int i = 0; i < 4; i++)
        snprintf(clients[i], sizeof clients[i],
                 "%c=exec java -XX:+UseSerialGC -cp %s LegacyLockers contend --kind L1 --key " KEY
                 " --counter-key " COUNTER " --port {port} --clients 1 --seconds 120 "
                 "--timeout-ms 300 --read-timeout-ms 2000",
                 'A' + i, java_cp);
    const char *args[] = {"-p", port, "race", "--catalogue", CATALOGUE, "--locker", "L1",
                          "--key", KEY, "--counter-key", COUNTER, "--ttl-ms", "300", "--json",
                          "--client", clients[0], "--client", clients[1], "--client", clients[2],
                          "--client", clients[3], NULL};
    lbt_proc p;
    int code = lbt_run(&p, args);
    cJSON *res[32];
    int n = lbt_results_of(&p, res, 32), ran = 0;
    assert_int_equal(n, 16);
    for (int i = 0; i < n; i++) {
        printf("  %-24s L1  %s\n", lbt_str_of(res[i], "race"), lbt_str_of(res[i], "verdict"));
        if (!lbt_bool_of(res[i], "ok"))
            fail_msg("%s: %s (expected %s)", lbt_str_of(res[i], "race"),
                     lbt_str_of(res[i], "detail"), lbt_str_of(res[i], "expected"));
        ran += strcmp(lbt_str_of(res[i], "verdict"), "skipped") != 0;
        if (strcmp(lbt_str_of(res[i], "race"), "crash-and-takeover") == 0)
            assert_non_null(strstr(lbt_str_of(res[i], "trace"), "[+3.1T] 930 ms: "));
        cJSON_Delete(res[i]);
    }
    assert_int_equal(ran, 6);
    assert_int_equal(code, 0);
}

/* A! with --kill-crashed ends A's process; the takeover still follows. */
static void test_a_crashed_client_can_be_killed(void **state) {
    (void)state;
    char line[1024], ca[1100], cb[1100];
    lbt_client_line(java_cp, "lockbridge-hold", SHORT_TTL_MS, line, sizeof line);
    snprintf(ca, sizeof ca, "A=%s", line);
    snprintf(cb, sizeof cb, "B=%s", line);
    const char *args[] = {"-p", port, "race", "--file", CATALOGUE "/crash-and-takeover.race",
                          "--key", KEY, "--ttl-ms", "300", "--kill-crashed", "--json",
                          "--client", ca, "--client", cb, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 0);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "passed");
    assert_non_null(strstr(lbt_str_of(res[0], "trace"), "A's process killed"));
    cJSON_Delete(res[0]);
}

/* A schedule the clients do not follow is never a pass, and fails the run. */
static void test_a_schedule_not_followed_fails_the_run(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    char line[1024], ca[1100];
    lbt_client_line(java_cp, "L1", SHORT_TTL_MS, line, sizeof line);
    snprintf(ca, sizeof ca, "A=%s", line);
    /* L1 acquires with SETNX, and its owner's release is a DEL, not a GET. */
    char junit[] = "/tmp/lb-race-junit-XXXXXX";
    close(mkstemp(junit));
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX A:GET", "--key", KEY,
                          "--counter-key", COUNTER, "--json", "--junit", junit,
                          "--client", ca, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 6);
    assert_non_null(strstr(lbt_read_file(junit), "<failure message=\"not_followed (expected pass): "
                                             "A sent DEL, not GET\"/>"));
    unlink(junit);
    lbt_lines lines;
    lbt_parse(&p, &lines);
    const cJSON *res = lines.line[lines.n - 1];
    assert_string_equal(lbt_str_of(res, "verdict"), "not_followed");
    assert_string_equal(lbt_str_of(res, "detail"), "A sent DEL, not GET");
    assert_int_equal((int)lbt_num_of(res, "followed"), 1);
    assert_false(lbt_bool_of(res, "ok"));
    lbt_lines_free(&lines);
}

/* ---- The test as a client -------------------------------------------------------------- */
/* Two clients inside their critical sections at once: A enters (its counter
 * GET) and stays; once A's validity (--ttl-ms) has passed B deletes A's key,
 * acquires, and enters too. */
static void test_two_critical_sections_at_once_are_caught(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX +100 B:DEL B:SETNX +300",
                          "--key", KEY, "--counter-key", COUNTER, "--ttl-ms", "50", "--json",
                          "--start-timeout-ms", "10000", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 2);
    redisContext *a = lbt_client_conn(lbt_port_of(&p, 'A')), *b = lbt_client_conn(lbt_port_of(&p, 'B'));
    lbt_send_cmd(a, "SETNX %s 1", KEY);
    lbt_send_cmd(b, "DEL %s", KEY);
    lbt_send_cmd(b, "SETNX %s 2", KEY);
    lbt_expect_reply_int(a, 1);
    lbt_send_cmd(a, "GET %s", COUNTER);
    lbt_expect_reply_any(a);
    lbt_expect_reply_int(b, 1);
    lbt_expect_reply_int(b, 1);
    lbt_send_cmd(b, "GET %s", COUNTER);
    lbt_expect_reply_any(b);
    assert_int_equal(lbt_finish(&p), 6);
    lbt_lines lines;
    lbt_parse(&p, &lines);
    const cJSON *res = lines.line[lines.n - 1];
    assert_string_equal(lbt_str_of(res, "verdict"), "caught");
    assert_string_equal(lbt_str_of(res, "kind"), "overlap");
    assert_string_equal(lbt_str_of(res, "detail"),
                        "B entered its critical section while A is inside its own");
    lbt_lines_free(&lines);
    redisFree(a);
    redisFree(b);
}

/* A critical section run on another connection of the client (a pool) is the
 * client's: A locks on one connection and enters on a second; B, once A's
 * validity has passed, deletes, acquires and enters too. */
static void test_a_critical_section_on_another_connection_is_checked(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX +100 B:DEL B:SETNX +300",
                          "--key", KEY, "--counter-key", COUNTER, "--ttl-ms", "50", "--json",
                          "--start-timeout-ms", "10000", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 2);
    redisContext *a = lbt_client_conn(lbt_port_of(&p, 'A')), *b = lbt_client_conn(lbt_port_of(&p, 'B'));
    lbt_send_cmd(a, "SETNX %s 1", KEY);
    lbt_send_cmd(b, "DEL %s", KEY);
    lbt_send_cmd(b, "SETNX %s 2", KEY);
    lbt_expect_reply_int(a, 1);
    redisContext *pooled = lbt_client_conn(lbt_port_of(&p, 'A'));
    lbt_send_cmd(pooled, "GET %s", COUNTER);
    lbt_expect_reply_any(pooled);
    lbt_expect_reply_int(b, 1);
    lbt_expect_reply_int(b, 1);
    lbt_send_cmd(b, "GET %s", COUNTER);
    lbt_expect_reply_any(b);
    assert_int_equal(lbt_finish(&p), 6);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "kind"), "overlap");
    assert_string_equal(lbt_str_of(res[0], "detail"),
                        "B entered its critical section while A is inside its own");
    cJSON_Delete(res[0]);
    redisFree(pooled);
    redisFree(a);
    redisFree(b);
}

/* A --counter-key no client reads after its lock commands: the trace and a
 * warning say the two checks that need it saw nothing. */
static void test_a_counter_key_never_used_is_warned_about(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX", "--key", KEY,
                          "--counter-key", "race:countre", "--json", "--start-timeout-ms",
                          "10000", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 1);
    redisContext *a = lbt_client_conn(lbt_port_of(&p, 'A'));
    lbt_send_cmd(a, "SETNX %s 1", KEY);
    lbt_expect_reply_int(a, 1);
    lbt_send_cmd(a, "GET %s", COUNTER);
    lbt_expect_reply_any(a);
    assert_int_equal(lbt_finish(&p), 0);
    lbt_expect_in(p.out, "note: no critical section seen on race:countre");
    lbt_expect_in(p.err, "warning: --counter-key race:countre: no critical section seen in any row");
    redisFree(a);
}

/* A takeover whose GETSET writes an expiry no later than the expired one it
 * replaced (already past, by the taker's own judgement): anyone may take the
 * lock at once. */
static void test_a_takeover_writing_a_past_expiry_is_caught(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX A:GET A:GETSET", "--key",
                          KEY, "--json", "--start-timeout-ms", "10000", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 1);
    redisContext *a = lbt_client_conn(lbt_port_of(&p, 'A'));
    lbt_send_cmd(a, "SETNX %s 1000000000000", KEY); /* 2001 */
    lbt_expect_reply_int(a, 1);
    lbt_send_cmd(a, "GET %s", KEY);
    lbt_expect_reply_any(a);
    lbt_send_cmd(a, "GETSET %s 999999995000", KEY); /* five seconds earlier */
    lbt_expect_reply_any(a);
    assert_int_equal(lbt_finish(&p), 6);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "kind"), "expired-write");
    assert_string_equal(lbt_str_of(res[0], "detail"),
                        "A took the lock over writing an expiry no later than the expired one "
                        "it replaced (GETSET " KEY " 999999995000): already past, anyone may "
                        "take it at once");
    cJSON_Delete(res[0]);
    redisFree(a);
}

/* A:release lets through whatever the client's release sends (here GET, GET,
 * DEL) and stops at its next acquisition attempt, which the next step takes. */
static void test_a_release_step_takes_the_clients_whole_release(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX A:release A:SETNX", "--key",
                          KEY, "--json", "--start-timeout-ms", "10000", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 1);
    redisContext *a = lbt_client_conn(lbt_port_of(&p, 'A'));
    lbt_send_cmd(a, "SETNX %s 1", KEY);
    lbt_expect_reply_int(a, 1);
    lbt_send_cmd(a, "GET %s", KEY);
    lbt_send_cmd(a, "GET %s", KEY);
    lbt_send_cmd(a, "DEL %s", KEY);
    lbt_send_cmd(a, "SETNX %s 2", KEY);
    lbt_expect_reply_any(a);
    lbt_expect_reply_any(a);
    lbt_expect_reply_int(a, 1);
    lbt_expect_reply_int(a, 1);
    assert_int_equal(lbt_finish(&p), 0);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "passed");
    lbt_expect_in(lbt_str_of(res[0], "trace"),
              "[A:release]\n  A -> GET " KEY "\n  A <- \"1\"\n  A -> GET " KEY "\n  A <- \"1\"\n"
              "  A -> DEL " KEY "\n  A <- :1\n[A:SETNX]\n");
    cJSON_Delete(res[0]);
    redisFree(a);
}

/* The other tokens: A (any command), A:- (a step that sends nothing only
 * settles), B. (B steps until it holds or goes quiet), and A~N, which a real
 * process cannot be given: not followed. */
static void test_bare_finish_and_skew_tokens(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A A:- B.", "--key", KEY, "--json",
                          "--start-timeout-ms", "10000", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 2);
    redisContext *a = lbt_client_conn(lbt_port_of(&p, 'A')), *b = lbt_client_conn(lbt_port_of(&p, 'B'));
    lbt_send_cmd(a, "SETNX %s 1", KEY);
    lbt_send_cmd(b, "GET %s", KEY);
    lbt_send_cmd(b, "SETNX %s 2", KEY);
    lbt_expect_reply_int(a, 1);
    lbt_expect_reply_any(b);
    lbt_expect_reply_int(b, 0);
    assert_int_equal(lbt_finish(&p), 0);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "passed");
    assert_int_equal((int)lbt_num_of(res[0], "followed"), 3);
    /* B. let both of B's commands through, then B went quiet without holding. */
    const char *t = lbt_str_of(res[0], "trace");
    assert_non_null(strstr(t, "[B.]\n  B -> GET " KEY "\n  B <- \"1\"\n  B -> SETNX " KEY " 2\n"
                              "  B <- :0\n"));
    cJSON_Delete(res[0]);
    redisFree(a);
    redisFree(b);

    const char *skew[] = {"-p", port, "race", "--schedule", "A~100", "--key", KEY, "--json",
                          "--start-timeout-ms", "10000", NULL};
    lbt_spawn(&p, skew);
    lbt_wait_lines(&p, 1);
    a = lbt_client_conn(lbt_port_of(&p, 'A'));
    lbt_send_cmd(a, "SETNX %s 1", KEY);
    assert_int_equal(lbt_finish(&p), 6);
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "not_followed");
    assert_non_null(strstr(lbt_str_of(res[0], "detail"), "clock cannot be moved"));
    cJSON_Delete(res[0]);
    redisFree(a);
}

/* --ttl-ms NAME=N: a client of a fleet with a longer validity than the
 * others holds that long. A holds for 10 s although the fleet's validity is
 * 100 ms, so B's DEL after the pause deletes a lock A still holds. */
static void test_a_clients_own_validity_counts_for_its_hold(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX +3T B:DEL", "--key", KEY,
                          "--ttl-ms", "100", "--ttl-ms", "A=10000", "--json",
                          "--start-timeout-ms", "10000", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 2);
    redisContext *a = lbt_client_conn(lbt_port_of(&p, 'A')), *b = lbt_client_conn(lbt_port_of(&p, 'B'));
    lbt_send_cmd(a, "SETNX %s 1", KEY);
    lbt_send_cmd(b, "DEL %s", KEY);
    lbt_expect_reply_int(a, 1);
    lbt_expect_reply_int(b, 1);
    assert_int_equal(lbt_finish(&p), 6);
    cJSON *res[2];
    assert_int_equal(lbt_results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "detail"), "B deleted A's lock while A holds it (DEL)");
    /* T is the fleet's validity: 3T is 300 ms. */
    assert_non_null(strstr(lbt_str_of(res[0], "trace"), "[+3T] 300 ms: "));
    cJSON_Delete(res[0]);
    redisFree(a);
    redisFree(b);
}

/* The expiry a value states, as the proxy reads it to tell a legacy GETSET
 * loser's later expiry (no double grant) from an overwrite: timestamps bare
 * or in JSON, never digits inside a string. M1's uuid used to be read as a
 * number ("5e12abcd..." as 5e12), so the same schedule gave either verdict. */
static void test_the_proxy_reads_an_expiry_only_from_a_timestamp(void **state) {
    (void)state;
    static const struct {
        const char *value;
        int ok;
        double expiry;
    } cases[] = {
        {"1732500000000", 0, 1732500000000.0},
        {"1732500000.25", 0, 1732500000.25},
        {"{\"expiryTime\":123456789012}", 0, 123456789012.0},
        {"{\"expiryTime\": 42}", 0, 42.0},
        {"{\"uid\":\"5e12abcd-0000-4000-8000-000000000000\"}", -1, 0},
        {"{\"uid\":\"12345678-0000-4000-8000-000000000000\"}", -1, 0},
        {"{\"uid\":\"abcd1234-5678-4000-8000-000000000000\"}", -1, 0},
        {"5e12", -1, 0},
        {"12abc", -1, 0},
        {"0123456789abcdef0123456789abcdef", -1, 0},
        {"{\"x\":\"123\"}", -1, 0},
        {"1.2.3", -1, 0},
        {"", -1, 0},
        {"no digits", -1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = -1;
        int rc = lb__race_value_expiry(cases[i].value, strlen(cases[i].value), &got);
        if (rc != cases[i].ok) fail_msg("%s: %d, expected %d", cases[i].value, rc, cases[i].ok);
        if (rc == 0 && got != cases[i].expiry) fail_msg("%s: %f", cases[i].value, got);
    }
}

static int setup(void **state) {
    (void)state;
    if (lbt_tool_init("test_race_replay") != 0) return -1;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    snprintf(port, sizeof port, "%d", server.port);
    const char *build = getenv("BUILD");
    char cls[600];
    snprintf(java_cp, sizeof java_cp, "%s/java", build && *build ? build : "build");
    snprintf(cls, sizeof cls, "%s/LegacyLockers.class", java_cp);
    have_java = system("java -version >/dev/null 2>&1") == 0 && access(cls, R_OK) == 0;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_proxy_reads_an_expiry_only_from_a_timestamp),
        cmocka_unit_test(test_l1_catch_all_del_is_caught_by_the_nil_get_schedule),
        cmocka_unit_test(test_l4_nil_getset_leaves_a_lock_nobody_can_take),
        cmocka_unit_test(test_l3_overwritten_timestamp_is_caught),
        cmocka_unit_test(test_l1_incr2_double_incr_is_caught),
        cmocka_unit_test(test_r_and_l4_pass_crash_and_takeover),
        cmocka_unit_test(test_two_racers_one_takeover_passes),
        cmocka_unit_test(test_a_pause_between_get_and_getset_shortens_a_fresh_lock),
        cmocka_unit_test(test_a_pause_between_get_and_del_deletes_the_takers_lock),
        cmocka_unit_test(test_release_racing_a_takeover),
        cmocka_unit_test(test_a_takeover_race_between_different_validities),
        cmocka_unit_test(test_a_codec_mismatch),
        cmocka_unit_test(test_a_token_lock_beside_legacy_clients),
        cmocka_unit_test(test_token_locks_pass_the_same_races),
        cmocka_unit_test(test_lockbridge_hold_passes_the_catalogue),
        cmocka_unit_test(test_the_catalogue_runs_as_shipped_on_a_2s_read_timeout),
        cmocka_unit_test(test_a_crashed_client_can_be_killed),
        cmocka_unit_test(test_a_schedule_not_followed_fails_the_run),
        cmocka_unit_test(test_two_critical_sections_at_once_are_caught),
        cmocka_unit_test(test_a_critical_section_on_another_connection_is_checked),
        cmocka_unit_test(test_a_counter_key_never_used_is_warned_about),
        cmocka_unit_test(test_a_takeover_writing_a_past_expiry_is_caught),
        cmocka_unit_test(test_a_release_step_takes_the_clients_whole_release),
        cmocka_unit_test(test_bare_finish_and_skew_tokens),
        cmocka_unit_test(test_a_clients_own_validity_counts_for_its_hold),
    };
    /* RACE_TEST_FILTER="*pattern*" runs only the matching tests. */
    if (getenv("RACE_TEST_FILTER")) cmocka_set_test_filter(getenv("RACE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
