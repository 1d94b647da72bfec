/* The survey behind `status` and `mode set`, the checks a change of mode passes,
 * and the verdict they give (survey.c, verdict.c). */
#ifndef LOCKBRIDGE_CLI_SURVEY_H
#define LOCKBRIDGE_CLI_SURVEY_H

#include "tool/rollout/gate.h"

/* ---- The survey behind status and mode set (survey.c) ----------------------------- */
#define LB__CLI_FORMATS 8 /* lb_format values */
#define LB__CLI_MAX_REASONS 16
#define LB__CLI_EXAMPLES 5 /* keys named behind each blocker */

/* What keys a blocker names: their printable name and remaining validity. */
enum { LB__CLI_EX_LEGACY, LB__CLI_EX_INCR, LB__CLI_EX_TOKEN, LB__CLI_EX_KINDS };
typedef struct lb__cli_examples {
    int n;
    struct {
        char key[72];
        int64_t remaining_ms; /* -1: unknown or none */
    } key[LB__CLI_EXAMPLES];
} lb__cli_examples;

typedef struct lb__cli_survey {
    /* Set by the caller. */
    const lb__cli_codecs *cs;
    int64_t window_ms; /* a legacy writer seen this recently blocks modern, ms */
    int64_t stale_ms;  /* census entries older than this are stale, ms */
    /* Called for each lock key read (not companions); may be NULL. */
    int (*row)(const lb__cli_key *k, const lb_class *cl, void *ud);
    void *row_ud;
    /* Values seen: filled when `track` is set (the observation's first scan);
     * later scans count what is not in it. */
    int track;
    lb__cli_seen seen;
    /* Keys. */
    uint64_t scanned, keys, companions;
    uint64_t per_format[LB__CLI_FORMATS];
    uint64_t ttl_less;       /* keys without a TTL */
    uint64_t legacy_expired; /* TTL-less timestamps past their expiry, still present */
    uint64_t legacy_recent;  /* TTL-less timestamps running or expired within the window */
    uint64_t legacy_live;    /* TTL-less timestamps still running (or not judgeable) */
    uint64_t mono;           /* TTL-less timestamps on a monotonic clock */
    int64_t legacy_until_ms; /* the latest expiry of a TTL-less timestamp seen, epoch ms; -1 */
    int64_t ahead_max_ms;    /* the furthest a timestamp runs ahead of now, ms; 0 none */
    int64_t token_max_pttl_ms; /* the longest token TTL; -1 without tokens */
    lb__cli_examples ex[LB__CLI_EX_KINDS];
    const char *match;       /* the pattern scanned */
    double scan_ms;
    int cluster;             /* 1: the server is a cluster node */
    int servers;             /* servers scanned: 1, or the cluster's primaries */
    /* Namespace. */
    int mode_rc, mode_found;
    lb_mode mode;
    uint64_t census_live[3], census_stale[3], census_legacy_recent, census_invalid;
    int64_t census_legacy_seen_ms; /* the last refresh of a legacy-mode entry, epoch ms; -1 */
    int census_unreadable;
    lb__cli_gate gate;       /* the namespace's gate record */
    char judged_by[400];     /* the values the verdict judged by, for people */
    int gate_unreadable;     /* the record is not a hash */
    int64_t now_ms;          /* the server's clock when the namespace was read, epoch ms */
    /* Observation before setting modern (mode set --observe-ms). */
    int64_t observe_ms;        /* how long it watched, ms; 0: a single scan */
    uint64_t observe_passes;   /* scans after the first */
    uint64_t observe_changed;  /* TTL-less timestamps that appeared or changed meanwhile */
    uint64_t observe_static;   /* TTL-less timestamps seen again unchanged */
    int64_t legacy_calls;      /* SETNX + GETSET calls the server ran meanwhile; -1 unknown */
    int64_t scoped_calls;      /* of those, on the namespace's keys (MONITOR); -1 not scoped */
    int64_t other_calls;       /* on other keys (MONITOR); -1 not scoped */
    int calls_backwards;       /* the server's counts went down (reset, restart, failover) */
} lb__cli_survey;

/* The checks a change of mode passes; each blocker belongs to one. Every one
 * but adjacency can be skipped by name (mode set --override NAME). */
enum {
    LB__CLI_CHECK_ADJACENCY,   /* legacy <-> modern: never skipped */
    LB__CLI_CHECK_CONTROL_KEY, /* the control key or the record is unreadable */
    LB__CLI_CHECK_INCR,        /* INCR counters among the keys */
    LB__CLI_CHECK_LEGACY,      /* a legacy writer seen within the window */
    LB__CLI_CHECK_OBSERVATION, /* the SETNX/GETSET observation could not be made */
    LB__CLI_CHECK_MODERN,      /* token values or modern clients, stepping back to legacy */
    LB__CLI_CHECK_STAGE_TIME,  /* the current stage is younger than its minimum */
    LB__CLI_CHECK_EMPTY_SCAN,  /* the scan matched no key */
    LB__CLI_CHECK_CENSUS,      /* the census is unreadable */
    LB__CLI_CHECK_SERVER_CALLS, /* SETNX/GETSET on the server, keys unknown */
    LB__CLI_CHECKS
};
/* The check's name for --override, or NULL. */
const char *lb__cli_check_name(int check);
/* The check named `name`, or -1 (also for adjacency, which cannot be skipped). */
int lb__cli_check_parse(const char *name);

typedef struct lb__cli_verdict {
    int ready; /* no blocker */
    char judged_by[400]; /* the values judged by (the survey's), for people */
    int n;
    struct {
        int blocker; /* 1: a reason not to go on; 0: worth knowing */
        int check;   /* LB__CLI_CHECK_*, or -1 for a note */
        int skipped; /* a blocker the operator overrode by name */
        char text[480];
    } reason[LB__CLI_MAX_REASONS];
} lb__cli_verdict;

/* Scans and counts (with `o`) on the server of `c`, or on every primary of the
 * cluster `t` describes; 0, or -1 with `err`. */
int lb__cli_survey_keys(lb__cli_survey *s, const lb__cli_topo *t, redisContext *c,
                        const lb__cli_scanopts *o, char *err, size_t cap);
/* Reads the namespace's mode, census and gate record; 0, or -1 with `err`. */
int lb__cli_survey_ns(lb__cli_survey *s, redisContext *c, const char *ns, char *err,
                      size_t cap);
/* Writes what this survey saw of legacy and modern writers into the
 * namespace's gate record, so that evidence outlives sweep and pruning. */
int lb__cli_survey_remember(const lb__cli_survey *s, redisContext *c, const char *ns,
                            char *err, size_t cap);
void lb__cli_survey_clear(lb__cli_survey *s);
/* 1 when the key is a legacy writer's by its look: a TTL-less string that is
 * a timestamp, or that the codecs read differently or not at all. */
int lb__cli_legacy_written(const lb__cli_key *k, const lb_class *cl);
/* Reads --match (default *, checked) and --count into `o`; 0 or -1 (usage). */
int lb__cli_scanopts_read(lb__cli_scanopts *o, const lb__cli_args *a,
                          const lb__cli_optdef *defs);
/* Reads the required --ns and checks it names valid companion keys; 0 or -1.
 * Without --ns, explains what a namespace is and lists the namespaces found on
 * the server (`c` may be NULL: no list). */
int lb__cli_ns_read(const lb__cli_args *a, const lb__cli_optdef *defs, const char **ns);

typedef struct lb__cli_gateopts {
    int observed;                /* 1: the observation was made (mode set) */
    int override[LB__CLI_CHECKS]; /* checks skipped by name */
} lb__cli_gateopts;
/* Whether moving from mode `from` to `to` is safe on this evidence, and why:
 * the one decision behind both `status` and `mode set`. */
void lb__cli_survey_verdict(const lb__cli_survey *s, lb_mode from, lb_mode to,
                            const lb__cli_gateopts *o, lb__cli_verdict *v);

#endif
