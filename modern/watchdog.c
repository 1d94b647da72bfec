/* The watchdog: one thread and one connection of its own renew any number of
 * held token locks with the compare-then-extend script, and report lost ones. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "lockbridge/cluster.h"
#include "lockbridge/sentinel.h"
#include "lockbridge/watchdog.h"
#include "modern/internal.h"

#define NS_PER_MS INT64_C(1000000)
/* First delay before retrying a renewal that got no answer about the lock,
 * ms; it doubles up to the renewal interval. */
#define RETRY_MIN_MS 10

enum { W_ACTIVE, W_LOST };

/* One watched lock. The thread never dereferences `owner`: everything it needs
 * (key, token, TTL) was copied into `shadow` on the owner's thread. */
typedef struct lb__watch {
    struct lb__watch *next;
    lb_watchdog *wd;
    lb_lock *owner;
    lb_lock *shadow;       /* runs the extend machine with the owner's token */
    lb_watch_options opts;
    int64_t ttl_ms;
    int64_t interval_ns;   /* between renewals */
    int64_t next_ns;       /* next renewal; INT64_MAX: none (hold limit) */
    int64_t deadline_ns;   /* end of our lease */
    int64_t limit_ns;      /* watch time + max_hold; INT64_MAX: none */
    int64_t retry_ns;      /* delay before the next retry of a failed renewal */
    int state;
    lb_watch_reason reason;
    int busy;              /* the thread renews or reports it, mutex released */
    int removed;           /* unwatched: no callback, no renewal any more */
    int reap;              /* unwatched from its own callback: the thread frees it */
    char detail[LB__ERRSTR_CAP];
} lb__watch;

struct lb_watchdog {
    lb_watchdog_options opts;
    char *host, *socket, *username, *password;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;   /* the thread: something changed */
    pthread_cond_t idle;   /* unwatch: an entry stopped being busy */
    lb__watch *watches;
    int stop;
    int free_on_exit;      /* lb_watchdog_free ran on the thread itself */
    lb_watchdog_stats stats;
    /* Touched by the thread only (and by new/free while it does not run). */
    redisContext *c;
    /* Or a copy of a Cluster or Sentinel target, which reconnects itself. */
    struct lb_cluster *cl;
    struct lb_sentinel *sn;
    int64_t reconnect_at_ns;
    int64_t reconnect_delay_ms;
};

const char *lb_watch_reason_name(lb_watch_reason reason) {
    switch (reason) {
    case LB_WATCH_REFUSED: return "LB_WATCH_REFUSED";
    case LB_WATCH_UNREACHABLE: return "LB_WATCH_UNREACHABLE";
    case LB_WATCH_MAX_HOLD: return "LB_WATCH_MAX_HOLD";
    case LB_WATCH_NONE: return "LB_WATCH_NONE";
    default: return "LB_WATCH_UNKNOWN";
    }
}

void lb_watchdog_options_init(lb_watchdog_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->connect_timeout_ms = 1000;
    o->io_timeout_ms = 1000;
    o->reconnect_min_ms = 10;
    o->reconnect_max_ms = 500;
}

void lb_watch_options_init(lb_watch_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->renew_fraction = 1.0 / 3.0;
}

static int64_t now_ns(const lb_watchdog *wd) { return lb_clock_now(wd->opts.clock).mono_ns; }

static int on_thread(const lb_watchdog *wd) { return pthread_equal(pthread_self(), wd->thread); }

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- connection (the thread's, or lb_watchdog_new's before it starts) ------- */

static int open_connection(lb_watchdog *wd, int64_t timeout_ms, char *detail) {
    int64_t t = min64(wd->opts.connect_timeout_ms, timeout_ms);
    if (!wd->opts.connect) {
        lb__conn_opts o = {wd->host, wd->opts.port, t, t, wd->username, wd->password,
                           wd->opts.db, wd->socket};
        int rc;
        wd->c = lb__connect(&o, &rc, detail, LB__ERRSTR_CAP);
        return rc;
    }
    redisContext *c = wd->opts.connect(wd->opts.connect_ud);
    if (!c || c->err) {
        snprintf(detail, LB__ERRSTR_CAP, "connect: %s", c ? c->errstr : "no context");
        if (c) redisFree(c);
        return LB_EIO;
    }
    redisSetTimeout(c, lb__timeval_ms(t));
    wd->c = c;
    return LB_OK;
}

static void drop_connection(lb_watchdog *wd) {
    if (wd->c) redisFree(wd->c);
    wd->c = NULL;
}

/* Where renewals go: the copy of a Cluster or Sentinel target, or the
 * watchdog's connection. */
static lb_target own_target(const lb_watchdog *wd) {
    return wd->cl ? lb_on_cluster(wd->cl) : wd->sn ? lb_on_sentinel(wd->sn) : lb_on_conn(wd->c);
}

/* A connection for the next renewal: the current one, or a new one unless the
 * reconnect delay after a failed attempt is still running. */
static int ensure_connection(lb_watchdog *wd, int64_t now, int64_t timeout_ms, char *detail,
                             int *reconnected) {
    if (wd->c || wd->cl || wd->sn) return LB_OK;
    if (now < wd->reconnect_at_ns) {
        snprintf(detail, LB__ERRSTR_CAP, "no connection; reconnecting");
        return LB_EIO;
    }
    int rc = open_connection(wd, timeout_ms, detail);
    if (rc != LB_OK) {
        wd->reconnect_at_ns = now + wd->reconnect_delay_ms * NS_PER_MS;
        wd->reconnect_delay_ms = min64(wd->reconnect_delay_ms * 2, wd->opts.reconnect_max_ms);
        return rc;
    }
    wd->reconnect_delay_ms = wd->opts.reconnect_min_ms;
    *reconnected = 1;
    return LB_OK;
}

/* ---- entries --------------------------------------------------------------- */

static void free_watch(lb_watchdog *wd, lb__watch *w) {
    lb_lock_free(w->shadow);
    lb__free(wd->opts.allocator, w);
}

static void unlink_watch(lb_watchdog *wd, lb__watch *w) {
    for (lb__watch **p = &wd->watches; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            return;
        }
    }
}

static lb__watch *find_watch(lb_watchdog *wd, const lb_lock *l) {
    for (lb__watch *w = wd->watches; w; w = w->next)
        if (w->owner == l && !w->removed) return w;
    return NULL;
}

/* Ends a busy period: wakes unwatchers (who then free the entry), or frees it
 * if its own callback unwatched it. Mutex held. */
static void settle(lb_watchdog *wd, lb__watch *w) {
    w->busy = 0;
    pthread_cond_broadcast(&wd->idle);
    if (w->reap) {
        unlink_watch(wd, w);
        free_watch(wd, w);
    }
}

/* Marks `w` lost and runs its callback with the mutex released. */
static void report(lb_watchdog *wd, lb__watch *w, lb_watch_reason reason) {
    w->state = W_LOST;
    w->reason = reason;
    /* The detail is the last renewal's message, and a renewal that worked
     * leaves none: a hold limit reached, or a lease that ran out before the
     * next renewal was even tried, is said here. Never an empty detail. */
    if (reason == LB_WATCH_MAX_HOLD)
        snprintf(w->detail, sizeof w->detail,
                 "max_hold_ms reached: renewal stopped and the lease ran out");
    else if (!w->detail[0])
        snprintf(w->detail, sizeof w->detail, "%s",
                 reason == LB_WATCH_REFUSED ? "the key no longer holds our token"
                                            : "the lease ran out before a renewal succeeded");
    wd->stats.lost++;
    if (w->removed || !w->opts.lost) return;
    lb_watch_lost_fn fn = w->opts.lost;
    void *ud = w->opts.ud;
    const lb_lock *owner = w->owner;
    pthread_mutex_unlock(&wd->mu);
    fn(owner, reason, w->detail, ud);
    pthread_mutex_lock(&wd->mu);
}

/* The earliest lease end among live entries: no command may block past it,
 * or that lock's loss would be reported late. Mutex held. */
static int64_t earliest_deadline(const lb_watchdog *wd) {
    int64_t t = INT64_MAX;
    for (const lb__watch *w = wd->watches; w; w = w->next)
        if (w->state == W_ACTIVE && !w->removed) t = min64(t, w->deadline_ns);
    return t;
}

/* The renewal's TTL, ms: the lock's own, trimmed to the hold limit; 0 when a
 * renewal could not lengthen the lease without passing the limit. */
static int64_t renewal_ms(const lb__watch *w, int64_t now) {
    if (w->limit_ns == INT64_MAX) return w->ttl_ms;
    int64_t ms = min64(w->ttl_ms, (w->limit_ns - now) / NS_PER_MS);
    return now + ms * NS_PER_MS > w->deadline_ns ? ms : 0;
}

/* One renewal of `w` (busy), the mutex released during the I/O. */
static void renew(lb_watchdog *wd, lb__watch *w, int64_t now) {
    if (renewal_ms(w, now) <= 0) {
        w->next_ns = INT64_MAX; /* hold limit: let the lease run out */
        return;
    }
    int64_t timeout_ms = min64(wd->opts.io_timeout_ms, (earliest_deadline(wd) - now) / NS_PER_MS);
    int reconnected = 0;
    int64_t ms = 0;
    char detail[LB__ERRSTR_CAP] = "";
    /* Fields of `w` are written by this thread only while it is in the list,
     * so they are read here without the mutex; `shadow` is ours alone. */
    pthread_mutex_unlock(&wd->mu);
    int rc = ensure_connection(wd, now, timeout_ms, detail, &reconnected);
    /* The TTL is chosen after a possible reconnect, so that a trimmed last
     * renewal ends at the hold limit, not after it. */
    if (rc == LB_OK && (ms = renewal_ms(w, now_ns(wd))) > 0) {
        if (wd->c) redisSetTimeout(wd->c, lb__timeval_ms(timeout_ms));
        lb_machine *m = lb__lock_extend_machine(w->shadow, ms, LB_EXTEND_REPLACE);
        rc = lb_target_run(own_target(wd), m, wd->opts.clock);
        if (rc == LB_EIO && wd->c && wd->c->errstr[0])
            snprintf(detail, sizeof detail, "renewal: %s", wd->c->errstr);
        else
            snprintf(detail, sizeof detail, "%s", m->errstr);
        /* An error reply may mean a server that restarted (NOAUTH, LOADING) or a
         * stream out of step: a new connection costs little. */
        if (rc != LB_OK && rc != LB_ELOST && rc != LB_EWRONGTYPE) drop_connection(wd);
    }
    int64_t after = now_ns(wd);
    pthread_mutex_lock(&wd->mu);
    if (reconnected) wd->stats.reconnects++;
    if (rc == LB_OK && ms <= 0) {
        w->next_ns = INT64_MAX;
        return;
    }
    memcpy(w->detail, detail, sizeof w->detail);
    if (rc == LB_OK) {
        wd->stats.renewals++;
        /* Our lease never runs past the limit, even by the command's transit. */
        w->deadline_ns = min64(w->shadow->deadline_ns, w->limit_ns);
        /* A renewal trimmed to the hold limit was the last one. */
        w->next_ns = ms < w->ttl_ms ? INT64_MAX
                                    : w->deadline_ns - w->ttl_ms * NS_PER_MS + w->interval_ns;
        w->retry_ns = RETRY_MIN_MS * NS_PER_MS;
    } else if (rc == LB_ELOST || rc == LB_EWRONGTYPE) {
        report(wd, w, LB_WATCH_REFUSED);
    } else {
        wd->stats.failures++;
        w->next_ns = after + min64(w->retry_ns, w->interval_ns);
        w->retry_ns = min64(w->retry_ns * 2, w->interval_ns);
    }
}

/* ---- the thread ------------------------------------------------------------- */

/* Waits on `wake` until the watchdog's clock reaches `until` (or a signal). */
static void wait_until(lb_watchdog *wd, int64_t until, int64_t now) {
    if (until == INT64_MAX) {
        pthread_cond_wait(&wd->wake, &wd->mu);
        return;
    }
    /* The condition variable waits on CLOCK_MONOTONIC; the watchdog's clock
     * may be another one, so only the interval is carried over. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t wait = until - now, abs_ns;
    if (lb__add64((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, wait, &abs_ns) != 0)
        abs_ns = INT64_MAX;
    ts.tv_sec = (time_t)(abs_ns / 1000000000);
    ts.tv_nsec = (long)(abs_ns % 1000000000);
    pthread_cond_timedwait(&wd->wake, &wd->mu, &ts);
}

/* The next entry to act on: a lapsed lease first, then the most overdue
 * renewal. Otherwise *wake is when to look again. Mutex held. */
static lb__watch *next_due(lb_watchdog *wd, int64_t now, int *lapsed, int64_t *wake) {
    lb__watch *due = NULL;
    *wake = INT64_MAX;
    for (lb__watch *w = wd->watches; w; w = w->next) {
        if (w->state != W_ACTIVE || w->busy || w->removed) continue;
        if (w->deadline_ns <= now) {
            *lapsed = 1;
            return w;
        }
        if (w->next_ns <= now && (!due || w->next_ns < due->next_ns)) due = w;
        *wake = min64(*wake, min64(w->next_ns, w->deadline_ns));
    }
    *lapsed = 0;
    return due;
}

static void cleanup(lb_watchdog *wd);

static void *watchdog_main(void *arg) {
    lb_watchdog *wd = arg;
    pthread_mutex_lock(&wd->mu);
    while (!wd->stop) {
        int64_t now = now_ns(wd), wake;
        int lapsed;
        lb__watch *w = next_due(wd, now, &lapsed, &wake);
        if (!w) {
            wait_until(wd, wake, now);
            continue;
        }
        w->busy = 1;
        if (lapsed)
            report(wd, w, w->next_ns == INT64_MAX ? LB_WATCH_MAX_HOLD : LB_WATCH_UNREACHABLE);
        else
            renew(wd, w, now);
        settle(wd, w);
    }
    int self_free = wd->free_on_exit;
    pthread_mutex_unlock(&wd->mu);
    if (self_free) {
        pthread_detach(pthread_self());
        cleanup(wd);
    }
    return NULL;
}

/* ---- public API -------------------------------------------------------------- */

static int valid_target(lb_target t) {
    return t.handle && (t.kind == LB_TARGET_CONN || t.kind == LB_TARGET_CLUSTER ||
                        t.kind == LB_TARGET_SENTINEL);
}

static int valid_options(const lb_watchdog_options *o) {
    if (o->target.kind != LB_TARGET_NONE || o->target.handle) {
        if (!valid_target(o->target) || o->connect) return 0;
    } else if (!o->connect && (!o->host || !o->host[0] || o->port <= 0 || o->port > 65535)) {
        return 0;
    }
    return o->db >= 0 && o->connect_timeout_ms > 0 && o->io_timeout_ms > 0 &&
           o->reconnect_min_ms > 0 && o->reconnect_max_ms >= o->reconnect_min_ms &&
           o->connect_timeout_ms <= INT64_MAX / NS_PER_MS &&
           o->io_timeout_ms <= INT64_MAX / NS_PER_MS &&
           o->reconnect_max_ms <= INT64_MAX / NS_PER_MS / 4;
}

static int copy_string(const lb_allocator *a, const char *s, char **out) {
    *out = NULL;
    if (!s) return LB_OK;
    size_t n = strlen(s) + 1;
    *out = lb__alloc(a, n);
    if (!*out) return LB_ENOMEM;
    memcpy(*out, s, n);
    return LB_OK;
}

static void free_strings(lb_watchdog *wd) {
    lb__free(wd->opts.allocator, wd->host);
    lb__free(wd->opts.allocator, wd->socket);
    lb__free(wd->opts.allocator, wd->username);
    lb__free(wd->opts.allocator, wd->password);
}

/* Starts the thread with every signal blocked in it: signals go to the
 * application's threads, and a write to a closed socket there fails with
 * EPIPE instead of raising SIGPIPE. */
static int start_thread(lb_watchdog *wd) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&wd->thread, NULL, watchdog_main, wd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err == 0 ? LB_OK : LB_ENOMEM;
}

static int init_sync(lb_watchdog *wd) {
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) return LB_ENOMEM;
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = LB_ENOMEM;
    if (pthread_mutex_init(&wd->mu, NULL) == 0) {
        if (pthread_cond_init(&wd->wake, &attr) == 0) {
            if (pthread_cond_init(&wd->idle, NULL) == 0) rc = LB_OK;
            else pthread_cond_destroy(&wd->wake);
        }
        if (rc != LB_OK) pthread_mutex_destroy(&wd->mu);
    }
    pthread_condattr_destroy(&attr);
    return rc;
}

static void destroy_sync(lb_watchdog *wd) {
    pthread_mutex_destroy(&wd->mu);
    pthread_cond_destroy(&wd->wake);
    pthread_cond_destroy(&wd->idle);
}

/* The caller's errbuf, when given: why lb_watchdog_new failed. */
static int fail(const lb_watchdog_options *o, int rc, const char *why) {
    if (o->errbuf && o->errbuf_size > 0) snprintf(o->errbuf, o->errbuf_size, "%s", why);
    return rc;
}

static void drop_copies(lb_watchdog *wd) {
    drop_connection(wd);
    lb_cluster_free(wd->cl);
    lb_sentinel_free(wd->sn);
    wd->cl = NULL;
    wd->sn = NULL;
}

/* The address of a connection target, read from its hiredis context. */
static int copy_conn_address(lb_watchdog *wd, const redisContext *c, char *detail) {
    if (c->connection_type == REDIS_CONN_UNIX && c->unix_sock.path)
        return copy_string(wd->opts.allocator, c->unix_sock.path, &wd->socket);
    if (c->connection_type != REDIS_CONN_TCP || !c->tcp.host) {
        snprintf(detail, LB__ERRSTR_CAP, "the target's connection has no address to copy");
        return LB_EINVAL;
    }
    wd->opts.port = c->tcp.port;
    return copy_string(wd->opts.allocator, c->tcp.host, &wd->host);
}

/* What the watchdog connects to: its own copy of the target, or the address
 * given (a connect callback needs none). */
static int copy_address(lb_watchdog *wd, const lb_watchdog_options *o, char *detail) {
    int rc;
    switch (o->target.kind) {
    case LB_TARGET_CONN: return copy_conn_address(wd, o->target.handle, detail);
    case LB_TARGET_CLUSTER:
        rc = lb__cluster_copy(o->target.handle, o->io_timeout_ms, &wd->cl);
        if (rc != LB_OK)
            snprintf(detail, LB__ERRSTR_CAP, "cannot reach the cluster: %s", lb_strerror(rc));
        return rc;
    case LB_TARGET_SENTINEL:
        rc = lb__sentinel_copy(o->target.handle, o->io_timeout_ms, &wd->sn);
        if (rc != LB_OK)
            snprintf(detail, LB__ERRSTR_CAP, "cannot find the primary: %s", lb_strerror(rc));
        return rc;
    default: return copy_string(o->allocator, o->connect ? NULL : o->host, &wd->host);
    }
}

int lb_watchdog_new_on(lb_watchdog **out, lb_target t, lb_watch_lost_fn lost, void *ud) {
    lb_watchdog_options o;
    lb_watchdog_options_init(&o);
    o.target = t;
    o.lost = lost;
    o.lost_ud = ud;
    return lb_watchdog_new(out, &o);
}

int lb_watchdog_new(lb_watchdog **out, const lb_watchdog_options *o) {
    lb_watchdog_options defaults;
    if (o && o->errbuf && o->errbuf_size > 0) o->errbuf[0] = '\0';
    if (!out) return o ? fail(o, LB_EINVAL, "invalid argument: out is NULL") : LB_EINVAL;
    *out = NULL;
    if (!o) {
        lb_watchdog_options_init(&defaults);
        o = &defaults;
    }
    if (!o->target.handle && !o->connect && !o->host)
        return fail(o, LB_EINVAL, "no server: set target, or host and port, or connect");
    if (!valid_options(o)) return fail(o, LB_EINVAL, "invalid watchdog options");
    lb_watchdog *wd = lb__alloc(o->allocator, sizeof *wd);
    if (!wd) return fail(o, LB_ENOMEM, "out of memory");
    memset(wd, 0, sizeof *wd);
    wd->opts = *o;
    wd->opts.errbuf = NULL; /* the caller's, for this call only */
    wd->opts.errbuf_size = 0;
    wd->reconnect_delay_ms = o->reconnect_min_ms;
    char detail[LB__ERRSTR_CAP] = "";
    int rc = copy_address(wd, o, detail);
    if (rc == LB_OK) rc = copy_string(o->allocator, o->username, &wd->username);
    if (rc == LB_OK) rc = copy_string(o->allocator, o->password, &wd->password);
    wd->opts.host = wd->opts.username = wd->opts.password = NULL;
    wd->opts.target = lb_on_conn(NULL); /* the caller's handle is not kept */
    if (rc != LB_OK && !detail[0])
        snprintf(detail, sizeof detail, "%s", rc == LB_ENOMEM ? "out of memory" : lb_strerror(rc));
    if (rc == LB_OK && !wd->cl && !wd->sn) {
        rc = open_connection(wd, o->connect_timeout_ms, detail);
        if (rc != LB_OK && !detail[0]) snprintf(detail, sizeof detail, "%s", lb_strerror(rc));
    }
    if (rc == LB_OK && (rc = init_sync(wd)) == LB_OK) {
        if ((rc = start_thread(wd)) == LB_OK) {
            *out = wd;
            return LB_OK;
        }
        destroy_sync(wd);
    }
    if (rc != LB_OK && !detail[0]) snprintf(detail, sizeof detail, "cannot start the watchdog's thread");
    drop_copies(wd);
    free_strings(wd);
    lb__free(o->allocator, wd);
    return fail(o, rc, detail);
}

/* Frees what the thread leaves behind; the locks still watched are detached. */
static void cleanup(lb_watchdog *wd) {
    lb__watch *w = wd->watches;
    while (w) {
        lb__watch *next = w->next;
        if (w->owner) w->owner->watch = NULL;
        free_watch(wd, w);
        w = next;
    }
    drop_copies(wd);
    destroy_sync(wd);
    free_strings(wd);
    lb__free(wd->opts.allocator, wd);
}

void lb_watchdog_free(lb_watchdog *wd) {
    if (!wd) return;
    pthread_mutex_lock(&wd->mu);
    wd->stop = 1;
    int self = on_thread(wd);
    wd->free_on_exit = self;
    pthread_cond_signal(&wd->wake);
    pthread_mutex_unlock(&wd->mu);
    if (self) return; /* the thread cleans up as it leaves its loop */
    pthread_join(wd->thread, NULL);
    cleanup(wd);
}

static int valid_watch(const lb_watch_options *o) {
    return isfinite(o->renew_fraction) && o->renew_fraction > 0 && o->renew_fraction < 1 &&
           o->max_hold_ms >= 0 && o->max_hold_ms <= INT64_MAX / NS_PER_MS / 4;
}

/* A handle the watchdog owns, holding the owner's key and token. */
static int new_shadow(lb_watchdog *wd, const lb_lock *l, lb_lock **out) {
    lb_lock_options so;
    lb_lock_options_init(&so);
    so.ttl_ms = l->opts.ttl_ms;
    so.clock = wd->opts.clock;
    so.allocator = wd->opts.allocator;
    int rc = lb_lock_new(out, l->key, l->keylen, &so);
    if (rc != LB_OK) return rc;
    lb__lock_fix_token(*out, l->token);
    (*out)->held = 1;
    return LB_OK;
}

static void schedule(lb__watch *w, int64_t now, int64_t left_ns) {
    double interval = (double)w->ttl_ms * (double)NS_PER_MS * w->opts.renew_fraction;
    w->interval_ns = interval < (double)NS_PER_MS ? NS_PER_MS : (int64_t)interval;
    w->deadline_ns = now + left_ns;
    /* As if the last acquire or extend had been a renewal. */
    w->next_ns = w->deadline_ns - w->ttl_ms * NS_PER_MS + w->interval_ns;
    if (w->next_ns < now) w->next_ns = now;
    w->limit_ns = w->opts.max_hold_ms ? now + w->opts.max_hold_ms * NS_PER_MS : INT64_MAX;
    w->retry_ns = RETRY_MIN_MS * NS_PER_MS;
    w->shadow->deadline_ns = w->deadline_ns;
}

int lb_watchdog_watch(lb_watchdog *wd, lb_lock *l, const lb_watch_options *o) {
    lb_watch_options defaults;
    if (!wd || !l) return LB_EINVAL;
    if (!o) {
        lb_watch_options_init(&defaults);
        o = &defaults;
    }
    if (!valid_watch(o)) return LB_EINVAL;
    if (on_thread(wd)) return LB_ESTATE;
    if (!l->held) return LB_ESTATE;
    if (l->watch && l->watch->wd != wd) return LB_ESTATE;
    /* The lock's deadline is on its own clock: carry over the time left. */
    int64_t left_ns = l->deadline_ns - lb_clock_now(l->opts.clock).mono_ns;
    if (left_ns <= 0) return LB_EEXPIRED;
    lb__watch *w = lb__alloc(wd->opts.allocator, sizeof *w);
    if (!w) return LB_ENOMEM;
    memset(w, 0, sizeof *w);
    int rc = new_shadow(wd, l, &w->shadow);
    if (rc != LB_OK) {
        lb__free(wd->opts.allocator, w);
        return rc;
    }
    if (l->watch) lb__watch_detach(l); /* replaced, once the new one exists */
    w->wd = wd;
    w->owner = l;
    w->opts = *o;
    w->ttl_ms = l->opts.ttl_ms;
    w->state = W_ACTIVE;
    pthread_mutex_lock(&wd->mu);
    schedule(w, now_ns(wd), left_ns);
    w->next = wd->watches;
    wd->watches = w;
    wd->stats.watched++;
    pthread_cond_signal(&wd->wake);
    pthread_mutex_unlock(&wd->mu);
    l->watch = w;
    return LB_OK;
}

void lb__watch_detach(lb_lock *l) {
    lb__watch *w = l->watch;
    lb_watchdog *wd = w->wd;
    l->watch = NULL;
    pthread_mutex_lock(&wd->mu);
    w->removed = 1;
    w->owner = NULL;
    wd->stats.watched--;
    /* A renewal or callback in flight finishes first: after this returns,
     * nothing extends the lock and its callback never runs. On the thread
     * itself (from the callback) the entry is freed when the callback returns. */
    int free_now = 1;
    if (w->busy && on_thread(wd)) {
        w->reap = 1;
        free_now = 0;
    }
    while (free_now && w->busy) pthread_cond_wait(&wd->idle, &wd->mu);
    if (free_now) unlink_watch(wd, w);
    pthread_mutex_unlock(&wd->mu);
    if (free_now) free_watch(wd, w);
}

int64_t lb__watch_deadline_ns(const lb_lock *l) {
    lb__watch *w = l->watch;
    pthread_mutex_lock(&w->wd->mu);
    int64_t ns = w->deadline_ns;
    pthread_mutex_unlock(&w->wd->mu);
    return ns;
}

int lb__watch_lost(const lb_lock *l) {
    lb__watch *w = l->watch;
    pthread_mutex_lock(&w->wd->mu);
    int lost = w->state == W_LOST;
    pthread_mutex_unlock(&w->wd->mu);
    return lost;
}

int lb__lock_watch_acquired(lb_lock *l, lb_target t, int rc) {
    if (rc != LB_OK || !l->opts.watchdog) return rc;
    /* The watchdog's loss callback, if any, is the watch's: one option
     * gives a lock that renews itself and says when it is lost. */
    lb_watch_options wo;
    lb_watch_options_init(&wo);
    wo.lost = l->opts.watchdog->opts.lost;
    wo.ud = l->opts.watchdog->opts.lost_ud;
    int w = lb_watchdog_watch(l->opts.watchdog, l, &wo);
    if (w == LB_OK) return LB_OK;
    (void)lb_lock_release(l, t);
    return lb__refuse(l->errstr, w, "acquired, but the watchdog could not watch it (%s): released",
                      lb_err_name(w));
}

int lb_watchdog_unwatch(lb_watchdog *wd, lb_lock *l) {
    if (!wd || !l) return LB_EINVAL;
    if (!l->watch || l->watch->wd != wd) return LB_ESTATE;
    lb__watch_detach(l);
    return LB_OK;
}

int lb_watchdog_check(lb_watchdog *wd, const lb_lock *l, int64_t *deadline_ns,
                      lb_watch_reason *reason) {
    if (deadline_ns) *deadline_ns = 0;
    if (reason) *reason = (lb_watch_reason)0;
    if (!wd || !l) return LB_EINVAL;
    pthread_mutex_lock(&wd->mu);
    const lb__watch *w = find_watch(wd, l);
    int rc = LB_ESTATE;
    if (w) {
        if (deadline_ns) *deadline_ns = w->deadline_ns;
        if (reason && w->state == W_LOST) *reason = w->reason;
        rc = w->state == W_LOST ? LB_ELOST : LB_OK;
    }
    pthread_mutex_unlock(&wd->mu);
    return rc;
}

int lb_watchdog_stats_get(lb_watchdog *wd, lb_watchdog_stats *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!wd || !out) return LB_EINVAL;
    pthread_mutex_lock(&wd->mu);
    *out = wd->stats;
    pthread_mutex_unlock(&wd->mu);
    return LB_OK;
}
