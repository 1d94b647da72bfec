/* Test harness: the migration shim's handles made for a test, and checks of
 * the keys they write (cmocka assertions: linked into the test binaries only). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "harness/mlock_util.h"
#include "harness/redis_util.h"

void lbt_del(redisContext *c, const char *key) { lbt_cmd_ok(c, "DEL %s", key); }

long long lbt_pttl(redisContext *c, const char *key) { return lbt_int(c, "PTTL %s", key); }

void lbt_assert_key(redisContext *c, const char *key, const char *v, size_t len) {
    redisReply *r = redisCommand(c, "GET %s", key);
    assert_non_null(r);
    if (!v) {
        assert_int_equal(r->type, REDIS_REPLY_NIL);
    } else {
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_int_equal(r->len, len);
        assert_memory_equal(r->str, v, len);
    }
    freeReplyObject(r);
}

void lbt_assert_key_is_ours(redisContext *c, const char *key, const lb_mlock *l) {
    size_t len = lb_mlock_info_of(l).value_len;
    const char *v = lb_mlock_info_of(l).value;
    assert_true(len > 0);
    lbt_assert_key(c, key, v, len);
}

lb_mlock *lbt_mlock(const char *key, lb_mode mode, const char *codec, int64_t ttl_ms,
                    const lb_clock *clock) {
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.mode = mode;
    o.ttl_ms = ttl_ms;
    o.clock = clock;
    if (codec) assert_int_equal(lb_codec_parse(&o.codec, codec), LB_OK);
    lb_mlock *l = NULL;
    assert_int_equal(lb_mlock_new(&l, key, strlen(key), &o), LB_OK);
    return l;
}

lb_mlock *lbt_follower(const char *key, const char *ns, lb_mode configured, int64_t refresh_ms) {
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.ns = ns;
    o.follow = 1;
    o.mode = configured;
    o.mode_refresh_ms = refresh_ms;
    o.ttl_ms = 5000;
    o.client_id = NULL;
    lb_mlock *l = NULL;
    assert_int_equal(lb_mlock_new(&l, key, strlen(key), &o), LB_OK);
    return l;
}

size_t lbt_expiry_value(const char *codec_spec, int64_t offset_ms, char *out) {
    lb_codec codec;
    size_t len = 0;
    assert_int_equal(lb_codec_parse(&codec, codec_spec), LB_OK);
    lb_now now = lb_clock_now(NULL);
    int64_t span = 0, t = lb_codec_now(&codec, &now);
    assert_int_equal(lb_codec_ms_to_units(&codec, offset_ms < 0 ? -offset_ms : offset_ms, &span),
                     LB_OK);
    t += offset_ms < 0 ? -span : span;
    assert_int_equal(lb_codec_encode(&codec, t, out, LB_VALUE_MAX, &len), LB_OK);
    return len;
}
