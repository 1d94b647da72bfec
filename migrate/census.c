/* The rollout census: each client's entry (id, mode, version, host, pid,
 * last seen) as JSON in the namespace's hash; listing with ages, and pruning
 * of stale entries that nobody refreshed meanwhile. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "migrate/internal.h"

/* Appends `s` as a JSON string: quotes, backslashes and control bytes are
 * escaped, every other byte is copied, so an entry read back is byte for byte
 * the one written (UTF-8 names stay UTF-8). */
static int put_str(char *buf, size_t cap, size_t *o, const char *s) {
    static const char hex[] = "0123456789abcdef";
    if (*o + 1 >= cap) return -1;
    buf[(*o)++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*o + 7 >= cap) return -1;
        if (*p == '"' || *p == '\\') {
            buf[(*o)++] = '\\';
            buf[(*o)++] = (char)*p;
        } else if (*p < 0x20) {
            memcpy(buf + *o, "\\u00", 4);
            buf[*o + 4] = hex[*p >> 4];
            buf[*o + 5] = hex[*p & 15];
            *o += 6;
        } else {
            buf[(*o)++] = (char)*p;
        }
    }
    if (*o + 1 >= cap) return -1;
    buf[(*o)++] = '"';
    return 0;
}

static int put_raw(char *buf, size_t cap, size_t *o, const char *s) {
    size_t n = strlen(s);
    if (*o + n >= cap) return -1;
    memcpy(buf + *o, s, n);
    *o += n;
    return 0;
}

int lb__census_encode(const lb_census_entry *e, char *buf, size_t cap, size_t *len) {
    char nums[80];
    size_t o = 0;
    if (len) *len = 0;
    if (!buf || cap == 0) return LB_EINVAL;
    buf[0] = '\0';
    if (!e || !len || (int)e->mode < 0 || e->mode > LB_MODE_MODERN) return LB_EINVAL;
    if (!memchr(e->id, '\0', sizeof e->id) || !memchr(e->host, '\0', sizeof e->host) ||
        !memchr(e->version, '\0', sizeof e->version) || e->id[0] == '\0')
        return LB_EINVAL;
    snprintf(nums, sizeof nums, ",\"pid\":%lld,\"seen_ms\":%lld}", (long long)e->pid,
             (long long)e->seen_ms);
    if (put_raw(buf, cap, &o, "{\"id\":") || put_str(buf, cap, &o, e->id) ||
        put_raw(buf, cap, &o, ",\"mode\":") || put_str(buf, cap, &o, lb_mode_name(e->mode)) ||
        put_raw(buf, cap, &o, ",\"version\":") || put_str(buf, cap, &o, e->version) ||
        put_raw(buf, cap, &o, ",\"host\":") || put_str(buf, cap, &o, e->host) ||
        put_raw(buf, cap, &o, nums)) {
        buf[0] = '\0';
        return LB_EINVAL;
    }
    buf[o] = '\0';
    *len = o;
    return LB_OK;
}

static int get_str(const cJSON *o, const char *name, char *out, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap) return -1;
    strcpy(out, v->valuestring);
    return 0;
}

/* A JSON number that is an exact integer within +-2^53 (what a double holds). */
static int get_int(const cJSON *o, const char *name, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0) || d != (double)(int64_t)d)
        return -1;
    *out = (int64_t)d;
    return 0;
}

int lb__census_decode(const char *s, size_t len, lb_census_entry *e) {
    char mode[16];
    if (!e) return LB_EINVAL;
    memset(e, 0, sizeof *e);
    if (!s) return LB_EINVAL;
    if (len > LB__CENSUS_JSON_MAX) return LB_EFOREIGN;
    cJSON *o = cJSON_ParseWithLength(s, len);
    int ok = cJSON_IsObject(o) && get_str(o, "id", e->id, sizeof e->id) == 0 &&
             get_str(o, "mode", mode, sizeof mode) == 0 &&
             lb_mode_parse(mode, strlen(mode), &e->mode) == LB_OK &&
             get_str(o, "version", e->version, sizeof e->version) == 0 &&
             get_str(o, "host", e->host, sizeof e->host) == 0 &&
             get_int(o, "pid", &e->pid) == 0 && get_int(o, "seen_ms", &e->seen_ms) == 0 &&
             e->id[0] != '\0';
    cJSON_Delete(o);
    if (!ok) {
        memset(e, 0, sizeof *e);
        return LB_EFOREIGN;
    }
    e->valid = 1;
    return LB_OK;
}

static int status_of(const redisReply *r) {
    if (!r) return LB_EIO;
    if (r->type == REDIS_REPLY_ERROR)
        return (r->str && strstr(r->str, "WRONGTYPE")) ? LB_EWRONGTYPE : LB_EREDIS;
    return LB_OK;
}

int lb_census_register(redisContext *c, const char *ns, size_t nslen, const lb_census_entry *e,
                       const lb_now *now) {
    lb_ns_keys k;
    lb_census_entry copy;
    char json[LB__CENSUS_JSON_MAX];
    size_t len;
    if (!c || !e || !now || lb_ns_keys_init(&k, ns, nslen) != LB_OK) return LB_EINVAL;
    copy = *e;
    copy.seen_ms = now->wall_us / 1000;
    int rc = lb__census_encode(&copy, json, sizeof json, &len);
    if (rc != LB_OK) return rc;
    const char *argv[4] = {"HSET", k.census, copy.id, json};
    size_t lens[4] = {4, k.censuslen, strlen(copy.id), len};
    redisReply *r = redisCommandArgv(c, 4, argv, lens);
    rc = status_of(r);
    if (rc == LB_OK && r->type != REDIS_REPLY_INTEGER) rc = LB_EPROTO;
    if (r) freeReplyObject(r);
    return rc;
}

/* Fills one listed entry from a hash field and its value. */
static void list_one(lb_census_entry *e, const redisReply *f, const redisReply *v,
                     const lb_now *now, int64_t stale_ms) {
    if (lb__census_decode(v->str, (size_t)v->len, e) != LB_OK ||
        (size_t)f->len != strlen(e->id) || memcmp(f->str, e->id, (size_t)f->len) != 0) {
        memset(e, 0, sizeof *e);
        lb__escape(e->id, sizeof e->id, f->str, (size_t)f->len);
        return;
    }
    int64_t nowms = now->wall_us / 1000;
    if (lb__sub64(nowms, e->seen_ms, &e->age_ms)) e->age_ms = INT64_MAX;
    e->stale = e->age_ms > stale_ms;
}

static redisReply *hgetall(redisContext *c, const lb_ns_keys *k) {
    const char *argv[2] = {"HGETALL", k->census};
    size_t lens[2] = {7, k->censuslen};
    return redisCommandArgv(c, 2, argv, lens);
}

static int check_pairs(const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) return LB_EPROTO;
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING) return LB_EPROTO;
    return LB_OK;
}

int lb_census_list(redisContext *c, const char *ns, size_t nslen, const lb_now *now,
                   int64_t stale_ms, const lb_allocator *a, lb_census_entry **out, size_t *n) {
    lb_ns_keys k;
    if (out) *out = NULL;
    if (n) *n = 0;
    if (!c || !now || !out || !n || stale_ms < 0 || lb_ns_keys_init(&k, ns, nslen) != LB_OK)
        return LB_EINVAL;
    redisReply *r = hgetall(c, &k);
    int rc = status_of(r);
    if (rc == LB_OK) rc = check_pairs(r);
    if (rc == LB_OK && r->elements > 0) {
        size_t count = r->elements / 2;
        lb_census_entry *es = lb__alloc(a, count * sizeof *es);
        if (!es) rc = LB_ENOMEM;
        for (size_t i = 0; es && i < count; i++)
            list_one(&es[i], r->element[2 * i], r->element[2 * i + 1], now, stale_ms);
        if (es) {
            *out = es;
            *n = count;
        }
    }
    if (r) freeReplyObject(r);
    return rc;
}

void lb_census_free(const lb_allocator *a, lb_census_entry *entries) { lb__free(a, entries); }

int lb_census_prune(redisContext *c, const char *ns, size_t nslen, const lb_now *now,
                    int64_t stale_ms, size_t *pruned) {
    lb_ns_keys k;
    lb_census_entry e;
    if (pruned) *pruned = 0;
    if (!c || !now || stale_ms < 0 || lb_ns_keys_init(&k, ns, nslen) != LB_OK) return LB_EINVAL;
    redisReply *r = hgetall(c, &k);
    int rc = status_of(r);
    if (rc == LB_OK) rc = check_pairs(r);
    for (size_t i = 0; rc == LB_OK && i < r->elements; i += 2) {
        const redisReply *f = r->element[i], *v = r->element[i + 1];
        list_one(&e, f, v, now, stale_ms);
        if (!e.valid || !e.stale) continue;
        char seen[24] = "";
        if (e.mode == LB_MODE_LEGACY) snprintf(seen, sizeof seen, "%lld", (long long)e.seen_ms);
        const char *argv[6] = {"2", k.census, k.gate, f->str, v->str, seen};
        size_t lens[6] = {1, k.censuslen, k.gatelen, (size_t)f->len, (size_t)v->len,
                          strlen(seen)};
        redisReply *d = lb__eval(c, &lb__script_census_prune, 6, argv, lens);
        rc = status_of(d);
        if (rc == LB_OK && d->type != REDIS_REPLY_INTEGER) rc = LB_EPROTO;
        if (rc == LB_OK && d->integer == 1 && pruned) (*pruned)++;
        if (d) freeReplyObject(d);
    }
    if (r) freeReplyObject(r);
    return rc;
}
