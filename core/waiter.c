/* The waiter: one subscriber connection per client, owned by a thread that
 * reads release messages and wakes the threads waiting on each channel;
 * SUBSCRIBE and UNSUBSCRIBE follow a per-channel count of watchers. Fair
 * hand-offs come on the waiter's own inbox channel, so that a hand-off wakes
 * the one client it names rather than every client watching the lock. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "lockbridge/wait.h"
#include "core/internal.h"

#define NBUCKETS 64
#define RECENT 8 /* unclaimed hand-offs remembered per channel */

/* Where the server stands on a channel, as far as the thread knows. */
enum { SUB_NONE, SUB_PENDING, SUB_ON, SUB_LEAVING };

struct lb__wchan {
    struct lb__wchan *next; /* bucket chain */
    char *name;
    size_t len;
    int refs;               /* waits watching it */
    int sub;                /* SUB_* */
    int inbox;              /* the waiter's inbox: never counted nor let go */
    int was_on;             /* the inbox was subscribed before */
    int fair;               /* a fair wait watched it once: never let go for churn */
    uint64_t gen;           /* release messages and confirmed subscriptions */
    uint64_t release_gen;   /* gen at the last release message */
    uint64_t unclaimed;     /* hand-offs that named no wait of ours */
    int64_t idle_ms;        /* monotonic ms at which refs last fell to 0 */
    int64_t release_ms;     /* monotonic ms of the last release message, 0: none */
    int64_t paused_until;   /* churning: unsubscribed until this monotonic ms, 0: not */
    char recent[RECENT][LB_TOKEN_LEN]; /* the last RECENT of them */
    pthread_cond_t cond;
    lb__wrec *recs;         /* fair waits' tokens */
};

struct lb_waiter {
    lb_waiter_options opts;
    char *host, *username, *password;
    pthread_mutex_t mu;     /* guards everything below but ctx */
    pthread_t thread;
    int wake[2];            /* pipe: a byte wakes the thread */
    int stop;
    int dirty;              /* some channel's subscription needs a command */
    int64_t linger_due;     /* monotonic ms of the next lingering channel's end, 0: none */
    int stuck;              /* a command could not be queued (out of memory) */
    int connected;
    lb__wchan *buckets[NBUCKETS];
    lb__wchan *inbox;       /* created by the first fair wait, kept to the end */
    char *inbox_prefix;
    lb_waiter_stats st;
    redisContext *ctx;      /* the thread's alone once it runs */
};

void lb_waiter_options_init(lb_waiter_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o); /* no server: host and port, or connect, must be given */
    o->connect_timeout_ms = 1000; /* as the watchdog's */
    o->reconnect_min_ms = 10;
    o->reconnect_max_ms = 1000;
    o->linger_ms = 1000;
    o->inbox_prefix = "lb-inbox:";
}

/* ---- Channels (caller holds mu) ------------------------------------------- */

static size_t bucket(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return (size_t)(h % NBUCKETS);
}

static lb__wchan *find(lb_waiter *w, const char *s, size_t len) {
    for (lb__wchan *c = w->buckets[bucket(s, len)]; c; c = c->next)
        if (c->len == len && memcmp(c->name, s, len) == 0) return c;
    return NULL;
}

static lb__wchan *create(lb_waiter *w, const char *s, size_t len) {
    const lb_allocator *a = w->opts.allocator;
    lb__wchan *c = lb__alloc(a, sizeof *c);
    if (!c) return NULL;
    memset(c, 0, sizeof *c);
    c->name = lb__alloc(a, len ? len : 1);
    pthread_condattr_t attr;
    int ok = c->name && pthread_condattr_init(&attr) == 0;
    if (ok) {
        ok = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&c->cond, &attr) == 0;
        pthread_condattr_destroy(&attr);
    }
    if (!ok) {
        lb__free(a, c->name);
        lb__free(a, c);
        return NULL;
    }
    memcpy(c->name, s, len);
    c->len = len;
    size_t b = bucket(s, len);
    c->next = w->buckets[b];
    w->buckets[b] = c;
    return c;
}

static void destroy(lb_waiter *w, lb__wchan *c) {
    if (!c->inbox) w->st.channels--;
    pthread_cond_destroy(&c->cond);
    lb__free(w->opts.allocator, c->name);
    lb__free(w->opts.allocator, c);
}

static void poke(lb_waiter *w) {
    char b = 1;
    /* A full pipe already holds a wake-up; nothing is lost. */
    ssize_t n = write(w->wake[1], &b, 1);
    (void)n;
}

static void event(lb__wchan *c) {
    c->gen++;
    pthread_cond_broadcast(&c->cond);
}

/* ---- The thread's side ------------------------------------------------------ */

/* A new subscriber connection in *out, or a status. Its timeout bounds
 * connect, AUTH and writes; reads only follow poll(), so it never cuts one. */
static int dial(lb_waiter *w, redisContext **out, char *err, size_t cap) {
    *out = NULL;
    if (w->opts.connect) {
        redisContext *c = w->opts.connect(w->opts.connect_ud);
        if (c && !c->err) *out = c;
        else snprintf(err, cap, "connect callback: %s", c ? c->errstr : "no context");
        if (c && !*out) redisFree(c);
        return *out ? LB_OK : LB_EIO;
    }
    /* Channels ignore SELECT: no database. */
    lb__conn_opts o = {w->host, w->opts.port, w->opts.connect_timeout_ms,
                       w->opts.connect_timeout_ms, w->username, w->password, 0, NULL};
    int rc;
    *out = lb__connect(&o, &rc, err, cap);
    return rc;
}

/* Whether `end` is still to come; if so, notes it as a time at which
 * reconcile runs again. */
static int due_later(lb_waiter *w, int64_t end, int64_t now) {
    if (end <= now) return 0;
    if (!w->linger_due || end < w->linger_due) w->linger_due = end;
    w->dirty = 1;
    return 1;
}

/* Whether an unwatched subscribed channel is kept a while longer. */
static int lingers(lb_waiter *w, const lb__wchan *c, int64_t now) {
    return due_later(w, c->idle_ms + w->opts.linger_ms, now);
}

/* Whether a churning channel is still left unsubscribed (see deliver). */
static int paused(lb_waiter *w, lb__wchan *c, int64_t now) {
    if (c->fair) c->paused_until = 0; /* a fair wait came: it listens */
    return c->paused_until && due_later(w, c->paused_until, now);
}

/* Appends SUBSCRIBE/UNSUBSCRIBE for every channel whose wanted state differs
 * from the server's, and forgets channels nobody watches. Holds mu. */
static void reconcile(lb_waiter *w) {
    int64_t now = lb__mono_ms();
    w->dirty = 0;
    w->stuck = 0;
    w->linger_due = 0;
    for (size_t b = 0; b < NBUCKETS; b++) {
        lb__wchan **pp = &w->buckets[b];
        while (*pp) {
            lb__wchan *c = *pp;
            const char *argv[2] = {NULL, c->name};
            size_t lens[2] = {0, c->len};
            int next = c->sub;
            int pause = paused(w, c, now);
            if (c->refs > 0 && c->sub == SUB_NONE && !pause) {
                argv[0] = "SUBSCRIBE";
                next = SUB_PENDING;
            } else if (c->sub == SUB_ON && (pause || (c->refs == 0 && !lingers(w, c, now)))) {
                argv[0] = "UNSUBSCRIBE";
                next = SUB_LEAVING;
            } else if (c->refs == 0 && c->sub == SUB_NONE && !pause) {
                *pp = c->next;
                destroy(w, c);
                continue;
            }
            if (argv[0]) {
                lens[0] = strlen(argv[0]);
                /* Out of memory: the state stays, to be tried again. */
                if (redisAppendCommandArgv(w->ctx, 2, argv, lens) == REDIS_OK) {
                    c->sub = next;
                    if (next == SUB_PENDING && !c->inbox) w->st.subscribes++;
                } else {
                    w->dirty = w->stuck = 1;
                }
            }
            pp = &c->next;
        }
    }
}

/* " <1 to 18 digits>" at s + *at, or nothing left: whether it parsed; *at
 * moves past it, *out gets it (-1 when nothing was left). */
static int number(const char *s, size_t len, size_t *at, int64_t *out) {
    *out = -1;
    if (*at == len) return 1;
    size_t i = *at + 1, end = i;
    if (s[*at] != ' ') return 0;
    int64_t v = 0;
    while (end < len && s[end] != ' ') {
        if (s[end] < '0' || s[end] > '9' || end - i == 18) return 0;
        v = v * 10 + (s[end++] - '0');
    }
    if (end == i) return 0;
    *at = end;
    *out = v;
    return 1;
}

/* A fair hand-off: "<32 hex digits> <place> <fence>" (fencing on),
 * "<32 hex digits> <place>", or the token alone. Older releases sent the
 * token alone or "<token> <fence>": the place read from those matches no
 * queue place, so the wait checks them by an attempt. */
int lb__handoff_parse(const char *s, size_t len, int64_t *place, int64_t *fence) {
    *place = *fence = -1;
    if (len < LB_TOKEN_LEN) return 0;
    for (size_t i = 0; i < LB_TOKEN_LEN; i++)
        if (!strchr("0123456789abcdef", s[i]) || !s[i]) return 0;
    size_t at = LB_TOKEN_LEN;
    return number(s, len, &at, place) && number(s, len, &at, fence) && at == len;
}

/* Marks the wait of `c` whose token the hand-off names, if one watches;
 * returns `c` then (its waits are to be woken), else NULL. */
static lb__wchan *claim(lb_waiter *w, lb__wchan *c, const char *token, int64_t place,
                        int64_t fence) {
    for (lb__wrec *r = c->recs; r; r = r->next) {
        if (r->token[0] && memcmp(r->token, token, LB_TOKEN_LEN) == 0) {
            r->handed = 1;
            r->place = place;
            r->fence = fence;
            w->st.handoffs++;
            return c;
        }
    }
    return NULL;
}

/* A hand-off on the inbox names a token, not a lock: every watched channel
 * is searched (a client waits on few locks at once). */
static lb__wchan *claim_anywhere(lb_waiter *w, const char *token, int64_t place,
                                 int64_t fence) {
    for (size_t b = 0; b < NBUCKETS; b++)
        for (lb__wchan *c = w->buckets[b]; c; c = c->next)
            if (c->recs && claim(w, c, token, place, fence)) return c;
    return NULL;
}

/* A lock released again less than LB__CHURN_GAP_MS after its last release
 * turns over faster than a wake-up helps: every release would wake every
 * wait listening, all of them would attempt, one could win (at 32 clients a
 * quarter of polling's rate). So its channel is let go for
 * LB__CHURN_PAUSE_MS, and its waits poll meanwhile, as lb_lock_acquire does;
 * then it is subscribed again if still watched. Never a channel a fair wait
 * has watched: hand-offs may come on it. Holds mu. */
static void note_churn(lb_waiter *w, lb__wchan *c) {
    int64_t now = lb__mono_ms();
    int churn = c->release_ms && now - c->release_ms < LB__CHURN_GAP_MS;
    c->release_ms = now;
    if (!churn || c->fair) return;
    c->paused_until = now + LB__CHURN_PAUSE_MS;
    w->st.pauses++;
    w->dirty = 1;
}

/* A message: a hand-off wakes the one wait it names (others need not retry:
 * the lock is held again); anything else on a lock's channel counts as a
 * release. Returns the channel whose waits are to be woken, or NULL. Holds
 * mu; the caller wakes them once it has let mu go, so that they do not wake
 * only to block on it. */
static lb__wchan *deliver(lb_waiter *w, lb__wchan *c, const redisReply *msg) {
    int64_t place, fence;
    w->st.messages++;
    if (msg->type == REDIS_REPLY_STRING &&
        lb__handoff_parse(msg->str, (size_t)msg->len, &place, &fence)) {
        lb__wchan *to = c->inbox ? claim_anywhere(w, msg->str, place, fence)
                                 : claim(w, c, msg->str, place, fence);
        if (!to) {
            /* Another client's, or ours before its wait was watching. */
            memcpy(c->recent[c->unclaimed % RECENT], msg->str, LB_TOKEN_LEN);
            c->unclaimed++;
        }
        return to;
    }
    if (c->inbox) return NULL;
    c->gen++;
    c->release_gen = c->gen;
    note_churn(w, c);
    return c;
}

/* The inbox is subscribed again: a hand-off may have passed unheard while
 * it was not, so every fair wait attempts at once. (No attempt names the
 * inbox before its first confirmation: nothing to miss then.) */
static void inbox_back(lb_waiter *w) {
    if (!w->inbox->was_on) {
        w->inbox->was_on = 1;
        return;
    }
    for (size_t b = 0; b < NBUCKETS; b++)
        for (lb__wchan *c = w->buckets[b]; c; c = c->next)
            if (c->recs) event(c);
}

static int is_kind(const redisReply *r, const char *kind) {
    return r->type == REDIS_REPLY_STRING && (size_t)r->len == strlen(kind) &&
           memcmp(r->str, kind, r->len) == 0;
}

/* One push reply from the subscriber connection; returns the channel whose
 * waits are to be woken (see deliver), or NULL. Holds mu. */
static lb__wchan *on_reply(lb_waiter *w, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return NULL; /* nothing else is expected here; ignoring it is safe */
    const redisReply *kind = r->element[0], *ch = r->element[1];
    lb__wchan *c = find(w, ch->str, (size_t)ch->len);
    if (!c) return NULL;
    if (is_kind(kind, "message")) {
        return deliver(w, c, r->element[2]);
    } else if (is_kind(kind, "subscribe") && c->sub == SUB_PENDING) {
        c->sub = SUB_ON;
        /* A release may have gone unheard before now: waits retry at once. */
        if (c->inbox) inbox_back(w);
        else event(c);
        if (c->refs == 0) w->dirty = 1;
    } else if (is_kind(kind, "unsubscribe") && c->sub == SUB_LEAVING) {
        c->sub = SUB_NONE;
        w->dirty = 1;
    }
    return NULL;
}

static void drop_connection(lb_waiter *w) {
    redisFree(w->ctx);
    w->ctx = NULL;
    pthread_mutex_lock(&w->mu);
    w->connected = 0;
    w->st.connected = 0;
    for (size_t b = 0; b < NBUCKETS; b++)
        for (lb__wchan *c = w->buckets[b]; c; c = c->next) c->sub = SUB_NONE;
    w->dirty = 1;
    pthread_mutex_unlock(&w->mu);
}

static void mark_connected(lb_waiter *w, int again) {
    pthread_mutex_lock(&w->mu);
    w->connected = 1;
    w->st.connected = 1;
    if (again) w->st.reconnects++;
    w->dirty = 1;
    pthread_mutex_unlock(&w->mu);
}

static void drain(lb_waiter *w) {
    char buf[64];
    while (read(w->wake[0], buf, sizeof buf) > 0) {
    }
}

/* Sleeps `ms`; only stopping cuts it short (new watches do not: they would
 * turn the reconnection delay into a storm). Returns whether stopping. */
static int pause_ms(lb_waiter *w, int64_t ms) {
    int64_t until = lb__mono_ms() + ms;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        int64_t left = until - lb__mono_ms();
        if (stop || left <= 0) return stop;
        struct pollfd p = {w->wake[0], POLLIN, 0};
        if (poll(&p, 1, (int)left) > 0) drain(w);
    }
}

static int reconnect(lb_waiter *w, int64_t *backoff) {
    if (pause_ms(w, *backoff)) return -1;
    redisContext *c;
    char err[LB__ERRSTR_CAP];
    if (dial(w, &c, err, sizeof err) == LB_OK) {
        w->ctx = c;
        *backoff = 0;
        mark_connected(w, 1);
        return 0;
    }
    /* The first retry after a drop is immediate; then the delay doubles. */
    int64_t next = *backoff == 0 ? w->opts.reconnect_min_ms : *backoff * 2;
    *backoff = next < w->opts.reconnect_max_ms ? next : w->opts.reconnect_max_ms;
    return 0;
}

/* Sends what reconcile appended; reads and handles what arrived. Returns -1
 * when the connection failed. */
static int pump(lb_waiter *w) {
    pthread_mutex_lock(&w->mu);
    if (w->dirty) reconcile(w);
    /* A command could not be queued: try again soon; or a lingering
     * channel's time is up then. */
    int timeout = -1;
    if (w->linger_due) {
        int64_t ms = w->linger_due - lb__mono_ms() + 1;
        timeout = ms < 0 ? 0 : ms > 3600000 ? 3600000 : (int)ms;
    }
    if (w->stuck && (timeout < 0 || timeout > 10)) timeout = 10;
    pthread_mutex_unlock(&w->mu);
    int done = 0;
    while (!done)
        if (redisBufferWrite(w->ctx, &done) != REDIS_OK) return -1;
    struct pollfd p[2] = {{w->ctx->fd, POLLIN, 0}, {w->wake[0], POLLIN, 0}};
    if (poll(p, 2, timeout) < 0) return errno == EINTR ? 0 : -1;
    if (p[1].revents) drain(w);
    if (!p[0].revents) return 0;
    if (redisBufferRead(w->ctx) != REDIS_OK) return -1;
    for (;;) {
        void *reply = NULL;
        if (redisGetReplyFromReader(w->ctx, &reply) != REDIS_OK) return -1;
        if (!reply) return 0;
        pthread_mutex_lock(&w->mu);
        lb__wchan *wake = on_reply(w, reply);
        pthread_mutex_unlock(&w->mu);
        /* Channels are destroyed by this thread alone (reconcile): `wake`
         * outlives the unlock. */
        if (wake) pthread_cond_broadcast(&wake->cond);
        freeReplyObject(reply);
    }
}

static void *run(void *arg) {
    lb_waiter *w = arg;
    int64_t backoff = 0; /* the first reconnection is tried at once */
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        if (stop) break;
        if (!w->ctx) {
            if (reconnect(w, &backoff) != 0) break;
            continue;
        }
        if (pump(w) != 0) {
            drop_connection(w);
            backoff = 0;
        }
    }
    return NULL;
}

/* ---- Public and internal calls ------------------------------------------------ */

static int valid(const lb_waiter_options *o) {
    return (o->connect || (o->port > 0 && o->port < 65536)) && (!o->username || o->password) &&
           o->connect_timeout_ms > 0 &&
           o->connect_timeout_ms <= 3600000 && o->reconnect_min_ms > 0 &&
           o->reconnect_max_ms >= o->reconnect_min_ms && o->reconnect_max_ms <= 3600000 &&
           o->linger_ms >= 0 && o->linger_ms <= 3600000 &&
           (!o->inbox_prefix || strlen(o->inbox_prefix) <= LB__INBOX_PREFIX_MAX);
}

static void free_all(lb_waiter *w) {
    for (size_t b = 0; b < NBUCKETS; b++) {
        while (w->buckets[b]) {
            lb__wchan *c = w->buckets[b];
            w->buckets[b] = c->next;
            destroy(w, c);
        }
    }
    if (w->ctx) redisFree(w->ctx);
    if (w->wake[0] >= 0) close(w->wake[0]);
    if (w->wake[1] >= 0) close(w->wake[1]);
    lb__free(w->opts.allocator, w->host);
    lb__free(w->opts.allocator, w->username);
    lb__free(w->opts.allocator, w->password);
    lb__free(w->opts.allocator, w->inbox_prefix);
    lb__free(w->opts.allocator, w);
}

/* Copies an optional string option (NULL stays NULL). */
static int copy(lb_waiter *w, const char *s, char **out) {
    *out = NULL;
    if (!s) return LB_OK;
    *out = lb__alloc(w->opts.allocator, strlen(s) + 1);
    if (!*out) return LB_ENOMEM;
    strcpy(*out, s);
    return LB_OK;
}

/* The caller's errbuf, when given: why lb_waiter_new failed. */
static int fail(const lb_waiter_options *o, int rc, const char *why) {
    if (o->errbuf && o->errbuf_size > 0) snprintf(o->errbuf, o->errbuf_size, "%s", why);
    return rc;
}

int lb_waiter_new(lb_waiter **out, const lb_waiter_options *o) {
    lb_waiter_options defaults;
    if (o && o->errbuf && o->errbuf_size > 0) o->errbuf[0] = '\0';
    if (!out) return o ? fail(o, LB_EINVAL, "invalid argument: out is NULL") : LB_EINVAL;
    *out = NULL;
    if (!o) {
        lb_waiter_options_init(&defaults);
        o = &defaults;
    }
    /* No default server: a forgotten address would watch a server the locks
     * are not on, and their releases would never be heard. */
    if (!o->connect && (!o->host || !o->host[0]))
        return fail(o, LB_EINVAL, "no server: set host and port, or connect");
    if (!valid(o)) return fail(o, LB_EINVAL, "invalid waiter options");
    lb_waiter *w = lb__alloc(o->allocator, sizeof *w);
    if (!w) return fail(o, LB_ENOMEM, "out of memory");
    memset(w, 0, sizeof *w);
    w->opts = *o;
    w->opts.errbuf = NULL; /* the caller's, for this call only */
    w->opts.errbuf_size = 0;
    w->wake[0] = w->wake[1] = -1;
    if (copy(w, o->host, &w->host) != LB_OK ||
        copy(w, o->username, &w->username) != LB_OK ||
        copy(w, o->password, &w->password) != LB_OK ||
        copy(w, o->inbox_prefix ? o->inbox_prefix : "lb-inbox:", &w->inbox_prefix) != LB_OK) {
        free_all(w);
        return fail(o, LB_ENOMEM, "out of memory");
    }
    if (pipe2(w->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        char why[LB__ERRSTR_CAP];
        snprintf(why, sizeof why, "pipe2: %s", strerror(errno));
        w->wake[0] = w->wake[1] = -1;
        free_all(w);
        return fail(o, LB_EIO, why);
    }
    char err[LB__ERRSTR_CAP] = "";
    int rc = dial(w, &w->ctx, err, sizeof err);
    if (rc != LB_OK) {
        free_all(w);
        return fail(o, rc, err[0] ? err : lb_strerror(rc));
    }
    w->connected = w->st.connected = 1;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        free_all(w);
        return fail(o, LB_ENOMEM, "cannot create the waiter's mutex");
    }
    /* The thread starts with every signal blocked: signals go to the
     * application's threads, and a write to a dead connection fails with EPIPE
     * rather than raising SIGPIPE. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int started = pthread_create(&w->thread, NULL, run, w) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!started) {
        pthread_mutex_destroy(&w->mu);
        free_all(w);
        return fail(o, LB_ENOMEM, "cannot start the waiter's thread");
    }
    *out = w;
    return LB_OK;
}

void lb_waiter_free(lb_waiter *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_mutex_unlock(&w->mu);
    poke(w);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    free_all(w);
}

int lb_waiter_stats_get(lb_waiter *w, lb_waiter_stats *out) {
    if (!out) return LB_EINVAL;
    memset(out, 0, sizeof *out);
    if (!w) return LB_EINVAL;
    pthread_mutex_lock(&w->mu);
    *out = w->st;
    out->inbox = w->inbox && w->inbox->sub == SUB_ON;
    pthread_mutex_unlock(&w->mu);
    return LB_OK;
}

void lb__waiter_peek(lb_waiter *w, const char *ch, size_t len, lb__wpeek *p) {
    memset(p, 0, sizeof *p);
    pthread_mutex_lock(&w->mu);
    lb__wchan *c = find(w, ch, len);
    if (c) {
        p->on = c->sub == SUB_ON;
        p->gen = c->gen;
        p->unclaimed = c->unclaimed;
    }
    if (w->inbox) p->inbox_unclaimed = w->inbox->unclaimed;
    pthread_mutex_unlock(&w->mu);
}

/* Whether none of the hand-offs `c` read since it stood at `since` named
 * `token`. */
static int unnamed_since(const lb__wchan *c, uint64_t since, const char *token) {
    uint64_t n = c->unclaimed - since;
    if (n > RECENT) return 0;
    for (uint64_t k = 0; k < n; k++)
        if (memcmp(c->recent[(since + k) % RECENT], token, LB_TOKEN_LEN) == 0) return 0;
    return 1;
}

/* Whether nothing a wait registering now could have missed came since `p`:
 * no release, no lost subscription, no hand-off to its token. Holds mu. */
static int quiet_since(lb_waiter *w, const lb__wchan *c, const lb__wpeek *p, const lb__wrec *rec) {
    if (!p || !p->on || c->sub != SUB_ON || c->gen != p->gen) return 0;
    if (!rec || !rec->token[0]) return 1;
    if (w->inbox && !unnamed_since(w->inbox, p->inbox_unclaimed, rec->token)) return 0;
    return unnamed_since(c, p->unclaimed, rec->token);
}

lb__wchan *lb__waiter_watch(lb_waiter *w, const char *ch, size_t len, lb__wrec *rec,
                            const lb__wpeek *since, uint64_t *gen, int *ready) {
    *gen = 0;
    *ready = LB__WATCH_DOWN;
    pthread_mutex_lock(&w->mu);
    lb__wchan *c = find(w, ch, len);
    if (!c && (c = create(w, ch, len)) != NULL) w->st.channels++;
    if (c) {
        c->refs++;
        if (rec) {
            c->fair = 1;
            rec->handed = 0;
            rec->place = rec->fence = -1;
            rec->next = c->recs;
            c->recs = rec;
        }
        *gen = c->gen;
        /* A churning channel is not subscribed again before its time: its
         * waits poll (PENDING: a polling step before the next attempt). */
        int pause = c->paused_until && !c->fair && c->paused_until > lb__mono_ms();
        *ready = quiet_since(w, c, since, rec) ? LB__WATCH_QUIET
                 : c->sub == SUB_ON         ? LB__WATCH_READY
                 : w->connected || pause    ? LB__WATCH_PENDING
                                            : LB__WATCH_DOWN;
        if (c->sub != SUB_ON && !pause) {
            w->dirty = 1;
            poke(w);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return c;
}

uint64_t lb__waiter_gen(lb_waiter *w, lb__wchan *c) {
    pthread_mutex_lock(&w->mu);
    uint64_t g = c->gen;
    pthread_mutex_unlock(&w->mu);
    return g;
}

int lb__waiter_listening(lb_waiter *w, lb__wchan *c) {
    pthread_mutex_lock(&w->mu);
    int on = c->sub == SUB_ON;
    pthread_mutex_unlock(&w->mu);
    return on;
}

int lb__waiter_wait(lb_waiter *w, lb__wchan *c, lb__wrec *rec, uint64_t *gen, int64_t ms,
                    int deaf) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (ms > 86400000) ms = 86400000; /* callers loop; keeps tv_sec in range */
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&w->mu);
    w->st.blocked++;
    if (ms > 0) w->st.sleeps++;
    int rc = LB__WAKE_TIMEOUT;
    for (;;) {
        if (rec && rec->handed) {
            rec->handed = 0;
            rec->got_place = rec->place;
            rec->got_fence = rec->fence;
            rc = LB__WAKE_HANDED;
            break;
        }
        if (c->gen != *gen && !deaf) {
            rc = c->release_gen > *gen ? LB__WAKE_RELEASE : LB__WAKE_EVENT;
            break;
        }
        if (pthread_cond_timedwait(&c->cond, &w->mu, &until) == ETIMEDOUT) break;
    }
    *gen = c->gen;
    w->st.blocked--;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void lb__waiter_unwatch(lb_waiter *w, lb__wchan *c, lb__wrec *rec) {
    pthread_mutex_lock(&w->mu);
    if (rec) {
        for (lb__wrec **pp = &c->recs; *pp; pp = &(*pp)->next) {
            if (*pp == rec) {
                *pp = rec->next;
                break;
            }
        }
    }
    if (--c->refs == 0) {
        c->idle_ms = lb__mono_ms();
        w->dirty = 1;
        /* A thread already due to wake for a lingering channel sees this one
         * then; sparing the wake-up matters to a client that waits often. */
        if (!w->linger_due || w->opts.linger_ms == 0) poke(w);
    }
    pthread_mutex_unlock(&w->mu);
}

/* The inbox is named at its creation: the prefix and a random token, so that
 * no two waiters share one. */
size_t lb__waiter_inbox(lb_waiter *w, const char **name) {
    *name = NULL;
    pthread_mutex_lock(&w->mu);
    if (!w->inbox) {
        char buf[LB__INBOX_PREFIX_MAX + LB__TOKEN_CAP];
        size_t n = strlen(w->inbox_prefix);
        memcpy(buf, w->inbox_prefix, n);
        if (lb__token(buf + n) == LB_OK && (w->inbox = create(w, buf, strlen(buf))) != NULL) {
            w->inbox->inbox = 1;
            w->inbox->refs = 1;
            w->dirty = 1;
            poke(w);
        }
    }
    size_t len = 0;
    if (w->inbox && w->inbox->sub == SUB_ON) {
        *name = w->inbox->name;
        len = w->inbox->len;
    }
    pthread_mutex_unlock(&w->mu);
    return len;
}
