/* The token lock handle: options, creation with its companion names, state
 * accessors, and the sync wrappers that run one operation on a connection. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "modern/internal.h"

void lb_lock_options_init(lb_lock_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->ttl_ms = 30000;
    o->backoff_min_ms = 2;
    o->backoff_max_ms = 100;
    o->fair_yield_every = 16;
    o->fair_yield_ms = 200;
    o->fair_baton_ms = 100;
}

static int valid_options(const lb_lock_options *o) {
    return o->ttl_ms > 0 && o->ttl_ms <= INT64_MAX / 1000000 && o->backoff_min_ms > 0 &&
           o->backoff_max_ms >= o->backoff_min_ms && (o->fencing == 0 || o->fencing == 1) &&
           lb__fair_valid(o);
}

int lb__lock_companion(lb_lock *l, const char *suffix, char **out, size_t *len) {
    size_t cap = l->keylen + strlen(suffix) + 4;
    *out = lb__alloc(l->opts.allocator, cap);
    if (!*out) return LB_ENOMEM;
    int n = lb_companion_key(l->key, l->keylen, suffix, *out, cap);
    if (n < 0) return n;
    *len = (size_t)n;
    return LB_OK;
}

int lb_lock_new(lb_lock **out, const char *key, size_t keylen, const lb_lock_options *o) {
    lb_lock_options defaults;
    if (!out) return LB_EINVAL;
    *out = NULL;
    if (!key || keylen == 0 || lb_lock_name_refused(key, keylen)) return LB_EINVAL;
    if (!o) {
        lb_lock_options_init(&defaults);
        o = &defaults;
    }
    if (!valid_options(o) || (o->fair && !lb__fair_name_ok(key, keylen))) return LB_EINVAL;
    lb_lock *l = lb__alloc(o->allocator, sizeof *l);
    if (!l) return LB_ENOMEM;
    memset(l, 0, sizeof *l);
    l->opts = *o;
    l->holder_ttl_ms = -1;
    l->rng = lb__random_seed();
    int rc = LB_ENOMEM;
    l->key = lb__alloc(o->allocator, keylen + 1);
    if (!l->key) goto fail;
    memcpy(l->key, key, keylen);
    l->key[keylen] = '\0';
    l->keylen = keylen;
    if ((rc = lb__lock_companion(l, "released", &l->channel, &l->channellen)) != LB_OK) goto fail;
    if (o->fencing && (rc = lb__lock_companion(l, "fence", &l->fence_key, &l->fence_keylen)) != LB_OK)
        goto fail;
    if (o->fair && (rc = lb__fair_new(l)) != LB_OK) goto fail;
    *out = l;
    return LB_OK;
fail:
    lb_lock_free(l);
    return rc;
}

void lb_lock_free(lb_lock *l) {
    if (!l) return;
    if (l->watch) lb__watch_detach(l);
    const lb_allocator *a = l->opts.allocator;
    lb__free(a, l->key);
    lb__free(a, l->fence_key);
    lb__free(a, l->channel);
    for (int i = 0; i < 3; i++) lb__free(a, l->note_keys[i]);
    lb__fair_free(l);
    lb__free(a, l);
}

static int run(lb_lock *l, lb_target t, lb_machine *m) {
    if (!m) return lb__refuse(l->errstr, LB_ESTATE, LB__IN_FLIGHT);
    int rc = lb_target_run(t, m, l->opts.clock);
    memcpy(l->errstr, m->errstr, sizeof l->errstr);
    return rc;
}

int lb__lock_try(lb_lock *l, lb_target t) {
    return run(l, t, lb__lock_try_acquire_machine(l));
}

/* A fair try refused is a client outside the queue: it notes itself (see
 * modern/outsider.c), so that baton passes, which read no queue state, open
 * windows for it too. */
int lb_lock_try_acquire(lb_lock *l, lb_target t) {
    if (!l) return LB_EINVAL;
    int rc = lb__lock_try(l, t);
    if (rc == LB_EBUSY && l->fair) lb__lock_note_due(l, t, 0);
    return lb__lock_watch_acquired(l, t, rc);
}

int lb_lock_release(lb_lock *l, lb_target t) {
    return l ? run(l, t, lb__lock_release_machine(l)) : LB_EINVAL;
}

int lb_lock_extend(lb_lock *l, lb_target t, int64_t ms, lb_extend_mode mode) {
    return l ? run(l, t, lb__lock_extend_machine(l, ms, mode)) : LB_EINVAL;
}

int lb_lock_check(lb_lock *l, lb_target t, int64_t *ttl_ms) {
    if (ttl_ms) *ttl_ms = -1;
    if (!l) return LB_EINVAL;
    int rc = run(l, t, lb__lock_check_machine(l));
    if (rc == LB_OK && ttl_ms) *ttl_ms = l->check_ttl_ms;
    return rc;
}

/* The operator's DEL as a one-command machine, so that it goes where the
 * target sends the key: a Cluster's owner of its slot, Sentinel's primary. */
typedef struct force_del {
    lb_machine m;
    const char *key;
    size_t keylen;
} force_del;

static int force_del_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    force_del *d = (force_del *)(void *)m;
    (void)now;
    if (m->commands == 0) {
        lb__cmd_reset(&m->cmd);
        lb__cmd_argz(&m->cmd, "DEL");
        lb__cmd_arg(&m->cmd, d->key, d->keylen);
        return LB_STEP_SEND;
    }
    if (!r) return lb__fail(m, LB_EIO, "connection failed during DEL");
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(m, r, "DEL");
    return r->type == REDIS_REPLY_INTEGER ? LB_OK : lb__fail(m, LB_EPROTO, "DEL: unexpected reply");
}

int lb_lock_force_release(lb_target t, const char *key, size_t keylen) {
    if (!t.handle || !key || keylen == 0) return LB_EINVAL;
    force_del d;
    memset(&d, 0, sizeof d);
    d.key = key;
    d.keylen = keylen;
    lb__machine_begin(&d.m, force_del_step);
    return lb_target_run(t, &d.m, NULL);
}

static lb_machine *machine_of(lb_lock *l, lb_op op, int64_t ms) {
    switch (op) {
    case LB_OP_TRY_ACQUIRE: return lb__lock_try_acquire_machine(l);
    case LB_OP_RELEASE: return lb__lock_release_machine(l);
    case LB_OP_EXTEND: return lb__lock_extend_machine(l, ms, LB_EXTEND_REPLACE);
    case LB_OP_EXTEND_ADD: return lb__lock_extend_machine(l, ms, LB_EXTEND_ADD);
    case LB_OP_CHECK: return lb__lock_check_machine(l);
    default:
        lb__refuse(l->errstr, LB_EINVAL, "invalid argument: operation %d is not the token lock's",
                   (int)op);
        return NULL;
    }
}

/* The handle's text is reset: the operation's own is the machine's. */
lb_machine *lb_lock_machine(lb_lock *l, lb_op op, int64_t ms) {
    if (!l) return NULL;
    l->errstr[0] = '\0';
    if (lb__machine_in_flight(&l->m)) {
        lb__refuse(l->errstr, LB_ESTATE, LB__IN_FLIGHT);
        return NULL;
    }
    return machine_of(l, op, ms);
}

lb_lock_info lb_lock_info_of(const lb_lock *l) {
    lb_lock_info i = {0, "", 0, -1, 0, 0, ""};
    if (!l) return i;
    /* A watched lock reported lost is not held, whatever its owner last did. */
    i.held = l->held && !(l->watch && lb__watch_lost(l));
    i.token = l->token;
    i.fence = l->held ? l->fence : 0;
    i.holder_ttl_ms = l->holder_ttl_ms;
    /* A watched lock's lease moves with each renewal, which runs on the
     * watchdog's thread: the watch keeps that deadline. */
    i.deadline_ns = l->watch ? lb__watch_deadline_ns(l) : l->deadline_ns;
    i.commands = l->m.total;
    i.errstr = l->errstr;
    return i;
}
