/* The tool behind Sentinel: --sentinel HOST:PORT (repeatable) and --master NAME
 * find the primary once, before the command runs, through the library. */
#include <stdio.h>
#include <string.h>

#include "lockbridge/sentinel.h"
#include "tool/common/server.h"

/* "host:port" or "[v6]:port" into host and port. */
static int split_addr(const char *s, char *host, size_t cap, int *port) {
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) return -1;
    const char *h = s;
    size_t len = (size_t)(colon - s);
    if (h[0] == '[' && len >= 2 && h[len - 1] == ']') h++, len -= 2;
    int64_t p;
    if (len == 0 || len >= cap || lb__cli_parse_i64(colon + 1, strlen(colon + 1), &p) != 0 ||
        p < 1 || p > 65535)
        return -1;
    memcpy(host, h, len);
    host[len] = '\0';
    *port = (int)p;
    return 0;
}

int lb__cli_sentinel_resolve(lb__cli_args *a) {
    if (a->nsentinels == 0) {
        if (a->master) return lb__cli_usage(a, "--master needs --sentinel HOST:PORT");
        return 0;
    }
    if (!a->master || !a->master[0]) return lb__cli_usage(a, "--sentinel needs --master NAME");
    if (a->conn.socket || a->addr_given)
        return lb__cli_usage(a, "--sentinel finds the server: -h, -p and -s cannot be given too");
    lb_sentinel_options o;
    lb_sentinel_options_init(&o);
    o.username = a->conn.user;
    o.password = a->conn.password;
    o.subscribe = 0; /* asked once: no announcements to follow */
    lb_sentinel *s = NULL;
    int rc = lb_sentinel_new(&s, a->sentinel, a->nsentinels, a->master, &o);
    char addr[300];
    if (rc == LB_OK && lb_sentinel_primary_addr(s, addr, sizeof addr) > 0 &&
        split_addr(addr, a->primary_host, sizeof a->primary_host, &a->conn.port) == 0) {
        a->conn.host = a->primary_host;
        lb_sentinel_free(s);
        return 0;
    }
    char err[512];
    snprintf(err, sizeof err, "no primary for master %s from the sentinels given: %s",
             a->master, s ? lb_sentinel_errstr(s) : lb_strerror(rc));
    lb_sentinel_free(s);
    fprintf(stderr, "%s: %s\n", a->prog, err);
    return LB__CLI_EXIT_REDIS;
}
