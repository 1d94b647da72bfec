/* Internal definitions shared by core/, legacy/ and later modules: the step
 * machine's layout, allocation through the handle's allocator, reply helpers. */
#ifndef LOCKBRIDGE_CORE_INTERNAL_H
#define LOCKBRIDGE_CORE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "lockbridge/core.h"

struct redisReply;

#define LB__ERRSTR_CAP 160

/* The machine a protocol embeds in its handle. `step` is the protocol's own
 * transition function; lb_machine_step wraps it with the script fallback. */
struct lb_machine {
    int (*step)(lb_machine *m, const struct redisReply *reply, const lb_now *now);
    lb_cmd cmd;
    const lb_script *script; /* set when cmd is an EVALSHA of this script */
    unsigned commands;       /* commands emitted in this operation */
    int running;             /* an operation has started and not ended */
    /* Set by an acquire whose lock only a script can release: the drivers
     * first check the server runs scripts (once per handle, scripts_seen). */
    int needs_scripts;
    int scripts_seen;
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
/* The probe the drivers send before an operation with needs_scripts set:
 * lb__probe_due tells whether one is needed; lb__probe_cmd fills argv (3
 * arguments) for its first (EVALSHA) or second (EVAL after NOSCRIPT) try;
 * lb__probe_reply returns LB_OK (scripts run), LB_STEP_SEND (send the EVAL)
 * or a failure that ends the operation before its first command is sent. */
extern const lb_script lb__script_probe;
int lb__probe_due(const lb_machine *m);
void lb__probe_cmd(int second, const char *argv[3], size_t lens[3]);
int lb__probe_reply(lb_machine *m, const struct redisReply *r, int second);
/* Records a failure detail in m->errstr and returns `status`. */
int lb__fail(lb_machine *m, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Classifies an error reply: LB_EWRONGTYPE for WRONGTYPE, LB_EREDIS otherwise,
 * with the server's message copied (bounded, non-printable bytes escaped). */
int lb__reply_error(lb_machine *m, const struct redisReply *r, const char *during);
/* Escapes up to `max` bytes of `s` for an error message. */
void lb__escape(char *out, size_t cap, const char *s, size_t len);

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

/* Real time for blocking drivers (core/wait.c): monotonic milliseconds, a
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

#endif
