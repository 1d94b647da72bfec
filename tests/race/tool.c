/* The operator's tool as a child of the race harness (see tool.h): a relay on a
 * loopback port between it and the server, run in the harness's own thread
 * until the tool exits or reaches its mode write, which it can hold back. */
#include "race/tool.h"
#include "tool/common/loopback.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 16
#define MAX_ARGS 48
#define OUT_CAP 2048
#define RUN_LIMIT_MS 30000 /* a tool run that lasts longer is stuck: killed, ms */
#define POLL_MS 20         /* between looks at whether the tool exited, ms */
#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

typedef struct relay_conn {
    int cfd, sfd; /* the tool's side, the server's side; -1 when closed */
    char *buf;    /* the tool's bytes not yet forwarded */
    size_t len, cap;
} relay_conn;

struct lbr_tool {
    pid_t pid;
    int status; /* -1 while it runs */
    int listen_fd, out_fd, port, target_port;
    char hold_key[256];
    int holding; /* a write to hold is still awaited */
    int parked;  /* 1 + the index of the connection whose buffer starts with it */
    relay_conn conns[MAX_CONNS];
    char out[OUT_CAP];
    size_t outlen;
};

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

const char *lbr_tool_path(void) {
    static char path[512];
    const char *t = getenv("LB_RACE_TOOL"), *build = getenv("BUILD");
    if (t && *t) return t;
    snprintf(path, sizeof path, "%s/lockbridge", build && *build ? build : "build");
    return path;
}

static void conn_close(relay_conn *c) {
    if (c->cfd >= 0) close(c->cfd);
    if (c->sfd >= 0) close(c->sfd);
    c->cfd = c->sfd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}

static int send_all(int fd, const char *b, size_t n) {
    while (n) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The length of the first whole command in b[0..n) (0: not all there yet), and
 * whether it is an EVAL or EVALSHA naming `key` among its arguments. Bytes that
 * are not a RESP array of bulk strings count as one command to the next line
 * end: the relay passes what it does not understand. */
static size_t command_len(const char *b, size_t n, const char *key, int *write) {
    const char *nl = memchr(b, '\n', n);
    *write = 0;
    if (!nl) return 0;
    if (b[0] != '*') return (size_t)(nl - b) + 1;
    long argc = strtol(b + 1, NULL, 10);
    size_t off = (size_t)(nl - b) + 1;
    int eval = 0;
    for (long i = 0; i < argc; i++) {
        if (off >= n) return 0;
        if (b[off] != '$' || !(nl = memchr(b + off, '\n', n - off))) return b[off] != '$' ? off : 0;
        long len = strtol(b + off + 1, NULL, 10);
        size_t data = (size_t)(nl - b) + 1;
        if (len < 0) return off;
        if (data + (size_t)len + 2 > n) return 0;
        const char *arg = b + data;
        if (i == 0) eval = ((len == 4 && strncasecmp(arg, "EVAL", 4) == 0) ||
                            (len == 7 && strncasecmp(arg, "EVALSHA", 7) == 0));
        else if (eval && key[0] && (size_t)len == strlen(key) && memcmp(arg, key, (size_t)len) == 0)
            *write = 1;
        off = data + (size_t)len + 2;
    }
    return off;
}

/* Forwards the tool's whole commands, stopping at the write to hold. */
static void forward(lbr_tool *t, int idx) {
    relay_conn *c = &t->conns[idx];
    size_t off = 0, k;
    int write;
    while (off < c->len && (k = command_len(c->buf + off, c->len - off, t->hold_key, &write))) {
        if (write && t->holding) {
            t->parked = idx + 1;
            break;
        }
        if (send_all(c->sfd, c->buf + off, k) != 0) {
            conn_close(c);
            return;
        }
        off += k;
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
}

static void from_tool(lbr_tool *t, int idx) {
    relay_conn *c = &t->conns[idx];
    char buf[16384];
    ssize_t n = recv(c->cfd, buf, sizeof buf, 0);
    if (n <= 0) {
        if (n == 0 || errno != EINTR) conn_close(c);
        return;
    }
    if (c->len + (size_t)n > c->cap) {
        size_t cap = (c->len + (size_t)n) * 2;
        char *grown = realloc(c->buf, cap);
        if (!grown) {
            conn_close(c);
            return;
        }
        c->buf = grown;
        c->cap = cap;
    }
    memcpy(c->buf + c->len, buf, (size_t)n);
    c->len += (size_t)n;
    if (!t->parked) forward(t, idx);
}

static void from_server(relay_conn *c) {
    char buf[16384];
    ssize_t n = recv(c->sfd, buf, sizeof buf, 0);
    if ((n <= 0 && (n == 0 || errno != EINTR)) || (n > 0 && send_all(c->cfd, buf, (size_t)n) != 0))
        conn_close(c);
}

static void accept_one(lbr_tool *t) {
    int cfd = accept(t->listen_fd, NULL, NULL), sfd = cfd >= 0 ? lb__loopback_connect(t->target_port) : -1;
    for (int i = 0; i < MAX_CONNS && sfd >= 0; i++) {
        if (t->conns[i].cfd >= 0) continue;
        t->conns[i].cfd = cfd;
        t->conns[i].sfd = sfd;
        return;
    }
    if (cfd >= 0) close(cfd);
    if (sfd >= 0) close(sfd);
}

/* Keeps the last OUT_CAP - 1 bytes the tool printed. */
static void read_output(lbr_tool *t) {
    char buf[1024];
    ssize_t n;
    while (t->out_fd >= 0 && (n = read(t->out_fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) break;
            return;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (t->outlen == OUT_CAP - 1) memmove(t->out, t->out + 1, --t->outlen);
            t->out[t->outlen++] = buf[i];
        }
        t->out[t->outlen] = '\0';
    }
    if (t->out_fd >= 0) close(t->out_fd);
    t->out_fd = -1;
}

static void reap(lbr_tool *t, int options) {
    int st;
    if (t->status >= 0 || waitpid(t->pid, &st, options) != t->pid) return;
    t->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    read_output(t);
    for (int i = 0; i < MAX_CONNS; i++) conn_close(&t->conns[i]);
    t->parked = 0;
}

/* One round: waits up to POLL_MS for any side, then moves what arrived. */
static void relay_once(lbr_tool *t) {
    struct pollfd fds[2 + 2 * MAX_CONNS];
    int n = 0;
    fds[n++] = (struct pollfd){t->listen_fd, POLLIN, 0};
    fds[n++] = (struct pollfd){t->out_fd, POLLIN, 0};
    for (int i = 0; i < MAX_CONNS; i++) {
        fds[n++] = (struct pollfd){t->conns[i].cfd, POLLIN, 0};
        fds[n++] = (struct pollfd){t->conns[i].sfd, POLLIN, 0};
    }
    if (poll(fds, (nfds_t)n, POLL_MS) > 0) {
        if (fds[0].revents & POLLIN) accept_one(t);
        if (fds[1].revents) read_output(t);
        for (int i = 0; i < MAX_CONNS; i++) {
            if (t->conns[i].cfd >= 0 && (fds[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)))
                from_tool(t, i);
            if (t->conns[i].sfd >= 0 && (fds[3 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)))
                from_server(&t->conns[i]);
        }
    }
    /* Its output closed: it is exiting, and waiting for it costs no poll. */
    reap(t, t->out_fd < 0 ? 0 : WNOHANG);
}

/* Relays until the tool exits or parks at its held write; a tool that does
 * neither within RUN_LIMIT_MS is killed (its status then says so). */
static void relay(lbr_tool *t) {
    double start = mono_ms();
    while (t->status < 0 && !t->parked) {
        if (mono_ms() - start > RUN_LIMIT_MS) {
            kill(t->pid, SIGKILL);
            reap(t, 0);
            break;
        }
        relay_once(t);
    }
}

/* The child: output to the pipe, its clock shifted, then the tool. */
static void child(const lbr_tool_config *cfg, int out, char **argv) {
    char shift[64], asan[512];
    dup2(out, 1);
    dup2(out, 2);
    if (cfg->shift_ms) {
        const char *prior = getenv("ASAN_OPTIONS");
        snprintf(shift, sizeof shift, "%+.3f", (double)cfg->shift_ms / 1000.0);
        /* An instrumented tool would refuse a preloaded library that comes
         * before its sanitizer runtime. */
        snprintf(asan, sizeof asan, "%s%sverify_asan_link_order=0", prior ? prior : "",
                 prior && *prior ? ":" : "");
        setenv("LD_PRELOAD", getenv("LB_RACE_FAKETIME") ? getenv("LB_RACE_FAKETIME") : FAKETIME_LIB, 1);
        setenv("FAKETIME", shift, 1);
        setenv("DONT_FAKE_MONOTONIC", "1", 1);
        setenv("ASAN_OPTIONS", asan, 1);
    }
    execv(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* argv: the tool, -p PORT, then the arguments split at spaces (into `store`). */
static int make_argv(const lbr_tool *t, const char *args, char *store, size_t cap, char **argv,
                     char *port) {
    int n = 0;
    argv[n++] = (char *)lbr_tool_path();
    argv[n++] = "-p";
    snprintf(port, 16, "%d", t->port);
    argv[n++] = port;
    if (strlen(args) >= cap) return -1;
    strcpy(store, args);
    for (char *save = NULL, *a = strtok_r(store, " ", &save); a; a = strtok_r(NULL, " ", &save)) {
        if (n == MAX_ARGS - 1) return -1;
        argv[n++] = a;
    }
    argv[n] = NULL;
    return 0;
}

lbr_tool *lbr_tool_start(const lbr_tool_config *cfg) {
    char store[1024], port[16], *argv[MAX_ARGS];
    int out[2];
    const char *lib = getenv("LB_RACE_FAKETIME") ? getenv("LB_RACE_FAKETIME") : FAKETIME_LIB;
    if (cfg->shift_ms && access(lib, R_OK) != 0) return NULL; /* errno: why */
    lbr_tool *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->status = -1;
    t->out_fd = -1;
    t->target_port = cfg->port;
    for (int i = 0; i < MAX_CONNS; i++) t->conns[i].cfd = t->conns[i].sfd = -1;
    snprintf(t->hold_key, sizeof t->hold_key, "%s", cfg->hold_key ? cfg->hold_key : "");
    t->holding = t->hold_key[0] != '\0';
    t->listen_fd = lb__loopback_bind(0, 0, 1, &t->port);
    if (t->listen_fd < 0 || make_argv(t, cfg->args, store, sizeof store, argv, port) != 0 ||
        pipe(out) != 0) {
        if (t->listen_fd >= 0) close(t->listen_fd);
        free(t);
        errno = EINVAL;
        return NULL;
    }
    fflush(NULL);
    t->pid = fork();
    if (t->pid == 0) {
        close(out[0]);
        close(t->listen_fd);
        child(cfg, out[1], argv);
    }
    close(out[1]);
    t->out_fd = out[0];
    fcntl(t->out_fd, F_SETFL, fcntl(t->out_fd, F_GETFL, 0) | O_NONBLOCK);
    if (t->pid < 0) {
        int e = errno;
        close(t->out_fd);
        close(t->listen_fd);
        free(t);
        errno = e;
        return NULL;
    }
    relay(t);
    return t;
}

int lbr_tool_parked(const lbr_tool *t) { return t->parked != 0; }

void lbr_tool_release(lbr_tool *t) {
    int idx = t->parked - 1;
    t->holding = 0;
    t->parked = 0;
    if (idx >= 0 && t->conns[idx].cfd >= 0) forward(t, idx);
    relay(t);
}

int lbr_tool_status(const lbr_tool *t) { return t->status; }
const char *lbr_tool_output(const lbr_tool *t) { return t->out; }

void lbr_tool_free(lbr_tool *t) {
    if (!t) return;
    if (t->status < 0) {
        kill(t->pid, SIGKILL);
        reap(t, 0);
    }
    for (int i = 0; i < MAX_CONNS; i++) conn_close(&t->conns[i]);
    if (t->out_fd >= 0) close(t->out_fd);
    close(t->listen_fd);
    free(t);
}
