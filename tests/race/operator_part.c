/* The operator as a race participant: it runs the real lockbridge tool against
 * the world's server, and a command that did not run as intended (a tool that
 * is missing, refuses the options, fails to connect) breaks the world. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "migrate/internal.h"
#include "race/race.h"
#include "race/tool.h"

lbr_part *lbr_operator_part_new(const char *kind, const lbr_part_config *cfg);
const char *lbr_operator_broken(const lbr_part *p);

enum { FORWARD, BACK }; /* "operator", "operator-back" */

typedef struct op {
    lb_machine m; /* first: the machine's address is the operator's */
    lbr_part part;
    int style;
    int done, state;
    char key[128];         /* the lock key, which names the namespace */
    int port;
    char args[512];        /* the running command's arguments */
    lbr_tool *tool;
    char broken[2048];     /* why a step did not run as intended; "" */
} op;

#define OP(p) ((op *)(void *)((char *)(p) - offsetof(op, part)))

/* The arguments of the operator's next command: in turn mode set compat,
 * sweep, mode set modern ("operator"), or compat, modern, compat, legacy
 * ("operator-back"). Each passes only the check its step is about: no stage
 * time (the world's followers re-read the mode before every acquire) and no
 * watching of the server's counts (the world's own legacy clients send
 * SETNX); the sweep gives live locks a TTL (--expire-live). */
static void next_args(op *o) {
    static const char *const back[] = {"compat", "modern", "compat", "legacy"};
    static const char fixed[] = "--observe-ms 0 --override observation --ttl-ms 0 --refresh-ms 0";
    const char *action = o->style == BACK   ? back[o->done % 4]
                         : o->done % 3 == 1 ? "sweep"
                         : o->done % 3 == 2 ? "modern"
                                            : "compat";
    if (strcmp(action, "sweep") == 0)
        snprintf(o->args, sizeof o->args, "sweep --ns %s --match %s --expire-live", o->key, o->key);
    else snprintf(o->args, sizeof o->args, "mode set %s --ns %s --match %s %s", action, o->key,
                  o->key, fixed);
}

/* Ran as intended: a sweep that succeeded, a mode set that set (or found the
 * mode already set) or that the gate refused (6: nothing written). */
static void judge(op *o) {
    int st = lbr_tool_status(o->tool);
    int ok = st == 0 || (st == 6 && strncmp(o->args, "mode set", 8) == 0);
    const char *out = lbr_tool_output(o->tool);
    int len = (int)strlen(out);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' ')) len--;
    if (!ok && !o->broken[0])
        snprintf(o->broken, sizeof o->broken, "`%s %s` exited %d: %.*s", lbr_tool_path(),
                 o->args, st, len < 600 ? len : 600, out);
}

/* Runs the command to its end. */
static void start(op *o, const lb_now *now) {
    (void)now;
    next_args(o);
    lbr_tool_config tc = {o->port, o->args, NULL, 0};
    o->tool = lbr_tool_start(&tc);
    if (!o->tool)
        snprintf(o->broken, sizeof o->broken, "`%s %s` could not start: %s", lbr_tool_path(),
                 o->args, strerror(errno));
}

static int finish(op *o) {
    if (o->tool) judge(o);
    lbr_tool_free(o->tool);
    o->tool = NULL;
    o->done++;
    return LB_OK;
}

static int ping(op *o, int state) {
    lb__cmd_reset(&o->m.cmd);
    lb__cmd_argz(&o->m.cmd, "PING");
    o->state = state;
    return LB_STEP_SEND;
}

/* A command is one step (a tool run), which sends a PING so that it is a
 * command like any other. */
static int op_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    op *o = (op *)(void *)m;
    (void)r;
    if (o->state == 0) {
        start(o, now);
        return ping(o, 1);
    }
    return finish(o);
}

static lb_machine *op_acq(lbr_part *p) {
    op *o = OP(p);
    lbr_tool_free(o->tool); /* a command cut short by the end of a schedule */
    o->tool = NULL;
    lb__machine_begin(&o->m, op_step);
    o->state = 0;
    return &o->m;
}

static void op_destroy(lbr_part *p) {
    lbr_tool_free(OP(p)->tool);
    free(OP(p));
}

const char *lbr_operator_broken(const lbr_part *p) {
    return p->destroy == op_destroy && OP(p)->broken[0] ? OP(p)->broken : NULL;
}

lbr_part *lbr_operator_part_new(const char *kind, const lbr_part_config *cfg) {
    if (strcmp(kind, "operator") != 0 && strcmp(kind, "operator-back") != 0) return NULL;
    op *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->style = strcmp(kind, "operator") == 0 ? FORWARD : BACK;
    if (strlen(cfg->key) >= sizeof o->key) {
        free(o);
        return NULL;
    }
    strcpy(o->key, cfg->key);
    o->port = cfg->port;
    o->part = (lbr_part){kind, op_acq, op_acq, lbr_never_holds, lbr_never_valid, lbr_no_value,
                         op_destroy, NULL};
    return &o->part;
}
