/* `lockbridge hold` in its other modes, run as a child process against a real
 * redis-server: token locks (--mode modern: fencing, the watchdog, fair
 * waiting), compat's timestamp with a TTL, the mode a namespace names (--ns),
 * and which lines of hold and contend carry the legacy lock's "variant".
 * The tool is $LB_TOOL, or $BUILD/lockbridge (BUILD defaults to build). */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "harness/cli.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"
#include "migrate/internal.h"

static lbt_cli cli;

/* ---- Token locks (--mode modern) ------------------------------------------------------ */
static int is_token(const char *s) {
    if (strlen(s) != LB_TOKEN_LEN) return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
    return 1;
}

static void test_hold_modern_with_fencing_reports_growing_fences(void **state) {
    (void)state;
    double fences[2];
    for (int i = 0; i < 2; i++) {
        const char *args[] = {"-p", cli.port, "hold", "cli:modern", "--mode", "modern", "--fencing",
                              "--ttl-ms", "20000", NULL};
        assert_int_equal(lbt_run(&cli.proc, args), 0);
        lbt_lines l;
        lbt_parse(&cli.proc, &l);
        assert_int_equal(l.n, 2);
        assert_string_equal(lbt_str_of(l.line[0], "event"), "acquired");
        assert_string_equal(lbt_str_of(l.line[0], "mode"), "modern");
        assert_true(is_token(lbt_str_of(l.line[0], "token")));
        assert_true(lbt_num_of(l.line[0], "ttl_ms") == 20000);
        assert_null(cJSON_GetObjectItemCaseSensitive(l.line[0], "codec"));
        fences[i] = lbt_num_of(l.line[0], "fence");
        assert_true(lbt_bool_of(l.line[1], "still_ours"));
        assert_string_equal(lbt_str_of(l.line[1], "status"), "LB_OK");
        lbt_lines_free(&l);
    }
    assert_true(fences[0] >= 1 && fences[1] > fences[0]);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:modern"), 0);
    /* The counter lives beside the lock, in its hash slot. */
    assert_string_equal(lbt_get(cli.conn, "{cli:modern}:fence"), "2");
    lbt_cmd_ok(cli.conn, "DEL %s", "{cli:modern}:fence");
}

/* Without --fencing no counter is taken, and the output says nothing of one. */
static void test_hold_modern_without_fencing_sets_a_ttl_and_no_counter(void **state) {
    (void)state;
    const char *args[] = {"-p", cli.port, "hold", "cli:plain", "--mode", "modern", "--ttl-ms",
                          "7000", "--hold-ms", "600000", NULL};
    lbt_spawn(&cli.proc, args);
    lbt_wait_lines(&cli.proc, 1);
    long long pttl = lbt_int(cli.conn, "PTTL %s", "cli:plain");
    assert_true(pttl > 0 && pttl <= 7000);
    assert_int_equal(kill(cli.proc.pid, SIGTERM), 0);
    assert_int_equal(lbt_finish(&cli.proc), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_null(cJSON_GetObjectItemCaseSensitive(l.line[0], "fence"));
    assert_true(lbt_bool_of(l.line[1], "interrupted"));
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "{cli:plain}:fence"), 0);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:plain"), 0);
    lbt_lines_free(&l);
}

/* A legacy lock has no TTL: the token lock treats it as held for good and
 * never touches it. */
static void test_hold_modern_on_a_legacy_lock_exits_2_and_leaves_it(void **state) {
    (void)state;
    lb_legacy_lock *other = lbt_legacy_holder(cli.conn, "cli:legacyheld");
    char theirs[64];
    snprintf(theirs, sizeof theirs, "%s", lb_legacy_info_of(other).value);
    const char *args[] = {"-p", cli.port, "hold", "cli:legacyheld", "--mode", "modern", "--wait-ms",
                          "30", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 2);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(lbt_str_of(l.line[0], "reason"), "timeout");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(l.line[0], "holder_ttl_ms")));
    assert_string_equal(lbt_get(cli.conn, "cli:legacyheld"), theirs);
    assert_int_equal(lbt_int(cli.conn, "PTTL %s", "cli:legacyheld"), -1);
    assert_int_equal(lb_legacy_release(other, lb_on_conn(cli.conn)), LB_OK);
    lb_legacy_lock_free(other);
    lbt_lines_free(&l);
}

static void test_hold_modern_reports_its_lock_lost_and_exits_5(void **state) {
    (void)state;
    const char *args[] = {"-p", cli.port, "hold", "cli:mlost", "--mode", "modern", "--hold-ms",
                          "600000", NULL};
    lbt_spawn(&cli.proc, args);
    lbt_wait_lines(&cli.proc, 1);
    lbt_cmd_ok(cli.conn, "SET %s %s PX 60000", "cli:mlost", "someone-else");
    assert_int_equal(kill(cli.proc.pid, SIGTERM), 0);
    assert_int_equal(lbt_finish(&cli.proc), 5);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_false(lbt_bool_of(l.line[1], "still_ours"));
    assert_string_equal(lbt_str_of(l.line[1], "status"), "LB_ELOST");
    assert_string_equal(lbt_get(cli.conn, "cli:mlost"), "someone-else");
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:mlost");
    lbt_lines_free(&l);
}

/* ---- compat and the mode-following lock ----------------------------------------------- */
/* compat writes what legacy clients read (a timestamp in the codec) with a
 * Redis TTL of ttl + grace, and releases its own value. */
static void test_hold_compat_writes_a_timestamp_with_a_ttl(void **state) {
    (void)state;
    int64_t before = lbt_wall_ms();
    const char *args[] = {"-p", cli.port, "hold", "cli:compat", "--mode", "compat", "--ttl-ms",
                          "20000", "--grace-ms", "5000", "--hold-ms", "600000", NULL};
    lbt_spawn(&cli.proc, args);
    lbt_wait_lines(&cli.proc, 1);
    long long pttl = lbt_int(cli.conn, "PTTL %s", "cli:compat");
    assert_true(pttl > 20000 && pttl <= 25000);
    lb_codec ms;
    int64_t t;
    const char *v = lbt_get(cli.conn, "cli:compat");
    assert_int_equal(lb_codec_parse(&ms, "ms"), LB_OK);
    assert_int_equal(lb_codec_decode(&ms, v, strlen(v), &t), LB_OK);
    assert_true(t >= before + 20000 && t <= lbt_wall_ms() + 20001);
    assert_int_equal(kill(cli.proc.pid, SIGTERM), 0);
    assert_int_equal(lbt_finish(&cli.proc), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[0], "mode"), "compat");
    assert_string_equal(lbt_str_of(l.line[0], "value"), v);
    assert_true(lbt_num_of(l.line[0], "grace_ms") == 5000);
    assert_true(lbt_bool_of(l.line[1], "still_ours"));
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:compat"), 0);
    lbt_lines_free(&l);
}

/* A live legacy lock is respected; an expired one is taken over. */
static void test_hold_compat_respects_live_legacy_locks_and_takes_expired_ones(void **state) {
    (void)state;
    char live[32];
    snprintf(live, sizeof live, "%lld", (long long)(lbt_wall_ms() + 60000));
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:cl", live);
    const char *args[] = {"-p", cli.port, "hold", "cli:cl", "--mode", "compat", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 2);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_string_equal(lbt_str_of(l.line[0], "holder_format"), "legacy");
    assert_true(lbt_num_of(l.line[0], "holder_expiry") == (double)atoll(live));
    assert_string_equal(lbt_get(cli.conn, "cli:cl"), live);
    lbt_lines_free(&l);
    lbt_cmd_ok(cli.conn, "SET %s %lld", "cli:cl", (long long)(lbt_wall_ms() - 60000));
    assert_int_equal(lbt_run(&cli.proc, args), 0);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:cl"), 0);
}

/* With --ns the lock follows the namespace's control key, and joins its census. */
static long long census_size(const char *census) { return lbt_int(cli.conn, "HLEN %s", census); }

static void test_hold_with_ns_follows_the_namespace_mode(void **state) {
    (void)state;
    static const char *const modes[] = {"modern", "compat", "legacy"};
    for (int i = 0; i < 3; i++) {
        lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:follow}:lb-mode", modes[i]);
        /* --mode compat beside a namespace in another mode: said on stderr. */
        const char *args[] = {"-p", cli.port, "hold", "cli:fl", "--ns", "cli:follow", "--mode",
                              "compat", "--hold-ms", "1000", NULL};
        lbt_spawn(&cli.proc, args);
        lbt_wait_lines(&cli.proc, 1);
        /* While it runs: one census entry, in the mode the run uses. */
        redisReply *r = redisCommand(cli.conn, "HVALS %s", "{cli:follow}:lb-census");
        assert_non_null(r);
        assert_int_equal(r->elements, 1);
        lb_census_entry e;
        assert_int_equal(lb__census_decode(r->element[0]->str, r->element[0]->len, &e), LB_OK);
        assert_string_equal(lb_mode_name(e.mode), modes[i]);
        freeReplyObject(r);
        assert_int_equal(lbt_finish(&cli.proc), 0);
        lbt_lines l;
        lbt_parse(&cli.proc, &l);
        assert_int_equal(l.n, 2);
        assert_string_equal(lbt_str_of(l.line[0], "mode"), modes[i]);
        assert_string_equal(lbt_str_of(l.line[0], "ns"), "cli:follow");
        if (i == 0) assert_true(is_token(lbt_str_of(l.line[0], "value")));
        assert_true(lbt_bool_of(l.line[1], "still_ours"));
        lbt_lines_free(&l);
        if (i == 1) assert_null(strstr(cli.proc.err, "note: namespace"));
        else assert_non_null(strstr(cli.proc.err, "the lock follows it, not --mode compat"));
        /* A run that ends cleanly takes its entry with it. */
        assert_int_equal(census_size("{cli:follow}:lb-census"), 0);
    }
    lbt_cmd_ok(cli.conn, "DEL %s %s", "{cli:follow}:lb-mode", "{cli:follow}:lb-census");
}

/* ---- Watchdog and fair waiting -------------------------------------------------------- */
/* A 600 ms lock held for 1.5 s survives only if it is renewed (every 200 ms:
 * two renewals in a row may fail before it lapses). */
static void test_hold_modern_watchdog_keeps_a_short_lock(void **state) {
    (void)state;
    const char *args[] = {"-p", cli.port, "hold", "cli:wd", "--mode", "modern", "--watchdog",
                          "--ttl-ms", "600", "--hold-ms", "1500", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_true(lbt_bool_of(l.line[0], "watchdog"));
    assert_true(lbt_bool_of(l.line[1], "still_ours"));
    lbt_lines_free(&l);
    /* Without the watchdog the same hold outlives its lock. */
    const char *bare[] = {"-p", cli.port, "hold", "cli:wd", "--mode", "modern", "--ttl-ms", "600",
                          "--hold-ms", "1500", NULL};
    assert_int_equal(lbt_run(&cli.proc, bare), 5);
}

/* The watchdog notices the lock taken away and ends the hold at once. */
static void test_hold_modern_watchdog_reports_a_lost_lock(void **state) {
    (void)state;
    const char *args[] = {"-p", cli.port, "hold", "cli:wdl", "--mode", "modern", "--watchdog",
                          "--ttl-ms", "900", "--hold-ms", "600000", NULL};
    lbt_spawn(&cli.proc, args);
    lbt_wait_lines(&cli.proc, 1);
    lbt_cmd_ok(cli.conn, "SET %s %s PX 60000", "cli:wdl", "intruder");
    assert_int_equal(lbt_finish(&cli.proc), 5); /* no signal: the loss ended it */
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[1], "watchdog_lost"), "LB_WATCH_REFUSED");
    assert_false(lbt_bool_of(l.line[1], "interrupted"));
    assert_string_equal(lbt_get(cli.conn, "cli:wdl"), "intruder");
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:wdl");
    lbt_lines_free(&l);
}

/* Two fair holds: the second waits in the queue and takes the lock when the
 * first releases it. */
static void test_hold_fair_waiter_takes_the_lock_after_the_holder(void **state) {
    (void)state;
    lbt_proc first;
    const char *a1[] = {"-p", cli.port, "hold", "cli:fair", "--mode", "modern", "--fair",
                        "--hold-ms", "600000", NULL};
    lbt_spawn(&first, a1);
    lbt_wait_lines(&first, 1);
    long long before = lbt_int(cli.conn, "EXISTS %s", "cli:fair");
    assert_int_equal(before, 1);
    const char *a2[] = {"-p", cli.port, "hold", "cli:fair", "--mode", "modern", "--fair",
                        "--wait-ms", "20000", NULL};
    lbt_spawn(&cli.proc, a2);
    /* Once the second is queued, the first lets go. */
    for (int i = 0; lbt_int(cli.conn, "EXISTS %s", "{cli:fair}:queue") == 0; i++) {
        assert_true(i < LBT_STUCK_MS);
        usleep(1000);
    }
    assert_int_equal(kill(first.pid, SIGTERM), 0);
    assert_int_equal(lbt_finish(&first), 0);
    assert_int_equal(lbt_finish(&cli.proc), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[0], "event"), "acquired");
    assert_true(lbt_bool_of(l.line[0], "fair"));
    assert_true(lbt_bool_of(l.line[1], "still_ours"));
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:fair"), 0);
    lbt_lines_free(&l);
}

/* The sockets a running process has open (from /proc/<pid>/fd). */
static int sockets_of(pid_t pid) {
    char dir[64], link[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        ssize_t len = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
        if (len <= 0) continue;
        link[len] = '\0';
        if (strncmp(link, "socket:", 7) == 0) n++;
    }
    closedir(d);
    return n;
}

/* On one server a fair wait blocks on its grant list: a fair hold opens no
 * connection beyond a plain one's (no waiter, no subscriber). */
static void test_hold_fair_on_one_server_opens_no_waiter_connection(void **state) {
    (void)state;
    int sockets[2];
    for (int fair = 0; fair < 2; fair++) {
        lbt_proc p;
        const char *argv[] = {"-p", cli.port, "hold", fair ? "cli:fairsock" : "cli:plainsock",
                              "--mode", "modern", "--hold-ms", "600000",
                              fair ? "--fair" : NULL, NULL};
        lbt_spawn(&p, argv);
        lbt_wait_lines(&p, 1);
        sockets[fair] = sockets_of(p.pid);
        assert_int_equal(kill(p.pid, SIGTERM), 0);
        assert_int_equal(lbt_finish(&p), 0);
    }
    assert_true(sockets[0] > 0);
    assert_int_equal(sockets[1], sockets[0]);
}

/* ---- The legacy lock's variant -------------------------------------------------------- */
/* "variant" is the legacy timestamp lock's option: every line of hold and
 * contend carries it when the lock is (or, with --ns, starts) in legacy mode,
 * and no line does in compat or modern mode. */
static void test_variant_is_printed_in_legacy_mode_only(void **state) {
    (void)state;
    static const struct {
        const char *ns_mode; /* the control key's mode, or NULL: no --ns */
        const char *mode;    /* --mode, or the mode --ns follows */
        int has_variant;
    } cases[] = {
        {NULL, "legacy", 1},     {NULL, "compat", 0},     {NULL, "modern", 0},
        {"legacy", "legacy", 1}, {"compat", "compat", 0}, {"modern", "modern", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].ns_mode)
            lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:var}:lb-mode", cases[i].ns_mode);
        const char *hold[] = {"-p", cli.port, "hold", "cli:var", "--mode", cases[i].mode,
                              cases[i].ns_mode ? "--ns" : NULL, "cli:var", NULL};
        const char *contend[] = {"-p", cli.port, "contend", "cli:var", "--mode", cases[i].mode,
                                 "--clients", "2", "--seconds", "1", "--counter-key", "cli:varn",
                                 cases[i].ns_mode ? "--ns" : NULL, "cli:var", NULL};
        const char *const *runs[] = {hold, contend};
        static const int lines[] = {2, 1};
        for (int r = 0; r < 2; r++) {
            int rc = lbt_run(&cli.proc, runs[r]);
            if (rc != 0) fail_msg("case %zu, %s: exit %d: %s", i, runs[r][2], rc, cli.proc.err);
            lbt_lines l;
            lbt_parse(&cli.proc, &l);
            assert_int_equal(l.n, lines[r]);
            assert_string_equal(lbt_str_of(l.line[0], "mode"), cases[i].mode);
            for (int j = 0; j < l.n; j++) {
                int acquired_or_summary = j == 0;
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(l.line[j], "variant");
                if (cases[i].has_variant && acquired_or_summary)
                    assert_string_equal(lbt_str_of(l.line[j], "variant"), "wire");
                else if (v)
                    fail_msg("case %zu (%s%s), %s line %d carries \"variant\"", i,
                             cases[i].ns_mode ? "--ns " : "--mode ", cases[i].mode,
                             runs[r][2], j + 1);
            }
            lbt_lines_free(&l);
        }
        assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:var"), 0);
    }
    lbt_cmd_ok(cli.conn, "DEL %s %s %s", "cli:varn", "{cli:var}:lb-mode", "{cli:var}:lb-census");
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_hold_modes");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hold_modern_with_fencing_reports_growing_fences),
        cmocka_unit_test(test_hold_modern_without_fencing_sets_a_ttl_and_no_counter),
        cmocka_unit_test(test_hold_modern_on_a_legacy_lock_exits_2_and_leaves_it),
        cmocka_unit_test(test_hold_modern_reports_its_lock_lost_and_exits_5),
        cmocka_unit_test(test_hold_compat_writes_a_timestamp_with_a_ttl),
        cmocka_unit_test(test_hold_compat_respects_live_legacy_locks_and_takes_expired_ones),
        cmocka_unit_test(test_hold_with_ns_follows_the_namespace_mode),
        cmocka_unit_test(test_hold_modern_watchdog_keeps_a_short_lock),
        cmocka_unit_test(test_hold_modern_watchdog_reports_a_lost_lock),
        cmocka_unit_test(test_hold_fair_waiter_takes_the_lock_after_the_holder),
        cmocka_unit_test(test_hold_fair_on_one_server_opens_no_waiter_connection),
        cmocka_unit_test(test_variant_is_printed_in_legacy_mode_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
