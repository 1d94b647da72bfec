/* The migration shim's clients as race participants: the mode-following lock
 * fixed in compat or modern, followers of a namespace's control key (the lock
 * key names the namespace), and a pseudo-client whose every step switches the
 * namespace's mode, so a switch lands at every point of an exploration (the
 * operator, who runs the real tool, is in operator_part.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "migrate/internal.h"
#include "race/race.h"

lbr_part *lbr_migrate_part_new(const char *kind, const lbr_part_config *cfg);
lbr_part *lbr_operator_part_new(const char *kind, const lbr_part_config *cfg);
int lbr_part_acting(const lbr_part *p, const lb_now *now);
void lbr_warp_gate(redisContext *c, const char *key, long long ms);

typedef struct mpart {
    lbr_part part;
    lb_mlock *lock;
    lb_codec codec;
} mpart;

#define MPART(p) ((mpart *)(void *)(p))

static lb_machine *m_acq(lbr_part *p) { return lb_mlock_machine(MPART(p)->lock, LB_OP_TRY_ACQUIRE, 0); }
static lb_machine *m_rel(lbr_part *p) { return lb_mlock_machine(MPART(p)->lock, LB_OP_RELEASE, 0); }
static int m_bel(const lbr_part *p) { return lb_mlock_info_of(MPART(p)->lock).held; }

/* Valid by its own rules: the lease it computed on its own monotonic clock
 * and, for a timestamp value (compat, legacy), the timestamp by its own clock. */
static int m_valid(const lbr_part *p, const lb_codec *codec, const lb_now *now) {
    const lb_mlock *l = MPART(p)->lock;
    size_t len;
    int64_t t;
    (void)codec;
    if (lb_mlock_info_of(l).held_mode != LB_MODE_MODERN) {
        const char *v = lb_mlock_info_of(l).value;
        len = lb_mlock_info_of(l).value_len;
        if (lb_codec_decode(&MPART(p)->codec, v, len, &t) != LB_OK ||
            lb_codec_now(&MPART(p)->codec, now) > t)
            return 0;
    }
    return now->mono_ns <= lb_mlock_info_of(l).deadline_ns;
}

static const char *m_val(const lbr_part *p, size_t *len) {
    *len = lb_mlock_info_of(MPART(p)->lock).value_len;
    return lb_mlock_info_of(MPART(p)->lock).value;
}

static void m_destroy(lbr_part *p) {
    lb_mlock_free(MPART(p)->lock);
    free(p);
}

/* follow: 0 fixed in `mode`; 1 re-reading the control key before every
 * acquire; 2 re-reading it only once LBR_REFRESH_MS has passed on the world's
 * virtual clock since the last read, as deployed followers do. */
static lbr_part *mlock_part(const char *kind, const lbr_part_config *cfg, lb_mode mode,
                            int follow) {
    lb_mlock_options o;
    lb_mlock_options_init(&o);
    o.mode = mode;
    o.codec = cfg->codec;
    o.ttl_ms = cfg->ttl_ms;
    o.clock = cfg->clock;
    if (follow) {
        o.ns = cfg->key;
        o.follow = 1;
        /* The virtual clock stands still between jumps: 0 reads before
         * every acquire. */
        o.mode_refresh_ms = follow == 2 ? LBR_REFRESH_MS : 0;
        o.census_refresh_ms = 0;
    }
    mpart *mp = calloc(1, sizeof *mp);
    if (!mp) return NULL;
    mp->codec = cfg->codec;
    if (lb_mlock_new(&mp->lock, cfg->key, strlen(cfg->key), &o) != LB_OK) {
        free(mp);
        return NULL;
    }
    mp->part = (lbr_part){kind, m_acq, m_rel, m_bel, m_valid, m_val, m_destroy, NULL};
    return &mp->part;
}

/* ---- the mode switch ------------------------------------------------------------------- */
/* A switch is two steps, as a follower or an operator that writes a mode
 * makes it: a read of the stage (the control key and the gate record's
 * since_ms, in one script), then the mode write as a compare-and-set on the
 * stage read, so that another change in between refuses it. It checks nothing
 * else: a switch lands wherever a schedule puts it. */
static const char stage_read[] =
    "return {redis.call('GET', KEYS[1]) or false,\n"
    "        redis.call('HGET', KEYS[2], 'since_ms') or false}\n";

typedef struct switcher {
    lb_machine m; /* first: the machine's address is the switcher's */
    lbr_part part;
    lb_ns_keys ns;
    lb_mode modes[2]; /* set in turn: modes[0], modes[1], modes[0], ... */
    int sets;
    int state;
    char mode[32];  /* the control key read ("" absent) */
    char since[24]; /* the stage's start read ("-" none recorded) */
    int absent;
} switcher;

#define SWITCHER(p) ((switcher *)(void *)((char *)(p) - offsetof(switcher, part)))

static int read_stage(lb_machine *m) {
    switcher *s = (switcher *)(void *)m;
    lb__cmd_reset(&m->cmd);
    lb__cmd_argz(&m->cmd, "EVAL");
    lb__cmd_argz(&m->cmd, stage_read);
    lb__cmd_argz(&m->cmd, "2");
    lb__cmd_arg(&m->cmd, s->ns.mode, s->ns.modelen);
    lb__cmd_arg(&m->cmd, s->ns.gate, s->ns.gatelen);
    s->state = 1;
    return LB_STEP_SEND;
}

/* Keeps the stage the read returned: a string or nil for each field. */
static int keep_stage(switcher *s, const redisReply *r) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return -1;
    const redisReply *mode = r->element[0], *since = r->element[1];
    if ((mode->type != REDIS_REPLY_STRING && mode->type != REDIS_REPLY_NIL) ||
        (since->type != REDIS_REPLY_STRING && since->type != REDIS_REPLY_NIL) ||
        (mode->type == REDIS_REPLY_STRING && mode->len >= sizeof s->mode) ||
        (since->type == REDIS_REPLY_STRING && since->len >= sizeof s->since))
        return -1;
    s->absent = mode->type == REDIS_REPLY_NIL;
    snprintf(s->mode, sizeof s->mode, "%.*s", s->absent ? 0 : (int)mode->len,
             s->absent ? "" : mode->str);
    int none = since->type == REDIS_REPLY_NIL;
    snprintf(s->since, sizeof s->since, "%.*s", none ? 1 : (int)since->len, none ? "-" : since->str);
    return 0;
}

/* ARGV: the mode, the mode read ("" when absent), the channel, the start
 * read, and "absent" when the key was. */
static int write_mode(switcher *s) {
    lb_machine *m = &s->m;
    lb__cmd_script(m, &lb__script_mode_set, "2");
    lb__cmd_arg(&m->cmd, s->ns.mode, s->ns.modelen);
    lb__cmd_arg(&m->cmd, s->ns.gate, s->ns.gatelen);
    lb__cmd_argz(&m->cmd, lb_mode_name(s->modes[s->sets % 2]));
    lb__cmd_argz(&m->cmd, s->mode);
    lb__cmd_arg(&m->cmd, s->ns.channel, s->ns.channellen);
    lb__cmd_argz(&m->cmd, s->since);
    lb__cmd_argz(&m->cmd, s->absent ? "absent" : "");
    s->state = 2;
    return LB_STEP_SEND;
}

static int switch_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    switcher *s = (switcher *)(void *)m;
    (void)now;
    if (s->state == 0) return read_stage(m);
    if (s->state == 1) {
        if (keep_stage(s, r) != 0) return lb__fail(m, LB_EPROTO, "the stage could not be read");
        return write_mode(s);
    }
    if (r && r->type == REDIS_REPLY_INTEGER && r->integer == -1)
        return lb__fail(m, LB_ESTATE, "another change came in between: nothing written");
    if (!r || r->type != REDIS_REPLY_INTEGER || r->integer < 0)
        return lb__fail(m, LB_EPROTO, "mode switch failed");
    s->sets++;
    return LB_OK;
}

static lb_machine *sw_acq(lbr_part *p) {
    switcher *s = SWITCHER(p);
    lb__machine_begin(&s->m, switch_step);
    s->state = 0;
    return &s->m;
}
/* A pseudo-client's part: it never holds the lock and writes no value of its
 * own (the mode switches here, the spoilers in fair_parts.c). */
int lbr_never_holds(const lbr_part *p) { (void)p; return 0; }
int lbr_never_valid(const lbr_part *p, const lb_codec *c, const lb_now *n) {
    (void)p, (void)c, (void)n;
    return 0;
}
const char *lbr_no_value(const lbr_part *p, size_t *len) {
    (void)p;
    *len = 0;
    return "";
}
static void sw_destroy(lbr_part *p) { free(SWITCHER(p)); }

static lbr_part *switch_part(const char *kind, const lbr_part_config *cfg, lb_mode a, lb_mode b) {
    switcher *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (lb_ns_keys_init(&s->ns, cfg->key, strlen(cfg->key)) != LB_OK) {
        free(s);
        return NULL;
    }
    s->modes[0] = a;
    s->modes[1] = b;
    s->part = (lbr_part){kind, sw_acq, sw_acq, lbr_never_holds, lbr_never_valid,
                         lbr_no_value, sw_destroy, NULL};
    return &s->part;
}

/* A control key that vanishes (deleted, evicted): every step DELs it. */
static int vanish_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    switcher *s = (switcher *)(void *)m;
    (void)now;
    (void)r;
    if (s->state == 0) {
        lb__cmd_reset(&m->cmd);
        lb__cmd_argz(&m->cmd, "DEL");
        lb__cmd_arg(&m->cmd, s->ns.mode, s->ns.modelen);
        s->state = 1;
        return LB_STEP_SEND;
    }
    return LB_OK;
}

static lb_machine *vanish_acq(lbr_part *p) {
    switcher *s = SWITCHER(p);
    lb__machine_begin(&s->m, vanish_step);
    s->state = 0;
    return &s->m;
}

/* The modes a follower may act in at `now` (its clock) without reading the
 * control key again, a bitmask of 1 << lb_mode: the mode of a lock it holds
 * validly, and the mode it last read while its refresh interval runs. */
int lbr_part_acting(const lbr_part *p, const lb_now *now) {
    if (p->destroy != m_destroy) return 0;
    const lb_mlock *l = MPART(p)->lock;
    lb_mlock_info i = lb_mlock_info_of(l);
    int mask = i.held && m_valid(p, NULL, now) ? 1 << i.held_mode : 0;
    int64_t since = now->mono_ns - l->mode_read_ns;
    if (l->opts.follow && l->mode_read && l->opts.mode_refresh_ms > 0 &&
        since < l->opts.mode_refresh_ms * INT64_C(1000000))
        mask |= 1 << i.mode;
    return mask;
}

/* Moves the instants of the namespace's gate record, which the tool stamps
 * with the server's clock, back by a pause of `ms`: the server's clock does
 * not move with the world's virtual time, so a stage's age (since_ms), the
 * evidence (legacy_until_ms, modern_until_ms) and when the pattern last
 * matched age as they would have. */
void lbr_warp_gate(redisContext *c, const char *key, long long ms) {
    static const char script[] =
        "for _, f in ipairs({'since_ms', 'legacy_until_ms', 'modern_until_ms'}) do\n"
        "  local v = tonumber(redis.call('HGET', KEYS[1], f) or '')\n"
        "  if v then redis.call('HSET', KEYS[1], f, string.format('%.0f', v - ARGV[1])) end\n"
        "end\n"
        "local m = redis.call('HGET', KEYS[1], 'matched')\n"
        "local t, rest = string.match(m or '', '^(%d+) (.*)$')\n"
        "if t then\n"
        "  redis.call('HSET', KEYS[1], 'matched', string.format('%.0f', t - ARGV[1]) .. ' ' .. rest)\n"
        "end\n"
        "return 1\n";
    lb_ns_keys ns;
    if (ms <= 0 || lb_ns_keys_init(&ns, key, strlen(key)) != LB_OK) return;
    redisReply *r = redisCommand(c, "EVAL %s 1 %b %lld", script, ns.gate, ns.gatelen, ms);
    if (r) freeReplyObject(r);
}

/* The mode a follower acts in now, -1 for any other participant. */
int lbr_part_mode(const lbr_part *p) {
    return p->destroy == m_destroy ? (int)lb_mlock_info_of(MPART(p)->lock).mode : -1;
}

lbr_part *lbr_migrate_part_new(const char *kind, const lbr_part_config *cfg) {
    if (strncmp(kind, "operator", 8) == 0) return lbr_operator_part_new(kind, cfg);
    if (strcmp(kind, "vanish-mode") == 0) {
        lbr_part *p = switch_part(kind, cfg, LB_MODE_LEGACY, LB_MODE_LEGACY);
        if (p) p->acquire = p->release = vanish_acq;
        return p;
    }
    if (strcmp(kind, "lb-compat") == 0) return mlock_part(kind, cfg, LB_MODE_COMPAT, 0);
    if (strcmp(kind, "lb-migrate-modern") == 0) return mlock_part(kind, cfg, LB_MODE_MODERN, 0);
    if (strcmp(kind, "lb-follow-legacy") == 0) return mlock_part(kind, cfg, LB_MODE_LEGACY, 1);
    if (strcmp(kind, "lb-follow-compat") == 0) return mlock_part(kind, cfg, LB_MODE_COMPAT, 1);
    if (strcmp(kind, "lb-follow-legacy-refresh") == 0)
        return mlock_part(kind, cfg, LB_MODE_LEGACY, 2);
    if (strcmp(kind, "lb-follow-compat-refresh") == 0)
        return mlock_part(kind, cfg, LB_MODE_COMPAT, 2);
    if (strcmp(kind, "lb-follow-modern-refresh") == 0)
        return mlock_part(kind, cfg, LB_MODE_MODERN, 2);
    if (strcmp(kind, "switch-legacy-compat") == 0)
        return switch_part(kind, cfg, LB_MODE_COMPAT, LB_MODE_LEGACY);
    if (strcmp(kind, "switch-compat-modern") == 0)
        return switch_part(kind, cfg, LB_MODE_MODERN, LB_MODE_COMPAT);
    if (strcmp(kind, "lb-follow-modern") == 0) return mlock_part(kind, cfg, LB_MODE_MODERN, 1);
    return NULL;
}
