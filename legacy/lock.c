/* The legacy lock handle: options, creation, state accessors and the sync
 * wrappers that run one operation's machine on a blocking connection. */
#include <stdarg.h>
#include <stdio.h>
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

/* Writes why lb_legacy_lock_new fails into o->errbuf, if given; returns `status`. */
static int refuse(const lb_legacy_options *o, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(const lb_legacy_options *o, int status, const char *fmt, ...) {
    if (o->errbuf && o->errbuf_size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(o->errbuf, o->errbuf_size, fmt, ap);
        va_end(ap);
    }
    return status;
}

static int validate(const lb_legacy_options *o) {
    char spec[128];
    if (o->ttl_ms <= 0) return refuse(o, LB_EINVAL, "ttl_ms must be positive");
    if (o->nil_retries < 0) return refuse(o, LB_EINVAL, "nil_retries must not be negative");
    if (o->release_margin_ms < 0)
        return refuse(o, LB_EINVAL, "release_margin_ms must not be negative");
    if (o->fleet_max_ttl_ms < 0)
        return refuse(o, LB_EINVAL, "fleet_max_ttl_ms must not be negative");
    if (o->foreign_fails_at_once != 0 && o->foreign_fails_at_once != 1)
        return refuse(o, LB_EINVAL, "foreign_fails_at_once must be 0 or 1");
    if (o->backoff_min_ms <= 0 || o->backoff_max_ms < o->backoff_min_ms)
        return refuse(o, LB_EINVAL, "backoff_min_ms must be positive and at most backoff_max_ms");
    if (o->variant != LB_LEGACY_WIRE && o->variant != LB_LEGACY_SCRIPTED)
        return refuse(o, LB_EINVAL, "variant %d is neither LB_LEGACY_WIRE nor LB_LEGACY_SCRIPTED",
                      (int)o->variant);
    /* A wire release refuses within the margin of expiry: with a ttl no longer
     * than the margin, every release would be refused and every lock would be
     * left to lapse. Such a configuration is a mistake, said at once. */
    if (o->variant == LB_LEGACY_WIRE && o->ttl_ms <= o->release_margin_ms)
        return refuse(o, LB_EINVAL,
                      "ttl_ms (%lld) is not longer than release_margin_ms (%lld): every wire "
                      "release would be refused; raise ttl_ms or lower release_margin_ms",
                      (long long)o->ttl_ms, (long long)o->release_margin_ms);
    if (lb_codec_format(&o->codec, spec, sizeof spec) != LB_OK)
        return refuse(o, LB_EINVAL, "codec is not a valid codec");
    /* A JSON field set by hand must obey the same rule as a parsed spec. */
    if (o->codec.kind == LB_CODEC_JSON) {
        lb_codec check;
        if (lb_codec_parse(&check, spec) != LB_OK)
            return refuse(o, LB_EINVAL, "codec's JSON field is not a valid field name");
    }
    return LB_OK;
}

int lb_legacy_lock_new(lb_legacy_lock **out, const char *key, size_t keylen,
                       const lb_legacy_options *o) {
    lb_legacy_options defaults;
    if (o && o->errbuf && o->errbuf_size > 0) o->errbuf[0] = '\0';
    if (!out) return o ? refuse(o, LB_EINVAL, "out is NULL") : LB_EINVAL;
    *out = NULL;
    if (!o) {
        lb_legacy_options_init(&defaults);
        o = &defaults;
    }
    if (!key || keylen == 0) return refuse(o, LB_EINVAL, "the key is empty");
    const char *why = lb_lock_name_refused(key, keylen);
    if (why) return refuse(o, LB_EINVAL, "%s", why);
    int rc = validate(o);
    if (rc != LB_OK) return rc;
    lb_legacy_lock *l = lb__alloc(o->allocator, sizeof *l);
    if (!l) return refuse(o, LB_ENOMEM, "out of memory");
    memset(l, 0, sizeof *l);
    l->key = lb__alloc(o->allocator, keylen + 1);
    if (!l->key) {
        lb__free(o->allocator, l);
        return refuse(o, LB_ENOMEM, "out of memory");
    }
    memcpy(l->key, key, keylen);
    l->key[keylen] = '\0';
    l->keylen = keylen;
    l->opts = *o;
    l->opts.errbuf = NULL; /* the caller's, for this call only */
    l->opts.errbuf_size = 0;
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
    if (!m) return lb__refuse(l->errstr, LB_ESTATE, LB__IN_FLIGHT);
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

/* The handle's text is reset: the operation's own is the machine's. */
lb_machine *lb_legacy_machine(lb_legacy_lock *l, lb_op op, int64_t ms) {
    if (!l) return NULL;
    l->errstr[0] = '\0';
    if (lb__machine_in_flight(&l->m)) {
        lb__refuse(l->errstr, LB_ESTATE, LB__IN_FLIGHT);
        return NULL;
    }
    switch (op) {
    case LB_OP_TRY_ACQUIRE: return lb__legacy_try_acquire_machine(l);
    case LB_OP_RELEASE: return lb__legacy_release_machine(l);
    case LB_OP_EXTEND: return lb__legacy_extend_machine(l, ms);
    default:
        lb__refuse(l->errstr, LB_EINVAL, "invalid argument: operation %d is not the legacy lock's",
                   (int)op);
        return NULL;
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
