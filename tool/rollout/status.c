/* `lockbridge status`: every lock key matching a pattern, by format, TTL and
 * holder age; the namespace's mode, census and gate record; whether the next
 * migration stage is safe, with the reasons; and an alarm when a legacy writer
 * shows up in a modern namespace. */
#include <stdio.h>
#include <string.h>

#include "tool/common/keys.h"
#include "tool/common/server.h"
#include "tool/rollout/gate.h"
#include "tool/rollout/survey.h"

#define COUNT_DEFAULT 1000
#define COUNT_MAX 100000
#define TEXT_ROWS_DEFAULT 100               /* lock rows in the text table */
#define LIMIT_MAX INT64_C(1000000000)

static const lb__cli_optdef opts[] = {
    {"--ns", 1},        {"--match", 1},    {"--count", 1}, {"--codec", LB__CLI_REPEAT},
    {"--ttl-ms", 1},    {"--window-ms", 1}, {"--stale-ms", 1}, {"--limit", 1},
    {NULL, 0}};

static const char help[] =
    "usage: lockbridge status --ns NS [--match PATTERN] [--count N] [--codec SPEC]...\n"
    "                         [--ttl-ms N] [--window-ms N] [--stale-ms N] [--limit N]\n"
    "                         [--json]\n"
    "\n"
    "Scans the keys matching PATTERN with SCAN (never KEYS) and reads each in\n"
    "batches (type, value, PTTL), then reads namespace NS's mode and census. Shows\n"
    "each lock's format, TTL and holder age; counts by format, TTL-less keys, and\n"
    "legacy locks expired but still present; the census's live and stale entries per\n"
    "mode; and a verdict on the next stage (legacy -> compat -> modern) with its\n"
    "reasons: the same decision `mode set` makes, except the SETNX/GETSET\n"
    "observation, which only `mode set` makes (the verdict says so). The only write\n"
    "is to the namespace's gate record ({NS}:lb-gate): the legacy and modern\n"
    "writers this scan saw, so that the evidence outlives sweep and pruning.\n"
    "The verdict judges by the namespace's stored configuration (`mode config`):\n"
    "a value given here may only tighten it (a longer --ttl-ms, --window-ms or\n"
    "--stale-ms; the stored --match and --codec), and the verdict prints the\n"
    "values it judged by. Expiry and windows are judged by the server's clock.\n"
    "lockbridge's companion keys (a lock's fence, queue and fair state, the\n"
    "namespace's lb-mode, lb-census and lb-gate) are left out, by name and type.\n"
    "On a Redis Cluster node, every primary of the slot map is scanned and the\n"
    "counts added up.\n"
    "\n"
    "  --ns NS          the namespace whose mode and census are read (required)\n"
    "  --match PATTERN  SCAN MATCH glob of the lock keys (default: the namespace's\n"
    "                   stored pattern, else *)\n"
    "  --count N        SCAN COUNT hint, 1..100000 (default 1000)\n"
    "  --codec SPEC     a codec the fleet writes; repeat for several (default: the\n"
    "                   namespace's stored codecs, else ms)\n"
    "  --ttl-ms N       the fleet's lock validity, ms: gives holder ages\n"
    "                   (default: stored, else 30000, for the stage time)\n"
    "  --window-ms N    a legacy writer seen this recently blocks modern, ms\n"
    "                   (default: stored, else 3600000)\n"
    "  --stale-ms N     census entries not refreshed for this long are stale, ms\n"
    "                   (default: stored, else 30000)\n"
    "  --limit N        lock rows shown, 0..10^9 (default: 100 in text, all in JSON)\n"
    "  --json           \"lock\" JSON lines, then one \"status\" line\n"
    "\n"
    "A scan longer than a second prints its progress on stderr.\n"
    "Exit: 0 the next stage is safe (or modern is reached and no legacy writer is\n"
    "seen); 6 it is not (see the blockers); 7 ALARM: the namespace is modern and a\n"
    "legacy writer is live in it, or it has no control key and token values or\n"
    "modern clients are live in it (either way: mode set compat, as printed); 1\n"
    "usage (also a value looser than the stored one); 4 connection or Redis error.\n"
    "Connection: -h HOST -p PORT -s SOCKET -a PASSWORD --user USER -n DB.\n";

typedef struct rows {
    const lb__cli_codecs *cs;
    int64_t ttl_ms, limit;
    uint64_t shown;
} rows;

static void text_header(void) {
    printf("%-32s %-9s %-10s %12s %14s %12s\n", "KEY", "FORMAT", "DETAIL", "PTTL_MS",
           "REMAINING_MS", "AGE_MS");
}

static void text_num(int64_t v, int width) {
    if (v < 0) printf(" %*s", width, "-");
    else printf(" %*lld", width, (long long)v);
}

static void text_row(const rows *r, const lb__cli_key *k, const lb_class *cl) {
    char key[40], detail[48] = "";
    lb__escape(key, sizeof key, k->key, k->keylen);
    if (cl->format == LB_FORMAT_LEGACY || cl->format == LB_FORMAT_COMPAT)
        snprintf(detail, sizeof detail, "%s%s", r->cs->spec[cl->codec],
                 cl->expired ? ",expired" : "");
    else if (cl->format == LB_FORMAT_TOKEN)
        snprintf(detail, sizeof detail, "%s", lb_token_kind_name(cl->token));
    else if (cl->format == LB_FORMAT_INCR)
        snprintf(detail, sizeof detail, "%lld", (long long)cl->counter);
    else if (cl->format == LB_FORMAT_WRONGTYPE)
        snprintf(detail, sizeof detail, "%s", k->type);
    else if (cl->format == LB_FORMAT_AMBIGUOUS)
        lb__cli_ambiguity_detail(r->cs, cl, detail, sizeof detail);
    printf("%-32s %-9s %-10s", key, lb_format_name(cl->format), detail);
    text_num(cl->pttl_ms, 12);
    int timed = cl->format == LB_FORMAT_LEGACY || cl->format == LB_FORMAT_COMPAT;
    text_num(timed ? cl->remaining_ms : -1, 14);
    text_num(lb__cli_holder_age_ms(cl, r->ttl_ms), 12);
    putchar('\n');
}

static int on_row(const lb__cli_key *k, const lb_class *cl, void *ud) {
    rows *r = ud;
    if (r->limit >= 0 && r->shown >= (uint64_t)r->limit) return 0;
    if (r->shown++ == 0 && !lb__cli_is_json()) text_header();
    if (!lb__cli_is_json()) {
        text_row(r, k, cl);
        return 0;
    }
    cJSON *o = lb__cli_event("lock");
    if (o) lb__cli_add_bytes(o, "key", k->key, k->keylen);
    if (o) lb__cli_add_class(o, r->cs, cl, r->ttl_ms);
    return lb__cli_emit(o) == 0 ? 0 : -1;
}

static int alarm(const lb__cli_survey *s);

/* ---- The summary ---------------------------------------------------------------------- */
static const char *mode_shown(const lb__cli_survey *s) {
    if (s->mode_rc != LB_OK) return "unreadable";
    return s->mode_found ? lb_mode_name(s->mode) : "none";
}

static void add_census(cJSON *o, const lb__cli_survey *s) {
    cJSON *c = cJSON_AddObjectToObject(o, "census");
    for (int m = 0; c && m < 3; m++) {
        cJSON *e = cJSON_AddObjectToObject(c, lb_mode_name((lb_mode)m));
        if (e) lb__cli_add_i64(e, "live", (int64_t)s->census_live[m]);
        if (e) lb__cli_add_i64(e, "stale", (int64_t)s->census_stale[m]);
    }
    if (c) lb__cli_add_i64(c, "invalid", (int64_t)s->census_invalid);
}

static void add_reasons(cJSON *o, const lb__cli_verdict *v, int blocker, const char *name) {
    cJSON *arr = cJSON_AddArrayToObject(o, name);
    for (int i = 0; arr && i < v->n; i++)
        if (v->reason[i].blocker == blocker)
            cJSON_AddItemToArray(arr, cJSON_CreateString(v->reason[i].text));
}

/* The checks behind the blockers, by name (what `mode set --override` takes). */
static void add_checks(cJSON *o, const lb__cli_verdict *v) {
    cJSON *arr = cJSON_AddArrayToObject(o, "blocking_checks");
    for (int i = 0; arr && i < v->n; i++)
        if (v->reason[i].blocker)
            cJSON_AddItemToArray(arr, cJSON_CreateString(lb__cli_check_name(v->reason[i].check)));
}

static void summary_json(const char *ns, const lb__cli_survey *s, const char *next,
                         const lb__cli_verdict *v, const char *verdict) {
    cJSON *o = lb__cli_event("status"), *f;
    if (!o) return (void)lb__cli_emit(o);
    lb__cli_add_str(o, "ns", ns);
    lb__cli_add_str(o, "mode", mode_shown(s));
    lb__cli_add_bool(o, "mode_key_present", s->mode_found);
    lb__cli_add_i64(o, "scanned", (int64_t)s->scanned);
    lb__cli_add_i64(o, "keys", (int64_t)s->keys);
    lb__cli_add_i64(o, "companion_keys", (int64_t)s->companions);
    lb__cli_add_ms(o, "scan_ms", s->scan_ms);
    lb__cli_add_bool(o, "cluster", s->cluster);
    lb__cli_add_i64(o, "primaries_scanned", s->servers);
    if ((f = cJSON_AddObjectToObject(o, "formats")) != NULL)
        for (int i = 1; i < LB__CLI_FORMATS; i++)
            lb__cli_add_i64(f, lb_format_name((lb_format)i), (int64_t)s->per_format[i]);
    lb__cli_add_i64(o, "ttl_less", (int64_t)s->ttl_less);
    lb__cli_add_i64(o, "legacy_expired_present", (int64_t)s->legacy_expired);
    lb__cli_add_i64(o, "legacy_recent", (int64_t)s->legacy_recent);
    lb__cli_add_i64(o, "legacy_live", (int64_t)s->legacy_live);
    lb__cli_add_bool(o, "alarm", alarm(s));
    if (s->token_max_pttl_ms >= 0) lb__cli_add_i64(o, "token_max_pttl_ms", s->token_max_pttl_ms);
    add_census(o, s);
    if (next) lb__cli_add_str(o, "next", next);
    else cJSON_AddNullToObject(o, "next");
    lb__cli_add_str(o, "verdict", verdict);
    add_reasons(o, v, 1, "blockers");
    add_checks(o, v);
    add_reasons(o, v, 0, "notes");
    if (v->judged_by[0]) lb__cli_add_str(o, "judged_by", v->judged_by);
    lb__cli_emit(o);
}

static void summary_text(const char *ns, const lb__cli_survey *s, const char *next,
                         const lb__cli_verdict *v, const char *verdict, uint64_t more) {
    char shown[128];
    lb__escape(shown, sizeof shown, ns, strlen(ns));
    if (more) printf("... %llu more (--limit)\n", (unsigned long long)more);
    printf("\nnamespace %s: mode %s%s\n", shown, mode_shown(s),
           s->mode_found || s->mode_rc != LB_OK ? "" : " (no control key: followers may be in "
           "any mode; changes are checked as from each)");
    char on[48] = "";
    if (s->cluster) snprintf(on, sizeof on, " on %d cluster primaries", s->servers);
    printf("scanned %llu keys%s in %.2f s (%.0f keys/s); %llu companion keys left out\n",
           (unsigned long long)s->scanned, on, s->scan_ms / 1000.0,
           s->scan_ms > 0 ? (double)s->scanned * 1000.0 / s->scan_ms : 0.0,
           (unsigned long long)s->companions);
    printf("formats:");
    for (int i = 1; i < LB__CLI_FORMATS; i++)
        printf(" %s %llu%s", lb_format_name((lb_format)i), (unsigned long long)s->per_format[i],
               i + 1 < LB__CLI_FORMATS ? "," : "\n");
    printf("TTL-less keys: %llu; legacy locks expired but present: %llu\n",
           (unsigned long long)s->ttl_less, (unsigned long long)s->legacy_expired);
    printf("census (live/stale):");
    for (int m = 0; m < 3; m++)
        printf(" %s %llu/%llu%s", lb_mode_name((lb_mode)m), (unsigned long long)s->census_live[m],
               (unsigned long long)s->census_stale[m], m < 2 ? "," : "\n");
    printf("next stage: %s: %s\n", next ? next : "none (modern is the last)", verdict);
    for (int i = 0; i < v->n; i++) {
        if (v->reason[i].blocker)
            printf("  blocker: [%s] %s\n", lb__cli_check_name(v->reason[i].check),
                   v->reason[i].text);
        else printf("  note:    %s\n", v->reason[i].text);
    }
    if (v->judged_by[0]) printf("  %s\n", v->judged_by);
}

/* Token values or live modern clients seen by this survey. */
static int modern_live(const lb__cli_survey *s) {
    return s->per_format[LB_FORMAT_TOKEN] || s->census_live[LB_MODE_MODERN];
}

/* In modern, a live TTL-less timestamp or a live legacy census entry is a
 * legacy client writing beside token holders: the runbook's cue to step back.
 * Without a control key, followers may be in any mode: token holders beside
 * followers that may be legacy are the same danger. */
static int alarm(const lb__cli_survey *s) {
    if (s->mode_rc != LB_OK) return 0;
    if (!s->mode_found) return modern_live(s);
    return s->mode == LB_MODE_MODERN && (s->legacy_live || s->census_live[LB_MODE_LEGACY]);
}

static void alarm_text(const char *ns, const lb__cli_survey *s) {
    if (!s->mode_found) {
        fprintf(stderr, "ALARM: namespace %s has no control key, and token values or modern "
                "clients are live in it: followers may be in any mode, and a legacy one "
                "cannot read tokens. Set the mode every follower can share keys with: "
                "`lockbridge mode set compat --ns %s`.\n", ns, ns);
        return;
    }
    fprintf(stderr, "ALARM: namespace %s is modern and a legacy writer is live in it: %llu "
            "TTL-less value(s) running, %llu live legacy census entr(ies). Legacy clients "
            "cannot read tokens: step back now with `lockbridge mode set compat --ns %s`.\n",
            ns, (unsigned long long)s->legacy_live,
            (unsigned long long)s->census_live[LB_MODE_LEGACY], ns);
}

static int report(const char *ns, const lb__cli_survey *s, uint64_t more) {
    lb__cli_verdict v;
    lb__cli_gateopts go;
    memset(&go, 0, sizeof go);
    lb_mode from = s->mode_rc == LB_OK ? s->mode : LB_MODE_LEGACY;
    lb_mode to = from == LB_MODE_MODERN ? from : (lb_mode)(from + 1);
    char next[40];
    snprintf(next, sizeof next, "%s -> %s", mode_shown(s), lb_mode_name(to));
    lb__cli_survey_verdict(s, from, to, &go, &v);
    int alarmed = alarm(s);
    const char *verdict = alarmed ? (s->mode_found ? "ALARM: legacy writer in a modern namespace"
                                                   : "ALARM: no control key beside modern clients")
                          : v.ready ? (from == to ? "final" : "ready") : "not ready";
    if (lb__cli_is_json()) summary_json(ns, s, from == to ? NULL : next, &v, verdict);
    else summary_text(ns, s, from == to ? NULL : next, &v, verdict, more);
    if (alarmed) alarm_text(ns, s);
    if (alarmed) return LB__CLI_EXIT_ALARM;
    return v.ready ? LB__CLI_EXIT_OK : LB__CLI_EXIT_UNSAFE;
}

/* ---- Options ----------------------------------------------------------------------- */
int lb__cli_scanopts_read(lb__cli_scanopts *o, const lb__cli_args *a,
                          const lb__cli_optdef *defs) {
    int64_t count = COUNT_DEFAULT;
    char why[128], shown[80];
    const char *v = lb__cli_opt(a, defs, "--count");
    memset(o, 0, sizeof *o);
    o->match = lb__cli_opt(a, defs, "--match");
    if (!o->match) o->match = "*";
    if (lb__cli_pattern_check(o->match, why, sizeof why) != 0) {
        lb__escape(shown, sizeof shown, o->match, strlen(o->match));
        return lb__cli_usage(a, "bad --match \"%s\": %s", shown, why), -1;
    }
    if (v && lb__cli_int(a, "--count", v, 1, COUNT_MAX, &count) != 0) return -1;
    o->count = count;
    o->progress = 1;
    return 0;
}

/* Up to `max` namespaces found on the server: keys named "{NS}:lb-mode" (or
 * "NS:lb-mode" for a tagged NS) that hold a string. Printed on stderr. */
static void list_namespaces(const lb__cli_args *a, int max) {
    char err[256];
    redisContext *c = lb__cli_connect(&a->conn, err, sizeof err);
    if (!c) {
        fprintf(stderr, "  (no server to list namespaces from: %s)\n", err);
        return;
    }
    char cursor[32] = "0";
    int found = 0, rounds = 0;
    do {
        redisReply *r = redisCommand(c, "SCAN %s MATCH *:lb-mode COUNT 1000 TYPE string", cursor);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            if (r) freeReplyObject(r);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str ? r->element[0]->str : "0");
        const redisReply *keys = r->element[1];
        for (size_t i = 0; i < keys->elements && found < max; i++) {
            const char *k = keys->element[i]->str;
            size_t len = (size_t)keys->element[i]->len;
            if (lb_companion_of(k, len, NULL) != LB_COMPANION_MODE) continue;
            size_t nslen = len - strlen(":lb-mode");
            char shown[160];
            /* "{ns}:lb-mode" is ns's; "t{a}:lb-mode" is the tagged "t{a}"'s. */
            if (k[0] == '{' && k[nslen - 1] == '}' && !memchr(k + 1, '{', nslen - 2))
                lb__escape(shown, sizeof shown, k + 1, nslen - 2);
            else lb__escape(shown, sizeof shown, k, nslen);
            fprintf(stderr, "%s  --ns %s\n", found ? "" : "namespaces on this server:\n", shown);
            found++;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0 && found < max && ++rounds < 10000);
    if (!found) fprintf(stderr, "  (no namespace on this server yet: `lockbridge mode set compat "
                                "--ns NAME` creates one)\n");
    redisFree(c);
}

int lb__cli_ns_read(const lb__cli_args *a, const lb__cli_optdef *defs, const char **ns) {
    lb_ns_keys k;
    char shown[80];
    *ns = lb__cli_opt(a, defs, "--ns");
    if (!*ns) {
        lb__cli_usage(a, "--ns NS is required");
        fprintf(stderr, "A namespace names one fleet's migration: its control key {NS}:lb-mode "
                "holds the mode (legacy, compat, modern) its clients follow, {NS}:lb-census "
                "lists those clients, {NS}:lb-gate what the gate has seen. Clients are given "
                "it in their options (lb_mlock_options.ns, lockbridge hold --ns).\n");
        list_namespaces(a, 20);
        return -1;
    }
    if (lb_ns_keys_init(&k, *ns, strlen(*ns)) != LB_OK) {
        lb__escape(shown, sizeof shown, *ns, strlen(*ns));
        return lb__cli_usage(a, "bad --ns \"%s\": empty, too long, or a '}' without a hash "
                             "tag", shown), -1;
    }
    return 0;
}

static int read_opts(const lb__cli_args *a, lb__cli_gateconf *gc, rows *r) {
    const char *v;
    if (lb__cli_gateconf_given(a, opts, gc) != 0 ||
        ((v = lb__cli_opt(a, opts, "--limit")) &&
         lb__cli_int(a, "--limit", v, 0, LIMIT_MAX, &r->limit) != 0))
        return -1;
    r->ttl_ms = gc->given[LB__CLI_VAL_TTL] ? gc->cmdline[LB__CLI_VAL_TTL] : 0;
    return 0;
}

/* The values `mode set` would judge by, from the same gate record and options:
 * stored ones stand in for those not given, given ones may only tighten. The
 * scan's pattern may be the record's own: `g` must outlive `so`. */
static int judge_by(const lb__cli_args *a, redisContext *nc, const char *ns, lb__cli_gate *g,
                    lb__cli_gateconf *gc, lb__cli_survey *s, lb__cli_codecs *cs,
                    lb__cli_scanopts *so, char *err, size_t cap) {
    if (lb__cli_gate_read(nc, ns, g, err, cap) != 0) {
        if (!strstr(err, "WRONGTYPE")) return -1;
        lb__cli_gate_empty(g); /* the survey reads it again, and the verdict names it */
    }
    if (lb__cli_gateconf_scan(a, opts, ns, g, cs, so) != 0 ||
        lb__cli_gateconf_resolve(a, ns, g, gc) != 0)
        return 1;
    s->window_ms = gc->v[LB__CLI_VAL_WINDOW];
    s->stale_ms = gc->v[LB__CLI_VAL_STALE];
    return 0;
}

/* The scan's connection is unusable afterwards: a fresh one records what the
 * scan saw in the namespace's gate record. */
static int remember(const lb__cli_args *a, const lb__cli_topo *t, const lb__cli_survey *s,
                    const char *ns, char *err, size_t cap) {
    redisContext *w = t->cluster ? lb__cli_connect_ns(t, NULL, ns, err, cap)
                                 : lb__cli_connect(&a->conn, err, cap);
    if (!w) return -1;
    int rc = lb__cli_survey_remember(s, w, ns, err, cap);
    redisFree(w);
    return rc;
}

static int run(const lb__cli_args *a) {
    lb__cli_codecs cs;
    lb__cli_scanopts so;
    lb__cli_survey s;
    rows r;
    lb__cli_gateconf gc;
    const char *ns;
    memset(&s, 0, sizeof s);
    memset(&r, 0, sizeof r);
    r.limit = lb__cli_is_json() ? -1 : TEXT_ROWS_DEFAULT;
    if (a->npos != 0) return lb__cli_usage(a, "takes no arguments (the keys are --match)");
    if (lb__cli_ns_read(a, opts, &ns) != 0 || lb__cli_codecs_read(&cs, a, opts) != 0 ||
        lb__cli_scanopts_read(&so, a, opts) != 0 || read_opts(a, &gc, &r) != 0)
        return LB__CLI_EXIT_USAGE;
    s.cs = r.cs = &cs;
    s.row = on_row;
    s.row_ud = &r;
    char err[512];
    int code;
    lb__cli_topo t;
    redisContext *nc = NULL, *c = lb__cli_connect(&a->conn, err, sizeof err);
    if (!c) return lb__cli_error(a, NULL, LB_EIO, err);
    /* The namespace first: the scan's connection is not reused after it. On a
     * cluster its keys are read on the primary of their slot. */
    if (lb__cli_topo_read(&t, c, &a->conn, err, sizeof err) != 0) {
        redisFree(c);
        return lb__cli_error(a, NULL, LB_EREDIS, err);
    }
    lb__cli_gate g;
    int rc = (nc = lb__cli_connect_ns(&t, c, ns, err, sizeof err)) != NULL
                 ? judge_by(a, nc, ns, &g, &gc, &s, &cs, &so, err, sizeof err)
                 : -1;
    if (rc == 0 && lb__cli_survey_ns(&s, nc, ns, err, sizeof err) != 0) rc = -1;
    if (rc < 0) code = lb__cli_error(a, NULL, LB_EREDIS, err);
    else if (rc > 0) code = LB__CLI_EXIT_USAGE;
    else if (lb__cli_survey_keys(&s, &t, c, &so, err, sizeof err) != 0)
        code = lb__cli_error(a, NULL, LB_EREDIS, err);
    else {
        s.gate.val[LB__CLI_VAL_TTL] = gc.v[LB__CLI_VAL_TTL];
        s.gate.val[LB__CLI_VAL_REFRESH] = gc.v[LB__CLI_VAL_REFRESH];
        lb__cli_gateconf_say(&gc, so.match, &cs, LB__CLI_VAL_OBSERVE, s.judged_by,
                             sizeof s.judged_by);
        /* A read-only operator still gets the report; the evidence this scan
         * saw is then not kept, which the note says. */
        if (remember(a, &t, &s, ns, err, sizeof err) != 0)
            fprintf(stderr, "%s: note: what this scan saw is not recorded in the gate record "
                    "(%s)\n", a->prog, err);
        code = report(ns, &s, s.keys > r.shown ? s.keys - r.shown : 0);
    }
    lb__cli_ns_done(nc, c);
    lb__cli_topo_clear(&t);
    lb__cli_survey_clear(&s);
    redisFree(c);
    return code;
}

const lb__cli_command lb__cli_cmd_status = {
    "status", "lock keys by format, the mode, the census, and the next stage's verdict",
    help, opts, 0, run, 0};
