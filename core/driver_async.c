/* The asynchronous driver: runs a step machine on a redisAsyncContext, feeding
 * each reply from hiredis's callback. No allocation: the driver's state lives
 * in the machine, which runs one operation at a time. */
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "core/internal.h"

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* Sends the machine's command; on failure the machine is told of a transport
 * failure like any other. Returns the status to finish with, or LB_STEP_SEND. */
static int send_command(lb_machine *m) {
    const lb_cmd *cmd = lb_machine_command(m);
    const char *argv[LB_CMD_MAX_ARGS];
    for (int i = 0; i < cmd->argc; i++) argv[i] = cmd->argv[i];
    if (redisAsyncCommandArgv(m->ac, on_reply, m, cmd->argc, argv, cmd->argvlen) == REDIS_OK)
        return LB_STEP_SEND;
    lb_now now = lb_clock_now(m->clock);
    int rc = lb_machine_step(m, NULL, &now);
    return rc == LB_STEP_SEND ? lb__fail(m, LB_EIO, "connection unusable") : rc;
}

/* The connection's script record (see lb__machine_attach): one context, so
 * whichever is asked. */
static void **conn_mark(const lb__marker *mk, const lb_machine *m, int answered) {
    (void)mk, (void)answered;
    return lb__conn_mark(&m->ac->c);
}

static const lb__marker marker = {conn_mark, NULL};

static void finish(lb_machine *m, int rc) {
    lb_done_fn done = m->done;
    void *ud = m->done_ud;
    m->ac = NULL;
    m->done = NULL;
    lb__machine_attach(m, NULL);
    done(m, rc, ud); /* last: it may free the machine's owner */
}

/* hiredis calls back with reply == NULL when the context disconnects or is
 * freed with the command pending: the machine ends with LB_EIO. */
static void on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
    lb_machine *m = privdata;
    (void)ac;
    lb_now now = lb_clock_now(m->clock);
    int rc = lb_machine_step(m, reply, &now);
    if (rc == LB_STEP_SEND) rc = send_command(m);
    if (rc != LB_STEP_SEND) finish(m, rc);
}

int lb_async_run(redisAsyncContext *ac, lb_machine *m, const lb_clock *clock, lb_done_fn done,
                 void *ud) {
    if (!m) return LB_EINVAL;
    /* The text of a machine in flight is its running operation's. */
    if (m->ac) return LB_ESTATE; /* this machine is already in flight */
    if (!ac) return lb__fail(m, LB_EINVAL, "invalid argument: no asynchronous context");
    if (!done) return lb__fail(m, LB_EINVAL, "invalid argument: no done callback");
    m->ac = ac;
    m->clock = clock;
    m->done = done;
    m->done_ud = ud;
    lb__machine_attach(m, &marker);
    lb_now now = lb_clock_now(clock);
    int rc = lb_machine_step(m, NULL, &now);
    if (rc == LB_STEP_SEND) rc = send_command(m);
    /* An operation that ends before sending anything (a release of a handle that
     * holds nothing, say) reports through `done` like any other. */
    if (rc != LB_STEP_SEND) finish(m, rc);
    return LB_OK;
}
