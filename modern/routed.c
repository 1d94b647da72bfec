/* The token lock on routed targets, Redis Cluster and Sentinel: the same
 * operations as lock.c and blocking.c, each run by the target's driver (on a
 * cluster, the fencing counter and release channel share the key's slot). */
#include <string.h>

#include "lockbridge/cluster.h"
#include "lockbridge/sentinel.h"
#include "modern/internal.h"

/* Runs one machine of `l` on a target: a cluster or a sentinel handle. */
typedef int (*runner)(void *target, lb_lock *l, lb_machine *m);

static int on_cluster(void *target, lb_lock *l, lb_machine *m) {
    return lb_cluster_run(target, l->key, l->keylen, m, l->opts.clock);
}

static int on_sentinel(void *target, lb_lock *l, lb_machine *m) {
    return lb_sentinel_run(target, m, l->opts.clock);
}

static int run(lb_lock *l, runner go, void *target, lb_machine *m) {
    if (!l || !target) return LB_EINVAL;
    if (!m) return LB_ESTATE; /* an asynchronous operation is in flight */
    int rc = go(target, l, m);
    l->commands += lb_machine_commands(m);
    memcpy(l->errstr, m->errstr, sizeof l->errstr);
    return rc;
}

static int try_acquire(lb_lock *l, runner go, void *target) {
    return l ? run(l, go, target, lb_lock_try_acquire_machine(l)) : LB_EINVAL;
}

static int check(lb_lock *l, runner go, void *target, int64_t *ttl_ms) {
    if (ttl_ms) *ttl_ms = -1;
    if (!l) return LB_EINVAL;
    int rc = run(l, go, target, lb_lock_check_machine(l));
    if (rc == LB_OK && ttl_ms) *ttl_ms = l->check_ttl_ms;
    return rc;
}

/* The back-off of lb_lock_acquire: uniform in [min, cap], cap doubling up to
 * backoff_max_ms, no longer than the holder's TTL (+1 ms) when known. */
static int64_t next_sleep(lb_lock *l, int64_t *cap) {
    int64_t lo = l->opts.backoff_min_ms;
    int64_t ms = lo + (int64_t)(lb__xorshift(&l->rng) % (uint64_t)(*cap - lo + 1));
    *cap = *cap * 2 < l->opts.backoff_max_ms ? *cap * 2 : l->opts.backoff_max_ms;
    if (l->holder_ttl_ms >= 0 && l->holder_ttl_ms + 1 < ms) ms = l->holder_ttl_ms + 1;
    return ms;
}

static int acquire(lb_lock *l, runner go, void *target, int64_t wait_ms) {
    if (!l || !target || wait_ms < 0) return LB_EINVAL;
    int64_t deadline = lb__deadline_ms(wait_ms), cap = l->opts.backoff_min_ms;
    for (;;) {
        int rc = try_acquire(l, go, target);
        if (rc != LB_EBUSY) return rc;
        int64_t left = deadline - lb__mono_ms();
        if (left <= 0) return LB_ETIMEDOUT;
        int64_t ms = next_sleep(l, &cap);
        lb__sleep_ms(ms < left ? ms : left);
    }
}

int lb_lock_try_acquire_cluster(lb_lock *l, lb_cluster *cl) { return try_acquire(l, on_cluster, cl); }
int lb_lock_acquire_cluster(lb_lock *l, lb_cluster *cl, int64_t wait_ms) {
    return acquire(l, on_cluster, cl, wait_ms);
}
int lb_lock_release_cluster(lb_lock *l, lb_cluster *cl) {
    return l ? run(l, on_cluster, cl, lb_lock_release_machine(l)) : LB_EINVAL;
}
int lb_lock_extend_cluster(lb_lock *l, lb_cluster *cl, int64_t ms, lb_extend_mode mode) {
    return l ? run(l, on_cluster, cl, lb_lock_extend_machine(l, ms, mode)) : LB_EINVAL;
}
int lb_lock_check_cluster(lb_lock *l, lb_cluster *cl, int64_t *ttl_ms) {
    return check(l, on_cluster, cl, ttl_ms);
}

int lb_lock_try_acquire_sentinel(lb_lock *l, lb_sentinel *s) { return try_acquire(l, on_sentinel, s); }
int lb_lock_acquire_sentinel(lb_lock *l, lb_sentinel *s, int64_t wait_ms) {
    return acquire(l, on_sentinel, s, wait_ms);
}
int lb_lock_release_sentinel(lb_lock *l, lb_sentinel *s) {
    return l ? run(l, on_sentinel, s, lb_lock_release_machine(l)) : LB_EINVAL;
}
int lb_lock_extend_sentinel(lb_lock *l, lb_sentinel *s, int64_t ms, lb_extend_mode mode) {
    return l ? run(l, on_sentinel, s, lb_lock_extend_machine(l, ms, mode)) : LB_EINVAL;
}
int lb_lock_check_sentinel(lb_lock *l, lb_sentinel *s, int64_t *ttl_ms) {
    return check(l, on_sentinel, s, ttl_ms);
}
