/* `lockbridge race` against real processes: the project's Java lockers and the
 * lockbridge tool itself replay the shipped catalogue's schedules through the
 * proxy in front of a real redis-server; a client played by the test checks
 * the proxy's own checks and its handling of malformed input. */
#include <arpa/inet.h>
#include <dirent.h>
#include <signal.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "harness/proc.h"
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

/* One client command line per locker kind, with validity `ttl` ms (L3's unit
 * makes 1000 of its own one millisecond), shorter than the Java client's 5 s
 * read timeout. The mixed-fleet rows also use "L1-10s" (L1 with a 10 s
 * validity), "lockbridge-hold-fleet-max" (a wire takeover writes now + 10 s)
 * and "lb-modern" (the token lock). */
static void client_line(const char *locker, int ttl, char *out, size_t cap) {
    char mode[128];
    snprintf(mode, sizeof mode, "--release-margin-ms %d", ttl / 5);
    if (strcmp(locker, "lockbridge-hold-fleet-max") == 0)
        snprintf(mode, sizeof mode, "--release-margin-ms %d --fleet-max-ttl-ms 10000", ttl / 5);
    else if (strcmp(locker, "lb-modern") == 0)
        snprintf(mode, sizeof mode, "--mode modern");
    else if (strcmp(locker, "lockbridge-hold") != 0)
        mode[0] = '\0';
    if (mode[0]) {
        snprintf(out, cap,
                 "while :; do %s hold " KEY " -p {port} --ttl-ms %d %s "
                 "--wait-ms 60000 --hold-ms 0 >/dev/null 2>&1; done",
                 lbt_tool(), ttl, mode);
        return;
    }
    long long timeout = strcmp(locker, "L3") == 0 ? ttl * 1000LL : ttl;
    if (strcmp(locker, "L1-10s") == 0) locker = "L1", timeout = 10000;
    snprintf(out, cap,
             "exec java -XX:+UseSerialGC -cp %s LegacyLockers contend --kind %s --key " KEY
             " --counter-key " COUNTER " --port {port} --clients 1 --seconds 120 "
             "--timeout-ms %lld",
             java_cp, locker, timeout);
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
        client_line(fleet[i], t, line, sizeof line);
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
 * the SET NX that follows it fails while B holds. */
static void test_token_locks_pass_the_same_races(void **state) {
    (void)state;
    const char *const fleet[4] = {"lb-modern", "lb-modern", "lb-modern", "lb-modern"};
    replay r;
    replay_fleet("modern-crash.race", "lb-modern", fleet, 1, &r);
    expect_passed(&r);
    expect_trace(&r, "[+3.1T] 930 ms: nobody's lock command goes through\n[B:SET]\n  B -> SET " KEY);
    expect_trace(&r, "B acquired (SET NX replied OK)");
    lbt_lines_free(&r.lines);
    replay_fleet("modern-late-release.race", "lb-modern", fleet, 1, &r);
    expect_passed(&r);
    expect_trace(&r, "B acquired (SET NX replied OK)");
    expect_trace(&r, "[C:SET]\n  C -> SET " KEY);
    expect_trace(&r, "  C <- nil");
    lbt_lines_free(&r.lines);
}

/* Every line of the tool's output that is a race_result, in order. */
static int results_of(const lbt_proc *p, cJSON **out, int cap) {
    char copy[sizeof p->out];
    int n = 0;
    memcpy(copy, p->out, p->outlen + 1);
    char *save = NULL;
    for (char *s = strtok_r(copy, "\n", &save); s; s = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(s);
        if (!o) fail_msg("not JSON: %s", s);
        if (strcmp(lbt_str_of(o, "event"), "race_result") == 0 && n < cap) out[n++] = o;
        else cJSON_Delete(o);
    }
    return n;
}

static char *read_file(const char *path) {
    static char buf[65536];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* lockbridge's own tool through the whole shipped catalogue: every row that
 * applies to it followed to its end with nothing caught, but the two pauses
 * inside a wire operation, which no GETSET protocol survives and which are
 * caught as expected; the others skipped. The JUnit report says the same. */
static void test_lockbridge_hold_passes_the_catalogue(void **state) {
    (void)state;
    char line[1024], clients[4][1100], junit[] = "/tmp/lb-race-junit-XXXXXX";
    client_line("lockbridge-hold", SHORT_TTL_MS, line, sizeof line);
    for (int i = 0; i < 4; i++) snprintf(clients[i], sizeof clients[i], "%c=%s", 'A' + i, line);
    close(mkstemp(junit));
    const char *args[] = {"-p", port, "race", "--catalogue", CATALOGUE, "--locker",
                          "lockbridge-hold", "--key", KEY, "--ttl-ms", "300", "--json",
                          "--junit", junit, "--client", clients[0], "--client", clients[1],
                          "--client", clients[2], "--client", clients[3], NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 0);
    cJSON *res[32];
    int n = results_of(&p, res, 32), passed = 0, caught = 0, skipped = 0;
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
    const char *x = read_file(junit);
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
    int n = results_of(&p, res, 32), ran = 0;
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
    client_line("lockbridge-hold", SHORT_TTL_MS, line, sizeof line);
    snprintf(ca, sizeof ca, "A=%s", line);
    snprintf(cb, sizeof cb, "B=%s", line);
    const char *args[] = {"-p", port, "race", "--file", CATALOGUE "/crash-and-takeover.race",
                          "--key", KEY, "--ttl-ms", "300", "--kill-crashed", "--json",
                          "--client", ca, "--client", cb, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 0);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "passed");
    assert_non_null(strstr(lbt_str_of(res[0], "trace"), "A's process killed"));
    cJSON_Delete(res[0]);
}

/* A schedule the clients do not follow is never a pass, and fails the run. */
static void test_a_schedule_not_followed_fails_the_run(void **state) {
    (void)state;
    if (skip_without_java()) skip();
    char line[1024], ca[1100];
    client_line("L1", SHORT_TTL_MS, line, sizeof line);
    snprintf(ca, sizeof ca, "A=%s", line);
    /* L1 acquires with SETNX, and its owner's release is a DEL, not a GET. */
    char junit[] = "/tmp/lb-race-junit-XXXXXX";
    close(mkstemp(junit));
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX A:GET", "--key", KEY,
                          "--counter-key", COUNTER, "--json", "--junit", junit,
                          "--client", ca, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 6);
    assert_non_null(strstr(read_file(junit), "<failure message=\"not_followed (expected pass): "
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

/* The port the tool printed for `client`, from its race_port lines. */
static int port_of(const lbt_proc *p, char client) {
    char pat[48];
    snprintf(pat, sizeof pat, "\"client\":\"%c\",\"port\":", client);
    const char *s = strstr(p->out, pat);
    assert_non_null(s);
    return atoi(s + strlen(pat));
}

static redisContext *client_conn(int p) {
    redisContext *c = redisConnect("127.0.0.1", p);
    assert_non_null(c);
    assert_int_equal(c->err, 0);
    return c;
}

static void send_cmd(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    assert_int_equal(redisvAppendCommand(c, fmt, ap), REDIS_OK);
    va_end(ap);
    int done = 0;
    while (!done) assert_int_equal(redisBufferWrite(c, &done), REDIS_OK);
}

static void expect_reply_int(redisContext *c, long long want) {
    redisReply *r = NULL;
    if (redisGetReply(c, (void **)&r) != REDIS_OK) fail_msg("reply: %s", c->errstr);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, want);
    freeReplyObject(r);
}

static void expect_reply_any(redisContext *c) {
    redisReply *r = NULL;
    assert_int_equal(redisGetReply(c, (void **)&r), REDIS_OK);
    freeReplyObject(r);
}

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
    redisContext *a = client_conn(port_of(&p, 'A')), *b = client_conn(port_of(&p, 'B'));
    send_cmd(a, "SETNX %s 1", KEY);
    send_cmd(b, "DEL %s", KEY);
    send_cmd(b, "SETNX %s 2", KEY);
    expect_reply_int(a, 1);
    send_cmd(a, "GET %s", COUNTER);
    expect_reply_any(a);
    expect_reply_int(b, 1);
    expect_reply_int(b, 1);
    send_cmd(b, "GET %s", COUNTER);
    expect_reply_any(b);
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

static void expect_in(const char *text, const char *want);

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
    redisContext *a = client_conn(port_of(&p, 'A')), *b = client_conn(port_of(&p, 'B'));
    send_cmd(a, "SETNX %s 1", KEY);
    send_cmd(b, "DEL %s", KEY);
    send_cmd(b, "SETNX %s 2", KEY);
    expect_reply_int(a, 1);
    redisContext *pooled = client_conn(port_of(&p, 'A'));
    send_cmd(pooled, "GET %s", COUNTER);
    expect_reply_any(pooled);
    expect_reply_int(b, 1);
    expect_reply_int(b, 1);
    send_cmd(b, "GET %s", COUNTER);
    expect_reply_any(b);
    assert_int_equal(lbt_finish(&p), 6);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
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
    redisContext *a = client_conn(port_of(&p, 'A'));
    send_cmd(a, "SETNX %s 1", KEY);
    expect_reply_int(a, 1);
    send_cmd(a, "GET %s", COUNTER);
    expect_reply_any(a);
    assert_int_equal(lbt_finish(&p), 0);
    expect_in(p.out, "note: no critical section seen on race:countre");
    expect_in(p.err, "warning: --counter-key race:countre: no critical section seen in any row");
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
    redisContext *a = client_conn(port_of(&p, 'A'));
    send_cmd(a, "SETNX %s 1000000000000", KEY); /* 2001 */
    expect_reply_int(a, 1);
    send_cmd(a, "GET %s", KEY);
    expect_reply_any(a);
    send_cmd(a, "GETSET %s 999999995000", KEY); /* five seconds earlier */
    expect_reply_any(a);
    assert_int_equal(lbt_finish(&p), 6);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
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
    redisContext *a = client_conn(port_of(&p, 'A'));
    send_cmd(a, "SETNX %s 1", KEY);
    expect_reply_int(a, 1);
    send_cmd(a, "GET %s", KEY);
    send_cmd(a, "GET %s", KEY);
    send_cmd(a, "DEL %s", KEY);
    send_cmd(a, "SETNX %s 2", KEY);
    expect_reply_any(a);
    expect_reply_any(a);
    expect_reply_int(a, 1);
    expect_reply_int(a, 1);
    assert_int_equal(lbt_finish(&p), 0);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "passed");
    expect_in(lbt_str_of(res[0], "trace"),
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
    redisContext *a = client_conn(port_of(&p, 'A')), *b = client_conn(port_of(&p, 'B'));
    send_cmd(a, "SETNX %s 1", KEY);
    send_cmd(b, "GET %s", KEY);
    send_cmd(b, "SETNX %s 2", KEY);
    expect_reply_int(a, 1);
    expect_reply_any(b);
    expect_reply_int(b, 0);
    assert_int_equal(lbt_finish(&p), 0);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
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
    a = client_conn(port_of(&p, 'A'));
    send_cmd(a, "SETNX %s 1", KEY);
    assert_int_equal(lbt_finish(&p), 6);
    assert_int_equal(results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "not_followed");
    assert_non_null(strstr(lbt_str_of(res[0], "detail"), "clock cannot be moved"));
    cJSON_Delete(res[0]);
    redisFree(a);
}

/* ---- A schedule not followed names its cause -------------------------------------------- */

/* Runs `sched` with client A's command line `a_cmd` (NULL: none) and returns the
 * detail of the one race_result, which must be not followed. */
static const char *not_followed_detail(const char *sched, const char *a_cmd, const char *start_ms,
                                       lbt_proc *p) {
    char ca[1200];
    snprintf(ca, sizeof ca, "A=%s", a_cmd ? a_cmd : "");
    const char *args[] = {"-p", port, "race", "--schedule", sched, "--key", KEY, "--json",
                          "--start-timeout-ms", start_ms, "--step-timeout-ms", "1000",
                          "--client", ca, NULL};
    if (!a_cmd) args[sizeof args / sizeof args[0] - 3] = NULL;
    assert_int_equal(lbt_run(p, args), 6);
    const char *d = strstr(p->out, "\"verdict\":\"not_followed\"");
    assert_non_null(d);
    static char detail[1024];
    cJSON *res[2];
    assert_int_equal(results_of(p, res, 2), 1);
    snprintf(detail, sizeof detail, "%s", lbt_str_of(res[0], "detail"));
    cJSON_Delete(res[0]);
    printf("  %s\n", detail);
    return detail;
}

static void expect_in(const char *text, const char *want) {
    if (!strstr(text, want)) fail_msg("expected '%s' in: %s", want, text);
}

/* A client whose process ends (a classpath typo) is named at once with its
 * exit status and the last lines of its stderr, not after the start timeout. */
static void test_a_client_that_exits_is_named_with_its_status_and_stderr(void **state) {
    (void)state;
    lbt_proc p;
    const char *d = not_followed_detail(
        "A:SETNX", "echo 'Error: Could not find or load main class LegacyLockerz' >&2; exit 3",
        "600000", &p);
    assert_string_equal(d, "A's process exited with status 3; its stderr ends: Error: Could "
                           "not find or load main class LegacyLockerz");
}

/* A client that never connects to its port: the port is named. */
static void test_a_client_that_never_connects_is_named(void **state) {
    (void)state;
    lbt_proc p;
    const char *d = not_followed_detail("A:SETNX", "exec sleep 60", "300", &p);
    expect_in(d, "A never connected to its port ");
    expect_in(d, " within 300 ms of the start");
}

/* A client given the server's port instead of {port}: its connection is seen
 * on the server, and the detail says so. */
static void test_a_client_connected_straight_to_the_server_is_named(void **state) {
    (void)state;
    char line[1024];
    snprintf(line, sizeof line,
             "exec %s hold " KEY " -p %s --ttl-ms 60000 --hold-ms 60000 >/dev/null 2>&1",
             lbt_tool(), port);
    lbt_proc p;
    const char *d = not_followed_detail("A:SETNX", line, "1500", &p);
    expect_in(d, "A never connected to its port ");
    expect_in(d, "a client connected straight to the server? ({port} is its port)");
}

/* A client that only sends commands on other keys (a --key typo). */
static void test_a_client_on_other_keys_only_is_named(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX", "--key", KEY, "--json",
                          "--start-timeout-ms", "800", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 1);
    redisContext *a = client_conn(port_of(&p, 'A'));
    send_cmd(a, "SETNX %s 1", "race:lokc");
    expect_reply_int(a, 1);
    assert_int_equal(lbt_finish(&p), 6);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "detail"),
                        "A sent only commands on other keys than " KEY
                        " (1, the last: SETNX race:lokc 1)");
    cJSON_Delete(res[0]);
    redisFree(a);
}

/* A client that gives up on a command held at the proxy (its read timeout)
 * and closes its connection: the command and how long it was held. */
static void test_a_client_that_closes_a_held_command_is_named(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX A:GET B:SETNX", "--key", KEY,
                          "--json", "--start-timeout-ms", "10000", "--step-timeout-ms", "1000",
                          NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 2);
    redisContext *a = client_conn(port_of(&p, 'A')), *b = client_conn(port_of(&p, 'B'));
    send_cmd(b, "SETNX %s 2", KEY);
    send_cmd(a, "SETNX %s 1", KEY);
    expect_reply_int(a, 1);
    redisFree(b); /* B's SETNX is still held: A:GET comes first */
    send_cmd(a, "GET %s", KEY);
    expect_reply_any(a);
    assert_int_equal(lbt_finish(&p), 6);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
    const char *d = lbt_str_of(res[0], "detail");
    expect_in(d, "B closed its connection while its SETNX was held at the proxy (");
    expect_in(d, " ms): a read timeout shorter than the schedule's waits?");
    cJSON_Delete(res[0]);
    redisFree(a);
}

/* A schedule naming a client no --client starts is refused before anything
 * runs, naming the client and the file's line. */
static void test_a_schedule_naming_a_client_not_given_is_refused(void **state) {
    (void)state;
    char path[] = "/tmp/lb-race-XXXXXX";
    int fd = mkstemp(path);
    const char text[] = "# race: three clients\nA:SETNX B:SETNX\n[L9] A:SETNX C:SETNX\n";
    assert_true(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
    close(fd);
    const char *args[] = {"-p", port, "race", "--file", path, "--locker", "L9",
                          "--client", "A=exec sleep 60", "--client", "B=exec sleep 60", NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 1);
    char want[128];
    snprintf(want, sizeof want, "%s:3: the schedule names client C, given no --client", path);
    expect_in(p.err, want);
    unlink(path);
}

/* ---- Ending a run: signals and a lost server ---------------------------------------------- */

/* Processes whose command line has `mark` (other than this test). */
static int processes_with(const char *mark) {
    int n = 0;
    DIR *d = opendir("/proc");
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        char path[300], cmd[4096];
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == (int)getpid()) continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
        for (size_t i = 0; i < len; i++)
            if (!cmd[i]) cmd[i] = ' ';
        cmd[len] = '\0';
        if (strstr(cmd, mark)) n++;
    }
    closedir(d);
    return n;
}

static int entries_in(const char *dir) {
    int n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* SIGTERM (a CI job's timeout) mid-catalogue: the clients, the tool's own
 * redis-server and its folders are gone when it exits, and the JUnit report
 * has the rows done and the rest as errors. */
static void test_sigterm_stops_everything_and_writes_the_report(void **state) {
    (void)state;
    char tmp[] = "/tmp/lb-race-term-XXXXXX", junit[300], line[1024], cl[4][1100];
    assert_non_null(mkdtemp(tmp));
    snprintf(junit, sizeof junit, "%s.xml", tmp);
    /* The key names the run: every process of it has the folder's name. */
    snprintf(line, sizeof line,
             "while :; do %s hold %s:lock -p {port} --ttl-ms 300 --release-margin-ms 60 "
             "--wait-ms 60000 --hold-ms 0 >/dev/null 2>&1; done",
             lbt_tool(), tmp);
    for (int i = 0; i < 4; i++) snprintf(cl[i], sizeof cl[i], "%c=%s", 'A' + i, line);
    char key[300];
    snprintf(key, sizeof key, "%s:lock", tmp);
    const char *args[] = {"race", "--catalogue", CATALOGUE, "--locker", "lockbridge-hold",
                          "--key", key, "--ttl-ms", "300", "--json", "--junit", junit,
                          "--client", cl[0], "--client", cl[1], "--client", cl[2],
                          "--client", cl[3], NULL};
    setenv("TMPDIR", tmp, 1);
    lbt_proc p;
    lbt_spawn(&p, args);
    unsetenv("TMPDIR");
    lbt_wait_lines(&p, 4 + 2); /* the ports, a skipped row and one replayed */
    assert_true(processes_with(tmp) > 0);
    kill(p.pid, SIGTERM);
    assert_int_equal(lbt_finish(&p), 128 + SIGTERM);
    assert_int_equal(processes_with(tmp), 0);
    assert_int_equal(entries_in(tmp), 0);
    assert_non_null(strstr(p.err, "the run was stopped by signal 15"));
    const char *x = read_file(junit);
    assert_non_null(strstr(x, "<testsuite name=\"lockbridge race\" tests=\"16\" failures=\"0\" "));
    assert_non_null(strstr(x, "name=\"crash-and-takeover\""));
    assert_non_null(strstr(x, "<error message=\"not run: the run was stopped by signal 15\"/>"));
    assert_null(strstr(x, "<failure"));
    unlink(junit);
    rmdir(tmp);
}

/* The server lost in the middle of a schedule ends the run at once with
 * exit 4, the row an error, not a wait per row and exit 6. */
static void test_a_server_lost_mid_run_exits_4(void **state) {
    (void)state;
    lbt_redis lost;
    assert_int_equal(lbt_redis_start(&lost, NULL), 0);
    char lport[16];
    snprintf(lport, sizeof lport, "%d", lost.port);
    const char *args[] = {"-p", lport, "race", "--schedule", "A:SETNX +600000 A:DEL", "--key",
                          KEY, "--json", "--start-timeout-ms", "10000", NULL};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 1);
    redisContext *a = client_conn(port_of(&p, 'A'));
    send_cmd(a, "SETNX %s 1", KEY);
    expect_reply_int(a, 1);
    lbt_redis_kill(&lost);
    assert_int_equal(lbt_finish(&p), 4);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "error");
    assert_string_equal(lbt_str_of(res[0], "detail"), "the Redis server closed A's connection");
    assert_non_null(strstr(p.err, "the Redis server was lost during schedule"));
    cJSON_Delete(res[0]);
    redisFree(a);
    lbt_redis_stop(&lost);
}

/* ---- CI details ------------------------------------------------------------------------------ */

/* A loopback port free now (nothing keeps it free: the tests below only need
 * one that is likely so). */
static int a_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {0};
    socklen_t len = sizeof sa;
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* --ports LO-HI: every client's port is in the range. */
static void test_the_proxy_ports_come_from_the_range_given(void **state) {
    (void)state;
    int lo = a_free_port() / 2 + 16384; /* in 16384..49151, above most services */
    char range[32];
    snprintf(range, sizeof range, "%d-%d", lo, lo + 40);
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX B:SETNX C:SETNX", "--key",
                          KEY, "--json", "--ports", range, "--start-timeout-ms", "100", NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 6);
    for (char c = 'A'; c <= 'C'; c++) {
        int cp = port_of(&p, c);
        if (cp < lo || cp > lo + 40) fail_msg("client %c: port %d, not in %s", c, cp, range);
    }
}

/* The tool's own redis-server takes its port from the range too: with a range
 * of one port, nothing is left for the proxy, and the set-up failure is an
 * <error> of the JUnit report, which is written all the same. */
static void test_a_set_up_failure_is_a_junit_error(void **state) {
    (void)state;
    char range[32], junit[] = "/tmp/lb-race-junit-XXXXXX";
    int one = a_free_port();
    snprintf(range, sizeof range, "%d-%d", one, one);
    close(mkstemp(junit));
    const char *args[] = {"race", "--schedule", "A:SETNX", "--key", KEY, "--ports", range,
                          "--junit", junit, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 4);
    char want[200];
    snprintf(want, sizeof want,
             "<error message=\"not run: no free loopback port in %s for client A\"/>", range);
    const char *x = read_file(junit);
    if (!strstr(x, want)) fail_msg("expected '%s' in:\n%s", want, x);
    assert_non_null(strstr(x, "tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\""));
    /* A command line refused is reported too. */
    const char *bad[] = {"-p", port, "race", "--schedule", "A:SETNX +x", "--junit", junit, NULL};
    assert_int_equal(lbt_run(&p, bad), 1);
    assert_non_null(strstr(read_file(junit), "<testcase classname=\"lockbridge.race.client\" "
                                             "name=\"set-up\""));
    assert_non_null(strstr(read_file(junit), "errors=\"1\""));
    unlink(junit);
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
    redisContext *a = client_conn(port_of(&p, 'A')), *b = client_conn(port_of(&p, 'B'));
    send_cmd(a, "SETNX %s 1", KEY);
    send_cmd(b, "DEL %s", KEY);
    expect_reply_int(a, 1);
    expect_reply_int(b, 1);
    assert_int_equal(lbt_finish(&p), 6);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "detail"), "B deleted A's lock while A holds it (DEL)");
    /* T is the fleet's validity: 3T is 300 ms. */
    assert_non_null(strstr(lbt_str_of(res[0], "trace"), "[+3T] 300 ms: "));
    cJSON_Delete(res[0]);
    redisFree(a);
    redisFree(b);
}

/* --repeat: a row whose outcome changes between replays is flaky. B is built
 * to flap: every other run it deletes A's lock (caught) or only reads it
 * (passed); the same schedule replayed three times says so, and a steady row
 * replayed as often keeps its verdict. */
static void test_a_row_whose_outcome_changes_is_flaky(void **state) {
    (void)state;
    char dir[] = "/tmp/lb-race-flap-XXXXXX", ca[600], cb[1200], junit[300];
    assert_non_null(mkdtemp(dir));
    snprintf(junit, sizeof junit, "%s/report.xml", dir);
    snprintf(ca, sizeof ca, "A=redis-cli -p {port} SETNX " KEY " 1 >/dev/null && exec sleep 60");
    snprintf(cb, sizeof cb,
             "B=if [ -e %s/deleted ]; then rm %s/deleted; exec redis-cli -p {port} GET " KEY
             "; else : > %s/deleted; exec redis-cli -p {port} DEL " KEY "; fi",
             dir, dir, dir);
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX B", "--key", KEY,
                          "--repeat", "3", "--json", "--junit", junit, "--client", ca,
                          "--client", cb, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 6);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "flaky");
    assert_string_equal(lbt_str_of(res[0], "detail"),
                        "flaky over 3 runs: caught:deleted 2, passed 1");
    assert_int_equal((int)lbt_num_of(res[0], "runs"), 3);
    expect_in(lbt_str_of(res[0], "trace"), "--- run 1 of 3: caught:deleted ---\n");
    expect_in(lbt_str_of(res[0], "trace"), "--- run 2 of 3: passed ---\n");
    cJSON_Delete(res[0]);
    expect_in(read_file(junit), "<failure type=\"flaky\" message=\"expected pass: flaky over 3 "
                                "runs: caught:deleted 2, passed 1\"/>");
    unlink(junit);

    /* A steady client: the same verdict three times, not flaky. */
    snprintf(cb, sizeof cb, "B=exec redis-cli -p {port} DEL " KEY);
    args[sizeof args / sizeof args[0] - 2] = cb;
    assert_int_equal(lbt_run(&p, args), 6);
    assert_int_equal(results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "caught");
    assert_int_equal((int)lbt_num_of(res[0], "runs"), 3);
    cJSON_Delete(res[0]);
    unlink(junit);
    char state_file[300];
    snprintf(state_file, sizeof state_file, "%s/deleted", dir);
    unlink(state_file);
    rmdir(dir);
}

/* race record: a client's own sequence, printed as tokens, replays as written. */
static void test_a_recorded_sequence_replays_as_written(void **state) {
    (void)state;
    char line[1024], ca[1100];
    client_line("lockbridge-hold", SHORT_TTL_MS, line, sizeof line);
    snprintf(ca, sizeof ca, "A=%s", line);
    const char *rec[] = {"-p", port, "race", "record", "--key", KEY, "--record-steps", "5",
                         "--json", "--client", ca, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, rec), 0);
    const char *at = strstr(p.out, "\"event\":\"race_record\"");
    assert_non_null(at);
    lbt_lines lines;
    lbt_parse(&p, &lines);
    const cJSON *r = lines.line[lines.n - 1];
    char tokens[256];
    snprintf(tokens, sizeof tokens, "%s", lbt_str_of(r, "tokens"));
    assert_int_equal((int)lbt_num_of(r, "recorded"), 5);
    lbt_lines_free(&lines);
    /* lockbridge's wire lock: SETNX, then its release reads and deletes. */
    assert_string_equal(tokens, "A:SETNX A:GET A:DEL A:SETNX A:GET");
    const char *replay_args[] = {"-p", port, "race", "--schedule", tokens, "--key", KEY, "--json",
                                 "--client", ca, NULL};
    assert_int_equal(lbt_run(&p, replay_args), 0);
    cJSON *res[2];
    assert_int_equal(results_of(&p, res, 2), 1);
    assert_string_equal(lbt_str_of(res[0], "verdict"), "passed");
    assert_int_equal((int)lbt_num_of(res[0], "followed"), 5);
    cJSON_Delete(res[0]);
}

/* Malformed and oversized requests close the sender's connection; the proxy
 * goes on, and a well-formed client then follows the schedule. */
static void test_malformed_requests_close_only_their_connection(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "race", "--schedule", "A:SETNX", "--key", KEY, "--json",
                          "--start-timeout-ms", "10000", NULL};
    static const char *const bad[] = {"*2\r\n$-5\r\n", "*99999999999999999999\r\n",
                                      "*1\r\n$2000000000\r\n", "PING\r\n", "*1\r\n$3\r\nGETxx"};
    lbt_proc p;
    lbt_spawn(&p, args);
    lbt_wait_lines(&p, 1);
    int ap = port_of(&p, 'A');
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {0};
        sa.sin_family = AF_INET;
        sa.sin_port = htons((uint16_t)ap);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        assert_true(write(fd, bad[i], strlen(bad[i])) == (ssize_t)strlen(bad[i]));
        char buf[64];
        assert_int_equal(read(fd, buf, sizeof buf), 0); /* closed by the proxy */
        close(fd);
    }
    redisContext *a = client_conn(ap);
    send_cmd(a, "SETNX %s 1", KEY);
    expect_reply_int(a, 1);
    assert_int_equal(lbt_finish(&p), 0);
    assert_non_null(strstr(p.out, "\"verdict\":\"passed\""));
    redisFree(a);
}

/* Schedules and catalogue files that do not parse are usage errors. */
static void test_bad_schedules_are_refused(void **state) {
    (void)state;
    static const char *const scheds[] = {"", "A:SET$", "Z:GET", "+x", "+-5", "A!!", "A~"};
    for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++) {
        const char *args[] = {"-p", port, "race", "--schedule", scheds[i], NULL};
        lbt_proc p;
        assert_int_equal(lbt_run(&p, args), 1);
    }
    char path[] = "/tmp/lb-race-XXXXXX";
    int fd = mkstemp(path);
    const char bad[] = "# expect L1=maybe\nA:SETNX\n";
    assert_true(write(fd, bad, sizeof bad - 1) == (ssize_t)(sizeof bad - 1));
    close(fd);
    const char *args[] = {"-p", port, "race", "--file", path, NULL};
    lbt_proc p;
    assert_int_equal(lbt_run(&p, args), 1);
    assert_non_null(strstr(p.err, "expect NAME="));
    unlink(path);

    /* A schedule line longer than a schedule may be is refused, not cut
     * short into another schedule that parses. */
    char line[1200] = "";
    for (int i = 0; i < 31; i++) strcat(line, "A:ABCDEFGHIJKLMNOPQRSTUVWXYZABCDE ");
    strcat(line, "\n");
    fd = mkstemp(strcpy(path, "/tmp/lb-race-XXXXXX"));
    assert_true(write(fd, line, strlen(line)) == (ssize_t)strlen(line));
    close(fd);
    const char *longer[] = {"-p", port, "race", "--file", path, "--start-timeout-ms", "100",
                            NULL};
    assert_int_equal(lbt_run(&p, longer), 1);
    assert_non_null(strstr(p.err, "one schedule only"));
    unlink(path);

    /* A token that does not parse is refused at its file and line. */
    const char typo[] = "# race: a typo\n\nA:SETNX +31OO B:SETNX\n";
    fd = mkstemp(strcpy(path, "/tmp/lb-race-XXXXXX"));
    assert_true(write(fd, typo, sizeof typo - 1) == (ssize_t)(sizeof typo - 1));
    close(fd);
    const char *at[] = {"-p", port, "race", "--file", path, NULL};
    assert_int_equal(lbt_run(&p, at), 1);
    char want[128];
    snprintf(want, sizeof want, "%s:3: bad token \"+31OO\"", path);
    if (!strstr(p.err, want)) fail_msg("expected '%s' in: %s", want, p.err);
    unlink(path);
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
        cmocka_unit_test(test_a_client_that_exits_is_named_with_its_status_and_stderr),
        cmocka_unit_test(test_a_client_that_never_connects_is_named),
        cmocka_unit_test(test_a_client_connected_straight_to_the_server_is_named),
        cmocka_unit_test(test_a_client_on_other_keys_only_is_named),
        cmocka_unit_test(test_a_client_that_closes_a_held_command_is_named),
        cmocka_unit_test(test_a_schedule_naming_a_client_not_given_is_refused),
        cmocka_unit_test(test_sigterm_stops_everything_and_writes_the_report),
        cmocka_unit_test(test_a_server_lost_mid_run_exits_4),
        cmocka_unit_test(test_the_proxy_ports_come_from_the_range_given),
        cmocka_unit_test(test_a_set_up_failure_is_a_junit_error),
        cmocka_unit_test(test_a_clients_own_validity_counts_for_its_hold),
        cmocka_unit_test(test_a_row_whose_outcome_changes_is_flaky),
        cmocka_unit_test(test_a_recorded_sequence_replays_as_written),
        cmocka_unit_test(test_malformed_requests_close_only_their_connection),
        cmocka_unit_test(test_bad_schedules_are_refused),
    };
    /* RACE_TEST_FILTER="*pattern*" runs only the matching tests. */
    if (getenv("RACE_TEST_FILTER")) cmocka_set_test_filter(getenv("RACE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
