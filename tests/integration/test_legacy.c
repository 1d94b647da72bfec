/* The legacy lock against a real redis-server, for both variants and every
 * codec: contention, takeover, the nil rules provoked for real, foreign and
 * wrongly typed keys left untouched, lost locks, extend, script loss, blocking
 * waits, skewed clocks and dropped connections. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "harness/mlock_util.h"
#include "harness/redis_server.h"
#include "harness/redis_util.h"
#include "harness/sleep.h"
#include "harness/cancel.h"
#include "legacy/internal.h"
#include "lockbridge/lockbridge.h"

static lbt_redis server;
static redisContext *admin; /* the test's own connection, for setup and checks */

typedef struct combo {
    const char *codec;
    lb_legacy_variant variant;
} combo;

static const combo combos[] = {
    {"ms", LB_LEGACY_WIRE},
    {"ms", LB_LEGACY_SCRIPTED},
    {"s", LB_LEGACY_WIRE},
    {"s", LB_LEGACY_SCRIPTED},
    {"float", LB_LEGACY_WIRE},
    {"float", LB_LEGACY_SCRIPTED},
    {"json", LB_LEGACY_WIRE},
    {"json", LB_LEGACY_SCRIPTED},
    {"json:unit=ms,clock=epoch", LB_LEGACY_WIRE},
    {"json:unit=ms,clock=epoch", LB_LEGACY_SCRIPTED},
};
#define N_COMBOS (sizeof combos / sizeof combos[0])

/* ---- Helpers -------------------------------------------------------------------------- */
static const char *variant_name(lb_legacy_variant v) {
    return v == LB_LEGACY_SCRIPTED ? "scripted" : "wire";
}

static void lbt_key(char *out, size_t cap, const char *test, size_t combo_index) {
    snprintf(out, cap, "lg:%s:%zu", test, combo_index);
}

static lb_legacy_lock *lbt_lock(const combo *c, const char *key, int64_t ttl_ms,
                                const lb_clock *clock) {
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    assert_int_equal(lb_codec_parse(&o.codec, c->codec), LB_OK);
    o.variant = c->variant;
    o.ttl_ms = ttl_ms;
    o.clock = clock;
    lb_legacy_lock *l = NULL;
    assert_int_equal(lb_legacy_lock_new(&l, key, strlen(key), &o), LB_OK);
    return l;
}

static void lbt_set(const char *key, const char *v, size_t len) {
    lbt_cmd_ok(admin, "SET %s %b", key, v, len);
}

static void assert_key_is_ours(const char *key, const lb_legacy_lock *l) {
    size_t len = lb_legacy_info_of(l).value_len;
    const char *v = lb_legacy_info_of(l).value;
    assert_true(len > 0);
    lbt_assert_key(admin, key, v, len);
}

/* Writes a value of the lock's codec expiring `offset_ms` from now (negative:
 * already expired), as another client of the same format would. */
static void lbt_set_expiry(const combo *c, const char *key, int64_t offset_ms, char *out,
                           size_t *outlen) {
    lb_codec codec;
    assert_int_equal(lb_codec_parse(&codec, c->codec), LB_OK);
    lb_now now = lb_clock_now(NULL);
    int64_t span = 0, t = lb_codec_now(&codec, &now);
    assert_int_equal(lb_codec_ms_to_units(&codec, offset_ms < 0 ? -offset_ms : offset_ms, &span),
                     LB_OK);
    t += offset_ms < 0 ? -span : span;
    assert_int_equal(lb_codec_encode(&codec, t, out, LB_VALUE_MAX, outlen), LB_OK);
    lbt_set(key, out, *outlen);
}

/* Runs a machine like the synchronous driver, calling `hook` before command
 * number `at` (0-based) is sent: the test acts on the server between two of
 * the machine's commands. */
typedef struct lbt_hook {
    unsigned at;
    void (*act)(struct lbt_hook *h);
    const char *key;
    const char *value; /* for act_set */
    size_t len;
    long long victim; /* for act_kill: the client id to kill */
} lbt_hook;

static int lbt_drive(redisContext *c, lb_machine *m, lbt_hook *h) {
    lb_now now = lb_clock_now(NULL);
    int rc = lb_machine_step(m, NULL, &now);
    for (unsigned i = 0; rc == LB_STEP_SEND; i++) {
        const lb_cmd *cmd = lb_machine_command(m);
        if (h && i == h->at) h->act(h);
        const char *argv[LB_CMD_MAX_ARGS];
        for (int a = 0; a < cmd->argc; a++) argv[a] = cmd->argv[a];
        redisReply *r = redisCommandArgv(c, cmd->argc, argv, cmd->argvlen);
        now = lb_clock_now(NULL);
        rc = lb_machine_step(m, r, &now);
        if (r) freeReplyObject(r);
    }
    return rc;
}

static void act_del(lbt_hook *h) { lbt_del(admin, h->key); }
static void act_set(lbt_hook *h) { lbt_set(h->key, h->value, h->len); }

static long long client_id(redisContext *c) { return lbt_int(c, "CLIENT ID"); }

static void kill_client(redisContext *victim) {
    long long id = client_id(victim);
    lbt_cmd_ok(admin, "CLIENT KILL ID %lld", id);
}

/* The id is read before the operation starts, since the victim's connection
 * is the one the machine is using. */
static void act_kill(lbt_hook *h) { lbt_cmd_ok(admin, "CLIENT KILL ID %lld", h->victim); }

static redisContext *lbt_connect(void) {
    redisContext *c = lbt_redis_connect(&server);
    assert_non_null(c);
    return c;
}

/* ---- Acquire, contend, release ---------------------------------------------------------- */
static void test_acquire_contend_release_for_every_codec_and_variant(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64];
        lbt_key(key, sizeof key, "basic", i);
        print_message("%s %s\n", combos[i].codec, variant_name(combos[i].variant));
        redisContext *ca = lbt_connect(), *cb = lbt_connect();
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);
        lb_legacy_lock *b = lbt_lock(&combos[i], key, 30000, NULL);
        lbt_cmd_ok(admin, "SCRIPT FLUSH");
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(ca)), LB_OK);
        assert_true(lb_legacy_info_of(a).held);
        assert_key_is_ours(key, a);
        assert_int_equal(lb_legacy_try_acquire(b, lb_on_conn(cb)), LB_EBUSY);
        assert_false(lb_legacy_info_of(b).held);
        int64_t seen = 0;
        assert_true(lb_legacy_info_of(b).observed);
        seen = lb_legacy_info_of(b).observed_expiry;
        assert_int_equal(seen, lb_legacy_info_of(a).expiry);
        assert_key_is_ours(key, a);
        assert_int_equal(lb_legacy_release(a, lb_on_conn(ca)), LB_OK);
        assert_false(lb_legacy_info_of(a).held);
        lbt_assert_key(admin, key, NULL, 0);
        assert_int_equal(lb_legacy_release(a, lb_on_conn(ca)), LB_ESTATE);
        assert_int_equal(lb_legacy_try_acquire(b, lb_on_conn(cb)), LB_OK);
        assert_key_is_ours(key, b);
        assert_int_equal(lb_legacy_release(b, lb_on_conn(cb)), LB_OK);
        /* SETNX; then GET and DEL on the wire, or the script (EVALSHA, then
         * EVAL, as the cache was flushed). The scripted variant first checks,
         * once, that the server runs scripts (EVALSHA, then EVAL). */
        assert_int_equal(lb_legacy_info_of(a).commands,
                         combos[i].variant == LB_LEGACY_SCRIPTED ? 5 : 3);
        lb_legacy_lock_free(a);
        lb_legacy_lock_free(b);
        redisFree(ca);
        redisFree(cb);
    }
}

static void test_a_crashed_holders_expired_lock_is_taken_over(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64], dead[LB_VALUE_MAX];
        size_t deadlen;
        lbt_key(key, sizeof key, "crash", i);
        lbt_set_expiry(&combos[i], key, -5000, dead, &deadlen);
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(admin)), LB_OK);
        assert_key_is_ours(key, a);
        assert_int_equal(lb_legacy_release(a, lb_on_conn(admin)), LB_OK);
        lbt_assert_key(admin, key, NULL, 0);
        lb_legacy_lock_free(a);
    }
}

/* ---- The nil rules and the takeover race, provoked between two commands ------------------ */
static void test_a_key_deleted_between_setnx_and_get_is_retried(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64], held[LB_VALUE_MAX];
        size_t heldlen;
        lbt_key(key, sizeof key, "nilget", i);
        lbt_set_expiry(&combos[i], key, 60000, held, &heldlen);
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);
        lbt_hook h = {1, act_del, key, NULL, 0, 0}; /* before GET */
        lb_machine *m = lb_legacy_machine(a, LB_OP_TRY_ACQUIRE, 0);
        assert_int_equal(lbt_drive(admin, m, &h), LB_OK);
        assert_int_equal(lb_machine_commands(m), 3); /* SETNX, GET (nil), SETNX */
        assert_key_is_ours(key, a);
        lbt_del(admin, key);
        lb_legacy_lock_free(a);
    }
}

static void test_a_key_deleted_before_the_takeover_is_held(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64], dead[LB_VALUE_MAX];
        size_t deadlen;
        lbt_key(key, sizeof key, "nilgetset", i);
        lbt_set_expiry(&combos[i], key, -5000, dead, &deadlen);
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);
        lbt_hook h = {2, act_del, key, NULL, 0, 0}; /* before GETSET or the script */
        assert_int_equal(lbt_drive(admin, lb_legacy_machine(a, LB_OP_TRY_ACQUIRE, 0), &h), LB_OK);
        assert_true(lb_legacy_info_of(a).held);
        assert_key_is_ours(key, a);
        assert_int_equal(lb_legacy_release(a, lb_on_conn(admin)), LB_OK);
        lb_legacy_lock_free(a);
    }
}

/* A racer takes the expired lock between our GET and our takeover. On the wire
 * our GETSET cannot help overwriting the winner's value, and we must not
 * believe we hold the lock; the script leaves the winner's value alone. */
static void test_losing_the_takeover_race_is_busy(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64], dead[LB_VALUE_MAX], racer[LB_VALUE_MAX];
        size_t deadlen, racerlen;
        lbt_key(key, sizeof key, "race", i);
        lbt_set_expiry(&combos[i], key, 60000, racer, &racerlen);
        lbt_set_expiry(&combos[i], key, -5000, dead, &deadlen);
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);
        lbt_hook h = {2, act_set, key, racer, racerlen, 0};
        assert_int_equal(lbt_drive(admin, lb_legacy_machine(a, LB_OP_TRY_ACQUIRE, 0), &h), LB_EBUSY);
        assert_false(lb_legacy_info_of(a).held);
        if (combos[i].variant == LB_LEGACY_SCRIPTED) {
            lbt_assert_key(admin, key, racer, racerlen);
        } else {
            redisReply *r = redisCommand(admin, "GET %s", key);
            assert_non_null(r);
            assert_int_equal(r->type, REDIS_REPLY_STRING);
            assert_false(r->len == racerlen && memcmp(r->str, racer, racerlen) == 0);
            freeReplyObject(r);
        }
        lbt_del(admin, key);
        lb_legacy_lock_free(a);
    }
}

/* ---- Foreign values and other types: reported, never touched ------------------------------ */
typedef struct raw {
    const char *v;
    size_t len;
} raw;
#define RAW(s) {s, sizeof(s) - 1}

static void test_foreign_values_are_reported_and_left_byte_for_byte(void **state) {
    (void)state;
    static const raw universal[] = {
        RAW(""),
        RAW("abc"),
        RAW("-5"),
        RAW("1e3"),
        RAW("0x10"),
        RAW(" 1700000000000"),
        RAW("17\0" "00000000000"),
        RAW("\0"),
        RAW("\xff\xfe\x00\x01"),
        RAW("{\"uid\":\"0f8b6c1e-1c4f-4a51-9a7e-2b1d1f7a6c3e\"}"),
        RAW("5f2b8c0d9e1a4b3c8d7e6f5a4b3c2d1e"),
        RAW("{\"expiryTime\":1,\"expiryTime\":2}"),
        {NULL, 1 << 20}, /* a mebibyte of digits */
    };
    char *big = malloc(1 << 20);
    assert_non_null(big);
    memset(big, '9', 1 << 20);
    big[100] = '\0'; /* and a NUL inside it */
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64];
        lbt_key(key, sizeof key, "foreign", i);
        int json = strncmp(combos[i].codec, "json", 4) == 0;
        raw other = json ? (raw)RAW("1700000000000") : (raw)RAW("{\"expiryTime\":1}");
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);
        for (size_t j = 0; j <= sizeof universal / sizeof universal[0]; j++) {
            raw v = j < sizeof universal / sizeof universal[0] ? universal[j] : other;
            if (!v.v) v.v = big;
            print_message("%s %s foreign value %zu (%zu bytes)\n", combos[i].codec,
                          variant_name(combos[i].variant), j, v.len);
            lbt_set(key, v.v, v.len);
            assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(admin)), LB_EFOREIGN);
            assert_false(lb_legacy_info_of(a).held);
            lbt_assert_key(admin, key, v.v, v.len);
            assert_non_null(strstr(lb_legacy_info_of(a).errstr, "not in this client's format"));
        }
        lbt_del(admin, key);
        lb_legacy_lock_free(a);
    }
    free(big);
}

static void test_keys_of_other_types_are_wrongtype_and_untouched(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char hkey[64], lkey[64];
        lbt_key(hkey, sizeof hkey, "hash", i);
        lbt_key(lkey, sizeof lkey, "list", i);
        lbt_cmd_ok(admin, "HSET %s f v", hkey);
        lbt_cmd_ok(admin, "RPUSH %s a b", lkey);
        lb_legacy_lock *h = lbt_lock(&combos[i], hkey, 30000, NULL);
        lb_legacy_lock *l = lbt_lock(&combos[i], lkey, 30000, NULL);
        assert_int_equal(lb_legacy_try_acquire(h, lb_on_conn(admin)), LB_EWRONGTYPE);
        assert_int_equal(lb_legacy_try_acquire(l, lb_on_conn(admin)), LB_EWRONGTYPE);
        assert_false(lb_legacy_info_of(h).held);
        redisReply *r = redisCommand(admin, "HGETALL %s", hkey);
        assert_non_null(r);
        assert_int_equal(r->elements, 2);
        assert_string_equal(r->element[0]->str, "f");
        assert_string_equal(r->element[1]->str, "v");
        freeReplyObject(r);
        r = redisCommand(admin, "LRANGE %s 0 -1", lkey);
        assert_non_null(r);
        assert_int_equal(r->elements, 2);
        assert_string_equal(r->element[0]->str, "a");
        assert_string_equal(r->element[1]->str, "b");
        freeReplyObject(r);
        lbt_cmd_ok(admin, "DEL %s %s", hkey, lkey);
        lb_legacy_lock_free(h);
        lb_legacy_lock_free(l);
    }
}

/* ---- Release ---------------------------------------------------------------------------- */
static void test_release_after_a_takeover_is_lost_and_leaves_the_new_value(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64], other[LB_VALUE_MAX];
        size_t otherlen;
        lbt_key(key, sizeof key, "lost", i);
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(admin)), LB_OK);
        lbt_set_expiry(&combos[i], key, 90000, other, &otherlen); /* another client took it */
        assert_int_equal(lb_legacy_release(a, lb_on_conn(admin)), LB_ELOST);
        assert_false(lb_legacy_info_of(a).held);
        lbt_assert_key(admin, key, other, otherlen);
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(admin)), LB_EBUSY);
        /* Gone altogether: lost as well, and nothing is created. */
        lbt_del(admin, key);
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(admin)), LB_OK);
        lbt_del(admin, key);
        assert_int_equal(lb_legacy_release(a, lb_on_conn(admin)), LB_ELOST);
        lbt_assert_key(admin, key, NULL, 0);
        lb_legacy_lock_free(a);
    }
}

/* A release margin longer than the ttl puts every release inside it. */
/* A wall clock that stands still: two clients acquiring "at the same
 * moment" write the same legacy value (with the s codec, any two in the same
 * second do). */
static int64_t still_wall_us(void *ud) { return ((const int64_t *)ud)[0]; }
static int64_t still_mono_ns(void *ud) { return ((const int64_t *)ud)[1]; }

/* Runs a release, sending its commands, but loses the reply of the command
 * that deletes (DEL, or the release script): the machine sees the connection
 * fail after the server has run it. */
static int release_losing_the_delete_reply(redisContext *c, lb_legacy_lock *l) {
    lb_machine *m = lb_legacy_machine(l, LB_OP_RELEASE, 0);
    lb_now now = lb_clock_now(NULL);
    int rc = lb_machine_step(m, NULL, &now);
    while (rc == LB_STEP_SEND) {
        const lb_cmd *cmd = lb_machine_command(m);
        const char *argv[LB_CMD_MAX_ARGS];
        for (int a = 0; a < cmd->argc; a++) argv[a] = cmd->argv[a];
        int deletes = strcmp(argv[0], "GET") != 0;
        redisReply *r = redisCommandArgv(c, cmd->argc, argv, cmd->argvlen);
        assert_non_null(r);
        now = lb_clock_now(NULL);
        rc = lb_machine_step(m, deletes ? NULL : r, &now);
        freeReplyObject(r);
    }
    return rc;
}

/* A holder's release runs but its reply is lost (LB_EIO). A second client
 * then takes the free lock and, in the same unit of the codec, writes the
 * very value the first had written. Legacy values name no holder, so a
 * retried release could not tell the two apart and would delete the second
 * client's lock: the handle is therefore no longer held after such an
 * LB_EIO, and a retry is refused (LB_ESTATE) without a command. */
static void test_a_release_whose_reply_was_lost_never_deletes_an_equal_later_value(void **state) {
    (void)state;
    lb_now start = lb_clock_now(NULL);
    int64_t t[2] = {start.wall_us, start.mono_ns};
    lb_clock still = {still_wall_us, still_mono_ns, t, 0, NULL};
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64];
        lbt_key(key, sizeof key, "lostdel", i);
        lbt_del(admin, key);
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 10000, &still);
        lb_legacy_lock *b = lbt_lock(&combos[i], key, 10000, &still);
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(admin)), LB_OK);
        assert_int_equal(release_losing_the_delete_reply(admin, a), LB_EIO);
        assert_false(lb_legacy_info_of(a).held);
        assert_int_equal(lb_legacy_try_acquire(b, lb_on_conn(admin)), LB_OK);
        size_t la = lb_legacy_info_of(a).value_len, lb = lb_legacy_info_of(b).value_len;
        const char *va = lb_legacy_info_of(a).value, *vb = lb_legacy_info_of(b).value;
        assert_true(la == lb && memcmp(va, vb, la) == 0); /* the same value */
        assert_int_equal(lb_legacy_release(a, lb_on_conn(admin)), LB_ESTATE);
        assert_key_is_ours(key, b);
        assert_int_equal(lb_legacy_release(b, lb_on_conn(admin)), LB_OK);
        lb_legacy_lock_free(a);
        lb_legacy_lock_free(b);
    }
}

static void test_wire_release_inside_the_margin_leaves_the_key(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64];
        lbt_key(key, sizeof key, "margin", i);
        lb_legacy_options o;
        lb_legacy_options_init(&o);
        assert_int_equal(lb_codec_parse(&o.codec, combos[i].codec), LB_OK);
        o.variant = combos[i].variant;
        o.ttl_ms = 12000;
        o.release_margin_ms = 10000;
        lb_clock clock; /* system clocks, moved 5 s on after acquiring */
        memset(&clock, 0, sizeof clock);
        o.clock = &clock;
        lb_legacy_lock *a = NULL;
        assert_int_equal(lb_legacy_lock_new(&a, key, strlen(key), &o), LB_OK);
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(admin)), LB_OK);
        clock.offset_ms = 5000; /* about 7 s left: inside the 10 s margin */
        if (combos[i].variant == LB_LEGACY_WIRE) {
            int rc = lb_legacy_release(a, lb_on_conn(admin));
            assert_int_equal(rc, LB_EEXPIRED);
            /* Not a failure: the texts say the lock is left to lapse on purpose. */
            assert_non_null(strstr(lb_strerror(rc), "left to expire on purpose"));
            assert_non_null(strstr(lb_legacy_info_of(a).errstr, "on purpose"));
            assert_false(lb_legacy_info_of(a).held);
            assert_key_is_ours(key, a);
            lbt_del(admin, key);
        } else {
            /* Compare-and-delete is atomic: no margin needed. */
            assert_int_equal(lb_legacy_release(a, lb_on_conn(admin)), LB_OK);
            lbt_assert_key(admin, key, NULL, 0);
        }
        lb_legacy_lock_free(a);
    }
}

/* A wire lock whose every release would be refused is a configuration error. */
static void test_wire_ttl_within_the_release_margin_is_refused(void **state) {
    (void)state;
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    o.ttl_ms = 1000;
    o.release_margin_ms = 1000;
    char why[160] = "stale";
    o.errbuf = why;
    o.errbuf_size = sizeof why;
    lb_legacy_lock *a = (lb_legacy_lock *)&o;
    assert_int_equal(lb_legacy_lock_new(&a, "k", 1, &o), LB_EINVAL);
    assert_null(a);
    /* The reason names both options, not only "invalid argument". */
    assert_non_null(strstr(why, "ttl_ms"));
    assert_non_null(strstr(why, "release_margin_ms"));
    o.variant = LB_LEGACY_SCRIPTED; /* no margin applies: accepted */
    assert_int_equal(lb_legacy_lock_new(&a, "k", 1, &o), LB_OK);
    assert_string_equal(why, ""); /* reset on success */
    lb_legacy_lock_free(a);
}

/* ---- Extend and lost scripts --------------------------------------------------------------- */
static void test_scripted_extend_writes_a_later_expiry(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64], before[LB_VALUE_MAX];
        size_t len;
        lbt_key(key, sizeof key, "extend", i);
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(admin)), LB_OK);
        const char *v = lb_legacy_info_of(a).value;
        len = lb_legacy_info_of(a).value_len;
        memcpy(before, v, len + 1);
        int64_t old_expiry = lb_legacy_info_of(a).expiry;
        if (combos[i].variant == LB_LEGACY_WIRE) {
            assert_int_equal(lb_legacy_extend(a, lb_on_conn(admin), 60000), LB_EINVAL);
            lbt_assert_key(admin, key, before, len);
        } else {
            assert_int_equal(lb_legacy_extend(a, lb_on_conn(admin), 60000), LB_OK);
            assert_true(lb_legacy_info_of(a).expiry > old_expiry);
            assert_string_not_equal(lb_legacy_info_of(a).value, before);
            assert_key_is_ours(key, a);
            lbt_set(key, "x", 1);
            assert_int_equal(lb_legacy_extend(a, lb_on_conn(admin), 60000), LB_ELOST);
            lbt_assert_key(admin, key, "x", 1);
        }
        lbt_del(admin, key);
        lb_legacy_lock_free(a);
    }
}

static void test_scripted_variant_survives_script_flush(void **state) {
    (void)state;
    /* The embedded SHA1 is what the server computes for the body. */
    const lb_script *scripts[] = {&lb__script_legacy_takeover, &lb__script_legacy_release,
                                  &lb__script_legacy_extend};
    for (size_t s = 0; s < 3; s++) {
        redisReply *r = redisCommand(admin, "SCRIPT LOAD %s", scripts[s]->body);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_string_equal(r->str, scripts[s]->sha1);
        freeReplyObject(r);
    }
    for (size_t i = 0; i < N_COMBOS; i++) {
        if (combos[i].variant != LB_LEGACY_SCRIPTED) continue;
        char key[64], dead[LB_VALUE_MAX];
        size_t deadlen;
        lbt_key(key, sizeof key, "flush", i);
        lbt_set_expiry(&combos[i], key, -5000, dead, &deadlen);
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);
        lbt_cmd_ok(admin, "SCRIPT FLUSH");
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(admin)), LB_OK);
        assert_key_is_ours(key, a);
        lbt_cmd_ok(admin, "SCRIPT FLUSH");
        assert_int_equal(lb_legacy_extend(a, lb_on_conn(admin), 60000), LB_OK);
        assert_key_is_ours(key, a);
        lbt_cmd_ok(admin, "SCRIPT FLUSH");
        assert_int_equal(lb_legacy_release(a, lb_on_conn(admin)), LB_OK);
        lbt_assert_key(admin, key, NULL, 0);
        lb_legacy_lock_free(a);
    }
}

/* ---- Blocking acquire ---------------------------------------------------------------------- */
typedef struct releaser {
    lb_legacy_lock *holder;
    int status;
} releaser;

static void *release_soon(void *arg) {
    releaser *r = arg;
    struct timespec ts = {0, 150 * 1000000};
    nanosleep(&ts, NULL);
    redisContext *c = lbt_redis_connect(&server);
    r->status = c ? lb_legacy_release(r->holder, lb_on_conn(c)) : LB_EIO;
    if (c) redisFree(c);
    return NULL;
}

static void test_blocking_acquire_times_out_then_wins_after_release(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64];
        lbt_key(key, sizeof key, "block", i);
        lb_legacy_lock *holder = lbt_lock(&combos[i], key, 30000, NULL);
        lb_legacy_lock *waiter = lbt_lock(&combos[i], key, 30000, NULL);
        assert_int_equal(lb_legacy_try_acquire(holder, lb_on_conn(admin)), LB_OK);
        assert_int_equal(lb_legacy_acquire(waiter, lb_on_conn(admin), 100), LB_ETIMEDOUT);
        assert_key_is_ours(key, holder);
        /* The holder releases from another thread while we wait. */
        releaser r = {holder, 1};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, release_soon, &r), 0);
        /* No time limit (INT64_MAX ms: the deadline saturates, never wraps). */
        int rc = lb_legacy_acquire(waiter, lb_on_conn(admin), INT64_MAX);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(r.status, LB_OK);
        assert_int_equal(rc, LB_OK);
        assert_key_is_ours(key, waiter);
        assert_int_equal(lb_legacy_release(waiter, lb_on_conn(admin)), LB_OK);
        lb_legacy_lock_free(holder);
        lb_legacy_lock_free(waiter);
    }
}

static void *cancel_soon(void *arg) {
    lbt_sleep_ms(200);
    lbt_cancel(arg);
    return NULL;
}

/* A wait of 8 s on a lock held for 30 s ends with LB_ECANCELED soon after
 * another thread cancels it (2 s: a generous bound, a quarter of the wait),
 * holding nothing; the handle acquires once the holder is gone. */
static void test_blocking_acquire_is_cancelled_by_the_clocks_sleep_hook(void **state) {
    (void)state;
    lbt_canceller c;
    lbt_canceller_init(&c);
    lb_legacy_lock *holder = lbt_lock(&combos[0], "lg:cancel", 30000, NULL);
    lb_legacy_lock *waiter = lbt_lock(&combos[0], "lg:cancel", 30000, &c.clock);
    assert_int_equal(lb_legacy_try_acquire(holder, lb_on_conn(admin)), LB_OK);
    pthread_t th;
    int64_t start = lbt_mono_ms();
    assert_int_equal(pthread_create(&th, NULL, cancel_soon, &c), 0);
    assert_int_equal(lb_legacy_acquire(waiter, lb_on_conn(admin), 8000), LB_ECANCELED);
    assert_true(lbt_mono_ms() - start < 2000);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_key_is_ours("lg:cancel", holder);
    assert_int_equal(lb_legacy_release(holder, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(waiter, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_legacy_release(waiter, lb_on_conn(admin)), LB_OK);
    lb_legacy_lock_free(holder);
    lb_legacy_lock_free(waiter);
    lbt_canceller_destroy(&c);
}

static void test_blocking_acquire_on_a_foreign_value_ends_foreign(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i += 2) {
        char key[64];
        lbt_key(key, sizeof key, "blockforeign", i);
        lbt_set(key, "{\"uid\":\"u\"}", 11);
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);
        assert_int_equal(lb_legacy_acquire(a, lb_on_conn(admin), 50), LB_EFOREIGN);
        lbt_assert_key(admin, key, "{\"uid\":\"u\"}", 11);
        assert_true(lb_legacy_info_of(a).commands >= 2);
        lbt_del(admin, key);
        lb_legacy_lock_free(a);
    }
}

/* A sleep hook that counts the wait's sleeps and cancels at the first: a wait
 * that would sleep ends LB_ECANCELED, one that does not never calls it. */
static int count_and_cancel(void *ud, int64_t ms) {
    (void)ms;
    ++*(int *)ud;
    return 1;
}

static void test_a_foreign_value_fails_a_blocking_acquire_at_once_when_asked(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64];
        lbt_key(key, sizeof key, "foreignfast", i);
        lbt_set(key, "{\"uid\":\"u\"}", 11);
        int sleeps = 0;
        lb_clock clock = {NULL, NULL, NULL, 0, count_and_cancel};
        clock.ud = &sleeps;
        lb_legacy_options o;
        lb_legacy_options_init(&o);
        assert_int_equal(lb_codec_parse(&o.codec, combos[i].codec), LB_OK);
        o.variant = combos[i].variant;
        o.clock = &clock;
        o.foreign_fails_at_once = 1;
        lb_legacy_lock *a = NULL;
        assert_int_equal(lb_legacy_lock_new(&a, LB_KEY(key), &o), LB_OK);
        assert_int_equal(lb_legacy_acquire(a, lb_on_conn(admin), 60000), LB_EFOREIGN);
        assert_int_equal(sleeps, 0);
        lbt_assert_key(admin, key, "{\"uid\":\"u\"}", 11);
        assert_string_not_equal(lb_legacy_info_of(a).foreign, "");
        /* Without the option the same wait sleeps (and is cancelled here). */
        lb_legacy_lock_free(a);
        o.foreign_fails_at_once = 0;
        assert_int_equal(lb_legacy_lock_new(&a, LB_KEY(key), &o), LB_OK);
        assert_int_equal(lb_legacy_acquire(a, lb_on_conn(admin), 60000), LB_ECANCELED);
        assert_int_equal(sleeps, 1);
        lbt_del(admin, key);
        lb_legacy_lock_free(a);
    }
}

/* ---- Clocks ------------------------------------------------------------------------------- */
static void test_a_skewed_clock_judges_expiry_by_its_own_offset(void **state) {
    (void)state;
    lb_clock late = {NULL, NULL, NULL, 20000, NULL}, early = {NULL, NULL, NULL, -20000, NULL};
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64];
        lbt_key(key, sizeof key, "skew", i);
        lb_legacy_lock *holder = lbt_lock(&combos[i], key, 5000, NULL);
        lb_legacy_lock *behind = lbt_lock(&combos[i], key, 5000, &early);
        lb_legacy_lock *ahead = lbt_lock(&combos[i], key, 5000, &late);
        assert_int_equal(lb_legacy_try_acquire(holder, lb_on_conn(admin)), LB_OK);
        /* 20 s behind: the holder's 5 s lock is far from expiry. */
        assert_int_equal(lb_legacy_try_acquire(behind, lb_on_conn(admin)), LB_EBUSY);
        assert_key_is_ours(key, holder);
        /* 20 s ahead: it expired 15 s ago. */
        assert_int_equal(lb_legacy_try_acquire(ahead, lb_on_conn(admin)), LB_OK);
        assert_key_is_ours(key, ahead);
        assert_int_equal(lb_legacy_release(holder, lb_on_conn(admin)), LB_ELOST);
        /* The early client's own fresh lock, seen by an unskewed client, is
         * long expired: its skew hands the lock to anyone. */
        assert_int_equal(lb_legacy_release(ahead, lb_on_conn(admin)), LB_OK);
        assert_int_equal(lb_legacy_try_acquire(behind, lb_on_conn(admin)), LB_OK);
        assert_int_equal(lb_legacy_try_acquire(holder, lb_on_conn(admin)), LB_OK);
        assert_key_is_ours(key, holder);
        assert_int_equal(lb_legacy_release(holder, lb_on_conn(admin)), LB_OK);
        lb_legacy_lock_free(holder);
        lb_legacy_lock_free(behind);
        lb_legacy_lock_free(ahead);
    }
}

/* ---- Dropped connections -------------------------------------------------------------------- */
static void test_a_killed_connection_is_eio_never_ok(void **state) {
    (void)state;
    for (size_t i = 0; i < N_COMBOS; i++) {
        char key[64], held[LB_VALUE_MAX];
        size_t heldlen;
        lbt_key(key, sizeof key, "kill", i);
        lb_legacy_lock *a = lbt_lock(&combos[i], key, 30000, NULL);

        /* Killed before an operation. */
        redisContext *c = lbt_connect();
        kill_client(c);
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(c)), LB_EIO);
        assert_int_equal(lb_legacy_acquire(a, lb_on_conn(c), 100), LB_EIO);
        assert_false(lb_legacy_info_of(a).held);
        redisFree(c);

        /* Killed between SETNX and GET. */
        lbt_set_expiry(&combos[i], key, 60000, held, &heldlen);
        c = lbt_connect();
        lbt_hook h = {1, act_kill, key, NULL, 0, client_id(c)};
        assert_int_equal(lbt_drive(c, lb_legacy_machine(a, LB_OP_TRY_ACQUIRE, 0), &h), LB_EIO);
        assert_false(lb_legacy_info_of(a).held);
        lbt_assert_key(admin, key, held, heldlen);
        redisFree(c);
        lbt_del(admin, key);

        /* Killed while held: the wire release's GET changed nothing, so the
         * handle stays held and is released again; the scripted release may
         * have run, so the handle lets go and the lock (here untouched, the
         * script never ran) lapses at its expiry. */
        c = lbt_connect();
        assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(c)), LB_OK);
        kill_client(c);
        assert_int_equal(lb_legacy_release(a, lb_on_conn(c)), LB_EIO);
        int wire = combos[i].variant == LB_LEGACY_WIRE;
        assert_int_equal(lb_legacy_info_of(a).held, wire);
        assert_key_is_ours(key, a);
        redisFree(c);
        assert_int_equal(lb_legacy_release(a, lb_on_conn(admin)), wire ? LB_OK : LB_ESTATE);
        lbt_del(admin, key);
        lb_legacy_lock_free(a);
    }
}

static void test_a_stopped_server_is_eio(void **state) {
    (void)state;
    lbt_redis other;
    assert_int_equal(lbt_redis_start(&other, NULL), 0);
    redisContext *c = lbt_redis_connect(&other);
    assert_non_null(c);
    lb_legacy_lock *wire = lbt_lock(&combos[0], "lg:stop", 30000, NULL);
    lb_legacy_lock *scripted = lbt_lock(&combos[1], "lg:stop2", 30000, NULL);
    assert_int_equal(lb_legacy_try_acquire(wire, lb_on_conn(c)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(scripted, lb_on_conn(c)), LB_OK);
    lbt_redis_stop(&other);
    assert_int_equal(lb_legacy_release(wire, lb_on_conn(c)), LB_EIO);
    assert_int_equal(lb_legacy_extend(scripted, lb_on_conn(c), 60000), LB_EIO);
    assert_int_equal(lb_legacy_release(scripted, lb_on_conn(c)), LB_EIO);
    assert_true(lb_legacy_info_of(wire).held);
    lb_legacy_lock *late = lbt_lock(&combos[0], "lg:stop3", 30000, NULL);
    assert_int_equal(lb_legacy_try_acquire(late, lb_on_conn(c)), LB_EIO);
    assert_false(lb_legacy_info_of(late).held);
    redisFree(c);
    lb_legacy_lock_free(wire);
    lb_legacy_lock_free(scripted);
    lb_legacy_lock_free(late);
}

/* ---- Keys of any bytes ------------------------------------------------------------------ */
static void test_keys_with_nul_bytes_are_locked_exactly(void **state) {
    (void)state;
    static const char key[] = "lg:nul\0a", sibling[] = "lg:nul\0b";
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    lb_legacy_lock *a = NULL, *b = NULL;
    assert_int_equal(lb_legacy_lock_new(&a, key, sizeof key - 1, &o), LB_OK);
    assert_int_equal(lb_legacy_lock_new(&b, sibling, sizeof sibling - 1, &o), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(a, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(b, lb_on_conn(admin)), LB_OK); /* a different key */
    redisReply *r = redisCommand(admin, "EXISTS %b %b", key, sizeof key - 1, sibling,
                                 sizeof sibling - 1);
    assert_non_null(r);
    assert_int_equal(r->integer, 2);
    freeReplyObject(r);
    assert_int_equal(lb_legacy_release(a, lb_on_conn(admin)), LB_OK);
    assert_int_equal(lb_legacy_release(b, lb_on_conn(admin)), LB_OK);
    lb_legacy_lock_free(a);
    lb_legacy_lock_free(b);
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

/* ---- A losing GETSET never shortens the winner's lock -------------------------------- */
/* An expired lock; a lockbridge wire client (30 s) reads it expired; before
 * its GETSET, L1 (15 min) wins the takeover with its own GETSET. Ours then
 * lands on L1's value: it loses, and the value it leaves must not end before
 * L1's, or anyone takes L1's live lock over once our 30 s have passed. */
static void test_a_losing_getset_never_shortens_the_winners_lock(void **state) {
    (void)state;
    static const combo ms = {"ms", LB_LEGACY_WIRE};
    const char *key = "lg:shorten";
    char expired[LB_VALUE_MAX], l1[LB_VALUE_MAX];
    size_t elen, l1len;
    lbt_set_expiry(&ms, key, -5000, expired, &elen);
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    o.ttl_ms = 30000;
    o.fleet_max_ttl_ms = 15 * 60000; /* the fleet's longest validity: L1's */
    lb_legacy_lock *ours = NULL;
    assert_int_equal(lb_legacy_lock_new(&ours, key, strlen(key), &o), LB_OK);
    /* L1's winning GETSET, between our GET (command 1) and GETSET (command 2). */
    lb_codec codec;
    assert_int_equal(lb_codec_parse(&codec, "ms"), LB_OK);
    lb_now now = lb_clock_now(NULL);
    int64_t l1_expiry = lb_codec_now(&codec, &now) + 15 * 60000;
    assert_int_equal(lb_codec_encode(&codec, l1_expiry, l1, sizeof l1, &l1len), LB_OK);
    lbt_hook h = {.at = 2, .act = act_set, .key = key, .value = l1, .len = l1len};
    redisContext *c = lbt_connect();
    lb_machine *m = lb_legacy_machine(ours, LB_OP_TRY_ACQUIRE, 0);
    assert_non_null(m);
    assert_int_equal(lbt_drive(c, m, &h), LB_EBUSY);
    assert_false(lb_legacy_info_of(ours).held);
    /* What the key holds now ends no earlier than L1's lock. */
    redisReply *r = redisCommand(admin, "GET %s", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    int64_t left = 0;
    assert_int_equal(lb_codec_decode(&codec, r->str, (size_t)r->len, &left), LB_OK);
    freeReplyObject(r);
    if (left < l1_expiry)
        fail_msg("the losing GETSET left %lld, before L1's %lld", (long long)left,
                 (long long)l1_expiry);
    redisFree(c);
    lb_legacy_lock_free(ours);
    lbt_del(admin, key);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_contend_release_for_every_codec_and_variant),
        cmocka_unit_test(test_a_crashed_holders_expired_lock_is_taken_over),
        cmocka_unit_test(test_a_key_deleted_between_setnx_and_get_is_retried),
        cmocka_unit_test(test_a_key_deleted_before_the_takeover_is_held),
        cmocka_unit_test(test_losing_the_takeover_race_is_busy),
        cmocka_unit_test(test_foreign_values_are_reported_and_left_byte_for_byte),
        cmocka_unit_test(test_keys_of_other_types_are_wrongtype_and_untouched),
        cmocka_unit_test(test_release_after_a_takeover_is_lost_and_leaves_the_new_value),
        cmocka_unit_test(test_a_release_whose_reply_was_lost_never_deletes_an_equal_later_value),
        cmocka_unit_test(test_wire_release_inside_the_margin_leaves_the_key),
        cmocka_unit_test(test_wire_ttl_within_the_release_margin_is_refused),
        cmocka_unit_test(test_scripted_extend_writes_a_later_expiry),
        cmocka_unit_test(test_scripted_variant_survives_script_flush),
        cmocka_unit_test(test_blocking_acquire_times_out_then_wins_after_release),
        cmocka_unit_test(test_blocking_acquire_is_cancelled_by_the_clocks_sleep_hook),
        cmocka_unit_test(test_blocking_acquire_on_a_foreign_value_ends_foreign),
        cmocka_unit_test(test_a_skewed_clock_judges_expiry_by_its_own_offset),
        cmocka_unit_test(test_a_killed_connection_is_eio_never_ok),
        cmocka_unit_test(test_a_stopped_server_is_eio),
        cmocka_unit_test(test_keys_with_nul_bytes_are_locked_exactly),
        cmocka_unit_test(test_a_losing_getset_never_shortens_the_winners_lock),
        cmocka_unit_test(test_a_foreign_value_fails_a_blocking_acquire_at_once_when_asked),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
