/* Internal definitions shared by core/, legacy/ and later modules: the step
 * machine's layout, allocation through the handle's allocator, reply helpers. */
#ifndef LOCKBRIDGE_CORE_INTERNAL_H
#define LOCKBRIDGE_CORE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include "core/escape.h"
#include "lockbridge/core.h"

struct redisReply;

#define LB__ERRSTR_CAP 160

struct redisContext;
/* Where a driver keeps, per connection, that the server ran the script check
 * (see lb__conn_mark): `mark` returns the record of the connection the
 * machine's command goes to (answered 0, no I/O), or of the one that gave the
 * last reply (answered 1); NULL: unknown, or the record cannot be kept there.
 * A driver's marker lives as long as the operation it runs. */
typedef struct lb__marker {
    void **(*mark)(const struct lb__marker *mk, const lb_machine *m, int answered);
    void *h;
} lb__marker;

/* The machine a protocol embeds in its handle. `step` is the protocol's own
 * transition function; lb_machine_step wraps it with the script fallback. */
struct lb_machine {
    int (*step)(lb_machine *m, const struct redisReply *reply, const lb_now *now);
    lb_cmd cmd;
    const lb_script *script; /* set when cmd is an EVALSHA of this script */
    uint64_t total;          /* commands emitted by every operation of the handle
                              * (zeroed with the handle), whichever driver ran it */
    unsigned commands;       /* commands emitted in this operation */
    /* Flags kept small: a machine is embedded in every lock handle. */
    unsigned char running;   /* an operation has started and not ended */
    /* Set by an acquire whose lock only a script can release: before the
     * operation's first command the runtime checks that the server runs
     * scripts, once per connection (see lb__machine_attach). */
    unsigned char needs_scripts;
    unsigned char probing;   /* the check in flight (1 its EVALSHA, 2 its EVAL),
                              * ahead of the operation's first command in cmd */
    const lb__marker *marker; /* set by the driver running the operation */
    /* Set while the asynchronous driver runs this machine. */
    struct redisAsyncContext *ac;
    const lb_clock *clock;
    lb_done_fn done;
    void *done_ud;
    char errstr[LB__ERRSTR_CAP];
};

/* Prepares `m` for a new operation driven by `step`. */
void lb__machine_begin(lb_machine *m,
                       int (*step)(lb_machine *, const struct redisReply *, const lb_now *));
/* Whether the asynchronous driver is running `m`: a new operation must not
 * start on it then, or the pending reply would be fed to the wrong step. */
int lb__machine_in_flight(const lb_machine *m);
/* Command building: reset, then append arguments. */
void lb__cmd_reset(lb_cmd *cmd);
void lb__cmd_arg(lb_cmd *cmd, const char *s, size_t len);
void lb__cmd_argz(lb_cmd *cmd, const char *s);
/* Starts an EVALSHA of `script` with `numkeys` (as a decimal string); keys and
 * arguments are appended after it with lb__cmd_arg. */
void lb__cmd_script(lb_machine *m, const lb_script *script, const char *numkeys);
/* A driver about to run `m`'s operation (after lb__machine_begin, before the
 * first lb_machine_step) says how to find the connection's script record.
 * Without it (a machine stepped by the application's own loop) no check is
 * made. */
void lb__machine_attach(lb_machine *m, const lb__marker *marker);
/* The script record of a hiredis connection: a slot in its reader, which
 * hiredis creates anew with each connection (so a reconnection is checked
 * again). NULL when the application uses that slot itself: every operation
 * is then checked. */
void **lb__conn_mark(struct redisContext *c);
/* What a target's run loop sends through (core/target.c): the drivers. */
struct lb_cluster;
struct lb_sentinel;
struct redisReply *lb__cluster_send(struct lb_cluster *cl, const lb_cmd *cmd,
                                    const lb_cmd *route_by);
struct redisReply *lb__sentinel_send(struct lb_sentinel *s, const lb_cmd *cmd);
/* For script records: the connection `route_by` would go to now, without I/O
 * (answered 0), or the one that gave the last reply (answered 1); NULL if
 * none. */
struct redisContext *lb__cluster_conn(struct lb_cluster *cl, const lb_cmd *route_by,
                                      int answered);
struct redisContext *lb__sentinel_conn(struct lb_sentinel *s, int answered);
/* A handle of one's own on what `src` reaches (the same seeds or sentinels,
 * primary name, credentials and options), for another thread: its connect,
 * command and retry times no longer than `timeout_ms`, ms. *out reset. */
int lb__cluster_copy(const struct lb_cluster *src, int64_t timeout_ms, struct lb_cluster **out);
int lb__sentinel_copy(const struct lb_sentinel *src, int64_t timeout_ms,
                      struct lb_sentinel **out);

extern const lb_script lb__script_probe;
/* Records a failure detail in m->errstr and returns `status`. */
int lb__fail(lb_machine *m, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same for a refusal made before any machine runs: writes the detail into
 * a handle's text of LB__ERRSTR_CAP bytes (never left from an earlier call)
 * and returns `status`. */
int lb__refuse(char *errstr, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The texts every lock kind gives for the same refusals. */
#define LB__NO_TARGET "invalid argument: the target has no connection or handle"
#define LB__IN_FLIGHT "an asynchronous operation is running on this handle"
#define LB__NEGATIVE_WAIT "invalid argument: wait_ms is negative"

/* Classifies an error reply: LB_EWRONGTYPE for WRONGTYPE, LB_EREDIS otherwise,
 * with the server's message copied (bounded, non-printable bytes escaped). */
int lb__reply_error(lb_machine *m, const struct redisReply *r, const char *during);

/* Allocation through an optional allocator. */
void *lb__alloc(const lb_allocator *a, size_t size);
void lb__free(const lb_allocator *a, void *p);

/* Overflow-checked int64 arithmetic: return 0 on success, -1 on overflow. */
int lb__add64(int64_t a, int64_t b, int64_t *out);
int lb__mul64(int64_t a, int64_t b, int64_t *out);
int lb__sub64(int64_t a, int64_t b, int64_t *out);
/* The end of a lease of `ms` milliseconds that began at `start_ns` (monotonic
 * ns). A clock at the end of its range cannot hold it: the lease then counts
 * as lapsed at once (start_ns), never as endless. */
int64_t lb__lease_end_ns(int64_t start_ns, int64_t ms);

/* Real time for blocking drivers (core/realtime.c): monotonic milliseconds, a
 * sleep restarted after signals, and a deadline `wait_ms` from now that
 * saturates at INT64_MAX. */
int64_t lb__mono_ms(void);
void lb__sleep_ms(int64_t ms);
int64_t lb__deadline_ms(int64_t wait_ms);

/* A fresh 128-bit token from the OS random source, as 32 hex digits and a NUL. */
#define LB__TOKEN_CAP 33
int lb__token(char out[LB__TOKEN_CAP]);

/* Seeds for jitter: fresh bits from the OS random source, falling back to the clock. */
uint64_t lb__random_seed(void);
uint64_t lb__xorshift(uint64_t *state);

/* ---- Connections (core/connect.c) ------------------------------------------- */
struct timeval;
typedef struct lb__conn_opts {
    const char *host;
    int port;
    int64_t connect_timeout_ms; /* to connect, ms */
    int64_t command_timeout_ms; /* each command afterwards, ms */
    const char *username;       /* AUTH: NULL with a password alone */
    const char *password;       /* NULL: no AUTH */
    int db;                     /* SELECT when > 0 */
    const char *socket;         /* a Unix socket path, used instead of host and port */
} lb__conn_opts;
/* A blocking connection with its command timeout set, AUTH and SELECT done; or
 * NULL with *status (may be NULL) LB_EIO or LB_EREDIS and `err` saying which
 * step failed on which address (printable: the address and the server's words
 * are escaped). Used by the library's own handles and by the tool. */
struct redisContext *lb__connect(const lb__conn_opts *o, int *status, char *err, size_t cap);
struct timeval lb__timeval_ms(int64_t ms);

/* ---- Waiting ------------------------------------------------------------------
 * The back-off of every blocking acquire (core/backoff.c): uniform in
 * [min_ms, cap_ms], cap_ms doubling after each sleep up to max_ms, and never
 * longer than bound_ms + 1 when bound_ms >= 0 (the holder's remaining
 * validity: an expiry is seen 1 ms after it, sooner than min_ms if need be). */
typedef struct lb__backoff {
    int64_t min_ms, max_ms, cap_ms;
    uint64_t *rng;
} lb__backoff;
void lb__backoff_init(lb__backoff *b, int64_t min_ms, int64_t max_ms, uint64_t *rng);
int64_t lb__backoff_next(lb__backoff *b, int64_t bound_ms);
/* The same, this draw's upper end held to ceiling_ms (never below min_ms):
 * the doubling cap goes on growing beneath it. */
int64_t lb__backoff_next_under(lb__backoff *b, int64_t bound_ms, int64_t ceiling_ms);
/* The ceiling of a polling waiter's sleeps from how far into its hold the
 * holder was when refused (see core/backoff.c): ttl_ms our validity, left_ms
 * what the holder's had left (-1 unknown). */
#define LB__CHURN_FACTOR 20   /* a sleep is at most this many times the holder's age */
#define LB__CHURN_FLOOR_MS 20 /* but that ceiling is never under this, ms */
int64_t lb__churn_ceiling_ms(const lb__backoff *b, int64_t ttl_ms, int64_t left_ms);

#define LB__INBOX_PREFIX_MAX 64 /* bytes */
/* A waiter lets go of a lock's release channel for LB__CHURN_PAUSE_MS when
 * two releases come less than LB__CHURN_GAP_MS apart (core/waiter.c). */
#define LB__CHURN_GAP_MS 20
#define LB__CHURN_PAUSE_MS 1000
/* A fair hand-off message as a release publishes it (core/waiter.c): the
 * token, then its queue place and fencing number (-1 when absent). Whether it
 * parsed; the token is the message's first LB_TOKEN_LEN bytes. */
int lb__handoff_parse(const char *s, size_t len, int64_t *place, int64_t *fence);
/* The waiter (core/waiter.c) as the blocking acquires use it. A thread
 * watches a channel for the length of one wait; a fair wait registers its
 * token in `rec` so that a hand-off message reaches it alone. */
struct lb_waiter;
typedef struct lb__wchan lb__wchan;
typedef struct lb__wrec {
    struct lb__wrec *next;
    char token[LB__TOKEN_CAP]; /* "" when not fair */
    int handed;                /* set by the waiter's thread under its lock */
    int64_t place, fence;      /* from the message; -1 when it had none */
    int64_t got_place, got_fence; /* the wait's own: what lb__waiter_wait took */
} lb__wrec;
/* READY: subscribed; QUIET: subscribed since the peek, and nothing the wait
 * could have missed was read since; PENDING: SUBSCRIBE on its way; DOWN. */
enum { LB__WATCH_READY, LB__WATCH_QUIET, LB__WATCH_PENDING, LB__WATCH_DOWN };
/* EVENT: a subscription confirmed (a release may have passed unheard);
 * RELEASE: a release message (and maybe a confirmation) read. */
enum { LB__WAKE_TIMEOUT, LB__WAKE_EVENT, LB__WAKE_RELEASE, LB__WAKE_HANDED };
/* What a channel stood at before an attempt. */
typedef struct lb__wpeek {
    int on;             /* subscribed */
    uint64_t gen;       /* event count */
    uint64_t unclaimed; /* hand-offs that named no watching wait */
    uint64_t inbox_unclaimed; /* the same, read on the waiter's inbox */
} lb__wpeek;
void lb__waiter_peek(struct lb_waiter *w, const char *ch, size_t len, lb__wpeek *p);
/* NULL when out of memory (the wait then backs off without waking). *gen is
 * the channel's event count; *ready one of LB__WATCH_*, judged against
 * `since` (may be NULL). */
lb__wchan *lb__waiter_watch(struct lb_waiter *w, const char *ch, size_t len, lb__wrec *rec,
                            const lb__wpeek *since, uint64_t *gen, int *ready);
/* Sleeps until the event count differs from *gen (updated; not when deaf),
 * `rec` is handed the lock, or `ms` pass. Returns one of LB__WAKE_*; on
 * LB__WAKE_HANDED the hand-off is taken: moved to rec->got_*, so that the
 * next one wakes the wait again. */
int lb__waiter_wait(struct lb_waiter *w, lb__wchan *c, lb__wrec *rec, uint64_t *gen, int64_t ms,
                    int deaf);
uint64_t lb__waiter_gen(struct lb_waiter *w, lb__wchan *c);
/* Whether the channel's subscription is confirmed: no message can pass
 * unheard until an event (a drop is followed by one when it is back). */
int lb__waiter_listening(struct lb_waiter *w, lb__wchan *c);
void lb__waiter_unwatch(struct lb_waiter *w, lb__wchan *c, lb__wrec *rec);
/* A blocking acquire through a waiter (core/acquire_loop.c): the caller sets
 * everything above `ch`; lb__wait_run peeks, attempts, watches the channel
 * when busy, and sleeps between attempts until one ends the wait. */
typedef struct lb__wait {
    struct lb_waiter *w;    /* NULL: back-off only */
    const char *channel;    /* the lock's release channel */
    size_t channellen;
    lb__wrec *rec;          /* a fair wait's token record, or NULL */
    int64_t deadline;       /* monotonic ms (lb__deadline_ms) */
    int deaf_after_loss;    /* sleep a step deaf after losing a race to a release */
    /* Its sleep_ms hook carries every sleep, so that the application can end
     * the wait from another thread (LB_ECANCELED, nothing held); NULL: none. */
    const lb_clock *clock;
    void *ud;
    int (*attempt)(void *ud);                   /* a status; LB_EBUSY: wait on */
    int64_t (*sleep_ms)(void *ud, int listening); /* the next sleep, ms */
    int (*out_of_time)(void *ud);               /* the status at the deadline */
    int (*handed)(void *ud); /* `rec` was handed the lock: a status, or LB_EBUSY to attempt */
    lb__wchan *ch;           /* the engine's from here */
    uint64_t gen;
    lb__wpeek before;
} lb__wait;
int lb__wait_run(lb__wait *s);

/* The waiter's inbox channel, where fair releases hand it locks; the first
 * call subscribes it. Its length, and *name, once the subscription is
 * confirmed; 0 and NULL until then (the hand-off then comes on the lock's
 * channel). The name lives as long as the waiter. */
size_t lb__waiter_inbox(struct lb_waiter *w, const char **name);
/* For a wait that is never handed the lock (`handed` of lb__wait). */
int lb__no_hand_off(void *ud);
/* The blocking acquire of a lock kind without hand-offs (core/acquire_polling.c): the
 * caller sets the fields above `foreign` and the back-off; w may be NULL
 * (back-off only). Returns the attempt's status, LB_ETIMEDOUT, or LB_EFOREIGN
 * when the last attempt met a value left alone. */
typedef struct lb__poll {
    void *lock;
    lb_target t;
    int (*try_once)(void *lock, lb_target t);  /* one attempt: a status */
    int64_t (*holder_left_ms)(void *lock);     /* the holder's validity left, ms; -1 */
    int64_t ttl_ms;                            /* our validity, ms: sleeps follow the
                                                * lock's turn-over (0: they do not) */
    const lb_clock *clock;                     /* whose hook the sleeps go through */
    int foreign_fails;                         /* 1: a foreign value ends the wait */
    lb__backoff backoff;
    int foreign;                               /* the last attempt met a foreign value */
} lb__poll;
int lb__poll_run(lb__poll *p, struct lb_waiter *w, const char *channel, size_t channellen,
                 int64_t wait_ms);

#endif
