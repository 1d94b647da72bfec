/* Test harness: the fixture of the tool's tests, one redis-server with the tool
 * run against it, and the helpers those tests share. */
#ifndef LOCKBRIDGE_TEST_CLI_H
#define LOCKBRIDGE_TEST_CLI_H

#include <stdint.h>

#include <hiredis/hiredis.h>

#include "harness/proc.h"
#include "harness/redis_server.h"
#include "lockbridge/lockbridge.h"

typedef struct lbt_cli {
    lbt_redis server;
    redisContext *conn; /* the test's own connection to the server */
    char port[16];      /* the server's port, as -p takes it */
    lbt_proc proc;      /* the tool's latest run */
} lbt_cli;

/* A cmocka group setup's work: finds the tool (naming `test` if it is
 * missing), starts the server and connects to it. 0, or -1 on failure. */
int lbt_cli_start(lbt_cli *f, const char *test);
/* Closes the connection and stops the server. */
void lbt_cli_stop(lbt_cli *f);
/* Runs the tool with "-p PORT" and the NULL-terminated arguments from
 * `first` on (at most LBT_MAX_ARGS in all); returns its exit code. */
int lbt_cli_run(lbt_cli *f, const char *first, ...);

/* This host's wall clock in ms since the epoch: the clock of the legacy
 * timestamps the tests write and the tool reads. */
int64_t lbt_wall_ms(void);
/* A legacy lock on `key`, taken through `c` by the library, as another client
 * would hold it; fails the test if the key is taken. */
lb_legacy_lock *lbt_legacy_holder(redisContext *c, const char *key);

#endif
