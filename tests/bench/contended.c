/* lockbridge-bench: one key contended by 2, 8 and 32 clients in this process,
 * each on its own connection, running the GET/SET counter critical section:
 * lockbridge's strategies, and the legacy fleets' 200 ms loop written in C. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "lockbridge/lockbridge.h"

#define FIXED_SLEEP_MS 200 /* the legacy fleets' sleep between attempts, milliseconds */
#define OUTSIDERS 4        /* polling clients beside the fair waiters in the mixed row */
#define MIXED_CLIENTS 32   /* the mixed row's clients, outsiders included */

const int CLIENT_COUNTS[] = {2, 8, 32};
const int N_CLIENT_COUNTS = (int)(sizeof CLIENT_COUNTS / sizeof CLIENT_COUNTS[0]);

typedef enum {
    S_MODERN_POLL,
    S_MODERN_WAKE,
    S_MODERN_FAIR,
    S_MODERN_FAIR_LISTS,
    S_COMPAT,
    S_LEGACY_WIRE,
    S_LEGACY_SCRIPTED,
    S_FIXED_SLEEP,
    S_FAIR_BESIDE_POLLERS
} strategy;

typedef struct strategy_spec {
    const char *name;
    int ours;
    strategy s;
} strategy_spec;

static const strategy_spec STRATEGIES[] = {
    {"lockbridge modern, polling only (lb_lock_acquire)", 1, S_MODERN_POLL},
    {"lockbridge modern, wake-on-release (lb_lock_acquire_wait)", 1, S_MODERN_WAKE},
    {"lockbridge modern, fair through a waiter: the baton (fair, lb_lock_acquire_wait)", 1, S_MODERN_FAIR},
    {"lockbridge modern, fair: baton, then grant lists (fair, lb_lock_acquire)", 1, S_MODERN_FAIR_LISTS},
    {"lockbridge compat (lb_mlock_acquire)", 1, S_COMPAT},
    {"lockbridge legacy wire-only (lb_legacy_acquire)", 1, S_LEGACY_WIRE},
    {"lockbridge legacy scripted (lb_legacy_acquire)", 1, S_LEGACY_SCRIPTED},
    {"legacy fleets: 200 ms sleep-and-retry (C, L1 wire)", 0, S_FIXED_SLEEP},
    /* Fair waiters and clients outside their queue on one key: how long the
     * outsiders wait for the release's yield windows, and what the windows
     * cost the queue. Run at MIXED_CLIENTS only; each side gets a row of its
     * own after the whole run's. */
    {"lockbridge modern, fair (defaults, waiter: the baton) beside 4 polling outsiders", 1, S_FAIR_BESIDE_POLLERS},
};
#define N_STRATEGIES (int)(sizeof STRATEGIES / sizeof STRATEGIES[0])


struct run_state;

typedef struct worker {
    pthread_t thread;
    struct run_state *run;
    int index; /* this client's place in the run, from 0 */
    redisContext *c;
    lb_legacy_lock *legacy;
    lb_lock *modern;
    lb_mlock *mlock;
    lb_waiter *waiter; /* wake-on-release: this client's subscriber connection */
    samples tta, handoff; /* nanoseconds */
    uint64_t acquisitions, errors;
    char error[160];
} worker;

typedef struct run_state {
    strategy s;
    int clients;
    char key[64], counter[64];
    int64_t end_ns;
    pthread_mutex_t mu; /* with `go`: every client starts at the same moment */
    pthread_cond_t cv;
    int go;
    atomic_int inside;            /* clients inside the critical section right now */
    atomic_uint overlaps;
    _Atomic int64_t last_release; /* monotonic ns at which the last release began */
    atomic_int last_releaser;     /* index + 1 of the client that began it */
    worker *w;
} run_state;

static void worker_error(worker *w, const char *what, int rc, const char *detail) {
    if (w->errors++ == 0)
        snprintf(w->error, sizeof w->error, "%s: %s (%s)", what, lb_err_name(rc), detail);
}

static const char *worker_errstr(const worker *w) {
    if (w->mlock) return lb_mlock_info_of(w->mlock).errstr;
    return w->modern ? lb_lock_info_of(w->modern).errstr : lb_legacy_info_of(w->legacy).errstr;
}

/* Acquires by the run's strategy; LB_ETIMEDOUT when the run ended first. */
static int acquire(worker *w) {
    const run_state *run = w->run;
    int64_t left_ms = (run->end_ns - bench_mono_ns()) / 1000000;
    if (left_ms < 0) left_ms = 0;
    switch (run->s) {
    case S_MODERN_POLL: return lb_lock_acquire(w->modern, lb_on_conn(w->c), left_ms);
    case S_MODERN_WAKE:
    case S_MODERN_FAIR: return lb_lock_acquire_wait(w->modern, lb_on_conn(w->c), w->waiter, left_ms);
    case S_MODERN_FAIR_LISTS: return lb_lock_acquire(w->modern, lb_on_conn(w->c), left_ms);
    case S_FAIR_BESIDE_POLLERS:
        if (w->waiter) return lb_lock_acquire_wait(w->modern, lb_on_conn(w->c), w->waiter, left_ms);
        return lb_lock_acquire(w->modern, lb_on_conn(w->c), left_ms);
    case S_COMPAT: return lb_mlock_acquire(w->mlock, lb_on_conn(w->c), left_ms);
    case S_LEGACY_WIRE:
    case S_LEGACY_SCRIPTED: return lb_legacy_acquire(w->legacy, lb_on_conn(w->c), left_ms);
    case S_FIXED_SLEEP: break;
    }
    for (;;) {
        int rc = lb_legacy_try_acquire(w->legacy, lb_on_conn(w->c));
        if (rc != LB_EBUSY) return rc;
        if (bench_mono_ns() >= run->end_ns) return LB_ETIMEDOUT;
        bench_sleep_ms(FIXED_SLEEP_MS);
    }
}

static int release(worker *w) {
    if (w->mlock) return lb_mlock_release(w->mlock, lb_on_conn(w->c));
    return w->modern ? lb_lock_release(w->modern, lb_on_conn(w->c)) : lb_legacy_release(w->legacy, lb_on_conn(w->c));
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

/* A wait still going on when the run ends counts with its length so far: a
 * starved client's wait is the figure that matters most. */
static void *worker_main(void *arg) {
    worker *w = arg;
    run_state *run = w->run;
    pthread_mutex_lock(&run->mu);
    while (!run->go) pthread_cond_wait(&run->cv, &run->mu);
    pthread_mutex_unlock(&run->mu);
    while (bench_mono_ns() < run->end_ns) {
        int64_t t0 = bench_mono_ns();
        int rc = acquire(w);
        int64_t t1 = bench_mono_ns();
        if (samples_push(&w->tta, t1 - t0) != 0) worker_error(w, "samples", LB_ENOMEM, "");
        if (rc == LB_ETIMEDOUT) break;
        if (rc != LB_OK) {
            worker_error(w, "acquire", rc, worker_errstr(w));
            break;
        }
        /* A hand-off is the lock passing to another client: a client that takes
         * it again after its own release is not one. */
        int64_t last = atomic_load(&run->last_release);
        int from = atomic_load(&run->last_releaser);
        if (last && from != w->index + 1 && samples_push(&w->handoff, t1 - last) != 0)
            worker_error(w, "samples", LB_ENOMEM, "");
        int cs = critical_section(w);
        if (cs == 0) w->acquisitions++;
        atomic_store(&run->last_releaser, w->index + 1);
        atomic_store(&run->last_release, bench_mono_ns());
        rc = release(w);
        if (rc != LB_OK) worker_error(w, "release", rc, worker_errstr(w));
        if (cs != 0 || rc != LB_OK) break;
    }
    return NULL;
}

static void workers_free(run_state *run) {
    for (int i = 0; run->w && i < run->clients; i++) {
        lb_legacy_lock_free(run->w[i].legacy);
        lb_lock_free(run->w[i].modern);
        lb_mlock_free(run->w[i].mlock);
        lb_waiter_free(run->w[i].waiter);
        if (run->w[i].c) redisFree(run->w[i].c);
        samples_free(&run->w[i].tta);
        samples_free(&run->w[i].handoff);
    }
    free(run->w);
    run->w = NULL;
}

static int workers_new(run_state *run, const lbt_redis *server) {
    run->w = calloc((size_t)run->clients, sizeof *run->w);
    if (!run->w) return -1;
    lb_legacy_options lo;
    lb_legacy_options_init(&lo);
    lo.variant = run->s == S_LEGACY_SCRIPTED ? LB_LEGACY_SCRIPTED : LB_LEGACY_WIRE;
    lb_lock_options mo;
    lb_lock_options_init(&mo);
    mo.fair = run->s == S_MODERN_FAIR || run->s == S_MODERN_FAIR_LISTS ||
              run->s == S_FAIR_BESIDE_POLLERS;
    lb_lock_options outsider = mo;
    outsider.fair = 0;
    lb_mlock_options co;
    lb_mlock_options_init(&co);
    co.mode = LB_MODE_COMPAT;
    lb_waiter_options wo;
    lb_waiter_options_init(&wo);
    wo.host = "127.0.0.1";
    wo.port = server->port;
    const char *key = run->key;
    size_t keylen = strlen(key);
    for (int i = 0; i < run->clients; i++) {
        worker *w = &run->w[i];
        w->run = run;
        w->index = i;
        w->c = lbt_redis_connect(server);
        if (!w->c) return -1;
        int rc;
        switch (run->s) {
        case S_MODERN_WAKE:
        case S_MODERN_FAIR:
            rc = lb_waiter_new(&w->waiter, &wo);
            if (rc == LB_OK) rc = lb_lock_new(&w->modern, key, keylen, &mo);
            break;
        case S_MODERN_POLL:
        case S_MODERN_FAIR_LISTS: rc = lb_lock_new(&w->modern, key, keylen, &mo); break;
        case S_FAIR_BESIDE_POLLERS:
            /* The fair side is given a waiter, as a user following the
             * docs for many waiting threads would; on a plain connection
             * its waits block on the baton all the same. */
            if (i >= run->clients - OUTSIDERS) {
                rc = lb_lock_new(&w->modern, key, keylen, &outsider);
                break;
            }
            rc = lb_waiter_new(&w->waiter, &wo);
            if (rc == LB_OK) rc = lb_lock_new(&w->modern, key, keylen, &mo);
            break;
        case S_COMPAT: rc = lb_mlock_new(&w->mlock, key, keylen, &co); break;
        default: rc = lb_legacy_lock_new(&w->legacy, key, keylen, &lo); break;
        }
        if (rc != LB_OK) return -1;
    }
    return 0;
}

/* Starts the clients, sets the run's end and lets them all go at once.
 * Returns how many started; if not all did, the run ends before it begins. */
static int start_threads(run_state *run, double seconds, int64_t *start_ns) {
    int started = 0;
    while (started < run->clients &&
           pthread_create(&run->w[started].thread, NULL, worker_main, &run->w[started]) == 0)
        started++;
    pthread_mutex_lock(&run->mu);
    *start_ns = bench_mono_ns();
    run->end_ns = started == run->clients ? *start_ns + (int64_t)(seconds * 1e9) : 0;
    run->go = 1;
    pthread_cond_broadcast(&run->cv);
    pthread_mutex_unlock(&run->mu);
    return started;
}

/* Adds clients [from, to) of the run to `r`. */
static void collect_clients(run_state *run, contended *r, int from, int to) {
    r->min_client = UINT64_MAX;
    r->sent = 0;
    for (int i = from; i < to; i++) {
        worker *w = &run->w[i];
        r->acquisitions += w->acquisitions;
        r->errors += w->errors;
        r->sent += (long long)(w->mlock    ? lb_mlock_info_of(w->mlock).commands
                               : w->modern ? lb_lock_info_of(w->modern).commands
                                           : lb_legacy_info_of(w->legacy).commands);
        if (w->acquisitions > r->max_client) r->max_client = w->acquisitions;
        if (w->acquisitions < r->min_client) r->min_client = w->acquisitions;
        if (samples_append(&r->tta, &w->tta) != 0 || samples_append(&r->handoff, &w->handoff) != 0)
            r->errors++;
        if (w->errors && !r->note[0]) snprintf(r->note, sizeof r->note, "%s", w->error);
    }
    r->overlaps = atomic_load(&run->overlaps);
}

static void collect(run_state *run, contended *r) { collect_clients(run, r, 0, run->clients); }

/* A side of a mixed run: its clients' own figures; the server's counts, the
 * counter and overlaps belong to the whole run's row. */
static void collect_side(run_state *run, contended *side, int from, int to) {
    collect_clients(run, side, from, to);
    side->part = 1;
    side->lost = 0;
    side->overlaps = 0;
    if (side->min_client == UINT64_MAX) side->min_client = 0;
    samples_sort(&side->tta);
    samples_sort(&side->handoff);
}

/* `sides` (NULL, or two rows) receive the mixed run's fair waiters and its
 * outsiders. */
static void one_run(const lbt_redis *server, redisContext *ctl, const strategy_spec *spec,
                    int clients, double seconds, contended *r, contended *const *sides) {
    run_state run;
    memset(&run, 0, sizeof run);
    run.s = spec->s;
    run.clients = clients;
    snprintf(run.key, sizeof run.key, "bench:contended:%d:%d", (int)spec->s, clients);
    snprintf(run.counter, sizeof run.counter, "bench:counter:%d:%d", (int)spec->s, clients);
    tally before;
    if (workers_new(&run, server) != 0 || contended_prepare(ctl, run.key, run.counter, &before) != 0) {
        r->status = RUN_FAILED;
        snprintf(r->note, sizeof r->note, "setup failed");
        workers_free(&run);
        return;
    }
    pthread_mutex_init(&run.mu, NULL);
    pthread_cond_init(&run.cv, NULL);
    int64_t start_ns;
    int started = start_threads(&run, seconds, &start_ns);
    for (int i = 0; i < started; i++) pthread_join(run.w[i].thread, NULL);
    pthread_cond_destroy(&run.cv);
    pthread_mutex_destroy(&run.mu);
    r->seconds = seconds;
    collect(&run, r);
    contended_finish(ctl, run.counter, &before, r);
    for (int k = 0; sides && k < 2; k++) {
        sides[k]->seconds = seconds;
        collect_side(&run, sides[k], k ? clients - OUTSIDERS : 0, k ? clients : clients - OUTSIDERS);
        sides[k]->status = r->status;
    }
    if (started != clients) {
        r->status = RUN_FAILED;
        snprintf(r->note, sizeof r->note, "only %d of %d threads started", started, clients);
    } else if (r->errors || r->lost != 0 || r->overlaps) {
        r->status = RUN_FAILED;
    }
    workers_free(&run);
}

/* LB_BENCH_ONLY=TEXT runs only the strategies whose name contains TEXT (for
 * trial runs of one row; the report then lacks the others). */
void run_contended_ours(const lbt_redis *server, redisContext *ctl, double seconds,
                        contended_set *set) {
    const char *only = getenv("LB_BENCH_ONLY");
    for (int s = 0; s < N_STRATEGIES; s++)
        for (int k = 0; k < N_CLIENT_COUNTS; k++) {
            int mixed = STRATEGIES[s].s == S_FAIR_BESIDE_POLLERS;
            if (only && !strstr(STRATEGIES[s].name, only)) continue;
            if (mixed && CLIENT_COUNTS[k] != MIXED_CLIENTS) continue;
            contended *r = contended_add(set, STRATEGIES[s].name, STRATEGIES[s].ours,
                                         CLIENT_COUNTS[k]);
            if (!r) return;
            contended *sides[2] = {NULL, NULL};
            if (mixed) {
                char name[96];
                snprintf(name, sizeof name, "  the %d fair waiters of that run",
                         MIXED_CLIENTS - OUTSIDERS);
                sides[0] = contended_add(set, name, 1, MIXED_CLIENTS - OUTSIDERS);
                snprintf(name, sizeof name, "  the %d polling outsiders of that run", OUTSIDERS);
                sides[1] = contended_add(set, name, 1, OUTSIDERS);
                if (!sides[0] || !sides[1]) return;
            }
            one_run(server, ctl, &STRATEGIES[s], CLIENT_COUNTS[k], seconds, r,
                    mixed ? sides : NULL);
            fprintf(stderr, "bench: %s, %d clients: %s\n", r->name, r->clients,
                    r->status == RUN_OK ? "done" : r->note[0] ? r->note : "failed");
        }
}

/* One more run of the strategy named `name` (the paired rounds of
 * paired.c); 0, or -1 when no strategy has that name. */
int contended_rerun(const lbt_redis *server, redisContext *ctl, const char *name, int clients,
                    double seconds, contended *r) {
    for (int s = 0; s < N_STRATEGIES; s++) {
        if (strcmp(STRATEGIES[s].name, name) != 0 || STRATEGIES[s].s == S_FAIR_BESIDE_POLLERS)
            continue;
        contended_init(r, name, 1, clients);
        one_run(server, ctl, &STRATEGIES[s], clients, seconds, r, NULL);
        return 0;
    }
    return -1;
}

/* ---- Shared by every contended run ------------------------------------------------ */
contended *contended_add(contended_set *set, const char *name, int ours, int clients) {
    if (set->n == CONTENDED_MAX) return NULL;
    contended *r = &set->r[set->n++];
    contended_init(r, name, ours, clients);
    return r;
}

void contended_init(contended *r, const char *name, int ours, int clients) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->ours = ours;
    r->clients = clients;
    r->lost = -1;
    r->overlaps = -1;
    r->sent = -1;
}

void contended_free(contended_set *set) {
    for (int i = 0; i < set->n; i++) {
        samples_free(&set->r[i].tta);
        samples_free(&set->r[i].handoff);
    }
    set->n = 0;
}

int contended_prepare(redisContext *ctl, const char *key, const char *counter, tally *before) {
    redisReply *r = redisCommand(ctl, "DEL %s %s", key, counter);
    if (r) freeReplyObject(r);
    return r ? server_tally(ctl, before) : -1;
}

static long long read_counter(redisContext *c, const char *key) {
    redisReply *r = redisCommand(c, "GET %s", key);
    long long n = -1;
    if (r && r->type == REDIS_REPLY_NIL) n = 0;
    if (r && r->type == REDIS_REPLY_STRING) n = strtoll(r->str, NULL, 10);
    if (r) freeReplyObject(r);
    return n;
}

void contended_finish(redisContext *ctl, const char *counter, const tally *before, contended *r) {
    tally after, delta;
    memset(&delta, 0, sizeof delta);
    if (server_tally(ctl, &after) == 0) {
        tally_accumulate(&delta, &after, before);
        r->server_calls = tally_total(&delta);
        r->calls = delta;
    }
    long long n = read_counter(ctl, counter);
    r->lost = n < 0 ? -1 : (long long)r->acquisitions - n;
    if (r->min_client == UINT64_MAX) r->min_client = 0;
    samples_sort(&r->tta);
    samples_sort(&r->handoff);
}
