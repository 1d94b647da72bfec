/* A set of 64-bit fingerprints of (key, value) pairs: how the gate's repeated
 * scans tell a value that appeared or changed from the same value seen again. */
#include <stdlib.h>
#include <string.h>

#include "tool/rollout/gate.h"

#define SEEN_MIN_SLOTS 1024 /* slots of a new set (a power of two) */

/* FNV-1a over the key, a separator the key cannot end on, and the value. */
uint64_t lb__cli_fingerprint(const char *key, size_t keylen, const char *value, size_t vlen) {
    uint64_t h = UINT64_C(1469598103934665603);
    for (size_t i = 0; i < keylen; i++) h = (h ^ (unsigned char)key[i]) * UINT64_C(1099511628211);
    h = (h ^ 0x100) * UINT64_C(1099511628211);
    for (size_t i = 0; i < vlen; i++) h = (h ^ (unsigned char)value[i]) * UINT64_C(1099511628211);
    return h ? h : 1; /* 0 marks an empty slot */
}

static int grow(lb__cli_seen *s) {
    size_t n = s->cap ? s->cap * 2 : SEEN_MIN_SLOTS;
    uint64_t *slots = calloc(n, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->slot[i]) continue;
        size_t j = (size_t)s->slot[i] & (n - 1);
        while (slots[j]) j = (j + 1) & (n - 1);
        slots[j] = s->slot[i];
    }
    free(s->slot);
    s->slot = slots;
    s->cap = n;
    return 0;
}

int lb__cli_seen_add(lb__cli_seen *s, uint64_t fp) {
    if ((s->n + 1) * 2 > s->cap && grow(s) != 0) return -1;
    size_t j = (size_t)fp & (s->cap - 1);
    while (s->slot[j]) {
        if (s->slot[j] == fp) return 0;
        j = (j + 1) & (s->cap - 1);
    }
    s->slot[j] = fp;
    s->n++;
    return 1;
}

void lb__cli_seen_clear(lb__cli_seen *s) {
    free(s->slot);
    memset(s, 0, sizeof *s);
}
