/* The synchronous driver: runs a step machine on a blocking hiredis context. */
#include <hiredis/hiredis.h>

#include "core/internal.h"

/* Checks that the server runs scripts before the operation's first command
 * (see lb__probe_reply). Returns LB_STEP_SEND to go on, or a failure. */
static int probe(redisContext *c, lb_machine *m) {
    for (int second = 0; second < 2; second++) {
        const char *argv[3];
        size_t lens[3];
        lb__probe_cmd(second, argv, lens);
        redisReply *reply = redisCommandArgv(c, 3, argv, lens);
        int rc = lb__probe_reply(m, reply, second);
        if (reply) freeReplyObject(reply);
        if (rc != LB_STEP_SEND) return rc == LB_OK ? LB_STEP_SEND : rc;
    }
    return LB_EPROTO; /* not reached: a NOSCRIPT after EVAL is already EPROTO */
}

int lb_sync_run(redisContext *c, lb_machine *m, const lb_clock *clock) {
    if (!c || !m) return LB_EINVAL;
    lb_now now = lb_clock_now(clock);
    int rc = lb_machine_step(m, NULL, &now);
    if (rc == LB_STEP_SEND && lb__probe_due(m)) rc = probe(c, m);
    while (rc == LB_STEP_SEND) {
        const lb_cmd *cmd = lb_machine_command(m);
        /* hiredis 0.14 takes a non-const argv array; copy the pointers. */
        const char *argv[LB_CMD_MAX_ARGS];
        for (int i = 0; i < cmd->argc; i++) argv[i] = cmd->argv[i];
        redisReply *reply = redisCommandArgv(c, cmd->argc, argv, cmd->argvlen);
        now = lb_clock_now(clock);
        /* A NULL reply is a transport failure: the machine is told with a NULL
         * reply mid-operation and ends with LB_EIO, recording what it knows. */
        rc = lb_machine_step(m, reply, &now);
        if (reply) freeReplyObject(reply);
    }
    return rc;
}
