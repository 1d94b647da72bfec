/* `lockbridge mode get|set|config`: a namespace's mode in its control key and
 * the configuration its gate judges by. Every change is checked (verdict.c)
 * and written as a compare-and-set on the stage it checked. */
#include <stdio.h>
#include <string.h>

#include "tool/common/keys.h"
#include "tool/common/server.h"
#include "tool/rollout/gate.h"
#include "tool/rollout/survey.h"
#include "migrate/internal.h"

#define OBSERVE_PAUSE_MS 100               /* between the observation's scans, ms */

static const lb__cli_optdef opts[] = {
    {"--ns", 1},          {"--override", LB__CLI_REPEAT}, {"--match", 1},
    {"--count", 1},       {"--codec", LB__CLI_REPEAT},    {"--window-ms", 1},
    {"--stale-ms", 1},    {"--observe-ms", 1},            {"--ttl-ms", 1},
    {"--refresh-ms", 1},  {NULL, 0}};

static const char help[] =
    "usage: lockbridge mode get --ns NS [--json]\n"
    "       lockbridge mode set legacy|compat|modern --ns NS [--override CHECK]...\n"
    "                           [--match PATTERN] [--count N] [--codec SPEC]...\n"
    "                           [--ttl-ms N] [--refresh-ms N] [--window-ms N]\n"
    "                           [--stale-ms N] [--observe-ms N] [--json]\n"
    "       lockbridge mode config --ns NS [--match PATTERN] [--codec SPEC]...\n"
    "                           [--ttl-ms N] [--refresh-ms N] [--window-ms N]\n"
    "                           [--stale-ms N] [--observe-ms N] [--override VALUE]...\n"
    "                           [--json]\n"
    "\n"
    "get prints namespace NS's mode and the configuration its gate judges by. An\n"
    "absent control key means no mode is set: a follower that has read one keeps\n"
    "it, others use their configured mode, so a change is checked as from every\n"
    "mode (only compat is adjacent to all of them).\n"
    "set writes the mode and publishes it to the clients that follow it, as a\n"
    "compare-and-set on the stage it checked (its mode, or the key's absence, and\n"
    "when it began): a change that came in between is refused, nothing written.\n"
    "config shows, or with options changes, the configuration stored in the\n"
    "namespace's gate record ({NS}:lb-gate): the key pattern and codecs, the\n"
    "fleet's longest lock validity, the followers' mode refresh interval, the\n"
    "window, the census staleness and the watch before modern. Values given to\n"
    "status, mode set or sweep may only tighten these (a longer value, the same\n"
    "pattern and codecs); config loosens one only with --override VALUE (ttl-ms,\n"
    "refresh-ms, window-ms, stale-ms, observe-ms, match, codec) and prints it.\n"
    "Every verdict prints the values it judged by. Every instant is judged by the\n"
    "server's clock (TIME).\n"
    "\n"
    "Every change is checked first (the same decision `status` shows). It scans the\n"
    "keys matching PATTERN, reads the census and the gate record, and refuses:\n"
    "  adjacency       legacy <-> modern (never skipped: go through compat); with\n"
    "                  no control key, any mode but compat;\n"
    "  stage-time      a stage younger than refresh + validity: followers may\n"
    "                  not all have seen it, or hold locks taken before it (not\n"
    "                  asked of modern -> compat, the step toward safety);\n"
    "  incr            moving forward beside INCR counters;\n"
    "  legacy-writers  to modern, while a legacy writer was seen within the\n"
    "                  window: TTL-less values running or expired within it (a\n"
    "                  value no codec reads counts as running), legacy census\n"
    "                  entries, evidence an earlier scan, sweep or prune recorded,\n"
    "                  values that appeared or changed while watching, or SETNX/\n"
    "                  GETSET on keys matching PATTERN meanwhile (MONITOR);\n"
    "  server-calls    to modern, SETNX/GETSET on the server meanwhile whose keys\n"
    "                  could not be told (MONITOR refused, or a cluster);\n"
    "  observation     to modern, when that watching could not be done (INFO\n"
    "                  refused, counts reset meanwhile, a watch of 0 ms);\n"
    "  empty-scan      to modern, when the scan matched no key;\n"
    "  modern-clients  back to legacy, while token values or live modern census\n"
    "                  entries exist;\n"
    "  control-key, census  the namespace's keys cannot be read.\n"
    "--override CHECK skips one named check (repeat for several); the output says\n"
    "what was skipped. Adjacency cannot be skipped.\n"
    "On a Redis Cluster node, the control key is read and written on the primary\n"
    "that owns its slot, every primary is scanned, and the SETNX and GETSET counts\n"
    "are summed over the primaries.\n"
    "\n"
    "  --ns NS          the namespace (required)\n"
    "  --override NAME  set: skip the named check; config: loosen the named value\n"
    "  --match PATTERN  SCAN MATCH glob of the lock keys (default: stored, else *)\n"
    "  --count N        SCAN COUNT hint, 1..100000 (default 1000)\n"
    "  --codec SPEC     a codec the fleet writes; repeat for several (default:\n"
    "                   stored, else ms)\n"
    "  --ttl-ms N       the fleet's longest lock validity, ms (default: stored,\n"
    "                   else 30000)\n"
    "  --refresh-ms N   how often followers re-read the mode, ms (default: stored,\n"
    "                   else 1000)\n"
    "  --window-ms N    how recent a legacy writer must be to refuse, ms\n"
    "                   (default: stored, else 3600000)\n"
    "  --stale-ms N     census entries not refreshed for this long are stale, ms\n"
    "                   (default: stored, else 30000)\n"
    "  --observe-ms N   watch for legacy writers before setting modern, ms, up to\n"
    "                   3600000 (default: stored, else 5000; 0 refuses unless\n"
    "                   --override observation)\n"
    "\n"
    "Exit: 0 read, or set (or already so); 1 usage (also a value looser than the\n"
    "stored one, or --match or --codec that differ from the stored ones: change\n"
    "those with `mode config ... --override`); 3 the control key holds something\n"
    "that is not a mode name (left alone); 4 connection or Redis error; 6 set\n"
    "refused by the checks or by a change that came in between (nothing written).\n"
    "Connection: -h HOST -p PORT -s SOCKET -a PASSWORD --user USER -n DB.\n";

/* The control key holds something that is not a mode name: left alone, and
 * the way to fix it said (modes are lower case; a value such as "Modern" was
 * written by hand or by another tool). */
static int foreign_key(const lb__cli_args *a, const char *ns, int rc) {
    char shown[128], value[64] = "", found[80] = "";
    lb_ns_keys k;
    lb_ns_keys_init(&k, ns, strlen(ns));
    lb__escape(shown, sizeof shown, k.mode, k.modelen);
    char err[256];
    redisContext *c = rc == LB_EFOREIGN ? lb__cli_connect(&a->conn, err, sizeof err) : NULL;
    redisReply *r = c ? redisCommand(c, "GETRANGE %b 0 40", k.mode, k.modelen) : NULL;
    if (r && r->type == REDIS_REPLY_STRING) {
        lb__escape(value, sizeof value, r->str, (size_t)r->len);
        snprintf(found, sizeof found, " \"%s\"", value);
    }
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    fprintf(stderr,
            "%s: the control key %s holds %s%s; it is left alone. Modes are legacy, compat "
            "and modern, in lower case. Find what wrote it, then delete it (redis-cli DEL "
            "'%s') and set the mode the fleet is in: lockbridge mode set MODE --ns %s\n",
            a->prog, shown,
            rc == LB_EWRONGTYPE ? "another Redis type" : "something that is not a mode name",
            found, shown, ns);
    cJSON *o = lb__cli_event("mode");
    if (o) lb__cli_add_str(o, "ns", ns);
    if (o) lb__cli_add_str(o, "status", lb_err_name(rc));
    if (o && value[0]) lb__cli_add_str(o, "control_key_value", value);
    if (lb__cli_is_json()) lb__cli_emit(o);
    else cJSON_Delete(o);
    return LB__CLI_EXIT_FOREIGN;
}

/* ---- The namespace's configuration -------------------------------------------------- */
typedef struct config {
    lb__cli_codecs cs;
    lb__cli_scanopts so;
    lb__cli_gateconf gc;
    int given_match, given_codecs;
} config;

/* Options read before connecting, so that a usage error sends nothing. */
static int config_read(const lb__cli_args *a, config *f) {
    memset(f, 0, sizeof *f);
    f->given_match = lb__cli_opt(a, opts, "--match") != NULL;
    f->given_codecs = lb__cli_opt(a, opts, "--codec") != NULL;
    if (lb__cli_codecs_read(&f->cs, a, opts) != 0 || lb__cli_scanopts_read(&f->so, a, opts) != 0)
        return -1;
    return lb__cli_gateconf_given(a, opts, &f->gc);
}

/* What the record stores fills in what was not given; what was given may
 * only tighten it (a mistyped --match must not quietly scan nothing). */
static int config_resolve(const lb__cli_args *a, const char *ns, config *f,
                          const lb__cli_gate *g) {
    if (lb__cli_gateconf_scan(a, opts, ns, g, &f->cs, &f->so) != 0) return -1;
    return lb__cli_gateconf_resolve(a, ns, g, &f->gc);
}

/* Stores what was given (a set stores only the pattern, codecs, validity and
 * refresh the operator named, each no looser than before, so a default never
 * becomes the namespace's pattern by accident); `all` stores every value. */
static int config_store(redisContext *c, const char *ns, const config *f, int all, char *err,
                        size_t cap) {
    lb__cli_gate g;
    memset(&g, 0, sizeof g);
    for (int i = 0; i < LB__CLI_VALS; i++) {
        int named = i == LB__CLI_VAL_TTL || i == LB__CLI_VAL_REFRESH;
        g.val[i] = all || (named && f->gc.given[i]) ? f->gc.v[i] : -1;
    }
    if (all || f->given_match) g.have_match = 1;
    snprintf(g.match, sizeof g.match, "%s", f->so.match);
    if (all || f->given_codecs) g.have_codecs = 1;
    if (lb__cli_codecs_join(&f->cs, g.codecs, sizeof g.codecs) != 0)
        return snprintf(err, cap, "too many codecs to store"), -1;
    return lb__cli_gate_configure(c, ns, &g, err, cap);
}

static void config_show(const char *ns, const lb__cli_gate *g, cJSON *o) {
    if (o) {
        if (g->have_match) lb__cli_add_str(o, "match", g->match);
        if (g->have_codecs) lb__cli_add_str(o, "codecs", g->codecs);
        for (int i = 0; i < LB__CLI_VALS; i++)
            if (g->val[i] >= 0) lb__cli_add_i64(o, lb__cli_val_field(i), g->val[i]);
        if (g->since_ms >= 0) lb__cli_add_i64(o, "stage_since_ms", g->since_ms);
        return;
    }
    printf("  gate: --match %s%s, --codec %s%s", g->have_match ? g->match : "*",
           g->have_match ? "" : " (default)", g->have_codecs ? g->codecs : "ms",
           g->have_codecs ? "" : " (default)");
    for (int i = 0; i < LB__CLI_VALS; i++)
        printf(", --%s %lld%s", lb__cli_val_name(i), (long long)lb__cli_gate_value(g, i),
               g->val[i] >= 0 ? "" : " (default)");
    printf("\n");
    (void)ns;
}

static int get(const lb__cli_args *a, redisContext *c, const char *ns) {
    /* On a cluster, `c` is the primary that owns the control key's slot. */
    lb_mode m;
    int found;
    lb__cli_gate g;
    char err[512];
    int rc = lb_mode_get(lb_on_conn(c), ns, strlen(ns), &m, &found);
    if (rc == LB_EFOREIGN || rc == LB_EWRONGTYPE) return foreign_key(a, ns, rc);
    if (rc != LB_OK) return lb__cli_error(a, NULL, rc, c->errstr[0] ? c->errstr : lb_strerror(rc));
    if (lb__cli_gate_read(c, ns, &g, err, sizeof err) != 0)
        return lb__cli_error(a, NULL, LB_EREDIS, err);
    if (!lb__cli_is_json()) {
        printf("%s%s\n", lb_mode_name(m),
               found ? "" : " (no control key: clients that read a mode keep it, others use "
                            "their configured mode; a change is checked as from every mode)");
        config_show(ns, &g, NULL);
        return LB__CLI_EXIT_OK;
    }
    cJSON *o = lb__cli_event("mode");
    if (o) lb__cli_add_str(o, "ns", ns);
    if (o) lb__cli_add_str(o, "mode", lb_mode_name(m));
    if (o) lb__cli_add_bool(o, "control_key_present", found);
    config_show(ns, &g, o);
    lb__cli_emit(o);
    return LB__CLI_EXIT_OK;
}

/* mode config's --override names a value (ttl-ms, ..., match, codec): the
 * one change that may loosen what every command judges by. */
static int config_overrides(const lb__cli_args *a, int over[LB__CLI_VALS + 2]) {
    const char *names[LB__CLI_MAX_REPEATS + 1];
    int n = lb__cli_opt_all(a, opts, "--override", names, LB__CLI_MAX_REPEATS + 1);
    memset(over, 0, (LB__CLI_VALS + 2) * sizeof *over);
    for (int k = 0; k < n; k++) {
        int hit = -1;
        for (int i = 0; i < LB__CLI_VALS; i++)
            if (strcmp(names[k], lb__cli_val_name(i)) == 0) hit = i;
        if (strcmp(names[k], "match") == 0) hit = LB__CLI_VALS;
        if (strcmp(names[k], "codec") == 0) hit = LB__CLI_VALS + 1;
        if (hit < 0)
            return lb__cli_usage(a, "mode config --override %s: no such value (ttl-ms, "
                                 "refresh-ms, window-ms, stale-ms, observe-ms, match, codec)",
                                 names[k]), -1;
        over[hit] = 1;
    }
    return 0;
}

/* A change that loosens needs its override; each one taken is printed. */
static int config_loosens(const lb__cli_args *a, const char *ns, const config *f,
                          const lb__cli_gate *g, const int over[LB__CLI_VALS + 2], cJSON *o) {
    char joined[512];
    for (int i = 0; i < LB__CLI_VALS; i++) {
        int64_t base = lb__cli_gate_value(g, i);
        if (!f->gc.given[i] || f->gc.cmdline[i] >= base) continue;
        if (!over[i])
            return lb__cli_usage(a, "--%s %lld loosens namespace %s's %lld ms: add --override %s "
                                 "to loosen it for every command", lb__cli_val_name(i),
                                 (long long)f->gc.cmdline[i], ns, (long long)base,
                                 lb__cli_val_name(i)), -1;
        if (!o) printf("override: %s loosened from %lld to %lld ms\n", lb__cli_val_name(i),
                       (long long)base, (long long)f->gc.cmdline[i]);
        else lb__cli_add_i64(o, lb__cli_val_name(i), f->gc.cmdline[i]);
    }
    int match = f->given_match && g->have_match && strcmp(f->so.match, g->match) != 0;
    int codecs = f->given_codecs && g->have_codecs &&
                 (lb__cli_codecs_join(&f->cs, joined, sizeof joined) != 0 ||
                  strcmp(joined, g->codecs) != 0);
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "codec" : "match", *was = k ? g->codecs : g->match;
        if (!(k ? codecs : match)) continue;
        if (!over[LB__CLI_VALS + k])
            return lb__cli_usage(a, "namespace %s's stored --%s is '%s': another one judges "
                                 "other keys or values; add --override %s to change it", ns,
                                 name, was, name), -1;
        if (!o) printf("override: --%s changed from '%s'\n", name, was);
        else lb__cli_add_str(o, name, was);
    }
    return 0;
}

static int configure(const lb__cli_args *a, redisContext *c, const char *ns) {
    config f;
    lb__cli_gate g;
    int over[LB__CLI_VALS + 2];
    char err[512];
    if (config_read(a, &f) != 0 || config_overrides(a, over) != 0) return LB__CLI_EXIT_USAGE;
    if (lb__cli_gate_read(c, ns, &g, err, sizeof err) != 0)
        return lb__cli_error(a, NULL, LB_EREDIS, err);
    cJSON *o = lb__cli_is_json() ? lb__cli_event("mode_config") : NULL, *ov = NULL;
    if (o) ov = cJSON_AddObjectToObject(o, "overrides");
    if (config_loosens(a, ns, &f, &g, over, o ? (ov ? ov : o) : NULL) != 0) {
        cJSON_Delete(o);
        return LB__CLI_EXIT_USAGE;
    }
    lb__cli_gate w;
    memset(&w, 0, sizeof w);
    for (int i = 0; i < LB__CLI_VALS; i++) w.val[i] = f.gc.given[i] ? f.gc.cmdline[i] : -1;
    w.have_match = f.given_match;
    snprintf(w.match, sizeof w.match, "%s", f.so.match);
    w.have_codecs = f.given_codecs;
    if (f.given_codecs && lb__cli_codecs_join(&f.cs, w.codecs, sizeof w.codecs) != 0) {
        cJSON_Delete(o);
        return lb__cli_usage(a, "too many codecs to store");
    }
    if (lb__cli_gate_configure(c, ns, &w, err, sizeof err) != 0 ||
        lb__cli_gate_read(c, ns, &g, err, sizeof err) != 0) {
        cJSON_Delete(o);
        return lb__cli_error(a, NULL, LB_EREDIS, err);
    }
    if (o) lb__cli_add_str(o, "ns", ns);
    if (!lb__cli_is_json()) printf("namespace %s:\n", ns);
    config_show(ns, &g, o);
    if (o) lb__cli_emit(o);
    return LB__CLI_EXIT_OK;
}

/* ---- set ------------------------------------------------------------------------------ */
typedef struct change {
    const char *ns;
    lb_mode from, to;
    int found; /* the control key was there when the checks read it */
    int checked, changed;
    long long receivers;
    lb__cli_verdict v;
} change;

static void report_text(const change *ch, const char *outcome) {
    printf("%s: %s -> %s: %s\n", ch->ns, ch->found ? lb_mode_name(ch->from) : "(no control key)",
           lb_mode_name(ch->to), outcome);
    for (int i = 0; i < ch->v.n; i++) {
        const char *tag = ch->v.reason[i].blocker ? "blocker:" : "note:   ";
        if (ch->v.reason[i].skipped) tag = "skipped:";
        const char *name = lb__cli_check_name(ch->v.reason[i].check);
        if (name && (ch->v.reason[i].blocker || ch->v.reason[i].skipped))
            printf("  %s [%s] %s\n", tag, name, ch->v.reason[i].text);
        else printf("  %s %s\n", tag, ch->v.reason[i].text);
    }
    if (ch->v.judged_by[0]) printf("  %s\n", ch->v.judged_by);
    if (ch->changed) printf("  notified at once: %lld client(s)\n", ch->receivers);
}

static void add_reasons(cJSON *o, const lb__cli_verdict *v, const char *name, int kind) {
    cJSON *arr = cJSON_AddArrayToObject(o, name);
    for (int i = 0; arr && i < v->n; i++) {
        int k = v->reason[i].skipped ? 2 : v->reason[i].blocker;
        if (k != kind) continue;
        if (kind == 0) {
            cJSON_AddItemToArray(arr, cJSON_CreateString(v->reason[i].text));
            continue;
        }
        cJSON *r = cJSON_CreateObject();
        if (!r) continue;
        lb__cli_add_str(r, "check", lb__cli_check_name(v->reason[i].check));
        lb__cli_add_str(r, "reason", v->reason[i].text);
        cJSON_AddItemToArray(arr, r);
    }
}

static void report(const change *ch, const char *outcome) {
    if (!lb__cli_is_json()) return report_text(ch, outcome);
    cJSON *o = lb__cli_event("mode_set");
    if (!o) return (void)lb__cli_emit(o);
    lb__cli_add_str(o, "ns", ch->ns);
    if (ch->found) lb__cli_add_str(o, "from", lb_mode_name(ch->from));
    else cJSON_AddNullToObject(o, "from");
    lb__cli_add_str(o, "to", lb_mode_name(ch->to));
    lb__cli_add_str(o, "outcome", outcome);
    lb__cli_add_bool(o, "changed", ch->changed);
    lb__cli_add_bool(o, "checked", ch->checked);
    if (ch->changed) lb__cli_add_i64(o, "receivers", ch->receivers);
    add_reasons(o, &ch->v, "blockers", 1);
    add_reasons(o, &ch->v, "skipped", 2);
    add_reasons(o, &ch->v, "warnings", 0);
    if (ch->v.judged_by[0]) lb__cli_add_str(o, "judged_by", ch->v.judged_by);
    lb__cli_emit(o);
}

typedef struct checks {
    config f;
    lb__cli_gateopts go;
} checks;

/* Read before connecting, so that a usage error sends nothing. */
static int checks_read(const lb__cli_args *a, checks *k) {
    const char *names[LB__CLI_MAX_REPEATS + 1];
    memset(k, 0, sizeof *k);
    k->go.observed = 1;
    if (config_read(a, &k->f) != 0) return -1;
    int n = lb__cli_opt_all(a, opts, "--override", names, LB__CLI_MAX_REPEATS + 1);
    for (int i = 0; i < n; i++) {
        int c = lb__cli_check_parse(names[i]);
        if (c < 0)
            return lb__cli_usage(a, "--override %s: no such check (adjacency cannot be "
                                 "skipped; see 'mode --help')", names[i]), -1;
        k->go.override[c] = 1;
    }
    return 0;
}

/* Scans again until observe_ms has passed, each time on a fresh connection (a
 * scan leaves its own unusable), counting the TTL-less timestamps that appeared
 * or changed since the first scan; then the growth of the server's SETNX and
 * GETSET counts since `calls0` (on a cluster, summed over every primary). */
static int observe(const lb__cli_args *a, const lb__cli_topo *t, const checks *k,
                   lb__cli_survey *s, lb__cli_watch *w, double t0, int64_t calls0, char *err,
                   size_t cap) {
    int64_t observe_ms = k->f.gc.v[LB__CLI_VAL_OBSERVE];
    s->observe_ms = observe_ms;
    for (;;) {
        double left = t0 + (double)observe_ms - lb__cli_mono_ms();
        if (left <= 0) break;
        lb__cli_sleep_ms(left < OBSERVE_PAUSE_MS ? (int64_t)left + 1 : OBSERVE_PAUSE_MS);
        redisContext *c = lb__cli_connect(&a->conn, err, cap);
        if (!c) return -1;
        lb__cli_survey pass;
        memset(&pass, 0, sizeof pass);
        pass.window_ms = k->f.gc.v[LB__CLI_VAL_WINDOW];
        pass.cs = &k->f.cs;
        pass.track = 2;
        pass.seen = s->seen;
        int rc = lb__cli_survey_keys(&pass, t, c, &k->f.so, err, cap);
        s->seen = pass.seen;
        redisFree(c);
        if (rc != 0) return -1;
        s->observe_passes++;
        s->observe_changed += pass.observe_changed;
        s->observe_static += pass.observe_static;
        if (lb__cli_watch_drain(w) != 0) lb__cli_watch_stop(w);
    }
    int64_t calls1;
    redisContext *c = lb__cli_connect(&a->conn, err, cap);
    if (!c) return -1;
    int rc = lb__cli_legacy_calls_all(t, c, &calls1, err, cap);
    redisFree(c);
    if (rc != 0) return -1;
    s->calls_backwards = calls0 >= 0 && calls1 >= 0 && calls1 < calls0;
    s->legacy_calls = calls0 >= 0 && calls1 >= calls0 ? calls1 - calls0 : -1;
    /* A watch that cannot show it saw every call up to the count above is
     * not used: the server-wide count stands. */
    char werr[256];
    if (w->c && lb__cli_watch_finish(w, &a->conn, werr, sizeof werr) == 0) {
        s->scoped_calls = w->inside;
        s->other_calls = w->outside;
    }
    return 0;
}

/* On one server, the observation is scoped to the namespace's keys when the
 * server allows MONITOR; on a cluster (commands spread over primaries) and
 * when it is refused, the server-wide count stands, under its own check. */
static int watch_start(const lb__cli_args *a, const lb__cli_topo *t, const checks *k,
                       lb__cli_watch *w, char *err, size_t cap) {
    memset(w, 0, sizeof *w);
    if (t->cluster) return 0;
    return lb__cli_watch_start(w, &a->conn, k->f.so.match, err, cap) < 0 ? -1 : 0;
}

/* Every change is checked on the evidence of a scan, the census and the gate
 * record (and, to modern, of an observation); what it saw of legacy and modern
 * writers is recorded in the gate record whatever the verdict. */
static int check_watched(const lb__cli_args *a, const lb__cli_topo *t, redisContext *c,
                         redisContext *nc, const checks *k, change *ch, lb__cli_survey *s,
                         lb__cli_watch *w, char *err, size_t cap) {
    s->window_ms = k->f.gc.v[LB__CLI_VAL_WINDOW];
    s->stale_ms = k->f.gc.v[LB__CLI_VAL_STALE];
    s->cs = &k->f.cs;
    s->legacy_calls = s->scoped_calls = s->other_calls = -1;
    int watch = ch->to == LB_MODE_MODERN && k->f.gc.v[LB__CLI_VAL_OBSERVE] > 0;
    double t0 = lb__cli_mono_ms();
    int64_t calls0 = -1;
    if (watch && lb__cli_legacy_calls_all(t, c, &calls0, err, cap) != 0) return -1;
    if (lb__cli_survey_ns(s, nc, ch->ns, err, cap) != 0) return -1;
    /* The stage judged is the one read here; the write is a compare-and-set on it. */
    if (s->mode_rc == LB_OK) ch->from = s->mode;
    ch->found = s->mode_found;
    /* The stage time is judged by the values resolved, and said so. */
    s->gate.val[LB__CLI_VAL_TTL] = k->f.gc.v[LB__CLI_VAL_TTL];
    s->gate.val[LB__CLI_VAL_REFRESH] = k->f.gc.v[LB__CLI_VAL_REFRESH];
    lb__cli_gateconf_say(&k->f.gc, k->f.so.match, &k->f.cs,
                         ch->to == LB_MODE_MODERN ? LB__CLI_VALS : LB__CLI_VAL_OBSERVE,
                         s->judged_by, sizeof s->judged_by);
    s->track = watch;
    if (lb__cli_survey_keys(s, t, c, &k->f.so, err, cap) != 0) return -1;
    if (watch && observe(a, t, k, s, w, t0, calls0, err, cap) != 0) return -1;
    ch->checked = 1;
    lb__cli_survey_verdict(s, ch->from, ch->to, &k->go, &ch->v);
    return 0;
}

/* The watch of the server's commands runs from before the first count of
 * SETNX/GETSET to after the last. */
static int check(const lb__cli_args *a, const lb__cli_topo *t, redisContext *c,
                 redisContext *nc, const checks *k, change *ch, lb__cli_survey *s, char *err,
                 size_t cap) {
    lb__cli_watch w;
    memset(&w, 0, sizeof w);
    if (ch->to == LB_MODE_MODERN && k->f.gc.v[LB__CLI_VAL_OBSERVE] > 0 &&
        watch_start(a, t, k, &w, err, cap) != 0)
        return -1;
    int rc = check_watched(a, t, c, nc, k, ch, s, &w, err, cap);
    lb__cli_watch_stop(&w);
    return rc;
}

static redisContext *writer(const lb__cli_args *a, const lb__cli_topo *t, const char *ns,
                            char *err, size_t cap) {
    return t->cluster ? lb__cli_connect_ns(t, NULL, ns, err, cap)
                      : lb__cli_connect(&a->conn, err, cap);
}

static int set(const lb__cli_args *a, const lb__cli_topo *t, redisContext *c,
               redisContext *nc, const char *ns, lb_mode to, checks *k) {
    change ch;
    char err[512];
    int found;
    lb__cli_gate g;
    memset(&ch, 0, sizeof ch);
    ch.ns = ns;
    ch.to = to;
    int rc = lb_mode_get(lb_on_conn(nc), ns, strlen(ns), &ch.from, &found);
    ch.found = found;
    if (rc == LB_EFOREIGN || rc == LB_EWRONGTYPE) return foreign_key(a, ns, rc);
    if (rc != LB_OK)
        return lb__cli_error(a, NULL, rc, nc->errstr[0] ? nc->errstr : lb_strerror(rc));
    /* A record that cannot be read judges by the defaults; the survey reads
     * it again and its verdict names it. */
    if (lb__cli_gate_read(nc, ns, &g, err, sizeof err) != 0) lb__cli_gate_empty(&g);
    if (config_resolve(a, ns, &k->f, &g) != 0) return LB__CLI_EXIT_USAGE;
    if (ch.from == ch.to && found) return report(&ch, "already set"), LB__CLI_EXIT_OK;
    /* The scan leaves its connection unusable: a fresh one writes (on a
     * cluster, on the primary that owns the namespace's slot). */
    lb__cli_survey s;
    memset(&s, 0, sizeof s);
    rc = check(a, t, c, nc, k, &ch, &s, err, sizeof err);
    redisContext *w = rc == 0 ? writer(a, t, ns, err, sizeof err) : NULL;
    if (w && lb__cli_survey_remember(&s, w, ns, err, sizeof err) != 0) {
        redisFree(w);
        w = NULL;
    }
    lb__cli_survey_clear(&s);
    int64_t since = s.gate.since_ms;
    if (!w) return lb__cli_error(a, NULL, rc < 0 ? LB_EREDIS : LB_EIO, err);
    if (!ch.v.ready) {
        redisFree(w);
        return report(&ch, "refused"), LB__CLI_EXIT_UNSAFE;
    }
    rc = lb__mode_set_stage(lb_on_conn(w), ns, strlen(ns), ch.to, ch.found ? &ch.from : NULL,
                            since, &ch.receivers);
    if (rc == LB_OK && config_store(w, ns, &k->f, 0, err, sizeof err) != 0)
        rc = LB_EREDIS;
    redisFree(w);
    if (rc == LB_ESTATE) {
        fprintf(stderr, "%s: another change came in between: the stage checked (its mode and "
                "start) is no longer the namespace's; nothing written. Check again: lockbridge "
                "status --ns %s\n", a->prog, ns);
        return report(&ch, "refused: another change came in between"), LB__CLI_EXIT_UNSAFE;
    }
    if (rc != LB_OK) return lb__cli_error(a, NULL, rc, lb_strerror(rc));
    ch.changed = 1;
    int skipped = 0;
    for (int i = 0; i < ch.v.n; i++) skipped |= ch.v.reason[i].skipped;
    report(&ch, skipped ? "set (checks skipped by --override)" : "set");
    return LB__CLI_EXIT_OK;
}

typedef struct mode_run {
    int verb; /* 0 get, 1 config, 2 set */
    lb_mode to;
    checks *k;
} mode_run;

static int on_ns(const lb__cli_args *a, const lb__cli_topo *t, redisContext *c,
                 redisContext *nc, const char *ns, void *ud) {
    const mode_run *r = ud;
    if (r->verb == 0) return get(a, nc, ns);
    if (r->verb == 1) return configure(a, nc, ns);
    return set(a, t, c, nc, ns, r->to, r->k);
}

static int run(const lb__cli_args *a) {
    const char *ns;
    checks k;
    lb_mode to = LB_MODE_LEGACY;
    char shown[64];
    const char *verb = a->npos >= 1 ? a->pos[0] : "";
    int is_get = strcmp(verb, "get") == 0, is_set = strcmp(verb, "set") == 0;
    int is_config = strcmp(verb, "config") == 0;
    if (!is_get && !is_set && !is_config) return lb__cli_usage(a, "expects get, set or config");
    if (!is_set && a->npos != 1) return lb__cli_usage(a, "%s takes no MODE", verb);
    if (is_set && a->npos != 2) return lb__cli_usage(a, "set expects one MODE");
    if (lb__cli_ns_read(a, opts, &ns) != 0) return LB__CLI_EXIT_USAGE;
    for (int i = 1; opts[i].name && !is_set; i++) {
        int config_opt = strcmp(opts[i].name, "--count") != 0;
        if (a->opt[i] && (is_get || !config_opt))
            return lb__cli_usage(a, "%s does not apply to %s", opts[i].name, verb);
    }
    if (is_set && lb_mode_parse(a->pos[1], strlen(a->pos[1]), &to) != LB_OK) {
        lb__escape(shown, sizeof shown, a->pos[1], strlen(a->pos[1]));
        return lb__cli_usage(a, "unknown mode \"%s\" (legacy, compat or modern)", shown);
    }
    if (is_set && checks_read(a, &k) != 0) return LB__CLI_EXIT_USAGE;
    mode_run r = {is_get ? 0 : is_config ? 1 : 2, to, &k};
    return lb__cli_on_ns(a, ns, on_ns, &r);
}

const lb__cli_command lb__cli_cmd_mode = {
    "mode", "read or change a namespace's mode (legacy, compat, modern) and its gate's "
    "configuration", help, opts, 2, run, 0};
