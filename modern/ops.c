/* Token-lock release, extend and check as step machines: each is one
 * compare-then-act script, so nothing is ever done to a key that does not hold
 * our token. */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "modern/internal.h"

enum { O_START, O_SCRIPT };

#define LOCK_OF(m) ((lb_lock *)(void *)(m))

static int lost(lb_lock *l, const char *why) {
    l->held = 0;
    return lb__fail(&l->m, LB_ELOST, "%s", why);
}

/* The integer reply of one of our scripts, or a failure status. */
static int script_integer(lb_lock *l, const redisReply *r, const char *what, long long *v) {
    if (!r) return lb__fail(&l->m, LB_EIO, "connection failed during %s", what);
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, what);
    if (r->type != REDIS_REPLY_INTEGER) return lb__fail(&l->m, LB_EPROTO, "%s: unexpected reply", what);
    *v = r->integer;
    return LB_OK;
}

static void begin_script(lb_lock *l, const lb_script *s) {
    lb__cmd_script(&l->m, s, "1");
    lb__cmd_arg(&l->m.cmd, l->key, l->keylen);
    lb__cmd_arg(&l->m.cmd, l->token, LB_TOKEN_LEN);
    l->state = O_SCRIPT;
}

static int release_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_lock *l = LOCK_OF(m);
    long long v = 0; /* set by script_integer on LB_OK */
    if (l->state == O_START) {
        if (!l->held) return lb__fail(m, LB_ESTATE, "not held by this handle");
        if (lb__fair_courteous(l, now->mono_ns)) {
            m->step = lb__fair_release_step;
            return lb__fair_release_step(m, NULL, now);
        }
        begin_script(l, &lb__script_modern_release);
        lb__cmd_arg(&l->m.cmd, l->channel, l->channellen);
        return LB_STEP_SEND;
    }
    int rc = script_integer(l, r, "release", &v);
    if (rc != LB_OK) return rc; /* outcome unknown: still held, the caller may retry */
    if (v < 0) return lb__fail(m, LB_EPROTO, "release: unexpected reply");
    if (v >= 1) {
        l->held = 0;
        l->released_ns = now->mono_ns;
        l->heard_release = v > 1;
        return LB_OK;
    }
    return lost(l, "the key no longer holds our token; nothing deleted");
}

int lb__lock_release_plainly(lb_machine *m, const lb_now *now) {
    lb_lock *l = LOCK_OF(m);
    m->step = release_step;
    l->state = O_SCRIPT;
    begin_script(l, &lb__script_modern_release);
    lb__cmd_arg(&l->m.cmd, l->channel, l->channellen);
    (void)now;
    return LB_STEP_SEND;
}

static int extend_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_lock *l = LOCK_OF(m);
    long long v = 0; /* set by script_integer on LB_OK */
    if (l->state == O_START) {
        if (!l->held) return lb__fail(m, LB_ESTATE, "not held by this handle");
        if (l->extend_ms <= 0 || l->extend_ms > INT64_MAX / 2000000)
            return lb__fail(m, LB_EINVAL, "extend needs 0 < ms");
        l->sent_ns = now->mono_ns;
        begin_script(l, &lb__script_modern_extend);
        snprintf(l->ms_arg, sizeof l->ms_arg, "%lld", (long long)l->extend_ms);
        lb__cmd_argz(&l->m.cmd, l->ms_arg);
        lb__cmd_argz(&l->m.cmd, l->extend_mode == LB_EXTEND_ADD ? "add" : "replace");
        return LB_STEP_SEND;
    }
    int rc = script_integer(l, r, "extend", &v);
    if (rc != LB_OK) return rc;
    if (v <= 0) return lost(l, "the key no longer holds our token; not extended");
    /* The TTL comes from the server: one no int64 deadline can hold is not
     * believed, and the lease we knew stays as it was. */
    int64_t ns, deadline;
    if (lb__mul64(v, 1000000, &ns) || lb__add64(l->sent_ns, ns, &deadline))
        return lb__fail(m, LB_EPROTO, "extend: TTL %lld ms out of range", v);
    l->deadline_ns = deadline;
    return LB_OK;
}

static int check_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_lock *l = LOCK_OF(m);
    long long v = 0; /* set by script_integer on LB_OK */
    (void)now;
    if (l->state == O_START) {
        if (!l->token[0]) return lb__fail(m, LB_ESTATE, "never acquired");
        begin_script(l, &lb__script_modern_check);
        return LB_STEP_SEND;
    }
    int rc = script_integer(l, r, "check", &v);
    if (rc != LB_OK) return rc;
    if (v == -3 || v == -2) return lost(l, "the key no longer holds our token");
    l->check_ttl_ms = v;
    return LB_OK;
}

static lb_machine *begin(lb_lock *l, int (*step)(lb_machine *, const redisReply *, const lb_now *)) {
    if (!l || lb__machine_in_flight(&l->m)) return NULL;
    lb__machine_begin(&l->m, step);
    l->state = O_START;
    return &l->m;
}

lb_machine *lb__lock_release_machine(lb_lock *l) {
    if (l && l->watch && !lb__machine_in_flight(&l->m)) lb__watch_detach(l);
    return begin(l, l && l->fair ? lb__fair_release_step : release_step);
}
lb_machine *lb__lock_check_machine(lb_lock *l) { return begin(l, check_step); }

lb_machine *lb__lock_extend_machine(lb_lock *l, int64_t ms, lb_extend_mode mode) {
    if (!l || lb__machine_in_flight(&l->m)) return NULL;
    l->extend_ms = ms;
    l->extend_mode = mode == LB_EXTEND_ADD ? LB_EXTEND_ADD : LB_EXTEND_REPLACE;
    return begin(l, extend_step);
}
