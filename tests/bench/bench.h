/* lockbridge-bench: what its files share: clock, samples, command tallies read
 * from INFO commandstats, tables, and the figures each section hands on. */
#ifndef LOCKBRIDGE_BENCH_H
#define LOCKBRIDGE_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <hiredis/hiredis.h>

#include "harness/redis_server.h"

/* ---- Clock and samples --------------------------------------------------------- */
int64_t bench_mono_ns(void);
void bench_sleep_ms(int64_t ms);

typedef struct samples {
    int64_t *v; /* nanoseconds */
    size_t n, cap;
} samples;

int samples_push(samples *s, int64_t ns);
int samples_append(samples *dst, const samples *src);
void samples_free(samples *s);
void samples_sort(samples *s);
/* Nearest-rank percentile of sorted samples, nanoseconds; 0 when empty. */
int64_t percentile(const samples *sorted, double p);
int64_t samples_max(const samples *sorted);

double us(int64_t ns);
double ms(int64_t ns);
double per_op(uint64_t n, uint64_t ops);

/* ---- Command tallies: what we sent, what the server counted --------------------- */
#define TALLY_MAX 64
#define TALLY_NAME_CAP 32

typedef struct tally {
    char name[TALLY_MAX][TALLY_NAME_CAP]; /* lower case, as in INFO commandstats */
    uint64_t calls[TALLY_MAX];
    uint64_t usec[TALLY_MAX]; /* server time, microseconds (INFO commandstats) */
    int n;
    int overflow; /* a name did not fit: the tally cannot be trusted */
} tally;

void tally_add(tally *t, const char *name, size_t len, uint64_t calls);
uint64_t tally_get(const tally *t, const char *name);
uint64_t tally_usec(const tally *t, const char *name);
/* Adds server time to a name already counted (tally_add first). */
void tally_add_usec(tally *t, const char *name, uint64_t usec);
uint64_t tally_total(const tally *t);
/* Reads INFO commandstats into `t`, the INFO calls left out, so the difference
 * of two readings counts only the work between them. 0, or -1 on failure. */
int server_tally(redisContext *c, tally *t);
/* acc += after - before, name by name. */
void tally_accumulate(tally *acc, const tally *after, const tally *before);
/* "del 1, evalsha 1, get 1": calls per operation by name, sorted. */
void tally_mix(const tally *t, uint64_t ops, char *out, size_t cap);

/* An integer field of INFO (e.g. "used_memory"); -1 when absent. */
long long server_info_int(redisContext *c, const char *section, const char *field);
/* This process's resident set (VmRSS), bytes; -1 when unreadable. */
long long self_rss_bytes(void);

/* ---- Tables: one layout printed to the terminal, CSV and markdown --------------- */
#define TABLE_COLS 20
#define TABLE_ROWS 64
#define CELL_CAP 1536

typedef struct table {
    const char *id;  /* first CSV field */
    char title[192]; /* heading in the terminal and in markdown */
    int ncols, nrows;
    int key_cols; /* cells that name a row in the CSV; 0 means 1 */
    const char *col[TABLE_COLS];
    char cell[TABLE_ROWS][TABLE_COLS][CELL_CAP];
} table;

void table_init(table *t, const char *id, const char *const *cols);
void table_title(table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Starts a new row; returns its index, or -1 when the table is full. */
int table_row(table *t);
void cell(table *t, int row, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void table_print(const table *t, FILE *f);
void table_markdown(const table *t, FILE *f);
/* Long form, one figure per line: table,row,column,value. */
void table_csv(const table *t, FILE *f);

/* ---- Figures the sections hand on ------------------------------------------------ */
typedef struct reference {
    int64_t ping_median_ns; /* one client's PING round trip, median */
    int64_t ping_p99_ns;
    double set_rate;        /* redis-benchmark -P 16 -t set, requests/s; 0 unknown */
    char set_line[160];     /* redis-benchmark's own summary line */
} reference;

/* Runs redis-benchmark -P 16 -t set -q against the server; 0 or -1. */
int reference_set_rate(const lbt_redis *server, int requests, reference *ref);

/* Uncontended acquire+release rows (uncontended.c). The modern row's median
 * and its count check are handed to the targets. */
typedef struct uncontended_summary {
    int64_t modern_median_ns;
    double modern_server_us, ping_server_us; /* server time per operation, us */
    int checks_ok; /* every row's library count matches the server's */
    int failures;
} uncontended_summary;
int run_uncontended(const lbt_redis *server, int samples_per_row, table *t, reference *ref,
                    uncontended_summary *sum);

/* One contended run, whoever ran it (contended.c, peers.c). */
typedef enum { RUN_OK, RUN_FAILED, RUN_SKIPPED, RUN_NOT_BUILT } run_status;

typedef struct contended {
    char name[96];     /* strategy or peer */
    int ours;          /* 1: lockbridge; 0: a peer */
    int clients;
    run_status status;
    char note[160];    /* why skipped, not built or failed */
    double seconds;
    uint64_t acquisitions, max_client, min_client, gave_up, errors;
    long long lost;    /* acquisitions minus the counter's final value; -1 unknown */
    long long overlaps; /* -1: not checked (another process) */
    uint64_t server_calls; /* commandstats, critical section and scripts included */
    tally calls;       /* the same, by command */
    long long sent;    /* commands the library says it sent; -1 unknown */
    samples tta;       /* time to acquire, censored waits at the end included */
    samples handoff;   /* a release's start to another client's acquire */
    int part;          /* a side of a mixed run: the server's counts are the run's */
} contended;

#define CONTENDED_MAX 96
typedef struct contended_set {
    contended r[CONTENDED_MAX];
    int n;
} contended_set;

extern const int CLIENT_COUNTS[];
extern const int N_CLIENT_COUNTS;

/* Appends a row; NULL when full. */
contended *contended_add(contended_set *set, const char *name, int ours, int clients);
/* A row as contended_add leaves it: named, no figures, nothing known yet. */
void contended_init(contended *r, const char *name, int ours, int clients);
void contended_free(contended_set *set);
/* Takes commandstats and the counter around a run done by `run`. */
int contended_prepare(redisContext *ctl, const char *key, const char *counter, tally *before);
void contended_finish(redisContext *ctl, const char *counter, const tally *before, contended *r);

/* lockbridge's own strategies, in process (contended.c). */
void run_contended_ours(const lbt_redis *server, redisContext *ctl, double seconds,
                        contended_set *set);
/* Peers' driver scripts in tests/bench/peers (peers.c). */
void run_contended_peers(const lbt_redis *server, redisContext *ctl, double seconds,
                         const char *peers_dir, contended_set *set);
/* One more run of a strategy or a peer named as in its row, into `r` (which
 * the caller frees with samples_free); 0, or -1 when none has that name or a
 * peer's driver cannot run here. */
int contended_rerun(const lbt_redis *server, redisContext *ctl, const char *name, int clients,
                    double seconds, contended *r);
int peer_rerun(const lbt_redis *server, redisContext *ctl, const char *peers_dir, const char *name,
               int clients, double seconds, contended *r);
/* Makes `t` the peers table (versions, settings, skipped or ran), filled by
 * run_contended_peers. */
void peers_table_attach(table *t);

/* Paired rounds (paired.c): `ours` and `peer` (row names; the peer one of
 * our strategies when `peer_ours`) run alternately, back to back,
 * PAIRED_ROUNDS times at `clients`; `median` is the median of the rounds'
 * rate ratios (ours over the peer's), 0 when a round failed, and
 * `spread_median` the median of their max/min ratios (ours over the peer's). */
#define PAIRED_ROUNDS 5
typedef struct paired_result {
    char ours[96], peer[96];
    int peer_ours;
    int clients;
    int rounds; /* completed */
    double ours_rate[PAIRED_ROUNDS], peer_rate[PAIRED_ROUNDS], ratio[PAIRED_ROUNDS];
    double ours_spread[PAIRED_ROUNDS], peer_spread[PAIRED_ROUNDS], spread_ratio[PAIRED_ROUNDS];
    double median, spread_median;
} paired_result;
int run_paired(const lbt_redis *server, redisContext *ctl, const char *peers_dir, double seconds,
               paired_result *p);
/* One table of the `n` paired results' rounds. */
void fill_paired(table *t, const paired_result *p, int n);

/* Many keys from one asynchronous thread (async.c). */
#define ASYNC_ROUNDS 5 /* interleaved rounds of the many-keys row, count */
typedef struct async_result {
    double seconds;
    uint64_t locks, errors, inflight;
    uint64_t server_calls;
    uint64_t server_usec; /* server time of the commands sent (SET, EVALSHA), us */
    char error[160];
    /* Filled by run_async_rounds: each round's pipelined SET rate, locks/s
     * and their ratio, and the medians over the `rounds` completed. */
    int rounds;
    double set_rate[ASYNC_ROUNDS], lock_rate[ASYNC_ROUNDS], ratio[ASYNC_ROUNDS];
    double set_median, lock_median, ratio_median;
} async_result;
int run_async(const lbt_redis *server, double seconds, int inflight, async_result *res);
/* The many-keys row in ASYNC_ROUNDS interleaved rounds (async_rounds.c): a
 * pipelined SET measure of set_requests / ASYNC_ROUNDS requests, then
 * seconds / ASYNC_ROUNDS of async locks, each round; totals over them all. */
int run_async_rounds(const lbt_redis *server, double seconds, int inflight, int set_requests,
                     async_result *res);

/* Memory of held locks (memory.c). */
typedef struct memory_result {
    int locks;
    double bytes_per_lock;      /* counted by the allocator hook, live bytes / locks */
    uint64_t allocations;       /* allocator calls for all handles */
    long long rss_before, rss_held; /* VmRSS, bytes */
    long long redis_before, redis_held; /* server used_memory, bytes */
    uint64_t acquired, errors;
    char error[160];
} memory_result;
int run_memory(const lbt_redis *server, int locks, memory_result *res);

#endif
