/* The soak: every legal fleet (lockbridge clients of each kind beside the Java
 * lockers that may share their keys) increments its own counter under its own
 * lock while a fault thread pauses, sleeps and cuts the server at random; at
 * the end each counter must account for every acknowledged increment. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>

#include "harness/redis_server.h"
#include "harness/sleep.h"
#include "harness/spawn_into.h"
#include "lockbridge/lockbridge.h"

/* Tunables. A fault stalls the server for at most PAUSE_MAX_MS; a command
 * waits CMD_TIMEOUT_MS for its reply; a holder sends its counter write only
 * with more than SAFE_MS of lease left, so the write lands (or never lands)
 * before the lock can lapse even if a stall begins right after it is sent. */
#define TTL_MS 4000          /* validity of every lockbridge acquisition, ms */
#define JAVA_TTL_MS "10000"  /* validity of the Java lockers, ms */
#define CMD_TIMEOUT_MS 1500  /* command timeout of every lockbridge connection, ms */
#define PAUSE_MAX_MS 1000    /* longest CLIENT PAUSE or DEBUG SLEEP, ms */
#define PAUSE_MIN_MS 50      /* shortest, ms */
#define SAFE_MS 2000         /* lease needed to send the counter write, ms */
#define WAIT_MS 1000         /* one blocking acquire's wait, ms */
#define GAP_MIN_MS 100       /* fault thread: pause between faults, ms */
#define GAP_MAX_MS 700
#define STALL_MS (TTL_MS + 2500) /* a stalled holder's sleep before its release,
                                   * past every form of its lease, ms */
#define STALL_EVERY_MS 2000 /* one holder stall, each fleet in turn, this often, ms */
#define RELEASE_TRIES 20     /* release attempts across reconnections */
#define JAVA_GRACE_S 60      /* Java processes get this long past the run, s */
#define MAX_CLIENTS 4096

/* ---- Client kinds and fleets ------------------------------------------------------ */
typedef enum kind {
    K_WIRE,       /* legacy wire protocol, ms codec */
    K_SCRIPTED,   /* legacy scripted, ms codec */
    K_COMPAT,     /* lb_mlock in compat mode, ms codec */
    K_S_SCRIPTED, /* legacy scripted, s codec */
    K_S_COMPAT,   /* lb_mlock compat, s codec */
    K_MODERN,     /* token lock */
    K_FENCED,     /* token lock with fencing */
    K_FAIR,       /* fair token lock waiting through a waiter */
    K_COUNT
} kind;

static const char *const kind_names[K_COUNT] = {
    "legacy-wire", "legacy-scripted", "compat", "legacy-scripted-s", "compat-s",
    "modern", "modern-fenced", "fair"};

typedef struct fleet {
    const char *name;
    const char *key;
    const char *counter;
    kind kinds[4];
    int nkinds;
    const char *java_kind; /* NULL: none */
    /* Java process */
    pid_t java_pid;
    char java_out[64];
    int java_clients, java_ran;
    int64_t java_acq, java_cs_errors, java_acq_errors, java_rel_errors, java_disruptions;
    char java_events[256];
    /* lockbridge side */
    int lb_clients;
    atomic_llong done, uncertain, acquisitions, acquire_eio, timeouts, elost, eexpired,
        late_skips, reconnects, other_errors, release_abandoned, cs_errors;
    int64_t counter_end;
} fleet;

static fleet fleets[] = {
    {.name = "ms", .key = "soak:ms", .counter = "soak:ms:counter",
     .kinds = {K_WIRE, K_SCRIPTED, K_COMPAT}, .nkinds = 3, .java_kind = "L4"},
    {.name = "s", .key = "soak:s", .counter = "soak:s:counter",
     .kinds = {K_S_SCRIPTED, K_S_COMPAT}, .nkinds = 2, .java_kind = "R"},
    {.name = "tok", .key = "soak:tok", .counter = "soak:tok:counter",
     .kinds = {K_MODERN, K_FENCED}, .nkinds = 2, .java_kind = "M1"},
    {.name = "fair", .key = "soak:fair", .counter = "soak:fair:counter",
     .kinds = {K_FAIR}, .nkinds = 1, .java_kind = NULL},
};
#define NFLEETS ((int)(sizeof fleets / sizeof fleets[0]))

/* ---- Run state ---------------------------------------------------------------------- */
static lbt_redis server;
static int server_up;
static atomic_int stopping;
static int cs_sleep_ms = 5; /* sleep between the GET and the SET of the counter, ms */

/* Connection ids the fault thread may kill: one slot per client plus the waiter. */
static pthread_mutex_t ids_mu = PTHREAD_MUTEX_INITIALIZER;
static long long ids[MAX_CLIENTS + 1];
static int nids;

static atomic_llong faults_kill, faults_kill_waiter, faults_pause, faults_sleep,
    faults_stall, fault_errors;
static atomic_llong stalls_by_kind[K_COUNT];

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_id(int slot, long long id) {
    pthread_mutex_lock(&ids_mu);
    ids[slot] = id;
    pthread_mutex_unlock(&ids_mu);
}

/* A new connection with the command timeout, its id registered in `slot`. */
static redisContext *dial(int slot, int64_t timeout_ms) {
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", server.port, tv);
    if (!c || c->err || redisSetTimeout(c, tv) != REDIS_OK) {
        if (c) redisFree(c);
        return NULL;
    }
    redisReply *r = redisCommand(c, "CLIENT ID");
    if (!r || r->type != REDIS_REPLY_INTEGER) {
        if (r) freeReplyObject(r);
        redisFree(c);
        return NULL;
    }
    if (slot >= 0) set_id(slot, r->integer);
    freeReplyObject(r);
    return c;
}

/* ---- One lockbridge client ------------------------------------------------------- */
typedef struct client {
    int slot;
    kind k;
    fleet *f;
    pthread_t th;
    int started;
    redisContext *c;
    lb_legacy_lock *leg;
    lb_mlock *ml;
    lb_lock *tok;
    lb_waiter *waiter;
    int connected_once;
    atomic_int stall; /* set by the fault thread: stall before the next release */
} client;

static int new_handle(client *cl) {
    const char *key = cl->f->key;
    size_t klen = strlen(key);
    switch (cl->k) {
    case K_WIRE:
    case K_SCRIPTED:
    case K_S_SCRIPTED: {
        lb_legacy_options o;
        lb_legacy_options_init(&o);
        o.variant = cl->k == K_WIRE ? LB_LEGACY_WIRE : LB_LEGACY_SCRIPTED;
        if (lb_codec_parse(&o.codec, cl->k == K_S_SCRIPTED ? "s" : "ms") != LB_OK) return -1;
        o.ttl_ms = TTL_MS;
        return lb_legacy_lock_new(&cl->leg, key, klen, &o);
    }
    case K_COMPAT:
    case K_S_COMPAT: {
        lb_mlock_options o;
        lb_mlock_options_init(&o);
        o.mode = LB_MODE_COMPAT;
        if (lb_codec_parse(&o.codec, cl->k == K_S_COMPAT ? "s" : "ms") != LB_OK) return -1;
        o.ttl_ms = TTL_MS;
        return lb_mlock_new(&cl->ml, key, klen, &o);
    }
    default: {
        lb_lock_options o;
        lb_lock_options_init(&o);
        o.ttl_ms = TTL_MS;
        o.fencing = cl->k == K_FENCED;
        o.fair = cl->k == K_FAIR;
        return lb_lock_new(&cl->tok, key, klen, &o);
    }
    }
}

static void drop(client *cl) {
    if (cl->c) redisFree(cl->c);
    cl->c = NULL;
    set_id(cl->slot, 0);
}

static int ensure_connected(client *cl) {
    if (cl->c) return 0;
    cl->c = dial(cl->slot, CMD_TIMEOUT_MS);
    if (!cl->c) return -1;
    if (cl->connected_once) atomic_fetch_add(&cl->f->reconnects, 1);
    cl->connected_once = 1;
    return 0;
}

static int acquire(client *cl) {
    if (cl->leg) return lb_legacy_acquire(cl->leg, lb_on_conn(cl->c), WAIT_MS);
    if (cl->ml) return lb_mlock_acquire(cl->ml, lb_on_conn(cl->c), WAIT_MS);
    return lb_lock_acquire_wait(cl->tok, lb_on_conn(cl->c), cl->waiter, WAIT_MS);
}

static int held(const client *cl) {
    if (cl->leg) return lb_legacy_info_of(cl->leg).held;
    if (cl->ml) return lb_mlock_info_of(cl->ml).held;
    return lb_lock_info_of(cl->tok).held;
}

static int release(client *cl) {
    if (cl->leg) return lb_legacy_release(cl->leg, lb_on_conn(cl->c));
    if (cl->ml) return lb_mlock_release(cl->ml, lb_on_conn(cl->c));
    return lb_lock_release(cl->tok, lb_on_conn(cl->c));
}

/* Milliseconds left of our lease by our own clocks. */
static int64_t lease_left_ms(const client *cl) {
    if (cl->leg) {
        int64_t e = lb_legacy_info_of(cl->leg).expiry;
        /* A seconds value stays valid through its whole second; count from its
         * start to stay on the safe side. */
        if (cl->k == K_S_SCRIPTED) e *= 1000;
        return e - wall_ms();
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    int64_t dl = cl->ml ? lb_mlock_info_of(cl->ml).deadline_ns : lb_lock_info_of(cl->tok).deadline_ns;
    return (dl - now_ns) / 1000000;
}

/* GET, sleep, SET of the counter. An unanswered SET is uncertain: it may have
 * run. The connection is dropped after any I/O error. */
static void critical_section(client *cl) {
    fleet *f = cl->f;
    redisReply *r = redisCommand(cl->c, "GET %s", f->counter);
    if (!r) {
        atomic_fetch_add(&f->cs_errors, 1);
        drop(cl);
        return;
    }
    long long v = 0;
    if (r->type == REDIS_REPLY_STRING) {
        char *end = NULL;
        v = strtoll(r->str, &end, 10);
        if (!end || *end) r->type = REDIS_REPLY_ERROR;
    }
    int bad = r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL;
    freeReplyObject(r);
    if (bad) {
        atomic_fetch_add(&f->other_errors, 1);
        return;
    }
    lbt_sleep_ms(cs_sleep_ms);
    if (lease_left_ms(cl) < SAFE_MS) {
        atomic_fetch_add(&f->late_skips, 1);
        return;
    }
    r = redisCommand(cl->c, "SET %s %lld", f->counter, v + 1);
    if (!r) {
        atomic_fetch_add(&f->uncertain, 1);
        drop(cl);
        return;
    }
    if (r->type == REDIS_REPLY_STATUS) atomic_fetch_add(&f->done, 1);
    else atomic_fetch_add(&f->other_errors, 1);
    freeReplyObject(r);
}

/* Releases across reconnections: LB_EIO leaves a token lock's handle held,
 * so its release is sent again on a new connection; a legacy or compat handle
 * whose release may have run lets the lock go (its value may be another
 * holder's by now), and the loop ends. */
static void release_held(client *cl) {
    fleet *f = cl->f;
    for (int i = 0; i < RELEASE_TRIES && held(cl); i++) {
        if (ensure_connected(cl) != 0) {
            lbt_sleep_ms(50);
            continue;
        }
        int rc = release(cl);
        if (rc == LB_OK) return;
        if (rc == LB_EIO) {
            drop(cl);
            continue;
        }
        if (rc == LB_ELOST) atomic_fetch_add(&f->elost, 1);
        else if (rc == LB_EEXPIRED) atomic_fetch_add(&f->eexpired, 1);
        else atomic_fetch_add(&f->other_errors, 1);
        return;
    }
    if (held(cl)) atomic_fetch_add(&f->release_abandoned, 1);
}

static void *client_main(void *arg) {
    client *cl = arg;
    fleet *f = cl->f;
    while (!atomic_load(&stopping)) {
        if (ensure_connected(cl) != 0) {
            lbt_sleep_ms(20);
            continue;
        }
        int rc = acquire(cl);
        if (rc == LB_EIO) {
            atomic_fetch_add(&f->acquire_eio, 1);
            drop(cl);
            continue;
        }
        if (rc == LB_ETIMEDOUT || rc == LB_EBUSY) {
            atomic_fetch_add(&f->timeouts, 1);
            continue;
        }
        if (rc != LB_OK) {
            fprintf(stderr, "soak: %s client %d: acquire: %s\n", kind_names[cl->k], cl->slot,
                    lb_err_name(rc));
            atomic_fetch_add(&f->other_errors, 1);
            lbt_sleep_ms(10);
            continue;
        }
        atomic_fetch_add(&f->acquisitions, 1);
        critical_section(cl);
        /* A holder that stalls (a long GC, a stopped process) after its write
         * and releases once its lease has lapsed: a correct release finds
         * another holder's value and leaves it alone. */
        if (atomic_exchange(&cl->stall, 0)) {
            atomic_fetch_add(&faults_stall, 1);
            atomic_fetch_add(&stalls_by_kind[cl->k], 1);
            lbt_sleep_ms(STALL_MS);
        }
        release_held(cl);
    }
    drop(cl);
    return NULL;
}

/* ---- The fault thread ------------------------------------------------------------- */
static uint64_t rng_state;

static uint64_t rng(void) { /* xorshift64*: seeded, replayable */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static int64_t rng_between(int64_t lo, int64_t hi) {
    return lo + (int64_t)(rng() % (uint64_t)(hi - lo + 1));
}

static int waiter_slot;
static int64_t run_end; /* monotonic ms */
static client *clients;
static int nclients;

static void *fault_main(void *arg) {
    (void)arg;
    redisContext *c = NULL;
    unsigned stall_turn = (unsigned)(rng() % NFLEETS);
    int64_t next_stall = lbt_mono_ms() + STALL_EVERY_MS;
    while (!atomic_load(&stopping)) {
        lbt_sleep_ms(rng_between(GAP_MIN_MS, GAP_MAX_MS));
        if (atomic_load(&stopping)) break;
        /* A holder stall needs its whole length before the run ends. */
        if (lbt_mono_ms() >= next_stall && lbt_mono_ms() + STALL_MS + 1000 < run_end) {
            /* Each fleet in turn, and within it each kind in turn. */
            fleet *f = &fleets[stall_turn % NFLEETS];
            kind want = f->kinds[(stall_turn / NFLEETS) % (unsigned)f->nkinds];
            stall_turn++;
            int of_kind = 0;
            for (int i = 0; i < nclients; i++) of_kind += clients[i].f == f && clients[i].k == want;
            int64_t k = rng_between(0, of_kind - 1);
            for (int i = 0; i < nclients; i++)
                if (clients[i].f == f && clients[i].k == want && k-- == 0)
                    atomic_store(&clients[i].stall, 1);
            next_stall = lbt_mono_ms() + STALL_EVERY_MS;
        }
        if (!c) c = dial(-1, PAUSE_MAX_MS + 5000);
        if (!c) {
            atomic_fetch_add(&fault_errors, 1);
            continue;
        }
        int64_t which = rng_between(0, 9), ms = rng_between(PAUSE_MIN_MS, PAUSE_MAX_MS);
        redisReply *r = NULL;
        if (which < 6) {
            /* Kill a random registered connection (Java ones are never registered). */
            int pick = (int)rng_between(0, nids - 1);
            pthread_mutex_lock(&ids_mu);
            long long id = ids[pick];
            pthread_mutex_unlock(&ids_mu);
            if (id == 0) continue;
            r = redisCommand(c, "CLIENT KILL ID %lld", id);
            atomic_fetch_add(pick == waiter_slot ? &faults_kill_waiter : &faults_kill, 1);
        } else if (which < 8) {
            r = redisCommand(c, "CLIENT PAUSE %lld", (long long)ms);
            atomic_fetch_add(&faults_pause, 1);
            if (r) lbt_sleep_ms(ms);
        } else {
            r = redisCommand(c, "DEBUG SLEEP %.3f", (double)ms / 1000.0);
            atomic_fetch_add(&faults_sleep, 1);
        }
        if (!r || r->type == REDIS_REPLY_ERROR) {
            /* A killed connection id may already be gone: "No such client". */
            if (!r || which >= 6) {
                atomic_fetch_add(&fault_errors, 1);
                if (r) fprintf(stderr, "soak: fault: %s\n", r->str);
            }
            if (!r) {
                redisFree(c);
                c = NULL;
            }
        }
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return NULL;
}

/* ---- Java lockers ----------------------------------------------------------------- */
static int have_java(const char *cp) {
    char p[600];
    snprintf(p, sizeof p, "%s/LegacyLockers.class", cp);
    if (access(p, R_OK) != 0) return 0;
    const char *path = getenv("PATH");
    if (!path) return 0;
    char *dup = strdup(path);
    int found = 0;
    for (char *save = NULL, *d = strtok_r(dup, ":", &save); d && !found;
         d = strtok_r(NULL, ":", &save)) {
        snprintf(p, sizeof p, "%s/java", d);
        found = access(p, X_OK) == 0;
    }
    free(dup);
    return found;
}

static void spawn_java(fleet *f, const char *cp, int seconds) {
    char port[16], jclients[16], secs[16], cs[16];
    snprintf(port, sizeof port, "%d", server.port);
    snprintf(jclients, sizeof jclients, "%d", f->java_clients);
    snprintf(secs, sizeof secs, "%d", seconds);
    snprintf(cs, sizeof cs, "%d", cs_sleep_ms);
    snprintf(f->java_out, sizeof f->java_out, "/tmp/lb-soak-XXXXXX");
    char *argv[] = {"java", "-cp", (char *)cp, "LegacyLockers", "contend", "--kind",
                    (char *)f->java_kind, "--key", (char *)f->key, "--counter-key",
                    (char *)f->counter, "--port", port, "--clients", jclients, "--seconds", secs,
                    "--cs-sleep-ms", cs, "--timeout-ms", JAVA_TTL_MS, NULL};
    f->java_pid = lbt_spawn_into(argv, f->java_out);
}

static int64_t json_i64(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
}

/* Waits for the Java process (killing it past the grace) and reads its summary. */
static void reap_java(fleet *f) {
    if (f->java_pid <= 0) return;
    int st = 0;
    int64_t until = lbt_mono_ms() + JAVA_GRACE_S * 1000;
    pid_t got;
    while ((got = waitpid(f->java_pid, &st, WNOHANG)) == 0 && lbt_mono_ms() < until) lbt_sleep_ms(50);
    if (got == 0) {
        kill(f->java_pid, SIGKILL);
        waitpid(f->java_pid, &st, 0);
        st = -1;
    }
    f->java_pid = 0;
    FILE *in = fopen(f->java_out, "r");
    static char buf[65536];
    cJSON *last = NULL;
    while (in && fgets(buf, sizeof buf, in)) {
        if (buf[0] != '{') continue;
        cJSON *o = cJSON_Parse(buf);
        if (o) {
            cJSON_Delete(last);
            last = o;
        }
    }
    if (in) fclose(in);
    unlink(f->java_out);
    if (!last) return;
    f->java_ran = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    f->java_acq = json_i64(last, "acquisitions");
    f->java_cs_errors = json_i64(last, "cs_errors");
    f->java_acq_errors = json_i64(last, "acquire_errors");
    f->java_rel_errors = json_i64(last, "release_errors");
    f->java_disruptions = json_i64(last, "disruptions");
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(last, "events");
    char *text = ev ? cJSON_PrintUnformatted(ev) : NULL;
    snprintf(f->java_events, sizeof f->java_events, "%s", text ? text : "{}");
    free(text);
    cJSON_Delete(last);
}

/* ---- Main -------------------------------------------------------------------------- */
static void usage(void) {
    fprintf(stderr,
            "usage: soak [--seconds S] [--clients N] [--seed X] [--java-cp DIR] [--cs-ms MS]\n"
            "  --clients N  clients per fleet (lockbridge and Java together; default 4)\n"
            "  --seconds S  length of the run (default 10)\n"
            "  --seed X     fault schedule seed (default: from the clock; printed)\n"
            "  --java-cp DIR  compiled Java lockers (default $BUILD/java); skipped if absent\n");
}

static int parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || !end || *end || end == s || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static lb_waiter *waiter;

static redisContext *waiter_connect(void *ud) {
    (void)ud;
    return dial(waiter_slot, 2000);
}

/* Ctrl-C or a kill ends the run early, through the same stop and report. */
static void on_signal(int sig) {
    (void)sig;
    atomic_store(&stopping, 1);
}

static void stop_everything(pthread_t *fault_th, int fault_started) {
    atomic_store(&stopping, 1);
    if (fault_started) pthread_join(*fault_th, NULL);
    for (int i = 0; i < nclients; i++)
        if (clients[i].started) pthread_join(clients[i].th, NULL);
    for (int i = 0; i < NFLEETS; i++) reap_java(&fleets[i]);
}

int main(int argc, char **argv) {
    long long seconds = 10, per_fleet = 4, seed = 0, cs = 5;
    int seeded = 0;
    char java_cp[512];
    const char *build = getenv("BUILD");
    snprintf(java_cp, sizeof java_cp, "%s/java", build ? build : "build");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = !v;
        if (!bad && !strcmp(a, "--seconds")) bad = parse_int(v, 1, 86400, &seconds);
        else if (!bad && !strcmp(a, "--clients")) bad = parse_int(v, 1, 256, &per_fleet);
        else if (!bad && !strcmp(a, "--seed")) seeded = !(bad = parse_int(v, 1, INT64_MAX, &seed));
        else if (!bad && !strcmp(a, "--cs-ms")) bad = parse_int(v, 0, 1000, &cs);
        else if (!bad && !strcmp(a, "--java-cp")) snprintf(java_cp, sizeof java_cp, "%s", v);
        else bad = 1;
        if (bad) {
            fprintf(stderr, "soak: bad or unknown argument %s\n", a);
            usage();
            return 2;
        }
        i++;
    }
    cs_sleep_ms = (int)cs;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (!seeded) seed = (long long)(wall_ms() ^ ((int64_t)getpid() << 20)) & INT64_MAX;
    if (seed == 0) seed = 1;
    rng_state = (uint64_t)seed;
    printf("soak: seed %lld (replay with --seed %lld), %lld s, %lld clients per fleet\n", seed,
           seed, seconds, per_fleet);
    fflush(stdout);

    int java = have_java(java_cp);
    if (!java) printf("soak: java or %s/LegacyLockers.class missing: Java lockers skipped\n",
                      java_cp);

    /* Share of each fleet: Java takes one kind's share, the rest split evenly. */
    nclients = 0;
    for (int i = 0; i < NFLEETS; i++) {
        fleet *f = &fleets[i];
        int kinds = f->nkinds + (java && f->java_kind ? 1 : 0);
        int share = (int)per_fleet / kinds;
        if (share < 1) share = 1;
        f->java_clients = java && f->java_kind ? share : 0;
        f->lb_clients = (int)per_fleet - f->java_clients;
        if (f->lb_clients < f->nkinds) f->lb_clients = f->nkinds;
        nclients += f->lb_clients;
    }
    if (nclients >= MAX_CLIENTS) return 2;
    waiter_slot = nclients;
    nids = nclients + 1;
    clients = calloc((size_t)nclients, sizeof *clients);
    if (!clients) return 1;

    static const char *const extra[] = {"--enable-debug-command", "yes", NULL};
    if (lbt_redis_start(&server, extra) != 0) {
        fprintf(stderr, "soak: redis-server did not start\n");
        free(clients);
        return 1;
    }
    server_up = 1;
    int failed = 0;

    int n = 0;
    for (int i = 0; i < NFLEETS; i++) {
        fleet *f = &fleets[i];
        for (int j = 0; j < f->lb_clients; j++, n++) {
            clients[n].slot = n;
            clients[n].f = f;
            clients[n].k = f->kinds[j % f->nkinds];
            if (new_handle(&clients[n]) != LB_OK) {
                fprintf(stderr, "soak: cannot create a %s handle\n", kind_names[clients[n].k]);
                failed = 1;
            }
        }
    }
    lb_waiter_options wo;
    lb_waiter_options_init(&wo);
    wo.connect = waiter_connect;
    if (!failed && lb_waiter_new(&waiter, &wo) != LB_OK) {
        fprintf(stderr, "soak: the waiter did not start\n");
        failed = 1;
    }
    for (int i = 0; i < nclients; i++)
        if (clients[i].k == K_FAIR) clients[i].waiter = waiter;

    /* Java first: fork before any thread of ours exists. */
    for (int i = 0; i < NFLEETS && !failed; i++)
        if (fleets[i].java_clients > 0) spawn_java(&fleets[i], java_cp, (int)seconds);

    int64_t t0 = lbt_mono_ms();
    run_end = t0 + seconds * 1000;
    pthread_t fault_th;
    int fault_started = 0;
    for (int i = 0; i < nclients && !failed; i++) {
        if (pthread_create(&clients[i].th, NULL, client_main, &clients[i]) != 0) failed = 1;
        else clients[i].started = 1;
    }
    if (!failed && pthread_create(&fault_th, NULL, fault_main, NULL) == 0) fault_started = 1;
    else failed = 1;
    while (!failed && !atomic_load(&stopping) && lbt_mono_ms() - t0 < seconds * 1000) lbt_sleep_ms(100);
    stop_everything(&fault_th, fault_started);
    double elapsed = (double)(lbt_mono_ms() - t0) / 1000.0;
    lb_waiter_stats ws;
    lb_waiter_stats_get(waiter, &ws);
    lb_waiter_free(waiter);

    /* Counters, read after every writer has stopped. */
    redisContext *admin = dial(-1, 10000);
    for (int i = 0; i < NFLEETS; i++) {
        redisReply *r = admin ? redisCommand(admin, "GET %s", fleets[i].counter) : NULL;
        fleets[i].counter_end = r && r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
        if (!r) failed = 1;
        if (r) freeReplyObject(r);
    }
    if (admin) redisFree(admin);

    printf("\n%-5s %7s %7s %7s %7s %7s %6s %6s %6s %6s %6s %6s %6s %6s\n", "fleet", "clients",
           "done", "uncert", "delta", "lost", "acqEIO", "lost_r", "expir", "late", "reconn",
           "errors", "j_acq", "j_err");
    cJSON *sum = cJSON_CreateObject();
    cJSON_AddStringToObject(sum, "event", "soak");
    char seed_text[24]; /* a string: a double would round seeds above 2^53 */
    snprintf(seed_text, sizeof seed_text, "%lld", seed);
    cJSON_AddStringToObject(sum, "seed", seed_text);
    cJSON_AddNumberToObject(sum, "seconds", elapsed);
    cJSON_AddNumberToObject(sum, "clients_per_fleet", (double)per_fleet);
    cJSON_AddBoolToObject(sum, "java", java);
    cJSON *jf = cJSON_AddObjectToObject(sum, "fleets");
    int64_t total_lost = 0, total_done = 0;
    for (int i = 0; i < NFLEETS; i++) {
        fleet *f = &fleets[i];
        int64_t done = atomic_load(&f->done) + f->java_acq;
        int64_t unc = atomic_load(&f->uncertain) + f->java_cs_errors;
        int64_t delta = f->counter_end; /* every counter starts absent (0) */
        int64_t lost = done - delta;
        int64_t errors = atomic_load(&f->other_errors) + atomic_load(&f->release_abandoned);
        int ok = lost <= 0 && delta <= done + unc && errors == 0 &&
                 (f->java_clients == 0 || f->java_ran) && done > 0;
        if (!ok) failed = 1;
        total_lost += lost > 0 ? lost : 0;
        total_done += done;
        printf("%-5s %3d+%-3d %7" PRId64 " %7" PRId64 " %7" PRId64 " %7" PRId64
               " %6lld %6lld %6lld %6lld %6lld %6" PRId64 " %6" PRId64 " %6" PRId64 "%s\n",
               f->name, f->lb_clients, f->java_clients, done, unc, delta, lost,
               atomic_load(&f->acquire_eio), atomic_load(&f->elost), atomic_load(&f->eexpired),
               atomic_load(&f->late_skips), atomic_load(&f->reconnects), errors, f->java_acq,
               f->java_acq_errors + f->java_rel_errors, ok ? "" : "  FAILED");
        if (f->java_clients) printf("      java %s: ran=%d disruptions=%" PRId64 " events=%s\n",
                                    f->java_kind, f->java_ran, f->java_disruptions, f->java_events);
        cJSON *o = cJSON_AddObjectToObject(jf, f->name);
        cJSON_AddNumberToObject(o, "lb_clients", f->lb_clients);
        cJSON_AddNumberToObject(o, "java_clients", f->java_clients);
        cJSON_AddNumberToObject(o, "done", (double)done);
        cJSON_AddNumberToObject(o, "uncertain", (double)unc);
        cJSON_AddNumberToObject(o, "delta", (double)delta);
        cJSON_AddNumberToObject(o, "lost_updates", (double)lost);
        cJSON_AddNumberToObject(o, "lb_acquisitions", (double)atomic_load(&f->acquisitions));
        cJSON_AddNumberToObject(o, "acquire_eio", (double)atomic_load(&f->acquire_eio));
        cJSON_AddNumberToObject(o, "acquire_timeouts", (double)atomic_load(&f->timeouts));
        cJSON_AddNumberToObject(o, "release_lost", (double)atomic_load(&f->elost));
        cJSON_AddNumberToObject(o, "release_expired", (double)atomic_load(&f->eexpired));
        cJSON_AddNumberToObject(o, "late_skips", (double)atomic_load(&f->late_skips));
        cJSON_AddNumberToObject(o, "cs_errors", (double)atomic_load(&f->cs_errors));
        cJSON_AddNumberToObject(o, "reconnects", (double)atomic_load(&f->reconnects));
        cJSON_AddNumberToObject(o, "errors", (double)errors);
        cJSON_AddNumberToObject(o, "java_acquisitions", (double)f->java_acq);
        cJSON_AddNumberToObject(o, "java_disruptions", (double)f->java_disruptions);
        cJSON_AddBoolToObject(o, "ok", ok);
    }
    printf("faults: kill %lld (waiter %lld), pause %lld, debug-sleep %lld, holder stall %lld, "
           "fault errors %lld; waiter reconnects %llu, hand-offs %llu\n",
           atomic_load(&faults_kill), atomic_load(&faults_kill_waiter),
           atomic_load(&faults_pause), atomic_load(&faults_sleep), atomic_load(&faults_stall),
           atomic_load(&fault_errors),
           (unsigned long long)ws.reconnects, (unsigned long long)ws.handoffs);
    printf("holder stalls by kind:");
    for (int k = 0; k < K_COUNT; k++) printf(" %s %lld", kind_names[k], atomic_load(&stalls_by_kind[k]));
    printf("\n");
    cJSON *fo = cJSON_AddObjectToObject(sum, "faults");
    cJSON_AddNumberToObject(fo, "kill", (double)atomic_load(&faults_kill));
    cJSON_AddNumberToObject(fo, "kill_waiter", (double)atomic_load(&faults_kill_waiter));
    cJSON_AddNumberToObject(fo, "pause", (double)atomic_load(&faults_pause));
    cJSON_AddNumberToObject(fo, "debug_sleep", (double)atomic_load(&faults_sleep));
    cJSON_AddNumberToObject(fo, "holder_stall", (double)atomic_load(&faults_stall));
    cJSON_AddNumberToObject(fo, "errors", (double)atomic_load(&fault_errors));
    cJSON_AddNumberToObject(sum, "waiter_reconnects", (double)ws.reconnects);
    cJSON_AddNumberToObject(sum, "done", (double)total_done);
    cJSON_AddNumberToObject(sum, "lost_updates", (double)total_lost);
    cJSON_AddBoolToObject(sum, "ok", !failed);
    char *line = cJSON_PrintUnformatted(sum);
    printf("%s\n", line ? line : "{}");
    free(line);
    cJSON_Delete(sum);

    for (int i = 0; i < nclients; i++) {
        lb_legacy_lock_free(clients[i].leg);
        lb_mlock_free(clients[i].ml);
        lb_lock_free(clients[i].tok);
    }
    free(clients);
    lbt_redis_stop(&server);
    printf("soak: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
