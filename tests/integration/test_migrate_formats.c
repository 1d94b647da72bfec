/* The migration shim's formats against a real redis-server: the classifier,
 * the cross-format scripts meeting every format, compat values as legacy
 * readers see them, and legacy mode speaking the legacy protocol. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/mlock_util.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "lockbridge/lockbridge.h"
#include "migrate/internal.h"

static lbt_redis server;
static redisContext *admin; /* the test's own connection, for setup and checks */

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
    lbt_del(admin, key);
    assert_int_equal(lb_inspect(lb_on_conn(admin), key, strlen(key), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_ABSENT);
    size_t len = lbt_expiry_value("ms", 5000, v);
    lbt_cmd_ok(admin, "SET %s %b", key, v, len);
    assert_int_equal(lb_inspect(lb_on_conn(admin), key, strlen(key), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_LEGACY);
    assert_false(c.expired);
    lbt_cmd_ok(admin, "PEXPIRE %s 9000", key);
    assert_int_equal(lb_inspect(lb_on_conn(admin), key, strlen(key), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_COMPAT);
    assert_true(c.pttl_ms > 0 && c.pttl_ms <= 9000);
    /* A megabyte is classified from its prefix and never copied whole. */
    char *big = malloc(1 << 20);
    assert_non_null(big);
    memset(big, '1', 1 << 20);
    lbt_cmd_ok(admin, "SET %s %b", key, big, (size_t)(1 << 20));
    free(big);
    assert_int_equal(lb_inspect(lb_on_conn(admin), key, strlen(key), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_UNKNOWN);
    assert_int_equal(c.len, 1 << 20);
    lbt_del(admin, key);
    lbt_cmd_ok(admin, "RPUSH %s a", key);
    assert_int_equal(lb_inspect(lb_on_conn(admin), key, strlen(key), &ms, 1, NULL, &c), LB_OK);
    assert_int_equal(c.format, LB_FORMAT_WRONGTYPE);
    lbt_del(admin, key);
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
    lbt_del(admin, key);
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
        lbt_assert_key_is_ours(admin, key, l);
        long long pttl = lbt_pttl(admin, key);
        assert_true(pttl > 0 && pttl <= (mode == LB_MODE_COMPAT ? 6000 : 5000));
        assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
        lbt_assert_key(admin, key, NULL, 0);
    } else if (fc->hash) {
        redisReply *r = redisCommand(admin, "HGET %s f", key);
        assert_non_null(r);
        assert_string_equal(r->str, "v");
        freeReplyObject(r);
    } else if (val) {
        lbt_assert_key(admin, key, val, len); /* byte for byte, untouched */
        assert_true(fc->px ? lbt_pttl(admin, key) > 0 : lbt_pttl(admin, key) == -1);
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
    lbt_del(admin, key);
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
    lbt_del(admin, key);
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
        lbt_del(admin, key);
        lbt_cmd_ok(admin, "SET %s %b", key, old, oldlen);
        lb_mlock *l = lbt_mlock(key, variant % 2 ? LB_MODE_MODERN : LB_MODE_COMPAT, "ms", 5000, NULL);
        unsigned sent = 0;
        int rc = drive(lb_mlock_machine(l, LB_OP_TRY_ACQUIRE, 0), 1, swap_value, &s, &sent);
        if (variant == 3) {
            assert_int_equal(rc, LB_OK);
            assert_int_equal(sent, 2);
            lbt_assert_key_is_ours(admin, key, l);
        } else if (variant == 1) {
            /* The new value is itself expired: judged again and taken over on a
             * third call, which compares that value. */
            assert_int_equal(rc, LB_OK);
            assert_int_equal(sent, 3);
            lbt_assert_key_is_ours(admin, key, l);
        } else {
            assert_int_equal(rc, LB_EBUSY);
            lbt_assert_key(admin, key, s.value, s.len);
        }
        lb_mlock_free(l);
    }
    lbt_del(admin, key);
}

/* A server that forgot the scripts (restart, SCRIPT FLUSH) gets their bodies. */
static void test_flushed_scripts_are_sent_again(void **state) {
    (void)state;
    const char *key = "mt:flush";
    lbt_del(admin, key);
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
        lbt_assert_key(admin, key, NULL, 0);
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
        lbt_del(admin, key);
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
        long long pttl = lbt_pttl(admin, key);
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
        lbt_assert_key(admin, key, NULL, 0);
        lb_mlock_free(l);
    }
}

static void test_extend_moves_timestamp_and_ttl_together(void **state) {
    (void)state;
    const char *key = "mt:extend";
    lb_codec ms;
    assert_int_equal(lb_codec_parse(&ms, "ms"), LB_OK);
    lbt_del(admin, key);
    lb_mlock *l = lbt_mlock(key, LB_MODE_COMPAT, "ms", 3000, NULL);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    size_t len;
    int64_t t1, t2;
    const char *v = lb_mlock_info_of(l).value;
        len = lb_mlock_info_of(l).value_len;
    assert_int_equal(lb_codec_decode(&ms, v, len, &t1), LB_OK);
    assert_int_equal(lb_mlock_extend(l, lb_on_conn(admin), 20000), LB_OK);
    lbt_assert_key_is_ours(admin, key, l);
    v = lb_mlock_info_of(l).value;
    len = lb_mlock_info_of(l).value_len;
    assert_int_equal(lb_codec_decode(&ms, v, len, &t2), LB_OK);
    assert_true(t2 >= t1 + 16000);
    long long pttl = lbt_pttl(admin, key);
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
    lbt_del(admin, "mt:extend2");
    assert_int_equal(lb_mlock_try_acquire(m, lb_on_conn(admin)), LB_OK);
    char tok[40];
    snprintf(tok, sizeof tok, "%s", lb_mlock_info_of(m).value);
    assert_int_equal(lb_mlock_extend(m, lb_on_conn(admin), 20000), LB_OK);
    assert_string_equal(lb_mlock_info_of(m).value, tok);
    assert_true(lbt_pttl(admin, "mt:extend2") > 19000);
    assert_int_equal(lb_mlock_extend(m, lb_on_conn(admin), 0), LB_EINVAL);
    assert_int_equal(lb_mlock_release(m, lb_on_conn(admin)), LB_OK);
    /* A value someone else replaced is not extended. */
    lbt_cmd_ok(admin, "SET %s %s", key, "1999999999999");
    assert_int_equal(lb_mlock_extend(l, lb_on_conn(admin), 20000), LB_ELOST);
    assert_false(lb_mlock_info_of(l).held);
    lbt_assert_key(admin, key, "1999999999999", 13);
    assert_int_equal(lbt_pttl(admin, key), -1);
    lb_mlock_free(l);
    lb_mlock_free(m);
    lbt_del(admin, key);
}

static void test_release_deletes_only_our_own_value(void **state) {
    (void)state;
    const char *key = "mt:release";
    lbt_del(admin, key);
    /* Replaced by a legacy takeover (GETSET clears the TTL): lost, left alone. */
    lb_mlock *l = lbt_mlock(key, LB_MODE_COMPAT, "ms", 5000, NULL);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    lbt_cmd_ok(admin, "GETSET %s %s", key, "1999999999999");
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_ELOST);
    lbt_assert_key(admin, key, "1999999999999", 13);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_ESTATE);
    /* Gone already: lost, nothing else deleted. */
    lbt_del(admin, key);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    lbt_del(admin, key);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_ELOST);
    /* Expired by our own clock: a legacy client may hold a byte-equal value,
     * so the key is left to its TTL. */
    lb_clock clock = {NULL, NULL, NULL, 0, NULL};
    lb_mlock *k = lbt_mlock(key, LB_MODE_COMPAT, "ms", 5000, &clock);
    assert_int_equal(lb_mlock_try_acquire(k, lb_on_conn(admin)), LB_OK);
    clock.offset_ms = 6000;
    assert_int_equal(lb_mlock_release(k, lb_on_conn(admin)), LB_EEXPIRED);
    lbt_assert_key_is_ours(admin, key, k);
    assert_false(lb_mlock_info_of(k).held);
    /* Modern: another client's token is never deleted. */
    lbt_del(admin, key);
    lb_mlock *m = lbt_mlock(key, LB_MODE_MODERN, NULL, 5000, NULL);
    assert_int_equal(lb_mlock_try_acquire(m, lb_on_conn(admin)), LB_OK);
    lbt_cmd_ok(admin, "SET %s %s PX 9000", key, "ffffffffffffffffffffffffffffffff");
    assert_int_equal(lb_mlock_release(m, lb_on_conn(admin)), LB_ELOST);
    lbt_assert_key(admin, key, "ffffffffffffffffffffffffffffffff", 32);
    lb_mlock_free(l);
    lb_mlock_free(k);
    lb_mlock_free(m);
    lbt_del(admin, key);
}

static void test_legacy_mode_speaks_the_legacy_protocol(void **state) {
    (void)state;
    const char *key = "mt:legacy-mode";
    lbt_del(admin, key);
    lb_mlock *l = lbt_mlock(key, LB_MODE_LEGACY, "ms", 5000, NULL);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_info_of(l).held_mode, LB_MODE_LEGACY);
    assert_int_equal(lbt_pttl(admin, key), -1); /* SETNX: no TTL */
    lbt_assert_key_is_ours(admin, key, l);
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
    lbt_assert_key(admin, key, "0123456789abcdef0123456789abcdef", 32);
    /* Legacy extend needs the scripted variant. */
    lbt_del(admin, key);
    assert_int_equal(lb_mlock_try_acquire(l, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_mlock_extend(l, lb_on_conn(admin), 8000), LB_EINVAL);
    assert_int_equal(lb_mlock_release(l, lb_on_conn(admin)), LB_OK);
    lb_mlock_free(l);
    lb_mlock_free(c);
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
        cmocka_unit_test(test_the_classifier_names_every_format),
        cmocka_unit_test(test_inspect_classifies_what_redis_holds),
        cmocka_unit_test(test_the_acquire_script_meets_every_format),
        cmocka_unit_test(test_busy_reports_what_holds_the_key),
        cmocka_unit_test(test_takeover_needs_the_observed_value_unchanged),
        cmocka_unit_test(test_flushed_scripts_are_sent_again),
        cmocka_unit_test(test_compat_values_are_legacy_timestamps_with_ttl_of_timeout_plus_grace),
        cmocka_unit_test(test_extend_moves_timestamp_and_ttl_together),
        cmocka_unit_test(test_release_deletes_only_our_own_value),
        cmocka_unit_test(test_legacy_mode_speaks_the_legacy_protocol),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
