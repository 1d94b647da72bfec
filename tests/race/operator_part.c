/* The operator as a race participant: it runs the real lockbridge tool against
 * the world's server, a list operator's command in two steps (its checks, then
 * its held mode write), after storing the namespace's configuration once per
 * world; a command that did not run as intended (a tool that is missing,
 * refuses the options, fails to connect) breaks the world. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "migrate/internal.h"
#include "race/race.h"
#include "race/tool.h"

lbr_part *lbr_operator_part_new(const char *kind, const lbr_part_config *cfg);
const char *lbr_operator_broken(const lbr_part *p);

#define MAX_ACTIONS 8

enum { FORWARD, BACK, LIST }; /* "operator", "operator-back", "operator:..." */

typedef struct op {
    lb_machine m; /* first: the machine's address is the operator's */
    lbr_part part;
    int style;
    char actions[MAX_ACTIONS][8]; /* legacy, compat, modern or sweep, in turn */
    int nactions, done, state;
    char key[128];         /* the lock key, which names the namespace */
    char control[LB_NS_KEY_MAX]; /* the namespace's control key */
    int port;
    char args[512];        /* the running command's arguments */
    int configured;        /* the namespace's configuration is stored */
    int old_options;       /* the tool has no `mode config --override`: values on mode set */
    lbr_tool *tool;
    char broken[2048];     /* why a step did not run as intended; "" */
} op;

#define OP(p) ((op *)(void *)((char *)(p) - offsetof(op, part)))

/* The configuration an operator stores before its first command, as `mode
 * config` takes it: the first two styles store no stage time (their worlds'
 * followers re-read the mode before every acquire); every style stores a watch
 * of 0 ms (the world's own legacy clients send SETNX), which its mode set then
 * skips by name (--override observation). A list operator judges stage time as
 * the tool does by default, its world's pauses moving the stage's start
 * (lbr_warp_gate). */
static void config_args(op *o) {
    static const char fixed[] = "--ttl-ms 0 --refresh-ms 0 --observe-ms 0 --override ttl-ms "
                                "--override refresh-ms --override observe-ms";
    static const char list[] = "--observe-ms 0 --override observe-ms";
    snprintf(o->args, sizeof o->args, "mode config --ns %s --match %s %s", o->key, o->key,
             o->style == LIST ? list : fixed);
}

/* The arguments of the operator's next command. A tool that has no `mode
 * config --override` (one from before values only tightened) is given the
 * same values on each mode set instead. The first two styles' sweep gives
 * live locks a TTL (--expire-live). */
static void next_args(op *o) {
    static const char *const back[] = {"compat", "modern", "compat", "legacy"};
    static const char fixed[] = "--observe-ms 0 --override observation --ttl-ms 0 --refresh-ms 0";
    static const char list[] = "--observe-ms 0 --override observation";
    const char *action = o->style == BACK      ? back[o->done % 4]
                         : o->style == FORWARD ? (o->done % 3 == 1   ? "sweep"
                                                  : o->done % 3 == 2 ? "modern"
                                                                     : "compat")
                                               : o->actions[o->done % o->nactions];
    const char *values = !o->old_options ? "--override observation"
                         : o->style == LIST ? list
                                            : fixed;
    if (strcmp(action, "sweep") == 0)
        snprintf(o->args, sizeof o->args, "sweep --ns %s --match %s --expire-live", o->key, o->key);
    else snprintf(o->args, sizeof o->args, "mode set %s --ns %s --match %s %s", action, o->key,
                  o->key, values);
}

/* Ran as intended: a sweep that succeeded, a mode set that set (or found the
 * mode already set) or that the gate refused (6: nothing written). */
static void judge(op *o, const lbr_tool *t) {
    int st = lbr_tool_status(t);
    int ok = st == 0 || (st == 6 && strncmp(o->args, "mode set", 8) == 0);
    const char *out = lbr_tool_output(t);
    int len = (int)strlen(out);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' ')) len--;
    if (!ok && !o->broken[0])
        snprintf(o->broken, sizeof o->broken, "`%s %s` exited %d: %.*s", lbr_tool_path(),
                 o->args, st, len < 600 ? len : 600, out);
}

static int64_t real_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* The old tool's refusal of an override given to `mode config`. */
#define NO_CONFIG_OVERRIDE "--override does not apply to config"

/* Stores the namespace's configuration, to the end of the command. A tool
 * that refuses it with exactly the old tool's usage error is one from before
 * values only tightened: its mode sets are given the values instead. */
static void configure(op *o) {
    config_args(o);
    o->configured = 1;
    lbr_tool_config tc = {o->port, o->args, NULL, 0};
    lbr_tool *t = lbr_tool_start(&tc);
    if (!t) {
        snprintf(o->broken, sizeof o->broken, "`%s %s` could not start: %s", lbr_tool_path(),
                 o->args, strerror(errno));
        return;
    }
    if (lbr_tool_status(t) == 1 && strstr(lbr_tool_output(t), NO_CONFIG_OVERRIDE))
        o->old_options = 1;
    else judge(o, t);
    lbr_tool_free(t);
}

/* Starts the command and relays it to its held write or its end. A list
 * operator's tool reads the operator's clock (the world's virtual time and
 * the operator's offset) as its host clock. */
static void start(op *o, const lb_now *now) {
    if (!o->configured) configure(o);
    if (o->broken[0]) return;
    next_args(o);
    lbr_tool_config tc = {o->port, o->args, o->style == LIST ? o->control : NULL,
                          o->style == LIST ? now->wall_us / 1000 - real_ms() : 0};
    if (tc.shift_ms == 0 && o->style == LIST) tc.shift_ms = 1; /* the clock is always set */
    o->tool = lbr_tool_start(&tc);
    if (!o->tool)
        snprintf(o->broken, sizeof o->broken, "`%s %s` could not start: %s", lbr_tool_path(),
                 o->args, strerror(errno));
}

static int finish(op *o) {
    if (o->tool) judge(o, o->tool);
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

/* A command is one step, or two when its mode write was held: the first runs
 * the tool up to the write (its scan and checks), the second lets the write
 * through. Each step sends a PING so that it is a command like any other. */
static int op_step(lb_machine *m, const redisReply *r, const lb_now *now) {
    op *o = (op *)(void *)m;
    (void)r;
    if (o->state == 0) {
        start(o, now);
        return ping(o, 1);
    }
    if (o->state == 1 && o->tool && lbr_tool_parked(o->tool)) return ping(o, 2);
    if (o->state == 2) lbr_tool_release(o->tool);
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

/* "operator:A,B,...": the commands in turn, each of legacy, compat, modern
 * (mode set) or sweep. */
static int parse_list(op *o, const char *list) {
    char buf[128];
    if (strlen(list) >= sizeof buf) return -1;
    strcpy(buf, list);
    for (char *save = NULL, *a = strtok_r(buf, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        if (o->nactions == MAX_ACTIONS ||
            (strcmp(a, "legacy") && strcmp(a, "compat") && strcmp(a, "modern") &&
             strcmp(a, "sweep")))
            return -1;
        strcpy(o->actions[o->nactions++], a);
    }
    return o->nactions ? 0 : -1;
}

lbr_part *lbr_operator_part_new(const char *kind, const lbr_part_config *cfg) {
    lb_ns_keys ns;
    op *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->style = strcmp(kind, "operator") == 0        ? FORWARD
               : strcmp(kind, "operator-back") == 0 ? BACK
                                                    : LIST;
    if ((o->style == LIST && (strncmp(kind, "operator:", 9) != 0 || parse_list(o, kind + 9))) ||
        strlen(cfg->key) >= sizeof o->key ||
        lb_ns_keys_init(&ns, cfg->key, strlen(cfg->key)) != LB_OK ||
        ns.modelen >= sizeof o->control) {
        free(o);
        return NULL;
    }
    strcpy(o->key, cfg->key);
    memcpy(o->control, ns.mode, ns.modelen);
    o->port = cfg->port;
    o->part = (lbr_part){kind, op_acq, op_acq, lbr_never_holds, lbr_never_valid, lbr_no_value,
                         op_destroy, NULL};
    return &o->part;
}
