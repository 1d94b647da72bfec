/* Reference models of the deployed lockers (legacy-lockers.md: L1-L5, R) and of
 * naive lockers, written as step machines so the race harness can interleave
 * them. Each reproduces its locker's documented command sequence, bugs included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core/internal.h"
#include "race/race.h"

typedef struct model model;
typedef int (*step_fn)(model *, const redisReply *, const lb_now *);

struct model {
    lb_machine m; /* first: the machine's address is the model's */
    lbr_part part;
    const char *kind;
    char key[128];
    size_t keylen;
    lb_codec codec;
    int64_t ttl_ms;
    step_fn acq, rel;
    int state;
    int held, owner;      /* owner: L1's thread-owner mark */
    int64_t frozen;       /* L2: the instant read once per lock() call */
    char value[LB_VALUE_MAX];
    size_t valuelen;
    int64_t expiry;
    char pend[LB_VALUE_MAX];
    size_t pendlen;
    int64_t pend_exp;
    int64_t fence, pend_fence; /* naive-fence-first: its number, held and taken */
    char side_key[160]; /* a companion key in a command: commands point at their arguments */
    char got[LB_VALUE_MAX]; /* what GET returned */
    size_t gotlen;
    int got_nil;
};

#define MODEL_OF(mach) ((model *)(void *)(mach))
#define PART_MODEL(p) ((model *)(void *)((char *)(p) - offsetof(model, part)))

/* ---- shared pieces ------------------------------------------------------------- */

static int64_t now_units(const model *md, const lb_now *now) {
    return lb_codec_now(&md->codec, now);
}

/* The value "now + ttl" in the fleet's codec; L2 uses its frozen instant. */
static void make_value(model *md, int64_t base_units) {
    int64_t ttl;
    lb_codec_ms_to_units(&md->codec, md->ttl_ms, &ttl);
    md->pend_exp = base_units + ttl + 1;
    lb_codec_encode(&md->codec, md->pend_exp, md->pend, sizeof md->pend, &md->pendlen);
}

static int send1(model *md, const char *cmd, int state) {
    lb__cmd_reset(&md->m.cmd);
    lb__cmd_argz(&md->m.cmd, cmd);
    lb__cmd_arg(&md->m.cmd, md->key, md->keylen);
    md->state = state;
    return LB_STEP_SEND;
}

static int send2(model *md, const char *cmd, const char *arg, size_t len, int state) {
    send1(md, cmd, state);
    lb__cmd_arg(&md->m.cmd, arg, len);
    return LB_STEP_SEND;
}

static int hold(model *md, int owner) {
    memcpy(md->value, md->pend, md->pendlen + 1);
    md->valuelen = md->pendlen;
    md->expiry = md->pend_exp;
    md->held = 1;
    md->owner = owner;
    return LB_OK;
}

static int is_int(const redisReply *r, long long v) {
    return r && r->type == REDIS_REPLY_INTEGER && r->integer == v;
}

static int is_str(const redisReply *r) { return r && r->type == REDIS_REPLY_STRING; }

static void remember_get(model *md, const redisReply *r) {
    md->got_nil = !is_str(r);
    md->gotlen = 0;
    if (is_str(r) && (size_t)r->len < sizeof md->got) {
        memcpy(md->got, r->str, (size_t)r->len);
        md->gotlen = (size_t)r->len;
    }
    md->got[md->gotlen] = '\0';
}

/* Parses like the Java lockers do (Long.parseLong and friends): lenient about
 * form, and anything else is an exception. */
static int java_parse(const model *md, const char *s, size_t len, int64_t *t) {
    if (md->codec.kind == LB_CODEC_JSON) {
        /* L3's deserializer: a missing field reads as 0, i.e. expired. */
        if (lb_codec_decode(&md->codec, s, len, t) == LB_OK) return 0;
        if (len > 0 && s[0] == '{') {
            *t = 0;
            return 0;
        }
        return -1;
    }
    return lb_codec_decode(&md->codec, s, len, t) == LB_OK ? 0 : -1;
}

static int same_as_got(const model *md, const redisReply *r) {
    return is_str(r) && !md->got_nil && (size_t)r->len == md->gotlen &&
           memcmp(r->str, md->got, md->gotlen) == 0;
}

enum { S_START, S_SETNX, S_GET, S_GETSET, S_DEL, S_DEL_FAIL, S_INCR, S_EXPIRE, S_SETNX2, S_ZADD };

/* ---- L1: non-blocking, catch-all DEL, owner mark only on the SETNX path ------- */

static int l1_acquire(model *md, const redisReply *r, const lb_now *now) {
    int64_t t;
    switch (md->state) {
    case S_START:
        make_value(md, now_units(md, now));
        return send2(md, "SETNX", md->pend, md->pendlen, S_SETNX);
    case S_SETNX:
        if (is_int(r, 1)) return hold(md, 1);
        return send1(md, "GET", S_GET);
    case S_GET: /* nil or unparsable: the catch-all handler deletes the key */
        if (!is_str(r) || java_parse(md, r->str, (size_t)r->len, &t) != 0)
            return send1(md, "DEL", S_DEL_FAIL);
        if (now_units(md, now) > t) {
            make_value(md, now_units(md, now));
            return send2(md, "GETSET", md->pend, md->pendlen, S_GETSET);
        }
        return LB_EBUSY;
    case S_GETSET:
        if (!is_str(r) || java_parse(md, r->str, (size_t)r->len, &t) != 0)
            return send1(md, "DEL", S_DEL_FAIL);
        if (now_units(md, now) > t) return hold(md, 0); /* no owner mark */
        return LB_EBUSY;
    case S_DEL_FAIL:
    default: return LB_EBUSY;
    }
}

static int l1_release(model *md, const redisReply *r, const lb_now *now) {
    int64_t t;
    switch (md->state) {
    case S_START:
        if (md->owner) return send1(md, "DEL", S_DEL); /* unconditional */
        return send1(md, "GET", S_GET);
    case S_GET:
        if (is_str(r) && java_parse(md, r->str, (size_t)r->len, &t) == 0 &&
            now_units(md, now) > t)
            return send1(md, "DEL", S_DEL);
        md->held = 0;
        return LB_OK;
    default:
        md->held = 0;
        return LB_OK;
    }
}

/* ---- L2: blocking with a frozen clock, swallowed exceptions, DEL release ------- */

static int l2_acquire(model *md, const redisReply *r, const lb_now *now) {
    int64_t t;
    (void)now; /* the point of L2: it never reads the clock again */
    switch (md->state) {
    case S_START:
        md->frozen = now_units(md, now);
        make_value(md, md->frozen);
        return send2(md, "SETNX", md->pend, md->pendlen, S_SETNX);
    case S_SETNX:
        if (is_int(r, 1)) return hold(md, 1);
        return send1(md, "GET", S_GET);
    case S_GET:
        if (!is_str(r)) /* nil: loop again */
            return send2(md, "SETNX", md->pend, md->pendlen, S_SETNX);
        if (java_parse(md, r->str, (size_t)r->len, &t) != 0)
            return hold(md, 1); /* exception swallowed: lock() returns normally */
        if (t < md->frozen)
            return send2(md, "GETSET", md->pend, md->pendlen, S_GETSET);
        return send2(md, "SETNX", md->pend, md->pendlen, S_SETNX);
    case S_GETSET:
        if (!is_str(r) || java_parse(md, r->str, (size_t)r->len, &t) != 0)
            return hold(md, 1); /* nil or garbage throws; swallowed */
        if (t < md->frozen) return hold(md, 1);
        return send2(md, "SETNX", md->pend, md->pendlen, S_SETNX);
    default: return LB_EBUSY;
    }
}

static int del_release(model *md, const redisReply *r, const lb_now *now) {
    (void)r;
    (void)now;
    if (md->state == S_START) return send1(md, "DEL", S_DEL);
    md->held = 0;
    return LB_OK;
}

/* ---- L3: JSON, "equal string" GETSET rule, GET-compare-DEL release ------------- */

static int l3_acquire(model *md, const redisReply *r, const lb_now *now) {
    int64_t t;
    switch (md->state) {
    case S_START:
        make_value(md, now_units(md, now));
        return send2(md, "SETNX", md->pend, md->pendlen, S_SETNX);
    case S_SETNX:
        if (is_int(r, 1)) return hold(md, 1);
        return send1(md, "GET", S_GET);
    case S_GET:
        remember_get(md, r);
        if (md->got_nil || md->gotlen == 0) /* documented: deleted, back to SETNX */
            return send2(md, "SETNX", md->pend, md->pendlen, S_SETNX);
        if (java_parse(md, md->got, md->gotlen, &t) != 0) return LB_EBUSY;
        if (t < now_units(md, now)) {
            make_value(md, now_units(md, now));
            return send2(md, "GETSET", md->pend, md->pendlen, S_GETSET);
        }
        return LB_EBUSY;
    case S_GETSET:
        if (!is_str(r) || r->len == 0) return hold(md, 1);
        if (same_as_got(md, r)) return hold(md, 1);
        return LB_EBUSY; /* and our value has overwritten the winner's */
    default: return LB_EBUSY;
    }
}

static int compare_release(model *md, const redisReply *r, const lb_now *now) {
    int64_t t;
    (void)now;
    switch (md->state) {
    case S_START: return send1(md, "GET", S_GET);
    case S_GET:
        if (is_str(r) && java_parse(md, r->str, (size_t)r->len, &t) == 0 && t == md->expiry)
            return send1(md, "DEL", S_DEL);
        md->held = 0;
        return LB_OK;
    default:
        md->held = 0;
        return LB_OK;
    }
}

/* ---- L4: strict GETSET (nil is NOT acquired), unconditional DEL --------------- */

static int l4_acquire(model *md, const redisReply *r, const lb_now *now) {
    int64_t t;
    switch (md->state) {
    case S_START:
        make_value(md, now_units(md, now));
        return send2(md, "SETNX", md->pend, md->pendlen, S_SETNX);
    case S_SETNX:
        if (is_int(r, 1)) return hold(md, 1);
        return send1(md, "GET", S_GET);
    case S_GET:
        remember_get(md, r);
        if (md->got_nil) return LB_EBUSY; /* sleeps 100 ms, then SETNX again */
        if (java_parse(md, md->got, md->gotlen, &t) != 0 || t >= now_units(md, now))
            return LB_EBUSY;
        make_value(md, now_units(md, now));
        return send2(md, "GETSET", md->pend, md->pendlen, S_GETSET);
    case S_GETSET:
        if (same_as_got(md, r)) return hold(md, 1);
        return LB_EBUSY; /* nil included: its value now sits in a key nobody holds */
    default: return LB_EBUSY;
    }
}

/* ---- L5 and R: nil GETSET and expired old values acquire ---------------------- */

static int rule_acquire(model *md, const redisReply *r, const lb_now *now, int nil_get_expired) {
    int64_t t;
    switch (md->state) {
    case S_START:
        make_value(md, now_units(md, now));
        return send2(md, "SETNX", md->pend, md->pendlen, S_SETNX);
    case S_SETNX:
        if (is_int(r, 1)) return hold(md, 1);
        return send1(md, "GET", S_GET);
    case S_GET:
        if (!is_str(r)) {
            if (!nil_get_expired) return send2(md, "SETNX", md->pend, md->pendlen, S_SETNX);
            make_value(md, now_units(md, now)); /* L5: nil is treated as expired */
            return send2(md, "GETSET", md->pend, md->pendlen, S_GETSET);
        }
        if (java_parse(md, r->str, (size_t)r->len, &t) != 0 || t >= now_units(md, now))
            return LB_EBUSY;
        make_value(md, now_units(md, now));
        return send2(md, "GETSET", md->pend, md->pendlen, S_GETSET);
    case S_GETSET:
        if (!is_str(r)) return hold(md, 1);
        if (java_parse(md, r->str, (size_t)r->len, &t) == 0 && t < now_units(md, now))
            return hold(md, 1);
        return LB_EBUSY;
    default: return LB_EBUSY;
    }
}

static int l5_acquire(model *md, const redisReply *r, const lb_now *now) {
    return rule_acquire(md, r, now, 1);
}

static int r_acquire(model *md, const redisReply *r, const lb_now *now) {
    return rule_acquire(md, r, now, 0);
}

/* R checks that its own timeout has not passed before deleting. */
static int r_release(model *md, const redisReply *r, const lb_now *now) {
    (void)r;
    if (md->state == S_START && now_units(md, now) < md->expiry) return send1(md, "DEL", S_DEL);
    md->held = 0;
    return LB_OK;
}

/* ---- naive lockers ----------------------------------------------------------------- */

/* Takes over an expired lock with DEL then SETNX: two racers can both do it. */
static int naive_del_acquire(model *md, const redisReply *r, const lb_now *now) {
    int64_t t;
    switch (md->state) {
    case S_START:
    case S_DEL:
        make_value(md, now_units(md, now));
        return send2(md, "SETNX", md->pend, md->pendlen, md->state == S_DEL ? S_SETNX2 : S_SETNX);
    case S_SETNX:
        if (is_int(r, 1)) return hold(md, 1);
        return send1(md, "GET", S_GET);
    case S_SETNX2: return is_int(r, 1) ? hold(md, 1) : LB_EBUSY;
    case S_GET:
        if (is_str(r) && java_parse(md, r->str, (size_t)r->len, &t) == 0 &&
            t < now_units(md, now))
            return send1(md, "DEL", S_DEL);
        return LB_EBUSY;
    default: return LB_EBUSY;
    }
}

/* INCR then EXPIRE as two commands: a crash between them leaves a key that
 * never expires. The value is a counter, so it holds no expiry of its own. */
static int naive_incr_acquire(model *md, const redisReply *r, const lb_now *now) {
    (void)now;
    switch (md->state) {
    case S_START: return send1(md, "INCR", S_INCR);
    case S_INCR:
        if (!is_int(r, 1)) return LB_EBUSY;
        md->pend_exp = INT64_MAX;
        md->pendlen = 0;
        md->pend[0] = '\0';
        {
            int64_t secs = (md->ttl_ms + 999) / 1000;
            int n = snprintf(md->got, sizeof md->got, "%lld", (long long)secs);
            send2(md, "EXPIRE", md->got, (size_t)n, S_EXPIRE);
        }
        return LB_STEP_SEND;
    case S_EXPIRE: return hold(md, 1); /* empty value: owns the key, whatever it holds */
    default: return LB_EBUSY;
    }
}

/* L1's second INCR generation: a second INCR above 2 deletes the key "to break a
 * deadlock", whoever holds it. */
static int incr2_acquire(model *md, const redisReply *r, const lb_now *now) {
    if (md->state == S_INCR && r && r->type == REDIS_REPLY_INTEGER && r->integer > 2)
        return send1(md, "DEL", S_DEL_FAIL);
    if (md->state == S_DEL_FAIL) return LB_EBUSY;
    return naive_incr_acquire(md, r, now);
}

/* ---- M1: token lock, SET NX PX and a compare-and-delete script ---------------------- */

static const char m1_release_script[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) "
    "else return 0 end";

static int m1_acquire(model *md, const redisReply *r, const lb_now *now) {
    if (md->state == S_START) {
        /* A distinct token per attempt; uniqueness is all the model needs. */
        static unsigned counter;
        md->pendlen = (size_t)snprintf(md->pend, sizeof md->pend,
                                       "{\"uid\":\"m1-%p-%u\"}", (void *)md, ++counter);
        md->pend_exp = lb_codec_now(&md->codec, now);
        int64_t ttl;
        lb_codec_ms_to_units(&md->codec, md->ttl_ms, &ttl);
        md->pend_exp += ttl;
        int n = snprintf(md->got, sizeof md->got, "%lld", (long long)md->ttl_ms);
        send2(md, "SET", md->pend, md->pendlen, S_SETNX);
        lb__cmd_argz(&md->m.cmd, "NX");
        lb__cmd_argz(&md->m.cmd, "PX");
        lb__cmd_arg(&md->m.cmd, md->got, (size_t)n);
        return LB_STEP_SEND;
    }
    if (r && r->type == REDIS_REPLY_STATUS) return hold(md, 1);
    return LB_EBUSY;
}

static int m1_release(model *md, const redisReply *r, const lb_now *now) {
    (void)r;
    (void)now;
    if (md->state == S_START) {
        lb__cmd_reset(&md->m.cmd);
        lb__cmd_argz(&md->m.cmd, "EVAL");
        lb__cmd_argz(&md->m.cmd, m1_release_script);
        lb__cmd_argz(&md->m.cmd, "1");
        lb__cmd_arg(&md->m.cmd, md->key, md->keylen);
        lb__cmd_arg(&md->m.cmd, md->value, md->valuelen);
        md->state = S_DEL;
        return LB_STEP_SEND;
    }
    md->held = 0;
    return LB_OK;
}

/* ---- naive models that write a companion key, then lock as M1 does --------------- */

/* Sends `cmd` on the lock's companion key named by `suffix` (kept in the
 * model: a command points at its arguments); the caller adds the rest. */
static int send_side(model *md, const char *cmd, const char *suffix, int state) {
    int n = lb_companion_key(md->key, md->keylen, suffix, md->side_key, sizeof md->side_key);
    if (n < 0 || (size_t)n >= sizeof md->side_key) return LB_EINVAL;
    lb__cmd_reset(&md->m.cmd);
    lb__cmd_argz(&md->m.cmd, cmd);
    lb__cmd_arg(&md->m.cmd, md->side_key, (size_t)n);
    md->state = state;
    return LB_STEP_SEND;
}

/* naive-fence-first: INCR the counter, then SET NX PX as a second command: a
 * client that counts and is overtaken before its SET holds the lock with a
 * number below that of a holder before it (the harness must catch it). */
static int fence_first_acquire(model *md, const redisReply *r, const lb_now *now) {
    if (md->state == S_START) return send_side(md, "INCR", "fence", S_INCR);
    if (md->state == S_INCR) {
        if (!r || r->type != REDIS_REPLY_INTEGER) return LB_EBUSY;
        md->pend_fence = r->integer;
        md->state = S_START;
        return m1_acquire(md, NULL, now);
    }
    int rc = m1_acquire(md, r, now);
    if (rc == LB_OK) md->fence = md->pend_fence;
    return rc;
}

/* naive-queue-forever: joins the lock's fair queue with a bare ZADD, then
 * takes the lock as M1 does: once its waiters vanish, the queue never lapses
 * (the harness must catch it in a world of fair clients). */
static int queue_forever_acquire(model *md, const redisReply *r, const lb_now *now) {
    if (md->state == S_START) {
        int rc = send_side(md, "ZADD", "queue", S_ZADD);
        if (rc != LB_STEP_SEND) return rc;
        lb__cmd_argz(&md->m.cmd, "0");
        lb__cmd_argz(&md->m.cmd, "naive");
        return rc;
    }
    if (md->state == S_ZADD) {
        md->state = S_START;
        return m1_acquire(md, NULL, now);
    }
    return m1_acquire(md, r, now);
}

/* ---- the participant interface -------------------------------------------------- */

static int model_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    model *md = MODEL_OF(m);
    step_fn fn = md->held ? md->rel : md->acq;
    int rc = fn(md, r, now);
    return rc;
}

static lb_machine *model_begin(lbr_part *p) {
    model *md = PART_MODEL(p);
    lb__machine_begin(&md->m, model_step);
    md->state = S_START;
    return &md->m;
}

static int model_believes(const lbr_part *p) { return PART_MODEL(p)->held; }
static int model_valid(const lbr_part *p, const lb_codec *codec, const lb_now *now) {
    return lb_codec_now(codec, now) <= PART_MODEL(p)->expiry;
}
static const char *model_value(const lbr_part *p, size_t *len) {
    const model *md = PART_MODEL(p);
    *len = md->valuelen;
    return md->value;
}
static void model_destroy(lbr_part *p) { free(PART_MODEL(p)); }
static int64_t model_fence(const lbr_part *p) { return PART_MODEL(p)->fence; }

static const struct {
    const char *kind;
    step_fn acq, rel;
} model_kinds[] = {
    {"L1", l1_acquire, l1_release},
    {"L2", l2_acquire, del_release},
    {"L3", l3_acquire, compare_release},
    {"L4", l4_acquire, del_release},
    {"L5", l5_acquire, compare_release},
    {"R", r_acquire, r_release},
    {"naive-del-takeover", naive_del_acquire, del_release},
    {"naive-unconditional-del", r_acquire, del_release},
    {"naive-incr-expire", naive_incr_acquire, del_release},
    {"L1-incr2", incr2_acquire, del_release},
    {"M1", m1_acquire, m1_release},
    {"naive-fence-first", fence_first_acquire, m1_release},
    {"naive-queue-forever", queue_forever_acquire, m1_release},
};

lbr_part *lbr_model_new(const char *kind, const lbr_part_config *cfg);

lbr_part *lbr_model_new(const char *kind, const lbr_part_config *cfg) {
    for (size_t i = 0; i < sizeof model_kinds / sizeof model_kinds[0]; i++) {
        if (strcmp(kind, model_kinds[i].kind) != 0) continue;
        model *md = calloc(1, sizeof *md);
        size_t klen = strlen(cfg->key);
        if (!md || klen >= sizeof md->key) {
            free(md);
            return NULL;
        }
        memcpy(md->key, cfg->key, klen + 1);
        md->keylen = klen;
        md->codec = cfg->codec;
        md->ttl_ms = cfg->ttl_ms;
        md->kind = model_kinds[i].kind;
        md->acq = model_kinds[i].acq;
        md->rel = model_kinds[i].rel;
        md->part = (lbr_part){md->kind, model_begin, model_begin, model_believes,
                              model_valid, model_value, model_destroy, NULL};
        if (md->acq == fence_first_acquire) md->part.fence = model_fence;
        return &md->part;
    }
    return NULL;
}
