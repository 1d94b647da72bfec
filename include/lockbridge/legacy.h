/* lockbridge legacy: the SETNX/GETSET timestamp lock, spoken exactly as the
 * deployed JVM lockers speak it, and the value codecs it writes and reads. */
#ifndef LOCKBRIDGE_LEGACY_H
#define LOCKBRIDGE_LEGACY_H

#include <stddef.h>
#include <stdint.h>

#include "lockbridge/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Value codecs -------------------------------------------------------------
 * A legacy value means "valid until instant T". A codec fixes T's text form, unit
 * and clock. Instants are int64 counts of the codec's unit on the codec's clock. */
typedef enum lb_codec_kind {
    LB_CODEC_MS = 0,        /* "1700000000123": epoch milliseconds (L1, L2, L4) */
    LB_CODEC_SECONDS,       /* "1700000000": epoch seconds (R) */
    LB_CODEC_FLOAT_SECONDS, /* "1700000000.250000": epoch seconds, fraction (L5) */
    LB_CODEC_JSON           /* {"expiryTime":N} (L3) */
} lb_codec_kind;

typedef enum lb_unit { LB_UNIT_MS = 0, LB_UNIT_NS, LB_UNIT_US, LB_UNIT_S } lb_unit;

typedef enum lb_clock_kind {
    LB_CLOCK_EPOCH = 0, /* wall clock: comparable across hosts whose clocks agree */
    LB_CLOCK_MONOTONIC  /* host monotonic clock: comparable on one host only */
} lb_clock_kind;

#define LB_CODEC_FIELD_MAX 64 /* bytes of a JSON field name, NUL included */

typedef struct lb_codec {
    lb_codec_kind kind;
    lb_unit unit;        /* JSON only; the other kinds imply their unit */
    lb_clock_kind clock; /* JSON only; the other kinds are epoch */
    char field[LB_CODEC_FIELD_MAX]; /* JSON only; "" means "expiryTime" */
} lb_codec;

/* The longest value any codec writes, NUL included. */
#define LB_VALUE_MAX (LB_CODEC_FIELD_MAX + 32)
/* Values longer than this are foreign without being parsed (a megabyte value is
 * never copied). */
#define LB_OBSERVED_MAX 4096

/* Parses a codec spec: "ms", "s", "float", "json", or
 * "json:field=NAME,unit=ns|us|ms|s,clock=epoch|mono" (any subset, any order).
 * The default JSON codec is what the L3 lockers in the field write:
 * field expiryTime, unit ns, clock mono. */
int lb_codec_parse(lb_codec *out, const char *spec);
/* Writes the spec of `c` (round-trips through lb_codec_parse). */
int lb_codec_format(const lb_codec *c, char *buf, size_t cap);
/* The current instant on the codec's clock, in its unit. */
int64_t lb_codec_now(const lb_codec *c, const lb_now *now);
/* The expiry written for a lock of `ttl_ms` taken at `now`: now + ttl + 1 unit
 * (ttl rounded up to the unit), as L1 and R write it. */
int lb_codec_expiry(const lb_codec *c, const lb_now *now, int64_t ttl_ms, int64_t *out);
/* Encodes instant `t`; writes a NUL-terminated value, *len without the NUL. */
int lb_codec_encode(const lb_codec *c, int64_t t, char *buf, size_t cap, size_t *len);
/* Decodes a value strictly: anything not exactly this codec's form is
 * LB_EFOREIGN (sign, spaces, leading zeros, overflow, trailing bytes, NULs,
 * wrong JSON shape, duplicate field). The JSON form is one JSON object in
 * which the field appears once as a plain non-negative integer (exact to
 * INT64_MAX; no fraction, exponent or sign); other members and JSON's
 * insignificant whitespace are allowed, as the JVM lockers' readers allow them.
 * *t is reset on entry. */
int lb_codec_decode(const lb_codec *c, const char *s, size_t len, int64_t *t);
/* Converts a duration in milliseconds to the codec's unit (rounded up). */
int lb_codec_ms_to_units(const lb_codec *c, int64_t ms, int64_t *out);

/* ---- The plausibility window ---------------------------------------------------
 * Decoding says a value has a codec's form; it does not say the value was
 * written by a client of that codec. Ten digits of epoch seconds are also a
 * valid millisecond value, of January 1970, and any client that reads them so
 * would take over a live lock. So an instant is a timestamp of its codec only
 * inside a window around `now`, on the codec's own clock:
 *   epoch clocks:     from 2000-01-01T00:00:00Z to 10 years after now;
 *   monotonic clocks: from 0 to 10 years after now.
 * A value read outside it is implausible: foreign to every lock and to the
 * tool (docs/legacy-protocol.md, "The plausibility window", gives the figures
 * and why). Every reading of a mistaken unit lands outside: a factor of 1000
 * puts an instant of this century before 1971 or after the year 30000, and
 * epoch nanoseconds read on a monotonic clock are more than 50 years of uptime. */
#define LB_PLAUSIBLE_EPOCH_MIN_MS INT64_C(946684800000) /* 2000-01-01T00:00:00Z, epoch ms */
#define LB_PLAUSIBLE_AHEAD_MS INT64_C(315576000000)     /* 10 years of 365.25 days, ms */

/* 1 when instant `t` (units of `c`, on its clock) lies in the window at `now`;
 * 0 when it does not, or for a NULL argument. */
int lb_codec_plausible(const lb_codec *c, int64_t t, const lb_now *now);
/* For a value that `c` reads implausibly (or not at all): the first codec of
 * the same form that decodes it to a plausible instant: "ms", "s", "float" for
 * the decimal forms; for JSON, `c`'s field in each unit, epoch clocks before
 * monotonic ones. LB_OK and *out, or LB_EFOREIGN when none does (*out reset). */
int lb_codec_suggest(const lb_codec *c, const char *s, size_t len, const lb_now *now,
                     lb_codec *out);

/* ---- The lock ------------------------------------------------------------------ */
typedef enum lb_legacy_variant {
    /* Both join any legacy fleet (the values are the lockers' own); see the
     * table in README.md or docs/legacy-protocol.md, "Which variant". */
    LB_LEGACY_WIRE = 0, /* SETNX, GET, GETSET, DEL only: for servers that refuse
                         * scripts; set fleet_max_ttl_ms beside longer validities */
    LB_LEGACY_SCRIPTED  /* atomic takeover, release and extend through Lua: the
                         * choice wherever the server runs scripts */
} lb_legacy_variant;

/* Options are copied by lb_legacy_lock_new: the struct may be reused or freed
 * afterwards; the clock and allocator it points to must outlive the lock, and
 * errbuf is written during that call only. */
typedef struct lb_legacy_options {
    lb_codec codec;
    lb_legacy_variant variant;
    int64_t ttl_ms;            /* validity written into each value, milliseconds */
    int nil_retries;           /* SETNX retries after a nil GET within one attempt */
    int64_t release_margin_ms; /* wire release refuses this close to expiry, ms */
    int64_t backoff_min_ms;    /* blocking acquire: first sleep, milliseconds */
    int64_t backoff_max_ms;    /* blocking acquire: longest sleep, milliseconds */
    const lb_clock *clock;     /* NULL: system clocks; must outlive the lock */
    const lb_allocator *allocator; /* NULL: malloc; must outlive the lock */
    /* Wire variant only: the longest validity any client of the fleet writes,
     * ms; 0: ttl_ms, right when no client writes a longer one. Set it beside a
     * longer writer (L1's 15 minutes beside a 30 s lockbridge client): a GETSET
     * that loses a takeover race has already written its value over the
     * winner's; written with now + this + release_margin_ms, it never ends
     * before the winner's. A lock taken over this way is held, by every
     * client's reading of the key, until that later instant. */
    int64_t fleet_max_ttl_ms;
    /* Optional: where lb_legacy_lock_new says why it refused the options
     * ("ttl_ms (500) is not longer than release_margin_ms (1000): ..."),
     * NUL-terminated and cut to errbuf_size bytes; "" on success. Written only
     * by lb_legacy_lock_new, never kept. */
    char *errbuf;
    size_t errbuf_size;
    /* 1: a blocking acquire that meets a foreign value (one this client cannot
     * judge, left alone) returns LB_EFOREIGN at once; 0 (default): it waits it
     * out like a held lock, in case its writer replaces it, and returns
     * LB_EFOREIGN only at the deadline. */
    int foreign_fails_at_once;
} lb_legacy_options;

/* Fills the defaults: ms codec, wire variant, ttl 30 s, 3 nil retries, release
 * margin 1 s, back-off 2 to 100 ms, system clock, malloc, a foreign value
 * waited out. */
void lb_legacy_options_init(lb_legacy_options *o);

typedef struct lb_legacy_lock lb_legacy_lock;

/* Creates a handle for `key` (any bytes but a companion's name, see
 * lb_lock_name_refused). *out is reset on entry. LB_EINVAL for such a name and
 * for bad options, including a wire variant whose ttl_ms is not longer than
 * its release_margin_ms (every release would be refused); o->errbuf, when
 * given, says which. */
int lb_legacy_lock_new(lb_legacy_lock **out, const char *key, size_t keylen,
                       const lb_legacy_options *o);
void lb_legacy_lock_free(lb_legacy_lock *l);

/* One attempt: LB_OK (held), LB_EBUSY, LB_EFOREIGN (the value is not ours to
 * judge: it is left alone), LB_EWRONGTYPE, LB_EREDIS, LB_EIO, LB_EPROTO. */
int lb_legacy_try_acquire(lb_legacy_lock *l, lb_target t);
/* Attempts until `wait_ms` has passed, sleeping a jittered back-off bounded by
 * the holder's remaining validity. A foreign value is treated as held: the
 * wait goes on, and ends with LB_EFOREIGN rather than LB_ETIMEDOUT; with
 * foreign_fails_at_once it ends with LB_EFOREIGN at the first such attempt. */
int lb_legacy_acquire(lb_legacy_lock *l, lb_target t, int64_t wait_ms);
/* LB_OK when our value was deleted; LB_ELOST when the key no longer held it
 * (nothing deleted); LB_EEXPIRED when the wire variant refused to delete a lock
 * this close to its expiry (it is left to expire). The handle is not held after. */
int lb_legacy_release(lb_legacy_lock *l, lb_target t);
/* Scripted variant only: writes a new expiry now + ttl_ms if the key still
 * holds our value. Refused (LB_EEXPIRED, nothing sent, the lock left to
 * expire) once our clock is within release_margin_ms of its expiry: a
 * contender whose clock runs a little ahead may already be taking it over. */
int lb_legacy_extend(lb_legacy_lock *l, lb_target t, int64_t ttl_ms);

/* The machine of one operation on `l`, for callers that do their own I/O:
 * LB_OP_TRY_ACQUIRE, LB_OP_RELEASE or LB_OP_EXTEND (`ms`: the new validity).
 * Drive it with lb_machine_step: its final status is the operation's, and the
 * handle's state (held, value, observed expiry) is updated as it goes.
 * Starting an operation abandons one left unfinished by its caller. NULL for
 * another op, or while lb_async_run drives the handle's machine (the sync
 * calls then return LB_ESTATE), since the pending reply belongs to it. */
lb_machine *lb_legacy_machine(lb_legacy_lock *l, lb_op op, int64_t ms);

/* A snapshot of the handle's state. Strings point into the handle: valid until
 * its next operation or lb_legacy_lock_free. */
typedef struct lb_legacy_info {
    int held;
    const char *value;       /* the value this handle last wrote (NUL-terminated);
                              * "" if none */
    size_t value_len;
    int64_t expiry;          /* our expiry instant in codec units (valid while held) */
    int observed;            /* 1: the last failed attempt saw the holder's expiry */
    int64_t observed_expiry; /* that expiry, codec units (0 when observed is 0) */
    const char *foreign;     /* the foreign value seen by the last attempt, escaped
                              * for printing; "" if none */
    uint64_t commands;       /* Redis commands sent by this handle since its creation */
    const char *errstr;      /* detail of the last failure, or "" */
} lb_legacy_info;
lb_legacy_info lb_legacy_info_of(const lb_legacy_lock *l);

#ifdef __cplusplus
}
#endif
#endif
