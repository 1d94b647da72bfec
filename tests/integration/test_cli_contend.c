/* `lockbridge contend`, run as a child process against a real redis-server:
 * every update counted in each variant and mode, abandoned locks taken over,
 * a counter that is not a number refused, and one census entry per process
 * (read and pruned by `census list` and `census prune`).
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

typedef struct lbt_summary {
    double acquisitions, delta, lost_updates, abandoned, per_client_sum, floor_thirds;
    double counter_end;
    int per_client_n;
} lbt_summary;

static void run_contend(const char *const *extra, lbt_summary *s) {
    const char *args[32];
    int n = 0;
    const char *base[] = {"contend", "cli:contend", "-p", cli.port, "--clients", "4", "--seconds",
                          "1", "--counter-key", "cli:counter", NULL};
    for (int i = 0; base[i]; i++) args[n++] = base[i];
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    memset(s, 0, sizeof *s);
    int rc = lbt_run(&cli.proc, args);
    if (rc != 0) fail_msg("contend exit %d: %s", rc, cli.proc.err);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
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
        assert_string_equal(lbt_get(cli.conn, "cli:counter"), end);
        assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:contend"), 0);
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
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:contend");
}

static void test_contend_refuses_a_counter_that_is_not_a_number(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s %s", "cli:badcounter", "twelve");
    const char *args[] = {"contend", "cli:contend", "-p", cli.port, "--clients", "2", "--seconds",
                          "1", "--counter-key", "cli:badcounter", NULL};
    assert_int_equal(lbt_run(&cli.proc, args), 4);
    assert_string_equal(lbt_get(cli.conn, "cli:badcounter"), "twelve");
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:contend"), 0);
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:badcounter");
}

/* Token locks with fencing: every update counted, and every critical section's
 * fencing number above the one before it. */
static void test_contend_modern_with_fencing_counts_every_update(void **state) {
    (void)state;
    const char *extra[] = {"--mode", "modern", "--fencing", NULL};
    const char *args[32];
    int n = 0;
    const char *base[] = {"contend", "cli:mcontend", "-p", cli.port, "--clients", "3", "--seconds",
                          "1", "--counter-key", "cli:mcounter", NULL};
    for (int i = 0; base[i]; i++) args[n++] = base[i];
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    assert_int_equal(lbt_run(&cli.proc, args), 0);
    lbt_lines l;
    lbt_parse(&cli.proc, &l);
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
    assert_string_equal(lbt_get(cli.conn, "{cli:mcontend}:fence"), expect);
    assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:mcontend"), 0);
    lbt_cmd_ok(cli.conn, "DEL %s %s", "{cli:mcontend}:fence", "cli:mcounter");
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
        const char *base[] = {"contend", "cli:cf", "-p", cli.port, "--clients", "3", "--seconds",
                              "1", "--counter-key", "cli:cfn", "--cs-sleep-ms", "1", NULL};
        for (int j = 0; base[j]; j++) args[n++] = base[j];
        for (int j = 0; extra[i][j]; j++) args[n++] = extra[i][j];
        args[n] = NULL;
        cJSON *o = lbt_run_json(&cli.proc, args, 0);
        assert_true(lbt_num_of(o, "acquisitions") > 0);
        assert_true(lbt_num_of(o, "lost_updates") == 0);
        assert_true(lbt_num_of(o, "lost_locks") == 0);
        assert_true(lbt_num_of(o, "failed_clients") == 0);
        cJSON_Delete(o);
        assert_int_equal(lbt_int(cli.conn, "EXISTS %s", "cli:cf"), 0);
    }
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:cfn");
}

/* ---- What the server ran ------------------------------------------------------------- */
/* The test's own reading: every calls= of INFO commandstats but INFO's. */
static long long server_total(void) {
    redisReply *r = redisCommand(cli.conn, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    long long total = 0;
    for (char *line = strtok(r->str, "\r\n"); line; line = strtok(NULL, "\r\n")) {
        char name[64];
        long long calls;
        if (sscanf(line, "cmdstat_%63[^:]:calls=%lld", name, &calls) == 2 &&
            strcmp(name, "info") != 0)
            total += calls;
    }
    freeReplyObject(r);
    return total;
}

static cJSON *run_counted(const char *const *extra, const char *user) {
    const char *args[32];
    int n = 0;
    const char *base[] = {"contend", "cli:sc", "-p", cli.port, "--clients", "3", "--seconds",
                          "1", "--counter-key", "cli:scn", "--json", NULL};
    for (int i = 0; base[i]; i++) args[n++] = base[i];
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    if (user) {
        args[n++] = "--user";
        args[n++] = user;
        args[n++] = "-a";
        args[n++] = "pw";
    }
    args[n] = NULL;
    return lbt_run_json(&cli.proc, args, 0);
}

/* server_commands is what the server ran during the run, the commands inside
 * scripts included: at least every command the clients sent plus the
 * section's GET and SET, at most what the test's own readings around the run
 * count (connections and the counter's reads fall outside the tool's). With a
 * script in the loop, more than was sent. max_over_min is the per_client
 * array's. */
static void test_contend_reports_the_commands_the_server_ran(void **state) {
    (void)state;
    static const char *const extra[][5] = {
        {"--mode", "modern"},
        {"--mode", "modern", "--fair"},
        {"--variant", "scripted"},
    };
    for (int i = 0; i < 3; i++) {
        long long before = server_total();
        cJSON *o = run_counted(extra[i], NULL);
        long long after = server_total();
        double acq = lbt_num_of(o, "acquisitions"), sent = lbt_num_of(o, "commands");
        double ran = lbt_num_of(o, "server_commands");
        assert_true(acq > 0);
        assert_true(ran > sent + 2 * acq);
        assert_true(ran <= (double)(after - before));
        double per = lbt_num_of(o, "server_commands_per_acquisition");
        assert_true(per > ran / acq - 1e-9 && per < ran / acq + 1e-9);
        const cJSON *pc = cJSON_GetObjectItemCaseSensitive(o, "per_client"), *it;
        double most = 0, fewest = 1e300;
        cJSON_ArrayForEach(it, pc) {
            if (it->valuedouble > most) most = it->valuedouble;
            if (it->valuedouble < fewest) fewest = it->valuedouble;
        }
        if (fewest > 0) {
            double mm = lbt_num_of(o, "max_over_min");
            assert_true(mm > most / fewest - 1e-9 && mm < most / fewest + 1e-9);
        } else {
            assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "max_over_min")));
        }
        cJSON_Delete(o);
    }
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:scn");
}

/* A user the ACL keeps from INFO still runs contend: the server's count is
 * unknown (null), not zero. */
static void test_contend_reports_no_server_count_when_info_is_refused(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "ACL SETUSER lbnoinfo on >pw ~* &* +@all -info");
    const char *extra[] = {"--mode", "modern", NULL};
    cJSON *o = run_counted(extra, "lbnoinfo");
    assert_true(lbt_num_of(o, "acquisitions") > 0);
    assert_true(lbt_num_of(o, "failed_clients") == 0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "server_commands")));
    assert_true(
        cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "server_commands_per_acquisition")));
    assert_true(lbt_num_of(o, "commands_per_acquisition") > 0);
    cJSON_Delete(o);
    lbt_cmd_ok(cli.conn, "ACL DELUSER lbnoinfo");
    lbt_cmd_ok(cli.conn, "DEL %s", "cli:scn");
}

/* With --ns the lock follows the namespace's control key, and joins its census. */
static long long census_size(const char *census) { return lbt_int(cli.conn, "HLEN %s", census); }

/* contend's clients are threads of one process: one census entry, not one per
 * thread, gone when the run ends. */
static long long census_most;

static void census_watch(void) {
    long long n = census_size("{cli:cc}:lb-census");
    if (n > census_most) census_most = n;
}

static void test_contend_registers_one_census_entry_per_process(void **state) {
    (void)state;
    lbt_cmd_ok(cli.conn, "SET %s %s", "{cli:cc}:lb-mode", "compat");
    const char *args[] = {"-p", cli.port, "contend", "cli:cc:k", "--ns", "cli:cc", "--clients", "3",
                          "--seconds", "1", "--counter-key", "cli:cc:count", NULL};
    census_most = 0;
    lbt_spawn(&cli.proc, args);
    assert_int_equal(lbt_finish_with(&cli.proc, census_watch, 100), 0);
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
    assert_int_equal(lb_census_register(lb_on_conn(cli.conn), "cli:cc", 6, &e, &now), LB_OK);
    const char *list[] = {"-p", cli.port, "census", "list", "--ns", "cli:cc", NULL};
    assert_int_equal(lbt_run(&cli.proc, list), 0);
    assert_non_null(strstr(cli.proc.out, "old-host"));
    assert_non_null(strstr(cli.proc.out, "stale"));
    const char *prune[] = {"-p", cli.port, "census", "prune", "--ns", "cli:cc", "--json", NULL};
    cJSON *o = lbt_run_json(&cli.proc, prune, 0);
    assert_true(lbt_num_of(o, "pruned") == 1);
    cJSON_Delete(o);
    assert_int_equal(census_size("{cli:cc}:lb-census"), 0);
    /* Its legacy sighting stays for the gate. */
    assert_int_equal(lbt_int(cli.conn, "HEXISTS %s %s", "{cli:cc}:lb-gate", "legacy_until_ms"), 1);
    lbt_cmd_ok(cli.conn, "DEL %s %s %s", "{cli:cc}:lb-mode", "{cli:cc}:lb-gate", "cli:cc:count");
}

/* ---- Fixture -------------------------------------------------------------------------- */
static int setup(void **state) {
    (void)state;
    return lbt_cli_start(&cli, "test_cli_contend");
}

static int teardown(void **state) {
    (void)state;
    lbt_cli_stop(&cli);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contend_counts_every_update_in_both_variants),
        cmocka_unit_test(test_contend_survives_abandoned_locks),
        cmocka_unit_test(test_contend_refuses_a_counter_that_is_not_a_number),
        cmocka_unit_test(test_contend_modern_with_fencing_counts_every_update),
        cmocka_unit_test(test_contend_registers_one_census_entry_per_process),
        cmocka_unit_test(test_contend_compat_and_fair_count_every_update),
        cmocka_unit_test(test_contend_reports_the_commands_the_server_ran),
        cmocka_unit_test(test_contend_reports_no_server_count_when_info_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
