/* Companion key naming: companions share the lock key's cluster hash slot. */
#include <string.h>

#include "core/internal.h"

/* Longest companion name checked by lb_companion_of, NUL included (bytes). */
#define LB_COMPANION_NAME_MAX 1024

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

static const struct {
    const char *suffix, *type;
    lb_companion kind;
} companions[] = {
    {"fence", "string", LB_COMPANION_FENCE},   {"queue", "zset", LB_COMPANION_QUEUE},
    {"fair", "hash", LB_COMPANION_FAIR},       {"lb-mode", "string", LB_COMPANION_MODE},
    {"lb-census", "hash", LB_COMPANION_CENSUS}, {"lb-gate", "hash", LB_COMPANION_GATE},
    {"baton", "list", LB_COMPANION_BATON},      {"bwait", "string", LB_COMPANION_BWAIT},
    {"outsider", "string", LB_COMPANION_OUTSIDER},
};

/* The base a companion named `key` with `suffix` would belong to: "{id}:lock"
 * for "{id}:lock:fence" (tagged), "k" for "{k}:fence" (wrapped). Then the name
 * is a companion only if lb_companion_key gives it back exactly from that base. */
static int is_companion_with(const char *key, size_t len, const char *suffix) {
    size_t slen = strlen(suffix);
    if (len < slen + 2 || key[len - slen - 1] != ':' ||
        memcmp(key + len - slen, suffix, slen) != 0)
        return 0;
    size_t blen = len - slen - 1;
    char again[LB_COMPANION_NAME_MAX];
    if (has_hash_tag(key, blen)) {
        int n = lb_companion_key(key, blen, suffix, again, sizeof again);
        if (n == (int)len && memcmp(again, key, len) == 0) return 1;
    }
    /* Wrapped: "{" base "}" then ":suffix". */
    if (blen < 3 || key[0] != '{' || key[blen - 1] != '}') return 0;
    int n = lb_companion_key(key + 1, blen - 2, suffix, again, sizeof again);
    return n == (int)len && memcmp(again, key, len) == 0;
}

lb_companion lb_companion_of(const char *key, size_t keylen, const char **type) {
    if (type) *type = "";
    if (!key || keylen + 1 > LB_COMPANION_NAME_MAX) return LB_COMPANION_NONE;
    for (size_t i = 0; i < sizeof companions / sizeof companions[0]; i++) {
        if (!is_companion_with(key, keylen, companions[i].suffix)) continue;
        if (type) *type = companions[i].type;
        return companions[i].kind;
    }
    return LB_COMPANION_NONE;
}

/* A lock at a companion's name would share that key with the companion of
 * another lock: a fair wait writes its mark there, a release its baton. */
const char *lb_lock_name_refused(const char *key, size_t keylen) {
    if (!key || keylen == 0) return "a lock needs a name of at least one byte";
    switch (lb_companion_of(key, keylen, NULL)) {
    case LB_COMPANION_NONE: return NULL;
    case LB_COMPANION_FENCE: return "the name of a lock's companion (its fencing counter); a lock may not take it";
    case LB_COMPANION_QUEUE: return "the name of a lock's companion (its fair queue); a lock may not take it";
    case LB_COMPANION_FAIR: return "the name of a lock's companion (its fair state); a lock may not take it";
    case LB_COMPANION_MODE: return "the name of a namespace's companion (its control key); a lock may not take it";
    case LB_COMPANION_CENSUS: return "the name of a namespace's companion (its census); a lock may not take it";
    case LB_COMPANION_GATE: return "the name of a namespace's companion (its gate record); a lock may not take it";
    case LB_COMPANION_BATON: return "the name of a lock's companion (its baton list); a lock may not take it";
    case LB_COMPANION_BWAIT: return "the name of a lock's companion (its baton waiters' mark); a lock may not take it";
    case LB_COMPANION_OUTSIDER: return "the name of a lock's companion (its outsider note); a lock may not take it";
    }
    return "the name of a lockbridge companion; a lock may not take it";
}
