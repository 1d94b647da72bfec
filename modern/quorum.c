/* The quorum lock across independent masters: one token, one token lock per
 * master, a majority and a validity that accounts for the time spent and for
 * clock drift between the masters. */
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "modern/internal.h"

#define QUORUM_MAX 64

struct lb_quorum {
    lb_quorum_options opts;
    redisContext **masters;
    lb_lock **locks;
    int n;
    int held, votes;
    int64_t validity_ms;
    char token[LB__TOKEN_CAP];
    uint64_t rng;
};

static void set_timeout(const lb_quorum *q, redisContext *c) {
    struct timeval tv = {(time_t)(q->opts.timeout_ms / 1000),
                         (suseconds_t)(q->opts.timeout_ms % 1000) * 1000};
    redisSetTimeout(c, tv);
}

void lb_quorum_options_init(lb_quorum_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->ttl_ms = 30000;
    o->drift_ppm = 10000;
    o->drift_extra_ms = 2;
    o->timeout_ms = 100;
    o->retry_min_ms = 50;
    o->retry_max_ms = 200;
}

int lb_quorum_new(lb_quorum **out, const char *key, size_t keylen, redisContext **masters,
                  int n, const lb_quorum_options *o) {
    lb_quorum_options defaults;
    if (!out) return LB_EINVAL;
    *out = NULL;
    if (!o) {
        lb_quorum_options_init(&defaults);
        o = &defaults;
    }
    if (!key || !keylen || lb_lock_name_refused(key, keylen) || !masters || n < 1 || n > QUORUM_MAX || o->ttl_ms <= 0 ||
        o->drift_ppm < 0 || o->drift_extra_ms < 0 || o->timeout_ms <= 0 ||
        o->timeout_ms >= o->ttl_ms || o->retry_min_ms < 0 ||
        o->retry_max_ms < o->retry_min_ms)
        return LB_EINVAL;
    for (int i = 0; i < n; i++)
        if (!masters[i]) return LB_EINVAL;
    lb_quorum *q = lb__alloc(o->allocator, sizeof *q);
    if (!q) return LB_ENOMEM;
    memset(q, 0, sizeof *q);
    q->opts = *o;
    q->n = n;
    q->rng = lb__random_seed();
    q->masters = masters;
    q->locks = lb__alloc(o->allocator, sizeof(lb_lock *) * (size_t)n);
    if (!q->locks) {
        lb__free(o->allocator, q);
        return LB_ENOMEM;
    }
    memset(q->locks, 0, sizeof(lb_lock *) * (size_t)n);
    lb_lock_options lo;
    lb_lock_options_init(&lo);
    lo.ttl_ms = o->ttl_ms;
    lo.clock = o->clock;
    lo.allocator = o->allocator;
    for (int i = 0; i < n; i++) {
        int rc = lb_lock_new(&q->locks[i], key, keylen, &lo);
        if (rc != LB_OK) {
            lb_quorum_free(q);
            return rc;
        }
    }
    for (int i = 0; i < n; i++) set_timeout(q, masters[i]);
    *out = q;
    return LB_OK;
}

void lb_quorum_free(lb_quorum *q) {
    if (!q) return;
    for (int i = 0; i < q->n; i++) lb_lock_free(q->locks[i]);
    lb__free(q->opts.allocator, q->locks);
    lb__free(q->opts.allocator, q);
}

/* A failed context is unusable; try once to connect it again. A reconnected
 * context has lost its command timeout (hiredis 0.14 applies only the connect
 * timeout), so it is set again: without it a stalled master blocks forever. */
static redisContext *usable(const lb_quorum *q, redisContext *c) {
    if (!c->err) return c;
    if (redisReconnect(c) != REDIS_OK) return NULL;
    set_timeout(q, c);
    return c;
}

/* Asks every master to release our token, whatever it answered before: an
 * acquire whose reply was lost may still have landed. */
static int release_all(lb_quorum *q) {
    int still = 0;
    for (int i = 0; i < q->n; i++) {
        lb_lock *l = q->locks[i];
        l->held = 1; /* the token may be there even if we never heard */
        redisContext *c = usable(q, q->masters[i]);
        if (c && lb_lock_release(l, lb_on_conn(c)) == LB_OK) still++;
        l->held = 0;
    }
    return still;
}

int lb_quorum_try_acquire(lb_quorum *q) {
    if (!q) return LB_EINVAL;
    if (q->held) return LB_ESTATE;
    if (lb__token(q->token) != LB_OK) return LB_EIO;
    int votes = 0, answered = 0;
    lb_now start = lb_clock_now(q->opts.clock);
    for (int i = 0; i < q->n; i++) {
        lb__lock_fix_token(q->locks[i], q->token);
        redisContext *c = usable(q, q->masters[i]);
        int rc = c ? lb_lock_try_acquire(q->locks[i], lb_on_conn(c)) : LB_EIO;
        if (rc == LB_OK) votes++;
        if (rc == LB_OK || rc == LB_EBUSY) answered++;
    }
    lb_now end = lb_clock_now(q->opts.clock);
    int64_t elapsed_ms = (end.mono_ns - start.mono_ns + 999999) / 1000000;
    int64_t drift = q->opts.ttl_ms * q->opts.drift_ppm / 1000000 + q->opts.drift_extra_ms;
    int64_t validity = q->opts.ttl_ms - elapsed_ms - drift;
    int majority = q->n / 2 + 1;
    if (votes >= majority && validity > 0) {
        q->held = 1;
        q->votes = votes;
        q->validity_ms = validity;
        return LB_OK;
    }
    release_all(q);
    q->votes = votes;
    q->validity_ms = 0;
    return answered < majority ? LB_EIO : LB_EBUSY;
}

int lb_quorum_acquire(lb_quorum *q, int64_t wait_ms) {
    if (!q || wait_ms < 0) return LB_EINVAL;
    int64_t deadline = lb__deadline_ms(wait_ms);
    for (;;) {
        int rc = lb_quorum_try_acquire(q);
        if (rc != LB_EBUSY && rc != LB_EIO) return rc;
        int64_t left = deadline - lb__mono_ms();
        if (left <= 0) return LB_ETIMEDOUT;
        /* A random delay, so that contenders that split the votes between them
         * do not split them again on the next round. */
        int64_t span = q->opts.retry_max_ms - q->opts.retry_min_ms + 1;
        int64_t ms = q->opts.retry_min_ms + (int64_t)(lb__xorshift(&q->rng) % (uint64_t)span);
        lb__sleep_ms(ms < left ? ms : left);
    }
}

int lb_quorum_release(lb_quorum *q) {
    if (!q) return LB_EINVAL;
    if (!q->held) return LB_ESTATE;
    int still = release_all(q);
    q->held = 0;
    q->validity_ms = 0;
    return still >= q->n / 2 + 1 ? LB_OK : LB_ELOST;
}

lb_quorum_info lb_quorum_info_of(const lb_quorum *q) {
    lb_quorum_info i = {0, "", 0, 0};
    if (!q) return i;
    i.held = q->held;
    i.token = q->token;
    i.votes = q->votes;
    i.validity_ms = q->held ? q->validity_ms : 0;
    return i;
}
