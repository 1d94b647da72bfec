/* The mode-following lock handle: options, creation (with its legacy lock,
 * companion names and census identity), state accessors, the sync wrappers
 * and the blocking acquire. The protocol lives in mlock_ops.c and crossformat.c. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lockbridge/lockbridge.h"
#include "migrate/internal.h"

void lb_mlock_options_init(lb_mlock_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->mode = LB_MODE_COMPAT;
    o->mode_refresh_ms = 1000;
    o->codec.kind = LB_CODEC_MS;
    o->ttl_ms = 30000;
    o->grace_ms = 1000;
    o->legacy_variant = LB_LEGACY_WIRE;
    o->nil_retries = 3;
    o->release_margin_ms = 1000;
    o->backoff_min_ms = 2;
    o->backoff_max_ms = 100;
    o->census_refresh_ms = 5000;
}

/* Durations are bounded so that no instant or TTL computed from them
 * overflows in any codec unit: 10^12 ms is about 31 years. */
#define MS_MAX INT64_C(1000000000000)

static int valid_options(const lb_mlock_options *o) {
    if ((int)o->mode < 0 || o->mode > LB_MODE_MODERN || (o->follow != 0 && o->follow != 1))
        return 0;
    if (o->follow && !o->ns) return 0;
    if (o->foreign_fails_at_once != 0 && o->foreign_fails_at_once != 1) return 0;
    if (o->ttl_ms <= 0 || o->ttl_ms > MS_MAX || o->grace_ms < 0 || o->grace_ms > MS_MAX) return 0;
    if (o->mode_refresh_ms < 0 || o->mode_refresh_ms > MS_MAX) return 0;
    if (o->census_refresh_ms < 0 || o->census_refresh_ms > MS_MAX) return 0;
    if (o->backoff_min_ms <= 0 || o->backoff_max_ms < o->backoff_min_ms) return 0;
    if (o->client_id && (o->client_id[0] == '\0' || strlen(o->client_id) >= LB_CENSUS_ID_MAX))
        return 0;
    if (o->host && strlen(o->host) >= LB_CENSUS_HOST_MAX) return 0;
    if (o->version && strlen(o->version) >= LB_CENSUS_VERSION_MAX) return 0;
    return 1;
}

static int make_legacy(lb_mlock *l, const lb_mlock_options *o) {
    lb_legacy_options lo;
    lb_legacy_options_init(&lo);
    lo.codec = o->codec;
    lo.variant = o->legacy_variant;
    lo.ttl_ms = o->ttl_ms;
    lo.nil_retries = o->nil_retries;
    /* The margin matters to a wire release in legacy mode only; a handle that
     * can never be in legacy mode must not be refused for a ttl within it. */
    lo.release_margin_ms = o->follow || o->mode == LB_MODE_LEGACY ? o->release_margin_ms : 0;
    lo.fleet_max_ttl_ms = o->fleet_max_ttl_ms;
    lo.backoff_min_ms = o->backoff_min_ms;
    lo.backoff_max_ms = o->backoff_max_ms;
    lo.clock = o->clock;
    lo.allocator = o->allocator;
    return lb_legacy_lock_new(&l->legacy, l->key, l->keylen, &lo);
}

/* The census identity: given, or "host:pid:8 random hex digits". */
static int identity(lb_mlock *l, const lb_mlock_options *o) {
    char tok[LB__TOKEN_CAP];
    if (o->host) {
        strcpy(l->host, o->host);
    } else if (gethostname(l->host, sizeof l->host) != 0) {
        strcpy(l->host, "unknown");
    }
    l->host[sizeof l->host - 1] = '\0';
    strcpy(l->version, o->version ? o->version : LB_VERSION_STRING);
    if (o->client_id) {
        strcpy(l->client_id, o->client_id);
        return LB_OK;
    }
    if (lb__token(tok) != LB_OK) return LB_EIO;
    snprintf(l->client_id, sizeof l->client_id, "%.96s:%ld:%.8s", l->host, (long)getpid(), tok);
    return LB_OK;
}

static int setup(lb_mlock *l, const char *key, size_t keylen, const lb_mlock_options *o) {
    l->key = lb__alloc(o->allocator, keylen + 1);
    if (!l->key) return LB_ENOMEM;
    memcpy(l->key, key, keylen);
    l->key[keylen] = '\0';
    l->keylen = keylen;
    size_t cap = keylen + 16;
    if (!(l->channel = lb__alloc(o->allocator, cap))) return LB_ENOMEM;
    int n = lb_companion_key(key, keylen, "released", l->channel, cap);
    if (n < 0) return LB_EINVAL;
    l->channellen = (size_t)n;
    if (o->ns) {
        if (lb_ns_keys_init(&l->ns, o->ns, strlen(o->ns)) != LB_OK) return LB_EINVAL;
        l->has_ns = 1;
        int rc = identity(l, o);
        if (rc != LB_OK) return rc;
    }
    return make_legacy(l, o);
}

int lb_mlock_new(lb_mlock **out, const char *key, size_t keylen, const lb_mlock_options *o) {
    lb_mlock_options defaults;
    if (!out) return LB_EINVAL;
    *out = NULL;
    if (!key || keylen == 0 || lb_lock_name_refused(key, keylen)) return LB_EINVAL;
    if (!o) {
        lb_mlock_options_init(&defaults);
        o = &defaults;
    }
    if (!valid_options(o)) return LB_EINVAL;
    lb_mlock *l = lb__alloc(o->allocator, sizeof *l);
    if (!l) return LB_ENOMEM;
    memset(l, 0, sizeof *l);
    l->opts = *o;
    /* Names and identity are copied; the caller's strings may go. */
    l->opts.ns = l->opts.client_id = l->opts.host = l->opts.version = NULL;
    l->mode = o->mode;
    l->holder_ms = -1;
    l->seen.codec = -1;
    l->seen.pttl_ms = -2;
    atomic_init(&l->notified, 0);
    l->rng = lb__random_seed();
    int rc = setup(l, key, keylen, o);
    if (rc != LB_OK) {
        lb_mlock_free(l);
        return rc;
    }
    *out = l;
    return LB_OK;
}

void lb_mlock_free(lb_mlock *l) {
    if (!l) return;
    const lb_allocator *a = l->opts.allocator;
    lb_legacy_lock_free(l->legacy);
    lb__free(a, l->key);
    lb__free(a, l->channel);
    lb__free(a, l);
}

static int run(lb_mlock *l, lb_target t, lb_machine *m) {
    if (!m) return lb__refuse(l->errstr, LB_ESTATE, LB__IN_FLIGHT);
    int rc = lb_target_run(t, m, l->opts.clock);
    memcpy(l->errstr, m->errstr, sizeof l->errstr);
    return rc;
}

int lb_mlock_try_acquire(lb_mlock *l, lb_target t) {
    if (!l) return LB_EINVAL;
    return run(l, t, lb__mlock_try_acquire_machine(l));
}

int lb_mlock_release(lb_mlock *l, lb_target t) {
    if (!l) return LB_EINVAL;
    return run(l, t, lb__mlock_release_machine(l));
}

int lb_mlock_extend(lb_mlock *l, lb_target t, int64_t ttl_ms) {
    if (!l) return LB_EINVAL;
    return run(l, t, lb__mlock_extend_machine(l, ttl_ms));
}

int lb_mlock_refresh(lb_mlock *l, lb_target t) {
    if (!l) return LB_EINVAL;
    return run(l, t, lb__mlock_refresh_machine(l));
}

void lb_mlock_notify(lb_mlock *l) {
    if (l) atomic_store(&l->notified, 1);
}

/* The handle's text is reset: the operation's own is the machine's. */
lb_machine *lb_mlock_machine(lb_mlock *l, lb_op op, int64_t ms) {
    if (!l) return NULL;
    l->errstr[0] = '\0';
    if (lb__machine_in_flight(&l->m)) {
        lb__refuse(l->errstr, LB_ESTATE, LB__IN_FLIGHT);
        return NULL;
    }
    switch (op) {
    case LB_OP_TRY_ACQUIRE: return lb__mlock_try_acquire_machine(l);
    case LB_OP_RELEASE: return lb__mlock_release_machine(l);
    case LB_OP_EXTEND: return lb__mlock_extend_machine(l, ms);
    case LB_OP_REFRESH: return lb__mlock_refresh_machine(l);
    default:
        lb__refuse(l->errstr, LB_EINVAL,
                   "invalid argument: operation %d is not the mode-following lock's", (int)op);
        return NULL;
    }
}

lb_mlock_info lb_mlock_info_of(const lb_mlock *l) {
    lb_mlock_info i;
    memset(&i, 0, sizeof i);
    i.value = i.client_id = i.errstr = "";
    if (!l) return i;
    i.mode = l->mode;
    i.held = l->held;
    i.held_mode = l->held_mode;
    i.control_key_missing = l->key_missing;
    i.value = l->value;
    i.value_len = l->valuelen;
    i.deadline_ns = l->deadline_ns;
    i.observed = &l->seen;
    i.commands = l->m.total;
    i.client_id = l->client_id;
    i.errstr = l->errstr;
    return i;
}
