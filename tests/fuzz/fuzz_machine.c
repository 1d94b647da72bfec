/* Fuzz target for the reply handling of the step machines: the input picks a
 * lock (legacy wire or scripted with any codec, token lock with or without
 * fencing, migration lock in each mode), the clock reading and a series of
 * operations, and supplies every reply as a redisReply tree (any type,
 * nesting, error text, or an echo of the command's arguments or of our
 * value). Besides not crashing, the machines must keep the rules that make a
 * lock safe: a value that does not decode is never taken over, a release
 * never deletes what is not ours, a handle holds only after an acquire said
 * LB_OK, and a finished machine takes no reply. To cover a new machine, add
 * it to `start`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "lockbridge/lockbridge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) \
    do {            \
        if (!(cond)) abort(); \
    } while (0)

typedef struct src {
    const uint8_t *p;
    size_t n;
} src;

static int take(src *s) {
    if (s->n == 0) return -1;
    s->n--;
    return *s->p++;
}

static int64_t take64(src *s) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | (uint64_t)(take(s) & 0xff);
    return (int64_t)v;
}

static void reply_free(redisReply *r) {
    if (!r) return;
    for (size_t i = 0; i < r->elements; i++) reply_free(r->element[i]);
    free(r->element);
    free(r->str);
    free(r);
}

static void set_str(redisReply *r, const char *s, size_t len) {
    r->str = malloc(len + 1);
    if (!r->str) abort();
    if (len) memcpy(r->str, s, len);
    r->str[len] = '\0'; /* hiredis always terminates */
    r->len = len;
}

static const char *const errors[] = {
    "NOSCRIPT No matching script. Please use EVAL.",
    "WRONGTYPE Operation against a key holding the wrong kind of value",
    "OOM command not allowed when used memory > 'maxmemory'.",
    "READONLY You can't write against a read only replica.",
    "ERR unknown command 'EVALSHA'",
};
static const long long integers[] = {0, 1, 2, -1, -2, -3, INT64_MIN, INT64_MAX};

/* What the handle wrote (legacy value or token), which an echo may answer. */
static const char *echo_ours;
static size_t echo_ourslen;

/* One reply tree from the input; NULL (a transport failure) at the top only. */
static redisReply *build(src *s, const lb_cmd *cmd, int depth) {
    int t = take(s);
    if (t < 0) return NULL;
    redisReply *r = calloc(1, sizeof *r);
    if (!r) abort();
    int k = t >> 3;
    switch (t & 7) {
    case 0: r->type = REDIS_REPLY_NIL; break;
    case 1:
        r->type = REDIS_REPLY_INTEGER;
        r->integer = k < 8 ? integers[k] : take64(s);
        break;
    case 2: {
        r->type = REDIS_REPLY_STRING;
        size_t len = (size_t)(take(s) & 0xff);
        if (len > s->n) len = s->n;
        set_str(r, (const char *)s->p, len);
        s->p += len;
        s->n -= len;
        break;
    }
    case 3: {
        r->type = REDIS_REPLY_ERROR;
        const char *e = errors[k % 5];
        set_str(r, e, strlen(e));
        break;
    }
    case 4: r->type = REDIS_REPLY_STATUS; set_str(r, "OK", 2); break;
    case 5:
        r->type = REDIS_REPLY_ARRAY;
        r->elements = depth < 3 ? (size_t)(k % 5) : 0;
        r->element = r->elements ? calloc(r->elements, sizeof *r->element) : NULL;
        for (size_t i = 0; i < r->elements; i++) {
            r->element[i] = build(s, cmd, depth + 1);
            if (!r->element[i]) {
                r->element[i] = calloc(1, sizeof **r->element);
                if (!r->element[i]) abort();
                r->element[i]->type = REDIS_REPLY_NIL;
            }
        }
        break;
    default: { /* an echo of one of the command's arguments, or of our value */
        int i = k % (cmd->argc + 1);
        r->type = REDIS_REPLY_STRING;
        if (i < cmd->argc) set_str(r, cmd->argv[i], cmd->argvlen[i]);
        else set_str(r, echo_ours, echo_ourslen);
        break;
    }
    }
    return r;
}

/* The lock under test and what the oracle knows of it. */
typedef struct subject {
    lb_legacy_lock *legacy;
    lb_lock *modern;
    lb_mlock *mlock;
    lb_codec codec;
} subject;

static int held(const subject *x) {
    if (x->mlock) return lb_mlock_info_of(x->mlock).held;
    return x->legacy ? lb_legacy_info_of(x->legacy).held : lb_lock_info_of(x->modern).held;
}

static lb_machine *start(subject *x, int op, int64_t ms) {
    if (x->mlock) {
        switch (op % 4) {
        case 0: return lb_mlock_machine(x->mlock, LB_OP_TRY_ACQUIRE, 0);
        case 1: return lb_mlock_machine(x->mlock, LB_OP_RELEASE, 0);
        case 2: return lb_mlock_machine(x->mlock, LB_OP_EXTEND, ms);
        default: return lb_mlock_machine(x->mlock, LB_OP_REFRESH, 0);
        }
    }
    if (x->legacy) {
        switch (op % 3) {
        case 0: return lb_legacy_machine(x->legacy, LB_OP_TRY_ACQUIRE, 0);
        case 1: return lb_legacy_machine(x->legacy, LB_OP_RELEASE, 0);
        default: return lb_legacy_machine(x->legacy, LB_OP_EXTEND, ms);
        }
    }
    switch (op % 4) {
    case 0: return lb_lock_machine(x->modern, LB_OP_TRY_ACQUIRE, 0);
    case 1: return lb_lock_machine(x->modern, LB_OP_RELEASE, 0);
    case 2: return lb_lock_machine(x->modern, (op >> 2) & 1 ? LB_OP_EXTEND_ADD : LB_OP_EXTEND, ms);
    default: return lb_lock_machine(x->modern, LB_OP_CHECK, 0);
    }
}

static int is(const lb_cmd *c, const char *name) {
    return c->argc > 0 && strlen(name) == c->argvlen[0] && memcmp(c->argv[0], name, c->argvlen[0]) == 0;
}

/* The rules checked after each reply: `sent` is the command the reply
 * answered (copied, since the machine may reuse its buffers), rc what the
 * machine did next. */
static void oracle(const subject *x, int op, const char *sent, size_t sentlen,
                   const redisReply *r, int rc, const char *ours, size_t ourslen) {
    if (!x->legacy || !r || r->type != REDIS_REPLY_STRING) return;
    int64_t t;
    if (op % 3 == 0 && sentlen == 3 && memcmp(sent, "GET", 3) == 0 &&
        ((size_t)r->len > LB_OBSERVED_MAX || lb_codec_decode(&x->codec, r->str, r->len, &t) != LB_OK))
        CHECK(rc == LB_EFOREIGN); /* never taken over */
    if (op % 3 == 1 && sentlen == 3 && memcmp(sent, "GET", 3) == 0 &&
        ((size_t)r->len != ourslen || memcmp(r->str, ours, ourslen) != 0))
        CHECK(rc == LB_ELOST); /* never deleted */
}

static void run_op(subject *x, src *s, int op, lb_now *now) {
    int64_t ms = (int64_t)(take(s) & 0xff) * 100 - 100;
    int was_held = held(x);
    char ours[LB_VALUE_MAX + LB_TOKEN_LEN];
    size_t ourslen = 0;
    if (x->mlock) ourslen = lb_mlock_info_of(x->mlock).value_len;
    else if (x->legacy) ourslen = lb_legacy_info_of(x->legacy).value_len;
    const char *v = x->mlock    ? lb_mlock_info_of(x->mlock).value
                    : x->legacy ? lb_legacy_info_of(x->legacy).value
                                : lb_lock_info_of(x->modern).token;
    if (!x->legacy && !x->mlock) ourslen = strlen(v);
    memcpy(ours, v, ourslen);
    echo_ours = ours;
    echo_ourslen = ourslen;
    lb_machine *m = start(x, op, ms);
    CHECK(m != NULL);
    int rc = lb_machine_step(m, NULL, now);
    for (int steps = 0; rc == LB_STEP_SEND; steps++) {
        CHECK(steps < 64); /* every operation ends */
        const lb_cmd *cmd = lb_machine_command(m);
        CHECK(cmd->argc >= 1 && cmd->argc <= LB_CMD_MAX_ARGS);
        for (int i = 0; i < cmd->argc; i++) CHECK(cmd->argv[i] != NULL);
        if (x->legacy && op % 3 == 1 && (is(cmd, "SET") || is(cmd, "GETSET"))) abort();
        char sent[16];
        size_t sentlen = cmd->argvlen[0] < sizeof sent ? cmd->argvlen[0] : sizeof sent;
        memcpy(sent, cmd->argv[0], sentlen);
        redisReply *r = build(s, cmd, 0);
        /* The clock moves on between replies, and stays put at its limit. */
        int64_t t;
        if (!__builtin_add_overflow(now->mono_ns, (int64_t)(take(s) & 0x7f) * 1000000, &t))
            now->mono_ns = t;
        if (!__builtin_add_overflow(now->wall_us, (int64_t)(take(s) & 0x7f) * 1000, &t))
            now->wall_us = t;
        rc = lb_machine_step(m, r, now);
        oracle(x, op, sent, sentlen, r, rc, ours, ourslen);
        reply_free(r);
    }
    CHECK(rc <= 0 && rc >= LB_ESTATE);
    CHECK(lb_machine_step(m, NULL, now) == LB_ESTATE); /* finished: takes nothing */
    int acquire = x->legacy ? op % 3 == 0 : op % 4 == 0; /* mlock: as modern */
    if (acquire) CHECK(held(x) == (rc == LB_OK || was_held));
    if (!was_held && !acquire) CHECK(!held(x));
    CHECK(lb_machine_errstr(m) != NULL);
}

static const char *const codecs[] = {"ms", "s", "float", "json", "json:unit=ms,clock=epoch"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    src s = {data, size};
    int kind = take(&s);
    if (kind < 0) return 0;
    subject x;
    memset(&x, 0, sizeof x);
    lb_now now;
    /* Mostly a plausible present; sometimes any instant at all. */
    if (kind & 0x80) {
        now.wall_us = take64(&s);
        now.mono_ns = take64(&s);
    } else {
        now.wall_us = 1700000000000000 + (int64_t)(take(&s) & 0xff) * 1000000;
        now.mono_ns = 5000000000000 + (int64_t)(take(&s) & 0xff) * 1000000;
    }
    if (kind & 0x40) {
        lb_mlock_options o;
        lb_mlock_options_init(&o);
        o.mode = (lb_mode)(((kind >> 1) & 3) % 3);
        o.legacy_variant = (kind >> 3) & 1 ? LB_LEGACY_SCRIPTED : LB_LEGACY_WIRE;
        CHECK(lb_codec_parse(&o.codec, codecs[(kind >> 4) & 3]) == LB_OK);
        x.codec = o.codec;
        if (lb_mlock_new(&x.mlock, "k", 1, &o) != LB_OK) return 0;
    } else if (kind & 1) {
        lb_legacy_options o;
        lb_legacy_options_init(&o);
        CHECK(lb_codec_parse(&o.codec, codecs[(kind >> 2) % 5]) == LB_OK);
        o.variant = (kind >> 1) & 1 ? LB_LEGACY_SCRIPTED : LB_LEGACY_WIRE;
        o.nil_retries = 2;
        x.codec = o.codec;
        if (lb_legacy_lock_new(&x.legacy, "k", 1, &o) != LB_OK) return 0;
    } else {
        lb_lock_options o;
        lb_lock_options_init(&o);
        o.fencing = (kind >> 1) & 1;
        if (lb_lock_new(&x.modern, "k", 1, &o) != LB_OK) return 0;
    }
    for (int ops = 0; ops < 8; ops++) {
        int op = take(&s);
        if (op < 0) break;
        run_op(&x, &s, op, &now);
    }
    lb_legacy_lock_free(x.legacy);
    lb_lock_free(x.modern);
    lb_mlock_free(x.mlock);
    return 0;
}
