/* Modes of a namespace: names, the namespace's key names, and reading and
 * setting the control key (a set is published on the namespace's channel). */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "migrate/internal.h"

static const char *const mode_names[] = {"legacy", "compat", "modern"};

const char *lb_mode_name(lb_mode m) {
    if ((int)m < 0 || (int)m > (int)LB_MODE_MODERN) return "unknown";
    return mode_names[m];
}

int lb_mode_parse(const char *s, size_t len, lb_mode *out) {
    if (!out) return LB_EINVAL;
    *out = LB_MODE_LEGACY;
    if (!s) return LB_EINVAL;
    for (int i = 0; i <= (int)LB_MODE_MODERN; i++) {
        if (len == strlen(mode_names[i]) && memcmp(s, mode_names[i], len) == 0) {
            *out = (lb_mode)i;
            return LB_OK;
        }
    }
    return LB_EINVAL;
}

int lb_ns_keys_init(lb_ns_keys *out, const char *ns, size_t nslen) {
    if (!out) return LB_EINVAL;
    memset(out, 0, sizeof *out);
    if (!ns || nslen == 0) return LB_EINVAL;
    int a = lb_companion_key(ns, nslen, "lb-mode", out->mode, sizeof out->mode);
    int b = lb_companion_key(ns, nslen, "lb-mode-ch", out->channel, sizeof out->channel);
    int c = lb_companion_key(ns, nslen, "lb-census", out->census, sizeof out->census);
    int d = lb_companion_key(ns, nslen, "lb-gate", out->gate, sizeof out->gate);
    if (a < 0 || b < 0 || c < 0 || d < 0) {
        memset(out, 0, sizeof *out);
        return LB_EINVAL;
    }
    out->modelen = (size_t)a;
    out->channellen = (size_t)b;
    out->censuslen = (size_t)c;
    out->gatelen = (size_t)d;
    return LB_OK;
}

static int reply_status(const redisContext *c, const redisReply *r) {
    if (!r) return LB_EIO;
    (void)c;
    if (r->type == REDIS_REPLY_ERROR)
        return (r->str && strstr(r->str, "WRONGTYPE")) ? LB_EWRONGTYPE : LB_EREDIS;
    return LB_OK;
}

int lb_mode_get(redisContext *c, const char *ns, size_t nslen, lb_mode *out, int *found) {
    lb_ns_keys k;
    if (out) *out = LB_MODE_LEGACY;
    if (found) *found = 0;
    if (!c || !out || !found || lb_ns_keys_init(&k, ns, nslen) != LB_OK) return LB_EINVAL;
    const char *argv[2] = {"GET", k.mode};
    size_t lens[2] = {3, k.modelen};
    redisReply *r = redisCommandArgv(c, 2, argv, lens);
    int rc = reply_status(c, r);
    if (rc == LB_OK && r->type == REDIS_REPLY_STRING) {
        rc = lb_mode_parse(r->str, (size_t)r->len, out) == LB_OK ? LB_OK : LB_EFOREIGN;
        *found = rc == LB_OK;
    } else if (rc == LB_OK && r->type != REDIS_REPLY_NIL) {
        rc = LB_EPROTO;
    }
    if (r) freeReplyObject(r);
    return rc;
}

/* since: "" no stage check; else the expected since_ms ("-" none recorded);
 * absent: the control key must still be absent. */
static int mode_write(redisContext *c, const char *ns, size_t nslen, lb_mode mode,
                      const lb_mode *expect, const char *since, int absent,
                      long long *receivers) {
    lb_ns_keys k;
    if (receivers) *receivers = 0;
    if (!c || (int)mode < 0 || mode > LB_MODE_MODERN || lb_ns_keys_init(&k, ns, nslen) != LB_OK)
        return LB_EINVAL;
    if (expect && ((int)*expect < 0 || *expect > LB_MODE_MODERN)) return LB_EINVAL;
    const char *name = lb_mode_name(mode), *want = expect ? lb_mode_name(*expect) : "";
    const char *key = absent ? "absent" : "";
    const char *argv[8] = {"2", k.mode, k.gate, name, want, k.channel, since, key};
    size_t lens[8] = {1, k.modelen, k.gatelen, strlen(name), strlen(want), k.channellen,
                      strlen(since), strlen(key)};
    redisReply *r = lb__eval(c, &lb__script_mode_set, 8, argv, lens);
    int rc = reply_status(c, r);
    if (rc == LB_OK) {
        if (r->type != REDIS_REPLY_INTEGER) rc = LB_EPROTO;
        else if (r->integer == -1) rc = LB_ESTATE;
        else if (r->integer == -2) rc = LB_EWRONGTYPE;
        else if (r->integer < 0) rc = LB_EPROTO;
        else if (receivers) *receivers = r->integer;
    }
    if (r) freeReplyObject(r);
    return rc;
}

int lb_mode_set(redisContext *c, const char *ns, size_t nslen, lb_mode mode,
                const lb_mode *expect, long long *receivers) {
    return mode_write(c, ns, nslen, mode, expect, "", 0, receivers);
}

int lb__mode_set_stage(redisContext *c, const char *ns, size_t nslen, lb_mode mode,
                       const lb_mode *expect, int64_t since_ms, long long *receivers) {
    char since[24] = "-";
    if (since_ms >= 0) snprintf(since, sizeof since, "%lld", (long long)since_ms);
    return mode_write(c, ns, nslen, mode, expect, since, expect == NULL, receivers);
}

int lb_mode_message(const redisReply *r, lb_mode *out) {
    if (!out) return LB_EINVAL;
    *out = LB_MODE_LEGACY;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3) return LB_EINVAL;
    const redisReply *kind = r->element[0], *payload = r->element[2];
    if (kind->type != REDIS_REPLY_STRING || kind->len != 7 || memcmp(kind->str, "message", 7))
        return LB_EINVAL;
    if (payload->type != REDIS_REPLY_STRING) return LB_EINVAL;
    return lb_mode_parse(payload->str, (size_t)payload->len, out);
}
