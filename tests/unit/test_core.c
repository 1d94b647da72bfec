/* Unit tests of core/: error names and messages, companion key naming, the
 * injectable clock, and the step-machine runtime with its script fallback. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/internal.h"
#include "lockbridge/lockbridge.h"
#include "unit/lbt_fake.h"

/* ---- Errors ---------------------------------------------------------------------- */
typedef struct err_row {
    int code;
    const char *name;
    const char *msg;
} err_row;

static const err_row err_rows[] = {
#define ERR_ROW_(name, value, msg) {LB_##name, "LB_" #name, msg},
    LB_ERRNO_MAP(ERR_ROW_)
#undef ERR_ROW_
};
#define N_ERR_ROWS (sizeof err_rows / sizeof err_rows[0])

static void test_every_error_code_has_its_own_name_and_message(void **state) {
    (void)state;
    for (size_t i = 0; i < N_ERR_ROWS; i++) {
        assert_true(err_rows[i].code < 0);
        assert_string_equal(lb_err_name(err_rows[i].code), err_rows[i].name);
        assert_string_equal(lb_strerror(err_rows[i].code), err_rows[i].msg);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(err_rows[i].code, err_rows[j].code);
            assert_string_not_equal(lb_strerror(err_rows[i].code),
                                    lb_strerror(err_rows[j].code));
        }
    }
    assert_string_equal(lb_err_name(LB_OK), "LB_OK");
    assert_string_equal(lb_strerror(LB_OK), "success");
}

static void test_unknown_error_codes_get_a_generic_name_and_message(void **state) {
    (void)state;
    static const int unknown[] = {1, LB_STEP_SEND + 1, -14, -100, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_string_equal(lb_err_name(unknown[i]), "LB_UNKNOWN");
        assert_string_equal(lb_strerror(unknown[i]), "unknown error");
    }
}

/* ---- Companion keys ---------------------------------------------------------------- */

/* Redis Cluster's slot of a key: CRC16 (XMODEM) of the hash tag if the key has
 * a non-empty one, else of the whole key, modulo 16384. */
static unsigned crc16_xmodem(const char *s, size_t len) {
    unsigned crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (unsigned)(unsigned char)s[i] << 8;
        for (int b = 0; b < 8; b++) crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) : (crc << 1);
        crc &= 0xffff;
    }
    return crc;
}

static unsigned lbt_key_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(open + 1, '}', len - from);
        if (close && close > open + 1) return crc16_xmodem(open + 1, (size_t)(close - open - 1)) & 16383;
    }
    return crc16_xmodem(key, len) & 16383;
}

typedef struct companion_case {
    const char *name;
    const char *key;
    size_t keylen; /* 0: strlen(key) */
    const char *suffix;
    size_t cap;
    int rc;               /* expected length, or LB_EINVAL */
    const char *expected; /* bytes written (rc of them) */
} companion_case;

static const companion_case companion_cases[] = {
    {"plain key is wrapped", "lock", 0, "fence", 64, 12, "{lock}:fence"},
    {"hash-tagged key gets a suffix", "{user}:1", 0, "fence", 64, 14, "{user}:1:fence"},
    {"tag in the middle", "a{b}c", 0, "ch", 64, 8, "a{b}c:ch"},
    {"first tag counts", "}{a}", 0, "s", 64, 6, "}{a}:s"},
    {"tag starting with a brace", "{{a}}", 0, "s", 64, 7, "{{a}}:s"},
    {"open brace without close is untagged", "a{b", 0, "s", 64, 7, "{a{b}:s"},
    {"empty tag is untagged, and its brace cannot be wrapped", "{}x", 0, "s", 64, LB_EINVAL, NULL},
    {"only an empty tag", "{}", 0, "s", 64, LB_EINVAL, NULL},
    {"empty tag before a real one is still untagged", "{}{a}", 0, "s", 64, LB_EINVAL, NULL},
    {"close brace without a tag", "a}b", 0, "s", 64, LB_EINVAL, NULL},
    {"buffer one byte short", "lock", 0, "fence", 12, LB_EINVAL, NULL},
    {"buffer exactly large enough", "lock", 0, "fence", 13, 12, "{lock}:fence"},
    {"zero capacity", "lock", 0, "fence", 0, LB_EINVAL, NULL},
    {"NUL bytes in a plain key", "a\0b", 3, "s", 64, 7, "{a\0b}:s"},
    {"NUL bytes inside a tag", "{a\0}x", 5, "s", 64, 7, "{a\0}x:s"},
    {"NUL before a close brace is no tag", "a\0}", 3, "s", 64, LB_EINVAL, NULL},
    {"empty suffix", "k", 0, "", 64, 4, "{k}:"},
};

static void test_companion_keys_share_the_lock_keys_slot(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof companion_cases / sizeof companion_cases[0]; i++) {
        const companion_case *c = &companion_cases[i];
        char out[64];
        memset(out, 'X', sizeof out);
        size_t keylen = c->keylen ? c->keylen : strlen(c->key);
        int rc = lb_companion_key(c->key, keylen, c->suffix, out, c->cap);
        print_message("case: %s\n", c->name);
        assert_int_equal(rc, c->rc);
        if (rc < 0) continue;
        assert_memory_equal(out, c->expected, (size_t)rc);
        assert_int_equal(out[rc], '\0');
        assert_int_equal(lbt_key_slot(out, (size_t)rc), lbt_key_slot(c->key, keylen));
    }
}

static void test_companion_key_rejects_missing_arguments(void **state) {
    (void)state;
    char out[32];
    assert_int_equal(lb_companion_key(NULL, 3, "s", out, sizeof out), LB_EINVAL);
    assert_int_equal(lb_companion_key("key", 0, "s", out, sizeof out), LB_EINVAL);
    assert_int_equal(lb_companion_key("key", 3, NULL, out, sizeof out), LB_EINVAL);
    assert_int_equal(lb_companion_key("key", 3, "s", NULL, sizeof out), LB_EINVAL);
}

/* ---- Clock ------------------------------------------------------------------------ */
typedef struct clock_case {
    int64_t offset_ms;
    int64_t wall_us, mono_ns; /* expected readings */
} clock_case;

static void test_clock_adds_its_offset_to_both_readings(void **state) {
    (void)state;
    static const clock_case cases[] = {
        {0, 1700000000123456, 5000000000007},
        {250, 1700000000373456, 5000250000007},
        {-1000, 1699999999123456, 4999000000007},
        {86400000, 1700086400123456, 91400000000007},
        /* Absurd offsets saturate instead of wrapping to the other end. */
        {INT64_MAX, INT64_MAX, INT64_MAX},
        {INT64_MIN, INT64_MIN + 1700000000123456, INT64_MIN + 5000000000007},
        {INT64_MAX / 1000, INT64_MAX, INT64_MAX},
    };
    lbt_fake_time t = {1700000000123456, 5000000000007};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_clock c = lbt_fake_clock(&t, cases[i].offset_ms);
        lb_now now = lb_clock_now(&c);
        assert_int_equal(now.wall_us, cases[i].wall_us);
        assert_int_equal(now.mono_ns, cases[i].mono_ns);
    }
}

static int64_t ts_us(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The system clocks are read between two readings of our own, so these checks
 * order instants rather than time anything. */
static void test_clock_without_callbacks_reads_the_system_clocks(void **state) {
    (void)state;
    lb_clock skewed = {NULL, NULL, NULL, 60000, NULL};
    int64_t wall0 = ts_us(CLOCK_REALTIME), mono0 = ts_us(CLOCK_MONOTONIC);
    lb_now plain = lb_clock_now(NULL);
    lb_now skew = lb_clock_now(&skewed);
    int64_t wall1 = ts_us(CLOCK_REALTIME), mono1 = ts_us(CLOCK_MONOTONIC);
    assert_in_range(plain.wall_us, wall0, wall1);
    assert_in_range(plain.mono_ns / 1000, mono0, mono1);
    assert_in_range(skew.wall_us - 60000000, wall0, wall1);
    assert_in_range(skew.mono_ns / 1000 - 60000000, mono0, mono1);
}

static void test_clock_mixes_a_fake_wall_clock_with_the_system_monotonic_clock(void **state) {
    (void)state;
    lbt_fake_time t = {42, 0};
    lb_clock c = lbt_fake_clock(&t, 1);
    c.mono_ns = NULL;
    int64_t mono0 = ts_us(CLOCK_MONOTONIC);
    lb_now now = lb_clock_now(&c);
    int64_t mono1 = ts_us(CLOCK_MONOTONIC);
    assert_int_equal(now.wall_us, 1042);
    assert_in_range(now.mono_ns / 1000 - 1000, mono0, mono1);
}

/* ---- Step-machine runtime ------------------------------------------------------------ */
static const lb_script probe_script = {
    "probe", "return redis.call('GET', KEYS[1])", "0123456789abcdef0123456789abcdef01234567"};

/* A protocol of one scripted command: it records every reply it is shown. */
typedef struct probe {
    lb_machine m; /* first: the step function recovers the probe from it */
    int started;
    int seen;
    int last_type;
    char last_str[64];
} probe;

static int probe_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    probe *p = (probe *)(void *)m;
    (void)now;
    if (!p->started) {
        p->started = 1;
        lb__cmd_script(m, &probe_script, "1");
        lb__cmd_argz(&m->cmd, "key");
        lb__cmd_arg(&m->cmd, "v\0w", 3);
        return LB_STEP_SEND;
    }
    p->seen++;
    if (!r) return lb__fail(m, LB_EIO, "no reply");
    p->last_type = r->type;
    snprintf(p->last_str, sizeof p->last_str, "%s", r->str ? r->str : "");
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(m, r, "probe");
    return LB_OK;
}

static void probe_begin(probe *p) {
    memset(p, 0, sizeof *p);
    lb__machine_begin(&p->m, probe_step);
}

static void assert_command(const lb_cmd *cmd, const char *verb, const char *arg1) {
    assert_int_equal(cmd->argc, 5);
    assert_int_equal(cmd->argvlen[0], strlen(verb));
    assert_memory_equal(cmd->argv[0], verb, strlen(verb));
    assert_int_equal(cmd->argvlen[1], strlen(arg1));
    assert_memory_equal(cmd->argv[1], arg1, strlen(arg1));
    assert_int_equal(cmd->argvlen[2], 1);
    assert_memory_equal(cmd->argv[2], "1", 1);
    assert_int_equal(cmd->argvlen[3], 3);
    assert_memory_equal(cmd->argv[3], "key", 3);
    assert_int_equal(cmd->argvlen[4], 3);
    assert_memory_equal(cmd->argv[4], "v\0w", 3);
}

static void test_noscript_reply_resends_the_script_body_with_eval(void **state) {
    (void)state;
    probe p;
    lb_now now = {0, 0};
    lbt_reply noscript = LBT_R_ERR("NOSCRIPT No matching script. Please use EVAL.");
    lbt_reply value = LBT_R_STR("held");
    redisReply r;
    probe_begin(&p);
    assert_int_equal(lb_machine_step(&p.m, NULL, &now), LB_STEP_SEND);
    assert_command(lb_machine_command(&p.m), "EVALSHA", probe_script.sha1);
    assert_int_equal(lb_machine_step(&p.m, lbt_reply_build(&r, &noscript), &now), LB_STEP_SEND);
    assert_int_equal(p.seen, 0); /* the protocol never saw the NOSCRIPT */
    assert_command(lb_machine_command(&p.m), "EVAL", probe_script.body);
    assert_int_equal(lb_machine_commands(&p.m), 2);
    assert_int_equal(lb_machine_step(&p.m, lbt_reply_build(&r, &value), &now), LB_OK);
    assert_int_equal(p.seen, 1);
    assert_int_equal(p.last_type, REDIS_REPLY_STRING);
    assert_string_equal(p.last_str, "held");
}

static void test_second_noscript_reaches_the_protocol(void **state) {
    (void)state;
    probe p;
    lb_now now = {0, 0};
    lbt_reply noscript = LBT_R_ERR("NOSCRIPT No matching script.");
    redisReply r;
    probe_begin(&p);
    assert_int_equal(lb_machine_step(&p.m, NULL, &now), LB_STEP_SEND);
    assert_int_equal(lb_machine_step(&p.m, lbt_reply_build(&r, &noscript), &now), LB_STEP_SEND);
    assert_int_equal(lb_machine_step(&p.m, lbt_reply_build(&r, &noscript), &now), LB_EREDIS);
    assert_int_equal(p.seen, 1);
    assert_int_equal(p.last_type, REDIS_REPLY_ERROR);
    assert_non_null(strstr(lb_machine_errstr(&p.m), "NOSCRIPT"));
}

static void test_other_errors_to_a_script_reach_the_protocol(void **state) {
    (void)state;
    static const struct {
        const char *err;
        int status;
    } cases[] = {
        {"WRONGTYPE Operation against a key holding the wrong kind of value", LB_EWRONGTYPE},
        {"ERR Error running script", LB_EREDIS},
        {"BUSY Redis is busy running a script", LB_EREDIS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        probe p;
        lb_now now = {0, 0};
        lbt_reply err = LBT_R_ERR(cases[i].err);
        redisReply r;
        probe_begin(&p);
        assert_int_equal(lb_machine_step(&p.m, NULL, &now), LB_STEP_SEND);
        assert_int_equal(lb_machine_step(&p.m, lbt_reply_build(&r, &err), &now), cases[i].status);
        assert_int_equal(p.seen, 1);
    }
}

static void test_transport_failure_after_evalsha_reaches_the_protocol(void **state) {
    (void)state;
    probe p;
    lb_now now = {0, 0};
    probe_begin(&p);
    assert_int_equal(lb_machine_step(&p.m, NULL, &now), LB_STEP_SEND);
    assert_int_equal(lb_machine_step(&p.m, NULL, &now), LB_EIO);
    assert_int_equal(p.seen, 1);
    assert_string_equal(lb_machine_errstr(&p.m), "no reply");
}

static void test_stepping_a_finished_machine_is_a_state_error(void **state) {
    (void)state;
    probe p;
    lb_now now = {0, 0};
    lbt_reply one = LBT_R_INT(1);
    redisReply r;
    probe_begin(&p);
    assert_int_equal(lb_machine_step(&p.m, NULL, &now), LB_STEP_SEND);
    assert_int_equal(lb_machine_step(&p.m, lbt_reply_build(&r, &one), &now), LB_OK);
    assert_int_equal(lb_machine_step(&p.m, lbt_reply_build(&r, &one), &now), LB_ESTATE);
    assert_int_equal(lb_machine_step(&p.m, NULL, &now), LB_ESTATE);
    assert_int_equal(p.seen, 1);
    assert_string_not_equal(lb_machine_errstr(&p.m), "");
}

static void test_machine_calls_reject_null_arguments(void **state) {
    (void)state;
    probe p;
    lb_now now = {0, 0};
    probe_begin(&p);
    assert_int_equal(lb_machine_step(NULL, NULL, &now), LB_EINVAL);
    assert_int_equal(lb_machine_step(&p.m, NULL, NULL), LB_EINVAL);
    assert_null(lb_machine_command(NULL));
    assert_string_equal(lb_machine_errstr(NULL), "");
    assert_int_equal(lb_machine_commands(NULL), 0);
    assert_int_equal(p.started, 0);
}

/* ---- Small helpers ----------------------------------------------------------------- */
static void test_command_arguments_beyond_the_limit_are_dropped(void **state) {
    (void)state;
    lb_cmd cmd;
    lb__cmd_reset(&cmd);
    for (int i = 0; i < LB_CMD_MAX_ARGS + 3; i++) lb__cmd_argz(&cmd, "x");
    assert_int_equal(cmd.argc, LB_CMD_MAX_ARGS);
    lb__cmd_reset(&cmd);
    assert_int_equal(cmd.argc, 0);
}

static void test_checked_arithmetic_reports_overflow(void **state) {
    (void)state;
    int64_t out = 0;
    assert_int_equal(lb__add64(INT64_MAX - 1, 1, &out), 0);
    assert_int_equal(out, INT64_MAX);
    assert_int_equal(lb__add64(INT64_MAX, 1, &out), -1);
    assert_int_equal(lb__add64(INT64_MIN, -1, &out), -1);
    assert_int_equal(lb__mul64(INT64_MAX / 2, 2, &out), 0);
    assert_int_equal(lb__mul64(INT64_MAX / 2 + 1, 2, &out), -1);
    assert_int_equal(lb__mul64(-1, INT64_MIN, &out), -1);
}

static void test_escape_makes_any_bytes_printable_and_bounded(void **state) {
    (void)state;
    char out[16];
    lb__escape(out, sizeof out, "a\0\\\xff", 4);
    assert_string_equal(out, "a\\x00\\x5c\\xff");
    lb__escape(out, sizeof out, "0123456789abcdefghij", 20);
    assert_true(strlen(out) < sizeof out);
    assert_memory_equal(out, "0123456789", 10);
}

/* The ceiling of a polling waiter's sleeps, from the holder's age (our
 * validity less what it had left), with back-off bounds 2..100 ms. */
static void test_the_churn_ceiling_follows_the_holders_age(void **state) {
    (void)state;
    static const struct {
        int64_t ttl, left, want;
    } cases[] = {
        {30000, 29999, 20},  /* 1 ms into its hold: the floor */
        {30000, 30000, 20},  /* just begun */
        {30000, 30040, 20},  /* read against a clock sampled before it was written */
        {30000, 30100, 20},  /* up to max_ms more than our validity: still just begun */
        {30000, 30101, 100}, /* more: a longer validity than ours, nothing known */
        {30000, 29998, 40},  /* 2 ms: 20 times its age */
        {30000, 29995, 100}, /* 5 ms: the back-off's own bound */
        {30000, 20000, 100}, /* well into its hold */
        {30000, 0, 100},     /* gone, or just expiring: no ceiling (the bound does it) */
        {30000, -1, 100},    /* unknown */
        {0, 100, 100},       /* no validity of ours: no ceiling */
    };
    uint64_t rng = 7;
    lb__backoff b;
    lb__backoff_init(&b, 2, 100, &rng);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(lb__churn_ceiling_ms(&b, cases[i].ttl, cases[i].left), cases[i].want);
}

/* Every draw under a ceiling stays within [min, ceiling], and the doubling
 * cap goes on growing beneath it: lifted, the draws reach the whole bound. */
static void test_a_draw_under_a_ceiling_stays_within_it(void **state) {
    (void)state;
    uint64_t rng = 11;
    lb__backoff b;
    lb__backoff_init(&b, 2, 100, &rng);
    int64_t longest = 0;
    for (int i = 0; i < 1000; i++) {
        int64_t ms = lb__backoff_next_under(&b, -1, 20);
        assert_in_range(ms, 2, 20);
        if (ms > longest) longest = ms;
    }
    assert_int_equal(longest, 20);
    longest = 0;
    for (int i = 0; i < 1000; i++) {
        int64_t ms = lb__backoff_next(&b, -1);
        assert_in_range(ms, 2, 100);
        if (ms > longest) longest = ms;
    }
    assert_true(longest > 90);
    /* A ceiling under min_ms gives min_ms; the holder's bound still wins. */
    assert_int_equal(lb__backoff_next_under(&b, -1, 0), 2);
    assert_int_equal(lb__backoff_next_under(&b, 0, 20), 1);
}

/* LB_KEY gives a NUL-terminated key and its length, literal or not. */
static void test_lb_key_names_a_nul_terminated_key_with_its_length(void **state) {
    (void)state;
    char a[64], b[64];
    assert_int_equal(lb_companion_key(LB_KEY("orders:42"), "fence", a, sizeof a),
                     lb_companion_key("orders:42", 9, "fence", b, sizeof b));
    assert_string_equal(a, b);
    const char *key = "{user}:1";
    assert_int_equal(lb_cluster_keyslot(LB_KEY(key)), lb_cluster_keyslot("{user}:1", 8));
    lb_lock *l = NULL;
    assert_int_equal(lb_lock_new(&l, LB_KEY(key), NULL), LB_OK);
    lb_lock_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_error_code_has_its_own_name_and_message),
        cmocka_unit_test(test_unknown_error_codes_get_a_generic_name_and_message),
        cmocka_unit_test(test_companion_keys_share_the_lock_keys_slot),
        cmocka_unit_test(test_companion_key_rejects_missing_arguments),
        cmocka_unit_test(test_clock_adds_its_offset_to_both_readings),
        cmocka_unit_test(test_clock_without_callbacks_reads_the_system_clocks),
        cmocka_unit_test(test_clock_mixes_a_fake_wall_clock_with_the_system_monotonic_clock),
        cmocka_unit_test(test_noscript_reply_resends_the_script_body_with_eval),
        cmocka_unit_test(test_second_noscript_reaches_the_protocol),
        cmocka_unit_test(test_other_errors_to_a_script_reach_the_protocol),
        cmocka_unit_test(test_transport_failure_after_evalsha_reaches_the_protocol),
        cmocka_unit_test(test_stepping_a_finished_machine_is_a_state_error),
        cmocka_unit_test(test_machine_calls_reject_null_arguments),
        cmocka_unit_test(test_command_arguments_beyond_the_limit_are_dropped),
        cmocka_unit_test(test_checked_arithmetic_reports_overflow),
        cmocka_unit_test(test_escape_makes_any_bytes_printable_and_bounded),
        cmocka_unit_test(test_the_churn_ceiling_follows_the_holders_age),
        cmocka_unit_test(test_a_draw_under_a_ceiling_stays_within_it),
        cmocka_unit_test(test_lb_key_names_a_nul_terminated_key_with_its_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
