/* One lock handle for the tool's lock commands, whatever the mode: the legacy
 * timestamp lock, the token lock (with its watchdog and fair waiting), or the
 * mode-following lock of the migration library, behind the few calls hold and
 * contend need. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool/common/server.h"
#include "tool/lock/lockopts.h"

struct lb__cli_lock {
    const lb__cli_lockopts *lo;
    lb_legacy_lock *legacy;
    lb_lock *modern;
    lb_mlock *mlock;
    int64_t fence; /* of the current acquisition, kept past the release */
};

/* ---- What the locks share: watchdog and waiter -------------------------------------- */
/* Their connections are made as the command's own: TCP or Unix socket, AUTH
 * and SELECT included. */
static redisContext *connect_cb(void *ud) {
    char err[512];
    return lb__cli_connect(ud, err, sizeof err);
}

/* A lock that follows a namespace starts in the mode its control key holds,
 * so that its first census entry already says the mode it will use; a --mode
 * that the namespace overrides is said on stderr, not silently replaced. */
static int start_mode(lb__cli_lockopts *lo, const lb__cli_conn *ns_conn, char *err, size_t cap) {
    lb_mode m;
    int found;
    if (!lo->mlock.ns) return 0;
    redisContext *c = lb__cli_connect(ns_conn, err, cap);
    if (!c) return -1;
    int rc = lb_mode_get(lb_on_conn(c), lo->mlock.ns, strlen(lo->mlock.ns), &m, &found);
    redisFree(c);
    lb_mode asked = lo->mlock.mode;
    if (rc == LB_OK && found) lo->mlock.mode = m;
    if (rc == LB_OK && lo->mode_given)
        if (!found || m != asked)
            fprintf(stderr, "lockbridge: note: namespace %s is in mode %s%s: the lock follows "
                    "it, not --mode %s\n", lo->mlock.ns, lb_mode_name(lo->mlock.mode),
                    found ? "" : " (no control key: its configured mode)", lb_mode_name(asked));
    if (rc == LB_OK || rc == LB_EFOREIGN || rc == LB_EWRONGTYPE) return 0;
    snprintf(err, cap, "reading the namespace's mode: %s", lb_strerror(rc));
    return -1;
}

/* Every lock of one run shares one census entry, "lockbridge:host:pid". */
static void census_identity(lb__cli_lockopts *lo, const lb__cli_conn *conn) {
    char host[64] = "localhost";
    if (!lo->mlock.ns || lo->mlock.client_id || lo->mlock.census_refresh_ms <= 0) return;
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    snprintf(lo->census_id, sizeof lo->census_id, "lockbridge:%s:%ld", host, (long)getpid());
    lo->mlock.client_id = lo->census_id;
    lo->conn = conn;
}

/* At the end of a run its census entry goes with it (a run that is killed
 * leaves it to go stale). On a Cluster the entry lives on the namespace's
 * primary, which lo->conn reaches. */
static void census_leave(lb__cli_lockopts *lo) {
    char err[256];
    lb_ns_keys k;
    if (!lo->census_id[0] || !lo->conn) return;
    if (lb_ns_keys_init(&k, lo->mlock.ns, strlen(lo->mlock.ns)) != LB_OK) return;
    redisContext *c = lb__cli_connect(lo->conn, err, sizeof err);
    if (!c) return;
    redisReply *r = redisCommand(c, "HDEL %s %s", k.census, lo->census_id);
    if (r) freeReplyObject(r);
    redisFree(c);
    lo->census_id[0] = '\0';
}

int lb__cli_lockenv_start(lb__cli_lockopts *lo, const lb__cli_route *route, char *err,
                          size_t cap) {
    int rc = LB_OK;
    const lb__cli_conn *conn = &route->key;
    if (start_mode(lo, &route->ns, err, cap) != 0) return -1;
    census_identity(lo, &route->ns);
    if (lo->watchdog) {
        lb_watchdog_options o;
        lb_watchdog_options_init(&o);
        o.connect = connect_cb;
        o.connect_ud = (void *)conn;
        if ((rc = lb_watchdog_new(&lo->wd, &o)) != LB_OK) {
            snprintf(err, cap, "cannot start the watchdog: %s", lb_strerror(rc));
            return -1;
        }
    }
    /* A fair wait on one server (Sentinel's primary included) blocks on the
     * baton, then on its grant list; only through a Cluster does it listen
     * on a waiter. */
    if (lo->modern.fair && route->cluster) {
        lb_waiter_options o;
        lb_waiter_options_init(&o);
        o.connect = connect_cb;
        o.connect_ud = (void *)conn;
        if ((rc = lb_waiter_new(&lo->waiter, &o)) != LB_OK) {
            snprintf(err, cap, "cannot start the waiter: %s", lb_strerror(rc));
            lb__cli_lockenv_stop(lo);
            return -1;
        }
    }
    return 0;
}

void lb__cli_lockenv_stop(lb__cli_lockopts *lo) {
    census_leave(lo);
    lb_watchdog_free(lo->wd);
    lb_waiter_free(lo->waiter);
    lo->wd = NULL;
    lo->waiter = NULL;
}

/* ---- The handle ------------------------------------------------------------------------ */
int lb__cli_lock_new(lb__cli_lock **out, const char *key, const lb__cli_lockopts *lo) {
    *out = NULL;
    lb__cli_lock *l = calloc(1, sizeof *l);
    if (!l) return LB_ENOMEM;
    l->lo = lo;
    int rc;
    if (lo->following) rc = lb_mlock_new(&l->mlock, key, strlen(key), &lo->mlock);
    else if (lo->mode == LB__CLI_MODE_MODERN)
        rc = lb_lock_new(&l->modern, key, strlen(key), &lo->modern);
    else rc = lb_legacy_lock_new(&l->legacy, key, strlen(key), &lo->legacy);
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
    lb_lock_free(l->modern); /* ends its watch first */
    lb_mlock_free(l->mlock);
    free(l);
}

/* A lock the watchdog cannot watch is released at once rather than held
 * without the renewals the user asked for. */
static int watch(lb__cli_lock *l, lb_target t) {
    lb_watch_options o;
    lb_watch_options_init(&o);
    int rc = lb_watchdog_watch(l->lo->wd, l->modern, &o);
    if (rc == LB_OK) return LB_OK;
    lb_lock_release(l->modern, t);
    return rc;
}

int lb__cli_lock_acquire(lb__cli_lock *l, lb_target t, int64_t wait_ms) {
    if (l->legacy) return lb_legacy_acquire(l->legacy, t, wait_ms);
    if (l->mlock) return lb_mlock_acquire(l->mlock, t, wait_ms);
    /* A fair wait on one connection blocks on the baton, then on its grant
     * list (no waiter);
     * through a Cluster it listens on the waiter. */
    lb_waiter *w = t.kind == LB_TARGET_CONN ? NULL : l->lo->waiter;
    int rc = w ? lb_lock_acquire_wait(l->modern, t, w, wait_ms) : lb_lock_acquire(l->modern, t, wait_ms);
    if (rc == LB_OK) l->fence = lb_lock_info_of(l->modern).fence;
    if (rc == LB_OK && l->lo->wd) rc = watch(l, t);
    return rc;
}

int lb__cli_lock_release(lb__cli_lock *l, lb_target t) {
    if (l->legacy) return lb_legacy_release(l->legacy, t);
    if (l->mlock) return lb_mlock_release(l->mlock, t);
    return lb_lock_release(l->modern, t);
}

int lb__cli_lock_watched(const lb__cli_lock *l) { return l->modern && l->lo->wd; }

int lb__cli_lock_watch_lost(const lb__cli_lock *l, const char **why) {
    lb_watch_reason reason = (lb_watch_reason)0;
    *why = "";
    if (!l->modern || !l->lo->wd) return 0;
    if (lb_watchdog_check(l->lo->wd, l->modern, NULL, &reason) != LB_ELOST) return 0;
    *why = lb_watch_reason_name(reason);
    return 1;
}

const char *lb__cli_lock_errstr(const lb__cli_lock *l) {
    if (l->legacy) return lb_legacy_info_of(l->legacy).errstr;
    if (l->mlock) return lb_mlock_info_of(l->mlock).errstr;
    return lb_lock_info_of(l->modern).errstr;
}

uint64_t lb__cli_lock_commands(const lb__cli_lock *l) {
    if (!l) return 0;
    if (l->legacy) return lb_legacy_info_of(l->legacy).commands;
    if (l->mlock) return lb_mlock_info_of(l->mlock).commands;
    return lb_lock_info_of(l->modern).commands;
}

int64_t lb__cli_lock_fence(const lb__cli_lock *l) { return l->fence; }

/* ---- Reports ------------------------------------------------------------------------- */
static void describe_mlock_held(const lb__cli_lock *l, cJSON *o) {
    const lb__cli_lockopts *lo = l->lo;
    lb_mlock_info mi = lb_mlock_info_of(l->mlock);
    size_t len = mi.value_len;
    const char *value = mi.value;
    lb_mode m = lb_mlock_info_of(l->mlock).held_mode;
    lb__cli_add_str(o, "mode", lb_mode_name(m));
    lb__cli_add_bytes(o, "value", value, len);
    if (m != LB_MODE_MODERN) lb__cli_add_str(o, "codec", lo->codec_spec);
    if (m == LB_MODE_LEGACY)
        lb__cli_add_str(o, "variant", lb__cli_variant_name(lo->legacy.variant));
    lb__cli_add_i64(o, "ttl_ms", lo->mlock.ttl_ms);
    if (m == LB_MODE_COMPAT) lb__cli_add_i64(o, "grace_ms", lo->mlock.grace_ms);
    if (lo->mlock.ns) {
        lb__cli_add_str(o, "ns", lo->mlock.ns);
        lb__cli_add_str(o, "client_id", lb_mlock_info_of(l->mlock).client_id);
    }
}

/* What an "acquired" event says about the lock: the legacy value and its expiry
 * in codec units, the token, its TTL and the fencing number, or the value and
 * mode the mode-following lock acquired in. */
void lb__cli_lock_describe_held(const lb__cli_lock *l, cJSON *o) {
    const lb__cli_lockopts *lo = l->lo;
    if (l->mlock) {
        describe_mlock_held(l, o);
        return;
    }
    lb__cli_add_str(o, "mode", lb__cli_mode_name(lo->mode));
    if (l->legacy) {
        lb_legacy_info li = lb_legacy_info_of(l->legacy);
        size_t len = li.value_len;
        const char *value = li.value;
        lb__cli_add_bytes(o, "value", value, len);
        lb__cli_add_str(o, "codec", lo->codec_spec);
        lb__cli_add_str(o, "variant", lb__cli_variant_name(lo->legacy.variant));
        lb__cli_add_i64(o, "expiry", lb_legacy_info_of(l->legacy).expiry);
        return;
    }
    lb__cli_add_str(o, "token", lb_lock_info_of(l->modern).token);
    lb__cli_add_i64(o, "ttl_ms", lo->modern.ttl_ms);
    if (lo->modern.fencing) lb__cli_add_i64(o, "fence", l->fence);
    if (lo->wd) lb__cli_add_bool(o, "watchdog", 1);
    if (lo->modern.fair) lb__cli_add_bool(o, "fair", 1);
}

/* What a "not_acquired" event says about the holder, when it was seen: its
 * expiry in codec units (legacy), its remaining TTL (-1: none, held for good),
 * or what the mode-following lock found at the key. */
void lb__cli_lock_describe_busy(const lb__cli_lock *l, cJSON *o) {
    if (l->legacy && lb_legacy_info_of(l->legacy).observed)
        lb__cli_add_i64(o, "holder_expiry", lb_legacy_info_of(l->legacy).observed_expiry);
    if (l->modern) {
        int64_t t = lb_lock_info_of(l->modern).holder_ttl_ms;
        if (t >= 0) lb__cli_add_i64(o, "holder_ttl_ms", t);
        else cJSON_AddNullToObject(o, "holder_ttl_ms");
    }
    const lb_class *seen = l->mlock ? lb_mlock_info_of(l->mlock).observed : NULL;
    if (seen && seen->format != LB_FORMAT_ABSENT) {
        lb__cli_add_str(o, "holder_format", lb_format_name(seen->format));
        if (seen->format == LB_FORMAT_LEGACY || seen->format == LB_FORMAT_COMPAT) {
            lb__cli_add_i64(o, "holder_expiry", seen->expiry);
            lb__cli_add_i64(o, "holder_remaining_ms", seen->remaining_ms);
        }
        if (seen->pttl_ms >= 0) lb__cli_add_i64(o, "holder_ttl_ms", seen->pttl_ms);
    }
}

/* The foreign value the legacy lock saw, escaped; "" when none (token locks
 * judge no values: a key they cannot take is simply held). */
const char *lb__cli_lock_foreign(const lb__cli_lock *l) {
    return l->legacy ? lb_legacy_info_of(l->legacy).foreign : "";
}
