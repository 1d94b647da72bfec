/* Test harness: the migration shim's handles made for a test, and checks of
 * the keys they write, on a connection the test names. */
#ifndef LBT_MLOCK_UTIL_H
#define LBT_MLOCK_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>

#include "lockbridge/lockbridge.h"

/* DEL key on `c`. */
void lbt_del(redisContext *c, const char *key);
/* PTTL key on `c`, in ms (-2: absent, -1: no TTL). */
long long lbt_pttl(redisContext *c, const char *key);
/* Fails the running test unless the key holds exactly these bytes
 * (v == NULL: the key is absent). */
void lbt_assert_key(redisContext *c, const char *key, const char *v, size_t len);
/* Fails the running test unless the key holds the value `l` last wrote. */
void lbt_assert_key_is_ours(redisContext *c, const char *key, const lb_mlock *l);
/* A handle in a fixed `mode`, `codec` a codec spec (NULL: the default),
 * valid `ttl_ms` ms, on `clock` (NULL: the system's). */
lb_mlock *lbt_mlock(const char *key, lb_mode mode, const char *codec, int64_t ttl_ms,
                    const lb_clock *clock);
/* A handle following namespace `ns`'s control key, `configured` until it
 * reads one, rereading it every `refresh_ms` ms; valid 5000 ms. */
lb_mlock *lbt_follower(const char *key, const char *ns, lb_mode configured, int64_t refresh_ms);
/* Writes to `out` (LB_VALUE_MAX bytes) a value of codec `codec_spec`
 * expiring `offset_ms` ms from now (negative: expired); returns its length. */
size_t lbt_expiry_value(const char *codec_spec, int64_t offset_ms, char *out);

#endif
