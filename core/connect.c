/* One way to open a blocking connection for the library's own handles (cluster
 * nodes, sentinels and primaries, the watchdog's, the waiter's) and the tool's:
 * address or Unix socket, timeouts, AUTH and SELECT, with a message that says
 * which step failed. */
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core/internal.h"

/* At least 1 ms: a zero timeval would tell hiredis to wait for ever. */
struct timeval lb__timeval_ms(int64_t ms) {
    if (ms < 1) ms = 1;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

/* "host:port" or "unix:path", escaped for a message. */
static void where(const lb__conn_opts *o, char *out, size_t cap) {
    char shown[200];
    const char *name = o->socket ? o->socket : o->host;
    lb__escape(shown, sizeof shown, name, strlen(name));
    if (o->socket) snprintf(out, cap, "unix:%s", shown);
    else snprintf(out, cap, "%s:%d", shown, o->port);
}

/* One setup command (AUTH, SELECT) that must answer +OK. */
static int setup(redisContext *c, int argc, const char **argv, const lb__conn_opts *o,
                 char *err, size_t cap) {
    size_t lens[3];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    int rc = !r ? LB_EIO : r->type == REDIS_REPLY_STATUS ? LB_OK : LB_EREDIS;
    if (rc != LB_OK) {
        char msg[96];
        if (r && r->str) lb__escape(msg, sizeof msg, r->str, (size_t)r->len);
        else snprintf(msg, sizeof msg, "%.80s", c->errstr[0] ? c->errstr : "no reply");
        char at[220];
        where(o, at, sizeof at);
        snprintf(err, cap, "%s on %s failed: %s", argv[0], at, msg);
    }
    if (r) freeReplyObject(r);
    return rc;
}

redisContext *lb__connect(const lb__conn_opts *o, int *status, char *err, size_t cap) {
    int rc = LB_OK;
    err[0] = '\0';
    struct timeval tv = lb__timeval_ms(o->connect_timeout_ms);
    redisContext *c = o->socket ? redisConnectUnixWithTimeout(o->socket, tv)
                                : redisConnectWithTimeout(o->host, o->port, tv);
    char at[220];
    where(o, at, sizeof at);
    if (!c || c->err) {
        snprintf(err, cap, "cannot connect to %s: %.100s", at, c ? c->errstr : "out of memory");
        rc = LB_EIO;
    } else if (redisSetTimeout(c, lb__timeval_ms(o->command_timeout_ms)) != REDIS_OK) {
        snprintf(err, cap, "cannot set the timeout of the connection to %s", at);
        rc = LB_EIO;
    }
    if (rc == LB_OK && o->password) {
        const char *argv[3] = {"AUTH", o->username ? o->username : o->password, o->password};
        rc = setup(c, o->username ? 3 : 2, argv, o, err, cap);
    }
    if (rc == LB_OK && o->db > 0) {
        char db[16];
        snprintf(db, sizeof db, "%d", o->db);
        const char *argv[2] = {"SELECT", db};
        rc = setup(c, 2, argv, o, err, cap);
    }
    if (status) *status = rc;
    if (rc == LB_OK) return c;
    if (c) redisFree(c);
    return NULL;
}
