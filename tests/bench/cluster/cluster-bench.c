/* cluster-bench: many distinct lock keys, acquired and released, on a local
 * six-node Redis Cluster and on one redis-server, by one client, by several
 * client processes, and by one thread through the asynchronous drivers; PING
 * round trips measured alongside. Prints a markdown table for docs/scaling.md. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "harness/cluster.h"
#include "lockbridge/lockbridge.h"

#define DEFAULT_KEYS 20000 /* distinct keys per run, count */
#define PINGS 5000         /* PING round trips sampled per target, count */
#define MAX_PROCS 16       /* client processes at most, count */
#define WINDOW 500         /* asynchronous operations in flight at once, count */
#define MAX_CONNS 16       /* asynchronous connections at most, count */

/* Set by SIGINT/SIGTERM: runs stop early so the servers are always torn down. */
static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

typedef enum kind { K_TOKEN, K_FENCED, K_LEGACY_WIRE } kind;
static const char *const KIND_NAMES[] = {"token", "token+fencing", "legacy wire"};

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What one client measured: pairs done, commands, nanoseconds, failures. */
typedef struct result {
    long pairs, commands, failures;
    int64_t ns;
    unsigned long long connects;
} result;

/* Either a single server's context or a cluster handle. */
typedef struct target {
    redisContext *c;
    lb_cluster *cl;
} target;

static int pair(target *t, kind k, const char *key, long *commands) {
    int rc;
    if (k == K_LEGACY_WIRE) {
        lb_legacy_lock *l = NULL;
        if (lb_legacy_lock_new(&l, key, strlen(key), NULL) != LB_OK) return -1;
        rc = t->cl ? lb_legacy_try_acquire(l, lb_on_cluster(t->cl)) : lb_legacy_try_acquire(l, lb_on_conn(t->c));
        if (rc == LB_OK) rc = t->cl ? lb_legacy_release(l, lb_on_cluster(t->cl)) : lb_legacy_release(l, lb_on_conn(t->c));
        *commands += (long)lb_legacy_info_of(l).commands;
        lb_legacy_lock_free(l);
        return rc;
    }
    lb_lock_options o;
    lb_lock_options_init(&o);
    o.fencing = k == K_FENCED;
    lb_lock *l = NULL;
    if (lb_lock_new(&l, key, strlen(key), &o) != LB_OK) return -1;
    rc = t->cl ? lb_lock_try_acquire(l, lb_on_cluster(t->cl)) : lb_lock_try_acquire(l, lb_on_conn(t->c));
    if (rc == LB_OK) rc = t->cl ? lb_lock_release(l, lb_on_cluster(t->cl)) : lb_lock_release(l, lb_on_conn(t->c));
    *commands += (long)lb_lock_info_of(l).commands;
    lb_lock_free(l);
    return rc;
}

/* One client: keys prefix:proc:0 .. prefix:proc:n-1, each acquired and released. */
static result run_client(const char *seed_or_null, int port, kind k, const char *prefix, int proc,
                         long n) {
    result r;
    memset(&r, 0, sizeof r);
    target t = {NULL, NULL};
    if (seed_or_null) {
        const char *seeds[] = {seed_or_null};
        if (lb_cluster_new(&t.cl, seeds, 1, NULL) != LB_OK) {
            r.failures = n;
            return r;
        }
    } else {
        t.c = redisConnect("127.0.0.1", port);
        if (!t.c || t.c->err) {
            r.failures = n;
            if (t.c) redisFree(t.c);
            return r;
        }
    }
    char key[64];
    int64_t t0 = mono_ns();
    for (long i = 0; i < n && !stop; i++) {
        snprintf(key, sizeof key, "%s:%d:%ld", prefix, proc, i);
        if (pair(&t, k, key, &r.commands) == LB_OK) r.pairs++;
        else r.failures++;
    }
    r.ns = mono_ns() - t0;
    if (t.cl) {
        lb_cluster_stats st;
        lb_cluster_stats_get(t.cl, &st);
        r.connects = st.connects;
        lb_cluster_free(t.cl);
    } else {
        r.connects = 1;
        redisFree(t.c);
    }
    return r;
}

/* `procs` client processes at once, each with n/procs keys; sums their
 * results, with the wall time of the slowest. */
static result run_procs(const char *seed, int port, kind k, const char *prefix, int procs, long n) {
    int fds[MAX_PROCS][2];
    pid_t pids[MAX_PROCS];
    result sum;
    memset(&sum, 0, sizeof sum);
    for (int p = 0; p < procs; p++) {
        if (pipe(fds[p]) != 0) exit(2);
        pids[p] = fork();
        if (pids[p] == 0) {
            close(fds[p][0]);
            result r = run_client(seed, port, k, prefix, p, n / procs);
            ssize_t w = write(fds[p][1], &r, sizeof r);
            _exit(w == (ssize_t)sizeof r ? 0 : 1);
        }
        close(fds[p][1]);
    }
    for (int p = 0; p < procs; p++) {
        result r;
        memset(&r, 0, sizeof r);
        if (read(fds[p][0], &r, sizeof r) != (ssize_t)sizeof r) r.failures = n / procs;
        close(fds[p][0]);
        waitpid(pids[p], NULL, 0);
        sum.pairs += r.pairs;
        sum.commands += r.commands;
        sum.failures += r.failures;
        sum.connects += r.connects;
        if (r.ns > sum.ns) sum.ns = r.ns;
    }
    return sum;
}

/* Mean round trip of `cmd` on the server at `port`, microseconds. */
static double round_trip_us(int port, const char *cmd) {
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) return -1;
    int64_t t0 = mono_ns();
    for (int i = 0; i < PINGS; i++) {
        redisReply *r = redisCommand(c, cmd);
        if (!r) break;
        freeReplyObject(r);
    }
    double us = (double)(mono_ns() - t0) / PINGS / 1000.0;
    redisFree(c);
    return us;
}

/* ---- One event loop: a poll(2) adapter for hiredis's asynchronous contexts --- */
typedef struct pev {
    redisAsyncContext *ac; /* NULL once hiredis has let go of it */
    int reading, writing;
} pev;
static pev evs[MAX_CONNS];
static int nevs;

static void ev_add_read(void *p) { ((pev *)p)->reading = 1; }
static void ev_del_read(void *p) { ((pev *)p)->reading = 0; }
static void ev_add_write(void *p) { ((pev *)p)->writing = 1; }
static void ev_del_write(void *p) { ((pev *)p)->writing = 0; }
static void ev_cleanup(void *p) { ((pev *)p)->ac = NULL; }

static int ev_attach(redisAsyncContext *ac, void *ud) {
    (void)ud;
    if (nevs == MAX_CONNS) return -1;
    pev *e = &evs[nevs++];
    memset(e, 0, sizeof *e);
    e->ac = ac;
    ac->ev.data = e;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    return 0;
}

/* One pass of the loop: waits up to 100 ms for any connection, then lets
 * hiredis read and write what is ready. */
static void ev_once(void) {
    struct pollfd fds[MAX_CONNS];
    int idx[MAX_CONNS], n = 0;
    for (int i = 0; i < nevs; i++) {
        if (!evs[i].ac || !(evs[i].reading || evs[i].writing)) continue;
        fds[n].fd = evs[i].ac->c.fd;
        fds[n].events = (short)((evs[i].reading ? POLLIN : 0) | (evs[i].writing ? POLLOUT : 0));
        fds[n].revents = 0;
        idx[n++] = i;
    }
    if (poll(fds, (nfds_t)n, 100) <= 0) return;
    for (int k = 0; k < n; k++) {
        pev *e = &evs[idx[k]];
        if (e->ac && (fds[k].revents & (POLLIN | POLLERR | POLLHUP))) redisAsyncHandleRead(e->ac);
        if (e->ac && (fds[k].revents & POLLOUT)) redisAsyncHandleWrite(e->ac);
    }
}

/* Keys acquired then released from one thread, WINDOW of them in flight. */
typedef struct async_run async_run;
typedef struct ajob {
    async_run *r;
    lb_lock *lock;
    char key[48];
} ajob;

struct async_run {
    lb_cluster_async *ca;  /* the cluster, or */
    redisAsyncContext *ac; /* one server */
    long next, n, pairs, failures, commands;
    int in_flight;
    ajob jobs[WINDOW];
};

static void async_start(ajob *j);

static int async_go(ajob *j, lb_machine *m, lb_done_fn done) {
    async_run *r = j->r;
    if (!m) return LB_ESTATE;
    return r->ca ? lb_cluster_async_run(r->ca, j->key, strlen(j->key), m, NULL, done, j)
                 : lb_async_run(r->ac, m, NULL, done, j);
}

static void async_end(ajob *j, int ok) {
    async_run *r = j->r;
    if (ok) r->pairs++;
    else r->failures++;
    lb_lock_free(j->lock);
    j->lock = NULL;
    r->in_flight--;
    if (!stop) async_start(j);
}

static void async_released(lb_machine *m, int status, void *ud) {
    ajob *j = ud;
    j->r->commands += lb_machine_commands(m);
    async_end(j, status == LB_OK);
}

static void async_acquired(lb_machine *m, int status, void *ud) {
    ajob *j = ud;
    j->r->commands += lb_machine_commands(m);
    if (status != LB_OK || async_go(j, lb_lock_machine(j->lock, LB_OP_RELEASE, 0), async_released) != LB_OK)
        async_end(j, 0);
}

static void async_start(ajob *j) {
    async_run *r = j->r;
    if (r->next >= r->n) return;
    snprintf(j->key, sizeof j->key, "a%d:%ld", r->ca != NULL, r->next++);
    if (lb_lock_new(&j->lock, j->key, strlen(j->key), NULL) != LB_OK) {
        r->failures++;
        return;
    }
    r->in_flight++;
    if (async_go(j, lb_lock_machine(j->lock, LB_OP_TRY_ACQUIRE, 0), async_acquired) != LB_OK) async_end(j, 0);
}

/* n keys on one thread through the asynchronous driver of `ca` or `ac`. */
static result run_async(lb_cluster_async *ca, redisAsyncContext *ac, long n) {
    static async_run r;
    result res;
    memset(&r, 0, sizeof r);
    memset(&res, 0, sizeof res);
    r.ca = ca;
    r.ac = ac;
    r.n = n;
    int64_t t0 = mono_ns();
    for (int i = 0; i < WINDOW; i++) {
        r.jobs[i].r = &r;
        async_start(&r.jobs[i]);
    }
    while (r.in_flight > 0) ev_once();
    res.ns = mono_ns() - t0;
    res.pairs = r.pairs;
    res.failures = r.failures + (stop ? n - r.next : 0);
    res.commands = r.commands;
    return res;
}

static void row(const char *where, kind k, int procs, result r) {
    double s = (double)r.ns / 1e9;
    printf("| %s | %s | %d | %ld | %.0f | %.1f | %.2f | %llu | %ld |\n", where, KIND_NAMES[k],
           procs, r.pairs, s > 0 ? (double)r.pairs / s : 0.0,
           r.pairs ? (double)r.ns / (double)r.pairs / 1000.0 * procs : 0.0,
           r.pairs ? (double)r.commands / (double)r.pairs : 0.0, r.connects, r.failures);
    fflush(stdout);
}

int main(int argc, char **argv) {
    long keys = argc > 1 ? strtol(argv[1], NULL, 10) : DEFAULT_KEYS;
    int procs = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 4;
    if (keys < 1 || procs < 1 || procs > MAX_PROCS) {
        fprintf(stderr, "usage: cluster-bench [keys] [client processes, 1..%d]\n", MAX_PROCS);
        return 2;
    }
    /* A closed stdout (piped into head) must not kill the run before its
     * servers are stopped; nor must ^C. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    lbt_redis single;
    lbt_cluster cluster;
    if (lbt_redis_start(&single, NULL) != 0) return 1;
    if (lbt_cluster_start(&cluster, 5000) != 0) {
        lbt_redis_stop(&single);
        return 1;
    }
    /* Single commands on one connection: the floor, a replicated write, and
     * the release's PUBLISH (a cluster forwards it to every node). The key
     * "{a}" hashes to slot 15495. */
    int primary = lbt_cluster_owner(&cluster, lb_cluster_keyslot("{a}", 3));
    static const char *const probes[] = {"PING", "SET {a} v", "PUBLISH {a}:released released"};
    for (int i = 0; i < 3; i++)
        printf("%-32s round trip: one server %.1f us, a cluster primary %.1f us\n", probes[i],
               round_trip_us(single.port, probes[i]),
               round_trip_us(cluster.node[primary].port, probes[i]));
    printf("\n");
    printf("| target | lock | clients | pairs | pairs/s | us per pair per client | "
           "commands per pair | connections | failures |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int k = K_TOKEN; k <= K_LEGACY_WIRE && !stop; k++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "b%d", k);
        row("one server", (kind)k, 1, run_procs(NULL, single.port, (kind)k, prefix, 1, keys));
        row("cluster, 3 primaries", (kind)k, 1,
            run_procs(cluster.seed[0], 0, (kind)k, prefix, 1, keys));
        snprintf(prefix, sizeof prefix, "p%d", k);
        row("one server", (kind)k, procs, run_procs(NULL, single.port, (kind)k, prefix, procs, keys));
        row("cluster, 3 primaries", (kind)k, procs,
            run_procs(cluster.seed[0], 0, (kind)k, prefix, procs, keys));
    }
    /* One thread, the asynchronous drivers, WINDOW token locks in flight. */
    if (!stop) {
        redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", single.port);
        if (ac && !ac->err && ev_attach(ac, NULL) == 0) {
            result r = run_async(NULL, ac, keys);
            r.connects = 1;
            row("one server, async", K_TOKEN, 1, r);
            redisAsyncFree(ac);
        }
    }
    if (!stop) {
        const char *seeds[] = {cluster.seed[0]};
        lb_cluster *cl = NULL;
        lb_cluster_async *ca = NULL;
        if (lb_cluster_new(&cl, seeds, 1, NULL) == LB_OK &&
            lb_cluster_async_new(&ca, cl, ev_attach, NULL) == LB_OK) {
            result r = run_async(ca, NULL, keys);
            lb_cluster_stats st;
            lb_cluster_stats_get(cl, &st);
            r.connects = st.connects;
            row("cluster, 3 primaries, async", K_TOKEN, 1, r);
        }
        lb_cluster_async_free(ca);
        lb_cluster_free(cl);
    }
    lbt_cluster_stop(&cluster);
    lbt_redis_stop(&single);
    return 0;
}
