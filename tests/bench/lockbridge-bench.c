/* lockbridge-bench: legacy lock operations measured against PING round trips on
 * one loopback connection, then contended locking of one key, on a temporary
 * redis-server. Prints tables; writes them as CSV and as a markdown fragment. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "harness/redis_server.h"
#include "lockbridge/lockbridge.h"

/* ---- Tunables ------------------------------------------------------------------ */
#define WARMUP_OPS 300       /* untimed operations per row before sampling, count */
#define ROUNDS 20            /* interleaved rounds over all rows: noise spreads evenly */
#define DEFAULT_SAMPLES 8000 /* timed operations per uncontended row, count */
#define DEFAULT_SECONDS 3.0  /* length of each contended run, seconds */
#define FIXED_SLEEP_MS 200   /* the legacy fleets' sleep between attempts, milliseconds */
#define SCRIPT_CALLS_MAX 2   /* commands one of our scripts runs at most, count */

static const int CLIENT_COUNTS[] = {2, 8, 32};
#define N_CLIENT_COUNTS (int)(sizeof CLIENT_COUNTS / sizeof CLIENT_COUNTS[0])

/* ---- Clock and samples ------------------------------------------------------- */
static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

typedef struct samples {
    int64_t *v; /* nanoseconds */
    size_t n, cap;
} samples;

static int samples_push(samples *s, int64_t ns) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        int64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = ns;
    return 0;
}

static int samples_append(samples *dst, const samples *src) {
    for (size_t i = 0; i < src->n; i++)
        if (samples_push(dst, src->v[i]) != 0) return -1;
    return 0;
}

static void samples_free(samples *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted samples, nanoseconds; 0 when empty. */
static int64_t percentile(const samples *sorted, double p) {
    if (sorted->n == 0) return 0;
    size_t rank = (size_t)((p / 100.0) * (double)sorted->n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > sorted->n) rank = sorted->n;
    return sorted->v[rank - 1];
}

static void samples_sort(samples *s) {
    if (s->n) qsort(s->v, s->n, sizeof *s->v, cmp_i64);
}

/* ---- Command tallies: what we sent, what the server counted ------------------- */
#define TALLY_MAX 48
#define TALLY_NAME_CAP 32

typedef struct tally {
    char name[TALLY_MAX][TALLY_NAME_CAP]; /* lower case, as in INFO commandstats */
    uint64_t calls[TALLY_MAX];
    int n;
    int overflow; /* a name did not fit: the tally cannot be trusted */
} tally;

static void tally_add(tally *t, const char *name, size_t len, uint64_t calls) {
    char key[TALLY_NAME_CAP];
    if (len >= sizeof key) len = sizeof key - 1;
    for (size_t i = 0; i < len; i++) key[i] = (char)tolower((unsigned char)name[i]);
    key[len] = '\0';
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->name[i], key) == 0) {
            t->calls[i] += calls;
            return;
        }
    if (t->n == TALLY_MAX) {
        t->overflow = 1;
        return;
    }
    memcpy(t->name[t->n], key, len + 1);
    t->calls[t->n++] = calls;
}

static uint64_t tally_get(const tally *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->name[i], name) == 0) return t->calls[i];
    return 0;
}

static uint64_t tally_total(const tally *t) {
    uint64_t sum = 0;
    for (int i = 0; i < t->n; i++) sum += t->calls[i];
    return sum;
}

/* Reads INFO commandstats into `t`. The INFO calls themselves are left out, so
 * the difference of two readings counts only the work between them. */
static int server_tally(redisContext *c, tally *t) {
    memset(t, 0, sizeof *t);
    redisReply *r = redisCommand(c, "INFO commandstats");
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r) freeReplyObject(r);
        return -1;
    }
    const char *p = r->str;
    while ((p = strstr(p, "cmdstat_")) != NULL) {
        p += strlen("cmdstat_");
        const char *colon = strchr(p, ':');
        if (!colon || strncmp(colon + 1, "calls=", 6) != 0) break;
        char *end;
        unsigned long long calls = strtoull(colon + 7, &end, 10);
        if (end == colon + 7) break;
        if ((size_t)(colon - p) != 4 || strncmp(p, "info", 4) != 0)
            tally_add(t, p, (size_t)(colon - p), calls);
        p = end;
    }
    freeReplyObject(r);
    return t->overflow ? -1 : 0;
}

/* acc += after - before, name by name. */
static void tally_accumulate(tally *acc, const tally *after, const tally *before) {
    for (int i = 0; i < after->n; i++) {
        uint64_t was = tally_get(before, after->name[i]);
        if (after->calls[i] > was)
            tally_add(acc, after->name[i], strlen(after->name[i]), after->calls[i] - was);
    }
}

/* ---- A sync driver that tallies commands by name -------------------------------
 * The same loop as lb_sync_run, so the cost is the library's; it also records
 * the name of every command it sends for the cross-check with the server. */
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

/* ---- Tables: one layout printed to the terminal, CSV and markdown ------------- */
#define TABLE_COLS 14
#define TABLE_ROWS 24
#define CELL_CAP 96

typedef struct table {
    const char *id;    /* first CSV field */
    char title[128];   /* heading in the terminal and in markdown */
    int ncols, nrows;
    const char *col[TABLE_COLS];
    char cell[TABLE_ROWS][TABLE_COLS][CELL_CAP];
} table;

static void table_init(table *t, const char *id, const char *title, const char *const *cols) {
    memset(t, 0, sizeof *t);
    t->id = id;
    snprintf(t->title, sizeof t->title, "%s", title);
    while (t->ncols < TABLE_COLS && cols[t->ncols]) {
        t->col[t->ncols] = cols[t->ncols];
        t->ncols++;
    }
}

/* Starts a new row; returns its index, or -1 when the table is full. */
static int table_row(table *t) { return t->nrows < TABLE_ROWS ? t->nrows++ : -1; }

static void cell(table *t, int row, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void cell(table *t, int row, int col, const char *fmt, ...) {
    if (row < 0 || row >= t->nrows || col < 0 || col >= t->ncols) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->cell[row][col], CELL_CAP, fmt, ap);
    va_end(ap);
}

static void table_print(const table *t, FILE *f) {
    size_t w[TABLE_COLS];
    for (int c = 0; c < t->ncols; c++) {
        w[c] = strlen(t->col[c]);
        for (int r = 0; r < t->nrows; r++)
            if (strlen(t->cell[r][c]) > w[c]) w[c] = strlen(t->cell[r][c]);
    }
    fprintf(f, "\n%s\n", t->title);
    for (int c = 0; c < t->ncols; c++) fprintf(f, "%s%-*s", c ? "  " : "", (int)w[c], t->col[c]);
    fputc('\n', f);
    for (int r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++)
            fprintf(f, c ? "  %*s" : "%-*s", (int)w[c], t->cell[r][c]);
        fputc('\n', f);
    }
}

/* A column whose every cell reads as a number is right-aligned in markdown. */
static int numeric_column(const table *t, int col) {
    for (int r = 0; r < t->nrows; r++) {
        char *end;
        strtod(t->cell[r][col], &end);
        if (end == t->cell[r][col] || *end) return 0;
    }
    return 1;
}

static void table_markdown(const table *t, FILE *f) {
    fprintf(f, "### %s\n\n|", t->title);
    for (int c = 0; c < t->ncols; c++) fprintf(f, " %s |", t->col[c]);
    fputs("\n|", f);
    for (int c = 0; c < t->ncols; c++) fputs(numeric_column(t, c) ? " ---: |" : " --- |", f);
    fputc('\n', f);
    for (int r = 0; r < t->nrows; r++) {
        fputc('|', f);
        for (int c = 0; c < t->ncols; c++) fprintf(f, " %s |", t->cell[r][c]);
        fputc('\n', f);
    }
    fputc('\n', f);
}

static void csv_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Long form, one figure per line: table,row,column,value. */
static void table_csv(const table *t, FILE *f) {
    for (int r = 0; r < t->nrows; r++)
        for (int c = 1; c < t->ncols; c++) {
            csv_field(f, t->id);
            fputc(',', f);
            csv_field(f, t->cell[r][0]);
            fputc(',', f);
            csv_field(f, t->col[c]);
            fputc(',', f);
            csv_field(f, t->cell[r][c]);
            fputc('\n', f);
        }
}

/* ---- Uncontended: acquire+release beside PING ----------------------------------- */
typedef enum { ROW_PING, ROW_MACHINE, ROW_SYNC_API } row_kind;

typedef struct row_spec {
    const char *name;
    row_kind kind;
    lb_legacy_variant variant;
    const char *codec;
} row_spec;

static const row_spec ROW_SPECS[] = {
    {"PING", ROW_PING, LB_LEGACY_WIRE, NULL},
    {"wire ms", ROW_MACHINE, LB_LEGACY_WIRE, "ms"},
    {"wire s", ROW_MACHINE, LB_LEGACY_WIRE, "s"},
    {"wire float", ROW_MACHINE, LB_LEGACY_WIRE, "float"},
    {"wire json", ROW_MACHINE, LB_LEGACY_WIRE, "json"},
    {"scripted ms", ROW_MACHINE, LB_LEGACY_SCRIPTED, "ms"},
    {"wire ms, sync API", ROW_SYNC_API, LB_LEGACY_WIRE, "ms"},
};
#define N_ROWS (int)(sizeof ROW_SPECS / sizeof ROW_SPECS[0])
enum { ROW_IDX_PING = 0, ROW_IDX_WIRE_MS = 1, ROW_IDX_SCRIPTED = 5 };

typedef struct row_run {
    const row_spec *spec;
    lb_legacy_lock *lock;
    samples t;         /* acquire+release (or PING) durations */
    tally sent;        /* commands we sent, by name (not for ROW_SYNC_API) */
    tally server;      /* commandstats differences over the timed blocks */
    uint64_t lib_cmds; /* lb_machine_commands / lb_legacy_commands sums */
    uint64_t ops, failures;
    char failure[192]; /* first failure seen */
} row_run;

static void row_fail(row_run *rr, const char *what, int rc, const char *detail) {
    if (rr->failures++ == 0)
        snprintf(rr->failure, sizeof rr->failure, "%s: %s (%s)", what, lb_err_name(rc), detail);
}

/* One timed operation; returns 0 when it did what it should. `count` says
 * whether its commands belong to the timed figures (not during warm-up). */
static int one_op(row_run *rr, redisContext *c, int count) {
    tally scratch; /* warm-up commands are not counted */
    tally *sent = count ? &rr->sent : &scratch;
    if (!count) memset(&scratch, 0, sizeof scratch);
    if (rr->spec->kind == ROW_PING) {
        redisReply *r = redisCommand(c, "PING");
        int ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        tally_add(sent, "ping", 4, 1);
        if (count) rr->lib_cmds++;
        if (!ok) row_fail(rr, "PING", LB_EIO, c->errstr);
        return ok ? 0 : -1;
    }
    if (rr->spec->kind == ROW_SYNC_API) {
        uint64_t before = lb_legacy_commands(rr->lock);
        int rc = lb_legacy_try_acquire(rr->lock, c);
        int rc2 = rc == LB_OK ? lb_legacy_release(rr->lock, c) : LB_ESTATE;
        if (count) rr->lib_cmds += lb_legacy_commands(rr->lock) - before;
        if (rc != LB_OK) row_fail(rr, "acquire", rc, lb_legacy_errstr(rr->lock));
        else if (rc2 != LB_OK) row_fail(rr, "release", rc2, lb_legacy_errstr(rr->lock));
        return rc == LB_OK && rc2 == LB_OK ? 0 : -1;
    }
    lb_machine *m = lb_legacy_try_acquire_machine(rr->lock);
    int rc = drive(c, m, sent);
    if (count) rr->lib_cmds += lb_machine_commands(m);
    if (rc != LB_OK) {
        row_fail(rr, "acquire", rc, lb_machine_errstr(m));
        return -1;
    }
    m = lb_legacy_release_machine(rr->lock);
    rc = drive(c, m, sent);
    if (count) rr->lib_cmds += lb_machine_commands(m);
    if (rc != LB_OK) row_fail(rr, "release", rc, lb_machine_errstr(m));
    return rc == LB_OK ? 0 : -1;
}

/* A block of timed operations between two commandstats readings. */
static int timed_block(row_run *rr, redisContext *c, int n) {
    tally before, after;
    if (server_tally(c, &before) != 0) return -1;
    for (int i = 0; i < n; i++) {
        int64_t t0 = mono_ns();
        int rc = one_op(rr, c, 1);
        int64_t t1 = mono_ns();
        rr->ops++;
        if (rc == 0 && samples_push(&rr->t, t1 - t0) != 0) return -1;
    }
    if (server_tally(c, &after) != 0) return -1;
    tally_accumulate(&rr->server, &after, &before);
    return 0;
}

static int row_setup(row_run *rr, const row_spec *spec, int index) {
    memset(rr, 0, sizeof *rr);
    rr->spec = spec;
    if (spec->kind == ROW_PING) return 0;
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    o.variant = spec->variant;
    if (lb_codec_parse(&o.codec, spec->codec) != LB_OK) return -1;
    char key[64];
    int n = snprintf(key, sizeof key, "bench:uncontended:%d", index);
    return lb_legacy_lock_new(&rr->lock, key, (size_t)n, &o) == LB_OK ? 0 : -1;
}

/* Warm-up first (connection, allocator, script cache: the first EVALSHA meets
 * NOSCRIPT), then rounds over every row, each round starting at a different
 * row, so that a noisy moment on the shared machine hits all rows alike. */
static int run_uncontended(redisContext *c, row_run *rows, int samples_per_row) {
    int per_round = samples_per_row / ROUNDS;
    if (per_round < 1) per_round = 1;
    for (int i = 0; i < N_ROWS; i++)
        for (int k = 0; k < WARMUP_OPS; k++) one_op(&rows[i], c, 0);
    for (int i = 0; i < N_ROWS; i++) rows[i].failures = 0;
    for (int round = 0; round < ROUNDS; round++)
        for (int j = 0; j < N_ROWS; j++)
            if (timed_block(&rows[(round + j) % N_ROWS], c, per_round) != 0) return -1;
    for (int i = 0; i < N_ROWS; i++) samples_sort(&rows[i].t);
    return 0;
}

/* The library's count against the server's. Commands that our scripts run
 * appear in commandstats too; they are reported apart as "in scripts". */
static const char *row_check(const row_run *rr) {
    uint64_t server = tally_total(&rr->server);
    if (rr->failures) return "FAILED";
    if (rr->spec->kind == ROW_SYNC_API) return server == rr->lib_cmds ? "ok" : "MISMATCH";
    if (tally_total(&rr->sent) != rr->lib_cmds) return "MISMATCH";
    for (int i = 0; i < rr->sent.n; i++)
        if (tally_get(&rr->server, rr->sent.name[i]) < rr->sent.calls[i]) return "MISMATCH";
    uint64_t scripts = tally_get(&rr->sent, "evalsha") + tally_get(&rr->sent, "eval");
    if (server - rr->lib_cmds > scripts * SCRIPT_CALLS_MAX) return "MISMATCH";
    return "ok";
}

static double us(int64_t ns) { return (double)ns / 1000.0; }

static double per_op(uint64_t n, uint64_t ops) { return ops ? (double)n / (double)ops : 0.0; }

/* "del 1, evalsha 1, get 1, setnx 1": the server's calls per operation, by name. */
static void server_mix(const row_run *rr, char *out, size_t cap) {
    int order[TALLY_MAX];
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < rr->server.n; i++) {
        int j = i;
        for (; j > 0 && strcmp(rr->server.name[order[j - 1]], rr->server.name[i]) > 0; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    for (int k = 0; k < rr->server.n && o < cap; k++) {
        int i = order[k];
        int n = snprintf(out + o, cap - o, "%s%s %.2g", k ? ", " : "", rr->server.name[i],
                         per_op(rr->server.calls[i], rr->ops));
        if (n < 0) break;
        o += (size_t)n;
    }
}

static void fill_uncontended(table *t, const row_run *rows) {
    static const char *const cols[] = {"operation", "samples", "median_us", "p99_us",
                                       "x_ping_median", "round_trips", "redis_calls",
                                       "in_scripts", "server_calls_per_op", "check", NULL};
    table_init(t, "uncontended", "", cols);
    snprintf(t->title, sizeof t->title,
             "Uncontended acquire+release beside PING, one connection, %zu samples per row "
             "in %d interleaved rounds", rows[ROW_IDX_PING].t.n, ROUNDS);
    double ping = us(percentile(&rows[ROW_IDX_PING].t, 50));
    for (int i = 0; i < N_ROWS; i++) {
        const row_run *rr = &rows[i];
        int r = table_row(t);
        double med = us(percentile(&rr->t, 50));
        uint64_t server = tally_total(&rr->server);
        char mix[CELL_CAP];
        server_mix(rr, mix, sizeof mix);
        cell(t, r, 0, "%s", rr->spec->name);
        cell(t, r, 1, "%zu", rr->t.n);
        cell(t, r, 2, "%.1f", med);
        cell(t, r, 3, "%.1f", us(percentile(&rr->t, 99)));
        cell(t, r, 4, "%.2f", ping > 0 ? med / ping : 0.0);
        cell(t, r, 5, "%.2f", per_op(rr->lib_cmds, rr->ops));
        cell(t, r, 6, "%.2f", per_op(server, rr->ops));
        cell(t, r, 7, "%.2f", server >= rr->lib_cmds ? per_op(server - rr->lib_cmds, rr->ops) : -1.0);
        cell(t, r, 8, "%s", mix);
        cell(t, r, 9, "%s", row_check(rr));
    }
}

/* ---- Contended: one key, N clients, each on its own connection ---------------- */
typedef enum { S_LB_WIRE, S_LB_SCRIPTED, S_FIXED_SLEEP, S_TIGHT } strategy;
static const char *const STRATEGY_NAMES[] = {
    "lockbridge wire (lb_legacy_acquire)", "lockbridge scripted (lb_legacy_acquire)",
    "fixed 200 ms sleep-and-retry (wire)", "tight polling (wire)"};
#define N_STRATEGIES 4

struct run_state;

typedef struct worker {
    pthread_t thread;
    struct run_state *run;
    redisContext *c;
    lb_legacy_lock *lock;
    samples tta; /* time to acquire, nanoseconds */
    uint64_t acquisitions, errors;
    int64_t finish_ns;
    char error[192];
} worker;

typedef struct run_state {
    strategy s;
    int clients;
    char key[64], counter[64];
    int64_t end_ns;
    pthread_mutex_t mu; /* with `go`: every client starts at the same moment */
    pthread_cond_t cv;
    int go;
    atomic_int inside; /* clients inside the critical section right now */
    atomic_uint overlaps;
    worker *w;
} run_state;

static void worker_error(worker *w, const char *what, int rc, const char *detail) {
    if (w->errors++ == 0)
        snprintf(w->error, sizeof w->error, "%s: %s (%s)", what, lb_err_name(rc), detail);
}

/* Acquires by the run's strategy; LB_ETIMEDOUT when the run ended first. */
static int acquire(worker *w) {
    const run_state *run = w->run;
    if (run->s == S_LB_WIRE || run->s == S_LB_SCRIPTED) {
        int64_t left_ms = (run->end_ns - mono_ns()) / 1000000;
        return lb_legacy_acquire(w->lock, w->c, left_ms > 0 ? left_ms : 0);
    }
    for (;;) {
        int rc = lb_legacy_try_acquire(w->lock, w->c);
        if (rc != LB_EBUSY) return rc;
        if (mono_ns() >= run->end_ns) return LB_ETIMEDOUT;
        if (run->s == S_FIXED_SLEEP) sleep_ms(FIXED_SLEEP_MS);
    }
}

/* The protected work: counter = GET + 1, written back with SET. Under a
 * correct lock no increment is lost; the in-process flag catches overlaps. */
static int critical_section(worker *w) {
    run_state *run = w->run;
    if (atomic_fetch_add(&run->inside, 1) != 0) atomic_fetch_add(&run->overlaps, 1);
    int ok = 0;
    long long n = 0;
    redisReply *r = redisCommand(w->c, "GET %s", run->counter);
    if (r && r->type == REDIS_REPLY_NIL) ok = 1;
    if (r && r->type == REDIS_REPLY_STRING) {
        char *end;
        errno = 0;
        n = strtoll(r->str, &end, 10);
        ok = errno == 0 && end != r->str && *end == '\0' && n >= 0;
    }
    if (r) freeReplyObject(r);
    if (ok) {
        r = redisCommand(w->c, "SET %s %lld", run->counter, n + 1);
        ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
    }
    atomic_fetch_sub(&run->inside, 1);
    if (!ok) worker_error(w, "counter GET/SET", LB_EIO, w->c->errstr);
    return ok ? 0 : -1;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    pthread_mutex_lock(&w->run->mu);
    while (!w->run->go) pthread_cond_wait(&w->run->cv, &w->run->mu);
    pthread_mutex_unlock(&w->run->mu);
    while (mono_ns() < w->run->end_ns) {
        int64_t t0 = mono_ns();
        int rc = acquire(w);
        if (rc == LB_ETIMEDOUT) break;
        if (rc != LB_OK) {
            worker_error(w, "acquire", rc, lb_legacy_errstr(w->lock));
            break;
        }
        if (samples_push(&w->tta, mono_ns() - t0) != 0) worker_error(w, "samples", LB_ENOMEM, "");
        int cs = critical_section(w);
        if (cs == 0) w->acquisitions++;
        rc = lb_legacy_release(w->lock, w->c);
        if (rc != LB_OK) worker_error(w, "release", rc, lb_legacy_errstr(w->lock));
        if (cs != 0 || rc != LB_OK) break;
    }
    w->finish_ns = mono_ns();
    return NULL;
}

static void workers_free(run_state *run) {
    for (int i = 0; run->w && i < run->clients; i++) {
        lb_legacy_lock_free(run->w[i].lock);
        if (run->w[i].c) redisFree(run->w[i].c);
        samples_free(&run->w[i].tta);
    }
    free(run->w);
    run->w = NULL;
}

static int workers_new(run_state *run, const lbt_redis *server) {
    run->w = calloc((size_t)run->clients, sizeof *run->w);
    if (!run->w) return -1;
    lb_legacy_options o;
    lb_legacy_options_init(&o);
    o.variant = run->s == S_LB_SCRIPTED ? LB_LEGACY_SCRIPTED : LB_LEGACY_WIRE;
    for (int i = 0; i < run->clients; i++) {
        worker *w = &run->w[i];
        w->run = run;
        w->c = lbt_redis_connect(server);
        if (!w->c || lb_legacy_lock_new(&w->lock, run->key, strlen(run->key), &o) != LB_OK)
            return -1;
    }
    return 0;
}

/* Figures of one run, taken from the workers and the server. */
typedef struct run_result {
    uint64_t acquisitions, errors, lock_cmds, max_client, min_client;
    uint64_t server_calls; /* commandstats, critical section and scripts included */
    long long counter;     /* the counter's final value; -1 unreadable */
    unsigned overlaps;
    double seconds;
    samples tta;
    char error[192];
} run_result;

static long long read_counter(redisContext *c, const char *key) {
    redisReply *r = redisCommand(c, "GET %s", key);
    long long n = -1;
    if (r && r->type == REDIS_REPLY_NIL) n = 0;
    if (r && r->type == REDIS_REPLY_STRING) n = strtoll(r->str, NULL, 10);
    if (r) freeReplyObject(r);
    return n;
}

static void collect(run_state *run, int64_t start_ns, run_result *res) {
    res->min_client = UINT64_MAX;
    int64_t last = start_ns;
    for (int i = 0; i < run->clients; i++) {
        worker *w = &run->w[i];
        res->acquisitions += w->acquisitions;
        res->errors += w->errors;
        res->lock_cmds += lb_legacy_commands(w->lock);
        if (w->acquisitions > res->max_client) res->max_client = w->acquisitions;
        if (w->acquisitions < res->min_client) res->min_client = w->acquisitions;
        if (w->finish_ns > last) last = w->finish_ns;
        if (samples_append(&res->tta, &w->tta) != 0) res->errors++;
        if (w->errors && !res->error[0]) memcpy(res->error, w->error, sizeof res->error);
    }
    res->overlaps = atomic_load(&run->overlaps);
    res->seconds = (double)(last - start_ns) / 1e9;
    samples_sort(&res->tta);
}

/* Starts the clients, sets the run's end and lets them all go at once.
 * Returns how many started; if not all did, the run ends before it begins. */
static int start_threads(run_state *run, double seconds, int64_t *start_ns) {
    int started = 0;
    while (started < run->clients &&
           pthread_create(&run->w[started].thread, NULL, worker_main, &run->w[started]) == 0)
        started++;
    pthread_mutex_lock(&run->mu);
    *start_ns = mono_ns();
    run->end_ns = started == run->clients ? *start_ns + (int64_t)(seconds * 1e9) : 0;
    run->go = 1;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
    return started;
}

static int contended_run(const lbt_redis *server, redisContext *ctl, strategy s, int clients,
                         double seconds, run_result *res) {
    run_state run;
    memset(&run, 0, sizeof run);
    memset(res, 0, sizeof *res);
    run.s = s;
    run.clients = clients;
    snprintf(run.key, sizeof run.key, "bench:contended:%d:%d", (int)s, clients);
    snprintf(run.counter, sizeof run.counter, "bench:counter:%d:%d", (int)s, clients);
    tally before, after, delta;
    memset(&delta, 0, sizeof delta);
    redisReply *r = redisCommand(ctl, "DEL %s %s", run.key, run.counter);
    if (r) freeReplyObject(r);
    if (workers_new(&run, server) != 0 || server_tally(ctl, &before) != 0) {
        workers_free(&run);
        return -1;
    }
    pthread_mutex_init(&run.mu, NULL);
    pthread_cond_init(&run.cv, NULL);
    int64_t start_ns;
    int started = start_threads(&run, seconds, &start_ns);
    for (int i = 0; i < started; i++) pthread_join(run.w[i].thread, NULL);
    pthread_cond_destroy(&run.cv);
    pthread_mutex_destroy(&run.mu);
    collect(&run, start_ns, res);
    int rc = started == clients ? server_tally(ctl, &after) : -1;
    tally_accumulate(&delta, &after, &before);
    res->server_calls = tally_total(&delta);
    res->counter = read_counter(ctl, run.counter);
    workers_free(&run);
    return rc;
}

/* Per acquisition, the critical section's GET and SET are the work, not the
 * lock: they are taken off the server's count. */
static double lock_calls_per_acq(const run_result *res) {
    uint64_t work = 2 * res->acquisitions;
    if (!res->acquisitions || res->server_calls < work) return 0.0;
    return per_op(res->server_calls - work, res->acquisitions);
}

static long long lost_updates(const run_result *res) {
    return res->counter < 0 ? -1 : (long long)res->acquisitions - res->counter;
}

static void fill_contended_row(table *t, strategy s, int clients, const run_result *res) {
    int r = table_row(t);
    double ms = 1e-6;
    cell(t, r, 0, "%s", STRATEGY_NAMES[s]);
    cell(t, r, 1, "%d", clients);
    cell(t, r, 2, "%.0f", res->seconds > 0 ? (double)res->acquisitions / res->seconds : 0.0);
    cell(t, r, 3, "%.2f", (double)percentile(&res->tta, 50) * ms);
    cell(t, r, 4, "%.2f", (double)percentile(&res->tta, 99) * ms);
    cell(t, r, 5, "%.2f", res->tta.n ? (double)res->tta.v[res->tta.n - 1] * ms : 0.0);
    cell(t, r, 6, "%.2f", lock_calls_per_acq(res));
    cell(t, r, 7, "%.2f", per_op(res->lock_cmds, res->acquisitions));
    cell(t, r, 8, "%" PRIu64, res->max_client);
    cell(t, r, 9, "%" PRIu64, res->min_client);
    cell(t, r, 10, "%lld", lost_updates(res));
    cell(t, r, 11, "%u", res->overlaps);
    cell(t, r, 12, "%" PRIu64, res->errors);
}

static void contended_table(table *t, double seconds) {
    static const char *const cols[] = {"strategy", "clients", "acq_per_s", "tta_p50_ms",
                                       "tta_p99_ms", "tta_max_ms", "redis_calls_per_acq",
                                       "sent_per_acq", "max_per_client", "min_per_client",
                                       "lost_updates", "overlaps", "errors", NULL};
    table_init(t, "contended", "", cols);
    snprintf(t->title, sizeof t->title,
             "Contended: one key, GET/SET counter under the lock, %.1f s per run", seconds);
}

/* Runs every strategy at every client count; returns the number of runs that
 * broke mutual exclusion or failed. */
static int run_contended(const lbt_redis *server, redisContext *ctl, double seconds, table *t,
                         long long *lost_total) {
    int bad = 0;
    *lost_total = 0;
    for (int s = 0; s < N_STRATEGIES; s++)
        for (int k = 0; k < N_CLIENT_COUNTS; k++) {
            run_result res;
            int rc = contended_run(server, ctl, (strategy)s, CLIENT_COUNTS[k], seconds, &res);
            fill_contended_row(t, (strategy)s, CLIENT_COUNTS[k], &res);
            long long lost = lost_updates(&res);
            *lost_total += lost > 0 ? lost : 0;
            if (rc != 0 || lost != 0 || res.overlaps || res.errors) {
                bad++;
                fprintf(stderr, "bench: %s, %d clients: %s%s\n", STRATEGY_NAMES[s],
                        CLIENT_COUNTS[k], rc ? "run failed " : "",
                        res.error[0] ? res.error : "lost updates or overlaps");
            }
            fprintf(stderr, "bench: %s, %d clients done\n", STRATEGY_NAMES[s], CLIENT_COUNTS[k]);
            samples_free(&res.tta);
        }
    return bad;
}

/* ---- Expectations: ahead, met or behind ----------------------------------------- */
/* Fewer round trips than expected is ahead, as many is met, more is behind. */
static const char *rt_verdict(uint64_t cmds, uint64_t ops, uint64_t expected) {
    if (!ops) return "no data";
    if (cmds < expected * ops) return "ahead";
    return cmds == expected * ops ? "met" : "behind";
}

static void time_verdict(char *out, size_t cap, double ratio) {
    if (ratio <= 1.0) snprintf(out, cap, "ahead (%.0f%% under)", (1.0 - ratio) * 100.0);
    else snprintf(out, cap, "behind (%.0f%% over)", (ratio - 1.0) * 100.0);
}

static void expectation(table *t, const char *what, const char *expected, const char *measured,
                        const char *verdict) {
    int r = table_row(t);
    cell(t, r, 0, "%s", what);
    cell(t, r, 1, "%s", expected);
    cell(t, r, 2, "%s", measured);
    cell(t, r, 3, "%s", verdict);
}

/* Time of a row against k PING round trips measured in the same run. */
static void time_rows(table *t, const row_run *rows, int idx, int k) {
    char what[96], measured[32], verdict[48];
    double ping = us(percentile(&rows[ROW_IDX_PING].t, 50));
    double med = us(percentile(&rows[idx].t, 50));
    double ratio = ping > 0 ? med / ping : 0.0;
    snprintf(what, sizeof what, "%s: median time / one PING median", rows[idx].spec->name);
    snprintf(measured, sizeof measured, "%.2f", ratio);
    expectation(t, what, "report", measured, "-");
    snprintf(what, sizeof what, "%s: median time / %d PING medians", rows[idx].spec->name, k);
    snprintf(measured, sizeof measured, "%.2f", ratio / k);
    time_verdict(verdict, sizeof verdict, ratio / k);
    expectation(t, what, "<= 1.00", measured, verdict);
}

static int fill_expectations(table *t, const row_run *rows, long long lost, int bad_runs) {
    static const char *const cols[] = {"expectation", "expected", "measured", "verdict", NULL};
    table_init(t, "expectations", "Expectations", cols);
    char measured[48];
    const row_run *sc = &rows[ROW_IDX_SCRIPTED];
    snprintf(measured, sizeof measured, "%.2f", per_op(sc->lib_cmds, sc->ops));
    const char *v1 = rt_verdict(sc->lib_cmds, sc->ops, 2);
    expectation(t, "scripted acquire+release: round trips", "2", measured, v1);
    uint64_t worst = 0, worst_ops = 1;
    for (int i = 0; i < N_ROWS; i++)
        if (rows[i].spec->kind != ROW_PING && rows[i].spec->variant == LB_LEGACY_WIRE &&
            rows[i].lib_cmds * worst_ops >= worst * rows[i].ops) {
            worst = rows[i].lib_cmds;
            worst_ops = rows[i].ops;
        }
    snprintf(measured, sizeof measured, "%.2f (worst codec)", per_op(worst, worst_ops));
    const char *v2 = rt_verdict(worst, worst_ops, 3);
    expectation(t, "wire acquire+release: round trips", "<= 3", measured, v2);
    time_rows(t, rows, ROW_IDX_SCRIPTED, 2);
    time_rows(t, rows, ROW_IDX_WIRE_MS, 3);
    int checks_ok = 1;
    for (int i = 0; i < N_ROWS; i++) checks_ok &= strcmp(row_check(&rows[i]), "ok") == 0;
    expectation(t, "library command counts equal the server's commandstats", "all rows",
                checks_ok ? "all rows" : "see table", checks_ok ? "met" : "behind");
    snprintf(measured, sizeof measured, "%lld", lost);
    expectation(t, "lost updates over all contended runs", "0", measured,
                lost == 0 && bad_runs == 0 ? "met" : "behind");
    return strcmp(v1, "behind") != 0 && strcmp(v2, "behind") != 0 && checks_ok;
}

/* ---- Program ------------------------------------------------------------------------ */
typedef struct options {
    const char *csv, *markdown;
    int samples;
    double seconds;
} options;

static void usage(FILE *f) {
    fprintf(f, "usage: lockbridge-bench [--csv PATH] [--markdown PATH] [--samples N]\n"
               "                        [--seconds S] [--versions]\n"
               "  --samples N  timed operations per uncontended row (default %d)\n"
               "  --seconds S  length of each contended run in seconds (default %.0f)\n",
            DEFAULT_SAMPLES, DEFAULT_SECONDS);
}

/* Returns 0 to run, 1 to exit successfully, -1 on a usage error. */
static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->samples = DEFAULT_SAMPLES;
    o->seconds = DEFAULT_SECONDS;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (strcmp(a, "--versions") == 0) {
            printf("lockbridge %s, hiredis %d.%d.%d\n", lb_version(), HIREDIS_MAJOR,
                   HIREDIS_MINOR, HIREDIS_PATCH);
            return 1;
        }
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        }
        if (!v) return -1;
        i++;
        if (strcmp(a, "--csv") == 0) o->csv = v;
        else if (strcmp(a, "--markdown") == 0) o->markdown = v;
        else if (strcmp(a, "--samples") == 0) {
            long n = strtol(v, &end, 10);
            if (*end || n < ROUNDS || n > 10000000) return -1;
            o->samples = (int)n;
        } else if (strcmp(a, "--seconds") == 0) {
            o->seconds = strtod(v, &end);
            if (*end || !(o->seconds >= 0.1 && o->seconds <= 600)) return -1;
        } else return -1;
    }
    return 0;
}

static int write_outputs(const options *o, table *const *tables, int n) {
    int rc = 0;
    for (int i = 0; i < n; i++) table_print(tables[i], stdout);
    if (o->csv) {
        FILE *f = fopen(o->csv, "w");
        if (f) {
            fputs("table,row,column,value\n", f);
            for (int i = 0; i < n; i++) table_csv(tables[i], f);
            rc |= fclose(f);
        } else rc = -1;
    }
    if (o->markdown) {
        FILE *f = fopen(o->markdown, "w");
        if (f) {
            for (int i = 0; i < n; i++) table_markdown(tables[i], f);
            rc |= fclose(f);
        } else rc = -1;
    }
    if (rc) fprintf(stderr, "bench: cannot write the results: %s\n", strerror(errno));
    return rc;
}

/* Everything measured with the server up; returns the program's exit status. */
static int bench(const lbt_redis *server, const options *o, table *tabs) {
    redisContext *c = lbt_redis_connect(server);
    row_run rows[N_ROWS];
    int ok = c != NULL, ready = 0;
    memset(rows, 0, sizeof rows);
    for (; ok && ready < N_ROWS; ready++) ok = row_setup(&rows[ready], &ROW_SPECS[ready], ready) == 0;
    fprintf(stderr, "bench: uncontended, %d samples per row\n", o->samples);
    if (ok) ok = run_uncontended(c, rows, o->samples) == 0;
    long long lost = 0;
    int bad = 0, good = 0;
    if (ok) {
        fill_uncontended(&tabs[0], rows);
        contended_table(&tabs[2], o->seconds);
        bad = run_contended(server, c, o->seconds, &tabs[2], &lost);
        good = fill_expectations(&tabs[1], rows, lost, bad);
        table *order[] = {&tabs[0], &tabs[1], &tabs[2]};
        ok = write_outputs(o, order, 3) == 0;
    }
    for (int i = 0; i < N_ROWS; i++) {
        if (rows[i].failures)
            fprintf(stderr, "bench: %s: %" PRIu64 " failures, first: %s\n", rows[i].spec->name,
                    rows[i].failures, rows[i].failure);
        lb_legacy_lock_free(rows[i].lock);
        samples_free(&rows[i].t);
    }
    if (!ok) fprintf(stderr, "bench: %s\n", c && c->err ? c->errstr : "setup or output failed");
    if (c) redisFree(c);
    return ok && good && bad == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    options o;
    int a = parse_args(argc, argv, &o);
    if (a != 0) {
        if (a < 0) usage(stderr);
        return a < 0 ? 2 : 0;
    }
    table *tabs = calloc(3, sizeof *tabs);
    lbt_redis server;
    if (!tabs || lbt_redis_start(&server, NULL) != 0) {
        free(tabs);
        return 2;
    }
    int status = bench(&server, &o, tabs);
    lbt_redis_stop(&server);
    free(tabs);
    return status;
}
