/* The token lock on Redis Cluster: the same operations as lock.c and
 * blocking.c, each run by the cluster driver on the owner of the key's slot
 * (the fencing counter and release channel share that slot). */
#include <string.h>

#include "lockbridge/cluster.h"
#include "modern/internal.h"

static int run(lb_lock *l, lb_cluster *cl, lb_machine *m) {
    if (!cl) return LB_EINVAL;
    if (!m) return LB_ESTATE; /* an asynchronous operation is in flight */
    int rc = lb_cluster_run(cl, l->key, l->keylen, m, l->opts.clock);
    l->commands += lb_machine_commands(m);
    memcpy(l->errstr, m->errstr, sizeof l->errstr);
    return rc;
}

int lb_lock_try_acquire_cluster(lb_lock *l, lb_cluster *cl) {
    return l ? run(l, cl, lb_lock_try_acquire_machine(l)) : LB_EINVAL;
}

int lb_lock_release_cluster(lb_lock *l, lb_cluster *cl) {
    return l ? run(l, cl, lb_lock_release_machine(l)) : LB_EINVAL;
}

int lb_lock_extend_cluster(lb_lock *l, lb_cluster *cl, int64_t ms, lb_extend_mode mode) {
    return l ? run(l, cl, lb_lock_extend_machine(l, ms, mode)) : LB_EINVAL;
}

int lb_lock_check_cluster(lb_lock *l, lb_cluster *cl, int64_t *ttl_ms) {
    if (ttl_ms) *ttl_ms = -1;
    if (!l) return LB_EINVAL;
    int rc = run(l, cl, lb_lock_check_machine(l));
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

int lb_lock_acquire_cluster(lb_lock *l, lb_cluster *cl, int64_t wait_ms) {
    if (!l || !cl || wait_ms < 0) return LB_EINVAL;
    int64_t deadline = lb__deadline_ms(wait_ms), cap = l->opts.backoff_min_ms;
    for (;;) {
        int rc = lb_lock_try_acquire_cluster(l, cl);
        if (rc != LB_EBUSY) return rc;
        int64_t left = deadline - lb__mono_ms();
        if (left <= 0) return LB_ETIMEDOUT;
        int64_t ms = next_sleep(l, &cap);
        lb__sleep_ms(ms < left ? ms : left);
    }
}
