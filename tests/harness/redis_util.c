/* Checked Redis commands for tests (see redis_util.h). */
#include "harness/redis_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

void lbt_vcmd_ok(redisContext *c, const char *fmt, va_list ap) {
    redisReply *r = redisvCommand(c, fmt, ap);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR) fail_msg("%s: %s", fmt, r->str);
    freeReplyObject(r);
}

void lbt_cmd_ok(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lbt_vcmd_ok(c, fmt, ap);
    va_end(ap);
}

long long lbt_int(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

const char *lbt_get(redisContext *c, const char *key) {
    static char buf[256];
    redisReply *r = redisCommand(c, "GET %s", key);
    assert_non_null(r);
    buf[0] = '\0';
    if (r->type == REDIS_REPLY_STRING) snprintf(buf, sizeof buf, "%s", r->str);
    freeReplyObject(r);
    return buf;
}

long long lbt_calls(redisContext *c, const char *name) {
    char field[128];
    snprintf(field, sizeof field, "cmdstat_%s:calls=", name);
    redisReply *r = redisCommand(c, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    const char *at = strstr(r->str, field);
    long long n = at ? atoll(at + strlen(field)) : 0;
    freeReplyObject(r);
    return n;
}

void lbt_del_matching(redisContext *c, const char *pattern) {
    redisReply *r = redisCommand(c, "KEYS %s", pattern);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++)
        lbt_cmd_ok(c, "DEL %b", r->element[i]->str, (size_t)r->element[i]->len);
    freeReplyObject(r);
}
