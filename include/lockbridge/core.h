/* lockbridge core: clocks, allocators, commands, step machines and the sync driver.
 * Every lock operation is a step machine that performs no I/O; drivers do the I/O. */
#ifndef LOCKBRIDGE_CORE_H
#define LOCKBRIDGE_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lockbridge/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keys are bytes and a length everywhere, so that any Redis key (NUL bytes
 * included) can be named. For a NUL-terminated key, LB_KEY gives both
 * arguments: lb_lock_new(&l, LB_KEY("orders:42"), NULL). `s` is evaluated
 * twice; it works wherever a call takes a key (or a namespace) and its length. */
#define LB_KEY(s) (s), strlen(s)

/* A token is 128 bits from the OS random source, written as 32 hex digits. */
#define LB_TOKEN_LEN 32

struct redisReply;
struct redisContext;

/* ---- Time -------------------------------------------------------------------
 * Protocol code never reads a clock: the driver samples one and passes the
 * instant in. Both readings include the clock's offset. */
typedef struct lb_now {
    int64_t wall_us; /* microseconds since the Unix epoch */
    int64_t mono_ns; /* nanoseconds of the host's monotonic clock */
} lb_now;

typedef struct lb_clock {
    int64_t (*wall_us)(void *ud); /* NULL: CLOCK_REALTIME */
    int64_t (*mono_ns)(void *ud); /* NULL: CLOCK_MONOTONIC */
    void *ud;
    int64_t offset_ms; /* added to both readings: a skewed host, in milliseconds */
    /* Every sleep of a blocking acquire (lb_lock_acquire[_wait],
     * lb_legacy_acquire, lb_mlock_acquire[_wait]) goes through this hook when
     * set: sleep up to `ms` milliseconds (it may return early, as on a
     * condition variable's signal) and return 0 to go on waiting, nonzero to
     * cancel the wait, which then returns LB_ECANCELED holding nothing. Called
     * with ms == 0 it only asks: a wait woken through an lb_waiter blocks on
     * the waiter and asks every LB_CANCEL_SLICE_MS instead of sleeping here.
     * Called from the waiting thread only. A hook that returns 0 early is
     * called again for the rest of the sleep (one that never sleeps makes the
     * wait spin). NULL: plain sleeps, no cancel. */
    int (*sleep_ms)(void *ud, int64_t ms);
} lb_clock;

/* Longest a wait on an lb_waiter goes without asking lb_clock.sleep_ms, in
 * milliseconds: how late a cancel is seen there, at worst. */
#define LB_CANCEL_SLICE_MS 10

/* Reads `clock` (NULL: the system clocks with no offset). */
lb_now lb_clock_now(const lb_clock *clock);

/* ---- Memory -------------------------------------------------------------------
 * Every handle takes an optional allocator in its options; NULL means malloc/free. */
typedef struct lb_allocator {
    void *(*malloc_fn)(void *ud, size_t size);
    void (*free_fn)(void *ud, void *ptr);
    void *ud;
} lb_allocator;

/* ---- Commands and step machines -------------------------------------------- */
#define LB_CMD_MAX_ARGS 12

/* One Redis command as an argument vector; the strings belong to the machine
 * that emitted it and stay valid until its next step. */
typedef struct lb_cmd {
    int argc;
    const char *argv[LB_CMD_MAX_ARGS];
    size_t argvlen[LB_CMD_MAX_ARGS];
} lb_cmd;

/* A Lua script known by body and SHA1, called with EVALSHA and re-sent with
 * EVAL when the server answers NOSCRIPT. */
typedef struct lb_script {
    const char *name;
    const char *body;
    const char *sha1; /* 40 lowercase hex digits */
} lb_script;

typedef struct lb_machine lb_machine;

/* lb_machine_step returns LB_STEP_SEND when lb_machine_command() holds the next
 * command to send, or the operation's final status (LB_OK or a negative code).
 * Start an operation with reply == NULL; then feed each reply in turn. A
 * transport failure is fed as reply == NULL after the start: the machine ends
 * with LB_EIO and its state says what is known. */
#define LB_STEP_SEND 1

int lb_machine_step(lb_machine *m, const struct redisReply *reply, const lb_now *now);
const lb_cmd *lb_machine_command(const lb_machine *m);
/* Detail of the last failure, or "" (never NULL). */
const char *lb_machine_errstr(const lb_machine *m);

/* The operations a lock handle's machine runs (lb_lock_machine,
 * lb_legacy_machine, lb_mlock_machine): each kind accepts those it has and
 * returns NULL for the others. `ms` is the new TTL for LB_OP_EXTEND, the TTL
 * added for LB_OP_EXTEND_ADD, and ignored otherwise. */
typedef enum lb_op {
    LB_OP_TRY_ACQUIRE = 1, /* one attempt (every kind) */
    LB_OP_RELEASE,         /* every kind */
    LB_OP_EXTEND,          /* every kind */
    LB_OP_EXTEND_ADD,      /* the token lock only */
    LB_OP_CHECK,           /* the token lock only: is it still ours, for how long */
    LB_OP_REFRESH          /* the mode-following lock only: re-read the control key */
} lb_op;
/* Commands this machine has emitted since its operation started. */
unsigned lb_machine_commands(const lb_machine *m);

/* ---- Targets ------------------------------------------------------------------
 * A target says where a lock's commands go: one blocking hiredis connection, a
 * Redis Cluster (each command to the primary that owns its key's slot,
 * following MOVED and ASK; see cluster.h) or the primary a set of sentinels
 * names (see sentinel.h). It is a small value that borrows its handle, made
 * where it is used: lb_lock_acquire(l, lb_on_conn(c), 1000). Every blocking
 * operation of every lock kind takes one. */
struct lb_cluster;
struct lb_sentinel;

typedef enum lb_target_kind {
    LB_TARGET_NONE = 0,
    LB_TARGET_CONN,    /* handle: a struct redisContext * */
    LB_TARGET_CLUSTER, /* handle: an lb_cluster * */
    LB_TARGET_SENTINEL /* handle: an lb_sentinel * */
} lb_target_kind;

typedef struct lb_target {
    lb_target_kind kind;
    void *handle;
} lb_target;

/* A target on `c`, `cl` or `s` (NULL gives an LB_TARGET_NONE target, which
 * every operation refuses with LB_EINVAL). */
lb_target lb_on_conn(struct redisContext *c);
lb_target lb_on_cluster(struct lb_cluster *cl);
lb_target lb_on_sentinel(struct lb_sentinel *s);

/* Runs `m` to completion on `t`, sampling `clock` before every step. Before an
 * operation whose machine needs scripts, the server its first command goes to
 * is checked once for running them. Returns the machine's final status; LB_EIO
 * if a connection failed (lb_machine_errstr says what is known and where). */
int lb_target_run(lb_target t, lb_machine *m, const lb_clock *clock);

/* ---- Asynchronous driver ----------------------------------------------------
 * Runs `m` on a redisAsyncContext attached to any hiredis event-loop adapter:
 * each reply is fed to the machine from hiredis's callback, with `clock`
 * sampled then, and the next command sent at once. `done` is called exactly
 * once, with the final status (LB_EIO if the context disconnects or is freed
 * meanwhile), possibly before lb_async_run returns when the operation ends
 * without sending anything; it may free the handle that owns `m`. Returns LB_OK
 * when `done` will be (or was) called; LB_EINVAL or LB_ESTATE (this machine is
 * already in flight) without calling it. One operation per machine at a time;
 * any number of machines per context. */
struct redisAsyncContext;
typedef void (*lb_done_fn)(lb_machine *m, int status, void *ud);
int lb_async_run(struct redisAsyncContext *ac, lb_machine *m, const lb_clock *clock,
                 lb_done_fn done, void *ud);

/* ---- Companion keys ----------------------------------------------------------
 * Keys that travel with a lock (fencing counter, channel, census, mode) share its
 * cluster hash slot: a key with a hash tag, "{user}:1", becomes
 * "{user}:1:suffix", otherwise the key is wrapped: "{key}:suffix". Writes at most
 * `cap` bytes including a NUL; returns the full length, or LB_EINVAL. */
int lb_companion_key(const char *key, size_t keylen, const char *suffix, char *out,
                     size_t cap);

/* The companions lockbridge keeps as keys, and the Redis type each one has. */
typedef enum lb_companion {
    LB_COMPANION_NONE = 0,
    LB_COMPANION_FENCE,  /* "fence": the fencing counter, a string integer */
    LB_COMPANION_QUEUE,  /* "queue": the fair waiters' queue, a zset */
    LB_COMPANION_FAIR,   /* "fair": the fair lock's state, a hash */
    LB_COMPANION_MODE,   /* "lb-mode": a namespace's control key, a string */
    LB_COMPANION_CENSUS, /* "lb-census": a namespace's census, a hash */
    LB_COMPANION_GATE,   /* "lb-gate": a namespace's gate record, a hash */
    LB_COMPANION_BATON,  /* "baton": the fair lock's baton list, a list */
    LB_COMPANION_BWAIT,  /* "bwait": the mark of the fair waiter that blocked last
                          * on the baton, a string (its token) */
    LB_COMPANION_OUTSIDER /* "outsider": when a client outside the fair queue
                           * was last seen (server ms), a string with a TTL */
} lb_companion;

/* Which companion name `key` is: the exact inverse of lb_companion_key, so
 * "{id}:lock:fence" is the fence of "{id}:lock" and "{k}:fence" that of "k" or
 * "{k}". A name alone cannot tell a companion from a lock key that happens to
 * be spelled the same ("{user}:queue"); *type gets the Redis type lockbridge
 * keeps there ("string", "zset", "hash"), for the caller to compare with the
 * key's. LB_COMPANION_NONE (and *type "") when no companion has this name. */
lb_companion lb_companion_of(const char *key, size_t keylen, const char **type);

/* Why no lock may be named `key`: NULL when any lock kind may take it, else a
 * message (static text). Every name lb_companion_of recognises is refused:
 * a lock there would share its key with another lock's companion (a fair
 * wait writes its mark at "{k}:bwait"), and every constructor (lb_lock_new,
 * lb_legacy_lock_new, lb_mlock_new, lb_quorum_new) returns LB_EINVAL for it. */
const char *lb_lock_name_refused(const char *key, size_t keylen);

#ifdef __cplusplus
}
#endif
#endif
