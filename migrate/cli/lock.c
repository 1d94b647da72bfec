/* One lock handle for the tool's lock commands, whatever the mode: the legacy
 * timestamp lock or the token lock, behind the few calls hold and contend need. */
#include <stdlib.h>
#include <string.h>

#include "migrate/cli/cli.h"

struct lb__cli_lock {
    lb__cli_mode mode;
    const lb__cli_lockopts *lo;
    lb_legacy_lock *legacy;
    lb_lock *modern;
    int64_t fence; /* of the current acquisition, kept past the release */
};

int lb__cli_lock_new(lb__cli_lock **out, const char *key, const lb__cli_lockopts *lo) {
    *out = NULL;
    lb__cli_lock *l = calloc(1, sizeof *l);
    if (!l) return LB_ENOMEM;
    l->mode = lo->mode;
    l->lo = lo;
    int rc = LB_EINVAL;
    if (lo->mode == LB__CLI_MODE_LEGACY)
        rc = lb_legacy_lock_new(&l->legacy, key, strlen(key), &lo->legacy);
    else if (lo->mode == LB__CLI_MODE_MODERN)
        rc = lb_lock_new(&l->modern, key, strlen(key), &lo->modern);
    if (rc != LB_OK) {
        free(l);
        return rc;
    }
    *out = l;
    return LB_OK;
}

void lb__cli_lock_free(lb__cli_lock *l) {
    if (!l) return;
    lb_legacy_lock_free(l->legacy);
    lb_lock_free(l->modern);
    free(l);
}

int lb__cli_lock_acquire(lb__cli_lock *l, redisContext *c, int64_t wait_ms) {
    if (l->legacy) return lb_legacy_acquire(l->legacy, c, wait_ms);
    int rc = lb_lock_acquire(l->modern, c, wait_ms);
    if (rc == LB_OK) l->fence = lb_lock_fence(l->modern);
    return rc;
}

int lb__cli_lock_release(lb__cli_lock *l, redisContext *c) {
    return l->legacy ? lb_legacy_release(l->legacy, c) : lb_lock_release(l->modern, c);
}

const char *lb__cli_lock_errstr(const lb__cli_lock *l) {
    return l->legacy ? lb_legacy_errstr(l->legacy) : lb_lock_errstr(l->modern);
}

uint64_t lb__cli_lock_commands(const lb__cli_lock *l) {
    if (!l) return 0;
    return l->legacy ? lb_legacy_commands(l->legacy) : lb_lock_commands(l->modern);
}

int64_t lb__cli_lock_fence(const lb__cli_lock *l) { return l->fence; }

/* What an "acquired" event says about the lock: the legacy value and its expiry
 * in codec units, or the token, its TTL and the fencing number. */
void lb__cli_lock_describe_held(const lb__cli_lock *l, cJSON *o) {
    const lb__cli_lockopts *lo = l->lo;
    lb__cli_add_str(o, "mode", lb__cli_mode_name(l->mode));
    if (l->legacy) {
        size_t len;
        const char *value = lb_legacy_value(l->legacy, &len);
        lb__cli_add_bytes(o, "value", value, len);
        lb__cli_add_str(o, "codec", lo->codec_spec);
        lb__cli_add_str(o, "variant", lb__cli_variant_name(lo->legacy.variant));
        lb__cli_add_i64(o, "expiry", lb_legacy_expiry(l->legacy));
        return;
    }
    lb__cli_add_str(o, "token", lb_lock_token(l->modern));
    lb__cli_add_i64(o, "ttl_ms", lo->modern.ttl_ms);
    if (lo->modern.fencing) lb__cli_add_i64(o, "fence", l->fence);
}

/* What a "not_acquired" event says about the holder, when it was seen: its
 * expiry in codec units (legacy) or its remaining TTL (-1: none, held for good). */
void lb__cli_lock_describe_busy(const lb__cli_lock *l, cJSON *o) {
    int64_t t;
    if (l->legacy && lb_legacy_observed_expiry(l->legacy, &t) == LB_OK)
        lb__cli_add_i64(o, "holder_expiry", t);
    if (l->modern) {
        t = lb_lock_holder_ttl(l->modern);
        if (t >= 0) lb__cli_add_i64(o, "holder_ttl_ms", t);
        else cJSON_AddNullToObject(o, "holder_ttl_ms");
    }
}

/* The foreign value the legacy lock saw, escaped; "" when none (token locks
 * judge no values: a key they cannot take is simply held). */
const char *lb__cli_lock_foreign(const lb__cli_lock *l) {
    return l->legacy ? lb_legacy_foreign(l->legacy) : "";
}
