/* What the lock commands (hold, contend) share: their options, what runs beside
 * the locks (watchdog, waiter, census), and one lock handle whatever the mode. */
#ifndef LOCKBRIDGE_CLI_LOCKOPTS_H
#define LOCKBRIDGE_CLI_LOCKOPTS_H

#include "lockbridge/waiter.h"
#include "tool/common/cli.h"

/* ---- Lock options shared by the lock commands ------------------------------------ */
/* The options every lock command accepts, for command tables to include. */
#define LB__CLI_LOCK_OPTDEFS                                                            \
    {"--mode", 1}, {"--codec", 1}, {"--variant", 1}, {"--ttl-ms", 1}, {"--wait-ms", 1}, \
        {"--clock-offset-ms", 1}, {"--release-margin-ms", 1}, {"--fencing", 0},         \
        {"--watchdog", 0}, {"--fair", 0}, {"--ns", 1}, {"--grace-ms", 1},               \
        {"--fleet-max-ttl-ms", 1}

typedef enum lb__cli_mode {
    LB__CLI_MODE_LEGACY = 0, /* the SETNX/GETSET timestamp lock */
    LB__CLI_MODE_COMPAT,     /* timestamp values with a Redis TTL, through scripts */
    LB__CLI_MODE_MODERN      /* the token lock */
} lb__cli_mode;

struct lb__cli_route;

typedef struct lb__cli_lockopts {
    lb__cli_mode mode;
    lb_legacy_options legacy; /* legacy: codec, variant, ttl, release margin */
    lb_lock_options modern;   /* modern: ttl, fencing, fair */
    /* compat, or any mode with --ns: the mode-following lock (ns NULL: none) */
    int following;
    lb_mlock_options mlock;
    int watchdog;             /* modern: renew held locks (--watchdog) */
    /* Set by lb__cli_lockenv_start once connected; shared by every lock. */
    lb_watchdog *wd;
    lb_waiter *waiter;
    lb_clock clock;           /* system clocks shifted by --clock-offset-ms */
    int64_t wait_ms;          /* per blocking acquire, milliseconds */
    char codec_spec[128];     /* the codec as lb_codec_format writes it */
    int mode_given;           /* --mode was on the command line */
    /* With --ns: the process's one census identity, shared by every lock of
     * the run, and how to reach the server to remove it at the end. */
    char census_id[LB_CENSUS_ID_MAX];
    const lb__cli_conn *conn;
} lb__cli_lockopts;

/* Reads the shared lock options from `a` (parsed with `opts`), with wait_ms as
 * the default wait. legacy.clock points into `out`, which must not move while a
 * lock uses it. Returns 0, or prints a usage error and returns -1. */
int lb__cli_lockopts_read(lb__cli_lockopts *out, const lb__cli_args *a,
                          const lb__cli_optdef *opts, int64_t wait_ms);
/* Starts what the options need beside the locks: the watchdog (--watchdog)
 * and the waiter (--fair), each with its own connection to the key's server
 * (route->key); with --ns, reads the namespace's mode on its server
 * (route->ns) to start in it. Returns 0, or -1 with a reason in `err`. */
int lb__cli_lockenv_start(lb__cli_lockopts *lo, const struct lb__cli_route *route, char *err,
                          size_t cap);
/* Stops them; the locks must be freed first. */
void lb__cli_lockenv_stop(lb__cli_lockopts *lo);
/* "wire" or "scripted". */
const char *lb__cli_variant_name(lb_legacy_variant v);
/* "legacy", "compat" or "modern". */
const char *lb__cli_mode_name(lb__cli_mode m);
/* Reads a mode name; returns 0, or -1 for anything else. */
int lb__cli_mode_parse(const char *s, lb__cli_mode *out);

/* ---- One lock, whatever the mode (lock.c) ---------------------------------------- */
typedef struct lb__cli_lock lb__cli_lock;
/* A handle for `key` with the options `lo` (which must outlive it). Returns a
 * library status; *out is reset on entry. */
int lb__cli_lock_new(lb__cli_lock **out, const char *key, const lb__cli_lockopts *lo);
void lb__cli_lock_free(lb__cli_lock *l);
/* As lb_legacy_acquire / lb_lock_acquire: LB_OK, LB_ETIMEDOUT, LB_EFOREIGN, ... */
int lb__cli_lock_acquire(lb__cli_lock *l, lb_target t, int64_t wait_ms);
/* LB_OK released while ours; LB_ELOST, LB_EEXPIRED or an error otherwise. */
int lb__cli_lock_release(lb__cli_lock *l, lb_target t);
const char *lb__cli_lock_errstr(const lb__cli_lock *l);
/* Redis commands the lock has sent (0 for NULL). */
uint64_t lb__cli_lock_commands(const lb__cli_lock *l);
/* The fencing number of the last acquisition (modern with fencing), else 0. */
int64_t lb__cli_lock_fence(const lb__cli_lock *l);
/* 1 when a watchdog renews this lock while held. */
int lb__cli_lock_watched(const lb__cli_lock *l);
/* With --watchdog: 1 when the watchdog reported the held lock lost (*why set
 * to its reason's name), else 0. */
int lb__cli_lock_watch_lost(const lb__cli_lock *l, const char **why);
/* Adds the mode's fields to an "acquired" or a "not_acquired" event. */
void lb__cli_lock_describe_held(const lb__cli_lock *l, cJSON *o);
void lb__cli_lock_describe_busy(const lb__cli_lock *l, cJSON *o);
/* The foreign value seen by the last attempt, escaped; "" if none. */
const char *lb__cli_lock_foreign(const lb__cli_lock *l);

#endif
