/* The lockbridge tool's shared declarations: the command table's shape, argument
 * parsing, connection options, lock options common to commands, JSON output. */
#ifndef LOCKBRIDGE_CLI_H
#define LOCKBRIDGE_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "lockbridge/lockbridge.h"

/* Exit codes shared by every command (docs/cli.md keeps the table). */
enum {
    LB__CLI_EXIT_OK = 0,
    LB__CLI_EXIT_USAGE = 1,
    LB__CLI_EXIT_NOT_ACQUIRED = 2,
    LB__CLI_EXIT_FOREIGN = 3,
    LB__CLI_EXIT_REDIS = 4,
    LB__CLI_EXIT_LOST = 5,
    LB__CLI_EXIT_UNSAFE = 6 /* a check said no: clocks disagree, mode change refused */
};

/* Durations given on the command line are bounded so that no instant computed
 * from them can overflow in any codec unit (nanoseconds included): 10^12 ms is
 * about 31 years. */
#define LB__CLI_MS_MAX INT64_C(1000000000000)

/* ---- Arguments ------------------------------------------------------------------ */
#define LB__CLI_MAX_OPTS 24
#define LB__CLI_MAX_POS 4

/* One command option: "--ttl-ms" and whether it takes a value. */
typedef struct lb__cli_optdef {
    const char *name;
    int has_value;
} lb__cli_optdef;

/* Connection options, shared by every command that talks to Redis. */
typedef struct lb__cli_conn {
    const char *host;     /* -h, default 127.0.0.1 */
    int port;             /* -p, default 6379 */
    const char *socket;   /* -s: a Unix socket, used instead of host and port */
    const char *password; /* -a */
    const char *user;     /* --user: AUTH user password (needs -a) */
    int db;               /* -n: SELECT db when >= 0 */
} lb__cli_conn;

/* What the parser found: global options, the command's options (by index in
 * its table; NULL when absent) and positional arguments. */
typedef struct lb__cli_args {
    const char *prog; /* "lockbridge" or "lockbridge hold", for messages */
    lb__cli_conn conn;
    int help;
    int version;
    int json; /* --json: JSON lines on stdout instead of text for people */
    unsigned seen_globals; /* bit per global option given, to refuse repeats */
    const char *opt[LB__CLI_MAX_OPTS];
    const char *pos[LB__CLI_MAX_POS];
    int npos;
} lb__cli_args;

/* A command of the tool. `run` returns the process's exit code. */
typedef struct lb__cli_command {
    const char *name;
    const char *summary; /* one line for the general help */
    const char *help;    /* full text printed by `help NAME` and `NAME --help` */
    const lb__cli_optdef *opts; /* terminated by a NULL name; may be NULL */
    int max_pos;                /* positional arguments accepted */
    int (*run)(const lb__cli_args *a);
    /* 1: a stream of events that scripts read: JSON lines unless stdout is a
     * terminal. 0: text unless --json. */
    int json_when_piped;
} lb__cli_command;

/* Resets `a` to the defaults; prog names the tool (or the command) in messages. */
void lb__cli_args_init(lb__cli_args *a, const char *prog);
/* Parses argv[0..argc) (no program name) into `a` with the command options
 * `opts`: global options may appear anywhere, "--opt=value" and "--opt value"
 * both work, "--" ends options. With stop_at_pos set, parsing stops at the first
 * positional argument and *used says how many arguments were consumed. Returns
 * 0, or prints a usage error and returns -1. */
int lb__cli_parse(lb__cli_args *a, int argc, char **argv, const lb__cli_optdef *opts,
                  int max_pos, int stop_at_pos, int *used);
/* Index of option `name` in `opts` (for reading a->opt); -1 if absent. */
int lb__cli_opt_index(const lb__cli_optdef *opts, const char *name);

/* Prints "PROG: message (see 'PROG --help')" on stderr; returns LB__CLI_EXIT_USAGE. */
int lb__cli_usage(const lb__cli_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Parses exactly `len` bytes as a decimal int64: an optional '-' and digits,
 * nothing else. Returns 0, or -1 (and *out = 0). */
int lb__cli_parse_i64(const char *s, size_t len, int64_t *out);
/* Strict integer parsing: the whole string, an optional '-', decimal digits, in
 * [min, max]. On error prints a usage message naming `what` and returns -1. */
int lb__cli_int(const lb__cli_args *a, const char *what, const char *s, int64_t min,
                int64_t max, int64_t *out);
/* Writes `s` with every byte outside printable ASCII as \xHH, bounded by `cap`. */
void lb__cli_printable(char *out, size_t cap, const char *s, size_t len);

/* ---- Connection ------------------------------------------------------------------ */
/* Connects, authenticates and selects the database. Returns the context, or NULL
 * with a one-line reason in `err`. */
redisContext *lb__cli_connect(const lb__cli_conn *o, char *err, size_t errcap);
/* "127.0.0.1:6379" or "unix:/path", for messages. */
void lb__cli_endpoint(const lb__cli_conn *o, char *out, size_t cap);

/* ---- Lock options shared by the lock commands ------------------------------------ */
/* The options every lock command accepts, for command tables to include. */
#define LB__CLI_LOCK_OPTDEFS                                                            \
    {"--mode", 1}, {"--codec", 1}, {"--variant", 1}, {"--ttl-ms", 1}, {"--wait-ms", 1}, \
        {"--clock-offset-ms", 1}, {"--release-margin-ms", 1}, {"--fencing", 0},         \
        {"--watchdog", 0}, {"--fair", 0}

typedef enum lb__cli_mode {
    LB__CLI_MODE_LEGACY = 0, /* the SETNX/GETSET timestamp lock */
    LB__CLI_MODE_COMPAT,     /* timestamp values with a Redis TTL, through scripts */
    LB__CLI_MODE_MODERN      /* the token lock */
} lb__cli_mode;

typedef struct lb__cli_lockopts {
    lb__cli_mode mode;
    lb_legacy_options legacy; /* legacy: codec, variant, ttl, release margin */
    lb_lock_options modern;   /* modern: ttl, fencing */
    lb_clock clock;           /* system clocks shifted by --clock-offset-ms */
    int64_t wait_ms;          /* per blocking acquire, milliseconds */
    char codec_spec[128];     /* the codec as lb_codec_format writes it */
} lb__cli_lockopts;

/* Reads the shared lock options from `a` (parsed with `opts`), with wait_ms as
 * the default wait. legacy.clock points into `out`, which must not move while a
 * lock uses it. Returns 0, or prints a usage error and returns -1. */
int lb__cli_lockopts_read(lb__cli_lockopts *out, const lb__cli_args *a,
                          const lb__cli_optdef *opts, int64_t wait_ms);
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
int lb__cli_lock_acquire(lb__cli_lock *l, redisContext *c, int64_t wait_ms);
/* LB_OK released while ours; LB_ELOST, LB_EEXPIRED or an error otherwise. */
int lb__cli_lock_release(lb__cli_lock *l, redisContext *c);
const char *lb__cli_lock_errstr(const lb__cli_lock *l);
/* Redis commands the lock has sent (0 for NULL). */
uint64_t lb__cli_lock_commands(const lb__cli_lock *l);
/* The fencing number of the last acquisition (modern with fencing), else 0. */
int64_t lb__cli_lock_fence(const lb__cli_lock *l);
/* Adds the mode's fields to an "acquired" or a "not_acquired" event. */
void lb__cli_lock_describe_held(const lb__cli_lock *l, cJSON *o);
void lb__cli_lock_describe_busy(const lb__cli_lock *l, cJSON *o);
/* The foreign value seen by the last attempt, escaped; "" if none. */
const char *lb__cli_lock_foreign(const lb__cli_lock *l);

/* ---- Time ---------------------------------------------------------------------------- */
/* The monotonic clock in milliseconds, with a fraction. */
double lb__cli_mono_ms(void);
/* Sleeps `ms` milliseconds. */
void lb__cli_sleep_ms(int64_t ms);
/* Blocks SIGINT and SIGTERM in the calling thread and in threads it creates
 * afterwards, so that only lb__cli_wait_signal takes them. */
void lb__cli_block_signals(void);
/* Waits `ms` milliseconds; returns 1 as soon as SIGINT or SIGTERM arrives (they
 * must be blocked), 0 when the time has passed. */
int lb__cli_wait_signal(int64_t ms);

/* ---- Output -----------------------------------------------------------------------
 * Results are events: with --json each is one JSON line on stdout; otherwise
 * each is shown to people as its name and a table of its fields. Byte strings
 * are shown escaped (\xHH) in text and as below in JSON.
 * Sets the form for the rest of the run (0: text, 1: JSON lines). */
void lb__cli_set_json(int json);
int lb__cli_is_json(void);
/* Events are single JSON lines on stdout. Byte strings (keys, values) are written
 * losslessly: printable ASCII as itself, every other byte as \u00XX, so mapping
 * each decoded code point back to one byte gives the exact bytes. */
cJSON *lb__cli_event(const char *event);
/* Adders; each returns 0, or -1 when out of memory (the object stays valid). */
int lb__cli_add_bytes(cJSON *o, const char *name, const char *s, size_t len);
int lb__cli_add_str(cJSON *o, const char *name, const char *s);
int lb__cli_add_i64(cJSON *o, const char *name, int64_t v);
int lb__cli_add_ms(cJSON *o, const char *name, double ms);
int lb__cli_add_bool(cJSON *o, const char *name, int v);
/* Prints `o` (as one JSON line or as text), flushes stdout and frees `o`.
 * Returns 0 or -1. */
int lb__cli_emit(cJSON *o);

/* Reports a connection or Redis failure: a line on stderr and an "error" event
 * (key may be NULL). Returns LB__CLI_EXIT_REDIS. */
int lb__cli_error(const lb__cli_args *a, const char *key, int status, const char *detail);

/* ---- Commands ------------------------------------------------------------------------ */
extern const lb__cli_command lb__cli_cmd_hold;
extern const lb__cli_command lb__cli_cmd_contend;
extern const lb__cli_command lb__cli_cmd_clock;

#endif
