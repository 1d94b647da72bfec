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

static void **conn_mark(const lb__marker *mk, const lb_machine *m, int answered) {
    (void)m, (void)answered;
    return lb__conn_mark(mk->h);
}

static redisReply *cluster_send(void *h, const lb_cmd *cmd, const lb_cmd *route_by) {
    return lb__cluster_send(h, cmd, route_by);
}

static const char *cluster_errstr(void *h) { return lb_cluster_errstr(h); }

static void **cluster_mark(const lb__marker *mk, const lb_machine *m, int answered) {
    return lb__conn_mark(lb__cluster_conn(mk->h, &m->cmd, answered));
}

static redisReply *sentinel_send(void *h, const lb_cmd *cmd, const lb_cmd *route_by) {
    (void)route_by;
    return lb__sentinel_send(h, cmd);
}

static const char *sentinel_errstr(void *h) { return lb_sentinel_errstr(h); }

static void **sentinel_mark(const lb__marker *mk, const lb_machine *m, int answered) {
    (void)m;
    return lb__conn_mark(lb__sentinel_conn(mk->h, answered));
}

typedef struct sender {
    /* Sends `cmd` where `route_by` (the same command, or for the script check
     * the operation's next command) belongs; NULL: a transport failure. */
    redisReply *(*send)(void *h, const lb_cmd *cmd, const lb_cmd *route_by);
    const char *(*errstr)(void *h); /* where that failure happened, or "" */
    lb__marker marker;              /* its connections' script records */
    void *h;
} sender;

static int sender_of(lb_target t, sender *s) {
    s->h = s->marker.h = t.handle;
    switch (t.handle ? t.kind : LB_TARGET_NONE) {
    case LB_TARGET_CONN:
        s->send = conn_send, s->errstr = conn_errstr, s->marker.mark = conn_mark;
        return 0;
    case LB_TARGET_CLUSTER:
        s->send = cluster_send, s->errstr = cluster_errstr, s->marker.mark = cluster_mark;
        return 0;
    case LB_TARGET_SENTINEL:
        s->send = sentinel_send, s->errstr = sentinel_errstr, s->marker.mark = sentinel_mark;
        return 0;
    default: return -1;
    }
}

int lb_target_run(lb_target t, lb_machine *m, const lb_clock *clock) {
    sender s;
    if (!m) return LB_EINVAL;
    if (sender_of(t, &s) != 0) return lb__fail(m, LB_EINVAL, LB__NO_TARGET);
    lb__machine_attach(m, &s.marker);
    lb_now now = lb_clock_now(clock);
    int rc = lb_machine_step(m, NULL, &now);
    while (rc == LB_STEP_SEND) {
        /* The script check has no key: it goes where the command it precedes
         * (m->cmd) goes. */
        redisReply *reply = s.send(s.h, lb_machine_command(m), &m->cmd);
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
    lb__machine_attach(m, NULL); /* the marker lives in this frame */
    return rc;
}
