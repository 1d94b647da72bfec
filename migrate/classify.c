/* The format classifier: what a lock key holds, from its bytes, PTTL and Redis
 * type alone, and lb_inspect, which reads those in one script call. */
#include <string.h>

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "lockbridge/modern.h"
#include "migrate/internal.h"

static const char *const format_names[] = {"absent",  "legacy",    "compat",   "token",
                                           "incr",    "unknown",   "wrongtype", "ambiguous"};
static const char *const token_names[] = {"none", "lockbridge", "json-uid", "other"};
static const char *const ambiguity_names[] = {"none", "implausible", "disagree"};

const char *lb_format_name(lb_format f) {
    if ((int)f < 0 || (int)f > (int)LB_FORMAT_AMBIGUOUS) return "invalid";
    return format_names[f];
}

const char *lb_ambiguity_name(lb_ambiguity a) {
    if ((int)a < 0 || (int)a > (int)LB_AMBIGUITY_DISAGREE) return "invalid";
    return ambiguity_names[a];
}

const char *lb_token_kind_name(lb_token_kind k) {
    if ((int)k < 0 || (int)k > (int)LB_TOKEN_OTHER) return "invalid";
    return token_names[k];
}

static int is_hex_token(const char *s, size_t len) {
    if (len != LB_TOKEN_LEN) return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* M1 writes {"uid":"<uuid4>"}: any JSON object whose uid is a string. */
static int is_json_uid(const char *s, size_t len) {
    if (len < 2 || s[0] != '{' || len > LB_OBSERVED_MAX) return 0;
    cJSON *o = cJSON_ParseWithLength(s, len);
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(o, "uid");
    int yes = cJSON_IsObject(o) && cJSON_IsString(uid);
    cJSON_Delete(o);
    return yes;
}

/* A timestamp: codec i's plausible reading t, its expiry judged on that
 * codec's clock. */
static void judge(lb_class *out, const lb_codec *codecs, int i, int64_t t, const lb_now *now) {
    int64_t cur = lb_codec_now(&codecs[i], now), left;
    out->codec = i;
    out->expiry = t;
    out->expired = cur > t;
    if (out->expired) out->remaining_ms = 0;
    else if (lb__sub64(t, cur, &left)) out->remaining_ms = INT64_MAX;
    else out->remaining_ms = lb__codec_units_to_ms(&codecs[i], left);
    out->format = out->pttl_ms >= 0 ? LB_FORMAT_COMPAT : LB_FORMAT_LEGACY;
}

/* One codec's reading of a value: codec index (-1: none yet) and instant. */
typedef struct reading {
    int i;
    int64_t t;
} reading;

/* No single plausible instant: `other` set means two plausible readings that
 * differ; otherwise every reading (the first is `first`) is implausible. */
static void ambiguous(lb_class *out, const lb_codec *codecs, reading first, reading plausible,
                      reading other, const char *s, size_t len, const lb_now *now) {
    out->format = LB_FORMAT_AMBIGUOUS;
    if (other.i >= 0) {
        out->ambiguity = LB_AMBIGUITY_DISAGREE;
        out->codec = plausible.i;
        out->expiry = plausible.t;
        out->codec2 = other.i;
        out->expiry2 = other.t;
        return;
    }
    out->ambiguity = LB_AMBIGUITY_IMPLAUSIBLE;
    out->codec = first.i;
    out->expiry = first.t;
    out->suggested = lb_codec_suggest(&codecs[first.i], s, len, now, &out->suggestion) == LB_OK;
}

/* Every codec's reading, and only plausible ones count: the first codec that
 * decodes no longer wins, since with "ms" before "s" R's live seconds would
 * read as a 1970 instant, and with "s" first L1's ms as the year 55,000.
 * Returns 1 when some codec decodes the value (a timestamp or AMBIGUOUS). */
static int try_codecs(lb_class *out, const char *s, size_t len, const lb_codec *codecs,
                      int n, const lb_now *now) {
    reading first = {-1, 0}, plausible = {-1, 0}, other = {-1, 0};
    for (int i = 0; i < n; i++) {
        int64_t t;
        if (lb_codec_decode(&codecs[i], s, len, &t) != LB_OK) continue;
        if (first.i < 0) first = (reading){i, t};
        if (!lb_codec_plausible(&codecs[i], t, now)) continue;
        if (plausible.i < 0) plausible = (reading){i, t};
        else if (other.i < 0 && !lb__codec_same_instant(&codecs[plausible.i], plausible.t,
                                                        &codecs[i], t))
            other = (reading){i, t};
    }
    if (first.i < 0) return 0;
    if (plausible.i >= 0 && other.i < 0) judge(out, codecs, plausible.i, plausible.t, now);
    else ambiguous(out, codecs, first, plausible, other, s, len, now);
    return 1;
}

static void reset(lb_class *out, int64_t pttl_ms, size_t len) {
    memset(out, 0, sizeof *out);
    out->codec = -1;
    out->codec2 = -1;
    out->pttl_ms = pttl_ms;
    out->len = len;
}

int lb_classify(lb_class *out, const char *value, size_t len, int64_t pttl_ms,
                const char *type, const lb_codec *codecs, int ncodecs, const lb_now *now) {
    int64_t n;
    if (!out) return LB_EINVAL;
    reset(out, pttl_ms, value ? len : 0);
    if (!codecs || ncodecs < 1 || !now) return LB_EINVAL;
    if (!type) type = value ? "string" : "none";
    if (strcmp(type, "none") == 0) return LB_OK; /* absent */
    if (strcmp(type, "string") != 0) {
        out->format = LB_FORMAT_WRONGTYPE;
        return LB_OK;
    }
    if (!value) return LB_OK; /* a string type with no value: gone meanwhile */
    /* Before the codecs: a small integer also decodes as an ancient timestamp,
     * and taking it over would hand an INCR locker's key to two owners. */
    if (lb__parse_decimal(value, len, &n) == LB_OK && n < LB_INCR_MAX) {
        out->format = LB_FORMAT_INCR;
        out->counter = n;
        return LB_OK;
    }
    if (len <= LB_OBSERVED_MAX && try_codecs(out, value, len, codecs, ncodecs, now)) return LB_OK;
    if (is_hex_token(value, len)) out->token = LB_TOKEN_LOCKBRIDGE;
    else if (is_json_uid(value, len)) out->token = LB_TOKEN_JSON_UID;
    else if (pttl_ms >= 0) out->token = LB_TOKEN_OTHER;
    out->format = out->token != LB_TOKEN_NONE ? LB_FORMAT_TOKEN : LB_FORMAT_UNKNOWN;
    return LB_OK;
}

/* Reads {type, value or nil, pttl, length} as migrate_inspect returns it. */
static int parse_inspect(const redisReply *r, char *type, size_t cap, const redisReply **val,
                         long long *pttl, long long *len) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4) return LB_EPROTO;
    const redisReply *t = r->element[0], *v = r->element[1];
    if (t->type != REDIS_REPLY_STRING && t->type != REDIS_REPLY_STATUS) return LB_EPROTO;
    if (r->element[2]->type != REDIS_REPLY_INTEGER || r->element[3]->type != REDIS_REPLY_INTEGER)
        return LB_EPROTO;
    if (v->type != REDIS_REPLY_STRING && v->type != REDIS_REPLY_NIL) return LB_EPROTO;
    if ((size_t)t->len >= cap) return LB_EPROTO;
    memcpy(type, t->str, (size_t)t->len);
    type[t->len] = '\0';
    *val = v->type == REDIS_REPLY_STRING ? v : NULL;
    *pttl = r->element[2]->integer;
    *len = r->element[3]->integer;
    return LB_OK;
}

/* The inspect script's reply, classified at the moment it arrived. */
typedef struct inspect_read {
    const lb_codec *codecs;
    int ncodecs;
    lb_class *out;
} inspect_read;

static int judge_inspect(lb__call *c, const redisReply *r, const lb_now *now) {
    const inspect_read *d = c->ud;
    char type[32];
    const redisReply *v;
    long long pttl, len;
    if (parse_inspect(r, type, sizeof type, &v, &pttl, &len) != LB_OK)
        return lb__fail(&c->m, LB_EPROTO, "inspect: unexpected reply");
    /* A value longer than what the script returns is no timestamp: its
     * prefix is classified with the full length kept for the report. */
    int rc = lb_classify(d->out, v ? v->str : NULL, v ? (size_t)v->len : 0, pttl, type,
                         d->codecs, d->ncodecs, now);
    if (v && len > (long long)v->len && d->out->format != LB_FORMAT_TOKEN)
        d->out->format = LB_FORMAT_UNKNOWN;
    if (len >= 0) d->out->len = (size_t)len;
    return rc;
}

int lb_inspect(lb_target t, const char *key, size_t keylen, const lb_codec *codecs,
               int ncodecs, const lb_clock *clock, lb_class *out) {
    if (!out) return LB_EINVAL;
    reset(out, -2, 0);
    if (!t.handle || !key || keylen == 0 || !codecs || ncodecs < 1) return LB_EINVAL;
    inspect_read d = {codecs, ncodecs, out};
    const char *argv[2] = {"1", key};
    size_t lens[2] = {1, keylen};
    lb__call c = {.script = &lb__script_migrate_inspect, .argc = 2, .argv = argv, .lens = lens,
                  .what = "inspect", .judge = judge_inspect, .ud = &d};
    int rc = lb__call_run(t, &c, clock);
    if (rc != LB_OK) reset(out, -2, 0);
    return rc;
}
