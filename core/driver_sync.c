/* The synchronous driver: runs a step machine on a blocking hiredis context. */
#include <hiredis/hiredis.h>

#include "core/internal.h"

int lb_sync_run(redisContext *c, lb_machine *m, const lb_clock *clock) {
    if (!c || !m) return LB_EINVAL;
    lb_now now = lb_clock_now(clock);
    int rc = lb_machine_step(m, NULL, &now);
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
