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

static int judge_hset(lb__call *c, const redisReply *r, const lb_now *now) {
    (void)now;
    if (r->type != REDIS_REPLY_INTEGER) return lb__fail(&c->m, LB_EPROTO, "HSET: unexpected reply");
    return LB_OK;
}

int lb_census_register(lb_target t, const char *ns, size_t nslen, const lb_census_entry *e,
                       const lb_now *now) {
    lb_ns_keys k;
    lb_census_entry copy;
    char json[LB__CENSUS_JSON_MAX];
    size_t len;
    if (!t.handle || !e || !now || lb_ns_keys_init(&k, ns, nslen) != LB_OK) return LB_EINVAL;
    copy = *e;
    copy.seen_ms = now->wall_us / 1000;
    int rc = lb__census_encode(&copy, json, sizeof json, &len);
    if (rc != LB_OK) return rc;
    const char *argv[4] = {"HSET", k.census, copy.id, json};
    size_t lens[4] = {4, k.censuslen, strlen(copy.id), len};
    lb__call c = {.argc = 4, .argv = argv, .lens = lens, .what = "HSET", .judge = judge_hset};
    return lb__call_run(t, &c, NULL);
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

static int check_pairs(const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) return LB_EPROTO;
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING) return LB_EPROTO;
    return LB_OK;
}

/* What HGETALL of the census is read into: every entry judged against `now`
 * (the caller's instant), and for a prune the raw field and value of each
 * stale one, since its removal must name exactly what was judged. */
typedef struct census_read {
    const lb_now *now;
    int64_t stale_ms;
    const lb_allocator *a;
    lb_census_entry *es;
    size_t n;
    int keep_raw;   /* a prune: copy the stale entries' field and value */
    char **raw;     /* per entry: field then value, each NUL-terminated, or NULL */
    size_t *rawlen; /* per entry: field length, value length */
} census_read;

static char *raw_pair(const lb_allocator *a, const redisReply *f, const redisReply *v) {
    char *p = lb__alloc(a, (size_t)f->len + (size_t)v->len + 2);
    if (!p) return NULL;
    memcpy(p, f->str, (size_t)f->len);
    p[f->len] = '\0';
    memcpy(p + f->len + 1, v->str, (size_t)v->len);
    p[f->len + 1 + v->len] = '\0';
    return p;
}

static void census_read_clear(census_read *d) {
    for (size_t i = 0; d->raw && i < d->n; i++) lb__free(d->a, d->raw[i]);
    lb__free(d->a, d->raw);
    lb__free(d->a, d->rawlen);
    lb__free(d->a, d->es);
    d->raw = NULL, d->rawlen = NULL, d->es = NULL, d->n = 0;
}

static int keep_raw(census_read *d, const redisReply *r) {
    if (!(d->raw = lb__alloc(d->a, d->n * sizeof *d->raw))) return LB_ENOMEM;
    memset(d->raw, 0, d->n * sizeof *d->raw);
    if (!(d->rawlen = lb__alloc(d->a, 2 * d->n * sizeof *d->rawlen))) return LB_ENOMEM;
    for (size_t i = 0; i < d->n; i++) {
        const redisReply *f = r->element[2 * i], *v = r->element[2 * i + 1];
        if (!d->es[i].valid || !d->es[i].stale) continue;
        if (!(d->raw[i] = raw_pair(d->a, f, v))) return LB_ENOMEM;
        d->rawlen[2 * i] = (size_t)f->len;
        d->rawlen[2 * i + 1] = (size_t)v->len;
    }
    return LB_OK;
}

static int judge_hgetall(lb__call *c, const redisReply *r, const lb_now *now) {
    census_read *d = c->ud;
    (void)now;
    if (check_pairs(r) != LB_OK) return lb__fail(&c->m, LB_EPROTO, "HGETALL: unexpected reply");
    if (r->elements == 0) return LB_OK;
    size_t count = r->elements / 2;
    d->es = lb__alloc(d->a, count * sizeof *d->es);
    if (!d->es) return LB_ENOMEM;
    d->n = count;
    for (size_t i = 0; i < count; i++)
        list_one(&d->es[i], r->element[2 * i], r->element[2 * i + 1], d->now, d->stale_ms);
    return d->keep_raw ? keep_raw(d, r) : LB_OK;
}

static int census_read_run(lb_target t, const lb_ns_keys *k, census_read *d) {
    const char *argv[2] = {"HGETALL", k->census};
    size_t lens[2] = {7, k->censuslen};
    lb__call c = {.argc = 2, .argv = argv, .lens = lens, .what = "HGETALL",
                  .judge = judge_hgetall, .ud = d};
    int rc = lb__call_run(t, &c, NULL);
    if (rc != LB_OK) census_read_clear(d);
    return rc;
}

int lb_census_list(lb_target t, const char *ns, size_t nslen, const lb_now *now,
                   int64_t stale_ms, const lb_allocator *a, lb_census_entry **out, size_t *n) {
    lb_ns_keys k;
    if (out) *out = NULL;
    if (n) *n = 0;
    if (!t.handle || !now || !out || !n || stale_ms < 0 ||
        lb_ns_keys_init(&k, ns, nslen) != LB_OK)
        return LB_EINVAL;
    census_read d = {.now = now, .stale_ms = stale_ms, .a = a};
    int rc = census_read_run(t, &k, &d);
    if (rc == LB_OK) *out = d.es, *n = d.n;
    return rc;
}

void lb_census_free(const lb_allocator *a, lb_census_entry *entries) { lb__free(a, entries); }

static int judge_prune(lb__call *c, const redisReply *r, const lb_now *now) {
    size_t *pruned = c->ud;
    (void)now;
    if (r->type != REDIS_REPLY_INTEGER)
        return lb__fail(&c->m, LB_EPROTO, "census prune: unexpected reply");
    if (r->integer == 1 && pruned) (*pruned)++;
    return LB_OK;
}

/* Removes entry i if it still holds the value judged stale; a legacy entry's
 * seen_ms goes to the gate record. */
static int prune_one(lb_target t, const lb_ns_keys *k, const census_read *d, size_t i,
                     size_t *pruned) {
    char seen[24] = "";
    const lb_census_entry *e = &d->es[i];
    const char *f = d->raw[i], *v = d->raw[i] + d->rawlen[2 * i] + 1;
    if (e->mode == LB_MODE_LEGACY) snprintf(seen, sizeof seen, "%lld", (long long)e->seen_ms);
    const char *argv[6] = {"2", k->census, k->gate, f, v, seen};
    size_t lens[6] = {1, k->censuslen, k->gatelen, d->rawlen[2 * i], d->rawlen[2 * i + 1],
                      strlen(seen)};
    lb__call c = {.script = &lb__script_census_prune, .argc = 6, .argv = argv, .lens = lens,
                  .what = "census prune", .judge = judge_prune, .ud = pruned};
    return lb__call_run(t, &c, NULL);
}

int lb_census_prune(lb_target t, const char *ns, size_t nslen, const lb_now *now,
                    int64_t stale_ms, size_t *pruned) {
    lb_ns_keys k;
    size_t count = 0;
    if (pruned) *pruned = 0;
    if (!t.handle || !now || stale_ms < 0 || lb_ns_keys_init(&k, ns, nslen) != LB_OK)
        return LB_EINVAL;
    census_read d = {.now = now, .stale_ms = stale_ms, .keep_raw = 1};
    int rc = census_read_run(t, &k, &d);
    for (size_t i = 0; rc == LB_OK && i < d.n; i++)
        if (d.raw[i]) rc = prune_one(t, &k, &d, i, &count);
    census_read_clear(&d);
    if (pruned) *pruned = count;
    return rc;
}
