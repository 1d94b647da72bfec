/* The tool tests' fixture: their server, connection and runs of the tool (see cli.h). */
#include "harness/cli.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include <cmocka.h>

int lbt_cli_start(lbt_cli *f, const char *test) {
    memset(f, 0, sizeof *f);
    if (lbt_tool_init(test) != 0) return -1;
    if (lbt_redis_start(&f->server, NULL) != 0) return -1;
    snprintf(f->port, sizeof f->port, "%d", f->server.port);
    f->conn = lbt_redis_connect(&f->server);
    return f->conn ? 0 : -1;
}

void lbt_cli_stop(lbt_cli *f) {
    if (f->conn) redisFree(f->conn);
    f->conn = NULL;
    lbt_redis_stop(&f->server);
}

int lbt_cli_run(lbt_cli *f, const char *first, ...) {
    const char *args[LBT_MAX_ARGS + 1] = {"-p", f->port};
    int n = 2;
    va_list ap;
    va_start(ap, first);
    int too_many = 0;
    for (const char *s = first; s; s = va_arg(ap, const char *)) {
        if (n < LBT_MAX_ARGS) args[n++] = s;
        else too_many = 1;
    }
    va_end(ap);
    assert_false(too_many);
    args[n] = NULL;
    return lbt_run(&f->proc, args);
}

int64_t lbt_wall_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

lb_legacy_lock *lbt_legacy_holder(redisContext *c, const char *key) {
    lb_legacy_lock *l = NULL;
    assert_int_equal(lb_legacy_lock_new(&l, key, strlen(key), NULL), LB_OK);
    assert_int_equal(lb_legacy_try_acquire(l, lb_on_conn(c)), LB_OK);
    return l;
}
