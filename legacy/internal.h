/* Internal declarations of the legacy module shared between its files. */
#ifndef LOCKBRIDGE_LEGACY_INTERNAL_H
#define LOCKBRIDGE_LEGACY_INTERNAL_H

#include "lockbridge/legacy.h"
#include "core/internal.h"

int lb__parse_decimal(const char *s, size_t len, int64_t *out);
const char *lb__json_field(const lb_codec *c);
int lb__json_encode(const lb_codec *c, int64_t t, char *buf, size_t cap, size_t *len);
int lb__json_decode(const lb_codec *c, const char *s, size_t len, int64_t *t);

/* The Lua scripts of the scripted variant (generated from legacy/scripts). */
extern const lb_script lb__script_legacy_takeover;
extern const lb_script lb__script_legacy_release;
extern const lb_script lb__script_legacy_extend;

/* The legacy lock handle. One operation runs at a time; its machine is `m`. */
struct lb_legacy_lock {
    lb_machine m;
    lb_legacy_options opts;
    lb_codec codec;
    char *key;
    size_t keylen;
    int state; /* the running operation's state (per-operation enum) */
    int held;
    int nil_left;          /* nil GET retries left in this attempt */
    int64_t extend_ttl_ms; /* ttl of the running extend, milliseconds */
    char value[LB_VALUE_MAX]; /* what we wrote */
    size_t valuelen;
    int64_t expiry;           /* our expiry, codec units */
    char pending[LB_VALUE_MAX]; /* value being written by a takeover or extend */
    size_t pendinglen;
    int64_t pending_expiry;
    char observed[LB_OBSERVED_MAX]; /* the value GET saw */
    size_t observedlen;
    int has_observed_expiry;
    int64_t observed_expiry;
    char foreign[96];
    uint64_t rng;
    char errstr[LB__ERRSTR_CAP];
};

/* Converts a span of codec units to milliseconds (rounded up, saturating). */
int64_t lb__codec_units_to_ms(const lb_codec *c, int64_t units);
/* The clock a codec's instants are on (every kind but JSON is epoch). */
lb_clock_kind lb__codec_clock(const lb_codec *c);
/* 1 when instant `ta` of codec `a` and `tb` of `b` are the same instant on
 * the same clock (R's "1700000000" read by "s" and by "float"); 0 otherwise. */
int lb__codec_same_instant(const lb_codec *a, int64_t ta, const lb_codec *b, int64_t tb);

/* Observes a foreign value: remembers it escaped and fails the machine. */
int lb__legacy_foreign(lb_legacy_lock *l, const char *s, size_t len, const char *during);

/* The machines behind lb_legacy_machine. */
lb_machine *lb__legacy_try_acquire_machine(lb_legacy_lock *l);
lb_machine *lb__legacy_release_machine(lb_legacy_lock *l);
lb_machine *lb__legacy_extend_machine(lb_legacy_lock *l, int64_t ttl_ms);

#endif
