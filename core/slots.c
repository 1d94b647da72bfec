/* What a cluster says about itself, parsed strictly: the key-to-slot hash,
 * node addresses, CLUSTER SLOTS replies and MOVED/ASK redirections. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core/cluster_internal.h"

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection,
 * as Redis Cluster specifies for key slots. Bitwise: keys are short. */
static uint16_t crc16(const unsigned char *p, size_t len) {
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

unsigned lb_cluster_keyslot(const char *key, size_t keylen) {
    if (!key) return 0;
    const char *open = memchr(key, '{', keylen);
    if (open) {
        size_t rest = keylen - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1) {
            key = open + 1;
            keylen = (size_t)(close - open - 1);
        }
    }
    return crc16((const unsigned char *)key, keylen) & (LB_CLUSTER_SLOTS - 1);
}

/* A port is 1 to 65535 written in plain decimal digits. */
static int parse_port(const char *s, size_t len) {
    if (len == 0 || len > 5) return -1;
    int port = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        port = port * 10 + (s[i] - '0');
    }
    return port >= 1 && port <= 65535 ? port : -1;
}

static int set_host(lb__addr *out, const char *host, size_t len) {
    if (len == 0 || len >= LB__HOST_CAP || memchr(host, '\0', len)) return LB_EINVAL;
    memcpy(out->host, host, len);
    out->host[len] = '\0';
    return LB_OK;
}

int lb__addr_parse(const char *s, size_t len, const char *fallback_host, lb__addr *out) {
    memset(out, 0, sizeof *out);
    if (!s) return LB_EINVAL;
    const char *colon = NULL;
    for (size_t i = len; i > 0; i--)
        if (s[i - 1] == ':') {
            colon = s + i - 1;
            break;
        }
    if (!colon) return LB_EINVAL;
    size_t hostlen = (size_t)(colon - s);
    out->port = parse_port(colon + 1, len - hostlen - 1);
    if (out->port < 0) return LB_EINVAL;
    const char *host = s;
    if (hostlen >= 2 && host[0] == '[' && host[hostlen - 1] == ']') {
        host++;
        hostlen -= 2;
    }
    if (hostlen == 0) {
        if (!fallback_host) return LB_EINVAL;
        host = fallback_host;
        hostlen = strlen(fallback_host);
    }
    return set_host(out, host, hostlen);
}

int lb__addr_equal(const lb__addr *a, const lb__addr *b) {
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

void lb__slotmap_clear(lb__slotmap *m) {
    lb__free(m->allocator, m->addrs);
    m->addrs = NULL;
    m->naddrs = m->cap = 0;
    for (unsigned s = 0; s < LB_CLUSTER_SLOTS; s++) m->owner[s] = LB__NO_NODE;
}

int lb__slotmap_node(lb__slotmap *m, const lb__addr *addr) {
    for (int i = 0; i < m->naddrs; i++)
        if (lb__addr_equal(&m->addrs[i], addr)) return i;
    if (m->naddrs >= LB__NODES_MAX) return -1;
    if (m->naddrs == m->cap) {
        int cap = m->cap ? m->cap * 2 : 8;
        lb__addr *grown = lb__alloc(m->allocator, sizeof *grown * (size_t)cap);
        if (!grown) return -1;
        if (m->naddrs) memcpy(grown, m->addrs, sizeof *grown * (size_t)m->naddrs);
        lb__free(m->allocator, m->addrs);
        m->addrs = grown;
        m->cap = cap;
    }
    m->addrs[m->naddrs] = *addr;
    return m->naddrs++;
}

static int slot_number(const redisReply *r, long long *out) {
    if (r->type != REDIS_REPLY_INTEGER || r->integer < 0 || r->integer >= LB_CLUSTER_SLOTS)
        return 0;
    *out = r->integer;
    return 1;
}

/* The primary of one range: [host, port, id?, metadata?]. Returns its index,
 * LB__NO_NODE for an unknown endpoint ("?"), -1 if malformed, -2 if the node
 * could not be added (out of memory, or too many nodes). */
static long primary_of(lb__slotmap *m, const redisReply *p, const char *fallback_host) {
    if (p->type != REDIS_REPLY_ARRAY || p->elements < 2) return -1;
    const redisReply *h = p->element[0], *port = p->element[1];
    if (port->type != REDIS_REPLY_INTEGER || port->integer < 1 || port->integer > 65535)
        return -1;
    lb__addr a;
    memset(&a, 0, sizeof a);
    a.port = (int)port->integer;
    if (h->type == REDIS_REPLY_STRING && h->len == 1 && h->str[0] == '?') return LB__NO_NODE;
    if (h->type == REDIS_REPLY_NIL || (h->type == REDIS_REPLY_STRING && h->len == 0)) {
        if (!fallback_host || set_host(&a, fallback_host, strlen(fallback_host)) != LB_OK)
            return -1;
    } else if (h->type != REDIS_REPLY_STRING || set_host(&a, h->str, (size_t)h->len) != LB_OK) {
        return -1;
    }
    int i = lb__slotmap_node(m, &a);
    return i < 0 ? -2 : i;
}

int lb__slotmap_parse(lb__slotmap *out, const redisReply *r, const char *fallback_host,
                      const lb_allocator *a) {
    memset(out, 0, sizeof *out);
    out->allocator = a;
    lb__slotmap_clear(out);
    if (!r || r->type != REDIS_REPLY_ARRAY) return LB_EPROTO;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        long long lo, hi;
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 || !slot_number(e->element[0], &lo) ||
            !slot_number(e->element[1], &hi) || lo > hi)
            goto bad;
        long node = primary_of(out, e->element[2], fallback_host);
        if (node < 0) {
            int rc = node == -2 && out->naddrs < LB__NODES_MAX ? LB_ENOMEM : LB_EPROTO;
            lb__slotmap_clear(out);
            return rc;
        }
        for (long long s = lo; s <= hi; s++) {
            /* Two primaries for one slot: the map is inconsistent; better no
             * map than a guess. */
            if (out->owner[s] != LB__NO_NODE) goto bad;
            out->owner[s] = (uint16_t)node;
        }
    }
    return LB_OK;
bad:
    lb__slotmap_clear(out);
    return LB_EPROTO;
}

lb__redirect lb__redirect_parse(const char *s, size_t len, const char *fallback_host,
                                unsigned *slot, lb__addr *to) {
    lb__redirect kind;
    size_t skip;
    *slot = 0;
    memset(to, 0, sizeof *to);
    if (!s) return LB__REDIRECT_NONE;
    if (len > 6 && memcmp(s, "MOVED ", 6) == 0) {
        kind = LB__REDIRECT_MOVED;
        skip = 6;
    } else if (len > 4 && memcmp(s, "ASK ", 4) == 0) {
        kind = LB__REDIRECT_ASK;
        skip = 4;
    } else {
        return LB__REDIRECT_NONE;
    }
    s += skip;
    len -= skip;
    const char *sp = memchr(s, ' ', len);
    if (!sp || sp == s || sp - s > 5) return LB__REDIRECT_NONE;
    unsigned n = 0;
    for (const char *p = s; p < sp; p++) {
        if (*p < '0' || *p > '9') return LB__REDIRECT_NONE;
        n = n * 10 + (unsigned)(*p - '0');
    }
    if (n >= LB_CLUSTER_SLOTS) return LB__REDIRECT_NONE;
    size_t rest = len - (size_t)(sp - s) - 1;
    if (lb__addr_parse(sp + 1, rest, fallback_host, to) != LB_OK) return LB__REDIRECT_NONE;
    *slot = n;
    return kind;
}

static int starts_word(const char *s, size_t len, const char *word) {
    size_t w = strlen(word);
    return len >= w && memcmp(s, word, w) == 0 && (len == w || s[w] == ' ');
}

int lb__cluster_retryable(const char *s, size_t len) {
    if (!s) return 0;
    return starts_word(s, len, "TRYAGAIN") || starts_word(s, len, "CLUSTERDOWN") ||
           starts_word(s, len, "LOADING");
}
