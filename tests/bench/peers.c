/* lockbridge-bench: other lock libraries in the same contended scenario. Each
 * runs as a driver script in tests/bench/peers that prints its figures as one
 * JSON line; the server's command counts and the counter are read here. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"

typedef struct peer_spec {
    const char *name;   /* row name */
    const char *interp; /* environment variable naming the interpreter */
    const char *interp_default;
    const char *script; /* in the peers directory */
    const char *variant;
    const char *settings; /* what the variant sets, for the peers table */
} peer_spec;

static const peer_spec PEERS[] = {
    {"redis-py Lock, defaults", "LB_BENCH_PYTHON", "/usr/bin/python3", "redis_py_lock.py",
     "default", "one process per client; retry sleep 100 ms (default)"},
    {"redis-py Lock, tuned retry", "LB_BENCH_PYTHON", "/usr/bin/python3", "redis_py_lock.py",
     "tuned", "one process per client; retry sleep 2 ms"},
    {"node-redlock, defaults", "LB_BENCH_NODE", "node", "node_locks.js", "redlock-default",
     "one node process, a connection per client; retry 200 ms + up to 100 ms jitter, 10 tries "
     "(default), then the client tries again"},
    {"node-redlock, tuned retry", "LB_BENCH_NODE", "node", "node_locks.js", "redlock-tuned",
     "one node process, a connection per client; retry 2 ms + up to 2 ms jitter, unlimited "
     "tries"},
    {"redis-semaphore Mutex, defaults", "LB_BENCH_NODE", "node", "node_locks.js",
     "semaphore-default", "one node process, a connection per client; retry 10 ms (default)"},
    {"redis-semaphore Mutex, tuned retry", "LB_BENCH_NODE", "node", "node_locks.js",
     "semaphore-tuned", "one node process, a connection per client; retry 2 ms"},
};
#define N_PEERS (int)(sizeof PEERS / sizeof PEERS[0])

/* The peers table: one row per peer, its version and settings. */
static table *peers_table;
static char peer_versions[N_PEERS][64];
static char peer_status[N_PEERS][CELL_CAP];

/* Resolves an interpreter: a path as given, a bare name through PATH. */
static int find_program(const char *name, char *out, size_t cap) {
    if (strchr(name, '/')) {
        snprintf(out, cap, "%s", name);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    const char *path = getenv("PATH");
    if (!path) return -1;
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(out, cap, "%.*s/%s", (int)len, path, name);
        if (len && access(out, X_OK) == 0) return 0;
        path += len + (path[len] == ':');
    }
    return -1;
}

/* Reads everything the driver prints; returns its last line that starts with
 * '{' (caller frees), or NULL. */
static char *run_driver(const char *cmd, int *status) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    char *line = NULL, *last = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, p)) >= 0) {
        if (n > 0 && line[0] == '{') {
            free(last);
            last = strdup(line);
        }
    }
    free(line);
    *status = pclose(p);
    return last;
}

static int json_samples(const cJSON *arr, samples *s) {
    const cJSON *v;
    if (!cJSON_IsArray(arr)) return -1;
    cJSON_ArrayForEach(v, arr) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0) return -1;
        if (samples_push(s, (int64_t)v->valuedouble) != 0) return -1;
    }
    return 0;
}

static double json_num(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Fills `r` from the driver's JSON line; 0, or -1 when it does not read. */
static int parse_result(const char *line, contended *r, char *version, size_t vcap) {
    cJSON *o = cJSON_Parse(line);
    if (!o) return -1;
    const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(o, "skipped");
    if (cJSON_IsString(skipped)) {
        r->status = RUN_SKIPPED;
        snprintf(r->note, sizeof r->note, "%s", skipped->valuestring);
        cJSON_Delete(o);
        return 0;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(o, "version");
    if (cJSON_IsString(ver)) snprintf(version, vcap, "%s", ver->valuestring);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (cJSON_IsString(err) && err->valuestring[0])
        snprintf(r->note, sizeof r->note, "%s", err->valuestring);
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(o, "per_client");
    double acq = json_num(o, "acquisitions"), secs = json_num(o, "seconds");
    int ok = cJSON_IsArray(per) && acq >= 0 && secs > 0 &&
             json_samples(cJSON_GetObjectItemCaseSensitive(o, "tta_ns"), &r->tta) == 0 &&
             json_samples(cJSON_GetObjectItemCaseSensitive(o, "handoff_ns"), &r->handoff) == 0;
    if (ok) {
        const cJSON *v;
        r->acquisitions = (uint64_t)acq;
        r->seconds = secs;
        r->min_client = UINT64_MAX;
        cJSON_ArrayForEach(v, per) {
            uint64_t n = cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
            if (n > r->max_client) r->max_client = n;
            if (n < r->min_client) r->min_client = n;
        }
        double g = json_num(o, "gave_up"), e = json_num(o, "errors");
        r->gave_up = g > 0 ? (uint64_t)g : 0;
        r->errors = e > 0 ? (uint64_t)e : 0;
    }
    cJSON_Delete(o);
    return ok ? 0 : -1;
}

static void one_peer_run(const lbt_redis *server, redisContext *ctl, const char *interp,
                         const char *script, const peer_spec *p, int index, int clients,
                         double seconds, contended *r) {
    char key[64], counter[64], cmd[2048];
    snprintf(key, sizeof key, "bench:peer:%d:%d", index, clients);
    snprintf(counter, sizeof counter, "bench:peer-counter:%d:%d", index, clients);
    snprintf(cmd, sizeof cmd, "'%s' '%s' 127.0.0.1 %d '%s' '%s' %d %.3f %s", interp, script,
             server->port, key, counter, clients, seconds, p->variant);
    tally before;
    if (contended_prepare(ctl, key, counter, &before) != 0) {
        r->status = RUN_FAILED;
        snprintf(r->note, sizeof r->note, "cannot reach the server");
        return;
    }
    int status = 0;
    char *line = run_driver(cmd, &status);
    if (!line || parse_result(line, r, peer_versions[index], sizeof peer_versions[index]) != 0) {
        r->status = RUN_FAILED;
        if (!r->note[0])
            snprintf(r->note, sizeof r->note, "the driver printed no figures (exit status %d)",
                     status);
    }
    free(line);
    if (r->status == RUN_SKIPPED || r->status == RUN_FAILED) return;
    contended_finish(ctl, counter, &before, r);
    /* Peers' locks may give up at their own limits: that is not an error of the
     * run, but lost updates and driver errors are. */
    if (r->errors || r->lost != 0) r->status = RUN_FAILED;
}

/* LB_BENCH_PEERS=TEXT runs only the peers whose name contains TEXT (trial
 * runs, as LB_BENCH_ONLY for ours). */
void run_contended_peers(const lbt_redis *server, redisContext *ctl, double seconds,
                         const char *peers_dir, contended_set *set) {
    const char *only = getenv("LB_BENCH_PEERS");
    for (int i = 0; i < N_PEERS; i++) {
        const peer_spec *p = &PEERS[i];
        if (only && !strstr(p->name, only)) continue;
        const char *want = getenv(p->interp);
        char interp[512], script[512];
        snprintf(script, sizeof script, "%s/%s", peers_dir, p->script);
        int have_interp = find_program(want ? want : p->interp_default, interp, sizeof interp) == 0;
        int have_script = access(script, R_OK) == 0;
        for (int k = 0; k < N_CLIENT_COUNTS; k++) {
            contended *r = contended_add(set, p->name, 0, CLIENT_COUNTS[k]);
            if (!r) return;
            if (!have_interp || !have_script) {
                r->status = RUN_SKIPPED;
                snprintf(r->note, sizeof r->note, "skipped: %.140s not found",
                         have_interp ? script : want ? want : p->interp_default);
            } else {
                one_peer_run(server, ctl, interp, script, p, i, CLIENT_COUNTS[k], seconds, r);
            }
            if (k == 0)
                snprintf(peer_status[i], CELL_CAP, "%.100s",
                         r->status == RUN_SKIPPED ? r->note : "ran");
            fprintf(stderr, "bench: %s, %d clients: %s\n", r->name, r->clients,
                    r->status == RUN_OK ? "done" : r->note[0] ? r->note : "failed");
        }
    }
    if (peers_table) {
        for (int i = 0; i < N_PEERS; i++) {
            int row = table_row(peers_table);
            cell(peers_table, row, 0, "%s", PEERS[i].name);
            cell(peers_table, row, 1, "%s", peer_versions[i][0] ? peer_versions[i] : "-");
            cell(peers_table, row, 2, "%s", PEERS[i].settings);
            cell(peers_table, row, 3, "%s", peer_status[i]);
        }
    }
}

/* One more run of the peer named `name` (the paired rounds of paired.c); 0,
 * or -1 when no peer has that name or its driver cannot run here. */
int peer_rerun(const lbt_redis *server, redisContext *ctl, const char *peers_dir, const char *name,
               int clients, double seconds, contended *r) {
    for (int i = 0; i < N_PEERS; i++) {
        const peer_spec *p = &PEERS[i];
        if (strcmp(p->name, name) != 0) continue;
        const char *want = getenv(p->interp);
        char interp[512], script[512];
        snprintf(script, sizeof script, "%s/%s", peers_dir, p->script);
        if (find_program(want ? want : p->interp_default, interp, sizeof interp) != 0 ||
            access(script, R_OK) != 0)
            return -1;
        contended_init(r, name, 0, clients);
        one_peer_run(server, ctl, interp, script, p, i, clients, seconds, r);
        return 0;
    }
    return -1;
}

void peers_table_attach(table *t) {
    static const char *const cols[] = {"peer", "version", "settings", "status", NULL};
    table_init(t, "peers", cols);
    table_title(t, "Peers: other lockers on the same server in the same run");
    int row = table_row(t);
    cell(t, row, 0, "legacy fleets: 200 ms sleep-and-retry (C, L1 wire)");
    cell(t, row, 1, "this program");
    cell(t, row, 2, "the L1 wire sequence (SETNX, GET, GETSET) through lb_legacy_try_acquire, "
                    "200 ms sleep when busy, thread per client");
    cell(t, row, 3, "ran");
    peers_table = t;
}
