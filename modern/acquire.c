/* One token-lock acquire attempt as a step machine: SET NX PX GET with a fresh
 * token (one round trip when free); when busy, the reply is the holder's value
 * (a value that is no lockbridge token marks a client outside the queue, see
 * modern/outsider.c) and PTTL tells the waiter how long the holder may keep
 * it. With fencing, one script does both and INCRs the fencing counter on
 * success. */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "modern/internal.h"

enum { A_START, A_SET, A_PTTL, A_TYPE, A_FENCED };

#define LOCK_OF(m) ((lb_lock *)(void *)(m))

static int acquired(lb_lock *l, int64_t fence) {
    l->held = 1;
    l->fence = fence;
    l->holder_ttl_ms = -1;
    l->deadline_ns = lb__lease_end_ns(l->sent_ns, l->opts.ttl_ms);
    return LB_OK;
}

static int busy(lb_lock *l, int64_t pttl) {
    /* PTTL: -2 the key vanished since (released: worth an immediate retry),
     * -1 a key without TTL (a legacy lock, or another type: held for good). */
    l->holder_ttl_ms = pttl == -2 ? 0 : pttl;
    if (pttl == -1) return lb__fail(&l->m, LB_EBUSY, "held by a key without TTL");
    return lb__fail(&l->m, LB_EBUSY, "held for %lld ms more", (long long)l->holder_ttl_ms);
}

static int send_set(lb_lock *l);

static int start(lb_lock *l, const lb_now *now) {
    if (l->held) return lb__fail(&l->m, LB_ESTATE, "already held by this handle");
    if (!l->fixed_token && lb__token(l->token) != LB_OK)
        return lb__fail(&l->m, LB_EIO, "the OS random source failed");
    l->sent_ns = now->mono_ns;
    l->fence = 0;
    snprintf(l->ttl_arg, sizeof l->ttl_arg, "%lld", (long long)l->opts.ttl_ms);
    if (l->opts.fencing) {
        lb__cmd_script(&l->m, &lb__script_modern_acquire_fenced, "2");
        lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
        lb__cmd_arg(&l->m.cmd, l->fence_key, l->fence_keylen);
        lb__cmd_arg(&l->m.cmd, l->token, LB_TOKEN_LEN);
        lb__cmd_argz(&l->m.cmd, l->ttl_arg);
        l->state = A_FENCED;
        return LB_STEP_SEND;
    }
    return send_set(l);
}

/* GET costs no command more and shows who holds the key; a server before 7.0
 * refuses it with NX, and is asked plain SET NX from then on. */
static int send_set(lb_lock *l) {
    lb__cmd_reset(&l->m.cmd);
    lb__cmd_argz(&l->m.cmd, "SET");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    lb__cmd_arg(&l->m.cmd, l->token, LB_TOKEN_LEN);
    lb__cmd_argz(&l->m.cmd, "NX");
    lb__cmd_argz(&l->m.cmd, "PX");
    lb__cmd_argz(&l->m.cmd, l->ttl_arg);
    if (!l->set_get_refused) lb__cmd_argz(&l->m.cmd, "GET");
    l->state = A_SET;
    return LB_STEP_SEND;
}

static int send_pttl(lb_lock *l) {
    lb__cmd_reset(&l->m.cmd);
    lb__cmd_argz(&l->m.cmd, "PTTL");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    l->state = A_PTTL;
    return LB_STEP_SEND;
}

static int send_type(lb_lock *l) {
    lb__cmd_reset(&l->m.cmd);
    lb__cmd_argz(&l->m.cmd, "TYPE");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    l->state = A_TYPE;
    return LB_STEP_SEND;
}

/* Without GET: OK or nil. With it: nil when our token was written, the
 * holder's value when not, WRONGTYPE for a key of another type (TYPE then
 * says which, as it does after plain SET NX and PTTL), and an error from a
 * server, an ACL or a proxy that refuses GET there. */
static int on_set(lb_lock *l, const redisReply *r, const lb_now *now) {
    if (l->set_get_refused) {
        if (r->type == REDIS_REPLY_STATUS) return acquired(l, 0);
        if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "SET");
        if (r->type != REDIS_REPLY_NIL) return lb__fail(&l->m, LB_EPROTO, "SET: unexpected reply");
        return send_pttl(l);
    }
    if (r->type == REDIS_REPLY_NIL) return acquired(l, 0);
    /* A server or proxy that ignored GET wrote our value all the same. */
    if (r->type == REDIS_REPLY_STATUS && r->str && strcmp(r->str, "OK") == 0) return acquired(l, 0);
    if (r->type == REDIS_REPLY_STRING) {
        if (lb__value_foreign(r->str, r->len)) l->outsider_ns = l->outsider_held_ns = now->mono_ns;
        return send_pttl(l);
    }
    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "WRONGTYPE", 9) == 0) return send_type(l);
    /* A server before 7.0 refuses NX with GET (a syntax error), an ACL
     * that lets the user write the key but not read it refuses GET
     * (NOPERM), a proxy may word it otherwise: plain SET NX from then on,
     * which fails the same way if the refusal was not GET's. */
    if (r->type == REDIS_REPLY_ERROR && r->str &&
        (strncmp(r->str, "ERR", 3) == 0 || strncmp(r->str, "NOPERM", 6) == 0)) {
        l->set_get_refused = 1;
        return send_set(l);
    }
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "SET");
    return lb__fail(&l->m, LB_EPROTO, "SET: unexpected reply");
}

/* A key without TTL is a lock held for good, or no lock at all: a list or a
 * hash is LB_EWRONGTYPE, which no wait would change (asked only then, so the
 * usual busy attempt stays at two commands). */
static int on_pttl(lb_lock *l, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "PTTL");
    if (r->type != REDIS_REPLY_INTEGER || r->integer < -2)
        return lb__fail(&l->m, LB_EPROTO, "PTTL: unexpected reply");
    if (r->integer != -1) return busy(l, r->integer);
    return send_type(l);
}

static int on_type(lb_lock *l, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "TYPE");
    if (r->type != REDIS_REPLY_STATUS || !r->str)
        return lb__fail(&l->m, LB_EPROTO, "TYPE: unexpected reply");
    if (strcmp(r->str, "string") == 0) return busy(l, -1);
    /* "none": deleted since the PTTL; worth an immediate retry. */
    if (strcmp(r->str, "none") == 0) return busy(l, -2);
    l->holder_ttl_ms = -1;
    return lb__fail(&l->m, LB_EWRONGTYPE, "the key holds a %.16s, not a lock", r->str);
}

static int on_fenced(lb_lock *l, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "acquire script");
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER)
        return lb__fail(&l->m, LB_EPROTO, "acquire script: unexpected reply");
    long long ok = r->element[0]->integer, v = r->element[1]->integer;
    if (ok == 1 && v > 0) return acquired(l, v);
    if (ok == 0 && v >= -2) return busy(l, v);
    return lb__fail(&l->m, LB_EPROTO, "acquire script: unexpected values");
}

static int acquire_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_lock *l = LOCK_OF(m);
    if (l->state == A_START) return start(l, now);
    if (!r)
        return lb__fail(m, LB_EIO, "connection failed during acquire; a lock we may have "
                        "written lapses with its TTL");
    switch (l->state) {
    case A_SET: return on_set(l, r, now);
    case A_PTTL: return on_pttl(l, r);
    case A_TYPE: return on_type(l, r);
    case A_FENCED: return on_fenced(l, r);
    default: return lb__fail(m, LB_ESTATE, "bad acquire state %d", l->state);
    }
}

void lb__lock_fix_token(lb_lock *l, const char *token) {
    memcpy(l->token, token, LB_TOKEN_LEN);
    l->token[LB_TOKEN_LEN] = '\0';
    l->fixed_token = 1;
}

lb_machine *lb__lock_try_acquire_machine(lb_lock *l) {
    if (!l || lb__machine_in_flight(&l->m)) return NULL;
    /* A watch covers one acquisition: a new one ends it, so the watchdog never
     * reports the old acquisition lost after the new one succeeded. */
    if (l->watch) lb__watch_detach(l);
    /* Fair mode's attempt is one script over the lock and its queue. */
    lb__machine_begin(&l->m, l->fair ? lb__fair_acquire_step : acquire_step);
    l->m.needs_scripts = 1; /* release is a script whatever the acquire was */
    l->state = A_START;
    return &l->m;
}
