/* Starts and stops real redis-server processes for tests (see redis_server.h). */
#include "harness/redis_server.h"
#include "harness/sleep.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Asks the kernel for a free port; the server may still lose a race for it, in
 * which case lbt_redis_start tries another. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static pid_t spawn(lbt_redis *r, const char *const *extra) {
    const char *bin = getenv("LB_REDIS_SERVER");
    char port[16], log[192];
    const char *argv[64];
    int n = 0;
    snprintf(port, sizeof port, "%d", r->port);
    snprintf(log, sizeof log, "%s/redis.log", r->dir);
    argv[n++] = bin ? bin : "redis-server";
    argv[n++] = "--port"; argv[n++] = port;
    argv[n++] = "--bind"; argv[n++] = "127.0.0.1";
    argv[n++] = "--save"; argv[n++] = "";
    argv[n++] = "--appendonly"; argv[n++] = "no";
    argv[n++] = "--dir"; argv[n++] = r->dir;
    argv[n++] = "--logfile"; argv[n++] = log;
    argv[n++] = "--daemonize"; argv[n++] = "no";
    /* A replica's full sync starts at once: by default a primary waits 5 s
     * for more replicas before a diskless sync (every cluster and sentinel
     * start, and every failover, paid it). */
    argv[n++] = "--repl-diskless-sync-delay"; argv[n++] = "0";
    for (int i = 0; extra && extra[i] && n < 62; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int answers_ping(const lbt_redis *r) {
    redisContext *c = lbt_redis_connect(r);
    if (!c) return 0;
    redisReply *rep = redisCommand(c, "PING");
    /* A server started with requirepass answers NOAUTH: it is up all the same. */
    int ok = rep && (rep->type == REDIS_REPLY_STATUS ||
                     (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOAUTH", 6) == 0));
    if (rep) freeReplyObject(rep);
    redisFree(c);
    return ok;
}

int lbt_redis_start(lbt_redis *r, const char *const *extra) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/lbt-redis-XXXXXX");
    if (!mkdtemp(r->dir)) return -1;
    for (int attempt = 0; attempt < 5; attempt++) {
        r->port = free_port();
        if (r->port <= 0) continue;
        r->pid = spawn(r, extra);
        if (r->pid < 0) break;
        for (int i = 0; i < 200; i++) { /* up to 10 s */
            int status;
            if (waitpid(r->pid, &status, WNOHANG) == r->pid) { r->pid = 0; break; }
            if (answers_ping(r)) return 0;
            lbt_sleep_ms(50);
        }
        if (r->pid > 0) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
            r->pid = 0;
        }
    }
    fprintf(stderr, "harness: could not start redis-server (log in %s)\n", r->dir);
    return -1;
}

static void stop_process(lbt_redis *r) {
    if (r->pid <= 0) return;
    kill(r->pid, SIGCONT);
    kill(r->pid, SIGTERM);
    int waited = 0, status;
    while (waitpid(r->pid, &status, WNOHANG) == 0) {
        if (++waited > 100) { /* 5 s */
            kill(r->pid, SIGKILL);
            waitpid(r->pid, &status, 0);
            break;
        }
        lbt_sleep_ms(50);
    }
    r->pid = 0;
}

void lbt_redis_kill(lbt_redis *r) { stop_process(r); }

int lbt_redis_restart(lbt_redis *r, const char *const *extra) {
    stop_process(r);
    r->pid = spawn(r, extra);
    if (r->pid < 0) return -1;
    for (int i = 0; i < 200; i++) {
        int status;
        if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
            r->pid = 0;
            return -1;
        }
        if (answers_ping(r)) return 0;
        lbt_sleep_ms(50);
    }
    return -1;
}

void lbt_redis_pause(lbt_redis *r, int paused) {
    if (r->pid > 0) kill(r->pid, paused ? SIGSTOP : SIGCONT);
}

void lbt_redis_stop(lbt_redis *r) {
    stop_process(r);
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
