/* Starts and stops a primary, its replica and three sentinels (see sentinel.h). */
#include "harness/sentinel.h"
#include "harness/redis_server.h"
#include "harness/sleep.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A reply of `cmd` on a server as text (status or bulk) into buf; 0 or -1. */
static int text_of(const lbt_redis *r, const char *cmd, char *buf, size_t cap) {
    buf[0] = '\0';
    redisContext *c = lbt_redis_connect(r);
    if (!c) return -1;
    redisReply *rep = redisCommand(c, cmd);
    int ok = rep && (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS);
    if (ok) snprintf(buf, cap, "%s", rep->str);
    if (rep) freeReplyObject(rep);
    redisFree(c);
    return ok ? 0 : -1;
}

/* A sentinel needs a writable config file: written into its own directory. */
static int start_sentinel(lbt_redis *r, int primary_port) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/lbt-sentinel-XXXXXX");
    if (!mkdtemp(r->dir)) return -1;
    char conf[192];
    snprintf(conf, sizeof conf, "%s/sentinel.conf", r->dir);
    for (int attempt = 0; attempt < 5; attempt++) {
        r->port = lbt_free_port();
        FILE *f = fopen(conf, "w");
        if (!f) return -1;
        fprintf(f, "port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nlogfile %s/redis.log\n"
                   "sentinel monitor %s 127.0.0.1 %d 2\n"
                   "sentinel down-after-milliseconds %s 1000\n"
                   "sentinel failover-timeout %s 10000\n",
                r->port, r->dir, r->dir, LBT_SENTINEL_NAME, primary_port, LBT_SENTINEL_NAME,
                LBT_SENTINEL_NAME);
        fclose(f);
        r->pid = fork();
        if (r->pid == 0) {
            const char *bin = getenv("LB_REDIS_SERVER");
            execlp(bin ? bin : "redis-server", bin ? bin : "redis-server", conf, "--sentinel",
                   (char *)NULL);
            _exit(127);
        }
        if (r->pid < 0) return -1;
        for (int i = 0; i < 100; i++) {
            char buf[16];
            if (waitpid(r->pid, NULL, WNOHANG) == r->pid) {
                r->pid = 0;
                break;
            }
            if (text_of(r, "PING", buf, sizeof buf) == 0) return 0;
            lbt_sleep_ms(50);
        }
        if (r->pid > 0) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
            r->pid = 0;
        }
    }
    return -1;
}

static void remove_files(lbt_redis *r, const char *const *names) {
    for (int i = 0; names[i]; i++) {
        char path[192];
        snprintf(path, sizeof path, "%s/%s", r->dir, names[i]);
        unlink(path);
    }
}

void lbt_sentinels_stop(lbt_sentinels *s) {
    static const char *const files[] = {"sentinel.conf", NULL};
    for (int i = 0; i < LBT_SENTINELS; i++) {
        if (!s->sentinel[i].dir[0]) continue;
        lbt_redis_kill(&s->sentinel[i]);
        remove_files(&s->sentinel[i], files);
        lbt_redis_stop(&s->sentinel[i]);
    }
    for (int i = 0; i < 2; i++)
        if (s->data[i].dir[0]) lbt_redis_stop(&s->data[i]);
}

/* How many replicas sentinel i knows in a healthy state. */
static int known_replicas(lbt_sentinels *s, int i) {
    redisContext *c = lbt_redis_connect(&s->sentinel[i]);
    if (!c) return 0;
    redisReply *r = redisCommand(c, "SENTINEL REPLICAS %s", LBT_SENTINEL_NAME);
    int n = 0;
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
        redisReply *e = r->element[k];
        for (size_t f = 0; e->type == REDIS_REPLY_ARRAY && f + 1 < e->elements; f += 2)
            if (e->element[f]->type == REDIS_REPLY_STRING &&
                strcmp(e->element[f]->str, "flags") == 0 &&
                strcmp(e->element[f + 1]->str, "slave") == 0)
                n++;
    }
    if (r) freeReplyObject(r);
    redisFree(c);
    return n;
}

/* Whether some data server is a replica whose link to its primary is up. */
static int replica_linked(lbt_sentinels *s) {
    char info[2048];
    for (int i = 0; i < 2; i++)
        if (text_of(&s->data[i], "INFO replication", info, sizeof info) == 0 &&
            strstr(info, "role:slave") && strstr(info, "master_link_status:up"))
            return 1;
    return 0;
}

int lbt_sentinels_wait_replica(lbt_sentinels *s, int timeout_ms) {
    int64_t deadline = lbt_mono_ms() + timeout_ms;
    while (!replica_linked(s)) {
        if (lbt_mono_ms() > deadline) return -1;
        lbt_sleep_ms(100);
    }
    for (int i = 0; i < LBT_SENTINELS; i++)
        while (known_replicas(s, i) < 1) {
            if (lbt_mono_ms() > deadline) return -1;
            lbt_sleep_ms(100);
        }
    return 0;
}

int lbt_sentinels_start(lbt_sentinels *s) {
    memset(s, 0, sizeof *s);
    char port[16], info[2048];
    if (lbt_redis_start(&s->data[0], NULL) != 0) goto fail;
    snprintf(port, sizeof port, "%d", s->data[0].port);
    const char *replica[] = {"--replicaof", "127.0.0.1", port, NULL};
    if (lbt_redis_start(&s->data[1], replica) != 0) goto fail;
    int64_t deadline = lbt_mono_ms() + 15000;
    while (text_of(&s->data[1], "INFO replication", info, sizeof info) != 0 ||
           !strstr(info, "master_link_status:up")) {
        if (lbt_mono_ms() > deadline) goto fail;
        lbt_sleep_ms(50);
    }
    for (int i = 0; i < LBT_SENTINELS; i++) {
        if (start_sentinel(&s->sentinel[i], s->data[0].port) != 0) goto fail;
        snprintf(s->addr[i], sizeof s->addr[i], "127.0.0.1:%d", s->sentinel[i].port);
    }
    if (lbt_sentinels_wait_replica(s, (int)(deadline - lbt_mono_ms())) == 0) return 0;
fail:
    fprintf(stderr, "harness: could not start the primary, replica and sentinels\n");
    lbt_sentinels_stop(s);
    return -1;
}

/* The port sentinel i names for the primary, or -1. */
static int named_port(lbt_sentinels *s, int i) {
    redisContext *c = lbt_redis_connect(&s->sentinel[i]);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", LBT_SENTINEL_NAME);
    int port = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING)
        port = atoi(r->element[1]->str);
    if (r) freeReplyObject(r);
    redisFree(c);
    return port;
}

int lbt_sentinels_primary(lbt_sentinels *s) {
    int port = named_port(s, 0);
    for (int i = 0; i < 2; i++)
        if (s->data[i].port == port) return i;
    return -1;
}

static int says_master(lbt_redis *r) {
    redisContext *c = lbt_redis_connect(r);
    if (!c) return 0;
    redisReply *rep = redisCommand(c, "ROLE");
    int ok = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
             rep->element[0]->type == REDIS_REPLY_STRING && strcmp(rep->element[0]->str, "master") == 0;
    if (rep) freeReplyObject(rep);
    redisFree(c);
    return ok;
}

int lbt_sentinels_wait_primary(lbt_sentinels *s, int i, int timeout_ms) {
    int64_t deadline = lbt_mono_ms() + timeout_ms;
    do {
        int all = says_master(&s->data[i]);
        for (int k = 0; k < LBT_SENTINELS && all; k++)
            if (named_port(s, k) != s->data[i].port) all = 0;
        if (all) return 0;
        lbt_sleep_ms(100);
    } while (lbt_mono_ms() < deadline);
    return -1;
}
