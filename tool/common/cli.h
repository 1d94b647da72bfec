/* The lockbridge tool's shared declarations: the command table's shape, argument
 * parsing, connection options, lock options common to commands, JSON output. */
#ifndef LOCKBRIDGE_CLI_H
#define LOCKBRIDGE_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "lockbridge/lockbridge.h"
#include "lockbridge/wait.h"

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

/* ---- Reading keys in bulk (keyscan.c) ------------------------------------------- */
/* Bytes of each value read: one more than the library ever judges, so a value
 * too long to be a timestamp is known as such. */
#define LB__CLI_VALUE_PREFIX (LB_OBSERVED_MAX + 1)
#define LB__CLI_PATTERN_MAX 1024 /* bytes of a MATCH pattern */

/* What one key holds, as read in one script call. Valid during the callback. */
typedef struct lb__cli_key {
    const char *key;
    size_t keylen;
    char type[32];     /* TYPE: "string", "hash", "none" (gone meanwhile), ... */
    const char *value; /* strings: the first LB__CLI_VALUE_PREFIX bytes; else NULL */
    size_t valuelen;
    int64_t len;       /* strings: the full length; else -1 */
    int64_t pttl_ms;   /* PTTL: -1 no TTL, -2 absent */
} lb__cli_key;

/* Returns 0 to go on, anything else to stop the scan. */
typedef int (*lb__cli_key_fn)(const lb__cli_key *k, void *ud);

typedef struct lb__cli_reader lb__cli_reader;
/* Loads the read script on `c`. Returns 0, or -1 with a reason in `err`. */
int lb__cli_reader_new(lb__cli_reader **out, redisContext *c, char *err, size_t cap);
void lb__cli_reader_free(lb__cli_reader *r);
/* Reads the given keys in one call. 0, 1 (stopped by fn), or -1 with `err`. */
int lb__cli_read_keys(lb__cli_reader *r, const char *const *keys, const size_t *lens,
                      size_t n, lb__cli_key_fn fn, void *ud, char *err, size_t cap);

typedef struct lb__cli_scanopts {
    const char *match; /* SCAN MATCH pattern (checked with lb__cli_pattern_check) */
    int64_t count;     /* SCAN COUNT hint */
    int progress;      /* 1: a progress line on stderr every second */
    /* Set by lb__cli_scan_each on a cluster: */
    const char *where; /* names the primary in progress lines; NULL: none */
    int cluster;       /* 1: read each batch's keys slot by slot (scripts on a
                        * cluster take keys of one slot only) */
} lb__cli_scanopts;
/* Scans every key matching, reading each. 0 done, 1 stopped by fn, -1 error
 * (with `err`); *scanned counts the keys handed to fn. After 1 or -1 the
 * connection may have replies pending: do not reuse it. */
int lb__cli_scan(lb__cli_reader *r, const lb__cli_scanopts *o, lb__cli_key_fn fn, void *ud,
                 uint64_t *scanned, char *err, size_t cap);
/* A MATCH pattern the tool accepts: not empty, at most LB__CLI_PATTERN_MAX
 * bytes, no unterminated [class], no trailing lone backslash. 0, or -1 with
 * the reason in `why`. */
int lb__cli_pattern_check(const char *p, char *why, size_t cap);

/* ---- Single server or cluster (topology.c) -------------------------------------- */
/* A primary of a cluster: the tool's connection options with its address. */
typedef struct lb__cli_node {
    lb__cli_conn conn; /* conn.host points to host */
    char host[256];
    char name[300];    /* "host:port", for messages */
} lb__cli_node;

typedef struct lb__cli_topo {
    int cluster;       /* 0: a single server; the fields below are empty */
    lb__cli_node *node;
    size_t n;          /* primaries in the slot map */
    int *owner;        /* LB_CLUSTER_SLOTS entries: index in node, or -1 */
} lb__cli_topo;

/* Asks the server `c` is connected to (with `base`'s options) whether it is a
 * cluster node (INFO cluster), and if so reads the slot map (CLUSTER SLOTS).
 * 0, or -1 with `err`; clear `t` after 0. */
int lb__cli_topo_read(lb__cli_topo *t, redisContext *c, const lb__cli_conn *base, char *err,
                      size_t cap);
void lb__cli_topo_clear(lb__cli_topo *t);
/* A connection to primary i; NULL with `err` naming it. */
redisContext *lb__cli_connect_primary(const lb__cli_topo *t, size_t i, char *err, size_t cap);
/* Where namespace ns's control key and census live: `c` itself on a single
 * server, else a new connection to the primary that owns their slot. NULL
 * with `err`. Give back with lb__cli_ns_done. */
redisContext *lb__cli_connect_ns(const lb__cli_topo *t, redisContext *c, const char *ns,
                                 char *err, size_t cap);
/* Where `key` lives: `c` on a single server, else its slot's primary. */
redisContext *lb__cli_connect_key(const lb__cli_topo *t, redisContext *c, const char *key,
                                  size_t keylen, char *err, size_t cap);
/* Gives back a connection from lb__cli_connect_ns or lb__cli_connect_key. */
void lb__cli_ns_done(redisContext *ns_c, redisContext *c);
/* Connects as the command line says, reads the topology, reaches the primary
 * of namespace ns's keys (nc; c itself on a single server) and calls fn; its
 * exit code, or that of the connection error. Everything is closed after. */
typedef int (*lb__cli_ns_fn)(const lb__cli_args *a, const lb__cli_topo *t, redisContext *c,
                             redisContext *nc, const char *ns, void *ud);
int lb__cli_on_ns(const lb__cli_args *a, const char *ns, lb__cli_ns_fn fn, void *ud);
/* ---- Sentinel (sentinel.c) ------------------------------------------------------- */
/* With --sentinel: checks the options and points a->conn at the primary the
 * sentinels name for --master. 0 (nothing to do without --sentinel), or an
 * exit code after printing the error. */
int lb__cli_sentinel_resolve(lb__cli_args *a);

/* ---- Routing one key's command (route.c) --------------------------------------- */
/* The connection options of the servers a command about one key talks to. On
 * one server they are all the command line's; on a Cluster node, each is the
 * primary that owns that key's slot, and `cluster` follows redirections. */
typedef struct lb__cli_route {
    lb__cli_conn seed;  /* the command line's */
    lb__cli_conn key;   /* the key's primary */
    lb__cli_conn ns;    /* the namespace's primary (control key, census) */
    lb__cli_conn other; /* the primary of the other key named (a counter) */
    char key_host[256], ns_host[256], other_host[256];
    lb_cluster *cluster; /* NULL on a single server */
} lb__cli_route;
/* Connects as the command line says, asks whether the node is in cluster mode
 * and fills `r` (ns and other may be NULL). 0, or -1 with `err`. */
int lb__cli_route_open(lb__cli_route *r, const lb__cli_args *a, const char *key, const char *ns,
                       const char *other, char *err, size_t cap);
void lb__cli_route_close(lb__cli_route *r);
/* Another cluster handle for the same cluster (one per thread). */
int lb__cli_route_cluster(const lb__cli_route *r, lb_cluster **out, char *err, size_t cap);
/* Where lock operations go: through `cl` on a Cluster, else on `c`. */
lb_target lb__cli_route_target(lb_cluster *cl, redisContext *c);

/* Called after a server's scan finished, on its connection (0 or -1 with `err`). */
typedef int (*lb__cli_after_fn)(redisContext *c, void *ud, char *err, size_t cap);
/* Scans (as lb__cli_scan) the server of `c`, or every primary of the cluster,
 * each on its own connection, calling `after` (may be NULL) at the end of each.
 * *scanned adds up the keys, *servers counts the servers fully scanned. 0, 1
 * stopped by fn, -1 with `err` (naming the primary on a cluster). */
int lb__cli_scan_each(const lb__cli_topo *t, redisContext *c, const lb__cli_scanopts *o,
                      lb__cli_key_fn fn, lb__cli_after_fn after, void *ud, uint64_t *scanned,
                      int *servers, char *err, size_t cap);
/* lb__cli_legacy_calls over every primary, summed (-1 if one cannot be read).
 * 0, or -1 with `err` when a primary cannot be reached. */
int lb__cli_legacy_calls_all(const lb__cli_topo *t, redisContext *c, int64_t *calls, char *err,
                             size_t cap);

/* ---- Formats (format.c): the library's classifier where the tool uses it --------- */
#define LB__CLI_MAX_CODECS 8

/* The codecs the operator named with --codec (repeatable; default ms). Every
 * one reads each value; only plausible readings count, and values read
 * implausibly or as two different instants are ambiguous (lb_classify). */
typedef struct lb__cli_codecs {
    lb_codec codec[LB__CLI_MAX_CODECS];
    char spec[LB__CLI_MAX_CODECS][128];
    int n;
} lb__cli_codecs;

int lb__cli_codecs_read(lb__cli_codecs *out, const lb__cli_args *a,
                        const lb__cli_optdef *opts);
/* The codecs of a space-separated list of specs (the gate record's form); 0 or -1. */
int lb__cli_codecs_parse_list(lb__cli_codecs *out, const char *list);
/* The specs of `cs`, space-separated, into out; 0, or -1 if it does not fit. */
int lb__cli_codecs_join(const lb__cli_codecs *cs, char *out, size_t cap);
/* Classifies what keyscan read (lb_classify; a value longer than the prefix
 * read is no timestamp). */
int lb__cli_classify(const lb__cli_codecs *cs, const lb__cli_key *k, const lb_now *now,
                     lb_class *out);
/* One line for people on why an AMBIGUOUS value is (which codec reads it
 * implausibly and which would read it plausibly, or which two disagree). */
void lb__cli_ambiguity_detail(const lb__cli_codecs *cs, const lb_class *cl, char *buf,
                              size_t cap);
/* The expiry instant `t` of codec `c` as epoch milliseconds, rounded up; -1
 * for a monotonic-clock codec (its instants mean nothing on another host). */
int lb__cli_expiry_epoch_ms(const lb_codec *c, int64_t t, int64_t *ms);
/* 1 when the value was decoded by a monotonic-clock codec. */
int lb__cli_is_mono(const lb__cli_codecs *cs, const lb_class *cl);
/* 1 for a key that is one of lockbridge's companions (lb_companion_of's name
 * and the type lockbridge keeps there), left out of lock counts. */
int lb__cli_is_companion(const struct lb__cli_key *k);
/* How long the holder has held, from the fleet's lock validity `ttl_ms`
 * (0: unknown): timestamps and TTLs that are still running. -1 when unknown. */
int64_t lb__cli_holder_age_ms(const lb_class *cl, int64_t ttl_ms);
/* Adds format, codec, expiry, expired, remaining_ms, token, counter, pttl_ms and
 * holder_age_ms (those that apply) to `o`; for an ambiguous value, why
 * (ambiguity), each codec's reading (codec, read_as, codec2, read_as2) and
 * the codec that reads it plausibly (plausible_codec, null if none). */
void lb__cli_add_class(cJSON *o, const lb__cli_codecs *cs, const lb_class *cl,
                       int64_t ttl_ms);

/* ---- Fingerprints of values seen (migrate/cli/seen.c) -------------------------------- */
typedef struct lb__cli_seen {
    uint64_t *slot; /* open addressing; 0 is empty */
    size_t cap, n;
} lb__cli_seen;
uint64_t lb__cli_fingerprint(const char *key, size_t keylen, const char *value, size_t vlen);
/* 1 added, 0 already there, -1 out of memory. */
int lb__cli_seen_add(lb__cli_seen *s, uint64_t fp);
void lb__cli_seen_clear(lb__cli_seen *s);

/* ---- Patterns and watching (glob.c, watch.c) ----------------------------------------- */
/* 1 when `s` matches the Redis glob `pattern` (SCAN MATCH's rules). */
int lb__cli_glob(const char *pattern, size_t plen, const char *s, size_t slen);

#define LB__CLI_WATCH_KEY_MAX 1024 /* longest key a watch judges, bytes */
/* SETNX and GETSET seen by MONITOR: on keys `match` matches, and on others. */
typedef struct lb__cli_watch {
    redisContext *c; /* the MONITOR connection; NULL when refused */
    const char *match;
    int64_t inside, outside;
    char marker[64]; /* the ECHO that ends the watch */
    int marked;      /* it came through */
} lb__cli_watch;
/* 0 watching, 1 MONITOR refused (nothing to watch with), -1 with `err`. */
int lb__cli_watch_start(lb__cli_watch *w, const lb__cli_conn *conn, const char *match,
                        char *err, size_t cap);
/* Counts what the server has sent so far, without waiting; 0, or -1 when the
 * connection failed (what was missed is unknown). */
int lb__cli_watch_drain(lb__cli_watch *w);
/* Waits until every command the server ran before this call has been
 * counted; 0, or -1 (the counts are then incomplete). */
int lb__cli_watch_finish(lb__cli_watch *w, const lb__cli_conn *conn, char *err, size_t cap);
void lb__cli_watch_stop(lb__cli_watch *w);

/* ---- The gate record ({ns}:lb-gate, migrate/cli/gate.c) ---------------------------- */
/* The values a gate judges by (gateconf.c keeps their options, fields and
 * defaults: validity 30000, refresh 1000, window 3600000, stale 30000,
 * observe 5000, all ms). */
enum {
    LB__CLI_VAL_TTL,     /* the fleet's longest lock validity */
    LB__CLI_VAL_REFRESH, /* how often followers re-read the mode */
    LB__CLI_VAL_WINDOW,  /* how long a legacy writer counts after its last sign */
    LB__CLI_VAL_STALE,   /* how long a census entry counts as live unrefreshed */
    LB__CLI_VAL_OBSERVE, /* how long mode set watches before modern */
    LB__CLI_VALS
};
typedef struct lb__cli_gate {
    int found;               /* the record exists */
    char match[LB__CLI_PATTERN_MAX + 1];
    char codecs[512];        /* codec specs, space-separated */
    int have_match, have_codecs;
    int64_t val[LB__CLI_VALS]; /* stored values, ms; -1 unset */
    int64_t since_ms;        /* when the current mode was set (server clock), ms; -1 unknown */
    int64_t legacy_until_ms; /* a legacy writer's lock or census entry lived until, ms; -1 */
    int64_t modern_until_ms; /* a token value or modern client lived until, ms; -1 */
    char matched[LB__CLI_PATTERN_MAX + 1]; /* the last pattern a scan found keys with */
    int64_t matched_ms;      /* when, epoch ms; -1 never */
    char corrupt[32];        /* the first numeric field that did not parse; "" none */
} lb__cli_gate;
/* A record with nothing in it (every field -1 or empty). */
void lb__cli_gate_empty(lb__cli_gate *g);
/* Reads the record (all fields -1/empty when absent); 0, or -1 with `err`. */
int lb__cli_gate_read(redisContext *c, const char *ns, lb__cli_gate *g, char *err, size_t cap);
/* Raises `field` to at_ms (epoch ms) unless it holds a later instant; 0 or -1. */
int lb__cli_gate_note(redisContext *c, const char *ns, const char *field, int64_t at_ms,
                      char *err, size_t cap);
/* Writes the configuration fields `g` has (have_match, have_codecs, values
 * >= 0); 0 or -1. */
int lb__cli_gate_configure(redisContext *c, const char *ns, const lb__cli_gate *g, char *err,
                           size_t cap);
/* Records that a scan of `pattern` found lock keys at at_ms; 0 or -1. */
int lb__cli_gate_matched(redisContext *c, const char *ns, const char *pattern, int64_t at_ms,
                         char *err, size_t cap);
/* The server's clock (TIME) in epoch ms, or -1. */
int64_t lb__cli_server_ms(redisContext *c);
/* How long a stage must last before the next change, ms. */
int64_t lb__cli_gate_stage_ms(const lb__cli_gate *g);

/* ---- The namespaces on a server (nslist.c) ------------------------------------------ */
typedef struct lb__cli_nsmatch {
    char ns[LB_NS_KEY_MAX];
    char match[LB__CLI_PATTERN_MAX + 1]; /* its stored pattern, or * */
} lb__cli_nsmatch;
typedef struct lb__cli_nslist {
    lb__cli_nsmatch *v;
    size_t n, cap;
} lb__cli_nslist;
/* Every namespace with a gate record on the server (every primary of a
 * cluster), with its pattern; 0, or -1 with `err`. */
int lb__cli_nslist_read(const lb__cli_args *a, const lb__cli_topo *t, lb__cli_nslist *l,
                        char *err, size_t cap);
void lb__cli_nslist_free(lb__cli_nslist *l);

/* ---- What a gate judges by (gateconf.c) --------------------------------------------- */
typedef struct lb__cli_gateconf {
    int64_t v[LB__CLI_VALS];       /* the values judged by, ms */
    int given[LB__CLI_VALS];       /* given on the command line */
    int stored[LB__CLI_VALS];      /* stored in the gate record (else the default) */
    int64_t cmdline[LB__CLI_VALS]; /* as given */
} lb__cli_gateconf;
/* "ttl-ms": the value's name for mode config --override; its record field. */
const char *lb__cli_val_name(int i);
const char *lb__cli_val_field(int i);
/* The stored value, else the default, ms. */
int64_t lb__cli_gate_value(const lb__cli_gate *g, int i);
/* Reads the values given among `opts` (before connecting); 0 or -1 (usage). */
int lb__cli_gateconf_given(const lb__cli_args *a, const lb__cli_optdef *opts,
                           lb__cli_gateconf *c);
/* The values judged by: stored or default, or a given stricter one. A given
 * looser one is a usage error naming the override that would allow it. */
int lb__cli_gateconf_resolve(const lb__cli_args *a, const char *ns, const lb__cli_gate *g,
                             lb__cli_gateconf *c);
/* The stored pattern and codecs stand in for those not given; given ones must
 * be the stored ones. 0, or -1 (usage). */
int lb__cli_gateconf_scan(const lb__cli_args *a, const lb__cli_optdef *opts, const char *ns,
                          const lb__cli_gate *g, lb__cli_codecs *cs, lb__cli_scanopts *so);
/* "judged by validity N ms (stored), ... --match 'P', --codec 'C'" for the
 * first `upto` values. */
void lb__cli_gateconf_say(const lb__cli_gateconf *c, const char *match,
                          const lb__cli_codecs *cs, int upto, char *buf, size_t cap);

/* ---- The survey behind status and mode set (survey.c) ----------------------------- */
#define LB__CLI_FORMATS 8 /* lb_format values */
#define LB__CLI_MAX_REASONS 16
#define LB__CLI_EXAMPLES 5 /* keys named behind each blocker */

/* What keys a blocker names: their printable name and remaining validity. */
enum { LB__CLI_EX_LEGACY, LB__CLI_EX_INCR, LB__CLI_EX_TOKEN, LB__CLI_EX_KINDS };
typedef struct lb__cli_examples {
    int n;
    struct {
        char key[72];
        int64_t remaining_ms; /* -1: unknown or none */
    } key[LB__CLI_EXAMPLES];
} lb__cli_examples;

typedef struct lb__cli_survey {
    /* Set by the caller. */
    const lb__cli_codecs *cs;
    int64_t window_ms; /* a legacy writer seen this recently blocks modern, ms */
    int64_t stale_ms;  /* census entries older than this are stale, ms */
    /* Called for each lock key read (not companions); may be NULL. */
    int (*row)(const lb__cli_key *k, const lb_class *cl, void *ud);
    void *row_ud;
    /* Values seen: filled when `track` is set (the observation's first scan);
     * later scans count what is not in it. */
    int track;
    lb__cli_seen seen;
    /* Keys. */
    uint64_t scanned, keys, companions;
    uint64_t per_format[LB__CLI_FORMATS];
    uint64_t ttl_less;       /* keys without a TTL */
    uint64_t legacy_expired; /* TTL-less timestamps past their expiry, still present */
    uint64_t legacy_recent;  /* TTL-less timestamps running or expired within the window */
    uint64_t legacy_live;    /* TTL-less timestamps still running (or not judgeable) */
    uint64_t mono;           /* TTL-less timestamps on a monotonic clock */
    int64_t legacy_until_ms; /* the latest expiry of a TTL-less timestamp seen, epoch ms; -1 */
    int64_t ahead_max_ms;    /* the furthest a timestamp runs ahead of now, ms; 0 none */
    int64_t token_max_pttl_ms; /* the longest token TTL; -1 without tokens */
    lb__cli_examples ex[LB__CLI_EX_KINDS];
    const char *match;       /* the pattern scanned */
    double scan_ms;
    int cluster;             /* 1: the server is a cluster node */
    int servers;             /* servers scanned: 1, or the cluster's primaries */
    /* Namespace. */
    int mode_rc, mode_found;
    lb_mode mode;
    uint64_t census_live[3], census_stale[3], census_legacy_recent, census_invalid;
    int64_t census_legacy_seen_ms; /* the last refresh of a legacy-mode entry, epoch ms; -1 */
    int census_unreadable;
    lb__cli_gate gate;       /* the namespace's gate record */
    char judged_by[400];     /* the values the verdict judged by, for people */
    int gate_unreadable;     /* the record is not a hash */
    int64_t now_ms;          /* the server's clock when the namespace was read, epoch ms */
    /* Observation before setting modern (mode set --observe-ms). */
    int64_t observe_ms;        /* how long it watched, ms; 0: a single scan */
    uint64_t observe_passes;   /* scans after the first */
    uint64_t observe_changed;  /* TTL-less timestamps that appeared or changed meanwhile */
    uint64_t observe_static;   /* TTL-less timestamps seen again unchanged */
    int64_t legacy_calls;      /* SETNX + GETSET calls the server ran meanwhile; -1 unknown */
    int64_t scoped_calls;      /* of those, on the namespace's keys (MONITOR); -1 not scoped */
    int64_t other_calls;       /* on other keys (MONITOR); -1 not scoped */
    int calls_backwards;       /* the server's counts went down (reset, restart, failover) */
} lb__cli_survey;

/* The checks a change of mode passes; each blocker belongs to one. Every one
 * but adjacency can be skipped by name (mode set --override NAME). */
enum {
    LB__CLI_CHECK_ADJACENCY,   /* legacy <-> modern: never skipped */
    LB__CLI_CHECK_CONTROL_KEY, /* the control key or the record is unreadable */
    LB__CLI_CHECK_INCR,        /* INCR counters among the keys */
    LB__CLI_CHECK_LEGACY,      /* a legacy writer seen within the window */
    LB__CLI_CHECK_OBSERVATION, /* the SETNX/GETSET observation could not be made */
    LB__CLI_CHECK_MODERN,      /* token values or modern clients, stepping back to legacy */
    LB__CLI_CHECK_STAGE_TIME,  /* the current stage is younger than its minimum */
    LB__CLI_CHECK_EMPTY_SCAN,  /* the scan matched no key */
    LB__CLI_CHECK_CENSUS,      /* the census is unreadable */
    LB__CLI_CHECK_SERVER_CALLS, /* SETNX/GETSET on the server, keys unknown */
    LB__CLI_CHECKS
};
/* The check's name for --override, or NULL. */
const char *lb__cli_check_name(int check);
/* The check named `name`, or -1 (also for adjacency, which cannot be skipped). */
int lb__cli_check_parse(const char *name);

typedef struct lb__cli_verdict {
    int ready; /* no blocker */
    char judged_by[400]; /* the values judged by (the survey's), for people */
    int n;
    struct {
        int blocker; /* 1: a reason not to go on; 0: worth knowing */
        int check;   /* LB__CLI_CHECK_*, or -1 for a note */
        int skipped; /* a blocker the operator overrode by name */
        char text[480];
    } reason[LB__CLI_MAX_REASONS];
} lb__cli_verdict;

/* Scans and counts (with `o`) on the server of `c`, or on every primary of the
 * cluster `t` describes; 0, or -1 with `err`. */
int lb__cli_survey_keys(lb__cli_survey *s, const lb__cli_topo *t, redisContext *c,
                        const lb__cli_scanopts *o, char *err, size_t cap);
/* Reads the namespace's mode, census and gate record; 0, or -1 with `err`. */
int lb__cli_survey_ns(lb__cli_survey *s, redisContext *c, const char *ns, char *err,
                      size_t cap);
/* Writes what this survey saw of legacy and modern writers into the
 * namespace's gate record, so that evidence outlives sweep and pruning. */
int lb__cli_survey_remember(const lb__cli_survey *s, redisContext *c, const char *ns,
                            char *err, size_t cap);
void lb__cli_survey_clear(lb__cli_survey *s);
/* 1 when the key is a legacy writer's by its look: a TTL-less string that is
 * a timestamp, or that the codecs read differently or not at all. */
int lb__cli_legacy_written(const lb__cli_key *k, const lb_class *cl);
/* Reads --match (default *, checked) and --count into `o`; 0 or -1 (usage). */
int lb__cli_scanopts_read(lb__cli_scanopts *o, const lb__cli_args *a,
                          const lb__cli_optdef *defs);
/* Reads the required --ns and checks it names valid companion keys; 0 or -1.
 * Without --ns, explains what a namespace is and lists the namespaces found on
 * the server (`c` may be NULL: no list). */
int lb__cli_ns_read(const lb__cli_args *a, const lb__cli_optdef *defs, const char **ns);
/* The server's count of SETNX and GETSET calls so far (INFO commandstats,
 * cmdstats.c), or -1 if it cannot be read: only the legacy protocol sends them. */
int64_t lb__cli_legacy_calls(redisContext *c);
/* The server's count of every command so far but INFO (INFO commandstats: a
 * script's own commands count beside its EVALSHA), or -1 if it cannot be read
 * (refused by an ACL, or a reply that does not parse). */
int64_t lb__cli_server_calls(redisContext *c);

typedef struct lb__cli_gateopts {
    int observed;                /* 1: the observation was made (mode set) */
    int override[LB__CLI_CHECKS]; /* checks skipped by name */
} lb__cli_gateopts;
/* Whether moving from mode `from` to `to` is safe on this evidence, and why:
 * the one decision behind both `status` and `mode set`. */
void lb__cli_survey_verdict(const lb__cli_survey *s, lb_mode from, lb_mode to,
                            const lb__cli_gateopts *o, lb__cli_verdict *v);

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
