/* Where the tool's scans run: the one server it is connected to, or, on a Redis
 * Cluster node, every primary of the slot map, and the node that owns a slot. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster_internal.h"
#include "lockbridge/cluster.h"
#include "tool/common/keys.h"
#include "tool/common/server.h"

/* 1 when INFO cluster says cluster_enabled:1, 0 when it says otherwise or has
 * no such section (a server built without cluster support), -1 on an error.
 * When INFO is refused (an ACL, a renamed command), CLUSTER INFO decides: a
 * server not in cluster mode answers it with an error. */
static int cluster_enabled(redisContext *c, char *err, size_t cap) {
    redisReply *r = redisCommand(c, "INFO cluster");
    int on = -1;
    if (r && r->type == REDIS_REPLY_STRING) on = strstr(r->str, "cluster_enabled:1") != NULL;
    else if (!r) snprintf(err, cap, "INFO cluster: %s", c->errstr[0] ? c->errstr : "no reply");
    else if (r->type != REDIS_REPLY_ERROR) snprintf(err, cap, "INFO cluster: unexpected reply");
    else {
        freeReplyObject(r);
        r = redisCommand(c, "CLUSTER INFO");
        if (!r) snprintf(err, cap, "CLUSTER INFO: %s", c->errstr[0] ? c->errstr : "no reply");
        else on = r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:") != NULL;
    }
    if (r) freeReplyObject(r);
    return on;
}

/* The index of the primary at host:port, added if new; -1 when out of memory. */
static int primary_index(lb__cli_topo *t, const char *host, size_t hostlen, int port,
                         const lb__cli_conn *base) {
    for (size_t i = 0; i < t->n; i++)
        if (t->node[i].conn.port == port && strlen(t->node[i].host) == hostlen &&
            memcmp(t->node[i].host, host, hostlen) == 0)
            return (int)i;
    lb__cli_node *grown = realloc(t->node, (t->n + 1) * sizeof *grown);
    if (!grown) return -1;
    t->node = grown;
    /* conn.host points into the entry: set again for every entry after a move. */
    for (size_t i = 0; i < t->n; i++) t->node[i].conn.host = t->node[i].host;
    lb__cli_node *e = &t->node[t->n];
    memset(e, 0, sizeof *e);
    memcpy(e->host, host, hostlen);
    e->host[hostlen] = '\0';
    e->conn = *base;
    e->conn.socket = NULL;
    e->conn.host = e->host;
    e->conn.port = port;
    lb__cli_endpoint(&e->conn, e->name, sizeof e->name);
    return (int)t->n++;
}

/* The slot map, read by the library's own parser (the one its cluster handle
 * uses), then each primary given the tool's connection options. A primary
 * announced with an empty host is the node asked; one announced as "?" (no
 * known endpoint) serves its slots to nobody. */
static int read_slots(lb__cli_topo *t, redisContext *c, const lb__cli_conn *base, char *err,
                      size_t cap) {
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        char msg[160] = "unexpected reply";
        if (!r) snprintf(msg, sizeof msg, "%s", c->errstr[0] ? c->errstr : "no reply");
        else if (r->type == REDIS_REPLY_ERROR)
            lb__escape(msg, sizeof msg, r->str, (size_t)r->len);
        snprintf(err, cap, "CLUSTER SLOTS: %s", msg);
        if (r) freeReplyObject(r);
        return -1;
    }
    lb__slotmap m;
    int rc = lb__slotmap_parse(&m, r, base->host, NULL);
    freeReplyObject(r);
    if (rc != LB_OK) {
        snprintf(err, cap, rc == LB_ENOMEM ? "out of memory"
                                           : "CLUSTER SLOTS: an entry that does not parse");
        return -1;
    }
    int *node_of = calloc((size_t)(m.naddrs > 0 ? m.naddrs : 1), sizeof *node_of);
    for (int i = 0; node_of && i < m.naddrs; i++) {
        node_of[i] = primary_index(t, m.addrs[i].host, strlen(m.addrs[i].host), m.addrs[i].port,
                                   base);
        if (node_of[i] < 0) rc = -1;
    }
    if (!node_of || rc != 0) {
        snprintf(err, cap, "out of memory");
        rc = -1;
    }
    for (int s = 0; rc == 0 && s < LB_CLUSTER_SLOTS; s++)
        t->owner[s] = m.owner[s] == LB__NO_NODE ? -1 : node_of[m.owner[s]];
    free(node_of);
    lb__slotmap_clear(&m);
    if (rc == 0 && t->n == 0) snprintf(err, cap, "CLUSTER SLOTS: no slot is served"), rc = -1;
    return rc;
}

int lb__cli_topo_read(lb__cli_topo *t, redisContext *c, const lb__cli_conn *base, char *err,
                      size_t cap) {
    memset(t, 0, sizeof *t);
    int on = cluster_enabled(c, err, cap);
    if (on <= 0) return on;
    t->cluster = 1;
    t->owner = malloc(LB_CLUSTER_SLOTS * sizeof *t->owner);
    if (!t->owner) return snprintf(err, cap, "out of memory"), -1;
    for (int s = 0; s < LB_CLUSTER_SLOTS; s++) t->owner[s] = -1;
    if (read_slots(t, c, base, err, cap) != 0) {
        lb__cli_topo_clear(t);
        return -1;
    }
    return 0;
}

void lb__cli_topo_clear(lb__cli_topo *t) {
    free(t->node);
    free(t->owner);
    memset(t, 0, sizeof *t);
}

redisContext *lb__cli_connect_primary(const lb__cli_topo *t, size_t i, char *err, size_t cap) {
    char why[512];
    redisContext *c = lb__cli_connect(&t->node[i].conn, why, sizeof why);
    if (!c) snprintf(err, cap, "primary %s: %s", t->node[i].name, why);
    return c;
}

redisContext *lb__cli_connect_ns(const lb__cli_topo *t, redisContext *c, const char *ns,
                                 char *err, size_t cap) {
    lb_ns_keys k;
    if (!t->cluster) return c;
    if (lb_ns_keys_init(&k, ns, strlen(ns)) != LB_OK)
        return snprintf(err, cap, "bad namespace"), NULL;
    unsigned slot = lb_cluster_keyslot(k.mode, k.modelen);
    if (t->owner[slot] < 0) {
        snprintf(err, cap, "no primary serves slot %u of the namespace's keys", slot);
        return NULL;
    }
    return lb__cli_connect_primary(t, (size_t)t->owner[slot], err, cap);
}

redisContext *lb__cli_connect_key(const lb__cli_topo *t, redisContext *c, const char *key,
                                  size_t keylen, char *err, size_t cap) {
    if (!t->cluster) return c;
    unsigned slot = lb_cluster_keyslot(key, keylen);
    if (t->owner[slot] < 0) {
        snprintf(err, cap, "no primary serves slot %u of the key", slot);
        return NULL;
    }
    return lb__cli_connect_primary(t, (size_t)t->owner[slot], err, cap);
}

void lb__cli_ns_done(redisContext *ns_c, redisContext *c) {
    if (ns_c && ns_c != c) redisFree(ns_c);
}

int lb__cli_on_ns(const lb__cli_args *a, const char *ns, lb__cli_ns_fn fn, void *ud) {
    char err[512];
    lb__cli_topo t;
    redisContext *nc, *c = lb__cli_connect(&a->conn, err, sizeof err);
    if (!c) return lb__cli_error(a, NULL, LB_EIO, err);
    if (lb__cli_topo_read(&t, c, &a->conn, err, sizeof err) != 0) {
        redisFree(c);
        return lb__cli_error(a, NULL, LB_EREDIS, err);
    }
    int code;
    if (!(nc = lb__cli_connect_ns(&t, c, ns, err, sizeof err)))
        code = lb__cli_error(a, NULL, LB_EIO, err);
    else code = fn(a, &t, c, nc, ns, ud);
    lb__cli_ns_done(nc, c);
    lb__cli_topo_clear(&t);
    redisFree(c);
    return code;
}

/* On a cluster every primary is connected in turn, and an unreachable one ends
 * the whole scan: the counts of a partial scan would read as a verdict. */
int lb__cli_scan_each(const lb__cli_topo *t, redisContext *c, const lb__cli_scanopts *o,
                      lb__cli_key_fn fn, lb__cli_after_fn after, void *ud, uint64_t *scanned,
                      int *servers, char *err, size_t cap) {
    lb__cli_scanopts po = *o;
    lb__cli_reader *r = NULL;
    uint64_t n = 0;
    int rc = 0;
    *scanned = 0;
    *servers = 0;
    for (size_t i = 0; rc == 0 && i < (t->cluster ? t->n : 1); i++) {
        char where[400] = "";
        redisContext *nc = c;
        if (t->cluster) {
            snprintf(where, sizeof where, "primary %s (%zu/%zu)", t->node[i].name, i + 1, t->n);
            po.where = where;
            po.cluster = 1;
            if (!(nc = lb__cli_connect_primary(t, i, err, cap))) return -1;
        }
        rc = lb__cli_reader_new(&r, nc, err, cap) == 0 ? 0 : -1;
        if (rc == 0) rc = lb__cli_scan(r, &po, fn, ud, &n, err, cap);
        lb__cli_reader_free(r);
        r = NULL;
        *scanned += n;
        if (rc == 0 && after) rc = after(nc, ud, err, cap) == 0 ? 0 : -1;
        if (rc == 0) (*servers)++;
        if (rc < 0 && t->cluster) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            if (strncmp(why, "primary ", 8) != 0)
                snprintf(err, cap, "primary %s: %s", t->node[i].name, why);
        }
        if (nc != c) redisFree(nc);
    }
    return rc;
}

int lb__cli_legacy_calls_all(const lb__cli_topo *t, redisContext *c, int64_t *calls, char *err,
                             size_t cap) {
    *calls = 0;
    if (!t->cluster) return *calls = lb__cli_legacy_calls(c), 0;
    for (size_t i = 0; i < t->n; i++) {
        redisContext *nc = lb__cli_connect_primary(t, i, err, cap);
        if (!nc) return -1;
        int64_t v = lb__cli_legacy_calls(nc);
        redisFree(nc);
        if (v < 0 || *calls < 0) *calls = -1;
        else *calls += v;
    }
    return 0;
}
