/* `lockbridge hold` with the legacy timestamp lock, run as a child process
 * against a real redis-server: its JSON lines and exit codes, the value of
 * every codec and variant, held, foreign and wrong-type keys, any key bytes, a
 * lock lost while held, signals, the release margin, a client clock running
 * late, and text on a terminal.
 * The tool is $LB_TOOL, or $BUILD/lockbridge (BUILD defaults to build). */
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
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "harness/cli.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"

static lbt_cli cli;

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

static void test_hold_prints_json_lines_and_deletes_its_key(void **state) {
    (void)state;
    int64_t before = lbt_wall_ms();
    const char *args[] = {"-p", cli.port, "hold", "cli:hold", "--ttl-ms", "20000", "--hold-ms",
                          "10", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 0);
    int64_t after = lbt_wall_ms();
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
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
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:hold"), 0);
    assert_int_equal(cli.proc.errlen, 0);
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
        const char *args[] = {"hold", "cli:codec", "-p", cli.port, "--codec", cases[i].codec,
                              "--variant", cases[i].variant, NULL};
        assert_int_equal(lbt_run(&cli.proc, args), 0);
        lbt_lines l;
        lbt_parse(&cli.proc, &l);
        assert_int_equal(l.n, 2);
        lb_codec c;
        int64_t t;
        const char *value = lbt_str_of(l.line[0], "value");
        assert_int_equal(lb_codec_parse(&c, lbt_str_of(l.line[0], "codec")), LB_OK);
        assert_int_equal(lb_codec_decode(&c, value, strlen(value), &t), LB_OK);
        /* Raw JSON digits: compared as text, since a nanosecond instant does not
         * survive a double. */
        char expect[32], *raw = strstr(cli.proc.out, "\"expiry\":");
        assert_non_null(raw);
        snprintf(expect, sizeof expect, "\"expiry\":%lld,", (long long)t);
        assert_memory_equal(raw, expect, strlen(expect));
        assert_string_equal(lbt_str_of(l.line[0], "variant"), cases[i].variant);
        assert_true(lbt_bool_of(l.line[1], "still_ours"));
        assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:codec"), 0);
        lbt_lines_free(&l);
    }
}

static void test_hold_on_a_held_key_exits_2_and_leaves_the_holder(void **state) {
    (void)state;
    lb_legacy_lock *other = lbt_legacy_holder(cli.conn, "cli:held");
    char theirs[64];
    snprintf(theirs, sizeof theirs, "%s", lb_legacy_info_of(other).value);
    static const struct {
        const char *wait_ms, *reason;
    } cases[] = {{"0", "busy"}, {"30", "timeout"}};
    for (size_t i = 0; i < 2; i++) {
        const char *args[] = {"hold", "cli:held", "--wait-ms", cases[i].wait_ms, "-p", cli.port,
                              NULL};
        assert_int_equal(lbt_run(&cli.proc, args), 2);
        lbt_lines l;
        lbt_parse(&cli.proc, &l);
        assert_int_equal(l.n, 1);
        assert_string_equal(lbt_str_of(l.line[0], "event"), "not_acquired");
        assert_string_equal(lbt_str_of(l.line[0], "reason"), cases[i].reason);
        assert_string_equal(lbt_str_of(l.line[0], "status"), "LB_ETIMEDOUT");
        assert_true(lbt_num_of(l.line[0], "holder_expiry") == (double)lb_legacy_info_of(other).expiry);
        assert_string_equal(lbt_get(cli.conn, "cli:held"), theirs);
        lbt_lines_free(&l);
    }
    assert_int_equal(lb_legacy_release(other, lb_on_conn(cli.conn)), LB_OK);
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
        lbt_cmd_ok(cli.conn, "SET %s %b", "cli:foreign", cases[i].value, cases[i].len);
        const char *args[] = {"-p", cli.port, "hold", "cli:foreign", "--wait-ms", "20", NULL};
        assert_int_equal(lbt_run(&cli.proc, args), 3);
        lbt_lines l;
        lbt_parse(&cli.proc, &l);
        assert_int_equal(l.n, 1);
        assert_string_equal(lbt_str_of(l.line[0], "event"), "not_acquired");
        assert_string_equal(lbt_str_of(l.line[0], "reason"), "foreign");
        assert_string_equal(lbt_str_of(l.line[0], "status"), "LB_EFOREIGN");
        assert_true(lbt_bool_of(l.line[0], "left_alone"));
        redisReply *r = redisCommand(cli.conn, "GET %s", "cli:foreign");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_int_equal(r->len, cases[i].len);
        assert_memory_equal(r->str, cases[i].value, cases[i].len);
        freeReplyObject(r);
        lbt_lines_free(&l);
    }
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:foreign");
}

static void test_hold_on_a_hash_exits_3_and_leaves_it(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "HSET %s f v", "cli:hash");
    const char *args[] = {"-p", cli.port, "hold", "cli:hash", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 3);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(lbt_str_of(l.line[0], "reason"), "wrongtype");
    assert_string_equal(lbt_str_of(l.line[0], "status"), "LB_EWRONGTYPE");
    assert_int_equal(lbt_int(cli.conn, "HLEN %s", "cli:hash"), 1);
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:hash");
    lbt_lines_free(&l);
}

/* Keys are bytes: control bytes, quotes and bytes that are not UTF-8 still make
 * valid JSON, and decoding gives back the exact bytes. */
static void test_hold_prints_any_key_bytes_as_valid_json(void **state) {
    (void)state;
    static const char key[] = "cli:\xff\x01\"\\\xc3\xa9\n";
    const char *args[] = {"-p", cli.port, "hold", key, NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    char bytes[64];
    for (int i = 0; i < 2; i++) {
        size_t n = latin1_bytes(lbt_str_of(l.line[i], "key"), bytes, sizeof bytes);
        assert_int_equal(n, sizeof key - 1);
        assert_memory_equal(bytes, key, n);
    }
    assert_int_equal(lbt_int(cli.conn, "EXISTS %b", key, sizeof key - 1), 0);
    lbt_lines_free(&l);
}

/* The tool holds until signalled; meanwhile the key is overwritten, as by a
 * contender that judged the lock expired: the release finds it lost. */
static void test_hold_reports_a_lock_lost_while_held_and_exits_5(void **state) {
    (void)state;
    const char *args[] = {"-p", cli.port, "hold", "cli:lost", "--hold-ms", "600000", NULL};
    lbt_spawn(&cli.proc, args);
    lbt_wait_lines(&cli.proc, 1);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:lost"), 1);
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:lost", "1");
    assert_int_equal(kill(cli.proc.pid, SIGTERM), 0);
    assert_int_equal(lbt_finish(&cli.proc), 5);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_string_equal(lbt_str_of(l.line[1], "event"), "released");
    assert_false(lbt_bool_of(l.line[1], "still_ours"));
    assert_string_equal(lbt_str_of(l.line[1], "status"), "LB_ELOST");
    assert_true(lbt_bool_of(l.line[1], "interrupted"));
    assert_string_equal(lbt_get(cli.conn, "cli:lost"), "1");
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:lost");
    lbt_lines_free(&l);
}

static void test_hold_interrupted_by_sigint_still_releases(void **state) {
    (void)state;
    const char *args[] = {"-p", cli.port, "hold", "cli:sigint", "--hold-ms", "600000", NULL};
    lbt_spawn(&cli.proc, args);
    lbt_wait_lines(&cli.proc, 1);
    assert_int_equal(kill(cli.proc.pid, SIGINT), 0);
    assert_int_equal(lbt_finish(&cli.proc), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_true(lbt_bool_of(l.line[1], "still_ours"));
    assert_true(lbt_bool_of(l.line[1], "interrupted"));
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:sigint"), 0);
    lbt_lines_free(&l);
}

static void test_hold_interrupted_while_waiting_exits_2_holding_nothing(void **state) {
    (void)state;
    lb_legacy_lock *other = lbt_legacy_holder(cli.conn, "cli:waiting");
    char theirs[64];
    snprintf(theirs, sizeof theirs, "%s", lb_legacy_info_of(other).value);
    long long before = lbt_calls(cli.conn, "setnx");
    const char *args[] = {"-p", cli.port, "hold", "cli:waiting", "--wait-ms", "600000", NULL};
    lbt_spawn(&cli.proc, args);
    /* Once the tool has attempted, it is in its wait loop with signals held. */
    for (int i = 0; lbt_calls(cli.conn, "setnx") == before; i++) {
        assert_true(i < LBT_STUCK_MS);
        usleep(1000);
    }
    assert_int_equal(kill(cli.proc.pid, SIGINT), 0);
    assert_int_equal(lbt_finish(&cli.proc), 2);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 1);
    assert_string_equal(lbt_str_of(l.line[0], "event"), "not_acquired");
    assert_string_equal(lbt_str_of(l.line[0], "reason"), "interrupted");
    assert_string_equal(lbt_get(cli.conn, "cli:waiting"), theirs);
    assert_int_equal(lb_legacy_release(other, lb_on_conn(cli.conn)), LB_OK);
    lb_legacy_lock_free(other);
    lbt_lines_free(&l);
}

/* A wire release refuses to delete a lock within the release margin of its
 * expiry: held until 900 ms of a 1500 ms lock are left, it is "too close". */
static void test_hold_too_close_to_expiry_exits_5_with_eexpired(void **state) {
    (void)state;
    const char *args[] = {"-p", cli.port, "hold", "cli:close", "--ttl-ms", "1500", "--hold-ms",
                          "600", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 5);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_false(lbt_bool_of(l.line[1], "still_ours"));
    assert_string_equal(lbt_str_of(l.line[1], "status"), "LB_EEXPIRED");
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:close"), 1); /* left to expire */
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:close");
    lbt_lines_free(&l);
}

/* A client whose clock runs an hour late sees a 30 s lock as long expired and
 * takes it over, as such a host would. */
static void test_clock_offset_makes_a_late_client_take_over(void **state) {
    (void)state;
    lb_legacy_lock *other = lbt_legacy_holder(cli.conn, "cli:skew");
    int64_t before = lbt_wall_ms();
    const char *args[] = {"-p", cli.port, "hold", "cli:skew", "--clock-offset-ms", "3600000",
                          "--hold-ms", "0", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
    assert_int_equal(l.n, 2);
    assert_true(lbt_num_of(l.line[0], "expiry") >= (double)(before + 3600000 + 30000));
    assert_int_equal(lb_legacy_release(other, lb_on_conn(cli.conn)), LB_ELOST);
    lb_legacy_lock_free(other);
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
        execl(lbt_tool(), lbt_tool(), "-p", cli.port, "hold", "cli:tty", (char *)NULL);
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
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:tty"), 0);
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_hold");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
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
        cmocka_unit_test(test_hold_on_a_terminal_writes_text),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
