/* What the migration commands say about one key: the library's format
 * classifier (lb_classify) applied to what keyscan read, the codecs the
 * operator named, and the fields every command reports about a lock. */
#include <stdio.h>
#include <string.h>

#include "tool/common/keys.h"

int lb__cli_codecs_read(lb__cli_codecs *out, const lb__cli_args *a,
                        const lb__cli_optdef *opts) {
    const char *specs[LB__CLI_MAX_CODECS + 1];
    char shown[160];
    memset(out, 0, sizeof *out);
    int n = lb__cli_opt_all(a, opts, "--codec", specs, LB__CLI_MAX_CODECS + 1);
    if (n > LB__CLI_MAX_CODECS)
        return lb__cli_usage(a, "--codec given more than %d times", LB__CLI_MAX_CODECS), -1;
    if (n == 0) specs[n++] = "ms";
    for (int i = 0; i < n; i++) {
        if (lb_codec_parse(&out->codec[i], specs[i]) != LB_OK ||
            lb_codec_format(&out->codec[i], out->spec[i], sizeof out->spec[i]) != LB_OK) {
            lb__escape(shown, sizeof shown, specs[i], strlen(specs[i]));
            return lb__cli_usage(a, "unknown --codec \"%s\" (ms, s, float, json or "
                                 "json:field=NAME,unit=ns|us|ms|s,clock=epoch|mono)", shown), -1;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(out->spec[i], out->spec[j]) == 0)
                return lb__cli_usage(a, "--codec %s given twice", out->spec[i]), -1;
    }
    out->n = n;
    return 0;
}

int lb__cli_classify(const lb__cli_codecs *cs, const lb__cli_key *k, const lb_now *now,
                     lb_class *out) {
    int rc = lb_classify(out, k->value, k->valuelen, k->pttl_ms, k->type, cs->codec, cs->n,
                         now);
    if (rc != LB_OK) return rc;
    /* Only a prefix was read: a value longer than that is no timestamp, and is
     * judged by its length (a token locker's long value keeps its TTL). */
    if (k->value && k->len > (int64_t)k->valuelen && out->format != LB_FORMAT_TOKEN)
        out->format = LB_FORMAT_UNKNOWN;
    if (k->len >= 0) out->len = (size_t)k->len;
    return LB_OK;
}

/* Microseconds in one unit of the codec's instants; 0 for nanoseconds. */
static int64_t unit_us(const lb_codec *c) {
    lb_unit u = c->kind == LB_CODEC_MS              ? LB_UNIT_MS
                : c->kind == LB_CODEC_SECONDS       ? LB_UNIT_S
                : c->kind == LB_CODEC_FLOAT_SECONDS ? LB_UNIT_US
                                                    : c->unit;
    return u == LB_UNIT_S ? 1000000 : u == LB_UNIT_MS ? 1000 : u == LB_UNIT_US ? 1 : 0;
}

int lb__cli_expiry_epoch_ms(const lb_codec *c, int64_t t, int64_t *ms) {
    *ms = 0;
    if (c->kind == LB_CODEC_JSON && c->clock == LB_CLOCK_MONOTONIC) return -1;
    int64_t us = unit_us(c);
    if (us == 0) *ms = t / 1000000 + (t % 1000000 > 0); /* nanoseconds, rounded up */
    else if (us >= 1000) {
        if (t > INT64_MAX / (us / 1000)) return -1;
        *ms = t * (us / 1000);
    } else *ms = t / 1000 + (t % 1000 > 0);
    return 0;
}

int lb__cli_is_mono(const lb__cli_codecs *cs, const lb_class *cl) {
    if (cl->codec < 0 || cl->codec >= cs->n) return 0;
    const lb_codec *c = &cs->codec[cl->codec];
    return c->kind == LB_CODEC_JSON && c->clock == LB_CLOCK_MONOTONIC;
}

/* A fencing counter holds a decimal integer (INCR's reply written back). */
static int is_counter(const lb__cli_key *k) {
    if (!k->value || k->valuelen == 0 || k->len != (int64_t)k->valuelen || k->valuelen > 19)
        return 0;
    for (size_t i = 0; i < k->valuelen; i++)
        if (k->value[i] < '0' || k->value[i] > '9') return 0;
    return 1;
}

/* The library's naming rule decides the name; the Redis type (and, for the
 * fence, an integer value) decides that the key is what lockbridge keeps under
 * that name, so that a lock key that happens to be spelled like a companion
 * ("{user}:queue" holding a timestamp) is still judged as a lock. */
int lb__cli_is_companion(const lb__cli_key *k) {
    const char *type;
    lb_companion kind = lb_companion_of(k->key, k->keylen, &type);
    if (kind == LB_COMPANION_NONE || strcmp(k->type, type) != 0) return 0;
    return kind != LB_COMPANION_FENCE || is_counter(k);
}

int64_t lb__cli_holder_age_ms(const lb_class *cl, int64_t ttl_ms) {
    if (ttl_ms <= 0) return -1;
    if ((cl->format == LB_FORMAT_LEGACY || cl->format == LB_FORMAT_COMPAT) && !cl->expired &&
        cl->remaining_ms <= ttl_ms)
        return ttl_ms - cl->remaining_ms;
    if (cl->format == LB_FORMAT_TOKEN && cl->pttl_ms >= 0 && cl->pttl_ms <= ttl_ms)
        return ttl_ms - cl->pttl_ms;
    return -1;
}

/* The spec of the codec that reads an implausible value plausibly, or NULL. */
static const char *suggestion(const lb_class *cl, char *buf, size_t cap) {
    if (!cl->suggested || lb_codec_format(&cl->suggestion, buf, cap) != LB_OK) return NULL;
    return buf;
}

void lb__cli_ambiguity_detail(const lb__cli_codecs *cs, const lb_class *cl, char *buf,
                              size_t cap) {
    char spec[128];
    const char *plausible = suggestion(cl, spec, sizeof spec);
    if (cap > 0) buf[0] = '\0';
    if (cl->format != LB_FORMAT_AMBIGUOUS || cl->codec < 0 || cl->codec >= cs->n) return;
    if (cl->ambiguity == LB_AMBIGUITY_DISAGREE && cl->codec2 >= 0 && cl->codec2 < cs->n)
        snprintf(buf, cap, "%s and %s disagree", cs->spec[cl->codec], cs->spec[cl->codec2]);
    else
        snprintf(buf, cap, "implausible as %s; %s", cs->spec[cl->codec],
                 plausible ? plausible : "no codec reads it");
}

/* Why a value is ambiguous, and what each codec makes of it. */
static void add_ambiguity(cJSON *o, const lb__cli_codecs *cs, const lb_class *cl) {
    char spec[128];
    int64_t at;
    const char *plausible = suggestion(cl, spec, sizeof spec);
    lb__cli_add_str(o, "ambiguity", lb_ambiguity_name(cl->ambiguity));
    if (cl->codec < 0 || cl->codec >= cs->n) return;
    lb__cli_add_str(o, "codec", cs->spec[cl->codec]);
    lb__cli_add_i64(o, "read_as", cl->expiry);
    if (lb__cli_expiry_epoch_ms(&cs->codec[cl->codec], cl->expiry, &at) == 0)
        lb__cli_add_i64(o, "read_as_epoch_ms", at);
    if (cl->ambiguity == LB_AMBIGUITY_DISAGREE && cl->codec2 >= 0 && cl->codec2 < cs->n) {
        lb__cli_add_str(o, "codec2", cs->spec[cl->codec2]);
        lb__cli_add_i64(o, "read_as2", cl->expiry2);
        return;
    }
    if (plausible) lb__cli_add_str(o, "plausible_codec", plausible);
    else cJSON_AddNullToObject(o, "plausible_codec");
}

void lb__cli_add_class(cJSON *o, const lb__cli_codecs *cs, const lb_class *cl,
                       int64_t ttl_ms) {
    lb__cli_add_str(o, "format", lb_format_name(cl->format));
    if (cl->format == LB_FORMAT_LEGACY || cl->format == LB_FORMAT_COMPAT) {
        lb__cli_add_str(o, "codec", cs->spec[cl->codec]);
        lb__cli_add_i64(o, "expiry", cl->expiry);
        lb__cli_add_bool(o, "expired", cl->expired);
        lb__cli_add_i64(o, "remaining_ms", cl->remaining_ms);
        if (lb__cli_is_mono(cs, cl)) lb__cli_add_str(o, "clock", "mono: judged on this host");
    }
    if (cl->format == LB_FORMAT_AMBIGUOUS) add_ambiguity(o, cs, cl);
    if (cl->format == LB_FORMAT_TOKEN) lb__cli_add_str(o, "token", lb_token_kind_name(cl->token));
    if (cl->format == LB_FORMAT_INCR) lb__cli_add_i64(o, "counter", cl->counter);
    if (cl->pttl_ms >= 0) lb__cli_add_i64(o, "pttl_ms", cl->pttl_ms);
    else if (cl->format != LB_FORMAT_ABSENT) cJSON_AddNullToObject(o, "pttl_ms");
    int64_t age = lb__cli_holder_age_ms(cl, ttl_ms);
    if (age >= 0) lb__cli_add_i64(o, "holder_age_ms", age);
}

int lb__cli_codecs_parse_list(lb__cli_codecs *out, const char *list) {
    char spec[128];
    memset(out, 0, sizeof *out);
    for (const char *p = list; *p;) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        if (n == 0) break;
        if (n >= sizeof spec || out->n >= LB__CLI_MAX_CODECS) return -1;
        memcpy(spec, p, n);
        spec[n] = '\0';
        if (lb_codec_parse(&out->codec[out->n], spec) != LB_OK ||
            lb_codec_format(&out->codec[out->n], out->spec[out->n], sizeof out->spec[0]) != LB_OK)
            return -1;
        out->n++;
        p += n;
    }
    return out->n > 0 ? 0 : -1;
}

int lb__cli_codecs_join(const lb__cli_codecs *cs, char *out, size_t cap) {
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < cs->n; i++) {
        int n = snprintf(out + o, cap - o, "%s%s", i ? " " : "", cs->spec[i]);
        if (n < 0 || (size_t)n >= cap - o) return -1;
        o += (size_t)n;
    }
    return 0;
}
