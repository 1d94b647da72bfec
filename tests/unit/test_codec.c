/* Unit tests of the legacy value codecs: encoding, strict decoding of untrusted
 * values, codec specs, and instants on each codec's unit and clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lockbridge/lockbridge.h"

static lb_codec codec_of(const char *spec) {
    lb_codec c;
    if (lb_codec_parse(&c, spec) != LB_OK) fail_msg("bad spec in test: %s", spec);
    return c;
}

/* Decodes from an exact-size heap copy, so a read past the end is caught by
 * the sanitizers and valgrind. */
static int decode_copy(const lb_codec *c, const char *s, size_t len, int64_t *t) {
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len) memcpy(copy, s, len);
    int rc = lb_codec_decode(c, copy, len, t);
    free(copy);
    return rc;
}

/* ---- Encoding and round trips ------------------------------------------------------ */
typedef struct enc_case {
    const char *spec;
    int64_t t;
    const char *text;
} enc_case;

static const enc_case enc_cases[] = {
    {"ms", 0, "0"},
    {"ms", 1, "1"},
    {"ms", 1700000000123, "1700000000123"},
    {"ms", INT64_MAX, "9223372036854775807"},
    {"s", 1700000000, "1700000000"},
    {"s", 10, "10"},
    {"float", 1700000000250000, "1700000000.250000"},
    {"float", 0, "0.000000"},
    {"float", 1, "0.000001"},
    {"float", 999999, "0.999999"},
    {"float", 1000000, "1.000000"},
    {"float", INT64_MAX, "9223372036854.775807"},
    {"json", 0, "{\"expiryTime\":0}"},
    {"json", 5030000000001, "{\"expiryTime\":5030000000001}"},
    {"json:unit=ms,clock=epoch", 1700000030001, "{\"expiryTime\":1700000030001}"},
    {"json:field=ts", 7, "{\"ts\":7}"},
    {"json:field=A_b9,unit=s", 12, "{\"A_b9\":12}"},
    /* Past 2^53: the monotonic nanoseconds of a host up for more than 104 days. */
    {"json", 9007199254740993, "{\"expiryTime\":9007199254740993}"},
    {"json", INT64_MAX, "{\"expiryTime\":9223372036854775807}"},
};

static void test_every_codec_encodes_its_exact_text_and_decodes_it_back(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof enc_cases / sizeof enc_cases[0]; i++) {
        const enc_case *e = &enc_cases[i];
        lb_codec c = codec_of(e->spec);
        char buf[LB_VALUE_MAX];
        size_t len = 99;
        int64_t back = -1;
        print_message("%s %lld\n", e->spec, (long long)e->t);
        assert_int_equal(lb_codec_encode(&c, e->t, buf, sizeof buf, &len), LB_OK);
        assert_int_equal(len, strlen(e->text));
        assert_string_equal(buf, e->text);
        assert_int_equal(decode_copy(&c, buf, len, &back), LB_OK);
        assert_int_equal(back, e->t);
    }
}

static void test_encoding_rejects_negative_instants_and_small_buffers(void **state) {
    (void)state;
    static const char *const specs[] = {"ms", "s", "float", "json"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        lb_codec c = codec_of(specs[i]);
        char buf[LB_VALUE_MAX];
        size_t len = 99;
        assert_int_equal(lb_codec_encode(&c, -1, buf, sizeof buf, &len), LB_EINVAL);
        assert_int_equal(len, 0);
        len = 99;
        assert_int_equal(lb_codec_encode(&c, 1700000000123, buf, 4, &len), LB_EINVAL);
        assert_int_equal(len, 0);
        assert_int_equal(lb_codec_encode(&c, 1, NULL, 4, &len), LB_EINVAL);
        assert_int_equal(lb_codec_encode(&c, 1, buf, sizeof buf, NULL), LB_EINVAL);
        assert_int_equal(lb_codec_encode(NULL, 1, buf, sizeof buf, &len), LB_EINVAL);
    }
}

/* The longest value of every codec fits LB_VALUE_MAX, a field name of the
 * longest length allowed included. */
static void test_the_longest_values_fit_the_value_buffer(void **state) {
    (void)state;
    char spec[128], field[LB_CODEC_FIELD_MAX];
    memset(field, 'f', sizeof field - 1);
    field[sizeof field - 1] = '\0';
    snprintf(spec, sizeof spec, "json:field=%s", field);
    const char *const specs[] = {"ms", "s", "float", spec};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        lb_codec c = codec_of(specs[i]);
        char buf[LB_VALUE_MAX];
        size_t len = 0;
        int64_t back = 0;
        assert_int_equal(lb_codec_encode(&c, INT64_MAX, buf, sizeof buf, &len), LB_OK);
        assert_int_equal(decode_copy(&c, buf, len, &back), LB_OK);
        assert_int_equal(back, INT64_MAX);
    }
}

/* ---- Decoding: accepted forms other than our own ------------------------------------ */
typedef struct dec_case {
    const char *spec;
    const char *text;
    size_t len; /* 0: strlen(text) */
    int rc;
    int64_t t; /* when rc == LB_OK */
} dec_case;

static const dec_case accepted_cases[] = {
    {"ms", "0", 0, LB_OK, 0},
    {"ms", "9223372036854775807", 0, LB_OK, INT64_MAX},
    {"s", "1700000000", 0, LB_OK, 1700000000},
    {"float", "1700000000", 0, LB_OK, 1700000000000000},
    {"float", "1700000000.25", 0, LB_OK, 1700000000250000},
    {"float", "1700000000.0", 0, LB_OK, 1700000000000000},
    {"float", "0.5", 0, LB_OK, 500000},
    {"float", "1.123456789", 0, LB_OK, 1123456}, /* past the microsecond: truncated */
    {"float", "9223372036854.775807", 0, LB_OK, INT64_MAX},
    {"json", "{\"expiryTime\":5}", 0, LB_OK, 5},
    {"json", " { \"expiryTime\" : 5 }\n", 0, LB_OK, 5}, /* insignificant whitespace */
    {"json", "{\"a\":[1,{\"b\":\"}\\\"\"}],\"expiryTime\":7,\"c\":null}", 0, LB_OK, 7},
    {"json", "{\"expiry\\u0054ime\":9}", 0, LB_OK, 9}, /* an escaped name is the name */
    {"json", "{\"expiryTime\":9223372036854775807}", 0, LB_OK, INT64_MAX},
    {"json:field=ts", "{\"ts\":3,\"expiryTime\":4}", 0, LB_OK, 3},
};

static void run_dec_cases(const dec_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const dec_case *d = &cases[i];
        lb_codec c = codec_of(d->spec);
        size_t len = d->len ? d->len : strlen(d->text);
        int64_t t = -7;
        print_message("%s: %zu bytes \"%s\"\n", d->spec, len, d->text);
        assert_int_equal(decode_copy(&c, d->text, len, &t), d->rc);
        if (d->rc == LB_OK) assert_int_equal(t, d->t);
        else assert_int_equal(t, 0); /* the output is reset on entry */
    }
}

static void test_decoding_accepts_every_exact_form(void **state) {
    (void)state;
    run_dec_cases(accepted_cases, sizeof accepted_cases / sizeof accepted_cases[0]);
}

/* ---- Decoding: rejections ---------------------------------------------------------- */
#define F LB_EFOREIGN
static const dec_case rejected_cases[] = {
    /* decimal milliseconds */
    {"ms", "", 0, F, 0},
    {"ms", "+1", 0, F, 0},
    {"ms", "-1", 0, F, 0},
    {"ms", " 1", 0, F, 0},
    {"ms", "1 ", 0, F, 0},
    {"ms", "1\n", 0, F, 0},
    {"ms", "01", 0, F, 0},
    {"ms", "00", 0, F, 0},
    {"ms", "0001700000000123", 0, F, 0},
    {"ms", "12345678901234567890", 0, F, 0},   /* 20 digits */
    {"ms", "9223372036854775808", 0, F, 0},    /* INT64_MAX + 1 */
    {"ms", "9999999999999999999", 0, F, 0},    /* 19 digits, too large */
    {"ms", "1\0", 2, F, 0},
    {"ms", "\0" "1", 2, F, 0},
    {"ms", "17\0" "00", 5, F, 0},
    {"ms", "0x10", 0, F, 0},
    {"ms", "ff", 0, F, 0},
    {"ms", "1e3", 0, F, 0},
    {"ms", "1.5", 0, F, 0},
    {"ms", "1700000000123.0", 0, F, 0},
    {"ms", "1.", 0, F, 0},
    {"ms", ".5", 0, F, 0},
    {"ms", "1,000", 0, F, 0},
    {"ms", "1_000", 0, F, 0},
    {"ms", "\xef\xbc\x91", 0, F, 0}, /* a full-width digit one */
    {"ms", "{\"expiryTime\":1}", 0, F, 0},
    {"ms", "{\"uid\":\"0f8b6c1e-1c4f-4a51-9a7e-2b1d1f7a6c3e\"}", 0, F, 0},
    {"ms", "5f2b8c0d9e1a4b3c8d7e6f5a4b3c2d1e", 0, F, 0},
    /* decimal seconds */
    {"s", "", 0, F, 0},
    {"s", "-1700000000", 0, F, 0},
    {"s", "1700000000.5", 0, F, 0},
    {"s", "017", 0, F, 0},
    {"s", "1e9", 0, F, 0},
    /* seconds with a fraction */
    {"float", "", 0, F, 0},
    {"float", "+1.5", 0, F, 0},
    {"float", "-1.5", 0, F, 0},
    {"float", " 1.5", 0, F, 0},
    {"float", "1.5 ", 0, F, 0},
    {"float", "01.5", 0, F, 0},
    {"float", "1.", 0, F, 0},
    {"float", ".5", 0, F, 0},
    {"float", ".", 0, F, 0},
    {"float", "1.1234567890", 0, F, 0}, /* ten fraction digits */
    {"float", "1.5.5", 0, F, 0},
    {"float", "1..5", 0, F, 0},
    {"float", "1e3", 0, F, 0},
    {"float", "1.5e3", 0, F, 0},
    {"float", "0x1p3", 0, F, 0},
    {"float", "1.-5", 0, F, 0},
    {"float", "1. 5", 0, F, 0},
    {"float", "1.5\0", 4, F, 0},
    {"float", "1.\0" "5", 4, F, 0},
    {"float", "nan", 0, F, 0},
    {"float", "inf", 0, F, 0},
    {"float", "9223372036855", 0, F, 0}, /* overflows in microseconds */
    {"float", "12345678901234567890.5", 0, F, 0},
    /* JSON */
    {"json", "", 0, F, 0},
    {"json", "[]", 0, F, 0},
    {"json", "[{\"expiryTime\":1}]", 0, F, 0},
    {"json", "\"1\"", 0, F, 0},
    {"json", "1", 0, F, 0},
    {"json", "null", 0, F, 0},
    {"json", "{}", 0, F, 0},
    {"json", "{\"expiryTime\":{\"x\":1}}", 0, F, 0},
    {"json", "{\"a\":{\"expiryTime\":1}}", 0, F, 0},
    {"json", "{\"expiryTime\":\"1\"}", 0, F, 0},
    {"json", "{\"expiryTime\":true}", 0, F, 0},
    {"json", "{\"expiryTime\":null}", 0, F, 0},
    {"json", "{\"expiryTime\":[1]}", 0, F, 0},
    {"json", "{\"expiryTime\":-1}", 0, F, 0},
    {"json", "{\"expiryTime\":-0}", 0, F, 0},
    {"json", "{\"expiryTime\":1.5}", 0, F, 0},
    {"json", "{\"expiryTime\":1.0}", 0, F, 0},
    {"json", "{\"expiryTime\":1e3}", 0, F, 0},
    {"json", "{\"expiryTime\":01}", 0, F, 0},
    {"json", "{\"expiryTime\":+1}", 0, F, 0},
    {"json", "{\"expiryTime\":0x10}", 0, F, 0},
    {"json", "{\"expiryTime\":9223372036854775808}", 0, F, 0},
    {"json", "{\"expiryTime\":99999999999999999999}", 0, F, 0},
    {"json", "{\"expiryTime\":1,\"expiryTime\":1}", 0, F, 0},
    {"json", "{\"expiryTime\":1,\"expiry\\u0054ime\":2}", 0, F, 0},
    {"json", "{\"expiryTime\":1}x", 0, F, 0},
    {"json", "{\"expiryTime\":1}{}", 0, F, 0},
    {"json", "{\"expiryTime\":1}}", 0, F, 0},
    {"json", "{\"expiryTime\":1", 0, F, 0},
    {"json", "{\"expiryTime\":1,}", 0, F, 0},
    {"json", "{,\"expiryTime\":1}", 0, F, 0},
    {"json", "{\"expiryTime\" 1}", 0, F, 0},
    {"json", "{'expiryTime':1}", 0, F, 0},
    {"json", "{expiryTime:1}", 0, F, 0},
    {"json", "{\"expirytime\":1}", 0, F, 0},
    {"json", "{\"expiryTime\":1}\0", 17, F, 0},
    {"json", "{\"expiryTime\":\0" "1}", 17, F, 0},
    {"json", "{\"expiryTime\":1,\"x\":\"a\0b\"}", 26, F, 0},
    {"json", "{\"expiryTime\":1,\"x\":\"\\q\"}", 0, F, 0},
    {"json", "{\"expiryTime\":1,\"x\":\"\\u12\"}", 0, F, 0},
    {"json", "{\"expiryTime\":1,\"x\":\"\x01\"}", 0, F, 0},
    {"json", "{\"expiryTime\":1,\"x\":tru}", 0, F, 0},
    {"json", "{\"uid\":\"0f8b6c1e-1c4f-4a51-9a7e-2b1d1f7a6c3e\"}", 0, F, 0},
    {"json", "1700000000123", 0, F, 0},
    {"json:field=ts", "{\"expiryTime\":4}", 0, F, 0},
};
#undef F

static void test_decoding_rejects_anything_but_the_exact_form(void **state) {
    (void)state;
    run_dec_cases(rejected_cases, sizeof rejected_cases / sizeof rejected_cases[0]);
}

/* Arrays and objects nested past any sane depth are rejected, not recursed
 * into without bound. */
static void test_deeply_nested_json_is_rejected(void **state) {
    (void)state;
    char buf[LB_OBSERVED_MAX];
    size_t n = 0;
    const char *head = "{\"expiryTime\":1,\"x\":";
    memcpy(buf, head, strlen(head));
    n = strlen(head);
    size_t depth = (sizeof buf - n - 1) / 2;
    memset(buf + n, '[', depth);
    memset(buf + n + depth, ']', depth);
    n += 2 * depth;
    buf[n++] = '}';
    lb_codec c = codec_of("json");
    int64_t t = 0;
    assert_int_equal(decode_copy(&c, buf, n, &t), LB_EFOREIGN);
}

static void test_decoding_rejects_null_arguments(void **state) {
    (void)state;
    lb_codec c = codec_of("ms");
    int64_t t = 5;
    assert_int_equal(lb_codec_decode(NULL, "1", 1, &t), LB_EINVAL);
    assert_int_equal(lb_codec_decode(&c, "1", 1, NULL), LB_EINVAL);
    assert_int_equal(lb_codec_decode(&c, NULL, 1, &t), LB_EINVAL);
    assert_int_equal(lb_codec_decode(&c, NULL, 0, &t), LB_EFOREIGN);
}

/* Values beyond LB_OBSERVED_MAX are foreign without being parsed; one just
 * inside is parsed like any other. */
static void test_oversized_values_are_foreign(void **state) {
    (void)state;
    static const char *const specs[] = {"ms", "s", "float", "json"};
    size_t mib = 1 << 20;
    char *big = malloc(mib);
    assert_non_null(big);
    memset(big, '1', mib);
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        lb_codec c = codec_of(specs[i]);
        int64_t t = 3;
        assert_int_equal(lb_codec_decode(&c, big, mib, &t), LB_EFOREIGN);
    }
    /* A JSON value padded to exactly the limit, then one byte over it. */
    const char *head = "{\"expiryTime\":5,\"pad\":\"";
    size_t hl = strlen(head);
    memcpy(big, head, hl);
    memset(big + hl, 'p', LB_OBSERVED_MAX - hl - 2);
    memcpy(big + LB_OBSERVED_MAX - 2, "\"}", 2);
    lb_codec c = codec_of("json");
    int64_t t = 0;
    assert_int_equal(decode_copy(&c, big, LB_OBSERVED_MAX, &t), LB_OK);
    assert_int_equal(t, 5);
    memset(big + hl, 'p', LB_OBSERVED_MAX - hl - 1);
    memcpy(big + LB_OBSERVED_MAX - 1, "\"}", 2);
    assert_int_equal(decode_copy(&c, big, LB_OBSERVED_MAX + 1, &t), LB_EFOREIGN);
    free(big);
}

/* ---- Prefixes: a value read while it grows byte by byte --------------------------- */

/* What a prefix of a decimal value means, computed independently of the codec:
 * digits, then for the float form an optional '.' and 1 to 9 digits. Returns 0
 * and sets *t if `s` is a valid form. */
static int expected_prefix(const char *s, size_t len, int fraction_allowed, int64_t *t) {
    int64_t whole = 0, frac = 0, scale = 1000000;
    size_t i = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9') whole = whole * 10 + (s[i++] - '0');
    if (i == 0 || (s[0] == '0' && i > 1)) return -1;
    if (i == len) {
        *t = fraction_allowed ? whole * 1000000 : whole;
        return 0;
    }
    if (!fraction_allowed || s[i] != '.' || i + 1 == len) return -1;
    for (size_t j = i + 1; j < len; j++) {
        scale /= 10;
        frac += (s[j] - '0') * scale;
    }
    *t = whole * 1000000 + frac;
    return 0;
}

static void test_every_prefix_of_a_value_decodes_only_when_valid(void **state) {
    (void)state;
    static const struct {
        const char *spec, *text;
    } cases[] = {
        {"ms", "1700000030001"},
        {"s", "1700000031"},
        {"float", "1700000030.000001"},
        {"float", "1700000030.250000"},
        {"json", "{\"expiryTime\":5030000000001}"},
        {"json", " { \"a\" : [ \"x\\\"}\" , 2 ] , \"expiryTime\" : 7 } "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_codec c = codec_of(cases[i].spec);
        size_t n = strlen(cases[i].text);
        int64_t full = 0;
        assert_int_equal(decode_copy(&c, cases[i].text, n, &full), LB_OK);
        for (size_t k = 0; k <= n; k++) {
            int64_t t = -1, want = 0;
            int rc = decode_copy(&c, cases[i].text, k, &t);
            int valid;
            if (c.kind == LB_CODEC_JSON) {
                /* Only the whole object, or it with trailing whitespace cut. */
                valid = strspn(cases[i].text + k, " ") == n - k &&
                        memchr(cases[i].text, '}', k) != NULL;
                want = full;
            } else {
                valid = expected_prefix(cases[i].text, k, c.kind == LB_CODEC_FLOAT_SECONDS,
                                        &want) == 0;
            }
            print_message("%s prefix %zu of \"%s\"\n", cases[i].spec, k, cases[i].text);
            assert_int_equal(rc, valid ? LB_OK : LB_EFOREIGN);
            if (valid) assert_int_equal(t, want);
        }
    }
}

/* ---- Codec specs ------------------------------------------------------------------- */
typedef struct spec_case {
    const char *spec;
    const char *canonical;
} spec_case;

static void assert_same_codec(const lb_codec *a, const lb_codec *b) {
    assert_int_equal(a->kind, b->kind);
    if (a->kind != LB_CODEC_JSON) return;
    assert_int_equal(a->unit, b->unit);
    assert_int_equal(a->clock, b->clock);
    assert_string_equal(a->field[0] ? a->field : "expiryTime", b->field[0] ? b->field : "expiryTime");
}

static void test_codec_specs_round_trip_through_their_canonical_form(void **state) {
    (void)state;
    static const spec_case cases[] = {
        {"ms", "ms"},
        {"s", "s"},
        {"float", "float"},
        {"json", "json:field=expiryTime,unit=ns,clock=mono"},
        {"json:unit=ms,clock=epoch", "json:field=expiryTime,unit=ms,clock=epoch"},
        {"json:clock=epoch,unit=us", "json:field=expiryTime,unit=us,clock=epoch"},
        {"json:field=ts", "json:field=ts,unit=ns,clock=mono"},
        {"json:unit=s,field=A_b9,clock=mono", "json:field=A_b9,unit=s,clock=mono"},
        {"json:field=expiryTime,unit=ns,clock=mono", "json:field=expiryTime,unit=ns,clock=mono"},
        {"json:field=123456789012345678901234567890123456789012345678901234567890123",
         "json:field=123456789012345678901234567890123456789012345678901234567890123,"
         "unit=ns,clock=mono"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_codec a, b;
        char text[160];
        print_message("spec %s\n", cases[i].spec);
        assert_int_equal(lb_codec_parse(&a, cases[i].spec), LB_OK);
        assert_int_equal(lb_codec_format(&a, text, sizeof text), LB_OK);
        assert_string_equal(text, cases[i].canonical);
        assert_int_equal(lb_codec_parse(&b, text), LB_OK);
        assert_same_codec(&a, &b);
        assert_int_equal(lb_codec_format(&a, text, strlen(cases[i].canonical)), LB_EINVAL);
        assert_string_equal(text, "");
    }
}

static void test_codec_spec_parsing_rejects_malformed_specs(void **state) {
    (void)state;
    static const char *const bad[] = {
        "", "MS", "ms ", " ms", "milliseconds", "jsonx", "json ", "json:unit=ps", "json:unit=",
        "json:unit=MS", "json:clock=utc", "json:field=", "json:field=a-b", "json:field=a\"b",
        "json:field=a b", "json:field=a,", "json:unit=ms,", "json:,unit=ms", "json:unit",
        "json:bogus=1", "json;unit=ms", "float:x", "ms:unit=ms", "json:",
        "json:unit=ms,unit=ns", "json:field=a,field=a", "json:clock=mono,unit=s,clock=epoch",
        "json:field=1234567890123456789012345678901234567890123456789012345678901234",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lb_codec c;
        memset(&c, 0x5a, sizeof c);
        print_message("spec \"%s\"\n", bad[i]);
        assert_int_equal(lb_codec_parse(&c, bad[i]), LB_EINVAL);
        assert_int_equal(c.kind, 0); /* reset on entry */
        assert_int_equal(c.field[0], '\0');
    }
    lb_codec c;
    assert_int_equal(lb_codec_parse(&c, NULL), LB_EINVAL);
    assert_int_equal(lb_codec_parse(NULL, "ms"), LB_EINVAL);
}

static void test_codec_format_rejects_codecs_out_of_range(void **state) {
    (void)state;
    char text[160];
    lb_codec c = codec_of("json");
    c.unit = (lb_unit)9;
    assert_int_equal(lb_codec_format(&c, text, sizeof text), LB_EINVAL);
    c = codec_of("json");
    c.clock = (lb_clock_kind)7;
    assert_int_equal(lb_codec_format(&c, text, sizeof text), LB_EINVAL);
    c = codec_of("ms");
    c.kind = (lb_codec_kind)42;
    assert_int_equal(lb_codec_format(&c, text, sizeof text), LB_EINVAL);
    /* A field name filling its array with no terminating NUL. */
    c = codec_of("json");
    memset(c.field, 'f', sizeof c.field);
    assert_int_equal(lb_codec_format(&c, text, sizeof text), LB_EINVAL);
    size_t len = 9;
    int64_t t = 9;
    assert_int_equal(lb_codec_encode(&c, 1, text, sizeof text, &len), LB_EINVAL);
    assert_int_equal(len, 0);
    assert_int_equal(lb_codec_decode(&c, "{\"f\":1}", 7, &t), LB_EINVAL);
    assert_int_equal(t, 0);
    assert_int_equal(lb_codec_format(NULL, text, sizeof text), LB_EINVAL);
    assert_int_equal(lb_codec_format(&c, NULL, sizeof text), LB_EINVAL);
}

/* ---- Instants on each codec's unit and clock ---------------------------------------- */
typedef struct now_case {
    const char *spec;
    int64_t now;           /* lb_codec_now */
    int64_t expiry_1500ms; /* lb_codec_expiry with a ttl of 1500 ms */
} now_case;

static void test_now_and_expiry_follow_each_codecs_unit_and_clock(void **state) {
    (void)state;
    static const now_case cases[] = {
        {"ms", 1700000000123, 1700000001624},
        {"s", 1700000000, 1700000003}, /* 1.5 s rounds up to 2 */
        {"float", 1700000000123456, 1700000001623457},
        {"json", 5000123456789, 5001623456790},
        {"json:unit=us", 5000123456, 5000123456 + 1500000 + 1},
        {"json:unit=ms", 5000123, 5000123 + 1500 + 1},
        {"json:unit=s", 5000, 5003},
        {"json:clock=epoch,unit=ms", 1700000000123, 1700000001624},
        {"json:clock=epoch,unit=us", 1700000000123456, 1700000001623457},
        {"json:clock=epoch,unit=ns", 1700000000123456000, 1700000001623456001},
        {"json:clock=epoch,unit=s", 1700000000, 1700000003},
    };
    const lb_now now = {1700000000123456, 5000123456789};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_codec c = codec_of(cases[i].spec);
        int64_t t = 0;
        print_message("spec %s\n", cases[i].spec);
        assert_int_equal(lb_codec_now(&c, &now), cases[i].now);
        assert_int_equal(lb_codec_expiry(&c, &now, 1500, &t), LB_OK);
        assert_int_equal(t, cases[i].expiry_1500ms);
        assert_int_equal(lb_codec_expiry(&c, &now, 0, &t), LB_OK);
        assert_int_equal(t, cases[i].now + 1);
    }
}

static void test_expiry_reports_overflow_and_negative_ttls(void **state) {
    (void)state;
    static const struct {
        const char *spec;
        lb_now now;
        int64_t ttl_ms;
        int rc;
        int64_t t;
    } cases[] = {
        {"json", {0, INT64_MAX - 10}, 0, LB_OK, INT64_MAX - 9},
        {"json", {0, INT64_MAX - 10}, 1, LB_EINVAL, 0},
        {"json", {0, INT64_MAX}, 0, LB_EINVAL, 0}, /* the "+ 1 unit" overflows */
        {"json", {0, 0}, INT64_MAX / 1000000 + 1, LB_EINVAL, 0},
        {"ms", {1700000000000000, 0}, INT64_MAX, LB_EINVAL, 0},
        {"ms", {1700000000000000, 0}, -1, LB_EINVAL, 0},
        {"float", {1700000000000000, 0}, INT64_MAX / 1000 + 1, LB_EINVAL, 0},
        {"s", {1700000000000000, 0}, INT64_MAX, LB_OK, 1700000000 + INT64_MAX / 1000 + 1 + 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_codec c = codec_of(cases[i].spec);
        int64_t t = 77;
        print_message("case %zu\n", i);
        assert_int_equal(lb_codec_expiry(&c, &cases[i].now, cases[i].ttl_ms, &t), cases[i].rc);
        assert_int_equal(t, cases[i].t);
    }
}

static void test_durations_convert_to_codec_units_rounding_up(void **state) {
    (void)state;
    static const struct {
        const char *spec;
        int64_t ms;
        int rc;
        int64_t units;
    } cases[] = {
        {"ms", 1500, LB_OK, 1500},       {"s", 1500, LB_OK, 2},
        {"s", 1000, LB_OK, 1},           {"s", 1, LB_OK, 1},
        {"s", 0, LB_OK, 0},              {"float", 3, LB_OK, 3000},
        {"json", 3, LB_OK, 3000000},     {"json:unit=us", 3, LB_OK, 3000},
        {"ms", -1, LB_EINVAL, 0},        {"json", INT64_MAX, LB_EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_codec c = codec_of(cases[i].spec);
        int64_t u = 77;
        assert_int_equal(lb_codec_ms_to_units(&c, cases[i].ms, &u), cases[i].rc);
        assert_int_equal(u, cases[i].units);
    }
}

/* ---- The plausibility window ------------------------------------------------------ */
/* The clock of every window case: 2023-11-14T22:13:20.123456Z, and a host up
 * for 5000 s. */
static const lb_now window_now = {1700000000123456, 5000123456789};
#define AHEAD_MS LB_PLAUSIBLE_AHEAD_MS

static void test_the_window_bounds_instants_on_each_codecs_clock(void **state) {
    (void)state;
    static const struct {
        const char *spec;
        int64_t t;
        int plausible;
    } cases[] = {
        /* Epoch clocks: from 2000-01-01 to ten years after now, both included. */
        {"ms", 1700000030001, 1},
        {"ms", 946684800000, 1},
        {"ms", 946684799999, 0},
        {"ms", 1700000000123 + AHEAD_MS, 1},
        {"ms", 1700000000123 + AHEAD_MS + 1, 0},
        {"ms", 1700000600, 0},        /* R's seconds read as ms: January 1970 */
        {"ms", 1700000000123456, 0},  /* microseconds read as ms: year ~55,800 */
        {"ms", 0, 0},
        {"s", 1700000600, 1},
        {"s", 946684800, 1},
        {"s", 946684799, 0},
        {"s", 1700000000 + AHEAD_MS / 1000, 1},
        {"s", 1700000000 + AHEAD_MS / 1000 + 1, 0},
        {"s", 1700000030001, 0},      /* L1's ms read as seconds: year ~55,800 */
        {"float", 1700000030000001, 1},
        {"float", 946684799999999, 0},
        {"json:unit=ms,clock=epoch", 1700000030001, 1},
        {"json:unit=ms,clock=epoch", 1700000030, 0},
        {"json:unit=ns,clock=epoch", 1700000030000000001, 1},
        {"json:unit=ns,clock=epoch", 5030000000001, 0}, /* a monotonic reading */
        {"json:unit=s,clock=epoch", 1700000030, 1},
        /* Monotonic clocks: from 0 to ten years after this host's now. */
        {"json", 5030000000001, 1},
        {"json", 0, 1},
        {"json", 5000123456789 + AHEAD_MS * 1000000, 1},
        {"json", 5000123456789 + AHEAD_MS * 1000000 + 1, 0},
        {"json", 1700000030000000001, 0}, /* epoch ns: 54 years of uptime */
        {"json:unit=us", 5030000001, 1},
        {"json:unit=ms", 5030001, 1},
        {"json:unit=ms", 1700000030001, 0}, /* epoch ms: 54 years of uptime */
        {"json:unit=s", 5031, 1},
        {"json:unit=s", 1700000030, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_codec c = codec_of(cases[i].spec);
        if (lb_codec_plausible(&c, cases[i].t, &window_now) != cases[i].plausible)
            fail_msg("%s %lld: expected %s", cases[i].spec, (long long)cases[i].t,
                     cases[i].plausible ? "plausible" : "implausible");
    }
    lb_codec ms = codec_of("ms"), json = codec_of("json");
    assert_false(lb_codec_plausible(NULL, 1700000030001, &window_now));
    assert_false(lb_codec_plausible(&ms, 1700000030001, NULL));
    /* Near the ends of 64 bits the window saturates instead of wrapping. */
    const lb_now late = {INT64_MAX, INT64_MAX - 5};
    lb_codec epoch_ns = codec_of("json:clock=epoch");
    assert_true(lb_codec_plausible(&json, INT64_MAX, &late));
    assert_true(lb_codec_plausible(&epoch_ns, INT64_MAX, &late));
    assert_true(lb_codec_plausible(&ms, INT64_MAX / 1000, &late));
}

/* A codec never writes an instant its own readers would call implausible:
 * every expiry of a validity under ten years lies in the window. */
static void test_every_codec_writes_plausible_expiries(void **state) {
    (void)state;
    static const char *const specs[] = {"ms", "s", "float", "json", "json:unit=ms,clock=epoch",
                                        "json:unit=s", "json:unit=us,clock=epoch"};
    static const int64_t ttls[] = {0, 1, 30000, 86400000, AHEAD_MS - 1000};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        for (size_t j = 0; j < sizeof ttls / sizeof ttls[0]; j++) {
            lb_codec c = codec_of(specs[i]);
            int64_t t;
            assert_int_equal(lb_codec_expiry(&c, &window_now, ttls[j], &t), LB_OK);
            if (!lb_codec_plausible(&c, t, &window_now))
                fail_msg("%s, ttl %lld ms: %lld is implausible", specs[i], (long long)ttls[j],
                         (long long)t);
        }
}

static void test_the_suggestion_names_a_codec_that_reads_the_value_plausibly(void **state) {
    (void)state;
    static const struct {
        const char *spec, *value;
        const char *suggested; /* NULL: none */
    } cases[] = {
        {"ms", "1700000600", "s"},
        {"s", "1700000030001", "ms"},
        {"float", "1700000030001", "ms"},
        {"ms", "1700000600.5", "float"},
        {"ms", "1700000030000000", NULL}, /* epoch us: no decimal codec reads it */
        {"ms", "5", NULL},
        {"ms", "abc", NULL},
        {"json", "{\"expiryTime\":1700000030000000001}", "json:field=expiryTime,unit=ns,clock=epoch"},
        {"json:unit=ms,clock=epoch", "{\"expiryTime\":1700000030}",
         "json:field=expiryTime,unit=s,clock=epoch"},
        {"json:field=until,unit=s,clock=epoch", "{\"until\":1700000030001}",
         "json:field=until,unit=ms,clock=epoch"},
        {"json:unit=ns,clock=epoch", "{\"expiryTime\":5030000000001}",
         "json:field=expiryTime,unit=ns,clock=mono"},
        {"json", "{\"uid\":\"0f8b\"}", NULL},
        {"json", "1700000030001", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lb_codec c = codec_of(cases[i].spec), out;
        char spec[128];
        int rc = lb_codec_suggest(&c, cases[i].value, strlen(cases[i].value), &window_now, &out);
        print_message("%s %s\n", cases[i].spec, cases[i].value);
        if (!cases[i].suggested) {
            assert_int_equal(rc, LB_EFOREIGN);
            continue;
        }
        assert_int_equal(rc, LB_OK);
        assert_int_equal(lb_codec_format(&out, spec, sizeof spec), LB_OK);
        assert_string_equal(spec, cases[i].suggested);
    }
    lb_codec c = codec_of("ms"), out;
    assert_int_equal(lb_codec_suggest(NULL, "1", 1, &window_now, &out), LB_EINVAL);
    assert_int_equal(lb_codec_suggest(&c, "1", 1, NULL, &out), LB_EINVAL);
    assert_int_equal(lb_codec_suggest(&c, "1", 1, &window_now, NULL), LB_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_codec_encodes_its_exact_text_and_decodes_it_back),
        cmocka_unit_test(test_encoding_rejects_negative_instants_and_small_buffers),
        cmocka_unit_test(test_the_longest_values_fit_the_value_buffer),
        cmocka_unit_test(test_decoding_accepts_every_exact_form),
        cmocka_unit_test(test_decoding_rejects_anything_but_the_exact_form),
        cmocka_unit_test(test_deeply_nested_json_is_rejected),
        cmocka_unit_test(test_decoding_rejects_null_arguments),
        cmocka_unit_test(test_oversized_values_are_foreign),
        cmocka_unit_test(test_every_prefix_of_a_value_decodes_only_when_valid),
        cmocka_unit_test(test_codec_specs_round_trip_through_their_canonical_form),
        cmocka_unit_test(test_codec_spec_parsing_rejects_malformed_specs),
        cmocka_unit_test(test_codec_format_rejects_codecs_out_of_range),
        cmocka_unit_test(test_now_and_expiry_follow_each_codecs_unit_and_clock),
        cmocka_unit_test(test_expiry_reports_overflow_and_negative_ttls),
        cmocka_unit_test(test_durations_convert_to_codec_units_rounding_up),
        cmocka_unit_test(test_the_window_bounds_instants_on_each_codecs_clock),
        cmocka_unit_test(test_every_codec_writes_plausible_expiries),
        cmocka_unit_test(test_the_suggestion_names_a_codec_that_reads_the_value_plausibly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
