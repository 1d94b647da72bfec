/* lockbridge migrate: moving a fleet from timestamp locks to token locks on the
 * same keys. Modes per namespace and their control key, the format classifier,
 * the rollout census, and the lock handle whose behaviour follows the mode. */
#ifndef LOCKBRIDGE_MIGRATE_H
#define LOCKBRIDGE_MIGRATE_H

#include <stddef.h>
#include <stdint.h>

#include "lockbridge/core.h"
#include "lockbridge/legacy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Modes -------------------------------------------------------------------
 * legacy: the SETNX/GETSET timestamp protocol, exactly as the JVM lockers speak it.
 * compat: values in the legacy codec (every legacy reader sees a valid timestamp)
 *         written with SET NX PX timeout+grace and handled by atomic scripts.
 * modern: 128-bit token values with a Redis TTL.
 * compat and modern read every format. Adjacent modes (legacy and compat, compat
 * and modern) are safe together in both directions; legacy beside modern is not
 * (legacy clients cannot read tokens). */
typedef enum lb_mode {
    LB_MODE_LEGACY = 0,
    LB_MODE_COMPAT = 1,
    LB_MODE_MODERN = 2
} lb_mode;

/* "legacy", "compat", "modern"; "unknown" for anything else (never NULL). */
const char *lb_mode_name(lb_mode m);
/* Parses exactly one of the names above (bytes, not NUL-terminated): LB_OK,
 * or LB_EINVAL with *out reset to LB_MODE_LEGACY. */
int lb_mode_parse(const char *s, size_t len, lb_mode *out);

/* ---- Namespace keys ------------------------------------------------------------
 * A namespace (any bytes; the lock keys it governs are the operator's choice) has
 * a control key holding its mode name, a channel on which mode changes are
 * published, and a census hash. They are companions of the namespace name (see
 * lb_companion_key), so they share one cluster slot:
 *   mode    "{ns}:lb-mode"     a string: "legacy", "compat" or "modern"
 *   channel "{ns}:lb-mode-ch"  PUBLISH of the new mode name on every lb_mode_set
 *   census  "{ns}:lb-census"   a hash: client id -> JSON entry (see below) */
#define LB_NS_KEY_MAX 320 /* bytes of each name, NUL included */

typedef struct lb_ns_keys {
    char mode[LB_NS_KEY_MAX];
    char channel[LB_NS_KEY_MAX];
    char census[LB_NS_KEY_MAX];
    char gate[LB_NS_KEY_MAX]; /* the gate record of `lockbridge mode` (a hash) */
    size_t modelen, channellen, censuslen, gatelen;
} lb_ns_keys;

/* Writes the names for namespace `ns`. LB_EINVAL if ns is empty, too long, or
 * cannot have companion names (a '}' without a hash tag). */
int lb_ns_keys_init(lb_ns_keys *out, const char *ns, size_t nslen);

/* The calls below that take a target run their commands as a lock does: on
 * one connection, or through a Cluster on the primary that owns the
 * namespace's (or the key's) slot, or behind Sentinel on the current primary.
 * A target without a handle is LB_EINVAL; outputs are reset first. They keep
 * no error text: a transport failure's detail is the target's
 * (lb_cluster_errstr, lb_sentinel_errstr, the context's errstr). */

/* Reads the namespace's mode. LB_OK with *found = 1 and *out set; LB_OK with
 * *found = 0 when the control key is absent (*out = LB_MODE_LEGACY);
 * LB_EFOREIGN when it holds something that is not a mode name (nothing is
 * changed); LB_EWRONGTYPE, LB_EREDIS, LB_EIO. Outputs reset on entry. */
int lb_mode_get(lb_target t, const char *ns, size_t nslen, lb_mode *out, int *found);
/* Sets the namespace's mode and publishes it on the channel, atomically (one
 * script). With `expect` non-NULL, only if the current mode is *expect
 * (an absent key counts as LB_MODE_LEGACY): LB_ESTATE otherwise, nothing
 * written. *receivers (may be NULL) gets the PUBLISH count: clients notified at
 * once; the others pick the change up within their refresh interval. */
int lb_mode_set(lb_target t, const char *ns, size_t nslen, lb_mode mode, const lb_mode *expect,
                long long *receivers);
/* Parses a message received on the mode channel by a SUBSCRIBE connection
 * (["message", channel, payload]): LB_OK and *out, or LB_EINVAL. */
int lb_mode_message(const struct redisReply *r, lb_mode *out);

/* ---- Format classifier -----------------------------------------------------------
 * What a lock key holds, judged from its bytes, its PTTL and its Redis type. A
 * pure function: no I/O, `now` passed in. */
typedef enum lb_format {
    LB_FORMAT_ABSENT = 0, /* no key */
    LB_FORMAT_LEGACY,     /* a timestamp in one of the codecs, no TTL */
    LB_FORMAT_COMPAT,     /* a timestamp in one of the codecs, with a TTL */
    LB_FORMAT_TOKEN,      /* a token locker's value (see lb_token_kind) */
    LB_FORMAT_INCR,       /* a small integer: an INCR-based locker's counter */
    LB_FORMAT_UNKNOWN,    /* a string in no known format: never touched */
    LB_FORMAT_WRONGTYPE,  /* the key is not a string: never touched */
    LB_FORMAT_AMBIGUOUS   /* decodes, but no codec gives it one plausible instant (see
                           * lb_ambiguity): never touched, and legacy evidence */
} lb_format;

/* Why a value is LB_FORMAT_AMBIGUOUS. A codec's reading counts only inside
 * the plausibility window (lb_codec_plausible, lockbridge/legacy.h). */
typedef enum lb_ambiguity {
    LB_AMBIGUITY_NONE = 0,
    LB_AMBIGUITY_IMPLAUSIBLE, /* every codec that decodes it reads an instant outside
                               * the window: it is another codec's (lb_class.suggestion) */
    LB_AMBIGUITY_DISAGREE     /* two codecs read different plausible instants */
} lb_ambiguity;

typedef enum lb_token_kind {
    LB_TOKEN_NONE = 0,
    LB_TOKEN_LOCKBRIDGE, /* 32 lowercase hex digits */
    LB_TOKEN_JSON_UID,   /* {"uid":"..."} (M1) */
    LB_TOKEN_OTHER       /* any other value carrying a TTL and no timestamp */
} lb_token_kind;

/* Integers below this without a codec's fraction or JSON shape are INCR
 * counters, not timestamps: 10^9 s is September 2001, and no deployed locker
 * counts that high. */
#define LB_INCR_MAX INT64_C(1000000000)

typedef struct lb_class {
    lb_format format;
    int codec;            /* LEGACY/COMPAT: index in the codecs given; AMBIGUOUS: the
                           * codec whose reading `expiry` is; else -1 */
    int64_t expiry;       /* LEGACY/COMPAT: the timestamp, in that codec's units;
                           * AMBIGUOUS: that codec's reading (judged by nothing) */
    int expired;          /* LEGACY/COMPAT: expiry is before `now` on its clock */
    int64_t remaining_ms; /* LEGACY/COMPAT: ms until expiry (0 if expired, saturating) */
    int64_t pttl_ms;      /* as given: -1 no TTL, -2 absent */
    lb_token_kind token;  /* TOKEN */
    int64_t counter;      /* INCR: the counter's value */
    size_t len;           /* the value's length in bytes */
    lb_ambiguity ambiguity; /* AMBIGUOUS: why */
    int codec2;           /* AMBIGUOUS by disagreement: the other codec's index; else -1 */
    int64_t expiry2;      /* its reading, in its units */
    int suggested;        /* AMBIGUOUS as implausible: 1 when `suggestion` is set */
    lb_codec suggestion;  /* a codec of the same form that reads it plausibly
                           * (lb_codec_suggest), named for the operator */
} lb_class;

/* Classifies a value. `type` is the TYPE reply ("string", "none", "hash", ...),
 * or NULL for "string" when value != NULL and "none" otherwise. `pttl_ms` is
 * the PTTL reply (-1 no TTL). A value is a timestamp (LEGACY or COMPAT) when
 * at least one of `codecs` (n of them, at least one) reads it as a plausible
 * instant and every plausible reading is that same instant (R's "1700000000"
 * by "s" and by "float"); the first such codec is named. A value that some
 * codec decodes but none plausibly, or that two read as different plausible
 * instants, is AMBIGUOUS, whatever its TTL. Order no longer decides a
 * reading. *out is reset on entry. LB_OK, or LB_EINVAL for a bad argument. */
int lb_classify(lb_class *out, const char *value, size_t len, int64_t pttl_ms,
                const char *type, const lb_codec *codecs, int ncodecs, const lb_now *now);
/* "absent", "legacy", "compat", "token", "incr", "unknown", "wrongtype",
 * "ambiguous". */
const char *lb_format_name(lb_format f);
/* "none", "implausible", "disagree". */
const char *lb_ambiguity_name(lb_ambiguity a);
/* "none", "lockbridge", "json-uid", "other". */
const char *lb_token_kind_name(lb_token_kind k);

/* Reads one key's TYPE, value (the first LB_OBSERVED_MAX + 1 bytes) and PTTL in
 * one script call and classifies it at the moment of the reply. */
int lb_inspect(lb_target t, const char *key, size_t keylen, const lb_codec *codecs,
               int ncodecs, const lb_clock *clock, lb_class *out);

/* ---- Census ------------------------------------------------------------------------
 * Every client registers itself in the namespace's census hash, field = id,
 * value = JSON {"id":..,"mode":..,"version":..,"host":..,"pid":..,"seen_ms":..}
 * with seen_ms its wall clock in epoch milliseconds, and refreshes it
 * periodically. An entry not refreshed for stale_ms is stale: ignored by
 * readers and removed by lb_census_prune. */
#define LB_CENSUS_ID_MAX 128
#define LB_CENSUS_HOST_MAX 128
#define LB_CENSUS_VERSION_MAX 32

typedef struct lb_census_entry {
    char id[LB_CENSUS_ID_MAX];
    lb_mode mode;
    char version[LB_CENSUS_VERSION_MAX];
    char host[LB_CENSUS_HOST_MAX];
    int64_t pid;
    int64_t seen_ms; /* epoch ms of the last refresh, by the writer's clock */
    /* Filled by lb_census_list: */
    int64_t age_ms;  /* reader's now - seen_ms (negative if the writer's clock is ahead) */
    int stale;       /* age_ms > stale_ms */
    int valid;       /* 0: the field's value was not a census entry (then only id is set) */
} lb_census_entry;

/* Writes (or refreshes) one entry with seen_ms = now's wall clock. */
int lb_census_register(lb_target t, const char *ns, size_t nslen, const lb_census_entry *e,
                       const lb_now *now);
/* Reads every entry of the census, with age and stale flag against `now`.
 * *out (an array of *n entries, allocated with `a`, NULL for malloc; free it
 * with lb_census_free) and *n are reset on entry. */
int lb_census_list(lb_target t, const char *ns, size_t nslen, const lb_now *now,
                   int64_t stale_ms, const lb_allocator *a, lb_census_entry **out, size_t *n);
void lb_census_free(const lb_allocator *a, lb_census_entry *entries);
/* Removes stale entries, each only if it is still the value that was judged
 * stale (a client refreshing meanwhile is kept). Entries that are not census
 * JSON are left alone. A removed legacy-mode entry's seen_ms is kept in the
 * namespace's gate record (lb_ns_keys.gate, field legacy_until_ms), so that the
 * tool's gate still counts that legacy client for its window. *pruned (may be
 * NULL) gets the number removed. */
int lb_census_prune(lb_target t, const char *ns, size_t nslen, const lb_now *now,
                    int64_t stale_ms, size_t *pruned);

/* ---- The mode-following lock ------------------------------------------------------ */
/* Options are copied by lb_mlock_new (strings included): the struct may be
 * reused or freed afterwards; the clock and allocator it points to must
 * outlive the lock. */
typedef struct lb_mlock_options {
    const char *ns;          /* namespace (NUL-terminated); NULL: no control key, no census */
    lb_mode mode;            /* the configured mode: used when not following, and while
                              * following until the control key is found */
    int follow;              /* 1: follow the namespace's control key (needs ns) */
    int64_t mode_refresh_ms; /* re-read the control key at least this often, ms;
                              * 0: before every acquire */
    lb_codec codec;          /* legacy and compat values */
    int64_t ttl_ms;          /* validity of each acquisition, ms */
    int64_t grace_ms;        /* compat: Redis TTL = ttl_ms + grace_ms, ms */
    lb_legacy_variant legacy_variant; /* legacy mode: wire or scripted */
    int nil_retries;         /* legacy mode: SETNX retries after a nil GET */
    int64_t release_margin_ms; /* legacy wire release refuses this close to expiry, ms */
    int64_t fleet_max_ttl_ms;  /* legacy wire takeovers: see lb_legacy_options, ms */
    int64_t backoff_min_ms;  /* blocking acquire: first sleep, ms */
    int64_t backoff_max_ms;  /* blocking acquire: longest sleep, ms */
    const lb_clock *clock;   /* NULL: system clocks; must outlive the lock */
    const lb_allocator *allocator; /* NULL: malloc; must outlive the lock */
    /* Census identity (needs ns): NULL picks "host:pid:random", the host name,
     * LB_VERSION_STRING. census_refresh_ms 0 keeps this client out of the census. */
    const char *client_id;
    const char *host;
    const char *version;
    int64_t census_refresh_ms; /* refresh our entry at least this often, ms */
    /* 1: a blocking acquire that meets a value left alone (LB_EFOREIGN)
     * returns at once; 0 (default): it waits it out until the deadline. */
    int foreign_fails_at_once;
} lb_mlock_options;

/* Defaults: no namespace, compat, not following, mode refresh 1000 ms, ms codec,
 * ttl 30 s, grace 1 s, wire legacy variant, 3 nil retries, release margin 1 s,
 * back-off 2 to 100 ms, system clock, malloc, census refresh 5000 ms, a foreign
 * value waited out. */
void lb_mlock_options_init(lb_mlock_options *o);

typedef struct lb_mlock lb_mlock;

/* Creates a handle for `key` (any bytes whose companion names exist, but not
 * a companion's name itself, see lb_lock_name_refused). *out is reset on
 * entry; LB_EINVAL for such a name and for bad options. */
int lb_mlock_new(lb_mlock **out, const char *key, size_t keylen, const lb_mlock_options *o);
void lb_mlock_free(lb_mlock *l);

/* One attempt in the current mode (re-read first when due or notified):
 * LB_OK (held), LB_EBUSY (held by another: lb_mlock_info_of(l).observed says by what),
 * LB_EFOREIGN (an unknown value or an INCR counter: left alone),
 * LB_EWRONGTYPE, LB_EREDIS, LB_EIO, LB_EPROTO. */
int lb_mlock_try_acquire(lb_mlock *l, lb_target t);
/* Attempts until `wait_ms` passes (INT64_MAX: no limit), sleeping a jittered
 * back-off bounded by the holder's remaining validity: LB_ETIMEDOUT, or
 * LB_EFOREIGN if the last attempt met a value left alone (at the first such
 * attempt with foreign_fails_at_once). */
int lb_mlock_acquire(lb_mlock *l, lb_target t, int64_t wait_ms);
/* As lb_mlock_acquire, and wakes at once when a compat or modern holder's
 * release is published on the key's channel, through a waiter of the token
 * lock (lockbridge/waiter.h; NULL: back-off only). A legacy holder's DEL
 * publishes nothing: its end is found within the back-off bound. */
struct lb_waiter;
int lb_mlock_acquire_wait(lb_mlock *l, lb_target t, struct lb_waiter *w,
                          int64_t wait_ms);
/* Releases in the mode the lock was acquired in, deleting only our own value:
 * LB_OK, LB_ELOST (not ours any more: nothing deleted), LB_EEXPIRED (expired by
 * our clock, or too close to it on the wire: left to expire). Not held after. */
int lb_mlock_release(lb_mlock *l, lb_target t);
/* Extends a held lock to `ttl_ms` from now, in the mode it was acquired in:
 * compat rewrites timestamp and TTL together, modern the TTL, legacy needs the
 * scripted variant. LB_ELOST, LB_EEXPIRED as for release; a compat or legacy
 * lock within release_margin_ms of its timestamp is not extended (LB_EEXPIRED,
 * left to lapse): a legacy contender may already be taking it over. */
int lb_mlock_extend(lb_mlock *l, lb_target t, int64_t ttl_ms);
/* Re-reads the control key now (and refreshes the census entry). */
int lb_mlock_refresh(lb_mlock *l, lb_target t);
/* Makes the next operation re-read the control key first: call it when a
 * message arrives on the mode channel. Safe from any thread. */
void lb_mlock_notify(lb_mlock *l);

/* The machine of one operation on `l`, for callers that do their own I/O:
 * LB_OP_TRY_ACQUIRE, LB_OP_RELEASE, LB_OP_EXTEND (`ms`: the new validity) or
 * LB_OP_REFRESH. One at a time per handle (starting one abandons one left
 * unfinished); NULL for another op, or while lb_async_run drives the handle's
 * machine. An operation runs entirely in the mode it started in. */
lb_machine *lb_mlock_machine(lb_mlock *l, lb_op op, int64_t ms);

/* A snapshot of the handle's state. Strings and `observed` point into the
 * handle: valid until its next operation or lb_mlock_free. */
typedef struct lb_mlock_info {
    lb_mode mode;            /* the mode the next operation starts in (as last read) */
    int held;
    lb_mode held_mode;       /* the mode the held lock was acquired in (while held) */
    int control_key_missing; /* 1 when a follower that has read a mode found the
                              * control key absent at its last read: it keeps the
                              * mode it had (a vanished key never moves it) until
                              * the key is written again */
    const char *value;       /* the value this handle last wrote; "" if none */
    size_t value_len;
    int64_t deadline_ns;     /* our lease by our own monotonic clock, ns: the earlier
                              * of the timestamp's expiry and the TTL's end, counted
                              * from when the command was prepared */
    const lb_class *observed; /* what the last failed acquire attempt found */
    uint64_t commands;       /* Redis commands sent by this handle since its creation */
    const char *client_id;   /* the census id it registers under ("" without ns) */
    const char *errstr;      /* detail of the last failure, or "" */
} lb_mlock_info;
lb_mlock_info lb_mlock_info_of(const lb_mlock *l);

#ifdef __cplusplus
}
#endif
#endif
