/* What the gate keeps and watches: the gate record ({ns}:lb-gate), the values it
 * judges by, the namespaces on a server, values seen, and MONITOR's SETNX/GETSET. */
#ifndef LOCKBRIDGE_CLI_GATE_H
#define LOCKBRIDGE_CLI_GATE_H

#include "tool/common/keys.h"
#include "tool/common/server.h"

/* ---- Fingerprints of values seen (tool/rollout/seen.c) -------------------------------- */
typedef struct lb__cli_seen {
    uint64_t *slot; /* open addressing; 0 is empty */
    size_t cap, n;
} lb__cli_seen;
uint64_t lb__cli_fingerprint(const char *key, size_t keylen, const char *value, size_t vlen);
/* 1 added, 0 already there, -1 out of memory. */
int lb__cli_seen_add(lb__cli_seen *s, uint64_t fp);
void lb__cli_seen_clear(lb__cli_seen *s);

/* ---- Watching (watch.c) ------------------------------------------------------------- */
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

/* ---- The gate record ({ns}:lb-gate, tool/rollout/gate.c) ---------------------------- */
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
 * be the stored ones. so->match may then point into `g`, which must outlive
 * `so`. 0, or -1 (usage). */
int lb__cli_gateconf_scan(const lb__cli_args *a, const lb__cli_optdef *opts, const char *ns,
                          const lb__cli_gate *g, lb__cli_codecs *cs, lb__cli_scanopts *so);
/* "judged by validity N ms (stored), ... --match 'P', --codec 'C'" for the
 * first `upto` values. */
void lb__cli_gateconf_say(const lb__cli_gateconf *c, const char *match,
                          const lb__cli_codecs *cs, int upto, char *buf, size_t cap);

#endif
