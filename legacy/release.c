/* Legacy release and extend as step machines. Neither ever deletes or rewrites
 * a value that is not exactly the one this handle wrote. */
#include <string.h>

#include <hiredis/hiredis.h>

#include "legacy/internal.h"

enum { R_START, R_GET, R_DEL, R_SCRIPT };
enum { E_START, E_SCRIPT };

#define LOCK_OF(m) ((lb_legacy_lock *)(void *)(m))

static int lost(lb_legacy_lock *l, const char *why) {
    l->held = 0;
    return lb__fail(&l->m, LB_ELOST, "%s", why);
}

static int is_ours(const lb_legacy_lock *l, const redisReply *r) {
    return r->type == REDIS_REPLY_STRING && (size_t)r->len == l->valuelen &&
           memcmp(r->str, l->value, l->valuelen) == 0;
}

/* Wire release: GET, compare, DEL. Between GET and DEL a contender whose clock
 * says our lock expired may take it over, so the DEL is refused when our own
 * expiry is within the margin; the lock is then left to expire. */
static int on_release_get(lb_legacy_lock *l, const redisReply *r, const lb_now *now) {
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "GET");
    if (r->type == REDIS_REPLY_NIL) return lost(l, "the key was already gone");
    if (r->type != REDIS_REPLY_STRING) return lb__fail(&l->m, LB_EPROTO, "GET: unexpected reply");
    if (!is_ours(l, r)) return lost(l, "the key holds another client's value; left alone");
    int64_t margin, limit;
    if (lb_codec_ms_to_units(&l->codec, l->opts.release_margin_ms, &margin) != LB_OK ||
        lb__add64(lb_codec_now(&l->codec, now), margin, &limit) || limit >= l->expiry) {
        l->held = 0;
        return lb__fail(&l->m, LB_EEXPIRED,
                        "not deleted, on purpose: too close to its expiry to delete safely "
                        "on the wire; left to expire");
    }
    lb__cmd_reset(&l->m.cmd);
    lb__cmd_argz(&l->m.cmd, "DEL");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    l->state = R_DEL;
    return LB_STEP_SEND;
}

static int on_release_del(lb_legacy_lock *l, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "DEL");
    if (r->type != REDIS_REPLY_INTEGER) return lb__fail(&l->m, LB_EPROTO, "DEL: unexpected reply");
    if (r->integer == 1) {
        l->held = 0;
        return LB_OK;
    }
    return lost(l, "the key vanished between GET and DEL");
}

static int on_release_script(lb_legacy_lock *l, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "release script");
    if (r->type != REDIS_REPLY_INTEGER)
        return lb__fail(&l->m, LB_EPROTO, "release script: unexpected reply");
    if (r->integer == 1) {
        l->held = 0;
        return LB_OK;
    }
    if (r->integer == 0) return lost(l, "the key was already gone");
    return lost(l, "the key holds another client's value; left alone");
}

static int release_start(lb_legacy_lock *l) {
    if (!l->held) return lb__fail(&l->m, LB_ESTATE, "not held by this handle");
    if (l->opts.variant == LB_LEGACY_SCRIPTED) {
        lb__cmd_script(&l->m, &lb__script_legacy_release, "1");
        lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
        lb__cmd_arg(&l->m.cmd, l->value, l->valuelen);
        l->state = R_SCRIPT;
    } else {
        lb__cmd_reset(&l->m.cmd);
        lb__cmd_argz(&l->m.cmd, "GET");
        lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
        l->state = R_GET;
    }
    return LB_STEP_SEND;
}

/* No reply to the command that deletes (DEL, or the script): it may have run.
 * Once it has, the key is free and another client may write a byte-equal
 * value (legacy values name no holder; with the s codec any two in the same
 * second are equal), which a retried release would delete. So the handle lets
 * the lock go: if the delete did not run, the lock lapses at its expiry. A
 * lost GET changed nothing: the handle stays held and may be released again. */
static int release_unknown(lb_legacy_lock *l) {
    if (l->state == R_GET) return lb__fail(&l->m, LB_EIO, "connection failed during release's GET");
    l->held = 0;
    return lb__fail(&l->m, LB_EIO, "connection failed during release: it may have run; not "
                    "retried (another holder may have written the same value since), the lock "
                    "lapses at its expiry if it did not");
}

static int release_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_legacy_lock *l = LOCK_OF(m);
    if (l->state == R_START) return release_start(l);
    if (!r) return release_unknown(l);
    switch (l->state) {
    case R_GET: return on_release_get(l, r, now);
    case R_DEL: return on_release_del(l, r);
    case R_SCRIPT: return on_release_script(l, r);
    default: return lb__fail(m, LB_ESTATE, "bad release state %d", l->state);
    }
}

lb_machine *lb__legacy_release_machine(lb_legacy_lock *l) {
    if (!l || lb__machine_in_flight(&l->m)) return NULL;
    lb__machine_begin(&l->m, release_step);
    l->state = R_START;
    return &l->m;
}

/* Extend needs an atomic compare-and-set: on the wire, a GET then SET could
 * overwrite a contender's takeover. Refused once our own clock says the lock
 * expired, since a contender may already be acting on that. */
static int extend_start(lb_legacy_lock *l, const lb_now *now) {
    if (l->opts.variant != LB_LEGACY_SCRIPTED)
        return lb__fail(&l->m, LB_EINVAL, "extend needs the scripted variant");
    if (l->extend_ttl_ms <= 0)
        return lb__fail(&l->m, LB_EINVAL, "extend ttl must be positive (got %lld ms)",
                        (long long)l->extend_ttl_ms);
    if (!l->held) return lb__fail(&l->m, LB_ESTATE, "not held by this handle");
    /* As the wire release: within the margin of expiry a contender whose clock
     * runs a little ahead may already be taking the lock over, and its GETSET
     * would overwrite the extended value. The lock is left to expire. */
    int64_t margin, limit;
    if (lb_codec_ms_to_units(&l->codec, l->opts.release_margin_ms, &margin) != LB_OK ||
        lb__add64(lb_codec_now(&l->codec, now), margin, &limit) || limit >= l->expiry) {
        l->held = 0;
        return lb__fail(&l->m, LB_EEXPIRED,
                        "not extended, on purpose: within the release margin of its expiry "
                        "by our clock; left to expire");
    }
    if (lb_codec_expiry(&l->codec, now, l->extend_ttl_ms, &l->pending_expiry) != LB_OK ||
        lb_codec_encode(&l->codec, l->pending_expiry, l->pending, sizeof l->pending,
                        &l->pendinglen) != LB_OK)
        return lb__fail(&l->m, LB_EINVAL, "cannot encode the new expiry");
    lb__cmd_script(&l->m, &lb__script_legacy_extend, "1");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    lb__cmd_arg(&l->m.cmd, l->value, l->valuelen);
    lb__cmd_arg(&l->m.cmd, l->pending, l->pendinglen);
    l->state = E_SCRIPT;
    return LB_STEP_SEND;
}

static int on_extend(lb_legacy_lock *l, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "extend script");
    if (r->type != REDIS_REPLY_INTEGER)
        return lb__fail(&l->m, LB_EPROTO, "extend script: unexpected reply");
    if (r->integer == 1) {
        memcpy(l->value, l->pending, l->pendinglen + 1);
        l->valuelen = l->pendinglen;
        l->expiry = l->pending_expiry;
        return LB_OK;
    }
    if (r->integer == 0) return lost(l, "the key was gone");
    return lost(l, "the key holds another client's value; left alone");
}

static int extend_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_legacy_lock *l = LOCK_OF(m);
    if (l->state == E_START) return extend_start(l, now);
    if (!r) return lb__fail(m, LB_EIO, "connection failed during extend");
    if (l->state == E_SCRIPT) return on_extend(l, r);
    return lb__fail(m, LB_ESTATE, "bad extend state %d", l->state);
}

lb_machine *lb__legacy_extend_machine(lb_legacy_lock *l, int64_t ttl_ms) {
    if (!l || lb__machine_in_flight(&l->m)) return NULL;
    lb__machine_begin(&l->m, extend_step);
    l->state = E_START;
    l->extend_ttl_ms = ttl_ms;
    return &l->m;
}
