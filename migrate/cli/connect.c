/* Connections for the tool: TCP or Unix socket, then AUTH and SELECT, with
 * bounded connect and command timeouts. */
#include <stdio.h>
#include <string.h>

#include "migrate/cli/cli.h"

/* Connecting and each reply are bounded so that a server that stopped answering
 * ends the command with an error rather than a hang, in milliseconds. Lock
 * commands are answered at once by a live server, so this bounds no wait. */
#define CONNECT_TIMEOUT_MS 5000
#define COMMAND_TIMEOUT_MS 10000

static struct timeval tv_ms(int ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

void lb__cli_endpoint(const lb__cli_conn *o, char *out, size_t cap) {
    char shown[256];
    if (o->socket) {
        lb__cli_printable(shown, sizeof shown, o->socket, strlen(o->socket));
        snprintf(out, cap, "unix:%s", shown);
    } else {
        lb__cli_printable(shown, sizeof shown, o->host, strlen(o->host));
        snprintf(out, cap, "%s:%d", shown, o->port);
    }
}

/* Runs AUTH or SELECT; a reply other than +OK fails with the server's words. */
static int expect_ok(redisContext *c, const char *what, redisReply *r, char *err,
                     size_t errcap) {
    char msg[160];
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!r) snprintf(err, errcap, "%s: %s", what, c->errstr[0] ? c->errstr : "no reply");
    else if (!ok && r->type == REDIS_REPLY_ERROR) {
        lb__cli_printable(msg, sizeof msg, r->str, (size_t)r->len);
        snprintf(err, errcap, "%s refused: %s", what, msg);
    } else if (!ok) snprintf(err, errcap, "%s: unexpected reply type %d", what, r->type);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

static int handshake(redisContext *c, const lb__cli_conn *o, char *err, size_t errcap) {
    if (o->password && o->user &&
        expect_ok(c, "AUTH", redisCommand(c, "AUTH %s %s", o->user, o->password), err,
                  errcap) != 0)
        return -1;
    if (o->password && !o->user &&
        expect_ok(c, "AUTH", redisCommand(c, "AUTH %s", o->password), err, errcap) != 0)
        return -1;
    if (o->db >= 0 &&
        expect_ok(c, "SELECT", redisCommand(c, "SELECT %d", o->db), err, errcap) != 0)
        return -1;
    return 0;
}

redisContext *lb__cli_connect(const lb__cli_conn *o, char *err, size_t errcap) {
    char where[300];
    err[0] = '\0';
    lb__cli_endpoint(o, where, sizeof where);
    redisContext *c = o->socket ? redisConnectUnixWithTimeout(o->socket, tv_ms(CONNECT_TIMEOUT_MS))
                                : redisConnectWithTimeout(o->host, o->port,
                                                          tv_ms(CONNECT_TIMEOUT_MS));
    if (!c) {
        snprintf(err, errcap, "cannot connect to %s: out of memory", where);
        return NULL;
    }
    if (c->err || redisSetTimeout(c, tv_ms(COMMAND_TIMEOUT_MS)) != REDIS_OK) {
        snprintf(err, errcap, "cannot connect to %s: %s", where, c->errstr);
        redisFree(c);
        return NULL;
    }
    char why[sizeof where + 200];
    if (handshake(c, o, why, sizeof why) != 0) {
        snprintf(err, errcap, "%s: %s", where, why);
        redisFree(c);
        return NULL;
    }
    return c;
}
