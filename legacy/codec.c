/* Legacy value codecs: units and clocks, the decimal forms, and codec specs.
 * The JSON form lives in codec_json.c. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "legacy/internal.h"

/* Units per second of each lb_unit. */
static int64_t unit_per_s(lb_unit u) {
    switch (u) {
    case LB_UNIT_NS: return 1000000000;
    case LB_UNIT_US: return 1000000;
    case LB_UNIT_S: return 1;
    case LB_UNIT_MS:
    default: return 1000;
    }
}

static lb_unit codec_unit(const lb_codec *c) {
    switch (c->kind) {
    case LB_CODEC_SECONDS: return LB_UNIT_S;
    case LB_CODEC_FLOAT_SECONDS: return LB_UNIT_US; /* fraction kept to the microsecond */
    case LB_CODEC_JSON: return c->unit;
    case LB_CODEC_MS:
    default: return LB_UNIT_MS;
    }
}

lb_clock_kind lb__codec_clock(const lb_codec *c) {
    return c->kind == LB_CODEC_JSON ? c->clock : LB_CLOCK_EPOCH;
}

int lb__codec_same_instant(const lb_codec *a, int64_t ta, const lb_codec *b, int64_t tb) {
    int64_t pa = unit_per_s(codec_unit(a)), pb = unit_per_s(codec_unit(b)), scaled;
    if (lb__codec_clock(a) != lb__codec_clock(b)) return 0;
    /* Scaled to the finer unit; a reading that overflows there cannot equal
     * one that fits. */
    if (pa <= pb) return !lb__mul64(ta, pb / pa, &scaled) && scaled == tb;
    return !lb__mul64(tb, pa / pb, &scaled) && scaled == ta;
}

int64_t lb_codec_now(const lb_codec *c, const lb_now *now) {
    int64_t per_s = unit_per_s(codec_unit(c));
    if (lb__codec_clock(c) == LB_CLOCK_MONOTONIC)
        return per_s >= 1000000000 ? now->mono_ns : now->mono_ns / (1000000000 / per_s);
    /* Past the year 2262 in ns the product overflows: saturate (defined, and
     * no codec can write such an instant anyway). */
    int64_t t;
    if (per_s >= 1000000)
        return lb__mul64(now->wall_us, per_s / 1000000, &t) ? (now->wall_us < 0 ? INT64_MIN : INT64_MAX) : t;
    return now->wall_us / (1000000 / per_s);
}

int lb_codec_ms_to_units(const lb_codec *c, int64_t ms, int64_t *out) {
    int64_t per_s = unit_per_s(codec_unit(c));
    *out = 0;
    if (ms < 0) return LB_EINVAL;
    if (per_s >= 1000) {
        int64_t units;
        if (lb__mul64(ms, per_s / 1000, &units)) return LB_EINVAL;
        *out = units;
        return LB_OK;
    }
    *out = ms / (1000 / per_s) + (ms % (1000 / per_s) != 0); /* round up */
    return LB_OK;
}

int64_t lb__codec_units_to_ms(const lb_codec *c, int64_t units) {
    int64_t per_s = unit_per_s(codec_unit(c)), ms;
    if (units <= 0) return 0;
    if (per_s >= 1000) return units / (per_s / 1000) + (units % (per_s / 1000) != 0);
    return lb__mul64(units, 1000 / per_s, &ms) ? INT64_MAX : ms;
}

int lb_codec_expiry(const lb_codec *c, const lb_now *now, int64_t ttl_ms, int64_t *out) {
    int64_t ttl, t;
    *out = 0;
    if (lb_codec_ms_to_units(c, ttl_ms, &ttl) != LB_OK) return LB_EINVAL;
    if (lb__add64(lb_codec_now(c, now), ttl, &t) || lb__add64(t, 1, &t)) return LB_EINVAL;
    *out = t;
    return LB_OK;
}

/* Canonical non-negative decimal: 1 to 19 digits, no sign, no leading zero
 * (except "0" itself), fits in int64. `len` bytes exactly. */
int lb__parse_decimal(const char *s, size_t len, int64_t *out) {
    if (len == 0 || len > 19) return LB_EFOREIGN;
    if (s[0] == '0' && len > 1) return LB_EFOREIGN;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return LB_EFOREIGN;
        if (lb__mul64(v, 10, &v) || lb__add64(v, s[i] - '0', &v)) return LB_EFOREIGN;
    }
    *out = v;
    return LB_OK;
}

/* Epoch seconds with an optional fraction of 1 to 9 digits, read to the
 * microsecond (extra digits truncate). */
static int parse_float_seconds(const char *s, size_t len, int64_t *out_us) {
    const char *dot = memchr(s, '.', len);
    size_t ilen = dot ? (size_t)(dot - s) : len;
    int64_t secs, us = 0;
    if (lb__parse_decimal(s, ilen, &secs) != LB_OK) return LB_EFOREIGN;
    if (dot) {
        size_t flen = len - ilen - 1;
        if (flen == 0 || flen > 9) return LB_EFOREIGN;
        int64_t scale = 100000;
        for (size_t i = 0; i < flen; i++) {
            char ch = dot[1 + i];
            if (ch < '0' || ch > '9') return LB_EFOREIGN;
            if (i < 6) us += (ch - '0') * scale;
            scale /= 10;
        }
    }
    if (lb__mul64(secs, 1000000, &secs) || lb__add64(secs, us, out_us)) return LB_EFOREIGN;
    return LB_OK;
}

int lb_codec_encode(const lb_codec *c, int64_t t, char *buf, size_t cap, size_t *len) {
    int n;
    if (!c || !buf || !len) return LB_EINVAL;
    *len = 0;
    if (cap > 0) buf[0] = '\0';
    if (t < 0) return LB_EINVAL;
    switch (c->kind) {
    case LB_CODEC_MS:
    case LB_CODEC_SECONDS:
        n = snprintf(buf, cap, "%lld", (long long)t);
        break;
    case LB_CODEC_FLOAT_SECONDS:
        n = snprintf(buf, cap, "%lld.%06lld", (long long)(t / 1000000), (long long)(t % 1000000));
        break;
    case LB_CODEC_JSON:
        return lb__json_encode(c, t, buf, cap, len);
    default:
        return LB_EINVAL;
    }
    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0) buf[0] = '\0';
        return LB_EINVAL;
    }
    *len = (size_t)n;
    return LB_OK;
}

int lb_codec_decode(const lb_codec *c, const char *s, size_t len, int64_t *t) {
    if (!c || !t || (!s && len)) return LB_EINVAL;
    *t = 0;
    if (len == 0 || len > LB_OBSERVED_MAX) return LB_EFOREIGN;
    switch (c->kind) {
    case LB_CODEC_MS:
    case LB_CODEC_SECONDS: return lb__parse_decimal(s, len, t);
    case LB_CODEC_FLOAT_SECONDS: return parse_float_seconds(s, len, t);
    case LB_CODEC_JSON: return lb__json_decode(c, s, len, t);
    default: return LB_EINVAL;
    }
}
