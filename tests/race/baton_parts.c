/* A candidate fair hand-off, modelled before it is built: waiters block on one
 * list per lock, "{key}:baton", and a release that knows of a waiter writes a
 * fresh token at the key and pushes it there, so that Redis hands it to the
 * waiter that blocked first; the receiver takes it without a confirming step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core/internal.h"
#include "race/race.h"

lbr_part *lbr_baton_part_new(const char *kind, const lbr_part_config *cfg);
void lbr_baton_warp(redisContext *c, const char *key, long long ms);
void lbr_baton_reset(redisContext *c, const char *key);
int lbr_baton_untimed_key(redisContext *c, const char *key, char *bad, size_t cap);

/* How long a pushed baton (and the mark a waiter leaves) lives, percent of
 * the TTL: a waiter that blocks takes a baton the moment it is pushed, one
 * between two blocks takes it within this time or not at all. A real lock
 * would keep it short (a few of its waiters' block slices); the model keeps
 * it long, so that a pause shorter than it, then another, outlast the key. */
#define BATON_LIFE_PCT 75

/* The release: the lock must hold our token; a waiter seen lately (its mark
 * lives) gets the lock, a fresh token written with our TTL and pushed as the
 * baton "token ttl life"; otherwise the key goes. KEYS lock, baton list,
 * waiter mark; ARGV token, fresh token, TTL ms, the baton's life ms. 2
 * handed over, 1 deleted, 0 not ours (nothing changed). */
static const char release_script[] =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "if redis.call('GET', KEYS[3]) then\n"
    "  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])\n"
    "  redis.call('DEL', KEYS[2])\n"
    "  redis.call('RPUSH', KEYS[2], ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4])\n"
    "  redis.call('PEXPIRE', KEYS[2], ARGV[4])\n"
    "  return 2\n"
    "end\n"
    "redis.call('DEL', KEYS[1])\n"
    "return 1\n";

typedef struct baton {
    lb_machine m; /* first: the machine's address is the participant's */
    lbr_part part;
    int margin;   /* 0: a naive receiver that counts its TTL from its pop */
    int own_ttl;  /* 1: a naive receiver that counts its own TTL, not the baton's */
    char key[128], list[160], mark[160];
    int64_t ttl_ms, life_ms;
    char ttl[24], life[24];
    int state, held;
    char token[LB__TOKEN_CAP], fresh[LB__TOKEN_CAP];
    int64_t sent_ns, deadline_ns;
} baton;

#define BATON(p) ((baton *)(void *)((char *)(p) - offsetof(baton, part)))

enum { B_START, B_SETNX, B_MARK, B_POP, B_RELEASE };

static int send_args(baton *b, int state, int n, const char *const *argv) {
    lb__cmd_reset(&b->m.cmd);
    for (int i = 0; i < n; i++) lb__cmd_argz(&b->m.cmd, argv[i]);
    b->state = state;
    return LB_STEP_SEND;
}

static int hold(baton *b, int64_t from_ns, int64_t ms) {
    b->held = 1;
    b->deadline_ns = from_ns + ms * 1000000;
    return LB_OK;
}

/* A baton "token ttl life". Its key's TTL (the releaser's) started at the
 * push, which came after the pop was sent when the waiter was blocked, and at
 * most the baton's life before it otherwise: counting the shorter TTL from
 * the send less that life never runs past the key's end. */
static int take(baton *b, const redisReply *r) {
    char tok[LB__TOKEN_CAP];
    long long ttl = 0, life = 0;
    char rest;
    if (r->len > 80 ||
        sscanf(r->str, "%32[0-9a-f] %lld %lld%c", tok, &ttl, &life, &rest) != 3 ||
        strlen(tok) != LB_TOKEN_LEN || ttl <= 0 || life <= 0 || life > ttl)
        return lb__fail(&b->m, LB_EPROTO, "baton: unexpected element");
    memcpy(b->token, tok, sizeof tok);
    int64_t ms = ttl < b->ttl_ms && !b->own_ttl ? ttl : b->ttl_ms;
    return hold(b, b->sent_ns - (b->margin ? life * 1000000 : 0), ms);
}

static int acquire_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    baton *b = (baton *)(void *)m;
    if (r && r->type == REDIS_REPLY_ERROR) return lb__fail(m, LB_EREDIS, "%s", r->str);
    switch (b->state) {
    case B_START: {
        if (lb__token(b->token) != LB_OK) return lb__fail(m, LB_EIO, "no random source");
        b->sent_ns = now->mono_ns;
        const char *argv[] = {"SET", b->key, b->token, "NX", "PX", b->ttl, "GET"};
        return send_args(b, B_SETNX, 7, argv);
    }
    case B_SETNX: {
        if (!r) return lb__fail(m, LB_EIO, "no reply");
        if (r->type == REDIS_REPLY_NIL) return hold(b, b->sent_ns, b->ttl_ms);
        const char *argv[] = {"SET", b->mark, "1", "PX", b->life};
        return send_args(b, B_MARK, 5, argv);
    }
    case B_MARK: {
        /* The pop stands for a BLPOP answered now. */
        b->sent_ns = now->mono_ns;
        const char *argv[] = {"LPOP", b->list};
        return send_args(b, B_POP, 2, argv);
    }
    default:
        if (!r) return lb__fail(m, LB_EIO, "no reply");
        if (r->type == REDIS_REPLY_NIL) return lb__fail(m, LB_EBUSY, "no baton");
        if (r->type != REDIS_REPLY_STRING) return lb__fail(m, LB_EPROTO, "baton: unexpected reply");
        return take(b, r);
    }
}

static int release_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    baton *b = (baton *)(void *)m;
    (void)now;
    if (b->state == B_START) {
        if (lb__token(b->fresh) != LB_OK) return lb__fail(m, LB_EIO, "no random source");
        const char *argv[] = {"EVAL", release_script, "3", b->key, b->list, b->mark,
                              b->token, b->fresh, b->ttl, b->life};
        return send_args(b, B_RELEASE, 10, argv);
    }
    if (!r) return lb__fail(m, LB_EIO, "connection failed during release");
    if (r->type != REDIS_REPLY_INTEGER || r->integer < 0 || r->integer > 2)
        return lb__fail(m, LB_EPROTO, "baton release: unexpected reply");
    b->held = 0;
    return r->integer == 0 ? lb__fail(m, LB_ELOST, "not ours") : LB_OK;
}

static lb_machine *b_acq(lbr_part *p) {
    baton *b = BATON(p);
    lb__machine_begin(&b->m, acquire_step);
    b->state = B_START;
    return &b->m;
}
static lb_machine *b_rel(lbr_part *p) {
    baton *b = BATON(p);
    lb__machine_begin(&b->m, release_step);
    b->state = B_START;
    return &b->m;
}
static int b_bel(const lbr_part *p) { return BATON(p)->held; }
static int b_valid(const lbr_part *p, const lb_codec *codec, const lb_now *now) {
    (void)codec;
    return now->mono_ns <= BATON(p)->deadline_ns;
}
static const char *b_val(const lbr_part *p, size_t *len) {
    *len = strlen(BATON(p)->token);
    return BATON(p)->token;
}
static void b_destroy(lbr_part *p) { free(BATON(p)); }

static int names(const char *key, char *list, char *mark, size_t cap) {
    int a = lb_companion_key(key, strlen(key), "baton", list, cap);
    int b = lb_companion_key(key, strlen(key), "bwait", mark, cap);
    return a > 0 && (size_t)a < cap && b > 0 && (size_t)b < cap;
}

/* "baton": the receiver counts the shorter of its TTL and the baton's (the
 * releaser's, which the key got) from its pop less the baton's life;
 * "baton-no-margin" counts from its pop, which over-counts a baton that
 * waited in the list; "baton-own-ttl" counts its own TTL, which over-counts
 * a baton from a client with a shorter one. */
lbr_part *lbr_baton_part_new(const char *kind, const lbr_part_config *cfg) {
    int margin = strcmp(kind, "baton-no-margin") != 0, own = strcmp(kind, "baton-own-ttl") == 0;
    if (strcmp(kind, "baton") != 0 && !own && margin) return NULL;
    baton *b = calloc(1, sizeof *b);
    if (!b || strlen(cfg->key) >= sizeof b->key ||
        !names(cfg->key, b->list, b->mark, sizeof b->list)) {
        free(b);
        return NULL;
    }
    snprintf(b->key, sizeof b->key, "%s", cfg->key);
    b->margin = margin;
    b->own_ttl = own;
    b->ttl_ms = cfg->ttl_ms;
    b->life_ms = cfg->ttl_ms * BATON_LIFE_PCT / 100 > 0 ? cfg->ttl_ms * BATON_LIFE_PCT / 100 : 1;
    snprintf(b->ttl, sizeof b->ttl, "%lld", (long long)b->ttl_ms);
    snprintf(b->life, sizeof b->life, "%lld", (long long)b->life_ms);
    b->part = (lbr_part){kind, b_acq, b_rel, b_bel, b_valid, b_val, b_destroy, NULL};
    return &b->part;
}

/* Redis runs the baton's and the mark's TTLs on its own clock: a pause of the
 * world moves them by as much (and deletes them when they run out), as it
 * moves the lock key's. */
void lbr_baton_warp(redisContext *c, const char *key, long long ms) {
    char list[160], mark[160];
    if (!names(key, list, mark, sizeof list)) return;
    lbr_warp_key(c, list, ms);
    lbr_warp_key(c, mark, ms);
}

/* A world starts with neither a baton nor a mark. */
void lbr_baton_reset(redisContext *c, const char *key) {
    char list[160], mark[160];
    if (!names(key, list, mark, sizeof list)) return;
    redisReply *r = redisCommand(c, "DEL %s %s", list, mark);
    if (r) freeReplyObject(r);
}

/* The name of the baton list or the mark when it has no TTL, copied to `bad`:
 * 1; 0 when both have one (or are absent), -1 when it cannot be read. */
int lbr_baton_untimed_key(redisContext *c, const char *key, char *bad, size_t cap) {
    char list[160], mark[160];
    if (!names(key, list, mark, sizeof list)) return -1;
    const char *keys[] = {list, mark};
    for (int i = 0; i < 2; i++) {
        redisReply *r = redisCommand(c, "PTTL %s", keys[i]);
        long long left = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -3;
        if (r) freeReplyObject(r);
        if (left == -3) return -1;
        if (left == -1) return snprintf(bad, cap, "%s", keys[i]), 1;
    }
    return 0;
}
