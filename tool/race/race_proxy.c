/* `lockbridge race`: the RESP proxy in front of Redis that lets each client's
 * lock-key commands through only when the schedule says so, and the checks it
 * makes from what it sees on the wire. Single-threaded, poll()-driven. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool/common/loopback.h"
#include "tool/race/race.h"

/* Every size a client or the server controls is bounded: a client may not have
 * more than IN_MAX bytes unparsed (one command included) nor more than OUT_MAX
 * bytes of commands held back, and no side more than OUT_MAX bytes queued
 * towards it; past these the proxy stops reading from that side. A command
 * longer than IN_MAX, or a reply longer than OUT_MAX, closes the connection. */
#define IN_MAX (1 << 20)
#define OUT_MAX (8 << 20)
#define ARGS_MAX 100000 /* arguments of one command */
#define ARGS_KEPT 16    /* the first arguments, which the checks read */
#define DEPTH_MAX 8     /* nesting of a server reply */
#define MAX_CONNS 64
#define TRACE_MAX 32768
#define FINISH_STEPS 16
#define READ_CHUNK 16384

typedef struct buf {
    char *d;
    size_t len, cap;
} buf;

typedef struct cmd {
    struct cmd *next;
    char *raw;
    size_t rawlen;
    char name[24];   /* upper case */
    char shown[200]; /* for the trace */
    int lock;        /* on the lock key */
    int counter;     /* GET or SET of the counter key */
    char *val;       /* the value a write writes (its second argument) */
    size_t vallen;
    int nx;          /* SET ... NX */
    int get;         /* SET ... GET: the old value comes back, nil when none */
    int granted;     /* the schedule let it through */
    unsigned long seq;
    double at;       /* when the proxy read it, ms */
} cmd;

typedef struct conn {
    int cfd, ufd, client;
    int uport; /* the local port of its server connection, as CLIENT LIST shows it */
    buf in, out, up, rep;
    cmd *pend, *pend_tail, *fly, *fly_tail;
    size_t pend_bytes; /* bytes of the commands held back in pend */
    char lastget[LB_OBSERVED_MAX];
    size_t lastgetlen;
    int lastget_kind; /* 0 none, 1 a value, 2 nil */
} conn;

/* What the proxy saw of a client that did not follow: the cause it names. */
typedef struct sighting {
    int conns;            /* connections accepted */
    long cmds, lock_cmds; /* commands read, and those on the lock key */
    char last_other[200]; /* the last command on another key (as cmd.shown) */
    char closed_held[24]; /* a connection closed with this lock command held */
    double held_ms;       /* how long it had been held */
    int exited, status;   /* the process ended, and its wait status */
} sighting;

typedef struct rclient {
    int listen_fd, port;
    pid_t pid;
    char errpath[300]; /* its stderr; "" none */
    int frozen;
    int holds;
    int crashed_holding; /* frozen while it held: its lock lives out its validity */
    double acq_reply_at; /* when its acquisition's reply came: the latest its validity starts */
    double acq_at, last_rx;
    sighting seen;
    /* Critical sections are the client's, on whichever of its connections they
     * run (a pool): once it has sent a lock-key command, its counter GET
     * starts one and its SET ends it. */
    int touched, in_cs;
    unsigned long cs_version;
} rclient;

struct lb__race_proxy {
    lb__race_config cfg;
    rclient cl[LB__RACE_MAX_CLIENTS];
    conn *conns[MAX_CONNS];
    int owner; /* the client whose value the key holds; -1 none or unknown */
    char keyval[LB_OBSERVED_MAX];
    size_t keyvallen;
    unsigned long counter_version, seq, await_seq;
    int await_state; /* 0 waiting, 1 reply delivered, -1 connection lost */
    char trace[TRACE_MAX];
    size_t tracelen;
    char detail[1024], kind[32];
    int violated, followed, failed;
    int resetting; /* connections closed by the tool, not by their clients */
    int sections;  /* critical sections seen in this schedule */
    char last_granted[24]; /* the name of the last lock-key command let through */
    char named[LB__RACE_MAX_TOKENS][24]; /* per token: the last command it let through */
};

/* ---- Small helpers ------------------------------------------------------------------ */

static double now_ms(void) { return lb__cli_mono_ms(); }

static int buf_add(buf *b, const char *d, size_t n, size_t max) {
    if (b->len + n > max) return -1;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        char *nd = realloc(b->d, cap);
        if (!nd) return -1;
        b->d = nd;
        b->cap = cap;
    }
    memcpy(b->d + b->len, d, n);
    b->len += n;
    return 0;
}

static void buf_drop(buf *b, size_t n) {
    memmove(b->d, b->d + n, b->len - n);
    b->len -= n;
}

static void trace_add(lb__race_proxy *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void trace_add(lb__race_proxy *p, const char *fmt, ...) {
    if (p->tracelen + 8 >= sizeof p->trace) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(p->trace + p->tracelen, sizeof p->trace - p->tracelen - 4, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    p->tracelen += (size_t)n;
    if (p->tracelen >= sizeof p->trace - 5) {
        p->tracelen = sizeof p->trace - 5;
        strcpy(p->trace + p->tracelen, "...\n");
        p->tracelen += 4;
    }
}

static void violate(lb__race_proxy *p, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void violate(lb__race_proxy *p, const char *kind, const char *fmt, ...) {
    if (p->violated) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->detail, sizeof p->detail, fmt, ap);
    va_end(ap);
    snprintf(p->kind, sizeof p->kind, "%s", kind);
    p->violated = 1;
    trace_add(p, "  VIOLATION (%s): %s\n", kind, p->detail);
}

static char name_of(int client) { return (char)('A' + client); }

/* The run itself failed (the server lost, a signal): the schedule ends as an
 * error, whatever the clients did. The first reason is kept. */
static void fail(lb__race_proxy *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(lb__race_proxy *p, const char *fmt, ...) {
    if (p->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->detail, sizeof p->detail, fmt, ap);
    va_end(ap);
    snprintf(p->kind, sizeof p->kind, "error");
    p->failed = 1;
    trace_add(p, "  ERROR: %s\n", p->detail);
}

/* ---- RESP framing --------------------------------------------------------------------
 * Requests are arrays of bulk strings (what every client library sends); a
 * reply is any RESP2 or RESP3 value. Both parsers only find where a complete
 * message ends and never trust a length beyond the bytes they hold. Each
 * returns 1 complete (*pos past it), 0 incomplete, -1 malformed. */

static int read_line(const char *d, size_t len, size_t *pos, size_t *start, size_t *end) {
    const char *nl = memchr(d + *pos, '\n', len - *pos);
    if (!nl) return 0;
    size_t e = (size_t)(nl - d);
    if (e == *pos || d[e - 1] != '\r') return -1;
    *start = *pos;
    *end = e - 1;
    *pos = e + 1;
    return 1;
}

static int read_number(const char *d, size_t len, size_t *pos, int64_t *n) {
    size_t s, e;
    if (len - *pos > 0 && !memchr(d + *pos, '\n', len - *pos < 24 ? len - *pos : 24))
        return len - *pos >= 24 ? -1 : 0;
    int rc = read_line(d, len, pos, &s, &e);
    if (rc <= 0) return rc;
    return lb__cli_parse_i64(d + s + 1, e - s - 1, n) == 0 ? 1 : -1;
}

/* A bulk payload of n bytes and its CRLF at *pos. */
static int skip_payload(const char *d, size_t len, size_t *pos, int64_t n) {
    if (n < 0 || (uint64_t)n > OUT_MAX) return -1;
    if (len - *pos < (size_t)n + 2) return 0;
    if (d[*pos + (size_t)n] != '\r' || d[*pos + (size_t)n + 1] != '\n') return -1;
    *pos += (size_t)n + 2;
    return 1;
}

typedef struct req {
    int argc;
    size_t off[ARGS_KEPT], len[ARGS_KEPT];
} req;

static int parse_request(const char *d, size_t len, size_t *used, req *r) {
    size_t pos = 0;
    int64_t n, blen;
    if (len == 0) return 0;
    if (d[0] != '*') return -1;
    int rc = read_number(d, len, &pos, &n);
    if (rc <= 0) return rc;
    if (n < 1 || n > ARGS_MAX) return -1;
    r->argc = (int)n;
    for (int64_t i = 0; i < n; i++) {
        if (pos >= len) return 0;
        if (d[pos] != '$') return -1;
        rc = read_number(d, len, &pos, &blen);
        if (rc <= 0) return rc;
        if (blen < 0 || blen > IN_MAX) return -1;
        if (i < ARGS_KEPT) {
            r->off[i] = pos;
            r->len[i] = (size_t)blen;
        }
        rc = skip_payload(d, len, &pos, blen);
        if (rc <= 0) return rc;
    }
    *used = pos;
    return 1;
}

static int reply_span(const char *d, size_t len, size_t *pos, int depth) {
    int64_t n;
    size_t s, e;
    if (*pos >= len) return 0;
    if (depth > DEPTH_MAX) return -1;
    char t = d[*pos];
    switch (t) {
    case '+': case '-': case ':': case ',': case '#': case '(': case '_':
        return read_line(d, len, pos, &s, &e);
    case '$': case '=': case '!': {
        int rc = read_number(d, len, pos, &n);
        if (rc <= 0 || n == -1) return rc;
        return skip_payload(d, len, pos, n);
    }
    case '*': case '~': case '>': case '%': {
        int rc = read_number(d, len, pos, &n);
        if (rc <= 0 || n == -1) return rc;
        if (n < -1 || n > ARGS_MAX) return -1;
        if (t == '%') n *= 2;
        for (int64_t i = 0; i < n; i++) {
            rc = reply_span(d, len, pos, depth + 1);
            if (rc <= 0) return rc;
        }
        return 1;
    }
    default: return -1;
    }
}

/* ---- Commands --------------------------------------------------------------------------- */

static int arg_is(const char *d, const req *r, int i, const char *s) {
    return i < r->argc && i < ARGS_KEPT && r->len[i] == strlen(s) &&
           memcmp(d + r->off[i], s, r->len[i]) == 0;
}

static int arg_is_ci(const char *d, const req *r, int i, const char *s) {
    return i < r->argc && i < ARGS_KEPT && r->len[i] == strlen(s) &&
           strncasecmp(d + r->off[i], s, r->len[i]) == 0;
}

/* Scripts name their keys after the key count; every other command the lockers
 * send names its key first. */
static int names_key(const char *d, const req *r, const cmd *m, const char *key) {
    if (strcmp(m->name, "EVAL") == 0 || strcmp(m->name, "EVALSHA") == 0 ||
        strcmp(m->name, "FCALL") == 0) {
        int64_t nk = 0;
        if (r->argc < 3 || lb__cli_parse_i64(d + r->off[2], r->len[2], &nk) != 0) return 0;
        for (int64_t i = 0; i < nk && 3 + i < ARGS_KEPT; i++)
            if (arg_is(d, r, (int)(3 + i), key)) return 1;
        return 0;
    }
    return arg_is(d, r, 1, key);
}

static void describe(cmd *m, const char *d, const req *r) {
    size_t o = 0;
    for (int i = 0; i < r->argc && i < 4 && o + 80 < sizeof m->shown; i++) {
        size_t n = r->len[i] > 48 ? 48 : r->len[i];
        if (i) m->shown[o++] = ' ';
        lb__escape(m->shown + o, sizeof m->shown - o - 8, d + r->off[i], n);
        o += strlen(m->shown + o);
        if (n < r->len[i]) o += (size_t)snprintf(m->shown + o, sizeof m->shown - o, "...");
    }
    if (r->argc > 4) snprintf(m->shown + o, sizeof m->shown - o, " ...");
}

static cmd *cmd_new(const lb__race_proxy *p, const char *d, size_t used, const req *r) {
    cmd *m = calloc(1, sizeof *m);
    if (!m || !(m->raw = malloc(used))) return free(m), NULL;
    memcpy(m->raw, d, used);
    m->rawlen = used;
    size_t nl = r->len[0] < sizeof m->name - 1 ? r->len[0] : sizeof m->name - 1;
    for (size_t i = 0; i < nl; i++) {
        char c = d[r->off[0] + i];
        m->name[i] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
    }
    describe(m, d, r);
    m->lock = names_key(d, r, m, p->cfg.key);
    m->counter = p->cfg.counter_key && arg_is(d, r, 1, p->cfg.counter_key) &&
                 (strcmp(m->name, "GET") == 0 || strcmp(m->name, "SET") == 0);
    if (r->argc >= 3 && r->len[2] < LB_OBSERVED_MAX && (m->val = malloc(r->len[2] + 1))) {
        memcpy(m->val, d + r->off[2], r->len[2]);
        m->vallen = r->len[2];
    }
    for (int i = 3; i < r->argc && i < ARGS_KEPT; i++)
        if (arg_is_ci(d, r, i, "NX")) m->nx = 1;
        else if (arg_is_ci(d, r, i, "GET")) m->get = 1;
    return m;
}

static void cmd_free(cmd *m) {
    if (!m) return;
    free(m->raw);
    free(m->val);
    free(m);
}

static void push(cmd **head, cmd **tail, cmd *m) {
    m->next = NULL;
    if (*tail) (*tail)->next = m;
    else *head = m;
    *tail = m;
}

static cmd *pop(cmd **head, cmd **tail) {
    cmd *m = *head;
    if (m) {
        *head = m->next;
        if (!*head) *tail = NULL;
    }
    return m;
}

/* ---- The checks ------------------------------------------------------------------------- */

static int holds_validly(const lb__race_proxy *p, int i) {
    const rclient *c = &p->cl[i];
    int64_t ttl = p->cfg.client_ttl_ms[i] > 0 ? p->cfg.client_ttl_ms[i] : p->cfg.ttl_ms;
    if (!c->holds || c->frozen) return 0;
    return ttl <= 0 || now_ms() - c->acq_at < (double)ttl;
}

/* `sent`: when the proxy read the acquiring command. The search counts a hold
 * from then, since a client computes the expiry it writes before it sends. */
static void acquire(lb__race_proxy *p, int x, const char *how, double sent) {
    if (p->cl[x].holds) return;
    for (int y = 0; y < p->cfg.nclients; y++)
        if (y != x && holds_validly(p, y))
            violate(p, "exclusion", "%c acquired (%s) while %c holds the lock", name_of(x), how,
                    name_of(y));
    p->cl[x].holds = 1;
    p->cl[x].acq_at = p->cfg.search ? sent : now_ms();
    p->cl[x].acq_reply_at = now_ms();
    trace_add(p, "  %c acquired (%s)\n", name_of(x), how);
}

/* A replacement with a later (or equal) expiry cannot give a double grant: the
 * legacy protocol's GETSET loser does it by design. Counted apart, as the
 * explorer counts it. Anything else over a live holder's value is a violation. */
static void write_key(lb__race_proxy *p, int x, const cmd *m) {
    int y = p->owner;
    if (y >= 0 && y != x && holds_validly(p, y)) {
        double was, now;
        if (m->val && lb__race_value_expiry(p->keyval, p->keyvallen, &was) == 0 &&
            lb__race_value_expiry(m->val, m->vallen, &now) == 0 && now >= was)
            trace_add(p,
                      "  note: %c replaced %c's value with an equal or later expiry "
                      "(not a double grant)\n",
                      name_of(x), name_of(y));
        else
            violate(p, "overwritten", "%c overwrote %c's lock while %c holds it (%s)", name_of(x),
                    name_of(y), name_of(y), m->name);
    }
    p->owner = m->val ? x : -1;
    p->keyvallen = m->val ? m->vallen : 0;
    if (m->val) memcpy(p->keyval, m->val, m->vallen);
}

static void delete_key(lb__race_proxy *p, int x, const cmd *m) {
    int y = p->owner;
    if (y >= 0 && y != x && holds_validly(p, y))
        violate(p, "deleted", "%c deleted %c's lock while %c holds it (%s)", name_of(x),
                name_of(y), name_of(y), m->name);
    p->owner = -1;
}

/* The top-level reply: its type byte and, for a bulk string, its payload. */
static int reply_is(const char *r, size_t n, const char *s) {
    return n >= strlen(s) && memcmp(r, s, strlen(s)) == 0;
}

static int reply_nil(const char *r, size_t n) {
    return reply_is(r, n, "$-1\r") || reply_is(r, n, "_\r");
}

static int reply_bulk(const char *r, size_t n, const char **v, size_t *vlen) {
    if (n < 4 || r[0] != '$' || r[1] == '-') return -1;
    const char *nl = memchr(r, '\n', n);
    if (!nl) return -1;
    *v = nl + 1;
    *vlen = n - (size_t)(nl + 1 - r) - 2;
    return 0;
}

/* A reply as the trace shows it: a bulk string's bytes, nil, or the first line. */
static void render_reply(const char *r, size_t n, char *out, size_t cap) {
    const char *v;
    size_t vlen;
    if (reply_bulk(r, n, &v, &vlen) == 0) {
        char tmp[80];
        lb__escape(tmp, sizeof tmp, v, vlen > 60 ? 60 : vlen);
        snprintf(out, cap, "\"%s\"%s", tmp, vlen > 60 ? "..." : "");
        return;
    }
    if (reply_is(r, n, "$-1\r") || reply_is(r, n, "_\r") || reply_is(r, n, "*-1\r")) {
        snprintf(out, cap, "nil");
        return;
    }
    const char *nl = memchr(r, '\r', n);
    size_t len = nl ? (size_t)(nl - r) : n;
    lb__escape(out, cap, r, len > 60 ? 60 : len);
}

/* A takeover that writes an expiry no later than the expired one it replaced
 * writes one already past, by the taker's own judgement that the old one had
 * passed: a lock anyone may take at once. Judged from the two values alone, so
 * that no client's clock or unit (L3 counts from a clock of its own) is
 * guessed. */
static void past_expiry(lb__race_proxy *p, int x, const cmd *m, const char *old, size_t oldlen) {
    double now, was;
    if (!m->val || lb__race_value_expiry(m->val, m->vallen, &now) != 0 ||
        lb__race_value_expiry(old, oldlen, &was) != 0 || now > was)
        return;
    violate(p, "expired-write",
            "%c took the lock over writing an expiry no later than the expired one it replaced "
            "(%s): already past, anyone may take it at once",
            name_of(x), m->shown);
}

static void on_lock_reply(lb__race_proxy *p, conn *c, const cmd *m, const char *r, size_t n) {
    int x = c->client;
    const char *v = NULL;
    size_t vlen = 0;
    int is_bulk = reply_bulk(r, n, &v, &vlen) == 0;
    if (strcmp(m->name, "SETNX") == 0 && reply_is(r, n, ":1\r")) {
        write_key(p, x, m);
        acquire(p, x, "SETNX replied 1", m->at);
    } else if (strcmp(m->name, "SET") == 0 && !m->get && reply_is(r, n, "+OK\r")) {
        write_key(p, x, m);
        if (m->nx) acquire(p, x, "SET NX replied OK", m->at);
    } else if (strcmp(m->name, "SET") == 0 && m->get && m->nx && reply_nil(r, n)) {
        /* SET NX GET: nil is the absent old value, so our value was written. */
        write_key(p, x, m);
        acquire(p, x, "SET NX GET replied nil", m->at);
    } else if (strcmp(m->name, "SET") == 0 && m->get && !m->nx && r[0] != '-') {
        write_key(p, x, m);
    } else if (strcmp(m->name, "GETSET") == 0 && (r[0] == '$' || r[0] == '_')) {
        write_key(p, x, m);
        if (is_bulk && c->lastget_kind == 1 && vlen == c->lastgetlen &&
            memcmp(v, c->lastget, vlen) == 0) {
            acquire(p, x, "GETSET returned the value its GET saw", m->at);
            past_expiry(p, x, m, v, vlen);
        }
    } else if ((strcmp(m->name, "DEL") == 0 || strcmp(m->name, "UNLINK") == 0) &&
               reply_is(r, n, ":1\r")) {
        delete_key(p, x, m);
    } else if (strcmp(m->name, "GET") == 0) {
        c->lastget_kind = is_bulk && vlen < sizeof c->lastget ? 1 : 2;
        c->lastgetlen = c->lastget_kind == 1 ? vlen : 0;
        if (c->lastget_kind == 1) memcpy(c->lastget, v, vlen);
    } else if (strcmp(m->name, "INCR") == 0 && reply_is(r, n, ":1\r")) {
        p->owner = x;
        p->keyvallen = 0;
        acquire(p, x, "INCR replied 1", m->at);
    } else if (strncmp(m->name, "EVAL", 4) == 0 || strcmp(m->name, "FCALL") == 0) {
        p->owner = -1; /* what a script wrote is not on the wire */
    }
}

/* A counter GET by a client that has used the lock (on any of its
 * connections) starts a critical section; its SET ends it. */
static void on_counter_send(lb__race_proxy *p, conn *c, const cmd *m) {
    int x = c->client;
    if (strcmp(m->name, "GET") != 0 || !p->cl[x].touched) return;
    for (int y = 0; y < p->cfg.nclients; y++)
        if (y != x && p->cl[y].in_cs && !p->cl[y].frozen)
            violate(p, "overlap", "%c entered its critical section while %c is inside its own",
                    name_of(x), name_of(y));
    p->cl[x].in_cs = 1;
    p->sections++;
    acquire(p, x, "entered its critical section", m->at);
}

static void on_counter_reply(lb__race_proxy *p, conn *c, const cmd *m) {
    rclient *cl = &p->cl[c->client];
    if (!cl->touched) return;
    if (strcmp(m->name, "GET") == 0) {
        cl->cs_version = p->counter_version;
        return;
    }
    if (cl->in_cs && cl->cs_version != p->counter_version)
        violate(p, "lost-update", "%c's SET of the counter overwrote an update it had not read",
                name_of(c->client));
    p->counter_version++;
    cl->in_cs = 0;
}

/* ---- Connections ------------------------------------------------------------------------ */

/* A connection closed by its client with a lock command still held, or
 * granted and not yet answered: most often a read timeout shorter than the
 * schedule's waits. */
static void note_held(lb__race_proxy *p, const conn *c) {
    const cmd *held = NULL;
    for (const cmd *m = c->fly; m && !held; m = m->next)
        if (m->lock) held = m;
    for (const cmd *m = c->pend; m && !held; m = m->next)
        if (m->lock) held = m;
    sighting *s = &p->cl[c->client].seen;
    if (!held || p->resetting || p->cl[c->client].frozen) return;
    snprintf(s->closed_held, sizeof s->closed_held, "%s", held->name);
    s->held_ms = now_ms() - held->at;
    trace_add(p, "  %c's connection closed with its %s held for %.0f ms\n", name_of(c->client),
              held->name, s->held_ms);
}

static void conn_close(lb__race_proxy *p, int idx) {
    conn *c = p->conns[idx];
    if (!c) return;
    note_held(p, c);
    for (int q = 0; q < 2; q++) {
        cmd **h = q ? &c->fly : &c->pend;
        while (*h) {
            cmd *m = *h;
            *h = m->next;
            if (m->seq == p->await_seq && p->await_state == 0) p->await_state = -1;
            cmd_free(m);
        }
    }
    if (c->cfd >= 0) close(c->cfd);
    if (c->ufd >= 0) close(c->ufd);
    free(c->in.d);
    free(c->out.d);
    free(c->up.d);
    free(c->rep.d);
    free(c);
    p->conns[idx] = NULL;
}

static void set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* The server side of a new client connection: connected, authenticated and
 * with the database selected as the command line says, then handed over. */
static int upstream(const lb__race_proxy *p) {
    char err[256];
    redisContext *rc = lb__cli_connect(p->cfg.upstream, err, sizeof err);
    if (!rc) return -1;
    int fd = redisFreeKeepFd(rc);
    if (fd >= 0) set_nonblock(fd);
    return fd;
}

static void accept_conn(lb__race_proxy *p, int client) {
    int fd = accept(p->cl[client].listen_fd, NULL, NULL);
    if (fd < 0) return;
    int slot = -1;
    for (int i = 0; i < MAX_CONNS && slot < 0; i++)
        if (!p->conns[i]) slot = i;
    int ufd = slot >= 0 ? upstream(p) : -1;
    conn *c = ufd >= 0 ? calloc(1, sizeof *c) : NULL;
    if (slot >= 0 && ufd < 0)
        fail(p, "the Redis server cannot be reached (for %c's new connection)", name_of(client));
    if (!c) {
        trace_add(p, "  %c: connection refused (no slot, or the server is unreachable)\n",
                  name_of(client));
        if (ufd >= 0) close(ufd);
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblock(fd);
    c->cfd = fd;
    c->ufd = ufd;
    struct sockaddr_in la;
    socklen_t lalen = sizeof la;
    if (getsockname(ufd, (struct sockaddr *)&la, &lalen) == 0 && la.sin_family == AF_INET)
        c->uport = ntohs(la.sin_port);
    c->client = client;
    p->conns[slot] = c;
    p->cl[client].last_rx = now_ms();
    p->cl[client].seen.conns++;
}

static int ttl_command(const char *name) {
    static const char *const ttl[] = {"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "TTL",
                                      "PTTL", NULL};
    for (int i = 0; ttl[i]; i++)
        if (strcmp(name, ttl[i]) == 0) return 1;
    return 0;
}

static void forward(lb__race_proxy *p, conn *c, cmd *m) {
    int x = c->client;
    c->pend_bytes -= m->rawlen;
    if (buf_add(&c->up, m->raw, m->rawlen, OUT_MAX) != 0) {
        p->failed = 1;
        return;
    }
    if (m->lock) {
        trace_add(p, "  %c -> %s\n", name_of(x), m->shown);
        /* A holder's next command on the lock starts its release, unless it
         * only sets or reads the key's TTL (an INCR locker's EXPIRE, a renewal). */
        if (p->cl[x].holds && !ttl_command(m->name)) p->cl[x].holds = 0;
        p->cl[x].touched = 1;
    } else if (m->counter && p->cl[x].touched) {
        trace_add(p, "  %c -> %s\n", name_of(x), m->shown);
        on_counter_send(p, c, m);
    }
    push(&c->fly, &c->fly_tail, m);
}

/* Sends what may go: everything up to the first lock-key command the schedule
 * has not granted. A crashed client sends nothing more. */
static void advance(lb__race_proxy *p, conn *c) {
    while (c->pend && !p->cl[c->client].frozen && (!c->pend->lock || c->pend->granted))
        forward(p, c, pop(&c->pend, &c->pend_tail));
}

static int take_requests(lb__race_proxy *p, conn *c) {
    for (;;) {
        req r;
        size_t used = 0;
        int rc = parse_request(c->in.d, c->in.len, &used, &r);
        if (rc == 0) return c->in.len >= IN_MAX ? -1 : 0;
        if (rc < 0) return -1;
        cmd *m = cmd_new(p, c->in.d, used, &r);
        if (!m) return -1;
        m->seq = ++p->seq;
        m->at = now_ms();
        sighting *s = &p->cl[c->client].seen;
        s->cmds++;
        if (m->lock) s->lock_cmds++;
        else snprintf(s->last_other, sizeof s->last_other, "%s", m->shown);
        c->pend_bytes += m->rawlen;
        push(&c->pend, &c->pend_tail, m);
        buf_drop(&c->in, used);
    }
}

static void take_replies(lb__race_proxy *p, conn *c) {
    for (;;) {
        size_t pos = 0;
        int rc = reply_span(c->rep.d, c->rep.len, &pos, 0);
        if (rc == 0) return;
        cmd *m = rc > 0 ? pop(&c->fly, &c->fly_tail) : NULL;
        if (!m) { /* malformed, or a reply nobody asked for */
            p->failed = 1;
            return;
        }
        if (buf_add(&c->out, c->rep.d, pos, 2 * OUT_MAX) != 0) p->failed = 1;
        int touched = p->cl[c->client].touched;
        if (m->lock || (m->counter && touched)) {
            char shown[120];
            render_reply(c->rep.d, pos, shown, sizeof shown);
            trace_add(p, "  %c <- %s\n", name_of(c->client), shown);
        }
        if (m->lock) on_lock_reply(p, c, m, c->rep.d, pos);
        if (m->counter && touched) on_counter_reply(p, c, m);
        p->cl[c->client].last_rx = now_ms();
        if (m->seq == p->await_seq) p->await_state = 1;
        buf_drop(&c->rep, pos);
        cmd_free(m);
    }
}

/* Reads what is there; 0 on EOF or error. */
static int read_into(int fd, buf *b, size_t max) {
    char tmp[READ_CHUNK];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n == 0) return 0;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    return buf_add(b, tmp, (size_t)n, max) == 0;
}

static int write_from(int fd, buf *b) {
    if (b->len == 0) return 1;
    ssize_t n = write(fd, b->d, b->len);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    buf_drop(b, (size_t)n);
    return 1;
}

/* A client that said QUIT is the one server close that is no failure. */
static int sent_quit(const conn *c) {
    for (const cmd *m = c->fly; m; m = m->next)
        if (strcmp(m->name, "QUIT") == 0) return 1;
    return 0;
}

static int conn_events(lb__race_proxy *p, conn *c, short cev, short uev) {
    rclient *cl = &p->cl[c->client];
    if (cev & (POLLIN | POLLHUP | POLLERR)) {
        if (!read_into(c->cfd, &c->in, IN_MAX + READ_CHUNK)) return -1;
        cl->last_rx = now_ms();
        if (take_requests(p, c) != 0) {
            trace_add(p, "  %c: malformed or oversized request; connection closed\n",
                      name_of(c->client));
            return -1;
        }
    }
    if (uev & (POLLIN | POLLHUP | POLLERR)) {
        if (!read_into(c->ufd, &c->rep, OUT_MAX + READ_CHUNK)) {
            take_replies(p, c);
            if (!sent_quit(c))
                fail(p, "the Redis server closed %c's connection", name_of(c->client));
            return -1;
        }
        take_replies(p, c);
    }
    advance(p, c);
    if (!cl->frozen && !write_from(c->cfd, &c->out)) return -1;
    if (!write_from(c->ufd, &c->up)) return -1;
    return 0;
}

/* One round of the loop: waits up to `ms` for any socket. */
static void poll_once(lb__race_proxy *p, int ms) {
    struct pollfd fds[LB__RACE_MAX_CLIENTS + 2 * MAX_CONNS];
    int n = 0, lfirst = 0;
    /* What a grant let through goes out now, not after the next wake-up. */
    for (int i = 0; i < MAX_CONNS; i++)
        if (p->conns[i]) advance(p, p->conns[i]);
    for (int i = 0; i < p->cfg.nclients; i++) {
        fds[n].fd = p->cl[i].frozen ? -1 : p->cl[i].listen_fd;
        fds[n++].events = POLLIN;
    }
    int cfirst = n;
    for (int i = 0; i < MAX_CONNS; i++) {
        conn *c = p->conns[i];
        int frozen = c && p->cl[c->client].frozen;
        fds[n].fd = c && !frozen ? c->cfd : -1;
        int take = c && c->in.len < IN_MAX && c->pend_bytes < OUT_MAX;
        int hear = c && c->out.len < OUT_MAX && c->rep.len < OUT_MAX;
        fds[n].events = (short)((take ? POLLIN : 0) | (c && c->out.len ? POLLOUT : 0));
        fds[n + 1].fd = c ? c->ufd : -1;
        fds[n + 1].events = (short)((hear ? POLLIN : 0) | (c && c->up.len ? POLLOUT : 0));
        fds[n].revents = fds[n + 1].revents = 0;
        n += 2;
    }
    if (poll(fds, (nfds_t)n, ms) <= 0) return;
    for (int i = 0; i < p->cfg.nclients; i++)
        if (fds[lfirst + i].revents & POLLIN) accept_conn(p, i);
    for (int i = 0; i < MAX_CONNS; i++) {
        conn *c = p->conns[i];
        if (!c || fds[cfirst + 2 * i].fd != (p->cl[c->client].frozen ? -1 : c->cfd)) continue;
        if (conn_events(p, c, fds[cfirst + 2 * i].revents, fds[cfirst + 2 * i + 1].revents) != 0)
            conn_close(p, i);
    }
}

/* Runs the loop until `done` says so or the deadline passes; 1 if done. */
typedef int (*until_fn)(lb__race_proxy *p, int client);
static int pump(lb__race_proxy *p, double deadline, until_fn done, int client) {
    for (;;) {
        if (lb__race_stop_signal)
            fail(p, "the run was stopped by signal %d", (int)lb__race_stop_signal);
        if (done && done(p, client)) return 1;
        if (p->failed) return 0;
        double left = deadline - now_ms();
        if (left <= 0) return 0;
        poll_once(p, left > 20 ? 20 : (int)left + 1);
    }
}

/* ---- The schedule ---------------------------------------------------------------------- */

static cmd *pending_lock(const lb__race_proxy *p, int x, conn **where) {
    cmd *best = NULL;
    for (int i = 0; i < MAX_CONNS; i++) {
        conn *c = p->conns[i];
        if (!c || c->client != x || !c->pend || !c->pend->lock || c->pend->granted) continue;
        if (!best || c->pend->seq < best->seq) {
            best = c->pend;
            if (where) *where = c;
        }
    }
    return best;
}

static int has_pending(lb__race_proxy *p, int x) { return pending_lock(p, x, NULL) != NULL; }
static int reply_done(lb__race_proxy *p, int x) { (void)x; return p->await_state != 0; }

static int in_flight(const lb__race_proxy *p, int x) {
    for (int i = 0; i < MAX_CONNS; i++)
        if (p->conns[i] && p->conns[i]->client == x && p->conns[i]->fly) return 1;
    return 0;
}

/* A step ends when the client waits on its next lock-key command, or has been
 * quiet (nothing sent, nothing awaited) for the settle time. */
static int settled(lb__race_proxy *p, int x) {
    if (p->cl[x].frozen || has_pending(p, x)) return 1;
    return !in_flight(p, x) && now_ms() - p->cl[x].last_rx >= (double)p->cfg.settle_ms;
}

static lb__race_verdict not_followed(lb__race_proxy *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static lb__race_verdict not_followed(lb__race_proxy *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->detail, sizeof p->detail, fmt, ap);
    va_end(ap);
    snprintf(p->kind, sizeof p->kind, "not-followed");
    trace_add(p, "  NOT FOLLOWED: %s\n", p->detail);
    return LB__RACE_NOT_FOLLOWED;
}

/* Whether a command the client sent is the one the schedule names: the name,
 * case aside; a script's name (lower case in the catalogue) or EVAL stands
 * for any script call, since a script's name is not on the wire. */
static int name_matches(const cmd *m, const char *want) {
    if (!want[0]) return 1;
    int script = strncmp(m->name, "EVAL", 4) == 0 || strcmp(m->name, "FCALL") == 0;
    if (script && (strcmp(want, "EVAL") == 0 || (want[0] >= 'a' && want[0] <= 'z'))) return 1;
    return strcasecmp(m->name, want) == 0;
}

/* Whether client x's process has ended (reaped here; its wait status kept). */
static int exited(lb__race_proxy *p, int x) {
    rclient *c = &p->cl[x];
    int st;
    if (!c->seen.exited && c->pid > 0 && waitpid(c->pid, &st, WNOHANG) == c->pid) {
        c->seen.exited = 1;
        c->seen.status = st;
    }
    return c->seen.exited;
}

static int has_pending_or_exited(lb__race_proxy *p, int x) {
    return has_pending(p, x) || exited(p, x);
}

/* The server's connections that are not the proxy's nor the tool's (named
 * "lockbridge-race"): a client given the server's port instead of its own. */
static int strays(const lb__race_proxy *p, char *last, size_t cap) {
    char err[256];
    int n = 0;
    last[0] = '\0';
    redisContext *rc = lb__cli_connect(p->cfg.upstream, err, sizeof err);
    redisReply *r = rc ? redisCommand(rc, "CLIENT LIST") : NULL;
    char *save = NULL, *text = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
    for (char *l = text ? strtok_r(text, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        const char *addr = strstr(l, " addr=127.0.0.1:"), *cmdf = strstr(l, " cmd=");
        int port = addr ? atoi(addr + 16) : 0, ours = strstr(l, " name=lockbridge-race") != NULL;
        for (int i = 0; i < MAX_CONNS && !ours; i++)
            ours = p->conns[i] && p->conns[i]->uport == port;
        if (ours || !cmdf || strncmp(cmdf, " cmd=client|list", 16) == 0 ||
            strncmp(cmdf, " cmd=NULL", 9) == 0)
            continue;
        n++;
        size_t k = strcspn(cmdf + 5, " ");
        snprintf(last, cap, "%.*s", (int)(k < 40 ? k : 40), cmdf + 5);
    }
    if (r) freeReplyObject(r);
    if (rc) redisFree(rc);
    return n;
}

/* Why client x sent no lock-key command: the first cause that the proxy or
 * the process table can name, else the wait itself (`waited`). */
static lb__race_verdict silent(lb__race_proxy *p, int x, const char *waited) {
    rclient *c = &p->cl[x];
    char tail[400], last[48];
    if (exited(p, x)) {
        int st = c->seen.status;
        lb__race_tail(c->errpath[0] ? c->errpath : NULL, tail, sizeof tail);
        return not_followed(p, "%c's process %s %d; %s%s", name_of(x),
                            WIFSIGNALED(st) ? "was killed by signal" : "exited with status",
                            WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
                            tail[0] ? "its stderr ends: " : "it wrote nothing on stderr", tail);
    }
    if (c->seen.closed_held[0])
        return not_followed(p, "%c closed its connection while its %s was held at the proxy "
                            "(%.0f ms): a read timeout shorter than the schedule's waits?",
                            name_of(x), c->seen.closed_held, c->seen.held_ms);
    if (c->seen.conns == 0) {
        int n = strays(p, last, sizeof last);
        if (n > 0)
            return not_followed(p, "%c never connected to its port %d, while %d connection(s) "
                                "of no proxy's use the server (last command: %s): a client "
                                "connected straight to the server? ({port} is its port)",
                                name_of(x), c->port, n, last);
        return not_followed(p, "%c never connected to its port %d %s", name_of(x), c->port,
                            waited);
    }
    if (c->seen.lock_cmds == 0 && c->seen.cmds > 0)
        return not_followed(p, "%c sent only commands on other keys than %s (%ld, the last: %s)",
                            name_of(x), p->cfg.key, c->seen.cmds, c->seen.last_other);
    return not_followed(p, "%c sent no command on the lock key %s", name_of(x), waited);
}

/* Lets client x's next lock-key command through and waits for its reply. */
static lb__race_verdict one_command(lb__race_proxy *p, int x, const char *want) {
    double t = (double)p->cfg.step_timeout_ms;
    char waited[64];
    if (!pump(p, now_ms() + t, has_pending_or_exited, x) || !has_pending(p, x)) {
        if (p->failed) return LB__RACE_ERROR;
        snprintf(waited, sizeof waited, "within %lld ms", (long long)p->cfg.step_timeout_ms);
        return silent(p, x, waited);
    }
    conn *c = NULL;
    cmd *m = pending_lock(p, x, &c);
    if (want && !name_matches(m, want))
        return not_followed(p, "%c sent %s, not %s", name_of(x), m->name, want);
    m->granted = 1;
    snprintf(p->last_granted, sizeof p->last_granted, "%s", m->name);
    p->await_seq = m->seq;
    p->await_state = 0;
    if (!pump(p, now_ms() + t, reply_done, x) || p->await_state < 0) {
        if (p->failed) return LB__RACE_ERROR;
        if (p->await_state < 0) return silent(p, x, "");
        return not_followed(p, "%c's %s got no reply to deliver within %lld ms", name_of(x),
                            want ? want : "command", (long long)p->cfg.step_timeout_ms);
    }
    pump(p, now_ms() + t, settled, x);
    return LB__RACE_PASSED;
}

/* Whether another client may still hold the lock, so that x's failing to
 * acquire proves nothing: it holds and is alive (a paused holder releases
 * when it resumes), or it was frozen while it held and its validity may not
 * have run out: counted from the reply to its acquisition, the latest it can
 * start (from the send, a verdict would turn on how long the start-up
 * barrier held the command). */
static int another_may_hold(const lb__race_proxy *p, int x) {
    for (int y = 0; y < p->cfg.nclients; y++) {
        const rclient *c = &p->cl[y];
        int64_t ttl = p->cfg.client_ttl_ms[y] > 0 ? p->cfg.client_ttl_ms[y] : p->cfg.ttl_ms;
        if (y == x) continue;
        if (c->holds && !c->frozen) return 1;
        if (c->crashed_holding && (ttl <= 0 || now_ms() - c->acq_reply_at < (double)ttl))
            return 1;
    }
    return 0;
}

static lb__race_verdict live(lb__race_proxy *p, int x) {
    trace_add(p, "[%c?] %c alone must come to hold the lock within %d commands\n", name_of(x),
              name_of(x), p->cfg.live_steps);
    for (int i = 0; i < p->cfg.live_steps && !holds_validly(p, x); i++) {
        lb__race_verdict v = one_command(p, x, NULL);
        if (v != LB__RACE_PASSED || p->violated) return v;
    }
    if (holds_validly(p, x)) return LB__RACE_PASSED;
    if (p->cfg.search && another_may_hold(p, x)) {
        trace_add(p, "  %c did not acquire, but another client may still hold the lock: "
                  "not judged\n", name_of(x));
        return LB__RACE_PASSED;
    }
    violate(p, "liveness", "%c could not acquire within %d commands on the lock key", name_of(x),
            p->cfg.live_steps);
    return LB__RACE_PASSED;
}

/* A.: A's lock-key commands go through until it holds, or it goes quiet. */
static lb__race_verdict finish(lb__race_proxy *p, int x) {
    for (int i = 0; i < FINISH_STEPS; i++) {
        pump(p, now_ms() + (double)p->cfg.step_timeout_ms, settled, x);
        if (holds_validly(p, x) || !has_pending(p, x)) return LB__RACE_PASSED;
        lb__race_verdict v = one_command(p, x, NULL);
        if (v != LB__RACE_PASSED || p->violated) return v;
    }
    return not_followed(p, "%c's operation did not end within %d commands", name_of(x),
                        FINISH_STEPS);
}

/* A command that tries to acquire: where a release ends. */
static int attempts(const cmd *m) {
    return strcmp(m->name, "SETNX") == 0 || strcmp(m->name, "INCR") == 0 ||
           strcmp(m->name, "GETSET") == 0 || (strcmp(m->name, "SET") == 0 && m->nx);
}

/* A:release: whatever the client's release sends (a DEL; GET then DEL; GET,
 * GET, DEL-if-expired; a script) goes through, up to its next acquisition
 * attempt or until it goes quiet; at least one command, which must not be an
 * attempt. */
static lb__race_verdict release(lb__race_proxy *p, int x) {
    for (int n = 0; n < FINISH_STEPS; n++) {
        if (n > 0) {
            pump(p, now_ms() + (double)p->cfg.step_timeout_ms, settled, x);
            if (!has_pending(p, x)) return LB__RACE_PASSED;
        } else if (!pump(p, now_ms() + (double)p->cfg.step_timeout_ms, has_pending_or_exited, x) ||
                   !has_pending(p, x)) {
            char waited[64];
            if (p->failed) return LB__RACE_ERROR;
            snprintf(waited, sizeof waited, "within %lld ms", (long long)p->cfg.step_timeout_ms);
            return silent(p, x, waited);
        }
        const cmd *m = pending_lock(p, x, NULL);
        if (attempts(m)) {
            if (n > 0) return LB__RACE_PASSED;
            return not_followed(p, "%c sent %s, an acquisition attempt, not a release", name_of(x),
                                m->name);
        }
        lb__race_verdict v = one_command(p, x, NULL);
        if (v != LB__RACE_PASSED || p->violated) return v;
    }
    return not_followed(p, "%c's release did not end within %d commands", name_of(x),
                        FINISH_STEPS);
}

static void crash(lb__race_proxy *p, int x) {
    p->cl[x].frozen = 1;
    p->cl[x].crashed_holding = p->cl[x].holds;
    p->cl[x].holds = 0;
    if (p->cfg.kill_crashed && p->cl[x].pid > 0) {
        kill(-p->cl[x].pid, SIGKILL);
        kill(p->cl[x].pid, SIGKILL);
        trace_add(p, "  %c's process killed\n", name_of(x));
    }
}

static lb__race_verdict run_token(lb__race_proxy *p, const lb__race_tok *k) {
    int x = k->client;
    if (k->kind != LB__RACE_PAUSE && p->cl[x].frozen)
        return not_followed(p, "%c crashed earlier: it takes no more steps", name_of(x));
    switch (k->kind) {
    case LB__RACE_PAUSE: {
        int64_t ms = k->per_mille_t ? k->per_mille_t * p->cfg.t_ms / 1000 : k->ms;
        if (k->per_mille_t) {
            char frac[8];
            snprintf(frac, sizeof frac, ".%03lld", (long long)(k->per_mille_t % 1000));
            for (size_t n = strlen(frac); n > 0 && (frac[n - 1] == '0' || frac[n - 1] == '.');)
                frac[--n] = '\0';
            trace_add(p, "[+%lld%sT] %lld ms: nobody's lock command goes through\n",
                      (long long)(k->per_mille_t / 1000), frac, (long long)ms);
        } else
            trace_add(p, "[+%lld] nobody's lock command goes through\n", (long long)ms);
        pump(p, now_ms() + (double)ms, NULL, 0);
        return p->failed ? LB__RACE_ERROR : LB__RACE_PASSED;
    }
    case LB__RACE_STEP:
        trace_add(p, "[%c%s%s]\n", name_of(x), k->cmd[0] ? ":" : "", k->cmd);
        if (strcmp(k->cmd, "-") == 0) { /* nothing to send: its step only settles */
            pump(p, now_ms() + (double)p->cfg.step_timeout_ms, settled, x);
            return LB__RACE_PASSED;
        }
        if (strcmp(k->cmd, "release") == 0) return release(p, x);
        return one_command(p, x, k->cmd);
    case LB__RACE_CRASH:
        trace_add(p, "[%c!] %c is frozen for good\n", name_of(x), name_of(x));
        crash(p, x);
        return LB__RACE_PASSED;
    case LB__RACE_LIVE: return live(p, x);
    case LB__RACE_FINISH:
        trace_add(p, "[%c.]\n", name_of(x));
        return finish(p, x);
    case LB__RACE_SKEW:
    default:
        return not_followed(p, "%c~N: a real process's clock cannot be moved by the proxy",
                            name_of(x));
    }
}

/* Every client named waits on a lock-key command, or one of them has ended:
 * no use waiting for it. */
static int all_pending(lb__race_proxy *p, int n) {
    int all = 1;
    for (int i = 0; i < n; i++) {
        if (!has_pending(p, i) && exited(p, i)) return 1;
        all &= has_pending(p, i);
    }
    return all;
}

lb__race_verdict lb__race_proxy_run(lb__race_proxy *p, const lb__race_sched *s,
                                    int64_t start_timeout_ms) {
    if (s->clients > p->cfg.nclients)
        return not_followed(p, "the schedule names client %c; only %d ports are open",
                            name_of(s->clients - 1), p->cfg.nclients);
    /* Every client named must be waiting on its first lock-key command before
     * the first step, so that the first steps do not race process start-up. */
    pump(p, now_ms() + (double)start_timeout_ms, all_pending, s->clients);
    for (int i = 0; i < s->clients; i++)
        if (!has_pending(p, i)) {
            char waited[64];
            if (p->failed) return LB__RACE_ERROR;
            snprintf(waited, sizeof waited, "within %lld ms of the start",
                     (long long)start_timeout_ms);
            return silent(p, i, waited);
        }
    for (int i = 0; i < s->n; i++) {
        p->last_granted[0] = '\0';
        lb__race_verdict v = run_token(p, &s->tok[i]);
        memcpy(p->named[i], p->last_granted, sizeof p->named[i]);
        if (v != LB__RACE_PASSED) return v;
        p->followed = i + 1;
        if (p->violated) return LB__RACE_CAUGHT;
    }
    trace_add(p, "  followed to the end (%d tokens)\n", s->n);
    if (p->cfg.counter_key && p->sections == 0)
        trace_add(p, "  note: no critical section seen on %s (no GET of it by a client after "
                  "its lock commands): overlap and lost-update were not checked\n",
                  p->cfg.counter_key);
    return LB__RACE_PASSED;
}

/* A script's name is not on the wire: any script call is recorded as EVAL,
 * which matches any of them when replayed. */
static const char *token_name(const char *name) {
    return strncmp(name, "EVAL", 4) == 0 || strcmp(name, "FCALL") == 0 ? "EVAL" : name;
}

int lb__race_proxy_record(lb__race_proxy *p, int x, int steps, int64_t start_timeout_ms,
                          char *out, size_t cap) {
    size_t o = 0;
    out[0] = '\0';
    if (!pump(p, now_ms() + (double)start_timeout_ms, has_pending_or_exited, x) ||
        !has_pending(p, x)) {
        char waited[64];
        if (p->failed) return -1;
        snprintf(waited, sizeof waited, "within %lld ms of the start",
                 (long long)start_timeout_ms);
        silent(p, x, waited);
        return -1;
    }
    int n = 0;
    for (; n < steps; n++) {
        if (one_command(p, x, NULL) != LB__RACE_PASSED) break;
        int w = snprintf(out + o, cap - o, "%s%c:%s", n ? " " : "", name_of(x),
                         token_name(p->last_granted));
        if (w < 0 || (size_t)w >= cap - o) break;
        o += (size_t)w;
    }
    if (p->failed) return -1;
    /* A client that went quiet before `steps` ended its sequence: that is
     * what it does alone, not a fault. */
    p->detail[0] = '\0';
    return n;
}

/* ---- Life cycle ------------------------------------------------------------------------- */

lb__race_proxy *lb__race_proxy_new(const lb__race_config *cfg, int *ports, char *err,
                                   size_t cap) {
    lb__race_proxy *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    p->cfg = *cfg;
    p->owner = -1;
    for (int i = 0; i < cfg->nclients; i++) p->cl[i].listen_fd = -1;
    for (int i = 0; i < cfg->nclients; i++) {
        p->cl[i].listen_fd = lb__loopback_bind(cfg->port_lo, cfg->port_hi, 1, &p->cl[i].port);
        if (p->cl[i].listen_fd >= 0) set_nonblock(p->cl[i].listen_fd);
        if (p->cl[i].listen_fd < 0) {
            if (cfg->port_lo > 0)
                snprintf(err, cap, "no free loopback port in %d-%d for client %c", cfg->port_lo,
                         cfg->port_hi, name_of(i));
            else
                snprintf(err, cap, "cannot listen on a loopback port: %s", strerror(errno));
            lb__race_proxy_free(p);
            return NULL;
        }
        ports[i] = p->cl[i].port;
    }
    return p;
}

void lb__race_proxy_reset(lb__race_proxy *p) {
    p->resetting = 1;
    for (int i = 0; i < MAX_CONNS; i++) conn_close(p, i);
    p->resetting = 0;
    /* Connections still queued are kept: an outside client may have
     * connected as soon as the ports were printed; a dead client's queued
     * connection is accepted and then closed at its end of file. */
    for (int i = 0; i < p->cfg.nclients; i++) {
        int l = p->cl[i].listen_fd, port = p->cl[i].port;
        memset(&p->cl[i], 0, sizeof p->cl[i]);
        p->cl[i].listen_fd = l;
        p->cl[i].port = port;
    }
    p->owner = -1;
    p->keyvallen = 0;
    p->counter_version = p->await_seq = 0;
    p->await_state = 0;
    p->trace[0] = p->detail[0] = p->kind[0] = '\0';
    p->tracelen = 0;
    p->violated = p->followed = p->failed = p->sections = 0;
    memset(p->named, 0, sizeof p->named);
}

void lb__race_proxy_free(lb__race_proxy *p) {
    if (!p) return;
    p->resetting = 1;
    for (int i = 0; i < MAX_CONNS; i++) conn_close(p, i);
    for (int i = 0; i < p->cfg.nclients; i++)
        if (p->cl[i].listen_fd >= 0) close(p->cl[i].listen_fd);
    free(p);
}

void lb__race_proxy_set_pid(lb__race_proxy *p, int client, pid_t pid, const char *errpath) {
    if (client < 0 || client >= p->cfg.nclients) return;
    p->cl[client].pid = pid;
    snprintf(p->cl[client].errpath, sizeof p->cl[client].errpath, "%s", errpath ? errpath : "");
}

const char *lb__race_proxy_trace(const lb__race_proxy *p) { return p->trace; }
const char *lb__race_proxy_detail(const lb__race_proxy *p) { return p->detail; }
const char *lb__race_proxy_kind(const lb__race_proxy *p) { return p->kind; }
int lb__race_proxy_followed(const lb__race_proxy *p) { return p->followed; }
const char *lb__race_proxy_named(const lb__race_proxy *p, int i) {
    return i >= 0 && i < LB__RACE_MAX_TOKENS ? p->named[i] : "";
}
int lb__race_proxy_sections(const lb__race_proxy *p) { return p->sections; }
