/* `lockbridge race` internals shared by its files: schedules and catalogue files
 * (race_sched.c), the RESP proxy with its wire checks (race_proxy.c), processes
 * (race_proc.c) and the command with its reports (race.c). */
#ifndef LOCKBRIDGE_CLI_RACE_H
#define LOCKBRIDGE_CLI_RACE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tool/common/server.h"

/* ---- Schedules ------------------------------------------------------------------ */
#define LB__RACE_MAX_CLIENTS 8  /* client names A..H */
#define LB__RACE_MAX_TOKENS 64
#define LB__RACE_SCHED_MAX 1024 /* bytes of one schedule's text */
#define LB__RACE_NAME_MAX 128

typedef enum lb__race_tok_kind {
    LB__RACE_STEP,   /* A or A:CMD */
    LB__RACE_PAUSE,  /* +N (ms) or +NT (N times the lock's validity) */
    LB__RACE_CRASH,  /* A! */
    LB__RACE_LIVE,   /* A? */
    LB__RACE_FINISH, /* A. */
    LB__RACE_SKEW    /* A~N: parsed so that it can be refused by name */
} lb__race_tok_kind;

typedef struct lb__race_tok {
    lb__race_tok_kind kind;
    int client;     /* 0 = A */
    char cmd[32];   /* STEP: the command expected ("" any, "-" none) */
    int64_t ms;     /* PAUSE, SKEW */
    int64_t per_mille_t; /* PAUSE given as +NT: N in thousandths of the validity; 0: ms */
} lb__race_tok;

typedef struct lb__race_sched {
    int n;
    lb__race_tok tok[LB__RACE_MAX_TOKENS];
    int clients; /* one more than the highest client named */
    int scaled;  /* has a +NT pause: needs the lock's validity */
} lb__race_sched;

/* Parses a schedule in the catalogue's grammar. 0, or -1 with the reason. */
int lb__race_parse(const char *text, lb__race_sched *out, char *why, size_t cap);

/* Expected outcome of a catalogue row for one locker. */
typedef enum lb__race_expect {
    LB__RACE_EXPECT_PASS = 0,
    LB__RACE_EXPECT_CAUGHT, /* any violation, or the one named in `kind` */
    LB__RACE_EXPECT_NA      /* the row does not apply to that locker: skipped */
} lb__race_expect;

#define LB__RACE_MAX_EXPECT 16
#define LB__RACE_MAX_VARIANTS 8

/* One catalogue file: a race, its schedule (and per-locker variants), and what
 * each known locker is expected to do in it. */
typedef struct lb__race_row {
    char name[LB__RACE_NAME_MAX]; /* the file's name without .race */
    char path[512];               /* the file, for file:line in errors ("" for --schedule) */
    int line;                     /* the schedule's line in the file */
    char title[256];              /* "# race: ..." */
    char schedule[LB__RACE_SCHED_MAX];
    int nvariants;
    struct {
        char locker[64];
        char schedule[LB__RACE_SCHED_MAX];
        int line;
    } variant[LB__RACE_MAX_VARIANTS];
    int nexpect;
    struct {
        char locker[64];
        lb__race_expect expect;
        char kind[32]; /* caught:KIND; "" for any */
    } expect[LB__RACE_MAX_EXPECT];
} lb__race_row;

/* Reads one catalogue file. 0, or -1 with the reason. */
int lb__race_row_read(const char *path, lb__race_row *row, char *why, size_t cap);
/* The schedule the row gives `locker` (its variant, else the common one). */
const char *lb__race_row_schedule(const lb__race_row *row, const char *locker);
/* "file:line" of that schedule, or the row's name when it has no file. */
void lb__race_row_where(const lb__race_row *row, const char *locker, char *out, size_t cap);
/* What the row expects of `locker`: its own entry, else the row's "*" entry,
 * else pass. */
lb__race_expect lb__race_row_expect(const lb__race_row *row, const char *locker,
                                    const char **kind);

/* ---- The proxy and its checks -------------------------------------------------- */
typedef struct lb__race_proxy lb__race_proxy;

typedef struct lb__race_config {
    const lb__cli_conn *upstream; /* the Redis server every client is proxied to */
    const char *key;              /* the lock key */
    const char *counter_key;      /* the critical section's counter; NULL: none */
    int64_t step_timeout_ms;      /* a client that sends nothing this long: not followed */
    int64_t settle_ms;            /* quiet this long: the client's step has ended */
    int64_t ttl_ms;               /* a holder counts as holding this long (0: till release) */
    int64_t client_ttl_ms[LB__RACE_MAX_CLIENTS]; /* the same for one client; 0: ttl_ms */
    int port_lo, port_hi;         /* the proxy's ports come from here (0: any free port) */
    int64_t t_ms;                 /* the validity T of +NT pauses, ms */
    int live_steps;               /* A? must acquire within this many lock-key commands */
    int kill_crashed;             /* A!: also kill A's process */
    /* The search's judge: a hold counts from when the acquiring command was
     * sent, and A? fails only when no other client may still hold. */
    int search;
    int nclients;
} lb__race_config;

/* Outcome of one schedule. */
typedef enum lb__race_verdict {
    LB__RACE_PASSED = 0, /* followed to its end, no violation seen */
    LB__RACE_CAUGHT,     /* a violation seen on the wire */
    LB__RACE_NOT_FOLLOWED, /* a client did not do what the schedule says */
    LB__RACE_ERROR       /* the run itself failed (Redis, a socket) */
} lb__race_verdict;

/* The expiry a lock's value states (race_value.c): 0 with *out, or -1 when
 * the value states none (a token, a uuid, digits inside a string). */
int lb__race_value_expiry(const char *v, size_t n, double *out);

/* Opens one loopback listening port per client (ports[i] for client 'A' + i).
 * NULL with `err`. */
lb__race_proxy *lb__race_proxy_new(const lb__race_config *cfg, int *ports, char *err,
                                   size_t cap);
void lb__race_proxy_free(lb__race_proxy *p);
/* Client i's process (for `A!` with kill and for liveness of the process), and
 * the file its stderr goes to (NULL: none), read when it exits. */
void lb__race_proxy_set_pid(lb__race_proxy *p, int client, pid_t pid, const char *errpath);
/* Forgets every connection and every client's state: a new schedule. */
void lb__race_proxy_reset(lb__race_proxy *p);
/* Runs a schedule against the connected clients. The trace and detail are kept
 * until the next run; `kind` names the violation ("" when none). */
lb__race_verdict lb__race_proxy_run(lb__race_proxy *p, const lb__race_sched *s,
                                    int64_t start_timeout_ms);
const char *lb__race_proxy_trace(const lb__race_proxy *p);
const char *lb__race_proxy_detail(const lb__race_proxy *p);
const char *lb__race_proxy_kind(const lb__race_proxy *p);
/* `race record`: lets client x's lock-key commands through as they come, the
 * others held, and writes the first `steps` of them as schedule tokens
 * ("A:SETNX A:GET A:DEL"). The number recorded (fewer when the client went
 * quiet), or -1 when it sent none (the detail says why) or the run failed. */
int lb__race_proxy_record(lb__race_proxy *p, int x, int steps, int64_t start_timeout_ms,
                          char *out, size_t cap);
/* Tokens of the schedule that were carried out. */
int lb__race_proxy_followed(const lb__race_proxy *p);
/* The name of the last lock-key command token i of the schedule let through
 * ("" when none): what a bare step `A` turned out to be. */
const char *lb__race_proxy_named(const lb__race_proxy *p, int i);
/* Critical sections (counter GET to SET) the schedule saw. */
int lb__race_proxy_sections(const lb__race_proxy *p);

/* The signal (SIGTERM, SIGINT) that asked the run to stop; 0 while none has.
 * The proxy's loop checks it at least every 20 ms and ends the schedule. */
extern volatile sig_atomic_t lb__race_stop_signal;

/* ---- Processes ------------------------------------------------------------------- */
/* Runs `cmdline` with every "{port}" replaced by `port` under /bin/sh -c, in a
 * process group of its own, stdout discarded and stderr to `errpath` (NULL:
 * discarded). The pid, or -1. */
pid_t lb__race_spawn(const char *cmdline, int port, const char *errpath);
/* The last lines of a file (at most `cap` bytes, newlines shown as " | "). */
void lb__race_tail(const char *path, char *out, size_t cap);
/* Kills the process group and reaps it. */
void lb__race_kill(pid_t pid);

typedef struct lb__race_server {
    pid_t pid;
    int port;
    char dir[256];
} lb__race_server;
/* Starts redis-server ($LB_REDIS_SERVER, else from PATH) on a free loopback port,
 * one of lo..hi when lo > 0. 0, or -1 with `err`. */
int lb__race_server_start(lb__race_server *s, int lo, int hi, char *err, size_t cap);
void lb__race_server_stop(lb__race_server *s);

#endif
