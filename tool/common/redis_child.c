/* redis-server as a child process (see redis_child.h). It depends on hiredis
 * only, so that the tests' harness links it without the rest of the tool. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tool/common/redis_child.h"

#define POLL_MS 50     /* between two looks at the server, milliseconds */
#define AWAIT_POLLS 200 /* 10 s of POLL_MS */
#define STOP_POLLS 100  /* 5 s of POLL_MS */
#define ARGS_MAX 64

static void pause_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) continue;
}

static void to_dev_null(void) {
    int fd = open("/dev/null", O_RDWR);
    if (fd < 0) return;
    dup2(fd, STDIN_FILENO);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    if (fd > STDERR_FILENO) close(fd);
}

pid_t lb__redis_spawn(int port, const char *dir, const char *logfile, const char *const *extra,
                      int quiet) {
    const char *bin = getenv("LB_REDIS_SERVER");
    char portstr[16];
    const char *argv[ARGS_MAX];
    int n = 0;
    snprintf(portstr, sizeof portstr, "%d", port);
    argv[n++] = bin ? bin : "redis-server";
    /* A replica's full sync starts at once: by default a primary waits 5 s
     * for more replicas before a diskless sync, which every cluster and
     * sentinel start, and every failover, would pay. */
    static const char *const fixed[] = {"--bind", "127.0.0.1", "--save", "",
                                        "--appendonly", "no", "--daemonize", "no",
                                        "--repl-diskless-sync-delay", "0"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) argv[n++] = fixed[i];
    argv[n++] = "--port";
    argv[n++] = portstr;
    argv[n++] = "--dir";
    argv[n++] = dir;
    if (logfile) {
        argv[n++] = "--logfile";
        argv[n++] = logfile;
    }
    for (int i = 0; extra && extra[i] && n < ARGS_MAX - 1; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        if (quiet) to_dev_null();
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static int answers(int port) {
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    int ok = 0;
    if (c && !c->err) {
        redisSetTimeout(c, tv);
        redisReply *r = redisCommand(c, "PING");
        ok = r && (r->type == REDIS_REPLY_STATUS ||
                   (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0));
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

int lb__redis_await(pid_t *pid, int port) {
    if (*pid <= 0) return -1;
    for (int i = 0; i < AWAIT_POLLS; i++) {
        if (waitpid(*pid, NULL, WNOHANG) == *pid) {
            *pid = 0;
            return -1;
        }
        if (answers(port)) return 0;
        pause_ms(POLL_MS);
    }
    kill(*pid, SIGKILL);
    while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR) continue;
    *pid = 0;
    return -1;
}

void lb__redis_stop(pid_t *pid) {
    if (*pid <= 0) return;
    kill(*pid, SIGCONT);
    kill(*pid, SIGTERM);
    for (int i = 0; i < STOP_POLLS; i++) {
        pid_t w = waitpid(*pid, NULL, WNOHANG);
        if (w == *pid || (w < 0 && errno != EINTR)) {
            *pid = 0; /* reaped: its pid may be another process's from now on */
            return;
        }
        pause_ms(POLL_MS);
    }
    kill(*pid, SIGKILL);
    while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR) continue;
    *pid = 0;
}
