/* Where a command about one key runs: the server the tool connected to, or, on
 * a Cluster node (found as redis-cli -c finds it), the primaries that own the
 * key, its namespace and any other key it names, and a handle that follows
 * the cluster's redirections for lock operations. */
#include <stdio.h>
#include <string.h>

#include "lockbridge/cluster.h"
#include "tool/common/server.h"

/* The options that reach `key`'s primary, into *out (host kept in host[]). */
static int owner_conn(const lb__cli_topo *t, const char *key, lb__cli_conn *out, char *host,
                      size_t hostcap, char *err, size_t cap) {
    int i = t->owner[lb_cluster_keyslot(key, strlen(key))];
    if (i < 0) {
        snprintf(err, cap, "no primary serves the slot of key %s", key);
        return -1;
    }
    *out = t->node[i].conn;
    snprintf(host, hostcap, "%s", t->node[i].host);
    out->host = host;
    return 0;
}

/* A cluster handle seeded with the node the tool was pointed at, with the
 * tool's credentials. */
int lb__cli_route_cluster(const lb__cli_route *r, lb_cluster **out, char *err, size_t cap) {
    char seed[300];
    const char *seeds[1] = {seed};
    lb_cluster_options o;
    *out = NULL;
    lb_cluster_options_init(&o);
    o.username = r->seed.user;
    o.password = r->seed.password;
    snprintf(seed, sizeof seed, strchr(r->seed.host, ':') ? "[%s]:%d" : "%s:%d", r->seed.host,
             r->seed.port);
    int rc = lb_cluster_new(out, seeds, 1, &o);
    if (rc != LB_OK) {
        snprintf(err, cap, "cannot read the cluster's slot map from %s: %s", seed,
                 *out ? lb_cluster_errstr(*out) : lb_strerror(rc));
        lb_cluster_free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

static int route_cluster(lb__cli_route *r, const lb__cli_topo *t, const char *key, const char *ns,
                         const char *other, char *err, size_t cap) {
    if (r->seed.socket || r->seed.db > 0) {
        snprintf(err, cap, "a Cluster node is reached by host and port, with database 0");
        return -1;
    }
    if (owner_conn(t, key, &r->key, r->key_host, sizeof r->key_host, err, cap) != 0) return -1;
    if (ns) {
        lb_ns_keys k;
        if (lb_ns_keys_init(&k, ns, strlen(ns)) != LB_OK) {
            snprintf(err, cap, "bad namespace %s", ns);
            return -1;
        }
        if (owner_conn(t, k.mode, &r->ns, r->ns_host, sizeof r->ns_host, err, cap) != 0)
            return -1;
    }
    if (other && owner_conn(t, other, &r->other, r->other_host, sizeof r->other_host, err, cap))
        return -1;
    return lb__cli_route_cluster(r, &r->cluster, err, cap);
}

int lb__cli_route_open(lb__cli_route *r, const lb__cli_args *a, const char *key, const char *ns,
                       const char *other, char *err, size_t cap) {
    memset(r, 0, sizeof *r);
    r->seed = r->key = r->ns = r->other = a->conn;
    redisContext *c = lb__cli_connect(&a->conn, err, cap);
    if (!c) return -1;
    lb__cli_topo t;
    int rc = lb__cli_topo_read(&t, c, &a->conn, err, cap);
    redisFree(c);
    if (rc != 0) return -1;
    if (t.cluster) rc = route_cluster(r, &t, key, ns, other, err, cap);
    lb__cli_topo_clear(&t);
    return rc;
}

void lb__cli_route_close(lb__cli_route *r) {
    lb_cluster_free(r->cluster);
    r->cluster = NULL;
}

lb_target lb__cli_route_target(lb_cluster *cl, redisContext *c) {
    return cl ? lb_on_cluster(cl) : lb_on_conn(c);
}
