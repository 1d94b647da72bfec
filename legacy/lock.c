/* The legacy lock handle: options, creation, state accessors and the sync
 * wrappers that run one operation's machine on a blocking connection. */
#include <string.h>

#include "legacy/internal.h"

void lb_legacy_options_init(lb_legacy_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->codec.kind = LB_CODEC_MS;
    o->variant = LB_LEGACY_WIRE;
    o->ttl_ms = 30000;
    o->nil_retries = 3;
    o->release_margin_ms = 1000;
    o->backoff_min_ms = 2;
    o->backoff_max_ms = 100;
}

static int validate(const lb_legacy_options *o) {
    char spec[128];
    if (o->ttl_ms <= 0 || o->nil_retries < 0 || o->release_margin_ms < 0) return 0;
    if (o->fleet_max_ttl_ms < 0) return 0;
    if (o->backoff_min_ms <= 0 || o->backoff_max_ms < o->backoff_min_ms) return 0;
    if (o->variant != LB_LEGACY_WIRE && o->variant != LB_LEGACY_SCRIPTED) return 0;
    /* A wire release refuses within the margin of expiry: with a ttl no longer
     * than the margin, every release would be refused and every lock would be
     * left to lapse. Such a configuration is a mistake, said at once. */
    if (o->variant == LB_LEGACY_WIRE && o->ttl_ms <= o->release_margin_ms) return 0;
    if (lb_codec_format(&o->codec, spec, sizeof spec) != LB_OK) return 0;
    /* A JSON field set by hand must obey the same rule as a parsed spec. */
    if (o->codec.kind == LB_CODEC_JSON) {
        lb_codec check;
        if (lb_codec_parse(&check, spec) != LB_OK) return 0;
    }
    return 1;
}

int lb_legacy_lock_new(lb_legacy_lock **out, const char *key, size_t keylen,
                       const lb_legacy_options *o) {
    lb_legacy_options defaults;
    if (!out) return LB_EINVAL;
    *out = NULL;
    if (!key || keylen == 0 || lb_lock_name_refused(key, keylen)) return LB_EINVAL;
    if (!o) {
        lb_legacy_options_init(&defaults);
        o = &defaults;
    }
    if (!validate(o)) return LB_EINVAL;
    lb_legacy_lock *l = lb__alloc(o->allocator, sizeof *l);
    if (!l) return LB_ENOMEM;
    memset(l, 0, sizeof *l);
    l->key = lb__alloc(o->allocator, keylen + 1);
    if (!l->key) {
        lb__free(o->allocator, l);
        return LB_ENOMEM;
    }
    memcpy(l->key, key, keylen);
    l->key[keylen] = '\0';
    l->keylen = keylen;
    l->opts = *o;
    l->codec = o->codec;
    l->rng = lb__random_seed();
    *out = l;
    return LB_OK;
}

void lb_legacy_lock_free(lb_legacy_lock *l) {
    if (!l) return;
    const lb_allocator *a = l->opts.allocator;
    lb__free(a, l->key);
    lb__free(a, l);
}

int lb__legacy_foreign(lb_legacy_lock *l, const char *s, size_t len, const char *during) {
    lb__escape(l->foreign, sizeof l->foreign, s, len < 64 ? len : 64);
    return lb__fail(&l->m, LB_EFOREIGN, "%s: value not in this client's format (%zu bytes: %s%s)",
                    during, len, l->foreign, len > 64 ? "..." : "");
}

/* Runs the handle's current operation and keeps the machine's error detail. */
static int run(lb_legacy_lock *l, lb_target t, lb_machine *m) {
    if (!m) return LB_ESTATE;
    int rc = lb_target_run(t, m, l->opts.clock);
    memcpy(l->errstr, m->errstr, sizeof l->errstr);
    return rc;
}

int lb_legacy_try_acquire(lb_legacy_lock *l, lb_target t) {
    if (!l) return LB_EINVAL;
    return run(l, t, lb__legacy_try_acquire_machine(l));
}

int lb_legacy_release(lb_legacy_lock *l, lb_target t) {
    if (!l) return LB_EINVAL;
    return run(l, t, lb__legacy_release_machine(l));
}

int lb_legacy_extend(lb_legacy_lock *l, lb_target t, int64_t ttl_ms) {
    if (!l) return LB_EINVAL;
    return run(l, t, lb__legacy_extend_machine(l, ttl_ms));
}

lb_machine *lb_legacy_machine(lb_legacy_lock *l, lb_op op, int64_t ms) {
    if (!l) return NULL;
    switch (op) {
    case LB_OP_TRY_ACQUIRE: return lb__legacy_try_acquire_machine(l);
    case LB_OP_RELEASE: return lb__legacy_release_machine(l);
    case LB_OP_EXTEND: return lb__legacy_extend_machine(l, ms);
    default: return NULL;
    }
}

lb_legacy_info lb_legacy_info_of(const lb_legacy_lock *l) {
    lb_legacy_info i = {0, "", 0, 0, 0, 0, "", 0, ""};
    if (!l) return i;
    i.held = l->held;
    i.value = l->value;
    i.value_len = l->valuelen;
    i.expiry = l->expiry;
    i.observed = l->has_observed_expiry;
    i.observed_expiry = l->has_observed_expiry ? l->observed_expiry : 0;
    i.foreign = l->foreign;
    i.commands = l->m.total;
    i.errstr = l->errstr;
    return i;
}
