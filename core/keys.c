/* Companion key naming: companions share the lock key's cluster hash slot. */
#include <string.h>

#include "core/internal.h"

/* Redis Cluster hashes only the part between the first '{' and the next '}'
 * when that part is non-empty. */
static int has_hash_tag(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (!open) return 0;
    size_t rest = len - (size_t)(open - key) - 1;
    const char *close = memchr(open + 1, '}', rest);
    return close && close > open + 1;
}

int lb_companion_key(const char *key, size_t keylen, const char *suffix, char *out,
                     size_t cap) {
    if (!key || !suffix || !out || keylen == 0) return LB_EINVAL;
    size_t slen = strlen(suffix);
    int tagged = has_hash_tag(key, keylen);
    /* Wrapping a key that contains '}' would make the wrapped tag end early and
     * land in another slot; no companion name can share such a key's slot. */
    if (!tagged && memchr(key, '}', keylen)) return LB_EINVAL;
    size_t need = keylen + 1 + slen + (tagged ? 0 : 2);
    if (need + 1 > cap || need > (size_t)INT32_MAX) return LB_EINVAL;
    size_t o = 0;
    if (!tagged) out[o++] = '{';
    memcpy(out + o, key, keylen);
    o += keylen;
    if (!tagged) out[o++] = '}';
    out[o++] = ':';
    memcpy(out + o, suffix, slen);
    o += slen;
    out[o] = '\0';
    return (int)o;
}
