/* lockbridge-bench: the server's own pipelined SET rate, from redis-benchmark
 * run against the same temporary server, as the ceiling for many-key locking. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

#define SET_PIPELINE 16 /* redis-benchmark -P: commands in flight per connection */

/* redis-benchmark -q rewrites a progress line with '\r' and ends with
 * "SET: 123456.78 requests per second, p50=0.191 msec": the last "SET: " wins. */
int reference_set_rate(const lbt_redis *server, int requests, reference *ref) {
    const char *bin = getenv("LB_REDIS_BENCHMARK");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "timeout 120 %s -h 127.0.0.1 -p %d -P %d -t set -q -n %d 2>&1",
             bin ? bin : "redis-benchmark", server->port, SET_PIPELINE, requests);
    ref->set_rate = 0;
    ref->set_line[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = '\0';
    int status = pclose(p);
    const char *last = NULL;
    for (const char *s = buf; (s = strstr(s, "SET: ")) != NULL; s++) last = s;
    if (status != 0 || !last) {
        fprintf(stderr, "bench: redis-benchmark failed (status %d): %.200s\n", status, buf);
        return -1;
    }
    char *end;
    double rate = strtod(last + 5, &end);
    if (end == last + 5 || rate <= 0) return -1;
    ref->set_rate = rate;
    size_t len = strcspn(last, "\r\n");
    if (len >= sizeof ref->set_line) len = sizeof ref->set_line - 1;
    memcpy(ref->set_line, last, len);
    ref->set_line[len] = '\0';
    return 0;
}
