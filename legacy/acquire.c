/* One legacy acquire attempt as a step machine: SETNX; on 0, GET; nil means
 * released (retry SETNX, bounded); expired means take over, with GETSET on the
 * wire or the compare-and-set script in the scripted variant. */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "legacy/internal.h"

enum { A_START, A_SETNX, A_GET, A_GETSET, A_TAKEOVER };

#define LOCK_OF(m) ((lb_legacy_lock *)(void *)(m))

/* Encodes a fresh value "now + ttl_ms" into l->pending. An expiry outside the
 * plausibility window would be foreign to every reader, this one included. */
static int make_pending_for(lb_legacy_lock *l, const lb_now *now, int64_t ttl_ms) {
    if (lb_codec_expiry(&l->codec, now, ttl_ms, &l->pending_expiry) != LB_OK ||
        !lb_codec_plausible(&l->codec, l->pending_expiry, now) ||
        lb_codec_encode(&l->codec, l->pending_expiry, l->pending, sizeof l->pending,
                        &l->pendinglen) != LB_OK)
        return lb__fail(&l->m, LB_EINVAL, "cannot encode a plausible expiry for ttl %lld ms",
                        (long long)ttl_ms);
    return LB_OK;
}

static int make_pending(lb_legacy_lock *l, const lb_now *now) {
    return make_pending_for(l, now, l->opts.ttl_ms);
}

/* The value a wire GETSET writes. If it loses the race, it has replaced the
 * winner's value; written with the fleet's longest validity plus the clock
 * skew the fleet allows (the release margin), it ends no earlier than the
 * winner's even when our clock runs a little behind the winner's, so the
 * overwrite never shortens a live lock. */
static int make_takeover_pending(lb_legacy_lock *l, const lb_now *now) {
    int64_t ttl = l->opts.ttl_ms, fleet = l->opts.fleet_max_ttl_ms;
    if (l->opts.variant == LB_LEGACY_WIRE && fleet > 0 &&
        !lb__add64(fleet, l->opts.release_margin_ms, &fleet) && fleet > ttl)
        ttl = fleet;
    return make_pending_for(l, now, ttl);
}

/* Whether a value read at the key is a timestamp of ours: it decodes, and to
 * an instant inside the plausibility window. A value that decodes to an
 * instant outside it (ten digits of seconds read as milliseconds: 1970) was
 * written by a client of another codec; judging it expired would take over a
 * live lock, so it is foreign, and the codec that reads it plausibly is named. */
static int read_ours(lb_legacy_lock *l, const char *s, size_t len, const lb_now *now,
                     const char *during, int64_t *t) {
    lb_codec other;
    char spec[128];
    *t = 0;
    if (len > LB_OBSERVED_MAX || lb_codec_decode(&l->codec, s, len, t) != LB_OK)
        return lb__legacy_foreign(l, s, len, during);
    if (lb_codec_plausible(&l->codec, *t, now)) return LB_OK;
    int rc = lb__legacy_foreign(l, s, len, during);
    size_t used = strlen(l->m.errstr);
    if (lb_codec_suggest(&l->codec, s, len, now, &other) != LB_OK ||
        lb_codec_format(&other, spec, sizeof spec) != LB_OK)
        snprintf(spec, sizeof spec, "no codec");
    snprintf(l->m.errstr + used, sizeof l->m.errstr - used,
             "; it decodes to %lld, outside the plausible window (%s reads it plausibly)",
             (long long)*t, spec);
    return rc;
}

static int acquired(lb_legacy_lock *l) {
    memcpy(l->value, l->pending, l->pendinglen + 1);
    l->valuelen = l->pendinglen;
    l->expiry = l->pending_expiry;
    l->held = 1;
    l->has_observed_expiry = 0; /* it describes a holder, and we are the holder now */
    return LB_OK;
}

static int send_setnx(lb_legacy_lock *l, const lb_now *now) {
    int rc = make_pending(l, now);
    if (rc != LB_OK) return rc;
    lb__cmd_reset(&l->m.cmd);
    lb__cmd_argz(&l->m.cmd, "SETNX");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    lb__cmd_arg(&l->m.cmd, l->pending, l->pendinglen);
    l->state = A_SETNX;
    return LB_STEP_SEND;
}

static int send_get(lb_legacy_lock *l) {
    lb__cmd_reset(&l->m.cmd);
    lb__cmd_argz(&l->m.cmd, "GET");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    l->state = A_GET;
    return LB_STEP_SEND;
}

static int send_takeover(lb_legacy_lock *l, const lb_now *now) {
    int rc = make_takeover_pending(l, now);
    if (rc != LB_OK) return rc;
    if (l->opts.variant == LB_LEGACY_SCRIPTED) {
        lb__cmd_script(&l->m, &lb__script_legacy_takeover, "1");
        lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
        lb__cmd_arg(&l->m.cmd, l->observed, l->observedlen);
        lb__cmd_arg(&l->m.cmd, l->pending, l->pendinglen);
        l->state = A_TAKEOVER;
    } else {
        lb__cmd_reset(&l->m.cmd);
        lb__cmd_argz(&l->m.cmd, "GETSET");
        lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
        lb__cmd_arg(&l->m.cmd, l->pending, l->pendinglen);
        l->state = A_GETSET;
    }
    return LB_STEP_SEND;
}

static int on_setnx(lb_legacy_lock *l, const redisReply *r) {
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) return acquired(l);
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 0) return send_get(l);
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "SETNX");
    return lb__fail(&l->m, LB_EPROTO, "SETNX: unexpected reply type %d", r->type);
}

static int on_get(lb_legacy_lock *l, const redisReply *r, const lb_now *now) {
    if (r->type == REDIS_REPLY_NIL) {
        /* Nil rule: the key was released between SETNX and GET; it did not
         * expire. Try SETNX again, a bounded number of times. */
        if (l->nil_left-- > 0) return send_setnx(l, now);
        return lb__fail(&l->m, LB_EBUSY, "key kept changing hands (nil GET %d times)",
                        l->opts.nil_retries + 1);
    }
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "GET");
    if (r->type != REDIS_REPLY_STRING)
        return lb__fail(&l->m, LB_EPROTO, "GET: unexpected reply type %d", r->type);
    size_t len = (size_t)r->len;
    int64_t t = 0;
    int rc = read_ours(l, r->str, len, now, "GET", &t);
    if (rc != LB_OK) return rc;
    memcpy(l->observed, r->str, len);
    l->observedlen = len;
    l->observed_expiry = t;
    l->has_observed_expiry = 1;
    if (lb_codec_now(&l->codec, now) <= t)
        return lb__fail(&l->m, LB_EBUSY, "held until %lld", (long long)t);
    return send_takeover(l, now);
}

/* GETSET has already written our value. We hold the lock only if what it
 * replaced was free (nil rule), the expired value GET saw, or itself expired;
 * otherwise a racer won the takeover and our value has overwritten its own. */
static int on_getset(lb_legacy_lock *l, const redisReply *r, const lb_now *now) {
    int64_t t = 0;
    if (r->type == REDIS_REPLY_NIL) return acquired(l);
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "GETSET");
    if (r->type != REDIS_REPLY_STRING)
        return lb__fail(&l->m, LB_EPROTO, "GETSET: unexpected reply type %d", r->type);
    size_t len = (size_t)r->len;
    if (len == l->observedlen && memcmp(r->str, l->observed, len) == 0) return acquired(l);
    /* A value that is not ours was written between our GET and GETSET by a
     * client of another format; on the wire nothing can prevent this (the
     * scripted variant can). */
    int rc = read_ours(l, r->str, len, now, "GETSET (our value replaced it)", &t);
    if (rc != LB_OK) return rc;
    if (lb_codec_now(&l->codec, now) > t) return acquired(l);
    l->observed_expiry = t;
    l->has_observed_expiry = 1;
    return lb__fail(&l->m, LB_EBUSY,
                    "lost the takeover race to a holder until %lld (our value overwrote its own)",
                    (long long)t);
}

static int on_takeover(lb_legacy_lock *l, const redisReply *r) {
    if (r->type == REDIS_REPLY_INTEGER && (r->integer == 1 || r->integer == 2))
        return acquired(l);
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 0)
        return lb__fail(&l->m, LB_EBUSY, "the expired value changed before the takeover");
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "takeover script");
    return lb__fail(&l->m, LB_EPROTO, "takeover script: unexpected reply");
}

static int acquire_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_legacy_lock *l = LOCK_OF(m);
    if (l->state == A_START) {
        if (l->held) return lb__fail(m, LB_ESTATE, "already held by this handle");
        l->nil_left = l->opts.nil_retries;
        l->has_observed_expiry = 0;
        l->foreign[0] = '\0';
        return send_setnx(l, now);
    }
    if (!r)
        return lb__fail(m, LB_EIO, "connection failed during %s; if the write was applied, "
                        "the value stays until its expiry", m->cmd.argv[0]);
    switch (l->state) {
    case A_SETNX: return on_setnx(l, r);
    case A_GET: return on_get(l, r, now);
    case A_GETSET: return on_getset(l, r, now);
    case A_TAKEOVER: return on_takeover(l, r);
    default: return lb__fail(m, LB_ESTATE, "bad acquire state %d", l->state);
    }
}

lb_machine *lb__legacy_try_acquire_machine(lb_legacy_lock *l) {
    if (!l || lb__machine_in_flight(&l->m)) return NULL;
    lb__machine_begin(&l->m, acquire_step);
    /* The scripted variant releases with a script: know it runs first. */
    l->m.needs_scripts = l->opts.variant == LB_LEGACY_SCRIPTED;
    l->state = A_START;
    return &l->m;
}
