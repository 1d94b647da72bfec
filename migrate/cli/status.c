/* `lockbridge status`: every lock key matching a pattern, by format, TTL and
 * holder age; the namespace's mode and census; and whether the next migration
 * stage is safe, with the reasons. Read-only. */
#include <stdio.h>
#include <string.h>

#include "migrate/cli/cli.h"

#define COUNT_DEFAULT 1000
#define COUNT_MAX 100000
#define WINDOW_MS_DEFAULT INT64_C(3600000) /* an hour, milliseconds */
#define STALE_MS_DEFAULT INT64_C(30000)    /* milliseconds */
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
    "reasons. Nothing is written. lockbridge's companion keys ({k}:fence,\n"
    "{ns}:lb-mode, {ns}:lb-census, ...) are left out. On a Redis Cluster node,\n"
    "every primary of the slot map is scanned and the counts added up.\n"
    "\n"
    "  --ns NS          the namespace whose mode and census are read (required)\n"
    "  --match PATTERN  SCAN MATCH glob of the lock keys (default *)\n"
    "  --count N        SCAN COUNT hint, 1..100000 (default 1000)\n"
    "  --codec SPEC     a codec the fleet writes; repeat for several (default ms)\n"
    "  --ttl-ms N       the fleet's lock validity, ms: gives holder ages\n"
    "  --window-ms N    a legacy writer seen this recently blocks modern, ms\n"
    "                   (default 3600000)\n"
    "  --stale-ms N     census entries not refreshed for this long are stale, ms\n"
    "                   (default 30000)\n"
    "  --limit N        lock rows shown, 0..10^9 (default: 100 in text, all in JSON)\n"
    "  --json           \"lock\" JSON lines, then one \"status\" line\n"
    "\n"
    "A scan longer than a second prints its progress on stderr.\n"
    "Exit: 0 the next stage is safe (or modern, the last, is reached); 6 it is not\n"
    "(see the blockers); 1 usage; 4 connection or Redis error.\n"
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
    lb__cli_printable(key, sizeof key, k->key, k->keylen);
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

/* ---- The summary ---------------------------------------------------------------------- */
static const char *mode_shown(const lb__cli_survey *s) {
    if (s->mode_rc != LB_OK) return "unreadable";
    return lb_mode_name(s->mode);
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
    if (s->token_max_pttl_ms >= 0) lb__cli_add_i64(o, "token_max_pttl_ms", s->token_max_pttl_ms);
    add_census(o, s);
    if (next) lb__cli_add_str(o, "next", next);
    else cJSON_AddNullToObject(o, "next");
    lb__cli_add_str(o, "verdict", verdict);
    add_reasons(o, v, 1, "blockers");
    add_reasons(o, v, 0, "notes");
    lb__cli_emit(o);
}

static void summary_text(const char *ns, const lb__cli_survey *s, const char *next,
                         const lb__cli_verdict *v, const char *verdict, uint64_t more) {
    char shown[128];
    lb__cli_printable(shown, sizeof shown, ns, strlen(ns));
    if (more) printf("... %llu more (--limit)\n", (unsigned long long)more);
    printf("\nnamespace %s: mode %s%s\n", shown, mode_shown(s),
           s->mode_found || s->mode_rc != LB_OK ? "" : " (no control key: legacy)");
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
    for (int i = 0; i < v->n; i++)
        printf("  %s %s\n", v->reason[i].blocker ? "blocker:" : "note:   ", v->reason[i].text);
}

static int report(const char *ns, const lb__cli_survey *s, uint64_t more) {
    lb__cli_verdict v;
    lb_mode from = s->mode_rc == LB_OK ? s->mode : LB_MODE_LEGACY;
    lb_mode to = from == LB_MODE_MODERN ? from : (lb_mode)(from + 1);
    char next[40];
    snprintf(next, sizeof next, "%s -> %s", lb_mode_name(from), lb_mode_name(to));
    lb__cli_survey_verdict(s, from, to, &v);
    const char *verdict = v.ready ? (from == to ? "final" : "ready") : "not ready";
    if (lb__cli_is_json()) summary_json(ns, s, from == to ? NULL : next, &v, verdict);
    else summary_text(ns, s, from == to ? NULL : next, &v, verdict, more);
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
        lb__cli_printable(shown, sizeof shown, o->match, strlen(o->match));
        return lb__cli_usage(a, "bad --match \"%s\": %s", shown, why), -1;
    }
    if (v && lb__cli_int(a, "--count", v, 1, COUNT_MAX, &count) != 0) return -1;
    o->count = count;
    o->progress = 1;
    return 0;
}

int lb__cli_ns_read(const lb__cli_args *a, const lb__cli_optdef *defs, const char **ns) {
    lb_ns_keys k;
    char shown[80];
    *ns = lb__cli_opt(a, defs, "--ns");
    if (!*ns) return lb__cli_usage(a, "--ns NS is required"), -1;
    if (lb_ns_keys_init(&k, *ns, strlen(*ns)) != LB_OK) {
        lb__cli_printable(shown, sizeof shown, *ns, strlen(*ns));
        return lb__cli_usage(a, "bad --ns \"%s\": empty, too long, or a '}' without a hash "
                             "tag", shown), -1;
    }
    return 0;
}

static int read_opts(const lb__cli_args *a, lb__cli_survey *s, rows *r) {
    const char *v;
    if (((v = lb__cli_opt(a, opts, "--ttl-ms")) &&
         lb__cli_int(a, "--ttl-ms", v, 1, LB__CLI_MS_MAX, &r->ttl_ms) != 0) ||
        ((v = lb__cli_opt(a, opts, "--window-ms")) &&
         lb__cli_int(a, "--window-ms", v, 0, LB__CLI_MS_MAX, &s->window_ms) != 0) ||
        ((v = lb__cli_opt(a, opts, "--stale-ms")) &&
         lb__cli_int(a, "--stale-ms", v, 1, LB__CLI_MS_MAX, &s->stale_ms) != 0) ||
        ((v = lb__cli_opt(a, opts, "--limit")) &&
         lb__cli_int(a, "--limit", v, 0, LIMIT_MAX, &r->limit) != 0))
        return -1;
    return 0;
}

static int run(const lb__cli_args *a) {
    lb__cli_codecs cs;
    lb__cli_scanopts so;
    lb__cli_survey s;
    rows r;
    const char *ns;
    memset(&s, 0, sizeof s);
    memset(&r, 0, sizeof r);
    s.window_ms = WINDOW_MS_DEFAULT;
    s.stale_ms = STALE_MS_DEFAULT;
    r.limit = lb__cli_is_json() ? -1 : TEXT_ROWS_DEFAULT;
    if (a->npos != 0) return lb__cli_usage(a, "takes no arguments (the keys are --match)");
    if (lb__cli_ns_read(a, opts, &ns) != 0 || lb__cli_codecs_read(&cs, a, opts) != 0 ||
        lb__cli_scanopts_read(&so, a, opts) != 0 || read_opts(a, &s, &r) != 0)
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
    if (!(nc = lb__cli_connect_ns(&t, c, ns, err, sizeof err)) ||
        lb__cli_survey_ns(&s, nc, ns, err, sizeof err) != 0 ||
        lb__cli_survey_keys(&s, &t, c, &so, err, sizeof err) != 0)
        code = lb__cli_error(a, NULL, LB_EREDIS, err);
    else code = report(ns, &s, s.keys > r.shown ? s.keys - r.shown : 0);
    lb__cli_ns_done(nc, c);
    lb__cli_topo_clear(&t);
    redisFree(c);
    return code;
}

const lb__cli_command lb__cli_cmd_status = {
    "status", "lock keys by format, the mode, the census, and the next stage's verdict",
    help, opts, 0, run, 0};
