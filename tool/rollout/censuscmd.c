/* `lockbridge census list|prune`: a namespace's census read and cleaned from the
 * tool: who follows the namespace (host, pid, mode, version, age), and stale
 * entries removed, their legacy sightings kept in the gate record. */
#include <stdio.h>
#include <string.h>

#include "tool/common/server.h"
#include "tool/rollout/survey.h"

#define STALE_MS_DEFAULT INT64_C(30000) /* milliseconds */

static const lb__cli_optdef opts[] = {{"--ns", 1}, {"--stale-ms", 1}, {NULL, 0}};

static const char help[] =
    "usage: lockbridge census list --ns NS [--stale-ms N] [--json]\n"
    "       lockbridge census prune --ns NS [--stale-ms N] [--json]\n"
    "\n"
    "list prints every entry of namespace NS's census ({NS}:lb-census): each\n"
    "lockbridge client that follows the namespace, with its host, pid, mode,\n"
    "version and how long ago it last refreshed its entry; an entry not refreshed\n"
    "for --stale-ms is stale. The tool's own lock commands (hold, contend) register\n"
    "one entry per process and remove it when they end.\n"
    "prune removes the stale entries, each only if it is still the value judged\n"
    "stale (a client that refreshed meanwhile stays). A pruned legacy-mode entry's\n"
    "last sighting is kept in the namespace's gate record, so the gate still counts\n"
    "that legacy client for its window.\n"
    "\n"
    "  --ns NS          the namespace (required)\n"
    "  --stale-ms N     entries not refreshed for this long are stale, ms\n"
    "                   (default 30000)\n"
    "  --json           one \"census_entry\" JSON line per entry (list), then a\n"
    "                   \"census\" summary\n"
    "\n"
    "Exit: 0 done; 1 usage; 4 connection or Redis error.\n"
    "Connection: -h HOST -p PORT -s SOCKET -a PASSWORD --user USER -n DB.\n";

static void show_entry(const lb_census_entry *e, int first) {
    char id[96], host[64];
    lb__escape(id, sizeof id, e->id, strlen(e->id));
    if (!lb__cli_is_json()) {
        if (first) printf("%-40s %-7s %-24s %8s %-10s %10s\n", "ID", "MODE", "HOST", "PID",
                          "VERSION", "AGE_MS");
        if (!e->valid) {
            printf("%-40s (not a census entry: left alone)\n", id);
            return;
        }
        lb__escape(host, sizeof host, e->host, strlen(e->host));
        printf("%-40s %-7s %-24s %8lld %-10s %10lld%s\n", id, lb_mode_name(e->mode), host,
               (long long)e->pid, e->version, (long long)e->age_ms, e->stale ? " stale" : "");
        return;
    }
    cJSON *o = lb__cli_event("census_entry");
    if (o) {
        lb__cli_add_bytes(o, "id", e->id, strlen(e->id));
        lb__cli_add_bool(o, "valid", e->valid);
        if (e->valid) {
            lb__cli_add_str(o, "mode", lb_mode_name(e->mode));
            lb__cli_add_bytes(o, "host", e->host, strlen(e->host));
            lb__cli_add_i64(o, "pid", e->pid);
            lb__cli_add_bytes(o, "version", e->version, strlen(e->version));
            lb__cli_add_i64(o, "seen_ms", e->seen_ms);
            lb__cli_add_i64(o, "age_ms", e->age_ms);
            lb__cli_add_bool(o, "stale", e->stale);
        }
    }
    lb__cli_emit(o);
}

static int list(const lb__cli_args *a, redisContext *c, const char *ns, int64_t stale_ms) {
    lb_now now = lb_clock_now(NULL);
    lb_census_entry *e = NULL;
    size_t n = 0;
    uint64_t live[3] = {0}, stale = 0;
    int rc = lb_census_list(lb_on_conn(c), ns, strlen(ns), &now, stale_ms, NULL, &e, &n);
    if (rc != LB_OK) return lb__cli_error(a, NULL, rc, "reading the census");
    for (size_t i = 0; i < n; i++) {
        show_entry(&e[i], i == 0);
        if (e[i].valid && e[i].stale) stale++;
        else if (e[i].valid && (unsigned)e[i].mode < 3) live[e[i].mode]++;
    }
    lb_census_free(NULL, e);
    if (!lb__cli_is_json()) {
        printf("%s%zu entr(ies): live legacy %llu, compat %llu, modern %llu; stale %llu\n",
               n ? "\n" : "", n, (unsigned long long)live[0], (unsigned long long)live[1],
               (unsigned long long)live[2], (unsigned long long)stale);
        return LB__CLI_EXIT_OK;
    }
    cJSON *o = lb__cli_event("census");
    if (o) {
        lb__cli_add_str(o, "ns", ns);
        lb__cli_add_i64(o, "entries", (int64_t)n);
        for (int m = 0; m < 3; m++) {
            char name[24];
            snprintf(name, sizeof name, "live_%s", lb_mode_name((lb_mode)m));
            lb__cli_add_i64(o, name, (int64_t)live[m]);
        }
        lb__cli_add_i64(o, "stale", (int64_t)stale);
    }
    lb__cli_emit(o);
    return LB__CLI_EXIT_OK;
}

static int prune(const lb__cli_args *a, redisContext *c, const char *ns, int64_t stale_ms) {
    lb_now now = lb_clock_now(NULL);
    size_t pruned = 0;
    int rc = lb_census_prune(lb_on_conn(c), ns, strlen(ns), &now, stale_ms, &pruned);
    if (rc != LB_OK) return lb__cli_error(a, NULL, rc, "pruning the census");
    if (!lb__cli_is_json()) {
        printf("%s: %zu stale entr(ies) removed\n", ns, pruned);
        return LB__CLI_EXIT_OK;
    }
    cJSON *o = lb__cli_event("census_prune");
    if (o) lb__cli_add_str(o, "ns", ns);
    if (o) lb__cli_add_i64(o, "pruned", (int64_t)pruned);
    lb__cli_emit(o);
    return LB__CLI_EXIT_OK;
}

typedef struct census_run {
    int list;
    int64_t stale_ms;
} census_run;

static int on_ns(const lb__cli_args *a, const lb__cli_topo *t, redisContext *c,
                 redisContext *nc, const char *ns, void *ud) {
    const census_run *r = ud;
    (void)t, (void)c;
    return r->list ? list(a, nc, ns, r->stale_ms) : prune(a, nc, ns, r->stale_ms);
}

static int run(const lb__cli_args *a) {
    const char *ns, *v;
    int64_t stale_ms = STALE_MS_DEFAULT;
    const char *verb = a->npos >= 1 ? a->pos[0] : "";
    int is_list = strcmp(verb, "list") == 0, is_prune = strcmp(verb, "prune") == 0;
    if (!is_list && !is_prune) return lb__cli_usage(a, "expects list or prune");
    if (a->npos != 1) return lb__cli_usage(a, "%s takes no other argument", verb);
    if (lb__cli_ns_read(a, opts, &ns) != 0) return LB__CLI_EXIT_USAGE;
    if ((v = lb__cli_opt(a, opts, "--stale-ms")) &&
        lb__cli_int(a, "--stale-ms", v, 1, LB__CLI_MS_MAX, &stale_ms) != 0)
        return LB__CLI_EXIT_USAGE;
    census_run r = {is_list, stale_ms};
    return lb__cli_on_ns(a, ns, on_ns, &r);
}

const lb__cli_command lb__cli_cmd_census = {
    "census", "list a namespace's census (who follows it), or prune its stale entries", help,
    opts, 1, run, 0};
