/* Test harness: a test's own Redis commands on a connection it names, each reply checked. */
#ifndef LOCKBRIDGE_TEST_REDIS_UTIL_H
#define LOCKBRIDGE_TEST_REDIS_UTIL_H

#include <stdarg.h>
#include <hiredis/hiredis.h>

/* Each runs a command built with hiredis's printf-style format on `c` and fails
 * the running cmocka test when the server does not answer as described. */

/* Any reply but an error. */
void lbt_cmd_ok(redisContext *c, const char *fmt, ...);
/* The same with a va_list. */
void lbt_vcmd_ok(redisContext *c, const char *fmt, va_list ap);
/* An integer reply: returns it. */
long long lbt_int(redisContext *c, const char *fmt, ...);
/* GET key: its value, or "" when absent or not a string. The value is in a
 * static buffer (at most 255 bytes kept) that the next call overwrites. */
const char *lbt_get(redisContext *c, const char *key);
/* The calls INFO commandstats counts for the command Redis names `name`
 * ("setnx", "script|load"): 0 before the first. */
long long lbt_calls(redisContext *c, const char *name);
/* Deletes every key KEYS `pattern` finds (a test's own keys, on a test server). */
void lbt_del_matching(redisContext *c, const char *pattern);

#endif
