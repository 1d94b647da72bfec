/* Compat and modern operations as step machines: the cross-format acquire
 * (one script call per attempt; an expired TTL-less legacy lock is taken over
 * on the next call, only if still the value observed), and release and extend
 * of a value this handle wrote. */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "lockbridge/modern.h"
#include "migrate/internal.h"

enum { X_ACQUIRE = LB__STATE_X + 1, X_SCRIPT };

/* Attempts a takeover may add to one acquire: each follows a reply showing an
 * expired legacy value, so a key that keeps changing hands ends in busy. */
#define TAKEOVER_TRIES 2

static int64_t px_of(const lb_mlock *l, int64_t ttl_ms) {
    return l->op_mode == LB_MODE_COMPAT ? ttl_ms + l->opts.grace_ms : ttl_ms;
}

/* A compat value: the timestamp now + ttl + 1 unit in the legacy codec,
 * always later than any this handle wrote before, so no two of its values are
 * equal (see docs/migration.md on what makes a compat value unique). A modern
 * value: a fresh token for an acquire, ours again for an extend. */
static int make_pending(lb_mlock *l, const lb_now *now, int64_t ttl_ms, int fresh) {
    if (l->op_mode == LB_MODE_MODERN) {
        if (!fresh) {
            memcpy(l->pending, l->value, l->valuelen + 1);
            l->pendinglen = l->valuelen;
            return LB_OK;
        }
        char tok[LB__TOKEN_CAP];
        if (lb__token(tok) != LB_OK) return lb__fail(&l->m, LB_EIO, "the OS random source failed");
        memcpy(l->pending, tok, sizeof tok);
        l->pendinglen = LB_TOKEN_LEN;
        return LB_OK;
    }
    int64_t t;
    if (lb_codec_expiry(&l->opts.codec, now, ttl_ms, &t) != LB_OK ||
        !lb_codec_plausible(&l->opts.codec, t, now))
        return lb__fail(&l->m, LB_EINVAL, "cannot compute a plausible expiry for ttl %lld ms",
                        (long long)ttl_ms);
    if (t <= l->last_expiry) t = l->last_expiry + 1;
    if (lb_codec_encode(&l->opts.codec, t, l->pending, sizeof l->pending, &l->pendinglen) != LB_OK)
        return lb__fail(&l->m, LB_EINVAL, "cannot encode expiry %lld", (long long)t);
    l->pending_expiry = t;
    return LB_OK;
}

static void script(lb_mlock *l, const lb_script *s, int64_t px) {
    lb__cmd_script(&l->m, s, "1");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    snprintf(l->px_arg, sizeof l->px_arg, "%lld", (long long)px);
}

static int send_acquire(lb_mlock *l, const lb_now *now) {
    int rc = make_pending(l, now, l->opts.ttl_ms, 1);
    if (rc != LB_OK) return rc;
    l->sent_ns = now->mono_ns;
    script(l, &lb__script_migrate_acquire, px_of(l, l->opts.ttl_ms));
    lb__cmd_arg(&l->m.cmd, l->pending, l->pendinglen);
    lb__cmd_argz(&l->m.cmd, l->px_arg);
    lb__cmd_arg(&l->m.cmd, l->observed, l->observedlen);
    l->state = X_ACQUIRE;
    return LB_STEP_SEND;
}

static int acquired(lb_mlock *l) {
    memcpy(l->value, l->pending, l->pendinglen + 1);
    l->valuelen = l->pendinglen;
    l->held = 1;
    l->held_mode = l->op_mode;
    if (l->op_mode == LB_MODE_COMPAT) l->expiry = l->last_expiry = l->pending_expiry;
    /* Both the timestamp (now + ttl + 1 unit) and the TTL (ttl + grace, from
     * the server's receipt) outlast ttl from the moment we prepared the command. */
    l->deadline_ns = lb__lease_end_ns(l->sent_ns, l->opts.ttl_ms);
    l->observedlen = 0;
    return LB_OK;
}

/* What holds the key, from the script's {0, type, value, pttl, length}. */
static int classify_reply(lb_mlock *l, const redisReply *r, const lb_now *now) {
    if (r->elements != 5 ||
        (r->element[1]->type != REDIS_REPLY_STRING && r->element[1]->type != REDIS_REPLY_STATUS) ||
        r->element[3]->type != REDIS_REPLY_INTEGER || r->element[4]->type != REDIS_REPLY_INTEGER)
        return lb__fail(&l->m, LB_EPROTO, "acquire script: unexpected reply");
    const redisReply *t = r->element[1], *v = r->element[2];
    char type[32];
    if (v->type != REDIS_REPLY_STRING && v->type != REDIS_REPLY_NIL)
        return lb__fail(&l->m, LB_EPROTO, "acquire script: unexpected value");
    snprintf(type, sizeof type, "%.*s", (int)t->len, t->str);
    int isv = v->type == REDIS_REPLY_STRING;
    lb_classify(&l->seen, isv ? v->str : NULL, isv ? (size_t)v->len : 0, r->element[3]->integer,
                type, &l->opts.codec, 1, now);
    if (isv && r->element[4]->integer > (long long)v->len) {
        l->seen.len = (size_t)r->element[4]->integer;
        if (l->seen.format != LB_FORMAT_TOKEN) l->seen.format = LB_FORMAT_UNKNOWN;
    }
    return LB_OK;
}

static int64_t min_known(int64_t a, int64_t b) {
    if (a < 0) return b;
    if (b < 0) return a;
    return a < b ? a : b;
}

static int foreign(lb_mlock *l, const redisReply *v) {
    char esc[96], spec[128];
    size_t n = v->type == REDIS_REPLY_STRING ? (size_t)v->len : 0;
    lb__escape(esc, sizeof esc, n ? v->str : "", n < 48 ? n : 48);
    if (l->seen.format != LB_FORMAT_AMBIGUOUS)
        return lb__fail(&l->m, LB_EFOREIGN, "%s value left alone (%zu bytes: %s%s)",
                        lb_format_name(l->seen.format), l->seen.len, esc, n > 48 ? "..." : "");
    if (!l->seen.suggested || lb_codec_format(&l->seen.suggestion, spec, sizeof spec) != LB_OK)
        snprintf(spec, sizeof spec, "no codec");
    return lb__fail(&l->m, LB_EFOREIGN, "value outside the plausible window left alone "
                    "(%zu bytes: %s%s; %s reads it plausibly)", l->seen.len, esc,
                    n > 48 ? "..." : "", spec);
}

static int on_busy(lb_mlock *l, const redisReply *r, const lb_now *now) {
    int rc = classify_reply(l, r, now);
    if (rc != LB_OK) return rc;
    const lb_class *s = &l->seen;
    int64_t pttl = s->pttl_ms >= 0 ? s->pttl_ms : -1;
    switch (s->format) {
    case LB_FORMAT_LEGACY:
        if (s->expired && l->takeovers_left-- > 0) {
            /* Take it over on the next call, only if it is still this value. */
            memcpy(l->observed, r->element[2]->str, s->len);
            l->observedlen = s->len;
            return send_acquire(l, now);
        }
        l->holder_ms = s->expired ? 0 : s->remaining_ms;
        return lb__fail(&l->m, LB_EBUSY, "legacy lock %s", s->expired ? "kept changing"
                                                                       : "held");
    case LB_FORMAT_COMPAT:
        l->holder_ms = s->expired ? pttl : min_known(s->remaining_ms, pttl);
        return lb__fail(&l->m, LB_EBUSY, "compat lock held for %lld ms more",
                        (long long)l->holder_ms);
    case LB_FORMAT_TOKEN:
        l->holder_ms = pttl;
        return lb__fail(&l->m, LB_EBUSY, "%s token held for %lld ms more",
                        lb_token_kind_name(s->token), (long long)pttl);
    case LB_FORMAT_ABSENT:
        l->holder_ms = 0;
        return lb__fail(&l->m, LB_EBUSY, "the key changed hands");
    case LB_FORMAT_WRONGTYPE:
        return lb__fail(&l->m, LB_EWRONGTYPE, "the key is not a string; left alone");
    case LB_FORMAT_AMBIGUOUS:
        /* It decodes, to an instant outside the plausibility window: another
         * codec's timestamp, maybe live. Never judged expired, never taken. */
        l->holder_ms = pttl;
        return foreign(l, r->element[2]);
    default:
        l->holder_ms = pttl;
        return foreign(l, r->element[2]);
    }
}

static int on_acquire(lb_mlock *l, const redisReply *r, const lb_now *now) {
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "acquire script");
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER)
        return lb__fail(&l->m, LB_EPROTO, "acquire script: unexpected reply");
    long long v = r->element[0]->integer;
    if ((v == 1 || v == 2) && r->elements == 1) return acquired(l);
    if (v == 0) return on_busy(l, r, now);
    return lb__fail(&l->m, LB_EPROTO, "acquire script: unexpected status %lld", v);
}

static int expired_by_us(const lb_mlock *l, const lb_now *now) {
    return l->held_mode == LB_MODE_COMPAT && lb_codec_now(&l->opts.codec, now) > l->expiry;
}

/* A compat lock this close to its timestamp may be judged expired by a legacy
 * contender whose clock runs a little ahead; its GETSET would overwrite an
 * extended value, so a compat extend is refused within release_margin_ms. */
static int within_margin(const lb_mlock *l, const lb_now *now) {
    int64_t margin, limit;
    if (l->held_mode != LB_MODE_COMPAT) return 0;
    return lb_codec_ms_to_units(&l->opts.codec, l->opts.release_margin_ms, &margin) != LB_OK ||
           lb__add64(lb_codec_now(&l->opts.codec, now), margin, &limit) || limit >= l->expiry;
}

/* A compat value that has expired by our clock may have been taken over by a
 * legacy client whose value happens to be byte-equal to ours; it is left to
 * its TTL rather than risk deleting or rewriting that holder's lock. */
static int refuse_expired(lb_mlock *l, const char *what) {
    l->held = 0;
    return lb__fail(&l->m, LB_EEXPIRED, "expired by our clock; not %s, on purpose: left to its TTL",
                    what);
}

static int release_start(lb_mlock *l, const lb_now *now) {
    if (expired_by_us(l, now)) return refuse_expired(l, "released");
    script(l, &lb__script_migrate_release, 0);
    lb__cmd_arg(&l->m.cmd, l->value, l->valuelen);
    lb__cmd_arg(&l->m.cmd, l->channel, l->channellen);
    l->state = X_SCRIPT;
    return LB_STEP_SEND;
}

static int extend_start(lb_mlock *l, const lb_now *now) {
    if (l->extend_ttl_ms <= 0 || l->extend_ttl_ms > INT64_C(1000000000000))
        return lb__fail(&l->m, LB_EINVAL, "extend ttl out of range (%lld ms)",
                        (long long)l->extend_ttl_ms);
    if (expired_by_us(l, now)) return refuse_expired(l, "extended");
    if (within_margin(l, now)) {
        l->held = 0;
        return lb__fail(&l->m, LB_EEXPIRED, "within the release margin of expiry by our "
                        "clock; not extended, on purpose: left to its TTL");
    }
    int rc = make_pending(l, now, l->extend_ttl_ms, 0);
    if (rc != LB_OK) return rc;
    l->sent_ns = now->mono_ns;
    script(l, &lb__script_migrate_extend, px_of(l, l->extend_ttl_ms));
    lb__cmd_arg(&l->m.cmd, l->value, l->valuelen);
    lb__cmd_arg(&l->m.cmd, l->pending, l->pendinglen);
    lb__cmd_argz(&l->m.cmd, l->px_arg);
    l->state = X_SCRIPT;
    return LB_STEP_SEND;
}

static int on_script(lb_mlock *l, const redisReply *r) {
    const char *what = l->op == LB__OP_RELEASE ? "release script" : "extend script";
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, what);
    if (r->type != REDIS_REPLY_INTEGER) return lb__fail(&l->m, LB_EPROTO, "%s: unexpected reply", what);
    if (r->integer == 1 && l->op == LB__OP_RELEASE) {
        l->held = 0;
        return LB_OK;
    }
    if (r->integer == 1) {
        memcpy(l->value, l->pending, l->pendinglen + 1);
        l->valuelen = l->pendinglen;
        if (l->held_mode == LB_MODE_COMPAT) l->expiry = l->last_expiry = l->pending_expiry;
        l->deadline_ns = lb__lease_end_ns(l->sent_ns, l->extend_ttl_ms);
        return LB_OK;
    }
    l->held = 0;
    if (r->integer == 0) return lb__fail(&l->m, LB_ELOST, "the key was gone; nothing done");
    return lb__fail(&l->m, LB_ELOST, "the key holds another client's value; left alone");
}

int lb__x_start(lb_mlock *l, const lb_now *now) {
    switch (l->op) {
    case LB__OP_ACQUIRE:
        l->takeovers_left = TAKEOVER_TRIES;
        l->observedlen = 0;
        return send_acquire(l, now);
    case LB__OP_RELEASE: return release_start(l, now);
    case LB__OP_EXTEND: return extend_start(l, now);
    default: return lb__fail(&l->m, LB_ESTATE, "bad operation %d", l->op);
    }
}

int lb__x_step(lb_mlock *l, const redisReply *r, const lb_now *now) {
    if (!r) {
        /* Unknown outcome: an acquire may have written a value that lapses with
         * its TTL; an extend leaves the handle held for a retry. A compat
         * release that may have run lets the lock go, as a legacy one does
         * (legacy/release.c): another client may have written the same
         * timestamp since. A token is ours alone: a modern release stays held
         * for a retry. */
        if (l->op == LB__OP_RELEASE && l->held_mode == LB_MODE_COMPAT) l->held = 0;
        return lb__fail(&l->m, LB_EIO, "connection failed during %s", l->m.cmd.argv[0]);
    }
    if (l->state == X_ACQUIRE) return on_acquire(l, r, now);
    if (l->state == X_SCRIPT) return on_script(l, r);
    return lb__fail(&l->m, LB_ESTATE, "bad state %d", l->state);
}
