/* Lock keys as the tool reads them: in bulk by SCAN, judged by the library's
 * format classifier, and matched by Redis's glob patterns. */
#ifndef LOCKBRIDGE_CLI_KEYS_H
#define LOCKBRIDGE_CLI_KEYS_H

#include "tool/common/cli.h"

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

/* ---- Patterns (glob.c) -------------------------------------------------------------- */
/* 1 when `s` matches the Redis glob `pattern` (SCAN MATCH's rules). */
int lb__cli_glob(const char *pattern, size_t plen, const char *s, size_t slen);

#endif
