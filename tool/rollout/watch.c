/* Watching a server's commands (MONITOR) during the gate's observation: the
 * legacy protocol's SETNX and GETSET, counted on the namespace's keys and on
 * every other key apart, so another namespace's legacy fleet is no evidence
 * against this one. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include "tool/common/keys.h"
#include "tool/common/server.h"
#include "tool/rollout/gate.h"

/* How long the end of a watch waits for its marker to come through, ms. */
#define WATCH_FINISH_MS 5000

int lb__cli_watch_start(lb__cli_watch *w, const lb__cli_conn *conn, const char *match,
                        char *err, size_t cap) {
    memset(w, 0, sizeof *w);
    w->match = match;
    w->c = lb__cli_connect(conn, err, cap);
    if (!w->c) return -1;
    redisReply *r = redisCommand(w->c, "MONITOR");
    int ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (r) freeReplyObject(r);
    if (!ok) {
        redisFree(w->c);
        w->c = NULL;
        return 1; /* refused (an ACL): the server-wide count stands in */
    }
    return 0;
}

/* One quoted argument of a MONITOR line, unescaped into out; the position
 * after it, or NULL. */
static const char *arg(const char *p, char *out, size_t cap, size_t *len) {
    while (*p == ' ') p++;
    if (*p++ != '"') return NULL;
    size_t n = 0;
    for (; *p && *p != '"'; p++) {
        char c = *p;
        if (c == '\\' && p[1]) {
            p++;
            c = *p == 'n' ? '\n' : *p == 'r' ? '\r' : *p == 't' ? '\t' : *p == 'a' ? '\a'
              : *p == 'b' ? '\b' : *p;
            if (*p == 'x' && p[1] && p[2]) {
                char hex[3] = {p[1], p[2], 0};
                c = (char)strtol(hex, NULL, 16);
                p += 2;
            }
        }
        if (n + 1 < cap) out[n++] = c;
    }
    if (*p != '"') return NULL;
    *len = n;
    return p + 1;
}

/* `1700000000.123456 [0 127.0.0.1:5555] "SETNX" "key" "v"`. */
static void line(lb__cli_watch *w, const char *l) {
    const char *p = strstr(l, "] ");
    char cmd[16], key[LB__CLI_WATCH_KEY_MAX];
    size_t clen, klen;
    if (!p || !(p = arg(p + 1, cmd, sizeof cmd, &clen))) return;
    cmd[clen] = '\0';
    if (w->marker[0] && strcasecmp(cmd, "echo") == 0 && arg(p, key, sizeof key, &klen) &&
        klen == strlen(w->marker) && memcmp(key, w->marker, klen) == 0) {
        w->marked = 1;
        return;
    }
    if (strcasecmp(cmd, "setnx") != 0 && strcasecmp(cmd, "getset") != 0) return;
    if (!arg(p, key, sizeof key, &klen) || klen >= sizeof key - 1) {
        w->inside++; /* a key too long to judge counts as the namespace's */
        return;
    }
    if (lb__cli_glob(w->match, strlen(w->match), key, klen)) w->inside++;
    else w->outside++;
}

int lb__cli_watch_drain(lb__cli_watch *w) {
    if (!w->c) return 0;
    struct pollfd pfd = {w->c->fd, POLLIN, 0};
    while (poll(&pfd, 1, 0) == 1) {
        if (redisBufferRead(w->c) != REDIS_OK) return -1;
        void *r;
        while (redisGetReplyFromReader(w->c, &r) == REDIS_OK && r) {
            const redisReply *rep = r;
            if (rep->type == REDIS_REPLY_STATUS || rep->type == REDIS_REPLY_STRING)
                line(w, rep->str);
            freeReplyObject(r);
        }
        if (w->c->err) return -1;
    }
    return 0;
}

/* Every command before this one has been watched once the marker, sent on
 * another connection after them, comes through the monitor. */
int lb__cli_watch_finish(lb__cli_watch *w, const lb__cli_conn *conn, char *err, size_t cap) {
    if (!w->c) return -1;
    snprintf(w->marker, sizeof w->marker, "lockbridge-watch-%ld-%ld", (long)getpid(),
             (long)random());
    redisContext *c = lb__cli_connect(conn, err, cap);
    redisReply *r = c ? redisCommand(c, "ECHO %s", w->marker) : NULL;
    int sent = r && r->type == REDIS_REPLY_STRING;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    struct timeval tv = {WATCH_FINISH_MS / 1000, (WATCH_FINISH_MS % 1000) * 1000};
    if (!sent || redisSetTimeout(w->c, tv) != REDIS_OK) return -1;
    while (!w->marked) {
        void *rep;
        if (redisGetReply(w->c, &rep) != REDIS_OK || !rep) return -1;
        const redisReply *x = rep;
        if (x->type == REDIS_REPLY_STATUS || x->type == REDIS_REPLY_STRING) line(w, x->str);
        freeReplyObject(rep);
    }
    return 0;
}

void lb__cli_watch_stop(lb__cli_watch *w) {
    if (w->c) redisFree(w->c);
    w->c = NULL;
}
