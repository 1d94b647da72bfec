/* The namespace and inspection calls (mode, census, inspect) as one-command
 * machines run on a target, so that they reach a Cluster's or Sentinel's
 * primary as a lock's commands do. */
#include <string.h>

#include <hiredis/hiredis.h>

#include "migrate/internal.h"

/* The first step sends the command; the second judges its reply. A script
 * forgotten by the server is re-sent with its body by the runtime. */
static int call_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    lb__call *c = (lb__call *)(void *)m;
    if (m->commands == 0) {
        if (c->script) {
            lb__cmd_script(m, c->script, c->argv[0]);
        } else {
            lb__cmd_reset(&m->cmd);
            lb__cmd_arg(&m->cmd, c->argv[0], c->lens[0]);
        }
        for (int i = 1; i < c->argc; i++) lb__cmd_arg(&m->cmd, c->argv[i], c->lens[i]);
        return LB_STEP_SEND;
    }
    if (!r) return lb__fail(m, LB_EIO, "connection failed during %s", c->what);
    if (r->type == REDIS_REPLY_ERROR) return lb__reply_error(m, r, c->what);
    return c->judge(c, r, now);
}

int lb__call_run(lb_target t, lb__call *c, const lb_clock *clock) {
    /* EVALSHA, its SHA1 and the arguments must fit one command. */
    if (c->argc < 1 || c->argc + (c->script ? 2 : 0) > LB_CMD_MAX_ARGS) return LB_EINVAL;
    lb__machine_begin(&c->m, call_step);
    return lb_target_run(t, &c->m, clock);
}
