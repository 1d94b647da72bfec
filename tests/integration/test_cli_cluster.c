/* The lockbridge tool's scanning commands (status, sweep, mode) on a six-node
 * Redis Cluster, run as a child process: every primary is scanned, the control
 * key lives on its slot's owner, an unreachable primary is an error. The tool is
 * $LB_TOOL, or $BUILD/lockbridge (BUILD defaults to build). */
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
#include "harness/cluster.h"
#include "harness/proc.h"
#include "harness/redis_util.h"
#include "lockbridge/cluster.h"
#include "lockbridge/lockbridge.h"

/* Long enough that a crashed primary is not replaced while a test runs, ms. */
#define NODE_TIMEOUT_MS 30000
#define NKEYS 30 /* keys spread over the slots, so over every primary */

static lbt_cluster cluster;
static lbt_proc proc;

/* ---- The cluster ----------------------------------------------------------------- */
/* The node that owns `key`'s slot. */
static int owner_of(const char *key) {
    int i = lbt_cluster_owner(&cluster, lb_cluster_keyslot(key, strlen(key)));
    assert_true(i >= 0);
    return i;
}

/* Runs a command on the owner of `key` (the first %s); fails on an error reply.
 * Returns the integer reply, or 0 for any other. */
static long long on_owner(const char *key, const char *fmt, ...) {
    redisContext *c = lbt_redis_connect(&cluster.node[owner_of(key)]);
    assert_non_null(c);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR) fail_msg("%s: %s", fmt, r->str);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

/* The string value of `key` on its owner; "" when absent. */
static const char *value_of(const char *key) {
    redisContext *c = lbt_redis_connect(&cluster.node[owner_of(key)]);
    assert_non_null(c);
    const char *v = lbt_get(c, key);
    redisFree(c);
    return v;
}

/* `prefix`N for N in [0, NKEYS), checked to fall on all three primaries. */
static void key_name(char *out, size_t cap, const char *prefix, int i) {
    snprintf(out, cap, "%s%d", prefix, i);
}

static void assert_spread(const char *prefix) {
    int seen[LBT_CLUSTER_NODES] = {0}, primaries = 0;
    char k[64];
    for (int i = 0; i < NKEYS; i++) {
        key_name(k, sizeof k, prefix, i);
        seen[owner_of(k)]++;
    }
    for (int i = 0; i < LBT_CLUSTER_NODES; i++) primaries += seen[i] > 0;
    assert_int_equal(primaries, 3);
}

static char port_buf[LBT_CLUSTER_NODES][16];
static const char *port_of(int node) {
    snprintf(port_buf[node], sizeof port_buf[node], "%d", cluster.node[node].port);
    return port_buf[node];
}

/* A primary other than `a` and `b` (either may be -1). */
static int other_primary(int a, int b) {
    for (int i = 0; i < LBT_CLUSTER_NODES; i++)
        if (i != a && i != b && lbt_cluster_is_primary(&cluster, i)) return i;
    fail_msg("no other primary");
    return -1;
}

/* ---- status ------------------------------------------------------------------------ */
/* Half legacy timestamps, half compat ones, over every primary: status counts
 * them all whichever node it is pointed at, a replica included. A tool that
 * scanned only the node it connected to would count about a third. */
static void test_status_counts_the_keys_of_every_primary(void **state) {
    (void)state;
    char k[64], v[32];
    snprintf(v, sizeof v, "%lld", (long long)(lbt_wall_ms() + 600000));
    assert_spread("clc:s:");
    for (int i = 0; i < NKEYS; i++) {
        key_name(k, sizeof k, "clc:s:", i);
        if (i % 2) on_owner(k, "SET %s %s PX 600000", k, v);
        else on_owner(k, "SET %s %s", k, v);
    }
    int primary = owner_of("clc:s:0"), replica = lbt_cluster_replica_of(&cluster, primary);
    assert_true(replica >= 0);
    int entry[] = {primary, replica};
    for (int e = 0; e < 2; e++) {
        const char *args[] = {"-p", port_of(entry[e]), "status", "--ns", "clc-s", "--match",
                              "clc:s:*", "--count", "7", "--json", NULL};
        cJSON *o = lbt_run_json(&proc, args, 0);
        assert_string_equal(lbt_str_of(o, "event"), "status");
        assert_true(lbt_num_of(o, "keys") == NKEYS);
        assert_true(lbt_bool_of(o, "cluster"));
        assert_true(lbt_num_of(o, "primaries_scanned") == 3);
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "formats");
        assert_true(lbt_num_of(f, "legacy") == NKEYS / 2);
        assert_true(lbt_num_of(f, "compat") == NKEYS / 2);
        assert_true(lbt_num_of(o, "ttl_less") == NKEYS / 2);
        cJSON_Delete(o);
    }
    /* Text names the primaries too. */
    const char *text[] = {"-p", port_of(primary), "status", "--ns", "clc-s", "--match",
                          "clc:s:*", NULL};
    assert_int_equal(lbt_run(&proc, text), 0);
    assert_non_null(strstr(proc.out, "on 3 cluster primaries"));
    for (int i = 0; i < NKEYS; i++) {
        key_name(k, sizeof k, "clc:s:", i);
        on_owner(k, "DEL %s", k);
    }
}

/* ---- sweep ------------------------------------------------------------------------- */
/* TTL-less legacy locks on every primary get their TTL or are removed, each by
 * a script on the node that holds it; compat values and values in no format
 * are left as they were. */
static void test_sweep_acts_on_the_keys_of_every_primary(void **state) {
    (void)state;
    char k[64], run[32], old[32];
    int64_t now = lbt_wall_ms();
    long long running = now + 600000;
    snprintf(run, sizeof run, "%lld", running);
    snprintf(old, sizeof old, "%lld", (long long)(now - 3600000));
    assert_spread("clc:w:");
    for (int i = 0; i < NKEYS; i++) {
        key_name(k, sizeof k, "clc:w:", i);
        switch (i % 4) {
        case 0: on_owner(k, "SET %s %s", k, run); break;
        case 1: on_owner(k, "SET %s %s", k, old); break;
        case 2: on_owner(k, "SET %s %s PX 600000", k, run); break;
        default: on_owner(k, "SET %s %s", k, "not a lock"); break;
        }
    }
    int expire = 0, del = 0;
    for (int i = 0; i < NKEYS; i++) expire += i % 4 == 0, del += i % 4 == 1;
    const char *args[] = {"-p", port_of(0), "sweep", "--ns", "swns", "--match", "clc:w:*", "--grace-ms",
                          "10000", "--count", "5", "--expire-live", "--json", NULL};
    cJSON *o = lbt_run_json(&proc, args, 0);
    assert_string_equal(lbt_str_of(o, "event"), "sweep_summary");
    assert_true(lbt_num_of(o, "scanned") == NKEYS);
    assert_true(lbt_bool_of(o, "cluster"));
    assert_true(lbt_num_of(o, "primaries_scanned") == 3);
    assert_true(lbt_num_of(o, "candidates") == expire + del);
    assert_true(lbt_num_of(o, "to_delete") == del);
    assert_true(lbt_num_of(o, "acted") == expire + del);
    assert_true(lbt_num_of(o, "changed_meanwhile") == 0);
    cJSON_Delete(o);
    for (int i = 0; i < NKEYS; i++) {
        key_name(k, sizeof k, "clc:w:", i);
        switch (i % 4) {
        case 0:
            assert_string_equal(value_of(k), run);
            assert_int_equal(on_owner(k, "PEXPIRETIME %s", k), running + 10000);
            break;
        case 1: assert_int_equal(on_owner(k, "EXISTS %s", k), 0); break;
        case 2:
            assert_string_equal(value_of(k), run);
            assert_true(on_owner(k, "PTTL %s", k) > 0);
            assert_true(on_owner(k, "PEXPIRETIME %s", k) <= now + 600000 + 1000);
            break;
        default:
            assert_string_equal(value_of(k), "not a lock");
            assert_int_equal(on_owner(k, "PTTL %s", k), -1);
            break;
        }
        on_owner(k, "DEL %s", k);
    }
}

/* ---- mode ---------------------------------------------------------------------------- */
/* The control key is read and written on its slot's owner, whichever node the
 * tool is pointed at. */
static void test_mode_get_and_set_on_any_node(void **state) {
    (void)state;
    lb_ns_keys nk;
    assert_int_equal(lb_ns_keys_init(&nk, "clc-m", 5), LB_OK);
    char mode_key[128];
    snprintf(mode_key, sizeof mode_key, "%.*s", (int)nk.modelen, nk.mode);
    int owner = owner_of(mode_key), elsewhere = other_primary(owner, -1);
    const char *get[] = {"-p", port_of(elsewhere), "mode", "get", "--ns", "clc-m", "--json",
                         NULL};
    cJSON *o = lbt_run_json(&proc, get, 0);
    assert_string_equal(lbt_str_of(o, "mode"), "legacy");
    assert_false(lbt_bool_of(o, "control_key_present"));
    cJSON_Delete(o);
    /* Stages that last no time and no watch: a loosening only mode config's
     * named overrides make (the record lives on the namespace's primary). */
    const char *loose[] = {"-p", port_of(elsewhere), "mode", "config", "--ns", "clc-m",
                           "--ttl-ms", "0", "--refresh-ms", "0", "--observe-ms", "0",
                           "--override", "ttl-ms", "--override", "refresh-ms", "--override",
                           "observe-ms", NULL};
    assert_int_equal(lbt_run(&proc, loose), 0);
    const char *set[] = {"-p", port_of(elsewhere), "mode", "set", "compat", "--ns", "clc-m",
                         "--match", "clc:m:*", "--json", NULL};
    o = lbt_run_json(&proc, set, 0);
    assert_true(lbt_bool_of(o, "changed"));
    cJSON_Delete(o);
    assert_string_equal(value_of(mode_key), "compat");
    o = lbt_run_json(&proc, get, 0);
    assert_string_equal(lbt_str_of(o, "mode"), "compat");
    assert_true(lbt_bool_of(o, "control_key_present"));
    cJSON_Delete(o);
    /* Forward to modern: a running TTL-less timestamp on a third primary blocks. */
    char k[64];
    int third = other_primary(owner, elsewhere);
    for (int i = 0;; i++) {
        key_name(k, sizeof k, "clc:m:", i);
        if (owner_of(k) == third) break;
    }
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)(lbt_wall_ms() + 600000));
    on_owner(k, "SET %s %s", k, v);
    const char *modern[] = {"-p", port_of(elsewhere), "mode", "set", "modern", "--ns",
                            "clc-m", "--match", "clc:m:*", "--observe-ms", "0", "--json",
                            NULL};
    o = lbt_run_json(&proc, modern, 6);
    assert_false(lbt_bool_of(o, "changed"));
    cJSON_Delete(o);
    assert_string_equal(value_of(mode_key), "compat");
    on_owner(k, "DEL %s", k);
    /* The gate remembers the lock it saw (deleted by hand here, as an operator
     * would after checking its holder is gone): the evidence, the observation
     * (--observe-ms 0) and the now empty scan are skipped by name. */
    const char *skip[] = {"-p", port_of(elsewhere), "mode", "set", "modern", "--ns", "clc-m",
                          "--match", "clc:m:*", "--observe-ms", "0", "--override",
                          "legacy-writers", "--override", "observation", "--override",
                          "empty-scan", "--json", NULL};
    o = lbt_run_json(&proc, skip, 0);
    assert_true(lbt_bool_of(o, "changed"));
    cJSON_Delete(o);
    assert_string_equal(value_of(mode_key), "modern");
    on_owner(mode_key, "DEL %s", mode_key);
}

/* SETNX calls on primaries other than the one the tool is pointed at, made
 * all through its observation, refuse modern: the counts are summed. */
static const char *setnx_key;
static void setnx_meanwhile(void) {
    on_owner(setnx_key, "SETNX %s 1", setnx_key);
    on_owner(setnx_key, "DEL %s", setnx_key);
}

static void test_mode_set_modern_counts_setnx_on_every_primary(void **state) {
    (void)state;
    lb_ns_keys nk;
    assert_int_equal(lb_ns_keys_init(&nk, "clc-o", 5), LB_OK);
    char mode_key[128];
    snprintf(mode_key, sizeof mode_key, "%.*s", (int)nk.modelen, nk.mode);
    on_owner(mode_key, "SET %s compat", mode_key);
    int entry = owner_of(mode_key), other = other_primary(entry, -1);
    static char k[64];
    for (int i = 0;; i++) {
        snprintf(k, sizeof k, "clc-other:%d", i);
        if (owner_of(k) == other) break;
    }
    setnx_key = k;
    /* The control key was written by hand (when its stage began is unknown)
     * and no lock key matches: those checks are skipped by name, so that the
     * SETNX calls on another primary are the one blocker left. The watch is
     * stored shorter than the default first. */
    const char *watch[] = {"-p", port_of(entry), "mode", "config", "--ns", "clc-o",
                           "--observe-ms", "1500", "--override", "observe-ms", NULL};
    assert_int_equal(lbt_run(&proc, watch), 0);
    const char *args[] = {"-p", port_of(entry), "mode", "set", "modern", "--ns", "clc-o",
                          "--match", "clc:o:*", "--observe-ms", "1500", "--override",
                          "stage-time", "--override", "empty-scan", "--json", NULL};
    lbt_spawn(&proc, args);
    cJSON *o = lbt_last_json(&proc, lbt_finish_with(&proc, setnx_meanwhile, 50), 6);
    assert_false(lbt_bool_of(o, "changed"));
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "blockers");
    assert_true(cJSON_IsArray(b) && cJSON_GetArraySize(b) == 1);
    assert_non_null(strstr(lbt_str_of(cJSON_GetArrayItem(b, 0), "reason"), "SETNX/GETSET"));
    cJSON_Delete(o);
    assert_string_equal(value_of(mode_key), "compat");
    on_owner(mode_key, "DEL %s", mode_key);
}

/* Runs a command on every node; fails on an error reply. */
__attribute__((format(printf, 1, 2))) static void on_every_node(const char *fmt, ...) {
    for (int i = 0; i < LBT_CLUSTER_NODES; i++) {
        redisContext *c = lbt_redis_connect(&cluster.node[i]);
        assert_non_null(c);
        va_list ap;
        va_start(ap, fmt);
        lbt_vcmd_ok(c, fmt, ap);
        va_end(ap);
        redisFree(c);
    }
}

/* A user refused INFO is still recognised as on a cluster (CLUSTER INFO), and
 * every primary is scanned with its credentials. */
static void test_status_on_a_cluster_with_info_refused_scans_every_primary(void **state) {
    (void)state;
    char k[64];
    assert_spread("clc:a:");
    for (int i = 0; i < NKEYS; i++) {
        key_name(k, sizeof k, "clc:a:", i);
        on_owner(k, "SET %s %s", k, "not a lock");
    }
    on_every_node("ACL SETUSER %s on %s ~* &* +@all -info", "clc-noinfo", ">clc-pw");
    const char *args[] = {"-p", port_of(owner_of("clc:a:0")), "--user", "clc-noinfo", "-a",
                          "clc-pw", "status", "--ns", "clc-a", "--match", "clc:a:*", "--json",
                          NULL};
    cJSON *o = lbt_run_json(&proc, args, 0);
    assert_true(lbt_num_of(o, "keys") == NKEYS);
    assert_true(lbt_bool_of(o, "cluster"));
    assert_true(lbt_num_of(o, "primaries_scanned") == 3);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "formats");
    assert_true(lbt_num_of(f, "unknown") == NKEYS);
    cJSON_Delete(o);
    on_every_node("ACL DELUSER %s", "clc-noinfo");
    for (int i = 0; i < NKEYS; i++) {
        key_name(k, sizeof k, "clc:a:", i);
        on_owner(k, "DEL %s", k);
    }
}

/* ---- An unreachable primary --------------------------------------------------------- */
/* A primary that is down before its replica takes over: every scanning command
 * stops with exit 4 and names it, rather than giving a partial count. Last: the
 * cluster is left with a primary down. */
static void test_an_unreachable_primary_is_an_error_naming_it(void **state) {
    (void)state;
    int entry = owner_of("clc:u:0"), down = other_primary(entry, -1);
    char name[32];
    snprintf(name, sizeof name, "127.0.0.1:%d", cluster.node[down].port);
    lbt_cluster_crash(&cluster, down);
    static const char *const cases[][10] = {
        {"status", "--ns", "clc-u", "--match", "clc:u:*", "--json"},
        {"sweep", "--ns", "swns", "--match", "clc:u:*", "--json"},
        {"mode", "set", "modern", "--ns", "clc-u", "--json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[16] = {"-p", port_of(entry)};
        int n = 2;
        for (int j = 0; cases[i][j]; j++) args[n++] = cases[i][j];
        args[n] = NULL;
        int rc = lbt_run(&proc, args);
        if (rc != 4) fail_msg("%s: exit %d: %s", cases[i][0], rc, proc.err);
        if (!strstr(proc.err, name)) fail_msg("%s: %s does not name %s", cases[i][0], proc.err, name);
    }
}

/* ---- Fixture -------------------------------------------------------------------------- */
/* ---- lock commands through any node ---------------------------------------------- */
/* `hold` pointed at any node, a replica included, for keys of every primary
 * and every mode (with a namespace on a primary of its own, and with the
 * fair waiter and the watchdog): the lock is taken and released on the key's
 * owner. A tool that sent the lock's commands to the node it was given would
 * be answered MOVED for two keys in three. */
static void test_hold_works_through_every_node_for_every_mode(void **state) {
    (void)state;
    static const char *const modes[][5] = {
        {"--mode", "legacy", NULL},
        {"--mode", "legacy", "--variant", "scripted", NULL},
        {"--mode", "compat", NULL},
        {"--mode", "compat", "--ns", "clh-ns", NULL},
        {"--mode", "modern", "--fencing", NULL},
        {"--mode", "modern", "--fair", "--watchdog", NULL},
    };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        /* One key on each primary. */
        char keys[LBT_CLUSTER_NODES][64];
        int have[LBT_CLUSTER_NODES] = {0}, nkeys = 0;
        for (int i = 0; nkeys < 3; i++) {
            char k[64];
            snprintf(k, sizeof k, "clh:%zu:%d", m, i);
            if (have[owner_of(k)]++ == 0) snprintf(keys[nkeys++], sizeof keys[0], "%s", k);
        }
        for (int n = 0; n < LBT_CLUSTER_NODES; n++) {
            for (int i = 0; i < nkeys; i++) {
                const char *k = keys[i];
                const char *args[16] = {"-p", port_of(n), "hold", k, "--hold-ms", "0",
                                        "--json"};
                int a = 7;
                for (int j = 0; modes[m][j]; j++) args[a++] = modes[m][j];
                args[a] = NULL;
                int rc = lbt_run(&proc, args);
                if (rc != 0)
                    fail_msg("%s through node %d (%s): exit %d: %s %s", k, n, modes[m][1], rc,
                             proc.out, proc.err);
                cJSON *o = lbt_last_json(&proc, rc, 0);
                assert_string_equal(lbt_str_of(o, "event"), "released");
                cJSON_Delete(o);
                assert_string_equal(value_of(k), "");
            }
        }
    }
}

/* `inspect` pointed at any node reads the key on its owner. */
static void test_inspect_reads_a_key_through_every_node(void **state) {
    (void)state;
    const char *key = "cli:inspect:cl";
    on_owner(key, "SET %s %s", key, "value-on-owner");
    for (int n = 0; n < LBT_CLUSTER_NODES; n++) {
        const char *args[] = {"-p", port_of(n), "inspect", key, "--json", NULL};
        cJSON *o = lbt_run_json(&proc, args, 0);
        assert_string_equal(lbt_str_of(o, "type"), "string");
        assert_string_equal(lbt_str_of(o, "value"), "value-on-owner");
        cJSON_Delete(o);
    }
    on_owner(key, "DEL %s", key);
}

/* `contend` through a node that owns neither the lock nor the counter: every
 * client's lock commands and counter updates reach their owners. */
static void test_contend_through_a_node_that_owns_neither_key(void **state) {
    (void)state;
    const char *key = "clc:contend", *counter = "clc:contend:n";
    int node = other_primary(owner_of(key), owner_of(counter));
    for (int mode = 0; mode < 2; mode++) {
        const char *args[] = {"-p", port_of(node), "contend", key, "--clients", "4",
                              "--seconds", "1", "--counter-key", counter, "--mode",
                              mode ? "modern" : "compat", "--wait-ms", "2000", "--json", NULL};
        cJSON *o = lbt_run_json(&proc, args, 0);
        assert_true(lbt_num_of(o, "acquisitions") > 0);
        assert_true(lbt_num_of(o, "lost_updates") == 0);
        assert_true(lbt_num_of(o, "failed_clients") == 0);
        cJSON_Delete(o);
    }
    on_owner(counter, "DEL %s", counter);
}

static int setup(void **state) {
    (void)state;
    if (lbt_tool_init("test_cli_cluster") != 0) return -1;
    return lbt_cluster_start(&cluster, NODE_TIMEOUT_MS);
}

static int teardown(void **state) {
    (void)state;
    lbt_cluster_stop(&cluster);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_counts_the_keys_of_every_primary),
        cmocka_unit_test(test_sweep_acts_on_the_keys_of_every_primary),
        cmocka_unit_test(test_mode_get_and_set_on_any_node),
        cmocka_unit_test(test_mode_set_modern_counts_setnx_on_every_primary),
        cmocka_unit_test(test_status_on_a_cluster_with_info_refused_scans_every_primary),
        cmocka_unit_test(test_hold_works_through_every_node_for_every_mode),
        cmocka_unit_test(test_contend_through_a_node_that_owns_neither_key),
        cmocka_unit_test(test_inspect_reads_a_key_through_every_node),
        cmocka_unit_test(test_an_unreachable_primary_is_an_error_naming_it),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
