/* Starts, inspects and stops a local six-node Redis Cluster (see cluster.h). */
#include "harness/cluster.h"
#include "harness/sleep.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Runs redis-cli --cluster create over the six nodes; its chatter goes to a
 * log in the first node's directory. */
static int create(lbt_cluster *c) {
    const char *argv[16];
    char log[192];
    int n = 0;
    argv[n++] = "redis-cli";
    argv[n++] = "--cluster";
    argv[n++] = "create";
    for (int i = 0; i < LBT_CLUSTER_NODES; i++) argv[n++] = c->seed[i];
    argv[n++] = "--cluster-replicas";
    argv[n++] = "1";
    argv[n++] = "--cluster-yes";
    argv[n] = NULL;
    snprintf(log, sizeof log, "%s/create.log", c->node[0].dir);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        FILE *f = freopen(log, "w", stdout);
        if (f) dup2(fileno(f), 2);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int lbt_cluster_start(lbt_cluster *c, int node_timeout_ms) {
    char timeout[24];
    snprintf(timeout, sizeof timeout, "%d", node_timeout_ms);
    const char *extra[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                           "--cluster-node-timeout", timeout,
                           "--cluster-replica-validity-factor", "0", NULL};
    memset(c, 0, sizeof *c);
    for (int i = 0; i < LBT_CLUSTER_NODES; i++) {
        if (lbt_redis_start(&c->node[i], extra) != 0) goto fail;
        snprintf(c->seed[i], sizeof c->seed[i], "127.0.0.1:%d", c->node[i].port);
    }
    if (create(c) != 0) {
        fprintf(stderr, "harness: redis-cli --cluster create failed (log in %s)\n", c->node[0].dir);
        goto fail;
    }
    if (lbt_cluster_wait_ok(c, 20000) == 0) return 0;
    fprintf(stderr, "harness: the cluster did not become ok\n");
fail:
    lbt_cluster_stop(c);
    return -1;
}

void lbt_cluster_stop(lbt_cluster *c) {
    for (int i = 0; i < LBT_CLUSTER_NODES; i++) {
        if (!c->node[i].dir[0]) continue;
        lbt_redis_kill(&c->node[i]); /* the directory stays: remove our files first */
        char path[192];
        snprintf(path, sizeof path, "%s/nodes.conf", c->node[i].dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/create.log", c->node[i].dir);
        unlink(path);
        lbt_redis_stop(&c->node[i]);
    }
}

void lbt_cluster_crash(lbt_cluster *c, int i) {
    if (c->node[i].pid <= 0) return;
    kill(c->node[i].pid, SIGCONT);
    kill(c->node[i].pid, SIGKILL);
    waitpid(c->node[i].pid, NULL, 0);
    c->node[i].pid = 0;
}

/* A reply of `cmd` on node i as text (status or bulk), into buf; 0 or -1. */
static int text_of(lbt_cluster *c, int i, const char *cmd, char *buf, size_t cap) {
    buf[0] = '\0';
    if (c->node[i].pid <= 0) return -1;
    redisContext *ctx = lbt_redis_connect(&c->node[i]);
    if (!ctx) return -1;
    redisReply *r = redisCommand(ctx, cmd);
    int ok = r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
    if (ok) snprintf(buf, cap, "%s", r->str);
    if (r) freeReplyObject(r);
    redisFree(ctx);
    return ok ? 0 : -1;
}

static int node_ok(lbt_cluster *c, int i) {
    char info[4096];
    if (text_of(c, i, "CLUSTER INFO", info, sizeof info) != 0) return 0;
    if (!strstr(info, "cluster_state:ok") || !strstr(info, "cluster_slots_ok:16384")) return 0;
    if (lbt_cluster_is_primary(c, i)) return 1;
    if (text_of(c, i, "INFO replication", info, sizeof info) != 0) return 0;
    return strstr(info, "master_link_status:up") != NULL;
}

int lbt_cluster_wait_ok(lbt_cluster *c, int timeout_ms) {
    int64_t deadline = lbt_mono_ms() + timeout_ms;
    do {
        int ok = 1;
        for (int i = 0; i < LBT_CLUSTER_NODES && ok; i++)
            if (c->node[i].pid > 0 && !node_ok(c, i)) ok = 0;
        if (ok) return 0;
        lbt_sleep_ms(100);
    } while (lbt_mono_ms() < deadline);
    return -1;
}

/* ROLE's first element on node i ("master", "slave"), and for a replica its
 * primary's port; 0 or -1. */
static int role(lbt_cluster *c, int i, char *name, size_t cap, int *primary_port) {
    *primary_port = 0;
    if (c->node[i].pid <= 0) return -1;
    redisContext *ctx = lbt_redis_connect(&c->node[i]);
    if (!ctx) return -1;
    redisReply *r = redisCommand(ctx, "ROLE");
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
             r->element[0]->type == REDIS_REPLY_STRING;
    if (ok) {
        snprintf(name, cap, "%s", r->element[0]->str);
        if (strcmp(name, "slave") == 0 && r->elements >= 3 &&
            r->element[2]->type == REDIS_REPLY_INTEGER)
            *primary_port = (int)r->element[2]->integer;
    }
    if (r) freeReplyObject(r);
    redisFree(ctx);
    return ok ? 0 : -1;
}

int lbt_cluster_is_primary(lbt_cluster *c, int i) {
    char name[16];
    int port;
    return role(c, i, name, sizeof name, &port) == 0 && strcmp(name, "master") == 0;
}

int lbt_cluster_replica_of(lbt_cluster *c, int primary) {
    for (int i = 0; i < LBT_CLUSTER_NODES; i++) {
        char name[16];
        int port;
        if (i != primary && role(c, i, name, sizeof name, &port) == 0 &&
            strcmp(name, "slave") == 0 && port == c->node[primary].port)
            return i;
    }
    return -1;
}

int lbt_cluster_owner(lbt_cluster *c, unsigned slot) {
    for (int i = 0; i < LBT_CLUSTER_NODES; i++) {
        if (c->node[i].pid <= 0) continue;
        redisContext *ctx = lbt_redis_connect(&c->node[i]);
        if (!ctx) continue;
        redisReply *r = redisCommand(ctx, "CLUSTER SLOTS");
        int owner = -1;
        for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
            redisReply *e = r->element[k];
            if (e->elements < 3 || (unsigned)e->element[0]->integer > slot ||
                (unsigned)e->element[1]->integer < slot)
                continue;
            int port = (int)e->element[2]->element[1]->integer;
            for (int j = 0; j < LBT_CLUSTER_NODES; j++)
                if (c->node[j].port == port && c->node[j].pid > 0) owner = j;
        }
        if (r) freeReplyObject(r);
        redisFree(ctx);
        return owner;
    }
    return -1;
}

int lbt_cluster_id(lbt_cluster *c, int i, char id[41]) {
    char buf[64];
    if (text_of(c, i, "CLUSTER MYID", buf, sizeof buf) != 0 || strlen(buf) != 40) return -1;
    memcpy(id, buf, 41);
    return 0;
}
