/* Fakes for unit tests that run without a server: a settable clock and Redis
 * replies built by hand from a small description. */
#ifndef LOCKBRIDGE_TEST_LBT_FAKE_H
#define LOCKBRIDGE_TEST_LBT_FAKE_H

#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "lockbridge/core.h"

/* ---- A clock the test moves by hand ------------------------------------------ */
typedef struct lbt_fake_time {
    int64_t wall_us; /* microseconds since the epoch */
    int64_t mono_ns; /* nanoseconds of a pretend monotonic clock */
} lbt_fake_time;

static inline int64_t lbt_fake_wall_us(void *ud) { return ((lbt_fake_time *)ud)->wall_us; }
static inline int64_t lbt_fake_mono_ns(void *ud) { return ((lbt_fake_time *)ud)->mono_ns; }

/* A clock reading `t`, skewed by `offset_ms` milliseconds. */
static inline lb_clock lbt_fake_clock(lbt_fake_time *t, int64_t offset_ms) {
    lb_clock c;
    memset(&c, 0, sizeof c);
    c.wall_us = lbt_fake_wall_us;
    c.mono_ns = lbt_fake_mono_ns;
    c.ud = t;
    c.offset_ms = offset_ms;
    return c;
}

/* Moves both readings forward by `ms` milliseconds. */
static inline void lbt_fake_advance(lbt_fake_time *t, int64_t ms) {
    t->wall_us += ms * 1000;
    t->mono_ns += ms * 1000000;
}

/* ---- Replies ------------------------------------------------------------------ */
typedef enum lbt_reply_kind {
    LBT_NONE = 0, /* no reply: a transport failure (the machine is fed NULL) */
    LBT_INT,
    LBT_STR,
    LBT_NIL,
    LBT_ERR,
    LBT_STATUS,
    LBT_ARRAY /* an empty array */
} lbt_reply_kind;

typedef struct lbt_reply {
    lbt_reply_kind kind;
    long long integer; /* LBT_INT */
    const char *str;   /* LBT_STR, LBT_ERR, LBT_STATUS */
    size_t len;        /* bytes of str; 0 means strlen(str) */
} lbt_reply;

#define LBT_R_INT(n) {LBT_INT, (n), NULL, 0}
#define LBT_R_STR(s) {LBT_STR, 0, (s), 0}
#define LBT_R_NIL {LBT_NIL, 0, NULL, 0}
#define LBT_R_ERR(s) {LBT_ERR, 0, (s), 0}
#define LBT_R_STATUS(s) {LBT_STATUS, 0, (s), 0}
#define LBT_R_ARRAY {LBT_ARRAY, 0, NULL, 0}
#define LBT_R_NONE {LBT_NONE, 0, NULL, 0}

/* Fills `out` from `d`; returns `out`, or NULL for LBT_NONE. The string is not
 * copied: `d` must outlive the reply. */
static inline const redisReply *lbt_reply_build(redisReply *out, const lbt_reply *d) {
    memset(out, 0, sizeof *out);
    switch (d->kind) {
    case LBT_NONE: return NULL;
    case LBT_INT: out->type = REDIS_REPLY_INTEGER; out->integer = d->integer; break;
    case LBT_NIL: out->type = REDIS_REPLY_NIL; break;
    case LBT_ARRAY: out->type = REDIS_REPLY_ARRAY; break;
    case LBT_STR: out->type = REDIS_REPLY_STRING; break;
    case LBT_ERR: out->type = REDIS_REPLY_ERROR; break;
    case LBT_STATUS: out->type = REDIS_REPLY_STATUS; break;
    }
    if (d->str) {
        out->str = (char *)(uintptr_t)d->str;
        out->len = d->len ? d->len : strlen(d->str);
    }
    return out;
}

#endif
