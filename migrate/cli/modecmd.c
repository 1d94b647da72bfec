/* `lockbridge mode get|set`: a namespace's mode in its control key. Setting
 * modern is refused while a legacy writer was seen recently; stepping back
 * warns while token values are still held. */
#include <stdio.h>
#include <string.h>

#include "migrate/cli/cli.h"

#define WINDOW_MS_DEFAULT INT64_C(3600000) /* an hour, milliseconds */
#define STALE_MS_DEFAULT INT64_C(30000)    /* milliseconds */
#define OBSERVE_MS_DEFAULT INT64_C(5000)   /* watching before modern, milliseconds */
#define OBSERVE_PAUSE_MS 100               /* between the observation's scans, ms */

static const lb__cli_optdef opts[] = {
    {"--ns", 1},        {"--force", 0},     {"--match", 1},    {"--count", 1},
    {"--codec", LB__CLI_REPEAT}, {"--window-ms", 1}, {"--stale-ms", 1}, {"--observe-ms", 1},
    {NULL, 0}};

static const char help[] =
    "usage: lockbridge mode get --ns NS [--json]\n"
    "       lockbridge mode set legacy|compat|modern --ns NS [--force] [--match PATTERN]\n"
    "                           [--count N] [--codec SPEC]... [--window-ms N]\n"
    "                           [--stale-ms N] [--observe-ms N] [--json]\n"
    "\n"
    "get prints namespace NS's mode (an absent control key means legacy).\n"
    "set writes it and publishes it to the clients that follow it, atomically and\n"
    "only if the mode is still the one read (a concurrent change is refused).\n"
    "\n"
    "Before setting modern, set scans the keys matching PATTERN and reads the census;\n"
    "it refuses while a legacy writer was seen within the window: TTL-less\n"
    "timestamps running or expired within it, census entries in legacy mode seen\n"
    "within it, INCR counters; and it refuses legacy -> modern (not adjacent).\n"
    "A legacy client that releases its locks leaves nothing for one scan to see, so\n"
    "set also watches for --observe-ms: it scans again and again and compares the\n"
    "server's count of SETNX and GETSET calls (INFO commandstats) before and after;\n"
    "any growth refuses modern, as only the legacy protocol sends them.\n"
    "Stepping back (modern -> compat, compat -> legacy) scans for token values and\n"
    "warns how many there are and when the last lapses (its PTTL); modern -> legacy\n"
    "is refused. --force sets the mode whatever the checks say.\n"
    "On a Redis Cluster node, the control key is read and written on the primary\n"
    "that owns its slot, every primary is scanned, and the SETNX and GETSET counts\n"
    "are summed over the primaries.\n"
    "\n"
    "  --ns NS          the namespace (required)\n"
    "  --force          set even when the checks refuse\n"
    "  --match PATTERN  SCAN MATCH glob of the lock keys (default *)\n"
    "  --count N        SCAN COUNT hint, 1..100000 (default 1000)\n"
    "  --codec SPEC     a codec the fleet writes; repeat for several (default ms)\n"
    "  --window-ms N    how recent a legacy writer must be to refuse, ms\n"
    "                   (default 3600000)\n"
    "  --stale-ms N     census entries not refreshed for this long are stale, ms\n"
    "                   (default 30000)\n"
    "  --observe-ms N   watch for legacy writers before setting modern, ms; 0: one\n"
    "                   scan only (default 5000)\n"
    "\n"
    "Exit: 0 read, or set (or already so); 1 usage; 3 the control key holds\n"
    "something that is not a mode name (left alone); 4 connection or Redis error;\n"
    "6 set refused by the checks or by a concurrent change (nothing written).\n"
    "Connection: -h HOST -p PORT -s SOCKET -a PASSWORD --user USER -n DB.\n";

static int foreign_key(const lb__cli_args *a, const char *ns, int rc) {
    char shown[128];
    lb_ns_keys k;
    lb_ns_keys_init(&k, ns, strlen(ns));
    lb__cli_printable(shown, sizeof shown, k.mode, k.modelen);
    fprintf(stderr, "%s: the control key %s holds %s; it is left alone\n", a->prog, shown,
            rc == LB_EWRONGTYPE ? "another Redis type" : "something that is not a mode name");
    cJSON *o = lb__cli_event("mode");
    if (o) lb__cli_add_str(o, "ns", ns);
    if (o) lb__cli_add_str(o, "status", lb_err_name(rc));
    if (lb__cli_is_json()) lb__cli_emit(o);
    else cJSON_Delete(o);
    return LB__CLI_EXIT_FOREIGN;
}

static int get(const lb__cli_args *a, redisContext *c, const char *ns) {
    /* On a cluster, `c` is the primary that owns the control key's slot. */
    lb_mode m;
    int found;
    int rc = lb_mode_get(c, ns, strlen(ns), &m, &found);
    if (rc == LB_EFOREIGN || rc == LB_EWRONGTYPE) return foreign_key(a, ns, rc);
    if (rc != LB_OK) return lb__cli_error(a, NULL, rc, c->errstr[0] ? c->errstr : lb_strerror(rc));
    if (!lb__cli_is_json()) {
        printf("%s%s\n", lb_mode_name(m), found ? "" : " (no control key)");
        return LB__CLI_EXIT_OK;
    }
    cJSON *o = lb__cli_event("mode");
    if (o) lb__cli_add_str(o, "ns", ns);
    if (o) lb__cli_add_str(o, "mode", lb_mode_name(m));
    if (o) lb__cli_add_bool(o, "control_key_present", found);
    lb__cli_emit(o);
    return LB__CLI_EXIT_OK;
}

/* ---- set ------------------------------------------------------------------------------ */
typedef struct change {
    const char *ns;
    lb_mode from, to;
    int force, checked, changed;
    long long receivers;
    lb__cli_verdict v;
} change;

static void report(const change *ch, const char *outcome) {
    if (!lb__cli_is_json()) {
        printf("%s: %s -> %s: %s\n", ch->ns, lb_mode_name(ch->from), lb_mode_name(ch->to),
               outcome);
        for (int i = 0; i < ch->v.n; i++)
            printf("  %s %s\n", ch->v.reason[i].blocker ? "blocker:" : "note:   ",
                   ch->v.reason[i].text);
        if (ch->changed) printf("  notified at once: %lld client(s)\n", ch->receivers);
        return;
    }
    cJSON *o = lb__cli_event("mode_set"), *arr;
    if (!o) return (void)lb__cli_emit(o);
    lb__cli_add_str(o, "ns", ch->ns);
    lb__cli_add_str(o, "from", lb_mode_name(ch->from));
    lb__cli_add_str(o, "to", lb_mode_name(ch->to));
    lb__cli_add_str(o, "outcome", outcome);
    lb__cli_add_bool(o, "changed", ch->changed);
    lb__cli_add_bool(o, "forced", ch->force && !ch->v.ready);
    lb__cli_add_bool(o, "checked", ch->checked);
    if (ch->changed) lb__cli_add_i64(o, "receivers", ch->receivers);
    for (int b = 1; b >= 0; b--)
        if ((arr = cJSON_AddArrayToObject(o, b ? "blockers" : "warnings")) != NULL)
            for (int i = 0; i < ch->v.n; i++)
                if (ch->v.reason[i].blocker == b)
                    cJSON_AddItemToArray(arr, cJSON_CreateString(ch->v.reason[i].text));
    lb__cli_emit(o);
}

typedef struct checks {
    lb__cli_codecs cs;
    lb__cli_scanopts so;
    int64_t window_ms, stale_ms, observe_ms;
} checks;

/* Read before connecting, so that a usage error sends nothing. */
static int checks_read(const lb__cli_args *a, checks *k) {
    const char *v;
    k->window_ms = WINDOW_MS_DEFAULT;
    k->stale_ms = STALE_MS_DEFAULT;
    k->observe_ms = OBSERVE_MS_DEFAULT;
    if (lb__cli_codecs_read(&k->cs, a, opts) != 0 || lb__cli_scanopts_read(&k->so, a, opts) != 0 ||
        ((v = lb__cli_opt(a, opts, "--window-ms")) &&
         lb__cli_int(a, "--window-ms", v, 0, LB__CLI_MS_MAX, &k->window_ms) != 0) ||
        ((v = lb__cli_opt(a, opts, "--stale-ms")) &&
         lb__cli_int(a, "--stale-ms", v, 1, LB__CLI_MS_MAX, &k->stale_ms) != 0) ||
        ((v = lb__cli_opt(a, opts, "--observe-ms")) &&
         lb__cli_int(a, "--observe-ms", v, 0, 3600000, &k->observe_ms) != 0))
        return -1;
    return 0;
}

/* Scans again until observe_ms has passed, each time on a fresh connection (a
 * scan leaves its own unusable), counting the TTL-less timestamps seen; then
 * the growth of the server's SETNX and GETSET counts since `calls0` (on a
 * cluster, summed over every primary). */
static int observe(const lb__cli_args *a, const lb__cli_topo *t, const checks *k,
                   lb__cli_survey *s, double t0, int64_t calls0, char *err, size_t cap) {
    s->observe_ms = k->observe_ms;
    for (;;) {
        double left = t0 + (double)k->observe_ms - lb__cli_mono_ms();
        if (left <= 0) break;
        lb__cli_sleep_ms(left < OBSERVE_PAUSE_MS ? (int64_t)left + 1 : OBSERVE_PAUSE_MS);
        redisContext *c = lb__cli_connect(&a->conn, err, cap);
        if (!c) return -1;
        lb__cli_survey pass;
        memset(&pass, 0, sizeof pass);
        pass.window_ms = k->window_ms;
        pass.cs = &k->cs;
        int rc = lb__cli_survey_keys(&pass, t, c, &k->so, err, cap);
        redisFree(c);
        if (rc != 0) return -1;
        s->observe_passes++;
        s->observe_legacy += pass.legacy_recent;
    }
    int64_t calls1;
    redisContext *c = lb__cli_connect(&a->conn, err, cap);
    if (!c) return -1;
    int rc = lb__cli_legacy_calls_all(t, c, &calls1, err, cap);
    redisFree(c);
    if (rc != 0) return -1;
    s->legacy_calls = calls0 >= 0 && calls1 >= 0 ? calls1 - calls0 : -1;
    return 0;
}

/* Moving to modern, or back from it, needs the evidence of a scan and the
 * census (and, to modern, of an observation); legacy <-> compat needs none. */
static int check(const lb__cli_args *a, const lb__cli_topo *t, redisContext *c,
                 redisContext *nc, const checks *k, change *ch, char *err, size_t cap) {
    lb__cli_survey s;
    memset(&s, 0, sizeof s);
    s.window_ms = k->window_ms;
    s.stale_ms = k->stale_ms;
    s.cs = &k->cs;
    memset(&ch->v, 0, sizeof ch->v);
    ch->v.ready = 1;
    if (ch->to != LB_MODE_MODERN && ch->from != LB_MODE_MODERN) return 0;
    int watch = ch->to == LB_MODE_MODERN && k->observe_ms > 0;
    double t0 = lb__cli_mono_ms();
    int64_t calls0 = -1;
    if (watch && lb__cli_legacy_calls_all(t, c, &calls0, err, cap) != 0) return -1;
    if (lb__cli_survey_ns(&s, nc, ch->ns, err, cap) != 0) return -1;
    if (lb__cli_survey_keys(&s, t, c, &k->so, err, cap) != 0) return -1;
    if (watch && observe(a, t, k, &s, t0, calls0, err, cap) != 0) return -1;
    ch->checked = 1;
    lb__cli_survey_verdict(&s, ch->from, ch->to, &ch->v);
    /* Stepping back two stages puts legacy clients beside token values. */
    if (ch->from == LB_MODE_MODERN && ch->to == LB_MODE_LEGACY && ch->v.n < LB__CLI_MAX_REASONS) {
        snprintf(ch->v.reason[ch->v.n].text, sizeof ch->v.reason[0].text,
                 "modern and legacy are not adjacent: step back through compat first");
        ch->v.reason[ch->v.n++].blocker = 1;
        ch->v.ready = 0;
    }
    /* Only moving forward to modern is refused on evidence; stepping back is
     * always allowed between adjacent modes, with the warnings. */
    if (ch->to != LB_MODE_MODERN && !(ch->from == LB_MODE_MODERN && ch->to == LB_MODE_LEGACY))
        for (int i = 0; i < ch->v.n; i++) ch->v.reason[i].blocker = 0;
    ch->v.ready = 1;
    for (int i = 0; i < ch->v.n; i++)
        if (ch->v.reason[i].blocker) ch->v.ready = 0;
    return 0;
}

static int set(const lb__cli_args *a, const lb__cli_topo *t, redisContext *c,
               redisContext *nc, const char *ns, lb_mode to, const checks *k) {
    change ch;
    char err[512];
    int found;
    memset(&ch, 0, sizeof ch);
    ch.ns = ns;
    ch.to = to;
    ch.force = lb__cli_opt(a, opts, "--force") != NULL;
    int rc = lb_mode_get(nc, ns, strlen(ns), &ch.from, &found);
    if (rc == LB_EFOREIGN || rc == LB_EWRONGTYPE) return foreign_key(a, ns, rc);
    if (rc != LB_OK)
        return lb__cli_error(a, NULL, rc, nc->errstr[0] ? nc->errstr : lb_strerror(rc));
    if (ch.from == ch.to && found) return report(&ch, "already set"), LB__CLI_EXIT_OK;
    /* The scan leaves its connection unusable: a fresh one writes the mode (on
     * a cluster, on the primary that owns the control key's slot). */
    rc = check(a, t, c, nc, k, &ch, err, sizeof err);
    if (rc < 0) return lb__cli_error(a, NULL, LB_EREDIS, err);
    if (!ch.v.ready && !ch.force) return report(&ch, "refused"), LB__CLI_EXIT_UNSAFE;
    redisContext *w = t->cluster ? lb__cli_connect_ns(t, NULL, ns, err, sizeof err)
                                 : lb__cli_connect(&a->conn, err, sizeof err);
    if (!w) return lb__cli_error(a, NULL, LB_EIO, err);
    rc = lb_mode_set(w, ns, strlen(ns), ch.to, &ch.from, &ch.receivers);
    redisFree(w);
    if (rc == LB_ESTATE) {
        fprintf(stderr, "%s: the mode changed while it was being checked; nothing written\n",
                a->prog);
        return report(&ch, "refused: changed meanwhile"), LB__CLI_EXIT_UNSAFE;
    }
    if (rc != LB_OK) return lb__cli_error(a, NULL, rc, lb_strerror(rc));
    ch.changed = 1;
    report(&ch, ch.v.ready ? "set" : "set (forced)");
    return LB__CLI_EXIT_OK;
}

static int run(const lb__cli_args *a) {
    const char *ns;
    checks k;
    lb_mode to = LB_MODE_LEGACY;
    char shown[64];
    int is_get = a->npos >= 1 && strcmp(a->pos[0], "get") == 0;
    int is_set = a->npos >= 1 && strcmp(a->pos[0], "set") == 0;
    if (!is_get && !is_set) return lb__cli_usage(a, "expects get or set");
    if (is_get && a->npos != 1) return lb__cli_usage(a, "get takes no MODE");
    if (is_set && a->npos != 2) return lb__cli_usage(a, "set expects one MODE");
    if (lb__cli_ns_read(a, opts, &ns) != 0) return LB__CLI_EXIT_USAGE;
    if (is_get) {
        for (int i = 1; opts[i].name; i++)
            if (a->opt[i]) return lb__cli_usage(a, "%s applies to set only", opts[i].name);
    }
    if (is_set && lb_mode_parse(a->pos[1], strlen(a->pos[1]), &to) != LB_OK) {
        lb__cli_printable(shown, sizeof shown, a->pos[1], strlen(a->pos[1]));
        return lb__cli_usage(a, "unknown mode \"%s\" (legacy, compat or modern)", shown);
    }
    if (is_set && checks_read(a, &k) != 0) return LB__CLI_EXIT_USAGE;
    char err[512];
    lb__cli_topo t;
    redisContext *nc, *c = lb__cli_connect(&a->conn, err, sizeof err);
    if (!c) return lb__cli_error(a, NULL, LB_EIO, err);
    if (lb__cli_topo_read(&t, c, &a->conn, err, sizeof err) != 0) {
        redisFree(c);
        return lb__cli_error(a, NULL, LB_EREDIS, err);
    }
    int code;
    if (!(nc = lb__cli_connect_ns(&t, c, ns, err, sizeof err)))
        code = lb__cli_error(a, NULL, LB_EIO, err);
    else code = is_get ? get(a, nc, ns) : set(a, &t, c, nc, ns, to, &k);
    lb__cli_ns_done(nc, c);
    lb__cli_topo_clear(&t);
    redisFree(c);
    return code;
}

const lb__cli_command lb__cli_cmd_mode = {
    "mode", "read or change a namespace's mode (legacy, compat, modern)", help, opts, 2, run,
    0};
