/* Internal declarations of the migrate module shared between its files: the
 * scripts, the mode-following lock's layout and the pieces its machines share. */
#ifndef LOCKBRIDGE_MIGRATE_INTERNAL_H
#define LOCKBRIDGE_MIGRATE_INTERNAL_H

#include <stdatomic.h>

#include "lockbridge/migrate.h"
#include "core/internal.h"
#include "legacy/internal.h"

extern const lb_script lb__script_migrate_acquire;
extern const lb_script lb__script_migrate_release;
extern const lb_script lb__script_migrate_extend;
extern const lb_script lb__script_migrate_inspect;
extern const lb_script lb__script_mode_set;
extern const lb_script lb__script_migrate_touch;
extern const lb_script lb__script_census_prune;

/* lb_mode_set as a compare-and-set on the stage the caller judged: the mode
 * `expect` (NULL: the control key absent) and the stage's start since_ms (-1:
 * none recorded) must both still hold; otherwise LB_ESTATE, nothing written. */
int lb__mode_set_stage(lb_target t, const char *ns, size_t nslen, lb_mode mode,
                       const lb_mode *expect, int64_t since_ms, long long *receivers);

/* Longest census JSON an entry can produce (every field escaped), NUL included. */
#define LB__CENSUS_JSON_MAX 2048

enum { LB__OP_ACQUIRE, LB__OP_RELEASE, LB__OP_EXTEND, LB__OP_REFRESH };

/* The next sleep of a blocking acquire, ms (migrate/mlock.c). */

/* The mode-following lock. One operation runs at a time on `m`; in legacy
 * mode `m` forwards to the embedded legacy lock's machine (`sub`). */
struct lb_mlock {
    lb_machine m; /* first: the machine's address is the handle's */
    lb_mlock_options opts;
    char *key, *channel;
    size_t keylen, channellen;
    int has_ns;
    lb_ns_keys ns;
    lb_legacy_lock *legacy; /* legacy mode's protocol */
    lb_mode mode;           /* the mode the next operation starts in */
    int mode_read;          /* the control key was read at least once */
    int mode_seen;          /* a mode name was read from it at least once */
    int key_missing;        /* the last read found it absent after a mode was seen */
    int64_t mode_read_ns;   /* monotonic ns of the last read */
    int64_t census_ns;      /* monotonic ns of the last census refresh */
    int census_done;        /* refreshed at least once */
    atomic_int notified;    /* set by lb_mlock_notify */
    int op;                 /* the running operation (LB__OP_*) */
    lb_mode op_mode;        /* the mode it runs in, fixed when it starts */
    int state;              /* its state */
    lb_machine *sub;        /* the legacy machine being forwarded, or NULL */
    int census_now;         /* the running refresh writes the census */
    int held;
    lb_mode held_mode;
    char value[LB_VALUE_MAX]; /* what we wrote (a codec value or a token) */
    size_t valuelen;
    int64_t expiry;           /* compat: our timestamp, codec units */
    int64_t last_expiry;      /* compat: the latest timestamp this handle wrote */
    char pending[LB_VALUE_MAX];
    size_t pendinglen;
    int64_t pending_expiry;
    char observed[LB_OBSERVED_MAX]; /* an expired legacy value to take over */
    size_t observedlen;
    int takeovers_left;
    char px_arg[24];
    int64_t extend_ttl_ms;
    int64_t sent_ns, deadline_ns;
    lb_class seen;            /* what the last failed attempt found */
    int64_t holder_ms;        /* the holder's remaining validity seen, ms; -1 unknown */
    char modes_arg[24];       /* "ABSENT:CURRENT" for the duty script */
    char census_json[LB__CENSUS_JSON_MAX];
    size_t census_jsonlen;
    char client_id[LB_CENSUS_ID_MAX];
    char host[LB_CENSUS_HOST_MAX];
    char version[LB_CENSUS_VERSION_MAX];
    uint64_t rng;
    char errstr[LB__ERRSTR_CAP];
};

/* The cross-format operations (migrate/crossformat.c): acquire, release and
 * extend of compat and modern values, run on the handle's machine for the
 * operation l->op in mode l->op_mode. */
#define LB__STATE_X 16 /* states from here on belong to crossformat.c */
int lb__x_start(lb_mlock *l, const lb_now *now);
int lb__x_step(lb_mlock *l, const struct redisReply *r, const lb_now *now);

/* One command run as a machine on a target (migrate/target_call.c): a plain
 * command (argv[0] its name), or with `script` set an EVALSHA of it (argv[0]
 * numkeys; at most LB_CMD_MAX_ARGS - 2 arguments). An error reply ends it
 * with LB_EREDIS or LB_EWRONGTYPE, a transport failure with LB_EIO; any other
 * reply is handed to `judge`, whose status is the call's. The arguments must
 * live until lb__call_run returns. */
typedef struct lb__call lb__call;
struct lb__call {
    lb_machine m; /* first: the machine's address is the call's */
    const lb_script *script;
    int argc;
    const char *const *argv;
    const size_t *lens;
    const char *what; /* the command's name in failure details */
    int (*judge)(lb__call *c, const struct redisReply *r, const lb_now *now);
    void *ud;         /* the judge's */
};
int lb__call_run(lb_target t, lb__call *c, const lb_clock *clock);

/* The machines behind lb_mlock_machine. */
lb_machine *lb__mlock_try_acquire_machine(lb_mlock *l);
lb_machine *lb__mlock_release_machine(lb_mlock *l);
lb_machine *lb__mlock_extend_machine(lb_mlock *l, int64_t ttl_ms);
lb_machine *lb__mlock_refresh_machine(lb_mlock *l);

/* A census entry's JSON form (migrate/census.c). */
/* JSON form of an entry (NUL-terminated; *len without it). LB_EINVAL if it does
 * not fit in `cap`. */
int lb__census_encode(const lb_census_entry *e, char *buf, size_t cap, size_t *len);
/* Strict parse of the JSON form; *e reset on entry. LB_EFOREIGN if not one. */
int lb__census_decode(const char *s, size_t len, lb_census_entry *e);

#endif
