/* Test harness: `lockbridge race` from the tests' side: its clients' command
 * lines, its output read back, and the test itself as a client of its proxy
 * (cmocka assertions: linked into the test binaries only). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/race_client.h"

#define KEY "race:lock"
#define COUNTER "race:counter"

void lbt_client_line(const char *java_cp, const char *locker, int ttl, char *out, size_t cap) {
    char mode[128];
    snprintf(mode, sizeof mode, "--release-margin-ms %d", ttl / 5);
    if (strcmp(locker, "lockbridge-hold-fleet-max") == 0)
        snprintf(mode, sizeof mode, "--release-margin-ms %d --fleet-max-ttl-ms 10000", ttl / 5);
    else if (strcmp(locker, "lb-modern") == 0)
        snprintf(mode, sizeof mode, "--mode modern");
    else if (strcmp(locker, "lockbridge-hold") != 0)
        mode[0] = '\0';
    if (mode[0]) {
        snprintf(out, cap,
                 "while :; do %s hold " KEY " -p {port} --ttl-ms %d %s "
                 "--wait-ms 60000 --hold-ms 0 >/dev/null 2>&1; done",
                 lbt_tool(), ttl, mode);
        return;
    }
    long long timeout = strcmp(locker, "L3") == 0 ? ttl * 1000LL : ttl;
    if (strcmp(locker, "L1-10s") == 0) locker = "L1", timeout = 10000;
    snprintf(out, cap,
             "exec java -XX:+UseSerialGC -cp %s LegacyLockers contend --kind %s --key " KEY
             " --counter-key " COUNTER " --port {port} --clients 1 --seconds 120 "
             "--timeout-ms %lld",
             java_cp, locker, timeout);
}

int lbt_results_of(const lbt_proc *p, cJSON **out, int cap) {
    char copy[sizeof p->out];
    int n = 0;
    memcpy(copy, p->out, p->outlen + 1);
    char *save = NULL;
    for (char *s = strtok_r(copy, "\n", &save); s; s = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(s);
        if (!o) fail_msg("not JSON: %s", s);
        if (strcmp(lbt_str_of(o, "event"), "race_result") == 0 && n < cap) out[n++] = o;
        else cJSON_Delete(o);
    }
    return n;
}

char *lbt_read_file(const char *path) {
    static char buf[65536];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

int lbt_port_of(const lbt_proc *p, char client) {
    char pat[48];
    snprintf(pat, sizeof pat, "\"client\":\"%c\",\"port\":", client);
    const char *s = strstr(p->out, pat);
    assert_non_null(s);
    return atoi(s + strlen(pat));
}

redisContext *lbt_client_conn(int p) {
    redisContext *c = redisConnect("127.0.0.1", p);
    assert_non_null(c);
    assert_int_equal(c->err, 0);
    return c;
}

void lbt_send_cmd(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    assert_int_equal(redisvAppendCommand(c, fmt, ap), REDIS_OK);
    va_end(ap);
    int done = 0;
    while (!done) assert_int_equal(redisBufferWrite(c, &done), REDIS_OK);
}

void lbt_expect_reply_int(redisContext *c, long long want) {
    redisReply *r = NULL;
    if (redisGetReply(c, (void **)&r) != REDIS_OK) fail_msg("reply: %s", c->errstr);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, want);
    freeReplyObject(r);
}

void lbt_expect_reply_any(redisContext *c) {
    redisReply *r = NULL;
    assert_int_equal(redisGetReply(c, (void **)&r), REDIS_OK);
    freeReplyObject(r);
}

void lbt_expect_in(const char *text, const char *want) {
    if (!strstr(text, want)) fail_msg("expected '%s' in: %s", want, text);
}
