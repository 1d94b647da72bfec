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

/* GET of the control key: a mode name, nil when absent, anything else a
 * value left alone. */
typedef struct mode_read {
    lb_mode *out;
    int *found;
} mode_read;

static int judge_get(lb__call *c, const redisReply *r, const lb_now *now) {
    const mode_read *d = c->ud;
    (void)now;
    if (r->type == REDIS_REPLY_NIL) return LB_OK;
    if (r->type != REDIS_REPLY_STRING) return lb__fail(&c->m, LB_EPROTO, "GET: unexpected reply");
    if (lb_mode_parse(r->str, (size_t)r->len, d->out) != LB_OK)
        return lb__fail(&c->m, LB_EFOREIGN, "the control key holds no mode name");
    *d->found = 1;
    return LB_OK;
}

int lb_mode_get(lb_target t, const char *ns, size_t nslen, lb_mode *out, int *found) {
    lb_ns_keys k;
    if (out) *out = LB_MODE_LEGACY;
    if (found) *found = 0;
    if (!t.handle || !out || !found || lb_ns_keys_init(&k, ns, nslen) != LB_OK) return LB_EINVAL;
    mode_read d = {out, found};
    const char *argv[2] = {"GET", k.mode};
    size_t lens[2] = {3, k.modelen};
    lb__call c = {.argc = 2, .argv = argv, .lens = lens, .what = "GET", .judge = judge_get,
                  .ud = &d};
    int rc = lb__call_run(t, &c, NULL);
    if (rc != LB_OK) *out = LB_MODE_LEGACY, *found = 0;
    return rc;
}

/* The mode_set script's answer: the PUBLISH count, -1 the expected stage no
 * longer holds, -2 a key of another type. */
static int judge_set(lb__call *c, const redisReply *r, const lb_now *now) {
    long long *receivers = c->ud;
    (void)now;
    if (r->type != REDIS_REPLY_INTEGER)
        return lb__fail(&c->m, LB_EPROTO, "mode set: unexpected reply");
    if (r->integer == -1) return lb__fail(&c->m, LB_ESTATE, "the mode is not the one expected");
    if (r->integer == -2) return lb__fail(&c->m, LB_EWRONGTYPE, "a namespace key of another type");
    if (r->integer < 0) return lb__fail(&c->m, LB_EPROTO, "mode set: unexpected reply");
    if (receivers) *receivers = r->integer;
    return LB_OK;
}

/* since: "" no stage check; else the expected since_ms ("-" none recorded);
 * absent: the control key must still be absent. */
static int mode_write(lb_target t, const char *ns, size_t nslen, lb_mode mode,
                      const lb_mode *expect, const char *since, int absent,
                      long long *receivers) {
    lb_ns_keys k;
    if (receivers) *receivers = 0;
    if (!t.handle || (int)mode < 0 || mode > LB_MODE_MODERN ||
        lb_ns_keys_init(&k, ns, nslen) != LB_OK)
        return LB_EINVAL;
    if (expect && ((int)*expect < 0 || *expect > LB_MODE_MODERN)) return LB_EINVAL;
    const char *name = lb_mode_name(mode), *want = expect ? lb_mode_name(*expect) : "";
    const char *key = absent ? "absent" : "";
    const char *argv[8] = {"2", k.mode, k.gate, name, want, k.channel, since, key};
    size_t lens[8] = {1, k.modelen, k.gatelen, strlen(name), strlen(want), k.channellen,
                      strlen(since), strlen(key)};
    lb__call c = {.script = &lb__script_mode_set, .argc = 8, .argv = argv, .lens = lens,
                  .what = "mode set", .judge = judge_set, .ud = receivers};
    return lb__call_run(t, &c, NULL);
}

int lb_mode_set(lb_target t, const char *ns, size_t nslen, lb_mode mode, const lb_mode *expect,
                long long *receivers) {
    return mode_write(t, ns, nslen, mode, expect, "", 0, receivers);
}

int lb__mode_set_stage(lb_target t, const char *ns, size_t nslen, lb_mode mode,
                       const lb_mode *expect, int64_t since_ms, long long *receivers) {
    char since[24] = "-";
    if (since_ms >= 0) snprintf(since, sizeof since, "%lld", (long long)since_ms);
    return mode_write(t, ns, nslen, mode, expect, since, expect == NULL, receivers);
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
