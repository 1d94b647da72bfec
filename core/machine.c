/* The step-machine runtime: command building, the EVALSHA->EVAL fallback and
 * failure details. Protocols supply only their transition functions. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core/internal.h"

void lb__machine_begin(lb_machine *m,
                       int (*step)(lb_machine *, const redisReply *, const lb_now *)) {
    m->step = step;
    lb__cmd_reset(&m->cmd);
    m->script = NULL;
    m->commands = 0;
    m->running = 1;
    m->needs_scripts = 0;
    m->probing = 0;
    m->marker = NULL;
    m->errstr[0] = '\0';
}

int lb__machine_in_flight(const lb_machine *m) { return m->ac != NULL; }

void lb__cmd_reset(lb_cmd *cmd) { cmd->argc = 0; }

void lb__cmd_arg(lb_cmd *cmd, const char *s, size_t len) {
    /* Commands are built by our own protocol code with a fixed shape, so an
     * overflow is a programming error; dropping the argument makes Redis answer
     * with an arity error rather than writing past the array. */
    if (cmd->argc >= LB_CMD_MAX_ARGS) return;
    cmd->argv[cmd->argc] = s;
    cmd->argvlen[cmd->argc] = len;
    cmd->argc++;
}

void lb__cmd_argz(lb_cmd *cmd, const char *s) { lb__cmd_arg(cmd, s, strlen(s)); }

void lb__cmd_script(lb_machine *m, const lb_script *script, const char *numkeys) {
    lb__cmd_reset(&m->cmd);
    lb__cmd_argz(&m->cmd, "EVALSHA");
    lb__cmd_argz(&m->cmd, script->sha1);
    lb__cmd_argz(&m->cmd, numkeys);
    m->script = script;
}

int lb__fail(lb_machine *m, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->errstr, sizeof m->errstr, fmt, ap);
    va_end(ap);
    return status;
}

int lb__refuse(char *errstr, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, LB__ERRSTR_CAP, fmt, ap);
    va_end(ap);
    return status;
}

int lb__reply_error(lb_machine *m, const redisReply *r, const char *during) {
    char msg[96];
    lb__escape(msg, sizeof msg, r->str ? r->str : "", r->str ? (size_t)r->len : 0);
    int status = (r->str && strstr(r->str, "WRONGTYPE")) ? LB_EWRONGTYPE : LB_EREDIS;
    return lb__fail(m, status, "%s: %s", during, msg);
}

static int is_noscript(const redisReply *r) {
    return r && r->type == REDIS_REPLY_ERROR && r->str && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* What a connection's reader record points at once the server answered the
 * script check on that connection. */
static char scripts_ran;

void **lb__conn_mark(redisContext *c) {
    if (!c || !c->reader) return NULL;
    void **slot = &c->reader->privdata;
    return (*slot == NULL || *slot == &scripts_ran) ? slot : NULL;
}

void lb__machine_attach(lb_machine *m, const lb__marker *marker) { m->marker = marker; }

/* The check's two commands, EVALSHA then EVAL after NOSCRIPT: constant, built
 * once, so that a machine needs no room of its own for them. */
static lb_cmd probe_cmds[2];
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static void probe_build(void) {
    for (int second = 0; second < 2; second++) {
        lb_cmd *c = &probe_cmds[second];
        lb__cmd_reset(c);
        lb__cmd_argz(c, second ? "EVAL" : "EVALSHA");
        lb__cmd_argz(c, second ? lb__script_probe.body : lb__script_probe.sha1);
        lb__cmd_argz(c, "0");
    }
}

/* A lock taken with SETNX or SET that only a script can release would be
 * stuck until it expires if the server refuses scripts (EVAL renamed away,
 * an ACL): the acquire is checked first, before anything is written, on
 * every connection the driver cannot vouch for. The operation's first command
 * waits in m->cmd (the protocol is not stepped meanwhile) while
 * lb_machine_command hands out the check's. */
static void probe_begin(lb_machine *m) {
    void **mark = m->marker->mark(m->marker, m, 0);
    if (mark && *mark == &scripts_ran) return;
    pthread_once(&probe_once, probe_build);
    m->probing = 1;
}

/* The check's reply: its EVAL after NOSCRIPT, the held command once the
 * script ran, or the failure that ends the operation. */
static int probe_answer(lb_machine *m, const redisReply *r) {
    if (r && is_noscript(r) && m->probing == 1) {
        m->probing = 2;
        return LB_STEP_SEND;
    }
    m->probing = 0;
    if (r && r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
        void **mark = m->marker->mark(m->marker, m, 1);
        if (mark) *mark = &scripts_ran;
        return LB_STEP_SEND;
    }
    if (!r) return lb__fail(m, LB_EIO, "connection failed while checking that the server runs scripts");
    if (r->type == REDIS_REPLY_ERROR)
        return lb__reply_error(m, r, "this lock needs Lua scripts and the server refused one");
    return lb__fail(m, LB_EPROTO, "script check: unexpected reply");
}

static int counted(lb_machine *m, int rc) {
    if (rc == LB_STEP_SEND) {
        m->commands++;
        m->total++;
    } else {
        m->running = 0;
    }
    return rc;
}

int lb_machine_step(lb_machine *m, const redisReply *reply, const lb_now *now) {
    if (!m) return LB_EINVAL;
    if (!now) return lb__fail(m, LB_EINVAL, "invalid argument: no instant given");
    if (!m->step) return lb__fail(m, LB_EINVAL, "invalid argument: no operation was started");
    if (!m->running) return lb__fail(m, LB_ESTATE, "no operation is running");
    if (m->probing) return counted(m, probe_answer(m, reply));
    /* The server forgot the script (restart, SCRIPT FLUSH): send the body once.
     * The script never ran, so the protocol does not see this reply. */
    if (m->script && is_noscript(reply) && m->cmd.argvlen[0] == 7 &&
        memcmp(m->cmd.argv[0], "EVALSHA", 7) == 0) {
        m->cmd.argv[0] = "EVAL";
        m->cmd.argvlen[0] = 4;
        m->cmd.argv[1] = m->script->body;
        m->cmd.argvlen[1] = strlen(m->script->body);
        m->commands++;
        m->total++;
        return LB_STEP_SEND;
    }
    m->script = NULL;
    int rc = m->step(m, reply, now);
    if (rc == LB_STEP_SEND && m->commands == 0 && m->needs_scripts && m->marker)
        probe_begin(m);
    return counted(m, rc);
}

const lb_cmd *lb_machine_command(const lb_machine *m) {
    if (!m) return NULL;
    return m->probing ? &probe_cmds[m->probing - 1] : &m->cmd;
}

const char *lb_machine_errstr(const lb_machine *m) { return m ? m->errstr : ""; }

unsigned lb_machine_commands(const lb_machine *m) { return m ? m->commands : 0; }
