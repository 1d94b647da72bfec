/* A loopback TCP proxy for fault tests (see proxy.h): one thread polls the
 * listening socket, a wake-up pipe and every connection pair; control calls
 * set the mode under a mutex and wait until the thread has applied it. */
#include "harness/proxy.h"
#include "harness/sleep.h"
#include "tool/common/loopback.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 32
#define READ_CAP 16384

/* Bytes read from one side, waiting to be written to the other. */
typedef struct chunk {
    struct chunk *next;
    int64_t due_ms; /* monotonic ms before which it is held back */
    size_t len, off;
    char data[];
} chunk;

typedef struct queue {
    chunk *head, *tail;
} queue;

typedef struct conn {
    int cfd, sfd;     /* client side, server side; -1 when closed */
    queue c2s, s2c;
    int drop_replies; /* server replies still to be thrown away */
    int cut_after_drop;
    char *dropbuf;    /* server bytes being parsed while dropping */
    size_t droplen;
} conn;

struct lbt_proxy {
    pthread_t thread;
    int listen_fd, port, target_port;
    int wake[2];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Under mu: the mode, and requests the thread acknowledges. */
    int64_t delay_ms;
    int blackhole;
    int drop_next;
    int cut_next; /* 0 none, 1 before forwarding, 2 after */
    int cut_now;
    int stop;
    uint64_t requested, served;
    int accepted;
    conn conns[MAX_CONNS];
};

static void set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void queue_push(queue *q, const char *data, size_t len, int64_t due_ms) {
    chunk *c = malloc(sizeof *c + len);
    if (!c) return; /* a test machine out of memory: the bytes are lost, as on a bad link */
    c->next = NULL;
    c->due_ms = due_ms;
    c->len = len;
    c->off = 0;
    memcpy(c->data, data, len);
    if (q->tail) q->tail->next = c;
    else q->head = c;
    q->tail = c;
}

static void queue_clear(queue *q) {
    while (q->head) {
        chunk *c = q->head;
        q->head = c->next;
        free(c);
    }
    q->tail = NULL;
}

/* Writes what is due; returns -1 if the peer is gone. */
static int queue_flush(queue *q, int fd, int64_t now) {
    while (q->head && q->head->due_ms <= now) {
        chunk *c = q->head;
        ssize_t n = send(fd, c->data + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
        c->off += (size_t)n;
        if (c->off < c->len) return 0;
        q->head = c->next;
        if (!q->head) q->tail = NULL;
        free(c);
    }
    return 0;
}

static void conn_close(conn *c) {
    if (c->cfd >= 0) close(c->cfd);
    if (c->sfd >= 0) close(c->sfd);
    c->cfd = c->sfd = -1;
    queue_clear(&c->c2s);
    queue_clear(&c->s2c);
    free(c->dropbuf);
    c->dropbuf = NULL;
    c->droplen = 0;
    c->drop_replies = 0;
    c->cut_after_drop = 0;
}

/* The length of the first complete RESP reply in b[0..n), 0 if it is not all
 * there yet, -1 if the bytes are not RESP. */
static long resp_skip(const char *b, size_t n) {
    if (n < 3) return 0;
    const char *nl = memchr(b, '\n', n);
    if (!nl) return 0;
    if (nl == b || nl[-1] != '\r') return -1;
    size_t line = (size_t)(nl - b) + 1;
    long long v = strtoll(b + 1, NULL, 10);
    switch (b[0]) {
    case '+': case '-': case ':': case '_': case ',': case '#': case '(':
        return (long)line;
    case '$': case '!': case '=':
        if (v < 0) return (long)line;
        if ((unsigned long long)v + line + 2 > n) return 0;
        return (long)(line + (size_t)v + 2);
    case '*': case '%': case '~': case '>': {
        size_t off = line;
        long long items = b[0] == '%' ? v * 2 : v;
        for (long long i = 0; i < items; i++) {
            long k = resp_skip(b + off, n - off);
            if (k <= 0) return k;
            off += (size_t)k;
        }
        return (long)off;
    }
    default: return -1;
    }
}

static int connect_target(int port) {
    int fd = lb__loopback_connect(port);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblock(fd);
    return fd;
}

static void accept_one(lbt_proxy *p) {
    int cfd = accept(p->listen_fd, NULL, NULL);
    if (cfd < 0) return;
    int sfd = connect_target(p->target_port);
    conn *slot = NULL;
    for (int i = 0; i < MAX_CONNS && !slot; i++)
        if (p->conns[i].cfd < 0) slot = &p->conns[i];
    if (sfd < 0 || !slot) {
        close(cfd);
        if (sfd >= 0) close(sfd);
        return;
    }
    int one = 1;
    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblock(cfd);
    slot->cfd = cfd;
    slot->sfd = sfd;
    pthread_mutex_lock(&p->mu);
    p->accepted++;
    pthread_mutex_unlock(&p->mu);
}

/* Client bytes: a command (or part of one) on its way to the server. */
static void from_client(lbt_proxy *p, conn *c, const char *buf, size_t n, int64_t now) {
    pthread_mutex_lock(&p->mu);
    int blackhole = p->blackhole, cut = p->cut_next, drop = p->drop_next;
    int64_t delay = p->delay_ms;
    if (!blackhole) p->cut_next = p->drop_next = 0; /* the next command is this one */
    pthread_mutex_unlock(&p->mu);
    if (blackhole) return;
    if (cut == 1) {
        conn_close(c);
        return;
    }
    if (cut == 2 || drop) c->drop_replies++;
    if (cut == 2) c->cut_after_drop = 1;
    queue_push(&c->c2s, buf, n, now + delay);
}

/* Server bytes: replies, some of which may be owed to the drop count. */
static void from_server(lbt_proxy *p, conn *c, const char *buf, size_t n, int64_t now) {
    pthread_mutex_lock(&p->mu);
    int blackhole = p->blackhole;
    int64_t delay = p->delay_ms;
    pthread_mutex_unlock(&p->mu);
    if (blackhole) return;
    if (c->drop_replies == 0) {
        queue_push(&c->s2c, buf, n, now + delay);
        return;
    }
    char *grown = realloc(c->dropbuf, c->droplen + n);
    if (!grown) return;
    c->dropbuf = grown;
    memcpy(c->dropbuf + c->droplen, buf, n);
    c->droplen += n;
    while (c->drop_replies > 0) {
        long k = resp_skip(c->dropbuf, c->droplen);
        if (k == 0) return;
        if (k < 0) k = (long)c->droplen; /* not RESP: drop it all */
        memmove(c->dropbuf, c->dropbuf + k, c->droplen - (size_t)k);
        c->droplen -= (size_t)k;
        c->drop_replies--;
    }
    if (c->cut_after_drop) {
        conn_close(c);
        return;
    }
    if (c->droplen) queue_push(&c->s2c, c->dropbuf, c->droplen, now + delay);
    c->droplen = 0;
}

/* Reads what `fd` has; returns 0 when the peer closed or failed. */
static int pump(lbt_proxy *p, conn *c, int from_server_side, int64_t now) {
    char buf[READ_CAP];
    ssize_t n = recv(from_server_side ? c->sfd : c->cfd, buf, sizeof buf, 0);
    if (n == 0) return 0;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (from_server_side) from_server(p, c, buf, (size_t)n, now);
    else from_client(p, c, buf, (size_t)n, now);
    return 1;
}

/* Applies requests made by control calls and tells their callers. */
static int serve_requests(lbt_proxy *p) {
    char drain[64];
    while (read(p->wake[0], drain, sizeof drain) > 0) {
    }
    pthread_mutex_lock(&p->mu);
    int stop = p->stop;
    if (p->cut_now || stop) {
        for (int i = 0; i < MAX_CONNS; i++) conn_close(&p->conns[i]);
        p->cut_now = 0;
    }
    p->served = p->requested;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return stop;
}

static int next_due(const queue *q, int64_t now, int64_t *timeout) {
    if (!q->head) return 0;
    if (q->head->due_ms <= now) return 1;
    if (*timeout < 0 || q->head->due_ms - now < *timeout) *timeout = q->head->due_ms - now;
    return 0;
}

static void *run(void *arg) {
    lbt_proxy *p = arg;
    struct pollfd fds[2 + 2 * MAX_CONNS];
    conn *owner[2 + 2 * MAX_CONNS];
    for (;;) {
        int64_t now = lbt_mono_ms(), timeout = -1;
        int n = 0;
        fds[n] = (struct pollfd){p->wake[0], POLLIN, 0};
        owner[n++] = NULL;
        fds[n] = (struct pollfd){p->listen_fd, POLLIN, 0};
        owner[n++] = NULL;
        for (int i = 0; i < MAX_CONNS; i++) {
            conn *c = &p->conns[i];
            if (c->cfd < 0) continue;
            short cev = POLLIN, sev = POLLIN;
            if (next_due(&c->s2c, now, &timeout)) cev |= POLLOUT;
            if (next_due(&c->c2s, now, &timeout)) sev |= POLLOUT;
            fds[n] = (struct pollfd){c->cfd, cev, 0};
            owner[n++] = c;
            fds[n] = (struct pollfd){c->sfd, sev, 0};
            owner[n++] = c;
        }
        if (poll(fds, (nfds_t)n, (int)(timeout > 1000 ? 1000 : timeout)) < 0 && errno != EINTR)
            break;
        if ((fds[0].revents & POLLIN) && serve_requests(p)) break;
        if (fds[1].revents & POLLIN) accept_one(p);
        now = lbt_mono_ms();
        for (int i = 2; i < n; i += 2) {
            conn *c = owner[i];
            if (c->cfd != fds[i].fd) continue; /* closed by a cut meanwhile */
            int ok = 1;
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ok = pump(p, c, 0, now);
            if (ok && c->sfd >= 0 && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                ok = pump(p, c, 1, now);
            if (!ok) {
                conn_close(c);
                continue;
            }
            if (c->cfd < 0) continue;
            if (queue_flush(&c->c2s, c->sfd, now) < 0 || queue_flush(&c->s2c, c->cfd, now) < 0)
                conn_close(c);
        }
    }
    return NULL;
}

/* Sets the mode with `apply` under the mutex and waits for the thread. */
static void request(lbt_proxy *p, void (*apply)(lbt_proxy *, int64_t), int64_t arg) {
    pthread_mutex_lock(&p->mu);
    apply(p, arg);
    uint64_t mine = ++p->requested;
    pthread_mutex_unlock(&p->mu);
    ssize_t w = write(p->wake[1], "x", 1);
    (void)w;
    pthread_mutex_lock(&p->mu);
    while (p->served < mine) pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static void do_pass(lbt_proxy *p, int64_t arg) {
    (void)arg;
    p->delay_ms = 0;
    p->blackhole = 0;
    p->drop_next = 0;
    p->cut_next = 0;
}
static void do_cut(lbt_proxy *p, int64_t arg) { (void)arg; p->cut_now = 1; }
static void do_delay(lbt_proxy *p, int64_t ms) { p->delay_ms = ms > 0 ? ms : 0; }
static void do_blackhole(lbt_proxy *p, int64_t on) { p->blackhole = on != 0; }
static void do_drop(lbt_proxy *p, int64_t arg) { (void)arg; p->drop_next = 1; }
static void do_cut_next(lbt_proxy *p, int64_t fwd) { p->cut_next = fwd ? 2 : 1; }
static void do_stop(lbt_proxy *p, int64_t arg) { (void)arg; p->stop = 1; }

void lbt_proxy_pass(lbt_proxy *p) { request(p, do_pass, 0); }
void lbt_proxy_cut(lbt_proxy *p) { request(p, do_cut, 0); }
void lbt_proxy_delay(lbt_proxy *p, int64_t ms) { request(p, do_delay, ms); }
void lbt_proxy_blackhole(lbt_proxy *p, int on) { request(p, do_blackhole, on); }
void lbt_proxy_drop_next_reply(lbt_proxy *p) { request(p, do_drop, 0); }
void lbt_proxy_cut_next(lbt_proxy *p, int forwarded) { request(p, do_cut_next, forwarded); }

int lbt_proxy_port(const lbt_proxy *p) { return p->port; }

int lbt_proxy_accepted(const lbt_proxy *p) {
    lbt_proxy *m = (lbt_proxy *)(uintptr_t)p; /* the mutex, not the proxy, changes */
    pthread_mutex_lock(&m->mu);
    int n = m->accepted;
    pthread_mutex_unlock(&m->mu);
    return n;
}

static int listen_loopback(int *port) {
    int fd = lb__loopback_bind(0, 0, 1, port);
    if (fd >= 0) set_nonblock(fd);
    return fd;
}

lbt_proxy *lbt_proxy_start(int target_port) {
    lbt_proxy *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->target_port = target_port;
    for (int i = 0; i < MAX_CONNS; i++) p->conns[i].cfd = p->conns[i].sfd = -1;
    p->listen_fd = listen_loopback(&p->port);
    if (p->listen_fd < 0) goto fail_listen;
    if (pipe(p->wake) != 0) goto fail_pipe;
    set_nonblock(p->wake[0]);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->thread, NULL, run, p) != 0) goto fail_thread;
    return p;
fail_thread:
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    close(p->wake[0]);
    close(p->wake[1]);
fail_pipe:
    close(p->listen_fd);
fail_listen:
    free(p);
    return NULL;
}

void lbt_proxy_stop(lbt_proxy *p) {
    if (!p) return;
    request(p, do_stop, 0);
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
