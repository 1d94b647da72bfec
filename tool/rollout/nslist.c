/* The namespaces on a server (or cluster) and the key pattern each judges by:
 * every gate record ({NS}:lb-gate) found by SCAN, with its stored pattern (*
 * when none is stored, as its commands scan). Evidence one command finds is
 * every such namespace's whose pattern matches the key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool/common/keys.h"
#include "tool/common/server.h"
#include "tool/rollout/gate.h"

#define SUFFIX ":lb-gate"

/* "{ns}:lb-gate" is ns's; "t{a}:lb-gate" is the tagged "t{a}"'s. */
static int ns_of(const lb__cli_key *k, char *ns, size_t cap) {
    size_t len = k->keylen, nslen = len - strlen(SUFFIX);
    const char *s = k->key;
    if (lb_companion_of(s, len, NULL) != LB_COMPANION_GATE || strcmp(k->type, "hash") != 0)
        return -1;
    if (s[0] == '{' && nslen > 2 && s[nslen - 1] == '}' && !memchr(s + 1, '{', nslen - 2)) {
        s++;
        nslen -= 2;
    }
    if (nslen == 0 || nslen >= cap) return -1;
    memcpy(ns, s, nslen);
    ns[nslen] = '\0';
    lb_ns_keys nk;
    /* Only a name whose own gate record this is (not a lock key's look-alike). */
    if (lb_ns_keys_init(&nk, ns, nslen) != LB_OK || nk.gatelen != len ||
        memcmp(nk.gate, k->key, len) != 0)
        return -1;
    return 0;
}

static int on_key(const lb__cli_key *k, void *ud) {
    lb__cli_nslist *l = ud;
    char ns[LB_NS_KEY_MAX];
    if (ns_of(k, ns, sizeof ns) != 0) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        lb__cli_nsmatch *grown = realloc(l->v, cap * sizeof *grown);
        if (!grown) return -1;
        l->v = grown;
        l->cap = cap;
    }
    memset(&l->v[l->n], 0, sizeof l->v[0]);
    snprintf(l->v[l->n].ns, sizeof l->v[0].ns, "%s", ns);
    l->n++;
    return 0;
}

/* Each record is read on the server that holds it (its namespace's slot). */
static int patterns(const lb__cli_args *a, const lb__cli_topo *t, lb__cli_nslist *l, char *err,
                    size_t cap) {
    for (size_t i = 0; i < l->n; i++) {
        lb__cli_gate g;
        redisContext *c = t->cluster ? lb__cli_connect_ns(t, NULL, l->v[i].ns, err, cap)
                                     : lb__cli_connect(&a->conn, err, cap);
        if (!c) return -1;
        int rc = lb__cli_gate_read(c, l->v[i].ns, &g, err, cap);
        redisFree(c);
        if (rc != 0) return -1;
        snprintf(l->v[i].match, sizeof l->v[i].match, "%s", g.have_match ? g.match : "*");
    }
    return 0;
}

int lb__cli_nslist_read(const lb__cli_args *a, const lb__cli_topo *t, lb__cli_nslist *l,
                        char *err, size_t cap) {
    lb__cli_scanopts so;
    uint64_t scanned;
    int servers;
    memset(l, 0, sizeof *l);
    memset(&so, 0, sizeof so);
    so.match = "*" SUFFIX;
    so.count = 1000;
    redisContext *c = lb__cli_connect(&a->conn, err, cap);
    if (!c) return -1;
    int rc = lb__cli_scan_each(t, c, &so, on_key, NULL, l, &scanned, &servers, err, cap);
    redisFree(c);
    if (rc != 0) {
        if (rc > 0) snprintf(err, cap, "listing the namespaces: out of memory");
        lb__cli_nslist_free(l);
        return -1;
    }
    if (patterns(a, t, l, err, cap) != 0) {
        lb__cli_nslist_free(l);
        return -1;
    }
    return 0;
}

void lb__cli_nslist_free(lb__cli_nslist *l) {
    free(l->v);
    memset(l, 0, sizeof *l);
}
