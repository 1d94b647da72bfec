/* The lockbridge tool's basics, which every part may use: exit codes, the
 * command table's shape, argument parsing, time, and events on stdout. */
#ifndef LOCKBRIDGE_CLI_H
#define LOCKBRIDGE_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "core/escape.h"
#include "lockbridge/lockbridge.h"

/* Exit codes shared by every command (docs/cli.md keeps the table). */
enum {
    LB__CLI_EXIT_OK = 0,
    LB__CLI_EXIT_USAGE = 1,
    LB__CLI_EXIT_NOT_ACQUIRED = 2,
    LB__CLI_EXIT_FOREIGN = 3,
    LB__CLI_EXIT_REDIS = 4,
    LB__CLI_EXIT_LOST = 5,
    LB__CLI_EXIT_UNSAFE = 6, /* a check said no: clocks disagree, mode change refused */
    LB__CLI_EXIT_ALARM = 7   /* status: a legacy writer in a modern namespace */
};

/* Durations given on the command line are bounded so that no instant computed
 * from them can overflow in any codec unit (nanoseconds included): 10^12 ms is
 * about 31 years. */
#define LB__CLI_MS_MAX INT64_C(1000000000000)

/* ---- Arguments ------------------------------------------------------------------ */
#define LB__CLI_MAX_OPTS 24
#define LB__CLI_MAX_POS 4

#define LB__CLI_MAX_REPEATS 16

/* One command option: "--ttl-ms" and whether it takes a value: 0 no, 1 yes,
 * LB__CLI_REPEAT yes and it may be given again (every value kept, in order). */
#define LB__CLI_REPEAT 2
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
#define LB__CLI_MAX_SENTINELS 8

typedef struct lb__cli_args {
    const char *prog; /* "lockbridge" or "lockbridge hold", for messages */
    lb__cli_conn conn;
    int help;
    int version;
    int json; /* --json: JSON lines on stdout instead of text for people */
    unsigned seen_globals; /* bit per global option given, to refuse repeats */
    const char *opt[LB__CLI_MAX_OPTS]; /* the first value of each option */
    struct {
        int index;
        const char *value;
    } rep[LB__CLI_MAX_REPEATS]; /* later values of repeatable options */
    int nrep;
    const char *pos[LB__CLI_MAX_POS];
    int npos;
    /* --sentinel HOST:PORT (repeatable) and --master NAME: conn is set to the
     * primary the sentinels name before the command runs (sentinel.c). */
    const char *sentinel[LB__CLI_MAX_SENTINELS];
    int nsentinels;
    const char *master;
    char primary_host[256];
    int addr_given; /* -h or -p was on the command line */
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
/* 1 when -h, -p, -s or --sentinel was given: the command line names a server. */
int lb__cli_conn_given(const lb__cli_args *a);
/* Index of option `name` in `opts` (for reading a->opt); -1 if absent. */
int lb__cli_opt_index(const lb__cli_optdef *opts, const char *name);
/* The value of option `name`, or NULL when absent (or not in `opts`). */
const char *lb__cli_opt(const lb__cli_args *a, const lb__cli_optdef *opts, const char *name);
/* Every value of option `name` in command-line order, at most `cap`; the count. */
int lb__cli_opt_all(const lb__cli_args *a, const lb__cli_optdef *opts, const char *name,
                    const char **out, int cap);

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
extern const lb__cli_command lb__cli_cmd_inspect;
extern const lb__cli_command lb__cli_cmd_status;
extern const lb__cli_command lb__cli_cmd_mode;
extern const lb__cli_command lb__cli_cmd_sweep;
extern const lb__cli_command lb__cli_cmd_unlock;
extern const lb__cli_command lb__cli_cmd_census;
extern const lb__cli_command lb__cli_cmd_race;

#endif
