/* Test harness: a real redis-server on a free loopback port, started for a test
 * and stopped after it, with its own temporary directory. */
#ifndef LOCKBRIDGE_TEST_REDIS_SERVER_H
#define LOCKBRIDGE_TEST_REDIS_SERVER_H

#include <sys/types.h>

#include <hiredis/hiredis.h>

typedef struct lbt_redis {
    pid_t pid;
    int port;
    char dir[128];
} lbt_redis;

/* A loopback port free now; the server started on it may still lose a race
 * for it (lbt_redis_start then tries another). -1 when none. */
int lbt_free_port(void);

/* Starts redis-server (LB_REDIS_SERVER overrides the binary) with persistence
 * off and any extra "--name value" arguments given as a NULL-terminated list
 * (extra may be NULL). Returns 0 once it answers PING, -1 on failure. */
int lbt_redis_start(lbt_redis *r, const char *const *extra);
/* Stops the server (SIGTERM, then SIGKILL) and removes its directory. */
void lbt_redis_stop(lbt_redis *r);
/* Stops the server process only (its port and directory are kept), and starts
 * it again on the same port: a server restart. Returns 0 once it answers PING. */
void lbt_redis_kill(lbt_redis *r);
int lbt_redis_restart(lbt_redis *r, const char *const *extra);
/* Pauses (SIGSTOP) or resumes (SIGCONT) the server process. */
void lbt_redis_pause(lbt_redis *r, int paused);
/* A new blocking connection with a 5 s timeout; NULL on failure. */
redisContext *lbt_redis_connect(const lbt_redis *r);
/* Runs a command built with a printf-style format; returns the reply (caller
 * frees) or NULL. Convenience for tests. */
redisReply *lbt_cmd(redisContext *c, const char *fmt, ...);

#endif
