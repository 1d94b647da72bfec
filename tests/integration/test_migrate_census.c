/* The census against a real redis-server: entries registered, listed and
 * pruned when stale, and a handle registering itself with its mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/mlock_util.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"
#include "migrate/internal.h"

static lbt_redis server;
static redisContext *admin; /* the test's own connection, for setup and checks */

/* ---- Census -------------------------------------------------------------------------------------- */
static void test_census_registers_lists_and_prunes_stale_entries(void **state) {
    (void)state;
    const char *ns = "mt:census";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(admin, k.census);
    lbt_del(admin, k.gate);
    lb_census_entry a, b;
    memset(&a, 0, sizeof a);
    strcpy(a.id, "web-1:100:ab");
    strcpy(a.host, "web-1");
    strcpy(a.version, "0.1.0");
    a.mode = LB_MODE_COMPAT;
    a.pid = 100;
    b = a;
    strcpy(b.id, "old \"quoted\" host\x01");
    b.mode = LB_MODE_LEGACY;
    lb_now now = lb_clock_now(NULL), old = now;
    old.wall_us -= INT64_C(120) * 1000000;
    assert_int_equal(lb_census_register(lb_on_conn(admin), ns, strlen(ns), &a, &now), LB_OK);
    assert_int_equal(lb_census_register(lb_on_conn(admin), ns, strlen(ns), &b, &old), LB_OK);
    /* Something that is not an entry is listed as such and never pruned. */
    lbt_cmd_ok(admin, "HSET %s %s %s", k.census, "junk", "{not json");
    lb_census_entry *es = NULL;
    size_t n = 0;
    assert_int_equal(lb_census_list(lb_on_conn(admin), ns, strlen(ns), &now, 60000, NULL, &es, &n), LB_OK);
    assert_int_equal(n, 3);
    int seen_a = 0, seen_b = 0, seen_junk = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(es[i].id, a.id) == 0) {
            seen_a = 1;
            assert_true(es[i].valid);
            assert_false(es[i].stale);
            assert_int_equal(es[i].mode, LB_MODE_COMPAT);
            assert_string_equal(es[i].host, "web-1");
            assert_int_equal(es[i].pid, 100);
            assert_true(es[i].age_ms >= 0 && es[i].age_ms < 1000);
        } else if (strcmp(es[i].id, b.id) == 0) {
            seen_b = 1;
            assert_true(es[i].valid);
            assert_true(es[i].stale);
            assert_int_equal(es[i].mode, LB_MODE_LEGACY);
            assert_true(es[i].age_ms >= 120000);
        } else if (strcmp(es[i].id, "junk") == 0) {
            seen_junk = 1;
            assert_false(es[i].valid);
        }
    }
    assert_true(seen_a && seen_b && seen_junk);
    lb_census_free(NULL, es);
    size_t pruned = 9;
    assert_int_equal(lb_census_prune(lb_on_conn(admin), ns, strlen(ns), &now, 60000, &pruned), LB_OK);
    assert_int_equal(pruned, 1);
    assert_int_equal(lb_census_list(lb_on_conn(admin), ns, strlen(ns), &now, 60000, NULL, &es, &n), LB_OK);
    assert_int_equal(n, 2);
    lb_census_free(NULL, es);
    /* The pruned legacy entry's last sighting stays in the gate record, so the
     * tool's gate still counts that legacy client for its window. */
    char seen[24];
    snprintf(seen, sizeof seen, "%lld", (long long)(old.wall_us / 1000));
    redisReply *g = redisCommand(admin, "HGET %s legacy_until_ms", k.gate);
    assert_non_null(g);
    assert_int_equal(g->type, REDIS_REPLY_STRING);
    assert_string_equal(g->str, seen);
    freeReplyObject(g);
    lbt_del(admin, k.gate);
    /* Encode and decode are strict inverses for ASCII; bad JSON is foreign. */
    char json[2048];
    size_t len;
    lb_census_entry back;
    assert_int_equal(lb__census_encode(&b, json, sizeof json, &len), LB_OK);
    assert_int_equal(lb__census_decode(json, len, &back), LB_OK);
    assert_string_equal(back.id, b.id);
    assert_int_equal(lb__census_encode(&b, json, 20, &len), LB_EINVAL);
    static const char *bad[] = {"{}", "[]", "{\"id\":\"x\",\"mode\":\"fast\",\"version\":\"\","
                                "\"host\":\"\",\"pid\":1,\"seen_ms\":2}",
                                "{\"id\":\"x\",\"mode\":\"compat\",\"version\":\"\","
                                "\"host\":\"\",\"pid\":1.5,\"seen_ms\":2}", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(lb__census_decode(bad[i], strlen(bad[i]), &back), LB_EFOREIGN);
    lbt_cmd_ok(admin, "SET %s x", k.census);
    assert_int_equal(lb_census_list(lb_on_conn(admin), ns, strlen(ns), &now, 60000, NULL, &es, &n),
                     LB_EWRONGTYPE);
    assert_null(es);
    lbt_del(admin, k.census);
}

static void test_a_handle_registers_itself_with_its_mode(void **state) {
    (void)state;
    const char *ns = "mt:census-self", *key = "mt:census-self:k";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(admin, k.census);
    lbt_del(admin, k.mode);
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.ns = ns;
    o.mode = LB_MODE_LEGACY;
    o.client_id = "billing-7";
    o.host = "h7";
    lb_mlock *l = NULL;
    assert_int_equal(lb_mlock_new(&l, key, strlen(key), &o), LB_OK);
    assert_string_equal(lb_mlock_info_of(l).client_id, "billing-7");
    lbt_del(admin, key);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    lb_census_entry *es = NULL;
    size_t n = 0;
    lb_now now = lb_clock_now(NULL);
    assert_int_equal(lb_census_list(lb_on_conn(admin), ns, strlen(ns), &now, 60000, NULL, &es, &n), LB_OK);
    assert_int_equal(n, 1);
    assert_string_equal(es[0].id, "billing-7");
    assert_string_equal(es[0].host, "h7");
    assert_string_equal(es[0].version, LB_VERSION_STRING);
    assert_int_equal(es[0].mode, LB_MODE_LEGACY);
    assert_int_equal(es[0].pid, getpid());
    lb_census_free(NULL, es);
    lb_mlock_free(l);
    /* A follower's entry says the mode it read, from its very first refresh:
     * configured legacy, it must not hold modern back once the key says compat. */
    lbt_del(admin, k.census);
    assert_int_equal(lb_mode_set(lb_on_conn(admin), ns, strlen(ns), LB_MODE_COMPAT, NULL, NULL), LB_OK);
    o.follow = 1;
    o.client_id = "billing-8";
    assert_int_equal(lb_mlock_new(&l, key, strlen(key), &o), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_census_list(lb_on_conn(admin), ns, strlen(ns), &now, 60000, NULL, &es, &n), LB_OK);
    assert_int_equal(n, 1);
    assert_true(es[0].valid);
    assert_int_equal(es[0].mode, LB_MODE_COMPAT);
    lb_census_free(NULL, es);
    /* A control key in no known form: the entry keeps the mode in use. */
    lbt_cmd_ok(admin, "SET %s %s", k.mode, "\"mode\":\"?\"");
    assert_int_equal(lb_mlock_refresh(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_census_list(lb_on_conn(admin), ns, strlen(ns), &now, 60000, NULL, &es, &n), LB_OK);
    assert_int_equal(n, 1);
    assert_true(es[0].valid);
    assert_int_equal(es[0].mode, LB_MODE_COMPAT);
    lb_census_free(NULL, es);
    lb_mlock_free(l);
    lbt_del(admin, k.mode);
    o.follow = 0;
    /* A default identity is host:pid:random. */
    o.client_id = NULL;
    assert_int_equal(lb_mlock_new(&l, key, strlen(key), &o), LB_OK);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "h7:%ld:", (long)getpid());
    assert_memory_equal(lb_mlock_info_of(l).client_id, prefix, strlen(prefix));
    lb_mlock_free(l);
    lbt_del(admin, k.census);
}

static int setup(void **state) {
    (void)state;
    if (lbt_redis_start(&server, NULL) != 0) return -1;
    admin = lbt_redis_connect(&server);
    return admin ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    if (admin) redisFree(admin);
    lbt_redis_stop(&server);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_census_registers_lists_and_prunes_stale_entries),
        cmocka_unit_test(test_a_handle_registers_itself_with_its_mode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
