/* The asynchronous cluster driver: one redisAsyncContext per primary, each
 * operation's commands sent to its key's owner from hiredis callbacks, MOVED
 * and ASK followed as the synchronous driver follows them. */
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "core/cluster_internal.h"

/* A connection to one primary. Allocated one by one so that ac->data can
 * point at it for the disconnect callback. */
typedef struct conn {
    lb__addr addr;
    redisAsyncContext *ac; /* NULL once disconnected */
    struct conn *next;
} conn;

/* One operation in flight. */
typedef struct op {
    lb_cluster_async *ca;
    lb_machine *m;
    const lb_clock *clock;
    lb_done_fn done;
    void *ud;
    unsigned slot;
    int redirects;
    redisAsyncContext *last; /* the context of the reply being handled */
    lb__marker marker;       /* h: this op */
    struct op *prev, *next;
} op;

struct lb_cluster_async {
    lb_cluster *cl;
    lb_cluster_attach_fn attach;
    void *attach_ud;
    const lb_allocator *allocator;
    conn *conns;
    op *ops;
    int closing; /* lb_cluster_async_free is running: open nothing */
};

static void on_disconnect(const redisAsyncContext *ac, int status) {
    conn *c = ac->data;
    (void)status;
    if (c) c->ac = NULL; /* hiredis frees the context after this returns */
}

/* The live connection to `a`, opened (and attached, and authenticated) if
 * needed; NULL if that fails. */
static redisAsyncContext *conn_to(lb_cluster_async *ca, const lb__addr *a) {
    conn *c;
    for (c = ca->conns; c; c = c->next)
        if (lb__addr_equal(&c->addr, a)) break;
    if (!c) {
        c = lb__alloc(ca->allocator, sizeof *c);
        if (!c) return NULL;
        memset(c, 0, sizeof *c);
        c->addr = *a;
        c->next = ca->conns;
        ca->conns = c;
    }
    if (c->ac || ca->closing) return c->ac;
    redisAsyncContext *ac = redisAsyncConnect(a->host, a->port);
    lb__cluster_stats(ca->cl)->connects++;
    if (!ac) return NULL;
    if (ac->err || ca->attach(ac, ca->attach_ud) != 0) {
        redisAsyncFree(ac);
        return NULL;
    }
    ac->data = c;
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    const char *user, *pass;
    lb__cluster_auth(ca->cl, &user, &pass);
    /* Pipelined before the first command: a refused AUTH shows as NOAUTH in
     * that command's reply, which the machine reports. */
    if (pass && (user ? redisAsyncCommand(ac, NULL, NULL, "AUTH %s %s", user, pass)
                      : redisAsyncCommand(ac, NULL, NULL, "AUTH %s", pass)) != REDIS_OK) {
        redisAsyncFree(ac);
        return NULL;
    }
    c->ac = ac;
    return ac;
}

static void finish(op *o, int rc) {
    lb_cluster_async *ca = o->ca;
    if (o->prev) o->prev->next = o->next;
    else ca->ops = o->next;
    if (o->next) o->next->prev = o->prev;
    lb_machine *m = o->m;
    lb_done_fn done = o->done;
    void *ud = o->ud;
    m->ac = NULL;
    lb__machine_attach(m, NULL);
    lb__free(ca->allocator, o);
    done(m, rc, ud); /* last: it may free the machine's owner */
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* The script record of the owner's connection if open (no I/O), or of the
 * one whose reply is being handled. */
static void **op_mark(const lb__marker *mk, const lb_machine *m, int answered) {
    op *o = mk->h;
    lb__addr owner;
    (void)m; /* every command of the operation goes to o->slot */
    if (answered) return o->last ? lb__conn_mark(&o->last->c) : NULL;
    if (lb__cluster_owner(o->ca->cl, o->slot, &owner) != 0) return NULL;
    for (conn *c = o->ca->conns; c; c = c->next)
        if (c->ac && lb__addr_equal(&c->addr, &owner)) return lb__conn_mark(&c->ac->c);
    return NULL;
}

/* Sends the machine's command to `to` (NULL: the slot's owner), after ASKING
 * when `asking`. Returns
 * LB_STEP_SEND, or the machine's status after a transport failure when
 * nothing could be sent. */
static int send_to(op *o, const lb__addr *to, int asking) {
    lb__addr owner;
    if (!to && lb__cluster_owner(o->ca->cl, o->slot, &owner) == 0) to = &owner;
    redisAsyncContext *ac = to ? conn_to(o->ca, to) : NULL;
    const lb_cmd *cmd = lb_machine_command(o->m);
    const char *argv[LB_CMD_MAX_ARGS];
    for (int i = 0; i < cmd->argc; i++) argv[i] = cmd->argv[i];
    if (ac && asking && redisAsyncCommand(ac, NULL, NULL, "ASKING") != REDIS_OK) ac = NULL;
    if (ac && redisAsyncCommandArgv(ac, on_reply, o, cmd->argc, argv, cmd->argvlen) == REDIS_OK) {
        o->m->ac = ac;
        lb__cluster_stats(o->ca->cl)->commands += asking ? 2 : 1;
        return LB_STEP_SEND;
    }
    /* Nothing was sent: the machine is told of a transport failure. */
    lb__cluster_mark_stale(o->ca->cl);
    lb_now now = lb_clock_now(o->clock);
    int rc = lb_machine_step(o->m, NULL, &now);
    return rc == LB_STEP_SEND ? lb__fail(o->m, LB_EIO, "no connection to the slot's owner") : rc;
}

/* A MOVED or ASK within the redirect bound: sends the command on. Returns 1
 * when it did (or finished the operation trying), 0 for any other reply. */
static int redirect(op *o, const redisReply *r, const char *from_host) {
    unsigned slot;
    lb__addr to;
    if (r->type != REDIS_REPLY_ERROR) return 0;
    lb__redirect kind = lb__redirect_parse(r->str, (size_t)r->len, from_host, &slot, &to);
    if (kind == LB__REDIRECT_NONE ||
        ++o->redirects > lb__cluster_options(o->ca->cl)->max_redirects)
        return 0;
    if (kind == LB__REDIRECT_MOVED) lb__cluster_moved(o->ca->cl, slot, &to);
    else lb__cluster_stats(o->ca->cl)->ask++;
    int rc = send_to(o, &to, kind == LB__REDIRECT_ASK);
    if (rc != LB_STEP_SEND) finish(o, rc);
    return 1;
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
    op *o = privdata;
    conn *c = ac->data;
    if (!reply) lb__cluster_mark_stale(o->ca->cl); /* may have run: never resent */
    else if (redirect(o, reply, c ? c->addr.host : NULL)) return;
    lb_now now = lb_clock_now(o->clock);
    o->last = reply ? ac : NULL;
    int rc = lb_machine_step(o->m, reply, &now);
    if (rc == LB_STEP_SEND) {
        o->redirects = 0;
        rc = send_to(o, NULL, 0);
    }
    if (rc != LB_STEP_SEND) finish(o, rc);
}

int lb_cluster_async_new(lb_cluster_async **out, lb_cluster *cl, lb_cluster_attach_fn attach,
                         void *ud) {
    if (!out) return LB_EINVAL;
    *out = NULL;
    if (!cl || !attach) return LB_EINVAL;
    const lb_allocator *a = lb__cluster_options(cl)->allocator;
    lb_cluster_async *ca = lb__alloc(a, sizeof *ca);
    if (!ca) return LB_ENOMEM;
    memset(ca, 0, sizeof *ca);
    ca->cl = cl;
    ca->attach = attach;
    ca->attach_ud = ud;
    ca->allocator = a;
    *out = ca;
    return LB_OK;
}

void lb_cluster_async_free(lb_cluster_async *ca) {
    if (!ca) return;
    ca->closing = 1;
    /* Freeing a context calls its pending callbacks with no reply: each
     * operation ends with LB_EIO and leaves the list. */
    for (conn *c = ca->conns; c; c = c->next)
        if (c->ac) {
            redisAsyncContext *ac = c->ac;
            c->ac = NULL;
            ac->data = NULL;
            redisAsyncFree(ac);
        }
    while (ca->conns) {
        conn *next = ca->conns->next;
        lb__free(ca->allocator, ca->conns);
        ca->conns = next;
    }
    lb__free(ca->allocator, ca);
}

int lb_cluster_async_run(lb_cluster_async *ca, const char *key, size_t keylen, lb_machine *m,
                         const lb_clock *clock, lb_done_fn done, void *ud) {
    if (!m) return LB_EINVAL;
    /* The text of a machine in flight is its running operation's. */
    if (lb__machine_in_flight(m)) return LB_ESTATE;
    if (!ca) return lb__fail(m, LB_EINVAL, "invalid argument: no cluster driver");
    if (!key || keylen == 0) return lb__fail(m, LB_EINVAL, "invalid argument: no key");
    if (!done) return lb__fail(m, LB_EINVAL, "invalid argument: no done callback");
    op *o = lb__alloc(ca->allocator, sizeof *o);
    if (!o) return LB_ENOMEM;
    memset(o, 0, sizeof *o);
    o->ca = ca;
    o->m = m;
    o->clock = clock;
    o->done = done;
    o->ud = ud;
    o->slot = lb_cluster_keyslot(key, keylen);
    o->next = ca->ops;
    if (ca->ops) ca->ops->prev = o;
    ca->ops = o;
    o->marker.mark = op_mark;
    o->marker.h = o;
    lb__machine_attach(m, &o->marker);
    lb_now now = lb_clock_now(clock);
    int rc = lb_machine_step(m, NULL, &now);
    if (rc == LB_STEP_SEND) rc = send_to(o, NULL, 0);
    if (rc != LB_STEP_SEND) finish(o, rc);
    return LB_OK;
}
