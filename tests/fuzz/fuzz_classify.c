/* Fuzz target for the migration module's pure readers of untrusted bytes: the
 * format classifier (value, PTTL, Redis type, codecs, clock) and the census
 * entry and mode name parsers. Besides not crashing they must agree with the
 * codecs they stand on: a value classified as a timestamp decodes with the
 * codec named, with the expiry given, plausibly, and the TTL deciding legacy
 * or compat, and no codec reads another plausible instant; an ambiguous value
 * is one no codec reads plausibly or two read differently; an INCR counter is
 * a small decimal; a parsed census entry encodes and parses back to itself,
 * byte for byte. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "legacy/internal.h"
#include "lockbridge/lockbridge.h"
#include "migrate/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) \
    do {            \
        if (!(cond)) abort(); \
    } while (0)

static const char *const codec_specs[] = {"ms", "s", "float", "json", "json:unit=ms,clock=epoch",
                                          "json:field=until,unit=us,clock=epoch"};
#define NCODECS (sizeof codec_specs / sizeof codec_specs[0])
static const char *const types[] = {NULL, "string", "none", "hash", "list", "zset"};
static const int64_t pttls[] = {-2, -1, 0, 1, 30000, INT64_MAX};

/* How many codecs read the value plausibly; the first such reading in *first. */
static int plausible_readings(const char *v, size_t len, const lb_codec *cs, int n,
                              const lb_now *now, int *first, int64_t *t_first) {
    int count = 0;
    int64_t t;
    *first = -1;
    for (int i = 0; i < n; i++) {
        if (lb_codec_decode(&cs[i], v, len, &t) != LB_OK || !lb_codec_plausible(&cs[i], t, now))
            continue;
        if (count++ == 0) *first = i, *t_first = t;
    }
    return count;
}

/* A timestamp: the first plausible reading, and every other one agrees. */
static void check_timestamp(const lb_class *c, const char *v, size_t len, const lb_codec *cs,
                            int n, const lb_now *now) {
    int first;
    int64_t t, t_first = 0;
    plausible_readings(v, len, cs, n, now, &first, &t_first);
    CHECK(first == c->codec && t_first == c->expiry);
    for (int i = 0; i < n; i++)
        if (lb_codec_decode(&cs[i], v, len, &t) == LB_OK && lb_codec_plausible(&cs[i], t, now))
            CHECK(lb__codec_same_instant(&cs[first], t_first, &cs[i], t));
}

static void check_ambiguous(const lb_class *c, const char *v, size_t len, const lb_codec *cs,
                            int n, const lb_now *now) {
    int first;
    int64_t t, t_first = 0;
    int count = plausible_readings(v, len, cs, n, now, &first, &t_first);
    CHECK(c->codec >= 0 && c->codec < n);
    CHECK(lb_codec_decode(&cs[c->codec], v, len, &t) == LB_OK && t == c->expiry);
    if (c->ambiguity == LB_AMBIGUITY_IMPLAUSIBLE) {
        CHECK(count == 0 && c->codec2 == -1);
        if (c->suggested)
            CHECK(lb_codec_decode(&c->suggestion, v, len, &t) == LB_OK &&
                  lb_codec_plausible(&c->suggestion, t, now));
        return;
    }
    CHECK(c->ambiguity == LB_AMBIGUITY_DISAGREE && count >= 2);
    CHECK(c->codec2 > c->codec && c->codec2 < n);
    CHECK(lb_codec_decode(&cs[c->codec2], v, len, &t) == LB_OK && t == c->expiry2);
    CHECK(!lb__codec_same_instant(&cs[c->codec], c->expiry, &cs[c->codec2], c->expiry2));
}

static void check_class(const lb_class *c, const char *v, size_t len, int64_t pttl,
                        const lb_codec *cs, int n, const lb_now *now) {
    int64_t t;
    CHECK((int)c->format >= LB_FORMAT_ABSENT && c->format <= LB_FORMAT_AMBIGUOUS);
    CHECK(c->format == LB_FORMAT_AMBIGUOUS || c->ambiguity == LB_AMBIGUITY_NONE);
    CHECK(c->pttl_ms == pttl);
    switch (c->format) {
    case LB_FORMAT_LEGACY:
    case LB_FORMAT_COMPAT:
        CHECK(c->codec >= 0 && c->codec < n);
        CHECK(lb_codec_decode(&cs[c->codec], v, len, &t) == LB_OK && t == c->expiry);
        CHECK(c->expired == (lb_codec_now(&cs[c->codec], now) > t));
        CHECK(c->remaining_ms >= 0 && (!c->expired || c->remaining_ms == 0));
        CHECK((c->format == LB_FORMAT_COMPAT) == (pttl >= 0));
        check_timestamp(c, v, len, cs, n, now);
        break;
    case LB_FORMAT_AMBIGUOUS:
        check_ambiguous(c, v, len, cs, n, now);
        break;
    case LB_FORMAT_INCR:
        CHECK(c->counter >= 0 && c->counter < LB_INCR_MAX && len >= 1 && len <= 9);
        break;
    case LB_FORMAT_TOKEN:
        CHECK(c->token != LB_TOKEN_NONE);
        CHECK(c->token != LB_TOKEN_OTHER || pttl >= 0);
        break;
    case LB_FORMAT_UNKNOWN:
        /* A string in no format carries no TTL: with one it is another locker's token. */
        CHECK(c->token == LB_TOKEN_NONE && pttl < 0);
        for (int i = 0; i < n; i++)
            CHECK(len > LB_OBSERVED_MAX || lb_codec_decode(&cs[i], v, len, &t) != LB_OK);
        break;
    default:
        break;
    }
    CHECK(strcmp(lb_format_name(c->format), "invalid") != 0);
}

static void fuzz_census(const char *s, size_t len) {
    lb_census_entry e, back;
    char json[2048];
    size_t jlen;
    if (lb__census_decode(s, len, &e) != LB_OK) return;
    CHECK(e.valid && e.id[0] != '\0');
    if (lb__census_encode(&e, json, sizeof json, &jlen) != LB_OK) return;
    CHECK(lb__census_decode(json, jlen, &back) == LB_OK);
    CHECK(back.mode == e.mode && back.pid == e.pid && back.seen_ms == e.seen_ms);
    CHECK(strcmp(back.id, e.id) == 0 && strcmp(back.host, e.host) == 0 &&
          strcmp(back.version, e.version) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static lb_codec fz_codecs[NCODECS];
    static int ready;
    if (!ready) {
        for (size_t i = 0; i < NCODECS; i++)
            if (lb_codec_parse(&fz_codecs[i], codec_specs[i]) != LB_OK) abort();
        ready = 1;
    }
    if (size < 4) return 0;
    int first = data[0] % (int)NCODECS, n = 1 + data[0] / NCODECS % (int)(NCODECS - first);
    const char *type = types[data[1] % 6];
    int64_t pttl = pttls[data[2] % 6];
    lb_now now = {INT64_C(1700000000000000) + (int64_t)data[3] * 1000000,
                  INT64_C(5000000000000) + (int64_t)data[3] * 1000000000};
    const char *v = (const char *)data + 4;
    size_t len = size - 4;
    lb_class c;
    CHECK(lb_classify(&c, v, len, pttl, type, &fz_codecs[first], n, &now) == LB_OK);
    if (!type || strcmp(type, "string") == 0)
        check_class(&c, v, len, pttl, &fz_codecs[first], n, &now);
    else if (strcmp(type, "none") == 0) CHECK(c.format == LB_FORMAT_ABSENT);
    else CHECK(c.format == LB_FORMAT_WRONGTYPE);
    lb_mode m;
    if (lb_mode_parse(v, len, &m) == LB_OK) CHECK(strlen(lb_mode_name(m)) == len);
    fuzz_census(v, len);
    return 0;
}
