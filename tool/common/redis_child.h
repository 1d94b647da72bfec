/* redis-server as a child process, for race replay's own server and the tests'
 * servers: started with persistence off, awaited until it answers, stopped. */
#ifndef LOCKBRIDGE_CLI_REDIS_CHILD_H
#define LOCKBRIDGE_CLI_REDIS_CHILD_H

#include <sys/types.h>

/* Starts redis-server ($LB_REDIS_SERVER, else from PATH) on loopback `port`
 * with `dir` as its directory, no persistence, its log in `logfile` (NULL: on
 * stdout) and the "--name value" arguments of the NULL-terminated `extra`
 * (may be NULL). With `quiet`, its stdin, stdout and stderr are /dev/null.
 * Returns its pid without waiting for it, or -1. */
pid_t lb__redis_spawn(int port, const char *dir, const char *logfile, const char *const *extra,
                      int quiet);
/* Waits up to 10 s for the server on `port` to answer PING (NOAUTH counts: a
 * server with requirepass is up). 0 when it does; -1 when it exited or did not
 * answer in time (then it is killed), with *pid set to 0. */
int lb__redis_await(pid_t *pid, int port);
/* SIGCONT (it may be paused), SIGTERM, up to 5 s for it to exit, then SIGKILL;
 * *pid is set to 0. Nothing when *pid <= 0. */
void lb__redis_stop(pid_t *pid);

#endif
