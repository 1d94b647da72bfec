/* `lockbridge hold`: acquire one lock (legacy or token), report it, hold it for
 * a while, release it and report whether it was still ours. */
#include <string.h>

#include "tool/common/server.h"
#include "tool/lock/lockopts.h"

static const lb__cli_optdef opts[] = {LB__CLI_LOCK_OPTDEFS, {"--hold-ms", 1}, {NULL, 0}};

static const char help[] =
    "usage: lockbridge hold KEY [--mode legacy|compat|modern] [--ns NS] [--ttl-ms N]\n"
    "                           [--wait-ms N] [--hold-ms N] [--clock-offset-ms N]\n"
    "                           legacy, compat: [--codec SPEC]  compat: [--grace-ms N]\n"
    "                           legacy: [--variant wire|scripted] [--release-margin-ms N]\n"
    "                                   [--fleet-max-ttl-ms N]\n"
    "                           modern: [--fencing] [--watchdog] [--fair]\n"
    "\n"
    "Acquires the lock at KEY, reports \"acquired\", holds the lock, releases it and\n"
    "reports \"released\". JSON lines when stdout is not a terminal or with --json.\n"
    "KEY may not be the name of a lockbridge companion key ({k}:bwait, {k}:queue, ...).\n"
    "\n"
    "  --mode MODE             legacy: the SETNX/GETSET timestamp lock (default);\n"
    "                          compat: timestamps with a Redis TTL of ttl + grace,\n"
    "                          through the migration scripts; modern: the token lock\n"
    "  --ns NS                 follow namespace NS's control key (start in its mode,\n"
    "                          --mode when it has none) and join its census\n"
    "  --codec SPEC            value format: ms (default), s, float, json,\n"
    "                          json:field=NAME,unit=ns|us|ms|s,clock=epoch|mono\n"
    "  --variant wire|scripted legacy. wire: SETNX/GET/GETSET/DEL only (default);\n"
    "                          scripted: atomic takeover and release in Lua\n"
    "  --grace-ms N            compat: extra Redis TTL beyond --ttl-ms (default 1000)\n"
    "  --fencing               modern: also take the next fencing number (\"fence\")\n"
    "  --watchdog              modern: renew the lock while held; a lock the watchdog\n"
    "                          reports lost ends the hold at once (exit 5)\n"
    "  --fair                  modern: queue, and be handed the lock in turn\n"
    "  --ttl-ms N              legacy, compat: validity written into the value;\n"
    "                          modern: the key's TTL; ms (default 30000)\n"
    "  --wait-ms N             how long to keep trying, ms (default 0: one attempt);\n"
    "                          SIGINT or SIGTERM ends the wait between attempts\n"
    "  --hold-ms N             how long to hold before releasing, ms (default 0);\n"
    "                          SIGINT or SIGTERM ends the hold early\n"
    "  --clock-offset-ms N     shift this client's clock, ms (default 0)\n"
    "  --release-margin-ms N   legacy wire release refuses this close to expiry, ms\n"
    "                          (default 1000; --ttl-ms must be above it)\n"
    "  --fleet-max-ttl-ms N    legacy wire: a takeover's GETSET writes now + this (the\n"
    "                          fleet's longest validity), so that losing the race never\n"
    "                          shortens the winner's lock, ms (default 0: --ttl-ms)\n"
    "  --json                  JSON lines even on a terminal\n"
    "\n"
    "Exit: 0 released while still ours; 1 usage; 2 not acquired in time;\n"
    "3 the key holds a value not in this format or another Redis type (left alone);\n"
    "4 connection or Redis error; 5 the lock was lost (or had expired) by release.\n"
    "Connection: -h HOST -p PORT -s SOCKET -a PASSWORD --user USER -n DB.\n";

/* Exit code and reason for an acquire that did not succeed. */
static int classify(int rc, int64_t wait_ms, int interrupted, const char **reason) {
    switch (rc) {
    case LB_EBUSY: *reason = "busy"; return LB__CLI_EXIT_NOT_ACQUIRED;
    case LB_ETIMEDOUT:
        *reason = interrupted ? "interrupted" : wait_ms > 0 ? "timeout" : "busy";
        return LB__CLI_EXIT_NOT_ACQUIRED;
    case LB_EFOREIGN: *reason = "foreign"; return LB__CLI_EXIT_FOREIGN;
    case LB_EWRONGTYPE: *reason = "wrongtype"; return LB__CLI_EXIT_FOREIGN;
    default: *reason = "error"; return LB__CLI_EXIT_REDIS;
    }
}

static int report_not_acquired(const lb__cli_args *a, const char *key, lb__cli_lock *l,
                               int rc, int64_t wait_ms, double waited_ms, int interrupted) {
    const char *reason;
    int code = classify(rc, wait_ms, interrupted, &reason);
    if (code == LB__CLI_EXIT_REDIS) return lb__cli_error(a, key, rc, lb__cli_lock_errstr(l));
    cJSON *o = lb__cli_event("not_acquired");
    if (!o) return lb__cli_emit(o), code;
    lb__cli_add_str(o, "key", key);
    lb__cli_add_str(o, "reason", reason);
    lb__cli_add_str(o, "status", lb_err_name(rc));
    if (code == LB__CLI_EXIT_NOT_ACQUIRED) lb__cli_lock_describe_busy(l, o);
    if (rc == LB_EFOREIGN) lb__cli_add_str(o, "foreign_value", lb__cli_lock_foreign(l));
    if (code == LB__CLI_EXIT_FOREIGN) lb__cli_add_bool(o, "left_alone", 1);
    lb__cli_add_ms(o, "waited_ms", waited_ms);
    lb__cli_add_str(o, "detail", lb__cli_lock_errstr(l));
    lb__cli_emit(o);
    return code;
}

static void report_acquired(const char *key, const lb__cli_lock *l, double waited_ms) {
    cJSON *o = lb__cli_event("acquired");
    if (o) {
        lb__cli_add_str(o, "key", key);
        lb__cli_lock_describe_held(l, o);
        lb__cli_add_ms(o, "waited_ms", waited_ms);
    }
    lb__cli_emit(o);
}

/* A release that found the lock lost, or refused to delete it this close to its
 * expiry, still means the holder could not count on it to the end. */
static int release_exit(int rc) {
    if (rc == LB_OK) return LB__CLI_EXIT_OK;
    if (rc == LB_ELOST || rc == LB_EEXPIRED || rc == LB_EWRONGTYPE) return LB__CLI_EXIT_LOST;
    return LB__CLI_EXIT_REDIS;
}

static int report_released(const char *key, lb__cli_lock *l, int rc, int interrupted,
                           const char *lost) {
    cJSON *o = lb__cli_event("released");
    if (o) {
        lb__cli_add_str(o, "key", key);
        lb__cli_add_bool(o, "still_ours", rc == LB_OK);
        lb__cli_add_str(o, "status", lb_err_name(rc));
        lb__cli_add_bool(o, "interrupted", interrupted);
        if (lost) lb__cli_add_str(o, "watchdog_lost", lost);
        if (rc != LB_OK) lb__cli_add_str(o, "detail", lb__cli_lock_errstr(l));
    }
    lb__cli_emit(o);
    return release_exit(rc);
}

/* The wait is cut into slices so that an interrupt is noticed between attempts
 * rather than by killing the process in the middle of one, which could leave a
 * freshly written lock behind until its expiry. Each slice restarts the
 * library's back-off, so slices are long enough to reach its longest sleep,
 * milliseconds. */
#define WAIT_SLICE_MS 1000

static int acquire(lb__cli_lock *l, lb_target t, int64_t wait_ms, int fair,
                   int *interrupted) {
    double deadline = lb__cli_mono_ms() + (double)wait_ms;
    *interrupted = 0;
    for (;;) {
        double left = deadline - lb__cli_mono_ms();
        int64_t slice = left <= 0 ? 0 : left < WAIT_SLICE_MS ? (int64_t)left : WAIT_SLICE_MS;
        /* A fair waiter whose wait ends leaves the queue: slices would send it
         * to the back every second, so it waits in one piece (a signal is
         * then taken when the wait ends). */
        if (fair) slice = left <= 0 ? 0 : (int64_t)left;
        int rc = lb__cli_lock_acquire(l, t, slice);
        if ((rc != LB_ETIMEDOUT && rc != LB_EFOREIGN) || lb__cli_mono_ms() >= deadline)
            return rc;
        if ((*interrupted = lb__cli_wait_signal(0)) != 0) return rc;
    }
}

/* How often a watched hold asks the watchdog whether the lock was lost, ms. */
#define WATCH_POLL_MS 50

/* Holds for hold_ms: 1 when a signal ended it early. With a watchdog, a lost
 * lock ends it too, with *lost naming why. */
static int hold_for(const lb__cli_lock *l, int64_t hold_ms, const char **lost) {
    const char *why;
    double end = lb__cli_mono_ms() + (double)hold_ms;
    *lost = NULL;
    if (!lb__cli_lock_watched(l)) return lb__cli_wait_signal(hold_ms);
    for (;;) {
        double left = end - lb__cli_mono_ms();
        if (left <= 0) return 0;
        if (lb__cli_wait_signal(left < WATCH_POLL_MS ? (int64_t)left : WATCH_POLL_MS)) return 1;
        if (lb__cli_lock_watch_lost(l, &why)) {
            *lost = why;
            return 0;
        }
    }
}

static int hold(const lb__cli_args *a, const char *key, const lb__cli_lockopts *lo,
                int64_t hold_ms, lb_target t) {
    lb__cli_lock *l = NULL;
    int rc = lb__cli_lock_new(&l, key, lo);
    if (rc != LB_OK) return lb__cli_error(a, key, rc, lb_strerror(rc));
    /* From here on SIGINT and SIGTERM end the wait or the hold, never an
     * operation half done; a lock taken is always released. */
    lb__cli_block_signals();
    int interrupted, code;
    double t0 = lb__cli_mono_ms();
    rc = acquire(l, t, lo->wait_ms, lo->modern.fair, &interrupted);
    double waited = lb__cli_mono_ms() - t0;
    if (rc != LB_OK) {
        code = report_not_acquired(a, key, l, rc, lo->wait_ms, waited, interrupted);
    } else {
        report_acquired(key, l, waited);
        const char *lost;
        interrupted = hold_for(l, hold_ms, &lost);
        code = report_released(key, l, lb__cli_lock_release(l, t), interrupted, lost);
    }
    lb__cli_lock_free(l);
    return code;
}

static int run(const lb__cli_args *a) {
    lb__cli_lockopts lo;
    int64_t hold_ms = 0;
    const char *hold_opt = a->opt[lb__cli_opt_index(opts, "--hold-ms")];
    if (a->npos != 1) return lb__cli_usage(a, "expects exactly one KEY");
    if (a->pos[0][0] == '\0') return lb__cli_usage(a, "KEY must not be empty");
    const char *why = lb_lock_name_refused(a->pos[0], strlen(a->pos[0]));
    if (why) return lb__cli_usage(a, "KEY is %s", why);
    if (lb__cli_lockopts_read(&lo, a, opts, 0) != 0) return LB__CLI_EXIT_USAGE;
    if (hold_opt && lb__cli_int(a, "--hold-ms", hold_opt, 0, LB__CLI_MS_MAX, &hold_ms) != 0)
        return LB__CLI_EXIT_USAGE;
    char err[512];
    lb__cli_route route;
    if (lb__cli_route_open(&route, a, a->pos[0], lo.mlock.ns, NULL, err, sizeof err) != 0)
        return lb__cli_error(a, a->pos[0], LB_EIO, err);
    /* On a Cluster the lock's commands go through the cluster handle; the
     * connection serves a single server. */
    redisContext *c = route.cluster ? NULL : lb__cli_connect(&route.key, err, sizeof err);
    int code;
    if (!route.cluster && !c)
        code = lb__cli_error(a, a->pos[0], LB_EIO, err);
    else if (lb__cli_lockenv_start(&lo, &route, err, sizeof err) != 0)
        code = lb__cli_error(a, a->pos[0], LB_EIO, err);
    else code = hold(a, a->pos[0], &lo, hold_ms, lb__cli_route_target(route.cluster, c));
    lb__cli_lockenv_stop(&lo);
    if (c) redisFree(c);
    lb__cli_route_close(&route);
    return code;
}

const lb__cli_command lb__cli_cmd_hold = {
    "hold", "acquire a lock, hold it, release it; JSON lines on stdout",
    help, opts, 1, run, 1};
