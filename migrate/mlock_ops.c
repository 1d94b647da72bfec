/* The mode-following lock's machine: the periodic duty (census refresh and
 * control-key read, one script call) before an acquire when due, then the
 * operation in the mode it starts in: legacy forwards to the legacy lock's
 * machine, compat and modern run the cross-format machines. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "migrate/internal.h"

enum { S_START, S_TOUCH, S_LEGACY };

#define LOCK_OF(m) ((lb_mlock *)(void *)(m))

static int due(int64_t now_ns, int64_t last_ns, int64_t every_ms) {
    int64_t since;
    return lb__sub64(now_ns, last_ns, &since) || since >= every_ms * 1000000 || since < 0;
}

/* Whether the next acquire reads the control key or refreshes the census
 * first. A notification is consumed here. */
static int touch_due(lb_mlock *l, const lb_now *now) {
    if (!l->has_ns) return 0;
    int notified = atomic_exchange(&l->notified, 0);
    int mode_due = l->opts.follow &&
                   (notified || !l->mode_read || due(now->mono_ns, l->mode_read_ns,
                                                     l->opts.mode_refresh_ms));
    return mode_due || (l->opts.census_refresh_ms > 0 &&
                        (!l->census_done ||
                         due(now->mono_ns, l->census_ns, l->opts.census_refresh_ms)));
}

/* A follower's entry leaves its mode to the script, which writes the mode
 * the read decides: "mode":"NAME" becomes "mode":"?". The id comes first and
 * its quotes are escaped, so the first match is the mode field. */
static void mode_placeholder(lb_mlock *l, lb_mode m) {
    char field[32];
    int n = snprintf(field, sizeof field, "\"mode\":\"%s\"", lb_mode_name(m));
    char *at = memmem(l->census_json, l->census_jsonlen, field, (size_t)n);
    if (!at) return;
    size_t tail = l->census_jsonlen - (size_t)(at - l->census_json) - (size_t)n;
    memcpy(at, "\"mode\":\"?\"", 10);
    memmove(at + 10, at + n, tail + 1);
    l->census_jsonlen -= (size_t)n - 10;
}

static int send_touch(lb_mlock *l, const lb_now *now) {
    lb_census_entry e;
    l->census_now = l->opts.census_refresh_ms > 0;
    l->census_jsonlen = 0;
    if (l->census_now) {
        memset(&e, 0, sizeof e);
        strcpy(e.id, l->client_id);
        strcpy(e.host, l->host);
        strcpy(e.version, l->version);
        e.mode = l->mode;
        e.pid = (int64_t)getpid();
        e.seen_ms = now->wall_us / 1000;
        if (lb__census_encode(&e, l->census_json, sizeof l->census_json, &l->census_jsonlen) != LB_OK)
            return lb__fail(&l->m, LB_EINVAL, "census entry does not fit");
        if (l->opts.follow) mode_placeholder(l, l->mode);
    }
    /* A follower that has seen a mode keeps it when the key is absent. */
    lb_mode absent = l->mode_seen ? l->mode : l->opts.mode;
    snprintf(l->modes_arg, sizeof l->modes_arg, "%s:%s", lb_mode_name(absent),
             lb_mode_name(l->mode));
    lb__cmd_script(&l->m, &lb__script_migrate_touch, "2");
    lb__cmd_arg(&l->m.cmd, l->ns.mode, l->ns.modelen);
    lb__cmd_arg(&l->m.cmd, l->ns.census, l->ns.censuslen);
    lb__cmd_arg(&l->m.cmd, l->census_now ? l->client_id : "", l->census_now ? strlen(l->client_id) : 0);
    lb__cmd_arg(&l->m.cmd, l->census_json, l->census_jsonlen);
    lb__cmd_argz(&l->m.cmd, l->modes_arg);
    l->state = S_TOUCH;
    return LB_STEP_SEND;
}

/* The legacy lock's machine runs inside ours: its commands are sent as ours
 * (a NOSCRIPT is answered by our machine, which resends the body) and every
 * other reply is fed to it. */
static int forward(lb_mlock *l, const redisReply *r, const lb_now *now);

static int begin_op(lb_mlock *l, const lb_now *now) {
    l->op_mode = l->op == LB__OP_ACQUIRE ? l->mode : l->held_mode;
    if (l->op == LB__OP_ACQUIRE) {
        memset(&l->seen, 0, sizeof l->seen);
        l->seen.codec = -1;
        l->seen.pttl_ms = -2;
        l->holder_ms = -1;
    }
    if (l->op_mode != LB_MODE_LEGACY) {
        l->state = LB__STATE_X;
        return lb__x_start(l, now);
    }
    switch (l->op) {
    case LB__OP_ACQUIRE: l->sub = lb__legacy_try_acquire_machine(l->legacy); break;
    case LB__OP_RELEASE: l->sub = lb__legacy_release_machine(l->legacy); break;
    case LB__OP_EXTEND: l->sub = lb__legacy_extend_machine(l->legacy, l->extend_ttl_ms); break;
    default: l->sub = NULL;
    }
    if (!l->sub) return lb__fail(&l->m, LB_ESTATE, "legacy operation could not start");
    /* The legacy machine's need of scripts (a scripted lock only a script can
     * release) is this machine's: the drivers look at this one, and check the
     * server runs scripts before its first command, so no lock is taken that
     * could not be released. */
    if (l->op == LB__OP_ACQUIRE && l->opts.legacy_variant == LB_LEGACY_SCRIPTED)
        l->m.needs_scripts = 1;
    l->sent_ns = now->mono_ns;
    l->state = S_LEGACY;
    return forward(l, NULL, now);
}

/* What the legacy attempt saw last. A foreign value ends the attempt, at GET
 * or at GETSET: then that value is what was seen, whatever GET read before. */
static void legacy_seen(lb_mlock *l, int rc, const lb_now *now) {
    int64_t left;
    lb_legacy_info li = lb_legacy_info_of(l->legacy);
    int64_t t = li.observed_expiry;
    if (rc == LB_EFOREIGN) {
        l->seen.format = LB_FORMAT_UNKNOWN;
    } else if (li.observed) {
        int64_t cur = lb_codec_now(&l->opts.codec, now);
        l->seen.format = LB_FORMAT_LEGACY;
        l->seen.codec = 0;
        l->seen.expiry = t;
        l->seen.expired = cur > t;
        l->seen.pttl_ms = -1;
        l->seen.remaining_ms = l->seen.expired ? 0
                               : lb__sub64(t, cur, &left) ? INT64_MAX
                                                          : lb__codec_units_to_ms(&l->opts.codec, left);
        l->holder_ms = l->seen.remaining_ms;
    }
}

static int legacy_done(lb_mlock *l, int rc, const lb_now *now) {
    l->held = lb_legacy_info_of(l->legacy).held;
    if (l->held) {
        lb_legacy_info li = lb_legacy_info_of(l->legacy);
        l->valuelen = li.value_len;
        memcpy(l->value, li.value, l->valuelen + 1);
        l->held_mode = LB_MODE_LEGACY;
        if (rc == LB_OK && (l->op == LB__OP_ACQUIRE || l->op == LB__OP_EXTEND))
            l->deadline_ns = lb__lease_end_ns(
                l->sent_ns, l->op == LB__OP_ACQUIRE ? l->opts.ttl_ms : l->extend_ttl_ms);
    }
    if (l->op == LB__OP_ACQUIRE && rc != LB_OK) legacy_seen(l, rc, now);
    if (rc == LB_OK) return LB_OK;
    return lb__fail(&l->m, rc, "%s", lb_machine_errstr(l->sub));
}

static int forward(lb_mlock *l, const redisReply *r, const lb_now *now) {
    int rc = lb_machine_step(l->sub, r, now);
    if (rc == LB_STEP_SEND) {
        l->m.cmd = *lb_machine_command(l->sub);
        /* Ours to resend on NOSCRIPT (the reply then reaches the legacy
         * machine as the script's), and named by the script in traces. */
        l->m.script = l->sub->script;
        return LB_STEP_SEND;
    }
    rc = legacy_done(l, rc, now);
    l->sub = NULL;
    return rc;
}

/* The mode read from the control key: a name; absent (a follower that has
 * seen a mode keeps it, and says the key is missing: a vanished key must never
 * move it, least of all two stages; one that has not uses its configured
 * mode); or something else (the last known mode stays). */
static int on_touch(lb_mlock *l, const redisReply *r, const lb_now *now) {
    /* A read that failed is retried by the next acquire, due or not. */
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER)
        atomic_store(&l->notified, 1);
    if (!r) return lb__fail(&l->m, LB_EIO, "connection failed while reading the mode");
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(&l->m, r, "mode read");
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER)
        return lb__fail(&l->m, LB_EPROTO, "mode read: unexpected reply");
    long long k = r->element[0]->integer;
    lb_mode m;
    if (l->opts.follow) {
        l->key_missing = k == 0 && l->mode_seen;
        if (k == 0 && !l->mode_seen) l->mode = l->opts.mode;
        else if (k == 1 && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING &&
                 lb_mode_parse(r->element[1]->str, (size_t)r->element[1]->len, &m) == LB_OK) {
            l->mode = m;
            l->mode_seen = 1;
        }
        l->mode_read = 1;
        l->mode_read_ns = now->mono_ns;
    }
    if (l->census_now) {
        l->census_done = 1;
        l->census_ns = now->mono_ns;
    }
    if (l->op == LB__OP_REFRESH) return LB_OK;
    return begin_op(l, now);
}

static int start(lb_mlock *l, const lb_now *now) {
    switch (l->op) {
    case LB__OP_ACQUIRE:
        if (l->held) return lb__fail(&l->m, LB_ESTATE, "already held by this handle");
        return touch_due(l, now) ? send_touch(l, now) : begin_op(l, now);
    case LB__OP_REFRESH:
        if (!l->has_ns) return lb__fail(&l->m, LB_EINVAL, "no namespace configured");
        atomic_store(&l->notified, 0);
        return send_touch(l, now);
    default:
        if (!l->held) return lb__fail(&l->m, LB_ESTATE, "not held by this handle");
        return begin_op(l, now);
    }
}

static int step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb_mlock *l = LOCK_OF(m);
    switch (l->state) {
    case S_START: return start(l, now);
    case S_TOUCH: return on_touch(l, r, now);
    case S_LEGACY: return forward(l, r, now);
    default: return lb__x_step(l, r, now);
    }
}

static lb_machine *begin(lb_mlock *l, int op) {
    if (!l || lb__machine_in_flight(&l->m)) return NULL;
    lb__machine_begin(&l->m, step);
    l->op = op;
    l->state = S_START;
    l->sub = NULL;
    return &l->m;
}

lb_machine *lb__mlock_try_acquire_machine(lb_mlock *l) { return begin(l, LB__OP_ACQUIRE); }
lb_machine *lb__mlock_release_machine(lb_mlock *l) { return begin(l, LB__OP_RELEASE); }
lb_machine *lb__mlock_refresh_machine(lb_mlock *l) { return begin(l, LB__OP_REFRESH); }

lb_machine *lb__mlock_extend_machine(lb_mlock *l, int64_t ttl_ms) {
    lb_machine *m = begin(l, LB__OP_EXTEND);
    if (m) l->extend_ttl_ms = ttl_ms;
    return m;
}
