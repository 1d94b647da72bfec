/* Starts and stops real redis-server processes for tests (see redis_server.h). */
#include "harness/redis_server.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool/common/loopback.h"
#include "tool/common/redis_child.h"

int lbt_free_port(void) {
    int port = -1, fd = lb__loopback_bind(0, 0, 0, &port);
    if (fd < 0) return -1;
    close(fd);
    return port;
}

/* A Cluster node also listens on its port + 10000 (its bus), which must be a
 * port too and be free: a kernel-picked port above 55535 (a fifth of the
 * usual ephemeral range) cannot start a node. */
static int cluster_node(const char *const *extra) {
    for (int i = 0; extra && extra[i]; i++)
        if (strcmp(extra[i], "--cluster-enabled") == 0) return 1;
    return 0;
}

static int free_node_port(const char *const *extra) {
    if (!cluster_node(extra)) return lbt_free_port();
    for (int tries = 0; tries < 50; tries++) {
        int port = lbt_free_port(), bus = -1, fd;
        if (port <= 0 || port + 10000 > 65535) continue;
        fd = lb__loopback_bind(port + 10000, port + 10000, 0, &bus);
        if (fd < 0) continue;
        close(fd);
        return port;
    }
    return -1;
}

static pid_t spawn(lbt_redis *r, const char *const *extra) {
    char log[192];
    snprintf(log, sizeof log, "%s/redis.log", r->dir);
    return lb__redis_spawn(r->port, r->dir, log, extra, 0);
}

int lbt_redis_start(lbt_redis *r, const char *const *extra) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/lbt-redis-XXXXXX");
    if (!mkdtemp(r->dir)) return -1;
    /* Another process may take the free port first: try a few. */
    for (int attempt = 0; attempt < 5; attempt++) {
        r->port = free_node_port(extra);
        if (r->port <= 0) continue;
        r->pid = spawn(r, extra);
        if (r->pid < 0) break;
        if (lb__redis_await(&r->pid, r->port) == 0) return 0;
    }
    fprintf(stderr, "harness: could not start redis-server (log in %s)\n", r->dir);
    return -1;
}

void lbt_redis_kill(lbt_redis *r) { lb__redis_stop(&r->pid); }

int lbt_redis_restart(lbt_redis *r, const char *const *extra) {
    lb__redis_stop(&r->pid);
    r->pid = spawn(r, extra);
    if (r->pid < 0) return -1;
    return lb__redis_await(&r->pid, r->port);
}

void lbt_redis_pause(lbt_redis *r, int paused) {
    if (r->pid > 0) kill(r->pid, paused ? SIGSTOP : SIGCONT);
}

void lbt_redis_stop(lbt_redis *r) {
    lb__redis_stop(&r->pid);
    if (r->dir[0]) {
        char path[192];
        snprintf(path, sizeof path, "%s/redis.log", r->dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/dump.rdb", r->dir);
        unlink(path);
        rmdir(r->dir);
        r->dir[0] = '\0';
    }
}

redisContext *lbt_redis_connect(const lbt_redis *r) {
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    if (!c) return NULL;
    if (c->err) {
        redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

redisReply *lbt_cmd(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    return r;
}
