/* The legacy lock on routed targets, Redis Cluster and Sentinel: the same
 * operations as lock.c and blocking.c, each run by the target's driver. */
#include <string.h>

#include "lockbridge/cluster.h"
#include "lockbridge/sentinel.h"
#include "legacy/internal.h"

/* Runs one machine of `l` on a target: a cluster or a sentinel handle. */
typedef int (*runner)(void *target, lb_legacy_lock *l, lb_machine *m);

static int on_cluster(void *target, lb_legacy_lock *l, lb_machine *m) {
    return lb_cluster_run(target, l->key, l->keylen, m, l->opts.clock);
}

static int on_sentinel(void *target, lb_legacy_lock *l, lb_machine *m) {
    return lb_sentinel_run(target, m, l->opts.clock);
}

static int run(lb_legacy_lock *l, runner go, void *target, lb_machine *m) {
    if (!l || !target) return LB_EINVAL;
    if (!m) return LB_ESTATE; /* an asynchronous operation is in flight */
    int rc = go(target, l, m);
    l->commands += lb_machine_commands(m);
    memcpy(l->errstr, m->errstr, sizeof l->errstr);
    return rc;
}

static int try_acquire(lb_legacy_lock *l, runner go, void *target) {
    return l ? run(l, go, target, lb_legacy_try_acquire_machine(l)) : LB_EINVAL;
}

/* The back-off of lb_legacy_acquire: uniform in [min, cap], cap doubling up
 * to backoff_max_ms, and never past the holder's observed expiry (+1 ms), so
 * a crashed holder's lock is taken over promptly. */
static int64_t next_sleep(lb_legacy_lock *l, int64_t *cap, const lb_now *now) {
    int64_t lo = l->opts.backoff_min_ms;
    int64_t ms = lo + (int64_t)(lb__xorshift(&l->rng) % (uint64_t)(*cap - lo + 1));
    *cap = *cap * 2 < l->opts.backoff_max_ms ? *cap * 2 : l->opts.backoff_max_ms;
    int64_t t, left;
    if (lb_legacy_observed_expiry(l, &t) == LB_OK &&
        lb__sub64(t, lb_codec_now(&l->codec, now), &left) == 0) {
        int64_t until = lb__codec_units_to_ms(&l->codec, left);
        if (until < ms - 1) ms = until + 1 < lo ? lo : until + 1;
    }
    return ms;
}

static int acquire(lb_legacy_lock *l, runner go, void *target, int64_t wait_ms) {
    if (!l || !target || wait_ms < 0) return LB_EINVAL;
    int64_t deadline = lb__deadline_ms(wait_ms), cap = l->opts.backoff_min_ms;
    for (;;) {
        int rc = try_acquire(l, go, target);
        if (rc != LB_EBUSY && rc != LB_EFOREIGN) return rc;
        int64_t left = deadline - lb__mono_ms();
        if (left <= 0) return rc == LB_EFOREIGN ? LB_EFOREIGN : LB_ETIMEDOUT;
        lb_now now = lb_clock_now(l->opts.clock);
        int64_t ms = next_sleep(l, &cap, &now);
        lb__sleep_ms(ms < left ? ms : left);
    }
}

int lb_legacy_try_acquire_cluster(lb_legacy_lock *l, lb_cluster *cl) {
    return try_acquire(l, on_cluster, cl);
}
int lb_legacy_acquire_cluster(lb_legacy_lock *l, lb_cluster *cl, int64_t wait_ms) {
    return acquire(l, on_cluster, cl, wait_ms);
}
int lb_legacy_release_cluster(lb_legacy_lock *l, lb_cluster *cl) {
    return l ? run(l, on_cluster, cl, lb_legacy_release_machine(l)) : LB_EINVAL;
}
int lb_legacy_extend_cluster(lb_legacy_lock *l, lb_cluster *cl, int64_t ttl_ms) {
    return l ? run(l, on_cluster, cl, lb_legacy_extend_machine(l, ttl_ms)) : LB_EINVAL;
}

int lb_legacy_try_acquire_sentinel(lb_legacy_lock *l, lb_sentinel *s) {
    return try_acquire(l, on_sentinel, s);
}
int lb_legacy_acquire_sentinel(lb_legacy_lock *l, lb_sentinel *s, int64_t wait_ms) {
    return acquire(l, on_sentinel, s, wait_ms);
}
int lb_legacy_release_sentinel(lb_legacy_lock *l, lb_sentinel *s) {
    return l ? run(l, on_sentinel, s, lb_legacy_release_machine(l)) : LB_EINVAL;
}
int lb_legacy_extend_sentinel(lb_legacy_lock *l, lb_sentinel *s, int64_t ttl_ms) {
    return l ? run(l, on_sentinel, s, lb_legacy_extend_machine(l, ttl_ms)) : LB_EINVAL;
}
