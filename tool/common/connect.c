/* Connections for the tool: the library's connection helper (TCP or Unix
 * socket, AUTH, SELECT) with the tool's timeouts, and how an endpoint is shown. */
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "tool/common/server.h"

/* Connecting and each reply are bounded so that a server that stopped answering
 * ends the command with an error rather than a hang, in milliseconds. Lock
 * commands are answered at once by a live server, so this bounds no wait. */
#define CONNECT_TIMEOUT_MS 5000
#define COMMAND_TIMEOUT_MS 10000

void lb__cli_endpoint(const lb__cli_conn *o, char *out, size_t cap) {
    char shown[256];
    if (o->socket) {
        lb__escape(shown, sizeof shown, o->socket, strlen(o->socket));
        snprintf(out, cap, "unix:%s", shown);
    } else {
        lb__escape(shown, sizeof shown, o->host, strlen(o->host));
        snprintf(out, cap, "%s:%d", shown, o->port);
    }
}

/* -n 0 needs no SELECT: a connection starts on database 0. */
redisContext *lb__cli_connect(const lb__cli_conn *o, char *err, size_t errcap) {
    lb__conn_opts co = {o->host,        o->port,     CONNECT_TIMEOUT_MS, COMMAND_TIMEOUT_MS,
                        o->password ? o->user : NULL, o->password, o->db > 0 ? o->db : 0,
                        o->socket};
    return lb__connect(&co, NULL, err, errcap);
}
