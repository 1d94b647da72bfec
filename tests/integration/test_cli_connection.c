/* How the tool reaches its server, run as a child process: a port that
 * refuses connections exits 4 for every command, -n chooses the database,
 * -a and --user authenticate.
 * The tool is $LB_TOOL, or $BUILD/lockbridge (BUILD defaults to build). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "harness/cli.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"
#include "tool/common/loopback.h"

static lbt_cli cli;

/* A loopback port bound without listening, written into `out`: it refuses
 * connections for as long as the returned socket stays open. */
static int closed_port(char out[16]) {
    int port = 0, fd = lb__loopback_bind(0, 0, 0, &port);
    assert_true(fd >= 0);
    snprintf(out, 16, "%d", port);
    return fd;
}

static void test_connection_refused_exits_4(void **state) {
    (void)state;
    char closed[16];
    int fd = closed_port(closed);
    const char *hold[] = {"hold", "cli:refused", "-p", closed, NULL};
    const char *contend[] = {"contend", "cli:refused", "-p", closed, "--clients", "2",
                             "--seconds", "1", "--counter-key", "cli:refused:n", NULL};
    const char *const *cases[] = {hold, contend};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(lbt_run(&cli.proc, cases[i]), 4);
        lbt_lines l;
        lbt_parse(&cli.proc, &l);
        assert_int_equal(l.n, 1);
        assert_string_equal(lbt_str_of(l.line[0], "event"), "error");
        assert_string_equal(lbt_str_of(l.line[0], "status"), "LB_EIO");
        assert_true(cli.proc.errlen > 0);
        lbt_lines_free(&l);
    }
    close(fd);
}

static void test_migration_commands_on_a_closed_port_exit_4(void **state) {
    (void)state;
    char closed[16];
    int fd = closed_port(closed);
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
        int rc = lbt_run(&cli.proc, args);
        if (rc != 4) fail_msg("%s: exit %d", cases[i][0], rc);
        assert_non_null(strstr(cli.proc.err, "cannot connect"));
    }
    close(fd);
}

static void test_select_chooses_the_database(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SELECT 3");
    lb_legacy_lock *other = lbt_legacy_holder(cli.conn, "cli:db");
    lbt_cmd_ok(cli.conn, "SELECT 0");
    const char *in_db3[] = {"-n", "3", "-p", cli.port, "hold", "cli:db", NULL};
    const char *in_db0[] = {"-p", cli.port, "hold", "cli:db", NULL};
    assert_int_equal(lbt_run(&cli.proc, in_db3), 2);
    assert_int_equal(lbt_run(&cli.proc, in_db0), 0);
    lbt_cmd_ok(cli.conn, "SELECT 3");
    assert_int_equal(lb_legacy_release(other, lb_on_conn(cli.conn)), LB_OK);
    lbt_cmd_ok(cli.conn, "SELECT 0");
    lb_legacy_lock_free(other);
}

/* A database the server does not have: the SELECT's refusal, in the server's
 * words, ends the command with exit 4 before anything is written. */
static void test_a_database_the_server_lacks_is_refused_with_its_reason(void **state) {
    (void)state;
    const char *args[] = {"-n", "99", "-p", cli.port, "hold", "cli:nodb", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 4);
    assert_non_null(strstr(cli.proc.err, "SELECT"));
    assert_non_null(strstr(cli.proc.err, "out of range"));
    assert_string_equal(lbt_get(cli.conn, "cli:nodb"), "");
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
        int rc = lbt_run(&cli.proc, args);
        if (rc != cases[i].exit) fail_msg("case %zu: exit %d: %s", i, rc, cli.proc.err);
    }
}

/* A server on a Unix socket that wants a password: -s reaches it, -a
 * authenticates there, and a refusal names the socket and the reason. */
static lbt_redis on_socket;
static char socket_path[108];

static int start_on_socket(void **state) {
    (void)state;
    snprintf(socket_path, sizeof socket_path, "%s/lb-cli-%d.sock",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    const char *extra[] = {"--unixsocket", socket_path, "--unixsocketperm", "700", NULL};
    if (lbt_redis_start(&on_socket, extra) != 0) return -1;
    redisContext *c = lbt_redis_connect(&on_socket);
    if (!c) return -1;
    redisReply *pass = redisCommand(c, "CONFIG SET requirepass s3cret");
    int ok = pass && pass->type == REDIS_REPLY_STATUS;
    if (pass) freeReplyObject(pass);
    redisFree(c);
    return ok ? 0 : -1;
}

static int stop_on_socket(void **state) {
    (void)state;
    lbt_redis_stop(&on_socket);
    unlink(socket_path);
    return 0;
}

static void test_a_unix_socket_with_auth(void **state) {
    (void)state;
    const char *good[] = {"-s", socket_path, "-a", "s3cret", "hold", "cli:sock", NULL};
    assert_int_equal(lbt_run(&cli.proc, good), 0);
    const char *wrong[] = {"-s", socket_path, "-a", "wrong", "hold", "cli:sock", NULL};
    assert_int_equal(lbt_run(&cli.proc, wrong), 4);
    assert_non_null(strstr(cli.proc.err, "unix:"));
    assert_non_null(strstr(cli.proc.err, "AUTH"));
    assert_non_null(strstr(cli.proc.err, "WRONGPASS"));
    const char *none[] = {"-s", "/nonexistent/lb.sock", "hold", "cli:sock", NULL};
    assert_int_equal(lbt_run(&cli.proc, none), 4);
    assert_non_null(strstr(cli.proc.err, "cannot connect to unix:/nonexistent/lb.sock"));
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_connection");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connection_refused_exits_4),
        cmocka_unit_test(test_select_chooses_the_database),
        cmocka_unit_test(test_a_database_the_server_lacks_is_refused_with_its_reason),
        cmocka_unit_test_setup_teardown(test_a_unix_socket_with_auth, start_on_socket,
                                        stop_on_socket),
        cmocka_unit_test_setup_teardown(test_auth_with_password_and_acl_user, start_secure,
                                        stop_secure),
        cmocka_unit_test(test_migration_commands_on_a_closed_port_exit_4),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
