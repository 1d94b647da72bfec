/* What a server's INFO commandstats says: the calls of the legacy writers'
 * commands (the gate's watch), and of every command but INFO (contend). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool/common/server.h"

/* The calls= figure of one command in an INFO commandstats reply; 0 when the
 * command never ran (no line), -1 when the line cannot be read. */
static int64_t calls_of(const char *info, const char *cmd) {
    char needle[48];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", cmd);
    const char *p = strstr(info, needle);
    if (!p) return 0;
    p += strlen(needle);
    char *end;
    long long v = strtoll(p, &end, 10);
    return end == p || v < 0 ? -1 : (int64_t)v;
}

static char *read_commandstats(redisContext *c, redisReply **r) {
    *r = redisCommand(c, "INFO commandstats");
    return *r && (*r)->type == REDIS_REPLY_STRING ? (*r)->str : NULL;
}

int64_t lb__cli_legacy_calls(redisContext *c) {
    redisReply *r;
    const char *info = read_commandstats(c, &r);
    int64_t total = -1;
    if (info) {
        int64_t a = calls_of(info, "setnx"), b = calls_of(info, "getset");
        if (a >= 0 && b >= 0) total = a + b;
    }
    if (r) freeReplyObject(r);
    return total;
}

/* Sums the calls= of every "cmdstat_" line but INFO's (a reading must not count
 * the readings). The reply is the server's: a line that does not read as a
 * count, or a sum past int64, makes the whole reading unknown (-1). */
static int64_t sum_calls(const char *info) {
    int64_t total = 0;
    for (const char *p = strstr(info, "cmdstat_"); p; p = strstr(p + 1, "cmdstat_")) {
        if (p != info && p[-1] != '\n') continue;
        const char *colon = strchr(p, ':'), *eol = strchr(p, '\n');
        if (!colon || (eol && colon > eol) || strncmp(colon, ":calls=", 7) != 0) return -1;
        if (colon - p == 12 && strncmp(p, "cmdstat_info", 12) == 0) continue;
        char *end;
        long long v = strtoll(colon + 7, &end, 10);
        if (end == colon + 7 || v < 0 || (*end != ',' && *end != '\r' && *end != '\n'))
            return -1;
        if (__builtin_add_overflow(total, (int64_t)v, &total)) return -1;
    }
    return total;
}

int64_t lb__cli_server_calls(redisContext *c) {
    redisReply *r;
    const char *info = read_commandstats(c, &r);
    int64_t total = info ? sum_calls(info) : -1;
    if (r) freeReplyObject(r);
    return total;
}
