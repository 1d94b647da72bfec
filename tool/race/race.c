/* `lockbridge race`: replays schedules of the race catalogue against real client
 * processes through the proxy, and reports a verdict per schedule (text, JSON
 * lines, JUnit XML). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool/race/race.h"
#include "tool/race/search.h"

static const lb__cli_optdef opts[] = {
    {"--schedule", 1},     {"--file", 1},         {"--catalogue", 1},
    {"--client", LB__CLI_REPEAT}, {"--key", 1},  {"--counter-key", 1},
    {"--step-timeout-ms", 1}, {"--settle-ms", 1}, {"--ttl-ms", LB__CLI_REPEAT},
    {"--ports", 1},        {"--repeat", 1},       {"--record-steps", 1},
    {"--live-steps", 1},   {"--start-timeout-ms", 1}, {"--kill-crashed", 0},
    {"--locker", 1},       {"--junit", 1},        {"--search", 1},
    {"--seed", 1},         {"--shrink-tries", 1}, {NULL, 0}};

static const char help[] =
    "usage: lockbridge race (--schedule S | --file F | --catalogue DIR)\n"
    "                       [--client NAME=CMD]... [--key K] [--counter-key K]\n"
    "                       [--locker NAME] [--step-timeout-ms N] [--settle-ms N]\n"
    "                       [--ttl-ms N] [--ttl-ms NAME=N]... [--live-steps N]\n"
    "                       [--start-timeout-ms N] [--kill-crashed] [--repeat N]\n"
    "                       [--ports LO-HI] [--junit FILE] [--json]\n"
    "       lockbridge race record --client NAME=CMD... [--record-steps N] [--key K]\n"
    "       lockbridge race --search N [--seed S] [--shrink-tries N] --ttl-ms N\n"
    "                       --client NAME=CMD... [--key K] [--counter-key K]\n"
    "\n"
    "Replays race schedules against real client processes. Each client (A, B, ...)\n"
    "gets a loopback port of its own, printed at the start; a proxy there lets the\n"
    "client's commands on the lock key through to Redis only when the schedule says\n"
    "so, and passes every other command through. Without -h, -p or -s it starts its\n"
    "own redis-server on a free loopback port.\n"
    "\n"
    "Schedule tokens: A:CMD (A's next lock-key command, which must be CMD), A (any\n"
    "command), A:release (A's release, whatever it sends, up to its next attempt\n"
    "to acquire), +N (N ms pass; no lock-key command goes through), +NT (N times the\n"
    "validity T given by --ttl-ms pass: the shipped catalogue's pauses), A! (A is\n"
    "frozen for good), A? (A, alone, must come to hold the lock), A. (A goes on\n"
    "until it holds or goes quiet). A~N cannot be replayed against a real process.\n"
    "\n"
    "record runs each client alone, in turn, every lock-key command let through as\n"
    "it comes, and prints its first commands as schedule tokens (A:SETNX A:GET\n"
    "A:DEL ...): a schedule that client follows alone, to edit into a row.\n"
    "\n"
    "--search records each client once, then draws up to N random schedules from\n"
    "the seed (interleavings of the clients' steps, pauses in multiples of T, a\n"
    "crash after an acquisition attempt followed by a liveness check), runs each\n"
    "against fresh clients, stops at the first violation, shrinks it to a short\n"
    "schedule that still fails and prints that as a catalogue row.\n"
    "\n"
    "  --schedule S            one schedule, e.g. 'A:SETNX A! +1500 B:SETNX B:GET'\n"
    "  --file F                one catalogue file (see docs/race-replay.md)\n"
    "  --catalogue DIR         every *.race file in DIR, in name order\n"
    "  --client NAME=CMD       start client NAME (A..H) as /bin/sh -c CMD for each\n"
    "                          schedule, {port} replaced by its port; killed after\n"
    "  --key K                 the lock key (default race:lock)\n"
    "  --counter-key K         the key the clients GET and SET inside their critical\n"
    "                          sections: enables the overlap and lost-update checks\n"
    "  --locker NAME           the catalogue's expectations for this locker (default:\n"
    "                          every schedule must pass)\n"
    "  --step-timeout-ms N     a client that sends nothing on the lock key this long\n"
    "                          has not followed the schedule (default 3000)\n"
    "  --settle-ms N           a client quiet this long has ended its step (default 100)\n"
    "  --ttl-ms N              the lockers' validity T, ms: a holder counts as\n"
    "                          holding this long after it acquired; +NT pauses N*T\n"
    "                          (default 0: until its next lock-key command; +NT\n"
    "                          refused)\n"
    "  --ttl-ms NAME=N         client NAME's own validity, ms, for fleets with mixed\n"
    "                          validities (T is then --ttl-ms N, else the longest)\n"
    "  --live-steps N          A? must acquire within N lock-key commands (default 12)\n"
    "  --start-timeout-ms N    clients must send their first lock-key command within\n"
    "                          N ms of their start (default 20000)\n"
    "  --kill-crashed          A! also kills A's process (default: only frozen)\n"
    "  --repeat N              replay each row N times (default 1); a row whose\n"
    "                          outcome changes is reported flaky, failing the run\n"
    "  --record-steps N        record: lock-key commands recorded per client\n"
    "                          (default 8, at most 64)\n"
    "  --search N              draw and run at most N random schedules (1..10000)\n"
    "  --seed S                the search's seed (default 1): a seed draws the same\n"
    "                          schedules\n"
    "  --shrink-tries N        runs the shrinking may take (default 60)\n"
    "  --ports LO-HI           take the clients' ports, and the port of the tool's\n"
    "                          own redis-server, from LO..HI (default: any free)\n"
    "  --junit FILE            also write a JUnit XML report to FILE\n"
    "  --json                  JSON lines on stdout\n"
    "\n"
    "Exit: 0 every schedule met its expectation; 1 usage; 4 connection or Redis\n"
    "error, or the server lost during the run; 6 a schedule was caught unexpectedly,\n"
    "passed when it should have been caught, or could not be followed (--search:\n"
    "one of the N was caught, or a client recorded nothing; 0 none was); 128 +\n"
    "the signal when SIGTERM or SIGINT stopped the run (its processes and files\n"
    "are removed and the report written first).\n"
    "Connection: -h HOST -p PORT -s SOCKET -a PASSWORD --user USER -n DB.\n";

#define MAX_ROWS 64

typedef struct settings {
    lb__race_config cfg;
    char dir[256]; /* the run's own folder: each client's stderr, A.err ... */
    const char *client_cmd[LB__RACE_MAX_CLIENTS];
    const char *locker;
    const char *junit;
    int64_t start_timeout_ms;
    int repeat; /* replays of each row; a row whose outcome changes is flaky */
} settings;

typedef struct result {
    int error; /* the run failed, not the locker: the row was not judged */
    int flaky; /* replayed with --repeat, its outcome changed */
    int runs;
    int sections; /* critical sections seen */
    lb__race_verdict verdict;
    lb__race_expect expect;
    const char *expect_kind;
    int ok, skipped, tokens, followed;
    char kind[32];
    char detail[1024];
    char *trace;
    double ms;
} result;

/* ---- Options ------------------------------------------------------------------------- */

static int read_ms(const lb__cli_args *a, const char *name, int64_t min, int64_t def,
                   int64_t *out) {
    const char *v = lb__cli_opt(a, opts, name);
    *out = def;
    return v ? lb__cli_int(a, name, v, min, 3600000, out) : 0;
}

static int read_clients(const lb__cli_args *a, settings *s) {
    const char *v[LB__CLI_MAX_REPEATS + 1];
    int n = lb__cli_opt_all(a, opts, "--client", v, LB__CLI_MAX_REPEATS + 1);
    for (int i = 0; i < n; i++) {
        int c = v[i][0] - 'A';
        if (c < 0 || c >= LB__RACE_MAX_CLIENTS || v[i][1] != '=' || !v[i][2])
            return lb__cli_usage(a, "--client expects NAME=COMMAND with NAME one of A..H"), -1;
        if (s->client_cmd[c]) return lb__cli_usage(a, "--client %c given twice", v[i][0]), -1;
        s->client_cmd[c] = v[i] + 2;
    }
    return 0;
}

/* --ttl-ms N (every client; T of +NT pauses) and --ttl-ms NAME=N (one client
 * of a fleet with mixed validities). T is the fleet's --ttl-ms N, else the
 * longest of the clients'. */
static int read_ttls(const lb__cli_args *a, settings *s) {
    const char *v[LB__CLI_MAX_REPEATS + 1];
    int n = lb__cli_opt_all(a, opts, "--ttl-ms", v, LB__CLI_MAX_REPEATS + 1), fleet = 0;
    int64_t longest = 0;
    for (int i = 0; i < n; i++) {
        int c = v[i][0] >= 'A' && v[i][0] <= 'Z' && v[i][1] == '=' ? v[i][0] - 'A' : -1;
        int64_t ms;
        if (c >= LB__RACE_MAX_CLIENTS)
            return lb__cli_usage(a, "--ttl-ms NAME=N expects NAME one of A..H"), -1;
        if (lb__cli_int(a, "--ttl-ms", c >= 0 ? v[i] + 2 : v[i], 0, 3600000, &ms) != 0) return -1;
        if (c < 0 && fleet++) return lb__cli_usage(a, "--ttl-ms N given twice"), -1;
        if (c >= 0 && s->cfg.client_ttl_ms[c])
            return lb__cli_usage(a, "--ttl-ms %c= given twice", v[i][0]), -1;
        if (c < 0) s->cfg.ttl_ms = ms;
        else s->cfg.client_ttl_ms[c] = ms;
        if (ms > longest) longest = ms;
    }
    s->cfg.t_ms = fleet ? s->cfg.ttl_ms : longest;
    return 0;
}

/* --ports LO-HI: the range the proxy's ports (and the tool's own server's)
 * come from, for a CI runner whose firewall opens only some. */
static int read_ports(const lb__cli_args *a, settings *s) {
    const char *v = lb__cli_opt(a, opts, "--ports");
    if (!v) return 0;
    const char *dash = strchr(v, '-');
    int64_t lo, hi;
    if (!dash || lb__cli_parse_i64(v, (size_t)(dash - v), &lo) != 0 ||
        lb__cli_parse_i64(dash + 1, strlen(dash + 1), &hi) != 0 || lo < 1 || hi > 65535 ||
        lo > hi)
        return lb__cli_usage(a, "--ports expects LO-HI, 1 <= LO <= HI <= 65535"), -1;
    s->cfg.port_lo = (int)lo;
    s->cfg.port_hi = (int)hi;
    return 0;
}

static int read_settings(const lb__cli_args *a, settings *s) {
    int64_t v;
    memset(s, 0, sizeof *s);
    s->cfg.upstream = &a->conn;
    s->cfg.key = lb__cli_opt(a, opts, "--key");
    if (!s->cfg.key) s->cfg.key = "race:lock";
    s->cfg.counter_key = lb__cli_opt(a, opts, "--counter-key");
    if (!s->cfg.key[0] || (s->cfg.counter_key && !s->cfg.counter_key[0]))
        return lb__cli_usage(a, "--key and --counter-key must not be empty"), -1;
    if (s->cfg.counter_key && strcmp(s->cfg.key, s->cfg.counter_key) == 0)
        return lb__cli_usage(a, "--key and --counter-key must differ"), -1;
    if (read_ms(a, "--step-timeout-ms", 1, 3000, &s->cfg.step_timeout_ms) != 0 ||
        read_ms(a, "--settle-ms", 1, 100, &s->cfg.settle_ms) != 0 || read_ttls(a, s) != 0 ||
        read_ports(a, s) != 0 ||
        read_ms(a, "--start-timeout-ms", 1, 20000, &s->start_timeout_ms) != 0 ||
        read_ms(a, "--live-steps", 1, 12, &v) != 0)
        return -1;
    if (v > 1000) return lb__cli_usage(a, "--live-steps expects at most 1000"), -1;
    s->cfg.live_steps = (int)v;
    const char *rep = lb__cli_opt(a, opts, "--repeat");
    if (rep && lb__cli_int(a, "--repeat", rep, 1, 100, &v) != 0) return -1;
    s->repeat = rep ? (int)v : 1;
    s->cfg.kill_crashed = lb__cli_opt(a, opts, "--kill-crashed") != NULL;
    s->locker = lb__cli_opt(a, opts, "--locker");
    s->junit = lb__cli_opt(a, opts, "--junit");
    return read_clients(a, s);
}

/* ---- Schedules to run ------------------------------------------------------------------- */

static int by_name(const void *x, const void *y) {
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static int read_catalogue(const lb__cli_args *a, const char *dir, lb__race_row *rows, int *n) {
    char *names[MAX_ROWS], why[1200], path[4096];
    int k = 0, rc = 0;
    DIR *d = opendir(dir);
    if (!d) return lb__cli_usage(a, "--catalogue: cannot open %s", dir), -1;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".race") != 0) continue;
        if (k >= MAX_ROWS) {
            rc = lb__cli_usage(a, "--catalogue: more than %d files", MAX_ROWS);
            break;
        }
        if (!(names[k] = strdup(e->d_name))) break;
        k++;
    }
    closedir(d);
    qsort(names, (size_t)k, sizeof names[0], by_name);
    for (int i = 0; i < k; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (rc == 0 && lb__race_row_read(path, &rows[*n], why, sizeof why) != 0)
            rc = lb__cli_usage(a, "%s", why);
        else if (rc == 0)
            (*n)++;
        free(names[i]);
    }
    if (rc == 0 && *n == 0) rc = lb__cli_usage(a, "--catalogue: no *.race file in %s", dir);
    return rc == 0 ? 0 : -1;
}

static int read_rows(const lb__cli_args *a, lb__race_row *rows, int *n) {
    const char *sched = lb__cli_opt(a, opts, "--schedule");
    const char *file = lb__cli_opt(a, opts, "--file");
    const char *dir = lb__cli_opt(a, opts, "--catalogue");
    char why[1200];
    *n = 0;
    if (!!sched + !!file + !!dir != 1)
        return lb__cli_usage(a, "give one of --schedule, --file and --catalogue"), -1;
    if (dir) return read_catalogue(a, dir, rows, n);
    if (file) {
        if (lb__race_row_read(file, &rows[0], why, sizeof why) != 0)
            return lb__cli_usage(a, "%s", why), -1;
    } else {
        memset(&rows[0], 0, sizeof rows[0]);
        snprintf(rows[0].name, sizeof rows[0].name, "schedule");
        if (strlen(sched) >= sizeof rows[0].schedule)
            return lb__cli_usage(a, "--schedule is too long"), -1;
        strcpy(rows[0].schedule, sched);
    }
    *n = 1;
    return 0;
}

/* Parses every row's schedule up front, so that a typo fails before anything
 * starts; returns the number of clients the schedules need. A row that
 * applies names only clients given a command line (when any is given: the
 * others would never connect), and a +NT pause needs the validity T. */
static int names_client(const lb__race_sched *sc, int c) {
    for (int i = 0; i < sc->n; i++)
        if (sc->tok[i].kind != LB__RACE_PAUSE && sc->tok[i].client == c) return 1;
    return 0;
}

static int check_rows(const lb__cli_args *a, const settings *s, const lb__race_row *rows, int n) {
    int clients = 0, given = 0;
    for (int c = 0; c < LB__RACE_MAX_CLIENTS; c++)
        if (s->client_cmd[c]) clients = c + 1, given = 1;
    for (int i = 0; i < n; i++) {
        lb__race_sched sc;
        char why[200], at[600];
        const char *kind;
        lb__race_row_where(&rows[i], s->locker, at, sizeof at);
        if (lb__race_parse(lb__race_row_schedule(&rows[i], s->locker), &sc, why, sizeof why) != 0)
            return lb__cli_usage(a, "%s: %s", at, why), -1;
        if (lb__race_row_expect(&rows[i], s->locker, &kind) == LB__RACE_EXPECT_NA) continue;
        for (int c = 0; given && c < sc.clients; c++)
            if (!s->client_cmd[c] && names_client(&sc, c))
                return lb__cli_usage(a, "%s: the schedule names client %c, given no --client",
                                     at, 'A' + c), -1;
        if (sc.scaled && s->cfg.t_ms <= 0)
            return lb__cli_usage(a, "%s: its pauses are multiples of the validity (+NT): "
                                 "give --ttl-ms", at), -1;
        if (sc.clients > clients) clients = sc.clients;
    }
    return clients;
}

/* ---- Running --------------------------------------------------------------------------- */

static void reset_keys(redisContext *c, const settings *s) {
    redisReply *r = redisCommand(c, "DEL %s", s->cfg.key);
    if (r) freeReplyObject(r);
    if (s->cfg.counter_key) {
        r = redisCommand(c, "DEL %s", s->cfg.counter_key);
        if (r) freeReplyObject(r);
    }
}

static int meets(const result *r) {
    if (r->expect == LB__RACE_EXPECT_PASS) return r->verdict == LB__RACE_PASSED;
    return r->verdict == LB__RACE_CAUGHT &&
           (!r->expect_kind[0] || strcmp(r->expect_kind, r->kind) == 0);
}

static void run_row(lb__race_proxy *p, redisContext *ctl, const settings *s, const int *ports,
                    const lb__race_row *row, result *r) {
    lb__race_sched sc;
    char why[200];
    pid_t pids[LB__RACE_MAX_CLIENTS] = {0};
    memset(r, 0, sizeof *r);
    r->expect = lb__race_row_expect(row, s->locker, &r->expect_kind);
    if (r->expect == LB__RACE_EXPECT_NA) {
        r->skipped = r->ok = 1;
        return;
    }
    lb__race_parse(lb__race_row_schedule(row, s->locker), &sc, why, sizeof why);
    r->tokens = sc.n;
    reset_keys(ctl, s);
    lb__race_proxy_reset(p);
    for (int c = 0; c < s->cfg.nclients; c++)
        if (s->client_cmd[c]) {
            char errpath[sizeof s->dir + 8];
            snprintf(errpath, sizeof errpath, "%s/%c.err", s->dir, 'A' + c);
            pids[c] = lb__race_spawn(s->client_cmd[c], ports[c], s->dir[0] ? errpath : NULL);
            lb__race_proxy_set_pid(p, c, pids[c], s->dir[0] ? errpath : NULL);
        }
    double t0 = lb__cli_mono_ms();
    r->verdict = lb__race_proxy_run(p, &sc, s->start_timeout_ms);
    r->ms = lb__cli_mono_ms() - t0;
    for (int c = 0; c < s->cfg.nclients; c++) lb__race_kill(pids[c]);
    r->followed = lb__race_proxy_followed(p);
    r->sections = lb__race_proxy_sections(p);
    snprintf(r->kind, sizeof r->kind, "%s", lb__race_proxy_kind(p));
    snprintf(r->detail, sizeof r->detail, "%s", lb__race_proxy_detail(p));
    r->trace = strdup(lb__race_proxy_trace(p));
    r->error = r->verdict == LB__RACE_ERROR;
    r->ok = meets(r);
}

static const char *verdict_name(lb__race_verdict v) {
    switch (v) {
    case LB__RACE_PASSED: return "passed";
    case LB__RACE_CAUGHT: return "caught";
    case LB__RACE_NOT_FOLLOWED: return "not_followed";
    default: return "error";
    }
}

/* "passed", "caught:deleted", "not_followed", "error": what --repeat compares. */
static void outcome(const result *r, char *out, size_t cap) {
    snprintf(out, cap, "%s%s%s", verdict_name(r->verdict),
             r->verdict == LB__RACE_CAUGHT && r->kind[0] ? ":" : "",
             r->verdict == LB__RACE_CAUGHT ? r->kind : "");
}

/* The trace of run `k` after those kept, under a line naming the run. */
static void add_trace(result *r, int k, int of, const char *what, const char *trace) {
    size_t had = r->trace ? strlen(r->trace) : 0, n = strlen(trace) + 96;
    char *t = realloc(r->trace, had + n);
    if (!t) return;
    snprintf(t + had, n, "--- run %d of %d: %s ---\n%s", k, of, what, trace);
    r->trace = t;
}

/* Replays a row --repeat times. The same outcome every time is the row's
 * outcome; any change makes it flaky, which never meets an expectation: the
 * verdict then depends on timing the schedule does not fix. The trace keeps
 * the first run and the first run that differed. A run that fails (the
 * server, a signal) ends the replays and is the row's result. */
static void run_repeated(lb__race_proxy *p, redisContext *ctl, const settings *s,
                         const int *ports, const lb__race_row *row, result *r) {
    char first[48], now[48], tally[256] = "";
    int count[8] = {0}, kinds = 0;
    char seen[8][48];
    run_row(p, ctl, s, ports, row, r);
    r->runs = 1;
    if (r->skipped || r->error || s->repeat <= 1) return;
    outcome(r, first, sizeof first);
    snprintf(seen[kinds], sizeof seen[0], "%s", first);
    count[kinds++] = 1;
    for (int k = 2; k <= s->repeat && !lb__race_stop_signal; k++) {
        result again;
        run_row(p, ctl, s, ports, row, &again);
        if (again.error) {
            free(r->trace);
            *r = again;
            return;
        }
        r->ms += again.ms;
        r->runs = k;
        outcome(&again, now, sizeof now);
        int i = 0;
        while (i < kinds && strcmp(seen[i], now) != 0) i++;
        if (i == kinds && kinds < 8) snprintf(seen[kinds++], sizeof seen[0], "%s", now);
        if (i < 8) count[i]++;
        if (strcmp(now, first) != 0 && !r->flaky) {
            char *one = r->trace;
            r->trace = NULL;
            add_trace(r, 1, s->repeat, first, one ? one : "");
            add_trace(r, k, s->repeat, now, again.trace ? again.trace : "");
            free(one);
            r->flaky = 1;
        }
        free(again.trace);
    }
    if (!r->flaky) return;
    for (int i = 0; i < kinds; i++)
        snprintf(tally + strlen(tally), sizeof tally - strlen(tally), "%s%s %d", i ? ", " : "",
                 seen[i], count[i]);
    snprintf(r->detail, sizeof r->detail, "flaky over %d runs: %s", r->runs, tally);
    r->ok = 0;
}

/* A row the run did not get to, or could not judge: an error, not a failure
 * of the locker. */
static void not_run(result *r, const char *why) {
    memset(r, 0, sizeof *r);
    r->verdict = LB__RACE_ERROR;
    r->error = 1;
    r->expect_kind = "";
    snprintf(r->kind, sizeof r->kind, "error");
    snprintf(r->detail, sizeof r->detail, "not run: %s", why);
}

volatile sig_atomic_t lb__race_stop_signal;

static void on_stop(int sig) { lb__race_stop_signal = sig; }

/* SIGTERM (a CI job's timeout) and SIGINT end the run in order: the schedule
 * under way ends, every process the run started is stopped, its folder
 * removed and the report written. No SA_RESTART: a blocking call returns. */
static void catch_stops(struct sigaction old[2]) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    lb__race_stop_signal = 0;
    sigaction(SIGTERM, &sa, &old[0]);
    sigaction(SIGINT, &sa, &old[1]);
}

static void release_stops(const struct sigaction old[2]) {
    sigaction(SIGTERM, &old[0], NULL);
    sigaction(SIGINT, &old[1], NULL);
}

/* Whether the server still answers the tool's own connection. */
static int server_answers(redisContext *ctl) {
    redisReply *r = redisCommand(ctl, "PING");
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
}

static void expected_text(const result *r, char *out, size_t cap) {
    if (r->expect == LB__RACE_EXPECT_PASS) snprintf(out, cap, "pass");
    else if (r->expect == LB__RACE_EXPECT_NA) snprintf(out, cap, "n/a");
    else snprintf(out, cap, "caught%s%s", r->expect_kind[0] ? ":" : "", r->expect_kind);
}

/* ---- Reports ------------------------------------------------------------------------------ */

static void report_text(const settings *s, const lb__race_row *row, const result *r) {
    char exp[64];
    expected_text(r, exp, sizeof exp);
    printf("== %s%s%s\n", row->name, row->title[0] ? ": " : "", row->title);
    if (r->skipped) {
        printf("skipped: the row does not apply to %s\n\n", s->locker);
        return;
    }
    printf("schedule: %s\n%s", lb__race_row_schedule(row, s->locker), r->trace ? r->trace : "");
    if (r->flaky) {
        printf("verdict: %s (expected %s): FAILED\n\n", r->detail, exp);
        fflush(stdout);
        return;
    }
    printf("verdict: %s%s%s%s (expected %s): %s\n\n", verdict_name(r->verdict),
           r->kind[0] && r->verdict != LB__RACE_NOT_FOLLOWED ? ":" : "",
           r->verdict != LB__RACE_NOT_FOLLOWED ? r->kind : "",
           r->verdict == LB__RACE_PASSED ? ", followed to its end" : "", exp,
           r->ok ? "ok" : "FAILED");
    fflush(stdout);
}

static void report_json(const settings *s, const lb__race_row *row, const result *r) {
    char exp[64];
    expected_text(r, exp, sizeof exp);
    cJSON *o = lb__cli_event("race_result");
    if (!o) return;
    lb__cli_add_str(o, "race", row->name);
    lb__cli_add_str(o, "schedule", lb__race_row_schedule(row, s->locker));
    if (s->locker) lb__cli_add_str(o, "locker", s->locker);
    lb__cli_add_str(o, "verdict",
                    r->skipped ? "skipped" : r->flaky ? "flaky" : verdict_name(r->verdict));
    if (!r->skipped && s->repeat > 1) lb__cli_add_i64(o, "runs", r->runs);
    lb__cli_add_str(o, "expected", exp);
    lb__cli_add_bool(o, "ok", r->ok);
    if (!r->skipped) {
        lb__cli_add_i64(o, "tokens", r->tokens);
        lb__cli_add_i64(o, "followed", r->followed);
        lb__cli_add_str(o, "kind", r->kind);
        lb__cli_add_str(o, "detail", r->detail);
        lb__cli_add_ms(o, "ms", r->ms);
        lb__cli_add_str(o, "trace", r->trace ? r->trace : "");
    }
    lb__cli_emit(o);
}

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '&') fputs("&amp;", f);
        else if (c == '"') fputs("&quot;", f);
        else if (c < 0x20 && c != '\n' && c != '\t') fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
}

static void junit_case(FILE *f, const settings *s, const lb__race_row *row, const result *r) {
    char exp[64];
    expected_text(r, exp, sizeof exp);
    fputs("  <testcase classname=\"lockbridge.race.", f);
    xml_text(f, s->locker ? s->locker : "client");
    fputs("\" name=\"", f);
    xml_text(f, row ? row->name : "set-up");
    fprintf(f, "\" time=\"%.3f\">\n", r->ms / 1000.0);
    if (r->skipped) {
        fputs("    <skipped message=\"the row does not apply to this locker\"/>\n", f);
    } else {
        if (!r->ok) {
            fprintf(f, "    <%s%s message=\"", r->error ? "error" : "failure",
                    r->flaky ? " type=\"flaky\"" : "");
            if (r->flaky) fprintf(f, "expected %s: ", exp);
            else if (!r->error) fprintf(f, "%s (expected %s): ", verdict_name(r->verdict), exp);
            xml_text(f, r->detail[0] ? r->detail : "no violation seen");
            fputs("\"/>\n", f);
        }
        if (row) {
            fputs("    <system-out>", f);
            xml_text(f, lb__race_row_schedule(row, s->locker));
            fputs("\n", f);
            xml_text(f, r->trace ? r->trace : "");
            fputs("</system-out>\n", f);
        }
    }
    fputs("  </testcase>\n", f);
}

/* One test case per row; with no rows (a set-up that failed before any was
 * read), one "set-up" case in error. */
static int write_junit(const settings *s, const lb__race_row *rows, const result *res, int n) {
    FILE *f = fopen(s->junit, "w");
    if (!f) return -1;
    int failures = 0, errors = 0, skipped = 0;
    double ms = 0;
    for (int i = 0; i < n; i++) {
        failures += !res[i].ok && !res[i].error;
        errors += res[i].error;
        skipped += res[i].skipped;
        ms += res[i].ms;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<testsuite name=\"lockbridge race\" tests=\"%d\" failures=\"%d\" errors=\"%d\" "
               "skipped=\"%d\" time=\"%.3f\">\n",
            n, failures, errors, skipped, ms / 1000.0);
    for (int i = 0; i < n; i++) junit_case(f, s, rows ? &rows[i] : NULL, &res[i]);
    fputs("</testsuite>\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

static void junit_or_say(const settings *s, const lb__race_row *rows, const result *res, int n,
                         int *failed) {
    if (s->junit && write_junit(s, rows, res, n) != 0) {
        fprintf(stderr, "lockbridge race: cannot write %s\n", s->junit);
        (*failed)++;
    }
}

/* ---- The command ------------------------------------------------------------------------ */

static void print_ports(const settings *s, const int *ports) {
    for (int c = 0; c < s->cfg.nclients; c++) {
        if (lb__cli_is_json()) {
            cJSON *o = lb__cli_event("race_port");
            if (!o) continue;
            char name[2] = {(char)('A' + c), 0};
            lb__cli_add_str(o, "client", name);
            lb__cli_add_i64(o, "port", ports[c]);
            lb__cli_emit(o);
        } else {
            printf("client %c: 127.0.0.1:%d\n", 'A' + c, ports[c]);
        }
    }
    if (!lb__cli_is_json()) printf("\n");
    fflush(stdout);
}

/* Runs the rows in order until one cannot be judged because of the run
 * itself (a signal, the server lost); the rest are reported not run. The
 * exit code. */
static int run_rows(settings *s, lb__race_row *rows, int n, result *res, redisContext *ctl,
                    char *why, size_t cap) {
    int ports[LB__RACE_MAX_CLIENTS] = {0}, done = 0, code = LB__CLI_EXIT_OK;
    lb__race_proxy *p = lb__race_proxy_new(&s->cfg, ports, why, cap);
    if (!p) {
        for (int i = 0; i < n; i++) not_run(&res[i], why);
        return LB__CLI_EXIT_REDIS;
    }
    print_ports(s, ports);
    for (; done < n && !lb__race_stop_signal; done++) {
        run_repeated(p, ctl, s, ports, &rows[done], &res[done]);
        if (lb__cli_is_json()) report_json(s, &rows[done], &res[done]);
        else report_text(s, &rows[done], &res[done]);
        if (res[done].error && !lb__race_stop_signal && !server_answers(ctl)) {
            snprintf(why, cap, "the Redis server was lost during %s", rows[done].name);
            code = LB__CLI_EXIT_REDIS;
            done++;
            break;
        }
    }
    lb__race_proxy_free(p);
    if (lb__race_stop_signal) {
        snprintf(why, cap, "the run was stopped by signal %d", (int)lb__race_stop_signal);
        code = 128 + (int)lb__race_stop_signal;
    }
    for (int i = done; i < n; i++) not_run(&res[i], why);
    return code;
}

/* The run's folder for the clients' stderr, under $TMPDIR as mktemp(1) does;
 * without one, their stderr is discarded. */
static void make_dir(settings *s) {
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(s->dir, sizeof s->dir, "%s/lockbridge-race-run-XXXXXX",
                     tmp && tmp[0] ? tmp : "/tmp");
    if (n < 0 || (size_t)n >= sizeof s->dir || !mkdtemp(s->dir)) s->dir[0] = '\0';
}

static void remove_dir(settings *s) {
    if (!s->dir[0]) return;
    for (int c = 0; c < LB__RACE_MAX_CLIENTS; c++) {
        char path[sizeof s->dir + 8];
        snprintf(path, sizeof path, "%s/%c.err", s->dir, 'A' + c);
        unlink(path);
    }
    rmdir(s->dir);
    s->dir[0] = '\0';
}

/* Starts the server when none is given and connects to it; -1 with `why`. */
static int set_up(const lb__cli_args *a, settings *s, lb__race_server *server,
                  lb__cli_conn *own, redisContext **ctl, char *why, size_t cap) {
    *own = a->conn;
    if (!lb__cli_conn_given(a)) {
        if (lb__race_server_start(server, s->cfg.port_lo, s->cfg.port_hi, why, cap) != 0)
            return -1;
        own->host = "127.0.0.1";
        own->port = server->port;
        own->socket = NULL;
        s->cfg.upstream = own;
    }
    *ctl = lb__cli_connect(s->cfg.upstream, why, cap);
    if (!*ctl) return -1;
    /* Told apart from a client connected straight to the server. */
    redisReply *r = redisCommand(*ctl, "CLIENT SETNAME lockbridge-race");
    if (r) freeReplyObject(r);
    make_dir(s);
    return 0;
}

/* The summary, the report and the exit code, whatever ended the run. */
static int finish(const lb__cli_args *a, const settings *s, const lb__race_row *rows,
                  result *res, int n, int code, const char *why) {
    int failed = 0, judged = 0, sections = 0;
    for (int i = 0; i < n; i++) {
        failed += !res[i].ok;
        judged += !res[i].skipped && !res[i].error;
        sections += res[i].sections;
    }
    /* A counter key no client used as the pattern says leaves two checks
     * blind: said, not silently passed. */
    if (s->cfg.counter_key && judged > 0 && sections == 0)
        fprintf(stderr,
                "lockbridge race: warning: --counter-key %s: no critical section seen in any "
                "row (no client read it after its lock commands); overlap and lost-update "
                "were not checked\n",
                s->cfg.counter_key);
    junit_or_say(s, rows, res, n, &failed);
    if (!lb__cli_is_json()) printf("%d of %d schedules met their expectation\n", n - failed, n);
    if (code != LB__CLI_EXIT_OK) {
        if (code == LB__CLI_EXIT_REDIS) lb__cli_error(a, NULL, LB_EIO, why);
        else fprintf(stderr, "lockbridge race: %s\n", why);
        return code;
    }
    return failed ? LB__CLI_EXIT_UNSAFE : LB__CLI_EXIT_OK;
}

/* One client's sequence: it alone runs, every lock-key command let through as
 * it comes; the line printed is a schedule that client follows alone. */
static int record_one(lb__race_proxy *p, redisContext *ctl, const settings *s, const int *ports,
                      int c, int steps) {
    char tokens[LB__RACE_SCHED_MAX], errpath[sizeof s->dir + 8];
    snprintf(errpath, sizeof errpath, "%s/%c.err", s->dir, 'A' + c);
    reset_keys(ctl, s);
    lb__race_proxy_reset(p);
    pid_t pid = lb__race_spawn(s->client_cmd[c], ports[c], s->dir[0] ? errpath : NULL);
    lb__race_proxy_set_pid(p, c, pid, s->dir[0] ? errpath : NULL);
    int n = lb__race_proxy_record(p, c, steps, s->start_timeout_ms, tokens, sizeof tokens);
    lb__race_kill(pid);
    char name[2] = {(char)('A' + c), 0};
    if (lb__cli_is_json()) {
        cJSON *o = lb__cli_event("race_record");
        if (o) {
            lb__cli_add_str(o, "client", name);
            lb__cli_add_i64(o, "recorded", n < 0 ? 0 : n);
            lb__cli_add_str(o, "tokens", n > 0 ? tokens : "");
            if (n <= 0) lb__cli_add_str(o, "detail", lb__race_proxy_detail(p));
            lb__cli_emit(o);
        }
    } else if (n > 0) {
        printf("%s\n", tokens);
    } else {
        printf("%s: nothing recorded: %s\n", name, lb__race_proxy_detail(p));
    }
    fflush(stdout);
    return n > 0 ? 0 : -1;
}

/* `race record`: each client given, alone and in turn, for its first
 * --record-steps lock-key commands. */
static int run_record(const lb__cli_args *a, settings *s) {
    int64_t steps = 8;
    const char *v = lb__cli_opt(a, opts, "--record-steps");
    if (v && lb__cli_int(a, "--record-steps", v, 1, LB__RACE_MAX_TOKENS, &steps) != 0)
        return LB__CLI_EXIT_USAGE;
    if (lb__cli_opt(a, opts, "--schedule") || lb__cli_opt(a, opts, "--file") ||
        lb__cli_opt(a, opts, "--catalogue"))
        return lb__cli_usage(a, "race record takes no --schedule, --file or --catalogue");
    for (int c = 0; c < LB__RACE_MAX_CLIENTS; c++)
        if (s->client_cmd[c]) s->cfg.nclients = c + 1;
    if (s->cfg.nclients == 0) return lb__cli_usage(a, "race record needs a --client");
    struct sigaction old[2];
    catch_stops(old);
    lb__race_server server = {0};
    lb__cli_conn own;
    redisContext *ctl = NULL;
    char why[256] = "";
    int ports[LB__RACE_MAX_CLIENTS] = {0}, code = LB__CLI_EXIT_OK;
    lb__race_proxy *p = NULL;
    if (set_up(a, s, &server, &own, &ctl, why, sizeof why) != 0 ||
        !(p = lb__race_proxy_new(&s->cfg, ports, why, sizeof why))) {
        code = lb__cli_error(a, NULL, LB_EIO, why);
    } else {
        print_ports(s, ports);
        for (int c = 0; c < s->cfg.nclients && !lb__race_stop_signal; c++)
            if (s->client_cmd[c] && record_one(p, ctl, s, ports, c, (int)steps) != 0)
                code = LB__CLI_EXIT_UNSAFE;
        if (lb__race_stop_signal) code = 128 + (int)lb__race_stop_signal;
    }
    lb__race_proxy_free(p);
    remove_dir(s);
    if (ctl) redisFree(ctl);
    lb__race_server_stop(&server);
    release_stops(old);
    return code;
}

/* ---- --search ------------------------------------------------------------------------ */

/* One line per run as the search goes: what it drew, what each shrinking
 * try kept, the replay of the line printed. */
static void search_progress(const char *phase, int n, lb__race_verdict v, const char *kind,
                            const char *line) {
    int caught = v == LB__RACE_CAUGHT && kind[0];
    if (lb__cli_is_json()) {
        cJSON *o = lb__cli_event("race_search_run");
        if (!o) return;
        lb__cli_add_str(o, "phase", phase);
        if (n > 0) lb__cli_add_i64(o, "n", n);
        if (strcmp(phase, "record") != 0) {
            lb__cli_add_str(o, "verdict", verdict_name(v));
            lb__cli_add_str(o, "kind", caught ? kind : "");
        }
        lb__cli_add_str(o, "schedule", line);
        lb__cli_emit(o);
    } else if (strcmp(phase, "record") == 0) {
        printf("recorded: %s\n", line);
    } else {
        printf("%s %d: %s%s%s: %s\n", phase, n, verdict_name(v), caught ? ":" : "",
               caught ? kind : "", line);
    }
    fflush(stdout);
}

static void search_report(const settings *s, const lb__race_search *se,
                          const lb__race_found *f, lb__race_verdict v) {
    char exp[96];
    snprintf(exp, sizeof exp, "%s=caught:%s", s->locker ? s->locker : "*", f->kind);
    if (lb__cli_is_json()) {
        cJSON *o = lb__cli_event("race_search");
        if (!o) return;
        lb__cli_add_i64(o, "seed", (int64_t)se->seed);
        lb__cli_add_i64(o, "tried", f->tried);
        lb__cli_add_str(o, "recorded", f->recorded);
        lb__cli_add_bool(o, "found", f->found);
        if (f->found) {
            lb__cli_add_str(o, "kind", f->kind);
            lb__cli_add_str(o, "drawn", f->first);
            lb__cli_add_str(o, "schedule", f->schedule);
            lb__cli_add_i64(o, "tokens", f->tokens);
            lb__cli_add_i64(o, "shrink_runs", f->shrink_runs);
            lb__cli_add_bool(o, "replayed", f->replayed);
            lb__cli_add_str(o, "expect", exp);
            lb__cli_add_str(o, "trace", f->trace ? f->trace : "");
        }
        lb__cli_add_str(o, "detail", f->detail);
        lb__cli_emit(o);
        return;
    }
    printf("\n");
    if (!f->found) {
        if (v == LB__RACE_PASSED)
            printf("search: none of %d schedules (seed %llu) was caught\n", f->tried,
                   (unsigned long long)se->seed);
        else printf("search: %s\n", f->detail);
        return;
    }
    printf("search: schedule %d (seed %llu) caught: %s\n  drawn:  %s\n"
           "  shrunk: %s (%d runs; replayed as printed: %s)\n\n",
           f->tried, (unsigned long long)se->seed, f->kind, f->first, f->schedule,
           f->shrink_runs, f->replayed ? "caught again" : "NOT caught again, timing-sensitive");
    printf("# race: found by --search %d --seed %llu: %s\n# expect %s\n%s\n\n%s",
           se->schedules, (unsigned long long)se->seed, f->detail, exp, f->schedule,
           f->trace ? f->trace : "");
    fflush(stdout);
}

static int read_search(const lb__cli_args *a, settings *s, lb__race_search *se) {
    int64_t v;
    memset(se, 0, sizeof *se);
    const char *n = lb__cli_opt(a, opts, "--search"), *seed = lb__cli_opt(a, opts, "--seed");
    const char *tries = lb__cli_opt(a, opts, "--shrink-tries");
    if (lb__cli_int(a, "--search", n, 1, 10000, &v) != 0) return -1;
    se->schedules = (int)v;
    se->seed = 1;
    if (seed && lb__cli_int(a, "--seed", seed, 0, 4294967295LL, &v) != 0) return -1;
    if (seed) se->seed = (uint64_t)v;
    se->shrink_tries = 60;
    if (tries && lb__cli_int(a, "--shrink-tries", tries, 0, 10000, &v) != 0) return -1;
    if (tries) se->shrink_tries = (int)v;
    if (lb__cli_opt(a, opts, "--schedule") || lb__cli_opt(a, opts, "--file") ||
        lb__cli_opt(a, opts, "--catalogue") || lb__cli_opt(a, opts, "--junit") ||
        lb__cli_opt(a, opts, "--repeat"))
        return lb__cli_usage(a, "--search takes no --schedule, --file, --catalogue, --junit "
                             "or --repeat"), -1;
    for (int c = 0; c < LB__RACE_MAX_CLIENTS; c++)
        if (s->client_cmd[c]) s->cfg.nclients = c + 1;
    for (int c = 0; c < s->cfg.nclients; c++)
        if (!s->client_cmd[c])
            return lb__cli_usage(a, "--search: clients are named from A on; %c has no --client",
                                 'A' + c), -1;
    if (s->cfg.nclients < 2) return lb__cli_usage(a, "--search needs two --client at least"), -1;
    if (s->cfg.t_ms <= 0)
        return lb__cli_usage(a, "--search needs --ttl-ms: its pauses are multiples of it"), -1;
    return 0;
}

/* `race --search N`: the clients recorded, N schedules drawn, the first caught
 * shrunk and printed as a row. */
static int run_search(const lb__cli_args *a, settings *s) {
    lb__race_search se;
    if (read_search(a, s, &se) != 0) return LB__CLI_EXIT_USAGE;
    s->cfg.search = 1;
    struct sigaction old[2];
    catch_stops(old);
    lb__race_server server = {0};
    lb__cli_conn own;
    redisContext *ctl = NULL;
    char why[256] = "";
    int ports[LB__RACE_MAX_CLIENTS] = {0}, code;
    lb__race_found f;
    memset(&f, 0, sizeof f);
    if (set_up(a, s, &server, &own, &ctl, why, sizeof why) != 0 ||
        !(se.proxy = lb__race_proxy_new(&s->cfg, ports, why, sizeof why))) {
        code = lb__cli_error(a, NULL, LB_EIO, why);
    } else {
        print_ports(s, ports);
        se.ctl = ctl;
        se.cfg = &s->cfg;
        se.client_cmd = s->client_cmd;
        se.ports = ports;
        se.dir = s->dir;
        se.start_timeout_ms = s->start_timeout_ms;
        se.progress = search_progress;
        lb__race_verdict v = lb__race_search_run(&se, &f);
        /* A schedule caught before a signal is still worth its line. */
        if (!lb__race_stop_signal || f.found) search_report(s, &se, &f, v);
        code = lb__race_stop_signal ? 128 + (int)lb__race_stop_signal
               : v == LB__RACE_ERROR ? lb__cli_error(a, NULL, LB_EIO, f.detail)
               : v == LB__RACE_PASSED ? LB__CLI_EXIT_OK
                                      : LB__CLI_EXIT_UNSAFE;
    }
    free(f.trace);
    lb__race_proxy_free(se.proxy);
    remove_dir(s);
    if (ctl) redisFree(ctl);
    lb__race_server_stop(&server);
    release_stops(old);
    return code;
}

static int run(const lb__cli_args *a) {
    settings s;
    int n = 0, code;
    char why[256] = "";
    if (read_settings(a, &s) != 0) return LB__CLI_EXIT_USAGE;
    if (a->npos > 0) {
        if (strcmp(a->pos[0], "record") != 0)
            return lb__cli_usage(a, "unknown subcommand %s (race takes record, or none)",
                                 a->pos[0]);
        return run_record(a, &s);
    }
    if (lb__cli_opt(a, opts, "--search")) return run_search(a, &s);
    lb__race_row *rows = calloc(MAX_ROWS, sizeof *rows);
    result *res = calloc(MAX_ROWS, sizeof *res);
    if (!rows || !res) {
        free(rows);
        free(res);
        return lb__cli_error(a, NULL, LB_EIO, "out of memory");
    }
    if (read_rows(a, rows, &n) != 0 || (s.cfg.nclients = check_rows(a, &s, rows, n)) < 0) {
        not_run(&res[0], "the command line or a catalogue file was refused (see stderr)");
        int ignored = 0;
        junit_or_say(&s, NULL, res, 1, &ignored);
        free(rows);
        free(res);
        return LB__CLI_EXIT_USAGE;
    }
    struct sigaction old[2];
    catch_stops(old);
    lb__race_server server = {0};
    lb__cli_conn own;
    redisContext *ctl = NULL;
    if (set_up(a, &s, &server, &own, &ctl, why, sizeof why) != 0) {
        for (int i = 0; i < n; i++) not_run(&res[i], why);
        code = LB__CLI_EXIT_REDIS;
    } else {
        code = run_rows(&s, rows, n, res, ctl, why, sizeof why);
    }
    remove_dir(&s);
    if (ctl) redisFree(ctl);
    lb__race_server_stop(&server);
    code = finish(a, &s, rows, res, n, code, why);
    release_stops(old);
    for (int i = 0; i < n; i++) free(res[i].trace);
    free(res);
    free(rows);
    return code;
}

const lb__cli_command lb__cli_cmd_race = {
    "race", "replay race schedules against real client processes", help, opts, 1, run, 0};
