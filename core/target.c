/* Targets: where a step machine's commands go (one connection, a Redis Cluster,
 * a Sentinel-managed primary), and the one loop that feeds a machine replies. */
#include <string.h>

#include <hiredis/hiredis.h>

#include "core/internal.h"
#include "lockbridge/cluster.h"
#include "lockbridge/sentinel.h"

lb_target lb_on_conn(struct redisContext *c) {
    lb_target t = {c ? LB_TARGET_CONN : LB_TARGET_NONE, c};
    return t;
}

lb_target lb_on_cluster(struct lb_cluster *cl) {
    lb_target t = {cl ? LB_TARGET_CLUSTER : LB_TARGET_NONE, cl};
    return t;
}

lb_target lb_on_sentinel(struct lb_sentinel *s) {
    lb_target t = {s ? LB_TARGET_SENTINEL : LB_TARGET_NONE, s};
    return t;
}

static redisReply *conn_send(void *h, const lb_cmd *cmd, const lb_cmd *route_by) {
    (void)route_by;
    /* hiredis 0.14 takes a non-const argv array; copy the pointers. */
    const char *argv[LB_CMD_MAX_ARGS];
    for (int i = 0; i < cmd->argc; i++) argv[i] = cmd->argv[i];
    return redisCommandArgv(h, cmd->argc, argv, cmd->argvlen);
}

static const char *conn_errstr(void *h) { return ((redisContext *)h)->errstr; }

static redisReply *cluster_send(void *h, const lb_cmd *cmd, const lb_cmd *route_by) {
    return lb__cluster_send(h, cmd, route_by);
}

static const char *cluster_errstr(void *h) { return lb_cluster_errstr(h); }

static redisReply *sentinel_send(void *h, const lb_cmd *cmd, const lb_cmd *route_by) {
    (void)route_by;
    return lb__sentinel_send(h, cmd);
}

static const char *sentinel_errstr(void *h) { return lb_sentinel_errstr(h); }

typedef struct sender {
    /* Sends `cmd` where `route_by` (the same command, or for the script check
     * the operation's next command) belongs; NULL: a transport failure. */
    redisReply *(*send)(void *h, const lb_cmd *cmd, const lb_cmd *route_by);
    const char *(*errstr)(void *h); /* where that failure happened, or "" */
    void *h;
} sender;

static int sender_of(lb_target t, sender *s) {
    s->h = t.handle;
    switch (t.handle ? t.kind : LB_TARGET_NONE) {
    case LB_TARGET_CONN: s->send = conn_send, s->errstr = conn_errstr; return 0;
    case LB_TARGET_CLUSTER: s->send = cluster_send, s->errstr = cluster_errstr; return 0;
    case LB_TARGET_SENTINEL: s->send = sentinel_send, s->errstr = sentinel_errstr; return 0;
    default: return -1;
    }
}

/* Checks that the server the operation's first command goes to runs scripts,
 * before that command (see lb__probe_reply). LB_STEP_SEND to go on, or the
 * failure that ends the operation. */
static int probe(const sender *s, lb_machine *m) {
    for (int second = 0; second < 2; second++) {
        lb_cmd cmd;
        cmd.argc = 3;
        lb__probe_cmd(second, cmd.argv, cmd.argvlen);
        redisReply *reply = s->send(s->h, &cmd, lb_machine_command(m));
        int rc = lb__probe_reply(m, reply, second);
        if (reply) freeReplyObject(reply);
        if (rc != LB_STEP_SEND) return rc == LB_OK ? LB_STEP_SEND : rc;
    }
    return LB_EPROTO; /* not reached: a NOSCRIPT after EVAL is already a failure */
}

int lb_target_run(lb_target t, lb_machine *m, const lb_clock *clock) {
    sender s;
    if (!m || sender_of(t, &s) != 0) return LB_EINVAL;
    lb_now now = lb_clock_now(clock);
    int rc = lb_machine_step(m, NULL, &now);
    if (rc == LB_STEP_SEND && lb__probe_due(m)) rc = probe(&s, m);
    while (rc == LB_STEP_SEND) {
        const lb_cmd *cmd = lb_machine_command(m);
        redisReply *reply = s.send(s.h, cmd, cmd);
        now = lb_clock_now(clock);
        /* A NULL reply is a transport failure: the machine is told with a NULL
         * reply mid-operation and ends with LB_EIO, recording what it knows;
         * where the failure happened is added to its account. */
        rc = lb_machine_step(m, reply, &now);
        if (reply) {
            freeReplyObject(reply);
        } else if (rc == LB_EIO && s.errstr(s.h)[0]) {
            char mine[LB__ERRSTR_CAP];
            memcpy(mine, m->errstr, sizeof mine);
            lb__fail(m, LB_EIO, "%s [%s]", mine, s.errstr(s.h));
        }
    }
    return rc;
}
