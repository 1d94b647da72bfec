/* The legacy lock on Redis Cluster: the same operations as lock.c and
 * blocking.c, each run by the cluster driver on the owner of the key's slot. */
#include <string.h>

#include "lockbridge/cluster.h"
#include "legacy/internal.h"

static int run(lb_legacy_lock *l, lb_cluster *cl, lb_machine *m) {
    if (!cl) return LB_EINVAL;
    if (!m) return LB_ESTATE; /* an asynchronous operation is in flight */
    int rc = lb_cluster_run(cl, l->key, l->keylen, m, l->opts.clock);
    l->commands += lb_machine_commands(m);
    memcpy(l->errstr, m->errstr, sizeof l->errstr);
    return rc;
}

int lb_legacy_try_acquire_cluster(lb_legacy_lock *l, lb_cluster *cl) {
    return l ? run(l, cl, lb_legacy_try_acquire_machine(l)) : LB_EINVAL;
}

int lb_legacy_release_cluster(lb_legacy_lock *l, lb_cluster *cl) {
    return l ? run(l, cl, lb_legacy_release_machine(l)) : LB_EINVAL;
}

int lb_legacy_extend_cluster(lb_legacy_lock *l, lb_cluster *cl, int64_t ttl_ms) {
    return l ? run(l, cl, lb_legacy_extend_machine(l, ttl_ms)) : LB_EINVAL;
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

int lb_legacy_acquire_cluster(lb_legacy_lock *l, lb_cluster *cl, int64_t wait_ms) {
    if (!l || !cl || wait_ms < 0) return LB_EINVAL;
    int64_t deadline = lb__deadline_ms(wait_ms), cap = l->opts.backoff_min_ms;
    for (;;) {
        int rc = lb_legacy_try_acquire_cluster(l, cl);
        if (rc != LB_EBUSY && rc != LB_EFOREIGN) return rc;
        int64_t left = deadline - lb__mono_ms();
        if (left <= 0) return rc == LB_EFOREIGN ? LB_EFOREIGN : LB_ETIMEDOUT;
        lb_now now = lb_clock_now(l->opts.clock);
        int64_t ms = next_sleep(l, &cap, &now);
        lb__sleep_ms(ms < left ? ms : left);
    }
}
