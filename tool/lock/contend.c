/* `lockbridge contend`: N clients, each on its own connection and lock handle,
 * increment a shared counter under one lock (legacy or token) for S seconds; the
 * summary counts lost updates, lost locks and Redis commands per acquisition
 * (sent by the clients, and run by the server, scripts' own commands included). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool/common/server.h"
#include "tool/lock/lockopts.h"
#include "tool/lock/latency.h"

#define CLIENTS_MAX 1024
#define SECONDS_MAX 604800           /* a week */
#define CS_SLEEP_MS_MAX 3600000      /* an hour, milliseconds */
#define ABANDON_EVERY_MAX 1000000000 /* acquisitions */
#define WAIT_MS_DEFAULT 10000        /* per blocking acquire, milliseconds */
/* Client threads only run the library and hiredis: a small stack, in bytes,
 * keeps a thousand of them cheap. */
#define CLIENT_STACK_BYTES (256 * 1024)

static const lb__cli_optdef opts[] = {
    LB__CLI_LOCK_OPTDEFS, {"--clients", 1}, {"--seconds", 1}, {"--counter-key", 1},
    {"--cs-sleep-ms", 1}, {"--abandon-every", 1}, {NULL, 0}};

static const char help[] =
    "usage: lockbridge contend KEY --clients N --seconds S --counter-key C\n"
    "                              [--cs-sleep-ms X] [--abandon-every K]\n"
    "                              [--mode legacy|compat|modern] [--ns NS] [--ttl-ms N]\n"
    "                              [--wait-ms N] [--clock-offset-ms N]\n"
    "                              legacy, compat: [--codec SPEC]  compat: [--grace-ms N]\n"
    "                              legacy: [--variant wire|scripted]\n"
    "                                      [--release-margin-ms N]\n"
    "                                      [--fleet-max-ttl-ms N]\n"
    "                              modern: [--fencing] [--watchdog] [--fair]\n"
    "\n"
    "N clients, each with its own connection and lock, loop for S seconds: acquire\n"
    "KEY, GET C, sleep X ms, SET C to the value read plus one, release. Prints one\n"
    "summary (a JSON line when stdout is not a terminal, or with --json). KEY may not\n"
    "be the name of a lockbridge companion key ({k}:bwait, {k}:queue, ...).\n"
    "lost_updates is meaningful only when this process is alone on the counter;\n"
    "drivers running several processes compare the sum of their acquisitions with\n"
    "counter_end - counter_start themselves. commands counts what the clients sent\n"
    "(a script is one); server_commands what the server ran meanwhile (INFO\n"
    "commandstats, a script's own commands included, INFO left out; null on a\n"
    "Cluster or when INFO is refused), meaningful only when this process is alone\n"
    "on the server. max_over_min: the busiest client's acquisitions over the\n"
    "idlest's (null when one made none).\n"
    "\n"
    "  --clients N             client threads, 1..1024\n"
    "  --seconds S             run time, whole seconds; attempts under way finish\n"
    "  --counter-key C         the shared counter (absent counts as 0)\n"
    "  --cs-sleep-ms X         sleep inside the critical section, ms (default 0)\n"
    "  --abandon-every K       every K-th acquisition of a client is never released,\n"
    "                          as by a crashed holder (default 0: never)\n"
    "  --wait-ms N             per blocking acquire, ms (default 10000)\n"
    "  --mode, --ns, --codec, --variant, --grace-ms, --ttl-ms, --clock-offset-ms,\n"
    "  --release-margin-ms, --fleet-max-ttl-ms, --fencing, --watchdog, --fair: as for\n"
    "                          `lockbridge hold`\n"
    "                          (one watchdog serves every client; fair waits on one\n"
    "                          server, Sentinel's primary included, block on grant\n"
    "                          lists, through a Cluster on one shared waiter); with\n"
    "                          --fencing, each critical section checks that its fencing\n"
    "                          number is above the previous one (fence_regressions)\n"
    "\n"
    "Exit: 0 the run completed (lost updates included: this measures); 1 usage;\n"
    "4 connection or Redis error (the summary is still printed when the run began).\n";

typedef struct shared {
    const lb__cli_lockopts *lo;
    const char *key;
    const char *counter;
    int64_t cs_sleep_ms;
    int64_t abandon_every;
    atomic_int stop;
    atomic_llong last_fence; /* fencing number of the latest critical section */
    atomic_ullong fence_regressions;
} shared;

typedef struct client {
    shared *sh;
    pthread_t thread;
    int started;
    redisContext *c;    /* to the counter's server */
    lb_cluster *cluster; /* on a Cluster: this client's handle for lock operations */
    lb__cli_lock *l;
    uint64_t acquisitions, acquire_errors, lost_locks, abandoned;
    uint64_t commands; /* of lock handles already dropped */
    lb__cli_latency latency;
    int failed;
    char error[256];
} client;

/* Marks the client failed; the first failure is the one worth reporting. */
static int fail(client *cl, const char *what, const char *detail) {
    if (!cl->failed) snprintf(cl->error, sizeof cl->error, "%s: %s", what, detail);
    cl->failed = 1;
    return -1;
}

/* Reads the counter: absent is 0; anything but a decimal int64 is an error. */
static int read_counter(redisContext *c, const char *key, int64_t *v, char *err, size_t cap) {
    *v = 0;
    redisReply *r = redisCommand(c, "GET %s", key);
    int rc = -1;
    if (!r) snprintf(err, cap, "GET counter: %s", c->errstr);
    else if (r->type == REDIS_REPLY_NIL) rc = 0;
    else if (r->type == REDIS_REPLY_STRING && lb__cli_parse_i64(r->str, (size_t)r->len, v) == 0)
        rc = 0;
    else if (r->type == REDIS_REPLY_ERROR) {
        char msg[128];
        lb__escape(msg, sizeof msg, r->str, (size_t)r->len);
        snprintf(err, cap, "GET counter: %s", msg);
    } else snprintf(err, cap, "the counter key does not hold a decimal integer");
    if (r) freeReplyObject(r);
    return rc;
}

static int critical_section(client *cl) {
    int64_t v;
    char err[200];
    if (read_counter(cl->c, cl->sh->counter, &v, err, sizeof err) != 0)
        return fail(cl, "critical section", err);
    if (v == INT64_MAX) return fail(cl, "critical section", "the counter would overflow");
    /* Fencing numbers grow with each acquisition, and critical sections follow
     * one another in that order unless two holders overlap. */
    if (cl->sh->lo->modern.fencing) {
        long long fence = lb__cli_lock_fence(cl->l);
        if (atomic_exchange(&cl->sh->last_fence, fence) >= fence)
            atomic_fetch_add(&cl->sh->fence_regressions, 1);
    }
    if (cl->sh->cs_sleep_ms > 0) lb__cli_sleep_ms(cl->sh->cs_sleep_ms);
    redisReply *r = redisCommand(cl->c, "SET %s %lld", cl->sh->counter, (long long)(v + 1));
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok ? 0 : fail(cl, "SET counter", r ? "refused" : cl->c->errstr);
}

/* A crashed holder: the handle is dropped with the lock still written, and a
 * fresh handle takes its place for the next acquisition. */
static int abandon(client *cl) {
    cl->abandoned++;
    cl->commands += lb__cli_lock_commands(cl->l);
    lb__cli_lock_free(cl->l);
    cl->l = NULL;
    int rc = lb__cli_lock_new(&cl->l, cl->sh->key, cl->sh->lo);
    return rc == LB_OK ? 0 : fail(cl, "new lock handle", lb_strerror(rc));
}

static int release(client *cl) {
    int rc = lb__cli_lock_release(cl->l, lb__cli_route_target(cl->cluster, cl->c));
    if (rc == LB_OK) return 0;
    if (rc == LB_ELOST || rc == LB_EEXPIRED) {
        cl->lost_locks++;
        return 0;
    }
    return fail(cl, "release", lb__cli_lock_errstr(cl->l));
}

/* Busy, timeout and foreign mean "not this time"; anything else means this
 * client cannot go on (the connection is gone, or Redis refuses the lock). */
static int acquire(client *cl) {
    double t0 = lb__cli_mono_ms();
    int rc = lb__cli_lock_acquire(cl->l, lb__cli_route_target(cl->cluster, cl->c), cl->sh->lo->wait_ms);
    if (rc == LB_OK) {
        lb__cli_latency_add(&cl->latency, lb__cli_mono_ms() - t0);
        cl->acquisitions++;
        return 1;
    }
    cl->acquire_errors++;
    if (rc == LB_EBUSY || rc == LB_ETIMEDOUT || rc == LB_EFOREIGN) return 0;
    return fail(cl, "acquire", lb__cli_lock_errstr(cl->l));
}

static void *client_main(void *arg) {
    client *cl = arg;
    shared *sh = cl->sh;
    while (!atomic_load(&sh->stop)) {
        int got = acquire(cl);
        if (got < 0) break;
        if (got == 0) continue;
        if (critical_section(cl) != 0) {
            release(cl);
            break;
        }
        int drop = sh->abandon_every > 0 &&
                   cl->acquisitions % (uint64_t)sh->abandon_every == 0;
        if ((drop ? abandon(cl) : release(cl)) != 0) break;
    }
    return NULL;
}

/* ---- Setup, run and summary ---------------------------------------------------- */
typedef struct totals {
    uint64_t acquisitions, acquire_errors, lost_locks, abandoned, commands;
    uint64_t most, fewest; /* acquisitions of the busiest and the idlest client */
    int64_t server_calls;  /* run by the server during the run; -1 unknown */
    int failed;
    const char *first_error;
    lb__cli_latency latency;
} totals;

static void add_up(totals *t, client *cls, int n) {
    memset(t, 0, sizeof *t);
    t->fewest = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        client *cl = &cls[i];
        if (cl->acquisitions > t->most) t->most = cl->acquisitions;
        if (cl->acquisitions < t->fewest) t->fewest = cl->acquisitions;
        t->acquisitions += cl->acquisitions;
        t->acquire_errors += cl->acquire_errors;
        t->lost_locks += cl->lost_locks;
        t->abandoned += cl->abandoned;
        t->commands += cl->commands + lb__cli_lock_commands(cl->l);
        lb__cli_latency_merge(&t->latency, &cl->latency);
        if (cl->failed && !t->failed++) t->first_error = cl->error;
    }
}

static void add_latency(cJSON *o, const lb__cli_latency *lat) {
    cJSON *ms = cJSON_AddObjectToObject(o, "acquire_ms");
    if (!ms) return;
    if (lat->count == 0) {
        cJSON_AddNullToObject(ms, "p50");
        cJSON_AddNullToObject(ms, "p99");
        cJSON_AddNullToObject(ms, "max");
        return;
    }
    lb__cli_add_ms(ms, "p50", lb__cli_latency_quantile(lat, 0.50));
    lb__cli_add_ms(ms, "p99", lb__cli_latency_quantile(lat, 0.99));
    lb__cli_add_ms(ms, "max", lat->max_ms);
}

static void add_counter(cJSON *o, int64_t c0, int64_t c1, uint64_t acquisitions) {
    int64_t delta, lost;
    lb__cli_add_i64(o, "counter_start", c0);
    lb__cli_add_i64(o, "counter_end", c1);
    /* Values come from Redis: a counter rewritten by someone else may be anything. */
    if (__builtin_sub_overflow(c1, c0, &delta) ||
        __builtin_sub_overflow((int64_t)acquisitions, delta, &lost)) {
        cJSON_AddNullToObject(o, "counter_delta");
        cJSON_AddNullToObject(o, "lost_updates");
        return;
    }
    lb__cli_add_i64(o, "counter_delta", delta);
    lb__cli_add_i64(o, "lost_updates", lost);
}

/* Per acquisition, or null when there was none (or the count is unknown). */
static void add_per_acquisition(cJSON *o, const char *name, int64_t count, uint64_t acquisitions) {
    if (count >= 0 && acquisitions > 0)
        cJSON_AddNumberToObject(o, name, (double)count / (double)acquisitions);
    else
        cJSON_AddNullToObject(o, name);
}

static void add_counts(cJSON *o, const totals *t) {
    if (t->fewest > 0 && t->fewest != UINT64_MAX)
        cJSON_AddNumberToObject(o, "max_over_min", (double)t->most / (double)t->fewest);
    else
        cJSON_AddNullToObject(o, "max_over_min");
    lb__cli_add_i64(o, "commands", (int64_t)t->commands);
    add_per_acquisition(o, "commands_per_acquisition", (int64_t)t->commands, t->acquisitions);
    if (t->server_calls >= 0) lb__cli_add_i64(o, "server_commands", t->server_calls);
    else cJSON_AddNullToObject(o, "server_commands");
    add_per_acquisition(o, "server_commands_per_acquisition", t->server_calls, t->acquisitions);
}

static void summary(shared *sh, client *cls, int n, int64_t seconds, int64_t c0,
                    int64_t c1, double elapsed_ms, int interrupted, const totals *t) {
    cJSON *o = lb__cli_event("summary"), *per;
    if (!o) {
        lb__cli_emit(o);
        return;
    }
    /* With --ns, the mode the namespace was in when the run started. */
    int legacy = sh->lo->following ? sh->lo->mlock.mode == LB_MODE_LEGACY
                                   : sh->lo->mode == LB__CLI_MODE_LEGACY;
    lb__cli_add_str(o, "mode", sh->lo->following ? lb_mode_name(sh->lo->mlock.mode)
                                                 : lb__cli_mode_name(sh->lo->mode));
    lb__cli_add_str(o, "key", sh->key);
    if (sh->lo->mode != LB__CLI_MODE_MODERN || sh->lo->following)
        lb__cli_add_str(o, "codec", sh->lo->codec_spec);
    /* The variant is the legacy lock's: compat and modern locks have none. */
    if (legacy) lb__cli_add_str(o, "variant", lb__cli_variant_name(sh->lo->legacy.variant));
    if (sh->lo->mlock.ns) lb__cli_add_str(o, "ns", sh->lo->mlock.ns);
    if (sh->lo->modern.fencing)
        lb__cli_add_i64(o, "fence_regressions",
                        (int64_t)atomic_load(&sh->fence_regressions));
    lb__cli_add_i64(o, "clients", n);
    lb__cli_add_i64(o, "seconds", seconds);
    lb__cli_add_i64(o, "acquisitions", (int64_t)t->acquisitions);
    add_counter(o, c0, c1, t->acquisitions);
    lb__cli_add_i64(o, "acquire_errors", (int64_t)t->acquire_errors);
    lb__cli_add_i64(o, "lost_locks", (int64_t)t->lost_locks);
    lb__cli_add_i64(o, "abandoned", (int64_t)t->abandoned);
    add_latency(o, &t->latency);
    if ((per = cJSON_AddArrayToObject(o, "per_client")) != NULL)
        for (int i = 0; i < n; i++)
            cJSON_AddItemToArray(per, cJSON_CreateNumber((double)cls[i].acquisitions));
    add_counts(o, t);
    lb__cli_add_ms(o, "elapsed_ms", elapsed_ms);
    lb__cli_add_bool(o, "interrupted", interrupted);
    lb__cli_add_i64(o, "failed_clients", t->failed);
    if (t->first_error) lb__cli_add_str(o, "first_error", t->first_error);
    lb__cli_emit(o);
}

static void teardown(client *cls, int n) {
    for (int i = 0; i < n; i++) {
        lb__cli_lock_free(cls[i].l);
        if (cls[i].c) redisFree(cls[i].c);
        lb_cluster_free(cls[i].cluster);
    }
    free(cls);
}

/* Every connection is made before any thread starts, so that a refused
 * connection fails the command before the counter is touched. */
static int setup(const lb__cli_args *a, const lb__cli_route *route, shared *sh, client *cls,
                 int n) {
    char err[512];
    for (int i = 0; i < n; i++) {
        cls[i].sh = sh;
        if (!(cls[i].c = lb__cli_connect(&route->other, err, sizeof err)))
            return lb__cli_error(a, sh->key, LB_EIO, err);
        if (route->cluster && lb__cli_route_cluster(route, &cls[i].cluster, err, sizeof err))
            return lb__cli_error(a, sh->key, LB_EIO, err);
        int rc = lb__cli_lock_new(&cls[i].l, sh->key, sh->lo);
        if (rc != LB_OK) return lb__cli_error(a, sh->key, rc, lb_strerror(rc));
    }
    return 0;
}

static int start(const lb__cli_args *a, shared *sh, client *cls, int n) {
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0) rc = pthread_attr_setstacksize(&attr, CLIENT_STACK_BYTES);
    for (int i = 0; rc == 0 && i < n; i++) {
        rc = pthread_create(&cls[i].thread, &attr, client_main, &cls[i]);
        cls[i].started = rc == 0;
    }
    pthread_attr_destroy(&attr);
    if (rc == 0) return 0;
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < n; i++)
        if (cls[i].started) pthread_join(cls[i].thread, NULL);
    return lb__cli_error(a, sh->key, LB_ENOMEM, "cannot start client threads");
}

static int contend(const lb__cli_args *a, shared *sh, int n, int64_t seconds) {
    char err[512];
    int64_t c0, c1;
    lb__cli_route route;
    if (lb__cli_route_open(&route, a, sh->key, sh->lo->mlock.ns, sh->counter, err, sizeof err))
        return lb__cli_error(a, sh->key, LB_EIO, err);
    redisContext *ctl = lb__cli_connect(&route.other, err, sizeof err);
    if (!ctl) {
        lb__cli_route_close(&route);
        return lb__cli_error(a, sh->key, LB_EIO, err);
    }
    client *cls = calloc((size_t)n, sizeof *cls);
    int code = cls ? LB__CLI_EXIT_OK : lb__cli_error(a, sh->key, LB_ENOMEM, "out of memory");
    if (code == LB__CLI_EXIT_OK && read_counter(ctl, sh->counter, &c0, err, sizeof err) != 0)
        code = lb__cli_error(a, sh->key, LB_EREDIS, err);
    if (code == LB__CLI_EXIT_OK &&
        lb__cli_lockenv_start((lb__cli_lockopts *)sh->lo, &route, err, sizeof err) != 0)
        code = lb__cli_error(a, sh->key, LB_EIO, err);
    if (code == LB__CLI_EXIT_OK) code = setup(a, &route, sh, cls, n);
    /* Client threads inherit the blocked signals: only this thread takes them. */
    if (code == LB__CLI_EXIT_OK) lb__cli_block_signals();
    /* On one server the lock and the counter share it: what it ran during the
     * run is the run's, when nothing else uses it. */
    int64_t calls0 = code == LB__CLI_EXIT_OK && !route.cluster ? lb__cli_server_calls(ctl) : -1;
    double t0 = lb__cli_mono_ms();
    if (code == LB__CLI_EXIT_OK) code = start(a, sh, cls, n);
    if (code == LB__CLI_EXIT_OK) {
        int interrupted = lb__cli_wait_signal(seconds * 1000);
        atomic_store(&sh->stop, 1);
        for (int i = 0; i < n; i++) pthread_join(cls[i].thread, NULL);
        double elapsed = lb__cli_mono_ms() - t0;
        int64_t calls1 = calls0 >= 0 ? lb__cli_server_calls(ctl) : -1;
        if (read_counter(ctl, sh->counter, &c1, err, sizeof err) != 0) {
            code = lb__cli_error(a, sh->key, LB_EREDIS, err);
        } else {
            totals t;
            add_up(&t, cls, n);
            t.server_calls = calls0 >= 0 && calls1 >= calls0 ? calls1 - calls0 : -1;
            summary(sh, cls, n, seconds, c0, c1, elapsed, interrupted, &t);
            code = t.failed ? LB__CLI_EXIT_REDIS : LB__CLI_EXIT_OK;
        }
    }
    if (cls) teardown(cls, n);
    lb__cli_lockenv_stop((lb__cli_lockopts *)sh->lo);
    redisFree(ctl);
    lb__cli_route_close(&route);
    return code;
}

static const char *opt(const lb__cli_args *a, const char *name) {
    int i = lb__cli_opt_index(opts, name);
    return i >= 0 ? a->opt[i] : NULL;
}

static int read_int(const lb__cli_args *a, const char *name, int required, int64_t min,
                    int64_t max, int64_t *out) {
    const char *v = opt(a, name);
    *out = 0;
    if (!v && required) return lb__cli_usage(a, "%s is required", name), -1;
    return v ? lb__cli_int(a, name, v, min, max, out) : 0;
}

static int run(const lb__cli_args *a) {
    lb__cli_lockopts lo;
    shared sh;
    int64_t clients, seconds;
    memset(&sh, 0, sizeof sh);
    sh.key = a->pos[0];
    sh.counter = opt(a, "--counter-key");
    if (a->npos != 1) return lb__cli_usage(a, "expects exactly one KEY");
    if (sh.key[0] == '\0') return lb__cli_usage(a, "KEY must not be empty");
    const char *why = lb_lock_name_refused(sh.key, strlen(sh.key));
    if (why) return lb__cli_usage(a, "KEY is %s", why);
    if (!sh.counter || sh.counter[0] == '\0')
        return lb__cli_usage(a, "--counter-key is required and must not be empty");
    if (strcmp(sh.counter, sh.key) == 0)
        return lb__cli_usage(a, "--counter-key must differ from KEY");
    if (lb__cli_lockopts_read(&lo, a, opts, WAIT_MS_DEFAULT) != 0 ||
        read_int(a, "--clients", 1, 1, CLIENTS_MAX, &clients) != 0 ||
        read_int(a, "--seconds", 1, 1, SECONDS_MAX, &seconds) != 0 ||
        read_int(a, "--cs-sleep-ms", 0, 0, CS_SLEEP_MS_MAX, &sh.cs_sleep_ms) != 0 ||
        read_int(a, "--abandon-every", 0, 0, ABANDON_EVERY_MAX, &sh.abandon_every) != 0)
        return LB__CLI_EXIT_USAGE;
    sh.lo = &lo;
    atomic_init(&sh.stop, 0);
    atomic_init(&sh.last_fence, 0);
    atomic_init(&sh.fence_regressions, 0);
    return contend(a, &sh, (int)clients, seconds);
}

const lb__cli_command lb__cli_cmd_contend = {
    "contend", "many clients increment a counter under one lock; JSON summary",
    help, opts, 1, run, 1};
