/* The migration shim against a real redis-server: modes and the control key,
 * the classifier, the cross-format scripts meeting every format, compat values
 * as legacy readers see them, the census, and mixed fleets of adjacent modes on
 * one counter (threads and processes), with a mode switch in the middle. */
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>

#include "harness/churn.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "harness/cancel.h"
#include "lockbridge/lockbridge.h"
#include "migrate/internal.h"

static lbt_redis server;
static redisContext *admin; /* the test's own connection, for setup and checks */

/* ---- Helpers -------------------------------------------------------------------------- */
static void lbt_del(const char *key) { lbt_cmd_ok(admin, "DEL %s", key); }

static long long lbt_pttl(const char *key) { return lbt_int(admin, "PTTL %s", key); }

/* Asserts the key holds exactly these bytes (v == NULL: the key is absent). */
static void assert_key(const char *key, const char *v, size_t len) {
    redisReply *r = redisCommand(admin, "GET %s", key);
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

static void assert_key_is_ours(const char *key, const lb_mlock *l) {
    size_t len = lb_mlock_info_of(l).value_len;
    const char *v = lb_mlock_info_of(l).value;
    assert_true(len > 0);
    assert_key(key, v, len);
}

static lb_mlock *lbt_mlock(const char *key, lb_mode mode, const char *codec, int64_t ttl_ms,
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

/* A value of `codec` expiring `offset_ms` from now (negative: expired). */
static size_t lbt_expiry_value(const char *codec_spec, int64_t offset_ms, char *out) {
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

/* ---- Modes and the control key ----------------------------------------------------------- */
static void test_mode_names_round_trip_and_strangers_are_refused(void **state) {
    (void)state;
    static const struct { const char *s; int rc; lb_mode m; } t[] = {
        {"legacy", LB_OK, LB_MODE_LEGACY}, {"compat", LB_OK, LB_MODE_COMPAT},
        {"modern", LB_OK, LB_MODE_MODERN}, {"Modern", LB_EINVAL, LB_MODE_LEGACY},
        {"modern ", LB_EINVAL, LB_MODE_LEGACY}, {"", LB_EINVAL, LB_MODE_LEGACY},
        {"compatible", LB_EINVAL, LB_MODE_LEGACY},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        lb_mode m = LB_MODE_MODERN;
        assert_int_equal(lb_mode_parse(t[i].s, strlen(t[i].s), &m), t[i].rc);
        assert_int_equal(m, t[i].m);
        if (t[i].rc == LB_OK) assert_string_equal(lb_mode_name(m), t[i].s);
    }
    assert_string_equal(lb_mode_name((lb_mode)7), "unknown");
    lb_mode m;
    assert_int_equal(lb_mode_parse("compat\0x", 8, &m), LB_EINVAL);
}

static void test_namespace_names_share_one_slot_and_bad_names_are_refused(void **state) {
    (void)state;
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, "orders", 6), LB_OK);
    assert_string_equal(k.mode, "{orders}:lb-mode");
    assert_string_equal(k.channel, "{orders}:lb-mode-ch");
    assert_string_equal(k.census, "{orders}:lb-census");
    assert_int_equal(k.modelen, strlen(k.mode));
    assert_int_equal(lb_ns_keys_init(&k, "{app}:orders", 12), LB_OK);
    assert_string_equal(k.mode, "{app}:orders:lb-mode");
    assert_int_equal(lb_ns_keys_init(&k, "a}b", 3), LB_EINVAL);
    assert_string_equal(k.mode, "");
    assert_int_equal(lb_ns_keys_init(&k, "", 0), LB_EINVAL);
    char big[400];
    memset(big, 'n', sizeof big);
    assert_int_equal(lb_ns_keys_init(&k, big, sizeof big), LB_EINVAL);
}

static void test_mode_is_read_set_compared_and_published(void **state) {
    (void)state;
    const char *ns = "mt:modes";
    lb_ns_keys k;
    lb_mode m;
    int found;
    long long receivers = -1;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(k.mode);
    assert_int_equal(lb_mode_get(admin, ns, strlen(ns), &m, &found), LB_OK);
    assert_int_equal(found, 0);

    /* A subscriber hears every set. */
    redisContext *sub = lbt_redis_connect(&server);
    assert_non_null(sub);
    lbt_cmd_ok(sub, "SUBSCRIBE %s", k.channel);
    redisReply *r;
    assert_int_equal(lb_mode_set(admin, ns, strlen(ns), LB_MODE_COMPAT, NULL, &receivers), LB_OK);
    assert_int_equal(receivers, 1);
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_int_equal(lb_mode_message(r, &m), LB_OK);
    assert_int_equal(m, LB_MODE_COMPAT);
    freeReplyObject(r);
    redisFree(sub);

    assert_int_equal(lb_mode_get(admin, ns, strlen(ns), &m, &found), LB_OK);
    assert_int_equal(found, 1);
    assert_int_equal(m, LB_MODE_COMPAT);
    /* Compare-and-set: refused when the current mode is not the expected one. */
    lb_mode expect = LB_MODE_LEGACY;
    assert_int_equal(lb_mode_set(admin, ns, strlen(ns), LB_MODE_MODERN, &expect, NULL), LB_ESTATE);
    assert_int_equal(lb_mode_get(admin, ns, strlen(ns), &m, &found), LB_OK);
    assert_int_equal(m, LB_MODE_COMPAT);
    expect = LB_MODE_COMPAT;
    assert_int_equal(lb_mode_set(admin, ns, strlen(ns), LB_MODE_MODERN, &expect, NULL), LB_OK);
    assert_int_equal(lb_mode_get(admin, ns, strlen(ns), &m, &found), LB_OK);
    assert_int_equal(m, LB_MODE_MODERN);
    /* An absent key counts as legacy for the comparison. */
    lbt_del(k.mode);
    expect = LB_MODE_LEGACY;
    assert_int_equal(lb_mode_set(admin, ns, strlen(ns), LB_MODE_COMPAT, &expect, NULL), LB_OK);

    /* A control key holding something else is reported, not guessed at. */
    lbt_cmd_ok(admin, "SET %s %s", k.mode, "turbo");
    assert_int_equal(lb_mode_get(admin, ns, strlen(ns), &m, &found), LB_EFOREIGN);
    assert_int_equal(found, 0);
    assert_int_equal(lb_mode_set(admin, ns, strlen(ns), LB_MODE_MODERN, &expect, NULL), LB_ESTATE);
    lbt_del(k.mode);
    lbt_cmd_ok(admin, "HSET %s a b", k.mode);
    assert_int_equal(lb_mode_get(admin, ns, strlen(ns), &m, &found), LB_EWRONGTYPE);
    assert_int_equal(lb_mode_set(admin, ns, strlen(ns), LB_MODE_MODERN, NULL, NULL), LB_EWRONGTYPE);
    lbt_del(k.mode);
    assert_int_equal(lb_mode_set(admin, ns, strlen(ns), (lb_mode)9, NULL, NULL), LB_EINVAL);
}

/* ---- The classifier ---------------------------------------------------------------------------- */
static void test_the_classifier_names_every_format(void **state) {
    (void)state;
    lb_codec codecs[4];
    assert_int_equal(lb_codec_parse(&codecs[0], "ms"), LB_OK);
    assert_int_equal(lb_codec_parse(&codecs[1], "json"), LB_OK); /* ns, monotonic */
    assert_int_equal(lb_codec_parse(&codecs[2], "s"), LB_OK);
    assert_int_equal(lb_codec_parse(&codecs[3], "float"), LB_OK);
    const lb_now now = {INT64_C(1700000000000000), INT64_C(5000000000000)};
    static const struct {
        const char *v;
        size_t len; /* 0: strlen */
        int64_t pttl;
        const char *type;
        int ncodecs;
        lb_format format;
        int codec, expired;
        int64_t remaining_ms;
        lb_token_kind token;
    } t[] = {
        {NULL, 0, -2, NULL, 1, LB_FORMAT_ABSENT, -1, 0, 0, LB_TOKEN_NONE},
        {"1700000001000", 0, -1, NULL, 1, LB_FORMAT_LEGACY, 0, 0, 1000, LB_TOKEN_NONE},
        {"1699999999000", 0, -1, "string", 1, LB_FORMAT_LEGACY, 0, 1, 0, LB_TOKEN_NONE},
        {"1700000000000", 0, -1, NULL, 1, LB_FORMAT_LEGACY, 0, 0, 0, LB_TOKEN_NONE},
        {"1700000001000", 0, 6000, NULL, 1, LB_FORMAT_COMPAT, 0, 0, 1000, LB_TOKEN_NONE},
        {"1699999999000", 0, 500, NULL, 1, LB_FORMAT_COMPAT, 0, 1, 0, LB_TOKEN_NONE},
        {"0123456789abcdef0123456789abcdef", 0, 3000, NULL, 1, LB_FORMAT_TOKEN, -1, 0, 0,
         LB_TOKEN_LOCKBRIDGE},
        {"0123456789abcdef0123456789abcdef", 0, -1, NULL, 1, LB_FORMAT_TOKEN, -1, 0, 0,
         LB_TOKEN_LOCKBRIDGE},
        {"0123456789ABCDEF0123456789abcdef", 0, -1, NULL, 1, LB_FORMAT_UNKNOWN, -1, 0, 0,
         LB_TOKEN_NONE},
        {"{\"uid\":\"4f0c-11\"}", 0, 30000, NULL, 1, LB_FORMAT_TOKEN, -1, 0, 0, LB_TOKEN_JSON_UID},
        {"{\"uid\":7}", 0, -1, NULL, 1, LB_FORMAT_UNKNOWN, -1, 0, 0, LB_TOKEN_NONE},
        {"anything", 0, 3000, NULL, 1, LB_FORMAT_TOKEN, -1, 0, 0, LB_TOKEN_OTHER},
        {"anything", 0, -1, NULL, 1, LB_FORMAT_UNKNOWN, -1, 0, 0, LB_TOKEN_NONE},
        {"", 0, -1, NULL, 1, LB_FORMAT_UNKNOWN, -1, 0, 0, LB_TOKEN_NONE},
        {"5", 0, -1, NULL, 1, LB_FORMAT_INCR, -1, 0, 0, LB_TOKEN_NONE},
        {"7", 0, 60000, NULL, 4, LB_FORMAT_INCR, -1, 0, 0, LB_TOKEN_NONE},
        {"999999999", 0, -1, NULL, 1, LB_FORMAT_INCR, -1, 0, 0, LB_TOKEN_NONE},
        {"-5", 0, -1, NULL, 1, LB_FORMAT_UNKNOWN, -1, 0, 0, LB_TOKEN_NONE},
        {"01700000001000", 0, -1, NULL, 1, LB_FORMAT_UNKNOWN, -1, 0, 0, LB_TOKEN_NONE},
        {"17000\0000001000", 13, -1, NULL, 1, LB_FORMAT_UNKNOWN, -1, 0, 0, LB_TOKEN_NONE},
        {"x", 0, -1, "hash", 1, LB_FORMAT_WRONGTYPE, -1, 0, 0, LB_TOKEN_NONE},
        {NULL, 0, -1, "list", 1, LB_FORMAT_WRONGTYPE, -1, 0, 0, LB_TOKEN_NONE},
        {"{\"expiryTime\":6000000000000}", 0, -1, NULL, 2, LB_FORMAT_LEGACY, 1, 0, 1000000,
         LB_TOKEN_NONE},
        {"{\"expiryTime\":4000000000000}", 0, 9000, NULL, 2, LB_FORMAT_COMPAT, 1, 1, 0,
         LB_TOKEN_NONE},
        {"{\"expiryTime\":6000000000000}", 0, -1, NULL, 1, LB_FORMAT_UNKNOWN, -1, 0, 0,
         LB_TOKEN_NONE},
        /* Read by the ms codec, a seconds value is an instant of 1970: outside
         * the plausible window, so ambiguous, never judged expired. */
        {"1700000002", 0, -1, NULL, 1, LB_FORMAT_AMBIGUOUS, 0, 0, 0, LB_TOKEN_NONE},
        {"1700000002.5", 0, -1, NULL, 4, LB_FORMAT_LEGACY, 3, 0, 2500, LB_TOKEN_NONE},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        lb_class c;
        size_t len = t[i].len ? t[i].len : (t[i].v ? strlen(t[i].v) : 0);
        int rc = lb_classify(&c, t[i].v, len, t[i].pttl, t[i].type, codecs, t[i].ncodecs, &now);
        assert_int_equal(rc, LB_OK);
        if (c.format != t[i].format || c.codec != t[i].codec ||
            (c.format <= LB_FORMAT_COMPAT && c.expired != t[i].expired) ||
            c.remaining_ms != t[i].remaining_ms || c.token != t[i].token)
            fail_msg("row %zu (%s): got %s codec %d expired %d remaining %lld token %s", i,
                     t[i].v ? t[i].v : "(nil)", lb_format_name(c.format), c.codec, c.expired,
                     (long long)c.remaining_ms, lb_token_kind_name(c.token));
        assert_int_equal(c.pttl_ms, t[i].pttl);
    }
    /* The same seconds value read by the seconds codec alone is live. */
    lb_class c;
    assert_int_equal(lb_classify(&c, "1700000002", 10, -1, NULL, &codecs[2], 1, &now), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_LEGACY);
    assert_int_equal(c.remaining_ms, 2000);
    assert_int_equal(lb_classify(&c, "5", 1, -1, NULL, codecs, 1, &now), LB_OK);
    assert_int_equal(c.counter, 5);
    assert_int_equal(lb_classify(&c, "5", 1, -1, NULL, NULL, 1, &now), LB_EINVAL);
    assert_int_equal(lb_classify(&c, "5", 1, -1, NULL, codecs, 0, &now), LB_EINVAL);
    for (int f = LB_FORMAT_ABSENT; f <= LB_FORMAT_AMBIGUOUS; f++)
        assert_string_not_equal(lb_format_name((lb_format)f), "invalid");
}

static void test_inspect_classifies_what_redis_holds(void **state) {
    (void)state;
    lb_codec ms;
    lb_class c;
    char v[LB_VALUE_MAX];
    assert_int_equal(lb_codec_parse(&ms, "ms"), LB_OK);
    const char *key = "mt:inspect";
    lbt_del(key);
    assert_int_equal(lb_inspect(admin, key, strlen(key), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_ABSENT);
    size_t len = lbt_expiry_value("ms", 5000, v);
    lbt_cmd_ok(admin, "SET %s %b", key, v, len);
    assert_int_equal(lb_inspect(admin, key, strlen(key), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_LEGACY);
    assert_false(c.expired);
    lbt_cmd_ok(admin, "PEXPIRE %s 9000", key);
    assert_int_equal(lb_inspect(admin, key, strlen(key), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_COMPAT);
    assert_true(c.pttl_ms > 0 && c.pttl_ms <= 9000);
    /* A megabyte is classified from its prefix and never copied whole. */
    char *big = malloc(1 << 20);
    assert_non_null(big);
    memset(big, '1', 1 << 20);
    lbt_cmd_ok(admin, "SET %s %b", key, big, (size_t)(1 << 20));
    free(big);
    assert_int_equal(lb_inspect(admin, key, strlen(key), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_UNKNOWN);
    assert_int_equal(c.len, 1 << 20);
    lbt_del(key);
    lbt_cmd_ok(admin, "RPUSH %s a", key);
    assert_int_equal(lb_inspect(admin, key, strlen(key), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_WRONGTYPE);
    lbt_del(key);
}

/* ---- The cross-format acquire against every format ------------------------------------ */
typedef struct format_case {
    const char *name;
    const char *value;  /* NULL: see setup */
    int64_t expiry_ms;  /* value = ms timestamp this far from now (when value NULL) */
    long long px;       /* 0: no TTL */
    int hash;           /* a hash at the key */
    int rc;             /* expected from compat and modern alike */
    int taken;          /* the key holds our value afterwards */
} format_case;

static void run_format_case(const format_case *fc, lb_mode mode) {
    const char *key = "mt:formats";
    char v[LB_VALUE_MAX];
    const char *val = fc->value;
    size_t len = val ? strlen(val) : 0;
    lbt_del(key);
    if (fc->hash) {
        lbt_cmd_ok(admin, "HSET %s f v", key);
    } else if (val || fc->expiry_ms) {
        if (!val) {
            len = lbt_expiry_value("ms", fc->expiry_ms, v);
            val = v;
        }
        if (fc->px) lbt_cmd_ok(admin, "SET %s %b PX %lld", key, val, len, fc->px);
        else lbt_cmd_ok(admin, "SET %s %b", key, val, len);
    }
    lb_mlock *l = lbt_mlock(key, mode, "ms", 5000, NULL);
    int rc = lb_mlock_try_acquire(l, lb_on_conn(admin));
    if (rc != fc->rc)
        fail_msg("%s (%s): expected %s, got %s: %s", fc->name, lb_mode_name(mode),
                 lb_err_name(fc->rc), lb_err_name(rc), lb_mlock_info_of(l).errstr);
    if (fc->taken) {
        assert_key_is_ours(key, l);
        long long pttl = lbt_pttl(key);
        assert_true(pttl > 0 && pttl <= (mode == LB_MODE_COMPAT ? 6000 : 5000));
        assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
        assert_key(key, NULL, 0);
    } else if (fc->hash) {
        redisReply *r = redisCommand(admin, "HGET %s f", key);
        assert_non_null(r);
        assert_string_equal(r->str, "v");
        freeReplyObject(r);
    } else if (val) {
        assert_key(key, val, len); /* byte for byte, untouched */
        assert_true(fc->px ? lbt_pttl(key) > 0 : lbt_pttl(key) == -1);
    }
    lb_mlock_free(l);
}

static void test_the_acquire_script_meets_every_format(void **state) {
    (void)state;
    static const format_case t[] = {
        {"free key", NULL, 0, 0, 0, LB_OK, 1},
        {"live legacy timestamp", NULL, 60000, 0, 0, LB_EBUSY, 0},
        {"expired legacy timestamp", NULL, -1000, 0, 0, LB_OK, 1},
        {"live compat timestamp", NULL, 60000, 61000, 0, LB_EBUSY, 0},
        {"expired timestamp still under its TTL", NULL, -1000, 30000, 0, LB_EBUSY, 0},
        {"lockbridge token", "0123456789abcdef0123456789abcdef", 0, 30000, 0, LB_EBUSY, 0},
        {"M1 token", "{\"uid\":\"9b2e5c1a-77d0-4e0b-9d51-3f0b8e7a1c22\"}", 0, 30000, 0,
         LB_EBUSY, 0},
        {"another token with a TTL", "owner-42", 0, 30000, 0, LB_EBUSY, 0},
        {"unknown value without TTL", "owner-42", 0, 0, 0, LB_EFOREIGN, 0},
        {"L1-INCR counter", "3", 0, 0, 0, LB_EFOREIGN, 0},
        {"L1-INCR counter with its EXPIRE", "1", 0, 60000, 0, LB_EFOREIGN, 0},
        {"JSON timestamp of another codec", "{\"expiryTime\":5}", 0, 0, 0, LB_EFOREIGN, 0},
        {"wrong type", NULL, 0, 0, 1, LB_EWRONGTYPE, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        run_format_case(&t[i], LB_MODE_COMPAT);
        run_format_case(&t[i], LB_MODE_MODERN);
    }
}

static void test_busy_reports_what_holds_the_key(void **state) {
    (void)state;
    const char *key = "mt:observed";
    char v[LB_VALUE_MAX];
    size_t len = lbt_expiry_value("ms", 20000, v);
    lbt_del(key);
    lbt_cmd_ok(admin, "SET %s %b", key, v, len);
    lb_mlock *l = lbt_mlock(key, LB_MODE_MODERN, "ms", 5000, NULL);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_EBUSY);
    const lb_class *c = lb_mlock_info_of(l).observed;
    assert_int_equal(c->format, LB_FORMAT_LEGACY);
    assert_true(c->remaining_ms > 15000 && c->remaining_ms <= 20000);
    /* One round trip per attempt when the key is busy. */
    uint64_t before = lb_mlock_info_of(l).commands;
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_EBUSY);
    assert_int_equal(lb_mlock_info_of(l).commands - before, 1);
    lb_mlock_free(l);
    lbt_del(key);
}

/* Runs a machine like the synchronous driver, with `act` called before command
 * number `at` is sent. */
static int drive(lb_machine *m, unsigned at, void (*act)(void *), void *ud, unsigned *sent) {
    lb_now now = lb_clock_now(NULL);
    int rc = lb_machine_step(m, NULL, &now);
    unsigned i = 0;
    for (; rc == LB_STEP_SEND; i++) {
        const lb_cmd *cmd = lb_machine_command(m);
        const char *argv[LB_CMD_MAX_ARGS];
        if (i == at && act) act(ud);
        for (int k = 0; k < cmd->argc; k++) argv[k] = cmd->argv[k];
        redisReply *r = redisCommandArgv(admin, cmd->argc, argv, cmd->argvlen);
        now = lb_clock_now(NULL);
        rc = lb_machine_step(m, r, &now);
        if (r) freeReplyObject(r);
    }
    if (sent) *sent = i;
    return rc;
}

typedef struct swap_ctx {
    const char *key;
    char value[LB_VALUE_MAX];
    size_t len;
    const char *extra; /* e.g. "PX 9000" */
} swap_ctx;

static void swap_value(void *ud) {
    swap_ctx *s = ud;
    if (s->extra) lbt_cmd_ok(admin, "SET %s %b PX 9000", s->key, s->value, s->len);
    else lbt_cmd_ok(admin, "SET %s %b", s->key, s->value, s->len);
}

/* The takeover is a second script call carrying the value judged expired; if
 * anything changed the key in between (a legacy GETSET, a TTL, another
 * takeover), nothing is written. */
static void test_takeover_needs_the_observed_value_unchanged(void **state) {
    (void)state;
    const char *key = "mt:takeover";
    char old[LB_VALUE_MAX];
    size_t oldlen = lbt_expiry_value("ms", -2000, old);
    for (int variant = 0; variant < 4; variant++) {
        swap_ctx s = {key, "", 0, NULL};
        if (variant == 0) s.len = lbt_expiry_value("ms", 10000, s.value); /* legacy GETSET winner */
        if (variant == 1) s.len = lbt_expiry_value("ms", -1000, s.value);  /* another expired value */
        if (variant == 2) {
            memcpy(s.value, old, oldlen); /* the same value, now with a TTL */
            s.len = oldlen;
            s.extra = "PX";
        }
        if (variant == 3) { /* unchanged: the takeover goes through */
            memcpy(s.value, old, oldlen);
            s.len = oldlen;
        }
        lbt_del(key);
        lbt_cmd_ok(admin, "SET %s %b", key, old, oldlen);
        lb_mlock *l = lbt_mlock(key, variant % 2 ? LB_MODE_MODERN : LB_MODE_COMPAT, "ms", 5000, NULL);
        unsigned sent = 0;
        int rc = drive(lb_mlock_machine(l, LB_OP_TRY_ACQUIRE, 0), 1, swap_value, &s, &sent);
        if (variant == 3) {
            assert_int_equal(rc, LB_OK);
            assert_int_equal(sent, 2);
            assert_key_is_ours(key, l);
        } else if (variant == 1) {
            /* The new value is itself expired: judged again and taken over on a
             * third call, which compares that value. */
            assert_int_equal(rc, LB_OK);
            assert_int_equal(sent, 3);
            assert_key_is_ours(key, l);
        } else {
            assert_int_equal(rc, LB_EBUSY);
            assert_key(key, s.value, s.len);
        }
        lb_mlock_free(l);
    }
    lbt_del(key);
}

/* A server that forgot the scripts (restart, SCRIPT FLUSH) gets their bodies. */
static void test_flushed_scripts_are_sent_again(void **state) {
    (void)state;
    const char *key = "mt:flush";
    lbt_del(key);
    for (int mode = LB_MODE_LEGACY; mode <= LB_MODE_MODERN; mode++) {
        lb_mlock_options o;
        lb_mlock_options_init(&o);
        o.mode = (lb_mode)mode;
        o.legacy_variant = LB_LEGACY_SCRIPTED;
        lb_mlock *l = NULL;
        assert_int_equal(lb_mlock_new(&l, key, strlen(key), &o), LB_OK);
        lbt_cmd_ok(admin, "SCRIPT FLUSH");
        assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
        lbt_cmd_ok(admin, "SCRIPT FLUSH");
        assert_int_equal(lb_mlock_extend(l, lb_on_conn(admin), 9000), LB_OK);
        lbt_cmd_ok(admin, "SCRIPT FLUSH");
        assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
        assert_key(key, NULL, 0);
        lb_mlock_free(l);
    }
}

/* ---- compat values as legacy readers see them -------------------------------------------- */
static void test_compat_values_are_legacy_timestamps_with_ttl_of_timeout_plus_grace(void **state) {
    (void)state;
    static const char *codecs[] = {"ms", "s", "float", "json", "json:unit=ms,clock=epoch",
                                   "json:field=validUntil,unit=us,clock=epoch"};
    const char *key = "mt:compat-value";
    for (size_t i = 0; i < sizeof codecs / sizeof codecs[0]; i++) {
        lb_mlock_options o;
        lb_mlock_options_init(&o);
        o.mode = LB_MODE_COMPAT;
        o.ttl_ms = 4000;
        o.grace_ms = 1500;
        assert_int_equal(lb_codec_parse(&o.codec, codecs[i]), LB_OK);
        lb_mlock *l = NULL;
        assert_int_equal(lb_mlock_new(&l, key, strlen(key), &o), LB_OK);
        lbt_del(key);
        lb_now before = lb_clock_now(NULL);
        assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
        assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_COMPAT);
        size_t len;
        const char *v = lb_mlock_info_of(l).value;
        len = lb_mlock_info_of(l).value_len;
        int64_t t, lo, span;
        /* Every legacy reader of this codec decodes it as "valid until T". */
        assert_int_equal(lb_codec_decode(&o.codec, v, len, &t), LB_OK);
        assert_int_equal(lb_codec_ms_to_units(&o.codec, 4000, &span), LB_OK);
        lo = lb_codec_now(&o.codec, &before) + span;
        assert_true(t > lo - 1 && t <= lo + span / 2);
        long long pttl = lbt_pttl(key);
        assert_true(pttl > 4000 && pttl <= 5500);
        /* A legacy lockbridge client of the same codec reads it as held. */
        lb_legacy_options lo_opts;
        lb_legacy_options_init(&lo_opts);
        lo_opts.codec = o.codec;
        lb_legacy_lock *legacy = NULL;
        assert_int_equal(lb_legacy_lock_new(&legacy, key, strlen(key), &lo_opts), LB_OK);
        assert_int_equal(lb_legacy_try_acquire(legacy, lb_on_conn(admin)), LB_EBUSY);
        int64_t seen;
        assert_true(lb_legacy_info_of(legacy).observed);
        seen = lb_legacy_info_of(legacy).observed_expiry;
        assert_int_equal(seen, t);
        lb_legacy_lock_free(legacy);
        assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
        assert_key(key, NULL, 0);
        lb_mlock_free(l);
    }
}

static void test_extend_moves_timestamp_and_ttl_together(void **state) {
    (void)state;
    const char *key = "mt:extend";
    lb_codec ms;
    assert_int_equal(lb_codec_parse(&ms, "ms"), LB_OK);
    lbt_del(key);
    lb_mlock *l = lbt_mlock(key, LB_MODE_COMPAT, "ms", 3000, NULL);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    size_t len;
    int64_t t1, t2;
    const char *v = lb_mlock_info_of(l).value;
        len = lb_mlock_info_of(l).value_len;
    assert_int_equal(lb_codec_decode(&ms, v, len, &t1), LB_OK);
    assert_int_equal(lb_mlock_extend(l, lb_on_conn(admin), 20000), LB_OK);
    assert_key_is_ours(key, l);
    v = lb_mlock_info_of(l).value;
    len = lb_mlock_info_of(l).value_len;
    assert_int_equal(lb_codec_decode(&ms, v, len, &t2), LB_OK);
    assert_true(t2 >= t1 + 16000);
    long long pttl = lbt_pttl(key);
    assert_true(pttl > 20000 && pttl <= 21000);
    /* Extending again within the same millisecond still writes a new value. */
    assert_int_equal(lb_mlock_extend(l, lb_on_conn(admin), 20000), LB_OK);
    int64_t t3;
    v = lb_mlock_info_of(l).value;
    len = lb_mlock_info_of(l).value_len;
    assert_int_equal(lb_codec_decode(&ms, v, len, &t3), LB_OK);
    assert_true(t3 > t2);
    /* Modern: the token stays, the TTL moves. */
    lb_mlock *m = lbt_mlock("mt:extend2", LB_MODE_MODERN, NULL, 3000, NULL);
    lbt_del("mt:extend2");
    assert_int_equal(lb_mlock_try_acquire(m, lb_on_conn(admin)), LB_OK);
    char tok[40];
    snprintf(tok, sizeof tok, "%s", lb_mlock_info_of(m).value);
    assert_int_equal(lb_mlock_extend(m, lb_on_conn(admin), 20000), LB_OK);
    assert_string_equal(lb_mlock_info_of(m).value, tok);
    assert_true(lbt_pttl("mt:extend2") > 19000);
    assert_int_equal(lb_mlock_extend(m, lb_on_conn(admin), 0), LB_EINVAL);
    assert_int_equal(lb_mlock_release(m, lb_on_conn(admin)), LB_OK);
    /* A value someone else replaced is not extended. */
    lbt_cmd_ok(admin, "SET %s %s", key, "1999999999999");
    assert_int_equal(lb_mlock_extend(l, lb_on_conn(admin), 20000), LB_ELOST);
    assert_false(lb_mlock_info_of(l).held);
    assert_key(key, "1999999999999", 13);
    assert_int_equal(lbt_pttl(key), -1);
    lb_mlock_free(l);
    lb_mlock_free(m);
    lbt_del(key);
}

static void test_release_deletes_only_our_own_value(void **state) {
    (void)state;
    const char *key = "mt:release";
    lbt_del(key);
    /* Replaced by a legacy takeover (GETSET clears the TTL): lost, left alone. */
    lb_mlock *l = lbt_mlock(key, LB_MODE_COMPAT, "ms", 5000, NULL);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    lbt_cmd_ok(admin, "GETSET %s %s", key, "1999999999999");
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_ELOST);
    assert_key(key, "1999999999999", 13);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_ESTATE);
    /* Gone already: lost, nothing else deleted. */
    lbt_del(key);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    lbt_del(key);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_ELOST);
    /* Expired by our own clock: a legacy client may hold a byte-equal value,
     * so the key is left to its TTL. */
    lb_clock clock = {NULL, NULL, NULL, 0, NULL};
    lb_mlock *k = lbt_mlock(key, LB_MODE_COMPAT, "ms", 5000, &clock);
    assert_int_equal(lb_mlock_try_acquire(k, lb_on_conn(admin)), LB_OK);
    clock.offset_ms = 6000;
    assert_int_equal(lb_mlock_release(k, lb_on_conn(admin)), LB_EEXPIRED);
    assert_key_is_ours(key, k);
    assert_false(lb_mlock_info_of(k).held);
    /* Modern: another client's token is never deleted. */
    lbt_del(key);
    lb_mlock *m = lbt_mlock(key, LB_MODE_MODERN, NULL, 5000, NULL);
    assert_int_equal(lb_mlock_try_acquire(m, lb_on_conn(admin)), LB_OK);
    lbt_cmd_ok(admin, "SET %s %s PX 9000", key, "ffffffffffffffffffffffffffffffff");
    assert_int_equal(lb_mlock_release(m, lb_on_conn(admin)), LB_ELOST);
    assert_key(key, "ffffffffffffffffffffffffffffffff", 32);
    lb_mlock_free(l);
    lb_mlock_free(k);
    lb_mlock_free(m);
    lbt_del(key);
}

typedef struct mjob {
    lb_mlock *l;
    redisContext *c;
    lb_waiter *w;
    int64_t wait_ms;
    int rc;
    int done; /* atomic */
} mjob;

static void *mjob_main(void *ud) {
    mjob *j = ud;
    j->rc = lb_mlock_acquire_wait(j->l, lb_on_conn(j->c), j->w, j->wait_ms);
    __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static lb_waiter_stats waiter_stats(lb_waiter *w) {
    lb_waiter_stats st;
    lb_waiter_stats_get(w, &st);
    return st;
}

/* In compat and in modern mode a waiting handle wakes on the holder's
 * release: its back-off (5 s) is longer than its deadline (4 s), so only the
 * release message can get it the lock in time. */
static void test_a_waiting_mlock_wakes_on_a_compat_or_modern_release(void **state) {
    (void)state;
    for (int m = LB_MODE_COMPAT; m <= LB_MODE_MODERN; m++) {
        lbt_del("mig:wake");
        lb_waiter_options wo;
        lb_waiter_options_init(&wo);
        wo.port = server.port;
        lb_waiter *w = NULL;
        assert_int_equal(lb_waiter_new(&w, &wo), LB_OK);
        lb_mlock *a = lbt_mlock("mig:wake", (lb_mode)m, NULL, 30000, NULL), *b = NULL;
        lb_mlock_options o;
        lb_mlock_options_init(&o);
        o.mode = (lb_mode)m;
        o.backoff_min_ms = o.backoff_max_ms = 5000;
        assert_int_equal(lb_mlock_new(&b, "mig:wake", 8, &o), LB_OK);
        assert_int_equal(lb_mlock_try_acquire(a, lb_on_conn(admin)), LB_OK);
        mjob j = {.l = b, .c = lbt_redis_connect(&server), .w = w, .wait_ms = 4000};
        assert_non_null(j.c);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, mjob_main, &j), 0);
        /* Asleep after the attempt that followed the subscription. */
        for (int i = 0; !(waiter_stats(w).sleeps >= 2 && waiter_stats(w).blocked == 1); i++) {
            assert_true(i < 2000);
            usleep(5000);
        }
        assert_int_equal(lb_mlock_release(a, lb_on_conn(admin)), LB_OK);
        pthread_join(th, NULL);
        assert_int_equal(j.rc, LB_OK);
        assert_true(lb_mlock_info_of(b).held);
        assert_key_is_ours("mig:wake", b);
        assert_true(waiter_stats(w).messages >= 1);
        assert_int_equal(lb_mlock_release(b, lb_on_conn(j.c)), LB_OK);
        redisFree(j.c);
        lb_waiter_free(w);
        lb_mlock_free(a);
        lb_mlock_free(b);
    }
}

/* A handle asleep on the waiter (back-off 5 s, wait 8 s) ends with
 * LB_ECANCELED soon after another thread cancels (2 s: a generous bound),
 * holding nothing; it acquires once the holder is gone. */
static void test_a_waiting_mlock_is_cancelled_by_the_clocks_sleep_hook(void **state) {
    (void)state;
    lbt_del("mig:cancel");
    lbt_canceller c;
    lbt_canceller_init(&c);
    lb_waiter_options wo;
    lb_waiter_options_init(&wo);
    wo.port = server.port;
    lb_waiter *w = NULL;
    assert_int_equal(lb_waiter_new(&w, &wo), LB_OK);
    lb_mlock *a = lbt_mlock("mig:cancel", LB_MODE_MODERN, NULL, 30000, NULL), *b = NULL;
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.mode = LB_MODE_MODERN;
    o.backoff_min_ms = o.backoff_max_ms = 5000;
    o.clock = &c.clock;
    assert_int_equal(lb_mlock_new(&b, "mig:cancel", 10, &o), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(a, lb_on_conn(admin)), LB_OK);
    mjob j = {.l = b, .c = lbt_redis_connect(&server), .w = w, .wait_ms = 8000};
    assert_non_null(j.c);
    pthread_t th;
    int64_t start = lbt_mono_ms();
    assert_int_equal(pthread_create(&th, NULL, mjob_main, &j), 0);
    for (int i = 0; waiter_stats(w).blocked != 1; i++) {
        assert_true(i < 2000);
        usleep(5000);
    }
    lbt_cancel(&c);
    pthread_join(th, NULL);
    assert_int_equal(j.rc, LB_ECANCELED);
    assert_true(lbt_mono_ms() - start < 2000);
    assert_false(lb_mlock_info_of(b).held);
    assert_key_is_ours("mig:cancel", a);
    assert_int_equal(lb_mlock_release(a, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(b, lb_on_conn(j.c)), LB_OK);
    assert_int_equal(lb_mlock_release(b, lb_on_conn(j.c)), LB_OK);
    redisFree(j.c);
    lb_waiter_free(w);
    lb_mlock_free(a);
    lb_mlock_free(b);
    lbt_canceller_destroy(&c);
}

static void test_legacy_mode_speaks_the_legacy_protocol(void **state) {
    (void)state;
    const char *key = "mt:legacy-mode";
    lbt_del(key);
    lb_mlock *l = lbt_mlock(key, LB_MODE_LEGACY, "ms", 5000, NULL);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_LEGACY);
    assert_int_equal(lbt_pttl(key), -1); /* SETNX: no TTL */
    assert_key_is_ours(key, l);
    /* A compat client sees a live legacy lock. */
    lb_mlock *c = lbt_mlock(key, LB_MODE_COMPAT, "ms", 5000, NULL);
    assert_int_equal(lb_mlock_try_acquire(c, lb_on_conn(admin)), LB_EBUSY);
    assert_int_equal(lb_mlock_info_of(c).observed->format, LB_FORMAT_LEGACY);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(c, lb_on_conn(admin)), LB_OK);
    /* The legacy-mode client meets the compat value as a live timestamp. */
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_EBUSY);
    assert_int_equal(lb_mlock_release(c, lb_on_conn(admin)), LB_OK);
    /* ... and a token as a foreign value it leaves alone. */
    lbt_cmd_ok(admin, "SET %s %s PX 9000", key, "0123456789abcdef0123456789abcdef");
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_EFOREIGN);
    assert_key(key, "0123456789abcdef0123456789abcdef", 32);
    /* Legacy extend needs the scripted variant. */
    lbt_del(key);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_extend(l, lb_on_conn(admin), 8000), LB_EINVAL);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    lb_mlock_free(l);
    lb_mlock_free(c);
}

/* ---- Following the control key ---------------------------------------------------------------- */
static lb_mlock *lbt_follower(const char *key, const char *ns, lb_mode configured,
                              int64_t refresh_ms) {
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

static void test_mode_changes_are_picked_up_on_refresh_and_notification(void **state) {
    (void)state;
    const char *ns = "mt:follow", *key = "mt:follow:k";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(k.mode);
    lbt_del(key);
    /* Absent control key: the configured mode. */
    lb_mlock *l = lbt_follower(key, ns, LB_MODE_LEGACY, 3600000);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_LEGACY);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    /* A set is not seen before the refresh interval without a notification. */
    assert_int_equal(lb_mode_set(admin, ns, strlen(ns), LB_MODE_COMPAT, NULL, NULL), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_LEGACY);
    /* The operation in flight ends in its own mode even after a notification. */
    lb_mlock_notify(l);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_info_of(l).mode, LB_MODE_COMPAT);
    assert_true(lbt_pttl(key) > 0);
    /* Switched while held: release still speaks the mode it acquired in. */
    assert_int_equal(lb_mode_set(admin, ns, strlen(ns), LB_MODE_MODERN, NULL, NULL), LB_OK);
    assert_int_equal(lb_mlock_refresh(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    assert_key(key, NULL, 0);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_MODERN);
    assert_int_equal(strlen(lb_mlock_info_of(l).value), 32);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    /* A refresh interval of 0 reads before every acquire; a garbage control
     * key keeps the last known mode; so does a deleted one (evicted, lost in a
     * failover): a follower configured legacy that has seen modern never moves
     * two stages because the key vanished, and says the key is missing. */
    lb_mlock *e = lbt_follower(key, ns, LB_MODE_LEGACY, 0);
    assert_int_equal(lb_mlock_try_acquire(e, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(e).held_mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_release(e, lb_on_conn(admin)), LB_OK);
    lbt_cmd_ok(admin, "SET %s %s", k.mode, "warp");
    assert_int_equal(lb_mlock_try_acquire(e, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(e).held_mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_release(e, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(e).control_key_missing, 0);
    lbt_del(k.mode);
    assert_int_equal(lb_mlock_try_acquire(e, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(e).held_mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_info_of(e).control_key_missing, 1);
    assert_int_equal(lb_mlock_release(e, lb_on_conn(admin)), LB_OK);
    /* Written again: read again, no longer missing. */
    lbt_cmd_ok(admin, "SET %s %s", k.mode, "compat");
    assert_int_equal(lb_mlock_try_acquire(e, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(e).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_info_of(e).control_key_missing, 0);
    assert_int_equal(lb_mlock_release(e, lb_on_conn(admin)), LB_OK);
    /* A follower that never read a mode uses its configured one. */
    lbt_del(k.mode);
    lb_mlock *fresh = lbt_follower(key, ns, LB_MODE_LEGACY, 0);
    assert_int_equal(lb_mlock_try_acquire(fresh, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(fresh).held_mode, LB_MODE_LEGACY);
    assert_int_equal(lb_mlock_info_of(fresh).control_key_missing, 0);
    assert_int_equal(lb_mlock_release(fresh, lb_on_conn(admin)), LB_OK);
    lb_mlock_free(fresh);
    /* A handle without a namespace cannot refresh or follow. */
    lb_mlock *n = lbt_mlock(key, LB_MODE_COMPAT, NULL, 5000, NULL);
    assert_int_equal(lb_mlock_refresh(n, lb_on_conn(admin)), LB_EINVAL);
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.follow = 1;
    lb_mlock *bad = (lb_mlock *)&o;
    assert_int_equal(lb_mlock_new(&bad, key, strlen(key), &o), LB_EINVAL);
    assert_null(bad);
    lb_mlock_free(l);
    lb_mlock_free(e);
    lb_mlock_free(n);
}

/* A subscriber thread relays mode messages to the handle, as an application
 * with its own SUBSCRIBE connection would. */
typedef struct relay {
    lb_mlock *l;
    const char *channel;
    int subscribed;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    lb_mode heard;
} relay;

static void *relay_main(void *ud) {
    relay *r = ud;
    redisContext *sub = lbt_redis_connect(&server);
    redisReply *rep = sub ? redisCommand(sub, "SUBSCRIBE %s", r->channel) : NULL;
    if (rep) freeReplyObject(rep);
    pthread_mutex_lock(&r->mu);
    r->subscribed = 1;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (sub && redisGetReply(sub, (void **)&rep) == REDIS_OK) {
        if (lb_mode_message(rep, &r->heard) == LB_OK) lb_mlock_notify(r->l);
        freeReplyObject(rep);
    }
    if (sub) redisFree(sub);
    return NULL;
}

static void test_a_notification_makes_the_next_acquire_reread(void **state) {
    (void)state;
    const char *ns = "mt:notify", *key = "mt:notify:k";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(k.mode);
    lbt_del(key);
    lb_mlock *l = lbt_follower(key, ns, LB_MODE_COMPAT, 3600000);
    assert_int_equal(lb_mlock_refresh(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).mode, LB_MODE_COMPAT);
    relay r = {l, k.channel, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
               LB_MODE_LEGACY};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, relay_main, &r), 0);
    pthread_mutex_lock(&r.mu);
    while (!r.subscribed) pthread_cond_wait(&r.cv, &r.mu);
    pthread_mutex_unlock(&r.mu);
    /* The subscriber may still be between its SUBSCRIBE and the server's
     * registration: set until someone is notified. */
    long long receivers = 0;
    for (int i = 0; i < 500 && receivers == 0; i++) {
        assert_int_equal(lb_mode_set(admin, ns, strlen(ns), LB_MODE_MODERN, NULL, &receivers),
                         LB_OK);
        if (receivers == 0) usleep(2000);
    }
    assert_int_equal(receivers, 1);
    pthread_join(th, NULL);
    assert_int_equal(r.heard, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    lb_mlock_free(l);
}

/* ---- Census -------------------------------------------------------------------------------------- */
static void test_census_registers_lists_and_prunes_stale_entries(void **state) {
    (void)state;
    const char *ns = "mt:census";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(k.census);
    lbt_del(k.gate);
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
    assert_int_equal(lb_census_register(admin, ns, strlen(ns), &a, &now), LB_OK);
    assert_int_equal(lb_census_register(admin, ns, strlen(ns), &b, &old), LB_OK);
    /* Something that is not an entry is listed as such and never pruned. */
    lbt_cmd_ok(admin, "HSET %s %s %s", k.census, "junk", "{not json");
    lb_census_entry *es = NULL;
    size_t n = 0;
    assert_int_equal(lb_census_list(admin, ns, strlen(ns), &now, 60000, NULL, &es, &n), LB_OK);
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
    assert_int_equal(lb_census_prune(admin, ns, strlen(ns), &now, 60000, &pruned), LB_OK);
    assert_int_equal(pruned, 1);
    assert_int_equal(lb_census_list(admin, ns, strlen(ns), &now, 60000, NULL, &es, &n), LB_OK);
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
    lbt_del(k.gate);
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
    assert_int_equal(lb_census_list(admin, ns, strlen(ns), &now, 60000, NULL, &es, &n),
                     LB_EWRONGTYPE);
    assert_null(es);
    lbt_del(k.census);
}

static void test_a_handle_registers_itself_with_its_mode(void **state) {
    (void)state;
    const char *ns = "mt:census-self", *key = "mt:census-self:k";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(k.census);
    lbt_del(k.mode);
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.ns = ns;
    o.mode = LB_MODE_LEGACY;
    o.client_id = "billing-7";
    o.host = "h7";
    lb_mlock *l = NULL;
    assert_int_equal(lb_mlock_new(&l, key, strlen(key), &o), LB_OK);
    assert_string_equal(lb_mlock_info_of(l).client_id, "billing-7");
    lbt_del(key);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    lb_census_entry *es = NULL;
    size_t n = 0;
    lb_now now = lb_clock_now(NULL);
    assert_int_equal(lb_census_list(admin, ns, strlen(ns), &now, 60000, NULL, &es, &n), LB_OK);
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
    lbt_del(k.census);
    assert_int_equal(lb_mode_set(admin, ns, strlen(ns), LB_MODE_COMPAT, NULL, NULL), LB_OK);
    o.follow = 1;
    o.client_id = "billing-8";
    assert_int_equal(lb_mlock_new(&l, key, strlen(key), &o), LB_OK);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_census_list(admin, ns, strlen(ns), &now, 60000, NULL, &es, &n), LB_OK);
    assert_int_equal(n, 1);
    assert_true(es[0].valid);
    assert_int_equal(es[0].mode, LB_MODE_COMPAT);
    lb_census_free(NULL, es);
    /* A control key in no known form: the entry keeps the mode in use. */
    lbt_cmd_ok(admin, "SET %s %s", k.mode, "\"mode\":\"?\"");
    assert_int_equal(lb_mlock_refresh(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_census_list(admin, ns, strlen(ns), &now, 60000, NULL, &es, &n), LB_OK);
    assert_int_equal(n, 1);
    assert_true(es[0].valid);
    assert_int_equal(es[0].mode, LB_MODE_COMPAT);
    lb_census_free(NULL, es);
    lb_mlock_free(l);
    lbt_del(k.mode);
    o.follow = 0;
    /* A default identity is host:pid:random. */
    o.client_id = NULL;
    assert_int_equal(lb_mlock_new(&l, key, strlen(key), &o), LB_OK);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "h7:%ld:", (long)getpid());
    assert_memory_equal(lb_mlock_info_of(l).client_id, prefix, strlen(prefix));
    lb_mlock_free(l);
    lbt_del(k.census);
}

/* ---- Mixed fleets on a shared counter ------------------------------------------------------ */
#define COUNTER "mt:counter"
#define ROUNDS 60

typedef struct worker {
    const char *key;
    lb_mode mode;
    const char *ns; /* set: follow its control key */
    int rounds;     /* at least this many increments */
    atomic_int *until; /* set: and more until it is non-zero */
    int done;       /* increments made */
    int failures;
    int by_mode[3]; /* acquisitions in each mode */
    char why[160];
} worker;

/* Lock, read the counter, write it back plus one, unlock: a lost update shows
 * as a final count below the number of increments. */
static int work(worker *wk, redisContext *c) {
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.mode = wk->mode;
    o.ttl_ms = 20000;
    o.backoff_max_ms = 20;
    if (wk->ns) {
        o.ns = wk->ns;
        o.follow = 1;
        o.mode_refresh_ms = 2;
        o.census_refresh_ms = 0;
    }
    lb_mlock *l = NULL;
    if (lb_mlock_new(&l, wk->key, strlen(wk->key), &o) != LB_OK) return -1;
    for (int i = 0; i < wk->rounds || (wk->until && !atomic_load(wk->until)); i++) {
        int rc = lb_mlock_acquire(l, lb_on_conn(c), 20000);
        if (rc != LB_OK) {
            snprintf(wk->why, sizeof wk->why, "acquire: %s %s", lb_err_name(rc), lb_mlock_info_of(l).errstr);
            wk->failures++;
            break;
        }
        wk->by_mode[lb_mlock_info_of(l).held_mode]++;
        redisReply *r = redisCommand(c, "GET %s", COUNTER);
        long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
        if (r) freeReplyObject(r);
        r = redisCommand(c, "SET %s %lld", COUNTER, v + 1);
        if (r) freeReplyObject(r);
        wk->done++;
        rc = lb_mlock_release(l, lb_on_conn(c));
        if (rc != LB_OK) {
            snprintf(wk->why, sizeof wk->why, "release: %s %s", lb_err_name(rc), lb_mlock_info_of(l).errstr);
            wk->failures++;
        }
    }
    lb_mlock_free(l);
    return wk->failures ? -1 : 0;
}

static void *worker_main(void *ud) {
    worker *wk = ud;
    redisContext *c = lbt_redis_connect(&server);
    if (!c) {
        wk->failures++;
        return NULL;
    }
    work(wk, c);
    redisFree(c);
    return NULL;
}

static long long counter_value(void) {
    redisReply *r = redisCommand(admin, "GET %s", COUNTER);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    return v;
}

/* Threads of one process, thread i in modes[i], each with its own connection
 * and lock handle on `key`. */
static void run_threads(const lb_mode *modes, int n, const char *key) {
    pthread_t th[8];
    worker w[8];
    assert_true(n <= 8);
    lbt_del(COUNTER);
    lbt_del(key);
    for (int i = 0; i < n; i++) {
        w[i] = (worker){key, modes[i], NULL, ROUNDS, NULL, 0, 0, {0}, ""};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    int total = 0;
    for (int i = 0; i < n; i++) {
        if (w[i].failures) fail_msg("worker %d (%s): %s", i, lb_mode_name(w[i].mode), w[i].why);
        total += w[i].done;
    }
    assert_int_equal(total, n * ROUNDS);
    assert_int_equal(counter_value(), total);
}

static void test_legacy_and_compat_threads_lose_no_update(void **state) {
    (void)state;
    const lb_mode modes[4] = {LB_MODE_LEGACY, LB_MODE_COMPAT, LB_MODE_LEGACY, LB_MODE_COMPAT};
    run_threads(modes, 4, "mt:mixed1");
}

static void test_compat_and_modern_threads_lose_no_update(void **state) {
    (void)state;
    const lb_mode modes[4] = {LB_MODE_MODERN, LB_MODE_COMPAT, LB_MODE_MODERN, LB_MODE_COMPAT};
    run_threads(modes, 4, "mt:mixed2");
}

/* Separate processes: nothing shared but Redis. */
static void run_processes(const lb_mode *modes, int n, const char *key) {
    pid_t pids[8];
    lbt_del(COUNTER);
    lbt_del(key);
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            worker wk = {key, modes[i], NULL, ROUNDS, NULL, 0, 0, {0}, ""};
            redisContext *c = lbt_redis_connect(&server);
            int rc = c ? work(&wk, c) : -1;
            if (rc) fprintf(stderr, "child %d (%s): %s\n", i, lb_mode_name(modes[i]), wk.why);
            if (c) redisFree(c);
            _exit(rc ? 1 : 0);
        }
    }
    for (int i = 0; i < n; i++) {
        int st = 0;
        assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    assert_int_equal(counter_value(), n * ROUNDS);
}

static void test_legacy_and_compat_processes_lose_no_update(void **state) {
    (void)state;
    const lb_mode modes[3] = {LB_MODE_LEGACY, LB_MODE_COMPAT, LB_MODE_COMPAT};
    run_processes(modes, 3, "mt:proc1");
}

static void test_compat_and_modern_processes_lose_no_update(void **state) {
    (void)state;
    const lb_mode modes[3] = {LB_MODE_COMPAT, LB_MODE_MODERN, LB_MODE_MODERN};
    run_processes(modes, 3, "mt:proc2");
}

/* Followers of the control key while it steps legacy -> compat -> modern and
 * back, each step adjacent, in the middle of contention. */
typedef struct stepper {
    const char *ns;
    atomic_int done;
} stepper;

static void *stepper_main(void *ud) {
    stepper *s = ud;
    static const lb_mode path[] = {LB_MODE_COMPAT, LB_MODE_MODERN, LB_MODE_COMPAT,
                                   LB_MODE_LEGACY, LB_MODE_COMPAT, LB_MODE_MODERN};
    redisContext *c = lbt_redis_connect(&server);
    if (!c) return NULL;
    for (size_t i = 0; i < sizeof path / sizeof path[0]; i++) {
        usleep(40000);
        lb_mode_set(c, s->ns, strlen(s->ns), path[i], NULL, NULL);
    }
    usleep(40000);
    atomic_store(&s->done, 1);
    redisFree(c);
    return NULL;
}

static void test_a_mode_switch_mid_contention_loses_no_update(void **state) {
    (void)state;
    const char *ns = "mt:switch";
    lb_ns_keys k;
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_del(k.mode);
    worker w[4];
    for (int i = 0; i < 4; i++)
        w[i] = (worker){"mt:switched", LB_MODE_LEGACY, ns, 20, NULL, 0, 0, {0}, ""};
    stepper s;
    s.ns = ns;
    atomic_init(&s.done, 0);
    for (int i = 0; i < 4; i++) w[i].until = &s.done;
    pthread_t st, th[4];
    lbt_del(COUNTER);
    lbt_del("mt:switched");
    assert_int_equal(pthread_create(&st, NULL, stepper_main, &s), 0);
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    pthread_join(st, NULL);
    int by_mode[3] = {0, 0, 0}, total = 0;
    for (int i = 0; i < 4; i++) {
        if (w[i].failures) fail_msg("worker %d: %s", i, w[i].why);
        total += w[i].done;
        for (int m = 0; m < 3; m++) by_mode[m] += w[i].by_mode[m];
    }
    printf("  acquisitions by mode: legacy %d, compat %d, modern %d\n", by_mode[0], by_mode[1],
           by_mode[2]);
    assert_int_equal(counter_value(), total);
    /* The workers ran through every switch: each mode was used. */
    assert_true(by_mode[0] > 0 && by_mode[1] > 0 && by_mode[2] > 0);
    lbt_del(k.mode);
}

/* ---- The asynchronous driver ------------------------------------------------------- */
typedef struct async_run {
    struct event_base *base;
    redisAsyncContext *ac;
    lb_mlock *l[3];
    lb_machine *m[3]; /* each handle's machine: every operation runs on it */
    int status[3][2]; /* acquire, release */
    int done;
} async_run;

static void async_released(lb_machine *m, int status, void *ud);

static int index_of(async_run *a, lb_machine *m) {
    for (int i = 0; i < 3; i++)
        if (a->m[i] == m) return i;
    return -1;
}

static void async_acquired(lb_machine *m, int status, void *ud) {
    async_run *a = ud;
    int i = index_of(a, m);
    assert_true(i >= 0);
    a->status[i][0] = status;
    if (status != LB_OK) {
        a->done++;
        return;
    }
    assert_int_equal(lb_async_run(a->ac, lb_mlock_machine(a->l[i], LB_OP_RELEASE, 0), NULL, async_released, a),
                     LB_OK);
}

static void async_released(lb_machine *m, int status, void *ud) {
    async_run *a = ud;
    int i = index_of(a, m);
    assert_true(i >= 0);
    a->status[i][1] = status;
    a->done++;
}

/* Callers with their own event loop drive the same machines: a follower (mode
 * read first), a compat takeover of an expired legacy lock (two script calls)
 * and a legacy-mode lock (the legacy machine inside), all on one connection. */
static void test_the_async_driver_runs_every_mode(void **state) {
    (void)state;
    const char *ns = "mt:async";
    lb_ns_keys k;
    char old[LB_VALUE_MAX];
    assert_int_equal(lb_ns_keys_init(&k, ns, strlen(ns)), LB_OK);
    lbt_cmd_ok(admin, "SET %s modern", k.mode);
    lbt_del("mt:async:1");
    lbt_del("mt:async:3");
    size_t oldlen = lbt_expiry_value("ms", -3000, old);
    lbt_cmd_ok(admin, "SET %s %b", "mt:async:2", old, oldlen);
    async_run a;
    memset(&a, 0, sizeof a);
    a.l[0] = lbt_follower("mt:async:1", ns, LB_MODE_COMPAT, 1000);
    a.l[1] = lbt_mlock("mt:async:2", LB_MODE_COMPAT, "ms", 5000, NULL);
    a.l[2] = lbt_mlock("mt:async:3", LB_MODE_LEGACY, "ms", 5000, NULL);
    a.base = event_base_new();
    assert_non_null(a.base);
    a.ac = redisAsyncConnect("127.0.0.1", server.port);
    assert_non_null(a.ac);
    assert_int_equal(redisLibeventAttach(a.ac, a.base), REDIS_OK);
    for (int i = 0; i < 3; i++) {
        a.m[i] = lb_mlock_machine(a.l[i], LB_OP_TRY_ACQUIRE, 0);
        assert_int_equal(lb_async_run(a.ac, a.m[i], NULL, async_acquired, &a), LB_OK);
    }
    /* While in flight, no other operation may start on the handle. */
    assert_null(lb_mlock_machine(a.l[0], LB_OP_RELEASE, 0));
    assert_int_equal(lb_mlock_try_acquire(a.l[0], lb_on_conn(admin)), LB_ESTATE);
    while (a.done < 3) event_base_loop(a.base, EVLOOP_ONCE);
    for (int i = 0; i < 3; i++) {
        if (a.status[i][0] != LB_OK || a.status[i][1] != LB_OK)
            fail_msg("lock %d: acquire %s, release %s: %s", i, lb_err_name(a.status[i][0]),
                     lb_err_name(a.status[i][1]), lb_mlock_info_of(a.l[i]).errstr);
    }
    assert_int_equal(lb_mlock_info_of(a.l[0]).held_mode, LB_MODE_MODERN);
    assert_int_equal(lb_mlock_info_of(a.l[1]).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_info_of(a.l[2]).held_mode, LB_MODE_LEGACY);
    for (int i = 0; i < 3; i++) lb_mlock_free(a.l[i]);
    redisAsyncFree(a.ac);
    event_base_free(a.base);
    assert_key("mt:async:2", NULL, 0);
    lbt_del(k.mode);
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

/* ---- Polling beside a lock turned over fast ------------------------------------------ */
/* A compat holder that writes its value afresh (valid 30 s from the wall
 * clock's now, with its TTL), and that instant. */
typedef struct fresh_holder {
    lbt_holder h;
    int64_t written_us;
} fresh_holder;

static int renew_compat(void *ud) {
    fresh_holder *f = ud;
    lb_codec codec;
    lb_now now = lb_clock_now(NULL);
    int64_t span = 0;
    char v[64];
    size_t len = 0;
    if (lb_codec_parse(&codec, "ms") != LB_OK || lb_codec_ms_to_units(&codec, 30000, &span) != LB_OK ||
        lb_codec_encode(&codec, lb_codec_now(&codec, &now) + span, v, sizeof v, &len) != LB_OK)
        return -1;
    f->written_us = now.wall_us;
    redisReply *r = redisCommand(f->h.c, "SET %s %b PX 31000", f->h.key, v, len);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

/* The waiter's wall clock beside a holder written afresh before each attempt:
 * the instant of the last write, so that the holder is just begun (age 0) at
 * every attempt however late a busy host runs it. (On the real clock, an
 * attempt a few ms late saw a holder a few ms old, and the 20x rule let it
 * sleep 60 or 80 ms.) ud: the lbt_sleeps whose hook renews the holder. */
static int64_t at_the_last_write(void *ud) {
    const lbt_sleeps *s = ud;
    return ((const fresh_holder *)s->after_ud)->written_us;
}

/* As for the token lock: a compat waiter refused by holders only ever just
 * begun sleeps about 20 ms between attempts (up to 40 when an attempt is a
 * ms late), not the back-off's 100 ms; a holder left to age is waited for
 * with the whole back-off. */
static void test_a_compat_wait_beside_a_lock_turned_over_fast_asks_within_20_ms(void **state) {
    (void)state;
    for (int young = 1; young >= 0; young--) {
        fresh_holder f = {{lbt_redis_connect(&server), "mig:young"}, 0};
        assert_non_null(f.h.c);
        lbt_sleeps sleeps = {.after = young ? renew_compat : NULL, .after_ud = &f};
        lb_clock clock = {.sleep_ms = lbt_sleeps_record, .ud = &sleeps,
                          .wall_us = young ? at_the_last_write : NULL};
        lb_mlock *l = lbt_mlock(f.h.key, LB_MODE_COMPAT, "ms", 30000, &clock);
        assert_int_equal(renew_compat(&f), 0);
        assert_int_equal(lb_mlock_acquire(l, lb_on_conn(admin), young ? 1000 : 1500), LB_ETIMEDOUT);
        assert_true(sleeps.calls >= 5);
        assert_int_equal(sleeps.after_failures, 0);
        if (young) assert_in_range(sleeps.longest_ms, 1, 40);
        else assert_in_range(sleeps.longest_ms, 41, 100);
        lbt_del(f.h.key);
        redisFree(f.h.c);
        lb_mlock_free(l);
    }
}

/* A sleep hook that counts the wait's sleeps and cancels at the first. */
static int count_and_cancel(void *ud, int64_t ms) {
    (void)ms;
    ++*(int *)ud;
    return 1;
}

/* With foreign_fails_at_once a blocking acquire that meets a value left alone
 * returns LB_EFOREIGN without sleeping; without it, the wait sleeps on. */
static void test_a_foreign_value_fails_a_blocking_mlock_acquire_at_once_when_asked(void **state) {
    (void)state;
    const char *key = "mf:foreignfast";
    lbt_cmd_ok(admin, "SET %s %s", key, "owner-42");
    int sleeps = 0;
    lb_clock clock = {NULL, NULL, NULL, 0, count_and_cancel};
    clock.ud = &sleeps;
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.mode = LB_MODE_COMPAT;
    o.clock = &clock;
    o.foreign_fails_at_once = 1;
    lb_mlock *l = NULL;
    assert_int_equal(lb_mlock_new(&l, LB_KEY(key), &o), LB_OK);
    assert_int_equal(lb_mlock_acquire(l, lb_on_conn(admin), 60000), LB_EFOREIGN);
    assert_int_equal(sleeps, 0);
    lb_mlock_free(l);
    o.foreign_fails_at_once = 0;
    assert_int_equal(lb_mlock_new(&l, LB_KEY(key), &o), LB_OK);
    assert_int_equal(lb_mlock_acquire(l, lb_on_conn(admin), 60000), LB_ECANCELED);
    assert_int_equal(sleeps, 1);
    assert_key(key, "owner-42", 8);
    lb_mlock_free(l);
    lbt_cmd_ok(admin, "DEL %s", key);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode_names_round_trip_and_strangers_are_refused),
        cmocka_unit_test(test_namespace_names_share_one_slot_and_bad_names_are_refused),
        cmocka_unit_test(test_mode_is_read_set_compared_and_published),
        cmocka_unit_test(test_the_classifier_names_every_format),
        cmocka_unit_test(test_inspect_classifies_what_redis_holds),
        cmocka_unit_test(test_the_acquire_script_meets_every_format),
        cmocka_unit_test(test_busy_reports_what_holds_the_key),
        cmocka_unit_test(test_takeover_needs_the_observed_value_unchanged),
        cmocka_unit_test(test_flushed_scripts_are_sent_again),
        cmocka_unit_test(test_compat_values_are_legacy_timestamps_with_ttl_of_timeout_plus_grace),
        cmocka_unit_test(test_extend_moves_timestamp_and_ttl_together),
        cmocka_unit_test(test_release_deletes_only_our_own_value),
        cmocka_unit_test(test_a_waiting_mlock_wakes_on_a_compat_or_modern_release),
        cmocka_unit_test(test_a_waiting_mlock_is_cancelled_by_the_clocks_sleep_hook),
        cmocka_unit_test(test_legacy_mode_speaks_the_legacy_protocol),
        cmocka_unit_test(test_mode_changes_are_picked_up_on_refresh_and_notification),
        cmocka_unit_test(test_a_notification_makes_the_next_acquire_reread),
        cmocka_unit_test(test_census_registers_lists_and_prunes_stale_entries),
        cmocka_unit_test(test_a_handle_registers_itself_with_its_mode),
        cmocka_unit_test(test_legacy_and_compat_threads_lose_no_update),
        cmocka_unit_test(test_compat_and_modern_threads_lose_no_update),
        cmocka_unit_test(test_legacy_and_compat_processes_lose_no_update),
        cmocka_unit_test(test_compat_and_modern_processes_lose_no_update),
        cmocka_unit_test(test_a_mode_switch_mid_contention_loses_no_update),
        cmocka_unit_test(test_the_async_driver_runs_every_mode),
        cmocka_unit_test(test_a_compat_wait_beside_a_lock_turned_over_fast_asks_within_20_ms),
        cmocka_unit_test(test_a_foreign_value_fails_a_blocking_mlock_acquire_at_once_when_asked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
