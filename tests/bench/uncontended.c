/* lockbridge-bench: uncontended acquire+release of each lock mode and variant
 * beside the PING round trip, on one loopback connection, interleaved. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "lockbridge/lockbridge.h"

#define WARMUP_OPS 300   /* untimed operations per row before sampling, count */
#define ROUNDS 20        /* interleaved rounds over all rows: noise spreads evenly */
#define SCRIPT_CALLS_MAX 3 /* commands one of our scripts runs at most, count */
#define QUORUM_N 3       /* masters of the quorum row, count */

typedef enum { ROW_PING, ROW_LEGACY, ROW_MODERN, ROW_COMPAT, ROW_QUORUM, ROW_NOT_BUILT } row_kind;

typedef struct row_spec {
    const char *name;
    row_kind kind;
    lb_legacy_variant variant; /* ROW_LEGACY */
    int fencing;               /* ROW_MODERN */
    const char *note;          /* ROW_NOT_BUILT: why */
} row_spec;

static const row_spec ROW_SPECS[] = {
    {"PING", ROW_PING, LB_LEGACY_WIRE, 0, NULL},
    {"legacy wire-only (ms codec)", ROW_LEGACY, LB_LEGACY_WIRE, 0, NULL},
    {"legacy scripted (ms codec)", ROW_LEGACY, LB_LEGACY_SCRIPTED, 0, NULL},
    {"modern", ROW_MODERN, LB_LEGACY_WIRE, 0, NULL},
    {"modern with fencing", ROW_MODERN, LB_LEGACY_WIRE, 1, NULL},
    {"quorum of 3 local servers", ROW_QUORUM, LB_LEGACY_WIRE, 0, NULL},
    {"compat (mode-following lock, ms codec)", ROW_COMPAT, LB_LEGACY_WIRE, 0, NULL},
};
#define N_ROWS (int)(sizeof ROW_SPECS / sizeof ROW_SPECS[0])
enum { IDX_PING = 0, IDX_MODERN = 3 };

typedef struct row_run {
    const row_spec *spec;
    lb_legacy_lock *legacy;
    lb_lock *modern;
    lb_mlock *mlock;
    lb_quorum *quorum;
    redisContext **tally_ctx; /* servers whose commandstats count for this row */
    int n_tally;
    samples t;         /* acquire+release (or PING) durations */
    tally sent;        /* commands we sent, by name (machine rows) */
    tally server;      /* commandstats differences over the timed blocks */
    uint64_t lib_cmds; /* the library's own counts */
    uint64_t ops, failures;
    char failure[192]; /* first failure seen */
} row_run;

typedef struct quorum_env {
    lbt_redis extra[QUORUM_N - 1];
    int started;
    redisContext *masters[QUORUM_N]; /* the quorum's own connections */
    redisContext *ctl[QUORUM_N];     /* commandstats readers */
} quorum_env;

static void row_fail(row_run *rr, const char *what, int rc, const char *detail) {
    if (rr->failures++ == 0)
        snprintf(rr->failure, sizeof rr->failure, "%s: %s (%s)", what, lb_err_name(rc), detail);
}

/* The sync driver's loop, tallying the name of every command it sends. */
static int drive(redisContext *c, lb_machine *m, tally *sent) {
    if (!m) return LB_ESTATE;
    lb_now now = lb_clock_now(NULL);
    int rc = lb_machine_step(m, NULL, &now);
    while (rc == LB_STEP_SEND) {
        const lb_cmd *cmd = lb_machine_command(m);
        const char *argv[LB_CMD_MAX_ARGS];
        for (int i = 0; i < cmd->argc; i++) argv[i] = cmd->argv[i];
        tally_add(sent, cmd->argv[0], cmd->argvlen[0], 1);
        redisReply *reply = redisCommandArgv(c, cmd->argc, argv, cmd->argvlen);
        now = lb_clock_now(NULL);
        rc = lb_machine_step(m, reply, &now);
        if (reply) freeReplyObject(reply);
    }
    return rc;
}

/* An acquire machine then a release machine, both driven and counted. */
static int machine_pair(row_run *rr, redisContext *c, lb_machine *acq, tally *sent, int count,
                        lb_machine *(*release)(row_run *)) {
    int rc = drive(c, acq, sent);
    if (count && acq) rr->lib_cmds += lb_machine_commands(acq);
    if (rc != LB_OK) {
        row_fail(rr, "acquire", rc, acq ? lb_machine_errstr(acq) : "no machine");
        return -1;
    }
    lb_machine *rel = release(rr);
    rc = drive(c, rel, sent);
    if (count && rel) rr->lib_cmds += lb_machine_commands(rel);
    if (rc != LB_OK) row_fail(rr, "release", rc, rel ? lb_machine_errstr(rel) : "no machine");
    return rc == LB_OK ? 0 : -1;
}

static lb_machine *legacy_release(row_run *rr) { return lb_legacy_machine(rr->legacy, LB_OP_RELEASE, 0); }
static lb_machine *modern_release(row_run *rr) { return lb_lock_machine(rr->modern, LB_OP_RELEASE, 0); }
static lb_machine *compat_release(row_run *rr) { return lb_mlock_machine(rr->mlock, LB_OP_RELEASE, 0); }

static int ping(row_run *rr, redisContext *c, tally *sent, int count) {
    redisReply *r = redisCommand(c, "PING");
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    tally_add(sent, "ping", 4, 1);
    if (count) rr->lib_cmds++;
    if (!ok) row_fail(rr, "PING", LB_EIO, c->errstr);
    return ok ? 0 : -1;
}

static int quorum_pair(row_run *rr) {
    int rc = lb_quorum_try_acquire(rr->quorum);
    if (rc != LB_OK) {
        row_fail(rr, "quorum acquire", rc, "");
        return -1;
    }
    rc = lb_quorum_release(rr->quorum);
    if (rc != LB_OK) row_fail(rr, "quorum release", rc, "");
    return rc == LB_OK ? 0 : -1;
}

/* One operation; `count` says whether its commands belong to the figures. */
static int one_op(row_run *rr, redisContext *c, int count) {
    tally scratch; /* warm-up commands are not counted */
    tally *sent = count ? &rr->sent : &scratch;
    if (!count) memset(&scratch, 0, sizeof scratch);
    switch (rr->spec->kind) {
    case ROW_PING: return ping(rr, c, sent, count);
    case ROW_LEGACY:
        return machine_pair(rr, c, lb_legacy_machine(rr->legacy, LB_OP_TRY_ACQUIRE, 0), sent, count,
                            legacy_release);
    case ROW_MODERN:
        return machine_pair(rr, c, lb_lock_machine(rr->modern, LB_OP_TRY_ACQUIRE, 0), sent, count,
                            modern_release);
    case ROW_COMPAT:
        return machine_pair(rr, c, lb_mlock_machine(rr->mlock, LB_OP_TRY_ACQUIRE, 0), sent, count,
                            compat_release);
    case ROW_QUORUM: return quorum_pair(rr);
    case ROW_NOT_BUILT: return 0;
    }
    return -1;
}

/* A block of timed operations between commandstats readings of the row's servers. */
static int timed_block(row_run *rr, redisContext *c, int n) {
    tally before[QUORUM_N], after;
    for (int s = 0; s < rr->n_tally; s++)
        if (server_tally(rr->tally_ctx[s], &before[s]) != 0) return -1;
    for (int i = 0; i < n; i++) {
        int64_t t0 = bench_mono_ns();
        int rc = one_op(rr, c, 1);
        int64_t t1 = bench_mono_ns();
        rr->ops++;
        if (rc == 0 && samples_push(&rr->t, t1 - t0) != 0) return -1;
    }
    for (int s = 0; s < rr->n_tally; s++) {
        if (server_tally(rr->tally_ctx[s], &after) != 0) return -1;
        tally_accumulate(&rr->server, &after, &before[s]);
    }
    return 0;
}

static int quorum_env_start(quorum_env *q, const lbt_redis *server) {
    memset(q, 0, sizeof *q);
    for (; q->started < QUORUM_N - 1; q->started++)
        if (lbt_redis_start(&q->extra[q->started], NULL) != 0) return -1;
    for (int i = 0; i < QUORUM_N; i++) {
        const lbt_redis *s = i == 0 ? server : &q->extra[i - 1];
        q->masters[i] = lbt_redis_connect(s);
        q->ctl[i] = lbt_redis_connect(s);
        if (!q->masters[i] || !q->ctl[i]) return -1;
    }
    return 0;
}

static void quorum_env_stop(quorum_env *q) {
    for (int i = 0; i < QUORUM_N; i++) {
        if (q->masters[i]) redisFree(q->masters[i]);
        if (q->ctl[i]) redisFree(q->ctl[i]);
    }
    for (int i = 0; i < q->started; i++) lbt_redis_stop(&q->extra[i]);
}

static int row_setup(row_run *rr, const row_spec *spec, int index, redisContext **ctl,
                     quorum_env *q) {
    memset(rr, 0, sizeof *rr);
    rr->spec = spec;
    rr->tally_ctx = ctl;
    rr->n_tally = 1;
    char key[64];
    int n = snprintf(key, sizeof key, "bench:uncontended:%d", index);
    if (spec->kind == ROW_LEGACY) {
        lb_legacy_options o;
        lb_legacy_options_init(&o);
        o.variant = spec->variant;
        return lb_legacy_lock_new(&rr->legacy, key, (size_t)n, &o) == LB_OK ? 0 : -1;
    }
    if (spec->kind == ROW_MODERN) {
        lb_lock_options o;
        lb_lock_options_init(&o);
        o.fencing = spec->fencing;
        return lb_lock_new(&rr->modern, key, (size_t)n, &o) == LB_OK ? 0 : -1;
    }
    if (spec->kind == ROW_COMPAT) {
        lb_mlock_options o;
        lb_mlock_options_init(&o);
        o.mode = LB_MODE_COMPAT;
        return lb_mlock_new(&rr->mlock, key, (size_t)n, &o) == LB_OK ? 0 : -1;
    }
    if (spec->kind == ROW_QUORUM) {
        lb_quorum_options o;
        lb_quorum_options_init(&o);
        rr->tally_ctx = q->ctl;
        rr->n_tally = QUORUM_N;
        return lb_quorum_new(&rr->quorum, key, (size_t)n, q->masters, QUORUM_N, &o) == LB_OK
                   ? 0
                   : -1;
    }
    if (spec->kind == ROW_NOT_BUILT) rr->n_tally = 0;
    return 0;
}

static void row_free(row_run *rr) {
    lb_legacy_lock_free(rr->legacy);
    lb_lock_free(rr->modern);
    lb_mlock_free(rr->mlock);
    lb_quorum_free(rr->quorum);
    samples_free(&rr->t);
}

/* Warm-up first (connections, allocator, script cache: the first EVALSHA meets
 * NOSCRIPT), then rounds over every row, each round starting at a different
 * row, so that a noisy moment on the shared machine hits all rows alike. */
static int measure(redisContext *c, row_run *rows, int samples_per_row) {
    int per_round = samples_per_row / ROUNDS;
    if (per_round < 1) per_round = 1;
    for (int i = 0; i < N_ROWS; i++)
        for (int k = 0; k < WARMUP_OPS; k++) one_op(&rows[i], c, 0);
    for (int i = 0; i < N_ROWS; i++) rows[i].failures = 0;
    for (int round = 0; round < ROUNDS; round++)
        for (int j = 0; j < N_ROWS; j++) {
            row_run *rr = &rows[(round + j) % N_ROWS];
            if (rr->spec->kind != ROW_NOT_BUILT && timed_block(rr, c, per_round) != 0) return -1;
        }
    for (int i = 0; i < N_ROWS; i++) samples_sort(&rows[i].t);
    return 0;
}

/* The library's count against the server's. Commands our scripts run appear
 * in commandstats too; they are reported apart as "in scripts". The quorum
 * row goes through the sync API, so only totals can be compared there. */
static const char *row_check(const row_run *rr) {
    uint64_t server = tally_total(&rr->server);
    if (rr->spec->kind == ROW_NOT_BUILT) return "-";
    if (rr->failures) return "FAILED";
    if (rr->spec->kind == ROW_QUORUM) return server >= 2 * QUORUM_N * rr->ops ? "ok" : "MISMATCH";
    if (tally_total(&rr->sent) != rr->lib_cmds) return "MISMATCH";
    for (int i = 0; i < rr->sent.n; i++)
        if (tally_get(&rr->server, rr->sent.name[i]) < rr->sent.calls[i]) return "MISMATCH";
    uint64_t scripts = tally_get(&rr->sent, "evalsha") + tally_get(&rr->sent, "eval");
    if (server - rr->lib_cmds > scripts * SCRIPT_CALLS_MAX) return "MISMATCH";
    return "ok";
}

/* Server time of the commands the row sent (script internals are inside
 * their EVALSHA's time), microseconds per operation; -1 when unknown. */
static double server_us(const row_run *rr) {
    if (rr->spec->kind == ROW_QUORUM || rr->spec->kind == ROW_NOT_BUILT || !rr->ops) return -1;
    uint64_t usec = 0;
    for (int i = 0; i < rr->sent.n; i++) usec += tally_usec(&rr->server, rr->sent.name[i]);
    return (double)usec / (double)rr->ops;
}

static void fill(table *t, const row_run *rows) {
    static const char *const cols[] = {"operation", "samples", "median_us", "p99_us",
                                       "x_ping_median", "p99_x_ping_median", "round_trips",
                                       "redis_calls", "in_scripts", "server_us",
                                       "server_calls_per_op", "check", NULL};
    table_init(t, "uncontended", cols);
    table_title(t,
                "Uncontended acquire+release beside PING, one connection, %zu samples per row "
                "in %d interleaved rounds",
                rows[IDX_PING].t.n, ROUNDS);
    double ping = us(percentile(&rows[IDX_PING].t, 50));
    for (int i = 0; i < N_ROWS; i++) {
        const row_run *rr = &rows[i];
        int r = table_row(t);
        cell(t, r, 0, "%s", rr->spec->name);
        if (rr->spec->kind == ROW_NOT_BUILT) {
            for (int c = 1; c < t->ncols - 1; c++) cell(t, r, c, "-");
            cell(t, r, t->ncols - 1, "%s", rr->spec->note);
            continue;
        }
        double med = us(percentile(&rr->t, 50)), p99 = us(percentile(&rr->t, 99));
        uint64_t server = tally_total(&rr->server);
        char mix[CELL_CAP];
        tally_mix(&rr->server, rr->ops, mix, sizeof mix);
        cell(t, r, 1, "%zu", rr->t.n);
        cell(t, r, 2, "%.1f", med);
        cell(t, r, 3, "%.1f", p99);
        cell(t, r, 4, "%.2f", ping > 0 ? med / ping : 0.0);
        cell(t, r, 5, "%.2f", ping > 0 ? p99 / ping : 0.0);
        if (rr->spec->kind == ROW_QUORUM) {
            cell(t, r, 6, "-");
            cell(t, r, 8, "-");
        } else {
            cell(t, r, 6, "%.2f", per_op(rr->lib_cmds, rr->ops));
            cell(t, r, 8, "%.2f",
                 server >= rr->lib_cmds ? per_op(server - rr->lib_cmds, rr->ops) : -1.0);
        }
        cell(t, r, 7, "%.2f", per_op(server, rr->ops));
        if (server_us(rr) >= 0) cell(t, r, 9, "%.1f", server_us(rr));
        else cell(t, r, 9, "-");
        cell(t, r, 10, "%s", mix);
        cell(t, r, 11, "%s", row_check(rr));
    }
}

int run_uncontended(const lbt_redis *server, int samples_per_row, table *t, reference *ref,
                    uncontended_summary *sum) {
    memset(sum, 0, sizeof *sum);
    row_run rows[N_ROWS];
    quorum_env q;
    memset(rows, 0, sizeof rows);
    memset(&q, 0, sizeof q);
    redisContext *c = lbt_redis_connect(server), *ctl = lbt_redis_connect(server);
    int ok = c && ctl && quorum_env_start(&q, server) == 0;
    for (int i = 0; ok && i < N_ROWS; i++) ok = row_setup(&rows[i], &ROW_SPECS[i], i, &ctl, &q) == 0;
    fprintf(stderr, "bench: uncontended, %d samples per row\n", samples_per_row);
    if (ok) ok = measure(c, rows, samples_per_row) == 0;
    if (ok) {
        fill(t, rows);
        ref->ping_median_ns = percentile(&rows[IDX_PING].t, 50);
        ref->ping_p99_ns = percentile(&rows[IDX_PING].t, 99);
        sum->modern_median_ns = percentile(&rows[IDX_MODERN].t, 50);
        sum->modern_server_us = server_us(&rows[IDX_MODERN]);
        sum->ping_server_us = server_us(&rows[IDX_PING]);
        sum->checks_ok = 1;
        for (int i = 0; i < N_ROWS; i++) {
            const char *check = row_check(&rows[i]);
            sum->checks_ok &= strcmp(check, "ok") == 0 || strcmp(check, "-") == 0;
        }
    }
    for (int i = 0; i < N_ROWS; i++) {
        if (rows[i].failures) {
            sum->failures++;
            fprintf(stderr, "bench: %s: %" PRIu64 " failures, first: %s\n", rows[i].spec->name,
                    rows[i].failures, rows[i].failure);
        }
        row_free(&rows[i]);
    }
    if (!ok) fprintf(stderr, "bench: uncontended: %s\n", c && c->err ? c->errstr : "setup failed");
    quorum_env_stop(&q);
    if (c) redisFree(c);
    if (ctl) redisFree(ctl);
    return ok ? 0 : -1;
}
