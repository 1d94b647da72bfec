/* A namespace's gate record ({ns}:lb-gate, a hash): the configuration the gate
 * scans with (key pattern, codecs, validity, refresh interval), when the current
 * stage began, and the legacy evidence that must outlive sweep and pruning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool/common/keys.h"
#include "tool/rollout/gate.h"

/* Raises a field to ARGV[2] unless it already holds a later instant: evidence
 * only ever grows, whichever scan writes last. KEYS[1] gate hash; ARGV[1]
 * field, ARGV[2] epoch ms. */
static const char note_script[] =
    "local c = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '-1') or -1\n"
    "if tonumber(ARGV[2]) > c then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end\n"
    "return 1\n";

static int gate_key(const char *ns, char *out, size_t cap) {
    int n = lb_companion_key(ns, strlen(ns), "lb-gate", out, cap);
    return n < 0 ? -1 : n;
}

/* A decimal field; -1 when not a number (the caller marks the record corrupt:
 * a field that does not parse could have held anything). */
static int64_t field_ms(const redisReply *v) {
    if (!v || v->type != REDIS_REPLY_STRING || v->len == 0 || v->len > 19) return -1;
    char buf[24], *end;
    memcpy(buf, v->str, v->len);
    buf[v->len] = '\0';
    long long n = strtoll(buf, &end, 10);
    return *end == '\0' && n >= 0 ? (int64_t)n : -1;
}

static void copy_field(char *dst, size_t cap, int *have, const redisReply *v) {
    if (v->type != REDIS_REPLY_STRING || v->len == 0 || (size_t)v->len >= cap) return;
    memcpy(dst, v->str, v->len);
    dst[v->len] = '\0';
    *have = 1;
}

/* "MS PATTERN": when a scan of PATTERN last found a lock key. */
static void matched(lb__cli_gate *g, const redisReply *v) {
    char buf[LB__CLI_PATTERN_MAX + 32], *end;
    if (v->type != REDIS_REPLY_STRING || (size_t)v->len >= sizeof buf) return;
    memcpy(buf, v->str, v->len);
    buf[v->len] = '\0';
    long long ms = strtoll(buf, &end, 10);
    if (end == buf || *end != ' ' || ms < 0 || strlen(end + 1) >= sizeof g->matched) return;
    snprintf(g->matched, sizeof g->matched, "%s", end + 1);
    g->matched_ms = ms;
}

/* A numeric field that does not parse leaves the record corrupt, named. */
static int64_t number(lb__cli_gate *g, const char *f, const redisReply *v) {
    int64_t ms = field_ms(v);
    if (ms < 0 && !g->corrupt[0]) snprintf(g->corrupt, sizeof g->corrupt, "%s", f);
    return ms;
}

static void take(lb__cli_gate *g, const redisReply *k, const redisReply *v) {
    if (k->type != REDIS_REPLY_STRING) return;
    const char *f = k->str;
    if (strcmp(f, "match") == 0) copy_field(g->match, sizeof g->match, &g->have_match, v);
    else if (strcmp(f, "codecs") == 0)
        copy_field(g->codecs, sizeof g->codecs, &g->have_codecs, v);
    else if (strcmp(f, "since_ms") == 0) g->since_ms = number(g, f, v);
    else if (strcmp(f, "legacy_until_ms") == 0) g->legacy_until_ms = number(g, f, v);
    else if (strcmp(f, "modern_until_ms") == 0) g->modern_until_ms = number(g, f, v);
    else if (strcmp(f, "matched") == 0) matched(g, v);
    for (int i = 0; i < LB__CLI_VALS; i++)
        if (strcmp(f, lb__cli_val_field(i)) == 0) g->val[i] = number(g, f, v);
}

void lb__cli_gate_empty(lb__cli_gate *g) {
    memset(g, 0, sizeof *g);
    g->since_ms = g->legacy_until_ms = g->modern_until_ms = -1;
    for (int i = 0; i < LB__CLI_VALS; i++) g->val[i] = -1;
    g->matched_ms = -1;
}

int lb__cli_gate_read(redisContext *c, const char *ns, lb__cli_gate *g, char *err,
                      size_t cap) {
    char key[LB_NS_KEY_MAX];
    lb__cli_gate_empty(g);
    if (gate_key(ns, key, sizeof key) < 0) return snprintf(err, cap, "bad namespace"), -1;
    redisReply *r = redisCommand(c, "HGETALL %s", key);
    if (!r) return snprintf(err, cap, "reading the gate record: %s", c->errstr), -1;
    int rc = 0;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, cap, "reading the gate record %s: %s", key, r->str);
        rc = -1;
    } else if (r->type == REDIS_REPLY_ARRAY) {
        g->found = r->elements > 0;
        for (size_t i = 0; i + 1 < r->elements; i += 2) take(g, r->element[i], r->element[i + 1]);
    }
    freeReplyObject(r);
    return rc;
}

int lb__cli_gate_note(redisContext *c, const char *ns, const char *field, int64_t at_ms,
                      char *err, size_t cap) {
    char key[LB_NS_KEY_MAX], at[24];
    if (at_ms < 0) return 0;
    if (gate_key(ns, key, sizeof key) < 0) return snprintf(err, cap, "bad namespace"), -1;
    snprintf(at, sizeof at, "%lld", (long long)at_ms);
    redisReply *r = redisCommand(c, "EVAL %s 1 %s %s %s", note_script, key, field, at);
    int rc = r && r->type == REDIS_REPLY_INTEGER ? 0 : -1;
    if (rc) snprintf(err, cap, "recording legacy evidence in %s: %s", key,
                     r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
    if (r) freeReplyObject(r);
    return rc;
}

int lb__cli_gate_configure(redisContext *c, const char *ns, const lb__cli_gate *g, char *err,
                           size_t cap) {
    char key[LB_NS_KEY_MAX], num[LB__CLI_VALS][24];
    const char *argv[6 + 2 * LB__CLI_VALS] = {"HSET", key};
    int n = 2;
    if (gate_key(ns, key, sizeof key) < 0) return snprintf(err, cap, "bad namespace"), -1;
    if (g->have_match) argv[n++] = "match", argv[n++] = g->match;
    if (g->have_codecs) argv[n++] = "codecs", argv[n++] = g->codecs;
    for (int i = 0; i < LB__CLI_VALS; i++) {
        if (g->val[i] < 0) continue;
        snprintf(num[i], sizeof num[i], "%lld", (long long)g->val[i]);
        argv[n++] = lb__cli_val_field(i);
        argv[n++] = num[i];
    }
    if (n == 2) return 0;
    redisReply *r = redisCommandArgv(c, n, argv, NULL);
    int rc = r && r->type == REDIS_REPLY_INTEGER ? 0 : -1;
    if (rc) snprintf(err, cap, "writing the gate record %s: %s", key,
                     r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
    if (r) freeReplyObject(r);
    return rc;
}

int64_t lb__cli_server_ms(redisContext *c) {
    redisReply *r = redisCommand(c, "TIME");
    int64_t ms = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING)
        ms = (int64_t)atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    if (r) freeReplyObject(r);
    return ms;
}

/* The stage's minimum length: every follower re-reads the mode within its
 * refresh interval, and a lock it took in the previous mode lapses within the
 * fleet's validity. */
int64_t lb__cli_gate_stage_ms(const lb__cli_gate *g) {
    return lb__cli_gate_value(g, LB__CLI_VAL_TTL) + lb__cli_gate_value(g, LB__CLI_VAL_REFRESH);
}

int lb__cli_gate_matched(redisContext *c, const char *ns, const char *pattern, int64_t at_ms,
                         char *err, size_t cap) {
    char key[LB_NS_KEY_MAX], value[LB__CLI_PATTERN_MAX + 32];
    if (gate_key(ns, key, sizeof key) < 0) return snprintf(err, cap, "bad namespace"), -1;
    snprintf(value, sizeof value, "%lld %s", (long long)at_ms, pattern);
    redisReply *r = redisCommand(c, "HSET %s matched %s", key, value);
    int rc = r && r->type == REDIS_REPLY_INTEGER ? 0 : -1;
    if (rc) snprintf(err, cap, "writing the gate record %s: %s", key,
                     r && r->type == REDIS_REPLY_ERROR ? r->str : c->errstr);
    if (r) freeReplyObject(r);
    return rc;
}
