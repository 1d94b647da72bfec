/* Unit tests of what the cluster driver parses from the cluster, without a
 * server: addresses, MOVED/ASK redirections, retryable errors and CLUSTER
 * SLOTS replies of every bad shape (replies are read from RESP text). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "core/cluster_internal.h"
#include "lockbridge/sentinel.h"

/* A reply read from `len` bytes of RESP text by hiredis's own reader; caller
 * frees. */
static redisReply *resp_n(const char *text, size_t len) {
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    assert_int_equal(redisReaderFeed(rd, text, len), REDIS_OK);
    void *r = NULL;
    assert_int_equal(redisReaderGetReply(rd, &r), REDIS_OK);
    assert_non_null(r);
    redisReaderFree(rd);
    return r;
}

static redisReply *resp(const char *text) { return resp_n(text, strlen(text)); }

static void test_addresses_split_at_the_last_colon_and_refuse_bad_ports(void **state) {
    (void)state;
    static const struct {
        const char *in;
        const char *host; /* NULL: refused */
        int port;
    } cases[] = {
        {"127.0.0.1:6379", "127.0.0.1", 6379},
        {"redis-0.example:1", "redis-0.example", 1},
        {"::1:7000", "::1", 7000},
        {"[::1]:7000", "::1", 7000},
        {":7000", "fallback", 7000},
        {"h:65535", "h", 65535},
        {"h:65536", NULL, 0},
        {"h:0", NULL, 0},
        {"h:", NULL, 0},
        {"h", NULL, 0},
        {"h:+1", NULL, 0},
        {"h:-1", NULL, 0},
        {"h:1 ", NULL, 0},
        {"h:000001", NULL, 0},
        {"[]:1", "fallback", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb__addr a;
        int rc = lb__addr_parse(cases[i].in, strlen(cases[i].in), "fallback", &a);
        if (!cases[i].host) {
            assert_int_equal(rc, LB_EINVAL);
            continue;
        }
        assert_int_equal(rc, LB_OK);
        assert_string_equal(a.host, cases[i].host);
        assert_int_equal(a.port, cases[i].port);
    }
    lb__addr a;
    assert_int_equal(lb__addr_parse(":7000", 5, NULL, &a), LB_EINVAL);
    char longhost[LB__HOST_CAP + 8];
    memset(longhost, 'h', LB__HOST_CAP);
    memcpy(longhost + LB__HOST_CAP, ":1", 3);
    assert_int_equal(lb__addr_parse(longhost, strlen(longhost), NULL, &a), LB_EINVAL);
    assert_int_equal(lb__addr_parse("h\0x:1", 5, NULL, &a), LB_EINVAL);
}

static void test_redirections_are_parsed_strictly(void **state) {
    (void)state;
    static const struct {
        const char *err;
        lb__redirect kind;
        unsigned slot;
        const char *host;
        int port;
    } cases[] = {
        {"MOVED 3999 127.0.0.1:6381", LB__REDIRECT_MOVED, 3999, "127.0.0.1", 6381},
        {"ASK 3999 127.0.0.1:6381", LB__REDIRECT_ASK, 3999, "127.0.0.1", 6381},
        {"MOVED 0 [::1]:7000", LB__REDIRECT_MOVED, 0, "::1", 7000},
        {"MOVED 16383 :7000", LB__REDIRECT_MOVED, 16383, "answering", 7000},
        {"MOVED 16384 h:1", LB__REDIRECT_NONE, 0, NULL, 0},
        {"MOVED 123456 h:1", LB__REDIRECT_NONE, 0, NULL, 0},
        {"MOVED  h:1", LB__REDIRECT_NONE, 0, NULL, 0},
        {"MOVED 12 h", LB__REDIRECT_NONE, 0, NULL, 0},
        {"MOVED 12 h:0", LB__REDIRECT_NONE, 0, NULL, 0},
        {"MOVED 12 h:1 extra", LB__REDIRECT_NONE, 0, NULL, 0},
        {"MOVED -1 h:1", LB__REDIRECT_NONE, 0, NULL, 0},
        {"MOVED 12", LB__REDIRECT_NONE, 0, NULL, 0},
        {"MOVED", LB__REDIRECT_NONE, 0, NULL, 0},
        {"ASKING 1 h:1", LB__REDIRECT_NONE, 0, NULL, 0},
        {"moved 1 h:1", LB__REDIRECT_NONE, 0, NULL, 0},
        {"ERR MOVED 1 h:1", LB__REDIRECT_NONE, 0, NULL, 0},
        {"TRYAGAIN Multiple keys request during rehashing of slot", LB__REDIRECT_NONE, 0, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned slot = 99;
        lb__addr to;
        lb__redirect kind = lb__redirect_parse(cases[i].err, strlen(cases[i].err), "answering",
                                               &slot, &to);
        assert_int_equal(kind, cases[i].kind);
        if (kind == LB__REDIRECT_NONE) {
            assert_int_equal(slot, 0);
            continue;
        }
        assert_int_equal(slot, cases[i].slot);
        assert_string_equal(to.host, cases[i].host);
        assert_int_equal(to.port, cases[i].port);
    }
}

static void test_only_cluster_wait_errors_are_retryable(void **state) {
    (void)state;
    static const struct {
        const char *err;
        int retry;
    } cases[] = {
        {"TRYAGAIN Multiple keys request during rehashing of slot", 1},
        {"CLUSTERDOWN The cluster is down", 1},
        {"CLUSTERDOWN Hash slot not served", 1},
        {"LOADING Redis is loading the dataset in memory", 1},
        {"TRYAGAIN", 1},
        {"TRYAGAINX", 0},
        {"ERR TRYAGAIN", 0},
        {"WRONGTYPE Operation against a key holding the wrong kind of value", 0},
        {"NOSCRIPT No matching script", 0},
        {"MOVED 1 h:1", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(lb__cluster_retryable(cases[i].err, strlen(cases[i].err)), cases[i].retry);
}

#define ID "$40\r\n0123456789012345678901234567890123456789\r\n"

static void test_a_slot_map_is_read_from_cluster_slots(void **state) {
    (void)state;
    /* Two ranges on one primary (with replicas), one on another announced
     * with an empty host, one with a nil host, one with an unknown endpoint. */
    const char *text =
        "*5\r\n"
        "*4\r\n:0\r\n:99\r\n*3\r\n$4\r\nhost\r\n:7000\r\n" ID "*3\r\n$4\r\nrepl\r\n:7003\r\n" ID
        "*3\r\n:200\r\n:300\r\n*2\r\n$4\r\nhost\r\n:7000\r\n"
        "*3\r\n:301\r\n:301\r\n*3\r\n$0\r\n\r\n:7001\r\n" ID
        "*3\r\n:302\r\n:400\r\n*2\r\n$-1\r\n:7002\r\n"
        "*3\r\n:16000\r\n:16383\r\n*2\r\n$1\r\n?\r\n:7009\r\n";
    redisReply *r = resp(text);
    lb__slotmap m;
    assert_int_equal(lb__slotmap_parse(&m, r, "asked", NULL), LB_OK);
    assert_int_equal(m.naddrs, 3);
    assert_string_equal(m.addrs[m.owner[0]].host, "host");
    assert_int_equal(m.addrs[m.owner[99]].port, 7000);
    assert_int_equal(m.owner[100], LB__NO_NODE);
    assert_int_equal(m.owner[250], m.owner[0]);
    assert_string_equal(m.addrs[m.owner[301]].host, "asked");
    assert_int_equal(m.addrs[m.owner[301]].port, 7001);
    assert_string_equal(m.addrs[m.owner[400]].host, "asked");
    assert_int_equal(m.addrs[m.owner[400]].port, 7002);
    assert_int_equal(m.owner[401], LB__NO_NODE);
    assert_int_equal(m.owner[16000], LB__NO_NODE);
    assert_int_equal(m.owner[16383], LB__NO_NODE);
    lb__slotmap_clear(&m);
    freeReplyObject(r);
}

static void test_slot_maps_of_any_bad_shape_are_refused(void **state) {
    (void)state;
    static const char *const bad[] = {
        "+OK\r\n",
        "-ERR This instance has cluster support disabled\r\n",
        "*1\r\n:0\r\n",                                             /* range not an array */
        "*1\r\n*2\r\n:0\r\n:1\r\n",                                 /* no primary */
        "*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n",          /* start > end */
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",      /* past the last slot */
        "*1\r\n*3\r\n:-1\r\n:3\r\n*2\r\n$1\r\nh\r\n:1\r\n",
        "*1\r\n*3\r\n$1\r\n0\r\n:3\r\n*2\r\n$1\r\nh\r\n:1\r\n",     /* slot as a string */
        "*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$1\r\nh\r\n:0\r\n",          /* port 0 */
        "*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$1\r\nh\r\n:65536\r\n",
        "*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$1\r\nh\r\n$4\r\n6379\r\n",  /* port as a string */
        "*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n:1\r\n:1\r\n",               /* host as an integer */
        "*1\r\n*3\r\n:0\r\n:3\r\n*1\r\n$1\r\nh\r\n",                /* no port */
        "*1\r\n*3\r\n:0\r\n:3\r\n$1\r\nh\r\n",                      /* primary not an array */
        "*2\r\n*3\r\n:0\r\n:10\r\n*2\r\n$1\r\na\r\n:1\r\n"
        "*3\r\n:10\r\n:20\r\n*2\r\n$1\r\nb\r\n:1\r\n",              /* overlapping ranges */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *r = resp(bad[i]);
        lb__slotmap m;
        assert_int_equal(lb__slotmap_parse(&m, r, "asked", NULL), LB_EPROTO);
        assert_int_equal(m.naddrs, 0);
        assert_null(m.addrs);
        assert_int_equal(m.owner[0], LB__NO_NODE);
        freeReplyObject(r);
    }
    lb__slotmap m;
    assert_int_equal(lb__slotmap_parse(&m, NULL, "asked", NULL), LB_EPROTO);
    /* A NUL inside the host would truncate the name we connect to. */
    static const char nul[] = "*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$3\r\nh\0h\r\n:1\r\n";
    redisReply *withnul = resp_n(nul, sizeof nul - 1);
    assert_int_equal(lb__slotmap_parse(&m, withnul, "asked", NULL), LB_EPROTO);
    freeReplyObject(withnul);
    /* An empty host with nothing to fall back on is no address. */
    redisReply *r = resp("*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$0\r\n\r\n:1\r\n");
    assert_int_equal(lb__slotmap_parse(&m, r, NULL, NULL), LB_EPROTO);
    freeReplyObject(r);
}

static void test_the_key_slot_hashes_the_first_non_empty_tag(void **state) {
    (void)state;
    /* Check value of CRC16/XMODEM: "123456789" -> 0x31C3. */
    assert_int_equal(lb_cluster_keyslot("123456789", 9), 0x31C3);
    assert_int_equal(lb_cluster_keyslot("{123456789}", 11), 0x31C3);
    assert_int_equal(lb_cluster_keyslot("x{123456789}y{z}", 16), 0x31C3);
    assert_int_not_equal(lb_cluster_keyslot("{}123456789", 11), 0x31C3);
    assert_int_equal(lb_cluster_keyslot("", 0), 0);
    assert_int_equal(lb_cluster_keyslot(NULL, 5), 0);
    for (int i = 0; i < 1000; i++) {
        char k[32], c[64];
        int n = snprintf(k, sizeof k, "key:%d", i);
        int m = lb_companion_key(k, (size_t)n, "fence", c, sizeof c);
        assert_true(m > 0);
        assert_int_equal(lb_cluster_keyslot(k, (size_t)n), lb_cluster_keyslot(c, (size_t)m));
        assert_true(lb_cluster_keyslot(k, (size_t)n) < LB_CLUSTER_SLOTS);
    }
}

/* The cluster's and the sentinel's stats return a status like every other
 * _stats_get: LB_EINVAL without a handle, the output reset all the same. */
static void test_stats_of_no_handle_are_refused_and_reset(void **state) {
    (void)state;
    lb_cluster_stats cs;
    memset(&cs, 0xff, sizeof cs);
    assert_int_equal(lb_cluster_stats_get(NULL, &cs), LB_EINVAL);
    assert_int_equal(cs.commands, 0);
    assert_int_equal(cs.primaries, 0);
    lb_sentinel_stats ss;
    memset(&ss, 0xff, sizeof ss);
    assert_int_equal(lb_sentinel_stats_get(NULL, &ss), LB_EINVAL);
    assert_int_equal(ss.resolves, 0);
    assert_int_equal(lb_cluster_stats_get(NULL, NULL), LB_EINVAL);
    assert_int_equal(lb_sentinel_stats_get(NULL, NULL), LB_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addresses_split_at_the_last_colon_and_refuse_bad_ports),
        cmocka_unit_test(test_redirections_are_parsed_strictly),
        cmocka_unit_test(test_only_cluster_wait_errors_are_retryable),
        cmocka_unit_test(test_a_slot_map_is_read_from_cluster_slots),
        cmocka_unit_test(test_slot_maps_of_any_bad_shape_are_refused),
        cmocka_unit_test(test_the_key_slot_hashes_the_first_non_empty_tag),
        cmocka_unit_test(test_stats_of_no_handle_are_refused_and_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
