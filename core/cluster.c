/* The Redis Cluster driver: a slot map, one connection per primary, and the
 * loop that runs a step machine on the owner of its key's slot, following
 * MOVED and ASK and waiting out TRYAGAIN and CLUSTERDOWN. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "core/cluster_internal.h"

#define SEEDS_MAX 64

typedef struct node {
    lb__addr addr;
    redisContext *c; /* NULL until needed, and after a failure */
} node;

struct lb_cluster {
    lb_cluster_options opts;
    char *username, *password;
    lb__addr seeds[SEEDS_MAX];
    int nseeds;
    /* The pool: owner[slot] indexes nodes. Nodes named by MOVED or ASK but not
     * yet in a map are appended until the next refresh. */
    uint16_t owner[LB_CLUSTER_SLOTS];
    node *nodes;
    int nnodes, cap;
    int primaries;
    int stale; /* read the map again before the next command */
    redisContext *last; /* the connection that gave route()'s last reply */
    lb_cluster_stats stats;
    char errstr[LB__ERRSTR_CAP];
};

void lb_cluster_options_init(lb_cluster_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->connect_timeout_ms = 1000;
    o->command_timeout_ms = 1000;
    o->max_redirects = 5;
    o->retry_ms = 2000;
    o->retry_backoff_ms = 50;
}

static void set_err(lb_cluster *cl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(lb_cluster *cl, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cl->errstr, sizeof cl->errstr, fmt, ap);
    va_end(ap);
}

static redisContext *connect_addr(lb_cluster *cl, const lb__addr *a) {
    lb__conn_opts o = {a->host, a->port, cl->opts.connect_timeout_ms,
                       cl->opts.command_timeout_ms, cl->username, cl->password, 0, NULL};
    cl->stats.connects++;
    return lb__connect(&o, NULL, cl->errstr, sizeof cl->errstr);
}

static redisContext *node_conn(lb_cluster *cl, int i) {
    if (!cl->nodes[i].c) cl->nodes[i].c = connect_addr(cl, &cl->nodes[i].addr);
    return cl->nodes[i].c;
}

static void drop_conn(lb_cluster *cl, int i) {
    if (cl->last == cl->nodes[i].c) cl->last = NULL;
    if (cl->nodes[i].c) redisFree(cl->nodes[i].c);
    cl->nodes[i].c = NULL;
}

/* Index of `a` in the pool, appending it if new; -1 on failure. */
static int pool_node(lb_cluster *cl, const lb__addr *a) {
    for (int i = 0; i < cl->nnodes; i++)
        if (lb__addr_equal(&cl->nodes[i].addr, a)) return i;
    if (cl->nnodes >= LB__NODES_MAX) return -1;
    if (cl->nnodes == cl->cap) {
        int cap = cl->cap ? cl->cap * 2 : 8;
        node *grown = lb__alloc(cl->opts.allocator, sizeof *grown * (size_t)cap);
        if (!grown) return -1;
        if (cl->nnodes) memcpy(grown, cl->nodes, sizeof *grown * (size_t)cl->nnodes);
        lb__free(cl->opts.allocator, cl->nodes);
        cl->nodes = grown;
        cl->cap = cap;
    }
    cl->nodes[cl->nnodes].addr = *a;
    cl->nodes[cl->nnodes].c = NULL;
    return cl->nnodes++;
}

/* Replaces the pool by the map's primaries, keeping the connections of those
 * that stay and closing the others. */
static int install(lb_cluster *cl, lb__slotmap *map) {
    node *fresh = NULL;
    if (map->naddrs) {
        fresh = lb__alloc(cl->opts.allocator, sizeof *fresh * (size_t)map->naddrs);
        if (!fresh) return LB_ENOMEM;
    }
    for (int j = 0; j < map->naddrs; j++) {
        fresh[j].addr = map->addrs[j];
        fresh[j].c = NULL;
        for (int i = 0; i < cl->nnodes; i++)
            if (cl->nodes[i].c && lb__addr_equal(&cl->nodes[i].addr, &map->addrs[j])) {
                fresh[j].c = cl->nodes[i].c;
                cl->nodes[i].c = NULL;
            }
    }
    for (int i = 0; i < cl->nnodes; i++) drop_conn(cl, i);
    lb__free(cl->opts.allocator, cl->nodes);
    cl->nodes = fresh;
    cl->nnodes = cl->cap = cl->primaries = map->naddrs;
    memcpy(cl->owner, map->owner, sizeof cl->owner);
    return LB_OK;
}

/* Asks one node for the slot map. `c` is the node's connection; on a
 * transport failure *broken is set (the caller drops the connection). */
static int ask_slots(lb_cluster *cl, redisContext *c, const lb__addr *a, int *broken) {
    lb__slotmap map;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    cl->stats.commands++;
    *broken = r == NULL;
    if (!r) {
        set_err(cl, "CLUSTER SLOTS on %s:%d: %s", a->host, a->port, c->errstr);
        return LB_EIO;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        char msg[80];
        lb__escape(msg, sizeof msg, r->str, (size_t)r->len);
        set_err(cl, "CLUSTER SLOTS on %s:%d: %s", a->host, a->port, msg);
        freeReplyObject(r);
        return LB_EREDIS;
    }
    int rc = lb__slotmap_parse(&map, r, a->host, cl->opts.allocator);
    freeReplyObject(r);
    if (rc == LB_OK && map.naddrs == 0) rc = LB_EPROTO; /* no slot served: keep the old map */
    if (rc == LB_OK) rc = install(cl, &map);
    else set_err(cl, "CLUSTER SLOTS on %s:%d: %s", a->host, a->port,
                 rc == LB_ENOMEM ? "out of memory" : "unreadable slot map");
    lb__slotmap_clear(&map);
    return rc;
}

/* Reads the map from `first` (a pool index, or -1), then every pool node,
 * then the seeds. */
static int refresh_from(lb_cluster *cl, int first) {
    int rc = LB_EIO, broken;
    cl->stats.refreshes++;
    for (int k = -1; k < cl->nnodes; k++) {
        int i = k < 0 ? first : k;
        if (i < 0 || (k >= 0 && k == first)) continue;
        redisContext *c = node_conn(cl, i);
        if (!c) continue;
        lb__addr a = cl->nodes[i].addr; /* install() replaces the pool */
        rc = ask_slots(cl, c, &a, &broken);
        if (rc == LB_OK) break;
        if (broken) drop_conn(cl, i);
    }
    for (int s = 0; rc != LB_OK && s < cl->nseeds; s++) {
        redisContext *c = connect_addr(cl, &cl->seeds[s]);
        if (!c) continue;
        rc = ask_slots(cl, c, &cl->seeds[s], &broken);
        redisFree(c);
    }
    if (rc == LB_OK) {
        cl->stale = 0;
        cl->errstr[0] = '\0';
    }
    return rc;
}

int lb_cluster_refresh(lb_cluster *cl) { return cl ? refresh_from(cl, -1) : LB_EINVAL; }

static char *copy_str(const lb_allocator *a, const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = lb__alloc(a, n);
    if (d) memcpy(d, s, n);
    return d;
}

int lb_cluster_new(lb_cluster **out, const char *const *seeds, int n, const lb_cluster_options *o) {
    lb_cluster_options defaults;
    if (!out) return LB_EINVAL;
    *out = NULL;
    if (!o) {
        lb_cluster_options_init(&defaults);
        o = &defaults;
    }
    if (!seeds || n < 1 || n > SEEDS_MAX || o->connect_timeout_ms <= 0 ||
        o->command_timeout_ms <= 0 || o->max_redirects < 0 || o->retry_ms < 0 ||
        o->retry_backoff_ms < 0 || (o->username && !o->password))
        return LB_EINVAL;
    lb_cluster *cl = lb__alloc(o->allocator, sizeof *cl);
    if (!cl) return LB_ENOMEM;
    memset(cl, 0, sizeof *cl);
    cl->opts = *o;
    for (unsigned s = 0; s < LB_CLUSTER_SLOTS; s++) cl->owner[s] = LB__NO_NODE;
    int rc = LB_EINVAL;
    for (int i = 0; i < n; i++)
        if (!seeds[i] || lb__addr_parse(seeds[i], strlen(seeds[i]), NULL, &cl->seeds[i]) != LB_OK)
            goto fail;
    cl->nseeds = n;
    rc = LB_ENOMEM;
    cl->username = copy_str(o->allocator, o->username);
    cl->password = copy_str(o->allocator, o->password);
    if ((o->username && !cl->username) || (o->password && !cl->password)) goto fail;
    if ((rc = refresh_from(cl, -1)) != LB_OK) goto fail;
    *out = cl;
    return LB_OK;
fail:
    lb_cluster_free(cl);
    return rc;
}

int lb__cluster_copy(const lb_cluster *src, int64_t timeout_ms, lb_cluster **out) {
    *out = NULL;
    lb_cluster_options o = src->opts;
    o.username = src->username;
    o.password = src->password;
    if (o.connect_timeout_ms > timeout_ms) o.connect_timeout_ms = timeout_ms;
    if (o.command_timeout_ms > timeout_ms) o.command_timeout_ms = timeout_ms;
    if (o.retry_ms > timeout_ms) o.retry_ms = timeout_ms;
    /* "host:port", split at the last ':' by lb_cluster_new, IPv6 included. */
    static const size_t cap = LB__HOST_CAP + 8;
    char *text = lb__alloc(o.allocator, (size_t)src->nseeds * cap);
    if (!text) return LB_ENOMEM;
    const char *seeds[SEEDS_MAX];
    for (int i = 0; i < src->nseeds; i++) {
        snprintf(text + (size_t)i * cap, cap, "%s:%d", src->seeds[i].host, src->seeds[i].port);
        seeds[i] = text + (size_t)i * cap;
    }
    int rc = lb_cluster_new(out, seeds, src->nseeds, &o);
    lb__free(o.allocator, text);
    return rc;
}

void lb_cluster_free(lb_cluster *cl) {
    if (!cl) return;
    const lb_allocator *a = cl->opts.allocator;
    for (int i = 0; i < cl->nnodes; i++) drop_conn(cl, i);
    lb__free(a, cl->nodes);
    if (cl->password) memset(cl->password, 0, strlen(cl->password));
    lb__free(a, cl->username);
    lb__free(a, cl->password);
    lb__free(a, cl);
}

/* Sends `cmd` on `c`, preceded by ASKING when `asking`: both are pipelined
 * and the command's reply returned (NULL on a transport failure). */
static redisReply *exec(lb_cluster *cl, redisContext *c, const lb_cmd *cmd, int asking) {
    const char *argv[LB_CMD_MAX_ARGS];
    for (int i = 0; i < cmd->argc; i++) argv[i] = cmd->argv[i];
    if (!asking) {
        cl->stats.commands++;
        return redisCommandArgv(c, cmd->argc, argv, cmd->argvlen);
    }
    void *ask = NULL, *reply = NULL;
    cl->stats.commands += 2;
    if (redisAppendCommand(c, "ASKING") != REDIS_OK ||
        redisAppendCommandArgv(c, cmd->argc, argv, cmd->argvlen) != REDIS_OK ||
        redisGetReply(c, &ask) != REDIS_OK || redisGetReply(c, &reply) != REDIS_OK) {
        if (ask) freeReplyObject(ask);
        return NULL;
    }
    freeReplyObject(ask); /* an ASKING refused shows in the command's own reply */
    return reply;
}

/* Whether a retry fits before `deadline` (monotonic ms); sleeps the back-off. */
static int pause_for_retry(lb_cluster *cl, int64_t deadline) {
    int64_t left = deadline - lb__mono_ms();
    if (left <= 0) return 0;
    cl->stats.retries++;
    lb__sleep_ms(cl->opts.retry_backoff_ms < left ? cl->opts.retry_backoff_ms : left);
    return 1;
}

/* Follows a MOVED: the map is read again, the node that answered first (it
 * knows the new owner), and the slot pointed at the target whatever a
 * lagging node said. Returns the target's pool index (where the command goes
 * next) or -1. */
static int follow_moved(lb_cluster *cl, unsigned slot, const lb__addr *to, int from) {
    cl->stats.moved++;
    refresh_from(cl, from);
    int t = pool_node(cl, to);
    if (t >= 0) cl->owner[slot] = (uint16_t)t;
    return t;
}

/* What route() hands the machine: `r`, with `waited` (the last TRYAGAIN or
 * CLUSTERDOWN answer kept for the record) freed unless it is `r`. */
static redisReply *give(redisReply *r, redisReply *waited) {
    if (waited && waited != r) freeReplyObject(waited);
    return r;
}

/* Sends one command to the owner of `slot` and returns the reply the machine
 * should see: a normal reply, the last error once redirects or retries are
 * exhausted, or NULL for a transport failure. When time runs out with no
 * primary to send to, the last CLUSTERDOWN/TRYAGAIN answer (if any) says why
 * better than a transport failure would. */
static redisReply *route(lb_cluster *cl, unsigned slot, const lb_cmd *cmd) {
    int64_t deadline = lb__deadline_ms(cl->opts.retry_ms);
    int redirects = 0, ask = -1, moved = -1;
    redisReply *waited = NULL;
    cl->last = NULL;
    for (;;) {
        if (cl->stale && ask < 0 && moved < 0) refresh_from(cl, -1);
        int i = ask >= 0 ? ask : moved;
        if (i < 0 && cl->owner[slot] != LB__NO_NODE) i = cl->owner[slot];
        int asking = ask >= 0;
        ask = moved = -1;
        redisContext *c = i >= 0 ? node_conn(cl, i) : NULL;
        if (!c) {
            /* Nothing was sent: the owner is unknown or unreachable (failing
             * over, say); read the map again and retry while time is left. */
            if (i < 0) set_err(cl, "no primary serves slot %u", slot);
            cl->stale = 1;
            if (pause_for_retry(cl, deadline)) continue;
            return give(waited, NULL);
        }
        redisReply *r = exec(cl, c, cmd, asking);
        cl->last = r ? c : NULL;
        if (!r) {
            set_err(cl, "%s:%d: %s", cl->nodes[i].addr.host, cl->nodes[i].addr.port, c->errstr);
            drop_conn(cl, i);
            cl->stale = 1;
            return give(NULL, waited); /* the command may have run: never sent again */
        }
        if (r->type != REDIS_REPLY_ERROR) return give(r, waited);
        unsigned to_slot;
        lb__addr to;
        lb__redirect kind = lb__redirect_parse(r->str, (size_t)r->len, cl->nodes[i].addr.host,
                                               &to_slot, &to);
        if (kind != LB__REDIRECT_NONE) {
            if (++redirects > cl->opts.max_redirects) return give(r, waited);
            freeReplyObject(r);
            if (kind == LB__REDIRECT_ASK) {
                cl->stats.ask++;
                ask = pool_node(cl, &to);
            } else {
                /* The reply's slot, not ours: a command may name a key of
                 * another slot than the one it was routed by. */
                moved = follow_moved(cl, to_slot, &to, i);
            }
            continue;
        }
        if (!lb__cluster_retryable(r->str, (size_t)r->len)) return give(r, waited);
        /* An importing node answers TRYAGAIN to a multi-key command whose keys
         * are not all there yet: that ASK was a wait, not a chain of
         * redirections, and retry_ms bounds it. */
        if (asking) redirects--;
        if (r->len >= 11 && memcmp(r->str, "CLUSTERDOWN", 11) == 0) cl->stale = 1;
        give(NULL, waited);
        waited = r;
        if (!pause_for_retry(cl, deadline)) return waited;
    }
}

/* The key a command addresses: a script's first key, or the first argument
 * of any other command (a channel for PUBLISH, where any node will do). 0 for
 * a command without one. */
static int command_key(const lb_cmd *cmd, const char **key, size_t *len) {
    int script = cmd->argc >= 3 && cmd->argvlen[0] >= 4 &&
                 (strncasecmp(cmd->argv[0], "EVAL", 4) == 0);
    if (script) {
        if (cmd->argvlen[2] != 1 || cmd->argv[2][0] < '1' || cmd->argv[2][0] > '9' ||
            cmd->argc < 4)
            return 0;
        *key = cmd->argv[3], *len = cmd->argvlen[3];
        return *len > 0;
    }
    if (cmd->argc < 2 || cmd->argvlen[1] == 0) return 0;
    *key = cmd->argv[1], *len = cmd->argvlen[1];
    return 1;
}

/* Each command goes to the owner of its own key's slot, so one operation may
 * touch keys of several slots (a namespace's control key, then the lock) as
 * long as each command's keys share one. A command without a key (the script
 * check) goes where the command it precedes goes. */
redisReply *lb__cluster_send(lb_cluster *cl, const lb_cmd *cmd, const lb_cmd *route_by) {
    const char *key;
    size_t len;
    cl->errstr[0] = '\0';
    if (!command_key(route_by, &key, &len) && !command_key(cmd, &key, &len)) {
        set_err(cl, "a command without a key cannot be routed");
        return NULL;
    }
    return route(cl, lb_cluster_keyslot(key, len), cmd);
}

redisContext *lb__cluster_conn(lb_cluster *cl, const lb_cmd *route_by, int answered) {
    const char *key;
    size_t len;
    if (answered) return cl->last;
    if (!command_key(route_by, &key, &len)) return NULL;
    uint16_t i = cl->owner[lb_cluster_keyslot(key, len)];
    return i == LB__NO_NODE ? NULL : cl->nodes[i].c;
}

int lb_cluster_stats_get(const lb_cluster *cl, lb_cluster_stats *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!cl || !out) return LB_EINVAL;
    *out = cl->stats;
    out->primaries = cl->primaries;
    return LB_OK;
}

int lb_cluster_slot_owner(const lb_cluster *cl, unsigned slot, char *buf, size_t cap) {
    if (buf && cap) buf[0] = '\0';
    if (!cl || !buf || slot >= LB_CLUSTER_SLOTS) return LB_EINVAL;
    if (cl->owner[slot] == LB__NO_NODE) return LB_ESTATE;
    const lb__addr *a = &cl->nodes[cl->owner[slot]].addr;
    int n = snprintf(buf, cap, "%s:%d", a->host, a->port);
    return n >= 0 && (size_t)n < cap ? n : LB_EINVAL;
}

const char *lb_cluster_errstr(const lb_cluster *cl) { return cl ? cl->errstr : ""; }

/* ---- For the asynchronous driver (core/cluster_async.c) ----------------------- */

int lb__cluster_owner(lb_cluster *cl, unsigned slot, lb__addr *out) {
    if (cl->stale) refresh_from(cl, -1);
    if (slot >= LB_CLUSTER_SLOTS || cl->owner[slot] == LB__NO_NODE) return -1;
    *out = cl->nodes[cl->owner[slot]].addr;
    return 0;
}

void lb__cluster_moved(lb_cluster *cl, unsigned slot, const lb__addr *to) {
    follow_moved(cl, slot, to, -1);
}

void lb__cluster_mark_stale(lb_cluster *cl) { cl->stale = 1; }

lb_cluster_stats *lb__cluster_stats(lb_cluster *cl) { return &cl->stats; }

const lb_cluster_options *lb__cluster_options(const lb_cluster *cl) { return &cl->opts; }

void lb__cluster_auth(const lb_cluster *cl, const char **username, const char **password) {
    *username = cl->username;
    *password = cl->password;
}
