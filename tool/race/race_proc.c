/* `lockbridge race`: the processes it starts: the clients under test (a shell
 * command line each) and, unless given one, its own redis-server. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool/common/loopback.h"
#include "tool/common/redis_child.h"
#include "tool/race/race.h"

#define CMDLINE_MAX 8192

/* The command line with each "{port}" replaced; -1 when it would not fit. */
static int substitute(const char *in, int port, char *out, size_t cap) {
    char num[16];
    size_t o = 0, nlen = (size_t)snprintf(num, sizeof num, "%d", port);
    for (const char *s = in; *s;) {
        if (strncmp(s, "{port}", 6) == 0) {
            if (o + nlen >= cap) return -1;
            memcpy(out + o, num, nlen);
            o += nlen;
            s += 6;
        } else {
            if (o + 1 >= cap) return -1;
            out[o++] = *s++;
        }
    }
    out[o] = '\0';
    return 0;
}

/* stdin and stdout to /dev/null; stderr to `errpath`, truncated, when given. */
static void quiet_stdio(const char *errpath) {
    int fd = open("/dev/null", O_RDWR);
    if (fd < 0) return;
    dup2(fd, STDIN_FILENO);
    dup2(fd, STDOUT_FILENO);
    int efd = errpath ? open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
    dup2(efd >= 0 ? efd : fd, STDERR_FILENO);
    if (efd >= 0) close(efd);
    if (fd > STDERR_FILENO) close(fd);
}

void lb__race_tail(const char *path, char *out, size_t cap) {
    char buf[1024];
    size_t n = 0;
    out[0] = '\0';
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return;
    if (fseek(f, 0, SEEK_END) == 0) {
        long end = ftell(f);
        if (end > (long)sizeof buf - 1) fseek(f, end - (long)sizeof buf + 1, SEEK_SET);
        else rewind(f);
        n = fread(buf, 1, sizeof buf - 1, f);
    }
    fclose(f);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
    /* The last lines that fit: a Java stack's first lines say the most, but
     * the exception that ended the process is at the end. */
    size_t start = n > cap / 2 ? n - cap / 2 : 0;
    const char *nl = start ? memchr(buf + start, '\n', n - start) : NULL;
    if (nl) start = (size_t)(nl - buf) + 1;
    size_t o = 0;
    for (size_t i = start; i < n && o + 4 < cap; i++) {
        if (buf[i] == '\n') {
            memcpy(out + o, " | ", 3);
            o += 3;
        } else if (buf[i] != '\r') {
            out[o++] = (unsigned char)buf[i] < 0x20 || buf[i] == 0x7f ? '?' : buf[i];
        }
    }
    out[o] = '\0';
}

pid_t lb__race_spawn(const char *cmdline, int port, const char *errpath) {
    char line[CMDLINE_MAX];
    if (substitute(cmdline, port, line, sizeof line) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        /* A group of its own, so that the client and anything its shell starts
         * (a JVM, a loop of tool runs) are killed together. */
        setpgid(0, 0);
        quiet_stdio(errpath);
        execl("/bin/sh", "sh", "-c", line, (char *)NULL);
        _exit(127);
    }
    if (pid > 0) setpgid(pid, pid); /* either side may run first */
    return pid;
}

void lb__race_kill(pid_t pid) {
    if (pid <= 0) return;
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) continue;
}

/* ---- redis-server ------------------------------------------------------------------ */

/* A port free now, in lo..hi when given; another process may take it before
 * the server binds it, hence the caller's retries. `skip` ports are passed
 * over (those tried already). */
static int free_port(int lo, int hi, int skip) {
    int port = -1;
    for (int k = 0; k <= skip; k++) {
        int fd = lb__loopback_bind(lo, hi, 0, &port);
        if (fd < 0) return -1;
        close(fd);
        if (lo > 0) lo = port + 1;
    }
    return port;
}

int lb__race_server_start(lb__race_server *s, int lo, int hi, char *err, size_t cap) {
    memset(s, 0, sizeof *s);
    /* $TMPDIR when set, as mktemp(1) does. */
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(s->dir, sizeof s->dir, "%s/lockbridge-race-XXXXXX",
                     tmp && tmp[0] ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= sizeof s->dir || !mkdtemp(s->dir)) {
        snprintf(err, cap, "cannot make a directory for redis-server under %s",
                 tmp && tmp[0] ? tmp : "/tmp");
        return -1;
    }
    /* Another process may take the free port first: try a few. */
    for (int attempt = 0; attempt < 5; attempt++) {
        s->port = free_port(lo, hi, lo > 0 ? attempt : 0);
        if (s->port <= 0) continue;
        s->pid = lb__redis_spawn(s->port, s->dir, NULL, NULL, 1);
        if (s->pid > 0 && lb__redis_await(&s->pid, s->port) == 0) return 0;
    }
    rmdir(s->dir);
    snprintf(err, cap, "could not start redis-server (set LB_REDIS_SERVER or give -p)");
    return -1;
}

void lb__race_server_stop(lb__race_server *s) {
    lb__redis_stop(&s->pid);
    if (s->dir[0]) {
        char path[sizeof s->dir + 16];
        snprintf(path, sizeof path, "%s/dump.rdb", s->dir);
        unlink(path);
        rmdir(s->dir);
        s->dir[0] = '\0';
    }
}
