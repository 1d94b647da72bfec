/* The lockbridge tool run as a child process against a real redis-server: hold
 * and contend outcomes and exit codes, JSON output, argument errors, connection
 * options. The tool is $LB_TOOL, or $BUILD/lockbridge (BUILD defaults to build). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "harness/proc.h"
#include "harness/proxy.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"
#include "migrate/internal.h"

static lbt_redis server;
static redisContext *conn;
static char port[16];

static lbt_proc proc;

/* The tool writes each byte as one code point; cJSON decodes those to UTF-8.
 * Maps the code points back to bytes; fails on any above U+00FF. */
static size_t latin1_bytes(const char *utf8, char *out, size_t cap) {
    size_t n = 0;
    for (const unsigned char *s = (const unsigned char *)utf8; *s; n++) {
        assert_true(n < cap);
        if (*s < 0x80) {
            out[n] = (char)*s++;
        } else {
            assert_true(s[0] == 0xc2 || s[0] == 0xc3);
            out[n] = (char)(((s[0] & 0x03) << 6) | (s[1] & 0x3f));
            s += 2;
        }
    }
    return n;
}

static int64_t wall_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static lb_legacy_lock *library_holder(const char *key) {
    lb_legacy_lock *l = NULL;
    assert_int_equal(lb_legacy_lock_new(&l, key, strlen(key), NULL), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(l, lb_on_conn(conn)), LB_OK);
    return l;
}

/* ---- hold ---------------------------------------------------------------------------- */
static void test_hold_prints_json_lines_and_deletes_its_key(void **state) {
    (void)state;
    int64_t before = wall_ms();
    const char *args[] = {"-p", port, "hold", "cli:hold", "--ttl-ms", "20000",
                          "--hold-ms", "10", NULL};
    assert_int_equal(lbt_run(&proc, args), 0);
    int64_t after = wall_ms();
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[0], "event"), "acquired");
    assert_string_equal(lbt_str_of(l.line[0], "key"), "cli:hold");
    assert_string_equal(lbt_str_of(l.line[0], "codec"), "ms");
    assert_string_equal(lbt_str_of(l.line[0], "variant"), "wire");
    double expiry = lbt_num_of(l.line[0], "expiry");
    assert_true(expiry >= (double)(before + 20000) && expiry <= (double)(after + 20001));
    char expect[32];
    snprintf(expect, sizeof expect, "%.0f", expiry);
    assert_string_equal(lbt_str_of(l.line[0], "value"), expect);
    assert_true(lbt_num_of(l.line[0], "waited_ms") >= 0);
    assert_string_equal(lbt_str_of(l.line[1], "event"), "released");
    assert_string_equal(lbt_str_of(l.line[1], "key"), "cli:hold");
    assert_true(lbt_bool_of(l.line[1], "still_ours"));
    assert_string_equal(lbt_str_of(l.line[1], "status"), "LB_OK");
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:hold"), 0);
    assert_int_equal(proc.errlen, 0);
    lbt_lines_free(&l);
}

/* Every codec and variant writes a value that decodes, by the codec the tool
 * reports, to the expiry it reports. */
static void test_hold_value_matches_its_expiry_in_every_codec(void **state) {
    (void)state;
    static const struct {
        const char *codec, *variant;
    } cases[] = {
        {"ms", "scripted"},
        {"s", "wire"},
        {"float", "scripted"},
        {"json", "wire"},
        {"json:field=until,unit=ms,clock=epoch", "scripted"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {"hold", "cli:codec", "-p", port, "--codec", cases[i].codec,
                              "--variant", cases[i].variant, NULL};
        assert_int_equal(lbt_run(&proc, args), 0);
        lbt_lines l;
        lbt_parse(&proc, &l);
        assert_int_equal(l.n, 2);
        lb_codec c;
        int64_t t;
        const char *value = lbt_str_of(l.line[0], "value");
        assert_int_equal(lb_codec_parse(&c, lbt_str_of(l.line[0], "codec")), LB_OK);
        assert_int_equal(lb_codec_decode(&c, value, strlen(value), &t), LB_OK);
        /* Raw JSON digits: compared as text, since a nanosecond instant does not
         * survive a double. */
        char expect[32], *raw = strstr(proc.out, "\"expiry\":");
        assert_non_null(raw);
        snprintf(expect, sizeof expect, "\"expiry\":%lld,", (long long)t);
        assert_memory_equal(raw, expect, strlen(expect));
        assert_string_equal(lbt_str_of(l.line[0], "variant"), cases[i].variant);
        assert_true(lbt_bool_of(l.line[1], "still_ours"));
        assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:codec"), 0);
        lbt_lines_free(&l);
    }
}

static void test_hold_on_a_held_key_exits_2_and_leaves_the_holder(void **state) {
    (void)state;
    lb_legacy_lock *other = library_holder("cli:held");
    char theirs[64];
    snprintf(theirs, sizeof theirs, "%s", lb_legacy_info_of(other).value);
    static const struct {
        const char *wait_ms, *reason;
    } cases[] = {{"0", "busy"}, {"30", "timeout"}};
    for (size_t i = 0; i < 2; i++) {
        const char *args[] = {"hold", "cli:held", "--wait-ms", cases[i].wait_ms, "-p", port,
                              NULL};
        assert_int_equal(lbt_run(&proc, args), 2);
        lbt_lines l;
        lbt_parse(&proc, &l);
        assert_int_equal(l.n, 1);
        assert_string_equal(lbt_str_of(l.line[0], "event"), "not_acquired");
        assert_string_equal(lbt_str_of(l.line[0], "reason"), cases[i].reason);
        assert_string_equal(lbt_str_of(l.line[0], "status"), "LB_ETIMEDOUT");
        assert_true(lbt_num_of(l.line[0], "holder_expiry") == (double)lb_legacy_info_of(other).expiry);
        assert_string_equal(lbt_get(conn, "cli:held"), theirs);
        lbt_lines_free(&l);
    }
    assert_int_equal(lb_legacy_release(other, lb_on_conn(conn)), LB_OK);
    lb_legacy_lock_free(other);
}

static void test_hold_on_a_foreign_value_exits_3_and_leaves_it(void **state) {
    (void)state;
    static const struct {
        const char *value;
        size_t len;
    } cases[] = {
        {"not-a-timestamp", 15},
        {"{\"uid\":\"4f1c\"}", 14},
        {"\x00\xff\xfe\"\\", 5},
        {"1700000000000 ", 14},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lbt_cmd_ok(conn, "SET %s %b", "cli:foreign", cases[i].value, cases[i].len);
        const char *args[] = {"-p", port, "hold", "cli:foreign", "--wait-ms", "20", NULL};
        assert_int_equal(lbt_run(&proc, args), 3);
        lbt_lines l;
        lbt_parse(&proc, &l);
        assert_int_equal(l.n, 1);
        assert_string_equal(lbt_str_of(l.line[0], "event"), "not_acquired");
        assert_string_equal(lbt_str_of(l.line[0], "reason"), "foreign");
        assert_string_equal(lbt_str_of(l.line[0], "status"), "LB_EFOREIGN");
        assert_true(lbt_bool_of(l.line[0], "left_alone"));
        redisReply *r = redisCommand(conn, "GET %s", "cli:foreign");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_int_equal(r->len, cases[i].len);
        assert_memory_equal(r->str, cases[i].value, cases[i].len);
        freeReplyObject(r);
        lbt_lines_free(&l);
    }
    lbt_cmd_ok(conn, "DEL %s", "cli:foreign");
}

static void test_hold_on_a_hash_exits_3_and_leaves_it(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "HSET %s f v", "cli:hash");
    const char *args[] = {"-p", port, "hold", "cli:hash", NULL};
    assert_int_equal(lbt_run(&proc, args), 3);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(lbt_str_of(l.line[0], "reason"), "wrongtype");
    assert_string_equal(lbt_str_of(l.line[0], "status"), "LB_EWRONGTYPE");
    assert_int_equal(lbt_int(conn, "HLEN %s", "cli:hash"), 1);
    lbt_cmd_ok(conn, "DEL %s", "cli:hash");
    lbt_lines_free(&l);
}

/* Keys are bytes: control bytes, quotes and bytes that are not UTF-8 still make
 * valid JSON, and decoding gives back the exact bytes. */
static void test_hold_prints_any_key_bytes_as_valid_json(void **state) {
    (void)state;
    static const char key[] = "cli:\xff\x01\"\\\xc3\xa9\n";
    const char *args[] = {"-p", port, "hold", key, NULL};
    assert_int_equal(lbt_run(&proc, args), 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    char bytes[64];
    for (int i = 0; i < 2; i++) {
        size_t n = latin1_bytes(lbt_str_of(l.line[i], "key"), bytes, sizeof bytes);
        assert_int_equal(n, sizeof key - 1);
        assert_memory_equal(bytes, key, n);
    }
    assert_int_equal(lbt_int(conn, "EXISTS %b", key, sizeof key - 1), 0);
    lbt_lines_free(&l);
}

/* The tool holds until signalled; meanwhile the key is overwritten, as by a
 * contender that judged the lock expired: the release finds it lost. */
static void test_hold_reports_a_lock_lost_while_held_and_exits_5(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "hold", "cli:lost", "--hold-ms", "600000", NULL};
    lbt_spawn(&proc, args);
    lbt_wait_lines(&proc, 1);
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:lost"), 1);
    lbt_cmd_ok(conn, "SET %s %s", "cli:lost", "1");
    assert_int_equal(kill(proc.pid, SIGTERM), 0);
    assert_int_equal(lbt_finish(&proc), 5);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[1], "event"), "released");
    assert_false(lbt_bool_of(l.line[1], "still_ours"));
    assert_string_equal(lbt_str_of(l.line[1], "status"), "LB_ELOST");
    assert_true(lbt_bool_of(l.line[1], "interrupted"));
    assert_string_equal(lbt_get(conn, "cli:lost"), "1");
    lbt_cmd_ok(conn, "DEL %s", "cli:lost");
    lbt_lines_free(&l);
}

static void test_hold_interrupted_by_sigint_still_releases(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "hold", "cli:sigint", "--hold-ms", "600000", NULL};
    lbt_spawn(&proc, args);
    lbt_wait_lines(&proc, 1);
    assert_int_equal(kill(proc.pid, SIGINT), 0);
    assert_int_equal(lbt_finish(&proc), 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_true(lbt_bool_of(l.line[1], "still_ours"));
    assert_true(lbt_bool_of(l.line[1], "interrupted"));
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:sigint"), 0);
    lbt_lines_free(&l);
}

static void test_hold_interrupted_while_waiting_exits_2_holding_nothing(void **state) {
    (void)state;
    lb_legacy_lock *other = library_holder("cli:waiting");
    char theirs[64];
    snprintf(theirs, sizeof theirs, "%s", lb_legacy_info_of(other).value);
    long long before = lbt_calls(conn, "setnx");
    const char *args[] = {"-p", port, "hold", "cli:waiting", "--wait-ms", "600000", NULL};
    lbt_spawn(&proc, args);
    /* Once the tool has attempted, it is in its wait loop with signals held. */
    for (int i = 0; lbt_calls(conn, "setnx") == before; i++) {
        assert_true(i < LBT_STUCK_MS);
        usleep(1000);
    }
    assert_int_equal(kill(proc.pid, SIGINT), 0);
    assert_int_equal(lbt_finish(&proc), 2);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(lbt_str_of(l.line[0], "event"), "not_acquired");
    assert_string_equal(lbt_str_of(l.line[0], "reason"), "interrupted");
    assert_string_equal(lbt_get(conn, "cli:waiting"), theirs);
    assert_int_equal(lb_legacy_release(other, lb_on_conn(conn)), LB_OK);
    lb_legacy_lock_free(other);
    lbt_lines_free(&l);
}

/* A wire release refuses to delete a lock within the release margin of its
 * expiry: held until 900 ms of a 1500 ms lock are left, it is "too close". */
static void test_hold_too_close_to_expiry_exits_5_with_eexpired(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "hold", "cli:close", "--ttl-ms", "1500",
                          "--hold-ms", "600", NULL};
    assert_int_equal(lbt_run(&proc, args), 5);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_false(lbt_bool_of(l.line[1], "still_ours"));
    assert_string_equal(lbt_str_of(l.line[1], "status"), "LB_EEXPIRED");
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:close"), 1); /* left to expire */
    lbt_cmd_ok(conn, "DEL %s", "cli:close");
    lbt_lines_free(&l);
}

/* A client whose clock runs an hour late sees a 30 s lock as long expired and
 * takes it over, as such a host would. */
static void test_clock_offset_makes_a_late_client_take_over(void **state) {
    (void)state;
    lb_legacy_lock *other = library_holder("cli:skew");
    int64_t before = wall_ms();
    const char *args[] = {"-p", port, "hold", "cli:skew", "--clock-offset-ms", "3600000",
                          "--hold-ms", "0", NULL};
    assert_int_equal(lbt_run(&proc, args), 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_true(lbt_num_of(l.line[0], "expiry") >= (double)(before + 3600000 + 30000));
    assert_int_equal(lb_legacy_release(other, lb_on_conn(conn)), LB_ELOST);
    lb_legacy_lock_free(other);
    lbt_lines_free(&l);
}

/* ---- Arguments ------------------------------------------------------------------------- */
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
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[16];
        int n = 0;
        for (int j = 0; cases[i][j]; j++) args[n++] = cases[i][j];
        args[n++] = "-p";
        args[n++] = port;
        args[n] = NULL;
        int rc = lbt_run(&proc, args);
        if (rc != 1) fail_msg("case %zu (%s %s): exit %d", i, args[0], args[1], rc);
        assert_int_equal(proc.outlen, 0);
        char *nl = strchr(proc.err, '\n');
        assert_non_null(nl);
        /* One line; a missing --ns goes on to explain what a namespace is. */
        if (!strstr(proc.err, "--ns NS is required"))
            assert_int_equal((size_t)(nl - proc.err) + 1, proc.errlen);
        else assert_non_null(strstr(proc.err, "A namespace names"));
        assert_non_null(strstr(proc.err, "--help"));
    }
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:args"), 0);
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
        assert_int_equal(lbt_run(&proc, cases[i]), 0);
        assert_non_null(strstr(proc.out, expect[i]));
    }
    const char *general[] = {"--help", NULL};
    assert_int_equal(lbt_run(&proc, general), 0);
    static const char *const names[] = {"hold", "contend", "clock", "inspect", "status", "mode",
                                        "sweep"};
    for (int i = 0; i < 7; i++) {
        char row[32];
        snprintf(row, sizeof row, "  %s ", names[i]);
        assert_non_null(strstr(proc.out, row));
    }
    const char *version[] = {"--version", NULL};
    assert_int_equal(lbt_run(&proc, version), 0);
    assert_non_null(strstr(proc.out, lb_version()));
}

/* ---- Connections ----------------------------------------------------------------------- */
static void test_connection_refused_exits_4(void **state) {
    (void)state;
    /* A port bound without listening refuses connections for as long as we hold it. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char closed[16];
    snprintf(closed, sizeof closed, "%d", ntohs(a.sin_port));
    const char *hold[] = {"hold", "cli:refused", "-p", closed, NULL};
    const char *contend[] = {"contend", "cli:refused", "-p", closed, "--clients", "2",
                             "--seconds", "1", "--counter-key", "cli:refused:n", NULL};
    const char *const *cases[] = {hold, contend};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(lbt_run(&proc, cases[i]), 4);
        lbt_lines l;
        lbt_parse(&proc, &l);
        assert_int_equal(l.n, 1);
        assert_string_equal(lbt_str_of(l.line[0], "event"), "error");
        assert_string_equal(lbt_str_of(l.line[0], "status"), "LB_EIO");
        assert_true(proc.errlen > 0);
        lbt_lines_free(&l);
    }
    close(fd);
}

static void test_select_chooses_the_database(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "SELECT 3");
    lb_legacy_lock *other = library_holder("cli:db");
    lbt_cmd_ok(conn, "SELECT 0");
    const char *in_db3[] = {"-n", "3", "-p", port, "hold", "cli:db", NULL};
    const char *in_db0[] = {"-p", port, "hold", "cli:db", NULL};
    assert_int_equal(lbt_run(&proc, in_db3), 2);
    assert_int_equal(lbt_run(&proc, in_db0), 0);
    lbt_cmd_ok(conn, "SELECT 3");
    assert_int_equal(lb_legacy_release(other, lb_on_conn(conn)), LB_OK);
    lbt_cmd_ok(conn, "SELECT 0");
    lb_legacy_lock_free(other);
}

/* A second server whose clients must authenticate. The harness waits for an
 * unauthenticated PING, so the password is set once the server answers; from
 * then on it behaves as if started with --requirepass. */
static lbt_redis secure;

static int start_secure(void **state) {
    (void)state;
    if (lbt_redis_start(&secure, NULL) != 0) return -1;
    redisContext *c = lbt_redis_connect(&secure);
    if (!c) return -1;
    redisReply *acl = redisCommand(c, "ACL SETUSER alice on >wonderland ~cli:* +@all");
    redisReply *pass = redisCommand(c, "CONFIG SET requirepass s3cret");
    int ok = acl && acl->type == REDIS_REPLY_STATUS && pass && pass->type == REDIS_REPLY_STATUS;
    if (acl) freeReplyObject(acl);
    if (pass) freeReplyObject(pass);
    redisFree(c);
    return ok ? 0 : -1;
}

static int stop_secure(void **state) {
    (void)state;
    lbt_redis_stop(&secure);
    return 0;
}

static void test_auth_with_password_and_acl_user(void **state) {
    (void)state;
    char p[16];
    snprintf(p, sizeof p, "%d", secure.port);
    static const struct {
        const char *args[8];
        int exit;
    } cases[] = {
        {{"-a", "s3cret", "hold", "cli:auth"}, 0},
        {{"hold", "cli:auth", "--user", "alice", "-a", "wonderland"}, 0},
        {{"hold", "cli:auth"}, 4},
        {{"-a", "wrong", "hold", "cli:auth"}, 4},
        {{"--user", "alice", "-a", "s3cret", "hold", "cli:auth"}, 4},
        {{"--user", "alice", "-a", "wonderland", "hold", "other:key"}, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[12];
        int n = 0;
        for (int j = 0; cases[i].args[j]; j++) args[n++] = cases[i].args[j];
        args[n++] = "-p";
        args[n++] = p;
        args[n] = NULL;
        int rc = lbt_run(&proc, args);
        if (rc != cases[i].exit) fail_msg("case %zu: exit %d: %s", i, rc, proc.err);
    }
}

/* ---- contend -------------------------------------------------------------------------- */
typedef struct lbt_summary {
    double acquisitions, delta, lost_updates, abandoned, per_client_sum, floor_thirds;
    double counter_end;
    int per_client_n;
} lbt_summary;

static void run_contend(const char *const *extra, lbt_summary *s) {
    const char *args[32];
    int n = 0;
    const char *base[] = {"contend", "cli:contend", "-p", port, "--clients", "4",
                          "--seconds", "1", "--counter-key", "cli:counter", NULL};
    for (int i = 0; base[i]; i++) args[n++] = base[i];
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    memset(s, 0, sizeof *s);
    int rc = lbt_run(&proc, args);
    if (rc != 0) fail_msg("contend exit %d: %s", rc, proc.err);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 1);
    cJSON *o = l.line[0];
    assert_string_equal(lbt_str_of(o, "event"), "summary");
    assert_string_equal(lbt_str_of(o, "mode"), "legacy");
    assert_int_equal((int)lbt_num_of(o, "clients"), 4);
    assert_int_equal((int)lbt_num_of(o, "failed_clients"), 0);
    s->acquisitions = lbt_num_of(o, "acquisitions");
    s->delta = lbt_num_of(o, "counter_delta");
    s->lost_updates = lbt_num_of(o, "lost_updates");
    s->abandoned = lbt_num_of(o, "abandoned");
    s->counter_end = lbt_num_of(o, "counter_end");
    assert_true(s->delta == s->counter_end - lbt_num_of(o, "counter_start"));
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(o, "per_client"), *it;
    assert_true(cJSON_IsArray(per));
    cJSON_ArrayForEach(it, per) {
        s->per_client_n++;
        s->per_client_sum += it->valuedouble;
        s->floor_thirds += (double)((long long)it->valuedouble / 3);
    }
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "acquire_ms");
    if (s->acquisitions > 0) {
        assert_true(lbt_num_of(ms, "p50") <= lbt_num_of(ms, "p99"));
        assert_true(lbt_num_of(ms, "p99") <= lbt_num_of(ms, "max"));
        assert_true(lbt_num_of(o, "commands") >= s->acquisitions);
    }
    lbt_lines_free(&l);
}

static void test_contend_counts_every_update_in_both_variants(void **state) {
    (void)state;
    static const char *const variants[] = {"wire", "scripted"};
    for (int i = 0; i < 2; i++) {
        const char *extra[] = {"--variant", variants[i], NULL};
        lbt_summary s;
        run_contend(extra, &s);
        assert_true(s.acquisitions > 0);
        assert_true(s.lost_updates == 0);
        assert_true(s.delta == s.acquisitions);
        assert_int_equal(s.per_client_n, 4);
        assert_true(s.per_client_sum == s.acquisitions);
        char end[32];
        snprintf(end, sizeof end, "%.0f", s.counter_end);
        assert_string_equal(lbt_get(conn, "cli:counter"), end);
        assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:contend"), 0);
    }
}

/* Abandoned locks are taken over once their timestamp passes; the wire variant
 * needs a release margin under the short ttl, or every release is refused. */
static void test_contend_survives_abandoned_locks(void **state) {
    (void)state;
    static const char *const variants[][4] = {{"scripted", "1000"}, {"wire", "20"}};
    for (int i = 0; i < 2; i++) {
        const char *extra[] = {"--variant", variants[i][0], "--release-margin-ms",
                               variants[i][1], "--abandon-every", "3", "--ttl-ms", "200",
                               NULL};
        lbt_summary s;
        run_contend(extra, &s);
        assert_true(s.acquisitions > 0);
        assert_true(s.lost_updates == 0);
        assert_true(s.delta == s.acquisitions);
        assert_true(s.abandoned > 0);
        assert_true(s.abandoned == s.floor_thirds);
    }
    lbt_cmd_ok(conn, "DEL %s", "cli:contend");
}

static void test_contend_refuses_a_counter_that_is_not_a_number(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "SET %s %s", "cli:badcounter", "twelve");
    const char *args[] = {"contend", "cli:contend", "-p", port, "--clients", "2",
                          "--seconds", "1", "--counter-key", "cli:badcounter", NULL};
    assert_int_equal(lbt_run(&proc, args), 4);
    assert_string_equal(lbt_get(conn, "cli:badcounter"), "twelve");
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:contend"), 0);
    lbt_cmd_ok(conn, "DEL %s", "cli:badcounter");
}

/* ---- Token locks (--mode modern) ------------------------------------------------- */
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
        const char *args[] = {"-p", port, "hold", "cli:modern", "--mode", "modern",
                              "--fencing", "--ttl-ms", "20000", NULL};
        assert_int_equal(lbt_run(&proc, args), 0);
        lbt_lines l;
        lbt_parse(&proc, &l);
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
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:modern"), 0);
    /* The counter lives beside the lock, in its hash slot. */
    assert_string_equal(lbt_get(conn, "{cli:modern}:fence"), "2");
    lbt_cmd_ok(conn, "DEL %s", "{cli:modern}:fence");
}

/* Without --fencing no counter is taken, and the output says nothing of one. */
static void test_hold_modern_without_fencing_sets_a_ttl_and_no_counter(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "hold", "cli:plain", "--mode", "modern", "--ttl-ms",
                          "7000", "--hold-ms", "600000", NULL};
    lbt_spawn(&proc, args);
    lbt_wait_lines(&proc, 1);
    long long pttl = lbt_int(conn, "PTTL %s", "cli:plain");
    assert_true(pttl > 0 && pttl <= 7000);
    assert_int_equal(kill(proc.pid, SIGTERM), 0);
    assert_int_equal(lbt_finish(&proc), 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_null(cJSON_GetObjectItemCaseSensitive(l.line[0], "fence"));
    assert_true(lbt_bool_of(l.line[1], "interrupted"));
    assert_int_equal(lbt_int(conn, "EXISTS %s", "{cli:plain}:fence"), 0);
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:plain"), 0);
    lbt_lines_free(&l);
}

/* A legacy lock has no TTL: the token lock treats it as held for good and
 * never touches it. */
static void test_hold_modern_on_a_legacy_lock_exits_2_and_leaves_it(void **state) {
    (void)state;
    lb_legacy_lock *other = library_holder("cli:legacyheld");
    char theirs[64];
    snprintf(theirs, sizeof theirs, "%s", lb_legacy_info_of(other).value);
    const char *args[] = {"-p", port, "hold", "cli:legacyheld", "--mode", "modern",
                          "--wait-ms", "30", NULL};
    assert_int_equal(lbt_run(&proc, args), 2);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(lbt_str_of(l.line[0], "reason"), "timeout");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(l.line[0], "holder_ttl_ms")));
    assert_string_equal(lbt_get(conn, "cli:legacyheld"), theirs);
    assert_int_equal(lbt_int(conn, "PTTL %s", "cli:legacyheld"), -1);
    assert_int_equal(lb_legacy_release(other, lb_on_conn(conn)), LB_OK);
    lb_legacy_lock_free(other);
    lbt_lines_free(&l);
}

static void test_hold_modern_reports_its_lock_lost_and_exits_5(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "hold", "cli:mlost", "--mode", "modern", "--hold-ms",
                          "600000", NULL};
    lbt_spawn(&proc, args);
    lbt_wait_lines(&proc, 1);
    lbt_cmd_ok(conn, "SET %s %s PX 60000", "cli:mlost", "someone-else");
    assert_int_equal(kill(proc.pid, SIGTERM), 0);
    assert_int_equal(lbt_finish(&proc), 5);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_false(lbt_bool_of(l.line[1], "still_ours"));
    assert_string_equal(lbt_str_of(l.line[1], "status"), "LB_ELOST");
    assert_string_equal(lbt_get(conn, "cli:mlost"), "someone-else");
    lbt_cmd_ok(conn, "DEL %s", "cli:mlost");
    lbt_lines_free(&l);
}

/* ---- Output forms ---------------------------------------------------------------- */
/* Piped, hold and contend write JSON lines as they always have; --json is
 * accepted anywhere; the clock command writes a table unless asked for JSON. */
static void test_json_flag_anywhere_and_text_by_default_for_clock(void **state) {
    (void)state;
    const char *hold[] = {"--json", "-p", port, "hold", "cli:json", NULL};
    assert_int_equal(lbt_run(&proc, hold), 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    lbt_lines_free(&l);
    const char *text[] = {"-p", port, "clock", "--samples", "2", NULL};
    assert_int_equal(lbt_run(&proc, text), 0);
    assert_non_null(strstr(proc.out, "median offset"));
    assert_non_null(strstr(proc.out, "verdict         ok"));
    assert_null(cJSON_Parse(proc.out)); /* not JSON */
    const char *json[] = {"-p", port, "clock", "--samples", "2", "--json", NULL};
    assert_int_equal(lbt_run(&proc, json), 0);
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(lbt_str_of(l.line[0], "event"), "clock");
    lbt_lines_free(&l);
}

/* On a terminal, hold writes text for people rather than JSON lines. */
static void test_hold_on_a_terminal_writes_text(void **state) {
    (void)state;
    int master, slave;
    assert_int_equal(openpty(&master, &slave, NULL, NULL, NULL), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(slave, 1);
        close(master);
        close(slave);
        execl(lbt_tool(), lbt_tool(), "-p", port, "hold", "cli:tty", (char *)NULL);
        _exit(127);
    }
    close(slave);
    char out[4096];
    size_t len = 0;
    for (;;) { /* a pty's master reads EIO once the child's side is closed */
        struct pollfd fd = {master, POLLIN, 0};
        assert_true(poll(&fd, 1, LBT_STUCK_MS) > 0);
        ssize_t n = read(master, out + len, sizeof out - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
    }
    out[len] = '\0';
    close(master);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_non_null(strstr(out, "acquired"));
    assert_non_null(strstr(out, "still_ours"));
    assert_null(strstr(out, "{\"event\""));
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:tty"), 0);
}

/* ---- clock ----------------------------------------------------------------------- */
static void test_clock_agrees_with_a_local_server(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "clock", "--samples", "5", "--interval-ms", "0",
                          "--json", NULL};
    assert_int_equal(lbt_run(&proc, args), 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
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
        const char *args[] = {"-p", port, "clock", "--clock-offset-ms", cases[i].offset,
                              "--threshold-ms", cases[i].threshold, "--samples", "3",
                              "--json", NULL};
        assert_int_equal(lbt_run(&proc, args), 6);
        lbt_lines l;
        lbt_parse(&proc, &l);
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
    int rc = lbt_run(&proc, args);
    lbt_redis_stop(&notime);
    assert_int_equal(rc, 4);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(lbt_str_of(l.line[0], "event"), "error");
    assert_non_null(strstr(proc.err, "TIME"));
    lbt_lines_free(&l);
}

/* Token locks with fencing: every update counted, and every critical section's
 * fencing number above the one before it. */
static void test_contend_modern_with_fencing_counts_every_update(void **state) {
    (void)state;
    const char *extra[] = {"--mode", "modern", "--fencing", NULL};
    const char *args[32];
    int n = 0;
    const char *base[] = {"contend", "cli:mcontend", "-p", port, "--clients", "3",
                          "--seconds", "1", "--counter-key", "cli:mcounter", NULL};
    for (int i = 0; base[i]; i++) args[n++] = base[i];
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    assert_int_equal(lbt_run(&proc, args), 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 1);
    cJSON *o = l.line[0];
    assert_string_equal(lbt_str_of(o, "mode"), "modern");
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "codec"));
    double acq = lbt_num_of(o, "acquisitions");
    assert_true(acq > 0);
    assert_true(lbt_num_of(o, "lost_updates") == 0);
    assert_true(lbt_num_of(o, "fence_regressions") == 0);
    assert_true(lbt_num_of(o, "failed_clients") == 0);
    /* One fencing number per acquisition, counted by the server. */
    char expect[32];
    snprintf(expect, sizeof expect, "%.0f", acq);
    assert_string_equal(lbt_get(conn, "{cli:mcontend}:fence"), expect);
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:mcontend"), 0);
    lbt_cmd_ok(conn, "DEL %s %s", "{cli:mcontend}:fence", "cli:mcounter");
    lbt_lines_free(&l);
}

/* ---- inspect ------------------------------------------------------------------------ */
/* Runs the tool and parses its single JSON line into *out (caller frees). */
static cJSON *run_json1(const char *const *args, int expect_exit) {
    int rc = lbt_run(&proc, args);
    if (rc != expect_exit) fail_msg("exit %d, expected %d: %s", rc, expect_exit, proc.err);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_true(l.n >= 1);
    cJSON *last = l.line[l.n - 1];
    l.line[l.n - 1] = NULL;
    l.n--;
    lbt_lines_free(&l);
    return last;
}

static void test_inspect_names_the_format_of_every_kind_of_key(void **state) {
    (void)state;
    char live[32], big[5000];
    snprintf(live, sizeof live, "%lld", (long long)(wall_ms() + 60000));
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    lbt_cmd_ok(conn, "SET %s %s", "cli:i:legacy", live);
    lbt_cmd_ok(conn, "SET %s %s PX 90000", "cli:i:compat", live);
    lbt_cmd_ok(conn, "SET %s %s PX 90000", "cli:i:token", "0123456789abcdef0123456789abcdef");
    lbt_cmd_ok(conn, "SET %s %s PX 90000", "cli:i:uid", "{\"uid\":\"4f1c\"}");
    lbt_cmd_ok(conn, "SET %s %s", "cli:i:incr", "2");
    lbt_cmd_ok(conn, "SET %s %s", "cli:i:junk", "not a lock");
    lbt_cmd_ok(conn, "SET %s %s", "cli:i:big", big);
    lbt_cmd_ok(conn, "RPUSH %s %s", "cli:i:list", "a");
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
        const char *args[] = {"-p", port, "inspect", cases[i].key, "--json", NULL};
        cJSON *o = run_json1(args, 0);
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
    const char *leg[] = {"-p", port, "inspect", "cli:i:legacy", "--json", "--ttl-ms", "90000",
                         NULL};
    cJSON *o = run_json1(leg, 0);
    assert_string_equal(lbt_str_of(o, "codec"), "ms");
    assert_string_equal(lbt_str_of(o, "value"), live);
    assert_true(lbt_num_of(o, "expiry") == (double)atoll(live));
    assert_true(lbt_num_of(o, "expiry_epoch_ms") == (double)atoll(live));
    assert_false(lbt_bool_of(o, "expired"));
    assert_true(lbt_num_of(o, "remaining_ms") > 50000 && lbt_num_of(o, "remaining_ms") <= 60000);
    assert_true(lbt_num_of(o, "holder_age_ms") >= 30000 && lbt_num_of(o, "holder_age_ms") < 40000);
    cJSON_Delete(o);
    const char *uid[] = {"-p", port, "inspect", "cli:i:uid", "--json", NULL};
    o = run_json1(uid, 0);
    assert_string_equal(lbt_str_of(o, "token"), "json-uid");
    cJSON_Delete(o);
    const char *incr[] = {"-p", port, "inspect", "cli:i:incr", "--json", NULL};
    o = run_json1(incr, 0);
    assert_true(lbt_num_of(o, "counter") == 2);
    cJSON_Delete(o);
    const char *bigargs[] = {"-p", port, "inspect", "cli:i:big", "--json", "--max-bytes", "10",
                             NULL};
    o = run_json1(bigargs, 0);
    assert_string_equal(lbt_str_of(o, "value"), "xxxxxxxxxx");
    assert_true(lbt_num_of(o, "length") == (double)(sizeof big - 1));
    assert_true(lbt_bool_of(o, "truncated"));
    cJSON_Delete(o);
    lbt_cmd_ok(conn, "DEL cli:i:legacy cli:i:compat cli:i:token cli:i:uid cli:i:incr cli:i:junk "
           "cli:i:big cli:i:list");
}

/* Every codec reads the value: a seconds value is a timestamp for --codec s
 * whatever the order, and ambiguous for ms alone (an instant of 1970). */
static void test_inspect_tries_the_codecs_in_order(void **state) {
    (void)state;
    char secs[32];
    snprintf(secs, sizeof secs, "%lld", (long long)(wall_ms() / 1000 + 600));
    lbt_cmd_ok(conn, "SET %s %s", "cli:i:secs", secs);
    const char *both[] = {"-p", port, "inspect", "cli:i:secs", "--codec", "s", "--codec",
                          "ms", "--json", NULL};
    cJSON *o = run_json1(both, 0);
    assert_string_equal(lbt_str_of(o, "format"), "legacy");
    assert_string_equal(lbt_str_of(o, "codec"), "s");
    assert_false(lbt_bool_of(o, "expired"));
    cJSON_Delete(o);
    const char *ms[] = {"-p", port, "inspect", "cli:i:secs", "--json", NULL};
    o = run_json1(ms, 0);
    assert_string_equal(lbt_str_of(o, "format"), "ambiguous");
    assert_string_equal(lbt_str_of(o, "plausible_codec"), "s");
    cJSON_Delete(o);
    /* Text for people: a table of the same fields, bytes escaped. */
    lbt_cmd_ok(conn, "SET %s %b", "cli:i:bin", "\x01\xff", (size_t)2);
    const char *text[] = {"-p", port, "inspect", "cli:i:bin", NULL};
    assert_int_equal(lbt_run(&proc, text), 0);
    assert_non_null(strstr(proc.out, "\\x01\\xff"));
    assert_non_null(strstr(proc.out, "unknown"));
    lbt_cmd_ok(conn, "DEL %s %s", "cli:i:secs", "cli:i:bin");
}

/* ---- status ---------------------------------------------------------------------------- */
/* A small fleet under "cli:s:*": two live legacy locks, one expired an hour
 * ago, one compat, one token, one unknown, one hash, and a fencing counter
 * (a companion key, not a lock). */
static void fill_fleet(void) {
    int64_t now = wall_ms();
    lbt_cmd_ok(conn, "SET %s %lld", "cli:s:a", (long long)(now + 60000));
    lbt_cmd_ok(conn, "SET %s %lld", "cli:s:b", (long long)(now + 60000));
    lbt_cmd_ok(conn, "SET %s %lld", "cli:s:old", (long long)(now - 3600000 * 2));
    lbt_cmd_ok(conn, "SET %s %lld PX 90000", "cli:s:c", (long long)(now + 60000));
    lbt_cmd_ok(conn, "SET %s %s PX 45000", "cli:s:t", "0123456789abcdef0123456789abcdef");
    lbt_cmd_ok(conn, "SET %s %s", "cli:s:junk", "hello");
    lbt_cmd_ok(conn, "HSET %s %s %s", "cli:s:h", "f", "v");
    lbt_cmd_ok(conn, "SET %s %s", "{cli:s:a}:fence", "7");
}

static void clear_keys(const char *pattern) {
    redisReply *r = redisCommand(conn, "KEYS %s", pattern);
    assert_non_null(r);
    for (size_t i = 0; i < r->elements; i++)
        lbt_cmd_ok(conn, "DEL %b", r->element[i]->str, (size_t)r->element[i]->len);
    freeReplyObject(r);
}

static void test_status_counts_formats_and_judges_the_next_stage(void **state) {
    (void)state;
    fill_fleet();
    const char *args[] = {"-p", port, "status", "--ns", "cli:ns", "--match", "*cli:s:*",
                          "--count", "2", "--json", NULL};
    assert_int_equal(lbt_run(&proc, args), 0); /* legacy -> compat: no blocker */
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 8); /* seven locks and the summary */
    for (int i = 0; i < 7; i++) assert_string_equal(lbt_str_of(l.line[i], "event"), "lock");
    cJSON *o = l.line[7];
    assert_string_equal(lbt_str_of(o, "event"), "status");
    assert_string_equal(lbt_str_of(o, "mode"), "legacy");
    assert_false(lbt_bool_of(o, "mode_key_present"));
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
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "notes")), 2);
    lbt_lines_free(&l);

    /* In compat, the live TTL-less timestamps are a legacy writer's: modern
     * is not safe yet. Text output names the blocker; --limit cuts the rows. */
    lbt_cmd_ok(conn, "SET %s %s", "{cli:ns}:lb-mode", "compat");
    const char *text[] = {"-p", port, "status", "--ns", "cli:ns", "--match", "cli:s:*",
                          "--limit", "2", NULL};
    assert_int_equal(lbt_run(&proc, text), 6);
    assert_non_null(strstr(proc.out, "compat -> modern: not ready"));
    assert_non_null(strstr(proc.out, "blocker: [legacy-writers] 2 TTL-less timestamp(s)"));
    assert_non_null(strstr(proc.out, "... 5 more"));
    lbt_cmd_ok(conn, "DEL %s", "{cli:ns}:lb-mode");
    clear_keys("cli:s:*");
    lbt_cmd_ok(conn, "DEL %s", "{cli:s:a}:fence");
}

/* More keys than one SCAN step and than one read batch: every key is read
 * once, whatever COUNT says. */
static void test_status_reads_every_key_across_batches(void **state) {
    (void)state;
    int64_t now = wall_ms();
    for (int base = 0; base < 2500; base += 500) {
        for (int i = base; i < base + 500; i++)
            redisAppendCommand(conn, "SET cli:many:%d %lld PX 60000", i, (long long)(now + 50000));
        for (int i = base; i < base + 500; i++) {
            redisReply *r;
            assert_int_equal(redisGetReply(conn, (void **)&r), REDIS_OK);
            freeReplyObject(r);
        }
    }
    static const char *const counts[] = {"10", "1000", "5000"};
    for (int i = 0; i < 3; i++) {
        const char *args[] = {"-p", port, "status", "--ns", "cli:ns", "--match", "cli:many:*",
                              "--count", counts[i], "--limit", "0", "--json", NULL};
        cJSON *o = run_json1(args, 0);
        assert_true(lbt_num_of(o, "keys") == 2500);
        assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(o, "formats"), "compat") == 2500);
        cJSON_Delete(o);
    }
    clear_keys("cli:many:*");
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
    assert_int_equal(lb_census_register(conn, "cli:cns", 7, &e, &now), LB_OK);
}

static void test_status_and_mode_set_read_the_census(void **state) {
    (void)state;
    census_add("j1", LB_MODE_COMPAT, 0);
    census_add("j2", LB_MODE_COMPAT, 0);
    census_add("j3", LB_MODE_LEGACY, 120000); /* stale, but within the window */
    lbt_cmd_ok(conn, "SET %s %s", "{cli:cns}:lb-mode", "compat");
    const char *args[] = {"-p", port, "status", "--ns", "cli:cns", "--match", "cli:nothing:*",
                          "--json", NULL};
    cJSON *o = run_json1(args, 6);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "census");
    assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(c, "compat"), "live") == 2);
    assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(c, "legacy"), "stale") == 1);
    assert_true(lbt_num_of(cJSON_GetObjectItemCaseSensitive(c, "legacy"), "live") == 0);
    assert_string_equal(lbt_str_of(o, "verdict"), "not ready");
    cJSON_Delete(o);
    const char *set[] = {"-p", port, "mode", "set", "modern", "--observe-ms", "100", "--ns", "cli:cns", "--match",
                         "cli:nothing:*", "--json", NULL};
    o = run_json1(set, 6);
    assert_string_equal(lbt_str_of(o, "outcome"), "refused");
    assert_string_equal(lbt_get(conn, "{cli:cns}:lb-mode"), "compat");
    cJSON_Delete(o);
    /* Outside a window shorter than its age, the legacy entry no longer counts. */
    /* (The control key was written by hand, so when the stage began is not
     * known, and the pattern matches nothing: both checks skipped by name.) */
    const char *narrow[] = {"-p", port, "mode", "set", "modern", "--observe-ms", "100", "--ns", "cli:cns", "--match",
                            "cli:nothing:*", "--window-ms", "60000", "--override", "stage-time",
                            "--override", "empty-scan", "--json", NULL};
    o = run_json1(narrow, 0);
    assert_true(lbt_bool_of(o, "changed"));
    assert_string_equal(lbt_get(conn, "{cli:cns}:lb-mode"), "modern");
    cJSON_Delete(o);
    lbt_cmd_ok(conn, "DEL %s %s %s", "{cli:cns}:lb-mode", "{cli:cns}:lb-census", "{cli:cns}:lb-gate");
}

/* ---- mode ------------------------------------------------------------------------------- */
static void test_mode_set_refuses_modern_while_legacy_writes_unless_overridden(void **state) {
    (void)state;
    const char *get[] = {"-p", port, "mode", "get", "--ns", "cli:m", "--json", NULL};
    cJSON *o = run_json1(get, 0);
    assert_string_equal(lbt_str_of(o, "mode"), "legacy");
    assert_false(lbt_bool_of(o, "control_key_present"));
    cJSON_Delete(o);
    /* legacy -> modern skips a stage: refused even with no evidence at all. */
    const char *jump[] = {"-p", port, "mode", "set", "modern", "--observe-ms", "100", "--ns", "cli:m", "--match",
                          "cli:m:*", "--json", NULL};
    o = run_json1(jump, 6);
    assert_int_equal(lbt_int(conn, "EXISTS %s", "{cli:m}:lb-mode"), 0);
    cJSON_Delete(o);
    /* The first set stores the pattern; a stage here lasts no time at all. */
    const char *compat[] = {"-p", port, "mode", "set", "compat", "--ns", "cli:m", "--match",
                            "cli:m:*", "--ttl-ms", "0", "--refresh-ms", "0", NULL};
    assert_int_equal(lbt_run(&proc, compat), 0);
    assert_string_equal(lbt_get(conn, "{cli:m}:lb-mode"), "compat");
    /* A TTL-less timestamp: a legacy client is still writing. */
    lb_legacy_lock *legacy = library_holder("cli:m:lock");
    assert_int_equal(lbt_run(&proc, jump), 6);
    assert_string_equal(lbt_get(conn, "{cli:m}:lb-mode"), "compat");
    assert_non_null(strstr(proc.out, "TTL-less timestamp"));
    const char *forced[] = {"-p", port, "mode", "set", "modern", "--observe-ms", "100", "--ns", "cli:m", "--match",
                            "cli:m:*", "--override", "legacy-writers", "--json", NULL};
    o = run_json1(forced, 0);
    const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(o, "skipped");
    assert_true(cJSON_GetArraySize(skipped) >= 1);
    assert_string_equal(lbt_str_of(cJSON_GetArrayItem(skipped, 0), "check"), "legacy-writers");
    assert_string_equal(lbt_get(conn, "{cli:m}:lb-mode"), "modern");
    cJSON_Delete(o);
    assert_int_equal(lb_legacy_release(legacy, lb_on_conn(conn)), LB_OK);
    lb_legacy_lock_free(legacy);
    /* Stepping back: allowed, with the tokens still held and their PTTL. */
    lbt_cmd_ok(conn, "SET %s %s PX 40000", "cli:m:tok", "0123456789abcdef0123456789abcdef");
    const char *back[] = {"-p", port, "mode", "set", "compat", "--ns", "cli:m", "--match",
                          "cli:m:*", "--json", NULL};
    o = run_json1(back, 0);
    assert_true(lbt_bool_of(o, "changed"));
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(o, "warnings");
    assert_true(cJSON_GetArraySize(w) >= 1);
    assert_non_null(strstr(cJSON_GetArrayItem(w, 0)->valuestring, "1 token value(s)"));
    assert_string_equal(lbt_get(conn, "{cli:m}:lb-mode"), "compat");
    cJSON_Delete(o);
    /* Already there: nothing to do. */
    assert_int_equal(lbt_run(&proc, back), 0);
    lbt_cmd_ok(conn, "DEL %s %s %s", "{cli:m}:lb-mode", "cli:m:tok", "{cli:m}:lb-gate");
}

/* A legacy client that releases its locks leaves no key for one scan to find:
 * the observation still sees it, by repeated scans and by the server's count
 * of SETNX/GETSET calls. Once it has stopped, modern is allowed. */
static lbt_proc legacy_client;

static void test_mode_set_modern_observes_a_legacy_client_between_its_locks(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "SET %s %s", "{cli:obs}:lb-mode", "compat");
    const char *contend[] = {"-p", port, "contend", "cli:obs:k", "--clients", "1", "--seconds",
                             "2", "--counter-key", "cli:obs:count", "--cs-sleep-ms", "5",
                             "--ttl-ms", "300", "--release-margin-ms", "50", NULL};
    lbt_spawn(&legacy_client, contend);
    const char *set[] = {"-p", port, "mode", "set", "modern", "--ns", "cli:obs", "--match",
                         "cli:obs:k*", "--observe-ms", "500", "--json", NULL};
    cJSON *o = run_json1(set, 6);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "blockers");
    int calls = 0;
    for (int i = 0; i < cJSON_GetArraySize(b); i++)
        calls += strstr(lbt_str_of(cJSON_GetArrayItem(b, i), "reason"), "SETNX/GETSET call") != NULL;
    assert_int_equal(calls, 1);
    cJSON_Delete(o);
    assert_string_equal(lbt_get(conn, "{cli:obs}:lb-mode"), "compat");
    assert_int_equal(lbt_finish(&legacy_client), 0);
    /* Stopped: nothing is written meanwhile, and modern is set once the window
     * (here 0: the last lock's expiry) has passed. The control key was written
     * by hand, so the stage's start is unknown, and the released lock left no
     * key to scan: those two checks are skipped by name. */
    const char *quiet[] = {"-p", port, "mode", "set", "modern", "--ns", "cli:obs", "--match",
                           "cli:obs:k*", "--observe-ms", "300", "--window-ms", "0",
                           "--override", "stage-time", "--override", "empty-scan", NULL};
    assert_int_equal(lbt_run(&proc, quiet), 0);
    assert_string_equal(lbt_get(conn, "{cli:obs}:lb-mode"), "modern");
    lbt_cmd_ok(conn, "DEL %s %s %s", "{cli:obs}:lb-mode", "cli:obs:count", "{cli:obs}:lb-gate");
}

/* modern -> legacy skips a stage; a control key holding garbage is left alone. */
static void test_mode_refuses_jumps_back_and_foreign_control_keys(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "SET %s %s", "{cli:m2}:lb-mode", "modern");
    const char *back[] = {"-p", port, "mode", "set", "legacy", "--ns", "cli:m2", "--match",
                          "cli:m2:*", NULL};
    assert_int_equal(lbt_run(&proc, back), 6);
    assert_string_equal(lbt_get(conn, "{cli:m2}:lb-mode"), "modern");
    lbt_cmd_ok(conn, "SET %s %s", "{cli:m2}:lb-mode", "sideways");
    const char *status[] = {"-p", port, "status", "--ns", "cli:m2", "--match", "cli:m2:*",
                            "--json", NULL};
    cJSON *o = run_json1(status, 6);
    assert_string_equal(lbt_str_of(o, "mode"), "unreadable");
    assert_string_equal(lbt_str_of(o, "verdict"), "not ready");
    cJSON_Delete(o);
    const char *get[] = {"-p", port, "mode", "get", "--ns", "cli:m2", NULL};
    const char *set[] = {"-p", port, "mode", "set", "compat", "--ns", "cli:m2", NULL};
    assert_int_equal(lbt_run(&proc, get), 3);
    assert_int_equal(lbt_run(&proc, set), 3);
    assert_string_equal(lbt_get(conn, "{cli:m2}:lb-mode"), "sideways");
    lbt_cmd_ok(conn, "DEL %s", "{cli:m2}:lb-mode");
    lbt_cmd_ok(conn, "HSET %s %s %s", "{cli:m2}:lb-mode", "f", "v");
    assert_int_equal(lbt_run(&proc, get), 3);
    assert_int_equal(lbt_int(conn, "HLEN %s", "{cli:m2}:lb-mode"), 1);
    lbt_cmd_ok(conn, "DEL %s", "{cli:m2}:lb-mode");
}

/* ---- sweep ------------------------------------------------------------------------------ */
static long long pexpiretime(const char *key) { return lbt_int(conn, "PEXPIRETIME %s", key); }

/* By default only locks past their timestamp are touched (a live one given a
 * TTL at timestamp + grace would outlast any compat TTL); what was found is
 * recorded in the namespace's gate record first. */
static void test_sweep_expires_expired_locks_deletes_old_ones_and_leaves_running_ones(void **state) {
    (void)state;
    int64_t now = wall_ms();
    long long running = now + 60000, recent = now - 2000, old = now - 3600000;
    lbt_cmd_ok(conn, "SET %s %lld", "cli:w:run", running);
    lbt_cmd_ok(conn, "SET %s %lld", "cli:w:recent", recent);
    lbt_cmd_ok(conn, "SET %s %lld", "cli:w:old", old);
    /* Dry run: says what it would do, writes nothing. */
    const char *dry[] = {"-p", port, "sweep", "--ns", "swns", "--match", "cli:w:*", "--grace-ms", "10000",
                         "--dry-run", "--json", NULL};
    cJSON *o = run_json1(dry, 0);
    assert_true(lbt_num_of(o, "candidates") == 2);
    assert_true(lbt_num_of(o, "to_delete") == 1);
    assert_true(lbt_num_of(o, "live_left_alone") == 1);
    assert_true(lbt_num_of(o, "acted") == 0);
    cJSON_Delete(o);
    assert_int_equal(lbt_int(conn, "PTTL %s", "cli:w:recent"), -1);
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:w:old"), 1);
    assert_int_equal(lbt_int(conn, "EXISTS %s", "{swns}:lb-gate"), 0);
    const char *args[] = {"-p", port, "sweep", "--ns", "swns", "--match", "cli:w:*", "--grace-ms", "10000",
                          "--json", NULL};
    o = run_json1(args, 0);
    assert_true(lbt_num_of(o, "acted") == 2);
    assert_true(lbt_num_of(o, "changed_meanwhile") == 0);
    cJSON_Delete(o);
    /* The running lock keeps no TTL; the expired one's TTL ends exactly at
     * timestamp + grace; the old one is gone. */
    assert_int_equal(lbt_int(conn, "PTTL %s", "cli:w:run"), -1);
    assert_int_equal(pexpiretime("cli:w:recent"), recent + 10000);
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:w:old"), 0);
    /* The gate record keeps the latest timestamp found. */
    char v[32];
    snprintf(v, sizeof v, "%lld", running);
    redisReply *r = redisCommand(conn, "HGET %s %s", "{swns}:lb-gate", "legacy_until_ms");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    assert_string_equal(r->str, v);
    freeReplyObject(r);
    /* --expire-live: the running lock too, at timestamp + grace. */
    const char *live[] = {"-p", port, "sweep", "--ns", "swns", "--match", "cli:w:*", "--grace-ms",
                          "10000", "--expire-live", "--json", NULL};
    o = run_json1(live, 0);
    assert_true(lbt_num_of(o, "acted") == 1);
    cJSON_Delete(o);
    assert_int_equal(pexpiretime("cli:w:run"), running + 10000);
    assert_string_equal(lbt_get(conn, "cli:w:run"), v);
    lbt_cmd_ok(conn, "DEL %s %s %s", "cli:w:run", "cli:w:recent", "{swns}:lb-gate");
}

/* Debian's libfaketime, preloaded into the tool alone to move its host clock. */
#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

/* Every instant is judged by the server's clock: a sweeping host whose clock
 * runs 100 s ahead must not delete a lock with 30 s left (by that host's clock
 * it expired 70 s ago, past any grace below that). */
static void test_sweep_judges_by_the_server_clock_not_the_hosts(void **state) {
    (void)state;
    if (access(FAKETIME_LIB, R_OK) != 0) fail_msg("%s missing: make deps installs faketime", FAKETIME_LIB);
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)(wall_ms() + 30000));
    lbt_cmd_ok(conn, "SET %s %s", "cli:skew:k", v);
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL;
    char opts[512];
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "", asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    setenv("LD_PRELOAD", FAKETIME_LIB, 1);
    setenv("FAKETIME", "+100s", 1);
    const char *args[] = {"-p", port, "sweep", "--ns", "swns", "--match", "cli:skew:*",
                          "--grace-ms", "10000", "--json", NULL};
    int rc = lbt_run(&proc, args);
    unsetenv("LD_PRELOAD");
    unsetenv("FAKETIME");
    if (saved) setenv("ASAN_OPTIONS", saved, 1);
    else unsetenv("ASAN_OPTIONS");
    free(saved);
    if (rc != 0) fail_msg("exit %d: %s", rc, proc.err);
    assert_string_equal(lbt_get(conn, "cli:skew:k"), v);
    assert_int_equal(lbt_int(conn, "PTTL %s", "cli:skew:k"), -1);
    lbt_cmd_ok(conn, "DEL %s %s", "cli:skew:k", "{swns}:lb-gate");
}

/* ---- unlock ----------------------------------------------------------------------------- */
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
        lbt_cmd_ok(conn, "DEL %s", "cli:un:k");
        if (cases[i].set && strcmp(cases[i].set, "hash") == 0)
            lbt_cmd_ok(conn, "HSET %s f v", "cli:un:k");
        else if (cases[i].set) {
            const char *argv[] = {"SET", "cli:un:k", cases[i].set};
            redisReply *r = redisCommandArgv(conn, 3, argv, NULL);
            assert_non_null(r);
            freeReplyObject(r);
        }
        const char *args[] = {"-p", port, "unlock", "cli:un:k", "--expect", cases[i].expect,
                              "--json", NULL};
        int rc = lbt_run(&proc, args);
        if (rc != cases[i].exit) fail_msg("case %zu: exit %d: %s", i, rc, proc.out);
        cJSON *o = cJSON_Parse(proc.out);
        assert_non_null(o);
        assert_int_equal(lbt_bool_of(o, "deleted"), cases[i].deleted);
        cJSON_Delete(o);
        assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:un:k"),
                         cases[i].set && !cases[i].deleted ? 1 : 0);
    }
    /* Without --expect: a usage error, nothing sent, nothing deleted. */
    lbt_cmd_ok(conn, "SET %s %s", "cli:un:k", "x");
    long long before = lbt_calls(conn, "eval");
    const char *bare[] = {"-p", port, "unlock", "cli:un:k", NULL};
    assert_int_equal(lbt_run(&proc, bare), 1);
    assert_int_equal(lbt_calls(conn, "eval"), before);
    assert_string_equal(lbt_get(conn, "cli:un:k"), "x");
    lbt_cmd_ok(conn, "DEL %s", "cli:un:k");
}

/* Nothing that is not a TTL-less timestamp in a named epoch codec is touched:
 * unknown values, INCR counters, tokens, compat values, other types, and
 * timestamps on a monotonic clock. */
static void test_sweep_never_touches_what_it_cannot_read(void **state) {
    (void)state;
    static const char *const values[] = {"garbage", "12", "0123456789abcdef0123456789abcdef",
                                         "{\"uid\":\"x\"}", "{\"expiryTime\":5}",
                                         "1700000000000 "};
    char key[32];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "cli:n:%d", i);
        lbt_cmd_ok(conn, "SET %s %s", key, values[i]);
    }
    lbt_cmd_ok(conn, "SET %s %s PX 100000", "cli:n:compat", "1700000000000");
    lbt_cmd_ok(conn, "SADD %s %s", "cli:n:set", "m");
    const char *args[] = {"-p", port, "sweep", "--ns", "swns", "--match", "cli:n:*", "--codec", "ms",
                          "--codec", "json", "--json", NULL};
    cJSON *o = run_json1(args, 0);
    assert_true(lbt_num_of(o, "candidates") == 0);
    assert_true(lbt_num_of(o, "skipped_mono") == 1);
    const cJSON *left = cJSON_GetObjectItemCaseSensitive(o, "left_alone");
    assert_true(lbt_num_of(left, "unknown") == 2);
    assert_true(lbt_num_of(left, "incr") == 1);
    assert_true(lbt_num_of(left, "token") == 2);
    assert_true(lbt_num_of(left, "compat") == 1);
    assert_true(lbt_num_of(left, "wrongtype") == 1);
    cJSON_Delete(o);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "cli:n:%d", i);
        assert_string_equal(lbt_get(conn, key), values[i]);
        assert_int_equal(lbt_int(conn, "PTTL %s", key), -1);
    }
    assert_int_equal(lbt_int(conn, "SCARD %s", "cli:n:set"), 1);
    clear_keys("cli:n:*");
}

/* A lock taken over between the scan and the action is left alone: the sweep
 * runs through a proxy that delays every byte by 300 ms, and the key changes
 * as soon as the server has loaded the sweep's script (its second SCRIPT LOAD,
 * after the reader's), at least 600 ms before the action can reach it. */
static void test_sweep_leaves_a_lock_changed_since_the_scan(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "SET %s %lld", "cli:race:k", (long long)(wall_ms() - 3600000));
    lbt_proxy *p = lbt_proxy_start(server.port);
    assert_non_null(p);
    lbt_proxy_delay(p, 300);
    char pp[16];
    snprintf(pp, sizeof pp, "%d", lbt_proxy_port(p));
    long long before = lbt_calls(conn, "script|load");
    const char *args[] = {"-p", pp, "sweep", "--ns", "swns", "--match", "cli:race:*", "--json", NULL};
    lbt_spawn(&proc, args);
    for (int i = 0; lbt_calls(conn, "script|load") < before + 2; i++) {
        assert_true(i < LBT_STUCK_MS);
        usleep(1000);
    }
    char taken[32];
    snprintf(taken, sizeof taken, "%lld", (long long)(wall_ms() + 60000));
    lbt_cmd_ok(conn, "SET %s %s", "cli:race:k", taken); /* a legacy client's takeover */
    int rc = lbt_finish(&proc);
    lbt_proxy_stop(p);
    assert_int_equal(rc, 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[0], "action"), "delete");
    assert_false(lbt_bool_of(l.line[0], "done"));
    assert_true(lbt_num_of(l.line[1], "changed_meanwhile") == 1);
    assert_true(lbt_num_of(l.line[1], "acted") == 0);
    assert_string_equal(lbt_get(conn, "cli:race:k"), taken);
    assert_int_equal(lbt_int(conn, "PTTL %s", "cli:race:k"), -1);
    lbt_cmd_ok(conn, "DEL %s", "cli:race:k");
    lbt_lines_free(&l);
}

/* ---- Unreachable server and bad input for the migration commands ------------------- */
static void test_migration_commands_on_a_closed_port_exit_4(void **state) {
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char closed[16];
    snprintf(closed, sizeof closed, "%d", ntohs(a.sin_port));
    static const char *const cases[][6] = {
        {"inspect", "k"}, {"status", "--ns", "n"}, {"mode", "get", "--ns", "n"},
        {"mode", "set", "compat", "--ns", "n"}, {"sweep", "--ns", "n"}, {"clock"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[12];
        int n = 0;
        for (int j = 0; cases[i][j]; j++) args[n++] = cases[i][j];
        args[n++] = "-p";
        args[n++] = closed;
        args[n] = NULL;
        int rc = lbt_run(&proc, args);
        if (rc != 4) fail_msg("%s: exit %d", cases[i][0], rc);
        assert_non_null(strstr(proc.err, "cannot connect"));
    }
    close(fd);
}

/* ---- compat and the mode-following lock ------------------------------------------- */
/* compat writes what legacy clients read (a timestamp in the codec) with a
 * Redis TTL of ttl + grace, and releases its own value. */
static void test_hold_compat_writes_a_timestamp_with_a_ttl(void **state) {
    (void)state;
    int64_t before = wall_ms();
    const char *args[] = {"-p", port, "hold", "cli:compat", "--mode", "compat", "--ttl-ms",
                          "20000", "--grace-ms", "5000", "--hold-ms", "600000", NULL};
    lbt_spawn(&proc, args);
    lbt_wait_lines(&proc, 1);
    long long pttl = lbt_int(conn, "PTTL %s", "cli:compat");
    assert_true(pttl > 20000 && pttl <= 25000);
    lb_codec ms;
    int64_t t;
    const char *v = lbt_get(conn, "cli:compat");
    assert_int_equal(lb_codec_parse(&ms, "ms"), LB_OK);
    assert_int_equal(lb_codec_decode(&ms, v, strlen(v), &t), LB_OK);
    assert_true(t >= before + 20000 && t <= wall_ms() + 20001);
    assert_int_equal(kill(proc.pid, SIGTERM), 0);
    assert_int_equal(lbt_finish(&proc), 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[0], "mode"), "compat");
    assert_string_equal(lbt_str_of(l.line[0], "value"), v);
    assert_true(lbt_num_of(l.line[0], "grace_ms") == 5000);
    assert_true(lbt_bool_of(l.line[1], "still_ours"));
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:compat"), 0);
    lbt_lines_free(&l);
}

/* A live legacy lock is respected; an expired one is taken over. */
static void test_hold_compat_respects_live_legacy_locks_and_takes_expired_ones(void **state) {
    (void)state;
    char live[32];
    snprintf(live, sizeof live, "%lld", (long long)(wall_ms() + 60000));
    lbt_cmd_ok(conn, "SET %s %s", "cli:cl", live);
    const char *args[] = {"-p", port, "hold", "cli:cl", "--mode", "compat", NULL};
    assert_int_equal(lbt_run(&proc, args), 2);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_string_equal(lbt_str_of(l.line[0], "holder_format"), "legacy");
    assert_true(lbt_num_of(l.line[0], "holder_expiry") == (double)atoll(live));
    assert_string_equal(lbt_get(conn, "cli:cl"), live);
    lbt_lines_free(&l);
    lbt_cmd_ok(conn, "SET %s %lld", "cli:cl", (long long)(wall_ms() - 60000));
    assert_int_equal(lbt_run(&proc, args), 0);
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:cl"), 0);
}

/* With --ns the lock follows the namespace's control key, and joins its census. */
static long long census_size(const char *census) { return lbt_int(conn, "HLEN %s", census); }

static void test_hold_with_ns_follows_the_namespace_mode(void **state) {
    (void)state;
    static const char *const modes[] = {"modern", "compat", "legacy"};
    for (int i = 0; i < 3; i++) {
        lbt_cmd_ok(conn, "SET %s %s", "{cli:follow}:lb-mode", modes[i]);
        /* --mode compat beside a namespace in another mode: said on stderr. */
        const char *args[] = {"-p", port, "hold", "cli:fl", "--ns", "cli:follow", "--mode",
                              "compat", "--hold-ms", "1000", NULL};
        lbt_spawn(&proc, args);
        lbt_wait_lines(&proc, 1);
        /* While it runs: one census entry, in the mode the run uses. */
        redisReply *r = redisCommand(conn, "HVALS %s", "{cli:follow}:lb-census");
        assert_non_null(r);
        assert_int_equal(r->elements, 1);
        lb_census_entry e;
        assert_int_equal(lb__census_decode(r->element[0]->str, r->element[0]->len, &e), LB_OK);
        assert_string_equal(lb_mode_name(e.mode), modes[i]);
        freeReplyObject(r);
        assert_int_equal(lbt_finish(&proc), 0);
        lbt_lines l;
        lbt_parse(&proc, &l);
        assert_int_equal(l.n, 2);
        assert_string_equal(lbt_str_of(l.line[0], "mode"), modes[i]);
        assert_string_equal(lbt_str_of(l.line[0], "ns"), "cli:follow");
        if (i == 0) assert_true(is_token(lbt_str_of(l.line[0], "value")));
        assert_true(lbt_bool_of(l.line[1], "still_ours"));
        lbt_lines_free(&l);
        if (i == 1) assert_null(strstr(proc.err, "note: namespace"));
        else assert_non_null(strstr(proc.err, "the lock follows it, not --mode compat"));
        /* A run that ends cleanly takes its entry with it. */
        assert_int_equal(census_size("{cli:follow}:lb-census"), 0);
    }
    lbt_cmd_ok(conn, "DEL %s %s", "{cli:follow}:lb-mode", "{cli:follow}:lb-census");
}

/* contend's clients are threads of one process: one census entry, not one per
 * thread, gone when the run ends. */
static long long census_most;
static void census_watch(void) {
    long long n = census_size("{cli:cc}:lb-census");
    if (n > census_most) census_most = n;
}

static void test_contend_registers_one_census_entry_per_process(void **state) {
    (void)state;
    lbt_cmd_ok(conn, "SET %s %s", "{cli:cc}:lb-mode", "compat");
    const char *args[] = {"-p", port, "contend", "cli:cc:k", "--ns", "cli:cc", "--clients", "3",
                          "--seconds", "1", "--counter-key", "cli:cc:count", NULL};
    census_most = 0;
    lbt_spawn(&proc, args);
    assert_int_equal(lbt_finish_with(&proc, census_watch, 100), 0);
    assert_int_equal(census_most, 1);
    assert_int_equal(census_size("{cli:cc}:lb-census"), 0);
    /* census list and prune read and clean it from the tool. */
    lb_census_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.id, sizeof e.id, "old-host:7:x");
    snprintf(e.host, sizeof e.host, "old-host");
    snprintf(e.version, sizeof e.version, "0.1.0");
    e.mode = LB_MODE_LEGACY;
    e.pid = 7;
    lb_now now = lb_clock_now(NULL);
    now.wall_us -= INT64_C(120000) * 1000;
    assert_int_equal(lb_census_register(conn, "cli:cc", 6, &e, &now), LB_OK);
    const char *list[] = {"-p", port, "census", "list", "--ns", "cli:cc", NULL};
    assert_int_equal(lbt_run(&proc, list), 0);
    assert_non_null(strstr(proc.out, "old-host"));
    assert_non_null(strstr(proc.out, "stale"));
    const char *prune[] = {"-p", port, "census", "prune", "--ns", "cli:cc", "--json", NULL};
    cJSON *o = run_json1(prune, 0);
    assert_true(lbt_num_of(o, "pruned") == 1);
    cJSON_Delete(o);
    assert_int_equal(census_size("{cli:cc}:lb-census"), 0);
    /* Its legacy sighting stays for the gate. */
    assert_int_equal(lbt_int(conn, "HEXISTS %s %s", "{cli:cc}:lb-gate", "legacy_until_ms"), 1);
    lbt_cmd_ok(conn, "DEL %s %s %s", "{cli:cc}:lb-mode", "{cli:cc}:lb-gate", "cli:cc:count");
}

/* ---- Watchdog and fair waiting ------------------------------------------------------- */
/* A 600 ms lock held for 1.5 s survives only if it is renewed (every 200 ms:
 * two renewals in a row may fail before it lapses). */
static void test_hold_modern_watchdog_keeps_a_short_lock(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "hold", "cli:wd", "--mode", "modern", "--watchdog",
                          "--ttl-ms", "600", "--hold-ms", "1500", NULL};
    assert_int_equal(lbt_run(&proc, args), 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_true(lbt_bool_of(l.line[0], "watchdog"));
    assert_true(lbt_bool_of(l.line[1], "still_ours"));
    lbt_lines_free(&l);
    /* Without the watchdog the same hold outlives its lock. */
    const char *bare[] = {"-p", port, "hold", "cli:wd", "--mode", "modern", "--ttl-ms", "600",
                          "--hold-ms", "1500", NULL};
    assert_int_equal(lbt_run(&proc, bare), 5);
}

/* The watchdog notices the lock taken away and ends the hold at once. */
static void test_hold_modern_watchdog_reports_a_lost_lock(void **state) {
    (void)state;
    const char *args[] = {"-p", port, "hold", "cli:wdl", "--mode", "modern", "--watchdog",
                          "--ttl-ms", "900", "--hold-ms", "600000", NULL};
    lbt_spawn(&proc, args);
    lbt_wait_lines(&proc, 1);
    lbt_cmd_ok(conn, "SET %s %s PX 60000", "cli:wdl", "intruder");
    assert_int_equal(lbt_finish(&proc), 5); /* no signal: the loss ended it */
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[1], "watchdog_lost"), "LB_WATCH_REFUSED");
    assert_false(lbt_bool_of(l.line[1], "interrupted"));
    assert_string_equal(lbt_get(conn, "cli:wdl"), "intruder");
    lbt_cmd_ok(conn, "DEL %s", "cli:wdl");
    lbt_lines_free(&l);
}

/* Two fair holds: the second waits in the queue and takes the lock when the
 * first releases it. */
static void test_hold_fair_waiter_takes_the_lock_after_the_holder(void **state) {
    (void)state;
    lbt_proc first;
    const char *a1[] = {"-p", port, "hold", "cli:fair", "--mode", "modern", "--fair",
                        "--hold-ms", "600000", NULL};
    lbt_spawn(&first, a1);
    lbt_wait_lines(&first, 1);
    long long before = lbt_int(conn, "EXISTS %s", "cli:fair");
    assert_int_equal(before, 1);
    const char *a2[] = {"-p", port, "hold", "cli:fair", "--mode", "modern", "--fair",
                        "--wait-ms", "20000", NULL};
    lbt_spawn(&proc, a2);
    /* Once the second is queued, the first lets go. */
    for (int i = 0; lbt_int(conn, "EXISTS %s", "{cli:fair}:queue") == 0; i++) {
        assert_true(i < LBT_STUCK_MS);
        usleep(1000);
    }
    assert_int_equal(kill(first.pid, SIGTERM), 0);
    assert_int_equal(lbt_finish(&first), 0);
    assert_int_equal(lbt_finish(&proc), 0);
    lbt_lines l;
    lbt_parse(&proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[0], "event"), "acquired");
    assert_true(lbt_bool_of(l.line[0], "fair"));
    assert_true(lbt_bool_of(l.line[1], "still_ours"));
    assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:fair"), 0);
    lbt_lines_free(&l);
}

static void test_contend_compat_and_fair_count_every_update(void **state) {
    (void)state;
    static const char *const extra[][6] = {
        {"--mode", "compat"},
        {"--mode", "modern", "--fair"},
        {"--mode", "modern", "--watchdog", "--ttl-ms", "1000"},
    };
    for (int i = 0; i < 3; i++) {
        const char *args[24];
        int n = 0;
        const char *base[] = {"contend", "cli:cf", "-p", port, "--clients", "3", "--seconds",
                              "1", "--counter-key", "cli:cfn", "--cs-sleep-ms", "1", NULL};
        for (int j = 0; base[j]; j++) args[n++] = base[j];
        for (int j = 0; extra[i][j]; j++) args[n++] = extra[i][j];
        args[n] = NULL;
        cJSON *o = run_json1(args, 0);
        assert_true(lbt_num_of(o, "acquisitions") > 0);
        assert_true(lbt_num_of(o, "lost_updates") == 0);
        assert_true(lbt_num_of(o, "lost_locks") == 0);
        assert_true(lbt_num_of(o, "failed_clients") == 0);
        cJSON_Delete(o);
        assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:cf"), 0);
    }
    lbt_cmd_ok(conn, "DEL %s", "cli:cfn");
}

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
            lbt_cmd_ok(conn, "SET %s %s", "{cli:var}:lb-mode", cases[i].ns_mode);
        const char *hold[] = {"-p", port, "hold", "cli:var", "--mode", cases[i].mode,
                              cases[i].ns_mode ? "--ns" : NULL, "cli:var", NULL};
        const char *contend[] = {"-p", port, "contend", "cli:var", "--mode", cases[i].mode,
                                 "--clients", "2", "--seconds", "1", "--counter-key",
                                 "cli:varn", cases[i].ns_mode ? "--ns" : NULL, "cli:var",
                                 NULL};
        const char *const *runs[] = {hold, contend};
        static const int lines[] = {2, 1};
        for (int r = 0; r < 2; r++) {
            int rc = lbt_run(&proc, runs[r]);
            if (rc != 0) fail_msg("case %zu, %s: exit %d: %s", i, runs[r][2], rc, proc.err);
            lbt_lines l;
            lbt_parse(&proc, &l);
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
        assert_int_equal(lbt_int(conn, "EXISTS %s", "cli:var"), 0);
    }
    lbt_cmd_ok(conn, "DEL %s %s %s", "cli:varn", "{cli:var}:lb-mode", "{cli:var}:lb-census");
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    if (lbt_tool_init("test_cli") != 0) return -1;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    snprintf(port, sizeof port, "%d", server.port);
    conn = lbt_redis_connect(&server);
    return conn ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (conn) redisFree(conn);
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hold_prints_json_lines_and_deletes_its_key),
        cmocka_unit_test(test_hold_value_matches_its_expiry_in_every_codec),
        cmocka_unit_test(test_hold_on_a_held_key_exits_2_and_leaves_the_holder),
        cmocka_unit_test(test_hold_on_a_foreign_value_exits_3_and_leaves_it),
        cmocka_unit_test(test_hold_on_a_hash_exits_3_and_leaves_it),
        cmocka_unit_test(test_hold_prints_any_key_bytes_as_valid_json),
        cmocka_unit_test(test_hold_reports_a_lock_lost_while_held_and_exits_5),
        cmocka_unit_test(test_hold_interrupted_by_sigint_still_releases),
        cmocka_unit_test(test_hold_interrupted_while_waiting_exits_2_holding_nothing),
        cmocka_unit_test(test_hold_too_close_to_expiry_exits_5_with_eexpired),
        cmocka_unit_test(test_clock_offset_makes_a_late_client_take_over),
        cmocka_unit_test(test_bad_arguments_exit_1_with_a_one_line_message),
        cmocka_unit_test(test_help_and_version_exit_0),
        cmocka_unit_test(test_connection_refused_exits_4),
        cmocka_unit_test(test_select_chooses_the_database),
        cmocka_unit_test_setup_teardown(test_auth_with_password_and_acl_user, start_secure,
                                        stop_secure),
        cmocka_unit_test(test_contend_counts_every_update_in_both_variants),
        cmocka_unit_test(test_contend_survives_abandoned_locks),
        cmocka_unit_test(test_contend_refuses_a_counter_that_is_not_a_number),
        cmocka_unit_test(test_contend_modern_with_fencing_counts_every_update),
        cmocka_unit_test(test_hold_modern_with_fencing_reports_growing_fences),
        cmocka_unit_test(test_hold_modern_without_fencing_sets_a_ttl_and_no_counter),
        cmocka_unit_test(test_hold_modern_on_a_legacy_lock_exits_2_and_leaves_it),
        cmocka_unit_test(test_hold_modern_reports_its_lock_lost_and_exits_5),
        cmocka_unit_test(test_json_flag_anywhere_and_text_by_default_for_clock),
        cmocka_unit_test(test_hold_on_a_terminal_writes_text),
        cmocka_unit_test(test_clock_agrees_with_a_local_server),
        cmocka_unit_test(test_clock_verdicts_skewed_and_uncertain_exit_6),
        cmocka_unit_test(test_clock_without_time_command_exits_4),
        cmocka_unit_test(test_hold_compat_writes_a_timestamp_with_a_ttl),
        cmocka_unit_test(test_hold_compat_respects_live_legacy_locks_and_takes_expired_ones),
        cmocka_unit_test(test_hold_with_ns_follows_the_namespace_mode),
        cmocka_unit_test(test_contend_registers_one_census_entry_per_process),
        cmocka_unit_test(test_hold_modern_watchdog_keeps_a_short_lock),
        cmocka_unit_test(test_hold_modern_watchdog_reports_a_lost_lock),
        cmocka_unit_test(test_hold_fair_waiter_takes_the_lock_after_the_holder),
        cmocka_unit_test(test_contend_compat_and_fair_count_every_update),
        cmocka_unit_test(test_variant_is_printed_in_legacy_mode_only),
        cmocka_unit_test(test_inspect_names_the_format_of_every_kind_of_key),
        cmocka_unit_test(test_inspect_tries_the_codecs_in_order),
        cmocka_unit_test(test_status_counts_formats_and_judges_the_next_stage),
        cmocka_unit_test(test_status_reads_every_key_across_batches),
        cmocka_unit_test(test_status_and_mode_set_read_the_census),
        cmocka_unit_test(test_mode_set_refuses_modern_while_legacy_writes_unless_overridden),
        cmocka_unit_test(test_mode_refuses_jumps_back_and_foreign_control_keys),
        cmocka_unit_test(test_mode_set_modern_observes_a_legacy_client_between_its_locks),
        cmocka_unit_test(test_sweep_expires_expired_locks_deletes_old_ones_and_leaves_running_ones),
        cmocka_unit_test(test_sweep_judges_by_the_server_clock_not_the_hosts),
        cmocka_unit_test(test_unlock_deletes_only_the_value_named),
        cmocka_unit_test(test_sweep_never_touches_what_it_cannot_read),
        cmocka_unit_test(test_sweep_leaves_a_lock_changed_since_the_scan),
        cmocka_unit_test(test_migration_commands_on_a_closed_port_exit_4),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
