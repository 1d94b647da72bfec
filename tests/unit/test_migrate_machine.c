/* The mode-following lock's step machines fed hand-built replies, without a
 * server: command shapes, every reply the scripts can give and malformed ones,
 * mode reads, option checks and allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/failing_alloc.h"
#include "lockbridge/lockbridge.h"
#include "unit/lbt_fake.h"

#define T0_WALL_US INT64_C(1700000000000000)
#define T0_MONO_NS INT64_C(5000000000000)
#define LIVE "1700000060000"
#define EXPIRED "1699999990000"

/* ---- Replies with elements ---------------------------------------------------------- */
enum { X_NONE, X_INT, X_STR, X_NIL, X_ERR, X_STATUS, X_ARR };

typedef struct el {
    int kind;
    long long i;
    const char *s;
} el;

typedef struct rep {
    int kind;
    long long i;
    const char *s;
    int n; /* X_ARR: elements */
    el e[6];
} rep;

#define RI(v) {X_INT, (v), NULL, 0, {{0, 0, 0}}}
#define RS(v) {X_STR, 0, (v), 0, {{0, 0, 0}}}
#define RE(v) {X_ERR, 0, (v), 0, {{0, 0, 0}}}
#define RNONE {X_NONE, 0, NULL, 0, {{0, 0, 0}}}
#define EI(v) {X_INT, (v), NULL}
#define ES(v) {X_STR, 0, (v)}
#define ET(v) {X_STATUS, 0, (v)}
#define EN {X_NIL, 0, NULL}

typedef struct built {
    redisReply top;
    redisReply elems[6];
    redisReply *ptrs[6];
} built;

static void fill(redisReply *r, int kind, long long i, const char *s) {
    memset(r, 0, sizeof *r);
    switch (kind) {
    case X_INT: r->type = REDIS_REPLY_INTEGER; r->integer = i; break;
    case X_STR: r->type = REDIS_REPLY_STRING; break;
    case X_NIL: r->type = REDIS_REPLY_NIL; break;
    case X_ERR: r->type = REDIS_REPLY_ERROR; break;
    case X_STATUS: r->type = REDIS_REPLY_STATUS; break;
    case X_ARR: r->type = REDIS_REPLY_ARRAY; break;
    default: break;
    }
    if (s) {
        r->str = (char *)(uintptr_t)s;
        r->len = strlen(s);
    }
}

static const redisReply *build(built *b, const rep *d) {
    if (d->kind == X_NONE) return NULL;
    fill(&b->top, d->kind, d->i, d->s);
    if (d->kind == X_ARR) {
        for (int k = 0; k < d->n; k++) {
            fill(&b->elems[k], d->e[k].kind, d->e[k].i, d->e[k].s);
            b->ptrs[k] = &b->elems[k];
        }
        b->top.elements = (size_t)d->n;
        b->top.element = d->n ? b->ptrs : NULL;
    }
    return &b->top;
}

/* ---- Driving ------------------------------------------------------------------------ */
typedef struct fixture {
    lbt_fake_time ft;
    lb_clock clk;
    lb_mlock *l;
} fixture;

static void make(fixture *f, lb_mode mode, const char *ns, int follow) {
    lb_mlock_options o;
    f->ft = (lbt_fake_time){T0_WALL_US, T0_MONO_NS};
    f->clk = lbt_fake_clock(&f->ft, 0);
    lb_mlock_options_init(&o);
    o.mode = mode;
    o.ttl_ms = 10000;
    o.grace_ms = 2000;
    o.clock = &f->clk;
    o.ns = ns;
    o.follow = follow;
    o.census_refresh_ms = 0;
    o.client_id = "unit";
    o.host = "h";
    f->l = NULL;
    assert_int_equal(lb_mlock_new(&f->l, "k", 1, &o), LB_OK);
}

/* Starts `m` and feeds `replies` (at most n) while it asks to send; returns the
 * final status (LB_STEP_SEND if the replies ran out first) and the number of
 * commands sent. The last command is copied to `last` (argv joined by '|'). */
static int feed(fixture *f, lb_machine *m, const rep *replies, int n, int *sent, char *last,
                size_t cap) {
    lb_now now = lb_clock_now(&f->clk);
    int rc = lb_machine_step(m, NULL, &now);
    *sent = 0;
    for (int i = 0; rc == LB_STEP_SEND && i < n; i++) {
        const lb_cmd *cmd = lb_machine_command(m);
        (*sent)++;
        if (last) {
            size_t o = 0;
            last[0] = '\0';
            for (int a = 0; a < cmd->argc && o + 1 < cap; a++) {
                int w = snprintf(last + o, cap - o, "%s%.*s", a ? "|" : "", (int)cmd->argvlen[a],
                                 cmd->argv[a]);
                if (w < 0) break;
                o += (size_t)w;
            }
        }
        built b;
        now = lb_clock_now(&f->clk);
        rc = lb_machine_step(m, build(&b, &replies[i]), &now);
    }
    return rc;
}

/* ---- Acquire ------------------------------------------------------------------------ */
typedef struct acq_case {
    const char *name;
    rep replies[4];
    int n;
    int rc;
    int sent;
    lb_format seen; /* the observed format after a busy or foreign end */
} acq_case;

#define BUSY(type, v, pttl, len) {X_ARR, 0, NULL, 5, {EI(0), ET(type), ES(v), EI(pttl), EI(len)}}

static void test_acquire_handles_every_reply(void **state) {
    (void)state;
    static const acq_case t[] = {
        {"free", {{X_ARR, 0, NULL, 1, {EI(1)}}}, 1, LB_OK, 1, LB_FORMAT_ABSENT},
        {"taken over", {{X_ARR, 0, NULL, 1, {EI(2)}}}, 1, LB_OK, 1, LB_FORMAT_ABSENT},
        {"live legacy", {BUSY("string", LIVE, -1, 13)}, 1, LB_EBUSY, 1, LB_FORMAT_LEGACY},
        {"live compat", {BUSY("string", LIVE, 9000, 13)}, 1, LB_EBUSY, 1, LB_FORMAT_COMPAT},
        {"expired compat", {BUSY("string", EXPIRED, 9000, 13)}, 1, LB_EBUSY, 1, LB_FORMAT_COMPAT},
        {"token", {BUSY("string", "0123456789abcdef0123456789abcdef", 9000, 32)}, 1, LB_EBUSY, 1,
         LB_FORMAT_TOKEN},
        {"expired legacy, then taken over",
         {BUSY("string", EXPIRED, -1, 13), {X_ARR, 0, NULL, 1, {EI(2)}}}, 2, LB_OK, 2,
         LB_FORMAT_LEGACY},
        {"expired legacy that keeps changing",
         {BUSY("string", EXPIRED, -1, 13), BUSY("string", "1699999991000", -1, 13),
          BUSY("string", "1699999992000", -1, 13)},
         3, LB_EBUSY, 3, LB_FORMAT_LEGACY},
        {"unknown", {BUSY("string", "who?", -1, 4)}, 1, LB_EFOREIGN, 1, LB_FORMAT_UNKNOWN},
        /* R's live seconds read by the ms codec are an instant of 1970: outside
         * the plausible window, so another codec's value, never taken over. */
        {"seconds read as ms, no TTL", {BUSY("string", "1700000600", -1, 10)}, 1, LB_EFOREIGN, 1,
         LB_FORMAT_AMBIGUOUS},
        {"seconds read as ms, with a TTL", {BUSY("string", "1700000600", 9000, 10)}, 1,
         LB_EFOREIGN, 1, LB_FORMAT_AMBIGUOUS},
        {"microseconds read as ms (year 55,000)", {BUSY("string", "1700000600000000", -1, 16)}, 1,
         LB_EFOREIGN, 1, LB_FORMAT_AMBIGUOUS},
        {"incr", {BUSY("string", "2", -1, 1)}, 1, LB_EFOREIGN, 1, LB_FORMAT_INCR},
        {"a longer value than returned", {BUSY("string", LIVE, -1, 99999)}, 1, LB_EFOREIGN, 1,
         LB_FORMAT_UNKNOWN},
        {"wrong type", {{X_ARR, 0, NULL, 5, {EI(0), ET("hash"), EN, EI(-1), EI(0)}}}, 1,
         LB_EWRONGTYPE, 1, LB_FORMAT_WRONGTYPE},
        {"error reply", {RE("ERR something")}, 1, LB_EREDIS, 1, LB_FORMAT_ABSENT},
        {"WRONGTYPE error", {RE("WRONGTYPE Operation")}, 1, LB_EWRONGTYPE, 1, LB_FORMAT_ABSENT},
        {"transport failure", {RNONE}, 1, LB_EIO, 1, LB_FORMAT_ABSENT},
        {"integer", {RI(1)}, 1, LB_EPROTO, 1, LB_FORMAT_ABSENT},
        {"string", {RS("OK")}, 1, LB_EPROTO, 1, LB_FORMAT_ABSENT},
        {"empty array", {{X_ARR, 0, NULL, 0, {{0, 0, 0}}}}, 1, LB_EPROTO, 1, LB_FORMAT_ABSENT},
        {"unknown status", {{X_ARR, 0, NULL, 1, {EI(7)}}}, 1, LB_EPROTO, 1, LB_FORMAT_ABSENT},
        {"acquired with extra elements", {{X_ARR, 0, NULL, 2, {EI(1), EI(1)}}}, 1, LB_EPROTO, 1,
         LB_FORMAT_ABSENT},
        {"busy, too short", {{X_ARR, 0, NULL, 3, {EI(0), ET("string"), ES(LIVE)}}}, 1, LB_EPROTO,
         1, LB_FORMAT_ABSENT},
        {"busy, value an integer", {{X_ARR, 0, NULL, 5, {EI(0), ET("string"), EI(5), EI(-1),
                                                        EI(1)}}},
         1, LB_EPROTO, 1, LB_FORMAT_ABSENT},
        {"busy, pttl a string", {{X_ARR, 0, NULL, 5, {EI(0), ET("string"), ES(LIVE), ES("x"),
                                                     EI(13)}}},
         1, LB_EPROTO, 1, LB_FORMAT_ABSENT},
        {"status element not an integer", {{X_ARR, 0, NULL, 1, {ES("1")}}}, 1, LB_EPROTO, 1,
         LB_FORMAT_ABSENT},
    };
    for (int mode = LB_MODE_COMPAT; mode <= LB_MODE_MODERN; mode++) {
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            fixture f;
            int sent;
            char last[512];
            make(&f, (lb_mode)mode, NULL, 0);
            int rc = feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), t[i].replies, t[i].n, &sent,
                          last, sizeof last);
            if (rc != t[i].rc || sent != t[i].sent)
                fail_msg("%s (%s): rc %s sent %d", t[i].name, lb_mode_name((lb_mode)mode),
                         lb_err_name(rc), sent);
            assert_int_equal(lb_mlock_info_of(f.l).held, rc == LB_OK);
            if (rc != LB_OK && t[i].seen != LB_FORMAT_ABSENT)
                assert_int_equal(lb_mlock_info_of(f.l).observed->format, t[i].seen);
            /* A takeover call carries the value judged expired as its last argument. */
            if (t[i].n >= 2) {
                const char *tail = strrchr(last, '|');
                assert_non_null(tail);
                assert_true(strcmp(tail + 1, t[i].n == 2 ? EXPIRED : "1699999991000") == 0);
            }
            lb_mlock_free(f.l);
        }
    }
}

/* In legacy mode, a GETSET that returns a value not in our format ends the
 * attempt foreign: what the lock observed is that foreign value, not the
 * expired timestamp GET read before it. */
static void test_a_foreign_getset_is_what_legacy_mode_observed(void **state) {
    (void)state;
    static const rep r[] = {RI(0), RS(EXPIRED), RS("who?")};
    fixture f;
    int sent;
    make(&f, LB_MODE_LEGACY, NULL, 0);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), r, 3, &sent, NULL, 0),
                     LB_EFOREIGN);
    assert_int_equal(sent, 3);
    const lb_class *seen = lb_mlock_info_of(f.l).observed;
    assert_int_equal(seen->format, LB_FORMAT_UNKNOWN);
    assert_false(seen->expired);
    lb_mlock_free(f.l);
}

/* ---- The classifier with several codecs --------------------------------------------- */
#define MAX_SPECS 3
typedef struct multi_case {
    const char *name, *value;
    const char *specs[MAX_SPECS]; /* the codecs, in the order given */
    int64_t pttl;
    lb_format format;
    int codec, codec2;
    lb_ambiguity ambiguity;
    int expired;
    const char *suggested; /* IMPLAUSIBLE: the codec named, or NULL */
} multi_case;

/* Every codec reads the value and only plausible readings count: order no
 * longer decides what a value is. */
static void test_the_classifier_counts_only_plausible_readings(void **state) {
    (void)state;
    static const multi_case t[] = {
        {"R's live seconds beside ms first", "1700000600", {"ms", "s"}, -1, LB_FORMAT_LEGACY, 1,
         -1, LB_AMBIGUITY_NONE, 0, NULL},
        {"L1's live ms beside s first", "1700000030001", {"s", "ms"}, -1, LB_FORMAT_LEGACY, 1, -1,
         LB_AMBIGUITY_NONE, 0, NULL},
        {"L1's live ms beside s and float", "1700000030001", {"s", "float", "ms"}, -1,
         LB_FORMAT_LEGACY, 2, -1, LB_AMBIGUITY_NONE, 0, NULL},
        {"s and float agree on R's value", "1700000600", {"s", "float"}, -1, LB_FORMAT_LEGACY, 0,
         -1, LB_AMBIGUITY_NONE, 0, NULL},
        {"L1's expired ms beside s, with a TTL", "1699999990000", {"s", "ms"}, 500,
         LB_FORMAT_COMPAT, 1, -1, LB_AMBIGUITY_NONE, 1, NULL},
        {"L5's fraction beside ms", "1700000600.5", {"ms", "float"}, -1, LB_FORMAT_LEGACY, 1, -1,
         LB_AMBIGUITY_NONE, 0, NULL},
        {"seconds read by ms alone", "1700000600", {"ms"}, -1, LB_FORMAT_AMBIGUOUS, 0, -1,
         LB_AMBIGUITY_IMPLAUSIBLE, 0, "s"},
        {"seconds read by ms alone, with a TTL", "1700000600", {"ms"}, 9000, LB_FORMAT_AMBIGUOUS, 0,
         -1, LB_AMBIGUITY_IMPLAUSIBLE, 0, "s"},
        {"seconds beside ms and json", "1700000600", {"ms", "json"}, -1, LB_FORMAT_AMBIGUOUS, 0,
         -1, LB_AMBIGUITY_IMPLAUSIBLE, 0, "s"},
        {"ms read by s alone", "1700000030001", {"s"}, -1, LB_FORMAT_AMBIGUOUS, 0, -1,
         LB_AMBIGUITY_IMPLAUSIBLE, 0, "ms"},
        {"epoch us read by ms and s", "1700000030000000", {"ms", "s"}, -1, LB_FORMAT_AMBIGUOUS, 0,
         -1, LB_AMBIGUITY_IMPLAUSIBLE, 0, NULL},
        {"two fields, two instants", "{\"a\":1700000030001,\"b\":1700000060001}",
         {"json:field=a,unit=ms,clock=epoch", "json:field=b,unit=ms,clock=epoch"}, -1,
         LB_FORMAT_AMBIGUOUS, 0, 1, LB_AMBIGUITY_DISAGREE, 0, NULL},
        /* Epoch ms are also 28 minutes of a host's uptime in ns: both plausible,
         * on different clocks. */
        {"epoch ms beside monotonic ns", "{\"expiryTime\":1700000030001}",
         {"json", "json:unit=ms,clock=epoch"}, -1, LB_FORMAT_AMBIGUOUS, 0, 1,
         LB_AMBIGUITY_DISAGREE, 0, NULL},
        {"epoch ns beside monotonic ns first", "{\"expiryTime\":1700000030000000001}",
         {"json", "json:clock=epoch"}, -1, LB_FORMAT_LEGACY, 1, -1, LB_AMBIGUITY_NONE, 0, NULL},
        {"monotonic ns beside epoch ns first", "{\"expiryTime\":5030000000001}",
         {"json:clock=epoch", "json"}, -1, LB_FORMAT_LEGACY, 1, -1, LB_AMBIGUITY_NONE, 0, NULL},
        {"epoch ns read on the monotonic clock alone", "{\"expiryTime\":1700000030000000001}",
         {"json"}, -1, LB_FORMAT_AMBIGUOUS, 0, -1, LB_AMBIGUITY_IMPLAUSIBLE, 0,
         "json:field=expiryTime,unit=ns,clock=epoch"},
        {"an INCR counter is still a counter", "999999999", {"ms", "s"}, -1, LB_FORMAT_INCR, -1,
         -1, LB_AMBIGUITY_NONE, 0, NULL},
    };
    const lb_now now = {T0_WALL_US, T0_MONO_NS};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        lb_codec cs[MAX_SPECS];
        int n = 0;
        lb_class c;
        char spec[128] = "";
        for (; n < MAX_SPECS && t[i].specs[n]; n++)
            assert_int_equal(lb_codec_parse(&cs[n], t[i].specs[n]), LB_OK);
        assert_int_equal(lb_classify(&c, t[i].value, strlen(t[i].value), t[i].pttl, NULL, cs, n,
                                     &now),
                         LB_OK);
        if (c.suggested) assert_int_equal(lb_codec_format(&c.suggestion, spec, sizeof spec), LB_OK);
        if (c.format != t[i].format || c.codec != t[i].codec || c.codec2 != t[i].codec2 ||
            c.ambiguity != t[i].ambiguity || c.expired != t[i].expired ||
            c.suggested != (t[i].suggested != NULL) ||
            (t[i].suggested && strcmp(spec, t[i].suggested) != 0))
            fail_msg("%s: %s (%s) codec %d/%d expired %d suggested \"%s\"", t[i].name,
                     lb_format_name(c.format), lb_ambiguity_name(c.ambiguity), c.codec, c.codec2,
                     c.expired, spec);
    }
    assert_string_equal(lb_format_name(LB_FORMAT_AMBIGUOUS), "ambiguous");
    assert_string_equal(lb_format_name((lb_format)(LB_FORMAT_AMBIGUOUS + 1)), "invalid");
    assert_string_equal(lb_ambiguity_name(LB_AMBIGUITY_DISAGREE), "disagree");
    assert_string_equal(lb_ambiguity_name((lb_ambiguity)9), "invalid");
}

static void test_commands_have_the_documented_shape(void **state) {
    (void)state;
    static const rep ok[1] = {{X_ARR, 0, NULL, 1, {EI(1)}}};
    fixture f;
    int sent;
    char last[512];
    make(&f, LB_MODE_COMPAT, NULL, 0);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), ok, 1, &sent, last, sizeof last),
                     LB_OK);
    /* EVALSHA sha 1 key value px observed: timestamp now + ttl + 1 ms, PX ttl + grace. */
    char want[256];
    snprintf(want, sizeof want, "|1|k|1700000010001|12000|");
    assert_memory_equal(last, "EVALSHA|", 8);
    assert_non_null(strstr(last, want));
    assert_int_equal(lb_mlock_info_of(f.l).held_mode, LB_MODE_COMPAT);
    assert_int_equal(lb_mlock_info_of(f.l).deadline_ns, T0_MONO_NS + INT64_C(10000) * 1000000);
    /* Extend: a later timestamp, PX ttl + grace, compared with ours. */
    static const rep one[1] = {RI(1)};
    lbt_fake_advance(&f.ft, 1000);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_EXTEND, 10000), one, 1, &sent, last, sizeof last),
                     LB_OK);
    assert_non_null(strstr(last, "|1|k|1700000010001|1700000011001|12000"));
    /* Expired by our clock: refused without a command, key left to its TTL. */
    lbt_fake_advance(&f.ft, 20000);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_RELEASE, 0), one, 1, &sent, NULL, 0), LB_EEXPIRED);
    assert_int_equal(sent, 0);
    assert_false(lb_mlock_info_of(f.l).held);
    lb_mlock_free(f.l);

    make(&f, LB_MODE_MODERN, NULL, 0);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), ok, 1, &sent, last, sizeof last),
                     LB_OK);
    size_t len = lb_mlock_info_of(f.l).value_len;
    const char *tok = lb_mlock_info_of(f.l).value;
    assert_int_equal(len, 32);
    snprintf(want, sizeof want, "|1|k|%s|10000|", tok);
    assert_non_null(strstr(last, want));
    /* Modern release after the lease: the token is unique, the script compares. */
    lbt_fake_advance(&f.ft, 20000);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_RELEASE, 0), one, 1, &sent, last, sizeof last),
                     LB_OK);
    snprintf(want, sizeof want, "|1|k|%s|{k}:released", tok);
    assert_non_null(strstr(last, want));
    lb_mlock_free(f.l);
}

/* A compat extend within the release margin (1 s) of expiry could land after a
 * legacy contender, whose clock runs a little ahead, judged the lock expired:
 * its GETSET would overwrite the extended value. Refused, nothing sent. */
static void test_a_compat_extend_within_the_margin_is_refused(void **state) {
    (void)state;
    static const rep ok[1] = {{X_ARR, 0, NULL, 1, {EI(1)}}};
    static const rep one[1] = {RI(1)};
    fixture f;
    int sent;
    make(&f, LB_MODE_COMPAT, NULL, 0); /* expiry T0 + 10001 ms */
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), ok, 1, &sent, NULL, 0), LB_OK);
    lbt_fake_advance(&f.ft, 9500);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_EXTEND, 10000), one, 1, &sent, NULL, 0),
                     LB_EEXPIRED);
    assert_int_equal(sent, 0);
    assert_false(lb_mlock_info_of(f.l).held);
    lb_mlock_free(f.l);
    /* Just outside the margin it runs. */
    make(&f, LB_MODE_COMPAT, NULL, 0);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), ok, 1, &sent, NULL, 0), LB_OK);
    lbt_fake_advance(&f.ft, 9000);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_EXTEND, 10000), one, 1, &sent, NULL, 0), LB_OK);
    assert_int_equal(sent, 1);
    lb_mlock_free(f.l);
}

/* ---- Release and extend ----------------------------------------------------------------- */
static void test_release_and_extend_replies(void **state) {
    (void)state;
    static const struct {
        int extend;
        rep r;
        int rc, held;
    } t[] = {
        {0, RI(1), LB_OK, 0},        {0, RI(0), LB_ELOST, 0},
        {0, RI(-1), LB_ELOST, 0},    {0, RS("1"), LB_EPROTO, 1},
        {0, RE("ERR x"), LB_EREDIS, 1}, {0, RNONE, LB_EIO, 0}, /* may have run: let go */
        {1, RI(1), LB_OK, 1},        {1, RI(0), LB_ELOST, 0},
        {1, RI(-1), LB_ELOST, 0},    {1, {X_ARR, 0, NULL, 0, {{0, 0, 0}}}, LB_EPROTO, 1},
        {1, RNONE, LB_EIO, 1},
    };
    static const rep ok[1] = {{X_ARR, 0, NULL, 1, {EI(1)}}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        fixture f;
        int sent;
        make(&f, LB_MODE_COMPAT, NULL, 0);
        assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), ok, 1, &sent, NULL, 0), LB_OK);
        lb_machine *m = t[i].extend ? lb_mlock_machine(f.l, LB_OP_EXTEND, 5000) : lb_mlock_machine(f.l, LB_OP_RELEASE, 0);
        int rc = feed(&f, m, &t[i].r, 1, &sent, NULL, 0);
        if (rc != t[i].rc || lb_mlock_info_of(f.l).held != t[i].held)
            fail_msg("row %zu: rc %s held %d", i, lb_err_name(rc), lb_mlock_info_of(f.l).held);
        lb_mlock_free(f.l);
    }
    /* A modern release with no reply stays held: a token is ours alone, so
     * a retry cannot delete another holder's lock. */
    fixture f;
    int sent;
    make(&f, LB_MODE_MODERN, NULL, 0);
    static const rep modern_ok[1] = {{X_ARR, 0, NULL, 1, {EI(1)}}};
    static const rep none[1] = {RNONE};
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), modern_ok, 1, &sent, NULL, 0),
                     LB_OK);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_RELEASE, 0), none, 1, &sent, NULL, 0), LB_EIO);
    assert_true(lb_mlock_info_of(f.l).held);
    lb_mlock_free(f.l);
    /* Not held: nothing to release or extend. */
    make(&f, LB_MODE_MODERN, NULL, 0);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_RELEASE, 0), NULL, 0, &sent, NULL, 0), LB_ESTATE);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_EXTEND, 10), NULL, 0, &sent, NULL, 0), LB_ESTATE);
    assert_int_equal(sent, 0);
    lb_mlock_free(f.l);
}

/* ---- Mode reads ---------------------------------------------------------------------- */
static void test_mode_reads_decide_the_next_operations_mode(void **state) {
    (void)state;
    static const struct {
        rep touch;
        lb_mode after;
        int rc;
    } t[] = {
        {{X_ARR, 0, NULL, 2, {EI(1), ES("modern")}}, LB_MODE_MODERN, LB_STEP_SEND},
        {{X_ARR, 0, NULL, 2, {EI(1), ES("legacy")}}, LB_MODE_LEGACY, LB_STEP_SEND},
        {{X_ARR, 0, NULL, 1, {EI(0)}}, LB_MODE_COMPAT, LB_STEP_SEND},       /* absent */
        {{X_ARR, 0, NULL, 2, {EI(1), ES("fast")}}, LB_MODE_COMPAT, LB_STEP_SEND}, /* kept */
        {{X_ARR, 0, NULL, 1, {EI(-1)}}, LB_MODE_COMPAT, LB_STEP_SEND},      /* wrong type */
        {RI(1), LB_MODE_COMPAT, LB_EPROTO},
        {RE("ERR no"), LB_MODE_COMPAT, LB_EREDIS},
        {RNONE, LB_MODE_COMPAT, LB_EIO},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        fixture f;
        int sent;
        char last[512];
        make(&f, LB_MODE_COMPAT, "ns", 1);
        lb_machine *m = lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0);
        int rc = feed(&f, m, &t[i].touch, 1, &sent, last, sizeof last);
        assert_memory_equal(last, "EVALSHA|", 8);
        assert_non_null(strstr(last, "|2|{ns}:lb-mode|{ns}:lb-census||"));
        if (rc != t[i].rc || lb_mlock_info_of(f.l).mode != t[i].after)
            fail_msg("row %zu: rc %s mode %s", i, lb_err_name(rc), lb_mode_name(lb_mlock_info_of(f.l).mode));
        if (rc == LB_STEP_SEND) {
            /* The acquire that follows speaks the mode just read. */
            const lb_cmd *cmd = lb_machine_command(m);
            if (t[i].after == LB_MODE_LEGACY) assert_memory_equal(cmd->argv[0], "SETNX", 5);
            else assert_memory_equal(cmd->argv[0], "EVALSHA", 7);
        }
        lb_mlock_free(f.l);
    }
    /* Not due again until the refresh interval passes or a notification. */
    fixture f;
    int sent;
    char last[512];
    static const rep seq[2] = {{X_ARR, 0, NULL, 1, {EI(0)}}, {X_ARR, 0, NULL, 1, {EI(1)}}};
    static const rep rel[1] = {RI(1)};
    make(&f, LB_MODE_COMPAT, "ns", 1);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), seq, 2, &sent, NULL, 0), LB_OK);
    assert_int_equal(sent, 2);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_RELEASE, 0), rel, 1, &sent, NULL, 0), LB_OK);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), &seq[1], 1, &sent, last,
                          sizeof last), LB_OK);
    assert_int_equal(sent, 1);
    assert_null(strstr(last, "lb-mode"));
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_RELEASE, 0), rel, 1, &sent, NULL, 0), LB_OK);
    lb_mlock_notify(f.l);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), seq, 2, &sent, NULL, 0), LB_OK);
    assert_int_equal(sent, 2);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_RELEASE, 0), rel, 1, &sent, NULL, 0), LB_OK);
    lbt_fake_advance(&f.ft, 1000);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), seq, 2, &sent, NULL, 0), LB_OK);
    assert_int_equal(sent, 2);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_RELEASE, 0), rel, 1, &sent, NULL, 0), LB_OK);
    /* A read that failed is tried again by the next acquire. */
    static const rep broken[1] = {RNONE};
    lb_mlock_notify(f.l);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), broken, 1, &sent, NULL, 0), LB_EIO);
    assert_int_equal(feed(&f, lb_mlock_machine(f.l, LB_OP_TRY_ACQUIRE, 0), seq, 2, &sent, NULL, 0), LB_OK);
    assert_int_equal(sent, 2);
    lb_mlock_free(f.l);
}

/* ---- Options and memory ------------------------------------------------------------------ */
static void test_bad_options_are_refused(void **state) {
    (void)state;
    static const struct { const char *what; int field; int64_t v; } t[] = {
        {"ttl 0", 0, 0},           {"ttl too large", 0, INT64_C(2000000000000)},
        {"grace < 0", 1, -1},      {"refresh < 0", 2, -1},
        {"census < 0", 3, -1},     {"backoff min 0", 4, 0},
        {"mode 7", 5, 7},          {"follow 2", 6, 2},
        {"follow without ns", 7, 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        lb_mlock_options o;
        lb_mlock_options_init(&o);
        o.ns = "ns";
        switch (t[i].field) {
        case 0: o.ttl_ms = t[i].v; break;
        case 1: o.grace_ms = t[i].v; break;
        case 2: o.mode_refresh_ms = t[i].v; break;
        case 3: o.census_refresh_ms = t[i].v; break;
        case 4: o.backoff_min_ms = t[i].v; break;
        case 5: o.mode = (lb_mode)t[i].v; break;
        case 6: o.follow = (int)t[i].v; break;
        case 7: o.follow = 1; o.ns = NULL; break;
        }
        lb_mlock *l = (lb_mlock *)&o;
        if (lb_mlock_new(&l, "k", 1, &o) != LB_EINVAL) fail_msg("%s accepted", t[i].what);
        assert_null(l);
    }
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    lb_mlock *l = NULL;
    assert_int_equal(lb_mlock_new(&l, "", 0, &o), LB_EINVAL);
    assert_int_equal(lb_mlock_new(&l, "a}b", 3, &o), LB_EINVAL); /* no companion names */
    o.ns = "x}y";
    assert_int_equal(lb_mlock_new(&l, "k", 1, &o), LB_EINVAL);
    assert_int_equal(lb_mlock_new(NULL, "k", 1, &o), LB_EINVAL);
    assert_int_equal(lb_mlock_new(&l, "k", 1, NULL), LB_OK); /* defaults */
    assert_int_equal(lb_mlock_info_of(l).mode, LB_MODE_COMPAT);
    assert_string_equal(lb_mlock_info_of(l).client_id, "");
    lb_mlock_free(l);
    lb_mlock_free(NULL);
}

static void test_every_allocation_failure_is_enomem_and_leaks_nothing(void **state) {
    (void)state;
    int failures = 0;
    for (int n = 1; n < 50; n++) {
        lbt_failing_alloc a;
        lb_allocator alloc = lbt_failing_allocator(&a, n);
        lb_mlock_options o;
        lb_mlock_options_init(&o);
        o.allocator = &alloc;
        o.ns = "ns";
        lb_mlock *l = NULL;
        int rc = lb_mlock_new(&l, "k", 1, &o);
        if (rc != LB_OK) {
            assert_int_equal(rc, LB_ENOMEM);
            assert_null(l);
            assert_int_equal(a.live, 0);
            failures++;
            continue;
        }
        lb_mlock_free(l);
        assert_int_equal(a.live, 0);
        break;
    }
    assert_true(failures >= 3); /* handle, key, channel, legacy lock... */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acquire_handles_every_reply),
        cmocka_unit_test(test_the_classifier_counts_only_plausible_readings),
        cmocka_unit_test(test_commands_have_the_documented_shape),
        cmocka_unit_test(test_release_and_extend_replies),
        cmocka_unit_test(test_a_compat_extend_within_the_margin_is_refused),
        cmocka_unit_test(test_a_foreign_getset_is_what_legacy_mode_observed),
        cmocka_unit_test(test_mode_reads_decide_the_next_operations_mode),
        cmocka_unit_test(test_bad_options_are_refused),
        cmocka_unit_test(test_every_allocation_failure_is_enomem_and_leaks_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
