/* The race harness's world: clients on a virtual clock, a schedule interpreter
 * and the invariants checked after every step (see race.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/internal.h"
#include "modern/internal.h"
#include "race/race.h"

lbr_part *lbr_model_new(const char *kind, const lbr_part_config *cfg);
lbr_part *lbr_migrate_part_new(const char *kind, const lbr_part_config *cfg);
const char *lbr_operator_broken(const lbr_part *p);
int lbr_part_acting(const lbr_part *p, const lb_now *now);
void lbr_warp_gate(redisContext *c, const char *key, long long ms);
lbr_part *lbr_fair_part_new(const char *kind, const lbr_part_config *cfg);
lbr_part *lbr_spoiler_new(const char *kind, const lbr_part_config *cfg);
int lbr_fair_warp(redisContext *c, const char *key, long long ms, char *live, size_t cap);
void lbr_fair_reset(redisContext *c, const char *key);
int lbr_fair_untimed_key(redisContext *c, const char *key, char *bad, size_t cap);
lbr_part *lbr_baton_part_new(const char *kind, const lbr_part_config *cfg);
void lbr_baton_warp(redisContext *c, const char *key, long long ms);
void lbr_baton_reset(redisContext *c, const char *key);
int lbr_baton_untimed_key(redisContext *c, const char *key, char *bad, size_t cap);
int lbr_fair_blocked_on_baton(const lbr_part *p, const lb_machine *running);

/* Clients of a baton list: the candidate hand-off's (baton_parts.c), "baton"
 * and its naive kinds, and the fair lock's wait that tries it first
 * ("lb-fair-baton", fair_parts.c, which lbr_part_new asks first). */
static int is_baton(const char *kind) { return strstr(kind, "baton") != NULL; }

/* ---- lockbridge's own clients as participants ------------------------------------ */

typedef struct lbpart {
    lbr_part part;
    lb_legacy_lock *lock;
} lbpart;

#define LBPART(p) ((lbpart *)(void *)(p))

static lb_machine *lb_acq(lbr_part *p) { return lb_legacy_machine(LBPART(p)->lock, LB_OP_TRY_ACQUIRE, 0); }
static lb_machine *lb_rel(lbr_part *p) { return lb_legacy_machine(LBPART(p)->lock, LB_OP_RELEASE, 0); }
static int lb_bel(const lbr_part *p) { return lb_legacy_info_of(LBPART(p)->lock).held; }
static int lb_valid(const lbr_part *p, const lb_codec *codec, const lb_now *now) {
    return lb_codec_now(codec, now) <= lb_legacy_info_of(LBPART(p)->lock).expiry;
}
static const char *lb_val(const lbr_part *p, size_t *len) {
    *len = lb_legacy_info_of(LBPART(p)->lock).value_len;
    return lb_legacy_info_of(LBPART(p)->lock).value;
}
static void lb_destroy(lbr_part *p) {
    lb_legacy_lock_free(LBPART(p)->lock);
    free(p);
}

/* lockbridge's token lock: valid until the lease it computed on its own
 * monotonic clock, from the moment it sent the acquire. */
typedef struct tokpart {
    lbr_part part;
    lb_lock *lock;
} tokpart;

#define TOKPART(p) ((tokpart *)(void *)(p))

static lb_machine *tok_acq(lbr_part *p) { return lb_lock_machine(TOKPART(p)->lock, LB_OP_TRY_ACQUIRE, 0); }
static lb_machine *tok_rel(lbr_part *p) { return lb_lock_machine(TOKPART(p)->lock, LB_OP_RELEASE, 0); }
/* "lb-modern-courteous": a lock outside fair mode that always believes fair
 * clients wait (its note forever fresh), so that every release of it goes
 * as a fair holder's would (lb__fair_courteous), with or without them. */
static lb_machine *courteous_rel(lbr_part *p) {
    lb_lock *l = TOKPART(p)->lock;
    l->note_found_queue = 1;
    l->noted_ns = INT64_MAX / 4;
    return lb_lock_machine(l, LB_OP_RELEASE, 0);
}
static int tok_bel(const lbr_part *p) { return lb_lock_info_of(TOKPART(p)->lock).held; }
static int tok_valid(const lbr_part *p, const lb_codec *codec, const lb_now *now) {
    (void)codec;
    return now->mono_ns <= lb_lock_info_of(TOKPART(p)->lock).deadline_ns;
}
static const char *tok_val(const lbr_part *p, size_t *len) {
    const char *t = lb_lock_info_of(TOKPART(p)->lock).token;
    *len = strlen(t);
    return t;
}
static int64_t tok_fence(const lbr_part *p) { return lb_lock_info_of(TOKPART(p)->lock).fence; }
static void tok_destroy(lbr_part *p) {
    lb_lock_free(TOKPART(p)->lock);
    free(p);
}

static lbr_part *token_part_new(const char *kind, const lbr_part_config *cfg, int fenced) {
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.ttl_ms = cfg->ttl_ms;
    o.fencing = fenced;
    o.clock = cfg->clock;
    tokpart *tp = calloc(1, sizeof *tp);
    if (!tp) return NULL;
    if (lb_lock_new(&tp->lock, cfg->key, strlen(cfg->key), &o) != LB_OK) {
        free(tp);
        return NULL;
    }
    tp->part = (lbr_part){kind, tok_acq, tok_rel, tok_bel, tok_valid, tok_val, tok_destroy,
                          fenced ? tok_fence : NULL};
    if (strcmp(kind, "lb-modern-courteous") == 0) tp->part.release = courteous_rel;
    return &tp->part;
}

lbr_part *lbr_part_new(const char *kind, const lbr_part_config *cfg) {
    int scripted = strcmp(kind, "lb-scripted") == 0;
    if (strcmp(kind, "lb-modern") == 0) return token_part_new(kind, cfg, 0);
    if (strcmp(kind, "lb-modern-fenced") == 0) return token_part_new(kind, cfg, 1);
    if (strcmp(kind, "lb-modern-courteous") == 0) return token_part_new(kind, cfg, 0);
    lbr_part *mp = lbr_migrate_part_new(kind, cfg); /* tests/race/migrate_parts.c */
    if (mp) return mp;
    if (lbr_kind_reads_inbox(kind)) return lbr_fair_part_new(kind, cfg); /* fair_parts.c */
    if (strncmp(kind, "spoil-", 6) == 0) return lbr_spoiler_new(kind, cfg); /* fair_parts.c */
    if (is_baton(kind)) return lbr_baton_part_new(kind, cfg); /* baton_parts.c */
    if (!scripted && strcmp(kind, "lb-wire") != 0) return lbr_model_new(kind, cfg);
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    o.codec = cfg->codec;
    o.ttl_ms = cfg->ttl_ms;
    o.clock = cfg->clock;
    o.variant = scripted ? LB_LEGACY_SCRIPTED : LB_LEGACY_WIRE;
    o.fleet_max_ttl_ms = cfg->fleet_max_ttl_ms;
    lbpart *lp = calloc(1, sizeof *lp);
    if (!lp) return NULL;
    if (lb_legacy_lock_new(&lp->lock, cfg->key, strlen(cfg->key), &o) != LB_OK) {
        free(lp);
        return NULL;
    }
    lp->part = (lbr_part){kind, lb_acq, lb_rel, lb_bel, lb_valid, lb_val, lb_destroy, NULL};
    return &lp->part;
}

/* ---- the world ---------------------------------------------------------------------- */

typedef struct client {
    lbr_part *part;
    lb_clock clock;
    lbr_world *w;
    lb_machine *m; /* the running operation, NULL when idle */
    int releasing;
    int crashed;
    int64_t last_step_us; /* true time of its last step */
    int mode;             /* a follower's mode after its last step, -1: none yet or not a follower */
    int fenced_hold;      /* it held validly with a fencing number at the last check */
    int64_t fence;        /* that number */
} client;

struct lbr_world {
    redisContext *c;
    lbr_world_config cfg;
    client cl[LBR_MAX_CLIENTS];
    int n;
    int64_t true_us; /* virtual true time, microseconds since the epoch */
    int64_t start_us, mono_base_ns; /* the monotonic clock starts from a real reading */
    int overwrites, acquisitions;
    int64_t max_fence; /* the highest fencing number a holder has carried */
    int fair; /* a fair client is in the fleet: pauses move its queue's leases too */
    int baton; /* a baton client is in the fleet: pauses move the baton's TTLs too */
    int follow; /* a follower is in the fleet: its modes are checked against the key */
    int gate;   /* a mode writer is in the fleet: pauses age the gate record too */
    int64_t synced_ns; /* real monotonic time the server's TTLs were last given back */
    char violation[4608];
    char trace[4096];
};

/* A client's clock: the world's true time plus the client's offset. */
static int64_t world_wall_us(void *ud) { return ((client *)ud)->w->true_us; }
static int64_t world_mono_ns(void *ud) {
    const lbr_world *w = ((client *)ud)->w;
    return w->mono_base_ns + (w->true_us - w->start_us) * 1000;
}

static int64_t real_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void trace_add(lbr_world *w, const char *fmt, ...) {
    size_t len = strlen(w->trace);
    if (len + 2 >= sizeof w->trace) return;
    if (len) w->trace[len++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->trace + len, sizeof w->trace - len, fmt, ap);
    va_end(ap);
}

static int violate(lbr_world *w, const char *fmt, ...) {
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(w->violation, sizeof w->violation, "%s, after: %s", what, w->trace);
    return LBR_VIOLATION;
}

/* A crashed holder's lock: a timestamp in the fleet's codec that expired one
 * second before the world's start, without TTL. */
static int start_expired(lbr_world *w) {
    char v[LB_VALUE_MAX];
    size_t len;
    lb_now then = {w->start_us - 1000000, w->mono_base_ns - INT64_C(1000000000)};
    int64_t t = lb_codec_now(&w->cfg.codec, &then);
    if (lb_codec_encode(&w->cfg.codec, t, v, sizeof v, &len) != LB_OK) return -1;
    redisReply *r = redisCommand(w->c, "SET %s %b", w->cfg.key, v, len);
    int rc = r && r->type == REDIS_REPLY_STATUS ? 0 : -1;
    if (r) freeReplyObject(r);
    return rc;
}

/* The fencing counter as the world starts: as configured, or absent. */
static int start_fence(lbr_world *w) {
    const char *v = w->cfg.fence_value;
    char fk[256];
    int n = lb_companion_key(w->cfg.key, strlen(w->cfg.key), "fence", fk, sizeof fk);
    if (n < 0 || (size_t)n >= sizeof fk) return -1;
    redisReply *r = v ? redisCommand(w->c, "SET %s %s", fk, v) : redisCommand(w->c, "DEL %s", fk);
    int rc = r && r->type != REDIS_REPLY_ERROR ? 0 : -1;
    if (r) freeReplyObject(r);
    return rc;
}

/* The lock key client `idx` locks. */
static const char *key_of(const lbr_world *w, int idx) {
    const char *k = w->cfg.client_key[idx];
    return k ? k : w->cfg.key;
}

lbr_world *lbr_world_new(const lbr_world_config *cfg) {
    lbr_world *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->cfg = *cfg;
    if (w->cfg.liveness_steps <= 0) w->cfg.liveness_steps = 12;
    struct timeval tv = {5, 0};
    w->c = cfg->conn ? cfg->conn : redisConnectWithTimeout("127.0.0.1", cfg->port, tv);
    if (!w->c || w->c->err) goto fail;
    redisReply *r = redisCommand(w->c, "DEL %s", cfg->key);
    if (!r) goto fail;
    freeReplyObject(r);
    /* Migration followers use the key as their namespace: no mode set yet,
     * and no gate record or census left by an earlier world (evidence, a
     * stage's start or a matched pattern would carry over into this one). */
    lb_ns_keys nk;
    if (lb_ns_keys_init(&nk, cfg->key, strlen(cfg->key)) == LB_OK &&
        (r = redisCommand(w->c, "DEL %s %s %s", nk.mode, nk.gate, nk.census)) != NULL)
        freeReplyObject(r);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    w->true_us = w->start_us = (int64_t)ts.tv_sec * 1000000;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    w->mono_base_ns = (int64_t)ts.tv_sec * 1000000000;
    if (cfg->start_expired && start_expired(w) != 0) goto fail;
    if (start_fence(w) != 0) goto fail;
    for (int i = 0; i < LBR_MAX_CLIENTS && cfg->kinds[i]; i++)
        w->fair |= lbr_kind_reads_inbox(cfg->kinds[i]);
    if (w->fair) lbr_fair_reset(w->c, cfg->key); /* tests/race/fair_parts.c */
    for (int i = 0; i < LBR_MAX_CLIENTS && cfg->kinds[i]; i++)
        w->baton |= is_baton(cfg->kinds[i]);
    if (w->baton) lbr_baton_reset(w->c, cfg->key); /* tests/race/baton_parts.c */
    for (int i = 0; i < LBR_MAX_CLIENTS && cfg->kinds[i]; i++) {
        w->follow |= strncmp(cfg->kinds[i], "lb-follow", 9) == 0;
        w->gate |= strncmp(cfg->kinds[i], "operator", 8) == 0 ||
                   strncmp(cfg->kinds[i], "switch-", 7) == 0;
    }
    for (w->n = 0; w->n < LBR_MAX_CLIENTS && cfg->kinds[w->n]; w->n++) {
        client *c = &w->cl[w->n];
        c->w = w;
        c->clock = (lb_clock){world_wall_us, world_mono_ns, c, cfg->client_offset_ms[w->n], NULL};
        int64_t ttl = cfg->client_ttl_ms[w->n] > 0 ? cfg->client_ttl_ms[w->n] : cfg->ttl_ms;
        const char *key = key_of(w, w->n);
        if (key != cfg->key && (r = redisCommand(w->c, "DEL %s", key)) != NULL) freeReplyObject(r);
        lbr_part_config pc = {key, cfg->codec, ttl, &c->clock, cfg->fleet_max_ttl_ms, cfg->port};
        c->part = lbr_part_new(cfg->kinds[w->n], &pc);
        if (!c->part) goto fail;
        c->mode = -1; /* its configured mode is no stage it has acted in yet */
    }
    w->synced_ns = real_mono_ns();
    return w;
fail:
    lbr_world_free(w);
    return NULL;
}

void lbr_world_free(lbr_world *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++)
        if (w->cl[i].part) w->cl[i].part->destroy(w->cl[i].part);
    if (w->c && w->c != w->cfg.conn) redisFree(w->c);
    free(w);
}

/* The key's current value, read by the harness itself between steps. */
static int observe(lbr_world *w, char *buf, size_t cap, size_t *len) {
    redisReply *r = redisCommand(w->c, "GET %s", w->cfg.key);
    int present = r && r->type == REDIS_REPLY_STRING;
    *len = 0;
    if (present) {
        *len = (size_t)r->len < cap ? (size_t)r->len : cap;
        memcpy(buf, r->str, *len);
    }
    if (r) freeReplyObject(r);
    return present;
}

/* Holds by its own rules: believes it holds, and its own clock says the
 * expiry it wrote has not passed. */
static int holds_validly(const client *c) {
    if (c->crashed || !c->part->believes(c->part)) return 0;
    lb_now now = lb_clock_now(&c->clock);
    return c->part->valid(c->part, &c->w->cfg.codec, &now);
}

static int owner_of(const lbr_world *w, const char *v, size_t len, int except) {
    for (int i = 0; i < w->n; i++) {
        size_t vl;
        const char *cv;
        if (i == except || !holds_validly(&w->cl[i])) continue;
        cv = w->cl[i].part->value(w->cl[i].part, &vl);
        /* An empty value: the client owns the key whatever it holds (INCR lockers). */
        if (vl == 0 || (vl == len && memcmp(cv, v, len) == 0)) return i;
    }
    return -1;
}

/* Fencing numbers grow from holder to holder: a client that comes to hold
 * validly with a number carries one above every number a holder carried
 * before it (a storage service that keeps the highest number it has seen
 * would otherwise refuse the holder, or accept a stale one). */
static int check_fences(lbr_world *w) {
    for (int i = 0; i < w->n; i++) {
        client *c = &w->cl[i];
        int holds = c->part->fence && holds_validly(c);
        int64_t f = holds ? c->part->fence(c->part) : 0;
        int fresh = holds && (!c->fenced_hold || f != c->fence);
        c->fenced_hold = holds;
        c->fence = f;
        if (!fresh) continue;
        if (f <= w->max_fence)
            return violate(w,
                           "%c holds the lock with fencing number %lld, not above %lld, "
                           "a holder's before it",
                           'A' + i, (long long)f, (long long)w->max_fence);
        w->max_fence = f;
    }
    return LBR_OK;
}

/* Mutual exclusion (among the clients of each key), then the fencing
 * numbers of the holders. */
static int check_exclusion(lbr_world *w) {
    for (int i = 0; i < w->n; i++) {
        if (!holds_validly(&w->cl[i])) continue;
        for (int j = i + 1; j < w->n; j++)
            if (strcmp(key_of(w, i), key_of(w, j)) == 0 && holds_validly(&w->cl[j]))
                return violate(w, "mutual exclusion: %c and %c both hold the lock", 'A' + i,
                               'A' + j);
    }
    return check_fences(w);
}

/* Bounded liveness after client idx's release ended LB_OK (see race.h): the
 * key holds nothing, or a live client's value (one that holds it, or a
 * waiter's token that a grant handed it: its next attempt or read finds it),
 * or a baton (first on its list) that a live client blocked on the list pops
 * next. */
static int check_released(lbr_world *w, int idx) {
    const char *key = key_of(w, idx);
    redisReply *r = redisCommand(w->c, "GET %s", key);
    int held = r && r->type == REDIS_REPLY_STRING;
    char v[LB_TOKEN_LEN + 1] = "";
    if (held) snprintf(v, sizeof v, "%s", r->str);
    long long left = -2;
    if (r) freeReplyObject(r);
    if (!held) return LBR_OK;
    for (int i = 0; i < w->n; i++) {
        const client *c = &w->cl[i];
        size_t len;
        const char *cv = c->crashed ? NULL : c->part->value(c->part, &len);
        if (cv && len == strlen(v) && memcmp(cv, v, len) == 0)
            return LBR_OK;
    }
    char list[300];
    int blocked = 0;
    for (int i = 0; i < w->n; i++)
        blocked |= !w->cl[i].crashed && lbr_fair_blocked_on_baton(w->cl[i].part, w->cl[i].m);
    if (blocked && lb_companion_key(key, strlen(key), "baton", list, sizeof list) > 0 &&
        (r = redisCommand(w->c, "LINDEX %s 0", list)) != NULL) {
        int ours = r->type == REDIS_REPLY_STRING && strncmp(r->str, v, strlen(v)) == 0 &&
                   r->str[strlen(v)] == ' ';
        freeReplyObject(r);
        if (ours) return LBR_OK;
    }
    if ((r = redisCommand(w->c, "PTTL %s", key)) != NULL) {
        if (r->type == REDIS_REPLY_INTEGER) left = r->integer;
        freeReplyObject(r);
    }
    return violate(w, "%c's release left %s held by nobody (%lld ms left) while others wait",
                   'A' + idx, key, left);
}

/* No client deletes, or replaces with an earlier expiry, a valid lock it did not
 * write. A later expiry (the GETSET loser's overwrite) is counted apart, and so
 * is one earlier by no more than skew_tolerance_ms: timestamp locks hold only
 * while clocks agree within the margin, and a loser whose clock runs that much
 * behind writes that much earlier. */
/* The skew tolerance in the codec's units. */
static int64_t tolerance(const lbr_world *w) {
    int64_t units = 0;
    if (w->cfg.skew_tolerance_ms <= 0 ||
        lb_codec_ms_to_units(&w->cfg.codec, w->cfg.skew_tolerance_ms, &units) != LB_OK)
        return 0;
    return units;
}

static int check_write(lbr_world *w, int idx, const char *before, size_t blen, int had,
                       const char *after, size_t alen, int has) {
    if (!had || (has && alen == blen && memcmp(before, after, blen) == 0)) return LBR_OK;
    int owner = owner_of(w, before, blen, idx);
    if (owner < 0) return LBR_OK;
    if (!has) return violate(w, "%c deleted %c's valid lock", 'A' + idx, 'A' + owner);
    int64_t tb, ta;
    if (lb_codec_decode(&w->cfg.codec, before, blen, &tb) != LB_OK ||
        lb_codec_decode(&w->cfg.codec, after, alen, &ta) != LB_OK || ta < tb - tolerance(w))
        return violate(w, "%c overwrote %c's valid lock with an earlier or foreign value",
                       'A' + idx, 'A' + owner);
    w->overwrites++;
    return LBR_OK;
}

static const char *cmd_name(const lb_machine *m) {
    const lb_cmd *cmd = lb_machine_command(m);
    if (m->script) return m->script->name;
    return cmd->argv[0];
}

static int name_matches(const lb_machine *m, const char *want) {
    if (!want) return 1;
    if (m->script && strcasecmp(want, "EVAL") == 0) return 1;
    return strcasecmp(cmd_name(m), want) == 0;
}

/* Starts the client's next operation: release if it holds, else acquire. */
static int start_op(lbr_world *w, client *c) {
    lb_now now = lb_clock_now(&c->clock);
    c->releasing = c->part->believes(c->part);
    c->m = c->releasing ? c->part->release(c->part) : c->part->acquire(c->part);
    int rc = lb_machine_step(c->m, NULL, &now);
    if (rc != LB_STEP_SEND) c->m = NULL; /* ended without a command */
    (void)w;
    return rc;
}

/* Sends the client's command and feeds the reply. A script is one step: the
 * EVAL re-sent after a NOSCRIPT reply belongs to the same step. */
static int exchange(lbr_world *w, client *c) {
    int rc;
    do {
        const lb_cmd *cmd = lb_machine_command(c->m);
        const char *argv[LB_CMD_MAX_ARGS];
        int was_evalsha = c->m->script && strcmp(cmd->argv[0], "EVALSHA") == 0;
        for (int i = 0; i < cmd->argc; i++) argv[i] = cmd->argv[i];
        redisReply *r = redisCommandArgv(w->c, cmd->argc, argv, cmd->argvlen);
        lb_now now = lb_clock_now(&c->clock);
        rc = lb_machine_step(c->m, r, &now);
        if (r) freeReplyObject(r);
        if (!(rc == LB_STEP_SEND && was_evalsha && c->m->script &&
              strcmp(lb_machine_command(c->m)->argv[0], "EVAL") == 0))
            break;
    } while (1);
    return rc;
}

/* A release of lockbridge's token lock fails only when the lock was not its
 * own any more (LB_ELOST), or, for a fenced fair client, where the world's
 * fencing counter cannot count (its release counts the next holder's number,
 * and fails rather than hand over without one). Any other failure leaves the
 * lock held by a client told its release failed: every waiter waits out the
 * TTL. */
static int release_must_succeed(const lbr_world *w, const client *c) {
    const char *k = c->part->kind;
    if (lbr_kind_reads_inbox(k)) return !(w->cfg.fence_value && strstr(k, "-fenced"));
    if (is_baton(k)) return 1;
    return strncmp(k, "lb-modern", 9) == 0;
}

static int send_and_feed(lbr_world *w, client *c, int idx) {
    int rc = exchange(w, c);
    if (rc == LB_STEP_SEND) return LBR_OK;
    int was_release = c->releasing;
    const lb_machine *m = c->m;
    c->m = NULL;
    if (!was_release && rc == LB_OK) w->acquisitions++;
    if (w->cfg.bounded_liveness && rc == LB_OK && !was_release && !holds_validly(c))
        return violate(w, "%c was told it holds the lock, with no lease left", 'A' + idx);
    if (w->cfg.bounded_liveness && rc == LB_OK && was_release) {
        int bad = check_released(w, idx);
        if (bad != LBR_OK) return bad;
    }
    if (was_release && rc < 0 && rc != LB_ELOST && release_must_succeed(w, c))
        return violate(w, "%c's release failed (%s: %s) with the lock its own", 'A' + idx,
                       lb_err_name(rc), lb_machine_errstr(m));
    /* A client told it does not hold the lock while the key holds its own
     * value leaves a lock no one holds until it expires. After a release
     * said lost, any value counts; after an acquire that failed, only a
     * token (timestamps of two clients may be equal). */
    int told_not_held = was_release ? rc == LB_ELOST : rc != LB_OK;
    if (told_not_held && !c->part->believes(c->part)) {
        char v[LB_OBSERVED_MAX];
        size_t vl, ol;
        const char *ours = c->part->value(c->part, &ol);
        if ((was_release || ol == LB_TOKEN_LEN) && observe(w, v, sizeof v, &vl) && vl == ol &&
            memcmp(v, ours, ol) == 0)
            return violate(w, "%c was told %s, but the key holds its value", 'A' + idx,
                           was_release ? "its lock was lost" : "it did not get the lock");
    }
    return LBR_OK;
}

/* A follower never moves two stages (legacy <-> modern) at once: between
 * them, legacy-format and token writers would share the namespace. */
static int check_stages(lbr_world *w, int idx) {
    client *c = &w->cl[idx];
    int was = c->mode;
    c->mode = lbr_part_mode(c->part);
    if (was < 0 || c->mode < 0 || (was - c->mode != 2 && c->mode - was != 2)) return LBR_OK;
    return violate(w, "%c moved two stages at once: %s -> %s", 'A' + idx,
                   lb_mode_name((lb_mode)was), lb_mode_name((lb_mode)c->mode));
}

/* A client writing the legacy format (timestamps without a Redis TTL). */
static int legacy_writer(const char *kind) {
    return kind[0] == 'L' || kind[0] == 'R' || strcmp(kind, "lb-wire") == 0 ||
           strcmp(kind, "lb-scripted") == 0;
}

/* The gate never lets modern in while a legacy-format writer holds a lock. */
static int check_gate(lbr_world *w, int idx) {
    lb_ns_keys nk;
    if (strncmp(w->cl[idx].part->kind, "operator", 8) != 0 ||
        lb_ns_keys_init(&nk, w->cfg.key, strlen(w->cfg.key)) != LB_OK)
        return LBR_OK;
    redisReply *r = redisCommand(w->c, "GET %s", nk.mode);
    int modern = r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "modern") == 0;
    int legacy = r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "legacy") == 0;
    if (r) freeReplyObject(r);
    for (int i = 0; legacy && i < w->n; i++)
        if (lbr_part_mode(w->cl[i].part) == LB_MODE_MODERN && holds_validly(&w->cl[i]))
            return violate(w, "the gate let legacy in while %c holds a token (last read modern)",
                           'A' + i);
    for (int i = 0; modern && i < w->n; i++)
        if (legacy_writer(w->cl[i].part->kind) && holds_validly(&w->cl[i]))
            return violate(w, "the gate let modern in while %c (%s) holds a legacy lock",
                           'A' + i, w->cl[i].part->kind);
    return LBR_OK;
}

/* The control key never reads a mode two stages from one a follower may
 * still act in without reading it again (legacy beside modern): a lock it
 * holds, or the mode it read while its refresh interval runs. An absent key
 * writes no stage (followers that read one keep it). */
static int check_adjacent(lbr_world *w) {
    lb_ns_keys nk;
    lb_mode key;
    if (!w->follow || lb_ns_keys_init(&nk, w->cfg.key, strlen(w->cfg.key)) != LB_OK) return LBR_OK;
    redisReply *r = redisCommand(w->c, "GET %s", nk.mode);
    int known = r && r->type == REDIS_REPLY_STRING &&
                lb_mode_parse(r->str, (size_t)r->len, &key) == LB_OK;
    if (r) freeReplyObject(r);
    if (!known || key == LB_MODE_COMPAT) return LBR_OK;
    lb_mode far = key == LB_MODE_LEGACY ? LB_MODE_MODERN : LB_MODE_LEGACY;
    for (int i = 0; i < w->n; i++) {
        client *c = &w->cl[i];
        lb_now now = lb_clock_now(&c->clock);
        if (c->crashed || !(lbr_part_acting(c->part, &now) & (1 << far))) continue;
        return violate(w, "the mode reads %s while %c may still act in %s (a lock it holds, or "
                       "its last read within its refresh interval)",
                       lb_mode_name(key), 'A' + i, lb_mode_name(far));
    }
    return LBR_OK;
}

/* In a world of fair clients, no key beside the lock is left without a TTL
 * (a queue whose clients all vanished must go on its own). */
static int check_lapses(lbr_world *w) {
    char bad[256];
    int rc = w->fair ? lbr_fair_untimed_key(w->c, w->cfg.key, bad, sizeof bad) : 0;
    if (rc == 0 && w->baton) rc = lbr_baton_untimed_key(w->c, w->cfg.key, bad, sizeof bad);
    if (rc < 0) return violate(w, "the keys beside the lock could not be read");
    return rc ? violate(w, "%s is left without a TTL", bad) : LBR_OK;
}

/* A step that could not do what it models (the operator's tool did not run
 * as intended): the world proves nothing from here on. */
static int check_broken(lbr_world *w, int idx) {
    const char *why = lbr_operator_broken(w->cl[idx].part); /* operator_part.c */
    if (!why) return LBR_OK;
    snprintf(w->violation, sizeof w->violation, "broken: %c's step did not run as intended: "
             "%s, after: %s", 'A' + idx, why, w->trace);
    return LBR_BROKEN;
}

static int do_step(lbr_world *w, int idx, const char *want) {
    client *c = &w->cl[idx];
    if (c->crashed) return LBR_BAD_SCHEDULE;
    if (!c->m && start_op(w, c) != LB_STEP_SEND) {
        trace_add(w, "%c:-", 'A' + idx);
        return want && strcmp(want, "-") != 0 ? LBR_BAD_SCHEDULE : check_exclusion(w);
    }
    if (!name_matches(c->m, want)) {
        snprintf(w->violation, sizeof w->violation, "schedule: %c sends %s, not %s, after: %s",
                 'A' + idx, cmd_name(c->m), want, w->trace);
        return LBR_BAD_SCHEDULE;
    }
    trace_add(w, "%c:%s", 'A' + idx, cmd_name(c->m));
    c->last_step_us = w->true_us;
    char before[LB_OBSERVED_MAX], after[LB_OBSERVED_MAX];
    size_t blen, alen;
    int had = observe(w, before, sizeof before, &blen);
    int rc = send_and_feed(w, c, idx);
    if (rc == LBR_OK) rc = check_broken(w, idx);
    if (rc != LBR_OK) return rc;
    int has = observe(w, after, sizeof after, &alen);
    rc = check_write(w, idx, before, blen, had, after, alen, has);
    if (rc == LBR_OK) rc = check_stages(w, idx);
    if (rc == LBR_OK) rc = check_gate(w, idx);
    if (rc == LBR_OK) rc = check_adjacent(w);
    if (rc == LBR_OK) rc = check_lapses(w);
    return rc != LBR_OK ? rc : check_exclusion(w);
}

int lbr_step(lbr_world *w, int idx) {
    if (!w || idx < 0 || idx >= w->n) return LBR_BAD_SCHEDULE;
    return do_step(w, idx, NULL);
}

/* Liveness: stepping alone, the client must come to hold the lock. */
static int check_live(lbr_world *w, int idx) {
    client *c = &w->cl[idx];
    trace_add(w, "%c?", 'A' + idx);
    for (int i = 0; i < w->cfg.liveness_steps; i++) {
        if (c->part->believes(c->part) && !c->m) return LBR_OK;
        int rc = do_step(w, idx, NULL);
        if (rc != LBR_OK) return rc;
    }
    if (c->part->believes(c->part) && !c->m) return LBR_OK;
    return violate(w, "liveness: %c could not acquire within %d steps", 'A' + idx,
                   w->cfg.liveness_steps);
}

/* Steps the client until its current operation (if any) ends. */
static int finish_op(lbr_world *w, int idx) {
    client *c = &w->cl[idx];
    if (c->crashed) return LBR_OK;
    for (int i = 0; i < 16 && c->m; i++) {
        int rc = do_step(w, idx, NULL);
        if (rc != LBR_OK) return rc;
    }
    return c->m ? violate(w, "liveness: %c's operation did not end", 'A' + idx) : LBR_OK;
}

/* The client reads one hand-off message waiting on its inbox (see race.h). */
static int read_inbox(lbr_world *w, int idx) {
    client *c = &w->cl[idx];
    if (c->crashed) return LBR_BAD_SCHEDULE;
    int rc = lbr_part_read_inbox(c->part);
    if (rc < 0) {
        snprintf(w->violation, sizeof w->violation, "schedule: %c has %s, after: %s", 'A' + idx,
                 rc == -1 ? "no message waiting" : rc == -2 ? "no inbox" : "lost its inbox",
                 w->trace);
        return LBR_BAD_SCHEDULE;
    }
    trace_add(w, "%c@", 'A' + idx);
    c->last_step_us = w->true_us;
    if (rc == 1) w->acquisitions++;
    return check_exclusion(w);
}

static int client_index(const lbr_world *w, char ch) {
    int idx = ch - 'A';
    return idx >= 0 && idx < w->n ? idx : -1;
}

/* A pause that the modelled assumptions exclude (see bound_midop_pauses). */
static int pause_allowed(lbr_world *w, long long ms) {
    if (!w->cfg.bound_midop_pauses) return 1;
    for (int i = 0; i < w->n; i++) {
        const client *c = &w->cl[i];
        if (c->crashed || !c->m) continue;
        if (w->true_us + ms * 1000 - c->last_step_us > w->cfg.midop_pause_max_ms * 1000) {
            snprintf(w->violation, sizeof w->violation,
                     "schedule: pauses %c mid-operation beyond %lld ms, after: %s", 'A' + i,
                     (long long)w->cfg.midop_pause_max_ms, w->trace);
            return 0;
        }
    }
    return 1;
}

/* Moves `key`'s TTL, if it has one, by a pause of `ms`: what is left less
 * the pause, or the key deleted when the pause outlasts it. */
void lbr_warp_key(redisContext *c, const char *key, long long ms) {
    redisReply *r = redisCommand(c, "PTTL %s", key);
    long long left = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    if (left < 0) return; /* no key, or no TTL */
    r = left > ms ? redisCommand(c, "PEXPIRE %s %lld", key, left - ms) : redisCommand(c, "DEL %s", key);
    if (r) freeReplyObject(r);
}

/* Redis counts every TTL down in real time, while the virtual clock stands
 * still between pauses: on a slow build or a loaded machine, the real time
 * between two steps could let a key lapse that every client's clock says
 * lives (a holder with 20 ms of lease left after a pause, its key gone on the
 * server a few steps later). So before each token the TTL of every key is
 * given back the real time since the last such sync: a key lapses when a
 * pause says so. One written since the last sync gains at most that time
 * (one step, with the harness's checks after it). The server serves one
 * world at a time, so every key on it is the world's. */
static const char resync_script[] =
    "local d = tonumber(ARGV[1])\n"
    "for _, k in ipairs(redis.call('KEYS', '*')) do\n"
    "  local t = redis.call('PTTL', k)\n"
    "  if t > 0 then redis.call('PEXPIRE', k, t + d) end\n"
    "end\n"
    "return 0\n";

static void resync_ttls(lbr_world *w) {
    int64_t ms = (real_mono_ns() - w->synced_ns) / 1000000;
    if (ms < 1) return;
    w->synced_ns += ms * 1000000; /* the part of a millisecond left counts next time */
    redisReply *r = redisCommand(w->c, "EVAL %s 0 %lld", resync_script, (long long)ms);
    if (r) freeReplyObject(r);
}

/* Redis expires keys on its own clock, which the virtual time does not move: a
 * pause moves the lock key's TTL instead, so token locks (PX) lapse as they
 * would have. A fair lock's queue or state that lapses in the pause while a
 * queued waiter's lease outlives it drops that waiter's place (invariant 6's
 * purpose: the TTLs go only once nobody waits): a violation. */
static int warp_ttl(lbr_world *w, long long ms) {
    char live[128];
    int dropped = w->fair && lbr_fair_warp(w->c, w->cfg.key, ms, live, sizeof live);
    if (w->baton) lbr_baton_warp(w->c, w->cfg.key, ms); /* tests/race/baton_parts.c */
    if (w->gate) lbr_warp_gate(w->c, w->cfg.key, ms); /* tests/race/migrate_parts.c */
    lbr_warp_key(w->c, w->cfg.key, ms);
    /* Other clients' keys, each once; a companion of the lock's key moved
     * above with the others. */
    for (int i = 0; i < w->n; i++) {
        const char *k = key_of(w, i);
        int seen = k == w->cfg.key || lb_companion_of(k, strlen(k), NULL) != LB_COMPANION_NONE;
        for (int j = 0; j < i && !seen; j++) seen = strcmp(key_of(w, j), k) == 0;
        if (!seen) lbr_warp_key(w->c, k, ms);
    }
    if (!dropped) return LBR_OK;
    trace_add(w, "+%lld", ms);
    return violate(w, "the fair queue lapsed in a pause while %.40s's lease outlives it", live);
}

static int run_token(lbr_world *w, const char *tok) {
    char *end;
    resync_ttls(w);
    if (tok[0] == '+') {
        long long ms = strtoll(tok + 1, &end, 10);
        if (*end || ms < 0 || !pause_allowed(w, ms)) return LBR_BAD_SCHEDULE;
        if (warp_ttl(w, ms) != LBR_OK) return LBR_VIOLATION;
        w->true_us += ms * 1000;
        trace_add(w, "%s", tok);
        return LBR_OK;
    }
    int idx = client_index(w, tok[0]);
    if (idx < 0) return LBR_BAD_SCHEDULE;
    switch (tok[1]) {
    case '\0': return do_step(w, idx, NULL);
    case ':': return do_step(w, idx, tok + 2);
    case '!':
        w->cl[idx].crashed = 1;
        trace_add(w, "%s", tok);
        return LBR_OK;
    case '?': return check_live(w, idx);
    case '.': return finish_op(w, idx);
    case '@': return tok[2] ? LBR_BAD_SCHEDULE : read_inbox(w, idx);
    case '~': {
        long long ms = strtoll(tok + 2, &end, 10);
        if (*end || end == tok + 2) return LBR_BAD_SCHEDULE;
        w->cl[idx].clock.offset_ms = ms;
        trace_add(w, "%s", tok);
        return LBR_OK;
    }
    default: return LBR_BAD_SCHEDULE;
    }
}

int lbr_run(lbr_world *w, const char *schedule) {
    char buf[1024];
    if (!w || !schedule || strlen(schedule) >= sizeof buf) return LBR_BAD_SCHEDULE;
    strcpy(buf, schedule);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save)) {
        int rc = run_token(w, tok);
        if (rc == LBR_BAD_SCHEDULE && !w->violation[0])
            snprintf(w->violation, sizeof w->violation, "schedule: bad token '%s' after: %s",
                     tok, w->trace);
        if (rc != LBR_OK) return rc;
    }
    return LBR_OK;
}

int64_t lbr_max_ttl_ms(const lbr_world_config *cfg) {
    int64_t max = cfg->ttl_ms;
    for (int i = 0; i < LBR_MAX_CLIENTS && cfg->kinds[i]; i++)
        if (cfg->client_ttl_ms[i] > max) max = cfg->client_ttl_ms[i];
    if (cfg->fleet_max_ttl_ms > max) max = cfg->fleet_max_ttl_ms;
    return max;
}

int lbr_clients(const lbr_world *w) { return w ? w->n : 0; }
int lbr_crashed(const lbr_world *w, int idx) { return w->cl[idx].crashed; }
int lbr_running(const lbr_world *w, int idx) { return w->cl[idx].m != NULL; }
const char *lbr_violation(const lbr_world *w) { return w->violation; }
const char *lbr_trace(const lbr_world *w) { return w->trace; }
int lbr_overwrites(const lbr_world *w) { return w->overwrites; }
int lbr_acquisitions(const lbr_world *w) { return w->acquisitions; }
