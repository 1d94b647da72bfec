/* Redis's glob patterns (SCAN MATCH) matched here: which namespace's stored
 * pattern a key falls under, and whether a watched command touched one. */
#include "tool/common/keys.h"

/* One character class at p ("[...]", p past '['): whether c is in it, and
 * where the pattern goes on. An unclosed class runs to the end, as Redis's. */
static const char *in_class(const char *p, const char *end, unsigned char c, int *hit) {
    int neg = p < end && *p == '^';
    if (neg) p++;
    *hit = 0;
    while (p < end && *p != ']') {
        if (*p == '\\' && p + 1 < end) {
            p++;
            if ((unsigned char)*p == c) *hit = 1;
        } else if (p + 2 < end && p[1] == '-' && p[2] != ']') {
            unsigned char lo = (unsigned char)p[0], hi = (unsigned char)p[2];
            if (lo > hi) {
                unsigned char t = lo;
                lo = hi;
                hi = t;
            }
            if (c >= lo && c <= hi) *hit = 1;
            p += 2;
        } else if ((unsigned char)*p == c) {
            *hit = 1;
        }
        p++;
    }
    if (neg) *hit = !*hit;
    return p < end ? p + 1 : p;
}

static int match(const char *p, const char *pend, const char *s, const char *send, int depth) {
    if (depth > 64) return 0; /* a pattern of many stars: no match rather than a deep search */
    while (p < pend) {
        if (*p == '*') {
            while (p + 1 < pend && p[1] == '*') p++;
            if (p + 1 == pend) return 1;
            for (const char *t = s; t <= send; t++)
                if (match(p + 1, pend, t, send, depth + 1)) return 1;
            return 0;
        }
        if (s == send) return 0;
        if (*p == '?') {
            p++;
        } else if (*p == '[') {
            int hit;
            p = in_class(p + 1, pend, (unsigned char)*s, &hit);
            if (!hit) return 0;
        } else {
            if (*p == '\\' && p + 1 < pend) p++;
            if (*p != *s) return 0;
            p++;
        }
        s++;
    }
    return s == send;
}

int lb__cli_glob(const char *pattern, size_t plen, const char *s, size_t slen) {
    return match(pattern, pattern + plen, s, s + slen, 0);
}
